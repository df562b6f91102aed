//! Shards: N stacks, one [`Runtime`](crate::Runtime) each, over the N queues of one
//! multi-queue TAP or TUN (`Tap::open_queues`), with the same addresses and MAC.
//!
//! The kernel spreads frames over the queues by its own flow hash, which imp does not
//! know and which need not agree for both directions of a flow. So each flow has an
//! owner of imp's choosing: [`flow_owner`], a hash of the flow's addresses and ports
//! that is the same both ways, modulo the number of shards. Each shard's device is a
//! [`ShardDevice`] around its queue: a frame it reads that another shard owns goes to
//! that shard's inbox (a bounded queue of reused buffers: no allocation per frame once
//! warm) and wakes it through an eventfd; the shard that owns it takes it in from there
//! as if its own queue had delivered it. An ICMP or ICMPv6 error goes to the owner of
//! the flow it quotes (so path MTU discovery and soft errors reach the connection).
//! What belongs to no flow (ARP, NDP, ICMP echo)
//! is taken in by whichever shard read it, and what every stack must learn (ARP
//! replies, neighbour and router advertisements) is taken in by the reader and copied
//! to every other shard.
//!
//! A listener bound on every shard accepts every connection: the SYN reaches the owner
//! of its 4-tuple, which answers, and all the flow's later segments reach it too. A
//! connection a shard opens must pick a local port the shard owns
//! ([`port_for_shard`]), so that the replies come back to it.
//!
//! What a shard sends goes out through its own queue; the kernel then steers the flow's
//! next frames to that queue, so once a connection has sent, hand-overs are rare.

use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use impnet_core::{Instant, RxOffload};
use impnet_phy::{Device, DeviceError, Framing};

use crate::PollFd;

/// Frames a shard's inbox holds at most; more are dropped (and counted), as a full
/// device queue drops them.
pub const INBOX_FRAMES: usize = 1024;

/// Frames of other shards one [`ShardDevice::recv_offloaded`] call hands over before it
/// returns (so a flood of them cannot keep the shard from its own work).
const HANDOVERS_PER_CALL: usize = 64;

/// Where a frame read from a queue goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steer {
    /// Taken in by the shard that read it (no flow: ARP requests, ICMP, NDP
    /// solicitations, anything not parsed).
    Reader,
    /// The flow's owner.
    Owner(usize),
    /// The reader takes it in and every other shard a copy: what every stack must
    /// learn (ARP replies, neighbour and router advertisements).
    Everyone,
}

/// The owner of the flow between `a` and `b` (addresses and ports) among `shards`
/// (at least 1): the same whichever end is `a`, so that both directions of a flow
/// have one owner. `key` varies the hash between runs (a peer that could predict it
/// could steer every flow to one shard).
pub fn flow_owner(key: u64, a: (IpAddr, u16), b: (IpAddr, u16), shards: usize) -> usize {
    let shards = shards.max(1) as u64;
    let word = |(ip, port): (IpAddr, u16)| -> (u128, u16) {
        let bits = match ip {
            IpAddr::V4(v4) => u128::from(v4.to_bits()),
            IpAddr::V6(v6) => v6.to_bits(),
        };
        (bits, port)
    };
    let (a, b) = (word(a), word(b));
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    let mut h = key ^ 0x243f_6a88_85a3_08d3;
    for v in [
        lo.0 as u64,
        (lo.0 >> 64) as u64,
        hi.0 as u64,
        (hi.0 >> 64) as u64,
        (u64::from(lo.1) << 16) | u64::from(hi.1),
    ] {
        h = mix(h ^ v);
    }
    // The high bits of the product: an even spread without a division.
    ((u128::from(h) * u128::from(shards)) >> 64) as usize
}

