//! The TAP device against the Linux kernel, inside a network namespace this test
//! creates (and removes, also on failure). Needs root; skips with a message otherwise
//! (fails instead under `IMP_REQUIRE_ROOT`).
#![cfg(all(feature = "tap", target_os = "linux"))]
#![allow(clippy::too_many_lines)]

#[path = "../../impnet/tests/common/require.rs"]
mod require;

use std::io;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant as StdInstant};

use impnet_core::Instant;
use impnet_phy::{Device, Tap, TapConfig, TapError};
use require::can_run;

/// A network namespace, deleted on drop.
struct NetNs {
    name: String,
}

impl NetNs {
    fn new() -> NetNs {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "imp-phy-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        run("ip", &["netns", "add", &name]);
        NetNs { name }
    }

    /// Run `ip -n NS args...`, panicking on failure.
    fn ip(&self, args: &[&str]) {
        let mut all = vec!["-n", &self.name];
        all.extend_from_slice(args);
        run("ip", &all);
    }

    /// Run `f` on a thread inside the namespace (a network namespace is per thread).
    fn enter<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let path = format!("/var/run/netns/{}", self.name);
        std::thread::scope(|s| {
            s.spawn(|| {
                let file = std::fs::File::open(&path).expect("namespace file");
                // SAFETY: setns on a valid namespace fd; it affects only this thread,
                // which ends when the closure returns.
                let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(rc, 0, "setns: {}", io::Error::last_os_error());
                f()
            })
            .join()
            .expect("namespace thread")
        })
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

fn run(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd).args(args).output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const OUR_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x02];

/// An ARP request from `sender` (with `OUR_MAC`) for `target`.
fn arp_request(sender: [u8; 4], target: [u8; 4]) -> Vec<u8> {
    let mut f = Vec::with_capacity(42);
    f.extend_from_slice(&[0xff; 6]);
    f.extend_from_slice(&OUR_MAC);
    f.extend_from_slice(&[0x08, 0x06]);
    f.extend_from_slice(&[0, 1, 0x08, 0x00, 6, 4, 0, 1]);
    f.extend_from_slice(&OUR_MAC);
    f.extend_from_slice(&sender);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&target);
    f
}

