//! W8 paths (issue 12): imp's TCP and the kernel's over the same emulated paths, and
//! imp's simulator next to ns-3.
//!
//! A matrix of round-trip time x loss x rate; in every cell, per congestion control,
//! imp -> Linux (`imp ttcp --impair`) and Linux -> Linux (iperf3 through
//! `imp link --impair`), the same link model both ways (see `w8_path.rs`). Each run
//! lasts a time sized to the cell's round trip (slow start to 1 Gbit/s takes about a
//! dozen of them); the drop-tail queue holds one bandwidth-delay product (at least 64
//! KiB). Goodput is what the receiver counted, in Mbit/s; retransmissions are the
//! sender's count of retransmitted segments. A congestion control a side does not
//! have, or a run that failed, shows as `n/a` with the reason.
//!
//! The summary gives, per pair (imp newreno vs Linux reno, cubic vs cubic, bbr vs
//! bbr), the geometric mean over the cells of imp's goodput over Linux's. Then the
//! simulator row (`w8_sim.rs`). W8 runs only when named (`--only W8`): the full matrix
//! takes about 20 minutes, `--quick` about a minute.

use serde::Serialize;

use super::w8_path::{CellPath, Outcome};
use super::w8_sim::{self, SimReport};

/// The congestion controls compared: imp's name, the kernel's.
/// imp has two BBRs: `bbr` (the v3 draft) and `bbr1` (Linux's mainline `bbr`, BBRv1), both set
/// beside the kernel's `bbr`, so the like-for-like pair is `bbr1`.
const PAIRS: [(&str, &str); 4] = [
    ("newreno", "reno"),
    ("cubic", "cubic"),
    ("bbr", "bbr"),
    ("bbr1", "bbr"),
];

/// Which cells to run and for how long.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Round-trip times, ms.
    rtts: Vec<u32>,
    /// Loss rates per direction, percent.
    losses: Vec<f64>,
    /// Link rates, Mbit/s.
    rates: Vec<u32>,
    /// Seconds per run, by round trip.
    secs: fn(u32) -> u32,
    /// Bytes of the simulated transfer.
    sim_bytes: u64,
}

impl Plan {
    /// The whole matrix, about 20 minutes.
    pub(crate) fn full() -> Plan {
        Plan {
            rtts: vec![2, 20, 100],
            losses: vec![0.0, 0.1, 1.0, 5.0],
            rates: vec![10, 100, 1000],
            secs: |rtt| match rtt {
                0..=5 => 2,
                6..=50 => 3,
                _ => 6,
            },
            sim_bytes: 100 << 20,
        }
    }

    /// A few cells, about a minute.
    pub(crate) fn quick() -> Plan {
        Plan {
            rtts: vec![20],
            losses: vec![0.0, 1.0],
            rates: vec![100],
            secs: |_| 3,
            sim_bytes: 100 << 20,
        }
    }

    /// One short cell, for tests of the output's shape.
    pub(crate) fn tiny() -> Plan {
        Plan {
            rtts: vec![20],
            losses: vec![1.0],
            rates: vec![10],
            secs: |_| 1,
            sim_bytes: 4 << 20,
        }
    }
}

/// imp and Linux with one congestion control in one cell.
#[derive(Debug, Clone, Serialize)]
struct Pair {
    imp_cc: &'static str,
    linux_cc: &'static str,
    imp: Outcome,
    linux: Outcome,
}

/// One cell of the matrix.
#[derive(Debug, Clone, Serialize)]
struct Cell {
    rtt_ms: u32,
    loss_pct: f64,
    rate_mbit: u32,
    /// Seconds each run sends.
    seconds: u32,
    /// The drop-tail queue, bytes.
    queue_bytes: u64,
    /// The `--impair` specification of both paths.
    impair: String,
    pairs: Vec<Pair>,
}

/// Per pair: the geometric mean of imp's goodput over Linux's.
#[derive(Debug, Clone, Serialize)]
struct Summary {
    imp_cc: &'static str,
    linux_cc: &'static str,
    /// Over the cells where both have a goodput above zero.
    geomean_imp_over_linux: Option<f64>,
    cells: usize,
}

/// W8's whole report.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    cells: Vec<Cell>,
    summary: Vec<Summary>,
    sim: SimReport,
}

/// Why W8 cannot run here, if it cannot.
pub(crate) fn unavailable() -> Option<String> {
    super::w7_route::unavailable()
}

