//! Segment-level table tests: `Tcp` driven directly, one group per state.

use alloc::vec;
use alloc::vec::Vec;
use core::net::{Ipv4Addr, SocketAddrV4};

use impnet_wire::tcp::{Flags, Options, Packet, Repr, SackBlock};

use super::*;
use crate::testutil::secret;
use crate::time::{Duration, Instant};

const LOCAL: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 80);
const REMOTE: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 49500);
/// The peer's ISN.
const RISS: u32 = 1000;
const MSS: u16 = 1000;

/// What the peer sends.
const SEND_TEMPL: Repr<'static> = Repr {
    src_port: 49500,
    dst_port: 80,
    seq: 0,
    ack: 0,
    flags: Flags::ACK,
    window: 64000,
    urgent: 0,
    options: Options {
        mss: None,
        window_scale: None,
        sack_permitted: false,
        sack_blocks: [SackBlock { left: 0, right: 0 }; 4],
        sack_len: 0,
        timestamps: None,
        fast_open: None,
    },
    payload: &[],
};

/// What we send.
const RECV_TEMPL: Repr<'static> = Repr {
    src_port: 80,
    dst_port: 49500,
    ..SEND_TEMPL
};

/// Plain settings: no options beyond MSS, so segments are easy to spell out.
fn config() -> TcpConfig {
    TcpConfig {
        window_scaling: false,
        timestamps: false,
        sack: false,
        recv_buffer: 64000,
        send_buffer: 64000,
        mss: MSS,
        msl: Duration::from_secs(1),
        ..TcpConfig::default()
    }
}

fn ms(t: u64) -> Instant {
    Instant::from_millis(t)
}

fn parse(bytes: &[u8]) -> Repr<'_> {
    let packet = Packet::new_checked(bytes).unwrap();
    Repr::parse(&packet, LOCAL.ip(), REMOTE.ip(), true).expect("valid segment with a good checksum")
}

fn poll(tcp: &mut Tcp, t: u64) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 1500];
    let tx = tcp.poll_transmit(ms(t), &mut buf)?;
    assert_eq!(
        (tx.src, tx.dst),
        ((*LOCAL.ip()).into(), (*REMOTE.ip()).into())
    );
    Some(buf[..tx.len].to_vec())
}

macro_rules! send {
    ($tcp:expr, $t:expr, $repr:expr) => {
        $tcp.handle_segment(ms($t), *REMOTE.ip(), *LOCAL.ip(), &$repr)
    };
}

macro_rules! recv {
    ($tcp:expr, $t:expr) => {
        poll(&mut $tcp, $t).expect("a segment")
    };
    ($tcp:expr, $t:expr, $expected:expr) => {{
        let bytes = poll(&mut $tcp, $t).expect("a segment");
        assert_eq!(parse(&bytes), $expected);
    }};
}

macro_rules! recv_nothing {
    ($tcp:expr, $t:expr) => {
        if let Some(bytes) = poll(&mut $tcp, $t) {
            panic!("expected nothing, got {:?}", parse(&bytes));
        }
    };
}

/// A connection accepted from a listener: returns (tcp, handle, our ISS + 1).
fn established_with(config: TcpConfig) -> (Tcp, TcpHandle, u32) {
    established_with_options(
        config,
        Options {
            mss: Some(MSS),
            ..SEND_TEMPL.options
        },
    )
}

/// [`established_with`], the peer's SYN carrying `options`.
fn established_with_options(config: TcpConfig, options: Options) -> (Tcp, TcpHandle, u32) {
    established_keyed(config, options, &secret(7))
}

/// [`established_with_options`] in a `Tcp` keyed by `key`.
fn established_keyed(
    config: TcpConfig,
    options: Options,
    key: &crate::secret::Secret,
) -> (Tcp, TcpHandle, u32) {
    let mut tcp = Tcp::new(config, key);
    let listener = tcp.listen(LOCAL, 4).unwrap();
    let iss = handshake(&mut tcp, options);
    let handle = tcp.accept(listener).unwrap();
    tcp.close(ms(10), listener).unwrap();
    while tcp.poll_event().is_some() {}
    recv_nothing!(tcp, 10);
    (tcp, handle, iss + 1)
}

/// The peer's SYN (with `options`) at 0 ms, our SYN-ACK, the peer's ACK at 10 ms, to
/// a listener on `LOCAL`: returns our ISS.
fn handshake(tcp: &mut Tcp, options: Options) -> u32 {
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
    let bytes = recv!(*tcp, 0);
    let synack = parse(&bytes);
    assert_eq!(synack.flags, Flags::SYN | Flags::ACK);
    assert_eq!(synack.ack, RISS + 1);
    let iss = synack.seq;
    send!(
        tcp,
        10,
        Repr {
            seq: RISS + 1,
            ack: iss + 1,
            ..SEND_TEMPL
        }
    );
    iss
}

fn established() -> (Tcp, TcpHandle, u32) {
    established_with(config())
}

fn ack_templ(seq: u32, ack: u32) -> Repr<'static> {
    Repr {
        seq,
        ack,
        window: 64000,
        ..RECV_TEMPL
    }
}

// ---- CLOSED / LISTEN ------------------------------------------------------------------

/// The ISN of the SYN-ACK a listener of a default-configured `Tcp` keyed by `key`
/// answers the same SYN with, at the same time.
fn synack_isn(key: &crate::secret::Secret) -> u32 {
    let mut tcp = Tcp::new(config(), key);
    tcp.listen(LOCAL, 4).unwrap();
    send!(
        tcp,
        0,
        Repr {
            seq: RISS,
            flags: Flags::SYN,
            ..SEND_TEMPL
        }
    );
    parse(&recv!(tcp, 0)).seq
}

#[test]
fn isns_are_keyed_by_the_secret_not_by_the_configuration() {
    // Same configuration, same tuple, same time: only the secret differs. With a seed in
    // the configuration defaulting to 0, every embedder's ISNs were one public function.
    let isns: Vec<u32> = (1..=4).map(|seed| synack_isn(&secret(seed))).collect();
    for (i, a) in isns.iter().enumerate() {
        for b in &isns[i + 1..] {
            assert_ne!(a, b, "{isns:?}");
        }
    }
    // And one secret always gives the same ISN (the simulator replays runs).
    assert_eq!(synack_isn(&secret(1)), isns[0]);
}

#[test]
fn syn_to_closed_port_gets_rst_ack() {
    let mut tcp = Tcp::new(config(), &secret(1));
    send!(
        tcp,
        0,
        Repr {
            seq: 500,
            flags: Flags::SYN,
            ..SEND_TEMPL
        }
    );
    recv!(
        tcp,
        0,
        Repr {
            seq: 0,
            ack: 501,
            flags: Flags::RST | Flags::ACK,
            window: 0,
            ..RECV_TEMPL
        }
    );
    assert_eq!(tcp.stats().no_socket, 1);
}

#[test]
fn ack_to_closed_port_gets_rst_at_ack() {
    let mut tcp = Tcp::new(config(), &secret(1));
    send!(
        tcp,
        0,
        Repr {
            seq: 500,
            ack: 777,
            payload: b"abc",
            ..SEND_TEMPL
        }
    );
    recv!(
        tcp,
        0,
        Repr {
            seq: 777,
            ack: 0,
            flags: Flags::RST,
            window: 0,
            ..RECV_TEMPL
        }
    );
    send!(
        tcp,
        0,
        Repr {
            seq: 500,
            flags: Flags::RST,
            ..SEND_TEMPL
        }
    );
    recv_nothing!(tcp, 0);
}

#[test]
fn listen_ack_gets_rst_and_rst_is_ignored() {
    let mut tcp = Tcp::new(config(), &secret(1));
    tcp.listen(LOCAL, 1).unwrap();
    send!(
        tcp,
        0,
        Repr {
            seq: 5,
            ack: 9,
            ..SEND_TEMPL
        }
    );
    recv!(
        tcp,
        0,
        Repr {
            seq: 9,
            ack: 0,
            flags: Flags::RST,
            window: 0,
            ..RECV_TEMPL
        }
    );
    send!(
        tcp,
        0,
        Repr {
            seq: 5,
            flags: Flags::RST,
            ..SEND_TEMPL
        }
    );
    recv_nothing!(tcp, 0);
    assert_eq!(tcp.listen(LOCAL, 1), Err(TcpError::AddrInUse));
}

#[test]
fn listen_backlog_bounds_syn_received_children() {
    let mut tcp = Tcp::new(config(), &secret(1));
    let l = tcp.listen(LOCAL, 2).unwrap();
    for port in 1..=3u16 {
        tcp.handle_segment(
            ms(0),
            *REMOTE.ip(),
            *LOCAL.ip(),
            &Repr {
                src_port: port,
                seq: 1,
                flags: Flags::SYN,
                ..SEND_TEMPL
            },
        );
    }
    assert_eq!(tcp.socket_count(), 3);
    assert_eq!(tcp.stats().listen_overflows, 1);
    assert_eq!(tcp.accept(l), Err(TcpError::WouldBlock));
    tcp.close(ms(0), l).unwrap();
    assert_eq!(tcp.socket_count(), 0);
}

#[test]
fn passive_open_handshake_and_accept() {
    let mut tcp = Tcp::new(config(), &secret(3));
    let l = tcp.listen(LOCAL, 4).unwrap();
    send!(
        tcp,
        0,
        Repr {
            seq: RISS,
            flags: Flags::SYN,
            options: Options {
                mss: Some(1200),
                ..SEND_TEMPL.options
            },
            ..SEND_TEMPL
        }
    );
    let bytes = recv!(tcp, 0);
    let synack = parse(&bytes);
    assert_eq!(
        synack,
        Repr {
            seq: synack.seq,
            ack: RISS + 1,
            flags: Flags::SYN | Flags::ACK,
            options: Options {
                mss: Some(MSS),
                ..SEND_TEMPL.options
            },
            ..ack_templ(0, 0)
        }
    );
    // SYN-ACK retransmitted after the RTO when the ACK does not come.
    recv_nothing!(tcp, 500);
    tcp.handle_timeout(ms(1000));
    let again = recv!(tcp, 1000);
    assert_eq!(parse(&again).seq, synack.seq);
    send!(
        tcp,
        1010,
        Repr {
            seq: RISS + 1,
            ack: synack.seq + 1,
            ..SEND_TEMPL
        }
    );
    assert_eq!(tcp.poll_event(), Some(TcpEvent::Readable(l)));
    let c = tcp.accept(l).unwrap();
    assert_eq!(tcp.info(c).unwrap().state, TcpState::Established);
    // RFC 9293 §3.7.1: bounded by the peer's 1200 and by our own MSS.
    assert_eq!(tcp.info(c).unwrap().snd_mss, 1200.min(MSS));
    // The SYN-ACK went out twice: the ACK may answer either (Karn), so no RTT sample.
    assert_eq!(tcp.info(c).unwrap().srtt, None);
}

