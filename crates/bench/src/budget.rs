//! `imp-bench --budget`: the performance budget. Instruction counts (callgrind, the
//! measured loop of each `--breakdown-child` only: deterministic from run to run, unlike
//! times on a shared machine) per unit of work, the bytes of code the W2 and W3 loops
//! run once per unit (callgrind's per-instruction counts: what must fit the instruction
//! cache; imp's did not, and that, not the instruction count, put imp at half of
//! smoltcp's rate in time), and heap bytes per idle connection end (the counting
//! allocator), held against the baselines committed in `budget.toml`.
//!
//! A figure more than [`TOLERANCE`] above its baseline fails the budget: that change
//! cost speed, and either it is won back or the baseline is raised in a commit that
//! says why. A figure more than [`TOLERANCE`] below fails too, so that a gain is locked
//! in by a commit lowering the baseline (`imp-bench --budget-write`) before a later
//! change can spend it unnoticed. The bytes of code move by a line here and there as
//! the linker places functions, so they are held to [`HOT_CODE_TOLERANCE`].
//!
//! The counts are those of this build: the release profile (fat LTO), this compiler and
//! this machine's C library (memcpy). A new compiler may move them; the baseline file
//! names the compiler it was taken with.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use super::breakdown::{self, Workload};
use super::imp_side::{self, Clock};

/// How far a figure may move from its baseline, either way, as a fraction.
pub const TOLERANCE: f64 = 0.02;

/// The same for the hot-code figures: where the linker places each function moves
/// the lines its code spans by one now and then, whatever changed, so a few lines
/// either way are not a change of the hot path.
pub const HOT_CODE_TOLERANCE: f64 = 0.05;

/// Where a figure comes from.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// Instructions of a child's measured loop over `amount` of work, per unit the
    /// child reports (`units N`).
    Instructions { child: Workload, amount: u64 },
    /// Heap bytes per idle connection end with this many connections open; `used`:
    /// after one round trip on every connection (what a connection that carried data
    /// and went quiet keeps), else before any (the table's and the handshake's part).
    IdleBytes { connections: usize, used: bool },
    /// Bytes of code a child's measured loop runs at least once per unit of work on
    /// average (half as many times as the units, so that code run once per unit in
    /// any order counts and set-up does not): the distinct 64-byte lines holding such
    /// an instruction, times 64 (callgrind with `--dump-instr=yes`,
    /// [`callgrind::hot_lines`](super::breakdown::callgrind::hot_lines)). What has to
    /// fit the processor's instruction cache (32 KiB on the EPYC the baselines were
    /// taken on) for the loop to run from it.
    HotCode { child: Workload, amount: u64 },
}

/// One figure of the budget.
#[derive(Debug, Clone, Copy)]
struct Metric {
    /// Its key in `budget.toml`.
    key: &'static str,
    /// What it counts, for the table.
    what: &'static str,
    source: Source,
    /// A reference figure, set beside the budget's figure of this key and not held
    /// (smoltcp on the same work).
    beside: Option<&'static str>,
    /// How far it may move from its baseline, either way, as a fraction.
    tolerance: f64,
}

const fn instructions(
    key: &'static str,
    what: &'static str,
    child: Workload,
    amount: u64,
) -> Metric {
    Metric {
        key,
        what,
        source: Source::Instructions { child, amount },
        beside: None,
        tolerance: TOLERANCE,
    }
}

const fn hot_code(key: &'static str, what: &'static str, child: Workload, amount: u64) -> Metric {
    Metric {
        key,
        what,
        source: Source::HotCode { child, amount },
        beside: None,
        tolerance: HOT_CODE_TOLERANCE,
    }
}

/// smoltcp's count on the same work as the budget's figure `of`.
const fn on_smoltcp(of: &'static str, what: &'static str, child: Workload, amount: u64) -> Metric {
    Metric {
        key: of,
        what,
        source: Source::Instructions { child, amount },
        beside: Some(of),
        tolerance: TOLERANCE,
    }
}

