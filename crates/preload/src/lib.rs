//! `libimpnet_preload.so`: loaded with `LD_PRELOAD` into a dynamically linked Linux
//! program, it gives the program imp's TCP over a TAP or TUN instead of the kernel's.
//!
//! ```text
//! LD_PRELOAD=target/release/libimpnet_preload.so IMP_TAP=imp0 IMP_ADDR=10.0.0.2/24 \
//!     curl http://10.0.0.1:8000/file
//! ```
//!
//! The settings are environment variables (`IMP_TAP` or `IMP_TUN`, `IMP_ADDR`,
//! `IMP_GW`, `IMP_MTU`, `IMP_MAC`, `IMP_KERNEL_UDP`: see `config.rs`); imp's runtime
//! starts when the program makes its first inet socket. An imp socket is a real descriptor: an
//! `eventfd` of its own, which the runtime signals when the socket may have become
//! readable or writable, so `poll` and `select` wait on imp's sockets and the
//! kernel's in one system call. The calls that take a descriptor look it up in a
//! table; one that is not imp's goes to the C library unchanged (`dlsym(RTLD_NEXT)`).
//!
//! A call the library does not cover on an imp socket fails with `EOPNOTSUPP` and one
//! line on stderr naming it; it never reaches the kernel with an imp descriptor.
//! `poll`, `select` and epoll (level- and edge-triggered) wait on imp sockets and
//! kernel descriptors together. UDP sockets are imp's too (the kernel's with
//! `IMP_KERNEL_UDP=1`). With `IMP_DNS` set, `getaddrinfo` asks imp's resolver
//! (`resolve.rs`); without, the C library's, over imp's UDP. Not covered yet: `dup`,
//! and `fork`: a
//! child's imp sockets fail (the runtime's thread is not copied into it), said on
//! stderr. If imp cannot start (no such TAP, no permission, the TAP busy) the first
//! socket says why on stderr and fails with `ENETDOWN`.
//!
//! No panic crosses into C: every entry point runs under `catch_unwind` and turns a
//! panic into `EIO` and a line on stderr.
#![allow(unsafe_code)]

mod config;
mod datagram;
mod epoll;
mod errno;
mod ffi;
mod poll;
mod real;
mod resolve;
mod socket;
mod sockopt;
mod table;
mod tcpinfo;

use std::io::{self, Write};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use impnet::Runtime;
use impnet::core::StackConfig;

/// One line on stderr, prefixed so a user sees where it came from; written with one
/// system call so lines from several threads do not interleave.
pub(crate) fn say(text: &str) {
    let line = format!("libimpnet_preload: {text}\n");
    let _ = io::stderr().write_all(line.as_bytes());
}

/// The process the runtime was started in: after `fork` the child's imp sockets are
/// refused (the runtime's thread is not in the child).
static OWNER: AtomicU32 = AtomicU32::new(0);

/// Set in a child of `fork` (by a `pthread_atfork` handler), so the check on every
/// call costs a load, not a `getpid`.
static FORKED: AtomicBool = AtomicBool::new(false);

/// Whether this is a child of `fork` of the process that started imp.
pub(crate) fn forked() -> bool {
    FORKED.load(Ordering::Relaxed)
}

/// The `pthread_atfork` child handler.
extern "C" fn in_child() {
    FORKED.store(true, Ordering::Relaxed);
}

/// The runtime, started at the first socket: `None` when no device is configured (the
/// library passes everything through), an error text when it could not start.
fn runtime() -> &'static Result<Option<Runtime>, String> {
    static RUNTIME: OnceLock<Result<Option<Runtime>, String>> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        let started = start();
        match &started {
            Ok(Some(_)) => OWNER.store(std::process::id(), Ordering::Relaxed),
            Ok(None) => say("neither IMP_TAP nor IMP_TUN is set: sockets are the kernel's"),
            Err(e) => say(&format!("imp could not start: {e}")),
        }
        started
    })
}

/// Open the device and start imp's runtime on it.
fn start() -> Result<Option<Runtime>, String> {
    let Some(config) = config::from_env()? else {
        return Ok(None);
    };
    let rt = Runtime::new(StackConfig::default()).map_err(|e| format!("runtime: {e}"))?;
    let iface = match &config.device {
        config::Device::Tap(name) => {
            let mut tap_config = impnet::phy::TapConfig::new(name.clone());
            if let Some(mtu) = config.mtu {
                tap_config = tap_config.mtu(mtu);
            }
            let tap =
                impnet::phy::Tap::open_with(&tap_config).map_err(|e| format!("TAP {name}: {e}"))?;
            rt.add_tap(tap, config.mac)
        }
        config::Device::Tun(name) => {
            let tun = impnet::phy::Tun::open(name).map_err(|e| format!("TUN {name}: {e}"))?;
            rt.add_tun(tun)
        }
    };
    rt.add_address(iface, config.address);
    if let Some(gateway) = config.gateway {
        rt.add_default_route(gateway, iface);
    }
    rt.set_dns_servers(&config.dns);
    // SAFETY: `linger_at_exit` and `in_child` are `extern "C" fn()`s that never unwind.
    unsafe {
        libc::atexit(linger_at_exit);
        libc::pthread_atfork(None, None, Some(in_child));
    }
    Ok(Some(rt))
}

/// The running runtime for a new imp socket: `Ok(None)` to leave the socket to the
/// kernel (no device configured).
pub(crate) fn imp() -> io::Result<Option<&'static Runtime>> {
    match runtime() {
        Ok(Some(rt)) => {
            check_not_forked("socket")?;
            Ok(Some(rt))
        }
        Ok(None) => Ok(None),
        // Said on stderr when it happened; the program sees the network as down.
        Err(_) => Err(io::Error::from_raw_os_error(libc::ENETDOWN)),
    }
}

/// `EOPNOTSUPP` (and a line on stderr) in a child of `fork`: imp's runtime thread
/// stayed in the parent.
pub(crate) fn check_not_forked(call: &str) -> io::Result<()> {
    if FORKED.load(Ordering::Relaxed) {
        let owner = OWNER.load(Ordering::Relaxed);
        say(&format!(
            "{call}: imp sockets do not survive fork (this is a child of {owner})"
        ));
        return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP));
    }
    Ok(())
}

/// At exit, give what closed sockets still hold in their send buffers up to two seconds
/// to reach the peer (the runtime's thread dies with the process): a program that
/// writes a reply, closes and exits expects its reply delivered, as the kernel does.
extern "C" fn linger_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        let Ok(Some(rt)) = runtime() else {
            return;
        };
        if FORKED.load(Ordering::Relaxed) {
            return;
        }
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while std::time::Instant::now() < give_up {
            let queued: usize = rt.with_stack(|stack, _| {
                let handles: Vec<_> = stack.tcp_handles().map(|(h, _)| h).collect();
                handles.iter().map(|h| stack.tcp_send_queued(*h)).sum()
            });
            if queued == 0 {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    });
}