/// Without timestamps, a handshake whose SYN (or SYN-ACK) went out once gives the
/// first RTT sample (RFC 6298 §2.1), on both sides of the handshake.
#[test]
fn handshake_gives_an_rtt_sample_without_timestamps() {
    let mut tcp = Tcp::new(config(), &secret(3));
    let l = tcp.listen(LOCAL, 4).unwrap();
    send!(
        tcp,
        100,
        Repr {
            seq: RISS,
            flags: Flags::SYN,
            ..SEND_TEMPL
        }
    );
    let synack = parse(&recv!(tcp, 100)).seq;
    send!(
        tcp,
        130,
        Repr {
            seq: RISS + 1,
            ack: synack + 1,
            ..SEND_TEMPL
        }
    );
    let c = tcp.accept(l).unwrap();
    assert_eq!(tcp.info(c).unwrap().srtt, Some(Duration::from_millis(30)));
    // The active side: SYN at 0, SYN-ACK at 25 ms.
    let (mut tcp, c, iss) = syn_sent(config());
    send!(
        tcp,
        25,
        Repr {
            seq: RISS,
            ack: iss + 1,
            flags: Flags::SYN | Flags::ACK,
            ..SEND_TEMPL
        }
    );
    assert_eq!(tcp.info(c).unwrap().state, TcpState::Established);
    assert_eq!(tcp.info(c).unwrap().srtt, Some(Duration::from_millis(25)));
}

/// RACK-TLP's state is allocated when the connection first sends data, not before: an
/// idle connection end (both the passive and the active one, SACK negotiated) keeps 8
/// bytes for it.
#[test]
fn rack_state_is_allocated_on_the_first_data_sent() {
    let sack = Options {
        mss: Some(MSS),
        sack_permitted: true,
        ..SEND_TEMPL.options
    };
    let config = TcpConfig {
        sack: true,
        ..config()
    };
    let (mut tcp, c, iss) = established_with_options(config.clone(), sack);
    assert_eq!(tcp.rack_allocated(c), Some(false));
    // An ACK for nothing new (a window update) leaves it unallocated.
    send!(
        tcp,
        20,
        Repr {
            seq: RISS + 1,
            ack: iss,
            window: 65000,
            ..SEND_TEMPL
        }
    );
    assert_eq!(tcp.rack_allocated(c), Some(false));
    tcp.send(ms(30), c, b"hello").unwrap();
    let seg = parse(&recv!(tcp, 30)).payload.to_vec();
    assert_eq!(seg, b"hello");
    assert_eq!(tcp.rack_allocated(c), Some(true));
    // The active side.
    let mut tcp = Tcp::new(config, &secret(9));
    let c = tcp.connect(ms(0), LOCAL, REMOTE, MSS).unwrap();
    let iss = parse(&recv!(tcp, 0)).seq;
    send!(
        tcp,
        25,
        Repr {
            seq: RISS,
            ack: iss + 1,
            flags: Flags::SYN | Flags::ACK,
            options: sack,
            ..SEND_TEMPL
        }
    );
    assert_eq!(tcp.info(c).unwrap().state, TcpState::Established);
    assert_eq!(tcp.rack_allocated(c), Some(false));
}

// ---- SYN-SENT ----------------------------------------------------------------------------

fn syn_sent(config: TcpConfig) -> (Tcp, TcpHandle, u32) {
    let mut tcp = Tcp::new(config, &secret(9));
    let c = tcp.connect(ms(0), LOCAL, REMOTE, MSS).unwrap();
    let bytes = recv!(tcp, 0);
    let syn = parse(&bytes);
    assert_eq!(
        syn,
        Repr {
            seq: syn.seq,
            ack: 0,
            // An ECN-setup SYN (RFC 3168 §6.1.1), `EcnMode::Request` being the default.
            flags: Flags::SYN | Flags::ECE | Flags::CWR,
            options: Options {
                mss: Some(MSS),
                ..SEND_TEMPL.options
            },
            ..ack_templ(0, 0)
        }
    );
    (tcp, c, syn.seq)
}

#[test]
fn active_open_and_data_then_active_close() {
    let (mut tcp, c, iss) = syn_sent(config());
    send!(
        tcp,
        10,
        Repr {
            seq: RISS,
            ack: iss + 1,
            flags: Flags::SYN | Flags::ACK,
            options: Options {
                mss: Some(MSS),
                ..SEND_TEMPL.options
            },
            ..SEND_TEMPL
        }
    );
    recv!(tcp, 10, ack_templ(iss + 1, RISS + 1));
    assert_eq!(tcp.poll_event(), Some(TcpEvent::Writable(c)));
    assert_eq!(tcp.send(ms(10), c, b"hello"), Ok(5));
    recv!(
        tcp,
        10,
        Repr {
            flags: Flags::ACK | Flags::PSH,
            payload: b"hello",
            ..ack_templ(iss + 1, RISS + 1)
        }
    );
    send!(
        tcp,
        20,
        Repr {
            seq: RISS + 1,
            ack: iss + 6,
            ..SEND_TEMPL
        }
    );
    tcp.close(ms(20), c).unwrap();
    recv!(
        tcp,
        20,
        Repr {
            flags: Flags::FIN | Flags::ACK,
            ..ack_templ(iss + 6, RISS + 1)
        }
    );
    send!(
        tcp,
        30,
        Repr {
            seq: RISS + 1,
            ack: iss + 7,
            ..SEND_TEMPL
        }
    );
    assert_eq!(tcp.info(c).unwrap().state, TcpState::FinWait2);
    send!(
        tcp,
        40,
        Repr {
            seq: RISS + 1,
            ack: iss + 7,
            flags: Flags::FIN | Flags::ACK,
            ..SEND_TEMPL
        }
    );
    recv!(tcp, 40, ack_templ(iss + 7, RISS + 2));
    assert_eq!(tcp.info_parked_too(c).unwrap().state, TcpState::TimeWait);
    // A retransmitted FIN in TIME-WAIT is acknowledged again.
    send!(
        tcp,
        50,
        Repr {
            seq: RISS + 1,
            ack: iss + 7,
            flags: Flags::FIN | Flags::ACK,
            ..SEND_TEMPL
        }
    );
    recv!(tcp, 50, ack_templ(iss + 7, RISS + 2));
    tcp.handle_timeout(ms(1000));
    assert_eq!(tcp.socket_count(), 1);
    tcp.handle_timeout(ms(2050));
    assert_eq!(tcp.socket_count(), 0);
    assert_eq!(tcp.timer_count(), 0);
}

#[test]
fn syn_sent_bad_ack_gets_rst_and_rst_refuses() {
    let (mut tcp, c, iss) = syn_sent(config());
    send!(
        tcp,
        5,
        Repr {
            seq: 1,
            ack: iss + 100,
            flags: Flags::SYN | Flags::ACK,
            ..SEND_TEMPL
        }
    );
    recv!(
        tcp,
        5,
        Repr {
            seq: iss + 100,
            ack: 0,
            flags: Flags::RST,
            window: 0,
            ..RECV_TEMPL
        }
    );
    // A RST without an acceptable ACK is dropped; with one, the open is refused.
    send!(
        tcp,
        6,
        Repr {
            seq: 0,
            ack: iss + 5,
            flags: Flags::RST | Flags::ACK,
            ..SEND_TEMPL
        }
    );
    assert_eq!(tcp.info(c).unwrap().state, TcpState::SynSent);
    send!(
        tcp,
        7,
        Repr {
            seq: 0,
            ack: iss + 1,
            flags: Flags::RST | Flags::ACK,
            ..SEND_TEMPL
        }
    );
    assert_eq!(tcp.info(c).unwrap().state, TcpState::Closed);
    let mut buf = [0u8; 4];
    assert_eq!(
        tcp.recv(ms(7), c, &mut buf),
        Err(TcpError::ConnectionRefused)
    );
    tcp.close(ms(7), c).unwrap();
    assert_eq!(tcp.socket_count(), 0);
}

/// `syn_sent_tsecr_check` (Linux's `tcp_rcv_synsent_state_process`): a SYN-ACK that
/// echoes a timestamp none of our SYNs carried is answered with a RST as a bad ACK
/// would be, and the connection stays in SYN-SENT; a good one then completes it.
/// Without the switch the same SYN-ACK completes the handshake.
#[test]
fn syn_sent_refuses_a_foreign_timestamp_echo_when_configured() {
    for check in [true, false] {
        let mut tcp = Tcp::new(
            TcpConfig {
                timestamps: true,
                syn_sent_tsecr_check: check,
                ..config()
            },
            &secret(9),
        );
        let c = tcp.connect(ms(100), LOCAL, REMOTE, MSS).unwrap();
        let syn_bytes = recv!(tcp, 100);
        let syn = parse(&syn_bytes);
        assert_eq!(syn.options.timestamps, Some((100, 0)));
        let synack = |ecr: u32| Repr {
            seq: RISS,
            ack: syn.seq + 1,
            flags: Flags::SYN | Flags::ACK,
            options: Options {
                mss: Some(MSS),
                timestamps: Some((7, ecr)),
                ..SEND_TEMPL.options
            },
            ..SEND_TEMPL
        };
        send!(tcp, 110, synack(5));
        let answer_bytes = recv!(tcp, 110);
        let answer = parse(&answer_bytes);
        if !check {
            assert_eq!(answer.flags, Flags::ACK);
            assert_eq!(tcp.info(c).unwrap().state, TcpState::Established);
            continue;
        }
        assert_eq!((answer.flags, answer.seq), (Flags::RST, syn.seq + 1));
        assert_eq!(tcp.info(c).unwrap().state, TcpState::SynSent);
        send!(tcp, 120, synack(100));
        assert_eq!(parse(&recv!(tcp, 120)).flags, Flags::ACK);
        assert_eq!(tcp.info(c).unwrap().state, TcpState::Established);
    }
}

#[test]
fn close_in_syn_sent_deletes_the_tcb() {
    let (mut tcp, c, _) = syn_sent(config());
    tcp.close(ms(1), c).unwrap();
    assert_eq!(tcp.socket_count(), 0);
    assert_eq!(tcp.timer_count(), 0);
    recv_nothing!(tcp, 1);
}

#[test]
fn syn_retransmission_backs_off_then_times_out() {
    let (mut tcp, c, iss) = syn_sent(TcpConfig {
        syn_retransmits: 2,
        ..config()
    });
    tcp.handle_timeout(ms(1000));
    assert_eq!(parse(&recv!(tcp, 1000)).seq, iss);
    assert_eq!(tcp.poll_timeout(), Some(ms(3000)));
    tcp.handle_timeout(ms(3000));
    recv!(tcp, 3000);
    assert_eq!(tcp.poll_timeout(), Some(ms(7000)));
    tcp.handle_timeout(ms(7000));
    assert_eq!(tcp.info(c).unwrap().state, TcpState::Closed);
    assert_eq!(tcp.send(ms(7000), c, b"x"), Err(TcpError::TimedOut));
}

#[test]
fn simultaneous_open() {
    let (mut tcp, c, iss) = syn_sent(config());
    send!(
        tcp,
        5,
        Repr {
            seq: RISS,
            flags: Flags::SYN,
            ..SEND_TEMPL
        }
    );
    recv!(
        tcp,
        5,
        Repr {
            seq: iss,
            ack: RISS + 1,
            flags: Flags::SYN | Flags::ACK,
            options: Options {
                mss: Some(MSS),
                ..SEND_TEMPL.options
            },
            ..ack_templ(0, 0)
        }
    );
    assert_eq!(tcp.info(c).unwrap().state, TcpState::SynReceived);
    send!(
        tcp,
        6,
        Repr {
            seq: RISS,
            ack: iss + 1,
            flags: Flags::SYN | Flags::ACK,
            ..SEND_TEMPL
        }
    );
    // The peer's SYN-ACK repeats its SYN (not acceptable now): we answer with an ACK
    // and its ACK completes the handshake.
    send!(
        tcp,
        7,
        Repr {
            seq: RISS + 1,
            ack: iss + 1,
            ..SEND_TEMPL
        }
    );
    assert_eq!(tcp.info(c).unwrap().state, TcpState::Established);
}

