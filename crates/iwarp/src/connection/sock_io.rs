//! The connection's non-blocking socket I/O: writes by `send` and
//! `sendmsg`, reads by `recv` and `recvmsg`, under tokio's readiness
//! bookkeeping, with a short small read taken as a drained socket.
//!
//! tokio's own `try_write_vectored` and `try_read_vectored` are `writev`
//! and `readv`, which pass through the file layer before they reach the
//! socket; its `try_read` learns that the socket is empty only from a
//! second read failing with `EAGAIN`.

use std::io::{self, IoSlice, IoSliceMut, Read};

use socket2::SockRef;
use tokio::io::Interest;
use tokio::net::TcpStream;

/// Writes `pieces` without blocking, as much as the socket takes: `send`
/// for one piece, `sendmsg` for several, never raising `SIGPIPE` (a closed
/// peer is an `EPIPE` error). Like tokio's own `try_write*`, it clears the
/// socket's write readiness when the socket is full, so that awaiting
/// `writable` then waits for room.
///
/// Why not tokio's `try_write_vectored`: that is `writev`, which goes
/// through the file layer before it reaches the socket (`fdget_pos`,
/// `rw_verify_area`, the security hook, `do_iter_readv_writev`), about a
/// fifth of the kernel's time for a small FPDU; `send` and `sendmsg` go to
/// the socket directly.
pub(crate) fn try_send(stream: &TcpStream, pieces: &[IoSlice<'_>]) -> io::Result<usize> {
    match pieces {
        // The standard library's socket write: `send` with `MSG_NOSIGNAL`.
        [one] => stream.try_write(one),
        _ => try_send_vectored(stream, pieces),
    }
}

/// A short read of at most this many octets clears the socket's read
/// readiness ([`try_recv`]). A larger one leaves it, so that the reader
/// reads again at once: in a bulk transfer the peer is still sending, and
/// the next read usually finds octets that arrived meanwhile, where
/// waiting for readability would wait for the runtime's next poll of its
/// I/O driver (64 KiB RDMA Reads drained after every short read went at
/// 1,023 to 1,728 MiB/s against 1,706 to 1,998).
const DRAIN_UP_TO: usize = 4096;

/// Reads into `buf` without blocking, as tokio's `try_read` does (`recv`),
/// and says whether the read drained the socket.
///
/// A read that returns fewer octets than `buf` holds took everything the
/// socket had. When it was small (at most [`DRAIN_UP_TO`] octets: a
/// message of a ping-pong, a request) the socket's read readiness is
/// cleared at once, and the next wait for readability waits for new
/// octets, where tokio's `try_read` needs a second `recv` that fails with
/// `EAGAIN` to learn that the socket is empty (a system call per message
/// saved in a ping-pong). Nothing is missed: the socket raises a new
/// readiness event for octets that arrive after the read (tokio registers
/// it edge-triggered), and tokio keeps a readiness set by an event newer
/// than the read.
pub(crate) fn try_recv(stream: &TcpStream, buf: &mut [u8]) -> io::Result<Received> {
    let asked = buf.len();
    recv_draining(stream, asked, || (&*SockRef::from(stream)).read(buf))
}

/// [`try_recv`] into several buffers (`recvmsg`; tokio's vectored read is
/// `readv`, through the file layer).
pub(crate) fn try_recv_vectored(
    stream: &TcpStream,
    bufs: &mut [IoSliceMut<'_>],
) -> io::Result<Received> {
    let asked = bufs.iter().map(|b| b.len()).sum();
    recv_draining(stream, asked, || {
        (&*SockRef::from(stream)).read_vectored(bufs)
    })
}

/// Runs `recv` (a read of at most `asked` octets) under tokio's readiness
/// bookkeeping, clearing the readiness when the read was short.
fn recv_draining(
    stream: &TcpStream,
    asked: usize,
    recv: impl FnOnce() -> io::Result<usize>,
) -> io::Result<Received> {
    let mut short = None;
    let result = stream.try_io(Interest::READABLE, || {
        let n = recv()?;
        if n > 0 && n < asked && n <= DRAIN_UP_TO {
            // Reported as "would block" so that tokio clears the readiness
            // this read observed; the octets are returned below.
            short = Some(n);
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    });
    match short {
        Some(n) => Ok(Received {
            len: n,
            drained: true,
        }),
        None => result.map(|len| Received {
            len,
            drained: false,
        }),
    }
}

/// What [`try_recv`] read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Received {
    /// Octets read; 0 at the end of the stream.
    pub(crate) len: usize,
    /// The read was short and small: the socket had no more, and its
    /// readiness is cleared; wait for readability before reading again.
    pub(crate) drained: bool,
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn try_send_vectored(stream: &TcpStream, pieces: &[IoSlice<'_>]) -> io::Result<usize> {
    stream.try_io(Interest::WRITABLE, || {
        SockRef::from(stream).send_vectored_with_flags(pieces, libc::MSG_NOSIGNAL)
    })
}

/// Elsewhere `MSG_NOSIGNAL` may not exist: `writev`, as tokio does it.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn try_send_vectored(stream: &TcpStream, pieces: &[IoSlice<'_>]) -> io::Result<usize> {
    stream.try_write_vectored(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// Both ends of a loopback connection: client, server.
    async fn connected() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, server) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (client.unwrap(), server.unwrap().0)
    }

    #[tokio::test]
    async fn pieces_arrive_in_order_and_a_full_socket_waits_for_room() {
        use tokio::io::AsyncReadExt;
        let (client, mut server) = connected().await;
        // One piece (send) and several (sendmsg).
        client.writable().await.unwrap();
        assert_eq!(try_send(&client, &[IoSlice::new(b"one")]).unwrap(), 3);
        let pieces = [
            IoSlice::new(b"two"),
            IoSlice::new(b""),
            IoSlice::new(b"three"),
        ];
        assert_eq!(try_send(&client, &pieces).unwrap(), 8);
        let mut got = [0u8; 11];
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"onetwothree");
        // Fill the socket: the write that finds it full says so, and the
        // readiness it cleared makes `writable` wait until the peer reads.
        let chunk = vec![0x42u8; 64 * 1024];
        let mut sent = 0usize;
        loop {
            match try_send(&client, &[IoSlice::new(&chunk), IoSlice::new(&chunk)]) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), client.writable());
        assert!(waiting.await.is_err(), "a full socket reported room");
        let mut sink = vec![0u8; 1 << 20];
        let mut read = 0usize;
        while read < sent {
            let n = server.read(&mut sink).await.unwrap();
            assert!(sink[..n].iter().all(|&b| b == 0x42));
            read += n;
        }
        client.writable().await.unwrap();
        assert_eq!(try_send(&client, &[IoSlice::new(b"after")]).unwrap(), 5);
    }

    #[tokio::test]
    async fn a_short_read_drains_and_the_next_octets_wake_the_reader() {
        use tokio::io::AsyncWriteExt;
        let (mut client, server) = connected().await;
        let mut buf = [0u8; 64];
        for round in 0u8..50 {
            let sent = [round; 10];
            client.write_all(&sent).await.unwrap();
            // The octets arrive; a read of fewer than asked for drained
            // the socket, so the next wait waits for the next octets
            // (a lost wake-up would hang here, bounded by the timeout).
            let mut got = 0;
            while got < sent.len() {
                tokio::time::timeout(std::time::Duration::from_secs(10), server.readable())
                    .await
                    .expect("readiness lost")
                    .unwrap();
                match try_recv(&server, &mut buf[got..]) {
                    Ok(r) => {
                        assert!(r.len > 0);
                        assert_eq!(r.drained, got + r.len < buf.len());
                        got += r.len;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
            }
            assert_eq!(&buf[..got], &sent[..]);
            // Drained: the readiness is gone until more octets come.
            let idle = tokio::time::timeout(std::time::Duration::from_millis(5), server.readable());
            assert!(idle.await.is_err(), "readiness survived a drained read");
        }
        // A large short read leaves the readiness for one more read,
        // which finds the socket empty.
        client.write_all(&[7u8; 3 * DRAIN_UP_TO]).await.unwrap();
        let mut large = vec![0u8; 16 * DRAIN_UP_TO];
        let mut got = 0;
        while got < 3 * DRAIN_UP_TO {
            server.readable().await.unwrap();
            match try_recv(&server, &mut large) {
                Ok(r) => {
                    assert_eq!(r.drained, r.len <= DRAIN_UP_TO);
                    got += r.len;
                    if !r.drained {
                        let again = tokio::time::timeout(
                            std::time::Duration::from_secs(10),
                            server.readable(),
                        );
                        assert!(again.await.is_ok(), "readiness cleared after a large read");
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
        // A full buffer is not a drained socket; the end of the stream
        // reads as 0.
        client.write_all(&[9u8; 100]).await.unwrap();
        client.shutdown().await.unwrap();
        let mut total = 0;
        loop {
            server.readable().await.unwrap();
            match try_recv(&server, &mut buf) {
                Ok(r) if r.len == 0 => break,
                Ok(r) => {
                    if r.len == buf.len() {
                        assert!(!r.drained);
                    }
                    total += r.len;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(total, 100);
    }

    #[tokio::test]
    async fn a_short_vectored_read_drains_across_buffers() {
        use tokio::io::AsyncWriteExt;
        let (mut client, server) = connected().await;
        client.write_all(b"abcdefghij").await.unwrap();
        let mut received = Vec::new();
        let mut drained = false;
        while received.len() < 10 {
            server.readable().await.unwrap();
            let (mut a, mut b) = ([0u8; 4], [0u8; 16]);
            let mut iov = [IoSliceMut::new(&mut a), IoSliceMut::new(&mut b)];
            match try_recv_vectored(&server, &mut iov) {
                Ok(r) => {
                    // The octets fill the first buffer, then the second.
                    received.extend_from_slice(&a[..r.len.min(4)]);
                    received.extend_from_slice(&b[..r.len.saturating_sub(4)]);
                    assert_eq!(r.drained, r.len < 20);
                    drained = r.drained;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
        assert!(drained);
        assert_eq!(received, b"abcdefghij");
        let idle = tokio::time::timeout(std::time::Duration::from_millis(5), server.readable());
        assert!(idle.await.is_err(), "readiness survived a drained read");
    }
}
