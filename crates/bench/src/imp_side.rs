//! The workloads on imp: two `impnet_core::Stack`s in one thread, each frame handed from
//! one's `poll_transmit` straight into the other's `handle_frame` through one reused
//! buffer. No link model, no simulator: what is measured is the stack.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4};
use std::time::Instant as StdInstant;

use impnet_core::tcp::{TcpConfig, TcpError, TcpHandle};
use impnet_core::{Duration, IfaceConfig, IfaceId, Instant, Offloads, Stack, StackConfig};
use impnet_wire::ethernet;
use impnet_wire::ipv4::Cidr;
use impnet_wire::ipv6;

use super::workload::{self, Stream};
use super::{Sample, Stopwatch, live_bytes};

pub(crate) const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub(crate) const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// A's and B's IPv6 addresses (the `-v6` rows), in a /64 of the documentation prefix.
pub(crate) const A6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
pub(crate) const B6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
const PORT: u16 = 5001;

/// Two stacks joined back to back.
pub(crate) struct Pair {
    pub a: Stack,
    pub b: Stack,
    ia: IfaceId,
    ib: IfaceId,
    frame: Vec<u8>,
    epoch: StdInstant,
    /// The clock as read by the last `pump` (one read per pump, as for smoltcp: the
    /// calls between two pumps happen "at" the last poll, as in an event loop).
    clock: Instant,
    /// Frames moved so far.
    pub frames: u64,
    /// How `pump` reads the time.
    clock_source: Clock,
    /// The connections run over IPv6 (A6 -> B6) instead of IPv4.
    v6: bool,
}

/// Where the time of a pair of stacks comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// The wall clock, read once per `pump` (the timed workloads).
    Wall,
    /// A virtual clock that moves on by this many nanoseconds per `pump`, so a run does
    /// exactly the same work every time (`imp-bench --breakdown` counts instructions).
    Virtual(u64),
}

impl Pair {
    pub fn new(mtu: usize, offload: bool, tcp: TcpConfig) -> Pair {
        Pair::with_clock(mtu, offload, tcp, Clock::Wall)
    }

    /// [`Pair::new`] with the time taken from `clock`.
    pub fn with_clock(mtu: usize, offload: bool, tcp: TcpConfig, clock: Clock) -> Pair {
        Pair::with_family(mtu, offload, tcp, clock, false)
    }

    /// [`Pair::with_clock`], the connections over IPv6 when `v6` (both stacks also
    /// have an IPv6 address, usable at once: duplicate address detection is off).
    pub fn with_family(mtu: usize, offload: bool, tcp: TcpConfig, clock: Clock, v6: bool) -> Pair {
        let offloads = if offload {
            Offloads::CHECKSUM
        } else {
            Offloads::NONE
        };
        let stack = |seed, mac: u8, addr, addr6| {
            let mut config = StackConfig {
                tcp: tcp.clone(),
                ..StackConfig::default()
            };
            config.ipv6.dad_transmits = 0;
            config.ipv6.router_solicitations = 0;
            let mut stack = Stack::new(config, impnet_sim::secret_for_seed(seed));
            let mac = ethernet::Address([2, 0, 0, 0, 0, mac]);
            let iface = stack.add_interface(IfaceConfig::new(mac, mtu).with_offloads(offloads));
            stack.add_address(
                Instant::ZERO,
                iface,
                Cidr::new(addr, 24).expect("valid prefix"),
            );
            if v6 {
                let cidr = ipv6::Cidr::new(addr6, 64).expect("valid prefix");
                stack.add_address6(Instant::ZERO, iface, cidr);
            }
            (stack, iface)
        };
        // Room for a segment larger than the MTU, which IP then fragments.
        let frame_len = tcp
            .segment_size
            .map_or(mtu, |size| mtu.max(usize::from(size) + 80));
        let (a, ia) = stack(1, 1, A, A6);
        let (b, ib) = stack(2, 2, B, B6);
        let mut pair = Pair {
            a,
            b,
            ia,
            ib,
            frame: vec![0; frame_len + ethernet::HEADER_LEN],
            epoch: StdInstant::now(),
            clock: Instant::ZERO,
            frames: 0,
            clock_source: clock,
            v6,
        };
        // The gratuitous ARPs go first, so both neighbour caches are warm.
        pair.pump();
        pair
    }

    /// The stacks' time: the clock as the last `pump` read it.
    pub fn now(&self) -> Instant {
        self.clock
    }

