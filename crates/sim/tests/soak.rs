//! Soak tests (issue 13): hours of virtual time over a link whose loss, reordering,
//! duplication, corruption, rate and delay change at random every few seconds, with
//! connections opening, transferring and closing (or aborting) all the while; and a
//! long run of open/close cycles. Every byte delivered is checked against the pattern
//! its connection sent; at the end, after a quiet period on a clean link, the stacks
//! must hold no socket but the listener and no timer, and the memory counted by
//! [`CountingAlloc`] must be back to what it was at a quiet point after warm-up.
//!
//! `soak_one_hour` and `open_close_20k_cycles` run in CI; `soak_24_hours` and
//! `open_close_1m_cycles` are `#[ignore]`d (run them with
//! `cargo test -p impnet-sim --release --test soak -- --ignored --nocapture`). Every
//! run is deterministic from its seed, which every failure names.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::rc::Rc;

use impnet_core::rng::{SPLITMIX64_GAMMA, splitmix64};
use impnet_core::tcp::{Keepalive, TcpError, TcpEvent, TcpHandle};
use impnet_core::{Duration, Event, Instant, StackConfig};
use impnet_phy::LinkConfig;
use impnet_phy::link::GilbertElliott;
use impnet_sim::alloc_count::{self, CountingAlloc};
use impnet_sim::{Flow, FrameEvent, FrameObserver, HostId, LinkId, Sim};
use impnet_wire::ipv4::{self, Cidr};
use impnet_wire::{ethernet, tcp};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PORT: u16 = 5001;
/// Each connection's upload starts with its id, 8 bytes little-endian.
const HEADER: u64 = 8;
/// Bytes moved per send or receive call.
const CHUNK: usize = 16 * 1024;
const MIB: f64 = 1024.0 * 1024.0;

// ---------------------------------------------------------------------------------
// Deterministic randomness and the byte pattern
// ---------------------------------------------------------------------------------

/// The SplitMix64 output that follows state `z` (the state itself left alone).
fn mix(mut z: u64) -> u64 {
    splitmix64(&mut z)
}

/// SplitMix64, the test's own seeded generator: each output is [`mix`] of the stepped
/// state, one increment ahead of a plain step, as it always was (the soak's seeds keep
/// their sequences).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(SPLITMIX64_GAMMA);
        mix(self.0)
    }
    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
    /// Uniform in `[lo, hi)`.
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    /// Log-uniform in `[lo, hi)`.
    fn log_uniform(&mut self, lo: f64, hi: f64) -> f64 {
        (lo.ln() + (hi.ln() - lo.ln()) * self.unit()).exp()
    }
}

/// Which stream of a connection.
#[derive(Clone, Copy)]
enum Dir {
    Up = 1,
    Down = 2,
}

/// Byte `offset` of stream `dir` of connection `id`: 8 bytes per SplitMix64 output, so a
/// byte delivered twice, out of order, from another connection or from the other
/// direction does not match.
fn pattern(seed: u64, id: u64, dir: Dir, offset: u64) -> u8 {
    let word = mix(seed ^ mix(id.wrapping_mul(4) + dir as u64) ^ (offset / 8));
    word.to_le_bytes()[(offset % 8) as usize]
}

fn fill(seed: u64, id: u64, dir: Dir, offset: u64, out: &mut [u8]) {
    for (i, b) in out.iter_mut().enumerate() {
        *b = pattern(seed, id, dir, offset + i as u64);
    }
}

/// The first offset in `data` (read from stream offset `offset`) that differs from the
/// pattern, if any.
fn mismatch(seed: u64, id: u64, dir: Dir, offset: u64, data: &[u8]) -> Option<u64> {
    data.iter()
        .enumerate()
        .find(|&(i, &b)| b != pattern(seed, id, dir, offset + i as u64))
        .map(|(i, _)| offset + i as u64)
}

// ---------------------------------------------------------------------------------
// Plans: what each connection does, derived from the seed and its id
// ---------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Abort {
    None,
    /// The client aborts once it has sent and received this many bytes in all.
    Client(u64),
    /// The server aborts once it has received and sent this many bytes in all (after
    /// the header).
    Server(u64),
}

#[derive(Debug, Clone, Copy)]
struct Plan {
    up: u64,
    down: u64,
    abort: Abort,
}

fn transfer_size(rng: &mut Rng) -> u64 {
    match rng.below(10) {
        0..=2 => rng.below(1024),
        3..=7 => rng.log_uniform(1024.0, 65_536.0) as u64,
        _ => rng.log_uniform(65_536.0, 1_048_576.0) as u64,
    }
}

impl Plan {
    /// Both ends derive the plan from the id the upload starts with.
    fn of(seed: u64, id: u64) -> Plan {
        let mut rng = Rng(mix(seed ^ 0x504c_414e) ^ mix(id));
        let up = transfer_size(&mut rng);
        let down = transfer_size(&mut rng);
        let abort = match rng.below(100) {
            0..=2 => Abort::Client(rng.below(HEADER + up + down)),
            3..=5 => Abort::Server(rng.below((up + down).max(1))),
            _ => Abort::None,
        };
        Plan { up, down, abort }
    }
}

// ---------------------------------------------------------------------------------
// The changing link
// ---------------------------------------------------------------------------------

/// A random path: 2-100 Mbit/s, 1-80 ms one way, a queue of about twice the
/// bandwidth-delay product, and each impairment present some of the time: loss up to
/// 10% (independent, or in Gilbert-Elliott bursts), reordering, duplication and
/// corruption.
fn random_link(rng: &mut Rng) -> LinkConfig {
    let rate_bps = rng.log_uniform(2e6, 100e6) as u64;
    let delay_us = rng.log_uniform(1_000.0, 80_000.0) as u64;
    let bdp = (rate_bps as f64 * 2.0 * delay_us as f64 / 1e6 / 8.0) as usize;
    let mut link = LinkConfig {
        rate_bps,
        delay: Duration::from_micros(delay_us),
        queue_limit_bytes: (2 * bdp).clamp(32 * 1024, 1 << 20),
        ..LinkConfig::default()
    };
    let mut budget = 0.10;
    if rng.chance(0.15) {
        let bursts = GilbertElliott {
            good_to_bad: rng.uniform(0.002, 0.02),
            bad_to_good: rng.uniform(0.2, 0.5),
            loss_good: 0.0,
            loss_bad: rng.uniform(0.2, 0.6),
        };
        budget -= bursts.mean_loss().min(budget);
        link.burst_loss = Some(bursts);
    }
    link.loss = match rng.below(10) {
        0..=2 => 0.0,
        3..=7 => rng.uniform(0.0, 0.02),
        _ => rng.uniform(0.02, 0.10),
    }
    .min(budget);
    if rng.chance(0.3) {
        link.reorder = rng.uniform(0.0, 0.05);
        link.reorder_delay = Duration::from_micros(rng.log_uniform(500.0, 20_000.0) as u64);
    }
    if rng.chance(0.2) {
        link.duplicate = rng.uniform(0.0, 0.03);
    }
    if rng.chance(0.2) {
        link.corrupt = rng.uniform(0.0, 0.02);
    }
    link
}

fn clean_link() -> LinkConfig {
    LinkConfig {
        rate_bps: 100_000_000,
        delay: Duration::from_millis(5),
        queue_limit_bytes: 1 << 20,
        ..LinkConfig::default()
    }
}

// ---------------------------------------------------------------------------------
// Outcome bookkeeping (fixed-size counters: the application must not grow either)
// ---------------------------------------------------------------------------------

const ERROR_KINDS: [&str; 5] = ["reset", "timed out", "unreachable", "refused", "other"];

