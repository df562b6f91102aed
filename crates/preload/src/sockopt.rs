//! `getsockopt` and `setsockopt` on imp sockets, for options whose value is an int.
//!
//! Acted on: `SO_ERROR` (read), `SO_TYPE`, `SO_DOMAIN`, `SO_PROTOCOL`,
//! `SO_ACCEPTCONN` (read), `SO_RCVBUF`, `SO_SNDBUF`, `TCP_NODELAY`, `TCP_MAXSEG`
//! (read); `TCP_INFO` and `TCP_CONGESTION` (read) in `ffi.rs`. Accepted and
//! remembered (read back as set) but not acted on: `SO_REUSEADDR`, `SO_REUSEPORT`,
//! `SO_KEEPALIVE`, `TCP_KEEPIDLE`, `TCP_KEEPINTVL`, `TCP_KEEPCNT`, `IPV6_V6ONLY`,
//! `IP_TOS`, `IPV6_TCLASS`. Anything else: `EOPNOTSUPP` and a line on stderr.

use std::io;

use impnet::core::tcp::SocketOption;
use libc::c_int;

use crate::errno::{code_of, unsupported};
use crate::socket::Socket;

/// The buffer size reported when the program set none (Linux's default `SO_RCVBUF`).
const DEFAULT_BUFFER: c_int = 131_072;

/// Options kept and read back without effect on imp.
const REMEMBERED: &[(c_int, c_int)] = &[
    (libc::SOL_SOCKET, libc::SO_REUSEADDR),
    (libc::SOL_SOCKET, libc::SO_REUSEPORT),
    (libc::SOL_SOCKET, libc::SO_KEEPALIVE),
    (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE),
    (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL),
    (libc::IPPROTO_TCP, libc::TCP_KEEPCNT),
    (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY),
    (libc::IPPROTO_IP, libc::IP_TOS),
    (libc::IPPROTO_IPV6, libc::IPV6_TCLASS),
];

/// `getsockopt(level, name)` as an int.
pub(crate) fn get(s: &Socket, level: c_int, name: c_int) -> io::Result<c_int> {
    let options = s.options();
    let size = |bytes: Option<usize>| {
        bytes.map_or(DEFAULT_BUFFER, |b| {
            c_int::try_from(b * 2).unwrap_or(c_int::MAX)
        })
    };
    Ok(match (level, name) {
        (libc::SOL_SOCKET, libc::SO_ERROR) => s.take_error()?.map_or(0, |e| code_of(&e)),
        (libc::SOL_SOCKET, libc::SO_TYPE) => libc::SOCK_STREAM,
        (libc::SOL_SOCKET, libc::SO_DOMAIN) => s.domain,
        (libc::SOL_SOCKET, libc::SO_PROTOCOL) => libc::IPPROTO_TCP,
        (libc::SOL_SOCKET, libc::SO_ACCEPTCONN) => c_int::from(s.listening()),
        (libc::SOL_SOCKET, libc::SO_RCVBUF) => size(options.recv_buffer),
        (libc::SOL_SOCKET, libc::SO_SNDBUF) => size(options.send_buffer),
        (libc::IPPROTO_TCP, libc::TCP_NODELAY) => c_int::from(options.nodelay),
        // The connection's MSS, Linux's 536 before there is one.
        (libc::IPPROTO_TCP, libc::TCP_MAXSEG) => s.mss().map_or(536, c_int::from),
        key if REMEMBERED.contains(&key) => options
            .remembered
            .iter()
            .find(|(k, _)| *k == key)
            .map_or(0, |(_, v)| *v),
        _ => {
            return Err(unsupported(&format!(
                "getsockopt(level {level}, option {name})"
            )));
        }
    })
}

/// `setsockopt(level, name, value)` for an int value.
pub(crate) fn set(s: &Socket, level: c_int, name: c_int, value: c_int) -> io::Result<()> {
    let bytes = usize::try_from(value).unwrap_or(0);
    match (level, name) {
        (libc::IPPROTO_TCP, libc::TCP_NODELAY) => {
            s.set_options(|o| o.nodelay = value != 0, |t| t.set_nodelay(value != 0))
        }
        (libc::SOL_SOCKET, libc::SO_RCVBUF) => s.set_options(
            |o| o.recv_buffer = Some(bytes),
            |t| t.set_option(SocketOption::RecvBuffer(bytes * 2)),
        ),
        (libc::SOL_SOCKET, libc::SO_SNDBUF) => s.set_options(
            |o| o.send_buffer = Some(bytes),
            |t| t.set_option(SocketOption::SendBuffer(bytes * 2)),
        ),
        key if REMEMBERED.contains(&key) => s.set_options(
            |o| {
                o.remembered.retain(|(k, _)| *k != key);
                o.remembered.push((key, value));
            },
            |_| Ok(()),
        ),
        _ => Err(unsupported(&format!(
            "setsockopt(level {level}, option {name})"
        ))),
    }
}
