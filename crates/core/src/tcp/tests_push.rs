//! Segment-level tests of what decides when small pieces of data and ACKs leave:
//! delayed ACKs (RFC 9293 §3.8.6.3), quick ACKs, PSH (§3.9.1.2), the cork and gather
//! writes. A child of `tests`, whose helpers and macros it uses.

use super::*;

/// `config()` past quick-ACK mode, so ACKs follow the delayed-ACK rules alone.
fn no_quick_acks() -> TcpConfig {
    TcpConfig {
        quick_acks: 0,
        ..config()
    }
}

/// A data segment from the peer at `offset` bytes into its stream.
fn data(snd: u32, offset: u32, payload: &[u8]) -> Repr<'_> {
    Repr {
        seq: RISS + 1 + offset,
        ack: snd,
        payload,
        ..SEND_TEMPL
    }
}

#[test]
fn small_segments_are_not_full_sized_and_wait_for_the_timer() {
    // RFC 9293 §3.8.6.3: "an ACK SHOULD be generated for at least every second
    // full-sized segment": two small ones are not two full-sized ones.
    let (mut tcp, _c, snd) = established_with(no_quick_acks());
    send!(tcp, 20, data(snd, 0, b"GET / HTTP/1.1\r\n"));
    recv_nothing!(tcp, 20);
    send!(tcp, 21, data(snd, 16, b"Host: a\r\n\r\n"));
    recv_nothing!(tcp, 21);
    assert_eq!(tcp.poll_timeout(), Some(ms(60)));
    tcp.handle_timeout(ms(60));
    let ack_bytes = recv!(tcp, 60);
    let ack = parse(&ack_bytes);
    assert_eq!(ack.ack, RISS + 1 + 27);
    assert_eq!(tcp.stats().delayed_acks, 1);
}

#[test]
fn two_full_sized_segments_are_acked_at_once() {
    let (mut tcp, _c, snd) = established_with(no_quick_acks());
    let full = [1u8; MSS as usize];
    send!(tcp, 20, data(snd, 0, &full));
    recv_nothing!(tcp, 20);
    send!(tcp, 20, data(snd, 1000, &full));
    assert_eq!(parse(&recv!(tcp, 20)).ack, RISS + 2001);
    assert_eq!(tcp.stats().delayed_acks, 0);
    // One short of two full segments' worth: delayed.
    send!(tcp, 30, data(snd, 2000, &full[..999]));
    send!(tcp, 30, data(snd, 2999, &full));
    recv_nothing!(tcp, 30);
}

#[test]
fn the_delayed_ack_timer_is_capped() {
    let (mut tcp, _c, snd) = established_with(TcpConfig {
        delayed_ack: Duration::from_secs(2),
        ..no_quick_acks()
    });
    send!(tcp, 20, data(snd, 0, b"x"));
    recv_nothing!(tcp, 20);
    assert_eq!(tcp.poll_timeout(), Some(ms(20) + MAX_ACK_DELAY));
}

#[test]
fn quick_acks_at_the_start_and_after_idle() {
    let (mut tcp, _c, snd) = established();
    let quota = TcpConfig::default().quick_acks;
    // 64000-byte window / 2000 = 32 segments, capped at 16: each ACKed at once.
    for i in 0..quota {
        let t = 20 + u64::from(i);
        send!(tcp, t, data(snd, i, b"q"));
        assert_eq!(parse(&recv!(tcp, t)).ack, RISS + 2 + i);
    }
    send!(tcp, 40, data(snd, quota, b"q"));
    recv_nothing!(tcp, 40);
    tcp.handle_timeout(ms(80));
    assert_eq!(parse(&recv!(tcp, 80)).ack, RISS + 2 + quota);
    // Idle longer than the RTO (1 s before any RTT sample): quick again.
    send!(tcp, 2000, data(snd, quota + 1, b"q"));
    assert_eq!(parse(&recv!(tcp, 2000)).ack, RISS + 3 + quota);
}

/// Payload length and PSH of every segment `tcp` sends at `t`.
fn sent_at(tcp: &mut Tcp, t: u64) -> Vec<(usize, bool)> {
    core::iter::from_fn(|| poll(tcp, t))
        .map(|b| {
            let seg = parse(&b);
            (seg.payload.len(), seg.flags.psh())
        })
        .collect()
}

