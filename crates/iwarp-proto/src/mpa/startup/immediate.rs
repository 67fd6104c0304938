//! The legacy immediate-start profile (draft-culley-iwarp-mpa-02).
//!
//! The earliest MPA draft has no startup frames: the upper layer agrees on
//! a stream position (a well-known port, or its own streaming-mode
//! exchange) and from there both directions carry FPDUs with markers and
//! CRC, always ("the marker MUST be the first four octets sent",
//! draft-culley-iwarp-mpa-02 §8.1). [`ImmediateStart`] gives that profile the
//! same interface as the frame-exchanging machines: it is established from
//! the start with [`FramingParams::IMMEDIATE_START`], takes no input and
//! sends nothing.

use std::time::Instant;

use super::error::StartupError;
use super::outcome::{Established, Event};
use super::{MpaStartup, Role, StartupMachine, State};
use crate::mpa::FramingParams;

/// A "startup" with no frames: established at once, markers and CRC on in
/// both directions.
#[derive(Debug, Clone)]
pub struct ImmediateStart {
    established: Established,
    event_pending: bool,
}

impl ImmediateStart {
    /// The immediate-start profile for one end. The role only labels the
    /// outcome: both ends may send at once (there is no rule 4 here).
    //= draft-culley-iwarp-mpa-02#7.1
    //# MPA senders MUST insert a marker into the data stream at a 512 octet periodic interval
    //# in the TCP Sequence Number Space.
    //= draft-culley-iwarp-mpa-02#7.2
    //# When sending an FPDU, the sender MUST include a valid CRC field.
    //= draft-culley-iwarp-mpa-02#7.2
    //# When an FPDU is received, the receiver MUST first perform the following: - 1) Calculate
    //# the CRC of the incoming FPDU in the same fashion as defined above. - 2) Verify that the
    //# calculated CRC-32c value is the same as the received CRC-32c value found in the FPDU CRC
    //# field.
    //= draft-culley-iwarp-mpa-02#7.4
    //# To do this, the receiver MUST: - * locate the start of the FPDU unambiguously, - *
    //# verify its CRC.
    //= draft-culley-iwarp-mpa-02#8.1
    //# In this case the marker MUST be the first four octets sent (this marker has the special
    //# value 0x0000, meaning it belongs to the FPDU that follows).
    pub fn new(role: Role) -> Self {
        Self {
            established: Established {
                role,
                revision: None,
                framing: FramingParams::IMMEDIATE_START,
                ird_ord: None,
                rtr: None,
                private_data: Vec::new(),
            },
            event_pending: true,
        }
    }
}

impl MpaStartup for ImmediateStart {
    fn state(&self) -> State {
        State::Established
    }

    fn established(&self) -> Option<&Established> {
        Some(&self.established)
    }
}

impl StartupMachine for ImmediateStart {
    type Event = Event;
    type Error = StartupError;

    /// Takes nothing: every octet from the agreed position on is FPDU data.
    fn handle_input(&mut self, _input: &[u8], _now: Instant) -> Result<usize, StartupError> {
        Ok(0)
    }

    fn handle_eof(&mut self) -> Result<(), StartupError> {
        Ok(())
    }

    fn handle_timeout(&mut self, _now: Instant) -> Result<(), StartupError> {
        Ok(())
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        None
    }

    fn poll_event(&mut self) -> Option<Event> {
        if std::mem::take(&mut self.event_pending) {
            Some(Event::Established(self.established.clone()))
        } else {
            None
        }
    }

    fn error(&self) -> Option<&StartupError> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    //= draft-culley-iwarp-mpa-02#7.1
    //= type=test
    //# MPA senders MUST insert a marker into the data stream at a 512 octet periodic interval
    //# in the TCP Sequence Number Space.
    //= draft-culley-iwarp-mpa-02#7.2
    //= type=test
    //# When sending an FPDU, the sender MUST include a valid CRC field.
    //= draft-culley-iwarp-mpa-02#7.2
    //= type=test
    //# When an FPDU is received, the receiver MUST first perform the following: - 1) Calculate
    //# the CRC of the incoming FPDU in the same fashion as defined above. - 2) Verify that the
    //# calculated CRC-32c value is the same as the received CRC-32c value found in the FPDU CRC
    //# field.
    //= draft-culley-iwarp-mpa-02#7.4
    //= type=test
    //# To do this, the receiver MUST: - * locate the start of the FPDU unambiguously, - *
    //# verify its CRC.
    fn established_at_once_with_markers_and_crc() {
        let now = Instant::now();
        for role in [Role::Initiator, Role::Responder] {
            let mut m = ImmediateStart::new(role);
            assert_eq!(m.state(), State::Established);
            let Some(Event::Established(e)) = m.poll_event() else {
                panic!("no event");
            };
            assert_eq!(e.framing, FramingParams::IMMEDIATE_START);
            // Markers and CRC, both ways, always.
            assert!(e.framing.crc && e.framing.send_markers && e.framing.receive_markers);
            assert_eq!(e.role, role);
            assert_eq!(e.revision, None);
            assert!(!e.must_receive_before_sending());
            assert_eq!(e.rtr_to_send(), None);
            assert_eq!(m.poll_event(), None);
            // Everything is FPDU data: nothing is taken, nothing is sent.
            assert_eq!(m.handle_input(b"\x00\x00\x00\x00anything", now), Ok(0));
            assert_eq!(m.poll_transmit(), None);
            assert_eq!(m.poll_timeout(), None);
            assert_eq!(m.handle_eof(), Ok(()));
            assert_eq!(m.established(), Some(&e));
        }
        // The two ends agree.
        assert_eq!(
            FramingParams::IMMEDIATE_START.mirrored(),
            FramingParams::IMMEDIATE_START
        );
    }
}
