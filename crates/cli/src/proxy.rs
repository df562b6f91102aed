//! `imp proxy`: a transparent proxy on a TUN device (tun2socks). The TUN interface is in
//! accept-any mode ([`impnet::core::accept_any`]): every TCP connection a client behind
//! the TUN opens, to any address, is accepted by imp and relayed to its original
//! destination through the host's own sockets (or a SOCKS5 server's CONNECT); every
//! UDP flow (source, destination) gets a host UDP socket (or a SOCKS5 UDP ASSOCIATE)
//! that lives until it has been idle for `--udp-idle`.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use clap::Args;
use impnet::core::AcceptAny;
use impnet::{TcpListener, TcpStream, UdpSocket};

use crate::tapargs::TapArgs;

/// Options of `imp proxy`.
#[derive(Debug, Args)]
pub struct ProxyArgs {
    #[command(flatten)]
    pub device: TapArgs,
    /// Relay through this SOCKS5 server (RFC 1928, no authentication): TCP by CONNECT,
    /// UDP by UDP ASSOCIATE. Without it, imp's host sockets go straight to each
    /// destination.
    #[arg(long, value_name = "HOST:PORT")]
    pub socks5: Option<String>,
    /// Seconds a UDP flow may stay silent before its host socket is closed.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub udp_idle: u64,
    /// Connections and datagrams one client address may open per second (a burst of
    /// a fifth of a second's worth, at least 16, is allowed on top). Behind a TUN one
    /// address is usually the whole host, so the default is above what a busy client
    /// opens; a SYN over the limit is dropped, and its sender retries only after a
    /// second.
    #[arg(long, value_name = "N", default_value_t = 20000)]
    pub rate: u32,
    /// Most connections waiting in the handshake at once.
    #[arg(long, value_name = "N", default_value_t = 512)]
    pub max_half_open: usize,
}

/// Where the relays go: straight out, or through a SOCKS5 server.
#[derive(Debug, Clone, Copy)]
enum Upstream {
    Direct,
    Socks5(SocketAddr),
}

/// The checks of the command line, before any device is opened.
pub fn validate(args: &ProxyArgs) -> Result<(), String> {
    args.device.validate()?;
    args.device.required("proxy")?;
    if args.device.tun.is_none() {
        return Err(
            "imp proxy needs --tun NAME: it takes in bare IP packets to any \
                    address (a TAP would need ARP answers for every address)"
                .into(),
        );
    }
    if args.udp_idle == 0 {
        return Err("--udp-idle 0: give the seconds a silent UDP flow lives (1 or more)".into());
    }
    if args.rate == 0 {
        return Err("--rate 0: give the connections per second one client may open".into());
    }
    if args.max_half_open == 0 {
        return Err("--max-half-open 0: give at least 1".into());
    }
    upstream(args)?;
    Ok(())
}

fn upstream(args: &ProxyArgs) -> Result<Upstream, String> {
    let Some(text) = &args.socks5 else {
        return Ok(Upstream::Direct);
    };
    let server = text
        .to_socket_addrs()
        .map_err(|e| format!("--socks5 {text}: not a HOST:PORT ({e})"))?
        .next()
        .ok_or_else(|| format!("--socks5 {text}: the name has no address"))?;
    if server.port() == 0 {
        return Err(format!("--socks5 {text}: port 0; give the server's port"));
    }
    Ok(Upstream::Socks5(server))
}

/// Run the proxy until killed.
pub fn run(args: &ProxyArgs) -> Result<(), String> {
    validate(args)?;
    let upstream = upstream(args)?;
    let stack = args.device.start("proxy")?;
    let mode = AcceptAny {
        per_source_rate: args.rate,
        per_source_burst: (args.rate / 5).max(16),
        ..AcceptAny::default()
    };
    stack.rt.set_accept_any(stack.iface, Some(mode));
    let listener = TcpListener::bind_any(&stack.rt, 1024, args.max_half_open)
        .map_err(|e| format!("cannot listen for any destination: {e}"))?;
    let udp = UdpSocket::bind_any(&stack.rt)
        .map_err(|e| format!("cannot bind the catch-all UDP socket: {e}"))?;
    println!(
        "imp proxy: on {} {} ({}), relaying {}",
        stack.kind,
        stack.name,
        stack.describe(None),
        match upstream {
            Upstream::Direct => "through the host's sockets".to_string(),
            Upstream::Socks5(server) => format!("through SOCKS5 {server}"),
        }
    );
    let idle = Duration::from_secs(args.udp_idle);
    thread::spawn(move || relay_udp(udp, upstream, idle));
    loop {
        let (client, _) = listener
            .accept()
            .map_err(|e| format!("accept failed: {e}"))?;
        thread::spawn(move || {
            if let Err(e) = relay_tcp(client, upstream) {
                eprintln!("imp proxy: {e}");
            }
        });
    }
}

