//! `imp-bench --breakdown`: where imp's instructions go, layer by layer, set beside seed
//! 000's table (Berkeley's VAX TCP/IP of 1981: Ethernet 20%, IP 10%, TCP 30%,
//! checksum 25%, user system call handling 15% of the time in the system).
//!
//! The imp side of W1a (bulk, MTU 1500, software checksums) and of W2 (1-byte
//! ping-pong) runs a fixed amount of work in a child `imp-bench` (the hidden
//! `--breakdown-child`) on a virtual clock, so the work is the same every run,
//! twice under valgrind: callgrind counts the instructions of the measured loop
//! (`--toggle-collect` on `measured_*`; set-up and warm-up are not counted) and
//! `callgrind.rs` reads each function's own cost by source file; `layers.rs` maps them
//! to layers by module path. DHAT's copy mode counts the bytes memcpy/memmove moved
//! under the measured loop: bytes copied per payload byte. Beside that, this
//! machine's one-core memcpy and checksum rates (measured here, in process) and what
//! fraction of each imp's W1a reaches.

pub(crate) mod callgrind;
mod layers;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant as StdInstant};

use serde::Serialize;

use super::imp_side::{self, Clock};
use super::smol;
use super::workload::{Bulk, Churn, PingPong, bulk};
use super::{Sizes, median, pattern};
pub use layers::Layer;

/// Seed 000's shares (per cent of the time in the system), on the rows they match.
const SEED_000: [(Layer, &str, f64); 5] = [
    (Layer::Ethernet, "Ethernet", 20.0),
    (Layer::Ipv4, "IP", 10.0),
    (Layer::TcpInput, "TCP (both ways)", 30.0),
    (Layer::Checksum, "checksumming", 25.0),
    (Layer::SocketCalls, "user system call handling", 15.0),
];

/// Virtual time per pump: a W1a pump moves about a window (256 KiB, ~200 us at
/// 10 Gbit/s); a W2 pump one message.
const BULK_TICK_NS: u64 = 20_000;
const PING_TICK_NS: u64 = 10_000;

/// The workloads broken down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    W1a,
    W2,
    /// W1a over IPv6 (only as a child, for callgrind run by hand).
    W1aV6,
    /// W2 over IPv6 (only as a child).
    W2V6,
    /// W1b (MTU 65535, checksum offload) and W3 (connection churn), over IPv4 and
    /// IPv6 (only as children: the IPv6/IPv4 instruction ratios).
    W1b,
    W1bV6,
    W3,
    W3V6,
    /// W4's round trips among 100 and among 100,000 idle connections (only as children:
    /// the performance budget, `budget.rs`).
    W4x100,
    W4x100k,
    /// The simulator on a 10-pair dumbbell (only as a child: the budget's instructions
    /// per simulated segment).
    SimDumbbell,
    /// smoltcp on W1a, W2 and W3, on the same virtual clock (only as children: the
    /// budget's reference figures).
    SmolW1a,
    SmolW2,
    SmolW3,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::W1a => "W1a",
            Workload::W2 => "W2",
            Workload::W1aV6 => "W1a-v6",
            Workload::W2V6 => "W2-v6",
            Workload::W1b => "W1b",
            Workload::W1bV6 => "W1b-v6",
            Workload::W3 => "W3",
            Workload::W3V6 => "W3-v6",
            Workload::W4x100 => "W4-100",
            Workload::W4x100k => "W4-100k",
            Workload::SimDumbbell => "sim-dumbbell",
            Workload::SmolW1a => "smoltcp-W1a",
            Workload::SmolW2 => "smoltcp-W2",
            Workload::SmolW3 => "smoltcp-W3",
        }
    }

    /// Parse a `--breakdown-child` argument.
    pub fn parse(name: &str) -> Result<Workload, String> {
        match name {
            "W1a" => Ok(Workload::W1a),
            "W2" => Ok(Workload::W2),
            "W1a-v6" => Ok(Workload::W1aV6),
            "W2-v6" => Ok(Workload::W2V6),
            "W1b" => Ok(Workload::W1b),
            "W1b-v6" => Ok(Workload::W1bV6),
            "W3" => Ok(Workload::W3),
            "W3-v6" => Ok(Workload::W3V6),
            "W4-100" => Ok(Workload::W4x100),
            "W4-100k" => Ok(Workload::W4x100k),
            "sim-dumbbell" => Ok(Workload::SimDumbbell),
            "smoltcp-W1a" => Ok(Workload::SmolW1a),
            "smoltcp-W2" => Ok(Workload::SmolW2),
            "smoltcp-W3" => Ok(Workload::SmolW3),
            other => Err(format!(
                "--breakdown-child `{other}`: give W1a, W1b, W2 or W3, or one of them \
                 with -v6, or W4-100, W4-100k, sim-dumbbell, smoltcp-W1a, smoltcp-W2 or \
                 smoltcp-W3"
            )),
        }
    }
}

