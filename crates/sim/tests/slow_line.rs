//! Seed 003's slow line as issue 12 measured it against Linux: 9600 bit/s, IP MTU 272,
//! 50 ms each way, 0.5% loss each way, 100 KiB. Linux (two namespaces through `imp link`
//! with the same impairment) moved it at 75.4-76.3% of the raw line; the header-bound
//! ceiling is 220 / 286 bytes = 76.9%. The queue is the link model's default (1 MiB, as
//! `imp link`'s): the whole transfer fits in it, so every loss is the line's.

use impnet_core::Duration;
use impnet_phy::LinkConfig;
use impnet_sim::bulk::{BulkConfig, BulkResult, run_bulk};

const BYTES: u64 = 100 * 1024;

fn slow_line(loss: f64) -> LinkConfig {
    LinkConfig {
        rate_bps: 9600,
        delay: Duration::from_millis(50),
        loss,
        // IP MTU 272 plus the 14-byte Ethernet header.
        mtu: 272 + 14,
        ..LinkConfig::default()
    }
}

fn transfer(loss: f64, seed: u64) -> BulkResult {
    let r = run_bulk(&BulkConfig::new(BYTES, slow_line(loss), seed))
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    assert_eq!(r.bytes, BYTES, "seed {seed}: {} bytes arrived", r.bytes);
    assert!(r.hash_ok, "seed {seed}: the received bytes differ");
    r
}

#[test]
fn clean_slow_line_runs_at_the_header_bound_without_retransmitting() {
    let r = transfer(0.0, 1);
    // Without loss nothing may be sent twice: a 100 KiB transfer outlives the 60 s
    // neighbour-entry lifetime, and a re-resolution held the ACKs long enough for a
    // retransmission timeout.
    assert_eq!(r.retransmits, 0, "retransmissions on a clean line");
    assert!(r.capacity_pct >= 76.5, "{:.2}% of the line", r.capacity_pct);
}

#[test]
fn noisy_slow_line_reaches_95_percent_of_linux() {
    // 95% of Linux's best run (76.3% of the line) is 72.5%.
    let mut sum = 0.0;
    for seed in 1..=8 {
        let r = transfer(0.005, seed);
        println!(
            "seed {seed}: {:.2}% of the line, {} retransmissions",
            r.capacity_pct, r.retransmits
        );
        assert!(
            r.capacity_pct >= FLOOR,
            "seed {seed}: {:.2}% of the line",
            r.capacity_pct
        );
        sum += r.capacity_pct;
    }
    assert!(sum / 8.0 >= MEAN_FLOOR, "mean {:.2}%", sum / 8.0);
}

const FLOOR: f64 = 72.5;
const MEAN_FLOOR: f64 = 74.0;
