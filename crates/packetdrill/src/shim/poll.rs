//! The shim's side of readiness ([`crate::poll`]): `poll` and `epoll` on its sockets, as
//! Linux's `tcp_poll` reports it.

use impnet_core::tcp::TcpState;

use crate::errno::Errno;
use crate::poll::{ALWAYS, Epoll, Interest, POLLERR, POLLHUP, POLLIN, POLLOUT, POLLRDHUP};
use crate::socket::{Fd, Phase};

use super::Shim;

impl Shim {
    /// The poll bits of `fd` now; with `mark`, a connection found not writable waits
    /// for a write-space wake-up (Linux's `tcp_poll` sets `SOCK_NOSPACE`: `poll`, and
    /// `epoll` level-triggered, which polls each time).
    pub fn readiness(&mut self, fd: i32, mark: bool) -> Result<u32, Errno> {
        let (phase, deferred) = match self.fds.get(&fd) {
            Some(Fd::Tcp(socket)) => (socket.phase, socket.fast_open.deferred.is_some()),
            Some(Fd::Epoll(_)) => return Ok(0),
            None => return Err(libc::EBADF),
        };
        match phase {
            // Linux: an unconnected socket is in TCP_CLOSE, which polls as hung up; a
            // deferred Fast Open connect is writable (`tcp_poll`: the write sends the
            // SYN).
            Phase::Fresh { .. } if deferred => Ok(POLLOUT),
            Phase::Fresh { .. } => Ok(POLLOUT | POLLHUP),
            Phase::Listener(_) => {
                self.fill_ready(fd)?;
                Ok(if self.tcp_socket(fd)?.ready.is_empty() {
                    0
                } else {
                    POLLIN
                })
            }
            Phase::Conn(handle) => Ok(self.conn_readiness(fd, handle, mark)?),
        }
    }

    fn conn_readiness(
        &mut self,
        fd: i32,
        handle: impnet_core::tcp::TcpHandle,
        mark: bool,
    ) -> Result<u32, Errno> {
        let socket = self.tcp_socket(fd)?;
        let (reported, read_shut) = (socket.error_reported, socket.read_shut);
        // Linux's tcp_poll: EPOLLERR also while the error queue holds a record.
        let errqueue = !socket.errq.is_empty();
        let state = self
            .stack
            .tcp_info(handle)
            .map_or(TcpState::Closed, |i| i.state);
        let error = self.stack.tcp_error(handle).ok().flatten();
        let mut bits = 0;
        if (error.is_some() && !reported) || errqueue {
            bits |= POLLERR;
        }
        let readable = self.stack.tcp_readable(handle);
        let peer_closed = matches!(
            state,
            TcpState::CloseWait
                | TcpState::LastAck
                | TcpState::Closing
                | TcpState::TimeWait
                | TcpState::Closed
        );
        if readable > 0 || peer_closed || read_shut {
            bits |= POLLIN;
        }
        if peer_closed || read_shut {
            bits |= POLLRDHUP;
        }
        let we_closed = matches!(
            state,
            TcpState::FinWait1
                | TcpState::FinWait2
                | TcpState::Closing
                | TcpState::LastAck
                | TcpState::TimeWait
        );
        if state == TcpState::Closed || (peer_closed && we_closed) || (read_shut && we_closed) {
            bits |= POLLHUP;
        }
        let open = matches!(state, TcpState::Established | TcpState::CloseWait);
        // Linux's tcp_poll: `__sk_stream_is_writeable(sk, 1)` ([`crate::sndbuf`]).
        if (open && self.pollout(fd, mark)?) || state == TcpState::Closed {
            bits |= POLLOUT;
        }
        Ok(bits)
    }

    /// A connection's readable bytes, write-space wake-ups and error-queue wake-ups
    /// (zeros for anything else).
    fn levels(&mut self, fd: i32) -> (usize, u64, u64) {
        match self.fds.get(&fd) {
            Some(Fd::Tcp(socket)) => match socket.phase {
                Phase::Conn(handle) => (
                    self.stack.tcp_readable(handle),
                    socket.send.wakeups,
                    socket.errq.wakeups,
                ),
                _ => (0, 0, 0),
            },
            _ => (0, 0, 0),
        }
    }

