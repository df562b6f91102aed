//! The loopback interface: a connection to our own address and port (RFC 9293
//! simultaneous open with itself), sockets talking over 127.0.0.1, UDP and ICMP to
//! ourselves, and 127/8 refused from the wire.

use alloc::vec;
use alloc::vec::Vec;
use core::net::{Ipv4Addr, SocketAddrV4};

use crate::iface::IfaceId;
use crate::tcp::{TcpHandle, TcpState};
use crate::testutil::{IP_A, MAC_A, MAC_B, drain, host};
use crate::time::{Duration, Instant};
use crate::{SegmentKind, Stack, Transmit};

const LOCALHOST: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);

/// A stack with one Ethernet interface, its announcement drained.
fn stack() -> Stack {
    let (mut stack, _) = host(7, MAC_A, IP_A, 1500);
    drain(&mut stack, Instant::from_nanos(0));
    stack
}

/// Poll until nothing is left; every frame that would reach a device is returned.
/// Timers fire as they come due, up to `until`.
fn run(stack: &mut Stack, now: &mut Instant, until: Instant) -> Vec<Transmit> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1514];
    for _ in 0..100_000 {
        while let Some(tx) = stack.poll_transmit(*now, &mut buf) {
            out.push(tx);
        }
        while stack.poll_event().is_some() {}
        match stack.poll_timeout() {
            Some(at) if at <= until => {
                *now = (*now).max(at);
                stack.handle_timeout(*now);
            }
            _ => return out,
        }
    }
    panic!("loopback did not go quiet");
}

fn state(stack: &Stack, handle: TcpHandle) -> TcpState {
    stack.tcp_info(handle).expect("connection").state
}

