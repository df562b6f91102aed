//! `imp serve --threads 2` over a multi-queue TAP it creates in a network namespace
//! the test makes: a Linux client (the test, on a thread inside the namespace) opens
//! many connections to imp's echo service, each echoed byte for byte, and both shards
//! accepted some (the kernel spreads the flows over the queues and imp hands each to
//! the shard its 4-tuple hashes to); `imp ss` lists both shards' listeners and
//! connections, each with its shard. Needs root; skips, saying why, without it.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

#[path = "../../impnet/tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::process::{ChildStdout, Command, Stdio};
use std::time::Duration;

use common::{ChildGuard, NetNs, can_run, have};

const IMP: &str = env!("CARGO_BIN_EXE_imp");

/// Connections the client opens.
const CONNECTIONS: usize = 200;

/// The bytes connection `i` sends: 1 to 6000 of them, different for each connection.
fn payload(i: usize) -> Vec<u8> {
    let len = 1 + (i * 7919) % 6000;
    (0..len)
        .map(|j| (j.wrapping_mul(31) ^ i.wrapping_mul(131)) as u8)
        .collect()
}

/// One connection: send the payload, half-close, read the echo to its end.
fn echo_once(server: SocketAddr, i: usize) -> Vec<u8> {
    let mut stream = TcpStream::connect_timeout(&server, Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("connection {i}: connect: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(&payload(i)).expect("send");
    stream.shutdown(Shutdown::Write).expect("half-close");
    let mut echoed = Vec::new();
    stream
        .read_to_end(&mut echoed)
        .unwrap_or_else(|e| panic!("connection {i}: read: {e}"));
    echoed
}

#[test]
fn two_shards_echo_many_connections_byte_exact() {
    if !can_run() || !have("ip") {
        return;
    }
    let ns = NetNs::new();
    let runtime_dir = std::env::temp_dir().join(format!("imp-shards-{}", std::process::id()));
    std::fs::create_dir_all(&runtime_dir).unwrap();
    let args = [
        "serve",
        "--tap",
        "impsh0",
        "--addr",
        "10.211.1.2/24",
        "--threads",
        "2",
        "--echo",
    ];
    let spawned = ns
        .command(IMP, &args)
        .env("XDG_RUNTIME_DIR", &runtime_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("imp serve");
    let (child, reader, _) = started_in_two_shards(ChildGuard(Some(spawned)));
    ns.ip(&["addr", "add", "10.211.1.1/24", "dev", "impsh0"]);
    ns.ip(&["link", "set", "impsh0", "up"]);
    let server: SocketAddr = "10.211.1.2:7".parse().unwrap();
    ns.enter(|| {
        for i in 0..CONNECTIONS {
            let echoed = echo_once(server, i);
            assert!(echoed == payload(i), "connection {i}: the echo differs");
        }
    });
    // `imp ss` answers for both shards: a listener on each, and every open
    // connection, each named with its shard.
    let open: Vec<TcpStream> = ns.enter(|| {
        (0..20)
            .map(|_| {
                // A byte echoed: imp's end is established.
                let mut stream =
                    TcpStream::connect_timeout(&server, Duration::from_secs(5)).expect("connect");
                stream.write_all(b"x").expect("send");
                let mut byte = [0u8];
                stream.read_exact(&mut byte).expect("the echo");
                stream
            })
            .collect()
    });
    let pid = child.0.as_ref().unwrap().id().to_string();
    let ss = Command::new(IMP)
        .args(["ss", "--pid", &pid, "--json"])
        .env("XDG_RUNTIME_DIR", &runtime_dir)
        .output()
        .expect("imp ss");
    let listed: serde_json::Value = serde_json::from_slice(&ss.stdout).expect("imp ss --json");
    let sockets = listed["tcp"].as_array().expect("tcp list");
    let shards_of = |state: &str| -> Vec<u64> {
        let mut shards: Vec<u64> = sockets
            .iter()
            .filter(|s| s["state"] == state)
            .map(|s| s["shard"].as_u64().expect("a shard"))
            .collect();
        shards.sort_unstable();
        shards
    };
    assert_eq!(shards_of("LISTEN"), [0, 1], "{listed}");
    let established = shards_of("Established");
    assert_eq!(established.len(), open.len(), "{listed}");
    assert!(
        established.contains(&0) && established.contains(&1),
        "{listed}"
    );
    drop(open);
    let _ = std::fs::remove_dir_all(&runtime_dir);
    let (rest, counts) = stop_counting(child, reader);
    assert_eq!(counts.len(), 2, "{rest}");
    assert_eq!(counts.iter().sum::<usize>(), CONNECTIONS + 20, "{rest}");
    assert!(counts.iter().all(|&n| n > 0), "both shards served: {rest}");
}

/// `imp serve --threads 2 --batch --http`: each shard reads and writes its own queue
/// of the multi-queue TAP in io_uring batches. Many curl clients at once fetch a
/// 64 KiB file, over keep-alive and fresh connections: every response byte for byte,
/// and both shards served some (frames handed between shards go through the batches
/// too).
#[test]
fn two_batched_shards_serve_http_byte_exact() {
    const CLIENTS: usize = 16;
    const REQUESTS: usize = 4;
    if !can_run() || !have("ip") || !have("curl") {
        return;
    }
    let ns = NetNs::new();
    let dir = std::env::temp_dir().join(format!("imp-shards-http-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let body: Vec<u8> = (0..64 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(dir.join("file.bin"), &body).unwrap();
    let args = [
        "serve",
        "--tap",
        "impsh1",
        "--addr",
        "10.211.2.2/24",
        "--threads",
        "2",
        "--batch",
        "--http",
        dir.to_str().unwrap(),
    ];
    let (child, reader, line) = started_in_two_shards(ns.spawn(IMP, &args));
    assert!(
        line.contains("batched through io_uring")
            || std::env::var_os("IMP_REQUIRE_IO_URING").is_none(),
        "not batched: {line}"
    );
    ns.ip(&["addr", "add", "10.211.2.1/24", "dev", "impsh1"]);
    ns.ip(&["link", "set", "impsh1", "up"]);
    let url = "http://10.211.2.2/file.bin";
    let outputs = |client: usize| -> Vec<std::path::PathBuf> {
        (0..REQUESTS)
            .map(|i| dir.join(format!("got-{client}-{i}")))
            .collect()
    };
    // Half the clients keep one connection for their requests, half open one each.
    let clients: Vec<ChildGuard> = (0..CLIENTS)
        .map(|client| {
            let paths = outputs(client);
            let mut args = vec!["-sS", "--max-time", "60"];
            if client % 2 == 1 {
                args.extend(["-H", "Connection: close"]);
            }
            for path in &paths {
                args.extend(["-o", path.to_str().unwrap(), url]);
            }
            ns.spawn("curl", &args)
        })
        .collect();
    for client in clients {
        let out = common::wait_limited(client, Duration::from_secs(90));
        assert!(
            out.status.success(),
            "curl: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for client in 0..CLIENTS {
        for path in outputs(client) {
            let got = std::fs::read(&path).unwrap();
            assert!(
                got == body,
                "{}: {} bytes, differ",
                path.display(),
                got.len()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let (rest, counts) = stop_counting(child, reader);
    // Keep-alive clients one connection each, the others one per request.
    assert_eq!(
        counts.iter().sum::<usize>(),
        CLIENTS / 2 + CLIENTS / 2 * REQUESTS,
        "{rest}"
    );
    assert!(counts.iter().all(|&n| n > 0), "both shards served: {rest}");
}

/// Stops `imp serve` (`child`, whose startup line was read from `reader`) with SIGTERM:
/// it exits cleanly. Its last lines, and the connections each shard accepted, from
/// "...; accepted by shard 0: A, 1: B".
fn stop_counting(child: ChildGuard, mut reader: BufReader<ChildStdout>) -> (String, Vec<usize>) {
    // SAFETY: kill has no memory arguments; the pid is our own live child (`ip netns
    // exec` execs imp in place).
    unsafe { libc::kill(child.0.as_ref().unwrap().id() as i32, libc::SIGTERM) };
    let mut rest = String::new();
    reader.read_to_string(&mut rest).expect("imp's last lines");
    let out = child.wait();
    assert!(out.status.success(), "imp serve: {rest}");
    let counts = rest
        .split("accepted by shard ")
        .nth(1)
        .unwrap_or_else(|| panic!("no per-shard count in {rest:?}"))
        .trim()
        .split(", ")
        .map(|part| part.split(": ").nth(1).unwrap().parse().unwrap())
        .collect();
    (rest, counts)
}

/// `imp serve` just spawned (`child`): its startup line, which says it runs in two
/// shards (or, if it exited instead, a panic with its standard error), and the reader
/// of the rest of its output.
fn started_in_two_shards(mut child: ChildGuard) -> (ChildGuard, BufReader<ChildStdout>, String) {
    let stdout = child.0.as_mut().unwrap().stdout.take().unwrap();
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    reader.read_line(&mut line).expect("imp's startup line");
    if line.is_empty() {
        let out = child.wait();
        panic!("imp serve exited: {}", String::from_utf8_lossy(&out.stderr));
    }
    assert!(line.contains("in 2 shards"), "{line}");
    (child, reader, line)
}
