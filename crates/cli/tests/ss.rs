//! `imp ss` against a running `imp serve` over a TAP in a namespace the test creates:
//! its listeners and a connection from the kernel side, like `ss -tin`, as JSON, and
//! its counters; `--set` and `--kill` on that connection; the control socket is
//! owner-only. Needs root (skips, saying why,
//! without it; fails instead under `IMP_REQUIRE_ROOT`). Run under
//! `flock /tmp/imp-netns.lock` beside other namespace tests.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

#[path = "../../impnet/tests/common/mod.rs"]
#[allow(unused_imports)] // the harness offers more than this file uses
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{ChildGuard, NetNs, can_run, text};

const IMP: &str = env!("CARGO_BIN_EXE_imp");

fn ss(runtime_dir: &Path, args: &[&str]) -> Output {
    Command::new(IMP)
        .arg("ss")
        .args(args)
        .env("XDG_RUNTIME_DIR", runtime_dir)
        .output()
        .expect("imp ss")
}

#[test]
fn imp_ss_lists_a_running_serves_sockets_and_counters() {
    if !can_run() {
        return;
    }
    let ns = NetNs::new();
    ns.ip(&["tuntap", "add", "dev", "imp0", "mode", "tap"]);
    ns.ip(&["addr", "add", "10.208.1.1/24", "dev", "imp0"]);
    ns.ip(&["link", "set", "imp0", "up"]);
    let runtime_dir = std::env::temp_dir().join(format!("imp-ss-{}", std::process::id()));
    std::fs::create_dir_all(&runtime_dir).unwrap();
    let child = ns
        .command(IMP, &["serve", "--tap", "imp0", "--addr", "10.208.1.2/24"])
        .env("XDG_RUNTIME_DIR", &runtime_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("imp serve");
    let mut server = ChildGuard(Some(child));
    let pid = server.0.as_ref().unwrap().id().to_string();
    let stdout = server.0.as_mut().unwrap().stdout.take().unwrap();
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    reader.read_line(&mut line).expect("imp's first line");
    // Keep draining stdout so imp never writes to a closed pipe.
    let drain = std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    assert!(line.contains("echo (7)"), "{line}");
    // Owner-only: the directory 0700, the socket 0600.
    let dir = runtime_dir.join("imp");
    let socket = dir.join(format!("{pid}.sock"));
    let mode = |p: &Path| std::fs::metadata(p).expect("exists").permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&socket), 0o600);
    let (plain, json, counters) = ns.enter(|| {
        // A connection from the kernel to echo (7), with data both ways: imp times its
        // round trip on the echoed data's ACKs. imp's TSval is its clock in ms from
        // the runtime's start, and an echoed TSval of 0 gives no RTT sample (as in
        // Linux): a whole exchange inside imp's first millisecond would leave no RTT.
        // Waiting 20 ms first puts it past that, whatever the machine's speed.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut stream = std::net::TcpStream::connect("10.208.1.2:7").expect("connect");
        stream.write_all(&[7u8; 5000]).expect("write");
        let mut back = [0u8; 5000];
        stream.read_exact(&mut back).expect("the echo");
        assert_eq!(back, [7u8; 5000]);
        std::thread::sleep(std::time::Duration::from_millis(300));
        let out = (
            ss(&runtime_dir, &["--pid", &pid]),
            ss(&runtime_dir, &["--pid", &pid, "--json"]),
            ss(&runtime_dir, &["--pid", &pid, "--counters"]),
        );
        // An operator changes the connection's congestion controller, then resets it:
        // the kernel's end sees the RST.
        let peer = stream.local_addr().expect("local address").to_string();
        let set = ss(&runtime_dir, &["--pid", &pid, "--set", &peer, "cc=bbr1"]);
        assert!(set.status.success(), "imp ss --set: {}", text(&set));
        assert!(
            text(&set).contains("changed 1 connection"),
            "{}",
            text(&set)
        );
        let after = ss(&runtime_dir, &["--pid", &pid, "--json"]);
        let after: serde_json::Value = serde_json::from_slice(&after.stdout).expect("JSON");
        let changed = after["tcp"]
            .as_array()
            .expect("tcp list")
            .iter()
            .find(|s| s["peer"] == peer.as_str())
            .expect("the connection");
        assert_eq!(changed["congestion"], "bbr1", "{changed}");
        let bad = ss(
            &runtime_dir,
            &["--pid", &pid, "--set", &peer, "cc=none-such"],
        );
        assert!(!bad.status.success());
        assert!(
            text(&bad).contains("no such congestion controller"),
            "{}",
            text(&bad)
        );
        let kill = ss(&runtime_dir, &["--pid", &pid, "--kill", &peer]);
        assert!(kill.status.success(), "imp ss --kill: {}", text(&kill));
        assert!(
            text(&kill).contains("reset 1 connection"),
            "{}",
            text(&kill)
        );
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let mut byte = [0u8; 1];
        let read = stream.read(&mut byte);
        assert!(
            read.as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
            "the kernel's end after imp ss --kill: {read:?}"
        );
        let none = ss(&runtime_dir, &["--pid", &pid, "--kill", &peer]);
        assert!(
            !none.status.success(),
            "a second kill finds nothing to reset"
        );
        drop(stream);
        out
    });
    for out in [&plain, &json, &counters] {
        assert!(out.status.success(), "imp ss: {}", text(out));
    }
    let plain = String::from_utf8_lossy(&plain.stdout);
    assert!(plain.starts_with("State"), "{plain}");
    for port in [7, 9, 19] {
        let listening = plain
            .lines()
            .any(|l| l.starts_with("LISTEN") && l.contains(&format!("10.208.1.2:{port} ")));
        assert!(listening, "LISTEN on {port}:\n{plain}");
    }
    let established = plain
        .lines()
        .position(|l| {
            l.starts_with("ESTAB") && l.contains("10.208.1.2:7 ") && l.contains("10.208.1.1:")
        })
        .unwrap_or_else(|| panic!("the kernel's connection:\n{plain}"));
    let details = plain.lines().nth(established + 1).unwrap_or("");
    for field in ["rto:", "rtt:", "mss:", "cwnd:", "retrans:"] {
        assert!(details.contains(field), "{field} in {details:?}");
    }
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(json["pid"].to_string(), pid);
    let conn = json["tcp"]
        .as_array()
        .expect("tcp list")
        .iter()
        .find(|s| s["state"] == "Established")
        .expect("an established connection");
    assert!(conn["rtt_ms"].as_f64().is_some(), "{conn}");
    assert!(conn["cwnd"].as_u64().is_some_and(|c| c > 0), "{conn}");
    let counters = String::from_utf8_lossy(&counters.stdout);
    assert!(
        counters.starts_with(&format!("#imp pid {pid}")),
        "{counters}"
    );
    let rx_segments: u64 = counters
        .lines()
        .find_map(|l| l.strip_prefix("tcp.rx_segments"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("tcp.rx_segments in:\n{counters}"));
    assert!(rx_segments >= 3, "{counters}");
    // Stopped, imp removes its socket.
    // SAFETY: kill has no memory arguments; the pid is our own live child.
    unsafe { libc::kill(server.0.as_ref().unwrap().id() as i32, libc::SIGTERM) };
    let out = common::wait_limited(server, std::time::Duration::from_secs(10));
    assert!(out.status.success(), "{}", text(&out));
    let _ = drain.join();
    assert!(!socket.exists(), "the control socket is removed on exit");
    let gone = ss(&runtime_dir, &[]);
    assert!(!gone.status.success());
    assert!(text(&gone).contains("no running imp"), "{}", text(&gone));
    let _ = std::fs::remove_dir_all(&runtime_dir);
}

#[test]
fn imp_ss_names_a_pid_without_a_control_socket() {
    let dir = std::env::temp_dir().join(format!("imp-ss-none-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = ss(&dir, &["--pid", "4000000000"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("--pid 4000000000: no imp control socket"),
        "{}",
        text(&out)
    );
    // A directory others may enter is refused, not used.
    let open = dir.join("imp");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = ss(&dir, &[]);
    assert!(!out.status.success());
    assert!(text(&out).contains("refusing to use it"), "{}", text(&out));
    let _ = std::fs::remove_dir_all(&dir);
}
