//! Super-segments on the link: carried whole, charged and lost per wire frame.

use super::*;
use crate::segmentation::tests::{Spec, build};
use crate::segmentation::{self, Framing};

const MSS: u16 = 1448;

fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

/// A TCP super-segment of `payload` bytes starting at sequence number `seq`.
fn super_segment(payload: usize, seq: u32) -> Vec<u8> {
    let mut spec = Spec::new(payload);
    spec.seq = seq;
    build(&spec)
}

/// Everything delivered by `now`, super-segments cut into their wire frames.
fn wire_frames_delivered(link: &mut LinkModel, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Some((frame, gso)) = link.poll_deliver_segmented(now) {
        match gso {
            Some(size) => {
                let wire = segmentation::wire_frames(Framing::Ethernet, &frame, size).unwrap();
                out.extend(segmentation::segment(Framing::Ethernet, &frame, wire.ip_mtu).unwrap());
            }
            None => out.push(frame),
        }
    }
    out
}

#[test]
fn a_super_segment_crosses_whole_charged_for_its_wire_frames() {
    let config = LinkConfig::default()
        .with_rate_bps(1_000_000_000)
        .with_delay(Duration::from_millis(1));
    let mut link = LinkModel::new(config, 1);
    let frame = super_segment(64_000, 1);
    let wire = segmentation::wire_frames(Framing::Ethernet, &frame, MSS).unwrap();
    let departs = Instant::ZERO + config.transmission_time(wire.wire_bytes);
    assert_eq!(
        link.submit_segmented(Instant::ZERO, &frame, MSS),
        Submit::Queued { departs }
    );
    let arrives = departs + config.delay;
    assert_eq!(link.next_arrival(), Some(arrives));
    assert_eq!(
        link.poll_deliver_segmented(arrives - Duration::from_nanos(1)),
        None
    );
    assert_eq!(
        link.poll_deliver_segmented(arrives),
        Some((frame, Some(MSS)))
    );
    let s = link.stats();
    assert_eq!(
        (s.submitted, s.delivered),
        (wire.count as u64, wire.count as u64)
    );
    assert_eq!(s.bytes_delivered, wire.wire_bytes as u64);
    assert_eq!((s.super_segments, s.super_segments_cut), (1, 0));
}

/// Super-segments through one link, their wire frames one by one through another
/// with the same seed: the same frames arrive and the same are lost.
fn same_as_single_frames(config: LinkConfig, seed: u64) -> LinkStats {
    let (mut whole, mut single) = (LinkModel::new(config, seed), LinkModel::new(config, seed));
    let mut seq = 1u32;
    for i in 0..400u64 {
        let now = Instant::from_nanos(i * 100_000);
        let frame = super_segment(20_000 + (i as usize * 97) % 40_000, seq);
        seq = seq.wrapping_add(70_000);
        whole.submit_segmented(now, &frame, MSS);
        let wire = segmentation::wire_frames(Framing::Ethernet, &frame, MSS).unwrap();
        for piece in segmentation::segment(Framing::Ethernet, &frame, wire.ip_mtu).unwrap() {
            single.submit(now, &piece);
        }
    }
    let end = ms(10_000);
    assert_eq!(
        wire_frames_delivered(&mut whole, end),
        wire_frames_delivered(&mut single, end)
    );
    let (w, s) = (*whole.stats(), *single.stats());
    assert_eq!(
        (w.submitted, w.delivered, w.dropped_loss, w.bytes_delivered),
        (s.submitted, s.delivered, s.dropped_loss, s.bytes_delivered)
    );
    w
}

#[test]
fn loss_is_drawn_per_wire_frame_as_for_single_frames() {
    let stats = same_as_single_frames(LinkConfig::default().with_loss(0.002), 3);
    assert!(stats.dropped_loss > 0, "{stats:?}");
    assert!(
        stats.super_segments > 0 && stats.super_segments_cut > 0,
        "{stats:?}"
    );
    // Each cut super-segment lost at least one of its frames.
    assert!(stats.super_segments_cut <= stats.dropped_loss, "{stats:?}");
}