/// An ACK from the peer of our first `acked` bytes, offering `window`.
pub(super) fn peer_ack(snd: u32, acked: u32, window: u16) -> Repr<'static> {
    Repr {
        seq: RISS + 1,
        ack: snd + acked,
        window,
        ..SEND_TEMPL
    }
}

#[test]
fn psh_marks_the_end_of_a_write_and_each_pair_sent_together() {
    let (mut tcp, c, snd) = established();
    // No-delay, so Nagle does not hold the tail.
    tcp.set_nodelay(c, true).unwrap();
    tcp.send(ms(20), c, &[5u8; 2500]).unwrap();
    // The write's end carries PSH (RFC 9293 §3.9.1.2 MUST-61); so does the second of
    // two segments sent back to back, as Linux's two-segment TSO packet does.
    assert_eq!(
        sent_at(&mut tcp, 20),
        [(1000, false), (1000, true), (500, true)]
    );
    // The initial window (10 segments) leaves room for 7 more: three pairs and a lone
    // segment, which carries none.
    tcp.send(ms(30), c, &[6u8; 20000]).unwrap();
    assert_eq!(
        sent_at(&mut tcp, 30),
        [
            (1000, false),
            (1000, true),
            (1000, false),
            (1000, true),
            (1000, false),
            (1000, true),
            (1000, false)
        ]
    );
    // In slow start an ACK of 1000 bytes lets two more go: a pair.
    send!(tcp, 40, peer_ack(snd, 1000, 64000));
    assert_eq!(sent_at(&mut tcp, 40), [(1000, false), (1000, true)]);
}

#[test]
fn a_write_with_more_to_follow_ends_without_psh() {
    let (mut tcp, c, snd) = established();
    tcp.set_nodelay(c, true).unwrap();
    // Linux's MSG_MORE: the write does not end with a push; its tail waits for the
    // peer's next segment.
    tcp.set_more(c, true).unwrap();
    tcp.send(ms(20), c, &[1u8; 500]).unwrap();
    recv_nothing!(tcp, 20);
    send!(tcp, 25, peer_ack(snd, 0, 64000));
    assert_eq!(sent_at(&mut tcp, 25), [(500, false)]);
    // The next write without it pushes.
    tcp.set_more(c, false).unwrap();
    tcp.send(ms(30), c, &[2u8; 100]).unwrap();
    assert_eq!(sent_at(&mut tcp, 30), [(100, true)]);
}

#[test]
fn a_write_with_more_to_follow_holds_its_tail_until_the_peers_next_segment() {
    // Linux corks a write with MSG_MORE only while it is made: its partial tail goes
    // on the next ACK (no-delay here), without PSH, not after the cork's ceiling.
    let (mut tcp, c, snd) = established();
    tcp.set_nodelay(c, true).unwrap();
    tcp.set_more(c, true).unwrap();
    tcp.send(ms(20), c, &[1u8; 2100]).unwrap();
    assert_eq!(sent_at(&mut tcp, 20), [(1000, false), (1000, true)]);
    send!(tcp, 30, peer_ack(snd, 1000, 64000));
    assert_eq!(sent_at(&mut tcp, 30), [(100, false)]);
    // Nothing in flight to bring an ACK: the ceiling sends the tail, with PSH (Linux's
    // probe timer, `tcp_write_wakeup`).
    send!(tcp, 40, peer_ack(snd, 2100, 64000));
    tcp.send(ms(50), c, &[2u8; 10]).unwrap();
    recv_nothing!(tcp, 50);
    assert_eq!(tcp.poll_timeout(), Some(ms(50) + CORK_CEILING));
    tcp.handle_timeout(ms(250));
    assert_eq!(sent_at(&mut tcp, 250), [(10, true)]);
    // Taking MSG_MORE off lets what waits go at once.
    tcp.send(ms(260), c, &[3u8; 10]).unwrap();
    recv_nothing!(tcp, 260);
    tcp.set_more(c, false).unwrap();
    assert_eq!(sent_at(&mut tcp, 260), [(10, false)]);
}

