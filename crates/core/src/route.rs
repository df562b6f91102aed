//! The routing table: longest-prefix match over IPv4 prefixes (RFC 1812 §5.2.4.3), each
//! naming an interface and, when the destination is not on-link, a gateway.

use alloc::vec::Vec;
use core::net::Ipv4Addr;

use impnet_wire::ipv4::Cidr;

use crate::iface::{IfaceId, cidr_contains, prefix_mask};

/// One routing table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The destinations this route covers (stored with its host bits cleared).
    pub cidr: Cidr,
    /// The next hop for every destination in `cidr`; `None` means on-link (the
    /// destination itself is the next hop).
    pub gateway: Option<Ipv4Addr>,
    /// The interface packets leave on.
    pub iface: IfaceId,
    /// A path MTU below the interface's, if any.
    pub mtu: Option<usize>,
}

impl Route {
    /// The neighbour a packet to `dst` is handed to.
    pub fn next_hop(&self, dst: Ipv4Addr) -> Ipv4Addr {
        self.gateway.unwrap_or(dst)
    }
}

/// The routing table.
#[derive(Debug, Clone, Default)]
pub struct Routes {
    /// Invariant: at most one entry per (network, prefix length).
    entries: Vec<Route>,
}

fn network(cidr: Cidr) -> Cidr {
    let address = Ipv4Addr::from_bits(cidr.address.to_bits() & prefix_mask(cidr.prefix_len));
    Cidr {
        address,
        prefix_len: cidr.prefix_len.min(32),
    }
}

impl Routes {
    /// An empty table.
    pub fn new() -> Routes {
        Routes::default()
    }

    /// Route `cidr` through `gateway` (or on-link when `None`) on `iface`, replacing any
    /// route for the same prefix.
    pub fn add(&mut self, cidr: Cidr, gateway: Option<Ipv4Addr>, iface: IfaceId) {
        self.insert(Route {
            cidr,
            gateway,
            iface,
            mtu: None,
        });
    }

    /// Route everything without a more specific route through `gateway` on `iface`.
    pub fn add_default(&mut self, gateway: Ipv4Addr, iface: IfaceId) {
        let cidr = Cidr {
            address: Ipv4Addr::UNSPECIFIED,
            prefix_len: 0,
        };
        self.add(cidr, Some(gateway), iface);
    }

    /// Add `route` as given (with its MTU), replacing any route for the same prefix.
    pub fn insert(&mut self, mut route: Route) {
        route.cidr = network(route.cidr);
        match self.entries.iter_mut().find(|r| r.cidr == route.cidr) {
            Some(existing) => *existing = route,
            None => self.entries.push(route),
        }
    }

    /// Remove the route for exactly this prefix, returning it.
    pub fn remove(&mut self, cidr: Cidr) -> Option<Route> {
        let cidr = network(cidr);
        let position = self.entries.iter().position(|r| r.cidr == cidr)?;
        Some(self.entries.swap_remove(position))
    }

    /// Remove every route through `iface` whose prefix matches `cidr` (used when an
    /// address goes away).
    pub(crate) fn remove_connected(&mut self, cidr: Cidr, iface: IfaceId) {
        let cidr = network(cidr);
        self.entries
            .retain(|r| !(r.cidr == cidr && r.iface == iface && r.gateway.is_none()));
    }

    /// The most specific route covering `dst`.
    pub fn lookup(&self, dst: Ipv4Addr) -> Option<Route> {
        self.entries
            .iter()
            .filter(|r| cidr_contains(&r.cidr, dst))
            .max_by_key(|r| r.cidr.prefix_len)
            .copied()
    }

    /// Every route, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Route> {
        self.entries.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(a: [u8; 4], len: u8) -> Cidr {
        Cidr {
            address: Ipv4Addr::from(a),
            prefix_len: len,
        }
    }

    #[test]
    fn longest_prefix_wins_and_default_catches_the_rest() {
        let (e0, e1, e2) = (IfaceId(0), IfaceId(1), IfaceId(2));
        let mut routes = Routes::new();
        routes.add_default(Ipv4Addr::new(192, 168, 1, 1), e0);
        routes.add(
            cidr([10, 0, 0, 0], 8),
            Some(Ipv4Addr::new(192, 168, 1, 2)),
            e1,
        );
        routes.add(cidr([10, 1, 2, 0], 24), None, e2);

        let r = routes.lookup(Ipv4Addr::new(10, 1, 2, 3)).unwrap();
        assert_eq!(
            (r.iface, r.next_hop(Ipv4Addr::new(10, 1, 2, 3))),
            (e2, Ipv4Addr::new(10, 1, 2, 3))
        );
        let r = routes.lookup(Ipv4Addr::new(10, 9, 9, 9)).unwrap();
        assert_eq!(
            (r.iface, r.gateway),
            (e1, Some(Ipv4Addr::new(192, 168, 1, 2)))
        );
        let r = routes.lookup(Ipv4Addr::new(8, 8, 8, 8)).unwrap();
        assert_eq!(
            (r.iface, r.gateway),
            (e0, Some(Ipv4Addr::new(192, 168, 1, 1)))
        );

        assert!(routes.remove(cidr([0, 0, 0, 0], 0)).is_some());
        assert_eq!(routes.lookup(Ipv4Addr::new(8, 8, 8, 8)), None);
    }

    #[test]
    fn adding_the_same_prefix_replaces_it() {
        let mut routes = Routes::new();
        routes.add(cidr([10, 1, 2, 77], 24), None, IfaceId(0));
        routes.add(cidr([10, 1, 2, 0], 24), None, IfaceId(1));
        assert_eq!(routes.iter().count(), 1);
        assert_eq!(
            routes.lookup(Ipv4Addr::new(10, 1, 2, 1)).unwrap().iface,
            IfaceId(1)
        );
    }
}
