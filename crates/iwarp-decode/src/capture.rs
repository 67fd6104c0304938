//! Reading capture files: pcap and pcapng, from a file or standard input.
//!
//! The format is recognised by its first four octets, so the file name does
//! not matter. The records are read one at a time with the `pcap-file`
//! crate, never the whole file at once: captures of RDMA traffic are large.
//! Each record comes out as a [`Frame`]: its number (1-based, as Wireshark
//! counts), its timestamp, its link type and its captured octets.
//!
//! A damaged or cut-short file is not a reason to lose what came before the
//! damage: [`CaptureReader::next_frame`] reports the problem once and then
//! ends, and the caller decodes what it has (a capture cut off by the
//! capturing tool being killed is common).

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgReader};

/// The link layer a frame starts with, by its LINKTYPE number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkType {
    /// 1: Ethernet II (with or without VLAN tags).
    Ethernet,
    /// 113: Linux "cooked" capture (`tcpdump -i any`), version 1.
    LinuxSll,
    /// 276: Linux "cooked" capture, version 2.
    LinuxSll2,
    /// 101 (and the platform DLT values 12 and 14): raw IPv4 or IPv6.
    Raw,
    /// 228: raw IPv4.
    Ipv4,
    /// 229: raw IPv6.
    Ipv6,
    /// 0: BSD loopback, a 4-octet address family in host order.
    Null,
    /// 108: OpenBSD loopback, a 4-octet address family in network order.
    Loop,
    /// Anything else: its frames are skipped.
    Other(u32),
}

impl LinkType {
    /// The link type for a LINKTYPE number.
    pub fn from_number(n: u32) -> Self {
        match n {
            0 => Self::Null,
            1 => Self::Ethernet,
            12 | 14 | 101 => Self::Raw,
            108 => Self::Loop,
            113 => Self::LinuxSll,
            228 => Self::Ipv4,
            229 => Self::Ipv6,
            276 => Self::LinuxSll2,
            other => Self::Other(other),
        }
    }
}

/// Which container the capture is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// The classic libpcap format.
    Pcap,
    /// pcapng.
    PcapNg,
}

/// One captured record, its octets borrowed from the reader's buffer
/// where it can (no copy per frame).
#[derive(Debug, Clone)]
pub struct Frame<'a> {
    /// Its position in the file, from 1.
    pub number: u64,
    /// When it was captured, since the Unix epoch.
    pub timestamp: Duration,
    /// What its octets start with.
    pub link: LinkType,
    /// The captured octets (possibly fewer than were on the wire).
    pub data: Cow<'a, [u8]>,
}

/// Why a capture cannot be read (or cannot be read further).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaptureError {
    /// The file could not be opened or read.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The first octets are neither a pcap nor a pcapng magic number.
    #[error("not a pcap or pcapng capture (it starts {0:02x?})")]
    UnknownFormat(Vec<u8>),
    /// The file ends in the middle of a record (a capture cut short by
    /// killing the capturing tool).
    #[error("the file ends in the middle of a record (cut short?)")]
    CutShort,
    /// The `pcap-file` crate refused the file's header or a record.
    #[error(transparent)]
    Malformed(pcap_file::PcapError),
}

/// pcapng's Section Header Block type, the first four octets of the file.
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

/// What one pcapng interface says about the packets captured on it.
#[derive(Debug, Clone, Copy)]
struct Interface {
    link: LinkType,
    /// Timestamp units per second (`if_tsresol`; the default is 10^6).
    units_per_second: Option<u64>,
}

enum Inner {
    Pcap {
        reader: PcapReader<Box<dyn Read>>,
        link: LinkType,
    },
    PcapNg {
        reader: PcapNgReader<Box<dyn Read>>,
        /// The interfaces of the current section, in order of appearance.
        interfaces: Vec<Interface>,
        /// The last timestamp seen: a Simple Packet Block has none.
        last: Duration,
    },
}

/// Reads the frames of a pcap or pcapng capture in order.
pub struct CaptureReader {
    inner: Inner,
    format: Format,
    number: u64,
    done: bool,
}

