//! The registry that maps STags to regions.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use super::region::Registration;
use super::{Access, AccessViolation, MemoryBuffer, RegionSlice, RegisterError, STag};

/// A protection domain: a region may be used only by streams of its own
/// domain (RFC 5041 §8.2, §8.3.1 item 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProtectionDomain(pub u32);

/// Identifies one stream (queue pair) locally, for regions bound to a
/// single stream (RFC 5041 §8.2, DDP Stream association).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u64);

/// What to register: see [`MemoryTable::register`].
#[derive(Debug, Clone)]
pub struct RegionSpec {
    /// The domain the region belongs to.
    pub pd: ProtectionDomain,
    /// The octets.
    pub buffer: MemoryBuffer,
    /// Where the region starts in `buffer`.
    pub offset: usize,
    /// Its length in octets.
    pub len: usize,
    /// The tagged offset of its first octet: any 64-bit value, like a
    /// verbs virtual address.
    pub base_to: u64,
    /// What it may be used for.
    pub access: Access,
    /// If set, only this stream may use it remotely.
    pub stream: Option<StreamId>,
    /// The consumer's 8-bit key, the low octet of the STag.
    pub key: u8,
}

impl RegionSpec {
    /// A whole buffer, TO starting at `base_to`, key 0, no stream binding.
    pub fn whole(pd: ProtectionDomain, buffer: MemoryBuffer, base_to: u64, access: Access) -> Self {
        let len = buffer.len();
        Self {
            pd,
            buffer,
            offset: 0,
            len,
            base_to,
            access,
            stream: None,
            key: 0,
        }
    }
}

#[derive(Debug, Default)]
struct Slot {
    reg: Option<Arc<Registration>>,
    /// The last STag issued at this index, so that a new registration
    /// there never repeats it.
    last: Option<STag>,
}

#[derive(Debug)]
struct Slots {
    slots: Vec<Slot>,
    /// Where the search for a free index starts: indices are handed out
    /// round-robin so that a freed one is reused as late as possible.
    next: u32,
    live: usize,
}

/// The STag registry of one device: shared (in an `Arc`) by the user, who
/// registers and invalidates, and by every engine, which looks STags up.
/// Internally synchronized.
#[derive(Debug)]
pub struct MemoryTable {
    slots: RwLock<Slots>,
    next_pd: AtomicU32,
}

impl Default for MemoryTable {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryTable {
    /// An empty table.
    pub fn new() -> Self {
        Self {
            slots: RwLock::new(Slots {
                // Index 0 is never used: some hardware treats STag 0 apart.
                slots: vec![Slot::default()],
                next: 1,
                live: 0,
            }),
            next_pd: AtomicU32::new(1),
        }
    }

    /// A fresh protection domain.
    pub fn alloc_pd(&self) -> ProtectionDomain {
        ProtectionDomain(self.next_pd.fetch_add(1, Ordering::Relaxed))
    }

    /// Registers a region; returns its STag.
    pub fn register(&self, spec: RegionSpec) -> Result<STag, RegisterError> {
        let end = spec
            .offset
            .checked_add(spec.len)
            .ok_or(RegisterError::OutsideBuffer)?;
        if end > spec.buffer.len() {
            return Err(RegisterError::OutsideBuffer);
        }
        if spec.base_to as u128 + spec.len as u128 > u64::MAX as u128 + 1 {
            return Err(RegisterError::ToRangeWraps);
        }
        let mut t = self.slots.write().unwrap_or_else(PoisonError::into_inner);
        let max = STag::MAX_INDEX;
        if t.live >= max as usize {
            return Err(RegisterError::TableFull);
        }
        let mut index = t.next;
        loop {
            let idx = index as usize;
            if idx >= t.slots.len() {
                t.slots.resize_with(idx + 1, Slot::default);
            }
            let slot = &t.slots[idx];
            let stag = STag::new(index, spec.key);
            if slot.reg.is_none() && slot.last != Some(stag) {
                break;
            }
            index = if index == max { 1 } else { index + 1 };
            if index == t.next {
                return Err(RegisterError::TableFull);
            }
        }
        let stag = STag::new(index, spec.key);
        let reg = Arc::new(Registration {
            stag,
            pd: spec.pd,
            stream: spec.stream,
            access: spec.access,
            base_to: spec.base_to,
            len: spec.len as u64,
            buffer: spec.buffer,
            buffer_offset: spec.offset,
            valid: RwLock::new(true),
        });
        let slot = &mut t.slots[index as usize];
        slot.reg = Some(reg);
        slot.last = Some(stag);
        t.live += 1;
        t.next = if index == max { 1 } else { index + 1 };
        Ok(stag)
    }