/// smoltcp's hot code on the same work as the budget's figure `of`.
const fn smoltcp_hot_code(
    of: &'static str,
    what: &'static str,
    child: Workload,
    amount: u64,
) -> Metric {
    Metric {
        key: of,
        what,
        source: Source::HotCode { child, amount },
        beside: Some(of),
        tolerance: HOT_CODE_TOLERANCE,
    }
}

/// The budget's figures. The amounts are large enough that set-up is not counted and
/// the per-unit figure is stable, small enough that the whole budget runs in minutes
/// under callgrind.
const METRICS: [Metric; 17] = [
    instructions(
        "w1a_instructions_per_byte",
        "W1a bulk, MTU 1500: instructions per payload byte",
        Workload::W1a,
        8 << 20,
    ),
    instructions(
        "w1b_instructions_per_byte",
        "W1b bulk, MTU 65535, offloads: instructions per payload byte",
        Workload::W1b,
        32 << 20,
    ),
    instructions(
        "w2_instructions_per_round_trip",
        "W2 ping-pong: instructions per round trip",
        Workload::W2,
        5000,
    ),
    instructions(
        "w3_instructions_per_connection",
        "W3 churn: instructions per connection",
        Workload::W3,
        2000,
    ),
    instructions(
        "w4_100_instructions_per_packet",
        "W4, 100 connections: instructions per packet",
        Workload::W4x100,
        5000,
    ),
    instructions(
        "w4_100k_instructions_per_packet",
        "W4, 100k connections: instructions per packet",
        Workload::W4x100k,
        5000,
    ),
    instructions(
        "sim_instructions_per_segment",
        "simulator, 10-flow dumbbell: instructions per segment",
        Workload::SimDumbbell,
        1000,
    ),
    hot_code(
        "w2_hot_code_bytes",
        "W2: bytes of code run once per round trip (64 B lines)",
        Workload::W2,
        5000,
    ),
    hot_code(
        "w3_hot_code_bytes",
        "W3: bytes of code run once per connection (64 B lines)",
        Workload::W3,
        2000,
    ),
    Metric {
        key: "idle_bytes_100",
        what: "heap bytes per idle connection end, 100 connections",
        source: Source::IdleBytes {
            connections: 100,
            used: false,
        },
        beside: None,
        tolerance: TOLERANCE,
    },
    Metric {
        key: "idle_bytes_100k",
        what: "heap bytes per idle connection end, 100k connections",
        source: Source::IdleBytes {
            connections: 100_000,
            used: false,
        },
        beside: None,
        tolerance: TOLERANCE,
    },
    Metric {
        key: "used_bytes_100k",
        what: "heap bytes per connection end after a round trip, 100k connections",
        source: Source::IdleBytes {
            connections: 100_000,
            used: true,
        },
        beside: None,
        tolerance: TOLERANCE,
    },
    on_smoltcp(
        "w1a_instructions_per_byte",
        "smoltcp 0.14, W1a: instructions per payload byte",
        Workload::SmolW1a,
        8 << 20,
    ),
    on_smoltcp(
        "w2_instructions_per_round_trip",
        "smoltcp 0.14, W2: instructions per round trip",
        Workload::SmolW2,
        5000,
    ),
    on_smoltcp(
        "w3_instructions_per_connection",
        "smoltcp 0.14, W3: instructions per connection",
        Workload::SmolW3,
        2000,
    ),
    smoltcp_hot_code(
        "w2_hot_code_bytes",
        "smoltcp 0.14, W2: bytes of code run once per round trip",
        Workload::SmolW2,
        5000,
    ),
    smoltcp_hot_code(
        "w3_hot_code_bytes",
        "smoltcp 0.14, W3: bytes of code run once per connection",
        Workload::SmolW3,
        2000,
    ),
];

/// `budget.toml`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Baselines {
    /// `rustc --version` of the build the baselines were taken from.
    rustc: String,
    /// The processor they were taken on (`model name` in /proc/cpuinfo): the C library
    /// picks its memcpy by processor, so counts hold from run to run on one kind.
    cpu: String,
    /// Each figure's baseline, by key.
    baseline: BTreeMap<String, f64>,
}

