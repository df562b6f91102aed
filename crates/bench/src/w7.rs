//! W7 in process: three `impnet_core::Stack`s in one thread, host A — router R — host
//! B, each frame handed from one stack's `poll_transmit` to its link peer's
//! `handle_frame` (no link model, no simulator), R forwarding on both interfaces.
//!
//! - `W7-fwd-udp64`: the router alone. Frames A would send (64-byte UDP payloads to B,
//!   R's MAC as destination, valid checksums) are built once; what is timed is
//!   `R.handle_frame` + `R.poll_transmit` per frame ([`Router::forward_batch`]), in
//!   Mpps. `W7-fwd-udp64-e2e` is the whole path: A's `udp_send_to`, R, B's
//!   `udp_recv_from`.
//! - `W7-fwd-udp64-<n>`: the router alone with `n` extra routes in its table (the
//!   route lookup's cost as the table grows), timed for a bounded while.
//! - `W7-fwd-tcp`: one TCP connection A -> B through R, as W1a does for two stacks
//!   (MTU 1500, checksums computed); Gbit/s, CPU s/GiB, allocations/GiB.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration as StdDuration, Instant as StdInstant};

use impnet_core::tcp::{TcpConfig, TcpError, TcpHandle};
use impnet_core::{IfaceConfig, IfaceId, Instant, Stack, StackConfig};
use impnet_wire::ethernet;
use impnet_wire::ipv4::Cidr;

use super::workload::{self, Stream};
use super::{Sample, Stopwatch};

/// Host A's address (network 10.0.1.0/24; R is 10.0.1.1 there).
pub const A: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 2);
/// Host B's address (network 10.0.2.0/24; R is 10.0.2.1 there).
pub const B: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);
const R_A: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 1);
const R_B: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 1);
const PORT: u16 = 5001;
/// UDP payload bytes of the small-packet rows.
pub const PAYLOAD: usize = 64;
/// Frames built for the router-only loop (forwarded over and over).
const BATCH: usize = 256;
/// Routes R holds besides its two connected ones in the plain rows: ten in all.
pub const BASE_ROUTES: usize = 8;

fn mac(node: u8, iface: u8) -> ethernet::Address {
    ethernet::Address([0x02, 0, 0, 0x07, node, iface])
}

fn cidr(address: Ipv4Addr, prefix_len: u8) -> Cidr {
    Cidr::new(address, prefix_len).expect("valid prefix")
}

/// `count` distinct /24 routes in 11.0.0.0 onwards (none covers A's or B's network),
/// all through B.
fn extra_routes(stack: &mut Stack, out: IfaceId, count: usize) {
    for i in 0..count {
        let network = Ipv4Addr::from_bits((11 << 24) + ((i as u32) << 8));
        stack.routes_mut().add(cidr(network, 24), Some(B), out);
    }
}

/// A — R — B joined back to back, the neighbour caches warm.
pub struct Chain {
    /// Host A (one interface, default route through R).
    pub a: Stack,
    /// The router (forwarding on both interfaces).
    pub r: Stack,
    /// Host B (one interface, default route through R).
    pub b: Stack,
    a_if: IfaceId,
    r_a: IfaceId,
    r_b: IfaceId,
    b_if: IfaceId,
    frame: Vec<u8>,
    /// R's output, while `frame` holds the host frame R is taking in.
    r_frame: Vec<u8>,
    epoch: StdInstant,
    /// The clock as read by the last `pump` (as in `imp_side::Pair`).
    clock: Instant,
}

impl Chain {
    /// The three stacks on links of `mtu` bytes, R with `routes` routes besides its
    /// connected ones; one datagram A -> B has gone through, so every neighbour cache
    /// on the path is warm.
    pub fn new(mtu: usize, tcp: TcpConfig, routes: usize) -> Chain {
        let stack = |seed| {
            Stack::new(
                StackConfig {
                    tcp: tcp.clone(),
                    ..StackConfig::default()
                },
                impnet_sim::secret_for_seed(seed),
            )
        };
        let (mut a, mut r, mut b) = (stack(1), stack(2), stack(3));
        let iface = |stack: &mut Stack, mac, addr| {
            let mut config = IfaceConfig::new(mac, mtu);
            config.addrs.push(cidr(addr, 24));
            stack.add_interface(config)
        };
        let a_if = iface(&mut a, mac(1, 0), A);
        let r_a = iface(&mut r, mac(2, 0), R_A);
        let r_b = iface(&mut r, mac(2, 1), R_B);
        let b_if = iface(&mut b, mac(3, 0), B);
        a.routes_mut().add_default(R_A, a_if);
        b.routes_mut().add_default(R_B, b_if);
        r.set_forwarding(r_a, true);
        r.set_forwarding(r_b, true);
        extra_routes(&mut r, r_b, routes);
        let mut chain = Chain {
            a,
            r,
            b,
            a_if,
            r_a,
            r_b,
            b_if,
            frame: vec![0; mtu + ethernet::HEADER_LEN],
            r_frame: vec![0; mtu + ethernet::HEADER_LEN],
            epoch: StdInstant::now(),
            clock: Instant::ZERO,
        };
        chain.pump();
        let to = SocketAddrV4::new(B, PORT);
        let sink = chain.b.udp_bind(to).expect("bind on B");
        let from = chain
            .a
            .udp_bind(SocketAddrV4::new(A, 0))
            .expect("bind on A");
        let now = chain.now();
        chain
            .a
            .udp_send_to(now, from, to, b"warm")
            .expect("send on A");
        chain.pump();
        let mut buf = [0u8; 16];
        chain
            .b
            .udp_recv_from(sink, &mut buf)
            .expect("the warm-up datagram went through R");
        chain.a.udp_close(from).expect("close on A");
        chain.b.udp_close(sink).expect("close on B");
        chain
    }

