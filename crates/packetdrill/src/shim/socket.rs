//! Socket calls on imp's TCP sockets, as Linux answers them.
//!
//! Every call returns `Ok` or a Linux errno; `EAGAIN` means "would block", and the
//! caller ([`crate::driver`]) decides whether to wait. An ending error (reset, refused,
//! timed out) is reported once, as Linux's `sk_err` is: after it reads see end of
//! stream and writes `EPIPE`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use impnet_core::tcp::{SocketOption, TcpError, TcpHandle, TcpState};

use crate::errno::{Errno, errno_of};
use crate::gather::take;
use crate::socket::{Fd, Phase, TcpSocket};

use super::Shim;

impl Shim {
    pub(crate) fn tcp_socket(&mut self, fd: i32) -> Result<&mut TcpSocket, Errno> {
        match self.fds.get_mut(&fd) {
            Some(Fd::Tcp(socket)) => Ok(socket),
            Some(Fd::Epoll(_)) => Err(libc::ENOTSOCK),
            None => Err(libc::EBADF),
        }
    }

    fn conn_of(&mut self, fd: i32) -> Result<TcpHandle, Errno> {
        match self.tcp_socket(fd)?.phase {
            Phase::Conn(handle) => Ok(handle),
            _ => Err(libc::ENOTCONN),
        }
    }

    /// `socket(AF_INET or AF_INET6, SOCK_STREAM, 0 or IPPROTO_TCP)`.
    pub fn socket(&mut self, domain: i32, kind: i32, protocol: i32) -> Result<i32, Errno> {
        if domain != libc::AF_INET && domain != libc::AF_INET6 {
            return Err(libc::EAFNOSUPPORT);
        }
        let base = kind & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
        if base != libc::SOCK_STREAM || (protocol != 0 && protocol != libc::IPPROTO_TCP) {
            return Err(libc::EPROTONOSUPPORT);
        }
        self.read_sysctls();
        let fd = self.free_fd();
        let mut socket = TcpSocket::new(Phase::Fresh { bound: None }, domain == libc::AF_INET6);
        socket.nonblocking = kind & libc::SOCK_NONBLOCK != 0;
        socket.send.wmem = self.wmem();
        socket.send.min_tso_segs = self.min_tso_segs();
        socket.send.sysctl_lowat = self.sysctl_lowat();
        self.fds.insert(fd, Fd::Tcp(socket));
        Ok(fd)
    }

    /// `bind`.
    pub fn bind(&mut self, fd: i32, addr: SocketAddr) -> Result<i32, Errno> {
        let addr = self.stack_address(fd, addr)?;
        if !self.bindable(addr) {
            return Err(libc::EADDRNOTAVAIL);
        }
        let socket = self.tcp_socket(fd)?;
        match socket.phase {
            Phase::Fresh { bound: None } => {
                socket.phase = Phase::Fresh { bound: Some(addr) };
                Ok(0)
            }
            _ => Err(libc::EINVAL),
        }
    }

    /// `listen`: imp's backlog counts half-open connections too, Linux's accept queue
    /// holds one more than asked; one more is given.
    pub fn listen(&mut self, fd: i32, backlog: i32) -> Result<i32, Errno> {
        let asked = backlog;
        let socket = self.tcp_socket(fd)?;
        let local = match socket.phase {
            Phase::Fresh { bound: Some(local) } if local.port() != 0 => local,
            Phase::Listener(_) => return Ok(0),
            Phase::Fresh { .. } => return Err(libc::EINVAL),
            Phase::Conn(_) => return Err(libc::EINVAL),
        };
        let backlog = usize::try_from(backlog).unwrap_or(0).clamp(1, 4096) + 1;
        let options = socket.options.stack_options();
        let handle = self.stack.tcp_listen(local, backlog).map_err(errno_of)?;
        self.apply_options(handle, &options);
        self.tcp_socket(fd)?.phase = Phase::Listener(handle);
        self.listen_fast_open(fd, handle, asked);
        self.flush();
        Ok(0)
    }

