//! The routing table against a linear model, and its edge cases.

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

#[test]
fn an_empty_table_matches_nothing_and_allocates_nothing() {
    let routes = Routes::new();
    assert_eq!(routes.lookup(Ipv4Addr::new(1, 2, 3, 4)), None);
    assert_eq!(routes.lookup_index(Ipv4Addr::BROADCAST), None);
    assert!(routes.is_empty());
    assert_eq!(routes.slots.capacity(), 0);
}

#[test]
fn a_host_route_beats_its_covering_prefixes_and_only_for_its_host() {
    let mut routes = Routes::new();
    routes.add(cidr([10, 0, 0, 0], 8), None, IfaceId(0));
    routes.add(cidr([10, 0, 0, 5], 32), None, IfaceId(1));
    routes.add(cidr([10, 0, 0, 4], 31), None, IfaceId(2));
    let iface = |r: &Routes, a: [u8; 4]| r.lookup(Ipv4Addr::from(a)).map(|r| r.iface);
    assert_eq!(iface(&routes, [10, 0, 0, 5]), Some(IfaceId(1)));
    assert_eq!(iface(&routes, [10, 0, 0, 4]), Some(IfaceId(2)));
    assert_eq!(iface(&routes, [10, 0, 0, 6]), Some(IfaceId(0)));
    assert_eq!(iface(&routes, [11, 0, 0, 5]), None);
    // The /32 at the very top of the address space.
    routes.add(cidr([255, 255, 255, 255], 32), None, IfaceId(3));
    assert_eq!(iface(&routes, [255, 255, 255, 255]), Some(IfaceId(3)));
    assert_eq!(iface(&routes, [255, 255, 255, 254]), None);
}

#[test]
fn removing_a_covering_prefix_keeps_the_longer_ones() {
    let mut routes = Routes::new();
    routes.add_default(Ipv4Addr::new(192, 0, 2, 1), IfaceId(0));
    routes.add(cidr([10, 0, 0, 0], 8), None, IfaceId(1));
    routes.add(cidr([10, 20, 30, 0], 24), None, IfaceId(2));
    routes.add(cidr([10, 20, 30, 40], 30), None, IfaceId(3));
    assert!(routes.remove(cidr([10, 99, 0, 0], 8)).is_some());
    let iface = |r: &Routes, a: [u8; 4]| r.lookup(Ipv4Addr::from(a)).map(|r| r.iface);
    assert_eq!(iface(&routes, [10, 20, 30, 41]), Some(IfaceId(3)));
    assert_eq!(iface(&routes, [10, 20, 30, 1]), Some(IfaceId(2)));
    assert_eq!(iface(&routes, [10, 20, 31, 1]), Some(IfaceId(0)));
    assert!(routes.remove(cidr([0, 0, 0, 0], 0)).is_some());
    assert_eq!(iface(&routes, [10, 20, 31, 1]), None);
    assert_eq!(iface(&routes, [10, 20, 30, 42]), Some(IfaceId(3)));
    assert!(routes.remove(cidr([10, 20, 30, 40], 30)).is_some());
    assert!(routes.remove(cidr([10, 20, 30, 40], 30)).is_none());
    assert_eq!(iface(&routes, [10, 20, 30, 42]), Some(IfaceId(2)));
}

#[test]
fn indices_stay_with_their_route_and_counters_with_their_index() {
    let mut routes = Routes::new();
    routes.add(cidr([10, 0, 0, 0], 8), None, IfaceId(0));
    routes.add(cidr([10, 1, 0, 0], 16), None, IfaceId(0));
    let dst = Ipv4Addr::new(10, 1, 2, 3);
    let (index, _) = routes.lookup_index(dst).unwrap();
    routes.count(index, 1500);
    routes.count(index, 40);
    // Replacing the next hop keeps the index and what was counted.
    routes.add(
        cidr([10, 1, 0, 0], 16),
        Some(Ipv4Addr::new(10, 0, 0, 1)),
        IfaceId(1),
    );
    let (again, route) = routes.lookup_index(dst).unwrap();
    assert_eq!((again, route.iface), (index, IfaceId(1)));
    assert_eq!(
        routes.counters(index),
        Some(RouteCounters {
            packets: 2,
            bytes: 1540
        })
    );
    // Removal frees the index and its counters; a new route may take it, from zero.
    routes.remove(cidr([10, 1, 0, 0], 16));
    assert_eq!((routes.get(index), routes.counters(index)), (None, None));
    routes.count(index, 1);
    routes.add(cidr([172, 16, 0, 0], 12), None, IfaceId(2));
    let (reused, _) = routes.lookup_index(Ipv4Addr::new(172, 16, 0, 1)).unwrap();
    assert_eq!(reused, index);
    assert_eq!(routes.counters(reused), Some(RouteCounters::default()));
    routes.count(usize::MAX, 1);
}

