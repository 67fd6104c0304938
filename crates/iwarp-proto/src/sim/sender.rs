//! The sending TCP: it cuts the stream into segments that start with a PDU
//! (RFC 5044 §8 asks an MPA sender to align FPDUs with segments), keeps
//! what is not acknowledged, and after a retransmission timeout sends
//! again what the receiver neither acknowledged nor reported held (SACK)
//! and was sent a timeout ago, cut at other places than the first time.

use std::collections::VecDeque;

use super::link::Segment;
use super::rng::Rng;

/// The sending side of one TCP direction.
#[derive(Debug)]
pub struct TcpSender {
    isn: u32,
    stream: Vec<u8>,
    /// Stream offsets where PDUs end, ascending.
    boundaries: Vec<u64>,
    sent: u64,
    /// Where first transmissions ended, and the slot they were sent in.
    sent_at: VecDeque<(u64, u64)>,
    acked: u64,
    sacked: Vec<(u64, u64)>,
    mss: usize,
    window: u64,
    rto: u64,
    last_progress: u64,
    resend_all: f64,
    rng: Rng,
    /// Segments sent again.
    pub retransmitted: u64,
}

impl TcpSender {
    /// A sender whose stream offset 0 has sequence number `isn`, sending
    /// segments of at most `mss` octets, at most `window` octets beyond
    /// the acknowledged ones, and again after `rto` slots without progress
    /// (everything unacknowledged with chance `resend_all`).
    pub fn new(isn: u32, mss: usize, window: usize, rto: u64, resend_all: f64, seed: u64) -> Self {
        Self {
            isn,
            stream: Vec::new(),
            boundaries: Vec::new(),
            sent: 0,
            sent_at: VecDeque::new(),
            acked: 0,
            sacked: Vec::new(),
            mss: mss.max(1),
            window: window as u64,
            rto: rto.max(1),
            last_progress: 0,
            resend_all,
            rng: Rng::new(seed),
            retransmitted: 0,
        }
    }

    /// The whole stream so far.
    pub fn stream(&self) -> &[u8] {
        &self.stream
    }

    /// Stream octets queued and not yet sent once.
    pub fn unsent(&self) -> usize {
        self.stream.len() - self.sent as usize
    }

    /// True when every octet queued has been acknowledged.
    pub fn all_acked(&self) -> bool {
        self.acked == self.stream.len() as u64
    }

    /// Queues one PDU's octets.
    pub fn push_pdu(&mut self, octets: &[u8]) {
        self.stream.extend_from_slice(octets);
        self.boundaries.push(self.stream.len() as u64);
    }

    fn segment(&self, start: u64, end: u64) -> Segment {
        Segment {
            seq: self.isn.wrapping_add(start as u32),
            octets: self.stream[start as usize..end as usize].to_vec(),
        }
    }

    /// The next new segment, sent at slot `now`, if the window allows
    /// one: as many whole PDUs as fit the MSS (or the first MSS octets of
    /// a longer one).
    pub fn next_segment(&mut self, now: u64) -> Option<Segment> {
        let len = self.stream.len() as u64;
        if self.sent >= len || self.sent - self.acked >= self.window {
            return None;
        }
        let limit = (self.sent + self.mss as u64).min(len);
        let i = self.boundaries.partition_point(|&b| b <= limit);
        let end = match i.checked_sub(1).map(|j| self.boundaries[j]) {
            Some(b) if b > self.sent => b,
            _ => limit,
        };
        let seg = self.segment(self.sent, end);
        self.sent = end;
        self.sent_at.push_back((end, now));
        Some(seg)
    }

    /// The receiver acknowledges every octet before `ack` and holds the
    /// `sacked` ranges; `now` is the current slot.
    pub fn on_ack(&mut self, ack: u64, sacked: impl Iterator<Item = (u64, u64)>, now: u64) {
        if ack > self.acked {
            self.acked = ack.min(self.stream.len() as u64);
            self.last_progress = now;
            while self.sent_at.front().is_some_and(|&(e, _)| e <= self.acked) {
                self.sent_at.pop_front();
            }
        }
        self.sacked.clear();
        self.sacked.extend(sacked);
    }

    /// After a retransmission timeout, the segments to send again: what is
    /// neither acknowledged nor reported held and was sent a timeout ago,
    /// cut anew (sometimes all that is unacknowledged, held or not, as a
    /// sender without SACK would).
    pub fn timeout(&mut self, now: u64) -> Vec<Segment> {
        if self.acked >= self.sent || now - self.last_progress < self.rto {
            return Vec::new();
        }
        self.last_progress = now;
        let mut holes = Vec::new();
        if self.rng.chance(self.resend_all) {
            holes.push((self.acked, self.sent));
        } else {
            // What is still in flight is not lost (yet).
            let old = self
                .sent_at
                .iter()
                .take_while(|&&(_, at)| at + self.rto <= now)
                .last()
                .map_or(self.acked, |&(e, _)| e)
                .max(self.acked + 1)
                .min(self.sent);
            let mut at = self.acked;
            for &(s, e) in &self.sacked {
                if s > at && at < old {
                    holes.push((at, s.min(old)));
                }
                at = at.max(e);
            }
            if at < old {
                holes.push((at, old));
            }
        }
        let mut out = Vec::new();
        for (s, e) in holes {
            let mut at = s;
            while at < e {
                let n = self.rng.between(1, self.mss) as u64;
                let end = (at + n).min(e);
                out.push(self.segment(at, end));
                at = end;
            }
        }
        self.retransmitted += out.len() as u64;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_transmissions_start_with_a_pdu() {
        let mut s = TcpSender::new(u32::MAX - 10, 100, 1 << 20, 4, 0.0, 1);
        for len in [30, 50, 40, 250, 20] {
            s.push_pdu(&vec![len as u8; len]);
        }
        let mut starts = Vec::new();
        while let Some(seg) = s.next_segment(0) {
            starts.push((seg.seq.wrapping_sub(u32::MAX - 10), seg.octets.len()));
        }
        // 30+50 fit, 40 alone (40+250 does not), 250 cut at the MSS.
        // The rest of the long one and the next one fit together.
        assert_eq!(
            starts,
            [(0, 80), (80, 40), (120, 100), (220, 100), (320, 70)]
        );
        assert_eq!(s.timeout(3), Vec::new());
        s.on_ack(80, [(120, 220)].into_iter(), 0);
        let again = s.timeout(10);
        let covered: usize = again.iter().map(|g| g.octets.len()).sum();
        // The holes around what is held.
        assert_eq!(covered, 210);
    }
}
