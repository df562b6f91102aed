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

#[test]
fn psh_marks_the_end_of_the_queued_data() {
    let (mut tcp, c, _snd) = established();
    // No-delay, so Nagle does not hold the tail.
    tcp.set_nodelay(c, true).unwrap();
    tcp.send(ms(20), c, &[5u8; 2500]).unwrap();
    let flags: Vec<(usize, bool)> = core::iter::from_fn(|| poll(&mut tcp, 20))
        .map(|b| {
            let seg = parse(&b);
            (seg.payload.len(), seg.flags.psh())
        })
        .collect();
    assert_eq!(flags, [(1000, false), (1000, false), (500, true)]);
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
