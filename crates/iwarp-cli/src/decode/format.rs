//! Output: text lines like `tshark`'s (with `-v`, a field tree under each;
//! with `--ops`, one line per operation instead of per PDU), or JSON Lines.
//!
//! Text: one line per event,
//!
//! ```text
//!  FRAME       TIME SRC > DST  PROTO  SUMMARY
//! ```
//!
//! where FRAME is the capture frame that completed the event and TIME is in
//! seconds since the first frame. The words of a PDU are `iwarp_proto`'s
//! pretty-printers'. JSON: each record as one object per line (`"type"`
//! names the event), then the summary as `{"type":"summary",...}`.

use std::fmt::Write as _;
use std::io::{self, Write};

use iwarp_decode::checks::Finding;
use iwarp_decode::event::{
    Basis, CrcStatus, CrcUse, Event, FramingInfo, FramingKind, GapAction, IndicationInfo, PduInfo,
    PlaceableInfo, Record, ResyncMethod, StartupFrameInfo, StartupKind,
};
use iwarp_decode::note::Level;
use iwarp_decode::ops::{Operation, OperationKind, OperationSummary};
use iwarp_decode::summary::ConnectionSummary;
use iwarp_decode::{hex, Summary};
use iwarp_proto::mpa::startup::{FrameKind, Revision, StartupFrameRepr};

/// Where records and the summary go.
pub trait Output {
    /// One event.
    fn record(&mut self, record: &Record) -> io::Result<()>;
    /// The closing summary; `unread` says why the capture ended early.
    fn summary(&mut self, summary: &Summary, unread: Option<&str>) -> io::Result<()>;
}

/// JSON Lines.
#[derive(Debug)]
pub struct Json<W: Write> {
    out: W,
}

impl<W: Write> Json<W> {
    /// Writes to `out`.
    pub fn new(out: W) -> Self {
        Self { out }
    }
}

impl<W: Write> Output for Json<W> {
    fn record(&mut self, record: &Record) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, record)?;
        self.out.write_all(b"\n")
    }

    fn summary(&mut self, summary: &Summary, unread: Option<&str>) -> io::Result<()> {
        #[derive(serde::Serialize)]
        struct Tagged<'a> {
            r#type: &'static str,
            #[serde(flatten)]
            summary: &'a Summary,
            #[serde(skip_serializing_if = "Option::is_none")]
            capture_error: Option<&'a str>,
        }
        serde_json::to_writer(
            &mut self.out,
            &Tagged {
                r#type: "summary",
                summary,
                capture_error: unread,
            },
        )?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }
}

/// Text lines.
#[derive(Debug)]
pub struct Text<W: Write> {
    out: W,
    verbose: bool,
    ops: bool,
}

impl<W: Write> Text<W> {
    /// Writes to `out`; `verbose` adds the field trees; `ops` shows
    /// operations instead of PDUs.
    pub fn new(out: W, verbose: bool, ops: bool) -> Self {
        Self { out, verbose, ops }
    }

    /// Whether a record gets a line.
    fn shown(&self, event: &Event) -> bool {
        match event {
            Event::Pdu(p) => !self.ops || !p.errors.is_empty(),
            Event::Operation(_) => self.ops,
            _ => true,
        }
    }
}

impl<W: Write> Output for Text<W> {
    fn record(&mut self, r: &Record) -> io::Result<()> {
        if !self.shown(&r.event) {
            return Ok(());
        }
        let (proto, summary) = line(&r.event);
        writeln!(
            self.out,
            "{:>6} {:>11.6} {} > {}  {proto:<5}  {summary}",
            r.frame, r.time, r.src, r.dst
        )?;
        if self.verbose {
            for l in tree(&r.event) {
                writeln!(self.out, "{:>20}{l}", "")?;
            }
        }
        Ok(())
    }

    fn summary(&mut self, s: &Summary, unread: Option<&str>) -> io::Result<()> {
        write!(self.out, "{}", summary_text(s, unread))?;
        self.out.flush()
    }
}

fn onoff(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

fn crc_use(c: CrcUse) -> &'static str {
    match c {
        CrcUse::On => "on",
        CrcUse::Off => "off",
        CrcUse::Unchecked => "unchecked",
        CrcUse::Auto => "auto",
    }
}

