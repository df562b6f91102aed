//! imp's DHCP client and resolver against Debian's dnsmasq, in a network namespace the
//! test creates: dnsmasq serves DHCP (a 2-minute lease, dnsmasq's shortest, with T1 at
//! 8 s and T2 at 14 s so the renewal comes quickly) and DNS (`example.test` is the
//! kernel's side of the TAP) on the TAP's kernel side. `imp ping --dhcp example.test`
//! gets a lease, resolves the name, pings it and renews the lease while it runs;
//! `imp ttcp --dhcp --connect example.test:PORT` connects by name. Needs root, dnsmasq
//! and nc; run under `flock /tmp/imp-netns.lock` beside other namespace tests.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

#[path = "../../impnet/tests/common/mod.rs"]
mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{ChildGuard, NetNs, can_run, have, text, wait_limited};

const IMP: &str = env!("CARGO_BIN_EXE_imp");
const SUBNET: u8 = 211;

/// A namespace with TAP `imp0` (kernel side 10.206.211.1/24) and dnsmasq serving it.
struct Served {
    ns: NetNs,
    dir: PathBuf,
    _dnsmasq: ChildGuard,
}

impl Served {
    fn new() -> Option<Served> {
        if !can_run() || !have("dnsmasq") || !have("nc") {
            return None;
        }
        let ns = NetNs::new();
        ns.ip(&["tuntap", "add", "dev", "imp0", "mode", "tap"]);
        ns.ip(&[
            "addr",
            "add",
            &format!("10.206.{SUBNET}.1/24"),
            "dev",
            "imp0",
        ]);
        ns.ip(&["link", "set", "imp0", "up"]);
        let dir = std::env::temp_dir().join(format!("imp-dnsmasq-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let arg = |name: &str, value: String| format!("--{name}={value}");
        let args = [
            "--keep-in-foreground".to_string(),
            "--conf-file=/dev/null".into(),
            "--interface=imp0".into(),
            "--bind-interfaces".into(),
            "--no-resolv".into(),
            "--no-hosts".into(),
            "--no-ping".into(),
            "--user=root".into(),
            "--log-dhcp".into(),
            "--log-queries".into(),
            arg(
                "dhcp-range",
                format!("10.206.{SUBNET}.50,10.206.{SUBNET}.99,255.255.255.0,2m"),
            ),
            "--dhcp-option=option:T1,8".into(),
            "--dhcp-option=option:T2,14".into(),
            arg("address", format!("/example.test/10.206.{SUBNET}.1")),
            arg("dhcp-leasefile", dir.join("leases").display().to_string()),
            arg("pid-file", dir.join("pid").display().to_string()),
            arg("log-facility", dir.join("log").display().to_string()),
        ];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let dnsmasq = ns.spawn("dnsmasq", &args);
        let served = Served {
            ns,
            dir,
            _dnsmasq: dnsmasq,
        };
        // Ready once it logged that its DHCP socket is bound.
        let give_up = Instant::now() + Duration::from_secs(10);
        while !served.log().contains("sockets bound") {
            assert!(
                Instant::now() < give_up,
                "dnsmasq did not start: {}",
                served.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(served)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }

    fn imp(&self, args: &[&str], limit: Duration) -> std::process::Output {
        wait_limited(self.ns.spawn(IMP, args), limit)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The addresses of dnsmasq's log lines `DHCPACK(imp0) ADDR MAC`, in order.
fn acks(log: &str) -> Vec<(String, String)> {
    log.lines()
        .filter_map(|line| {
            let rest = line.split("DHCPACK(imp0) ").nth(1)?;
            let mut words = rest.split_whitespace();
            Some((words.next()?.to_string(), words.next()?.to_string()))
        })
        .collect()
}

#[test]
fn imp_leases_renews_resolves_and_connects_with_dnsmasq() {
    let Some(net) = Served::new() else { return };
    // 12 pings a second apart: the lease's T1 (8 s) passes while they run.
    let out = net.imp(
        &[
            "ping",
            "--tap",
            "imp0",
            "--dhcp",
            "example.test",
            "-c",
            "12",
            "-i",
            "1s",
        ],
        Duration::from_secs(60),
    );
    let log = net.log();
    assert!(out.status.success(), "{}\n{log}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let kernel = format!("10.206.{SUBNET}.1");
    assert!(
        stdout.contains(&format!("PING example.test ({kernel})")),
        "{stdout}"
    );
    assert!(stdout.contains("12 received"), "{stdout}");
    // The first ACK granted the lease, a later one renewed it: the same address and
    // MAC, after a DHCPREQUEST with no DHCPDISCOVER between (RENEWING).
    let acks = acks(&log);
    assert!(acks.len() >= 2, "no renewal in dnsmasq's log:\n{log}");
    assert!(acks.iter().all(|a| *a == acks[0]), "{acks:?}");
    let (addr, mac) = &acks[0];
    assert!(
        stdout.contains(&format!("from {addr}/24 on TAP imp0")),
        "imp did not use its lease {addr}: {stdout}"
    );
    // Every DHCPDISCOVER came before the lease: the renewal was a DHCPREQUEST alone.
    // (There may be two before it: the kernel drops what it sends on a TAP until its
    // link watch has activated the device's queue, up to a second after imp opened it,
    // so dnsmasq's first offer can be lost and imp rightly discovers again.)
    let first_ack = log.find("DHCPACK(imp0)").expect("an ACK");
    assert!(log[..first_ack].contains("DHCPDISCOVER(imp0)"), "{log}");
    assert!(!log[first_ack..].contains("DHCPDISCOVER(imp0)"), "{log}");
    assert!(log.contains("query[A] example.test"), "{log}");
    let leases = std::fs::read_to_string(net.dir.join("leases")).unwrap();
    assert!(leases.contains(&format!("{mac} {addr}")), "{leases}");

    // Connect by name: imp ttcp sends 1 MiB to nc on the kernel's side.
    let sink = net
        .ns
        .spawn("sh", &["-c", "nc -l -s 0.0.0.0 -p 5001 | wc -c"]);
    std::thread::sleep(Duration::from_millis(300));
    let out = net.imp(
        &[
            "ttcp",
            "--tap",
            "imp0",
            "--dhcp",
            "--connect",
            "example.test:5001",
            "--bytes",
            "1M",
        ],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("sent 1048576 bytes to {kernel}:5001")),
        "{stdout}"
    );
    let counted = wait_limited(sink, Duration::from_secs(5));
    assert_eq!(String::from_utf8_lossy(&counted.stdout).trim(), "1048576");
}

#[test]
fn dhcp_and_dns_arguments_are_checked() {
    let run = |args: &[&str]| Command::new(IMP).args(args).output().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (
            &[
                "ping",
                "--tap",
                "t0",
                "--dhcp",
                "--addr",
                "10.0.0.2/24",
                "10.0.0.1",
            ],
            "--dhcp and --addr 10.0.0.2/24 both give imp its IPv4 address",
        ),
        (
            &[
                "ping",
                "--tun",
                "t0",
                "--addr",
                "fd00::2/64",
                "--dhcp",
                "10.0.0.1",
            ],
            "--dhcp needs --tap",
        ),
        (
            &[
                "ping",
                "--tap",
                "t0",
                "--dhcp",
                "--gateway",
                "10.0.0.1",
                "10.0.0.1",
            ],
            "the DHCP lease names imp's IPv4 router",
        ),
        (
            &["ping", "--tap", "t0", "--dhcp", "no..name"],
            "nor a host name",
        ),
        (
            &["ttcp", "--tap", "t0", "--dhcp", "--connect", "example.test"],
            "give HOST:PORT",
        ),
    ];
    for (args, expected) in cases {
        let out = run(args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    let out = run(&["ping", "--dhcp", "10.0.0.1"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--dhcp"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
