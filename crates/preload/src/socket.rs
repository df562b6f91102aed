//! One imp socket behind a descriptor: its eventfd (the descriptor the program holds,
//! signalled by imp's runtime when the socket may have become ready), its state, and
//! the operations the C entry points call, in `io::Result` terms.

use std::collections::VecDeque;
use std::future::Future;
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use impnet::Runtime;
use impnet::core::tcp::SocketOption;
use impnet::tokio::{TcpListener, TcpStream, UdpSocket};
use libc::c_int;
use tokio::io::AsyncWrite;

use crate::datagram::{Datagrams, scatter};
use crate::errno::{errno, unsupported};

/// How long a blocking call sleeps before it looks again without a wake-up: a guard
/// against a wake-up another thread drained from the same eventfd.
const RECHECK: Duration = Duration::from_millis(50);

/// The eventfd behind a socket's descriptor; waking writes to it.
///
/// `pending` spares the system calls: a wake-up writes to the eventfd only when none
/// is pending, and [`Socket::drain`] reads it only when one is. Both drains read
/// before they clear `pending`, so a wake-up between the two finds `pending` set, does
/// not write, and is seen by the look at the socket that follows the drain; a count
/// left in the eventfd with `pending` clear (a wake-up that wrote while a drain ran)
/// only makes the descriptor readable once more, and the kernel's report of it is
/// answered with [`Socket::drain_all`].
pub(crate) struct Notify {
    fd: OwnedFd,
    pending: AtomicBool,
}

impl Wake for Notify {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.pending.swap(true, Ordering::SeqCst) {
            return;
        }
        let one: u64 = 1;
        // A direct system call: `write` is this library's own, and the descriptor is in
        // its table. A full counter (EAGAIN) is still a wake-up.
        // SAFETY: writes 8 bytes from a live u64 to a descriptor this struct owns.
        unsafe {
            libc::syscall(
                libc::SYS_write,
                self.fd.as_raw_fd(),
                std::ptr::from_ref(&one),
                8usize,
            );
        }
    }
}

/// A connect in progress: imp's connect future, polled with the socket's waker.
type Connecting = Pin<Box<dyn Future<Output = io::Result<TcpStream>> + Send>>;

/// Where the socket is in its life.
pub(crate) enum Conn {
    /// Made, perhaps bound; neither connecting nor listening.
    Fresh,
    /// `connect` started; done when the future is.
    Connecting(Connecting),
    /// A connection (connected, or accepted).
    Connected(TcpStream),
    /// `listen` was called.
    Listening(TcpListener),
    /// A connect failed; its error waits in [`State::error`] for `SO_ERROR`.
    Failed,
    /// A UDP socket, bound (by `bind`, or at its first `connect` or `sendto`).
    Datagram(Datagrams),
}

/// Options the program set, applied to the connection when there is one.
#[derive(Debug, Default, Clone)]
pub(crate) struct Options {
    /// `TCP_NODELAY`.
    pub nodelay: bool,
    /// `SO_RCVBUF` as asked (Linux reports double).
    pub recv_buffer: Option<usize>,
    /// `SO_SNDBUF` as asked.
    pub send_buffer: Option<usize>,
    /// Options imp accepts and remembers without acting on them (`SO_KEEPALIVE`,
    /// `SO_REUSEADDR`, `TCP_KEEPIDLE`, ...): (level, name) and the value set.
    pub remembered: Vec<((c_int, c_int), c_int)>,
}

/// A socket's mutable part.
pub(crate) struct State {
    pub conn: Conn,
    /// The address `bind` gave (`listen` listens there).
    pub bound: Option<SocketAddr>,
    /// An error to report once: a failed connect's (`SO_ERROR`), or a read's that
    /// `poll` found first.
    pub error: Option<io::Error>,
    /// Connections `poll` took from the listener to see that one was there.
    pub accepted: VecDeque<(TcpStream, SocketAddr)>,
    /// `shutdown(SHUT_RD)` was called: reads return 0.
    pub read_shut: bool,
    pub options: Options,
    /// The source of the last datagram received (`recvfrom`, `recvmsg`).
    pub source: Option<SocketAddr>,
}