/// The protocol column and the one-line summary of an event.
pub fn line(event: &Event) -> (&'static str, String) {
    match event {
        Event::MpaStartup(f) => ("MPA", startup_line(f)),
        Event::IftIndication(i) => ("IFT", indication_line(i)),
        Event::Framing(f) => framing_line(f),
        Event::Pdu(p) => pdu_line(p),
        Event::Placeable(p) => ("PLACE", placeable_line(p)),
        Event::Gap(g) => (
            "TCP",
            format!(
                "!! {} octets not captured at TCP offset {}{}",
                g.octets,
                g.offset,
                match g.action {
                    GapAction::Resync => ": looking for a marker to resynchronise",
                    GapAction::Hunt => ": hunting for the next FPDU by its CRC",
                    GapAction::Ahead => ": decoding goes on at the PDU found after it",
                    GapAction::Stop => ": decoding of this direction stops",
                    GapAction::None => "",
                }
            ),
        ),
        Event::Resync(r) => (
            match r.framing {
                FramingKind::Mpa => "MPA",
                FramingKind::Ift => "IFT",
            },
            format!(
                "resynchronised at stream offset {} after {} octets, on {}",
                r.offset,
                r.skipped,
                match r.method {
                    ResyncMethod::Marker { marker, pointer } =>
                        format!("the marker at stream offset {marker} (FPDUPTR {pointer:#06x})"),
                    ResyncMethod::Crc { candidates } =>
                        format!("two FPDUs in a row whose CRCs match ({candidates} offsets tried)"),
                    ResyncMethod::Ahead =>
                        "the PDU found whole ahead of the gap (placement view)".to_string(),
                }
            ),
        ),
        Event::Note(n) => (level_tag(n.level()), n.to_string()),
        Event::Finding(f) => finding_line(f),
        Event::Operation(o) => ("OP", operation_line(o)),
    }
}

fn level_tag(level: Level) -> &'static str {
    match level {
        Level::Info => "note",
        Level::Warning => "warn",
        Level::Error => "ERROR",
    }
}

fn finding_line(f: &Finding) -> (&'static str, String) {
    let mut s = f.kind.to_string();
    if !f.frames.is_empty() {
        let frames: Vec<String> = f.frames.iter().map(u64::to_string).collect();
        let _ = write!(
            s,
            " [frame{} {}]",
            if frames.len() == 1 { "" } else { "s" },
            frames.join(", ")
        );
    }
    let tag = match f.level() {
        Level::Error => "CHECK",
        _ => "check",
    };
    (tag, s)
}

/// Seconds in a readable unit.
fn duration(secs: f64) -> String {
    if secs >= 1.0 {
        format!("{secs:.3} s")
    } else if secs >= 1e-3 {
        format!("{:.3} ms", secs * 1e3)
    } else {
        format!("{:.1} µs", secs * 1e6)
    }
}

fn operation_line(o: &Operation) -> String {
    let mut s = match o.kind {
        OperationKind::Send {
            msn,
            solicited,
            invalidate,
        } => {
            let mut s = format!("Send MSN {msn}");
            if solicited {
                s.push_str(" with SE");
            }
            if let Some(stag) = invalidate {
                let _ = write!(s, " invalidating {stag}");
            }
            let _ = write!(s, ": {} octets", o.octets);
            s
        }
        OperationKind::Write { stag, to } => {
            format!("RDMA Write to STag {stag} TO {to:#x}: {} octets", o.octets)
        }
        OperationKind::Read {
            msn,
            sink_stag,
            source_stag,
            size,
        } => format!(
            "RDMA Read MSN {msn}: {} of {size} octets from STag {source_stag} into STag {sink_stag}",
            o.octets
        ),
    };
    let _ = write!(
        s,
        " in {} segment{}, {}",
        o.segments,
        if o.segments == 1 { "" } else { "s" },
        duration(o.duration)
    );
    if !o.complete {
        s.push_str(", INCOMPLETE");
    }
    s
}

fn framing_line(f: &FramingInfo) -> (&'static str, String) {
    let proto = match f.framing {
        FramingKind::Ift => "IFT",
        FramingKind::Mpa => "MPA",
    };
    let mut s = format!("framing: CRC {}", crc_use(f.crc));
    if let Some(h) = f.header_crc {
        let _ = write!(s, ", header CRC {}", crc_use(h));
    }
    match f.markers {
        Some(m) => {
            let _ = write!(s, ", markers every {m} octets");
        }
        None => s.push_str(", no markers"),
    }
    if let Some(v) = f.vtag {
        let _ = write!(s, ", VTag {v:#06x}");
    }
    if let Some(ord) = f.max_reads {
        let _ = write!(s, ", ORD {ord}");
    }
    let basis = match f.basis {
        Basis::StartupFrames => "startup frames",
        Basis::AdaptionIndications => "Adaption Indications",
        Basis::OneSidedStartup => "no startup frame seen from the other end: assumed",
        Basis::NoStartup => "no startup seen: MPA FPDUs assumed",
    };
    let _ = write!(s, ", from TCP offset {} ({basis}", f.start);
    if f.crc_overridden {
        s.push_str(", --no-crc-check");
    }
    if let Some(m) = f.markers_overridden {
        let _ = write!(s, ", --markers {}", onoff(m));
    }
    s.push(')');
    (proto, s)
}