/// One layer's share.
#[derive(Debug, Clone, Serialize)]
pub struct Share {
    pub layer: &'static str,
    pub instructions: u64,
    pub percent: f64,
}

/// A function's own instructions (the largest few are listed).
#[derive(Debug, Clone, Serialize)]
pub struct Hot {
    pub layer: &'static str,
    pub function: String,
    pub file: String,
    pub instructions: u64,
}

/// One workload's breakdown.
#[derive(Debug, Clone, Serialize)]
pub struct Breakdown {
    pub workload: &'static str,
    /// Instructions of the measured loop.
    pub instructions: u64,
    /// Payload bytes delivered in it (both directions for W2).
    pub payload_bytes: u64,
    pub instructions_per_payload_byte: f64,
    /// Bytes memcpy/memmove moved in it per payload byte (DHAT's copy mode).
    pub copied_bytes_per_payload_byte: f64,
    pub layers: Vec<Share>,
    pub hottest: Vec<Hot>,
}

/// The machine's rates and imp's fraction of them.
#[derive(Debug, Clone, Serialize)]
pub struct Rates {
    /// One core, 1448-byte pieces through a 256 KiB buffer, Gbit/s.
    pub memcpy_gbit_s: f64,
    pub checksum_gbit_s: f64,
    /// imp's W1a, median Gbit/s (timed, not under valgrind).
    pub w1a_gbit_s: f64,
    pub w1a_of_memcpy: f64,
    pub w1a_of_checksum: f64,
}

/// Seed 000's row, for the JSON.
#[derive(Debug, Clone, Serialize)]
struct SeedRow {
    layer: &'static str,
    seed_label: &'static str,
    percent: f64,
}

#[derive(Serialize)]
struct Report<'a> {
    breakdown: &'a [Breakdown],
    seed_000: Vec<SeedRow>,
    rates: &'a Rates,
}

/// The amounts of work under valgrind: (W1a payload bytes, W2 round trips).
fn amounts(sizes: &Sizes) -> (u64, u64) {
    ((sizes.bulk / 16).max(1 << 20), (sizes.rounds / 5).max(200))
}

/// `imp-bench --breakdown [--json]`.
pub fn run(sizes: &Sizes, json: bool) -> Result<(), String> {
    check_valgrind()?;
    let rates = rates(sizes);
    let (bytes, rounds) = amounts(sizes);
    let dir = scratch_dir()?;
    let result = (|| {
        Ok::<_, String>(vec![
            profile(Workload::W1a, bytes, &dir)?,
            profile(Workload::W2, rounds, &dir)?,
        ])
    })();
    let _ = std::fs::remove_dir_all(&dir);
    let breakdowns = result?;
    if json {
        let report = Report {
            breakdown: &breakdowns,
            seed_000: SEED_000
                .iter()
                .map(|&(layer, seed_label, percent)| SeedRow {
                    layer: layer.label(),
                    seed_label,
                    percent,
                })
                .collect(),
            rates: &rates,
        };
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        println!("{text}");
    } else {
        print(&breakdowns, &rates);
    }
    Ok(())
}

