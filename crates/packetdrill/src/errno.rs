//! Linux's errno values, as the shim's calls return them.

use impnet_core::tcp::TcpError;

/// A Linux errno value.
pub type Errno = i32;

/// The errno-like result of a wait whose deadline passed (poll's timeout).
pub const TIMED_OUT: Errno = -1;

/// Linux's errno for a TCP error.
pub fn errno_of(error: TcpError) -> Errno {
    match error {
        TcpError::InvalidHandle => libc::EBADF,
        TcpError::AddrInUse => libc::EADDRINUSE,
        TcpError::ConnectionReset => libc::ECONNRESET,
        TcpError::ConnectionRefused => libc::ECONNREFUSED,
        TcpError::TimedOut => libc::ETIMEDOUT,
        TcpError::InvalidState => libc::ENOTCONN,
        TcpError::Closing => libc::EPIPE,
        TcpError::AddrNotAvailable | TcpError::NoPortsAvailable => libc::EADDRNOTAVAIL,
        TcpError::HostUnreachable | TcpError::Prohibited => libc::EHOSTUNREACH,
        TcpError::NetUnreachable => libc::ENETUNREACH,
        TcpError::TooManyConnections => libc::ENOBUFS,
        TcpError::BufferTooLarge => libc::EMSGSIZE,
        _ => libc::EAGAIN,
    }
}
