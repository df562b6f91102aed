use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter};
use std::net::Ipv4Addr;
use std::path::Path;

use impnet_core::rng::{SPLITMIX64_GAMMA, splitmix64, splitmix64_mix};
use impnet_core::{Duration, IfaceConfig, IfaceId, Instant, Secret, Stack, StackConfig};
use impnet_phy::{LinkConfig, LinkConfigError, LinkModel, LinkStats, PcapWriter};
use impnet_wire::ethernet;
use impnet_wire::ipv4::Cidr;

use crate::cpu::{Cpu, CpuProfile, CpuReport, LoopRecord, Work};

/// Index of a host in the simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostId(pub usize);

/// Index of a link in the simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkId(pub usize);

/// What the application code passed to [`Sim::run`] wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep running; call me again after the next event.
    Continue,
    /// Keep running, and make sure I am called again no later than this instant.
    WakeAt(Instant),
    /// The experiment is over.
    Done,
}

/// Why a run stopped before the application said it was done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimError {
    /// More than `steps` events were processed.
    StepCapExceeded {
        /// The seed of the run, to replay it.
        seed: u64,
        /// The cap that was hit.
        steps: u64,
        /// Virtual time when it was hit.
        at: Instant,
    },
    /// Nothing is scheduled any more (no frame in flight, no timer, no wake-up) but the
    /// application is not done: the experiment can never finish.
    Deadlock {
        /// The seed of the run, to replay it.
        seed: u64,
        /// Virtual time when the simulation went idle.
        at: Instant,
    },
    /// The virtual-time limit passed before the application was done.
    TimeLimit {
        /// The seed of the run, to replay it.
        seed: u64,
        /// The limit.
        at: Instant,
    },
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::StepCapExceeded { seed, steps, at } => write!(
                f,
                "simulation (seed {seed}) exceeded its cap of {steps} steps at t={at}; \
                 rerun with the same seed to replay"
            ),
            SimError::Deadlock { seed, at } => write!(
                f,
                "simulation (seed {seed}) went idle at t={at} before the experiment finished \
                 (nothing in flight and no timer pending); rerun with the same seed to replay"
            ),
            SimError::TimeLimit { seed, at } => write!(
                f,
                "simulation (seed {seed}) reached its time limit t={at} before the experiment \
                 finished; rerun with the same seed to replay"
            ),
        }
    }
}

impl std::error::Error for SimError {}

/// What a finished run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunSummary {
    /// Events processed.
    pub steps: u64,
    /// Virtual time at the end.
    pub end: Instant,
}

struct Host {
    name: String,
    stack: Stack,
    /// Every interface forwards (set on each interface as links are added).
    router: bool,
    /// Interface -> (link, which end of the link this host is: 0 = a, 1 = b, address).
    ports: Vec<(IfaceId, LinkId, usize, Cidr)>,
    /// The host's CPU, when it has a cost model ([`Sim::set_cpu`]).
    cpu: Option<Cpu>,
}

impl Host {
    /// The work counters of the stack, summed over its interfaces.
    fn work_totals(&self) -> Work {
        let (mut tx_frames, mut tx_bytes, mut rx_bytes) = (0, 0, 0);
        for &(iface, ..) in &self.ports {
            if let Some(s) = self.stack.iface_stats(iface) {
                tx_frames += s.tx_frames;
                tx_bytes += s.tx_bytes;
                rx_bytes += s.rx_bytes;
            }
        }
        let looped = self.stack.loopback_stats();
        Work::totals(self.stack.stats(), tx_frames, tx_bytes, rx_bytes, looped)
    }