#[test]
fn new_data_is_pushed_at_least_every_half_window() {
    // A peer offering 3000 bytes: as Linux's `forced_push`, new data goes with PSH
    // once it runs more than max_window / 2 = 1500 bytes past the last push, counted
    // from the write's start in skbs of Linux's size goal (1500 bytes in whole
    // segments: 1000): every second segment.
    let mut tcp = Tcp::new(config(), &secret(7));
    let listener = tcp.listen(LOCAL, 4).unwrap();
    let syn = Repr {
        seq: RISS,
        flags: Flags::SYN,
        window: 3000,
        options: Options {
            mss: Some(MSS),
            ..SEND_TEMPL.options
        },
        ..SEND_TEMPL
    };
    send!(tcp, 0, syn);
    let synack_bytes = recv!(tcp, 0);
    let snd = parse(&synack_bytes).seq + 1;
    send!(tcp, 10, peer_ack(snd, 0, 3000));
    let c = tcp.accept(listener).unwrap();
    tcp.set_nodelay(c, true).unwrap();
    tcp.send(ms(20), c, &[3u8; 15000]).unwrap();
    assert_eq!(sent_at(&mut tcp, 20).len(), 3);
    // One segment at a time from here, none of them a write's end or a pair's second.
    let mut pushes = Vec::new();
    for (t, acked) in (30..).step_by(10).zip((1000..=9000).step_by(1000)) {
        send!(tcp, t, peer_ack(snd, acked, 3000));
        let sent = sent_at(&mut tcp, t);
        assert_eq!(sent.len(), 1, "at {t} ms");
        pushes.push(sent[0].1);
    }
    // The segments ending 4000, 6000, 8000, 10000 and 12000 bytes into the write.
    assert_eq!(
        pushes,
        [true, false, true, false, true, false, true, false, true]
    );
}

#[test]
fn forced_pushes_count_forward_from_the_start_of_the_write() {
    // timestamping/partial: a peer offering 2000 bytes and a 3000-byte write. Linux
    // pushes the second segment (2000 bytes past the start, more than half the
    // window), not the first, though the first lies a whole half window before the
    // write's end.
    let mut tcp = Tcp::new(config(), &secret(7));
    let listener = tcp.listen(LOCAL, 4).unwrap();
    let syn = Repr {
        seq: RISS,
        flags: Flags::SYN,
        window: 2000,
        options: Options {
            mss: Some(MSS),
            ..SEND_TEMPL.options
        },
        ..SEND_TEMPL
    };
    send!(tcp, 0, syn);
    let synack_bytes = recv!(tcp, 0);
    let snd = parse(&synack_bytes).seq + 1;
    send!(tcp, 10, peer_ack(snd, 0, 2000));
    let c = tcp.accept(listener).unwrap();
    tcp.send(ms(20), c, &[3u8; 3000]).unwrap();
    assert_eq!(sent_at(&mut tcp, 20), [(1000, false), (1000, true)]);
    send!(tcp, 30, peer_ack(snd, 2000, 2000));
    assert_eq!(sent_at(&mut tcp, 30), [(1000, true)]);
}

#[test]
fn a_retransmission_carries_psh_only_where_a_write_ended() {
    let (mut tcp, c, snd) = established();
    tcp.set_nodelay(c, true).unwrap();
    tcp.send(ms(20), c, &[4u8; 3000]).unwrap();
    assert_eq!(
        sent_at(&mut tcp, 20),
        [(1000, false), (1000, true), (1000, true)]
    );
    // The retransmission timeout (1 s before any RTT sample) resends the first
    // segment, without the pair's PSH.
    send!(tcp, 30, peer_ack(snd, 0, 64000));
    tcp.handle_timeout(ms(1020));
    assert_eq!(sent_at(&mut tcp, 1020), [(1000, false)]);
}

