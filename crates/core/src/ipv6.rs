//! IPv6 state kept beside the IPv4 state: each interface's addresses (link-local,
//! static, SLAAC, RFC 4862) with their duplicate address detection, the IPv6 routes
//! (static, on-link prefixes and default routers learnt from router advertisements,
//! RFC 4861 §6.3.4), the neighbour cache (RFC 4861 §7.3, in `nd`) and the path MTU
//! cache (RFC 8201). The packet work is in `stack/ipv6.rs` and `stack/ndp.rs`.

pub(crate) mod mld;
pub(crate) mod nd;

use alloc::vec::Vec;
use core::net::Ipv6Addr;

use impnet_wire::ipv6::{self, Cidr};

use crate::iface::IfaceId;
use crate::time::{Duration, Instant};

/// IPv6 settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6Config {
    /// Hop limit of the packets we originate (RFC 8200; a router advertisement's Cur
    /// Hop Limit replaces it).
    pub hop_limit: u8,
    /// Neighbor solicitations sent to detect a duplicate before an address is used
    /// (RFC 4862 `DupAddrDetectTransmits`, default 1; 0 turns detection off).
    pub dad_transmits: u8,
    /// Take router advertisements: default routers, on-link prefixes, the link MTU and
    /// (with `slaac`) addresses (RFC 4861 §6.3.4). Never on an interface that forwards.
    pub accept_ra: bool,
    /// Form addresses from advertised prefixes (RFC 4862 §5.5.3).
    pub slaac: bool,
    /// Router solicitations sent when IPv6 starts on an interface (RFC 4861
    /// `MAX_RTR_SOLICITATIONS`, 3).
    pub router_solicitations: u8,
    /// Entries the neighbour cache holds at most.
    pub neighbor_entries: usize,
    /// Packets queued per neighbour being resolved (RFC 4861 §7.2.2: at least one).
    pub neighbor_queue: usize,
    /// Paths the path MTU cache remembers.
    pub pmtu_entries: usize,
    /// How long a learnt path MTU holds before the link MTU is tried again (RFC 8201
    /// §4: at least 5 minutes, 10 recommended).
    pub pmtu_timeout: Duration,
}

impl Default for Ipv6Config {
    fn default() -> Self {
        Ipv6Config {
            hop_limit: 64,
            dad_transmits: 1,
            accept_ra: true,
            slaac: true,
            router_solicitations: 3,
            neighbor_entries: 1024,
            neighbor_queue: 3,
            pmtu_entries: 256,
            pmtu_timeout: Duration::from_secs(600),
        }
    }
}

/// RFC 4861 §10: `RETRANS_TIMER`, the default gap between solicitations.
pub(crate) const RETRANS_TIMER: Duration = Duration::from_secs(1);
/// RFC 4861 §10: `RTR_SOLICITATION_INTERVAL`.
pub(crate) const RTR_SOLICITATION_INTERVAL: Duration = Duration::from_secs(4);

/// Where an address stands (RFC 4862 §5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrState {
    /// Being checked for duplicates: not used yet, but its solicited-node group is
    /// joined. `probes` solicitations are still to go, the next at `next`.
    Tentative {
        /// Solicitations still to send.
        probes: u8,
        /// When the next one goes (or, with none left, when the address is ours).
        next: Instant,
    },
    /// In use.
    Preferred,
    /// Still valid but its preferred lifetime ran out: kept for existing connections,
    /// not chosen for new ones.
    Deprecated,
}

/// How an address came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrOrigin {
    /// fe80::/64 with the interface identifier from the MAC (RFC 4862 §5.3).
    LinkLocal,
    /// Given by the application.
    Static,
    /// Formed from a router's prefix (RFC 4862 §5.5.3).
    Slaac,
}

/// One IPv6 address of an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addr6 {
    /// The address and its prefix length.
    pub cidr: Cidr,
    /// Duplicate detection and lifetime state.
    pub state: AddrState,
    /// How it was made.
    pub origin: AddrOrigin,
    /// When it stops being valid (None: never).
    pub valid_until: Option<Instant>,
    /// When it becomes deprecated (None: never).
    pub preferred_until: Option<Instant>,
}

