//! The stream layout of the payload octets still to come in a PDU: runs of
//! payload between markers.
//!
//! A runtime that reads payload straight from the socket into its
//! destination builds one vectored read from a [`Layout`]: payload runs
//! into the destination, markers into scratch space. It then replays the
//! same spans through [`super::Deframer::push_spans`] (or
//! [`super::Deframer::push_payload`] and [`super::Deframer::push_framing`]
//! one by one). Both framings describe their payload
//! this way, so the runtime builds its reads the same way over either.

use super::marker::{MarkerInterval, MARKER_LEN};

/// One stretch of stream octets in a [`Layout`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// This many payload octets, contiguous in the stream.
    Payload(usize),
    /// A 4-octet marker.
    Marker,
}

impl Span {
    /// Payload octets in the span (0 for a marker).
    pub const fn payload_len(&self) -> usize {
        match self {
            Self::Payload(n) => *n,
            Self::Marker => 0,
        }
    }

    /// Octets the span takes in the stream.
    pub const fn wire_len(&self) -> usize {
        match self {
            Self::Payload(n) => *n,
            Self::Marker => MARKER_LEN,
        }
    }
}

/// Walks whole `spans` of a layout from stream offset `offset`, `wire`
/// being exactly their octets, `remaining` payload octets left in the
/// PDU: where the stream ends after them and the payload octets left
/// then, if they hold no more than `remaining`, and each marker is where
/// `markers` puts one and `marker_ok` (given its offset and octets)
/// accepts it. What a deframer checks to take the spans of a direct read
/// in one step.
pub(crate) fn walk_spans(
    offset: u64,
    wire: &[u8],
    spans: &[Span],
    remaining: usize,
    markers: Option<MarkerInterval>,
    marker_ok: impl Fn(u64, [u8; MARKER_LEN]) -> bool,
) -> Option<(u64, usize)> {
    let (mut offset, mut at, mut payload) = (offset, 0, 0);
    for span in spans {
        if *span == Span::Marker {
            let octets: [u8; MARKER_LEN] = wire.get(at..at + MARKER_LEN)?.try_into().ok()?;
            let placed = markers.is_some_and(|i| i.is_marker_at(offset));
            if !placed || !marker_ok(offset, octets) {
                return None;
            }
        }
        payload += span.payload_len();
        at += span.wire_len();
        offset += span.wire_len() as u64;
    }
    let left = remaining.checked_sub(payload)?;
    (at == wire.len()).then_some((offset, left))
}

/// Upcoming payload octets, as the [`Span`]s they occupy in the stream:
/// see [`super::Deframer::layout`].
#[derive(Debug, Clone)]
pub struct Layout {
    offset: u64,
    left: usize,
    markers: Option<MarkerInterval>,
}

impl Layout {
    /// `payload` payload octets from stream offset `offset` on, with
    /// markers at `markers` (none if `None`).
    pub const fn new(offset: u64, payload: usize, markers: Option<MarkerInterval>) -> Self {
        Self {
            offset,
            left: payload,
            markers,
        }
    }

    /// Payload octets the layout still covers.
    pub const fn payload_len(&self) -> usize {
        self.left
    }
}

impl Iterator for Layout {
    type Item = Span;

    fn next(&mut self) -> Option<Span> {
        if self.left == 0 {
            return None;
        }
        let run = match self.markers {
            Some(i) if i.is_marker_at(self.offset) => {
                self.offset += MARKER_LEN as u64;
                return Some(Span::Marker);
            }
            Some(i) => self.left.min(i.room(self.offset)),
            None => self.left,
        };
        self.left -= run;
        self.offset += run as u64;
        Some(Span::Payload(run))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_between_markers() {
        let spans: Vec<Span> = Layout::new(500, 600, Some(MarkerInterval::DEFAULT)).collect();
        assert_eq!(
            spans,
            [
                Span::Payload(12),
                Span::Marker,
                Span::Payload(508),
                Span::Marker,
                Span::Payload(80)
            ]
        );
        let plain: Vec<Span> = Layout::new(500, 600, None).collect();
        assert_eq!(plain, [Span::Payload(600)]);
        assert_eq!(Layout::new(0, 0, None).count(), 0);
    }
}
