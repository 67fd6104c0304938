//! The registry that maps STags to regions.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use rustc_hash::FxHashMap;

use super::region::Registration;
use super::stag_allocator::StagAllocator;
use super::{
    Access, AccessViolation, MemoryBuffer, NoRandomness, RegionSlice, RegisterError, STag,
};

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
//= rfc5041#8.2
//# DDP MUST support Protection Domain association and DDP Stream association mechanisms for
//# associating an STag and a DDP Stream.
//= rfc5041#8.3
//# DDP MUST provide a mechanism for the ULP to communicate the association between a STag and a
//# specific DDP Stream.
//= rfc5041#8.3.1
//# An RNIC MUST provide a mechanism for the ULP to establish and revoke read, write, or read
//# and write access to the ULP Buffer referenced by an STag.
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
    /// The 8-bit key, the low octet of the STag: `None` (the default) lets
    /// the table choose an unpredictable one; a consumer that sets it is
    /// responsible for not repeating an STag a peer may still hold.
    pub key: Option<u8>,
}

impl RegionSpec {
    /// A whole buffer, TO starting at `base_to`, a key the table chooses,
    /// no stream binding.
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
            key: None,
        }
    }
}

#[derive(Debug)]
struct Registry {
    /// The live registrations by STag index: memory in proportion to
    /// them, whatever indices they hold. Hashed by `FxHash`, not SipHash:
    /// the indices come from the allocator's keyed permutation, so they
    /// are spread already, and a peer names STags to look up but never
    /// chooses what is inserted, so it cannot crowd a bucket.
    by_index: FxHashMap<u32, Arc<Registration>>,
    stags: StagAllocator,
}

/// The STag registry of one device: shared (in an `Arc`) by the user, who
/// registers and invalidates, and by every engine, which looks STags up.
/// Internally synchronized.
///
/// STags are unpredictable and an index is reused only after a cycle of
/// 2^24 allocations; see the [module documentation](super) for what that
/// promises and the odds of a peer guessing one.
#[derive(Debug)]
pub struct MemoryTable {
    registry: RwLock<Registry>,
    next_pd: AtomicU32,
}

impl Default for MemoryTable {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryTable {
    /// An empty table whose STags are keyed by 128 bits from the operating
    /// system's random number generator.
    ///
    /// # Panics
    ///
    /// If the operating system has no random numbers to give
    /// ([`MemoryTable::try_new`] reports that instead): handing out
    /// predictable STags would be worse.
    pub fn new() -> Self {
        Self::try_new().expect("the operating system's random number generator")
    }

    /// An empty table keyed from the operating system's random number
    /// generator, or the error it gave.
    pub fn try_new() -> Result<Self, NoRandomness> {
        let mut key = [0u8; 16];
        getrandom::fill(&mut key)?;
        Ok(Self::with_key(key))
    }

    /// An empty table whose STag sequence follows from `seed`: the same
    /// seed gives the same STags in the same order. For tests and tools
    /// that must be reproducible; its STags are only as secret as the
    /// seed.
    pub fn with_seed(seed: u64) -> Self {
        let mut key = [0u8; 16];
        key[..8].copy_from_slice(&seed.to_le_bytes());
        key[8..].copy_from_slice(b"stagseed");
        Self::with_key(key)
    }

    fn with_key(key: [u8; 16]) -> Self {
        Self {
            registry: RwLock::new(Registry {
                by_index: FxHashMap::default(),
                stags: StagAllocator::new(key),
            }),
            next_pd: AtomicU32::new(1),
        }
    }

    /// A fresh protection domain.
    pub fn alloc_pd(&self) -> ProtectionDomain {
        ProtectionDomain(self.next_pd.fetch_add(1, Ordering::Relaxed))
    }

    /// The number of live registrations.
    pub fn len(&self) -> usize {
        self.read().by_index.len()
    }

