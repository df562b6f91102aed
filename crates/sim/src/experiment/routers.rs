//! What the routers did: per interface, the datagrams forwarded and refused (by
//! reason), the frames the egress link dropped (by reason), and the egress queue over
//! time, sampled as the experiment runs. Also Jain's fairness index over bulk flows.

use impnet_core::Instant;
use impnet_core::stats::ForwardStats;
use serde::Serialize;

use super::{FlowReport, round};
use crate::scenario::{NodeKind, Scenario};
use crate::trace::QueueTrace;
use crate::{HostId, LinkId, Sim};

/// One router's counters.
#[derive(Debug, Clone, Serialize)]
pub struct RouterReport {
    /// Router name.
    pub name: String,
    /// Datagrams forwarded, all interfaces together.
    pub forwarded: u64,
    /// Datagrams refused or dropped, all interfaces together.
    pub dropped: u64,
    /// Per interface, in the order its links were added.
    pub interfaces: Vec<InterfaceReport>,
}

/// One router interface: what arrived there and what left through it.
#[derive(Debug, Clone, Serialize)]
pub struct InterfaceReport {
    /// The link the interface is on.
    pub link: String,
    /// The node at the other end.
    pub peer: String,
    /// The interface's address.
    pub address: String,
    /// Frames received.
    pub rx_frames: u64,
    /// Frames sent.
    pub tx_frames: u64,
    /// Datagrams that arrived here and were forwarded.
    pub forwarded: u64,
    /// Why datagrams that arrived here or left through here were dropped.
    pub drops: DropReport,
    /// The egress queue (the link's transmit queue in this router's direction).
    pub queue: QueueReport,
}

/// Drops by reason. The first group is the forwarding decision for datagrams arriving
/// on the interface; the second is the egress link for frames leaving through it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DropReport {
    /// No route to the destination (ICMP net unreachable sent).
    pub no_route: u64,
    /// TTL expired (ICMP time exceeded sent).
    pub ttl_exceeded: u64,
    /// Too big for the next hop with DF set (ICMP fragmentation needed sent).
    pub frag_needed: u64,
    /// Martian source or destination, link broadcast, bad option, denied.
    pub refused_other: u64,
    /// The outgoing interface's neighbour queue was full or ARP failed.
    pub neighbour: u64,
    /// Egress: the link's queue (or its discipline's limit) was full (tail drop).
    pub queue_full: u64,
    /// Egress: dropped by the discipline's CoDel law (sojourn time above target).
    pub aqm: u64,
    /// Egress: marked CE by the discipline instead of dropped (ECN).
    pub ce_marked: u64,
    /// Egress: lost on the wire (random or burst loss: the link's cells).
    pub wire_loss: u64,
    /// Egress: larger than the link MTU.
    pub oversize: u64,
    /// Egress: ICMP dropped by the link's firewall (`block_icmp`).
    pub icmp_filtered: u64,
}

/// The egress queue over the run: its backlog, sampled every `sample_interval`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct QueueReport {
    /// Samples taken.
    pub samples: u64,
    /// Largest backlog seen, bytes.
    pub max_bytes: u64,
    /// Mean backlog, bytes.
    pub mean_bytes: f64,
    /// Largest queueing delay seen (what a frame arriving then waited), ms.
    pub max_delay_ms: f64,
    /// Mean queueing delay, ms.
    pub mean_delay_ms: f64,
}

fn refused(f: &ForwardStats) -> u64 {
    f.no_route
        + f.ttl_exceeded
        + f.frag_needed
        + f.martian
        + f.broadcast
        + f.bad_option
        + f.denied
        + f.egress_dropped
}

/// The egress queues the experiment follows: every router's direction of every link
/// it is on, as (router index, link index, side of the link the router is).
pub(super) fn router_egresses(scenario: &Scenario) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    for (node, spec) in scenario.nodes.iter().enumerate() {
        if spec.kind != NodeKind::Router {
            continue;
        }
        for (index, link) in scenario.links.iter().enumerate() {
            if link.a == node {
                out.push((node, index, 0));
            } else if link.b == node {
                out.push((node, index, 1));
            }
        }
    }
    out
}

