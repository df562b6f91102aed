//! The C side: packetdrill's `struct packetdrill_interface` and the functions that
//! fill it.
//!
//! The layout follows `gtests/net/packetdrill/packetdrill.h`: `userdata`, then one
//! function pointer per call in the header's order. Every function catches panics
//! (none crosses into C: a panic is reported on stderr and the call fails with
//! `EIO`), sets `errno` on failure and returns -1.
//!
//! `fcntl` and `ioctl` are variadic in C. Rust cannot define a variadic function on
//! stable, so they take their one optional argument as a plain third parameter: on
//! the System V x86_64 and AArch64 Linux ABIs a variadic integer or pointer argument
//! travels in the same register as a fixed one.

use std::ffi::{CStr, c_char, c_int, c_long, c_uint, c_ulong, c_void};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};
use std::panic::{AssertUnwindSafe, catch_unwind};

use impnet_core::Duration;
use libc::{epoll_event, iovec, msghdr, pollfd, sockaddr, socklen_t, timeval, timezone};

use crate::driver::Driver;
use crate::errno::{Errno, TIMED_OUT};
use crate::fastopen::MSG_FASTOPEN;
use crate::flags::Flags;
use crate::gather::skip;
use crate::shim::{EPOCH_SECS, Shim};

/// `struct packetdrill_interface`, in the header's order.
#[repr(C)]
#[allow(missing_docs)]
pub struct PacketdrillInterface {
    pub userdata: *mut c_void,
    pub free: Option<unsafe extern "C" fn(*mut c_void)>,
    pub socket: Option<unsafe extern "C" fn(*mut c_void, c_int, c_int, c_int) -> c_int>,
    pub bind: Option<unsafe extern "C" fn(*mut c_void, c_int, *const sockaddr, socklen_t) -> c_int>,
    pub listen: Option<unsafe extern "C" fn(*mut c_void, c_int, c_int) -> c_int>,
    pub accept:
        Option<unsafe extern "C" fn(*mut c_void, c_int, *mut sockaddr, *mut socklen_t) -> c_int>,
    pub connect:
        Option<unsafe extern "C" fn(*mut c_void, c_int, *const sockaddr, socklen_t) -> c_int>,
    pub read: Option<unsafe extern "C" fn(*mut c_void, c_int, *mut c_void, usize) -> isize>,
    pub readv: Option<unsafe extern "C" fn(*mut c_void, c_int, *const iovec, c_int) -> isize>,
    pub recv: Option<unsafe extern "C" fn(*mut c_void, c_int, *mut c_void, usize, c_int) -> isize>,
    pub recvfrom: Option<
        unsafe extern "C" fn(
            *mut c_void,
            c_int,
            *mut c_void,
            usize,
            c_int,
            *mut sockaddr,
            *mut socklen_t,
        ) -> isize,
    >,
    pub recvmsg: Option<unsafe extern "C" fn(*mut c_void, c_int, *mut msghdr, c_int) -> isize>,
    pub write: Option<unsafe extern "C" fn(*mut c_void, c_int, *const c_void, usize) -> isize>,
    pub writev: Option<unsafe extern "C" fn(*mut c_void, c_int, *const iovec, c_int) -> isize>,
    pub send:
        Option<unsafe extern "C" fn(*mut c_void, c_int, *const c_void, usize, c_int) -> isize>,
    pub sendto: Option<
        unsafe extern "C" fn(
            *mut c_void,
            c_int,
            *const c_void,
            usize,
            c_int,
            *const sockaddr,
            socklen_t,
        ) -> isize,
    >,
    pub sendmsg: Option<unsafe extern "C" fn(*mut c_void, c_int, *const msghdr, c_int) -> isize>,
    pub fcntl: Option<unsafe extern "C" fn(*mut c_void, c_int, c_int, c_long) -> c_int>,
    pub ioctl: Option<unsafe extern "C" fn(*mut c_void, c_int, c_ulong, *mut c_void) -> c_int>,
    pub close: Option<unsafe extern "C" fn(*mut c_void, c_int) -> c_int>,
    pub shutdown: Option<unsafe extern "C" fn(*mut c_void, c_int, c_int) -> c_int>,
    pub getsockopt: Option<
        unsafe extern "C" fn(
            *mut c_void,
            c_int,
            c_int,
            c_int,
            *mut c_void,
            *mut socklen_t,
        ) -> c_int,
    >,
    pub setsockopt: Option<
        unsafe extern "C" fn(*mut c_void, c_int, c_int, c_int, *const c_void, socklen_t) -> c_int,
    >,
    pub poll: Option<unsafe extern "C" fn(*mut c_void, *mut pollfd, c_ulong, c_int) -> c_int>,
    pub netdev_send: Option<unsafe extern "C" fn(*mut c_void, *const c_void, usize) -> c_int>,
    pub netdev_receive:
        Option<unsafe extern "C" fn(*mut c_void, *mut c_void, *mut usize, *mut i64) -> c_int>,
    pub usleep: Option<unsafe extern "C" fn(*mut c_void, c_uint) -> c_int>,
    pub gettimeofday:
        Option<unsafe extern "C" fn(*mut c_void, *mut timeval, *mut timezone) -> c_int>,
    pub epoll_create: Option<unsafe extern "C" fn(*mut c_void, c_int) -> c_int>,
    pub epoll_ctl:
        Option<unsafe extern "C" fn(*mut c_void, c_int, c_int, c_int, *mut epoll_event) -> c_int>,
    pub epoll_wait:
        Option<unsafe extern "C" fn(*mut c_void, c_int, *mut epoll_event, c_int, c_int) -> c_int>,
    pub pipe: Option<unsafe extern "C" fn(*mut c_void, *mut c_int) -> c_int>,
    pub splice: Option<
        unsafe extern "C" fn(*mut c_void, c_int, *mut i64, c_int, *mut i64, usize, c_uint) -> isize,
    >,
}

