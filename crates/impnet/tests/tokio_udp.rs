//! `impnet::tokio::UdpSocket` between two runtimes joined by an in-memory pipe: no
//! root needed. Datagrams arrive both ways over IPv4 and IPv6, a waiting receive is
//! woken by the datagram, and a sender the stack has no room for waits (Pending) and
//! is woken when the room comes back. `impnet::tokio::RawSocket` between the same
//! two: a waiting receive is woken by a datagram of its protocol, header included.
#![cfg(feature = "tokio")]
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

use std::future::poll_fn;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use impnet::Runtime;
use impnet::core::{IfaceConfig, IfaceId, Secret, StackConfig};
use impnet::phy::pipe;
use impnet::tokio::{RawSocket, UdpSocket};
use impnet::wire::{ethernet, ipv4, ipv6};

fn v4(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(192, 0, 2, last)
}

fn v6(last: u8) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, u16::from(last))
}

/// A runtime on one end of a pipe, with IPv4 and IPv6 addresses ending in `last`
/// (the address added only when `addressed`).
fn node(
    end: impnet::phy::PipeEnd,
    last: u8,
    config: StackConfig,
    addressed: bool,
) -> (Runtime, IfaceId) {
    let rt = Runtime::with_secret(config, Secret::from_bytes([last; 16])).expect("runtime");
    let mac = ethernet::Address([0x02, 0, 0, 0, 0, last]);
    let iface = rt.add_device(end, IfaceConfig::new(mac, 1500));
    if addressed {
        address(&rt, iface, last);
    }
    (rt, iface)
}

fn address(rt: &Runtime, iface: IfaceId, last: u8) {
    rt.add_address(
        iface,
        ipv4::Cidr {
            address: v4(last),
            prefix_len: 24,
        },
    );
    rt.add_address6(
        iface,
        ipv6::Cidr {
            address: v6(last),
            prefix_len: 64,
        },
    );
}

/// No duplicate address detection, so IPv6 addresses are usable at once.
fn config() -> StackConfig {
    let mut config = StackConfig::default();
    config.ipv6.dad_transmits = 0;
    config
}

fn pair() -> (Runtime, Runtime) {
    let (a, b) = pipe(1514);
    (node(a, 1, config(), true).0, node(b, 2, config(), true).0)
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("tokio runtime");
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(20), f)
            .await
            .expect("test timed out")
    })
}

#[test]
fn datagrams_arrive_both_ways_over_ipv4_and_ipv6() {
    let (a, b) = pair();
    let sa = UdpSocket::bind(&a, "[::]:0").expect("bind a");
    let sb = UdpSocket::bind(&b, "[::]:5353").expect("bind b");
    assert_eq!(sb.local_addr().unwrap().port(), 5353);
    let a_port = sa.local_addr().unwrap().port();
    assert_ne!(a_port, 0, "an ephemeral port is chosen at bind");
    block_on(async {
        let mut buf = [0u8; 2048];
        for (dst, from) in [
            (
                SocketAddr::from((v4(2), 5353)),
                SocketAddr::from((v4(1), a_port)),
            ),
            (
                SocketAddr::from((v6(2), 5353)),
                SocketAddr::from((v6(1), a_port)),
            ),
        ] {
            let payload: Vec<u8> = (0..1400u32)
                .map(|i| (i * 31 + u32::from(dst.is_ipv6())) as u8)
                .collect();
            assert_eq!(
                sa.send_to(&payload, dst).await.expect("send_to"),
                payload.len()
            );
            let (n, src) = sb.recv_from(&mut buf).await.expect("recv_from");
            assert_eq!(&buf[..n], &payload[..], "byte-exact to {dst}");
            assert_eq!(src, from);
            // The answer goes back to where the datagram came from.
            sb.send_to(b"pong", src).await.expect("reply");
            let (n, src) = sa.recv_from(&mut buf).await.expect("reply arrives");
            assert_eq!((&buf[..n], src), (&b"pong"[..], dst));
        }
    });
}

#[test]
fn connected_sockets_send_and_receive_only_their_peer() {
    let (a, b) = pair();
    let sa = UdpSocket::bind(&a, (v4(1), 7000)).unwrap();
    let other = UdpSocket::bind(&a, (v4(1), 7001)).unwrap();
    let sb = UdpSocket::bind(&b, (v4(2), 7000)).unwrap();
    assert_eq!(
        sb.peer_addr().unwrap_err().kind(),
        std::io::ErrorKind::NotConnected
    );
    sb.connect((v4(1), 7000)).unwrap();
    sa.connect((v4(2), 7000)).unwrap();
    assert_eq!(sb.peer_addr().unwrap(), SocketAddr::from((v4(1), 7000)));
    block_on(async {
        // A stranger's datagram is passed over; the peer's is taken.
        other.send_to(b"stranger", (v4(2), 7000)).await.unwrap();
        sa.send(b"peer").await.unwrap();
        let mut buf = [0u8; 64];
        let n = sb.recv(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"peer");
        sb.send(b"back").await.unwrap();
        let n = sa.recv(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"back");
    });
    let mut buf = [0u8; 8];
    assert_eq!(
        sb.try_recv_from(&mut buf).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock,
        "nothing more queued"
    );
}

