//! The socket table: generational handles, 4-tuple demultiplexing, listeners, ephemeral
//! ports, the output queue and the timer set.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;
use core::net::{IpAddr, SocketAddr};

use impnet_wire::tcp::{Flags, Options, Repr};

use super::challenge::challenge_rng;
use super::conn::{Conn, Ctx, Owner, Parked};
use super::conn::{DEFAULT_MSS, our_wscale};
use super::cookie::{CookieJar, CookieSynAck, decode_ts, encode_ts};
use super::deadlines::Deadlines;
use super::demux::ConnMap;
use super::ecn;
use super::fastopen::{CookieKey, ListenFastOpen, ServerVerdict};
use super::isn::IsnGenerator;
use super::listen::{ListenDisposition, Listener};
use super::segment::{Reset, tsval};
use super::seq::SeqNumber;
use super::shared::Shared;
use super::slab::Slab;
use super::socket_options::SocketOption;
use super::state::{Closed, State};
use super::time_wait::{PARKED, TimeWaits};
use super::{
    Ecn, EcnMode, Egress, MtuProbing, TcpConfig, TcpError, TcpEvent, TcpHandle, TcpInfo, TcpStats,
    TcpTransmit,
};
use crate::rng::splitmix64_mix;
use crate::secret::Secret;
use crate::time::{Duration, Instant};

/// RFC 6056 §2.1: the IANA ephemeral range, 49152-65535.
/// The key of the catch-all listener: port 0 of `[::]`, which no `listen` can take.
const CATCH_ALL: SocketAddr = SocketAddr::new(IpAddr::V6(core::net::Ipv6Addr::UNSPECIFIED), 0);

const EPHEMERAL_MIN: u16 = 49152;
/// TIME-WAIT connections looked at, oldest first, for one to end when the table is
/// full (those the application still holds are skipped).
const TIME_WAIT_SCAN: usize = 8;
/// Slot storage kept however empty the table gets.
const MIN_SLOTS: usize = 16;
const EPHEMERAL_COUNT: u32 = 65536 - EPHEMERAL_MIN as u32;

/// A listener or a connection. The connection lives in the slot itself, not behind a
/// `Box`: one allocation less per connection (W3 churn), and one pointer less to chase
/// per segment with many connections (W4: the slot is the cache line the demux lookup
/// leads to). The slots are in a [`Slab`], which grows by small chunks: a `Vec` would
/// hold a third more than it uses on average.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
enum Socket {
    Listener(Listener),
    Conn(Conn),
}

/// One entry of the table; the generation changes every time the slot is reused.
#[derive(Debug, Default)]
struct Slot {
    generation: u32,
    socket: Option<Socket>,
}

/// [`Tcp::sync_conn`] for a connection that is not CLOSED and not a listener's child
/// (`Owner::Pending`): then no release, accept-queue or demux change can be due, and
/// only the deadline heap and the output queue may need an update. Exactly what
/// `sync_conn` does in that case (`tests_predict::prediction_matches_the_full_path` compares them).
#[inline(always)]
fn sync_open_conn(
    conn: &mut Conn,
    handle: TcpHandle,
    deadlines: &mut Deadlines,
    output_queue: &mut VecDeque<TcpHandle>,
) {
    let next = conn.timers.next();
    if conn.scheduled != next {
        conn.scheduled = next;
        deadlines.set(handle, next, matches!(conn.state, State::TimeWait(_)));
    }
    if !conn.queued && conn.may_send() {
        conn.queued = true;
        output_queue.push_back(handle);
    }
}

/// The connection `handle` names in `slots`, if it names one (not a listener, not a
/// slot reused since).
#[inline]
fn conn_in(slots: &Slab<Slot>, handle: TcpHandle) -> Option<&Conn> {
    match socket_in(slots, handle)? {
        Socket::Conn(c) => Some(c),
        Socket::Listener(_) => None,
    }
}

/// The socket `handle` names in `slots`, if its slot was not reused since.
#[inline]
fn socket_in(slots: &Slab<Slot>, handle: TcpHandle) -> Option<&Socket> {
    let slot = slots.get(handle.index as usize)?;
    slot.socket
        .as_ref()
        .filter(|_| slot.generation == handle.generation)
}

/// The listener `handle` names in `slots`, if it names one.
fn listener_in(slots: &Slab<Slot>, handle: TcpHandle) -> Option<&Listener> {
    match socket_in(slots, handle)? {
        Socket::Listener(l) => Some(l),
        Socket::Conn(_) => None,
    }
}

/// The handle of the connection in slot `index` if its (local, remote) is `tuple`: what
/// the demultiplexing table asks of each candidate (compared in place, not copied out).
#[inline]
fn matching(
    (slots, time_waits): (&Slab<Slot>, &TimeWaits),
    index: u32,
    (local, remote): &super::FourTuple,
) -> Option<TcpHandle> {
    if index & PARKED != 0 {
        return matching_parked(time_waits, index, (local, remote));
    }
    let slot = slots.get(index as usize)?;
    match slot.socket.as_ref()? {
        Socket::Conn(c) if c.ends.is(local, remote) => Some(TcpHandle {
            index,
            generation: slot.generation,
        }),
        _ => None,
    }
}

/// [`matching`] for a parked TIME-WAIT record's index (out of line: rare).
#[cold]
#[inline(never)]
fn matching_parked(
    time_waits: &TimeWaits,
    index: u32,
    (local, remote): (&SocketAddr, &SocketAddr),
) -> Option<TcpHandle> {
    let (handle, record) = time_waits.handle_at(index)?;
    record.ends.is(local, remote).then_some(handle)
}

/// Whether the SYN `seg` may reopen a TIME-WAIT connection with TS.Recent `ts_recent`
/// and RCV.NXT `rcv_nxt` (RFC 6191: a newer timestamp; without timestamps, RFC 1122
/// §4.2.2.13: a sequence number above RCV.NXT).
fn reopens(ts_recent: Option<u32>, rcv_nxt: SeqNumber, seg: &Repr<'_>) -> bool {
    match (ts_recent, seg.options.timestamps) {
        (Some(recent), Some((tsval, _))) => (tsval.wrapping_sub(recent) as i32) > 0,
        (Some(_), None) => false,
        (None, _) => SeqNumber(seg.seq) > rcv_nxt,
    }
}

/// The handle the connection in slot `handle` is known by: the one it had before it
/// was parked, if it is the connection `unparked` last (`Tcp::unparked`).
#[inline]
fn named(unparked: Option<(TcpHandle, TcpHandle)>, handle: TcpHandle) -> TcpHandle {
    match unparked {
        Some((slot, first)) if slot == handle => first,
        _ => handle,
    }
}

/// The (local, remote) of the connection `handle` names, if it names one.
#[inline]
fn tuple_of(slots: &Slab<Slot>, handle: TcpHandle) -> Option<super::FourTuple> {
    conn_in(slots, handle).map(|c| c.ends.tuple())
}

/// The handle of the connection in slot `index`, if one is there.
fn conn_handle_at(slots: &Slab<Slot>, index: u32) -> Option<TcpHandle> {
    let slot = slots.get(index as usize)?;
    match slot.socket.as_ref()? {
        Socket::Conn(_) => Some(TcpHandle {
            index,
            generation: slot.generation,
        }),
        Socket::Listener(_) => None,
    }
}

/// All TCP state of one stack. See the module docs for the call order.
#[derive(Debug)]
pub struct Tcp {
    shared: Shared,
    slots: Slab<Slot>,
    /// Free slot indices, to reuse first. Indices at or past `slots.len()` (left when
    /// the table shrank) are stale and skipped: the table only grows once this is
    /// empty, so a stale index never names a slot again.
    free: Vec<u32>,
    /// The generation a slot pushed anew starts at: above that of every slot given
    /// back when the table shrank, so no handle to an old occupant of the index
    /// matches it.
    fresh_generation: u32,
    /// Slots holding a connection (at most `TcpConfig::max_connections`).
    connections: usize,
    conns: ConnMap,
    listeners: BTreeMap<SocketAddr, TcpHandle>,
    /// Each connection's earliest deadline (`Conn::scheduled`).
    deadlines: Deadlines,
    /// TIME-WAIT connections the application closed, parked out of `slots`
    /// (`conn/park.rs`); counted in `connections`.
    time_waits: TimeWaits,
    /// Park them (off only in tests that compare against the connections kept whole).
    park_time_wait: bool,
    /// The connection last unparked: (its slot's handle, the handle it had when
    /// parked), so that parked again its events name the handle they always did.
    unparked: Option<(TcpHandle, TcpHandle)>,
    /// Connections that may have something to send (`Conn::queued` marks those in it),
    /// in the order `poll_transmit` visits them.
    output_queue: VecDeque<TcpHandle>,
    isn: IsnGenerator,
    /// SYN cookies, keyed by the stack's secret.
    cookies: CookieJar,
    /// TCP Fast Open cookies (the server's), keyed by the stack's secret.
    fast_open_key: CookieKey,
    port_key: u64,
    port_counter: u32,
    /// The connection and payload (offset from SND.UNA, length) of the segment
    /// `poll_transmit_with` last wrote without its payload (see `set_gather`).
    pending: Option<(TcpHandle, usize, usize)>,
}

/// The part of `buf` after `headroom` bytes (empty when it has no more).
fn behind(buf: &mut [u8], headroom: usize) -> &mut [u8] {
    let at = headroom.min(buf.len());
    &mut buf[at..]
}

