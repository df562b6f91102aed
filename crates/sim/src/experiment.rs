//! Running a [`Scenario`]: build the hosts and links, drive every flow's applications
//! in virtual time, trace the packets, and measure what each flow got.
//!
//! The [`Report`] is deterministic: the same scenario and seed give the same report,
//! so its JSON is byte-for-byte the same (it holds no wall-clock time).

use std::cell::RefCell;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::rc::Rc;

use impnet_core::tcp::{TcpError, TcpHandle};
use impnet_core::{Duration, IcmpHandle, Instant, StackConfig};
use serde::Serialize;

use crate::analyze::{Analyzer, Connection};
use crate::bulk::{Pattern, StreamHash};
use crate::scenario::{FlowKind, FlowSpec, NodeKind, Scenario};
use crate::stream::{StreamCheck, StreamPattern};
use crate::trace::{FlowTrace, QueueTrace, Tracer};

use crate::cpu::CpuReport;
use crate::{Flow, HostId, LinkId, RunSummary, Sim};
pub use routers::{DropReport, InterfaceReport, QueueReport, RouterReport, jain_index};

/// How far a run has got, for a progress bar.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Virtual time now.
    pub now: Duration,
    /// The scenario's duration.
    pub duration: Duration,
    /// Fraction (0..=1) of the work done: the furthest of virtual time and bulk bytes.
    pub fraction: f64,
}

/// What a run produced: the report and, per flow, the trace for the plots.
#[derive(Debug)]
pub struct Outcome {
    /// The measured results.
    pub report: Report,
    /// Per flow (same order as the report's flows): the packet trace, empty for ping.
    pub traces: Vec<FlowTrace>,
    /// Every router's egress queues over time (the routers' interfaces, in order).
    pub queues: Vec<QueueTrace>,
}

/// The summary written as JSON.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Scenario name.
    pub scenario: String,
    /// Scenario description.
    pub description: String,
    /// Seed of the run.
    pub seed: u64,
    /// Virtual seconds simulated.
    pub end_s: f64,
    /// Simulator events processed.
    pub steps: u64,
    /// Hash over every frame delivered and when (hex).
    pub trace_hash: String,
    /// Per link.
    pub links: Vec<LinkReport>,
    /// Per host: TCP counters.
    pub hosts: Vec<HostReport>,
    /// Per flow.
    pub flows: Vec<FlowReport>,
    /// Per router: forwarding, drops by reason and the egress queue per interface
    /// (absent without routers).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub routers: Vec<RouterReport>,
    /// Jain's fairness index over the bulk flows' goodput (only in scenarios with
    /// routers, where flows share links).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fairness: Option<f64>,
    /// The scenario's `[[ladder]]`: each rung's goodput beside its historical figure.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ladder: Vec<RungReport>,
}

/// One link's settings and counters.
#[derive(Debug, Clone, Serialize)]
pub struct LinkReport {
    /// Link name.
    pub name: String,
    /// First host.
    pub a: String,
    /// Second host.
    pub b: String,
    /// Bits per second (0: infinite).
    pub rate_bps: u64,
    /// One-way propagation delay, ms.
    pub delay_ms: f64,
    /// IP MTU.
    pub mtu: usize,
    /// Counters of the direction a -> b, then b -> a.
    pub directions: Vec<DirectionReport>,
}

/// Counters of one direction of a link.
#[derive(Debug, Clone, Serialize)]
pub struct DirectionReport {
    /// Sending host.
    pub from: String,
    /// Frames offered.
    pub submitted: u64,
    /// Frames delivered (duplicates included).
    pub delivered: u64,
    /// Frames lost on the wire (random or burst loss).
    pub lost: u64,
    /// Frames tail-dropped by the queue.
    pub queue_drops: u64,
    /// Frames dropped for exceeding the MTU.
    pub oversize_drops: u64,
    /// Copies duplicated.
    pub duplicated: u64,
    /// Copies held back (reordered).
    pub reordered: u64,
    /// Copies with a flipped bit.
    pub corrupted: u64,
    /// Bytes delivered.
    pub bytes_delivered: u64,
    /// Frames the policer dropped (`police` in the file).
    pub police_drops: u64,
    /// Frames the policer passed marked.
    pub police_marked: u64,
    /// Frames the shaper made wait (`shape` in the file).
    pub shaped: u64,
    /// With link-level retransmission (`arq` in the file): I-frames sent again.
    pub arq_retransmitted: u64,
    /// With link-level retransmission: frames the link gave up on (lost).
    pub arq_abandoned: u64,
}

/// One host's TCP counters.
#[derive(Debug, Clone, Serialize)]
pub struct HostReport {
    /// Host name.
    pub name: String,
    /// Segments sent.
    pub segments_out: u64,
    /// Segments retransmitted.
    pub retransmitted: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Fast retransmits (entries into recovery).
    pub fast_retransmits: u64,
    /// Delayed ACKs sent by the timer.
    pub delayed_acks: u64,
    /// Segments that arrived marked Congestion Experienced (ECN connections).
    pub ecn_ce_received: u64,
    /// Congestion-window reductions for an ECN-Echo (at most one per window).
    pub ecn_cuts: u64,
    /// Connections that started from an earlier connection's window and RTT to the
    /// same host (`share_control_blocks`, RFC 9040).
    pub shared_blocks_used: u64,
}

/// RTT statistics over samples.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RttStats {
    /// Samples.
    pub samples: u64,
    /// Smallest, ms.
    pub min_ms: f64,
    /// Mean, ms.
    pub mean_ms: f64,
    /// Largest, ms.
    pub max_ms: f64,
    /// Standard deviation, ms.
    pub stddev_ms: f64,
}

impl RttStats {
    fn of(samples: impl Iterator<Item = f64>) -> RttStats {
        let v: Vec<f64> = samples.collect();
        if v.is_empty() {
            return RttStats::default();
        }
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
        RttStats {
            samples: v.len() as u64,
            min_ms: round(v.iter().copied().fold(f64::INFINITY, f64::min)),
            mean_ms: round(mean),
            max_ms: round(v.iter().copied().fold(0.0, f64::max)),
            stddev_ms: round(var.sqrt()),
        }
    }
}

/// A ping's smoothed round-trip time and mean deviation, the estimator of RFC 793's
/// SRTT with Jacobson's (1988) gains, as 4.3BSD-Tahoe's TCP and KA9Q's ping kept them:
/// the first sample sets `srtt` (and `mdev` to 0); each later sample `m` gives
/// `err = m - srtt`, `srtt += err / 8`, `mdev += (|err| - mdev) / 4`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct SmoothedRtt {
    /// Smoothed RTT, ms.
    pub srtt_ms: f64,
    /// Mean deviation, ms.
    pub mdev_ms: f64,
}

