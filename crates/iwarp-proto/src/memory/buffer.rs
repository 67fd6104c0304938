//! The shared octets behind registered regions.

use std::sync::Arc;

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Octets shared between the user and the engines: a cheaply clonable
/// handle (an `Arc`) to a fixed-size, lock-protected byte array.
///
/// The user reads and writes it through [`MemoryBuffer::read`] and
/// [`MemoryBuffer::write`] while the engine places received payload into it
/// and transmits from it. One buffer may back several registrations.
#[derive(Debug, Clone)]
pub struct MemoryBuffer(Arc<RwLock<Box<[u8]>>>);

impl MemoryBuffer {
    /// A zero-filled buffer of `len` octets.
    pub fn new(len: usize) -> Self {
        Self::from(vec![0u8; len])
    }

    /// Its length in octets; fixed for its lifetime.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// True for a zero-length buffer.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Shared access to the octets. A panic in another holder does not
    /// make the octets unusable (`parking_lot`'s locks are not poisoned).
    pub fn read(&self) -> RwLockReadGuard<'_, Box<[u8]>> {
        self.0.read()
    }

    /// Shared access even while a writer waits, for a thread that may
    /// already hold a read of these octets (see `RegionSlice::lock`).
    pub(crate) fn read_recursive(&self) -> RwLockReadGuard<'_, Box<[u8]>> {
        self.0.read_recursive()
    }

    /// Exclusive access to the octets.
    pub fn write(&self) -> RwLockWriteGuard<'_, Box<[u8]>> {
        self.0.write()
    }

    /// A copy of the octets (tests and tools).
    pub fn to_vec(&self) -> Vec<u8> {
        self.read().to_vec()
    }

    /// True when both handles name the same octets.
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// A number that names these octets while any handle to them lives:
    /// equal for two handles exactly when [`MemoryBuffer::ptr_eq`] holds.
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as *const () as usize
    }
}

impl From<Vec<u8>> for MemoryBuffer {
    fn from(v: Vec<u8>) -> Self {
        Self(Arc::new(RwLock::new(v.into_boxed_slice())))
    }
}
