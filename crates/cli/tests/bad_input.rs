//! The real binary on bad command lines (issue 13): each is refused before anything
//! opens or runs, with exit status 2 (clap's convention for a wrong command line,
//! which imp's own checks follow) and one clear message on stderr; a bad scenario
//! file is a failure of the run (status 1). Never a panic. The property test over
//! argument vectors is `src/cli_fuzz.rs`; this checks the process around it: exit
//! codes, stderr, stdout. (None of these may reach a device: they are refused first,
//! and a child still running after a minute is killed and fails the test.)
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Run `imp ARGS`, killing it (and failing) if it is still running after a minute.
fn imp(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_imp"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("imp starts");
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if Instant::now() > give_up {
            let _ = child.kill();
            let _ = child.wait();
            panic!("imp {args:?} was still running: it got past its checks");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The words of `line`: split at spaces, except inside single quotes (`--acl 'deny
/// in=c'`).
fn split_words(line: &str) -> Vec<String> {
    let mut words = vec![String::new()];
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '\'' => quoted = !quoted,
            ' ' if !quoted => words.push(String::new()),
            c => words.last_mut().expect("one word").push(c),
        }
    }
    words
}

/// `imp LINE` (split as [`split_words`] does) must exit with `code`, print nothing on stdout and
/// a message holding `expect` on stderr, without a panic.
fn refused(line: &str, code: i32, expect: &str) {
    let words = split_words(line);
    let args: Vec<&str> = words.iter().map(String::as_str).collect();
    let out = imp(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "imp {line}: {stderr}");
    assert!(!stderr.contains("panicked"), "imp {line}: {stderr}");
    assert!(stderr.contains(expect), "imp {line}: {stderr}");
    assert!(
        out.stdout.is_empty(),
        "imp {line}: printed {:?}",
        out.stdout
    );
}

