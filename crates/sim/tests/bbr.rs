//! BBR (draft-ietf-ccwg-bbr) in the simulator: it fills a clean path with little
//! queue, and keeps a lossy long path busy where loss-based controllers collapse.
//! Every transfer is byte-exact; every case names its seed.

use impnet_core::Duration;
use impnet_core::tcp::cc::CcAlgorithm;
use impnet_phy::LinkConfig;
use impnet_sim::bulk::{BulkConfig, BulkResult, run_bulk};

const MB: u64 = 1 << 20;

fn link(rate_bps: u64, rtt_ms: u64, loss: f64) -> LinkConfig {
    let bdp = (rate_bps as f64 * rtt_ms as f64 / 1000.0 / 8.0) as usize;
    LinkConfig {
        rate_bps,
        delay: Duration::from_micros(rtt_ms * 500),
        queue_limit_bytes: (2 * bdp).max(64 * 1024),
        loss,
        ..LinkConfig::default()
    }
}

fn transfer(bytes: u64, link: LinkConfig, seed: u64, cc: CcAlgorithm) -> BulkResult {
    let mut config = BulkConfig::new(bytes, link, seed);
    config.sender_tcp.send_buffer = 4 * MB as usize;
    config.receiver_tcp.recv_buffer = 4 * MB as usize;
    config.sender_tcp.congestion = cc;
    let result = run_bulk(&config).unwrap_or_else(|e| panic!("seed {seed} {cc:?}: {e}"));
    assert_eq!(result.bytes, bytes, "seed {seed} {cc:?}: short");
    assert!(result.hash_ok, "seed {seed} {cc:?}: bytes differ");
    result
}

/// 100 Mbit/s, 20 ms, a queue of twice the BDP: BBR runs at 90% of the link or
/// better once out of Startup, and the RTT it ends with shows a small standing queue
/// (CUBIC fills the buffer it is given).
#[test]
fn bbr_fills_a_clean_link_with_a_small_queue() {
    let path = link(100_000_000, 20, 0.0);
    let bbr = transfer(32 * MB, path, 31, CcAlgorithm::Bbr);
    assert!(
        bbr.steady_goodput_bps >= 0.9 * 100e6,
        "BBR {} bit/s",
        bbr.steady_goodput_bps
    );
    assert_eq!(bbr.retransmits, 0, "BBR lost on a clean link");
    let srtt = |r: &BulkResult| r.sender_info.and_then(|i| i.srtt).expect("an RTT");
    let cubic = transfer(32 * MB, path, 31, CcAlgorithm::Cubic);
    // Queueing delay: under 5 ms (62 KB at 100 Mbit/s) for BBR.
    assert!(
        srtt(&bbr) < Duration::from_millis(25),
        "BBR srtt {}",
        srtt(&bbr)
    );
    assert!(srtt(&cubic) > srtt(&bbr), "CUBIC srtt {}", srtt(&cubic));
}

/// 100 Mbit/s, 20 ms, a drop-tail queue of one BDP (250 KB), the W8 paths' size:
/// Startup overflows it and a retransmission timeout follows the recovery. After the
/// timeout SND.NXT is back at SND.UNA and the flight beyond it is lost; counted as in
/// flight, it held BBR in Drain at a third of its rate while each round's losses cut
/// its lower bounds: 32 MB took 18.2 s (14.7 Mbit/s). Now 3.5 s (76.3 Mbit/s, Startup's
/// losses and the timeout included); the test asks for half the link's rate.
#[test]
fn bbr_leaves_drain_after_a_timeout_on_a_one_bdp_queue() {
    let mut path = link(100_000_000, 20, 0.0);
    path.queue_limit_bytes = 250_000;
    at_least(&transfer(32 * MB, path, 1, CcAlgorithm::Bbr), 0.5 * 100e6);
}

/// BBRv1 on 100 Mbit/s, 20 ms with a queue of twice the BDP: Startup's 2.89 gain
/// overflows it and SACK recovery follows. The rate samples' bytes in flight came from
/// the scoreboard's RFC 6675 pipe, which counts every hole below HighRxt twice, and
/// the tail loss probe of the last segment set HighRxt to the top: BBR saw twice its
/// flight through the recovery (32 MB at 75.9 Mbit/s). With RACK's pipe, as the
/// recovery itself counts it: 87.5 Mbit/s.
#[test]
fn bbr1_recovers_from_startup_overflow_at_the_link_rate() {
    let path = link(100_000_000, 20, 0.0);
    at_least(&transfer(32 * MB, path, 1, CcAlgorithm::Bbr1), 0.84 * 100e6);
}

