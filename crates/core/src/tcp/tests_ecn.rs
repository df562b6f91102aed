//! ECN (RFC 3168) between two `Tcp`s back to back: negotiation and its fallbacks, the
//! IP ECN field of every segment, the receiver's echo until CWR, and the sender's one
//! reduction per window. The wire carries each segment's ECN codepoint and a test's
//! marker sets Congestion Experienced on chosen ECN-capable segments, as a router's
//! AQM would.

use alloc::vec;
use alloc::vec::Vec;
use core::net::{Ipv4Addr, SocketAddrV4};

use impnet_wire::tcp::{Flags, Options, Packet, Repr};

use super::*;
use crate::testutil::secret;
use crate::time::{Duration, Instant};

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const ONE_WAY: Duration = Duration::from_millis(5);

/// One segment as it went over the wire.
#[derive(Debug, Clone, Copy)]
struct Seen {
    /// From A to B.
    to_b: bool,
    /// When it left.
    sent: Instant,
    flags: Flags,
    seq: u32,
    len: usize,
    /// The codepoint its sender chose.
    ecn: Ecn,
    /// The marker set CE on it.
    marked: bool,
    /// The marker (or the test's loss) dropped it.
    dropped: bool,
}

/// What the wire does to A's segments: CE marks and drops, by the index of the
/// segment among A's ECN-capable ones (`mark`) and among all of A's (`drop`).
struct Wire<'a> {
    mark: &'a mut dyn FnMut(u64) -> bool,
    drop: &'a mut dyn FnMut(u64) -> bool,
    ect_seen: u64,
    a_seen: u64,
}

/// A segment on its way, due at `at`.
struct InFlight {
    at: Instant,
    to_b: bool,
    src: core::net::IpAddr,
    dst: core::net::IpAddr,
    ecn: Ecn,
    bytes: Vec<u8>,
}

struct Pair {
    a: Tcp,
    b: Tcp,
    now: Instant,
    wire: Vec<InFlight>,
    log: Vec<Seen>,
    /// For each entry of `log` delivered so far, when (same index).
    delivered: Vec<Option<Instant>>,
    /// Serialization time of one of A's segments (zero: an infinitely fast link).
    gap: Duration,
    /// When A's link is free again.
    link_free: Instant,
}

impl Pair {
    fn new(a: TcpConfig, b: TcpConfig) -> Pair {
        Pair {
            a: Tcp::new(a, &secret(1)),
            b: Tcp::new(b, &secret(2)),
            now: Instant::ZERO,
            wire: Vec::new(),
            log: Vec::new(),
            delivered: Vec::new(),
            gap: Duration::ZERO,
            link_free: Instant::ZERO,
        }
    }

    fn transmit(&mut self, w: &mut Wire<'_>) {
        let mut buf = vec![0u8; 1500];
        for to_b in [true, false] {
            loop {
                let tcp = if to_b { &mut self.a } else { &mut self.b };
                let Some(tx) = tcp.poll_transmit(self.now, &mut buf) else {
                    break;
                };
                let bytes = buf[..tx.len].to_vec();
                let repr = parse(&bytes, tx.src, tx.dst);
                let mut seen = Seen {
                    to_b,
                    sent: self.now,
                    flags: repr.flags,
                    seq: repr.seq,
                    len: repr.payload.len(),
                    ecn: tx.ecn,
                    marked: false,
                    dropped: false,
                };
                let mut ecn = tx.ecn;
                if to_b {
                    seen.dropped = (w.drop)(w.a_seen);
                    w.a_seen += 1;
                    if tx.ecn == Ecn::Ect0 {
                        seen.marked = (w.mark)(w.ect_seen);
                        w.ect_seen += 1;
                    }
                }
                if seen.marked {
                    ecn = Ecn::Ce;
                }
                self.log.push(seen);
                self.delivered.push(None);
                let mut depart = self.now;
                if to_b {
                    depart = depart.max(self.link_free) + self.gap;
                    self.link_free = depart;
                }
                if !seen.dropped {
                    self.wire.push(InFlight {
                        at: depart + ONE_WAY,
                        to_b,
                        src: tx.src,
                        dst: tx.dst,
                        ecn,
                        bytes,
                    });
                }
            }
        }
    }