impl SmoothedRtt {
    /// The estimate after `samples` (ms, in arrival order); `None` without samples.
    pub fn of(mut samples: impl Iterator<Item = f64>) -> Option<SmoothedRtt> {
        let first = samples.next()?;
        let (srtt, mdev) = samples.fold((first, 0.0), |(srtt, mdev), m| {
            let err: f64 = m - srtt;
            (srtt + err / 8.0, mdev + (err.abs() - mdev) / 4.0)
        });
        Some(SmoothedRtt {
            srtt_ms: round(srtt),
            mdev_ms: round(mdev),
        })
    }
}

/// What one flow got.
#[derive(Debug, Clone, Serialize)]
pub struct FlowReport {
    /// Flow name.
    pub name: String,
    /// `bulk`, `rr` or `ping`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Opening host.
    pub from: String,
    /// Other host.
    pub to: String,
    /// Link rate, bits per second (0: infinite).
    pub rate_bps: u64,
    /// The flow finished before the run ended.
    pub completed: bool,
    /// Seconds from the flow's start to its end (or to the end of the run).
    pub seconds: f64,
    /// Application payload bytes delivered (bulk: to the receiver, as read; rr: both
    /// ways; ping: echo data returned).
    pub bytes: u64,
    /// Payload bits per second over `seconds` (rr counts both directions).
    pub goodput_bps: f64,
    /// Goodput in bytes per second.
    pub goodput_bytes_per_s: f64,
    /// Goodput as a percentage of the link rate (rr: of both directions' rates).
    pub capacity_pct: f64,
    /// The best goodput the segments (and fragments) on the wire allow: link rate
    /// times payload / frame bytes of the first transmissions.
    pub bound_bps: f64,
    /// Goodput as a percentage of that bound (rr: transactions per second as a
    /// percentage of `transactions_bound_per_s`).
    pub bound_pct: f64,
    /// Data segments retransmitted by the sender (from the trace).
    pub retransmits: u64,
    /// Sender-side RTT samples (Karn), or ping RTTs.
    pub rtt: RttStats,
    /// Request/response: transactions completed.
    pub transactions: Option<u64>,
    /// Request/response: transactions per second.
    pub transactions_per_s: Option<f64>,
    /// Request/response: the most transactions per second the link rate allows with
    /// every ACK piggy-backed (frame bytes of one request and one response each way).
    pub transactions_bound_per_s: Option<f64>,
    /// Ping: requests sent.
    pub pings_sent: Option<u32>,
    /// Ping: replies received.
    pub pings_received: Option<u32>,
    /// Ping: the smoothed RTT and mean deviation of the replies, in arrival order, as
    /// 1990 pings printed them ([`SmoothedRtt`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ping_smoothed: Option<SmoothedRtt>,
    /// Keystroke: frames on the flow's link, both directions (handshake and close
    /// included), per keystroke echoed.
    pub packets_per_keystroke: Option<f64>,
    /// Bulk: the receiver read exactly the stream the sender wrote.
    pub data_ok: Option<bool>,
    /// The flow's connection as `imp analyze` judges it from the frames sent on the
    /// sender's link (what that link's pcap holds): segments below the MSS,
    /// retransmissions, RTOs, the longest stall, pure and piggy-backed ACKs, RTT,
    /// goodput. `directions[0]` is the opener's. Absent for ping.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analysis: Option<Connection>,
    /// FTP: the session's control connection as `imp analyze` judges it (from the
    /// frames sent on the link once the data connection opened), where commands and
    /// replies show whether ACKs ride on data. `directions[0]` is the client's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_analysis: Option<Connection>,
    /// The CPUs of the two ends, when the hosts have a cost model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<FlowCpu>,
    /// FTP: the client's reads of the data that returned bytes (each at most a
    /// `record`: with a CPU model, a message handed to the application).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_reads: Option<u64>,
}

/// Where the time of a flow's two hosts went (hosts with a `cpu` profile).
#[derive(Debug, Clone, Serialize)]
pub struct FlowCpu {
    /// Percentage of the flow's time the sender's CPU was busy (None: no model).
    pub sender_busy_pct: Option<f64>,
    /// Percentage of the flow's time the receiver's CPU was busy.
    pub receiver_busy_pct: Option<f64>,
    /// Frames the receiver dropped for want of a receive buffer.
    pub receiver_no_rx_buffer: u64,
    /// Frames the sender dropped for want of a receive buffer.
    pub sender_no_rx_buffer: u64,
}

/// One rung of the scenario's `[[ladder]]`.
#[derive(Debug, Clone, Serialize)]
pub struct RungReport {
    /// What the rung changes.
    pub step: String,
    /// The flow that ran it.
    pub flow: String,
    /// The historical figure, Mbit/s.
    pub seed_mbit: Option<f64>,
    /// imp's goodput, Mbit/s.
    pub imp_mbit: f64,
    /// imp's figure as a percentage of the historical one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pct_of_seed: Option<f64>,
}

/// Why a scenario could not be run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExperimentError(pub String);

impl std::fmt::Display for ExperimentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ExperimentError {}

fn round(v: f64) -> f64 {
    // Six significant decimals keep the JSON short and stable.
    (v * 1e6).round() / 1e6
}

/// The address of end `side` (0 or 1) of link `index` when the scenario gives none:
/// 10.x.y.1 and 10.x.y.2 (x * 256 + y = `index`, modulo 65536).
pub fn link_address(index: usize, side: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, (index >> 8) as u8, index as u8, 1 + side as u8)
}

/// The IPv6 address of end `side` (0 or 1) of link `index` in a scenario with IPv6
/// flows: fd00::x:1 and fd00::x:2 in the link's own /64, fd00:0:0:x::/64 (x = `index`,
/// modulo 65536).
pub fn link_address6(index: usize, side: usize) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0, 0, index as u16, 0, 0, 0, 1 + side as u16)
}

/// The /64 of link `index` in a scenario with IPv6 flows.
fn link_prefix6(index: usize) -> impnet_wire::ipv6::Cidr {
    impnet_wire::ipv6::Cidr::new(Ipv6Addr::new(0xfd00, 0, 0, index as u16, 0, 0, 0, 0), 64)
        .expect("64 is a valid prefix length")
}

