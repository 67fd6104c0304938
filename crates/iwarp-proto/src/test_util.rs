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

/// Cases for a property test: `default`, or `PROPTEST_CASES` when it is
/// set, so that one variable runs every property test longer (a config
/// that names its count, as `with_cases` does, would ignore it).
pub(crate) fn proptest_cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
