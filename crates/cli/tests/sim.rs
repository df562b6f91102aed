//! `imp sim` end to end: tables on stdout, and in --out a pcap per link, a JSON summary
//! that is byte-identical for the same scenario and seed, and SVG and PNG plots.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "common/lossy_pair.rs"]
mod lossy_pair;

/// The shared lossy two-host scenario (different seeds, different figures).
fn scenario() -> String {
    lossy_pair::lossy_pair("cli-small", "512K", "seed = 11")
}

fn imp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_imp"))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("imp-cli-sim-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run_into(file: &Path, out: &Path) -> String {
    let result = imp()
        .arg("sim")
        .arg(file)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    String::from_utf8(result.stdout).unwrap()
}

#[test]
fn sim_writes_tables_pcaps_summary_and_plots_deterministically() {
    let dir = scratch("ok");
    let file = dir.join("small.toml");
    std::fs::write(&file, scenario()).unwrap();
    let (one, two) = (dir.join("one"), dir.join("two"));
    let text = run_into(&file, &one);
    assert!(text.contains("bulk flow"), "{text}");
    assert!(text.contains("% link"), "{text}");
    run_into(&file, &two);
    for name in [
        "ab.pcap",
        "summary.json",
        "bulk-tsg.svg",
        "bulk-tsg.png",
        "bulk-cwnd.svg",
        "bulk-cwnd.png",
        "bulk-rtt.png",
        "bulk-throughput.png",
    ] {
        let len = std::fs::metadata(one.join(name))
            .map(|m| m.len())
            .unwrap_or(0);
        assert!(len > 24, "{name} missing or empty");
    }
    let a = std::fs::read(one.join("summary.json")).unwrap();
    let b = std::fs::read(two.join("summary.json")).unwrap();
    assert_eq!(
        a, b,
        "summary.json differs between two runs of the same seed"
    );
    let v: serde_json::Value = serde_json::from_slice(&a).unwrap();
    assert_eq!(v["seed"], 11);
    assert_eq!(v["flows"][0]["bytes"], 512 * 1024);
    assert_eq!(v["flows"][0]["data_ok"], true);
    // A pcap: the nanosecond magic, then records.
    let pcap = std::fs::read(one.join("ab.pcap")).unwrap();
    assert_eq!(&pcap[..4], &0xa1b2_3c4du32.to_le_bytes());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_bad_scenario_is_one_line_naming_the_field() {
    let dir = scratch("bad");
    for (bad, field) in [
        (scenario().replace("rate = \"20mbit\"", "rate = -1"), "rate"),
        (
            scenario().replace("loss = \"0.5%\"", "loss = \"150%\""),
            "loss",
        ),
        (scenario().replace("record = \"4K\"", "recrd = 4"), "recrd"),
        (scenario().replace("seed = 11", "seed = 1.5"), "seed"),
    ] {
        let file = dir.join("bad.toml");
        std::fs::write(&file, &bad).unwrap();
        let result = imp().arg("sim").arg(&file).output().unwrap();
        assert_eq!(result.status.code(), Some(1));
        let err = String::from_utf8(result.stderr).unwrap();
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(&format!("`{field}`")), "{err}");
        assert!(err.contains("bad.toml:"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn sim_markdown_prints_the_seed_readme_tables() {
    // 004 is the quickest seed file; the scenario tests (crates/sim/tests/scenarios.rs)
    // check every file's tables against the README.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let file = "004-selfloop-letters.toml";
    let result = imp()
        .arg("sim")
        .arg(root.join("scenarios/seeds").join(file))
        .arg("--markdown")
        .output()
        .unwrap();
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    let printed = String::from_utf8(result.stdout).unwrap();
    let readme = std::fs::read_to_string(root.join("scenarios/seeds/README.md")).unwrap();
    let committed = impnet_sim::seed_tables::committed(&readme, file).expect("markers");
    assert_eq!(
        printed, committed,
        "scenarios/seeds/README.md differs from `imp sim scenarios/seeds/{file} --markdown`: \
         regenerate with IMP_UPDATE_SEED_TABLES=1 cargo test -p impnet-sim --test scenarios seed"
    );
    // Not a seed file: a clear error, no panic.
    let dir = scratch("markdown");
    let small = dir.join("small.toml");
    std::fs::write(&small, scenario()).unwrap();
    let result = imp()
        .arg("sim")
        .arg(&small)
        .arg("--markdown")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert_eq!(result.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("not one of the seed scenarios"), "{stderr}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `imp sim FILE --json ARGS...`, parsed; panics (with stderr) on failure.
fn sim_json(file: &Path, args: &[&str]) -> serde_json::Value {
    let out = imp()
        .arg("sim")
        .arg(file)
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn seeds_run_in_parallel_give_what_separate_runs_give() {
    let dir = scratch("seeds");
    let file = dir.join("small.toml");
    std::fs::write(&file, scenario()).unwrap();
    let all = sim_json(&file, &["--seeds", "3..6", "--jobs", "3"]);
    assert_eq!(all["seeds"], serde_json::json!([3, 4, 5, 6]));
    let runs = all["runs"].as_array().unwrap();
    let mut goodputs = Vec::new();
    for (run, seed) in runs.iter().zip(3..=6) {
        let alone = sim_json(&file, &["--seed", &seed.to_string()]);
        assert_eq!(run, &alone, "seed {seed}");
        goodputs.push(alone["flows"][0]["goodput_bps"].as_f64().unwrap() / 1e6);
    }
    // The spread is over those runs' figures.
    let spread = &all["flows"][0]["figures"]["goodput_mbps"];
    let min = goodputs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = goodputs.iter().copied().fold(0.0, f64::max);
    let mean = goodputs.iter().sum::<f64>() / goodputs.len() as f64;
    assert_eq!(spread["min"].as_f64(), Some(min));
    assert_eq!(spread["max"].as_f64(), Some(max));
    assert!((spread["mean"].as_f64().unwrap() - mean).abs() < 1e-9);
    assert!(min < max, "different seeds, different losses: {goodputs:?}");
    // With --out, the same summary is written.
    let out = dir.join("out");
    let table = imp()
        .arg("sim")
        .arg(&file)
        .args(["--seeds", "3..4", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(table.status.success());
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(text.contains("2 runs, seeds 3..4"), "{text}");
    assert!(text.contains("goodput Mbit/s"), "{text}");
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(written["seeds"], serde_json::json!([3, 4]));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn set_changes_the_run_and_bad_keys_are_named() {
    let dir = scratch("set");
    let file = dir.join("small.toml");
    std::fs::write(&file, scenario()).unwrap();
    let base = sim_json(&file, &[]);
    assert_eq!(base["links"][0]["delay_ms"].as_f64(), Some(2.0));
    // By index and by name; a bare `10%` is a string.
    let set = sim_json(
        &file,
        &["--set", "link.0.delay=30ms", "--set", "link[ab].loss=10%"],
    );
    assert_eq!(set["links"][0]["delay_ms"].as_f64(), Some(30.0));
    let lost = |r: &serde_json::Value| r["links"][0]["directions"][0]["lost"].as_u64().unwrap();
    assert!(
        lost(&set) > 4 * lost(&base),
        "{} vs {}",
        lost(&set),
        lost(&base)
    );
    // `seed` set as a key is the same run as --seed.
    assert_eq!(
        sim_json(&file, &["--set", "seed=5"]),
        sim_json(&file, &["--seed", "5"])
    );
    let bad = [
        ("lnk.0.loss=1%", "has no `lnk`"),
        ("link.3.loss=1%", "`link` has 1 entries"),
        ("link[zz].loss=1%", "named \"zz\""),
        ("link.0.los=1%", "los"),
        ("link.0.loss=lots", "loss"),
    ];
    for (arg, needle) in bad {
        let out = imp()
            .arg("sim")
            .arg(&file)
            .args(["--set", arg])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{arg}: {err}");
        assert!(err.contains(&format!("--set {arg}")), "{arg}: {err}");
        assert!(err.contains(needle), "{arg}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{arg}: {err}");
    }
    // A malformed option is a bad command line (exit 2).
    for args in [
        &["--set", "novalue"][..],
        &["--seeds", "9..2"],
        &["--seeds", "1..3", "--seed", "4"],
        &["--seeds", "1..3", "--jobs", "0"],
    ] {
        let out = imp().arg("sim").arg(&file).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
