//! How the typed values are written with `serde`: STags, tagged offsets
//! and CRC values as `"0x…"` strings, octets as hex, errors and reasons in
//! words.

// Called by serde's derive by name (`serialize_with`), one helper per
// kind of field.

use std::fmt::Display;

use crate::hex;

use iwarp_proto::ddp::SegmentHeader;
use iwarp_proto::rdmap::pretty::{layer_name, Pdu};
use iwarp_proto::rdmap::{ReadRequest, TerminateMessage};
use serde::ser::{SerializeMap, Serializer};

pub fn bytes<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hex(b))
}

pub fn display_opt<S: Serializer, T: Display>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.collect_str(v),
        None => s.serialize_none(),
    }
}

pub fn crc_opt<S: Serializer>(v: &Option<u32>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.collect_str(&format_args!("{v:#010x}")),
        None => s.serialize_none(),
    }
}

pub fn stag<S: Serializer>(v: &iwarp_proto::memory::STag, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

pub fn stag_opt<S: Serializer>(
    v: &Option<iwarp_proto::memory::STag>,
    s: S,
) -> Result<S::Ok, S::Error> {
    display_opt(v, s)
}

pub fn to<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{v:#x}"))
}

/// A DDP header's fields, `"model"` naming the buffer model.
fn header_entries<M: SerializeMap>(m: &mut M, h: &SegmentHeader, dv: u8) -> Result<(), M::Error> {
    match h {
        SegmentHeader::Tagged(t) => {
            m.serialize_entry("model", "tagged")?;
            m.serialize_entry("last", &t.last)?;
            m.serialize_entry("dv", &dv)?;
            m.serialize_entry("stag", &t.stag.to_string())?;
            m.serialize_entry("to", &format!("{:#x}", t.to))?;
        }
        SegmentHeader::Untagged(u) => {
            m.serialize_entry("model", "untagged")?;
            m.serialize_entry("last", &u.last)?;
            m.serialize_entry("dv", &dv)?;
            m.serialize_entry("qn", &u.qn)?;
            m.serialize_entry("msn", &u.msn)?;
            m.serialize_entry("mo", &u.mo)?;
        }
    }
    Ok(())
}

/// A Read Request's five fields.
struct ReadRequestJson<'a>(&'a ReadRequest);

impl serde::Serialize for ReadRequestJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.0;
        let mut m = s.serialize_map(Some(5))?;
        m.serialize_entry("sink_stag", &r.sink_stag.to_string())?;
        m.serialize_entry("sink_to", &format!("{:#x}", r.sink_to))?;
        m.serialize_entry("size", &r.size)?;
        m.serialize_entry("source_stag", &r.source_stag.to_string())?;
        m.serialize_entry("source_to", &format!("{:#x}", r.source_to))?;
        m.end()
    }
}

/// A Terminate: layer, type, code, the error in words, the header copies.
struct TerminateJson<'a>(&'a TerminateMessage);

impl serde::Serialize for TerminateJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let t = self.0;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("layer", &t.layer)?;
        m.serialize_entry("layer_name", layer_name(t.layer))?;
        m.serialize_entry("etype", &t.etype)?;
        m.serialize_entry("code", &t.code)?;
        let error = match t.error() {
            Some(e) => e.to_string(),
            None => format!("{}: unknown error", layer_name(t.layer)),
        };
        m.serialize_entry("error", &error)?;
        if let Some(d) = &t.ddp {
            if let Ok(copy) = Pdu::parse(d.header(), d.header().len()) {
                m.serialize_entry("ddp_copy", &CopyJson(d, &copy.header, copy.dv))?;
            }
        }
        if let Some(r) = t
            .rdmap
            .as_ref()
            .and_then(|r| ReadRequest::parse_bytes(r).ok())
        {
            m.serialize_entry("rdmap_copy", &ReadRequestJson(&r))?;
        }
        m.end()
    }
}

/// The DDP header copied into a Terminate.
struct CopyJson<'a>(&'a iwarp_proto::rdmap::TerminatedDdp, &'a SegmentHeader, u8);

impl serde::Serialize for CopyJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Ddp<'a>(&'a SegmentHeader, u8);
        impl serde::Serialize for Ddp<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(None)?;
                header_entries(&mut m, self.0, self.1)?;
                m.end()
            }
        }
        let mut m = s.serialize_map(None)?;
        if let Some(len) = self.0.segment_length {
            m.serialize_entry("segment_length", &len)?;
        }
        m.serialize_entry("header", &hex(self.0.header()))?;
        m.serialize_entry("ddp", &Ddp(self.1, self.2))?;
        let op = iwarp_proto::rdmap::Opcode::from_bits(iwarp_proto::rdmap::control_opcode(
            self.1.rsvd_ulp(),
        ));
        m.serialize_entry(
            "rdmap",
            &op.map_or("reserved opcode".to_string(), |o| o.to_string()),
        )?;
        m.end()
    }
}

