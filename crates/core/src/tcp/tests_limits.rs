//! The settings that bound TCP's memory whatever peers send: `max_connections`,
//! `event_limit`, `reset_queue`, `spare_rings`, `large_spare_rings` and
//! `release_rings_above`. A child of
//! `tests`, whose helpers and macros it uses.

use super::*;

/// A SYN from the peer's address, port `port`.
fn syn(port: u16, seq: u32) -> Repr<'static> {
    Repr {
        src_port: port,
        seq,
        flags: Flags::SYN,
        options: Options {
            mss: Some(MSS),
            ..SEND_TEMPL.options
        },
        ..SEND_TEMPL
    }
}

/// The SYN-ACK to port `port` after its SYN: our ISN.
fn synack_to(tcp: &mut Tcp, t: u64, port: u16) -> u32 {
    let bytes = recv!(*tcp, t);
    let synack = parse(&bytes);
    assert_eq!(
        (synack.flags, synack.dst_port),
        (Flags::SYN | Flags::ACK, port)
    );
    synack.seq
}

/// Completes the handshake of port `port`, whose SYN carried `seq` and drew `iss`.
fn complete(tcp: &mut Tcp, t: u64, port: u16, seq: u32, iss: u32) {
    send!(
        tcp,
        t,
        Repr {
            src_port: port,
            seq: seq + 1,
            ack: iss + 1,
            ..SEND_TEMPL
        }
    );
}

#[test]
fn beyond_max_connections_syns_are_dropped_and_counted() {
    let mut tcp = Tcp::new(
        TcpConfig {
            max_connections: 3,
            ..config()
        },
        &secret(3),
    );
    let l = tcp.listen(LOCAL, 16).unwrap();
    for port in 40_000..40_003 {
        send!(tcp, 0, syn(port, 100));
        let iss = synack_to(&mut tcp, 0, port);
        complete(&mut tcp, 1, port, 100, iss);
    }
    assert_eq!(tcp.connection_count(), 3, "the listener does not count");
    // A fourth SYN: no state, no answer, counted.
    send!(tcp, 2, syn(40_003, 100));
    recv_nothing!(tcp, 2);
    assert_eq!(tcp.connection_count(), 3);
    assert_eq!(tcp.socket_count(), 4);
    assert_eq!(tcp.stats().connection_limit_drops, 1);
    // An active open fails too.
    assert_eq!(
        tcp.connect(ms(2), LOCAL, REMOTE, MSS),
        Err(TcpError::TooManyConnections)
    );
    // One connection goes (abort: released at once); its place is free again.
    let first = tcp.accept(l).unwrap();
    tcp.abort(ms(3), first).unwrap();
    while poll(&mut tcp, 3).is_some() {}
    assert_eq!(tcp.connection_count(), 2);
    send!(tcp, 4, syn(40_003, 100));
    synack_to(&mut tcp, 4, 40_003);
    assert_eq!(tcp.connection_count(), 3);
    assert_eq!(tcp.stats().connection_limit_drops, 1);
}

#[test]
fn at_max_connections_a_returning_cookie_is_dropped_without_a_rst() {
    let mut tcp = Tcp::new(
        TcpConfig {
            max_connections: 2,
            ..config()
        },
        &secret(4),
    );
    let l = tcp.listen(LOCAL, 1).unwrap();
    // Port 40000 fills the backlog (SYN-RECEIVED); port 40001 gets a cookie.
    send!(tcp, 0, syn(40_000, 100));
    synack_to(&mut tcp, 0, 40_000);
    send!(tcp, 0, syn(40_001, 500));
    let cookie = synack_to(&mut tcp, 0, 40_001);
    assert_eq!(tcp.stats().syn_cookies_sent, 1);
    // An active open takes the last place in the table.
    let c = tcp.connect(ms(1), LOCAL, REMOTE, MSS).unwrap();
    while poll(&mut tcp, 1).is_some() {}
    assert_eq!(tcp.connection_count(), 2);
    complete(&mut tcp, 2, 40_001, 500, cookie);
    recv_nothing!(tcp, 2);
    assert_eq!(tcp.stats().syn_cookies_accepted, 0);
    assert_eq!(tcp.stats().connection_limit_drops, 1);
    assert_eq!(tcp.connection_count(), 2);
    // With room again, the same ACK (sent again by the peer) opens the connection.
    tcp.abort(ms(3), c).unwrap();
    while poll(&mut tcp, 3).is_some() {}
    complete(&mut tcp, 4, 40_001, 500, cookie);
    assert_eq!(tcp.stats().syn_cookies_accepted, 1);
    assert!(tcp.accept(l).is_ok());
}

