//! A registration, and checked slices of it that the engines place into
//! and transmit from.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::{RwLock, RwLockReadGuard};

use super::{Access, AccessViolation, MemoryBuffer, ProtectionDomain, STag, StreamId};

/// One registered region, shared by the table and every slice taken of it.
#[derive(Debug)]
pub(crate) struct Registration {
    pub(crate) stag: STag,
    pub(crate) pd: ProtectionDomain,
    pub(crate) stream: Option<StreamId>,
    pub(crate) access: Access,
    /// The TO of the region's first octet.
    pub(crate) base_to: u64,
    pub(crate) len: u64,
    pub(crate) buffer: MemoryBuffer,
    /// Where the region starts inside `buffer`.
    pub(crate) buffer_offset: usize,
    /// False once invalidated or deregistered. Cleared only under
    /// `gate`'s write lock, which placement and transmission hold for
    /// reading while they touch the octets: invalidation waits for them,
    /// and one that finds it set under the gate keeps it set until it lets
    /// go. The checks before each post and segment look without the gate
    /// (two atomic read-modify-writes fewer each, a few per message),
    /// seeing a moment before or after an invalidation.
    pub(crate) valid: AtomicBool,
    /// Guards `valid`'s one change (`parking_lot`'s, for
    /// [`RegionSlice::lock`]'s recursive reads).
    pub(crate) gate: RwLock<()>,
}

impl Registration {
    pub(crate) fn is_valid(&self) -> bool {
        self.valid.load(Ordering::Acquire)
    }

    pub(crate) fn set_invalid(&self) {
        let _gate = self.gate.write();
        self.valid.store(false, Ordering::Release);
    }

    /// Checks an access of `len` octets at `to` that needs `need`, by a
    /// stream in `pd` with id `stream` (`None` for a local access, which
    /// ignores stream binding). The order is RFC 5041 §7.1 for tagged
    /// segments: validity and association (check 1), access (check 2), TO
    /// in range (check 3), wrap (check 5), end in range (check 4). Wrap
    /// comes before the end check because a wrapping sum would otherwise
    /// always show as a bounds violation and check 5 could never fire.
    //= rfc5041#8.2
    //# For an incoming DDP Segment of a Tagged DDP Message on a DDP Stream, if the PD ID of the
    //# DDP Stream is not the same as the PD ID of the STag targeted by the Tagged DDP Message,
    //# then the DDP Segment is not placed and the DDP layer MUST surface a local error to the
    //# ULP.
    //= rfc5041#8.2
    //# In this case, for an incoming DDP Segment of a Tagged DDP Message on a DDP Stream, if
    //# the DDP Stream ID of the DDP Stream is not the same as the DDP Stream ID of the STag
    //# targeted by the Tagged DDP Message, then the DDP Segment is not placed and the DDP layer
    //# MUST surface a local error to the ULP.
    //= rfc5041#8.3.1
    //# An RNIC MUST ensure that a specific DDP Stream in a specific Protection Domain cannot
    //# access an STag in a different Protection Domain.
    //= rfc5041#8.3.1
    //# An RNIC MUST ensure that if an STag is limited in scope to a single DDP Stream, no other
    //# DDP Stream can use the STag.
    //= rfc5041#8.3.1
    //# An RNIC MUST ensure that a Remote Peer is not able to access memory outside of the
    //# buffer specified when the STag was enabled for remote access.
    //= rfc5041#8.3
    //# If an STag is not valid on a DDP Stream, DDP MUST pass the invalid access attempt to the
    //# ULP.
    pub(crate) fn check(
        self: Arc<Self>,
        pd: ProtectionDomain,
        stream: Option<StreamId>,
        need: Access,
        to: u64,
        len: u64,
    ) -> Result<RegionSlice, AccessViolation> {
        if !self.is_valid() {
            return Err(AccessViolation::InvalidStag);
        }
        // RFC 5041 §8.2: PD association and stream association.
        if self.pd != pd {
            return Err(AccessViolation::NotAssociated);
        }
        if let (Some(bound), Some(stream)) = (self.stream, stream) {
            if bound != stream {
                return Err(AccessViolation::NotAssociated);
            }
        }
        if !self.access.contains(need) {
            return Err(AccessViolation::AccessRights);
        }
        let end = self.base_to as u128 + self.len as u128;
        // Check 3: the first octet lies in the region. A zero-length access
        // may sit at the very end.
        if to < self.base_to || (to as u128) > end || (len > 0 && to as u128 == end) {
            return Err(AccessViolation::BaseBounds);
        }
        // Check 5: TO + length must not wrap.
        let Some(last) = to.checked_add(len) else {
            return Err(AccessViolation::ToWrap);
        };
        // Check 4: the last octet lies in the region.
        if last as u128 > end {
            return Err(AccessViolation::BaseBounds);
        }
        let offset = self.buffer_offset + (to - self.base_to) as usize;
        // The table's reference becomes the slice's: no count taken and
        // dropped again.
        Ok(RegionSlice {
            reg: self,
            offset,
            len: len as usize,
        })
    }
}