    fn lookup(&self, stag: STag) -> Option<Arc<Registration>> {
        let t = self.slots.read().unwrap_or_else(PoisonError::into_inner);
        let reg = t.slots.get(stag.index() as usize)?.reg.as_ref()?;
        (reg.stag == stag).then(|| Arc::clone(reg))
    }

    /// Invalidates an STag (local invalidate). When this returns, no octet
    /// is placed into or read from the region through it any more; the
    /// registration stays until [`MemoryTable::deregister`].
    pub fn invalidate(&self, stag: STag) -> Result<(), AccessViolation> {
        let reg = self.lookup(stag).ok_or(AccessViolation::InvalidStag)?;
        reg.set_invalid();
        Ok(())
    }

    /// Invalidation asked for by a remote peer with a Send with Invalidate
    /// (RFC 5040 §5.4) on a stream of domain `pd`: the STag must be valid
    /// and belong to that domain and stream.
    pub(crate) fn invalidate_remote(
        &self,
        stag: STag,
        pd: ProtectionDomain,
        stream: StreamId,
    ) -> Result<(), AccessViolation> {
        let reg = self.lookup(stag).ok_or(AccessViolation::InvalidStag)?;
        if !reg.is_valid() {
            return Err(AccessViolation::InvalidStag);
        }
        if reg.pd != pd || reg.stream.is_some_and(|s| s != stream) {
            return Err(AccessViolation::NotAssociated);
        }
        reg.set_invalid();
        Ok(())
    }

    /// Removes a registration; its STag is invalid from now on and its
    /// index may be reused (with another STag).
    pub fn deregister(&self, stag: STag) -> Result<(), AccessViolation> {
        let reg = {
            let mut t = self.slots.write().unwrap_or_else(PoisonError::into_inner);
            let slot = t
                .slots
                .get_mut(stag.index() as usize)
                .ok_or(AccessViolation::InvalidStag)?;
            match &slot.reg {
                Some(r) if r.stag == stag => {}
                _ => return Err(AccessViolation::InvalidStag),
            }
            let reg = slot.reg.take();
            t.live -= 1;
            reg
        };
        if let Some(reg) = reg {
            reg.set_invalid();
        }
        Ok(())
    }

    /// True if `stag` names a registered, valid region.
    pub fn is_valid(&self, stag: STag) -> bool {
        self.lookup(stag).is_some_and(|r| r.is_valid())
    }

    /// Checks a remote access by a stream of domain `pd`, id `stream`, of
    /// `len` octets at `to` needing `need`, and returns the slice to place
    /// into or read from. This is the single check every remote access
    /// goes through (RFC 5041 §7.1 tagged checks, RFC 5040 §7).
    pub fn check_remote(
        &self,
        stag: STag,
        pd: ProtectionDomain,
        stream: StreamId,
        need: Access,
        to: u64,
        len: u64,
    ) -> Result<RegionSlice, AccessViolation> {
        let reg = self.lookup(stag).ok_or(AccessViolation::InvalidStag)?;
        reg.check(pd, Some(stream), need, to, len)
    }

