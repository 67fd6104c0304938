//! Output: text lines like `tshark`'s (with `-v`, a field tree under each),
//! or JSON Lines.
//!
//! Text: one line per event,
//!
//! ```text
//!  FRAME       TIME SRC > DST  PROTO  SUMMARY
//! ```
//!
//! where FRAME is the capture frame that completed the event and TIME is in
//! seconds since the first frame. JSON: each [`Record`] as one object per
//! line, then the [`Summary`] as `{"type":"summary",...}`.

use std::fmt::Write as _;
use std::io::{self, Write};

use super::event::{
    CrcInfo, CrcStatus, DdpInfo, Event, IndicationInfo, Level, PduInfo, RdmapInfo, ReadRequestInfo,
    Record, StartupFrameInfo, TerminateInfo,
};
use super::summary::Summary;

/// Where records and the summary go.
pub trait Output {
    /// One event.
    fn record(&mut self, record: &Record) -> io::Result<()>;
    /// The closing summary.
    fn summary(&mut self, summary: &Summary) -> io::Result<()>;
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

    fn summary(&mut self, summary: &Summary) -> io::Result<()> {
        #[derive(serde::Serialize)]
        struct Tagged<'a> {
            r#type: &'static str,
            #[serde(flatten)]
            summary: &'a Summary,
        }
        serde_json::to_writer(
            &mut self.out,
            &Tagged {
                r#type: "summary",
                summary,
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
}

impl<W: Write> Text<W> {
    /// Writes to `out`; `verbose` adds the field trees.
    pub fn new(out: W, verbose: bool) -> Self {
        Self { out, verbose }
    }
}

impl<W: Write> Output for Text<W> {
    fn record(&mut self, r: &Record) -> io::Result<()> {
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

    fn summary(&mut self, s: &Summary) -> io::Result<()> {
        write!(self.out, "{}", summary_text(s))?;
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

/// The protocol column and the one-line summary of an event.
pub fn line(event: &Event) -> (&'static str, String) {
    match event {
        Event::MpaStartup(f) => ("MPA", startup_line(f)),
        Event::IftIndication(i) => ("IFT", indication_line(i)),
        Event::Framing(f) => {
            let proto = if f.framing == "ift" { "IFT" } else { "MPA" };
            let mut s = format!("framing: CRC {}", f.crc);
            if let Some(h) = f.header_crc {
                let _ = write!(s, ", header CRC {h}");
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
            let _ = write!(s, ", from TCP offset {} ({})", f.start, f.basis);
            (proto, s)
        }
        Event::Pdu(p) => pdu_line(p),
        Event::Gap(g) => (
            "TCP",
            format!(
                "!! {} octets not captured at TCP offset {}{}",
                g.octets,
                g.offset,
                match g.action {
                    "resync" => ": looking for a marker to resynchronise",
                    "stop" => ": decoding of this direction stops",
                    _ => "",
                }
            ),
        ),
        Event::Resync(r) => (
            "MPA",
            format!(
                "resynchronised at stream offset {} after {} octets, on the {}",
                r.offset, r.skipped, r.method
            ),
        ),
        Event::Note(n) => {
            let tag = match n.level {
                Level::Info => "note",
                Level::Warning => "warn",
                Level::Error => "ERROR",
            };
            (tag, n.message.clone())
        }
    }
}

fn startup_line(f: &StartupFrameInfo) -> String {
    let name = match f.kind {
        "request" => "Request",
        "reply" => "Reply",
        _ => "frame",
    };
    let mut s = format!("{name} rev {}", f.revision);
    if let Some(e) = &f.enhanced {
        let _ = write!(s, " enhanced IRD {} ORD {}", e.ird, e.ord);
        if e.peer_to_peer {
            s.push_str(" P2P");
            for (on, t) in [
                (e.rtr_write, "Write"),
                (e.rtr_read, "Read"),
                (e.rtr_send, "Send"),
            ] {
                if on {
                    let _ = write!(s, " RTR-{t}");
                }
            }
        }
    }
    let _ = write!(s, ", M {} C {}", u8::from(f.markers), u8::from(f.crc));
    if f.kind == "reply" {
        let _ = write!(s, " R {}", u8::from(f.rejected));
    }
    let pd = f.private_data.len() / 2;
    if pd > 0 {
        let _ = write!(
            s,
            ", {pd} octets of private data \"{}\"",
            printable(&f.private_data, 32)
        );
    }
    if f.rejected {
        s.push_str(" REJECTED");
    }
    if let Some(e) = &f.error {
        let _ = write!(s, " !! {e}");
    }
    s
}

fn indication_line(i: &IndicationInfo) -> String {
    match (&i.fields, &i.error) {
        (Some(f), _) => {
            let mut s = format!(
                "Adaption Indication phase {}, {} mode, HC {} PC {}, VTag {:#06x}",
                f.phase,
                if f.rdma { "RDMA" } else { "DDP" },
                u8::from(f.header_crc),
                u8::from(f.payload_crc),
                f.vtag
            );
            if let Some(m) = f.receive_markers {
                let _ = write!(s, ", markers every {m} wanted");
            }
            s
        }
        (None, Some(e)) => format!("Adaption Indication !! {e}"),
        (None, None) => "Adaption Indication".into(),
    }
}

fn crc_word(c: &CrcInfo) -> &'static str {
    match c.status {
        CrcStatus::Ok => "crc ok",
        CrcStatus::Bad => "CRC BAD",
        CrcStatus::Off => "crc off",
        CrcStatus::Unchecked => "crc unchecked",
    }
}

fn pdu_line(p: &PduInfo) -> (&'static str, String) {
    let mut s = String::new();
    let proto = match (&p.rdmap, &p.ddp) {
        (Some(r), Some(d)) => {
            rdmap_summary(&mut s, r, d, p.payload_len);
            "RDMAP"
        }
        (None, Some(d)) => {
            ddp_summary(&mut s, d);
            let _ = write!(s, " len {}", p.payload_len);
            "DDP"
        }
        _ => {
            let _ = write!(s, "ULPDU of {} octets", p.ulpdu_len);
            if p.framing == "ift" {
                "IFT"
            } else {
                "MPA"
            }
        }
    };
    let _ = write!(s, ", {}", crc_word(&p.crc));
    if let Some(h) = &p.header_crc {
        if h.status == CrcStatus::Bad {
            s.push_str(", header CRC BAD");
        }
    }
    if !p.errors.is_empty() {
        let _ = write!(s, " !! {}", p.errors.join("; "));
    }
    (proto, s)
}

fn ddp_summary(s: &mut String, d: &DdpInfo) {
    match d {
        DdpInfo::Tagged { last, stag, to, .. } => {
            let _ = write!(s, "STag {stag} TO {to}{}", if *last { " last" } else { "" });
        }
        DdpInfo::Untagged {
            last, qn, msn, mo, ..
        } => {
            let _ = write!(
                s,
                "QN {qn} MSN {msn} MO {mo}{}",
                if *last { " last" } else { "" }
            );
        }
    }
}

fn read_request_summary(r: &ReadRequestInfo) -> String {
    format!(
        "{} octets from STag {} TO {} into STag {} TO {}",
        r.size, r.source_stag, r.source_to, r.sink_stag, r.sink_to
    )
}

fn terminate_summary(t: &TerminateInfo) -> String {
    let mut s = format!(
        "{} [layer {} type {} code {:#04x}]",
        t.error, t.layer, t.etype, t.code
    );
    if let Some(d) = &t.ddp_copy {
        let _ = write!(s, "; offending {} (", d.rdmap);
        ddp_summary(&mut s, &d.ddp);
        if let Some(len) = d.segment_length {
            let _ = write!(s, ", ULPDU length {len}");
        }
        s.push(')');
    }
    if let Some(r) = &t.rdmap_copy {
        let _ = write!(s, "; offending Read Request: {}", read_request_summary(r));
    }
    s
}

fn rdmap_summary(s: &mut String, r: &RdmapInfo, d: &DdpInfo, payload_len: usize) {
    s.push_str(r.name);
    if let Some(inv) = &r.invalidate_stag {
        let _ = write!(s, " (invalidate {inv})");
    }
    s.push(' ');
    if let Some(rr) = &r.read_request {
        if let DdpInfo::Untagged { msn, .. } = d {
            let _ = write!(s, "MSN {msn}: ");
        }
        s.push_str(&read_request_summary(rr));
        return;
    }
    if let Some(t) = &r.terminate {
        s.push_str(&terminate_summary(t));
        return;
    }
    ddp_summary(s, d);
    let _ = write!(s, " len {payload_len}");
}

/// Printable ASCII of at most `max` octets of `hex`, others as dots.
fn printable(hex: &str, max: usize) -> String {
    let octets = (0..hex.len() / 2)
        .take(max)
        .filter_map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok());
    let mut s: String = octets
        .map(|b| {
            if b.is_ascii_graphic() || b == b' ' {
                char::from(b)
            } else {
                '.'
            }
        })
        .collect();
    if hex.len() / 2 > max {
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
                if f.kind == "reply" { "Rep" } else { "Req" },
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
                    onoff(e.rtr_write),
                    onoff(e.rtr_read),
                    onoff(e.rtr_send)
                ));
            }
            if !f.private_data.is_empty() {
                t.push(format!(
                    "private data ({} octets): {} \"{}\"",
                    f.private_data.len() / 2,
                    f.private_data,
                    printable(&f.private_data, 64)
                ));
            }
        }
        Event::IftIndication(i) => {
            if let Some(f) = &i.fields {
                t.push(format!(
                    "version {}, phase {}, R {} HC {} PC {} IH {} IP {} SP {} SM {} RM {}, VTag {:#06x}, at TCP offset {}",
                    f.version,
                    f.phase,
                    u8::from(f.rdma),
                    u8::from(f.header_crc),
                    u8::from(f.payload_crc),
                    u8::from(f.ignore_header_crc),
                    u8::from(f.ignore_payload_crc),
                    u8::from(f.speculative_placement),
                    u8::from(f.send_markers),
                    f.receive_markers.map_or("0".to_string(), |m| format!("1 (every {m})")),
                    f.vtag,
                    i.offset
                ));
            }
        }
        Event::Pdu(p) => pdu_tree(&mut t, p),
        _ => {}
    }
    t
}

