//! The C library's own functions, found with `dlsym(RTLD_NEXT, name)` the first time
//! each is called: a call on a descriptor that is not imp's goes there unchanged.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The next definition of `name` (a NUL-terminated symbol name) after this library's,
/// as an address; the process aborts with one line on stderr if there is none (no C
/// library function to fall through to: nothing sensible can follow).
pub(crate) fn lookup(cache: &AtomicUsize, name: &'static [u8]) -> usize {
    let cached = cache.load(Ordering::Relaxed);
    if cached != 0 {
        return cached;
    }
    // SAFETY: `name` is NUL-terminated (every caller passes a literal ending in \0);
    // RTLD_NEXT is a valid pseudo-handle in a shared object.
    let found = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) } as usize;
    if found == 0 {
        let text = String::from_utf8_lossy(&name[..name.len() - 1]).into_owned();
        crate::say(&format!(
            "no C library function {text} to fall through to; aborting"
        ));
        std::process::abort();
    }
    cache.store(found, Ordering::Relaxed);
    found
}

/// `real!(name: fn(args) -> ret)`: the C library's `name`, typed.
macro_rules! real {
    ($name:ident : fn($($arg:ty),*) -> $ret:ty) => {{
        static CACHE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let address = $crate::real::lookup(&CACHE, concat!(stringify!($name), "\0").as_bytes());
        // SAFETY: `address` is the C library's definition of this very symbol, whose C
        // prototype the caller spells out.
        #[allow(unused_unsafe)]
        let function =
            unsafe { std::mem::transmute::<usize, unsafe extern "C" fn($($arg),*) -> $ret>(address) };
        function
    }};
}

pub(crate) use real;
