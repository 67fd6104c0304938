//! Captures of made-up TCP traffic, for tests and examples: Ethernet, IPv4
//! and TCP headers (through `etherparse`'s packet builder) around the
//! payloads the caller chooses, written as pcap or pcapng with `pcap-file`.
//! Sequence numbers, acknowledgments (a FIN counts one), retransmissions,
//! reordering and octets lost from the capture are the caller's to choose,
//! so every TCP situation the decoder must survive can be built in a few
//! lines and kept as code rather than as capture files.

use std::borrow::Cow;
use std::time::Duration;

use etherparse::PacketBuilder;
use pcap_file::pcap::{PcapPacket, PcapWriter};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;

/// Direction 0: client to server; 1: server to client.
pub const C2S: usize = 0;
/// Server to client.
pub const S2C: usize = 1;

/// A TCP connection between 10.0.0.1 (client) and 10.0.0.2 (server),
/// and the frames it produced.
pub struct Tcp {
    ports: [u16; 2],
    isn: [u32; 2],
    /// Octets sent so far (the next relative sequence number).
    sent: [u32; 2],
    /// Whether each direction has sent its FIN (which takes one
    /// sequence number: the other end's acknowledgments count it).
    fin_sent: [bool; 2],
    frames: Vec<(Duration, Vec<u8>)>,
    time: Duration,
}

impl Tcp {
    /// A connection from client port `cport` to server port `sport`,
    /// with initial sequence numbers chosen to wrap soon on the server.
    pub fn new(cport: u16, sport: u16) -> Self {
        Self {
            ports: [cport, sport],
            isn: [1_000_000, u32::MAX - 100],
            sent: [0, 0],
            fin_sent: [false, false],
            frames: Vec::new(),
            time: Duration::from_secs(1_700_000_000),
        }
    }

    /// The sequence number of relative octet `rel` of direction `dir`.
    pub fn seq(&self, dir: usize, rel: u32) -> u32 {
        self.isn[dir].wrapping_add(1).wrapping_add(rel)
    }

    /// The acknowledgment number `dir` sends: all the other
    /// direction sent, its FIN included.
    fn ack_number(&self, dir: usize) -> u32 {
        let other = 1 - dir;
        self.seq(other, self.sent[other])
            .wrapping_add(u32::from(self.fin_sent[other]))
    }

    fn frame(&mut self, dir: usize, seq: u32, syn: bool, ack: bool, fin: bool, payload: &[u8]) {
        self.frame_flags(dir, seq, syn, ack, fin, false, payload);
    }

    #[allow(clippy::too_many_arguments)]
    fn frame_flags(
        &mut self,
        dir: usize,
        seq: u32,
        syn: bool,
        ack: bool,
        fin: bool,
        rst: bool,
        payload: &[u8],
    ) {
        let ip = [[10, 0, 0, 1], [10, 0, 0, 2]];
        let mac = [[2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]];
        let other = 1 - dir;
        let mut b = PacketBuilder::ethernet2(mac[dir], mac[other])
            .ipv4(ip[dir], ip[other], 64)
            .tcp(self.ports[dir], self.ports[other], seq, 65535);
        if syn {
            b = b.syn();
        }
        if ack {
            b = b.ack(self.ack_number(dir));
        }
        if fin {
            b = b.fin();
        }
        if rst {
            b = b.rst();
        }
        if !payload.is_empty() {
            b = b.psh();
        }
        let mut out = Vec::new();
        b.write(&mut out, payload).expect("packet");
        self.time += Duration::from_micros(100);
        self.frames.push((self.time, out));
    }

    /// SYN, SYN-ACK, ACK.
    pub fn handshake(&mut self) {
        self.frame(C2S, self.isn[C2S], true, false, false, &[]);
        self.frame(S2C, self.isn[S2C], true, true, false, &[]);
        self.frame(C2S, self.seq(C2S, 0), false, true, false, &[]);
    }

    /// A new connection on the same ends: new initial sequence numbers,
    /// then SYN, SYN-ACK, ACK.
    pub fn reconnect(&mut self) {
        self.isn = [
            self.isn[0].wrapping_add(50_000),
            self.isn[1].wrapping_add(70_000),
        ];
        self.sent = [0, 0];
        self.fin_sent = [false, false];
        self.handshake();
    }

    /// One segment carrying `payload`, next in `dir`.
    pub fn send(&mut self, dir: usize, payload: &[u8]) {
        let seq = self.seq(dir, self.sent[dir]);
        self.sent[dir] += payload.len() as u32;
        self.frame(dir, seq, false, true, false, payload);
    }

    /// `payload` in segments cut at the given offsets.
    pub fn send_split(&mut self, dir: usize, payload: &[u8], cuts: &[usize]) {
        let mut start = 0;
        for &cut in cuts.iter().chain(std::iter::once(&payload.len())) {
            self.send(dir, &payload[start..cut]);
            start = cut;
        }
    }

    /// A segment at relative offset `rel` of `dir`, whatever was sent
    /// (a retransmission, or a segment ahead of the others).
    pub fn send_at(&mut self, dir: usize, rel: u32, payload: &[u8]) {
        let seq = self.seq(dir, rel);
        self.frame(dir, seq, false, true, false, payload);
    }

    /// Counts `n` octets as sent in `dir` without capturing them.
    pub fn lose(&mut self, dir: usize, n: u32) {
        self.sent[dir] += n;
    }

    /// Octets sent so far in `dir`.
    pub fn sent(&self, dir: usize) -> u32 {
        self.sent[dir]
    }

    /// A bare acknowledgment from `dir`.
    pub fn ack(&mut self, dir: usize) {
        let seq = self.seq(dir, self.sent[dir]);
        self.frame(dir, seq, false, true, false, &[]);
    }

