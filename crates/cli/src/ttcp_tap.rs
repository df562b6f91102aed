//! `imp ttcp --tap`: a bulk transfer between imp and a real peer over a TAP device.
//! `--connect HOST:PORT` sends `--bytes` (in `--record`-sized writes), half-closes and
//! waits for the peer to close, so the time covers delivery, not just buffering;
//! `--listen PORT` accepts one connection and counts bytes until the peer closes.
//! `--time T` sends for T instead, then reports and resets the connection. The stack
//! takes `--cc`, `--sndbuf` and `--rcvbuf` as the simulated transfer does.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::time::{Duration as StdDuration, Instant as StdInstant};

use impnet::core::StackConfig;
use impnet::{TcpListener, TcpStream};
use serde::Serialize;

use crate::ttcp::{TtcpArgs, format_rate};

/// `--json` output of a transfer over a TAP.
#[derive(Debug, Serialize)]
struct Report {
    direction: &'static str,
    peer: String,
    bytes: u64,
    seconds: f64,
    goodput_bps: f64,
    retransmits: Option<u64>,
    sack: Option<bool>,
    timestamps: Option<bool>,
    wscale: Option<(u8, u8)>,
    ecn: Option<bool>,
}

/// Check the arguments of a transfer over a TAP before anything opens (no I/O): every
/// error names the option.
pub fn validate(args: &TtcpArgs) -> Result<(), String> {
    args.device.validate()?;
    args.device.required("ttcp")?;
    match (args.connect.as_deref(), args.listen) {
        (Some(peer), None) => check_peer(peer)?,
        (None, Some(0)) => {
            return Err("--listen 0: give the port to listen on (1 to 65535)".into());
        }
        (None, Some(_)) => {
            if args.time.is_some() {
                return Err(
                    "--time is for the sender (--connect); the receiver counts until the peer closes"
                        .into(),
                );
            }
        }
        _ => {
            return Err(
                "imp ttcp --tap needs one of --connect HOST:PORT (send) or --listen PORT (receive)"
                    .into(),
            );
        }
    }
    if args.timeout.as_nanos() == 0 {
        return Err("--timeout 0: give a time longer than 0".into());
    }
    if args.time.is_some_and(|t| t.as_nanos() == 0) {
        return Err("--time 0: give a time longer than 0".into());
    }
    crate::ttcp::config(args).map(|_| ())
}

/// `--connect HOST:PORT`: a unicast address and a non-zero port, or a name and a port
/// (resolved once imp runs).
fn check_peer(peer: &str) -> Result<(), String> {
    if let Ok(addr) = peer.parse::<SocketAddr>() {
        let ip = addr.ip();
        if addr.port() == 0
            || ip.is_unspecified()
            || ip.is_multicast()
            || ip == std::net::Ipv4Addr::BROADCAST
        {
            return Err(format!(
                "--connect {addr}: give a host's unicast address and a non-zero port"
            ));
        }
        return Ok(());
    }
    let port = peer.rsplit_once(':').and_then(|(host, port)| {
        let name_like = !host.is_empty() && !host.contains(['[', ']', ':', '/', ' ']);
        port.parse::<u16>().ok().filter(|p| *p != 0 && name_like)
    });
    match port {
        Some(_) => Ok(()),
        None => Err(format!(
            "--connect {peer}: give HOST:PORT, HOST an address or a name and PORT 1 to 65535"
        )),
    }
}

/// Run a transfer over the TAP the arguments name.
pub fn run(args: &TtcpArgs) -> Result<(), String> {
    validate(args)?;
    let timeout = StdDuration::from_nanos(args.timeout.as_nanos());
    let stack = args.device.start_with("ttcp", stack_config(args)?)?;
    let role = match (args.connect.as_deref(), args.listen) {
        (Some(peer), _) => Ok(resolve_peer(&stack.rt, peer)?),
        (None, port) => Err(port.unwrap_or_default()),
    };
    if !args.json {
        println!("imp ttcp: {}", stack.describe(args.device.impair.as_ref()));
    }
    let report = match role {
        Ok(peer) => send(args, &stack.rt, peer, timeout)?,
        Err(port) => receive(args, &stack.rt, stack.listen_addr(port), timeout)?,
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&report).expect("the report serialises")
        );
    } else {
        println!(
            "imp ttcp: {} {} bytes {} {} in {:.3} s: {}{}{}",
            if report.direction == "send" {
                "sent"
            } else {
                "received"
            },
            report.bytes,
            if report.direction == "send" {
                "to"
            } else {
                "from"
            },
            report.peer,
            report.seconds,
            format_rate(report.goodput_bps),
            report
                .retransmits
                .map_or(String::new(), |r| format!(", {r} retransmitted segments")),
            if report.ecn == Some(true) {
                ", ECN"
            } else {
                ""
            },
        );
    }
    Ok(())
}

/// The stack's settings from the arguments: congestion control (checked as the
/// simulated transfer checks it) and buffers.
fn stack_config(args: &TtcpArgs) -> Result<StackConfig, String> {
    let sender = crate::ttcp::config(args)?.sender_tcp;
    let mut config = StackConfig::default();
    config.tcp.congestion = sender.congestion;
    config.tcp.send_buffer = sender.send_buffer;
    config.tcp.recv_buffer =
        usize::try_from(args.rcvbuf).map_err(|_| "--rcvbuf is too large".to_string())?;
    Ok(config)
}

/// The address `--connect` names (its first one, IPv4 first, for a name).
fn resolve_peer(rt: &impnet::Runtime, peer: &str) -> Result<SocketAddr, String> {
    let addrs = impnet::lookup_host(rt, peer).map_err(|e| format!("--connect {peer}: {e}"))?;
    addrs
        .first()
        .copied()
        .ok_or_else(|| format!("--connect {peer}: the name has no address"))
}

