//! IP-level interfaces ([`Medium::Ip`]): bare IP packets in and out, no Ethernet and
//! no ARP. TCP, ICMP, forwarding to and from an Ethernet interface, offloads with
//! gathered output, and garbage input.

use alloc::vec;
use alloc::vec::Vec;
use core::net::{Ipv4Addr, SocketAddrV4};

use impnet_wire::ipv4::{self, Protocol};

use crate::iface::{IfaceId, Medium, Offloads};
use crate::stack::Stack;
use crate::tcp::{TcpHandle, TcpState};
use crate::testutil::{IP_A, IP_B, Net, Pair, drain};
use crate::time::{Duration, Instant};

/// `frame` is one whole IPv4 packet with a right header checksum; its header.
fn bare_ipv4(frame: &[u8]) -> ipv4::Repr<'_> {
    let packet = ipv4::Packet::new_checked(frame).expect("a bare IPv4 packet");
    assert_eq!(usize::from(packet.total_len()), frame.len(), "length");
    assert!(packet.verify_checksum(), "IPv4 header checksum");
    ipv4::Repr::parse(&packet, true).expect("a valid IPv4 header")
}

/// Open a connection from A to B port 80 over the pair: (client, server).
fn connect(pair: &mut Pair) -> (TcpHandle, TcpHandle) {
    let listener = pair.b.tcp_listen(SocketAddrV4::new(IP_B, 80), 4).unwrap();
    let remote = SocketAddrV4::new(IP_B, 80);
    let client = pair
        .a
        .tcp_connect(pair.now, SocketAddrV4::new(IP_A, 0), remote)
        .unwrap();
    pair.exchange();
    (client, pair.b.tcp_accept(listener).unwrap())
}

/// Everything readable on `handle` appended to `into`; true at end of stream.
fn read_all(stack: &mut Stack, now: Instant, handle: TcpHandle, into: &mut Vec<u8>) -> bool {
    let mut buf = [0u8; 8192];
    loop {
        match stack.tcp_recv(now, handle, &mut buf) {
            Ok(0) => return true,
            Ok(n) => into.extend_from_slice(&buf[..n]),
            Err(_) => return false,
        }
    }
}

/// A handshake, 200 kB from A to B, and a close from both sides, over an
/// IP-level link: every frame is a bare IPv4 packet, no ARP is ever sent, the data
/// arrives byte-exact and the counters add up.
#[test]
fn tcp_handshake_data_and_close_over_an_ip_level_link() {
    let mut pair = Pair::ip_level(1500);
    let (client, server) = connect(&mut pair);
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 31 + i / 509) as u8).collect();
    let (mut sent, mut received, mut frames, mut frame_bytes) = (0, Vec::new(), 0u64, 0u64);
    let mut max_len = 0;
    for _ in 0..10_000 {
        if sent < data.len() {
            sent += pair
                .a
                .tcp_send(pair.now, client, &data[sent..])
                .unwrap_or(0);
            if sent == data.len() {
                pair.a.tcp_close(pair.now, client).unwrap();
            }
        }
        pair.exchange_filtered(|from_a, frame| {
            let repr = bare_ipv4(frame);
            assert_eq!(repr.protocol, Protocol::Tcp);
            let expected = if from_a { (IP_A, IP_B) } else { (IP_B, IP_A) };
            assert_eq!((repr.src_addr, repr.dst_addr), expected);
            if from_a {
                frames += 1;
                frame_bytes += frame.len() as u64;
                max_len = max_len.max(frame.len());
            }
            true
        });
        if read_all(&mut pair.b, pair.now, server, &mut received) {
            break;
        }
        pair.advance(Duration::from_millis(1));
    }
    assert!(received == data, "the data arrived damaged or incomplete");
    assert_eq!(max_len, 1500, "full-sized segments fill the MTU, no more");
    pair.b.tcp_close(pair.now, server).unwrap();
    pair.exchange();
    pair.advance(Duration::from_secs(300));
    pair.exchange();
    for (stack, handle) in [(&pair.a, client), (&pair.b, server)] {
        assert!(
            stack
                .tcp_info(handle)
                .is_none_or(|i| i.state == TcpState::Closed)
        );
        let arp = &stack.stats().arp;
        assert_eq!(
            (arp.tx_requests, arp.tx_gratuitous, arp.tx_replies),
            (0, 0, 0)
        );
    }
    let stats = pair.a.iface_stats(pair.a_if).unwrap();
    assert!(
        stats.tx_frames > frames,
        "the close and the ACKs come after the data"
    );
    assert!(stats.tx_bytes > frame_bytes);
    assert_eq!(pair.a.stats().link.tx_frames, stats.tx_frames);
    assert_eq!(
        pair.b.iface_stats(pair.b_if).unwrap().rx_frames,
        stats.tx_frames
    );
    assert_eq!(
        pair.b.iface_stats(pair.b_if).unwrap().rx_bytes,
        stats.tx_bytes
    );
}

