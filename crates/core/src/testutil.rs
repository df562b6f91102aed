//! Two stacks on one Ethernet segment, driven by hand: the test harness until the
//! simulator exists. Frames move only when a test says so, at the `now` it chooses.

use alloc::vec;
use alloc::vec::Vec;
use core::net::Ipv4Addr;

use impnet_wire::ethernet;
use impnet_wire::ipv4::Cidr;

use crate::iface::{IfaceConfig, IfaceId, Medium};
use crate::secret::Secret;
use crate::stack::{Stack, StackConfig};
use crate::time::{Duration, Instant};

pub(crate) const MAC_A: ethernet::Address = ethernet::Address([0x02, 0, 0, 0, 0, 0x0a]);
pub(crate) const MAC_B: ethernet::Address = ethernet::Address([0x02, 0, 0, 0, 0, 0x0b]);
pub(crate) const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub(crate) const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// An address on the link nobody owns.
pub(crate) const IP_NOBODY: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 99);

/// Bound on exchange rounds, so a ping-pong bug fails instead of hanging.
const MAX_ROUNDS: usize = 10_000;

/// The secret of a test stack, derived from `seed` (SplitMix64): reproducible, and
/// different for different seeds. Never for a real stack.
pub(crate) fn secret(seed: u64) -> Secret {
    let mut state = seed;
    let low = crate::rng::splitmix64(&mut state);
    let high = crate::rng::splitmix64(&mut state);
    let mut bytes = [0u8; Secret::LEN];
    bytes[..8].copy_from_slice(&low.to_le_bytes());
    bytes[8..].copy_from_slice(&high.to_le_bytes());
    Secret::from_bytes(bytes)
}

/// Two stacks, A and B, each with one interface on a shared /24.
pub(crate) struct Pair {
    pub(crate) a: Stack,
    pub(crate) b: Stack,
    pub(crate) a_if: IfaceId,
    pub(crate) b_if: IfaceId,
    pub(crate) now: Instant,
}

/// A stack with one interface holding `addr`/24.
pub(crate) fn host(
    seed: u64,
    mac: ethernet::Address,
    addr: Ipv4Addr,
    mtu: usize,
) -> (Stack, IfaceId) {
    host_on(seed, IfaceConfig::new(mac, mtu), addr)
}

/// A stack with one interface, set up as `config` says, holding `addr`/24.
pub(crate) fn host_on(seed: u64, mut config: IfaceConfig, addr: Ipv4Addr) -> (Stack, IfaceId) {
    let mut stack = Stack::new(StackConfig::default(), crate::testutil::secret(seed));
    config.addrs.push(Cidr {
        address: addr,
        prefix_len: 24,
    });
    let iface = stack.add_interface(config);
    (stack, iface)
}

/// Every frame `stack` has to send right now.
pub(crate) fn drain(stack: &mut Stack, now: Instant) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    let mut buf = vec![0u8; 9000 + 14];
    while let Some(tx) = stack.poll_transmit(now, &mut buf) {
        frames.push(buf[..tx.len].to_vec());
    }
    frames
}

/// The EtherType of a frame.
pub(crate) fn ethertype(frame: &[u8]) -> u16 {
    u16::from_be_bytes([frame[12], frame[13]])
}

impl Pair {
    /// A and B with MTU 1500, their announcements already exchanged away.
    pub(crate) fn new() -> Pair {
        Pair::with_mtu(1500)
    }

    /// A and B with the given MTU; the gratuitous ARPs of setup are discarded.
    pub(crate) fn with_mtu(mtu: usize) -> Pair {
        let (mut a, a_if) = host(1, MAC_A, IP_A, mtu);
        let (mut b, b_if) = host(2, MAC_B, IP_B, mtu);
        let now = Instant::from_nanos(0);
        drain(&mut a, now);
        drain(&mut b, now);
        Pair {
            a,
            b,
            a_if,
            b_if,
            now,
        }
    }

    /// A and B on an IP-level link ([`Medium::Ip`](crate::Medium): bare IP packets,
    /// no ARP) with the given MTU.
    pub(crate) fn ip_level(mtu: usize) -> Pair {
        let (a, a_if) = host_on(1, IfaceConfig::ip(mtu), IP_A);
        let (b, b_if) = host_on(2, IfaceConfig::ip(mtu), IP_B);
        Pair {
            a,
            b,
            a_if,
            b_if,
            now: Instant::from_nanos(0),
        }
    }

    /// Move frames both ways until neither side has anything to send; `keep(from_a,
    /// frame)` decides which frames reach the other side. Returns the frames moved.
    pub(crate) fn exchange_filtered(&mut self, mut keep: impl FnMut(bool, &[u8]) -> bool) -> usize {
        let mut moved = 0;
        for _ in 0..MAX_ROUNDS {
            let from_a = drain(&mut self.a, self.now);
            let from_b = drain(&mut self.b, self.now);
            if from_a.is_empty() && from_b.is_empty() {
                return moved;
            }
            for frame in from_a.iter().filter(|f| keep(true, f)) {
                self.b.handle_frame(self.now, self.b_if, frame);
                moved += 1;
            }
            for frame in from_b.iter().filter(|f| keep(false, f)) {
                self.a.handle_frame(self.now, self.a_if, frame);
                moved += 1;
            }
        }
        panic!("stacks still talking after {MAX_ROUNDS} rounds");
    }

    /// Move every frame both ways until quiet.
    pub(crate) fn exchange(&mut self) -> usize {
        self.exchange_filtered(|_, _| true)
    }

    /// Advance time by `by`, firing both stacks' timers.
    pub(crate) fn advance(&mut self, by: Duration) {
        self.now += by;
        self.a.handle_timeout(self.now);
        self.b.handle_timeout(self.now);
    }
}