    /// `accept` without waiting: the new fd and the peer's address.
    pub fn accept(&mut self, fd: i32) -> Result<(i32, SocketAddr), Errno> {
        self.fill_ready(fd)?;
        let socket = self.tcp_socket(fd)?;
        let child = socket.ready.pop_front().ok_or(libc::EAGAIN)?;
        let (inherited, v6) = (socket.options.inherited(), socket.v6);
        // Linux's sk_clone_lock copies SO_TIMESTAMPING's flags too.
        let ts_flags = socket.errq.ts_flags;
        let (wmem, sysctl_lowat) = (socket.send.wmem, socket.send.sysctl_lowat);
        let min_tso_segs = socket.send.min_tso_segs;
        let nodelay = inherited.nodelay;
        let remote = self
            .stack
            .tcp_addresses(child)
            .map_or(unspecified(v6), |(_, r)| user_address(r, v6));
        let new_fd = self.free_fd();
        let mut new = TcpSocket::new(Phase::Conn(child), v6);
        new.options = inherited;
        new.errq.ts_flags = ts_flags;
        new.send.wmem = wmem;
        new.send.min_tso_segs = min_tso_segs;
        new.send.sysctl_lowat = sysctl_lowat;
        if nodelay {
            let _ = self.stack.tcp_set_nodelay(child, true);
        }
        self.fds.insert(new_fd, Fd::Tcp(new));
        self.flush();
        Ok((new_fd, remote))
    }

    /// Move the listener's established connections from the stack to `ready`.
    pub(crate) fn fill_ready(&mut self, fd: i32) -> Result<(), Errno> {
        let Phase::Listener(listener) = self.tcp_socket(fd)?.phase else {
            return Err(libc::EINVAL);
        };
        while let Ok(child) = self.stack.tcp_accept(listener) {
            self.tcp_socket(fd)?.ready.push_back(child);
        }
        Ok(())
    }

    /// `connect`: starts the handshake (the caller waits for it, or says EINPROGRESS).
    pub fn connect(&mut self, fd: i32, remote: SocketAddr) -> Result<i32, Errno> {
        let remote = self.stack_address(fd, remote)?;
        if let Phase::Conn(handle) = self.tcp_socket(fd)?.phase {
            return self.connect_again(fd, handle);
        }
        self.open(fd, remote)?;
        self.flush();
        Err(libc::EINPROGRESS)
    }

    /// The connection of a fresh socket to `remote` (the stack's form of the address),
    /// its SYN not sent yet.
    pub(crate) fn open(&mut self, fd: i32, remote: SocketAddr) -> Result<TcpHandle, Errno> {
        let socket = self.tcp_socket(fd)?;
        let options = socket.options.stack_options();
        let (bound, maxseg, nodelay) = match socket.phase {
            Phase::Fresh { bound } => (bound, socket.options.maxseg, socket.options.nodelay),
            Phase::Conn(_) | Phase::Listener(_) => return Err(libc::EISCONN),
        };
        let v6 = remote.is_ipv6();
        if bound.is_some_and(|b| b.is_ipv6() != v6) {
            return Err(libc::EINVAL);
        }
        let port = bound.map_or(0, |b| b.port());
        let ip = bound
            .map(|b| b.ip())
            .filter(|ip| !ip.is_unspecified())
            .unwrap_or(self.local_ip(v6));
        let local = SocketAddr::new(ip, port);
        let route_mss = self.route_mss(v6);
        let mss = maxseg.unwrap_or(route_mss).min(route_mss);
        let now = self.now;
        let handle = self
            .stack
            .tcp_connect_with_mss(now, local, remote, mss)
            .map_err(errno_of)?;
        // Before the stack is polled: the SYN goes with them (its window scale).
        self.apply_options(handle, &options);
        if nodelay {
            let _ = self.stack.tcp_set_nodelay(handle, true);
        }
        self.tcp_socket(fd)?.phase = Phase::Conn(handle);
        Ok(handle)
    }

