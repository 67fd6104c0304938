//! Collecting one startup frame from the stream, chunk by chunk.
//!
//! The reader takes octets only up to the end of the frame: whatever
//! follows is the peer's first FPDU and belongs to the FPDU receiver. It
//! stops at two checkpoints, after the key and after the header, so that a
//! machine can reject a bad frame as soon as the offending field is in,
//! at the same octet whatever the chunking.

use super::enhanced::EnhancedData;
use super::error::StartupError;
use super::frame::{key_array, FrameKind, Header, Revision, StartupFrameRepr, HEADER_LEN, KEY_LEN};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Key,
    Header,
    /// Header in, waiting for the machine to accept it.
    HeaderDone,
    Body {
        total: usize,
    },
    Done,
}

/// A complete, valid frame, detached from the reader's buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReceivedFrame {
    pub markers: bool,
    pub crc: bool,
    pub rejected: bool,
    pub revision: Revision,
    pub enhanced: Option<EnhancedData>,
    pub private_data: Vec<u8>,
}

/// What a [`FrameReader::push`] reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Progress {
    NeedMore,
    Key,
    Header,
    Frame,
}

/// Accumulates the octets of one startup frame.
#[derive(Debug, Clone)]
pub(crate) struct FrameReader {
    buf: Vec<u8>,
    phase: Phase,
}

impl FrameReader {
    pub fn new() -> Self {
        Self {
            buf: Vec::with_capacity(HEADER_LEN),
            phase: Phase::Key,
        }
    }

    /// Octets of the frame received so far.
    pub fn received(&self) -> usize {
        self.buf.len()
    }

    /// Octets the whole frame has, once the header is in.
    pub fn expected_len(&self) -> Option<usize> {
        match self.phase {
            Phase::Body { total } => Some(total),
            Phase::Done => Some(self.buf.len()),
            Phase::HeaderDone => Some(HEADER_LEN),
            Phase::Key | Phase::Header => None,
        }
    }

    /// The complete frame, once [`read`](Self::read) reported it.
    pub fn frame(&self) -> Option<StartupFrameRepr<'_>> {
        if self.phase != Phase::Done {
            return None;
        }
        StartupFrameRepr::parse_bytes(&self.buf)
            .ok()
            .map(|(repr, _)| repr)
    }

    /// The complete frame as owned values, once [`read`](Self::read)
    /// reported it.
    pub fn received_frame(&self) -> Option<ReceivedFrame> {
        self.frame().map(|f| ReceivedFrame {
            markers: f.markers,
            crc: f.crc,
            rejected: f.rejected,
            revision: f.revision,
            enhanced: f.enhanced,
            private_data: f.private_data.to_vec(),
        })
    }

    fn push(&mut self, input: &[u8]) -> (usize, Progress) {
        let target = match self.phase {
            Phase::Key => KEY_LEN,
            Phase::Header => HEADER_LEN,
            Phase::Body { total } => total,
            Phase::HeaderDone => return (0, Progress::NeedMore),
            Phase::Done => return (0, Progress::Frame),
        };
        let n = target.saturating_sub(self.buf.len()).min(input.len());
        self.buf.extend_from_slice(input.get(..n).unwrap_or(&[]));
        if self.buf.len() < target {
            return (n, Progress::NeedMore);
        }
        let progress = match self.phase {
            Phase::Key => {
                self.phase = Phase::Header;
                Progress::Key
            }
            Phase::Header => {
                self.phase = Phase::HeaderDone;
                Progress::Header
            }
            _ => {
                self.phase = Phase::Done;
                Progress::Frame
            }
        };
        (n, progress)
    }

    /// Feeds `input`; returns the octets taken and whether the frame is
    /// complete. `expected` is the frame this end waits for; `check` sees
    /// the format-checked header and may refuse it (role-specific rules),
    /// then PD_Length is held to `limit` (RFC 5044 §7.1.2 rule 9).
    pub fn read(
        &mut self,
        input: &[u8],
        expected: FrameKind,
        limit: usize,
        mut check: impl FnMut(&Header) -> Result<(), StartupError>,
    ) -> Result<(usize, bool), StartupError> {
        let mut consumed = 0;
        loop {
            let (n, progress) = self.push(input.get(consumed..).unwrap_or(&[]));
            consumed += n;
            match progress {
                Progress::NeedMore => return Ok((consumed, false)),
                Progress::Key => check_key(&self.buf, expected)?,
                Progress::Header => {
                    let header = Header::parse(&self.buf)
                        .map_err(|e| StartupError::from_frame(e, expected))?;
                    check(&header)?;
                    let length = usize::from(header.pd_length);
                    //= rfc5044#7.1.2
                    //# MPA implementations MUST validate the PD_Length field.
                    //= rfc5044#7.1.2
                    //# The buffer that receives the Private Data field MUST be large enough to
                    //# receive that data; the amount of Private Data MUST not exceed the
                    //# PD_Length or the application buffer.
                    //= rfc5044#7.1.2
                    //# If any of the above fails, the startup frame MUST be considered
                    //# improperly formatted.
                    if length > limit {
                        return Err(StartupError::PrivateDataOverLocalLimit { length, limit });
                    }
                    self.buf.reserve_exact(length);
                    self.phase = Phase::Body {
                        total: header.frame_len(),
                    };
                }
                Progress::Frame => return Ok((consumed, true)),
            }
        }
    }
}