    /// Advance to the next delivery or timer; false when nothing is left.
    fn step(&mut self, w: &mut Wire<'_>) -> bool {
        self.step_until(w, Instant::from_millis(1 << 40))
    }

    /// As `step`, but not past `limit`.
    fn step_until(&mut self, w: &mut Wire<'_>, limit: Instant) -> bool {
        self.transmit(w);
        let next_wire = self.wire.iter().map(|s| s.at).min();
        let next = [next_wire, self.a.poll_timeout(), self.b.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let Some(next) = next else { return false };
        self.now = self.now.max(next.min(limit));
        let (due, rest): (Vec<_>, Vec<_>) = self.wire.drain(..).partition(|s| s.at <= self.now);
        self.wire = rest;
        for seg in due {
            let repr = parse(&seg.bytes, seg.src, seg.dst);
            if let Some(i) = self.log.iter().rposition(|s| {
                s.to_b == seg.to_b && s.seq == repr.seq && s.flags == repr.flags && !s.dropped
            }) {
                self.delivered[i].get_or_insert(self.now);
            }
            let tcp = if seg.to_b { &mut self.b } else { &mut self.a };
            tcp.handle_segment_with_ecn(self.now, (seg.src, seg.dst), &repr, 1460, seg.ecn);
        }
        self.a.handle_timeout(self.now);
        self.b.handle_timeout(self.now);
        true
    }
}

fn parse(
    bytes: &[u8],
    src: impl Into<core::net::IpAddr>,
    dst: impl Into<core::net::IpAddr>,
) -> Repr<'_> {
    let packet = Packet::new_checked(bytes).unwrap();
    let (src, dst): (core::net::IpAddr, core::net::IpAddr) = (src.into(), dst.into());
    Repr::parse(&packet, &src, &dst, true).expect("we emit valid segments")
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 29 + i / 251) as u8).collect()
}

/// What a transfer left: the pair, A's connection info once established, and B's.
struct Run {
    p: Pair,
    a_info: TcpInfo,
    b_info: TcpInfo,
    /// The lowest ssthresh A's connection had.
    a_min_ssthresh: u32,
}

/// Send `data` from A to B through `w`, check it arrived byte for byte, close both.
fn transfer(a: TcpConfig, b: TcpConfig, data: &[u8], w: &mut Wire<'_>) -> Run {
    transfer_at(a, b, data, w, Duration::ZERO)
}

/// As `transfer`, over a link from A that takes `gap` per segment.
fn transfer_at(a: TcpConfig, b: TcpConfig, data: &[u8], w: &mut Wire<'_>, gap: Duration) -> Run {
    let mut p = Pair::new(a, b);
    p.gap = gap;
    let listener = p.b.listen(SocketAddrV4::new(B, 80), 8).unwrap();
    let remote = SocketAddrV4::new(B, 80);
    let client =
        p.a.connect(p.now, SocketAddrV4::new(A, 0), remote, 1460)
            .unwrap();
    let (mut server, mut written, mut closed) = (None, 0, false);
    let (mut a_info, mut b_info) = (None, None);
    let mut a_min_ssthresh = u32::MAX;
    let mut received = Vec::new();
    let mut buf = vec![0u8; 65536];
    for _ in 0..1_000_000 {
        if a_info.is_none() {
            a_info = p.a.info(client).filter(|i| {
                !matches!(
                    i.state,
                    TcpState::SynSent | TcpState::SynReceived | TcpState::Closed
                )
            });
        }
        if let Some(info) = p.a.info(client).filter(|i| i.ssthresh > 0) {
            a_min_ssthresh = a_min_ssthresh.min(info.ssthresh);
        }
        if written < data.len() {
            written += p.a.send(p.now, client, &data[written..]).unwrap_or(0);
        } else if !closed {
            p.a.close(p.now, client).unwrap();
            closed = true;
        }
        if server.is_none() {
            server = p.b.accept(listener).ok();
        }
        if let Some(s) = server {
            b_info = b_info.or(p.b.info(s));
            match p.b.recv(p.now, s, &mut buf) {
                Ok(0) => {
                    p.b.close(p.now, s).unwrap();
                    break;
                }
                Ok(n) => received.extend_from_slice(&buf[..n]),
                Err(TcpError::WouldBlock) => {}
                Err(e) => panic!("recv failed: {e:?}"),
            }
        }
        if !p.step(w) {
            break;
        }
    }
    assert!(
        received == data,
        "{} of {} bytes, or different",
        received.len(),
        data.len()
    );
    p.b.close(p.now, listener).unwrap();
    while p.step(w) {}
    Run {
        p,
        a_info: a_info.expect("A established"),
        b_info: b_info.expect("B accepted"),
        a_min_ssthresh,
    }
}

