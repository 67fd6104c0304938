//! A PDU found out of order, checked whole by the in-order receiver's own
//! code, and a view of the ULPDU it carries.

use crate::ddp::header::header_len;
use crate::ddp::UNTAGGED_HEADER_LEN;
use crate::framing::{Deframer, FramingEvent, Next};
use crate::ift::MAX_HEADER_SIZE;

/// A PDU that passed every check of the framing layer, and where its
/// ULPDU's octets lie: first [`Pdu::framing_header`] (IFT's DDP header,
/// which its framing reads itself; empty for MPA), then the runs of
/// [`Pdu::octets`] between the markers.
#[derive(Debug, Clone, Copy)]
pub struct Pdu<'a> {
    /// Stream offset of its first octet.
    pub start: u64,
    /// Its octets on the wire, markers and framing fields included.
    pub octets: &'a [u8],
    /// The ULPDU octets its framing layer read as a header.
    pub framing_header: &'a [u8],
    /// Where the rest of the ULPDU lies in [`Pdu::octets`], in order, as
    /// (offset, length).
    pub runs: &'a [(usize, usize)],
    /// The ULPDU's length.
    pub ulpdu_len: usize,
}

impl<'a> Pdu<'a> {
    /// Stream offset just past it.
    pub fn end(&self) -> u64 {
        self.start + self.octets.len() as u64
    }

    /// The ULPDU's octets, in order, in pieces.
    pub fn ulpdu(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let octets = self.octets;
        std::iter::once(self.framing_header)
            .chain(self.runs.iter().map(move |&(at, n)| &octets[at..at + n]))
            .filter(|p| !p.is_empty())
    }

    /// The DDP header: as many of the ULPDU's first octets as the DDP
    /// header its first octet announces (fewer if the ULPDU is shorter),
    /// gathered into `buf`.
    pub fn ddp_header<'b>(&self, buf: &'b mut [u8; UNTAGGED_HEADER_LEN]) -> &'b [u8] {
        // Mostly the first run holds it all.
        if let (true, Some(&(at, n))) = (self.framing_header.is_empty(), self.runs.first()) {
            let run = &self.octets[at..at + n];
            if let Some(whole) = run.first_chunk::<UNTAGGED_HEADER_LEN>() {
                *buf = *whole;
                return &buf[..header_len(whole[0]).min(UNTAGGED_HEADER_LEN)];
            }
        }
        let mut got = 0;
        let mut want = UNTAGGED_HEADER_LEN;
        for piece in self.ulpdu() {
            let n = piece.len().min(want - got);
            buf[got..got + n].copy_from_slice(&piece[..n]);
            if got == 0 && n > 0 {
                want = header_len(buf[0]).min(UNTAGGED_HEADER_LEN);
            }
            got += n;
            if got >= want {
                break;
            }
        }
        &buf[..got.min(want)]
    }
}

/// Scratch space for checking PDUs: reused, so that checking allocates
/// nothing once warm.
#[derive(Debug, Default, Clone)]
pub struct Checker {
    runs: Vec<(usize, usize)>,
    header: Vec<u8>,
}

impl Checker {
    /// Runs `pdu`, the octets of one whole PDU starting at stream offset
    /// `start`, through `deframer` (a fresh in-order deframer started at
    /// `start`) with its step API. The PDU passes when the deframer
    /// reports it complete and valid exactly at its last octet.
    //= rfc5044#6
    //# An MPA receiver MUST first verify the FPDU before passing the ULPDU to DDP.
    pub fn check<'a, D: Deframer>(
        &'a mut self,
        deframer: &mut D,
        start: u64,
        pdu: &'a [u8],
    ) -> Option<Pdu<'a>> {
        self.runs.clear();
        self.header.clear();
        let mut at = 0;
        let mut ulpdu_len = None;
        loop {
            match deframer.next() {
                Next::Failed => return None,
                Next::Payload { run, .. } => {
                    let n = run.min(pdu.len() - at);
                    if n == 0 {
                        return None;
                    }
                    deframer.push_payload(&pdu[at..at + n]).ok()?;
                    match self.runs.last_mut() {
                        Some((s, len)) if *s + *len == at => *len += n,
                        _ => self.runs.push((at, n)),
                    }
                    at += n;
                }
                Next::Framing => {
                    let (n, event) = deframer.push_framing(&pdu[at..]).ok()?;
                    at += n;
                    match event {
                        Some(FramingEvent::Begin {
                            header_len,
                            payload_len,
                        }) => {
                            let header = deframer.header();
                            if header.len() != header_len || header_len > MAX_HEADER_SIZE {
                                return None;
                            }
                            self.header.extend_from_slice(header);
                            ulpdu_len = Some(header_len + payload_len);
                        }
                        Some(FramingEvent::End) => {
                            let ulpdu_len = ulpdu_len?;
                            return (at == pdu.len()).then_some(Pdu {
                                start,
                                octets: pdu,
                                framing_header: &self.header,
                                runs: &self.runs,
                                ulpdu_len,
                            });
                        }
                        None if n == 0 => return None,
                        None => {}
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framing::{Framer, WireBatch};
    use crate::mpa::{FpduReceiver, FpduTransmitter, FramingParams};

    #[test]
    fn a_whole_fpdu_passes_and_its_ulpdu_comes_out_without_markers() {
        let params = FramingParams::IMMEDIATE_START;
        let mut tx = FpduTransmitter::new(params);
        let ulpdu: Vec<u8> = (0..1500u32).map(|i| (i * 7) as u8).collect();
        let mut wire = Vec::new();
        let mut batch = WireBatch::new();
        // Two FPDUs: the second starts mid-interval, with markers inside.
        for _ in 0..2 {
            batch.clear();
            tx.frame(&ulpdu[..18], &[&ulpdu[18..]], &mut batch).unwrap();
            batch.write_to(&[&ulpdu[18..]], &mut wire);
        }
        let half = wire.len() / 2;
        let mut checker = Checker::default();
        let pdu = checker
            .check(
                &mut FpduReceiver::at_offset(params, half as u64),
                half as u64,
                &wire[half..],
            )
            .expect("valid");
        assert_eq!(pdu.ulpdu_len, 1500);
        assert_eq!(pdu.ulpdu().flatten().copied().collect::<Vec<_>>(), ulpdu);
        let mut h = [0u8; UNTAGGED_HEADER_LEN];
        // 0x07 & 0x80 == 0: an untagged header's length.
        assert_eq!(pdu.ddp_header(&mut h), &ulpdu[..18]);

        // One octet short, one octet too many, one octet changed: refused.
        let fresh = || FpduReceiver::at_offset(params, half as u64);
        assert!(checker
            .check(&mut fresh(), 0, &wire[half..wire.len() - 1])
            .is_none());
        let mut longer = wire[half..].to_vec();
        longer.push(0);
        assert!(checker.check(&mut fresh(), 0, &longer).is_none());
        let mut damaged = wire[half..].to_vec();
        damaged[700] ^= 1;
        assert!(checker.check(&mut fresh(), 0, &damaged).is_none());
    }
}
