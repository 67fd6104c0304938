//! Memory protection: protection domains, registered regions, STags.
//!
//! RDMA lets a remote peer write into and read from local memory, so every
//! remote access goes through this module. A region is registered in a
//! [`MemoryTable`] with a protection domain, a base tagged offset, a length
//! and access rights, and gets an [`STag`]; DDP and RDMAP find it again by
//! that STag and ask the table whether an access is allowed
//! (RFC 5041 §7.1, §8.2, §8.3.1; RFC 5040 §7).
//!
//! The octets of a region live in a [`MemoryBuffer`], a cheaply clonable
//! handle shared by the user and the engines. Placement and transmission
//! hold a per-registration lock while they touch the octets, so that
//! [`MemoryTable::invalidate`] and [`MemoryTable::deregister`] take effect
//! before they return: once they have returned, no further octet is placed
//! or read through that STag (RFC 5041 §8.3.1 item 6).

mod access;
mod buffer;
mod error;
mod region;
mod stag;
mod table;

pub use access::Access;
pub use buffer::MemoryBuffer;
pub use error::{AccessViolation, RegisterError};
pub use region::{RegionReadGuard, RegionSlice};
pub use stag::STag;
pub use table::{MemoryTable, ProtectionDomain, RegionSpec, StreamId};
