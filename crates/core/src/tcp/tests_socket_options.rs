//! Per-socket settings (Linux's TCP_CONGESTION, SO_RCVBUF, SO_SNDBUF, TCP_MAXSEG on a
//! listener, TCP_USER_TIMEOUT, TCP_NOTSENT_LOWAT, TCP_SYNCNT): what each changes, and that a
//! listener's children inherit them. A child of `tests`, whose helpers it uses.

use super::*;

/// A listener on LOCAL set up by `set`, and the SYN-ACK it answers a SYN (with the
/// peer's `options`) with; the handshake is then completed: (tcp, child, SYN-ACK).
fn child_of(
    config: TcpConfig,
    options: Options,
    set: &[SocketOption],
) -> (Tcp, TcpHandle, TcpHandle, Vec<u8>) {
    let mut tcp = Tcp::new(config, &secret(9));
    let listener = tcp.listen(LOCAL, 4).unwrap();
    for option in set {
        tcp.set_option(ms(0), listener, *option).unwrap();
    }
    send!(
        tcp,
        0,
        Repr {
            seq: RISS,
            flags: Flags::SYN,
            options,
            ..SEND_TEMPL
        }
    );
    let synack = recv!(tcp, 0);
    let iss = parse(&synack).seq;
    send!(
        tcp,
        10,
        Repr {
            seq: RISS + 1,
            ack: iss + 1,
            ..SEND_TEMPL
        }
    );
    let child = tcp.accept(listener).unwrap();
    (tcp, listener, child, synack)
}

fn peer_mss() -> Options {
    Options {
        mss: Some(MSS),
        ..SEND_TEMPL.options
    }
}

#[test]
fn a_listeners_congestion_control_is_its_childrens() {
    let (tcp, listener, child, _) = child_of(
        config(),
        peer_mss(),
        &[SocketOption::Congestion(cc::CcAlgorithm::Cubic)],
    );
    assert_eq!(tcp.congestion(listener), Some("cubic"));
    assert_eq!(tcp.info(child).unwrap().congestion, "cubic");
    // The stack's default for a listener that set none.
    let (tcp, listener, child, _) = child_of(config(), peer_mss(), &[]);
    assert_eq!(tcp.congestion(listener), Some("newreno"));
    assert_eq!(tcp.info(child).unwrap().congestion, "newreno");
}

#[test]
fn congestion_control_changes_on_an_established_connection_keeping_its_window() {
    let (mut tcp, c, _) = established();
    let before = tcp.info(c).unwrap();
    assert_eq!(before.congestion, "newreno");
    tcp.set_option(ms(20), c, SocketOption::Congestion(cc::CcAlgorithm::Bbr))
        .unwrap();
    let after = tcp.info(c).unwrap();
    assert_eq!(after.congestion, "bbr");
    assert_eq!(tcp.congestion(c), Some("bbr"));
    assert_eq!(after.cwnd, before.cwnd);
}

#[test]
fn congestion_control_set_before_the_handshake_is_the_one_it_starts_with() {
    let mut tcp = Tcp::new(config(), &secret(3));
    let c = tcp.connect(ms(0), REMOTE, LOCAL, MSS).unwrap();
    tcp.set_option(ms(0), c, SocketOption::Congestion(cc::CcAlgorithm::Vegas))
        .unwrap();
    assert_eq!(tcp.info(c).unwrap().congestion, "vegas");
    let mut buf = vec![0u8; 1500];
    let tx = tcp.poll_transmit(ms(0), &mut buf).expect("the SYN");
    let packet = Packet::new_checked(&buf[..tx.len]).unwrap();
    let syn = Repr::parse(&packet, REMOTE.ip(), LOCAL.ip(), true).unwrap();
    // The peer (LOCAL) answers.
    let synack = Repr {
        src_port: LOCAL.port(),
        dst_port: syn.src_port,
        seq: 5000,
        ack: syn.seq + 1,
        flags: Flags::SYN | Flags::ACK,
        options: peer_mss(),
        ..SEND_TEMPL
    };
    tcp.handle_segment(ms(5), *LOCAL.ip(), *REMOTE.ip(), &synack);
    let info = tcp.info(c).unwrap();
    assert_eq!(info.state, TcpState::Established);
    assert_eq!(info.congestion, "vegas");
}

