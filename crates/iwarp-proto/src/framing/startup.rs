//! The interface of a startup exchange: what runs on a TCP connection
//! before framing starts, MPA's Request/Reply frames or IFT's Adaption
//! Indications.
//!
//! The machines are sans-IO, like `quinn-proto`: they own no socket and
//! read no clock, so one loop in the runtime drives any of them:
//!
//! - received octets go to [`handle_input`](StartupMachine::handle_input),
//!   which returns how many it took. It never takes an octet beyond the
//!   peer's startup message: what follows is the first PDU and belongs to
//!   the deframer, so the caller keeps the rest;
//! - the end of the stream goes to [`handle_eof`](StartupMachine::handle_eof);
//! - time goes to [`handle_timeout`](StartupMachine::handle_timeout) once
//!   [`poll_timeout`](StartupMachine::poll_timeout)'s instant has passed;
//! - octets to send come from [`poll_transmit`](StartupMachine::poll_transmit)
//!   and reports (the exchange is settled, a request waits for a decision,
//!   …) from [`poll_event`](StartupMachine::poll_event).
//!
//! A failure is returned by the `handle_*` call that met it, and by every
//! later one; [`error`](StartupMachine::error) keeps it.

use std::time::Instant;

/// A startup exchange, driven by its caller. See the module documentation.
pub trait StartupMachine {
    /// What [`StartupMachine::poll_event`] reports.
    type Event;
    /// Why the exchange failed; the TCP connection is then to be closed.
    type Error: Clone;

    /// Feeds octets received from the peer. Returns how many were taken:
    /// never more than the rest of the peer's startup message. Once the
    /// machine has finished (or while it waits for its application) it
    /// takes nothing: the rest belongs to the deframer. `now` stamps the
    /// arrival.
    fn handle_input(&mut self, input: &[u8], now: Instant) -> Result<usize, Self::Error>;

    /// The peer closed its half of the connection (FIN).
    fn handle_eof(&mut self) -> Result<(), Self::Error>;

    /// Time has passed; fails the exchange if the current deadline is over.
    fn handle_timeout(&mut self, now: Instant) -> Result<(), Self::Error>;

    /// The instant at which [`handle_timeout`](Self::handle_timeout) should
    /// next be called, if the machine is waiting with a deadline.
    fn poll_timeout(&self) -> Option<Instant>;

    /// The next octets to send, in order.
    fn poll_transmit(&mut self) -> Option<Vec<u8>>;

    /// The next event.
    fn poll_event(&mut self) -> Option<Self::Event>;

    /// The failure, once failed.
    fn error(&self) -> Option<&Self::Error>;
}

/// A boxed machine is a machine, so that a caller can hold any of them
/// (`Box<dyn StartupMachine<Event = _, Error = _>>`).
impl<M: StartupMachine + ?Sized> StartupMachine for Box<M> {
    type Event = M::Event;
    type Error = M::Error;

    fn handle_input(&mut self, input: &[u8], now: Instant) -> Result<usize, Self::Error> {
        (**self).handle_input(input, now)
    }

    fn handle_eof(&mut self) -> Result<(), Self::Error> {
        (**self).handle_eof()
    }

    fn handle_timeout(&mut self, now: Instant) -> Result<(), Self::Error> {
        (**self).handle_timeout(now)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        (**self).poll_timeout()
    }

    fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        (**self).poll_transmit()
    }

    fn poll_event(&mut self) -> Option<Self::Event> {
        (**self).poll_event()
    }

    fn error(&self) -> Option<&Self::Error> {
        (**self).error()
    }
}
