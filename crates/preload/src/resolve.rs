//! `getaddrinfo` through imp's DNS resolver when `IMP_DNS` names servers: the query
//! and its answer travel over imp's UDP to those servers (`impnet::lookup_ips`), not through
//! the C library's resolver. Address literals, `localhost`, names in `/etc/hosts`, and
//! every call when `IMP_DNS` is not set go to the C library as before. A list this
//! module made is freed by its own `freeaddrinfo`; any other goes to the C library's.

use std::collections::HashSet;
use std::ffi::CStr;
use std::net::{IpAddr, SocketAddr};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

use libc::{addrinfo, c_char, c_int};

use crate::real::real;

/// The lists this module made (their first entry's address).
static OURS: Mutex<Option<HashSet<usize>>> = Mutex::new(None);

fn ours<T>(f: impl FnOnce(&mut HashSet<usize>) -> T) -> T {
    let mut guard = OURS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    f(guard.get_or_insert_with(HashSet::new))
}

/// What to answer for a name: `None` to leave the call to the C library.
enum Answer {
    Addresses(Vec<IpAddr>),
    Error(c_int),
}

/// Whether `name` is one imp resolves: `IMP_DNS` is set, and the name is neither an
/// address literal, `localhost`, nor in `/etc/hosts`.
fn imp_resolves(name: &str) -> bool {
    if std::env::var_os("IMP_DNS").is_none_or(|v| v.is_empty()) {
        return false;
    }
    if name.parse::<IpAddr>().is_ok() || name.eq_ignore_ascii_case("localhost") {
        return false;
    }
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    !hosts.lines().any(|line| {
        let line = line.split('#').next().unwrap_or("");
        line.split_whitespace()
            .skip(1)
            .any(|alias| alias.eq_ignore_ascii_case(name.trim_end_matches('.')))
    })
}

/// Ask imp's resolver.
fn resolve(name: &str) -> Option<Answer> {
    let rt = match crate::imp() {
        Ok(Some(rt)) => rt,
        Ok(None) => return None,
        Err(_) => return Some(Answer::Error(libc::EAI_AGAIN)),
    };
    Some(match impnet::lookup_ips(rt, name) {
        Ok(ips) => Answer::Addresses(ips),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Answer::Error(libc::EAI_NONAME),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => Answer::Error(libc::EAI_NONAME),
        Err(_) => Answer::Error(libc::EAI_AGAIN),
    })
}

/// The port `service` names: a number, or a name from the services database.
///
/// # Safety
/// `service` is null or a C string.
unsafe fn port_of(service: *const c_char) -> Result<u16, c_int> {
    if service.is_null() {
        return Ok(0);
    }
    // SAFETY: a C string, as getaddrinfo(3) takes it.
    let text = unsafe { CStr::from_ptr(service) }.to_string_lossy();
    if let Ok(port) = text.parse::<u16>() {
        return Ok(port);
    }
    // SAFETY: a C string; the result is static storage read at once.
    let entry = unsafe { libc::getservbyname(service, std::ptr::null()) };
    if entry.is_null() {
        return Err(libc::EAI_SERVICE);
    }
    // SAFETY: a live servent; s_port is in network order in an int.
    Ok(u16::from_be(unsafe { (*entry).s_port } as u16))
}

/// The (socket type, protocol) pairs an answer lists: the asked one, or glibc's three.
fn kinds(hints: Option<&addrinfo>) -> Vec<(c_int, c_int)> {
    let protocol = |ty| match ty {
        libc::SOCK_STREAM => libc::IPPROTO_TCP,
        libc::SOCK_DGRAM => libc::IPPROTO_UDP,
        _ => 0,
    };
    match hints.map_or(0, |h| h.ai_socktype) {
        0 => [libc::SOCK_STREAM, libc::SOCK_DGRAM, libc::SOCK_RAW]
            .into_iter()
            .map(|ty| (ty, hints.map_or(0, |h| h.ai_protocol).max(protocol(ty))))
            .collect(),
        ty => vec![(ty, hints.map_or(0, |h| h.ai_protocol).max(protocol(ty)))],
    }
}