/// One TCP connection: connect upstream to the client's destination, then copy both
/// ways, each direction's end passed on as a half-close.
fn relay_tcp(client: TcpStream, upstream: Upstream) -> Result<(), String> {
    let dst = client.local_addr().map_err(|e| e.to_string())?;
    let host = match upstream {
        Upstream::Direct => std::net::TcpStream::connect(dst),
        Upstream::Socks5(server) => socks5_connect(server, dst),
    };
    let host = match host {
        Ok(host) => host,
        Err(e) => {
            let _ = client.abort();
            return Err(format!("cannot reach {dst}: {e}"));
        }
    };
    let _ = host.set_nodelay(true);
    let (client_up, host_up) = (
        client.try_clone().map_err(|e| e.to_string())?,
        host.try_clone().map_err(|e| e.to_string())?,
    );
    let up =
        thread::spawn(move || copy_then_close(client_up, host_up, |s| s.shutdown(Shutdown::Write)));
    copy_then_close(host, client, |s| s.shutdown(Shutdown::Write));
    let _ = up.join();
    Ok(())
}

/// Copy `from` to `to` until `from` ends, then half-close `to` with `close`.
fn copy_then_close<R: Read, W: Write>(
    mut from: R,
    mut to: W,
    close: impl FnOnce(&W) -> io::Result<()>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = close(&to);
}

/// RFC 1928 §6: a reply's bound address, read and dropped.
fn socks5_read_reply(stream: &mut std::net::TcpStream) -> io::Result<SocketAddr> {
    let mut head = [0u8; 4];
    stream.read_exact(&mut head)?;
    if head[0] != 5 || head[1] != 0 {
        return Err(io::Error::other(format!(
            "SOCKS5 server refused: reply code {}",
            head[1]
        )));
    }
    let addr = match head[3] {
        1 => {
            let mut b = [0u8; 6];
            stream.read_exact(&mut b)?;
            SocketAddr::from(([b[0], b[1], b[2], b[3]], u16::from_be_bytes([b[4], b[5]])))
        }
        4 => {
            let mut b = [0u8; 18];
            stream.read_exact(&mut b)?;
            let ip: [u8; 16] = b[..16].try_into().unwrap_or([0; 16]);
            SocketAddr::from((ip, u16::from_be_bytes([b[16], b[17]])))
        }
        kind => {
            return Err(io::Error::other(format!(
                "SOCKS5 reply with address type {kind}"
            )));
        }
    };
    Ok(addr)
}

/// RFC 1928 §4-5: the address of a request or a UDP header (ATYP, address, port).
fn socks5_addr(addr: SocketAddr, out: &mut Vec<u8>) {
    match addr {
        SocketAddr::V4(a) => {
            out.push(1);
            out.extend_from_slice(&a.ip().octets());
        }
        SocketAddr::V6(a) => {
            out.push(4);
            out.extend_from_slice(&a.ip().octets());
        }
    }
    out.extend_from_slice(&addr.port().to_be_bytes());
}

/// Greet `server` (no authentication) and send the request `command` for `addr`:
/// the control connection and the reply's bound address.
fn socks5_request(
    server: SocketAddr,
    command: u8,
    addr: SocketAddr,
) -> io::Result<(std::net::TcpStream, SocketAddr)> {
    let mut stream = std::net::TcpStream::connect(server)?;
    stream.write_all(&[5, 1, 0])?;
    let mut choice = [0u8; 2];
    stream.read_exact(&mut choice)?;
    if choice != [5, 0] {
        return Err(io::Error::other(
            "SOCKS5 server wants authentication (only 'no authentication' is supported)",
        ));
    }
    let mut request = vec![5, command, 0];
    socks5_addr(addr, &mut request);
    stream.write_all(&request)?;
    let bound = socks5_read_reply(&mut stream)?;
    Ok((stream, bound))
}

