//! `imp-bench`: the same workloads on imp, on smoltcp and on the Linux kernel, in one
//! run, interleaved and repeated, reported as medians with the ratios imp/smoltcp and
//! imp/Linux.
//!
//! Workloads (issue 6):
//! - W1 bulk: one connection, in-process; (a) MTU 1500 with checksums computed and
//!   verified, (b) MTU 65535 with checksum offload. Gbit/s of payload and CPU s/GiB.
//! - W2 ping-pong: 1-byte request and response; round trips/s.
//! - W3 churn: connect, 1 byte, close (the server closes first and keeps TIME-WAIT);
//!   connections/s.
//! - W4 scale: n idle connections, ping-pong spread over all of them (a stride that
//!   visits every one); ns per packet, and memory per idle connection end before any
//!   data and after a round trip on each.
//! - W5 TAP: imp -> Linux and Linux -> imp over a TAP in a namespace, with and without
//!   the virtio-net offloads; smoltcp over the same TAP; Linux -> Linux over veth.
//!   Gbit/s. Needs root and `ip`; skipped (saying why) otherwise.
//! - W3-tap (`w3_tap.rs`, root): W3's churn from the kernel, across a multi-queue TAP,
//!   to `imp serve --echo` with one shard and with two, against the kernel serving it
//!   over veth; connections/s. Runs with no `--only` or `--only W3-tap`.
//! - W6 HTTP: `wrk` against `imp serve --http` over a TAP and against nginx (one
//!   worker) over veth, 1 KiB and 1 MiB files, keep-alive at 1 and 50 connections and
//!   one connection per request; requests/s, Gbit/s, errors, p99 latency (nginx in the
//!   `linux` column). Needs root, `ip`, `wrk` and `nginx`; skipped (saying what is
//!   missing) otherwise.
//! - W7 forwarding: in process (`w7.rs`), three imp stacks A — R — B: R alone
//!   forwarding prebuilt 64-byte UDP frames (Mpps, with ten routes and with
//!   `Sizes::fwd_routes` more), the whole A -> R -> B path, and TCP bulk through R.
//!   Over devices (`w7_route.rs`, root and iperf3): `imp route` between two TAPs
//!   against the kernel forwarding between two veth pairs (`ip_forward=1`), iperf3
//!   64-byte UDP (kpps) and TCP (Gbit/s) from host A's namespace to host B's.
//! - W8 paths (`w8.rs`, root, iperf3; only when named: `--only W8`): imp -> Linux
//!   (`imp ttcp --impair`) and Linux -> Linux (iperf3 through `imp link --impair`) over
//!   the same emulated paths, round-trip time x loss x rate, per congestion control
//!   (NewReno/Reno, CUBIC, BBR): goodput and retransmissions, the geometric mean of
//!   imp/Linux per pair; and imp's simulator next to ns-3 on `imp ttcp`'s transfer.
//!   Printed after the other workloads; with `--json` the output becomes
//!   `{"rows": [...], "w8": {...}}`.
//! - W9 ladder (`ladder.rs`): seed 000's 1981 speed-up plan on imp alone, in process:
//!   1 KiB records, then 4 KiB, IP-fragmented 4096-byte segments, reads that lend the
//!   receive ring, checksum offload, MTU 9000, writes that hand their buffers over,
//!   64 KiB records, MTU 65535; Gbit/s, CPU s/GiB and the speed-up over the first rung.
//! - W10 tun2socks (`w10.rs`, root, curl, wrk, nginx; only when named: `--only W10`):
//!   `imp proxy` next to xjasonlyu/tun2socks (`$TUN2SOCKS_BIN`) on the same TUN in
//!   three namespaces: one bulk download (Gbit/s) and connections/s, with the ratio
//!   imp/tun2socks in a table of its own; in `--json` rows with a `tun2socks` field.
//!
//! For W1-W4, imp and smoltcp run as two stacks in one thread, frames handed from one
//! to the other through a reused buffer; Linux runs over 127.0.0.1 with two threads.
//! W5 runs each stack against the kernel (see `w5.rs`).
//!
//! W1-W3 on imp and smoltcp are set-ups and steps (`workload`), which the criterion
//! benches (`benches/workloads.rs`) time step by step.