impl Addr6 {
    /// Usable as a source and as a destination we answer for.
    pub(crate) fn usable(&self) -> bool {
        !matches!(self.state, AddrState::Tentative { .. })
    }
}

/// One interface's IPv6 state.
#[derive(Debug, Clone, Default)]
pub(crate) struct Iface6 {
    /// IPv6 runs on this interface (an address was added or `enable_ipv6` called).
    pub(crate) enabled: bool,
    pub(crate) addrs: Vec<Addr6>,
    /// The link MTU for IPv6: the interface's, lowered by an advertised MTU option.
    pub(crate) mtu: Option<usize>,
    /// Router solicitations still to send, and when the next goes.
    pub(crate) solicitations: u8,
    pub(crate) next_solicitation: Option<Instant>,
    /// Router advertisements asked for on this interface (sent while it forwards).
    pub(crate) advertising: Option<Advertising>,
    /// Multicast Listener Discovery: reports owed for the groups below.
    pub(crate) mld: mld::Mld,
}

/// An interface's router advertisement schedule (RFC 4861 §6.2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Advertising {
    /// `MaxRtrAdvInterval`: the longest gap between unsolicited advertisements.
    pub(crate) interval: Duration,
    pub(crate) state: AdvertisingState,
}

/// Where the schedule stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AdvertisingState {
    /// Initial advertisements still to send at the shorter interval.
    pub(crate) initial_left: u8,
    /// When the next unsolicited one goes.
    pub(crate) next: Instant,
}

impl Iface6 {
    /// The address `addr` if it is this interface's (any state).
    pub(crate) fn addr(&self, addr: Ipv6Addr) -> Option<&Addr6> {
        self.addrs.iter().find(|a| a.cidr.address == addr)
    }

    /// The multicast groups the interface listens to: all-nodes and the
    /// solicited-node group of every address, tentative ones included (RFC 4862
    /// §5.4.2).
    pub(crate) fn in_group(&self, group: Ipv6Addr, router: bool) -> bool {
        group == ALL_NODES
            || (router && group == ALL_ROUTERS)
            || self
                .addrs
                .iter()
                .any(|a| ipv6::solicited_node(a.cidr.address) == group)
    }

    /// The groups reported with MLD (RFC 3810 §6: never all-nodes): the
    /// solicited-node group of every address, and all-routers when forwarding.
    pub(crate) fn reported_groups(&self, router: bool) -> Vec<Ipv6Addr> {
        let mut groups: Vec<Ipv6Addr> = Vec::new();
        let solicited = self
            .addrs
            .iter()
            .map(|a| ipv6::solicited_node(a.cidr.address));
        for group in solicited.chain(router.then_some(ALL_ROUTERS)) {
            if !groups.contains(&group) {
                groups.push(group);
            }
        }
        groups
    }

    /// The link-local address, once usable.
    pub(crate) fn link_local(&self) -> Option<Ipv6Addr> {
        self.addrs
            .iter()
            .find(|a| a.origin == AddrOrigin::LinkLocal && a.usable())
            .map(|a| a.cidr.address)
    }

    /// The source address for `dst` (RFC 6724 §5, its first rules): a usable address
    /// of the same scope (link-local for link-local destinations), preferred before
    /// deprecated, longest matching prefix first.
    pub(crate) fn source_for(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        let want_link_local =
            is_link_local(dst) || dst.is_multicast() && (dst.segments()[0] & 0x000f) <= 2;
        self.addrs
            .iter()
            .filter(|a| a.usable() && is_link_local(a.cidr.address) == want_link_local)
            .max_by_key(|a| {
                (
                    a.state == AddrState::Preferred,
                    common_prefix(a.cidr.address, dst),
                )
            })
            .or_else(|| self.addrs.iter().find(|a| a.usable()))
            .map(|a| a.cidr.address)
    }
}

/// ff02::1, every node on the link.
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
/// ff02::2, every router on the link.
pub const ALL_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);
/// ff02::16, where MLDv2 reports go (RFC 3810 §5.2.14).
pub const ALL_MLDV2_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0x16);

