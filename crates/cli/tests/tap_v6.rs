//! The `imp` binary over IPv6 against the Linux kernel, on a TAP in a network namespace
//! each test creates (ULA prefixes fd00:S::/64 only, never the host's): Linux's
//! `ping -6` to imp's static and link-local addresses, curl over IPv6 from `imp serve`
//! byte-exact, imp receiving from and sending to a Python TCP peer over IPv6 (`imp ttcp`),
//! and SLAAC: a router advertisement written by the test (raw ICMPv6 from Python)
//! gives imp an address, which Linux then pings and downloads from; `imp ping` to
//! Linux's global and link-local (`%imp0`) addresses; curl -6 downloading from `imp
//! serve --ftp` over EPSV and EPRT. Needs root; each
//! test skips, saying why, without it or a tool it uses (fails under IMP_REQUIRE_ROOT).
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

#[path = "../../impnet/tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Read};
use std::net::Ipv6Addr;
use std::process::Output;
use std::time::Duration;

use common::{ChildGuard, NetNs, can_run, have, text, wait_limited};
use sha2::{Digest, Sha256};

const IMP: &str = env!("CARGO_BIN_EXE_imp");

/// A namespace with a persistent TAP `imp0` whose kernel side is fd00:S::1/64 (no DAD),
/// up; imp attaches to it (as fd00:S::2/64 when a test gives that address).
struct Net {
    ns: NetNs,
    kernel: String,
    imp: String,
}

impl Net {
    /// The namespace with imp's TAP in it; `None` (the test skips) without root,
    /// `sysctl` (IPv6 on in the namespace) or `ping`, which every test here uses to wait
    /// for imp or to find its address.
    fn new(subnet: u8) -> Option<Net> {
        if !can_run() || !have("sysctl") || !have("ping") {
            return None;
        }
        let ns = NetNs::new();
        for (key, value) in [
            ("net.ipv6.conf.all.disable_ipv6", "0"),
            ("net.ipv6.conf.default.disable_ipv6", "0"),
            ("net.ipv6.conf.default.accept_dad", "0"),
        ] {
            let out = ns.exec("sysctl", &["-qw", &format!("{key}={value}")]);
            assert!(out.status.success(), "sysctl {key}: {}", text(&out));
        }
        ns.ip(&["tuntap", "add", "dev", "imp0", "mode", "tap"]);
        let kernel = format!("fd00:{subnet:x}::1");
        ns.ip(&[
            "-6",
            "addr",
            "add",
            &format!("{kernel}/64"),
            "dev",
            "imp0",
            "nodad",
        ]);
        ns.ip(&["link", "set", "imp0", "up"]);
        Some(Net {
            ns,
            kernel,
            imp: format!("fd00:{subnet:x}::2"),
        })
    }

    fn addr_arg(&self) -> String {
        format!("{}/64", self.imp)
    }