pub mod alloc;
mod breakdown;
mod budget;
pub use budget::cpu_model;
mod imp_bin;
pub mod imp_side;
mod ladder;
mod linux;
pub mod smol;
mod w10;
mod w3_tap;
mod w5;
mod w6;
pub mod w7;
mod w7_route;
mod w8;
mod w8_path;
mod w8_sim;
pub mod workload;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant as StdInstant;

use clap::Args;
use serde::Serialize;

use workload::{bulk, churn, ping_pong};

/// Measure imp against smoltcp and the Linux kernel.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Small sizes: every workload in well under a minute.
    #[arg(long)]
    quick: bool,
    /// Print a JSON list of {workload, unit, imp, smoltcp, linux} instead of a table.
    #[arg(long)]
    json: bool,
    /// Repetitions of every workload (medians are reported); default 5, 3 with --quick.
    #[arg(long)]
    repeat: Option<usize>,
    /// Only workloads whose name starts with one of these (e.g. W1,W2); W8 and W10 run
    /// only when named here.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Only these implementations (imp, smoltcp, linux), e.g. for a profiler run.
    #[arg(long = "impl", value_delimiter = ',')]
    impls: Vec<String>,
    /// TCP without timestamps and SACK on imp and smoltcp (smoltcp's defaults; the
    /// kernel keeps its settings). By default both use timestamps, window scaling and
    /// SACK-permitted, as Linux does.
    #[arg(long)]
    bare: bool,
    /// Scale every size by this factor (e.g. 0.1 for a profiler run).
    #[arg(long, hide = true)]
    scale: Option<f64>,
    /// Tiny sizes for tests of the output shape (also IMP_BENCH_TINY=1).
    #[arg(long, hide = true)]
    tiny: bool,
    /// Instead of the workloads: where imp's instructions go in W1a and W2, by layer
    /// (callgrind), beside seed 000's 1981 table; bytes copied per payload byte (DHAT);
    /// this machine's memcpy and checksum rates and imp's W1a against them. Needs
    /// valgrind.
    #[arg(long, conflicts_with_all = ["only", "impls"])]
    breakdown: bool,
    /// The measured child of --breakdown (run under valgrind): W1a or W2.
    #[arg(long, hide = true)]
    breakdown_child: Option<String>,
    /// The child's amount of work: W1a payload bytes, W2 round trips.
    #[arg(long, hide = true, default_value_t = 1 << 20)]
    breakdown_amount: u64,
    /// W4's connection counts instead of the defaults (1, 100, 10k, 100k), e.g.
    /// `1,100,10000,100000,1000000`; each end of an idle connection holds about 0.5 KB of
    /// heap (`--budget` measures it), both ends live in this process.
    #[arg(long, value_delimiter = ',', value_name = "N,..")]
    w4_connections: Vec<usize>,
    /// Instead of the workloads: the performance budget. Instruction counts per unit of
    /// work (W1a, W1b per payload byte, W2 per round trip, W3 per connection, W4 per
    /// packet at 100 and 100k connections, the simulator per segment; callgrind) and
    /// heap bytes per idle connection end, against the baselines in --budget-file; fails
    /// when one is more than 2% off. Needs valgrind.
    #[arg(long, conflicts_with_all = ["only", "impls", "breakdown"])]
    budget: bool,
    /// With --budget: write the measured figures as the new baselines instead of
    /// checking them.
    #[arg(long, requires = "budget")]
    budget_write: bool,
    /// With --budget: the baselines (default: crates/bench/budget.toml of this source
    /// tree).
    #[arg(long, value_name = "PATH", requires = "budget")]
    budget_file: Option<std::path::PathBuf>,
    /// With --budget: only these figures (keys of the baselines file), e.g. for a quick
    /// look at one (the others are not checked).
    #[arg(long, value_delimiter = ',', requires = "budget")]
    budget_only: Vec<String>,
    /// The idle-connection child of --budget.
    #[arg(long, hide = true)]
    budget_idle_child: Option<usize>,
    /// The `imp` binary W6-W8 and W10 run (default: $IMP_BIN, else `imp` beside
    /// imp-bench).
    #[arg(long, value_name = "PATH")]
    imp: Option<std::path::PathBuf>,
}