/// An imp TCP or UDP socket.
pub(crate) struct Socket {
    notify: Arc<Notify>,
    waker: Waker,
    rt: &'static Runtime,
    /// `AF_INET` or `AF_INET6`: how addresses are written back.
    pub domain: c_int,
    /// A UDP socket (`SOCK_DGRAM`), else TCP.
    pub datagram: bool,
    nonblocking: AtomicBool,
    /// Reads, writes and accepts the program made: edge-triggered epoll reports a
    /// socket again after any (see `epoll.rs`).
    ops: AtomicU64,
    /// A wake-up taken by [`Socket::drain_all`] for epoll that its next
    /// [`Socket::drain`] reports.
    woken: AtomicBool,
    state: Mutex<State>,
}

impl Socket {
    /// A socket with a fresh eventfd (`cloexec`: `EFD_CLOEXEC`).
    pub fn new(
        rt: &'static Runtime,
        domain: c_int,
        conn: Conn,
        nonblocking: bool,
        cloexec: bool,
    ) -> io::Result<Socket> {
        let flags = libc::EFD_NONBLOCK | if cloexec { libc::EFD_CLOEXEC } else { 0 };
        // SAFETY: eventfd takes no pointers; a non-negative result is a new descriptor
        // we own.
        let fd = unsafe { libc::eventfd(0, flags) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and nothing else owns it.
        let notify = Arc::new(Notify {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            pending: AtomicBool::new(false),
        });
        Ok(Socket {
            waker: Waker::from(Arc::clone(&notify)),
            notify,
            rt,
            domain,
            datagram: false,
            nonblocking: AtomicBool::new(nonblocking),
            ops: AtomicU64::new(0),
            woken: AtomicBool::new(false),
            state: Mutex::new(State {
                conn,
                bound: None,
                error: None,
                accepted: VecDeque::new(),
                read_shut: false,
                options: Options::default(),
                source: None,
            }),
        })
    }

    /// A UDP socket (unbound until `bind`, `connect` or `sendto`).
    pub fn new_datagram(
        rt: &'static Runtime,
        domain: c_int,
        nonblocking: bool,
        cloexec: bool,
    ) -> io::Result<Socket> {
        let mut socket = Socket::new(rt, domain, Conn::Fresh, nonblocking, cloexec)?;
        socket.datagram = true;
        Ok(socket)
    }

    /// A UDP socket's state, bound first (to the wildcard address, a port of imp's
    /// choosing) if it is not yet.
    fn bound_datagrams<'a>(&self, state: &'a mut State) -> io::Result<&'a mut Datagrams> {
        if matches!(state.conn, Conn::Fresh) {
            let local = unspecified(self.domain);
            state.conn = Conn::Datagram(Datagrams::new(UdpSocket::bind(self.rt, local)?));
            state.bound = Some(local);
        }
        match &mut state.conn {
            Conn::Datagram(datagrams) => Ok(datagrams),
            _ => Err(errno(libc::EINVAL)),
        }
    }

    /// The source to report for the last receive: the datagram's, or the peer's.
    pub fn source(&self) -> io::Result<SocketAddr> {
        if self.datagram {
            return self.lock().source.ok_or_else(|| errno(libc::ENOTCONN));
        }
        self.peer_addr()
    }

    /// The descriptor the program holds.
    pub fn fd(&self) -> c_int {
        self.notify.fd.as_raw_fd()
    }

    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn nonblocking(&self) -> bool {
        self.nonblocking.load(Ordering::Relaxed)
    }

    /// How many reads, writes and accepts the program has made on the socket.
    pub fn ops(&self) -> u64 {
        self.ops.load(Ordering::Relaxed)
    }

    pub fn set_nonblocking(&self, on: bool) {
        self.nonblocking.store(on, Ordering::Relaxed);
    }

    /// Take the pending wake-up, if any (before looking at the socket, so a wake-up
    /// that comes after the look is kept): no system call when there is none.
    pub fn drain(&self) -> bool {
        let woken = self.woken.swap(false, Ordering::SeqCst);
        if !self.notify.pending.load(Ordering::SeqCst) {
            return woken;
        }
        self.drain_all();
        true
    }

    /// Keep a wake-up [`Socket::drain_all`] took for the next [`Socket::drain`].
    pub fn mark_woken(&self) {
        self.woken.store(true, Ordering::SeqCst);
    }

    /// Empty the eventfd's counter and take the pending wake-up: for a descriptor the
    /// kernel reported readable, and before a blocking call sleeps on it. Whether the
    /// counter held a wake-up.
    pub fn drain_all(&self) -> bool {
        let read = self.read_eventfd();
        self.notify.pending.store(false, Ordering::SeqCst);
        read
    }

    /// Read (and so empty) the eventfd's counter; whether it held a wake-up.
    fn read_eventfd(&self) -> bool {
        let mut count: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from a non-blocking eventfd we own.
        let read = unsafe {
            libc::syscall(
                libc::SYS_read,
                self.fd(),
                std::ptr::from_mut(&mut count),
                8usize,
            )
        };
        read == 8 && count > 0
    }

    /// Sleep until the eventfd is signalled or `limit` passes.
    fn sleep(&self, limit: Duration) {
        let mut pfd = libc::pollfd {
            fd: self.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::c_long::try_from(limit.as_nanos()).unwrap_or(0),
        };
        // SAFETY: one live pollfd, a live timespec, no signal mask.
        unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    }

    /// Run `attempt` (under the state's lock, with the socket's waker) until it is
    /// ready; `nonblocking`: once, `EAGAIN` if it is not.
    pub fn wait<T>(
        &self,
        nonblocking: bool,
        mut attempt: impl FnMut(&mut State, &mut Context<'_>) -> Poll<io::Result<T>>,
    ) -> io::Result<T> {
        let mut cx = Context::from_waker(&self.waker);
        self.ops.fetch_add(1, Ordering::Relaxed);
        loop {
            if nonblocking {
                let _ = self.drain();
            } else {
                let _ = self.drain_all();
            }
            let result = {
                let mut state = self.lock();
                state.advance(&mut cx);
                attempt(&mut state, &mut cx)
            };
            match result {
                Poll::Ready(result) => return result,
                Poll::Pending if nonblocking => return Err(errno(libc::EAGAIN)),
                Poll::Pending => self.sleep(RECHECK),
            }
        }
    }

    /// The `poll` events of `want` (plus `POLLERR`/`POLLHUP`) that hold now; when
    /// one does not, the socket's waker is registered for it.
    pub fn revents(&self, want: i16) -> i16 {
        let mut cx = Context::from_waker(&self.waker);
        let mut state = self.lock();
        if self.datagram && matches!(state.conn, Conn::Fresh) {
            // Linux: an unbound UDP socket is writable, nothing more.
            return want & libc::POLLOUT;
        }
        state.advance(&mut cx);
        let read = want & (libc::POLLIN | libc::POLLRDNORM) != 0;
        let write = want & (libc::POLLOUT | libc::POLLWRNORM) != 0;
        let got = state.events(&mut cx, read, write);
        got & (want | libc::POLLERR | libc::POLLHUP)
    }

    /// `connect`: starts imp's connect; `EINPROGRESS` when non-blocking and not done.
    pub fn connect(&self, remote: SocketAddr) -> io::Result<()> {
        if self.datagram {
            let mut state = self.lock();
            return self.bound_datagrams(&mut state)?.socket.connect(remote);
        }
        {
            let mut state = self.lock();
            match state.conn {
                Conn::Fresh | Conn::Failed => {}
                Conn::Connecting(_) => return Err(errno(libc::EALREADY)),
                Conn::Connected(_) => return Err(errno(libc::EISCONN)),
                Conn::Listening(_) | Conn::Datagram(_) => return Err(errno(libc::EINVAL)),
            }
            if state.bound.is_some_and(|b| b.port() != 0) {
                return Err(unsupported("connect from a bound port"));
            }
            state.error = None;
            state.conn = Conn::Connecting(Box::pin(TcpStream::connect(self.rt, remote)));
        }
        let nonblocking = self.nonblocking();
        let done = self.wait(nonblocking, |state, _| match state.conn {
            Conn::Connected(_) => Poll::Ready(Ok(())),
            Conn::Failed => Poll::Ready(Err(state
                .error
                .take()
                .unwrap_or_else(|| errno(libc::ECONNREFUSED)))),
            _ => Poll::Pending,
        });
        match done {
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => Err(errno(libc::EINPROGRESS)),
            other => other,
        }
    }

    /// `bind`: remembered for `listen`.
    pub fn bind(&self, local: SocketAddr) -> io::Result<()> {
        let mut state = self.lock();
        if state.bound.is_some() || !matches!(state.conn, Conn::Fresh) {
            return Err(errno(libc::EINVAL));
        }
        if self.datagram {
            let socket = UdpSocket::bind(self.rt, local)?;
            state.conn = Conn::Datagram(Datagrams::new(socket));
        }
        state.bound = Some(local);
        Ok(())
    }

    /// `listen` on the bound address.
    pub fn listen(&self) -> io::Result<()> {
        let mut state = self.lock();
        match state.conn {
            Conn::Listening(_) => return Ok(()),
            Conn::Fresh => {}
            _ => return Err(errno(libc::EINVAL)),
        }
        let Some(local) = state.bound.filter(|b| b.port() != 0) else {
            return Err(unsupported("listen without bind to a port"));
        };
        let listener = TcpListener::bind(self.rt, local)?;
        if let Some(bytes) = state.options.recv_buffer {
            listener.set_option(SocketOption::RecvBuffer(bytes * 2))?;
        }
        if let Some(bytes) = state.options.send_buffer {
            listener.set_option(SocketOption::SendBuffer(bytes * 2))?;
        }
        state.conn = Conn::Listening(listener);
        Ok(())
    }

    /// `accept4`: the next connection as a new socket.
    pub fn accept(&self, nonblocking: bool, cloexec: bool) -> io::Result<(Socket, SocketAddr)> {
        let mut options = Options::default();
        let (stream, peer) = self.wait(self.nonblocking(), |state, cx| {
            options = state.options.clone();
            if let Some(next) = state.accepted.pop_front() {
                return Poll::Ready(Ok(next));
            }
            match &state.conn {
                Conn::Listening(listener) => listener.poll_accept(cx),
                _ => Poll::Ready(Err(errno(libc::EINVAL))),
            }
        })?;
        // As on Linux, a connection inherits the listener's TCP_NODELAY.
        if options.nodelay {
            stream.set_nodelay(true)?;
        }
        let socket = Socket::new(
            self.rt,
            self.domain,
            Conn::Connected(stream),
            nonblocking,
            cloexec,
        )?;
        Ok((socket, peer))
    }

    /// `recv` into `bufs` in order; `peek` leaves the data; `dontwait` for this call.
    pub fn recv(&self, bufs: &mut [&mut [u8]], peek: bool, dontwait: bool) -> io::Result<usize> {
        if bufs.iter().all(|b| b.is_empty()) {
            return Ok(0);
        }
        let nonblocking = dontwait || self.nonblocking();
        self.wait(nonblocking, |state, cx| {
            if let Some(e) = state.error.take() {
                return Poll::Ready(Err(e));
            }
            if state.read_shut {
                return Poll::Ready(Ok(0));
            }
            match &mut state.conn {
                Conn::Datagram(datagrams) => {
                    let got = datagrams.poll_recv(cx, bufs, peek);
                    got.map_ok(|(n, source)| {
                        state.source = Some(source);
                        n
                    })
                }
                Conn::Connected(stream) => {
                    let mut copied = 0;
                    let polled = stream.poll_recv_with(cx, |data| {
                        copied = scatter(data, bufs);
                        if peek { 0 } else { copied }
                    });
                    polled.map_ok(|_| copied)
                }
                Conn::Connecting(_) => Poll::Pending,
                _ => Poll::Ready(Err(errno(libc::ENOTCONN))),
            }
        })
    }

    /// `send` of `bufs` in order (one call into the stack; one datagram on a UDP
    /// socket, to `to` or its peer); `dontwait` for this call.
    pub fn send(
        &self,
        bufs: &[IoSlice<'_>],
        to: Option<SocketAddr>,
        dontwait: bool,
    ) -> io::Result<usize> {
        let nonblocking = dontwait || self.nonblocking();
        if self.datagram {
            return self.wait(nonblocking, |state, cx| match self.bound_datagrams(state) {
                Ok(datagrams) => datagrams.poll_send(cx, bufs, to),
                Err(e) => Poll::Ready(Err(e)),
            });
        }
        if bufs.iter().all(|b| b.is_empty()) {
            return Ok(0);
        }
        self.wait(nonblocking, |state, cx| match &mut state.conn {
            Conn::Connected(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
            Conn::Connecting(_) => Poll::Pending,
            Conn::Failed => Poll::Ready(Err(state
                .error
                .take()
                .unwrap_or_else(|| errno(libc::EPIPE)))),
            _ => Poll::Ready(Err(errno(libc::ENOTCONN))),
        })
    }

    /// `shutdown`: `SHUT_RD`, `SHUT_WR` or `SHUT_RDWR`.
    pub fn shutdown(&self, how: c_int) -> io::Result<()> {
        let mut state = self.lock();
        let Conn::Connected(stream) = &state.conn else {
            return Err(errno(libc::ENOTCONN));
        };
        if how == libc::SHUT_WR || how == libc::SHUT_RDWR {
            stream.shutdown_write()?;
        }
        if how == libc::SHUT_RD || how == libc::SHUT_RDWR {
            state.read_shut = true;
        }
        Ok(())
    }

    /// `getsockname`.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        let state = self.lock();
        match &state.conn {
            Conn::Connected(stream) => stream.local_addr(),
            Conn::Listening(listener) => listener.local_addr(),
            Conn::Datagram(datagrams) => {
                let local = datagrams.socket.local_addr()?;
                // Connected from the wildcard: the address the route leaves from.
                let routed = match datagrams.socket.peer_addr() {
                    Ok(peer) if local.ip().is_unspecified() => self
                        .rt
                        .with_stack(|stack, now| stack.source_address_for(now, peer.ip())),
                    _ => None,
                };
                Ok(routed.map_or(local, |ip| SocketAddr::new(ip, local.port())))
            }
            _ => Ok(state.bound.unwrap_or_else(|| unspecified(self.domain))),
        }
    }

    /// `getpeername`.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        match &self.lock().conn {
            Conn::Connected(stream) => stream.peer_addr(),
            Conn::Datagram(datagrams) => datagrams.socket.peer_addr(),
            _ => Err(errno(libc::ENOTCONN)),
        }
    }

    /// `SO_ERROR`: the pending error, taken.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        let mut state = self.lock();
        if let Some(e) = state.error.take() {
            return Ok(Some(e));
        }
        match &state.conn {
            Conn::Connected(stream) => stream.take_error(),
            _ => Ok(None),
        }
    }

    /// Bytes a read would return now (`FIONREAD`): the contiguous part imp hands out
    /// in one piece, at least 1 when anything is there.
    pub fn readable_bytes(&self) -> usize {
        let mut cx = Context::from_waker(&self.waker);
        let state = self.lock();
        let Conn::Connected(stream) = &state.conn else {
            return 0;
        };
        let mut bytes = 0;
        let _ = stream.poll_recv_with(&mut cx, |data| {
            bytes = data.len();
            0
        });
        bytes
    }

    /// Apply `f` to the options, and to the connection if there is one.
    pub fn set_options(
        &self,
        f: impl FnOnce(&mut Options),
        apply: impl FnOnce(&TcpStream) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut state = self.lock();
        f(&mut state.options);
        match &state.conn {
            Conn::Connected(stream) => apply(stream),
            _ => Ok(()),
        }
    }

    /// A copy of the options.
    pub fn options(&self) -> Options {
        self.lock().options.clone()
    }

    /// `TCP_INFO`'s bytes; `TCP_CONGESTION`'s name (NUL-padded to 16 bytes).
    pub fn tcp_info(&self) -> Vec<u8> {
        use impnet::core::tcp::TcpState;
        let state = self.lock();
        match &state.conn {
            Conn::Connected(stream) => {
                let info = stream.info();
                let tcp_state = info.as_ref().map_or(TcpState::Closed, |i| i.state);
                crate::tcpinfo::bytes(info.as_ref(), tcp_state, 1500)
            }
            Conn::Listening(_) => crate::tcpinfo::bytes(None, TcpState::Listen, 1500),
            Conn::Connecting(_) => crate::tcpinfo::bytes(None, TcpState::SynSent, 1500),
            _ => crate::tcpinfo::bytes(None, TcpState::Closed, 1500),
        }
    }

    /// The congestion controller's name (`TCP_CONGESTION`), as Linux gives it.
    pub fn congestion(&self) -> io::Result<Vec<u8>> {
        let state = self.lock();
        let name = match &state.conn {
            Conn::Connected(stream) => stream.congestion()?,
            _ => return Err(unsupported("getsockopt TCP_CONGESTION before a connection")),
        };
        let mut bytes = name.as_bytes().to_vec();
        bytes.resize(16, 0);
        Ok(bytes)
    }

    /// The connection's MSS, if it has one.
    pub fn mss(&self) -> Option<u16> {
        match &self.lock().conn {
            Conn::Connected(stream) => stream.info().map(|i| i.snd_mss),
            _ => None,
        }
    }

    /// Whether this socket listens.
    pub fn listening(&self) -> bool {
        matches!(self.lock().conn, Conn::Listening(_))
    }
}

