//! Floods within bounds (issue 13): a fragment flood, an out-of-order segment flood, an
//! ACK flood, half-open connections and idle established connections, each aimed at a
//! server while a legitimate bulk transfer runs beside it.
//!
//! The counting allocator measures the simulation on the test's thread: the stacks, the
//! simulator's own tables and the test's state; the links' frames and queues are left
//! out (`alloc_count::uncounted`), being the wire's, not the hosts'. Each test checks
//! that
//! - the legitimate transfer completes byte for byte;
//! - the peak memory stays under a bound computed from the settings: what the
//!   transfer's settings allow it ([`legit_bound`]), what the flood's bound settings
//!   allow it (per test), and a fixed allowance ([`FIXED`]);
//! - once the flood is over and its timeouts have passed, memory is back where it was
//!   before the flood (within [`LEAK_SLACK`]): nothing leaked;
//! - the bound acted: its counter moved.
//!
//! The flood arrives on a link of its own (an attacker host at 10 Gb/s) so that it does
//! not take the transfer's link capacity: what is tested is memory, not bandwidth.
//! Each test has a CI size and an `#[ignore]`d one ten times larger:
//! `cargo test -p impnet-sim --release --test floods -- --ignored --nocapture`.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

use std::cell::RefCell;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::rc::Rc;

use impnet_core::tcp::buffer::RecvBuffer;
use impnet_core::tcp::{TcpConfig, TcpError, TcpHandle};
use impnet_core::{Duration, Instant, StackConfig};
use impnet_phy::LinkConfig;
use impnet_sim::alloc_count::{self, CountingAlloc};
use impnet_sim::bulk::{Pattern, StreamHash};
use impnet_sim::forge::{ip_frame, ip_repr, tcp_frame};
use impnet_sim::{FrameKind, HostId, LinkId, Sim};
use impnet_wire::ethernet;
use impnet_wire::ipv4::{self, Cidr, Protocol};
use impnet_wire::tcp::{self, Flags, Options, SackBlock};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const SERVER_ATTACK: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 1);
const ATTACKER: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 2);
const PORT: u16 = 80;
/// The backlog of the server's listener.
const BACKLOG: usize = 128;

/// The legitimate transfer's buffers (both hosts): a window of 64 KiB.
const LEGIT_BUFFER: usize = 64 * 1024;
/// The transfer starts this long before the flood (its window is open by then).
const WARMUP: Duration = Duration::from_millis(20);
/// The flood's frames come in batches, one every `TICK`; the CI flood lasts
/// `FLOOD_TICKS` ticks (50 ms), the ignored one ten times as long.
const TICK: Duration = Duration::from_micros(100);
const FLOOD_TICKS: u32 = 500;
/// Bytes the transfer moves per 50 ms of flood: it outlasts the flood.
const LEGIT_BYTES: u64 = 16 << 20;

/// The fixed allowance: what the simulation holds whatever the settings. Measured at
/// about 170 KiB before a flood, less the transfer's rings: three stacks with their
/// tables, interfaces and routes; the simulator with its 64 KiB frame buffer and event
/// heaps; the test's 64 KiB read and 8 KiB write buffers. The rest is room for tables
/// that grow by doubling (event queues, the simulator's heaps, the observer's state).
const FIXED: usize = 256 * 1024;
/// After the flood and its timeouts, memory may be this much above where it was before
/// the flood: queues that grew by doubling keep their capacity, each bounded by a
/// setting (the RST and SYN-ACK queues, `reset_queue` entries of under 64 bytes; the
/// event queues; the deadline heap and the accept queue, a backlog's worth of 16
/// bytes), and the TCP table keeps 16 slots (about 19 KiB) however empty it gets. A
/// leak of a byte per flood frame would show in the ten-times floods.
const LEAK_SLACK: usize = 64 * 1024;

/// What one connection without ring storage costs at most: the connection inline in
/// its table slot (about 1.1 KiB, twice over as the slot vector grows by doubling), its
/// 4-tuple map and deadline entries, the accept queue entry, and what it allocates on
/// first use (the SACK scoreboard and out-of-order range lists, the sent log).
const CONN_COST: usize = 4096;

/// The legitimate transfer's link: 1 Gb/s, 250 us each way, a queue of 128 KiB.
const LEGIT_RATE: u64 = 1_000_000_000;
const LEGIT_DELAY: Duration = Duration::from_micros(250);
const LEGIT_QUEUE: usize = 128 * 1024;

/// Memory the legitimate transfer may hold, from its settings: it goes one way, so the
/// sender's send ring and the receiver's receive ring may grow to their full sizes; the
/// other two carry nothing (a FIN takes no storage) but may start at their least, 512
/// bytes each.
fn legit_bound(tcp: &TcpConfig) -> usize {
    tcp.send_buffer + tcp.recv_buffer + 2 * 512
}

/// A small xorshift generator for the flood's choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A spoofed source in 198.18.0.0/15 (benchmarking space, off every link here: the
/// server's answers go to its default gateway, the attacker host, which drops them).
fn spoofed(rng: &mut Rng) -> Ipv4Addr {
    let r = rng.next();
    Ipv4Addr::new(198, 18 + (r & 1) as u8, (r >> 8) as u8, (r >> 16) as u8)
}

/// A segment with nothing set but `seq`, `ack` and `flags`.
fn segment(seq: u32, ack: u32, flags: Flags) -> tcp::Repr<'static> {
    tcp::Repr {
        src_port: 0,
        dst_port: 0,
        seq,
        ack,
        flags,
        window: 65_535,
        urgent: 0,
        options: Options::default(),
        payload: &[],
    }
}

