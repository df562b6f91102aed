//! Seed 004's local test plan (Cerf, 1976, §4.2 "Local Test Recommendations"), the
//! bandwidth tests: letters echoed over one connection to itself or between an
//! exerciser and an echoer, three letters in each connection's pipeline, with 1-, 90-
//! and 972-byte letters, and the counters of the report's Tables I-III.
//!
//! | test | 1976 | here |
//! |---|---|---|
//! | a1 | internal cross-patch of one connection to itself | one socket connected to its own address and port (RFC 9293 simultaneous open), looped inside the stack |
//! | a2 | loop the network interface | the same on 127.0.0.1, the loopback interface |
//! | a3 | loop through the local packet switch (IMP) | an exerciser and an echoer host on two sides of an imp router, 50 kbit/s lines (an IP host cannot route to itself through a router) |
//! | a4-a6 | as a1-a3 with two connections at once | two exerciser-to-echoer connections at once: on the host's own address, on 127.0.0.1, through the router |
//!
//! Every exerciser and echoer host runs on the 1975 machine's CPU model
//! ([`CpuProfile::elf_1975`], from the report's Table V; the router, the IMP, costs
//! nothing), so looped letters take virtual time: the CPU charges the loopback as it
//! charges a line's frames ([`crate::cpu`]). [`plan_cpu`] prices the loop per test: a1
//! and a4, the "internal cross-patch (to avoid network entirely)", cost IP and TCP and
//! no driver; a2 and a5, "loop the network interface", run the driver's code once into
//! the loop and once out, a frame's cost each way. An application runs when its host's
//! CPU is free. Looped runs move a fixed number of letters; runs through the router last
//! [`ROUTED_SECONDS`] of virtual time, the report's one minute. [`letter_stages`] times
//! one looped letter stage by stage from the model's timestamps (Tables IV and V).
//!
//! [`markdown`] prints the tables of `scenarios/seeds/README.md`'s test-plan section;
//! `crates/sim/tests/test_plan.rs` checks the committed copy and the reliability tests
//! (b1-b3) and sizes (c).

use std::fmt::Write;
use std::net::{Ipv4Addr, SocketAddrV4};

use impnet_core::tcp::{TcpHandle, TcpState, TcpStats};
use impnet_core::{Duration, Instant, SegmentKind, SegmentKinds, StackConfig, Stats};
use impnet_phy::LinkConfig;
use impnet_wire::ipv4::Cidr;

use crate::cpu::{CpuProfile, Work};
use crate::{HostId, LinkId, Sim};

mod stages;
mod ucl;

pub use stages::{LetterStages, TABLE_IV, TABLE_V, letter_stages};
pub use ucl::{
    ATLANTIC_BPS, ATLANTIC_DELAY, ATLANTIC_LOSS, UCL_LETTER, UCL_TIMEOUT, UclRun, ucl_run,
};

/// Tables IV and V beside imp's looped letters ([`letter_stages`]).
pub fn stages_markdown(runs: &[LetterStages]) -> String {
    stages::markdown(runs)
}

/// The UCL runs beside the report's figures ([`ucl_run`]).
pub fn ucl_markdown(runs: &[UclRun]) -> String {
    ucl::markdown(runs)
}

/// Letters each connection keeps in flight ("three TCP letters were allowed to enter
/// the pipeline before requiring an acknowledgment").
pub const PIPELINE: usize = 3;
/// The letter sizes of the plan.
pub const LETTERS: [usize; 3] = [1, 90, 972];
/// Virtual seconds of a run through the router.
pub const ROUTED_SECONDS: u64 = 60;
/// Line rate through the router: the report's 50 kbit/s line to the IMP.
pub const LINE_BPS: u64 = 50_000;
/// Ethernet, IPv4 and TCP headers (with the timestamp option) of one letter segment.
pub const HEADER_BYTES: usize = 14 + 20 + 32;

const PORT: u16 = 7000;
const HOST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const LOCALHOST: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);
const EXERCISER: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 1);
const ECHOER: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 1);

