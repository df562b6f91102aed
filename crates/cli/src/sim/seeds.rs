//! `imp sim FILE --seeds A..B`: the scenario once per seed (its `seed` replaced), the
//! runs spread over every core (each is independent and deterministic, so the result
//! does not depend on the number of threads), and per flow the min, max, mean and
//! standard deviation of each figure over the runs.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use impnet_sim::experiment::{self, FlowReport, Report};
use impnet_sim::scenario::Scenario;
use serde::{Deserialize, Serialize};

/// The seeds of `--seeds`: `A..B`, both included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedRange {
    /// First seed.
    pub first: u64,
    /// Last seed (included).
    pub last: u64,
}

/// The most runs one `--seeds` may ask for.
pub const MAX_SEEDS: u64 = 100_000;

/// Parses `A..B` (A <= B, at most [`MAX_SEEDS`] seeds).
pub fn parse_seeds(text: &str) -> Result<SeedRange, String> {
    let Some((a, b)) = text.split_once("..") else {
        return Err(format!("{text:?}: give A..B, e.g. 1..10 (both included)"));
    };
    let number = |s: &str| {
        s.trim()
            .parse::<u64>()
            .map_err(|e| format!("{text:?}: {s:?} is not a seed ({e})"))
    };
    let (first, last) = (number(a)?, number(b.trim_start_matches('='))?);
    if first > last {
        return Err(format!("{text:?}: the first seed is above the last"));
    }
    if last - first >= MAX_SEEDS {
        return Err(format!("{text:?}: at most {MAX_SEEDS} seeds"));
    }
    Ok(SeedRange { first, last })
}

/// min, max, mean and (population) standard deviation of one figure.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub std: f64,
}

impl Spread {
    /// Of `values` (at least one).
    pub fn of(values: &[f64]) -> Spread {
        let n = values.len().max(1) as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        Spread {
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            mean,
            std: var.sqrt(),
        }
    }
}

/// A figure of a flow's report: its name in the JSON, its column head, its value.
pub(super) type Figure = (&'static str, &'static str, fn(&FlowReport) -> f64);

/// The figures summarised per flow (seed 002's columns, and the capture's judgement).
pub(super) const FIGURES: [Figure; 8] = [
    ("goodput_mbps", "goodput Mbit/s", |f| f.goodput_bps / 1e6),
    ("seconds", "time s", |f| f.seconds),
    ("capacity_pct", "% link", |f| f.capacity_pct),
    ("retransmits", "retx", |f| f.retransmits as f64),
    ("rtt_mean_ms", "rtt avg ms", |f| f.rtt.mean_ms),
    ("rtos", "rtos", |f| {
        f.analysis.as_ref().map_or(0.0, |a| a.rtos as f64)
    }),
    ("longest_stall_ms", "stall ms", |f| {
        f.analysis.as_ref().map_or(0.0, |a| a.longest_stall_ms)
    }),
    ("completed", "done", |f| f64::from(u8::from(f.completed))),
];

/// One flow over every seed.
#[derive(Debug, Clone, Serialize)]
pub struct FlowSpread {
    /// Flow name.
    pub name: String,
    /// `bulk`, `rr` or `ping`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Per figure (see `FIGURES`), its spread over the runs.
    pub figures: BTreeMap<&'static str, Spread>,
}

/// What `--seeds` writes as `summary.json` (and prints with `--json`).
#[derive(Debug, Clone, Serialize)]
pub struct SeedsSummary {
    /// Scenario name.
    pub scenario: String,
    /// The seeds run, in order.
    pub seeds: Vec<u64>,
    /// Per flow, the spread of each figure.
    pub flows: Vec<FlowSpread>,
    /// Each run's own report, in the order of `seeds` (absent from a merge of shards,
    /// whose files hold only each run's figures).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<Report>,
}

/// A figure's value, kept exactly: written as the shortest decimal that reads back as
/// the same `f64` (Rust's `{:?}`, so `NaN` and `inf` too), in a string, so a merge of
/// shard files computes the very spreads a single run does, bit for bit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExactF64(pub f64);

impl Serialize for ExactF64 {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&format_args!("{:?}", self.0))
    }
}

impl<'de> Deserialize<'de> for ExactF64 {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse::<f64>()
            .map(ExactF64)
            .map_err(|e| serde::de::Error::custom(format!("{text:?} is not a figure ({e})")))
    }
}

/// One flow's figures in one run: what the spreads and the data check need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowFigures {
    /// Flow name.
    pub name: String,
    /// `bulk`, `rr`, `ping`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// Whether the flow finished.
    pub completed: bool,
    /// Whether the data received was the data sent (`None`: not checked).
    pub data_ok: Option<bool>,
    /// Each of `FIGURES` by its JSON name.
    pub figures: BTreeMap<String, ExactF64>,
}

/// One run's figures, per flow in the scenario's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFigures {
    /// The run's seed.
    pub seed: u64,
    /// The run's trace hash (two runs of one seed on one version have the same).
    pub trace_hash: String,
    /// Per flow.
    pub flows: Vec<FlowFigures>,
}

impl RunFigures {
    /// The figures of `report`.
    pub fn of(report: &Report) -> RunFigures {
        RunFigures {
            seed: report.seed,
            trace_hash: report.trace_hash.clone(),
            flows: report
                .flows
                .iter()
                .map(|f| FlowFigures {
                    name: f.name.clone(),
                    kind: f.kind.clone(),
                    completed: f.completed,
                    data_ok: f.data_ok,
                    figures: FIGURES
                        .iter()
                        .map(|&(name, _, value)| (name.to_string(), ExactF64(value(f))))
                        .collect(),
                })
                .collect(),
        }
    }

