//! Regressions for what the stateful fuzz target `tcp_conn` found (issue 13); each
//! input also stays in `fuzz/corpus/tcp_conn/` as `regression-*`.

use alloc::vec;
use core::net::{Ipv4Addr, SocketAddrV4};

use impnet_wire::tcp::{Flags, Options, Packet, Repr};

use super::*;
use crate::testutil::secret;
use crate::time::Instant;

const LOCAL: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 80);
const REMOTE: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 49500);

/// Our SYN's sequence number, from a fresh active open.
fn our_syn(tcp: &mut Tcp) -> (TcpHandle, u32) {
    let handle = tcp.connect(Instant::ZERO, LOCAL, REMOTE, 1000).unwrap();
    let mut buf = vec![0u8; 1500];
    let tx = tcp.poll_transmit(Instant::ZERO, &mut buf).expect("a SYN");
    let packet = Packet::new_checked(&buf[..tx.len]).unwrap();
    let syn = Repr::parse(&packet, LOCAL.ip(), REMOTE.ip(), true).unwrap();
    // SYN, with ECE and CWR when ECN is requested (the default).
    assert!(syn.flags.syn() && !syn.flags.ack());
    (handle, syn.seq)
}

#[test]
fn text_on_a_syn_ack_starts_after_the_syn() {
    // The peer's SYN-ACK carries "hello" (RFC 9293 §3.10.7.3: "If there are other
    // controls or text in the segment, then continue processing at the sixth step").
    // Its first octet is SEG.SEQ+1; it was stored at SEG.SEQ, so the user read "ello".
    let mut tcp = Tcp::new(TcpConfig::default(), &secret(3));
    let (handle, iss) = our_syn(&mut tcp);
    let synack = Repr {
        src_port: REMOTE.port(),
        dst_port: LOCAL.port(),
        seq: 5000,
        ack: iss.wrapping_add(1),
        flags: Flags::SYN | Flags::ACK,
        window: 65535,
        urgent: 0,
        options: Options {
            mss: Some(1000),
            ..Options::default()
        },
        payload: b"hello",
    };
    tcp.handle_segment(Instant::ZERO, *REMOTE.ip(), *LOCAL.ip(), &synack);
    let mut out = [0u8; 16];
    let n = tcp.recv(Instant::ZERO, handle, &mut out).unwrap();
    assert_eq!(&out[..n], b"hello");
    let mut buf = vec![0u8; 1500];
    let tx = tcp.poll_transmit(Instant::ZERO, &mut buf).expect("an ACK");
    let packet = Packet::new_checked(&buf[..tx.len]).unwrap();
    let ack = Repr::parse(&packet, LOCAL.ip(), REMOTE.ip(), true).unwrap();
    assert_eq!(
        ack.ack,
        5000 + 1 + 5,
        "the SYN and five octets acknowledged"
    );
}

/// An established active open with the peer at ISN 5000: (tcp, handle, our ISS).
fn established() -> (Tcp, TcpHandle, u32) {
    let mut tcp = Tcp::new(TcpConfig::default(), &secret(3));
    let (handle, iss) = our_syn(&mut tcp);
    let synack = Repr {
        flags: Flags::SYN | Flags::ACK,
        ..peer(5000, iss.wrapping_add(1), b"")
    };
    tcp.handle_segment(Instant::ZERO, *REMOTE.ip(), *LOCAL.ip(), &synack);
    (tcp, handle, iss)
}

/// Send whatever is queued (our FIN takes its sequence number when it leaves).
fn drain(tcp: &mut Tcp) {
    let mut buf = vec![0u8; 1500];
    while tcp.poll_transmit(Instant::ZERO, &mut buf).is_some() {}
}

/// A plain ACK segment from the peer.
fn peer(seq: u32, ack: u32, payload: &[u8]) -> Repr<'_> {
    Repr {
        src_port: REMOTE.port(),
        dst_port: LOCAL.port(),
        seq,
        ack,
        flags: Flags::ACK,
        window: 65535,
        urgent: 0,
        options: Options::default(),
        payload,
    }
}

