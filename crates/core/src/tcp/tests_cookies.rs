//! SYN cookies (RFC 4987 §3.6): a listener whose backlog is full answers SYNs with
//! stateless SYN-ACKs, and a returning ACK with a valid cookie opens the connection with
//! the options the cookie kept. A child of `tests`, whose helpers and macros it uses.

use super::*;

/// A listener with a backlog of one, filled by a SYN from port 40000 (left in
/// SYN-RECEIVED).
fn full_listener(config: TcpConfig) -> (Tcp, TcpHandle) {
    let mut tcp = Tcp::new(config, &secret(11));
    let l = tcp.listen(LOCAL, 1).unwrap();
    send!(
        tcp,
        0,
        Repr {
            src_port: 40000,
            seq: 5,
            flags: Flags::SYN,
            ..SEND_TEMPL
        }
    );
    while poll(&mut tcp, 0).is_some() {}
    (tcp, l)
}

/// The peer's SYN with every option.
fn syn_with_options(port: u16, seq: u32) -> Repr<'static> {
    Repr {
        src_port: port,
        seq,
        flags: Flags::SYN,
        options: Options {
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            timestamps: Some((7000, 0)),
            ..SEND_TEMPL.options
        },
        ..SEND_TEMPL
    }
}

fn all_options() -> TcpConfig {
    TcpConfig {
        window_scaling: true,
        timestamps: true,
        sack: true,
        recv_buffer: 256 * 1024,
        ..config()
    }
}

#[test]
fn a_full_backlog_answers_with_a_cookie_and_the_cookie_opens_the_connection() {
    let (mut tcp, l) = full_listener(all_options());
    let sockets = tcp.socket_count();
    send!(tcp, 10, syn_with_options(41000, 90_000));
    let bytes = recv!(tcp, 10);
    let synack = parse(&bytes);
    assert_eq!(synack.flags, Flags::SYN | Flags::ACK);
    assert_eq!(synack.ack, 90_001);
    assert_eq!(synack.options.mss, Some(MSS));
    assert_eq!(
        synack.options.window_scale,
        Some(3),
        "ours, for a 256 KiB buffer"
    );
    assert!(synack.options.sack_permitted);
    let (our_ts, echoed) = synack.options.timestamps.unwrap();
    assert_eq!(echoed, 7000);
    assert_eq!(tcp.socket_count(), sockets, "no state kept for the SYN");
    assert_eq!(tcp.stats().syn_cookies_sent, 1);

    // The ACK returns the cookie, with data; its window is scaled by the peer's 7.
    send!(
        tcp,
        20,
        Repr {
            src_port: 41000,
            seq: 90_001,
            ack: synack.seq.wrapping_add(1),
            window: 100,
            options: Options {
                timestamps: Some((7010, our_ts)),
                ..SEND_TEMPL.options
            },
            payload: b"hello",
            ..SEND_TEMPL
        }
    );
    assert_eq!(tcp.stats().syn_cookies_accepted, 1);
    let c = tcp
        .accept(l)
        .expect("the cookie's connection waits for accept");
    let info = tcp.info(c).unwrap();
    assert_eq!(info.state, TcpState::Established);
    assert_eq!(info.wscale, Some((3, 7)));
    assert!(info.sack && info.timestamps);
    assert_eq!(info.snd_wnd, 100 << 7);
    assert_eq!(info.snd_mss, MSS - 12, "our MSS less the timestamp option");
    let mut buf = [0u8; 16];
    assert_eq!(tcp.recv(ms(20), c, &mut buf), Ok(5));
    assert_eq!(&buf[..5], b"hello");
}

#[test]
fn without_timestamps_a_cookie_keeps_only_the_mss() {
    let (mut tcp, l) = full_listener(all_options());
    let syn = Repr {
        options: Options {
            timestamps: None,
            ..syn_with_options(41001, 5).options
        },
        ..syn_with_options(41001, 5)
    };
    send!(tcp, 10, syn);
    let bytes = recv!(tcp, 10);
    let synack = parse(&bytes);
    assert_eq!(synack.options.window_scale, None);
    assert!(!synack.options.sack_permitted);
    assert_eq!(synack.options.timestamps, None);
    send!(
        tcp,
        20,
        Repr {
            src_port: 41001,
            seq: 6,
            ack: synack.seq.wrapping_add(1),
            ..SEND_TEMPL
        }
    );
    let c = tcp.accept(l).unwrap();
    let info = tcp.info(c).unwrap();
    assert_eq!(
        (info.wscale, info.sack, info.timestamps),
        (None, false, false)
    );
}

