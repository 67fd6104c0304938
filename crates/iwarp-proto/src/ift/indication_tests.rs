//! Tests of the Adaption Indication format: vectors built by hand from
//! draft-williams-iwarp-ift-01 §4.1 (CRC octets from a bitwise CRC32c
//! written independently of the `crc32c` crate), every check of the
//! parser, and properties over arbitrary octets.

use super::indication::{flag, INDICATION_LEN, MAGIC};
use super::*;
use crate::framing::MIN_MARKER_INTERVAL;
use proptest::prelude::*;

use crate::test_util::hex;

const ZEROS_44: &str = "00000000 00000000 00000000 00000000 00000000 00000000
                        00000000 00000000 00000000 00000000 00000000";

fn base() -> Indication {
    Indication {
        version: 1,
        bc_version: 1,
        phase: Phase::Zero,
        rdma: false,
        header_crc: false,
        payload_crc: false,
        ignore_header_crc: false,
        ignore_payload_crc: false,
        speculative_placement: false,
        send_markers: false,
        receive_markers: None,
        vtag: 0,
    }
}

fn check_vector(ind: Indication, wire: &[u8]) {
    assert_eq!(wire.len(), INDICATION_LEN);
    assert_eq!(&ind.to_bytes()[..], wire);
    assert_eq!(Indication::parse_bytes(wire), Ok(ind));
}

/// Node A's phase 0: RDMA mode, both CRCs, willing to send and wishing to
/// receive markers every 512 octets, VTag 0xBEEF.
#[test]
//= draft-williams-iwarp-ift-01#4.2
//= type=test
//# The field MUST have value of one.
//= draft-williams-iwarp-ift-01#4.2
//= type=test
//# For this version of the protocol, this field MUST be set to 1.
fn vector_phase_0_rdma_crcs_markers() {
    let ind = Indication {
        rdma: true,
        header_crc: true,
        payload_crc: true,
        send_markers: true,
        receive_markers: Some(MarkerInterval::DEFAULT),
        vtag: 0xbeef,
        ..base()
    };
    assert_eq!(ind.flags(), 0x7180_0000);
    let wire = hex(&format!(
        "52444450 0001 0001 71800000 beef 0200 {ZEROS_44} 5313d162"
    ));
    check_vector(ind, &wire);
}

/// Node B's phase 1 with every flag set, VTag 0x1234, interval 1024.
#[test]
fn vector_phase_1_every_flag() {
    let ind = Indication {
        phase: Phase::One,
        rdma: true,
        header_crc: true,
        payload_crc: true,
        ignore_header_crc: true,
        ignore_payload_crc: true,
        speculative_placement: true,
        send_markers: true,
        receive_markers: MarkerInterval::new(1024),
        vtag: 0x1234,
        ..base()
    };
    assert_eq!(ind.flags(), 0xff80_0000);
    let wire = hex(&format!(
        "52444450 0001 0001 ff800000 1234 0400 {ZEROS_44} 145384d7"
    ));
    check_vector(ind, &wire);
}

/// DDP mode, nothing asked for: only magic, versions and CRC are non-zero.
#[test]
fn vector_all_clear() {
    let wire = hex(&format!(
        "52444450 0001 0001 00000000 0000 0000 {ZEROS_44} 20d4bebe"
    ));
    check_vector(base(), &wire);
}

/// §4.2: flags "starting with the MSB of the flag field and proceeding
/// left to right": PH, R, HC, PC, IH, IP, SP, SM, RM.
#[test]
fn each_flag_is_its_own_bit_from_the_msb() {
    type Set = fn(&mut Indication);
    let cases: [(Set, u32); 9] = [
        (|i| i.phase = Phase::One, flag::PH),
        (|i| i.rdma = true, flag::R),
        (|i| i.header_crc = true, flag::HC),
        (|i| i.payload_crc = true, flag::PC),
        (|i| i.ignore_header_crc = true, flag::IH),
        (|i| i.ignore_payload_crc = true, flag::IP),
        (|i| i.speculative_placement = true, flag::SP),
        (|i| i.send_markers = true, flag::SM),
        (
            |i| i.receive_markers = Some(MarkerInterval::DEFAULT),
            flag::RM,
        ),
    ];
    for (n, (set, bit)) in cases.iter().enumerate() {
        assert_eq!(*bit, 0x8000_0000 >> n);
        let mut ind = base();
        set(&mut ind);
        assert_eq!(ind.flags(), *bit);
        let wire = ind.to_bytes();
        assert_eq!(u32::from_be_bytes(wire[8..12].try_into().unwrap()), *bit);
        assert_eq!(Indication::parse_bytes(&wire), Ok(ind));
    }
    assert_eq!(flag::DEFINED, 0xff80_0000);
}

/// Re-seals octets 0..60 with a fresh CRC, for building bad indications.
fn reseal(mut wire: [u8; 64]) -> [u8; 64] {
    let crc = crate::framing::crc::crc32c(&wire[..60]);
    wire[60..].copy_from_slice(&crc.to_le_bytes());
    wire
}

#[test]
//= draft-williams-iwarp-ift-01#4.2
//= type=test
//# All reserved bits MUST be set to zero by the sender and ignored by the receiver.
fn reserved_bits_and_octets_are_ignored_but_covered_by_the_crc() {
    let ind = Indication {
        rdma: true,
        vtag: 7,
        ..base()
    };
    let mut wire = ind.to_bytes();
    wire[11] |= 0x7f; // reserved flag bits
    wire[8 + 1] |= 0x40;
    wire[16] = 0xaa; // reserved octets
    wire[59] = 0x55;
    assert!(matches!(
        Indication::parse_bytes(&wire),
        Err(IndicationError::BadCrc { .. })
    ));
    assert_eq!(Indication::parse_bytes(&reseal(wire)), Ok(ind));
}