/// Run a scenario. Pcap files (`LINK.pcap`) go to `pcap_dir` when given; `progress` is
/// called now and then.
pub fn run(
    scenario: &Scenario,
    pcap_dir: Option<&Path>,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Outcome, ExperimentError> {
    run_filling(scenario, pcap_dir, progress, false)
}

/// [`run`], the bulk senders filling their send buffers at once (`eager`, as they did
/// before they wrote only what TCP can send soon) or not: the tests check that the
/// wire is the same either way.
fn run_filling(
    scenario: &Scenario,
    pcap_dir: Option<&Path>,
    progress: &mut dyn FnMut(&Progress),
    eager: bool,
) -> Result<Outcome, ExperimentError> {
    let (mut sim, hosts, links) = build(scenario, pcap_dir)?;
    let tracer = trace(&mut sim, &links);
    let mut apps: Vec<App> = scenario
        .flows
        .iter()
        .enumerate()
        .map(|(i, f)| App::new(scenario, f, i, &links))
        .collect::<Result<_, _>>()?;
    for app in &mut apps {
        if let AppState::Bulk(bulk) = &mut app.state {
            bulk.eager = eager;
        }
    }
    let mut queues = queue_traces(scenario);
    let mut driven = Driven {
        hosts: &hosts,
        links: &links,
        apps: &mut apps,
        tracer: &tracer,
        queues: &mut queues,
    };
    let summary = drive_apps(scenario, &mut sim, &mut driven, progress)?;
    sim.set_observer(None);
    sim.flush_captures()
        .map_err(|e| ExperimentError(format!("cannot write a pcap file: {e}")))?;
    let mut tracer = Rc::try_unwrap(tracer)
        .map_err(|_| ExperimentError("the tracer is still shared".into()))?
        .into_inner();
    let now = sim.now();
    for app in &mut apps {
        app.note_cpu(&sim, &hosts);
    }
    let mut flows: Vec<FlowReport> = apps
        .iter()
        .map(|app| app.report(scenario, &tracer, now))
        .collect();
    for (flow, app) in flows.iter_mut().zip(&apps) {
        flow.analysis = app.traced.and_then(|i| judged(&mut tracer.flows[i].judge));
        flow.control_analysis = app.judged_hosts.and_then(|i| {
            let hosts = std::mem::take(&mut tracer.hosts_judges[i].judge);
            other_connection(hosts, flow.analysis.as_ref())
        });
    }
    let ladder = rungs(scenario, &flows);
    let traces = apps
        .iter()
        .map(|app| match app.traced {
            Some(i) => std::mem::take(&mut tracer.flows[i].trace),
            None => FlowTrace::default(),
        })
        .collect();
    let fairness = if queues.is_empty() {
        None
    } else {
        jain_index(&flows)
    };
    let report = Report {
        scenario: scenario.name.clone(),
        description: scenario.description.clone(),
        seed: scenario.seed,
        end_s: round((summary.end - Instant::ZERO).as_secs_f64()),
        steps: summary.steps,
        trace_hash: format!("{:016x}", sim.trace_hash()),
        links: link_reports(scenario, &sim, &links),
        hosts: host_reports(scenario, &sim, &hosts),
        routers: routers::router_reports(scenario, &sim, &hosts, &links, &queues),
        flows,
        fairness,
        ladder,
    };
    Ok(Outcome {
        report,
        traces,
        queues,
    })
}

/// A tracer, set as `sim`'s observer. It looks only at the links its flows are
/// followed on (`App::drive` shows it each flow's link before the flow opens): the
/// other links' frames are not handed to it.
fn trace(sim: &mut Sim, links: &[LinkId]) -> Rc<RefCell<Tracer>> {
    let tracer = Rc::new(RefCell::new(Tracer::new(sim.now())));
    let observer = Rc::clone(&tracer);
    sim.set_observer(Some(Box::new(move |event| {
        observer.borrow_mut().observe(event);
    })));
    for &link in links {
        sim.set_observed(link, false);
    }
    tracer
}

/// The connection an analyzer saw (the one with the most segments, should the ports
/// have been reused).
fn judged(judge: &mut Analyzer) -> Option<Connection> {
    std::mem::take(judge)
        .finish()
        .connections
        .into_iter()
        .max_by_key(|c| c.segments)
}

/// The connection `hosts` saw, other than `data`, with the most segments (an FTP
/// session's control connection).
fn other_connection(hosts: Analyzer, data: Option<&Connection>) -> Option<Connection> {
    let same =
        |c: &Connection| data.is_some_and(|d| (&d.client, &d.server) == (&c.client, &c.server));
    hosts
        .finish()
        .connections
        .into_iter()
        .filter(|c| !same(c))
        .max_by_key(|c| c.segments)
}

/// An empty trace for every router egress queue.
fn queue_traces(scenario: &Scenario) -> Vec<QueueTrace> {
    routers::router_egresses(scenario)
        .into_iter()
        .map(|(router, link, side)| QueueTrace {
            router,
            link,
            side,
            name: format!(
                "{}-{}",
                scenario.nodes[router].name, scenario.links[link].name
            ),
            samples: Vec::new(),
        })
        .collect()
}

/// The scenario's nodes, links and routes in a fresh simulator (capturing to
/// `pcap_dir`).
fn build(
    scenario: &Scenario,
    pcap_dir: Option<&Path>,
) -> Result<(Sim, Vec<HostId>, Vec<LinkId>), ExperimentError> {
    let mut sim = Sim::new(scenario.seed);
    let ipv6 = scenario.flows.iter().any(|f| f.ipv6);
    let hosts: Vec<HostId> = scenario
        .nodes
        .iter()
        .map(|h| {
            let mut config = StackConfig {
                tcp: h.tcp.clone(),
                ..StackConfig::default()
            };
            if ipv6 {
                // Static addresses on point-to-point links, unique by construction:
                // usable at once, and no router solicitations on the links.
                config.ipv6.dad_transmits = 0;
                config.ipv6.router_solicitations = 0;
            }
            let id = match h.kind {
                NodeKind::Host => sim.add_host(&h.name, config),
                NodeKind::Router => sim.add_router(&h.name, config),
            };
            sim.set_cpu(id, h.cpu.clone());
            id
        })
        .collect();
    let mut links = Vec::new();
    for l in &scenario.links {
        let (a, b) = (hosts[l.a], hosts[l.b]);
        let id = match l.seed {
            Some(seed) => sim.connect_seeded(a, l.a_addr, b, l.b_addr, l.config, seed),
            None => sim.connect(a, l.a_addr, b, l.b_addr, l.config),
        }
        .map_err(|e| ExperimentError(format!("link `{}`: {e}", l.name)))?;
        sim.set_block_icmp(id, l.block_icmp);
        if let Some(dir) = pcap_dir {
            let path = dir.join(format!("{}.pcap", l.name));
            sim.capture_snaplen(id, &path, scenario.pcap_snaplen.unwrap_or(usize::MAX))
                .map_err(|e| ExperimentError(format!("cannot write {}: {e}", path.display())))?;
        }
        links.push(id);
    }
    for route in &scenario.routes {
        let host = hosts[route.node];
        let iface = sim
            .iface_on(host, links[route.link])
            .ok_or_else(|| ExperimentError(format!("route {}: no interface", route.dest)))?;
        sim.host_mut(host)
            .routes_mut()
            .add(route.dest, Some(route.gateway), iface);
    }
    if ipv6 {
        add_ipv6(scenario, &mut sim, &hosts, &links)?;
    }
    Ok((sim, hosts, links))
}

/// IPv6 for a scenario with IPv6 flows: each end of link i gets
/// [`link_address6`]`(i, side)` in fd00:0:0:i::/64, and every IPv4 route a twin: the
/// default route `::/0`, a link's subnet that link's /64, through the gateway's IPv6
/// address on the same link. (A route the file gives to another prefix has no twin.)
fn add_ipv6(
    scenario: &Scenario,
    sim: &mut Sim,
    hosts: &[HostId],
    links: &[LinkId],
) -> Result<(), ExperimentError> {
    let now = sim.now();
    for (index, l) in scenario.links.iter().enumerate() {
        for (side, node) in [l.a, l.b].into_iter().enumerate() {
            let host = hosts[node];
            let iface = sim
                .iface_on(host, links[index])
                .ok_or_else(|| ExperimentError(format!("link `{}`: no interface", l.name)))?;
            let address = link_address6(index, side);
            let cidr = impnet_wire::ipv6::Cidr::new(address, 64).expect("valid prefix length");
            sim.host_mut(host).add_address6(now, iface, cidr);
        }
    }
    for route in &scenario.routes {
        let via = &scenario.links[route.link];
        let gateway_side = if via.a_addr.address == route.gateway {
            0
        } else if via.b_addr.address == route.gateway {
            1
        } else {
            continue;
        };
        let dest = if route.dest.prefix_len == 0 {
            impnet_wire::ipv6::Cidr::new(Ipv6Addr::UNSPECIFIED, 0).expect("valid prefix length")
        } else if let Some(at) = scenario
            .links
            .iter()
            .position(|l| l.a_addr.network() == route.dest)
        {
            link_prefix6(at)
        } else {
            continue;
        };
        let host = hosts[route.node];
        let iface = sim
            .iface_on(host, links[route.link])
            .ok_or_else(|| ExperimentError(format!("route {}: no interface", route.dest)))?;
        let gateway = link_address6(route.link, gateway_side);
        sim.host_mut(host)
            .routes6_mut()
            .add(dest, Some(gateway), iface);
    }
    Ok(())
}

/// What [`drive_apps`] drives and records.
struct Driven<'a> {
    hosts: &'a [HostId],
    links: &'a [LinkId],
    apps: &'a mut [App],
    tracer: &'a Rc<RefCell<Tracer>>,
    /// The routers' egress queues, sampled every `sample_interval`.
    queues: &'a mut [QueueTrace],
}