/// Run the matrix and the simulator comparison.
pub(crate) fn run(plan: &Plan, progress: bool) -> Report {
    let imp_ccs: Vec<Option<String>> = PAIRS.iter().map(|p| imp_refuses(p.0)).collect();
    let linux_ccs: Vec<Option<String>> = PAIRS.iter().map(|p| kernel_lacks(p.1)).collect();
    let mut cells = Vec::new();
    for &rate in &plan.rates {
        for &rtt in &plan.rtts {
            for &loss in &plan.losses {
                let cell = run_cell(plan, (rtt, loss, rate), &imp_ccs, &linux_ccs, cells.len());
                if progress {
                    eprintln!("imp-bench: W8 {}", cell_line(&cell, &mut Vec::new()));
                }
                cells.push(cell);
            }
        }
    }
    let summary = summarize(&cells);
    Report {
        cells,
        summary,
        sim: w8_sim::compare(plan.sim_bytes),
    }
}

/// One cell: every pair, imp and Linux alternating which goes first.
fn run_cell(
    plan: &Plan,
    (rtt, loss, rate): (u32, f64, u32),
    imp_ccs: &[Option<String>],
    linux_ccs: &[Option<String>],
    index: usize,
) -> Cell {
    let bdp = u64::from(rate) * 1_000_000 / 8 * u64::from(rtt) / 1000;
    let queue = bdp.max(64 * 1024);
    let spec = format!(
        "delay={}ms,loss={loss}%,rate={rate}mbit,queue={queue}",
        rtt / 2
    );
    let seconds = (plan.secs)(rtt);
    let sndbuf = (2 * bdp).clamp(4 << 20, 32 << 20);
    let path = CellPath::new(&spec);
    let pairs = PAIRS
        .iter()
        .enumerate()
        .map(|(k, &(imp_cc, linux_cc))| {
            let imp_run = || match (&path, &imp_ccs[k]) {
                (_, Some(reason)) => Outcome::failed(reason.clone()),
                (Err(e), None) => Outcome::failed(format!("no path: {e}")),
                (Ok(p), None) => p.imp(imp_cc, seconds, &spec, sndbuf),
            };
            let linux_run = || match (&path, &linux_ccs[k]) {
                (_, Some(reason)) => Outcome::failed(reason.clone()),
                (Err(e), None) => Outcome::failed(format!("no path: {e}")),
                (Ok(p), None) => p.linux(linux_cc, seconds),
            };
            let (imp, linux) = if (index + k).is_multiple_of(2) {
                let imp = imp_run();
                (imp, linux_run())
            } else {
                let linux = linux_run();
                (imp_run(), linux)
            };
            Pair {
                imp_cc,
                linux_cc,
                imp,
                linux,
            }
        })
        .collect();
    Cell {
        rtt_ms: rtt,
        loss_pct: loss,
        rate_mbit: rate,
        seconds,
        queue_bytes: queue,
        impair: spec,
        pairs,
    }
}

