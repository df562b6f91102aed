//! The same workloads on smoltcp 0.14, driven the fair way: two `Interface`s with their
//! `SocketSet`s in one thread, a `Device` over frame buffers that are allocated once
//! and reused, `poll` until both sides are quiet.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::time::Instant as StdInstant;

use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{self, ChecksumCapabilities, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::Instant as SmolInstant;
use smoltcp::wire::{
    EthernetAddress, HardwareAddress, IpAddress, IpCidr, Ipv4Address, Ipv6Address,
};

use super::workload::{self, Stream};

const PORT: u16 = 5001;
const B: Ipv4Address = Ipv4Address::new(10, 0, 0, 2);
/// B's IPv6 address (the `-v6` rows), as on imp.
const B6: Ipv6Address = Ipv6Address::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

/// Frames in flight each way and the spare buffers. Every buffer is `frame_len` long;
/// a queued frame is (buffer, length).
struct Wire {
    /// [to A, to B]
    queues: [VecDeque<(Vec<u8>, usize)>; 2],
    spare: Vec<Vec<u8>>,
    frame_len: usize,
}

/// One side's device: receives from its queue, transmits into the other's.
struct Port<'w> {
    wire: &'w RefCell<Wire>,
    side: usize,
    caps: &'w DeviceCapabilities,
}

struct Rx<'w> {
    wire: &'w RefCell<Wire>,
    frame: Vec<u8>,
    len: usize,
}

struct Tx<'w> {
    wire: &'w RefCell<Wire>,
    to: usize,
}

impl phy::RxToken for Rx<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        let r = f(&self.frame[..self.len]);
        self.wire.borrow_mut().spare.push(self.frame);
        r
    }
}

impl phy::TxToken for Tx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut frame = {
            let mut wire = self.wire.borrow_mut();
            let frame_len = wire.frame_len;
            wire.spare.pop().unwrap_or_else(|| vec![0; frame_len])
        };
        let r = f(&mut frame[..len]);
        self.wire.borrow_mut().queues[self.to].push_back((frame, len));
        r
    }
}

impl phy::Device for Port<'_> {
    type RxToken<'a>
        = Rx<'a>
    where
        Self: 'a;
    type TxToken<'a>
        = Tx<'a>
    where
        Self: 'a;
    fn receive(&mut self, _: SmolInstant) -> Option<(Rx<'_>, Tx<'_>)> {
        let (frame, len) = self.wire.borrow_mut().queues[self.side].pop_front()?;
        let rx = Rx {
            wire: self.wire,
            frame,
            len,
        };
        Some((
            rx,
            Tx {
                wire: self.wire,
                to: 1 - self.side,
            },
        ))
    }
    fn transmit(&mut self, _: SmolInstant) -> Option<Tx<'_>> {
        Some(Tx {
            wire: self.wire,
            to: 1 - self.side,
        })
    }
    fn capabilities(&self) -> DeviceCapabilities {
        self.caps.clone()
    }
}

/// The milliseconds clock as the last `pump` read it: smoltcp's TSval generator takes
/// no arguments, and reading the clock again per segment would charge smoltcp for a
/// clock read imp does not make (imp's TSval comes from the time of the poll).
static CLOCK_MS: AtomicU32 = AtomicU32::new(0);

/// Microseconds each pump moves a virtual clock on; 0: the pairs read the wall clock.
static VIRTUAL_STEP_US: AtomicI64 = AtomicI64::new(0);

/// Pairs made from now on run on a virtual clock that moves `step_us` per pump, so that
/// a run does the same work every time (the budget's smoltcp reference counts).
pub(crate) fn use_virtual_clock(step_us: i64) {
    VIRTUAL_STEP_US.store(step_us, Ordering::Relaxed);
}

fn tsval() -> u32 {
    CLOCK_MS.load(Ordering::Relaxed)
}

/// Timestamps on every socket: as on imp and Linux (smoltcp also offers
/// SACK-permitted and sends SACK blocks by itself); off with `--bare`, smoltcp's
/// default.
fn timestamps() -> bool {
    !super::bare()
}