/// packetdrill's entry point: parse `flags`, build the stack, fill `interface`.
///
/// Bad flags are reported on stderr; every call then fails with `EINVAL` (and
/// `netdev_receive` hands back an empty packet, which packetdrill reports), so the
/// run stops at once with the message above it.
///
/// # Safety
/// `flags` is null or a NUL-terminated string; `interface` points to writable memory
/// for a `struct packetdrill_interface`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn packetdrill_interface_init(
    flags: *const c_char,
    interface: *mut PacketdrillInterface,
) {
    if interface.is_null() {
        return;
    }
    let result = catch_unwind(|| {
        // SAFETY: the caller passes null or a C string.
        let text = (!flags.is_null()).then(|| unsafe { CStr::from_ptr(flags) }.to_string_lossy());
        match Flags::parse(text.as_deref()) {
            Ok(flags) => Some(Box::into_raw(Box::new(Driver::new(Shim::new(flags))))),
            Err(error) => {
                eprintln!("imp-packetdrill: {error}");
                None
            }
        }
    });
    let userdata = result
        .ok()
        .flatten()
        .map_or(core::ptr::null_mut(), |d| d.cast());
    // SAFETY: the caller gives a writable interface struct.
    unsafe { interface.write(table(userdata)) };
}

fn table(userdata: *mut c_void) -> PacketdrillInterface {
    PacketdrillInterface {
        userdata,
        free: Some(free),
        socket: Some(socket),
        bind: Some(bind),
        listen: Some(listen),
        accept: Some(accept),
        connect: Some(connect),
        read: Some(read),
        readv: Some(readv),
        recv: Some(recv),
        recvfrom: Some(recvfrom),
        recvmsg: Some(recvmsg),
        write: Some(write),
        writev: Some(writev),
        send: Some(send),
        sendto: Some(sendto),
        sendmsg: Some(sendmsg),
        fcntl: Some(fcntl),
        ioctl: Some(ioctl),
        close: Some(close),
        shutdown: Some(shutdown),
        getsockopt: Some(getsockopt),
        setsockopt: Some(setsockopt),
        poll: Some(poll),
        netdev_send: Some(netdev_send),
        netdev_receive: Some(netdev_receive),
        usleep: Some(usleep),
        gettimeofday: Some(gettimeofday),
        epoll_create: Some(epoll_create),
        epoll_ctl: Some(epoll_ctl),
        epoll_wait: Some(epoll_wait),
        pipe: Some(pipe),
        splice: Some(splice),
    }
}

fn set_errno(errno: Errno) {
    // SAFETY: __errno_location gives this thread's errno.
    unsafe { *libc::__errno_location() = errno };
}

/// Run `f` on the driver behind `userdata`: a result, or -1 with errno set. No panic
/// leaves.
fn call<T: TryFrom<usize> + From<i8>>(
    userdata: *mut c_void,
    name: &str,
    f: impl FnOnce(&Driver) -> Result<usize, Errno>,
) -> T {
    if userdata.is_null() {
        set_errno(libc::EINVAL);
        return T::from(-1);
    }
    // SAFETY: userdata is the Box<Driver> made by packetdrill_interface_init, alive
    // until `free`.
    let driver = unsafe { &*userdata.cast::<Driver>() };
    match catch_unwind(AssertUnwindSafe(|| f(driver))) {
        Ok(Ok(value)) => T::try_from(value).unwrap_or_else(|_| T::from(-1)),
        Ok(Err(errno)) => {
            set_errno(errno);
            T::from(-1)
        }
        Err(_) => {
            eprintln!("imp-packetdrill: {name} panicked; failing the call with EIO");
            set_errno(libc::EIO);
            T::from(-1)
        }
    }
}

fn non_negative(value: c_int) -> Result<usize, Errno> {
    usize::try_from(value).map_err(|_| libc::EINVAL)
}

/// A `sockaddr_in` or `sockaddr_in6` from C (by its family field).
unsafe fn sockaddr_in(addr: *const sockaddr, len: socklen_t) -> Result<SocketAddr, Errno> {
    if addr.is_null() {
        return Err(libc::EFAULT);
    }
    if (len as usize) < core::mem::size_of::<libc::sa_family_t>() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's buffer holds at least the family field (checked above).
    let family = unsafe { addr.cast::<libc::sa_family_t>().read_unaligned() };
    match c_int::from(family) {
        libc::AF_INET => {
            if (len as usize) < core::mem::size_of::<libc::sockaddr_in>() {
                return Err(libc::EINVAL);
            }
            // SAFETY: the caller's buffer holds a sockaddr_in (checked above).
            let sin = unsafe { addr.cast::<libc::sockaddr_in>().read_unaligned() };
            Ok(SocketAddr::new(
                Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)).into(),
                u16::from_be(sin.sin_port),
            ))
        }
        libc::AF_INET6 => {
            if (len as usize) < core::mem::size_of::<libc::sockaddr_in6>() {
                return Err(libc::EINVAL);
            }
            // SAFETY: the caller's buffer holds a sockaddr_in6 (checked above).
            let sin6 = unsafe { addr.cast::<libc::sockaddr_in6>().read_unaligned() };
            Ok(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                u32::from_be(sin6.sin6_flowinfo),
                sin6.sin6_scope_id,
            )))
        }
        _ => Err(libc::EAFNOSUPPORT),
    }
}

