//! Paths and routing tables for a scenario's topology: shortest paths over the links,
//! where only routers carry traffic through (a host is a path's end, never its middle),
//! and the static routes that send every node's packets along them.
//!
//! Everything is deterministic: ties between equally short paths go to the path found
//! first, exploring nodes in index order and links in file order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::Ipv4Addr;

use impnet_wire::ipv4::Cidr;

use super::{
    Ctx, FlowSpec, LinkSpec, NodeKind, NodeSpec, PendingFlow, RouteSpec, Routing, ScenarioError,
};

/// How one node is reached from the source of a [`Tree`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reached {
    /// The path's cost: (primary metric, secondary metric).
    cost: (u64, u64),
    /// The link the path arrives on and the node before it (`None` at the source).
    previous: Option<(usize, usize)>,
}

/// Shortest paths from one node to every node it can reach.
#[derive(Debug, Clone)]
pub(crate) struct Tree {
    source: usize,
    reached: Vec<Option<Reached>>,
}

/// Each node's links, as (link index, node at the other end), in file order.
pub(crate) fn adjacency(nodes: usize, links: &[LinkSpec]) -> Vec<Vec<(usize, usize)>> {
    let mut adjacent = vec![Vec::new(); nodes];
    for (index, link) in links.iter().enumerate() {
        adjacent[link.a].push((index, link.b));
        adjacent[link.b].push((index, link.a));
    }
    adjacent
}

/// The cost of crossing `link` under `metric`: hops first (then delay), or delay first
/// (then hops).
fn link_cost(link: &LinkSpec, metric: Routing) -> (u64, u64) {
    let delay = link.config.delay.as_nanos();
    match metric {
        Routing::Delay => (delay, 1),
        Routing::Hops | Routing::Static => (1, delay),
    }
}

impl Tree {
    /// Dijkstra from `source`: paths leave the source and pass through routers only.
    pub(crate) fn new(
        source: usize,
        kinds: &[NodeKind],
        links: &[LinkSpec],
        adjacent: &[Vec<(usize, usize)>],
        metric: Routing,
    ) -> Tree {
        let mut reached: Vec<Option<Reached>> = vec![None; kinds.len()];
        reached[source] = Some(Reached {
            cost: (0, 0),
            previous: None,
        });
        let mut done = vec![false; kinds.len()];
        let mut heap = BinaryHeap::new();
        heap.push(Reverse(((0u64, 0u64), source)));
        while let Some(Reverse((cost, node))) = heap.pop() {
            if done[node] {
                continue;
            }
            done[node] = true;
            if node != source && kinds[node] != NodeKind::Router {
                continue;
            }
            for &(link, next) in &adjacent[node] {
                let step = link_cost(&links[link], metric);
                let total = (cost.0.saturating_add(step.0), cost.1.saturating_add(step.1));
                if reached[next].is_none_or(|r| total < r.cost) {
                    reached[next] = Some(Reached {
                        cost: total,
                        previous: Some((link, node)),
                    });
                    heap.push(Reverse((total, next)));
                }
            }
        }
        Tree { source, reached }
    }

    /// The links from the source to `to`, in order (`None` when `to` is unreachable;
    /// empty when `to` is the source).
    pub(crate) fn path(&self, to: usize) -> Option<Vec<usize>> {
        let mut links = Vec::new();
        let mut node = to;
        loop {
            let reached = self.reached.get(node).copied().flatten()?;
            match reached.previous {
                Some((link, before)) => {
                    links.push(link);
                    node = before;
                }
                None => break,
            }
        }
        links.reverse();
        Some(links)
    }

    /// The cost of the path to `to`, if it is reachable.
    fn cost(&self, to: usize) -> Option<(u64, u64)> {
        self.reached.get(to).copied().flatten().map(|r| r.cost)
    }

    /// The first link of the path to `to` and the neighbour at its other end.
    fn first_hop(&self, to: usize, links: &[LinkSpec]) -> Option<(usize, usize)> {
        let first = *self.path(to)?.first()?;
        let link = &links[first];
        let neighbour = if link.a == self.source {
            link.b
        } else {
            link.a
        };
        Some((first, neighbour))
    }
}

/// The address node `node` has on `link` (one of its two ends).
pub(crate) fn address_on(link: &LinkSpec, node: usize) -> Ipv4Addr {
    if link.a == node {
        link.a_addr.address
    } else {
        link.b_addr.address
    }
}

