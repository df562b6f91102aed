//! `imp ss`: a running `imp serve`'s or `imp route`'s sockets, asked over its control
//! socket (`control.rs`), printed like `ss -tin`; `--counters` the stack's counters
//! like `nstat`; `--json` the answer as it came.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::Value;

use crate::control::socket_dir;

/// Options of `imp ss`.
#[derive(Debug, Args)]
pub struct SsArgs {
    /// The imp process to ask (needed when several run).
    #[arg(long)]
    pub pid: Option<u32>,
    /// The stack's counters (non-zero ones), like `nstat`, instead of its sockets.
    #[arg(long)]
    pub counters: bool,
    /// Print the answer as JSON.
    #[arg(long)]
    pub json: bool,
    /// Reset every connection to this peer (`ADDR:PORT`), as `ss -K` does: a RST to
    /// the peer, and the program's next call on it fails with a reset.
    #[arg(long, value_name = "PEER", conflicts_with_all = ["counters", "set"])]
    pub kill: Option<String>,
    /// Change a setting of every connection to PEER: `--set PEER KEY=VALUE`, KEY one of
    /// cc (a congestion controller), nodelay (0/1), user-timeout (ms), notsent-lowat,
    /// sndbuf, rcvbuf (bytes).
    #[arg(long, num_args = 2, value_names = ["PEER", "KEY=VALUE"], conflicts_with = "counters")]
    pub set: Option<Vec<String>>,
}

/// Run `imp ss`.
pub fn run(args: &SsArgs) -> Result<(), String> {
    let path = find(args.pid)?;
    let request = match (&args.kill, &args.set) {
        (Some(peer), _) => format!("kill {peer}"),
        (None, Some(set)) => format!("set {}", set.join(" ")),
        (None, None) if args.counters => "counters".to_string(),
        (None, None) => "sockets".to_string(),
    };
    let answer = ask(&path, &request)?;
    if let Some(error) = answer.get("error").and_then(Value::as_str) {
        return Err(format!("imp (pid {}) answered: {error}", pid_of(&path)));
    }
    if args.kill.is_some() || args.set.is_some() {
        let (verb, key) = if args.kill.is_some() {
            ("reset", "killed")
        } else {
            ("changed", "changed")
        };
        let count = answer[key].as_u64().unwrap_or(0);
        println!(
            "{verb} {count} connection{}",
            if count == 1 { "" } else { "s" }
        );
        return if count == 0 {
            Err("no connection to that peer took it".into())
        } else {
            Ok(())
        };
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&answer).map_err(|e| e.to_string())?
        );
    } else if args.counters {
        print_counters(&answer);
    } else {
        print_sockets(&answer);
    }
    Ok(())
}

fn pid_of(path: &std::path::Path) -> String {
    path.file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned())
}

/// The control socket of `pid`, or of the one imp running when no pid is given.
fn find(pid: Option<u32>) -> Result<PathBuf, String> {
    let dir = socket_dir()?;
    if let Some(pid) = pid {
        let path = dir.join(format!("{pid}.sock"));
        return if path.exists() {
            Ok(path)
        } else {
            Err(format!(
                "--pid {pid}: no imp control socket at {}",
                path.display()
            ))
        };
    }
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut live: Vec<(u32, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let path = entry.path();
            let pid: u32 = path
                .file_name()?
                .to_str()?
                .strip_suffix(".sock")?
                .parse()
                .ok()?;
            // SAFETY: kill with signal 0 only checks that the process exists.
            let alive = unsafe { libc::kill(pid as i32, 0) } == 0;
            alive.then_some((pid, path))
        })
        .collect();
    live.sort();
    match live.as_slice() {
        [] => Err(format!(
            "no running imp serve or imp route (no control socket in {})",
            dir.display()
        )),
        [(_, path)] => Ok(path.clone()),
        several => {
            let pids: Vec<String> = several.iter().map(|(p, _)| p.to_string()).collect();
            Err(format!(
                "several imp processes run ({}): pick one with --pid",
                pids.join(", ")
            ))
        }
    }
}

/// Send `request` and parse the JSON answer.
fn ask(path: &std::path::Path, request: &str) -> Result<Value, String> {
    let fail = |e: std::io::Error| format!("{}: {e}", path.display());
    let mut stream = UnixStream::connect(path).map_err(fail)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(fail)?;
    stream
        .write_all(format!("{request}\n").as_bytes())
        .map_err(fail)?;
    let mut text = String::new();
    stream.read_to_string(&mut text).map_err(fail)?;
    serde_json::from_str(&text).map_err(|e| format!("{}: a bad answer: {e}", path.display()))
}

