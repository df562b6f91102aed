//! API misuse (issue 13): every public socket call of the stack (`Stack::tcp_*`,
//! `Tcp`'s own, `udp_*`, `icmp_*`) on a handle that was never issued, a closed one, a
//! listener, a connection in SYN-SENT, after `shutdown_write`, after the peer's RST,
//! after a timeout, after a refusal and after a clean end. Each call must return the
//! specific error that case has (never a panic, never a generic error where a
//! specific one fits).

use alloc::vec;
use alloc::vec::Vec;
use core::net::{Ipv4Addr, SocketAddrV4};

use crate::icmp::IcmpError;
use crate::stack::Stack;
use crate::tcp::{TcpError, TcpHandle, TcpState};
use crate::testutil::{IP_A, IP_B, Pair, host};
use crate::time::{Duration, Instant};
use crate::udp::UdpError;

const PORT: u16 = 80;

fn server_addr() -> SocketAddrV4 {
    SocketAddrV4::new(IP_B, PORT)
}

fn any_port() -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)
}

/// What each call on one handle must return. `send` offers 3 bytes, `recv` has a
/// 16-byte buffer.
#[derive(Debug, Clone, Copy)]
struct Expect {
    send: Result<usize, TcpError>,
    recv: Result<usize, TcpError>,
    shutdown: Result<(), TcpError>,
    nodelay: Result<(), TcpError>,
    cork: Result<(), TcpError>,
    accept: TcpError,
    error: Result<Option<TcpError>, TcpError>,
    /// `tcp_info` and `tcp_addresses` give something.
    known: bool,
}

/// The calls on a handle that names no socket: all `InvalidHandle`.
const STALE: Expect = Expect {
    send: Err(TcpError::InvalidHandle),
    recv: Err(TcpError::InvalidHandle),
    shutdown: Err(TcpError::InvalidHandle),
    nodelay: Err(TcpError::InvalidHandle),
    cork: Err(TcpError::InvalidHandle),
    accept: TcpError::InvalidHandle,
    error: Err(TcpError::InvalidHandle),
    known: false,
};

/// A connection that ended with `e`: it reports `e` to every send and receive, until
/// the handle is closed.
const fn ended_with(e: TcpError) -> Expect {
    Expect {
        send: Err(e),
        recv: Err(e),
        shutdown: Err(TcpError::InvalidState),
        nodelay: Ok(()),
        cork: Ok(()),
        accept: TcpError::InvalidState,
        error: Ok(Some(e)),
        known: true,
    }
}

/// Call every socket method once on `h` (twice for the data calls: the answer must
/// not change) and compare with `expect`. Neither close nor abort: the cases below
/// test those.
/// `tcp_send_owned` answers as `tcp_send` does (and gives the buffer back, untouched,
/// when it refuses it); `tcp_recv_with` as `tcp_recv`, its closure called only when
/// there is data or the end of the stream (an empty slice).
fn zero_copy_calls(stack: &mut Stack, now: Instant, h: TcpHandle, expect: Expect, case: &str) {
    let owned = stack.tcp_send_owned(now, h, b"abc".to_vec());
    let owned = owned.map(|()| 3).map_err(|refused| {
        assert_eq!(
            refused.data, b"abc",
            "{case}: tcp_send_owned gives the data back"
        );
        refused.error
    });
    assert_eq!(owned, expect.send, "{case}: tcp_send_owned");
    let mut seen = None;
    let lent = stack.tcp_recv_with(now, h, |data| {
        seen = Some(data.len());
        data.len()
    });
    assert_eq!(lent, expect.recv, "{case}: tcp_recv_with");
    let called = expect.recv.is_ok();
    assert_eq!(
        seen.is_some(),
        called,
        "{case}: tcp_recv_with calls its closure"
    );
}