#[test]
fn bursty_loss_steps_its_chain_per_wire_frame() {
    let ge = GilbertElliott {
        good_to_bad: 0.001,
        bad_to_good: 0.2,
        loss_good: 0.0,
        loss_bad: 0.5,
    };
    let config = LinkConfig::default()
        .with_loss(0.0005)
        .with_burst_loss(ge)
        .with_delay(Duration::from_millis(2));
    let stats = same_as_single_frames(config, 11);
    assert!(
        stats.dropped_loss > 0 && stats.super_segments > 0,
        "{stats:?}"
    );
}

#[test]
fn lost_frames_are_cut_out_and_the_rest_arrive_valid() {
    let mut link = LinkModel::new(LinkConfig::default().with_loss(0.1), 5);
    let frame = super_segment(60_000, 1);
    let count = segmentation::wire_frames(Framing::Ethernet, &frame, MSS)
        .unwrap()
        .count;
    link.submit_segmented(Instant::ZERO, &frame, MSS);
    let s = *link.stats();
    let delivered: Vec<_> = std::iter::from_fn(|| link.poll_deliver_segmented(ms(1))).collect();
    if s.dropped_loss == 0 {
        assert_eq!(delivered.len(), 1, "nothing lost: whole");
        return;
    }
    assert_eq!(delivered.len() as u64, count as u64 - s.dropped_loss);
    assert!(
        delivered
            .iter()
            .all(|(f, gso)| gso.is_none() && f.len() <= 1514)
    );
    assert_eq!(link.stats().delivered + s.dropped_loss, count as u64);
}

#[test]
fn a_full_queue_takes_the_frames_that_fit() {
    let config = LinkConfig::default()
        .with_rate_bps(10_000_000)
        .with_queue_limit_bytes(20_000);
    let mut link = LinkModel::new(config, 1);
    let first = super_segment(60_000, 1);
    let second = super_segment(60_000, 60_001);
    link.submit_segmented(Instant::ZERO, &first, MSS);
    link.submit_segmented(Instant::ZERO, &second, MSS);
    let s = *link.stats();
    assert_eq!((s.super_segments, s.super_segments_cut), (1, 1));
    assert!(s.dropped_queue > 0 && s.dropped_queue < 42, "{s:?}");
    assert!(link.queued_bytes() <= 20_000);
    let delivered = wire_frames_delivered(&mut link, ms(1000));
    assert_eq!(delivered.len() as u64 + s.dropped_queue, s.submitted);
}

#[test]
fn impairments_of_single_frames_cut_every_super_segment() {
    let config = LinkConfig::default()
        .with_duplicate(0.5)
        .with_delay(Duration::from_millis(1));
    let mut link = LinkModel::new(config, 9);
    let frame = super_segment(30_000, 1);
    link.submit_segmented(Instant::ZERO, &frame, MSS);
    let s = *link.stats();
    assert_eq!((s.super_segments, s.super_segments_cut), (0, 1));
    assert_eq!(s.submitted, 30_000u64.div_ceil(u64::from(MSS)));
    let delivered: Vec<_> = std::iter::from_fn(|| link.poll_deliver_segmented(ms(2))).collect();
    assert_eq!(delivered.len() as u64, s.submitted + s.duplicated);
    assert!(
        delivered
            .iter()
            .all(|(f, gso)| gso.is_none() && f.len() <= 1514)
    );
}

#[test]
fn frames_that_are_not_super_segments_pass_as_single_frames() {
    let mut link = LinkModel::new(LinkConfig::default(), 1);
    let small = super_segment(1000, 1);
    link.submit_segmented(Instant::ZERO, &small, MSS);
    link.submit_segmented(Instant::ZERO, &[7; 100], MSS);
    assert_eq!(link.poll_deliver_segmented(ms(0)), Some((small, None)));
    assert_eq!(
        link.poll_deliver_segmented(ms(0)),
        Some((vec![7; 100], None))
    );
    assert_eq!(link.stats().submitted, 2);
    assert_eq!(link.stats().super_segments, 0);
}

