//! A sweep split over machines: `imp sim FILE --seeds A..B --shard I/N --out DIR` runs
//! one slice of the seeds and writes `DIR/shard-I-of-N.json`; `imp sim merge DIR...`
//! reads the slices and prints the table one `imp sim FILE --seeds A..B` prints, the
//! same to the byte.
//!
//! Shard `I/N` (1 <= I <= N) runs the seeds whose index in the range (`seed - A`) is
//! `I - 1` modulo N: shard 1/4 of `1..20` runs 1, 5, 9, 13, 17. Taking every N-th seed
//! rather than a block spreads seeds of unequal cost over the shards. A shard may get
//! no seed (N above the number of seeds); it still writes its file, so a merge can tell
//! it ran.
//!
//! A shard file holds each run's figures exactly (as the shortest decimal that reads
//! back as the same `f64`), not pre-aggregated spreads, so the merge computes every
//! min, max, mean and std from the same numbers in the same order as a single run.
//! It also names the scenario by the SHA-256 of its file and `--set` arguments and the
//! imp version that ran it: a merge refuses files of two scenarios or versions, and
//! seeds that two files hold or that none does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;
use impnet_sim::experiment::Report;
use impnet_sim::scenario::Override;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::seeds::{self, RunFigures, SeedRange};

/// The `format` of a shard file this imp writes and reads.
pub const FORMAT: &str = "imp-sim-sweep/1";

/// The largest shard file a merge reads (a run's figures take well under 1 KiB a flow).
const MAX_SHARD_BYTES: u64 = 1 << 30;

/// Shard `index` of `count` (`--shard I/N`, 1 <= I <= N).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// Which slice, from 1.
    pub index: u64,
    /// How many slices.
    pub count: u64,
}

/// Parses `I/N` (1 <= I <= N).
pub fn parse_shard(text: &str) -> Result<Shard, String> {
    let Some((i, n)) = text.split_once('/') else {
        return Err(format!(
            "{text:?}: give I/N, e.g. 2/4 (the 2nd of 4 shards)"
        ));
    };
    let number = |s: &str| {
        s.trim()
            .parse::<u64>()
            .map_err(|e| format!("{text:?}: {s:?} is not a number ({e})"))
    };
    let (index, count) = (number(i)?, number(n)?);
    if count == 0 {
        return Err(format!("{text:?}: give at least 1 shard"));
    }
    if index == 0 || index > count {
        return Err(format!(
            "{text:?}: the shard is numbered from 1 to {count} (Kubernetes' \
             JOB_COMPLETION_INDEX counts from 0: add 1)"
        ));
    }
    Ok(Shard { index, count })
}

impl Shard {
    /// The seeds of `range` this shard runs: those at index `I - 1` modulo N.
    pub fn seeds(self, range: SeedRange) -> Vec<u64> {
        (range.first..=range.last)
            .filter(|seed| (seed - range.first) % self.count == self.index - 1)
            .collect()
    }