impl Tcp {
    /// A TCP layer with no sockets; `secret` keys ISNs, ephemeral ports and the
    /// 4-tuple hash.
    pub fn new(config: TcpConfig, secret: &Secret) -> Tcp {
        Tcp {
            shared: Shared::new(config, challenge_rng(secret)),
            pending: None,
            slots: Slab::new(),
            free: Vec::new(),
            fresh_generation: 0,
            connections: 0,
            conns: ConnMap::new(secret.derive(b"tcp demux")),
            listeners: BTreeMap::new(),
            deadlines: Deadlines::new(),
            time_waits: TimeWaits::default(),
            park_time_wait: true,
            unparked: None,
            output_queue: VecDeque::new(),
            isn: IsnGenerator::new(secret),
            cookies: CookieJar::new(secret),
            fast_open_key: CookieKey::new(secret),
            port_key: secret.derive(b"tcp ports"),
            port_counter: 0,
        }
    }

    /// Turn the fast paths off (or on again), to compare them with the full paths.
    #[cfg(test)]
    pub(crate) fn set_fast_paths(&mut self, on: bool) {
        self.shared.fast_paths = on;
    }

    /// Keep TIME-WAIT connections whole (false) or park them, to compare the two.
    #[cfg(test)]
    pub(crate) fn set_park_time_wait(&mut self, on: bool) {
        self.park_time_wait = on;
    }

    /// The settings.
    pub fn config(&self) -> &TcpConfig {
        &self.shared.config
    }

    /// See [`crate::Stack::tcp_fast_open_syn_room`].
    pub fn fast_open_syn_room(&self, now: Instant, server: IpAddr, mss: u16) -> Option<usize> {
        let known = self.shared.peers.fast_open.get(server);
        if self.shared.peers.fast_open.no_cookie
            && known.is_none_or(|e| e.off_until.is_none_or(|t| now >= t))
        {
            // No cookie needed: the MSS the server announced last, else ours, bounds it.
            let peer = known.map_or(0, |e| e.mss);
            let mss = if peer == 0 {
                mss
            } else {
                peer.max(DEFAULT_MSS).min(mss)
            };
            return Some(usize::from(
                mss.saturating_sub(super::fastopen::SYN_OPTION_ROOM),
            ));
        }
        known.and_then(|e| e.syn_room(now, mss, DEFAULT_MSS))
    }

    /// See [`crate::Stack::tcp_set_fast_open_client_no_cookie`].
    pub fn set_fast_open_client_no_cookie(&mut self, on: bool) {
        self.shared.peers.fast_open.no_cookie = on;
    }

    /// Offer timestamps (RFC 7323) on connections opened from now on, or not.
    pub fn set_timestamps(&mut self, on: bool) {
        self.shared.config.timestamps = on;
    }

    /// ECN (RFC 3168) for connections opened from now on.
    pub fn set_ecn(&mut self, mode: EcnMode) {
        self.shared.config.ecn = mode;
    }

    /// Path MTU probing for connections opened from now on (see
    /// `Stack::tcp_set_mtu_probing`); None leaves a setting as it is.
    pub fn set_mtu_probing(
        &mut self,
        mode: Option<MtuProbing>,
        base_mss: Option<u16>,
        probe_interval: Option<Duration>,
        probe_threshold: Option<u16>,
    ) {
        let config = &mut self.shared.config;
        if let Some(mode) = mode {
            config.mtu_probing = mode;
            config.black_hole_detection = mode != MtuProbing::Off;
        }
        if let Some(mss) = base_mss {
            config.base_mss = mss.max(48);
        }
        if let Some(interval) = probe_interval {
            config.probe_interval = interval;
        }
        if let Some(threshold) = probe_threshold {
            config.probe_threshold = threshold;
        }
    }

    /// Counters.
    pub fn stats(&self) -> &TcpStats {
        &self.shared.stats
    }

    /// Sockets in the table (listeners, connections, dead handles not yet closed).
    pub fn socket_count(&self) -> usize {
        self.slots.iter().filter(|s| s.socket.is_some()).count() + self.time_waits.len()
    }