#[test]
fn marker_interval_is_ignored_without_rm() {
    let mut wire = base().to_bytes();
    wire[14..16].copy_from_slice(&5u16.to_be_bytes());
    assert_eq!(Indication::parse_bytes(&reseal(wire)), Ok(base()));
}

#[test]
fn marker_interval_below_the_minimum_is_refused_with_rm() {
    let ind = Indication {
        receive_markers: MarkerInterval::new(MIN_MARKER_INTERVAL),
        ..base()
    };
    let mut wire = ind.to_bytes();
    assert_eq!(Indication::parse_bytes(&wire), Ok(ind));
    wire[14..16].copy_from_slice(&(MIN_MARKER_INTERVAL - 1).to_be_bytes());
    assert_eq!(
        Indication::parse_bytes(&reseal(wire)),
        Err(IndicationError::BadMarkerInterval { interval: 63 })
    );
}

#[test]
//= draft-williams-iwarp-ift-01#4.2
//= type=test
//# CRC computed on adaption indication is REQUIRED regardless of whether header or payload CRCs
//# are negotiated in either direction.
fn magic_crc_and_length_are_checked() {
    let wire = base().to_bytes();
    assert_eq!(
        Indication::parse_bytes(&wire[..63]),
        Err(IndicationError::Truncated { len: 63 })
    );
    assert_eq!(
        Indication::parse_bytes(&[]),
        Err(IndicationError::Truncated { len: 0 })
    );
    // Octets after the 64 are not the indication's business.
    let mut longer = wire.to_vec();
    longer.extend_from_slice(b"frames");
    assert_eq!(Indication::parse_bytes(&longer), Ok(base()));
    // An MPA Request frame is not an indication, whatever its CRC.
    let mut mpa = [0u8; 64];
    mpa[..16].copy_from_slice(b"MPA ID Req Frame");
    assert_eq!(
        Indication::parse_bytes(&reseal(mpa)),
        Err(IndicationError::BadMagic { found: 0x4d50_4120 })
    );
    assert_eq!(u32::from_be_bytes(*b"RDDP"), MAGIC);
    // Each CRC octet matters.
    for i in 60..64 {
        let mut bad = wire;
        bad[i] ^= 0x10;
        assert!(matches!(
            Indication::parse_bytes(&bad),
            Err(IndicationError::BadCrc { .. })
        ));
    }
}

/// §4.2: a BC version greater than ours MUST be rejected; a greater
/// version need not be as long as the BC version is not. Version 0 is
/// older than anything we are compatible with.
#[test]
//= draft-williams-iwarp-ift-01#4.2
//= type=test
//# On receipt, any value greater than the current version MUST be rejected as incompatible.
fn version_rules() {
    let cases = [
        (1, 1, true),
        (2, 1, true),
        (9, 0, true),
        (0xffff, 1, true),
        (1, 0, true),
        (2, 2, false),
        (1, 2, false),
        (0xffff, 0xffff, false),
        (0, 0, false),
        (0, 1, false),
    ];
    for (version, bc_version, ok) in cases {
        let ind = Indication {
            version,
            bc_version,
            ..base()
        };
        let got = Indication::parse_bytes(&ind.to_bytes());
        if ok {
            assert_eq!(got, Ok(ind), "version {version} bc {bc_version}");
        } else {
            assert_eq!(
                got,
                Err(IndicationError::Incompatible {
                    version,
                    bc_version
                })
            );
        }
    }
}

fn indication_strategy() -> impl Strategy<Value = Indication> {
    (
        (1u16..5, 0u16..=1, any::<bool>(), any::<bool>()),
        any::<[bool; 7]>(),
        prop_oneof![Just(None), (MIN_MARKER_INTERVAL..=u16::MAX).prop_map(Some)],
        any::<u16>(),
    )
        .prop_map(
            |((version, bc_version, phase, rdma), f, markers, vtag)| Indication {
                version,
                bc_version,
                phase: if phase { Phase::One } else { Phase::Zero },
                rdma,
                header_crc: f[0],
                payload_crc: f[1],
                ignore_header_crc: f[2],
                ignore_payload_crc: f[3],
                speculative_placement: f[4],
                send_markers: f[5],
                receive_markers: markers.and_then(MarkerInterval::new),
                vtag,
            },
        )
}

proptest! {
    #[test]
    fn emit_then_parse_round_trips(ind in indication_strategy()) {
        prop_assert_eq!(Indication::parse_bytes(&ind.to_bytes()), Ok(ind));
    }

    /// Arbitrary octets never panic the parser; a valid magic and CRC are
    /// needed for anything to pass.
    #[test]
    fn arbitrary_octets_never_panic(data in prop::collection::vec(any::<u8>(), 0..80), seal in any::<bool>()) {
        let mut data = data;
        if seal && data.len() >= 64 {
            data[..4].copy_from_slice(&MAGIC.to_be_bytes());
            let crc = crate::framing::crc::crc32c(&data[..60]);
            data[60..64].copy_from_slice(&crc.to_le_bytes());
        }
        if let Ok(ind) = Indication::parse_bytes(&data) {
            prop_assert!(data.len() >= 64);
            // What was parsed emits the same meaning.
            prop_assert_eq!(Indication::parse_bytes(&ind.to_bytes()), Ok(ind));
        }
    }
}
