//! The protocol engine's cost per small message: 64-octet Send ping-pongs
//! between two whole `Connection`s (MPA with CRC, verified placement), the
//! octets handed over in memory. What a latency test pays on top of TCP,
//! without the sockets, the runtime and the machine's noise.

#![allow(missing_docs)]

use std::io::IoSlice;
use std::sync::Arc;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use iwarp_proto::connection::{Connection, ConnectionConfig, Event};
use iwarp_proto::memory::{Access, MemoryBuffer, MemoryTable, RegionSpec, StreamId};
use iwarp_proto::mpa::startup::{Established, Revision, Role};
use iwarp_proto::mpa::{FramingParams, Placement};
use iwarp_proto::rdmap::{CompletionStatus, QueuePairConfig, SendFlags, Sge};

const SIZE: u32 = 64;

struct End {
    conn: Connection,
    out: Sge,
    inbox: Sge,
    wire: Vec<u8>,
}

impl End {
    fn new(role: Role, stream: u64, now: Instant) -> Self {
        let table = Arc::new(MemoryTable::with_seed(stream));
        let pd = table.alloc_pd();
        let region = |access| {
            let buffer = MemoryBuffer::new(SIZE as usize);
            let stag = table
                .register(RegionSpec::whole(pd, buffer, 0, access))
                .unwrap();
            Sge {
                stag,
                to: 0,
                len: SIZE,
            }
        };
        let out = region(Access::empty());
        let inbox = region(Access::LOCAL_WRITE);
        let plain = FramingParams {
            crc: true,
            send_markers: false,
            receive_markers: false,
        };
        let established = Established {
            role,
            revision: Some(Revision::Rev2),
            framing: plain,
            ird_ord: None,
            rtr: None,
            private_data: Vec::new(),
        };
        let qp = QueuePairConfig::new(pd, StreamId(stream));
        let config = ConnectionConfig::mpa(&established, Placement::Verified, qp);
        let conn = Connection::new(config, table, now).unwrap();
        Self {
            conn,
            out,
            inbox,
            wire: Vec::with_capacity(4096),
        }
    }

    /// Posts the receive for the answer and the Send, and writes.
    fn post_and_write(&mut self) {
        self.conn.post_recv(2, self.inbox).unwrap();
        self.conn
            .post_send(1, self.out, SendFlags::default())
            .unwrap();
        self.wire.clear();
        while let Some(n) = self.conn.poll_transmit(|iov: &[IoSlice<'_>]| {
            iov.iter()
                .map(|s| {
                    self.wire.extend_from_slice(s);
                    s.len()
                })
                .sum::<usize>()
        }) {
            self.conn.handle_written(n);
        }
    }

    /// Takes the peer's octets in; returns the receive completions.
    fn receive(&mut self, now: Instant, wire: &[u8]) -> usize {
        assert_eq!(self.conn.handle_input(now, wire), wire.len());
        let mut received = 0;
        while let Some(e) = self.conn.poll_event() {
            if let Event::Completion(c) = e {
                assert_eq!(c.status, CompletionStatus::Success);
                received += usize::from(c.wr_id == 2);
            }
        }
        received
    }
}

fn ping_pong(c: &mut Criterion) {
    let now = Instant::now();
    let mut a = End::new(Role::Initiator, 1, now);
    let mut b = End::new(Role::Responder, 2, now);
    // The responder's first receive, before anything arrives.
    b.conn.post_recv(2, b.inbox).unwrap();
    let mut g = c.benchmark_group("connection");
    g.throughput(Throughput::Elements(1));
    g.bench_function("send_ping_pong_64B", |bench| {
        bench.iter(|| {
            a.post_and_write();
            let wire = std::mem::take(&mut a.wire);
            assert_eq!(b.receive(now, &wire), 1);
            a.wire = wire;
            // b answers; its post of the next receive keeps one posted.
            b.post_and_write();
            let wire = std::mem::take(&mut b.wire);
            assert_eq!(a.receive(now, &wire), 1);
            b.wire = wire;
        })
    });
    g.finish();
}

criterion_group!(benches, ping_pong);
criterion_main!(benches);