/// Read frames until `want` accepts one or `timeout` passes.
fn wait_for(tap: &mut Tap, timeout: Duration, want: impl Fn(&[u8]) -> bool) -> Option<Vec<u8>> {
    let deadline = StdInstant::now() + timeout;
    let mut buf = vec![0u8; tap.mtu()];
    while StdInstant::now() < deadline {
        let mut pfd = libc::pollfd {
            fd: tap.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        unsafe { libc::poll(&mut pfd, 1, 50) };
        while let Some(n) = tap.recv(Instant::ZERO, &mut buf).expect("recv") {
            if want(&buf[..n]) {
                return Some(buf[..n].to_vec());
            }
        }
    }
    None
}

fn is_arp_reply_from(frame: &[u8], ip: [u8; 4]) -> bool {
    frame.len() >= 42
        && frame[12..14] == [0x08, 0x06]
        && frame[20..22] == [0, 2]
        && frame[28..32] == ip
}

/// A namespace with a TAP whose kernel side is 10.201.N.1/24, up.
fn setup(config: TapConfig, subnet: u8) -> (NetNs, Tap) {
    let ns = NetNs::new();
    let name = config.name.clone();
    let tap = ns.enter(|| Tap::open_with(&config)).expect("open TAP");
    assert_eq!(tap.name(), name);
    ns.ip(&[
        "addr",
        "add",
        &format!("10.201.{subnet}.1/24"),
        "dev",
        &name,
    ]);
    ns.ip(&["link", "set", &name, "up"]);
    (ns, tap)
}

fn arp_exchange(offloads: bool, subnet: u8) {
    let (_ns, mut tap) = setup(TapConfig::new("impt0").offloads(offloads), subnet);
    assert_eq!(
        tap.offloads(),
        offloads,
        "this kernel supports TAP offloads"
    );
    let request = arp_request([10, 201, subnet, 2], [10, 201, subnet, 1]);
    assert!(tap.send(Instant::ZERO, &request).expect("send"));
    let reply = wait_for(&mut tap, Duration::from_secs(3), |f| {
        is_arp_reply_from(f, [10, 201, subnet, 1])
    })
    .expect("the kernel answers our ARP request");
    assert_eq!(reply[0..6], OUR_MAC, "the reply is addressed to us");
    assert_eq!(reply[32..38], OUR_MAC);
    assert_eq!(reply[38..42], [10, 201, subnet, 2]);
    assert!(tap.stats().rx_frames >= 1 && tap.stats().tx_frames == 1);
}

#[test]
fn arp_request_gets_the_kernels_reply() {
    if can_run() {
        arp_exchange(false, 1);
    }
}

/// As [`arp_exchange`] with [`TapConfig::batched`]: the request waits in the device
/// until `flush` sends it (one system call carrying the batch), and the reply comes
/// back through a batch of reads.
fn arp_exchange_batched(offloads: bool, subnet: u8) {
    let config = TapConfig::new("impt0").offloads(offloads).batched(true);
    let (_ns, mut tap) = setup(config, subnet);
    if let Some(why) = tap.batch_refused() {
        // The fallback: plain reads and writes, which the other tests cover.
        println!("no io_uring here ({why}): the TAP reads and writes frame by frame");
        assert!(!tap.batched());
        return;
    }
    assert!(tap.batched());
    let request = arp_request([10, 201, subnet, 2], [10, 201, subnet, 1]);
    for _ in 0..3 {
        assert!(tap.send(Instant::ZERO, &request).expect("send"));
    }
    assert_eq!(tap.stats().tx_batches, 0, "queued until flush");
    tap.flush(Instant::ZERO).expect("flush");
    assert_eq!(tap.stats().tx_batches, 1, "three frames, one system call");
    assert_eq!((tap.stats().tx_frames, tap.stats().tx_errors), (3, 0));
    let reply = wait_for(&mut tap, Duration::from_secs(3), |f| {
        is_arp_reply_from(f, [10, 201, subnet, 1])
    })
    .expect("the kernel answers our ARP request");
    assert_eq!(reply[0..6], OUR_MAC, "the reply is addressed to us");
    assert_eq!(reply[38..42], [10, 201, subnet, 2]);
    assert!(tap.stats().rx_batches >= 1, "{:?}", tap.stats());
}

#[test]
fn arp_request_and_reply_cross_a_batched_tap() {
    if can_run() {
        arp_exchange_batched(false, 41);
        arp_exchange_batched(true, 42);
    }
}

#[test]
fn arp_request_gets_the_kernels_reply_with_offloads() {
    if can_run() {
        arp_exchange(true, 2);
    }
}

/// A TCP segment (ACK, `payload` bytes) from 10.201.3.2:40000 to 10.201.3.1:9, where
/// nothing listens, with `ack` as its acknowledgement number and a correct checksum.
fn tcp_segment(dst_mac: &[u8], payload: usize, ack: u32) -> Vec<u8> {
    let src = [10, 201, 3, 2];
    let dst = [10, 201, 3, 1];
    let mut f = vec![0u8; 14 + 40 + payload];
    f[0..6].copy_from_slice(dst_mac);
    f[6..12].copy_from_slice(&OUR_MAC);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((40 + payload) as u16).to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    let sum = ones_sum(&f[14..34]);
    f[24..26].copy_from_slice(&(!sum).to_be_bytes());
    let tcp = &mut f[34..54];
    tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&9u16.to_be_bytes());
    tcp[4..8].copy_from_slice(&1000u32.to_be_bytes());
    tcp[8..12].copy_from_slice(&ack.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = 0x10; // ACK
    tcp[14..16].copy_from_slice(&65535u16.to_be_bytes());
    for (i, b) in f[54..].iter_mut().enumerate() {
        *b = i as u8;
    }
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&src);
    pseudo.extend_from_slice(&dst);
    pseudo.extend_from_slice(&[0, 6]);
    pseudo.extend_from_slice(&((20 + payload) as u16).to_be_bytes());
    pseudo.extend_from_slice(&f[34..]);
    let sum = ones_sum(&pseudo);
    f[50..52].copy_from_slice(&(!sum).to_be_bytes());
    f
}

