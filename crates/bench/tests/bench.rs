//! `imp-bench --quick --json` at tiny sizes (IMP_BENCH_TINY): the output is a JSON list
//! of {workload, unit, imp, smoltcp, linux} covering every workload, and imp allocates
//! nothing per packet in steady state; as root with wrk and nginx, W6 answers every
//! HTTP request without error; W7's forwarding rows are there (the device ones as root
//! with iperf3); W8 (run on its own, `--only W8`) fills its table of paths; W9's ladder
//! has every rung, each speed-up the ratio of its throughput to L1's; W10 without
//! tun2socks says so.
//!
//! The device workloads run the `imp` binary, which imp-bench finds beside itself:
//! `cargo test --workspace` builds it there, and `cargo test -p impnet-bench` alone
//! gets it built by [`imp_beside`].
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

#[path = "../../impnet/tests/common/require.rs"]
mod require;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const IMP_BENCH: &str = env!("CARGO_BIN_EXE_imp-bench");

/// The `imp` binary beside imp-bench (what imp-bench runs for W5-W10), built with
/// `cargo build -p impnet-cli` into the same directory and profile when it is not
/// there yet (`cargo test -p impnet-bench` builds only this package's binaries).
fn imp_beside() -> &'static Path {
    static IMP: OnceLock<PathBuf> = OnceLock::new();
    IMP.get_or_init(|| {
        let dir = Path::new(IMP_BENCH)
            .parent()
            .expect("imp-bench's directory");
        let imp = dir.join(format!("imp{}", std::env::consts::EXE_SUFFIX));
        if imp.is_file() {
            return imp;
        }
        // target/debug holds the dev and test profiles' binaries; `cargo test` built
        // this package with `test`, whose dependencies the build below reuses.
        let profile = match dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") | None => "test",
            Some(other) => other,
        };
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args([
                "build",
                "-p",
                "impnet-cli",
                "--bin",
                "imp",
                "--profile",
                profile,
            ])
            .env(
                "CARGO_TARGET_DIR",
                dir.parent().expect("the target directory"),
            )
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status();
        assert!(
            status.as_ref().is_ok_and(|s| s.success()) && imp.is_file(),
            "these tests need the imp binary at {} (imp-bench runs it): \
             `cargo build -p impnet-cli --profile {profile}` gave {status:?}",
            imp.display()
        );
        imp
    })
}

