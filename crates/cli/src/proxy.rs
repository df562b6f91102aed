//! `imp proxy`: a transparent proxy on a TUN device (tun2socks). The TUN interface is in
//! accept-any mode ([`impnet::core::accept_any`]): every TCP connection a client behind
//! the TUN opens, to any address, is accepted by imp and relayed to its original
//! destination through the host's own sockets (or a SOCKS5 server's CONNECT); every
//! UDP flow (source, destination) gets a host UDP socket (or a SOCKS5 UDP ASSOCIATE)
//! that lives until it has been idle for `--udp-idle`.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use clap::Args;
use impnet::core::{AcceptAny, StackConfig};
use impnet::tokio::UdpSocket;
use tokio::io::AsyncWriteExt;

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
    /// Each TCP connection's send and receive buffers in imp, each at most this large
    /// (as hev-socks5-tunnel's `tcp-buffer-size`); they grow from nothing as data
    /// waits, so an idle connection holds none of it. Default: imp's (256 KiB).
    #[arg(long, value_name = "BYTES", value_parser = crate::units::parse_bytes)]
    pub buffer_size: Option<u64>,
    /// The most memory the proxy may come to hold: the TCP connections and UDP flows
    /// it takes are capped so that, each at its largest, they fit beside the proxy's
    /// own base. Past the cap a new connection's SYN is dropped unanswered (the client
    /// tries again, as at a full backlog) and a new UDP flow's datagrams are dropped.
    #[arg(long, value_name = "BYTES", value_parser = crate::units::parse_bytes)]
    pub max_memory: Option<u64>,
    /// Run N shards: N stacks over N queues of a multi-queue TUN, one loop thread and
    /// one relay thread each, every flow relayed by the shard its addresses and ports
    /// pick; `--rate` is shared out among them. Default: the cores, or one with
    /// `--impair`, `--dhcp` or `--max-memory` (whose caps hold for one stack), or when
    /// the TUN exists already as a single-queue device.
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Without the TUN's offloads (--no-offloads, --impair), read and write it one
    /// packet per system call, not in batches through io_uring (a kernel without
    /// io_uring falls back to that by itself). With offloads it is never batched: its
    /// large segments go one per call anyway, and each batched read would need a
    /// buffer of 64 KiB.
    #[arg(long)]
    pub no_batch: bool,
}

/// What keeps `imp proxy` on one stack: the flag, if any.
fn unshardable(args: &ProxyArgs) -> Option<&'static str> {
    args.device
        .unshardable()
        .or(args.max_memory.map(|_| "--max-memory"))
}

/// The number of shards: `--threads`, else the cores when nothing keeps imp on one.
fn shard_count(args: &ProxyArgs) -> usize {
    crate::tapargs::shard_count(args.threads, unshardable(args))
}

/// What the proxy holds before any connection: its code and tables, imp's runtime
/// and spare buffers (measured at about 6.3 MB resident when idle, with the spares
/// kept for reuse on top).
const BASE_MEMORY: u64 = 8 << 20;
/// A TCP relay at its largest, beyond imp's two buffers: the bytes read from the host
/// that imp's send buffer has not taken yet, the connection's state in imp, its task,
/// and the host socket's registration.
const TCP_RELAY_MEMORY: u64 = HOST_READ as u64 + (8 << 10);
/// A UDP flow at its largest: its reader thread's buffer and stack.
const UDP_FLOW_MEMORY: u64 = UDP_BUFFER as u64 + UDP_STACK as u64;

