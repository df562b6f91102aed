//! Segment-level tests of how cwnd grows: not while the sender leaves it unused (RFC
//! 9438 §5.8, RFC 7661 §4.3, as Linux's `tcp_is_cwnd_limited`), slow start to twice
//! the largest flight of a round, the RFC 3465 limit on stretch ACKs and Linux's
//! none, and CUBIC's ssthresh from cwnd. A child of `tests`, whose helpers and macros
//! it uses.

use super::*;

/// `config()` without HyStart++, so slow start is slow start alone.
fn plain() -> TcpConfig {
    TcpConfig {
        hystart: false,
        ..config()
    }
}

/// The peer's ACK of everything up to `ack`.
fn peer_ack(ack: u32) -> Repr<'static> {
    Repr {
        seq: RISS + 1,
        ack,
        ..SEND_TEMPL
    }
}

/// Writes `segments` full segments and sends what the window lets go at `t`; the
/// number of segments that went.
fn write_and_send(tcp: &mut Tcp, c: TcpHandle, t: u64, segments: usize) -> usize {
    let data = vec![7u8; segments * usize::from(MSS)];
    assert_eq!(tcp.send(ms(t), c, &data), Ok(data.len()));
    let mut sent = 0;
    while poll(tcp, t).is_some() {
        sent += 1;
    }
    sent
}

/// cwnd in segments.
fn cwnd(tcp: &Tcp, c: TcpHandle) -> u32 {
    tcp.info(c).unwrap().cwnd / u32::from(MSS)
}

#[test]
fn slow_start_grows_to_twice_the_largest_flight() {
    // Nine segments under a window of ten, acknowledged two at a time: each ACK grows
    // cwnd until it is twice the nine (as Linux: slow-start-app-limited-9-packets-out).
    let (mut tcp, c, snd) = established_with(plain());
    assert_eq!(cwnd(&tcp, c), 10);
    assert_eq!(write_and_send(&mut tcp, c, 20, 9), 9);
    let m = u32::from(MSS);
    let mut seen = Vec::new();
    for (i, acked) in [2, 4, 6, 8, 9].into_iter().enumerate() {
        send!(tcp, 120 + i as u64, peer_ack(snd + acked * m));
        seen.push(cwnd(&tcp, c));
    }
    assert_eq!(seen, [12, 14, 16, 18, 18]);
}

#[test]
fn a_full_window_doubles_though_the_flight_shrinks_as_acks_come() {
    // The whole window out and nothing more to send: every ACK of the round still
    // counts (RFC 5681 §3.1), 10 -> 20; the flight when each ACK arrives does not
    // matter.
    let (mut tcp, c, snd) = established_with(plain());
    assert_eq!(write_and_send(&mut tcp, c, 20, 10), 10);
    let m = u32::from(MSS);
    for (i, acked) in [2, 4, 6, 8, 10].into_iter().enumerate() {
        send!(tcp, 120 + i as u64, peer_ack(snd + acked * m));
    }
    assert_eq!(cwnd(&tcp, c), 20);
}

#[test]
fn half_a_window_in_flight_does_not_grow_it() {
    // Five segments under ten: twice five is the window already
    // (slow-start-ack-per-2pkt-send-5pkt).
    let (mut tcp, c, snd) = established_with(plain());
    assert_eq!(write_and_send(&mut tcp, c, 20, 5), 5);
    let m = u32::from(MSS);
    for (i, acked) in [2, 4, 5].into_iter().enumerate() {
        send!(tcp, 120 + i as u64, peer_ack(snd + acked * m));
        assert_eq!(cwnd(&tcp, c), 10);
    }
}

#[test]
fn a_stretch_ack_grows_slow_start_by_l_or_by_all_it_acknowledged() {
    // RFC 3465 §2.2: "cwnd += min(N, L*SMSS)", L = 2 by default; with no limit (Linux's
    // `tcp_slow_start`) an ACK of four segments adds four.
    let m = u32::from(MSS);
    for (limit, grown) in [(Some(2), 12), (None, 14)] {
        let (mut tcp, c, snd) = established_with(TcpConfig {
            abc_limit: limit,
            ..plain()
        });
        assert_eq!(write_and_send(&mut tcp, c, 20, 30), 10);
        send!(tcp, 120, peer_ack(snd + 4 * m));
        assert_eq!(cwnd(&tcp, c), grown, "abc_limit {limit:?}");
    }
}

#[test]
fn cubic_sets_ssthresh_on_a_timeout_from_flight_size_or_from_cwnd() {
    // One segment outstanding under a window of ten when the timer fires: RFC 9438
    // §4.6's FlightSize * 0.7 is below the floor of two segments; Linux's cwnd * 0.7 is
    // seven.
    let m = u32::from(MSS);
    for (from_cwnd, ssthresh) in [(false, 2), (true, 7)] {
        let (mut tcp, c, snd) = established_with(TcpConfig {
            congestion: cc::CcAlgorithm::Cubic,
            cubic_ssthresh_from_cwnd: from_cwnd,
            ..plain()
        });
        assert_eq!(write_and_send(&mut tcp, c, 20, 1), 1);
        send!(tcp, 120, peer_ack(snd + m));
        assert_eq!(write_and_send(&mut tcp, c, 130, 1), 1);
        let rto = tcp.poll_timeout().expect("the retransmission timer");
        tcp.handle_timeout(rto);
        let info = tcp.info(c).unwrap();
        assert_eq!(
            (info.cwnd / m, info.ssthresh / m),
            (1, ssthresh),
            "from cwnd: {from_cwnd}"
        );
    }
}

#[test]
fn linux_hystart_leaves_slow_start_at_the_ninth_sample_of_a_slower_round() {
    // cubic-hystart-delay-rtt-jumps-upward: a round at 200 ms, then one whose ACKs
    // (two segments each) come at 240 ms and later. With `hystart_exit_at_once` every
    // ACK gives the controller a sample from the sent log (no timestamps here), and the
    // ninth of the round, 40 ms above the minimum (more than 200/8 = 25 ms), sets
    // ssthresh = cwnd = 36 as Linux's HyStart; the eighth does not yet. Without it
    // imp's estimator times one segment per round, HyStart++ sees too few samples, and
    // slow start goes on.
    let m = u32::from(MSS);
    for exit_at_once in [true, false] {
        let (mut tcp, c, snd) = established_with_options(
            TcpConfig {
                congestion: cc::CcAlgorithm::Cubic,
                sack: true,
                abc_limit: None,
                hystart_exit_at_once: exit_at_once,
                ..config()
            },
            Options {
                mss: Some(MSS),
                sack_permitted: true,
                ..SEND_TEMPL.options
            },
        );
        assert_eq!(write_and_send(&mut tcp, c, 20, 30), 10);
        send!(tcp, 220, peer_ack(snd + 10 * m));
        while poll(&mut tcp, 220).is_some() {}
        assert_eq!(cwnd(&tcp, c), 20);
        for i in 1..=9u32 {
            send!(tcp, 460 + u64::from(i), peer_ack(snd + (10 + 2 * i) * m));
            let info = tcp.info(c).unwrap();
            let (cwnd, ssthresh) = (info.cwnd / m, info.ssthresh / m);
            if exit_at_once && i == 9 {
                assert_eq!((cwnd, ssthresh), (36, 36), "the ninth sample");
            } else {
                assert_eq!(cwnd, 20 + 2 * i, "ACK {i}, exit at once: {exit_at_once}");
                assert!(ssthresh > 1000, "ACK {i}, exit at once: {exit_at_once}");
            }
        }
    }
}