fn clean<'a>(
    mark: &'a mut dyn FnMut(u64) -> bool,
    drop: &'a mut dyn FnMut(u64) -> bool,
) -> Wire<'a> {
    Wire {
        mark,
        drop,
        ect_seen: 0,
        a_seen: 0,
    }
}

fn config(ecn: EcnMode) -> TcpConfig {
    TcpConfig {
        ecn,
        ..TcpConfig::default()
    }
}

/// The SYN and the SYN-ACK of a run's log.
fn handshake(log: &[Seen]) -> (Seen, Seen) {
    let syn = log
        .iter()
        .find(|s| s.to_b && s.flags.syn())
        .copied()
        .unwrap();
    let synack = log
        .iter()
        .find(|s| !s.to_b && s.flags.syn())
        .copied()
        .unwrap();
    (syn, synack)
}

const ECE_CWR: Flags = Flags(Flags::ECE.0 | Flags::CWR.0);

#[test]
fn ecn_is_negotiated_when_one_side_asks_and_the_other_accepts() {
    let data = pattern(100_000);
    for (a, b, agreed) in [
        (EcnMode::Request, EcnMode::Request, true),
        (EcnMode::Request, EcnMode::Accept, true),
        (EcnMode::Request, EcnMode::Off, false),
        (EcnMode::Accept, EcnMode::Request, false),
        (EcnMode::Off, EcnMode::Request, false),
    ] {
        let run = transfer(
            config(a),
            config(b),
            &data,
            &mut clean(&mut |_| false, &mut |_| false),
        );
        let (syn, synack) = handshake(&run.p.log);
        // RFC 3168 §6.1.1: the ECN-setup SYN has ECE and CWR, the SYN-ACK ECE only.
        let asks = a == EcnMode::Request;
        assert_eq!(
            syn.flags.0 & ECE_CWR.0,
            if asks { ECE_CWR.0 } else { 0 },
            "{a:?} {b:?}"
        );
        assert_eq!(
            synack.flags.0 & ECE_CWR.0,
            if agreed { Flags::ECE.0 } else { 0 },
            "{a:?} {b:?}"
        );
        assert_eq!(
            (run.a_info.ecn, run.b_info.ecn),
            (agreed, agreed),
            "{a:?} {b:?}"
        );
        let ect = run.p.log.iter().filter(|s| s.ecn != Ecn::NotEct).count();
        assert_eq!(ect > 0, agreed, "{a:?} {b:?}");
    }
}