    /// Checks a local access (a work request's buffer) in domain `pd`.
    pub fn check_local(
        &self,
        stag: STag,
        pd: ProtectionDomain,
        need: Access,
        to: u64,
        len: u64,
    ) -> Result<RegionSlice, AccessViolation> {
        let reg = self.lookup(stag).ok_or(AccessViolation::InvalidStag)?;
        reg.check(pd, None, need, to, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> (MemoryTable, ProtectionDomain) {
        let t = MemoryTable::new();
        let pd = t.alloc_pd();
        (t, pd)
    }

    #[test]
    fn register_look_up_and_check_every_condition() {
        let (t, pd) = table();
        let other_pd = t.alloc_pd();
        let buf = MemoryBuffer::new(100);
        let mut spec = RegionSpec::whole(pd, buf, 0x1000, Access::REMOTE_WRITE);
        spec.key = 0x5a;
        let stag = t.register(spec).unwrap();
        assert_eq!(stag.key(), 0x5a);
        let s = StreamId(1);
        let ok = t
            .check_remote(stag, pd, s, Access::REMOTE_WRITE, 0x1010, 16)
            .unwrap();
        assert_eq!((ok.offset(), ok.len()), (16, 16));
        let bad_key = STag::new(stag.index(), 0x5b);
        let err = |stag, pd, need, to, len| t.check_remote(stag, pd, s, need, to, len).unwrap_err();
        use AccessViolation::*;
        let w = Access::REMOTE_WRITE;
        assert_eq!(err(bad_key, pd, w, 0x1000, 1), InvalidStag);
        assert_eq!(err(stag, other_pd, w, 0x1000, 1), NotAssociated);
        assert_eq!(err(stag, pd, Access::REMOTE_READ, 0x1000, 1), AccessRights);
        assert_eq!(err(stag, pd, w, 0xfff, 1), BaseBounds);
        assert_eq!(err(stag, pd, w, 0x1064, 1), BaseBounds);
        assert_eq!(err(stag, pd, w, 0x1060, 5), BaseBounds);
        // The whole region, and a zero-length access at its end, are fine.
        t.check_remote(stag, pd, s, w, 0x1000, 100).unwrap();
        t.check_remote(stag, pd, s, w, 0x1064, 0).unwrap();
        t.invalidate(stag).unwrap();
        assert_eq!(err(stag, pd, w, 0x1000, 1), InvalidStag);
    }

    #[test]
    fn to_wrap_is_reported_for_a_region_at_the_top() {
        let (t, pd) = table();
        let buf = MemoryBuffer::new(0x100);
        let base = u64::MAX - 0xff;
        let stag = t
            .register(RegionSpec::whole(pd, buf, base, Access::REMOTE_WRITE))
            .unwrap();
        let r = t.check_remote(
            stag,
            pd,
            StreamId(0),
            Access::REMOTE_WRITE,
            base + 0xf0,
            0x20,
        );
        assert_eq!(r.unwrap_err(), AccessViolation::ToWrap);
    }

    #[test]
    fn stream_binding() {
        let (t, pd) = table();
        let mut spec = RegionSpec::whole(pd, MemoryBuffer::new(8), 0, Access::REMOTE_READ);
        spec.stream = Some(StreamId(7));
        let stag = t.register(spec).unwrap();
        let r = t.check_remote(stag, pd, StreamId(8), Access::REMOTE_READ, 0, 8);
        assert_eq!(r.unwrap_err(), AccessViolation::NotAssociated);
        t.check_remote(stag, pd, StreamId(7), Access::REMOTE_READ, 0, 8)
            .unwrap();
    }

    #[test]
    fn reused_index_gets_a_fresh_stag() {
        let (t, pd) = table();
        let mut seen = std::collections::HashSet::new();
        // Registering and deregistering with the same key must never hand
        // out the same STag twice in a row at one index.
        for _ in 0..10 {
            let stag = t
                .register(RegionSpec::whole(
                    pd,
                    MemoryBuffer::new(4),
                    0,
                    Access::empty(),
                ))
                .unwrap();
            assert!(seen.insert(stag));
            t.deregister(stag).unwrap();
            assert!(!t.is_valid(stag));
        }
    }

    #[test]
    fn invalidation_waits_for_placement_in_progress() {
        let (t, pd) = table();
        let t = Arc::new(t);
        let stag = t
            .register(RegionSpec::whole(
                pd,
                MemoryBuffer::new(4),
                0,
                Access::REMOTE_WRITE,
            ))
            .unwrap();
        let slice = t
            .check_remote(stag, pd, StreamId(0), Access::REMOTE_WRITE, 0, 4)
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let t2 = Arc::clone(&t);
        let slice2 = slice.clone();
        let placed = std::thread::spawn(move || {
            slice2
                .write_with(0, 4, |dst| {
                    tx.send(()).unwrap();
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    dst.copy_from_slice(b"abcd");
                })
                .is_ok()
        });
        rx.recv().unwrap();
        // Placement is in progress: invalidate must wait for it.
        t2.invalidate(stag).unwrap();
        assert!(placed.join().unwrap());
        assert_eq!(slice.buffer().to_vec(), b"abcd");
        // And nothing goes through afterwards.
        assert_eq!(
            slice.write_with(0, 1, |_| ()).unwrap_err(),
            AccessViolation::InvalidStag
        );
        assert!(slice.lock().is_err());
    }
}
