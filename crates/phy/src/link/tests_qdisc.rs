//! The link with a queue discipline holding its waiting frames.

use impnet_core::qdisc::{CodelConfig, FifoConfig, FqCodelConfig, Limit};

use super::*;

/// Submits each `(time, frame)` (in time order) and collects every delivery, driving
/// the link by its own `next_arrival` as the simulator does.
pub(super) fn drive(
    link: &mut LinkModel,
    submits: &[(Instant, Vec<u8>)],
) -> Vec<(Instant, Vec<u8>)> {
    let mut out = Vec::new();
    let mut pending = submits.iter().peekable();
    loop {
        let next_submit = pending.peek().map(|(t, _)| *t);
        let Some(now) = [next_submit, link.next_arrival()]
            .into_iter()
            .flatten()
            .min()
        else {
            return out;
        };
        while let Some(frame) = link.poll_deliver(now) {
            out.push((now, frame));
        }
        while let Some((_, frame)) = pending.next_if(|(t, _)| *t == now) {
            link.submit(now, frame);
        }
    }
}

/// An Ethernet frame of `len` bytes carrying IPv4/UDP from port `sport`, with ECN `ecn`
/// and `id` in the IPv4 ident field.
pub(super) fn ipv4_frame(id: u16, len: usize, sport: u16, ecn: u8) -> Vec<u8> {
    let mut f = vec![0u8; len.max(42)];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..];
    let ip_len = ip.len() as u16;
    ip[0] = 0x45;
    ip[1] = ecn;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[4..6].copy_from_slice(&id.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
    ip[20..22].copy_from_slice(&sport.to_be_bytes());
    ip[22..24].copy_from_slice(&9u16.to_be_bytes());
    ip[24..26].copy_from_slice(&(ip_len - 20).to_be_bytes());
    // RFC 1071 header checksum.
    let mut sum: u32 = ip[..20]
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f
}

pub(super) fn header_checksum_ok(frame: &[u8]) -> bool {
    let mut sum: u32 = frame[14..34]
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum == 0xffff
}

/// 1500-byte frames every 1 ms for `secs` seconds into a 10 Mbit/s link (1.2 ms a frame).
fn overload(secs: u64, ecn: u8) -> Vec<(Instant, Vec<u8>)> {
    (0..secs * 1000)
        .map(|i| {
            (
                Instant::from_millis(i),
                ipv4_frame(i as u16, 1500, 5000, ecn),
            )
        })
        .collect()
}

fn slow_link() -> LinkConfig {
    LinkConfig::default()
        .with_rate_bps(10_000_000)
        .with_delay(Duration::from_millis(10))
}

#[test]
fn held_fifo_behaves_as_the_computed_drop_tail_queue() {
    // The same frames, times and impairments: a FIFO qdisc limited in bytes gives the
    // deliveries, instants and counters of the default queue of the same limit.
    let config = LinkConfig {
        queue_limit_bytes: 30_000,
        loss: 0.05,
        duplicate: 0.02,
        reorder: 0.05,
        reorder_delay: Duration::from_millis(3),
        corrupt: 0.01,
        ..slow_link()
    };
    let mut rng = crate::rng::Rng::new(9);
    let mut t = 0u64;
    let submits: Vec<_> = (0..3000u32)
        .map(|i| {
            t += rng.below(1_000_000);
            (
                Instant::from_nanos(t),
                numbered_frame(i, 60 + rng.below(1440) as usize),
            )
        })
        .collect();
    let mut plain = LinkModel::new(config, 4);
    let held_config = config.with_qdisc(Some(QdiscConfig::Fifo(FifoConfig {
        limit: Limit::Bytes(30_000),
    })));
    let mut held = LinkModel::new(held_config, 4);
    let a = drive(&mut plain, &submits);
    let b = drive(&mut held, &submits);
    assert!(plain.stats().dropped_queue > 0);
    assert_eq!(a.len(), b.len());
    assert!(a == b, "deliveries differ");
    assert_eq!(plain.stats(), held.stats());
}

