//! The link's shaper and policer (the GCRA contracts of `gcra.rs`) at work on frames.

use super::tests_qdisc::{drive, header_checksum_ok, ipv4_frame};
use super::*;

/// Peak 8 Mbit/s (1 ms per 1000-byte frame), sustained 4 Mbit/s, MBS `burst`.
fn contract(burst: u64) -> GcraConfig {
    GcraConfig {
        peak_bps: 8_000_000,
        sustained_bps: 4_000_000,
        burst_bytes: burst,
    }
}

fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

#[test]
fn a_shaped_link_sends_the_burst_at_peak_then_the_sustained_rate() {
    // An infinitely fast link shaped to the contract: ten 1000-byte frames offered at
    // once leave at 0, 1, 2, 3 ms (MBS 3001 at the peak), then every 2 ms.
    let config = LinkConfig::default().with_shape(Some(contract(3001)));
    let mut link = LinkModel::new(config, 1);
    let departs: Vec<Submit> = (0..10).map(|_| link.submit(ms(0), &[0; 1000])).collect();
    let expect: Vec<Submit> = [0, 1, 2, 3, 5, 7, 9, 11, 13, 15]
        .into_iter()
        .map(|t| Submit::Queued { departs: ms(t) })
        .collect();
    assert_eq!(departs, expect);
    assert_eq!(link.stats().shaped, 9);
    assert_eq!(link.queued_bytes(), 9000);
}

#[test]
fn a_shaped_link_holds_frames_in_its_queue_and_tail_drops_beyond_it() {
    // The same burst into a 3000-byte queue: the first frame starts, three wait for the
    // shaper, the other six find the queue full.
    let config = LinkConfig::default()
        .with_queue_limit_bytes(3000)
        .with_shape(Some(contract(3001)));
    let mut link = LinkModel::new(config, 1);
    let results: Vec<Submit> = (0..10).map(|_| link.submit(ms(0), &[0; 1000])).collect();
    assert_eq!(results[3], Submit::Queued { departs: ms(3) });
    assert!(
        results[4..]
            .iter()
            .all(|r| *r == Submit::Dropped(DropReason::QueueFull))
    );
    assert_eq!(link.stats().dropped_queue, 6);
    // Once the waiting frames have left, the shaper's next slot is TAT - BT = 5 ms.
    assert_eq!(
        link.submit(ms(4), &[0; 1000]),
        Submit::Queued { departs: ms(5) }
    );
}

#[test]
fn a_policer_drops_what_a_peak_rate_sender_sends_beyond_the_burst() {
    // An 8 Mbit/s link (frames back to back, one per ms: the peak rate) policed with
    // MBS 3000: the hand-computed GCRA sequence of `gcra.rs`, frame by frame.
    let config = LinkConfig::default()
        .with_rate_bps(8_000_000)
        .with_police(Some(Policer {
            contract: contract(3000),
            action: PoliceAction::Drop,
        }));
    let mut link = LinkModel::new(config, 1);
    let results: Vec<bool> = (0..9)
        .map(|_| link.submit(ms(0), &[0; 1000]) != Submit::Dropped(DropReason::Policed))
        .collect();
    assert_eq!(
        results,
        [true, true, true, false, true, false, true, false, true]
    );
    let stats = *link.stats();
    assert_eq!((stats.dropped_police, link.in_flight()), (3, 6));
    // The dropped frames used the link's time: the last one left at 9 ms.
    assert_eq!(link.busy_until(), ms(9));
}

#[test]
fn a_marking_policer_passes_every_frame_and_ce_marks_the_non_conforming() {
    let config = LinkConfig::default()
        .with_rate_bps(8_000_000)
        .with_police(Some(Policer {
            contract: contract(3000),
            action: PoliceAction::Mark,
        }));
    let mut link = LinkModel::new(config, 1);
    // ECT(0) frames of 1000 bytes, all offered at 0, numbered by their IPv4 ident.
    let submits: Vec<(Instant, Vec<u8>)> = (0..9)
        .map(|i| (ms(0), ipv4_frame(i, 1000, 5000, 0b10)))
        .collect();
    let delivered = drive(&mut link, &submits);
    let ce: Vec<bool> = delivered
        .iter()
        .map(|(_, f)| f[15] & 0b11 == 0b11)
        .collect();
    assert_eq!(
        ce,
        [false, false, false, true, false, true, false, true, false]
    );
    assert!(delivered.iter().all(|(_, f)| header_checksum_ok(f)));
    assert_eq!(link.stats().police_marked, 3);
    assert_eq!(link.stats().dropped_police, 0);
}

#[test]
fn shaping_to_the_contract_makes_the_policer_drop_nothing() {
    // Seed 002's repair in one link: the same contract shaped and policed. Shaping to
    // the peak only (sustained = peak) lets the policer drop; shaping to the whole
    // contract does not.
    let police = Some(Policer {
        contract: contract(3000),
        action: PoliceAction::Drop,
    });
    let run = |shape: GcraConfig| {
        let config = LinkConfig::default()
            .with_rate_bps(100_000_000)
            .with_shape(Some(shape))
            .with_police(police);
        let mut link = LinkModel::new(config, 1);
        for i in 0..100 {
            link.submit(ms(i), &[0; 1000]);
        }
        *link.stats()
    };
    let peak_only = run(GcraConfig {
        sustained_bps: 8_000_000,
        ..contract(3000)
    });
    // Frames every 1 ms: the policer passes three, then every other one (as in
    // `gcra.rs`): 49 of the 97 after the burst are dropped.
    assert_eq!(peak_only.dropped_police, 49);
    let whole = run(contract(3000));
    assert_eq!(whole.dropped_police, 0);
    assert!(whole.shaped > 0);
}

#[test]
fn bad_contracts_name_the_key() {
    let bad = GcraConfig {
        sustained_bps: 0,
        ..contract(3000)
    };
    let e = LinkModel::try_new(LinkConfig::default().with_shape(Some(bad)), 1).unwrap_err();
    assert_eq!(
        e,
        LinkConfigError::Contract {
            name: "shape",
            error: GcraConfigError::ZeroSustained
        }
    );
    assert!(e.to_string().contains("`shape`"), "{e}");
}