#[test]
fn bench_quick_json_has_every_workload() {
    imp_beside();
    let out = Command::new(IMP_BENCH)
        .args(["--quick", "--json"])
        .env("IMP_BENCH_TINY", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let row = |name: &str| {
        rows.iter()
            .find(|r| r["workload"] == name)
            .unwrap_or_else(|| panic!("no row {name} in {rows:#?}"))
    };
    for r in &rows {
        let keys: Vec<&String> = r.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 5, "{r}");
        for key in ["workload", "unit", "imp", "smoltcp", "linux"] {
            assert!(r.get(key).is_some(), "{key} missing in {r}");
        }
        assert!(r["unit"].is_string(), "{r}");
    }
    // W1-W3 and their IPv6 twins (imp and smoltcp over 2001:db8::/64, Linux over ::1).
    for name in [
        "W1a", "W1b", "W2", "W3", "W1a-v6", "W1b-v6", "W2-v6", "W3-v6",
    ] {
        let r = row(name);
        for side in ["imp", "smoltcp", "linux"] {
            let v = r[side]
                .as_f64()
                .unwrap_or_else(|| panic!("{name}.{side}: {r}"));
            assert!(v > 0.0, "{name}.{side}: {r}");
        }
    }
    assert_eq!(row("W1a")["unit"], "Gbit/s");
    assert!(row("W1a-cpu")["imp"].as_f64().unwrap() > 0.0);
    assert_eq!(
        row("W1a-alloc")["imp"].as_f64(),
        Some(0.0),
        "imp allocated per packet"
    );
    assert_eq!(
        row("W1b-alloc")["imp"].as_f64(),
        Some(0.0),
        "imp allocated per packet"
    );
    // W5 runs only as root with `ip` (else it is skipped, saying why on stderr);
    // IMP_REQUIRE_ROOT makes that skip a failure.
    let has_w5 = rows.iter().any(|r| r["workload"] == "W5-tx");
    if !has_w5 {
        skip_workload("W5", &["ip"], &out.stderr);
    }
    if has_w5 {
        for name in ["W5-tx", "W5-rx", "W5-tx-plain", "W5-rx-plain"] {
            let r = row(name);
            assert_eq!(r["unit"], "Gbit/s", "{r}");
            for side in ["imp", "smoltcp", "linux"] {
                assert!(
                    r[side].as_f64().is_some_and(|v| v > 0.0),
                    "{name}.{side}: {r}"
                );
            }
        }
    }
    // W6 runs only as root with `ip`, `wrk` and `nginx` (else it is skipped, saying why
    // on stderr); IMP_REQUIRE_ROOT makes that skip a failure.
    let has_w6 = rows.iter().any(|r| r["workload"] == "W6-1k-ka1");
    if !has_w6 {
        skip_workload("W6", &["wrk", "nginx"], &out.stderr);
    }
    if has_w6 {
        for cell in [
            "1k-ka1", "1k-ka50", "1k-close", "1m-ka1", "1m-ka50", "1m-close",
        ] {
            for (suffix, unit) in [("", "req/s"), ("-gbit", "Gbit/s"), ("-p99", "p99 ms")] {
                let r = row(&format!("W6-{cell}{suffix}"));
                assert_eq!(r["unit"], unit, "{r}");
                for side in ["imp", "linux"] {
                    assert!(r[side].as_f64().is_some_and(|v| v > 0.0), "{side}: {r}");
                }
            }
            let r = row(&format!("W6-{cell}-err"));
            assert_eq!(
                r["imp"].as_f64(),
                Some(0.0),
                "imp answered with errors: {r}"
            );
        }
    }
    // W7 in process runs everywhere: the router alone, end to end, with more routes,
    // and TCP through it, without allocating per packet.
    for name in [
        "W7-fwd-udp64",
        "W7-fwd-udp64-e2e",
        "W7-fwd-udp64-1k",
        "W7-fwd-tcp",
    ] {
        let r = row(name);
        assert!(r["imp"].as_f64().is_some_and(|v| v > 0.0), "{r}");
        assert!(r["smoltcp"].is_null(), "smoltcp does not forward: {r}");
    }
    assert_eq!(
        row("W7-fwd-tcp-alloc")["imp"].as_f64(),
        Some(0.0),
        "imp allocated per forwarded packet"
    );
    // W7 over devices runs only as root with `ip` and `iperf3` (else it is skipped,
    // saying why on stderr); IMP_REQUIRE_ROOT makes that skip a failure.
    let has_w7 = rows.iter().any(|r| r["workload"] == "W7-route-udp64");
    if !has_w7 {
        skip_workload("W7-route", &["iperf3"], &out.stderr);
    }
    if has_w7 {
        for (name, unit) in [
            ("W7-route-udp64", "kpps"),
            ("W7-route-udp64-tx", "kpps"),
            ("W7-route-tcp", "Gbit/s"),
        ] {
            let r = row(name);
            assert_eq!(r["unit"], unit, "{r}");
            for side in ["imp", "linux"] {
                assert!(r[side].as_f64().is_some_and(|v| v > 0.0), "{side}: {r}");
            }
            // The same rows with two shards of imp route.
            let r = row(&format!("{name}-2shards"));
            assert_eq!(r["unit"], unit, "{r}");
            assert!(r["imp"].as_f64().is_some_and(|v| v > 0.0), "{r}");
        }
    }
    assert!(row("W4-1")["imp"].as_f64().unwrap() > 0.0);
    assert!(row("W4-1-mem")["imp"].as_f64().unwrap() > 0.0);
    // W9, the ladder: every rung's throughput, CPU per GiB and speed-up over L1, imp
    // alone.
    let rungs = [
        "L1", "L2", "L3", "L4", "L5", "L6", "L7", "L8", "L9", "L8c", "L9c",
    ];
    for rung in rungs {
        for (suffix, unit) in [("", "Gbit/s"), ("-cpu", "CPU s/GiB"), ("-x", "x over L1")] {
            let r = row(&format!("W9-{rung}{suffix}"));
            assert_eq!(r["unit"], unit, "{r}");
            assert!(r["imp"].as_f64().is_some_and(|v| v > 0.0), "{r}");
            assert!(
                r["smoltcp"].is_null() && r["linux"].is_null(),
                "imp alone: {r}"
            );
        }
    }
    // Each speed-up is its rung's throughput over L1's, from the same run (one
    // repetition at tiny sizes, so the medians are the samples themselves): a base
    // taken from another rung, or a ratio turned over, fails here.
    let gbits = |rung: &str| row(&format!("W9-{rung}"))["imp"].as_f64().unwrap();
    for rung in rungs {
        let x = row(&format!("W9-{rung}-x"))["imp"].as_f64().unwrap();
        let expected = gbits(rung) / gbits("L1");
        assert!(
            (x - expected).abs() <= 1e-9 * expected,
            "W9-{rung}-x is {x}, W9-{rung} / W9-L1 is {expected}"
        );
    }
}