fn numbered_frame(i: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0xab; len.max(4)];
    f[..4].copy_from_slice(&i.to_be_bytes());
    f
}

#[test]
fn codel_link_keeps_queueing_delay_near_target() {
    let frames = overload(20, 0);
    let mut fifo = LinkModel::new(slow_link(), 1);
    let mut codel = LinkModel::new(
        slow_link().with_qdisc(Some(QdiscConfig::Codel(CodelConfig::default()))),
        1,
    );
    let late = |out: &[(Instant, Vec<u8>)]| {
        // Delay of the frames that arrived in the last 5 s: arrival minus submission.
        let sent: std::collections::HashMap<u16, Instant> = frames
            .iter()
            .map(|(t, f)| (u16::from_be_bytes([f[18], f[19]]), *t))
            .collect();
        out.iter()
            .filter(|(t, _)| *t >= Instant::from_millis(15_000))
            .map(|(t, f)| *t - sent[&u16::from_be_bytes([f[18], f[19]])])
            .max()
            .unwrap()
    };
    let fifo_worst = late(&drive(&mut fifo, &frames));
    let codel_out = drive(&mut codel, &frames);
    let codel_worst = late(&codel_out);
    // The FIFO (1 MiB) fills: seconds of delay. CoDel holds it to about an interval.
    assert!(fifo_worst > Duration::from_millis(800), "{fifo_worst}");
    assert!(codel_worst < Duration::from_millis(200), "{codel_worst}");
    let s = codel.stats();
    assert!(s.dropped_aqm > 0);
    assert_eq!(s.ce_marked, 0);
    assert_eq!(s.submitted, s.delivered + s.dropped_aqm + s.dropped_queue);
    let q = codel.qdisc().unwrap().stats();
    assert_eq!(q.dropped_codel, s.dropped_aqm);
}

#[test]
fn codel_link_marks_ect_frames_with_valid_checksums() {
    let frames = overload(5, 0b10);
    let mut codel = LinkModel::new(
        slow_link().with_qdisc(Some(QdiscConfig::Codel(CodelConfig::default()))),
        1,
    );
    let out = drive(&mut codel, &frames);
    let s = codel.stats();
    assert_eq!(s.dropped_aqm, 0);
    assert!(s.ce_marked > 0);
    let marked = out.iter().filter(|(_, f)| f[15] & 3 == 3).count();
    assert!(marked > 0);
    assert!(out.iter().all(|(_, f)| header_checksum_ok(f)));
}

#[test]
fn fq_codel_link_serves_a_sparse_flow_first() {
    // A bulk flow overloads the link; a frame of another flow every 100 ms (and
    // non-IPv4 frames, flow 0) get through without waiting behind it.
    let mut submits = overload(5, 0);
    for i in 0..50u64 {
        let t = Instant::from_millis(i * 100 + 50);
        submits.push((t, ipv4_frame(60_000 + i as u16, 100, 7, 0)));
        submits.push((t, numbered_frame(i as u32, 60)));
    }
    submits.sort_by_key(|(t, _)| *t);
    let mut link = LinkModel::new(
        slow_link().with_qdisc(Some(QdiscConfig::FqCodel(FqCodelConfig::default()))),
        1,
    );
    let out = drive(&mut link, &submits);
    let pings: Vec<_> = out.iter().filter(|(_, f)| f.len() == 100).collect();
    assert_eq!(pings.len(), 50);
    for (arrived, f) in pings {
        let i = u64::from(u16::from_be_bytes([f[18], f[19]]) - 60_000);
        let waited = *arrived - Instant::from_millis(i * 100 + 50);
        // 10 ms propagation, at most one 1.2 ms frame being sent, its own 100 bytes
        // and the 60-byte frame of flow 0 submitted with it.
        assert!(waited < Duration::from_millis(12), "ping {i} took {waited}");
    }
    assert_eq!(out.iter().filter(|(_, f)| f.len() == 60).count(), 50);
}