// ---- ESTABLISHED: sequence checks, RST, SYN, ACK ------------------------------------------

#[test]
fn rst_exact_resets_in_window_challenges_outside_drops() {
    let (mut tcp, c, snd) = established();
    send!(
        tcp,
        20,
        Repr {
            seq: RISS + 1 + 100_000,
            flags: Flags::RST,
            ..SEND_TEMPL
        }
    );
    recv_nothing!(tcp, 20);
    send!(
        tcp,
        21,
        Repr {
            seq: RISS + 1 + 10,
            flags: Flags::RST,
            ..SEND_TEMPL
        }
    );
    recv!(tcp, 21, ack_templ(snd, RISS + 1));
    assert_eq!(tcp.stats().challenge_acks, 1);
    send!(
        tcp,
        22,
        Repr {
            seq: RISS + 1,
            flags: Flags::RST,
            ..SEND_TEMPL
        }
    );
    assert_eq!(tcp.info(c).unwrap().state, TcpState::Closed);
    assert_eq!(tcp.poll_event(), Some(TcpEvent::Readable(c)));
    let mut buf = [0u8; 4];
    assert_eq!(
        tcp.recv(ms(22), c, &mut buf),
        Err(TcpError::ConnectionReset)
    );
    while let Some(ev) = tcp.poll_event() {
        if ev == TcpEvent::Closed(c) {
            tcp.close(ms(22), c).unwrap();
        }
    }
    assert_eq!(tcp.socket_count(), 0);
}

/// A child that got data and then a RST before `accept`, with or without
/// `reset_keeps_data`: returns what `accept` and two reads give.
fn reset_before_accept(
    keep: bool,
) -> (
    Result<usize, TcpError>,
    Result<usize, TcpError>,
    Vec<u8>,
    usize,
) {
    let mut tcp = Tcp::new(
        TcpConfig {
            reset_keeps_data: keep,
            ..config()
        },
        &secret(7),
    );
    let listener = tcp.listen(LOCAL, 4).unwrap();
    let options = Options {
        mss: Some(MSS),
        ..SEND_TEMPL.options
    };
    let iss = handshake(&mut tcp, options);
    let ack = Repr {
        seq: RISS + 1,
        ack: iss + 1,
        ..SEND_TEMPL
    };
    send!(
        tcp,
        20,
        Repr {
            payload: b"0123456789",
            ..ack
        }
    );
    send!(
        tcp,
        30,
        Repr {
            seq: RISS + 11,
            flags: Flags::RST | Flags::ACK,
            ..ack
        }
    );
    let Ok(child) = tcp.accept(listener) else {
        return (
            Err(TcpError::WouldBlock),
            Ok(0),
            Vec::new(),
            tcp.socket_count(),
        );
    };
    let mut buf = [0u8; 64];
    let first = tcp.recv(ms(40), child, &mut buf);
    let data = buf[..*first.as_ref().unwrap_or(&0)].to_vec();
    let second = tcp.recv(ms(40), child, &mut buf);
    tcp.close(ms(40), child).unwrap();
    tcp.close(ms(40), listener).unwrap();
    (first, second, data, tcp.socket_count())
}

#[test]
fn a_reset_flushes_an_unaccepted_child_unless_reset_keeps_data() {
    // RFC 9293 3.10.7.4 (the default): "All segment queues should be flushed": the
    // reset child is gone before anyone accepts it.
    let (first, _, _, left) = reset_before_accept(false);
    assert_eq!(first, Err(TcpError::WouldBlock));
    assert_eq!(left, 1, "only the listener is left");
    // Linux's `tcp_reset`: the child stays queued, its data is read, then the reset.
    let (first, second, data, left) = reset_before_accept(true);
    assert_eq!(first, Ok(10));
    assert_eq!(data, b"0123456789");
    assert_eq!(second, Err(TcpError::ConnectionReset));
    assert_eq!(left, 0, "closing both releases them");
}

#[test]
fn out_of_window_segment_is_acked_and_dropped() {
    let (mut tcp, c, snd) = established();
    send!(
        tcp,
        20,
        Repr {
            seq: RISS + 1 + 200_000,
            ack: snd,
            payload: b"zz",
            ..SEND_TEMPL
        }
    );
    recv!(tcp, 20, ack_templ(snd, RISS + 1));
    let mut buf = [0u8; 4];
    assert_eq!(tcp.recv(ms(20), c, &mut buf), Err(TcpError::WouldBlock));
    // An old duplicate is acknowledged as well.
    send!(
        tcp,
        21,
        Repr {
            seq: RISS - 5,
            ack: snd,
            payload: b"old",
            ..SEND_TEMPL
        }
    );
    recv!(tcp, 21, ack_templ(snd, RISS + 1));
}

#[test]
fn out_of_window_acks_and_syns_are_answered_within_the_budget_data_always() {
    let (mut tcp, _c, snd) = established_with(TcpConfig {
        challenge_ack_limit: 4,
        ..config()
    });
    // Pure ACKs, SYNs and data far beyond the window: answered only up to this
    // second's budget (2 to 4), not one ACK each.
    let mut answers = 0;
    for i in 0..40u32 {
        let (flags, payload): (_, &[u8]) = match i % 3 {
            0 => (Flags::ACK, b""),
            1 => (Flags::SYN, b""),
            _ => (Flags::ACK, b"beyond"),
        };
        let t = 20 + 24 * u64::from(i);
        send!(
            tcp,
            t,
            Repr {
                seq: RISS + 1 + 300_000 + i,
                ack: snd,
                flags,
                payload,
                ..SEND_TEMPL
            }
        );
        while poll(&mut tcp, t).is_some() {
            answers += 1;
        }
    }
    assert!((2..=4).contains(&answers), "{answers} answers");
    assert_eq!(tcp.stats().challenge_acks_limited, 40 - answers);
    // Old data (a retransmission whose ACK was lost) is answered every time, budget
    // or not: the peer cannot progress without that ACK.
    for _ in 0..5 {
        send!(
            tcp,
            990,
            Repr {
                seq: RISS - 5,
                ack: snd,
                payload: b"old",
                ..SEND_TEMPL
            }
        );
        recv!(tcp, 990, ack_templ(snd, RISS + 1));
    }
}

#[test]
fn syn_in_established_gets_challenge_ack() {
    let (mut tcp, c, snd) = established();
    send!(
        tcp,
        20,
        Repr {
            seq: RISS + 50,
            flags: Flags::SYN,
            ..SEND_TEMPL
        }
    );
    recv!(tcp, 20, ack_templ(snd, RISS + 1));
    assert_eq!(tcp.info(c).unwrap().state, TcpState::Established);
}

#[test]
fn ack_beyond_snd_nxt_is_challenged() {
    let (mut tcp, _c, snd) = established();
    send!(
        tcp,
        20,
        Repr {
            seq: RISS + 1,
            ack: snd + 5000,
            payload: b"data",
            ..SEND_TEMPL
        }
    );
    recv!(tcp, 20, ack_templ(snd, RISS + 1));
    assert_eq!(tcp.stats().bad_ack, 1);
}

/// Under `unsent_ack_silent` (Linux's `tcp_ack`) an ACK of unsent data is dropped
/// without an answer, its FIN and data with it; the next segment is taken as usual.
#[test]
fn ack_beyond_snd_nxt_dropped_silently_when_configured() {
    let (mut tcp, c, snd) = established_with(TcpConfig {
        unsent_ack_silent: true,
        ..config()
    });
    send!(
        tcp,
        20,
        Repr {
            seq: RISS + 1,
            ack: snd + 5000,
            flags: Flags::FIN | Flags::ACK,
            payload: b"data",
            ..SEND_TEMPL
        }
    );
    recv_nothing!(tcp, 20);
    assert_eq!(tcp.stats().bad_ack, 1);
    assert_eq!(tcp.info(c).unwrap().state, TcpState::Established);
    send!(
        tcp,
        30,
        Repr {
            seq: RISS + 1,
            ack: snd,
            payload: b"data",
            ..SEND_TEMPL
        }
    );
    recv!(
        tcp,
        30,
        Repr {
            window: 64000 - 4,
            ..ack_templ(snd, RISS + 5)
        }
    );
}

/// RFC 8985 §7.3 "Retransmit the last segment": data sent, then the FIN alone later;
/// under `lone_fin_as_linux` the loss probe resends the FIN alone, as Linux's probe
/// resends its FIN skb; by default the last data segment with the FIN.
#[test]
fn a_loss_probe_after_a_lone_fin_resends_the_fin_alone() {
    for linux in [true, false] {
        let (mut tcp, c, snd) = established_with_options(
            TcpConfig {
                sack: true,
                lone_fin_as_linux: linux,
                ..config()
            },
            Options {
                mss: Some(MSS),
                sack_permitted: true,
                ..SEND_TEMPL.options
            },
        );
        tcp.send(ms(20), c, &[7u8; 3000]).unwrap();
        for _ in 0..3 {
            assert_eq!(parse(&recv!(tcp, 20)).payload.len(), 1000);
        }
        tcp.shutdown_write(ms(30), c).unwrap();
        let fin = Repr {
            flags: Flags::FIN | Flags::ACK,
            ..ack_templ(snd + 3000, RISS + 1)
        };
        recv!(tcp, 30, fin);
        // The first timer is the probe's (2*SRTT after the FIN), before the RTO.
        let at = tcp.poll_timeout().expect("a timer");
        tcp.handle_timeout(at);
        let bytes = recv!(tcp, at.as_millis());
        let probe = parse(&bytes);
        assert_eq!(tcp.stats().tlp_probes, 1);
        if linux {
            assert_eq!(probe, fin);
        } else {
            // By default the last data segment goes with the FIN.
            assert_eq!((probe.seq, probe.payload.len()), (snd + 2000, 1000));
            assert!(probe.flags.fin(), "{probe:?}");
        }
    }
}

/// Limited transmit, then an ACK of three segments, two of which the duplicate ACKs
/// before it reported: under `cwnd_growth_newly_delivered` (Linux's count) cwnd grows
/// by one segment and two go; by RFC 5681 §3.1 (the default) by the two RFC 3465
/// allows, and three go.
#[test]
fn cwnd_grows_by_what_was_newly_delivered_when_configured() {
    for (newly, expected) in [(true, 2), (false, 3)] {
        let (mut tcp, c, snd) = established_with(TcpConfig {
            cwnd_growth_newly_delivered: newly,
            ..config()
        });
        tcp.send(ms(20), c, &[1u8; 15000]).unwrap();
        let sent = |tcp: &mut Tcp, t: u64| core::iter::from_fn(|| poll(tcp, t)).count();
        assert_eq!(sent(&mut tcp, 20), 10);
        for t in [30, 31] {
            send!(tcp, t, ack_templ_from_peer(snd));
            assert_eq!(sent(&mut tcp, t), 1, "limited transmit");
        }
        send!(tcp, 32, ack_templ_from_peer(snd + 3000));
        assert_eq!(
            sent(&mut tcp, 32),
            expected,
            "newly delivered only: {newly}"
        );
    }
}

#[test]
fn challenge_acks_are_rate_limited() {
    let (mut tcp, _c, _) = established_with(TcpConfig {
        challenge_ack_limit: 2,
        ..config()
    });
    for i in 0..5 {
        send!(
            tcp,
            20,
            Repr {
                seq: RISS + 10 + i,
                flags: Flags::RST,
                ..SEND_TEMPL
            }
        );
        let _ = poll(&mut tcp, 20);
    }
    // This second's budget is 1 or 2 (half the limit to all of it), and they are
    // spaced half a second or more apart: of five at once, one goes.
    assert_eq!(tcp.stats().challenge_acks, 1);
    assert_eq!(tcp.stats().challenge_acks_limited, 4);
}