    /// When the host next needs the simulator: its stack's timer, or its CPU's next
    /// frame to process or to send.
    fn next_timer(&self) -> Option<Instant> {
        let stack = self.stack.poll_timeout();
        match (stack, self.cpu.as_ref().and_then(Cpu::next_event)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

struct Link {
    ends: [(HostId, IfaceId); 2],
    /// `models[i]` carries frames sent by end `i` towards the other end.
    models: [LinkModel; 2],
    pcap: Option<PcapWriter<BufWriter<File>>>,
    /// Bytes of each frame the capture keeps (the record still gives the full length).
    snaplen: usize,
    /// A firewall drops every ICMP datagram sent on the link, both directions.
    block_icmp: bool,
    /// ICMP frames dropped by that firewall, per sending end.
    filtered: [u64; 2],
    /// The link is cut ([`Sim::set_link_up`]): frames sent on it are lost.
    down: bool,
    /// Frames lost because the link was down, per sending end.
    lost_down: [u64; 2],
}

/// Whether an Ethernet frame carries an IPv4 ICMP datagram.
fn is_icmp(frame: &[u8]) -> bool {
    frame.len() > 23 && frame[12..14] == [0x08, 0x00] && frame[23] == 1
}

/// What happened to a frame an observer is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// A host handed the frame to the link (before the link model decides its fate).
    Sent,
    /// The link delivered the frame (or a copy of it) to the host at the other end.
    Delivered,
}

/// One frame seen by the observer set with [`Sim::set_observer`].
#[derive(Debug, Clone, Copy)]
pub struct FrameEvent<'a> {
    /// Virtual time of the event.
    pub time: Instant,
    /// The link the frame travels on.
    pub link: LinkId,
    /// The end that sent it: 0 = the first host given to [`Sim::connect`], 1 = the second.
    pub from_side: usize,
    /// Sent or delivered.
    pub kind: FrameKind,
    /// The Ethernet frame.
    pub frame: &'a [u8],
}

/// A callback shown every frame sent and delivered, in event order.
pub type FrameObserver = Box<dyn FnMut(&FrameEvent<'_>)>;

/// A simulated network in virtual time.
///
/// Scheduling is event-driven, so a step costs what happens in it, not the size of
/// the network: link arrivals and host timers wait in two min-heaps, and only the
/// hosts touched since the last step (a frame or timer handled, or [`Sim::host_mut`])
/// are asked for output. The heaps are lazy: an entry counts only while it still
/// equals its model's next arrival or its host's registered timer, and their tops are
/// kept current after every change.
pub struct Sim {
    seed: u64,
    now: Instant,
    hosts: Vec<Host>,
    links: Vec<Link>,
    steps: u64,
    trace_hash: u64,
    frame: Vec<u8>,
    observer: Option<FrameObserver>,
    /// `observed[link]`: the observer is shown the link's frames ([`Sim::set_observed`]).
    observed: Vec<bool>,
    /// Hosts that may have frames to send or a changed timer, in no order.
    dirty: Vec<usize>,
    /// `is_dirty[h]`: host `h` is in `dirty`.
    is_dirty: Vec<bool>,
    /// Each host's timer as last registered in `timers`.
    timer_at: Vec<Option<Instant>>,
    /// (deadline, host) of registered timers.
    timers: BinaryHeap<Reverse<(Instant, usize)>>,
    /// (arrival, 2 * link + side) of the link models' next arrivals.
    arrivals: BinaryHeap<Reverse<(Instant, usize)>>,
    /// Each link model's next arrival (by 2 * link + side), kept equal to its
    /// [`LinkModel::next_arrival`] after every change the simulator makes to it: what
    /// an entry of `arrivals` is checked against, without asking the model.
    arrival_at: Vec<Option<Instant>>,
    /// Per host: frames and timers it has handled (see [`Sim::activity`]).
    activity: Vec<u64>,
    /// Hosts whose `activity` moved since [`Sim::take_touched`] last ran, once each
    /// (`touched_mark` says which are listed).
    touched: Vec<usize>,
    touched_mark: Vec<bool>,
    /// Scratch list of the models or hosts due in a step.
    due: Vec<usize>,
}

/// The event heaps are lazy (a stale entry stays until it reaches the top); one is
/// rebuilt from the current entries when it holds more than `STALE_FACTOR` times as
/// many entries as it can have live ones (one per host or link direction, plus
/// `STALE_MIN`), so that a run whose timers move constantly (a flood) does not grow it.
const STALE_FACTOR: usize = 4;
const STALE_MIN: usize = 64;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// One more frame or timer round at `host` (see `Sim::take_touched`).
fn bump(activity: &mut [u64], touched: &mut Vec<usize>, mark: &mut [bool], host: usize) {
    activity[host] += 1;
    if !mark[host] {
        mark[host] = true;
        touched.push(host);
    }
}

/// FNV-1a's step (xor in a word, multiply by the prime) over 8-byte words, chained onto
/// `hash`: a fingerprint, not a cryptographic hash. The whole 32-byte blocks go through
/// four interleaved lanes (word `i` of a block into lane `i`), so that four
/// multiplications are in flight at once where one chain waited on each; the lanes are
/// then folded in order, then the words and bytes of the tail, then the length.
fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    let step = |hash: u64, word: u64| (hash ^ word).wrapping_mul(FNV_PRIME);
    let word = |bytes: &[u8]| {
        let mut w = [0u8; 8];
        w.copy_from_slice(bytes);
        u64::from_le_bytes(w)
    };
    let mut lanes = [
        hash,
        hash.rotate_left(16),
        hash.rotate_left(32),
        hash.rotate_left(48),
    ];
    let mut blocks = bytes.chunks_exact(32);
    for block in &mut blocks {
        for (lane, w) in lanes.iter_mut().zip(block.chunks_exact(8)) {
            *lane = step(*lane, word(w));
        }
    }
    let mut hash = lanes[1..].iter().fold(lanes[0], |h, &lane| step(h, lane));
    let mut words = blocks.remainder().chunks_exact(8);
    for w in &mut words {
        hash = step(hash, word(w));
    }
    for &b in words.remainder() {
        hash = step(hash, u64::from(b));
    }
    step(hash, bytes.len() as u64)
}

/// How much of a frame delivered to a router the trace hash takes: every header a
/// router reads or quotes (Ethernet, IPv6 or IPv4 with options, TCP with options, the
/// start of an ICMP error's quote), not the payload it forwards unread.
const ROUTER_SEEN: usize = 128;

/// The trace hash `hash` chained over one delivery: the time, the frame's length and
/// its bytes. A frame delivered to a router adds only its first [`ROUTER_SEEN`] bytes:
/// the payload it carries on is taken in whole where it is delivered to a host (or,
/// dropped on the way, its loss shows in what the hosts send after), so a byte that
/// differs still changes the hash, and a data segment's 1,460 bytes are not chained
/// again at every hop (three times across a dumbbell, most of the hash's time).
fn fingerprint_delivery(hash: u64, now: Instant, frame: &[u8], to_router: bool) -> u64 {
    let mut head = [0u8; 16];
    head[..8].copy_from_slice(&now.as_nanos().to_le_bytes());
    head[8..].copy_from_slice(&(frame.len() as u64).to_le_bytes());
    let seen = if to_router {
        &frame[..frame.len().min(ROUTER_SEEN)]
    } else {
        frame
    };
    fnv1a(fnv1a(hash, &head), seen)
}

/// Records `frame` at `now`, cut to `snaplen` bytes (pcap's incl_len < orig_len).
fn write_capture(
    pcap: &mut PcapWriter<BufWriter<File>>,
    now: Instant,
    frame: &[u8],
    snaplen: usize,
) -> io::Result<()> {
    if frame.len() <= snaplen {
        return pcap.write_packet(now, frame);
    }
    use std::io::Write;
    let nanos = now.as_nanos();
    let mut record = [0u8; 16];
    record[0..4].copy_from_slice(
        &u32::try_from(nanos / 1_000_000_000)
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    record[4..8].copy_from_slice(&((nanos % 1_000_000_000) as u32).to_le_bytes());
    record[8..12].copy_from_slice(&(snaplen as u32).to_le_bytes());
    record[12..16].copy_from_slice(&u32::try_from(frame.len()).unwrap_or(u32::MAX).to_le_bytes());
    let out = pcap.get_mut();
    out.write_all(&record)?;
    out.write_all(&frame[..snaplen])
}

/// The [`Secret`] of a simulated stack, derived from `seed`: its two halves are the
/// first two SplitMix64 outputs for `seed`, little-endian. The same seed gives the same
/// secret (a run replays byte for byte), so a simulated stack's ISNs and ports are as
/// guessable as its seed: fine in a simulation, never for a real stack.
pub fn secret_for_seed(seed: u64) -> Secret {
    let mut state = seed;
    let mut bytes = [0u8; Secret::LEN];
    for half in bytes.chunks_exact_mut(8) {
        half.copy_from_slice(&splitmix64(&mut state).to_le_bytes());
    }
    Secret::from_bytes(bytes)
}

/// A seed for a component, derived from the simulation seed and a label (SplitMix64).
fn derive_seed(seed: u64, label: u64) -> u64 {
    splitmix64_mix(seed ^ label.wrapping_mul(SPLITMIX64_GAMMA))
}

impl Sim {
    /// An empty simulation at virtual time zero. Every random choice of every host and
    /// link is derived from `seed`.
    pub fn new(seed: u64) -> Sim {
        Sim {
            seed,
            now: Instant::ZERO,
            hosts: Vec::new(),
            links: Vec::new(),
            steps: 0,
            trace_hash: FNV_OFFSET,
            frame: vec![0; 65536 + 64],
            observer: None,
            observed: Vec::new(),
            dirty: Vec::new(),
            is_dirty: Vec::new(),
            timer_at: Vec::new(),
            timers: BinaryHeap::new(),
            arrivals: BinaryHeap::new(),
            arrival_at: Vec::new(),
            activity: Vec::new(),
            touched: Vec::new(),
            touched_mark: Vec::new(),
            due: Vec::new(),
        }
    }

    /// The seed this simulation was built from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Current virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Events processed so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// A hash over every frame delivered so far and when (frames delivered to a
    /// router: their length and headers, the first 128 bytes): two runs with the same
    /// seed and the same application behaviour have the same trace hash.
    pub fn trace_hash(&self) -> u64 {
        self.trace_hash
    }

    /// Add a host running an imp stack. Its [`Secret`] is [`secret_for_seed`] of a seed
    /// derived from the simulation seed and the host's index.
    pub fn add_host(&mut self, name: &str, config: StackConfig) -> HostId {
        self.add_node(name, config, false)
    }

    /// Add a router: a host whose stack forwards between all its interfaces (each
    /// interface a link adds forwards). Its secret is derived as a host's.
    pub fn add_router(&mut self, name: &str, config: StackConfig) -> HostId {
        self.add_node(name, config, true)
    }

    fn add_node(&mut self, name: &str, config: StackConfig, router: bool) -> HostId {
        let id = HostId(self.hosts.len());
        let secret = secret_for_seed(derive_seed(self.seed, 0x1000 + id.0 as u64));
        self.hosts.push(Host {
            name: name.to_string(),
            stack: Stack::new(config, secret),
            router,
            ports: Vec::new(),
            cpu: None,
        });
        self.is_dirty.push(false);
        self.timer_at.push(None);
        self.activity.push(0);
        self.touched_mark.push(false);
        self.mark_dirty(id.0);
        id
    }

    fn mark_dirty(&mut self, host: usize) {
        if !self.is_dirty[host] {
            self.is_dirty[host] = true;
            self.dirty.push(host);
        }
    }

    /// How many frames and timers `host` has handled so far: application code can skip
    /// a host whose count has not moved since it last looked (nothing new can have
    /// arrived, and no timer has fired).
    pub fn activity(&self, host: HostId) -> u64 {
        self.activity[host.0]
    }

    /// Move the hosts whose [`Sim::activity`] moved since the last call (each once, in
    /// the order they first moved) into `out`: a driver of many applications visits
    /// only theirs instead of asking every one.
    pub fn take_touched(&mut self, out: &mut Vec<HostId>) {
        for host in self.touched.drain(..) {
            self.touched_mark[host] = false;
            out.push(HostId(host));
        }
    }

    /// A host handled a frame or fired its timers.
    fn bump_activity(&mut self, host: usize) {
        bump(
            &mut self.activity,
            &mut self.touched,
            &mut self.touched_mark,
            host,
        );
    }

    /// The host is a router (added with [`Sim::add_router`]).
    pub fn is_router(&self, host: HostId) -> bool {
        self.hosts[host.0].router
    }

    /// The host's interface on `link`, if it is one of the link's ends.
    pub fn iface_on(&self, host: HostId, link: LinkId) -> Option<IfaceId> {
        let h = &self.hosts[host.0];
        h.ports
            .iter()
            .find(|(_, l, _, _)| *l == link)
            .map(|&(iface, _, _, _)| iface)
    }

    /// The two ends of `link`: (host, interface) of the first and the second host
    /// given to [`Sim::connect`].
    pub fn link_ends(&self, link: LinkId) -> [(HostId, IfaceId); 2] {
        self.links[link.0].ends
    }

    /// Put a firewall on `link` that drops every ICMP datagram sent on it (both
    /// directions), as a filter that breaks path-MTU discovery does. The frames are
    /// counted ([`Sim::filtered`]) and never reach the link model or the capture.
    pub fn set_block_icmp(&mut self, link: LinkId, on: bool) {
        self.links[link.0].block_icmp = on;
    }

    /// ICMP frames sent by end `side` of `link` that its firewall dropped.
    pub fn filtered(&self, link: LinkId, side: usize) -> u64 {
        self.links[link.0].filtered[side]
    }

    /// Cut `link` (false) or mend it (true), both directions, from now on: while it is
    /// down every frame sent on it is lost (counted by [`Sim::lost_down`]); frames
    /// already on the wire still arrive. A partition is the links between two groups of
    /// hosts cut; the heal is the same links mended.
    pub fn set_link_up(&mut self, link: LinkId, up: bool) {
        self.links[link.0].down = !up;
    }

    /// Whether `link` is up (see [`Sim::set_link_up`]).
    pub fn is_link_up(&self, link: LinkId) -> bool {
        !self.links[link.0].down
    }

    /// Frames sent by end `side` of `link` that were lost because the link was down.
    pub fn lost_down(&self, link: LinkId, side: usize) -> u64 {
        self.links[link.0].lost_down[side]
    }

    /// Number of links.
    pub fn link_count(&self) -> usize {
        self.links.len()
    }

    /// The link model carrying frames sent by end `side` of `link` (its queue, its
    /// configuration, its counters).
    pub fn link_model(&self, link: LinkId, side: usize) -> &LinkModel {
        &self.links[link.0].models[side]
    }

    /// Change the behaviour of the direction of `link` carrying frames sent by end `side`
    /// (0 = the first host given to [`Sim::connect`]) from now on: a rate change, a loss
    /// episode, a longer path. [`LinkModel::set_config`] says what happens to frames
    /// already accepted (they keep their departure and arrival times, so a shorter delay
    /// lets later frames overtake them). The model keeps its random streams, so a run
    /// that changes links at the same instants replays exactly. Fails, changing nothing,
    /// when the settings are impossible.
    pub fn set_link_config(
        &mut self,
        link: LinkId,
        side: usize,
        config: LinkConfig,
    ) -> Result<(), LinkConfigError> {
        let model = &mut self.links[link.0].models[side];
        let index = 2 * link.0 + side;
        let before = self.arrival_at[index];
        model.set_config(config)?;
        // A queue discipline's next departure may have moved: register it (the heap is
        // lazy, so the entry that no longer matches is skipped).
        let after = model.next_arrival();
        self.arrival_at[index] = after;
        if let Some(t) = after
            && after != before
        {
            self.arrivals.push(Reverse((t, index)));
        }
        self.clean_tops();
        Ok(())
    }

    /// Bytes every host's stack and every link model keep for reuse rather than free
    /// ([`Stack::cached_bytes`], [`LinkModel::cached_bytes`]): all bounded, filling and
    /// draining with the traffic. A leak check compares what the allocator counts less
    /// this at two quiet moments.
    pub fn cached_bytes(&self) -> usize {
        let stacks: usize = self.hosts.iter().map(|h| h.stack.cached_bytes()).sum();
        let links: usize = self
            .links
            .iter()
            .flat_map(|l| l.models.iter())
            .map(LinkModel::cached_bytes)
            .sum();
        stacks + links
    }

    /// The host's name.
    pub fn host_name(&self, host: HostId) -> &str {
        &self.hosts[host.0].name
    }

    /// The host's stack.
    pub fn host(&self, host: HostId) -> &Stack {
        &self.hosts[host.0].stack
    }

    /// Hosts and routers added so far (their ids are `HostId(0..count)`).
    pub fn host_count(&self) -> usize {
        self.hosts.len()
    }

    /// The host's stack, to open sockets or change routes.
    pub fn host_mut(&mut self, host: HostId) -> &mut Stack {
        self.mark_dirty(host.0);
        &mut self.hosts[host.0].stack
    }

    /// Replace `host`'s stack by a fresh one built from `config`, as after a crash and
    /// reboot: every connection, socket, route and cache is gone; the interfaces that
    /// [`Sim::connect`] made are made again, in the same order (so their ids and MAC
    /// addresses are the same), with their addresses. Frames still on the wire reach
    /// the new stack, which answers them as a host that never heard of them (TCP
    /// resets). `incarnation` is mixed into the new stack's secret, so each restart
    /// draws new ISNs and ports, the same ones in every replay.
    pub fn reset_host(&mut self, host: HostId, config: StackConfig, incarnation: u64) {
        let label = 0x1000 + host.0 as u64 + (incarnation << 32);
        let secret = secret_for_seed(derive_seed(self.seed, label));
        let now = self.now;
        let mut stack = Stack::new(config, secret);
        let h = &self.hosts[host.0];
        for &(iface, link, side, addr) in &h.ports {
            let mtu = self.links[link.0].models[side].config().mtu;
            let ip_mtu = mtu.saturating_sub(ethernet::HEADER_LEN);
            let made = stack.add_interface(IfaceConfig::new(iface_mac(host, link), ip_mtu));
            debug_assert_eq!(made, iface, "interfaces are made again in order");
            stack.add_address(now, made, addr);
            if h.router {
                stack.set_forwarding(made, true);
            }
        }
        if let Some(cpu) = &mut self.hosts[host.0].cpu {
            // The new stack's counters start again from zero.
            stack.set_loopback_by_driver(true);
            cpu.seen = Work::default();
        }
        self.hosts[host.0].stack = stack;
        self.mark_dirty(host.0);
    }

    /// Give `host` a CPU with this cost model (None: the host costs no time, the
    /// default). From now on the work its stack does is charged (see [`crate::cpu`]):
    /// received frames wait in its receive buffers for the CPU, and what it sends
    /// leaves when the work that sent it is done. The host carries its own looped
    /// datagrams then (see [`crate::cpu`]): they are charged, and wait for the CPU.
    pub fn set_cpu(&mut self, host: HostId, profile: Option<CpuProfile>) {
        let h = &mut self.hosts[host.0];
        h.stack.set_loopback_by_driver(profile.is_some());
        h.cpu = profile.map(|p| Cpu::new(p, h.work_totals()));
        self.mark_dirty(host.0);
    }

    /// When `host`'s CPU is done with the work charged so far (None without a cost
    /// model): an application on the host runs when its CPU is free.
    pub fn cpu_busy_until(&self, host: HostId) -> Option<Instant> {
        self.hosts[host.0].cpu.as_ref().map(|c| c.busy_until)
    }

    /// Keep the timestamps of every datagram `host` loops from now on (a host with a
    /// CPU; nothing happens to one without): [`Sim::loopback_log`].
    pub fn record_loopback(&mut self, host: HostId) {
        if let Some(cpu) = &mut self.hosts[host.0].cpu {
            cpu.loop_next = 0;
            cpu.loop_log = Some(Vec::new());
        }
    }

    /// The looped datagrams' timestamps kept since [`Sim::record_loopback`].
    pub fn loopback_log(&self, host: HostId) -> &[LoopRecord] {
        self.hosts[host.0]
            .cpu
            .as_ref()
            .and_then(|c| c.loop_log.as_deref())
            .unwrap_or(&[])
    }

    /// What `host`'s CPU did so far (None without a cost model).
    pub fn cpu_report(&self, host: HostId) -> Option<CpuReport> {
        self.hosts[host.0].cpu.as_ref().map(|c| c.report)
    }

    /// `host`'s CPU cost model (None: the host costs no time).
    pub fn cpu_profile(&self, host: HostId) -> Option<&CpuProfile> {
        self.hosts[host.0].cpu.as_ref().map(|c| &c.profile)
    }

    /// Charge `host`'s CPU for application work (a translation, a computation): first
    /// the work its stack did since the CPU last charged (the calls the application
    /// just made, what they sent stamped with the end of that work), then `cost`.
    /// Returns when the CPU is done with both; None (and nothing happens) for a host
    /// without a cost model.
    pub fn charge_cpu(&mut self, host: HostId, cost: Duration) -> Option<Instant> {
        self.hosts[host.0].cpu.as_ref()?;
        // Frames go to the outbox; a capture error shows again at the next drain.
        self.drain_cpu_host(host.0).ok();
        let now = self.now;
        let cpu = self.hosts[host.0].cpu.as_mut()?;
        Some(cpu.spend(now, cost))
    }

    /// Join two hosts with a point-to-point link: a new interface on each side (MTU
    /// from the link config, minus the Ethernet header), each with its address and the
    /// connected route. Frames in each direction pass their own copy of the link model.
    /// Fails, changing nothing, when the link settings are impossible.
    pub fn connect(
        &mut self,
        a: HostId,
        a_addr: Cidr,
        b: HostId,
        b_addr: Cidr,
        config: LinkConfig,
    ) -> Result<LinkId, LinkConfigError> {
        let seed = derive_seed(self.seed, 0x2000 + 2 * self.links.len() as u64);
        self.connect_seeded(a, a_addr, b, b_addr, config, seed)
    }

    /// [`Sim::connect`], with the link model's random choices drawn from `link_seed`
    /// instead of a seed derived from the simulation's: two links given the same seed
    /// lose, reorder and corrupt the same frames (by position), so experiments that
    /// differ in one setting see the same impairments.
    pub fn connect_seeded(
        &mut self,
        a: HostId,
        a_addr: Cidr,
        b: HostId,
        b_addr: Cidr,
        config: LinkConfig,
        link_seed: u64,
    ) -> Result<LinkId, LinkConfigError> {
        config.validate()?;
        let link = LinkId(self.links.len());
        let ip_mtu = config.mtu.saturating_sub(ethernet::HEADER_LEN);
        let mut ends = Vec::with_capacity(2);
        for (side, (host, addr)) in [(a, a_addr), (b, b_addr)].into_iter().enumerate() {
            let mac = iface_mac(host, link);
            let now = self.now;
            let h = &mut self.hosts[host.0];
            let iface = h.stack.add_interface(IfaceConfig::new(mac, ip_mtu));
            h.stack.add_address(now, iface, addr);
            if h.router {
                h.stack.set_forwarding(iface, true);
            }
            h.ports.push((iface, link, side, addr));
            ends.push((host, iface));
            self.mark_dirty(host.0);
        }
        let ends = [ends[0], ends[1]];
        // The reverse direction's seed is derived from the forward one (for the default
        // seeds this is the same 0x2001 + 2 * link label as before).
        let reverse = if link_seed == derive_seed(self.seed, 0x2000 + 2 * link.0 as u64) {
            derive_seed(self.seed, 0x2001 + 2 * link.0 as u64)
        } else {
            derive_seed(link_seed, 1)
        };
        let models = [
            LinkModel::new(config, link_seed),
            LinkModel::new(config, reverse),
        ];
        self.arrival_at
            .extend(models.iter().map(LinkModel::next_arrival));
        self.observed.push(true);
        self.links.push(Link {
            ends,
            models,
            pcap: None,
            snaplen: usize::MAX,
            block_icmp: false,
            filtered: [0; 2],
            down: false,
            lost_down: [0; 2],
        });
        Ok(link)
    }

    /// Capture every frame sent on `link` (both directions, at the sender) to a pcap
    /// file that Wireshark and tshark read.
    pub fn capture(&mut self, link: LinkId, path: &Path) -> io::Result<()> {
        self.capture_snaplen(link, path, usize::MAX)
    }

    /// [`Sim::capture`], keeping only the first `snaplen` bytes of each frame (headers
    /// are enough for a time-sequence graph, and long runs stay small on disk).
    pub fn capture_snaplen(&mut self, link: LinkId, path: &Path, snaplen: usize) -> io::Result<()> {
        let file = BufWriter::new(File::create(path)?);
        self.links[link.0].pcap = Some(PcapWriter::new(file)?);
        self.links[link.0].snaplen = snaplen.max(1);
        Ok(())
    }

    /// Show every frame sent and delivered on every link to `observer` (time-sequence
    /// traces, per-flow statistics); `None` removes it. Observing changes nothing.
    pub fn set_observer(&mut self, observer: Option<FrameObserver>) {
        self.observer = observer;
    }

    /// Show the observer the frames of `link` (true, every link's default) or not: an
    /// observer that ignores most links (a tracer following a few flows) is not called
    /// for their frames at all.
    pub fn set_observed(&mut self, link: LinkId, on: bool) {
        self.observed[link.0] = on;
    }

    /// Flush every capture file.
    pub fn flush_captures(&mut self) -> io::Result<()> {
        for link in &mut self.links {
            if let Some(pcap) = &mut link.pcap {
                pcap.flush()?;
            }
        }
        Ok(())
    }

    /// The link model's counters for frames sent by end `side` (0 = the first host given
    /// to [`Sim::connect`]).
    pub fn link_stats(&self, link: LinkId, side: usize) -> &LinkStats {
        self.links[link.0].models[side].stats()
    }

    /// The address of a host's first interface address on `link`, if any.
    pub fn address_on(&self, host: HostId, link: LinkId) -> Option<Ipv4Addr> {
        let h = &self.hosts[host.0];
        let (_, _, _, cidr) = h.ports.iter().find(|(_, l, _, _)| *l == link)?;
        Some(cidr.address)
    }

    /// Put on the wire, at the current instant, every frame the hosts' stacks want to
    /// send now: what a runtime does after each socket call, so that an application's
    /// writes between two steps leave one by one instead of together.
    pub fn transmit_now(&mut self) -> io::Result<()> {
        self.drain_transmits()
    }

    /// Move every frame the touched hosts want to send onto their links (in host
    /// order), and register their timers.
    fn drain_transmits(&mut self) -> io::Result<()> {
        if self.dirty.is_empty() {
            return Ok(());
        }
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.sort_unstable();
        let mut result = Ok(());
        for &host in &dirty {
            self.is_dirty[host] = false;
            if result.is_ok() {
                result = self.drain_host(host);
            }
            self.register_timer(host);
        }
        dirty.clear();
        self.dirty = dirty;
        self.clean_tops();
        result
    }

    /// Move every frame one host wants to send onto its link (a host with a CPU:
    /// into its outbox, until its CPU has done the work).
    fn drain_host(&mut self, index: usize) -> io::Result<()> {
        if self.hosts[index].cpu.is_some() {
            return self.drain_cpu_host(index);
        }
        let now = self.now;
        let mut buf = std::mem::take(&mut self.frame);
        let mut result = Ok(());
        while let Some(tx) = self.hosts[index].stack.poll_transmit(now, &mut buf) {
            result = self.put_on_link(index, tx.iface, &buf[..tx.len]);
            if result.is_err() {
                break;
            }
        }
        self.frame = buf;
        result
    }

    /// A host with a CPU: what it sends goes to its outbox, stamped with the time its
    /// CPU finishes the work done since it last charged (this output included).
    fn drain_cpu_host(&mut self, index: usize) -> io::Result<()> {
        let now = self.now;
        let mut buf = std::mem::take(&mut self.frame);
        let host = &mut self.hosts[index];
        let mut sent = Vec::new();
        while let Some(tx) = host.stack.poll_transmit(now, &mut buf) {
            let cpu = host.cpu.as_mut().expect("a host with a CPU");
            let mut frame = cpu.spare.pop().unwrap_or_default();
            frame.clear();
            frame.extend_from_slice(&buf[..tx.len]);
            sent.push((tx.iface, frame));
        }
        self.frame = buf;
        let totals = host.work_totals();
        let cpu = host.cpu.as_mut().expect("a host with a CPU");
        let done = cpu.charge(now, totals);
        for (iface, frame) in sent {
            cpu.outbox.push_back((done, iface, frame));
        }
        self.release_outbox(index)
    }

    /// Put on the links the frames of a host with a CPU whose work is done.
    fn release_outbox(&mut self, index: usize) -> io::Result<()> {
        let now = self.now;
        loop {
            let Some(cpu) = self.hosts[index].cpu.as_mut() else {
                return Ok(());
            };
            if cpu.outbox.front().is_none_or(|&(t, _, _)| t > now) {
                return Ok(());
            }
            let Some((_, iface, frame)) = cpu.outbox.pop_front() else {
                return Ok(());
            };
            if iface == IfaceId::LOOPBACK {
                // The loop: straight into a receive buffer, the CPU takes it in turn.
                cpu.receive_looped(now, &frame);
                cpu.spare.push(frame);
                continue;
            }
            let result = self.put_on_link(index, iface, &frame);
            if let Some(cpu) = self.hosts[index].cpu.as_mut() {
                cpu.spare.push(frame);
            }
            result?;
        }
    }

    /// A host with a CPU whose time has come: frames whose work is done leave, and
    /// while the CPU is free it takes the next received frame.
    fn run_cpu(&mut self, index: usize) {
        let now = self.now;
        self.release_outbox(index).ok();
        loop {
            let host = &mut self.hosts[index];
            let Some(cpu) = host.cpu.as_mut() else {
                return;
            };
            if cpu.busy_until > now {
                return;
            }
            let Some((iface, frame)) = cpu.rx.pop_front() else {
                return;
            };
            let looped = if iface == IfaceId::LOOPBACK {
                let record = cpu.take_looped(now);
                host.stack.handle_looped_packet(now, &frame);
                record
            } else {
                host.stack.handle_frame(now, iface, &frame);
                None
            };
            if let Some(cpu) = host.cpu.as_mut() {
                cpu.spare.push(frame);
            }
            self.bump_activity(index);
            self.drain_cpu_host(index).ok();
            if let (Some(record), Some(cpu)) = (looped, self.hosts[index].cpu.as_mut()) {
                cpu.done_looped(record);
            }
        }
    }

    /// Put a frame a host sent on the link its interface `iface` is on.
    fn put_on_link(&mut self, index: usize, iface: IfaceId, frame: &[u8]) -> io::Result<()> {
        let now = self.now;
        let host = &self.hosts[index];
        // The simulator made the host's interfaces in order, so `iface` is usually at
        // its own index (a router of many links: no search).
        let port = match host.ports.get(iface.index()) {
            Some(port) if port.0 == iface => Some(port),
            _ => host.ports.iter().find(|(i, _, _, _)| *i == iface),
        };
        let Some(&(_, link, side, _)) = port else {
            return Ok(());
        };
        if let Some(observer) = &mut self.observer
            && self.observed[link.0]
        {
            observer(&FrameEvent {
                time: now,
                link,
                from_side: side,
                kind: FrameKind::Sent,
                frame,
            });
        }
        let l = &mut self.links[link.0];
        if l.down {
            l.lost_down[side] += 1;
            return Ok(());
        }
        if l.block_icmp && is_icmp(frame) {
            l.filtered[side] += 1;
            return Ok(());
        }
        if let Some(pcap) = &mut l.pcap {
            write_capture(pcap, now, frame, l.snaplen)?;
        }
        let model = &mut l.models[side];
        let index = 2 * link.0 + side;
        let before = self.arrival_at[index];
        crate::alloc_count::uncounted(|| model.submit(now, frame));
        let after = model.next_arrival();
        self.arrival_at[index] = after;
        if let Some(t) = after
            && after != before
        {
            Sim::push_arrival_in(&mut self.arrivals, &self.links, t, index);
        }
        Ok(())
    }

    /// Put `frame` on `link` as if the host on `side` (0: the link's `a`) had sent it
    /// now: an attacker or a traffic generator that is no stack (spoofed sources,
    /// malformed frames). It passes the link model like any other frame.
    pub fn inject(&mut self, link: LinkId, side: usize, frame: &[u8]) {
        let now = self.now;
        let Some(l) = self.links.get_mut(link.0) else {
            return;
        };
        let side = side.min(1);
        if let Some(pcap) = &mut l.pcap {
            let _ = write_capture(pcap, now, frame, l.snaplen);
        }
        let model = &mut l.models[side];
        let index = 2 * link.0 + side;
        let before = self.arrival_at[index];
        crate::alloc_count::uncounted(|| model.submit(now, frame));
        let after = model.next_arrival();
        self.arrival_at[index] = after;
        if let Some(t) = after
            && after != before
        {
            self.push_arrival(t, index);
        }
    }

    /// The MAC address of `host`'s interface on `link`.
    pub fn mac_on(&self, host: HostId, link: LinkId) -> Option<ethernet::Address> {
        self.iface_on(host, link)?;
        Some(iface_mac(host, link))
    }

    /// Records a host's current timer in the heap if it changed.
    fn register_timer(&mut self, host: usize) {
        let timer = self.hosts[host].next_timer();
        if timer != self.timer_at[host] {
            self.timer_at[host] = timer;
            if let Some(t) = timer {
                self.timers.push(Reverse((t, host)));
                if self.timers.len() > STALE_FACTOR * (self.hosts.len() + STALE_MIN) {
                    self.timers = (self.timer_at.iter().enumerate())
                        .filter_map(|(host, t)| t.map(|t| Reverse((t, host))))
                        .collect();
                }
            }
        }
    }

    /// Records a link direction's next arrival in the heap. Like the timer heap, it
    /// is rebuilt from the models when stale entries (a frame that arrived before an
    /// entry's time was reached, a flood of frames each moving the next arrival)
    /// outnumber the live ones: its memory stays proportional to the network.
    fn push_arrival(&mut self, t: Instant, model: usize) {
        Sim::push_arrival_in(&mut self.arrivals, &self.links, t, model);
    }

    /// [`Sim::push_arrival`] on the fields, for callers holding another borrow.
    fn push_arrival_in(
        arrivals: &mut BinaryHeap<Reverse<(Instant, usize)>>,
        links: &[Link],
        t: Instant,
        model: usize,
    ) {
        arrivals.push(Reverse((t, model)));
        if arrivals.len() > STALE_FACTOR * (2 * links.len() + STALE_MIN) {
            *arrivals = (links.iter().enumerate())
                .flat_map(|(index, link)| {
                    (0..2).filter_map(move |side| {
                        let t = link.models[side].next_arrival()?;
                        Some(Reverse((t, 2 * index + side)))
                    })
                })
                .collect();
        }
    }

    /// Drops heap tops that are no longer current, so that both tops are exact.
    fn clean_tops(&mut self) {
        while let Some(&Reverse((t, host))) = self.timers.peek() {
            if self.timer_at[host] == Some(t) {
                break;
            }
            self.timers.pop();
        }
        while let Some(&Reverse((t, model))) = self.arrivals.peek() {
            if self.arrival_at[model] == Some(t) {
                break;
            }
            self.arrivals.pop();
        }
    }

    /// The next instant anything is scheduled: a frame arriving or a stack timer.
    pub fn next_event(&self) -> Option<Instant> {
        if !self.dirty.is_empty() {
            // Touched hosts' timers are not registered yet: look at every host.
            let links = self
                .links
                .iter()
                .flat_map(|l| l.models.iter().filter_map(LinkModel::next_arrival));
            let timers = self.hosts.iter().filter_map(Host::next_timer);
            return links.chain(timers).min();
        }
        let arrival = self.arrivals.peek().map(|r| r.0.0);
        let timer = self.timers.peek().map(|r| r.0.0);
        match (arrival, timer) {
            (Some(a), Some(t)) => Some(a.min(t)),
            (a, t) => a.or(t),
        }
    }

    /// Process the next event (advancing virtual time to it): deliver the frames due,
    /// fire the timers due, and put what the stacks answer on the wire. Returns false
    /// when nothing is scheduled.
    pub fn step(&mut self) -> bool {
        self.step_until(None)
    }

    fn step_until(&mut self, wake: Option<Instant>) -> bool {
        self.drain_transmits().ok();
        let next = match (self.next_event(), wake) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => match a.or(b) {
                Some(t) => t,
                None => return false,
            },
        };
        self.now = self.now.max(next);
        self.steps += 1;
        self.deliver_due();
        self.fire_timers();
        // The heaps' tops are made exact once per step: by the drain when a host was
        // touched, else here.
        if self.dirty.is_empty() {
            self.clean_tops();
        }
        self.drain_transmits().ok();
        true
    }

    /// Fires the timers due now: registered ones, and those of hosts touched in this
    /// step (not registered yet), in host order.
    fn fire_timers(&mut self) {
        let now = self.now;
        let mut due = std::mem::take(&mut self.due);
        while let Some(&Reverse((t, host))) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            if self.timer_at[host] == Some(t) {
                due.push(host);
            }
        }
        due.extend(self.dirty.iter().copied());
        due.sort_unstable();
        due.dedup();
        for &host in &due {
            if self.hosts[host].cpu.is_some() {
                self.run_cpu(host);
                self.timer_at[host] = None;
                self.mark_dirty(host);
            }
            let stack = &mut self.hosts[host].stack;
            if stack.poll_timeout().is_some_and(|t| t <= now) {
                stack.handle_timeout(now);
                self.bump_activity(host);
                self.timer_at[host] = None;
                self.mark_dirty(host);
            }
        }
        due.clear();
        self.due = due;
    }