fn check(stack: &mut Stack, now: Instant, h: TcpHandle, expect: Expect, case: &str) {
    let mut buf = [0u8; 16];
    for round in 0..2 {
        assert_eq!(
            stack.tcp_send(now, h, b"abc"),
            expect.send,
            "{case}: tcp_send #{round}"
        );
        assert_eq!(
            stack.tcp_send_vectored(now, h, [&b"ab"[..], &b"c"[..]]),
            expect.send,
            "{case}: tcp_send_vectored #{round}"
        );
        assert_eq!(
            stack.tcp_recv(now, h, &mut buf),
            expect.recv,
            "{case}: tcp_recv #{round}"
        );
        zero_copy_calls(stack, now, h, expect, case);
    }
    // Offering nothing is never an error where offering something is not.
    let empty = stack.tcp_send(now, h, b"");
    assert_eq!(
        empty,
        expect.send.map(|_| 0).or_else(|e| match e {
            TcpError::WouldBlock => Ok(0),
            e => Err(e),
        }),
        "{case}: tcp_send of nothing"
    );
    assert_eq!(
        stack.tcp_shutdown(now, h),
        expect.shutdown,
        "{case}: tcp_shutdown"
    );
    assert_eq!(
        stack.tcp_set_nodelay(h, true),
        expect.nodelay,
        "{case}: tcp_set_nodelay"
    );
    assert_eq!(
        stack.tcp_set_cork(now, h, true),
        expect.cork,
        "{case}: tcp_set_cork on"
    );
    assert_eq!(
        stack.tcp_set_cork(now, h, false),
        expect.cork,
        "{case}: tcp_set_cork off"
    );
    assert_eq!(
        stack.tcp_accept(h),
        Err(expect.accept),
        "{case}: tcp_accept"
    );
    assert_eq!(stack.tcp().error(h), expect.error, "{case}: error");
    assert_eq!(
        stack.tcp_info(h).is_some(),
        expect.known,
        "{case}: tcp_info"
    );
    assert_eq!(
        stack.tcp_addresses(h).is_some(),
        expect.known,
        "{case}: tcp_addresses"
    );
    // Pure queries answer 0 for anything that cannot hold data.
    let _ = stack.tcp().readable(h);
    let _ = stack.tcp().send_queued(h);
    if !expect.known {
        assert_eq!(stack.tcp().readable(h), 0, "{case}: readable");
        assert_eq!(stack.tcp().send_queued(h), 0, "{case}: send_queued");
    }
}

/// B listening; A connected to it and the connection accepted: (listener, client on
/// A, server on B).
fn connected(pair: &mut Pair) -> (TcpHandle, TcpHandle, TcpHandle) {
    let listener = pair.b.tcp_listen(server_addr(), 4).unwrap();
    let client = pair
        .a
        .tcp_connect(pair.now, any_port(), server_addr())
        .unwrap();
    pair.exchange();
    let server = pair.b.tcp_accept(listener).unwrap();
    (listener, client, server)
}

/// A handle index no socket of a fresh pair uses: from another stack with many.
fn never_issued() -> TcpHandle {
    let (mut other, _) = host(9, crate::testutil::MAC_A, IP_A, 1500);
    let mut last = None;
    for port in 1..=40 {
        last = Some(other.tcp_listen(SocketAddrV4::new(IP_A, port), 1).unwrap());
    }
    last.unwrap()
}

fn is_tcp(frame: &[u8]) -> bool {
    frame.len() > 23 && frame[12..14] == [0x08, 0x00] && frame[23] == 6
}

#[test]
fn a_handle_never_issued_is_invalid_everywhere() {
    let mut pair = Pair::new();
    let (_, client, _) = connected(&mut pair);
    let h = never_issued();
    check(&mut pair.a, pair.now, h, STALE, "never issued");
    assert_eq!(pair.a.tcp_close(pair.now, h), Err(TcpError::InvalidHandle));
    assert_eq!(pair.a.tcp_abort(pair.now, h), Err(TcpError::InvalidHandle));
    // The live connection is untouched.
    assert_eq!(pair.a.tcp_send(pair.now, client, b"ok"), Ok(2));
}