/// Echo request and reply over an IP-level link, both bare IPv4 packets; counted.
#[test]
fn icmp_echo_over_an_ip_level_link() {
    let mut pair = Pair::ip_level(1500);
    let ping = pair.a.icmp_bind(0x4242).unwrap();
    pair.a
        .icmp_send_echo(pair.now, ping, IP_B, 3, b"over tun")
        .unwrap();
    let mut seen = Vec::new();
    pair.exchange_filtered(|from_a, frame| {
        let repr = bare_ipv4(frame);
        seen.push((from_a, repr.protocol, frame.len()));
        true
    });
    // 20 bytes of IPv4, 8 of ICMP, 8 of data: nothing in front.
    let expected = vec![(true, Protocol::Icmp, 36), (false, Protocol::Icmp, 36)];
    assert_eq!(seen, expected);
    let mut buf = [0u8; 16];
    let reply = pair.a.icmp_recv(ping, &mut buf).unwrap();
    assert_eq!((reply.src, reply.seq_no, reply.len), (IP_B.into(), 3, 8));
    assert_eq!(&buf[..8], b"over tun");
    assert_eq!(pair.b.stats().icmp.tx_echo_replies, 1);
    let b_if = pair.b.iface_stats(pair.b_if).unwrap();
    assert_eq!((b_if.rx_frames, b_if.rx_bytes, b_if.tx_bytes), (1, 36, 36));
}

/// The packets `net` delivered to `node`, as (Ethernet-framed, IPv4 bytes).
fn delivered(net: &Net, node: usize) -> Vec<(bool, Vec<u8>)> {
    net.seen
        .iter()
        .filter(|(to, _)| *to == node)
        .map(|(_, frame)| {
            let ethernet = frame.len() >= 14 && frame[12..14] == [0x08, 0x00];
            let ip = if ethernet { &frame[14..] } else { &frame[..] };
            (ethernet, ip.to_vec())
        })
        .collect()
}

/// A router with an Ethernet interface (to A) and an IP-level one (to B) forwards both
/// ways: a ping, and a UDP datagram it must fragment for B's smaller MTU. Frames on
/// the Ethernet side are Ethernet (after ARP), frames on the other bare IPv4.
#[test]
fn forwarding_between_ethernet_and_ip_level_interfaces() {
    let mut net = Net::chain_over([1500, 576], [Medium::Ethernet, Medium::Ip]);
    let b = Ipv4Addr::new(10, 0, 2, 2);
    let ping = net.nodes[0].icmp_bind(7).unwrap();
    net.nodes[0]
        .icmp_send_echo(net.now, ping, b, 1, b"through")
        .unwrap();
    let sink = net.nodes[2].udp_bind(SocketAddrV4::new(b, 9)).unwrap();
    let sock = net.nodes[0]
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))
        .unwrap();
    let datagram: Vec<u8> = (0..1200u32).map(|i| i as u8).collect();
    net.nodes[0]
        .udp_send_to(net.now, sock, SocketAddrV4::new(b, 9), &datagram)
        .unwrap();
    net.exchange();

    let mut buf = [0u8; 16];
    let reply = net.nodes[0].icmp_recv(ping, &mut buf).unwrap();
    assert_eq!((reply.src, reply.seq_no, reply.ttl), (b.into(), 1, 63));
    let mut big = [0u8; 2000];
    let (len, _) = net.nodes[2].udp_recv_from(sink, &mut big).unwrap();
    assert_eq!(&big[..len], &datagram[..]);

    let to_b = delivered(&net, 2);
    assert!(to_b.len() >= 4, "echo request and three fragments");
    for (ethernet, ip) in &to_b {
        assert!(!ethernet);
        assert!(ip.len() <= 576);
        assert_eq!(bare_ipv4(ip).ttl, 63);
    }
    let to_a = delivered(&net, 0);
    assert!(
        to_a.iter()
            .all(|(ethernet, ip)| !ethernet || bare_ipv4(ip).ttl == 63)
    );
    assert!(to_a.iter().any(|(ethernet, _)| *ethernet));
    // ARP ran on the Ethernet side only.
    assert!(net.nodes[0].stats().arp.tx_requests >= 1);
    let router = &net.nodes[1];
    assert_eq!(net.nodes[2].stats().arp.tx_gratuitous, 0);
    let stats = |i| router.iface_stats(IfaceId(i)).unwrap().forward.clone();
    assert_eq!(stats(0).forwarded, 2);
    assert_eq!((stats(0).fragmented, stats(1).forwarded), (1, 1));
}

