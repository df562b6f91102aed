//! Per-socket settings shared by the std-like and tokio sockets: Linux's
//! `TCP_CONGESTION`, `SO_RCVBUF`, `SO_SNDBUF`, `TCP_MAXSEG` (listeners),
//! `TCP_USER_TIMEOUT`, `TCP_NOTSENT_LOWAT` as [`SocketOption`]s handed to the stack.

use std::io;
use std::time::Duration;

use impnet_core::tcp::{SocketOption, TcpHandle};

use crate::error;
use crate::runtime::Shared;

/// Hand `option` for `handle` to the stack.
pub(crate) fn set(shared: &Shared, handle: TcpHandle, option: SocketOption) -> io::Result<()> {
    shared
        .with(|state, now| state.stack.tcp_set_option(now, handle, option))?
        .map_err(error::tcp)
}

/// The name of `handle`'s congestion controller.
pub(crate) fn congestion(shared: &Shared, handle: TcpHandle) -> io::Result<&'static str> {
    shared
        .with(|state, _| state.stack.tcp_congestion(handle))?
        .ok_or_else(|| error::tcp(impnet_core::tcp::TcpError::InvalidHandle))
}

/// TCP_USER_TIMEOUT's option for `timeout` (None: the stack's).
pub(crate) fn user_timeout(timeout: Option<Duration>) -> SocketOption {
    let nanos = timeout.map_or(0, |t| u64::try_from(t.as_nanos()).unwrap_or(u64::MAX));
    SocketOption::UserTimeout(impnet_core::Duration::from_nanos(nanos))
}