/// Write `value` to a caller's (addr, addrlen) pair, as the kernel does: as much as
/// fits, and the full length in addrlen; a `sockaddr_in` or a `sockaddr_in6` by the
/// address's family. Both null: nothing.
unsafe fn put_sockaddr(value: SocketAddr, addr: *mut sockaddr, len: *mut socklen_t) {
    if addr.is_null() || len.is_null() {
        return;
    }
    match value {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*v4.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: the caller gives *len writable bytes at addr.
            unsafe { copy_out(&sin, addr, len) };
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo().to_be(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: the caller gives *len writable bytes at addr.
            unsafe { copy_out(&sin6, addr, len) };
        }
    }
}

/// Copy `value` to (addr, len): at most *len bytes, and its full size in *len.
///
/// # Safety
/// `addr` must have `*len` writable bytes and `len` be valid.
unsafe fn copy_out<T>(value: &T, addr: *mut sockaddr, len: *mut socklen_t) {
    let size = core::mem::size_of::<T>();
    // SAFETY: the caller gives *len writable bytes at addr.
    unsafe {
        let n = (*len as usize).min(size);
        core::ptr::copy_nonoverlapping((value as *const T).cast::<u8>(), addr.cast::<u8>(), n);
        *len = size as socklen_t;
    }
}

/// The caller's iovec array as slices.
unsafe fn iovecs<'a>(iov: *const iovec, count: c_int) -> Result<Vec<&'a mut [u8]>, Errno> {
    let count = usize::try_from(count).map_err(|_| libc::EINVAL)?;
    if count > 1024 {
        return Err(libc::EINVAL);
    }
    if count > 0 && iov.is_null() {
        return Err(libc::EFAULT);
    }
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        // SAFETY: the caller gives `count` iovecs.
        let v = unsafe { iov.add(i).read() };
        if v.iov_len == 0 {
            continue;
        }
        if v.iov_base.is_null() {
            return Err(libc::EFAULT);
        }
        // SAFETY: each iovec names iov_len bytes the caller owns.
        out.push(unsafe { core::slice::from_raw_parts_mut(v.iov_base.cast::<u8>(), v.iov_len) });
    }
    Ok(out)
}

/// One buffer as an iovec list (null with a length is EFAULT, as the kernel says).
unsafe fn one_buffer<'a>(buf: *mut c_void, len: usize) -> Result<Vec<&'a mut [u8]>, Errno> {
    if len == 0 {
        return Ok(Vec::new());
    }
    if buf.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller gives len bytes at buf.
    Ok(vec![unsafe {
        core::slice::from_raw_parts_mut(buf.cast::<u8>(), len)
    }])
}

unsafe extern "C" fn free(userdata: *mut c_void) {
    if userdata.is_null() {
        return;
    }
    let _ = catch_unwind(|| {
        // SAFETY: made by Box::into_raw in packetdrill_interface_init; freed once.
        drop(unsafe { Box::from_raw(userdata.cast::<Driver>()) });
    });
}

unsafe extern "C" fn socket(ud: *mut c_void, domain: c_int, kind: c_int, protocol: c_int) -> c_int {
    call(ud, "socket", |d| {
        d.with(|s| s.socket(domain, kind, protocol))
            .and_then(non_negative)
    })
}

unsafe extern "C" fn bind(
    ud: *mut c_void,
    fd: c_int,
    addr: *const sockaddr,
    len: socklen_t,
) -> c_int {
    call(ud, "bind", |d| {
        // SAFETY: the caller's sockaddr.
        let addr = unsafe { sockaddr_in(addr, len) }?;
        d.with(|s| s.bind(fd, addr)).and_then(non_negative)
    })
}

unsafe extern "C" fn listen(ud: *mut c_void, fd: c_int, backlog: c_int) -> c_int {
    call(ud, "listen", |d| {
        d.with(|s| s.listen(fd, backlog)).and_then(non_negative)
    })
}

