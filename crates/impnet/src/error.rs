//! The core's typed errors as `std::io::Error`s: the kind a std::net user expects, the
//! core's message (what went wrong, what to do) as the text.

use std::io::{Error, ErrorKind};

use impnet_core::tcp::TcpError;
use impnet_core::{IcmpError, UdpError};

pub(crate) fn tcp(e: TcpError) -> Error {
    let kind = match e {
        TcpError::WouldBlock => ErrorKind::WouldBlock,
        TcpError::AddrInUse => ErrorKind::AddrInUse,
        TcpError::ConnectionReset => ErrorKind::ConnectionReset,
        TcpError::ConnectionRefused => ErrorKind::ConnectionRefused,
        TcpError::TimedOut => ErrorKind::TimedOut,
        TcpError::NoPortsAvailable => ErrorKind::AddrNotAvailable,
        TcpError::InvalidHandle | TcpError::InvalidState => ErrorKind::NotConnected,
        TcpError::HostUnreachable => ErrorKind::HostUnreachable,
        TcpError::NetUnreachable => ErrorKind::NetworkUnreachable,
        TcpError::Prohibited => ErrorKind::PermissionDenied,
        _ => ErrorKind::Other,
    };
    Error::new(kind, e)
}

pub(crate) fn udp(e: UdpError) -> Error {
    let kind = match e {
        UdpError::WouldBlock => ErrorKind::WouldBlock,
        UdpError::AddrInUse => ErrorKind::AddrInUse,
        UdpError::AddrNotAvailable | UdpError::NoPortsAvailable => ErrorKind::AddrNotAvailable,
        UdpError::MessageTooLong | UdpError::FragmentationNeeded { .. } => ErrorKind::InvalidInput,
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
        IcmpError::MessageTooLong => ErrorKind::InvalidInput,
        IcmpError::NoRoute | IcmpError::NetUnreachable => ErrorKind::NetworkUnreachable,
        IcmpError::HostUnreachable | IcmpError::Unreachable => ErrorKind::HostUnreachable,
        IcmpError::InvalidHandle => ErrorKind::NotConnected,
        _ => ErrorKind::Other,
    };
    Error::new(kind, e)
}

/// Only IPv4 is spoken.
pub(crate) fn v4(addr: std::net::SocketAddr) -> std::io::Result<std::net::SocketAddrV4> {
    match addr {
        std::net::SocketAddr::V4(a) => Ok(a),
        std::net::SocketAddr::V6(_) => Err(Error::new(
            ErrorKind::InvalidInput,
            "imp speaks IPv4 only: give an IPv4 address",
        )),
    }
}

/// The first IPv4 address `addr` names (literal addresses need no resolver).
pub(crate) fn resolve(
    addr: impl std::net::ToSocketAddrs,
) -> std::io::Result<std::net::SocketAddrV4> {
    let mut last = None;
    for a in addr.to_socket_addrs()? {
        match v4(a) {
            Ok(a) => return Ok(a),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| Error::new(ErrorKind::InvalidInput, "no address given")))
}