/// A 64-bit finaliser (murmur3's `fmix64`): every input bit moves every output bit.
fn mix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// A local port for a connection from `local` to `remote` that `shard` owns, the first
/// from `start` on (wrapping within 49152-65535, the dynamic ports of RFC 6335) for
/// which [`flow_owner`] says so; `start` is the caller's random pick.
pub fn port_for_shard(
    key: u64,
    local: IpAddr,
    remote: SocketAddr,
    shard: usize,
    shards: usize,
    start: u16,
) -> u16 {
    const FIRST: u32 = 49152;
    const COUNT: u32 = 65536 - FIRST;
    let offset = u32::from(start) % COUNT;
    (0..COUNT)
        .map(|i| (FIRST + (offset + i) % COUNT) as u16)
        .find(|&port| flow_owner(key, (local, port), (remote.ip(), remote.port()), shards) == shard)
        .unwrap_or(start)
}

/// Where `frame` (an Ethernet frame, or an IP packet under [`Framing::Ip`]) goes among
/// `shards`.
pub fn steer(key: u64, frame: &[u8], framing: Framing, shards: usize) -> Steer {
    let ip = match framing {
        Framing::Ethernet => {
            let Some(ethertype) = frame.get(12..14) else {
                return Steer::Reader;
            };
            match ethertype {
                [0x08, 0x06] => return arp(frame),
                [0x08, 0x00] | [0x86, 0xdd] => &frame[14..],
                _ => return Steer::Reader,
            }
        }
        Framing::Ip => frame,
    };
    match ip.first().map(|b| b >> 4) {
        Some(4) => ipv4(key, ip, shards),
        Some(6) => ipv6(key, ip, shards),
        _ => Steer::Reader,
    }
}

/// ARP: replies teach every stack a neighbour (a shard that asked may not be the one
/// that reads the reply); requests are answered by the reader.
fn arp(frame: &[u8]) -> Steer {
    match frame.get(20..22) {
        Some([0, 2]) => Steer::Everyone,
        _ => Steer::Reader,
    }
}

fn ipv4(key: u64, ip: &[u8], shards: usize) -> Steer {
    if ip.len() < 20 {
        return Steer::Reader;
    }
    let header = usize::from(ip[0] & 0x0f) * 4;
    let src = IpAddr::from(<[u8; 4]>::try_from(&ip[12..16]).unwrap_or_default());
    let dst = IpAddr::from(<[u8; 4]>::try_from(&ip[16..20]).unwrap_or_default());
    // A fragment: only the first carries the ports, so all of a datagram's fragments
    // go by the addresses alone (reassembled there; imp's UDP sockets are on every
    // shard).
    let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
    match ip[9] {
        6 | 17 if fragment => Steer::Owner(flow_owner(key, (src, 0), (dst, 0), shards)),
        6 | 17 => ports(key, ip.get(header..), src, dst, shards),
        // An ICMP error (destination unreachable, source quench, time exceeded,
        // parameter problem: RFC 792) goes to the owner of the flow it quotes, which
        // must learn of it (path MTU, soft errors); anything else to the reader.
        1 if !fragment => match ip.get(header..) {
            Some([3 | 4 | 11 | 12, _, _, _, _, _, _, _, quoted @ ..]) => match quoted.first() {
                Some(v) if v >> 4 == 4 => quoted_ipv4(key, quoted, shards),
                _ => Steer::Reader,
            },
            _ => Steer::Reader,
        },
        _ => Steer::Reader,
    }
}

/// The owner of the flow of a datagram quoted in an ICMP error (its header and at
/// least the first 8 bytes of its payload: the ports); the reader when the quote is
/// short, a fragment past the first or of neither TCP nor UDP.
fn quoted_ipv4(key: u64, quoted: &[u8], shards: usize) -> Steer {
    if quoted.len() < 20 || !matches!(quoted[9], 6 | 17) {
        return Steer::Reader;
    }
    // Past the first fragment there are no ports; the first (imp fragmented what it
    // sent) carries them, and the flow is the whole datagram's.
    if u16::from_be_bytes([quoted[6], quoted[7]]) & 0x1fff != 0 {
        return Steer::Reader;
    }
    let header = usize::from(quoted[0] & 0x0f) * 4;
    let src = IpAddr::from(<[u8; 4]>::try_from(&quoted[12..16]).unwrap_or_default());
    let dst = IpAddr::from(<[u8; 4]>::try_from(&quoted[16..20]).unwrap_or_default());
    ports(key, quoted.get(header..), src, dst, shards)
}

