//! The protocol engine's cost per message between two whole `Connection`s
//! (MPA with CRC, verified placement), the octets handed over in memory:
//! what a test pays on top of TCP, without the sockets, the runtime and the
//! machine's noise.
//!
//! - `send_ping_pong_64B`: 64-octet Send ping-pongs, the latency test's
//!   engine work per round trip (both ends).
//! - `bulk/*`: one 64 KiB RDMA Write, Send or RDMA Read from end to end,
//!   with and without markers, in FPDUs as large as loopback allows and
//!   as Ethernet's (`_emss1448`): the bandwidth tests' engine work per
//!   message (both ends; the copy into the "wire" stands in for the
//!   kernel's, which plain TCP pays too). The `_direct` variants place as
//!   the runtime does with `Placement::Direct`: payload read straight into
//!   the region with `Connection::read_direct` (through a scratch buffer
//!   with markers), the rest staged.

#![allow(missing_docs)]

use std::io::IoSlice;
use std::sync::Arc;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use iwarp_proto::connection::{Connection, ConnectionConfig, Event};
use iwarp_proto::memory::copy::copy_payload;
use iwarp_proto::memory::{Access, MemoryBuffer, MemoryTable, RegionSpec, StreamId};
use iwarp_proto::mpa::startup::{Established, Revision, Role};
use iwarp_proto::mpa::{FramingParams, Placement};
use iwarp_proto::rdmap::{CompletionStatus, QueuePairConfig, SendFlags, Sge};

const PING_SIZE: u32 = 64;
const BULK_SIZE: u32 = 64 * 1024;

struct End {
    conn: Connection,
    /// Whether payload is read straight into its region (`read_direct`).
    direct: bool,
    /// Octets staged for `handle_input`, and a direct read's tail.
    staged: Vec<u8>,
    tail: Vec<u8>,
    /// Source of Sends and Writes, and of the Read Responses it serves.
    out: Sge,
    /// Target of Sends, Writes and Read Responses.
    inbox: Sge,
    wire: Vec<u8>,
}

impl End {
    fn new(role: Role, stream: u64, now: Instant, size: u32, bulk: BulkSetup) -> Self {
        let BulkSetup {
            markers,
            emss,
            direct,
        } = bulk;
        let table = Arc::new(MemoryTable::with_seed(stream));
        let pd = table.alloc_pd();
        let region = |access| {
            let buffer = MemoryBuffer::new(size as usize);
            let stag = table
                .register(RegionSpec::whole(pd, buffer, 0, access))
                .unwrap();
            Sge {
                stag,
                to: 0,
                len: size,
            }
        };
        let out = region(Access::REMOTE_READ);
        let inbox = region(Access::LOCAL_WRITE | Access::REMOTE_WRITE);
        let framing = FramingParams {
            crc: true,
            send_markers: markers,
            receive_markers: markers,
        };
        let established = Established {
            role,
            revision: Some(Revision::Rev2),
            framing,
            ird_ord: None,
            rtr: None,
            private_data: Vec::new(),
        };
        let qp = QueuePairConfig::new(pd, StreamId(stream));
        let placement = if direct {
            Placement::Direct
        } else {
            Placement::Verified
        };
        let mut config = ConnectionConfig::mpa(&established, placement, qp);
        config.emss = emss;
        let conn = Connection::new(config, table, now).unwrap();
        Self {
            conn,
            direct,
            staged: Vec::with_capacity(2 * size as usize + 4096),
            tail: vec![0; 4096],
            out,
            inbox,
            wire: Vec::with_capacity(2 * size as usize + 4096),
        }
    }