/// BBRv1 on 100 Mbit/s, 20 ms with a drop-tail queue of one BDP: Startup overflows it
/// and leaves more holes than the sender's SACK scoreboard has ranges. The rate sampler
/// was told of SACKed data only when the scoreboard took it in, so the rest counted at
/// the cumulative ACK that covered it, in one sample: estimates up to 16.7 MB/s on a
/// 12 MB/s link, paced above the link all the way (4,819 segments resent of 23,170).
/// Now the sampler reads every block: 449 resent, Startup's overflow; the test allows
/// 5%. (The receiver's 32 out-of-order ranges had hidden it: beyond them it dropped
/// what arrived, and there were fewer holes to report.)
#[test]
fn bbr1_paces_at_the_link_rate_after_startup_overflows_a_one_bdp_queue() {
    let mut path = link(100_000_000, 20, 0.0);
    path.queue_limit_bytes = 250_000;
    let result = transfer(32 * MB, path, 1, CcAlgorithm::Bbr1);
    let segments = 32 * MB / 1448;
    assert!(
        result.retransmits * 20 < segments,
        "{} of {segments} segments resent",
        result.retransmits
    );
}

/// 1% random loss on a 100 Mbit/s, 20 ms path with the default queue (two BDPs):
/// a random loss in Startup put BBRv3 in recovery with no ssthresh, and PRR's
/// segment on every ACK then doubled the flight each round past cwnd, until the queue
/// overflowed (808 segments resent for some 240 lost at random). In recovery the
/// window bounds what goes out, as for BBRv1.
#[test]
fn bbr_startup_recovery_stays_within_its_window() {
    let result = transfer(32 * MB, link(100_000_000, 20, 0.01), 1, CcAlgorithm::Bbr);
    let segments = 32 * MB / 1448;
    assert!(
        result.retransmits * 50 < segments,
        "{} of {segments} segments resent at 1% loss",
        result.retransmits
    );
}

/// The whole transfer's goodput is at least `bps`.
fn at_least(result: &BulkResult, bps: f64) {
    assert!(
        result.goodput_bps >= bps,
        "{} bit/s over {} s, below {bps}",
        result.goodput_bps,
        result.seconds
    );
}

/// 100 Mbit/s, 100 ms, 1% random loss each way: CUBIC halves its window at every
/// loss and crawls; BBR's model ignores loss below 2% and keeps the pipe full.
#[test]
fn bbr_outruns_cubic_on_a_lossy_long_path() {
    let path = link(100_000_000, 100, 0.01);
    let bbr = transfer(16 * MB, path, 32, CcAlgorithm::Bbr);
    let cubic = transfer(4 * MB, path, 32, CcAlgorithm::Cubic);
    assert!(
        bbr.goodput_bps > 5.0 * cubic.goodput_bps,
        "BBR {} vs CUBIC {}",
        bbr.goodput_bps,
        cubic.goodput_bps
    );
    assert!(bbr.retransmits > 0, "the link must lose");
}

/// Long enough (> 5 s) for ProbeRTT to come round, on a 10 Mbit/s path: the
/// transfer stays byte-exact and at most a few percent slower than the link for it
/// (ProbeRTT costs 200 ms at half the BDP every 5 s).
#[test]
fn bbr_runs_through_probe_rtt_byte_exact() {
    let path = link(10_000_000, 40, 0.0);
    let bbr = transfer(12 * MB, path, 33, CcAlgorithm::Bbr);
    assert!(bbr.seconds > 10.0, "{} s", bbr.seconds);
    assert!(
        bbr.steady_goodput_bps >= 0.88 * 10e6,
        "BBR {}",
        bbr.steady_goodput_bps
    );
}