    /// The stacks' time: the clock as the last `pump` read it.
    pub fn now(&self) -> Instant {
        self.clock
    }

    /// Move frames every way until all three stacks are quiet; fire due timers; drop
    /// events (the loops poll the sockets themselves).
    pub fn pump(&mut self) {
        let now = Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64);
        self.clock = now;
        for stack in [&mut self.a, &mut self.r, &mut self.b] {
            if stack.poll_timeout().is_some_and(|t| t <= now) {
                stack.handle_timeout(now);
            }
        }
        let Chain {
            a,
            r,
            b,
            a_if,
            r_a,
            r_b,
            b_if,
            frame,
            r_frame,
            ..
        } = self;
        let mut hosts = [(a, *a_if, *r_a), (b, *b_if, *r_b)];
        let peer = |iface: IfaceId| usize::from(iface != *r_a);
        loop {
            let mut moved = false;
            for host in 0..hosts.len() {
                while let Some(tx) = hosts[host].0.poll_transmit(now, frame) {
                    r.handle_frame(now, hosts[host].2, &frame[..tx.len]);
                    moved = true;
                    // R sends each frame on before the next comes in: its queue (and
                    // buffer pool) stays as small as when it polls after every frame.
                    while let Some(out) = r.poll_transmit(now, r_frame) {
                        let (stack, iface, _) = &mut hosts[peer(out.iface)];
                        stack.handle_frame(now, *iface, &r_frame[..out.len]);
                    }
                }
            }
            // What R sends of its own (ARP, ICMP).
            while let Some(out) = r.poll_transmit(now, r_frame) {
                let (stack, iface, _) = &mut hosts[peer(out.iface)];
                stack.handle_frame(now, *iface, &r_frame[..out.len]);
                moved = true;
            }
            if !moved {
                break;
            }
        }
        for stack in [&mut self.a, &mut self.r, &mut self.b] {
            while stack.poll_event().is_some() {}
        }
    }

    /// Open a connection from A to B's `port` (B listening on `listener`) and accept it.
    fn open(&mut self, listener: TcpHandle, port: u16) -> (TcpHandle, TcpHandle) {
        let now = self.now();
        let client = self
            .a
            .tcp_connect(now, SocketAddrV4::new(A, 0), SocketAddrV4::new(B, port))
            .expect("connect");
        for _ in 0..1000 {
            self.pump();
            if let Ok(server) = self.b.tcp_accept(listener) {
                return (client, server);
            }
        }
        panic!("imp: connection through the router never established");
    }
}

/// The router alone, with the frames A sends to B through it built once.
pub struct Router {
    r: Stack,
    ingress: IfaceId,
    egress: IfaceId,
    frames: Vec<Vec<u8>>,
    buf: Vec<u8>,
    now: Instant,
}

impl Router {
    /// A chain at MTU 1500 with `routes` routes besides R's connected ones; A's
    /// frames (64-byte UDP payloads to B, every checksum valid) captured as A sent them.
    pub fn new(routes: usize) -> Router {
        let mut chain = Chain::new(1500, TcpConfig::default(), routes);
        let from = chain
            .a
            .udp_bind(SocketAddrV4::new(A, 0))
            .expect("bind on A");
        let to = SocketAddrV4::new(B, PORT);
        let now = chain.now();
        let mut frames = Vec::with_capacity(BATCH);
        let mut payload = [0u8; PAYLOAD];
        for i in 0..BATCH {
            payload[0] = i as u8;
            chain
                .a
                .udp_send_to(now, from, to, &payload)
                .expect("send on A");
            let tx = chain
                .a
                .poll_transmit(now, &mut chain.frame)
                .expect("A sends at once (R's MAC is known)");
            frames.push(chain.frame[..tx.len].to_vec());
        }
        let Chain { r, r_a, r_b, .. } = chain;
        let mut router = Router {
            r,
            ingress: r_a,
            egress: r_b,
            frames,
            buf: vec![0; 1514],
            now,
        };
        let forwarded = router.forward_batch();
        assert_eq!(forwarded, BATCH as u64, "R forwards every frame to B");
        router
    }

    /// Frames in one batch.
    pub fn batch_len(&self) -> usize {
        self.frames.len()
    }