/// Write `data` and read it back on `rx`, polling in between.
fn exchange(stack: &mut Stack, now: &mut Instant, tx: TcpHandle, rx: TcpHandle, data: &[u8]) {
    let mut got = Vec::new();
    let mut sent = 0;
    let mut buf = vec![0u8; 65536];
    for _ in 0..1000 {
        if sent < data.len() {
            sent += stack.tcp_send(*now, tx, &data[sent..]).unwrap_or(0);
        }
        let until = *now + Duration::from_millis(500);
        assert!(
            run(stack, now, until).is_empty(),
            "nothing reaches a device"
        );
        while let Ok(n) = stack.tcp_recv(*now, rx, &mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        if got.len() == data.len() {
            break;
        }
    }
    assert_eq!(got, data, "every byte back, in order");
}

#[test]
fn a_connection_to_its_own_address_and_port_opens_and_carries_data() {
    let mut stack = stack();
    let mut now = Instant::from_nanos(0);
    let me = SocketAddrV4::new(IP_A, 5000);
    let conn = stack.tcp_connect(now, me, me).expect("connect to itself");
    let frames = run(
        &mut stack,
        &mut now,
        Instant::from_nanos(0) + Duration::from_secs(1),
    );
    assert!(frames.is_empty(), "no frame to the device: {frames:?}");
    assert_eq!(state(&stack, conn), TcpState::Established);
    assert_eq!(stack.tcp_stats().retransmitted, 0);
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    exchange(&mut stack, &mut now, conn, conn, &data);
    assert_eq!(stack.tcp_stats().retransmitted, 0);
    // Everything it sent, it received: by kind and byte for byte.
    let tcp = &stack.stats().tcp;
    assert_eq!(tcp.tx_kinds, tcp.rx_kinds);
    assert_eq!(
        tcp.tx_kinds.segments(SegmentKind::Syn),
        2,
        "SYN and SYN-ACK, to itself"
    );
    assert!(tcp.tx_kinds.bytes(SegmentKind::Data) > data.len() as u64);
    assert_eq!(stack.tcp_stats().duplicate_segments, 0);
    let looped = stack.loopback_stats();
    assert!(looped.tx_frames > 10);
    assert_eq!(looped.tx_frames, looped.rx_frames);
    assert_eq!(stack.iface_stats(IfaceId::LOOPBACK), Some(looped));
}

#[test]
fn sockets_talk_over_localhost_and_close_cleanly() {
    let mut stack = stack();
    let mut now = Instant::from_nanos(0);
    let listener = stack
        .tcp_listen(SocketAddrV4::new(LOCALHOST, 80), 4)
        .expect("listen on 127.0.0.1");
    let client = stack
        .tcp_connect(
            now,
            SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
            SocketAddrV4::new(LOCALHOST, 80),
        )
        .expect("connect");
    let until = now + Duration::from_secs(1);
    assert!(run(&mut stack, &mut now, until).is_empty());
    let server = stack.tcp_accept(listener).expect("accepted");
    let (local, _) = stack.tcp_addresses(client).expect("addresses");
    assert_eq!(local.ip(), LOCALHOST, "source chosen on the loopback route");
    let data: Vec<u8> = (0..50_000u32).map(|i| i as u8).collect();
    exchange(&mut stack, &mut now, client, server, &data);
    exchange(&mut stack, &mut now, server, client, &data[..1000]);
    stack.tcp_close(now, client).expect("close");
    stack.tcp_close(now, server).expect("close");
    let until = now + Duration::from_secs(600);
    assert!(run(&mut stack, &mut now, until).is_empty());
    assert!(
        stack
            .tcp_info(client)
            .is_none_or(|i| i.state == TcpState::Closed)
    );
    assert_eq!(stack.tcp_stats().resets_sent, 0);
}

#[test]
fn udp_and_ping_to_ourselves_loop_back() {
    let mut stack = stack();
    let mut now = Instant::from_nanos(0);
    let a = stack
        .udp_bind(SocketAddrV4::new(LOCALHOST, 7))
        .expect("bind");
    let b = stack.udp_bind(SocketAddrV4::new(IP_A, 9)).expect("bind");
    stack
        .udp_send_to(now, a, SocketAddrV4::new(IP_A, 9), b"hello")
        .expect("send");
    // A datagram bigger than the loopback MTU goes in fragments and is reassembled.
    let big = vec![0x5a; 40_000];
    stack
        .udp_send_to(now, b, SocketAddrV4::new(LOCALHOST, 7), &big)
        .expect("send");
    let until = now;
    assert!(run(&mut stack, &mut now, until).is_empty());
    let mut buf = vec![0u8; 65536];
    assert_eq!(
        stack.udp_recv_from(b, &mut buf),
        Ok((
            5,
            std::net::SocketAddr::from(SocketAddrV4::new(LOCALHOST, 7))
        ))
    );
    assert_eq!(stack.udp_recv_from(a, &mut buf).map(|(n, _)| n), Ok(40_000));
    assert!(stack.stats().reassembly.reassembled >= 1);
    let ping = stack.icmp_bind(77).expect("bind");
    stack
        .icmp_send_echo(now, ping, LOCALHOST, 1, b"ping")
        .expect("echo");
    let until = now;
    assert!(run(&mut stack, &mut now, until).is_empty());
    assert!(
        stack.icmp_recv(ping, &mut buf).is_ok(),
        "the echo reply came back"
    );
}

/// A UDP datagram from `src` to `dst` port 80, in an Ethernet frame from B to A.
fn udp_frame(src: Ipv4Addr, dst: Ipv4Addr) -> Vec<u8> {
    use impnet_wire::{ethernet, ipv4, udp};
    let udp = udp::Repr {
        src_port: 1234,
        dst_port: 80,
        payload: b"x",
    };
    let ip = ipv4::Repr {
        src_addr: src,
        dst_addr: dst,
        protocol: ipv4::Protocol::Udp,
        payload_len: udp.buffer_len(),
        ttl: 64,
        ident: 1,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
        dscp: 0,
        ecn: 0,
        options: &[],
    };
    let mut frame = vec![0u8; ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp.buffer_len()];
    let eth = ethernet::Repr {
        src: MAC_B,
        dst: MAC_A,
        ethertype: ethernet::EtherType::Ipv4,
        vlan: None,
    };
    eth.emit(&mut ethernet::Frame::new_unchecked(&mut frame[..]));
    ip.emit(&mut ipv4::Packet::new_unchecked(
        &mut frame[ethernet::HEADER_LEN..],
    ));
    let at = ethernet::HEADER_LEN + ipv4::HEADER_LEN;
    udp.emit(
        &mut udp::Packet::new_unchecked(&mut frame[at..]),
        &src,
        &dst,
    );
    frame
}

#[test]
fn loopback_addresses_from_the_wire_are_dropped() {
    let (mut stack, iface) = host(7, MAC_A, IP_A, 1500);
    let now = Instant::from_nanos(0);
    drain(&mut stack, now);
    let _listener = stack
        .tcp_listen(SocketAddrV4::new(LOCALHOST, 80), 4)
        .unwrap();
    // A frame from the wire claiming 127.0.0.1 as its destination, and one as its source.
    for (src, dst) in [(Ipv4Addr::new(10, 0, 0, 2), LOCALHOST), (LOCALHOST, IP_A)] {
        stack.handle_frame(now, iface, &udp_frame(src, dst));
    }
    assert_eq!(stack.stats().ipv4.rx_not_for_us, 1);
    assert_eq!(stack.stats().ipv4.rx_bad_source, 1);
    assert_eq!(stack.stats().ipv4.rx_delivered, 0);
}

#[test]
fn what_a_socket_sends_itself_is_due_at_once() {
    // A socket echoing to itself for ever: each poll returns, and the next echo, sent
    // between polls, is due at once (`poll_timeout` says now).
    let mut stack = stack();
    let now = Instant::from_nanos(0);
    let a = stack.udp_bind(SocketAddrV4::new(LOCALHOST, 1000)).unwrap();
    stack
        .udp_send_to(now, a, SocketAddrV4::new(LOCALHOST, 1000), b"again")
        .unwrap();
    let mut buf = vec![0u8; 1514];
    let mut rounds = 0;
    for _ in 0..10 {
        assert!(stack.poll_transmit(now, &mut buf).is_none());
        // Echo what arrived back to itself: one datagram per round.
        while let Ok((n, from)) = stack.udp_recv_from(a, &mut buf) {
            rounds += 1;
            let data = buf[..n].to_vec();
            stack.udp_send_to(now, a, from, &data).unwrap();
        }
        assert_eq!(stack.poll_timeout(), Some(now), "the echo is due at once");
    }
    assert_eq!(rounds, 10);
}

#[test]
fn a_driver_that_carries_the_loopback_gets_each_looped_packet_and_hands_it_back() {
    let mut stack = stack();
    stack.set_loopback_by_driver(true);
    let now = Instant::from_nanos(0);
    let me = SocketAddrV4::new(LOCALHOST, 5001);
    let conn = stack.tcp_connect(now, me, me).expect("connect");
    let mut buf = vec![0u8; 20_000];
    let mut carried = 0;
    for _ in 0..100 {
        // Nothing is taken in inside the poll: each looped packet comes out...
        let mut looped = Vec::new();
        while let Some(tx) = stack.poll_transmit(now, &mut buf) {
            assert_eq!(tx.iface, IfaceId::LOOPBACK, "nothing reaches a device");
            assert_eq!(buf[0] >> 4, 4, "a bare IPv4 packet, no link header");
            looped.push(buf[..tx.len].to_vec());
        }
        if looped.is_empty() {
            break;
        }
        carried += looped.len();
        // ... and goes in when the driver says so.
        for packet in looped {
            stack.handle_looped_packet(now, &packet);
        }
        if state(&stack, conn) == TcpState::Established {
            break;
        }
    }
    assert_eq!(state(&stack, conn), TcpState::Established);
    assert!(
        carried >= 2,
        "the SYN and the SYN-ACK went through the driver"
    );
    assert_eq!(stack.loopback_stats().tx_frames, carried as u64);
    assert_eq!(stack.loopback_stats().rx_frames, carried as u64);
    assert_eq!(
        stack.poll_timeout().filter(|&t| t <= now),
        None,
        "no loopback timer"
    );
}