/// Segments from a device with checksum offload and TSO, drained with
/// `poll_transmit_gather` (the payload left in the send buffer), are bare IPv4
/// packets once put together, larger than the MTU (the device cuts them), and carry
/// the data byte-exact.
#[test]
fn gathered_tso_segments_over_an_ip_level_link() {
    let mut pair = Pair::ip_level(1500);
    pair.a.ifaces[0].offloads = Offloads::CHECKSUM.with_tso(65535);
    pair.b.ifaces[0].offloads = Offloads::CHECKSUM;
    let (client, server) = connect(&mut pair);
    let data: Vec<u8> = (0..400_000u32).map(|i| (i * 13 + i / 301) as u8).collect();
    let (mut sent, mut received, mut pieces, mut largest) = (0, Vec::new(), 0, 0);
    let mut buf = vec![0u8; 65536 + 14];
    for _ in 0..10_000 {
        if sent < data.len() {
            sent += pair
                .a
                .tcp_send(pair.now, client, &data[sent..])
                .unwrap_or(0);
        }
        while let Some(tx) = pair.a.poll_transmit_gather(pair.now, &mut buf) {
            let packet = match pair.a.gathered_payload() {
                Some((x, y)) => {
                    pieces += 1;
                    [&buf[..tx.len - x.len() - y.len()], x, y].concat()
                }
                None => buf[..tx.len].to_vec(),
            };
            assert_eq!(bare_ipv4(&packet).protocol, Protocol::Tcp);
            largest = largest.max(packet.len());
            pair.b.handle_frame(pair.now, pair.b_if, &packet);
            buf.fill(0xee);
        }
        for frame in drain(&mut pair.b, pair.now) {
            bare_ipv4(&frame);
            pair.a.handle_frame(pair.now, pair.a_if, &frame);
        }
        read_all(&mut pair.b, pair.now, server, &mut received);
        if received.len() == data.len() {
            break;
        }
        pair.advance(Duration::from_millis(1));
    }
    assert!(received == data, "the data arrived damaged or incomplete");
    assert!(pieces >= 5, "segments went in pieces: {pieces}");
    assert!(largest > 1500, "TSO segments: largest {largest}");
}

/// Garbage on an IP-level interface: each kind counted under its reason, nothing
/// answered, nothing panics.
#[test]
fn garbage_on_an_ip_level_interface_is_counted() {
    let mut pair = Pair::ip_level(1500);
    let now = pair.now;
    let mut feed = |bytes: &[u8]| pair.b.handle_frame(now, pair.b_if, bytes);
    feed(&[]);
    // IPv6 cut short (on an interface without IPv6 enabled), version 0 (an Ethernet
    // frame: MAC 00:..), version 15.
    feed(&[0x60, 0, 0, 0, 0, 8, 17, 64]);
    feed(&[
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00,
    ]);
    feed(&[0xff; 40]);
    // IPv4: only the first bytes; a header length of 4 words; a bad checksum.
    feed(&[0x45, 0, 0, 60, 0, 0]);
    let mut packet = vec![0u8; 28];
    let repr = ipv4::Repr {
        src_addr: IP_A,
        dst_addr: IP_B,
        protocol: Protocol::Udp,
        payload_len: 8,
        ttl: 64,
        ident: 1,
        dont_frag: false,
        more_frags: false,
        frag_offset: 0,
        dscp: 0,
        ecn: 0,
        options: &[],
    };
    repr.emit(&mut ipv4::Packet::new_unchecked(&mut packet[..]));
    let mut short_ihl = packet.clone();
    short_ihl[0] = 0x44;
    feed(&short_ihl);
    packet[10] ^= 0x5a;
    feed(&packet);
    let stats = pair.b.stats();
    assert_eq!(stats.link.rx_frames, 7);
    assert_eq!(stats.link.rx_truncated, 1);
    assert_eq!(stats.link.rx_unknown_ethertype, 2);
    assert_eq!(stats.ipv6.rx_packets, 1);
    assert_eq!(stats.ipv6.rx_disabled, 1);
    assert_eq!(stats.ipv4.rx_packets, 3);
    assert_eq!(stats.ipv4.rx_truncated, 1);
    assert_eq!(stats.ipv4.rx_bad_ihl, 1);
    assert_eq!(stats.ipv4.rx_bad_checksum, 1);
    assert_eq!(stats.ipv4.rx_delivered, 0);
    assert!(
        drain(&mut pair.b, pair.now).is_empty(),
        "garbage draws no answer"
    );
}

mod prop {
    use proptest::prelude::*;

    use crate::testutil::{Pair, drain};

    proptest! {
        /// Random bytes, and random bytes behind a version-4 nibble, never panic an
        /// IP-level interface, and each is counted as received.
        #[test]
        fn ip_level_handle_frame_never_panics(
            packets in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..16),
            force_v4 in any::<bool>(),
        ) {
            let mut pair = Pair::ip_level(1500);
            for mut packet in packets.iter().cloned() {
                if force_v4 && !packet.is_empty() {
                    packet[0] = 0x40 | (packet[0] & 0x0f);
                }
                pair.b.handle_frame(pair.now, pair.b_if, &packet);
                for frame in drain(&mut pair.b, pair.now) {
                    prop_assert_eq!(frame[0] >> 4, 4, "only IPv4 goes out");
                }
            }
            prop_assert_eq!(pair.b.stats().link.rx_frames, packets.len() as u64);
        }
    }
}