/// Which applications `drive_apps` asks at a call, so that a call costs what the
/// applications with news cost, not one check per flow.
struct Visits {
    /// The applications at each host (by `HostId`), in order.
    by_host: Vec<Vec<usize>>,
    /// Every application's wake-up, as (when, application).
    wakes: std::collections::BTreeSet<(Instant, usize)>,
    /// Applications not idle after their last run (their hosts moved meanwhile, or
    /// they keep no record of what they saw): asked again at the next call. Only an
    /// application that was asked can become one.
    stale: Vec<usize>,
    /// Applications that finished.
    finished: usize,
    /// Scratch: the hosts touched, the candidates.
    touched: Vec<HostId>,
    list: Vec<usize>,
}

impl Visits {
    fn new(apps: &[App], hosts: &[HostId]) -> Visits {
        let hosts_len = hosts.iter().map(|h| h.0 + 1).max().unwrap_or(0);
        let mut by_host = vec![Vec::new(); hosts_len];
        let mut wakes = std::collections::BTreeSet::new();
        for (i, app) in apps.iter().enumerate() {
            let (from, to) = (hosts[app.spec.from].0, hosts[app.spec.to].0);
            by_host[from].push(i);
            if to != from {
                by_host[to].push(i);
            }
            if let Some(t) = app.wake {
                wakes.insert((t, i));
            }
        }
        Visits {
            by_host,
            wakes,
            // Nothing seen yet: every application runs at the first call.
            stale: (0..apps.len()).collect(),
            finished: apps.iter().filter(|a| a.finished()).count(),
            touched: Vec::new(),
            list: Vec::new(),
        }
    }

    /// The applications to ask now, in index order (taken from `self.list`).
    fn candidates(&mut self, sim: &mut Sim, now: Instant) -> Vec<usize> {
        let mut list = std::mem::take(&mut self.list);
        list.clear();
        sim.take_touched(&mut self.touched);
        for host in self.touched.drain(..) {
            if let Some(apps) = self.by_host.get(host.0) {
                list.extend_from_slice(apps);
            }
        }
        for &(t, i) in &self.wakes {
            if t > now {
                break;
            }
            list.push(i);
        }
        list.append(&mut self.stale);
        list.sort_unstable();
        list.dedup();
        list
    }

    /// Application `i`'s wake-up moved from `old` to `new`.
    fn rewake(&mut self, i: usize, old: Option<Instant>, new: Option<Instant>) {
        if old != new {
            if let Some(t) = old {
                self.wakes.remove(&(t, i));
            }
            if let Some(t) = new {
                self.wakes.insert((t, i));
            }
        }
    }

    fn earliest_wake(&self) -> Option<Instant> {
        self.wakes.first().map(|&(t, _)| t)
    }
}

/// Run the simulator until every flow has finished or the scenario's time is up.
fn drive_apps(
    scenario: &Scenario,
    sim: &mut Sim,
    driven: &mut Driven<'_>,
    progress: &mut dyn FnMut(&Progress),
) -> Result<RunSummary, ExperimentError> {
    let end = Instant::ZERO + scenario.duration;
    let total_bytes: u64 = driven.apps.iter().map(App::bytes_goal).sum();
    let mut calls = 0u64;
    let mut failure = None;
    let mut next_queue_sample = Instant::ZERO;
    let mut visits = Visits::new(driven.apps, driven.hosts);
    let run = sim.run(u64::MAX / 4, end + Duration::from_secs(1), |sim| {
        calls += 1;
        let now = sim.now();
        // The applications that may have something to do, in order: those at a host
        // that handled a frame or a timer since the last call, those whose wake-up
        // came, and those that were not idle after the last call. Every other one is
        // idle (`App::idle`) and is not asked.
        let list = visits.candidates(sim, now);
        for &i in &list {
            let app = &mut driven.apps[i];
            if app.idle(sim, driven.hosts) {
                continue;
            }
            let was_done = app.done_at.is_some();
            let old_wake = app.wake;
            if let Err(e) = app.drive(sim, driven.hosts, driven.tracer, scenario.sample_interval) {
                failure = Some(format!("flow `{}`: {e}", app.spec.name));
                return Flow::Done;
            }
            if app.done_at.is_some() {
                app.note_cpu(sim, driven.hosts);
                if !was_done {
                    visits.finished += 1;
                }
            }
            visits.rewake(i, old_wake, app.wake);
            if app.stale(sim, driven.hosts) {
                visits.stale.push(i);
            }
        }
        visits.list = list;
        let mut wake = visits.earliest_wake().map_or(end, |t| t.min(end));
        if !driven.queues.is_empty() {
            if now >= next_queue_sample {
                routers::sample_queues(sim, driven.links, driven.queues, Instant::ZERO);
                next_queue_sample = now + scenario.sample_interval;
            }
            wake = wake.min(next_queue_sample);
        }
        if calls.is_multiple_of(4096) {
            let done: u64 = driven.apps.iter().map(App::bytes_done).sum();
            let by_time = (now - Instant::ZERO).as_secs_f64() / scenario.duration.as_secs_f64();
            let by_bytes = if total_bytes > 0 {
                done as f64 / total_bytes as f64
            } else {
                0.0
            };
            progress(&Progress {
                now: now - Instant::ZERO,
                duration: scenario.duration,
                fraction: by_time.max(by_bytes).min(1.0),
            });
        }
        if visits.finished == driven.apps.len() || now >= end {
            Flow::Done
        } else {
            Flow::WakeAt(wake.max(now))
        }
    });
    if let Some(e) = failure {
        return Err(ExperimentError(format!("{e} (seed {})", scenario.seed)));
    }
    run.map_err(|e| ExperimentError(e.to_string()))
}

