//! `imp analyze` on Linux's TCP: two network namespaces joined by `imp link` with
//! loss (imp's own link model; no netem needed), an iperf3 bulk transfer each way
//! between the two kernels, captured by dumpcap on one host twice: on its interface
//! (pcap, Ethernet) and on `any` (pcapng, Linux cooked v2). On each capture, per
//! direction of every connection, `imp analyze --json` must count exactly the
//! retransmissions tshark marks (`tcp.analysis.retransmission`), and the fast and
//! spurious ones, the out-of-order segments and the duplicate ACKs; and the loss must
//! have caused some retransmissions.
//!
//! The capturing host sends one transfer and receives the other, so the analysis sees
//! Linux's segments from both ends of a lossy link: SACK, timestamps, window scaling,
//! the MSS options of Linux's SYNs.
//!
//! Needs root, iperf3 and tshark/dumpcap; skips (saying why, through the shared
//! `require` helper) without them, fails instead under `IMP_REQUIRE_ROOT` (and without
//! tshark under `IMP_REQUIRE_TSHARK` too).

#[path = "../../impnet/tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::require;
use common::{ChildGuard, NetNs, can_run, have, text, wait_limited};

const IMP: &str = env!("CARGO_BIN_EXE_imp");

/// The link: 3% loss each way, 10 ms each way, 50 Mbit/s.
const IMPAIR: &str = "delay=10ms,loss=3%,rate=50mbit";
/// Bytes per transfer.
const BYTES: &str = "4M";

/// The counts compared, as tshark's display filters name them and as `imp analyze
/// --json` names them in a direction.
const KINDS: [(&str, &str); 5] = [
    ("tcp.analysis.retransmission", "retransmissions"),
    ("tcp.analysis.fast_retransmission", "fast_retransmissions"),
    (
        "tcp.analysis.spurious_retransmission",
        "spurious_retransmissions",
    ),
    ("tcp.analysis.out_of_order", "out_of_order"),
    ("tcp.analysis.duplicate_ack", "duplicate_acks"),
];

/// Per direction (`a.b.c.d:port->e.f.g.h:port`) and kind, a count.
type Counts = BTreeMap<(String, &'static str), u64>;

/// Send a signal to a child (`ip netns exec` execs the program in place).
fn signal(child: &ChildGuard, sig: i32) {
    let pid = child.0.as_ref().unwrap().id() as i32;
    // SAFETY: kill has no memory arguments; the pid is our own live child.
    unsafe { libc::kill(pid, sig) };
}

/// Starts `program args` in `ns` and waits until a line of its `stderr` (or `stdout`)
/// contains `ready`; the rest of the output is drained in the background.
fn start_until(ns: &NetNs, program: &str, args: &[&str], ready: &str, stderr: bool) -> ChildGuard {
    let mut child = ns.spawn(program, args);
    let handle = child.0.as_mut().unwrap();
    let stream: Box<dyn std::io::Read + Send> = if stderr {
        Box::new(handle.stderr.take().unwrap())
    } else {
        Box::new(handle.stdout.take().unwrap())
    };
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        let n = reader.read_line(&mut line).expect("read the output");
        assert!(n > 0, "{program} {args:?} exited before saying {ready:?}");
        if line.contains(ready) {
            break;
        }
    }
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    child
}

/// tshark's counts of every kind, per direction.
fn tshark_counts(path: &Path) -> Counts {
    let mut counts = Counts::new();
    for (filter, kind) in KINDS {
        let out = Command::new("tshark")
            .args(["-n", "-r"])
            .arg(path)
            .args(["-Y", filter, "-T", "fields", "-E", "separator=,"])
            .args(["-e", "ip.src", "-e", "tcp.srcport"])
            .args(["-e", "ip.dst", "-e", "tcp.dstport"])
            .output()
            .expect("tshark runs");
        assert!(out.status.success(), "tshark: {}", text(&out));
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let f: Vec<&str> = line.split(',').collect();
            if let [src, sport, dst, dport] = f[..] {
                *counts
                    .entry((format!("{src}:{sport}->{dst}:{dport}"), kind))
                    .or_default() += 1;
            }
        }
    }
    counts
}