    /// `poll` without waiting: fills each `(fd, events)`'s revents, returns how many
    /// are ready.
    pub fn poll_once(&mut self, fds: &mut [(i32, u32, u32)]) -> usize {
        let mut ready = 0;
        for (fd, events, revents) in fds.iter_mut() {
            *revents = if *fd < 0 {
                0
            } else {
                match self.readiness(*fd, true) {
                    Ok(bits) => bits & (*events | ALWAYS),
                    Err(_) => libc::POLLNVAL as u32,
                }
            };
            if *revents != 0 {
                ready += 1;
            }
        }
        ready
    }

    /// `epoll_create`.
    pub fn epoll_create(&mut self) -> i32 {
        let fd = self.free_fd();
        self.fds.insert(fd, Fd::Epoll(Epoll::default()));
        fd
    }

    fn epoll(&mut self, epfd: i32) -> Result<&mut Epoll, Errno> {
        match self.fds.get_mut(&epfd) {
            Some(Fd::Epoll(epoll)) => Ok(epoll),
            Some(Fd::Tcp(_)) => Err(libc::EINVAL),
            None => Err(libc::EBADF),
        }
    }

    /// `epoll_ctl`.
    pub fn epoll_ctl(
        &mut self,
        epfd: i32,
        op: i32,
        fd: i32,
        events: u32,
        data: u64,
    ) -> Result<i32, Errno> {
        if !self.fds.contains_key(&fd) {
            return Err(libc::EBADF);
        }
        if fd == epfd {
            return Err(libc::EINVAL);
        }
        let epoll = self.epoll(epfd)?;
        let interest = Interest {
            events,
            data,
            last: (0, 0, 0, 0),
            disarmed: false,
        };
        match op {
            libc::EPOLL_CTL_ADD if epoll.interests.contains_key(&fd) => return Err(libc::EEXIST),
            libc::EPOLL_CTL_ADD => {
                epoll.interests.insert(fd, interest);
            }
            libc::EPOLL_CTL_MOD => {
                *epoll.interests.get_mut(&fd).ok_or(libc::ENOENT)? = interest;
            }
            libc::EPOLL_CTL_DEL => {
                epoll.interests.remove(&fd).ok_or(libc::ENOENT)?;
            }
            _ => return Err(libc::EINVAL),
        }
        Ok(0)
    }

    /// `epoll_wait` without waiting: up to `max` (events, data) pairs.
    pub fn epoll_once(&mut self, epfd: i32, max: usize) -> Result<Vec<(u32, u64)>, Errno> {
        let interests: Vec<(i32, Interest)> = self
            .epoll(epfd)?
            .interests
            .iter()
            .map(|(&fd, &i)| (fd, i))
            .collect();
        let mut out = Vec::new();
        for (fd, interest) in interests {
            if out.len() >= max || interest.disarmed {
                continue;
            }
            let edge = interest.events & libc::EPOLLET as u32 != 0;
            let bits = self.readiness(fd, !edge).unwrap_or(0) & (interest.events | ALWAYS);
            let levels = self.levels(fd);
            let oneshot = interest.events & libc::EPOLLONESHOT as u32 != 0;
            let (last_bits, last_readable, last_space, last_wakeups) = interest.last;
            let rising = bits & !last_bits != 0
                || (bits & POLLIN != 0 && levels.0 > last_readable)
                || (bits & POLLOUT != 0 && levels.1 > last_space)
                || (bits & POLLERR != 0 && levels.2 > last_wakeups);
            let report = bits != 0 && (!edge || rising);
            if let Some(kept) = self.epoll(epfd)?.interests.get_mut(&fd) {
                kept.last = (bits, levels.0, levels.1, levels.2);
                kept.disarmed |= report && oneshot;
            }
            if report {
                out.push((bits, interest.data));
            }
        }
        Ok(out)
    }
}