fn ipv6(key: u64, ip: &[u8], shards: usize) -> Steer {
    if ip.len() < 40 {
        return Steer::Reader;
    }
    let src = IpAddr::from(<[u8; 16]>::try_from(&ip[8..24]).unwrap_or_default());
    let dst = IpAddr::from(<[u8; 16]>::try_from(&ip[24..40]).unwrap_or_default());
    match ip[6] {
        6 | 17 => ports(key, ip.get(40..), src, dst, shards),
        // ICMPv6: router (134) and neighbour (136) advertisements to every stack; an
        // error (1-4: RFC 4443) to the owner of the flow it quotes.
        58 => match ip.get(40..) {
            Some([134 | 136, ..]) => Steer::Everyone,
            Some([1..=4, _, _, _, _, _, _, _, quoted @ ..]) => match quoted.first() {
                Some(v) if v >> 4 == 6 && matches!(quoted.get(6), Some(6 | 17)) => {
                    ipv6(key, quoted, shards)
                }
                _ => Steer::Reader,
            },
            _ => Steer::Reader,
        },
        _ => Steer::Reader,
    }
}

/// The owner of a TCP or UDP flow whose transport header is `transport`.
fn ports(key: u64, transport: Option<&[u8]>, src: IpAddr, dst: IpAddr, n: usize) -> Steer {
    match transport.and_then(|t| t.get(0..4)) {
        Some(p) => {
            let sport = u16::from_be_bytes([p[0], p[1]]);
            let dport = u16::from_be_bytes([p[2], p[3]]);
            Steer::Owner(flow_owner(key, (src, sport), (dst, dport), n))
        }
        None => Steer::Reader,
    }
}

/// Counters of one shard's hand-overs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShardStats {
    /// Frames read from this shard's own queue and taken in here.
    pub kept: u64,
    /// Frames read from this shard's queue and handed to their owner.
    pub handed_out: u64,
    /// Frames other shards handed to this one, taken in here.
    pub handed_in: u64,
    /// Frames handed to this shard while its inbox was full, dropped.
    pub inbox_dropped: u64,
}

/// One shard's inbox: frames other shards read for it.
struct Inbox {
    queue: Mutex<InboxQueue>,
    /// Readable while `queue.signalled`: in the shard device's epoll.
    signal: OwnedFd,
    kept: AtomicU64,
    handed_out: AtomicU64,
    handed_in: AtomicU64,
    dropped: AtomicU64,
}

#[derive(Default)]
struct InboxQueue {
    /// Frames waiting: (bytes, length, what the device said of them).
    frames: VecDeque<(Vec<u8>, usize, RxOffload)>,
    /// Buffers taken in, kept for the next frames handed over.
    free: Vec<Vec<u8>>,
    /// `signal` was written and not yet drained.
    signalled: bool,
}

/// What the shards of one device share: their inboxes and the steering key.
pub struct Exchange {
    inboxes: Vec<Inbox>,
    key: u64,
    framing: Framing,
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchange")
            .field("shards", &self.inboxes.len())
            .finish_non_exhaustive()
    }
}

