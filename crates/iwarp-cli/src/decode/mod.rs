//! `iwarp decode`: a capture decoder for iWARP traffic.
//!
//! It reads a pcap or pcapng capture and prints what each TCP connection
//! carried, layer by layer, the way network engineers use `tshark`: the
//! MPA startup frames (or IFT Adaption Indications), then every FPDU with
//! its CRC and markers, its DDP header and its RDMAP message, one line each
//! (`-v`: every field; `--json`: one JSON object per line), and a summary.
//! It exists to debug interoperability with Linux `siw` and hardware RNICs
//! without Wireshark's iWARP dissector, and it reads the wire with the
//! stack's own parsers and deframers from `iwarp-proto`, so what it shows
//! is what the stack sees.
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`args`] | the command line |
//! | [`capture`] | reading pcap and pcapng files |
//! | [`packet`] | link layer, IPv4/IPv6 and TCP headers of a frame |
//! | [`tcp`] | reassembly of one direction in sequence order |
//! | [`connection`] | a connection's two directions, their startups settled |
//! | [`stream`] | one direction: its opening, then its PDUs |
//! | [`startup`] | MPA frames and IFT indications, described and settled |
//! | [`mpa`] | MPA FPDUs, CRC errors survived, markers to resynchronise |
//! | [`ift`] | IFT frames |
//! | [`ulpdu`] | a ULPDU read as DDP and RDMAP |
//! | [`event`] | what is reported |
//! | [`format`](mod@format) | text and JSON output |
//! | [`summary`] | the closing counts |
//!
//! Nothing a capture holds can make it panic: every length is checked by
//! the parsers, and the decoder's own arithmetic on offsets is checked or
//! saturating.

pub mod args;
pub mod capture;
pub mod connection;
pub mod event;
pub mod format;
pub mod ift;
pub mod mpa;
pub mod packet;
pub mod startup;
pub mod stream;
pub mod summary;
pub mod tcp;
pub mod ulpdu;

use std::collections::HashMap;
use std::io::{self, BufWriter};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use args::{DecodeArgs, MarkerMode};
use capture::{CaptureReader, Frame};
use connection::{Connection, Kind};
use event::{Event, Record};
use format::{Json, Output, Text};
use packet::Skip;
use summary::{ConnectionSummary, Summary, Tally};

/// How to decode, from the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Only connections with one of these ports (all if empty); they are
    /// decoded even without a captured startup.
    pub ports: Vec<u16>,
    /// Check CRCs.
    pub check_crc: bool,
    /// Markers: as negotiated, or forced on or off.
    pub markers: MarkerMode,
    /// Where FPDUs start when no startup was seen.
    pub stream_offset: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            ports: Vec::new(),
            check_crc: true,
            markers: MarkerMode::Auto,
            stream_offset: 0,
        }
    }
}

/// Feeds frames through connections to an [`Output`].
pub struct Decoder<'o> {
    opts: Options,
    out: &'o mut dyn Output,
    connections: Vec<Connection>,
    /// Whether each connection has been finished.
    finished: Vec<bool>,
    /// (source, destination) to index in `connections`, both ways.
    by_ends: HashMap<(SocketAddr, SocketAddr), usize>,
    first: Option<Duration>,
    /// The frame being decoded: number and time since the first.
    now: (u64, f64),
    summary: Summary,
    tally: Tally,
}

impl std::fmt::Debug for Decoder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder")
            .field("opts", &self.opts)
            .field("connections", &self.connections.len())
            .finish_non_exhaustive()
    }
}

impl<'o> Decoder<'o> {
    /// A decoder writing to `out`.
    pub fn new(opts: Options, out: &'o mut dyn Output) -> Self {
        Self {
            opts,
            out,
            connections: Vec::new(),
            finished: Vec::new(),
            by_ends: HashMap::new(),
            first: None,
            now: (0, 0.0),
            summary: Summary::default(),
            tally: Tally::default(),
        }
    }

    /// Decodes one captured frame.
    pub fn frame(&mut self, frame: &Frame) -> io::Result<()> {
        self.summary.frames += 1;
        let first = *self.first.get_or_insert(frame.timestamp);
        let since = frame.timestamp.saturating_sub(first).as_secs_f64();
        self.now = (frame.number, since);
        let seg = match packet::parse(frame.link, &frame.data) {
            Ok(seg) => seg,
            Err(skip) => {
                let reason = match skip {
                    Skip::UnsupportedLink => "of an unsupported link type",
                    Skip::NotIp => "not IP",
                    Skip::NotTcp => "not TCP",
                    Skip::Fragment => "IP fragments",
                };
                *self.summary.skipped.entry(reason).or_default() += 1;
                return Ok(());
            }
        };
        self.summary.tcp_segments += 1;
        let ports = &self.opts.ports;
        let named = ports.contains(&seg.src.port()) || ports.contains(&seg.dst.port());
        if !ports.is_empty() && !named {
            *self.summary.skipped.entry("on other ports").or_default() += 1;
            return Ok(());
        }
        let pure_syn = seg.syn && seg.ack.is_none();
        let existing = self.by_ends.get(&(seg.src, seg.dst)).copied();
        // A SYN that is not a retransmission of the one seen, on ends that
        // already carried a connection: a new connection.
        let reused = existing.filter(|&i| {
            let c = &self.connections[i];
            !(pure_syn && c.client_isn != Some(seg.seq) && (c.client_isn.is_some() || c.has_data()))
        });
        let index = match reused {
            Some(i) => i,
            None => {
                if let Some(old) = existing {
                    self.finish_connection(old)?;
                }
                // A SYN-ACK's receiver is the client.
                let (client, server) = if seg.syn && seg.ack.is_some() {
                    (seg.dst, seg.src)
                } else {
                    (seg.src, seg.dst)
                };
                let i = self.connections.len();
                self.connections
                    .push(Connection::new(i + 1, client, server, named));
                self.finished.push(false);
                self.by_ends.insert((client, server), i);
                self.by_ends.insert((server, client), i);
                i
            }
        };
        let conn = &mut self.connections[index];
        if conn.kind() == Kind::NotIwarp {
            return Ok(());
        }
        let dir = conn.direction(seg.src);
        if pure_syn {
            conn.client_isn = Some(seg.seq);
        }
        let mut events = Vec::new();
        conn.segment(
            dir,
            seg.seq,
            seg.syn,
            seg.ack,
            seg.fin,
            seg.rst,
            seg.payload,
            &self.opts,
            &mut events,
        );
        self.emit(index, events)
    }