    /// True when nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Registers a region; returns its STag.
    //= rfc5041#8.3
    //# DDP MUST provide a mechanism for the ULP to establish and revoke the TO range associated
    //# with the ULP Buffer referenced by the STag.
    //= rfc5041#8.3
    //# DDP MUST provide a mechanism for the ULP to establish and revoke STag validity.
    //= rfc5041#8.3.1
    //# An RNIC MUST provide a mechanism for the ULP to establish and revoke the association of
    //# a ULP Buffer to an STag and TO range.
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
        let mut registry = self
            .registry
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let r = &mut *registry;
        if r.by_index.len() >= STag::MAX_INDEX as usize {
            return Err(RegisterError::TableFull);
        }
        // A cycle of 2^24 candidates offers every index once, so a free one
        // turns up within it; each candidate passed over is a live index,
        // so the search costs O(1) amortized.
        let mut stag = None;
        for _ in 0..=STag::MAX_INDEX {
            let candidate = r.stags.next_candidate(spec.key);
            // Index 0 is never used: some hardware treats STag 0 apart.
            if candidate.index() != 0 && !r.by_index.contains_key(&candidate.index()) {
                stag = Some(candidate);
                break;
            }
        }
        let stag = stag.ok_or(RegisterError::TableFull)?;
        let reg = Arc::new(Registration {
            stag,
            pd: spec.pd,
            stream: spec.stream,
            access: spec.access,
            base_to: spec.base_to,
            len: spec.len as u64,
            buffer: spec.buffer,
            buffer_offset: spec.offset,
            valid: std::sync::atomic::AtomicBool::new(true),
            gate: parking_lot::RwLock::new(()),
        });
        r.by_index.insert(stag.index(), reg);
        Ok(stag)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Registry> {
        self.registry.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn lookup(&self, stag: STag) -> Option<Arc<Registration>> {
        let registry = self.read();
        let reg = registry.by_index.get(&stag.index())?;
        (reg.stag == stag).then(|| Arc::clone(reg))
    }

    /// Invalidates an STag (local invalidate). When this returns, no octet
    /// is placed into or read from the region through it any more; the
    /// registration stays until [`MemoryTable::deregister`].
    //= rfc5041#8.3.1
    //# An RNIC MUST ensure that the network interface can no longer modify an advertised buffer
    //# after the ULP revokes remote access rights for an STag.
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
            let mut registry = self
                .registry
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            let map = &mut registry.by_index;
            match map.get(&stag.index()) {
                Some(r) if r.stag == stag => {}
                _ => return Err(AccessViolation::InvalidStag),
            }
            let reg = map.remove(&stag.index());
            // Memory follows the live registrations down, too.
            if map.capacity() > 64 && map.len() < map.capacity() / 4 {
                map.shrink_to(map.len() * 2);
            }
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
        let t = MemoryTable::with_seed(1);
        let pd = t.alloc_pd();
        (t, pd)
    }