/// A waker that counts its wake-ups, for polling a future by hand: what the test
/// observes is which polls return Pending and whether the stack woke the task, not how
/// threads were scheduled.
#[derive(Default)]
struct CountingWaker {
    wakes: Mutex<u32>,
    woken: Condvar,
}

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        *self.wakes.lock().unwrap() += 1;
        self.woken.notify_all();
    }
}

impl CountingWaker {
    fn wakes(&self) -> u32 {
        *self.wakes.lock().unwrap()
    }

    /// Blocks until the count reaches `n`. The limit only keeps a lost wake-up from
    /// hanging the test; it is no claim about how soon the wake-up comes.
    fn wait_for(&self, n: u32) {
        let wakes = self.wakes.lock().unwrap();
        let (wakes, _) = self
            .woken
            .wait_timeout_while(wakes, Duration::from_secs(120), |w| *w < n)
            .unwrap();
        assert!(*wakes >= n, "never woken: {} wake-ups of {n}", *wakes);
    }
}

/// The receive is polled by hand with a counting waker, so each step is the code's
/// doing: the first poll finds nothing (Pending) and registers the waker; nothing wakes
/// it while nothing is sent; the datagram's arrival, taken in by the runtime's own
/// thread, wakes it exactly once; and the one poll after that wake-up returns the
/// datagram and its source (no busy polling, no lost wake-up).
#[test]
fn a_waiting_receive_is_woken_by_the_datagram() {
    let (a, b) = pair();
    let sa = UdpSocket::bind(&a, (v4(1), 0)).unwrap();
    let sb = UdpSocket::bind(&b, (v4(2), 9000)).unwrap();
    let counter = Arc::new(CountingWaker::default());
    let waker = Waker::from(Arc::clone(&counter));
    let mut cx = Context::from_waker(&waker);
    let mut buf = [0u8; 64];
    let mut read = tokio::io::ReadBuf::new(&mut buf);
    let first = sb.poll_recv_from(&mut cx, &mut read);
    assert!(first.is_pending(), "nothing was sent yet: {first:?}");
    assert_eq!(counter.wakes(), 0, "woken with nothing to receive");
    // The first datagram to a neighbour being resolved is queued, not refused.
    sa.try_send_to(b"wake up", SocketAddr::from((v4(2), 9000)))
        .expect("send");
    counter.wait_for(1);
    let second = sb.poll_recv_from(&mut cx, &mut read);
    let Poll::Ready(src) = second else {
        panic!("woken, but the poll after the wake-up found nothing");
    };
    assert_eq!(src.expect("recv"), sa.local_addr().unwrap());
    assert_eq!(read.filled(), b"wake up");
    assert_eq!(counter.wakes(), 1, "one datagram, one wake-up");
}

#[test]
fn a_sender_without_room_waits_and_is_woken_when_room_comes_back() {
    // A's stack queues at most 4 packets for a neighbour it is still resolving, and
    // asks again every 20 ms; B takes its address (and answers ARP) only later.
    let mut small = config();
    small.arp.queue_per_neighbor = 4;
    small.arp.retry_interval = impnet::core::Duration::from_millis(20);
    small.arp.max_requests = 250;
    let (a_end, b_end) = pipe(1514);
    let (a, _) = node(a_end, 1, small, true);
    let (b, b_iface) = node(b_end, 2, config(), false);
    let sa = UdpSocket::bind(&a, (v4(1), 0)).unwrap();
    let sb = UdpSocket::bind(&b, "0.0.0.0:4000").unwrap();
    block_on(async {
        let dst = SocketAddr::from((v4(2), 4000));
        for i in 0..4u8 {
            sa.send_to(&[i], dst).await.expect("queued while resolving");
        }
        // The fifth does not fit: Pending, not an error.
        let fifth = poll_fn(|cx| Poll::Ready(sa.poll_send_to(cx, &[4], dst))).await;
        assert!(fifth.is_pending(), "the neighbour queue is full: {fifth:?}");
        assert_eq!(
            sa.try_send_to(&[4], dst).unwrap_err().kind(),
            std::io::ErrorKind::WouldBlock
        );
        // The waiting send completes once B answers and the queue drains.
        let sender = tokio::spawn(async move { sa.send_to(&[4], dst).await.map(|_| sa) });
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert!(
            !sender.is_finished(),
            "still no room while B does not answer"
        );
        address(&b, b_iface, 2);
        let _sa = sender
            .await
            .expect("task")
            .expect("sent once room came back");
        let mut got = Vec::new();
        let mut buf = [0u8; 8];
        while got.len() < 5 {
            let (n, _) = sb.recv_from(&mut buf).await.expect("recv");
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, [0, 1, 2, 3, 4], "every datagram, in order");
    });
}

