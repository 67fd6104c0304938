//! The control protocol between an `iwarp perf` client and server.
//!
//! perftest exchanges its connection details over a side TCP socket and requires "the same
//! options" on both ends. We keep the side socket (the *control connection*, on `--port`) but
//! let the client tell the server the whole [`TestSpec`], and use the same channel to bracket
//! every measured phase, so the data connections carry nothing but test traffic.
//!
//! # Wire format (version 1)
//!
//! Every message is one frame:
//!
//! ```text
//! +------+------+------+------+-------------+---------------------------+
//! | 'I'  | 'W'  | 'P'  | 'F'  | version u16 | length u32 | JSON body ... |
//! +------+------+------+------+-------------+---------------------------+
//! ```
//!
//! integers big-endian, `length` counting the JSON body only (at most [`MAX_BODY`] octets).
//! The body is a [`ControlMsg`] object tagged by `"type"`, e.g.
//! `{"type":"start_phase","size":65536,"phase":"measure"}`. A receiver rejects a frame with
//! another magic ("not an iwarp perf peer") or another version (both versions are named in the
//! error), so incompatible tools fail at once and clearly.
//!
//! # Session
//!
//! ```text
//! client                                   server
//!   Hello{transport, spec}        ->
//!                                 <-  Welcome{session, data_port}   (or Error)
//!   (opens spec.connections data connections to data_port; backend-specific handshake)
//!   StartPhase{size, warmup}      ->
//!                                 <-  PhaseReady{peer_info}
//!   (traffic on the data connections)
//!   EndPhase                      ->
//!                                 <-  PhaseDone{tallies}             (or Error)
//!   ... one warm-up and one measured phase per size ...
//!   Bye                           ->
//! ```
//!
//! The client sends `EndPhase` only after every operation it posted has completed, so the
//! data connections are idle at each phase boundary and the server's tallies are final.

use std::io;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::error::PerfError;
use super::spec::{TestSpec, Transport};

/// Frame magic: "IWPF" (iWARP PerF).
pub const MAGIC: [u8; 4] = *b"IWPF";
/// Version of this control protocol.
pub const VERSION: u16 = 1;
/// Largest accepted JSON body; a spec is a few hundred octets.
pub const MAX_BODY: u32 = 64 * 1024;
/// How long one control request may take to be answered.
pub const CONTROL_TIMEOUT: Duration = Duration::from_secs(30);

/// Which of the two phases of a size is starting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Unmeasured operations that warm caches, buffers and TCP windows.
    Warmup,
    /// The measured operations.
    Measure,
}

/// What the server counted on one data connection during a phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerTally {
    /// Payload octets in the direction of the test: received for write/send, sent for read.
    pub bytes: u64,
    /// Complete messages (or read responses) in that direction.
    pub messages: u64,
}

/// One control message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ControlMsg {
    /// Client → server: start a session.
    Hello {
        /// Transport of the data connections.
        transport: Transport,
        /// The test.
        spec: TestSpec,
        /// Client version string (informational).
        client: String,
    },
    /// Server → client: session accepted.
    Welcome {
        /// Identifies this session's data connections.
        session: u64,
        /// Port the data connections go to (on the server's address).
        data_port: u16,
        /// Server version string (informational).
        server: String,
    },
    /// Client → server on a TCP *data* connection: which session and index it belongs to.
    DataHello {
        /// From `Welcome`.
        session: u64,
        /// 0-based connection index.
        index: u32,
    },
    /// Server → client on a TCP data connection: accepted.
    DataWelcome,
    /// Client → server: a phase starts.
    StartPhase {
        /// Message size in octets.
        size: u64,
        /// Warm-up or measured.
        phase: Phase,
    },
    /// Server → client: ready for traffic.
    PhaseReady {
        /// Per data connection in index order: opaque backend information for the client
        /// side of the phase (empty for TCP).
        #[serde(default)]
        peer_info: Vec<Vec<u8>>,
    },
    /// Client → server: all operations of the phase have completed.
    EndPhase,
    /// Server → client: what it counted, per data connection in index order (`None` where the
    /// backend cannot count, e.g. one-sided RDMA Writes).
    PhaseDone {
        /// One entry per connection.
        tallies: Vec<Option<PeerTally>>,
    },
    /// Client → server: the session is over.
    Bye,
    /// Either way: a failure, with a message for a human; the session ends.
    Error {
        /// What went wrong.
        message: String,
    },
}