#[test]
fn a_gather_write_leaves_in_one_segment() {
    let (mut tcp, c, snd) = established();
    let head: &[u8] = b"HTTP/1.1 200 OK\r\n\r\n";
    let slices = [head, b"", b"body"];
    assert_eq!(tcp.send_vectored(ms(20), c, slices), Ok(23));
    recv!(
        tcp,
        20,
        Repr {
            flags: Flags::ACK | Flags::PSH,
            payload: b"HTTP/1.1 200 OK\r\n\r\nbody",
            ..ack_templ(snd, RISS + 1)
        }
    );
    send!(
        tcp,
        25,
        Repr {
            seq: RISS + 1,
            ack: snd + 23,
            ..SEND_TEMPL
        }
    );
    // The same two pieces in two writes: Nagle holds the second behind the first.
    tcp.send(ms(30), c, head).unwrap();
    assert_eq!(parse(&recv!(tcp, 30)).payload, head);
    tcp.send(ms(30), c, b"body").unwrap();
    recv_nothing!(tcp, 30);
    // Nothing offered is no error; no room at all is WouldBlock.
    assert_eq!(tcp.send_vectored(ms(30), c, [&b""[..]]), Ok(0));
    let fill = vec![0u8; 64000];
    let taken = tcp
        .send_vectored(ms(30), c, [&fill[..], &fill[..]])
        .unwrap();
    assert!(taken < 64000, "{taken}");
    assert_eq!(
        tcp.send_vectored(ms(30), c, [&b"x"[..]]),
        Err(TcpError::WouldBlock)
    );
}

#[test]
fn cork_holds_partial_segments_until_uncorked() {
    let (mut tcp, c, snd) = established();
    tcp.set_cork(ms(20), c, true).unwrap();
    tcp.send(ms(20), c, b"head").unwrap();
    tcp.send(ms(20), c, b"body").unwrap();
    // Nothing is in flight, so Nagle would send; the cork holds.
    recv_nothing!(tcp, 20);
    // A full segment's worth goes; the tail waits.
    tcp.send(ms(21), c, &[7u8; 1000]).unwrap();
    let full_bytes = recv!(tcp, 21);
    let full = parse(&full_bytes);
    assert_eq!((full.payload.len(), full.flags.psh()), (1000, false));
    recv_nothing!(tcp, 21);
    tcp.set_cork(ms(22), c, false).unwrap();
    // Uncorked, the tail goes: only a full-sized segment is unacknowledged, and
    // Minshall's Nagle holds a small segment only behind another small one.
    let tail_bytes = recv!(tcp, 22);
    let tail = parse(&tail_bytes);
    assert_eq!((tail.payload.len(), tail.flags.psh()), (8, true));
    // The next small write waits behind that small tail until it is acknowledged.
    tcp.send(ms(23), c, b"more").unwrap();
    recv_nothing!(tcp, 23);
    send!(
        tcp,
        25,
        Repr {
            seq: RISS + 1,
            ack: snd + 1008,
            ..SEND_TEMPL
        }
    );
    let more_bytes = recv!(tcp, 25);
    assert_eq!(parse(&more_bytes).payload, b"more");
}

#[test]
fn cork_then_uncork_with_nodelay_sends_at_once() {
    let (mut tcp, c, snd) = established();
    tcp.set_nodelay(c, true).unwrap();
    tcp.set_cork(ms(20), c, true).unwrap();
    tcp.send(ms(20), c, b"head").unwrap();
    tcp.send(ms(20), c, b"body").unwrap();
    // The cork wins over no-delay, as in Linux.
    recv_nothing!(tcp, 20);
    tcp.set_cork(ms(21), c, false).unwrap();
    recv!(
        tcp,
        21,
        Repr {
            flags: Flags::ACK | Flags::PSH,
            payload: b"headbody",
            ..ack_templ(snd, RISS + 1)
        }
    );
}

#[test]
fn a_cork_holds_at_most_its_ceiling_then_holds_again() {
    let (mut tcp, c, snd) = established();
    tcp.set_cork(ms(20), c, true).unwrap();
    tcp.send(ms(20), c, b"head").unwrap();
    recv_nothing!(tcp, 20);
    tcp.send(ms(50), c, b"body").unwrap();
    recv_nothing!(tcp, 50);
    // 200 ms from when data first waited (Linux's TCP_CORK ceiling).
    assert_eq!(tcp.poll_timeout(), Some(ms(20) + CORK_CEILING));
    tcp.handle_timeout(ms(220));
    recv!(
        tcp,
        220,
        Repr {
            flags: Flags::ACK | Flags::PSH,
            payload: b"headbody",
            ..ack_templ(snd, RISS + 1)
        }
    );
    send!(
        tcp,
        230,
        Repr {
            seq: RISS + 1,
            ack: snd + 8,
            ..SEND_TEMPL
        }
    );
    // Still corked: the next partial segment waits again.
    tcp.send(ms(240), c, b"more").unwrap();
    recv_nothing!(tcp, 240);
    assert_eq!(tcp.poll_timeout(), Some(ms(240) + CORK_CEILING));
}