/// A clear error when valgrind cannot be run.
pub(crate) fn check_valgrind() -> Result<(), String> {
    match Command::new("valgrind").arg("--version").output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "--breakdown: `valgrind --version` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Err(format!(
            "--breakdown needs valgrind (callgrind and DHAT) on the PATH: {e} \
             (Debian/Ubuntu: apt-get install valgrind)"
        )),
    }
}

pub(crate) fn scratch_dir() -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("imp-breakdown-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("--breakdown: {}: {e}", dir.display()))?;
    Ok(dir)
}

/// Run `imp-bench --breakdown-child` under valgrind with `tool_args`; returns the
/// payload bytes the child reports.
fn under_valgrind(workload: Workload, amount: u64, tool_args: &[String]) -> Result<u64, String> {
    let stdout = child_under_valgrind(workload, amount, tool_args)?;
    child_count(&stdout, "payload")
}

/// Run `imp-bench --breakdown-child` under valgrind with `tool_args`; returns what the
/// child printed.
pub(crate) fn child_under_valgrind(
    workload: Workload,
    amount: u64,
    tool_args: &[String],
) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("own executable: {e}"))?;
    let out = Command::new("valgrind")
        .args(tool_args)
        .arg(&exe)
        .args(["--breakdown-child", workload.name()])
        .args(["--breakdown-amount", &amount.to_string()])
        .output()
        .map_err(|e| format!("running valgrind: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        return Err(format!(
            "valgrind {} on {} failed ({}): {}",
            tool_args[0],
            workload.name(),
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The `LABEL N` line of a child's output.
pub(crate) fn child_count(stdout: &str, label: &str) -> Result<u64, String> {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(label)?.trim().parse().ok())
        .ok_or_else(|| format!("the child printed no {label} count: {stdout}"))
}

/// The instructions callgrind counted in the measured loop of `workload` (`amount` of
/// work), and what the child printed.
pub(crate) fn measured_instructions(
    workload: Workload,
    amount: u64,
    dir: &Path,
) -> Result<(u64, String), String> {
    let (text, stdout) = measured_callgrind(workload, amount, dir, false)?;
    Ok((callgrind::parse(&text)?.sum(), stdout))
}

/// The text of callgrind's output for the measured loop of `workload` (`amount` of
/// work), with a cost for every instruction (`--dump-instr=yes`) when `per_instruction`,
/// and what the child printed.
pub(crate) fn measured_callgrind(
    workload: Workload,
    amount: u64,
    dir: &Path,
    per_instruction: bool,
) -> Result<(String, String), String> {
    let which = if per_instruction { "instr." } else { "" };
    let cg = dir.join(format!("callgrind.{which}{}", workload.name()));
    let mut args = vec![
        "--tool=callgrind".into(),
        format!("--callgrind-out-file={}", cg.display()),
        "--toggle-collect=*breakdown::measured_*".into(),
    ];
    if per_instruction {
        args.push("--dump-instr=yes".into());
    }
    let stdout = child_under_valgrind(workload, amount, &args)?;
    Ok((read(&cg)?, stdout))
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("--breakdown: {}: {e}", path.display()))
}