    /// Every open socket, listeners (`true`) and connections (`false`), in table order
    /// (for listing them, as `ss` does).
    pub fn handles(&self) -> impl Iterator<Item = (TcpHandle, bool)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(index, slot)| {
                let handle = TcpHandle {
                    index: index as u32,
                    generation: slot.generation,
                };
                match slot.socket.as_ref()? {
                    Socket::Listener(_) => Some((handle, true)),
                    Socket::Conn(_) => Some((handle, false)),
                }
            })
            .chain(self.time_waits.handles().map(|handle| (handle, false)))
    }

    /// The address a listener listens on (None for connections and stale handles).
    pub fn listen_addr(&self, handle: TcpHandle) -> Option<SocketAddr> {
        self.listeners
            .iter()
            .find_map(|(addr, h)| (*h == handle).then_some(*addr))
    }

    /// Connections in the table, in any state (at most
    /// [`TcpConfig::max_connections`]); listeners are not counted.
    pub fn connection_count(&self) -> usize {
        self.connections
    }

    /// Slots the table's storage holds.
    #[cfg(test)]
    pub(crate) fn slot_capacity(&self) -> usize {
        self.slots.capacity()
    }

    /// Ring storages kept for reuse: (small, large).
    #[cfg(test)]
    pub(crate) fn spare_ring_counts(&self) -> (usize, usize) {
        (
            self.shared.pool.spare.len(),
            self.shared.pool.large_spare.len(),
        )
    }

    /// HyStart++ boxes kept for reuse.
    #[cfg(test)]
    pub(crate) fn spare_rounds_count(&self) -> usize {
        self.shared.pool.spare_rounds.len()
    }

    /// Connections with a timer running.
    pub fn timer_count(&self) -> usize {
        self.deadlines.len() + self.time_waits.len()
    }

    /// Whether one more connection fits under [`TcpConfig::max_connections`], making
    /// room if need be by ending the TIME-WAIT connection nearest its end among the
    /// first few queued that the application has closed (as Linux skips TIME-WAIT
    /// beyond `tcp_max_tw_buckets`).
    fn make_room(&mut self) -> bool {
        if self.connections < self.shared.config.max_connections {
            return true;
        }
        if let Some((_, oldest)) = self.time_waits.first() {
            self.forget_parked(oldest);
            self.shared.stats.time_wait_recycled += 1;
            return true;
        }
        let victim = self.deadlines.queued_first(TIME_WAIT_SCAN).find(|&h| {
            self.conn_ref(h).is_some_and(|c| {
                c.owner == Owner::Released && matches!(c.state, State::TimeWait(_))
            })
        });
        let Some(victim) = victim else {
            return false;
        };
        self.release(victim);
        self.shared.stats.time_wait_recycled += 1;
        true
    }

    /// Bytes of ring storage (and RACK's and HyStart++'s state) kept from connections
    /// that ended, for the next ones to reuse (bounded by `TcpConfig::spare_rings` and `large_spare_rings`). A leak check
    /// subtracts it: the cache fills and drains with the traffic, and is no leak.
    pub fn cached_bytes(&self) -> usize {
        let shared = &self.shared;
        shared
            .pool
            .spare
            .iter()
            .chain(&shared.pool.large_spare)
            .map(alloc::vec::Vec::capacity)
            .sum::<usize>()
            + shared
                .pool
                .spare_racks
                .iter()
                .map(|rack| rack.heap_bytes())
                .sum::<usize>()
            + shared.pool.spare_rounds.len() * core::mem::size_of::<super::cc::hystart::Rounds>()
    }

    fn insert(&mut self, socket: Socket) -> TcpHandle {
        if matches!(socket, Socket::Conn(_)) {
            self.connections += 1;
        }
        while let Some(index) = self.free.pop() {
            if index as usize >= self.slots.len() {
                continue;
            }
            let slot = &mut self.slots[index as usize];
            slot.socket = Some(socket);
            return TcpHandle {
                index,
                generation: slot.generation,
            };
        }
        let slot = self.slots.push_default();
        slot.generation = self.fresh_generation;
        slot.socket = Some(socket);
        TcpHandle {
            index: (self.slots.len() - 1) as u32,
            generation: self.fresh_generation,
        }
    }

    fn socket_mut(&mut self, handle: TcpHandle) -> Option<&mut Socket> {
        let slot = self.slots.get_mut(handle.index as usize)?;
        if slot.generation != handle.generation {
            return None;
        }
        slot.socket.as_mut()
    }

    fn conn_mut(&mut self, handle: TcpHandle) -> Option<&mut Conn> {
        match self.socket_mut(handle)? {
            Socket::Conn(c) => Some(c),
            Socket::Listener(_) => None,
        }
    }

    fn remove(&mut self, handle: TcpHandle) {
        let slot = &mut self.slots[handle.index as usize];
        if matches!(slot.socket, Some(Socket::Conn(_))) {
            self.connections -= 1;
        }
        // Dropped where it lies (`take` would move the kilobyte out first).
        slot.socket = None;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(handle.index);
        if handle.index as usize + 1 == self.slots.len() {
            self.shrink();
        }
    }

    /// Give back the free slots at the end of the table (a connection is about a
    /// kilobyte, inline in its slot), and the storage of a table at most a quarter
    /// full, so that memory returns after a flood of connections has gone.
    #[cold]
    fn shrink(&mut self) {
        while let Some(slot) = self.slots.last().filter(|s| s.socket.is_none()) {
            self.fresh_generation = self.fresh_generation.max(slot.generation);
            // Its socket is gone already: nothing to drop, nothing to copy over it.
            self.slots.pop_emptied();
        }
        let len = self.slots.len();
        if len * 4 <= self.slots.reserved() && self.slots.reserved() > MIN_SLOTS {
            self.slots.shrink();
            self.free.retain(|&i| (i as usize) < len);
            self.free.shrink_to(len.max(MIN_SLOTS));
            self.conns.shrink_to(2 * self.conns.len());
            self.deadlines.shrink(len);
            self.output_queue.shrink_to(2 * self.output_queue.len());
        }
    }

    /// Listen on `local` (port must be non-zero, else `AddrNotAvailable`; the address
    /// may be unspecified).
    pub fn listen(
        &mut self,
        local: impl Into<SocketAddr>,
        backlog: usize,
    ) -> Result<TcpHandle, TcpError> {
        let local = local.into();
        if local.port() == 0 {
            return Err(TcpError::AddrNotAvailable);
        }
        if self.listeners.contains_key(&local) {
            return Err(TcpError::AddrInUse);
        }
        let handle = self.insert(Socket::Listener(Listener::new(local, backlog)));
        self.listeners.insert(local, handle);
        Ok(handle)
    }

    /// The catch-all listener ([`crate::Stack::tcp_listen_any`]): SYNs for any
    /// address and port no other listener takes; at most `max_half_open` children in
    /// SYN-RECEIVED.
    pub fn listen_any(
        &mut self,
        backlog: usize,
        max_half_open: usize,
    ) -> Result<TcpHandle, TcpError> {
        if self.listeners.contains_key(&CATCH_ALL) {
            return Err(TcpError::AddrInUse);
        }
        let mut listener = Listener::new(CATCH_ALL, backlog);
        listener.max_half_open = Some(max_half_open);
        let handle = self.insert(Socket::Listener(listener));
        self.listeners.insert(CATCH_ALL, handle);
        Ok(handle)
    }

    fn port_free(&self, local: SocketAddr, remote: SocketAddr) -> bool {
        !self.conns.contains(&(local, remote), |i, t| {
            matching((&self.slots, &self.time_waits), i, t)
        }) && !self.listeners.contains_key(&local)
            && !super::wildcards(local)
                .iter()
                .any(|any| self.listeners.contains_key(any))
    }

    /// RFC 6056 §3.3.3 Algorithm 3, "Simple Hash-Based Port Selection": offset =
    /// F(local IP, remote IP, remote port, secret), then scan from it.
    fn ephemeral_port(&mut self, local: IpAddr, remote: SocketAddr) -> Result<u16, TcpError> {
        let key = super::addr_bits(local) << 32 ^ super::addr_bits(remote.ip());
        // A keyed 64-bit mix (SplitMix64's finaliser) of the three.
        let inner = splitmix64_mix(key ^ u64::from(remote.port()) << 17);
        let offset = splitmix64_mix(self.port_key ^ inner) as u32;
        for _ in 0..EPHEMERAL_COUNT {
            let port =
                EPHEMERAL_MIN + (offset.wrapping_add(self.port_counter) % EPHEMERAL_COUNT) as u16;
            self.port_counter = self.port_counter.wrapping_add(1);
            if self.port_free(SocketAddr::new(local, port), remote) {
                return Ok(port);
            }
        }
        Err(TcpError::NoPortsAvailable)
    }

    /// Open a connection from `local` (port 0 picks an ephemeral port) to `remote`,
    /// announcing `mss` (from the route's MTU).
    pub fn connect(
        &mut self,
        now: Instant,
        local: impl Into<SocketAddr>,
        remote: impl Into<SocketAddr>,
        mss: u16,
    ) -> Result<TcpHandle, TcpError> {
        let (local, remote) = (local.into(), remote.into());
        if !self.make_room() {
            return Err(TcpError::TooManyConnections);
        }
        let local = match local.port() {
            0 => SocketAddr::new(local.ip(), self.ephemeral_port(local.ip(), remote)?),
            _ if self.conns.contains(&(local, remote), |i, t| {
                matching((&self.slots, &self.time_waits), i, t)
            }) =>
            {
                return Err(TcpError::AddrInUse);
            }
            _ => local,
        };
        let iss = self.isn.isn(now, local, remote);
        let conn = Conn::connect(
            &self.shared.config,
            &mut self.shared.pool,
            local,
            remote,
            iss,
            mss,
        );
        let handle = self.insert(Socket::Conn(conn));
        self.conns.insert((local, remote), handle, |i, t| {
            matching((&self.slots, &self.time_waits), i, t)
        });
        self.shared.stats.active_opens += 1;
        self.sync_conn(handle);
        Ok(handle)
    }

    /// Take an established connection from a listener's accept queue (`InvalidState`
    /// when `listener` is a connection).
    pub fn accept(&mut self, listener: TcpHandle) -> Result<TcpHandle, TcpError> {
        let l = match self.socket_mut(listener) {
            Some(Socket::Listener(l)) => l,
            Some(Socket::Conn(_)) => return Err(TcpError::InvalidState),
            None => return Err(TcpError::InvalidHandle),
        };
        let child = l.queue.pop_front().ok_or(TcpError::WouldBlock)?;
        let conn = self.conn_mut(child).ok_or(TcpError::InvalidHandle)?;
        conn.owner = Owner::User;
        self.shared.stats.passive_opens += 1;
        Ok(child)
    }

    /// Run `f` on a connection with its context, then bring the table in line with it (`sync_conn`). A stale handle is
    /// `InvalidHandle`, a listener's `InvalidState`.
    /// A parked connection's handle (`time_wait.rs`) names no slot: `InvalidHandle`
    /// here (the application released it); [`Tcp::with_unparked`] takes one.
    #[inline(always)]
    pub(super) fn with_conn<R>(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        f: impl FnOnce(&mut Conn, &mut Ctx<'_>) -> Result<R, TcpError>,
    ) -> Result<R, TcpError> {
        self.with_conn_named(now, (handle, handle), f)
    }

    /// [`Tcp::with_conn`] on the parked connection a segment or ICMP error found:
    /// it comes back whole first, its events naming the handle it had.
    #[cold]
    #[inline(never)]
    fn with_unparked<R>(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        f: impl FnOnce(&mut Conn, &mut Ctx<'_>) -> Result<R, TcpError>,
    ) -> Result<R, TcpError> {
        let new = self.unpark(handle).ok_or(TcpError::InvalidHandle)?;
        self.with_conn_named(now, (new, named(self.unparked, new)), f)
    }

    /// [`Tcp::with_conn`] on slot `handle`, whose events name `name`.
    #[inline(always)]
    fn with_conn_named<R>(
        &mut self,
        now: Instant,
        (handle, name): (TcpHandle, TcpHandle),
        f: impl FnOnce(&mut Conn, &mut Ctx<'_>) -> Result<R, TcpError>,
    ) -> Result<R, TcpError> {
        let slot = self
            .slots
            .get_mut(handle.index as usize)
            .ok_or(TcpError::InvalidHandle)?;
        let conn = match slot
            .socket
            .as_mut()
            .filter(|_| slot.generation == handle.generation)
        {
            Some(Socket::Conn(conn)) => conn,
            Some(Socket::Listener(_)) => return Err(TcpError::InvalidState),
            None => return Err(TcpError::InvalidHandle),
        };
        // Connections in slots: the parked TIME-WAIT ones hold no rings.
        let open = self.connections - self.time_waits.len();
        self.shared.pool.release_rings = open > self.shared.config.release_rings_above;
        let mut ctx = Ctx {
            now,
            handle: name,
            shared: &mut self.shared,
        };
        let result = f(conn, &mut ctx);
        if self.shared.config.send_chronographs {
            conn.update_chronograph(now);
        }
        // The common case, decided on the connection already in hand (no second
        // lookup): still open and not a listener's child, so only the deadline and the
        // output queue can need an update; anything else takes the full `sync_conn`.
        if !self.shared.fast_paths
            || matches!(conn.state, State::Closed(_) | State::TimeWait(_))
            || matches!(conn.owner, Owner::Pending(_))
        {
            self.sync_conn(handle);
        } else {
            sync_open_conn(conn, handle, &mut self.deadlines, &mut self.output_queue);
        }
        result
    }

    /// Copy data into the send buffer; returns how much fit.
    pub fn send(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        data: &[u8],
    ) -> Result<usize, TcpError> {
        self.with_conn(now, handle, |conn, ctx| {
            conn.supply_send_ring(&mut ctx.shared.pool);
            let sent = conn.send(data);
            if ctx.shared.config.segment_per_write {
                conn.end_record();
            }
            sent
        })
    }

    /// Copy several slices into the send buffer in one call (a gather write, as
    /// `writev`): all of them are queued before output runs, so small pieces leave in
    /// one segment. Returns how much fit.
    pub fn send_vectored<'a>(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        slices: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<usize, TcpError> {
        self.with_conn(now, handle, |conn, ctx| {
            conn.supply_send_ring(&mut ctx.shared.pool);
            let sent = conn.send_vectored(slices);
            if ctx.shared.config.segment_per_write {
                conn.end_record();
            }
            sent
        })
    }

    /// Up to `len` bytes that `fill` writes straight into the send buffer (see
    /// `Conn::send_with`): [`Tcp::send`] without the copy. Returns
    /// how much fit.
    pub fn send_with(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        len: usize,
        fill: impl FnMut(&mut [u8]),
    ) -> Result<usize, TcpError> {
        self.with_conn(now, handle, |conn, ctx| {
            conn.supply_send_ring(&mut ctx.shared.pool);
            let sent = conn.send_with(len, fill);
            if ctx.shared.config.segment_per_write {
                conn.end_record();
            }
            sent
        })
    }

    /// Copy received data out; `Ok(0)` means the peer closed (EOF).
    pub fn recv(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        buf: &mut [u8],
    ) -> Result<usize, TcpError> {
        let max = buf.len();
        self.recv_each(now, handle, max, super::copy_into(buf))
    }

    /// Send our FIN after the queued data but keep the handle (half-close): the peer
    /// may go on sending and `recv` keeps working.
    pub fn shutdown_write(&mut self, now: Instant, handle: TcpHandle) -> Result<(), TcpError> {
        self.with_conn(now, handle, |conn, _| conn.shutdown_write())
    }

    /// Close gracefully (send FIN after queued data); the handle stays valid until `Closed`.
    /// A listener closes at once, resetting the connections it has not handed out.
    pub fn close(&mut self, now: Instant, handle: TcpHandle) -> Result<(), TcpError> {
        if let Some(Socket::Listener(_)) = self.socket_mut(handle) {
            return self.close_listener(now, handle);
        }
        self.with_conn(now, handle, |conn, ctx| {
            conn.owner = Owner::Released;
            let result = match conn.shutdown_write() {
                Err(TcpError::InvalidState) => Ok(()),
                other => other,
            };
            // Half-closed earlier and already in FIN-WAIT-2: the limit starts now.
            conn.arm_fin_wait_2(ctx.now, &ctx.shared.config);
            result
        })
    }

    fn close_listener(&mut self, now: Instant, handle: TcpHandle) -> Result<(), TcpError> {
        let Some(Socket::Listener(l)) = self.socket_mut(handle) else {
            return Err(TcpError::InvalidHandle);
        };
        let local = l.local;
        let queued: Vec<TcpHandle> = l.queue.drain(..).collect();
        self.listeners.remove(&local);
        self.remove(handle);
        let pending: Vec<TcpHandle> = self
            .conns
            .indices()
            .filter_map(|i| conn_handle_at(&self.slots, i))
            .filter(|&h| matches!(self.conn_ref(h).map(|c| c.owner), Some(Owner::Pending(l)) if l == handle))
            .collect();
        for child in queued.into_iter().chain(pending) {
            if let Some(conn) = self.conn_mut(child) {
                conn.owner = Owner::Released;
            }
            let _ = self.abort(now, child);
        }
        Ok(())
    }

    fn conn_ref(&self, handle: TcpHandle) -> Option<&Conn> {
        conn_in(&self.slots, handle)
    }

    /// Whether `handle`'s RACK state was allocated (`None`: no sending half).
    #[cfg(test)]
    pub(crate) fn rack_allocated(&self, handle: TcpHandle) -> Option<bool> {
        let snd = self.conn_ref(handle)?.state.snd()?;
        Some(snd.rack.is_allocated())
    }

    /// Bytes of ring storage the connection holds: (send ring, receive ring).
    #[cfg(test)]
    pub(crate) fn ring_storage(&self, handle: TcpHandle) -> Option<(usize, usize)> {
        let state = &self.conn_ref(handle)?.state;
        Some((
            state.snd().map_or(0, |snd| snd.buffer.storage()),
            state.recv_buffer().map_or(0, |rcv| rcv.storage()),
        ))
    }

    /// Abort: send RST and release at once.
    pub fn abort(&mut self, now: Instant, handle: TcpHandle) -> Result<(), TcpError> {
        if let Some(Socket::Listener(_)) = self.socket_mut(handle) {
            return self.close_listener(now, handle);
        }
        self.with_conn(now, handle, |conn, ctx| {
            if let Some(reset) = conn.abort_reset(ctx.now) {
                ctx.shared.stats.resets_sent += 1;
                ctx.shared.out.reset(reset);
            }
            conn.owner = Owner::Released;
            ctx.shared.pool.recycle_state(&mut conn.state);
            conn.state = State::Closed(Closed { error: None });
            conn.timers.stop_all();
            Ok(())
        })
    }

    /// Reset a connection from outside its owner (an operator's `imp ss --kill`, as
    /// Linux's `ss -K`): a RST to the peer, and the connection ends with
    /// `ConnectionReset`, which the owner's next call reports (its handle stays its
    /// own until it closes it, unlike [`Tcp::abort`]). A listener is refused.
    pub fn kill(&mut self, now: Instant, handle: TcpHandle) -> Result<(), TcpError> {
        if let Some(Socket::Listener(_)) = self.socket_mut(handle) {
            return Err(TcpError::InvalidState);
        }
        self.with_conn(now, handle, |conn, ctx| {
            if matches!(conn.state, State::Closed(_)) {
                return Err(TcpError::InvalidState);
            }
            if let Some(reset) = conn.abort_reset(ctx.now) {
                ctx.shared.stats.resets_sent += 1;
                ctx.shared.out.reset(reset);
            }
            conn.close_in(ctx, Some(TcpError::ConnectionReset));
            Ok(())
        })
    }

    /// Turn Nagle's algorithm off (true) or on for one connection.
    pub fn set_nodelay(&mut self, handle: TcpHandle, nodelay: bool) -> Result<(), TcpError> {
        let conn = match self.socket_mut(handle) {
            Some(Socket::Conn(conn)) => conn,
            Some(Socket::Listener(_)) => return Err(TcpError::InvalidState),
            None => return Err(TcpError::InvalidHandle),
        };
        conn.nodelay = nodelay;
        if !conn.queued {
            conn.queued = true;
            self.output_queue.push_back(handle);
        }
        Ok(())
    }

    /// Put the cork on (true) or take it off, as Linux's TCP_CORK: while on, only
    /// full-sized segments go (a FIN still pushes the tail); off, what waited goes as
    /// Nagle's algorithm or no-delay allows. A partial segment waits at most
    /// [`CORK_CEILING`](super::CORK_CEILING) (then what was queued goes).
    pub fn set_cork(&mut self, now: Instant, handle: TcpHandle, on: bool) -> Result<(), TcpError> {
        self.with_conn(now, handle, |conn, _| {
            conn.set_cork(on);
            Ok(())
        })
    }

    /// Say whether more data follows what the application writes from now on (Linux's
    /// MSG_MORE, per write): such writes do not end with a push (RFC 9293 §3.9.1.2), so
    /// the segment carrying their end goes without PSH, and a partial segment at their
    /// end waits for the peer's next segment (or the cork's ceiling), as Linux corks
    /// the write only. Writes push by default; `false` also lets what waits go.
    pub fn set_more(&mut self, handle: TcpHandle, more: bool) -> Result<(), TcpError> {
        match self.socket_mut(handle) {
            Some(Socket::Conn(conn)) => {
                conn.more = more;
                if !more && conn.more_held {
                    conn.release_more();
                    if !conn.queued {
                        conn.queued = true;
                        self.output_queue.push_back(handle);
                    }
                }
                Ok(())
            }
            Some(Socket::Listener(_)) => Err(TcpError::InvalidState),
            None => Err(TcpError::InvalidHandle),
        }
    }

    /// End a record at the end of what the application has written so far (Linux's
    /// MSG_EOR, on the write that queued it): no segment carries data from both sides
    /// of that point, new or sent again, so a later write starts a segment of its own.
    /// The boundaries are kept apart from the data, only on connections that use them.
    pub fn end_record(&mut self, handle: TcpHandle) -> Result<(), TcpError> {
        match self.socket_mut(handle) {
            Some(Socket::Conn(conn)) => {
                conn.end_record();
                Ok(())
            }
            Some(Socket::Listener(_)) => Err(TcpError::InvalidState),
            None => Err(TcpError::InvalidHandle),
        }
    }

    /// Set one of a socket's own settings (see [`SocketOption`]): on a listener, for
    /// the children it opens from then on; on a connection, at once.
    pub fn set_option(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        option: SocketOption,
    ) -> Result<(), TcpError> {
        if let Some(Socket::Listener(l)) = self.socket_mut(handle) {
            l.options.get_or_insert_with(Default::default).set(option);
            return Ok(());
        }
        self.with_conn(now, handle, |conn, ctx| {
            conn.set_option(&ctx.shared.config, &mut ctx.shared.pool, option);
            Ok(())
        })
    }

    /// A socket's congestion controller: a connection's own (its controller's once
    /// established), or the one a listener's children start with.
    pub fn congestion(&self, handle: TcpHandle) -> Option<&'static str> {
        let slot = self.slots.get(handle.index as usize)?;
        match slot
            .socket
            .as_ref()
            .filter(|_| slot.generation == handle.generation)?
        {
            Socket::Conn(conn) => Some(conn.info(&self.shared.config).congestion),
            Socket::Listener(l) => Some(
                l.options
                    .as_ref()
                    .and_then(|o| o.congestion)
                    .unwrap_or(self.shared.config.congestion)
                    .name(),
            ),
        }
    }

    /// Whether a write on the connection may be reported as possible: room in the
    /// send buffer and, with `TCP_NOTSENT_LOWAT`, fewer unsent bytes than the limit.
    pub fn writable(&self, handle: TcpHandle) -> bool {
        self.conn_ref(handle).is_some_and(|c| {
            c.below_notsent_lowat()
                && match &c.state {
                    State::SynSent(s) => s.buffer.free() > 0,
                    State::SynRcvd(s) => s.buffer.free() > 0,
                    state => state.snd().is_some_and(|s| s.buffer.free() > 0),
                }
        })
    }

    /// In-order bytes a `recv` on the connection would return now (0 for listeners and
    /// stale handles), so a caller can size (and zero) its buffer to fit.
    pub fn readable(&self, handle: TcpHandle) -> usize {
        self.conn_ref(handle).map_or(0, |c| {
            c.state
                .recv_buffer()
                .map_or(c.unread().len(), super::buffer::RecvBuffer::readable)
        })
    }

    /// Bytes in the connection's send buffer, sent or not, that the peer has not yet
    /// acknowledged (0 for listeners, stale handles and closed sending halves).
    pub fn send_queued(&self, handle: TcpHandle) -> usize {
        self.conn_ref(handle)
            .and_then(|c| c.state.snd())
            .map_or(0, |snd| snd.buffer.len())
    }

    /// Bytes queued, never sent, and the congestion window (None for listeners, stale
    /// handles and connections without a sending half: before the handshake is done,
    /// and once it closed).
    pub fn send_progress(&self, handle: TcpHandle) -> Option<super::SendProgress> {
        let snd = self.conn_ref(handle)?.state.snd()?;
        let queued = snd.buffer.len();
        Some(super::SendProgress {
            queued,
            // SND.MAX - SND.UNA counts a FIN sent too (not in the buffer).
            unsent: queued.saturating_sub(snd.outstanding()),
            cwnd: super::cc::CongestionControl::cwnd(&snd.cc),
        })
    }

    /// Let `poll_transmit_with` leave the payload of plain segments whose checksum the
    /// device completes in the send buffer (only the headers are written, the buffer
    /// must still have room for all): the driver then sends the headers and
    /// [`Tcp::deferred_payload`] in one gather write, saving a copy. Off by default.
    pub fn set_gather(&mut self, on: bool) {
        self.shared.out.gather = on;
    }

    /// The payload the segment `poll_transmit_with` last returned left in the send
    /// buffer (the two parts of the ring): it follows the segment's headers, which end
    /// that many bytes before the returned length. None when the segment holds all.
    pub fn deferred_payload(&self) -> Option<(&[u8], &[u8])> {
        let (handle, at, len) = self.pending?;
        let snd = self.conn_ref(handle)?.state.snd()?;
        snd.buffer.slices(at, len).as_pair()
    }

    /// Copy the deferred payload (if any) into the segment `poll_transmit_with` last
    /// wrote, `segment` holding all of it, so it no longer needs the send buffer.
    pub fn fill_deferred(&mut self, segment: &mut [u8]) {
        if let Some((a, b)) = self.deferred_payload() {
            let start = segment.len() - a.len() - b.len();
            let (first, second) = segment[start..].split_at_mut(a.len());
            first.copy_from_slice(a);
            second.copy_from_slice(b);
        }
        self.pending = None;
    }

    /// Forget the deferred payload.
    pub fn clear_deferred(&mut self) {
        self.pending = None;
    }

    /// A snapshot of a connection (None for listeners and stale handles).
    pub fn info(&self, handle: TcpHandle) -> Option<TcpInfo> {
        if let Some(record) = self.time_waits.get(handle) {
            return Some(Conn::parked_copy(record).info(&self.shared.config));
        }
        Some(self.conn_ref(handle)?.info(&self.shared.config))
    }

    /// TIME-WAIT connections parked out of the slots.
    #[cfg(test)]
    pub(crate) fn parked_count(&self) -> usize {
        self.time_waits.len()
    }

    /// [`Tcp::info`], also for a handle the application released whose connection
    /// waits parked in TIME-WAIT (tests look at it there).
    #[cfg(test)]
    pub(crate) fn info_parked_too(&self, handle: TcpHandle) -> Option<TcpInfo> {
        self.info(handle).or_else(|| {
            if let Some((now, first)) = self.unparked
                && first == handle
                && let Some(info) = self.info(now)
            {
                return Some(info);
            }
            let parked = self.time_waits.handles().find(|&h| {
                self.time_waits
                    .get(h)
                    .is_some_and(|record| record.handle == handle)
            })?;
            self.info(parked)
        })
    }

    /// The error a connection ended with (reset, refused, timed out, an ICMP error);
    /// `None` while it is open, after a clean end, and for a listener. It stays: this
    /// only looks (Linux's `SO_ERROR` clears it; the `impnet` sockets do that).
    pub fn error(&self, handle: TcpHandle) -> Result<Option<TcpError>, TcpError> {
        let slot = self
            .slots
            .get(handle.index as usize)
            .filter(|slot| slot.generation == handle.generation)
            .ok_or(TcpError::InvalidHandle)?;
        match slot.socket.as_ref() {
            Some(Socket::Conn(conn)) => Ok(conn.error()),
            Some(Socket::Listener(_)) => Ok(None),
            None => Err(TcpError::InvalidHandle),
        }
    }

    /// Local and remote address of a connection.
    pub fn addresses(&self, handle: TcpHandle) -> Option<(SocketAddr, SocketAddr)> {
        if let Some(record) = self.time_waits.get(handle) {
            return Some(record.ends.tuple());
        }
        self.conn_ref(handle).map(|c| c.ends.tuple())
    }

    /// Bring the table in line with a connection after anything touched it: its
    /// deadline in the deadline set, its place in the output queue, its 4-tuple entry
    /// and `Closed` event once it closed, its listener's accept queue, its release.
    #[inline(never)]
    fn sync_conn(&mut self, handle: TcpHandle) {
        let park = self.park_time_wait;
        let Some(conn) = self.conn_mut(handle) else {
            return;
        };
        if park && let Some(deadline) = conn.parkable() {
            self.park_now(handle, deadline);
            return;
        }
        let next = conn.timers.next();
        let old = core::mem::replace(&mut conn.scheduled, next);
        let queue = !conn.queued && conn.may_send();
        conn.queued |= queue;
        let owner = conn.owner;
        let closed = matches!(conn.state, State::Closed(_));
        let synchronized = conn.state.synchronized();
        let report = closed && conn.in_demux;
        if closed {
            conn.in_demux = false;
        }
        // Only a connection that just closed leaves the 4-tuple table.
        let tuple = report.then(|| conn.ends.tuple());
        let time_wait = matches!(conn.state, State::TimeWait(_));
        if old != next {
            self.deadlines.set(handle, next, time_wait);
        }
        if queue {
            self.output_queue.push_back(handle);
        }
        if let Some(tuple) = tuple {
            self.conns.remove(&tuple, handle);
            if owner == Owner::User || owner == Owner::Released {
                self.shared.out.event(
                    &mut self.shared.stats,
                    TcpEvent::Closed(named(self.unparked, handle)),
                );
            }
        }
        self.sync_owner(handle, owner, closed, synchronized);
    }

    /// Listener children and released connections.
    fn sync_owner(&mut self, handle: TcpHandle, owner: Owner, closed: bool, synchronized: bool) {
        match owner {
            Owner::Pending(l) if closed || synchronized => {
                if let Some(Socket::Listener(listener)) = self.socket_mut(l) {
                    listener.pending = listener.pending.saturating_sub(1);
                    if !closed {
                        listener.queue.push_back(handle);
                        self.shared
                            .out
                            .event(&mut self.shared.stats, TcpEvent::Readable(l));
                    }
                }
                if let Some(conn) = self.conn_mut(handle) {
                    conn.owner = Owner::Queued(l);
                }
                if closed {
                    self.release(handle);
                }
            }
            Owner::Queued(l) if closed => {
                // Under `reset_keeps_data` (Linux) a reset child stays queued: `accept`
                // returns it, its data and then the reset.
                if self.shared.config.reset_keeps_data
                    && self.conn_mut(handle).is_some_and(|c| {
                        matches!(
                            c.state,
                            State::Closed(Closed {
                                error: Some(TcpError::ConnectionReset)
                            })
                        )
                    })
                {
                    return;
                }
                if let Some(Socket::Listener(listener)) = self.socket_mut(l) {
                    listener.queue.retain(|&h| h != handle);
                }
                self.release(handle);
            }
            Owner::Released if closed => self.release(handle),
            _ => {}
        }
    }

    /// Drop a connection for good (it is CLOSED and no one holds it).
    fn release(&mut self, handle: TcpHandle) {
        let Some(conn) = self.conn_mut(handle) else {
            return;
        };
        let scheduled = conn.scheduled.take();
        let tuple = conn.ends.tuple();
        if scheduled.is_some() {
            self.deadlines.set(handle, None, false);
        }
        self.conns.remove(&tuple, handle);
        self.remove(handle);
    }

    /// Park the connection `handle` if it is a TIME-WAIT one the application closed
    /// and owes nothing (`conn/park.rs`): its slot is freed, its record takes its
    /// 4-tuple entry. Whether it was parked.
    fn park(&mut self, handle: TcpHandle) -> bool {
        if !self.park_time_wait {
            return false;
        }
        let Some(conn) = self.conn_mut(handle) else {
            return false;
        };
        let Some(deadline) = conn.parkable() else {
            return false;
        };
        self.park_now(handle, deadline);
        true
    }

    /// [`Tcp::park`] once it is decided (out of line: once per connection at most).
    #[inline(never)]
    fn park_now(&mut self, handle: TcpHandle, deadline: Instant) {
        let first = named(self.unparked, handle);
        let Some(conn) = self.conn_mut(handle) else {
            return;
        };
        let record = conn.park(first, deadline);
        if conn.scheduled.take().is_some() {
            self.deadlines.set(handle, None, false);
        }
        let tuple = record.ends.tuple();
        self.remove(handle);
        self.connections += 1;
        let parked = self.time_waits.insert(record);
        self.conns.repoint(&tuple, handle.index, parked.index);
    }

    /// The parked record `handle` names back in a slot, whole: its new handle.
    #[cold]
    #[inline(never)]
    fn unpark(&mut self, handle: TcpHandle) -> Option<TcpHandle> {
        let record = self.time_waits.remove(handle)?;
        let tuple = record.ends.tuple();
        self.connections -= 1;
        let first = record.handle;
        let new = self.insert(Socket::Conn(Conn::unpark(record)));
        self.conns.repoint(&tuple, handle.index, new.index);
        self.unparked = Some((new, first));
        Some(new)
    }

    /// Drop the parked record `handle` names (its 4-tuple entry too); the record.
    fn forget_parked(&mut self, handle: TcpHandle) -> Option<Parked> {
        let record = self.time_waits.remove(handle)?;
        self.conns.remove(&record.ends.tuple(), handle);
        self.connections -= 1;
        Some(record)
    }

    /// A parked record's 2*MSL ended: what a whole connection's TIME-WAIT timeout
    /// does ("delete the TCB, enter the CLOSED state"), its events included.
    #[cold]
    #[inline(never)]
    fn expire_parked(&mut self, handle: TcpHandle) {
        if let Some(record) = self.forget_parked(handle) {
            let h = record.handle;
            self.shared
                .out
                .event(&mut self.shared.stats, TcpEvent::Readable(h));
            self.shared
                .out
                .event(&mut self.shared.stats, TcpEvent::Writable(h));
            self.shared
                .out
                .event(&mut self.shared.stats, TcpEvent::Closed(h));
        }
    }

    /// An ICMP error quoted one of our segments from `local` to `remote` with sequence
    /// number `seq`. The connection takes it only when `seq` is in flight (RFC 5927
    /// §4.1); returns whether it did.
    pub fn handle_icmp(
        &mut self,
        now: Instant,
        local: impl Into<SocketAddr>,
        remote: impl Into<SocketAddr>,
        seq: u32,
        notice: crate::tcp::IcmpNotice,
    ) -> bool {
        let (local, remote) = (local.into(), remote.into());
        let accepted = self
            .conns
            .get(&(local, remote), |i, t| {
                matching((&self.slots, &self.time_waits), i, t)
            })
            .is_some_and(|handle| {
                let icmp = |conn: &mut Conn, ctx: &mut Ctx<'_>| {
                    Ok(conn.handle_icmp(ctx, crate::tcp::seq::SeqNumber(seq), notice))
                };
                if handle.index & PARKED == 0 {
                    self.with_conn(now, handle, icmp)
                } else {
                    self.with_unparked(now, handle, icmp)
                }
                .unwrap_or(false)
            });
        if accepted {
            self.shared.stats.icmp_accepted += 1;
        } else {
            self.shared.stats.icmp_ignored += 1;
        }
        accepted
    }

    /// End, with `error`, every connection still sending its SYN to a remote address
    /// for which `unreachable` says yes (the stack calls this when ARP gives up on a
    /// next hop: a connect fails at once instead of after every SYN retry). Returns how
    /// many ended.
    pub fn fail_opens(
        &mut self,
        now: Instant,
        mut unreachable: impl FnMut(IpAddr) -> bool,
        error: TcpError,
    ) -> usize {
        let handles: alloc::vec::Vec<TcpHandle> = self
            .conns
            .indices()
            .filter_map(|i| conn_handle_at(&self.slots, i))
            .filter(|&h| {
                tuple_of(&self.slots, h).is_some_and(|(_, remote)| unreachable(remote.ip()))
            })
            .collect();
        let mut ended = 0;
        for handle in handles {
            let _ = self.with_conn(now, handle, |conn, ctx| {
                if matches!(conn.state, super::state::State::SynSent(_)) {
                    conn.close_in(ctx, Some(error));
                    ended += 1;
                }
                Ok(())
            });
        }
        ended
    }

    /// A segment arrived from `src` to `dst` (one of our addresses, checksum verified).
    /// A connection it opens on a listener announces the configured MSS.
    pub fn handle_segment(
        &mut self,
        now: Instant,
        src: impl Into<IpAddr>,
        dst: impl Into<IpAddr>,
        segment: &Repr<'_>,
    ) {
        let mss = self.shared.config.mss;
        self.handle_segment_with_mss(now, src, dst, segment, mss);
    }

    /// As [`Tcp::handle_segment`], where a connection opened on a listener announces
    /// `local_mss` (the stack passes the MTU of the route back to `src` less 40).
    pub fn handle_segment_with_mss(
        &mut self,
        now: Instant,
        src: impl Into<IpAddr>,
        dst: impl Into<IpAddr>,
        segment: &Repr<'_>,
        local_mss: u16,
    ) {
        let ends = (src.into(), dst.into());
        self.handle_segment_with_ecn(now, ends, segment, local_mss, Ecn::NotEct);
    }

    /// As [`Tcp::handle_segment_with_mss`], for a segment whose IPv4 header carried
    /// the ECN field `ecn` (RFC 3168: a Congestion Experienced mark is echoed to the
    /// sender).
    pub fn handle_segment_with_ecn(
        &mut self,
        now: Instant,
        (src, dst): (IpAddr, IpAddr),
        segment: &Repr<'_>,
        local_mss: u16,
        ecn: Ecn,
    ) {
        self.shared.stats.segments_in += 1;
        let local = SocketAddr::new(dst, segment.dst_port);
        let remote = SocketAddr::new(src, segment.src_port);
        if let Some(handle) = self.conns.get(&(local, remote), |i, t| {
            matching((&self.slots, &self.time_waits), i, t)
        }) && !self.time_wait_reuse(handle, segment)
        {
            let input = |conn: &mut Conn, ctx: &mut Ctx<'_>| {
                conn.handle_segment(ctx, segment, ecn);
                Ok(())
            };
            let _ = if handle.index & PARKED == 0 {
                self.with_conn(now, handle, input)
            } else {
                self.with_unparked(now, handle, input)
            };
            return;
        }
        self.segment_for_listener(now, (local, remote), segment, local_mss);
    }

    /// Whether a listener on `local` (or on its port, any address) exists.
    fn has_listener(&self, local: SocketAddr) -> bool {
        self.listeners.contains_key(&local)
            || super::wildcards(local)
                .iter()
                .any(|any| self.listeners.contains_key(any))
    }

    /// A segment for no connection: to the listener on its address (or the wildcard
    /// one), else answered as for a closed port.
    #[inline(never)]
    fn segment_for_listener(
        &mut self,
        now: Instant,
        (local, remote): (SocketAddr, SocketAddr),
        segment: &Repr<'_>,
        local_mss: u16,
    ) {
        let [any, any6] = super::wildcards(local);
        let Some(&listener) = self
            .listeners
            .get(&local)
            .or_else(|| self.listeners.get(&any))
            .or_else(|| self.listeners.get(&any6))
            .or_else(|| self.listeners.get(&CATCH_ALL))
        else {
            return self.no_socket(local, remote, segment);
        };
        let Some(l) = listener_in(&self.slots, listener) else {
            return;
        };
        // TCP_MAXSEG on the listener: its children announce at most that.
        let local_mss = l.child_mss(local_mss);
        let ends = (local, remote);
        let cookies = (&self.cookies, self.shared.config.syn_cookies);
        // The one place a listener's disposition is carried out.
        match l.on_segment(now, ends, segment, cookies) {
            ListenDisposition::Drop => {}
            ListenDisposition::Reset(reset) => self.queue_reset(reset),
            ListenDisposition::RejectCookie(reset) => {
                self.shared.stats.syn_cookies_rejected += 1;
                self.queue_reset(reset);
            }
            ListenDisposition::CookieOverflow | ListenDisposition::Overflow => {
                self.shared.stats.listen_overflows += 1;
            }
            ListenDisposition::AcceptCookie { peer_mss } => {
                self.accept_cookie(now, listener, ends, segment, (peer_mss, local_mss));
            }
            ListenDisposition::SendCookie => {
                self.shared.stats.listen_overflows += 1;
                self.send_cookie(now, listener, ends, segment, local_mss);
            }
            ListenDisposition::HalfOpenFull => self.shared.stats.half_open_drops += 1,
            ListenDisposition::Open => self.open_child(now, listener, ends, segment, local_mss),
        }
    }

    /// A SYN with room in the listener's backlog: a child in SYN-RECEIVED, when the
    /// table has room for it.
    fn open_child(
        &mut self,
        now: Instant,
        listener: TcpHandle,
        (local, remote): (SocketAddr, SocketAddr),
        segment: &Repr<'_>,
        local_mss: u16,
    ) {
        if !self.make_room() {
            self.shared.stats.connection_limit_drops += 1;
            return;
        }
        let fast_open = self.fast_open_verdict(listener, (remote.ip(), local.ip()), segment);
        let options = match self.socket_mut(listener) {
            Some(Socket::Listener(l)) => {
                l.pending += 1;
                l.options.as_deref().copied()
            }
            _ => None,
        };
        let iss = self.isn.isn(now, local, remote);
        let mut conn = Conn::accept_syn(
            &self.shared.config,
            &mut self.shared.pool,
            (local, remote),
            iss,
            segment,
            (listener, options.as_ref()),
            local_mss,
        );
        if let ServerVerdict::Grant(cookie) = fast_open {
            conn.grant_fast_open_cookie(cookie);
        }
        let handle = self.insert(Socket::Conn(conn));
        self.conns.insert((local, remote), handle, |i, t| {
            matching((&self.slots, &self.time_waits), i, t)
        });
        if fast_open == ServerVerdict::Accept {
            if let Some(Socket::Listener(Listener {
                fast_open: Some(f), ..
            })) = self.socket_mut(listener)
            {
                f.children.push(handle);
            }
            let _ = self.with_conn(now, handle, |conn, ctx| {
                conn.accept_fast_open(ctx, segment);
                Ok(())
            });
        }
        self.sync_conn(handle);
    }

    /// TCP Fast Open on `listener` (Linux's `TCP_FASTOPEN`, RFC 7413): a SYN with a
    /// valid cookie and data opens a connection with the data accepted, while fewer
    /// than `max_pending` such connections wait for the ACK of their SYN-ACK (0 turns
    /// Fast Open off). Cookie requests are answered with a cookie keyed from the
    /// stack's secret over the client's address.
    pub fn set_fast_open(
        &mut self,
        listener: TcpHandle,
        max_pending: usize,
    ) -> Result<(), TcpError> {
        match self.socket_mut(listener) {
            Some(Socket::Listener(l)) => {
                l.fast_open = match (max_pending, l.fast_open.take()) {
                    (0, _) => None,
                    (_, Some(f)) => Some(ListenFastOpen { max_pending, ..f }),
                    (_, None) => Some(ListenFastOpen {
                        max_pending,
                        children: Vec::new(),
                        key: None,
                        no_cookie: false,
                    }),
                };
                Ok(())
            }
            Some(Socket::Conn(_)) => Err(TcpError::InvalidState),
            None => Err(TcpError::InvalidHandle),
        }
    }

    /// The key of the cookies a listener with Fast Open gives and checks: `Some` for
    /// this listener only (Linux's `TCP_FASTOPEN_KEY` on a listener), None for the
    /// stack's (`net.ipv4.tcp_fastopen_key`). Under the same key the cookies are the
    /// ones Linux gives (SipHash-2-4 of the SYN's addresses). `InvalidState` on a
    /// listener without Fast Open.
    pub fn set_fast_open_key(
        &mut self,
        listener: Option<TcpHandle>,
        key: &[u8; 16],
    ) -> Result<(), TcpError> {
        let key = CookieKey::from_bytes(key);
        let Some(listener) = listener else {
            self.fast_open_key = key;
            return Ok(());
        };
        self.with_listen_fast_open(listener, |f| f.key = Some(key))
    }

    /// Data on a SYN is taken without a cookie (or with any) on a listener with Fast
    /// Open (Linux's `TFO_SERVER_COOKIE_NOT_REQD`). `InvalidState` on a listener
    /// without Fast Open.
    pub fn set_fast_open_no_cookie(
        &mut self,
        listener: TcpHandle,
        on: bool,
    ) -> Result<(), TcpError> {
        self.with_listen_fast_open(listener, |f| f.no_cookie = on)
    }

    fn with_listen_fast_open(
        &mut self,
        listener: TcpHandle,
        f: impl FnOnce(&mut ListenFastOpen),
    ) -> Result<(), TcpError> {
        match self.socket_mut(listener) {
            Some(Socket::Listener(Listener {
                fast_open: Some(fast_open),
                ..
            })) => {
                f(fast_open);
                Ok(())
            }
            Some(_) => Err(TcpError::InvalidState),
            None => Err(TcpError::InvalidHandle),
        }
    }

    /// Connect as [`Tcp::connect`] does, with TCP Fast Open (RFC 7413): `data` (as
    /// much as the send buffer takes; the count is returned) goes on the SYN when the
    /// stack holds a cookie for the server, and after the handshake otherwise (the SYN
    /// then asks for a cookie). Towards a server where a Fast Open SYN went
    /// unanswered in the last hour, the SYN is plain.
    pub fn connect_with_data(
        &mut self,
        now: Instant,
        local: impl Into<SocketAddr>,
        remote: impl Into<SocketAddr>,
        mss: u16,
        data: &[u8],
    ) -> Result<(TcpHandle, usize), TcpError> {
        let handle = self.connect(now, local, remote, mss)?;
        let taken = self.fast_open_data(now, handle, data)?;
        Ok((handle, taken))
    }

    /// Turn Fast Open on for a connection from [`Tcp::connect`] whose SYN has not gone
    /// yet (no `poll_transmit` since), `data` its first bytes; see
    /// [`Tcp::connect_with_data`]. `InvalidState` once the SYN went.
    pub fn fast_open_data(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        data: &[u8],
    ) -> Result<usize, TcpError> {
        self.with_conn(now, handle, |conn, ctx| {
            conn.start_fast_open(ctx.now, &mut ctx.shared.peers, data)
        })
    }

    /// What a listener does with a SYN's Fast Open option (RFC 7413 §4.2.2), the SYN
    /// from `client` to `server`.
    fn fast_open_verdict(
        &mut self,
        listener: TcpHandle,
        (client, server): (IpAddr, IpAddr),
        syn: &Repr<'_>,
    ) -> ServerVerdict {
        let Some(Socket::Listener(Listener {
            fast_open: Some(f), ..
        })) = self.socket_mut(listener)
        else {
            return ServerVerdict::Plain;
        };
        // Linux's `tcp_try_fastopen` with TFO_SERVER_COOKIE_NOT_REQD: a SYN with data
        // or the option opens a Fast Open child, cookie or not.
        let no_cookie = f.no_cookie && (syn.options.fast_open.is_some() || !syn.payload.is_empty());
        let Some(cookie) = syn.options.fast_open.filter(|_| !no_cookie) else {
            return if no_cookie {
                self.fast_open_room(listener)
            } else {
                ServerVerdict::Plain
            };
        };
        let own = f.key.clone();
        let key = own.as_ref().unwrap_or(&self.fast_open_key);
        let granted = key
            .make(client, server)
            .with_experimental(cookie.is_experimental());
        if cookie.is_request() {
            self.shared.stats.fast_open_cookies_granted += 1;
            ServerVerdict::Grant(granted)
        } else if !key.check(client, server, &cookie) {
            self.shared.stats.fast_open_rejected += 1;
            self.shared.stats.fast_open_cookies_granted += 1;
            ServerVerdict::Grant(granted)
        } else {
            // A valid cookie opens the child even on a SYN without data, as Linux's
            // `tcp_try_fastopen` ("Data-less SYN with valid cookie is allowed to send
            // data in SYN_RECV state"): the server may write before the handshake ends.
            self.fast_open_room(listener)
        }
    }

    /// Accept when fewer than the listener's `max_pending` Fast Open children wait for
    /// the ACK of their SYN-ACK (RFC 7413 §5.1), a plain handshake otherwise.
    fn fast_open_room(&mut self, listener: TcpHandle) -> ServerVerdict {
        let Some(Socket::Listener(Listener {
            fast_open: Some(f), ..
        })) = self.socket_mut(listener)
        else {
            return ServerVerdict::Plain;
        };
        let mut children = core::mem::take(&mut f.children);
        let max_pending = f.max_pending;
        if children.len() >= max_pending {
            children.retain(|&h| self.conn_ref(h).is_some_and(Conn::fast_open_awaits_ack));
        }
        let verdict = if children.len() < max_pending {
            ServerVerdict::Accept
        } else {
            self.shared.stats.fast_open_overflows += 1;
            ServerVerdict::Plain
        };
        if let Some(Socket::Listener(Listener {
            fast_open: Some(f), ..
        })) = self.socket_mut(listener)
        {
            f.children = children;
        }
        verdict
    }

    /// RFC 4987 §3.6: the backlog is full, so the SYN's state goes into the SYN-ACK's
    /// sequence number (and timestamp) instead of a child.
    #[cold]
    #[inline(never)]
    fn send_cookie(
        &mut self,
        now: Instant,
        listener: TcpHandle,
        ends: (SocketAddr, SocketAddr),
        syn: &Repr<'_>,
        local_mss: u16,
    ) {
        let recv_buffer = match self.socket_mut(listener) {
            Some(Socket::Listener(l)) => l.options.as_ref().and_then(|o| o.recv_buffer),
            _ => None,
        };
        let config = &self.shared.config;
        let recv_buffer = recv_buffer.map_or(config.recv_buffer, |b| b as usize);
        let ts = syn.options.timestamps.filter(|_| config.timestamps);
        let wscale = syn
            .options
            .window_scale
            .filter(|_| config.window_scaling && ts.is_some());
        let sack = config.sack && ts.is_some() && syn.options.sack_permitted;
        // RFC 3168 §6.1.1 needs the SYN-ACK's ECE remembered: only the timestamp has room.
        let ecn = config.ecn != EcnMode::Off && ts.is_some() && ecn::peer_agrees(syn);
        let iss = self
            .cookies
            .make(now, ends, syn.seq, syn.options.mss.unwrap_or(DEFAULT_MSS));
        let syn_ack = CookieSynAck {
            local: ends.0,
            remote: ends.1,
            seq: iss.0,
            ack: syn.seq.wrapping_add(1),
            window: u16::try_from(recv_buffer).unwrap_or(u16::MAX),
            options: Options {
                mss: Some(local_mss),
                window_scale: wscale.map(|_| our_wscale(recv_buffer)),
                sack_permitted: sack,
                timestamps: ts.map(|(peer, _)| (encode_ts(tsval(now), wscale, sack, ecn), peer)),
                ..Options::default()
            },
            ecn,
        };
        if self.shared.out.syn_ack(syn_ack) {
            self.shared.stats.syn_cookies_sent += 1;
            if let Some(Socket::Listener(l)) = self.socket_mut(listener) {
                l.cookie_sent_at = Some(now);
            }
        }
    }

    /// An ACK that returned a valid SYN cookie, with room in the listener's accept
    /// queue: the connection opens with the options the cookie kept, as if it had
    /// waited in SYN-RECEIVED, when the table has room for it.
    #[cold]
    #[inline(never)]
    fn accept_cookie(
        &mut self,
        now: Instant,
        listener: TcpHandle,
        ends: (SocketAddr, SocketAddr),
        seg: &Repr<'_>,
        mss: (u16, u16),
    ) {
        if !self.make_room() {
            // No room in the table: drop the ACK; the peer's retransmission (or its
            // data) brings the cookie again.
            self.shared.stats.connection_limit_drops += 1;
            return;
        }
        self.shared.stats.syn_cookies_accepted += 1;
        self.open_from_cookie(now, listener, ends, seg, mss);
    }

    /// The child of a valid cookie: SYN-RECEIVED rebuilt from the cookie, then the ACK.
    fn open_from_cookie(
        &mut self,
        now: Instant,
        listener: TcpHandle,
        ends: (SocketAddr, SocketAddr),
        seg: &Repr<'_>,
        (peer_mss, local_mss): (u16, u16),
    ) {
        let ts = seg
            .options
            .timestamps
            .filter(|_| self.shared.config.timestamps);
        let (window_scale, sack_permitted, ecn) =
            ts.map_or((None, false, false), |(_, ecr)| decode_ts(ecr));
        let syn = Repr {
            seq: seg.seq.wrapping_sub(1),
            ack: 0,
            // The SYN as far as the cookie kept it: an ECN-setup SYN when we agreed.
            flags: if ecn {
                Flags::SYN | Flags::ECE | Flags::CWR
            } else {
                Flags::SYN
            },
            options: Options {
                mss: Some(peer_mss),
                window_scale,
                sack_permitted,
                timestamps: ts.map(|(val, _)| (val, 0)),
                ..Options::default()
            },
            payload: &[],
            ..*seg
        };
        let options = match self.socket_mut(listener) {
            Some(Socket::Listener(l)) => {
                l.pending += 1;
                l.options.as_deref().copied()
            }
            _ => None,
        };
        let iss = SeqNumber(seg.ack.wrapping_sub(1));
        let mut conn = Conn::accept_syn(
            &self.shared.config,
            &mut self.shared.pool,
            ends,
            iss,
            &syn,
            (listener, options.as_ref()),
            local_mss,
        );
        conn.syn_ack_sent();
        let handle = self.insert(Socket::Conn(conn));
        self.conns.insert(ends, handle, |i, t| {
            matching((&self.slots, &self.time_waits), i, t)
        });
        self.sync_conn(handle);
        let _ = self.with_conn(now, handle, |conn, ctx| {
            conn.handle_segment(ctx, seg, Ecn::NotEct);
            Ok(())
        });
    }

    /// RFC 9293 §3.10.7.1: a segment for no connection.
    #[cold]
    #[inline(never)]
    fn no_socket(&mut self, local: SocketAddr, remote: SocketAddr, segment: &Repr<'_>) {
        self.shared.stats.no_socket += 1;
        // "If the state is CLOSED ... An incoming segment containing a RST is discarded."
        if !segment.flags.rst() {
            self.queue_reset(Reset::for_segment(local, remote, segment));
        }
    }

    fn queue_reset(&mut self, reset: Reset) {
        self.shared.stats.resets_sent += 1;
        self.shared.out.reset(reset);
    }

    /// RFC 9293 §3.6.1 and RFC 6191: a SYN to a connection in TIME-WAIT reopens it when
    /// its timestamp is newer than the last one seen, or (without timestamps) its
    /// sequence number is above RCV.NXT, and a listener would take it. The old
    /// connection is released; returns true when the caller should hand the SYN to that
    /// listener. With no listener the SYN stays with TIME-WAIT (which answers it with a
    /// challenge ACK, RFC 5961 §4): releasing it would only draw a RST for a closed port
    /// and leave the tuple open to old duplicates.
    #[inline]
    fn time_wait_reuse(&mut self, handle: TcpHandle, seg: &Repr<'_>) -> bool {
        if !seg.flags.syn() || seg.flags.ack() || seg.flags.rst() {
            return false;
        }
        self.time_wait_reopen(handle, seg)
    }

    /// [`Tcp::time_wait_reuse`] for a plain SYN.
    #[inline(never)]
    fn time_wait_reopen(&mut self, handle: TcpHandle, seg: &Repr<'_>) -> bool {
        if let Some(record) = self.time_waits.get(handle) {
            if !(reopens(record.ts_recent, record.rcv_nxt, seg)
                && self.has_listener(record.ends.local()))
            {
                return false;
            }
            self.shared.stats.time_wait_reuses += 1;
            if let Some(record) = self.forget_parked(handle) {
                self.shared
                    .out
                    .event(&mut self.shared.stats, TcpEvent::Closed(record.handle));
            }
            return true;
        }
        let Some(conn) = self.conn_mut(handle) else {
            return false;
        };
        let State::TimeWait(tw) = &conn.state else {
            return false;
        };
        let newer = reopens(tw.ts_recent, tw.rcv.rcv_nxt, seg);
        let local = conn.local();
        if !newer || !self.has_listener(local) {
            return false;
        }
        let Some(conn) = self.conn_mut(handle) else {
            return false;
        };
        let mut old = core::mem::replace(&mut conn.state, State::Closed(Closed { error: None }));
        conn.keep_unread(&mut old, false);
        conn.timers.stop_all();
        self.shared.stats.time_wait_reuses += 1;
        self.sync_conn(handle);
        // A user still holding the handle keeps a dead one; the tuple is free either way.
        if let Some(conn) = self.conn_mut(handle) {
            let tuple = conn.ends.tuple();
            self.conns.remove(&tuple, handle);
        }
        true
    }

    /// False when [`Tcp::poll_transmit`] would certainly return `None`: no RST waits
    /// and no connection is in the output queue.
    #[inline]
    pub fn may_transmit(&self) -> bool {
        !self.shared.out.resets.is_empty()
            || !self.shared.out.syn_acks.is_empty()
            || !self.output_queue.is_empty()
    }

    /// Write the next segment to send into `buf` (at most `buf.len()` bytes), its
    /// checksum filled in.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<TcpTransmit> {
        self.poll_transmit_with(now, buf, |_, _| Egress::PLAIN)
    }

    /// As [`Tcp::poll_transmit`], asking `egress(src, dst)` what the outgoing device
    /// does: where its checksum flag is false (the device computes it, see
    /// [`Offloads`](crate::Offloads)) the field holds the pseudo-header sum; where it
    /// offers TSO, a segment may carry more than one MSS. The segment is written
    /// `Egress::headroom` bytes into `buf` (`TcpTransmit::len` counts from there).
    pub fn poll_transmit_with(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        mut egress: impl FnMut(IpAddr, IpAddr) -> Egress,
    ) -> Option<TcpTransmit> {
        self.pending = None;
        if !(self.shared.out.resets.is_empty() && self.shared.out.syn_acks.is_empty())
            && let Some(transmit) = self.poll_control_segment(buf, &mut egress)
        {
            return Some(transmit);
        }
        while let Some(handle) = self.output_queue.pop_front() {
            let Some(conn) = self.conn_mut(handle) else {
                continue;
            };
            // Stays marked while it runs so `sync_conn` does not queue it a second time.
            conn.queued = true;
            let (src, dst) = (conn.local().ip(), conn.remote().ip());
            let out = egress(src, dst);
            let sent = self.with_conn(now, handle, |conn, ctx| {
                Ok(conn.poll_transmit(ctx, behind(buf, out.headroom), out))
            });
            if let Ok(Some(len)) = sent {
                self.pending = self
                    .shared
                    .out
                    .deferred
                    .take()
                    .map(|(at, n)| (handle, at, n));
                // When it has more: back of the queue, behind the others.
                if let Some(conn) = self.conn_mut(handle) {
                    if conn.may_send() {
                        self.output_queue.push_back(handle);
                    } else {
                        conn.queued = false;
                        // TIME-WAIT's last ACK went: it may be parked now.
                        if matches!(conn.state, State::TimeWait(_)) {
                            self.park(handle);
                        }
                    }
                }
                let ecn = core::mem::take(&mut self.shared.out.ecn);
                return Some(TcpTransmit { src, dst, len, ecn });
            }
            if let Some(conn) = self.conn_mut(handle) {
                conn.queued = false;
                if matches!(conn.state, State::TimeWait(_)) {
                    self.park(handle);
                }
            }
        }
        None
    }

    /// The queued RSTs, then SYN-ACKs, of [`Tcp::poll_transmit_with`]: out of line
    /// (an established connection's segment, the common one, needs none of it).
    #[inline(never)]
    fn poll_control_segment(
        &mut self,
        buf: &mut [u8],
        egress: &mut dyn FnMut(IpAddr, IpAddr) -> Egress,
    ) -> Option<TcpTransmit> {
        while let Some(reset) = self.shared.out.resets.pop_front() {
            let out = egress(reset.local.ip(), reset.remote.ip());
            if let Some(len) = reset.write(behind(buf, out.headroom), out.checksum) {
                self.shared.stats.segments_out += 1;
                return Some(TcpTransmit {
                    src: reset.local.ip(),
                    dst: reset.remote.ip(),
                    len,
                    ecn: Ecn::NotEct,
                });
            }
        }
        while let Some(syn_ack) = self.shared.out.syn_acks.pop_front() {
            let out = egress(syn_ack.local.ip(), syn_ack.remote.ip());
            if let Some(len) = syn_ack.write(behind(buf, out.headroom), out.checksum) {
                self.shared.stats.segments_out += 1;
                return Some(TcpTransmit {
                    src: syn_ack.local.ip(),
                    dst: syn_ack.remote.ip(),
                    len,
                    ecn: Ecn::NotEct,
                });
            }
        }
        None
    }

    /// The earliest time `handle_timeout` must be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let first = self.deadlines.first().map(|(at, _)| at);
        match self.time_waits.first_at() {
            None => first,
            Some(parked) => Some(first.map_or(parked, |at| at.min(parked))),
        }
    }

    /// The earliest deadline, a connection's or a parked record's.
    #[inline]
    fn first_deadline(&self) -> Option<(Instant, TcpHandle)> {
        match (self.deadlines.first(), self.time_waits.first()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Fire the timers that are due.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some((at, handle)) = self.first_deadline() {
            if at > now {
                break;
            }
            if handle.index & PARKED != 0 {
                self.expire_parked(handle);
                continue;
            }
            let _ = self.with_conn(now, handle, |conn, ctx| {
                while let Some(timer) = conn.timers.pop_due(now) {
                    conn.handle_timeout(ctx, timer);
                }
                Ok(())
            });
            // A stale entry (should not happen) must not loop forever.
            if self.deadlines.first() == Some((at, handle)) {
                self.deadlines.pop_first();
                if let Some(conn) = self.conn_mut(handle) {
                    conn.scheduled = None;
                }
            }
        }
    }

    /// The next readiness change.
    pub fn poll_event(&mut self) -> Option<TcpEvent> {
        self.shared.out.events.pop_front()
    }
}
