//! Whole-stack tests over the two-stack [`Pair`] harness.

use alloc::vec;
use alloc::vec::Vec;
use core::net::{Ipv4Addr, SocketAddrV4};

use impnet_wire::ethernet;
use impnet_wire::ipv4::{self, Cidr, Protocol};

use crate::icmp::{IcmpError, IcmpRateLimit};
use crate::iface::IfaceConfig;
use crate::rng::Rng;
use crate::stack::{Event, Stack, StackConfig};
use crate::testutil::{IP_A, IP_B, IP_NOBODY, MAC_A, MAC_B, Pair, drain, ethertype, host};
use crate::time::{Duration, Instant};
use crate::udp::{EPHEMERAL_PORTS, UdpError};

const ETHERTYPE_ARP: u16 = 0x0806;
const ETHERTYPE_IPV4: u16 = 0x0800;

fn events(stack: &mut Stack) -> Vec<Event> {
    core::iter::from_fn(|| stack.poll_event()).collect()
}

fn bind(stack: &mut Stack, addr: Ipv4Addr, port: u16) -> crate::udp::UdpHandle {
    stack.udp_bind(SocketAddrV4::new(addr, port)).unwrap()
}

/// ARP target protocol address of an ARP frame.
fn arp_target(frame: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(frame[38], frame[39], frame[40], frame[41])
}

#[test]
fn arp_resolves_once_and_the_reply_is_cached() {
    let mut pair = Pair::new();
    let a_sock = bind(&mut pair.a, IP_A, 1000);
    let b_sock = bind(&mut pair.b, IP_B, 2000);
    let dst = SocketAddrV4::new(IP_B, 2000);
    pair.a.udp_send_to(pair.now, a_sock, dst, b"one").unwrap();

    let first = drain(&mut pair.a, pair.now);
    assert_eq!(
        first.len(),
        1,
        "only the ARP request goes out while resolving"
    );
    assert_eq!(ethertype(&first[0]), ETHERTYPE_ARP);
    assert_eq!(&first[0][..6], &[0xff; 6], "requests are broadcast");
    assert_eq!(arp_target(&first[0]), IP_B);
    pair.b.handle_frame(pair.now, pair.b_if, &first[0]);
    pair.exchange();

    let mut buf = [0u8; 16];
    assert_eq!(
        pair.b.udp_recv_from(b_sock, &mut buf),
        Ok((3, std::net::SocketAddr::from(SocketAddrV4::new(IP_A, 1000))))
    );
    assert_eq!(&buf[..3], b"one");

    pair.a.udp_send_to(pair.now, a_sock, dst, b"two").unwrap();
    let second = drain(&mut pair.a, pair.now);
    assert_eq!(second.len(), 1);
    assert_eq!(
        ethertype(&second[0]),
        ETHERTYPE_IPV4,
        "the reply was cached"
    );
    assert_eq!(&second[0][..6], &MAC_B.0);
    // B learned A from A's request (it was the target), so its answer needs no ARP.
    b_reply_without_arp(&mut pair, b_sock);
    assert_eq!(pair.a.stats().arp.tx_requests, 1);
    assert_eq!(pair.b.stats().arp.tx_requests, 0);
    assert_eq!(pair.b.stats().arp.tx_replies, 1);
}

fn b_reply_without_arp(pair: &mut Pair, b_sock: crate::udp::UdpHandle) {
    pair.b
        .udp_send_to(pair.now, b_sock, SocketAddrV4::new(IP_A, 1000), b"back")
        .unwrap();
    let frames = drain(&mut pair.b, pair.now);
    assert_eq!(frames.len(), 1);
    assert_eq!(ethertype(&frames[0]), ETHERTYPE_IPV4);
}

#[test]
fn packets_queued_while_resolving_are_sent_after_the_reply() {
    let mut pair = Pair::new();
    let a_sock = bind(&mut pair.a, IP_A, 1000);
    let b_sock = bind(&mut pair.b, IP_B, 2000);
    for i in 0..3u8 {
        pair.a
            .udp_send_to(pair.now, a_sock, SocketAddrV4::new(IP_B, 2000), &[i; 10])
            .unwrap();
    }
    pair.exchange();
    let mut buf = [0u8; 16];
    for i in 0..3u8 {
        let (len, _) = pair.b.udp_recv_from(b_sock, &mut buf).unwrap();
        assert_eq!(&buf[..len], &[i; 10], "in order");
    }
    assert_eq!(
        pair.b.udp_recv_from(b_sock, &mut buf),
        Err(UdpError::WouldBlock)
    );
    assert_eq!(pair.a.stats().arp.tx_requests, 1);
}

#[test]
fn arp_failure_after_retries_reports_host_unreachable_and_frees_the_queue() {
    let mut pair = Pair::new();
    let sock = bind(&mut pair.a, IP_A, 1000);
    for _ in 0..2 {
        pair.a
            .udp_send_to(pair.now, sock, SocketAddrV4::new(IP_NOBODY, 9), b"lost")
            .unwrap();
    }
    let mut requests = drain(&mut pair.a, pair.now).len();
    assert_eq!(pair.a.neighbors.queued_total(), 2);
    let retry = pair.a.config.arp.retry_interval;
    for _ in 0..2 {
        assert_eq!(pair.a.poll_timeout(), Some(pair.now + retry));
        pair.advance(retry);
        requests += drain(&mut pair.a, pair.now).len();
    }
    assert_eq!(requests, 3, "three requests, one second apart");
    assert!(events(&mut pair.a).is_empty());
    pair.advance(retry);
    assert!(drain(&mut pair.a, pair.now).is_empty());

    let seen = events(&mut pair.a);
    assert!(seen.contains(&Event::NeighbourFailed {
        iface: pair.a_if,
        addr: IP_NOBODY
    }));
    assert!(seen.contains(&Event::Udp(sock)));
    let mut buf = [0u8; 8];
    assert_eq!(
        pair.a.udp_recv_from(sock, &mut buf),
        Err(UdpError::HostUnreachable)
    );
    assert_eq!(
        pair.a.udp_recv_from(sock, &mut buf),
        Err(UdpError::WouldBlock),
        "reported once"
    );
    let stats = &pair.a.stats().arp;
    assert_eq!(
        (
            stats.resolution_failed,
            stats.dropped_unresolved,
            stats.tx_requests
        ),
        (1, 2, 3)
    );
    assert_eq!(pair.a.neighbors.queued_total(), 0);
    assert_eq!(pair.a.poll_timeout(), None);
}