    /// The flows whose data differed from what was sent, as `NAME (seed N)`.
    pub fn broken(&self) -> impl Iterator<Item = String> + '_ {
        self.flows
            .iter()
            .filter(|f| f.data_ok == Some(false) && f.completed)
            .map(|f| format!("{} (seed {})", f.name, self.seed))
    }
}

/// Runs `scenario` once per seed of `seeds` on `threads` threads; the reports come
/// back in the order of `seeds`, whatever order they finished in (none for none).
pub fn run_all(scenario: &Scenario, seeds: &[u64], threads: usize) -> Result<Vec<Report>, String> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Report, String>>>> =
        Mutex::new(seeds.iter().map(|_| None).collect());
    let threads = threads.clamp(1, seeds.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&seed) = seeds.get(i) else { break };
                    let mut one = scenario.clone();
                    one.seed = seed;
                    let result = experiment::run(&one, None, &mut |_| {})
                        .map(|o| o.report)
                        .map_err(|e| format!("seed {seed}: {e}"));
                    if let Ok(mut all) = results.lock() {
                        all[i] = Some(result);
                    }
                }
            });
        }
    });
    let all = results
        .into_inner()
        .map_err(|_| "a run panicked".to_string())?;
    all.into_iter()
        .zip(seeds)
        .map(|(r, seed)| r.unwrap_or_else(|| Err(format!("seed {seed}: did not run"))))
        .collect()
}

/// The spread of every flow's figures over `runs` (at least one, all of one scenario,
/// in the order they are to be listed), with the reports themselves.
pub fn summarise(runs: Vec<Report>) -> Result<SeedsSummary, String> {
    let scenario = runs.first().map(|r| r.scenario.clone()).unwrap_or_default();
    let figures: Vec<RunFigures> = runs.iter().map(RunFigures::of).collect();
    let mut summary = spread(&scenario, &figures)?;
    summary.runs = runs;
    Ok(summary)
}

/// The spread of every flow's figures over `runs`, which must have the same flows
/// (names and types, in one order) and every figure of `FIGURES`.
pub fn spread(scenario: &str, runs: &[RunFigures]) -> Result<SeedsSummary, String> {
    let Some(first) = runs.first() else {
        return Err("no runs to summarise".into());
    };
    for run in runs {
        let same = run.flows.len() == first.flows.len()
            && run
                .flows
                .iter()
                .zip(&first.flows)
                .all(|(a, b)| a.name == b.name && a.kind == b.kind);
        if !same {
            return Err(format!(
                "seed {} has other flows than seed {}: not one scenario",
                run.seed, first.seed
            ));
        }
    }
    let value = |run: &RunFigures, flow: usize, name: &str| -> Result<f64, String> {
        run.flows[flow]
            .figures
            .get(name)
            .map(|v| v.0)
            .ok_or_else(|| {
                format!(
                    "seed {}, flow {}: figure {name} is missing",
                    run.seed, run.flows[flow].name
                )
            })
    };
    let mut flows = Vec::with_capacity(first.flows.len());
    for (i, flow) in first.flows.iter().enumerate() {
        let mut figures = BTreeMap::new();
        for &(name, _, _) in &FIGURES {
            let values = runs
                .iter()
                .map(|r| value(r, i, name))
                .collect::<Result<Vec<f64>, String>>()?;
            figures.insert(name, Spread::of(&values));
        }
        flows.push(FlowSpread {
            name: flow.name.clone(),
            kind: flow.kind.clone(),
            figures,
        });
    }
    Ok(SeedsSummary {
        scenario: scenario.to_string(),
        seeds: runs.iter().map(|r| r.seed).collect(),
        flows,
        runs: Vec::new(),
    })
}

/// The table: per flow and figure, min / max / mean / std.
pub fn print(summary: &SeedsSummary) {
    let seeds = &summary.seeds;
    println!(
        "imp sim {}: {} runs, seeds {}..{}",
        summary.scenario,
        seeds.len(),
        seeds.first().copied().unwrap_or(0),
        seeds.last().copied().unwrap_or(0)
    );
    println!(
        "\n{:<24} {:<16} {:>12} {:>12} {:>12} {:>12}",
        "flow", "figure", "min", "max", "mean", "std"
    );
    for flow in &summary.flows {
        for (name, head, _) in FIGURES {
            let Some(s) = flow.figures.get(name) else {
                continue;
            };
            println!(
                "{:<24} {:<16} {:>12} {:>12} {:>12} {:>12}",
                flow.name,
                head,
                figure(s.min),
                figure(s.max),
                figure(s.mean),
                figure(s.std)
            );
        }
    }
}

/// `v` with 4 significant digits (at most 6 decimals), so kbit/s and Gbit/s both read.
pub(super) fn figure(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let magnitude = v.abs().log10().floor() as i32;
    let decimals = (3 - magnitude).clamp(0, 6) as usize;
    format!("{v:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_ranges_parse_and_bad_ones_say_why() {
        assert_eq!(parse_seeds("1..10"), Ok(SeedRange { first: 1, last: 10 }));
        assert_eq!(parse_seeds("3..=3").map(|r| r.last), Ok(3));
        for (bad, needle) in [
            ("5", "give A..B"),
            ("9..2", "above the last"),
            ("a..3", "not a seed"),
            ("0..100000", "at most"),
        ] {
            let e = parse_seeds(bad).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn figures_keep_four_significant_digits() {
        assert_eq!(figure(527.4921), "527.5");
        assert_eq!(figure(0.005_393_3), "0.005393");
        assert_eq!(figure(123_456.7), "123457");
        assert_eq!(figure(0.0), "0");
    }

    #[test]
    fn spread_of_known_values() {
        let s = Spread::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!((s.min, s.max, s.mean, s.std), (2.0, 9.0, 5.0, 2.0));
    }
}