fn startup_line(f: &StartupFrameInfo) -> String {
    let kind = match f.kind {
        StartupKind::Request => Some(FrameKind::Request),
        StartupKind::Reply => Some(FrameKind::Reply),
        StartupKind::Unknown => None,
    };
    match (kind, Revision::from_wire(f.revision), &f.error) {
        (Some(kind), Some(revision), None) => StartupFrameRepr {
            kind,
            markers: f.markers,
            crc: f.crc,
            rejected: f.rejected,
            revision,
            enhanced: f.enhanced,
            private_data: &f.private_data,
        }
        .to_string(),
        // An invalid frame: its header fields as they came.
        _ => {
            let mut s = format!(
                "{} rev {}, M {} C {}",
                match f.kind {
                    StartupKind::Request => "Request",
                    StartupKind::Reply => "Reply",
                    StartupKind::Unknown => "frame",
                },
                f.revision,
                u8::from(f.markers),
                u8::from(f.crc)
            );
            if let Some(e) = &f.error {
                let _ = write!(s, " !! {e}");
            }
            s
        }
    }
}

fn indication_line(i: &IndicationInfo) -> String {
    match (&i.fields, &i.error) {
        (Some(ind), _) => ind.to_string(),
        (None, Some(e)) => format!("Adaption Indication !! {e}"),
        (None, None) => "Adaption Indication".into(),
    }
}

fn crc_word(c: CrcStatus) -> &'static str {
    match c {
        CrcStatus::Ok => "crc ok",
        CrcStatus::Bad => "CRC BAD",
        CrcStatus::Off => "crc off",
        CrcStatus::Unchecked => "crc unchecked",
    }
}

fn pdu_line(p: &PduInfo) -> (&'static str, String) {
    let mut s = String::new();
    let proto = match (&p.segment, p.rdma) {
        (Some(seg), true) => {
            let _ = write!(s, "{seg}");
            "RDMAP"
        }
        (Some(seg), false) => {
            let _ = write!(s, "{} len {}", seg.header, p.payload_len);
            "DDP"
        }
        (None, _) => {
            let _ = write!(s, "ULPDU of {} octets", p.ulpdu_len);
            match p.framing {
                FramingKind::Ift => "IFT",
                FramingKind::Mpa => "MPA",
            }
        }
    };
    let _ = write!(s, ", {}", crc_word(p.crc.status));
    if p.header_crc.is_some_and(|h| h.status == CrcStatus::Bad) {
        s.push_str(", header CRC BAD");
    }
    if !p.errors.is_empty() {
        let errors: Vec<String> = p.errors.iter().map(ToString::to_string).collect();
        let _ = write!(s, " !! {}", errors.join("; "));
    }
    (proto, s)
}

/// A PDU found ahead of a hole: the PDU's own line, where it lies, and
/// what a receiver could do with it now.
fn placeable_line(p: &PlaceableInfo) -> String {
    let (_, pdu) = pdu_line(&p.pdu);
    format!(
        "{pdu}; {} octets ahead of the hole at stream offset {}: {}",
        p.pdu.offset.saturating_sub(p.hole),
        p.hole,
        if p.placeable {
            "placeable now"
        } else {
            "held for delivery"
        }
    )
}

/// Printable ASCII of at most `max` octets, others as dots.
fn printable(octets: &[u8], max: usize) -> String {
    let mut s: String = octets
        .iter()
        .take(max)
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                char::from(b)
            } else {
                '.'
            }
        })
        .collect();
    if octets.len() > max {
        s.push('…');
    }
    s
}