    /// Hand the stack a socket's settings.
    pub(crate) fn apply_options(&mut self, handle: TcpHandle, options: &[SocketOption]) {
        let now = self.now;
        for &option in options {
            let _ = self.stack.tcp_set_option(now, handle, option);
        }
    }

    /// TCP_INQ's hint after a read: the bytes left to read, or 1 after the peer's FIN
    /// when none are (Linux's `tcp_inq_hint`: "tell the user-space to continue reading
    /// by returning a non-zero inq"); None without TCP_INQ.
    pub fn inq_hint(&mut self, fd: i32) -> Result<Option<i32>, Errno> {
        let socket = self.tcp_socket(fd)?;
        let Phase::Conn(handle) = socket.phase else {
            return Ok(None);
        };
        if !socket.options.inq {
            return Ok(None);
        }
        let readable = self.stack.tcp_readable(handle);
        let fin = matches!(
            self.stack.tcp_info(handle).map(|i| i.state),
            Some(
                TcpState::CloseWait
                    | TcpState::LastAck
                    | TcpState::Closing
                    | TcpState::TimeWait
                    | TcpState::Closed
            )
        );
        let inq = match readable {
            0 if fin => 1,
            n => i32::try_from(n).unwrap_or(i32::MAX),
        };
        Ok(Some(inq))
    }

    /// `connect` on a socket already connecting or connected.
    fn connect_again(&mut self, fd: i32, handle: TcpHandle) -> Result<i32, Errno> {
        match self.stack.tcp_info(handle).map(|i| i.state) {
            Some(TcpState::SynSent | TcpState::SynReceived) => Err(libc::EALREADY),
            Some(TcpState::Closed) | None => match self.take_error(fd)? {
                Some(errno) => Err(errno),
                None => Err(libc::EISCONN),
            },
            Some(_) => Err(libc::EISCONN),
        }
    }

    /// Whether a connect on `fd` finished: `Ok(0)` connected, `EAGAIN` still
    /// connecting, else its error.
    pub fn connect_done(&mut self, fd: i32) -> Result<i32, Errno> {
        let handle = self.conn_of(fd)?;
        match self.stack.tcp_info(handle).map(|i| i.state) {
            Some(TcpState::SynSent | TcpState::SynReceived) => Err(libc::EAGAIN),
            Some(TcpState::Closed) | None => match self.take_error(fd)? {
                Some(errno) => Err(errno),
                None => Ok(0),
            },
            Some(_) => Ok(0),
        }
    }

    /// The connection's ending error if not yet reported (SO_ERROR): taken.
    pub(crate) fn take_error(&mut self, fd: i32) -> Result<Option<Errno>, Errno> {
        let socket = self.tcp_socket(fd)?;
        let Phase::Conn(handle) = socket.phase else {
            return Ok(None);
        };
        if socket.error_reported {
            return Ok(None);
        }
        let error = self.stack.tcp_error(handle).ok().flatten();
        if error.is_some() {
            self.tcp_socket(fd)?.error_reported = true;
        }
        Ok(error.map(errno_of))
    }

    /// An error from a read or write: an ending error once, then `then`.
    fn ending(
        &mut self,
        fd: i32,
        error: TcpError,
        then: Result<usize, Errno>,
    ) -> Result<usize, Errno> {
        if !error.ends_connection() {
            return Err(errno_of(error));
        }
        let socket = self.tcp_socket(fd)?;
        if socket.error_reported {
            then
        } else {
            socket.error_reported = true;
            Err(errno_of(error))
        }
    }