unsafe extern "C" fn accept(
    ud: *mut c_void,
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> c_int {
    call(ud, "accept", |d| {
        let (new_fd, remote) = d.blocking(fd, None, |s| s.accept(fd))?;
        // SAFETY: the caller's (addr, addrlen).
        unsafe { put_sockaddr(remote, addr, len) };
        non_negative(new_fd)
    })
}

unsafe extern "C" fn connect(
    ud: *mut c_void,
    fd: c_int,
    addr: *const sockaddr,
    len: socklen_t,
) -> c_int {
    call(ud, "connect", |d| {
        // SAFETY: the caller's sockaddr.
        let remote = unsafe { sockaddr_in(addr, len) }?;
        let connect = |s: &mut Shim| {
            s.fast_open_connect(fd, remote)
                .unwrap_or_else(|| s.connect(fd, remote))
        };
        match d.with(connect) {
            Err(libc::EINPROGRESS) => {}
            other => return other.and_then(non_negative),
        }
        let nonblocking = d.with(|s| s.tcp_socket(fd).map(|t| t.nonblocking))?;
        if nonblocking {
            return Err(libc::EINPROGRESS);
        }
        d.blocking(fd, None, |s| s.connect_done(fd))
            .and_then(non_negative)
    })
}

/// The address of a `MSG_FASTOPEN` write: `AF_UNSPEC` is `EOPNOTSUPP`, as Linux's
/// `tcp_sendmsg_fastopen` says.
///
/// # Safety
/// `addr` is null or points to `len` readable bytes.
unsafe fn fast_open_address(addr: *const sockaddr, len: socklen_t) -> Result<SocketAddr, Errno> {
    if addr.is_null() {
        return Err(libc::EDESTADDRREQ);
    }
    // SAFETY: the caller's sockaddr has at least its family when len allows.
    if len as usize >= core::mem::size_of::<libc::sa_family_t>()
        && i32::from(unsafe { (*addr).sa_family }) == libc::AF_UNSPEC
    {
        return Err(libc::EOPNOTSUPP);
    }
    // SAFETY: as above.
    unsafe { sockaddr_in(addr, len) }
}

/// A read of `bufs` with recv's flags, blocking unless MSG_DONTWAIT.
fn do_read(d: &Driver, fd: c_int, mut bufs: Vec<&mut [u8]>, flags: c_int) -> Result<usize, Errno> {
    let peek = flags & libc::MSG_PEEK != 0;
    if flags & libc::MSG_DONTWAIT != 0 {
        return d.with(|s| s.read(fd, &mut bufs, peek));
    }
    d.blocking(fd, None, |s| s.read(fd, &mut bufs, peek))
}

/// A write of `bufs`: a blocking socket takes all of it before returning (or an
/// error, or what it took before one), as Linux's `tcp_sendmsg` does. With MSG_EOR,
/// a write taken whole ends a record (Linux marks the skb only then).
fn do_write(d: &Driver, fd: c_int, bufs: &[&[u8]], flags: c_int) -> Result<usize, Errno> {
    if d.with(|s| s.fast_open_deferred(fd)) {
        return fast_open_write(d, fd, None, bufs, flags);
    }
    d.with(|s| s.more_coming(fd, flags & libc::MSG_MORE != 0))?;
    let total: usize = bufs.iter().map(|b| b.len()).sum();
    let written = write_all(d, fd, bufs, flags, total)?;
    if flags & libc::MSG_EOR != 0 && written == total {
        d.with(|s| s.end_record(fd))?;
    }
    Ok(written)
}

/// The write of [`do_write`], `total` bytes in `bufs`.
fn write_all(
    d: &Driver,
    fd: c_int,
    bufs: &[&[u8]],
    flags: c_int,
    total: usize,
) -> Result<usize, Errno> {
    if flags & libc::MSG_DONTWAIT != 0 {
        return d.with(|s| s.write(fd, bufs));
    }
    let mut done = 0;
    // A writer out of room sleeps until a write-space wake-up (Linux's
    // `sk_stream_wait_memory`), not merely until something changed.
    let mut asleep: Option<u64> = None;
    let result = d.blocking(fd, None, |s| {
        if asleep.is_some_and(|since| s.write_still_asleep(fd, since)) {
            return Err(libc::EAGAIN);
        }
        let rest = skip(bufs, done);
        match s.write(fd, &rest) {
            Ok(n) => {
                done += n;
                if done == total {
                    Ok(())
                } else {
                    asleep = Some(s.write_wakeups(fd));
                    Err(libc::EAGAIN)
                }
            }
            Err(libc::EAGAIN) => {
                asleep = Some(s.write_wakeups(fd));
                Err(libc::EAGAIN)
            }
            Err(_) if done > 0 => Ok(()),
            Err(errno) => Err(errno),
        }
    });
    match result {
        Ok(()) => Ok(done),
        Err(_) if done > 0 => Ok(done),
        Err(errno) => Err(errno),
    }
}

/// A send call's result, after its zero-copy number and timestamp mark are taken
/// ([`crate::errqueue`]): one per call, however many rounds a blocking one took.
fn sent(d: &Driver, fd: c_int, flags: c_int, result: Result<usize, Errno>) -> Result<usize, Errno> {
    if let Ok(n) = result {
        let _ = d.with(|s| s.after_send(fd, n, flags));
    }
    result
}

/// A write that opens the connection with TCP Fast Open (`MSG_FASTOPEN` to `remote`,
/// or a deferred `TCP_FASTOPEN_CONNECT`'s first write): a blocking socket returns once
/// the handshake is done, with all it took, as Linux's `tcp_sendmsg_fastopen`.
fn fast_open_write(
    d: &Driver,
    fd: c_int,
    remote: Option<SocketAddr>,
    bufs: &[&[u8]],
    flags: c_int,
) -> Result<usize, Errno> {
    let dontwait = flags & libc::MSG_DONTWAIT != 0;
    let (taken, nonblocking) = d.with(|s| {
        let nonblocking = dontwait || s.tcp_socket(fd)?.nonblocking;
        Ok::<_, Errno>((
            s.fast_open_start(fd, remote, bufs, nonblocking)?,
            nonblocking,
        ))
    })?;
    let Some(taken) = taken else {
        return do_write(d, fd, bufs, flags & !MSG_FASTOPEN);
    };
    if nonblocking {
        return if taken > 0 {
            Ok(taken)
        } else {
            Err(libc::EINPROGRESS)
        };
    }
    d.blocking(fd, None, |s| s.connect_done(fd))?;
    let total: usize = bufs.iter().map(|b| b.len()).sum();
    if taken < total {
        return Ok(taken + do_write(d, fd, &skip(bufs, taken), 0).unwrap_or(0));
    }
    Ok(taken)
}

fn as_const(bufs: &[&mut [u8]]) -> Vec<&'static [u8]> {
    // SAFETY helper: the slices live as long as the call that borrowed them; the
    // 'static only lets the closure of `blocking` hold them (it never outlives it).
    bufs.iter()
        .map(|b| unsafe { core::slice::from_raw_parts(b.as_ptr(), b.len()) })
        .collect()
}

unsafe extern "C" fn read(ud: *mut c_void, fd: c_int, buf: *mut c_void, count: usize) -> isize {
    // SAFETY: the caller's buffer.
    call(ud, "read", |d| {
        do_read(d, fd, unsafe { one_buffer(buf, count) }?, 0)
    })
}

