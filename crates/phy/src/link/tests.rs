use super::*;

fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

fn drain(link: &mut LinkModel, now: Instant) -> Vec<Vec<u8>> {
    std::iter::from_fn(|| link.poll_deliver(now)).collect()
}

/// A frame whose first four bytes number it.
fn numbered(i: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0xab; len.max(4)];
    f[..4].copy_from_slice(&i.to_be_bytes());
    f
}

fn number(f: &[u8]) -> u32 {
    u32::from_be_bytes(f[..4].try_into().unwrap())
}

#[test]
fn default_link_is_ideal() {
    let mut link = LinkModel::new(LinkConfig::default(), 1);
    let frame = numbered(1, 1514);
    assert_eq!(
        link.submit(ms(5), &frame),
        Submit::Queued { departs: ms(5) }
    );
    assert_eq!(link.next_arrival(), Some(ms(5)));
    assert_eq!(link.poll_deliver(ms(5)), Some(frame));
    assert_eq!(link.poll_deliver(ms(5)), None);
    assert_eq!(link.next_arrival(), None);
    let s = link.stats();
    assert_eq!((s.submitted, s.delivered, s.bytes_delivered), (1, 1, 1514));
}

#[test]
fn rate_is_exact_1500_bytes_at_12_mbps_takes_1_ms() {
    let config = LinkConfig::default().with_rate_bps(12_000_000);
    assert_eq!(config.transmission_time(1500), Duration::from_millis(1));
    let mut link = LinkModel::new(config, 1);
    let f = vec![0u8; 1500];
    assert_eq!(link.submit(ms(0), &f), Submit::Queued { departs: ms(1) });
    // Back to back: the second waits for the first.
    assert_eq!(link.submit(ms(0), &f), Submit::Queued { departs: ms(2) });
    assert_eq!(link.poll_deliver(Instant::from_nanos(999_999)), None);
    assert!(link.poll_deliver(ms(1)).is_some());
    assert_eq!(link.poll_deliver(ms(1)), None);
    assert!(link.poll_deliver(ms(2)).is_some());
    // An idle link starts at once.
    assert_eq!(link.submit(ms(10), &f), Submit::Queued { departs: ms(11) });
}

#[test]
fn fractional_serialisation_times_do_not_drift() {
    // One byte at 3 Mbit/s takes 8/3 us = 2666.67 ns: rounded per frame for reporting,
    // exact in the running total.
    let mut link = LinkModel::new(LinkConfig::default().with_rate_bps(3_000_000), 1);
    let departs: Vec<Submit> = (0..3).map(|_| link.submit(ms(0), &[0])).collect();
    assert_eq!(
        departs[0],
        Submit::Queued {
            departs: Instant::from_nanos(2667)
        }
    );
    assert_eq!(
        departs[1],
        Submit::Queued {
            departs: Instant::from_nanos(5334)
        }
    );
    assert_eq!(
        departs[2],
        Submit::Queued {
            departs: Instant::from_nanos(8000)
        }
    );
    // 3 Mbit in 3e6/8 one-byte frames takes exactly one second.
    let mut link = LinkModel::new(
        LinkConfig::default()
            .with_rate_bps(3_000_000)
            .with_queue_limit_bytes(usize::MAX),
        1,
    );
    for _ in 0..(3_000_000 / 8) {
        link.submit(ms(0), &[0]);
    }
    assert_eq!(link.busy_until(), ms(1000));
}

#[test]
fn delay_is_added_after_serialisation() {
    let config = LinkConfig::default()
        .with_rate_bps(12_000_000)
        .with_delay(Duration::from_millis(20));
    let mut link = LinkModel::new(config, 1);
    link.submit(ms(0), &[0; 1500]);
    assert_eq!(link.next_arrival(), Some(ms(21)));
    assert_eq!(link.poll_deliver(ms(20)), None);
    assert!(link.poll_deliver(ms(21)).is_some());
}

