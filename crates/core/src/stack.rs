//! The stack: interfaces, neighbour cache, routes, IPv4, ICMP, UDP and TCP behind one
//! sans-IO surface.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::net::{IpAddr, Ipv4Addr};

use impnet_wire::ethernet::{self, EtherType};
use impnet_wire::ipv4::Cidr;

use self::tcp::TcpOutput;
use crate::icmp::{IcmpHandle, IcmpRateLimit, IcmpSockets, TokenBucket};
use crate::iface::{IfaceConfig, IfaceId, Interface, RxOffload};
use crate::neighbor::{ArpConfig, NeighborAction, NeighborCache};
use crate::reassembly::{Reassembler, ReassemblyConfig};
use crate::rng::Rng;
use crate::route::Routes;
use crate::secret::Secret;
use crate::socket::BufferPool;
use crate::stats::Stats;
use crate::tcp::{self as tcp_core, Tcp};
use crate::time::Instant;
use crate::udp::{UdpHandle, UdpSockets};

mod accept_any;
pub(crate) mod arp;
mod dhcp;
mod forward;
mod forward_offload;
pub(crate) mod icmp;
pub(crate) mod icmp6;
mod igmp;
pub(crate) mod ip;
pub(crate) mod ipv4;
pub(crate) mod ipv6;
pub(crate) mod loopback;
pub(crate) mod mld;
pub(crate) mod ndp;
pub(crate) mod raw;
mod router6;
pub(crate) mod tcp;
pub(crate) mod udp;

/// Settings for a whole stack.
#[derive(Debug, Clone)]
pub struct StackConfig {
    /// TCP settings.
    pub tcp: tcp_core::TcpConfig,
    /// Neighbour cache (ARP) settings.
    pub arp: ArpConfig,
    /// Fragment reassembly settings.
    pub reassembly: ReassemblyConfig,
    /// Datagrams a UDP (or ICMP echo) socket queues before dropping (default 64).
    pub udp_queue_limit: usize,
    /// Bytes of data a UDP (or ICMP echo) socket queues before dropping (default 256 KiB).
    pub udp_queue_bytes: usize,
    /// Rate limit for ICMP errors we send.
    pub icmp_rate_limit: IcmpRateLimit,
    /// TTL of the datagrams we originate (default 64, RFC 1700).
    pub default_ttl: u8,
    /// Frames waiting for `poll_transmit` before sends fail with `NoBufferSpace`
    /// (default 1024).
    pub tx_queue_limit: usize,
    /// Stack events (UDP, ICMP, neighbour failures) kept for `poll_event`; beyond it
    /// the oldest is dropped for each new one (default 4096). TCP's events have their
    /// own limit, [`TcpConfig::event_limit`](tcp_core::TcpConfig::event_limit).
    pub event_limit: usize,
    /// Emptied packet buffers kept for reuse (default 128): up to this many of at most
    /// 16 KiB, and one for every 16 of them of up to 66 KiB, for forwarded 64 KiB TCP
    /// segments; more are freed.
    pub pool_buffers: usize,
    /// Milliseconds since midnight UT at `Instant` zero, for the IPv4 Timestamp option
    /// (RFC 791). None (the default): stamps are milliseconds of the stack's clock with
    /// the high bit set, as RFC 791 allows for a clock not tied to UT.
    pub ut_offset_ms: Option<u64>,
    /// IPv6: hop limit, duplicate address detection, router advertisements, caches.
    pub ipv6: crate::ipv6::Ipv6Config,
}

impl Default for StackConfig {
    fn default() -> Self {
        StackConfig {
            tcp: tcp_core::TcpConfig::default(),
            arp: ArpConfig::default(),
            reassembly: ReassemblyConfig::default(),
            udp_queue_limit: 64,
            udp_queue_bytes: 256 * 1024,
            icmp_rate_limit: IcmpRateLimit::default(),
            default_ttl: 64,
            tx_queue_limit: 1024,
            event_limit: 4096,
            pool_buffers: 128,
            ut_offset_ms: None,
            ipv6: crate::ipv6::Ipv6Config::default(),
        }
    }
}

/// A frame [`Stack::poll_transmit`] wrote: `buf[..len]` goes out on `iface`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// The interface to send on.
    pub iface: IfaceId,
    /// Length of the frame: an Ethernet frame (header included, no FCS), or on an
    /// IP-level interface ([`Medium::Ip`](crate::Medium)) the IP packet.
    pub len: usize,
}