/// How much work each workload does.
#[derive(Debug, Clone)]
pub(crate) struct Sizes {
    /// W1 payload bytes.
    pub bulk: u64,
    /// W2 round trips.
    pub rounds: u64,
    /// W3 connections.
    pub churn: u64,
    /// W4 connection counts.
    pub scale: Vec<usize>,
    /// W4 round trips measured at each count.
    pub scale_rounds: u64,
    /// W5 bytes per transfer.
    pub tap: u64,
    /// W6 seconds per wrk run.
    pub http_secs: u32,
    /// W7 packets the router forwards in process.
    pub fwd_packets: u64,
    /// W7 extra routes of the route-lookup row.
    pub fwd_routes: usize,
    /// W7 seconds per iperf3 run.
    pub route_secs: u32,
    /// W8's cells and run lengths.
    pub paths: w8::Plan,
    /// W10 bytes of the bulk download through the proxy.
    pub proxy_bulk: u64,
    /// Repetitions.
    pub repeats: usize,
}

impl Sizes {
    fn for_args(args: &BenchArgs) -> Sizes {
        let tiny = args.tiny || std::env::var_os("IMP_BENCH_TINY").is_some_and(|v| v != "0");
        let mut sizes = if tiny {
            Sizes {
                bulk: 2 << 20,
                rounds: 200,
                churn: 50,
                scale: vec![1, 10],
                scale_rounds: 100,
                tap: 4 << 20,
                http_secs: 1,
                fwd_packets: 20_000,
                fwd_routes: 1000,
                route_secs: 1,
                paths: w8::Plan::tiny(),
                proxy_bulk: 4 << 20,
                repeats: 1,
            }
        } else if args.quick {
            Sizes {
                bulk: 128 << 20,
                rounds: 10_000,
                churn: 2_000,
                scale: vec![1, 100, 10_000],
                scale_rounds: 5_000,
                tap: 32 << 20,
                http_secs: 2,
                fwd_packets: 2_000_000,
                fwd_routes: 100_000,
                route_secs: 2,
                paths: w8::Plan::quick(),
                proxy_bulk: 64 << 20,
                repeats: 3,
            }
        } else {
            Sizes {
                bulk: 1 << 30,
                rounds: 100_000,
                churn: 20_000,
                scale: vec![1, 100, 10_000, 100_000],
                scale_rounds: 20_000,
                tap: 512 << 20,
                http_secs: 5,
                fwd_packets: 20_000_000,
                fwd_routes: 100_000,
                route_secs: 5,
                paths: w8::Plan::full(),
                proxy_bulk: 256 << 20,
                repeats: 5,
            }
        };
        if let Some(r) = args.repeat {
            sizes.repeats = r.max(1);
        }
        if !args.w4_connections.is_empty() {
            sizes.scale = args.w4_connections.clone();
        }
        if let Some(f) = args.scale {
            let scaled = |n: u64| ((n as f64 * f) as u64).max(1);
            sizes.bulk = scaled(sizes.bulk);
            sizes.rounds = scaled(sizes.rounds);
            sizes.churn = scaled(sizes.churn);
            sizes.scale_rounds = scaled(sizes.scale_rounds);
            sizes.tap = scaled(sizes.tap);
            sizes.proxy_bulk = scaled(sizes.proxy_bulk);
            sizes.fwd_packets = scaled(sizes.fwd_packets);
        }
        sizes
    }
}

/// One implementation under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Impl {
    Imp,
    Smoltcp,
    Linux,
}

const IMPLS: [Impl; 3] = [Impl::Imp, Impl::Smoltcp, Impl::Linux];

/// One number a run produced: a row of the table, filled in per implementation.
#[derive(Debug, Clone)]
pub(crate) struct Sample {
    pub workload: String,
    pub unit: &'static str,
    pub value: f64,
}

impl Sample {
    pub fn new(workload: impl Into<String>, unit: &'static str, value: f64) -> Sample {
        Sample {
            workload: workload.into(),
            unit,
            value,
        }
    }
}

/// One row of the report.
#[derive(Debug, Clone, Serialize)]
struct Row {
    workload: String,
    unit: &'static str,
    imp: Option<f64>,
    smoltcp: Option<f64>,
    linux: Option<f64>,
    /// W10's other proxy (absent from the other rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    tun2socks: Option<f64>,
}