/// One bandwidth test of the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Test {
    /// a1: a connection to itself on the host's address.
    SelfConnection,
    /// a2: a connection to itself on 127.0.0.1.
    Loopback,
    /// a3: exerciser to echoer through a router.
    Router,
    /// a4: two exerciser-to-echoer connections on the host's address.
    TwoSelf,
    /// a5: two on 127.0.0.1.
    TwoLoopback,
    /// a6: two through the router.
    TwoRouter,
}

impl Test {
    /// The six, in the plan's order.
    pub const ALL: [Test; 6] = [
        Test::SelfConnection,
        Test::Loopback,
        Test::Router,
        Test::TwoSelf,
        Test::TwoLoopback,
        Test::TwoRouter,
    ];

    /// The plan's label (a1 ... a6).
    pub fn label(self) -> &'static str {
        match self {
            Test::SelfConnection => "a1",
            Test::Loopback => "a2",
            Test::Router => "a3",
            Test::TwoSelf => "a4",
            Test::TwoLoopback => "a5",
            Test::TwoRouter => "a6",
        }
    }

    /// What it runs over, in a few words.
    pub fn path(self) -> &'static str {
        match self {
            Test::SelfConnection => "to itself, own address",
            Test::Loopback => "to itself, 127.0.0.1",
            Test::Router => "through a router",
            Test::TwoSelf => "2 conns, own address",
            Test::TwoLoopback => "2 conns, 127.0.0.1",
            Test::TwoRouter => "2 conns, through a router",
        }
    }

    /// Connections at once.
    pub fn connections(self) -> usize {
        match self {
            Test::SelfConnection | Test::Loopback | Test::Router => 1,
            _ => 2,
        }
    }

    /// True when the letters cross a router (and take virtual time).
    pub fn routed(self) -> bool {
        matches!(self, Test::Router | Test::TwoRouter)
    }
}

/// The counters of the report's Table I, over every host of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// Segments sent, by kind (the ACK-only ones are the pure ACKs).
    pub sent: SegmentKinds,
    /// Data segments received out of order.
    pub out_of_order: u64,
    /// Segments received with data already received.
    pub duplicates: u64,
    /// Storage allocation failures: anything dropped for want of room (out-of-order
    /// ranges, connection table, events, transmit and ARP queues, reassembly memory).
    pub storage_failures: u64,
    /// Segments retransmitted.
    pub retransmissions: u64,
    /// Bare ACKs received that told nothing new.
    pub redundant_acks: u64,
}

impl Counters {
    /// Add one stack's counters.
    pub fn add(&mut self, stats: &Stats, tcp: &TcpStats) {
        self.sent.add(&stats.tcp.tx_kinds);
        self.out_of_order += tcp.out_of_order;
        self.duplicates += tcp.duplicate_segments;
        self.storage_failures += storage_failures(stats, tcp);
        self.retransmissions += tcp.retransmitted;
        self.redundant_acks += tcp.redundant_acks;
    }
}

/// Drops for want of memory, summed: the counters behind "storage allocation failures".
pub fn storage_failures(stats: &Stats, tcp: &TcpStats) -> u64 {
    tcp.out_of_order_dropped
        + tcp.connection_limit_drops
        + tcp.events_dropped
        + tcp.listen_overflows
        + stats.link.tx_queue_full
        + stats.arp.dropped_queue_full
        + stats.arp.dropped_table_full
        + stats.reassembly.memory
        + stats.udp.rx_queue_full
}

/// One direction of a line (Table III): what went that way, by kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Direction {
    /// Which way.
    pub name: &'static str,
    /// Segments and their IPv4 bytes.
    pub kinds: SegmentKinds,
    /// Line rate (None: the loopback interface, which has none).
    pub rate_bps: Option<u64>,
    /// Bytes the line delivered that way (frames, Ethernet headers included; a
    /// segment still queued at the end was sent but not yet carried).
    pub line_bytes: Option<u64>,
}