/// Something an application may want to wake up for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A UDP socket became readable: a datagram or a pending error waits.
    Udp(UdpHandle),
    /// An ICMP echo socket became readable: a reply or a pending error waits.
    Icmp(IcmpHandle),
    /// A raw socket became readable.
    Raw(crate::raw::RawHandle),
    /// A TCP readiness change.
    Tcp(tcp_core::TcpEvent),
    /// ARP resolution of `addr` on `iface` failed after every retry; the packets queued
    /// for it were dropped (their sockets got `HostUnreachable`).
    NeighbourFailed {
        /// The interface.
        iface: IfaceId,
        /// The neighbour that did not answer.
        addr: Ipv4Addr,
    },
    /// The DHCP client of `iface` got, renewed or lost its lease (what the lease
    /// configures is already applied, or removed).
    Dhcp {
        /// The interface.
        iface: IfaceId,
        /// What happened.
        event: crate::dhcp::DhcpEvent,
    },
}

/// A frame waiting in the transmit queue: its Ethernet payload and where it goes.
#[derive(Debug)]
pub(crate) struct Outgoing {
    pub(crate) iface: IfaceId,
    pub(crate) dst_mac: ethernet::Address,
    pub(crate) ethertype: EtherType,
    pub(crate) payload: Vec<u8>,
    /// A forwarded TCP segment larger than the MTU, whole: the payload bytes of each
    /// segment the device is to cut it into (0: a frame that goes as it is).
    pub(crate) gso_size: u16,
}

/// From this many interfaces on, a stack keeps its IPv4 addresses in a sorted set
/// (`Stack::local_v4`) instead of asking each interface.
const LOCAL_SET_MIN_IFACES: usize = 4;