    /// Delivers every frame due now, link by link (in link order, then side).
    fn deliver_due(&mut self) {
        let now = self.now;
        let mut due = std::mem::take(&mut self.due);
        while let Some(&Reverse((t, model))) = self.arrivals.peek() {
            if t > now {
                break;
            }
            self.arrivals.pop();
            if self.arrival_at[model] == Some(t) {
                due.push(model);
            }
        }
        due.sort_unstable();
        due.dedup();
        for &model in &due {
            self.deliver_model(model / 2, model % 2);
        }
        due.clear();
        self.due = due;
    }

    /// Delivers the frames due now on one direction of one link.
    fn deliver_model(&mut self, index: usize, side: usize) {
        let now = self.now;
        let link = &mut self.links[index];
        let (dst_host, dst_iface) = link.ends[1 - side];
        let observed = self.observed[index];
        let to_router = self.hosts[dst_host.0].router;
        // The link's memory (frames on the wire, its queues) is the simulation's, not
        // the hosts': memory measurements (`alloc_count`) leave it out.
        while let Some(frame) =
            crate::alloc_count::uncounted(|| link.models[side].poll_deliver(now))
        {
            self.trace_hash = fingerprint_delivery(self.trace_hash, now, &frame, to_router);
            if let Some(observer) = &mut self.observer
                && observed
            {
                observer(&FrameEvent {
                    time: now,
                    link: LinkId(index),
                    from_side: side,
                    kind: FrameKind::Delivered,
                    frame: &frame,
                });
            }
            let host = &mut self.hosts[dst_host.0];
            if let Some(cpu) = &mut host.cpu {
                cpu.receive(dst_iface, &frame);
            } else {
                host.stack.handle_frame(now, dst_iface, &frame);
                bump(
                    &mut self.activity,
                    &mut self.touched,
                    &mut self.touched_mark,
                    dst_host.0,
                );
            }
            crate::alloc_count::uncounted(|| link.models[side].recycle(frame));
        }
        if !self.is_dirty[dst_host.0] {
            self.is_dirty[dst_host.0] = true;
            self.dirty.push(dst_host.0);
        }
        // Link-level retransmission: acknowledgements cross to the other direction,
        // whose next event may move.
        if link.models[side].config().arq.is_some() {
            let reverse = 2 * index + 1 - side;
            let other = self.arrival_at[reverse];
            let [m0, m1] = &mut link.models;
            let moved = crate::alloc_count::uncounted(|| LinkModel::exchange_arq(m0, m1, now));
            let after = link.models[1 - side].next_arrival();
            self.arrival_at[reverse] = after;
            if moved
                && let Some(t) = after
                && Some(t) != other
            {
                self.push_arrival(t, reverse);
            }
        }
        let next = self.links[index].models[side].next_arrival();
        self.arrival_at[2 * index + side] = next;
        if let Some(t) = next {
            self.push_arrival(t, 2 * index + side);
        }
    }