fn host_reports(scenario: &Scenario, sim: &Sim, hosts: &[HostId]) -> Vec<HostReport> {
    scenario
        .nodes
        .iter()
        .zip(hosts)
        .filter(|(h, _)| h.kind == NodeKind::Host)
        .map(|(h, &id)| {
            let s = sim.host(id).tcp_stats();
            HostReport {
                name: h.name.clone(),
                segments_out: s.segments_out,
                retransmitted: s.retransmitted,
                timeouts: s.timeouts,
                fast_retransmits: s.fast_retransmits,
                delayed_acks: s.delayed_acks,
                ecn_ce_received: s.ecn_ce_received,
                ecn_cuts: s.ecn_cuts,
                shared_blocks_used: s.shared_blocks_used,
            }
        })
        .collect()
}

fn link_reports(scenario: &Scenario, sim: &Sim, links: &[LinkId]) -> Vec<LinkReport> {
    scenario
        .links
        .iter()
        .zip(links)
        .map(|(l, &id)| LinkReport {
            name: l.name.clone(),
            a: scenario.nodes[l.a].name.clone(),
            b: scenario.nodes[l.b].name.clone(),
            rate_bps: l.config.rate_bps,
            delay_ms: round(l.config.delay.as_secs_f64() * 1e3),
            mtu: l.config.mtu - impnet_wire::ethernet::HEADER_LEN,
            directions: (0..2)
                .map(|side| {
                    let s = sim.link_stats(id, side);
                    let from = if side == 0 { l.a } else { l.b };
                    DirectionReport {
                        from: scenario.nodes[from].name.clone(),
                        submitted: s.submitted,
                        delivered: s.delivered,
                        lost: s.dropped_loss,
                        queue_drops: s.dropped_queue,
                        oversize_drops: s.dropped_oversize,
                        duplicated: s.duplicated,
                        reordered: s.reordered,
                        corrupted: s.corrupted,
                        bytes_delivered: s.bytes_delivered,
                        police_drops: s.dropped_police,
                        police_marked: s.police_marked,
                        shaped: s.shaped,
                        arq_retransmitted: s.arq_retransmitted,
                        arq_abandoned: s.arq_abandoned,
                    }
                })
                .collect(),
        })
        .collect()
}

// ---- applications ----------------------------------------------------------------

/// The port every TCP flow listens on: 5001 + the flow's index.
const BASE_PORT: u16 = 5001;

struct App {
    spec: FlowSpec,
    index: usize,
    link: LinkId,
    /// (address of `from`, address of `to`) on the flow's link.
    addrs: (Ipv4Addr, Ipv4Addr),
    /// The addresses its connection runs between: `addrs`, or their IPv6 twins for an
    /// IPv6 flow.
    ends: (IpAddr, IpAddr),
    state: AppState,
    started: Option<Instant>,
    done_at: Option<Instant>,
    wake: Option<Instant>,
    /// [`Sim::activity`] of (`from`, `to`) when the app last ran: while neither moves
    /// and no wake-up is due, running it again could change nothing.
    seen: (u64, u64),
    traced: Option<usize>,
    /// FTP: the tracer's judge of every connection between the two hosts
    /// (`Tracer::judge_hosts`), for the control connection.
    judged_hosts: Option<usize>,
    next_sample: Instant,
    /// The two hosts' CPU reports when the flow finished (or the run ended).
    cpu_at_end: Option<(Option<CpuReport>, Option<CpuReport>)>,
}

enum AppState {
    Bulk(Box<BulkApp>),
    Ftp(Box<ftp::FtpApp>),
    Rr(Box<RrApp>),
    Ping(Box<PingApp>),
}

struct BulkApp {
    listener: Option<TcpHandle>,
    client: Option<TcpHandle>,
    server: Option<TcpHandle>,
    text: TextSource,
    /// The current record as written to TCP (after translation; text mode only).
    out: Vec<u8>,
    offset: usize,
    /// Binary mode: bytes of the current record not yet written. They are made where
    /// TCP keeps them (`Stack::tcp_send_with`), from `stream` at offset `sent`.
    record_left: usize,
    /// Binary mode: the stream's bytes, and how many of them TCP took.
    stream: StreamPattern,
    sent: u64,
    /// Binary mode: what the receiver read, checked against `stream`.
    check: StreamCheck,
    /// Binary mode with no CPU cost per byte: fill the send buffer at once rather than
    /// write only what TCP can send soon (`apps::lazy_room`; the same wire, tests).
    eager: bool,
    /// File bytes consumed into records so far.
    written: u64,
    /// Text mode: the file's hash as made, and as the receiver translated it back.
    sent_hash: StreamHash,
    received_hash: StreamHash,
    /// A CR seen at the end of the last read, not yet known to start a CRLF.
    pending_cr: bool,
    closed: bool,
    eof: bool,
    sender_busy_until: Instant,
    receiver_busy_until: Instant,
    read_bytes: u64,
    buf: Vec<u8>,
}

impl BulkApp {
    /// Bytes the receiver read (in text mode, of the file: translated back).
    fn received(&self) -> u64 {
        if self.text.text {
            self.received_hash.len()
        } else {
            self.check.len()
        }
    }

    /// What the receiver read so far is what the sender wrote (length and bytes).
    fn data_ok(&self) -> bool {
        if self.text.text {
            self.sent_hash.finish() == self.received_hash.finish()
                && self.sent_hash.len() == self.received_hash.len()
        } else {
            self.check.intact() && self.check.len() == self.sent
        }
    }
}

/// The file a bulk flow sends: seeded binary bytes, or in text mode seeded lines of
/// printable ASCII ending in LF.
struct TextSource {
    pattern: Pattern,
    text: bool,
    column: usize,
}

impl TextSource {
    fn fill(&mut self, out: &mut [u8]) {
        self.pattern.fill(out);
        if !self.text {
            return;
        }
        for b in out.iter_mut() {
            self.column += 1;
            if self.column >= 64 || *b % 61 == 0 {
                *b = b'\n';
                self.column = 0;
            } else {
                *b = b' ' + *b % 95;
            }
        }
    }
}

