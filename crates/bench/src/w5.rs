//! W5: throughput against the Linux kernel over a TAP device, in network namespaces the
//! bench creates (and deletes, also on error): imp -> Linux and Linux -> imp with and
//! without the virtio-net offloads (large segments, checksums left to the kernel),
//! smoltcp over the same TAP setup (plain frames: smoltcp has no virtio-net header), and
//! Linux -> Linux over a veth pair between two namespaces as the reference.
//!
//! Rows: `W5-tx` / `W5-rx` (imp with offloads), `W5-tx-plain` / `W5-rx-plain` (imp
//! without), `W5-tx-soft` / `W5-rx-soft` (imp without the kernel's offloads but with its
//! own software GRO and GSO, `impnet_phy::Offload`; `-soft-deferred` with its GRO
//! leaving TCP checksums to the stack, `Checksums::Deferred`), and `-plain` and `-soft`
//! again over a TUN (`-plain-tun`, `-soft-tun`); `tx` is the stack under test sending
//! to the kernel, `rx` receiving from it.
//! smoltcp's one figure per direction and the veth figure stand in every row of their
//! direction, so each row's ratios compare with them. The kernel's side is std::net on
//! threads that entered the namespace; every stack writes 256 KiB pieces.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant as StdInstant};

use impnet::core::{IfaceConfig, IfaceId, StackConfig};
use impnet::phy::{Checksums, Device, Framing, Offload, Tap, TapConfig, Tun};
use impnet::{PollFd, Runtime};
use impnet_wire::ethernet;
use impnet_wire::ipv4::Cidr;

use super::{Sample, pattern};

const PORT: u16 = 5001;
/// Bytes per application write and read, on every stack.
const PIECE: usize = 256 * 1024;
/// A transfer that has not finished in this long has stalled.
const STALL: Duration = Duration::from_secs(60);

/// Why W5 cannot run here, if it cannot.
pub(crate) fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root (network namespaces and TAP devices)".into());
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Some("/dev/net/tun is missing".into());
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return Some("the `ip` tool (iproute2) is missing".into());
    }
    None
}

/// A network namespace, deleted with everything in it on drop.
pub(super) struct Netns {
    pub(super) name: String,
}

impl Netns {
    pub(super) fn new() -> Result<Netns, String> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "imp-bench-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        run_ip(&["netns", "add", &name])?;
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Two namespaces joined by a veth pair, `va` here with `net`.1/24 and `vb` in
    /// `peer` with `net`.2/24, both up.
    pub(super) fn veth_to(&self, peer: &Netns, net: &str) -> Result<(), String> {
        let peer_ns = peer.name.as_str();
        self.ip(&[
            "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", peer_ns,
        ])?;
        self.ip(&["addr", "add", &format!("{net}.1/24"), "dev", "va"])?;
        peer.ip(&["addr", "add", &format!("{net}.2/24"), "dev", "vb"])?;
        self.ip(&["link", "set", "va", "up"])?;
        peer.ip(&["link", "set", "vb", "up"])
    }

    /// `ip -n NS args...`.
    pub(super) fn ip(&self, args: &[&str]) -> Result<(), String> {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        run_ip(&all)
    }

