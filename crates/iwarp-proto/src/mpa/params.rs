//! What the startup phase settles for full operation.

/// The framing rules of one MPA connection in full operation, as settled
/// by the startup frames (or fixed by the immediate-start profile).
///
/// Markers are per direction: each end declares the markers it needs to
/// receive (RFC 5044 §7.1.1, M bit). CRC is both ways or neither: on when
/// either end asks for it (C bit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FramingParams {
    /// CRC32c generated on transmit and checked on receive.
    pub crc: bool,
    /// Markers inserted into what this end transmits.
    pub send_markers: bool,
    /// Markers expected in what this end receives.
    pub receive_markers: bool,
}

impl FramingParams {
    /// The legacy immediate-start profile of draft-culley-iwarp-mpa-02:
    /// markers and CRC always on, both ways.
    pub const IMMEDIATE_START: Self = Self {
        crc: true,
        send_markers: true,
        receive_markers: true,
    };

    /// The same connection seen from the other end.
    pub const fn mirrored(self) -> Self {
        Self {
            crc: self.crc,
            send_markers: self.receive_markers,
            receive_markers: self.send_markers,
        }
    }
}