/// Data the user has not read survives the connection's clean end: `recv` returns it,
/// then end of stream. Before, TIME-WAIT's (or LAST-ACK's) end dropped it and the first
/// `recv` said end of stream: acknowledged bytes lost without an error.
fn unread_data_survives_close(peer_fin_first: bool) {
    let (mut tcp, handle, iss) = established();
    let t = Instant::ZERO;
    let fin = Repr {
        flags: Flags::FIN | Flags::ACK,
        ..peer(5001, iss.wrapping_add(1), b"hello")
    };
    if peer_fin_first {
        tcp.handle_segment(t, *REMOTE.ip(), *LOCAL.ip(), &fin);
        tcp.shutdown_write(t, handle).unwrap();
        drain(&mut tcp);
        let ack = peer(5007, iss.wrapping_add(2), b"");
        tcp.handle_segment(t, *REMOTE.ip(), *LOCAL.ip(), &ack);
    } else {
        tcp.shutdown_write(t, handle).unwrap();
        drain(&mut tcp);
        let fin = Repr {
            ack: iss.wrapping_add(2),
            ..fin
        };
        tcp.handle_segment(t, *REMOTE.ip(), *LOCAL.ip(), &fin);
        drain(&mut tcp);
        let end = Instant::from_millis(600_000);
        tcp.handle_timeout(end);
    }
    assert_eq!(tcp.info(handle).map(|i| i.state), Some(TcpState::Closed));
    assert_eq!(tcp.readable(handle), 5);
    let mut out = [0u8; 16];
    let n = tcp.recv(t, handle, &mut out).unwrap();
    assert_eq!(&out[..n], b"hello");
    assert_eq!(tcp.recv(t, handle, &mut out), Ok(0));
}

#[test]
fn unread_data_survives_time_wait() {
    unread_data_survives_close(false);
}

#[test]
fn unread_data_survives_last_ack() {
    unread_data_survives_close(true);
}

/// Data taken past the window's right edge (the user read, the buffer has room, no
/// window update went out yet) leaves `TcpInfo::rcv_wnd` at 0, not wrapped to 2^32 - n.
#[test]
fn rcv_wnd_never_wraps_when_data_passes_the_advertised_edge() {
    let config = TcpConfig {
        recv_buffer: 2048,
        ..TcpConfig::default()
    };
    let mut tcp = Tcp::new(config, &secret(3));
    let (handle, iss) = our_syn(&mut tcp);
    let synack = Repr {
        flags: Flags::SYN | Flags::ACK,
        ..peer(5000, iss.wrapping_add(1), b"")
    };
    tcp.handle_segment(Instant::ZERO, *REMOTE.ip(), *LOCAL.ip(), &synack);
    drain(&mut tcp);
    let data = [7u8; 2048];
    let mut seq = 5001u32;
    // Fill the window, read a little (too little for a window update), then send more.
    tcp.handle_segment(
        Instant::ZERO,
        *REMOTE.ip(),
        *LOCAL.ip(),
        &peer(seq, iss.wrapping_add(1), &data),
    );
    seq += 2048;
    drain(&mut tcp);
    let mut out = [0u8; 300];
    assert_eq!(tcp.recv(Instant::ZERO, handle, &mut out), Ok(300));
    tcp.handle_segment(
        Instant::ZERO,
        *REMOTE.ip(),
        *LOCAL.ip(),
        &peer(seq, iss.wrapping_add(1), &data[..300]),
    );
    let info = tcp.info(handle).unwrap();
    assert!(info.rcv_wnd <= 2048, "{info:?}");
}

/// A new SYN that reopens TIME-WAIT on a listener (RFC 6191) ends the old connection
/// cleanly: its user still reads what was received before, then end of stream.
#[test]
fn unread_data_survives_time_wait_reuse() {
    let (mut tcp, handle, iss) = established();
    tcp.listen(LOCAL, 4).unwrap();
    let t = Instant::ZERO;
    tcp.shutdown_write(t, handle).unwrap();
    drain(&mut tcp);
    let fin = Repr {
        flags: Flags::FIN | Flags::ACK,
        ..peer(5001, iss.wrapping_add(2), b"hello")
    };
    tcp.handle_segment(t, *REMOTE.ip(), *LOCAL.ip(), &fin);
    drain(&mut tcp);
    assert_eq!(tcp.info(handle).map(|i| i.state), Some(TcpState::TimeWait));
    let syn = Repr {
        flags: Flags::SYN,
        ..peer(9000, 0, b"")
    };
    tcp.handle_segment(t, *REMOTE.ip(), *LOCAL.ip(), &syn);
    assert_eq!(tcp.stats().time_wait_reuses, 1);
    let mut out = [0u8; 16];
    let n = tcp.recv(t, handle, &mut out).unwrap();
    assert_eq!(&out[..n], b"hello");
    assert_eq!(tcp.recv(t, handle, &mut out), Ok(0));
}
