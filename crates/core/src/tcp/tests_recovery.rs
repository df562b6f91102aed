//! Loss recovery end to end: two `Tcp`s on a virtual wire with a rate (so ACKs come
//! spaced as on a real path) and a fate for chosen data segments of A's first
//! transmissions (dropped, or held back). Every transfer is checked byte for byte.
//! RACK-TLP (RFC 8985), PRR (RFC 6937), D-SACK (RFC 2883) and the undo of spurious
//! retransmissions (RFC 3708, RFC 3522).

use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;
use core::net::{Ipv4Addr, SocketAddrV4};

use impnet_wire::tcp::{Packet, Repr};

use super::*;
use crate::testutil::secret;
use crate::time::{Duration, Instant};

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const ONE_WAY: Duration = Duration::from_millis(10);
/// Serialization time of one segment (about 100 Mbit/s for 1500 bytes).
const PER_SEGMENT: Duration = Duration::from_micros(120);

/// What the wire does with the first transmission of a data segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Drop,
    /// Delivered this much later than its turn.
    Delay(Duration),
    /// Delivered this much later, and every retransmission of it lost.
    DelayLoseAgain(Duration),
}

struct InFlight {
    at: Instant,
    to_b: bool,
    bytes: Vec<u8>,
}

/// The pair, its wire, and what happened on it.
struct Pair {
    a: Tcp,
    b: Tcp,
    now: Instant,
    wire: Vec<InFlight>,
    /// When each direction's line is free again (A to B, B to A).
    busy: [Instant; 2],
    /// Fates by data segment number (0 = the first data segment A sends).
    fates: BTreeMap<u64, Fate>,
    /// Sequence numbers of A's data segments seen, in order of first transmission.
    seen: BTreeMap<u32, u64>,
    /// Per ACK arrival at A: A in recovery after it, and data segments A sent then.
    recovery_sends: Vec<(bool, usize)>,
    /// The last step delivered a segment to A.
    acked: bool,
}

impl Pair {
    fn new(config: &TcpConfig, fates: &[(u64, Fate)]) -> Pair {
        Pair {
            a: Tcp::new(config.clone(), &secret(1)),
            b: Tcp::new(config.clone(), &secret(2)),
            now: Instant::ZERO,
            wire: Vec::new(),
            busy: [Instant::ZERO; 2],
            fates: fates.iter().copied().collect(),
            seen: BTreeMap::new(),
            recovery_sends: Vec::new(),
            acked: false,
        }
    }

    /// The fate of A's data segment `repr`, when this is its first transmission.
    fn fate(&mut self, repr: &Repr<'_>) -> Option<Fate> {
        if repr.payload.is_empty() {
            return None;
        }
        if let Some(n) = self.seen.get(&repr.seq) {
            let again = matches!(self.fates.get(n), Some(Fate::DelayLoseAgain(_)));
            return again.then_some(Fate::Drop);
        }
        let n = self.seen.len() as u64;
        self.seen.insert(repr.seq, n);
        self.fates.get(&n).copied()
    }

    fn transmit(&mut self, client: Option<TcpHandle>) {
        let mut buf = vec![0u8; 1500];
        let in_recovery = client
            .and_then(|c| self.a.info(c))
            .is_some_and(|i| i.in_recovery);
        let mut data_sent = 0;
        for to_b in [true, false] {
            loop {
                let tcp = if to_b { &mut self.a } else { &mut self.b };
                let Some(tx) = tcp.poll_transmit(self.now, &mut buf) else {
                    break;
                };
                let bytes = buf[..tx.len].to_vec();
                let packet = Packet::new_checked(&bytes[..]).unwrap();
                let repr = Repr::parse(&packet, &tx.src, &tx.dst, true).unwrap();
                let fate = if to_b {
                    data_sent += usize::from(!repr.payload.is_empty());
                    self.fate(&repr)
                } else {
                    None
                };
                let line = &mut self.busy[usize::from(!to_b)];
                *line = (*line).max(self.now) + PER_SEGMENT;
                let mut at = *line + ONE_WAY;
                match fate {
                    Some(Fate::Drop) => continue,
                    Some(Fate::Delay(d) | Fate::DelayLoseAgain(d)) => at += d,
                    None => {}
                }
                self.wire.push(InFlight { at, to_b, bytes });
            }
        }
        if self.acked {
            self.recovery_sends.push((in_recovery, data_sent));
        }
    }

