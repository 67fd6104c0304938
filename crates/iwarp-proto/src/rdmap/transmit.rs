//! A DDP segment ready for the framing layer, without copying payload.

use crate::ddp::{SegmentHeader, UNTAGGED_HEADER_LEN};
use crate::memory::{AccessViolation, RegionReadGuard, RegionSlice};

use super::terminate::TERMINATE_MAX_LEN;

/// One ULPDU to transmit: the DDP/RDMAP header octets, owned inline, and
/// the payload, either a few inline octets (a Read Request, a Terminate)
/// or a reference into a registered region. Building one allocates
/// nothing; the payload is read from the region only when the runtime
/// [locks](Transmit::lock) it to hand the octets to the framing layer.
#[derive(Debug, Clone)]
pub struct Transmit {
    header: [u8; UNTAGGED_HEADER_LEN],
    header_len: u8,
    payload: TxPayload,
}

/// The payload of a [`Transmit`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TxPayload {
    /// No payload (a zero-length message).
    None,
    /// A few octets carried inline.
    Inline(InlinePayload),
    /// Octets of a registered region.
    Region(RegionSlice),
}

/// Up to 52 payload octets carried in the descriptor.
#[derive(Debug, Clone, Copy)]
pub struct InlinePayload {
    bytes: [u8; TERMINATE_MAX_LEN],
    len: u8,
}

impl InlinePayload {
    pub(crate) fn new(src: &[u8]) -> Self {
        let mut bytes = [0u8; TERMINATE_MAX_LEN];
        let len = src.len().min(TERMINATE_MAX_LEN);
        bytes[..len].copy_from_slice(&src[..len]);
        Self {
            bytes,
            len: len as u8,
        }
    }

    /// The octets.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

impl Transmit {
    pub(crate) fn new(header: &SegmentHeader, payload: TxPayload) -> Self {
        let (header, len) = header.to_bytes();
        Self {
            header,
            header_len: len as u8,
            payload,
        }
    }

    /// The DDP header (with the RDMAP fields in its RsvdULP).
    pub fn header(&self) -> &[u8] {
        &self.header[..self.header_len as usize]
    }

    /// The payload.
    pub fn payload(&self) -> &TxPayload {
        &self.payload
    }

    /// Length of the whole ULPDU.
    pub fn len(&self) -> usize {
        self.header_len as usize
            + match &self.payload {
                TxPayload::None => 0,
                TxPayload::Inline(p) => p.as_slice().len(),
                TxPayload::Region(r) => r.len(),
            }
    }

    /// Never true: a ULPDU has at least its header.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Locks the payload for reading: the result gives the ULPDU as slices
    /// for the framing layer and keeps the source STag valid until it is
    /// dropped. Fails if the source STag was invalidated after
    /// [`QueuePair::poll_transmit`](super::QueuePair::poll_transmit)
    /// returned this; the runtime then reports it with
    /// [`QueuePair::abort_transmit`](super::QueuePair::abort_transmit).
    pub fn lock(&self) -> Result<LockedTransmit<'_>, AccessViolation> {
        let payload = match &self.payload {
            TxPayload::None => LockedPayload::Slice(&[]),
            TxPayload::Inline(p) => LockedPayload::Slice(p.as_slice()),
            TxPayload::Region(r) => LockedPayload::Region(r.lock()?),
        };
        Ok(LockedTransmit {
            header: self.header(),
            payload,
        })
    }

    /// The whole ULPDU copied into a vector (tests and tools).
    pub fn to_vec(&self) -> Result<Vec<u8>, AccessViolation> {
        let l = self.lock()?;
        let [h, p] = l.slices();
        let mut v = Vec::with_capacity(h.len() + p.len());
        v.extend_from_slice(h);
        v.extend_from_slice(p);
        Ok(v)
    }
}

/// A [`Transmit`] with its payload locked readable.
#[derive(Debug)]
pub struct LockedTransmit<'a> {
    header: &'a [u8],
    payload: LockedPayload<'a>,
}

#[derive(Debug)]
enum LockedPayload<'a> {
    Slice(&'a [u8]),
    Region(RegionReadGuard<'a>),
}

impl LockedTransmit<'_> {
    /// Header and payload, in order: what the framing layer frames.
    pub fn slices(&self) -> [&[u8]; 2] {
        let p: &[u8] = match &self.payload {
            LockedPayload::Slice(s) => s,
            LockedPayload::Region(g) => g,
        };
        [self.header, p]
    }
}