fn error_kind(e: TcpError) -> usize {
    match e {
        TcpError::ConnectionReset => 0,
        TcpError::TimedOut => 1,
        TcpError::HostUnreachable | TcpError::NetUnreachable => 2,
        TcpError::ConnectionRefused => 3,
        _ => 4,
    }
}

/// Deliberate faults, to show that the checks catch them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leak {
    None,
    /// The client application forgets to close one completed connection's handle.
    Socket,
    /// The application keeps 4 KiB per completed connection.
    Memory,
}

#[derive(Debug, Default)]
struct Tally {
    opened: u64,
    /// Opens skipped because `max_conns` were already open.
    skipped: u64,
    client_done: u64,
    server_done: u64,
    planned_client_aborts: u64,
    planned_server_aborts: u64,
    client_aborts: u64,
    server_aborts: u64,
    client_errors: [u64; 5],
    server_errors: [u64; 5],
    /// Errors on connections no one meant to abort, other than a timeout or an
    /// unreachable host (the clean ways for a path to fail).
    unexpected: u64,
    /// Connections the watchdog aborted for making no end.
    stalled: u64,
    bytes_up: u64,
    bytes_down: u64,
    link_changes: u64,
    first_problem: Option<String>,
}

impl Tally {
    fn note(&mut self, problem: String) {
        if self.first_problem.is_none() {
            self.first_problem = Some(problem);
        }
    }
}

// ---------------------------------------------------------------------------------
// The applications
// ---------------------------------------------------------------------------------

struct ClientConn {
    id: u64,
    plan: Plan,
    opened: Instant,
    /// Bytes of the upload (header included) taken by the stack.
    sent: u64,
    /// Download bytes read and checked.
    received: u64,
    shut: bool,
    eof: bool,
}

struct ServerConn {
    opened: Instant,
    header: [u8; HEADER as usize],
    header_len: usize,
    /// Known once the header is in.
    id: Option<(u64, Plan)>,
    received: u64,
    sent: u64,
    eof: bool,
}

/// What a service call decided about a connection.
enum Next {
    Keep,
    /// Finished (closed gracefully, aborted, or failed): forget it.
    Drop,
}

struct Apps {
    seed: u64,
    client: HostId,
    server: HostId,
    listener: TcpHandle,
    clients: HashMap<TcpHandle, ClientConn>,
    servers: HashMap<TcpHandle, ServerConn>,
    next_id: u64,
    buf: Vec<u8>,
    tally: Tally,
    leak: Leak,
    leaked: Vec<u8>,
    /// The connection `SOAK_TRACE` names, and its client port once it is open.
    trace_id: Option<u64>,
    trace_port: Rc<Cell<u16>>,
}

fn remote() -> SocketAddrV4 {
    SocketAddrV4::new(SERVER, PORT)
}