/// The file next to this crate's manifest.
pub fn default_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("budget.toml")
}

/// One figure measured, beside its baseline.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub key: &'static str,
    pub what: &'static str,
    pub value: f64,
    pub baseline: Option<f64>,
    /// (value - baseline) / baseline.
    pub change: Option<f64>,
    /// smoltcp 0.14's figure on the same work, where the budget sets one beside it
    /// (W1a, W2, W3; not held).
    pub smoltcp: Option<f64>,
    /// How far it may move from its baseline, either way, as a fraction.
    pub tolerance: f64,
}

impl Row {
    fn within(&self) -> bool {
        self.change.is_some_and(|c| c.abs() <= self.tolerance)
    }
}

/// `imp-bench --budget` (check against `file`) or `--budget-write` (measure and write
/// `file`). `only`: the keys to measure (all when empty; a check of some keys only
/// checks those).
pub fn run(file: &Path, write: bool, only: &[String], json: bool) -> Result<(), String> {
    for key in only {
        if !METRICS.iter().any(|m| m.key == key) {
            let keys: Vec<&str> = METRICS.iter().map(|m| m.key).collect();
            return Err(format!(
                "--budget-only `{key}`: not a figure of the budget ({})",
                keys.join(", ")
            ));
        }
    }
    let old = if write && !file.exists() {
        None
    } else {
        Some(load(file)?)
    };
    let metrics: Vec<Metric> = METRICS
        .iter()
        .copied()
        .filter(|m| only.is_empty() || only.iter().any(|k| k == m.key))
        .collect();
    if metrics
        .iter()
        .any(|m| !matches!(m.source, Source::IdleBytes { .. }))
    {
        breakdown::check_valgrind()?;
    }
    let values = measure_all(&metrics)?;
    let mut rows: Vec<Row> = Vec::new();
    let mut references = Vec::new();
    for (m, value) in metrics.iter().zip(values) {
        if m.beside.is_some() {
            references.push((m.key, value));
            continue;
        }
        let baseline = old.as_ref().and_then(|o| o.baseline.get(m.key).copied());
        rows.push(Row {
            key: m.key,
            what: m.what,
            value,
            baseline,
            change: baseline.map(|b| (value - b) / b),
            smoltcp: None,
            tolerance: m.tolerance,
        });
    }
    for (key, value) in references {
        if let Some(row) = rows.iter_mut().find(|r| r.key == key) {
            row.smoltcp = Some(value);
        }
    }
    if json {
        let text = serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?;
        println!("{text}");
    } else {
        print(&rows);
    }
    let here = Baselines {
        rustc: rustc_version(),
        cpu: cpu_model(),
        baseline: BTreeMap::new(),
    };
    if write {
        let mut baseline = old.map(|o| o.baseline).unwrap_or_default();
        for row in &rows {
            baseline.insert(row.key.to_string(), round(row.value));
        }
        return save(file, &Baselines { baseline, ..here });
    }
    let old = old.expect("loaded unless writing");
    verdict(&rows, &old, &here, file)
}

/// Every figure, the callgrind children run side by side (one per core).
fn measure_all(metrics: &[Metric]) -> Result<Vec<f64>, String> {
    let dir = breakdown::scratch_dir()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut values = vec![0.0; metrics.len()];
    let result = std::thread::scope(|scope| {
        let mut next = 0;
        let mut running = Vec::new();
        let mut outcome = Ok(());
        while next < metrics.len() || !running.is_empty() {
            while running.len() < cores && next < metrics.len() {
                let (i, metric, dir) = (next, metrics[next], &dir);
                running.push((i, scope.spawn(move || measure(metric, dir))));
                next += 1;
            }
            let (i, handle) = running.remove(0);
            match handle.join() {
                Ok(Ok(v)) => values[i] = v,
                Ok(Err(e)) => outcome = outcome.and(Err(format!("{}: {e}", metrics[i].key))),
                Err(_) => outcome = outcome.and(Err(format!("{}: panicked", metrics[i].key))),
            }
        }
        outcome
    });
    let _ = std::fs::remove_dir_all(&dir);
    result.map(|()| values)
}