    /// Step until nothing is scheduled, at most `max_steps` times.
    pub fn run_until_idle(&mut self, max_steps: u64) -> Result<RunSummary, SimError> {
        let start = self.steps;
        while self.step() {
            if self.steps - start > max_steps {
                return Err(self.cap_error(max_steps));
            }
        }
        Ok(self.summary())
    }

    /// Step until virtual time reaches `deadline` (or nothing is scheduled).
    pub fn run_until(&mut self, deadline: Instant, max_steps: u64) -> Result<RunSummary, SimError> {
        let start = self.steps;
        while self.next_event().is_some_and(|t| t <= deadline) {
            self.step();
            if self.steps - start > max_steps {
                return Err(self.cap_error(max_steps));
            }
        }
        self.now = self.now.max(deadline);
        Ok(self.summary())
    }

    /// Run the experiment: `app` is called once at the start and after every event, and
    /// drives the hosts' sockets; it says when it is [`Flow::Done`]. Fails (naming the
    /// seed) if the step cap or the virtual-time limit is hit, or if the network goes
    /// idle before the application is done.
    pub fn run<F>(
        &mut self,
        max_steps: u64,
        time_limit: Instant,
        mut app: F,
    ) -> Result<RunSummary, SimError>
    where
        F: FnMut(&mut Sim) -> Flow,
    {
        let start = self.steps;
        let mut wake: Option<Instant> = None;
        loop {
            // A wake-up already reached is spent: it must not hide a later one the
            // application asks for now.
            if wake.is_some_and(|w| w <= self.now) {
                wake = None;
            }
            match app(self) {
                Flow::Done => return Ok(self.summary()),
                Flow::Continue => {}
                Flow::WakeAt(t) => wake = Some(wake.map_or(t, |w| w.min(t)).max(self.now)),
            }
            if wake.is_some_and(|w| w <= self.now) {
                wake = None;
            }
            if self.now > time_limit {
                return Err(SimError::TimeLimit {
                    seed: self.seed,
                    at: time_limit,
                });
            }
            if !self.step_until(wake) {
                return Err(SimError::Deadlock {
                    seed: self.seed,
                    at: self.now,
                });
            }
            if self.steps - start > max_steps {
                return Err(self.cap_error(max_steps));
            }
        }
    }

