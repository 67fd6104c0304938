//! Devices, protection domains and memory regions: the memory a peer can
//! reach.
//!
//! A [`Device`] holds the table of STags, like verbs' `ibv_context`: its
//! protection domains partition it, and the queue pairs of a domain
//! resolve every STag a peer names in it. A [`MemoryRegion`] owns its
//! buffer. Registering it in a [`ProtectionDomain`] gives it an STag; its
//! [`RemoteKey`] (STag, tagged offset of the first octet, length) is what a
//! peer needs to RDMA Read or Write it. The connection tasks place incoming
//! payload into regions and send from them while the application reads
//! and writes them too: access goes through short-lived locks, preferably
//! with the closure methods ([`MemoryRegion::read_with`],
//! [`MemoryRegion::write_with`], [`MemoryRegion::copy_from`]), which cannot
//! be held by mistake while posting work on the same region.

use std::ops::{Bound, Deref, DerefMut, RangeBounds};
use std::sync::Arc;

use parking_lot::{RwLockReadGuard, RwLockWriteGuard};

use iwarp_proto::memory::{self as pm, MemoryBuffer, MemoryTable, RegionSpec};
use iwarp_proto::rdmap::Sge;

pub use iwarp_proto::memory::{Access, STag};

use crate::error::Error;

/// An iWARP device: the table of STags its protection domains, memory
/// regions and queue pairs share, as a verbs `ibv_context` is. STags are
/// drawn from a keyed permutation of a counter, unpredictable to peers
/// (`iwarp_proto::memory`). A process usually opens one; regions of one
/// device are out of reach of the queue pairs of another. Cloning gives
/// another handle to the same device.
#[derive(Debug, Clone, Default)]
pub struct Device {
    table: Arc<MemoryTable>,
}

impl Device {
    /// A new device with an empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// A new protection domain on this device.
    pub fn alloc_pd(&self) -> ProtectionDomain {
        ProtectionDomain {
            id: self.table.alloc_pd(),
            device: self.clone(),
        }
    }

    /// The table of STags.
    pub(crate) fn table(&self) -> &Arc<MemoryTable> {
        &self.table
    }
}

/// A protection domain: regions registered in it can be used only by
/// queue pairs of the same domain (RFC 5041 §8.2). Made by
/// [`Device::alloc_pd`]; cloning gives another handle to the same domain.
#[derive(Debug, Clone)]
pub struct ProtectionDomain {
    pub(crate) id: pm::ProtectionDomain,
    device: Device,
}

impl PartialEq for ProtectionDomain {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id && Arc::ptr_eq(&self.device.table, &other.device.table)
    }
}

impl Eq for ProtectionDomain {}

impl std::hash::Hash for ProtectionDomain {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id.hash(state);
    }
}

impl ProtectionDomain {
    /// The device it belongs to.
    pub fn device(&self) -> &Device {
        &self.device
    }

    fn table(&self) -> &Arc<MemoryTable> {
        &self.device.table
    }

    /// Registers `buffer` with the given access rights. Its tagged offsets
    /// start at 0.
    pub fn register(&self, buffer: Vec<u8>, access: Access) -> Result<MemoryRegion, Error> {
        self.register_with(buffer, RegisterOptions::new(access))
    }

    /// Registers `buffer` with explicit options.
    pub fn register_with(
        &self,
        buffer: Vec<u8>,
        options: RegisterOptions,
    ) -> Result<MemoryRegion, Error> {
        let len = buffer.len();
        if u32::try_from(len).is_err() {
            return Err(Error::RegionTooLarge { len });
        }
        let buffer = MemoryBuffer::from(buffer);
        let mut spec = RegionSpec::whole(self.id, buffer.clone(), options.base_to, options.access);
        spec.key = options.key;
        let stag = self.table().register(spec).map_err(Error::Register)?;
        Ok(MemoryRegion {
            inner: Arc::new(RegionInner {
                stag,
                buffer,
                base_to: options.base_to,
                access: options.access,
                pd: self.clone(),
            }),
        })
    }
}

/// How to register a region: see [`ProtectionDomain::register_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegisterOptions {
    /// What the region may be used for.
    pub access: Access,
    /// The tagged offset of its first octet, like a verbs virtual address
    /// (`rping` advertises buffer addresses). Default 0.
    pub base_to: u64,
    /// The 8-bit key in the low octet of the STag (verbs rkey style).
    /// `None`, the default, lets the stack choose an unpredictable one;
    /// with a key of your own, an STag a peer kept from an earlier
    /// registration can name a new one after 2^24 registrations, unless
    /// you change the key.
    pub key: Option<u8>,
}