    /// Run `f` on a new thread inside the namespace (a network namespace is per thread).
    pub(super) fn spawn<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> Result<T, String> + Send + 'static,
    ) -> JoinHandle<Result<T, String>> {
        let path = format!("/var/run/netns/{}", self.name);
        std::thread::spawn(move || {
            let file = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
            // SAFETY: setns on a valid namespace descriptor changes only this thread,
            // which ends when `f` returns.
            if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(format!("setns: {}", std::io::Error::last_os_error()));
            }
            f()
        })
    }

    pub(super) fn enter<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> Result<T, String> + Send + 'static,
    ) -> Result<T, String> {
        join(self.spawn(f))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

fn run_ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

pub(super) fn join<T>(handle: JoinHandle<Result<T, String>>) -> Result<T, String> {
    handle
        .join()
        .map_err(|_| "a kernel-side thread panicked".to_string())?
}

/// What the kernel's side of a transfer does once a connection arrives.
#[derive(Debug, Clone, Copy)]
enum Role {
    /// Read until the peer closes; the result is the byte count.
    Sink,
    /// Send `total` bytes, then close.
    Source,
}

/// A kernel listener on `addr` inside `ns`, ready when this returns; the handle gives
/// the bytes moved.
fn kernel_server(
    ns: &Netns,
    addr: SocketAddrV4,
    role: Role,
    total: u64,
) -> Result<JoinHandle<Result<u64, String>>, String> {
    let (ready, bound) = mpsc::channel();
    let handle = ns.spawn(move || {
        let listener = match TcpListener::bind(addr) {
            Ok(l) => l,
            Err(e) => {
                let _ = ready.send(Err(format!("bind {addr}: {e}")));
                return Ok(0);
            }
        };
        let _ = ready.send(Ok(()));
        let (mut stream, _) = listener.accept().map_err(|e| format!("accept: {e}"))?;
        stream.set_read_timeout(Some(STALL)).ok();
        stream.set_write_timeout(Some(STALL)).ok();
        match role {
            Role::Sink => sink(&mut stream),
            Role::Source => source(&mut stream, total),
        }
    });
    bound
        .recv_timeout(STALL)
        .map_err(|_| "the kernel-side listener did not start".to_string())??;
    Ok(handle)
}

fn sink(stream: &mut impl Read) -> Result<u64, String> {
    let mut buf = vec![0u8; PIECE];
    let mut got = 0u64;
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Ok(got),
            Ok(n) => got += n as u64,
            Err(e) => return Err(format!("read after {got} bytes: {e}")),
        }
    }
}

fn source(stream: &mut TcpStream, total: u64) -> Result<u64, String> {
    let chunk = pattern(PIECE);
    let mut sent = 0u64;
    while sent < total {
        let n = (total - sent).min(PIECE as u64) as usize;
        stream
            .write_all(&chunk[..n])
            .map_err(|e| format!("write after {sent} bytes: {e}"))?;
        sent += n as u64;
    }
    stream.shutdown(Shutdown::Write).ok();
    // Wait for the peer's close, so the timing covers delivery.
    let _ = stream.read(&mut [0u8; 1]);
    Ok(sent)
}

fn gbits(bytes: u64, secs: f64) -> f64 {
    bytes as f64 * 8.0 / secs / 1e9
}

/// A namespace whose TAP `imp0` has the kernel's address 10.207.S.1/24, up; the TAP is
/// returned for the stack under test, which takes 10.207.S.2.
struct TapNet {
    ns: Netns,
    kernel: Ipv4Addr,
    local: Ipv4Addr,
}

fn tap_net(subnet: u8, config: TapConfig) -> Result<(TapNet, Tap), String> {
    let ns = Netns::new()?;
    let tap = ns.enter(move || Tap::open_with(&config).map_err(|e| e.to_string()))?;
    let kernel = Ipv4Addr::new(10, 207, subnet, 1);
    ns.ip(&["addr", "add", &format!("{kernel}/24"), "dev", tap.name()])?;
    ns.ip(&["link", "set", tap.name(), "up"])?;
    let local = Ipv4Addr::new(10, 207, subnet, 2);
    Ok((TapNet { ns, kernel, local }, tap))
}

/// A namespace whose TUN `imp0` has the kernel's address 10.207.S.1/24, up; the TUN
/// is returned for the stack under test, which takes 10.207.S.2.
fn tun_net(subnet: u8, config: TapConfig) -> Result<(TapNet, Tun), String> {
    let ns = Netns::new()?;
    let tun = ns.enter(move || Tun::open_with(&config).map_err(|e| e.to_string()))?;
    let kernel = Ipv4Addr::new(10, 207, subnet, 1);
    ns.ip(&["addr", "add", &format!("{kernel}/24"), "dev", tun.name()])?;
    ns.ip(&["link", "set", tun.name(), "up"])?;
    // The kernel drops what it sends on a TUN until its link watcher has seen the
    // carrier come on (see `Tun`): let it.
    std::thread::sleep(Duration::from_millis(50));
    let local = Ipv4Addr::new(10, 207, subnet, 2);
    Ok((TapNet { ns, kernel, local }, tun))
}