/// Callgrind and DHAT on one workload.
fn profile(workload: Workload, amount: u64, dir: &Path) -> Result<Breakdown, String> {
    let cg = dir.join(format!("callgrind.{}", workload.name()));
    let stdout = child_under_valgrind(
        workload,
        amount,
        &[
            "--tool=callgrind".into(),
            format!("--callgrind-out-file={}", cg.display()),
            "--toggle-collect=*breakdown::measured_*".into(),
        ],
    )
    .map_err(|e| format!("--breakdown: {e}"))?;
    let payload = child_count(&stdout, "payload").map_err(|e| format!("--breakdown: {e}"))?;
    let profile = callgrind::parse(&read(&cg)?)?;
    if let Some(total) = profile.total
        && total != profile.sum()
    {
        return Err(format!(
            "--breakdown: callgrind output for {}: the functions' own costs add up to {}, \
             its total is {total}",
            workload.name(),
            profile.sum()
        ));
    }
    let dh = dir.join(format!("dhat.{}.json", workload.name()));
    let copy_payload = under_valgrind(
        workload,
        amount,
        &[
            "--tool=dhat".into(),
            "--mode=copy".into(),
            format!("--dhat-out-file={}", dh.display()),
        ],
    )
    .map_err(|e| format!("--breakdown: {e}"))?;
    let copied = copied_bytes(&read(&dh)?)?;
    Ok(summarise(
        workload,
        &profile,
        payload,
        copied as f64 / copy_payload.max(1) as f64,
    ))
}

/// Bytes memcpy/memmove moved under the measured loop, from DHAT's copy-mode JSON.
fn copied_bytes(text: &str) -> Result<u64, String> {
    let bad = |what: &str| format!("--breakdown: DHAT output: {what}");
    let json: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(&e.to_string()))?;
    if json["mode"] != "copy" {
        return Err(bad("not copy mode"));
    }
    let frames = json["ftbl"].as_array().ok_or_else(|| bad("no ftbl"))?;
    let measured: Vec<bool> = frames
        .iter()
        .map(|f| {
            f.as_str()
                .is_some_and(|s| s.contains("breakdown::measured_"))
        })
        .collect();
    let pps = json["pps"].as_array().ok_or_else(|| bad("no pps"))?;
    let mut total = 0;
    for pp in pps {
        let under = pp["fs"].as_array().is_some_and(|fs| {
            fs.iter().any(|i| {
                i.as_u64()
                    .and_then(|i| measured.get(i as usize).copied())
                    .unwrap_or(false)
            })
        });
        if under {
            total += pp["tb"].as_u64().ok_or_else(|| bad("a point without tb"))?;
        }
    }
    Ok(total)
}

/// Layers, shares and the hottest functions of a parsed profile.
fn summarise(
    workload: Workload,
    profile: &callgrind::Profile,
    payload: u64,
    copies_per_byte: f64,
) -> Breakdown {
    let total = profile.sum();
    let mut by_layer: BTreeMap<Layer, u64> = BTreeMap::new();
    let mut hottest = Vec::new();
    for cost in &profile.costs {
        let layer = layers::classify(&cost.file, &cost.function);
        *by_layer.entry(layer).or_default() += cost.instructions;
        if hottest.len() < 12 {
            hottest.push(Hot {
                layer: layer.label(),
                function: cost.function.clone(),
                file: cost.file.rsplit('/').next().unwrap_or("").to_string(),
                instructions: cost.instructions,
            });
        }
    }
    let percent = |n: u64| 100.0 * n as f64 / total.max(1) as f64;
    let layers = Layer::ALL
        .iter()
        .map(|&layer| {
            let instructions = by_layer.get(&layer).copied().unwrap_or(0);
            Share {
                layer: layer.label(),
                instructions,
                percent: percent(instructions),
            }
        })
        .collect();
    Breakdown {
        workload: workload.name(),
        instructions: total,
        payload_bytes: payload,
        instructions_per_payload_byte: total as f64 / payload.max(1) as f64,
        copied_bytes_per_payload_byte: copies_per_byte,
        layers,
        hottest,
    }
}

