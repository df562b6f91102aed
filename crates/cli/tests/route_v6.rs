//! `imp route` over IPv6 between Linux network namespaces the tests create (ULA
//! prefixes fd00:N::/64 inside them only): ping -6 both ways and traceroute -6 showing
//! imp's hop, a curl -6 download through it byte for byte; a Packet Too Big from imp
//! making Linux's TCP lower its path MTU; an IPv6 access rule; and `--ra`, from which
//! a Linux host configures a SLAAC address and its default route. Needs root; each test
//! skips, saying why, without it or without a tool it uses (and fails under
//! `IMP_REQUIRE_ROOT=1`).
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

#[path = "../../impnet/tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use common::{ChildGuard, NetNs, can_run, have, text, wait_limited};

const IMP: &str = env!("CARGO_BIN_EXE_imp");

/// Host A (namespace `a`, fd00:S::1 on `ra`) — imp route (its own namespace,
/// fd00:S::2 and fd00:T::2) — host B (namespace `b`, fd00:T::1 on `rb`), T = S + 1.
/// imp creates both TAPs in its namespace; they then move to the hosts' namespaces.
struct Routed6 {
    a: NetNs,
    b: NetNs,
    _middle: NetNs,
    imp: Option<ChildGuard>,
    rest: Option<std::thread::JoinHandle<String>>,
    s: u8,
}

/// How a host side is set up.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Host {
    /// A static address and a default route through imp.
    Static,
    /// No address but the link-local one: it takes imp's router advertisements
    /// (`accept_ra=2`).
    Autoconf,
}

impl Routed6 {
    /// Start `imp route` with `extra` arguments after the two `--tap`s (`tap_opts`
    /// appended to each, e.g. ",mtu=1280"); set up A and B as `hosts` says.
    fn new(s: u8, tap_opts: [&str; 2], hosts: [Host; 2], extra: &[&str]) -> Routed6 {
        let middle = NetNs::new();
        let (a, b) = (NetNs::new(), NetNs::new());
        let t = s + 1;
        let tap_a = format!("ra=fd00:{s}::2/64{}", tap_opts[0]);
        let tap_b = format!("rb=fd00:{t}::2/64{}", tap_opts[1]);
        let mut args = vec!["route", "--tap", &tap_a, "--tap", &tap_b];
        args.extend_from_slice(extra);
        let mut child = middle.spawn(IMP, &args);
        let stdout = child.0.as_mut().unwrap().stdout.take().unwrap();
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line.is_empty() {
            let out = child.wait();
            panic!("imp route exited: {}", String::from_utf8_lossy(&out.stderr));
        }
        assert!(line.contains("forwarding between ra"), "{line}");
        let rest = std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = reader.read_to_string(&mut rest);
            rest
        });
        middle.ip(&["link", "set", "ra", "netns", &a.name]);
        middle.ip(&["link", "set", "rb", "netns", &b.name]);
        for ((ns, dev, net), host) in [(&a, "ra", s), (&b, "rb", t)].into_iter().zip(hosts) {
            // The hosts' own links stay at 1500 whatever imp's side of them carries.
            ns.ip(&["link", "set", dev, "mtu", "1500"]);
            if host == Host::Autoconf {
                let key = format!("net.ipv6.conf.{dev}.accept_ra=2");
                let out = ns.exec("sysctl", &["-qw", &key]);
                assert!(out.status.success(), "{}", text(&out));
            } else {
                let addr = format!("fd00:{net}::1/64");
                ns.ip(&["-6", "addr", "add", &addr, "dev", dev, "nodad"]);
            }
            ns.ip(&["link", "set", dev, "up"]);
            if host == Host::Static {
                let via = format!("fd00:{net}::2");
                ns.ip(&["-6", "route", "add", "default", "via", &via, "dev", dev]);
            }
        }
        Routed6 {
            a,
            b,
            _middle: middle,
            imp: Some(child),
            rest: Some(rest),
            s,
        }
    }

    fn a_addr(&self) -> String {
        format!("fd00:{}::1", self.s)
    }

    fn b_addr(&self) -> String {
        format!("fd00:{}::1", self.s + 1)
    }

    /// Stop imp with SIGTERM; its exit status and the statistics it printed.
    fn stop(&mut self) -> (Output, String) {
        let child = self.imp.take().unwrap();
        let pid = child.0.as_ref().unwrap().id() as i32;
        // SAFETY: kill(2) with a pid we spawned and have not reaped.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let out = wait_limited(child, Duration::from_secs(10));
        let rest = self.rest.take().unwrap().join().unwrap();
        (out, rest)
    }
}