#[test]
fn icmp_echo_to_nobody_reports_host_unreachable() {
    let mut pair = Pair::new();
    let ping = pair.a.icmp_bind(7).unwrap();
    pair.a
        .icmp_send_echo(pair.now, ping, IP_NOBODY, 1, b"hi")
        .unwrap();
    for _ in 0..3 {
        drain(&mut pair.a, pair.now);
        pair.advance(Duration::from_secs(1));
    }
    assert!(events(&mut pair.a).contains(&Event::Icmp(ping)));
    assert_eq!(
        pair.a.icmp_recv(ping, &mut [0; 8]),
        Err(IcmpError::HostUnreachable)
    );
}

#[test]
fn gratuitous_arp_on_add_address() {
    let (mut stack, iface) = host(1, MAC_A, IP_A, 1500);
    drain(&mut stack, Instant::from_nanos(0));
    let new = Ipv4Addr::new(192, 168, 7, 1);
    stack.add_address(
        Instant::from_nanos(0),
        iface,
        Cidr {
            address: new,
            prefix_len: 24,
        },
    );
    let frames = drain(&mut stack, Instant::from_nanos(0));
    assert_eq!(frames.len(), 1);
    let frame = &frames[0];
    assert_eq!(
        (ethertype(frame), &frame[..6]),
        (ETHERTYPE_ARP, &[0xff; 6][..])
    );
    let sender = Ipv4Addr::new(frame[28], frame[29], frame[30], frame[31]);
    assert_eq!(
        (sender, arp_target(frame)),
        (new, new),
        "announcement: sender = target"
    );
    assert_eq!(&frame[22..28], &MAC_A.0);
    assert_eq!(
        stack.stats().arp.tx_gratuitous,
        2,
        "one at interface setup, one now"
    );
    let route = stack
        .routes()
        .lookup(Ipv4Addr::new(192, 168, 7, 50))
        .unwrap();
    assert_eq!(
        (route.iface, route.gateway),
        (iface, None),
        "connected route added"
    );
}

#[test]
fn gratuitous_arp_updates_a_neighbours_cache() {
    let mut pair = Pair::new();
    pair.a.add_address(
        pair.now,
        pair.a_if,
        Cidr {
            address: IP_A,
            prefix_len: 24,
        },
    );
    // B has no entry for A yet: an announcement must not create one (RFC 826 merge).
    pair.exchange();
    assert_eq!(pair.b.neighbors.lookup(pair.now, pair.b_if, IP_A), None);
    let sock = bind(&mut pair.b, IP_B, 1);
    pair.b
        .udp_send_to(pair.now, sock, SocketAddrV4::new(IP_A, 2), b"x")
        .unwrap();
    pair.exchange();
    assert_eq!(
        pair.b.neighbors.lookup(pair.now, pair.b_if, IP_A),
        Some(MAC_A)
    );
    // A moves to a new MAC and announces it: B's entry follows.
    let new_mac = ethernet::Address([0x02, 0, 0, 0, 0, 0xaa]);
    pair.a.ifaces[0].mac = new_mac;
    pair.a.add_address(
        pair.now,
        pair.a_if,
        Cidr {
            address: IP_A,
            prefix_len: 24,
        },
    );
    pair.exchange();
    assert_eq!(
        pair.b.neighbors.lookup(pair.now, pair.b_if, IP_A),
        Some(new_mac)
    );
}

/// From `LOCAL_SET_MIN_IFACES` interfaces on, "is it ours?" is answered from a sorted
/// set of the addresses: it must say what asking each interface says as interfaces and
/// addresses come and go (one interface comes without an address).
#[test]
fn local_addresses_of_many_interfaces_follow_adds_and_removals() {
    let mut stack = Stack::new(StackConfig::default(), crate::testutil::secret(0));
    let addr = |i: u8| Ipv4Addr::new(10, 0, i, 1);
    let cidr = |i: u8| Cidr {
        address: addr(i),
        prefix_len: 24,
    };
    let mut ifaces = Vec::new();
    for i in 0..6u8 {
        let mut config = IfaceConfig::new(ethernet::Address([2, 0, 0, 0, 0, i]), 1500);
        if i != 4 {
            config.addrs.push(cidr(i));
        }
        ifaces.push(stack.add_interface(config));
        for j in 0..=i {
            assert_eq!(
                stack.is_local_addr(addr(j)),
                j != 4,
                "{i} interfaces, 10.0.{j}.1"
            );
        }
        assert!(!stack.is_local_addr(addr(i + 1)));
    }
    stack.add_address(Instant::ZERO, ifaces[4], cidr(4));
    assert!(stack.is_local_addr(addr(4)));
    stack.remove_address(ifaces[1], cidr(1));
    assert!(!stack.is_local_addr(addr(1)));
    assert!(stack.is_local_addr(addr(2)));
    assert!(stack.is_local_addr(Ipv4Addr::LOCALHOST));
}