/// The `-v` field tree of an event.
pub fn tree(event: &Event) -> Vec<String> {
    let mut t = Vec::new();
    match event {
        Event::MpaStartup(f) => {
            t.push(format!(
                "key \"MPA ID {} Frame\", flags {:#04x} (M {} C {} R {} enhanced {}), Rev {}, PD_Length {}, at TCP offset {}",
                if f.kind == StartupKind::Reply { "Rep" } else { "Req" },
                f.flags,
                u8::from(f.markers),
                u8::from(f.crc),
                u8::from(f.rejected),
                u8::from(f.enhanced_flag),
                f.revision,
                f.pd_length,
                f.offset
            ));
            if let Some(e) = &f.enhanced {
                t.push(format!(
                    "enhanced: IRD {} ORD {}, peer-to-peer {}, RTR Write {} Read {} Send {}",
                    e.ird,
                    e.ord,
                    onoff(e.peer_to_peer),
                    onoff(e.rtr.write),
                    onoff(e.rtr.read),
                    onoff(e.rtr.send)
                ));
            }
            if !f.private_data.is_empty() {
                t.push(format!(
                    "private data ({} octets): {} \"{}\"",
                    f.private_data.len(),
                    hex(&f.private_data),
                    printable(&f.private_data, 64)
                ));
            }
        }
        Event::IftIndication(i) => {
            if let Some(ind) = &i.fields {
                t.push(format!("{}, at TCP offset {}", ind.tree(), i.offset));
            }
        }
        Event::Pdu(p) => pdu_tree(&mut t, p),
        Event::Placeable(p) => pdu_tree(&mut t, &p.pdu),
        _ => {}
    }
    t
}

fn crc_detail(status: CrcStatus, received: Option<u32>, computed: Option<u32>) -> String {
    let mut s = match status {
        CrcStatus::Ok => "ok",
        CrcStatus::Bad => "BAD",
        CrcStatus::Off => "not in use",
        CrcStatus::Unchecked => "not checked",
    }
    .to_string();
    if let Some(r) = received {
        let _ = write!(s, ", field {r:#010x}");
    }
    if let Some(x) = computed {
        let _ = write!(s, ", computed {x:#010x}");
    }
    s
}

fn pdu_tree(t: &mut Vec<String>, p: &PduInfo) {
    let crc = crc_detail(p.crc.status, p.crc.received, p.crc.computed);
    match p.framing {
        FramingKind::Ift => t.push(format!(
            "IFT: frame at stream offset {}, {} octets on the wire, VTag {}, DDP header + payload {} octets; header CRC {}, payload CRC {crc}",
            p.offset,
            p.wire_len,
            p.vtag.map_or("-".to_string(), |v| format!("{v:#06x}")),
            p.ulpdu_len,
            p.header_crc
                .map_or("-".to_string(), |h| crc_detail(h.status, h.received, h.computed)),
        )),
        FramingKind::Mpa => t.push(format!(
            "MPA: FPDU at stream offset {}, {} octets on the wire, ULPDU_Length {}, pad {}, CRC {crc}",
            p.offset,
            p.wire_len,
            p.ulpdu_len,
            iwarp_proto::mpa::fpdu::pad_len(p.ulpdu_len),
        )),
    }
    if !p.markers.is_empty() {
        let list: Vec<String> = p
            .markers
            .iter()
            .map(|m| format!("@{} → {:#x}", m.offset, m.pointer))
            .collect();
        t.push(format!("markers: {}", list.join(", ")));
    }
    match (&p.segment, p.rdma) {
        (Some(seg), true) => t.extend(seg.tree().to_string().lines().map(String::from)),
        (Some(seg), false) => t.push(seg.header.tree(seg.dv, seg.payload_len).to_string()),
        (None, _) => {}
    }
    if p.payload_len > 0 {
        let preview = p.payload.as_bytes();
        t.push(format!(
            "payload: {}{} \"{}\"",
            hex(preview),
            if p.payload_len > preview.len() {
                "…"
            } else {
                ""
            },
            printable(preview, 64)
        ));
    }
    for e in &p.errors {
        t.push(format!("!! {e}"));
    }
}