#[test]
fn loss_ratio_matches_probability() {
    let mut link = LinkModel::new(LinkConfig::default().with_loss(0.1), 7);
    let n = 100_000;
    for i in 0..n {
        link.submit(Instant::from_nanos(i), &[0; 64]);
    }
    let delivered = drain(&mut link, ms(1)).len() as f64;
    let lost = link.stats().dropped_loss as f64;
    assert_eq!(delivered + lost, n as f64);
    let ratio = lost / n as f64;
    assert!((ratio - 0.1).abs() < 0.01, "loss ratio {ratio}");
}

#[test]
fn lost_frames_still_use_the_link() {
    let config = LinkConfig::default()
        .with_rate_bps(12_000_000)
        .with_loss(1.0);
    let mut link = LinkModel::new(config, 1);
    assert_eq!(
        link.submit(ms(0), &[0; 1500]),
        Submit::Dropped(DropReason::Loss)
    );
    assert_eq!(link.busy_until(), ms(1));
    assert_eq!(link.in_flight(), 0);
}

#[test]
fn queue_overflow_tail_drops() {
    let config = LinkConfig::default()
        .with_rate_bps(12_000_000)
        .with_queue_limit_bytes(3000);
    let mut link = LinkModel::new(config, 1);
    let results: Vec<Submit> = (0..10)
        .map(|i| link.submit(ms(0), &numbered(i, 1500)))
        .collect();
    // One in the transmitter, two waiting (3000 bytes), the other seven dropped.
    for (i, r) in results.iter().enumerate() {
        if i < 3 {
            assert_eq!(
                *r,
                Submit::Queued {
                    departs: ms(i as u64 + 1)
                }
            );
        } else {
            assert_eq!(*r, Submit::Dropped(DropReason::QueueFull));
        }
    }
    assert_eq!(link.stats().dropped_queue, 7);
    assert_eq!(link.queued_bytes(), 3000);
    // At 1 ms the second frame enters the transmitter, making room for one more.
    assert_eq!(
        link.submit(ms(1), &numbered(10, 1500)),
        Submit::Queued { departs: ms(4) }
    );
    assert_eq!(
        link.submit(ms(1), &numbered(11, 1500)),
        Submit::Dropped(DropReason::QueueFull)
    );
    let got: Vec<u32> = drain(&mut link, ms(10)).iter().map(|f| number(f)).collect();
    assert_eq!(got, vec![0, 1, 2, 10]);
}

#[test]
fn infinite_rate_never_queues() {
    let config = LinkConfig::default().with_queue_limit_bytes(0);
    let mut link = LinkModel::new(config, 1);
    for i in 0..100 {
        assert!(matches!(
            link.submit(ms(0), &numbered(i, 1500)),
            Submit::Queued { .. }
        ));
    }
    assert_eq!(drain(&mut link, ms(0)).len(), 100);
}

#[test]
fn oversize_frames_are_dropped() {
    let mut link = LinkModel::new(LinkConfig::default().with_mtu(1000), 1);
    assert_eq!(
        link.submit(ms(0), &[0; 1001]),
        Submit::Dropped(DropReason::Oversize)
    );
    assert!(matches!(
        link.submit(ms(0), &[0; 1000]),
        Submit::Queued { .. }
    ));
    assert_eq!(link.stats().dropped_oversize, 1);
    assert_eq!(drain(&mut link, ms(0)).len(), 1);
}

#[test]
fn reordering_really_reorders() {
    let config = LinkConfig::default().with_reorder(0.3, Duration::from_millis(5));
    let mut link = LinkModel::new(config, 11);
    let n = 1000;
    for i in 0..n {
        link.submit(ms(u64::from(i)), &numbered(i, 64));
    }
    let got: Vec<u32> = drain(&mut link, ms(10_000))
        .iter()
        .map(|f| number(f))
        .collect();
    assert_eq!(got.len(), n as usize, "reordering loses nothing");
    let mut sorted = got.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..n).collect::<Vec<_>>());
    let inversions = got.windows(2).filter(|w| w[0] > w[1]).count();
    assert!(inversions > 100, "only {inversions} inversions");
    let reordered = link.stats().reordered as f64 / f64::from(n);
    assert!(
        (reordered - 0.3).abs() < 0.05,
        "reordered fraction {reordered}"
    );
}

