//! The C entry points: each looks its descriptor up and, when it is not imp's, calls
//! the C library's own function with the same arguments; on an imp socket it runs the
//! [`Socket`] operation under `catch_unwind` and sets `errno` from its error.

use std::io::{self, IoSlice};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use libc::{c_int, c_ulong, c_void, iovec, msghdr, off_t, size_t, sockaddr, socklen_t, ssize_t};

use crate::errno::{code_of, errno, unsupported};
use crate::real::real;
use crate::socket::{Conn, Socket};
use crate::table;

/// Set `errno`.
fn set_errno(code: c_int) {
    // SAFETY: `__errno_location` returns this thread's errno, always valid.
    unsafe { *libc::__errno_location() = code };
}

/// Run `f` for `call`: its value, or -1 with `errno` set; a panic becomes `EIO` and a
/// line on stderr.
fn guard(call: &str, f: impl FnOnce() -> io::Result<isize>) -> isize {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(value)) => value,
        Ok(Err(e)) => {
            set_errno(code_of(&e));
            -1
        }
        Err(_) => {
            crate::say(&format!("{call}: panicked (EIO)"));
            set_errno(libc::EIO);
            -1
        }
    }
}

/// [`guard`] for a call that returns an `int`.
fn guard_int(call: &str, f: impl FnOnce() -> io::Result<isize>) -> c_int {
    c_int::try_from(guard(call, f)).unwrap_or(-1)
}

/// Run `op` on the imp socket behind `fd`, or return None to fall through.
fn on_imp(fd: c_int, call: &str, op: impl FnOnce(&Socket) -> io::Result<isize>) -> Option<isize> {
    let socket = table::get(fd)?;
    Some(guard(call, || {
        crate::check_not_forked(call)?;
        op(&socket)
    }))
}

/// A socket address from C (`AF_INET`, or `AF_INET6`: a v4-mapped one as IPv4).
///
/// # Safety
/// `addr` is null or points to `len` readable bytes.
unsafe fn read_addr(addr: *const sockaddr, len: socklen_t) -> io::Result<SocketAddr> {
    if addr.is_null() {
        return Err(errno(libc::EFAULT));
    }
    let len = len as usize;
    // SAFETY: the caller's; unaligned reads of plain C structs within `len`.
    unsafe {
        let family = c_int::from(std::ptr::read_unaligned(addr).sa_family);
        if family == libc::AF_INET && len >= size_of::<libc::sockaddr_in>() {
            let sin = std::ptr::read_unaligned(addr.cast::<libc::sockaddr_in>());
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            return Ok(SocketAddr::from((ip, u16::from_be(sin.sin_port))));
        }
        if family == libc::AF_INET6 && len >= size_of::<libc::sockaddr_in6>() {
            let sin6 = std::ptr::read_unaligned(addr.cast::<libc::sockaddr_in6>());
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            let port = u16::from_be(sin6.sin6_port);
            return Ok(match ip.to_ipv4_mapped() {
                Some(v4) => SocketAddr::from((v4, port)),
                None => SocketAddr::from((ip, port)),
            });
        }
        if family == libc::AF_INET || family == libc::AF_INET6 {
            return Err(errno(libc::EINVAL));
        }
    }
    Err(errno(libc::EAFNOSUPPORT))
}