    /// FIN from `dir`.
    pub fn fin(&mut self, dir: usize) {
        self.fin_with(dir, &[]);
    }

    /// FIN from `dir` on a segment that also carries `payload`.
    pub fn fin_with(&mut self, dir: usize, payload: &[u8]) {
        let seq = self.seq(dir, self.sent[dir]);
        self.sent[dir] += payload.len() as u32;
        self.frame(dir, seq, false, true, true, payload);
        self.fin_sent[dir] = true;
    }

    /// The FIN from `dir` again (a retransmission), at its own
    /// sequence number.
    pub fn fin_again(&mut self, dir: usize) {
        let seq = self.seq(dir, self.sent[dir]);
        self.frame(dir, seq, false, true, true, &[]);
    }

    /// RST (with ACK) from `dir`.
    pub fn rst(&mut self, dir: usize) {
        let seq = self.seq(dir, self.sent[dir]);
        self.frame_flags(dir, seq, false, true, false, true, &[]);
    }

    /// Decodes the frames with `opts`: every record, then the summary.
    pub fn decode(&self, opts: crate::Options) -> (Vec<crate::Record>, crate::Summary) {
        let capture = std::io::Cursor::new(self.pcap());
        let mut reader = crate::CaptureReader::new(Box::new(capture)).expect("pcap");
        let mut d = crate::Decoder::new(opts);
        let mut records = Vec::new();
        while let Some(frame) = reader.next_frame() {
            records.extend(d.frame(&frame.expect("frame")));
        }
        let (rest, summary) = d.finish();
        records.extend(rest);
        (records, summary)
    }

    /// The frames, as a pcap file (microsecond timestamps).
    pub fn pcap(&self) -> Vec<u8> {
        let mut w = PcapWriter::new(Vec::new()).expect("pcap header");
        for (t, data) in &self.frames {
            w.write_packet(&PcapPacket::new(*t, data.len() as u32, data))
                .expect("pcap record");
        }
        w.into_writer()
    }

    /// The frames, as a pcapng file (one Ethernet interface,
    /// nanosecond timestamps).
    pub fn pcapng(&self) -> Vec<u8> {
        let mut w = PcapNgWriter::new(Vec::new()).expect("pcapng header");
        w.write_pcapng_block(InterfaceDescriptionBlock {
            linktype: DataLink::ETHERNET,
            snaplen: 0xffff,
            options: vec![InterfaceDescriptionOption::IfTsResol(9)],
        })
        .expect("interface");
        for (t, data) in &self.frames {
            w.write_pcapng_block(EnhancedPacketBlock {
                interface_id: 0,
                // With if_tsresol 9 the raw units are nanoseconds.
                timestamp: *t,
                original_len: data.len() as u32,
                data: Cow::Borrowed(data),
                options: vec![],
            })
            .expect("packet");
        }
        w.into_inner()
    }
}

/// Frames ULPDUs as MPA FPDUs with the stack's own transmitter, keeping the
/// stream offset (for markers).
#[derive(Debug)]
pub struct Framer {
    tx: iwarp_proto::mpa::FpduTransmitter,
}

impl Framer {
    /// A transmitter with CRC and markers on or off.
    pub fn new(crc: bool, markers: bool) -> Self {
        Self {
            tx: iwarp_proto::mpa::FpduTransmitter::new(iwarp_proto::mpa::FramingParams {
                crc,
                send_markers: markers,
                receive_markers: false,
            }),
        }
    }

    /// The FPDU carrying `ulpdu`.
    ///
    /// # Panics
    ///
    /// If `ulpdu` is longer than an FPDU holds.
    pub fn fpdu(&mut self, ulpdu: &[u8]) -> Vec<u8> {
        use iwarp_proto::framing::Framer as _;
        let mut batch = iwarp_proto::framing::WireBatch::new();
        self.tx.frame(&[], &[ulpdu], &mut batch).expect("frame");
        let mut out = Vec::new();
        batch.write_to(&[ulpdu], &mut out);
        out
    }
}

/// An untagged ULPDU: DDP control, RDMAP control with `opcode`, the
/// RsvdULP word (Invalidate STag), QN, MSN, MO, payload.
pub fn untagged(
    last: bool,
    opcode: u8,
    word: u32,
    qn: u32,
    msn: u32,
    mo: u32,
    payload: &[u8],
) -> Vec<u8> {
    let mut u = vec![if last { 0x41 } else { 0x01 }, 0x40 | opcode];
    for v in [word, qn, msn, mo] {
        u.extend_from_slice(&v.to_be_bytes());
    }
    u.extend_from_slice(payload);
    u
}

/// A tagged ULPDU: DDP control, RDMAP control with `opcode`, STag, TO,
/// payload.
pub fn tagged(last: bool, opcode: u8, stag: u32, to: u64, payload: &[u8]) -> Vec<u8> {
    let mut u = vec![if last { 0xc1 } else { 0x81 }, 0x40 | opcode];
    u.extend_from_slice(&stag.to_be_bytes());
    u.extend_from_slice(&to.to_be_bytes());
    u.extend_from_slice(payload);
    u
}

/// A Read Request's 28 octets.
pub fn read_request(
    sink_stag: u32,
    sink_to: u64,
    size: u32,
    source_stag: u32,
    source_to: u64,
) -> Vec<u8> {
    let mut rr = Vec::with_capacity(28);
    rr.extend_from_slice(&sink_stag.to_be_bytes());
    rr.extend_from_slice(&sink_to.to_be_bytes());
    rr.extend_from_slice(&size.to_be_bytes());
    rr.extend_from_slice(&source_stag.to_be_bytes());
    rr.extend_from_slice(&source_to.to_be_bytes());
    rr
}
