//! `imp bench --breakdown --json` at tiny sizes: callgrind's instructions of W1a and W2
//! by layer add up to 100%, W1a spends some in the checksum and both in TCP input and
//! output, and memcpy moves every payload byte at least once; the machine's rates are
//! there. Needs valgrind: skipped without it, a failure with `IMP_REQUIRE_VALGRIND`
//! set (CI sets it). Without valgrind on the PATH, `--breakdown` fails with a clear
//! message (that part always runs).

#[path = "../../impnet/tests/common/require.rs"]
mod require;

use std::process::Command;

use serde_json::Value;

fn have_valgrind() -> bool {
    Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

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

#[test]
fn breakdown_shares_are_sane() {
    if !have_valgrind() {
        assert!(
            !require::valgrind_required(),
            "IMP_REQUIRE_VALGRIND is set, but valgrind cannot be run"
        );
        eprintln!("skipping: valgrind is not installed");
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_imp"))
        .args(["bench", "--breakdown", "--json"])
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
    for row in rows {
        let layers = row["layers"].as_array().unwrap();
        let sum: f64 = layers.iter().map(|s| s["percent"].as_f64().unwrap()).sum();
        assert!((sum - 100.0).abs() < 1e-6, "shares add up to {sum}: {row}");
        let counted: u64 = layers
            .iter()
            .map(|s| s["instructions"].as_u64().unwrap())
            .sum();
        assert_eq!(Some(counted), row["instructions"].as_u64(), "{row}");
        assert!(counted > 0, "{row}");
        assert!(row["payload_bytes"].as_u64().unwrap() > 0, "{row}");
        assert!(share(row, "TCP input") > 0.0, "{row}");
        assert!(share(row, "TCP output") > 0.0, "{row}");
        assert!(share(row, "checksum") > 0.0, "{row}");
    }
    let w1a = &rows[0];
    // Software checksums over every payload byte, sent and received, in W1a.
    assert!(share(w1a, "checksum") > 1.0, "{w1a}");
    // Payload goes into the send buffer, into the frame, into the receive buffer and
    // out to the reader: memcpy moves each byte at least once, and not endlessly.
    let copied = w1a["copied_bytes_per_payload_byte"].as_f64().unwrap();
    assert!((1.0..=8.0).contains(&copied), "{w1a}");
    assert!(share(w1a, "copies (memcpy/memmove)") > 0.0, "{w1a}");
    let rates = &report["rates"];
    for key in ["memcpy_gbit_s", "checksum_gbit_s", "w1a_gbit_s"] {
        assert!(
            rates[key].as_f64().is_some_and(|v| v > 0.0),
            "{key}: {rates}"
        );
    }
    let seed = report["seed_000"].as_array().unwrap();
    let seed_sum: f64 = seed.iter().map(|s| s["percent"].as_f64().unwrap()).sum();
    assert_eq!(seed_sum, 100.0, "{seed:?}");
}

#[test]
fn breakdown_without_valgrind_says_so() {
    let empty = std::env::temp_dir().join(format!("imp-no-valgrind-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_imp"))
        .args(["bench", "--breakdown"])
        .env("PATH", &empty)
        .env("IMP_BENCH_TINY", "1")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir(&empty);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("needs valgrind"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}