/// A file of `len` bytes in a fresh directory (removed on drop).
struct Site {
    dir: PathBuf,
}

impl Site {
    fn new(tag: &str, len: usize) -> Site {
        let dir = std::env::temp_dir().join(format!("imp-route6-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let data: Vec<u8> = (0..len)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        std::fs::write(dir.join("file"), data).unwrap();
        Site { dir }
    }

    fn file(&self) -> Vec<u8> {
        std::fs::read(self.dir.join("file")).unwrap()
    }

    /// Python's http.server for this site in `ns`, on `addr` and `port`.
    fn serve(&self, ns: &NetNs, addr: &str, port: u16) -> ChildGuard {
        let dir = self.dir.to_string_lossy().to_string();
        let port = port.to_string();
        ns.spawn(
            "python3",
            &[
                "-m",
                "http.server",
                &port,
                "--bind",
                addr,
                "--directory",
                &dir,
            ],
        )
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `curl -6` in `ns` for `url` into `out`, retried while the server starts.
fn curl(ns: &NetNs, url: &str, out: &str, max_secs: &str) -> Output {
    let mut last = None;
    for _ in 0..50 {
        let result = ns.exec(
            "curl",
            &[
                "-6",
                "-sS",
                "-f",
                "-g",
                "--max-time",
                max_secs,
                "-o",
                out,
                url,
            ],
        );
        // curl's 7: could not connect (the server is not listening yet).
        if result.status.code() != Some(7) {
            return result;
        }
        last = Some(result);
        std::thread::sleep(Duration::from_millis(100));
    }
    last.unwrap()
}

/// The number in the table headed `header` (its first word), in the row for
/// `iface`, under `column`.
fn stat(table: &str, header: &str, iface: &str, column: &str) -> u64 {
    let mut lines = table
        .lines()
        .skip_while(|l| l.split_whitespace().next() != Some(header));
    // Every column name is one word.
    let head: Vec<&str> = lines
        .next()
        .expect("table header")
        .split_whitespace()
        .collect();
    let index = head.iter().position(|h| *h == column).expect("column");
    let row = lines
        .find(|l| l.split_whitespace().next() == Some(iface))
        .expect("row");
    let values: Vec<&str> = row.split_whitespace().collect();
    values[index].parse().expect("number")
}

#[test]
fn linux_namespaces_ping_trace_and_download_over_ipv6_through_imp_route() {
    if !can_run() || !have("ping") || !have("curl") || !have("python3") {
        return;
    }
    let mut net = Routed6::new(40, ["", ""], [Host::Static; 2], &[]);
    for (from, to) in [(&net.a, net.b_addr()), (&net.b, net.a_addr())] {
        let out = from.exec("ping", &["-6", "-c", "3", "-i", "0.2", "-W", "2", &to]);
        assert!(out.status.success(), "ping -6 {to}: {}", text(&out));
        // One hop: Linux's hop limit 64, less imp's one.
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("ttl=63"),
            "{}",
            text(&out)
        );
    }
    // imp answers pings to its own addresses, on both sides.
    for addr in ["fd00:40::2", "fd00:41::2"] {
        let out = net.a.exec("ping", &["-6", "-c", "1", "-W", "2", addr]);
        assert!(out.status.success(), "{}", text(&out));
    }
    // traceroute -6: hop 1 is imp (Time Exceeded from its address on A's side), hop
    // 2 is B.
    let traced = have("traceroute");
    if traced {
        let out = net.a.exec(
            "traceroute",
            &["-6", "-n", "-q", "1", "-w", "2", "-m", "4", &net.b_addr()],
        );
        let trace = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "{}", text(&out));
        let hops: Vec<&str> = trace
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().nth(1))
            .collect();
        assert_eq!(hops, ["fd00:40::2", net.b_addr().as_str()], "{trace}");
    }
    // B serves a file; A downloads it through imp over IPv6.
    let site = Site::new("dl", 8 << 20);
    let _server = site.serve(&net.b, &net.b_addr(), 8080);
    let got = site.dir.join("got").to_string_lossy().to_string();
    let url = format!("http://[{}]:8080/file", net.b_addr());
    let out = curl(&net.a, &url, &got, "60");
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        std::fs::read(&got).unwrap() == site.file(),
        "download differs"
    );
    let (out, table) = net.stop();
    assert!(out.status.success(), "{}", text(&out));
    assert!(stat(&table, "iface6", "rb", "forwarded") > 5000, "{table}");
    // A's ACKs came back through imp. How many depends on how Linux's receiver batches
    // (it acknowledges a GRO aggregate of up to 64 KiB at a time: one CI run counted 877
    // for the 8 MiB, another over 1000), so the bound is the fewest that can cover it:
    // 8 MiB at most 64 KiB per ACK.
    assert!(stat(&table, "iface6", "ra", "forwarded") >= 128, "{table}");
    // Only traceroute's probes run out of hops at imp.
    if traced {
        assert!(stat(&table, "iface6", "ra", "hoplimit") >= 1, "{table}");
    }
    assert_eq!(stat(&table, "iface6", "rb", "egress"), 0, "{table}");
    // The connected prefixes counted what they carried.
    let route_row = table
        .lines()
        .find(|l| l.starts_with("fd00:40::/64"))
        .unwrap_or_else(|| panic!("no route row: {table}"));
    let packets: u64 = route_row
        .split_whitespace()
        .rev()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert!(packets > 5000, "{table}");
}