/// The caps `--max-memory` puts on the proxy: (TCP connections, UDP flows). A
/// seventh of what is above the base goes to UDP flows, the rest to TCP.
fn memory_caps(max_memory: u64, buffer_size: u64) -> Result<(usize, usize), String> {
    let per_connection = 2 * buffer_size + TCP_RELAY_MEMORY;
    let room = max_memory.saturating_sub(BASE_MEMORY);
    let udp = room / 7 / UDP_FLOW_MEMORY;
    let tcp = (room - udp * UDP_FLOW_MEMORY) / per_connection;
    if tcp == 0 || udp == 0 {
        let least = BASE_MEMORY + per_connection + UDP_FLOW_MEMORY;
        return Err(format!(
            "--max-memory {max_memory}: the proxy needs {} MiB for itself and {} KiB for \
             each connection at its largest (buffers of {buffer_size} bytes); give at \
             least {least}",
            BASE_MEMORY >> 20,
            per_connection >> 10,
        ));
    }
    Ok((
        usize::try_from(tcp).unwrap_or(usize::MAX),
        usize::try_from(udp).unwrap_or(usize::MAX),
    ))
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
    if let Some(size) = args.buffer_size
        && !(1024..=1 << 30).contains(&size)
    {
        return Err(format!(
            "--buffer-size {size}: give between 1K and 1G bytes"
        ));
    }
    if let Some(max) = args.max_memory {
        memory_caps(max, buffer_size(args))?;
    }
    crate::tapargs::check_threads(args.threads, unshardable(args))?;
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
    let mut config = StackConfig::default();
    if let Some(size) = args.buffer_size {
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        (config.tcp.send_buffer, config.tcp.recv_buffer) = (size, size);
    }
    let mut max_flows = usize::MAX;
    let mut caps = String::new();
    if let Some(max) = args.max_memory {
        let (connections, flows) = memory_caps(max, buffer_size(args))?;
        config.tcp.max_connections = connections;
        max_flows = flows;
        caps = format!(
            "; --max-memory {max}: at most {connections} TCP connections and {flows} UDP flows"
        );
    }
    // A plain TUN in batches (io_uring): a download's packets leave a turn's worth per
    // system call, the client's ACKs come in up to 32 per call. With offloads, 64 KiB
    // segments go one per call either way, and the 32 read buffers would hold 2 MiB.
    let mut device = args.device.clone();
    let plain = args.device.no_offloads || args.device.impair.is_some();
    device.batched = plain && !args.no_batch;
    let shards =
        device.start_shards("proxy", &config, shard_count(args), args.threads.is_none())?;
    let count = shards.stacks.len();
    // A client's new connections spread over the shards: each takes its share.
    let rate = (args.rate / count as u32).max(1);
    let mode = AcceptAny {
        per_source_rate: rate,
        per_source_burst: (rate / 5).max(16),
        ..AcceptAny::default()
    };
    let mut relays = Vec::new();
    for stack in &shards.stacks {
        stack.rt.set_accept_any(stack.iface, Some(mode));
        let listener = impnet::tokio::TcpListener::bind_any(&stack.rt, 1024, args.max_half_open)
            .map_err(|e| format!("cannot listen for any destination: {e}"))?;
        let udp = UdpSocket::bind_any(&stack.rt)
            .map_err(|e| format!("cannot bind the catch-all UDP socket: {e}"))?;
        let driver: Driver = Box::pin(impnet::tokio::drive(&stack.rt));
        relays.push((listener, udp, driver));
    }
    let stack = &shards.stacks[0];
    let sharded = match count {
        1 => String::new(),
        n => format!(" in {n} shards"),
    };
    println!(
        "imp proxy: on {} {} ({}){sharded}, relaying {}{caps}",
        stack.kind,
        stack.name,
        stack.describe(None),
        match upstream {
            Upstream::Direct => "through the host's sockets".to_string(),
            Upstream::Socks5(server) => format!("through SOCKS5 {server}"),
        }
    );
    let idle = Duration::from_secs(args.udp_idle);
    let mut relays = relays.into_iter();
    let first = relays.next().expect("at least one shard");
    for (shard, (listener, udp, driver)) in relays.enumerate() {
        thread::Builder::new()
            .name(format!("relay-{}", shard + 1))
            .spawn(move || {
                if let Err(e) = relay_shard(listener, udp, driver, upstream, idle, max_flows) {
                    eprintln!("imp proxy: shard {}: {e}", shard + 1);
                    std::process::exit(1);
                }
            })
            .map_err(|e| format!("cannot start a relay thread: {e}"))?;
    }
    let (listener, udp, driver) = first;
    relay_shard(listener, udp, driver, upstream, idle, max_flows)
}