#[test]
fn longest_prefix_route_and_default_route_pick_interface_and_gateway() {
    let mut stack = Stack::new(StackConfig::default(), crate::testutil::secret(0));
    let mut eth0 = IfaceConfig::new(MAC_A, 1500);
    eth0.addrs.push(Cidr {
        address: Ipv4Addr::new(10, 0, 0, 1),
        prefix_len: 24,
    });
    let mut eth1 = IfaceConfig::new(MAC_B, 1500);
    eth1.addrs.push(Cidr {
        address: Ipv4Addr::new(172, 16, 0, 1),
        prefix_len: 24,
    });
    let (if0, if1) = (stack.add_interface(eth0), stack.add_interface(eth1));
    let (gw0, gw1) = (Ipv4Addr::new(10, 0, 0, 254), Ipv4Addr::new(172, 16, 0, 254));
    stack.routes_mut().add_default(gw0, if0);
    let gw0b = Ipv4Addr::new(10, 0, 0, 253);
    stack.routes_mut().add(
        Cidr {
            address: Ipv4Addr::new(192, 168, 0, 0),
            prefix_len: 16,
        },
        Some(gw0b),
        if0,
    );
    stack.routes_mut().add(
        Cidr {
            address: Ipv4Addr::new(192, 168, 5, 0),
            prefix_len: 24,
        },
        Some(gw1),
        if1,
    );
    let now = Instant::from_nanos(0);
    drain(&mut stack, now);
    let sock = stack
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))
        .unwrap();
    let cases = [
        (Ipv4Addr::new(8, 8, 8, 8), if0, gw0),
        (Ipv4Addr::new(192, 168, 1, 1), if0, gw0b),
        (Ipv4Addr::new(192, 168, 5, 7), if1, gw1),
        (
            Ipv4Addr::new(172, 16, 0, 9),
            if1,
            Ipv4Addr::new(172, 16, 0, 9),
        ),
    ];
    let mut buf = vec![0u8; 1514];
    for (dst, iface, next_hop) in cases {
        stack
            .udp_send_to(now, sock, SocketAddrV4::new(dst, 9), b"x")
            .unwrap();
        let tx = stack.poll_transmit(now, &mut buf).unwrap();
        assert_eq!(tx.iface, iface, "to {dst}");
        assert_eq!(arp_target(&buf[..tx.len]), next_hop, "to {dst}");
        let sender = Ipv4Addr::new(buf[28], buf[29], buf[30], buf[31]);
        assert!(stack.ifaces[iface.index()].has_addr(sender));
    }
    stack.routes_mut().remove(Cidr {
        address: Ipv4Addr::UNSPECIFIED,
        prefix_len: 0,
    });
    let to_nowhere = stack.udp_send_to(
        now,
        sock,
        SocketAddrV4::new(Ipv4Addr::new(8, 8, 8, 8), 9),
        b"x",
    );
    assert_eq!(to_nowhere, Err(UdpError::NoRoute));
}

#[test]
fn udp_send_and_receive_both_ways() {
    let mut pair = Pair::new();
    let a_sock = bind(&mut pair.a, Ipv4Addr::UNSPECIFIED, 0);
    let b_sock = bind(&mut pair.b, Ipv4Addr::UNSPECIFIED, 53);
    let a_port = pair.a.udp_local_addr(a_sock).unwrap().port();
    assert!(EPHEMERAL_PORTS.contains(&a_port));
    pair.a
        .udp_send_to(pair.now, a_sock, SocketAddrV4::new(IP_B, 53), b"query")
        .unwrap();
    pair.exchange();
    assert_eq!(events(&mut pair.b), vec![Event::Udp(b_sock)]);
    let mut buf = [0u8; 64];
    let (len, from) = pair.b.udp_recv_from(b_sock, &mut buf).unwrap();
    assert_eq!(
        (&buf[..len], from),
        (
            &b"query"[..],
            std::net::SocketAddr::from(SocketAddrV4::new(IP_A, a_port))
        )
    );
    pair.b
        .udp_send_to(pair.now, b_sock, from, b"answer")
        .unwrap();
    pair.exchange();
    let (len, from) = pair.a.udp_recv_from(a_sock, &mut buf).unwrap();
    assert_eq!(
        (&buf[..len], from),
        (
            &b"answer"[..],
            std::net::SocketAddr::from(SocketAddrV4::new(IP_B, 53))
        )
    );
    assert_eq!(pair.b.stats().udp.rx_delivered, 1);
}

#[test]
fn udp_bind_conflicts_and_close() {
    let (mut stack, _) = host(1, MAC_A, IP_A, 1500);
    let wildcard = bind(&mut stack, Ipv4Addr::UNSPECIFIED, 80);
    assert_eq!(
        stack.udp_bind(SocketAddrV4::new(IP_A, 80)),
        Err(UdpError::AddrInUse)
    );
    assert_eq!(
        stack.udp_bind(SocketAddrV4::new(IP_B, 81)),
        Err(UdpError::AddrNotAvailable)
    );
    stack.udp_close(wildcard).unwrap();
    assert_eq!(stack.udp_close(wildcard), Err(UdpError::InvalidHandle));
    let specific = bind(&mut stack, IP_A, 80);
    assert_eq!(
        stack.udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80)),
        Err(UdpError::AddrInUse)
    );
    assert_eq!(
        stack.udp_recv_from(wildcard, &mut []),
        Err(UdpError::InvalidHandle)
    );
    assert_eq!(
        stack.udp_local_addr(specific),
        Ok(std::net::SocketAddr::from(SocketAddrV4::new(IP_A, 80)))
    );
}

#[test]
fn ephemeral_ports_are_distinct_in_range_and_seeded() {
    let ports = |seed| {
        let (mut stack, _) = host(seed, MAC_A, IP_A, 1500);
        (0..200)
            .map(|_| {
                let h = bind(&mut stack, Ipv4Addr::UNSPECIFIED, 0);
                stack.udp_local_addr(h).unwrap().port()
            })
            .collect::<Vec<_>>()
    };
    let first = ports(5);
    assert!(first.iter().all(|p| EPHEMERAL_PORTS.contains(p)));
    let mut sorted = first.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), first.len());
    assert_eq!(first, ports(5), "same seed, same ports");
    assert_ne!(first, ports(6));
}

#[test]
fn udp_receive_queue_is_bounded() {
    let mut pair = Pair::new();
    pair.b.config.udp_queue_limit = 4;
    let a_sock = bind(&mut pair.a, IP_A, 1);
    let b_sock = bind(&mut pair.b, IP_B, 2);
    for _ in 0..10 {
        pair.a
            .udp_send_to(pair.now, a_sock, SocketAddrV4::new(IP_B, 2), b"x")
            .unwrap();
        pair.exchange();
    }
    assert_eq!(pair.b.stats().udp.rx_queue_full, 6);
    let mut received = 0;
    while pair.b.udp_recv_from(b_sock, &mut [0; 4]).is_ok() {
        received += 1;
    }
    assert_eq!(received, 4);
}