/// fe80::/10.
pub(crate) fn is_link_local(addr: Ipv6Addr) -> bool {
    addr.segments()[0] & 0xffc0 == 0xfe80
}

/// Leading bits two addresses share.
fn common_prefix(a: Ipv6Addr, b: Ipv6Addr) -> u32 {
    (a.to_bits() ^ b.to_bits()).leading_zeros()
}

/// Where an IPv6 route came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route6Origin {
    /// The prefix of one of the interface's addresses (on-link).
    Connected,
    /// Added by the application.
    Static,
    /// An on-link prefix from a router advertisement.
    Prefix,
    /// A default router from a router advertisement.
    Router,
}

/// An IPv6 route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route6 {
    /// The destinations it covers.
    pub cidr: Cidr,
    /// The next hop (None: on-link, the destination itself).
    pub gateway: Option<Ipv6Addr>,
    /// The interface it leaves by.
    pub iface: IfaceId,
    /// Where it came from.
    pub origin: Route6Origin,
    /// When it expires (None: never).
    pub until: Option<Instant>,
}

/// The IPv6 routing table: longest prefix first, then static before learnt. Each
/// route counts what was forwarded by it (`count`, `counters`), as IPv4's do.
#[derive(Debug, Clone, Default)]
pub struct Routes6 {
    routes: Vec<Route6>,
    /// By the index of `routes`: kept in step by every change.
    counters: Vec<crate::route::RouteCounters>,
}

impl Routes6 {
    /// Add or replace the route for `cidr` on `iface` from the same origin.
    pub fn insert(&mut self, route: Route6) {
        let cidr = route.cidr.network();
        let route = Route6 { cidr, ..route };
        if let Some(old) = self.routes.iter_mut().find(|r| {
            r.cidr == cidr
                && r.iface == route.iface
                && r.origin == route.origin
                && r.gateway == route.gateway
        }) {
            *old = route;
        } else {
            self.routes.push(route);
            self.counters.push(crate::route::RouteCounters::default());
        }
    }

    /// Add a static route (gateway None: on-link).
    pub fn add(&mut self, cidr: Cidr, gateway: Option<Ipv6Addr>, iface: IfaceId) {
        self.insert(Route6 {
            cidr,
            gateway,
            iface,
            origin: Route6Origin::Static,
            until: None,
        });
    }

    /// Remove every route matching `keep == false`.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&Route6) -> bool) {
        let mut index = 0;
        while index < self.routes.len() {
            if keep(&self.routes[index]) {
                index += 1;
            } else {
                self.routes.remove(index);
                self.counters.remove(index);
            }
        }
    }

    /// The route for `dst`.
    pub fn lookup(&self, dst: Ipv6Addr) -> Option<Route6> {
        self.lookup_index(dst).map(|(_, route)| route)
    }

    /// The route for `dst` and its index for [`Routes6::count`] (valid until the
    /// table changes).
    pub fn lookup_index(&self, dst: Ipv6Addr) -> Option<(usize, Route6)> {
        self.routes
            .iter()
            .enumerate()
            .filter(|(_, r)| r.cidr.contains(dst))
            .max_by_key(|(_, r)| {
                (
                    r.cidr.prefix_len,
                    r.origin != Route6Origin::Router,
                    r.origin == Route6Origin::Static,
                )
            })
            .map(|(index, route)| (index, *route))
    }

    /// Count a packet of `bytes` forwarded by route `index`.
    pub fn count(&mut self, index: usize, bytes: u64) {
        if let Some(counters) = self.counters.get_mut(index) {
            counters.packets = counters.packets.wrapping_add(1);
            counters.bytes = counters.bytes.wrapping_add(bytes);
        }
    }

    /// Every route with what it forwarded.
    pub fn iter_counted(&self) -> impl Iterator<Item = (&Route6, crate::route::RouteCounters)> {
        self.routes.iter().zip(self.counters.iter().copied())
    }

    /// Every route.
    pub fn iter(&self) -> impl Iterator<Item = &Route6> {
        self.routes.iter()
    }

    /// The earliest expiry.
    pub(crate) fn next_expiry(&self) -> Option<Instant> {
        self.routes.iter().filter_map(|r| r.until).min()
    }
}