/// A user-space TCP/IP stack: a pure state machine. Bytes and time go in, bytes and
/// deadlines come out. `Stack` is the one API: every socket is a handle, and every call
/// on it is a method here, grouped below by topic.
///
/// # Call order
/// 1. [`Stack::new`], then [`Stack::add_interface`] (and [`Stack::add_address`],
///    [`Stack::routes_mut`]) to set up.
/// 2. Whenever a frame arrives: [`Stack::handle_frame`].
/// 3. After any input or socket call: [`Stack::poll_transmit`] until it returns
///    `None`, sending each frame on its interface; the buffer must hold the largest
///    interface MTU plus 14 bytes.
/// 4. [`Stack::poll_event`] until `None`, waking whoever waits on those sockets.
/// 5. [`Stack::poll_timeout`] says when to call [`Stack::handle_timeout`] next (if no
///    frame arrives first); after it, go to 3.
///
/// # Set up (before the event loop, or between its turns)
/// - [`new`](Stack::new); [`add_interface`](Stack::add_interface),
///   [`ifaces`](Stack::ifaces).
/// - IPv4 addresses and routes: [`add_address`](Stack::add_address),
///   [`remove_address`](Stack::remove_address), [`routes`](Stack::routes),
///   [`routes_mut`](Stack::routes_mut); by DHCP instead:
///   [`dhcp_start`](Stack::dhcp_start), [`dhcp_release`](Stack::dhcp_release),
///   [`dhcp_lease`](Stack::dhcp_lease), [`dns_servers`](Stack::dns_servers).
/// - IPv6: [`enable_ipv6`](Stack::enable_ipv6) first, then
///   [`add_address6`](Stack::add_address6), [`remove_address6`](Stack::remove_address6),
///   [`ipv6_addresses`](Stack::ipv6_addresses), [`routes6`](Stack::routes6),
///   [`routes6_mut`](Stack::routes6_mut); as a router,
///   [`set_router_advertisements`](Stack::set_router_advertisements).
/// - Routing between interfaces: [`set_forwarding`](Stack::set_forwarding),
///   [`forwarding`](Stack::forwarding), [`set_acl`](Stack::set_acl),
///   [`acl`](Stack::acl).
/// - Taking in traffic for any address on an interface:
///   [`set_accept_any`](Stack::set_accept_any), [`accept_any`](Stack::accept_any), then
///   [`tcp_listen_any`](Stack::tcp_listen_any), [`udp_bind_any`](Stack::udp_bind_any),
///   [`udp_recv_from_to`](Stack::udp_recv_from_to),
///   [`udp_send_from`](Stack::udp_send_from).
///
/// # Each turn of the event loop
/// - Input: [`handle_frame`](Stack::handle_frame), then
///   [`handle_timeout`](Stack::handle_timeout) when the deadline passed.
/// - Output: [`poll_transmit`](Stack::poll_transmit) (or
///   [`poll_transmit_gather`](Stack::poll_transmit_gather) with
///   [`gathered_payload`](Stack::gathered_payload) to send a TCP payload without
///   copying it) until `None`; [`poll_event`](Stack::poll_event) until `None`;
///   [`poll_timeout`](Stack::poll_timeout) last, as a later call may move it.
///
/// # TCP
/// - Open: [`tcp_listen`](Stack::tcp_listen) then [`tcp_accept`](Stack::tcp_accept)
///   on each [`Event::Tcp`]; or [`tcp_connect`](Stack::tcp_connect)
///   ([`tcp_connect_with_mss`](Stack::tcp_connect_with_mss) to choose the MSS).
/// - Fast Open (RFC 7413): a client opens with
///   [`tcp_connect_with_data`](Stack::tcp_connect_with_data), or
///   [`tcp_fast_open_data`](Stack::tcp_fast_open_data) after `tcp_connect` and before
///   the next `poll_transmit`; [`tcp_fast_open_syn_room`](Stack::tcp_fast_open_syn_room)
///   says beforehand what the SYN would carry. A server turns it on per listener with
///   [`tcp_set_fast_open`](Stack::tcp_set_fast_open), after `tcp_listen`;
///   [`tcp_set_fast_open_key`](Stack::tcp_set_fast_open_key),
///   [`tcp_set_fast_open_no_cookie`](Stack::tcp_set_fast_open_no_cookie),
///   [`tcp_set_fast_open_client_no_cookie`](Stack::tcp_set_fast_open_client_no_cookie).
/// - Data: [`tcp_send`](Stack::tcp_send), [`tcp_send_vectored`](Stack::tcp_send_vectored),
///   [`tcp_send_owned`](Stack::tcp_send_owned) (no copy); [`tcp_recv`](Stack::tcp_recv),
///   [`tcp_recv_with`](Stack::tcp_recv_with) (no copy); before a write,
///   [`tcp_writable`](Stack::tcp_writable); around it,
///   [`tcp_set_more`](Stack::tcp_set_more) and [`tcp_end_record`](Stack::tcp_end_record).
/// - Options of one socket (on a listener, for the connections it accepts; on a
///   connection, at once; right after `tcp_connect`, for its SYN too):
///   [`tcp_set_option`](Stack::tcp_set_option),
///   [`tcp_set_nodelay`](Stack::tcp_set_nodelay),
///   [`tcp_set_cork`](Stack::tcp_set_cork); of the connections opened from then on:
///   [`tcp_set_timestamps`](Stack::tcp_set_timestamps),
///   [`tcp_set_ecn`](Stack::tcp_set_ecn).
/// - End: [`tcp_shutdown`](Stack::tcp_shutdown) (half-close),
///   [`tcp_close`](Stack::tcp_close), [`tcp_abort`](Stack::tcp_abort).
/// - Look (no side effects): [`tcp_info`](Stack::tcp_info),
///   [`tcp_error`](Stack::tcp_error), [`tcp_readable`](Stack::tcp_readable),
///   [`tcp_send_queued`](Stack::tcp_send_queued),
///   [`tcp_send_progress`](Stack::tcp_send_progress),
///   [`tcp_congestion`](Stack::tcp_congestion),
///   [`tcp_addresses`](Stack::tcp_addresses), [`tcp_listen_addr`](Stack::tcp_listen_addr),
///   [`tcp_handles`](Stack::tcp_handles), [`tcp_config`](Stack::tcp_config); of the
///   whole table: [`tcp_socket_count`](Stack::tcp_socket_count),
///   [`tcp_connection_count`](Stack::tcp_connection_count),
///   [`tcp_timer_count`](Stack::tcp_timer_count), [`tcp_stats`](Stack::tcp_stats).
///
/// # UDP
/// - [`udp_bind`](Stack::udp_bind), [`udp_local_addr`](Stack::udp_local_addr),
///   [`udp_send_to`](Stack::udp_send_to), [`udp_recv_from`](Stack::udp_recv_from) (on
///   each [`Event::Udp`]), [`udp_close`](Stack::udp_close);
///   [`udp_set_dont_fragment`](Stack::udp_set_dont_fragment).
/// - IPv4 multicast: [`udp_join_multicast_v4`](Stack::udp_join_multicast_v4),
///   [`udp_leave_multicast_v4`](Stack::udp_leave_multicast_v4),
///   [`udp_join_source_multicast_v4`](Stack::udp_join_source_multicast_v4),
///   [`udp_leave_source_multicast_v4`](Stack::udp_leave_source_multicast_v4),
///   [`udp_set_multicast_ttl_v4`](Stack::udp_set_multicast_ttl_v4),
///   [`udp_multicast_ttl_v4`](Stack::udp_multicast_ttl_v4),
///   [`udp_set_multicast_loop_v4`](Stack::udp_set_multicast_loop_v4),
///   [`udp_multicast_loop_v4`](Stack::udp_multicast_loop_v4); the groups joined:
///   [`ipv4_multicast_groups`](Stack::ipv4_multicast_groups).
///
/// # ICMP echo and raw sockets
/// - [`icmp_bind`](Stack::icmp_bind), [`icmp_send_echo`](Stack::icmp_send_echo),
///   [`icmp_send_echo_with_options`](Stack::icmp_send_echo_with_options),
///   [`icmp_recv`](Stack::icmp_recv) (on each [`Event::Icmp`]),
///   [`icmp_close`](Stack::icmp_close).
/// - [`raw_bind`](Stack::raw_bind), [`raw_set_hdrincl`](Stack::raw_set_hdrincl),
///   [`raw_send_to`](Stack::raw_send_to), [`raw_recv_from`](Stack::raw_recv_from) (on
///   each [`Event::Raw`]), [`raw_close`](Stack::raw_close).
///
/// # Looking in (any time; no side effects)
/// - Counters: [`stats`](Stack::stats), [`iface_stats`](Stack::iface_stats),
///   [`loopback_stats`](Stack::loopback_stats).
/// - Memory held: [`reassembly_bytes`](Stack::reassembly_bytes),
///   [`cached_bytes`](Stack::cached_bytes).
/// - IPv6 caches: [`ipv6_neighbor`](Stack::ipv6_neighbor),
///   [`path_mtu6`](Stack::path_mtu6).
#[derive(Debug)]
pub struct Stack {
    pub(crate) config: StackConfig,
    pub(crate) rng: Rng,
    pub(crate) ifaces: Vec<Interface>,
    /// Every interface's IPv4 addresses, sorted, once a stack has
    /// [`LOCAL_SET_MIN_IFACES`] interfaces (a router of many links): the "is it ours?"
    /// test of every forwarded datagram then costs a binary search, not a pass over
    /// the interfaces. Empty (and unallocated) below that; rebuilt when addresses change.
    local_v4: Vec<Ipv4Addr>,
    pub(crate) routes: Routes,
    pub(crate) neighbors: NeighborCache,
    pub(crate) reassembly: Reassembler,
    pub(crate) udp: UdpSockets,
    /// Per-source limits of the accept-any interfaces ([`crate::accept_any`]).
    pub(crate) accept_any: crate::accept_any::SourceLimiter,
    pub(crate) icmp: IcmpSockets,
    pub(crate) icmp_limiter: TokenBucket,
    pub(crate) tcp: Tcp,
    /// Frames ready to go, oldest first. Invariant: at most `tx_queue_limit`.
    pub(crate) tx_queue: VecDeque<Outgoing>,
    pub(crate) pool: BufferPool,
    pub(crate) events: VecDeque<Event>,
    pub(crate) stats: Stats,
    /// The last IP identification used.
    pub(crate) ip_ident: u16,
    /// Changes whenever interfaces, their addresses or the routes change: what was
    /// derived from them (the TCP egress cache) is stale once it moves.
    pub(crate) config_generation: u64,
    /// The route, offloads and next-hop MAC of the last TCP segment sent, reused while
    /// segments go to the same peer (see [`self::tcp`]).
    pub(crate) tcp_egress: Option<self::tcp::EgressCache>,
    /// Access control for forwarded datagrams (none: everything is forwarded).
    pub(crate) acl: Option<crate::acl::Acl>,
    /// The last next hop [`Stack::dispatch`] found in the neighbour cache, reused while
    /// nothing it was derived from changed (a router sends flow after flow to it).
    pub(crate) next_hop_cache: Option<self::ipv4::NextHopCache>,
    /// The `gso_size` of the last frame `pop_frame` returned (0: none); see
    /// [`Stack::transmit_gso_size`].
    tx_gso_size: u16,
    /// Packets to our own addresses and 127.0.0.0/8, waiting to be taken in.
    pub(crate) loopback: self::loopback::Loopback,
    /// IPv6 addresses, routes, neighbours and caches.
    pub(crate) v6: crate::ipv6::State,
    /// DHCP clients, one per interface that runs one.
    pub(crate) dhcp: Vec<self::dhcp::DhcpSlot>,
    /// Keys the DHCP clients' transaction ids and jitter (from the secret).
    pub(crate) dhcp_seed: u64,
    /// IPv4 multicast groups and IGMP state, by interface index (grown on the first
    /// join on an interface; see [`self::igmp`]).
    pub(crate) igmp: Vec<crate::igmp::IfaceGroups>,
    /// Raw IPv4 sockets.
    pub(crate) raw: crate::raw::RawSockets,
}