#[test]
fn a_fin_pushes_out_what_the_cork_holds() {
    let (mut tcp, c, snd) = established();
    tcp.set_cork(ms(20), c, true).unwrap();
    tcp.send(ms(20), c, b"bye").unwrap();
    recv_nothing!(tcp, 20);
    tcp.shutdown_write(ms(21), c).unwrap();
    recv!(
        tcp,
        21,
        Repr {
            flags: Flags::ACK | Flags::PSH | Flags::FIN,
            payload: b"bye",
            ..ack_templ(snd, RISS + 1)
        }
    );
}

#[test]
fn no_segment_spans_the_end_of_a_record() {
    // Linux's MSG_EOR: data written after a record's end never shares a segment with
    // it, and the record's last segment carries PSH (its write pushed). Without the
    // boundaries the same writes go as [1000, 1000 P, 1000, 1000 P, 300 P].
    let (mut tcp, c, _snd) = established();
    tcp.send(ms(20), c, &[1u8; 1500]).unwrap();
    tcp.end_record(c).unwrap();
    tcp.send(ms(20), c, &[2u8; 400]).unwrap();
    tcp.end_record(c).unwrap();
    tcp.send(ms(20), c, &[3u8; 400]).unwrap();
    tcp.end_record(c).unwrap();
    // Marking again with nothing written since adds nothing.
    tcp.end_record(c).unwrap();
    tcp.send(ms(20), c, &[4u8; 2000]).unwrap();
    assert_eq!(
        sent_at(&mut tcp, 20),
        [
            (1000, false),
            (500, true),
            (400, true),
            (400, true),
            (1000, false),
            (1000, true)
        ]
    );
}

#[test]
fn a_retransmission_stops_at_the_end_of_a_record() {
    let (mut tcp, c, snd) = established();
    tcp.set_nodelay(c, true).unwrap();
    tcp.send(ms(20), c, &[1u8; 300]).unwrap();
    tcp.end_record(c).unwrap();
    tcp.send(ms(20), c, &[2u8; 300]).unwrap();
    assert_eq!(sent_at(&mut tcp, 20), [(300, true), (300, true)]);
    // Nothing acknowledged: the timeout resends both (the window after it, one MSS,
    // holds 600 bytes), each record in a segment of its own, not one of 600 bytes.
    let at = tcp.poll_timeout().unwrap();
    tcp.handle_timeout(at);
    let t = at.as_millis();
    assert_eq!(sent_at(&mut tcp, t), [(300, true), (300, true)]);
    send!(tcp, t + 10, peer_ack(snd, 600, 64000));
    assert_eq!(tcp.info(c).unwrap().bytes_in_flight, 0);
}

#[test]
fn a_record_end_on_a_listener_is_an_error() {
    let mut tcp = Tcp::new(config(), &secret(7));
    let listener = tcp.listen(LOCAL, 4).unwrap();
    assert_eq!(tcp.end_record(listener), Err(TcpError::InvalidState));
}

#[test]
fn info_says_when_in_order_data_last_arrived() {
    // Linux's `tcpi_last_data_recv` is the time since.
    let (mut tcp, c, snd) = established();
    assert_eq!(tcp.info(c).unwrap().last_data_at, None);
    send!(tcp, 20, data(snd, 0, b"ab"));
    assert_eq!(tcp.info(c).unwrap().last_data_at, Some(ms(20)));
    send!(tcp, 30, data(snd, 2, b"cd"));
    assert_eq!(tcp.info(c).unwrap().last_data_at, Some(ms(30)));
}

