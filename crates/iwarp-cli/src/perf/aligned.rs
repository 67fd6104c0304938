//! Message buffers of the TCP baseline that start on a cache-line
//! boundary, so that the baseline's speed does not depend on where the
//! allocator happened to put them.
//!
//! It did: a 256 KiB read buffer comes from glibc's `mmap` path, 16
//! octets past a page boundary, and there the kernel's copy out of the
//! socket ran at about half the speed it has on a line boundary (plain
//! TCP, 64 KiB messages, 2-core VM: 1.4 to 1.8 GiB/s at offset 16; 2.1 to
//! 3.8 at offsets 0, 64 and 128; `_copy_to_iter` 22% of the profile
//! against 6%). Likely 4 KiB aliasing: the socket's pages start on a page
//! boundary, so each load of the copy follows a store 16 octets off
//! modulo 4 KiB. Whether a run got the mmapped buffer depended on glibc's
//! dynamic mmap threshold, so on the runs before it in the same process,
//! and `--baseline tcp` after an iWARP run measured anywhere from 1.1 to
//! 3.0 GiB/s. The iWARP side needs no such care: its reads append at
//! varying offsets of its staging buffer, and its copy share was 5% to 6%
//! with or without aligning them.
//!
//! `std`'s `Vec<u8>` promises no alignment, so the buffer is a `Vec` one
//! line longer, used from its first aligned octet.

use std::ops::{Deref, DerefMut};

/// The alignment of the first octet.
const LINE: usize = 64;

/// A fixed-size byte buffer whose first octet is aligned to 64 octets.
#[derive(Debug, Default)]
pub(crate) struct AlignedBuf {
    raw: Vec<u8>,
    pad: usize,
    len: usize,
}

impl AlignedBuf {
    /// `len` octets of `f(i)`.
    pub(crate) fn from_fn(len: usize, f: impl Fn(usize) -> u8) -> Self {
        let raw = vec![0u8; len + LINE];
        // A byte pointer can always be aligned; stay in bounds regardless.
        let pad = raw.as_ptr().align_offset(LINE).min(LINE - 1);
        let mut buf = Self { raw, pad, len };
        for (i, b) in buf.iter_mut().enumerate() {
            *b = f(i);
        }
        buf
    }

    /// `len` zero octets.
    pub(crate) fn zeroed(len: usize) -> Self {
        Self::from_fn(len, |_| 0)
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.raw[self.pad..self.pad + self.len]
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.raw[self.pad..self.pad + self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_at_every_size_with_its_contents() {
        for len in [0, 1, 63, 64, 4096, 65_536, 256 * 1024, 1 << 21] {
            let buf = AlignedBuf::from_fn(len, |i| (i % 251) as u8);
            assert_eq!(buf.len(), len);
            assert_eq!(buf.as_ptr() as usize % LINE, 0, "len {len}");
            assert!(buf.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        }
        assert!(AlignedBuf::zeroed(100).iter().all(|&b| b == 0));
        assert!(AlignedBuf::default().is_empty());
    }
}