#[test]
fn a_closed_handle_is_invalid_and_cannot_reach_its_slots_next_socket() {
    let mut pair = Pair::new();
    let (listener, client, server) = connected(&mut pair);
    // A listener closes at once.
    pair.b.tcp_close(pair.now, listener).unwrap();
    check(&mut pair.b, pair.now, listener, STALE, "closed listener");
    assert_eq!(
        pair.b.tcp_close(pair.now, listener),
        Err(TcpError::InvalidHandle)
    );
    assert_eq!(
        pair.b.tcp_abort(pair.now, listener),
        Err(TcpError::InvalidHandle)
    );
    // An aborted connection is released at once.
    pair.a.tcp_abort(pair.now, client).unwrap();
    check(&mut pair.a, pair.now, client, STALE, "aborted connection");
    assert_eq!(
        pair.a.tcp_close(pair.now, client),
        Err(TcpError::InvalidHandle)
    );
    assert_eq!(
        pair.a.tcp_abort(pair.now, client),
        Err(TcpError::InvalidHandle)
    );
    // A new socket takes the freed slot; the old handle still names nothing.
    let reused = pair.a.tcp_listen(SocketAddrV4::new(IP_A, 7), 1).unwrap();
    assert_eq!(pair.a.tcp_accept(client), Err(TcpError::InvalidHandle));
    assert_eq!(pair.a.tcp_accept(reused), Err(TcpError::WouldBlock));
    // A gracefully closed connection: valid until it has ended, then stale.
    pair.exchange();
    pair.b.tcp_close(pair.now, server).unwrap();
    pair.exchange();
    for _ in 0..10 {
        pair.advance(Duration::from_secs(60));
        pair.exchange();
    }
    check(&mut pair.b, pair.now, server, STALE, "closed connection");
    assert_eq!(pair.b.tcp().socket_count(), 0);
}

#[test]
fn connection_calls_on_a_listener_are_invalid_state() {
    let mut pair = Pair::new();
    let (listener, _, _) = connected(&mut pair);
    let expect = Expect {
        send: Err(TcpError::InvalidState),
        recv: Err(TcpError::InvalidState),
        shutdown: Err(TcpError::InvalidState),
        nodelay: Err(TcpError::InvalidState),
        cork: Err(TcpError::InvalidState),
        // A listener's accept queue is merely empty.
        accept: TcpError::WouldBlock,
        error: Ok(None),
        known: false,
    };
    check(&mut pair.b, pair.now, listener, expect, "listener");
    assert_eq!(pair.b.tcp().readable(listener), 0);
    // Still listening afterwards.
    let again = pair
        .a
        .tcp_connect(pair.now, any_port(), server_addr())
        .unwrap();
    pair.exchange();
    assert!(pair.b.tcp_accept(listener).is_ok());
    assert_eq!(pair.a.tcp_info(again).unwrap().state, TcpState::Established);
}

#[test]
fn calls_in_syn_sent() {
    let mut pair = Pair::new();
    let listener = pair.b.tcp_listen(server_addr(), 4).unwrap();
    let client = pair
        .a
        .tcp_connect(pair.now, any_port(), server_addr())
        .unwrap();
    assert_eq!(pair.a.tcp_info(client).unwrap().state, TcpState::SynSent);
    let expect = Expect {
        // Queued, to go once the handshake completes (RFC 9293 §3.10.2).
        send: Ok(3),
        recv: Err(TcpError::WouldBlock),
        // A half-close waits for the handshake.
        shutdown: Err(TcpError::InvalidState),
        nodelay: Ok(()),
        cork: Ok(()),
        accept: TcpError::InvalidState,
        error: Ok(None),
        known: true,
    };
    check(&mut pair.a, pair.now, client, expect, "SYN-SENT");
    // What was queued (six writes of 3 bytes: two rounds of send, gather and owned
    // send) arrives once the handshake is done.
    pair.exchange();
    assert_eq!(
        pair.a.tcp_info(client).unwrap().state,
        TcpState::Established
    );
    let server = pair.b.tcp_accept(listener).unwrap();
    let mut buf = [0u8; 32];
    assert_eq!(pair.b.tcp_recv(pair.now, server, &mut buf), Ok(18));
    assert_eq!(&buf[..18], b"abcabcabcabcabcabc");
}