impl Apps {
    fn open(&mut self, sim: &mut Sim) {
        let now = sim.now();
        let any = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0);
        let handle = match sim.host_mut(self.client).tcp_connect(now, any, remote()) {
            Ok(h) => h,
            Err(e) => {
                self.tally.note(format!("connect failed: {e}"));
                self.tally.unexpected += 1;
                return;
            }
        };
        let id = self.next_id;
        self.next_id += 1;
        let plan = Plan::of(self.seed, id);
        if self.trace_id == Some(id) {
            let port = sim
                .host(self.client)
                .tcp_addresses(handle)
                .unwrap()
                .0
                .port();
            self.trace_port.set(port);
            eprintln!("trace: connection {id} from port {port} at {now}, plan {plan:?}");
        }
        match plan.abort {
            Abort::Client(_) => self.tally.planned_client_aborts += 1,
            Abort::Server(_) => self.tally.planned_server_aborts += 1,
            Abort::None => {}
        }
        self.tally.opened += 1;
        self.clients.insert(
            handle,
            ClientConn {
                id,
                plan,
                opened: now,
                sent: 0,
                received: 0,
                shut: false,
                eof: false,
            },
        );
        self.service_client(sim, handle);
    }

    /// Drain both hosts' events and serve the connections they name.
    fn poll(&mut self, sim: &mut Sim) {
        while let Some(event) = sim.host_mut(self.server).poll_event() {
            let Event::Tcp(event) = event else { continue };
            match event {
                TcpEvent::Readable(h) if h == self.listener => self.accept(sim),
                TcpEvent::Readable(h) | TcpEvent::Writable(h) | TcpEvent::Closed(h) => {
                    self.service_server(sim, h);
                }
            }
        }
        while let Some(event) = sim.host_mut(self.client).poll_event() {
            let Event::Tcp(event) = event else { continue };
            let (TcpEvent::Readable(h) | TcpEvent::Writable(h) | TcpEvent::Closed(h)) = event;
            self.service_client(sim, h);
        }
    }

    fn accept(&mut self, sim: &mut Sim) {
        let now = sim.now();
        while let Ok(h) = sim.host_mut(self.server).tcp_accept(self.listener) {
            self.servers.insert(
                h,
                ServerConn {
                    opened: now,
                    header: [0; HEADER as usize],
                    header_len: 0,
                    id: None,
                    received: 0,
                    sent: 0,
                    eof: false,
                },
            );
            self.service_server(sim, h);
        }
    }

    fn service_client(&mut self, sim: &mut Sim, handle: TcpHandle) {
        let Some(mut conn) = self.clients.remove(&handle) else {
            return;
        };
        match self.drive_client(sim, handle, &mut conn) {
            Next::Keep => {
                self.clients.insert(handle, conn);
            }
            Next::Drop => {}
        }
    }

    fn client_failed(&mut self, sim: &mut Sim, handle: TcpHandle, conn: &ClientConn, e: TcpError) {
        self.tally.client_errors[error_kind(e)] += 1;
        let clean = matches!(
            e,
            TcpError::TimedOut | TcpError::HostUnreachable | TcpError::NetUnreachable
        );
        if conn.plan.abort == Abort::None && !clean {
            self.tally.unexpected += 1;
            self.tally.note(format!(
                "client of connection {} (plan {:?}, sent {}, received {}) failed at {}: {e}",
                conn.id,
                conn.plan,
                conn.sent,
                conn.received,
                sim.now()
            ));
        }
        let now = sim.now();
        let _ = sim.host_mut(self.client).tcp_close(now, handle);
    }

    fn drive_client(&mut self, sim: &mut Sim, handle: TcpHandle, conn: &mut ClientConn) -> Next {
        let now = sim.now();
        let seed = self.seed;
        let total = HEADER + conn.plan.up;
        // Upload: the header, then the pattern.
        while conn.sent < total {
            let n = ((total - conn.sent) as usize).min(CHUNK);
            let chunk = &mut self.buf[..n];
            for (i, b) in chunk.iter_mut().enumerate() {
                let at = conn.sent + i as u64;
                *b = if at < HEADER {
                    conn.id.to_le_bytes()[at as usize]
                } else {
                    pattern(seed, conn.id, Dir::Up, at - HEADER)
                };
            }
            match sim.host_mut(self.client).tcp_send(now, handle, chunk) {
                Ok(n) => conn.sent += n as u64,
                Err(TcpError::WouldBlock) => break,
                Err(e) => {
                    self.client_failed(sim, handle, conn, e);
                    return Next::Drop;
                }
            }
        }
        if conn.sent == total && !conn.shut {
            match sim.host_mut(self.client).tcp_shutdown(now, handle) {
                Ok(()) => conn.shut = true,
                Err(TcpError::InvalidState) => {} // still opening: after the handshake
                Err(e) => {
                    self.client_failed(sim, handle, conn, e);
                    return Next::Drop;
                }
            }
        }
        // Download.
        while !conn.eof {
            match sim
                .host_mut(self.client)
                .tcp_recv(now, handle, &mut self.buf)
            {
                Ok(0) => {
                    conn.eof = true;
                    assert_eq!(
                        conn.received, conn.plan.down,
                        "seed {seed}: connection {} (plan {:?}) ended its download after \
                         {} bytes at {now}",
                        conn.id, conn.plan, conn.received
                    );
                }
                Ok(n) => {
                    let data = &self.buf[..n];
                    assert!(
                        conn.received + n as u64 <= conn.plan.down,
                        "seed {seed}: connection {} (plan {:?}) received {} bytes beyond \
                         its download at {now}",
                        conn.id,
                        conn.plan,
                        conn.received + n as u64 - conn.plan.down
                    );
                    if let Some(at) = mismatch(seed, conn.id, Dir::Down, conn.received, data) {
                        panic!(
                            "seed {seed}: connection {} (plan {:?}): wrong byte at download \
                             offset {at} at {now}",
                            conn.id, conn.plan
                        );
                    }
                    conn.received += n as u64;
                    self.tally.bytes_down += n as u64;
                }
                Err(TcpError::WouldBlock) => break,
                Err(e) => {
                    self.client_failed(sim, handle, conn, e);
                    return Next::Drop;
                }
            }
        }
        if let Abort::Client(at) = conn.plan.abort
            && conn.sent + conn.received >= at
        {
            let _ = sim.host_mut(self.client).tcp_abort(now, handle);
            self.tally.client_aborts += 1;
            return Next::Drop;
        }
        if conn.eof && conn.shut {
            self.tally.client_done += 1;
            match self.leak {
                Leak::Socket if self.tally.client_done == 1 => return Next::Drop,
                Leak::Memory => self.leaked.extend_from_slice(&[0u8; 4096]),
                _ => {}
            }
            let _ = sim.host_mut(self.client).tcp_close(now, handle);
            return Next::Drop;
        }
        Next::Keep
    }

    fn service_server(&mut self, sim: &mut Sim, handle: TcpHandle) {
        let Some(mut conn) = self.servers.remove(&handle) else {
            return;
        };
        match self.drive_server(sim, handle, &mut conn) {
            Next::Keep => {
                self.servers.insert(handle, conn);
            }
            Next::Drop => {}
        }
    }

    fn server_failed(&mut self, sim: &mut Sim, handle: TcpHandle, conn: &ServerConn, e: TcpError) {
        self.tally.server_errors[error_kind(e)] += 1;
        let clean = matches!(
            e,
            TcpError::TimedOut | TcpError::HostUnreachable | TcpError::NetUnreachable
        );
        if let Some((id, plan)) = conn.id
            && plan.abort == Abort::None
            && !clean
        {
            self.tally.unexpected += 1;
            self.tally.note(format!(
                "server of connection {id} (plan {plan:?}, received {}, sent {}) failed at \
                 {}: {e}",
                conn.received,
                conn.sent,
                sim.now()
            ));
        }
        let now = sim.now();
        let _ = sim.host_mut(self.server).tcp_close(now, handle);
    }

    /// Reads the upload (header first) and checks it; `Err` when the connection failed.
    fn server_read(
        &mut self,
        sim: &mut Sim,
        handle: TcpHandle,
        conn: &mut ServerConn,
    ) -> Result<(), TcpError> {
        let now = sim.now();
        let seed = self.seed;
        while !conn.eof {
            let want = match conn.id {
                None => HEADER as usize - conn.header_len,
                Some(_) => self.buf.len(),
            };
            match sim
                .host_mut(self.server)
                .tcp_recv(now, handle, &mut self.buf[..want])
            {
                Ok(0) => {
                    conn.eof = true;
                    let (id, plan) = conn.id.unwrap_or_else(|| {
                        panic!(
                            "seed {seed}: an upload ended after {} header bytes at {now}",
                            conn.header_len
                        )
                    });
                    assert_eq!(
                        conn.received, plan.up,
                        "seed {seed}: connection {id} (plan {plan:?}) ended its upload after \
                         {} bytes at {now}",
                        conn.received
                    );
                }
                Ok(n) => match conn.id {
                    None => {
                        conn.header[conn.header_len..conn.header_len + n]
                            .copy_from_slice(&self.buf[..n]);
                        conn.header_len += n;
                        if conn.header_len == HEADER as usize {
                            let id = u64::from_le_bytes(conn.header);
                            assert!(
                                id < self.next_id,
                                "seed {seed}: an upload names connection {id}, never opened"
                            );
                            conn.id = Some((id, Plan::of(seed, id)));
                        }
                    }
                    Some((id, plan)) => {
                        let data = &self.buf[..n];
                        assert!(
                            conn.received + n as u64 <= plan.up,
                            "seed {seed}: connection {id} (plan {plan:?}) uploaded {} bytes \
                             too many at {now}",
                            conn.received + n as u64 - plan.up
                        );
                        if let Some(at) = mismatch(seed, id, Dir::Up, conn.received, data) {
                            panic!(
                                "seed {seed}: connection {id} (plan {plan:?}): wrong byte at \
                                 upload offset {at} at {now}"
                            );
                        }
                        conn.received += n as u64;
                        self.tally.bytes_up += n as u64;
                    }
                },
                Err(TcpError::WouldBlock) => break,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn drive_server(&mut self, sim: &mut Sim, handle: TcpHandle, conn: &mut ServerConn) -> Next {
        let now = sim.now();
        let seed = self.seed;
        if let Err(e) = self.server_read(sim, handle, conn) {
            self.server_failed(sim, handle, conn, e);
            return Next::Drop;
        }
        let Some((id, plan)) = conn.id else {
            return Next::Keep;
        };
        while conn.sent < plan.down {
            let n = ((plan.down - conn.sent) as usize).min(CHUNK);
            fill(seed, id, Dir::Down, conn.sent, &mut self.buf[..n]);
            match sim
                .host_mut(self.server)
                .tcp_send(now, handle, &self.buf[..n])
            {
                Ok(n) => conn.sent += n as u64,
                Err(TcpError::WouldBlock) => break,
                Err(e) => {
                    self.server_failed(sim, handle, conn, e);
                    return Next::Drop;
                }
            }
        }
        if let Abort::Server(at) = plan.abort
            && conn.received + conn.sent >= at
        {
            let _ = sim.host_mut(self.server).tcp_abort(now, handle);
            self.tally.server_aborts += 1;
            return Next::Drop;
        }
        if conn.eof && conn.sent == plan.down {
            self.tally.server_done += 1;
            let _ = sim.host_mut(self.server).tcp_close(now, handle);
            return Next::Drop;
        }
        Next::Keep
    }

    /// Abort connections older than `limit`: they made no end (a missed wake-up, a
    /// peer that vanished without the keep-alive noticing).
    fn watchdog(&mut self, sim: &mut Sim, limit: Duration) {
        let now = sim.now();
        let old = |opened: Instant| now.saturating_duration_since(opened) > limit;
        let stale: Vec<TcpHandle> = self
            .clients
            .iter()
            .filter(|(_, c)| old(c.opened))
            .map(|(&h, _)| h)
            .collect();
        for h in stale {
            let c = self.clients.remove(&h).expect("listed");
            self.tally.stalled += 1;
            self.tally.note(format!(
                "client of connection {} (plan {:?}, sent {}, received {}) still open at {now}",
                c.id, c.plan, c.sent, c.received
            ));
            let _ = sim.host_mut(self.client).tcp_abort(now, h);
        }
        let stale: Vec<TcpHandle> = self
            .servers
            .iter()
            .filter(|(_, c)| old(c.opened))
            .map(|(&h, _)| h)
            .collect();
        for h in stale {
            let c = self.servers.remove(&h).expect("listed");
            self.tally.stalled += 1;
            self.tally.note(format!(
                "server of connection {:?} (received {}, sent {}) still open at {now}",
                c.id.map(|(id, _)| id),
                c.received,
                c.sent
            ));
            let _ = sim.host_mut(self.server).tcp_abort(now, h);
        }
    }
}

// ---------------------------------------------------------------------------------
// What is left at the end
// ---------------------------------------------------------------------------------

/// The bytes this thread has allocated less what the stacks and links keep for reuse
/// (bounded caches that fill and drain with the traffic, [`Sim::cached_bytes`]): what
/// must come back to its baseline when the network is quiet again.
fn net_live(sim: &Sim) -> isize {
    alloc_count::live_bytes() - sim.cached_bytes() as isize
}

/// With `SOAK_TRACE=<connection id>` in the environment, the soak prints that
/// connection's segments as they are sent and delivered, and the link's changes while
/// it is open: the way to look into a failure the report names (the run replays from
/// its seed).
fn trace_observer(port: Rc<Cell<u16>>) -> FrameObserver {
    Box::new(move |ev: &FrameEvent<'_>| {
        let p = port.get();
        let Ok(eth) = ethernet::Frame::new_checked(ev.frame) else {
            return;
        };
        let Ok(ip) = ipv4::Packet::new_checked(eth.payload()) else {
            return;
        };
        let Ok(seg) = tcp::Packet::new_checked(ip.payload()) else {
            return;
        };
        if p == 0 || (seg.src_port() != p && seg.dst_port() != p) {
            return;
        }
        let options = &ip.payload()[20..seg.header_len()];
        eprintln!(
            "trace {} {:?} by side {}: seq {} ack {} flags {:?} len {} window {} options {options:02x?}",
            ev.time,
            ev.kind,
            ev.from_side,
            seg.seq_number(),
            seg.ack_number(),
            seg.flags(),
            seg.payload().len(),
            seg.window_len()
        );
    })
}

/// Sockets and timers a host holds, read from its stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Residue {
    sockets: usize,
    timers: usize,
    /// The stack's next deadline (ARP, reassembly, TCP) exists.
    deadline: bool,
}