unsafe extern "C" fn readv(ud: *mut c_void, fd: c_int, iov: *const iovec, count: c_int) -> isize {
    // SAFETY: the caller's iovecs.
    call(ud, "readv", |d| {
        do_read(d, fd, unsafe { iovecs(iov, count) }?, 0)
    })
}

unsafe extern "C" fn recv(
    ud: *mut c_void,
    fd: c_int,
    buf: *mut c_void,
    len: usize,
    flags: c_int,
) -> isize {
    // SAFETY: the caller's buffer.
    call(ud, "recv", |d| {
        do_read(d, fd, unsafe { one_buffer(buf, len) }?, flags)
    })
}

unsafe extern "C" fn recvfrom(
    ud: *mut c_void,
    fd: c_int,
    buf: *mut c_void,
    len: usize,
    flags: c_int,
    addr: *mut sockaddr,
    addrlen: *mut socklen_t,
) -> isize {
    call(ud, "recvfrom", |d| {
        // SAFETY: the caller's buffer.
        let n = do_read(d, fd, unsafe { one_buffer(buf, len) }?, flags)?;
        if let Ok((_, Some(remote))) = d.with(|s| s.addresses(fd)) {
            // SAFETY: the caller's (addr, addrlen).
            unsafe { put_sockaddr(remote, addr, addrlen) };
        }
        Ok(n)
    })
}

unsafe extern "C" fn recvmsg(ud: *mut c_void, fd: c_int, msg: *mut msghdr, flags: c_int) -> isize {
    call(ud, "recvmsg", |d| {
        if msg.is_null() {
            return Err(libc::EFAULT);
        }
        // SAFETY: the caller's msghdr and the iovecs it names.
        let m = unsafe { &mut *msg };
        if flags & libc::MSG_ERRQUEUE != 0 {
            let (record, software, v6) = d.with(|s| s.recv_error(fd))?;
            // SAFETY: msg_control holds msg_controllen bytes.
            unsafe { put_error(m, record, software, v6) };
            return Ok(0);
        }
        let bufs = unsafe { iovecs(m.msg_iov, c_int::try_from(m.msg_iovlen).unwrap_or(-1)) }?;
        let n = do_read(d, fd, bufs, flags)?;
        let inq = d.with(|s| s.inq_hint(fd)).ok().flatten();
        // SAFETY: msg_control holds msg_controllen bytes.
        m.msg_controllen = unsafe { put_inq(m, inq) };
        m.msg_flags = 0;
        if let Ok((_, Some(remote))) = d.with(|s| s.addresses(fd)) {
            let mut len = m.msg_namelen;
            // SAFETY: msg_name holds msg_namelen bytes.
            unsafe { put_sockaddr(remote, m.msg_name.cast(), &raw mut len) };
            m.msg_namelen = len;
        }
        Ok(n)
    })
}

/// An error-queue record as Linux's `ip_recv_error` (`ipv6_recv_error`) hands it over:
/// for a timestamp an `SCM_TIMESTAMPING` message (when SOF_TIMESTAMPING_SOFTWARE is on)
/// then the `IP_RECVERR` (`IPV6_RECVERR`) one, a `struct sock_extended_err` and the
/// offender's address (zeros here); `MSG_ERRQUEUE` in `msg_flags`, with `MSG_TRUNC` for
/// a timestamp that carries its packet (no OPT_TSONLY; the shim copies none of it).
///
/// # Safety
/// `m.msg_control` must hold `m.msg_controllen` writable bytes (or be null).
unsafe fn put_error(m: &mut msghdr, record: crate::errqueue::Record, software: bool, v6: bool) {
    use crate::errqueue::{Record, SCM_TIMESTAMPING, SO_EE_CODE_ZEROCOPY_COPIED};
    let mut ee = libc::sock_extended_err {
        ee_errno: 0,
        ee_origin: 0,
        ee_type: 0,
        ee_code: 0,
        ee_pad: 0,
        ee_info: 0,
        ee_data: 0,
    };
    let mut messages: Vec<(c_int, c_int, Vec<u8>)> = Vec::new();
    m.msg_flags = libc::MSG_ERRQUEUE;
    match record {
        Record::ZeroCopy { lo, hi } => {
            ee.ee_origin = crate::errqueue::SO_EE_ORIGIN_ZEROCOPY;
            ee.ee_code = SO_EE_CODE_ZEROCOPY_COPIED;
            ee.ee_info = lo;
            ee.ee_data = hi;
        }
        Record::Timestamp {
            kind,
            key,
            at,
            tsonly,
        } => {
            ee.ee_errno = libc::ENOMSG as u32;
            ee.ee_origin = libc::SO_EE_ORIGIN_TIMESTAMPING;
            ee.ee_info = kind;
            ee.ee_data = key;
            if !tsonly {
                m.msg_flags |= libc::MSG_TRUNC;
            }
            if software {
                // struct scm_timestamping: ts[0] software, ts[1] legacy, ts[2] hardware.
                let nanos = EPOCH_SECS * 1_000_000_000 + at.as_nanos();
                let mut data = vec![0u8; 3 * core::mem::size_of::<libc::timespec>()];
                let sec = i64::try_from(nanos / 1_000_000_000).unwrap_or(i64::MAX);
                let nsec = (nanos % 1_000_000_000) as i64;
                data[..8].copy_from_slice(&sec.to_ne_bytes());
                data[8..16].copy_from_slice(&nsec.to_ne_bytes());
                messages.push((libc::SOL_SOCKET, SCM_TIMESTAMPING, data));
            }
        }
    }
    // SAFETY: sock_extended_err is plain old data.
    let mut data = unsafe {
        core::slice::from_raw_parts(
            (&raw const ee).cast::<u8>(),
            core::mem::size_of::<libc::sock_extended_err>(),
        )
    }
    .to_vec();
    let (level, kind, offender) = if v6 {
        (
            libc::SOL_IPV6,
            libc::IPV6_RECVERR,
            core::mem::size_of::<libc::sockaddr_in6>(),
        )
    } else {
        (
            libc::SOL_IP,
            libc::IP_RECVERR,
            core::mem::size_of::<libc::sockaddr_in>(),
        )
    };
    data.resize(data.len() + offender, 0);
    messages.push((level, kind, data));
    // SAFETY: as the caller promises.
    m.msg_controllen = unsafe { put_cmsgs(m, &messages) };
}