/// Write `sa` to C as the socket's family has it (an IPv4 address on an `AF_INET6`
/// socket as v4-mapped), truncated to `*len`, with `*len` set to its full size.
///
/// # Safety
/// `addr` and `len` are null or valid, `addr` for `*len` bytes.
pub(crate) unsafe fn write_addr(
    sa: SocketAddr,
    domain: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) {
    if addr.is_null() || len.is_null() {
        return;
    }
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let size = match (sa, domain) {
        (SocketAddr::V4(v4), libc::AF_INET) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*v4.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in and suitably aligned.
            unsafe { std::ptr::write(std::ptr::from_mut(&mut storage).cast(), sin) };
            size_of::<libc::sockaddr_in>()
        }
        _ => {
            let ip = match sa {
                SocketAddr::V4(v4) => v4.ip().to_ipv6_mapped(),
                SocketAddr::V6(v6) => *v6.ip(),
            };
            // SAFETY: all-zero is a valid sockaddr_in6.
            let mut sin6: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = sa.port().to_be();
            sin6.sin6_addr.s6_addr = ip.octets();
            // SAFETY: as above, for sockaddr_in6.
            unsafe { std::ptr::write(std::ptr::from_mut(&mut storage).cast(), sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    // SAFETY: the caller's: `addr` holds `*len` bytes; we copy at most that.
    unsafe {
        let room = *len as usize;
        std::ptr::copy_nonoverlapping(
            std::ptr::from_ref(&storage).cast::<u8>(),
            addr.cast::<u8>(),
            room.min(size),
        );
        *len = size as socklen_t;
    }
}

/// The buffers of an iovec array, for reading into.
///
/// # Safety
/// `iov` points to `count` iovecs, each valid for writing its length.
unsafe fn iov_mut<'a>(iov: *const iovec, count: usize) -> Vec<&'a mut [u8]> {
    if iov.is_null() || count == 0 {
        return Vec::new();
    }
    // SAFETY: the caller's.
    let iovs = unsafe { std::slice::from_raw_parts(iov, count) };
    iovs.iter()
        .filter(|v| v.iov_len > 0 && !v.iov_base.is_null())
        // SAFETY: the caller's.
        .map(|v| unsafe { std::slice::from_raw_parts_mut(v.iov_base.cast::<u8>(), v.iov_len) })
        .collect()
}

/// The buffers of an iovec array, for writing from.
///
/// # Safety
/// `iov` points to `count` iovecs, each valid for reading its length.
unsafe fn iov_ref<'a>(iov: *const iovec, count: usize) -> Vec<IoSlice<'a>> {
    if iov.is_null() || count == 0 {
        return Vec::new();
    }
    // SAFETY: the caller's.
    let iovs = unsafe { std::slice::from_raw_parts(iov, count) };
    iovs.iter()
        .filter(|v| v.iov_len > 0 && !v.iov_base.is_null())
        // SAFETY: the caller's.
        .map(|v| {
            IoSlice::new(unsafe { std::slice::from_raw_parts(v.iov_base.cast::<u8>(), v.iov_len) })
        })
        .collect()
}

/// One buffer as a slice (empty when null or zero).
///
/// # Safety
/// `buf` is valid for `len` bytes.
unsafe fn buf_mut<'a>(buf: *mut c_void, len: size_t) -> &'a mut [u8] {
    if buf.is_null() || len == 0 {
        return &mut [];
    }
    // SAFETY: the caller's.
    unsafe { std::slice::from_raw_parts_mut(buf.cast(), len) }
}

/// # Safety
/// `buf` is valid for `len` bytes.
unsafe fn buf_ref<'a>(buf: *const c_void, len: size_t) -> &'a [u8] {
    if buf.is_null() || len == 0 {
        return &[];
    }
    // SAFETY: the caller's.
    unsafe { std::slice::from_raw_parts(buf.cast(), len) }
}

/// The flags `recv` takes on an imp socket; others are refused.
const RECV_FLAGS: c_int =
    libc::MSG_DONTWAIT | libc::MSG_PEEK | libc::MSG_WAITALL | libc::MSG_NOSIGNAL;
/// The flags `send` takes (`MSG_MORE` is taken as a hint and ignored).
const SEND_FLAGS: c_int = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL | libc::MSG_MORE;

/// A receive on an imp socket with `recv`'s flags.
fn do_recv(socket: &Socket, call: &str, bufs: &mut [&mut [u8]], flags: c_int) -> io::Result<isize> {
    if flags & !RECV_FLAGS != 0 {
        return Err(unsupported(&format!("{call} with flags {flags:#x}")));
    }
    let peek = flags & libc::MSG_PEEK != 0;
    let dontwait = flags & libc::MSG_DONTWAIT != 0;
    if flags & libc::MSG_WAITALL == 0 || peek || dontwait {
        return socket.recv(bufs, peek, dontwait).map(|n| n as isize);
    }
    // MSG_WAITALL: until the buffers are full or the stream ends.
    let want: usize = bufs.iter().map(|b| b.len()).sum();
    let mut got = 0;
    while got < want {
        let mut rest = skip(bufs, got);
        match socket.recv(&mut rest, false, false) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if got == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok(got as isize)
}

/// `bufs` without their first `n` bytes.
fn skip<'a>(bufs: &'a mut [&mut [u8]], mut n: usize) -> Vec<&'a mut [u8]> {
    let mut rest = Vec::new();
    for buf in bufs.iter_mut() {
        if n >= buf.len() {
            n -= buf.len();
            continue;
        }
        rest.push(&mut buf[n..]);
        n = 0;
    }
    rest
}

/// A send on an imp socket with `send`'s flags; `EPIPE` raises `SIGPIPE` unless
/// `MSG_NOSIGNAL`, as the kernel does.
fn do_send(
    socket: &Socket,
    call: &str,
    bufs: &[IoSlice<'_>],
    to: Option<SocketAddr>,
    flags: c_int,
) -> io::Result<isize> {
    if flags & !SEND_FLAGS != 0 {
        return Err(unsupported(&format!("{call} with flags {flags:#x}")));
    }
    let result = socket.send(bufs, to, flags & libc::MSG_DONTWAIT != 0);
    if let Err(e) = &result
        && code_of(e) == libc::EPIPE
        && flags & libc::MSG_NOSIGNAL == 0
    {
        // SAFETY: raising a signal in this thread, as the kernel would.
        unsafe { libc::raise(libc::SIGPIPE) };
    }
    result.map(|n| n as isize)
}

// ---- making sockets ----

/// # Safety
/// A C `socket(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    let kernel =
        || unsafe { real!(socket: fn(c_int, c_int, c_int) -> c_int)(domain, ty, protocol) };
    if domain != libc::AF_INET && domain != libc::AF_INET6 {
        return kernel();
    }
    let base = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    let tcp = base == libc::SOCK_STREAM && (protocol == 0 || protocol == libc::IPPROTO_TCP);
    let udp = base == libc::SOCK_DGRAM && (protocol == 0 || protocol == libc::IPPROTO_UDP);
    if !tcp {
        if crate::config::kernel_udp() {
            return kernel();
        }
        if udp {
            return guard_int("socket", || {
                let Some(rt) = crate::imp()? else {
                    return Ok(kernel() as isize);
                };
                let nonblocking = ty & libc::SOCK_NONBLOCK != 0;
                let cloexec = ty & libc::SOCK_CLOEXEC != 0;
                let socket = Socket::new_datagram(rt, domain, nonblocking, cloexec)?;
                Ok(table::insert(Arc::new(socket)) as isize)
            });
        }
        return guard_int("socket", || match crate::imp()? {
            None => Ok(kernel() as isize),
            Some(_) => {
                refuse_once(base);
                Err(errno(libc::EPROTONOSUPPORT))
            }
        });
    }
    guard_int("socket", || {
        let Some(rt) = crate::imp()? else {
            return Ok(kernel() as isize);
        };
        let nonblocking = ty & libc::SOCK_NONBLOCK != 0;
        let cloexec = ty & libc::SOCK_CLOEXEC != 0;
        let socket = Socket::new(rt, domain, Conn::Fresh, nonblocking, cloexec)?;
        Ok(table::insert(Arc::new(socket)) as isize)
    })
}

/// Say once per socket type that imp does not make it.
fn refuse_once(ty: c_int) {
    use std::sync::Mutex;
    static SAID: Mutex<Vec<c_int>> = Mutex::new(Vec::new());
    let mut said = SAID
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !said.contains(&ty) {
        said.push(ty);
        drop(said);
        crate::say(&format!(
            "socket type {ty} is not covered yet (only TCP and UDP); refused with EPROTONOSUPPORT \
             (IMP_KERNEL_UDP=1 leaves such sockets to the kernel)"
        ));
    }
}

/// # Safety
/// A C `connect(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    // SAFETY: the caller's pointers, as connect(2) takes them.
    let r = on_imp(fd, "connect", |s| {
        let remote = unsafe { read_addr(addr, len) }?;
        s.connect(remote).map(|()| 0)
    });
    r.map_or_else(
        || unsafe { real!(connect: fn(c_int, *const sockaddr, socklen_t) -> c_int)(fd, addr, len) },
        |v| v as c_int,
    )
}

/// # Safety
/// A C `bind(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    // SAFETY: the caller's pointers, as bind(2) takes them.
    let r = on_imp(fd, "bind", |s| {
        let local = unsafe { read_addr(addr, len) }?;
        s.bind(local).map(|()| 0)
    });
    r.map_or_else(
        || unsafe { real!(bind: fn(c_int, *const sockaddr, socklen_t) -> c_int)(fd, addr, len) },
        |v| v as c_int,
    )
}