#[test]
fn events_beyond_the_limit_drop_the_oldest() {
    let mut tcp = Tcp::new(
        TcpConfig {
            event_limit: 4,
            max_connections: 100,
            ..config()
        },
        &secret(5),
    );
    let l = tcp.listen(LOCAL, 64).unwrap();
    let mut children = Vec::new();
    for port in 40_000..40_020 {
        send!(tcp, 0, syn(port, 100));
        let iss = synack_to(&mut tcp, 0, port);
        complete(&mut tcp, 1, port, 100, iss);
        children.push((port, iss, tcp.accept(l).unwrap()));
    }
    while tcp.poll_event().is_some() {}
    // Data for each of the 20 connections in turn, nobody polling events: 20
    // different readiness events offered.
    for &(port, iss, _) in &children {
        send!(
            tcp,
            2,
            Repr {
                src_port: port,
                seq: 101,
                ack: iss + 1,
                payload: b"x",
                ..SEND_TEMPL
            }
        );
    }
    let events: Vec<TcpEvent> = core::iter::from_fn(|| tcp.poll_event()).collect();
    let newest: Vec<TcpEvent> = children[16..]
        .iter()
        .map(|&(_, _, c)| TcpEvent::Readable(c))
        .collect();
    assert_eq!(events, newest, "the four newest are kept");
    assert_eq!(tcp.stats().events_dropped, 16);
    // Dropped events lose no data: every connection reads its byte.
    let mut buf = [0u8; 4];
    for &(_, _, c) in &children {
        assert_eq!(tcp.recv(ms(3), c, &mut buf), Ok(1));
    }
}

#[test]
fn rsts_for_no_connection_queue_up_to_the_limit() {
    let mut tcp = Tcp::new(
        TcpConfig {
            reset_queue: 10,
            ..config()
        },
        &secret(6),
    );
    for i in 0..1000u32 {
        send!(
            tcp,
            0,
            Repr {
                seq: i,
                ack: i,
                ..SEND_TEMPL
            }
        );
    }
    let mut rsts = 0;
    while let Some(bytes) = poll(&mut tcp, 0) {
        assert!(parse(&bytes).flags.rst());
        rsts += 1;
    }
    assert_eq!(rsts, 10);
    assert_eq!(tcp.stats().no_socket, 1000);
}

#[test]
fn cookie_syn_acks_queue_up_to_the_limit() {
    let mut tcp = Tcp::new(
        TcpConfig {
            reset_queue: 10,
            ..config()
        },
        &secret(7),
    );
    tcp.listen(LOCAL, 1).unwrap();
    for port in 40_000..41_000 {
        send!(tcp, 0, syn(port, 100));
    }
    let mut synacks = 0;
    while poll(&mut tcp, 0).is_some() {
        synacks += 1;
    }
    // The SYN-ACK of the one half-open child, and ten cookies.
    assert_eq!(synacks, 11);
    assert_eq!(tcp.stats().syn_cookies_sent, 10);
}

#[test]
fn spare_rings_are_kept_up_to_their_limits() {
    let mut tcp = Tcp::new(
        TcpConfig {
            spare_rings: 2,
            large_spare_rings: 1,
            max_connections: 100,
            ..config()
        },
        &secret(8),
    );
    let l = tcp.listen(LOCAL, 64).unwrap();
    // Ten connections each receive 1 KB (small rings) and ten more 40 KB (large ones),
    // then are aborted.
    let payload = vec![7u8; 40_000];
    for (port, len) in (40_000..40_020).zip([1000; 10].into_iter().chain([40_000; 10])) {
        send!(tcp, 0, syn(port, 100));
        let iss = synack_to(&mut tcp, 0, port);
        for (i, chunk) in payload[..len].chunks(usize::from(MSS)).enumerate() {
            send!(
                tcp,
                1,
                Repr {
                    src_port: port,
                    seq: 101 + (i * usize::from(MSS)) as u32,
                    ack: iss + 1,
                    payload: chunk,
                    ..SEND_TEMPL
                }
            );
        }
        while poll(&mut tcp, 1).is_some() {}
    }
    while let Ok(c) = tcp.accept(l) {
        tcp.abort(ms(2), c).unwrap();
    }
    while poll(&mut tcp, 2).is_some() {}
    assert_eq!(tcp.connection_count(), 0);
    assert_eq!(tcp.spare_ring_counts(), (2, 1));
}