fn residue(sim: &mut Sim, host: HostId) -> Residue {
    let deadline = sim.host(host).poll_timeout().is_some();
    let stack = sim.host(host);
    Residue {
        sockets: stack.tcp_socket_count(),
        timers: stack.tcp_timer_count(),
        deadline,
    }
}

/// Checks the quiet state after a run: only the listener left, no timer, memory back
/// to the baseline (within `allowance` bytes). Returns the problems found.
fn check_quiet(
    client: Residue,
    server: Residue,
    baseline: isize,
    live: isize,
    allowance: isize,
) -> Vec<String> {
    let mut problems = Vec::new();
    if client.sockets != 0 {
        problems.push(format!("the client holds {} sockets", client.sockets));
    }
    if server.sockets != 1 {
        problems.push(format!(
            "the server holds {} sockets (the listener alone expected)",
            server.sockets
        ));
    }
    if client.timers + server.timers != 0 || client.deadline || server.deadline {
        problems.push(format!(
            "timers left: client {client:?}, server {server:?} (none expected)"
        ));
    }
    if live - baseline > allowance {
        problems.push(format!(
            "memory grew by {} bytes from the quiet baseline ({baseline} -> {live}; \
             allowance {allowance})",
            live - baseline
        ));
    }
    problems
}

// ---------------------------------------------------------------------------------
// The soak
// ---------------------------------------------------------------------------------

struct SoakConfig {
    seed: u64,
    /// Virtual time with traffic, warm-up included.
    duration: Duration,
    /// Traffic before the quiet point that sets the memory baseline.
    warmup: Duration,
    /// A quiet period (no new connections, a clean link) after warm-up and at the end.
    quiet: Duration,
    /// Mean time between connection attempts (exponentially distributed).
    mean_gap: Duration,
    /// Connections the client keeps open at most.
    max_conns: usize,
    /// The link changes after a uniform 1 to this many seconds.
    change_every_max_s: u64,
    leak: Leak,
}

impl SoakConfig {
    fn new(seed: u64, duration: Duration) -> SoakConfig {
        SoakConfig {
            seed,
            duration,
            warmup: Duration::from_secs(600),
            quiet: Duration::from_secs(600),
            mean_gap: Duration::from_millis(500),
            max_conns: 32,
            change_every_max_s: 8,
            leak: Leak::None,
        }
    }
}

const STACK_BUFFERS: usize = 128 * 1024;
/// A connection making no end for this long is aborted and counted as stalled.
const STALL_LIMIT: Duration = Duration::from_secs(1800);

fn stack_config() -> StackConfig {
    let mut config = StackConfig::default();
    config.tcp.send_buffer = STACK_BUFFERS;
    config.tcp.recv_buffer = STACK_BUFFERS;
    // A peer that vanished (its RST lost, ours unanswered) is found within two minutes.
    config.tcp.keepalive = Some(Keepalive {
        idle: Duration::from_secs(60),
        interval: Duration::from_secs(10),
        count: 6,
    });
    config
}

/// One memory sample, taken every virtual minute of traffic after warm-up.
#[derive(Debug, Clone, Copy)]
struct Sample {
    live: isize,
    /// Connections the applications hold.
    conns: usize,
    /// Sockets in both stacks (TIME-WAIT and closing connections included).
    sockets: usize,
}

#[derive(Debug)]
struct SoakReport {
    seed: u64,
    tally: Tally,
    steps: u64,
    retransmitted: u64,
    timeouts: u64,
    segments: u64,
    frames_lost: u64,
    frames_corrupted: u64,
    frames_duplicated: u64,
    frames_reordered: u64,
    baseline: isize,
    live_end: isize,
    peak: isize,
    samples: Vec<Sample>,
    client: Residue,
    server: Residue,
    still_open: usize,
    /// What the connections still open at the end were doing.
    open_detail: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Warmup,
    QuietBaseline,
    Traffic,
    QuietEnd,
}

fn setup(seed: u64) -> (Sim, HostId, HostId, LinkId, TcpHandle) {
    setup_with(seed, stack_config(), clean_link())
}

/// A client and a server joined by `link`, the server listening.
fn setup_with(
    seed: u64,
    stack: StackConfig,
    link: LinkConfig,
) -> (Sim, HostId, HostId, LinkId, TcpHandle) {
    let mut sim = Sim::new(seed);
    let client = sim.add_host("client", stack.clone());
    let server = sim.add_host("server", stack);
    let link = sim
        .connect(
            client,
            Cidr::new(CLIENT, 24).unwrap(),
            server,
            Cidr::new(SERVER, 24).unwrap(),
            link,
        )
        .unwrap();
    let listener = sim
        .host_mut(server)
        .tcp_listen(SocketAddrV4::new(SERVER, PORT), 128)
        .unwrap();
    (sim, client, server, link, listener)
}