impl Exchange {
    /// The exchange of `shards` shards over a device of `framing`, steering with
    /// `key` (random per run; see [`flow_owner`]).
    pub fn new(shards: usize, framing: Framing, key: u64) -> io::Result<Arc<Exchange>> {
        let inboxes = (0..shards.max(1))
            .map(|_| {
                Ok(Inbox {
                    queue: Mutex::new(InboxQueue::default()),
                    signal: crate::runtime::eventfd()?,
                    kept: AtomicU64::new(0),
                    handed_out: AtomicU64::new(0),
                    handed_in: AtomicU64::new(0),
                    dropped: AtomicU64::new(0),
                })
            })
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Arc::new(Exchange {
            inboxes,
            key,
            framing,
        }))
    }

    /// The number of shards.
    pub fn shards(&self) -> usize {
        self.inboxes.len()
    }

    /// The steering key (for [`port_for_shard`]).
    pub fn key(&self) -> u64 {
        self.key
    }

    /// Shard `shard`'s counters.
    pub fn stats(&self, shard: usize) -> ShardStats {
        let inbox = &self.inboxes[shard];
        ShardStats {
            kept: inbox.kept.load(Ordering::Relaxed),
            handed_out: inbox.handed_out.load(Ordering::Relaxed),
            handed_in: inbox.handed_in.load(Ordering::Relaxed),
            inbox_dropped: inbox.dropped.load(Ordering::Relaxed),
        }
    }

    /// Put a copy of `frame` in shard `to`'s inbox and wake it.
    fn hand(&self, to: usize, frame: &[u8], rx: RxOffload) {
        let inbox = &self.inboxes[to];
        let mut queue = lock(&inbox.queue);
        if queue.frames.len() >= INBOX_FRAMES {
            inbox.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut buf = queue.free.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(frame);
        queue.frames.push_back((buf, frame.len(), rx));
        if !queue.signalled {
            queue.signalled = true;
            let _ = rustix::io::write(&inbox.signal, &1u64.to_ne_bytes());
        }
    }

    /// The next frame in shard `shard`'s inbox, copied into `buf`.
    fn take(
        &self,
        shard: usize,
        buf: &mut [u8],
    ) -> Result<Option<(usize, RxOffload)>, DeviceError> {
        let inbox = &self.inboxes[shard];
        let mut queue = lock(&inbox.queue);
        let Some((frame, len, rx)) = queue.frames.pop_front() else {
            if std::mem::take(&mut queue.signalled) {
                let mut counter = [0u8; 8];
                let _ = rustix::io::read(&inbox.signal, &mut counter);
            }
            return Ok(None);
        };
        if len > buf.len() {
            let capacity = buf.len();
            queue.frames.push_front((frame, len, rx));
            return Err(DeviceError::BufferTooSmall { len, capacity });
        }
        buf[..len].copy_from_slice(&frame[..len]);
        queue.free.push(frame);
        inbox.handed_in.fetch_add(1, Ordering::Relaxed);
        Ok(Some((len, rx)))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// One shard's device: its queue of the shared device, and its inbox. It reads its
/// inbox first, then its queue, handing each frame another shard owns to that shard;
/// it sends through its queue. The runtime watches the queue's descriptor
/// ([`PollFd::poll_fd`]) and the inbox's eventfd ([`PollFd::extra_poll_fd`]).
pub struct ShardDevice<D> {
    queue: D,
    shard: usize,
    exchange: Arc<Exchange>,
}

impl<D: std::fmt::Debug> std::fmt::Debug for ShardDevice<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardDevice")
            .field("queue", &self.queue)
            .field("shard", &self.shard)
            .finish_non_exhaustive()
    }
}

impl<D: Device + PollFd> ShardDevice<D> {
    /// Shard `shard` of `exchange`, reading and writing `queue`, which must have a
    /// descriptor (a TAP's or TUN's queue: [`Tap::open_queues`]).
    ///
    /// [`Tap::open_queues`]: impnet_phy::Tap::open_queues
    pub fn new(queue: D, shard: usize, exchange: Arc<Exchange>) -> ShardDevice<D> {
        assert!(
            shard < exchange.shards(),
            "shard {shard} of {}",
            exchange.shards()
        );
        ShardDevice {
            queue,
            shard,
            exchange,
        }
    }

    /// The queue this shard reads.
    pub fn queue(&self) -> &D {
        &self.queue
    }
}

impl<D: Device> Device for ShardDevice<D> {
    fn recv(&mut self, now: Instant, buf: &mut [u8]) -> Result<Option<usize>, DeviceError> {
        Ok(self.recv_offloaded(now, buf)?.map(|(len, _)| len))
    }