/// One connection from port `port` (SYN sequence number 100): established, then its
/// first bytes sent and acknowledged (HyStart++ sees its first ACK of new data), at
/// `t`..`t + 3` ms. Returns its handle.
fn open_and_ack_data(tcp: &mut Tcp, l: TcpHandle, t: u64, port: u16) -> TcpHandle {
    send!(tcp, t, syn(port, 100));
    let iss = synack_to(tcp, t, port);
    complete(tcp, t + 1, port, 100, iss);
    let c = tcp.accept(l).unwrap();
    tcp.send(ms(t + 2), c, b"hi").unwrap();
    assert_eq!(parse(&recv!(*tcp, t + 2)).payload, b"hi");
    send!(
        tcp,
        t + 3,
        Repr {
            src_port: port,
            seq: 101,
            ack: iss + 3,
            ..SEND_TEMPL
        }
    );
    c
}

#[test]
fn hystart_boxes_of_ended_connections_are_reused_up_to_the_limit() {
    let mut tcp = Tcp::new(
        TcpConfig {
            spare_rings: 1,
            ..config()
        },
        &secret(10),
    );
    let l = tcp.listen(LOCAL, 16).unwrap();
    let a = open_and_ack_data(&mut tcp, l, 0, 40_000);
    let b = open_and_ack_data(&mut tcp, l, 10, 40_001);
    assert_eq!(tcp.spare_rounds_count(), 0, "none ended yet");
    // Both ended: the first box is kept, the second freed (the limit is one).
    tcp.abort(ms(20), a).unwrap();
    tcp.abort(ms(20), b).unwrap();
    while poll(&mut tcp, 20).is_some() {}
    assert_eq!(tcp.spare_rounds_count(), 1);
    // The next connection takes it as its sending half is made, and the box goes
    // back when that one ends.
    send!(tcp, 30, syn(40_002, 100));
    let iss = synack_to(&mut tcp, 30, 40_002);
    complete(&mut tcp, 31, 40_002, 100, iss);
    assert_eq!(tcp.spare_rounds_count(), 0);
    let c = tcp.accept(l).unwrap();
    tcp.abort(ms(32), c).unwrap();
    assert_eq!(tcp.spare_rounds_count(), 1);
}

#[test]
fn at_max_connections_a_new_connection_takes_a_closed_time_wait_place() {
    let mut tcp = Tcp::new(
        TcpConfig {
            max_connections: 2,
            ..config()
        },
        &secret(9),
    );
    let l = tcp.listen(LOCAL, 16).unwrap();
    for port in [40_000, 40_001] {
        send!(tcp, 0, syn(port, 100));
        let iss = synack_to(&mut tcp, 0, port);
        complete(&mut tcp, 1, port, 100, iss);
        let c = tcp.accept(l).unwrap();
        // We close first: FIN, the peer's ACK and FIN, then TIME-WAIT.
        tcp.close(ms(2), c).unwrap();
        let bytes = recv!(tcp, 2);
        assert!(parse(&bytes).flags.fin());
        send!(
            tcp,
            3,
            Repr {
                src_port: port,
                seq: 101,
                ack: iss + 2,
                flags: Flags::ACK | Flags::FIN,
                ..SEND_TEMPL
            }
        );
        while poll(&mut tcp, 3).is_some() {}
        assert_eq!(
            tcp.info_parked_too(c).map(|i| i.state),
            Some(TcpState::TimeWait)
        );
    }
    assert_eq!(tcp.connection_count(), 2, "both wait in TIME-WAIT");
    send!(tcp, 4, syn(40_002, 100));
    synack_to(&mut tcp, 4, 40_002);
    assert_eq!(tcp.stats().time_wait_recycled, 1);
    assert_eq!(tcp.stats().connection_limit_drops, 0);
    assert_eq!(tcp.connection_count(), 2);
    // The other TIME-WAIT connection still answers its peer (a FIN sent again draws
    // an ACK), so the older one went.
    send!(
        tcp,
        5,
        Repr {
            src_port: 40_001,
            seq: 101,
            ack: 0,
            flags: Flags::ACK | Flags::FIN,
            ..SEND_TEMPL
        }
    );
    let bytes = recv!(tcp, 5);
    let ack = parse(&bytes);
    assert_eq!((ack.dst_port, ack.flags), (40_001, Flags::ACK));
}

