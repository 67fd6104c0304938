//! The out-of-order receiver against the in-order receiver, in the
//! deterministic network simulator (`iwarp_proto::sim`): for any seed,
//! framing, workload and link model, the two must complete the same work
//! in the same order, report the same errors and leave the same memory;
//! nothing may be written outside a region, and what is held must stay
//! within the window.
//!
//! `cargo test` runs a modest number of cases per link model; set
//! `PROPTEST_CASES` (e.g. 100000, in a release build) for a long run.

mod common;

use iwarp_proto::sim::{run, LinkModel, Scenario, SimFraming, Workload};
use proptest::prelude::*;

/// The link models: name, model.
const MODELS: [(&str, LinkModel); 4] = [
    (
        "reorder",
        LinkModel {
            loss: 0.0,
            reorder: 16,
            duplicate: 0.0,
            mss: 1460,
            resend_all: 0.2,
        },
    ),
    (
        "lossy",
        LinkModel {
            loss: 0.05,
            reorder: 8,
            duplicate: 0.02,
            mss: 1460,
            resend_all: 0.2,
        },
    ),
    (
        "harsh",
        LinkModel {
            loss: 0.15,
            reorder: 64,
            duplicate: 0.1,
            mss: 536,
            resend_all: 0.2,
        },
    ),
    (
        "small segments",
        LinkModel {
            loss: 0.03,
            reorder: 6,
            duplicate: 0.05,
            mss: 100,
            resend_all: 0.2,
        },
    ),
];

fn check(s: &Scenario) {
    let r = run(s, false);
    if let Some(m) = r.mismatch {
        panic!("{s:?}\n{m}");
    }
}

#[test]
//= draft-ietf-rddp-mpa-01#1.2
//= type=test
//# MPA implementations that support recovery of out of order ULPDUs MUST support a mechanism
//# to indicate the ordering of ULPDUs as the sender transmitted them and indicate when
//# missing intermediate segments arrive.
//= draft-ietf-rddp-mpa-01#3.1.2
//= type=test
//# When an MPA receive implementation and the MPA-aware receive side TCP implementation
//# support handling out of order ULPDUs, the TCP receive implementation SHOULD be enabled to:
//# * Pass incoming TCP segments to MPA as soon as they have been received and validated, even
//# if not received in order.
//= draft-ietf-rddp-mpa-01#3.1.2
//= type=test
//# DDP on MPA MUST utilize these two mechanisms to establish the Delivery semantics that
//# DDP's consumers agree to.
//= draft-ietf-rddp-mpa-01#3.1.2
//= type=test
//# When MPA is enabled above an MPA-aware TCP, TCP SHOULD enable the in and out of order
//# passing of data, and the separate ordering information as described above.
//= draft-ietf-rddp-mpa-01#3.2
//= type=test
//# If an MPA implementation supports passing out of order ULPDUs to DDP, the MPA
//# implementation SHOULD: * Pass each ULPDU with its length to DDP as soon as it has been
//# fully received and validated. * Provide a mechanism to indicate the ordering of ULPDUs as
//# the sender transmitted them.
//= rfc5041#3
//= type=test
//# The LLP MAY provide the incoming segments out of order for Placement, but if it does, it
//# MUST also provide information that specifies what the sender specified order was.
//= draft-williams-iwarp-ift-01#6
//= type=test
//# Note that this does not preclude a merged layer implementation from placing data out of
//# order, but any such implementation MUST be functionally equivalent to a layered
//# implementation in which TCP delivers all data in order.
fn every_framing_and_link_model_agrees_with_in_order() {
    for (_, link) in MODELS {
        for framing in SimFraming::ALL {
            for seed in 0..3 {
                check(&Scenario {
                    seed,
                    framing,
                    link,
                    workload: Workload::SMALL,
                    window: 256 << 10,
                });
            }
        }
    }
}

fn framing() -> impl Strategy<Value = SimFraming> {
    proptest::sample::select(SimFraming::ALL.to_vec())
}

fn workload() -> impl Strategy<Value = Workload> {
    (
        1usize..40,
        0usize..6,
        prop_oneof![0usize..64, 0usize..3000, 0usize..12_000],
        proptest::bool::weighted(0.2),
        1usize..16,
    )
        .prop_map(|(ops, reads, max_len, bad_op, recv_ahead)| Workload {
            ops,
            reads,
            max_len,
            bad_op,
            recv_ahead,
            ..Workload::SMALL
        })
}

fn window() -> impl Strategy<Value = usize> {
    proptest::sample::select(vec![96 << 10, 256 << 10, 1 << 20])
}

/// One property test per link model.
macro_rules! per_model {
    ($($name:ident => $i:expr),* $(,)?) => {$(
        proptest! {
            #![proptest_config(ProptestConfig { cases: common::proptest_cases(16), ..ProptestConfig::default() })]
            #[test]
            fn $name(seed in any::<u64>(), framing in framing(), workload in workload(), window in window()) {
                check(&Scenario { seed, framing, link: MODELS[$i].1, workload, window });
            }
        }
    )*};
}

per_model! {
    identical_under_reordering => 0,
    identical_under_loss => 1,
    identical_under_heavy_loss_and_reordering => 2,
    identical_with_pdus_split_across_segments => 3,
}

/// The runs above are not vacuous: with loss and reordering, most of what
/// arrives ahead of a hole is placed on arrival, and far less is held
/// than an in-order reassembly buffer holds; an operation the receiver
/// must refuse stops both receivers with the same error.
#[test]
fn placement_happens_ahead_of_delivery_and_errors_are_reported() {
    let s = Scenario {
        seed: 7,
        framing: SimFraming::MpaMarkers,
        link: MODELS[2].1,
        // Every receive posted: a burst of Sends delivered when a hole
        // fills finds its buffers.
        workload: Workload {
            recv_ahead: Workload::SMALL.ops,
            ..Workload::SMALL
        },
        window: 256 << 10,
    };
    let r = run(&s, false);
    assert_eq!(r.mismatch, None);
    assert!(r.lost > 0 && r.retransmitted > 0, "{r:?}");
    assert_eq!(r.error, None);
    let st = r.stats;
    assert!(st.early_octets * 10 > st.ahead_octets * 9, "{st:?}");
    assert!(
        st.peak_held_octets * 4 < st.peak_reassembly_octets,
        "{st:?}"
    );
    for seed in 0..8 {
        let mut bad = s;
        bad.seed = seed;
        bad.workload.bad_op = true;
        let r = run(&bad, false);
        assert_eq!(r.mismatch, None, "{bad:?}");
        assert!(r.error.is_some(), "{bad:?}: the bad operation went through");
    }
}