    fn cap_error(&self, steps: u64) -> SimError {
        SimError::StepCapExceeded {
            seed: self.seed,
            steps,
            at: self.now,
        }
    }

    fn summary(&self) -> RunSummary {
        RunSummary {
            steps: self.steps,
            end: self.now,
        }
    }
}

/// The locally administered MAC address of `host`'s interface on `link`.
fn iface_mac(host: HostId, link: LinkId) -> ethernet::Address {
    ethernet::Address([
        0x02,
        0x00,
        (host.0 >> 8) as u8,
        host.0 as u8,
        (link.0 >> 8) as u8,
        link.0 as u8,
    ])
}

#[cfg(test)]
mod tests {
    use super::{ROUTER_SEEN, fingerprint_delivery, fnv1a};
    use impnet_core::Instant;

    #[test]
    fn a_delivery_to_a_router_sees_its_headers_and_length_a_host_every_byte() {
        let frame: Vec<u8> = (0..1514u32).map(|i| (i * 7 + 3) as u8).collect();
        let at = Instant::from_nanos(1_000_000);
        for to_router in [false, true] {
            let whole = fingerprint_delivery(1, at, &frame, to_router);
            let later = fingerprint_delivery(1, Instant::from_nanos(1_000_001), &frame, to_router);
            assert_ne!(whole, later, "the time (router: {to_router})");
            let mut header = frame.clone();
            header[ROUTER_SEEN - 1] ^= 1;
            assert_ne!(whole, fingerprint_delivery(1, at, &header, to_router));
            let shorter = fingerprint_delivery(1, at, &frame[..1513], to_router);
            assert_ne!(whole, shorter, "the length (router: {to_router})");
            let mut payload = frame.clone();
            payload[1000] ^= 1;
            let changed = fingerprint_delivery(1, at, &payload, to_router);
            assert_eq!(
                whole == changed,
                to_router,
                "a payload byte (router: {to_router})"
            );
        }
    }