impl ControlMsg {
    /// The `"type"` tag, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            ControlMsg::Hello { .. } => "hello",
            ControlMsg::Welcome { .. } => "welcome",
            ControlMsg::DataHello { .. } => "data_hello",
            ControlMsg::DataWelcome => "data_welcome",
            ControlMsg::StartPhase { .. } => "start_phase",
            ControlMsg::PhaseReady { .. } => "phase_ready",
            ControlMsg::EndPhase => "end_phase",
            ControlMsg::PhaseDone { .. } => "phase_done",
            ControlMsg::Bye => "bye",
            ControlMsg::Error { .. } => "error",
        }
    }
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// Transport failure or end of stream.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// Not our magic.
    #[error("not an iwarp perf peer (bad control frame magic {0:02x?})")]
    BadMagic([u8; 4]),
    /// Another protocol version.
    #[error("peer speaks iwarp perf control protocol version {0}, we speak version {VERSION}")]
    Version(u16),
    /// Body too long.
    #[error("control frame of {0} octets exceeds the limit of {MAX_BODY}")]
    TooLong(u32),
    /// Body is not a control message.
    #[error("malformed control message: {0}")]
    Json(String),
}

impl FrameError {
    /// Converts to a [`PerfError`], naming the peer for I/O failures.
    pub fn into_perf(self, peer: &'static str, what: &str) -> PerfError {
        match self {
            FrameError::Io(e) => PerfError::io(peer, what, e),
            other => PerfError::Protocol(format!("{what}: {other}")),
        }
    }
}

