//! What every connection of a [`Tcp`](super::Tcp) shares, in parts borrowed apart: the
//! settings, the counters, the [`Outbox`] (queues of events, RSTs and cookie SYN-ACKs),
//! the [`Pool`] of spare ring storage and boxes, the [`PeerCaches`].

use alloc::collections::VecDeque;

use super::buffer::{RecvBuffer, SendBuffer};
use super::ecn::Ecn;
use super::segment::Reset;
use super::state::*;
use super::{TcpConfig, TcpEvent, TcpStats};
use crate::rng::Rng;

/// What every connection shares, in parts a call borrows apart: settings, counters,
/// what goes out, the spare storage, what is remembered per peer.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Settings.
    pub config: TcpConfig,
    /// Counters.
    pub stats: TcpStats,
    /// Events, RSTs and cookie SYN-ACKs waiting for the driver, and what the last
    /// segment written left for it.
    pub out: Outbox,
    /// Storage of connections that ended, for the next ones to reuse.
    pub pool: Pool,
    /// What closed connections learned per peer host.
    pub peers: PeerCaches,
    /// Draws each connection's challenge-ACK budgets (RFC 5961 §7).
    pub challenge_rng: Rng,
    /// Take the fast paths: header prediction (`predict.rs`) for segments that fit it,
    /// the short table update after a call into an open connection (`table.rs`
    /// `sync_open_conn`), the direct writer for plain segments (`segment.rs`). Always true
    /// outside the tests that compare them with the full paths.
    pub fast_paths: bool,
}

/// What waits for the driver: readiness events, RSTs of no connection, cookie
/// SYN-ACKs; and the facts about the segment last written that the driver needs.
#[derive(Debug)]
pub(crate) struct Outbox {
    /// Readiness changes for the user.
    pub events: VecDeque<TcpEvent>,
    /// RSTs to send that belong to no connection (or to one being released).
    pub resets: VecDeque<Reset>,
    /// SYN-ACKs carrying SYN cookies, waiting to go (bounded as `resets` is).
    pub syn_acks: VecDeque<super::cookie::CookieSynAck>,
    /// `TcpConfig::event_limit`.
    event_limit: usize,
    /// `TcpConfig::reset_queue`.
    reset_queue: usize,
    /// The driver sends a segment's payload from the send buffer itself (a gather
    /// write): plain segments with a partial checksum leave it there (`Fill::Deferred`).
    pub gather: bool,
    /// The payload the last segment left in the send buffer: offset from SND.UNA, length.
    pub deferred: Option<(usize, usize)>,
    /// The IP ECN field of the last segment written (`TcpTransmit::ecn`).
    pub ecn: Ecn,
}

/// Storage of connections that ended, for the next ones to reuse (W3 churn: saves an
/// allocation, its zeroing and a free per ring and per box).
#[derive(Debug)]
pub(crate) struct Pool {
    /// Ring storage, at most `spare_rings` entries of at most [`MAX_SPARE_STORAGE`]
    /// bytes each.
    pub spare: alloc::vec::Vec<alloc::vec::Vec<u8>>,
    /// Ring storage larger than [`Pool::spare`] keeps: a ring that reached its full
    /// size (a bulk response) would otherwise be grown again, allocation, zeroing and
    /// copy at every doubling, by the next connection (W6 with one connection per
    /// request). At most `large_spare_rings` entries.
    pub large_spare: alloc::vec::Vec<alloc::vec::Vec<u8>>,
    /// RACK's state boxes (with their sent logs' storage), at most `spare_rings`
    /// entries. Boxed: the boxes themselves are what a connection's `RackCell` takes
    /// back.
    #[allow(clippy::vec_box)]
    pub spare_racks: alloc::vec::Vec<alloc::boxed::Box<super::rack::Rack>>,
    /// HyStart++'s boxes of rounds (the only allocation left per connection end), at
    /// most `spare_rings` entries. Boxed for the reason `spare_racks` is.
    #[allow(clippy::vec_box)]
    pub spare_rounds: alloc::vec::Vec<alloc::boxed::Box<super::cc::hystart::Rounds>>,
    /// `TcpConfig::spare_rings`.
    spare_rings: usize,
    /// Connections give their empty rings' storage back (more connections are open
    /// than `TcpConfig::release_rings_above`); set by the table before each call into
    /// a connection.
    pub release_rings: bool,
    /// `TcpConfig::large_spare_rings`.
    large_spare_rings: usize,
}