    /// `imp ARGS...` in the namespace; waits for its first line of output and returns
    /// it with the running process and a thread collecting the rest.
    fn start_imp(&self, args: &[&str]) -> (ChildGuard, String, std::thread::JoinHandle<String>) {
        let mut child = self.ns.spawn(IMP, args);
        let stdout = child.0.as_mut().unwrap().stdout.take().unwrap();
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        reader.read_line(&mut line).expect("read imp's first line");
        if line.is_empty() {
            let out = child.wait();
            panic!("imp {args:?} exited: {}", text(&out));
        }
        let rest = std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = reader.read_to_string(&mut rest);
            rest
        });
        (child, line, rest)
    }

    fn exec(&self, program: &str, args: &[&str]) -> Output {
        self.ns.exec(program, args)
    }

    /// Ping `addr` (with `%imp0` for a link-local one) once a second until it answers,
    /// at most `tries` times (imp's addresses wait out duplicate address detection).
    fn wait_reachable(&self, addr: &str, tries: u32) -> bool {
        (0..tries).any(|_| {
            self.exec("ping", &["-6", "-c", "1", "-W", "1", "-n", addr])
                .status
                .success()
        })
    }

    /// imp's link-local address: the one that answers a ping to all nodes on the link
    /// (ff02::1) and is not the kernel's own.
    fn imp_link_local(&self) -> Ipv6Addr {
        let own = self.exec(
            "ip",
            &["-6", "-o", "addr", "show", "dev", "imp0", "scope", "link"],
        );
        let own = String::from_utf8_lossy(&own.stdout).to_string();
        for _ in 0..10 {
            let out = self.exec(
                "ping",
                &[
                    "-6",
                    "-c",
                    "2",
                    "-i",
                    "0.3",
                    "-W",
                    "1",
                    "-n",
                    "ff02::1%imp0",
                ],
            );
            let replies = String::from_utf8_lossy(&out.stdout).to_string();
            // "64 bytes from fe80::69:ff:fe00:2%imp0: icmp_seq=1 ..."
            let found = replies
                .lines()
                .filter_map(|l| l.split(" from ").nth(1)?.split(['%', ' ']).next())
                .filter_map(|a| a.trim_end_matches(':').parse::<Ipv6Addr>().ok())
                .find(|a| !own.contains(&format!("{a}/")));
            if let Some(addr) = found {
                return addr;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        panic!("no link-local address other than the kernel's ({own}) answered on ff02::1");
    }
}

fn ping_three(net: &Net, addr: &str) {
    let out = net.exec(
        "ping",
        &["-6", "-c", "3", "-i", "0.2", "-W", "2", "-n", addr],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("3 packets transmitted, 3 received"),
        "ping -6 {addr}: {}",
        text(&out)
    );
}

fn pattern(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A directory served by `imp serve --http`, removed on drop.
struct Site {
    dir: std::path::PathBuf,
    sha256: String,
}

impl Site {
    fn new(tag: &str, size: usize) -> Site {
        let dir = std::env::temp_dir().join(format!("imp-site6-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let data = pattern(size);
        std::fs::write(dir.join("file.bin"), &data).unwrap();
        Site {
            dir,
            sha256: sha256_hex(&data),
        }
    }

    /// curl `http://[addr]:80/file.bin` in the namespace; checks it byte-exact.
    fn curl_from(&self, net: &Net, addr: &str) {
        let url = format!("http://[{addr}]:80/file.bin");
        let out = net.exec("curl", &["-6", "-g", "-sS", "--max-time", "60", &url]);
        assert!(out.status.success(), "curl {url}: {}", text(&out));
        assert_eq!(
            sha256_hex(&out.stdout),
            self.sha256,
            "curl {url}: sha256 of {} bytes differs",
            out.stdout.len()
        );
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn linux_pings_imp_over_ipv6_and_curl_downloads_byte_exact() {
    let Some(net) = Net::new(0x61) else { return };
    if !have("curl") || !have("ping") {
        return;
    }
    let site = Site::new("serve", 10 << 20);
    let addr = net.addr_arg();
    let (server, line, rest) = net.start_imp(&[
        "serve",
        "--tap",
        "imp0",
        "--addr",
        &addr,
        "--addr",
        "10.206.97.2/24",
        "--http",
        site.dir.to_str().unwrap(),
    ]);
    assert!(
        line.contains(&addr) && line.contains("10.206.97.2/24"),
        "{line}"
    );
    assert!(
        net.wait_reachable(&net.imp, 10),
        "imp's {} never answered",
        net.imp
    );
    ping_three(&net, &net.imp);
    let link_local = net.imp_link_local();
    assert!(
        ipv6_is_link_local(link_local),
        "{link_local} is not link-local"
    );
    ping_three(&net, &format!("{link_local}%imp0"));
    site.curl_from(&net, &net.imp);
    site.curl_from(&net, &format!("{link_local}%25imp0"));
    drop(server);
    drop(rest);
}

/// The kernel's link-local address on `imp0`.
fn kernel_link_local(net: &Net) -> Ipv6Addr {
    let out = net.exec(
        "ip",
        &["-6", "-o", "addr", "show", "dev", "imp0", "scope", "link"],
    );
    let listing = String::from_utf8_lossy(&out.stdout).to_string();
    // "7: imp0    inet6 fe80::.../64 scope link ..."
    listing
        .split_whitespace()
        .skip_while(|w| *w != "inet6")
        .nth(1)
        .and_then(|a| a.split('/').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no link-local address on imp0: {listing}"))
}

/// `imp ping` over the TAP: its output, checked for `count` replies from `host`.
fn imp_pings(net: &Net, args: &[&str], host: &str, count: u32) -> String {
    let count_arg = count.to_string();
    let mut all = vec!["ping", "--tap", "imp0", "-c", &count_arg, "-i", "200ms"];
    all.extend_from_slice(args);
    all.push(host);
    let out = net.exec(IMP, &all);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "imp {all:?}: {}", text(&out));
    assert!(
        stdout.contains(&format!(
            "{count} packets transmitted, {count} received, 0% packet loss"
        )),
        "imp {all:?}: {stdout}"
    );
    let addr = host.split('%').next().unwrap();
    for seq in 1..=count {
        assert!(
            stdout.contains(&format!(
                "64 bytes from {addr}: icmp_seq={seq} ttl=64 time="
            )),
            "imp {all:?}: no reply {seq} from {addr}: {stdout}"
        );
    }
    assert!(stdout.contains("rtt min/avg/max/mdev = "), "{stdout}");
    stdout
}

#[test]
fn imp_pings_linux_over_ipv6_global_and_link_local() {
    let Some(net) = Net::new(0x64) else { return };
    let addr = net.addr_arg();
    let out = imp_pings(&net, &["--addr", &addr], &net.kernel, 3);
    assert!(
        out.starts_with(&format!("PING {0} ({0}) 56(104) bytes of data", net.kernel)),
        "{out}"
    );
    // A link-local address with its scope, from imp's own link-local address (no
    // --addr at all).
    let link_local = kernel_link_local(&net);
    imp_pings(&net, &[], &format!("{link_local}%imp0"), 2);
    // And without the scope: the link is imp's only one.
    imp_pings(&net, &[], &link_local.to_string(), 2);
    // The wrong scope is refused before anything runs.
    let out = net.exec(
        IMP,
        &["ping", "--tap", "imp0", &format!("{link_local}%eth9")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("imp0"), "{}", text(&out));
}

#[test]
fn curl_downloads_from_imp_serve_ftp_over_ipv6_with_epsv_and_eprt() {
    let Some(net) = Net::new(0x65) else { return };
    if !have("curl") {
        return;
    }
    let site = Site::new("ftp", 3 << 20);
    let addr = net.addr_arg();
    let (server, line, rest) = net.start_imp(&[
        "serve",
        "--tap",
        "imp0",
        "--addr",
        &addr,
        "--ftp",
        site.dir.to_str().unwrap(),
    ]);
    assert!(line.contains("ftp (21)"), "{line}");
    assert!(net.wait_reachable(&net.imp, 10), "imp never answered");
    let url = format!("ftp://[{}]/file.bin", net.imp);
    // curl's default is EPSV; `--ftp-port -` makes it send EPRT with its own address.
    for (mode, extra) in [("EPSV", &[][..]), ("EPRT", &["--ftp-port", "-"][..])] {
        let mut args = vec!["-6", "-g", "-sS", "--max-time", "60", "-v"];
        args.extend_from_slice(extra);
        args.push(&url);
        let out = net.exec("curl", &args);
        assert!(out.status.success(), "curl {mode} {url}: {}", text(&out));
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(
            log.contains(&format!("> {mode}")),
            "curl used no {mode}: {log}"
        );
        assert_eq!(
            sha256_hex(&out.stdout),
            site.sha256,
            "curl {mode} {url}: sha256 of {} bytes differs",
            out.stdout.len()
        );
    }
    drop(server);
    drop(rest);
}

fn ipv6_is_link_local(addr: Ipv6Addr) -> bool {
    addr.segments()[0] & 0xffc0 == 0xfe80
}

/// A Python TCP peer in the namespace: `send` connects to `[addr]:port` and sends
/// `bytes` of a pattern; `recv` listens on `[::]:port` and prints how many bytes came
/// and their sha256.
fn python_peer(net: &Net, role: &str, addr: &str, port: u16, bytes: usize) -> ChildGuard {
    let script = r#"
import hashlib, socket, sys, time
role, addr, port, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if role == "send":
    data = bytes((i * 7 + 3) % 251 for i in range(n))
    for _ in range(100):
        try:
            s = socket.create_connection((addr, port), timeout=10)
            break
        except OSError:
            time.sleep(0.1)
    s.sendall(data)
    s.close()
    print(len(data), hashlib.sha256(data).hexdigest(), flush=True)
else:
    l = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("::", port))
    l.listen(1)
    print("ready", flush=True)
    c, peer = l.accept()
    h, got = hashlib.sha256(), 0
    while True:
        b = c.recv(1 << 16)
        if not b:
            break
        h.update(b)
        got += len(b)
    print(got, h.hexdigest(), peer[0], flush=True)
"#;
    net.ns.spawn(
        "python3",
        &[
            "-c",
            script,
            role,
            addr,
            &port.to_string(),
            &bytes.to_string(),
        ],
    )
}

#[test]
fn imp_ttcp_over_ipv6_both_ways_with_a_python_peer() {
    let Some(net) = Net::new(0x62) else { return };
    if !have("python3") {
        return;
    }
    let addr = net.addr_arg();
    // imp receives: Linux (Python) connects to imp's IPv6 address and sends.
    let (imp, line, rest) = net.start_imp(&[
        "ttcp",
        "--tap",
        "imp0",
        "--addr",
        &addr,
        "--listen",
        "5001",
        "--timeout",
        "20s",
    ]);
    assert!(line.contains("imp ttcp"), "{line}");
    let bytes = 3 << 20;
    let sender = python_peer(&net, "send", &net.imp, 5001, bytes);
    let sent = wait_limited(sender, Duration::from_secs(60));
    assert!(sent.status.success(), "python sender: {}", text(&sent));
    let out = wait_limited(imp, Duration::from_secs(30));
    let rest = rest.join().unwrap();
    assert!(
        rest.contains(&format!("received {bytes} bytes from [{}]", net.kernel)),
        "{rest}{}",
        text(&out)
    );
    // imp sends: imp connects to Linux's IPv6 address, Python counts what arrives.
    let receiver = python_peer(&net, "recv", "::", 5002, 0);
    let mut receiver = receiver;
    let stdout = receiver.0.as_mut().unwrap().stdout.take().unwrap();
    let mut reader = BufReader::new(stdout);
    let mut ready = String::new();
    reader.read_line(&mut ready).unwrap();
    assert_eq!(ready.trim(), "ready");
    let peer = format!("[{}]:5002", net.kernel);
    let sent = wait_limited(
        net.ns.spawn(
            IMP,
            &[
                "ttcp",
                "--tap",
                "imp0",
                "--addr",
                &addr,
                "--connect",
                &peer,
                "--bytes",
                "2M",
            ],
        ),
        Duration::from_secs(60),
    );
    assert!(sent.status.success(), "imp ttcp --connect: {}", text(&sent));
    let mut report = String::new();
    reader.read_line(&mut report).unwrap();
    let fields: Vec<&str> = report.split_whitespace().collect();
    assert_eq!(fields.first(), Some(&"2097152"), "{report}");
    assert_eq!(fields.get(2).copied(), Some(net.imp.as_str()), "{report}");
    drop(receiver);
}

/// A router advertisement for `prefix`/64 (on-link, autonomous), sent from the kernel's
/// side of imp0 to all nodes with hop limit 255, as a router would (RFC 4861 §6.2.6).
fn send_router_advertisement(net: &Net, prefix: &str) -> Output {
    let script = r#"
import socket, struct, sys
prefix = socket.inet_pton(socket.AF_INET6, sys.argv[1])
s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 255)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, 255)
s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b"imp0")
# type 134, code 0, checksum (the kernel fills it), hop limit 64, flags 0,
# router lifetime 1800 s, reachable time 0, retrans timer 0
ra = struct.pack("!BBHBBHII", 134, 0, 0, 64, 0, 1800, 0, 0)
# Prefix Information: type 3, length 4 (32 bytes), /64, L and A, valid 1 day,
# preferred 12 h, reserved, the prefix
ra += struct.pack("!BBBBIII", 3, 4, 64, 0xC0, 86400, 43200, 0) + prefix
idx = socket.if_nametoindex("imp0")
for _ in range(3):
    s.sendto(ra, ("ff02::1", 0, 0, idx))
print("sent", flush=True)
"#;
    net.exec("python3", &["-c", script, prefix])
}

#[test]
fn imp_configures_an_address_from_a_linux_router_advertisement() {
    let Some(net) = Net::new(0x63) else { return };
    if !have("python3") || !have("curl") || !have("ping") {
        return;
    }
    let site = Site::new("slaac", 1 << 20);
    // No --addr: imp has only its link-local address and what routers give it.
    let (server, line, rest) = net.start_imp(&[
        "serve",
        "--tap",
        "imp0",
        "--http",
        site.dir.to_str().unwrap(),
    ]);
    assert!(line.contains("autoconfigured"), "{line}");
    let link_local = net.imp_link_local();
    let prefix: Ipv6Addr = "fd00:63:1::".parse().unwrap();
    // The address SLAAC forms: the prefix and the interface identifier imp's
    // link-local address has (RFC 4862 §5.5.3 d).
    let id = link_local.to_bits() & u128::from(u64::MAX);
    let slaac = Ipv6Addr::from_bits(prefix.to_bits() | id).to_string();
    // The kernel needs a route to the prefix: put its own address on it.
    net.ns.ip(&[
        "-6",
        "addr",
        "add",
        "fd00:63:1::1/64",
        "dev",
        "imp0",
        "nodad",
    ]);
    assert!(
        !net.wait_reachable(&slaac, 1),
        "{slaac} answered before any router advertisement"
    );
    let sent = send_router_advertisement(&net, &prefix.to_string());
    assert!(sent.status.success(), "the RA sender: {}", text(&sent));
    assert!(
        net.wait_reachable(&slaac, 10),
        "imp never answered on {slaac} after the router advertisement"
    );
    ping_three(&net, &slaac);
    site.curl_from(&net, &slaac);
    drop(server);
    drop(rest);
}