/// Challenge ACKs a stack keyed by `key` sends in each of 8 seconds, flooded with 200
/// in-window RSTs per second, its limit 100.
fn challenge_budgets(key: &crate::secret::Secret) -> Vec<u64> {
    let (mut tcp, _c, _) = established_keyed(
        TcpConfig {
            challenge_ack_limit: 100,
            ..config()
        },
        Options {
            mss: Some(MSS),
            ..SEND_TEMPL.options
        },
        key,
    );
    let mut budgets = Vec::new();
    for second in 1..=8u64 {
        let before = tcp.stats().challenge_acks;
        for i in 0..200u32 {
            let t = second * 1000 + u64::from(i) * 5;
            send!(
                tcp,
                t,
                Repr {
                    seq: RISS + 10 + i,
                    flags: Flags::RST,
                    ..SEND_TEMPL
                }
            );
            let _ = poll(&mut tcp, t);
        }
        budgets.push(tcp.stats().challenge_acks - before);
    }
    budgets
}

#[test]
fn the_challenge_ack_budget_is_no_constant_an_attacker_can_count_on() {
    // CVE-2016-5696: with a fixed budget an off-path attacker exhausts it and counts
    // what is left to learn whether a connection exists. The budget is drawn each
    // second from the secret; the limit stays a cap.
    let a = challenge_budgets(&secret(1));
    let b = challenge_budgets(&secret(2));
    for budget in a.iter().chain(&b) {
        assert!((50..=100).contains(budget), "{a:?} {b:?}");
    }
    assert_ne!(a, b, "two secrets, two sequences of budgets");
    assert!(
        a.iter().any(|&n| n != a[0]),
        "the budget changes from second to second: {a:?}"
    );
}

#[test]
fn the_challenge_ack_budget_is_per_connection() {
    // CVE-2016-5696 again: a budget shared by all connections lets an attacker's own
    // connection observe challenge ACKs spent on another. Exhausting one connection's
    // budget leaves the other's untouched.
    let mut tcp = Tcp::new(
        TcpConfig {
            challenge_ack_limit: 4,
            ..config()
        },
        &secret(7),
    );
    let listener = tcp.listen(LOCAL, 4).unwrap();
    for port in [49500u16, 49501] {
        send!(
            tcp,
            0,
            Repr {
                src_port: port,
                seq: RISS,
                flags: Flags::SYN,
                options: Options {
                    mss: Some(MSS),
                    ..SEND_TEMPL.options
                },
                ..SEND_TEMPL
            }
        );
        let bytes = recv!(tcp, 0);
        let iss = parse(&bytes).seq;
        send!(
            tcp,
            10,
            Repr {
                src_port: port,
                seq: RISS + 1,
                ack: iss + 1,
                ..SEND_TEMPL
            }
        );
        tcp.accept(listener).unwrap();
    }
    while tcp.poll_event().is_some() {}
    recv_nothing!(tcp, 10);
    for i in 0..20 {
        let t = 20 + 45 * u64::from(i);
        send!(
            tcp,
            t,
            Repr {
                seq: RISS + 10 + i,
                flags: Flags::RST,
                ..SEND_TEMPL
            }
        );
        while poll(&mut tcp, t).is_some() {}
    }
    let spent = tcp.stats().challenge_acks;
    assert!((2..=4).contains(&spent), "{spent}");
    assert_eq!(tcp.stats().challenge_acks_limited, 20 - spent);
    // The same second, the other connection still answers.
    send!(
        tcp,
        900,
        Repr {
            src_port: 49501,
            seq: RISS + 10,
            flags: Flags::RST,
            ..SEND_TEMPL
        }
    );
    let bytes = recv!(tcp, 900);
    let challenge = parse(&bytes);
    assert_eq!(
        (challenge.dst_port, challenge.flags, challenge.ack),
        (49501, Flags::ACK, RISS + 1)
    );
    assert_eq!(tcp.stats().challenge_acks, spent + 1);
}

#[test]
fn half_open_after_peer_restart_is_cleared_by_rst() {
    // RFC 9293 §3.5.1 figure 10: the peer lost its state and opens again.
    let (mut tcp, c, snd) = established();
    send!(
        tcp,
        20,
        Repr {
            seq: 400,
            flags: Flags::SYN,
            ..SEND_TEMPL
        }
    );
    recv!(tcp, 20, ack_templ(snd, RISS + 1));
    // The peer answers our ACK (which it finds unacceptable) with a RST at its ACK field.
    send!(
        tcp,
        21,
        Repr {
            seq: RISS + 1,
            flags: Flags::RST,
            ..SEND_TEMPL
        }
    );
    assert_eq!(tcp.info(c).unwrap().state, TcpState::Closed);
}

// ---- data -------------------------------------------------------------------------------

#[test]
fn delayed_ack_timer_and_every_second_segment() {
    // Past quick-ACK mode (`tests_push` covers it).
    let (mut tcp, c, snd) = established_with(TcpConfig {
        quick_acks: 0,
        ..config()
    });
    let data = [7u8; MSS as usize];
    send!(
        tcp,
        20,
        Repr {
            seq: RISS + 1,
            ack: snd,
            payload: &data,
            ..SEND_TEMPL
        }
    );
    recv_nothing!(tcp, 20);
    assert_eq!(tcp.poll_timeout(), Some(ms(60)));
    tcp.handle_timeout(ms(60));
    recv!(
        tcp,
        60,
        Repr {
            window: 63000,
            ..ack_templ(snd, RISS + 1 + 1000)
        }
    );
    // Two full segments: the second is acknowledged at once.
    send!(
        tcp,
        70,
        Repr {
            seq: RISS + 1001,
            ack: snd,
            payload: &data,
            ..SEND_TEMPL
        }
    );
    recv_nothing!(tcp, 70);
    send!(
        tcp,
        71,
        Repr {
            seq: RISS + 2001,
            ack: snd,
            payload: &data,
            ..SEND_TEMPL
        }
    );
    let bytes = recv!(tcp, 71);
    assert_eq!(parse(&bytes).ack, RISS + 3001);
    let mut buf = vec![0u8; 5000];
    assert_eq!(tcp.recv(ms(72), c, &mut buf), Ok(3000));
}

#[test]
fn out_of_order_is_acked_at_once_and_hole_fill_too() {
    let (mut tcp, c, snd) = established();
    send!(
        tcp,
        20,
        Repr {
            seq: RISS + 11,
            ack: snd,
            payload: b"ld",
            ..SEND_TEMPL
        }
    );
    recv!(tcp, 20, ack_templ(snd, RISS + 1));
    send!(
        tcp,
        21,
        Repr {
            seq: RISS + 1,
            ack: snd,
            payload: b"hello, wor",
            ..SEND_TEMPL
        }
    );
    recv!(
        tcp,
        21,
        Repr {
            window: 64000 - 12,
            ..ack_templ(snd, RISS + 13)
        }
    );
    let mut buf = [0u8; 32];
    assert_eq!(tcp.recv(ms(22), c, &mut buf), Ok(12));
    assert_eq!(&buf[..12], b"hello, world");
}

#[test]
fn sack_blocks_are_generated() {
    let cfg = TcpConfig {
        sack: true,
        ..config()
    };
    let mut tcp = Tcp::new(cfg, &secret(7));
    let l = tcp.listen(LOCAL, 4).unwrap();
    let opts = Options {
        mss: Some(MSS),
        sack_permitted: true,
        ..SEND_TEMPL.options
    };
    send!(
        tcp,
        0,
        Repr {
            seq: RISS,
            flags: Flags::SYN,
            options: opts,
            ..SEND_TEMPL
        }
    );
    let synack = parse(&recv!(tcp, 0)).seq;
    send!(
        tcp,
        1,
        Repr {
            seq: RISS + 1,
            ack: synack + 1,
            ..SEND_TEMPL
        }
    );
    let _c = tcp.accept(l).unwrap();
    send!(
        tcp,
        2,
        Repr {
            seq: RISS + 101,
            ack: synack + 1,
            payload: &[1; 100],
            ..SEND_TEMPL
        }
    );
    let bytes = recv!(tcp, 2);
    let ack = parse(&bytes);
    assert_eq!(ack.ack, RISS + 1);
    assert_eq!(
        ack.options.sack(),
        &[SackBlock {
            left: RISS + 101,
            right: RISS + 201
        }]
    );
    send!(
        tcp,
        3,
        Repr {
            seq: RISS + 301,
            ack: synack + 1,
            payload: &[1; 100],
            ..SEND_TEMPL
        }
    );
    let bytes = recv!(tcp, 3);
    assert_eq!(
        parse(&bytes).options.sack(),
        &[
            SackBlock {
                left: RISS + 301,
                right: RISS + 401
            },
            SackBlock {
                left: RISS + 101,
                right: RISS + 201
            }
        ]
    );
}

/// Minshall's variant of Nagle (as Linux): the tail of a write goes behind full-sized
/// segments without waiting for their ACK, which a delayed-ACK receiver would hold
/// back (the end of every bulk transfer would stall for the delayed-ACK time).
#[test]
fn nagle_lets_a_tail_follow_full_segments() {
    let (mut tcp, c, snd) = established();
    tcp.send(ms(20), c, &[5u8; 2500]).unwrap();
    let lens: Vec<usize> = (0..3)
        .map(|_| parse(&recv!(tcp, 20)).payload.len())
        .collect();
    assert_eq!(lens, [1000, 1000, 500]);
    recv_nothing!(tcp, 20);
    // A second tail waits behind the first, unacknowledged one.
    tcp.send(ms(21), c, b"xyz").unwrap();
    recv_nothing!(tcp, 21);
    send!(
        tcp,
        22,
        Repr {
            seq: RISS + 1,
            ack: snd + 2500,
            ..SEND_TEMPL
        }
    );
    assert_eq!(parse(&recv!(tcp, 22)).payload, b"xyz");
}

#[test]
fn nagle_holds_small_segments_until_acked() {
    let (mut tcp, c, snd) = established();
    tcp.send(ms(20), c, b"a").unwrap();
    recv!(
        tcp,
        20,
        Repr {
            flags: Flags::ACK | Flags::PSH,
            payload: b"a",
            ..ack_templ(snd, RISS + 1)
        }
    );
    tcp.send(ms(21), c, b"b").unwrap();
    tcp.send(ms(21), c, b"c").unwrap();
    recv_nothing!(tcp, 21);
    send!(
        tcp,
        30,
        Repr {
            seq: RISS + 1,
            ack: snd + 1,
            ..SEND_TEMPL
        }
    );
    recv!(
        tcp,
        30,
        Repr {
            flags: Flags::ACK | Flags::PSH,
            payload: b"bc",
            ..ack_templ(snd + 1, RISS + 1)
        }
    );
    // nodelay: every write goes at once.
    tcp.set_nodelay(c, true).unwrap();
    tcp.send(ms(31), c, b"d").unwrap();
    recv!(
        tcp,
        31,
        Repr {
            flags: Flags::ACK | Flags::PSH,
            payload: b"d",
            ..ack_templ(snd + 3, RISS + 1)
        }
    );
}

