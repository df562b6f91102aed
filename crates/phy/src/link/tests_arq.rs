//! Link-level retransmission ([`super::arq`]): go-back-N over both directions of a line.

use impnet_core::{Duration, Instant};

use super::{ARQ_ACK_BYTES, ARQ_HEADER_BYTES, ArqConfig, LinkConfig, LinkModel, Submit};

/// A frame of `len` bytes whose first four bytes number it.
fn numbered(i: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0x5a; len.max(4)];
    f[..4].copy_from_slice(&i.to_be_bytes());
    f
}

fn number(f: &[u8]) -> u32 {
    u32::from_be_bytes(f[..4].try_into().unwrap())
}

/// A line of `config` both ways (seeds 1 and 2).
fn line(config: LinkConfig) -> [LinkModel; 2] {
    [LinkModel::new(config, 1), LinkModel::new(config, 2)]
}

/// Runs the line until nothing is scheduled: side 0 sends `count` frames of `len`
/// bytes at time 0. Returns what side 1 received and when the last frame came.
fn run(models: &mut [LinkModel; 2], count: u32, len: usize) -> (Vec<Vec<u8>>, Instant) {
    for i in 0..count {
        models[0].submit(Instant::ZERO, &numbered(i, len));
    }
    let mut received = Vec::new();
    let mut last = Instant::ZERO;
    for _ in 0..1_000_000 {
        let next = models.iter().filter_map(LinkModel::next_arrival).min();
        let Some(now) = next else {
            return (received, last);
        };
        for model in models.iter_mut() {
            while let Some(frame) = model.poll_deliver(now) {
                received.push(frame);
                last = now;
            }
        }
        let [a, b] = models;
        LinkModel::exchange_arq(a, b, now);
    }
    panic!("the line never went quiet");
}

fn arq(window: u16, timeout_ms: u64, tries: u32) -> Option<ArqConfig> {
    Some(ArqConfig {
        window,
        timeout: Duration::from_millis(timeout_ms),
        tries,
    })
}