struct RrApp {
    listener: Option<TcpHandle>,
    client: Option<TcpHandle>,
    server: Option<TcpHandle>,
    /// Request bytes the client still has to write for requests already issued.
    client_owed: usize,
    /// Issue times of requests whose responses are not complete.
    outstanding: std::collections::VecDeque<Instant>,
    issued: u64,
    completed: u64,
    /// Bytes of the current response read so far.
    response_got: usize,
    /// Bytes of the current request the server has read so far.
    request_got: usize,
    /// Response bytes the server still has to write.
    server_owed: usize,
    latencies_ms: Vec<f64>,
    bytes: u64,
    closed: bool,
    server_closed: bool,
    payload: Vec<u8>,
    buf: Vec<u8>,
    /// Frames on the flow's first link so far, both directions (keystroke flows).
    frames: u64,
}

impl RrApp {
    /// Nothing open yet; requests and responses up to `largest` bytes.
    fn new(largest: usize) -> RrApp {
        RrApp {
            listener: None,
            client: None,
            server: None,
            client_owed: 0,
            outstanding: Default::default(),
            issued: 0,
            completed: 0,
            response_got: 0,
            request_got: 0,
            server_owed: 0,
            latencies_ms: Vec::new(),
            bytes: 0,
            closed: false,
            server_closed: false,
            payload: vec![0x5a; largest],
            buf: vec![0; 256 * 1024],
            frames: 0,
        }
    }
}

struct PingApp {
    socket: Option<IcmpHandle>,
    sent_at: Vec<Instant>,
    rtts_ms: Vec<f64>,
    received: u32,
    buf: Vec<u8>,
}

type Step = Result<(), String>;

fn tcp_err(what: &str, e: TcpError) -> String {
    format!("{what}: {e}")
}

impl App {
    fn new(
        scenario: &Scenario,
        spec: &FlowSpec,
        index: usize,
        links: &[LinkId],
    ) -> Result<App, ExperimentError> {
        let addrs = (spec.from_addr, spec.to_addr);
        let ends = if spec.ipv6 {
            let side = |link: usize, node: usize| {
                let l = &scenario.links[link];
                link_address6(link, usize::from(l.a != node))
            };
            let last = spec.path[spec.path.len() - 1];
            (
                IpAddr::V6(side(spec.path[0], spec.from)),
                IpAddr::V6(side(last, spec.to)),
            )
        } else {
            (IpAddr::V4(addrs.0), IpAddr::V4(addrs.1))
        };
        let state = match &spec.kind {
            FlowKind::Bulk { text_mode, .. } => AppState::Bulk(Box::new(BulkApp {
                listener: None,
                client: None,
                server: None,
                text: TextSource {
                    pattern: Pattern::new(scenario.seed ^ (index as u64) << 32),
                    text: *text_mode,
                    column: 0,
                },
                out: Vec::new(),
                offset: 0,
                record_left: 0,
                stream: StreamPattern::new(scenario.seed ^ (index as u64) << 32),
                sent: 0,
                check: StreamCheck::new(StreamPattern::new(scenario.seed ^ (index as u64) << 32)),
                eager: false,
                written: 0,
                sent_hash: StreamHash::default(),
                received_hash: StreamHash::default(),
                pending_cr: false,
                closed: false,
                eof: false,
                sender_busy_until: Instant::ZERO,
                receiver_busy_until: Instant::ZERO,
                read_bytes: 0,
                buf: vec![0; 256 * 1024],
            })),
            FlowKind::Ftp { .. } => AppState::Ftp(Box::new(ftp::FtpApp::new(
                &spec.kind,
                scenario.seed,
                index,
                addrs,
            ))),
            FlowKind::RequestResponse {
                request, response, ..
            } => AppState::Rr(Box::new(RrApp::new((*request).max(*response)))),
            FlowKind::Keystroke { .. } => AppState::Rr(Box::new(RrApp::new(1))),
            FlowKind::Ping { .. } => AppState::Ping(Box::new(PingApp {
                socket: None,
                sent_at: Vec::new(),
                rtts_ms: Vec::new(),
                received: 0,
                buf: vec![0; 65536],
            })),
        };
        Ok(App {
            spec: spec.clone(),
            index,
            link: links[spec.path[0]],
            addrs,
            ends,
            state,
            started: None,
            done_at: None,
            wake: None,
            seen: (u64::MAX, u64::MAX),
            traced: None,
            judged_hosts: None,
            next_sample: Instant::ZERO,
            cpu_at_end: None,
        })
    }

    fn port(&self) -> u16 {
        BASE_PORT + self.index as u16
    }

    fn bytes_goal(&self) -> u64 {
        match &self.spec.kind {
            FlowKind::Bulk { bytes, .. } | FlowKind::Ftp { bytes, .. } => *bytes,
            _ => 0,
        }
    }

    fn bytes_done(&self) -> u64 {
        match &self.state {
            AppState::Bulk(b) => b.received(),
            AppState::Ftp(f) => f.received().len(),
            _ => 0,
        }
    }

    fn finished(&self) -> bool {
        self.done_at.is_some()
    }

    /// What the flow saw of its hosts when it last ran is not what they show now (it
    /// ran before they moved, or it keeps no record).
    fn stale(&self, sim: &Sim, hosts: &[HostId]) -> bool {
        (
            sim.activity(hosts[self.spec.from]),
            sim.activity(hosts[self.spec.to]),
        ) != self.seen
    }

    /// Nothing has happened at the flow's hosts since it last ran and it asked for no
    /// wake-up by now: running it would do nothing.
    fn idle(&self, sim: &Sim, hosts: &[HostId]) -> bool {
        let activity = (
            sim.activity(hosts[self.spec.from]),
            sim.activity(hosts[self.spec.to]),
        );
        activity == self.seen && self.wake.is_none_or(|w| w > sim.now())
    }

    /// Do whatever the flow's applications can do now.
    fn drive(
        &mut self,
        sim: &mut Sim,
        hosts: &[HostId],
        tracer: &Rc<RefCell<Tracer>>,
        sample_every: Duration,
    ) -> Step {
        let now = sim.now();
        self.wake = None;
        if self.done_at.is_some() {
            return Ok(());
        }
        let start = Instant::ZERO + self.spec.start;
        if now < start {
            self.wake = Some(start);
            return Ok(());
        }
        let (from, to) = (hosts[self.spec.from], hosts[self.spec.to]);
        if self.started.is_none() {
            self.started = Some(now);
            // Every connection the tracer follows or judges for this flow is on its
            // link.
            sim.set_observed(self.link, true);
            self.open(sim, from, to, tracer)?;
        }
        match &mut self.state {
            AppState::Bulk(_) => self.drive_bulk(sim, from, to)?,
            AppState::Ftp(_) => self.drive_ftp(sim, (from, to), tracer)?,
            AppState::Rr(_) if matches!(self.spec.kind, FlowKind::Keystroke { .. }) => {
                self.drive_keystroke(sim, from, to)?;
            }
            AppState::Rr(_) => self.drive_rr(sim, from, to)?,
            AppState::Ping(_) => self.drive_ping(sim, from)?,
        }
        if let AppState::Ftp(f) = &self.state {
            // The data connection, once it exists, is the one followed.
            self.traced = f.traced;
        }
        if let Some(i) = self.traced {
            self.sample(sim, (from, to), tracer, i, sample_every);
        }
        self.seen = (sim.activity(from), sim.activity(to));
        Ok(())
    }