    /// A read into `bufs` (scatter), without waiting; `peek` leaves the data.
    pub fn read(&mut self, fd: i32, bufs: &mut [&mut [u8]], peek: bool) -> Result<usize, Errno> {
        let socket = self.tcp_socket(fd)?;
        let read_shut = socket.read_shut;
        let Phase::Conn(handle) = socket.phase else {
            // A deferred Fast Open connect reads as connecting (Linux: SYN-SENT).
            return Err(if socket.fast_open.deferred.is_some() {
                libc::EAGAIN
            } else {
                libc::ENOTCONN
            });
        };
        // After SHUT_RD Linux still delivers what arrives (it ACKs and queues it), and
        // a read with nothing queued sees end of stream instead of blocking.
        if read_shut && self.stack.tcp_readable(handle) == 0 {
            return Ok(0);
        }
        let wanted: usize = bufs.iter().map(|b| b.len()).sum();
        if wanted == 0 {
            return Ok(0);
        }
        let result = if peek {
            self.peek_into(handle, bufs)
        } else {
            self.read_into(handle, bufs)
        };
        self.flush();
        match result {
            Ok(n) => Ok(n),
            Err(TcpError::WouldBlock) => Err(libc::EAGAIN),
            Err(TcpError::InvalidState) if self.connecting(handle) => Err(libc::EAGAIN),
            Err(error) => self.ending(fd, error, Ok(0)),
        }
    }

    fn read_into(&mut self, handle: TcpHandle, bufs: &mut [&mut [u8]]) -> Result<usize, TcpError> {
        let mut total = 0;
        for buf in bufs.iter_mut() {
            match self.stack.tcp_recv(self.now, handle, buf) {
                Ok(0) => break,
                Ok(n) => {
                    total += n;
                    if n < buf.len() {
                        break;
                    }
                }
                Err(_) if total > 0 => break,
                Err(error) => return Err(error),
            }
        }
        Ok(total)
    }

    fn peek_into(&mut self, handle: TcpHandle, bufs: &mut [&mut [u8]]) -> Result<usize, TcpError> {
        let mut copied = 0;
        let now = self.now;
        self.stack.tcp_recv_with(now, handle, |data| {
            let mut rest = data;
            for buf in bufs.iter_mut() {
                let n = buf.len().min(rest.len());
                buf[..n].copy_from_slice(&rest[..n]);
                rest = &rest[n..];
                copied += n;
            }
            0
        })?;
        Ok(copied)
    }

    fn connecting(&mut self, handle: TcpHandle) -> bool {
        matches!(
            self.stack.tcp_info(handle).map(|i| i.state),
            Some(TcpState::SynSent | TcpState::SynReceived)
        )
    }

    /// A write of `bufs` (gather), without waiting: what fit.
    ///
    /// What fits is what Linux's send buffer would take ([`crate::sndbuf`]): skbs of
    /// the size goal while their truesize stays below SO_SNDBUF (doubled, at least
    /// 4608) or the buffer `tcp_wmem` starts and the congestion window grows, and, with
    /// TCP_NOTSENT_LOWAT, while fewer unsent bytes than the limit are queued.
    pub fn write(&mut self, fd: i32, bufs: &[&[u8]]) -> Result<usize, Errno> {
        // Linux's `sk_stream_wait_connect`: a socket neither connecting nor connected
        // (TCP_CLOSE, TCP_LISTEN) is EPIPE.
        let handle = self.conn_of(fd).map_err(|e| match e {
            libc::ENOTCONN => libc::EPIPE,
            e => e,
        })?;
        if bufs.iter().all(|b| b.is_empty()) {
            return Ok(0);
        }
        // Linux's `tcp_sendmsg` waits for the handshake (`sk_stream_wait_connect`),
        // though imp would queue the data (a Fast Open connect's SYN-SENT takes it).
        if self.connecting(handle) {
            return Err(libc::EAGAIN);
        }
        let want: usize = bufs.iter().map(|b| b.len()).sum();
        let room = self.write_room(fd, want)?;
        if room == 0 && self.stack.tcp_error(handle).ok().flatten().is_none() {
            return Err(libc::EAGAIN);
        }
        let bufs = take(bufs, room.max(1));
        let now = self.now;
        let result = self
            .stack
            .tcp_send_vectored(now, handle, bufs.iter().copied());
        self.wrote(fd, room, *result.as_ref().unwrap_or(&0))?;
        if let Ok(n) = result {
            self.tcp_socket(fd)?.errq.written += n as u64;
        }
        self.flush();
        match result {
            Ok(0) => Err(libc::EAGAIN),
            Ok(n) => Ok(n),
            Err(TcpError::WouldBlock) => Err(libc::EAGAIN),
            Err(TcpError::InvalidState) if self.connecting(handle) => Err(libc::EAGAIN),
            Err(TcpError::InvalidState) => Err(libc::EPIPE),
            Err(error) => self.ending(fd, error, Err(libc::EPIPE)),
        }
    }