/// `imp analyze --json`'s counts of every kind, per direction (zeros left out, as
/// tshark lists only what it marked).
fn imp_counts(path: &Path) -> Counts {
    let out = Command::new(IMP)
        .args(["analyze", "--json"])
        .arg(path)
        .output()
        .expect("imp runs");
    assert!(out.status.success(), "imp analyze: {}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(json["read_error"], serde_json::Value::Null, "{json}");
    assert_eq!(json["malformed"], 0, "{json}");
    let mut counts = Counts::new();
    for conn in json["connections"].as_array().expect("connections") {
        for dir in conn["directions"].as_array().expect("directions") {
            let name = format!(
                "{}->{}",
                dir["from"].as_str().unwrap(),
                dir["to"].as_str().unwrap()
            );
            for (_, kind) in KINDS {
                let n = dir[kind].as_u64().expect("a count");
                if n > 0 {
                    counts.insert((name.clone(), kind), n);
                }
            }
        }
    }
    counts
}

/// Compares the two analyses of `path`; returns the retransmissions.
fn compare(path: &Path) -> u64 {
    let ours = imp_counts(path);
    let theirs = tshark_counts(path);
    println!("{}: imp {ours:?}", path.display());
    assert_eq!(
        ours,
        theirs,
        "{}: imp (left), tshark (right)",
        path.display()
    );
    ours.iter()
        .filter(|((_, kind), _)| *kind == "retransmissions")
        .map(|(_, n)| n)
        .sum()
}

/// The two hosts `a` (10.205.120.1, TAP lta) and `b` (.2, ltb) joined by `imp link`,
/// which runs in a third namespace and is stopped on drop.
struct Joined {
    link: ChildGuard,
    a: NetNs,
    b: NetNs,
    _middle: NetNs,
}

fn join() -> Joined {
    let middle = NetNs::new();
    let (a, b) = (NetNs::new(), NetNs::new());
    let link = start_until(
        &middle,
        IMP,
        &["link", "--tap", "lta", "--tap", "ltb", "--impair", IMPAIR],
        "lta <-> ltb",
        false,
    );
    for (ns, dev, addr) in [
        (&a, "lta", "10.205.120.1/24"),
        (&b, "ltb", "10.205.120.2/24"),
    ] {
        middle.ip(&["link", "set", dev, "netns", &ns.name]);
        ns.ip(&["addr", "add", addr, "dev", dev]);
        ns.ip(&["link", "set", dev, "up"]);
    }
    Joined {
        link,
        a,
        b,
        _middle: middle,
    }
}

fn capture_path(tag: &str, ext: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "imp-linux-trace-{}-{tag}.{ext}",
        std::process::id()
    ))
}

/// Starts dumpcap in `ns` on `iface` (extra options `opts`), headers only.
fn dumpcap(ns: &NetNs, iface: &str, opts: &[&str], path: &Path) -> ChildGuard {
    let path = path.to_str().unwrap();
    let mut args = vec!["-q", "-i", iface, "-s", "128", "-w", path];
    args.extend_from_slice(opts);
    start_until(ns, "dumpcap", &args, "Capturing on", true)
}

#[test]
fn imp_analyze_agrees_with_tshark_on_linux_tcp_through_a_lossy_imp_link() {
    if !can_run() || !have("iperf3") {
        return;
    }
    if !require::have_tshark() || !have("dumpcap") {
        return;
    }
    let net = join();
    let server = start_until(
        &net.b,
        "iperf3",
        &["-s", "-B", "10.205.120.2", "--forceflush"],
        "Server listening",
        false,
    );
    let eth = capture_path("eth", "pcap");
    let cooked = capture_path("any", "pcapng");
    let captures = [
        dumpcap(&net.a, "lta", &["-P"], &eth),
        dumpcap(&net.a, "any", &["-y", "LINUX_SLL2"], &cooked),
    ];
    // a sends, then a receives (-R): the capture sees both ends of Linux's TCP.
    for reverse in [false, true] {
        let mut args = vec![
            "-c",
            "10.205.120.2",
            "-n",
            BYTES,
            "--connect-timeout",
            "5000",
        ];
        if reverse {
            args.push("-R");
        }
        // The server takes a moment to finish one test before it accepts the next
        // ("the server is busy running a test"): ask again until it is free. It may
        // also close the control connection with our request still unread, which its
        // kernel answers with a reset ("unable to receive control message: Connection
        // reset by peer"): the same refusal, told the other way.
        let mut out = net
            .a
            .exec("timeout", &[&["60", "iperf3"], &args[..]].concat());
        for _ in 0..50 {
            let said = text(&out);
            let busy = said.contains("server is busy")
                || said.contains("unable to receive control message");
            if out.status.success() || !busy {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
            out = net
                .a
                .exec("timeout", &[&["60", "iperf3"], &args[..]].concat());
        }
        assert!(out.status.success(), "iperf3 {args:?}: {}", text(&out));
    }
    for capture in captures {
        signal(&capture, libc::SIGINT);
        let out = wait_limited(capture, Duration::from_secs(10));
        assert!(out.status.success(), "dumpcap: {}", text(&out));
    }
    drop(server);
    signal(&net.link, libc::SIGTERM);
    let retransmissions = [compare(&eth), compare(&cooked)];
    for path in [&eth, &cooked] {
        let _ = std::fs::remove_file(path);
    }
    for n in retransmissions {
        assert!(n > 0, "the 3% loss of {IMPAIR} caused retransmissions");
    }
}
