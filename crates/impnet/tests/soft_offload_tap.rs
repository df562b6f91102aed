//! imp's own GRO and GSO ([`impnet::phy::Offload`]) over a TAP and over a TUN opened
//! without the kernel's offloads, against the kernel in a namespace the test creates:
//! the kernel sends 8 MiB to an imp echo server and reads them back byte-exact, while
//! imp takes merged frames larger than the MTU (GRO) and hands the device segments
//! larger than the MTU (GSO cuts them). Needs root; skips, saying why, without it
//! (fails instead under `IMP_REQUIRE_ROOT`). Run under `flock /tmp/imp-netns.lock`
//! beside other namespace tests.

mod common;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{IMP_MAC, NetNs, can_run, have};
use impnet::core::{IfaceConfig, Instant, StackConfig};
use impnet::phy::{Device, DeviceError, Framing, Offload, Tap, TapConfig, Tun};
use impnet::wire::ipv4::Cidr;
use impnet::{PollFd, Runtime, TcpListener};

/// The largest frames the stack sent and received through a device.
#[derive(Default)]
struct Largest {
    sent: AtomicUsize,
    received: AtomicUsize,
}

/// Notes the largest frame each way, between the stack and the wrapper.
struct Watch<D> {
    inner: D,
    largest: Arc<Largest>,
}

impl<D: Device> Device for Watch<D> {
    fn recv(&mut self, now: Instant, buf: &mut [u8]) -> Result<Option<usize>, DeviceError> {
        let got = self.inner.recv(now, buf)?;
        if let Some(len) = got {
            self.largest.received.fetch_max(len, Ordering::Relaxed);
        }
        Ok(got)
    }

    fn send(&mut self, now: Instant, frame: &[u8]) -> Result<bool, DeviceError> {
        self.largest.sent.fetch_max(frame.len(), Ordering::Relaxed);
        self.inner.send(now, frame)
    }

    fn mtu(&self) -> usize {
        self.inner.mtu()
    }

    fn poll_at(&self) -> Option<Instant> {
        self.inner.poll_at()
    }
}

impl<D: PollFd> PollFd for Watch<D> {
    fn poll_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.inner.poll_fd()
    }
}

/// Add `device` behind GRO and GSO, watched.
fn attach<D>(rt: &Runtime, device: D, iface: IfaceConfig, framing: Framing) -> Arc<Largest>
where
    D: Device + PollFd + Send + 'static,
{
    let device = Offload::new(device, framing, 1500).gro(true).gso(true);
    let offloads = device.stack_offloads(iface.offloads);
    let iface = iface.with_offloads(offloads);
    let largest = Arc::new(Largest::default());
    let device = Watch {
        inner: device,
        largest: Arc::clone(&largest),
    };
    let id = rt.add_device(device, iface);
    rt.add_address(id, Cidr::new(Ipv4Addr::new(10, 217, 0, 2), 24).unwrap());
    largest
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// The kernel in `ns` sends `data` to imp's echo server and reads it back.
fn echo(ns: &NetNs, rt: &Runtime, data: Vec<u8>) -> Vec<u8> {
    let listener = TcpListener::bind(rt, "10.217.0.2:5001").expect("listen");
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().expect("accept");
        stream.set_read_timeout(Some(Duration::from_secs(30))).ok();
        let mut buf = vec![0; 64 * 1024];
        loop {
            match stream.read(&mut buf).expect("imp read") {
                0 => break,
                n => stream.write_all(&buf[..n]).expect("imp write"),
            }
        }
        stream.shutdown(Shutdown::Write).ok();
    });
    let got = ns.enter(move || {
        let addr = SocketAddrV4::new(Ipv4Addr::new(10, 217, 0, 2), 5001);
        let mut stream =
            std::net::TcpStream::connect_timeout(&addr.into(), Duration::from_secs(10))
                .expect("connect to imp");
        stream.set_read_timeout(Some(Duration::from_secs(30))).ok();
        let mut writer = stream.try_clone().unwrap();
        let sender = std::thread::spawn(move || {
            writer.write_all(&data).expect("kernel write");
            writer.shutdown(Shutdown::Write).ok();
        });
        let mut got = Vec::new();
        stream.read_to_end(&mut got).expect("kernel read");
        sender.join().unwrap();
        got
    });
    server.join().unwrap();
    got
}

/// Wait (at most 5 s) until the kernel runs `dev`: a TUN's carrier comes on when imp
/// attaches, and the kernel drops what it sends there until its link watcher saw it.
fn wait_running(ns: &NetNs, dev: &str) {
    for _ in 0..100 {
        let out = ns.exec("cat", &[&format!("/sys/class/net/{dev}/operstate")]);
        let state = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if state == "up" || state == "unknown" {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{dev} never came up");
}

fn check(ns: &NetNs, rt: &Runtime, largest: &Largest) {
    let data = pattern(8 << 20);
    let got = echo(ns, rt, data.clone());
    assert_eq!(got.len(), data.len(), "length of the echo");
    assert!(got == data, "the echo differs");
    assert!(
        largest.sent.load(Ordering::Relaxed) > 1514,
        "no segment for GSO"
    );
    assert!(
        largest.received.load(Ordering::Relaxed) > 1514,
        "no merged frame"
    );
}

#[test]
fn gro_and_gso_over_a_tap_without_offloads() {
    if !can_run() {
        return;
    }
    let ns = NetNs::new();
    let config = TapConfig::new("imp0").offloads(false);
    let tap = ns.enter(|| Tap::open_with(&config)).expect("open TAP");
    assert!(!tap.offloads());
    ns.ip(&["addr", "add", "10.217.0.1/24", "dev", "imp0"]);
    ns.ip(&["link", "set", "imp0", "up"]);
    let rt = Runtime::new(StackConfig::default()).expect("runtime");
    let largest = attach(&rt, tap, IfaceConfig::new(IMP_MAC, 1500), Framing::Ethernet);
    check(&ns, &rt, &largest);
}

#[test]
fn gro_and_gso_over_a_tun_without_offloads() {
    // `cat` reads the TUN's operstate.
    if !can_run() || !have("cat") {
        return;
    }
    let ns = NetNs::new();
    let config = TapConfig::new("imp0").offloads(false);
    let tun = ns.enter(|| Tun::open_with(&config)).expect("open TUN");
    assert!(!tun.offloads());
    ns.ip(&["addr", "add", "10.217.0.1/24", "dev", "imp0"]);
    ns.ip(&["link", "set", "imp0", "up"]);
    let rt = Runtime::new(StackConfig::default()).expect("runtime");
    let largest = attach(&rt, tun, IfaceConfig::ip(1500), Framing::Ip);
    wait_running(&ns, "imp0");
    check(&ns, &rt, &largest);
}