/// Samples every followed egress queue at the simulator's current instant.
pub(super) fn sample_queues(
    sim: &Sim,
    links: &[LinkId],
    queues: &mut [QueueTrace],
    start: Instant,
) {
    let now = sim.now();
    let seconds = (now - start).as_secs_f64();
    for queue in queues {
        let model = sim.link_model(links[queue.link], queue.side);
        // What the transmitter still has to send, then what a discipline holds.
        let rate = model.config().rate_bps;
        let busy = model.busy_until().max(now) - now;
        let held = model.qdisc().map_or(0, |q| q.len_bytes() as u64);
        let held_time = if rate == 0 {
            0
        } else {
            (u128::from(held) * 8_000_000_000 / u128::from(rate)) as u64
        };
        let wait = busy + impnet_core::Duration::from_nanos(held_time);
        let bytes = (u128::from(busy.as_nanos()) * u128::from(rate) / 8_000_000_000) as u64 + held;
        queue
            .samples
            .push((seconds, bytes, wait.as_secs_f64() * 1e3));
    }
}

/// Every router's report, from the simulator's counters and the queue samples.
pub(super) fn router_reports(
    scenario: &Scenario,
    sim: &Sim,
    hosts: &[HostId],
    links: &[LinkId],
    queues: &[QueueTrace],
) -> Vec<RouterReport> {
    let mut out: Vec<RouterReport> = Vec::new();
    for queue in queues {
        let node = queue.router;
        let stack = sim.host(hosts[node]);
        if out
            .last()
            .is_none_or(|r| r.name != scenario.nodes[node].name)
        {
            // Both families: a dual-stack scenario's router forwards IPv6 too.
            let forward = &stack.stats().forward.plus(&stack.stats().forward6);
            out.push(RouterReport {
                name: scenario.nodes[node].name.clone(),
                forwarded: forward.forwarded,
                dropped: refused(forward),
                interfaces: Vec::new(),
            });
        }
        let spec = &scenario.links[queue.link];
        let (peer, address) = if queue.side == 0 {
            (spec.b, spec.a_addr)
        } else {
            (spec.a, spec.b_addr)
        };
        let iface = sim.iface_on(hosts[node], links[queue.link]);
        let stats = iface
            .and_then(|i| stack.iface_stats(i))
            .cloned()
            .unwrap_or_default();
        let model = sim.link_model(links[queue.link], queue.side);
        let egress = model.stats();
        let qdisc = model.qdisc().map(|q| q.stats());
        let f = &stats.forward.plus(&stats.forward6);
        let report = InterfaceReport {
            link: spec.name.clone(),
            peer: scenario.nodes[peer].name.clone(),
            address: address.to_string(),
            rx_frames: stats.rx_frames,
            tx_frames: stats.tx_frames,
            forwarded: f.forwarded,
            drops: DropReport {
                no_route: f.no_route,
                ttl_exceeded: f.ttl_exceeded,
                frag_needed: f.frag_needed,
                refused_other: f.martian + f.broadcast + f.bad_option + f.denied,
                neighbour: f.egress_dropped,
                queue_full: egress.dropped_queue,
                aqm: qdisc.map_or(0, |q| q.dropped_codel),
                ce_marked: qdisc.map_or(0, |q| q.ce_marked),
                wire_loss: egress.dropped_loss,
                oversize: egress.dropped_oversize,
                icmp_filtered: sim.filtered(links[queue.link], queue.side),
            },
            queue: queue_report(queue),
        };
        if let Some(router) = out.last_mut() {
            router.interfaces.push(report);
        }
    }
    out
}

fn queue_report(queue: &QueueTrace) -> QueueReport {
    let n = queue.samples.len();
    if n == 0 {
        return QueueReport::default();
    }
    let sum_bytes: u64 = queue.samples.iter().map(|s| s.1).sum();
    let sum_delay: f64 = queue.samples.iter().map(|s| s.2).sum();
    QueueReport {
        samples: n as u64,
        max_bytes: queue.samples.iter().map(|s| s.1).max().unwrap_or(0),
        mean_bytes: round(sum_bytes as f64 / n as f64),
        max_delay_ms: round(queue.samples.iter().map(|s| s.2).fold(0.0, f64::max)),
        mean_delay_ms: round(sum_delay / n as f64),
    }
}

/// Jain's fairness index over the bulk flows' goodput: (sum x)^2 / (n * sum x^2),
/// 1 when all are equal, 1/n when one flow has everything. `None` with fewer than two
/// bulk flows or no goodput at all.
pub fn jain_index(flows: &[FlowReport]) -> Option<f64> {
    let x: Vec<f64> = flows
        .iter()
        .filter(|f| f.kind == "bulk")
        .map(|f| f.goodput_bps)
        .collect();
    let squares: f64 = x.iter().map(|v| v * v).sum();
    if x.len() < 2 || squares == 0.0 {
        return None;
    }
    let sum: f64 = x.iter().sum();
    Some(round(sum * sum / (x.len() as f64 * squares)))
}
