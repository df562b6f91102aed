//! `imp sim` end to end: tables on stdout, and in --out a pcap per link, a JSON summary
//! that is byte-identical for the same scenario and seed, and SVG and PNG plots.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

use std::path::{Path, PathBuf};
use std::process::Command;

const SCENARIO: &str = r#"
name = "cli-small"
duration = "10s"
seed = 11

[[host]]
name = "a"
[[host]]
name = "b"

[[link]]
name = "ab"
a = "a"
b = "b"
rate = "20mbit"
delay = "2ms"
loss = "0.5%"

[[flow]]
name = "bulk"
type = "bulk"
from = "a"
to = "b"
bytes = "512K"
record = "4K"
"#;

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
    std::fs::write(&file, SCENARIO).unwrap();
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
        (SCENARIO.replace("rate = \"20mbit\"", "rate = -1"), "rate"),
        (
            SCENARIO.replace("loss = \"0.5%\"", "loss = \"150%\""),
            "loss",
        ),
        (SCENARIO.replace("record = \"4K\"", "recrd = 4"), "recrd"),
        (SCENARIO.replace("seed = 11", "seed = 1.5"), "seed"),
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
    std::fs::write(&small, SCENARIO).unwrap();
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
