//! The tables `route_lookup` (bench) and `route_lookup_count` (example) measure: a
//! default route plus `n - 1` distinct random prefixes of /8 to /32, and uniformly random
//! destinations, all from fixed seeds.

use std::collections::HashSet;
use std::net::Ipv4Addr;

use impnet_core::iface::{IfaceConfig, IfaceId, Offloads};
use impnet_core::rng::Rng;
use impnet_core::{Route, Secret, Stack, StackConfig};
use impnet_wire::ethernet;
use impnet_wire::ipv4::Cidr;

/// Interfaces the routes spread over (ids come from a stack: they are opaque).
fn interfaces() -> Vec<IfaceId> {
    // A benchmark needs no secrecy, only the same stack every run.
    let mut stack = Stack::new(StackConfig::default(), Secret::from_bytes([0; Secret::LEN]));
    (0..4u8)
        .map(|i| {
            stack.add_interface(
                IfaceConfig::new(ethernet::Address([0x02, 0, 0, 0, 0, i]), 1500)
                    .with_offloads(Offloads::default()),
            )
        })
        .collect()
}

fn random_address(rng: &mut Rng) -> Ipv4Addr {
    Ipv4Addr::from_bits(rng.in_range(0, u32::MAX))
}

/// A default route and `n - 1` distinct random /8../32 prefixes.
pub fn routes(n: usize) -> Vec<Route> {
    routes_seeded(n, 0x1812)
}

/// As [`routes`], from another seed.
pub fn routes_seeded(n: usize, seed: u64) -> Vec<Route> {
    let ifaces = interfaces();
    let mut rng = Rng::new(seed);
    let mut routes = Vec::with_capacity(n);
    routes.push(Route {
        cidr: Cidr {
            address: Ipv4Addr::UNSPECIFIED,
            prefix_len: 0,
        },
        gateway: Some(Ipv4Addr::new(192, 0, 2, 1)),
        iface: ifaces[0],
        mtu: None,
    });
    let mut seen = HashSet::new();
    while routes.len() < n {
        let prefix_len = u8::try_from(rng.in_range(8, 32)).unwrap_or(32);
        let address = random_address(&mut rng);
        let mask = u32::MAX << (32 - u32::from(prefix_len));
        if !seen.insert((address.to_bits() & mask, prefix_len)) {
            continue;
        }
        routes.push(Route {
            cidr: Cidr {
                address,
                prefix_len,
            },
            gateway: Some(random_address(&mut rng)),
            iface: ifaces[routes.len() % ifaces.len()],
            mtu: None,
        });
    }
    routes
}

/// `count` uniformly random destinations.
pub fn destinations(count: usize) -> Vec<Ipv4Addr> {
    let mut rng = Rng::new(0x0791);
    (0..count).map(|_| random_address(&mut rng)).collect()
}