/// The routes that send every node's packets along the shortest paths: for each node,
/// each link's subnet that is not its own goes through the first hop towards the
/// nearer end of that link. The next hop most subnets share becomes the default route,
/// so a host with one link gets a single default route.
pub(crate) fn compute_routes(
    kinds: &[NodeKind],
    links: &[LinkSpec],
    metric: Routing,
) -> Vec<RouteSpec> {
    let adjacent = adjacency(kinds.len(), links);
    let mut routes = Vec::new();
    for node in 0..kinds.len() {
        let tree = Tree::new(node, kinds, links, &adjacent, metric);
        // (subnet, first link, neighbour) for every remote subnet reachable.
        let mut remote: Vec<(Cidr, usize, usize)> = Vec::new();
        for link in links {
            if link.a == node || link.b == node {
                continue;
            }
            let nearer = [link.a, link.b]
                .into_iter()
                .filter_map(|end| tree.cost(end).map(|c| (c, end)))
                .min();
            if let Some((_, end)) = nearer
                && let Some((first, neighbour)) = tree.first_hop(end, links)
            {
                remote.push((link.a_addr.network(), first, neighbour));
            }
        }
        routes.extend(aggregate(node, &remote, links));
    }
    routes
}

/// One node's routes: a default route through the most used next hop, and a route per
/// subnet that goes elsewhere.
fn aggregate(node: usize, remote: &[(Cidr, usize, usize)], links: &[LinkSpec]) -> Vec<RouteSpec> {
    let mut counts: Vec<((usize, usize), usize)> = Vec::new();
    for &(_, first, neighbour) in remote {
        match counts
            .iter_mut()
            .find(|(hop, _)| *hop == (first, neighbour))
        {
            Some((_, n)) => *n += 1,
            None => counts.push(((first, neighbour), 1)),
        }
    }
    // The most used next hop; the first found among equals.
    let most = counts.iter().map(|c| c.1).max().unwrap_or(0);
    let Some(&((link, neighbour), _)) = counts.iter().find(|(_, n)| *n == most) else {
        return Vec::new();
    };
    let mut routes = vec![RouteSpec {
        node,
        dest: Cidr::DEFAULT_ROUTE,
        link,
        gateway: address_on(&links[link], neighbour),
    }];
    for &(dest, first, next) in remote {
        if (first, next) != (link, neighbour) {
            routes.push(RouteSpec {
                node,
                dest,
                link: first,
                gateway: address_on(&links[first], next),
            });
        }
    }
    routes
}