/// # Safety
/// A C `listen(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn listen(fd: c_int, backlog: c_int) -> c_int {
    let r = on_imp(fd, "listen", |s| s.listen().map(|()| 0));
    r.map_or_else(
        || unsafe { real!(listen: fn(c_int, c_int) -> c_int)(fd, backlog) },
        |v| v as c_int,
    )
}

/// # Safety
/// A C `accept4(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn accept4(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    let r = on_imp(fd, "accept4", |s| {
        let nonblocking = flags & libc::SOCK_NONBLOCK != 0;
        let cloexec = flags & libc::SOCK_CLOEXEC != 0;
        let (socket, peer) = s.accept(nonblocking, cloexec)?;
        // SAFETY: the caller's pointers, as accept4(2) takes them.
        unsafe { write_addr(peer, socket.domain, addr, len) };
        Ok(table::insert(Arc::new(socket)) as isize)
    });
    r.map_or_else(
        || unsafe {
            real!(accept4: fn(c_int, *mut sockaddr, *mut socklen_t, c_int) -> c_int)(
                fd, addr, len, flags,
            )
        },
        |v| v as c_int,
    )
}

/// # Safety
/// A C `accept(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    if table::get(fd).is_none() {
        return unsafe {
            real!(accept: fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int)(fd, addr, len)
        };
    }
    // SAFETY: forwarded as the caller gave them.
    unsafe { accept4(fd, addr, len, 0) }
}