/// The last segment seen on the wire from one end of a watched connection.
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    seq: u32,
    ack: u32,
    window: u16,
    len: u32,
    timestamps: Option<(u32, u32)>,
}

/// What an on-path attacker learns from the server's links: the latest segment each
/// way on the watched connections, and the SYN-ACKs the server sends to spoofed
/// addresses (for the idle clients to complete their handshakes).
#[derive(Default)]
struct Tap {
    /// (from, to) pairs watched, and the last segment seen from `from` to `to`.
    watched: Vec<((SocketAddrV4, SocketAddrV4), Option<Seen>)>,
    /// Collect the SYN-ACKs to 198.18.0.0/15 (for a flood that drains them).
    collect_syn_acks: bool,
    /// SYN-ACKs to 198.18.0.0/15: (client, server ISN, the ACK of our ISN + 1).
    syn_acks: Vec<(SocketAddrV4, u32, u32)>,
}

impl Tap {
    fn watch(&mut self, from: SocketAddrV4, to: SocketAddrV4) {
        self.watched.push(((from, to), None));
    }

    fn seen(&self, from: SocketAddrV4, to: SocketAddrV4) -> Option<Seen> {
        self.watched
            .iter()
            .find(|(k, _)| *k == (from, to))
            .and_then(|(_, s)| *s)
    }

    fn observe(&mut self, frame: &[u8]) {
        let Ok(eth) = ethernet::Frame::new_checked(frame) else {
            return;
        };
        let Ok(ip) = ipv4::Packet::new_checked(eth.payload()) else {
            return;
        };
        if ip.protocol() != Protocol::Tcp || ip.frag_offset() != 0 || ip.more_frags() {
            return;
        }
        let Ok(packet) = tcp::Packet::new_checked(ip.payload()) else {
            return;
        };
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let Ok(repr) = tcp::Repr::parse(&packet, &src, &dst, false) else {
            return;
        };
        let from = SocketAddrV4::new(src, repr.src_port);
        let to = SocketAddrV4::new(dst, repr.dst_port);
        if repr.flags.syn() && repr.flags.ack() && dst.octets()[0] == 198 {
            if self.collect_syn_acks {
                self.syn_acks.push((to, repr.seq, repr.ack));
            }
            return;
        }
        if let Some((_, seen)) = self.watched.iter_mut().find(|(k, _)| *k == (from, to)) {
            *seen = Some(Seen {
                seq: repr.seq,
                ack: repr.ack,
                window: repr.window,
                len: repr.payload.len() as u32
                    + u32::from(repr.flags.syn())
                    + u32::from(repr.flags.fin()),
                timestamps: repr.options.timestamps,
            });
        }
    }
}

/// The network: client -- server -- attacker. The server's default route leads to the
/// attacker host, so answers to spoofed sources go there and die.
struct Net {
    sim: Sim,
    server: HostId,
    client: HostId,
    attack_link: LinkId,
    listener: TcpHandle,
    /// (attacker's MAC, server's MAC on the attacker's link).
    attack_macs: (ethernet::Address, ethernet::Address),
    tap: Rc<RefCell<Tap>>,
}

/// TCP settings of both legitimate ends.
fn legit_tcp() -> TcpConfig {
    TcpConfig {
        send_buffer: LEGIT_BUFFER,
        recv_buffer: LEGIT_BUFFER,
        ..TcpConfig::default()
    }
}

fn server_config() -> StackConfig {
    StackConfig {
        tcp: legit_tcp(),
        ..StackConfig::default()
    }
}

fn setup(server_config: StackConfig, seed: u64) -> Net {
    let mut sim = Sim::new(seed);
    let server = sim.add_host("server", server_config);
    let client = sim.add_host(
        "client",
        StackConfig {
            tcp: legit_tcp(),
            ..StackConfig::default()
        },
    );
    let attacker = sim.add_host("attacker", StackConfig::default());
    let legit = LinkConfig {
        rate_bps: LEGIT_RATE,
        delay: LEGIT_DELAY,
        queue_limit_bytes: LEGIT_QUEUE,
        ..LinkConfig::default()
    };
    let link = sim
        .connect(
            client,
            Cidr::new(CLIENT, 24).unwrap(),
            server,
            Cidr::new(SERVER, 24).unwrap(),
            legit,
        )
        .unwrap();
    let attack = LinkConfig {
        rate_bps: 10_000_000_000,
        delay: Duration::from_micros(10),
        queue_limit_bytes: 1 << 20,
        ..LinkConfig::default()
    };
    let attack_link = sim
        .connect(
            attacker,
            Cidr::new(ATTACKER, 24).unwrap(),
            server,
            Cidr::new(SERVER_ATTACK, 24).unwrap(),
            attack,
        )
        .unwrap();
    let iface = sim.iface_on(server, attack_link).unwrap();
    sim.host_mut(server)
        .routes_mut()
        .add_default(ATTACKER, iface);
    let listener = sim
        .host_mut(server)
        .tcp_listen(SocketAddrV4::new(SERVER, PORT), BACKLOG)
        .unwrap();
    let attack_macs = (
        sim.mac_on(attacker, attack_link).unwrap(),
        sim.mac_on(server, attack_link).unwrap(),
    );
    let tap = Rc::new(RefCell::new(Tap::default()));
    let observed = Rc::clone(&tap);
    sim.set_observer(Some(Box::new(move |event| {
        if event.kind == FrameKind::Sent && (event.link == link || event.link == attack_link) {
            observed.borrow_mut().observe(event.frame);
        }
    })));
    let _ = client;
    Net {
        sim,
        server,
        client,
        attack_link,
        listener,
        attack_macs,
        tap,
    }
}

