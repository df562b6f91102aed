//! W3 over a TAP: connection churn from the Linux kernel to `imp serve --echo` on a
//! multi-queue TAP it opens in a namespace the bench creates (and deletes), with one
//! shard and with two (`--threads 2`), beside the kernel serving the same churn over a
//! veth pair between two namespaces.
//!
//! Each connection is W3's: connect, one byte, the client's half-close, the byte
//! echoed, both ends closed. The client is the kernel, `CLIENTS` threads inside the
//! client's namespace, each opening connections one after another for the run's
//! seconds; every echoed byte is checked. The client closes first and so keeps the
//! TIME-WAIT ends; its namespace reuses them for new connections
//! (`net.ipv4.tcp_tw_reuse=1`) over the whole port range, as a load generator must.
//!
//! Rows: `W3-tap` (connections/s, imp with one shard in the `imp` column, the kernel
//! over veth in `linux`) and `W3-tap-2shards` (imp with two; the kernel's row again, as
//! it serves on every core). It runs when named (`--only W3-tap`) or with no `--only`,
//! not with `--only W3`, which stays in process.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant as StdInstant};

use super::Sample;
use super::w5::Netns;
use super::w6::{imp_binary, imp_serve, ns_command};

/// The echo port (imp serve's `--echo` listens on 7).
const PORT: u16 = 7;
/// Client threads opening connections.
const CLIENTS: usize = 8;
/// How long one connect or read may take before the run counts as stalled.
const STALL: Duration = Duration::from_secs(5);

/// Why W3-tap cannot run here, if it cannot.
pub(crate) fn unavailable() -> Option<String> {
    if let Some(reason) = super::w5::unavailable() {
        return Some(reason);
    }
    imp_binary().err()
}

/// Whether `--only` asks for W3-tap: by a prefix longer than `W3`, so that `--only
/// W3` keeps to the in-process rows.
pub(crate) fn named(only: &[String]) -> bool {
    only.is_empty()
        || only
            .iter()
            .any(|o| o.len() > 2 && "W3-tap".starts_with(o.as_str()))
}

/// W3-tap on imp: one shard, then two.
pub(crate) fn imp(secs: u32) -> Result<Vec<Sample>, String> {
    let one = imp_shards(secs, 1)?;
    let two = imp_shards(secs, 2)?;
    Ok(vec![
        Sample::new("W3-tap", "conn/s", one),
        Sample::new("W3-tap-2shards", "conn/s", two),
    ])
}

/// Connections/s against `imp serve --echo --threads shards` on a TAP it opens.
fn imp_shards(secs: u32, shards: usize) -> Result<f64, String> {
    let ns = Netns::new()?;
    let imp = imp_binary()?;
    let threads = shards.to_string();
    let args = [
        "serve",
        "--tap",
        "w3t",
        "--addr",
        "10.214.1.2/24",
        "--echo",
        "--threads",
        &threads,
    ];
    let server = imp_serve(&ns, &imp, &args, "echo (7)")?;
    ns.ip(&["addr", "add", "10.214.1.1/24", "dev", "w3t"])?;
    ns.ip(&["link", "set", "w3t", "up"])?;
    client_sysctls(&ns)?;
    let rate = churn(&ns, "10.214.1.2", secs);
    drop(server);
    rate
}

/// W3-tap on Linux: an echo server on threads in one namespace, the same client in
/// another, joined by a veth pair. Its figure stands in both rows.
pub(crate) fn linux(secs: u32) -> Result<Vec<Sample>, String> {
    let server_ns = Netns::new()?;
    let client_ns = Netns::new()?;
    server_ns.veth_to(&client_ns, "10.214.2")?;
    client_sysctls(&client_ns)?;
    let stop = Arc::new(AtomicBool::new(false));
    let listener = server_ns
        .enter(|| TcpListener::bind(("10.214.2.1", PORT)).map_err(|e| format!("bind: {e}")))?;
    let listener = Arc::new(listener);
    let servers: Vec<_> = (0..2)
        .map(|_| {
            let (listener, stop) = (listener.clone(), stop.clone());
            std::thread::spawn(move || echo_server(&listener, &stop))
        })
        .collect();
    let rate = churn(&client_ns, "10.214.2.1", secs);
    stop.store(true, Ordering::Relaxed);
    // Wake the accepting threads so they see `stop`.
    for _ in &servers {
        let _ = client_ns.enter(|| Ok(TcpStream::connect(("10.214.2.1", PORT))));
    }
    for server in servers {
        let _ = server.join();
    }
    let rate = rate?;
    Ok(vec![
        Sample::new("W3-tap", "conn/s", rate),
        Sample::new("W3-tap-2shards", "conn/s", rate),
    ])
}