/// `ss`'s name for a state (`Established` is `ESTAB`, `FinWait1` `FIN-WAIT-1`).
fn state_name(debug: &str) -> String {
    if debug == "Established" {
        return "ESTAB".into();
    }
    let mut out = String::new();
    let mut previous: Option<char> = None;
    for c in debug.chars() {
        let word_starts = match previous {
            Some(p) => {
                (p.is_ascii_lowercase() && c.is_ascii_uppercase())
                    || (p.is_ascii_alphabetic() && c.is_ascii_digit())
            }
            None => false,
        };
        if word_starts {
            out.push('-');
        }
        out.push(c.to_ascii_uppercase());
        previous = Some(c);
    }
    out
}

fn print_sockets(answer: &Value) {
    println!(
        "{:<12} {:>8} {:>8} {:<28} {:<28}",
        "State", "Recv-Q", "Send-Q", "Local Address:Port", "Peer Address:Port"
    );
    let empty = Vec::new();
    for socket in answer["tcp"].as_array().unwrap_or(&empty) {
        let text = |key: &str| socket[key].as_str().unwrap_or("").to_string();
        println!(
            "{:<12} {:>8} {:>8} {:<28} {:<28}",
            state_name(&text("state")),
            socket["recv_q"].to_string(),
            socket["send_q"].to_string(),
            text("local"),
            text("peer")
        );
        if socket.get("cwnd").is_some() {
            println!("\t {}", details(socket));
        }
    }
}

/// The second line `ss -i` prints: controller, RTO, RTT, MSS, cwnd in segments, ...
fn details(socket: &Value) -> String {
    let number = |key: &str| socket[key].as_f64().unwrap_or(0.0);
    let mss = number("mss").max(1.0);
    let mut line = format!(
        "{} rto:{:.0} rtt:{}/{:.3} mss:{} cwnd:{:.0} ssthresh:{:.0} bytes_in_flight:{} retrans:{}",
        socket["congestion"].as_str().unwrap_or(""),
        number("rto_ms"),
        socket["rtt_ms"]
            .as_f64()
            .map_or("-".into(), |r| format!("{r:.3}")),
        number("rttvar_ms"),
        socket["mss"],
        number("cwnd") / mss,
        number("ssthresh") / mss,
        socket["bytes_in_flight"],
        socket["retransmits"],
    );
    if let Some(rate) = socket["pacing_rate"].as_f64() {
        line.push_str(&format!(" pacing_rate {}", rate_text(rate * 8.0)));
    }
    line.push_str(&format!(
        " snd_wnd:{} rcv_wnd:{}",
        socket["snd_wnd"], socket["rcv_wnd"]
    ));
    // Which stack holds it, in a program running shards.
    if let Some(shard) = socket["shard"].as_u64() {
        line.push_str(&format!(" shard:{shard}"));
    }
    line
}

/// Bits per second the way `ss` writes them.
fn rate_text(bps: f64) -> String {
    match bps {
        b if b >= 1e9 => format!("{:.1}Gbps", b / 1e9),
        b if b >= 1e6 => format!("{:.1}Mbps", b / 1e6),
        b if b >= 1e3 => format!("{:.1}Kbps", b / 1e3),
        b => format!("{b:.0}bps"),
    }
}

fn print_counters(answer: &Value) {
    println!("#imp pid {}", answer["pid"]);
    if let Some(counters) = answer["counters"].as_object() {
        for (name, value) in counters {
            println!("{name:<40} {value:>16}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{rate_text, state_name};

    #[test]
    fn states_get_ss_names() {
        assert_eq!(state_name("Established"), "ESTAB");
        assert_eq!(state_name("SynSent"), "SYN-SENT");
        assert_eq!(state_name("FinWait1"), "FIN-WAIT-1");
        assert_eq!(state_name("TimeWait"), "TIME-WAIT");
        assert_eq!(state_name("LISTEN"), "LISTEN");
    }

    #[test]
    fn rates_read_as_ss_writes_them() {
        assert_eq!(rate_text(12_300_000.0), "12.3Mbps");
        assert_eq!(rate_text(2.5e9), "2.5Gbps");
        assert_eq!(rate_text(800.0), "800bps");
    }
}
