//! IPv4 multicast between imp and the Linux kernel over a TAP, in a namespace the
//! harness creates (kernel 10.202.219.1, imp 10.202.219.2): a Python socket joined with
//! `IP_ADD_MEMBERSHIP` receives imp's datagrams to the group; imp receives what Linux
//! sends to a group it joined and not what goes to one it did not; the kernel side sees
//! imp's IGMPv3 report and leave; a source-specific join takes only its source's
//! datagrams and is reported as ALLOW_NEW_SOURCES. Needs root and python3; skips (printing why) without,
//! fails instead under `IMP_REQUIRE_ROOT`. Run under `flock /tmp/imp-netns.lock` beside
//! other namespace tests.

mod common;

use std::io::BufRead;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use common::{ChildGuard, Link, have, text, wait_limited};
use impnet::UdpSocket;

/// The subnet's third octet (10.202.219.0/24), used by no other test.
const SUBNET: u8 = 219;
const GROUP: Ipv4Addr = Ipv4Addr::new(239, 2, 19, 1);
const NOT_JOINED: Ipv4Addr = Ipv4Addr::new(239, 2, 19, 2);

/// The first line of a child's stdout (after which it keeps running).
fn first_line(child: &mut ChildGuard) -> String {
    let stdout = child
        .0
        .as_mut()
        .expect("child")
        .stdout
        .as_mut()
        .expect("piped");
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read child output");
    line
}

/// Linux joins GROUP on its TAP address and prints the first datagram and its source.
const LINUX_RECEIVER: &str = "
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(('0.0.0.0', 6219))
m = struct.pack('4s4s', socket.inet_aton(sys.argv[1]), socket.inet_aton(sys.argv[2]))
s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, m)
s.settimeout(10)
print('ready', flush=True)
data, src = s.recvfrom(2048)
print(data.decode(), src[0], src[1], flush=True)
";

/// Linux sends ten rounds to NOT_JOINED and GROUP (`LINUX_SENDER`): `socket` gets
/// GROUP's ten from the kernel's address, in order, and nothing else.
fn gets_only_groups_datagrams(link: &Link, socket: &UdpSocket) {
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let (not_joined, group) = (NOT_JOINED.to_string(), GROUP.to_string());
    let kernel = link.kernel_addr.to_string();
    let sender = link.ns.spawn(
        "python3",
        &["-u", "-c", LINUX_SENDER, &not_joined, &group, &kernel],
    );
    let mut buf = [0u8; 64];
    for i in 0..10 {
        let (n, src) = socket.recv_from(&mut buf).expect("a datagram to the group");
        assert_eq!(
            std::str::from_utf8(&buf[..n]).unwrap(),
            format!("joined {i}")
        );
        assert_eq!(src.ip(), std::net::IpAddr::V4(link.kernel_addr));
    }
    let sent = wait_limited(sender, Duration::from_secs(5));
    assert!(
        String::from_utf8_lossy(&sent.stdout).contains("sent"),
        "{}",
        text(&sent)
    );
    socket
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    assert!(socket.recv_from(&mut buf).is_err(), "nothing else arrives");
}

#[test]
fn linux_receives_imp_multicast() {
    let Some(link) = Link::new(SUBNET, false) else {
        return;
    };
    if !have("python3") {
        return;
    }
    let (group, kernel) = (GROUP.to_string(), link.kernel_addr.to_string());
    let mut receiver = link
        .ns
        .spawn("python3", &["-u", "-c", LINUX_RECEIVER, &group, &kernel]);
    assert_eq!(first_line(&mut receiver).trim(), "ready");
    let socket = UdpSocket::bind(&link.rt, (link.imp_addr, 4219)).expect("bind");
    assert_eq!(socket.multicast_ttl_v4().unwrap(), 1);
    socket.set_multicast_ttl_v4(2).unwrap();
    // Several tries: the first may go before the kernel's socket is in the group.
    let start = Instant::now();
    while receiver.0.as_mut().unwrap().try_wait().unwrap().is_none()
        && start.elapsed() < Duration::from_secs(10)
    {
        socket
            .send_to(b"from-imp", (GROUP, 6219))
            .expect("send to the group");
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = wait_limited(receiver, Duration::from_secs(2));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!("from-imp {} 4219", link.imp_addr)),
        "{}",
        text(&out)
    );
}

/// Linux sends to `argv[1]` (a group imp did not join) then `argv[2]` (one it
/// joined), from its TAP address, ten rounds.
const LINUX_SENDER: &str = "
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(sys.argv[3]))
for i in range(10):
    s.sendto(b'not-joined %d' % i, (sys.argv[1], 5219))
    s.sendto(b'joined %d' % i, (sys.argv[2], 5219))
    time.sleep(0.1)
print('sent', flush=True)
";

/// Linux captures on its TAP the IGMP packets imp sends and prints each as hex.
const IGMP_CAPTURE: &str = "
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
s.bind((sys.argv[1], 0))
s.settimeout(1)
print('ready', flush=True)
end = time.time() + 8
seen = 0
while time.time() < end and seen < 4:
    try:
        frame = s.recv(2048)
    except socket.timeout:
        continue
    ip = frame[14:]
    if len(ip) > 24 and ip[9] == 2 and socket.inet_ntoa(ip[12:16]) == sys.argv[2]:
        print(frame[0:6].hex(), ip.hex(), flush=True)
        seen += 1