/// The hidden `imp-bench --breakdown-child W --breakdown-amount N`: set up, warm up,
/// then the measured loop. Prints `payload N`, the payload bytes the loop delivered
/// (for W3, N connections: 2 payload bytes each), and `units N`, the work done in the
/// unit the budget counts per: payload bytes (W1), round trips (W2), connections (W3),
/// packets (W4: two per round trip), segments sent by the hosts (the simulator).
pub fn child(workload: Workload, amount: u64) -> Result<(), String> {
    let (payload, units) = match workload {
        Workload::W1a => same(child_bulk::<false>(1500, false, amount)),
        Workload::W2 => (child_ping_pong::<false>(amount), amount),
        Workload::W1aV6 => same(child_bulk::<true>(1500, false, amount)),
        Workload::W2V6 => (child_ping_pong::<true>(amount), amount),
        Workload::W1b => same(child_bulk::<false>(65535, true, amount)),
        Workload::W1bV6 => same(child_bulk::<true>(65535, true, amount)),
        Workload::W3 => (child_churn::<false>(amount), amount),
        Workload::W3V6 => (child_churn::<true>(amount), amount),
        Workload::W4x100 => (child_scale(100, amount), 2 * amount),
        Workload::W4x100k => (child_scale(100_000, amount), 2 * amount),
        Workload::SimDumbbell => child_sim(amount)?,
        Workload::SmolW1a => {
            smol::use_virtual_clock(BULK_TICK_NS as i64 / 1000);
            same(warm_and_measure_bulk(
                smol::Bulk::<false>::open(1500, false),
                amount,
            ))
        }
        Workload::SmolW2 => {
            smol::use_virtual_clock(PING_TICK_NS as i64 / 1000);
            let mut connection = smol::PingPong::<false>::open();
            for _ in 0..100 {
                connection.round_trip();
            }
            measured_ping_pong(&mut connection, amount);
            (2 * amount, amount)
        }
        Workload::SmolW3 => {
            smol::use_virtual_clock(PING_TICK_NS as i64 / 1000);
            let mut churn = smol::Churn::<false>::open();
            for _ in 0..100 {
                churn.connection();
            }
            measured_churn(&mut churn, amount);
            (2 * amount, amount)
        }
    };
    println!("payload {payload}");
    println!("units {units}");
    Ok(())
}

fn same(bytes: u64) -> (u64, u64) {
    (bytes, bytes)
}

/// W4's child: `amount` round trips among `connections` idle ones (two payload bytes
/// each).
fn child_scale(connections: usize, amount: u64) -> u64 {
    let mut scale = imp_side::Scale::open_with(connections, Clock::Virtual(PING_TICK_NS));
    scale.warm();
    measured_scale(&mut scale, amount);
    2 * amount
}

/// The simulator's child: 10 bulk NewReno flows through a 100 Mbit/s, 20 ms dumbbell
/// (`ns3/compare.sh`'s) for `millis` virtual milliseconds. Returns (payload bytes
/// delivered, segments the hosts sent).
fn child_sim(millis: u64) -> Result<(u64, u64), String> {
    let text = format!(
        "name = \"budget-dumbbell\"\nduration = \"{millis}ms\"\nseed = 1\n\
         [dumbbell]\npairs = 10\naccess = {{ rate = \"1gbit\", delay = \"1ms\" }}\n\
         bottleneck = {{ rate = \"100mbit\", delay = \"20ms\", queue = \"500K\" }}\n\
         flow = {{ type = \"bulk\", bytes = \"1G\", record = \"64K\" }}\n\
         tcp = {{ send_buffer = \"2M\", recv_buffer = \"4M\" }}\n"
    );
    let scenario = impnet_sim::scenario::Scenario::parse(&text, "budget-dumbbell")
        .map_err(|e| e.to_string())?;
    let report = measured_sim(&scenario)?;
    let payload = report.flows.iter().map(|f| f.bytes).sum();
    let segments = report.hosts.iter().map(|h| h.segments_out).sum();
    Ok((payload, segments))
}