    fn recv_offloaded(
        &mut self,
        now: Instant,
        buf: &mut [u8],
    ) -> Result<Option<(usize, RxOffload)>, DeviceError> {
        let exchange = &*self.exchange;
        if let Some(frame) = exchange.take(self.shard, buf)? {
            return Ok(Some(frame));
        }
        let inbox = &exchange.inboxes[self.shard];
        for _ in 0..HANDOVERS_PER_CALL {
            let Some((len, rx)) = self.queue.recv_offloaded(now, buf)? else {
                return Ok(None);
            };
            let frame = &buf[..len];
            match steer(exchange.key, frame, exchange.framing, exchange.shards()) {
                Steer::Owner(owner) if owner != self.shard => {
                    exchange.hand(owner, frame, rx);
                    inbox.handed_out.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                Steer::Everyone => {
                    for other in (0..exchange.shards()).filter(|&s| s != self.shard) {
                        exchange.hand(other, frame, rx);
                    }
                }
                Steer::Reader | Steer::Owner(_) => {}
            }
            inbox.kept.fetch_add(1, Ordering::Relaxed);
            return Ok(Some((len, rx)));
        }
        Ok(None)
    }

    fn send(&mut self, now: Instant, frame: &[u8]) -> Result<bool, DeviceError> {
        self.queue.send(now, frame)
    }

    fn send_segmented(
        &mut self,
        now: Instant,
        frame: &[u8],
        gso_size: u16,
    ) -> Result<bool, DeviceError> {
        self.queue.send_segmented(now, frame, gso_size)
    }

    fn send_gather(
        &mut self,
        now: Instant,
        head: &[u8],
        payload: (&[u8], &[u8]),
    ) -> Result<bool, DeviceError> {
        self.queue.send_gather(now, head, payload)
    }

    fn gathers(&self) -> bool {
        self.queue.gathers()
    }

    fn flush(&mut self, now: Instant) -> Result<(), DeviceError> {
        self.queue.flush(now)
    }

    fn mtu(&self) -> usize {
        self.queue.mtu()
    }

    fn poll_at(&self) -> Option<Instant> {
        self.queue.poll_at()
    }
}

impl<D: PollFd> PollFd for ShardDevice<D> {
    fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        self.queue.poll_fd()
    }

