//! W8's runs over emulated paths: two network namespaces per cell, `A` (the sender)
//! and `B` (the receiver), which the bench creates and deletes.
//!
//! - Linux -> Linux: `imp link --impair SPEC` (in A) between two TAPs, one moved into
//!   B; iperf3 from A to B with `-C CC`, time-bounded (`-t`); goodput is what iperf3's
//!   server counted, retransmissions what its client's kernel counted.
//! - imp -> Linux: `imp ttcp --tap --impair SPEC --cc CC --time T` in B, on a TAP whose
//!   kernel side is B's receiver (a socket on a thread in B); goodput is what that
//!   receiver read per second between accepting and the sender's reset,
//!   retransmissions what imp ttcp reports.
//!
//! The same model both ways on both paths: `delay` is half the round trip.

use std::cell::RefCell;
use std::io::{BufRead, BufReader, Read};
use std::net::{Shutdown, SocketAddrV4, TcpListener, TcpStream};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant as StdInstant};

use serde::Serialize;

use super::w5::Netns;
use super::w6::{Server, imp_binary, ns_command};
use super::w7_route::{iperf, tcp_rate, wait_limited, wait_listening};

/// One run's result: numbers, or why there are none.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Outcome {
    /// Goodput at the receiver, Mbit/s.
    pub goodput_mbps: Option<f64>,
    /// Segments the sender retransmitted (when it says).
    pub retransmits: Option<u64>,
    /// Why there is no goodput.
    pub reason: Option<String>,
}

impl Outcome {
    pub(super) fn measured(goodput_mbps: f64, retransmits: Option<u64>) -> Outcome {
        Outcome {
            goodput_mbps: Some(goodput_mbps),
            retransmits,
            reason: None,
        }
    }

    pub(super) fn failed(reason: impl Into<String>) -> Outcome {
        Outcome {
            goodput_mbps: None,
            retransmits: None,
            reason: Some(reason.into()),
        }
    }
}

/// The Linux hosts' network on the `imp link` path, and imp's on its TAP.
const LINK_NET: &str = "10.213.1";
const TAP_NET: &str = "10.213.2";
/// The port imp's receiver listens on.
const SINK_PORT: u16 = 5001;
/// Extra time a run may take beyond its length before it counts as stuck.
const GRACE: Duration = Duration::from_secs(30);

/// The namespaces of one cell, its `imp link` and the iperf3 server.
pub(super) struct CellPath {
    a: Netns,
    b: Netns,
    _link: Server,
    /// Restarted when it still thinks a test runs (its client's goodbye was lost).
    iperf: RefCell<Server>,
}

impl CellPath {
    /// Set the cell's paths up: `imp link` with `spec` from A to B, iperf3's server in
    /// B, and imp's TAP in B.
    pub(super) fn new(spec: &str) -> Result<CellPath, String> {
        let (a, b) = (Netns::new()?, Netns::new()?);
        for ns in [&a, &b] {
            big_buffers(ns)?;
        }
        let link = start_link(&a, spec)?;
        a.ip(&["link", "set", "w8b", "netns", &b.name])?;
        for (ns, dev, host) in [(&a, "w8a", 1), (&b, "w8b", 2)] {
            ns.ip(&["addr", "add", &format!("{LINK_NET}.{host}/24"), "dev", dev])?;
            ns.ip(&["link", "set", dev, "up"])?;
        }
        let iperf = RefCell::new(iperf_server(&b)?);
        b.ip(&["tuntap", "add", "dev", "w8i", "mode", "tap"])?;
        b.ip(&["addr", "add", &format!("{TAP_NET}.1/24"), "dev", "w8i"])?;
        b.ip(&["link", "set", "w8i", "up"])?;
        Ok(CellPath {
            a,
            b,
            _link: link,
            iperf,
        })
    }

