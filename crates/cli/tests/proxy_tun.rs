//! `imp proxy` (tun2socks) against the kernel, in three namespaces the test creates and
//! removes: C, the client, whose only route is a TUN device; P, where imp runs and
//! holds the TUN's file descriptor (the device is created in P, imp attaches to it,
//! then it moves to C), with a veth to S; S, the servers (python3's http.server,
//! dnsmasq, and a small SOCKS5 server in python). curl in C downloads from S through
//! imp byte-exact, a DNS query from C is answered by S's dnsmasq through imp, and the
//! same again through the SOCKS5 server. Needs root, curl, python3 and dnsmasq; skips
//! without them (fails instead under `IMP_REQUIRE_ROOT`). Run under
//! `flock /tmp/imp-netns.lock` beside other namespace tests.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

#[path = "../../impnet/tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{ChildGuard, NetNs, can_run, have, text};
use sha2::{Digest, Sha256};

const IMP: &str = env!("CARGO_BIN_EXE_imp");

/// S's address on the veth.
const SERVER: &str = "10.207.1.2";

/// A DNS client: one A query for imp.test to SERVER:53, prints the answer's address.
const DNS_QUERY: &str = r#"
import socket, struct, sys
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
q += b"\x03imp\x04test\x00" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
s.sendto(q, (sys.argv[1], 53))
r, _ = s.recvfrom(512)
assert r[:2] == b"\x12\x34", r
print(socket.inet_ntoa(r[-4:]))
"#;

/// A SOCKS5 server (RFC 1928, no authentication): CONNECT and UDP ASSOCIATE.
const SOCKS5: &str = r#"
import socket, struct, sys, threading
def addr(b, i):
    t = b[i]
    if t == 1:
        return socket.inet_ntoa(b[i+1:i+5]), struct.unpack(">H", b[i+5:i+7])[0], i+7
    return socket.inet_ntop(socket.AF_INET6, b[i+1:i+17]), struct.unpack(">H", b[i+17:i+19])[0], i+19
def pipe(a, b):
    while True:
        d = a.recv(65536)
        if not d:
            b.shutdown(socket.SHUT_WR); return
        b.sendall(d)
def exact(c, n):
    d = b""
    while len(d) < n:
        x = c.recv(n - len(d))
        if not x: raise EOFError
        d += x
    return d
def serve(c):
    n = exact(c, 2)[1]; exact(c, n); c.sendall(b"\x05\x00")
    h = exact(c, 4)
    rest = exact(c, 6 if h[3] == 1 else 18)
    host, port, _ = addr(h + rest, 3)
    if h[1] == 1:
        u = socket.create_connection((host, port))
        c.sendall(b"\x05\x00\x00\x01" + socket.inet_aton(u.getsockname()[0]) + struct.pack(">H", u.getsockname()[1]))
        threading.Thread(target=pipe, args=(c, u), daemon=True).start()
        pipe(u, c)
    elif h[1] == 3:
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.bind((sys.argv[1], 0))
        c.sendall(b"\x05\x00\x00\x01" + socket.inet_aton(sys.argv[1]) + struct.pack(">H", u.getsockname()[1]))
        client = [None]
        def relay():
            while True:
                d, frm = u.recvfrom(65536)
                if frm == client[0] or client[0] is None and d[:3] == b"\0\0\0":
                    client[0] = frm
                    h, p, i = addr(d, 3)
                    u.sendto(d[i:], (h, p))
                else:
                    u.sendto(b"\0\0\0\x01" + socket.inet_aton(frm[0]) + struct.pack(">H", frm[1]) + d, client[0])
        threading.Thread(target=relay, daemon=True).start()
        c.recv(1)
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((sys.argv[1], 1080)); l.listen(64)
print("ready", flush=True)
while True:
    c, _ = l.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

fn pattern(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
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

fn sha256(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The three namespaces and what runs in them.
struct Setup {
    client: NetNs,
    proxy: NetNs,
    server: NetNs,
    _children: Vec<ChildGuard>,
    site: std::path::PathBuf,
    /// The proxy's first line of output.
    first_line: String,
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.site);
    }
}

/// Start `program args` in `ns` and wait for the first line of its output.
fn start_ready(ns: &NetNs, program: &str, args: &[&str]) -> ChildGuard {
    start_with_line(ns, program, args).0
}

/// [`start_ready`], and the line.
fn start_with_line(ns: &NetNs, program: &str, args: &[&str]) -> (ChildGuard, String) {
    let mut child = ns.spawn(program, args);
    let stdout = child.0.as_mut().unwrap().stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    if line.is_empty() {
        panic!("{program} {args:?} exited: {}", text(&child.wait()));
    }
    (child, line)
}