/// `n` and `what`, plural when it is not 1.
fn plural(n: u64, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// Octets per second in a readable unit.
fn rate(octets_per_sec: f64) -> String {
    if octets_per_sec >= 1e9 {
        format!("{:.2} GB/s", octets_per_sec / 1e9)
    } else if octets_per_sec >= 1e6 {
        format!("{:.2} MB/s", octets_per_sec / 1e6)
    } else {
        format!("{:.1} kB/s", octets_per_sec / 1e3)
    }
}

/// A connection's operations, as summary lines.
fn operations_text(o: &mut String, ops: &OperationSummary) {
    let names = ["Send", "RDMA Write", "RDMA Read"];
    let classes: Vec<String> = names
        .iter()
        .zip(&ops.classes)
        .filter(|(_, c)| c.count > 0 || c.incomplete > 0)
        .map(|(name, c)| {
            let mut s = format!("{name} {} ({})", c.count, plural(c.octets, "octet"));
            if c.incomplete > 0 {
                let _ = write!(s, ", {} incomplete", c.incomplete);
            }
            s
        })
        .collect();
    if classes.is_empty() {
        let _ = writeln!(o, "      operations: none");
        return;
    }
    let _ = write!(o, "      operations: {}", classes.join(", "));
    if ops.span > 0.0 {
        let _ = write!(
            o,
            "; {} over {}",
            rate(ops.mean_throughput()),
            duration(ops.span)
        );
    }
    let _ = writeln!(o);
    if ops.throughput.len() > 1 {
        let series: Vec<String> = ops
            .throughput
            .iter()
            .map(|&b| format!("{:.1}", b as f64 / ops.interval / 1e6))
            .collect();
        let _ = writeln!(
            o,
            "      throughput per {} (MB/s): {}",
            duration(ops.interval),
            series.join(" ")
        );
    }
    if let Some(l) = &ops.read_latency {
        let _ = writeln!(
            o,
            "      Read latency ({}): min {}, p50 {}, p90 {}, p99 {}, max {}",
            plural(l.count, "Read"),
            duration(l.min),
            duration(l.p50),
            duration(l.p90),
            duration(l.p99),
            duration(l.max)
        );
    }
}

fn connection_text(o: &mut String, c: &ConnectionSummary) {
    let _ = writeln!(
        o,
        "  #{} {} <-> {}: {}",
        c.id, c.client, c.server, c.framing
    );
    for d in &c.directions {
        let (Some(src), Some(dst)) = (d.src, d.dst) else {
            continue;
        };
        let mut extra = String::new();
        if d.tcp.retransmitted > 0 {
            let _ = write!(extra, ", {} retransmitted", d.tcp.retransmitted);
        }
        if d.tcp.out_of_order > 0 {
            let _ = write!(extra, ", {} out of order", d.tcp.out_of_order);
        }
        if d.tcp.gaps > 0 {
            let _ = write!(
                extra,
                ", {} octets missing in {}",
                d.tcp.missing,
                plural(d.tcp.gaps, "gap")
            );
        }
        let mut view = String::new();
        if d.ahead > 0 {
            let _ = write!(
                view,
                "; placement view: {} found ahead of a hole, {} placeable ({} of payload)",
                plural(d.ahead, "PDU"),
                d.placeable,
                plural(d.placeable_octets, "octet"),
            );
        }
        let _ = writeln!(
            o,
            "      {src} > {dst}: {} in {}{extra}; {}, {}, {}{view}",
            plural(d.tcp.octets, "octet"),
            plural(d.tcp.segments, "segment"),
            plural(d.startup, "startup frame"),
            plural(d.pdus, "PDU"),
            plural(d.errors, "error"),
        );
    }
    operations_text(o, &c.operations);
}

/// The summary as text.
pub fn summary_text(s: &Summary, unread: Option<&str>) -> String {
    let mut o = String::new();
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "Summary: {} frames, {} TCP segments; {} iWARP connection{}{}",
        s.frames,
        s.tcp_segments,
        s.connections.len(),
        if s.connections.len() == 1 { "" } else { "s" },
        if s.not_decoded > 0 {
            format!(
                "; {} without an MPA/IFT startup not decoded (name its port with --port to decode it)",
                plural(s.not_decoded, "TCP connection")
            )
        } else {
            String::new()
        }
    );
    if !s.skipped.is_empty() {
        let list: Vec<String> = s.skipped.iter().map(|(k, v)| format!("{v} {k}")).collect();
        let _ = writeln!(o, "  frames skipped: {}", list.join(", "));
    }
    for c in &s.connections {
        connection_text(&mut o, c);
    }
    if !s.pdus.is_empty() {
        let list: Vec<String> = s.pdus.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(o, "  PDUs: {}", list.join(", "));
    }
    let e = &s.errors;
    if e.total() == 0 {
        let _ = writeln!(o, "  errors: none");
    } else {
        let _ = writeln!(
            o,
            "  errors: {} (CRC {}, header {}, framing {}, gaps {}, checks {})",
            e.total(),
            e.crc,
            e.header,
            e.framing,
            e.gaps,
            e.findings
        );
    }
    if let Some(err) = unread {
        let _ = writeln!(o, "  capture: {err}");
    }
    o
}