#[test]
fn frames_beyond_the_link_mtu_are_dropped_frame_by_frame() {
    let mut link = LinkModel::new(LinkConfig::default().with_mtu(1000), 1);
    let frame = super_segment(10_000, 1);
    link.submit_segmented(Instant::ZERO, &frame, MSS);
    let s = link.stats();
    assert_eq!(s.dropped_oversize, 10_000u64.div_ceil(u64::from(MSS)));
    assert_eq!(link.poll_deliver_segmented(ms(1)), None);
}

/// Everything delivered by `now`, with segment sizes.
fn delivered(link: &mut LinkModel, now: Instant) -> Vec<(Vec<u8>, Option<u16>)> {
    std::iter::from_fn(|| link.poll_deliver_segmented(now)).collect()
}

#[test]
fn an_owned_super_segment_travels_in_its_own_buffer() {
    let config = LinkConfig::default().with_delay(Duration::from_millis(1));
    let mut link = LinkModel::new(config, 3);
    let frame = super_segment(60_000, 9);
    let mut buf = link.spare_buffer(frame.len());
    buf.copy_from_slice(&frame);
    let at = buf.as_ptr();
    link.submit_segmented_owned(Instant::ZERO, buf, MSS);
    let (out, gso) = link.poll_deliver_segmented(ms(1)).expect("delivered");
    assert_eq!((&out, gso), (&frame, Some(MSS)));
    assert_eq!(out.as_ptr(), at, "the frame was moved, not copied");
    // Given back, it is the next spare buffer that holds a super-segment, though a
    // small one was given back after it.
    link.recycle(out);
    link.recycle(vec![0; 100]);
    let spare = link.spare_buffer(frame.len() - 10);
    assert_eq!((spare.as_ptr(), spare.len()), (at, frame.len() - 10));
}

/// Owned and borrowed submissions make the same decisions: the same frames arrive at
/// the same times, whole or cut, with the same counts; an owned frame not carried
/// whole leaves its buffer to be reused.
#[test]
fn owned_and_borrowed_super_segments_meet_the_same_fates() {
    for config in [
        LinkConfig::default()
            .with_rate_bps(2_000_000_000)
            .with_delay(Duration::from_millis(1))
            .with_loss(0.002),
        LinkConfig::default()
            .with_delay(Duration::from_millis(1))
            .with_reorder(0.1, Duration::from_micros(300)),
        LinkConfig::default()
            .with_rate_bps(100_000_000)
            .with_queue_limit_bytes(150_000),
    ] {
        let (mut borrowed, mut owned) = (LinkModel::new(config, 7), LinkModel::new(config, 7));
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let mut seq = 1u32;
        for i in 0..300u64 {
            let now = Instant::from_nanos(i * 200_000);
            let frame = super_segment(10_000 + (i as usize * 131) % 50_000, seq);
            seq = seq.wrapping_add(70_000);
            let by_ref = borrowed.submit_segmented(now, &frame, MSS);
            let mut buf = owned.spare_buffer(frame.len());
            buf.copy_from_slice(&frame);
            assert_eq!(owned.submit_segmented_owned(now, buf, MSS), by_ref);
            a.extend(delivered(&mut borrowed, now));
            for (frame, gso) in delivered(&mut owned, now) {
                b.push((frame.clone(), gso));
                owned.recycle(frame);
            }
        }
        a.extend(delivered(&mut borrowed, ms(10_000)));
        b.extend(delivered(&mut owned, ms(10_000)));
        assert_eq!(a, b, "{config:?}");
        assert_eq!(borrowed.stats(), owned.stats(), "{config:?}");
        assert!(owned.stats().super_segments_cut > 0, "{config:?}");
    }
}