    /// Hand every prebuilt frame to R and take what it sends; returns the frames that
    /// left on B's side. Each frame goes in and out before the next (the queue stays
    /// at one frame, as a router polling its device would see it).
    #[inline(never)]
    pub fn forward_batch(&mut self) -> u64 {
        let Router {
            r,
            ingress,
            egress,
            frames,
            buf,
            now,
        } = self;
        let mut forwarded = 0;
        for frame in frames.iter() {
            r.handle_frame(*now, *ingress, frame);
            while let Some(tx) = r.poll_transmit(*now, buf) {
                forwarded += u64::from(tx.iface == *egress);
            }
        }
        forwarded
    }
}

/// The router-only rate: batches until `packets` frames went through (or `budget`
/// ran out, when given); Mpps.
fn router_rate(router: &mut Router, packets: u64, budget: Option<StdDuration>) -> f64 {
    router.forward_batch();
    let mut forwarded = 0;
    let watch = Stopwatch::start();
    while forwarded < packets {
        forwarded += router.forward_batch();
        if budget.is_some_and(|b| watch.wall_elapsed() >= b) {
            break;
        }
    }
    let (wall, _) = watch.stop();
    forwarded as f64 / wall / 1e6
}

/// `W7-fwd-udp64` (R alone, ten routes) and `W7-fwd-udp64-e2e` (A -> R -> B).
pub(crate) fn udp(packets: u64) -> Vec<Sample> {
    let mut router = Router::new(BASE_ROUTES);
    let alone = router_rate(&mut router, packets, None);
    drop(router);
    vec![
        Sample::new("W7-fwd-udp64", "Mpps", alone),
        Sample::new("W7-fwd-udp64-e2e", "Mpps", end_to_end(packets)),
    ]
}

/// `W7-fwd-udp64-<n>`: R alone with `routes` extra routes, for at most a second.
pub(crate) fn udp_routes(routes: usize, packets: u64) -> Vec<Sample> {
    let mut router = Router::new(routes);
    let rate = router_rate(&mut router, packets, Some(StdDuration::from_secs(1)));
    let label = match routes {
        n if n >= 1000 && n % 1000 == 0 => format!("W7-fwd-udp64-{}k", n / 1000),
        n => format!("W7-fwd-udp64-{n}"),
    };
    vec![Sample::new(label, "Mpps", rate)]
}

/// A -> R -> B: `packets` 64-byte datagrams sent by A's socket and read from B's, in
/// bursts of 32 (B's socket queues 64); Mpps of datagrams received.
fn end_to_end(packets: u64) -> f64 {
    const BURST: u64 = 32;
    let mut chain = Chain::new(1500, TcpConfig::default(), BASE_ROUTES);
    let to = SocketAddrV4::new(B, PORT);
    let sink = chain.b.udp_bind(to).expect("bind on B");
    let from = chain
        .a
        .udp_bind(SocketAddrV4::new(A, 0))
        .expect("bind on A");
    let payload = [0x5a; PAYLOAD];
    let mut buf = [0u8; 2048];
    let mut received = 0;
    let watch = Stopwatch::start();
    while received < packets {
        let now = chain.now();
        for _ in 0..BURST.min(packets - received) {
            if chain.a.udp_send_to(now, from, to, &payload).is_err() {
                break;
            }
        }
        chain.pump();
        while chain.b.udp_recv_from(sink, &mut buf).is_ok() {
            received += 1;
        }
    }
    let (wall, _) = watch.stop();
    received as f64 / wall / 1e6
}

/// W7's TCP row: one connection A -> B through R and its stream.
pub struct Bulk {
    chain: Chain,
    client: TcpHandle,
    server: TcpHandle,
    stream: Stream,
}

impl workload::Bulk for Bulk {
    fn open(mtu: usize, _offload: bool) -> Bulk {
        let mut chain = Chain::new(mtu, super::imp_side::bulk_config(), BASE_ROUTES);
        let listener = chain
            .b
            .tcp_listen(SocketAddrV4::new(B, PORT), 8)
            .expect("listen");
        let (client, server) = chain.open(listener, PORT);
        Bulk {
            chain,
            client,
            server,
            stream: Stream::new(),
        }
    }

    fn step(&mut self, limit: u64) -> u64 {
        let now = self.chain.now();
        self.stream.write(limit, |piece| {
            match self.chain.a.tcp_send(now, self.client, piece) {
                Ok(n) => n,
                Err(TcpError::WouldBlock) => 0,
                Err(e) => panic!("imp send: {e}"),
            }
        });
        self.chain.pump();
        self.stream.read(
            |buffer| match self.chain.b.tcp_recv(now, self.server, buffer) {
                Ok(n) => n,
                Err(TcpError::WouldBlock) => 0,
                Err(e) => panic!("imp recv: {e}"),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_router_forwards_every_prebuilt_frame() {
        let mut router = Router::new(BASE_ROUTES);
        assert_eq!(router.forward_batch(), router.batch_len() as u64);
        assert_eq!(router.r.stats().forward.forwarded, 2 * BATCH as u64 + 1);
        assert!(end_to_end(100) > 0.0);
    }
}