/// A bulk transfer between the client and the server, hashed at both ends.
struct Transfer {
    client_sends: bool,
    listener: TcpHandle,
    client_conn: TcpHandle,
    server_conn: Option<TcpHandle>,
    bytes: u64,
    written: u64,
    pattern: Pattern,
    record: Vec<u8>,
    filled: usize,
    offset: usize,
    sent: StreamHash,
    received: StreamHash,
    buf: Vec<u8>,
    closed: bool,
    eof: bool,
}

impl Transfer {
    /// A transfer to the listener `listener` on `port`.
    fn start(
        net: &mut Net,
        (port, listener): (u16, TcpHandle),
        bytes: u64,
        client_sends: bool,
        seed: u64,
    ) -> Transfer {
        let now = net.sim.now();
        let client_conn = net
            .sim
            .host_mut(net.client)
            .tcp_connect(
                now,
                SocketAddrV4::new(CLIENT, 0),
                SocketAddrV4::new(SERVER, port),
            )
            .unwrap();
        Transfer {
            client_sends,
            listener,
            client_conn,
            server_conn: None,
            bytes,
            written: 0,
            pattern: Pattern::new(seed),
            record: vec![0; 8192],
            filled: 0,
            offset: 0,
            sent: StreamHash::default(),
            received: StreamHash::default(),
            buf: vec![0; 64 * 1024],
            closed: false,
            eof: false,
        }
    }

    /// The client's address (the 4-tuple's remote end at the server).
    fn client_addr(&self, net: &Net) -> SocketAddrV4 {
        net.sim
            .host(net.client)
            .tcp_addresses(self.client_conn)
            .map(|(local, _)| v4(local))
            .unwrap()
    }

    /// Accept, write, read and close as far as possible now; true once the receiver
    /// has seen the end of the stream.
    fn drive(&mut self, net: &mut Net) -> bool {
        let now = net.sim.now();
        if self.server_conn.is_none() {
            match net.sim.host_mut(net.server).tcp_accept(self.listener) {
                Ok(c) => self.server_conn = Some(c),
                Err(TcpError::WouldBlock) => return false,
                Err(e) => panic!("accept: {e}"),
            }
        }
        let server_conn = self.server_conn.unwrap();
        let ((from, tx), (to, rx)) = if self.client_sends {
            ((net.client, self.client_conn), (net.server, server_conn))
        } else {
            ((net.server, server_conn), (net.client, self.client_conn))
        };
        let stack = net.sim.host_mut(from);
        while self.written < self.bytes || self.offset < self.filled {
            if self.offset == self.filled {
                let n = (self.bytes - self.written).min(self.record.len() as u64) as usize;
                self.pattern.fill(&mut self.record[..n]);
                self.sent.update(&self.record[..n]);
                self.written += n as u64;
                self.filled = n;
                self.offset = 0;
            }
            match stack.tcp_send(now, tx, &self.record[self.offset..self.filled]) {
                Ok(0) | Err(TcpError::WouldBlock) => break,
                Ok(n) => self.offset += n,
                Err(e) => panic!("send: {e}"),
            }
        }
        if !self.closed && self.written == self.bytes && self.offset == self.filled {
            stack.tcp_close(now, tx).unwrap();
            self.closed = true;
        }
        let stack = net.sim.host_mut(to);
        while !self.eof {
            match stack.tcp_recv(now, rx, &mut self.buf) {
                Ok(0) => {
                    self.eof = true;
                    stack.tcp_close(now, rx).unwrap();
                }
                Ok(n) => self.received.update(&self.buf[..n]),
                Err(TcpError::WouldBlock) => break,
                Err(e) => panic!("recv: {e}"),
            }
        }
        self.eof
    }

    fn assert_byte_exact(&self, what: &str) {
        assert_eq!(
            self.received.len(),
            self.bytes,
            "{what}: {} of {} bytes arrived",
            self.received.len(),
            self.bytes
        );
        assert_eq!(
            self.received.finish(),
            self.sent.finish(),
            "{what}: the bytes received differ from the bytes sent"
        );
    }
}

/// A flood: called every `TICK` while it lasts, it injects a batch of frames.
trait Flood {
    /// The legitimate transfer's connection, (client, server), once it is opened.
    fn start(&mut self, _net: &mut Net, _legit: (SocketAddrV4, SocketAddrV4)) {}
    /// Inject this tick's frames (tick `n` of the flood).
    fn tick(&mut self, net: &mut Net, n: u32);
    /// The application's part at every step (accepting, closing); nothing by default.
    fn app(&mut self, _net: &mut Net, _flooding: bool) {}
    /// After the flood and the transfer: anything that ends the flood's state.
    fn leave(&mut self, _net: &mut Net) {}
}

/// What a run measured, in bytes above the live count before the network was built.
#[derive(Debug, Default)]
struct Measured {
    /// Live just before the flood started.
    before: usize,
    /// The highest live count from the flood's start to the end.
    peak: usize,
    /// Live once the flood was over, the transfer done and every timeout passed.
    after: usize,
    /// Bytes the transfer had delivered when the flood began and ended.
    received_at_start: u64,
    received_at_end: u64,
}