/// Control messages `(level, type, data)` in `m`'s control buffer, as many as fit
/// (MSG_CTRUNC for the rest); returns the control length to report.
///
/// # Safety
/// `m.msg_control` must hold `m.msg_controllen` writable bytes (or be null).
unsafe fn put_cmsgs(m: &mut msghdr, messages: &[(c_int, c_int, Vec<u8>)]) -> usize {
    let capacity = if m.msg_control.is_null() {
        0
    } else {
        m.msg_controllen
    };
    let mut used = 0usize;
    for (level, kind, data) in messages {
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        // SAFETY: CMSG_SPACE and CMSG_LEN only compute.
        let (space, cmsg_len) = unsafe { (libc::CMSG_SPACE(len) as usize, libc::CMSG_LEN(len)) };
        if used + space > capacity {
            m.msg_flags |= libc::MSG_CTRUNC;
            break;
        }
        // SAFETY: `used + space` bytes fit in the buffer (checked above); the header
        // goes at an aligned offset (CMSG_SPACE keeps alignment) and its data after it.
        unsafe {
            let cmsg = m.msg_control.cast::<u8>().add(used).cast::<libc::cmsghdr>();
            (*cmsg).cmsg_level = *level;
            (*cmsg).cmsg_type = *kind;
            (*cmsg).cmsg_len = cmsg_len as usize;
            core::ptr::copy_nonoverlapping(data.as_ptr(), libc::CMSG_DATA(cmsg), data.len());
        }
        used += space;
    }
    used
}

/// TCP_INQ's control message (`SOL_TCP`, `TCP_CM_INQ`, an int) in `m`'s control
/// buffer, when `inq` is given and it fits; returns the control length to report.
///
/// # Safety
/// `m.msg_control` must hold `m.msg_controllen` writable bytes (or be null).
unsafe fn put_inq(m: &mut msghdr, inq: Option<i32>) -> usize {
    let Some(inq) = inq else { return 0 };
    let data_len = core::mem::size_of::<c_int>() as u32;
    // SAFETY: CMSG_SPACE only computes.
    let space = unsafe { libc::CMSG_SPACE(data_len) } as usize;
    if m.msg_control.is_null() || m.msg_controllen < space {
        m.msg_flags |= libc::MSG_CTRUNC;
        return 0;
    }
    // SAFETY: the buffer holds at least one aligned header and its data (checked above).
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(m);
        if cmsg.is_null() {
            return 0;
        }
        (*cmsg).cmsg_level = libc::SOL_TCP;
        (*cmsg).cmsg_type = libc::TCP_CM_INQ;
        (*cmsg).cmsg_len = libc::CMSG_LEN(data_len) as usize;
        core::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<c_int>(), inq);
    }
    space
}

unsafe extern "C" fn write(ud: *mut c_void, fd: c_int, buf: *const c_void, count: usize) -> isize {
    call(ud, "write", |d| {
        // SAFETY: the caller's buffer (only read).
        let bufs = unsafe { one_buffer(buf.cast_mut(), count) }?;
        sent(d, fd, 0, do_write(d, fd, &as_const(&bufs), 0))
    })
}

unsafe extern "C" fn writev(ud: *mut c_void, fd: c_int, iov: *const iovec, count: c_int) -> isize {
    call(ud, "writev", |d| {
        // SAFETY: the caller's iovecs (only read).
        let bufs = unsafe { iovecs(iov, count) }?;
        sent(d, fd, 0, do_write(d, fd, &as_const(&bufs), 0))
    })
}

unsafe extern "C" fn send(
    ud: *mut c_void,
    fd: c_int,
    buf: *const c_void,
    len: usize,
    flags: c_int,
) -> isize {
    call(ud, "send", |d| {
        // SAFETY: the caller's buffer (only read).
        let bufs = unsafe { one_buffer(buf.cast_mut(), len) }?;
        sent(d, fd, flags, do_write(d, fd, &as_const(&bufs), flags))
    })
}

unsafe extern "C" fn sendto(
    ud: *mut c_void,
    fd: c_int,
    buf: *const c_void,
    len: usize,
    flags: c_int,
    addr: *const sockaddr,
    addrlen: socklen_t,
) -> isize {
    // Linux's TCP ignores the destination address (tcp_sendmsg never reads msg_name)
    // but for MSG_FASTOPEN, which connects to it.
    call(ud, "sendto", |d| {
        // SAFETY: the caller's buffer (only read).
        let bufs = unsafe { one_buffer(buf.cast_mut(), len) }?;
        if flags & MSG_FASTOPEN != 0 {
            // SAFETY: the caller's sockaddr.
            let remote = unsafe { fast_open_address(addr, addrlen) }?;
            let result = fast_open_write(d, fd, Some(remote), &as_const(&bufs), flags);
            return sent(d, fd, flags, result);
        }
        sent(d, fd, flags, do_write(d, fd, &as_const(&bufs), flags))
    })
}