/// What one test with one letter size gave.
#[derive(Debug, Clone)]
pub struct LetterRun {
    /// The test.
    pub test: Test,
    /// Letter length, bytes.
    pub letter: usize,
    /// Letters echoed back whole, all connections together.
    pub letters: u64,
    /// Virtual seconds the letters took.
    pub seconds: f64,
    /// Table I's counters.
    pub counters: Counters,
    /// Table III's directions.
    pub directions: Vec<Direction>,
    /// Letters per second the CPU allows when each letter goes alone (see
    /// [`cpu_bound_per_s`]); None without a CPU model. Letters of a pipeline that share
    /// a segment and a call go faster, up to [`PIPELINE`] times this.
    pub cpu_bound_per_s: Option<f64>,
    /// The busiest exerciser or echoer host's CPU busy share of the letters' time, %.
    pub cpu_busy_pct: Option<f64>,
}

impl LetterRun {
    /// Letters per virtual second (None when the run took no virtual time: no CPU).
    pub fn letters_per_s(&self) -> Option<f64> {
        (self.seconds > 0.0).then(|| self.letters as f64 / self.seconds)
    }

    /// The line's bound: every letter in one frame each way, its ACK riding on the echo.
    pub fn bound_per_s(&self) -> Option<f64> {
        self.test
            .routed()
            .then(|| LINE_BPS as f64 / (8 * (HEADER_BYTES + self.letter)) as f64)
    }
}

/// The CPU of the plan's exerciser and echoer hosts in `test`: the 1975 machine
/// ([`CpuProfile::elf_1975`]), its loop priced as the test says: nothing beyond IP and
/// TCP for the cross-patch (a1, a4), a frame each way for the looped interface (a2, a5);
/// the routed tests send real frames.
pub fn plan_cpu(test: Test) -> CpuProfile {
    let elf = CpuProfile::elf_1975();
    match test {
        Test::SelfConnection | Test::TwoSelf => CpuProfile {
            name: "elf-1975, cross-patch".into(),
            loopback: Some(0),
            ..elf
        },
        _ => elf,
    }
}

/// Letters per second `cpu` allows in `test` with `letter`-byte letters each going
/// alone: the busiest host's work for one letter with nothing else (each letter a SEND
/// and a RECEIVE and a segment out and in at each end; a4 and a5 carry both ends on one
/// host; a frame or a loop passage with each segment; no ACK on its own). Letters that
/// share a segment and a call (a pipeline written at once) share that work, so the
/// bound on a run is [`PIPELINE`] times this.
pub fn cpu_bound_per_s(test: Test, letter: usize, cpu: &CpuProfile) -> f64 {
    let passes = match test {
        Test::TwoSelf | Test::TwoLoopback => 4,
        _ => 2,
    };
    let ip_bytes = (HEADER_BYTES - 14 + letter) as u64;
    let (frames, frame_bytes, looped, looped_bytes) = if test.routed() {
        (1, ip_bytes + 14, 0, 0)
    } else {
        (0, 0, 1, ip_bytes)
    };
    // One passage: a segment with its packet and frame (or loop passage), and one of
    // the letter's two socket calls (half a send's and half a receive's copy).
    let pass = Work {
        frames,
        frame_bytes,
        looped,
        looped_bytes,
        packets: 1,
        segments: 1,
        checksummed_bytes: ip_bytes,
        socket_calls: 1,
        copied_from_user: letter as u64 / 2,
        copied_to_user: letter as u64 - letter as u64 / 2,
    };
    1.0 / (passes as f64 * cpu.cost(&pass).as_secs_f64())
}

/// One connection's exerciser: keeps [`PIPELINE`] letters written and not yet echoed.
struct Exerciser {
    host: HostId,
    conn: TcpHandle,
    letter: usize,
    /// Bytes written and bytes read back.
    written: u64,
    read: u64,
    /// Stop writing after this many letters (None: until the run ends).
    target: Option<u64>,
}

impl Exerciser {
    fn letters(&self) -> u64 {
        self.read / self.letter as u64
    }

    fn done(&self) -> bool {
        self.target.is_some_and(|t| self.letters() >= t)
    }