/// How imp meets the kernel in one W5 run.
#[derive(Debug, Clone, Copy)]
struct Setup {
    /// A TUN (bare IP packets) instead of a TAP.
    tun: bool,
    /// The kernel's virtio-net offloads (TSO, checksums).
    offloads: bool,
    /// imp's own GRO and GSO (`Offload`), and how its GRO treats checksums.
    software: Option<Checksums>,
    /// The namespace's subnet, 10.207.S.0/24.
    subnet: u8,
}

/// Add `device` to `rt` as `iface` says, behind imp's own GRO and GSO if `software`
/// says how.
fn attach<D>(
    rt: &Runtime,
    device: D,
    iface: IfaceConfig,
    framing: Framing,
    software: Option<Checksums>,
) -> IfaceId
where
    D: Device + PollFd + Send + 'static,
{
    let Some(checksums) = software else {
        return rt.add_device(device, iface);
    };
    let device = Offload::new(device, framing, iface.mtu)
        .gro(true)
        .gso(true)
        .checksums(checksums);
    let offloads = device.stack_offloads(iface.offloads);
    rt.add_device(device, iface.with_offloads(offloads))
}

/// W5 on imp: (tx, rx) in Gbit/s over a TAP or TUN as `setup` says.
fn imp_run(setup: Setup, total: u64) -> Result<(f64, f64), String> {
    let config = TapConfig::new("imp0")
        .offloads(setup.offloads)
        .partial_checksums(true);
    let rt = Runtime::new(StackConfig::default()).map_err(|e| e.to_string())?;
    let (net, iface, offloads) = if setup.tun {
        let (net, tun) = tun_net(setup.subnet, config)?;
        let offloads = tun.offloads();
        let iface = IfaceConfig::ip(tun.ip_mtu()).with_offloads(tun.stack_offloads());
        (
            net,
            attach(&rt, tun, iface, Framing::Ip, setup.software),
            offloads,
        )
    } else {
        let (net, tap) = tap_net(setup.subnet, config)?;
        let offloads = tap.offloads();
        let mac = ethernet::Address([0x02, 0x69, 0x6d, 0x70, 0x00, 0x05]);
        let iface = IfaceConfig::new(mac, tap.ip_mtu()).with_offloads(tap.stack_offloads());
        (
            net,
            attach(&rt, tap, iface, Framing::Ethernet, setup.software),
            offloads,
        )
    };
    if setup.offloads && !offloads {
        return Err("the kernel refused the TAP offloads".into());
    }
    rt.add_address(iface, Cidr::new(net.local, 24).map_err(|e| e.to_string())?);
    transfer(&rt, &net, total)
}

/// imp -> Linux, then Linux -> imp, `total` bytes each: (tx, rx) in Gbit/s.
fn transfer(rt: &Runtime, net: &TapNet, total: u64) -> Result<(f64, f64), String> {
    let remote = SocketAddrV4::new(net.kernel, PORT);
    // imp -> Linux.
    let server = kernel_server(&net.ns, remote, Role::Sink, total)?;
    let mut stream = impnet::TcpStream::connect(rt, remote).map_err(|e| format!("connect: {e}"))?;
    stream.set_write_timeout(Some(STALL)).ok();
    let chunk = pattern(PIECE);
    let start = StdInstant::now();
    let mut sent = 0u64;
    while sent < total {
        let n = (total - sent).min(PIECE as u64) as usize;
        stream
            .write_all(&chunk[..n])
            .map_err(|e| format!("imp write after {sent} bytes: {e}"))?;
        sent += n as u64;
    }
    stream.shutdown(Shutdown::Write).ok();
    let got = join(server)?;
    let tx = gbits(got, start.elapsed().as_secs_f64());
    drop(stream);
    if got != total {
        return Err(format!(
            "the kernel received {got} of {total} bytes from imp"
        ));
    }
    // Linux -> imp.
    let remote = SocketAddrV4::new(net.kernel, PORT + 1);
    let server = kernel_server(&net.ns, remote, Role::Source, total)?;
    let mut stream = impnet::TcpStream::connect(rt, remote).map_err(|e| format!("connect: {e}"))?;
    stream.set_read_timeout(Some(STALL)).ok();
    let start = StdInstant::now();
    let got = sink(&mut stream)?;
    let rx = gbits(got, start.elapsed().as_secs_f64());
    drop(stream);
    join(server)?;
    if got != total {
        return Err(format!("imp received {got} of {total} bytes"));
    }
    Ok((tx, rx))
}