impl Stack {
    /// A stack with no interfaces. `secret` keys every random choice (TCP ISNs,
    /// ephemeral ports, IP identifications, hash keys): same secret, same bytes. It must
    /// come from the operating system's random source unless the stack is meant to be
    /// reproducible (see [`Secret`]).
    pub fn new(config: StackConfig, secret: Secret) -> Stack {
        let mut rng = Rng::new(secret.derive(b"stack rng"));
        let ip_ident = rng.next_u16();
        Stack {
            rng,
            ifaces: Vec::new(),
            local_v4: Vec::new(),
            routes: Routes::new(),
            neighbors: NeighborCache::new(config.arp.clone()),
            reassembly: Reassembler::new(config.reassembly.clone()),
            udp: UdpSockets::default(),
            accept_any: crate::accept_any::SourceLimiter::default(),
            icmp: IcmpSockets::default(),
            icmp_limiter: TokenBucket::new(config.icmp_rate_limit),
            tcp: Tcp::new(config.tcp.clone(), &secret),
            tx_queue: VecDeque::new(),
            pool: BufferPool::new(config.pool_buffers),
            events: VecDeque::new(),
            stats: Stats::default(),
            ip_ident,
            config_generation: 0,
            tcp_egress: None,
            acl: None,
            next_hop_cache: None,
            tx_gso_size: 0,
            loopback: self::loopback::Loopback::default(),
            v6: crate::ipv6::State::new(config.ipv6.clone(), config.reassembly.clone(), {
                let mut rng6 = Rng::new(secret.derive(b"ipv6 fragment ident"));
                u32::from(rng6.next_u16()) << 16 | u32::from(rng6.next_u16())
            }),
            dhcp: Vec::new(),
            dhcp_seed: secret.derive(b"dhcp client"),
            igmp: Vec::new(),
            raw: crate::raw::RawSockets::default(),
            config,
        }
    }

