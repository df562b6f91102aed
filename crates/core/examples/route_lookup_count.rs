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

use std::hint::black_box;
use std::net::Ipv4Addr;

use impnet_core::Routes;

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

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>().ok());
    let routes = args.next().flatten().unwrap_or(10);
    let lookups = args.next().flatten().unwrap_or(1_000_000);
    let destinations = route_table::destinations(lookups.min(1 << 20));
    let generated = route_table::routes(routes);
    let before = resident_kib().unwrap_or(0);
    let table: Routes = generated.into_iter().collect();
    let resident = resident_kib().unwrap_or(0).saturating_sub(before);
    let found = lookup_loop(&table, &destinations, lookups);
    let bytes = table.heap_bytes();
    println!(
        "{} routes: heap {bytes} bytes ({:.1} per route; resident grew {resident} KiB); \
         {lookups} lookups, {found} matched",
        table.len(),
        bytes as f64 / table.len().max(1) as f64
    );
}
