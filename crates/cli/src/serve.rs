//! `imp serve`: the classic small services on imp over a TAP: echo (7, TCP and UDP),
//! discard (9), chargen (19, RFC 864) and an HTTP/1.1 file server (80, hyper on
//! impnet's tokio sockets: see `http.rs`) and an FTP server (21, `impnet-ftp`: see
//! `ftp_serve.rs`), and a QUIC echo server (`--quic-echo`, quinn over imp's UDP: see
//! `quic_echo.rs`). Runs until
//! SIGINT or SIGTERM, then stops the runtime (which fails every blocked socket call,
//! so all threads wind down) and exits 0.

use std::future::Future;
use std::io::{self, Write};
use std::net::{SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use clap::Args;
use impnet::{Runtime, TcpListener, UdpSocket};

use crate::ftp_serve;
use crate::http;
use crate::quic_echo::QuicEcho;
use crate::tapargs::TapArgs;

/// Options of `imp serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub device: TapArgs,
    /// Echo service on port 7 (TCP and UDP): sends back what it receives.
    #[arg(long)]
    pub echo: bool,
    /// Discard service on port 9: reads and drops everything.
    #[arg(long)]
    pub discard: bool,
    /// Character generator on port 19 (RFC 864): sends lines of ASCII until the peer goes.
    #[arg(long)]
    pub chargen: bool,
    /// Serve the files under DIR over HTTP/1.1 (GET, HEAD, Range, If-Modified-Since,
    /// keep-alive).
    #[arg(long, value_name = "DIR")]
    pub http: Option<PathBuf>,
    /// Port of the HTTP server.
    #[arg(long, default_value_t = 80)]
    pub http_port: u16,
    /// Serve the files under DIR over FTP (RFC 959 with EPSV/EPRT, SIZE, MDTM, REST):
    /// anonymous login, passive and active data connections, TYPE A and I, LIST, NLST,
    /// RETR (and STOR into --ftp-upload).
    #[arg(long, value_name = "DIR")]
    pub ftp: Option<PathBuf>,
    /// Port of the FTP server's control connections.
    #[arg(long, default_value_t = 21)]
    pub ftp_port: u16,
    /// Allow STOR into this directory of the FTP tree (a path under --ftp DIR, such as
    /// `incoming`), and nowhere else; without it the server takes no uploads.
    #[arg(long, value_name = "PATH")]
    pub ftp_upload: Option<String>,
    /// A user who may log in to the FTP server with this password (besides anonymous).
    #[arg(long, value_name = "USER:PASSWORD")]
    pub ftp_user: Option<String>,
    /// Refuse anonymous FTP logins (then --ftp-user is the only login).
    #[arg(long)]
    pub ftp_no_anonymous: bool,
    /// QUIC echo server on UDP PORT (default 4433): every bidirectional stream is sent
    /// back; the server has a new self-signed certificate for imp's addresses.
    #[arg(long, value_name = "PORT", num_args = 0..=1, default_missing_value = "4433")]
    pub quic_echo: Option<u16>,
    /// Write the QUIC echo server's certificate (DER) to FILE, for clients to trust.
    #[arg(long, value_name = "FILE")]
    pub quic_cert: Option<PathBuf>,
    /// TCP Fast Open (RFC 7413) on every TCP service: a client holding a cookie (curl
    /// --tcp-fastopen after its first connection) sends its request on the SYN; at most
    /// QLEN (default 16) such connections per service wait for their handshake's end.
    #[arg(long, value_name = "QLEN", num_args = 0..=1, default_missing_value = "16")]
    pub fastopen: Option<usize>,
    /// Run N shards: N stacks with the same addresses, one loop thread each, over N
    /// queues of a multi-queue TAP or TUN, each flow served by the shard its 4-tuple
    /// hashes to (default: the number of cores; 1 with --impair, --dhcp, --ftp or
    /// --quic-echo, or on an existing single-queue device). 1 is one stack on a plain
    /// device, as without shards.
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Read and write the device (each shard's queue) in batches through io_uring: up
    /// to 32 frames per read call, the frames of one turn of imp's loop in one write
    /// call (large TCP segments go one per call either way; a kernel without io_uring
    /// falls back to one call per frame by itself, with a note on standard error).
    /// Off by default: it halves the system calls per request, but W6 (wrk) served no
    /// more requests per second with it.
    #[arg(long, conflicts_with = "no_batch")]
    pub batch: bool,
    /// One `read` or `write` per frame, not in batches through io_uring (the default).
    #[arg(long)]
    pub no_batch: bool,
}

/// Whether `imp serve` asks for batched device I/O (`--batch`, `--no-batch`).
fn batched(args: &ServeArgs) -> bool {
    args.batch && !args.no_batch
}

/// Connections served, over all services (for the closing line).
static CONNECTIONS: AtomicU64 = AtomicU64::new(0);

/// Connections accepted by each shard's TCP services (for the closing line).
type ShardCounts = Arc<Vec<AtomicU64>>;

/// One of the small TCP services.
#[derive(Debug, Clone, Copy)]
enum Small {
    Echo,
    Discard,
    Chargen,
}

/// The services asked for: (echo, discard, chargen); all three when none (and no
/// HTTP) is named.
fn services(args: &ServeArgs) -> (bool, bool, bool) {
    let others = args.http.is_some() || args.ftp.is_some() || args.quic_echo.is_some();
    if !args.echo && !args.discard && !args.chargen && !others {
        (true, true, true)
    } else {
        (args.echo, args.discard, args.chargen)
    }
}

/// What keeps `imp serve` on one stack: the flag, if any.
fn unshardable(args: &ServeArgs) -> Option<&'static str> {
    args.device.unshardable().or(if args.ftp.is_some() {
        // A passive data connection would reach the shard its client's port picks,
        // not the one listening for it.
        Some("--ftp")
    } else if args.quic_echo.is_some() {
        Some("--quic-echo")
    } else {
        None
    })
}

