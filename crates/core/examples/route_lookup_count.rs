//! A fixed loop of route lookups to count instructions under callgrind, and the heap a
//! table of that size takes ([`Routes::heap_bytes`], with the growth of resident memory
//! as a cross-check).
//!
//! ```text
//! cargo build --release -p impnet-core --example route_lookup_count
//! valgrind --tool=callgrind --toggle-collect='*lookup_loop*' \
//!     target/release/examples/route_lookup_count 100000
//! ```
//!
//! Arguments: the number of routes (default 10) and of lookups (default 1,000,000).
//! Instructions per lookup are the `Ir` total callgrind reports over the lookups.
//!
//! It then times `UPDATES` single insertions of new random /8../32 prefixes into the
//! table (each followed by its removal, outside the timing), printing the mean; under
//! callgrind, `--toggle-collect='*insert_one*'` counts their instructions instead
//! (divide by `UPDATES`, 1000).

use std::hint::black_box;
use std::net::Ipv4Addr;

use impnet_core::{Route, Routes};

#[path = "../benches/common/route_table.rs"]
mod route_table;

/// This process's resident memory in KiB (Linux), to cross-check `Routes::heap_bytes`.
fn resident_kib() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The measured loop: how many lookups found a route (so none is optimised away).
#[inline(never)]
fn lookup_loop(table: &Routes, destinations: &[Ipv4Addr], lookups: usize) -> usize {
    let mut found = 0;
    for dst in destinations.iter().cycle().take(lookups) {
        found += usize::from(black_box(table.lookup_index(*dst)).is_some());
    }
    found
}

/// Insertions timed after the lookups.
const UPDATES: usize = 1000;

/// One insertion, measured.
#[inline(never)]
fn insert_one(table: &mut Routes, route: Route) {
    table.insert(black_box(route));
}

/// The mean nanoseconds of one insertion of a new prefix into `table`.
// A measuring harness, not the sans-IO core: the wall clock is what it reports.
#[allow(clippy::disallowed_methods)]
fn update_cost(table: &mut Routes) -> f64 {
    // Prefixes from another seed's table: new to this one but for rare collisions.
    let present: std::collections::HashSet<_> = table.iter().map(|r| r.cidr).collect();
    let fresh = route_table::routes_seeded(4 * UPDATES, 0x2460);
    let mut total = std::time::Duration::ZERO;
    let mut timed = 0;
    for route in fresh.iter().skip(1).filter(|r| !present.contains(&r.cidr)) {
        let start = std::time::Instant::now();
        insert_one(table, *route);
        total += start.elapsed();
        table.remove(route.cidr);
        timed += 1;
        if timed == UPDATES {
            break;
        }
    }
    total.as_nanos() as f64 / timed.max(1) as f64
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>().ok());
    let routes = args.next().flatten().unwrap_or(10);
    let lookups = args.next().flatten().unwrap_or(1_000_000);
    let destinations = route_table::destinations(lookups.min(1 << 20));
    let generated = route_table::routes(routes);
    let before = resident_kib().unwrap_or(0);
    let mut table: Routes = generated.into_iter().collect();
    let resident = resident_kib().unwrap_or(0).saturating_sub(before);
    let found = lookup_loop(&table, &destinations, lookups);
    let bytes = table.heap_bytes();
    let update = update_cost(&mut table);
    println!(
        "{} routes: heap {bytes} bytes ({:.1} per route; resident grew {resident} KiB); \
         {lookups} lookups, {found} matched; one insertion {update:.0} ns",
        table.len(),
        bytes as f64 / table.len().max(1) as f64
    );
}