#[test]
fn a_forged_or_stale_cookie_opens_nothing_and_draws_a_rst() {
    let (mut tcp, l) = full_listener(all_options());
    send!(tcp, 10, syn_with_options(41002, 1000));
    let bytes = recv!(tcp, 10);
    let cookie = parse(&bytes).seq;
    // A blind attacker guessing the cookie.
    let guess = |ack: u32, t: u64, tcp: &mut Tcp| {
        send!(
            tcp,
            t,
            Repr {
                src_port: 41002,
                seq: 1001,
                ack,
                ..SEND_TEMPL
            }
        );
    };
    guess(cookie.wrapping_add(2), 20, &mut tcp);
    let rst = parse(&recv!(tcp, 20)).flags;
    assert_eq!(rst, Flags::RST);
    // The right cookie, three minutes later: expired.
    guess(cookie.wrapping_add(1), 180_000, &mut tcp);
    assert_eq!(parse(&recv!(tcp, 180_000)).flags, Flags::RST);
    assert_eq!(
        tcp.stats().syn_cookies_rejected,
        1,
        "expired: no cookies lately"
    );
    assert_eq!(tcp.stats().syn_cookies_accepted, 0);
    assert_eq!(tcp.accept(l), Err(TcpError::WouldBlock));
}

#[test]
fn a_flood_of_spoofed_syns_does_not_keep_a_client_out() {
    // 10,000 SYNs from spoofed ports against a backlog of 1: each gets a cookie and
    // none leaves state; the legitimate client's handshake completes.
    let (mut tcp, l) = full_listener(all_options());
    let sockets = tcp.socket_count();
    for i in 0..10_000u32 {
        send!(tcp, 10, syn_with_options(1024 + (i % 30_000) as u16, i * 7));
        while poll(&mut tcp, 10).is_some() {}
    }
    assert_eq!(tcp.socket_count(), sockets);
    send!(tcp, 11, syn_with_options(50_000, 424_242));
    let bytes = recv!(tcp, 11);
    let synack = parse(&bytes);
    let (our_ts, _) = synack.options.timestamps.unwrap();
    send!(
        tcp,
        12,
        Repr {
            src_port: 50_000,
            seq: 424_243,
            ack: synack.seq.wrapping_add(1),
            options: Options {
                timestamps: Some((7001, our_ts)),
                ..SEND_TEMPL.options
            },
            ..SEND_TEMPL
        }
    );
    assert!(tcp.accept(l).is_ok());
    assert_eq!(tcp.stats().syn_cookies_sent, 10_001);
}

#[test]
fn cookies_off_drop_the_syn() {
    let (mut tcp, _l) = full_listener(TcpConfig {
        syn_cookies: false,
        ..all_options()
    });
    send!(tcp, 10, syn_with_options(41003, 5));
    recv_nothing!(tcp, 10);
    assert_eq!(tcp.stats().listen_overflows, 1);
}

/// An ECN-setup SYN to a full backlog: the cookie's SYN-ACK agrees (ECE) when the
/// timestamp can remember it, and the connection the cookie opens uses ECN; without
/// timestamps it cannot, so the SYN-ACK does not agree.
#[test]
fn a_cookie_keeps_ecn_in_the_timestamp() {
    for timestamps in [true, false] {
        let (mut tcp, l) = full_listener(all_options());
        let mut syn = syn_with_options(41002, 700);
        syn.flags = Flags::SYN | Flags::ECE | Flags::CWR;
        if !timestamps {
            syn.options.timestamps = None;
        }
        send!(tcp, 10, syn);
        let bytes = recv!(tcp, 10);
        let synack = parse(&bytes);
        let flags = synack.flags;
        let expected = if timestamps {
            Flags::SYN | Flags::ACK | Flags::ECE
        } else {
            Flags::SYN | Flags::ACK
        };
        assert_eq!(flags, expected, "timestamps {timestamps}");
        send!(
            tcp,
            20,
            Repr {
                src_port: 41002,
                seq: 701,
                ack: synack.seq.wrapping_add(1),
                options: Options {
                    timestamps: synack.options.timestamps.map(|(ours, _)| (7010, ours)),
                    ..SEND_TEMPL.options
                },
                ..SEND_TEMPL
            }
        );
        let c = tcp.accept(l).expect("the cookie's connection");
        assert_eq!(tcp.info(c).unwrap().ecn, timestamps);
    }
}
