//! Raw IPv4 sockets, one protocol each (Linux's `socket(AF_INET, SOCK_RAW, protocol)`):
//! a copy of every IPv4 datagram of that protocol the host takes in, header included,
//! and datagrams sent with a header the stack builds or, with `hdrincl`
//! (`IP_HDRINCL`), the caller's own.

use alloc::vec::Vec;
use core::fmt;
use core::net::Ipv4Addr;

use crate::socket::{Handle, RecvQueue, Slab};

/// A raw socket; stale handles (after `raw_close`) are reported as invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RawHandle(pub(crate) Handle);

/// Why a raw socket call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RawError {
    /// The handle does not name an open socket.
    InvalidHandle,
    /// No datagram is queued; wait for `Event::Raw`.
    WouldBlock,
    /// Protocol 0 names no protocol (Linux refuses it too).
    InvalidProtocol,
    /// The datagram does not fit in one IPv4 packet, or (`hdrincl`) is over the
    /// route MTU.
    MessageTooLong,
    /// (`hdrincl`) The caller's header is impossible: what was wrong.
    BadHeader(&'static str),
    /// No route to the destination (or no source address on its interface).
    NoRoute,
    /// The transmit or resolution queue is full; try again after `poll_transmit`.
    NoBufferSpace,
}

impl fmt::Display for RawError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RawError::InvalidHandle => write!(
                f,
                "invalid raw socket handle: the socket was closed or never existed"
            ),
            RawError::WouldBlock => write!(f, "no datagram queued: wait for a readable event"),
            RawError::InvalidProtocol => {
                write!(f, "protocol 0 names no protocol: bind to 1..=255")
            }
            RawError::MessageTooLong => write!(f, "datagram too long for one IPv4 packet"),
            RawError::BadHeader(what) => write!(f, "bad IPv4 header given: {what}"),
            RawError::NoRoute => {
                write!(f, "no route to the destination: add a route or an address")
            }
            RawError::NoBufferSpace => write!(f, "output queue full: poll_transmit, then retry"),
        }
    }
}

impl core::error::Error for RawError {}

#[derive(Debug)]
pub(crate) struct RawSocket {
    pub(crate) protocol: u8,
    /// Whole IPv4 datagrams received, with their source.
    pub(crate) queue: RecvQueue<Ipv4Addr>,
    /// Sends carry the caller's IPv4 header (`IP_HDRINCL`).
    pub(crate) hdrincl: bool,
}

/// Every raw socket of a stack.
#[derive(Debug, Default)]
pub(crate) struct RawSockets {
    pub(crate) sockets: Slab<RawSocket>,
    /// The open sockets and their protocols, for delivery (the slab does not iterate).
    pub(crate) open: Vec<(u8, RawHandle)>,
}
