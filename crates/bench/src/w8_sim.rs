//! W8's simulator row: `imp ttcp` (imp's simulator, its defaults: 100 Mbit/s, 20 ms
//! round trip, no loss, a 500 KB drop-tail queue, NewReno) next to an ns-3 program
//! simulating the same transfer (`ns3/ttcp.cc`, built with g++ against Debian's
//! libns3-dev and cached in the temporary directory): simulated goodput and wall time
//! of each.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant as StdInstant;

use serde::Serialize;

use super::w6::imp_binary;

/// The ns-3 program.
const TTCP_CC: &str = include_str!("ns3/ttcp.cc");
/// The ns-3 libraries it links.
const NS3_LIBS: [&str; 6] = [
    "-lns3-point-to-point",
    "-lns3-applications",
    "-lns3-internet",
    "-lns3-traffic-control",
    "-lns3-network",
    "-lns3-core",
];

/// One simulator's run of the transfer.
#[derive(Debug, Clone, Serialize)]
pub(super) struct SimRun {
    /// Goodput of the simulated transfer, Mbit/s.
    pub goodput_mbps: Option<f64>,
    /// Simulated seconds of the transfer.
    pub sim_seconds: Option<f64>,
    /// Wall seconds the simulator took.
    pub wall_seconds: Option<f64>,
    /// Why there are no numbers.
    pub reason: Option<String>,
}

impl SimRun {
    fn failed(reason: String) -> SimRun {
        SimRun {
            goodput_mbps: None,
            sim_seconds: None,
            wall_seconds: None,
            reason: Some(reason),
        }
    }
}

/// imp's simulator and ns-3 on the same transfer.
#[derive(Debug, Clone, Serialize)]
pub(super) struct SimReport {
    /// Bytes transferred.
    pub bytes: u64,
    pub imp: SimRun,
    pub ns3: SimRun,
}

/// Run both simulators on a transfer of `bytes`.
pub(super) fn compare(bytes: u64) -> SimReport {
    SimReport {
        bytes,
        imp: imp(bytes).unwrap_or_else(SimRun::failed),
        ns3: ns3(bytes).unwrap_or_else(SimRun::failed),
    }
}

/// `imp ttcp --json --bytes N` with every other setting at its default.
fn imp(bytes: u64) -> Result<SimRun, String> {
    let binary = imp_binary()?;
    let started = StdInstant::now();
    let out = Command::new(&binary)
        .args(["ttcp", "--json", "--bytes", &bytes.to_string()])
        .output()
        .map_err(|e| format!("cannot run imp ttcp: {e}"))?;
    let wall = started.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(format!(
            "imp ttcp: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("imp ttcp's report: {e}"))?;
    Ok(SimRun {
        goodput_mbps: report["goodput_bps"].as_f64().map(|b| b / 1e6),
        sim_seconds: report["seconds"].as_f64(),
        wall_seconds: Some(wall),
        reason: None,
    })
}

/// The ns-3 program's run; its wall time is the process's (start-up included, as for
/// imp).
fn ns3(bytes: u64) -> Result<SimRun, String> {
    let program = ns3_program()?;
    let started = StdInstant::now();
    let out = Command::new(&program)
        .arg(format!("--bytes={bytes}"))
        .output()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    let wall = started.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(format!(
            "ns-3 ttcp failed: {}{}",
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("ns-3 ttcp's report: {e}"))?;
    let sim = report["sim_s"].as_f64().filter(|&s| s > 0.0);
    let got = report["bytes"].as_f64();
    Ok(SimRun {
        goodput_mbps: sim.zip(got).map(|(s, b)| b * 8.0 / s / 1e6),
        sim_seconds: sim,
        wall_seconds: Some(wall),
        reason: None,
    })
}

/// The built ns-3 program: compiled once per version of its source, kept in the
/// temporary directory.
fn ns3_program() -> Result<PathBuf, String> {
    let mut hasher = DefaultHasher::new();
    TTCP_CC.hash(&mut hasher);
    let dir = std::env::temp_dir().join(format!("imp-bench-ns3-{:016x}", hasher.finish()));
    let program = dir.join("ttcp");
    if program.exists() {
        return Ok(program);
    }
    if !super::w6::installed("g++") {
        return Err("ns-3 skipped: no g++ (apt-get install -y g++)".into());
    }
    if !std::path::Path::new("/usr/include/ns3/point-to-point-module.h").exists() {
        return Err("ns-3 skipped: no ns-3 headers (apt-get install -y libns3-dev)".into());
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let source = dir.join("ttcp.cc");
    std::fs::write(&source, TTCP_CC).map_err(|e| format!("{}: {e}", source.display()))?;
    // Built under another name and renamed, so a concurrent bench never runs half a file.
    let partial = dir.join(format!("ttcp.{}", std::process::id()));
    let out = Command::new("g++")
        .args(["-O2", "-std=c++17"])
        .arg(&source)
        .arg("-o")
        .arg(&partial)
        .args(NS3_LIBS)
        .output()
        .map_err(|e| format!("g++: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ns-3 skipped: the build failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    std::fs::rename(&partial, &program).map_err(|e| format!("{}: {e}", program.display()))?;
    Ok(program)
}