/// The number of shards: `--threads`, else the cores when nothing keeps imp on one.
fn shard_count(args: &ServeArgs) -> usize {
    crate::tapargs::shard_count(args.threads, unshardable(args))
}

/// Check the arguments before anything opens (it only looks whether `--http` and
/// `--ftp` name directories): every error names the option.
pub fn validate(args: &ServeArgs) -> Result<(), String> {
    args.device.validate()?;
    args.device.required("serve")?;
    ftp_config(args)?;
    crate::tapargs::check_threads(args.threads, unshardable(args))?;
    match (args.quic_echo, &args.quic_cert) {
        (Some(0), _) => return Err("--quic-echo 0: give the UDP port for QUIC (1 to 65535)".into()),
        (Some(7), _) if services(args).0 => {
            return Err("--quic-echo 7 is UDP echo's port: pick another for QUIC".into());
        }
        (None, Some(_)) => return Err("--quic-cert needs --quic-echo (the QUIC server)".into()),
        _ => {}
    }
    if let Some(dir) = &args.http {
        if !dir.is_dir() {
            return Err(format!("--http {}: not a directory", dir.display()));
        }
        let (echo, discard, chargen) = services(args);
        let taken = [
            (echo, 7, "echo"),
            (discard, 9, "discard"),
            (chargen, 19, "chargen"),
        ]
        .into_iter()
        .find(|&(on, port, _)| on && port == args.http_port);
        if args.http_port == 0 {
            return Err("--http-port 0: give the port to serve HTTP on (1 to 65535)".into());
        }
        if let Some((_, port, name)) = taken {
            return Err(format!(
                "--http-port {port} is {name}'s port: pick another for HTTP"
            ));
        }
    }
    Ok(())
}

