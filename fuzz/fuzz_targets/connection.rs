//! Arbitrary calls into one `Connection`, framed by MPA or by IFT:
//! received octets in arbitrary chunks (staged, or read straight into a
//! region), the end of the stream, read and write errors, writes taken
//! in part, posts, graceful and abortive closes, time passing. It must
//! never panic, report nothing but completions after `Finished`, complete
//! no work request twice, and once finished neither read nor write.
#![no_main]

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iwarp_proto::connection::{Connection, ConnectionConfig, Event, LossReason};
use iwarp_proto::ift::{IftParams, MarkerInterval, Mode, RxCrc, RxParams, TxParams};
use iwarp_proto::memory::{Access, MemoryBuffer, MemoryTable, RegionSpec, StreamId};
use iwarp_proto::mpa::startup::{Established, Revision, Role, RtrType};
use iwarp_proto::mpa::{FramingParams, Placement};
use iwarp_proto::rdmap::{QueuePairConfig, SendFlags, Sge};
use libfuzzer_sys::fuzz_target;

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let Some(setup) = input.byte() else { return };
    let table = Arc::new(MemoryTable::with_seed(0));
    let pd = table.alloc_pd();
    let buffer = MemoryBuffer::from(vec![0u8; 1 << 16]);
    let spec = RegionSpec::whole(
        pd,
        buffer,
        0,
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
    );
    let stag = table.register(spec).expect("register");
    let framing = FramingParams {
        crc: setup & 1 != 0,
        send_markers: setup & 2 != 0,
        receive_markers: setup & 4 != 0,
    };
    let role = if setup & 8 != 0 {
        Role::Initiator
    } else {
        Role::Responder
    };
    let rtr = (setup & 16 != 0).then_some(RtrType::Write);
    let established = Established {
        role,
        revision: Some(Revision::Rev2),
        framing,
        ird_ord: None,
        rtr,
        private_data: Vec::new(),
    };
    let placement = if setup & 32 != 0 {
        Placement::Direct
    } else {
        Placement::Verified
    };
    let queue_pair = QueuePairConfig::new(pd, StreamId(1));
    let mut config = if setup & 128 != 0 {
        // IFT instead, its CRCs and markers as the same bits say.
        let crc = setup & 1 != 0;
        let interval = MarkerInterval::new(512);
        let rx_crc = if crc { RxCrc::Checked } else { RxCrc::Absent };
        let params = IftParams {
            mode: Mode::Rdma,
            tx: TxParams {
                header_crc: crc,
                payload_crc: crc,
                markers: interval.filter(|_| setup & 2 != 0),
                vtag: 7,
            },
            rx: RxParams {
                header_crc: rx_crc,
                payload_crc: rx_crc,
                markers: interval.filter(|_| setup & 4 != 0),
                vtag: 7,
            },
            may_speculate: false,
            peer_may_speculate: false,
        };
        ConnectionConfig::ift(params, queue_pair)
    } else {
        ConnectionConfig::mpa(&established, placement, queue_pair)
    };
    config.idle_timeout = (setup & 64 != 0).then_some(Duration::from_secs(1));
    let mut now = Instant::now();
    let Ok(mut conn) = Connection::new(config, table, now) else {
        return;
    };
    let mut staged = Vec::new();
    let mut tail = [0u8; 64];
    let mut next_id = 0u64;
    let mut done = HashSet::new();
    let mut finished = false;
    while let Some(op) = input.byte() {
        let n = usize::from(input.byte().unwrap_or(0)) * 8;
        let sge = Sge {
            stag,
            to: (n as u64) * 16,
            len: (n as u32) * 4,
        };
        match op % 12 {
            0..=3 => {
                staged.extend_from_slice(input.take(n + 1));
                let used = conn.handle_input(now, &staged);
                assert!(used <= staged.len());
                staged.drain(..used);
            }
            4 => {
                let mut source = input.take(n + 1);
                let r = conn.read_direct(now, n + 1, &mut tail, |iov| {
                    let mut k = 0;
                    for s in iov.iter_mut() {
                        let m = s.len().min(source.len());
                        s[..m].copy_from_slice(&source[..m]);
                        source = &source[m..];
                        k += m;
                    }
                    Ok::<usize, ()>(k)
                });
                if let Ok(Some(r)) = r {
                    staged.extend_from_slice(&tail[..r.tail]);
                }
            }
            5 => conn.handle_eof(),
            6 => {
                let _ = conn.post_recv(next_id, sge);
                let _ = conn.post_send(next_id + 1, sge, SendFlags::default());
                let _ = conn.rdma_write(next_id + 2, sge, stag, 0);
                let _ = conn.rdma_read(next_id + 3, sge, stag, 0);
                next_id += 4;
            }
            7 => {
                // The socket takes part of what is lent.
                if let Some(k) = conn.poll_transmit(|iov| {
                    let total: usize = iov.iter().map(|s| s.len()).sum();
                    total.min(n)
                }) {
                    conn.handle_written(k);
                }
            }
            8 => conn.close_gracefully(now),
            9 => conn.abort(),
            10 => {
                now += Duration::from_millis(n as u64 * 10);
                conn.handle_timeout(now);
            }
            _ => {
                let e = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
                if n % 2 == 0 {
                    conn.handle_read_error(LossReason::from_io(&e));
                } else {
                    conn.handle_write_error(LossReason::from_io(&e));
                }
            }
        }
        while let Some(event) = conn.poll_event() {
            match event {
                Event::Completion(c) => {
                    assert!(done.insert(c.wr_id), "completed twice: {c:?}");
                }
                other => {
                    assert!(!finished, "{other:?} after Finished");
                    if other == Event::Finished {
                        finished = true;
                    }
                }
            }
        }
        assert_eq!(finished, conn.is_finished());
        if finished {
            assert!(!conn.wants_input());
            assert!(conn.is_write_closed());
            assert!(conn.poll_transmit(|_| 0usize).is_none());
        }
    }
});