fn soak(config: &SoakConfig) -> SoakReport {
    let seed = config.seed;
    let (mut sim, client, server, link, listener) = setup(seed);
    let mut rng = Rng(mix(seed ^ 0x534f_414b));
    let minutes = config.duration.as_millis() / 60_000 + 2;
    let mut apps = Apps {
        seed,
        client,
        server,
        listener,
        clients: HashMap::with_capacity(4 * config.max_conns),
        servers: HashMap::with_capacity(4 * config.max_conns),
        next_id: 0,
        buf: vec![0; CHUNK],
        tally: Tally::default(),
        leak: config.leak,
        leaked: Vec::new(),
        trace_id: std::env::var("SOAK_TRACE").ok().map(|s| s.parse().unwrap()),
        trace_port: Rc::new(Cell::new(0)),
    };
    if apps.trace_id.is_some() {
        sim.set_observer(Some(trace_observer(apps.trace_port.clone())));
    }
    let mut samples: Vec<Sample> = Vec::with_capacity(minutes as usize);
    let start = Instant::ZERO;
    let warm_end = start + config.warmup;
    let baseline_at = warm_end + config.quiet;
    let traffic_end = baseline_at + config.duration.saturating_sub(config.warmup);
    let end = traffic_end + config.quiet;
    let mut phase = Phase::Warmup;
    let mut next_open = start;
    let mut next_change = start;
    let mut next_sample = baseline_at + Duration::from_secs(60);
    let mut next_watch = start + Duration::from_secs(60);
    let mut baseline = 0;
    let mut last_activity = (u64::MAX, u64::MAX);
    let gap_ms = config.mean_gap.as_millis() as f64;

    let result = sim.run(u64::MAX, end + Duration::from_secs(1), |sim| {
        let now = sim.now();
        // Phase changes: the quiet periods stop new connections and clean the link.
        let want = if now < warm_end {
            Phase::Warmup
        } else if now < baseline_at {
            Phase::QuietBaseline
        } else if now < traffic_end {
            Phase::Traffic
        } else {
            Phase::QuietEnd
        };
        if want != phase {
            if phase == Phase::QuietBaseline {
                baseline = net_live(sim);
                alloc_count::reset_peak();
                next_open = now;
                next_change = now;
            }
            if matches!(want, Phase::QuietBaseline | Phase::QuietEnd) {
                for side in 0..2 {
                    sim.set_link_config(link, side, clean_link()).unwrap();
                }
            }
            phase = want;
        }
        let busy = matches!(phase, Phase::Warmup | Phase::Traffic);
        if busy && now >= next_change {
            for side in 0..2 {
                let config = random_link(&mut rng);
                if apps.trace_port.get() != 0 {
                    eprintln!("trace {now} link side {side}: {config:?}");
                }
                sim.set_link_config(link, side, config).unwrap();
            }
            apps.tally.link_changes += 1;
            let secs = 1 + rng.below(config.change_every_max_s);
            next_change = now + Duration::from_millis(secs * 1000 - rng.below(1000));
        }
        let activity = (sim.activity(client), sim.activity(server));
        if activity != last_activity {
            last_activity = activity;
            apps.poll(sim);
        }
        if busy && now >= next_open {
            if apps.clients.len() < config.max_conns {
                apps.open(sim);
                apps.poll(sim);
            } else {
                apps.tally.skipped += 1;
            }
            let gap = -gap_ms * (1.0 - rng.unit()).ln();
            next_open = now + Duration::from_micros((gap * 1000.0) as u64 + 1);
        }
        if now >= next_watch {
            apps.watchdog(sim, STALL_LIMIT);
            next_watch = now + Duration::from_secs(60);
        }
        if phase == Phase::Traffic && now >= next_sample {
            let sockets =
                sim.host_mut(client).tcp_socket_count() + sim.host_mut(server).tcp_socket_count();
            samples.push(Sample {
                live: net_live(sim),
                conns: apps.clients.len() + apps.servers.len(),
                sockets,
            });
            next_sample += Duration::from_secs(60);
        }
        if now >= end {
            return Flow::Done;
        }
        let mut wake = end.min(next_watch);
        if busy {
            wake = wake.min(next_open).min(next_change);
        }
        if phase == Phase::Traffic {
            wake = wake.min(next_sample);
        }
        for at in [warm_end, baseline_at, traffic_end] {
            if at > now {
                wake = wake.min(at);
            }
        }
        Flow::WakeAt(wake)
    });
    let summary = result.unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let live_end = net_live(&sim);
    let peak = alloc_count::peak_bytes();
    let still_open = apps.clients.len() + apps.servers.len();
    let mut open_detail = Vec::new();
    for (&h, c) in &apps.clients {
        open_detail.push(format!(
            "client of connection {} (plan {:?}, opened {}, sent {}, received {}, shut {}, \
             eof {}): {:?}",
            c.id,
            c.plan,
            c.opened,
            c.sent,
            c.received,
            c.shut,
            c.eof,
            sim.host(client).tcp_info(h)
        ));
    }
    for (&h, c) in &apps.servers {
        open_detail.push(format!(
            "server of connection {:?} (opened {}, received {}, sent {}, eof {}): {:?}",
            c.id,
            c.opened,
            c.received,
            c.sent,
            c.eof,
            sim.host(server).tcp_info(h)
        ));
    }
    let client_residue = residue(&mut sim, client);
    let server_residue = residue(&mut sim, server);
    let stats = |h: HostId| sim.host(h).tcp_stats().clone();
    let (cs, ss) = (stats(client), stats(server));
    let links = [sim.link_stats(link, 0), sim.link_stats(link, 1)];
    let sum = |f: fn(&impnet_phy::LinkStats) -> u64| links.iter().map(|s| f(s)).sum::<u64>();
    SoakReport {
        seed,
        steps: summary.steps,
        retransmitted: cs.retransmitted + ss.retransmitted,
        timeouts: cs.timeouts + ss.timeouts,
        segments: cs.segments_out + ss.segments_out,
        frames_lost: sum(|s| s.dropped_loss + s.dropped_queue),
        frames_corrupted: sum(|s| s.corrupted),
        frames_duplicated: sum(|s| s.duplicated),
        frames_reordered: sum(|s| s.reordered),
        tally: std::mem::take(&mut apps.tally),
        baseline,
        live_end,
        peak,
        samples,
        client: client_residue,
        server: server_residue,
        still_open,
        open_detail,
    }
}

/// Memory allowed above the quiet baseline at the end (both counted without the bounded
/// caches, see [`net_live`]): the capacities of tables that a busier moment after the
/// baseline grew and that keep their high-water mark, such as the socket table (about
/// 1.2 KiB a slot, doubling: 128 more slots are 150 KiB). Measured: the soak ends
/// 0.14 to 0.19 MiB above its baseline after 1, 8 and 24 hours, the cycles 0.16 MiB
/// after 100,000 cycles and still after 2,000,000. A leak of 100 bytes per connection
/// would be 0.7 MiB after the one-hour run, and 17 MiB after the 24-hour one.
const QUIET_ALLOWANCE: isize = 512 * 1024;