// ---- reading ----

/// # Safety
/// A C `read(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t {
    let r = on_imp(fd, "read", |s| {
        // SAFETY: the caller's buffer.
        do_recv(s, "read", &mut [unsafe { buf_mut(buf, count) }], 0)
    });
    r.unwrap_or_else(|| unsafe {
        real!(read: fn(c_int, *mut c_void, size_t) -> ssize_t)(fd, buf, count)
    })
}

/// # Safety
/// glibc's fortified `read`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __read_chk(
    fd: c_int,
    buf: *mut c_void,
    count: size_t,
    buflen: size_t,
) -> ssize_t {
    if table::get(fd).is_none() {
        return unsafe {
            real!(__read_chk: fn(c_int, *mut c_void, size_t, size_t) -> ssize_t)(
                fd, buf, count, buflen,
            )
        };
    }
    // SAFETY: at most the buffer's own length.
    unsafe { read(fd, buf, count.min(buflen)) }
}

/// # Safety
/// A C `readv(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, count: c_int) -> ssize_t {
    let r = on_imp(fd, "readv", |s| {
        // SAFETY: the caller's iovecs.
        let mut bufs = unsafe { iov_mut(iov, usize::try_from(count).unwrap_or(0)) };
        do_recv(s, "readv", &mut bufs, 0)
    });
    r.unwrap_or_else(|| unsafe {
        real!(readv: fn(c_int, *const iovec, c_int) -> ssize_t)(fd, iov, count)
    })
}

/// # Safety
/// A C `recv(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, len: size_t, flags: c_int) -> ssize_t {
    let r = on_imp(fd, "recv", |s| {
        // SAFETY: the caller's buffer.
        do_recv(s, "recv", &mut [unsafe { buf_mut(buf, len) }], flags)
    });
    r.unwrap_or_else(|| unsafe {
        real!(recv: fn(c_int, *mut c_void, size_t, c_int) -> ssize_t)(fd, buf, len, flags)
    })
}

/// # Safety
/// glibc's fortified `recv`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __recv_chk(
    fd: c_int,
    buf: *mut c_void,
    len: size_t,
    buflen: size_t,
    flags: c_int,
) -> ssize_t {
    if table::get(fd).is_none() {
        return unsafe {
            real!(__recv_chk: fn(c_int, *mut c_void, size_t, size_t, c_int) -> ssize_t)(
                fd, buf, len, buflen, flags,
            )
        };
    }
    // SAFETY: at most the buffer's own length.
    unsafe { recv(fd, buf, len.min(buflen), flags) }
}

/// # Safety
/// A C `recvfrom(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    len: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    addrlen: *mut socklen_t,
) -> ssize_t {
    let r = on_imp(fd, "recvfrom", |s| {
        // SAFETY: the caller's buffer.
        let n = do_recv(s, "recvfrom", &mut [unsafe { buf_mut(buf, len) }], flags)?;
        if let Ok(peer) = s.source() {
            // SAFETY: the caller's pointers.
            unsafe { write_addr(peer, s.domain, addr, addrlen) };
        }
        Ok(n)
    });
    r.unwrap_or_else(|| unsafe {
        real!(recvfrom: fn(c_int, *mut c_void, size_t, c_int, *mut sockaddr, *mut socklen_t) -> ssize_t)(
            fd, buf, len, flags, addr, addrlen,
        )
    })
}