#[test]
fn send_after_shutdown_write_is_closing() {
    let mut pair = Pair::new();
    let (_, client, server) = connected(&mut pair);
    pair.a.tcp_shutdown(pair.now, client).unwrap();
    pair.exchange();
    let expect = Expect {
        send: Err(TcpError::Closing),
        recv: Err(TcpError::WouldBlock),
        // Shutting down again is harmless.
        shutdown: Ok(()),
        nodelay: Ok(()),
        cork: Ok(()),
        accept: TcpError::InvalidState,
        error: Ok(None),
        known: true,
    };
    check(
        &mut pair.a,
        pair.now,
        client,
        expect,
        "after shutdown_write",
    );
    // The other direction still works.
    assert_eq!(pair.b.tcp_send(pair.now, server, b"back"), Ok(4));
    pair.exchange();
    let mut buf = [0u8; 8];
    assert_eq!(pair.a.tcp_recv(pair.now, client, &mut buf), Ok(4));
    // The server saw the end of the stream.
    assert_eq!(pair.b.tcp_recv(pair.now, server, &mut buf), Ok(0));
    // After the clean end (both FINs, TIME-WAIT over), sending is still "closing" and
    // reading is the end of the stream.
    pair.b.tcp_close(pair.now, server).unwrap();
    pair.exchange();
    for _ in 0..10 {
        pair.advance(Duration::from_secs(60));
        pair.exchange();
    }
    assert_eq!(pair.a.tcp_info(client).unwrap().state, TcpState::Closed);
    let expect = Expect {
        send: Err(TcpError::Closing),
        recv: Ok(0),
        shutdown: Err(TcpError::InvalidState),
        nodelay: Ok(()),
        cork: Ok(()),
        accept: TcpError::InvalidState,
        error: Ok(None),
        known: true,
    };
    check(&mut pair.a, pair.now, client, expect, "after a clean end");
    pair.a.tcp_close(pair.now, client).unwrap();
    check(
        &mut pair.a,
        pair.now,
        client,
        STALE,
        "closed after a clean end",
    );
}

#[test]
fn calls_after_the_peers_reset_report_connection_reset() {
    let mut pair = Pair::new();
    let (_, client, server) = connected(&mut pair);
    pair.b.tcp_abort(pair.now, server).unwrap();
    pair.exchange();
    assert_eq!(pair.a.tcp_info(client).unwrap().state, TcpState::Closed);
    check(
        &mut pair.a,
        pair.now,
        client,
        ended_with(TcpError::ConnectionReset),
        "after the peer's RST",
    );
    pair.a.tcp_close(pair.now, client).unwrap();
    check(&mut pair.a, pair.now, client, STALE, "closed after RST");
}

#[test]
fn a_killed_connection_resets_its_peer_and_its_owner_sees_the_reset() {
    let mut pair = Pair::new();
    let (listener, client, server) = connected(&mut pair);
    // An operator's `imp ss --kill` on B's end: a RST to A, and B's owner keeps its
    // handle, whose calls report the reset until it closes it.
    pair.b.tcp_kill(pair.now, server).unwrap();
    assert_eq!(pair.b.tcp_info(server).unwrap().state, TcpState::Closed);
    check(
        &mut pair.b,
        pair.now,
        server,
        ended_with(TcpError::ConnectionReset),
        "after the kill",
    );
    assert_eq!(
        pair.b.tcp_kill(pair.now, server),
        Err(TcpError::InvalidState),
        "a connection already ended is not killed again"
    );
    pair.exchange();
    assert_eq!(pair.a.tcp_info(client).unwrap().state, TcpState::Closed);
    check(
        &mut pair.a,
        pair.now,
        client,
        ended_with(TcpError::ConnectionReset),
        "the peer of a killed connection",
    );
    assert_eq!(
        pair.b.tcp_kill(pair.now, listener),
        Err(TcpError::InvalidState),
        "a listener is not killed"
    );
    pair.b.tcp_close(pair.now, server).unwrap();
    check(
        &mut pair.b,
        pair.now,
        server,
        STALE,
        "closed after the kill",
    );
}