/// The simulator's measured run.
#[inline(never)]
fn measured_sim(
    scenario: &impnet_sim::scenario::Scenario,
) -> Result<impnet_sim::experiment::Report, String> {
    impnet_sim::experiment::run(scenario, None, &mut |_| {})
        .map(|outcome| outcome.report)
        .map_err(|e| e.to_string())
}

/// W4's measured loop.
#[inline(never)]
fn measured_scale(scale: &mut imp_side::Scale, rounds: u64) {
    for _ in 0..rounds {
        scale.round_trip();
    }
}

/// W1a's (or with MTU 65535 and offload, W1b's) child, over IPv6 when `V6`: payload
/// bytes delivered by the measured loop.
fn child_bulk<const V6: bool>(mtu: usize, offload: bool, amount: u64) -> u64 {
    let flow = imp_side::Bulk::<V6>::open_with(mtu, offload, Clock::Virtual(BULK_TICK_NS));
    warm_and_measure_bulk(flow, amount)
}

/// A bulk child's warm-up (the window opens and the rings grow to their size), then its
/// measured loop: payload bytes delivered by the latter.
fn warm_and_measure_bulk(mut flow: impl Bulk, amount: u64) -> u64 {
    let warm = (amount / 8).max(256 << 10);
    let mut received = 0;
    while received < warm {
        received = flow.step(warm);
    }
    measured_bulk(&mut flow, received + amount) - received
}

/// W2's child (over IPv6 when `V6`): payload bytes of the measured round trips.
fn child_ping_pong<const V6: bool>(amount: u64) -> u64 {
    let mut connection = imp_side::PingPong::<V6>::open_with(Clock::Virtual(PING_TICK_NS));
    for _ in 0..100 {
        connection.round_trip();
    }
    measured_ping_pong(&mut connection, amount);
    2 * amount
}

/// W3's child (over IPv6 when `V6`): `amount` connections opened, used and closed.
fn child_churn<const V6: bool>(amount: u64) -> u64 {
    let mut churn = imp_side::Churn::<V6>::open_with(Clock::Virtual(PING_TICK_NS));
    for _ in 0..100 {
        churn.connection();
    }
    measured_churn(&mut churn, amount);
    2 * amount
}

/// W3's measured loop.
#[inline(never)]
fn measured_churn(churn: &mut impl Churn, connections: u64) {
    for _ in 0..connections {
        churn.connection();
    }
}

/// W1a's measured loop (callgrind collects only inside `measured_*`).
#[inline(never)]
fn measured_bulk(flow: &mut impl Bulk, limit: u64) -> u64 {
    let mut received = 0;
    while received < limit {
        received = flow.step(limit);
    }
    received
}

/// W2's measured loop.
#[inline(never)]
fn measured_ping_pong(connection: &mut impl PingPong, rounds: u64) {
    for _ in 0..rounds {
        connection.round_trip();
    }
}

/// Gbit/s of `op` over 1448-byte pieces (a full segment's payload with timestamps) of
/// a 256 KiB buffer: the median of five 50 ms runs.
fn rate(mut op: impl FnMut(&mut [u8], &[u8])) -> f64 {
    const PIECE: usize = 1448;
    let src = pattern(256 << 10);
    let mut dst = vec![0u8; src.len()];
    let mut runs: Vec<f64> = (0..5)
        .map(|_| {
            let start = StdInstant::now();
            let mut bytes = 0u64;
            while start.elapsed() < Duration::from_millis(50) {
                for (d, s) in dst.chunks_mut(PIECE).zip(src.chunks(PIECE)) {
                    op(std::hint::black_box(d), std::hint::black_box(s));
                }
                bytes += src.len() as u64;
            }
            bytes as f64 * 8.0 / start.elapsed().as_secs_f64() / 1e9
        })
        .collect();
    median(&mut runs).unwrap_or(0.0)
}

