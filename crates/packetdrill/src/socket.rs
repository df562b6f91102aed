//! A file descriptor of the shim and a TCP socket's state: its phase, the options the
//! application set, and what the socket keeps of its own (Fast Open settings, the error
//! queue, the send-buffer model). The calls on them are [`Shim`](crate::shim::Shim)'s.

use std::collections::VecDeque;
use std::net::SocketAddr;

use impnet_core::tcp::{SocketOption, TcpHandle};

/// What a file descriptor of the shim is.
#[derive(Debug)]
pub enum Fd {
    /// A TCP socket.
    Tcp(TcpSocket),
    /// An epoll instance.
    Epoll(crate::poll::Epoll),
}

/// Where a TCP socket is in its life, as the application sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Made by `socket`, maybe bound.
    Fresh {
        /// The address `bind` gave.
        bound: Option<SocketAddr>,
    },
    /// Listening.
    Listener(TcpHandle),
    /// Connecting or connected.
    Conn(TcpHandle),
}

/// Socket options as the application set them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// SO_REUSEADDR (kept for getsockopt; imp's listeners never wait for TIME-WAIT).
    pub reuse_addr: bool,
    /// SO_SNDBUF as set (getsockopt reports it doubled, as Linux does).
    pub sndbuf: Option<i32>,
    /// SO_RCVBUF as set.
    pub rcvbuf: Option<i32>,
    /// TCP_NODELAY.
    pub nodelay: bool,
    /// TCP_CORK.
    pub cork: bool,
    /// TCP_MAXSEG: the MSS to announce on connect.
    pub maxseg: Option<u16>,
    /// SO_LINGER (on, seconds).
    pub linger: Option<(bool, i32)>,
    /// SO_KEEPALIVE (kept for getsockopt).
    pub keepalive: bool,
    /// TCP_CONGESTION as set (None: the stack's).
    pub congestion: Option<impnet_core::tcp::cc::CcAlgorithm>,
    /// TCP_USER_TIMEOUT in milliseconds (0: the stack's).
    pub user_timeout: u32,
    /// TCP_NOTSENT_LOWAT (None: no limit).
    pub notsent_lowat: Option<u32>,
    /// TCP_INQ: each `recvmsg` reports the bytes left to read in a TCP_CM_INQ message.
    pub inq: bool,
    /// SO_ZEROCOPY: MSG_ZEROCOPY sends are numbered and reported complete on the error
    /// queue ([`crate::errqueue`]).
    pub zerocopy: bool,
    /// SO_MARK (kept for getsockopt; imp routes without marks).
    pub mark: i32,
    /// TCP_SYNCNT (None: the stack's SYN retransmissions).
    pub syncnt: Option<u8>,
    /// TCP_KEEPIDLE, TCP_KEEPINTVL (seconds) and TCP_KEEPCNT as set (kept for
    /// getsockopt, as SO_KEEPALIVE: the stack's keep-alive is its configuration's).
    pub keepidle: Option<i32>,
    pub keepintvl: Option<i32>,
    pub keepcnt: Option<i32>,
}

impl Options {
    /// What an accepted socket takes from its listener (Linux's `sk_clone_lock` copies
    /// the socket; the stack's child already holds the stack-side settings).
    pub(crate) fn inherited(&self) -> Options {
        Options {
            nodelay: self.nodelay,
            sndbuf: self.sndbuf,
            rcvbuf: self.rcvbuf,
            keepalive: self.keepalive,
            congestion: self.congestion,
            user_timeout: self.user_timeout,
            notsent_lowat: self.notsent_lowat,
            inq: self.inq,
            zerocopy: self.zerocopy,
            mark: self.mark,
            syncnt: self.syncnt,
            keepidle: self.keepidle,
            keepintvl: self.keepintvl,
            keepcnt: self.keepcnt,
            ..Options::default()
        }
    }

    /// The settings the stack keeps per socket, as they stand: for a socket that
    /// connects or listens after setting them.
    pub(crate) fn stack_options(&self) -> Vec<SocketOption> {
        let mut out = Vec::new();
        if let Some(cc) = self.congestion {
            out.push(SocketOption::Congestion(cc));
        }
        if let Some(bytes) = self.rcvbuf {
            out.push(SocketOption::RecvBuffer(receive_window_space(bytes)));
        }
        if let Some(bytes) = self.sndbuf {
            out.push(SocketOption::SendBuffer(stack_send_buffer(bytes)));
        }
        if self.user_timeout != 0 {
            let ms = u64::from(self.user_timeout);
            out.push(SocketOption::UserTimeout(
                impnet_core::Duration::from_millis(ms),
            ));
        }
        if let Some(count) = self.syncnt {
            out.push(SocketOption::SynRetries(count));
        }
        out
    }
}

/// The receive window SO_RCVBUF's `asked` bytes give on Linux: of the doubled
/// buffer, the half its default `scaling_ratio` counts as payload
/// (`tcp_win_from_space`), so what was asked; the window scale follows from it
/// (`tcp_select_initial_window` with the window clamp a locked buffer sets).
pub(crate) fn receive_window_space(asked: i32) -> usize {
    linux_buffer(asked) / 2
}

/// SO_SNDBUF's and SO_RCVBUF's size as Linux keeps it: twice what was asked (for its
/// bookkeeping overhead, socket(7)).
pub(crate) fn linux_buffer(asked: i32) -> usize {
    asked.unsigned_abs() as usize * 2
}

/// The stack's send buffer for SO_SNDBUF's `asked` bytes: room for all Linux's
/// accounting lets a write take (its `sk_sndbuf`, passed by up to one 64 KiB skb);
/// [`crate::sndbuf`] decides how much that is.
pub(crate) fn stack_send_buffer(asked: i32) -> usize {
    crate::sndbuf::locked_sndbuf(asked) + 64 * 1024
}

/// One TCP socket.
#[derive(Debug)]
pub struct TcpSocket {
    /// Its phase.
    pub phase: Phase,
    /// O_NONBLOCK.
    pub nonblocking: bool,
    /// Options.
    pub options: Options,
    /// The connection's ending error was returned once already.
    pub error_reported: bool,
    /// `shutdown(SHUT_RD)`: reads with nothing queued see end of stream.
    pub read_shut: bool,
    /// The last write had MSG_MORE (its tail may wait for the peer's next segment).
    pub more_corked: bool,
    /// Made with `AF_INET6`: its addresses are IPv6 ones (an IPv4 peer shows mapped,
    /// `::ffff:a.b.c.d`).
    pub v6: bool,
    /// A listener's connections taken from the stack's accept queue (to see whether one
    /// waits) and not yet handed to `accept`.
    pub ready: VecDeque<TcpHandle>,
    /// TCP Fast Open settings.
    pub fast_open: crate::fastopen::SocketFastOpen,
    /// The error queue: zero-copy completions and transmit timestamps (boxed: most
    /// sockets never use it).
    pub errq: Box<crate::errqueue::ErrQueue>,
    /// The send buffer as Linux accounts for it ([`crate::sndbuf`]).
    pub send: Box<crate::sndbuf::SendModel>,
}

impl TcpSocket {
    pub(crate) fn new(phase: Phase, v6: bool) -> TcpSocket {
        TcpSocket {
            phase,
            v6,
            nonblocking: false,
            options: Options::default(),
            error_reported: false,
            read_shut: false,
            more_corked: false,
            ready: VecDeque::new(),
            fast_open: Default::default(),
            errq: Default::default(),
            send: {
                let mut model = Box::<crate::sndbuf::SendModel>::default();
                model.sysctl_lowat = u32::MAX;
                model
            },
        }
    }
}