#[test]
fn held_back_frame_arrives_after_its_delay() {
    let config = LinkConfig::default().with_reorder(1.0, Duration::from_millis(5));
    let mut link = LinkModel::new(config, 1);
    link.submit(ms(0), &[1]);
    assert_eq!(link.next_arrival(), Some(ms(5)));
}

#[test]
fn duplication_duplicates() {
    let mut link = LinkModel::new(LinkConfig::default().with_duplicate(1.0), 1);
    for i in 0..3 {
        link.submit(ms(0), &numbered(i, 64));
    }
    let got: Vec<u32> = drain(&mut link, ms(0)).iter().map(|f| number(f)).collect();
    assert_eq!(got, vec![0, 0, 1, 1, 2, 2]);
    assert_eq!(link.stats().duplicated, 3);

    let mut link = LinkModel::new(LinkConfig::default().with_duplicate(0.2), 3);
    for i in 0..10_000 {
        link.submit(ms(0), &numbered(i, 64));
    }
    let extra = drain(&mut link, ms(0)).len() as f64 - 10_000.0;
    assert!(
        (extra / 10_000.0 - 0.2).abs() < 0.02,
        "duplicated fraction {}",
        extra / 10_000.0
    );
}

#[test]
fn corruption_flips_exactly_one_bit() {
    let mut link = LinkModel::new(LinkConfig::default().with_corrupt(1.0), 5);
    let mut positions = std::collections::HashSet::new();
    for i in 0..500 {
        let sent = numbered(i, 100);
        link.submit(ms(0), &sent);
        let got = link.poll_deliver(ms(0)).unwrap();
        assert_eq!(got.len(), sent.len());
        let flipped: u32 = sent
            .iter()
            .zip(&got)
            .map(|(a, b)| (a ^ b).count_ones())
            .sum();
        assert_eq!(flipped, 1, "frame {i}");
        let byte = sent.iter().zip(&got).position(|(a, b)| a != b).unwrap();
        positions.insert(byte);
        link.recycle(got);
    }
    assert!(
        positions.len() > 90,
        "bits chosen across the frame, got {} bytes",
        positions.len()
    );
    assert_eq!(link.stats().corrupted, 500);
    // An empty frame has no bit to flip and passes unharmed.
    link.submit(ms(0), &[]);
    assert_eq!(link.poll_deliver(ms(0)), Some(vec![]));
}

#[test]
fn equal_arrivals_keep_submission_order() {
    let config = LinkConfig::default().with_delay(Duration::from_millis(3));
    let mut link = LinkModel::new(config, 1);
    for i in 0..50 {
        link.submit(ms(0), &numbered(i, 64));
    }
    let got: Vec<u32> = drain(&mut link, ms(3)).iter().map(|f| number(f)).collect();
    assert_eq!(got, (0..50).collect::<Vec<_>>());
}

fn impaired() -> LinkConfig {
    LinkConfig::default()
        .with_rate_bps(10_000_000)
        .with_delay(Duration::from_millis(2))
        .with_queue_limit_bytes(20_000)
        .with_loss(0.05)
        .with_reorder(0.1, Duration::from_millis(1))
        .with_duplicate(0.05)
        .with_corrupt(0.05)
}

/// Runs a fixed workload and records every delivery with its time.
fn run(seed: u64) -> (Vec<(Instant, Vec<u8>)>, LinkStats) {
    let mut link = LinkModel::new(impaired(), seed);
    let mut out = Vec::new();
    let mut now = Instant::ZERO;
    for i in 0..2000u32 {
        now += Duration::from_micros(500);
        link.submit(now, &numbered(i, 64 + (i as usize * 37) % 1400));
        while let Some(f) = link.poll_deliver(now) {
            out.push((now, f));
        }
    }
    while let Some(t) = link.next_arrival() {
        while let Some(f) = link.poll_deliver(t) {
            out.push((t, f));
        }
    }
    (out, *link.stats())
}