/// The FTP server's logins and upload directory, checked (`None` without `--ftp`).
fn ftp_config(args: &ServeArgs) -> Result<Option<impnet_ftp::ServerConfig>, String> {
    let Some(dir) = &args.ftp else {
        let stray = [
            (args.ftp_upload.is_some(), "--ftp-upload"),
            (args.ftp_user.is_some(), "--ftp-user"),
            (args.ftp_no_anonymous, "--ftp-no-anonymous"),
        ];
        return match stray.iter().find(|(given, _)| *given) {
            Some((_, flag)) => Err(format!("{flag} needs --ftp DIR (the FTP server)")),
            None => Ok(None),
        };
    };
    if !dir.is_dir() {
        return Err(format!("--ftp {}: not a directory", dir.display()));
    }
    if args.ftp_port == 0 {
        return Err("--ftp-port 0: give the port to serve FTP on (1 to 65535)".into());
    }
    let (echo, discard, chargen) = services(args);
    let http = args.http.is_some().then_some(args.http_port);
    let taken = [
        (echo, 7, "echo"),
        (discard, 9, "discard"),
        (chargen, 19, "chargen"),
    ]
    .into_iter()
    .chain(http.map(|p| (true, p, "HTTP")))
    .find(|&(on, port, _)| on && port == args.ftp_port);
    if let Some((_, port, name)) = taken {
        return Err(format!(
            "--ftp-port {port} is {name}'s port: pick another for FTP"
        ));
    }
    let user = match &args.ftp_user {
        Some(text) => match text.split_once(':') {
            Some((u, p)) if !u.is_empty() && !u.contains(char::is_whitespace) => {
                Some((u.to_string(), p.to_string()))
            }
            _ => return Err(format!("--ftp-user {text}: give USER:PASSWORD")),
        },
        None => None,
    };
    if args.ftp_no_anonymous && user.is_none() {
        return Err("--ftp-no-anonymous leaves no login: add --ftp-user USER:PASSWORD".into());
    }
    let upload_dir = match &args.ftp_upload {
        Some(path) => {
            let tree = impnet_ftp::path::resolve("/", path)
                .map_err(|e| format!("--ftp-upload {path}: {e}"))?;
            if tree == "/" || !dir.join(tree.trim_start_matches('/')).is_dir() {
                return Err(format!(
                    "--ftp-upload {path}: not a directory under --ftp {} (the tree's root \
                     itself cannot be it)",
                    dir.display()
                ));
            }
            Some(tree)
        }
        None => None,
    };
    Ok(Some(impnet_ftp::ServerConfig {
        anonymous: !args.ftp_no_anonymous,
        user,
        upload_dir,
    }))
}

/// Run `imp serve`.
pub fn run(args: &ServeArgs) -> Result<(), String> {
    validate(args)?;
    args.device.required("serve")?;
    let root = match &args.http {
        Some(dir) => Some(
            dir.canonicalize()
                .map_err(|e| format!("--http {}: {e}", dir.display()))?,
        ),
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .map_err(|e| format!("cannot install the signal handler: {e}"))?;
    }
    let mut device = args.device.clone();
    device.batched = batched(args);
    let shards = device.start_shards(
        "serve",
        &impnet::core::StackConfig::default(),
        shard_count(args),
        args.threads.is_none(),
    )?;
    let exchange = shards.exchange;
    let mut stacks = shards.stacks.into_iter();
    let stack = stacks.next().expect("at least one shard");
    let others: Vec<_> = stacks.collect();
    let counts: ShardCounts = Arc::new((0..=others.len()).map(|_| AtomicU64::new(0)).collect());
    let mut threads = Vec::new();
    let mut names = Vec::new();
    for (shard, rt) in std::iter::once(&stack.rt)
        .chain(others.iter().map(|s| &s.rt))
        .enumerate()
    {
        let count = (Arc::clone(&counts), shard);
        names = serve_shard(args, &stack, rt, root.as_deref(), count, &mut threads)?;
    }
    let ftp = ftp_listener(args, &stack, &mut names)?;
    if let Some(port) = args.quic_echo {
        threads.push(start_quic(args, port, &stack, &stop, &mut names)?);
    }
    // Bound before the startup line, so `imp ss` finds it once that is out.
    let control = crate::control::bind_or_warn("imp serve");
    let sharded = match others.len() {
        0 => String::new(),
        n => format!(" in {} shards", n + 1),
    };
    println!(
        "imp serve: {} on {}{sharded}; stop with Ctrl-C",
        names.join(", "),
        stack.describe(args.device.impair.as_ref())
    );
    let _ = io::stdout().flush();
    // FTP sessions make data connections on the runtime as they go: they share it.
    let rt = Arc::new(RwLock::new(stack.rt));
    if let Some(ftp) = ftp {
        threads.push(start_ftp(ftp, &rt));
    }
    // Every shard's runtime, shard 0's first: the control socket answers for all.
    let all: Vec<Arc<RwLock<Runtime>>> = std::iter::once(rt)
        .chain(others.into_iter().map(|s| Arc::new(RwLock::new(s.rt))))
        .collect();
    threads.extend(control.map(|control| start_control(control, &all, &stop)));
    let gone = wait_for_stop(&all, &stop);
    shutdown(&all, threads, (&counts, exchange.as_deref()));
    gone.map_or(Ok(()), Err)
}