/// A shard's device driver ([`impnet::tokio::drive`]), to spawn on its relay runtime.
type Driver = std::pin::Pin<Box<dyn std::future::Future<Output = io::Result<()>> + Send>>;

/// One shard's relays until killed: its TCP connections and the catch-all UDP socket's
/// reads as tasks on this thread, which also takes in the device's packets (`driver`);
/// its UDP flows on a thread of their own.
fn relay_shard(
    listener: impnet::tokio::TcpListener,
    udp: UdpSocket,
    driver: Driver,
    upstream: Upstream,
    idle: Duration,
    max_flows: usize,
) -> Result<(), String> {
    // The buffer comes from this thread's heap: zeroed by a new thread, in an arena of
    // its own, its 64 KiB would be resident from the start.
    let mut buf = vec![0u8; UDP_BUFFER];
    let udp = Arc::new(udp);
    let (datagrams, received) = std::sync::mpsc::sync_channel(UDP_QUEUE);
    let answers = Arc::clone(&udp);
    thread::spawn(move || relay_udp(received, answers, upstream, idle, max_flows));
    // Every TCP relay is a task on this one thread: a connection costs its task and
    // the buffer of what one side has not taken yet, not two threads and their stacks.
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(|e| format!("cannot start the relay runtime: {e}"))?;
    trim_heap();
    // The device is driven from this thread: the client's ACKs are taken in where the
    // relays wait for them, and the catch-all UDP socket is read by a task, not by a
    // blocking call on the flows' thread (which, waiting on the device itself, took
    // in every packet there and woke this thread for each batch).
    tokio.block_on(async move {
        tokio::spawn(driver);
        tokio::spawn(async move {
            loop {
                match udp.recv_from_to(&mut buf).await {
                    // Past the queue's bound a datagram is dropped, as a full socket
                    // buffer would drop it.
                    Ok((n, src, dst)) => match datagrams.try_send((buf[..n].to_vec(), src, dst)) {
                        Ok(()) | Err(std::sync::mpsc::TrySendError::Full(_)) => {}
                        Err(std::sync::mpsc::TrySendError::Disconnected(_)) => break,
                    },
                    // The runtime stopped.
                    Err(e) if e.kind() == io::ErrorKind::NotConnected => break,
                    // An error an earlier datagram met, reported once.
                    Err(_) => tokio::task::yield_now().await,
                }
            }
        });
        loop {
            let (client, _) = listener
                .accept()
                .await
                .map_err(|e| format!("accept failed: {e}"))?;
            tokio::spawn(async move {
                if let Err(e) = relay_tcp(client, upstream).await {
                    eprintln!("imp proxy: {e}");
                }
            });
        }
    })
}

/// Give back to the system the heap pages start-up used and freed (the command line's
/// parser, the device's setup): glibc keeps them otherwise, resident, for allocations
/// an idle proxy does not make.
fn trim_heap() {
    // SAFETY: malloc_trim takes no pointers and only releases free memory.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The size of each of a connection's buffers in imp.
fn buffer_size(args: &ProxyArgs) -> u64 {
    let tcp = StackConfig::default().tcp;
    args.buffer_size
        .unwrap_or(tcp.send_buffer.max(tcp.recv_buffer) as u64)
}

/// One TCP connection: connect upstream to the client's destination, then copy both
/// ways, each direction's end passed on as a half-close.
async fn relay_tcp(client: ClientStream, upstream: Upstream) -> Result<(), String> {
    let dst = client.local_addr().map_err(|e| e.to_string())?;
    let host = match upstream {
        Upstream::Direct => HostStream::connect(dst).await,
        Upstream::Socks5(server) => socks5_connect(server, dst).await,
    };
    let host = match host {
        Ok(host) => host,
        Err(e) => {
            let _ = client.abort();
            return Err(format!("cannot reach {dst}: {e}"));
        }
    };
    let _ = host.set_nodelay(true);
    let (host_read, host_write) = host.into_split();
    // The first error (a reset, an unreachable host) ends both directions at once,
    // so a relay never waits on a side whose peer is gone.
    let relayed = tokio::try_join!(
        client_to_host(&client, host_write),
        host_to_client(host_read, &client)
    );
    if relayed.is_err() {
        // The client learns of it by a reset too.
        let _ = client.abort();
    }
    Ok(())
}

/// The imp-side stream of a relay.
type ClientStream = impnet::tokio::TcpStream;
/// The host-side stream of a relay.
type HostStream = tokio::net::TcpStream;

/// Copy what the client sends to the host, straight from imp's receive buffer (no
/// buffer of the relay's own), then half-close the host side.
async fn client_to_host(
    client: &ClientStream,
    mut host: tokio::net::tcp::OwnedWriteHalf,
) -> io::Result<()> {
    loop {
        host.writable().await?;
        let (mut seen, mut failed) = (false, None);
        client
            .recv_with(|data| {
                seen |= !data.is_empty();
                match host.try_write(data) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
                    Err(e) => {
                        failed = Some(e);
                        0
                    }
                }
            })
            .await?;
        if let Some(e) = failed {
            return Err(e);
        }
        if !seen {
            break;
        }
    }
    host.shutdown().await
}