#[test]
fn a_packet_too_big_from_imp_lowers_linux_tcp_path_mtu() {
    if !can_run() || !have("curl") || !have("python3") {
        return;
    }
    // B's side of imp carries 1280 bytes; both hosts' own links 1500. A serves, B
    // downloads: A's 1500-byte segments draw Packet Too Big at imp, and A's TCP
    // goes on at 1280.
    let mut net = Routed6::new(42, ["", ",mtu=1280"], [Host::Static; 2], &[]);
    let site = Site::new("ptb", 8 << 20);
    let _server = site.serve(&net.a, &net.a_addr(), 8080);
    let got = site.dir.join("got").to_string_lossy().to_string();
    let url = format!("http://[{}]:8080/file", net.a_addr());
    let out = curl(&net.b, &url, &got, "60");
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        std::fs::read(&got).unwrap() == site.file(),
        "download differs"
    );
    // The kernel keeps the learnt path MTU as a route exception.
    let route = net.a.exec("ip", &["-6", "route", "get", &net.b_addr()]);
    let route = String::from_utf8_lossy(&route.stdout).to_string();
    assert!(route.contains("mtu 1280"), "A learned no path MTU: {route}");
    let (out, table) = net.stop();
    assert!(out.status.success(), "{}", text(&out));
    assert!(stat(&table, "iface6", "ra", "toobig") >= 1, "{table}");
    assert!(stat(&table, "iface6", "ra", "forwarded") > 5000, "{table}");
}