/// Start the TCP services (echo, discard, chargen, HTTP) and UDP echo on one shard's
/// runtime `rt` (`stack` describes the device and addresses, the same for every
/// shard); `count` is where the shard's accepted connections are counted. The
/// services' names, for the startup line.
fn serve_shard(
    args: &ServeArgs,
    stack: &crate::tapargs::TapStack,
    rt: &Runtime,
    root: Option<&std::path::Path>,
    (counts, shard): (ShardCounts, usize),
    threads: &mut Vec<std::thread::JoinHandle<()>>,
) -> Result<Vec<String>, String> {
    let (echo, discard, chargen) = services(args);
    let mut services = Vec::new();
    for (on, name, port, small) in [
        (echo, "echo", 7, Small::Echo),
        (discard, "discard", 9, Small::Discard),
        (chargen, "chargen", 19, Small::Chargen),
    ] {
        if on {
            services.push((name, port, small));
        }
    }
    let mut names = Vec::new();
    if let Some(root) = root {
        let port = args.http_port;
        let site = http::Site::new(root).map_err(|e| format!("--http {}: {e}", root.display()))?;
        let local = stack.listen_addr(port);
        let listener = impnet::tokio::TcpListener::bind(rt, local)
            .map_err(|e| format!("cannot listen on {local} for http: {e}"))?;
        fast_open(args, local, |qlen| listener.set_fast_open(qlen))?;
        names.push(format!("http ({port})"));
        let driver = impnet::tokio::drive(rt);
        let counts = Arc::clone(&counts);
        threads.push(spawn("http", move || {
            let counted = move || {
                CONNECTIONS.fetch_add(1, Ordering::Relaxed);
                counts[shard].fetch_add(1, Ordering::Relaxed);
            };
            if let Err(e) = http::run(driver, listener, site, counted) {
                eprintln!("imp serve: http: {e}");
            }
        }));
    }
    let mut listeners = Vec::new();
    for (name, port, small) in services {
        let local = stack.listen_addr(port);
        let listener = impnet::tokio::TcpListener::bind(rt, local)
            .map_err(|e| format!("cannot listen on {local} for {name}: {e}"))?;
        fast_open(args, local, |qlen| listener.set_fast_open(qlen))?;
        names.push(format!("{name} ({port})"));
        listeners.push((name, listener, small));
    }
    if !listeners.is_empty() {
        let driver = impnet::tokio::drive(rt);
        threads.push(spawn("services", move || {
            if let Err(e) = run_small(driver, listeners, &counts[shard]) {
                eprintln!("imp serve: {e}");
            }
        }));
    }
    if let Some(ip) = stack.addr4().map(|c| c.address)
        && echo
    {
        let socket = UdpSocket::bind(rt, SocketAddrV4::new(ip, 7))
            .map_err(|e| format!("cannot bind UDP {ip}:7 for echo: {e}"))?;
        threads.push(spawn("udp-echo", move || echo_udp(&socket)));
    }
    Ok(names)
}

/// `--fastopen` on the listener on `local` (`set` turns it on with the queue length).
fn fast_open(
    args: &ServeArgs,
    local: SocketAddr,
    set: impl FnOnce(usize) -> io::Result<()>,
) -> Result<(), String> {
    args.fastopen.map_or(Ok(()), |qlen| {
        set(qlen).map_err(|e| format!("--fastopen on {local}: {e}"))
    })
}

/// Until Ctrl-C (or SIGTERM) or the runtime lost its devices (then why); `stop` is
/// set on the way out, so that the threads watching it (the control socket's) end too.
fn wait_for_stop(all: &[Arc<RwLock<Runtime>>], stop: &AtomicBool) -> Option<String> {
    let mut gone = None;
    while !stop.load(Ordering::Relaxed) && gone.is_none() {
        std::thread::sleep(Duration::from_millis(50));
        gone = all
            .iter()
            .find_map(|rt| rt.read().unwrap_or_else(|e| e.into_inner()).devices_gone());
    }
    stop.store(true, Ordering::Relaxed);
    gone
}