#[test]
fn calls_after_a_timeout_report_timed_out() {
    let mut pair = Pair::new();
    let (_, client, _) = connected(&mut pair);
    pair.a.tcp_send(pair.now, client, b"lost").unwrap();
    // B's segments never arrive (ARP still does, so it is TCP that gives up).
    for _ in 0..200 {
        pair.exchange_filtered(|from_a, frame| from_a || !is_tcp(frame));
        if pair.a.tcp_info(client).unwrap().state == TcpState::Closed {
            break;
        }
        pair.advance(Duration::from_secs(10));
    }
    assert_eq!(pair.a.tcp_info(client).unwrap().state, TcpState::Closed);
    check(
        &mut pair.a,
        pair.now,
        client,
        ended_with(TcpError::TimedOut),
        "after a timeout",
    );
}

#[test]
fn calls_after_a_refusal_report_connection_refused() {
    let mut pair = Pair::new();
    let client = pair
        .a
        .tcp_connect(pair.now, any_port(), SocketAddrV4::new(IP_B, 9))
        .unwrap();
    pair.exchange();
    check(
        &mut pair.a,
        pair.now,
        client,
        ended_with(TcpError::ConnectionRefused),
        "after a refusal",
    );
}

#[test]
fn bad_listen_and_connect_addresses_are_specific_errors() {
    let mut pair = Pair::new();
    let now = pair.now;
    let a = &mut pair.a;
    assert_eq!(
        a.tcp_listen(SocketAddrV4::new(IP_A, 0), 1),
        Err(TcpError::AddrNotAvailable)
    );
    assert_eq!(
        a.tcp_listen(SocketAddrV4::new(IP_B, 80), 1),
        Err(TcpError::AddrNotAvailable)
    );
    a.tcp_listen(SocketAddrV4::new(IP_A, 80), 1).unwrap();
    assert_eq!(
        a.tcp_listen(SocketAddrV4::new(IP_A, 80), 1),
        Err(TcpError::AddrInUse)
    );
    let cases: Vec<(SocketAddrV4, SocketAddrV4, TcpError)> = vec![
        (
            any_port(),
            SocketAddrV4::new(IP_B, 0),
            TcpError::AddrNotAvailable,
        ),
        (
            any_port(),
            SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80),
            TcpError::AddrNotAvailable,
        ),
        (
            any_port(),
            SocketAddrV4::new(Ipv4Addr::BROADCAST, 80),
            TcpError::NetUnreachable,
        ),
        (
            any_port(),
            SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 255), 80),
            TcpError::NetUnreachable,
        ),
        (
            any_port(),
            SocketAddrV4::new(Ipv4Addr::new(224, 0, 0, 1), 80),
            TcpError::NetUnreachable,
        ),
        (
            any_port(),
            SocketAddrV4::new(Ipv4Addr::new(192, 168, 7, 7), 80),
            TcpError::NetUnreachable,
        ),
        (
            SocketAddrV4::new(IP_B, 0),
            SocketAddrV4::new(IP_B, 80),
            TcpError::AddrNotAvailable,
        ),
    ];
    for (local, remote, error) in cases {
        assert_eq!(
            a.tcp_connect(now, local, remote),
            Err(error),
            "connect {local} -> {remote}"
        );
    }
    let local = SocketAddrV4::new(IP_A, 5000);
    a.tcp_connect(now, local, server_addr()).unwrap();
    assert_eq!(
        a.tcp_connect(now, local, server_addr()),
        Err(TcpError::AddrInUse)
    );
    // Nothing above left a socket behind but the listener and the one connection.
    assert_eq!(a.tcp().socket_count(), 2);
}