/// The client's namespace: TIME-WAIT ends reused, every port a local one.
fn client_sysctls(ns: &Netns) -> Result<(), String> {
    for setting in [
        "net.ipv4.tcp_tw_reuse=1",
        "net.ipv4.ip_local_port_range=1024 65000",
    ] {
        let out = ns_command(ns, "sysctl", &["-q", "-w", setting])
            .output()
            .map_err(|e| format!("sysctl: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "sysctl {setting}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    Ok(())
}

/// The kernel's echo service: each accepted connection read to its end, echoed and
/// closed, until `stop`.
fn echo_server(listener: &TcpListener, stop: &AtomicBool) {
    let mut buf = [0u8; 64];
    while !stop.load(Ordering::Relaxed) {
        let Ok((mut stream, _)) = listener.accept() else {
            continue;
        };
        let _ = stream.set_read_timeout(Some(STALL));
        let mut got = Vec::new();
        while let Ok(n @ 1..) = stream.read(&mut buf) {
            got.extend_from_slice(&buf[..n]);
        }
        let _ = stream.write_all(&got);
    }
}

/// Connections/s that `CLIENTS` threads in `ns` complete against `host`'s echo port in
/// `secs` seconds, every echo checked.
fn churn(ns: &Netns, host: &str, secs: u32) -> Result<f64, String> {
    let server: SocketAddr = format!("{host}:{PORT}")
        .parse()
        .map_err(|e| format!("{host}: {e}"))?;
    wait_echoing(ns, server)?;
    let run = Duration::from_secs(u64::from(secs.max(1)));
    let started = StdInstant::now();
    let workers: Vec<_> = (0..CLIENTS)
        .map(|i| {
            ns.spawn(move || {
                let deadline = StdInstant::now() + run;
                let mut done = 0u64;
                while StdInstant::now() < deadline {
                    let byte = (done as u8) ^ (i as u8);
                    echo_once(server, byte)?;
                    done += 1;
                }
                Ok(done)
            })
        })
        .collect();
    let mut total = 0u64;
    for worker in workers {
        total += super::w5::join(worker)?;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

/// Wait until the echo service at `server` answers from inside `ns`.
fn wait_echoing(ns: &Netns, server: SocketAddr) -> Result<(), String> {
    ns.enter(move || {
        let deadline = StdInstant::now() + Duration::from_secs(10);
        loop {
            match echo_once(server, 0x5a) {
                Ok(()) => return Ok(()),
                Err(e) if StdInstant::now() >= deadline => {
                    return Err(format!("the echo service never answered: {e}"));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    })
}

/// One W3 connection: connect, send `byte`, half-close, read the echo to its end.
fn echo_once(server: SocketAddr, byte: u8) -> Result<(), String> {
    let mut stream =
        TcpStream::connect_timeout(&server, STALL).map_err(|e| format!("connect: {e}"))?;
    stream
        .set_read_timeout(Some(STALL))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(&[byte])
        .map_err(|e| format!("send: {e}"))?;
    stream
        .shutdown(Shutdown::Write)
        .map_err(|e| format!("half-close: {e}"))?;
    let mut echoed = Vec::new();
    stream
        .read_to_end(&mut echoed)
        .map_err(|e| format!("read: {e}"))?;
    if echoed != [byte] {
        return Err(format!("sent [{byte}], the echo was {echoed:?}"));
    }
    Ok(())
}
