//! Byte-exact TCP transfers across the link-condition matrix of the TCP issue: loss,
//! reordering, duplication, corruption, RTT, rate and MTU. Every case names its seed.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

use impnet_core::Duration;
use impnet_core::tcp::cc::CcAlgorithm;
use impnet_phy::LinkConfig;
use impnet_sim::bulk::{BulkConfig, BulkResult, run_bulk};

const MB: u64 = 1 << 20;

fn link(rate_bps: u64, rtt_ms: u64) -> LinkConfig {
    let bdp = (rate_bps as f64 * rtt_ms as f64 / 1000.0 / 8.0) as usize;
    LinkConfig {
        rate_bps,
        delay: Duration::from_micros(rtt_ms * 500),
        queue_limit_bytes: (2 * bdp).max(64 * 1024),
        ..LinkConfig::default()
    }
}

fn transfer(bytes: u64, link: LinkConfig, seed: u64, buffers: usize) -> BulkResult {
    let mut config = BulkConfig::new(bytes, link, seed);
    config.sender_tcp.send_buffer = buffers;
    config.receiver_tcp.recv_buffer = buffers;
    let result = run_bulk(&config).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    assert_eq!(
        result.bytes, bytes,
        "seed {seed}: {} of {bytes} bytes arrived",
        result.bytes
    );
    assert!(
        result.hash_ok,
        "seed {seed}: the received bytes differ from the sent ones"
    );
    result
}

#[test]
fn loss_matrix_stays_byte_exact() {
    for (seed, loss) in [(11, 0.0), (12, 0.001), (13, 0.01), (14, 0.05), (15, 0.10)] {
        let link = LinkConfig {
            loss,
            ..link(100_000_000, 20)
        };
        // Without loss, a window (512 kB) smaller than what the path holds (250 kB in
        // flight + 500 kB of queue) must never lose a segment, so never retransmit.
        let buffers = if loss == 0.0 { 512 * 1024 } else { 1 << 20 };
        let r = transfer(4 * MB, link, seed, buffers);
        if loss == 0.0 {
            assert_eq!(
                r.retransmits, 0,
                "seed {seed}: retransmissions without loss"
            );
        } else if loss >= 0.01 {
            assert!(
                r.retransmits > 0,
                "seed {seed}: {loss} loss but no retransmission"
            );
        }
    }
}

#[test]
fn reordering_duplication_and_corruption_stay_byte_exact() {
    let base = link(50_000_000, 10);
    let reorder = LinkConfig {
        reorder: 0.05,
        reorder_delay: Duration::from_millis(3),
        ..base
    };
    transfer(4 * MB, reorder, 21, 1 << 20);
    let duplicate = LinkConfig {
        duplicate: 0.05,
        ..base
    };
    transfer(4 * MB, duplicate, 22, 1 << 20);
    // Corrupted frames must be caught by a checksum and dropped, never delivered.
    let corrupt = LinkConfig {
        corrupt: 0.02,
        ..base
    };
    transfer(4 * MB, corrupt, 23, 1 << 20);
    let everything = LinkConfig {
        loss: 0.01,
        reorder: 0.02,
        reorder_delay: Duration::from_millis(2),
        duplicate: 0.02,
        corrupt: 0.01,
        ..base
    };
    transfer(4 * MB, everything, 24, 1 << 20);
}

#[test]
fn rtt_from_1ms_to_600ms() {
    transfer(4 * MB, link(100_000_000, 1), 31, 1 << 20);
    let long = LinkConfig {
        loss: 0.001,
        ..link(20_000_000, 600)
    };
    transfer(2 * MB, long, 32, 4 << 20);
}

#[test]
fn rates_from_9600_bits_to_10_gigabits() {
    let slow = LinkConfig {
        mtu: 576 + 14,
        ..link(9600, 100)
    };
    transfer(MB, slow, 41, 64 * 1024);
    transfer(100 * MB, link(10_000_000_000, 1), 42, 4 << 20);
}

#[test]
fn mtu_from_576_to_9000() {
    for (seed, mtu) in [(51, 576), (52, 1500), (53, 9000)] {
        let link = LinkConfig {
            mtu: mtu + 14,
            loss: 0.005,
            ..link(100_000_000, 10)
        };
        let r = transfer(4 * MB, link, seed, 1 << 20);
        let mss = r
            .sender_info
            .as_ref()
            .map(|i| usize::from(i.snd_mss))
            .unwrap_or(0);
        assert!(
            mss > 0 && mss <= mtu - 40,
            "seed {seed}: MSS {mss} does not fit MTU {mtu}"
        );
        assert!(
            mss >= mtu - 40 - 12,
            "seed {seed}: MSS {mss} wastes MTU {mtu}"
        );
    }
}