#[test]
fn ect_goes_on_new_data_only() {
    // Drop a few of A's segments (fast retransmits), then a whole flight (a timeout,
    // and go-back-N resends from SND.UNA as the window allows).
    let data = pattern(600_000);
    let mut drop = |i: u64| i == 15 || (100..130).contains(&i);
    let run = transfer(
        config(EcnMode::Request),
        config(EcnMode::Request),
        &data,
        &mut clean(&mut |_| false, &mut drop),
    );
    let stats = run.p.a.stats();
    assert!(
        stats.fast_retransmits > 0 && stats.timeouts > 0,
        "{stats:?}"
    );
    let mut highest = 0u32;
    let mut new_data = 0;
    for s in &run.p.log {
        let fresh = s.to_b && s.len > 0 && s.seq.wrapping_sub(highest) as i32 >= 0;
        let retransmission = s.to_b && s.len > 0 && !fresh;
        if fresh || highest == 0 && s.to_b && s.flags.syn() {
            highest = s.seq.wrapping_add(s.len as u32);
        }
        if fresh {
            new_data += 1;
            assert_eq!(s.ecn, Ecn::Ect0, "{s:?}");
        } else {
            // SYNs, pure ACKs (both ways), FINs without data, retransmissions
            // (RFC 3168 §6.1.5): Not-ECT.
            assert_eq!(s.ecn, Ecn::NotEct, "{s:?} retransmission {retransmission}");
        }
    }
    assert!(new_data > 100);
}

#[test]
fn a_syn_sent_again_after_a_timeout_gives_ecn_up() {
    // The first SYN is lost: RFC 3168 §6.1.1.1, the second goes without ECE and CWR and
    // the connection does without ECN, though the peer would have agreed.
    let data = pattern(50_000);
    let mut drop = |i: u64| i == 0;
    let run = transfer(
        config(EcnMode::Request),
        config(EcnMode::Request),
        &data,
        &mut clean(&mut |_| false, &mut drop),
    );
    let syns: Vec<_> = run
        .p
        .log
        .iter()
        .filter(|s| s.to_b && s.flags.syn())
        .collect();
    assert_eq!(syns.len(), 2);
    assert_eq!(syns[0].flags.0 & ECE_CWR.0, ECE_CWR.0);
    assert_eq!(syns[1].flags.0 & ECE_CWR.0, 0);
    let (_, synack) = handshake(&run.p.log);
    assert_eq!(synack.flags.0 & ECE_CWR.0, 0);
    assert!(!run.a_info.ecn && !run.b_info.ecn);
    assert!(run.p.log.iter().all(|s| s.ecn == Ecn::NotEct));
}