/// # Safety
/// glibc's fortified `recvfrom`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __recvfrom_chk(
    fd: c_int,
    buf: *mut c_void,
    len: size_t,
    buflen: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    addrlen: *mut socklen_t,
) -> ssize_t {
    if table::get(fd).is_none() {
        return unsafe {
            real!(__recvfrom_chk: fn(c_int, *mut c_void, size_t, size_t, c_int, *mut sockaddr, *mut socklen_t) -> ssize_t)(
                fd, buf, len, buflen, flags, addr, addrlen,
            )
        };
    }
    // SAFETY: at most the buffer's own length.
    unsafe { recvfrom(fd, buf, len.min(buflen), flags, addr, addrlen) }
}

/// # Safety
/// A C `recvmsg(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
    let r = on_imp(fd, "recvmsg", |s| {
        if msg.is_null() {
            return Err(errno(libc::EFAULT));
        }
        // SAFETY: the caller's msghdr.
        let m = unsafe { &mut *msg };
        // SAFETY: the caller's iovecs.
        let mut bufs = unsafe { iov_mut(m.msg_iov, m.msg_iovlen) };
        let n = do_recv(s, "recvmsg", &mut bufs, flags)?;
        if let Ok(peer) = s.source() {
            // SAFETY: the caller's name buffer and its length.
            unsafe { write_addr(peer, s.domain, m.msg_name.cast(), &mut m.msg_namelen) };
        } else {
            m.msg_namelen = 0;
        }
        m.msg_controllen = 0;
        m.msg_flags = 0;
        Ok(n)
    });
    r.unwrap_or_else(|| unsafe {
        real!(recvmsg: fn(c_int, *mut msghdr, c_int) -> ssize_t)(fd, msg, flags)
    })
}

// ---- writing ----

/// # Safety
/// A C `write(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: size_t) -> ssize_t {
    let r = on_imp(fd, "write", |s| {
        // SAFETY: the caller's buffer.
        do_send(
            s,
            "write",
            &[IoSlice::new(unsafe { buf_ref(buf, count) })],
            None,
            0,
        )
    });
    r.unwrap_or_else(|| unsafe {
        real!(write: fn(c_int, *const c_void, size_t) -> ssize_t)(fd, buf, count)
    })
}

/// # Safety
/// A C `writev(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, count: c_int) -> ssize_t {
    let r = on_imp(fd, "writev", |s| {
        // SAFETY: the caller's iovecs.
        let bufs = unsafe { iov_ref(iov, usize::try_from(count).unwrap_or(0)) };
        do_send(s, "writev", &bufs, None, 0)
    });
    r.unwrap_or_else(|| unsafe {
        real!(writev: fn(c_int, *const iovec, c_int) -> ssize_t)(fd, iov, count)
    })
}

/// # Safety
/// A C `send(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, len: size_t, flags: c_int) -> ssize_t {
    let r = on_imp(fd, "send", |s| {
        // SAFETY: the caller's buffer.
        do_send(
            s,
            "send",
            &[IoSlice::new(unsafe { buf_ref(buf, len) })],
            None,
            flags,
        )
    });
    r.unwrap_or_else(|| unsafe {
        real!(send: fn(c_int, *const c_void, size_t, c_int) -> ssize_t)(fd, buf, len, flags)
    })
}

/// # Safety
/// A C `sendto(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    len: size_t,
    flags: c_int,
    addr: *const sockaddr,
    addrlen: socklen_t,
) -> ssize_t {
    let r = on_imp(fd, "sendto", |s| {
        let mut to = None;
        if !addr.is_null() {
            if s.datagram {
                // SAFETY: the caller's address, as sendto(2) takes it.
                to = Some(unsafe { read_addr(addr, addrlen) }?);
            } else if s.peer_addr().is_err() {
                // Linux: a connected stream socket ignores the address; an unconnected
                // one cannot send (TCP Fast Open's MSG_FASTOPEN is not covered).
                return Err(errno(libc::ENOTCONN));
            }
        }
        // SAFETY: the caller's buffer.
        do_send(
            s,
            "sendto",
            &[IoSlice::new(unsafe { buf_ref(buf, len) })],
            to,
            flags,
        )
    });
    r.unwrap_or_else(|| unsafe {
        real!(sendto: fn(c_int, *const c_void, size_t, c_int, *const sockaddr, socklen_t) -> ssize_t)(
            fd, buf, len, flags, addr, addrlen,
        )
    })
}