#[test]
fn same_seed_same_result_different_seed_different_result() {
    let (a, sa) = run(99);
    let (b, sb) = run(99);
    let (c, _) = run(100);
    assert_eq!(a, b);
    assert_eq!(sa, sb);
    assert_ne!(a, c);
    for counter in [
        sa.dropped_loss,
        sa.dropped_queue,
        sa.duplicated,
        sa.reordered,
        sa.corrupted,
    ] {
        assert!(counter > 0, "workload exercises every impairment: {sa:?}");
    }
}

#[test]
fn counters_balance_once_drained() {
    let (_, s) = run(4);
    assert_eq!(
        s.submitted + s.duplicated,
        s.delivered + s.dropped_loss + s.dropped_queue + s.dropped_oversize
    );
}

#[test]
fn impairments_draw_from_independent_streams() {
    // Turning duplication on does not change which frames are lost.
    let lost = |config: LinkConfig| -> Vec<u32> {
        let mut link = LinkModel::new(config, 8);
        (0..1000)
            .filter(|&i| link.submit(ms(0), &numbered(i, 64)) == Submit::Dropped(DropReason::Loss))
            .collect()
    };
    let base = LinkConfig::default().with_loss(0.2);
    assert_eq!(lost(base), lost(base.with_duplicate(0.5).with_corrupt(0.5)));
}

#[test]
fn validate_rejects_bad_configs() {
    assert_eq!(LinkConfig::default().validate(), Ok(()));
    assert_eq!(impaired().validate(), Ok(()));
    assert_eq!(
        LinkConfig::default().with_loss(1.5).validate(),
        Err(LinkConfigError::ProbabilityOutOfRange {
            name: "loss",
            value: 1.5
        })
    );
    assert!(matches!(
        LinkConfig::default().with_corrupt(f64::NAN).validate(),
        Err(LinkConfigError::ProbabilityOutOfRange {
            name: "corrupt",
            ..
        })
    ));
    assert_eq!(
        LinkConfig::default().with_duplicate(-0.1).validate(),
        Err(LinkConfigError::ProbabilityOutOfRange {
            name: "duplicate",
            value: -0.1
        })
    );
    assert_eq!(
        LinkConfig::default().with_mtu(0).validate(),
        Err(LinkConfigError::ZeroMtu)
    );
    assert_eq!(
        LinkConfig::default()
            .with_reorder(0.5, Duration::ZERO)
            .validate(),
        Err(LinkConfigError::ReorderWithoutDelay { reorder: 0.5 })
    );
    let e = LinkModel::try_new(
        LinkConfig::default().with_reorder(2.0, Duration::from_millis(1)),
        0,
    )
    .unwrap_err();
    assert!(e.to_string().contains("reorder"), "{e}");
}

#[test]
#[should_panic(expected = "invalid link configuration")]
fn new_panics_on_invalid_config() {
    LinkModel::new(LinkConfig::default().with_loss(-1.0), 0);
}

#[test]
fn rate_change_applies_to_later_frames() {
    let mut link = LinkModel::new(LinkConfig::default().with_rate_bps(12_000_000), 1);
    assert_eq!(
        link.submit(ms(0), &[0; 1500]),
        Submit::Queued { departs: ms(1) }
    );
    link.set_config(link.config().with_rate_bps(6_000_000))
        .unwrap();
    // Waits for the first frame (1 ms), then takes 2 ms at the new rate.
    assert_eq!(
        link.submit(ms(0), &[0; 1500]),
        Submit::Queued { departs: ms(3) }
    );
    link.set_config(link.config().with_rate_bps(0)).unwrap();
    assert_eq!(
        link.submit(ms(0), &[0; 1500]),
        Submit::Queued { departs: ms(3) }
    );
    assert!(
        link.set_config(LinkConfig::default().with_loss(7.0))
            .is_err()
    );
}

#[test]
fn recycled_buffers_are_reused() {
    let mut link = LinkModel::new(LinkConfig::default(), 1);
    link.submit(ms(0), &[1; 1000]);
    let f = link.poll_deliver(ms(0)).unwrap();
    let ptr = f.as_ptr();
    link.recycle(f);
    link.submit(ms(0), &[2; 500]);
    let g = link.poll_deliver(ms(0)).unwrap();
    assert_eq!(g.as_ptr(), ptr);
    assert_eq!(g, vec![2; 500]);
}