/// Bytes a relay reads from a host socket at once (into a buffer the thread's relays
/// share; only what imp's send buffer does not take is kept per connection).
const HOST_READ: usize = 64 * 1024;

thread_local! {
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Copy what the host sends to the client, then half-close the client side. The
/// host is read only when imp's send buffer has taken all that came before.
async fn host_to_client(
    host: tokio::net::tcp::OwnedReadHalf,
    client: &ClientStream,
) -> io::Result<()> {
    let mut pending = Vec::new();
    loop {
        if let Some(rest) = (!pending.is_empty()).then_some(&pending) {
            let n = client.send(rest).await?;
            pending.drain(..n);
            if pending.is_empty() {
                pending = Vec::new();
            }
            continue;
        }
        host.readable().await?;
        let read = SCRATCH.with_borrow_mut(|scratch| {
            // Into the spare capacity: no page of the buffer is written (resident)
            // before a read needs it.
            scratch.clear();
            scratch.reserve(HOST_READ);
            let n = match host.try_read_buf(scratch) {
                Ok(0) => return Ok(None),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Some(())),
                Err(e) => return Err(e),
            };
            let taken = match client.try_send(&scratch[..n]) {
                Ok(taken) => taken,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
                Err(e) => return Err(e),
            };
            pending.extend_from_slice(&scratch[taken..n]);
            Ok(Some(()))
        })?;
        if read.is_none() {
            break;
        }
    }
    client.shutdown_write()
}

/// RFC 1928 §3: the server's choice of method, which must be "no authentication".
fn socks5_check_choice(choice: [u8; 2]) -> io::Result<()> {
    if choice == [5, 0] {
        return Ok(());
    }
    Err(io::Error::other(
        "SOCKS5 server wants authentication (only 'no authentication' is supported)",
    ))
}

/// RFC 1928 §4: the request `command` for `addr`.
fn socks5_request_bytes(command: u8, addr: SocketAddr) -> Vec<u8> {
    let mut request = vec![5, command, 0];
    socks5_addr(addr, &mut request);
    request
}

/// RFC 1928 §6: the bytes of a reply after its first four (the bound address and
/// port), or the server's refusal.
fn socks5_reply_rest(head: [u8; 4]) -> io::Result<usize> {
    if head[0] != 5 || head[1] != 0 {
        return Err(io::Error::other(format!(
            "SOCKS5 server refused: reply code {}",
            head[1]
        )));
    }
    match head[3] {
        1 => Ok(6),
        4 => Ok(18),
        kind => Err(io::Error::other(format!(
            "SOCKS5 reply with address type {kind}"
        ))),
    }
}