    /// MSG_MORE on a write, as Linux's `tcp_sendmsg` treats it: the write does not end
    /// with a push (no PSH at its end) and is corked while it is made; its partial tail
    /// goes on the peer's next segment, as Nagle or no-delay allow (the stack's
    /// `tcp_set_more`).
    pub fn more_coming(&mut self, fd: i32, more: bool) -> Result<(), Errno> {
        let socket = self.tcp_socket(fd)?;
        let Phase::Conn(handle) = socket.phase else {
            return Ok(());
        };
        socket.more_corked = more;
        let _ = self.stack.tcp_set_more(handle, more);
        Ok(())
    }

    /// MSG_EOR on a write taken whole: the record ends with it, so no segment carries
    /// its end and later data together (the stack's `tcp_end_record`).
    pub fn end_record(&mut self, fd: i32) -> Result<(), Errno> {
        let socket = self.tcp_socket(fd)?;
        if let Phase::Conn(handle) = socket.phase {
            let _ = self.stack.tcp_end_record(handle);
        }
        Ok(())
    }

    /// The most bytes a blocking Fast Open write hands the stack before the
    /// handshake: SO_SNDBUF as Linux keeps it, else the stack's buffer.
    pub(crate) fn send_limit(&mut self, fd: i32) -> Result<usize, Errno> {
        let sndbuf = self.tcp_socket(fd)?.options.sndbuf;
        Ok(sndbuf.map_or(self.flags.sndbuf, crate::sndbuf::locked_sndbuf))
    }

    /// `close`. A connection with unread data, or with SO_LINGER on and a zero
    /// timeout, is reset, as Linux does (RFC 2525 §2.17); otherwise it closes
    /// gracefully in the background.
    pub fn close(&mut self, fd: i32) -> Result<i32, Errno> {
        let Some(entry) = self.fds.remove(&fd) else {
            return Err(libc::EBADF);
        };
        Shim::release_fd(fd);
        let Fd::Tcp(socket) = entry else {
            return Ok(0);
        };
        let now = self.now;
        match socket.phase {
            Phase::Fresh { .. } => {}
            Phase::Listener(handle) => {
                for child in socket.ready {
                    let _ = self.stack.tcp_abort(now, child);
                }
                let _ = self.stack.tcp_close(now, handle);
            }
            Phase::Conn(handle) => {
                let unread = self.stack.tcp_readable(handle) > 0;
                let zero_linger = socket.options.linger == Some((true, 0));
                if unread || zero_linger {
                    let _ = self.stack.tcp_abort(now, handle);
                } else {
                    let _ = self.stack.tcp_close(now, handle);
                }
            }
        }
        for other in self.fds.values_mut() {
            if let Fd::Epoll(epoll) = other {
                epoll.forget(fd);
            }
        }
        self.flush();
        Ok(0)
    }