    /// Write while fewer than PIPELINE letters are out, read the echo; true when a
    /// byte moved.
    fn drive(&mut self, sim: &mut Sim, buf: &mut [u8]) -> Result<bool, String> {
        let now = sim.now();
        let before = (self.written, self.read);
        let stack = sim.host_mut(self.host);
        let letter = self.letter as u64;
        loop {
            let allowed = self.target.map_or(u64::MAX, |t| t * letter);
            let room = (self.read + PIPELINE as u64 * letter).min(allowed);
            if self.written >= room {
                break;
            }
            let want = (room - self.written).min(buf.len() as u64) as usize;
            let pattern = letter_bytes(self.written, &mut buf[..want]);
            match stack.tcp_send(now, self.conn, pattern) {
                Ok(0) | Err(impnet_core::tcp::TcpError::WouldBlock) => break,
                Ok(n) => self.written += n as u64,
                Err(e) => return Err(format!("exerciser send: {e}")),
            }
        }
        loop {
            match stack.tcp_recv(now, self.conn, buf) {
                Ok(0) | Err(impnet_core::tcp::TcpError::WouldBlock) => {
                    return Ok(before != (self.written, self.read));
                }
                Ok(n) => {
                    let mut expected = vec![0; n];
                    letter_bytes(self.read, &mut expected);
                    if buf[..n] != expected[..] {
                        return Err(format!("echo corrupted at byte {}", self.read));
                    }
                    self.read += n as u64;
                }
                Err(e) => return Err(format!("exerciser receive: {e}")),
            }
        }
    }
}

/// The letter stream's bytes from `offset` on, in `out`.
fn letter_bytes(offset: u64, out: &mut [u8]) -> &[u8] {
    for (i, b) in out.iter_mut().enumerate() {
        let at = offset + i as u64;
        *b = (at % 251) as u8 ^ (at >> 8) as u8;
    }
    out
}

/// The echoers of one host: a listener and what it accepted, every byte sent back.
struct Echoer {
    host: HostId,
    listener: TcpHandle,
    conns: Vec<(TcpHandle, Vec<u8>)>,
}

impl Echoer {
    /// Accept, read and echo; true when something moved.
    fn drive(&mut self, sim: &mut Sim, buf: &mut [u8]) -> Result<bool, String> {
        let now = sim.now();
        let stack = sim.host_mut(self.host);
        let mut moved = false;
        while let Ok(conn) = stack.tcp_accept(self.listener) {
            moved = true;
            stack
                .tcp_set_nodelay(conn, true)
                .map_err(|e| e.to_string())?;
            self.conns.push((conn, Vec::new()));
        }
        for (conn, pending) in &mut self.conns {
            loop {
                match stack.tcp_recv(now, *conn, buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        moved = true;
                        pending.extend_from_slice(&buf[..n]);
                    }
                }
            }
            if !pending.is_empty() {
                let n = stack.tcp_send(now, *conn, pending).unwrap_or(0);
                moved |= n > 0;
                pending.drain(..n);
            }
        }
        Ok(moved)
    }
}

/// A stack for the plan: Nagle off (each letter its own packet, as in 1976).
fn stack_config() -> StackConfig {
    let mut config = StackConfig::default();
    config.tcp.nodelay = true;
    config
}

fn cidr(addr: Ipv4Addr) -> Cidr {
    Cidr::new(addr, 24).expect("a /24 is a valid prefix")
}

/// The network of a test: the hosts that exercise and echo, and the links.
struct Network {
    sim: Sim,
    exerciser: HostId,
    echoer: HostId,
    /// The address the echoers listen on and the exercisers connect to.
    target: Ipv4Addr,
}

fn network(test: Test, seed: u64, cpu: Option<&CpuProfile>) -> Network {
    let mut network = network_of(test, seed);
    for host in [network.exerciser, network.echoer] {
        network.sim.set_cpu(host, cpu.cloned());
    }
    network
}