";

/// Start the kernel side's capture of imp's IGMP (`IGMP_CAPTURE`, ready) and bind
/// imp's socket on the groups' port.
fn capture_and_bind(link: &Link) -> (ChildGuard, UdpSocket) {
    let imp = link.imp_addr.to_string();
    let mut capture = link
        .ns
        .spawn("python3", &["-u", "-c", IGMP_CAPTURE, &link.tap_name, &imp]);
    assert_eq!(first_line(&mut capture).trim(), "ready");
    let socket = UdpSocket::bind(&link.rt, (Ipv4Addr::UNSPECIFIED, 5219)).expect("bind");
    (capture, socket)
}

#[test]
fn imp_receives_only_groups_it_joined_and_reports_them() {
    let Some(link) = Link::new(SUBNET + 1, false) else {
        return;
    };
    if !have("python3") {
        return;
    }
    let (capture, socket) = capture_and_bind(&link);
    socket
        .join_multicast_v4(&GROUP, &link.imp_addr)
        .expect("join");
    let groups = link
        .rt
        .with_stack(|stack, _| stack.ipv4_multicast_groups(link.iface));
    assert_eq!(groups, [Ipv4Addr::new(224, 0, 0, 1), GROUP]);
    gets_only_groups_datagrams(&link, &socket);
    let stats = link.rt.with_stack(|stack, _| stack.stats().igmp.clone());
    assert!(stats.rx_multicast_filtered >= 10, "{stats:?}");
    socket
        .leave_multicast_v4(&GROUP, &link.imp_addr)
        .expect("leave");
    let out = wait_limited(capture, Duration::from_secs(10));
    let lines: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    assert!(lines.len() >= 2, "{}", text(&out));
    // The join, reported twice (RFC 3376 §5.1, robustness 2): an IGMPv3 report to
    // 224.0.0.22 (MAC 01:00:5e:00:00:16) with the Router Alert option, one
    // CHANGE_TO_EXCLUDE (4) record for the group; then the leave, CHANGE_TO_INCLUDE (3).
    let types: Vec<&str> = lines
        .iter()
        .map(|l| &l[13 + 48 + 16..13 + 48 + 18])
        .collect();
    assert_eq!(types.first(), Some(&"04"), "{lines:?}");
    assert_eq!(types.last(), Some(&"03"), "{lines:?}");
    for line in &lines {
        let (mac, ip) = line.split_once(' ').unwrap();
        assert_eq!(mac, "01005e000016", "{line}");
        assert!(
            ip.starts_with("46"),
            "IHL 6: the Router Alert option, {line}"
        );
        assert_eq!(&ip[16..18], "01", "TTL 1: {line}");
        assert_eq!(&ip[32..40], "e0000016", "to 224.0.0.22: {line}");
        assert_eq!(&ip[40..48], "94040000", "Router Alert: {line}");
        let igmp = &ip[48..];
        assert_eq!(&igmp[..2], "22", "an IGMPv3 report: {line}");
        assert_eq!(&igmp[12..16], "0001", "one record: {line}");
        assert_eq!(&igmp[24..32], "ef021301", "the group: {line}");
    }
}

/// Source-specific multicast: imp takes GROUP only from the kernel's address and
/// NOT_JOINED only from an address that sends nothing. Linux's datagrams to GROUP
/// arrive; those to NOT_JOINED pass the link's MAC filter (the interface is in the
/// group) and are dropped by the source filter; the kernel side sees an IGMPv3
/// ALLOW_NEW_SOURCES record naming its own address.
#[test]
fn imp_takes_a_source_specific_group_only_from_its_source() {
    let Some(link) = Link::new(SUBNET + 3, false) else {
        return;
    };
    if !have("python3") {
        return;
    }
    let (capture, socket) = capture_and_bind(&link);
    let silent = Ipv4Addr::new(10, 202, SUBNET + 3, 99);
    socket
        .join_ssm_v4(&link.kernel_addr, &GROUP, &link.imp_addr)
        .expect("join GROUP from the kernel");
    socket
        .join_ssm_v4(&silent, &NOT_JOINED, &link.imp_addr)
        .expect("join NOT_JOINED from a silent source");
    gets_only_groups_datagrams(&link, &socket);
    let stats = link.rt.with_stack(|stack, _| stack.stats().igmp.clone());
    assert!(stats.rx_source_filtered >= 10, "{stats:?}");
    let out = wait_limited(capture, Duration::from_secs(10));
    let lines: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    // An IGMPv3 report whose first record is ALLOW_NEW_SOURCES (5) for GROUP with one
    // source, the kernel's address.
    let kernel_hex: String = link
        .kernel_addr
        .octets()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let allow = lines.iter().any(|line| {
        let igmp = line
            .split_once(' ')
            .map_or("", |(_, ip)| ip.get(48..).unwrap_or(""));
        igmp.get(..2) == Some("22")
            && igmp.get(16..18) == Some("05")
            && igmp.get(20..24) == Some("0001")
            && igmp.get(24..32) == Some("ef021301")
            && igmp.get(32..40) == Some(kernel_hex.as_str())
    });
    assert!(allow, "no ALLOW_NEW_SOURCES(GROUP, kernel): {lines:?}");
}