impl RegisterOptions {
    /// The given rights, tagged offsets from 0, a key the stack chooses.
    pub const fn new(access: Access) -> Self {
        Self {
            access,
            base_to: 0,
            key: None,
        }
    }
}

/// What a peer needs to reach a region: its STag, the tagged offset of its
/// first octet and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemoteKey {
    /// The region's STag.
    pub stag: STag,
    /// Tagged offset of the region's first octet.
    pub addr: u64,
    /// Length in octets.
    pub len: u32,
}

impl RemoteKey {
    /// Octets in [`RemoteKey::to_bytes`].
    pub const WIRE_LEN: usize = 16;

    /// The key as 16 octets, big-endian address, STag, length: the layout
    /// rping's `struct rping_rdma_info` uses.
    pub fn to_bytes(&self) -> [u8; Self::WIRE_LEN] {
        let mut b = [0u8; Self::WIRE_LEN];
        b[..8].copy_from_slice(&self.addr.to_be_bytes());
        b[8..12].copy_from_slice(&self.stag.0.to_be_bytes());
        b[12..].copy_from_slice(&self.len.to_be_bytes());
        b
    }

    /// Reads a key in the layout of [`RemoteKey::to_bytes`].
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        let b: &[u8; Self::WIRE_LEN] = b.get(..Self::WIRE_LEN)?.try_into().ok()?;
        let (addr, rest) = b.split_at(8);
        Some(Self {
            addr: u64::from_be_bytes(addr.try_into().ok()?),
            stag: STag(u32::from_be_bytes(rest[..4].try_into().ok()?)),
            len: u32::from_be_bytes(rest[4..].try_into().ok()?),
        })
    }

    /// The key for `len` octets from `offset` into the region.
    pub fn slice(&self, offset: u64, len: u32) -> Option<Self> {
        let end = offset.checked_add(u64::from(len))?;
        (end <= u64::from(self.len)).then_some(Self {
            stag: self.stag,
            addr: self.addr.checked_add(offset)?,
            len,
        })
    }
}

#[derive(Debug)]
struct RegionInner {
    stag: STag,
    buffer: MemoryBuffer,
    base_to: u64,
    access: Access,
    pd: ProtectionDomain,
}

impl Drop for RegionInner {
    fn drop(&mut self) {
        // Deregistration takes effect before the buffer can be reused;
        // an STag already invalidated is simply gone.
        let _ = self.pd.table().deregister(self.stag);
    }
}

/// A registered memory region. Cloning gives another handle to the same
/// region; the last handle dropped deregisters it.
#[derive(Debug, Clone)]
pub struct MemoryRegion {
    inner: Arc<RegionInner>,
}

impl MemoryRegion {
    /// Its STag (the lkey, and the rkey when remote access is allowed).
    pub fn stag(&self) -> STag {
        self.inner.stag
    }

    /// Its length in octets.
    pub fn len(&self) -> usize {
        self.inner.buffer.len()
    }

    /// Whether it has no octets.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Its access rights.
    pub fn access(&self) -> Access {
        self.inner.access
    }

    /// The protection domain it is registered in.
    pub fn pd(&self) -> &ProtectionDomain {
        &self.inner.pd
    }

    /// What a peer needs to reach the whole region.
    pub fn remote_key(&self) -> RemoteKey {
        RemoteKey {
            stag: self.inner.stag,
            addr: self.inner.base_to,
            len: self.len() as u32,
        }
    }

    /// Whether the STag is still valid (not invalidated locally or by a
    /// peer's Send with Invalidate).
    pub fn is_valid(&self) -> bool {
        self.inner.pd.table().is_valid(self.inner.stag)
    }

    /// Invalidates the STag: once this returns, no peer can read or write
    /// the region, and no further octet is placed in it.
    pub fn invalidate(&self) -> Result<(), Error> {
        self.inner
            .pd
            .table()
            .invalidate(self.inner.stag)
            .map_err(Error::LocalProtection)
    }