    /// The shard's file name in `--out`.
    pub fn file_name(self) -> String {
        format!("shard-{}-of-{}.json", self.index, self.count)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// What a shard writes: which sweep it belongs to and its runs' figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardFile {
    /// [`FORMAT`].
    pub format: String,
    /// The imp version that ran the shard.
    pub imp_version: String,
    /// The scenario's name.
    pub scenario: String,
    /// SHA-256 (hex) of the scenario file's bytes and the `--set` arguments
    /// ([`scenario_sha256`]).
    pub scenario_sha256: String,
    /// The sweep's first seed (`A` of `--seeds A..B`).
    pub first_seed: u64,
    /// The sweep's last seed (`B`, included).
    pub last_seed: u64,
    /// This shard's `I`.
    pub shard_index: u64,
    /// The sweep's `N`.
    pub shard_count: u64,
    /// Each run's figures, in seed order.
    pub runs: Vec<RunFigures>,
}

impl ShardFile {
    fn range(&self) -> SeedRange {
        SeedRange {
            first: self.first_seed,
            last: self.last_seed,
        }
    }
}

/// The scenario's identity: SHA-256 over the file's bytes, then for each `--set` in
/// order a NUL, its key, `=` and its value (as `Scenario::load_with` reads them).
pub fn scenario_sha256(file: &Path, overrides: &[Override]) -> Result<String, String> {
    let bytes = std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let mut hash = Sha256::new();
    hash.update(&bytes);
    for o in overrides {
        hash.update(b"\0");
        hash.update(o.key.as_bytes());
        hash.update(b"=");
        hash.update(o.value.as_bytes());
    }
    Ok(hash.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// The shard file of `reports` (the runs of `shard`'s seeds, in order).
pub fn shard_file(
    scenario_sha256: String,
    scenario: &str,
    range: SeedRange,
    shard: Shard,
    reports: &[Report],
) -> ShardFile {
    ShardFile {
        format: FORMAT.into(),
        imp_version: env!("CARGO_PKG_VERSION").into(),
        scenario: scenario.into(),
        scenario_sha256,
        first_seed: range.first,
        last_seed: range.last,
        shard_index: shard.index,
        shard_count: shard.count,
        runs: reports.iter().map(RunFigures::of).collect(),
    }
}

/// Options of `imp sim merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Directories holding shard files (`shard-I-of-N.json`, as `--shard` writes them
    /// into `--out`), or shard files.
    #[arg(required = true, value_name = "DIR")]
    pub paths: Vec<PathBuf>,
    /// Print the merged summary as JSON (the spreads; each run's figures stay in the
    /// shard files) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write index.html (the statistics table and a plot per figure across the seeds)
    /// and the plots into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Check the arguments of `imp sim merge` before anything is read.
pub fn validate(args: &MergeArgs) -> Result<(), String> {
    if args.paths.iter().any(|p| p.as_os_str().is_empty()) {
        return Err("merge: a DIR is empty: give shard directories or files".into());
    }
    if let Some(out) = &args.out {
        super::check_out("merge --out", out)?;
    }
    Ok(())
}

/// `imp sim merge DIR...`: the table (or JSON) of the whole sweep.
pub fn merge(args: &MergeArgs) -> Result<(), String> {
    let files = shard_paths(&args.paths)?;
    let mut shards = Vec::with_capacity(files.len());
    for path in files {
        let shard = read_shard(&path)?;
        shards.push((path, shard));
    }
    let runs = merged_runs(&shards)?;
    let scenario = shards.first().map_or("", |(_, s)| s.scenario.as_str());
    let summary = seeds::spread(scenario, &runs)?;
    if let Some(dir) = &args.out {
        write_page(args, dir, &shards, &summary, &runs)?;
    }
    if args.json {
        let json = serde_json::to_string_pretty(&summary).expect("the summary serialises");
        println!("{json}");
    } else {
        seeds::print(&summary);
    }
    super::data_check(&runs)
}

/// `merge --out DIR`: the sweep's page and plots.
fn write_page(
    args: &MergeArgs,
    dir: &Path,
    shards: &[(PathBuf, ShardFile)],
    summary: &seeds::SeedsSummary,
    runs: &[RunFigures],
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let first = &shards[0].1;
    let notes = format!(
        "Merged from {} shard files of {} shards, written by imp {}; scenario file and \
         --set arguments with SHA-256 {}.",
        shards.len(),
        first.shard_count,
        first.imp_version,
        first.scenario_sha256
    );
    let mut command = vec!["imp".to_string(), "sim".into(), "merge".into()];
    command.extend(args.paths.iter().map(|p| p.display().to_string()));
    command.extend(["--out".to_string(), dir.display().to_string()]);
    let html = super::page::sweep_page(summary, runs, "", &notes, &command, dir, false)?;
    super::page::write(dir, &html)?;
    Ok(())
}

/// The shard files named by `paths`: a file as given, a directory's `shard-*.json`
/// files in name order.
fn shard_paths(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for path in paths {
        let meta =
            std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if meta.is_file() {
            files.push(path.clone());
            continue;
        }
        if !meta.is_dir() {
            return Err(format!(
                "{}: neither a directory nor a regular file: give shard directories or files",
                path.display()
            ));
        }
        let entries =
            std::fs::read_dir(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let mut found: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("shard-") && n.ends_with(".json"))
            })
            .collect();
        if found.is_empty() {
            return Err(format!(
                "{} holds no shard-*.json file (`imp sim FILE --seeds A..B --shard I/N \
                 --out {}` writes one)",
                path.display(),
                path.display()
            ));
        }
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

/// Reads and checks one shard file: its format, and that it holds exactly the seeds
/// its shard runs.
fn read_shard(path: &Path) -> Result<ShardFile, String> {
    use std::io::Read;
    let name = path.display();
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_SHARD_BYTES + 1).read_to_string(&mut text))
        .map_err(|e| format!("cannot read {name}: {e}"))?;
    if text.len() as u64 > MAX_SHARD_BYTES {
        return Err(format!("{name}: larger than 1 GiB: not a shard file"));
    }
    /// Only the format, read first, so a file of another format or version is named
    /// as such rather than by its first field this imp does not know.
    #[derive(Deserialize)]
    struct Head {
        format: Option<String>,
    }
    let format = serde_json::from_str::<Head>(&text)
        .map_err(|e| format!("{name}: not JSON ({e})"))?
        .format;
    if format.as_deref() != Some(FORMAT) {
        return Err(format!(
            "{name}: not a shard file of this imp (format {}, this imp reads {FORMAT})",
            format.map_or("missing".into(), |f| format!("{f:?}"))
        ));
    }
    let file: ShardFile =
        serde_json::from_str(&text).map_err(|e| format!("{name}: not a shard file ({e})"))?;
    let range = file.range();
    if range.first > range.last || range.last - range.first >= seeds::MAX_SEEDS {
        return Err(format!(
            "{name}: seeds {}..{} is not a sweep's range",
            range.first, range.last
        ));
    }
    let shard = parse_shard(&format!("{}/{}", file.shard_index, file.shard_count))
        .map_err(|e| format!("{name}: shard {e}"))?;
    let held: Vec<u64> = file.runs.iter().map(|r| r.seed).collect();
    let want = shard.seeds(range);
    if held != want {
        return Err(format!(
            "{name}: holds seeds {} but shard {shard} of {}..{} runs {}: the file was \
             altered or cut short",
            list(&held),
            range.first,
            range.last,
            list(&want)
        ));
    }
    Ok(file)
}

/// Every run of `shards` in seed order, once the files are shown to be one sweep (one
/// scenario, version and range) whose seeds each appear exactly once.
fn merged_runs(shards: &[(PathBuf, ShardFile)]) -> Result<Vec<RunFigures>, String> {
    let Some((first_path, first)) = shards.first() else {
        return Err("no shard files to merge".into());
    };
    for (path, shard) in shards {
        let differs = |what: &str, a: &str, b: &str| {
            format!(
                "{} and {} are not one sweep: {what} {a} and {b}",
                first_path.display(),
                path.display()
            )
        };
        if shard.imp_version != first.imp_version {
            return Err(differs(
                "written by imp",
                &first.imp_version,
                &shard.imp_version,
            ));
        }
        if shard.scenario_sha256 != first.scenario_sha256 || shard.scenario != first.scenario {
            return Err(differs(
                "other scenarios (file or --set),",
                &identity(first),
                &identity(shard),
            ));
        }
        if shard.range() != first.range() {
            return Err(differs(
                "other seeds,",
                &format!("{}..{}", first.first_seed, first.last_seed),
                &format!("{}..{}", shard.first_seed, shard.last_seed),
            ));
        }
    }
    let mut by_seed: BTreeMap<u64, (&PathBuf, &RunFigures)> = BTreeMap::new();
    for (path, shard) in shards {
        for run in &shard.runs {
            if let Some((other, _)) = by_seed.insert(run.seed, (path, run)) {
                return Err(format!(
                    "seed {} is in both {} and {}: give each shard once",
                    run.seed,
                    other.display(),
                    path.display()
                ));
            }
        }
    }
    let range = first.range();
    let missing: Vec<u64> = (range.first..=range.last)
        .filter(|s| !by_seed.contains_key(s))
        .collect();
    if !missing.is_empty() {
        return Err(missing_message(shards, range, &missing));
    }
    Ok(by_seed.into_values().map(|(_, run)| run.clone()).collect())
}

/// A scenario's name and the start of its hash, for a message.
fn identity(shard: &ShardFile) -> String {
    let hash = &shard.scenario_sha256;
    format!(
        "{} (sha256 {})",
        shard.scenario,
        hash.get(..12).unwrap_or(hash)
    )
}

/// Which seeds no file holds and, when every file is of one N, which shards are absent.
fn missing_message(shards: &[(PathBuf, ShardFile)], range: SeedRange, missing: &[u64]) -> String {
    let total = range.last - range.first + 1;
    let mut message = format!(
        "seeds {}..{} are not all there: {} of {total} missing ({})",
        range.first,
        range.last,
        missing.len(),
        list(missing)
    );
    let count = shards[0].1.shard_count;
    if shards.iter().all(|(_, s)| s.shard_count == count) {
        let absent: Vec<String> = (1..=count)
            .filter(|i| !shards.iter().any(|(_, s)| s.shard_index == *i))
            .map(|i| format!("{i}/{count}"))
            .collect();
        message.push_str(&format!("; no file for shard {}", absent.join(", ")));
    }
    message
}

/// At most ten seeds, then how many more.
fn list(seeds: &[u64]) -> String {
    if seeds.is_empty() {
        return "none".into();
    }
    let shown: Vec<String> = seeds.iter().take(10).map(u64::to_string).collect();
    if seeds.len() > 10 {
        format!("{}, ... {} more", shown.join(", "), seeds.len() - 10)
    } else {
        shown.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_and_bad_ones_say_why() {
        assert_eq!(parse_shard("2/4"), Ok(Shard { index: 2, count: 4 }));
        for (bad, needle) in [
            ("2", "give I/N"),
            ("0/4", "from 1 to 4"),
            ("5/4", "from 1 to 4"),
            ("1/0", "at least 1"),
            ("x/4", "not a number"),
        ] {
            let e = parse_shard(bad).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn shards_cover_the_range_once() {
        let range = SeedRange { first: 3, last: 22 };
        let shard = |index| Shard { index, count: 4 };
        assert_eq!(shard(1).seeds(range), vec![3, 7, 11, 15, 19]);
        let mut all: Vec<u64> = (1..=4).flat_map(|i| shard(i).seeds(range)).collect();
        all.sort_unstable();
        assert_eq!(all, (3..=22).collect::<Vec<u64>>());
        let many = Shard {
            index: 25,
            count: 30,
        };
        assert!(many.seeds(range).is_empty(), "more shards than seeds");
    }

    #[test]
    fn figures_read_back_bit_for_bit() {
        for v in [
            0.1 + 0.2,
            1.0 / 3.0,
            f64::MIN_POSITIVE,
            5e-324,
            f64::MAX,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            let json = serde_json::to_string(&seeds::ExactF64(v)).unwrap();
            let back: seeds::ExactF64 = serde_json::from_str(&json).unwrap();
            assert_eq!(back.0.to_bits(), v.to_bits(), "{v:?} as {json}");
        }
        let nan: seeds::ExactF64 = serde_json::from_str("\"NaN\"").unwrap();
        assert!(nan.0.is_nan());
        let bad = serde_json::from_str::<seeds::ExactF64>("\"fast\"").unwrap_err();
        assert!(bad.to_string().contains("not a figure"), "{bad}");
    }
}