/// Run `flood` for `ticks` ticks (from `WARMUP` on) beside a transfer of `bytes` on
/// the server's main listener, then `leave`, then let `quiet` pass; the transfer must
/// complete byte for byte. `live0` is the live count before the network was built.
fn run(
    live0: isize,
    net: &mut Net,
    flood: &mut dyn Flood,
    (ticks, bytes, client_sends): (u32, u64, bool),
    quiet: Duration,
) -> Measured {
    let main = (PORT, net.listener);
    let mut transfer = Transfer::start(net, main, bytes, client_sends, net.sim.seed());
    let legit = (transfer.client_addr(net), SocketAddrV4::new(SERVER, PORT));
    flood.start(net, legit);
    let flood_start = Instant::ZERO + WARMUP;
    let mut next_tick = flood_start;
    let mut tick = 0;
    let mut m = Measured::default();
    let above = |live: isize| usize::try_from(live - live0).unwrap_or(0);
    let mut done = false;
    while !(done && tick >= ticks) {
        let now = net.sim.now();
        if tick == 0 && now >= flood_start && m.before == 0 {
            m.before = above(alloc_count::live_bytes());
            m.received_at_start = transfer.received.len();
            assert!(!done, "the transfer ended before the flood began");
            alloc_count::reset_peak();
        }
        while tick < ticks && next_tick <= now {
            flood.tick(net, tick);
            tick += 1;
            next_tick += TICK;
            if tick == ticks {
                m.received_at_end = transfer.received.len();
            }
        }
        flood.app(net, tick < ticks);
        done = done || transfer.drive(net);
        // The application drains readiness events, as the runtime does.
        for host in [net.server, net.client] {
            while net.sim.host_mut(host).poll_event().is_some() {}
        }
        // What the calls above queued goes on the wire before the next event is chosen.
        net.sim.transmit_now().unwrap();
        let wake = (tick < ticks).then_some(next_tick);
        match (net.sim.next_event(), wake) {
            (Some(event), Some(wake)) if wake < event => {
                net.sim.run_until(wake, 1).unwrap();
            }
            (None, Some(wake)) => {
                net.sim.run_until(wake, 1).unwrap();
            }
            (None, None) => panic!(
                "seed {}: the network went idle at {:?}, {} of {} bytes read",
                net.sim.seed(),
                net.sim.now(),
                transfer.received.len(),
                transfer.bytes,
            ),
            _ => {
                net.sim.step();
            }
        }
    }
    transfer.assert_byte_exact("the legitimate transfer");
    assert!(
        m.received_at_end > m.received_at_start,
        "the transfer moved nothing during the flood"
    );
    flood.leave(net);
    let end = net.sim.now() + quiet;
    net.sim.run_until(end, 100_000_000).unwrap();
    flood.app(net, false);
    for host in [net.server, net.client] {
        while net.sim.host_mut(host).poll_event().is_some() {}
    }
    m.peak = above(alloc_count::peak_bytes());
    m.after = above(alloc_count::live_bytes());
    m
}

/// Check the peak against `bound` and the memory after the flood against the memory
/// before it (plus `retained`, what the flood may legitimately leave behind), and print
/// the numbers.
fn check(what: &str, m: &Measured, bound: usize, retained: usize) {
    println!(
        "{what}: peak {} KiB of a bound of {} KiB; before the flood {} KiB, after {} KiB",
        m.peak / 1024,
        bound / 1024,
        m.before / 1024,
        m.after / 1024
    );
    assert!(
        m.peak <= bound,
        "{what}: peak {} bytes above the bound of {bound}",
        m.peak
    );
    assert!(
        m.after <= m.before + retained + LEAK_SLACK,
        "{what}: {} bytes live after the flood, {} before (+{retained} retained): a leak",
        m.after,
        m.before
    );
}

// ---- Fragment flood -------------------------------------------------------------------

/// Fragments of datagrams that never complete: from 64 spoofed sources, random
/// identifications and offsets, 1 KiB each, more fragments always following.
struct Fragments {
    rng: Rng,
    per_tick: usize,
    sources: Vec<Ipv4Addr>,
    payload: Vec<u8>,
}

impl Flood for Fragments {
    fn tick(&mut self, net: &mut Net, _n: u32) {
        for _ in 0..self.per_tick {
            let src = self.sources[self.rng.below(self.sources.len() as u64) as usize];
            let ip = ipv4::Repr {
                ident: self.rng.next() as u16,
                dont_frag: false,
                more_frags: true,
                frag_offset: (self.rng.below(63) * 1024) as u16,
                ..ip_repr(src, SERVER, Protocol::Udp, self.payload.len())
            };
            let payload = &self.payload;
            let frame = ip_frame(net.attack_macs, &ip, |bytes| bytes.copy_from_slice(payload));
            net.sim.inject(net.attack_link, 0, &frame);
        }
    }
}

fn fragment_flood(scale: u32, seed: u64) {
    let live0 = alloc_count::live_bytes();
    let config = server_config();
    let mut net = setup(config.clone(), seed);
    let mut rng = Rng(seed | 1);
    let sources = (0..64).map(|_| spoofed(&mut rng)).collect();
    let mut flood = Fragments {
        rng,
        per_tick: 40,
        sources,
        payload: vec![0x5a; 1024],
    };
    let ticks = FLOOD_TICKS * scale;
    let bytes = LEGIT_BYTES * u64::from(scale);
    let quiet = config.reassembly.timeout + config.tcp.msl.saturating_mul(2);
    let m = run(live0, &mut net, &mut flood, (ticks, bytes, true), quiet);
    let stats = net.sim.host(net.server).stats().reassembly.clone();
    println!(
        "fragment flood x{scale}: {} fragments, {} datagrams dropped for memory, {} timed out",
        stats.fragments, stats.memory, stats.timeout
    );
    // The reassembly bound, with the B-tree's root node it does not charge.
    let flood_bound = config.reassembly.max_bytes + 1200;
    let bound = FIXED + legit_bound(&config.tcp) + flood_bound;
    check(&format!("fragment flood x{scale}"), &m, bound, 0);
    assert!(stats.fragments >= u64::from(ticks) * 40);
    assert!(stats.memory > 0, "the memory bound never acted");
    assert_eq!(net.sim.host(net.server).reassembly_bytes(), 0);
}