#[test]
fn a_100_megabyte_transfer_is_byte_exact_and_fills_the_link() {
    // Buffers of twice the bandwidth-delay product (250 kB at 100 Mbit/s x 20 ms).
    let r = transfer(100 * MB, link(100_000_000, 20), 61, 512 * 1024);
    // Every 1514-byte frame carries at most 1448 bytes of payload (MSS 1460 less the
    // 12 bytes of timestamps option): that is the best goodput the link allows.
    let payload_capacity = 100e6 * 1448.0 / 1514.0;
    let pct = 100.0 * r.steady_goodput_bps / payload_capacity;
    assert!(
        pct >= 95.0,
        "seed 61: goodput after slow start is {pct:.1}% of what the link can carry"
    );
}

#[test]
fn jumbo_frames_reach_95_percent_of_the_raw_link_rate() {
    let link = LinkConfig {
        mtu: 9000 + 14,
        ..link(1_000_000_000, 10)
    };
    let r = transfer(100 * MB, link, 62, 4 << 20);
    let pct = 100.0 * r.steady_goodput_bps / 1e9;
    assert!(
        pct >= 95.0,
        "seed 62: goodput after slow start is {pct:.1}% of the link rate"
    );
}

#[test]
fn same_seed_same_trace_hash() {
    let lossy = LinkConfig {
        loss: 0.01,
        reorder: 0.01,
        reorder_delay: Duration::from_millis(1),
        ..link(100_000_000, 20)
    };
    let a = transfer(2 * MB, lossy, 71, 1 << 20);
    let b = transfer(2 * MB, lossy, 71, 1 << 20);
    assert_eq!(a.trace_hash, b.trace_hash, "seed 71: two runs differ");
    assert_eq!(a.seconds, b.seconds, "seed 71: two runs differ in time");
}

#[test]
fn segments_larger_than_the_mtu_travel_as_ip_fragments() {
    // Seed 000 (1981): 4096-byte TCP segments over 1500-byte Ethernet, cut by IP.
    let seed = 81;
    let mut config = BulkConfig::new(4 * MB, link(10_000_000, 2), seed);
    config.sender_tcp.segment_size = Some(4096);
    config.receiver_tcp.segment_size = Some(4096);
    let r = run_bulk(&config).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    assert!(
        r.hash_ok && r.bytes == 4 * MB,
        "seed {seed}: stream damaged"
    );
    let mss = r.sender_info.map(|i| usize::from(i.snd_mss)).unwrap_or(0);
    assert!(
        mss > 1500,
        "seed {seed}: MSS {mss} is not the forced 4096 (less options)"
    );
    // Every 4096-byte segment crosses as three fragments: far more frames than segments.
    let segments = (4 * MB) as usize / mss;
    assert!(
        r.frames_sender_to_receiver >= 3 * segments as u64,
        "seed {seed}: {} frames for {segments} segments",
        r.frames_sender_to_receiver
    );
}

#[test]
fn hystart_leaves_slow_start_before_the_queue_overflows() {
    // The README's main job (`imp ttcp`): 100 Mbit/s, 20 ms, a drop-tail queue of twice
    // the bandwidth-delay product, 4 MiB buffers. Slow start alone doubles the window
    // into the queue's limit and loses a window's worth of segments at once; HyStart++
    // (RFC 9406) sees the RTT rise and leaves slow start first, for NewReno and CUBIC.
    for (seed, cc) in [(71, CcAlgorithm::NewReno), (72, CcAlgorithm::Cubic)] {
        let run = |hystart: bool| {
            let mut config = BulkConfig::new(20 * MB, link(100_000_000, 20), seed);
            for tcp in [&mut config.sender_tcp, &mut config.receiver_tcp] {
                tcp.send_buffer = 4 << 20;
                tcp.recv_buffer = 4 << 20;
                tcp.congestion = cc;
                tcp.hystart = hystart;
            }
            let r = run_bulk(&config).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            assert!(
                r.hash_ok && r.bytes == 20 * MB,
                "seed {seed}: not byte-exact"
            );
            r
        };
        let (with, without) = (run(true), run(false));
        let segments = 20 * MB / 1448;
        assert!(
            without.retransmits * 100 > segments,
            "{cc:?}: plain slow start retransmitted only {} segments",
            without.retransmits
        );
        assert!(
            with.retransmits * 1000 < segments,
            "{cc:?}: {} retransmissions with HyStart++ (plain slow start: {})",
            with.retransmits,
            without.retransmits
        );
        assert!(
            with.goodput_bps > without.goodput_bps,
            "{cc:?}: HyStart++ {:.1} Mbit/s, plain slow start {:.1} Mbit/s",
            with.goodput_bps / 1e6,
            without.goodput_bps / 1e6
        );
    }
}