    /// Add an interface; its addresses get connected routes and gratuitous ARPs.
    pub fn add_interface(&mut self, config: IfaceConfig) -> IfaceId {
        let id = IfaceId(u32::try_from(self.ifaces.len()).expect("fewer than 2^32 interfaces"));
        self.config_generation += 1;
        let addrs = config.addrs.clone();
        self.ifaces.push(Interface::new(IfaceConfig {
            addrs: Vec::new(),
            ..config
        }));
        // The set starts at the interface that reaches the threshold (if it has no
        // address of its own, those of the others).
        if self.ifaces.len() == LOCAL_SET_MIN_IFACES {
            self.index_local_addrs();
        }
        for cidr in addrs {
            self.add_address(Instant::from_nanos(0), id, cidr);
        }
        id
    }

    /// Assign `cidr` to `iface`: adds the connected route and queues a gratuitous ARP
    /// announcement (RFC 5227 §2.3) so neighbours update stale caches.
    ///
    /// # Panics
    /// If `iface` was not returned by this stack's `add_interface`.
    pub fn add_address(&mut self, now: Instant, iface: IfaceId, cidr: Cidr) {
        let _ = now;
        self.config_generation += 1;
        let interface = &mut self.ifaces[iface.index()];
        if !interface.addrs.contains(&cidr) {
            interface.addrs.push(cidr);
        }
        if self.ifaces.len() >= LOCAL_SET_MIN_IFACES
            && let Err(at) = self.local_v4.binary_search(&cidr.address)
        {
            self.local_v4.insert(at, cidr.address);
        }
        self.routes.add(cidr, None, iface);
        self.send_arp_announcement(iface, cidr.address);
    }

    /// Remove `cidr` from `iface` and its connected route.
    pub fn remove_address(&mut self, iface: IfaceId, cidr: Cidr) {
        self.config_generation += 1;
        if let Some(interface) = self.ifaces.get_mut(iface.index()) {
            interface.addrs.retain(|c| *c != cidr);
            self.routes.remove_connected(cidr, iface);
        }
        self.index_local_addrs();
    }

    /// Rebuilds `local_v4` from the interfaces (see the field): when it starts, and
    /// when an address goes (another interface may still have it). An added address is
    /// inserted in place (a router of thousands of links is built without a rebuild per
    /// link).
    fn index_local_addrs(&mut self) {
        self.local_v4.clear();
        if self.ifaces.len() < LOCAL_SET_MIN_IFACES {
            return;
        }
        let addrs = self.ifaces.iter().flat_map(|i| i.addrs.iter());
        self.local_v4.extend(addrs.map(|c| c.address));
        self.local_v4.sort_unstable();
        self.local_v4.dedup();
    }