#[test]
fn prefix_lengths_past_32_mean_32() {
    let mut routes = Routes::new();
    routes.add(cidr([10, 0, 0, 1], 40), None, IfaceId(0));
    assert_eq!(routes.iter().next().unwrap().cidr, cidr([10, 0, 0, 1], 32));
    assert!(routes.lookup(Ipv4Addr::new(10, 0, 0, 1)).is_some());
    assert!(routes.lookup(Ipv4Addr::new(10, 0, 0, 2)).is_none());
    assert!(routes.remove(cidr([10, 0, 0, 1], 33)).is_some());
    assert!(routes.is_empty());
}

#[test]
fn a_large_random_table_matches_the_model_loaded_either_way() {
    let mut rng = crate::rng::Rng::new(7);
    let mut model = Linear::default();
    let mut inserted = Routes::new();
    let mut all = Vec::new();
    for i in 0..3000u32 {
        let len = u8::try_from(rng.in_range(8, 32)).unwrap();
        let address = Ipv4Addr::from_bits(u32::try_from(rng.next_u64() >> 32).unwrap());
        let route = Route {
            cidr: Cidr {
                address,
                prefix_len: len,
            },
            gateway: None,
            iface: IfaceId(i),
            mtu: None,
        };
        model.insert(route);
        inserted.insert(route);
        all.push(route);
    }
    let bulk: Routes = all.into_iter().collect();
    for _ in 0..20_000 {
        let dst = Ipv4Addr::from_bits(u32::try_from(rng.next_u64() >> 32).unwrap());
        assert_eq!(inserted.lookup(dst), model.lookup(dst), "{dst}");
        assert_eq!(bulk.lookup(dst), model.lookup(dst), "{dst}");
    }
    for route in &model.entries {
        for dst in probes(route.cidr) {
            assert_eq!(inserted.lookup(dst), model.lookup(dst), "{dst}");
            assert_eq!(bulk.lookup(dst), model.lookup(dst), "{dst}");
        }
    }
}

/// A route for a prefix of any length near one of a few networks, so short and long
/// prefixes nest (a /16 and shorter ones span several of the large table's /16s).
fn clustered_route(rng: &mut crate::rng::Rng, iface: u32) -> Route {
    let bases = [
        0x0A00_0000u32,
        0x0A01_0200,
        0xC0A8_0000,
        0x8000_0000,
        0xFFFF_FFFF,
    ];
    let base = bases[rng.in_range(0, 4) as usize];
    let noise = u32::try_from(rng.next_u64() >> 32).unwrap() >> rng.in_range(0, 16);
    let len = if rng.in_range(0, 9) == 0 {
        u8::try_from(rng.in_range(0, 16)).unwrap()
    } else {
        u8::try_from(rng.in_range(12, 32)).unwrap()
    };
    Route {
        cidr: Cidr {
            address: Ipv4Addr::from_bits(base ^ noise),
            prefix_len: len,
        },
        gateway: None,
        iface: IfaceId(iface),
        mtu: None,
    }
}

/// Every route's probes and `random` random addresses give what the model gives.
fn check_all(routes: &Routes, model: &Linear, rng: &mut crate::rng::Rng, random: usize) {
    for route in &model.entries {
        for dst in probes(route.cidr) {
            assert_eq!(routes.lookup(dst), model.lookup(dst), "{dst}");
        }
    }
    for _ in 0..random {
        let dst = Ipv4Addr::from_bits(u32::try_from(rng.next_u64() >> 32).unwrap());
        assert_eq!(routes.lookup(dst), model.lookup(dst), "{dst}");
    }
    assert_eq!(routes.len(), model.entries.len());
}