fn network_of(test: Test, seed: u64) -> Network {
    let mut sim = Sim::new(seed);
    if !test.routed() {
        // One host; its interface joins a silent peer so it has an address.
        let host = sim.add_host("host", stack_config());
        let peer = sim.add_host("peer", stack_config());
        let link = LinkConfig::default();
        sim.connect(
            host,
            cidr(HOST),
            peer,
            cidr(Ipv4Addr::new(10, 0, 0, 2)),
            link,
        )
        .expect("a default link is valid");
        let target = match test {
            Test::SelfConnection | Test::TwoSelf => HOST,
            _ => LOCALHOST,
        };
        return Network {
            sim,
            exerciser: host,
            echoer: host,
            target,
        };
    }
    let exerciser = sim.add_host("exerciser", stack_config());
    let router = sim.add_router("router", stack_config());
    let echoer = sim.add_host("echoer", stack_config());
    let line = LinkConfig::default()
        .with_rate_bps(LINE_BPS)
        .with_delay(Duration::from_millis(5));
    let gateway = |addr: Ipv4Addr| {
        let [a, b, c, _] = addr.octets();
        Ipv4Addr::new(a, b, c, 254)
    };
    for (host, addr) in [(exerciser, EXERCISER), (echoer, ECHOER)] {
        let link = sim
            .connect(host, cidr(addr), router, cidr(gateway(addr)), line)
            .expect("the line is valid");
        let iface = sim.iface_on(host, link).expect("the host is on its link");
        let default = Cidr::new(Ipv4Addr::UNSPECIFIED, 0).expect("/0 is valid");
        sim.host_mut(host)
            .routes_mut()
            .add(default, Some(gateway(addr)), iface);
    }
    Network {
        sim,
        exerciser,
        echoer,
        target: ECHOER,
    }
}

/// Run `test` with `letter`-byte letters on the plan's CPU ([`plan_cpu`]): `letters`
/// per connection when looped, or [`ROUTED_SECONDS`] through the router. An error says
/// what failed.
pub fn run(test: Test, letter: usize, letters: u64, seed: u64) -> Result<LetterRun, String> {
    run_on(test, letter, letters, seed, Some(&plan_cpu(test)))
}

/// As [`run`], on `cpu` (None: hosts that cost no time, so looped letters take none).
pub fn run_on(
    test: Test,
    letter: usize,
    letters: u64,
    seed: u64,
    cpu: Option<&CpuProfile>,
) -> Result<LetterRun, String> {
    let Network {
        mut sim,
        exerciser,
        echoer,
        target,
    } = network(test, seed, cpu);
    let start = sim.now();
    let self_connected = matches!(test, Test::SelfConnection | Test::Loopback);
    let mut exercisers = Vec::new();
    let mut echoers = Vec::new();
    let remote = SocketAddrV4::new(target, PORT);
    if !self_connected {
        let listener = sim
            .host_mut(echoer)
            .tcp_listen(remote, 8)
            .map_err(|e| format!("listen: {e}"))?;
        echoers.push(Echoer {
            host: echoer,
            listener,
            conns: Vec::new(),
        });
    }
    for i in 0..test.connections() {
        let local = if self_connected {
            remote
        } else {
            SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT + 1 + i as u16)
        };
        let conn = sim
            .host_mut(exerciser)
            .tcp_connect(start, local, remote)
            .map_err(|e| format!("connect: {e}"))?;
        exercisers.push(Exerciser {
            host: exerciser,
            conn,
            letter,
            written: 0,
            read: 0,
            target: (!test.routed()).then_some(letters),
        });
    }
    let end = start + Duration::from_secs(ROUTED_SECONDS);
    let seconds = drive(
        &mut sim,
        &mut exercisers,
        &mut echoers,
        test.routed().then_some(end),
    )?;
    let letters = exercisers.iter().map(Exerciser::letters).sum();
    let cpu_busy_pct = [exerciser, echoer]
        .iter()
        .filter_map(|&h| sim.cpu_report(h))
        .map(|r| 100.0 * r.busy.as_secs_f64() / seconds.max(f64::MIN_POSITIVE))
        .reduce(f64::max)
        .map(|p| p.min(100.0));
    // Line use over the letters' time; the counters after the close too.
    let directions = directions(&sim, test, [exerciser, echoer]);
    close(&mut sim, &exercisers, &echoers)?;
    let mut counters = Counters::default();
    for host in (0..sim.host_count()).map(HostId) {
        counters.add(sim.host(host).stats(), sim.host(host).tcp_stats());
    }
    // Frames a line's queue had no room for are storage failures too (the IMP's).
    for link in 0..sim.link_count() {
        for side in 0..2 {
            counters.storage_failures += sim.link_stats(LinkId(link), side).dropped_queue;
        }
    }
    Ok(LetterRun {
        test,
        letter,
        letters,
        seconds,
        counters,
        directions,
        cpu_bound_per_s: cpu.map(|c| cpu_bound_per_s(test, letter, c)),
        cpu_busy_pct,
    })
}

