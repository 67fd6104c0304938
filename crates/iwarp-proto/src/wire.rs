//! What the wire formats share, in the style of smoltcp's `wire` module.
//!
//! Every header here is read and written the same way:
//!
//! - a zero-copy view over octets, `View<T: AsRef<[u8]>>`, whose
//!   `new_checked` verifies the length once and whose accessors read the
//!   raw fields and never panic (a field beyond the end reads as zero);
//! - a plain value, the `Repr`, with `parse(&view) -> Result` (which checks
//!   what the fields mean), `buffer_len()` and `emit(&mut [u8]) -> Result`
//!   (which refuses a short buffer instead of panicking).
//!
//! The views: [`crate::ddp::Segment`], [`crate::rdmap::ReadRequestView`],
//! [`crate::rdmap::TerminateView`], [`crate::ift::frame::IftHeaderView`],
//! [`crate::ift::indication::IndicationView`] and MPA's
//! [`crate::mpa::startup::StartupFrame`]. The capture decoder reads the wire
//! through the same types as the stack.

/// Too few octets: to parse a header, or to emit one into a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[error("{needed} octets needed, {available} available")]
pub struct Truncated {
    /// Octets the format needs.
    pub needed: usize,
    /// Octets there were.
    pub available: usize,
}

impl Truncated {
    /// `Ok` if `octets` holds at least `needed` octets.
    pub(crate) const fn check(octets: &[u8], needed: usize) -> Result<(), Self> {
        if octets.len() < needed {
            Err(Self {
                needed,
                available: octets.len(),
            })
        } else {
            Ok(())
        }
    }

    /// The first `needed` octets of `buf`, for an `emit`.
    pub(crate) fn room(buf: &mut [u8], needed: usize) -> Result<&mut [u8], Self> {
        let available = buf.len();
        buf.get_mut(..needed).ok_or(Self { needed, available })
    }
}

/// The octets `at..at + N` of `octets`, zeros where they run past the end:
/// what a view's accessors read, so that they never panic.
pub(crate) fn field<const N: usize>(octets: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(src) = octets.get(at..).map(|rest| &rest[..rest.len().min(N)]) {
        out[..src.len()].copy_from_slice(src);
    }
    out
}

/// A big-endian 16-bit field.
pub(crate) fn be16(octets: &[u8], at: usize) -> u16 {
    u16::from_be_bytes(field(octets, at))
}

/// A big-endian 32-bit field.
pub(crate) fn be32(octets: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(field(octets, at))
}

/// A big-endian 64-bit field.
pub(crate) fn be64(octets: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(field(octets, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_past_the_end_read_as_zero() {
        let b = [1u8, 2, 3];
        assert_eq!(be16(&b, 0), 0x0102);
        assert_eq!(be16(&b, 2), 0x0300);
        assert_eq!(be32(&b, 5), 0);
        assert_eq!(be64(&b, 0), 0x0102_0300_0000_0000);
    }

    #[test]
    fn short_buffers_are_refused() {
        assert_eq!(
            Truncated::check(&[0; 3], 4),
            Err(Truncated {
                needed: 4,
                available: 3
            })
        );
        assert!(Truncated::check(&[0; 4], 4).is_ok());
        let mut buf = [0u8; 2];
        assert!(Truncated::room(&mut buf, 3).is_err());
        assert_eq!(Truncated::room(&mut buf, 2).map(|b| b.len()), Ok(2));
    }
}