#[test]
fn an_ipv6_deny_rule_blocks_exactly_what_it_names() {
    if !can_run() || !have("curl") || !have("python3") || !have("ping") {
        return;
    }
    let rule = "deny proto=tcp dst=fd00:45::/64 dport=8081";
    let mut net = Routed6::new(44, ["", ""], [Host::Static; 2], &["--acl", rule]);
    let site = Site::new("acl", 100_000);
    let _servers: Vec<ChildGuard> = [8080, 8081]
        .iter()
        .map(|&port| site.serve(&net.b, &net.b_addr(), port))
        .collect();
    let got = site.dir.join("got").to_string_lossy().to_string();
    let url = |port| format!("http://[{}]:{port}/file", net.b_addr());
    let out = curl(&net.a, &url(8080), &got, "10");
    assert!(out.status.success(), "port 8080: {}", text(&out));
    assert!(std::fs::read(&got).unwrap() == site.file());
    let out = net.a.exec(
        "curl",
        &[
            "-6",
            "-sS",
            "-g",
            "--max-time",
            "5",
            "-o",
            "/dev/null",
            &url(8081),
        ],
    );
    assert!(
        !out.status.success(),
        "port 8081 must be blocked: {}",
        text(&out)
    );
    let out = net
        .a
        .exec("ping", &["-6", "-c", "1", "-W", "2", &net.b_addr()]);
    assert!(out.status.success(), "ping is not named: {}", text(&out));
    let (out, table) = net.stop();
    assert!(out.status.success(), "{}", text(&out));
    let rule_row = table
        .lines()
        .find(|l| l.starts_with(rule))
        .unwrap_or_else(|| panic!("no row for the rule: {table}"));
    let hits: u64 = rule_row
        .split_whitespace()
        .rev()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert!(hits >= 1, "{table}");
    assert!(stat(&table, "iface6", "ra", "denied") >= 1, "{table}");
    assert_eq!(stat(&table, "iface6", "rb", "denied"), 0, "{table}");
}

#[test]
fn linux_configures_itself_from_imp_router_advertisements() {
    if !can_run() || !have("ping") || !have("sysctl") {
        return;
    }
    // B has no address of its own: from imp's advertisement it forms one in
    // fd00:47::/64 (SLAAC) and takes imp's link-local address as its default router.
    // imp's side of B's link carries 1400 bytes, which its advertisement says.
    let net = Routed6::new(
        46,
        ["", ",mtu=1400"],
        [Host::Static, Host::Autoconf],
        &["--ra"],
    );
    let mut addrs = String::new();
    let mut default = String::new();
    for _ in 0..200 {
        let out = net.b.exec(
            "ip",
            &["-6", "addr", "show", "dev", "rb", "scope", "global"],
        );
        addrs = String::from_utf8_lossy(&out.stdout).to_string();
        let out = net.b.exec("ip", &["-6", "route", "show", "default"]);
        default = String::from_utf8_lossy(&out.stdout).to_string();
        if addrs.contains("fd00:47:")
            && default.contains("via fe80::")
            && !addrs.contains("tentative")
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        addrs.contains("inet6 fd00:47::") && addrs.contains("dynamic"),
        "{addrs}"
    );
    assert!(default.contains("proto ra"), "{default}");
    let router = default
        .split_whitespace()
        .skip_while(|w| *w != "via")
        .nth(1)
        .unwrap_or_else(|| panic!("{default}"))
        .to_string();
    // The router is imp: its link-local address answers, and B's neighbour cache
    // marks it a router.
    let out = net.b.exec(
        "ping",
        &["-6", "-c", "1", "-W", "2", &format!("{router}%rb")],
    );
    assert!(out.status.success(), "{}", text(&out));
    let out = net
        .b
        .exec("ip", &["-6", "neigh", "show", &router, "dev", "rb"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("router"),
        "{}",
        text(&out)
    );
    // And it routes: B reaches A from its SLAAC address by that default route.
    let out = net.b.exec(
        "ping",
        &["-6", "-c", "2", "-i", "0.2", "-W", "2", &net.a_addr()],
    );
    assert!(out.status.success(), "{}", text(&out));
    // The advertisement's MTU option set B's IPv6 MTU on the link (its device MTU
    // is 1500).
    let out = net.b.exec("sysctl", &["-n", "net.ipv6.conf.rb.mtu"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1400");
}