/// A listener's answer to a SYN, segment by segment.
fn answer_to(tcp: &mut Tcp, now: Instant, syn: &Repr<'_>) -> Repr<'static> {
    tcp.handle_segment(now, A, B, syn);
    let mut buf = vec![0u8; 1500];
    let tx = tcp.poll_transmit(now, &mut buf).expect("a SYN-ACK");
    assert_eq!(tx.ecn, Ecn::NotEct, "a SYN-ACK is not ECN-capable");
    let repr = parse(&buf[..tx.len], B, A);
    Repr {
        payload: &[],
        options: Options::default(),
        ..repr
    }
}

#[test]
fn a_listener_agrees_to_an_ecn_setup_syn_and_follows_a_peer_that_gives_up() {
    let mut tcp = Tcp::new(config(EcnMode::Accept), &secret(3));
    tcp.listen(SocketAddrV4::new(B, 80), 4).unwrap();
    let syn = Repr {
        src_port: 40000,
        dst_port: 80,
        seq: 1000,
        flags: Flags::SYN | Flags::ECE | Flags::CWR,
        window: 65535,
        ..Repr::default()
    };
    let synack = answer_to(&mut tcp, Instant::ZERO, &syn);
    assert_eq!(synack.flags, Flags::SYN | Flags::ACK | Flags::ECE);
    // The peer's SYN again, without ECN (its fallback): the SYN-ACK drops ECE too.
    let plain = Repr {
        flags: Flags::SYN,
        ..syn
    };
    let again = answer_to(&mut tcp, Instant::from_millis(1000), &plain);
    assert_eq!(again.flags, Flags::SYN | Flags::ACK);
    // Only ECE on a SYN is no ECN-setup SYN.
    let mut tcp = Tcp::new(config(EcnMode::Request), &secret(4));
    tcp.listen(SocketAddrV4::new(B, 80), 4).unwrap();
    let half = Repr {
        flags: Flags::SYN | Flags::ECE,
        ..syn
    };
    assert_eq!(
        answer_to(&mut tcp, Instant::ZERO, &half).flags,
        Flags::SYN | Flags::ACK
    );
}

#[test]
fn a_ce_mark_is_echoed_on_every_ack_until_cwr() {
    let data = pattern(400_000);
    // CE on A's 30th ECN-capable segment only.
    let mut mark = |i: u64| i == 30;
    let run = transfer(
        config(EcnMode::Request),
        config(EcnMode::Request),
        &data,
        &mut clean(&mut mark, &mut |_| false),
    );
    let log = &run.p.log;
    let marked = log.iter().position(|s| s.marked).unwrap();
    let ce_at = run.p.delivered[marked].unwrap();
    // The CWR that answers it: A's first segment with CWR.
    let cwr = log
        .iter()
        .position(|s| s.flags.contains(Flags::CWR) && !s.flags.syn())
        .unwrap();
    assert!(cwr > marked);
    assert!(
        log[cwr].len > 0 && log[cwr].ecn == Ecn::Ect0,
        "CWR rides on new data"
    );
    let cwr_at = run.p.delivered[cwr].unwrap();
    let acks: Vec<_> = log.iter().filter(|s| !s.to_b && !s.flags.syn()).collect();
    for s in &acks {
        let echoing = s.sent >= ce_at && s.sent < cwr_at;
        assert_eq!(
            s.flags.contains(Flags::ECE),
            echoing,
            "{s:?}, CE in at {ce_at:?}, CWR in at {cwr_at:?}"
        );
    }
    // The mark is acknowledged at once, not after the delayed-ACK timer.
    assert!(
        acks.iter()
            .any(|s| s.sent == ce_at && s.flags.contains(Flags::ECE))
    );
    let (a, b) = (run.p.a.stats(), run.p.b.stats());
    assert_eq!(b.ecn_ce_received, 1);
    assert!(b.ecn_ece_sent >= 1);
    assert_eq!(a.ecn_cwr_sent, 1);
    assert_eq!(a.ecn_cuts, 1);
    assert_eq!(a.retransmitted, 0);
}

#[test]
fn the_window_is_cut_once_per_window_of_data() {
    let data = pattern(2_000_000);
    // Marks on ten segments in a row (one window), then on one much later: two cuts.
    let mut mark = |i: u64| (100..110).contains(&i) || i == 1000;
    let gap = Duration::from_millis(1);
    let run = transfer_at(
        config(EcnMode::Request),
        config(EcnMode::Request),
        &data,
        &mut clean(&mut mark, &mut |_| false),
        gap,
    );
    let (a, b) = (run.p.a.stats(), run.p.b.stats());
    assert_eq!(b.ecn_ce_received, 11);
    // Every ACK between a mark and the CWR echoes it: many ECEs, two cuts.
    assert!(a.ecn_ece_received > 10, "{a:?}");
    assert_eq!(b.ecn_ece_sent, a.ecn_ece_received);
    assert_eq!(a.ecn_cuts, 2);
    assert_eq!(a.ecn_cwr_sent, 2);
    assert_eq!(a.retransmitted, 0);
    assert_eq!(a.fast_retransmits + a.timeouts, 0);
}

#[test]
fn an_ece_halves_the_window_without_retransmitting() {
    for cc in [cc::CcAlgorithm::NewReno, cc::CcAlgorithm::Cubic] {
        let config = TcpConfig {
            congestion: cc,
            ..config(EcnMode::Request)
        };
        let data = pattern(600_000);
        let mut mark = |i: u64| i == 200;
        let run = transfer(
            config.clone(),
            config,
            &data,
            &mut clean(&mut mark, &mut |_| false),
        );
        let a = run.p.a.stats();
        assert_eq!((a.ecn_cuts, a.retransmitted), (1, 0), "{cc:?}");
        // ssthresh came down from "unlimited" to about the flight at the mark.
        assert!(
            run.a_min_ssthresh < 1_000_000,
            "{cc:?} {}",
            run.a_min_ssthresh
        );
    }
}

#[test]
fn a_ce_mark_is_acknowledged_at_once() {
    // Small segments every 7 ms, each acknowledged by the delayed-ACK timer (40 ms; no
    // delivery coincides with a timer), until one arrives marked: B acknowledges that
    // one when it arrives, with ECE.
    let config = TcpConfig {
        nodelay: true,
        ..config(EcnMode::Request)
    };
    let mut p = Pair::new(config.clone(), config);
    let mut mark = |i: u64| i == 30;
    let mut never = |_| false;
    let mut w = clean(&mut mark, &mut never);
    let listener = p.b.listen(SocketAddrV4::new(B, 80), 8).unwrap();
    let remote = SocketAddrV4::new(B, 80);
    let client =
        p.a.connect(p.now, SocketAddrV4::new(A, 0), remote, 1460)
            .unwrap();
    while p.b.accept(listener).is_err() {
        assert!(p.step(&mut w));
    }
    let mut buf = [0u8; 4096];
    let start = p.now;
    for k in 0..40u64 {
        p.a.send(p.now, client, &[k as u8; 100]).unwrap();
        let until = start + Duration::from_millis(7 * (k + 1));
        while p.now < until {
            p.step_until(&mut w, until);
        }
        let server = p.b.accept(listener).ok();
        let _ = server.map(|s| p.b.recv(p.now, s, &mut buf));
    }
    let marked = p.log.iter().position(|s| s.marked).unwrap();
    let ce_at = p.delivered[marked].unwrap();
    let acks: Vec<_> = p.log.iter().filter(|s| !s.to_b && s.len == 0).collect();
    assert!(
        acks.iter()
            .any(|s| s.sent == ce_at && s.flags.contains(Flags::ECE))
    );
    // The unmarked segments before it waited for the timer.
    let earlier = p.delivered[marked - 1].unwrap();
    assert!(acks.iter().all(|s| s.sent != earlier), "{acks:?}");
}

#[test]
fn a_ce_mark_on_an_old_segment_is_ignored() {
    // RFC 3168 §6.1.5: a CE-marked copy of data already received (as a spoofer could
    // send) draws no ECE; the same mark on new data does.
    let mut p = Pair::new(config(EcnMode::Request), config(EcnMode::Request));
    let mut never = |_| false;
    let mut never2 = |_| false;
    let mut w = clean(&mut never, &mut never2);
    let listener = p.b.listen(SocketAddrV4::new(B, 80), 8).unwrap();
    let remote = SocketAddrV4::new(B, 80);
    let client =
        p.a.connect(p.now, SocketAddrV4::new(A, 0), remote, 1460)
            .unwrap();
    p.a.send(p.now, client, &pattern(1000)).unwrap();
    while p.step(&mut w) {}
    let server = p.b.accept(listener).unwrap();
    let mut buf = [0u8; 2000];
    assert_eq!(p.b.recv(p.now, server, &mut buf), Ok(1000));
    let first = *p.log.iter().find(|s| s.to_b && s.len > 0).unwrap();
    let local_port = p.a.addresses(client).unwrap().0.port();
    let old = Repr {
        src_port: local_port,
        dst_port: 80,
        seq: first.seq,
        ack: 0,
        flags: Flags::ACK,
        window: 1000,
        payload: &[1u8; 100],
        ..Repr::default()
    };
    p.b.handle_segment_with_ecn(p.now, (A.into(), B.into()), &old, 1460, Ecn::Ce);
    assert_eq!(p.b.stats().ecn_ce_received, 0);
    let mut out = vec![0u8; 1500];
    while let Some(tx) = p.b.poll_transmit(p.now, &mut out) {
        assert!(!parse(&out[..tx.len], B, A).flags.contains(Flags::ECE));
    }
}