    /// Finishes connection `index` (the capture ended, or its ends were
    /// reused) unless it was already.
    fn finish_connection(&mut self, index: usize) -> io::Result<()> {
        if self.finished.get(index).copied().unwrap_or(true) {
            return Ok(());
        }
        self.finished[index] = true;
        let mut events = Vec::new();
        self.connections[index].finish(&self.opts, &mut events);
        self.emit(index, events)
    }

    /// Writes a connection's events as records.
    fn emit(&mut self, index: usize, events: Vec<(usize, Event)>) -> io::Result<()> {
        let conn = &self.connections[index];
        for (dir, event) in events {
            let dir = dir % 2;
            self.tally.observe(conn.id, dir, &event);
            let record = Record {
                frame: self.now.0,
                time: self.now.1,
                connection: conn.id,
                src: conn.ends[dir],
                dst: conn.ends[1 - dir],
                event,
            };
            self.out.record(&record)?;
        }
        Ok(())
    }

    /// The end of the capture: finishes every connection and writes the
    /// summary. `capture_error` says why the capture ended early, if it
    /// did.
    pub fn finish(mut self, capture_error: Option<String>) -> io::Result<Summary> {
        // What is found now belongs to no frame.
        self.now.0 = 0;
        for index in 0..self.connections.len() {
            self.finish_connection(index)?;
        }
        let mut summary = std::mem::take(&mut self.summary);
        summary.capture_error = capture_error;
        summary.pdus = std::mem::take(&mut self.tally.pdus);
        summary.errors = std::mem::take(&mut self.tally.errors);
        for conn in &self.connections {
            match conn.kind() {
                Kind::NotIwarp | Kind::Undecided => summary.not_decoded += 1,
                Kind::Mpa | Kind::Ift | Kind::Assumed => {
                    let mut directions = self.tally.directions.remove(&conn.id).unwrap_or_default();
                    for (dir, d) in directions.iter_mut().enumerate() {
                        d.src = Some(conn.ends[dir]);
                        d.dst = Some(conn.ends[1 - dir]);
                        d.tcp = conn.stats(dir);
                    }
                    summary.connections.push(ConnectionSummary {
                        id: conn.id,
                        client: conn.ends[0],
                        server: conn.ends[1],
                        framing: if conn.framing().is_empty() {
                            "startup not settled".into()
                        } else {
                            conn.framing().to_string()
                        },
                        directions,
                    });
                }
            }
        }
        self.out.summary(&summary)?;
        Ok(summary)
    }
}

/// Decodes every frame `reader` gives, writing to `out`.
pub fn decode(
    mut reader: CaptureReader,
    opts: Options,
    out: &mut dyn Output,
) -> io::Result<Summary> {
    let mut decoder = Decoder::new(opts, out);
    let mut capture_error = None;
    while let Some(next) = reader.next_frame() {
        match next {
            Ok(frame) => decoder.frame(&frame)?,
            Err(e) => {
                capture_error = Some(format!(
                    "unreadable after frame {}: {e}",
                    reader.frames_read()
                ));
            }
        }
    }
    decoder.finish(capture_error)
}

/// Runs `iwarp decode` and turns the outcome into an exit code: 0 when the
/// capture was read (whatever errors the traffic holds), 1 when it could
/// not be.
pub fn run(args: DecodeArgs) -> ExitCode {
    let reader = match CaptureReader::open(&args.file) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("iwarp decode: {}: {e}", args.file.display());
            return ExitCode::FAILURE;
        }
    };
    let stdout = io::stdout();
    let mut w = BufWriter::new(stdout.lock());
    let opts = args.options();
    let result = if args.json {
        decode(reader, opts, &mut Json::new(&mut w))
    } else {
        decode(reader, opts, &mut Text::new(&mut w, args.verbose))
    };
    match result {
        Ok(summary) => {
            if let Some(e) = summary.capture_error {
                eprintln!("iwarp decode: warning: {}: {e}", args.file.display());
            }
            ExitCode::SUCCESS
        }
        // The reader went away (`| head`): not a failure of ours.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("iwarp decode: cannot write the output: {e}");
            ExitCode::FAILURE
        }
    }
}