    /// `shutdown`.
    pub fn shutdown(&mut self, fd: i32, how: i32) -> Result<i32, Errno> {
        if !(0..=2).contains(&how) {
            return Err(libc::EINVAL);
        }
        let handle = self.conn_of(fd)?;
        if how == libc::SHUT_RD || how == libc::SHUT_RDWR {
            self.tcp_socket(fd)?.read_shut = true;
        }
        if how == libc::SHUT_WR || how == libc::SHUT_RDWR {
            let now = self.now;
            match self.stack.tcp_shutdown(now, handle) {
                Ok(()) | Err(TcpError::Closing) => {}
                Err(TcpError::InvalidState) if self.connecting(handle) => {}
                Err(error) => {
                    self.flush();
                    return Err(errno_of(error));
                }
            }
        }
        self.flush();
        Ok(0)
    }

    /// Bytes a read would return now (FIONREAD).
    pub fn readable(&mut self, fd: i32) -> Result<usize, Errno> {
        match self.tcp_socket(fd)?.phase {
            Phase::Conn(handle) => Ok(self.stack.tcp_readable(handle)),
            Phase::Listener(_) => Err(libc::EINVAL),
            Phase::Fresh { .. } => Ok(0),
        }
    }

    /// Bytes not yet acknowledged (SIOCOUTQ).
    pub fn unacknowledged(&mut self, fd: i32) -> Result<usize, Errno> {
        match self.tcp_socket(fd)?.phase {
            Phase::Conn(handle) => Ok(self.stack.tcp_send_queued(handle)),
            Phase::Listener(_) => Err(libc::EINVAL),
            Phase::Fresh { .. } => Ok(0),
        }
    }

    /// The socket's local and remote addresses (getsockname / getpeername), in the
    /// socket's family.
    pub fn addresses(&mut self, fd: i32) -> Result<(SocketAddr, Option<SocketAddr>), Errno> {
        let socket = self.tcp_socket(fd)?;
        let v6 = socket.v6;
        match socket.phase {
            Phase::Fresh { bound } => {
                Ok((bound.map_or(unspecified(v6), |b| user_address(b, v6)), None))
            }
            Phase::Listener(_) => Ok((unspecified(v6), None)),
            Phase::Conn(handle) => {
                let (local, remote) = self.stack.tcp_addresses(handle).ok_or(libc::ENOTCONN)?;
                Ok((user_address(local, v6), Some(user_address(remote, v6))))
            }
        }
    }

    /// `addr` as the stack takes it, from a call on `fd`: an IPv4 address on an
    /// `AF_INET` socket; on an `AF_INET6` one an IPv6 address, or an IPv4-mapped one
    /// (`::ffff:a.b.c.d`, RFC 4291 2.5.5.2) as the IPv4 address it stands for. An IPv6
    /// address on an `AF_INET` socket is EAFNOSUPPORT, an IPv4 one on an `AF_INET6`
    /// socket EINVAL (Linux's errors).
    pub(crate) fn stack_address(&mut self, fd: i32, addr: SocketAddr) -> Result<SocketAddr, Errno> {
        let v6 = self.tcp_socket(fd)?.v6;
        match (v6, addr) {
            (false, SocketAddr::V4(_)) => Ok(addr),
            (false, SocketAddr::V6(_)) => Err(libc::EAFNOSUPPORT),
            (true, SocketAddr::V4(_)) => Err(libc::EINVAL),
            (true, SocketAddr::V6(a)) => Ok(match a.ip().to_ipv4_mapped() {
                Some(ip) => SocketAddr::new(IpAddr::V4(ip), a.port()),
                None => addr,
            }),
        }
    }
}

/// The unspecified address of the socket's family, port 0.
fn unspecified(v6: bool) -> SocketAddr {
    if v6 {
        SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0)
    } else {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)
    }
}

/// A stack address as a socket of the family (`v6`) shows it: IPv4 mapped on an IPv6
/// socket.
fn user_address(addr: SocketAddr, v6: bool) -> SocketAddr {
    match addr {
        SocketAddr::V4(a) if v6 => SocketAddr::new(IpAddr::V6(a.ip().to_ipv6_mapped()), a.port()),
        _ => addr,
    }
}