/// RFC 5044 §7.1.2 rules 5 and 8: the key must be the one expected; the
/// other startup key means both ends took the same role.
//= rfc5044#7.1.1
//# Responder mode receivers MUST check this field for the same value, and close the connection
//# and report an error locally if any other value is detected.
//= rfc5044#7.1.1
//# Initiator mode receivers MUST check this field for the same value, and close the connection
//# and report an error locally if any other value is detected.
//= rfc5044#7.1.2
//# If a received "Key" does not match the expected value (see Section 7.1.1, MPA Request and
//# Reply Frame Format) the TCP/DDP connection MUST be closed, and an error returned to the ULP.
//= rfc5044#7.1.2
//# MPA implementations MUST use the difference between the MPA Request Frame and the MPA Reply
//# Frame to check for incorrect "Initiator/Initiator" startups.
fn check_key(octets: &[u8], expected: FrameKind) -> Result<(), StartupError> {
    match (
        FrameKind::from_key(octets.get(..KEY_LEN).unwrap_or(&[])),
        expected,
    ) {
        (Some(kind), _) if kind == expected => Ok(()),
        (Some(FrameKind::Request), FrameKind::Reply) => Err(StartupError::InitiatorInitiator),
        (Some(FrameKind::Reply), FrameKind::Request) => Err(StartupError::UnexpectedReply),
        _ => Err(StartupError::BadKey {
            expected,
            seen: key_array(octets),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpa::startup::frame::REQUEST_KEY;

    fn request(pd: &[u8]) -> Vec<u8> {
        let mut v = REQUEST_KEY.to_vec();
        v.extend_from_slice(&[0x00, 0x01]);
        v.extend_from_slice(&(pd.len() as u16).to_be_bytes());
        v.extend_from_slice(pd);
        v
    }

    #[test]
    fn stops_at_the_end_of_the_frame() {
        let mut input = request(b"abc");
        input.extend_from_slice(b"FPDU");
        let mut r = FrameReader::new();
        let (n, done) = r.read(&input, FrameKind::Request, 512, |_| Ok(())).unwrap();
        assert!(done);
        assert_eq!(n, 23);
        assert_eq!(r.frame().unwrap().private_data, b"abc");
        // Nothing more is taken once the frame is complete.
        assert_eq!(
            r.read(b"more", FrameKind::Request, 512, |_| Ok(())),
            Ok((0, true))
        );
    }

    #[test]
    fn byte_by_byte_matches_whole() {
        let input = request(b"hello");
        let mut r = FrameReader::new();
        let mut done = false;
        for (i, b) in input.iter().enumerate() {
            let (n, d) = r
                .read(std::slice::from_ref(b), FrameKind::Request, 512, |_| Ok(()))
                .unwrap();
            assert_eq!(n, 1);
            assert_eq!(d, i + 1 == input.len());
            done = d;
        }
        assert!(done);
        assert_eq!(r.frame().unwrap().private_data, b"hello");
    }

    #[test]
    fn local_limit_applies_to_pd_length() {
        let input = request(&[7u8; 100]);
        let mut r = FrameReader::new();
        assert_eq!(
            r.read(&input, FrameKind::Request, 99, |_| Ok(())),
            Err(StartupError::PrivateDataOverLocalLimit {
                length: 100,
                limit: 99
            })
        );
        let mut r = FrameReader::new();
        assert!(
            r.read(&input, FrameKind::Request, 100, |_| Ok(()))
                .unwrap()
                .1
        );
    }

    #[test]
    fn wrong_keys() {
        let input = request(b"");
        let mut r = FrameReader::new();
        assert_eq!(
            r.read(&input, FrameKind::Reply, 512, |_| Ok(())),
            Err(StartupError::InitiatorInitiator)
        );
        let mut garbage = input.clone();
        garbage[0] = b'X';
        let mut r = FrameReader::new();
        // The key is judged on its 16th octet, not before.
        assert_eq!(
            r.read(&garbage[..15], FrameKind::Request, 512, |_| Ok(())),
            Ok((15, false))
        );
        assert!(matches!(
            r.read(&garbage[15..], FrameKind::Request, 512, |_| Ok(())),
            Err(StartupError::BadKey { seen, .. }) if seen[0] == b'X'
        ));
    }
}
