//! Interop with an independent implementation: smoltcp on one side of a simulated,
//! lossy link, imp on the other; bytes move both ways and arrive exact.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};

use impnet_core::tcp::{TcpError, TcpHandle};
use impnet_core::{Duration, IfaceConfig, Instant, Stack, StackConfig};
use impnet_phy::{LinkConfig, LinkModel};
use impnet_sim::bulk::{Pattern, StreamHash};
use impnet_wire::ethernet;
use impnet_wire::ipv4::Cidr;
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{self, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};

const IMP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const SMOL: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

/// smoltcp's side of the wire: frames in from the link, frames out to it.
#[derive(Default)]
struct Queues {
    rx: VecDeque<Vec<u8>>,
    tx: VecDeque<Vec<u8>>,
}

struct Rx(Vec<u8>);
struct Tx<'a>(&'a mut VecDeque<Vec<u8>>);

impl phy::RxToken for Rx {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl phy::TxToken for Tx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut frame = vec![0; len];
        let r = f(&mut frame);
        self.0.push_back(frame);
        r
    }
}

impl phy::Device for Queues {
    type RxToken<'a> = Rx;
    type TxToken<'a> = Tx<'a>;
    fn receive(&mut self, _: smoltcp::time::Instant) -> Option<(Rx, Tx<'_>)> {
        let frame = self.rx.pop_front()?;
        Some((Rx(frame), Tx(&mut self.tx)))
    }
    fn transmit(&mut self, _: smoltcp::time::Instant) -> Option<Tx<'_>> {
        Some(Tx(&mut self.tx))
    }
    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = 1514;
        caps
    }
}

struct Pair {
    now: Instant,
    imp: Stack,
    imp_iface: impnet_core::IfaceId,
    smol: Interface,
    dev: Queues,
    sockets: SocketSet<'static>,
    /// [imp -> smoltcp, smoltcp -> imp]
    links: [LinkModel; 2],
    frame: Vec<u8>,
    seed: u64,
}

fn smol_now(t: Instant) -> smoltcp::time::Instant {
    smoltcp::time::Instant::from_micros((t.as_nanos() / 1000) as i64)
}

impl Pair {
    fn new(seed: u64, link: LinkConfig) -> Pair {
        let mut imp = Stack::new(StackConfig::default(), impnet_sim::secret_for_seed(seed));
        let imp_iface = imp.add_interface(IfaceConfig::new(
            ethernet::Address([2, 0, 0, 0, 0, 1]),
            1500,
        ));
        imp.add_address(Instant::ZERO, imp_iface, Cidr::new(IMP, 24).unwrap());
        let mut dev = Queues::default();
        let mut config = Config::new(HardwareAddress::Ethernet(EthernetAddress([
            2, 0, 0, 0, 0, 2,
        ])));
        config.random_seed = seed;
        let mut smol = Interface::new(config, &mut dev, smol_now(Instant::ZERO));
        smol.update_ip_addrs(|addrs| {
            addrs
                .push(IpCidr::new(IpAddress::v4(10, 0, 0, 2), 24))
                .unwrap();
        });
        Pair {
            now: Instant::ZERO,
            imp,
            imp_iface,
            smol,
            dev,
            sockets: SocketSet::new(vec![]),
            links: [
                LinkModel::new(link, seed ^ 1),
                LinkModel::new(link, seed ^ 2),
            ],
            frame: vec![0; 65536],
            seed,
        }
    }

    fn smol_socket(&mut self) -> SocketHandle {
        let rx = tcp::SocketBuffer::new(vec![0; 256 * 1024]);
        let tx = tcp::SocketBuffer::new(vec![0; 256 * 1024]);
        self.sockets.add(tcp::Socket::new(rx, tx))
    }