#[test]
fn errors_are_specific() {
    let (a, _b) = pair();
    let s = UdpSocket::bind(&a, (v4(1), 6000)).unwrap();
    let clash = UdpSocket::bind(&a, (v4(1), 6000)).unwrap_err();
    assert_eq!(clash.kind(), std::io::ErrorKind::AddrInUse);
    let foreign = UdpSocket::bind(&a, (v4(9), 0)).unwrap_err();
    assert_eq!(foreign.kind(), std::io::ErrorKind::AddrNotAvailable);
    block_on(async {
        let too_long = vec![0u8; 70_000];
        let e = s.send_to(&too_long, (v4(2), 1)).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        let e = s.send(b"x").await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotConnected);
    });
}

#[test]
fn a_joined_group_is_received_and_a_left_one_is_not() {
    let (a, b) = pair();
    let group = Ipv4Addr::new(239, 0, 0, 7);
    let sa = UdpSocket::bind(&a, (v4(1), 0)).expect("bind a");
    let sb = UdpSocket::bind(&b, "0.0.0.0:6000").expect("bind b");
    sb.join_multicast_v4(&group, &v4(2)).expect("join");
    assert_eq!(
        sb.join_multicast_v4(&group, &v4(2)).unwrap_err().kind(),
        std::io::ErrorKind::AddrInUse
    );
    assert_eq!(
        sb.join_multicast_v4(&v4(9), &v4(2)).unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput
    );
    sa.set_multicast_ttl_v4(4).unwrap();
    assert_eq!(sa.multicast_ttl_v4().unwrap(), 4);
    block_on(async {
        let mut buf = [0u8; 64];
        sa.send_to(b"to the group", (group, 6000)).await.unwrap();
        let (n, from) = sb.recv_from(&mut buf).await.expect("the group's datagram");
        assert_eq!(
            (&buf[..n], from),
            (
                &b"to the group"[..],
                SocketAddr::from((v4(1), sa.local_addr().unwrap().port()))
            )
        );
        // IP_MULTICAST_LOOP, on by default: b's own datagram to the group comes back to
        // its member socket (here the sender itself); switched off, it does not.
        assert!(sb.multicast_loop_v4().unwrap());
        sb.send_to(b"looped", (group, 6000)).await.unwrap();
        let (n, from) = sb.recv_from(&mut buf).await.expect("the looped datagram");
        assert_eq!(
            (&buf[..n], from),
            (&b"looped"[..], SocketAddr::from((v4(2), 6000)))
        );
        sb.set_multicast_loop_v4(false).unwrap();
        assert!(!sb.multicast_loop_v4().unwrap());
        sb.send_to(b"not looped", (group, 6000)).await.unwrap();
        let got = tokio::time::timeout(Duration::from_millis(300), sb.recv_from(&mut buf)).await;
        assert!(got.is_err(), "no copy with the loop off: {got:?}");
        sb.leave_multicast_v4(&group, &v4(2)).expect("leave");
        sa.send_to(b"after leaving", (group, 6000)).await.unwrap();
        let late = tokio::time::timeout(Duration::from_millis(300), sb.recv_from(&mut buf)).await;
        assert!(late.is_err(), "nothing after the leave: {late:?}");
    });
}

#[test]
fn a_raw_socket_receive_is_woken_by_its_protocols_datagram() {
    let (a, b) = pair();
    assert_eq!(
        RawSocket::bind(&a, 0).unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput
    );
    let ra = RawSocket::bind(&a, 253).expect("bind a");
    let rb = RawSocket::bind(&b, 253).expect("bind b");
    let mut buf = [0u8; 256];
    assert_eq!(
        rb.try_recv_from(&mut buf).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock
    );
    block_on(async {
        let (got, sent) = tokio::join!(rb.recv_from(&mut buf), async {
            // The receive is waiting before the datagram leaves.
            tokio::time::sleep(Duration::from_millis(50)).await;
            ra.send_to(b"raw payload", v4(2)).await
        });
        assert_eq!(sent.expect("send_to"), 11);
        let (n, from) = got.expect("recv_from");
        assert_eq!(from, v4(1));
        let packet = ipv4::Packet::new_checked(&buf[..n]).expect("an IPv4 header");
        assert_eq!(u8::from(packet.protocol()), 253);
        assert_eq!((packet.src_addr(), packet.dst_addr()), (v4(1), v4(2)));
        assert_eq!(packet.payload(), b"raw payload");
    });
}