/// The control socket's thread (`imp ss` asks it about every shard).
fn start_control(
    control: crate::control::Control,
    all: &[Arc<RwLock<Runtime>>],
    stop: &Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let (all, stop) = (all.to_vec(), Arc::clone(stop));
    spawn("control", move || {
        control.serve(&stop, |request| {
            let guards: Vec<_> = all
                .iter()
                .map(|rt| rt.read().unwrap_or_else(|e| e.into_inner()))
                .collect();
            let rts: Vec<&Runtime> = guards.iter().map(|g| &**g).collect();
            crate::control::answer(&rts, request)
        });
    })
}

/// The QUIC echo server's thread (its socket fails once the runtime is shut down,
/// which ends it, as `stop` does).
fn start_quic(
    args: &ServeArgs,
    port: u16,
    stack: &crate::tapargs::TapStack,
    stop: &Arc<AtomicBool>,
    names: &mut Vec<String>,
) -> Result<std::thread::JoinHandle<()>, String> {
    let local = stack.listen_addr(port);
    let ips: Vec<_> = stack.addrs.iter().map(|a| a.address()).collect();
    let server = QuicEcho::new(&stack.rt, local, &ips, args.quic_cert.as_deref())?;
    names.push(server.describe());
    let stop = Arc::clone(stop);
    Ok(spawn("quic-echo", move || {
        if let Err(e) = server.run(&stop, &CONNECTIONS) {
            eprintln!("imp serve: quic-echo: {e}");
        }
    }))
}

/// The FTP server's control listener, tree and settings, when `--ftp` is given.
fn ftp_listener(
    args: &ServeArgs,
    stack: &crate::tapargs::TapStack,
    names: &mut Vec<String>,
) -> Result<Option<(TcpListener, impnet_ftp::DiskFs, impnet_ftp::ServerConfig)>, String> {
    let (Some(dir), Some(config)) = (&args.ftp, ftp_config(args)?) else {
        return Ok(None);
    };
    let fs = impnet_ftp::DiskFs::new(dir).map_err(|e| format!("--ftp {}: {e}", dir.display()))?;
    // On every address, both families (one IPv4 address only: on it): PORT and PASV
    // carry IPv4 addresses, EPRT and EPSV (RFC 2428) either family.
    let local = stack.listen_addr(args.ftp_port);
    let listener = TcpListener::bind(&stack.rt, local)
        .map_err(|e| format!("cannot listen on {local} for ftp: {e}"))?;
    let port = args.ftp_port;
    names.push(format!("ftp ({port})"));
    Ok(Some((listener, fs, config)))
}

/// The FTP server's thread: control connections accepted, a session each.
fn start_ftp(
    (listener, fs, config): (TcpListener, impnet_ftp::DiskFs, impnet_ftp::ServerConfig),
    rt: &Arc<RwLock<Runtime>>,
) -> std::thread::JoinHandle<()> {
    let server = ftp_serve::Server {
        rt: Arc::clone(rt),
        fs,
        config,
    };
    spawn("ftp", move || {
        ftp_serve::accept_loop(&listener, &server, || {
            CONNECTIONS.fetch_add(1, Ordering::Relaxed);
        });
    })
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(f)
        .expect("spawning a service thread")
}

/// Stop the runtimes (shard 0's in `rt`, the other shards'): every blocked accept,
/// read and write fails, so the threads end.
fn shutdown(
    all: &[Arc<RwLock<Runtime>>],
    threads: Vec<std::thread::JoinHandle<()>>,
    (counts, exchange): (&ShardCounts, Option<&impnet::shard::Exchange>),
) {
    let (mut rx, mut tx) = (0, 0);
    for rt in all {
        let mut rt = rt.write().unwrap_or_else(|e| e.into_inner());
        let stats = rt.with_stack(|stack, _| stack.stats().tcp.clone());
        rx += stats.rx_segments;
        tx += stats.tx_segments;
        rt.shutdown();
    }
    for thread in threads {
        let _ = thread.join();
    }
    let per_shard = match counts.len() {
        1 => String::new(),
        _ => {
            let each: Vec<String> = counts
                .iter()
                .enumerate()
                .map(|(shard, n)| format!("{shard}: {}", n.load(Ordering::Relaxed)))
                .collect();
            let handed: u64 = exchange.map_or(0, |x| {
                (0..x.shards()).map(|shard| x.stats(shard).handed_out).sum()
            });
            format!(
                "; frames handed between shards: {handed}; accepted by shard {}",
                each.join(", ")
            )
        }
    };
    println!(
        "imp serve: stopped after {} connections ({} TCP segments in, {} out){per_shard}",
        CONNECTIONS.load(Ordering::Relaxed),
        rx,
        tx
    );
}