/// SOCKS5 CONNECT to `dst`: the stream, ready for data.
fn socks5_connect(server: SocketAddr, dst: SocketAddr) -> io::Result<std::net::TcpStream> {
    socks5_request(server, 1, dst).map(|(stream, _)| stream)
}

/// One UDP flow's way out: a host socket (connected to the destination, or to the
/// SOCKS5 relay, with the control connection kept open as RFC 1928 §7 asks).
struct Flow {
    socket: std::net::UdpSocket,
    _control: Option<std::net::TcpStream>,
    last: Mutex<Instant>,
}

type Flows = Arc<Mutex<HashMap<(SocketAddr, SocketAddr), Arc<Flow>>>>;

/// Relay every UDP flow of the catch-all socket; flows idle for `idle` are closed.
fn relay_udp(udp: UdpSocket, upstream: Upstream, idle: Duration) {
    let udp = Arc::new(udp);
    let flows: Flows = Arc::default();
    let mut buf = vec![0u8; 65536];
    let _ = udp.set_read_timeout(Some(Duration::from_secs(1)));
    loop {
        let (n, src, dst) = match udp.recv_from_to(&mut buf) {
            Ok(got) => got,
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                flows
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .retain(|_, f| !expired(f, idle));
                continue;
            }
            Err(_) => continue,
        };
        let flow = flow_for(&flows, &udp, (src, dst), upstream, idle);
        let Some(flow) = flow else { continue };
        *flow.last.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        let _ = match upstream {
            Upstream::Direct => flow.socket.send(&buf[..n]),
            Upstream::Socks5(_) => {
                let mut packet = vec![0, 0, 0];
                socks5_addr(dst, &mut packet);
                packet.extend_from_slice(&buf[..n]);
                flow.socket.send(&packet)
            }
        };
    }
}

fn expired(flow: &Flow, idle: Duration) -> bool {
    flow.last
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .elapsed()
        >= idle
}

/// The flow of (source, destination), opened (with its reader thread) if new.
fn flow_for(
    flows: &Flows,
    udp: &Arc<UdpSocket>,
    (src, dst): (SocketAddr, SocketAddr),
    upstream: Upstream,
    idle: Duration,
) -> Option<Arc<Flow>> {
    let mut table = flows.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(flow) = table.get(&(src, dst)) {
        return Some(Arc::clone(flow));
    }
    let bind = if dst.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
    let socket = std::net::UdpSocket::bind(bind).ok()?;
    let control = match upstream {
        Upstream::Direct => {
            socket.connect(dst).ok()?;
            None
        }
        Upstream::Socks5(server) => {
            let local = socket.local_addr().ok()?;
            let (control, relay) = socks5_request(server, 3, local).ok()?;
            // A relay address of 0.0.0.0 means the server's own (RFC 1928 §6).
            let relay = if relay.ip().is_unspecified() {
                SocketAddr::new(server.ip(), relay.port())
            } else {
                relay
            };
            socket.connect(relay).ok()?;
            Some(control)
        }
    };
    let _ = socket.set_read_timeout(Some(Duration::from_secs(1)));
    let flow = Arc::new(Flow {
        socket,
        _control: control,
        last: Mutex::new(Instant::now()),
    });
    table.insert((src, dst), Arc::clone(&flow));
    let (flows, udp, reader) = (Arc::clone(flows), Arc::clone(udp), Arc::clone(&flow));
    let socks = matches!(upstream, Upstream::Socks5(_));
    thread::spawn(move || answer_flow(&reader, &udp, (src, dst), socks, idle, &flows));
    Some(flow)
}

/// Send the answers of one flow back to its client, from its destination, until it
/// has been idle for `idle`.
fn answer_flow(
    flow: &Flow,
    udp: &UdpSocket,
    (src, dst): (SocketAddr, SocketAddr),
    socks: bool,
    idle: Duration,
    flows: &Flows,
) {
    let mut buf = vec![0u8; 65536];
    while !expired(flow, idle) {
        let Ok(n) = flow.socket.recv(&mut buf) else {
            continue;
        };
        *flow.last.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        let payload = if socks {
            // RSV(2) FRAG(1) ATYP(1) address port: skip the header.
            let skip = match buf.get(3) {
                Some(1) => 10,
                Some(4) => 22,
                _ => continue,
            };
            if buf.get(2) != Some(&0) || n < skip {
                continue;
            }
            &buf[skip..n]
        } else {
            &buf[..n]
        };
        let _ = udp.send_from(payload, dst, src);
    }
    flows
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&(src, dst));
}
