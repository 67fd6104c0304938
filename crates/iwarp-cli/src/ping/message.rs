//! What rping puts in its buffers: the ping text and the 16-octet buffer advertisement.
//!
//! Only the advertisement crosses the wire in a Send; the ping text moves by RDMA Read (server
//! from the client's start buffer) and RDMA Write (server back into the client's sink). The
//! text must still be rping's: an rping server prints it with `-v` and writes back
//! `strlen + 1` octets of it, so its NUL terminator decides how much comes back.

use iwarp::RemoteKey;

/// rping's port.
pub const DEFAULT_PORT: u16 = 7174;
/// rping's default ping size (`-S`).
pub const DEFAULT_SIZE: u32 = 64;
/// The smallest size rping accepts: room for the header with the widest ping number
/// (`"rdma-ping-2147483647: "`) and the terminating NUL, as rping computes it.
pub const MIN_SIZE: u32 = 26;
/// The largest size rping accepts (its 64 KiB buffer minus one).
pub const MAX_SIZE: u32 = 65535;
/// Octets of a buffer advertisement (rping's `struct rping_rdma_info`): big-endian address
/// (8), STag (4) and length (4), the layout of [`RemoteKey::to_bytes`].
pub const INFO_LEN: usize = RemoteKey::WIRE_LEN;

/// The character the rotating text starts with on the first ping.
const FIRST: u8 = b'A';
/// The last character of the rotation (`'A'..='z'` includes the six punctuation characters
/// between `Z` and `a`, as rping's does).
const LAST: u8 = b'z';

/// The ping number printed in ping `index`'s text. rping counts with a C `int` from 0; the
/// number wraps to 0 after `i32::MAX` instead of overflowing, so the header always fits
/// [`MIN_SIZE`].
pub fn ping_number(index: u64) -> u32 {
    (index & 0x7fff_ffff) as u32
}

/// The character ping `index`'s rotating text starts with: `A` for ping 0, one further each
/// ping, back to `A` after `z`.
pub fn start_char(index: u64) -> u8 {
    let span = u64::from(LAST - FIRST) + 1;
    FIRST + (index % span) as u8
}

/// Fills `buf` with ping `index`'s text, as an rping client does: `"rdma-ping-N: "`, then
/// ASCII from [`start_char`] cycling through `A..=z`, and a NUL in the last octet. A buffer
/// shorter than the header gets as much of the header as fits before the NUL.
pub fn fill(buf: &mut [u8], index: u64) {
    let Some(last) = buf.len().checked_sub(1) else {
        return;
    };
    let header = format!("rdma-ping-{}: ", ping_number(index));
    let n = header.len().min(last);
    buf[..n].copy_from_slice(&header.as_bytes()[..n]);
    let mut c = start_char(index);
    for b in &mut buf[n..last] {
        *b = c;
        c = if c == LAST { FIRST } else { c + 1 };
    }
    buf[last] = 0;
}

/// The C string at the start of `buf`: the octets before the first NUL (all of them if there
/// is none). This is what rping prints and what its server's `strlen` measures.
pub fn c_str(buf: &[u8]) -> &[u8] {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    &buf[..end]
}

/// The advertisement of `len` octets of a region, in rping's wire layout.
pub fn advertise(key: RemoteKey, len: u32) -> [u8; INFO_LEN] {
    RemoteKey { len, ..key }.to_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp::STag;

    fn text(len: usize, index: u64) -> Vec<u8> {
        let mut b = vec![0xffu8; len];
        fill(&mut b, index);
        b
    }

    #[test]
    fn first_ping_is_rpings() {
        let b = text(32, 0);
        assert_eq!(&b[..31], b"rdma-ping-0: ABCDEFGHIJKLMNOPQR");
        assert_eq!(b[31], 0);
        assert_eq!(c_str(&b), &b[..31]);
    }

    #[test]
    fn rotation_starts_one_further_each_ping_and_wraps_after_z() {
        assert_eq!(&text(20, 1)[13..19], b"BCDEFG");
        // Ping 57 starts at 'z' (57 characters after 'A'); the text wraps to 'A'.
        assert_eq!(start_char(57), b'z');
        assert_eq!(&text(20, 57)[14..19], b"zABCD");
        assert_eq!(start_char(58), b'A');
        // Inside one ping the text also wraps, through the punctuation after 'Z'.
        let b = text(100, 0);
        assert_eq!(&b[13 + 25..13 + 33], b"Z[\\]^_`a");
        assert_eq!(&b[13 + 57..13 + 59], b"zA");
    }

    #[test]
    fn widest_header_fits_the_minimum_size() {
        let b = text(MIN_SIZE as usize, 0x7fff_ffff);
        assert_eq!(&b[..22], b"rdma-ping-2147483647: ");
        assert_eq!(*b.last().unwrap(), 0);
        assert_eq!(ping_number(0x8000_0000), 0);
    }

    #[test]
    fn tiny_buffers_do_not_panic() {
        fill(&mut [], 5);
        let b = text(4, 5);
        assert_eq!(b, b"rdm\0");
    }

    #[test]
    fn advertisement_is_rpings_layout() {
        let key = RemoteKey {
            stag: STag(0x3fce_2900),
            addr: 0x0000_5637_f5a0_d530,
            len: 4096,
        };
        let b = advertise(key, 0x20);
        assert_eq!(
            b,
            [0, 0, 0x56, 0x37, 0xf5, 0xa0, 0xd5, 0x30, 0x3f, 0xce, 0x29, 0, 0, 0, 0, 0x20]
        );
    }
}