/// Everything the soak must show; the problems found (empty when it passed).
fn soak_problems(config: &SoakConfig, r: &SoakReport) -> Vec<String> {
    let t = &r.tally;
    let mut problems = check_quiet(r.client, r.server, r.baseline, r.live_end, QUIET_ALLOWANCE);
    if r.still_open != 0 {
        problems.push(format!(
            "{} connections still open at the end: {:#?}",
            r.still_open, r.open_detail
        ));
    }
    if t.unexpected != 0 || t.stalled != 0 {
        problems.push(format!(
            "{} unexpected errors and {} stalled connections; the first: {}",
            t.unexpected,
            t.stalled,
            t.first_problem.as_deref().unwrap_or("-")
        ));
    }
    // Nearly every connection nobody aborts must complete: only a path that stays
    // broken through every retransmission may fail one.
    let unaborted = t.opened - t.planned_client_aborts - t.planned_server_aborts;
    if t.client_done * 1000 < unaborted * 995 {
        problems.push(format!(
            "only {} of {unaborted} connections without an abort completed",
            t.client_done
        ));
    }
    if t.server_done < t.client_done {
        problems.push(format!(
            "{} downloads completed but only {} uploads",
            t.client_done, t.server_done
        ));
    }
    // Memory flat: the late samples do not trend above the early ones. The samples
    // swing with the connections open at that minute (each up to its two buffers on
    // both hosts), so the allowance is four connections' worth.
    let n = r.samples.len();
    if n >= 6 {
        let third = n / 3;
        let median = |s: &[Sample]| {
            let mut v: Vec<isize> = s.iter().map(|s| s.live).collect();
            v.sort_unstable();
            v[v.len() / 2]
        };
        let early = median(&r.samples[..third]);
        let late = median(&r.samples[n - third..]);
        let allowance = (4 * 4 * STACK_BUFFERS) as isize;
        if late - early > allowance {
            problems.push(format!(
                "memory trends up: median {early} bytes in the first third of the run, \
                 {late} in the last (allowance {allowance})"
            ));
        }
    }
    // Peak: the quiet baseline, every connection's two rings on both hosts, and 14 MiB
    // for the caches (on each host 64 small and 8 large spare rings, 128 pool buffers:
    // 4 MiB) and the link (each direction a queue of at most 1 MiB, as much in flight,
    // 256 spare frame buffers).
    let bound = r.baseline + (config.max_conns * 2 * 2 * STACK_BUFFERS) as isize + 14 * (1 << 20);
    if r.peak > bound {
        problems.push(format!("peak memory {} above its bound {bound}", r.peak));
    }
    problems
}

fn print_report(name: &str, r: &SoakReport, wall: std::time::Duration) {
    let t = &r.tally;
    let mut out = String::new();
    let _ = writeln!(out, "{name} (seed {}):", r.seed);
    let _ = writeln!(
        out,
        "  connections: {} opened ({} skipped at the cap), {} completed both ways \
         ({} uploads), aborts {} by the client + {} by the server (planned {} + {}), \
         stalled {}, unexpected errors {}",
        t.opened,
        t.skipped,
        t.client_done,
        t.server_done,
        t.client_aborts,
        t.server_aborts,
        t.planned_client_aborts,
        t.planned_server_aborts,
        t.stalled,
        t.unexpected
    );
    let errors = |e: &[u64; 5]| {
        ERROR_KINDS
            .iter()
            .zip(e)
            .filter(|&(_, &n)| n > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(
        out,
        "  errors seen: client [{}], server [{}]",
        errors(&t.client_errors),
        errors(&t.server_errors)
    );
    let _ = writeln!(
        out,
        "  bytes checked: {:.1} MiB up, {:.1} MiB down; {} link changes",
        t.bytes_up as f64 / MIB,
        t.bytes_down as f64 / MIB,
        t.link_changes
    );
    let _ = writeln!(
        out,
        "  segments sent {}, retransmitted {} ({:.2}%), RTOs {}; frames lost {}, \
         corrupted {}, duplicated {}, reordered {}; {} events",
        r.segments,
        r.retransmitted,
        100.0 * r.retransmitted as f64 / r.segments.max(1) as f64,
        r.timeouts,
        r.frames_lost,
        r.frames_corrupted,
        r.frames_duplicated,
        r.frames_reordered,
        r.steps
    );
    let lives: Vec<isize> = r.samples.iter().map(|s| s.live).collect();
    let (lo, hi) = (
        lives.iter().min().copied().unwrap_or(0),
        lives.iter().max().copied().unwrap_or(0),
    );
    let most = r.samples.iter().map(|s| s.conns).max().unwrap_or(0);
    let sockets = r.samples.iter().map(|s| s.sockets).max().unwrap_or(0);
    let _ = writeln!(
        out,
        "  memory: baseline {:.2} MiB, end {:.2} MiB ({:+} bytes), peak {:.2} MiB; \
         per-minute samples {} from {:.2} to {:.2} MiB (at most {most} connections, {sockets} sockets)",
        r.baseline as f64 / MIB,
        r.live_end as f64 / MIB,
        r.live_end - r.baseline,
        r.peak as f64 / MIB,
        r.samples.len(),
        lo as f64 / MIB,
        hi as f64 / MIB
    );
    let _ = writeln!(
        out,
        "  end: client {:?}, server {:?}; wall time {:.1} s",
        r.client,
        r.server,
        wall.as_secs_f64()
    );
    println!("{out}");
}

fn run_soak(name: &str, config: &SoakConfig) -> Vec<String> {
    let wall = std::time::Instant::now();
    let report = soak(config);
    print_report(name, &report, wall.elapsed());
    soak_problems(config, &report)
}

#[test]
fn soak_one_hour() {
    let config = SoakConfig::new(13, Duration::from_secs(3600));
    let problems = run_soak("soak_one_hour", &config);
    assert!(problems.is_empty(), "seed {}: {problems:#?}", config.seed);
}

#[test]
#[ignore = "24 hours of virtual time: minutes of wall time in release"]
fn soak_24_hours() {
    let config = SoakConfig::new(2413, Duration::from_secs(24 * 3600));
    let problems = run_soak("soak_24_hours", &config);
    assert!(problems.is_empty(), "seed {}: {problems:#?}", config.seed);
}

/// The checks can fail: a handle the application never closes, and memory kept per
/// connection, are both caught.
#[test]
fn soak_catches_a_leaked_socket_and_leaked_memory() {
    let mut config = SoakConfig::new(7, Duration::from_secs(300));
    config.warmup = Duration::from_secs(120);
    config.quiet = Duration::from_secs(300);
    config.leak = Leak::Socket;
    let problems = run_soak("leaked socket", &config);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("the client holds 1 sockets")),
        "a leaked socket went unnoticed: {problems:#?}"
    );
    config.leak = Leak::Memory;
    let problems = run_soak("leaked memory", &config);
    assert!(
        problems.iter().any(|p| p.contains("memory grew")),
        "leaked memory went unnoticed: {problems:#?}"
    );
}

/// `Sim::set_link_config` takes effect for frames sent from then on.
#[test]
fn set_link_config_changes_the_link_from_now_on() {
    let (mut sim, client, server, link, _) = setup(5);
    sim.run_until(Instant::ZERO + Duration::from_secs(1), 1_000_000)
        .unwrap();
    let lossy = LinkConfig {
        loss: 1.0,
        ..clean_link()
    };
    sim.set_link_config(link, 0, lossy).unwrap();
    assert_eq!(sim.link_model(link, 0).config().loss, 1.0);
    assert!(
        sim.set_link_config(link, 0, clean_link().with_loss(2.0))
            .is_err()
    );
    let now = sim.now();
    let any = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0);
    let h = sim
        .host_mut(client)
        .tcp_connect(now, any, remote())
        .unwrap();
    // `run_until` only steps to events; the SYN's timer starts when it leaves.
    sim.transmit_now().unwrap();
    sim.run_until(now + Duration::from_millis(500), 1_000_000)
        .unwrap();
    // Every SYN (and the ARP request before it) lost: nothing reached the server.
    assert_eq!(sim.link_stats(link, 0).delivered, 0);
    assert_eq!(sim.host(server).tcp_stats().segments_in, 0);
    assert!(sim.link_stats(link, 0).dropped_loss > 0);
    sim.set_link_config(link, 0, clean_link()).unwrap();
    sim.run_until(now + Duration::from_secs(5), 1_000_000)
        .unwrap();
    let state = sim.host(client).tcp_info(h).map(|i| i.state);
    assert_eq!(state, Some(impnet_core::tcp::TcpState::Established));
}

// ---------------------------------------------------------------------------------
// Open/close cycles
// ---------------------------------------------------------------------------------

/// Request and reply size of a cycle (the request starts with the cycle's id).
const CYCLE_BYTES: usize = 64;