    /// Writes what the connection has to send into `self.wire`.
    fn write(&mut self) {
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

    /// Takes `peer`'s octets in; returns the completions of `wr_id`.
    fn receive_from(&mut self, now: Instant, peer: &End, wr_id: u64) -> usize {
        let wire = &peer.wire;
        if !self.direct {
            assert_eq!(self.conn.handle_input(now, wire), wire.len());
            return self.completions(wr_id);
        }
        // As the runtime reads: straight into the region while a PDU has
        // payload to come, else staged a tail's worth at a time.
        let mut at = 0;
        self.staged.clear();
        loop {
            if self.conn.direct_payload() > 0 && at < wire.len() {
                let source = &wire[at..];
                let r = self
                    .conn
                    .read_direct(now, usize::MAX, &mut self.tail, |iov| {
                        let mut k = 0;
                        for s in iov.iter_mut() {
                            let m = s.len().min(source.len() - k);
                            // As the kernel copies: at any skew (glibc's
                            // `rep movsb` is 15 times slower at some).
                            copy_payload(&mut s[..m], &source[k..k + m]);
                            k += m;
                        }
                        Ok::<usize, ()>(k)
                    });
                let d = r.unwrap().expect("a region to read into");
                at += d.octets;
                self.staged.extend_from_slice(&self.tail[..d.tail]);
            } else if at < wire.len() {
                let n = (wire.len() - at).min(self.tail.len());
                self.staged.extend_from_slice(&wire[at..at + n]);
                at += n;
            }
            let used = self.conn.handle_input(now, &self.staged);
            self.staged.drain(..used);
            if at == wire.len() && used == 0 {
                break;
            }
        }
        assert!(self.staged.is_empty());
        self.completions(wr_id)
    }

    /// Drains the events; returns the completions of `wr_id`.
    fn completions(&mut self, wr_id: u64) -> usize {
        let mut found = 0;
        while let Some(e) = self.conn.poll_event() {
            if let Event::Completion(c) = e {
                assert_eq!(c.status, CompletionStatus::Success);
                found += usize::from(c.wr_id == wr_id);
            }
        }
        found
    }
}

/// The EMSS of a loopback connection (MTU 65536), as Linux reports it
/// once the window has opened: FPDUs of up to 64 KiB.
const LOOPBACK_EMSS: usize = 65483;
/// The EMSS over Ethernet with a 1500-octet MTU and TCP timestamps.
const ETHERNET_EMSS: usize = 1448;

/// How the ends of a bulk bench frame and place.
#[derive(Clone, Copy)]
struct BulkSetup {
    markers: bool,
    emss: usize,
    /// `Placement::Direct`, read as the runtime does.
    direct: bool,
}

impl BulkSetup {
    const PLAIN: Self = Self {
        markers: false,
        emss: LOOPBACK_EMSS,
        direct: false,
    };
}

/// Two connected ends, the octets between them handed over in memory.
fn pair(size: u32, bulk: BulkSetup) -> (Instant, End, End) {
    let now = Instant::now();
    let a = End::new(Role::Initiator, 1, now, size, bulk);
    let b = End::new(Role::Responder, 2, now, size, bulk);
    (now, a, b)
}

fn ping_pong(c: &mut Criterion) {
    let (now, mut a, mut b) = pair(PING_SIZE, BulkSetup::PLAIN);
    // The responder's first receive, before anything arrives.
    b.conn.post_recv(2, b.inbox).unwrap();
    let mut g = c.benchmark_group("connection");
    g.throughput(Throughput::Elements(1));
    g.bench_function("send_ping_pong_64B", |bench| {
        bench.iter(|| {
            a.conn.post_recv(2, a.inbox).unwrap();
            a.conn.post_send(1, a.out, SendFlags::default()).unwrap();
            a.write();
            assert_eq!(b.receive_from(now, &a, 2), 1);
            // b answers; its post of the next receive keeps one posted.
            b.conn.post_recv(2, b.inbox).unwrap();
            b.conn.post_send(1, b.out, SendFlags::default()).unwrap();
            b.write();
            assert_eq!(a.receive_from(now, &b, 2), 1);
        })
    });
    g.finish();
}

/// One 64 KiB operation from end to end, both ends' work.
#[derive(Clone, Copy)]
enum Bulk {
    Write,
    Send,
    Read,
}

fn bulk(c: &mut Criterion) {
    let mut g = c.benchmark_group("connection/bulk");
    g.throughput(Throughput::Bytes(u64::from(BULK_SIZE)));
    for (name, op) in [
        ("write", Bulk::Write),
        ("send", Bulk::Send),
        ("read", Bulk::Read),
    ] {
        let setups = [
            (false, LOOPBACK_EMSS, false),
            (true, LOOPBACK_EMSS, false),
            (false, ETHERNET_EMSS, false),
            (false, LOOPBACK_EMSS, true),
            (true, LOOPBACK_EMSS, true),
        ];
        for (markers, emss, direct) in setups {
            let bulk = BulkSetup {
                markers,
                emss,
                direct,
            };
            let (now, mut a, mut b) = pair(BULK_SIZE, bulk);
            let id = format!(
                "{name}_64KiB{}{}{}",
                if markers { "_markers" } else { "" },
                if emss == ETHERNET_EMSS {
                    "_emss1448"
                } else {
                    ""
                },
                if direct { "_direct" } else { "" },
            );
            g.bench_function(id, |bench| {
                bench.iter(|| match op {
                    Bulk::Write => {
                        let (stag, to) = (b.inbox.stag, b.inbox.to);
                        a.conn.rdma_write(1, a.out, stag, to).unwrap();
                        a.write();
                        b.receive_from(now, &a, 0);
                        assert_eq!(a.completions(1), 1);
                    }
                    Bulk::Send => {
                        b.conn.post_recv(2, b.inbox).unwrap();
                        a.conn.post_send(1, a.out, SendFlags::default()).unwrap();
                        a.write();
                        assert_eq!(b.receive_from(now, &a, 2), 1);
                        assert_eq!(a.completions(1), 1);
                    }
                    Bulk::Read => {
                        let (stag, to) = (b.out.stag, b.out.to);
                        a.conn.rdma_read(1, a.inbox, stag, to).unwrap();
                        a.write();
                        b.receive_from(now, &a, 0);
                        b.write();
                        assert_eq!(a.receive_from(now, &b, 1), 1);
                    }
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, ping_pong, bulk);
criterion_main!(benches);