#[test]
fn full_segments_go_and_respect_the_peer_window() {
    let (mut tcp, c, snd) = established();
    // The peer shrinks its window to 1500: one full segment and nothing of the rest.
    send!(
        tcp,
        15,
        Repr {
            seq: RISS + 1,
            ack: snd,
            window: 1500,
            ..SEND_TEMPL
        }
    );
    tcp.send(ms(20), c, &[9u8; 5000]).unwrap();
    let first = recv!(tcp, 20);
    assert_eq!(parse(&first).payload.len(), 1000);
    recv_nothing!(tcp, 20);
    // Shrink below what is in flight: nothing more goes, nothing is retransmitted.
    send!(
        tcp,
        25,
        Repr {
            seq: RISS + 1,
            ack: snd,
            window: 200,
            ..SEND_TEMPL
        }
    );
    recv_nothing!(tcp, 25);
    assert_eq!(tcp.stats().retransmitted, 0);
    send!(
        tcp,
        30,
        Repr {
            seq: RISS + 1,
            ack: snd + 1000,
            window: 4000,
            ..SEND_TEMPL
        }
    );
    let mut total = 0;
    while let Some(b) = poll(&mut tcp, 30) {
        total += parse(&b).payload.len();
    }
    assert_eq!(total, 4000);
}

#[test]
fn zero_window_probe_with_backoff_then_reopen() {
    let (mut tcp, c, snd) = established();
    send!(
        tcp,
        15,
        Repr {
            seq: RISS + 1,
            ack: snd,
            window: 0,
            ..SEND_TEMPL
        }
    );
    tcp.send(ms(20), c, b"blocked").unwrap();
    recv_nothing!(tcp, 20);
    let first = tcp.poll_timeout().unwrap();
    tcp.handle_timeout(first);
    recv!(tcp, first.as_millis(), ack_templ(snd - 1, RISS + 1));
    recv_nothing!(tcp, first.as_millis());
    let second = tcp.poll_timeout().unwrap();
    assert!(second - first > first - ms(20), "probe interval backs off");
    tcp.handle_timeout(second);
    recv!(tcp, second.as_millis(), ack_templ(snd - 1, RISS + 1));
    assert_eq!(tcp.stats().window_probes, 2);
    // The probe's answer opens the window: the data goes.
    send!(
        tcp,
        second.as_millis() + 5,
        Repr {
            seq: RISS + 1,
            ack: snd,
            window: 1000,
            ..SEND_TEMPL
        }
    );
    recv!(
        tcp,
        second.as_millis() + 5,
        Repr {
            flags: Flags::ACK | Flags::PSH,
            payload: b"blocked",
            ..ack_templ(snd, RISS + 1)
        }
    );
}

#[test]
fn a_small_window_held_back_by_sws_avoidance_is_used_when_the_override_timer_expires() {
    // RFC 9293 §3.8.6.2.1: sender SWS avoidance holds a segment smaller than both the
    // MSS and half the largest window; "it is necessary to have a timeout to force
    // transmission of data, overriding the SWS avoidance algorithm". A peer whose
    // window stays at 300 bytes (it once offered 64,000) gets its 300 bytes when the
    // persist timer expires, not an empty probe forever.
    let (mut tcp, c, snd) = established();
    send!(
        tcp,
        15,
        Repr {
            seq: RISS + 1,
            ack: snd,
            window: 300,
            ..SEND_TEMPL
        }
    );
    let data: Vec<u8> = (0..2000u32).map(|i| i as u8).collect();
    tcp.send(ms(20), c, &data).unwrap();
    recv_nothing!(tcp, 20);
    let timeout = tcp.poll_timeout().unwrap();
    tcp.handle_timeout(timeout);
    let t = timeout.as_millis();
    recv!(
        tcp,
        t,
        Repr {
            payload: &data[..300],
            ..ack_templ(snd, RISS + 1)
        }
    );
    recv_nothing!(tcp, t);
    // The peer takes them and offers 300 bytes again: the next 300 wait for the timer.
    send!(
        tcp,
        t + 5,
        Repr {
            seq: RISS + 1,
            ack: snd + 300,
            window: 300,
            ..SEND_TEMPL
        }
    );
    recv_nothing!(tcp, t + 5);
    let next = tcp.poll_timeout().unwrap();
    tcp.handle_timeout(next);
    recv!(
        tcp,
        next.as_millis(),
        Repr {
            payload: &data[300..600],
            ..ack_templ(snd + 300, RISS + 1)
        }
    );
    assert_eq!(tcp.stats().window_probes, 0);
}

#[test]
fn limited_transmit_sends_new_data_on_the_first_two_duplicate_acks() {
    // RFC 3042: "a TCP sender SHOULD send a segment of previously unsent data in
    // response to each of the first two duplicate ACKs", and the third starts fast
    // retransmit. No SACK here (the default test configuration).
    let (mut tcp, c, snd) = established();
    let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    tcp.send(ms(20), c, &data).unwrap();
    let drain = |tcp: &mut Tcp, t: u64| {
        let mut sent = Vec::new();
        while let Some(bytes) = poll(tcp, t) {
            let seg = parse(&bytes);
            sent.push((seg.seq.wrapping_sub(snd), seg.payload.len()));
        }
        sent
    };
    assert_eq!(drain(&mut tcp, 20).len(), 10, "the initial window");
    // The first segment is acknowledged (slow start: two more go), then the same ACK
    // comes again, as it would for each later segment when the second was lost.
    let dup_ack = Repr {
        seq: RISS + 1,
        ack: snd + 1000,
        ..SEND_TEMPL
    };
    send!(tcp, 60, dup_ack);
    assert_eq!(drain(&mut tcp, 60), [(10_000, 1000), (11_000, 1000)]);
    send!(tcp, 61, dup_ack);
    assert_eq!(drain(&mut tcp, 61), [(12_000, 1000)], "first duplicate ACK");
    send!(tcp, 62, dup_ack);
    assert_eq!(
        drain(&mut tcp, 62),
        [(13_000, 1000)],
        "second duplicate ACK"
    );
    send!(tcp, 63, dup_ack);
    assert_eq!(
        drain(&mut tcp, 63),
        [(1000, 1000)],
        "third: fast retransmit"
    );
    assert_eq!(tcp.stats().fast_retransmits, 1);
}

#[test]
fn receive_window_closes_and_reopens_without_sws() {
    let (mut tcp, c, snd) = established_with(TcpConfig {
        recv_buffer: 4000,
        delayed_ack: Duration::ZERO,
        ..config()
    });
    for i in 0..4u32 {
        send!(
            tcp,
            20,
            Repr {
                seq: RISS + 1 + i * 1000,
                ack: snd,
                payload: &[1; 1000],
                ..SEND_TEMPL
            }
        );
        let _ = poll(&mut tcp, 20);
    }
    assert_eq!(tcp.info(c).unwrap().rcv_wnd, 0);
    // Reading 100 bytes is too little to announce (receiver SWS avoidance).
    let mut buf = vec![0u8; 4000];
    tcp.recv(ms(30), c, &mut buf[..100]).unwrap();
    recv_nothing!(tcp, 30);
    tcp.recv(ms(31), c, &mut buf[..2000]).unwrap();
    recv!(
        tcp,
        31,
        Repr {
            window: 2100,
            ..ack_templ(snd, RISS + 4001)
        }
    );
}

// ---- retransmission --------------------------------------------------------------------

#[test]
fn rto_backoff_and_karn() {
    let (mut tcp, c, snd) = established();
    tcp.send(ms(100), c, b"x").unwrap();
    recv!(
        tcp,
        100,
        Repr {
            flags: Flags::ACK | Flags::PSH,
            payload: b"x",
            ..ack_templ(snd, RISS + 1)
        }
    );
    let rto1 = tcp.poll_timeout().unwrap();
    tcp.handle_timeout(rto1);
    recv!(
        tcp,
        rto1.as_millis(),
        Repr {
            flags: Flags::ACK | Flags::PSH,
            payload: b"x",
            ..ack_templ(snd, RISS + 1)
        }
    );
    let rto2 = tcp.poll_timeout().unwrap();
    assert_eq!(rto2 - rto1, (rto1 - ms(100)).saturating_mul(2));
    // The ACK of a retransmitted segment gives no RTT sample (Karn).
    let srtt_before = tcp.info(c).unwrap().srtt;
    send!(
        tcp,
        rto1.as_millis() + 1,
        Repr {
            seq: RISS + 1,
            ack: snd + 1,
            ..SEND_TEMPL
        }
    );
    assert_eq!(tcp.info(c).unwrap().srtt, srtt_before);
    assert_eq!(tcp.info(c).unwrap().retransmits, 1);
}

/// Found by the soak test: after a timeout SND.NXT goes back to SND.UNA (go-back-N), and
/// bare ACKs used to carry it. The peer, holding everything up to SND.MAX, finds such a
/// segment below its RCV.NXT, unacceptable: it answers with a duplicate ACK and never
/// reads the ACK field. With data both ways and both sides in go-back-N, neither learned
/// that its data had arrived, and both retransmitted until they timed out. A bare ACK
/// now carries SND.MAX, as 4.4BSD's does.
#[test]
fn bare_acks_after_a_timeout_carry_snd_max() {
    let (mut tcp, c, snd) = established();
    tcp.send(ms(100), c, &[7u8; 3000]).unwrap();
    for _ in 0..3 {
        recv!(tcp, 100);
    }
    let rto = tcp.poll_timeout().unwrap();
    tcp.handle_timeout(rto);
    let again = recv!(tcp, rto.as_millis());
    assert_eq!(
        (parse(&again).seq, parse(&again).payload.len()),
        (snd, 1000)
    );
    // One segment in flight fills the window after the timeout: what the peer's data
    // draws is a bare ACK.
    send!(
        tcp,
        rto.as_millis() + 1,
        Repr {
            seq: RISS + 2,
            ack: snd,
            payload: b"y",
            ..SEND_TEMPL
        }
    );
    let bytes = recv!(tcp, rto.as_millis() + 1);
    let ack = parse(&bytes);
    assert_eq!(
        (ack.seq, ack.ack, ack.payload.len()),
        (snd + 3000, RISS + 1, 0)
    );
    recv_nothing!(tcp, rto.as_millis() + 1);
    // The peer's ACK of everything is taken.
    send!(
        tcp,
        rto.as_millis() + 2,
        Repr {
            seq: RISS + 1,
            ack: snd + 3000,
            ..SEND_TEMPL
        }
    );
    assert_eq!(tcp.info(c).unwrap().bytes_in_flight, 0);
}

#[test]
fn max_retransmissions_time_out() {
    let (mut tcp, c, _) = established_with(TcpConfig {
        max_retransmits: 3,
        ..config()
    });
    tcp.send(ms(100), c, b"x").unwrap();
    let _ = poll(&mut tcp, 100);
    while let Some(t) = tcp.poll_timeout() {
        tcp.handle_timeout(t);
        while poll(&mut tcp, t.as_millis()).is_some() {}
    }
    assert_eq!(tcp.info(c).unwrap().state, TcpState::Closed);
    assert_eq!(tcp.send(ms(0), c, b"y"), Err(TcpError::TimedOut));
    assert_eq!(tcp.stats().timed_out, 1);
}

#[test]
fn user_timeout_aborts() {
    let (mut tcp, c, _) = established_with(TcpConfig {
        user_timeout: Some(Duration::from_millis(1500)),
        ..config()
    });
    tcp.send(ms(100), c, b"x").unwrap();
    let _ = poll(&mut tcp, 100);
    for t in (100..2000).step_by(10) {
        tcp.handle_timeout(ms(t));
        while poll(&mut tcp, t).is_some() {}
    }
    assert_eq!(tcp.info(c).unwrap().state, TcpState::Closed);
    let mut buf = [0u8; 1];
    assert_eq!(tcp.recv(ms(2000), c, &mut buf), Err(TcpError::TimedOut));
}