/// W5 on Linux: one namespace to another over a veth pair, Gbit/s.
fn veth(total: u64) -> Result<f64, String> {
    let a = Netns::new()?;
    let b = Netns::new()?;
    a.ip(&[
        "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", &b.name,
    ])?;
    a.ip(&["addr", "add", "10.208.0.1/24", "dev", "va"])?;
    b.ip(&["addr", "add", "10.208.0.2/24", "dev", "vb"])?;
    a.ip(&["link", "set", "va", "up"])?;
    b.ip(&["link", "set", "vb", "up"])?;
    let addr = SocketAddrV4::new(Ipv4Addr::new(10, 208, 0, 1), PORT);
    let server = kernel_server(&a, addr, Role::Sink, total)?;
    let start = StdInstant::now();
    let client = b.spawn(move || {
        let mut stream = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
        let chunk = pattern(PIECE);
        let mut sent = 0u64;
        while sent < total {
            let n = (total - sent).min(PIECE as u64) as usize;
            stream
                .write_all(&chunk[..n])
                .map_err(|e| format!("write: {e}"))?;
            sent += n as u64;
        }
        Ok(sent)
    });
    join(client)?;
    let got = join(server)?;
    let secs = start.elapsed().as_secs_f64();
    if got != total {
        return Err(format!("veth: received {got} of {total} bytes"));
    }
    Ok(gbits(got, secs))
}

/// imp's W5 runs, each giving a `-tx` and an `-rx` row: the row name's middle part
/// and the setup. The TUN runs and the `soft` ones have no kernel offloads, as the
/// `plain` ones: what differs is imp's own GRO and GSO (`soft-deferred`: GRO leaves
/// the TCP checksums to the stack's check of the merged frame, `Checksums::Deferred`).
const IMP_RUNS: [(&str, Setup); 6] = [
    (
        "",
        Setup {
            tun: false,
            offloads: true,
            software: None,
            subnet: 1,
        },
    ),
    (
        "-plain",
        Setup {
            tun: false,
            offloads: false,
            software: None,
            subnet: 2,
        },
    ),
    (
        "-soft",
        Setup {
            tun: false,
            offloads: false,
            software: Some(Checksums::Verify),
            subnet: 4,
        },
    ),
    (
        "-soft-deferred",
        Setup {
            tun: false,
            offloads: false,
            software: Some(Checksums::Deferred),
            subnet: 7,
        },
    ),
    (
        "-plain-tun",
        Setup {
            tun: true,
            offloads: false,
            software: None,
            subnet: 5,
        },
    ),
    (
        "-soft-tun",
        Setup {
            tun: true,
            offloads: false,
            software: Some(Checksums::Verify),
            subnet: 6,
        },
    ),
];

/// Every W5 row with `tx` or `rx`, for the stacks that stand in all rows.
fn rows(tx: f64, rx: f64) -> Vec<Sample> {
    IMP_RUNS
        .iter()
        .flat_map(|(suffix, _)| {
            [
                Sample::new(format!("W5-tx{suffix}"), "Gbit/s", tx),
                Sample::new(format!("W5-rx{suffix}"), "Gbit/s", rx),
            ]
        })
        .collect()
}

/// W5 on imp: two rows per run of [`IMP_RUNS`].
pub(crate) fn imp(total: u64) -> Result<Vec<Sample>, String> {
    let mut samples = Vec::new();
    for (suffix, setup) in IMP_RUNS {
        let (tx, rx) = imp_run(setup, total)?;
        samples.push(Sample::new(format!("W5-tx{suffix}"), "Gbit/s", tx));
        samples.push(Sample::new(format!("W5-rx{suffix}"), "Gbit/s", rx));
    }
    Ok(samples)
}

/// W5 on Linux: the veth figure in every row (the kernel's path is the same both ways).
pub(crate) fn linux(total: u64) -> Result<Vec<Sample>, String> {
    let v = veth(total)?;
    Ok(rows(v, v))
}

/// W5 on smoltcp: plain frames over the same TAP setup, in every row of its direction.
pub(crate) fn smoltcp(total: u64) -> Result<Vec<Sample>, String> {
    let (net, tap) = tap_net(3, TapConfig::new("imp0"))?;
    let (tx, rx) = smol_tap::transfer(&net, tap, total)?;
    Ok(rows(tx, rx))
}