/// BBRv1 (Linux's mainline `bbr`) on the clean path: Startup's gain of 2.885 overflows
/// this queue of twice the BDP once (BBRv1's known Startup loss, which v3's loss bound
/// removes: the test above sees none), then Drain and the ProbeBW gain cycle fill the
/// link with a small standing queue and no more loss.
#[test]
fn bbr1_fills_a_clean_link() {
    let path = link(100_000_000, 20, 0.0);
    let bbr1 = transfer(64 * MB, path, 35, CcAlgorithm::Bbr1);
    assert!(
        bbr1.steady_goodput_bps >= 0.9 * 100e6,
        "BBRv1 {} bit/s",
        bbr1.steady_goodput_bps
    );
    // 64 MB is 46,341 segments; Startup's overflow costs 584 of them (seed 35).
    assert!(
        bbr1.retransmits < 1000,
        "{} retransmitted",
        bbr1.retransmits
    );
}

/// BBRv1 ignores random loss in its model (it only conserves packets for a round of
/// recovery): on the lossy long path it outruns CUBIC as v3 does, byte-exact; and past
/// ten seconds on the slow path, through ProbeRTT (four segments for 200 ms).
#[test]
fn bbr1_on_a_lossy_long_path_and_through_probe_rtt() {
    let lossy = link(100_000_000, 100, 0.01);
    let bbr1 = transfer(16 * MB, lossy, 36, CcAlgorithm::Bbr1);
    let cubic = transfer(4 * MB, lossy, 36, CcAlgorithm::Cubic);
    assert!(
        bbr1.goodput_bps > 5.0 * cubic.goodput_bps,
        "BBRv1 {} vs CUBIC {}",
        bbr1.goodput_bps,
        cubic.goodput_bps
    );
    let slow = transfer(16 * MB, link(10_000_000, 40, 0.0), 37, CcAlgorithm::Bbr1);
    assert!(slow.seconds > 12.0, "{} s", slow.seconds);
    assert!(
        slow.steady_goodput_bps >= 0.88 * 10e6,
        "BBRv1 {}",
        slow.steady_goodput_bps
    );
}

/// Pacing forced on for a window-based controller: still byte-exact, through loss.
#[test]
fn paced_cubic_stays_byte_exact() {
    let path = link(50_000_000, 20, 0.005);
    let mut config = BulkConfig::new(4 * MB, path, 34);
    config.sender_tcp.congestion = CcAlgorithm::Cubic;
    config.sender_tcp.pacing = Some(true);
    let result = run_bulk(&config).expect("runs");
    assert!(result.hash_ok && result.bytes == 4 * MB);
}

/// `scenarios/paths/bbr-vs-cubic.toml`: each alone on a 100 Mbit/s, 100 ms, 1% loss
/// path, then both through one such bottleneck. BBR outruns CUBIC several times
/// alone, and takes the larger share together; every byte that arrived is the sent
/// stream.
#[test]
fn scenario_bbr_vs_cubic_on_a_lossy_long_path() {
    use impnet_sim::experiment::{self, FlowReport};
    use impnet_sim::scenario::Scenario;
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/paths/bbr-vs-cubic.toml");
    let scenario = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let out = experiment::run(&scenario, None, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
    let flow = |name: &str| -> &FlowReport {
        out.report
            .flows
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("no flow {name}"))
    };
    for f in &out.report.flows {
        assert_ne!(f.data_ok, Some(false), "{f:?}");
        assert!(f.goodput_bps > 1e6, "{f:?}");
    }
    let ratio = flow("bbr-alone").goodput_bps / flow("cubic-alone").goodput_bps;
    assert!(ratio > 5.0, "alone: BBR / CUBIC = {ratio}");
    let shared = flow("bbr-shared").goodput_bps / flow("cubic-shared").goodput_bps;
    assert!(shared > 5.0, "shared: BBR / CUBIC = {shared}");
}

/// `tcp.pacing` and `cc = "bbr"` parse in a scenario file.
#[test]
fn scenario_keys_parse() {
    use impnet_sim::scenario::Scenario;
    let text = r#"
name = "keys"
duration = "1s"
[[host]]
name = "a"
tcp = { cc = "bbr", pacing = false }
[[host]]
name = "b"
tcp = { cc = "cubic", pacing = true }
[[link]]
a = "a"
b = "b"
[[flow]]
type = "bulk"
from = "a"
to = "b"
bytes = "1K"
"#;
    let scenario = Scenario::parse(text, "keys.toml").unwrap_or_else(|e| panic!("{e}"));
    let tcp = |i: usize| &scenario.nodes[i].tcp;
    assert_eq!(tcp(0).congestion, CcAlgorithm::Bbr);
    assert_eq!(tcp(0).pacing, Some(false));
    assert_eq!(tcp(1).pacing, Some(true));
}