    /// A batch sends two PDUs from one region: it locks the region twice.
    /// A writer (the user's `write`, an invalidation) that queues between
    /// the two locks must not make the second wait, or neither proceeds.
    #[test]
    fn a_region_locked_again_does_not_wait_behind_a_waiting_writer() {
        let (t, pd) = table();
        let buf = MemoryBuffer::new(100);
        let stag = t
            .register(RegionSpec::whole(pd, buf.clone(), 0, Access::empty()))
            .unwrap();
        let first = t.check_local(stag, pd, Access::empty(), 0, 10).unwrap();
        let second = t.check_local(stag, pd, Access::empty(), 10, 10).unwrap();
        let held = first.lock().unwrap();
        let (wrote, written) = std::sync::mpsc::channel();
        let writer = std::thread::spawn(move || {
            buf.write()[0] = 1;
            wrote.send(()).unwrap();
        });
        let invalidator = {
            let t = std::sync::Arc::new(t);
            let t2 = t.clone();
            (t, std::thread::spawn(move || t2.invalidate(stag)))
        };
        // Let both writers queue behind `held` (if they are slower, the
        // second lock below is simply uncontended).
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(written.try_recv().is_err(), "the writer waits for the read");
        let (locked, lock_done) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let again = second.lock().map(|g| g.len());
                locked.send(again).unwrap();
            });
            let again = lock_done
                .recv_timeout(std::time::Duration::from_secs(20))
                .expect("the second lock waited behind the writers");
            assert_eq!(again, Ok(10));
            drop(held);
        });
        writer.join().unwrap();
        written.recv().unwrap();
        invalidator.1.join().unwrap().unwrap();
        assert!(second.lock().is_err(), "invalidated after the batch");
    }

    #[test]
    //= rfc5041#8.3
    //= type=test
    //# DDP MUST provide a mechanism for the ULP to establish and revoke the TO range associated
    //# with the ULP Buffer referenced by the STag.
    //= rfc5041#8.3
    //= type=test
    //# DDP MUST provide a mechanism for the ULP to establish and revoke STag validity.
    //= rfc5041#8.3.1
    //= type=test
    //# An RNIC MUST provide a mechanism for the ULP to establish and revoke the association of
    //# a ULP Buffer to an STag and TO range.
    fn register_look_up_and_check_every_condition() {
        let (t, pd) = table();
        let other_pd = t.alloc_pd();
        let buf = MemoryBuffer::new(100);
        let mut spec = RegionSpec::whole(pd, buf, 0x1000, Access::REMOTE_WRITE);
        spec.key = Some(0x5a);
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
    //= rfc5041#8.2
    //= type=test
    //# DDP MUST support Protection Domain association and DDP Stream association mechanisms for
    //# associating an STag and a DDP Stream.
    //= rfc5041#8.3
    //= type=test
    //# DDP MUST provide a mechanism for the ULP to communicate the association between a STag
    //# and a specific DDP Stream.
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

    fn empty_region(pd: ProtectionDomain, key: Option<u8>) -> RegionSpec {
        let mut spec = RegionSpec::whole(pd, MemoryBuffer::new(0), 0, Access::REMOTE_WRITE);
        spec.key = key;
        spec
    }

    #[test]
    fn reused_indices_never_repeat_an_stag() {
        let (t, pd) = table();
        // Register and deregister over and over, with table keys and with
        // one fixed consumer key: no STag and no index comes twice (within
        // 2^24 allocations, a cycle).
        for key in [None, Some(0)] {
            let mut stags = std::collections::HashSet::new();
            let mut indices = std::collections::HashSet::new();
            for _ in 0..5000 {
                let stag = t.register(empty_region(pd, key)).unwrap();
                assert!(stags.insert(stag));
                assert!(indices.insert(stag.index()));
                assert_ne!(stag.index(), 0);
                t.deregister(stag).unwrap();
                assert!(!t.is_valid(stag));
            }
        }
        assert!(t.is_empty());
    }

    #[test]
    fn the_seed_fixes_the_sequence() {
        let stags = |seed| {
            let t = MemoryTable::with_seed(seed);
            let pd = t.alloc_pd();
            (0..32)
                .map(|_| t.register(empty_region(pd, None)).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(stags(9), stags(9));
        assert_ne!(stags(9), stags(10));
        // Two tables from the operating system's generator differ.
        let (a, b) = (MemoryTable::new(), MemoryTable::new());
        let pd = a.alloc_pd();
        let sa: Vec<_> = (0..4)
            .map(|_| a.register(empty_region(pd, None)).unwrap())
            .collect();
        let sb: Vec<_> = (0..4)
            .map(|_| b.register(empty_region(pd, None)).unwrap())
            .collect();
        assert_ne!(sa, sb);
    }

    #[test]
    fn memory_follows_the_live_registrations() {
        let (t, pd) = table();
        let stags: Vec<STag> = (0..20_000)
            .map(|_| t.register(empty_region(pd, None)).unwrap())
            .collect();
        assert_eq!(t.len(), 20_000);
        let peak = t.read().by_index.capacity();
        for &s in &stags[10..] {
            t.deregister(s).unwrap();
        }
        assert_eq!(t.len(), 10);
        assert!(t.read().by_index.capacity() < peak / 100);
        for &s in &stags[..10] {
            assert!(t.is_valid(s));
        }
    }

    /// The guesses a peer holding `own` STags would try first against a
    /// counter: its neighbours (index ± 1..2000, any key at index ± 1..8),
    /// one-bit changes, and the first 100,000 counter STags with key 0.
    fn educated_guesses(own: &[STag]) -> Vec<STag> {
        let mut g = Vec::new();
        for s in own {
            for d in 1..=2000u32 {
                g.push(STag(s.0.wrapping_add(d << 8)));
                g.push(STag(s.0.wrapping_sub(d << 8)));
            }
            for d in 1..=8u32 {
                for key in 0..=255 {
                    g.push(STag::new(s.index() + d, key));
                    g.push(STag::new(s.index().wrapping_sub(d), key));
                }
            }
            g.extend((0..32).map(|bit| STag(s.0 ^ (1 << bit))));
        }
        g.extend((1..=100_000).map(|i| STag::new(i, 0)));
        g.retain(|s| !own.contains(s));
        g
    }

    #[test]
    fn a_peer_guessing_from_the_stags_it_knows_finds_nothing() {
        let (t, pd) = table();
        let w = Access::REMOTE_WRITE;
        let spec = || RegionSpec::whole(pd, MemoryBuffer::new(8), 0, w);
        // 1,000 other clients' regions, then the guessing peer's own 8,
        // all in one domain (one server, many clients).
        let others: Vec<STag> = (0..1000).map(|_| t.register(spec()).unwrap()).collect();
        let own: Vec<STag> = (0..8).map(|_| t.register(spec()).unwrap()).collect();
        let guesses = educated_guesses(&own);
        assert!(guesses.len() > 150_000);
        let hits: Vec<STag> = guesses
            .iter()
            .copied()
            .filter(|&g| t.check_remote(g, pd, StreamId(1), w, 0, 8).is_ok())
            .collect();
        assert_eq!(hits, [], "{} of the others' STags guessed", hits.len());
        assert!(others.iter().all(|&s| t.is_valid(s)));
    }

    #[test]
    fn blind_guesses_hit_at_the_documented_rate() {
        // N = 2^16 live regions, G = 2^20 uniform guesses: N·G / 2^32 = 16
        // hits expected (Poisson; 4 to 32 is beyond ±3 sigma). A counter
        // would give the same mean but the hits would cluster in the low
        // indices: both halves of the index range must see hits.
        let (t, pd) = table();
        let w = Access::REMOTE_WRITE;
        for _ in 0..1 << 16 {
            t.register(RegionSpec::whole(pd, MemoryBuffer::new(0), 0, w))
                .unwrap();
        }
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut hits = Vec::new();
        for _ in 0..1 << 20 {
            // xorshift64: a guesser's own generator, unrelated to the table.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let g = STag(x as u32);
            if t.check_remote(g, pd, StreamId(1), w, 0, 0).is_ok() {
                hits.push(g);
            }
        }
        assert!((4..=32).contains(&hits.len()), "{} hits", hits.len());
        let low = hits.iter().filter(|s| s.index() < 1 << 23).count();
        assert!(low > 0 && low < hits.len(), "{hits:x?}");
    }

    /// A table shared between threads with one 4-octet region allowing
    /// `access`, and the slice a peer's access to all of it gets.
    fn shared_region(access: Access) -> (Arc<MemoryTable>, STag, RegionSlice) {
        let (t, pd) = table();
        let stag = t
            .register(RegionSpec::whole(pd, MemoryBuffer::new(4), 0, access))
            .unwrap();
        let slice = t.check_remote(stag, pd, StreamId(0), access, 0, 4).unwrap();
        (Arc::new(t), stag, slice)
    }

    #[test]
    //= rfc5041#8.3.1
    //= type=test
    //# An RNIC MUST ensure that the network interface can no longer modify an advertised buffer
    //# after the ULP revokes remote access rights for an STag.
    fn invalidation_waits_for_placement_in_progress() {
        let (t, stag, slice) = shared_region(Access::REMOTE_WRITE);
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

    #[test]
    //= rfc5041#8.3.1
    //= type=test
    //# An RNIC MUST ensure that the network interface can no longer modify an advertised buffer
    //# after the ULP revokes remote access rights for an STag.
    fn invalidation_waits_for_transmission_in_progress() {
        let (t, stag, slice) = shared_region(Access::REMOTE_READ);
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let guard = slice.lock().unwrap();
        let (t2, done2) = (Arc::clone(&t), Arc::clone(&done));
        let invalidating = std::thread::spawn(move || {
            t2.invalidate(stag).unwrap();
            done2.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        // The octets are being sent: the invalidation cannot have finished,
        // however long it is given, and the STag still reads valid.
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!done.load(std::sync::atomic::Ordering::SeqCst));
        assert_eq!(&*guard, &[0; 4]);
        drop(guard);
        invalidating.join().unwrap();
        assert!(done.load(std::sync::atomic::Ordering::SeqCst));
        assert!(!t.is_valid(stag));
        assert_eq!(slice.lock().unwrap_err(), AccessViolation::InvalidStag);
    }
}