    /// Linux -> Linux with `cc` for `secs` through `imp link`.
    pub(super) fn linux(&self, cc: &str, secs: u32) -> Outcome {
        let secs_text = secs.to_string();
        let server = format!("{LINK_NET}.2");
        let args = [
            "-c", &server, "-p", "5201", "-t", &secs_text, "-C", cc, "-J",
        ];
        let limit = Duration::from_secs(u64::from(secs)) + GRACE;
        let mut result = iperf(&self.a, &args, limit);
        if result.as_ref().is_err_and(|e| e.contains("busy")) {
            // The server missed the end of the last test (lost on a lossy path).
            let restarted = iperf_server(&self.b);
            match restarted {
                Ok(server) => *self.iperf.borrow_mut() = server,
                Err(e) => return Outcome::failed(e),
            }
            result = iperf(&self.a, &args, limit);
        }
        match result {
            Ok(json) => linux_outcome(&json),
            Err(e) => Outcome::failed(iperf_error(&e)),
        }
    }

    /// imp -> Linux with `cc` for `secs`, `spec` on imp's TAP.
    pub(super) fn imp(&self, cc: &str, secs: u32, spec: &str, sndbuf: u64) -> Outcome {
        match self.imp_run(cc, secs, spec, sndbuf) {
            Ok(outcome) => outcome,
            Err(e) => Outcome::failed(e),
        }
    }