    /// The routing table.
    pub fn routes_mut(&mut self) -> &mut Routes {
        self.config_generation += 1;
        &mut self.routes
    }

    /// The routing table, read-only.
    pub fn routes(&self) -> &Routes {
        &self.routes
    }

    /// Counters for every layer.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// True when `addr` is assigned to any interface (RFC 1122 §3.3.4.2 weak host
    /// model: a datagram for any of our addresses is ours, whatever interface it
    /// arrived on), or is in 127.0.0.0/8, the loopback interface's (all of it, as on
    /// Linux).
    pub(crate) fn is_local_addr(&self, addr: Ipv4Addr) -> bool {
        if self::loopback::is_loopback_addr(addr) {
            return true;
        }
        if self.ifaces.len() < LOCAL_SET_MIN_IFACES {
            return self.ifaces.iter().any(|i| i.has_addr(addr));
        }
        self.local_v4.binary_search(&addr).is_ok()
    }

    /// Queue an event; at `StackConfig::event_limit` the oldest goes (events are
    /// wake-up hints, and the socket calls report the state itself).
    pub(crate) fn push_event(&mut self, event: Event) {
        if self.events.len() >= self.config.event_limit && self.events.pop_front().is_none() {
            return;
        }
        self.events.push_back(event);
    }

    /// Put a frame on the transmit queue.
    pub(crate) fn enqueue_frame(
        &mut self,
        frame: Outgoing,
    ) -> Result<(), crate::stack::ip::OutputError> {
        if self.tx_queue.len() >= self.config.tx_queue_limit {
            self.stats.link.tx_queue_full += 1;
            self.pool.give(frame.payload);
            return Err(crate::stack::ip::OutputError::QueueFull);
        }
        self.tx_queue.push_back(frame);
        Ok(())
    }

    /// A frame arrived on `iface`. Any bytes at all are safe: what is malformed is
    /// counted and dropped.
    pub fn handle_frame(&mut self, now: Instant, iface: IfaceId, frame: &[u8]) {
        self.take_frame(now, iface, frame, RxOffload::NONE);
    }

    /// As [`Stack::handle_frame`], for a frame its device says more about (`rx`: a
    /// large TCP segment's segment size, a partial checksum), which forwarding keeps.
    pub fn handle_frame_offloaded(
        &mut self,
        now: Instant,
        iface: IfaceId,
        frame: &[u8],
        rx: RxOffload,
    ) {
        self.take_frame(now, iface, frame, rx);
    }

    /// The body of [`Stack::handle_frame`] and [`Stack::handle_frame_offloaded`],
    /// inlined into each: a frame costs no call more than before offloads came in.
    #[inline(always)]
    fn take_frame(&mut self, now: Instant, iface: IfaceId, frame: &[u8], rx: RxOffload) {
        self.stats.link.rx_frames += 1;
        let Some(interface) = self.ifaces.get_mut(iface.index()) else {
            self.stats.link.rx_unknown_interface += 1;
            return;
        };
        interface.stats.rx_frames += 1;
        interface.stats.rx_bytes += frame.len() as u64;
        if interface.is_ip_level() {
            return self.handle_ip_packet(now, iface, frame, rx);
        }
        let Ok(view) = ethernet::Frame::new_checked(frame) else {
            self.stats.link.rx_truncated += 1;
            return;
        };
        let dst = view.dst_addr();
        if dst != interface.mac && !dst.is_broadcast() && !dst.is_multicast() {
            self.stats.link.rx_not_for_us += 1;
            return;
        }
        if !self.mld_accepts(iface, dst) {
            self.stats.ipv6.rx_multicast_filtered += 1;
            return;
        }
        if !self.igmp_accepts(iface, dst) {
            self.stats.igmp.rx_multicast_filtered += 1;
            return;
        }
        match view.ethertype() {
            EtherType::Arp if !view.is_tagged() => self.handle_arp(now, iface, view.payload()),
            EtherType::Ipv4 if !view.is_tagged() => {
                self.handle_ipv4(
                    now,
                    iface,
                    view.payload(),
                    Some(view.src_addr()),
                    dst.is_broadcast(),
                    rx,
                );
            }
            EtherType::Ipv6 if !view.is_tagged() => {
                self.handle_ipv6(now, iface, view.payload(), Some(view.src_addr()), rx);
            }
            _ => self.stats.link.rx_unknown_ethertype += 1,
        }
    }