    fn extra_poll_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.exchange.inboxes[self.shard].signal.as_fd())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const KEY: u64 = 0x1234_5678_9abc_def0;

    fn v4(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
    }

    #[test]
    fn a_flow_has_one_owner_both_ways() {
        let v6a = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1));
        let v6b = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2));
        for shards in 1..=8 {
            for port in 40000..40200 {
                for (a, b) in [((v4(1), port), (v4(2), 80)), ((v6a, port), (v6b, 443))] {
                    let there = flow_owner(KEY, a, b, shards);
                    assert_eq!(there, flow_owner(KEY, b, a, shards));
                    assert!(there < shards);
                }
            }
        }
    }

    #[test]
    fn flows_spread_evenly_over_the_shards() {
        for shards in [2usize, 3, 4, 64] {
            let mut count = vec![0usize; shards];
            let flows = 1000 * shards;
            for i in 0..flows {
                let port = 32768 + (i % 28000) as u16;
                let peer = v4(1 + (i / 28000) as u8);
                count[flow_owner(KEY, (peer, port), (v4(200), 80), shards)] += 1;
            }
            // Within 15% of an even share (1000 each).
            for (shard, n) in count.iter().enumerate() {
                assert!(
                    (850..=1150).contains(n),
                    "{shards} shards: shard {shard} has {n}"
                );
            }
        }
    }

    #[test]
    fn the_key_changes_the_owners() {
        let moved = (40000..40100)
            .filter(|&p| {
                flow_owner(1, (v4(1), p), (v4(2), 80), 2)
                    != flow_owner(2, (v4(1), p), (v4(2), 80), 2)
            })
            .count();
        assert!(moved > 20, "{moved} of 100 flows moved");
    }

    #[test]
    fn a_local_port_lands_on_the_asking_shard() {
        let remote = SocketAddr::new(v4(2), 80);
        for shard in 0..4 {
            for start in [0u16, 1000, 60000, 65535] {
                let port = port_for_shard(KEY, v4(1), remote, shard, 4, start);
                assert!(port >= 49152);
                assert_eq!(flow_owner(KEY, (v4(1), port), (v4(2), 80), 4), shard);
            }
        }
    }

    /// An Ethernet frame carrying an IPv4 TCP segment between `a` and `b`.
    fn tcp4(a: (u8, u16), b: (u8, u16), fragment: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 20];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[20..22].copy_from_slice(&fragment.to_be_bytes());
        f[23] = 6;
        f[26..30].copy_from_slice(&[10, 0, 0, a.0]);
        f[30..34].copy_from_slice(&[10, 0, 0, b.0]);
        f[34..36].copy_from_slice(&a.1.to_be_bytes());
        f[36..38].copy_from_slice(&b.1.to_be_bytes());
        f
    }

    #[test]
    fn frames_are_steered_by_their_flow() {
        for port in 40000..40050 {
            let out = tcp4((1, port), (2, 80), 0);
            let back = tcp4((2, 80), (1, port), 0);
            let owner = flow_owner(KEY, (v4(1), port), (v4(2), 80), 2);
            assert_eq!(steer(KEY, &out, Framing::Ethernet, 2), Steer::Owner(owner));
            assert_eq!(steer(KEY, &back, Framing::Ethernet, 2), Steer::Owner(owner));
            // The same packet on a TUN.
            assert_eq!(steer(KEY, &out[14..], Framing::Ip, 2), Steer::Owner(owner));
        }
        // Fragments go by addresses alone, whatever the bytes where ports would be.
        let a = steer(KEY, &tcp4((1, 1), (2, 2), 0x2000), Framing::Ethernet, 2);
        let b = steer(KEY, &tcp4((1, 3), (2, 4), 0x0010), Framing::Ethernet, 2);
        assert_eq!(a, b);
        // ICMP, ARP and short or unknown frames.
        let mut icmp = tcp4((1, 1), (2, 2), 0);
        icmp[23] = 1;
        assert_eq!(steer(KEY, &icmp, Framing::Ethernet, 2), Steer::Reader);
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        arp[20..22].copy_from_slice(&[0, 1]);
        assert_eq!(steer(KEY, &arp, Framing::Ethernet, 2), Steer::Reader);
        arp[21] = 2;
        assert_eq!(steer(KEY, &arp, Framing::Ethernet, 2), Steer::Everyone);
        for short in [&[][..], &[0x08][..], &tcp4((1, 1), (2, 2), 0)[..30]] {
            assert_eq!(steer(KEY, short, Framing::Ethernet, 2), Steer::Reader);
        }
        // A neighbour advertisement (IPv6, ICMPv6 type 136) reaches every shard.
        let mut na = vec![0u8; 14 + 40 + 24];
        na[12..14].copy_from_slice(&[0x86, 0xdd]);
        na[14] = 0x60;
        na[20] = 58;
        na[54] = 136;
        assert_eq!(steer(KEY, &na, Framing::Ethernet, 2), Steer::Everyone);
        na[54] = 135;
        assert_eq!(steer(KEY, &na, Framing::Ethernet, 2), Steer::Reader);
    }

    /// An ICMP error from `router` (10.0.0.`router`) quoting `frame` (an Ethernet frame
    /// of `tcp4`): type 3 code 4, fragmentation needed.
    fn icmp4_error(router: u8, frame: &[u8], kind: u8) -> Vec<u8> {
        let mut f = tcp4((router, 0), (1, 0), 0);
        f.truncate(14 + 20);
        f[23] = 1;
        f.extend_from_slice(&[kind, 4, 0, 0, 0, 0, 0x05, 0xdc]);
        f.extend_from_slice(&frame[14..14 + 28]);
        f
    }

    #[test]
    fn icmp_errors_go_to_the_owner_of_the_flow_they_quote() {
        for port in 40000..40050 {
            let owner = flow_owner(KEY, (v4(1), port), (v4(2), 80), 2);
            let sent = tcp4((1, port), (2, 80), 0);
            for kind in [3, 4, 11, 12] {
                let error = icmp4_error(9, &sent, kind);
                assert_eq!(
                    steer(KEY, &error, Framing::Ethernet, 2),
                    Steer::Owner(owner)
                );
                assert_eq!(
                    steer(KEY, &error[14..], Framing::Ip, 2),
                    Steer::Owner(owner)
                );
            }
            // Echo requests and replies (8, 0) belong to no flow.
            for kind in [0, 8] {
                let echo = icmp4_error(9, &sent, kind);
                assert_eq!(steer(KEY, &echo, Framing::Ethernet, 2), Steer::Reader);
            }
            // The first fragment of a datagram imp fragmented carries the ports.
            let first = icmp4_error(9, &tcp4((1, port), (2, 80), 0x2000), 3);
            assert_eq!(
                steer(KEY, &first, Framing::Ethernet, 2),
                Steer::Owner(owner)
            );
        }
        // A later fragment, a quote too short for the ports, a quoted ICMP: the reader.
        let later = icmp4_error(9, &tcp4((1, 1), (2, 2), 0x0010), 3);
        assert_eq!(steer(KEY, &later, Framing::Ethernet, 2), Steer::Reader);
        let short = icmp4_error(9, &tcp4((1, 1), (2, 2), 0), 3);
        assert_eq!(
            steer(KEY, &short[..14 + 20 + 8 + 20 + 2], Framing::Ethernet, 2),
            Steer::Reader
        );
        let mut quoted_icmp = tcp4((1, 1), (2, 2), 0);
        quoted_icmp[23] = 1;
        let error = icmp4_error(9, &quoted_icmp, 3);
        assert_eq!(steer(KEY, &error, Framing::Ethernet, 2), Steer::Reader);
        // ICMPv6: a packet too big (2) quoting a TCP segment between fd00::1 and fd00::2.
        let (a, b) = (
            Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
            Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2),
        );
        let mut quoted = vec![0u8; 48];
        quoted[0] = 0x60;
        quoted[6] = 6;
        quoted[8..24].copy_from_slice(&a.octets());
        quoted[24..40].copy_from_slice(&b.octets());
        quoted[40..42].copy_from_slice(&40123u16.to_be_bytes());
        quoted[42..44].copy_from_slice(&443u16.to_be_bytes());
        let mut error = vec![0u8; 40];
        error[0] = 0x60;
        error[6] = 58;
        error.extend_from_slice(&[2, 0, 0, 0, 0, 0, 0x05, 0x00]);
        error.extend_from_slice(&quoted);
        let owner = flow_owner(KEY, (a.into(), 40123), (b.into(), 443), 4);
        assert_eq!(steer(KEY, &error, Framing::Ip, 4), Steer::Owner(owner));
        error[40] = 128; // an echo request
        assert_eq!(steer(KEY, &error, Framing::Ip, 4), Steer::Reader);
    }

    /// Two shards over in-memory queues: a frame read by the shard that does not own
    /// it reaches the owner through its inbox, byte for byte, and the counters say so.
    #[test]
    fn a_frame_read_by_the_wrong_shard_reaches_its_owner() {
        let exchange = Exchange::new(2, Framing::Ethernet, KEY).unwrap();
        let (mut feed, queue0) = impnet_phy::pipe(2048);
        let (_unused, queue1) = impnet_phy::pipe(2048);
        let mut shard0 = ShardDevice::new(queue0, 0, Arc::clone(&exchange));
        let mut shard1 = ShardDevice::new(queue1, 1, Arc::clone(&exchange));
        let port = (40000..)
            .find(|&p| flow_owner(KEY, (v4(1), p), (v4(2), 80), 2) == 1)
            .unwrap();
        let frame = tcp4((1, port), (2, 80), 0);
        assert!(feed.send(Instant::ZERO, &frame).unwrap());
        let mut buf = vec![0u8; 2048];
        assert_eq!(shard0.recv(Instant::ZERO, &mut buf).unwrap(), None);
        assert_eq!(
            shard1.recv(Instant::ZERO, &mut buf).unwrap(),
            Some(frame.len())
        );
        assert_eq!(&buf[..frame.len()], &frame[..]);
        assert_eq!(shard1.recv(Instant::ZERO, &mut buf).unwrap(), None);
        assert_eq!(exchange.stats(0).handed_out, 1);
        assert_eq!(exchange.stats(1).handed_in, 1);
    }
}