fn ones_sum(bytes: &[u8]) -> u16 {
    let mut sum: u64 = 0;
    for chunk in bytes.chunks(2) {
        let hi = u64::from(chunk[0]) << 8;
        sum += hi | chunk.get(1).map_or(0, |&b| u64::from(b));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// A TCP frame bigger than the MTU goes out as one TSO frame with a partial checksum;
/// the kernel accepts it (it answers with a RST for the closed port, which it would
/// not for a bad checksum).
#[test]
fn large_tcp_frame_goes_out_with_tso() {
    if !can_run() {
        return;
    }
    let (_ns, mut tap) = setup(TapConfig::new("impt0").offloads(true), 3);
    assert!(tap.offloads());
    let request = arp_request([10, 201, 3, 2], [10, 201, 3, 1]);
    tap.send(Instant::ZERO, &request).expect("send ARP");
    let reply = wait_for(&mut tap, Duration::from_secs(3), |f| {
        is_arp_reply_from(f, [10, 201, 3, 1])
    })
    .expect("ARP reply");
    let kernel_mac = reply[6..12].to_vec();
    let segment = tcp_segment(&kernel_mac, 4000, 0x1234_5678);
    assert!(segment.len() > 1514);
    assert!(tap.send(Instant::ZERO, &segment).expect("send TSO frame"));
    assert_eq!(tap.stats().tx_tso, 1);
    let rst = wait_for(&mut tap, Duration::from_secs(3), |f| {
        f.len() >= 54 && f[12..14] == [0x08, 0x00] && f[23] == 6 && f[47] & 0x04 != 0
    })
    .expect("the kernel answers the large segment with a RST");
    assert_eq!(
        rst[38..42],
        0x1234_5678u32.to_be_bytes(),
        "RST seq = our ACK"
    );

    // Without offloads the same frame is refused with a clear error.
    let (_ns2, mut plain) = setup(TapConfig::new("impt1"), 4);
    let err = plain.send(Instant::ZERO, &segment).unwrap_err();
    assert!(err.to_string().contains("exceeds the device MTU"), "{err}");
}

#[test]
fn errors_say_busy_taken_and_not_permitted() {
    if !can_run() {
        return;
    }
    let ns = NetNs::new();
    ns.enter(|| {
        let _first = Tap::open("impbusy").expect("first open");
        let err = Tap::open("impbusy").expect_err("the second open fails");
        assert!(matches!(err, TapError::Busy { .. }), "{err:?}");
        assert!(err.to_string().contains("busy"));
    });
    ns.ip(&[
        "link",
        "add",
        "impdummy",
        "type",
        "veth",
        "peer",
        "name",
        "impdummy1",
    ]);
    ns.enter(|| {
        let err = Tap::open("impdummy").expect_err("a veth is not a TAP");
        assert!(matches!(err, TapError::NameTaken { .. }), "{err:?}");
    });
    ns.enter(|| {
        // Drop root for this thread only (the raw syscall, unlike libc's setuid, does
        // not change the other threads).
        // SAFETY: setresuid on the calling thread; the thread ends after the closure.
        let rc = unsafe { libc::syscall(libc::SYS_setresuid, 65534, 65534, 65534) };
        assert_eq!(rc, 0);
        let err = Tap::open("impnoperm").expect_err("nobody may not create a TAP");
        assert!(matches!(err, TapError::NotPermitted), "{err:?}");
        assert!(err.to_string().contains("root"));
    });
    let err = Tap::open("this-name-is-too-long").expect_err("bad name");
    assert!(matches!(err, TapError::BadName { .. }));
}

/// Send `frame` out of interface `name` from a packet socket in `ns`: the kernel hands
/// it to the TAP as it is, without vouching for its checksums.
fn inject(ns: &NetNs, name: &str, frame: &[u8]) {
    let name = std::ffi::CString::new(name).expect("no NUL");
    ns.enter(|| {
        // SAFETY: plain socket(2); we own and close the descriptor below.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW,
                i32::from((libc::ETH_P_ALL as u16).to_be()),
            )
        };
        assert!(fd >= 0, "packet socket: {}", io::Error::last_os_error());
        // SAFETY: `name` is a valid NUL-terminated string.
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        assert_ne!(index, 0, "interface index");
        // SAFETY: an all-zero sockaddr_ll is valid; we fill the fields sendto needs.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_ifindex = index as i32;
        addr.sll_halen = 6;
        addr.sll_addr[..6].copy_from_slice(&frame[..6]);
        // SAFETY: `frame` and `addr` are live for the call; the lengths are theirs.
        let n = unsafe {
            libc::sendto(
                fd,
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        let err = io::Error::last_os_error();
        // SAFETY: `fd` is ours and not used after this.
        unsafe { libc::close(fd) };
        assert_eq!(n, frame.len() as isize, "sendto: {err}");
    });
}

/// With offloads, a frame the kernel did not vouch for is verified by the TAP: a bad
/// TCP checksum is dropped and counted, a good one passes. A segment the kernel made
/// itself (a SYN of its own connect) passes on its word, with the checksum left
/// partial (not summed).
#[test]
fn frames_without_the_kernels_word_are_verified_by_the_tap() {
    if !can_run() {
        return;
    }
    let (ns, mut tap) = setup(TapConfig::new("impt0").offloads(true), 3);
    assert!(tap.offloads());
    assert!(
        tap.stack_offloads().rx_checksum,
        "the stack may skip checking"
    );
    let good = tcp_segment(&OUR_MAC, 100, 1);
    let mut bad = good.clone();
    bad[60] ^= 0x40;
    inject(&ns, "impt0", &bad);
    inject(&ns, "impt0", &good);
    let got = wait_for(&mut tap, Duration::from_secs(3), |f| {
        f[12..14] == [0x08, 0x00]
    })
    .expect("the good frame arrives");
    assert_eq!(got, good, "the first IPv4 frame through is the good one");
    let stats = tap.stats();
    assert_eq!(stats.rx_bad_checksum, 1, "{stats:?}");
    assert!(stats.rx_csum_verified >= 1, "{stats:?}");

    // The kernel's own SYN (to a static neighbour, so no ARP is needed).
    ns.ip(&[
        "neigh",
        "add",
        "10.201.3.2",
        "lladdr",
        "02:00:00:00:00:02",
        "dev",
        "impt0",
    ]);
    let path = format!("/var/run/netns/{}", ns.name);
    let connector = std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("namespace file");
        // SAFETY: setns on a valid namespace fd, for this thread only.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0);
        let addr = "10.201.3.2:7".parse().expect("address");
        let _ = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(1500));
    });
    let before = tap.stats();
    let syn = wait_for(&mut tap, Duration::from_secs(3), |f| {
        f.len() >= 54 && f[12..14] == [0x08, 0x00] && f[23] == 6 && f[47] & 0x02 != 0
    })
    .expect("the kernel's SYN");
    let after = tap.stats();
    assert!(after.rx_csum_trusted > before.rx_csum_trusted, "{after:?}");
    assert_eq!(after.rx_csum_completed, 0, "not completed unless asked");
    assert_eq!(after.rx_bad_checksum, 1, "trusted frames are not checked");
    assert_eq!(syn[30..34], [10, 201, 3, 2]);
    connector.join().expect("connector");
}

