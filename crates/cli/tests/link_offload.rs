//! `imp link` with offloads: two network namespaces joined through `imp link`'s TAPs
//! with delay and loss, a large TCP transfer between the two kernels checked byte for
//! byte, and `imp link`'s closing counts showing that 64 KiB super-segments crossed
//! whole, that the loss model dropped wire frames (cutting the super-segments they
//! were in) and that TCP recovered. The same transfer with `--no-offloads` crosses
//! frame by frame.
//!
//! Needs root; skips (saying why) without it, fails instead under `IMP_REQUIRE_ROOT`.

#[path = "../../impnet/tests/common/mod.rs"]
#[allow(unused_imports)]
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

use common::{ChildGuard, NetNs, can_run};

const IMP: &str = env!("CARGO_BIN_EXE_imp");

/// The link, each way: 1 ms and 0.05% of wire frames lost.
const IMPAIR: &str = "delay=1ms,loss=0.05%";

/// Byte `i` of the transfer: a pattern that a lost, repeated or misplaced segment
/// breaks.
fn byte_at(i: u64) -> u8 {
    let x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x >> 56) as u8 ^ (i >> 12) as u8
}

/// The two hosts `a` (10.205.121.1, TAP lka) and `b` (.2, lkb) joined by `imp link`
/// in a third namespace; its output after the ready line arrives on the receiver.
struct Joined {
    link: ChildGuard,
    output: mpsc::Receiver<String>,
    a: NetNs,
    b: NetNs,
    _middle: NetNs,
}

fn join(extra: &[&str]) -> Joined {
    let middle = NetNs::new();
    let (a, b) = (NetNs::new(), NetNs::new());
    let mut args = vec!["link", "--tap", "lka", "--tap", "lkb", "--impair", IMPAIR];
    args.extend_from_slice(extra);
    let mut link = middle.spawn(IMP, &args);
    let stdout = link.0.as_mut().unwrap().stdout.take().unwrap();
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    reader.read_line(&mut line).expect("imp link's output");
    assert!(
        line.contains("lka <-> lkb"),
        "imp link did not start: {line:?}"
    );
    let (tx, output) = mpsc::channel();
    std::thread::spawn(move || {
        let mut rest = line;
        let _ = reader.read_to_string(&mut rest);
        let _ = tx.send(rest);
    });
    for (ns, dev, addr) in [
        (&a, "lka", "10.205.121.1/24"),
        (&b, "lkb", "10.205.121.2/24"),
    ] {
        middle.ip(&["link", "set", dev, "netns", &ns.name]);
        ns.ip(&["addr", "add", addr, "dev", dev]);
        ns.ip(&["link", "set", dev, "up"]);
    }
    Joined {
        link,
        output,
        a,
        b,
        _middle: middle,
    }
}

/// Sends `len` bytes of the pattern from `a` to `b` over TCP; returns how many bytes
/// `b` received before the first that differed (all `len` when the transfer is exact).
fn transfer(a: &NetNs, b: &NetNs, len: u64) -> u64 {
    transfer_to(a, b, "10.205.121.2:5201", len)
}

/// As [`transfer`], from `a` to `b` listening on `addr`.
fn transfer_to(a: &NetNs, b: &NetNs, addr: &str, len: u64) -> u64 {
    let (ready_tx, ready) = mpsc::channel();
    std::thread::scope(|s| {
        let receiver = s.spawn(|| {
            b.enter(|| {
                let listener = TcpListener::bind(addr).expect("bind");
                ready_tx.send(()).unwrap();
                let (mut conn, _) = listener.accept().expect("accept");
                conn.set_read_timeout(Some(Duration::from_secs(60)))
                    .unwrap();
                let mut buf = vec![0u8; 1 << 16];
                let mut at = 0u64;
                loop {
                    let n = conn.read(&mut buf).expect("read");
                    if n == 0 {
                        return at;
                    }
                    for &byte in &buf[..n] {
                        if byte != byte_at(at) {
                            return at;
                        }
                        at += 1;
                    }
                }
            })
        });
        ready.recv().expect("the receiver listens");
        a.enter(|| {
            let mut conn = TcpStream::connect(addr).expect("connect");
            let mut buf = vec![0u8; 1 << 16];
            let mut at = 0u64;
            while at < len {
                let n = buf.len().min((len - at) as usize);
                for (i, b) in buf[..n].iter_mut().enumerate() {
                    *b = byte_at(at + i as u64);
                }
                conn.write_all(&buf[..n]).expect("write");
                at += n as u64;
            }
            conn.shutdown(std::net::Shutdown::Write).unwrap();
        });
        receiver.join().expect("receiver")
    })
}