/// Encodes one frame (header and JSON body).
pub fn encode(msg: &ControlMsg) -> Vec<u8> {
    // Serialising our own enum to a Vec cannot fail (no maps with non-string keys, no I/O);
    // an empty body would still be rejected by the peer rather than crash us.
    let body = serde_json::to_vec(msg).unwrap_or_default();
    let mut out = Vec::with_capacity(10 + body.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Writes one frame.
pub async fn write_msg<W: AsyncWrite + Unpin>(w: &mut W, msg: &ControlMsg) -> io::Result<()> {
    w.write_all(&encode(msg)).await?;
    w.flush().await
}

/// Reads one frame.
pub async fn read_msg<R: AsyncRead + Unpin>(r: &mut R) -> Result<ControlMsg, FrameError> {
    let mut header = [0u8; 10];
    r.read_exact(&mut header).await?;
    let magic = [header[0], header[1], header[2], header[3]];
    if magic != MAGIC {
        return Err(FrameError::BadMagic(magic));
    }
    let version = u16::from_be_bytes([header[4], header[5]]);
    if version != VERSION {
        return Err(FrameError::Version(version));
    }
    let len = u32::from_be_bytes([header[6], header[7], header[8], header[9]]);
    if len > MAX_BODY {
        return Err(FrameError::TooLong(len));
    }
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body).await?;
    serde_json::from_slice(&body).map_err(|e| FrameError::Json(e.to_string()))
}

/// A control connection with timeouts and peer-aware errors.
pub struct Control<S> {
    stream: S,
    peer: &'static str,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Control<S> {
    /// Wraps a connected stream; `peer` ("server" or "client") names the other end in errors.
    pub fn new(stream: S, peer: &'static str) -> Self {
        Control { stream, peer }
    }

    /// Sends one message.
    pub async fn send(&mut self, msg: &ControlMsg) -> Result<(), PerfError> {
        write_msg(&mut self.stream, msg)
            .await
            .map_err(|e| PerfError::io(self.peer, format!("sending {}", msg.kind()), e))
    }

    /// Receives one message, waiting as long as it takes (phases can be long).
    pub async fn recv(&mut self, what: &str) -> Result<ControlMsg, PerfError> {
        read_msg(&mut self.stream)
            .await
            .map_err(|e| e.into_perf(self.peer, what))
    }

    /// Receives one message within [`CONTROL_TIMEOUT`]; an `Error` message becomes
    /// [`PerfError::Remote`].
    pub async fn recv_reply(&mut self, what: &str) -> Result<ControlMsg, PerfError> {
        let msg = tokio::time::timeout(CONTROL_TIMEOUT, self.recv(what))
            .await
            .map_err(|_| PerfError::Timeout {
                what: what.to_string(),
                secs: CONTROL_TIMEOUT.as_secs(),
            })??;
        match msg {
            ControlMsg::Error { message } => Err(PerfError::Remote {
                peer: self.peer,
                message,
            }),
            other => Ok(other),
        }
    }

    /// Sends `msg` and waits for the reply.
    pub async fn request(&mut self, msg: &ControlMsg, what: &str) -> Result<ControlMsg, PerfError> {
        self.send(msg).await?;
        self.recv_reply(what).await
    }

    /// Waits (up to [`CONTROL_TIMEOUT`]) for the peer to close the connection, discarding
    /// anything it still sends.
    pub async fn wait_closed(&mut self) {
        let drain = async {
            let mut sink = [0u8; 256];
            while matches!(self.stream.read(&mut sink).await, Ok(n) if n > 0) {}
        };
        let _ = tokio::time::timeout(CONTROL_TIMEOUT, drain).await;
    }
}

/// Builds the error for an unexpected reply.
pub fn unexpected(got: &ControlMsg, wanted: &str) -> PerfError {
    PerfError::Protocol(format!(
        "control protocol: expected {wanted}, got {}",
        got.kind()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frame_round_trip() {
        let msg = ControlMsg::StartPhase {
            size: 65536,
            phase: Phase::Measure,
        };
        let bytes = encode(&msg);
        assert_eq!(&bytes[..4], b"IWPF");
        assert_eq!(&bytes[4..6], &[0, 1]);
        let body = br#"{"type":"start_phase","size":65536,"phase":"measure"}"#;
        assert_eq!(&bytes[10..], body);
        assert_eq!(&bytes[6..10], &(body.len() as u32).to_be_bytes());
        let back = read_msg(&mut &bytes[..]).await.unwrap();
        assert_eq!(back, msg);
    }

    #[tokio::test]
    async fn rejects_bad_frames() {
        let mut bytes = encode(&ControlMsg::Bye);
        bytes[0] = b'X';
        assert!(matches!(
            read_msg(&mut &bytes[..]).await,
            Err(FrameError::BadMagic(_))
        ));
        let mut bytes = encode(&ControlMsg::Bye);
        bytes[5] = 9;
        assert!(matches!(
            read_msg(&mut &bytes[..]).await,
            Err(FrameError::Version(9))
        ));
        let mut bytes = encode(&ControlMsg::Bye);
        bytes[6..10].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(
            read_msg(&mut &bytes[..]).await,
            Err(FrameError::TooLong(_))
        ));
        let mut bytes = encode(&ControlMsg::Bye);
        let n = bytes.len();
        bytes[n - 2] = b'!';
        assert!(matches!(
            read_msg(&mut &bytes[..]).await,
            Err(FrameError::Json(_))
        ));
        let bytes = encode(&ControlMsg::Bye);
        assert!(matches!(
            read_msg(&mut &bytes[..7]).await,
            Err(FrameError::Io(_))
        ));
    }
}