#[test]
fn fragment_flood_stays_within_reassembly_max_bytes() {
    fragment_flood(1, 1301);
}

#[test]
#[ignore = "ten times the CI flood: run with --ignored"]
fn fragment_flood_x10_stays_within_reassembly_max_bytes() {
    fragment_flood(10, 1302);
}

// ---- Out-of-order segment flood -------------------------------------------------------

/// The port of a second listener, for connections other than the transfer's.
const OTHER_PORT: u16 = 81;

/// In-window segments with holes at an idle connection (its right 4-tuple, sequence
/// and acknowledgment numbers as an on-path attacker sees them): one byte each, at odd
/// offsets from RCV.NXT (so none is in order and no two touch), each a range of its
/// own: as many ranges as half the window's bytes, were they not bounded.
struct OutOfOrder {
    rng: Rng,
    per_tick: usize,
    listener: TcpHandle,
    /// The victim connection at the client and, once accepted, at the server.
    client_conn: TcpHandle,
    server_conn: Option<TcpHandle>,
    /// (client, server) of the victim.
    ends: (SocketAddrV4, SocketAddrV4),
    payload: Vec<u8>,
    window: usize,
}

impl OutOfOrder {
    fn new(net: &mut Net, rng: Rng, per_tick: usize) -> OutOfOrder {
        let server = SocketAddrV4::new(SERVER, OTHER_PORT);
        let listener = net.sim.host_mut(net.server).tcp_listen(server, 4).unwrap();
        let now = net.sim.now();
        let client_conn = net
            .sim
            .host_mut(net.client)
            .tcp_connect(now, SocketAddrV4::new(CLIENT, 0), server)
            .unwrap();
        let client = net
            .sim
            .host(net.client)
            .tcp_addresses(client_conn)
            .map(|(local, _)| v4(local))
            .unwrap();
        let mut tap = net.tap.borrow_mut();
        tap.watch(client, server);
        tap.watch(server, client);
        drop(tap);
        OutOfOrder {
            rng,
            per_tick,
            listener,
            client_conn,
            server_conn: None,
            ends: (client, server),
            payload: vec![0x42],
            window: LEGIT_BUFFER,
        }
    }
}

impl Flood for OutOfOrder {
    fn tick(&mut self, net: &mut Net, _n: u32) {
        let (client, server) = self.ends;
        let tap = net.tap.borrow();
        let (Some(to_server), Some(to_client)) =
            (tap.seen(client, server), tap.seen(server, client))
        else {
            panic!("the victim connection is not open");
        };
        drop(tap);
        let rcv_nxt = to_server.seq.wrapping_add(to_server.len);
        let snd_nxt = to_client.seq.wrapping_add(to_client.len);
        for _ in 0..self.per_tick {
            let len = self.payload.len();
            let offset = 1 + 2 * self.rng.below((self.window / 2 - 1) as u64) as u32;
            let segment = tcp::Repr {
                window: to_server.window,
                options: Options {
                    timestamps: to_server.timestamps,
                    ..Options::default()
                },
                payload: &self.payload[..len],
                ..segment(
                    rcv_nxt.wrapping_add(offset),
                    snd_nxt,
                    Flags::ACK | Flags::PSH,
                )
            };
            let frame = tcp_frame(net.attack_macs, self.ends, &segment, 0);
            net.sim.inject(net.attack_link, 0, &frame);
        }
    }

    fn app(&mut self, net: &mut Net, _flooding: bool) {
        if self.server_conn.is_none() {
            self.server_conn = net.sim.host_mut(net.server).tcp_accept(self.listener).ok();
        }
    }

    fn leave(&mut self, net: &mut Net) {
        // The victim's client goes (a RST); its server, reading, learns and closes.
        let now = net.sim.now();
        net.sim
            .host_mut(net.client)
            .tcp_abort(now, self.client_conn)
            .unwrap();
        net.sim
            .run_until(now + Duration::from_millis(10), 1000)
            .unwrap();
        let now = net.sim.now();
        let server = net.sim.host_mut(net.server);
        let conn = self.server_conn.expect("the victim was accepted");
        let mut buf = [0u8; 16];
        assert_eq!(
            server.tcp_recv(now, conn, &mut buf),
            Err(TcpError::ConnectionReset)
        );
        server.tcp_close(now, conn).unwrap();
    }
}

fn out_of_order_flood(scale: u32, seed: u64) {
    let live0 = alloc_count::live_bytes();
    let config = server_config();
    let mut net = setup(config.clone(), seed);
    let mut flood = OutOfOrder::new(&mut net, Rng(seed | 1), 40);
    let ticks = FLOOD_TICKS * scale;
    let bytes = LEGIT_BYTES * u64::from(scale);
    let quiet = config.tcp.msl.saturating_mul(2) + Duration::from_secs(1);
    let m = run(live0, &mut net, &mut flood, (ticks, bytes, true), quiet);
    let stats = net.sim.host(net.server).tcp_stats().clone();
    println!(
        "out-of-order flood x{scale}: {} segments out of order, {} dropped at max_ooo_ranges",
        stats.out_of_order, stats.out_of_order_dropped
    );
    // The victim's receive ring and range list, and the victim connection at both
    // ends.
    // The range list doubles as it grows, so its room may reach the power of two at or
    // above the buffer's limit.
    let ranges = RecvBuffer::with_max_ranges(config.tcp.recv_buffer, config.tcp.max_ooo_ranges)
        .range_limit()
        .next_power_of_two();
    let flood_bound = config.tcp.recv_buffer + ranges * 16 + 2 * CONN_COST;
    let bound = FIXED + legit_bound(&config.tcp) + flood_bound;
    // The victim's ring, grown to its full size by the flood, waits for another
    // connection among the spare rings when it closes.
    let retained = config.tcp.recv_buffer;
    check(&format!("out-of-order flood x{scale}"), &m, bound, retained);
    assert!(stats.out_of_order >= u64::from(ticks) * 40);
    assert!(
        stats.out_of_order_dropped > 0,
        "the range bound did not act"
    );
}