/// # Safety
/// A C `sendmsg(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
    let r = on_imp(fd, "sendmsg", |s| {
        if msg.is_null() {
            return Err(errno(libc::EFAULT));
        }
        // SAFETY: the caller's msghdr.
        let m = unsafe { &*msg };
        if m.msg_controllen != 0 {
            return Err(unsupported("sendmsg with control messages"));
        }
        let to = if s.datagram && !m.msg_name.is_null() {
            // SAFETY: the caller's name and its length.
            Some(unsafe { read_addr(m.msg_name.cast(), m.msg_namelen) }?)
        } else {
            None
        };
        // SAFETY: the caller's iovecs.
        let bufs = unsafe { iov_ref(m.msg_iov, m.msg_iovlen) };
        do_send(s, "sendmsg", &bufs, to, flags)
    });
    r.unwrap_or_else(|| unsafe {
        real!(sendmsg: fn(c_int, *const msghdr, c_int) -> ssize_t)(fd, msg, flags)
    })
}

/// `sendfile` to an imp socket: read from `in_fd` (at `*offset` if given, moving it)
/// and send, up to `count` bytes, one buffer at a time.
///
/// # Safety
/// A C `sendfile(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendfile(
    out_fd: c_int,
    in_fd: c_int,
    offset: *mut off_t,
    count: size_t,
) -> ssize_t {
    let r = on_imp(out_fd, "sendfile", |s| {
        let mut buf = vec![0u8; count.min(64 * 1024)];
        // SAFETY: a live buffer; `offset` is the caller's.
        let n = unsafe {
            if offset.is_null() {
                real!(read: fn(c_int, *mut c_void, size_t) -> ssize_t)(
                    in_fd,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            } else {
                libc::pread(in_fd, buf.as_mut_ptr().cast(), buf.len(), *offset)
            }
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        let sent = do_send(s, "sendfile", &[IoSlice::new(&buf[..n])], None, 0)?;
        // SAFETY: the caller's offset; the file position when there is none.
        unsafe {
            if offset.is_null() {
                libc::lseek(in_fd, sent as off_t - n as off_t, libc::SEEK_CUR);
            } else {
                *offset += sent as off_t;
            }
        }
        Ok(sent)
    });
    r.unwrap_or_else(|| unsafe {
        real!(sendfile: fn(c_int, c_int, *mut off_t, size_t) -> ssize_t)(
            out_fd, in_fd, offset, count,
        )
    })
}

/// # Safety
/// A C `sendfile64(2)` call (the same as `sendfile` on 64-bit Linux).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendfile64(
    out_fd: c_int,
    in_fd: c_int,
    offset: *mut off_t,
    count: size_t,
) -> ssize_t {
    if table::get(out_fd).is_none() {
        return unsafe {
            real!(sendfile64: fn(c_int, c_int, *mut off_t, size_t) -> ssize_t)(
                out_fd, in_fd, offset, count,
            )
        };
    }
    // SAFETY: forwarded as given.
    unsafe { sendfile(out_fd, in_fd, offset, count) }
}

// ---- the rest of a socket's life ----

/// # Safety
/// A C `close(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    match table::remove(fd) {
        // In a child of fork the runtime is the parent's (its lock may be held by a
        // thread the child does not have): the descriptor goes, the socket is left.
        Some(socket) if crate::forked() => {
            crate::epoll::forget(fd);
            std::mem::forget(socket);
            unsafe { real!(close: fn(c_int) -> c_int)(fd) }
        }
        // The stream closes gracefully (FIN after what is queued) and the eventfd
        // with the last reference.
        Some(socket) => guard_int("close", move || {
            crate::epoll::forget(fd);
            drop(socket);
            Ok(0)
        }),
        None => {
            crate::epoll::forget(fd);
            unsafe { real!(close: fn(c_int) -> c_int)(fd) }
        }
    }
}

/// # Safety
/// A C `shutdown(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shutdown(fd: c_int, how: c_int) -> c_int {
    let r = on_imp(fd, "shutdown", |s| s.shutdown(how).map(|()| 0));
    r.map_or_else(
        || unsafe { real!(shutdown: fn(c_int, c_int) -> c_int)(fd, how) },
        |v| v as c_int,
    )
}

/// # Safety
/// A C `getsockname(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    let r = on_imp(fd, "getsockname", |s| {
        let local = s.local_addr()?;
        // SAFETY: the caller's pointers.
        unsafe { write_addr(local, s.domain, addr, len) };
        Ok(0)
    });
    r.map_or_else(
        || unsafe {
            real!(getsockname: fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int)(fd, addr, len)
        },
        |v| v as c_int,
    )
}