/// smoltcp driving the TAP: a `phy::Device` over impnet-phy's [`Tap`] with one reused
/// receive and one reused transmit buffer, polled in one thread that sleeps on the
/// TAP's descriptor when there is nothing to do.
mod smol_tap {
    use super::*;

    use smoltcp::iface::{Config, Interface, SocketSet};
    use smoltcp::phy::{self, DeviceCapabilities, Medium};
    use smoltcp::socket::tcp;
    use smoltcp::time::Instant as SmolInstant;
    use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};

    /// The TAP as a smoltcp device.
    struct SmolTap {
        tap: Tap,
        rx: Vec<u8>,
        tx: Vec<u8>,
        /// Frames received, to tell a busy loop from an idle one.
        received: u64,
    }

    struct Rx<'a>(&'a [u8]);

    struct Tx<'a> {
        tap: &'a mut Tap,
        buf: &'a mut [u8],
    }

    impl phy::RxToken for Rx<'_> {
        fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
            f(self.0)
        }
    }

    impl phy::TxToken for Tx<'_> {
        fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
            let r = f(&mut self.buf[..len]);
            // A full TAP queue drops the frame, as a wire would; TCP resends it.
            let _ = self.tap.send(impnet::core::Instant::ZERO, &self.buf[..len]);
            r
        }
    }

    impl phy::Device for SmolTap {
        type RxToken<'a>
            = Rx<'a>
        where
            Self: 'a;
        type TxToken<'a>
            = Tx<'a>
        where
            Self: 'a;

        fn receive(&mut self, _: SmolInstant) -> Option<(Rx<'_>, Tx<'_>)> {
            let len = self
                .tap
                .recv(impnet::core::Instant::ZERO, &mut self.rx)
                .ok()??;
            self.received += 1;
            let tx = Tx {
                tap: &mut self.tap,
                buf: &mut self.tx,
            };
            Some((Rx(&self.rx[..len]), tx))
        }

        fn transmit(&mut self, _: SmolInstant) -> Option<Tx<'_>> {
            Some(Tx {
                tap: &mut self.tap,
                buf: &mut self.tx,
            })
        }

        fn capabilities(&self) -> DeviceCapabilities {
            let mut caps = DeviceCapabilities::default();
            caps.medium = Medium::Ethernet;
            caps.max_transmission_unit = self.tap.ip_mtu() + 14;
            caps
        }
    }

    /// One smoltcp stack on the TAP with one TCP socket.
    struct Host {
        dev: SmolTap,
        iface: Interface,
        sockets: SocketSet<'static>,
        socket: smoltcp::iface::SocketHandle,
        epoch: StdInstant,
    }

    impl Host {
        fn new(net: &TapNet, tap: Tap) -> Host {
            let frame = tap.ip_mtu() + 18;
            let mut dev = SmolTap {
                tap,
                rx: vec![0; frame],
                tx: vec![0; frame],
                received: 0,
            };
            let mac = EthernetAddress([0x02, 0x69, 0x6d, 0x70, 0x00, 0x06]);
            let config = Config::new(HardwareAddress::Ethernet(mac));
            let mut iface = Interface::new(config, &mut dev, SmolInstant::from_micros(0));
            let [a, b, c, d] = net.local.octets();
            iface.update_ip_addrs(|addrs| {
                let _ = addrs.push(IpCidr::new(IpAddress::v4(a, b, c, d), 24));
            });
            let buffer = crate::smol::BULK_BUFFER;
            let socket = tcp::Socket::new(
                tcp::SocketBuffer::new(vec![0; buffer]),
                tcp::SocketBuffer::new(vec![0; buffer]),
            );
            let mut sockets = SocketSet::new(vec![]);
            let socket = sockets.add(socket);
            Host {
                dev,
                iface,
                sockets,
                socket,
                epoch: StdInstant::now(),
            }
        }

        fn now(&self) -> SmolInstant {
            SmolInstant::from_micros(self.epoch.elapsed().as_micros() as i64)
        }

        fn tcp(&mut self) -> &mut tcp::Socket<'static> {
            self.sockets.get_mut::<tcp::Socket>(self.socket)
        }

        /// Poll the interface; when neither it nor the application moved anything,
        /// sleep on the TAP until a frame or smoltcp's next deadline.
        fn poll(&mut self, app_moved: bool) {
            let now = self.now();
            let before = self.dev.received;
            self.iface.poll(now, &mut self.dev, &mut self.sockets);
            if app_moved || self.dev.received != before {
                return;
            }
            let delay = self
                .iface
                .poll_delay(now, &self.sockets)
                .map_or(10, |d| d.total_millis().min(10) as i32);
            let mut fd = libc::pollfd {
                fd: self.dev.tap.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one live pollfd for the duration of the call.
            unsafe { libc::poll(&mut fd, 1, delay) };
        }

        fn connect(&mut self, remote: SocketAddrV4) -> Result<(), String> {
            let [a, b, c, d] = remote.ip().octets();
            let cx = self.iface.context();
            self.sockets
                .get_mut::<tcp::Socket>(self.socket)
                .connect(cx, (IpAddress::v4(a, b, c, d), remote.port()), 49152)
                .map_err(|e| format!("smoltcp connect: {e}"))?;
            let deadline = StdInstant::now() + STALL;
            while self.tcp().state() != tcp::State::Established {
                if StdInstant::now() > deadline || !self.tcp().is_open() {
                    return Err("smoltcp: the connection was not established".into());
                }
                self.poll(false);
            }
            Ok(())
        }
    }

    /// (tx, rx) Gbit/s of smoltcp against the kernel over `tap`.
    pub(super) fn transfer(net: &TapNet, tap: Tap, total: u64) -> Result<(f64, f64), String> {
        // smoltcp -> Linux.
        let remote = SocketAddrV4::new(net.kernel, PORT);
        let server = kernel_server(&net.ns, remote, Role::Sink, total)?;
        let mut host = Host::new(net, tap);
        host.connect(remote)?;
        let chunk = pattern(PIECE);
        let start = StdInstant::now();
        let deadline = start + STALL;
        let mut sent = 0u64;
        while sent < total {
            let n = (total - sent).min(PIECE as u64) as usize;
            let at = (sent % PIECE as u64) as usize;
            let piece = &chunk[at..(at + n).min(PIECE)];
            let moved = host
                .tcp()
                .send_slice(piece)
                .map_err(|e| format!("smoltcp send: {e}"))?;
            sent += moved as u64;
            host.poll(moved > 0);
            if StdInstant::now() > deadline {
                return Err(format!("smoltcp stalled after sending {sent} bytes"));
            }
        }
        host.tcp().close();
        while !matches!(
            host.tcp().state(),
            tcp::State::Closed | tcp::State::TimeWait | tcp::State::FinWait2
        ) {
            if StdInstant::now() > deadline {
                return Err("smoltcp: the close was not acknowledged".into());
            }
            host.poll(false);
        }
        let got = join(server)?;
        let tx = gbits(got, start.elapsed().as_secs_f64());
        if got != total {
            return Err(format!("the kernel received {got} of {total} from smoltcp"));
        }
        // Linux -> smoltcp, on a fresh socket.
        host.tcp().abort();
        host.poll(true);
        let buffer = crate::smol::BULK_BUFFER;
        host.sockets.remove(host.socket);
        host.socket = host.sockets.add(tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0; buffer]),
            tcp::SocketBuffer::new(vec![0; buffer]),
        ));
        let remote = SocketAddrV4::new(net.kernel, PORT + 1);
        let server = kernel_server(&net.ns, remote, Role::Source, total)?;
        host.connect(remote)?;
        let mut buf = vec![0u8; PIECE];
        let start = StdInstant::now();
        let deadline = start + STALL;
        let mut got = 0u64;
        while host.tcp().may_recv() || host.tcp().can_recv() {
            let n = host.tcp().recv_slice(&mut buf).unwrap_or(0);
            got += n as u64;
            host.poll(n > 0);
            if StdInstant::now() > deadline {
                return Err(format!("smoltcp stalled after receiving {got} bytes"));
            }
        }
        let rx = gbits(got, start.elapsed().as_secs_f64());
        host.tcp().close();
        while !server.is_finished() && StdInstant::now() < deadline {
            host.poll(false);
        }
        join(server)?;
        if got != total {
            return Err(format!("smoltcp received {got} of {total} bytes"));
        }
        Ok((tx, rx))
    }
}
