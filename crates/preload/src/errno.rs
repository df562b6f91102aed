//! errno both ways: an `io::Error` from a code, the code of an `io::Error`, and the
//! guard every exported call runs its body in. A leaf of the crate.

use std::io;

use libc::c_int;

/// `errno` as an `io::Error`.
pub(crate) fn errno(code: c_int) -> io::Error {
    io::Error::from_raw_os_error(code)
}

/// `EOPNOTSUPP` and one line on stderr naming what is not covered.
pub(crate) fn unsupported(what: &str) -> io::Error {
    crate::say(&format!(
        "{what}: not supported on an imp socket (EOPNOTSUPP)"
    ));
    errno(libc::EOPNOTSUPP)
}

/// The `errno` for an error: its own if it has one, else by kind.
pub(crate) fn code_of(e: &io::Error) -> c_int {
    if let Some(code) = e.raw_os_error() {
        return code;
    }
    use io::ErrorKind as K;
    match e.kind() {
        K::WouldBlock => libc::EAGAIN,
        K::ConnectionRefused => libc::ECONNREFUSED,
        K::ConnectionReset => libc::ECONNRESET,
        K::ConnectionAborted => libc::ECONNABORTED,
        K::BrokenPipe => libc::EPIPE,
        K::TimedOut => libc::ETIMEDOUT,
        K::NetworkUnreachable => libc::ENETUNREACH,
        K::HostUnreachable => libc::EHOSTUNREACH,
        K::NotConnected => libc::ENOTCONN,
        K::AddrNotAvailable => libc::EADDRNOTAVAIL,
        K::AddrInUse => libc::EADDRINUSE,
        K::InvalidInput => libc::EINVAL,
        K::Unsupported => libc::EOPNOTSUPP,
        K::Interrupted => libc::EINTR,
        _ => libc::EIO,
    }
}

/// Run `f`, setting errno and returning -1 on error or panic.
pub(crate) fn guarded(call: &str, f: impl FnOnce() -> io::Result<c_int>) -> c_int {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(n)) => n,
        Ok(Err(e)) => {
            // SAFETY: this thread's errno.
            unsafe { *libc::__errno_location() = code_of(&e) };
            -1
        }
        Err(_) => {
            crate::say(&format!("{call}: panicked (EIO)"));
            // SAFETY: as above.
            unsafe { *libc::__errno_location() = libc::EIO };
            -1
        }
    }
}