unsafe extern "C" fn sendmsg(
    ud: *mut c_void,
    fd: c_int,
    msg: *const msghdr,
    flags: c_int,
) -> isize {
    call(ud, "sendmsg", |d| {
        if msg.is_null() {
            return Err(libc::EFAULT);
        }
        // SAFETY: the caller's msghdr and the iovecs it names (only read).
        let m = unsafe { &*msg };
        let bufs = unsafe { iovecs(m.msg_iov, c_int::try_from(m.msg_iovlen).unwrap_or(-1)) }?;
        if flags & MSG_FASTOPEN != 0 {
            // SAFETY: the caller's msghdr names its sockaddr.
            let remote = unsafe { fast_open_address(m.msg_name.cast(), m.msg_namelen) }?;
            let result = fast_open_write(d, fd, Some(remote), &as_const(&bufs), flags);
            return sent(d, fd, flags, result);
        }
        sent(d, fd, flags, do_write(d, fd, &as_const(&bufs), flags))
    })
}

unsafe extern "C" fn fcntl(ud: *mut c_void, fd: c_int, cmd: c_int, arg: c_long) -> c_int {
    call(ud, "fcntl", |d| {
        d.with(|s| {
            let socket = s.tcp_socket(fd)?;
            match cmd {
                libc::F_GETFL => Ok(usize::try_from(
                    libc::O_RDWR
                        | if socket.nonblocking {
                            libc::O_NONBLOCK
                        } else {
                            0
                        },
                )
                .unwrap_or(0)),
                libc::F_SETFL => {
                    socket.nonblocking = arg & c_long::from(libc::O_NONBLOCK) != 0;
                    Ok(0)
                }
                libc::F_GETFD | libc::F_SETFD => Ok(0),
                _ => Err(libc::EINVAL),
            }
        })
    })
}

unsafe extern "C" fn ioctl(
    ud: *mut c_void,
    fd: c_int,
    request: c_ulong,
    arg: *mut c_void,
) -> c_int {
    call(ud, "ioctl", |d| {
        if arg.is_null() {
            return Err(libc::EFAULT);
        }
        let out = arg.cast::<c_int>();
        let value = d.with(|s| match request {
            libc::FIONREAD => s.readable(fd).map(Some),
            libc::TIOCOUTQ => s.unacknowledged(fd).map(Some),
            libc::FIONBIO => {
                // SAFETY: FIONBIO's argument is an int.
                let on = unsafe { out.read_unaligned() } != 0;
                s.tcp_socket(fd)?.nonblocking = on;
                Ok(None)
            }
            _ => Err(libc::ENOTTY),
        })?;
        if let Some(value) = value {
            // SAFETY: these requests write an int.
            unsafe { out.write_unaligned(c_int::try_from(value).unwrap_or(c_int::MAX)) };
        }
        Ok(0)
    })
}

unsafe extern "C" fn close(ud: *mut c_void, fd: c_int) -> c_int {
    call(ud, "close", |d| {
        d.with(|s| s.close(fd)).and_then(non_negative)
    })
}

unsafe extern "C" fn shutdown(ud: *mut c_void, fd: c_int, how: c_int) -> c_int {
    call(ud, "shutdown", |d| {
        d.with(|s| s.shutdown(fd, how)).and_then(non_negative)
    })
}

unsafe extern "C" fn getsockopt(
    ud: *mut c_void,
    fd: c_int,
    level: c_int,
    name: c_int,
    value: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    call(ud, "getsockopt", |d| {
        if value.is_null() || len.is_null() {
            return Err(libc::EFAULT);
        }
        let bytes = d.with(|s| s.get_option(fd, level, name))?;
        // SAFETY: the caller gives *len writable bytes at value.
        unsafe {
            let n = (*len as usize).min(bytes.len());
            core::ptr::copy_nonoverlapping(bytes.as_ptr(), value.cast::<u8>(), n);
            *len = n as socklen_t;
        }
        Ok(0)
    })
}

unsafe extern "C" fn setsockopt(
    ud: *mut c_void,
    fd: c_int,
    level: c_int,
    name: c_int,
    value: *const c_void,
    len: socklen_t,
) -> c_int {
    call(ud, "setsockopt", |d| {
        if value.is_null() && len > 0 {
            return Err(libc::EFAULT);
        }
        let bytes: &[u8] = if len == 0 {
            &[]
        } else {
            // SAFETY: the caller gives len bytes at value.
            unsafe { core::slice::from_raw_parts(value.cast::<u8>(), len as usize) }
        };
        d.with(|s| s.set_option(fd, level, name, bytes))
            .and_then(non_negative)
    })
}

/// A poll or epoll timeout in milliseconds: negative waits for ever.
fn timeout_of(ms: c_int) -> Option<Duration> {
    u64::try_from(ms).ok().map(Duration::from_millis)
}

unsafe extern "C" fn poll(
    ud: *mut c_void,
    fds: *mut pollfd,
    nfds: c_ulong,
    timeout: c_int,
) -> c_int {
    call(ud, "poll", |d| {
        let count = usize::try_from(nfds).map_err(|_| libc::EINVAL)?;
        if count > 0 && fds.is_null() {
            return Err(libc::EFAULT);
        }
        let fds = if count == 0 {
            &mut []
        } else {
            // SAFETY: the caller gives nfds pollfds.
            unsafe { core::slice::from_raw_parts_mut(fds, count) }
        };
        let mut table: Vec<(i32, u32, u32)> = fds
            .iter()
            .map(|p| (p.fd, p.events as u16 as u32, 0))
            .collect();
        let result = d.blocking(-1, timeout_of(timeout), |s| match s.poll_once(&mut table) {
            0 => Err(libc::EAGAIN),
            n => Ok(n),
        });
        for (p, (_, _, revents)) in fds.iter_mut().zip(&table) {
            p.revents = *revents as u16 as i16;
        }
        match result {
            Err(TIMED_OUT) => Ok(0),
            other => other,
        }
    })
}