/// Stacks joined by point-to-point Ethernet links, driven by hand: the harness for
/// tests that need more than two stacks (routers).
pub(crate) struct Net {
    pub(crate) nodes: Vec<Stack>,
    /// Each link joins (node, interface) to (node, interface).
    links: Vec<[(usize, IfaceId); 2]>,
    pub(crate) now: Instant,
    /// Every frame delivered: (receiving node, frame).
    pub(crate) seen: Vec<(usize, Vec<u8>)>,
}

/// A MAC for node `node`'s interface `iface`.
pub(crate) fn mac(node: usize, iface: usize) -> ethernet::Address {
    ethernet::Address([0x02, 0, 0, 0, node as u8, iface as u8])
}

impl Net {
    /// Host A (node 0, 10.0.1.2/24) — router R (node 1, 10.0.1.1 and 10.0.2.1) — host
    /// B (node 2, 10.0.2.2/24); the hosts route everything through R, which forwards on
    /// both interfaces. `mtus`: the IP MTU of the A–R and R–B links.
    pub(crate) fn chain(mtus: [usize; 2]) -> Net {
        Net::chain_over(mtus, [Medium::Ethernet; 2])
    }

    /// As [`Net::chain`], with the A–R and R–B links of the given media (an
    /// [`Medium::Ip`] link carries bare IP packets: no Ethernet, no ARP).
    pub(crate) fn chain_over(mtus: [usize; 2], media: [Medium; 2]) -> Net {
        let mut nodes = Vec::new();
        let mut links = Vec::new();
        let cidr = |a, b, c, d| Cidr {
            address: Ipv4Addr::new(a, b, c, d),
            prefix_len: 24,
        };
        let mut a = Stack::new(StackConfig::default(), secret(1));
        let mut config = IfaceConfig::new(mac(0, 0), mtus[0]).with_medium(media[0]);
        config.addrs.push(cidr(10, 0, 1, 2));
        let a_if = a.add_interface(config);
        a.routes_mut().add_default(Ipv4Addr::new(10, 0, 1, 1), a_if);
        let mut r = Stack::new(StackConfig::default(), secret(2));
        let mut config = IfaceConfig::new(mac(1, 0), mtus[0]).with_medium(media[0]);
        config.addrs.push(cidr(10, 0, 1, 1));
        let r0 = r.add_interface(config);
        let mut config = IfaceConfig::new(mac(1, 1), mtus[1]).with_medium(media[1]);
        config.addrs.push(cidr(10, 0, 2, 1));
        let r1 = r.add_interface(config);
        r.set_forwarding(r0, true);
        r.set_forwarding(r1, true);
        let mut b = Stack::new(StackConfig::default(), secret(3));
        let mut config = IfaceConfig::new(mac(2, 0), mtus[1]).with_medium(media[1]);
        config.addrs.push(cidr(10, 0, 2, 2));
        let b_if = b.add_interface(config);
        b.routes_mut().add_default(Ipv4Addr::new(10, 0, 2, 1), b_if);
        nodes.extend([a, r, b]);
        links.push([(0, a_if), (1, r0)]);
        links.push([(1, r1), (2, b_if)]);
        let mut net = Net {
            nodes,
            links,
            now: Instant::from_nanos(0),
            seen: Vec::new(),
        };
        net.exchange();
        net.seen.clear();
        net
    }

    /// The other end of the link `node`'s `iface` is on.
    fn peer(&self, node: usize, iface: IfaceId) -> Option<(usize, IfaceId)> {
        self.links.iter().find_map(|[x, y]| {
            if *x == (node, iface) {
                Some(*y)
            } else if *y == (node, iface) {
                Some(*x)
            } else {
                None
            }
        })
    }

    /// Deliver `frame` to `node` on `iface` as if its link peer sent it.
    pub(crate) fn inject(&mut self, node: usize, iface: IfaceId, frame: &[u8]) {
        self.nodes[node].handle_frame(self.now, iface, frame);
    }

    /// Move frames until every stack is quiet; `keep(from, frame)` decides which
    /// frames are delivered.
    pub(crate) fn exchange_filtered(&mut self, mut keep: impl FnMut(usize, &[u8]) -> bool) {
        let mut buf = vec![0u8; 9000 + 14];
        for _ in 0..MAX_ROUNDS {
            let mut moved = Vec::new();
            for node in 0..self.nodes.len() {
                while let Some(tx) = self.nodes[node].poll_transmit(self.now, &mut buf) {
                    if let Some(to) = self.peer(node, tx.iface)
                        && keep(node, &buf[..tx.len])
                    {
                        moved.push((to, buf[..tx.len].to_vec()));
                    }
                }
            }
            if moved.is_empty() {
                return;
            }
            for ((node, iface), frame) in moved {
                self.nodes[node].handle_frame(self.now, iface, &frame);
                self.seen.push((node, frame));
            }
        }
        panic!("stacks still talking after {MAX_ROUNDS} rounds");
    }

    /// Move every frame until quiet.
    pub(crate) fn exchange(&mut self) {
        self.exchange_filtered(|_, _| true);
    }

    /// Advance time by `by`, firing every stack's timers.
    pub(crate) fn advance(&mut self, by: Duration) {
        self.now += by;
        for node in &mut self.nodes {
            node.handle_timeout(self.now);
        }
    }
}

/// The IPv4 socket address `addr` is (tests of IPv4 paths; anything else fails them).
pub(crate) fn v4(addr: core::net::SocketAddr) -> core::net::SocketAddrV4 {
    match addr {
        core::net::SocketAddr::V4(a) => a,
        core::net::SocketAddr::V6(a) => panic!("expected an IPv4 address, got {a}"),
    }
}