#[test]
fn the_table_gives_its_storage_back_when_a_flood_of_connections_has_gone() {
    let mut tcp = Tcp::new(config(), &secret(10));
    let l = tcp.listen(LOCAL, 1024).unwrap();
    let mut children = Vec::new();
    for port in 40_000..41_000 {
        send!(tcp, 0, syn(port, 100));
        let iss = synack_to(&mut tcp, 0, port);
        complete(&mut tcp, 1, port, 100, iss);
        children.push(tcp.accept(l).unwrap());
    }
    assert!(tcp.slot_capacity() >= 1001);
    for &c in children.iter().rev() {
        tcp.abort(ms(2), c).unwrap();
    }
    while poll(&mut tcp, 2).is_some() {}
    assert_eq!(tcp.connection_count(), 0);
    assert!(
        tcp.slot_capacity() <= 16,
        "{} slots kept",
        tcp.slot_capacity()
    );
    // A new connection reuses an index of the old ones, with a generation none of
    // their handles has.
    let fresh = tcp.connect(ms(3), LOCAL, REMOTE, MSS).unwrap();
    assert!(children.iter().all(|&c| c != fresh));
    for &c in &children {
        assert_eq!(tcp.send(ms(3), c, b"x"), Err(TcpError::InvalidHandle));
    }
    assert!(tcp.info(fresh).is_some());
}

#[test]
fn out_of_order_segments_beyond_the_range_limit_are_dropped_and_counted() {
    let (mut tcp, c, iss) = established_with(TcpConfig {
        max_ooo_ranges: 4,
        ..config()
    });
    // Ten segments, each after a hole of its own.
    for i in 0..10u32 {
        send!(
            tcp,
            1,
            Repr {
                seq: RISS + 1 + 100 + i * 200,
                ack: iss,
                payload: &[9; 100],
                ..SEND_TEMPL
            }
        );
    }
    assert_eq!(tcp.stats().out_of_order, 10);
    assert_eq!(tcp.stats().out_of_order_dropped, 6);
    // Filling the first hole makes the first range readable, and no more.
    send!(
        tcp,
        2,
        Repr {
            seq: RISS + 1,
            ack: iss,
            payload: &[1; 100],
            ..SEND_TEMPL
        }
    );
    let mut buf = [0u8; 4000];
    assert_eq!(tcp.recv(ms(3), c, &mut buf), Ok(200));
}

/// `release_rings_above`: with more connections than it, a connection whose rings are
/// empty (all it wrote acknowledged, all it received read) holds none, and the next
/// exchange, on storage from the spare rings, carries its bytes as before; at or below
/// it the rings stay.
#[test]
fn a_quiet_connection_gives_its_rings_back_when_many_are_open() {
    for (above, released) in [(0, true), (1, false)] {
        let config = TcpConfig {
            release_rings_above: above,
            ..config()
        };
        let (mut tcp, c, iss) = established_with(config);
        let mut seq = RISS + 1;
        let mut ours = iss;
        for (t, request, reply) in [
            (20, &b"GET /a"[..], &b"first reply"[..]),
            (40, b"GET /b", b"2"),
        ] {
            send!(
                tcp,
                t,
                Repr {
                    seq,
                    ack: ours,
                    payload: request,
                    ..SEND_TEMPL
                }
            );
            seq += request.len() as u32;
            let mut buf = [0u8; 64];
            let n = tcp.recv(ms(t), c, &mut buf).unwrap();
            assert_eq!(&buf[..n], request);
            tcp.send(ms(t), c, reply).unwrap();
            let out = recv!(tcp, t);
            let seg = parse(&out);
            assert_eq!((seg.seq, seg.ack, seg.payload), (ours, seq, reply));
            ours += reply.len() as u32;
            // The peer acknowledges the reply: nothing is left in either ring.
            send!(
                tcp,
                t + 5,
                Repr {
                    seq,
                    ack: ours,
                    ..SEND_TEMPL
                }
            );
            let (send, recv) = tcp.ring_storage(c).unwrap();
            if released {
                assert_eq!((send, recv), (0, 0), "at {t} ms");
            } else {
                assert!(send > 0 && recv > 0, "at {t} ms: {send}, {recv}");
            }
        }
    }
}