#[test]
fn port_unreachable_is_sent_rate_limited_and_surfaces_to_the_sender() {
    let mut pair = Pair::new();
    pair.b = {
        let config = StackConfig {
            icmp_rate_limit: IcmpRateLimit {
                burst: 2,
                per_second: 1,
            },
            ..StackConfig::default()
        };
        let mut stack = Stack::new(config, crate::testutil::secret(2));
        let mut iface = IfaceConfig::new(MAC_B, 1500);
        iface.addrs.push(Cidr {
            address: IP_B,
            prefix_len: 24,
        });
        stack.add_interface(iface);
        drain(&mut stack, pair.now);
        stack
    };
    let sock = bind(&mut pair.a, IP_A, 1234);
    for _ in 0..5 {
        pair.a
            .udp_send_to(pair.now, sock, SocketAddrV4::new(IP_B, 9), b"anyone?")
            .unwrap();
    }
    pair.exchange();
    let b = pair.b.stats();
    assert_eq!(
        (
            b.udp.rx_no_port,
            b.icmp.tx_dst_unreachable,
            b.icmp.rate_limited
        ),
        (5, 2, 3)
    );
    assert_eq!(pair.a.stats().icmp.rx_dst_unreachable, 2);
    assert!(events(&mut pair.a).contains(&Event::Udp(sock)));
    assert_eq!(
        pair.a.udp_recv_from(sock, &mut [0; 8]),
        Err(UdpError::PortUnreachable)
    );
    assert_eq!(
        pair.a.udp_recv_from(sock, &mut [0; 8]),
        Err(UdpError::WouldBlock)
    );
    // One second refills one token.
    pair.advance(Duration::from_secs(1));
    pair.a
        .udp_send_to(pair.now, sock, SocketAddrV4::new(IP_B, 9), b"again")
        .unwrap();
    pair.exchange();
    assert_eq!(pair.b.stats().icmp.tx_dst_unreachable, 3);
}

#[test]
fn icmp_echo_request_gets_a_reply() {
    let mut pair = Pair::new();
    let ping = pair.a.icmp_bind(0x1234).unwrap();
    assert_eq!(pair.a.icmp_bind(0x1234), Err(IcmpError::IdentInUse));
    pair.a
        .icmp_send_echo(pair.now, ping, IP_B, 7, b"abcdefgh")
        .unwrap();
    pair.exchange();
    assert_eq!(events(&mut pair.a), vec![Event::Icmp(ping)]);
    let mut buf = [0u8; 32];
    let reply = pair.a.icmp_recv(ping, &mut buf).unwrap();
    assert_eq!(
        (reply.src, reply.seq_no, reply.len, reply.ttl),
        (IP_B.into(), 7, 8, 64)
    );
    assert_eq!(&buf[..8], b"abcdefgh");
    assert_eq!(pair.a.icmp_recv(ping, &mut buf), Err(IcmpError::WouldBlock));
    assert_eq!(pair.b.stats().icmp.tx_echo_replies, 1);
}

#[test]
fn large_ping_is_fragmented_and_reassembled_both_ways() {
    let mut pair = Pair::with_mtu(576);
    let ping = pair.a.icmp_bind(1).unwrap();
    let payload: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
    pair.a
        .icmp_send_echo(pair.now, ping, IP_B, 1, &payload)
        .unwrap();
    pair.exchange();
    let mut buf = vec![0u8; 6000];
    let reply = pair.a.icmp_recv(ping, &mut buf).unwrap();
    assert_eq!(&buf[..reply.len], &payload[..]);
    assert!(
        pair.b.stats().reassembly.reassembled == 1 && pair.a.stats().reassembly.reassembled == 1
    );
}

/// Resolve A <-> B, then have A send one `len`-byte UDP datagram to B port 7 and return
/// the frames (fragments) it produced, undelivered.
fn big_datagram_frames(
    pair: &mut Pair,
    len: usize,
) -> (Vec<u8>, Vec<Vec<u8>>, crate::udp::UdpHandle) {
    let a_sock = bind(&mut pair.a, IP_A, 7);
    let b_sock = bind(&mut pair.b, IP_B, 7);
    pair.a
        .udp_send_to(pair.now, a_sock, SocketAddrV4::new(IP_B, 7), b"warm up")
        .unwrap();
    pair.exchange();
    pair.b.udp_recv_from(b_sock, &mut [0; 16]).unwrap();
    let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 256) as u8).collect();
    pair.a
        .udp_send_to(pair.now, a_sock, SocketAddrV4::new(IP_B, 7), &data)
        .unwrap();
    (data, drain(&mut pair.a, pair.now), b_sock)
}

fn recv_exact(pair: &mut Pair, sock: crate::udp::UdpHandle, expected: &[u8]) {
    let mut buf = vec![0u8; 70_000];
    let (len, from) = pair.b.udp_recv_from(sock, &mut buf).unwrap();
    assert_eq!(from, std::net::SocketAddr::from(SocketAddrV4::new(IP_A, 7)));
    assert!(buf[..len] == *expected, "reassembled datagram differs");
}

#[test]
fn sixty_thousand_byte_datagram_is_fragmented_to_the_mtu_and_reassembled() {
    let mut pair = Pair::new();
    let (data, frames, sock) = big_datagram_frames(&mut pair, 60_000);
    assert_eq!(frames.len(), (60_008usize).div_ceil(1480));
    for frame in &frames {
        let packet = ipv4::Packet::new_checked(&frame[14..]).unwrap();
        assert!(usize::from(packet.total_len()) <= 1500);
        assert_eq!(packet.frag_offset() % 8, 0);
        pair.b.handle_frame(pair.now, pair.b_if, frame);
    }
    recv_exact(&mut pair, sock, &data);
    assert_eq!(pair.a.stats().ipv4.tx_fragments, frames.len() as u64);
    assert_eq!(pair.b.reassembly_bytes(), 0);
}

#[test]
fn fragments_in_reverse_and_shuffled_order() {
    for shuffle_seed in [None, Some(1), Some(2), Some(3)] {
        let mut pair = Pair::new();
        let (data, mut frames, sock) = big_datagram_frames(&mut pair, 20_000);
        match shuffle_seed {
            None => frames.reverse(),
            Some(seed) => {
                let mut rng = Rng::new(seed);
                for i in (1..frames.len()).rev() {
                    frames.swap(i, rng.in_range(0, i as u32) as usize);
                }
            }
        }
        for frame in &frames {
            pair.b.handle_frame(pair.now, pair.b_if, frame);
        }
        recv_exact(&mut pair, sock, &data);
    }
}

#[test]
fn duplicate_fragments_are_harmless() {
    let mut pair = Pair::new();
    let (data, frames, sock) = big_datagram_frames(&mut pair, 10_000);
    for frame in frames.iter().take(frames.len() - 1) {
        pair.b.handle_frame(pair.now, pair.b_if, frame);
        pair.b.handle_frame(pair.now, pair.b_if, frame);
    }
    pair.b
        .handle_frame(pair.now, pair.b_if, frames.last().unwrap());
    recv_exact(&mut pair, sock, &data);
    assert_eq!(
        pair.b.stats().reassembly.duplicates,
        frames.len() as u64 - 1
    );
    assert_eq!(
        pair.b.udp_recv_from(sock, &mut [0; 8]),
        Err(UdpError::WouldBlock),
        "delivered once"
    );
}

