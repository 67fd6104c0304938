//! TCP socket preparation: the options iWARP wants and the EMSS it needs.
//!
//! MPA sizes its FPDUs from the effective maximum segment size (EMSS) so
//! that one FPDU fits one TCP segment (RFC 5044 §5.1, draft-ietf-rddp-mpa-01
//! §3.1.1), and wants Nagle off so that segments start with FPDUs.

use std::io;

use socket2::SockRef;
use tokio::net::TcpStream;

use iwarp_proto::framing::mulpdu::DEFAULT_EMSS;

/// Applies `TCP_NODELAY` as asked and reads the EMSS.
///
/// The EMSS is `TCP_MAXSEG` as the kernel reports it for the connected
/// socket; when the platform cannot say, MPA's default of 1460 octets
/// (draft-ietf-rddp-mpa-01 §3.1.1).
//= rfc5044#5.1
//# MPA transmitters SHOULD also use whatever facilities the TCP stack presents to cause the TCP
//# transmitter to start TCP segments at FPDU boundaries.
//= draft-ietf-rddp-mpa-01#3.1.1
//# If the transmit side TCP implementation is not able to segment the TCP stream as indicated
//# above, MPA SHOULD make a best effort to achieve that result.
//= draft-ietf-rddp-mpa-01#5.3
//# Implementation note: To achieve the previous segmentation rule, TCP's Nagle [RFC0896]
//# algorithm SHOULD be disabled.
pub(crate) fn prepare(stream: &TcpStream, nodelay: bool) -> io::Result<usize> {
    stream.set_nodelay(nodelay)?;
    Ok(emss(stream))
}

/// The EMSS of a connected socket.
pub(crate) fn emss(stream: &TcpStream) -> usize {
    let sock = SockRef::from(stream);
    #[cfg(any(
        target_os = "linux",
        target_os = "android",
        target_os = "macos",
        target_os = "freebsd"
    ))]
    {
        if let Ok(mss) = sock.tcp_mss() {
            if mss > 0 {
                return mss as usize;
            }
        }
    }
    let _ = sock;
    DEFAULT_EMSS
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    #[tokio::test]
    //= rfc5044#5.1
    //= type=test
    //# MPA transmitters SHOULD also use whatever facilities the TCP stack presents to cause the
    //# TCP transmitter to start TCP segments at FPDU boundaries.
    //= draft-ietf-rddp-mpa-01#3.1.1
    //= type=test
    //# If the transmit side TCP implementation is not able to segment the TCP stream as
    //# indicated above, MPA SHOULD make a best effort to achieve that result.
    //= draft-ietf-rddp-mpa-01#5.3
    //= type=test
    //# Implementation note: To achieve the previous segmentation rule, TCP's Nagle [RFC0896]
    //# algorithm SHOULD be disabled.
    async fn loopback_socket_reports_an_emss_and_takes_nodelay() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, server) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let client = client.unwrap();
        let emss = prepare(&client, true).unwrap();
        assert!(client.nodelay().unwrap());
        // Loopback's MTU is 65536 on Linux; any sane stack reports at least
        // the IPv4 minimum.
        assert!(emss >= 536, "emss {emss}");
        drop(server);
    }
}
