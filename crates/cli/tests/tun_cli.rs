//! The `imp` binary over a Linux TUN device (`--tun`: bare IP packets, no Ethernet, no
//! ARP) against the kernel, in network namespaces the tests create and remove: Linux
//! pings imp, curl downloads from `imp serve` byte-exact (with the TUN's offloads,
//! without, and without but with imp's own GRO and GSO), imp pings Linux, and `imp
//! ttcp` exchanges data with `nc`. Needs root; each test skips, saying why, without it
//! or without a tool it uses (fails instead under `IMP_REQUIRE_ROOT`). Run under
//! `flock /tmp/imp-netns.lock` beside other namespace tests.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

#[path = "../../impnet/tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::Output;
use std::time::Duration;

use common::{ChildGuard, NetNs, can_run, have, text, wait_limited};
use sha2::{Digest, Sha256};

const IMP: &str = env!("CARGO_BIN_EXE_imp");

/// A namespace with a persistent TUN `tun0` whose kernel side is 10.206.S.1/24, up;
/// imp (the binary, run in the namespace) attaches to it as 10.206.S.2/24.
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
        ns.ip(&["tuntap", "add", "dev", "tun0", "mode", "tun"]);
        let kernel = format!("10.206.{subnet}.1");
        ns.ip(&["addr", "add", &format!("{kernel}/24"), "dev", "tun0"]);
        ns.ip(&["link", "set", "tun0", "up"]);
        Some(Net {
            ns,
            kernel,
            imp: format!("10.206.{subnet}.2"),
        })
    }

    fn addr_arg(&self) -> String {
        format!("{}/24", self.imp)
    }

    /// `imp ARGS...` in the namespace; waits for its startup line and returns it with
    /// the running process and a thread collecting the rest of its output.
    fn start_imp(&self, args: &[&str]) -> (ChildGuard, String, std::thread::JoinHandle<String>) {
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
        let rest = std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = reader.read_to_string(&mut rest);
            rest
        });
        (child, line, rest)
    }

    fn run_imp(&self, args: &[&str], limit: Duration) -> Output {
        wait_limited(self.ns.spawn(IMP, args), limit)
    }

    fn exec(&self, program: &str, args: &[&str]) -> Output {
        self.ns.exec(program, args)
    }

    /// Wait (at most 5 s) until the kernel runs the TUN: its carrier comes on when imp
    /// attaches, and until the kernel's link watcher has seen that (asynchronously) the
    /// device's queue drops what the kernel sends.
    fn wait_running(&self) {
        for _ in 0..100 {
            let out = self.exec("cat", &["/sys/class/net/tun0/operstate"]);
            let state = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if state == "up" || state == "unknown" {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("tun0 never came up after imp attached");
    }
}

/// Send a signal to a child (imp itself: `ip netns exec` execs it in place).
fn signal(child: &ChildGuard, sig: i32) {
    let pid = child.0.as_ref().unwrap().id() as i32;
    // SAFETY: kill has no memory arguments; the pid is our own live child.
    unsafe { libc::kill(pid, sig) };
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

fn sha256(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Linux pings imp over the TUN, then curl downloads `size` bytes from `imp serve`
/// and the bytes are checked; `extra` are more options for imp serve.
fn ping_and_curl(subnet: u8, extra: &[&str], want_offloads: &str) {
    let Some(net) = Net::new(subnet) else { return };
    if !have("ping") || !have("curl") {
        return;
    }
    let size = 32 << 20;
    let dir = std::env::temp_dir().join(format!("imp-tun-site-{}-{subnet}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let data = pattern(size);
    std::fs::write(dir.join("file.bin"), &data).unwrap();
    let addr = net.addr_arg();
    let mut args = vec![
        "serve",
        "--tun",
        "tun0",
        "--addr",
        &addr,
        "--http",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    if extra.contains(&"--no-offloads") {
        // First a run with offloads, which leaves the persistent TUN with the kernel's
        // offloads on: the run without must turn them off again.
        let out = net.run_imp(
            &[
                "ping",
                "--tun",
                "tun0",
                "--addr",
                &addr,
                "-c",
                "1",
                &net.kernel,
            ],
            Duration::from_secs(10),
        );
        assert!(text(&out).contains("offloads on"), "{}", text(&out));
    }
    let (server, line, rest) = net.start_imp(&args);
    assert!(line.contains("on TUN tun0"), "{line}");
    assert!(line.contains(want_offloads), "{line}");
    net.wait_running();

    let out = net.exec("ping", &["-c", "3", "-i", "0.2", "-W", "2", &net.imp]);
    assert!(out.status.success(), "ping: {}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("3 received"));

    let download = dir.with_extension("download");
    let url = format!("http://{}/file.bin", net.imp);
    let started = std::time::Instant::now();
    // --max-time is a hang guard, not a speed limit.
    let out = net.exec(
        "curl",
        &[
            "-sS",
            "--max-time",
            "120",
            "-o",
            download.to_str().unwrap(),
            &url,
        ],
    );
    let secs = started.elapsed().as_secs_f64();
    assert!(out.status.success(), "curl: {}", text(&out));
    let got = std::fs::read(&download).expect("the download");
    let _ = std::fs::remove_file(&download);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(got.len(), size, "length of the download");
    assert_eq!(
        sha256(&got),
        sha256(&data),
        "sha256 of the download differs"
    );
    println!(
        "curl over TUN ({want_offloads}): {} MiB in {secs:.2} s ({:.0} Mbit/s)",
        size >> 20,
        size as f64 * 8.0 / secs / 1e6
    );
    signal(&server, libc::SIGTERM);
    let out = wait_limited(server, Duration::from_secs(5));
    assert!(out.status.success(), "{}", text(&out));
    let rest = rest.join().unwrap();
    assert!(rest.contains("imp serve: stopped"), "{rest}");
}

#[test]
fn linux_pings_and_curls_imp_over_tun() {
    ping_and_curl(1, &[], "offloads on");
}

#[test]
fn linux_pings_and_curls_imp_over_tun_without_offloads() {
    ping_and_curl(2, &["--no-offloads"], "offloads off");
}

/// imp's own GRO and GSO where the kernel's offloads are off: the download still
/// arrives byte-exact.
#[test]
fn linux_pings_and_curls_imp_over_tun_with_software_gro_and_gso() {
    ping_and_curl(
        4,
        &["--no-offloads", "--gro", "--gso"],
        "offloads off, software GRO and GSO",
    );
}

/// The TUN deleted under a running `imp serve` (its descriptor then reads `EBADFD`
/// forever): imp stops and says why, rather than spinning on the dead descriptor.
#[test]
fn imp_serve_exits_with_a_message_when_its_tun_is_deleted() {
    let Some(net) = Net::new(5) else { return };
    let (mut child, line, rest) = net.start_imp(&[
        "serve",
        "--tun",
        "tun0",
        "--addr",
        &net.addr_arg(),
        "--echo",
    ]);
    assert!(line.contains("imp serve"), "{line}");
    net.wait_running();
    net.ns.ip(&["link", "del", "tun0"]);
    let stderr = child.0.as_mut().unwrap().stderr.take();
    let out = wait_limited(child, Duration::from_secs(20));
    let mut err = String::new();
    if let Some(mut stderr) = stderr {
        let _ = stderr.read_to_string(&mut err);
    }
    let stdout = rest.join().unwrap_or_default();
    assert_eq!(
        out.status.code(),
        Some(1),
        "imp serve did not stop by itself: {}\n{stdout}\n{err}",
        text(&out)
    );
    assert!(err.contains("device was closed"), "{err}");
}

#[test]
fn imp_pings_linux_and_ttcp_talks_to_nc_over_tun() {
    let Some(net) = Net::new(3) else { return };
    let out = net.run_imp(
        &[
            "ping",
            "--tun",
            "tun0",
            "--addr",
            &net.addr_arg(),
            "-c",
            "4",
            "-i",
            "200ms",
            &net.kernel,
        ],
        Duration::from_secs(10),
    );
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{}", text(&out));
    // The kernel may drop its reply to the first request: imp sends it the moment it
    // attaches, and the TUN's queue passes nothing until the kernel's link watcher has
    // seen the carrier come on (see `wait_running`). Every later one must come back.
    for seq in 2..=4 {
        let reply = format!("bytes from {}: icmp_seq={seq} ", net.kernel);
        assert!(stdout.contains(&reply), "no reply {seq}: {}", text(&out));
    }
    if !have("nc") {
        return;
    }
    // imp -> Linux: nc counts what arrives.
    let sink = net
        .ns
        .spawn("sh", &["-c", "nc -l -s 0.0.0.0 -p 5001 | wc -c"]);
    std::thread::sleep(Duration::from_millis(300));
    let out = net.run_imp(
        &[
            "ttcp",
            "--tun",
            "tun0",
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
    let counted = wait_limited(sink, Duration::from_secs(5));
    assert_eq!(
        String::from_utf8_lossy(&counted.stdout).trim(),
        "20971520",
        "{}",
        text(&counted)
    );
}

/// The device options are checked before anything opens: `--tun` and `--tap` exclude
/// each other, a bad name is refused with the option named.
#[test]
fn tun_options_are_checked() {
    let refuse = |args: &[&str], needle: &str| {
        let out = std::process::Command::new(IMP).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains(needle), "{}", text(&out));
    };
    refuse(
        &[
            "serve",
            "--tun",
            "t0",
            "--tap",
            "t1",
            "--addr",
            "10.0.0.2/24",
        ],
        "--tun",
    );
    refuse(
        &["ping", "--tun", "a/b", "--addr", "10.0.0.2/24", "10.0.0.1"],
        "--tun",
    );
    refuse(&["serve", "--tun", "t0"], "--addr");
}