#[test]
fn growing_past_the_direct_threshold_and_shrinking_back_matches_the_model() {
    let mut rng = crate::rng::Rng::new(0x1ee7);
    let (mut routes, mut model) = (Routes::new(), Linear::default());
    let mut i = 0;
    while model.entries.len() <= trie::DIRECT_MIN + 300 {
        let route = clustered_route(&mut rng, i);
        i += 1;
        routes.insert(route);
        model.insert(route);
        for dst in probes(route.cidr) {
            assert_eq!(routes.lookup(dst), model.lookup(dst), "{dst}");
        }
        // Now and then a removal, of a short prefix too: the large table rebuilds the
        // /16s it covers.
        if i % 7 == 0 {
            let victim = model.entries[rng.in_range(0, 1_000_000) as usize % model.entries.len()];
            assert_eq!(routes.remove(victim.cidr), model.remove(victim.cidr));
            for dst in probes(victim.cidr) {
                assert_eq!(routes.lookup(dst), model.lookup(dst), "{dst}");
            }
        }
        if model.entries.len() == trie::DIRECT_MIN - 5 {
            assert!(!routes.trie.is_direct());
            check_all(&routes, &model, &mut rng, 2000);
        }
    }
    assert!(routes.trie.is_direct());
    check_all(&routes, &model, &mut rng, 20_000);
    // A new default route and a replaced /8 reach every /16 of the large table.
    for route in [clustered_route(&mut rng, 0), clustered_route(&mut rng, 1)] {
        let mut short = route;
        short.cidr.prefix_len = if short.iface == IfaceId(0) { 0 } else { 8 };
        routes.insert(short);
        model.insert(short);
    }
    check_all(&routes, &model, &mut rng, 5000);
    // Shrink below the threshold, checking on the way down.
    while model.entries.len() >= trie::DIRECT_MIN / 2 - 10 {
        let victim = model.entries[rng.in_range(0, 1_000_000) as usize % model.entries.len()];
        assert_eq!(routes.remove(victim.cidr), model.remove(victim.cidr));
        for dst in probes(victim.cidr) {
            assert_eq!(routes.lookup(dst), model.lookup(dst), "{dst}");
        }
        if model.entries.len() == DIRECT_MIN_HALF_PLUS {
            assert!(routes.trie.is_direct());
            check_all(&routes, &model, &mut rng, 2000);
        }
    }
    assert!(!routes.trie.is_direct());
    check_all(&routes, &model, &mut rng, 20_000);
}

/// A table just above the size at which a large one drops `direct`.
const DIRECT_MIN_HALF_PLUS: usize = trie::DIRECT_MIN / 2 + 3;

#[test]
fn a_bulk_loaded_large_table_shrinks_back_to_a_small_one() {
    let mut rng = crate::rng::Rng::new(0xb01c);
    let mut model = Linear::default();
    let mut batch = Vec::new();
    for i in 0..(trie::DIRECT_MIN as u32 + 500) {
        let route = clustered_route(&mut rng, i);
        model.insert(route);
        batch.push(route);
    }
    let mut routes: Routes = batch.into_iter().collect();
    assert!(routes.trie.is_direct());
    check_all(&routes, &model, &mut rng, 10_000);
    while let Some(&victim) = model.entries.last() {
        assert_eq!(routes.remove(victim.cidr), model.remove(victim.cidr));
        if model.entries.len() % 256 == 0 {
            check_all(&routes, &model, &mut rng, 1000);
        }
    }
    assert!(!routes.trie.is_direct());
    assert_eq!(routes.heap_bytes(), 0);
}

/// The table as it was: a list searched end to end. The model the trie must match.
#[derive(Default)]
struct Linear {
    entries: Vec<Route>,
}

impl Linear {
    fn insert(&mut self, mut route: Route) {
        route.cidr = network(route.cidr);
        match self.entries.iter_mut().find(|r| r.cidr == route.cidr) {
            Some(existing) => *existing = route,
            None => self.entries.push(route),
        }
    }

    fn remove(&mut self, cidr: Cidr) -> Option<Route> {
        let cidr = network(cidr);
        let position = self.entries.iter().position(|r| r.cidr == cidr)?;
        Some(self.entries.swap_remove(position))
    }

    fn remove_connected(&mut self, cidr: Cidr, iface: IfaceId) {
        let cidr = network(cidr);
        self.entries
            .retain(|r| !(r.cidr == cidr && r.iface == iface && r.gateway.is_none()));
    }

    fn lookup(&self, dst: Ipv4Addr) -> Option<Route> {
        self.entries
            .iter()
            .filter(|r| crate::iface::cidr_contains(&r.cidr, dst))
            .max_by_key(|r| r.cidr.prefix_len)
            .copied()
    }
}