    /// Open the flow's sockets and start following its packets.
    fn open(
        &mut self,
        sim: &mut Sim,
        from: HostId,
        to: HostId,
        tracer: &Rc<RefCell<Tracer>>,
    ) -> Step {
        let now = sim.now();
        let (a, b) = self.ends;
        let port = self.port();
        let (listener, client) = match &mut self.state {
            AppState::Ping(p) => {
                let ident = 0x100 + self.index as u16;
                p.socket = Some(
                    sim.host_mut(from)
                        .icmp_bind(ident)
                        .map_err(|e| format!("cannot open an ICMP socket: {e}"))?,
                );
                return Ok(());
            }
            // ftp flows are IPv4 only (the scenario refuses `family = "ipv6"`).
            AppState::Ftp(f) => {
                let (a, b) = self.addrs;
                self.judged_hosts = Some(
                    tracer
                        .borrow_mut()
                        .judge_hosts(self.link, (IpAddr::V4(a), IpAddr::V4(b))),
                );
                return f.open(sim, (from, to), self.addrs, port);
            }
            AppState::Bulk(s) => (&mut s.listener, &mut s.client),
            AppState::Rr(s) => (&mut s.listener, &mut s.client),
        };
        *listener = Some(
            sim.host_mut(to)
                .tcp_listen(SocketAddr::new(b, port), 16)
                .map_err(|e| tcp_err("listen", e))?,
        );
        let handle = sim
            .host_mut(from)
            .tcp_connect(now, SocketAddr::new(a, 0), SocketAddr::new(b, port))
            .map_err(|e| tcp_err("connect", e))?;
        *client = Some(handle);
        let (local, _) = sim
            .host(from)
            .tcp_addresses(handle)
            .ok_or("the new connection has no address")?;
        self.traced = Some(tracer.borrow_mut().follow(
            self.link,
            (local.ip(), local.port()),
            (b, port),
        ));
        Ok(())
    }

    fn sample(
        &mut self,
        sim: &Sim,
        (from, to): (HostId, HostId),
        tracer: &Rc<RefCell<Tracer>>,
        i: usize,
        every: Duration,
    ) {
        let now = sim.now();
        // The data sender: the opener, but an FTP server's data connection.
        let (sender, client) = match &self.state {
            AppState::Bulk(s) => (from, s.client),
            AppState::Ftp(f) => (to, f.data_sender()),
            AppState::Rr(s) => (from, s.client),
            AppState::Ping(_) => (from, None),
        };
        let read_bytes = match &self.state {
            AppState::Bulk(s) => Some(s.read_bytes),
            AppState::Ftp(f) => Some(f.read_bytes()),
            _ => None,
        };
        let mut t = tracer.borrow_mut();
        let seconds = t.seconds(now);
        let trace = &mut t.flows[i].trace;
        if let Some(read) = read_bytes
            && trace.delivered.last().is_none_or(|&(_, b)| b != read)
        {
            trace.delivered.push((seconds, read));
        }
        if now < self.next_sample {
            return;
        }
        self.next_sample = now + every;
        let Some(info) = client.and_then(|c| sim.host(sender).tcp_info(c)) else {
            return;
        };
        let ssthresh = (info.ssthresh < u32::MAX / 2).then_some(info.ssthresh);
        let srtt = info.srtt.map(|d| d.as_secs_f64() * 1e3);
        trace.info.push((seconds, info.cwnd, ssthresh, srtt));
    }

    fn report(&self, scenario: &Scenario, tracer: &Tracer, now: Instant) -> FlowReport {
        let rate = scenario.bottleneck_rate(&self.spec);
        let (start, end) = match &self.state {
            // An FTP client's figure: from RETR to the end of the data.
            AppState::Ftp(f) => (
                f.transfer.0.or(self.started).unwrap_or(now),
                f.transfer.1.unwrap_or(now),
            ),
            _ => (self.started.unwrap_or(now), self.done_at.unwrap_or(now)),
        };
        let seconds = (end - start).as_secs_f64().max(1e-9);
        let trace = self.traced.map(|i| &tracer.flows[i].trace);
        let efficiency = trace
            .filter(|t| t.wire_bytes > 0)
            .map_or(0.0, |t| t.payload_bytes as f64 / t.wire_bytes as f64);
        let mut r = FlowReport {
            name: self.spec.name.clone(),
            kind: self.spec.kind.type_name().to_string(),
            from: scenario.nodes[self.spec.from].name.clone(),
            to: scenario.nodes[self.spec.to].name.clone(),
            rate_bps: rate,
            completed: self.done_at.is_some(),
            seconds: round(seconds),
            bytes: 0,
            goodput_bps: 0.0,
            goodput_bytes_per_s: 0.0,
            capacity_pct: 0.0,
            bound_bps: round(rate as f64 * efficiency),
            bound_pct: 0.0,
            retransmits: trace.map_or(0, |t| t.retransmits),
            rtt: RttStats::of(trace.into_iter().flat_map(|t| t.rtt.iter().map(|r| r.1))),
            transactions: None,
            transactions_per_s: None,
            transactions_bound_per_s: None,
            pings_sent: None,
            pings_received: None,
            ping_smoothed: None,
            packets_per_keystroke: None,
            data_ok: None,
            cpu: None,
            analysis: None,
            control_analysis: None,
            data_reads: match &self.state {
                AppState::Ftp(f) => Some(f.reads()),
                _ => None,
            },
        };
        self.fill_by_kind(&mut r, trace, seconds, rate);
        fill_rates(&mut r, rate, seconds);
        r.cpu = self.cpu_at_end.and_then(|(from, to)| {
            if from.is_none() && to.is_none() {
                return None;
            }
            let pct = |c: Option<CpuReport>| {
                c.map(|c| round((100.0 * c.busy.as_secs_f64() / seconds).min(100.0)))
            };
            Some(FlowCpu {
                sender_busy_pct: pct(from),
                receiver_busy_pct: pct(to),
                receiver_no_rx_buffer: to.map_or(0, |c| c.no_rx_buffer),
                sender_no_rx_buffer: from.map_or(0, |c| c.no_rx_buffer),
            })
        });
        r
    }

    /// Keeps the two hosts' CPU reports the first time it is called after the flow
    /// finished (and at the end of the run).
    fn note_cpu(&mut self, sim: &Sim, hosts: &[HostId]) {
        if self.cpu_at_end.is_none() {
            self.cpu_at_end = Some((
                sim.cpu_report(hosts[self.spec.from]),
                sim.cpu_report(hosts[self.spec.to]),
            ));
        }
    }