#[test]
fn out_of_order_flood_stays_within_the_receive_buffer_and_max_ooo_ranges() {
    out_of_order_flood(1, 1401);
}

#[test]
#[ignore = "ten times the CI flood: run with --ignored"]
fn out_of_order_flood_x10_stays_within_the_receive_buffer_and_max_ooo_ranges() {
    out_of_order_flood(10, 1402);
}

// ---- ACK flood ------------------------------------------------------------------------

/// ACKs at the legitimate transfer's sender, with its right 4-tuple, sequence number
/// and timestamps (copied from the receiver's latest ACK, as an on-path attacker sees
/// it): in turn a duplicate of that ACK, an old one (below SND.UNA), one from the
/// future (beyond SND.NXT), and a duplicate carrying SACK blocks of 1 to 64 bytes at
/// random inside the data in flight (each would cut the sender's record of it).
struct Acks {
    rng: Rng,
    per_tick: usize,
    /// (client, server) of the transfer; the server sends.
    ends: Option<(SocketAddrV4, SocketAddrV4)>,
}

impl Flood for Acks {
    fn start(&mut self, net: &mut Net, legit: (SocketAddrV4, SocketAddrV4)) {
        let mut tap = net.tap.borrow_mut();
        tap.watch(legit.0, legit.1);
        tap.watch(legit.1, legit.0);
        self.ends = Some(legit);
    }

    fn tick(&mut self, net: &mut Net, _n: u32) {
        let (client, server) = self.ends.unwrap();
        let tap = net.tap.borrow();
        let (Some(ack), Some(data)) = (tap.seen(client, server), tap.seen(server, client)) else {
            panic!("the transfer is not open");
        };
        drop(tap);
        let snd_una = ack.ack;
        let snd_nxt = data.seq.wrapping_add(data.len);
        let in_flight = snd_nxt.wrapping_sub(snd_una).clamp(1, 1 << 30);
        for i in 0..self.per_tick {
            let mut options = Options {
                timestamps: ack.timestamps,
                ..Options::default()
            };
            let variants: usize = std::env::var("V")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(4);
            let ack_number = match if variants == 1 { 3 } else { i % variants } {
                0 => snd_una,
                1 => snd_una.wrapping_sub(1 + self.rng.below(1 << 20) as u32),
                2 => snd_nxt.wrapping_add(1 + self.rng.below(1 << 28) as u32),
                _ => {
                    let blocks = if ack.timestamps.is_some() { 3 } else { 4 };
                    for block in &mut options.sack_blocks[..blocks] {
                        let left =
                            snd_una.wrapping_add(self.rng.below(u64::from(in_flight)) as u32);
                        let right = left.wrapping_add(1 + self.rng.below(64) as u32);
                        *block = SackBlock { left, right };
                    }
                    options.sack_len = blocks as u8;
                    snd_una
                }
            };
            let segment = tcp::Repr {
                window: ack.window,
                options,
                ..segment(ack.seq.wrapping_add(ack.len), ack_number, Flags::ACK)
            };
            let frame = tcp_frame(net.attack_macs, (client, server), &segment, 0);
            net.sim.inject(net.attack_link, 0, &frame);
        }
    }
}

fn ack_flood(scale: u32, seed: u64) {
    let live0 = alloc_count::live_bytes();
    let config = server_config();
    let mut net = setup(config.clone(), seed);
    let mut flood = Acks {
        rng: Rng(seed | 1),
        per_tick: 100,
        ends: None,
    };
    let ticks = FLOOD_TICKS * scale;
    let bytes = LEGIT_BYTES * u64::from(scale);
    let quiet = config.tcp.msl.saturating_mul(2) + Duration::from_secs(1);
    // The server sends: the flood's ACKs are for its data.
    let m = run(live0, &mut net, &mut flood, (ticks, bytes, false), quiet);
    let stats = net.sim.host(net.server).tcp_stats().clone();
    println!(
        "ACK flood x{scale}: {} segments in, {} challenge ACKs ({} limited), {} bad ACKs, \
         {} retransmitted, {} spurious",
        stats.segments_in,
        stats.challenge_acks,
        stats.challenge_acks_limited,
        stats.bad_ack,
        stats.retransmitted,
        stats.spurious_retransmits
    );
    // The flood is owed no memory: what it may cost is the sender's record of the data
    // in flight cut by its SACK blocks, bounded per connection.
    let flood_bound = CONN_COST;
    let bound = FIXED + legit_bound(&config.tcp) + flood_bound;
    // The retransmissions the forged SACK blocks draw reach the client out of order:
    // its receive ring grows to its full size, and is kept among the spare rings.
    let retained = config.tcp.recv_buffer;
    check(&format!("ACK flood x{scale}"), &m, bound, retained);
    assert!(stats.segments_in >= u64::from(ticks) * 100);
    assert!(
        stats.challenge_acks_limited > 0,
        "the challenge ACK limit never acted"
    );
}