impl State {
    /// Move a connect on: done, it becomes `Connected` (options applied) or `Failed`.
    fn advance(&mut self, cx: &mut Context<'_>) {
        let Conn::Connecting(future) = &mut self.conn else {
            return;
        };
        let Poll::Ready(result) = future.as_mut().poll(cx) else {
            return;
        };
        self.conn = match result {
            Ok(stream) => {
                let options = &self.options;
                let _ = stream.set_nodelay(options.nodelay);
                if let Some(bytes) = options.recv_buffer {
                    let _ = stream.set_option(SocketOption::RecvBuffer(bytes * 2));
                }
                if let Some(bytes) = options.send_buffer {
                    let _ = stream.set_option(SocketOption::SendBuffer(bytes * 2));
                }
                Conn::Connected(stream)
            }
            Err(e) => {
                self.error = Some(e);
                Conn::Failed
            }
        };
    }

    /// The poll events that hold, looking at reading and writing as asked.
    fn events(&mut self, cx: &mut Context<'_>, read: bool, write: bool) -> i16 {
        let all = libc::POLLIN | libc::POLLOUT | libc::POLLERR | libc::POLLHUP;
        match &mut self.conn {
            // Linux: an unconnected TCP socket is writable and hung up (an unbound UDP
            // socket is not: `Socket::revents` says it is writable).
            Conn::Fresh => libc::POLLOUT | libc::POLLHUP,
            Conn::Datagram(datagrams) => {
                let mut events = 0;
                if read {
                    match datagrams.poll_readable(cx) {
                        Poll::Ready(Ok(())) => events |= libc::POLLIN,
                        Poll::Ready(Err(e)) => {
                            self.error = Some(e);
                            events |= libc::POLLIN | libc::POLLERR;
                        }
                        Poll::Pending => {}
                    }
                }
                if write && datagrams.socket.poll_send_ready(cx).is_ready() {
                    events |= libc::POLLOUT;
                }
                events
            }
            Conn::Connecting(_) => 0,
            Conn::Failed => all,
            Conn::Listening(listener) => {
                if !self.accepted.is_empty() {
                    return libc::POLLIN;
                }
                if !read {
                    return 0;
                }
                match listener.poll_accept(cx) {
                    Poll::Ready(Ok(next)) => {
                        self.accepted.push_back(next);
                        libc::POLLIN
                    }
                    Poll::Ready(Err(e)) => {
                        self.error = Some(e);
                        libc::POLLIN | libc::POLLERR
                    }
                    Poll::Pending => 0,
                }
            }
            Conn::Connected(stream) => {
                let mut events = 0;
                if self.error.is_some() {
                    events |= libc::POLLIN | libc::POLLERR;
                } else if self.read_shut {
                    events |= libc::POLLIN;
                } else if read {
                    let mut eof = false;
                    match stream.poll_recv_with(cx, |data| {
                        eof = data.is_empty();
                        0
                    }) {
                        Poll::Ready(Ok(_)) if eof => events |= libc::POLLIN | libc::POLLRDHUP,
                        Poll::Ready(Ok(_)) => events |= libc::POLLIN,
                        Poll::Ready(Err(e)) => {
                            self.error = Some(e);
                            events |= libc::POLLIN | libc::POLLERR | libc::POLLHUP;
                        }
                        Poll::Pending => {}
                    }
                }
                if write && stream.poll_write_ready(cx).is_ready() {
                    events |= libc::POLLOUT;
                }
                events
            }
        }
    }
}

/// The wildcard address of a domain, port 0.
pub(crate) fn unspecified(domain: c_int) -> SocketAddr {
    if domain == libc::AF_INET6 {
        SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0))
    } else {
        SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, 0))
    }
}