/// # Safety
/// A C `getpeername(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    let r = on_imp(fd, "getpeername", |s| {
        let peer = s.peer_addr()?;
        // SAFETY: the caller's pointers.
        unsafe { write_addr(peer, s.domain, addr, len) };
        Ok(0)
    });
    r.map_or_else(
        || unsafe {
            real!(getpeername: fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int)(fd, addr, len)
        },
        |v| v as c_int,
    )
}

/// # Safety
/// A C `getsockopt(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    value: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    let r = on_imp(fd, "getsockopt", |s| {
        if value.is_null() || len.is_null() {
            return Err(errno(libc::EFAULT));
        }
        let bytes = match (level, name) {
            (libc::IPPROTO_TCP, libc::TCP_INFO) => Some(s.tcp_info()),
            (libc::IPPROTO_TCP, libc::TCP_CONGESTION) => Some(s.congestion()?),
            _ => None,
        };
        if let Some(bytes) = bytes {
            // SAFETY: the caller's buffer of `*len` bytes; as Linux, the prefix that
            // fits, and the length written.
            unsafe {
                let n = (*len as usize).min(bytes.len());
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), value.cast::<u8>(), n);
                *len = n as socklen_t;
            }
            return Ok(0);
        }
        let v = crate::sockopt::get(s, level, name)?;
        // SAFETY: the caller's pointers; an int needs 4 bytes of room.
        unsafe {
            if (*len as usize) < size_of::<c_int>() {
                return Err(errno(libc::EINVAL));
            }
            std::ptr::write_unaligned(value.cast::<c_int>(), v);
            *len = size_of::<c_int>() as socklen_t;
        }
        Ok(0)
    });
    r.map_or_else(
        || unsafe {
            real!(getsockopt: fn(c_int, c_int, c_int, *mut c_void, *mut socklen_t) -> c_int)(
                fd, level, name, value, len,
            )
        },
        |v| v as c_int,
    )
}

/// # Safety
/// A C `setsockopt(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn setsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    value: *const c_void,
    len: socklen_t,
) -> c_int {
    let r = on_imp(fd, "setsockopt", |s| {
        if value.is_null() || (len as usize) < size_of::<c_int>() {
            return Err(unsupported(&format!(
                "setsockopt(level {level}, option {name}) with a value that is not an int"
            )));
        }
        // SAFETY: the caller's pointer, at least 4 bytes.
        let v = unsafe { std::ptr::read_unaligned(value.cast::<c_int>()) };
        crate::sockopt::set(s, level, name, v).map(|()| 0)
    });
    r.map_or_else(
        || unsafe {
            real!(setsockopt: fn(c_int, c_int, c_int, *const c_void, socklen_t) -> c_int)(
                fd, level, name, value, len,
            )
        },
        |v| v as c_int,
    )
}

/// `fcntl` on an imp socket: the status flags (`O_NONBLOCK`) are imp's, the
/// descriptor flags (`FD_CLOEXEC`) the eventfd's; duplicating is not covered.
fn fcntl_imp(s: &Socket, cmd: c_int, arg: c_ulong) -> io::Result<isize> {
    match cmd {
        libc::F_GETFL => {
            Ok((libc::O_RDWR | if s.nonblocking() { libc::O_NONBLOCK } else { 0 }) as isize)
        }
        libc::F_SETFL => {
            s.set_nonblocking(arg as c_int & libc::O_NONBLOCK != 0);
            Ok(0)
        }
        libc::F_GETFD | libc::F_SETFD => {
            // SAFETY: descriptor flags of the eventfd, which takes an int argument.
            let r = unsafe { real!(fcntl: fn(c_int, c_int, c_ulong) -> c_int)(s.fd(), cmd, arg) };
            if r < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(r as isize)
            }
        }
        _ => Err(unsupported(&format!("fcntl command {cmd}"))),
    }
}

/// `fcntl`, declared variadic in C; the one argument every command takes arrives in
/// the third integer register whatever its type, on the ABIs Linux runs on.
///
/// # Safety
/// A C `fcntl(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    let r = on_imp(fd, "fcntl", |s| fcntl_imp(s, cmd, arg));
    r.map_or_else(
        || unsafe { real!(fcntl: fn(c_int, c_int, c_ulong) -> c_int)(fd, cmd, arg) },
        |v| v as c_int,
    )
}

/// # Safety
/// glibc's `fcntl64` (what programs built against glibc 2.28 and later call).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    let r = on_imp(fd, "fcntl64", |s| fcntl_imp(s, cmd, arg));
    r.map_or_else(
        || unsafe { real!(fcntl64: fn(c_int, c_int, c_ulong) -> c_int)(fd, cmd, arg) },
        |v| v as c_int,
    )
}

