//! Helpers shared by the crate's unit tests.

/// Octets from hexadecimal text, whitespace ignored: how the specs and
/// captures write them. Panics on malformed text (test input only).
pub(crate) fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digits"))
        .collect()
}

/// `len` octets that look random and differ with `seed`: input for the
/// CRC loops, whose lanes and streams must each see different octets.
pub(crate) fn scrambled(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_add(seed).wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// Flips bit `bit` of one octet of `wire`, a stream from offset `offset`:
/// the `at`-th of all, or with `on_marker` the `at`-th of the octets of
/// the markers `markers` puts there (markers are few, and a fault in one
/// takes paths a fault elsewhere does not).
pub(crate) fn damage(
    wire: &mut [u8],
    offset: u64,
    markers: Option<crate::framing::MarkerInterval>,
    (at, bit, on_marker): (proptest::sample::Index, u8, bool),
) {
    let marker_octets: Vec<usize> = match markers {
        Some(i) if on_marker => (0..wire.len())
            .filter(|&k| {
                let at = offset + k as u64;
                (0..4).any(|j| j <= at && i.is_marker_at(at - j))
            })
            .collect(),
        _ => Vec::new(),
    };
    let at = if marker_octets.is_empty() {
        at.index(wire.len())
    } else {
        marker_octets[at.index(marker_octets.len())]
    };
    wire[at] ^= 1 << bit;
}

/// Cases for a property test: `default`, or `PROPTEST_CASES` when it is
/// set, so that one variable runs every property test longer (a config
/// that names its count, as `with_cases` does, would ignore it).
pub(crate) fn proptest_cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What [`receive_direct`] got: the payload placed, the first error, and
/// where the receiver ended in the stream.
pub(crate) type DirectOutcome = (Vec<u8>, Option<String>, u64);

/// Feeds `wire` to `rx` the way the runtime's direct reads do: framing
/// octets one at a time, payload in reads of a [`Deframer::layout`] of at
/// most `read_max` payload octets and `chunk` wire octets (so that a read
/// can end inside a span), the spans read whole given to
/// [`Deframer::push_spans`], or one by one if `one_by_one`.
pub(crate) fn receive_direct<D: crate::framing::Deframer>(
    rx: &mut D,
    wire: &[u8],
    read_max: usize,
    chunk: usize,
    one_by_one: bool,
) -> DirectOutcome {
    use crate::framing::{push_spans_one_by_one, replay_read, Next, Span};
    let mut placed = Vec::new();
    let mut at = 0;
    let outcome =
        |placed, e: Option<D::Error>, rx: &D| (placed, e.map(|e| format!("{e:?}")), rx.offset());
    while at < wire.len() || (!rx.at_boundary() && rx.next() == Next::Framing) {
        let spans: Vec<Span> = rx.layout(read_max).collect();
        if spans.is_empty() {
            let end = (at + 1).min(wire.len());
            match rx.push_framing(&wire[at..end]) {
                Ok((0, None)) if end == at => break,
                Ok((n, _)) => at += n,
                Err(e) => return outcome(placed, Some(e), rx),
            }
            continue;
        }
        let total: usize = spans.iter().map(Span::wire_len).sum();
        let avail = total.min(wire.len() - at).min(chunk.max(1));
        let push = if one_by_one {
            push_spans_one_by_one::<D>
        } else {
            D::push_spans
        };
        let start = placed.len();
        let read = &wire[at..at + avail];
        let r = replay_read(rx, read, &spans, push, |run| placed.extend_from_slice(run));
        rx.fold_placed(&placed[start..]);
        if let Err(e) = r {
            return outcome(placed, Some(e), rx);
        }
        at += avail;
    }
    outcome(placed, None, rx)
}
