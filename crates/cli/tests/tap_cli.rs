//! The `imp` binary's device commands against the Linux kernel, in network namespaces
//! the tests create (the interop harness of `crates/impnet/tests/common`): `curl` from
//! `imp serve --http` (plain and impaired, and with TCP Fast Open), `ping` both ways, `imp ttcp` with `nc`,
//! `imp link` between two namespaces, and each error path of the CLI. Needs root;
//! each test skips, saying why, without it or without a tool it uses.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

#[path = "../../impnet/tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{ChildGuard, NetNs, can_run, have, text, wait_limited};
use sha2::{Digest, Sha256};

const IMP: &str = env!("CARGO_BIN_EXE_imp");

/// A namespace with a persistent TAP `imp0` whose kernel side is 10.205.S.1/24, up;
/// imp (the binary, run in the namespace) attaches to it as 10.205.S.2/24.
struct Net {
    ns: NetNs,
    kernel: String,
    imp: String,
}

impl Net {
    fn new(subnet: u8) -> Option<Net> {
        if !can_run() {
            return None;
        }
        let ns = NetNs::new();
        ns.ip(&["tuntap", "add", "dev", "imp0", "mode", "tap"]);
        let kernel = format!("10.205.{subnet}.1");
        ns.ip(&["addr", "add", &format!("{kernel}/24"), "dev", "imp0"]);
        ns.ip(&["link", "set", "imp0", "up"]);
        Some(Net {
            ns,
            kernel,
            imp: format!("10.205.{subnet}.2"),
        })
    }

    fn addr_arg(&self) -> String {
        format!("{}/24", self.imp)
    }

    /// `imp ARGS...` run in the namespace; waits for its first line of output (its
    /// startup line) and returns it with the running process.
    fn start_imp(&self, args: &[&str]) -> (ChildGuard, String) {
        let (child, line, _) = self.start_imp_output(args);
        (child, line)
    }

    /// As `start_imp`, also giving the rest of imp's output once it exits.
    fn start_imp_output(
        &self,
        args: &[&str],
    ) -> (ChildGuard, String, std::thread::JoinHandle<String>) {
        let mut child = self.ns.spawn(IMP, args);
        let stdout = child.0.as_mut().unwrap().stdout.take().unwrap();
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        reader.read_line(&mut line).expect("read imp's first line");
        if line.is_empty() {
            let out = child.wait();
            panic!(
                "imp {args:?} exited: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // Keep draining stdout so imp never blocks on a full pipe.
        let rest = std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = reader.read_to_string(&mut rest);
            rest
        });
        (child, line, rest)
    }

    /// `imp ARGS...` run in the namespace to completion, with a time limit.
    fn run_imp(&self, args: &[&str], limit: Duration) -> Output {
        let child = self.ns.spawn(IMP, args);
        wait_limited(child, limit)
    }

    fn exec(&self, program: &str, args: &[&str]) -> Output {
        self.ns.exec(program, args)
    }
}

/// Send a signal to a child (imp itself: `ip netns exec` execs it in place).
fn signal(child: &ChildGuard, sig: i32) {
    let pid = child.0.as_ref().unwrap().id() as i32;
    // SAFETY: kill has no memory arguments; the pid is our own live child.
    unsafe { libc::kill(pid, sig) };
}

/// A directory with `size` bytes of pseudo-random data in `file.bin`, removed on drop.
struct Site {
    dir: PathBuf,
    sha256: String,
}