unsafe extern "C" fn netdev_send(ud: *mut c_void, buf: *const c_void, count: usize) -> c_int {
    call(ud, "netdev_send", |d| {
        if buf.is_null() {
            return Err(libc::EFAULT);
        }
        // SAFETY: the caller gives count bytes.
        let packet = unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), count) };
        d.with(|s| s.packet_in(packet));
        Ok(0)
    })
}

unsafe extern "C" fn netdev_receive(
    ud: *mut c_void,
    buf: *mut c_void,
    count: *mut usize,
    time_usecs: *mut i64,
) -> c_int {
    call(ud, "netdev_receive", |d| {
        if buf.is_null() || count.is_null() || time_usecs.is_null() {
            return Err(libc::EFAULT);
        }
        let Some(sent) = d.receive() else {
            eprintln!(
                "imp-packetdrill: the stack has nothing to send and no timer pending: no \
                 packet will come (the empty packet that follows stops packetdrill)"
            );
            // SAFETY: the caller's count.
            unsafe { *count = 0 };
            return Ok(0);
        };
        // SAFETY: the caller gives *count bytes at buf, and the two out-parameters.
        unsafe {
            let n = (*count).min(sent.packet.len());
            core::ptr::copy_nonoverlapping(sent.packet.as_ptr(), buf.cast::<u8>(), n);
            *count = n;
            *time_usecs = unix_micros(sent.at.as_nanos() / 1000);
        }
        Ok(0)
    })
}

/// Virtual microseconds on the Unix clock packetdrill reads.
fn unix_micros(micros: u64) -> i64 {
    i64::try_from(EPOCH_SECS * 1_000_000 + micros).unwrap_or(i64::MAX)
}

unsafe extern "C" fn usleep(ud: *mut c_void, usec: c_uint) -> c_int {
    call(ud, "usleep", |d| {
        d.with(|s| s.advance_by(Duration::from_micros(u64::from(usec))));
        Ok(0)
    })
}

unsafe extern "C" fn gettimeofday(ud: *mut c_void, tv: *mut timeval, _tz: *mut timezone) -> c_int {
    call(ud, "gettimeofday", |d| {
        if tv.is_null() {
            return Err(libc::EFAULT);
        }
        // Each reading moves the clock a microsecond: packetdrill spins on this clock
        // for the last microseconds before an event.
        let micros = unix_micros(d.with(|s| {
            let now = s.now_micros();
            s.advance_by(Duration::from_micros(1));
            now
        }));
        // SAFETY: the caller's timeval.
        unsafe {
            (*tv).tv_sec = micros / 1_000_000;
            (*tv).tv_usec = micros % 1_000_000;
        }
        Ok(0)
    })
}

unsafe extern "C" fn epoll_create(ud: *mut c_void, size: c_int) -> c_int {
    call(ud, "epoll_create", |d| {
        if size <= 0 {
            return Err(libc::EINVAL);
        }
        non_negative(d.with(Shim::epoll_create))
    })
}

unsafe extern "C" fn epoll_ctl(
    ud: *mut c_void,
    epfd: c_int,
    op: c_int,
    fd: c_int,
    event: *mut epoll_event,
) -> c_int {
    call(ud, "epoll_ctl", |d| {
        let (events, data) = if event.is_null() {
            if op != libc::EPOLL_CTL_DEL {
                return Err(libc::EFAULT);
            }
            (0, 0)
        } else {
            // SAFETY: the caller's epoll_event.
            let e = unsafe { event.read_unaligned() };
            (e.events, e.u64)
        };
        d.with(|s| s.epoll_ctl(epfd, op, fd, events, data))
            .and_then(non_negative)
    })
}

unsafe extern "C" fn epoll_wait(
    ud: *mut c_void,
    epfd: c_int,
    events: *mut epoll_event,
    max: c_int,
    timeout: c_int,
) -> c_int {
    call(ud, "epoll_wait", |d| {
        let max = usize::try_from(max)
            .ok()
            .filter(|&m| m > 0)
            .ok_or(libc::EINVAL)?;
        if events.is_null() {
            return Err(libc::EFAULT);
        }
        let ready = d.blocking(-1, timeout_of(timeout), |s| match s.epoll_once(epfd, max) {
            Ok(list) if list.is_empty() => Err(libc::EAGAIN),
            other => other,
        });
        let ready = match ready {
            Err(TIMED_OUT) => return Ok(0),
            other => other?,
        };
        for (i, (bits, data)) in ready.iter().enumerate() {
            let e = epoll_event {
                events: *bits,
                u64: *data,
            };
            // SAFETY: the caller gives `max` events; ready.len() <= max.
            unsafe { events.add(i).write_unaligned(e) };
        }
        Ok(ready.len())
    })
}

unsafe extern "C" fn pipe(ud: *mut c_void, _fds: *mut c_int) -> c_int {
    // imp has no pipes: packetdrill's pipe tests need a kernel.
    call(ud, "pipe", |_| Err(libc::ENOSYS))
}

unsafe extern "C" fn splice(
    ud: *mut c_void,
    _fd_in: c_int,
    _off_in: *mut i64,
    _fd_out: c_int,
    _off_out: *mut i64,
    _len: usize,
    _flags: c_uint,
) -> isize {
    call(ud, "splice", |_| Err(libc::ENOSYS))
}