/// Each flow's path: the first link joining its two ends when there is one (as flows
/// always ran), else the shortest path through routers. With static routing the path
/// is the hop-count shortest one, which the given routes should follow.
pub(crate) fn resolve_flows(
    ctx: &Ctx<'_>,
    pending: Vec<PendingFlow>,
    nodes: &[NodeSpec],
    links: &[LinkSpec],
    routing: Routing,
) -> Result<Vec<FlowSpec>, ScenarioError> {
    let kinds: Vec<NodeKind> = nodes.iter().map(|n| n.kind).collect();
    let adjacent = adjacency(nodes.len(), links);
    let mut trees: Vec<Option<Tree>> = vec![None; nodes.len()];
    let mut out = Vec::with_capacity(pending.len());
    for flow in pending {
        let (from, to) = (flow.from, flow.to);
        let direct = links
            .iter()
            .position(|l| (l.a, l.b) == (from, to) || (l.a, l.b) == (to, from));
        let path = match direct {
            Some(link) => vec![link],
            None => {
                let tree = trees[from]
                    .get_or_insert_with(|| Tree::new(from, &kinds, links, &adjacent, routing));
                tree.path(to).filter(|p| !p.is_empty()).ok_or_else(|| {
                    ctx.error(
                        flow.span.clone(),
                        "to",
                        format!(
                            "no path from `{}` to `{}`: no link joins them and no chain of \
                             routers does (hosts do not forward)",
                            nodes[from].name, nodes[to].name
                        ),
                    )
                })?
            }
        };
        let first = &links[path[0]];
        let last = &links[path[path.len() - 1]];
        out.push(FlowSpec {
            name: flow.name,
            from,
            to,
            from_addr: address_on(first, from),
            to_addr: address_on(last, to),
            path,
            start: flow.start,
            kind: flow.kind,
            ipv6: flow.ipv6,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use impnet_core::Duration;
    use impnet_phy::LinkConfig;

    fn link(index: usize, a: usize, b: usize, delay_ms: u64) -> LinkSpec {
        let cidr = |host| Cidr::new(Ipv4Addr::new(10, 0, index as u8, host), 24).unwrap();
        LinkSpec {
            name: format!("l{index}"),
            a,
            b,
            a_addr: cidr(1),
            b_addr: cidr(2),
            config: LinkConfig::default().with_delay(Duration::from_millis(delay_ms)),
            block_icmp: false,
            seed: None,
        }
    }

    use NodeKind::{Host, Router};

    #[test]
    fn paths_pass_through_routers_only() {
        // h0 - r1 - h2, and h0 - h3 - h2 (hosts do not forward).
        let kinds = [Host, Router, Host, Host];
        let links = [
            link(0, 0, 1, 1),
            link(1, 1, 2, 1),
            link(2, 0, 3, 0),
            link(3, 3, 2, 0),
        ];
        let adjacent = adjacency(kinds.len(), &links);
        let tree = Tree::new(0, &kinds, &links, &adjacent, Routing::Hops);
        assert_eq!(tree.path(2), Some(vec![0, 1]));
        assert_eq!(tree.path(0), Some(vec![]));
        let tree = Tree::new(3, &kinds, &links, &adjacent, Routing::Hops);
        assert_eq!(tree.path(2), Some(vec![3]));
        assert_eq!(tree.path(1), None, "h0 and h2 are hosts: no way to r1");
    }

    #[test]
    fn delay_metric_prefers_the_faster_longer_path() {
        // h0 - r1 - h4 directly (100 ms), or h0 - r1 - r2 - r3 - h4 (3 ms).
        let kinds = [Host, Router, Router, Router, Host];
        let links = [
            link(0, 0, 1, 1),
            link(1, 1, 4, 100),
            link(2, 1, 2, 1),
            link(3, 2, 3, 1),
            link(4, 3, 4, 1),
        ];
        let adjacent = adjacency(kinds.len(), &links);
        let hops = Tree::new(0, &kinds, &links, &adjacent, Routing::Hops);
        assert_eq!(hops.path(4), Some(vec![0, 1]));
        let delay = Tree::new(0, &kinds, &links, &adjacent, Routing::Delay);
        assert_eq!(delay.path(4), Some(vec![0, 2, 3, 4]));
    }

    #[test]
    fn unreachable_nodes_have_no_path() {
        let kinds = [Host, Host, Host, Host];
        let links = [link(0, 0, 1, 1), link(1, 2, 3, 1)];
        let adjacent = adjacency(kinds.len(), &links);
        let tree = Tree::new(0, &kinds, &links, &adjacent, Routing::Hops);
        assert_eq!(tree.path(2), None);
        assert!(compute_routes(&kinds, &links, Routing::Hops).is_empty());
    }

    #[test]
    fn a_stub_host_gets_one_default_route_and_routers_get_specific_ones() {
        // h0 - r1 - r2 - h3, and h4 on r1.
        let kinds = [Host, Router, Router, Host, Host];
        let links = [
            link(0, 0, 1, 1),
            link(1, 1, 2, 1),
            link(2, 2, 3, 1),
            link(3, 1, 4, 1),
        ];
        let routes = compute_routes(&kinds, &links, Routing::Hops);
        let of = |node| routes.iter().filter(|r| r.node == node).collect::<Vec<_>>();
        let h0 = of(0);
        assert_eq!(h0.len(), 1);
        assert_eq!(h0[0].dest, Cidr::DEFAULT_ROUTE);
        assert_eq!(h0[0].gateway, Ipv4Addr::new(10, 0, 0, 2));
        // r1 reaches h3's subnet (link 2) through r2: its only remote subnet.
        let r1 = of(1);
        assert_eq!(r1.len(), 1);
        assert_eq!((r1[0].link, r1[0].gateway), (1, Ipv4Addr::new(10, 0, 1, 2)));
        // r2 reaches links 0 and 3 through r1: one default route.
        let r2 = of(2);
        assert_eq!(r2.len(), 1);
        assert_eq!(r2[0].gateway, Ipv4Addr::new(10, 0, 1, 1));
    }
}