fn crc_detail(c: &CrcInfo) -> String {
    let mut s = match c.status {
        CrcStatus::Ok => "ok",
        CrcStatus::Bad => "BAD",
        CrcStatus::Off => "not in use",
        CrcStatus::Unchecked => "not checked",
    }
    .to_string();
    if let Some(r) = &c.received {
        let _ = write!(s, ", field {r}");
    }
    if let Some(x) = &c.computed {
        let _ = write!(s, ", computed {x}");
    }
    s
}

fn pdu_tree(t: &mut Vec<String>, p: &PduInfo) {
    if p.framing == "ift" {
        t.push(format!(
            "IFT: frame at stream offset {}, {} octets on the wire, VTag {}, DDP header + payload {} octets; header CRC {}, payload CRC {}",
            p.offset,
            p.wire_len,
            p.vtag.map_or("-".to_string(), |v| format!("{v:#06x}")),
            p.ulpdu_len,
            p.header_crc.as_ref().map_or("-".to_string(), crc_detail),
            crc_detail(&p.crc)
        ));
    } else {
        t.push(format!(
            "MPA: FPDU at stream offset {}, {} octets on the wire, ULPDU_Length {}, pad {}, CRC {}",
            p.offset,
            p.wire_len,
            p.ulpdu_len,
            iwarp_proto::mpa::fpdu::pad_len(p.ulpdu_len),
            crc_detail(&p.crc)
        ));
    }
    if !p.markers.is_empty() {
        let list: Vec<String> = p
            .markers
            .iter()
            .map(|m| format!("@{} → {:#x}", m.offset, m.pointer))
            .collect();
        t.push(format!("markers: {}", list.join(", ")));
    }
    match &p.ddp {
        Some(DdpInfo::Tagged { last, dv, stag, to }) => t.push(format!(
            "DDP: tagged, L {}, DV {dv}, STag {stag}, TO {to}, {} payload octets",
            u8::from(*last),
            p.payload_len
        )),
        Some(DdpInfo::Untagged {
            last,
            dv,
            qn,
            msn,
            mo,
        }) => t.push(format!(
            "DDP: untagged, L {}, DV {dv}, QN {qn}, MSN {msn}, MO {mo}, {} payload octets",
            u8::from(*last),
            p.payload_len
        )),
        None => {}
    }
    if let Some(r) = &p.rdmap {
        let mut s = format!("RDMAP: RV {}, opcode {} ({})", r.rv, r.opcode, r.name);
        if r.solicited {
            s.push_str(", solicited event");
        }
        if let Some(inv) = &r.invalidate_stag {
            let _ = write!(s, ", invalidate STag {inv}");
        }
        t.push(s);
        if let Some(rr) = &r.read_request {
            t.push(format!(
                "Read Request: sink STag {} TO {}, size {}, source STag {} TO {}",
                rr.sink_stag, rr.sink_to, rr.size, rr.source_stag, rr.source_to
            ));
        }
        if let Some(term) = &r.terminate {
            t.push(format!(
                "Terminate: layer {} ({}), type {}, code {:#04x}: {}",
                term.layer, term.layer_name, term.etype, term.code, term.error
            ));
            if let Some(d) = &term.ddp_copy {
                let mut s = format!("  DDP copy: {} ", d.rdmap);
                ddp_summary(&mut s, &d.ddp);
                if let Some(len) = d.segment_length {
                    let _ = write!(s, ", segment length {len}");
                }
                let _ = write!(s, " [{}]", d.header);
                t.push(s);
            }
            if let Some(rr) = &term.rdmap_copy {
                t.push(format!(
                    "  RDMAP copy: Read Request {}",
                    read_request_summary(rr)
                ));
            }
        }
    }
    if p.payload_len > 0 {
        t.push(format!(
            "payload: {}{} \"{}\"",
            p.payload,
            if p.payload_len * 2 > p.payload.len() {
                "…"
            } else {
                ""
            },
            printable(&p.payload, 64)
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

/// The summary as text.
pub fn summary_text(s: &Summary) -> String {
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
                "; {} TCP connection{} without an MPA/IFT startup not decoded (name its port with --port to decode it)",
                s.not_decoded,
                if s.not_decoded == 1 { "" } else { "s" }
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
                    ", {} octets missing in {} gap{}",
                    d.tcp.missing,
                    d.tcp.gaps,
                    if d.tcp.gaps == 1 { "" } else { "s" }
                );
            }
            let _ = writeln!(
                o,
                "      {src} > {dst}: {} in {}{extra}; {}, {}, {}",
                plural(d.tcp.octets, "octet"),
                plural(d.tcp.segments, "segment"),
                plural(d.startup, "startup frame"),
                plural(d.pdus, "PDU"),
                plural(d.errors, "error"),
            );
        }
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
            "  errors: {} (CRC {}, header {}, framing {}, gaps {})",
            e.total(),
            e.crc,
            e.header,
            e.framing,
            e.gaps
        );
    }
    if let Some(err) = &s.capture_error {
        let _ = writeln!(o, "  capture: {err}");
    }
    o
}