#[test]
fn ack_flood_costs_no_memory() {
    ack_flood(1, 1501);
}

#[test]
#[ignore = "ten times the CI flood: run with --ignored"]
fn ack_flood_x10_costs_no_memory() {
    ack_flood(10, 1502);
}

// ---- Half-open connections ------------------------------------------------------------

/// SYNs from spoofed sources (198.18.0.0/15, random ports) with every option, at the
/// transfer's listener: its backlog fills with half-open connections that never
/// complete. With SYN cookies, a second client connects during the flood and moves
/// `late_bytes` byte for byte.
struct Syns {
    rng: Rng,
    per_tick: usize,
    /// The tick the late client connects at, its transfer, and its size.
    late_at: u32,
    late: Option<Transfer>,
    late_bytes: u64,
    late_done: bool,
}

impl Flood for Syns {
    fn tick(&mut self, net: &mut Net, n: u32) {
        for _ in 0..self.per_tick {
            let src =
                SocketAddrV4::new(spoofed(&mut self.rng), 1024 + self.rng.below(60_000) as u16);
            let syn = tcp::Repr {
                options: Options {
                    mss: Some(1460),
                    window_scale: Some(7),
                    sack_permitted: true,
                    timestamps: Some((self.rng.next() as u32, 0)),
                    ..Options::default()
                },
                ..segment(self.rng.next() as u32, 0, Flags::SYN)
            };
            let frame = tcp_frame(
                net.attack_macs,
                (src, SocketAddrV4::new(SERVER, PORT)),
                &syn,
                0,
            );
            net.sim.inject(net.attack_link, 0, &frame);
        }
        if n == self.late_at && self.late_bytes > 0 {
            let main = (PORT, net.listener);
            self.late = Some(Transfer::start(net, main, self.late_bytes, true, 77));
        }
    }

    fn app(&mut self, net: &mut Net, _flooding: bool) {
        if let Some(late) = &mut self.late
            && !self.late_done
        {
            self.late_done = late.drive(net);
        }
    }
}

fn half_open_flood(scale: u32, seed: u64, cookies: bool) {
    let live0 = alloc_count::live_bytes();
    let mut config = server_config();
    config.tcp.syn_cookies = cookies;
    let mut net = setup(config.clone(), seed);
    let ticks = FLOOD_TICKS * scale;
    let mut flood = Syns {
        rng: Rng(seed | 1),
        per_tick: 100,
        late_at: ticks / 4,
        late: None,
        late_bytes: if cookies { u64::from(scale) << 20 } else { 0 },
        late_done: false,
    };
    let bytes = LEGIT_BYTES * u64::from(scale);
    // The half-open children give up after their SYN-ACK's retries (1 + 2 + ... + 64 s).
    let quiet = Duration::from_secs(200);
    let m = run(live0, &mut net, &mut flood, (ticks, bytes, true), quiet);
    let stats = net.sim.host(net.server).tcp_stats().clone();
    let what = format!(
        "half-open flood x{scale} with{} cookies",
        if cookies { "" } else { "out" }
    );
    println!(
        "{what}: {} SYNs over the backlog, {} cookies sent, {} accepted",
        stats.listen_overflows, stats.syn_cookies_sent, stats.syn_cookies_accepted
    );
    // The backlog's half-open connections, and the queues of SYN-ACKs (with cookies)
    // and RSTs waiting to go, under 128 bytes an entry. With cookies, the late client's
    // connection at both ends and its rings.
    let mut flood_bound = BACKLOG * CONN_COST + 2 * config.tcp.reset_queue * 128;
    if cookies {
        flood_bound += 2 * CONN_COST + legit_bound(&config.tcp);
    }
    let bound = FIXED + legit_bound(&config.tcp) + flood_bound;
    // The late client's rings are kept among the spare rings.
    let retained = if cookies { legit_bound(&config.tcp) } else { 0 };
    check(&what, &m, bound, retained);
    assert!(stats.listen_overflows >= u64::from(ticks) * 100 - BACKLOG as u64 - 1);
    if cookies {
        assert!(stats.syn_cookies_sent > 0);
        let late = flood.late.as_ref().expect("the late client connected");
        assert!(flood.late_done, "the late client's transfer did not end");
        late.assert_byte_exact("the late client's transfer");
        assert_eq!(
            stats.syn_cookies_accepted, 1,
            "the late client came in by cookie"
        );
    }
    assert_eq!(
        net.sim.host_mut(net.server).tcp_connection_count(),
        0,
        "every half-open connection gave up"
    );
}

#[test]
fn half_open_flood_with_cookies_stays_within_the_backlog() {
    half_open_flood(1, 1601, true);
}

#[test]
fn half_open_flood_without_cookies_stays_within_the_backlog() {
    half_open_flood(1, 1602, false);
}

#[test]
#[ignore = "ten times the CI flood: run with --ignored"]
fn half_open_flood_x10_stays_within_the_backlog() {
    half_open_flood(10, 1603, true);
    half_open_flood(10, 1604, false);
}

// ---- Idle established connections -----------------------------------------------------

/// The most connections the server takes in the idle-connection test (the legitimate
/// transfer's included).
const IDLE_MAX_CONNECTIONS: usize = 256;

/// Clients from spoofed sources that complete their handshakes (the SYN-ACK is seen on
/// the server's link, as an attacker on that path would) and then sit idle: four times
/// as many as the server's `max_connections`. The server's application accepts every
/// one and holds it. When the flood is over the clients reset their connections.
struct Idle {
    per_tick: usize,
    total: usize,
    sent: usize,
    /// Connections the server's application accepted and holds.
    held: Vec<TcpHandle>,
    /// Clients whose handshake completed: (client, its next sequence number).
    established: Vec<(SocketAddrV4, u32)>,
    /// The most connections the server's table held at once.
    most: usize,
}