    /// Move frames both ways until both stacks are quiet; fire due timers; drop events
    /// (the loops poll the sockets themselves).
    pub fn pump(&mut self) {
        let now = match self.clock_source {
            Clock::Wall => Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64),
            Clock::Virtual(step) => Instant::from_nanos(self.clock.as_nanos() + step),
        };
        self.clock = now;
        for stack in [&mut self.a, &mut self.b] {
            if stack.poll_timeout().is_some_and(|t| t <= now) {
                stack.handle_timeout(now);
            }
        }
        loop {
            let mut moved = 0;
            while let Some(tx) = self.a.poll_transmit(now, &mut self.frame) {
                self.b.handle_frame(now, self.ib, &self.frame[..tx.len]);
                moved += 1;
            }
            while let Some(tx) = self.b.poll_transmit(now, &mut self.frame) {
                self.a.handle_frame(now, self.ia, &self.frame[..tx.len]);
                moved += 1;
            }
            self.frames += moved;
            if moved == 0 {
                break;
            }
        }
        while self.a.poll_event().is_some() {}
        while self.b.poll_event().is_some() {}
    }

    /// A's address in the pair's family.
    pub fn addr_a(&self) -> IpAddr {
        if self.v6 { A6.into() } else { A.into() }
    }

    /// B's address in the pair's family.
    pub fn addr_b(&self) -> IpAddr {
        if self.v6 { B6.into() } else { B.into() }
    }

    /// Listen on B's `port` (in the pair's family).
    pub fn listen(&mut self, port: u16, backlog: usize) -> TcpHandle {
        let local = SocketAddr::new(self.addr_b(), port);
        self.b.tcp_listen(local, backlog).expect("listen")
    }

    /// Open a connection from A to B's `port` (B listening on `listener`) and accept it.
    pub fn open(&mut self, listener: TcpHandle, port: u16) -> (TcpHandle, TcpHandle) {
        let now = self.now();
        let (local, remote) = (
            SocketAddr::new(self.addr_a(), 0),
            SocketAddr::new(self.addr_b(), port),
        );
        let client = self.a.tcp_connect(now, local, remote).expect("connect");
        for _ in 0..1000 {
            self.pump();
            if let Ok(server) = self.b.tcp_accept(listener) {
                return (client, server);
            }
        }
        panic!("imp: connection to port {port} never established");
    }
}

/// W1 on imp: one connection A -> B and its stream; over IPv6 when `V6`.
pub struct Bulk<const V6: bool = false> {
    pair: Pair,
    client: TcpHandle,
    server: TcpHandle,
    stream: Stream,
}

impl<const V6: bool> Bulk<V6> {
    /// [`workload::Bulk::open`] on a pair whose time comes from `clock`.
    pub fn open_with(mtu: usize, offload: bool, clock: Clock) -> Bulk<V6> {
        let mut pair = Pair::with_family(mtu, offload, bulk_config(), clock, V6);
        let listener = pair.listen(PORT, 8);
        let (client, server) = pair.open(listener, PORT);
        Bulk {
            pair,
            client,
            server,
            stream: Stream::new(),
        }
    }
}

impl<const V6: bool> workload::Bulk for Bulk<V6> {
    fn open(mtu: usize, offload: bool) -> Bulk<V6> {
        Bulk::open_with(mtu, offload, Clock::Wall)
    }

    fn step(&mut self, limit: u64) -> u64 {
        let now = self.pair.now();
        self.stream.write(limit, |piece| {
            match self.pair.a.tcp_send(now, self.client, piece) {
                Ok(n) => n,
                Err(TcpError::WouldBlock) => 0,
                Err(e) => panic!("imp send: {e}"),
            }
        });
        self.pair.pump();
        self.stream.read(
            |buffer| match self.pair.b.tcp_recv(now, self.server, buffer) {
                Ok(n) => n,
                Err(TcpError::WouldBlock) => 0,
                Err(e) => panic!("imp recv: {e}"),
            },
        )
    }
}

/// W1's settings: timestamps and SACK (unless `--bare`), 256 KiB buffers.
pub(crate) fn bulk_config() -> TcpConfig {
    TcpConfig {
        send_buffer: super::smol::BULK_BUFFER,
        recv_buffer: super::smol::BULK_BUFFER,
        ..options()
    }
}

/// The TCP options of every workload: all on (as Linux), or none with `--bare`.
fn options() -> TcpConfig {
    let all = !super::bare();
    TcpConfig {
        timestamps: all,
        sack: all,
        ..TcpConfig::default()
    }
}

/// Small-message settings: no Nagle (both sides), so a 1-byte write goes at once.
fn small_config() -> TcpConfig {
    TcpConfig {
        nodelay: true,
        ..options()
    }
}