/// Run the applications until every exerciser is done or `end`; the virtual seconds.
/// The applications run after every step (a looped letter is delivered inside a poll,
/// with nothing left scheduled: `Sim::run` would call that idle).
fn drive(
    sim: &mut Sim,
    exercisers: &mut [Exerciser],
    echoers: &mut [Echoer],
    end: Option<Instant>,
) -> Result<f64, String> {
    let start = sim.now();
    let mut buf = vec![0u8; 64 * 1024];
    for _ in 0..50_000_000u64 {
        let mut moved = false;
        for e in exercisers.iter_mut() {
            if cpu_free(sim, e.host) {
                moved |= e.drive(sim, &mut buf)?;
            }
        }
        for e in echoers.iter_mut() {
            if cpu_free(sim, e.host) {
                moved |= e.drive(sim, &mut buf)?;
            }
        }
        // What the calls sent leaves now (a looped packet is taken in at once), and
        // the applications see it before time moves on.
        sim.transmit_now().map_err(|e| e.to_string())?;
        let finished = match end {
            Some(end) => sim.now() >= end,
            None => exercisers.iter().all(Exerciser::done),
        };
        if finished {
            return Ok((sim.now() - start).as_secs_f64());
        }
        if moved {
            continue;
        }
        // An application waiting for its CPU wakes when the CPU is free.
        let hosts = exercisers.iter().map(|e| e.host);
        let wake = cpu_wake(sim, hosts.chain(echoers.iter().map(|e| e.host)));
        let wake = match (wake, end) {
            (Some(w), Some(end)) => Some(w.min(end)),
            (w, e) => w.or(e),
        };
        if let Some(wake) = wake
            && sim.next_event().is_none_or(|t| t > wake)
        {
            sim.run_until(wake, 1).map_err(|e| e.to_string())?;
            continue;
        }
        if !sim.step() {
            return Err(format!(
                "idle at {:?} before the letters were done (seed {})",
                sim.now(),
                sim.seed()
            ));
        }
    }
    Err(format!("step cap reached (seed {})", sim.seed()))
}

/// True when `host`'s CPU (if it has one) is done with the work charged so far: its
/// applications run only then.
fn cpu_free(sim: &Sim, host: HostId) -> bool {
    sim.cpu_busy_until(host).is_none_or(|t| t <= sim.now())
}

/// The earliest instant one of `hosts`' CPUs, busy now, is free.
fn cpu_wake(sim: &Sim, hosts: impl Iterator<Item = HostId>) -> Option<Instant> {
    hosts
        .filter_map(|h| sim.cpu_busy_until(h))
        .filter(|&t| t > sim.now())
        .min()
}

