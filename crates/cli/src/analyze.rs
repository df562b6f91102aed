//! `imp analyze FILE [--json]`: judge every TCP connection in a capture (pcap or pcapng,
//! from imp, tcpdump or tshark): retransmissions counted as Wireshark counts them,
//! spurious ones, RTOs, the longest stall, segments below the MSS, ACK kinds, zero
//! windows, RTT and goodput; a verdict line per direction for seed 003's failings and
//! for a connection given up after its transmission timeout. The work is
//! `impnet_sim::analyze`.

use std::path::PathBuf;

use clap::Args;
use impnet_sim::analyze::{Analysis, Connection, Direction, analyze_capture};

use crate::ttcp::format_rate;

/// Options of `imp analyze`.
#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// The capture: pcap (either byte order, micro- or nanosecond timestamps) or pcapng;
    /// Ethernet, raw IP, loopback or Linux cooked (`tcpdump -i any`) frames.
    pub file: PathBuf,
    /// Print `{"connections": [...], ...}` as JSON instead of the tables.
    #[arg(long)]
    pub json: bool,
}

/// Checks before reading anything: the capture names an existing regular file.
pub fn validate(args: &AnalyzeArgs) -> Result<(), String> {
    let path = args.file.display();
    match std::fs::metadata(&args.file) {
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(_) => Err(format!("FILE {path}: not a regular file")),
        Err(e) => Err(format!("FILE {path}: {e}")),
    }
}

/// Runs `imp analyze`.
pub fn run(args: &AnalyzeArgs) -> Result<(), String> {
    let analysis =
        analyze_capture(&args.file).map_err(|e| format!("{}: {e}", args.file.display()))?;
    if args.json {
        let json = serde_json::to_string_pretty(&analysis).map_err(|e| e.to_string())?;
        println!("{json}");
    } else {
        print_analysis(&analysis);
    }
    if let Some(e) = &analysis.read_error {
        eprintln!(
            "imp: {}: stopped reading: {e} (the report covers what came before)",
            args.file.display()
        );
    }
    Ok(())
}

fn print_analysis(a: &Analysis) {
    println!(
        "{} frames: {} TCP segments in {} connections; skipped {} not TCP over IP, {} fragments, {} malformed, {} unusable records",
        a.frames,
        a.tcp_segments,
        a.connections.len(),
        a.not_tcp,
        a.fragments,
        a.malformed,
        a.skipped_records
    );
    for c in &a.connections {
        print_connection(c);
    }
}

/// A table row: its name, and its cell for one direction.
type Row = (&'static str, fn(&Direction) -> String);

fn print_connection(c: &Connection) {
    println!();
    println!(
        "{} -> {}  (from {:.6} s, {:.6} s, {} segments)",
        c.client, c.server, c.start_s, c.duration_s, c.segments
    );
    println!(
        "{:<26} {:>16} {:>16}",
        "", "client->server", "server->client"
    );
    let rows: [Row; 19] = [
        ("segments", |d| d.segments.to_string()),
        ("data segments", |d| d.data_segments.to_string()),
        ("bytes (new)", |d| {
            format!("{} ({})", d.bytes, d.unique_bytes)
        }),
        ("mss", |d| d.mss.to_string()),
        ("segments below mss", |d| d.segments_below_mss.to_string()),
        ("retransmissions", |d| d.retransmissions.to_string()),
        ("  fast", |d| d.fast_retransmissions.to_string()),
        ("  spurious", |d| d.spurious_retransmissions.to_string()),
        ("  rto (>= 200 ms silence)", |d| d.rtos.to_string()),
        ("out of order", |d| d.out_of_order.to_string()),
        ("longest stall (ms)", |d| {
            format!("{:.3}", d.longest_stall_ms)
        }),
        ("longest timeout (ms)", |d| {
            format!("{:.3}", d.longest_timeout_ms)
        }),
        ("pure acks", |d| d.pure_acks.to_string()),
        ("acks on data", |d| d.piggybacked_acks.to_string()),
        ("acks uncombined/combined", |d| {
            format!("{} / {}", d.uncombined_acks, d.combined_acks)
        }),
        ("duplicate acks", |d| d.duplicate_acks.to_string()),
        ("zero-window events", |d| {
            format!("{} ({} seg)", d.zero_window_events, d.zero_window_segments)
        }),
        ("rtt min/avg/max (ms)", |d| rtt(d)),
        ("goodput", |d| format_rate(d.goodput_bps)),
    ];
    for (name, cell) in rows {
        println!(
            "{:<26} {:>16} {:>16}",
            name,
            cell(&c.directions[0]),
            cell(&c.directions[1])
        );
    }
    for d in &c.directions {
        for line in verdict_lines(d) {
            println!("{line}");
        }
    }
}

/// The verdict lines of one direction: seed 003's failings, and a connection given up
/// after its transmission timeout.
fn verdict_lines(d: &Direction) -> Vec<String> {
    let mut out = Vec::new();
    let failings = d.verdict.failings();
    if !failings.is_empty() {
        out.push(format!(
            "verdict {} -> {}: {}",
            d.from,
            d.to,
            failings.join("; ")
        ));
    }
    if let Some(gave_up) = &d.gave_up {
        out.push(format!(
            "verdict {} -> {}: {}",
            d.from,
            d.to,
            gave_up.describe()
        ));
    }
    out
}

fn rtt(d: &Direction) -> String {
    if d.rtt_ms.samples == 0 {
        return "-".to_string();
    }
    format!(
        "{:.2}/{:.2}/{:.2}",
        d.rtt_ms.min, d.rtt_ms.avg, d.rtt_ms.max
    )
}

#[cfg(test)]
mod tests {
    use impnet_sim::analyze::GaveUp;

    use super::*;

    #[test]
    fn a_connection_given_up_gets_a_verdict_line() {
        let mut d = Direction {
            from: "10.0.0.1:21".into(),
            to: "10.0.0.2:4000".into(),
            ..Direction::default()
        };
        assert!(verdict_lines(&d).is_empty());
        d.gave_up = Some(GaveUp {
            retransmissions: 9,
            seconds: 599.6,
            reset: true,
        });
        assert_eq!(
            verdict_lines(&d),
            [
                "verdict 10.0.0.1:21 -> 10.0.0.2:4000: connection aborted after the transmission \
              timeout: 9 retransmissions of the same data over 10.0 min without progress, \
              then a RST"
            ]
        );
    }
}