#[test]
fn changing_the_qdisc_drops_what_it_held() {
    let config = slow_link().with_qdisc(Some(QdiscConfig::Codel(CodelConfig::default())));
    let mut link = LinkModel::new(config, 1);
    for i in 0..5 {
        link.submit(Instant::ZERO, &ipv4_frame(i, 1500, 1, 0));
    }
    assert_eq!(link.queued_bytes(), 4 * 1500);
    link.set_config(config.with_qdisc(None)).unwrap();
    assert_eq!(link.stats().dropped_queue, 4);
    assert_eq!(link.queued_bytes(), 0);
    // The frame already sending still arrives.
    let out = drive(&mut link, &[]);
    assert_eq!(out.len(), 1);
}

/// The IPv6 twin of [`ipv4_frame`]'s packet in an Ethernet frame (EtherType 0x86DD),
/// its traffic class carrying `ecn`, `id` in the flow label.
fn ipv6_frame(id: u16, len: usize, sport: u16, ecn: u8) -> Vec<u8> {
    let mut f = vec![0u8; len.max(62)];
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    let ip = &mut f[14..];
    let payload_len = (ip.len() - 40) as u16;
    ip[0] = 0x60;
    ip[1] = ecn << 4;
    ip[2..4].copy_from_slice(&id.to_be_bytes());
    ip[4..6].copy_from_slice(&payload_len.to_be_bytes());
    ip[6] = 17;
    ip[7] = 64;
    ip[8] = 0xfd;
    ip[23] = 1;
    ip[24] = 0xfd;
    ip[39] = 2;
    ip[40..42].copy_from_slice(&sport.to_be_bytes());
    ip[42..44].copy_from_slice(&9u16.to_be_bytes());
    f
}

#[test]
fn codel_link_marks_ipv6_frames_and_bare_ip_packets_when_ip_level() {
    let codel = || slow_link().with_qdisc(Some(QdiscConfig::Codel(CodelConfig::default())));
    let ect = |f: &[u8]| (f[1] >> 4) & 3;
    // IPv6 in Ethernet: marked in the traffic class, nothing dropped.
    let frames: Vec<_> = (0..5000u64)
        .map(|i| {
            (
                Instant::from_millis(i),
                ipv6_frame(i as u16, 1500, 5000, 0b10),
            )
        })
        .collect();
    let mut link = LinkModel::new(codel(), 1);
    let out = drive(&mut link, &frames);
    assert_eq!(link.stats().dropped_aqm, 0);
    assert!(link.stats().ce_marked > 0);
    assert!(out.iter().any(|(_, f)| ect(&f[14..]) == 3));
    // The same packets bare (a TUN): an IP-level link finds their headers at byte 0,
    // for IPv4 and IPv6 alike; an Ethernet one would see no IP and drop instead.
    for v6 in [false, true] {
        let bare: Vec<_> = (0..5000u64)
            .map(|i| {
                let frame = if v6 {
                    ipv6_frame(i as u16, 1500, 5000, 0b10)
                } else {
                    ipv4_frame(i as u16, 1500, 5000, 0b10)
                };
                (Instant::from_millis(i), frame[14..].to_vec())
            })
            .collect();
        let mut ip = LinkModel::new(codel(), 1).ip_level();
        let out = drive(&mut ip, &bare);
        assert_eq!(ip.stats().dropped_aqm, 0, "v6 {v6}");
        assert!(ip.stats().ce_marked > 0, "v6 {v6}");
        let marked = |f: &[u8]| if v6 { ect(f) == 3 } else { f[1] & 3 == 3 };
        assert!(out.iter().any(|(_, f)| marked(f)), "v6 {v6}");
        let mut ethernet = LinkModel::new(codel(), 1);
        drive(&mut ethernet, &bare);
        assert!(ethernet.stats().dropped_aqm > 0 && ethernet.stats().ce_marked == 0);
    }
}