/// A checked range of a registered region: where payload goes, or where
/// it comes from. Holding one does not keep the STag valid: every access
/// through it checks validity again under the registration lock.
#[derive(Debug, Clone)]
pub struct RegionSlice {
    reg: Arc<Registration>,
    offset: usize,
    len: usize,
}

impl RegionSlice {
    /// The STag it was taken through.
    pub fn stag(&self) -> STag {
        self.reg.stag
    }

    /// The buffer behind it.
    pub fn buffer(&self) -> &MemoryBuffer {
        &self.reg.buffer
    }

    /// Its first octet's offset in [`RegionSlice::buffer`].
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Its length in octets.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when it has no octets.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True while its STag is valid.
    pub fn is_valid(&self) -> bool {
        self.reg.is_valid()
    }

    /// True when both are the same range of the same registration.
    pub fn same_as(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.reg, &other.reg) && self.offset == other.offset && self.len == other.len
    }

    /// The part `at..at + len` of it; `None` if that is not inside.
    pub fn sub(&self, at: usize, len: usize) -> Option<Self> {
        let end = at.checked_add(len)?;
        (end <= self.len).then(|| Self {
            reg: Arc::clone(&self.reg),
            offset: self.offset + at,
            len,
        })
    }

    /// Runs `f` on the octets `at..at + len` of the slice, for writing,
    /// while the STag is held valid. Fails, without calling `f`, if the
    /// STag has been invalidated or the range is not inside the slice.
    pub fn write_with<R>(
        &self,
        at: usize,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<R, AccessViolation> {
        let _gate = self.reg.gate.read();
        if !self.reg.is_valid() {
            return Err(AccessViolation::InvalidStag);
        }
        let end = at
            .checked_add(len)
            .filter(|&e| e <= self.len)
            .ok_or(AccessViolation::BaseBounds)?;
        let mut octets = self.reg.buffer.write();
        let dst = octets
            .get_mut(self.offset + at..self.offset + end)
            .ok_or(AccessViolation::BaseBounds)?;
        Ok(f(dst))
    }

    /// Locks the slice for reading (transmission): the guard derefs to the
    /// octets and keeps the STag valid until dropped.
    ///
    /// A batch of PDUs locks every slice it sends from at once, so it may
    /// lock one registration, or one buffer, several times. Those reads
    /// are recursive: a plain read lock waits behind a writer that is
    /// already waiting (the user's `write_with`, an invalidation), and that
    /// writer waits for the batch's first read, a deadlock the soak hit
    /// once bursts of posts filled batches from one region.
    pub fn lock(&self) -> Result<RegionReadGuard<'_>, AccessViolation> {
        let gate = self.reg.gate.read_recursive();
        if !self.reg.is_valid() {
            return Err(AccessViolation::InvalidStag);
        }
        let octets = self.reg.buffer.read_recursive();
        if self.offset + self.len > octets.len() {
            return Err(AccessViolation::BaseBounds);
        }
        Ok(RegionReadGuard {
            _gate: gate,
            octets,
            start: self.offset,
            end: self.offset + self.len,
        })
    }
}

/// The octets of a [`RegionSlice`], held readable and their STag held
/// valid; invalidation of the STag waits until this is dropped.
#[derive(Debug)]
pub struct RegionReadGuard<'a> {
    _gate: RwLockReadGuard<'a, ()>,
    octets: RwLockReadGuard<'a, Box<[u8]>>,
    start: usize,
    end: usize,
}

impl std::ops::Deref for RegionReadGuard<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.octets[self.start..self.end]
    }
}