#[test]
fn fast_retransmit_after_three_dupacks() {
    let (mut tcp, c, snd) = established();
    tcp.send(ms(100), c, &[3u8; 5000]).unwrap();
    for _ in 0..5 {
        recv!(tcp, 100);
    }
    for t in 110..113 {
        send!(
            tcp,
            t,
            Repr {
                seq: RISS + 1,
                ack: snd,
                ..SEND_TEMPL
            }
        );
    }
    recv!(
        tcp,
        113,
        Repr {
            payload: &[3u8; 1000],
            ..ack_templ(snd, RISS + 1)
        }
    );
    assert_eq!(tcp.stats().fast_retransmits, 1);
    assert!(tcp.info(c).unwrap().in_recovery);
    send!(
        tcp,
        120,
        Repr {
            seq: RISS + 1,
            ack: snd + 5000,
            ..SEND_TEMPL
        }
    );
    assert!(!tcp.info(c).unwrap().in_recovery);
}

#[test]
fn no_fast_recovery_after_a_timeout_until_the_old_data_is_acked() {
    let (mut tcp, c, snd) = established();
    tcp.send(ms(100), c, &[4u8; 5000]).unwrap();
    for _ in 0..5 {
        recv!(tcp, 100);
    }
    // Nothing comes back: the RTO fires and the first segment goes again.
    let rto = tcp.poll_timeout().unwrap();
    tcp.handle_timeout(rto);
    let bytes = recv!(tcp, rto.as_millis());
    assert_eq!(parse(&bytes).seq, snd);
    assert_eq!(tcp.stats().timeouts, 1);
    // Three duplicate ACKs (the receiver holding later segments) must not start a fast
    // retransmit: RFC 6675 §5.1 forbids a new recovery before the ACK passes what was
    // outstanding at the timeout.
    let t = rto.as_millis();
    for dt in 1..=3 {
        send!(
            tcp,
            t + dt,
            Repr {
                seq: RISS + 1,
                ack: snd,
                ..SEND_TEMPL
            }
        );
    }
    assert_eq!(tcp.stats().fast_retransmits, 0);
    assert!(!tcp.info(c).unwrap().in_recovery);
    // Once everything from before the timeout is acknowledged, loss recovery works again.
    send!(
        tcp,
        t + 10,
        Repr {
            seq: RISS + 1,
            ack: snd + 5000,
            ..SEND_TEMPL
        }
    );
    tcp.send(ms(t + 10), c, &[5u8; 5000]).unwrap();
    while tcp.poll_transmit(ms(t + 10), &mut [0u8; 2000]).is_some() {}
    for dt in 11..=13 {
        send!(
            tcp,
            t + dt,
            Repr {
                seq: RISS + 1,
                ack: snd + 5000,
                ..SEND_TEMPL
            }
        );
    }
    assert_eq!(tcp.stats().fast_retransmits, 1);
}

#[test]
fn after_a_timeout_sack_holes_are_repaired_without_a_second_window_cut() {
    // RFC 6675's rules (RACK-TLP off): the SACKed bytes above a hole make it lost at
    // once. (RACK would wait for a round trip no shorter than the minimum RTT seen.)
    let mut tcp = Tcp::new(
        TcpConfig {
            sack: true,
            rack: false,
            ..config()
        },
        &secret(7),
    );
    let listener = tcp.listen(LOCAL, 4).unwrap();
    let sack_ok = Options {
        mss: Some(MSS),
        sack_permitted: true,
        ..SEND_TEMPL.options
    };
    send!(
        tcp,
        0,
        Repr {
            seq: RISS,
            flags: Flags::SYN,
            options: sack_ok,
            ..SEND_TEMPL
        }
    );
    let bytes = recv!(tcp, 0);
    let snd = parse(&bytes).seq + 1;
    send!(
        tcp,
        10,
        Repr {
            seq: RISS + 1,
            ack: snd,
            ..SEND_TEMPL
        }
    );
    let c = tcp.accept(listener).unwrap();
    tcp.send(ms(100), c, &[6u8; 8000]).unwrap();
    while tcp.poll_transmit(ms(100), &mut [0u8; 2000]).is_some() {}
    // Everything is lost: the RTO fires, cwnd drops to one segment, ssthresh is halved.
    let rto = tcp.poll_timeout().unwrap();
    tcp.handle_timeout(rto);
    let t = rto.as_millis();
    let bytes = recv!(tcp, t);
    assert_eq!(parse(&bytes).seq, snd);
    let ssthresh = tcp.info(c).unwrap().ssthresh;
    // The receiver reports holding 3000..8000 (it got the originals late): the hole at
    // 1000..3000 is lost for sure, and is resent without waiting for another timeout.
    let sack = |left: u32, right: u32| {
        let mut options = SEND_TEMPL.options;
        options.sack_blocks[0] = SackBlock {
            left: snd + left,
            right: snd + right,
        };
        options.sack_len = 1;
        options
    };
    send!(
        tcp,
        t + 5,
        Repr {
            seq: RISS + 1,
            ack: snd + 1000,
            options: sack(3000, 8000),
            ..SEND_TEMPL
        }
    );
    // Slow start goes on from SND.UNA: 1000..2000 and 2000..3000 (SACKed data skipped).
    let mut sent = Vec::new();
    while let Some(b) = poll(&mut tcp, t + 5) {
        sent.push(parse(&b).seq.wrapping_sub(snd));
    }
    assert_eq!(sent, [1000, 2000]);
    // 1000..2000 is lost again; 2000..3000 arrives: a duplicate ACK whose SACK block
    // shows the receiver holds everything above the hole.
    send!(
        tcp,
        t + 10,
        Repr {
            seq: RISS + 1,
            ack: snd + 1000,
            options: sack(2000, 8000),
            ..SEND_TEMPL
        }
    );
    let bytes = recv!(tcp, t + 10);
    assert_eq!(
        parse(&bytes).seq,
        snd + 1000,
        "the hole goes again without a second timeout"
    );
    let info = tcp.info(c).unwrap();
    assert!(info.in_recovery);
    assert_eq!(
        info.ssthresh, ssthresh,
        "no second cut for the same loss episode"
    );
    assert_eq!(tcp.stats().timeouts, 1);
}

/// A peer that takes only in-order data and ACKs it without SACK blocks, at `t`
/// milliseconds and after; the sender's timeouts run when it has nothing to send.
/// Returns the bytes the peer took in order, from `snd`.
fn in_order_peer(tcp: &mut Tcp, snd: u32, mut t: u64, want: usize) -> Vec<u8> {
    let mut received = Vec::new();
    for _ in 0..500 {
        if received.len() == want {
            break;
        }
        let Some(bytes) = poll(tcp, t) else {
            let Some(due) = tcp.poll_timeout() else { break };
            t = due.as_millis().max(t);
            tcp.handle_timeout(ms(t));
            continue;
        };
        let seg = parse(&bytes);
        if seg.seq == snd.wrapping_add(received.len() as u32) {
            received.extend_from_slice(seg.payload);
        }
        t += 1;
        let ack = snd.wrapping_add(received.len() as u32);
        send!(*tcp, t, ack_templ_from_peer(ack));
    }
    received
}

/// A bare ACK from the peer.
fn ack_templ_from_peer(ack: u32) -> Repr<'static> {
    Repr {
        seq: RISS + 1,
        ack,
        ..SEND_TEMPL
    }
}

