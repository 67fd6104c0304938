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
//!
//! # STags a peer cannot guess
//!
//! An STag is a 24-bit index and an 8-bit key. The table draws both from a
//! keyed permutation of a counter (`stag_allocator`), with a 128-bit
//! secret from the operating system ([`MemoryTable::new`]; a seeded table,
//! [`MemoryTable::with_seed`], repeats its STags for tests). To a peer, every
//! STag it has not been told is about equally likely among the
//! 2^32 - 2^8 possible ones (index 0 is not used). An index is handed out
//! again only after a cycle of 2^24 allocations, and with table-chosen keys
//! no STag repeats within 2^32 allocations; memory follows the live
//! registrations only.
//!
//! The odds of a blind guess, with `N` live regions the guessing peer's
//! stream may use (its protection domain) and `G` guesses:
//!
//! - one guess hits with probability `p = N / (2^32 - 2^8 - K)` ≈ `N / 2^32`,
//!   `K` being the STags the peer already knows;
//! - `G` guesses hit at least once with probability `1 - (1 - p)^G`, at
//!   most `G·N / 2^32`.
//!
//! | live regions `N` | one guess | 1,000 guesses | 10^6 guesses | guesses to a 50 % chance |
//! | --- | --- | --- | --- | --- |
//! | 1 | 2.3·10^-10 | 2.3·10^-7 | 2.3·10^-4 | 3.0·10^9 |
//! | 1,000 | 2.3·10^-7 | 2.3·10^-4 | 0.21 | 3.0·10^6 |
//! | 100,000 | 2.3·10^-5 | 0.023 | ≈ 1 | 3.0·10^4 |
//!
//! A wrong guess is an invalid STag: the stream is terminated (RFC 5041
//! §7.1 tagged check 1, Terminate with DDP tagged buffer error 0x00, or
//! RDMAP remote protection error 0x00 for a Read Request), so each guess
//! costs the peer a new connection and its startup. At 1,000 connections a
//! second, 3·10^6 guesses take about 50 minutes. That is what 32 bits give;
//! an application with many untrusted clients should give each its own
//! protection domain, or bind its regions to the client's stream
//! ([`RegionSpec::stream`]): a guess that finds another domain's region is
//! refused as not associated (RFC 5041 §8.2), which tells the peer that
//! the STag exists but gives it no access.

mod access;
mod buffer;
pub mod copy;
mod error;
mod region;
mod stag;
mod stag_allocator;
mod table;

pub use access::Access;
pub use buffer::MemoryBuffer;
pub use error::{AccessViolation, NoRandomness, RegisterError};
pub use region::{RegionReadGuard, RegionSlice};
pub use stag::STag;
pub use table::{MemoryTable, ProtectionDomain, RegionSpec, StreamId};