/// One figure.
fn measure(metric: Metric, dir: &Path) -> Result<f64, String> {
    match metric.source {
        Source::Instructions { child, amount } => {
            let (instructions, stdout) = breakdown::measured_instructions(child, amount, dir)?;
            let units = breakdown::child_count(&stdout, "units")?;
            if units == 0 {
                return Err(format!("{stdout}: no work was done"));
            }
            Ok(instructions as f64 / units as f64)
        }
        Source::HotCode { child, amount } => {
            let (text, stdout) = breakdown::measured_callgrind(child, amount, dir, true)?;
            let units = breakdown::child_count(&stdout, "units")?;
            if units == 0 {
                return Err(format!("{stdout}: no work was done"));
            }
            let lines = breakdown::callgrind::hot_lines(&text, units.div_ceil(2))?;
            Ok((lines as u64 * breakdown::callgrind::LINE) as f64)
        }
        // Measured in a child too: the counting allocator is process-wide, and the
        // other figures' threads must not allocate while this one counts.
        Source::IdleBytes { connections, used } => {
            let exe = std::env::current_exe().map_err(|e| format!("own executable: {e}"))?;
            let out = Command::new(exe)
                .args(["--budget-idle-child", &connections.to_string()])
                .output()
                .map_err(|e| format!("running the idle-connection child: {e}"))?;
            let stdout = String::from_utf8_lossy(&out.stdout);
            if !out.status.success() {
                return Err(format!(
                    "the idle-connection child failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            let prefix = if used { "used " } else { "bytes " };
            stdout
                .lines()
                .find_map(|l| l.strip_prefix(prefix)?.trim().parse().ok())
                .ok_or_else(|| format!("the idle-connection child printed no bytes: {stdout}"))
        }
    }
}

/// The hidden `imp-bench --budget-idle-child N`: heap bytes per idle connection end
/// with N connections open, on a virtual clock, before any data (`bytes`) and after a
/// round trip on each (`used`).
pub fn idle_child(connections: usize) -> Result<(), String> {
    let (mut scale, bytes) = imp_side::idle_bytes(connections, Clock::Virtual(10_000));
    println!("bytes {bytes}");
    println!("used {}", imp_side::used_bytes(&mut scale, bytes));
    Ok(())
}

/// Four significant digits: finer than the tolerance, coarse enough to read.
fn round(value: f64) -> f64 {
    if value == 0.0 {
        return 0.0;
    }
    let digits = 3 - value.abs().log10().floor() as i32;
    let factor = 10f64.powi(digits);
    (value * factor).round() / factor
}

fn load(file: &Path) -> Result<Baselines, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("the budget's baselines, {}: {e}", file.display()))?;
    let baselines: Baselines = toml::from_str(&text).map_err(|e| {
        let line = e.span().map_or(0, |span| {
            1 + text[..span.start.min(text.len())].matches('\n').count()
        });
        format!("{}: line {line}: {}", file.display(), e.message().trim())
    })?;
    for (key, value) in &baselines.baseline {
        if !METRICS.iter().any(|m| m.key == key) {
            return Err(format!(
                "{}: `{key}` is not a figure of the budget",
                file.display()
            ));
        }
        if !(value.is_finite() && *value > 0.0) {
            return Err(format!(
                "{}: `{key}` = {value}: a baseline is a positive number",
                file.display()
            ));
        }
    }
    Ok(baselines)
}

fn save(file: &Path, baselines: &Baselines) -> Result<(), String> {
    let body = toml::to_string(baselines).map_err(|e| e.to_string())?;
    let text = format!(
        "# The performance budget's baselines (`imp-bench --budget`, held by the test\n\
         # crates/bench/tests/budget.rs): instructions per unit of work in the release build\n\
         # under callgrind, bytes of code run once per unit, and heap bytes per idle\n\
         # connection end. A figure more than 2% above or below its baseline fails (5% for\n\
         # the bytes of code). Written by `imp-bench --budget-write`; raise a baseline only\n\
         # in a commit that says why.\n{body}"
    );
    std::fs::write(file, text).map_err(|e| format!("{}: {e}", file.display()))?;
    eprintln!("imp-bench: baselines written to {}", file.display());
    Ok(())
}

/// This processor's `model name` (/proc/cpuinfo).
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines().find_map(|l| {
                Some(
                    l.strip_prefix("model name")?
                        .split_once(':')?
                        .1
                        .trim()
                        .to_string(),
                )
            })
        })
        .unwrap_or_else(|| "unknown".into())
}

