//! Loss detection on a reordering path (RACK-TLP, RFC 8985, with D-SACK, RFC 2883):
//! byte-exact bulk transfers whose every case names its seed.

use impnet_core::Duration;
use impnet_core::tcp::TcpStats;
use impnet_phy::LinkConfig;
use impnet_sim::bulk::{BulkConfig, BulkResult, run_bulk};
use impnet_sim::experiment;
use impnet_sim::scenario::Scenario;

const MB: u64 = 1 << 20;

/// 100 Mbit/s, 20 ms RTT, a queue of twice the BDP; 512 kB windows fit in it, so
/// nothing is ever lost: every retransmission is spurious.
fn clean_path() -> LinkConfig {
    LinkConfig {
        rate_bps: 100_000_000,
        delay: Duration::from_millis(10),
        queue_limit_bytes: 500_000,
        ..LinkConfig::default()
    }
}

fn transfer(bytes: u64, link: LinkConfig, seed: u64, rack: bool) -> BulkResult {
    let mut config = BulkConfig::new(bytes, link, seed);
    config.sender_tcp.send_buffer = 512 * 1024;
    config.receiver_tcp.recv_buffer = 512 * 1024;
    config.sender_tcp.rack = rack;
    let result = run_bulk(&config).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    assert_eq!(result.bytes, bytes, "seed {seed}: bytes received");
    assert!(result.hash_ok, "seed {seed}: the received bytes differ");
    result
}

/// What the second half of a transfer cost.
fn second_half(r: &BulkResult) -> (u64, u64) {
    let half = r.sender_stats_at_half.clone().unwrap_or_default();
    let end = &r.sender_stats;
    (
        end.retransmitted - half.retransmitted,
        end.dsacks_received - half.dsacks_received,
    )
}

fn describe(name: &str, r: &BulkResult) -> String {
    let s: &TcpStats = &r.sender_stats;
    format!(
        "{name}: {:.3} Mbit/s, {} retransmitted ({} in the second half), {} D-SACKs, {} undos",
        r.goodput_bps / 1e6,
        s.retransmitted,
        second_half(r).0,
        s.dsacks_received,
        s.undos
    )
}

/// 1% of the segments held back 5 ms on a clean 100 Mbit/s, 20 ms path: the first
/// reorderings look like losses (RACK's window starts at min_RTT/4 = 5 ms, and is zero
/// until reordering was seen); their D-SACKs undo the window cuts and widen the
/// reordering window (RFC 8985 §6.2), after which hardly a segment is retransmitted
/// (DupThresh alone goes on retransmitting hundreds). Goodput
/// stays within 10% of the same transfer without reordering.
#[test]
fn reordering_one_percent_by_5ms_costs_little_once_the_window_adapted() {
    let seed = 31;
    let bytes = 64 * MB;
    let clean = transfer(bytes, clean_path(), seed, true);
    assert_eq!(clean.sender_stats.retransmitted, 0, "seed {seed}");
    let reordering = LinkConfig {
        reorder: 0.01,
        reorder_delay: Duration::from_millis(5),
        ..clean_path()
    };
    let r = transfer(bytes, reordering, seed, true);
    let report = format!(
        "seed {seed}: {}; {}",
        describe("clean", &clean),
        describe("reordering", &r)
    );
    std::println!("{report}");
    assert!(r.sender_stats.dsacks_received > 0, "{report}");
    assert!(r.goodput_bps >= 0.9 * clean.goodput_bps, "{report}");
    // At most one spurious retransmission (and its D-SACK) late in the transfer: the
    // widened window lapses after 16 recoveries (RFC 8985 §6.2) and must adapt again.
    let (late, late_dsacks) = second_half(&r);
    assert!(late <= 1 && late_dsacks <= 1, "{report}");
    // RFC 6675's DupThresh alone, without RACK, goes on retransmitting.
    let dupthresh = transfer(bytes, reordering, seed, false);
    let report = format!("{report}; {}", describe("dupthresh", &dupthresh));
    std::println!("{report}");
    assert!(second_half(&dupthresh).0 > 10 * late.max(1), "{report}");
}

/// `scenarios/paths/rack-reordering.toml`: the same comparison as a scenario file,
/// byte-exact flows; RACK keeps the clean path's goodput and retransmits almost
/// nothing, DupThresh retransmits for every reordering.
#[test]
fn the_rack_reordering_scenario_keeps_goodput_and_avoids_spurious_retransmissions() {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/paths/rack-reordering.toml");
    let scenario = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let out = experiment::run(&scenario, None, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
    let flow = |name: &str| {
        let f = out
            .report
            .flows
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("no flow {name}"));
        assert!(f.completed && f.data_ok == Some(true), "{f:?}");
        f
    };
    let (clean, rack, dupthresh) = (flow("clean"), flow("rack"), flow("dupthresh"));
    let report = format!(
        "goodput clean {:.3}, rack {:.3}, dupthresh {:.3} Mbit/s; retransmits {} / {} / {}",
        clean.goodput_bps / 1e6,
        rack.goodput_bps / 1e6,
        dupthresh.goodput_bps / 1e6,
        clean.retransmits,
        rack.retransmits,
        dupthresh.retransmits
    );
    std::println!("{report}");
    assert_eq!(clean.retransmits, 0, "{report}");
    assert!(rack.goodput_bps >= 0.9 * clean.goodput_bps, "{report}");
    assert!(rack.retransmits <= 5, "{report}");
    assert!(
        dupthresh.retransmits > 50 * rack.retransmits.max(1),
        "{report}"
    );
}