/// The DDP header of a PDU, with the RDMAP message in it under `"rdmap"`.
struct DdpJson<'a>(&'a Pdu);

impl serde::Serialize for DdpJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let p = self.0;
        let mut m = s.serialize_map(None)?;
        header_entries(&mut m, &p.header, p.dv)?;
        m.end()
    }
}

impl serde::Serialize for crate::event::PduInfo {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("framing", &self.framing)?;
        m.serialize_entry("offset", &self.offset)?;
        m.serialize_entry("wire_len", &self.wire_len)?;
        m.serialize_entry("ulpdu_len", &self.ulpdu_len)?;
        m.serialize_entry("crc", &self.crc)?;
        if let Some(h) = &self.header_crc {
            m.serialize_entry("header_crc", h)?;
        }
        if let Some(v) = &self.vtag {
            m.serialize_entry("vtag", v)?;
        }
        if !self.markers.is_empty() {
            m.serialize_entry("markers", &self.markers)?;
        }
        if let Some(p) = &self.segment {
            m.serialize_entry("ddp", &DdpJson(p))?;
            if self.rdma {
                m.serialize_entry("rdmap", &RdmapJson(p))?;
            }
        }
        m.serialize_entry("payload_len", &self.payload_len)?;
        m.serialize_entry("payload", &hex(self.payload.as_bytes()))?;
        if !self.errors.is_empty() {
            let errors: Vec<String> = self.errors.iter().map(ToString::to_string).collect();
            m.serialize_entry("errors", &errors)?;
        }
        m.end()
    }
}

/// The RDMAP message of a segment: RV, opcode and name, SE, Invalidate
/// STag, Read Request, Terminate.
struct RdmapJson<'a>(&'a Pdu);

impl serde::Serialize for RdmapJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let p = self.0;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("rv", &p.rdmap_version())?;
        m.serialize_entry(
            "opcode",
            &iwarp_proto::rdmap::control_opcode(p.header.rsvd_ulp()),
        )?;
        m.serialize_entry(
            "name",
            &p.opcode()
                .map_or("reserved opcode".to_string(), |o| o.to_string()),
        )?;
        m.serialize_entry("solicited", &p.solicited())?;
        if let Some(stag) = p.invalidate_stag() {
            m.serialize_entry("invalidate_stag", &stag.to_string())?;
        }
        if let Some(r) = &p.read_request {
            m.serialize_entry("read_request", &ReadRequestJson(r))?;
        }
        if let Some(t) = &p.terminate {
            m.serialize_entry("terminate", &TerminateJson(t))?;
        }
        m.end()
    }
}

pub fn display_map<S: Serializer, K: Display, V: serde::Serialize>(
    v: &std::collections::BTreeMap<K, V>,
    s: S,
) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(v.len()))?;
    for (k, v) in v {
        m.serialize_entry(&k.to_string(), v)?;
    }
    m.end()
}

/// RFC 6581's words: IRD, ORD, peer-to-peer and the RTR types.
pub fn enhanced_opt<S: Serializer>(
    e: &Option<iwarp_proto::mpa::startup::EnhancedData>,
    s: S,
) -> Result<S::Ok, S::Error> {
    let Some(e) = e else {
        return s.serialize_none();
    };
    let mut m = s.serialize_map(Some(6))?;
    m.serialize_entry("ird", &e.ird)?;
    m.serialize_entry("ord", &e.ord)?;
    m.serialize_entry("peer_to_peer", &e.peer_to_peer)?;
    m.serialize_entry("rtr_write", &e.rtr.write)?;
    m.serialize_entry("rtr_read", &e.rtr.read)?;
    m.serialize_entry("rtr_send", &e.rtr.send)?;
    m.end()
}

impl serde::Serialize for crate::event::IndicationInfo {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("offset", &self.offset)?;
        if let Some(i) = &self.fields {
            let phase = match i.phase {
                iwarp_proto::ift::Phase::Zero => 0u8,
                iwarp_proto::ift::Phase::One => 1,
            };
            m.serialize_entry("phase", &phase)?;
            m.serialize_entry("version", &i.version)?;
            m.serialize_entry("rdma", &i.rdma)?;
            m.serialize_entry("header_crc", &i.header_crc)?;
            m.serialize_entry("payload_crc", &i.payload_crc)?;
            m.serialize_entry("ignore_header_crc", &i.ignore_header_crc)?;
            m.serialize_entry("ignore_payload_crc", &i.ignore_payload_crc)?;
            m.serialize_entry("speculative_placement", &i.speculative_placement)?;
            m.serialize_entry("send_markers", &i.send_markers)?;
            m.serialize_entry("receive_markers", &i.receive_markers.map(|m| m.get()))?;
            m.serialize_entry("vtag", &i.vtag)?;
        }
        if let Some(e) = &self.error {
            m.serialize_entry("error", &e.to_string())?;
        }
        m.end()
    }
}