/// A multi-queue TAP: two queues of one device, one descriptor each. The kernel spreads
/// its flows over them (32 UDP sockets, each its own flow hash, to a neighbour behind
/// the TAP reach both queues, every datagram exactly once), and the name cannot be
/// opened single-queue while it is multi-queue.
#[test]
fn multi_queue_tap_spreads_the_kernels_flows_over_its_queues() {
    if !can_run() {
        return;
    }
    let ns = NetNs::new();
    let mut queues = ns
        .enter(|| Tap::open_queues(&TapConfig::new("impmq%d").offloads(true), 2))
        .expect("open a multi-queue TAP");
    assert_eq!(queues.len(), 2);
    let name = queues[0].name().to_string();
    assert!(name.starts_with("impmq"), "{name}");
    assert_eq!(queues[1].name(), name, "both queues are one device");
    assert_ne!(queues[0].as_raw_fd(), queues[1].as_raw_fd());
    let single = ns.enter(|| Tap::open_with(&TapConfig::new(name.clone())));
    assert!(
        matches!(single, Err(TapError::NameTaken { .. })),
        "a multi-queue TAP is not opened single-queue: {single:?}"
    );
    ns.ip(&["addr", "add", "10.201.9.1/24", "dev", &name]);
    ns.ip(&["link", "set", &name, "up"]);
    ns.ip(&[
        "neigh",
        "add",
        "10.201.9.2",
        "lladdr",
        "02:00:00:00:00:02",
        "dev",
        &name,
    ]);
    const FLOWS: u8 = 32;
    ns.enter(|| {
        for i in 0..FLOWS {
            let socket = std::net::UdpSocket::bind("10.201.9.1:0").expect("bind");
            socket.send_to(&[i; 8], "10.201.9.2:9").expect("send");
        }
    });
    let mut seen = vec![0usize; usize::from(FLOWS)];
    let mut per_queue = [0usize; 2];
    let deadline = StdInstant::now() + Duration::from_secs(3);
    while seen.contains(&0) && StdInstant::now() < deadline {
        for (q, tap) in queues.iter_mut().enumerate() {
            let mut buf = vec![0u8; tap.mtu()];
            while let Some(n) = tap.recv(Instant::ZERO, &mut buf).expect("recv") {
                let frame = &buf[..n];
                // IPv4, UDP, to port 9: our datagrams (the kernel sends IPv6 noise too).
                if n == 14 + 20 + 8 + 8 && frame[12..14] == [8, 0] && frame[23] == 17 {
                    seen[usize::from(frame[42])] += 1;
                    per_queue[q] += 1;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(seen.iter().all(|&n| n == 1), "each datagram once: {seen:?}");
    assert!(
        per_queue.iter().all(|&n| n > 0),
        "the kernel used both queues: {per_queue:?}"
    );
}
