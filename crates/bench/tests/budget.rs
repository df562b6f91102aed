//! The performance budget: `imp-bench --budget` on the release build holds every figure
//! within 2% of its baseline in `crates/bench/budget.toml` (instruction counts under
//! callgrind, which are the same from run to run, and heap bytes per idle connection).
//!
//! The figures are those of the release build (fat LTO), not of the test profile this
//! binary is built with: `scripts/test` builds `imp-bench --release` first and names it
//! in `IMP_BUDGET_BIN`. Without it the budget test skips (a failure under
//! `IMP_REQUIRE_VALGRIND`), as it does without valgrind. The baselines hold for the
//! processor and compiler they were taken with; on another processor the test skips
//! unless valgrind is required (CI's machine is the baselines' own).
//!
//! The budget's own checks of bad input run on the test build: no valgrind needed.

#[path = "../../impnet/tests/common/require.rs"]
mod require;

use std::path::PathBuf;
use std::process::Command;

const IMP_BENCH: &str = env!("CARGO_BIN_EXE_imp-bench");

fn baselines_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("budget.toml")
}

/// A `key = "value"` line of the baselines file.
fn baseline_string(key: &str) -> String {
    let text = std::fs::read_to_string(baselines_file()).unwrap();
    text.lines()
        .find_map(|l| {
            let value = l.strip_prefix(key)?.trim_start().strip_prefix('=')?;
            Some(value.trim().trim_matches('"').to_string())
        })
        .unwrap_or_else(|| panic!("no {key} in budget.toml"))
}

#[test]
fn release_build_holds_the_budget() {
    if !require::have_valgrind() {
        return;
    }
    let Some(bin) = std::env::var_os("IMP_BUDGET_BIN") else {
        let why = "IMP_BUDGET_BIN is not set: the budget is held on the release build, \
                   which scripts/test builds and names there";
        assert!(!require::valgrind_required(), "{why}");
        require::skip_for("budget: no release build", why);
        return;
    };
    let taken_on = baseline_string("cpu");
    let here = impnet_bench::cpu_model();
    if taken_on != here && !require::valgrind_required() {
        require::report(
            "budget: another processor",
            &format!("the budget's baselines were taken on {taken_on}; this is {here}"),
        );
        return;
    }
    let out = Command::new(&bin).arg("--budget").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The table, whether it passed or not: a figure near its edge shows here.
    eprintln!("{stdout}");
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // Every figure of the file was measured and is in the table.
    let rows = stdout
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("the same work on smoltcp"))
        .filter(|l| !l.trim().is_empty())
        .count();
    let keys = std::fs::read_to_string(baselines_file())
        .unwrap()
        .lines()
        .filter(|l| {
            l.contains(" = ")
                && !l.starts_with('#')
                && !l.starts_with("rustc")
                && !l.starts_with("cpu")
        })
        .count();
    assert_eq!(rows, keys, "{stdout}");
    // smoltcp's figures on the same work are set beside W1a's, W2's and W3's
    // instructions and W2's and W3's bytes of code.
    let beside = stdout.lines().filter(|l| l.contains("imp/smoltcp")).count();
    assert_eq!(beside, 5, "{stdout}");
}

/// The check can fail: a baseline far below the figure is over budget, one far above
/// is a gain to lock in, the figure itself passes. Heap bytes per idle connection need
/// no valgrind, so this runs everywhere.
#[test]
fn budget_fails_a_figure_off_its_baseline() {
    let dir = std::env::temp_dir().join(format!("imp-budget-off-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("budget.toml");
    let budget = |extra: &[&str]| {
        Command::new(IMP_BENCH)
            .args([
                "--budget",
                "--budget-only",
                "idle_bytes_100",
                "--budget-file",
            ])
            .arg(&file)
            .args(extra)
            .output()
            .unwrap()
    };
    // Measured and written: then it holds.
    let out = budget(&["--budget-write"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&file).unwrap();
    let measured: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("idle_bytes_100 = ")?.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(measured > 100.0, "{text}");
    let out = budget(&[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (baseline, said) in [(measured / 1.05, "rose"), (measured * 1.05, "fell")] {
        let doctored: String = text
            .lines()
            .map(|l| match l.starts_with("idle_bytes_100 = ") {
                true => format!("idle_bytes_100 = {baseline:.3}\n"),
                false => format!("{l}\n"),
            })
            .collect();
        std::fs::write(&file, doctored).unwrap();
        let out = budget(&[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!("idle_bytes_100 {said}")),
            "{stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn budget_rejects_bad_baselines_and_keys() {
    let dir = std::env::temp_dir().join(format!("imp-budget-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = [
        (
            "rustc = \"r\"\ncpu = \"c\"\n[baseline]\nw2_instructions_per_round_trip = -3\n",
            "a baseline is a positive number",
        ),
        (
            "rustc = \"r\"\ncpu = \"c\"\n[baseline]\nw9_speed = 1\n",
            "`w9_speed` is not a figure of the budget",
        ),
        ("rustc = \"r\"\n[baseline\n", "budget.toml"),
    ];
    for (i, (text, said)) in cases.iter().enumerate() {
        let file = dir.join(format!("{i}-budget.toml"));
        std::fs::write(&file, text).unwrap();
        let out = Command::new(IMP_BENCH)
            .arg("--budget")
            .arg("--budget-file")
            .arg(&file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{text}: {stderr}");
        assert!(stderr.contains(said), "{text}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    let out = Command::new(IMP_BENCH)
        .args(["--budget", "--budget-only", "w9_speed"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("not a figure of the budget"), "{stderr}");
    let missing = dir.join("absent.toml");
    let out = Command::new(IMP_BENCH)
        .arg("--budget")
        .arg("--budget-file")
        .arg(&missing)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("absent.toml"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