/// The workloads, in the order they run within one repetition.
const WORKLOADS: [&str; 17] = [
    "W1a",
    "W1b",
    "W2",
    "W3",
    "W1a-v6",
    "W1b-v6",
    "W2-v6",
    "W3-v6",
    "W4",
    "W5",
    "W3-tap",
    "W6",
    "W7-fwd-udp",
    "W7-fwd-lpm",
    "W7-fwd-tcp",
    "W7-route",
    "W9",
];

/// Run one workload on one implementation; None when it does not apply.
fn run_one(workload: &str, which: Impl, sizes: &Sizes) -> Result<Vec<Sample>, String> {
    if let Some(v4) = workload.strip_suffix("-v6") {
        return run_v6(v4, workload, which, sizes);
    }
    match (workload, which) {
        ("W1a", Impl::Imp) => Ok(bulk::<imp_side::Bulk>("W1a", 1500, false, sizes.bulk)),
        ("W1b", Impl::Imp) => Ok(bulk::<imp_side::Bulk>("W1b", 65535, true, sizes.bulk)),
        ("W1a", Impl::Smoltcp) => Ok(bulk::<smol::Bulk>("W1a", 1500, false, sizes.bulk)),
        ("W1b", Impl::Smoltcp) => Ok(bulk::<smol::Bulk>("W1b", 65535, true, sizes.bulk)),
        // The kernel has one loopback (MTU 65536, checksums offloaded): it is the
        // reference for both rows.
        ("W1a", Impl::Linux) => linux::bulk("W1a", sizes.bulk, false),
        ("W1b", Impl::Linux) => linux::bulk("W1b", sizes.bulk, false),
        ("W2", Impl::Imp) => Ok(ping_pong::<imp_side::PingPong>("W2", sizes.rounds)),
        ("W2", Impl::Smoltcp) => Ok(ping_pong::<smol::PingPong>("W2", sizes.rounds)),
        ("W2", Impl::Linux) => linux::ping_pong("W2", sizes.rounds, false),
        ("W3", Impl::Imp) => Ok(churn::<imp_side::Churn>("W3", sizes.churn)),
        ("W3", Impl::Smoltcp) => Ok(churn::<smol::Churn>("W3", sizes.churn)),
        ("W3", Impl::Linux) => linux::churn("W3", sizes.churn, false),
        ("W4", Impl::Imp) => Ok(imp_side::scale(&sizes.scale, sizes.scale_rounds)),
        ("W4", Impl::Linux) => linux::scale(&sizes.scale, sizes.scale_rounds),
        ("W5", Impl::Imp) => w5::imp(sizes.tap),
        ("W5", Impl::Smoltcp) => w5::smoltcp(sizes.tap),
        ("W5", Impl::Linux) => w5::linux(sizes.tap),
        ("W3-tap", Impl::Imp) => w3_tap::imp(sizes.route_secs),
        ("W3-tap", Impl::Linux) => w3_tap::linux(sizes.route_secs),
        ("W6", Impl::Imp) => w6::imp(sizes.http_secs),
        ("W6", Impl::Linux) => w6::nginx(sizes.http_secs),
        // No smoltcp: it does not forward.
        ("W7-fwd-udp", Impl::Imp) => Ok(w7::udp(sizes.fwd_packets)),
        ("W7-fwd-lpm", Impl::Imp) => Ok(w7::udp_routes(sizes.fwd_routes, sizes.fwd_packets)),
        ("W7-fwd-tcp", Impl::Imp) => Ok(bulk::<w7::Bulk>("W7-fwd-tcp", 1500, false, sizes.bulk)),
        ("W7-route", Impl::Imp) => w7_route::imp(sizes.route_secs),
        ("W7-route", Impl::Linux) => w7_route::linux(sizes.route_secs),
        ("W9", Impl::Imp) => Ok(ladder::run(sizes.bulk)),
        _ => Ok(Vec::new()),
    }
}

/// The workloads [`run_paired`] runs.
const PAIRED: [&str; 8] = [
    "W1a", "W1b", "W2", "W3", "W1a-v6", "W1b-v6", "W2-v6", "W3-v6",
];

