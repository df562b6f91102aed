//! The per-socket settings of [`TcpStream`] and [`TcpListener`] (see `sockopt.rs`).

use std::io;
use std::time::Duration;

use impnet_core::tcp::SocketOption;
use impnet_core::tcp::cc::CcAlgorithm;

use super::{TcpListener, TcpStream};
use crate::sockopt;

impl TcpStream {
    /// Set one of the connection's own settings, as Linux's per-socket options (see
    /// [`SocketOption`]): the congestion controller, the buffer sizes, the user timeout.
    pub fn set_option(&self, option: SocketOption) -> io::Result<()> {
        sockopt::set(&self.inner.shared, self.inner.handle, option)
    }

    /// Use `algorithm` for this connection's congestion control (Linux's
    /// `TCP_CONGESTION`): after the handshake it takes over from the current window.
    pub fn set_congestion(&self, algorithm: CcAlgorithm) -> io::Result<()> {
        self.set_option(SocketOption::Congestion(algorithm))
    }

    /// The name of the connection's congestion controller.
    pub fn congestion(&self) -> io::Result<&'static str> {
        sockopt::congestion(&self.inner.shared, self.inner.handle)
    }

    /// End the connection (`TimedOut`) when sent data stays unacknowledged this long
    /// (Linux's `TCP_USER_TIMEOUT`); None: the stack's setting.
    pub fn set_user_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.set_option(sockopt::user_timeout(timeout))
    }

    /// Keep at most `bytes` queued unsent (Linux's `TCP_NOTSENT_LOWAT`): a write
    /// takes no more than brings the unsent bytes to the limit, and the stream reports
    /// itself writable only while fewer than half of it wait. None: no limit.
    pub fn set_notsent_lowat(&self, bytes: Option<u32>) -> io::Result<()> {
        self.set_option(SocketOption::NotSentLowWater(bytes.unwrap_or(u32::MAX)))
    }
}

impl TcpListener {
    /// Set one of the settings the connections this listener accepts from now on
    /// start with (see [`SocketOption`]); `MaxSegment` caps the MSS their SYN-ACKs
    /// announce.
    pub fn set_option(&self, option: SocketOption) -> io::Result<()> {
        sockopt::set(&self.shared, self.handle, option)
    }

    /// The congestion controller the accepted connections start with.
    pub fn set_congestion(&self, algorithm: CcAlgorithm) -> io::Result<()> {
        self.set_option(SocketOption::Congestion(algorithm))
    }
}