    fn step(&mut self, client: Option<TcpHandle>) -> bool {
        self.transmit(client);
        let next_wire = self.wire.iter().map(|s| s.at).min();
        let next = [next_wire, self.a.poll_timeout(), self.b.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let Some(next) = next else { return false };
        self.now = self.now.max(next);
        let (mut due, rest): (Vec<_>, Vec<_>) = self.wire.drain(..).partition(|s| s.at <= self.now);
        self.wire = rest;
        due.sort_by_key(|s| s.at);
        self.acked = due.iter().any(|s| !s.to_b);
        for seg in due {
            let (src, dst) = if seg.to_b { (A, B) } else { (B, A) };
            let packet = Packet::new_checked(&seg.bytes[..]).unwrap();
            let repr = Repr::parse(&packet, &src, &dst, true).unwrap();
            let tcp = if seg.to_b { &mut self.b } else { &mut self.a };
            tcp.handle_segment(self.now, src, dst, &repr);
        }
        self.a.handle_timeout(self.now);
        self.b.handle_timeout(self.now);
        true
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// What a transfer left behind.
struct Outcome {
    stats: TcpStats,
    /// A's connection just before its FIN was acknowledged... or at the end.
    info: TcpInfo,
    recovery_sends: Vec<(bool, usize)>,
    /// When B read the last byte.
    done: Instant,
}

/// Send `len` bytes from A to B with `fates`; check them byte for byte.
fn transfer(config: &TcpConfig, len: usize, fates: &[(u64, Fate)]) -> Outcome {
    let data = pattern(len);
    let mut p = Pair::new(config, fates);
    let listener = p.b.listen(SocketAddrV4::new(B, 80), 8).unwrap();
    let client =
        p.a.connect(
            p.now,
            SocketAddrV4::new(A, 0),
            SocketAddrV4::new(B, 80),
            1460,
        )
        .unwrap();
    let (mut written, mut server, mut received) = (0, None, Vec::new());
    let mut buf = vec![0u8; 65536];
    let mut info = None;
    let mut done = None;
    for _ in 0..1_000_000 {
        if written < data.len()
            && let Ok(n) = p.a.send(p.now, client, &data[written..])
        {
            written += n;
        }
        server = server.or_else(|| p.b.accept(listener).ok());
        if let Some(s) = server {
            while let Ok(n) = p.b.recv(p.now, s, &mut buf) {
                if n == 0 {
                    break;
                }
                received.extend_from_slice(&buf[..n]);
            }
        }
        if received.len() == data.len() && done.is_none() {
            done = Some(p.now);
            info = p.a.info(client);
        }
        if done.is_some() && p.a.info(client).is_some_and(|i| i.bytes_in_flight == 0) {
            info = p.a.info(client);
            break;
        }
        if !p.step(Some(client)) {
            break;
        }
    }
    assert_eq!(received.len(), data.len(), "bytes received");
    assert!(received == data, "the received bytes differ");
    Outcome {
        stats: p.a.stats().clone(),
        info: info.expect("the connection lives"),
        recovery_sends: p.recovery_sends,
        done: done.expect("done"),
    }
}

fn sack_config(timestamps: bool) -> TcpConfig {
    TcpConfig {
        timestamps,
        nodelay: true,
        // RFC 6298's 1 s: the loss probe's advantage does not depend on a short RTO.
        min_rto: Duration::from_secs(1),
        ..TcpConfig::default()
    }
}

/// RFC 8985 §7: the last segment of a transfer is lost; nothing follows it to be
/// SACKed, so only a timer can find the loss. The loss probe (2*SRTT) resends it
/// instead of waiting for the retransmission timeout (at least 200 ms).
#[test]
fn a_tail_loss_is_repaired_by_a_loss_probe_not_a_timeout() {
    let len = 20 * 1448;
    let out = transfer(&sack_config(true), len, &[(19, Fate::Drop)]);
    assert_eq!(out.stats.tlp_probes, 1, "{:?}", out.stats);
    assert_eq!(out.stats.timeouts, 0);
    assert_eq!(out.stats.retransmitted, 1);
    // The last ACK before the loss comes late (the receiver's delayed ACK of a lone
    // segment), and one segment is in flight: PTO = 2*SRTT + WCDelAckT (200 ms), well
    // before the RTO of 1 s.
    assert!(out.done < Instant::from_millis(500), "done at {}", out.done);
    // Without RACK-TLP the same loss waits for the timeout.
    let rto = transfer(
        &TcpConfig {
            rack: false,
            ..sack_config(true)
        },
        len,
        &[(19, Fate::Drop)],
    );
    assert_eq!((rto.stats.tlp_probes, rto.stats.timeouts), (0, 1));
    assert!(rto.done > Instant::from_millis(1000));
}

/// Three segments lost at the tail: the probe resends the last; its SACK shows the
/// two before it missing, and RACK repairs them in a fast recovery, not by timeout.
#[test]
fn a_probe_at_the_tail_lets_rack_find_the_losses_before_it() {
    let fates = [(17, Fate::Drop), (18, Fate::Drop), (19, Fate::Drop)];
    let out = transfer(&sack_config(true), 20 * 1448, &fates);
    assert_eq!(out.stats.tlp_probes, 1, "{:?}", out.stats);
    assert_eq!(out.stats.timeouts, 0);
    assert!(out.stats.rack_losses >= 1);
    assert_eq!(out.stats.retransmitted, 3);
}

/// RFC 8985 §6: a segment held back 4 ms (less than the round trip) is first deemed
/// lost (reordering not seen yet: the window is zero with three segments SACKed
/// above it) and resent; the original arrives first. The ACK that covers it echoes
/// the original's timestamp: Eifel (RFC 3522) calls the retransmission spurious and
/// the window cut is undone (ssthresh back to its initial value, no loss ever). The
/// retransmission itself is lost, so no D-SACK can tell.
#[test]
fn a_spurious_fast_retransmit_is_undone_by_eifel() {
    let fates = [(40, Fate::DelayLoseAgain(Duration::from_millis(4)))];
    let out = transfer(&sack_config(true), 200 * 1448, &fates);
    assert!(out.stats.fast_retransmits >= 1, "{:?}", out.stats);
    assert!(out.stats.spurious_retransmits >= 1, "{:?}", out.stats);
    assert_eq!(out.stats.undos, 1, "{:?}", out.stats);
    assert_eq!(out.stats.dsacks_received, 0, "{:?}", out.stats);
    assert!(out.info.ssthresh > u32::MAX / 2, "{:?}", out.info);
}

/// The same without timestamps: the receiver reports the second copy in a D-SACK
/// block (RFC 2883), which shows the retransmission was not needed (RFC 3708); the
/// cut is undone, and the reordering window grows (RFC 8985 §6.2).
#[test]
fn a_spurious_fast_retransmit_is_undone_by_dsack() {
    let fates = [(40, Fate::Delay(Duration::from_millis(4)))];
    let out = transfer(&sack_config(false), 200 * 1448, &fates);
    assert!(out.stats.fast_retransmits >= 1, "{:?}", out.stats);
    assert!(out.stats.dsacks_received >= 1, "{:?}", out.stats);
    assert_eq!(out.stats.undos, 1, "{:?}", out.stats);
    assert!(out.info.ssthresh > u32::MAX / 2, "{:?}", out.info);
}

/// A receiver reports a duplicate segment in the first SACK block of its ACK, below
/// RCV.NXT or inside out-of-order data (RFC 2883 §4).
#[test]
fn the_receiver_sends_dsack_for_duplicates() {
    let mut p = Pair::new(&sack_config(false), &[]);
    let listener = p.b.listen(SocketAddrV4::new(B, 80), 8).unwrap();
    let c =
        p.a.connect(
            p.now,
            SocketAddrV4::new(A, 0),
            SocketAddrV4::new(B, 80),
            1460,
        )
        .unwrap();
    while p.b.accept(listener).is_err() {
        p.step(Some(c));
    }
    // Two segments delivered to B twice each: the second copies are duplicates.
    p.a.send(p.now, c, &pattern(2 * 1448)).unwrap();
    p.transmit(Some(c));
    let copies: Vec<_> = p
        .wire
        .iter()
        .filter(|s| s.to_b)
        .map(|s| s.bytes.clone())
        .collect();
    assert_eq!(copies.len(), 2);
    for (i, bytes) in copies.into_iter().enumerate() {
        p.wire.push(InFlight {
            at: p.now + Duration::from_millis(50 + 10 * i as u64),
            to_b: true,
            bytes,
        });
    }
    for _ in 0..100 {
        p.step(Some(c));
    }
    assert_eq!(p.b.stats().dsacks_sent, 2);
    assert_eq!(p.a.stats().dsacks_received, 2);
    // Nothing was retransmitted, so nothing is called spurious.
    assert_eq!(p.a.stats().spurious_retransmits, 0);
}

/// RFC 6937 PRR: in a recovery from one loss in a large window, the sender sends
/// about one segment for every two delivered, from the first ACK on (no stall while
/// the pipe drains down to ssthresh, as RFC 6675's cwnd - pipe would), never more than
/// two at once (no burst).
#[test]
fn prr_spreads_the_recovery_sends_without_burst_or_stall() {
    let config = TcpConfig {
        send_buffer: 4 << 20,
        recv_buffer: 4 << 20,
        ..sack_config(true)
    };
    let out = transfer(&config, 3000 * 1448, &[(300, Fate::Drop)]);
    assert_eq!(out.stats.fast_retransmits, 1, "{:?}", out.stats);
    assert_eq!(out.stats.timeouts, 0);
    let sends: Vec<usize> = out
        .recovery_sends
        .iter()
        .filter(|&&(recovering, _)| recovering)
        .map(|&(_, n)| n)
        .collect();
    assert!(sends.len() > 20, "{} steps in recovery", sends.len());
    assert!(sends.iter().all(|&n| n <= 2), "a burst: {sends:?}");
    let first_half = &sends[..sends.len() / 2];
    let sending = first_half.iter().filter(|&&n| n > 0).count();
    assert!(
        sending * 3 >= first_half.len(),
        "a stall: {sending} of {} ACKs answered in the first half: {sends:?}",
        first_half.len()
    );
    assert!(
        sending * 3 >= first_half.len(),
        "a stall: {sending} of {} steps sent in the first half: {sends:?}",
        first_half.len()
    );
}

/// RFC 3522 / RFC 4015 after a timeout: the last segment is held back 600 ms (every
/// copy of it sent meanwhile is lost), so the loss probe and then the retransmission
/// timer fire. The original arrives after all; the ACK that covers the timeout's
/// retransmission echoes the original's older TSval: the timeout was spurious, and
/// the window it cut is restored.
#[test]
fn a_spurious_timeout_is_undone_by_eifel() {
    let config = TcpConfig {
        min_rto: Duration::from_millis(200),
        ..sack_config(true)
    };
    let fates = [(19, Fate::DelayLoseAgain(Duration::from_millis(600)))];
    let out = transfer(&config, 20 * 1448, &fates);
    assert_eq!(out.stats.timeouts, 1, "{:?}", out.stats);
    assert_eq!(out.stats.tlp_probes, 1, "{:?}", out.stats);
    assert_eq!(out.stats.undos, 1, "{:?}", out.stats);
    assert!(out.info.ssthresh > u32::MAX / 2, "{:?}", out.info);
}