/// W1-W3 (and their IPv6 rows) on imp and smoltcp together, in blocks taken in turn
/// ([`workload::interleaved`], [`workload::interleaved_bulk`]): [imp's samples,
/// smoltcp's]. None for the other workloads, which each stack runs on its own.
fn run_paired(workload: &str, sizes: &Sizes) -> Option<[Vec<Sample>; 2]> {
    use workload::{Conns, Ping, interleaved, interleaved_bulk};
    let (rounds, churn, bulk) = (sizes.rounds, sizes.churn, sizes.bulk);
    let (mtu, offload) = match workload {
        "W1b" | "W1b-v6" => (65535, true),
        _ => (1500, false),
    };
    let one = |[i, s]: [Sample; 2]| [vec![i], vec![s]];
    Some(match workload {
        "W1a" | "W1b" => {
            interleaved_bulk::<imp_side::Bulk, smol::Bulk>(workload, mtu, offload, bulk)
        }
        "W1a-v6" | "W1b-v6" => {
            interleaved_bulk::<imp_side::Bulk<true>, smol::Bulk<true>>(workload, mtu, offload, bulk)
        }
        "W2" => one(
            interleaved::<Ping<imp_side::PingPong>, Ping<smol::PingPong>>(
                workload,
                "round trips/s",
                rounds,
            ),
        ),
        "W2-v6" => one(interleaved::<
            Ping<imp_side::PingPong<true>>,
            Ping<smol::PingPong<true>>,
        >(workload, "round trips/s", rounds)),
        "W3" => one(interleaved::<Conns<imp_side::Churn>, Conns<smol::Churn>>(
            workload,
            "connections/s",
            churn,
        )),
        "W3-v6" => one(interleaved::<
            Conns<imp_side::Churn<true>>,
            Conns<smol::Churn<true>>,
        >(workload, "connections/s", churn)),
        _ => return None,
    })
}

/// W1-W3 over IPv6 (row `name`, the IPv4 row `v4` with `-v6`): imp and smoltcp
/// between 2001:db8::1 and ::2, Linux over `::1`.
fn run_v6(v4: &str, name: &str, which: Impl, sizes: &Sizes) -> Result<Vec<Sample>, String> {
    let (mtu, offload) = if v4 == "W1b" {
        (65535, true)
    } else {
        (1500, false)
    };
    match (v4, which) {
        ("W1a" | "W1b", Impl::Imp) => {
            Ok(bulk::<imp_side::Bulk<true>>(name, mtu, offload, sizes.bulk))
        }
        ("W1a" | "W1b", Impl::Smoltcp) => {
            Ok(bulk::<smol::Bulk<true>>(name, mtu, offload, sizes.bulk))
        }
        ("W1a" | "W1b", Impl::Linux) => linux::bulk(name, sizes.bulk, true),
        ("W2", Impl::Imp) => Ok(ping_pong::<imp_side::PingPong<true>>(name, sizes.rounds)),
        ("W2", Impl::Smoltcp) => Ok(ping_pong::<smol::PingPong<true>>(name, sizes.rounds)),
        ("W2", Impl::Linux) => linux::ping_pong(name, sizes.rounds, true),
        ("W3", Impl::Imp) => Ok(churn::<imp_side::Churn<true>>(name, sizes.churn)),
        ("W3", Impl::Smoltcp) => Ok(churn::<smol::Churn<true>>(name, sizes.churn)),
        ("W3", Impl::Linux) => linux::churn(name, sizes.churn, true),
        _ => Ok(Vec::new()),
    }
}

fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

/// `--bare`, for the drivers.
static BARE: AtomicBool = AtomicBool::new(false);

/// Whether the in-process stacks run without timestamps and SACK (`--bare`).
pub(crate) fn bare() -> bool {
    BARE.load(Ordering::Relaxed)
}

/// W8's output within `--json` when W8 was asked for.
#[derive(Serialize)]
struct WithPaths<'a> {
    rows: &'a [Row],
    w8: Option<w8::Report>,
    /// Why W8 did not run.
    w8_skipped: Option<String>,
}