fn rustc_version() -> String {
    Command::new("rustc")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

fn print(rows: &[Row]) {
    println!(
        "{:<58} {:>12} {:>12} {:>8}",
        "performance budget (callgrind; counting allocator)", "now", "baseline", "change"
    );
    let beside: Vec<&Row> = rows.iter().filter(|r| r.smoltcp.is_some()).collect();
    for row in rows {
        let baseline = row.baseline.map_or("-".into(), |b| format!("{b:.4}"));
        let change = row
            .change
            .map_or("new".into(), |c| format!("{:+.2}%", 100.0 * c));
        let mark = match row.change {
            Some(c) if c > row.tolerance => "  OVER",
            Some(c) if c < -row.tolerance => "  UNDER",
            _ => "",
        };
        println!(
            "{:<58} {:>12.4} {:>12} {:>8}{mark}",
            row.what, row.value, baseline, change
        );
    }
    if !beside.is_empty() {
        println!("the same work on smoltcp 0.14 (not held):");
        for row in beside {
            let smoltcp = row.smoltcp.unwrap_or(0.0);
            println!(
                "  {:<56} {:>12.4} imp/smoltcp {:.2}x",
                row.key,
                smoltcp,
                row.value / smoltcp
            );
        }
    }
}

/// Ok when every figure is within the tolerance of its baseline.
fn verdict(rows: &[Row], then: &Baselines, now: &Baselines, file: &Path) -> Result<(), String> {
    let bad: Vec<String> = rows
        .iter()
        .filter(|r| !r.within())
        .map(|r| match r.change {
            None => format!("{} has no baseline", r.key),
            Some(c) if c > 0.0 => format!("{} rose {:.2}%", r.key, 100.0 * c),
            Some(c) => format!(
                "{} fell {:.2}%: lock the gain in (lower the baseline)",
                r.key,
                -100.0 * c
            ),
        })
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    let mut compiler = String::new();
    if then.rustc != now.rustc {
        compiler += &format!(
            " (the baselines were taken with {}, this is {})",
            then.rustc, now.rustc
        );
    }
    if then.cpu != now.cpu {
        compiler += &format!(
            " (the baselines were taken on {}, this is {})",
            then.cpu, now.cpu
        );
    }
    Err(format!(
        "outside the budget by more than {:.0}% ({:.0}% for the hot-code figures): \
         {}{compiler}. Win it back, or rewrite the baselines with `imp-bench \
         --budget-write` in a commit that says why ({})",
        100.0 * TOLERANCE,
        100.0 * HOT_CODE_TOLERANCE,
        bad.join("; "),
        file.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &'static str, value: f64, baseline: f64) -> Row {
        let metric = METRICS.iter().find(|m| m.key == key).unwrap();
        Row {
            key,
            what: metric.what,
            value,
            baseline: Some(baseline),
            change: Some((value - baseline) / baseline),
            smoltcp: None,
            tolerance: metric.tolerance,
        }
    }

    /// Instructions are held to 2%, bytes of code to 5%, either way.
    #[test]
    fn each_figure_is_held_to_its_own_tolerance() {
        for (value, instructions, code) in [
            (101.5, true, true),
            (98.5, true, true),
            (103.0, false, true),
            (96.0, false, true),
            (106.0, false, false),
            (94.0, false, false),
        ] {
            let w2 = row("w2_instructions_per_round_trip", value, 100.0);
            let hot = row("w2_hot_code_bytes", value, 100.0);
            assert_eq!((w2.within(), hot.within()), (instructions, code), "{value}");
        }
    }
}