/// Close every connection (the exercisers first, the echoers after) and let the FINs
/// and their ACKs go.
fn close(sim: &mut Sim, exercisers: &[Exerciser], echoers: &[Echoer]) -> Result<(), String> {
    let now = sim.now();
    for e in exercisers {
        sim.host_mut(e.host)
            .tcp_close(now, e.conn)
            .map_err(|e| format!("close: {e}"))?;
    }
    for e in echoers {
        for (conn, _) in &e.conns {
            sim.host_mut(e.host)
                .tcp_close(now, *conn)
                .map_err(|e| format!("close: {e}"))?;
        }
    }
    // The closes' FINs leave now, as after any socket call (`drive`): `run_until` only
    // steps through scheduled events, and a host whose only news is a close has none
    // (the looped runs then ended with no FIN counted).
    sim.transmit_now().map_err(|e| e.to_string())?;
    sim.run_until(now + Duration::from_secs(5), 1_000_000)
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Table III's directions: the two directions of the exerciser's line, or the
/// loopback interface.
fn directions(sim: &Sim, test: Test, [exerciser, echoer]: [HostId; 2]) -> Vec<Direction> {
    let sent = |host: HostId| sim.host(host).stats().tcp.tx_kinds.clone();
    // The exerciser's line is the first link; side 0 is the exerciser's end.
    let carried = |side: usize| Some(sim.link_stats(LinkId(0), side).bytes_delivered);
    if test.routed() {
        vec![
            Direction {
                name: "exerciser to router",
                kinds: sent(exerciser),
                rate_bps: Some(LINE_BPS),
                line_bytes: carried(0),
            },
            Direction {
                name: "router to exerciser",
                kinds: sent(echoer),
                rate_bps: Some(LINE_BPS),
                line_bytes: carried(1),
            },
        ]
    } else {
        vec![Direction {
            name: "looped",
            kinds: sent(exerciser),
            rate_bps: None,
            line_bytes: None,
        }]
    }
}

fn letter_name(letter: usize) -> String {
    if letter == 1 {
        "1 byte".into()
    } else {
        format!("{letter} bytes")
    }
}

/// The letters table: letters, virtual time, letters per second, the busiest CPU's
/// share and the bounds of the line and of the CPU.
pub fn letters_table(runs: &[LetterRun]) -> String {
    let mut out = String::from(
        "| test | path | letter | letters | virtual time | letters/s | CPU busy | line bound | CPU, a letter alone |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    let cell = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
    for r in runs {
        let rate = r
            .letters_per_s()
            .map_or("(no clock)".into(), |v| format!("{v:.2}"));
        let busy = r.cpu_busy_pct.map_or("-".into(), |v| format!("{v:.0}%"));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.3} s | {rate} | {busy} | {} | {} |",
            r.test.label(),
            r.test.path(),
            letter_name(r.letter),
            r.letters,
            r.seconds,
            cell(r.bound_per_s()),
            cell(r.cpu_bound_per_s),
        );
    }
    out
}

/// Table I's counters per run.
pub fn counters_table(runs: &[LetterRun]) -> String {
    let mut out = String::from(
        "| test | letter | data | ACK only (pure ACKs) | SYN | FIN | RST | out of sequence | duplicates | storage failures | retransmissions | redundant ACKs |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in runs {
        let c = &r.counters;
        let kinds: Vec<String> = SegmentKind::ALL
            .iter()
            .map(|k| c.sent.segments(*k).to_string())
            .collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            r.test.label(),
            letter_name(r.letter),
            kinds.join(" | "),
            c.out_of_order,
            c.duplicates,
            c.storage_failures,
            c.retransmissions,
            c.redundant_acks
        );
    }
    out
}

/// Table III: line use per direction by packet kind (segments sent, and their bytes
/// with the Ethernet header on a line, IPv4 bytes on the loopback interface, which
/// has no link header); the line's share is what it carried over the letters' time.
pub fn line_table(runs: &[LetterRun]) -> String {
    let mut out = String::from(
        "| test | letter | direction | data | ACK only | SYN, FIN, RST | total | line use |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for r in runs {
        for d in &r.directions {
            let link = if d.rate_bps.is_some() { 14 } else { 0 };
            let bytes = |k: SegmentKind| d.kinds.bytes(k) + link * d.kinds.segments(k);
            let cell = |kinds: &[SegmentKind]| {
                let segs: u64 = kinds.iter().map(|k| d.kinds.segments(*k)).sum();
                let b: u64 = kinds.iter().map(|k| bytes(*k)).sum();
                format!("{segs} ({b} B)")
            };
            let total: u64 = SegmentKind::ALL.iter().map(|k| bytes(*k)).sum();
            let share = match (d.rate_bps, d.line_bytes) {
                (Some(rate), Some(carried)) if r.seconds > 0.0 => {
                    format!(
                        "{:.1}%",
                        100.0 * carried as f64 * 8.0 / (rate as f64 * r.seconds)
                    )
                }
                _ => "-".into(),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {total} B | {share} |",
                r.test.label(),
                letter_name(r.letter),
                d.name,
                cell(&[SegmentKind::Data]),
                cell(&[SegmentKind::AckOnly]),
                cell(&[SegmentKind::Syn, SegmentKind::Fin, SegmentKind::Rst]),
            );
        }
    }
    out
}