/// Check the arguments before anything runs: `--only` names workloads, `--impl`
/// implementations, `--scale` and `--repeat` are positive.
pub fn validate(args: &BenchArgs) -> Result<(), String> {
    for only in &args.only {
        let known = only.eq_ignore_ascii_case("W8")
            || only.eq_ignore_ascii_case("W10")
            || (!only.is_empty() && WORKLOADS.iter().any(|w| w.starts_with(only.as_str())));
        if !known {
            return Err(format!(
                "--only `{only}`: no workload's name starts with it (the workloads: {}, W8, W10)",
                WORKLOADS.join(", ")
            ));
        }
    }
    for name in &args.impls {
        if !IMPLS
            .iter()
            .any(|i| format!("{i:?}").to_lowercase() == *name)
        {
            return Err(format!(
                "--impl `{name}`: not an implementation (imp, smoltcp or linux)"
            ));
        }
    }
    if args.budget_idle_child == Some(0) {
        return Err("--budget-idle-child 0: give a number of connections".into());
    }
    if args.w4_connections.contains(&0) {
        return Err("--w4-connections: each count must be at least 1".into());
    }
    if args.repeat == Some(0) {
        return Err("--repeat 0: run every workload at least once".into());
    }
    if let Some(child) = &args.breakdown_child {
        breakdown::Workload::parse(child)?;
    }
    if args.breakdown_amount == 0 {
        return Err("--breakdown-amount 0: give some work to measure".into());
    }
    if let Some(f) = args.scale
        && !(f.is_finite() && f > 0.0 && f <= 1000.0)
    {
        return Err(format!(
            "--scale {f}: give a factor above 0 and at most 1000"
        ));
    }
    Ok(())
}

/// `imp-bench`.
pub fn run(args: &BenchArgs) -> Result<(), String> {
    validate(args)?;
    BARE.store(args.bare, Ordering::Relaxed);
    if let Some(path) = &args.imp {
        imp_bin::set_flag(path.clone());
    }
    let sizes = Sizes::for_args(args);
    if let Some(child) = &args.breakdown_child {
        return breakdown::child(breakdown::Workload::parse(child)?, args.breakdown_amount);
    }
    if args.breakdown {
        return breakdown::run(&sizes, args.json);
    }
    if let Some(connections) = args.budget_idle_child {
        return budget::idle_child(connections);
    }
    if args.budget {
        let file = args
            .budget_file
            .clone()
            .unwrap_or_else(budget::default_file);
        return budget::run(&file, args.budget_write, &args.budget_only, args.json);
    }
    let is_w8 = |o: &String| o.eq_ignore_ascii_case("W8");
    let is_w10 = |o: &String| o.eq_ignore_ascii_case("W10");
    let want_w8 = args.only.iter().any(is_w8);
    let want_w10 = args.only.iter().any(is_w10);
    let mut report = if (want_w8 || want_w10) && args.only.iter().all(|o| is_w8(o) || is_w10(o)) {
        Vec::new()
    } else {
        run_workloads(args, &sizes)?
    };
    if want_w10 {
        let rows = w10::run(sizes.proxy_bulk, sizes.http_secs, sizes.repeats, !args.json);
        if args.json {
            report.extend(rows);
        } else if !rows.is_empty() {
            if !report.is_empty() {
                print_table(&report, &sizes);
            }
            w10::print(&rows, sizes.repeats, sizes.proxy_bulk, sizes.http_secs);
            report.clear();
        }
    }
    if !want_w8 {
        if args.json {
            let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
            println!("{text}");
        } else if !(want_w10 && report.is_empty()) {
            print_table(&report, &sizes);
        }
        return Ok(());
    }
    let skipped = w8::unavailable();
    if let Some(reason) = &skipped {
        eprintln!("imp-bench: W8 skipped: {reason}");
    }
    let paths = skipped.is_none().then(|| w8::run(&sizes.paths, !args.json));
    if args.json {
        let out = WithPaths {
            rows: &report,
            w8: paths,
            w8_skipped: skipped,
        };
        let text = serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?;
        println!("{text}");
    } else {
        if !report.is_empty() {
            print_table(&report, &sizes);
        }
        if let Some(paths) = &paths {
            w8::print(paths);
        }
    }
    Ok(())
}