#[test]
fn a_wrong_command_line_exits_2_with_a_message_naming_it() {
    let taps = "--tap a=10.0.1.1/24 --tap b=10.0.2.1/24";
    // clap's own errors.
    refused("", 2, "Usage");
    refused("nosuch", 2, "nosuch");
    // The benchmarks are their own program, imp-bench (crates/bench).
    refused("bench --quick", 2, "bench");
    refused("ping --count -1", 2, "-1");
    refused("ping --rate fast", 2, "fast");
    refused("ping --loss 150%", 2, "probability");
    refused("ttcp --rtt 1e15", 2, "--rtt");
    refused("ttcp --connect 10.0.0.1:99999", 2, "--connect");
    refused(
        "route --tap a=10.0.1.1/33 --tap b=10.0.2.1/24",
        2,
        "10.0.1.1/33",
    );
    refused("route --tap a/b=10.0.1.1/24 --tap b=10.0.2.1/24", 2, "a/b");
    refused(
        &format!("route {taps} --generate icmp:10.0.2.9,rate=1e-300"),
        2,
        "rate",
    );
    refused(&format!("route {taps} --acl 'drop it'"), 2, "--acl");
    refused("ping --tap t0 --addr fd00::2/129 10.0.0.1", 2, "0 to 128");
    refused("ping --tap t0 10.0.0.1%t0", 2, "%scope");
    refused("ping --tap t0 fd00::1%t0", 2, "%scope");
    refused("ping --tap t0 no..name", 2, "IPv4 or IPv6");
    // imp's checks, made before anything opens or runs: one line, `imp: ...`.
    for (line, expect) in [
        ("ping --count 0", "--count 0"),
        ("ping 10.0.0.9", "HOST"),
        ("ping --tap t0 --addr 10.0.0.2/24", "HOST"),
        ("ping --tun t0 10.0.0.1", "--addr"),
        ("ping --tap t0 --addr ::1/128 10.0.0.1", "loopback"),
        (
            "ping --tap t0 --addr fd00:1::2/64 --gateway fd00:2::1 10.0.0.1",
            "--gateway fd00:2::1",
        ),
        ("ping --tap t0 --addr 10.0.0.255/24 10.0.0.1", "broadcast"),
        ("ping --tap t0 fe80::1%t1", "imp's only interface is t0"),
        ("ping --tap t0 ff02::1", "unicast"),
        ("ping -6 -R", "IPv4 options"),
        ("ping --tap t0 -T tsonly fd00::1", "IPv4 options"),
        ("ping -6 --size 65528", "65527"),
        ("ping -6 --tap t0 10.0.0.1", "-6 with the IPv4 HOST"),
        ("ttcp --bytes 0", "--bytes 0"),
        ("ttcp --record 100G", "--record"),
        ("ttcp --rcvbuf 0", "--rcvbuf"),
        ("ttcp --mtu 0", "--mtu 0"),
        ("ttcp --cc tahoe", "--cc tahoe"),
        ("ttcp --listen 5001", "--listen"),
        ("ttcp --tap t0 --addr 10.0.0.2/24", "--connect"),
        ("ttcp --tap t0 --addr 10.0.0.2/24 --listen 0", "--listen 0"),
        (
            "ttcp --tap t0 --addr 10.0.0.2/24 --connect 10.0.0.1:5001 --timeout 0",
            "--timeout 0",
        ),
        ("sim x.toml --out /dev/null", "--out /dev/null"),
        ("serve", "--tap"),
        ("serve --tun t0", "--addr"),
        (
            "serve --tap t0 --addr 10.0.0.2/24 --http /nonexistent/imp",
            "/nonexistent/imp",
        ),
        ("link --tap a", "exactly two"),
        ("link --tap a --tap a", "a twice"),
        ("link --tap a --tap b --mtu 0", "--mtu 0"),
        ("link --tap a --tap sixteen_chars_xx", "sixteen_chars_xx"),
        ("route --tap a=10.0.1.1/24", "two or more"),
        (
            "route --tap a=10.0.1.1/24 --tap b=10.0.2.1/24 --stats 1e20",
            "--stats",
        ),
        (
            "route --tap a=10.0.1.1/24 --tap b=10.0.2.1/24 --acl 'deny in=c'",
            "which is no --tap",
        ),
        (
            "route --tap a=10.0.1.1/24 --tap b=10.0.2.1/24 --impair c:delay=1ms",
            "--impair c",
        ),
        (
            "route --tap a=10.0.1.1/24 --tap b=10.0.2.1/24 --route 10.9.0.0/16=10.0.3.1",
            "--route",
        ),
        (
            "route --tap a=10.0.1.1/24 --tap b=10.0.2.1/24 --qdisc codel",
            "--qdisc",
        ),
    ] {
        refused(line, 2, expect);
        let words = split_words(line);
        let out = imp(&words.iter().map(String::as_str).collect::<Vec<_>>());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with("imp: "), "imp {line}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "imp {line}: {stderr}");
    }
}

#[test]
fn a_bad_scenario_file_is_a_failed_run_with_one_line() {
    for (file, expect) in [
        ("/nonexistent/imp/scenario.toml", "cannot read the file"),
        // Read until memory ran out before `Scenario::load` took regular files only.
        ("/dev/zero", "not a regular file"),
        ("/", "not a regular file"),
    ] {
        refused(&format!("sim {file}"), 1, expect);
    }
}

#[test]
fn help_and_version_succeed() {
    for line in ["--help", "--version", "ping --help", "route --help"] {
        let out = imp(&line.split(' ').collect::<Vec<_>>());
        assert!(out.status.success(), "imp {line}");
        assert!(!out.stdout.is_empty(), "imp {line}");
    }
}

/// `imp ... | head`: a closed standard output ends imp by SIGPIPE, as any Unix
/// filter, not with a panic in `println!` (it panicked).
#[test]
fn a_closed_stdout_ends_imp_quietly() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut child = Command::new(env!("CARGO_BIN_EXE_imp"))
        .args(["ping", "--count", "3", "--interval", "0"])
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(status.signal(), Some(libc::SIGPIPE), "{status:?}: {stderr}");
}

/// `-i 0` sends every request at once: the requests the full transmit queue refuses
/// are counted in one line (it sent one per event and ran into the simulation's
/// time limit with `-c 65535`).
#[test]
fn ping_with_no_interval_sends_everything_at_once() {
    let out = imp(&["ping", "--count", "65535", "--interval", "0", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["transmitted"], 65535);
    let received = report["received"].as_u64().unwrap();
    assert!(received > 0 && received < 65535, "{received}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("could not be sent"), "{stderr}");
}