/// The `i`th idle client's address and ISN.
fn idle_client(i: usize) -> (SocketAddrV4, u32) {
    let addr = Ipv4Addr::new(198, 18 + (i >> 16 & 1) as u8, (i >> 8) as u8, i as u8);
    let isn = (i as u32).wrapping_mul(0x9e37_79b9);
    (SocketAddrV4::new(addr, 40_000 + (i >> 17) as u16), isn)
}

impl Flood for Idle {
    fn tick(&mut self, net: &mut Net, _n: u32) {
        let server = SocketAddrV4::new(SERVER, PORT);
        let end = (self.sent + self.per_tick).min(self.total);
        for i in self.sent..end {
            let (client, isn) = idle_client(i);
            let syn = tcp::Repr {
                options: Options {
                    mss: Some(1460),
                    ..Options::default()
                },
                ..segment(isn, 0, Flags::SYN)
            };
            let frame = tcp_frame(net.attack_macs, (client, server), &syn, 0);
            net.sim.inject(net.attack_link, 0, &frame);
        }
        self.sent = end;
    }

    fn app(&mut self, net: &mut Net, _flooding: bool) {
        if self.sent == 0 {
            // Before the flood the listener's connection is the transfer's.
            return;
        }
        let server = SocketAddrV4::new(SERVER, PORT);
        let syn_acks = std::mem::take(&mut net.tap.borrow_mut().syn_acks);
        for (client, server_isn, ack) in syn_acks {
            let frame = tcp_frame(
                net.attack_macs,
                (client, server),
                &segment(ack, server_isn.wrapping_add(1), Flags::ACK),
                0,
            );
            net.sim.inject(net.attack_link, 0, &frame);
            self.established.push((client, ack));
        }
        let stack = net.sim.host_mut(net.server);
        while let Ok(conn) = stack.tcp_accept(net.listener) {
            self.held.push(conn);
        }
        self.most = self.most.max(stack.tcp_connection_count());
    }

    fn leave(&mut self, net: &mut Net) {
        let server = SocketAddrV4::new(SERVER, PORT);
        for &(client, seq) in &self.established {
            let frame = tcp_frame(
                net.attack_macs,
                (client, server),
                &segment(seq, 0, Flags::RST),
                0,
            );
            net.sim.inject(net.attack_link, 0, &frame);
        }
        let now = net.sim.now();
        net.sim
            .run_until(now + Duration::from_millis(10), 1_000_000)
            .unwrap();
        let now = net.sim.now();
        let stack = net.sim.host_mut(net.server);
        let mut buf = [0u8; 16];
        for conn in self.held.drain(..) {
            assert_eq!(
                stack.tcp_recv(now, conn, &mut buf),
                Err(TcpError::ConnectionReset)
            );
            stack.tcp_close(now, conn).unwrap();
        }
    }
}

fn idle_flood(scale: u32, seed: u64) {
    let live0 = alloc_count::live_bytes();
    let mut config = server_config();
    config.tcp.max_connections = IDLE_MAX_CONNECTIONS;
    let mut net = setup(config.clone(), seed);
    net.tap.borrow_mut().collect_syn_acks = true;
    let ticks = FLOOD_TICKS * scale;
    let total = 4 * IDLE_MAX_CONNECTIONS * scale as usize;
    let mut flood = Idle {
        per_tick: total.div_ceil(ticks as usize),
        total,
        sent: 0,
        held: Vec::with_capacity(IDLE_MAX_CONNECTIONS),
        established: Vec::with_capacity(total),
        most: 0,
    };
    let bytes = LEGIT_BYTES * u64::from(scale);
    let quiet = config.tcp.msl.saturating_mul(2) + Duration::from_secs(1);
    let m = run(live0, &mut net, &mut flood, (ticks, bytes, true), quiet);
    let stats = net.sim.host(net.server).tcp_stats().clone();
    let what = format!("idle-connection flood x{scale}");
    println!(
        "{what}: {total} clients, {} connections at most, {} SYNs dropped at max_connections",
        flood.most, stats.connection_limit_drops
    );
    // Every connection the table may hold, none with ring storage (idle), and the
    // test's own lists of them (12 bytes a client).
    let flood_bound = IDLE_MAX_CONNECTIONS * CONN_COST + 12 * total;
    let bound = FIXED + legit_bound(&config.tcp) + flood_bound;
    check(&what, &m, bound, 0);
    assert!(flood.most <= IDLE_MAX_CONNECTIONS);
    assert!(
        flood.most >= IDLE_MAX_CONNECTIONS - 2,
        "the clients did not fill the table"
    );
    assert!(stats.connection_limit_drops > 0, "the bound never acted");
    assert_eq!(net.sim.host_mut(net.server).tcp_connection_count(), 0);
}

#[test]
fn idle_connections_stay_within_max_connections() {
    idle_flood(1, 1701);
}

#[test]
#[ignore = "ten times the CI flood: run with --ignored"]
fn idle_connections_x10_stay_within_max_connections() {
    idle_flood(10, 1702);
}

/// The IPv4 address of an IPv4 connection's end (this test's connections are IPv4).
fn v4(addr: std::net::SocketAddr) -> SocketAddrV4 {
    match addr {
        std::net::SocketAddr::V4(a) => a,
        std::net::SocketAddr::V6(a) => panic!("expected IPv4, got {a}"),
    }
}
