//! `imp ttcp`: a ttcp-style bulk transfer between two simulated hosts, measured; with
//! `--tap`, a real transfer between imp and a peer over a TAP device (`--connect`
//! sends `--bytes` to a sink such as `nc -l`, `--listen` receives and counts).

use std::path::PathBuf;

use clap::Args;
use impnet_core::Duration;
use impnet_core::tcp::cc::CcAlgorithm;
use impnet_phy::LinkConfig;
use impnet_sim::bulk::{BulkConfig, BulkResult, run_bulk};
use serde::Serialize;

use crate::tapargs::TapArgs;
use crate::units;

/// Options of `imp ttcp`.
#[derive(Debug, Args)]
pub struct TtcpArgs {
    /// Bytes to transfer (k/M/G suffixes are binary: 100M = 100 MiB).
    #[arg(long, default_value = "100M", value_parser = units::parse_bytes)]
    pub bytes: u64,
    /// Bytes per application write.
    #[arg(long, default_value = "8K", value_parser = units::parse_bytes)]
    pub record: u64,
    /// Link rate, each direction.
    #[arg(long, default_value = "100mbit", value_parser = units::parse_rate)]
    pub rate: u64,
    /// Round-trip propagation delay (half each way).
    #[arg(long, default_value = "20ms", value_parser = units::parse_duration)]
    pub rtt: Duration,
    /// Probability that the link loses a frame, each direction (e.g. 1%).
    #[arg(long, default_value = "0", value_parser = units::parse_probability)]
    pub loss: f64,
    /// IP MTU of the link.
    #[arg(long, default_value_t = 1500)]
    pub mtu: usize,
    /// Bytes the link may queue before it drops (default: twice the bandwidth-delay product, at least 64K).
    #[arg(long, value_parser = units::parse_bytes)]
    pub queue: Option<u64>,
    /// TCP send buffer of the sender.
    #[arg(long, default_value = "4M", value_parser = units::parse_bytes)]
    pub sndbuf: u64,
    /// TCP receive buffer of the receiver.
    #[arg(long, default_value = "4M", value_parser = units::parse_bytes)]
    pub rcvbuf: u64,
    /// Congestion control of the sender.
    #[arg(long, default_value = "newreno")]
    pub cc: String,
    /// Pace the sender's data (on/off; default: on for bbr, off for the others).
    #[arg(long, value_parser = parse_on_off)]
    pub pacing: Option<bool>,
    /// Seed of the simulation: the same seed gives the same run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write every frame on the link to this pcap file.
    #[arg(long)]
    pub pcap: Option<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// With --tap: connect to HOST:PORT and send --bytes to it.
    #[arg(long, value_name = "HOST:PORT")]
    pub connect: Option<String>,
    /// With --tap: accept one connection on PORT and count what arrives until it closes.
    #[arg(long, value_name = "PORT")]
    pub listen: Option<u16>,
    /// With --tap: give up when connecting, or when the peer accepts or sends nothing
    /// for this long.
    #[arg(long, default_value = "10s", value_parser = units::parse_duration)]
    pub timeout: Duration,
    /// With --tap --connect: send for this long instead of --bytes, then report and
    /// reset the connection (a time-bounded run, as `iperf3 -t`; the receiver counts
    /// what arrived).
    #[arg(long, value_name = "DURATION", value_parser = units::parse_duration)]
    pub time: Option<Duration>,
    /// With --tap: TCP Fast Open (RFC 7413). With --listen, the listener takes data on
    /// SYNs that carry its cookie; with --connect, the first record goes with the SYN
    /// (a new stack holds no cookie yet, so that SYN asks for one and the record
    /// follows the handshake).
    #[arg(long)]
    pub fastopen: bool,
    #[command(flatten)]
    pub device: TapArgs,
}

/// `--json` output.
#[derive(Debug, Serialize)]
struct Report {
    bytes: u64,
    seconds: f64,
    goodput_bps: f64,
    steady_goodput_bps: f64,
    capacity_pct: f64,
    retransmits: u64,
    hash_ok: bool,
    rate_bps: u64,
    rtt_ms: f64,
    loss: f64,
    mtu: usize,
    cc: String,
    seed: u64,
    trace_hash: String,
}

/// `on` or `off`.
fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("`{s}`: expected on or off")),
    }
}

/// The largest `--record`: one application write (a buffer of this size is allocated).
const MAX_RECORD: u64 = 64 << 20;

/// Check the arguments of a transfer on the simulated network (no `--tap`; the
/// transfers over a device are `ttcp_tap`'s) before anything runs (no I/O, no
/// simulation): every error names the option.
pub fn validate(args: &TtcpArgs) -> Result<(), String> {
    args.device.validate()?;
    let mut given = Vec::new();
    if args.connect.is_some() {
        given.push("--connect");
    }
    if args.listen.is_some() {
        given.push("--listen");
    }
    if args.time.is_some() {
        given.push("--time");
    }
    if args.fastopen {
        given.push("--fastopen");
    }
    given.extend(args.device.given());
    if !given.is_empty() {
        return Err(format!(
            "{} {} for transfers over a TAP: add --tap NAME (without it imp ttcp runs on \
             its simulated network)",
            given.join(", "),
            if given.len() == 1 { "is" } else { "are" }
        ));
    }
    if args.bytes == 0 {
        return Err("--bytes 0: nothing to transfer (give at least 1 byte)".into());
    }
    config(args).map(|_| ())
}