/// One round trip on (client, server): 1 byte there, 1 byte back.
fn round_trip(pair: &mut Pair, client: TcpHandle, server: TcpHandle) {
    let now = pair.now();
    let mut byte = [0u8; 1];
    pair.a.tcp_send(now, client, b"q").expect("send request");
    pair.pump();
    let n = pair
        .b
        .tcp_recv(now, server, &mut byte)
        .expect("read request");
    assert_eq!(n, 1);
    pair.b.tcp_send(now, server, b"r").expect("send response");
    pair.pump();
    let n = pair
        .a
        .tcp_recv(now, client, &mut byte)
        .expect("read response");
    assert_eq!(n, 1);
}

/// W2 on imp: one open connection; over IPv6 when `V6`.
pub struct PingPong<const V6: bool = false> {
    pair: Pair,
    client: TcpHandle,
    server: TcpHandle,
}

impl<const V6: bool> PingPong<V6> {
    /// [`workload::PingPong::open`] on a pair whose time comes from `clock`.
    pub fn open_with(clock: Clock) -> PingPong<V6> {
        let mut pair = Pair::with_family(1500, false, small_config(), clock, V6);
        let listener = pair.listen(PORT, 8);
        let (client, server) = pair.open(listener, PORT);
        PingPong {
            pair,
            client,
            server,
        }
    }
}

impl<const V6: bool> workload::PingPong for PingPong<V6> {
    fn open() -> PingPong<V6> {
        PingPong::open_with(Clock::Wall)
    }

    fn round_trip(&mut self) {
        round_trip(&mut self.pair, self.client, self.server);
    }
}

/// W3 on imp: B listening; TIME-WAIT stays with B's stack; over IPv6 when `V6`.
pub struct Churn<const V6: bool = false> {
    pair: Pair,
    listener: TcpHandle,
}

impl<const V6: bool> Churn<V6> {
    /// [`workload::Churn::open`] on a pair whose time comes from `clock`.
    pub fn open_with(clock: Clock) -> Churn<V6> {
        let mut pair = Pair::with_family(1500, false, small_config(), clock, V6);
        let listener = pair.listen(PORT, 64);
        Churn { pair, listener }
    }
}

impl<const V6: bool> workload::Churn for Churn<V6> {
    fn open() -> Churn<V6> {
        Churn::open_with(Clock::Wall)
    }

    fn connection(&mut self) {
        let Churn { pair, listener } = self;
        let mut byte = [0u8; 1];
        let (client, server) = pair.open(*listener, PORT);
        let now = pair.now();
        pair.a.tcp_send(now, client, b"x").expect("send");
        pair.pump();
        let n = pair
            .b
            .tcp_recv(now, server, &mut byte)
            .expect("server read");
        assert_eq!(n, 1);
        pair.b.tcp_close(now, server).expect("server close");
        pair.pump();
        match pair.a.tcp_recv(now, client, &mut byte) {
            Ok(0) => {}
            other => panic!("imp churn: client expected EOF, got {other:?}"),
        }
        pair.a.tcp_close(now, client).expect("client close");
        pair.pump();
    }
}

/// W4 on imp: `n` idle connections between the pair (B listening on enough ports for
/// one client address), and a round trip on one of them at a time, a stride through
/// the table ([`workload::scale_stride`]) so each lands on a different connection than
/// the last and `n` of them visit every connection.
///
/// Every data segment is acknowledged at once (delayed ACKs off, on both stacks), so a
/// round trip is the same four segments at every size. With the default policy how
/// long a connection sat idle would decide it instead: revisited every 100 round trips
/// (100 connections) its ACKs ride on the data, revisited after seconds (100k) it is in
/// quick-ACK mode (idle longer than the RTO) and acknowledges each segment apart, and
/// W4 would compare two ACK policies rather than two table sizes.
pub struct Scale {
    pair: Pair,
    conns: Vec<(TcpHandle, TcpHandle)>,
    stride: usize,
    at: usize,
}

impl Scale {
    /// Open `n` connections on a pair whose time comes from `clock`.
    pub fn open_with(n: usize, clock: Clock) -> Scale {
        let (mut scale, listeners) = Scale::listening(n, clock);
        scale.open_all(n, &listeners);
        scale
    }

    /// The pair, B listening on enough ports for `n` connections from one client
    /// address (16384 ephemeral ports per server port); no connection yet.
    fn listening(n: usize, clock: Clock) -> (Scale, Vec<(TcpHandle, u16)>) {
        // Up to millions of connections: beyond the default bound on connections.
        let tcp = TcpConfig {
            max_connections: n.max(16) * 2,
            delayed_ack: Duration::ZERO,
            ..small_config()
        };
        let mut pair = Pair::with_clock(1500, false, tcp, clock);
        let listeners = (0..n.div_ceil(16_000).max(1) as u16)
            .map(|i| {
                let port = PORT + i;
                let listener = pair.b.tcp_listen(SocketAddrV4::new(B, port), 1024);
                (listener.expect("listen"), port)
            })
            .collect();
        let scale = Scale {
            pair,
            conns: Vec::with_capacity(n),
            stride: super::workload::scale_stride(n),
            at: 0,
        };
        (scale, listeners)
    }