/// Why imp cannot run `cc`, if it cannot: `imp ttcp --cc CC` refuses it.
fn imp_refuses(cc: &str) -> Option<String> {
    let binary = match super::w6::imp_binary() {
        Ok(b) => b,
        Err(e) => return Some(e),
    };
    let out = std::process::Command::new(binary)
        .args(["ttcp", "--json", "--bytes", "1K", "--cc", cc])
        .output();
    match out {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!(
            "imp ttcp refuses --cc {cc}: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Some(format!("cannot run imp ttcp: {e}")),
    }
}

/// Why the kernel cannot run `cc`, if it cannot (after trying `modprobe tcp_CC`).
fn kernel_lacks(cc: &str) -> Option<String> {
    let available = || {
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
            .unwrap_or_default()
            .split_whitespace()
            .any(|c| c == cc)
    };
    if available() {
        return None;
    }
    let _ = std::process::Command::new("modprobe")
        .arg(format!("tcp_{cc}"))
        .output();
    if available() {
        None
    } else {
        Some(format!(
            "the kernel has no {cc} (not in tcp_available_congestion_control, modprobe tcp_{cc} failed)"
        ))
    }
}

/// The geometric mean of imp/Linux per pair.
fn summarize(cells: &[Cell]) -> Vec<Summary> {
    PAIRS
        .iter()
        .enumerate()
        .map(|(k, &(imp_cc, linux_cc))| {
            let ratios: Vec<f64> = cells
                .iter()
                .filter_map(|c| {
                    let p = &c.pairs[k];
                    let (i, l) = (p.imp.goodput_mbps?, p.linux.goodput_mbps?);
                    (i > 0.0 && l > 0.0).then(|| i / l)
                })
                .collect();
            Summary {
                imp_cc,
                linux_cc,
                geomean_imp_over_linux: geomean(&ratios),
                cells: ratios.len(),
            }
        })
        .collect()
}

fn geomean(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let logs: f64 = values.iter().map(|v| v.ln()).sum();
    Some((logs / values.len() as f64).exp())
}

/// One run as a table entry: `93.1 (12)`, or `n/a [k]` with `k` the reason's number
/// in `notes`.
fn entry(outcome: &Outcome, notes: &mut Vec<String>) -> String {
    match (outcome.goodput_mbps, &outcome.reason) {
        (Some(g), _) => {
            let g = if g >= 100.0 {
                format!("{g:.0}")
            } else {
                format!("{g:.2}")
            };
            match outcome.retransmits {
                Some(r) => format!("{g} ({r})"),
                None => g,
            }
        }
        (None, reason) => {
            let reason = reason.clone().unwrap_or_else(|| "no result".into());
            let k = notes.iter().position(|n| *n == reason).unwrap_or_else(|| {
                notes.push(reason);
                notes.len() - 1
            });
            format!("n/a [{}]", k + 1)
        }
    }
}

/// A cell's row of the table.
fn cell_line(cell: &Cell, notes: &mut Vec<String>) -> String {
    let mut line = format!(
        "{:>4}ms {:>5}% {:>5}M {:>3}s",
        cell.rtt_ms, cell.loss_pct, cell.rate_mbit, cell.seconds
    );
    for p in &cell.pairs {
        line.push_str(&format!(
            " | {:>13} {:>13}",
            entry(&p.imp, notes),
            entry(&p.linux, notes)
        ));
    }
    line
}

/// Print W8's table, summary and simulator rows.
pub(crate) fn print(report: &Report) {
    println!();
    println!(
        "W8 paths: goodput Mbit/s (retransmitted segments); imp = imp ttcp --impair to a \
         Linux receiver, linux = iperf3 through imp link --impair"
    );
    let mut header = format!("{:>6} {:>6} {:>6} {:>4}", "rtt", "loss", "rate", "run");
    for (imp_cc, linux_cc) in PAIRS {
        header.push_str(&format!(
            " | {:>13} {:>13}",
            format!("imp {imp_cc}"),
            format!("linux {linux_cc}")
        ));
    }
    println!("{header}");
    let mut notes = Vec::new();
    for cell in &report.cells {
        println!("{}", cell_line(cell, &mut notes));
    }
    for s in &report.summary {
        println!(
            "geomean imp {} / linux {}: {} over {} cells",
            s.imp_cc,
            s.linux_cc,
            s.geomean_imp_over_linux
                .map_or("n/a".to_string(), |g| format!("{g:.2}x")),
            s.cells
        );
    }
    print_sim(&report.sim, &mut notes);
    for (k, note) in notes.iter().enumerate() {
        println!("[{}] {note}", k + 1);
    }
}

fn print_sim(sim: &SimReport, notes: &mut Vec<String>) {
    println!(
        "W8 simulator: imp ttcp's defaults ({} MiB, 100 Mbit/s, 20 ms, no loss, NewReno)",
        sim.bytes >> 20
    );
    println!(
        "{:<6} {:>14} {:>10} {:>10}",
        "sim", "goodput Mbit/s", "sim s", "wall s"
    );
    for (name, run) in [("imp", &sim.imp), ("ns-3", &sim.ns3)] {
        let num =
            |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
        match &run.reason {
            Some(reason) => {
                let outcome = Outcome::failed(reason.clone());
                println!("{name:<6} {:>14}", entry(&outcome, notes));
            }
            None => println!(
                "{name:<6} {:>14} {:>10} {:>10}",
                num(run.goodput_mbps, 2),
                num(run.sim_seconds, 3),
                num(run.wall_seconds, 3)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geomean_and_entries() {
        assert_eq!(geomean(&[]), None);
        let g = geomean(&[0.5, 2.0]).unwrap();
        assert!((g - 1.0).abs() < 1e-12, "{g}");
        let mut notes = Vec::new();
        assert_eq!(
            entry(&Outcome::measured(93.14, Some(12)), &mut notes),
            "93.14 (12)"
        );
        assert_eq!(entry(&Outcome::measured(940.0, None), &mut notes), "940");
        assert_eq!(entry(&Outcome::failed("no bbr"), &mut notes), "n/a [1]");
        assert_eq!(entry(&Outcome::failed("other"), &mut notes), "n/a [2]");
        assert_eq!(entry(&Outcome::failed("no bbr"), &mut notes), "n/a [1]");
        assert_eq!(notes, ["no bbr", "other"]);
    }
}