/// Two smoltcp interfaces back to back.
struct Pair {
    wire: RefCell<Wire>,
    caps: DeviceCapabilities,
    ifaces: [Interface; 2],
    sockets: [SocketSet<'static>; 2],
    epoch: StdInstant,
    frames: u64,
    /// Sockets send timestamps.
    timestamps: bool,
    /// Connections go over IPv6 (each interface also has an IPv6 address).
    v6: bool,
    /// Microseconds a pump moves the clock on (0: the wall clock), and the virtual
    /// clock's reading.
    virtual_step: i64,
    virtual_now: i64,
}

impl Pair {
    /// `timestamps`: every socket of the pair sends RFC 7323 timestamps; `v6`:
    /// connections go over IPv6.
    fn new(mtu: usize, offload: bool, timestamps: bool, v6: bool) -> Pair {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = mtu + 14;
        if offload {
            caps.checksum = ChecksumCapabilities::ignored();
        }
        let wire = RefCell::new(Wire {
            queues: [VecDeque::new(), VecDeque::new()],
            spare: (0..64).map(|_| vec![0; mtu + 14]).collect(),
            frame_len: mtu + 14,
        });
        let epoch = StdInstant::now();
        let iface = |side: usize| {
            let mac = EthernetAddress([2, 0, 0, 0, 0, side as u8 + 1]);
            let mut config = Config::new(HardwareAddress::Ethernet(mac));
            config.random_seed = side as u64 + 1;
            let mut port = Port {
                wire: &wire,
                side,
                caps: &caps,
            };
            let mut iface = Interface::new(config, &mut port, SmolInstant::from_micros(0));
            iface.update_ip_addrs(|addrs| {
                addrs
                    .push(IpCidr::new(IpAddress::v4(10, 0, 0, side as u8 + 1), 24))
                    .expect("room for an address");
                if v6 {
                    let host = side as u16 + 1;
                    let addr = IpAddress::v6(0x2001, 0xdb8, 0, 0, 0, 0, 0, host);
                    addrs
                        .push(IpCidr::new(addr, 64))
                        .expect("room for an address");
                }
            });
            iface
        };
        let ifaces = [iface(0), iface(1)];
        Pair {
            wire,
            caps,
            ifaces,
            sockets: [SocketSet::new(vec![]), SocketSet::new(vec![])],
            epoch,
            frames: 0,
            timestamps,
            v6,
            virtual_step: VIRTUAL_STEP_US.load(Ordering::Relaxed),
            virtual_now: 0,
        }
    }

    fn now(&self) -> SmolInstant {
        if self.virtual_step > 0 {
            return SmolInstant::from_micros(self.virtual_now);
        }
        SmolInstant::from_micros(self.epoch.elapsed().as_micros() as i64)
    }

    /// Poll both sides until no frame is in flight.
    fn pump(&mut self) {
        self.virtual_now += self.virtual_step;
        let now = self.now();
        CLOCK_MS.store(now.total_millis() as u32, Ordering::Relaxed);
        loop {
            for side in 0..2 {
                let mut port = Port {
                    wire: &self.wire,
                    side,
                    caps: &self.caps,
                };
                self.ifaces[side].poll(now, &mut port, &mut self.sockets[side]);
            }
            let wire = self.wire.borrow();
            let queued = wire.queues[0].len() + wire.queues[1].len();
            if queued == 0 {
                break;
            }
            self.frames += queued as u64;
        }
    }

    /// B's address in the pair's family.
    fn remote(&self) -> IpAddress {
        if self.v6 {
            IpAddress::Ipv6(B6)
        } else {
            IpAddress::Ipv4(B)
        }
    }

    fn socket(&mut self, side: usize, buffer: usize, nodelay: bool) -> SocketHandle {
        let rx = tcp::SocketBuffer::new(vec![0; buffer]);
        let tx = tcp::SocketBuffer::new(vec![0; buffer]);
        let mut socket = tcp::Socket::new(rx, tx);
        socket.set_nagle_enabled(!nodelay);
        if self.timestamps {
            socket.set_tsval_generator(Some(tsval));
        }
        self.sockets[side].add(socket)
    }

    fn tcp(&mut self, side: usize, handle: SocketHandle) -> &mut tcp::Socket<'static> {
        self.sockets[side].get_mut::<tcp::Socket>(handle)
    }

    /// Connect A (from `local_port`) to B's listening `server` socket and wait for both
    /// ends to be established.
    fn open(&mut self, client: SocketHandle, server: SocketHandle, local_port: u16) {
        let remote = self.remote();
        let cx = self.ifaces[0].context();
        self.sockets[0]
            .get_mut::<tcp::Socket>(client)
            .connect(cx, (remote, PORT), local_port)
            .expect("smoltcp connect");
        for _ in 0..1000 {
            self.pump();
            if self.tcp(0, client).state() == tcp::State::Established
                && self.tcp(1, server).state() == tcp::State::Established
            {
                // smoltcp drops its generator when the peer's SYN has no timestamp.
                let ts = self.timestamps;
                assert!(
                    self.tcp(0, client).timestamp_enabled() == ts
                        && self.tcp(1, server).timestamp_enabled() == ts,
                    "smoltcp: timestamps not negotiated as asked"
                );
                return;
            }
        }
        panic!("smoltcp: connection never established");
    }
}

/// Socket buffers of the bulk workload, the same on every stack: 256 KiB each way keeps
/// the working set of one transfer in the caches, as a tuned in-process setup would.
pub(crate) const BULK_BUFFER: usize = 256 << 10;