    /// Open `n` connections, spread over `listeners`.
    fn open_all(&mut self, n: usize, listeners: &[(TcpHandle, u16)]) {
        for i in 0..n {
            let (listener, port) = listeners[i % listeners.len()];
            self.conns.push(self.pair.open(listener, port));
        }
    }

    /// A round trip on every connection (at least ten in all), before measuring: a
    /// connection's first data allocates its rings and RACK's record, a cost once per
    /// connection that W4, which visits a connection once in n round trips, would
    /// otherwise count on every packet at 100k connections and on none at 100.
    pub fn warm(&mut self) {
        for _ in 0..self.conns.len().max(10) {
            self.round_trip();
        }
    }

    /// One round trip on the next connection of the stride.
    pub fn round_trip(&mut self) {
        let (c, s) = self.conns[self.at];
        round_trip(&mut self.pair, c, s);
        self.at = (self.at + self.stride) % self.conns.len();
    }
}

/// Heap bytes per idle connection end with `n` connections open (the heap growth
/// while opening them, halved per connection: both ends live in this process).
pub(crate) fn idle_bytes(n: usize, clock: Clock) -> (Scale, f64) {
    let (mut scale, listeners) = Scale::listening(n, clock);
    let base = live_bytes();
    scale.open_all(n, &listeners);
    // The handles' own vector was allocated before `base`, at its full size.
    let grown = live_bytes() - base;
    (scale, grown as f64 / (2 * n) as f64)
}

/// Heap bytes per connection end once each has carried a round trip and gone quiet:
/// `idle` (what [`idle_bytes`] gave for the same connections) and what warming them
/// ([`Scale::warm`]) left allocated.
pub(crate) fn used_bytes(scale: &mut Scale, idle: f64) -> f64 {
    let base = live_bytes();
    scale.warm();
    let grown = live_bytes() - base;
    idle + grown as f64 / (2 * scale.conns.len().max(1)) as f64
}

/// W4: for each n, n idle connections, then `rounds` round trips spread over all of
/// them (a stride through the table); ns per packet. Memory per idle connection
/// end ([`idle_bytes`]).
pub(crate) fn scale(counts: &[usize], rounds: u64) -> Vec<Sample> {
    let mut samples = Vec::new();
    for &n in counts {
        let (mut scale, bytes) = idle_bytes(n, Clock::Wall);
        let used = used_bytes(&mut scale, bytes);
        let watch = Stopwatch::start();
        for _ in 0..rounds {
            scale.round_trip();
        }
        let (wall, _) = watch.stop();
        // Per data packet (two per round trip), as for the kernel, whose ACKs also ride
        // on the data.
        let packets = 2 * rounds.max(1);
        let label = match n {
            n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("W4-{}M", n / 1_000_000),
            n if n >= 1000 && n % 1000 == 0 => format!("W4-{}k", n / 1000),
            n => format!("W4-{n}"),
        };
        samples.push(Sample::new(
            label.clone(),
            "ns/packet",
            wall * 1e9 / packets as f64,
        ));
        samples.push(Sample::new(
            format!("{label}-mem"),
            "bytes/idle conn",
            bytes,
        ));
        samples.push(Sample::new(
            format!("{label}-mem-used"),
            "bytes/used conn",
            used,
        ));
    }
    samples
}

#[cfg(test)]
mod tests {
    use super::{Clock, Scale};

    /// W4's round trip moves the same four segments (request, its ACK, reply, its ACK)
    /// whether a connection was last used a moment ago (4 connections, warm: past
    /// quick-ACK mode) or long ago (12,000: each revisited after 240 ms, longer than
    /// the RTO, which would put it back in quick-ACK mode).
    #[test]
    fn a_w4_round_trip_is_four_segments_at_every_size() {
        for (n, warm_laps) in [(4, 20), (12_000, 1)] {
            let mut scale = Scale::open_with(n, Clock::Virtual(10_000));
            for _ in 0..warm_laps * n {
                scale.round_trip();
            }
            let before = scale.pair.frames;
            for _ in 0..2 * n {
                scale.round_trip();
            }
            assert_eq!(scale.pair.frames - before, 4 * 2 * n as u64, "n = {n}");
        }
    }
}
