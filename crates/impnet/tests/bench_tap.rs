//! Throughput over a TAP, imp against the Linux kernel, next to Linux against Linux over
//! a veth pair, in namespaces the harness creates. A measurement, not a check: run
//! `cargo test -p impnet --release --test bench_tap -- --ignored --nocapture`.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::{Link, NetNs, have};
use impnet::TcpStream;

const TOTAL: usize = 200 << 20;

/// Kernel side: `sink` counts what arrives; `source` sends TOTAL bytes. argv: addr
/// port mode total.
const PY: &str = "
import socket, sys, time
addr, port, mode, total = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((addr, port))
s.listen(1)
print('ready', flush=True)
c, _ = s.accept()
buf = bytearray(1 << 20)
if mode == 'sink':
    got = 0
    t = time.time()
    view = memoryview(buf)
    while True:
        n = c.recv_into(view)
        if n == 0: break
        got += n
    print('got', got, time.time() - t, flush=True)
else:
    chunk = bytes(1 << 20)
    for _ in range(total // len(chunk)):
        c.sendall(chunk)
    c.close()
";

const PY_CLIENT: &str = "
import socket, sys, time
addr, port, mode, total = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
c = socket.create_connection((addr, port))
t = time.time()
if mode == 'send':
    chunk = bytes(1 << 20)
    for _ in range(total // len(chunk)):
        c.sendall(chunk)
    c.shutdown(socket.SHUT_WR)
    c.recv(1)
else:
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    got = 0
    while True:
        n = c.recv_into(view)
        if n == 0: break
        got += n
print('secs', time.time() - t, flush=True)
";

fn mbit(bytes: usize, secs: f64) -> f64 {
    bytes as f64 * 8.0 / secs / 1e6
}

fn imp_pair(offloads: bool, subnet: u8) -> Option<(f64, f64)> {
    let link = Link::new(subnet, offloads)?;
    let kernel = link.kernel_addr.to_string();
    let total = TOTAL.to_string();
    // Linux -> imp.
    let mut server = link.ns.spawn(
        "python3",
        &["-u", "-c", PY, &kernel, "9000", "source", &total],
    );
    wait_ready(&mut server);
    let mut stream = TcpStream::connect(&link.rt, (link.kernel_addr, 9000)).ok()?;
    let start = Instant::now();
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0;
    loop {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        got += n;
    }
    let rx = mbit(got, start.elapsed().as_secs_f64());
    let segments = link.rt.with_stack(|s, _| s.stats().tcp.rx_segments);
    println!("  linux->imp (offloads {offloads}): {got} bytes, {segments} segments in");
    drop(stream);
    drop(server);
    // imp -> Linux.
    let mut sink = link.ns.spawn(
        "python3",
        &["-u", "-c", PY, &kernel, "9001", "sink", &total],
    );
    wait_ready(&mut sink);
    let mut stream = TcpStream::connect(&link.rt, (link.kernel_addr, 9001)).ok()?;
    let chunk = vec![0u8; 1 << 20];
    let start = Instant::now();
    for _ in 0..TOTAL / chunk.len() {
        stream.write_all(&chunk).ok()?;
    }
    stream.shutdown(std::net::Shutdown::Write).ok()?;
    let out = sink.wait();
    let elapsed = start.elapsed().as_secs_f64();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains(&format!("got {TOTAL}")), "sink: {text}");
    Some((rx, mbit(TOTAL, elapsed)))
}

fn veth_pair() -> Option<f64> {
    let a = NetNs::new();
    let b = NetNs::new();
    a.ip(&[
        "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", &b.name,
    ]);
    a.ip(&["addr", "add", "10.203.0.1/24", "dev", "va"]);
    b.ip(&["addr", "add", "10.203.0.2/24", "dev", "vb"]);
    a.ip(&["link", "set", "va", "up"]);
    b.ip(&["link", "set", "vb", "up"]);
    let total = TOTAL.to_string();
    let mut sink = a.spawn(
        "python3",
        &["-u", "-c", PY, "10.203.0.1", "9002", "sink", &total],
    );
    wait_ready(&mut sink);
    let out = b.exec(
        "python3",
        &["-c", PY_CLIENT, "10.203.0.1", "9002", "send", &total],
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let secs: f64 = text.split_whitespace().nth(1)?.parse().ok()?;
    Some(mbit(TOTAL, secs))
}

#[test]
#[ignore = "a measurement (seconds, all CPU): run by hand with --ignored --nocapture"]
fn throughput_over_tap_and_veth() {
    if !common::can_run() || !have("python3") {
        return;
    }
    let veth = veth_pair().expect("veth run");
    println!("linux->linux veth: {veth:.0} Mbit/s");
    for (offloads, subnet) in [(false, 31), (true, 32)] {
        let (rx, tx) = imp_pair(offloads, subnet).expect("imp run");
        println!(
            "offloads {offloads}: linux->imp {rx:.0} Mbit/s ({:.0}% of veth), imp->linux {tx:.0} Mbit/s ({:.0}%)",
            rx / veth * 100.0,
            tx / veth * 100.0
        );
    }
    let _ = Duration::ZERO;
}

fn wait_ready(child: &mut common::ChildGuard) {
    use std::io::BufRead;
    let stdout = child
        .0
        .as_mut()
        .expect("child")
        .stdout
        .as_mut()
        .expect("piped");
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read");
    assert!(line.contains("ready"), "server did not start: {line:?}");
}