    /// Exchange frames until the next event, then advance the clock to it.
    fn step(&mut self) {
        let now = self.now;
        while let Some(tx) = self.imp.poll_transmit(now, &mut self.frame) {
            self.links[0].submit(now, &self.frame[..tx.len]);
        }
        self.smol
            .poll(smol_now(now), &mut self.dev, &mut self.sockets);
        while let Some(frame) = self.dev.tx.pop_front() {
            self.links[1].submit(now, &frame);
        }
        while let Some(frame) = self.links[0].poll_deliver(now) {
            self.dev.rx.push_back(frame);
        }
        while let Some(frame) = self.links[1].poll_deliver(now) {
            self.imp.handle_frame(now, self.imp_iface, &frame);
        }
        if self.imp.poll_timeout().is_some_and(|t| t <= now) {
            self.imp.handle_timeout(now);
        }
        if !self.dev.rx.is_empty() {
            return;
        }
        let smol_delay = self
            .smol
            .poll_delay(smol_now(now), &self.sockets)
            .map(|d| now + Duration::from_micros(d.total_micros().max(1)));
        let next = [
            self.imp.poll_timeout(),
            smol_delay,
            self.links[0].next_arrival(),
            self.links[1].next_arrival(),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(now + Duration::from_millis(10));
        self.now = next
            .max(now + Duration::from_micros(1))
            .min(now + Duration::from_millis(10));
    }
}

fn lossy_link() -> LinkConfig {
    LinkConfig {
        rate_bps: 50_000_000,
        delay: Duration::from_millis(5),
        loss: 0.01,
        ..LinkConfig::default()
    }
}

#[test]
fn imp_sends_to_smoltcp_byte_exact() {
    let seed = 81;
    let total: usize = 3 << 20;
    let mut p = Pair::new(seed, lossy_link());
    let server = p.smol_socket();
    p.sockets
        .get_mut::<tcp::Socket>(server)
        .listen(5001)
        .unwrap();
    let conn = p
        .imp
        .tcp_connect(
            p.now,
            SocketAddrV4::new(IMP, 0),
            SocketAddrV4::new(SMOL, 5001),
        )
        .unwrap();
    let (mut pattern, mut sent_hash, mut recv_hash) = (
        Pattern::new(seed),
        StreamHash::default(),
        StreamHash::default(),
    );
    let (mut chunk, mut offset, mut written, mut closed) =
        (vec![0u8; 8192], 8192usize, 0usize, false);
    let mut buf = vec![0u8; 65536];
    for _ in 0..2_000_000 {
        p.step();
        let now = p.now;
        while written < total {
            if offset == chunk.len() {
                pattern.fill(&mut chunk);
                sent_hash.update(&chunk);
                offset = 0;
            }
            match p.imp.tcp_send(now, conn, &chunk[offset..]) {
                Ok(n) if n > 0 => {
                    offset += n;
                    written += n;
                }
                Ok(_) | Err(TcpError::WouldBlock) => break,
                Err(e) => panic!("seed {seed}: imp send failed: {e:?}"),
            }
        }
        if written == total && !closed {
            p.imp.tcp_close(now, conn).unwrap();
            closed = true;
        }
        let s = p.sockets.get_mut::<tcp::Socket>(server);
        while s.can_recv() {
            let n = s.recv_slice(&mut buf).unwrap();
            recv_hash.update(&buf[..n]);
        }
        if recv_hash.len() == total as u64 && !s.may_recv() {
            assert_eq!(
                recv_hash.finish(),
                sent_hash.finish(),
                "seed {seed}: smoltcp received different bytes"
            );
            return;
        }
    }
    panic!(
        "seed {seed}: transfer did not finish: {} of {total} bytes",
        recv_hash.len()
    );
}

fn accept_one(p: &mut Pair, listener: TcpHandle) -> Option<TcpHandle> {
    match p.imp.tcp_accept(listener) {
        Ok(c) => Some(c),
        Err(TcpError::WouldBlock) => None,
        Err(e) => panic!("seed {}: accept failed: {e:?}", p.seed),
    }
}

#[test]
fn smoltcp_sends_to_imp_byte_exact() {
    let seed = 82;
    let total: usize = 3 << 20;
    let mut p = Pair::new(seed, lossy_link());
    let listener = p.imp.tcp_listen(SocketAddrV4::new(IMP, 5001), 4).unwrap();
    let client = p.smol_socket();
    let cx = p.smol.context();
    p.sockets
        .get_mut::<tcp::Socket>(client)
        .connect(cx, (IpAddress::v4(10, 0, 0, 1), 5001), 49500)
        .unwrap();
    let (mut pattern, mut sent_hash, mut recv_hash) = (
        Pattern::new(seed),
        StreamHash::default(),
        StreamHash::default(),
    );
    let (mut chunk, mut offset, mut written) = (vec![0u8; 8192], 8192usize, 0usize);
    let mut conn = None;
    let mut buf = vec![0u8; 65536];
    for _ in 0..2_000_000 {
        p.step();
        let now = p.now;
        let s = p.sockets.get_mut::<tcp::Socket>(client);
        while written < total && s.can_send() {
            if offset == chunk.len() {
                pattern.fill(&mut chunk);
                sent_hash.update(&chunk);
                offset = 0;
            }
            let n = s.send_slice(&chunk[offset..]).unwrap();
            if n == 0 {
                break;
            }
            offset += n;
            written += n;
        }
        if written == total {
            s.close();
        }
        if conn.is_none() {
            conn = accept_one(&mut p, listener);
        }
        let Some(c) = conn else { continue };
        loop {
            match p.imp.tcp_recv(now, c, &mut buf) {
                Ok(0) => {
                    assert_eq!(recv_hash.len(), total as u64, "seed {seed}: early EOF");
                    assert_eq!(
                        recv_hash.finish(),
                        sent_hash.finish(),
                        "seed {seed}: imp received different bytes"
                    );
                    return;
                }
                Ok(n) => recv_hash.update(&buf[..n]),
                Err(TcpError::WouldBlock) => break,
                Err(e) => panic!("seed {seed}: imp recv failed: {e:?}"),
            }
        }
    }
    panic!(
        "seed {seed}: transfer did not finish: {} of {total} bytes",
        recv_hash.len()
    );
}