/// Build the transfer the arguments describe.
pub fn config(args: &TtcpArgs) -> Result<BulkConfig, String> {
    if !(68..=65535).contains(&args.mtu) {
        return Err(format!("--mtu {} is outside 68..=65535", args.mtu));
    }
    if !(1..=MAX_RECORD).contains(&args.record) {
        return Err(format!(
            "--record {}: give 1 byte to {}M per write",
            args.record,
            MAX_RECORD >> 20
        ));
    }
    for (flag, bytes) in [("--sndbuf", args.sndbuf), ("--rcvbuf", args.rcvbuf)] {
        if bytes == 0 {
            return Err(format!("{flag} 0: a TCP buffer needs at least 1 byte"));
        }
    }
    let to_usize =
        |v: u64, what: &str| usize::try_from(v).map_err(|_| format!("--{what} is too large"));
    let bdp = (args.rate as f64 * args.rtt.as_secs_f64() / 8.0) as u64;
    let queue = args.queue.unwrap_or((2 * bdp).max(64 * 1024));
    let link = LinkConfig {
        rate_bps: args.rate,
        delay: Duration::from_nanos(args.rtt.as_nanos() / 2),
        loss: args.loss,
        mtu: args.mtu + impnet_wire::ethernet::HEADER_LEN,
        queue_limit_bytes: to_usize(queue, "queue")?,
        ..LinkConfig::default()
    };
    let mut bulk = BulkConfig::new(args.bytes, link, args.seed);
    bulk.record = to_usize(args.record, "record")?;
    bulk.sender_tcp.send_buffer = to_usize(args.sndbuf, "sndbuf")?;
    bulk.receiver_tcp.recv_buffer = to_usize(args.rcvbuf, "rcvbuf")?;
    bulk.sender_tcp.congestion = CcAlgorithm::from_name(&args.cc).ok_or_else(|| {
        format!(
            "--cc {}: unknown congestion control (imp has: newreno, cubic, vegas, bbr, bbr1)",
            args.cc
        )
    })?;
    bulk.sender_tcp.pacing = args.pacing;
    bulk.pcap = args.pcap.clone();
    bulk.link
        .validate()
        .map_err(|e| format!("bad link settings (--rate, --rtt, --loss, --mtu): {e}"))?;
    Ok(bulk)
}

/// Run `imp ttcp` on the simulated network.
pub fn run(args: &TtcpArgs) -> Result<(), String> {
    validate(args)?;
    let bulk = config(args)?;
    let result = run_bulk(&bulk).map_err(|e| e.to_string())?;
    if args.json {
        let report = Report {
            bytes: result.bytes,
            seconds: result.seconds,
            goodput_bps: result.goodput_bps,
            steady_goodput_bps: result.steady_goodput_bps,
            capacity_pct: result.capacity_pct,
            retransmits: result.retransmits,
            hash_ok: result.hash_ok,
            rate_bps: args.rate,
            rtt_ms: args.rtt.as_nanos() as f64 / 1e6,
            loss: args.loss,
            mtu: args.mtu,
            cc: args.cc.clone(),
            seed: args.seed,
            trace_hash: format!("{:016x}", result.trace_hash),
        };
        println!(
            "{}",
            serde_json::to_string(&report).expect("the report serialises")
        );
    } else {
        print_table(args, &result);
    }
    if result.hash_ok {
        Ok(())
    } else {
        Err(format!(
            "the received stream differs from the sent one (seed {})",
            args.seed
        ))
    }
}

fn print_table(args: &TtcpArgs, r: &BulkResult) {
    println!(
        "imp ttcp: {} bytes in {}-byte records, {:.3} Mbit/s link, {} RTT, {}% loss, MTU {}, cc {}, seed {}",
        args.bytes,
        args.record,
        args.rate as f64 / 1e6,
        args.rtt,
        args.loss * 100.0,
        args.mtu,
        args.cc,
        args.seed
    );
    println!();
    println!(
        "{:>14} {:>12} {:>14} {:>14} {:>10} {:>11} {:>8}",
        "bytes", "seconds", "goodput", "after slowst.", "% of link", "retransmits", "hash"
    );
    println!(
        "{:>14} {:>12.3} {:>14} {:>14} {:>9.1}% {:>11} {:>8}",
        r.bytes,
        r.seconds,
        format_rate(r.goodput_bps),
        format_rate(r.steady_goodput_bps),
        r.capacity_pct,
        r.retransmits,
        if r.hash_ok { "ok" } else { "MISMATCH" }
    );
}

pub(crate) fn format_rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.3} Gbit/s", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.3} Mbit/s", bps / 1e6)
    } else if bps >= 1e3 {
        format!("{:.3} kbit/s", bps / 1e3)
    } else {
        format!("{bps:.0} bit/s")
    }
}
