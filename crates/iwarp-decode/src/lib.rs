//! A capture decoder for iWARP traffic, as a library.
//!
//! It reads pcap and pcapng captures, reassembles each TCP direction,
//! follows the MPA startup (or IFT negotiation) and framing, and reads
//! every DDP segment and RDMAP message with the stack's own parsers from
//! `iwarp-proto`, so what it reports is what the stack sees. On top of the
//! single PDUs it runs the checks that need what came before (MSN order,
//! Read Responses against their Requests, outstanding Reads against the
//! negotiated ORD, tagged offsets within a message, Terminates against the
//! PDU they name) and rebuilds whole RDMA operations (Sends, RDMA Writes,
//! RDMA Reads with their latency) for a per-connection summary.
//!
//! Everything comes out as typed [`Record`]s: numbers, enums and the
//! protocol crate's own reprs, whose words are their `Display` impls; with
//! the `serde` feature they are `Serialize`. The `iwarp decode` command is
//! a thin layer over this crate: arguments and text or JSON rendering.
//!
//! ```no_run
//! use iwarp_decode::{CaptureReader, Decoder, Event, Options};
//!
//! let mut reader = CaptureReader::open("rping.pcap".as_ref())?;
//! let mut decoder = Decoder::new(Options::default());
//! while let Some(frame) = reader.next_frame() {
//!     for record in decoder.frame(&frame?) {
//!         if let Event::Pdu(pdu) = &record.event {
//!             println!("{} {:?}", record.frame, pdu.opcode());
//!         }
//!     }
//! }
//! let (records, summary) = decoder.finish();
//! println!("{} records at the end, {} connections", records.len(), summary.connections.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`capture`] | reading pcap and pcapng files |
//! | [`packet`] | link layer, IPv4/IPv6 and TCP headers of a frame |
//! | [`tcp`] | reassembly of one direction in sequence order |
//! | [`ahead`] | the placement view: PDUs a receiver could place before a hole fills |
//! | [`connection`] | a connection's two directions, their startups settled |
//! | [`stream`] | one direction: its opening, then its PDUs |
//! | [`startup`] | MPA frames and IFT indications, described and settled |
//! | [`mpa`] | MPA FPDUs, CRC errors survived, resynchronisation |
//! | [`hunt`] | finding an FPDU boundary by its CRC |
//! | [`ift`] | IFT frames |
//! | [`ulpdu`] | a ULPDU read as DDP and RDMAP |
//! | [`checks`] | stateful checks across PDUs |
//! | [`ops`] | whole RDMA operations and their statistics |
//! | `track` | the messages behind the PDUs, for checks and operations |
//! | [`event`] | what is reported |
//! | [`note`] | what the decoding decided or met |
//! | [`summary`] | the closing counts |
//! | [`synth`] | building captures of made-up traffic, for tests |
//!
//! Nothing a capture holds can make it panic: every length is checked by
//! the parsers, and the decoder's own arithmetic on offsets is checked or
//! saturating.

#![forbid(unsafe_code)]

pub mod ahead;
pub mod capture;
pub mod checks;
pub mod connection;
mod decoder;
pub mod event;
pub mod hunt;
pub mod ift;
pub mod mpa;
pub mod note;
pub mod ops;
pub mod packet;
#[cfg(feature = "serde")]
mod ser;
pub mod startup;
pub mod stream;
pub mod summary;
pub mod synth;
pub mod tcp;
mod track;
pub mod ulpdu;

pub use capture::{CaptureError, CaptureReader, Frame, LinkType};
pub use decoder::{Decoder, MarkerMode, Options};
pub use event::{Event, Record};
pub use summary::Summary;

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}