/// Learnt path MTUs (RFC 8201), each until it ages out.
#[derive(Debug, Clone, Default)]
pub(crate) struct PmtuCache {
    entries: Vec<(Ipv6Addr, usize, Instant)>,
}

impl PmtuCache {
    /// The path MTU to `dst`, if one was learnt and holds at `now`.
    pub(crate) fn get(&self, now: Instant, dst: Ipv6Addr) -> Option<usize> {
        self.entries
            .iter()
            .find(|(d, _, until)| *d == dst && now < *until)
            .map(|(_, mtu, _)| *mtu)
    }

    /// When the path MTU learnt for `dst` runs out (None: nothing learnt, or it ran
    /// out already), so that a copy of it is not kept longer.
    pub(crate) fn expiry(&self, now: Instant, dst: Ipv6Addr) -> Option<Instant> {
        self.entries
            .iter()
            .find(|(d, _, until)| *d == dst && now < *until)
            .map(|(_, _, until)| *until)
    }

    /// A Packet Too Big for `dst` said `mtu` (at least 1280, RFC 8201 §4); kept only
    /// when lower than what is known. Returns whether it lowered the path MTU.
    pub(crate) fn lower(
        &mut self,
        now: Instant,
        dst: Ipv6Addr,
        mtu: usize,
        config: &Ipv6Config,
    ) -> bool {
        let mtu = mtu.max(ipv6::MIN_MTU);
        let until = now + config.pmtu_timeout;
        if let Some(entry) = self.entries.iter_mut().find(|(d, _, _)| *d == dst) {
            if now < entry.2 && entry.1 <= mtu {
                return false;
            }
            *entry = (dst, mtu, until);
            return true;
        }
        if self.entries.len() >= config.pmtu_entries.max(1) {
            let oldest = self
                .entries
                .iter()
                .enumerate()
                .min_by_key(|(_, e)| e.2)
                .map(|(i, _)| i)
                .unwrap_or(0);
            self.entries.swap_remove(oldest);
        }
        self.entries.push((dst, mtu, until));
        true
    }
}

/// The (configuration, neighbour, timer) generations a deadline scan was made at.
pub(crate) type DeadlineKey = (u64, u64, u64);

/// Everything IPv6 the stack keeps.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) config: Ipv6Config,
    /// Per interface, by index.
    pub(crate) ifaces: Vec<Iface6>,
    pub(crate) routes: Routes6,
    pub(crate) neighbors: nd::NeighborCache,
    pub(crate) pmtu: PmtuCache,
    pub(crate) reassembly: crate::reassembly::Reassembler,
    /// Hop limit for what we originate (the configured one, or a router's).
    pub(crate) hop_limit: u8,
    /// Identification for the fragments we send (RFC 7739: not predictable, so
    /// seeded from the stack's secret).
    pub(crate) frag_ident: u32,
    /// Moves on whenever IPv6 timers ran or an interface started IPv6: with the
    /// configuration and neighbour generations, what says that the last scan for
    /// the next deadline still holds.
    pub(crate) timer_epoch: u64,
    /// The last scan for the next deadline (neighbours, routes, addresses), with the
    /// (configuration, neighbour, timer) generations it was made at.
    pub(crate) deadline: core::cell::Cell<Option<(DeadlineKey, Option<Instant>)>>,
}

impl State {
    pub(crate) fn new(
        config: Ipv6Config,
        reassembly: crate::reassembly::ReassemblyConfig,
        ident: u32,
    ) -> State {
        State {
            neighbors: nd::NeighborCache::new(config.neighbor_entries, config.neighbor_queue),
            hop_limit: config.hop_limit,
            config,
            ifaces: Vec::new(),
            routes: Routes6::default(),
            pmtu: PmtuCache::default(),
            reassembly: crate::reassembly::Reassembler::new(reassembly),
            frag_ident: ident,
            timer_epoch: 0,
            deadline: core::cell::Cell::new(None),
        }
    }

    /// The interface's IPv6 state, created on first use.
    pub(crate) fn iface_mut(&mut self, iface: IfaceId) -> &mut Iface6 {
        let index = iface.index();
        if self.ifaces.len() <= index {
            self.ifaces.resize_with(index + 1, Iface6::default);
        }
        &mut self.ifaces[index]
    }

