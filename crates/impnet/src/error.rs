//! The core's typed errors as `std::io::Error`s: the kind a std::net user expects, the
//! core's message (what went wrong, what to do) as the text.

use std::io::{Error, ErrorKind};
use std::sync::atomic::{AtomicBool, Ordering};

use impnet_core::tcp::TcpError;
use impnet_core::{IcmpError, UdpError};

/// A [`TcpError`] as the `io::Error` a `std::net` user on Linux gets in the same case:
/// the table is in the crate's documentation (`lib.rs`, "Errors").
pub(crate) fn tcp(e: TcpError) -> Error {
    let kind = match e {
        TcpError::WouldBlock => ErrorKind::WouldBlock,
        TcpError::AddrInUse => ErrorKind::AddrInUse,
        TcpError::ConnectionReset => ErrorKind::ConnectionReset,
        TcpError::ConnectionRefused => ErrorKind::ConnectionRefused,
        TcpError::TimedOut => ErrorKind::TimedOut,
        TcpError::NoPortsAvailable | TcpError::AddrNotAvailable => ErrorKind::AddrNotAvailable,
        TcpError::InvalidHandle | TcpError::InvalidState => ErrorKind::NotConnected,
        TcpError::Closing => ErrorKind::BrokenPipe,
        TcpError::HostUnreachable | TcpError::Prohibited => ErrorKind::HostUnreachable,
        TcpError::NetUnreachable => ErrorKind::NetworkUnreachable,
        // `TcpConfig::max_connections` reached: where Linux runs out of descriptors
        // (EMFILE, ENFILE) std has no kind of its own either.
        TcpError::TooManyConnections => ErrorKind::Other,
        TcpError::BufferTooLarge => ErrorKind::InvalidInput,
        _ => ErrorKind::Other,
    };
    Error::new(kind, e)
}

/// Whether a connection's ending error has been reported to the application yet:
/// Linux reports it once (to the first read, write or `SO_ERROR`), then reads see
/// the end of the stream and writes a broken pipe. Shared by every clone of a stream.
#[derive(Debug, Default)]
pub(crate) struct Ended(AtomicBool);

impl Ended {
    /// Mark the error reported; true if it was not before.
    fn first(&self) -> bool {
        !self.0.swap(true, Ordering::AcqRel)
    }

    /// What a read gets for the core's error `e` (not `WouldBlock`).
    pub(crate) fn read(&self, e: TcpError) -> std::io::Result<usize> {
        if e.ends_connection() && !self.first() {
            return Ok(0);
        }
        Err(tcp(e))
    }

    /// What a write gets for the core's error `e` (not `WouldBlock`).
    pub(crate) fn write(&self, e: TcpError) -> Error {
        if e.ends_connection() && !self.first() {
            return Error::new(
                ErrorKind::BrokenPipe,
                format!("broken pipe: the connection has ended ({e})"),
            );
        }
        tcp(e)
    }

    /// `take_error`: the connection's error if nothing reported it yet.
    pub(crate) fn take(&self, error: Option<TcpError>) -> Option<Error> {
        error.filter(|_| self.first()).map(tcp)
    }
}

/// `peer_addr` of a connection in `state` (None: the handle is gone): the peer while
/// the connection is open, `NotConnected` once it has ended (as Linux's
/// `getpeername`).
pub(crate) fn peer(
    state: Option<impnet_core::tcp::TcpState>,
    peer: std::net::SocketAddr,
) -> std::io::Result<std::net::SocketAddr> {
    match state {
        Some(impnet_core::tcp::TcpState::Closed) | None => Err(Error::new(
            ErrorKind::NotConnected,
            "not connected: the connection has ended",
        )),
        Some(_) => Ok(peer),
    }
}

pub(crate) fn udp(e: UdpError) -> Error {
    let kind = match e {
        UdpError::WouldBlock => ErrorKind::WouldBlock,
        UdpError::AddrInUse => ErrorKind::AddrInUse,
        UdpError::AddrNotAvailable | UdpError::NoPortsAvailable => ErrorKind::AddrNotAvailable,
        UdpError::MessageTooLong
        | UdpError::FragmentationNeeded { .. }
        | UdpError::InvalidGroup => ErrorKind::InvalidInput,
        UdpError::NoRoute | UdpError::NetUnreachable => ErrorKind::NetworkUnreachable,
        UdpError::HostUnreachable => ErrorKind::HostUnreachable,
        UdpError::PortUnreachable => ErrorKind::ConnectionRefused,
        UdpError::InvalidHandle => ErrorKind::NotConnected,
        _ => ErrorKind::Other,
    };
    Error::new(kind, e)
}

pub(crate) fn icmp(e: IcmpError) -> Error {
    let kind = match e {
        IcmpError::WouldBlock => ErrorKind::WouldBlock,
        IcmpError::IdentInUse => ErrorKind::AddrInUse,
        IcmpError::MessageTooLong | IcmpError::OptionsOnIpv6 => ErrorKind::InvalidInput,
        IcmpError::NoRoute | IcmpError::NetUnreachable => ErrorKind::NetworkUnreachable,
        IcmpError::HostUnreachable | IcmpError::Unreachable => ErrorKind::HostUnreachable,
        IcmpError::InvalidHandle => ErrorKind::NotConnected,
        _ => ErrorKind::Other,
    };
    Error::new(kind, e)
}

/// The first address `addr` names, of either family (TCP speaks both).
pub(crate) fn resolve_any(
    addr: impl std::net::ToSocketAddrs,
) -> std::io::Result<std::net::SocketAddr> {
    addr.to_socket_addrs()?
        .next()
        .ok_or_else(|| Error::new(ErrorKind::InvalidInput, "no address given"))
}

/// The unspecified address of `like`'s family, port 0: a local end the stack fills in.
pub(crate) fn unspecified_like(like: std::net::SocketAddr) -> std::net::SocketAddr {
    let ip: std::net::IpAddr = match like {
        std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
        std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
    };
    std::net::SocketAddr::new(ip, 0)
}