/// The small TCP services of one shard as tasks on one tokio current-thread runtime,
/// which also takes in the shard's frames (`driver`), until the imp runtime stops: a
/// connection costs a task, not a thread, so connection churn is not thread churn.
fn run_small(
    driver: impl Future<Output = io::Result<()>> + Send + 'static,
    listeners: Vec<(&'static str, impnet::tokio::TcpListener, Small)>,
    count: &AtomicU64,
) -> io::Result<()> {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .enable_io()
        .build()?;
    tokio.spawn(driver);
    tokio.block_on(async {
        let loops = listeners
            .into_iter()
            .map(|(name, listener, small)| accept_loop(name, listener, small, count));
        join_all(loops).await;
    });
    Ok(())
}

/// Run every future to its end, concurrently on this task.
async fn join_all(futures: impl Iterator<Item = impl Future<Output = ()>>) {
    let mut futures: Vec<_> = futures.map(Box::pin).collect();
    std::future::poll_fn(|cx| {
        futures.retain_mut(|f| f.as_mut().poll(cx).is_pending());
        if futures.is_empty() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
}

/// Accept connections for one small service, each served on a task of its own, until
/// the runtime is shut down.
async fn accept_loop(
    name: &'static str,
    listener: impnet::tokio::TcpListener,
    small: Small,
    count: &AtomicU64,
) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                CONNECTIONS.fetch_add(1, Ordering::Relaxed);
                count.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    // NotConnected: the runtime stopped under the connection.
                    if let Err(e) = small.serve(stream).await
                        && e.kind() != io::ErrorKind::NotConnected
                    {
                        eprintln!("imp serve: {name} with {peer}: {e}");
                    }
                });
            }
            // The runtime was shut down.
            Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
            Err(e) => {
                eprintln!("imp serve: {name}: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

impl Small {
    /// Serve one connection: echo it back (then close), read it to its end, or send
    /// RFC 864's lines until the peer goes away.
    async fn serve(self, mut stream: impnet::tokio::TcpStream) -> io::Result<()> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        match self {
            Small::Echo => {
                let mut buf = vec![0u8; 16 * 1024];
                loop {
                    let n = stream.read(&mut buf).await?;
                    if n == 0 {
                        return stream.shutdown().await;
                    }
                    stream.write_all(&buf[..n]).await?;
                }
            }
            Small::Discard => tokio::io::copy(&mut stream, &mut tokio::io::sink())
                .await
                .map(|_| ()),
            Small::Chargen => {
                let lines = chargen_lines();
                loop {
                    match stream.write_all(&lines).await {
                        Ok(()) => {}
                        // The peer went away: the normal end of a chargen session.
                        Err(e)
                            if matches!(
                                e.kind(),
                                io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
                            ) =>
                        {
                            return Ok(());
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
        }
    }
}

/// RFC 864: 72-character lines, each starting one character further along the 95
/// printable ASCII characters.
fn chargen_lines() -> Vec<u8> {
    let printable: Vec<u8> = (b' '..=b'~').collect();
    let mut out = Vec::with_capacity(printable.len() * 74);
    for start in 0..printable.len() {
        out.extend((0..72).map(|i| printable[(start + i) % printable.len()]));
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn echo_udp(socket: &UdpSocket) {
    let mut buf = vec![0u8; 65536];
    loop {
        match socket.recv_from(&mut buf) {
            Ok((n, peer)) => {
                let _ = socket.send_to(&buf[..n], peer);
            }
            Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chargen_follows_rfc_864() {
        let lines = chargen_lines();
        assert_eq!(lines.len(), 95 * 74);
        assert_eq!(&lines[..3], b" !\"");
        assert_eq!(&lines[72..76], b"\r\n!\"");
    }
}