/// `ioctl`, variadic in C (see [`fcntl`]): `FIONBIO` and `FIONREAD` on imp sockets.
///
/// # Safety
/// A C `ioctl(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ioctl(fd: c_int, request: c_ulong, arg: *mut c_void) -> c_int {
    let r = on_imp(fd, "ioctl", |s| {
        if arg.is_null() {
            return Err(errno(libc::EFAULT));
        }
        match request {
            libc::FIONBIO => {
                // SAFETY: FIONBIO takes a pointer to an int.
                s.set_nonblocking(unsafe { std::ptr::read_unaligned(arg.cast::<c_int>()) } != 0);
                Ok(0)
            }
            libc::FIONREAD => {
                let n = c_int::try_from(s.readable_bytes()).unwrap_or(c_int::MAX);
                // SAFETY: FIONREAD writes an int through the pointer.
                unsafe { std::ptr::write_unaligned(arg.cast::<c_int>(), n) };
                Ok(0)
            }
            _ => Err(unsupported(&format!("ioctl request {request:#x}"))),
        }
    });
    r.map_or_else(
        || unsafe { real!(ioctl: fn(c_int, c_ulong, *mut c_void) -> c_int)(fd, request, arg) },
        |v| v as c_int,
    )
}

// ---- calls refused on imp sockets (never passed to the kernel with one) ----

/// # Safety
/// A C `dup(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    let r = on_imp(fd, "dup", |_| Err(unsupported("dup")));
    r.map_or_else(
        || unsafe { real!(dup: fn(c_int) -> c_int)(fd) },
        |v| v as c_int,
    )
}

/// # Safety
/// A C `dup2(2)` call: an imp socket as the new descriptor is closed first, as the
/// kernel closes whatever the new descriptor was.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    if let Some(v) = on_imp(old, "dup2", |_| Err(unsupported("dup2"))) {
        return v as c_int;
    }
    if old != new {
        drop(table::remove(new));
    }
    unsafe { real!(dup2: fn(c_int, c_int) -> c_int)(old, new) }
}

/// # Safety
/// A C `dup3(2)` call (see [`dup2`]).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    if let Some(v) = on_imp(old, "dup3", |_| Err(unsupported("dup3"))) {
        return v as c_int;
    }
    if old != new {
        drop(table::remove(new));
    }
    unsafe { real!(dup3: fn(c_int, c_int, c_int) -> c_int)(old, new, flags) }
}

/// # Safety
/// A C `sendmmsg(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendmmsg(
    fd: c_int,
    msgs: *mut libc::mmsghdr,
    n: libc::c_uint,
    flags: c_int,
) -> c_int {
    if let Some(v) = on_imp(fd, "sendmmsg", |_| Err(unsupported("sendmmsg"))) {
        return v as c_int;
    }
    unsafe {
        real!(sendmmsg: fn(c_int, *mut libc::mmsghdr, libc::c_uint, c_int) -> c_int)(
            fd, msgs, n, flags,
        )
    }
}

/// # Safety
/// A C `recvmmsg(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn recvmmsg(
    fd: c_int,
    msgs: *mut libc::mmsghdr,
    n: libc::c_uint,
    flags: c_int,
    timeout: *mut libc::timespec,
) -> c_int {
    if let Some(v) = on_imp(fd, "recvmmsg", |_| Err(unsupported("recvmmsg"))) {
        return v as c_int;
    }
    unsafe {
        real!(recvmmsg: fn(c_int, *mut libc::mmsghdr, libc::c_uint, c_int, *mut libc::timespec) -> c_int)(
            fd, msgs, n, flags, timeout,
        )
    }
}

/// # Safety
/// A C `splice(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn splice(
    fd_in: c_int,
    off_in: *mut libc::loff_t,
    fd_out: c_int,
    off_out: *mut libc::loff_t,
    len: size_t,
    flags: libc::c_uint,
) -> ssize_t {
    let refused = on_imp(fd_in, "splice", |_| Err(unsupported("splice")))
        .or_else(|| on_imp(fd_out, "splice", |_| Err(unsupported("splice"))));
    refused.unwrap_or_else(|| unsafe {
        real!(splice: fn(c_int, *mut libc::loff_t, c_int, *mut libc::loff_t, size_t, libc::c_uint) -> ssize_t)(
            fd_in, off_in, fd_out, off_out, len, flags,
        )
    })
}