    /// The fields of `r` that depend on the flow's kind.
    fn fill_by_kind(&self, r: &mut FlowReport, trace: Option<&FlowTrace>, seconds: f64, rate: u64) {
        match &self.state {
            AppState::Bulk(s) => {
                r.bytes = s.received();
                r.data_ok = Some(s.eof && s.data_ok());
            }
            AppState::Ftp(f) => {
                r.bytes = f.received().len();
                r.data_ok = Some(f.data_ok());
            }
            AppState::Rr(s) => {
                r.bytes = s.bytes;
                r.transactions = Some(s.completed);
                r.transactions_per_s = Some(round(s.completed as f64 / seconds));
                r.rtt = RttStats::of(s.latencies_ms.iter().copied());
                if matches!(self.spec.kind, FlowKind::Keystroke { .. }) && s.completed > 0 {
                    r.packets_per_keystroke = Some(round(s.frames as f64 / s.completed as f64));
                }
                if let (
                    FlowKind::RequestResponse {
                        request, response, ..
                    },
                    Some(t),
                ) = (&self.spec.kind, trace)
                {
                    let segments = t.segments.iter().filter(|s| !s.retransmit).count() as u64;
                    if segments > 0 && rate > 0 {
                        let overhead = (t.wire_bytes - t.payload_bytes) as f64 / segments as f64;
                        let biggest = (*request).max(*response) as f64 + overhead;
                        r.transactions_bound_per_s = Some(round(rate as f64 / (8.0 * biggest)));
                    }
                }
            }
            AppState::Ping(p) => {
                r.pings_sent = Some(p.sent_at.len() as u32);
                r.pings_received = Some(p.received);
                r.rtt = RttStats::of(p.rtts_ms.iter().copied());
                r.ping_smoothed = SmoothedRtt::of(p.rtts_ms.iter().copied());
                if let FlowKind::Ping { size, .. } = &self.spec.kind {
                    r.bytes = u64::from(p.received) * *size as u64;
                }
            }
        }
    }
}

/// The `[[ladder]]` rungs with the goodput their flows reached.
fn rungs(scenario: &Scenario, flows: &[FlowReport]) -> Vec<RungReport> {
    scenario
        .ladder
        .iter()
        .map(|rung| {
            let flow = &flows[rung.flow];
            let imp_mbit = round(flow.goodput_bps / 1e6);
            RungReport {
                step: rung.step.clone(),
                flow: flow.name.clone(),
                seed_mbit: rung.seed_mbit,
                imp_mbit,
                pct_of_seed: rung.seed_mbit.map(|s| round(100.0 * imp_mbit / s)),
            }
        })
        .collect()
}

/// Goodput and the percentages of the link and of the bound, from the bytes in `r`.
fn fill_rates(r: &mut FlowReport, rate: u64, seconds: f64) {
    r.goodput_bps = round(r.bytes as f64 * 8.0 / seconds);
    r.goodput_bytes_per_s = round(r.bytes as f64 / seconds);
    // Request/response moves data both ways over a full-duplex link: its capacity is
    // twice the rate, and its bound is the transaction bound.
    let directions = if r.kind == "rr" { 2.0 } else { 1.0 };
    if rate > 0 {
        r.capacity_pct = round(100.0 * r.goodput_bps / (directions * rate as f64));
    }
    match (r.transactions_per_s, r.transactions_bound_per_s) {
        (Some(tps), Some(bound)) if bound > 0.0 => r.bound_pct = round(100.0 * tps / bound),
        _ if r.kind == "rr" => {}
        _ if r.bound_bps > 0.0 => r.bound_pct = round(100.0 * r.goodput_bps / r.bound_bps),
        _ => {}
    }
}

mod apps;
mod ftp;
mod routers;

#[cfg(test)]
mod tests {
    use super::SmoothedRtt;

    /// The bulk sender writing only what TCP can send soon puts on the wire what it
    /// put there filling the send buffer at once: the same frames at the same times
    /// (the trace hash covers every frame delivered and when) and the same summary,
    /// every stream intact. A byte lost, repeated or moved by the lazy writer changes
    /// the frames; a segment cut short for want of data changes them too. Flows
    /// whose send buffer limits them in slow start, flows through random loss with
    /// and without SACK, and short files that end (the close) with small buffers.
    #[test]
    fn the_lazy_bulk_sender_puts_the_eager_ones_frames_on_the_wire() {
        let dumbbell = |name: &str, flow: &str, tcp: &str, loss: &str| {
            format!(
                "name = \"{name}\"\nduration = \"3s\"\nseed = 7\n[dumbbell]\npairs = 3\n\
                 stagger = \"150ms\"\naccess = {{ rate = \"1gbit\", delay = \"1ms\" }}\n\
                 bottleneck = {{ rate = \"100mbit\", delay = \"20ms\", queue = \"500K\"{loss} }}\n\
                 flow = {{ type = \"bulk\", {flow} }}\ntcp = {{ {tcp} }}\n"
            )
        };
        let cases = [
            dumbbell(
                "buffer-limited",
                "bytes = \"1G\", record = \"64K\"",
                "send_buffer = \"2M\", recv_buffer = \"4M\"",
                "",
            ),
            dumbbell(
                "lossy-sack",
                "bytes = \"1G\", record = \"64K\"",
                "send_buffer = \"1M\", recv_buffer = \"4M\"",
                ", loss = \"0.5%\"",
            ),
            dumbbell(
                "lossy-newreno-short-files",
                "bytes = \"700K\", record = \"3000\"",
                "send_buffer = \"96K\", recv_buffer = \"256K\", sack = false",
                ", loss = \"1%\"",
            ),
        ];
        for text in &cases {
            let scenario = crate::scenario::Scenario::parse(text, "lazy").unwrap();
            let run = |eager| {
                let outcome = super::run_filling(&scenario, None, &mut |_| {}, eager)
                    .unwrap_or_else(|e| panic!("{}: {e}", scenario.name));
                serde_json::to_string_pretty(&outcome.report).unwrap()
            };
            let (eager, lazy) = (run(true), run(false));
            assert_eq!(lazy, eager, "{}: the summaries differ", scenario.name);
            let report: serde_json::Value = serde_json::from_str(&lazy).unwrap();
            for flow in report["flows"].as_array().unwrap() {
                assert!(flow["bytes"].as_u64().unwrap() > 0, "{}", scenario.name);
                if scenario.name.contains("short") {
                    assert_eq!(flow["data_ok"], true, "{}: {flow}", scenario.name);
                }
            }
        }
    }

    #[test]
    fn smoothed_rtt_follows_jacobsons_gains() {
        assert_eq!(SmoothedRtt::of(std::iter::empty()), None);
        let one = SmoothedRtt::of([2000.0].into_iter()).unwrap();
        assert_eq!((one.srtt_ms, one.mdev_ms), (2000.0, 0.0));
        // 2000, then 2800: err 800, srtt 2100, mdev 200; then 2100: err 0, mdev 150.
        let three = SmoothedRtt::of([2000.0, 2800.0, 2100.0].into_iter()).unwrap();
        assert_eq!((three.srtt_ms, three.mdev_ms), (2100.0, 150.0));
    }
}