#[test]
fn a_listeners_receive_buffer_picks_its_childrens_window_scale_and_window() {
    let scaling = TcpConfig {
        window_scaling: true,
        ..config()
    };
    let offer = Options {
        window_scale: Some(7),
        ..peer_mss()
    };
    // The stack's 64000 bytes need no shift.
    let (_, _, _, synack) = child_of(scaling.clone(), offer, &[]);
    assert_eq!(parse(&synack).options.window_scale, Some(0));
    // 1 MiB on the listener: RFC 7323 §2.3, the smallest shift that fits it in 16 bits.
    let (mut tcp, _, child, synack) =
        child_of(scaling, offer, &[SocketOption::RecvBuffer(1 << 20)]);
    assert_eq!(parse(&synack).options.window_scale, Some(5));
    assert_eq!(tcp.info(child).unwrap().wscale, Some((5, 7)));
    // The first segment after the handshake offers all of it (scaled by 2^5).
    tcp.send(ms(20), child, b"x").unwrap();
    let segment = recv!(tcp, 20);
    assert_eq!(u32::from(parse(&segment).window) << 5, 1 << 20);
}

#[test]
fn a_receive_buffer_set_before_the_syn_goes_picks_its_window_scale() {
    let mut tcp = Tcp::new(
        TcpConfig {
            window_scaling: true,
            ..config()
        },
        &secret(3),
    );
    let c = tcp.connect(ms(0), REMOTE, LOCAL, MSS).unwrap();
    tcp.set_option(ms(0), c, SocketOption::RecvBuffer(4 << 20))
        .unwrap();
    let mut buf = vec![0u8; 1500];
    let tx = tcp.poll_transmit(ms(0), &mut buf).expect("the SYN");
    let packet = Packet::new_checked(&buf[..tx.len]).unwrap();
    let syn = Repr::parse(&packet, REMOTE.ip(), LOCAL.ip(), true).unwrap();
    assert_eq!(syn.options.window_scale, Some(7));
    assert_eq!(syn.window, 0xffff);
}

#[test]
fn a_listeners_maxseg_caps_the_mss_of_its_syn_acks() {
    let (tcp, _, child, synack) = child_of(config(), peer_mss(), &[SocketOption::MaxSegment(700)]);
    assert_eq!(parse(&synack).options.mss, Some(700));
    assert_eq!(tcp.info(child).unwrap().snd_mss, 700);
    // 0 clears it.
    let (_, _, _, synack) = child_of(
        config(),
        peer_mss(),
        &[SocketOption::MaxSegment(700), SocketOption::MaxSegment(0)],
    );
    assert_eq!(parse(&synack).options.mss, Some(MSS));
}

#[test]
fn a_send_buffer_set_on_an_empty_connection_bounds_its_writes() {
    let (mut tcp, c, _) = established();
    tcp.set_option(ms(20), c, SocketOption::SendBuffer(3000))
        .unwrap();
    assert_eq!(tcp.send(ms(20), c, &[1u8; 5000]), Ok(3000));
    assert!(!tcp.writable(c));
    // A larger one lets more in even with data queued (a full buffer only grows).
    tcp.set_option(ms(20), c, SocketOption::SendBuffer(4000))
        .unwrap();
    assert!(tcp.writable(c));
    assert_eq!(tcp.send(ms(20), c, &[1u8; 5000]), Ok(1000));
}

#[test]
fn a_connections_user_timeout_ends_it_when_the_stacks_has_none() {
    let (mut tcp, c, _) = established();
    tcp.set_option(
        ms(50),
        c,
        SocketOption::UserTimeout(Duration::from_millis(1500)),
    )
    .unwrap();
    tcp.send(ms(100), c, b"x").unwrap();
    let _ = poll(&mut tcp, 100);
    for t in (100..2000).step_by(10) {
        tcp.handle_timeout(ms(t));
        while poll(&mut tcp, t).is_some() {}
    }
    assert_eq!(tcp.info(c).unwrap().state, TcpState::Closed);
    let mut buf = [0u8; 1];
    assert_eq!(tcp.recv(ms(2000), c, &mut buf), Err(TcpError::TimedOut));
    // Without it the same connection still retransmits.
    let (mut tcp, c, _) = established();
    tcp.send(ms(100), c, b"x").unwrap();
    for t in (100..2000).step_by(10) {
        tcp.handle_timeout(ms(t));
        while poll(&mut tcp, t).is_some() {}
    }
    assert_eq!(tcp.info(c).unwrap().state, TcpState::Established);
}