    /// The interface's IPv6 state, if IPv6 runs there.
    pub(crate) fn iface(&self, iface: IfaceId) -> Option<&Iface6> {
        self.ifaces.get(iface.index()).filter(|i| i.enabled)
    }

    /// The interface holding `addr` (usable or not).
    pub(crate) fn owner(&self, addr: Ipv6Addr) -> Option<(IfaceId, &Addr6)> {
        self.ifaces
            .iter()
            .enumerate()
            .find_map(|(i, iface)| iface.addr(addr).map(|a| (IfaceId(i as u32), a)))
    }

    /// True when `addr` is one of our usable addresses.
    pub(crate) fn is_local(&self, addr: Ipv6Addr) -> bool {
        addr == Ipv6Addr::LOCALHOST || self.owner(addr).is_some_and(|(_, a)| a.usable())
    }

    /// Duplicate address detection due at `now` (RFC 4862 §5.4): a tentative address
    /// with probes left owes a Neighbor Solicitation, the next `RETRANS_TIMER` later;
    /// one with none left passed and is preferred from now. Returns the solicitations
    /// to send (interface, target) and how many addresses passed (each a change of the
    /// addresses that routes and sources come from).
    pub(crate) fn dad_due(&mut self, now: Instant) -> (Vec<(IfaceId, Ipv6Addr)>, u64) {
        let mut probes = Vec::new();
        let mut passed = 0;
        for (index, state) in self.ifaces.iter_mut().enumerate() {
            for addr in &mut state.addrs {
                if let AddrState::Tentative { probes: left, next } = addr.state
                    && next <= now
                {
                    if left == 0 {
                        addr.state = AddrState::Preferred;
                        passed += 1;
                    } else {
                        addr.state = AddrState::Tentative {
                            probes: left - 1,
                            next: now + RETRANS_TIMER,
                        };
                        probes.push((IfaceId(index as u32), addr.cidr.address));
                    }
                }
            }
        }
        (probes, passed)
    }

    /// Router solicitations due at `now` (RFC 4861 §6.3.7): the interfaces that owe
    /// one; the next goes `RTR_SOLICITATION_INTERVAL` later while any are left.
    pub(crate) fn solicitations_due(&mut self, now: Instant) -> Vec<IfaceId> {
        let mut due = Vec::new();
        for (index, state) in self.ifaces.iter_mut().enumerate() {
            if let Some(next) = state.next_solicitation
                && next <= now
            {
                state.solicitations = state.solicitations.saturating_sub(1);
                state.next_solicitation =
                    (state.solicitations > 0).then(|| now + RTR_SOLICITATION_INTERVAL);
                due.push(IfaceId(index as u32));
            }
        }
        due
    }

    /// Address lifetimes at `now` (RFC 4862 §5.5.4): a preferred address past its
    /// preferred lifetime is deprecated from now. Returns the addresses past their
    /// valid lifetime (interface, address), for the stack to remove, and how many were
    /// deprecated.
    pub(crate) fn age_addresses(&mut self, now: Instant) -> (Vec<(IfaceId, Ipv6Addr)>, u64) {
        let mut gone = Vec::new();
        let mut deprecated = 0;
        for (index, state) in self.ifaces.iter_mut().enumerate() {
            for addr in &mut state.addrs {
                if addr.state == AddrState::Preferred
                    && addr.preferred_until.is_some_and(|t| t <= now)
                {
                    addr.state = AddrState::Deprecated;
                    deprecated += 1;
                }
                if addr.valid_until.is_some_and(|t| t <= now) {
                    gone.push((IfaceId(index as u32), addr.cidr.address));
                }
            }
        }
        (gone, deprecated)
    }

    /// Drop the learnt routes whose lifetime ran out by `now`; true when any went.
    pub(crate) fn expire_routes(&mut self, now: Instant) -> bool {
        let before = self.routes.iter().count();
        self.routes.retain(|r| r.until.is_none_or(|t| t > now));
        self.routes.iter().count() != before
    }
}