fn send(
    args: &TtcpArgs,
    rt: &impnet::Runtime,
    peer: SocketAddr,
    timeout: StdDuration,
) -> Result<Report, String> {
    let record = usize::try_from(args.record.max(1))
        .unwrap_or(1 << 20)
        .min(1 << 24);
    let chunk: Vec<u8> = (0..record).map(|i| b'a' + (i % 26) as u8).collect();
    let start = StdInstant::now();
    let (stream, first) = if args.fastopen && args.time.is_none() {
        let first = &chunk[..(args.bytes.min(record as u64) as usize)];
        TcpStream::connect_with_data(rt, &peer, first)
            .map_err(|e| format!("cannot connect to {peer}: {}", describe(&e)))?
    } else {
        let stream = TcpStream::connect_timeout(rt, &peer, timeout)
            .map_err(|e| format!("cannot connect to {peer}: {}", describe(&e)))?;
        (stream, 0)
    };
    let set = |r: io::Result<()>| r.map_err(|e| format!("socket option: {e}"));
    set(stream.set_write_timeout(Some(timeout)))?;
    set(stream.set_read_timeout(Some(timeout)))?;
    if let Some(time) = args.time {
        let time = StdDuration::from_nanos(time.as_nanos());
        return send_for(&stream, peer, &chunk, start, time);
    }
    let mut sent = first as u64;
    let mut writer = &stream;
    while sent < args.bytes {
        let n = (args.bytes - sent).min(record as u64) as usize;
        writer.write_all(&chunk[..n]).map_err(|e| {
            format!(
                "sending to {peer} failed after {sent} bytes: {}",
                describe(&e)
            )
        })?;
        sent += n as u64;
    }
    stream
        .shutdown(Shutdown::Write)
        .map_err(|e| format!("closing the connection to {peer}: {}", describe(&e)))?;
    // The peer closes once it has read everything: then every byte has arrived.
    let mut reader = &stream;
    io::copy(&mut reader, &mut io::sink())
        .map_err(|e| format!("waiting for {peer} to close: {}", describe(&e)))?;
    Ok(report("send", peer, sent, start.elapsed(), &stream))
}

/// Send for `time`, then report and reset the connection: what is still queued is not
/// delivered, so the report counts bytes written, and the receiver measures goodput.
fn send_for(
    stream: &TcpStream,
    peer: SocketAddr,
    chunk: &[u8],
    start: StdInstant,
    time: StdDuration,
) -> Result<Report, String> {
    let mut sent = 0u64;
    let mut writer = stream;
    while start.elapsed() < time {
        writer.write_all(chunk).map_err(|e| {
            format!(
                "sending to {peer} failed after {sent} bytes: {}",
                describe(&e)
            )
        })?;
        sent += chunk.len() as u64;
    }
    let report = report("send", peer, sent, start.elapsed(), stream);
    // A reset ends the transfer at once on both sides (a close would first deliver
    // the send buffer).
    let _ = stream.clone().abort();
    // The runtime's thread sends the reset: give it a moment before the process exits.
    std::thread::sleep(StdDuration::from_millis(50));
    Ok(report)
}

fn receive(
    args: &TtcpArgs,
    rt: &impnet::Runtime,
    local: SocketAddr,
    timeout: StdDuration,
) -> Result<Report, String> {
    let listener = TcpListener::bind(rt, local)
        .map_err(|e| format!("cannot listen on {local}: {}", describe(&e)))?;
    if args.fastopen {
        listener
            .set_fast_open(16)
            .map_err(|e| format!("--fastopen on {local}: {e}"))?;
    }
    if !args.json {
        println!("imp ttcp: listening on {local}");
        let _ = io::stdout().flush();
    }
    let (stream, peer) = listener
        .accept()
        .map_err(|e| format!("accept on {local}: {}", describe(&e)))?;
    let start = StdInstant::now();
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| format!("socket option: {e}"))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0u64;
    let mut reader = &stream;
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got += n as u64,
            Err(e) => {
                return Err(format!(
                    "receiving from {peer} failed after {got} bytes: {}",
                    describe(&e)
                ));
            }
        }
    }
    Ok(report("receive", peer, got, start.elapsed(), &stream))
}

fn report(
    direction: &'static str,
    peer: SocketAddr,
    bytes: u64,
    elapsed: StdDuration,
    stream: &TcpStream,
) -> Report {
    let seconds = elapsed.as_secs_f64().max(1e-9);
    let info = stream.info();
    Report {
        direction,
        peer: peer.to_string(),
        bytes,
        seconds,
        goodput_bps: bytes as f64 * 8.0 / seconds,
        retransmits: info.as_ref().map(|i| i.retransmits),
        sack: info.as_ref().map(|i| i.sack),
        timestamps: info.as_ref().map(|i| i.timestamps),
        wscale: info.as_ref().and_then(|i| i.wscale),
        ecn: info.as_ref().map(|i| i.ecn),
    }
}

/// An error as a person reads it: what kind, then imp's explanation.
pub fn describe(e: &io::Error) -> String {
    let kind = match e.kind() {
        io::ErrorKind::ConnectionRefused => "connection refused",
        io::ErrorKind::ConnectionReset => "connection reset by peer",
        io::ErrorKind::TimedOut => "timed out",
        io::ErrorKind::AddrInUse => "address in use",
        io::ErrorKind::HostUnreachable => "host unreachable",
        io::ErrorKind::NetworkUnreachable => "network unreachable",
        _ => return e.to_string(),
    };
    let text = e.to_string();
    if text.starts_with(kind) {
        text
    } else {
        format!("{kind} ({text})")
    }
}