/// Change one payload byte of an IPv4 frame and fix its header checksum.
fn corrupt_payload(frame: &[u8], at: usize) -> Vec<u8> {
    let mut frame = frame.to_vec();
    frame[14 + 20 + at] ^= 0xff;
    frame
}

#[test]
fn conflicting_overlap_drops_the_whole_datagram() {
    let mut pair = Pair::new();
    let (_, frames, sock) = big_datagram_frames(&mut pair, 5_000);
    pair.b.handle_frame(pair.now, pair.b_if, &frames[1]);
    pair.b
        .handle_frame(pair.now, pair.b_if, &corrupt_payload(&frames[1], 100));
    assert_eq!(pair.b.stats().reassembly.overlap_conflict, 1);
    assert_eq!(pair.b.reassembly_bytes(), 0, "the datagram is gone");
    for frame in &frames {
        pair.b.handle_frame(pair.now, pair.b_if, frame);
    }
    // The remaining fragments start a fresh datagram, which does complete.
    assert!(pair.b.udp_recv_from(sock, &mut [0; 8]).is_ok());
}

#[test]
fn reassembly_timeout_frees_memory_and_sends_time_exceeded() {
    let mut pair = Pair::new();
    let (_, frames, sock) = big_datagram_frames(&mut pair, 5_000);
    for frame in &frames[..frames.len() - 1] {
        pair.b.handle_frame(pair.now, pair.b_if, frame);
    }
    assert!(pair.b.reassembly_bytes() > 4_000);
    let deadline = pair.b.poll_timeout().unwrap();
    assert_eq!(deadline, pair.now + Duration::from_secs(30));
    pair.advance(Duration::from_secs(30));
    assert_eq!(pair.b.reassembly_bytes(), 0);
    assert_eq!(pair.b.stats().reassembly.timeout, 1);
    pair.exchange();
    assert_eq!(pair.b.stats().icmp.tx_time_exceeded, 1);
    assert_eq!(
        pair.a.udp_recv_from(bind_lookup(&pair), &mut [0; 8]),
        Err(UdpError::TimeExceeded)
    );
    pair.b
        .handle_frame(pair.now, pair.b_if, frames.last().unwrap());
    assert_eq!(
        pair.b.udp_recv_from(sock, &mut [0; 8]),
        Err(UdpError::WouldBlock)
    );
}

/// The UDP socket A bound to port 7 in [`big_datagram_frames`].
fn bind_lookup(pair: &Pair) -> crate::udp::UdpHandle {
    pair.a
        .udp
        .lookup_for_tests(std::net::SocketAddr::from(SocketAddrV4::new(IP_A, 7)))
        .unwrap()
}

/// An Ethernet + IPv4 frame from A to B carrying `payload` as a fragment.
fn fragment_frame(ident: u16, offset: u16, more_frags: bool, payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![0u8; 14 + 20 + payload.len()];
    let eth = ethernet::Repr {
        src: MAC_A,
        dst: MAC_B,
        ethertype: ethernet::EtherType::Ipv4,
        vlan: None,
    };
    eth.emit(&mut ethernet::Frame::new_unchecked(&mut frame[..]));
    let repr = ipv4::Repr {
        src_addr: IP_A,
        dst_addr: IP_B,
        protocol: Protocol::Udp,
        payload_len: payload.len(),
        ttl: 64,
        ident,
        dont_frag: false,
        more_frags,
        frag_offset: offset,
        dscp: 0,
        ecn: 0,
        options: &[],
    };
    repr.emit(&mut ipv4::Packet::new_unchecked(&mut frame[14..]));
    frame[34..].copy_from_slice(payload);
    frame
}

#[test]
fn a_flood_of_unmatched_fragments_never_exceeds_the_memory_bound() {
    let mut pair = Pair::new();
    let limit = pair.b.config.reassembly.max_bytes;
    let mut rng = Rng::new(99);
    let payload = vec![0x5a; 1480];
    for i in 0..2_000u32 {
        let ident = rng.next_u16();
        let offset = (rng.in_range(0, 8000) * 8) as u16;
        let len = (rng.in_range(1, 185) * 8) as usize;
        let frame = fragment_frame(ident, offset, i % 7 != 0, &payload[..len]);
        pair.b.handle_frame(pair.now, pair.b_if, &frame);
        assert!(
            pair.b.reassembly_bytes() <= limit,
            "{} > {limit} after frame {i}",
            pair.b.reassembly_bytes()
        );
    }
    let stats = &pair.b.stats().reassembly;
    assert!(stats.memory > 0, "pressure must have dropped datagrams");
    pair.advance(Duration::from_secs(30));
    assert_eq!(pair.b.reassembly_bytes(), 0);
}

#[test]
fn dont_fragment_datagram_bigger_than_the_mtu_is_an_error() {
    let mut pair = Pair::new();
    let sock = bind(&mut pair.a, IP_A, 1);
    pair.a.udp_set_dont_fragment(sock, true).unwrap();
    let too_big = vec![0u8; 1473];
    let result = pair
        .a
        .udp_send_to(pair.now, sock, SocketAddrV4::new(IP_B, 2), &too_big);
    assert_eq!(result, Err(UdpError::FragmentationNeeded { mtu: 1500 }));
    assert_eq!(pair.a.stats().ipv4.tx_dont_fragment, 1);
    assert!(
        pair.a
            .udp_send_to(pair.now, sock, SocketAddrV4::new(IP_B, 2), &too_big[..1472])
            .is_ok()
    );
    let oversize = vec![0u8; 65_508];
    assert_eq!(
        pair.a
            .udp_send_to(pair.now, sock, SocketAddrV4::new(IP_B, 2), &oversize),
        Err(UdpError::MessageTooLong)
    );
}

/// A valid ICMP echo frame from A to B, captured from A's output.
fn valid_ipv4_frame() -> Vec<u8> {
    let mut pair = Pair::new();
    let ping = pair.a.icmp_bind(1).unwrap();
    pair.a
        .icmp_send_echo(pair.now, ping, IP_B, 1, b"12345678")
        .unwrap();
    pair.exchange_filtered(|from_a, frame| !(from_a && ethertype(frame) == ETHERTYPE_IPV4));
    pair.a
        .icmp_send_echo(pair.now, ping, IP_B, 2, b"12345678")
        .unwrap();
    drain(&mut pair.a, pair.now).pop().unwrap()
}