/// This machine's memcpy and checksum rates, and imp's W1a against them.
fn rates(sizes: &Sizes) -> Rates {
    let memcpy = rate(|d, s| d.copy_from_slice(s));
    let checksum = rate(|_, s| {
        std::hint::black_box(impnet_wire::checksum::data(s));
    });
    let mut w1a: Vec<f64> = (0..sizes.repeats)
        .filter_map(|_| {
            bulk::<imp_side::Bulk>("W1a", 1500, false, sizes.bulk)
                .into_iter()
                .find(|s| s.unit == "Gbit/s")
                .map(|s| s.value)
        })
        .collect();
    let w1a = median(&mut w1a).unwrap_or(0.0);
    Rates {
        memcpy_gbit_s: memcpy,
        checksum_gbit_s: checksum,
        w1a_gbit_s: w1a,
        w1a_of_memcpy: w1a / memcpy,
        w1a_of_checksum: w1a / checksum,
    }
}

fn print(breakdowns: &[Breakdown], rates: &Rates) {
    println!(
        "where imp's instructions go (callgrind, the measured loop only), beside seed 000 \
         (VAX-11/750, 4.1BSD TCP/IP, 1981: share of the time in the system)"
    );
    print!("{:<26}", "layer");
    for b in breakdowns {
        print!(" {:>9}", b.workload);
    }
    println!("   seed 000");
    for layer in Layer::ALL {
        print!("{:<26}", layer.label());
        for b in breakdowns {
            let share = b.layers.iter().find(|s| s.layer == layer.label());
            print!(" {:>8.1}%", share.map_or(0.0, |s| s.percent));
        }
        match SEED_000.iter().find(|(l, ..)| *l == layer) {
            Some((Layer::TcpInput, ..)) => println!("   (TCP: see below)"),
            Some((_, label, p)) => println!("   {p:>3.0}% {label}"),
            None => println!(),
        }
    }
    print!("{:<26}", "  TCP input + output");
    for b in breakdowns {
        let tcp: f64 = b
            .layers
            .iter()
            .filter(|s| s.layer == Layer::TcpInput.label() || s.layer == Layer::TcpOutput.label())
            .map(|s| s.percent)
            .sum();
        print!(" {tcp:>8.1}%");
    }
    println!("   {:>3.0}% TCP processing", 30.0);
    print_totals(breakdowns);
    println!(
        "this machine, one core (1448-byte pieces, 256 KiB buffer): memcpy {:.1} Gbit/s, \
         checksum {:.1} Gbit/s",
        rates.memcpy_gbit_s, rates.checksum_gbit_s
    );
    println!(
        "imp W1a (median, timed): {:.2} Gbit/s = {:.1}% of the memcpy rate, {:.1}% of the \
         checksum rate",
        rates.w1a_gbit_s,
        100.0 * rates.w1a_of_memcpy,
        100.0 * rates.w1a_of_checksum
    );
    for b in breakdowns {
        println!(
            "{}: the hottest functions (own instructions, by source file)",
            b.workload
        );
        for h in b.hottest.iter().take(8) {
            println!(
                "  {:>5.1}%  {:<24} {}  [{}]",
                100.0 * h.instructions as f64 / b.instructions.max(1) as f64,
                h.layer,
                h.function,
                h.file
            );
        }
    }
}

fn print_totals(breakdowns: &[Breakdown]) {
    let row = |label: &str, cell: &dyn Fn(&Breakdown) -> String| {
        print!("{label:<26}");
        for b in breakdowns {
            print!(" {:>9}", cell(b));
        }
        println!();
    };
    row("instructions (measured)", &|b| {
        format!("{:.3e}", b.instructions as f64)
    });
    row("payload bytes", &|b| b.payload_bytes.to_string());
    row("instructions/payload byte", &|b| {
        format!("{:.2}", b.instructions_per_payload_byte)
    });
    row("bytes copied/payload byte", &|b| {
        format!("{:.2}", b.copied_bytes_per_payload_byte)
    });
}
