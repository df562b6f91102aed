//! UDP through the simulator: large datagrams cross a 1500-byte MTU link as IPv4
//! fragments and arrive byte-exact, or not at all.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

use std::net::{Ipv4Addr, SocketAddrV4};

use impnet_core::{Duration, Instant, StackConfig, UdpError};
use impnet_phy::LinkConfig;
use impnet_sim::{Flow, HostId, Sim};
use impnet_wire::ipv4::Cidr;

const A: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const B: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);

fn two_hosts(seed: u64, link: LinkConfig) -> (Sim, HostId, HostId) {
    let mut sim = Sim::new(seed);
    let a = sim.add_host("a", StackConfig::default());
    let b = sim.add_host("b", StackConfig::default());
    sim.connect(
        a,
        Cidr::new(A, 24).unwrap(),
        b,
        Cidr::new(B, 24).unwrap(),
        link,
    )
    .unwrap();
    (sim, a, b)
}

/// A datagram whose every byte depends on its index and position, so a misplaced or
/// corrupted fragment shows.
fn datagram(index: u32, len: usize) -> Vec<u8> {
    let mut x = index.wrapping_mul(0x9e37_79b9) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// Send `count` datagrams of `len` bytes from a to b, one every `gap`, and return what
/// b received, in order of arrival.
fn transfer(
    sim: &mut Sim,
    a: HostId,
    b: HostId,
    count: u32,
    len: usize,
    gap: Duration,
) -> Vec<Vec<u8>> {
    let tx = sim.host_mut(a).udp_bind(SocketAddrV4::new(A, 0)).unwrap();
    let rx = sim.host_mut(b).udp_bind(SocketAddrV4::new(B, 9)).unwrap();
    let mut sent = 0;
    let mut received = Vec::new();
    let mut buf = vec![0u8; 70_000];
    let seed = sim.seed();
    let end = Instant::ZERO + gap.saturating_mul(u64::from(count)) + Duration::from_secs(40);
    sim.run(50_000_000, end, |sim| {
        let now = sim.now();
        loop {
            match sim.host_mut(b).udp_recv_from(rx, &mut buf) {
                Ok((n, from)) => {
                    assert_eq!(
                        from.ip(),
                        std::net::IpAddr::V4(A),
                        "seed {seed}: datagram from the wrong host"
                    );
                    received.push(buf[..n].to_vec());
                }
                Err(UdpError::WouldBlock) => break,
                Err(e) => panic!("seed {seed}: receive failed: {e:?}"),
            }
        }
        if sent < count {
            let due = Instant::ZERO + gap.saturating_mul(u64::from(sent));
            if now >= due {
                sim.host_mut(a)
                    .udp_send_to(now, tx, SocketAddrV4::new(B, 9), &datagram(sent, len))
                    .unwrap();
                sent += 1;
            }
            return Flow::WakeAt(Instant::ZERO + gap.saturating_mul(u64::from(sent)));
        }
        if received.len() as u32 == count || now >= end - Duration::from_secs(1) {
            Flow::Done
        } else {
            Flow::WakeAt(end - Duration::from_secs(1))
        }
    })
    .unwrap_or_else(|e| panic!("{e}"));
    received
}

#[test]
fn a_60000_byte_datagram_crosses_a_1500_mtu_link_byte_exact() {
    let seed = 1;
    let link = LinkConfig {
        rate_bps: 100_000_000,
        delay: Duration::from_millis(5),
        ..LinkConfig::default()
    };
    let (mut sim, a, b) = two_hosts(seed, link);
    let got = transfer(&mut sim, a, b, 1, 60_000, Duration::from_millis(10));
    assert_eq!(got.len(), 1, "seed {seed}: the datagram did not arrive");
    assert!(
        got[0] == datagram(0, 60_000),
        "seed {seed}: the datagram arrived altered"
    );
    // It really was fragmented: 60 000 bytes need 41 fragments of at most 1480 bytes.
    let frames = sim.link_stats(impnet_sim::LinkId(0), 0).delivered;
    assert!(
        frames >= 41,
        "seed {seed}: only {frames} frames crossed the link"
    );
}

#[test]
fn under_loss_reordering_and_duplication_datagrams_arrive_whole_or_not_at_all() {
    for seed in [2, 3, 4] {
        let link = LinkConfig {
            rate_bps: 100_000_000,
            delay: Duration::from_millis(2),
            loss: 0.10,
            reorder: 0.2,
            reorder_delay: Duration::from_millis(3),
            duplicate: 0.05,
            ..LinkConfig::default()
        };
        let (mut sim, a, b) = two_hosts(seed, link);
        // Small datagrams first so ARP resolves in spite of loss, then big ones.
        let count = 60;
        let got = transfer(&mut sim, a, b, count, 6_000, Duration::from_millis(50));
        let expected: Vec<Vec<u8>> = (0..count).map(|i| datagram(i, 6_000)).collect();
        for d in &got {
            assert!(
                expected.contains(d),
                "seed {seed}: a corrupted or spliced datagram was delivered"
            );
        }
        // Five fragments each at 10% loss: about 59% should survive; demand some did
        // and some did not, so the test exercises both outcomes.
        assert!(
            got.len() > 10,
            "seed {seed}: only {} of {count} datagrams arrived",
            got.len()
        );
        assert!(
            (got.len() as u32) < count * 2,
            "seed {seed}: duplicates were delivered as new datagrams too often"
        );
    }
}

#[test]
fn same_seed_same_trace() {
    let run = |seed| {
        let link = LinkConfig {
            rate_bps: 10_000_000,
            delay: Duration::from_millis(3),
            loss: 0.05,
            reorder: 0.1,
            reorder_delay: Duration::from_millis(2),
            ..LinkConfig::default()
        };
        let (mut sim, a, b) = two_hosts(seed, link);
        let got = transfer(&mut sim, a, b, 20, 3_000, Duration::from_millis(20));
        (sim.trace_hash(), got.len())
    };
    assert_eq!(run(9), run(9));
    assert_ne!(
        run(9).0,
        run(10).0,
        "different seeds should give different traces"
    );
}