fn fix_header_checksum(frame: &mut [u8]) {
    let header_len = usize::from(frame[14] & 0x0f) * 4;
    let end = (14 + header_len).min(frame.len());
    if end >= 14 + 20 {
        ipv4::Packet::new_unchecked(&mut frame[14..end]).fill_checksum();
    }
}

#[test]
fn bad_ipv4_packets_are_counted_under_their_reason() {
    let valid = valid_ipv4_frame();
    type Mutation = fn(&mut Vec<u8>);
    let cases: [(&str, Mutation); 6] = [
        ("checksum", |f| f[24] ^= 1),
        ("version", |f| {
            f[14] = 0x65;
            fix_header_checksum(f);
        }),
        ("truncated header", |f| f.truncate(14 + 12)),
        ("truncated payload", |f| f.truncate(f.len() - 4)),
        ("ihl", |f| {
            f[14] = 0x44;
            f[24..26].fill(0);
        }),
        ("length", |f| {
            f[16..18].copy_from_slice(&10u16.to_be_bytes());
            fix_header_checksum(f);
        }),
    ];
    for (name, mutate) in cases {
        let (mut stack, iface) = host(2, MAC_B, IP_B, 1500);
        let mut frame = valid.clone();
        mutate(&mut frame);
        stack.handle_frame(Instant::from_nanos(0), iface, &frame);
        let s = &stack.stats().ipv4;
        let counters = [
            s.rx_bad_checksum,
            s.rx_bad_version,
            s.rx_truncated,
            s.rx_bad_ihl,
            s.rx_bad_length,
        ];
        let expected = match name {
            "checksum" => [1, 0, 0, 0, 0],
            "version" => [0, 1, 0, 0, 0],
            "truncated header" | "truncated payload" => [0, 0, 1, 0, 0],
            "ihl" => [0, 0, 0, 1, 0],
            _ => [0, 0, 0, 0, 1],
        };
        assert_eq!(counters, expected, "{name}");
        assert_eq!(s.rx_delivered, 0, "{name}");
    }
    let (mut stack, iface) = host(2, MAC_B, IP_B, 1500);
    stack.handle_frame(Instant::from_nanos(0), iface, &valid);
    assert_eq!(
        stack.stats().ipv4.rx_delivered,
        1,
        "the unmodified frame is fine"
    );
}

#[test]
fn frames_for_other_hosts_and_addresses_are_dropped() {
    let valid = valid_ipv4_frame();
    let (mut stack, iface) = host(2, MAC_B, IP_B, 1500);
    let mut other_mac = valid.clone();
    other_mac[..6].copy_from_slice(&[2, 0, 0, 0, 0, 0x77]);
    stack.handle_frame(Instant::from_nanos(0), iface, &other_mac);
    assert_eq!(stack.stats().link.rx_not_for_us, 1);
    let mut other_ip = valid;
    other_ip[14 + 19] = 77;
    fix_header_checksum(&mut other_ip);
    stack.handle_frame(Instant::from_nanos(0), iface, &other_ip);
    assert_eq!(stack.stats().ipv4.rx_not_for_us, 1);
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn handle_frame_never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..1600)) {
            let (mut stack, iface) = host(2, MAC_B, IP_B, 1500);
            stack.handle_frame(Instant::from_nanos(0), iface, &bytes);
            drain(&mut stack, Instant::from_nanos(0));
        }

        #[test]
        fn handle_frame_never_panics_on_random_ipv4_and_arp(
            is_arp in any::<bool>(),
            body in proptest::collection::vec(any::<u8>(), 0..1600),
            fix in any::<bool>(),
        ) {
            let (mut stack, iface) = host(2, MAC_B, IP_B, 1500);
            let mut frame = vec![0u8; 14];
            frame[..6].copy_from_slice(&MAC_B.0);
            frame[6..12].copy_from_slice(&MAC_A.0);
            frame[12..14].copy_from_slice(&(if is_arp { ETHERTYPE_ARP } else { ETHERTYPE_IPV4 }).to_be_bytes());
            frame.extend_from_slice(&body);
            if fix && !is_arp && frame.len() >= 34 {
                // Make it pass the first checks so the upper layers see the junk.
                frame[14] = 0x45;
                let total = (frame.len() - 14) as u16;
                frame[16..18].copy_from_slice(&total.to_be_bytes());
                frame[30..34].copy_from_slice(&IP_B.octets());
                fix_header_checksum(&mut frame);
            }
            let now = Instant::from_nanos(0);
            stack.handle_frame(now, iface, &frame);
            drain(&mut stack, now);
            stack.handle_timeout(now + Duration::from_secs(60));
            drain(&mut stack, now + Duration::from_secs(60));
        }

        #[test]
        fn handle_frame_never_panics_on_mutated_valid_frames(flips in proptest::collection::vec((0usize..64, any::<u8>()), 1..8)) {
            let mut frame = valid_ipv4_frame();
            for (at, value) in flips {
                let at = at % frame.len();
                frame[at] = value;
            }
            let (mut stack, iface) = host(2, MAC_B, IP_B, 1500);
            stack.handle_frame(Instant::from_nanos(0), iface, &frame);
            drain(&mut stack, Instant::from_nanos(0));
        }
    }
}

/// The IPv4 and Ethernet headers of A's TCP frames (every field checked against a
/// header built from scratch).
fn check_tcp_headers(frames: &[Vec<u8>], dst_mac: ethernet::Address) -> Vec<u16> {
    let mut idents = Vec::new();
    for frame in frames.iter().filter(|f| ethertype(f) == ETHERTYPE_IPV4) {
        let eth = ethernet::Frame::new_checked(&frame[..]).unwrap();
        assert_eq!((eth.src_addr(), eth.dst_addr()), (MAC_A, dst_mac));
        let packet = ipv4::Packet::new_checked(eth.payload()).unwrap();
        assert!(packet.verify_checksum(), "bad IPv4 header checksum");
        let repr = ipv4::Repr::parse(&packet, true).unwrap();
        assert_eq!((repr.src_addr, repr.dst_addr), (IP_A, IP_B));
        assert_eq!(repr.protocol, Protocol::Tcp);
        assert!(repr.dont_frag && repr.ttl == 64);
        assert_eq!(usize::from(packet.total_len()), frame.len() - 14);
        let mut expected = [0u8; 20];
        repr.emit(&mut ipv4::Packet::new_unchecked(&mut expected[..]));
        assert_eq!(
            &eth.payload()[..20],
            &expected[..],
            "header differs from emit"
        );
        idents.push(repr.ident);
    }
    idents
}