/// What closed connections learned per peer host.
#[derive(Debug, Default)]
pub(crate) struct PeerCaches {
    /// RFC 9040 control blocks, with `TcpConfig::share_control_blocks`.
    pub blocks: super::share::BlockCache,
    /// TCP Fast Open's client side: the cookies servers granted (RFC 7413 §4.1.2), and
    /// the servers towards which it failed lately.
    pub fast_open: super::fastopen::CookieCache,
}

impl Shared {
    /// Nothing queued, nothing spare, for `config`.
    pub fn new(config: TcpConfig, challenge_rng: Rng) -> Shared {
        Shared {
            out: Outbox {
                events: VecDeque::new(),
                resets: VecDeque::new(),
                syn_acks: VecDeque::new(),
                event_limit: config.event_limit,
                reset_queue: config.reset_queue,
                gather: false,
                deferred: None,
                ecn: Ecn::NotEct,
            },
            pool: Pool {
                spare: alloc::vec::Vec::new(),
                large_spare: alloc::vec::Vec::new(),
                spare_racks: alloc::vec::Vec::new(),
                spare_rounds: alloc::vec::Vec::new(),
                spare_rings: config.spare_rings,
                large_spare_rings: config.large_spare_rings,
                release_rings: false,
            },
            config,
            stats: TcpStats::default(),
            peers: PeerCaches::default(),
            challenge_rng,
            fast_paths: true,
        }
    }
}

/// Largest ring storage kept in [`Pool::spare`] (bigger ones go to
/// [`Pool::large_spare`]).
const MAX_SPARE_STORAGE: usize = 16 << 10;