/// What one turn of `which` on `workload` gives, each sample with its implementation:
/// with imp and smoltcp both asked for, imp's turn of a [`PAIRED`] workload runs both
/// ([`run_paired`]) and smoltcp's runs nothing.
fn samples_of(
    args: &BenchArgs,
    workload: &str,
    which: Impl,
    sizes: &Sizes,
) -> Result<Vec<(Impl, Sample)>, String> {
    let asked = |i: Impl| {
        let name = format!("{i:?}").to_lowercase();
        args.impls.is_empty() || args.impls.contains(&name)
    };
    let paired = asked(Impl::Imp) && asked(Impl::Smoltcp);
    Ok(match which {
        Impl::Imp if paired && let Some([i, s]) = run_paired(workload, sizes) => {
            let imp = i.into_iter().map(|i| (Impl::Imp, i));
            imp.chain(s.into_iter().map(|s| (Impl::Smoltcp, s)))
                .collect()
        }
        // Already run beside imp's.
        Impl::Smoltcp if paired && PAIRED.contains(&workload) => Vec::new(),
        _ => run_one(workload, which, sizes)
            .map_err(|e| format!("{workload} on {which:?}: {e}"))?
            .into_iter()
            .map(|s| (which, s))
            .collect(),
    })
}

/// The workloads W1-W7 that `--only` selects, repeated; the medians.
fn run_workloads(args: &BenchArgs, sizes: &Sizes) -> Result<Vec<Row>, String> {
    let selected: Vec<&str> = WORKLOADS
        .into_iter()
        .filter(|w| args.only.is_empty() || args.only.iter().any(|o| w.starts_with(o.as_str())))
        .filter(|&w| w != "W3-tap" || w3_tap::named(&args.only))
        .filter(|&w| {
            let reason = match w {
                "W5" => w5::unavailable(),
                "W3-tap" => w3_tap::unavailable(),
                "W6" => w6::unavailable(),
                "W7-route" => w7_route::unavailable(),
                _ => None,
            };
            if let Some(reason) = &reason {
                eprintln!("imp-bench: {w} skipped: {reason}");
            }
            reason.is_none()
        })
        .collect();
    // (workload, unit) in first-seen order, with every sample per implementation.
    let mut rows: Vec<(String, &'static str, [Vec<f64>; 3])> = Vec::new();
    let started = StdInstant::now();
    for repeat in 0..sizes.repeats {
        for (w, workload) in selected.iter().enumerate() {
            // Rotate who goes first, so drift on a shared machine hits all alike.
            for k in 0..IMPLS.len() {
                let which = IMPLS[(k + repeat + w) % IMPLS.len()];
                let name = format!("{which:?}").to_lowercase();
                if !args.impls.is_empty() && !args.impls.contains(&name) {
                    continue;
                }
                let samples = samples_of(args, workload, which, sizes)?;
                for (which, s) in samples {
                    let at = match rows.iter().position(|r| r.0 == s.workload) {
                        Some(at) => at,
                        None => {
                            rows.push((s.workload.clone(), s.unit, Default::default()));
                            rows.len() - 1
                        }
                    };
                    let slot = IMPLS.iter().position(|&i| i == which).unwrap_or(0);
                    rows[at].2[slot].push(s.value);
                }
            }
        }
        if !args.json {
            eprintln!(
                "imp-bench: repetition {}/{} done ({:.1} s)",
                repeat + 1,
                sizes.repeats,
                started.elapsed().as_secs_f64()
            );
        }
    }
    let report: Vec<Row> = rows
        .into_iter()
        .map(|(workload, unit, mut samples)| {
            let [imp, smoltcp, linux] = &mut samples;
            Row {
                workload,
                unit,
                imp: median(imp),
                smoltcp: median(smoltcp),
                linux: median(linux),
                tun2socks: None,
            }
        })
        .collect();
    Ok(report)
}

/// How this binary was built: imp and smoltcp in it alike, so the ratios compare like
/// with like either way; the rates themselves differ (README, "Profile-guided builds").
pub fn build_note() -> &'static str {
    match env!("IMP_BENCH_BUILD") {
        "profile-guided" => "profile-guided build (scripts/pgo)",
        _ => "release build without a profile (scripts/pgo builds a profile-guided one)",
    }
}