/// TCP frames start from a per-flow header template: length, identification and
/// checksum must be right in each, and a neighbour's new MAC must reach the template.
#[test]
fn tcp_frames_have_exact_headers_and_follow_a_new_mac() {
    let mut pair = Pair::new();
    let listener = pair.b.tcp_listen(SocketAddrV4::new(IP_B, 80), 4).unwrap();
    let client = pair
        .a
        .tcp_connect(
            pair.now,
            SocketAddrV4::new(IP_A, 0),
            SocketAddrV4::new(IP_B, 80),
        )
        .unwrap();
    pair.exchange();
    pair.b.tcp_accept(listener).unwrap();
    // No Nagle: each write goes at once, whatever is unacknowledged.
    pair.a.tcp_set_nodelay(client, true).unwrap();
    let mut from_a = Vec::new();
    let send = |pair: &mut Pair, data: &[u8], from_a: &mut Vec<Vec<u8>>| {
        pair.a.tcp_send(pair.now, client, data).unwrap();
        from_a.clear();
        pair.exchange_filtered(|a, f| {
            if a {
                from_a.push(f.to_vec());
            }
            true
        });
    };
    // Segments of several sizes (a length change must change the checksum).
    for size in [1, 100, 1460, 3000] {
        send(&mut pair, &vec![7u8; size], &mut from_a);
        let idents = check_tcp_headers(&from_a, MAC_B);
        assert!(!idents.is_empty());
        assert!(idents.windows(2).all(|w| w[1] == w[0].wrapping_add(1)));
    }
    // B moves to a new MAC and announces it: A's next segments go there.
    let new_mac = ethernet::Address([0x02, 0, 0, 0, 0, 0xbb]);
    pair.b.ifaces[0].mac = new_mac;
    pair.b.add_address(
        pair.now,
        pair.b_if,
        Cidr {
            address: IP_B,
            prefix_len: 24,
        },
    );
    pair.exchange();
    send(&mut pair, b"after", &mut from_a);
    assert!(!check_tcp_headers(&from_a, new_mac).is_empty());
}

/// The ECN field of an IPv4 frame and whether its TCP header has `flag` and a payload.
fn ecn_of(frame: &[u8], flag: impnet_wire::tcp::Flags) -> (u8, bool, bool) {
    let ip = ipv4::Packet::new_checked(&frame[14..]).unwrap();
    let tcp = impnet_wire::tcp::Packet::new_checked(ip.payload()).unwrap();
    let data = !tcp.payload().is_empty();
    (ip.ecn(), tcp.flags().contains(flag), data)
}

/// RFC 3168 through the whole stack: A's data frames leave with ECT(0) in the IPv4
/// header (and a right checksum), its SYN and pure ACKs without; a router's CE mark on
/// one of them reaches B's TCP, whose ACKs then carry ECE.
#[test]
fn tcp_data_goes_ect_and_a_ce_mark_comes_back_as_ece() {
    use impnet_wire::tcp::Flags;
    let mut pair = Pair::new();
    let listener = pair.b.tcp_listen(SocketAddrV4::new(IP_B, 80), 4).unwrap();
    let (local, remote) = (SocketAddrV4::new(IP_A, 0), SocketAddrV4::new(IP_B, 80));
    let client = pair.a.tcp_connect(pair.now, local, remote).unwrap();
    let mut from_a = Vec::new();
    pair.exchange_filtered(|a, f| {
        if a && ethertype(f) == ETHERTYPE_IPV4 {
            from_a.push(f.to_vec());
        }
        true
    });
    let server = pair.b.tcp_accept(listener).unwrap();
    assert!(pair.a.tcp_info(client).unwrap().ecn && pair.b.tcp_info(server).unwrap().ecn);
    // The SYN (ECE and CWR in TCP, Not-ECT in IP) and the handshake's ACK.
    assert_eq!(ecn_of(&from_a[0], Flags::CWR), (0, true, false));
    assert!(from_a[1..].iter().all(|f| ecn_of(f, Flags::ACK).0 == 0));
    pair.a.tcp_send(pair.now, client, &[5u8; 3000]).unwrap();
    let data = drain(&mut pair.a, pair.now);
    assert!(data.len() >= 2);
    check_tcp_headers(&data, MAC_B);
    for (i, mut frame) in data.into_iter().enumerate() {
        assert_eq!(ecn_of(&frame, Flags::ACK), (2, true, true));
        if i == 1 {
            assert!(crate::qdisc::mark_ce(&mut frame, 14));
        }
        pair.b.handle_frame(pair.now, pair.b_if, &frame);
    }
    let acks = drain(&mut pair.b, pair.now);
    assert!(!acks.is_empty());
    for ack in &acks {
        assert_eq!(ecn_of(ack, Flags::ECE), (0, true, false));
    }
    assert_eq!(pair.b.tcp_stats().ecn_ce_received, 1);
}

/// Every frame `stack` has to send right now, drained with `poll_transmit_gather` and
/// put together from the headers and the payload left in the send buffer (the buffer
/// is poisoned after each frame, so a payload wrongly left out shows); with the
/// number of frames that came in pieces.
fn drain_gathered(stack: &mut Stack, now: Instant) -> (Vec<Vec<u8>>, usize) {
    let (mut frames, mut pieces) = (Vec::new(), 0);
    let mut buf = vec![0u8; 9000 + 14];
    while let Some(tx) = stack.poll_transmit_gather(now, &mut buf) {
        let frame = match stack.gathered_payload() {
            Some((a, b)) => {
                pieces += 1;
                [&buf[..tx.len - a.len() - b.len()], a, b].concat()
            }
            None => buf[..tx.len].to_vec(),
        };
        frames.push(frame);
        buf.fill(0xee);
    }
    (frames, pieces)
}