/// `imp-bench --only W2,W3`: the IPv6/IPv4 ratio table has each stack's ratio on the
/// rows of the IPv6 workloads, and no IPv4 workload there.
#[test]
fn bench_table_sets_each_stacks_ipv6_row_beside_its_ipv4_row() {
    let out = Command::new(IMP_BENCH)
        .args(["--quick", "--only", "W2,W3"])
        .env("IMP_BENCH_TINY", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let (_, ratios) = text
        .split_once("IPv6 / IPv4, each stack on its own rows:")
        .unwrap_or_else(|| panic!("no ratio table in {text}"));
    for name in ["W2-v6", "W3-v6"] {
        let line = ratios
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} ratio in {text}"));
        let cells: Vec<&str> = line.split_whitespace().skip(1).collect();
        assert_eq!(cells.len(), 3, "{line}");
        for cell in cells {
            let v: f64 = cell
                .trim_end_matches('x')
                .parse()
                .unwrap_or_else(|_| panic!("{line}"));
            assert!(v > 0.0, "{line}");
        }
    }
    assert!(!ratios.lines().any(|l| l.starts_with("W2 ")), "{text}");
}

/// `imp-bench --only W8` at tiny sizes, as root with iperf3: the table has a row per
/// cell with imp's and Linux's entry for each of the four congestion-control pairs (imp's
/// BBR v3 and BBRv1 both beside Linux's `bbr`),
/// every entry a goodput or `n/a [k]` with note k saying why; a geometric mean per
/// pair; the simulator rows for imp and ns-3; and the namespaces it made are gone.
#[test]
fn bench_w8_paths_table_has_every_cell() {
    if !require::can_run() || !require::have("iperf3") {
        return;
    }
    imp_beside();
    let child = Command::new(IMP_BENCH)
        .args(["--quick", "--only", "W8"])
        .env("IMP_BENCH_TINY", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(!stderr.contains("W8 skipped"), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    let header = lines
        .iter()
        .find(|l| l.contains("imp newreno"))
        .unwrap_or_else(|| panic!("no header in\n{stdout}"));
    for column in [
        "imp newreno",
        "linux reno",
        "imp cubic",
        "linux cubic",
        "imp bbr",
        "linux bbr",
        "imp bbr1",
    ] {
        assert!(header.contains(column), "{column} missing: {header}");
    }
    let notes: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with('['))
        .collect();
    // Every entry: a number, with the retransmissions in parentheses, or n/a [k] where
    // note k exists and says something.
    let check = |entry: &str| {
        let entry = entry.trim();
        if let Some(k) = entry.strip_prefix("n/a [") {
            let k = k.trim_end_matches(']');
            let note = notes
                .iter()
                .find(|n| n.starts_with(&format!("[{k}] ")))
                .unwrap_or_else(|| panic!("no note [{k}] in\n{stdout}"));
            assert!(note.len() > 5, "{note}");
        } else {
            let number = entry.split_whitespace().next().unwrap_or("");
            let value: f64 = number
                .parse()
                .unwrap_or_else(|_| panic!("`{entry}` is neither a number nor n/a:\n{stdout}"));
            assert!(value >= 0.0, "{entry}");
        }
    };
    let rows: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| {
            l.trim_start()
                .split("ms")
                .next()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .collect();
    assert!(!rows.is_empty(), "no cells in\n{stdout}");
    for row in &rows {
        let groups: Vec<&str> = row.split('|').skip(1).collect();
        assert_eq!(groups.len(), 4, "four pairs per cell: {row}");
        for group in groups {
            // " " and two right-aligned entries of 13 characters, one space between.
            assert!(group.len() >= 28, "{row}");
            let (imp, linux) = group[1..].split_at(13);
            check(imp);
            check(linux);
        }
    }
    for pair in [
        "imp newreno / linux reno",
        "imp cubic / linux cubic",
        "imp bbr / linux bbr",
        "imp bbr1 / linux bbr",
    ] {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&format!("geomean {pair}: "))),
            "no geometric mean for {pair}:\n{stdout}"
        );
    }
    for sim in ["imp ", "ns-3 "] {
        let line = lines
            .iter()
            .find(|l| l.starts_with(sim) && !l.contains('|'))
            .unwrap_or_else(|| panic!("no simulator row {sim}in\n{stdout}"));
        check(&line[6..21]);
    }
    // The namespaces the bench made (imp-bench-PID-N) are gone.
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let prefix = format!("imp-bench-{pid}-");
    assert!(
        !String::from_utf8_lossy(&list.stdout).contains(&prefix),
        "namespaces left behind: {}",
        String::from_utf8_lossy(&list.stdout)
    );
    println!("{stdout}");
}