/// W1 on smoltcp: one connection A -> B and its stream; over IPv6 when `V6`.
pub struct Bulk<const V6: bool = false> {
    pair: Pair,
    client: SocketHandle,
    server: SocketHandle,
    stream: Stream,
}

impl<const V6: bool> workload::Bulk for Bulk<V6> {
    fn open(mtu: usize, offload: bool) -> Bulk<V6> {
        // Timestamps as on imp (off with `--bare`): since 0.14 smoltcp counts the
        // option in its segment size (smoltcp-rs/smoltcp#1161), so full segments fit
        // the MTU; 0.12 overran it and ran this row without them.
        let mut pair = Pair::new(mtu, offload, timestamps(), V6);
        let server = pair.socket(1, BULK_BUFFER, false);
        pair.tcp(1, server).listen(PORT).expect("listen");
        let client = pair.socket(0, BULK_BUFFER, false);
        pair.open(client, server, 49152);
        Bulk {
            pair,
            client,
            server,
            stream: Stream::new(),
        }
    }

    fn step(&mut self, limit: u64) -> u64 {
        self.stream.write(limit, |piece| {
            self.pair
                .tcp(0, self.client)
                .send_slice(piece)
                .unwrap_or_else(|e| panic!("smoltcp send: {e}"))
        });
        self.pair.pump();
        self.stream.read(|buffer| {
            self.pair
                .tcp(1, self.server)
                .recv_slice(buffer)
                .unwrap_or_else(|e| panic!("smoltcp recv: {e}"))
        })
    }
}

/// W2 on smoltcp: one open connection; over IPv6 when `V6`.
pub struct PingPong<const V6: bool = false> {
    pair: Pair,
    client: SocketHandle,
    server: SocketHandle,
}

impl<const V6: bool> workload::PingPong for PingPong<V6> {
    fn open() -> PingPong<V6> {
        let mut pair = Pair::new(1500, false, timestamps(), V6);
        let server = pair.socket(1, 64 * 1024, true);
        pair.tcp(1, server).listen(PORT).expect("listen");
        let client = pair.socket(0, 64 * 1024, true);
        pair.open(client, server, 49152);
        PingPong {
            pair,
            client,
            server,
        }
    }

    fn round_trip(&mut self) {
        let PingPong {
            pair,
            client,
            server,
        } = self;
        let (client, server) = (*client, *server);
        let mut byte = [0u8; 1];
        pair.tcp(0, client).send_slice(b"q").expect("send request");
        pair.pump();
        let n = pair
            .tcp(1, server)
            .recv_slice(&mut byte)
            .expect("read request");
        assert_eq!(n, 1, "smoltcp: request not delivered");
        pair.tcp(1, server).send_slice(b"r").expect("send response");
        pair.pump();
        let n = pair
            .tcp(0, client)
            .recv_slice(&mut byte)
            .expect("read response");
        assert_eq!(n, 1, "smoltcp: response not delivered");
    }
}

/// W3 on smoltcp. smoltcp keeps TIME-WAIT in the socket itself, and a listening socket
/// serves one connection: each connection gets a fresh listening socket, and the
/// server's socket is removed once in TIME-WAIT (smoltcp would otherwise keep answering
/// for the old connection). The client socket is reused, each time from the next port.
pub struct Churn<const V6: bool = false> {
    pair: Pair,
    client: SocketHandle,
    /// Connections made so far: the next one's client port is 49152 plus this (mod 16384).
    count: u64,
}

impl<const V6: bool> workload::Churn for Churn<V6> {
    fn open() -> Churn<V6> {
        let mut pair = Pair::new(1500, false, timestamps(), V6);
        let client = pair.socket(0, 4096, true);
        Churn {
            pair,
            client,
            count: 0,
        }
    }

    fn connection(&mut self) {
        let Churn {
            pair,
            client,
            count,
        } = self;
        let client = *client;
        let mut byte = [0u8; 1];
        let server = pair.socket(1, 4096, true);
        pair.tcp(1, server).listen(PORT).expect("listen");
        pair.open(client, server, 49152 + (*count % 16384) as u16);
        *count += 1;
        pair.tcp(0, client).send_slice(b"x").expect("send");
        pair.pump();
        let n = pair
            .tcp(1, server)
            .recv_slice(&mut byte)
            .expect("server read");
        assert_eq!(n, 1, "smoltcp churn: byte not delivered");
        pair.tcp(1, server).close();
        pair.pump();
        pair.tcp(0, client).close();
        for _ in 0..1000 {
            pair.pump();
            if pair.tcp(0, client).state() == tcp::State::Closed
                && pair.tcp(1, server).state() == tcp::State::TimeWait
            {
                break;
            }
        }
        pair.sockets[1].remove(server);
    }
}