#[test]
fn a_clean_line_delivers_in_order_and_acknowledges_on_the_reverse_line() {
    // 8000 bit/s: a byte a millisecond. 100-byte frames take 102 ms with the header.
    let config = LinkConfig::default()
        .with_rate_bps(8000)
        .with_delay(Duration::from_millis(10))
        .with_arq(arq(2, 1000, 3));
    let mut models = line(config);
    assert_eq!(
        models[0].submit(Instant::ZERO, &numbered(0, 100)),
        Submit::Held
    );
    let (received, last) = run(&mut models, 9, 100);
    let numbers: Vec<u32> = received.iter().map(|f| number(f)).collect();
    assert_eq!(numbers, [0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
    let (fwd, rev) = (models[0].stats(), models[1].stats());
    assert_eq!(fwd.arq_retransmitted, 0);
    assert_eq!(fwd.delivered, 10);
    // Every I-frame is acknowledged on the reverse line, each RR taking its time.
    assert_eq!(rev.arq_acks_sent, 10);
    assert_eq!(rev.delivered, 0);
    // A window of 2 on a 102 ms frame with a 10 + 6 + 10 ms return covers the round
    // trip, so the line never idles: 10 frames back to back, plus the delay.
    let frame_ms = (100 + ARQ_HEADER_BYTES) as u64;
    assert_eq!(last, Instant::from_millis(frame_ms * 10 + 10));
}

#[test]
fn a_window_of_one_waits_for_each_acknowledgement() {
    let config = LinkConfig::default()
        .with_rate_bps(8000)
        .with_delay(Duration::from_millis(10))
        .with_arq(arq(1, 1000, 3));
    let mut models = line(config);
    let (received, last) = run(&mut models, 3, 100);
    assert_eq!(received.len(), 3);
    // Each frame: 102 ms out, 10 ms across, 6 ms RR back, 10 ms across.
    let cycle_ms = 102 + 10 + ARQ_ACK_BYTES as u64 + 10;
    assert_eq!(last, Instant::from_millis(cycle_ms * 2 + 102 + 10));
}

#[test]
fn a_noisy_line_delivers_every_frame_once_in_order() {
    let config = LinkConfig::default()
        .with_rate_bps(64_000)
        .with_delay(Duration::from_millis(5))
        .with_loss(0.1)
        .with_corrupt(0.1)
        .with_duplicate(0.05)
        .with_arq(arq(7, 200, 50));
    let mut models = line(config);
    let (received, _) = run(&mut models, 500, 200);
    let numbers: Vec<u32> = received.iter().map(|f| number(f)).collect();
    assert_eq!(numbers, (0..500).collect::<Vec<_>>());
    assert!(received.iter().all(|f| f[4..] == numbered(0, 200)[4..]));
    let (fwd, rev) = (models[0].stats(), models[1].stats());
    assert!(fwd.arq_retransmitted > 50, "{fwd:?}");
    assert!(fwd.arq_discarded > 0, "{fwd:?}");
    assert!(
        fwd.dropped_loss > 0 && rev.dropped_loss > 0,
        "{fwd:?} {rev:?}"
    );
    assert_eq!(fwd.arq_abandoned, 0);
}

#[test]
fn without_arq_the_same_line_loses_frames() {
    let config = LinkConfig::default()
        .with_rate_bps(64_000)
        .with_delay(Duration::from_millis(5))
        .with_loss(0.1);
    let mut models = line(config);
    let (received, _) = run(&mut models, 500, 200);
    assert!(received.len() < 480, "{}", received.len());
}

#[test]
fn a_dead_line_gives_each_frame_up_after_its_tries() {
    let config = LinkConfig::default()
        .with_rate_bps(8000)
        .with_loss(1.0)
        .with_arq(arq(2, 500, 4));
    let mut models = line(config);
    let (received, _) = run(&mut models, 3, 50);
    assert!(received.is_empty());
    let fwd = models[0].stats();
    assert_eq!(fwd.arq_abandoned, 3);
    // Every frame went out `tries` times (the ones behind the first, sent again at each
    // of its timeouts, start over after the reset).
    assert!(fwd.dropped_loss >= 3 * 4, "{fwd:?}");
    assert_eq!(models[0].next_arrival(), None);
}

#[test]
fn after_giving_up_the_link_resets_and_carries_on() {
    // The line is dead for a while, then clean: frames given up on are lost, those
    // after them arrive in order.
    let dead = LinkConfig::default()
        .with_rate_bps(8000)
        .with_loss(1.0)
        .with_arq(arq(3, 300, 2));
    let mut models = line(dead);
    for i in 0..6 {
        models[0].submit(Instant::ZERO, &numbered(i, 50));
    }
    let mut now = Instant::ZERO;
    while let Some(t) = models[0]
        .next_arrival()
        .filter(|t| *t < Instant::from_millis(1000))
    {
        now = t;
        assert!(models[0].poll_deliver(now).is_none());
    }
    for model in &mut models {
        model.set_config(dead.with_loss(0.0)).unwrap();
    }
    let given_up = models[0].stats().arq_abandoned;
    assert!(given_up >= 1, "{:?}", models[0].stats());
    let (received, _) = run(&mut models, 0, 50);
    let numbers: Vec<u32> = received.iter().map(|f| number(f)).collect();
    let expected: Vec<u32> = (given_up as u32..6).collect();
    assert_eq!(numbers, expected, "at {now:?}");
}

#[test]
fn arq_refuses_a_queue_discipline_and_impossible_settings() {
    let qdisc = "qdisc=codel,arq=on".parse::<LinkConfig>();
    assert!(qdisc.is_err());
    let c: LinkConfig = "arq=7/1s/10,rate=9600".parse().unwrap();
    assert_eq!(c.arq, arq(7, 1000, 10));
    let c: LinkConfig = "arq=on".parse().unwrap();
    assert_eq!(c.arq, Some(ArqConfig::default()));
    assert_eq!("arq=off".parse::<LinkConfig>().unwrap().arq, None);
    for bad in [
        "arq=0/1s/3",
        "arq=7/0s/3",
        "arq=7/1s/0",
        "arq=7/1s",
        "arq=x/1s/3",
    ] {
        let e = bad.parse::<LinkConfig>().expect_err(bad).to_string();
        assert!(e.contains("arq"), "{bad}: {e}");
    }
}