/// The peer's request at 20 ms, our reply at 25 ms, its next data at 50 ms: what
/// `tcp` sends at 50 ms, and our SND.NXT.
fn request_reply_request(config: TcpConfig) -> (Tcp, Vec<Vec<u8>>, u32) {
    let (mut tcp, c, snd) = established_with(config);
    send!(tcp, 20, data(snd, 0, b"request"));
    assert_eq!(parse(&recv!(tcp, 20)).ack, RISS + 8);
    tcp.send(ms(25), c, b"reply").unwrap();
    let reply = parse(&recv!(tcp, 25)).payload.len();
    assert_eq!(reply, 5);
    send!(tcp, 50, data(snd + 5, 7, b"next"));
    let sent = core::iter::from_fn(|| poll(&mut tcp, 50)).collect();
    (tcp, sent, snd + 5)
}

#[test]
fn a_reply_within_the_delayed_ack_time_makes_the_connection_interactive() {
    // Linux's pingpong mode (`tcp_event_data_sent`): the reply went 5 ms after the
    // request, so the peer's next data waits for the timer (or our next reply)
    // although quick-ACK mode has ACKs to spare.
    let (mut tcp, sent, snd) = request_reply_request(TcpConfig {
        interactive_delayed_ack: true,
        ..config()
    });
    assert!(sent.is_empty());
    assert_eq!(tcp.poll_timeout(), Some(ms(90)));
    tcp.handle_timeout(ms(90));
    assert_eq!(parse(&recv!(tcp, 90)).ack, RISS + 12);
    // The timer firing ends interactive mode: quick ACKs again.
    send!(tcp, 100, data(snd, 11, b"more"));
    assert_eq!(parse(&recv!(tcp, 100)).ack, RISS + 16);
}

#[test]
fn without_the_switch_quick_ack_mode_acknowledges_at_once() {
    let (_tcp, sent, _) = request_reply_request(config());
    assert_eq!(sent.len(), 1);
    assert_eq!(parse(&sent[0]).ack, RISS + 12);
}

#[test]
fn info_counts_the_segments_delivered() {
    // Linux's `tcpi_delivered`: the handshake's, then one per MSS of data acknowledged
    // or SACKed.
    let (mut tcp, c, snd) = established();
    assert_eq!(tcp.info(c).unwrap().delivered, 1);
    tcp.set_nodelay(c, true).unwrap();
    tcp.send(ms(20), c, &[5u8; 2500]).unwrap();
    while poll(&mut tcp, 20).is_some() {}
    assert_eq!(tcp.info(c).unwrap().delivered, 1);
    send!(tcp, 30, peer_ack(snd, 1000, 64000));
    assert_eq!(tcp.info(c).unwrap().delivered, 2);
    send!(tcp, 31, peer_ack(snd, 2500, 64000));
    assert_eq!(tcp.info(c).unwrap().delivered, 4);
}

#[test]
fn chronographs_time_busy_and_window_limited_sending() {
    // Linux's `tcpi_busy_time` and `tcpi_rwnd_limited`.
    let (mut tcp, c, snd) = established_with(TcpConfig {
        send_chronographs: true,
        ..config()
    });
    let totals = |tcp: &Tcp, t| tcp.info(c).unwrap().chronograph.totals(ms(t));
    assert_eq!(totals(&tcp, 20), (Duration::ZERO, Duration::ZERO));
    // Busy from the write at 20 ms to the ACK of all of it at 30 ms, which closes the
    // window.
    tcp.send(ms(20), c, &[1u8; 1000]).unwrap();
    while poll(&mut tcp, 20).is_some() {}
    send!(tcp, 30, peer_ack(snd, 1000, 0));
    assert_eq!(
        totals(&tcp, 35),
        (Duration::from_millis(10), Duration::ZERO)
    );
    // Held by the window from the write at 40 ms until it opens at 70 ms; busy on.
    tcp.send(ms(40), c, &[2u8; 500]).unwrap();
    recv_nothing!(tcp, 40);
    send!(tcp, 70, peer_ack(snd, 1000, 64000));
    assert_eq!(parse(&recv!(tcp, 70)).payload.len(), 500);
    let rwnd = Duration::from_millis(30);
    assert_eq!(totals(&tcp, 80), (Duration::from_millis(50), rwnd));
}