/// How a cycle ends, by its id: the client closes first (its side waits in TIME-WAIT),
/// the server closes first (the server's side does), or the client aborts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    ClientFirst,
    ServerFirst,
    Abort,
}

fn ending(id: u64) -> Ending {
    match id % 16 {
        15 => Ending::Abort,
        n if n % 2 == 0 => Ending::ClientFirst,
        _ => Ending::ServerFirst,
    }
}

struct CycleClient {
    id: u64,
    sent: usize,
    received: usize,
    closed: bool,
}

struct CycleServer {
    header: [u8; 8],
    id: Option<u64>,
    received: usize,
    sent: usize,
    closed: bool,
}

#[derive(Debug, Default)]
struct CycleTally {
    started: u64,
    done: u64,
    aborted: u64,
    /// Errors other than the resets the aborts cause.
    unexpected: u64,
    first_problem: Option<String>,
}

struct Cycler {
    seed: u64,
    client: HostId,
    server: HostId,
    listener: TcpHandle,
    clients: HashMap<TcpHandle, CycleClient>,
    servers: HashMap<TcpHandle, CycleServer>,
    next_id: u64,
    /// Start no cycle beyond this id (the phase's end).
    limit: u64,
    buf: [u8; CYCLE_BYTES],
    tally: CycleTally,
    leak: Leak,
}

impl Cycler {
    fn start(&mut self, sim: &mut Sim) {
        let now = sim.now();
        let any = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0);
        let id = self.next_id;
        self.next_id += 1;
        self.tally.started += 1;
        match sim.host_mut(self.client).tcp_connect(now, any, remote()) {
            Ok(h) => {
                self.clients.insert(
                    h,
                    CycleClient {
                        id,
                        sent: 0,
                        received: 0,
                        closed: false,
                    },
                );
                self.client_io(sim, h);
            }
            Err(e) => self.problem(format!("cycle {id}: connect failed at {now}: {e}")),
        }
    }

    fn problem(&mut self, p: String) {
        self.tally.unexpected += 1;
        if self.tally.first_problem.is_none() {
            self.tally.first_problem = Some(p);
        }
    }

    fn poll(&mut self, sim: &mut Sim) {
        while let Some(event) = sim.host_mut(self.server).poll_event() {
            let Event::Tcp(event) = event else { continue };
            match event {
                TcpEvent::Readable(h) if h == self.listener => {
                    while let Ok(h) = sim.host_mut(self.server).tcp_accept(self.listener) {
                        self.servers.insert(
                            h,
                            CycleServer {
                                header: [0; 8],
                                id: None,
                                received: 0,
                                sent: 0,
                                closed: false,
                            },
                        );
                        self.server_io(sim, h);
                    }
                }
                TcpEvent::Readable(h) | TcpEvent::Writable(h) | TcpEvent::Closed(h) => {
                    self.server_io(sim, h);
                }
            }
        }
        while let Some(event) = sim.host_mut(self.client).poll_event() {
            let Event::Tcp(event) = event else { continue };
            let (TcpEvent::Readable(h) | TcpEvent::Writable(h) | TcpEvent::Closed(h)) = event;
            self.client_io(sim, h);
        }
    }

    fn client_io(&mut self, sim: &mut Sim, h: TcpHandle) {
        let Some(mut c) = self.clients.remove(&h) else {
            return;
        };
        let now = sim.now();
        let seed = self.seed;
        let stack = sim.host_mut(self.client);
        let mut failed = None;
        if c.sent < CYCLE_BYTES {
            let mut request = [0u8; CYCLE_BYTES];
            request[..8].copy_from_slice(&c.id.to_le_bytes());
            fill(seed, c.id, Dir::Up, 8, &mut request[8..]);
            match stack.tcp_send(now, h, &request[c.sent..]) {
                Ok(n) => c.sent += n,
                Err(TcpError::WouldBlock) => {}
                Err(e) => failed = Some(e),
            }
        }
        while failed.is_none() && !c.closed {
            match stack.tcp_recv(now, h, &mut self.buf[..CYCLE_BYTES - c.received]) {
                Ok(0) if c.received == CYCLE_BYTES => {
                    // The server closed first: close ours, which then goes at once.
                    let _ = stack.tcp_close(now, h);
                    c.closed = true;
                }
                Ok(0) => {
                    panic!(
                        "seed {seed}: cycle {} ended after {} reply bytes at {now}",
                        c.id, c.received
                    )
                }
                Ok(n) => {
                    if let Some(at) =
                        mismatch(seed, c.id, Dir::Down, c.received as u64, &self.buf[..n])
                    {
                        panic!(
                            "seed {seed}: cycle {}: wrong reply byte {at} at {now}",
                            c.id
                        );
                    }
                    c.received += n;
                    if c.received == CYCLE_BYTES {
                        match ending(c.id) {
                            Ending::ClientFirst => {
                                if !(self.leak == Leak::Socket && c.id == 100) {
                                    let _ = stack.tcp_close(now, h);
                                }
                                c.closed = true;
                            }
                            Ending::Abort => {
                                let _ = stack.tcp_abort(now, h);
                                self.tally.aborted += 1;
                                c.closed = true;
                            }
                            Ending::ServerFirst => {}
                        }
                    }
                }
                Err(TcpError::WouldBlock) => break,
                Err(e) => failed = Some(e),
            }
        }
        if let Some(e) = failed {
            let _ = stack.tcp_close(now, h);
            self.problem(format!("cycle {} failed on the client at {now}: {e}", c.id));
            c.closed = true;
        }
        if c.closed {
            self.tally.done += 1;
            if self.next_id < self.limit {
                self.start(sim);
            }
            return;
        }
        self.clients.insert(h, c);
    }

    fn server_io(&mut self, sim: &mut Sim, h: TcpHandle) {
        let Some(mut s) = self.servers.remove(&h) else {
            return;
        };
        let now = sim.now();
        let seed = self.seed;
        let stack = sim.host_mut(self.server);
        let mut failed = None;
        let mut eof = false;
        while failed.is_none() && !eof {
            let want = CYCLE_BYTES.saturating_sub(s.received).max(1);
            match stack.tcp_recv(now, h, &mut self.buf[..want]) {
                Ok(0) => eof = true,
                Ok(n) => {
                    assert!(
                        s.received + n <= CYCLE_BYTES,
                        "seed {seed}: cycle {:?} sent more than its request",
                        s.id
                    );
                    for (i, &b) in self.buf[..n].iter().enumerate() {
                        let at = s.received + i;
                        if at < 8 {
                            s.header[at] = b;
                            if at == 7 {
                                s.id = Some(u64::from_le_bytes(s.header));
                            }
                            continue;
                        }
                        let id = s.id.expect("the header came first");
                        assert!(
                            b == pattern(seed, id, Dir::Up, at as u64),
                            "seed {seed}: cycle {id}: wrong request byte {at} at {now}"
                        );
                    }
                    s.received += n;
                }
                Err(TcpError::WouldBlock) => break,
                Err(e) => failed = Some(e),
            }
        }
        if let Some(e) = failed {
            let _ = stack.tcp_close(now, h);
            let aborted = s.id.is_some_and(|id| ending(id) == Ending::Abort);
            if !(aborted && e == TcpError::ConnectionReset) {
                self.problem(format!(
                    "cycle {:?} failed on the server at {now}: {e}",
                    s.id
                ));
            }
            return;
        }
        if let Some(id) = s.id
            && s.received == CYCLE_BYTES
            && s.sent < CYCLE_BYTES
        {
            let mut reply = [0u8; CYCLE_BYTES];
            fill(seed, id, Dir::Down, 0, &mut reply);
            match stack.tcp_send(now, h, &reply[s.sent..]) {
                Ok(n) => s.sent += n,
                Err(TcpError::WouldBlock) => {}
                Err(e) => {
                    let _ = stack.tcp_close(now, h);
                    self.problem(format!("cycle {id} failed on the server at {now}: {e}"));
                    return;
                }
            }
        }
        let first = s.id.is_some_and(|id| ending(id) == Ending::ServerFirst);
        if !s.closed && s.sent == CYCLE_BYTES && (eof || first) {
            let _ = stack.tcp_close(now, h);
            s.closed = true;
        }
        if s.closed {
            return;
        }
        self.servers.insert(h, s);
    }
}