    /// The local buffer descriptor for `range` of the region, for posting
    /// work.
    pub fn sge(&self, range: impl RangeBounds<usize>) -> Result<Sge, Error> {
        let len = self.len();
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.saturating_add(1),
            Bound::Excluded(&e) => e,
            Bound::Unbounded => len,
        };
        if start > end || end > len {
            return Err(Error::OutOfRange { start, end, len });
        }
        Ok(Sge {
            stag: self.inner.stag,
            to: self.inner.base_to + start as u64,
            len: (end - start) as u32,
        })
    }

    /// Calls `f` with the region's contents.
    pub fn read_with<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(&self.inner.buffer.read())
    }

    /// Calls `f` with the region's contents, writable.
    pub fn write_with<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        f(&mut self.inner.buffer.write())
    }

    /// Copies `data` into the region at `offset`.
    pub fn copy_from(&self, offset: usize, data: &[u8]) -> Result<(), Error> {
        let len = self.len();
        let end = offset.checked_add(data.len()).filter(|&e| e <= len);
        let Some(end) = end else {
            return Err(Error::OutOfRange {
                start: offset,
                end: offset.saturating_add(data.len()),
                len,
            });
        };
        self.write_with(|b| b[offset..end].copy_from_slice(data));
        Ok(())
    }

    /// A copy of the region's contents.
    pub fn to_vec(&self) -> Vec<u8> {
        self.inner.buffer.to_vec()
    }

    /// Locks the region for reading. Do not hold the guard while posting
    /// work that sends from or places into this region from the same
    /// thread, nor across an `.await`: the connection tasks need the lock
    /// too. Prefer [`MemoryRegion::read_with`].
    pub fn lock(&self) -> RegionRef<'_> {
        RegionRef(self.inner.buffer.read())
    }

    /// Locks the region for writing; the same caution as
    /// [`MemoryRegion::lock`] applies. Prefer [`MemoryRegion::write_with`].
    pub fn lock_mut(&self) -> RegionMut<'_> {
        RegionMut(self.inner.buffer.write())
    }
}

/// The contents of a region, locked for reading.
#[derive(Debug)]
pub struct RegionRef<'a>(RwLockReadGuard<'a, Box<[u8]>>);

impl Deref for RegionRef<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

/// The contents of a region, locked for writing.
#[derive(Debug)]
pub struct RegionMut<'a>(RwLockWriteGuard<'a, Box<[u8]>>);

impl Deref for RegionMut<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl DerefMut for RegionMut<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_key_round_trips_in_rping_layout() {
        let k = RemoteKey {
            stag: STag(0x3fce_2900),
            addr: 0x0000_5637_f5a0_d530,
            len: 0x20,
        };
        let b = k.to_bytes();
        assert_eq!(
            b,
            [0, 0, 0x56, 0x37, 0xf5, 0xa0, 0xd5, 0x30, 0x3f, 0xce, 0x29, 0, 0, 0, 0, 0x20]
        );
        assert_eq!(RemoteKey::from_bytes(&b), Some(k));
        assert_eq!(RemoteKey::from_bytes(&b[..15]), None);
        assert_eq!(k.slice(8, 8).map(|s| s.addr), Some(k.addr + 8));
        assert_eq!(k.slice(8, 25), None);
    }

    #[test]
    fn register_sge_invalidate_and_drop() {
        let device = Device::new();
        let pd = device.alloc_pd();
        let mr = pd
            .register(vec![1, 2, 3, 4], Access::LOCAL_WRITE | Access::REMOTE_READ)
            .unwrap();
        assert_eq!(mr.len(), 4);
        assert_eq!(mr.sge(1..3).unwrap().len, 2);
        assert_eq!(mr.sge(1..3).unwrap().to, 1);
        assert!(mr.sge(2..5).is_err());
        mr.copy_from(2, &[9, 9]).unwrap();
        assert_eq!(mr.to_vec(), vec![1, 2, 9, 9]);
        assert!(mr.copy_from(3, &[0, 0]).is_err());
        assert!(mr.is_valid());
        mr.invalidate().unwrap();
        assert!(!mr.is_valid());
        let stag = mr.stag();
        drop(mr);
        assert!(!device.table().is_valid(stag));
    }

    #[test]
    fn each_device_has_its_own_table() {
        let (a, b) = (Device::new(), Device::new());
        let (pa, pb) = (a.alloc_pd(), b.alloc_pd());
        assert_ne!(pa, pb, "domains of two devices differ, whatever their ids");
        assert_eq!(pa, pa.clone());
        assert_eq!(pa.device().table().alloc_pd(), b.table().alloc_pd());
        let mr = pa.register(vec![0; 8], Access::REMOTE_READ).unwrap();
        assert!(a.table().is_valid(mr.stag()));
        assert!(!b.table().is_valid(mr.stag()));
        assert_eq!(mr.pd(), &pa);
    }
}