#[test]
fn udp_and_echo_calls_on_stale_handles_are_invalid_handle() {
    let mut pair = Pair::new();
    let now = pair.now;
    // Never issued: a handle from another stack with more sockets.
    let (mut other, _) = host(9, crate::testutil::MAC_A, IP_A, 1500);
    let mut foreign_udp = None;
    let mut foreign_icmp = None;
    for n in 1..=20u16 {
        foreign_udp = Some(other.udp_bind(SocketAddrV4::new(IP_A, n)).unwrap());
        foreign_icmp = Some(other.icmp_bind(n).unwrap());
    }
    let a = &mut pair.a;
    let closed = a.udp_bind(SocketAddrV4::new(IP_A, 53)).unwrap();
    a.udp_close(closed).unwrap();
    let dst = SocketAddrV4::new(IP_B, 53);
    let mut buf = [0u8; 16];
    for (case, h) in [("closed", closed), ("never issued", foreign_udp.unwrap())] {
        assert_eq!(
            a.udp_send_to(now, h, dst, b"x"),
            Err(UdpError::InvalidHandle),
            "{case}"
        );
        assert_eq!(
            a.udp_recv_from(h, &mut buf),
            Err(UdpError::InvalidHandle),
            "{case}"
        );
        assert_eq!(a.udp_local_addr(h), Err(UdpError::InvalidHandle), "{case}");
        assert_eq!(
            a.udp_set_dont_fragment(h, true),
            Err(UdpError::InvalidHandle),
            "{case}"
        );
        assert_eq!(a.udp_close(h), Err(UdpError::InvalidHandle), "{case}");
    }
    // The closed socket's slot, reused, is not reachable through the old handle.
    let reused = a.udp_bind(SocketAddrV4::new(IP_A, 54)).unwrap();
    assert_eq!(a.udp_local_addr(closed), Err(UdpError::InvalidHandle));
    assert_eq!(a.udp_local_addr(reused).unwrap().port(), 54);
    assert_eq!(
        a.udp_send_to(now, reused, dst, &vec![0u8; 65_508]),
        Err(UdpError::MessageTooLong)
    );
    assert_eq!(
        a.udp_bind(SocketAddrV4::new(IP_B, 1)),
        Err(UdpError::AddrNotAvailable)
    );
    assert_eq!(
        a.udp_bind(SocketAddrV4::new(IP_A, 54)),
        Err(UdpError::AddrInUse)
    );
    let closed = a.icmp_bind(7).unwrap();
    a.icmp_close(closed).unwrap();
    for (case, h) in [("closed", closed), ("never issued", foreign_icmp.unwrap())] {
        assert_eq!(
            a.icmp_send_echo(now, h, IP_B, 1, b"x"),
            Err(IcmpError::InvalidHandle),
            "{case}"
        );
        assert_eq!(
            a.icmp_send_echo_with_options(now, h, IP_B, 1, b"x", &[]),
            Err(IcmpError::InvalidHandle),
            "{case}"
        );
        assert_eq!(
            a.icmp_recv(h, &mut buf).err(),
            Some(IcmpError::InvalidHandle),
            "{case}"
        );
        assert_eq!(a.icmp_close(h), Err(IcmpError::InvalidHandle), "{case}");
    }
    let live = a.icmp_bind(7).unwrap();
    assert_eq!(a.icmp_bind(7), Err(IcmpError::IdentInUse));
    assert_eq!(
        a.icmp_send_echo(now, live, IP_B, 1, &vec![0u8; 65_508]),
        Err(IcmpError::MessageTooLong)
    );
}
