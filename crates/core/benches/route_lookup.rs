//! Route lookup at 10, 1k and 100k routes (a default route plus random /8../32
//! prefixes), for uniformly random destinations; at 10 and 1k routes also the linear
//! scan the table used before, for comparison. One iteration is `BATCH` lookups, so
//! ns/lookup is the time per iteration over `BATCH` (criterion's throughput line gives
//! lookups per second).
//!
//! The destinations (1M, 4 MiB) are read in order, so at 100k routes the trie, not the
//! destination list, is what misses the caches.
//!
//! `cargo bench -p impnet-core --bench route_lookup`

use std::hint::black_box;
use std::net::Ipv4Addr;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use impnet_core::{Route, Routes};

#[path = "common/route_table.rs"]
mod route_table;

/// Lookups per iteration.
const BATCH: usize = 1024;

/// Destinations cycled through.
const DESTINATIONS: usize = 1 << 20;

/// The table before the trie: every route checked, the longest covering one kept.
fn linear_lookup(routes: &[Route], dst: Ipv4Addr) -> Option<&Route> {
    routes
        .iter()
        .filter(|r| {
            let len = u32::from(r.cidr.prefix_len);
            let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
            r.cidr.address.to_bits() & mask == dst.to_bits() & mask
        })
        .max_by_key(|r| r.cidr.prefix_len)
}

fn route_lookup(c: &mut Criterion) {
    let destinations = route_table::destinations(DESTINATIONS);
    let mut group = c.benchmark_group("route_lookup");
    group.throughput(Throughput::Elements(BATCH as u64));
    for n in [10, 1_000, 100_000] {
        let table: Routes = route_table::routes(n).into_iter().collect();
        let mut next = 0;
        group.bench_function(format!("trie/{n}"), |b| {
            b.iter(|| {
                for _ in 0..BATCH {
                    black_box(table.lookup_index(destinations[next]));
                    next = (next + 1) % DESTINATIONS;
                }
            });
        });
        if n <= 1_000 {
            let routes: Vec<Route> = table.iter().copied().collect();
            group.bench_function(format!("linear/{n}"), |b| {
                b.iter(|| {
                    for _ in 0..BATCH {
                        black_box(linear_lookup(&routes, destinations[next]));
                        next = (next + 1) % DESTINATIONS;
                    }
                });
            });
        }
    }
    group.finish();
}

criterion_group!(benches, route_lookup);
criterion_main!(benches);