fn print_table(report: &[Row], sizes: &Sizes) {
    let cell = |v: Option<f64>| match v {
        None => "-".to_string(),
        Some(v) if v.abs() >= 1000.0 => format!("{v:.0}"),
        Some(v) if v.abs() >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.3}"),
    };
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b != 0.0 => format!("{:.2}x", a / b),
        _ => "-".to_string(),
    };
    println!(
        "{}; medians of {} run(s); bulk {} MiB, {} round trips, {} connections, TAP {} MiB",
        build_note(),
        sizes.repeats,
        sizes.bulk >> 20,
        sizes.rounds,
        sizes.churn,
        sizes.tap >> 20
    );
    println!(
        "{:<18} {:<12} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "workload", "unit", "imp", "smoltcp", "linux", "imp/smol", "imp/linux"
    );
    if report.iter().any(|r| r.workload.starts_with("W6")) {
        println!("W6: imp = imp serve --http over a TAP; linux = nginx (1 worker) over veth");
    }
    if report.iter().any(|r| r.workload.starts_with("W9")) {
        println!("{}", ladder::legend());
    }
    if report.iter().any(|r| r.workload.starts_with("W7-route")) {
        println!("W7-route: imp = imp route between TAPs; linux = kernel forwarding over veth");
    }
    for r in report {
        println!(
            "{:<18} {:<12} {:>10} {:>10} {:>10} {:>10} {:>10}",
            r.workload,
            r.unit,
            cell(r.imp),
            cell(r.smoltcp),
            cell(r.linux),
            ratio(r.imp, r.smoltcp),
            ratio(r.imp, r.linux)
        );
    }
    print_family_ratios(report);
}

/// Each stack's IPv6 row over its IPv4 row (W1-W3), where both ran: for a throughput
/// 1.00x is parity and below it IPv6 is slower (CPU rows: above it IPv6 costs more).
fn print_family_ratios(report: &[Row]) {
    let pairs: Vec<(&Row, &Row)> = report
        .iter()
        .filter_map(|v6| {
            let v4 = v6.workload.replace("-v6", "");
            let base = report.iter().find(|r| r.workload == v4)?;
            (v4 != v6.workload).then_some((base, v6))
        })
        .collect();
    if pairs.is_empty() {
        return;
    }
    println!("IPv6 / IPv4, each stack on its own rows:");
    println!(
        "{:<18} {:>10} {:>10} {:>10}",
        "workload", "imp", "smoltcp", "linux"
    );
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b != 0.0 => format!("{:.3}x", a / b),
        _ => "-".to_string(),
    };
    for (v4, v6) in pairs {
        println!(
            "{:<18} {:>10} {:>10} {:>10}",
            v6.workload,
            ratio(v6.imp, v4.imp),
            ratio(v6.smoltcp, v4.smoltcp),
            ratio(v6.linux, v4.linux)
        );
    }
}

/// CPU time (user + system) of the whole process so far, in seconds.
pub(crate) fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes the struct it is given; a zeroed rusage is a valid value.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Wall and CPU time around a piece of work.
pub(crate) struct Stopwatch {
    wall: StdInstant,
    cpu: f64,
}

impl Stopwatch {
    pub fn start() -> Stopwatch {
        Stopwatch {
            wall: StdInstant::now(),
            cpu: cpu_seconds(),
        }
    }
    /// Wall time since `start`.
    pub fn wall_elapsed(&self) -> std::time::Duration {
        self.wall.elapsed()
    }
    /// (wall seconds, CPU seconds) since `start`.
    pub fn stop(&self) -> (f64, f64) {
        (self.wall.elapsed().as_secs_f64(), cpu_seconds() - self.cpu)
    }
}

/// The samples of a bulk run: throughput, CPU per GiB and (when counted) allocations
/// per GiB after warm-up.
pub(crate) fn bulk_samples(
    workload: &str,
    bytes: u64,
    (wall, cpu): (f64, f64),
    allocs_per_gib: Option<f64>,
) -> Vec<Sample> {
    let gib = bytes as f64 / (1u64 << 30) as f64;
    let mut samples = vec![
        Sample::new(workload, "Gbit/s", bytes as f64 * 8.0 / wall / 1e9),
        Sample::new(format!("{workload}-cpu"), "CPU s/GiB", cpu / gib),
    ];
    if let Some(a) = allocs_per_gib {
        samples.push(Sample::new(format!("{workload}-alloc"), "allocs/GiB", a));
    }
    samples
}

/// Allocation counter snapshot, for "allocations per GiB after warm-up".
pub(crate) fn allocations() -> u64 {
    alloc::allocations()
}

/// Live heap bytes, for memory per connection.
pub(crate) fn live_bytes() -> isize {
    alloc::live_bytes()
}

/// A repeatable byte pattern to send.
pub(crate) fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + i / 251) as u8).collect()
}