/// Wait until something listens on TCP `port` in `ns`.
fn wait_listening(ns: &NetNs, port: u16) {
    for _ in 0..100 {
        let out = ns.exec("ss", &["-Htln", &format!("sport = :{port}")]);
        if !out.stdout.is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("nothing listens on port {port}");
}

fn setup(site: &[u8], proxy_args: &[&str]) -> Option<Setup> {
    if !can_run() {
        return None;
    }
    for tool in ["curl", "python3", "dnsmasq", "ss"] {
        if !have(tool) {
            return None;
        }
    }
    let (client, proxy, server) = (NetNs::new(), NetNs::new(), NetNs::new());
    // One directory per test: the tests of this file run at once, and a shared one
    // would let one test's curl truncate the file the other is reading.
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "imp-proxy-site-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("file.bin"), site).unwrap();
    // P <-> S over a veth.
    proxy.ip(&["link", "add", "vp", "type", "veth", "peer", "name", "vs"]);
    proxy.ip(&["link", "set", "vs", "netns", &server.name]);
    proxy.ip(&["addr", "add", "10.207.1.1/24", "dev", "vp"]);
    proxy.ip(&["link", "set", "vp", "up"]);
    server.ip(&["addr", "add", &format!("{SERVER}/24"), "dev", "vs"]);
    server.ip(&["link", "set", "vs", "up"]);
    let mut children = Vec::new();
    let dir_text = dir.to_str().unwrap();
    let http = [
        "-m",
        "http.server",
        "8080",
        "--bind",
        SERVER,
        "-d",
        dir_text,
    ];
    children.push(server.spawn("python3", &http));
    let dns = [
        "--no-daemon",
        "--conf-file=/dev/null",
        "--no-resolv",
        "--no-hosts",
        "--bind-interfaces",
        &format!("--listen-address={SERVER}"),
        "--address=/imp.test/10.9.8.7",
        "--pid-file=",
        "--user=root",
    ];
    children.push(server.spawn("dnsmasq", &dns));
    children.push(start_ready(&server, "python3", &["-c", SOCKS5, SERVER]));
    wait_listening(&server, 8080);
    // The TUN: created in P, imp attaches, then it moves to C.
    // With --threads, a multi-queue TUN: a queue for each shard.
    let mut tuntap = vec!["tuntap", "add", "dev", "pt0", "mode", "tun"];
    if proxy_args.contains(&"--threads") {
        tuntap.push("multi_queue");
    }
    proxy.ip(&tuntap);
    let mut args = vec!["proxy", "--tun", "pt0", "--addr", "10.207.0.2/24"];
    args.extend_from_slice(proxy_args);
    let (imp, first_line) = start_with_line(&proxy, IMP, &args);
    children.push(imp);
    proxy.ip(&["link", "set", "pt0", "netns", &client.name]);
    client.ip(&["addr", "add", "10.207.0.1/24", "dev", "pt0"]);
    client.ip(&["link", "set", "pt0", "up"]);
    client.ip(&["route", "add", "default", "dev", "pt0"]);
    Some(Setup {
        client,
        proxy,
        server,
        _children: children,
        site: dir,
        first_line,
    })
}

/// curl in C downloads the file from S's HTTP server through imp; the DNS query from
/// C is answered by S's dnsmasq through imp. The proxy's first line (None when the
/// test cannot run here).
fn download_and_resolve(proxy_args: &[&str]) -> Option<String> {
    let site = pattern(8 << 20);
    let setup = setup(&site, proxy_args)?;
    let url = format!("http://{SERVER}:8080/file.bin");
    let out_file = setup.site.join("got.bin");
    let out_text = out_file.to_str().unwrap();
    let curl = setup
        .client
        .exec("curl", &["-sS", "--max-time", "60", "-o", out_text, &url]);
    assert!(
        curl.status.success(),
        "curl through imp proxy: {}",
        text(&curl)
    );
    let got = std::fs::read(&out_file).unwrap();
    assert_eq!(got.len(), site.len(), "length");
    assert_eq!(sha256(&got), sha256(&site), "byte-exact");
    let dns = setup.client.exec("python3", &["-c", DNS_QUERY, SERVER]);
    assert!(
        dns.status.success(),
        "DNS through imp proxy: {}",
        text(&dns)
    );
    assert_eq!(String::from_utf8_lossy(&dns.stdout).trim(), "10.9.8.7");
    // The proxy's own namespace was not on the path of the client's packets: its
    // only way to S is the veth, and its TUN left for C.
    let links = setup.proxy.exec("ip", &["-o", "link"]);
    assert!(!String::from_utf8_lossy(&links.stdout).contains("pt0"));
    let _ = &setup.server;
    Some(setup.first_line.clone())
}

#[test]
fn curl_and_dns_through_imp_proxy() {
    download_and_resolve(&[]);
}

#[test]
fn curl_and_dns_through_imp_proxy_and_socks5() {
    let socks = format!("{SERVER}:1080");
    download_and_resolve(&["--socks5", &socks]);
}

/// A plain TUN (no offloads), which the proxy reads and writes in io_uring batches
/// (where the kernel has io_uring), through SOCKS5; and the same one packet per
/// system call (`--no-batch`).
#[test]
fn curl_and_dns_through_imp_proxy_on_a_plain_tun() {
    let socks = format!("{SERVER}:1080");
    download_and_resolve(&["--no-offloads", "--socks5", &socks]);
    download_and_resolve(&["--no-offloads", "--no-batch", "--socks5", &socks]);
}

/// Two shards over a two-queue TUN: each flow (the download, the DNS query) is
/// relayed by the shard its addresses and ports pick, whichever queue the kernel
/// gives its packets to.
#[test]
fn curl_and_dns_through_a_sharded_imp_proxy() {
    if let Some(first_line) = download_and_resolve(&["--threads", "2"]) {
        assert!(first_line.contains("in 2 shards"), "{first_line}");
    }
}

/// Python in S: an echo server on port 9000 that keeps every connection open.
const HOLD_SERVER: &str = r#"
import asyncio, sys
async def main():
    async def echo(r, w):
        while data := await r.read(100):
            w.write(data)
            await w.drain()
    server = await asyncio.start_server(echo, sys.argv[1], 9000, backlog=512)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()
asyncio.run(main())
"#;

/// Python in C: open argv[2] connections to argv[1]:9000 at once, each given 3 s to
/// connect and echo its own line; print how many did, with every one still open.
const OPEN_MANY: &str = r#"
import asyncio, sys
async def one(i):
    try:
        r, w = await asyncio.wait_for(asyncio.open_connection(sys.argv[1], 9000), 3)
        line = f"connection {i}\n".encode()
        w.write(line)
        await w.drain()
        got = await asyncio.wait_for(r.readexactly(len(line)), 3)
        assert got == line, (got, line)
        return w
    except (asyncio.TimeoutError, OSError):
        return None
async def main():
    held = await asyncio.gather(*(one(i) for i in range(int(sys.argv[2]))))
    print(sum(w is not None for w in held))
asyncio.run(main())
"#;

/// `--max-memory` holds: the proxy takes exactly as many connections as the cap it
/// announces, relays each of them, and leaves the others' SYNs unanswered.
#[test]
fn max_memory_caps_connections() {
    let Some(setup) = setup(b"", &["--buffer-size", "16K", "--max-memory", "10M"]) else {
        return;
    };
    let announced = setup.first_line.clone();
    let cap: usize = announced
        .split("at most ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no cap in the proxy's first line: {announced}"));
    assert!(cap > 0, "{announced}");
    let _hold = start_ready(&setup.server, "python3", &["-c", HOLD_SERVER, SERVER]);
    let tries = (cap + 8).to_string();
    let out = setup
        .client
        .exec("python3", &["-c", OPEN_MANY, SERVER, &tries]);
    assert!(out.status.success(), "{}", text(&out));
    let opened: usize = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert_eq!(
        opened, cap,
        "connections through a proxy announcing: {announced}"
    );
}

