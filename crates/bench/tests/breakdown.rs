//! `imp-bench --breakdown --json` at tiny sizes: the instructions it reports for W1a and
//! W2 are those of callgrind's own total for the same child run here, apart from the
//! tool; the payload is the amount of work asked for; W1a spends some in the checksum
//! and both in TCP input and output; memcpy moves each W1a payload byte the measured
//! number of times; the machine's rates are there. Needs valgrind (`require::
//! have_valgrind`: skipped without it, a failure under `IMP_REQUIRE_VALGRIND` or
//! `IMP_REQUIRE_ROOT`). Without valgrind on the PATH, `--breakdown` fails with a clear
//! message (that part always runs).

#[path = "../../impnet/tests/common/require.rs"]
mod require;

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

const IMP_BENCH: &str = env!("CARGO_BIN_EXE_imp-bench");

/// The work `--breakdown` gives each child at tiny sizes (`breakdown::amounts`): W1a
/// payload bytes, W2 round trips.
const W1A_BYTES: u64 = 1 << 20;
const W2_ROUNDS: u64 = 200;

/// Bytes memcpy/memmove move per W1a payload byte in the measured loop (DHAT): into
/// the send buffer, into the frame, into the receive buffer, out to the reader. The
/// run is on a virtual clock, so the figure is the same every time.
const W1A_COPIES_PER_BYTE: f64 = 4.0;

fn share(workload: &Value, layer: &str) -> f64 {
    workload["layers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["layer"] == layer)
        .unwrap_or_else(|| panic!("no layer {layer} in {workload}"))["percent"]
        .as_f64()
        .unwrap()
}

/// Callgrind's own total (`totals:` or `summary:`, the first event, Ir) for
/// `imp-bench --breakdown-child WORKLOAD --breakdown-amount AMOUNT`, collected in the
/// measured loop as `--breakdown` does, read straight from callgrind's output file.
fn callgrind_total(workload: &str, amount: u64) -> u64 {
    let out_file: PathBuf = std::env::temp_dir().join(format!(
        "imp-breakdown-test-{}-{workload}.out",
        std::process::id()
    ));
    let out = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg("--toggle-collect=*breakdown::measured_*")
        .arg(IMP_BENCH)
        .args(["--breakdown-child", workload])
        .args(["--breakdown-amount", &amount.to_string()])
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&out_file);
    let _ = std::fs::remove_file(&out_file);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = text.unwrap();
    text.lines()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no total in callgrind's output for {workload}"))
}

#[test]
fn breakdown_counts_match_callgrind_on_its_own() {
    if !require::have_valgrind() {
        return;
    }
    let out = Command::new(IMP_BENCH)
        .args(["--breakdown", "--json"])
        .env("IMP_BENCH_TINY", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = report["breakdown"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["workload"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["W1a", "W2"]);
    // The payload of the work asked for: W1a's bytes; W2's round trips, one byte
    // each way.
    for (row, (amount, payload)) in rows
        .iter()
        .zip([(W1A_BYTES, W1A_BYTES), (W2_ROUNDS, 2 * W2_ROUNDS)])
    {
        let name = row["workload"].as_str().unwrap();
        assert_eq!(row["payload_bytes"].as_u64(), Some(payload), "{row}");
        // The children run on a virtual clock: the same run under callgrind here,
        // outside the tool, counts the same instructions. A total read from the
        // wrong file, a workload or amount mixed up, a cost dropped or counted twice
        // by the tool's parser: each shows here.
        let total = callgrind_total(name, amount);
        assert_eq!(row["instructions"].as_u64(), Some(total), "{row}");
        assert!(share(row, "TCP input") > 0.0, "{row}");
        assert!(share(row, "TCP output") > 0.0, "{row}");
        assert!(share(row, "checksum") > 0.0, "{row}");
    }
    let w1a = &rows[0];
    // Software checksums over every payload byte, sent and received, in W1a.
    assert!(share(w1a, "checksum") > 1.0, "{w1a}");
    let copied = w1a["copied_bytes_per_payload_byte"].as_f64().unwrap();
    assert!((copied - W1A_COPIES_PER_BYTE).abs() <= 0.1, "{w1a}");
    assert!(share(w1a, "copies (memcpy/memmove)") > 0.0, "{w1a}");
    let rates = &report["rates"];
    for key in ["memcpy_gbit_s", "checksum_gbit_s", "w1a_gbit_s"] {
        assert!(
            rates[key].as_f64().is_some_and(|v| v > 0.0),
            "{key}: {rates}"
        );
    }
    // Seed 000's table as published (1981): its shares are the paper's, whole.
    let seed = report["seed_000"].as_array().unwrap();
    let seed_sum: f64 = seed.iter().map(|s| s["percent"].as_f64().unwrap()).sum();
    assert_eq!(seed_sum, 100.0, "{seed:?}");
}

#[test]
fn breakdown_without_valgrind_says_so() {
    let empty = std::env::temp_dir().join(format!("imp-no-valgrind-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let out = Command::new(IMP_BENCH)
        .arg("--breakdown")
        .env("PATH", &empty)
        .env("IMP_BENCH_TINY", "1")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir(&empty);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("needs valgrind"), "{stderr}");
    assert!(stderr.contains("imp-bench: "), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}
