//! Behaviour of the queue disciplines under virtual-time load.

extern crate std;

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use std::vec;

use impnet_wire::ipv4;
use proptest::prelude::*;

use super::*;

const ECT0: u8 = 0b10;
const ECT1: u8 = 0b01;
const CE: u8 = 0b11;

/// An IPv4/UDP packet of `len` bytes (at least 28) from 10.0.0.1:`sport` to
/// 10.0.0.2:80, with ident `id`, ECN `ecn`, a valid header checksum.
fn packet(id: u16, len: usize, ecn: u8, sport: u16) -> Vec<u8> {
    let len = len.max(28);
    let mut bytes = vec![0u8; len];
    bytes[0] = 0x45;
    bytes[1] = ecn & 3;
    bytes[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    bytes[4..6].copy_from_slice(&id.to_be_bytes());
    bytes[6] = 0x40;
    bytes[8] = 64;
    bytes[9] = 17;
    bytes[12..16].copy_from_slice(&[10, 0, 0, 1]);
    bytes[16..20].copy_from_slice(&[10, 0, 0, 2]);
    bytes[20..22].copy_from_slice(&sport.to_be_bytes());
    bytes[22..24].copy_from_slice(&80u16.to_be_bytes());
    bytes[24..26].copy_from_slice(&((len - 20) as u16).to_be_bytes());
    for (i, b) in bytes[28..].iter_mut().enumerate() {
        *b = (i as u8) ^ (id as u8);
    }
    ipv4::Packet::new_unchecked(&mut bytes[..]).fill_checksum();
    bytes
}

fn meta(flow_hash: u32) -> PacketMeta {
    PacketMeta {
        flow_hash,
        ip_offset: Some(0),
    }
}

fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

#[test]
fn fifo_drops_beyond_its_byte_limit() {
    let mut q = Qdisc::new(QdiscConfig::Fifo(FifoConfig {
        limit: Limit::Bytes(3000),
    }));
    assert!(q.enqueue(ms(0), packet(1, 1500, 0, 1), meta(0)).is_ok());
    assert!(q.enqueue(ms(0), packet(2, 1500, 0, 1), meta(0)).is_ok());
    let dropped = q.enqueue(ms(0), packet(3, 100, 0, 1), meta(0)).unwrap_err();
    assert_eq!(dropped.reason, DropReason::Overflow);
    assert_eq!(dropped.packet, packet(3, 100, 0, 1));
    assert_eq!((q.len_packets(), q.len_bytes()), (2, 3000));
    assert_eq!(q.dequeue(ms(2)), Some(packet(1, 1500, 0, 1)));
    assert_eq!(q.stats().last_sojourn, Some(Duration::from_millis(2)));
    assert!(q.enqueue(ms(2), packet(4, 1500, 0, 1), meta(0)).is_ok());
    assert_eq!(q.dequeue(ms(3)), Some(packet(2, 1500, 0, 1)));
    assert_eq!(q.dequeue(ms(3)), Some(packet(4, 1500, 0, 1)));
    assert_eq!(q.dequeue(ms(3)), None);
    let s = q.stats();
    assert_eq!((s.enqueued, s.dequeued, s.dropped_overflow), (4, 3, 1));
    assert_eq!((s.max_backlog_bytes, s.backlog_bytes), (3000, 0));
}

#[test]
fn fifo_drops_beyond_its_packet_limit() {
    let mut q = Qdisc::new(QdiscConfig::Fifo(FifoConfig {
        limit: Limit::Packets(2),
    }));
    for id in 0..5 {
        let result = q.enqueue(ms(0), packet(id, 60, 0, 1), meta(0));
        assert_eq!(result.is_ok(), id < 2, "packet {id}");
    }
    assert_eq!(q.len_packets(), 2);
    assert_eq!(q.stats().dropped_overflow, 3);
}

/// A packet source at a constant rate into a server at another constant rate, in
/// virtual time: returns, per dequeued packet, when it left, how long it waited, and the
/// packet.
struct Overload {
    /// Time between arrivals of each source: (flow hash, gap, packet length, ECN).
    sources: Vec<(u32, Duration, usize, u8)>,
    /// Time between dequeues.
    service: Duration,
    duration: Duration,
    /// Source 0 reacts to congestion like a Reno sender with a 100 ms RTT: its window
    /// (packets per RTT) halves after an RTT with a drop or a CE mark, else grows by one.
    responsive: bool,
}

/// The responsive source's round-trip time.
const RTT: Duration = Duration::from_millis(100);

/// Drops and marks so far: what a sender would hear about.
fn signals(q: &Qdisc) -> u64 {
    let s = q.stats();
    s.dropped_codel + s.dropped_overflow + s.ce_marked
}

impl Overload {
    fn run(&self, q: &mut Qdisc) -> Vec<(Instant, Duration, Vec<u8>)> {
        let end = Instant::ZERO + self.duration;
        let mut next_arrival: Vec<Instant> = self.sources.iter().map(|_| Instant::ZERO).collect();
        let mut next_service = Instant::ZERO + self.service;
        let mut out = Vec::new();
        let mut id = 0u16;
        let (mut window, mut last_adjust, mut last_signals) = (10u64, Instant::ZERO, 0);
        loop {
            let (source, &arrival) = next_arrival
                .iter()
                .enumerate()
                .min_by_key(|&(_, t)| *t)
                .unwrap();
            let now = arrival.min(next_service);
            if now >= end {
                return out;
            }
            if arrival <= next_service {
                let (hash, gap, len, ecn) = self.sources[source];
                id = id.wrapping_add(1);
                let sport = 1000 + source as u16;
                let _ = q.enqueue(now, packet(id, len, ecn, sport), meta(hash));
                let gap = if self.responsive && source == 0 {
                    if now >= last_adjust + RTT {
                        let heard = signals(q) > last_signals;
                        window = if heard {
                            (window / 2).max(1)
                        } else {
                            window + 1
                        };
                        (last_adjust, last_signals) = (now, signals(q));
                    }
                    Duration::from_nanos(RTT.as_nanos() / window)
                } else {
                    gap
                };
                next_arrival[source] = arrival + gap;
            } else {
                if let Some(p) = q.dequeue(now) {
                    out.push((now, q.stats().last_sojourn.unwrap(), p));
                }
                next_service = now + self.service;
            }
        }
    }
}

/// 1500-byte packets every 1 ms (12 Mbit/s) into a 10 Mbit/s server (1.2 ms a packet).
fn overload(ecn: u8) -> Overload {
    Overload {
        sources: vec![(0, us(1000), 1500, ecn)],
        service: us(1200),
        duration: Duration::from_secs(30),
        responsive: false,
    }
}

/// Mean sojourn time of the packets dequeued in the last `tail` of the run.
fn mean_sojourn_after(out: &[(Instant, Duration, Vec<u8>)], from: Instant) -> Duration {
    let tail: Vec<_> = out.iter().filter(|(t, ..)| *t >= from).collect();
    assert!(!tail.is_empty());
    let total: u64 = tail.iter().map(|(_, s, _)| s.as_nanos()).sum();
    Duration::from_nanos(total / tail.len() as u64)
}

#[test]
fn codel_keeps_sojourn_near_target_where_fifo_fills() {
    // A Reno-like sender: against a FIFO it fills the queue until tail drops, then
    // halves, so a standing queue of hundreds of milliseconds remains. CoDel signals as
    // soon as the sojourn time has stayed above 5 ms for 100 ms.
    let limit = Limit::Packets(1000);
    let load = Overload {
        responsive: true,
        ..overload(0)
    };
    let mut fifo = Qdisc::new(QdiscConfig::Fifo(FifoConfig { limit }));
    let fifo_out = load.run(&mut fifo);
    let fifo_sojourn = mean_sojourn_after(&fifo_out, ms(10_000));
    assert!(fifo_sojourn > Duration::from_millis(300), "{fifo_sojourn}");
    let mut codel = Qdisc::new(QdiscConfig::Codel(CodelConfig {
        limit,
        ..CodelConfig::default()
    }));
    let codel_out = load.run(&mut codel);
    let codel_sojourn = mean_sojourn_after(&codel_out, ms(10_000));
    assert!(codel_sojourn < Duration::from_millis(20), "{codel_sojourn}");
    assert_eq!(codel.stats().dropped_overflow, 0);
    // The link stays busy: CoDel does not starve it.
    let served = codel_out.iter().filter(|(t, ..)| *t >= ms(10_000)).count();
    // (This sender halves its rate, not its window, so it leaves the link idle for a
    // while after each signal.)
    assert!(served > 16_666 * 6 / 10, "{served} of 16666 slots used");
}

#[test]
fn codel_bounds_an_unresponsive_overload() {
    // 20% more than the link carries, from a sender that never slows down: the FIFO
    // stays full (1.2 s of delay); CoDel drops the excess with a sojourn time of at
    // most about an interval, oscillating as its drop rate is reset (RFC 8289 §5.5).
    let limit = Limit::Packets(1000);
    let mut fifo = Qdisc::new(QdiscConfig::Fifo(FifoConfig { limit }));
    let fifo_out = overload(0).run(&mut fifo);
    let fifo_sojourn = mean_sojourn_after(&fifo_out, ms(20_000));
    assert!(fifo_sojourn > Duration::from_millis(1100), "{fifo_sojourn}");
    assert!(fifo.stats().dropped_overflow > 0);

    let mut codel = Qdisc::new(QdiscConfig::Codel(CodelConfig {
        limit,
        ..CodelConfig::default()
    }));
    let codel_out = overload(0).run(&mut codel);
    let late = codel_out.iter().filter(|(t, ..)| *t >= ms(10_000));
    let worst = late.map(|(_, s, _)| *s).max().unwrap();
    assert!(worst < Duration::from_millis(150), "{worst}");
    let s = codel.stats();
    assert!(s.dropped_codel > 0);
    assert_eq!((s.dropped_overflow, s.ce_marked), (0, 0));
    // CoDel drops what the link cannot carry, no more: the link stays busy.
    assert!(codel_out.len() > 24_000, "{}", codel_out.len());
}

#[test]
fn codel_marks_ect_packets_instead_of_dropping() {
    for ecn in [ECT0, ECT1] {
        let mut codel = Qdisc::new(QdiscConfig::Codel(CodelConfig::default()));
        let out = overload(ecn).run(&mut codel);
        let s = *codel.stats();
        assert_eq!(s.dropped_codel, 0);
        assert!(s.ce_marked > 0);
        let mut marked = 0;
        for (_, _, p) in &out {
            let ip = ipv4::Packet::new_checked(&p[..]).unwrap();
            assert!(ip.verify_checksum(), "checksum broken by marking");
            assert!(ip.ecn() == ecn || ip.ecn() == CE);
            marked += usize::from(ip.ecn() == CE);
        }
        assert!(marked > 0 && marked as u64 <= s.ce_marked);
    }
    // With ECN off, the same packets are dropped.
    let mut codel = Qdisc::new(QdiscConfig::Codel(CodelConfig {
        ecn: false,
        ..CodelConfig::default()
    }));
    overload(ECT0).run(&mut codel);
    assert!(codel.stats().dropped_codel > 0);
    assert_eq!(codel.stats().ce_marked, 0);
}

#[test]
fn codel_does_not_drop_while_under_target_or_with_one_mtu_queued() {
    let mut codel = Qdisc::new(QdiscConfig::Codel(CodelConfig::default()));
    // One packet waiting for a long time, dequeued every 300 ms: each is alone, so at
    // most one MTU is ever queued and none may be dropped.
    for i in 0..20 {
        codel
            .enqueue(ms(i * 300), packet(i as u16, 1500, 0, 1), meta(0))
            .unwrap();
        assert!(codel.dequeue(ms(i * 300 + 290)).is_some());
    }
    assert_eq!(codel.stats().dropped_codel, 0);
}

/// Ping (hash `PING`) every 100 ms among a bulk flow (hash `BULK`) that overloads the
/// link; returns how many pings went through after the first second and the longest
/// sojourn among them.
fn ping_among_bulk(q: &mut Qdisc) -> (usize, Duration) {
    const BULK: u32 = 0x1000_0000;
    const PING: u32 = 0x9000_0000;
    let load = Overload {
        sources: vec![(BULK, us(1000), 1500, 0), (PING, us(100_000), 64, 0)],
        service: us(1200),
        duration: Duration::from_secs(10),
        responsive: false,
    };
    let out = load.run(q);
    // From 1 s on: at the start both flows are new and the bulk flow, first in line,
    // sends its quantum before the first ping.
    let pings: Vec<_> = out
        .iter()
        .filter(|(t, _, p)| p.len() == 64 && *t >= ms(1000))
        .collect();
    let worst = pings
        .iter()
        .map(|(_, s, _)| *s)
        .max()
        .unwrap_or(Duration::MAX);
    (pings.len(), worst)
}

#[test]
fn fq_codel_isolates_a_sparse_flow() {
    let mut fq = Qdisc::new(QdiscConfig::FqCodel(FqCodelConfig::default()));
    let (fq_pings, fq_ping) = ping_among_bulk(&mut fq);
    // Every ping gets through, and waits at most for the next service slot: its queue
    // is on the new list, served first.
    assert_eq!(fq_pings, 90);
    assert!(fq_ping <= us(1200), "{fq_ping}");
    // Behind a FIFO, pings are tail-dropped or wait behind the whole backlog.
    let mut fifo = Qdisc::new(QdiscConfig::Fifo(FifoConfig::default()));
    let (fifo_pings, fifo_ping) = ping_among_bulk(&mut fifo);
    assert!(fifo_pings < 90);
    assert!(fifo_ping > Duration::from_millis(500), "{fifo_ping}");
    // The bulk flow's own queue is kept short by its CoDel.
    assert!(fq.stats().dropped_codel > 0);
}

#[test]
fn fq_codel_overflow_drops_from_the_fattest_flow() {
    const A: u32 = 0x1000_0000;
    const B: u32 = 0x9000_0000;
    let mut q = Qdisc::new(QdiscConfig::FqCodel(FqCodelConfig {
        limit: Limit::Packets(10),
        ..FqCodelConfig::default()
    }));
    for id in 0..8 {
        q.enqueue(ms(0), packet(id, 1000, 0, 1), meta(A)).unwrap();
    }
    for id in 100..103 {
        q.enqueue(ms(0), packet(id, 1000, 0, 2), meta(B)).unwrap();
    }
    // 11 packets for a limit of 10: A's head (id 0) went.
    assert_eq!(q.len_packets(), 10);
    assert_eq!(q.stats().dropped_overflow, 1);
    let mut ids = Vec::new();
    while let Some(p) = q.dequeue(ms(1)) {
        ids.push(u16::from_be_bytes([p[4], p[5]]));
    }
    ids.sort_unstable();
    assert_eq!(ids, [1, 2, 3, 4, 5, 6, 7, 100, 101, 102]);

    // A packet alone in the fattest flow is the one dropped, and given back.
    let mut q = Qdisc::new(QdiscConfig::FqCodel(FqCodelConfig {
        limit: Limit::Bytes(1000),
        ..FqCodelConfig::default()
    }));
    q.enqueue(ms(0), packet(1, 400, 0, 1), meta(A)).unwrap();
    let dropped = q
        .enqueue(ms(0), packet(2, 1500, 0, 2), meta(B))
        .unwrap_err();
    assert_eq!(dropped.packet, packet(2, 1500, 0, 2));
    assert_eq!((q.len_packets(), q.len_bytes()), (1, 400));
}

#[test]
fn fq_codel_serves_flows_by_quantum() {
    const A: u32 = 0x1000_0000;
    const B: u32 = 0x9000_0000;
    let mut q = Qdisc::new(QdiscConfig::FqCodel(FqCodelConfig::default()));
    for id in 0..6 {
        q.enqueue(ms(0), packet(id, 1500, 0, 1), meta(A)).unwrap();
        q.enqueue(ms(0), packet(100 + id, 500, 0, 2), meta(B))
            .unwrap();
    }
    let mut order = Vec::new();
    while let Some(p) = q.dequeue(ms(0)) {
        order.push(if p.len() == 1500 { 'A' } else { 'B' });
    }
    let order: alloc::string::String = order.into_iter().collect();
    // Deficit round robin with quantum 1514, a flow sending while its deficit is
    // positive: A (new) sends 1500 (deficit 14) and 1500 (-1486); B (new) sends 4 x 500
    // (-486); then on the old list A gets 1514 (28) and sends one, B gets 1514 (1028)
    // and sends 2 (its last), and A the rest.
    assert_eq!(order, "AABBBBABBAAA");
}

#[test]
fn flow_hash_follows_the_five_tuple_and_key() {
    let a = PacketMeta::ipv4(&packet(1, 100, 0, 1000), 7);
    let same = PacketMeta::ipv4(&packet(2, 300, ECT0, 1000), 7);
    let other_port = PacketMeta::ipv4(&packet(1, 100, 0, 1001), 7);
    let other_key = PacketMeta::ipv4(&packet(1, 100, 0, 1000), 8);
    assert_eq!(a.ip_offset, Some(0));
    assert_eq!(a.flow_hash, same.flow_hash);
    assert_ne!(a.flow_hash, other_port.flow_hash);
    assert_ne!(a.flow_hash, other_key.flow_hash);
    // In an Ethernet frame, the header is at 14; a non-IPv4 frame is opaque.
    let mut frame = vec![0u8; 14];
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    frame.extend_from_slice(&packet(1, 100, 0, 1000));
    let eth = PacketMeta::ethernet(&frame, 7);
    assert_eq!((eth.flow_hash, eth.ip_offset), (a.flow_hash, Some(14)));
    frame[12] = 0x86;
    assert_eq!(PacketMeta::ethernet(&frame, 7), PacketMeta::opaque(0));
    assert_eq!(PacketMeta::ethernet(&[], 7), PacketMeta::opaque(0));
    assert_eq!(PacketMeta::ipv4(&[0x45, 0, 0], 7), PacketMeta::opaque(0));
}

#[test]
fn marking_rewrites_ecn_and_keeps_the_checksum_valid() {
    let mut frame = vec![0u8; 14];
    frame.extend_from_slice(&packet(9, 80, ECT0, 5));
    assert!(mark_ce(&mut frame, 14));
    let ip = ipv4::Packet::new_checked(&frame[14..]).unwrap();
    assert_eq!(ip.ecn(), CE);
    assert!(ip.verify_checksum());
    let mut not_ect = packet(9, 80, 0, 5);
    assert!(!mark_ce(&mut not_ect, 0));
    assert_eq!(not_ect, packet(9, 80, 0, 5));
    assert!(!mark_ce(&mut not_ect, 70));
    assert!(!mark_ce(&mut not_ect, 1000));
    assert!(!mark_ce(&mut [], 0));
}

#[test]
fn names_parse() {
    for name in ["fifo", "codel", "fq_codel"] {
        let config: QdiscConfig = name.parse().unwrap();
        assert_eq!(config.to_string(), name);
    }
    let e = "red".parse::<QdiscConfig>().unwrap_err();
    assert!(e.to_string().contains("`red`"));
    let c = QdiscConfig::Codel(CodelConfig::default())
        .with_target(Duration::from_millis(2))
        .with_interval(Duration::from_millis(50));
    let QdiscConfig::Codel(c) = c else { panic!() };
    assert_eq!((c.target.as_millis(), c.interval.as_millis()), (2, 50));
}

/// One step of a random workload.
#[derive(Debug, Clone)]
enum Op {
    Enqueue { len: usize, flow: u8, ecn: u8 },
    Dequeue,
    Wait(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (28usize..1600, 0u8..4, 0u8..4).prop_map(|(len, flow, ecn)| Op::Enqueue { len, flow, ecn }),
        3 => Just(Op::Dequeue),
        2 => (0u64..40_000_000).prop_map(Op::Wait),
    ]
}

fn config() -> impl Strategy<Value = QdiscConfig> {
    let limit = prop_oneof![
        (1usize..40).prop_map(Limit::Packets),
        (100usize..20_000).prop_map(Limit::Bytes)
    ];
    (0u8..3, limit, 1u64..20, 1usize..8).prop_map(|(kind, limit, target, flows)| {
        let target = Duration::from_millis(target);
        match kind {
            0 => QdiscConfig::Fifo(FifoConfig { limit }),
            1 => QdiscConfig::Codel(CodelConfig {
                limit,
                target,
                ..CodelConfig::default()
            }),
            _ => QdiscConfig::FqCodel(FqCodelConfig {
                limit,
                target,
                flows,
                quantum: 300,
                ..FqCodelConfig::default()
            }),
        }
    })
}

proptest! {
    /// Bytes offered = bytes dequeued + bytes dropped + bytes waiting, at every step; no
    /// packet comes out changed except for CE in its ECN bits (with a valid checksum);
    /// none comes out twice or out of nowhere.
    #[test]
    fn conservation_and_integrity(config in config(), ops in proptest::collection::vec(op(), 0..300)) {
        let mut q = Qdisc::new(config);
        let mut now = Instant::ZERO;
        let mut originals = BTreeMap::new();
        let mut id = 0u16;
        for op in ops {
            match op {
                Op::Enqueue { len, flow, ecn } => {
                    id += 1;
                    let p = packet(id, len, ecn, u16::from(flow));
                    originals.insert(id, p.clone());
                    let hash = u32::from(flow).wrapping_mul(0x4000_0001);
                    if let Err(d) = q.enqueue(now, p, meta(hash)) {
                        prop_assert_eq!(&d.packet, &originals[&id]);
                    }
                }
                Op::Dequeue => {
                    if let Some(p) = q.dequeue(now) {
                        let got = u16::from_be_bytes([p[4], p[5]]);
                        let original = originals.remove(&got);
                        prop_assert!(original.is_some(), "packet {} twice or unknown", got);
                        let original = original.unwrap();
                        let ip = ipv4::Packet::new_checked(&p[..]).unwrap();
                        prop_assert!(ip.verify_checksum());
                        let was = original[1] & 3;
                        prop_assert!(p[1] & 3 == was || (was != 0 && p[1] & 3 == CE));
                        let mask = |b: &[u8]| {
                            let mut b = b.to_vec();
                            b[1] &= !3;
                            b[10] = 0;
                            b[11] = 0;
                            b
                        };
                        prop_assert_eq!(mask(&p), mask(&original));
                    }
                }
                Op::Wait(nanos) => now += Duration::from_nanos(nanos),
            }
            let s = q.stats();
            prop_assert_eq!(
                s.enqueued_bytes,
                s.dequeued_bytes + s.dropped_overflow_bytes + s.dropped_codel_bytes
                    + s.backlog_bytes as u64
            );
            prop_assert_eq!(
                s.enqueued,
                s.dequeued + s.dropped_overflow + s.dropped_codel + s.backlog_packets as u64
            );
            prop_assert!(!config_limit(&config).exceeded(s.backlog_packets, s.backlog_bytes)
                || s.backlog_packets == 0);
        }
    }
}

fn config_limit(config: &QdiscConfig) -> Limit {
    match config {
        QdiscConfig::Fifo(c) => c.limit,
        QdiscConfig::Codel(c) => c.limit,
        QdiscConfig::FqCodel(c) => c.limit,
    }
}

/// An IPv6/UDP packet of `len` bytes (at least 48) from fd00:1::`src`:`sport` to
/// fd00:2::1:80, ECN `ecn`.
fn packet6(src: u16, len: usize, ecn: u8, sport: u16) -> Vec<u8> {
    let len = len.max(48);
    let mut bytes = vec![0u8; len];
    bytes[0] = 0x60 | (ecn & 3) >> 2;
    bytes[1] = (ecn & 3) << 4;
    bytes[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
    bytes[6] = 17;
    bytes[7] = 64;
    bytes[8..10].copy_from_slice(&0xfd00u16.to_be_bytes());
    bytes[10..12].copy_from_slice(&1u16.to_be_bytes());
    bytes[22..24].copy_from_slice(&src.to_be_bytes());
    bytes[24..26].copy_from_slice(&0xfd00u16.to_be_bytes());
    bytes[26..28].copy_from_slice(&2u16.to_be_bytes());
    bytes[39] = 1;
    bytes[40..42].copy_from_slice(&sport.to_be_bytes());
    bytes[42..44].copy_from_slice(&80u16.to_be_bytes());
    bytes
}

#[test]
fn ipv6_packets_hash_by_their_five_tuple_on_ethernet_and_bare() {
    let a = PacketMeta::ip(&packet6(1, 100, 0, 1000), 7);
    assert_eq!(a.ip_offset, Some(0));
    assert_eq!(a, PacketMeta::ip(&packet6(1, 900, ECT0, 1000), 7));
    assert_ne!(
        a.flow_hash,
        PacketMeta::ip(&packet6(1, 100, 0, 1001), 7).flow_hash
    );
    assert_ne!(
        a.flow_hash,
        PacketMeta::ip(&packet6(2, 100, 0, 1000), 7).flow_hash
    );
    assert_ne!(
        a.flow_hash,
        PacketMeta::ip(&packet6(1, 100, 0, 1000), 8).flow_hash
    );
    // An IPv4 packet and an IPv6 one are told apart by their version on a bare link.
    assert_eq!(
        PacketMeta::ip(&packet(1, 100, 0, 1000), 7).ip_offset,
        Some(0)
    );
    let mut frame = vec![0u8; 14];
    frame[12..14].copy_from_slice(&[0x86, 0xdd]);
    frame.extend_from_slice(&packet6(1, 100, 0, 1000));
    let eth = PacketMeta::ethernet(&frame, 7);
    assert_eq!((eth.flow_hash, eth.ip_offset), (a.flow_hash, Some(14)));
    // EtherType IPv6 over bytes that are not IPv6: opaque.
    frame[14] = 0x45;
    assert_eq!(PacketMeta::ethernet(&frame, 7), PacketMeta::opaque(0));
    assert_eq!(PacketMeta::ip(&[0x60, 0, 0], 7), PacketMeta::opaque(0));
}

#[test]
fn ipv6_marking_sets_ce_in_the_traffic_class() {
    let mut frame = vec![0u8; 14];
    frame.extend_from_slice(&packet6(1, 200, ECT1, 5));
    assert!(mark_ce(&mut frame, 14));
    let ip = impnet_wire::ipv6::Packet::new_checked(&frame[14..]).unwrap();
    assert_eq!((ip.ecn(), ip.dscp(), ip.version()), (CE, 0, 6));
    assert_eq!(
        frame[14 + 8..],
        packet6(1, 200, ECT1, 5)[8..],
        "only the ECN bits change"
    );
    let mut not_ect = packet6(1, 200, 0, 5);
    assert!(!mark_ce(&mut not_ect, 0));
    assert_eq!(not_ect, packet6(1, 200, 0, 5));
}

#[test]
fn codel_marks_ipv6_ect_packets_and_fq_codel_separates_ipv6_flows() {
    // 1500-byte ECT(0) IPv6 packets every 1 ms into a 1.2 ms server: CoDel marks.
    let mut q = Qdisc::new(QdiscConfig::Codel(CodelConfig::default()));
    let (mut next_service, mut marked) = (Instant::ZERO + us(1200), 0);
    for i in 0..20_000u64 {
        let now = Instant::ZERO + us(1000 * i);
        let p = packet6(1, 1500, ECT0, 1000);
        let meta = PacketMeta::ip(&p, 3);
        let _ = q.enqueue(now, p, meta);
        while next_service <= now {
            if let Some(out) = q.dequeue(next_service) {
                let ip = impnet_wire::ipv6::Packet::new_checked(&out[..]).unwrap();
                marked += u64::from(ip.ecn() == CE);
            }
            next_service += us(1200);
        }
    }
    let s = q.stats();
    assert!(s.ce_marked > 100 && s.ce_marked == marked, "{s:?}");
    assert_eq!(s.dropped_codel, 0, "{s:?}");
    // FQ-CoDel: a sparse IPv6 flow beside a bulk one waits less than the bulk.
    let mut fq = Qdisc::new(QdiscConfig::FqCodel(FqCodelConfig::default()));
    let mut sojourn = [0u64; 2];
    let mut served = [0u32; 2];
    for i in 0..2000u64 {
        let now = Instant::ZERO + us(1000 * i);
        let bulk = packet6(1, 1500, 0, 1000);
        let meta = PacketMeta::ip(&bulk, 3);
        let _ = fq.enqueue(now, bulk, meta);
        if i % 50 == 0 {
            let ping = packet6(2, 100, 0, 7);
            let meta = PacketMeta::ip(&ping, 3);
            let _ = fq.enqueue(now, ping, meta);
        }
        if i % 6 < 5
            && let Some(out) = fq.dequeue(now)
        {
            let flow = usize::from(out.len() < 200);
            sojourn[flow] += fq.stats().last_sojourn.unwrap().as_nanos();
            served[flow] += 1;
        }
    }
    assert!(served[0] > 100 && served[1] > 10, "{served:?}");
    let mean = |f: usize| sojourn[f] / u64::from(served[f]);
    assert!(
        mean(1) * 10 < mean(0),
        "ping {} ns, bulk {} ns",
        mean(1),
        mean(0)
    );
}