/// Stops `imp link` (SIGTERM) and returns what it printed after its ready line.
fn stop(net: Joined) -> String {
    let pid = net.link.0.as_ref().unwrap().id() as i32;
    // SAFETY: kill has no memory arguments; the pid is our own live child.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let out = net
        .output
        .recv_timeout(Duration::from_secs(10))
        .expect("imp link's closing counts");
    drop(net.link);
    out
}

/// The numbers in `imp link`'s line for `lka -> lkb`, in order.
fn counts_a_to_b(output: &str) -> Vec<u64> {
    counts(output, "lka -> lkb")
}

/// The numbers in `imp link`'s line for `direction` ("lka -> lkb"), in order.
fn counts(output: &str, direction: &str) -> Vec<u64> {
    let line = output
        .lines()
        .find(|l| l.contains(direction))
        .unwrap_or_else(|| panic!("no {direction} counts in {output:?}"));
    line.split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect()
}

#[test]
fn a_large_transfer_crosses_a_lossy_offloaded_imp_link_byte_exact() {
    if !can_run() {
        return;
    }
    const LEN: u64 = 96 << 20;
    let net = join(&[]);
    assert_eq!(
        transfer(&net.a, &net.b, LEN),
        LEN,
        "the transfer arrived whole"
    );
    let output = stop(net);
    assert!(output.contains("offloads: 64 KiB segments"), "{output}");
    // delivered, lost, queue drops, super-segments whole, super-segments cut
    let counts = counts_a_to_b(&output);
    let [delivered, lost, _queue, whole, cut] = counts[..] else {
        panic!("unexpected counts {counts:?} in {output}");
    };
    assert!(delivered > LEN / 1500, "{output}");
    assert!(lost > 0, "the loss model dropped frames: {output}");
    assert!(whole > 0, "super-segments crossed whole: {output}");
    assert!(
        cut > 0 && cut <= lost,
        "lost frames cut their super-segments: {output}"
    );
}

#[test]
fn without_offloads_imp_link_moves_frame_by_frame() {
    if !can_run() {
        return;
    }
    const LEN: u64 = 8 << 20;
    let net = join(&["--no-offloads"]);
    assert_eq!(
        transfer(&net.a, &net.b, LEN),
        LEN,
        "the transfer arrived whole"
    );
    let output = stop(net);
    assert!(output.contains("no offloads"), "{output}");
    let counts = counts_a_to_b(&output);
    assert_eq!(counts.len(), 3, "no super-segments: {output}");
    assert!(counts[0] > LEN / 1500, "{output}");
}

/// Two transfers at once, one each way, both arrive whole, and each direction carried
/// super-segments whole and lost frames of its own: both directions on one thread.
#[test]
fn transfers_both_ways_at_once_cross_byte_exact() {
    both_ways(&[]);
}

/// As above with a thread per direction (`--threads 2`).
#[test]
fn transfers_both_ways_cross_byte_exact_with_a_thread_per_direction() {
    both_ways(&["--threads", "2"]);
}

fn both_ways(extra: &[&str]) {
    if !can_run() {
        return;
    }
    const LEN: u64 = 48 << 20;
    let net = join(extra);
    let (a_to_b, b_to_a) = std::thread::scope(|s| {
        let a_to_b = s.spawn(|| transfer_to(&net.a, &net.b, "10.205.121.2:5202", LEN));
        let b_to_a = transfer_to(&net.b, &net.a, "10.205.121.1:5203", LEN);
        (a_to_b.join().expect("a -> b"), b_to_a)
    });
    assert_eq!((a_to_b, b_to_a), (LEN, LEN), "both transfers arrived whole");
    let output = stop(net);
    for direction in ["lka -> lkb", "lkb -> lka"] {
        let counts = counts(&output, direction);
        let [delivered, lost, _queue, whole, _cut] = counts[..] else {
            panic!("unexpected counts {counts:?} for {direction} in {output}");
        };
        assert!(delivered > LEN / 1500, "{direction}: {output}");
        assert!(lost > 0 && whole > 0, "{direction}: {output}");
    }
}