/// A list of `addrinfo`s, one allocation each (the entry, then its address), in the
/// C library's heap; null when there are none.
fn build(ips: &[IpAddr], port: u16, hints: Option<&addrinfo>) -> *mut addrinfo {
    let family = hints.map_or(libc::AF_UNSPEC, |h| h.ai_family);
    let mut head: *mut addrinfo = std::ptr::null_mut();
    let mut tail: *mut *mut addrinfo = &mut head;
    for &ip in ips {
        let (domain, len) = match ip {
            IpAddr::V4(_) if family == libc::AF_UNSPEC || family == libc::AF_INET => {
                (libc::AF_INET, size_of::<libc::sockaddr_in>())
            }
            IpAddr::V6(_) if family == libc::AF_UNSPEC || family == libc::AF_INET6 => {
                (libc::AF_INET6, size_of::<libc::sockaddr_in6>())
            }
            _ => continue,
        };
        for (ty, protocol) in kinds(hints) {
            let size = size_of::<addrinfo>() + size_of::<libc::sockaddr_storage>();
            // SAFETY: a zeroed block, checked for null; freed by `freeaddrinfo`.
            let block = unsafe { libc::calloc(1, size) }.cast::<addrinfo>();
            if block.is_null() {
                free_list(head);
                return std::ptr::null_mut();
            }
            // SAFETY: the block holds an addrinfo and then a sockaddr_storage; the
            // storage's offset is a multiple of its alignment (both are 8).
            unsafe {
                let addr = block.add(1).cast::<libc::sockaddr>();
                let mut written = len as libc::socklen_t;
                crate::ffi::write_addr(SocketAddr::new(ip, port), domain, addr, &mut written);
                (*block).ai_family = domain;
                (*block).ai_socktype = ty;
                (*block).ai_protocol = protocol;
                (*block).ai_addrlen = written;
                (*block).ai_addr = addr;
                *tail = block;
                tail = &mut (*block).ai_next;
            }
        }
    }
    head
}

/// Free a list `build` made.
fn free_list(mut entry: *mut addrinfo) {
    while !entry.is_null() {
        // SAFETY: an entry of a list `build` made; each is one block, its canonical
        // name (if any) a `strdup`.
        unsafe {
            let next = (*entry).ai_next;
            libc::free((*entry).ai_canonname.cast());
            libc::free(entry.cast());
            entry = next;
        }
    }
}

/// # Safety
/// A C `getaddrinfo(3)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const addrinfo,
    res: *mut *mut addrinfo,
) -> c_int {
    let real = || unsafe {
        real!(getaddrinfo: fn(*const c_char, *const c_char, *const addrinfo, *mut *mut addrinfo) -> c_int)(
            node, service, hints, res,
        )
    };
    if node.is_null() || res.is_null() {
        return real();
    }
    // SAFETY: a C string, as getaddrinfo(3) takes it.
    let name = unsafe { CStr::from_ptr(node) }
        .to_string_lossy()
        .into_owned();
    if !imp_resolves(&name) {
        return real();
    }
    // SAFETY: null or the caller's hints.
    let hints = unsafe { hints.as_ref() };
    if hints.is_some_and(|h| h.ai_flags & libc::AI_NUMERICHOST != 0) {
        return libc::EAI_NONAME;
    }
    let answered = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: null or a C string.
        let port = match unsafe { port_of(service) } {
            Ok(port) => port,
            Err(code) => return code,
        };
        let ips = match resolve(&name) {
            None => return i32::MIN,
            Some(Answer::Error(code)) => return code,
            Some(Answer::Addresses(ips)) => ips,
        };
        let list = build(&ips, port, hints);
        if list.is_null() {
            return libc::EAI_NONAME;
        }
        if hints.is_some_and(|h| h.ai_flags & libc::AI_CANONNAME != 0) {
            // SAFETY: the first entry of our list; `node` is a C string.
            unsafe { (*list).ai_canonname = libc::strdup(node) };
        }
        ours(|set| set.insert(list as usize));
        // SAFETY: the caller's result pointer, checked non-null.
        unsafe { *res = list };
        0
    }));
    match answered {
        Ok(i32::MIN) => real(),
        Ok(code) => code,
        Err(_) => {
            crate::say("getaddrinfo: a panic in imp's resolver (EAI_FAIL)");
            libc::EAI_FAIL
        }
    }
}

/// # Safety
/// A C `freeaddrinfo(3)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn freeaddrinfo(res: *mut addrinfo) {
    if !res.is_null() && ours(|set| set.remove(&(res as usize))) {
        free_list(res);
        return;
    }
    // SAFETY: a list the C library made, as freeaddrinfo(3) takes it.
    unsafe { real!(freeaddrinfo: fn(*mut addrinfo) -> ())(res) }
}