proptest::proptest! {
    /// Without reordering or duplication the link is FIFO: whatever arrives, arrives in
    /// the order sent, and never before it was sent.
    #[test]
    fn fifo_without_reordering(
        rate in 0u64..100_000_000,
        delay_us in 0u64..10_000,
        loss in 0.0f64..0.5,
        queue in 0usize..20_000,
        gaps in proptest::collection::vec((0u64..2_000, 1usize..1514), 1..200),
    ) {
        let config = LinkConfig::default()
            .with_rate_bps(rate)
            .with_delay(Duration::from_micros(delay_us))
            .with_loss(loss)
            .with_queue_limit_bytes(queue);
        let mut link = LinkModel::new(config, 0);
        let mut now = Instant::ZERO;
        let mut sent_at = Vec::new();
        let mut got = Vec::new();
        for (i, (gap, len)) in gaps.iter().enumerate() {
            now += Duration::from_micros(*gap);
            link.submit(now, &numbered(i as u32, *len));
            sent_at.push(now);
            while let Some(f) = link.poll_deliver(now) {
                got.push((now, number(&f)));
            }
        }
        while let Some(t) = link.next_arrival() {
            while let Some(f) = link.poll_deliver(t) {
                got.push((t, number(&f)));
            }
        }
        for w in got.windows(2) {
            proptest::prop_assert!(w[0].1 < w[1].1);
        }
        for (t, i) in &got {
            proptest::prop_assert!(*t >= sent_at[*i as usize] + Duration::from_micros(delay_us));
        }
    }
}

fn bursty(good_to_bad: f64, bad_to_good: f64) -> LinkConfig {
    LinkConfig::default().with_burst_loss(crate::link::GilbertElliott {
        good_to_bad,
        bad_to_good,
        loss_good: 0.0,
        loss_bad: 1.0,
    })
}

/// Which of `n` frames a link with `config` lost, in order.
fn losses(config: LinkConfig, n: u32, seed: u64) -> Vec<bool> {
    let mut link = LinkModel::new(config, seed);
    (0..n)
        .map(|i| {
            matches!(
                link.submit(ms(u64::from(i)), &numbered(i, 64)),
                Submit::Dropped(DropReason::Loss)
            )
        })
        .collect()
}

#[test]
fn gilbert_elliott_loses_in_bursts_at_the_expected_rate() {
    // Bad 1% of the time on average entering, leaving with 1/4: mean burst 4 frames.
    let config = bursty(0.01, 0.25);
    let expected = config.burst_loss.unwrap().mean_loss();
    let lost = losses(config, 200_000, 7);
    let rate = lost.iter().filter(|&&l| l).count() as f64 / lost.len() as f64;
    assert!(
        (rate - expected).abs() < expected * 0.15,
        "rate {rate}, expected {expected}"
    );
    let bursts = lost.windows(2).filter(|w| w[1] && !w[0]).count() as f64;
    let mean_burst = lost.iter().filter(|&&l| l).count() as f64 / bursts;
    assert!((3.0..5.0).contains(&mean_burst), "mean burst {mean_burst}");
}

#[test]
fn gilbert_elliott_leaves_the_other_impairments_unchanged() {
    // The burst model draws from its own stream: the independent-loss decisions of a
    // link are the same with and without it, frame for frame.
    let plain = losses(LinkConfig::default().with_loss(0.05), 5000, 3);
    let both = losses(
        LinkConfig {
            loss: 0.05,
            ..bursty(0.001, 0.5)
        },
        5000,
        3,
    );
    for (i, (p, b)) in plain.iter().zip(&both).enumerate() {
        assert!(!p || *b, "frame {i} lost without bursts but not with them");
    }
}

#[test]
fn gilbert_elliott_probabilities_are_validated() {
    let config = bursty(1.5, 0.5);
    let err = config.validate().unwrap_err();
    assert!(err.to_string().contains("burst_loss.good_to_bad"), "{err}");
    assert!(bursty(0.1, 0.5).validate().is_ok());
}