    /// An IP packet arrived on an IP-level interface ([`Medium::Ip`](crate::Medium)):
    /// the version nibble picks the protocol. No link layer: no MAC to check, no
    /// neighbour to learn, never a link-layer broadcast.
    fn handle_ip_packet(&mut self, now: Instant, iface: IfaceId, packet: &[u8], rx: RxOffload) {
        match packet.first().map(|b| b >> 4) {
            None => self.stats.link.rx_truncated += 1,
            Some(4) => self.handle_ipv4(now, iface, packet, None, false, rx),
            Some(6) => self.handle_ipv6(now, iface, packet, None, rx),
            Some(_) => self.stats.link.rx_unknown_ethertype += 1,
        }
    }

    /// The next frame to send, written to `buf` (which should hold the largest MTU plus
    /// 14 bytes; a frame that does not fit is dropped and counted). On an IP-level
    /// interface ([`Medium::Ip`](crate::Medium)) the frame is the bare IP packet. Packets the stack
    /// sent to itself (the loopback interface) are taken in here, before `None`; none
    /// of them is returned.
    #[inline]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        // Most calls find nothing (a driver polls until `None`): answer those inline in
        // the caller, without even the register saves of the full function below.
        if self.tx_queue.is_empty() && !self.tcp.may_transmit() && self.loopback.is_empty() {
            return None;
        }
        self.poll_transmit_queued(now, buf)
    }

    /// As [`Stack::poll_transmit`], but a TCP segment whose checksum the device
    /// completes may leave its payload in the connection's send buffer: then
    /// [`Stack::gathered_payload`] gives it, and the frame is `buf[..len - payload]`
    /// followed by it (for a device that sends the pieces in one gather write). `buf`
    /// must still have room for the whole frame.
    pub fn poll_transmit_gather(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.tcp.clear_deferred();
        self.tcp.set_gather(true);
        let transmit = self.poll_transmit(now, buf);
        self.tcp.set_gather(false);
        transmit
    }

    /// When the frame [`Stack::poll_transmit`] last returned is a forwarded TCP
    /// segment larger than the MTU (it arrived so, with [`RxOffload::gso_size`], and
    /// its interface takes TSO): the payload bytes of each segment the device is to
    /// cut it into, which are those the sender chose. None for every other frame (the
    /// stack's own TSO segments are cut at the device's MTU). Valid until the next
    /// `poll_transmit`.
    pub fn transmit_gso_size(&self) -> Option<u16> {
        (self.tx_gso_size != 0).then_some(self.tx_gso_size)
    }

    /// The payload the frame [`Stack::poll_transmit_gather`] last returned left out
    /// (the two parts of a send ring); None when the frame is whole in its buffer.
    /// Valid until the next call that takes `&mut self`.
    pub fn gathered_payload(&self) -> Option<(&[u8], &[u8])> {
        self.tcp.deferred_payload()
    }

    /// [`Stack::poll_transmit`] when a frame or a TCP connection waits: a queued frame
    /// first (kept apart from TCP's larger function, whose set-up a router's every
    /// frame would otherwise pay), then TCP.
    #[inline(never)]
    fn poll_transmit_queued(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.tx_gso_size = 0;
        if let Some(transmit) = self.pop_frame(buf) {
            return Some(self.count_transmit(transmit));
        }
        self.poll_transmit_tcp_frames(now, buf)
    }

    /// The TCP half of [`Stack::poll_transmit_queued`] (the transmit queue is empty),
    /// and the loopback interface's packets, taken in when TCP has nothing more (at
    /// most `LOOPBACK_ROUNDS` rounds; the rest is due at once, see `poll_timeout`).
    #[inline(never)]
    fn poll_transmit_tcp_frames(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let mut rounds = 0;
        let transmit = loop {
            // Most calls find no frame queued: no call to see that.
            if !self.tx_queue.is_empty()
                && let Some(transmit) = self.pop_frame(buf)
            {
                break transmit;
            }
            match self.poll_transmit_tcp(now, buf) {
                TcpOutput::Frame(transmit) => break transmit,
                TcpOutput::Queued => continue,
                TcpOutput::Idle if rounds < self::loopback::LOOPBACK_ROUNDS => {
                    rounds += 1;
                    if !self.run_loopback(now) {
                        return None;
                    }
                }
                TcpOutput::Idle => return None,
            }
        };
        Some(self.count_transmit(transmit))
    }

    /// Count a frame leaving on its interface.
    #[inline]
    fn count_transmit(&mut self, transmit: Transmit) -> Transmit {
        if let Some(interface) = self.ifaces.get_mut(transmit.iface.index()) {
            interface.stats.tx_frames += 1;
            interface.stats.tx_bytes += transmit.len as u64;
        }
        transmit
    }

    /// Write the oldest queued frame into `buf`.
    fn pop_frame(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        while let Some(frame) = self.tx_queue.pop_front() {
            let Some(interface) = self.ifaces.get(frame.iface.index()) else {
                // A looped packet the driver carries (`set_loopback_by_driver`).
                if frame.iface == IfaceId::LOOPBACK
                    && let Some(transmit) = self.pop_looped(frame, buf)
                {
                    return Some(transmit);
                }
                continue;
            };
            let link_header = if interface.is_ip_level() {
                0
            } else {
                ethernet::HEADER_LEN
            };
            let len = link_header + frame.payload.len();
            if buf.len() < len {
                self.stats.link.tx_buffer_too_small += 1;
                self.pool.give(frame.payload);
                continue;
            }
            if link_header != 0 {
                let repr = ethernet::Repr {
                    src: interface.mac,
                    dst: frame.dst_mac,
                    ethertype: frame.ethertype,
                    vlan: None,
                };
                repr.emit(&mut ethernet::Frame::new_unchecked(&mut buf[..len]));
            }
            crate::tcp::buffer::copy_bytes(&mut buf[link_header..len], &frame.payload);
            self.pool.give(frame.payload);
            self.stats.link.tx_frames += 1;
            self.tx_gso_size = frame.gso_size;
            return Some(Transmit {
                iface: frame.iface,
                len,
            });
        }
        None
    }

    /// The earliest time [`Stack::handle_timeout`] must run: ARP retries, reassembly
    /// deadlines, TCP timers, and looped packets a `poll_transmit` left (due when they
    /// were looped). `None` when nothing is pending.
    #[inline]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let earliest = Instant::earliest;
        let next = earliest(self.tcp.poll_timeout(), self.neighbors.poll_timeout());
        let next = earliest(next, self.loopback.poll_timeout());
        let next = earliest(next, self.poll_timeout_v6());
        let next = earliest(next, self.dhcp_poll_timeout());
        let next = earliest(next, self.poll_timeout_igmp());
        earliest(next, self.reassembly.poll_timeout())
    }

    /// Fire every timer due at `now` (and take in a round of looped packets).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.run_loopback(now);
        let mut actions = Vec::new();
        self.neighbors.handle_timeout(now, &mut actions);
        for action in actions {
            match action {
                NeighborAction::Request { iface, addr } => self.send_arp_request(iface, addr),
                NeighborAction::Failed {
                    iface,
                    addr,
                    dropped,
                } => self.on_neighbor_failed(now, iface, addr, dropped),
            }
        }
        let mut expired = Vec::new();
        self.reassembly
            .handle_timeout(now, &mut self.stats.reassembly, &mut expired);
        for datagram in expired {
            if let (Some(quote), IpAddr::V4(src), IpAddr::V4(dst)) =
                (datagram.quote, datagram.src, datagram.dst)
            {
                self.send_reassembly_timeout(now, src, dst, &quote);
            }
        }
        self.handle_timeout_v6(now);
        self.dhcp_handle_timeout(now);
        self.run_igmp(now);
        self.tcp.handle_timeout(now);
    }

    /// The next readiness change, oldest first.
    pub fn poll_event(&mut self) -> Option<Event> {
        if let Some(event) = self.events.pop_front() {
            return Some(event);
        }
        self.tcp.poll_event().map(Event::Tcp)
    }

    /// Bytes fragment reassembly holds right now (always within its configured bound).
    pub fn reassembly_bytes(&self) -> usize {
        self.reassembly.accounted()
    }

    /// Bytes of memory kept for reuse rather than freed, all bounded: the packet-buffer
    /// pool and TCP's spare ring storage ([`Tcp::cached_bytes`](crate::tcp::Tcp::cached_bytes)).
    /// A leak check subtracts it from what the allocator counts.
    pub fn cached_bytes(&self) -> usize {
        self.pool.cached_bytes() + self.tcp.cached_bytes()
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_accept_any;
#[cfg(test)]
mod tests_dhcp;
#[cfg(test)]
mod tests_forward;
#[cfg(test)]
mod tests_forward6;
#[cfg(test)]
mod tests_forward_offload;
#[cfg(test)]
mod tests_icmp6;
#[cfg(test)]
mod tests_igmp;
#[cfg(test)]
mod tests_ip_level;
#[cfg(test)]
mod tests_ipv6;
#[cfg(test)]
mod tests_loopback;
#[cfg(test)]
mod tests_misuse;
#[cfg(test)]
mod tests_mld;
#[cfg(test)]
mod tests_raw;
#[cfg(test)]
mod tests_tcp6_output;
#[cfg(test)]
mod tests_udp6;
#[cfg(test)]
mod tests_zero_copy;