/// Addresses at and just past both ends of `cidr`.
fn probes(cidr: Cidr) -> [Ipv4Addr; 4] {
    let first = network(cidr).address.to_bits();
    let last = first | !prefix_mask(cidr.prefix_len);
    [first, last, first.wrapping_sub(1), last.wrapping_add(1)].map(Ipv4Addr::from_bits)
}

mod model {
    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(Route),
        Remove(Cidr),
        RemoveConnected(Cidr, IfaceId),
        Lookup(Ipv4Addr),
        Extend(Vec<Route>),
    }

    /// Addresses clustered near a few networks, so prefixes nest and collide.
    fn address() -> impl Strategy<Value = Ipv4Addr> {
        let bases = vec![
            0x0000_0000u32,
            0x0A00_0000,
            0x0A01_0200,
            0xC0A8_0100,
            0xFFFF_FFFF,
            0x8000_0000,
        ];
        (prop::sample::select(bases), any::<u32>(), 0u32..=32).prop_map(|(base, noise, shift)| {
            Ipv4Addr::from_bits(base ^ noise.checked_shr(shift).unwrap_or(0))
        })
    }

    fn prefix() -> impl Strategy<Value = Cidr> {
        let len = prop_oneof![0u8..=33, Just(0), Just(32), 8u8..=24];
        (address(), len).prop_map(|(address, prefix_len)| Cidr {
            address,
            prefix_len,
        })
    }

    fn route() -> impl Strategy<Value = Route> {
        let gateway = proptest::option::of(Just(Ipv4Addr::new(192, 0, 2, 1)));
        (
            prefix(),
            gateway,
            0u32..3,
            proptest::option::of(576usize..1500),
        )
            .prop_map(|(cidr, gateway, iface, mtu)| Route {
                cidr,
                gateway,
                iface: IfaceId(iface),
                mtu,
            })
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => route().prop_map(Op::Insert),
            3 => prefix().prop_map(Op::Remove),
            1 => (prefix(), 0u32..3).prop_map(|(c, i)| Op::RemoveConnected(c, IfaceId(i))),
            3 => address().prop_map(Op::Lookup),
            1 => proptest::collection::vec(route(), 0..8).prop_map(Op::Extend),
        ]
    }

    fn apply(op: &Op, routes: &mut Routes, model: &mut Linear) -> Vec<Ipv4Addr> {
        match op.clone() {
            Op::Insert(route) => {
                routes.insert(route);
                model.insert(route);
                probes(route.cidr).to_vec()
            }
            Op::Remove(cidr) => {
                assert_eq!(routes.remove(cidr), model.remove(cidr));
                probes(cidr).to_vec()
            }
            Op::RemoveConnected(cidr, iface) => {
                routes.remove_connected(cidr, iface);
                model.remove_connected(cidr, iface);
                probes(cidr).to_vec()
            }
            Op::Lookup(dst) => vec![dst],
            Op::Extend(batch) => {
                routes.extend(batch.iter().copied());
                for route in &batch {
                    model.insert(*route);
                }
                batch.iter().flat_map(|r| probes(r.cidr)).collect()
            }
        }
    }

    fn check(routes: &Routes, model: &Linear, dst: Ipv4Addr) {
        let found = routes.lookup_index(dst);
        assert_eq!(found.map(|(_, r)| *r), model.lookup(dst), "lookup {dst}");
        if let Some((index, route)) = found {
            assert_eq!(routes.get(index), Some(route));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn matches_the_linear_table(ops in proptest::collection::vec(op(), 0..80)) {
            let (mut routes, mut model) = (Routes::new(), Linear::default());
            for op in &ops {
                for dst in apply(op, &mut routes, &mut model) {
                    check(&routes, &model, dst);
                }
                for route in &model.entries {
                    for dst in probes(route.cidr) {
                        check(&routes, &model, dst);
                    }
                }
                let mut mine: Vec<Route> = routes.iter().copied().collect();
                let mut theirs = model.entries.clone();
                mine.sort_by_key(|r| (r.cidr, r.iface));
                theirs.sort_by_key(|r| (r.cidr, r.iface));
                prop_assert_eq!(mine, theirs);
                prop_assert_eq!(routes.len(), model.entries.len());
            }
        }
    }
}