impl std::fmt::Debug for CaptureReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureReader")
            .field("format", &self.format)
            .field("number", &self.number)
            .finish_non_exhaustive()
    }
}

impl CaptureReader {
    /// Opens the capture at `path`; `-` reads standard input.
    pub fn open(path: &Path) -> Result<Self, CaptureError> {
        if path.as_os_str() == "-" {
            return Self::new(Box::new(io::stdin()));
        }
        // The crate buffers its reads itself: a BufReader would only copy.
        let file = File::open(path)?;
        Self::new(Box::new(file))
    }

    /// Reads a capture from `source`, recognising its format by its first
    /// four octets.
    pub fn new(mut source: Box<dyn Read>) -> Result<Self, CaptureError> {
        let mut magic = Vec::with_capacity(4);
        (&mut source).take(4).read_to_end(&mut magic)?;
        // Put the magic back in front, so the crate reads the whole header.
        let source: Box<dyn Read> = Box::new(io::Cursor::new(magic.clone()).chain(source));
        let malformed = malformed;
        let (inner, format) = if magic[..] == PCAPNG_MAGIC {
            let reader = PcapNgReader::new(source).map_err(malformed)?;
            let inner = Inner::PcapNg {
                reader,
                interfaces: Vec::new(),
                last: Duration::ZERO,
            };
            (inner, Format::PcapNg)
        } else if is_pcap_magic(&magic) {
            let reader = PcapReader::new(source).map_err(malformed)?;
            let link = LinkType::from_number(u32::from(reader.header().datalink));
            (Inner::Pcap { reader, link }, Format::Pcap)
        } else {
            return Err(CaptureError::UnknownFormat(magic));
        };
        Ok(Self {
            inner,
            format,
            number: 0,
            done: false,
        })
    }

    /// The container format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The next frame; `None` at the end. After an error, which is
    /// returned once, the reader ends: the crate does not skip a bad
    /// record, so there is no reliable way past it.
    pub fn next_frame(&mut self) -> Option<Result<Frame<'_>, CaptureError>> {
        if self.done {
            return None;
        }
        let next = match &mut self.inner {
            Inner::Pcap { reader, link } => match reader.next_packet()? {
                Ok(packet) => Ok((packet.timestamp, *link, packet.data)),
                Err(e) => Err(malformed(e)),
            },
            Inner::PcapNg {
                reader,
                interfaces,
                last,
            } => next_pcapng_packet(reader, interfaces, last)?,
        };
        match next {
            Ok((timestamp, link, data)) => {
                self.number += 1;
                Some(Ok(Frame {
                    number: self.number,
                    timestamp,
                    link,
                    data,
                }))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }

    /// Frames returned so far.
    pub fn frames_read(&self) -> u64 {
        self.number
    }
}

/// The crate's error in words; a file that simply stops (a capture cut
/// short by killing the capturing tool) says so.
fn malformed(e: pcap_file::PcapError) -> CaptureError {
    match e {
        pcap_file::PcapError::IoError(io) if io.kind() == io::ErrorKind::UnexpectedEof => {
            CaptureError::CutShort
        }
        pcap_file::PcapError::IncompleteBuffer => CaptureError::CutShort,
        other => CaptureError::Malformed(other),
    }
}

fn is_pcap_magic(magic: &[u8]) -> bool {
    // Microsecond and nanosecond variants, in either byte order.
    matches!(
        magic,
        [0xa1, 0xb2, 0xc3, 0xd4]
            | [0xd4, 0xc3, 0xb2, 0xa1]
            | [0xa1, 0xb2, 0x3c, 0x4d]
            | [0x4d, 0x3c, 0xb2, 0xa1]
    )
}

type Packet<'a> = (Duration, LinkType, Cow<'a, [u8]>);