/// W10 without `TUN2SOCKS_BIN` (CI has no tun2socks): the bench says what is missing,
/// and as root with curl, wrk and nginx still runs imp's half (no tun2socks figures).
#[test]
fn bench_w10_without_tun2socks_says_what_is_missing() {
    imp_beside();
    let out = Command::new(IMP_BENCH)
        .args(["--only", "W10", "--json"])
        .env("IMP_BENCH_TINY", "1")
        .env_remove("TUN2SOCKS_BIN")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    if rows.is_empty() {
        assert!(stderr.contains("W10 skipped: "), "{stderr}");
        // Skipped for want of root or a tool: said through the shared helpers (so a
        // failure under IMP_REQUIRE_ROOT); with all of them it should have run.
        if !require::can_run() || !require::have_all(&["curl", "wrk", "nginx"]) {
            return;
        }
        panic!("W10 skipped as root with curl, wrk and nginx: {stderr}");
    }
    assert!(
        stderr.contains("tun2socks column skipped: TUN2SOCKS_BIN is not set"),
        "{stderr}"
    );
    for name in [
        "W10-bulk",
        "W10-conn",
        "W10-bulk-soft",
        "W10-conn-soft",
        "W10-bulk-tso",
        "W10-conn-tso",
    ] {
        let row = rows
            .iter()
            .find(|r| r["workload"] == name)
            .unwrap_or_else(|| panic!("no row {name} in {rows:#?}"));
        let imp = row["imp"].as_f64().unwrap_or(0.0);
        assert!(imp > 0.0, "{name}: {row}\n{stderr}");
        assert!(row["tun2socks"].is_null(), "{name}: {row}");
    }
}

/// A workload of imp-bench's that did not run: skips (a failure under
/// `IMP_REQUIRE_ROOT`) with the reason the run's last line counts, not root or the
/// first of `tools` missing, and imp-bench's own words as the why; fails if it ran as
/// root with every one of `tools`.
#[track_caller]
fn skip_workload(workload: &str, tools: &[&str], stderr: &[u8]) {
    // SAFETY: geteuid has no preconditions.
    let reason = if unsafe { libc::geteuid() } != 0 {
        "not root".to_string()
    } else if let Some(tool) = tools.iter().find(|t| !require::found(t)) {
        format!("{tool} missing")
    } else {
        // Root with every tool: the workload not running is a failure, not a skip.
        panic!(
            "{workload} did not run as root with {tools:?} installed: {}",
            String::from_utf8_lossy(stderr)
        );
    };
    let said = String::from_utf8_lossy(stderr);
    require::skip_for(&reason, &format!("{workload} did not run: {said}"));
}