    #[test]
    fn the_fingerprint_sees_every_byte_its_place_and_the_length() {
        let data: Vec<u8> = (0..1514u32).map(|i| (i * 31 + i / 7) as u8).collect();
        let whole = fnv1a(0xcbf2_9ce4_8422_2325, &data);
        assert_eq!(whole, fnv1a(0xcbf2_9ce4_8422_2325, &data), "not a function");
        assert_ne!(whole, fnv1a(0, &data), "the chain is not carried");
        // Every byte: in a block's lanes, in the tail words, in the tail bytes.
        for at in [0, 8, 31, 32, 100, 1503, 1505, 1513] {
            let mut changed = data.clone();
            changed[at] ^= 0x40;
            assert_ne!(fnv1a(0xcbf2_9ce4_8422_2325, &changed), whole, "byte {at}");
        }
        // Words swapped within a block (two lanes), and two blocks swapped.
        let mut swapped = data.clone();
        swapped.copy_within(0..8, 8);
        swapped[..8].copy_from_slice(&data[8..16]);
        assert_ne!(fnv1a(0xcbf2_9ce4_8422_2325, &swapped), whole);
        let mut blocks = data.clone();
        blocks[..32].copy_from_slice(&data[32..64]);
        blocks[32..64].copy_from_slice(&data[..32]);
        assert_ne!(fnv1a(0xcbf2_9ce4_8422_2325, &blocks), whole);
        // A zero byte more is another frame.
        let mut longer = data.clone();
        longer.push(0);
        assert_ne!(fnv1a(0xcbf2_9ce4_8422_2325, &longer), whole);
    }
}