impl Pool {
    /// Keep `storage` (a ring's, contents irrelevant) for a later connection.
    #[inline]
    pub fn recycle(&mut self, storage: alloc::vec::Vec<u8>) {
        let len = storage.len();
        if len != 0 && len <= MAX_SPARE_STORAGE && self.spare.len() < self.spare_rings {
            self.spare.push(storage);
        } else if len > MAX_SPARE_STORAGE && self.large_spare.len() < self.large_spare_rings {
            self.large_spare.push(storage);
        }
    }
    /// Whether [`Pool::recycle`] would keep storage of `len` bytes now (a large ring
    /// it would drop is better kept where it is: its connection moves bulk data).
    #[inline]
    pub fn would_keep(&self, len: usize) -> bool {
        if len <= MAX_SPARE_STORAGE {
            true
        } else {
            self.large_spare.len() < self.large_spare_rings
        }
    }
    /// The sending half closed (our FIN is acknowledged), keeping the send ring's
    /// storage for a later connection. `snd` is left in place without it, to be
    /// dropped (the caller replaces the state; moving the half out would copy it).
    pub fn close_send(&mut self, snd: &mut Snd) -> SndClosed {
        let snd_nxt = snd.snd_max;
        let buffer = core::mem::replace(&mut snd.buffer, SendBuffer::new(0));
        self.recycle(buffer.into_storage());
        self.recycle_boxes(snd);
        SndClosed { snd_nxt }
    }
    /// Keep a sending half's RACK allocation and HyStart++'s (if it has them) for a
    /// later connection.
    #[inline]
    pub fn recycle_boxes(&mut self, snd: &mut Snd) {
        if self.spare_racks.len() < self.spare_rings
            && let Some(rack) = snd.rack.take()
        {
            self.spare_racks.push(rack);
        }
        if self.spare_rounds.len() < self.spare_rings
            && let Some(rounds) = snd.cc.take_hystart_rounds()
        {
            self.spare_rounds.push(rounds);
        }
    }
    /// RACK's state of `snd` to change, allocated now on a connection's that ended
    /// when there is one ([`super::rack::RackCell::get_mut_reusing`]).
    #[inline]
    pub fn rack_mut<'a>(&mut self, snd: &'a mut Snd) -> &'a mut super::rack::Rack {
        let spare = if snd.rack.is_allocated() {
            None
        } else {
            self.spare_racks.pop()
        };
        let (snd_una, capacity) = (snd.snd_una, snd.buffer.capacity());
        snd.rack.get_mut_reusing(spare, snd_una, capacity)
    }
    /// Recycle the ring storage a state owns, taken out of it where it lies (the
    /// caller then writes the next state over it: moving the state out to recycle it
    /// would copy it whole).
    pub fn recycle_state(&mut self, state: &mut State) {
        match state {
            State::SynSent(s) => self.recycle(s.buffer.take_storage()),
            State::SynRcvd(s) => {
                self.recycle(s.buffer.take_storage());
                self.recycle(s.rcv.buffer.take_storage());
            }
            State::Established(Established { snd, rcv })
            | State::FinWait1(FinWait1 { snd, rcv }) => {
                self.recycle_boxes(snd);
                self.recycle(snd.buffer.take_storage());
                self.recycle(rcv.buffer.take_storage());
            }
            State::FinWait2(s) => self.recycle(s.rcv.buffer.take_storage()),
            State::Closing(Closing { snd, rcv })
            | State::CloseWait(CloseWait { snd, rcv })
            | State::LastAck(LastAck { snd, rcv }) => {
                self.recycle_boxes(snd);
                self.recycle(snd.buffer.take_storage());
                self.recycle(rcv.buffer.take_storage());
            }
            State::TimeWait(s) => self.recycle(s.rcv.buffer.take_storage()),
            State::Closed(_) => {}
        }
    }
    /// Spare ring storage for a new ring of `capacity` bytes (empty when none fits).
    #[inline]
    pub fn spare_storage(&mut self, capacity: usize) -> alloc::vec::Vec<u8> {
        if let Some(v) = self.large_spare.last()
            && v.len() <= capacity
        {
            return self.large_spare.pop().unwrap_or_default();
        }
        match self.spare.last() {
            Some(v) if v.len() <= capacity => self.spare.pop().unwrap_or_default(),
            _ => alloc::vec::Vec::new(),
        }
    }
    /// A send ring of `capacity` bytes, on spare storage when there is some.
    pub fn send_buffer_of(&mut self, capacity: usize) -> SendBuffer {
        SendBuffer::with_storage(capacity, self.spare_storage(capacity))
    }
    /// A receive ring of `capacity` bytes, on spare storage when there is some.
    #[inline]
    pub fn recv_buffer_of(&mut self, capacity: usize, max_ranges: usize) -> RecvBuffer {
        let storage = self.spare_storage(capacity);
        RecvBuffer::with_storage(capacity, max_ranges, storage)
    }
}

impl Outbox {
    /// Queue a RST (dropped when `TcpConfig::reset_queue` wait already).
    pub fn reset(&mut self, reset: Reset) {
        if self.resets.len() < self.reset_queue {
            self.resets.push_back(reset);
        }
    }
    /// Queue a SYN-ACK with a cookie; false when `TcpConfig::reset_queue` wait already.
    pub fn syn_ack(&mut self, syn_ack: super::cookie::CookieSynAck) -> bool {
        let room = self.syn_acks.len() < self.reset_queue;
        if room {
            self.syn_acks.push_back(syn_ack);
        }
        room
    }
    /// Queue an event, skipping an exact repeat of the last one; at
    /// `TcpConfig::event_limit` the oldest goes (counted in `stats`).
    pub fn event(&mut self, stats: &mut TcpStats, event: TcpEvent) {
        if self.events.back() == Some(&event) {
            return;
        }
        if self.events.len() >= self.event_limit {
            stats.events_dropped += 1;
            if self.events.pop_front().is_none() {
                return;
            }
        }
        self.events.push_back(event);
    }
}