/// The bandwidth tables in one block, with headings.
pub fn markdown(runs: &[LetterRun]) -> String {
    format!(
        "Letters (exerciser and echoer hosts on the 1975 CPU model, `elf-1975`; looped runs move {} letters per connection; routed runs last {ROUTED_SECONDS} s):\n\n{}\n\
         Counters (Table I), all hosts together, the close included:\n\n{}\n\
         Line use per direction by packet kind (Table III), over the letters' time:\n\n{}",
        runs.iter()
            .find(|r| !r.test.routed())
            .map_or(0, |r| r.letters / r.test.connections() as u64),
        letters_table(runs),
        counters_table(runs),
        line_table(runs)
    )
}

/// What opening and closing a connection over and over gave (test b3).
#[derive(Debug, Clone, PartialEq)]
pub struct OpenClose {
    /// Cycles completed.
    pub cycles: u64,
    /// Mean virtual time from `tcp_connect` to ESTABLISHED at the exerciser.
    pub open_mean: Duration,
    /// Mean virtual time from `tcp_close` to the exerciser's TIME-WAIT (both FINs
    /// sent and acknowledged).
    pub close_mean: Duration,
}

/// Open a connection, send one letter each way, close; `cycles` times, over `test`'s
/// path (one connection at a time; the self-connected tests use the echoer as the
/// others do).
pub fn open_close(test: Test, cycles: u64, seed: u64) -> Result<OpenClose, String> {
    let Network {
        mut sim,
        exerciser,
        echoer,
        target,
    } = network(test, seed, None);
    let remote = SocketAddrV4::new(target, PORT);
    let listener = sim
        .host_mut(echoer)
        .tcp_listen(remote, 8)
        .map_err(|e| format!("listen: {e}"))?;
    let (mut open_total, mut close_total) = (Duration::ZERO, Duration::ZERO);
    for cycle in 0..cycles {
        let start = sim.now();
        let any = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0);
        let conn = sim
            .host_mut(exerciser)
            .tcp_connect(start, any, remote)
            .map_err(|e| format!("cycle {cycle}: connect: {e}"))?;
        let state = |sim: &Sim| sim.host(exerciser).tcp_info(conn).map(|i| i.state);
        run_until(&mut sim, |sim| state(sim) == Some(TcpState::Established))?;
        open_total = open_total + (sim.now() - start);
        let mut accepted = None;
        run_until(&mut sim, |sim| {
            accepted = accepted.or_else(|| sim.host_mut(echoer).tcp_accept(listener).ok());
            accepted.is_some()
        })
        .map_err(|e| format!("cycle {cycle}: accept: {e}"))?;
        let server = accepted.expect("accepted");
        let closing = sim.now();
        sim.host_mut(exerciser)
            .tcp_close(closing, conn)
            .map_err(|e| format!("cycle {cycle}: close: {e}"))?;
        let mut buf = [0u8; 16];
        run_until(&mut sim, |sim| {
            let now = sim.now();
            let peer = sim.host_mut(echoer);
            if peer.tcp_recv(now, server, &mut buf) == Ok(0) {
                let _ = peer.tcp_close(now, server);
            }
            matches!(state(sim), Some(TcpState::TimeWait) | None)
        })?;
        close_total = close_total + (sim.now() - closing);
    }
    Ok(OpenClose {
        cycles,
        open_mean: Duration::from_nanos(open_total.as_nanos() / cycles.max(1)),
        close_mean: Duration::from_nanos(close_total.as_nanos() / cycles.max(1)),
    })
}

/// Step (letting what the hosts send leave first) until `done`, which may make
/// socket calls: what they send leaves, and `done` looks again, before time moves on.
fn run_until(sim: &mut Sim, mut done: impl FnMut(&mut Sim) -> bool) -> Result<(), String> {
    for _ in 0..1_000_000 {
        for _ in 0..2 {
            sim.transmit_now().map_err(|e| e.to_string())?;
            if done(sim) {
                return Ok(());
            }
        }
        if !sim.step() {
            return Err(format!("idle at {:?} (seed {})", sim.now(), sim.seed()));
        }
    }
    Err(format!("step cap reached (seed {})", sim.seed()))
}