#[test]
fn bad_options_are_named() {
    let cases: [(&[&str], &str); 7] = [
        (&["proxy", "--addr", "10.0.0.2/24"], "--tun"),
        (&["proxy", "--tap", "t0", "--addr", "10.0.0.2/24"], "--tun"),
        (
            &[
                "proxy",
                "--tun",
                "t0",
                "--addr",
                "10.0.0.2/24",
                "--socks5",
                "nowhere",
            ],
            "--socks5",
        ),
        (
            &[
                "proxy",
                "--tun",
                "t0",
                "--addr",
                "10.0.0.2/24",
                "--udp-idle",
                "0",
            ],
            "--udp-idle",
        ),
        (
            &[
                "proxy",
                "--tun",
                "t0",
                "--addr",
                "10.0.0.2/24",
                "--max-memory",
                "8M",
            ],
            "--max-memory",
        ),
        (
            &[
                "proxy",
                "--tun",
                "t0",
                "--addr",
                "10.0.0.2/24",
                "--buffer-size",
                "10",
            ],
            "--buffer-size",
        ),
        (
            &[
                "proxy",
                "--tun",
                "t0",
                "--addr",
                "10.0.0.2/24",
                "--max-memory",
                "64M",
                "--threads",
                "2",
            ],
            "--threads 2 with --max-memory",
        ),
    ];
    for (args, named) in cases {
        let out = std::process::Command::new(IMP).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(named),
            "{args:?} should name {named}: {stderr}"
        );
    }
}