struct CycleConfig {
    seed: u64,
    /// Cycles measured (after the warm-up's).
    cycles: u64,
    /// Cycles before the quiet point that sets the memory baseline: enough for the
    /// TIME-WAIT population (2*MSL = 60 s of cycles) to reach its steady size.
    warmup: u64,
    /// Cycles running at once.
    parallel: usize,
    leak: Leak,
}

#[derive(Debug)]
struct CycleReport {
    seed: u64,
    tally: CycleTally,
    steps: u64,
    end: Instant,
    baseline: isize,
    live_end: isize,
    peak: isize,
    /// Most sockets both stacks held at once (sampled every virtual second).
    max_sockets: usize,
    client: Residue,
    server: Residue,
    still_open: usize,
}

/// The quiet period between phases: TIME-WAIT (2*MSL, 60 s) and more.
const CYCLE_QUIET: Duration = Duration::from_secs(180);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CyclePhase {
    Start,
    Warmup,
    QuietBaseline(Instant),
    Cycles,
    QuietEnd(Instant),
}

fn open_close(config: &CycleConfig) -> CycleReport {
    let seed = config.seed;
    // 10 ms each way: a cycle takes a few round trips, so with `parallel` cycles at once
    // about a hundred start a second and the TIME-WAIT population stays well within the
    // client's 16,384 ephemeral ports.
    let link = LinkConfig {
        rate_bps: 1_000_000_000,
        delay: Duration::from_millis(10),
        ..LinkConfig::default()
    };
    let (mut sim, client, server, _, listener) = setup_with(seed, StackConfig::default(), link);
    let mut cycler = Cycler {
        seed,
        client,
        server,
        listener,
        clients: HashMap::with_capacity(4 * config.parallel),
        servers: HashMap::with_capacity(4 * config.parallel),
        next_id: 0,
        limit: config.warmup,
        buf: [0; CYCLE_BYTES],
        tally: CycleTally::default(),
        leak: config.leak,
    };
    let mut phase = CyclePhase::Start;
    let mut baseline = 0;
    let mut max_sockets = 0;
    let mut next_sample = Instant::ZERO;
    let mut last_activity = (u64::MAX, u64::MAX);
    let result = sim.run(
        u64::MAX,
        Instant::from_millis(u64::MAX / 2_000_000),
        |sim| {
            let now = sim.now();
            let activity = (sim.activity(client), sim.activity(server));
            if activity != last_activity {
                last_activity = activity;
                cycler.poll(sim);
            }
            if now >= next_sample {
                let sockets = sim.host_mut(client).tcp_socket_count()
                    + sim.host_mut(server).tcp_socket_count();
                max_sockets = max_sockets.max(sockets);
                next_sample = now + Duration::from_secs(1);
            }
            let idle = cycler.clients.is_empty() && cycler.next_id >= cycler.limit;
            match phase {
                CyclePhase::Start => {
                    for _ in 0..config.parallel {
                        cycler.start(sim);
                    }
                    phase = CyclePhase::Warmup;
                }
                CyclePhase::Warmup if idle => phase = CyclePhase::QuietBaseline(now + CYCLE_QUIET),
                CyclePhase::QuietBaseline(until) if now >= until => {
                    baseline = net_live(sim);
                    alloc_count::reset_peak();
                    cycler.limit = config.warmup + config.cycles;
                    for _ in 0..config.parallel {
                        cycler.start(sim);
                    }
                    phase = CyclePhase::Cycles;
                }
                CyclePhase::Cycles if idle => phase = CyclePhase::QuietEnd(now + CYCLE_QUIET),
                CyclePhase::QuietEnd(until) if now >= until => return Flow::Done,
                _ => {}
            }
            match phase {
                CyclePhase::QuietBaseline(until) | CyclePhase::QuietEnd(until) => {
                    Flow::WakeAt(until.min(next_sample))
                }
                _ => Flow::WakeAt(next_sample),
            }
        },
    );
    let summary = result.unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let live_end = net_live(&sim);
    let peak = alloc_count::peak_bytes();
    CycleReport {
        seed,
        steps: summary.steps,
        end: summary.end,
        baseline,
        live_end,
        peak,
        max_sockets,
        client: residue(&mut sim, client),
        server: residue(&mut sim, server),
        still_open: cycler.clients.len() + cycler.servers.len(),
        tally: std::mem::take(&mut cycler.tally),
    }
}

fn cycle_problems(config: &CycleConfig, r: &CycleReport) -> Vec<String> {
    let t = &r.tally;
    let mut problems = check_quiet(r.client, r.server, r.baseline, r.live_end, QUIET_ALLOWANCE);
    if t.done != config.warmup + config.cycles || r.still_open != 0 {
        problems.push(format!(
            "{} of {} cycles done, {} connections still open",
            t.done,
            config.warmup + config.cycles,
            r.still_open
        ));
    }
    if t.unexpected != 0 {
        problems.push(format!(
            "{} unexpected errors; the first: {}",
            t.unexpected,
            t.first_problem.as_deref().unwrap_or("-")
        ));
    }
    problems
}

fn run_cycles(name: &str, config: &CycleConfig) -> Vec<String> {
    let wall = std::time::Instant::now();
    let r = open_close(config);
    println!(
        "{name} (seed {}): {} cycles ({} aborted) in {} of virtual time, {} events, \
         at most {} sockets at once; memory baseline {:.2} MiB, end {:.2} MiB ({:+} bytes), \
         peak {:.2} MiB; end: client {:?}, server {:?}; wall time {:.1} s",
        r.seed,
        r.tally.done,
        r.tally.aborted,
        r.end,
        r.steps,
        r.max_sockets,
        r.baseline as f64 / MIB,
        r.live_end as f64 / MIB,
        r.live_end - r.baseline,
        r.peak as f64 / MIB,
        r.client,
        r.server,
        wall.elapsed().as_secs_f64()
    );
    cycle_problems(config, &r)
}

fn cycle_config(seed: u64, cycles: u64) -> CycleConfig {
    CycleConfig {
        seed,
        cycles,
        warmup: 20_000,
        parallel: 8,
        leak: Leak::None,
    }
}

#[test]
fn open_close_20k_cycles() {
    let config = cycle_config(1313, 20_000);
    let problems = run_cycles("open_close_20k_cycles", &config);
    assert!(problems.is_empty(), "seed {}: {problems:#?}", config.seed);
}

#[test]
#[ignore = "a million cycles: a minute or more of wall time in release"]
fn open_close_1m_cycles() {
    let config = cycle_config(1_000_000, 1_000_000);
    let problems = run_cycles("open_close_1m_cycles", &config);
    assert!(problems.is_empty(), "seed {}: {problems:#?}", config.seed);
}

#[test]
fn open_close_catches_a_leaked_socket() {
    let mut config = cycle_config(99, 2_000);
    config.warmup = 1_000;
    config.leak = Leak::Socket;
    let problems = run_cycles("open_close leaked socket", &config);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("the client holds 1 sockets")),
        "a leaked socket went unnoticed: {problems:#?}"
    );
}