#[test]
fn notsent_lowat_makes_a_connection_writable_only_below_it() {
    let (mut tcp, c, snd) = established();
    // The peer's window (64000) takes all; the 10-segment initial window does not:
    // 10000 bytes go, 5000 wait unsent.
    assert_eq!(tcp.send(ms(20), c, &[1u8; 15000]), Ok(15000));
    while poll(&mut tcp, 20).is_some() {}
    assert!(tcp.writable(c));
    tcp.set_option(ms(20), c, SocketOption::NotSentLowWater(3000))
        .unwrap();
    assert!(!tcp.writable(c));
    // The peer acknowledges 2000: cwnd grows by 2000, 4000 more go, 1000 remain
    // unsent, fewer than half the limit.
    send!(tcp, 30, ack_of(snd + 2000));
    while poll(&mut tcp, 30).is_some() {}
    assert_eq!(
        tcp.info(c).unwrap().bytes_queued - tcp.info(c).unwrap().bytes_in_flight,
        1000
    );
    assert!(tcp.writable(c));
    tcp.set_option(ms(30), c, SocketOption::NotSentLowWater(u32::MAX))
        .unwrap();
    assert!(tcp.writable(c));
}

#[test]
fn notsent_lowat_stops_a_write_once_the_unsent_bytes_reach_it() {
    let (mut tcp, c, snd) = established();
    // Without the option the buffer alone limits a write.
    assert_eq!(tcp.send(ms(20), c, &[1u8; 15000]), Ok(15000));
    while poll(&mut tcp, 20).is_some() {}
    // 10000 bytes went (the initial window), 5000 wait unsent; a limit of 8000 lets a
    // write queue 3000 more (Linux's `tcp_sendmsg` stops at the limit), then none.
    tcp.set_option(ms(20), c, SocketOption::NotSentLowWater(8000))
        .unwrap();
    assert_eq!(
        tcp.send_vectored(ms(20), c, [&[2u8; 2000][..], &[3u8; 2000][..]]),
        Ok(3000)
    );
    assert_eq!(tcp.send(ms(20), c, &[4u8; 100]), Err(TcpError::WouldBlock));
    // An ACK opens the window: more goes, and the write takes what the limit allows.
    send!(tcp, 30, ack_of(snd + 10000));
    while poll(&mut tcp, 30).is_some() {}
    let info = tcp.info(c).unwrap();
    let unsent = (info.bytes_queued - info.bytes_in_flight) as usize;
    assert!(unsent < 8000);
    assert_eq!(tcp.send(ms(30), c, &[5u8; 20000]), Ok(8000 - unsent));
    // Cleared, the buffer alone limits it again.
    tcp.set_option(ms(30), c, SocketOption::NotSentLowWater(u32::MAX))
        .unwrap();
    assert_eq!(tcp.send(ms(30), c, &[6u8; 100]), Ok(100));
}

fn ack_of(ack: u32) -> Repr<'static> {
    Repr {
        seq: RISS + 1,
        ack,
        ..SEND_TEMPL
    }
}

#[test]
fn a_connections_syn_retries_end_its_handshake_sooner() {
    let (mut tcp, c, iss) = syn_sent(config());
    tcp.set_option(ms(0), c, SocketOption::SynRetries(1))
        .unwrap();
    // One retransmission at the initial RTO (1 s), then the handshake times out when
    // the backed-off RTO (2 s more) runs out: Linux's TCP_SYNCNT 1.
    tcp.handle_timeout(ms(1000));
    assert_eq!(parse(&recv!(tcp, 1000)).seq, iss);
    assert_eq!(tcp.poll_timeout(), Some(ms(3000)));
    tcp.handle_timeout(ms(3000));
    recv_nothing!(tcp, 3000);
    assert_eq!(tcp.info(c).unwrap().state, TcpState::Closed);
    assert_eq!(tcp.send(ms(3000), c, b"x"), Err(TcpError::TimedOut));
    // Without it the stack's six retransmissions hold: still trying at 3 s.
    let (mut tcp, c, _) = syn_sent(config());
    tcp.handle_timeout(ms(1000));
    recv!(tcp, 1000);
    tcp.handle_timeout(ms(3000));
    recv!(tcp, 3000);
    assert_eq!(tcp.info(c).unwrap().state, TcpState::SynSent);
}