/// The bound address of a reply from its last bytes (6 for IPv4, 18 for IPv6).
fn socks5_bound(rest: &[u8]) -> SocketAddr {
    let (ip, port) = rest.split_at(rest.len() - 2);
    let port = u16::from_be_bytes([port[0], port[1]]);
    match <[u8; 4]>::try_from(ip) {
        Ok(v4) => SocketAddr::from((v4, port)),
        Err(_) => SocketAddr::from((<[u8; 16]>::try_from(ip).unwrap_or([0; 16]), port)),
    }
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
    socks5_check_choice(choice)?;
    stream.write_all(&socks5_request_bytes(command, addr))?;
    let mut head = [0u8; 4];
    stream.read_exact(&mut head)?;
    let mut rest = vec![0u8; socks5_reply_rest(head)?];
    stream.read_exact(&mut rest)?;
    Ok((stream, socks5_bound(&rest)))
}

/// SOCKS5 CONNECT to `dst` (as [`socks5_request`], on the relays' runtime): the
/// stream, ready for data.
async fn socks5_connect(server: SocketAddr, dst: SocketAddr) -> io::Result<HostStream> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = HostStream::connect(server).await?;
    stream.write_all(&[5, 1, 0]).await?;
    let mut choice = [0u8; 2];
    stream.read_exact(&mut choice).await?;
    socks5_check_choice(choice)?;
    stream.write_all(&socks5_request_bytes(1, dst)).await?;
    let mut head = [0u8; 4];
    stream.read_exact(&mut head).await?;
    let mut rest = [0u8; 18];
    let rest = &mut rest[..socks5_reply_rest(head)?];
    stream.read_exact(rest).await?;
    Ok(stream)
}

/// One UDP flow's way out: a host socket (connected to the destination, or to the
/// SOCKS5 relay, with the control connection kept open as RFC 1928 §7 asks).
struct Flow {
    socket: std::net::UdpSocket,
    _control: Option<std::net::TcpStream>,
    last: Mutex<Instant>,
}

type Flows = Arc<Mutex<HashMap<(SocketAddr, SocketAddr), Arc<Flow>>>>;

/// The buffer a UDP flow's reader receives into (the largest datagram).
const UDP_BUFFER: usize = 65536;
/// The stack of a UDP flow's reader thread.
const UDP_STACK: usize = 128 * 1024;

/// Datagrams of the catch-all socket read and not yet taken by the UDP flows' thread
/// (which may be opening a flow through SOCKS5): at most this many wait.
const UDP_QUEUE: usize = 64;

/// A datagram of the catch-all socket: (payload, source, destination).
type Datagram = (Vec<u8>, SocketAddr, SocketAddr);

/// Relay every UDP flow of the catch-all socket (its datagrams as `received` hands
/// them over; the answers go out through `udp`); flows idle for `idle` are closed,
/// and no more than `max_flows` are open at once.
fn relay_udp(
    received: std::sync::mpsc::Receiver<Datagram>,
    udp: Arc<UdpSocket>,
    upstream: Upstream,
    idle: Duration,
    max_flows: usize,
) {
    let flows: Flows = Arc::default();
    loop {
        let (buf, src, dst) = match received.recv_timeout(Duration::from_secs(1)) {
            Ok(got) => got,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                flows
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .retain(|_, f| !expired(f, idle));
                continue;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
        };
        let flow = flow_for(&flows, &udp, (src, dst), (upstream, max_flows), idle);
        let Some(flow) = flow else { continue };
        *flow.last.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        let _ = match upstream {
            Upstream::Direct => flow.socket.send(&buf),
            Upstream::Socks5(_) => {
                let mut packet = vec![0, 0, 0];
                socks5_addr(dst, &mut packet);
                packet.extend_from_slice(&buf);
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
    (upstream, max_flows): (Upstream, usize),
    idle: Duration,
) -> Option<Arc<Flow>> {
    let mut table = flows.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(flow) = table.get(&(src, dst)) {
        return Some(Arc::clone(flow));
    }
    if table.len() >= max_flows {
        return None;
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
    let spawned = thread::Builder::new()
        .stack_size(UDP_STACK)
        .spawn(move || answer_flow(&reader, &udp, (src, dst), socks, idle, &flows));
    spawned.ok().map(|_| flow)
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
    let mut buf = vec![0u8; UDP_BUFFER];
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