impl Site {
    fn new(tag: &str, size: usize) -> Site {
        let dir = std::env::temp_dir().join(format!("imp-site-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let data = pattern(size);
        std::fs::write(dir.join("file.bin"), &data).unwrap();
        std::fs::write(dir.join("index.html"), b"<h1>imp</h1>\n").unwrap();
        Site {
            dir,
            sha256: sha256(&data),
        }
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

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

fn sha256_file(path: &Path) -> String {
    let mut file = std::fs::File::open(path).expect("downloaded file");
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// curl FILE from imp serve; returns seconds taken (printed, never asserted). Checks
/// size and sha256; `max_secs` only keeps a hung transfer from hanging the test.
fn curl_file(net: &Net, site: &Site, max_secs: u32) -> f64 {
    curl_file_with(net, site, max_secs, &[])
}

/// [`curl_file`] with more curl options (`extra`, before the URL).
fn curl_file_with(net: &Net, site: &Site, max_secs: u32, extra: &[&str]) -> f64 {
    let out_path = site.dir.with_extension("download");
    let url = format!("http://{}/file.bin", net.imp);
    let max_time = max_secs.to_string();
    let mut args = vec![
        "-sS",
        "--max-time",
        &max_time,
        "-o",
        out_path.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.push(&url);
    let start = Instant::now();
    let out = net.exec("curl", &args);
    let secs = start.elapsed().as_secs_f64();
    assert!(out.status.success(), "curl: {}", text(&out));
    let got = sha256_file(&out_path);
    let _ = std::fs::remove_file(&out_path);
    assert_eq!(got, site.sha256, "sha256 of the download differs");
    secs
}

#[test]
fn curl_downloads_100_mb_from_imp_serve() {
    let Some(net) = Net::new(1) else { return };
    if !have("curl") {
        return;
    }
    let size = 100 << 20;
    let site = Site::new("plain", size);
    let (server, _, rest) = serve_http(&net, &site, &[]);
    // A hang guard, not a throughput test: generous for a loaded machine.
    let secs = curl_file(&net, &site, 180);
    println!(
        "curl: 100 MiB from imp serve in {secs:.2} s ({:.0} Mbit/s)",
        size as f64 * 8.0 / secs / 1e6
    );
    // Keep-alive, HEAD and 404 through curl, on one connection.
    let base = format!("http://{}", net.imp);
    let (index, missing) = (format!("{base}/"), format!("{base}/missing"));
    let out = net.exec(
        "curl",
        &[
            "-sS",
            "--max-time",
            "5",
            "-w",
            "%{http_code} %{num_connects}\n",
            "-o",
            "/dev/null",
            &index,
            "-o",
            "/dev/null",
            &missing,
        ],
    );
    let codes = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(codes, "200 1\n404 0\n", "{}", text(&out));
    let out = net.exec(
        "curl",
        &["-sS", "--max-time", "5", "-I", &format!("{base}/file.bin")],
    );
    let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200 ok"), "{head}");
    assert!(head.contains("content-length: 104857600"), "{head}");
    assert!(head.contains("accept-ranges: bytes"), "{head}");
    check_range_and_traversal(&net, &site);
    // A clean stop on SIGTERM.
    stop_serve(server, rest, 9);
}

/// Many keep-alive connections at once, each fetching a large file several times over
/// it (the W6 cell whose tail latency was the worst): every response arrives whole and
/// byte-exact, every client keeps its one connection, and imp counts exactly those.
#[test]
fn many_keep_alive_connections_each_get_every_large_response() {
    const CLIENTS: usize = 24;
    const REQUESTS: usize = 4;
    let Some(net) = Net::new(11) else { return };
    if !have("curl") {
        return;
    }
    let site = Site::new("many", 1 << 20);
    let (server, _, rest) = serve_http(&net, &site, &[]);
    let url = format!("http://{}/file.bin", net.imp);
    let outputs = |client: usize| -> Vec<PathBuf> {
        (0..REQUESTS)
            .map(|i| site.dir.with_extension(format!("c{client}-{i}")))
            .collect()
    };
    // All the clients at once; each asks REQUESTS times over one connection.
    let clients: Vec<ChildGuard> = (0..CLIENTS)
        .map(|client| {
            let paths = outputs(client);
            let mut args = vec!["-sS", "--max-time", "120", "-w", "%{num_connects}\n"];
            for path in &paths {
                args.extend(["-o", path.to_str().unwrap(), url.as_str()]);
            }
            net.ns.spawn("curl", &args)
        })
        .collect();
    let mut connections = 0;
    for client in clients {
        let out = wait_limited(client, Duration::from_secs(150));
        assert!(out.status.success(), "curl: {}", text(&out));
        let connects: Vec<usize> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect();
        assert_eq!(connects.len(), REQUESTS, "{}", text(&out));
        connections += connects.iter().sum::<usize>();
    }
    let mut whole = 0;
    for client in 0..CLIENTS {
        for path in outputs(client) {
            whole += usize::from(sha256_file(&path) == site.sha256);
            let _ = std::fs::remove_file(&path);
        }
    }
    assert_eq!(whole, CLIENTS * REQUESTS, "responses whole and byte-exact");
    assert_eq!(connections, CLIENTS, "one keep-alive connection per client");
    stop_serve(server, rest, CLIENTS);
}

/// `imp serve --batch` reads and writes its TAP in io_uring batches (up to 32 frames a
/// read call, a turn's frames in one write call): curl's exchanges through it arrive
/// byte for byte, a 1 MiB file and small responses over one keep-alive connection, as
/// do several clients at once. Where the kernel has no io_uring imp says so on
/// standard error and serves one frame per call (`IMP_REQUIRE_IO_URING` makes that a
/// failure).
#[test]
fn curl_gets_every_byte_through_a_batched_tap() {
    const CLIENTS: usize = 8;
    let Some(net) = Net::new(12) else { return };
    if !have("curl") {
        return;
    }
    let site = Site::new("batched", 1 << 20);
    let (server, line, rest) = serve_http(&net, &site, &["--batch"]);
    let batched = line.contains("batched through io_uring");
    assert!(
        batched || std::env::var_os("IMP_REQUIRE_IO_URING").is_none(),
        "not batched: {line}"
    );
    curl_file(&net, &site, 60);
    // The index and a 404 over the same connection: small frames both ways.
    let base = format!("http://{}", net.imp);
    let index_path = site.dir.with_extension("index");
    let out = net.exec(
        "curl",
        &[
            "-sS",
            "--max-time",
            "10",
            "-w",
            "%{http_code} %{num_connects}\n",
            "-o",
            index_path.to_str().unwrap(),
            &format!("{base}/"),
            "-o",
            "/dev/null",
            &format!("{base}/missing"),
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "200 1\n404 0\n",
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read(&index_path).unwrap(), b"<h1>imp</h1>\n");
    let _ = std::fs::remove_file(&index_path);
    // Several clients at once: their frames share the batches.
    let url = format!("http://{}/file.bin", net.imp);
    let paths: Vec<PathBuf> = (0..CLIENTS)
        .map(|c| site.dir.with_extension(format!("b{c}")))
        .collect();
    let clients: Vec<ChildGuard> = paths
        .iter()
        .map(|path| {
            net.ns.spawn(
                "curl",
                &[
                    "-sS",
                    "--max-time",
                    "60",
                    "-o",
                    path.to_str().unwrap(),
                    &url,
                ],
            )
        })
        .collect();
    for client in clients {
        let out = wait_limited(client, Duration::from_secs(90));
        assert!(out.status.success(), "curl: {}", text(&out));
    }
    for path in &paths {
        assert_eq!(sha256_file(path), site.sha256, "{}", path.display());
        let _ = std::fs::remove_file(path);
    }
    let out = stop_serve(server, rest, CLIENTS + 2);
    if !batched {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("imp serve: imp0: one frame per system call (no io_uring"),
            "{stderr}"
        );
        println!("not batched here: {stderr}");
    }
}

/// `imp serve --http` of `site` on the namespace's TAP, with `extra` arguments: the
/// server, its first line (checked to name the HTTP service) and the rest of its output.
fn serve_http(
    net: &Net,
    site: &Site,
    extra: &[&str],
) -> (ChildGuard, String, std::thread::JoinHandle<String>) {
    let addr = net.addr_arg();
    let mut args = vec![
        "serve",
        "--tap",
        "imp0",
        "--addr",
        &addr,
        "--http",
        site.dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (server, line, rest) = net.start_imp_output(&args);
    assert!(line.contains("http (80)"), "{line}");
    (server, line, rest)
}

/// Stops `imp serve` with SIGTERM: it exits cleanly, saying it served `connections`
/// connections. Its output, for more checks.
fn stop_serve(
    server: ChildGuard,
    rest: std::thread::JoinHandle<String>,
    connections: usize,
) -> Output {
    signal(&server, libc::SIGTERM);
    let out = wait_limited(server, Duration::from_secs(5));
    assert!(out.status.success(), "{}", text(&out));
    let rest = rest.join().unwrap();
    let said = format!("imp serve: stopped after {connections} connections");
    assert!(rest.contains(&said), "{rest}");
    out
}

/// curl asks for byte ranges (bytes checked against the file) and for paths that
/// climb out of the served directory (refused, whatever the encoding).
fn check_range_and_traversal(net: &Net, site: &Site) {
    let url = format!("http://{}/file.bin", net.imp);
    let data = pattern(100 << 20);
    for (range, want) in [
        ("0-99", &data[..100]),
        ("1048570-1048600", &data[1_048_570..=1_048_600]),
        ("104857500-", &data[104_857_500..]),
    ] {
        let out = net.exec(
            "curl",
            &[
                "-sS",
                "--max-time",
                "5",
                "-w",
                "%{http_code}",
                "-r",
                range,
                "-o",
                "-",
                &url,
            ],
        );
        let (body, code) = out.stdout.split_at(out.stdout.len() - 3);
        assert_eq!(code, b"206", "range {range}: {}", text(&out));
        assert!(body == want, "range {range}: {} bytes differ", body.len());
    }
    std::fs::write(site.dir.with_extension("secret"), b"outside").unwrap();
    let secret = site.dir.with_extension("secret");
    let name = secret.file_name().unwrap().to_str().unwrap();
    for path in [
        format!("/../{name}"),
        format!("/%2e%2e/{name}"),
        format!("/..%2f{name}"),
    ] {
        let url = format!("http://{}{path}", net.imp);
        let out = net.exec(
            "curl",
            &[
                "-sS",
                "--max-time",
                "5",
                "--path-as-is",
                "-w",
                "%{http_code}",
                "-o",
                "-",
                &url,
            ],
        );
        let reply = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            reply.ends_with("404") || reply.ends_with("400"),
            "{path}: {reply}"
        );
        assert!(!reply.contains("outside"), "{path}: {reply}");
    }
    let _ = std::fs::remove_file(&secret);
}

/// tshark on the namespace's TAP, recording imp's SYN-ACK with its options. imp puts an
/// option in its SYN-ACK only when the kernel's SYN offered it (RFC 7323 §1.3 and §3.2,
/// RFC 2018 §2), so the SYN-ACK alone shows what was negotiated; waiting for the SYN as
/// well raced tshark's start on a loaded machine (the SYN went out before the capture
/// filter was in place).
fn capture_handshake(net: &Net) -> Option<ChildGuard> {
    if !have("tshark") {
        return None;
    }
    let mut child = net.ns.spawn(
        "tshark",
        &[
            "-l",
            "-i",
            "imp0",
            "-a",
            "duration:30",
            "-c",
            "1",
            "-f",
            "tcp[tcpflags] & (tcp-syn|tcp-ack) == (tcp-syn|tcp-ack)",
            "-T",
            "fields",
            "-e",
            "tcp.flags.ack",
            "-e",
            "tcp.options.sack_perm",
            "-e",
            "tcp.options.timestamp.tsval",
            "-e",
            "tcp.options.wscale.shift",
        ],
    );
    // tshark says "Capturing on ..." on stderr once it listens.
    let stderr = child.0.as_mut().unwrap().stderr.take().unwrap();
    let mut reader = BufReader::new(stderr);
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap_or(0) > 0 && !line.contains("Capturing on") {
        line.clear();
    }
    Some(child)
}

/// The kernel's view of its connection with imp (`ss -tin`), sampled until it shows.
fn kernel_tcp_info(net: &Net, until: Instant) -> String {
    while Instant::now() < until {
        let out = net.exec("ss", &["-tin", "dst", &net.imp]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if text.contains("ESTAB") && text.contains("wscale") {
            return text;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    String::new()
}

/// SACK, window scaling and timestamps negotiated between the kernel and imp. `ss`
/// shows `wscale`; for `ts` and `sack` the `ss` of iproute2 6.1 on a newer kernel
/// prints nothing even between two Linux sockets, so the handshake on the wire is
/// the evidence then: imp's SYN-ACK carrying SACK-permitted, timestamps and a window
/// scale is exactly the negotiation (RFC 2018 §2, RFC 7323 §3.2).
fn check_options(ss: &str, handshake: Option<ChildGuard>) {
    assert!(
        ss.contains("wscale:"),
        "ss -ti shows no window scaling: {ss}"
    );
    if ss.contains(" ts") && ss.contains(" sack") {
        return;
    }
    let Some(capture) = handshake else {
        eprintln!("ss shows no ts/sack and tshark is missing: options unchecked");
        return;
    };
    let out = wait_limited(capture, Duration::from_secs(5));
    let fields = String::from_utf8_lossy(&out.stdout).to_string();
    let lines: Vec<&str> = fields.lines().collect();
    assert_eq!(lines.len(), 1, "imp's SYN-ACK: {}", text(&out));
    let f: Vec<&str> = lines[0].split('\t').collect();
    assert!(
        f.len() == 4 && f[0] == "1" && f.iter().skip(1).all(|v| !v.is_empty()),
        "a SYN-ACK without SACK-permitted, timestamps or window scale: {:?}",
        lines[0]
    );
}

#[test]
fn curl_downloads_from_impaired_imp_serve() {
    let Some(net) = Net::new(2) else { return };
    if !have("curl") || !have("ss") {
        return;
    }
    // 20 ms each way and 1% loss each way hold a NewReno sender near 3 Mbit/s
    // (Mathis: MSS/RTT * 1.22/sqrt(p)), so 4 MiB keeps the test under ~20 s.
    let size = 4 << 20;
    let site = Site::new("impaired", size);
    let (_server, line) = net.start_imp(&[
        "serve",
        "--tap",
        "imp0",
        "--addr",
        &net.addr_arg(),
        "--http",
        site.dir.to_str().unwrap(),
        "--impair",
        "delay=20ms,loss=1%",
    ]);
    assert!(line.contains("loss 1%"), "{line}");
    let handshake = capture_handshake(&net);
    let secs = std::thread::scope(|s| {
        let sampler = s.spawn(|| kernel_tcp_info(&net, Instant::now() + Duration::from_secs(25)));
        let secs = curl_file(&net, &site, 180);
        check_options(&sampler.join().unwrap(), handshake);
        secs
    });
    println!(
        "curl: 4 MiB from imp serve (20 ms each way, 1% loss each way) in {secs:.2} s ({:.1} Mbit/s)",
        size as f64 * 8.0 / secs / 1e6
    );
}

/// Scapy's SYN flood from the kernel's side: spoofed sources off the link (imp has no
/// route back, so its SYN-ACKs go nowhere, as to a real flood's forged addresses) at
/// the port imp serves. It says "flooding" once its first round is out, floods until
/// SIGTERM (or `limit` seconds, so a forgotten flood ends), then prints the SYNs sent.
const SYN_FLOOD: &str = r#"
import signal, sys, time
from scapy.all import Ether, IP, TCP, RandIP, RandShort, conf, sendp, get_if_hwaddr
conf.verb = 0
iface, dst, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
stop = False
def done(*_):
    global stop
    stop = True
signal.signal(signal.SIGTERM, done)
frames = [Ether(dst="ff:ff:ff:ff:ff:ff", src=get_if_hwaddr(iface)) /
          IP(src=str(RandIP("198.18.0.0/15")), dst=dst) /
          TCP(sport=int(RandShort()) | 1024, dport=80, flags="S", seq=i * 7919,
              options=[("MSS", 1460)]) for i in range(2000)]
sock = conf.L2socket(iface=iface)
end = time.time() + limit
sent = 0
while not stop and time.time() < end:
    for f in frames:
        sock.send(f)
    if sent == 0:
        print("flooding", flush=True)
    sent += len(frames)
print(sent)
"#;

/// curl downloads from imp serve while a SYN flood keeps imp's backlog (128) full. The
/// flood's 2000 spoofed SYNs fill it within its first round, and it goes on until curl
/// is done, so a half-open connection that times out (after about a minute of SYN-ACK
/// retries) is replaced at once: without SYN cookies every SYN of curl's would be
/// dropped, and curl would give up. So curl's success, however long it takes, is the
/// cookies' doing; its time is printed, never asserted.
#[test]
fn curl_gets_through_a_syn_flood_thanks_to_syn_cookies() {
    let Some(net) = Net::new(7) else { return };
    if !have("curl") || !have("ping") {
        return;
    }
    // Debian's python3 (with python3-scapy) may be shadowed on PATH by another one.
    let Some(python) = ["/usr/bin/python3", "python3"]
        .into_iter()
        .find(|p| net.exec(p, &["-c", "import scapy.all"]).status.success())
    else {
        common::require::skip_for(
            "scapy missing",
            "python3's scapy is missing (Debian: python3-scapy)",
        );
        return;
    };
    let site = Site::new("synflood", 64 << 10);
    let (_server, _) = net.start_imp(&[
        "serve",
        "--tap",
        "imp0",
        "--addr",
        &net.addr_arg(),
        "--http",
        site.dir.to_str().unwrap(),
    ]);
    // imp must know the kernel's MAC before the flood (a broadcast frame is fine for
    // the SYNs themselves): one ping resolves it both ways.
    let ping = net.exec("ping", &["-c", "1", "-W", "2", &net.imp]);
    assert!(ping.status.success(), "ping: {}", text(&ping));
    let mut flood = net
        .ns
        .spawn(python, &["-c", SYN_FLOOD, "imp0", &net.imp, "600"]);
    let mut said = BufReader::new(flood.0.as_mut().unwrap().stdout.take().unwrap());
    let mut line = String::new();
    said.read_line(&mut line).expect("the flood's output");
    assert_eq!(line, "flooding\n", "the flood did not start");
    // A hang guard, not a speed limit: with cookies curl is done in well under a
    // second on an idle machine.
    let secs = curl_file(&net, &site, 120);
    signal(&flood, libc::SIGTERM);
    let out = wait_limited(flood, Duration::from_secs(60));
    let mut rest = String::new();
    let _ = said.read_to_string(&mut rest);
    let sent: u64 = rest.trim().parse().unwrap_or(0);
    assert!(sent >= 2000, "the flood sent {sent} SYNs: {}", text(&out));
    println!("curl through a SYN flood ({sent} spoofed SYNs): {secs:.2} s");
}

/// TCP Fast Open (RFC 7413) with Linux the client: `curl --tcp-fastopen` twice against
/// `imp serve --http --fastopen`. The first connection gets imp's cookie; the second
/// sends its request on the SYN, which imp acknowledges and answers (the kernel's
/// `TcpExtTCPFastOpenActive` counts it; a refused cookie or dropped data would count in
/// `TcpExtTCPFastOpenActiveFail`). Both downloads byte for byte.
#[test]
fn curl_sends_its_request_on_the_syn_to_imp_serve() {
    let Some(net) = Net::new(8) else { return };
    for tool in ["curl", "nstat", "sysctl"] {
        if !have(tool) {
            return;
        }
    }
    let out = net.exec("sysctl", &["-qw", "net.ipv4.tcp_fastopen=1"]);
    assert!(out.status.success(), "sysctl: {}", text(&out));
    let site = Site::new("fastopen", 100_000);
    let (server, line) = net.start_imp(&[
        "serve",
        "--tap",
        "imp0",
        "--addr",
        &net.addr_arg(),
        "--http",
        site.dir.to_str().unwrap(),
        "--fastopen",
    ]);
    assert!(line.contains("http (80)"), "{line}");
    let active = || net.ns.counter("TcpExtTCPFastOpenActive");
    let failed = || net.ns.counter("TcpExtTCPFastOpenActiveFail");
    let (active_before, failed_before) = (active(), failed());
    let download = || curl_file_with(&net, &site, 30, &["--tcp-fastopen"]);
    download();
    assert_eq!(
        active(),
        active_before,
        "no cookie yet: no data on the first SYN"
    );
    download();
    assert_eq!(
        active(),
        active_before + 1,
        "the second request went on the SYN and imp acknowledged it"
    );
    assert_eq!(failed(), failed_before, "no Fast Open attempt failed");
    signal(&server, libc::SIGINT);
    let out = wait_limited(server, Duration::from_secs(5));
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn linux_pings_imp_serve_and_uses_its_echo_service() {
    let Some(net) = Net::new(3) else { return };
    if !have("ping") {
        return;
    }
    let (server, _) = net.start_imp(&["serve", "--tap", "imp0", "--addr", &net.addr_arg()]);
    let out = net.exec("ping", &["-c", "3", "-i", "0.2", "-W", "2", &net.imp]);
    assert!(out.status.success(), "ping: {}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("3 received"));
    if have("nc") {
        let script = format!(
            "printf 'hello imp\\n' | nc -N -w 5 {0} 7; nc -w 1 {0} 19 </dev/null | head -c 148; \
             head -c 100000 /dev/zero | nc -N -w 5 {0} 9 && echo discarded",
            net.imp
        );
        let out = net.exec("sh", &["-c", &script]);
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(stdout.starts_with("hello imp\n"), "{}", text(&out));
        assert!(stdout.contains(" !\"#$%&'()*+,-./0123456789"), "{stdout}");
        assert!(stdout.contains("discarded"), "{stdout}");
    }
    signal(&server, libc::SIGINT);
    let out = wait_limited(server, Duration::from_secs(5));
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn imp_ping_over_tap_gets_replies_from_linux() {
    let Some(net) = Net::new(4) else { return };
    let out = net.run_imp(
        &[
            "ping",
            "--tap",
            "imp0",
            "--addr",
            &net.addr_arg(),
            "-c",
            "3",
            "-i",
            "200ms",
            &net.kernel,
        ],
        Duration::from_secs(10),
    );
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        stdout
            .matches(&format!("bytes from {}: icmp_seq=", net.kernel))
            .count(),
        3,
        "{stdout}"
    );
    assert!(
        stdout.contains("3 packets transmitted, 3 received"),
        "{stdout}"
    );
    // Impaired both ways by 20 ms: the round trip is at least 40 ms. (No upper bound: how
    // much longer it takes is the machine's scheduling.)
    let out = net.run_imp(
        &[
            "ping",
            "--tap",
            "imp0",
            "--addr",
            &net.addr_arg(),
            "-c",
            "2",
            "-i",
            "100ms",
            "--impair",
            "delay=20ms",
            "--json",
            &net.kernel,
        ],
        Duration::from_secs(10),
    );
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let min = report["rtt_min_ms"].as_f64().expect("rtt");
    assert!(min >= 40.0, "rtt {min} ms: {report}");
}

#[test]
fn imp_ttcp_sends_to_and_receives_from_nc() {
    let Some(net) = Net::new(5) else { return };
    if !have("nc") || !have("ss") {
        return;
    }
    // imp -> Linux: nc counts what arrives.
    let sink = net
        .ns
        .spawn("sh", &["-c", "nc -l -s 0.0.0.0 -p 5001 | wc -c"]);
    // Connect only once nc listens (a fixed sleep could be too short on a busy machine).
    let listening = (0..400).any(|_| {
        let out = net.exec("ss", &["-Htln", "sport = :5001"]);
        let up = !out.stdout.is_empty();
        if !up {
            std::thread::sleep(Duration::from_millis(50));
        }
        up
    });
    assert!(listening, "nc never listened on port 5001");
    let out = net.run_imp(
        &[
            "ttcp",
            "--tap",
            "imp0",
            "--addr",
            &net.addr_arg(),
            "--connect",
            &format!("{}:5001", net.kernel),
            "--bytes",
            "20M",
        ],
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("sent 20971520 bytes"));
    // A hang guard: nc ends when imp's FIN arrives.
    let counted = wait_limited(sink, Duration::from_secs(60));
    assert_eq!(
        String::from_utf8_lossy(&counted.stdout).trim(),
        "20971520",
        "{}",
        text(&counted)
    );
    // Linux -> imp: nc sends, imp counts.
    let (receiver, line, rest) = net.start_imp_output(&[
        "ttcp",
        "--tap",
        "imp0",
        "--addr",
        &net.addr_arg(),
        "--listen",
        "5002",
    ]);
    assert!(line.contains("imp ttcp"), "{line}");
    let script = format!(
        "sleep 0.3; head -c 10485760 /dev/urandom | nc -N -w 10 {} 5002",
        net.imp
    );
    let out = net.exec("sh", &["-c", &script]);
    assert!(out.status.success(), "{}", text(&out));
    let out = wait_limited(receiver, Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out));
    let rest = rest.join().unwrap();
    assert!(
        rest.contains("received 10485760 bytes"),
        "{rest}{}",
        text(&out)
    );
}

/// An error run: exit status 1, the message on stderr, and no panic.
fn assert_fails_with(out: &Output, needle: &str) {
    assert_exits_with(out, 1, needle);
}

/// A command line refused before anything opens: exit status 2 (a usage error), the
/// message on stderr, and no panic.
fn assert_refused(out: &Output, needle: &str) {
    assert_exits_with(out, 2, needle);
}

fn assert_exits_with(out: &Output, code: i32, needle: &str) {
    let all = text(out);
    assert_eq!(out.status.code(), Some(code), "{all}");
    assert!(!all.contains("panicked"), "{all}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("imp: "), "{all}");
    assert!(stderr.contains(needle), "expected {needle:?}: {all}");
}

#[test]
fn cli_errors_are_clear_messages_without_panics() {
    let Some(net) = Net::new(6) else { return };
    let addr = net.addr_arg();
    let limit = Duration::from_secs(15);
    // Missing privilege: the same command as nobody, without capabilities.
    if have("setpriv") {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &net.ns.name, "setpriv", "--reuid=65534"])
            .args(["--regid=65534", "--clear-groups", "--inh-caps=-all", IMP])
            .args(["serve", "--tap", "imp9", "--addr", &addr])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let out = wait_limited(ChildGuard(Some(cmd.spawn().unwrap())), limit);
        assert_fails_with(&out, "not permitted to open a TAP or TUN device");
    }
    // Missing device: /dev/net/tun hidden in a private mount namespace.
    if have("unshare") {
        let script =
            format!("mount -t tmpfs none /dev/net && exec {IMP} serve --tap imp0 --addr {addr}");
        let out = net.exec("unshare", &["--mount", "sh", "-c", &script]);
        assert_fails_with(&out, "/dev/net/tun is missing");
    }
    // A name that cannot be an interface: refused before the kernel is asked.
    let out = net.run_imp(
        &["serve", "--tap", "much-too-long-a-name", "--addr", &addr],
        limit,
    );
    assert_refused(&out, "not a network interface name");
    // The TAP is busy: another imp has it.
    let (_first, _) = net.start_imp(&["serve", "--tap", "imp0", "--addr", &addr, "--echo"]);
    let out = net.run_imp(&["serve", "--tap", "imp0", "--addr", &addr], limit);
    assert_fails_with(&out, "busy");
    drop(_first);
    // Port in use: two services on one port.
    let out = net.run_imp(
        &[
            "serve",
            "--tap",
            "imp0",
            "--addr",
            &addr,
            "--echo",
            "--http",
            "/",
            "--http-port",
            "7",
        ],
        limit,
    );
    assert_refused(&out, "--http-port 7 is echo's port");
    // Bad impairment.
    let out = net.run_imp(
        &[
            "serve",
            "--tap",
            "imp0",
            "--addr",
            &addr,
            "--impair",
            "delay=20ms,jitter=3ms",
        ],
        limit,
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "clap usage error: {}",
        text(&out)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("jitter"));
    let ttcp = |target: &str, extra: &[&str]| {
        let mut args = vec![
            "ttcp",
            "--tap",
            "imp0",
            "--addr",
            &addr,
            "--connect",
            target,
        ];
        args.extend_from_slice(extra);
        net.run_imp(&args, limit)
    };
    // Connection refused: nothing listens there.
    let out = ttcp(&format!("{}:4", net.kernel), &[]);
    assert_fails_with(&out, "connection refused");
    // Timeout: nobody has that address.
    let out = ttcp("10.205.6.99:5001", &["--timeout", "1s"]);
    assert_fails_with(&out, "cannot connect to 10.205.6.99:5001");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        stderr.contains("timed out") || stderr.contains("unreachable"),
        "{stderr}"
    );
    // Nobody answers a ping: exit 1 after the wait.
    let out = net.run_imp(
        &[
            "ping",
            "--tap",
            "imp0",
            "--addr",
            &addr,
            "-c",
            "1",
            "-W",
            "500ms",
            "10.205.6.99",
        ],
        limit,
    );
    assert_fails_with(&out, "no echo reply from 10.205.6.99");
    // Reset by peer: the kernel side reads a little, then closes with SO_LINGER 0.
    if have("python3") {
        let script = "
import socket, struct, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 5003))
s.listen(1)
print('ready', flush=True)
c, _ = s.accept()
c.recv(1000)
c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
c.close()
";
        let mut server = net.ns.spawn("python3", &["-u", "-c", script, &net.kernel]);
        let stdout = server.0.as_mut().unwrap().stdout.as_mut().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        assert!(line.contains("ready"), "{line}");
        let out = ttcp(&format!("{}:5003", net.kernel), &["--bytes", "50M"]);
        assert_fails_with(&out, "reset by peer");
    }
    // Device options without a device.
    let out = Command::new(IMP)
        .args(["ttcp", "--connect", "10.0.0.1:5"])
        .output()
        .unwrap();
    assert_refused(&out, "add --tap NAME");
}

#[test]
fn imp_link_joins_two_namespaces_with_delay() {
    if !can_run() || !have("ping") {
        return;
    }
    // imp link creates its TAPs in a namespace of its own; they then move to the two
    // hosts' namespaces (the TAP descriptors keep working across the move).
    let middle = NetNs::new();
    let (a, b) = (NetNs::new(), NetNs::new());
    let mut child = middle.spawn(
        IMP,
        &[
            "link",
            "--tap",
            "lka",
            "--tap",
            "lkb",
            "--impair",
            "delay=20ms",
        ],
    );
    let stdout = child.0.as_mut().unwrap().stdout.take().unwrap();
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.contains("lka <-> lkb"), "{line}");
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    middle.ip(&["link", "set", "lka", "netns", &a.name]);
    middle.ip(&["link", "set", "lkb", "netns", &b.name]);
    a.ip(&["addr", "add", "10.205.100.1/24", "dev", "lka"]);
    b.ip(&["addr", "add", "10.205.100.2/24", "dev", "lkb"]);
    a.ip(&["link", "set", "lka", "up"]);
    b.ip(&["link", "set", "lkb", "up"]);
    let out = a.exec("ping", &["-c", "4", "-i", "0.2", "-W", "2", "10.205.100.2"]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{}", text(&out));
    // rtt min/avg/max/mdev = 40.1/40.3/40.6/0.2 ms
    let stats = stdout
        .lines()
        .find(|l| l.starts_with("rtt"))
        .and_then(|l| l.split('=').nth(1))
        .expect("rtt line")
        .trim()
        .to_string();
    let values: Vec<f64> = stats
        .split(['/', ' '])
        .filter_map(|v| v.parse().ok())
        .collect();
    // At least the 2 x 20 ms the link adds; no upper bound (that is scheduling).
    assert!(values[0] >= 40.0, "rtt {stats}");
    println!("kernel-to-kernel ping through imp link --impair delay=20ms: {stats}");
    signal(&child, libc::SIGTERM);
    let out = wait_limited(child, Duration::from_secs(5));
    assert!(out.status.success(), "{}", text(&out));
}