    fn imp_run(&self, cc: &str, secs: u32, spec: &str, sndbuf: u64) -> Result<Outcome, String> {
        let addr = SocketAddrV4::new(
            format!("{TAP_NET}.1").parse().map_err(|e| format!("{e}"))?,
            SINK_PORT,
        );
        let limit = Duration::from_secs(u64::from(secs)) + GRACE;
        let sink = Sink::start(&self.b, addr, limit)?;
        let imp = imp_binary()?;
        let (peer, time, buf) = (addr.to_string(), format!("{secs}s"), sndbuf.to_string());
        let args = [
            "ttcp",
            "--tap",
            "w8i",
            "--addr",
            &format!("{TAP_NET}.2/24"),
            "--impair",
            spec,
            "--cc",
            cc,
            "--sndbuf",
            &buf,
            "--connect",
            &peer,
            "--time",
            &time,
            "--record",
            "64K",
            "--json",
        ];
        let child = ns_command(&self.b, imp.to_str().unwrap_or("imp"), &args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start imp ttcp: {e}"))?;
        let out = wait_limited(child, limit);
        // imp is gone (its reset may not have left before it exited): end the read.
        let (bytes, seconds) = sink.finish()?;
        let out = out?;
        if !out.status.success() {
            return Err(format!(
                "imp ttcp: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let report: serde_json::Value =
            serde_json::from_slice(&out.stdout).map_err(|e| format!("imp ttcp's report: {e}"))?;
        Ok(Outcome::measured(
            bytes as f64 * 8.0 / seconds.max(1e-9) / 1e6,
            report["retransmits"].as_u64(),
        ))
    }
}

/// iperf3's server in `ns`, listening once this returns.
fn iperf_server(ns: &Netns) -> Result<Server, String> {
    let addr = format!("{LINK_NET}.2");
    let child = ns_command(ns, "iperf3", &["-s", "-B", &addr, "-p", "5201"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start iperf3 -s: {e}"))?;
    let server = Server(child);
    wait_listening(ns)?;
    Ok(server)
}

/// iperf3's failure in a line: the `error` of its JSON report when there is one.
fn iperf_error(text: &str) -> String {
    let error = text
        .find('{')
        .and_then(|at| serde_json::from_str::<serde_json::Value>(&text[at..]).ok())
        .and_then(|report| report["error"].as_str().map(str::to_string));
    match error {
        Some(error) => format!("iperf3: {error}"),
        None => text.lines().next().unwrap_or("iperf3 failed").to_string(),
    }
}

/// Let the kernel's TCP buffers grow to 32 MiB (the bandwidth-delay product of 1
/// Gbit/s over 100 ms is 12.5 MB), in `ns` only.
fn big_buffers(ns: &Netns) -> Result<(), String> {
    for (key, value) in [
        ("net.ipv4.tcp_rmem", "4096 131072 33554432"),
        ("net.ipv4.tcp_wmem", "4096 16384 33554432"),
    ] {
        let out = ns_command(ns, "sysctl", &["-q", "-w", &format!("{key}={value}")])
            .output()
            .map_err(|e| format!("sysctl: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "sysctl {key}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    Ok(())
}

/// `imp link --tap w8a --tap w8b --impair SPEC` in `ns`, running once this returns.
fn start_link(ns: &Netns, spec: &str) -> Result<Server, String> {
    let imp = imp_binary()?;
    let args = ["link", "--tap", "w8a", "--tap", "w8b", "--impair", spec];
    let mut child = ns_command(ns, imp.to_str().unwrap_or("imp"), &args)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start imp link: {e}"))?;
    let stdout = child.stdout.take().ok_or("imp link has no stdout")?;
    let link = Server(child);
    let mut stdout = BufReader::new(stdout);
    let mut line = String::new();
    stdout
        .read_line(&mut line)
        .map_err(|e| format!("imp link: {e}"))?;
    if !line.contains("w8a <-> w8b") {
        return Err(format!("imp link did not start: {line:?}"));
    }
    // Keep reading, so imp link's closing statistics find their pipe open.
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    Ok(link)
}

/// Goodput (Mbit/s, the server's count) and retransmissions from `iperf3 -J`.
fn linux_outcome(json: &str) -> Outcome {
    let report: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
    match tcp_rate(json) {
        Some(gbits) => Outcome::measured(
            gbits * 1e3,
            report["end"]["sum_sent"]["retransmits"].as_u64(),
        ),
        None => Outcome::failed(iperf_error(json)),
    }
}

/// The kernel's receiver of imp's transfer: a socket on a thread in the namespace,
/// counting bytes from accepting until the sender resets or closes the connection, or
/// the bench ends the read once the sender has exited.
struct Sink {
    result: mpsc::Receiver<Result<(u64, f64), String>>,
    /// The accepted connection, to shut down when the sender has exited.
    accepted: mpsc::Receiver<TcpStream>,
    limit: Duration,
}

impl Sink {
    fn start(ns: &Netns, addr: SocketAddrV4, limit: Duration) -> Result<Sink, String> {
        let (ready, bound) = mpsc::channel();
        let (done, result) = mpsc::channel();
        let (accepted_tx, accepted) = mpsc::channel();
        // Detached: a receiver that never sees a connection ends at its accept timeout.
        drop(ns.spawn(move || {
            let outcome = match TcpListener::bind(addr) {
                Ok(listener) => {
                    let _ = ready.send(Ok(()));
                    receive(&listener, limit, &accepted_tx)
                }
                Err(e) => {
                    let _ = ready.send(Err(format!("bind {addr}: {e}")));
                    return Ok(());
                }
            };
            let _ = done.send(outcome);
            Ok(())
        }));
        bound
            .recv_timeout(GRACE)
            .map_err(|_| "the receiver did not start".to_string())??;
        Ok(Sink {
            result,
            accepted,
            limit,
        })
    }

    /// (bytes, seconds from accepting to the last byte), once the sender has exited.
    fn finish(self) -> Result<(u64, f64), String> {
        if let Ok(stream) = self.accepted.try_recv() {
            let _ = stream.shutdown(Shutdown::Both);
        }
        self.result
            .recv_timeout(self.limit + GRACE)
            .map_err(|_| "the receiver did not finish".to_string())?
    }
}

/// Accept one connection (giving up after `limit`) and read it to its end.
fn receive(
    listener: &TcpListener,
    limit: Duration,
    accepted: &mpsc::Sender<TcpStream>,
) -> Result<(u64, f64), String> {
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("listener: {e}"))?;
    let deadline = StdInstant::now() + limit;
    let mut stream = loop {
        match listener.accept() {
            Ok((stream, _)) => break stream,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if StdInstant::now() >= deadline {
                    return Err("imp never connected".into());
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(format!("accept: {e}")),
        }
    };
    let start = StdInstant::now();
    if let Ok(clone) = stream.try_clone() {
        let _ = accepted.send(clone);
    }
    stream.set_nonblocking(false).ok();
    stream.set_read_timeout(Some(limit)).ok();
    let mut buf = vec![0u8; 1 << 20];
    let (mut got, mut last) = (0u64, start);
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                got += n as u64;
                last = StdInstant::now();
            }
        }
        if last.duration_since(start) > limit {
            break;
        }
    }
    Ok((got, last.duration_since(start).as_secs_f64()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf_errors_fit_a_line() {
        let text = "iperf3 -c x: {\n\"start\": {},\n\"error\": \"the server is busy\"\n}";
        assert_eq!(iperf_error(text), "iperf3: the server is busy");
        assert_eq!(iperf_error("no json\nmore"), "no json");
    }
}
