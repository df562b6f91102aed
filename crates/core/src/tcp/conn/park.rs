//! TIME-WAIT, parked: a connection the application has closed spends its 2*MSL as a
//! [`Parked`] record of what RFC 9293 still needs (the tuple, the last sequence numbers,
//! TS.Recent, the options agreed, the challenge-ACK budget, the deadline) instead of a
//! whole [`Conn`] in the table's slot, as Linux keeps an `inet_timewait_sock` in place of
//! its socket. A record is a third of a connection, so a busy server's thousands of
//! TIME-WAIT connections take a third of the memory, and new connections reuse the
//! slots they left (still in the cache) instead of the oldest TIME-WAIT one's.
//!
//! The record keeps every field a TIME-WAIT connection can still read, so
//! [`Conn::unpark`] gives back the connection [`Conn::park`] took: a segment or an
//! ICMP error for the tuple unparks it and the ordinary input path handles it (RFC 9293's
//! TIME-WAIT rules, RFC 5961's challenge ACKs, RFC 7323's PAWS: one implementation, not
//! two); the 2*MSL timeout, a SYN that reopens the tuple and the recycling of the oldest
//! under `max_connections` need only the record (`table.rs`). Unit-test builds check
//! each park against the connection it came from.

use alloc::boxed::Box;

use super::{Cold, Conn, Negotiated, Owner};
use crate::tcp::TcpHandle;
use crate::tcp::buffer::RecvBuffer;
use crate::tcp::ends::Ends;
use crate::tcp::rtt::RttEstimator;
use crate::tcp::seq::SeqNumber;
use crate::tcp::state::{AckState, RcvClosed, SndClosed, State, TimeWait};
use crate::tcp::timer::{Timer, Timers};
use crate::time::Instant;

/// A TIME-WAIT connection the application has closed, out of the table's slots.
#[derive(Debug)]
pub(crate) struct Parked {
    /// The handle the connection had (its events name it).
    pub handle: TcpHandle,
    /// Our address and the peer's.
    pub ends: Ends,
    /// When the 2*MSL wait ends.
    pub deadline: Instant,
    /// SND.NXT, just past our FIN.
    pub snd_nxt: SeqNumber,
    /// RCV.NXT, just past the peer's FIN.
    pub rcv_nxt: SeqNumber,
    /// The peer's last timestamp (RFC 6191: a SYN with a newer one may reopen).
    pub ts_recent: Option<u32>,
    /// The receive buffer's capacity and out-of-order range limit (it holds nothing).
    rcv_shape: (u32, u32),
    opts: Negotiated,
    rtt: RttEstimator,
    last_data_at: Option<Instant>,
    cold: Option<Box<Cold>>,
    nodelay: bool,
    more: bool,
    more_held: bool,
    interactive: bool,
    quick_acks: u8,
}

impl Parked {
    /// A record of no connection in particular, whose wait ends at `deadline`.
    #[cfg(test)]
    pub(crate) fn dummy(deadline: Instant) -> Parked {
        let config = crate::tcp::TcpConfig::default();
        let addr = core::net::SocketAddr::from(([10, 0, 0, 1], 80));
        Parked {
            handle: TcpHandle {
                index: 0,
                generation: 0,
            },
            ends: Ends::new(addr, addr),
            deadline,
            snd_nxt: SeqNumber(0),
            rcv_nxt: SeqNumber(0),
            ts_recent: None,
            rcv_shape: (0, 0),
            opts: Negotiated::offer(&config, 1460, config.recv_buffer),
            rtt: RttEstimator::new(config.initial_rto, config.rto_bounds()),
            last_data_at: None,
            cold: None,
            nodelay: false,
            more: false,
            more_held: false,
            interactive: false,
            quick_acks: 0,
        }
    }
}

impl Conn {
    /// When this connection's 2*MSL wait ends, if it may be parked: in TIME-WAIT,
    /// released by the application, owing nothing (no ACK, no probe, not in the output
    /// queue), its receive buffer holding no storage, and no timer but TIME-WAIT's armed.
    #[inline]
    pub(crate) fn parkable(&self) -> Option<Instant> {
        let State::TimeWait(tw) = &self.state else {
            return None;
        };
        if self.owner != Owner::Released
            || self.queued
            || !self.in_demux
            || self.probe.is_some()
            || self.ack != AckState::Idle
        {
            return None;
        }
        tw.rcv.buffer.bare_shape()?;
        self.timers.only(Timer::TimeWait)
    }

    /// The record of this connection (which [`Conn::parkable`] allowed, for a wait
    /// ending at `deadline`), in slot `handle`; the connection keeps nothing that
    /// needs dropping.
    pub(crate) fn park(&mut self, handle: TcpHandle, deadline: Instant) -> Parked {
        let State::TimeWait(tw) = &self.state else {
            unreachable!("parkable checked TIME-WAIT");
        };
        let rcv_shape = tw.rcv.buffer.bare_shape().unwrap_or_default();
        let parked = Parked {
            handle,
            ends: self.ends.clone(),
            deadline,
            snd_nxt: tw.snd.snd_nxt,
            rcv_nxt: tw.rcv.rcv_nxt,
            ts_recent: tw.ts_recent,
            rcv_shape,
            opts: self.opts,
            rtt: self.rtt.clone(),
            last_data_at: self.last_data_at,
            cold: self.cold.take(),
            nodelay: self.nodelay,
            more: self.more,
            more_held: self.more_held,
            interactive: self.interactive,
            quick_acks: self.quick_acks,
        };
        #[cfg(test)]
        {
            // The connection the record gives back must be this one.
            let mut original = alloc::format!("{self:?}");
            let back = Conn::unpark(Parked {
                cold: None,
                rtt: parked.rtt.clone(),
                ends: parked.ends.clone(),
                ..parked
            });
            let back = alloc::format!("{back:?}");
            original = original.replacen(
                &alloc::format!("scheduled: {:?}", self.scheduled),
                "scheduled: None",
                1,
            );
            assert_eq!(original, back, "a parked TIME-WAIT connection changed");
        }
        parked
    }

    /// A copy of the connection `parked` holds, for a look at it (`TcpInfo`): what
    /// only the cold part keeps (retransmissions, the soft error) reads as none.
    pub(crate) fn parked_copy(parked: &Parked) -> Conn {
        Conn::unpark(Parked {
            ends: parked.ends.clone(),
            rtt: parked.rtt.clone(),
            cold: None,
            ..*parked
        })
    }

    /// The connection `parked` was taken from (not scheduled, not queued).
    pub(crate) fn unpark(parked: Parked) -> Conn {
        let mut timers = Timers::default();
        timers.set(Timer::TimeWait, parked.deadline);
        let (capacity, max_ranges) = parked.rcv_shape;
        Conn {
            ends: parked.ends,
            state: State::TimeWait(TimeWait {
                snd: SndClosed {
                    snd_nxt: parked.snd_nxt,
                },
                rcv: RcvClosed {
                    rcv_nxt: parked.rcv_nxt,
                    buffer: RecvBuffer::with_max_ranges(capacity as usize, max_ranges as usize),
                },
                ts_recent: parked.ts_recent,
            }),
            timers,
            rtt: parked.rtt,
            opts: parked.opts,
            owner: Owner::Released,
            ack: AckState::Idle,
            nodelay: parked.nodelay,
            more: parked.more,
            more_held: parked.more_held,
            quick_acks: parked.quick_acks,
            last_data_at: parked.last_data_at,
            interactive: parked.interactive,
            probe: None,
            queued: false,
            scheduled: None,
            in_demux: true,
            cold: parked.cold,
        }
    }
}