/// A bulk transfer whose sender drains with `poll_transmit_gather` sends exactly the
/// frames of one that drains with `poll_transmit`, and the data arrives whole.
#[test]
fn gathered_frames_equal_whole_frames() {
    let start = |pair: &mut Pair| {
        // Checksums left to the "device" (gathering needs that); 9000-byte MTU so
        // segments are large enough to leave their payload behind.
        pair.a.ifaces[0].offloads = crate::iface::Offloads::CHECKSUM;
        pair.b.ifaces[0].offloads = crate::iface::Offloads::CHECKSUM;
        let listener = pair.b.tcp_listen(SocketAddrV4::new(IP_B, 80), 4).unwrap();
        let local = SocketAddrV4::new(IP_A, 0);
        let client = pair
            .a
            .tcp_connect(pair.now, local, SocketAddrV4::new(IP_B, 80));
        pair.exchange();
        (client.unwrap(), pair.b.tcp_accept(listener).unwrap())
    };
    let (mut plain, mut gathered) = (Pair::with_mtu(9000), Pair::with_mtu(9000));
    let (c1, s1) = start(&mut plain);
    let (c2, s2) = start(&mut gathered);
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let (mut sent, mut received, mut pieces) = (0, Vec::new(), 0);
    let mut buf = vec![0u8; 65536];
    for _ in 0..10_000 {
        if sent < data.len() {
            let n1 = plain.a.tcp_send(plain.now, c1, &data[sent..]).unwrap_or(0);
            let n2 = gathered.a.tcp_send(gathered.now, c2, &data[sent..]);
            assert_eq!(n2.unwrap_or(0), n1);
            sent += n1;
        }
        let whole = drain(&mut plain.a, plain.now);
        let (parts, n) = drain_gathered(&mut gathered.a, gathered.now);
        assert_eq!(whole, parts, "the frames differ");
        pieces += n;
        for (pair, frames) in [(&mut plain, &whole), (&mut gathered, &parts)] {
            for frame in frames {
                pair.b.handle_frame(pair.now, pair.b_if, frame);
            }
            for frame in drain(&mut pair.b, pair.now) {
                pair.a.handle_frame(pair.now, pair.a_if, &frame);
            }
        }
        let s = if received.len() < data.len() {
            s2
        } else {
            break;
        };
        while let Ok(n) = gathered.b.tcp_recv(gathered.now, s, &mut buf) {
            received.extend_from_slice(&buf[..n]);
            let _ = plain.b.tcp_recv(plain.now, s1, &mut buf);
        }
        plain.advance(Duration::from_millis(1));
        gathered.advance(Duration::from_millis(1));
    }
    assert!(received == data, "the data arrived damaged or incomplete");
    assert!(pieces > 10, "segments went in pieces: {pieces}");
}

/// Two-way UDP traffic between A and B every 10 s for `rounds` rounds; the ARP requests
/// both stacks sent meanwhile.
fn talk_for(pair: &mut Pair, rounds: u32) -> u64 {
    let requests = |p: &Pair| p.a.stats().arp.tx_requests + p.b.stats().arp.tx_requests;
    let before = requests(pair);
    let (sa, sb) = (bind(&mut pair.a, IP_A, 1), bind(&mut pair.b, IP_B, 2));
    for _ in 0..rounds {
        pair.advance(Duration::from_secs(10));
        pair.a
            .udp_send_to(pair.now, sa, SocketAddrV4::new(IP_B, 2), b"ping")
            .unwrap();
        pair.exchange();
        pair.b
            .udp_send_to(pair.now, sb, SocketAddrV4::new(IP_A, 1), b"pong")
            .unwrap();
        pair.exchange();
    }
    pair.a.udp_close(sa).unwrap();
    pair.b.udp_close(sb).unwrap();
    requests(pair) - before
}

#[test]
fn a_neighbour_in_use_keeps_its_mapping_past_the_entry_lifetime() {
    let mut pair = Pair::new();
    assert_eq!(talk_for(&mut pair, 1), 1, "A resolves B once");
    // 2 minutes, twice the 60 s lifetime: frames from the neighbour with the cached
    // Ethernet address confirm the mapping, so nobody resolves again (without this, each
    // side would hold its packets for a new resolution every minute).
    assert_eq!(talk_for(&mut pair, 12), 0, "no re-resolution while talking");
    // Frames from another Ethernet address confirm nothing: A's new address is learned
    // only when B's old entry runs out and B resolves A again.
    pair.a.ifaces[0].mac = ethernet::Address([0x02, 0, 0, 0, 0, 0xaa]);
    assert!(talk_for(&mut pair, 7) >= 1, "B resolves A's new address");
    assert_eq!(
        pair.b.neighbors.lookup(pair.now, pair.b_if, IP_A),
        Some(ethernet::Address([0x02, 0, 0, 0, 0, 0xaa]))
    );
}

#[test]
fn stack_events_beyond_the_limit_drop_the_oldest() {
    let mut pair = Pair::new();
    pair.b.config.event_limit = 8;
    let a_sock = bind(&mut pair.a, IP_A, 1000);
    let socks: Vec<_> = (0..20).map(|i| bind(&mut pair.b, IP_B, 2000 + i)).collect();
    for i in 0..20 {
        pair.a
            .udp_send_to(pair.now, a_sock, SocketAddrV4::new(IP_B, 2000 + i), b"x")
            .unwrap();
        pair.exchange();
    }
    let newest: Vec<Event> = socks[12..].iter().map(|&s| Event::Udp(s)).collect();
    assert_eq!(events(&mut pair.b), newest);
    // Events are hints: every datagram is still there.
    let mut buf = [0u8; 4];
    for &s in &socks {
        assert_eq!(pair.b.udp_recv_from(s, &mut buf).map(|r| r.0), Ok(1));
    }
}

#[test]
fn the_buffer_pool_keeps_at_most_its_limit() {
    let mut pair = Pair::new();
    pair.a.pool = crate::socket::BufferPool::new(3);
    let a_sock = bind(&mut pair.a, IP_A, 1000);
    bind(&mut pair.b, IP_B, 2000);
    let dst = SocketAddrV4::new(IP_B, 2000);
    pair.a
        .udp_send_to(pair.now, a_sock, dst, b"resolve")
        .unwrap();
    pair.exchange();
    // Ten datagrams wait in the transmit queue at once; sent, their buffers go back.
    for _ in 0..10 {
        pair.a
            .udp_send_to(pair.now, a_sock, dst, &[1; 1000])
            .unwrap();
    }
    pair.exchange();
    assert_eq!(pair.a.pool.len(), 3);
}