/// Reads pcapng blocks up to the next packet, keeping track of the
/// interfaces (a new section forgets the previous section's).
fn next_pcapng_packet(
    reader: &mut PcapNgReader<Box<dyn Read>>,
    interfaces: &mut Vec<Interface>,
    last: &mut Duration,
) -> Option<Result<Packet<'static>, CaptureError>> {
    // The packet is copied out of the reader here: a borrow returned from
    // inside this loop over blocks would outlive the loop's own borrows.
    // Captures tools write by default (tcpdump) are pcap, which is not
    // copied.
    loop {
        let block = match reader.next_block()? {
            Ok(block) => block,
            Err(e) => return Some(Err(malformed(e))),
        };
        match block {
            Block::SectionHeader(_) => interfaces.clear(),
            Block::InterfaceDescription(idb) => {
                let tsresol = idb.options.iter().find_map(|o| match o {
                    InterfaceDescriptionOption::IfTsResol(r) => Some(*r),
                    _ => None,
                });
                interfaces.push(Interface {
                    link: LinkType::from_number(u32::from(idb.linktype)),
                    units_per_second: units_per_second(tsresol.unwrap_or(6)),
                });
            }
            Block::EnhancedPacket(epb) => {
                let iface = usize::try_from(epb.interface_id)
                    .ok()
                    .and_then(|i| interfaces.get(i));
                let link = iface.map_or(LinkType::Other(u32::MAX), |i| i.link);
                // pcap-file 2 stores the raw timestamp units as nanoseconds,
                // whatever the interface's resolution: convert them here.
                let raw = u64::try_from(epb.timestamp.as_nanos()).unwrap_or(u64::MAX);
                *last = scale(raw, iface.and_then(|i| i.units_per_second));
                return Some(Ok((*last, link, Cow::Owned(epb.data.into_owned()))));
            }
            Block::SimplePacket(spb) => {
                let link = interfaces
                    .first()
                    .map_or(LinkType::Other(u32::MAX), |i| i.link);
                return Some(Ok((*last, link, Cow::Owned(spb.data.into_owned()))));
            }
            Block::Packet(pb) => {
                let iface = interfaces.get(usize::from(pb.interface_id));
                let link = iface.map_or(LinkType::Other(u32::MAX), |i| i.link);
                *last = scale(pb.timestamp, iface.and_then(|i| i.units_per_second));
                return Some(Ok((*last, link, Cow::Owned(pb.data.into_owned()))));
            }
            _ => {}
        }
    }
}

/// Units per second for an `if_tsresol` octet: 10^n, or 2^n with the top
/// bit set; `None` if that does not fit 64 bits.
fn units_per_second(tsresol: u8) -> Option<u64> {
    let n = u32::from(tsresol & 0x7f);
    if tsresol & 0x80 == 0 {
        10u64.checked_pow(n)
    } else {
        2u64.checked_pow(n)
    }
}

/// A raw pcapng timestamp in `units` per second as a duration (zero when
/// the resolution is unusable).
fn scale(raw: u64, units: Option<u64>) -> Duration {
    let Some(units) = units.filter(|&u| u > 0) else {
        return Duration::ZERO;
    };
    let secs = raw / units;
    let frac = u128::from(raw % units) * 1_000_000_000 / u128::from(units);
    Duration::new(secs, u32::try_from(frac).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_resolutions() {
        assert_eq!(units_per_second(6), Some(1_000_000));
        assert_eq!(units_per_second(9), Some(1_000_000_000));
        assert_eq!(units_per_second(0x80 | 10), Some(1024));
        assert_eq!(units_per_second(100), None);
        assert_eq!(
            scale(1_500_000, Some(1_000_000)),
            Duration::from_millis(1500)
        );
        assert_eq!(scale(3, Some(2)), Duration::from_millis(1500));
        assert_eq!(scale(5, None), Duration::ZERO);
    }

    #[test]
    fn unknown_magic_is_refused() {
        let r = CaptureReader::new(Box::new(io::Cursor::new(b"hello world".to_vec())));
        assert!(matches!(r, Err(CaptureError::UnknownFormat(_))));
        let r = CaptureReader::new(Box::new(io::Cursor::new(Vec::new())));
        assert!(matches!(r, Err(CaptureError::UnknownFormat(_))));
    }
}