#[test]
fn after_a_timeout_data_the_peer_reneged_on_is_sent_again() {
    let (mut tcp, c, snd) = established_with_options(
        TcpConfig {
            sack: true,
            ..config()
        },
        Options {
            mss: Some(MSS),
            sack_permitted: true,
            ..SEND_TEMPL.options
        },
    );
    let data: Vec<u8> = (0..8000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(tcp.send(ms(100), c, &data).unwrap(), data.len());
    while poll(&mut tcp, 100).is_some() {}
    // The first segment is lost; the peer SACKs the other seven, three times.
    let mut options = SEND_TEMPL.options;
    options.sack_blocks[0] = SackBlock {
        left: snd + 1000,
        right: snd + 8000,
    };
    options.sack_len = 1;
    for t in 110..113 {
        send!(
            tcp,
            t,
            Repr {
                options,
                ..ack_templ_from_peer(snd)
            }
        );
    }
    // Then it reneges (RFC 2018 §8 allows it): it drops what it SACKed and from now on
    // takes only in-order data. The transfer must still complete, byte for byte.
    let received = in_order_peer(&mut tcp, snd, 113, data.len());
    assert_eq!(received.len(), data.len(), "the transfer stalled");
    assert_eq!(received, data);
}

/// Segments `tcp` sends at `t`, in rounds: every segment the window allows, then the
/// peer's ACK of each (so slow start runs while the sender is cwnd-limited).
fn send_acked(tcp: &mut Tcp, snd: &mut u32, t: u64) -> usize {
    let mut count = 0;
    loop {
        let round: Vec<u32> = core::iter::from_fn(|| poll(tcp, t))
            .map(|bytes| {
                let seg = parse(&bytes);
                seg.seq.wrapping_add(seg.payload.len() as u32)
            })
            .collect();
        if round.is_empty() {
            return count;
        }
        count += round.len();
        for end in round {
            *snd = end;
            send!(*tcp, t, ack_templ_from_peer(end));
        }
    }
}

/// The ends of the segments `tcp` sends at `t`, none ACKed.
fn burst(tcp: &mut Tcp, t: u64) -> Vec<u32> {
    core::iter::from_fn(|| poll(tcp, t))
        .map(|bytes| {
            let seg = parse(&bytes);
            seg.seq.wrapping_add(seg.payload.len() as u32)
        })
        .collect()
}

#[test]
fn after_idle_longer_than_the_rto_a_burst_starts_from_the_initial_window() {
    let (mut tcp, c, mut snd) = established();
    // Slow start grows cwnd well past the initial window (10 segments).
    tcp.send(ms(100), c, &[1u8; 40_000]).unwrap();
    assert_eq!(send_acked(&mut tcp, &mut snd, 100), 40);
    let grown = tcp.info(c).unwrap().cwnd;
    assert!(grown > 10 * u32::from(MSS), "cwnd {grown}");
    // Within an RTO of the last send, a burst may use the grown window.
    tcp.send(ms(101), c, &[2u8; 20_000]).unwrap();
    let ends = burst(&mut tcp, 101);
    assert_eq!(ends.len(), 20, "the whole write in one burst");
    send!(tcp, 110, ack_templ_from_peer(ends[19]));
    // RFC 5681 §4.1: idle for longer than the RTO (at most 60 s here), the next burst
    // starts from RW = min(IW, cwnd): 10 segments.
    let rto = tcp.info(c).unwrap().rto;
    let later = 110 + rto.as_millis() + 1;
    tcp.send(ms(later), c, &[3u8; 30_000]).unwrap();
    assert_eq!(burst(&mut tcp, later).len(), 10);
}

// ---- closing ----------------------------------------------------------------------------

#[test]
fn passive_close() {
    let (mut tcp, c, snd) = established();
    send!(
        tcp,
        20,
        Repr {
            seq: RISS + 1,
            ack: snd,
            flags: Flags::FIN | Flags::ACK,
            payload: b"bye",
            ..SEND_TEMPL
        }
    );
    recv!(
        tcp,
        20,
        Repr {
            window: 64000 - 3,
            ..ack_templ(snd, RISS + 5)
        }
    );
    assert_eq!(tcp.info(c).unwrap().state, TcpState::CloseWait);
    let mut buf = [0u8; 8];
    assert_eq!(tcp.recv(ms(21), c, &mut buf), Ok(3));
    assert_eq!(tcp.recv(ms(21), c, &mut buf), Ok(0));
    // Half-close: we can still send after the peer's FIN.
    tcp.send(ms(22), c, b"more").unwrap();
    recv!(
        tcp,
        22,
        Repr {
            flags: Flags::ACK | Flags::PSH,
            payload: b"more",
            ..ack_templ(snd, RISS + 5)
        }
    );
    tcp.close(ms(23), c).unwrap();
    recv!(
        tcp,
        23,
        Repr {
            flags: Flags::FIN | Flags::ACK,
            ..ack_templ(snd + 4, RISS + 5)
        }
    );
    assert_eq!(tcp.info(c).unwrap().state, TcpState::LastAck);
    send!(
        tcp,
        30,
        Repr {
            seq: RISS + 5,
            ack: snd + 5,
            ..SEND_TEMPL
        }
    );
    assert_eq!(tcp.socket_count(), 0);
    assert_eq!(tcp.timer_count(), 0);
}

#[test]
fn simultaneous_close() {
    let (mut tcp, c, snd) = established();
    tcp.close(ms(20), c).unwrap();
    recv!(
        tcp,
        20,
        Repr {
            flags: Flags::FIN | Flags::ACK,
            ..ack_templ(snd, RISS + 1)
        }
    );
    send!(
        tcp,
        21,
        Repr {
            seq: RISS + 1,
            ack: snd,
            flags: Flags::FIN | Flags::ACK,
            ..SEND_TEMPL
        }
    );
    assert_eq!(tcp.info(c).unwrap().state, TcpState::Closing);
    recv!(tcp, 21, ack_templ(snd + 1, RISS + 2));
    send!(
        tcp,
        22,
        Repr {
            seq: RISS + 2,
            ack: snd + 1,
            ..SEND_TEMPL
        }
    );
    assert_eq!(tcp.info_parked_too(c).unwrap().state, TcpState::TimeWait);
    tcp.handle_timeout(ms(2022));
    assert_eq!(tcp.socket_count(), 0);
}

#[test]
fn fin_wait_1_fin_and_ack_together_goes_to_time_wait() {
    let (mut tcp, c, snd) = established();
    tcp.shutdown_write(ms(20), c).unwrap();
    recv!(tcp, 20);
    send!(
        tcp,
        21,
        Repr {
            seq: RISS + 1,
            ack: snd + 1,
            flags: Flags::FIN | Flags::ACK,
            ..SEND_TEMPL
        }
    );
    recv!(tcp, 21, ack_templ(snd + 1, RISS + 2));
    assert_eq!(tcp.info(c).unwrap().state, TcpState::TimeWait);
    let mut buf = [0u8; 1];
    assert_eq!(tcp.recv(ms(22), c, &mut buf), Ok(0));
    tcp.handle_timeout(ms(3000));
    assert_eq!(tcp.poll_event(), Some(TcpEvent::Readable(c)));
    // The user kept the handle (shutdown only): it stays as a dead handle until closed.
    while tcp.poll_event().is_some() {}
    assert_eq!(tcp.socket_count(), 1);
    tcp.close(ms(3000), c).unwrap();
    assert_eq!(tcp.socket_count(), 0);
}

#[test]
fn an_orphaned_fin_wait_2_is_released_after_its_limit_a_half_closed_one_waits() {
    // The peer acknowledges our FIN and never sends its own: after `close` the
    // connection ends after `fin_wait_2_timeout`; after `shutdown_write` only, it is
    // the application's and stays.
    for closed in [true, false] {
        let (mut tcp, c, snd) = established_with(TcpConfig {
            fin_wait_2_timeout: Some(Duration::from_secs(5)),
            ..config()
        });
        if closed {
            tcp.close(ms(20), c).unwrap();
        } else {
            tcp.shutdown_write(ms(20), c).unwrap();
        }
        recv!(tcp, 20);
        send!(
            tcp,
            21,
            Repr {
                seq: RISS + 1,
                ack: snd + 1,
                ..SEND_TEMPL
            }
        );
        assert_eq!(tcp.info(c).unwrap().state, TcpState::FinWait2);
        tcp.handle_timeout(ms(5020));
        assert_eq!(
            tcp.socket_count(),
            1,
            "closed={closed}: not before the limit"
        );
        tcp.handle_timeout(ms(5021));
        if closed {
            assert_eq!(tcp.socket_count(), 0);
            assert_eq!(tcp.stats().fin_wait_2_timeouts, 1);
            assert_eq!(tcp.timer_count(), 0);
        } else {
            assert_eq!(tcp.info(c).unwrap().state, TcpState::FinWait2);
            assert_eq!(tcp.stats().fin_wait_2_timeouts, 0);
            // Closing it later starts the limit then.
            tcp.close(ms(6000), c).unwrap();
            tcp.handle_timeout(ms(10_999));
            assert_eq!(tcp.socket_count(), 1);
            tcp.handle_timeout(ms(11_000));
            assert_eq!(tcp.socket_count(), 0);
        }
    }
}

#[test]
fn data_after_close_is_answered_with_rst_data_after_shutdown_write_is_taken() {
    // RFC 1122 §4.2.2.13: "if new data is received after CLOSE is called, its TCP
    // SHOULD send a RST to show that data was lost" (as Linux, in FIN-WAIT-1 and
    // FIN-WAIT-2). After `shutdown_write` the application still reads.
    for closed in [true, false] {
        let (mut tcp, c, snd) = established();
        if closed {
            tcp.close(ms(20), c).unwrap();
        } else {
            tcp.shutdown_write(ms(20), c).unwrap();
        }
        assert!(parse(&recv!(tcp, 20)).flags.fin());
        // Data that does not acknowledge our FIN (FIN-WAIT-1).
        send!(
            tcp,
            30,
            Repr {
                seq: RISS + 1,
                ack: snd,
                payload: b"late",
                ..SEND_TEMPL
            }
        );
        let reply_bytes = recv!(tcp, 30);
        let reply = parse(&reply_bytes);
        if closed {
            // RFC 9293 §3.10.7.1's reply to a segment with ACK: <SEQ=SEG.ACK><CTL=RST>.
            assert_eq!((reply.flags, reply.seq), (Flags::RST, snd));
            assert_eq!(tcp.socket_count(), 0);
            assert_eq!(tcp.stats().resets_sent, 1);
        } else {
            assert_eq!((reply.flags, reply.ack), (Flags::ACK, RISS + 5));
            assert_eq!(tcp.info(c).unwrap().state, TcpState::FinWait1);
            let mut buf = [0u8; 8];
            assert_eq!(tcp.recv(ms(30), c, &mut buf), Ok(4));
        }
    }
}

/// The connection of [`established`] closed by us first, the peer's FIN acknowledged:
/// TIME-WAIT, with no listener left.
fn time_wait() -> (Tcp, TcpHandle, u32) {
    let (mut tcp, c, snd) = established();
    tcp.close(ms(20), c).unwrap();
    recv!(tcp, 20);
    send!(
        tcp,
        21,
        Repr {
            seq: RISS + 1,
            ack: snd + 1,
            flags: Flags::FIN | Flags::ACK,
            ..SEND_TEMPL
        }
    );
    recv!(tcp, 21);
    assert_eq!(tcp.info_parked_too(c).unwrap().state, TcpState::TimeWait);
    (tcp, c, snd)
}

#[test]
fn a_new_syn_to_time_wait_without_a_listener_keeps_time_wait() {
    // RFC 6191 lets a SYN reopen TIME-WAIT only to open a new connection: with no
    // listener, releasing TIME-WAIT would answer with a RST (a closed port) and leave
    // the tuple to old duplicates. TIME-WAIT stays and sends its challenge ACK.
    let (mut tcp, c, snd) = time_wait();
    send!(
        tcp,
        30,
        Repr {
            seq: RISS + 100_000,
            flags: Flags::SYN,
            ..SEND_TEMPL
        }
    );
    recv!(tcp, 30, ack_templ(snd + 1, RISS + 2));
    recv_nothing!(tcp, 30);
    assert_eq!(tcp.info_parked_too(c).unwrap().state, TcpState::TimeWait);
    assert_eq!(tcp.stats().time_wait_reuses, 0);
    assert_eq!(tcp.stats().resets_sent, 0);
}

#[test]
fn with_timestamps_time_wait_reuse_follows_the_timestamp_not_the_sequence_number() {
    // RFC 6191 §2: with timestamps, a SYN reopens TIME-WAIT when its timestamp is newer
    // than the last one seen, whatever its sequence number.
    let ts = |tsval: u32, tsecr: u32| Options {
        timestamps: Some((tsval, tsecr)),
        ..SEND_TEMPL.options
    };
    let config = TcpConfig {
        timestamps: true,
        ..config()
    };
    let (mut tcp, c, snd) = established_with_options(
        config,
        Options {
            mss: Some(MSS),
            ..ts(100, 0)
        },
    );
    tcp.close(ms(20), c).unwrap();
    let fin = recv!(tcp, 20);
    let our_ts = parse(&fin).options.timestamps.unwrap().0;
    send!(
        tcp,
        21,
        Repr {
            seq: RISS + 1,
            ack: snd + 1,
            flags: Flags::FIN | Flags::ACK,
            options: ts(500, our_ts),
            ..SEND_TEMPL
        }
    );
    recv!(tcp, 21);
    assert_eq!(tcp.info_parked_too(c).unwrap().state, TcpState::TimeWait);
    let l = tcp.listen(LOCAL, 4).unwrap();
    // A sequence number far above RCV.NXT but an older timestamp: no reuse.
    send!(
        tcp,
        30,
        Repr {
            seq: RISS + 100_000,
            flags: Flags::SYN,
            options: ts(400, 0),
            ..SEND_TEMPL
        }
    );
    assert_eq!(tcp.stats().time_wait_reuses, 0);
    assert_eq!(tcp.info_parked_too(c).unwrap().state, TcpState::TimeWait);
    while poll(&mut tcp, 30).is_some() {}
    // A sequence number below RCV.NXT but a newer timestamp: reuse.
    send!(
        tcp,
        31,
        Repr {
            seq: RISS.wrapping_sub(50_000),
            flags: Flags::SYN,
            options: Options {
                mss: Some(MSS),
                ..ts(600, 0)
            },
            ..SEND_TEMPL
        }
    );
    let bytes = recv!(tcp, 31);
    let synack = parse(&bytes);
    assert_eq!(synack.flags, Flags::SYN | Flags::ACK);
    assert_eq!(synack.ack, RISS.wrapping_sub(49_999));
    assert_eq!(tcp.stats().time_wait_reuses, 1);
    send!(
        tcp,
        32,
        Repr {
            seq: RISS.wrapping_sub(49_999),
            ack: synack.seq + 1,
            options: ts(601, synack.options.timestamps.unwrap().0),
            ..SEND_TEMPL
        }
    );
    assert!(tcp.accept(l).is_ok());
}

#[test]
fn time_wait_reuse_by_newer_syn() {
    let (mut tcp, c, snd) = established();
    tcp.close(ms(20), c).unwrap();
    recv!(tcp, 20);
    send!(
        tcp,
        21,
        Repr {
            seq: RISS + 1,
            ack: snd + 1,
            flags: Flags::FIN | Flags::ACK,
            ..SEND_TEMPL
        }
    );
    recv!(tcp, 21);
    // No listener any more, so a re-listen is needed for the reuse to open a connection.
    let l = tcp.listen(LOCAL, 4).unwrap();
    // An old SYN (below RCV.NXT) is not a reuse: challenge ACK.
    send!(
        tcp,
        30,
        Repr {
            seq: RISS,
            flags: Flags::SYN,
            ..SEND_TEMPL
        }
    );
    recv!(tcp, 30, ack_templ(snd + 1, RISS + 2));
    send!(
        tcp,
        31,
        Repr {
            seq: RISS + 100_000,
            flags: Flags::SYN,
            ..SEND_TEMPL
        }
    );
    let bytes = recv!(tcp, 31);
    let synack = parse(&bytes);
    assert_eq!(synack.flags, Flags::SYN | Flags::ACK);
    assert_eq!(synack.ack, RISS + 100_001);
    assert_eq!(tcp.stats().time_wait_reuses, 1);
    send!(
        tcp,
        32,
        Repr {
            seq: RISS + 100_001,
            ack: synack.seq + 1,
            ..SEND_TEMPL
        }
    );
    assert!(tcp.accept(l).is_ok());
}

#[test]
fn abort_sends_rst_and_releases() {
    let (mut tcp, c, snd) = established();
    // As Linux's `tcp_send_active_reset`: <SEQ=SND.NXT><ACK=RCV.NXT><CTL=RST,ACK>.
    tcp.abort(ms(20), c).unwrap();
    recv!(
        tcp,
        20,
        Repr {
            seq: snd,
            ack: RISS + 1,
            flags: Flags::RST | Flags::ACK,
            window: 0,
            ..RECV_TEMPL
        }
    );
    assert_eq!(tcp.socket_count(), 0);
    assert_eq!(tcp.send(ms(20), c, b"x"), Err(TcpError::InvalidHandle));
}

// ---- options ----------------------------------------------------------------------------

fn ts_established() -> (Tcp, TcpHandle, u32) {
    let cfg = TcpConfig {
        timestamps: true,
        window_scaling: true,
        ..config()
    };
    let mut tcp = Tcp::new(cfg, &secret(7));
    let l = tcp.listen(LOCAL, 4).unwrap();
    let opts = Options {
        mss: Some(MSS),
        window_scale: Some(2),
        timestamps: Some((500, 0)),
        ..SEND_TEMPL.options
    };
    send!(
        tcp,
        0,
        Repr {
            seq: RISS,
            flags: Flags::SYN,
            options: opts,
            ..SEND_TEMPL
        }
    );
    let bytes = recv!(tcp, 0);
    let synack = parse(&bytes);
    assert_eq!(synack.options.timestamps, Some((0, 500)));
    assert_eq!(synack.options.window_scale, Some(0));
    let ts = Options {
        timestamps: Some((510, 0)),
        ..SEND_TEMPL.options
    };
    send!(
        tcp,
        10,
        Repr {
            seq: RISS + 1,
            ack: synack.seq + 1,
            options: ts,
            window: 1000,
            ..SEND_TEMPL
        }
    );
    let c = tcp.accept(l).unwrap();
    assert_eq!(
        tcp.info(c).unwrap().snd_wnd,
        4000,
        "the peer's window is scaled by 2"
    );
    assert_eq!(
        tcp.info(c).unwrap().snd_mss,
        MSS - 12,
        "timestamps take 12 bytes of every segment"
    );
    (tcp, c, synack.seq + 1)
}

#[test]
fn abort_rst_carries_timestamps() {
    // RFC 7323 §3.2: "the TSopt ... SHOULD be sent in an <RST> segment", with TSecr
    // the peer's latest TSval (510, from the handshake's ACK).
    let (mut tcp, c, snd) = ts_established();
    tcp.abort(ms(20), c).unwrap();
    let bytes = recv!(tcp, 20);
    let rst = parse(&bytes);
    assert_eq!((rst.flags, rst.seq), (Flags::RST | Flags::ACK, snd));
    assert_eq!(rst.options.timestamps, Some((20, 510)));
}

#[test]
fn paws_rejects_old_timestamps_with_an_ack() {
    let (mut tcp, c, snd) = ts_established();
    let old = Options {
        timestamps: Some((400, 0)),
        ..SEND_TEMPL.options
    };
    send!(
        tcp,
        20,
        Repr {
            seq: RISS + 1,
            ack: snd,
            payload: b"old",
            options: old,
            ..SEND_TEMPL
        }
    );
    let bytes = recv!(tcp, 20);
    let ack = parse(&bytes);
    assert_eq!(
        (ack.ack, ack.options.timestamps),
        (RISS + 1, Some((20, 510)))
    );
    assert_eq!(tcp.stats().paws_drops, 1);
    let mut buf = [0u8; 4];
    assert_eq!(tcp.recv(ms(20), c, &mut buf), Err(TcpError::WouldBlock));
    let new = Options {
        timestamps: Some((520, 20)),
        ..SEND_TEMPL.options
    };
    send!(
        tcp,
        30,
        Repr {
            seq: RISS + 1,
            ack: snd,
            payload: b"new",
            options: new,
            ..SEND_TEMPL
        }
    );
    assert_eq!(tcp.recv(ms(30), c, &mut buf), Ok(3));
}

#[test]
fn full_size_segments_count_option_bytes() {
    let (mut tcp, c, _) = ts_established();
    tcp.send(ms(20), c, &[1u8; 3000]).unwrap();
    let bytes = recv!(tcp, 20);
    assert_eq!(parse(&bytes).payload.len(), usize::from(MSS) - 12);
}

#[test]
fn window_scale_shift_from_buffer_size() {
    assert_eq!(conn::our_wscale(65535), 0);
    assert_eq!(conn::our_wscale(256 * 1024), 3);
    assert_eq!(conn::our_wscale(usize::MAX), 14);
}

// ---- keep-alive, ports, handles ------------------------------------------------------

#[test]
fn keepalive_probes_then_timeout() {
    let ka = Keepalive {
        idle: Duration::from_secs(10),
        interval: Duration::from_secs(1),
        count: 2,
    };
    let (mut tcp, c, snd) = established_with(TcpConfig {
        keepalive: Some(ka),
        ..config()
    });
    assert_eq!(tcp.poll_timeout(), Some(ms(10_010)));
    tcp.handle_timeout(ms(10_010));
    recv!(tcp, 10_010, ack_templ(snd - 1, RISS + 1));
    // An answer restarts the idle time.
    send!(
        tcp,
        10_020,
        Repr {
            seq: RISS + 1,
            ack: snd,
            ..SEND_TEMPL
        }
    );
    assert_eq!(tcp.poll_timeout(), Some(ms(20_020)));
    for t in [20_020, 21_020, 22_020] {
        tcp.handle_timeout(ms(t));
        let _ = poll(&mut tcp, t);
    }
    assert_eq!(tcp.info(c).unwrap().state, TcpState::Closed);
    assert_eq!(tcp.stats().keepalive_probes, 3);
}

/// Found by the soak test: a half-closed connection in FIN-WAIT-2 whose peer vanished
/// (the peer's RST lost) has nothing in flight, so only keep-alive can notice; it used
/// to run in ESTABLISHED and CLOSE-WAIT only, and the connection waited for ever with no
/// timer. Keep-alive now probes in FIN-WAIT-2 (as Linux does), a silent peer times it
/// out, and a peer that answers keeps it.
#[test]
fn keepalive_probes_in_fin_wait_2() {
    let ka = Keepalive {
        idle: Duration::from_secs(10),
        interval: Duration::from_secs(1),
        count: 2,
    };
    let (mut tcp, c, snd) = established_with(TcpConfig {
        keepalive: Some(ka),
        ..config()
    });
    tcp.shutdown_write(ms(20), c).unwrap();
    recv!(
        tcp,
        20,
        Repr {
            flags: Flags::FIN | Flags::ACK,
            ..ack_templ(snd, RISS + 1)
        }
    );
    send!(
        tcp,
        30,
        Repr {
            seq: RISS + 1,
            ack: snd + 1,
            ..SEND_TEMPL
        }
    );
    assert_eq!(tcp.info(c).unwrap().state, TcpState::FinWait2);
    assert_eq!(tcp.poll_timeout(), Some(ms(10_030)));
    tcp.handle_timeout(ms(10_030));
    // SEG.SEQ = SND.NXT - 1: our FIN's sequence number.
    recv!(tcp, 10_030, ack_templ(snd, RISS + 1));
    // An answer restarts the idle time.
    send!(
        tcp,
        10_040,
        Repr {
            seq: RISS + 1,
            ack: snd + 1,
            ..SEND_TEMPL
        }
    );
    assert_eq!(tcp.poll_timeout(), Some(ms(20_040)));
    for t in [20_040, 21_040] {
        tcp.handle_timeout(ms(t));
        recv!(tcp, t, ack_templ(snd, RISS + 1));
    }
    tcp.handle_timeout(ms(22_040));
    assert_eq!(tcp.info(c).unwrap().state, TcpState::Closed);
    let mut buf = [0u8; 4];
    assert_eq!(tcp.recv(ms(22_040), c, &mut buf), Err(TcpError::TimedOut));
    assert_eq!(tcp.stats().keepalive_probes, 3);
    assert_eq!(tcp.timer_count(), 0);
}

#[test]
fn ephemeral_ports_differ_and_skip_used_ones() {
    let mut tcp = Tcp::new(config(), &secret(5));
    let any = SocketAddrV4::new(*LOCAL.ip(), 0);
    let mut ports = Vec::new();
    for _ in 0..100 {
        let c = tcp.connect(ms(0), any, REMOTE, MSS).unwrap();
        let port = tcp.addresses(c).unwrap().0.port();
        assert!(port >= 49152);
        assert!(!ports.contains(&port));
        ports.push(port);
    }
}

#[test]
fn stale_handles_are_rejected() {
    let mut tcp = Tcp::new(config(), &secret(5));
    let c = tcp.connect(ms(0), LOCAL, REMOTE, MSS).unwrap();
    tcp.abort(ms(0), c).unwrap();
    let d = tcp.connect(ms(0), LOCAL, REMOTE, MSS).unwrap();
    assert_ne!(c, d);
    assert_eq!(tcp.send(ms(0), c, b"x"), Err(TcpError::InvalidHandle));
    assert!(tcp.send(ms(0), d, b"x").is_ok());
}

/// Delayed ACKs, quick ACKs, PSH, the cork and gather writes.
#[path = "tests_push.rs"]
mod push;

/// The switches old TCPs are modelled with (`legacy.rs`).
#[path = "tests_legacy.rs"]
mod legacy;

/// cwnd growth: not while unused, slow start on stretch ACKs, CUBIC's ssthresh.
#[path = "tests_cwnd.rs"]
mod cwnd;

/// SYN cookies when the backlog is full.
#[path = "tests_cookies.rs"]
mod cookies;

/// TCP Fast Open (RFC 7413).
#[path = "tests_fast_open.rs"]
mod fast_open;

/// The memory bounds: connections, events, queued RSTs, spare rings.
#[path = "tests_limits.rs"]
mod limits;

/// Per-socket settings: TCP_CONGESTION, SO_RCVBUF, SO_SNDBUF, TCP_MAXSEG, ...
#[path = "tests_socket_options.rs"]
mod socket_options;
