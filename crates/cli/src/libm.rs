//! `pow`, `log` and `log10`, the only functions of the C math library `imp` calls (the
//! link model of `--impair`, `imp sim`'s tables and plots, indicatif's rates), taken
//! from glibc's own `libm.so.6`, loaded the first time one of them runs.
//!
//! Linked as usual, `libm.so.6` is loaded and relocated at every start: its IFUNC
//! resolvers run and the kernel maps 64 KiB of its code around each, about 0.3 MB
//! resident in every `imp` process, an idle `imp proxy` too, which never calls them.
//! Defined here, the linker finds them in the binary and, as it links with
//! `--as-needed`, leaves libm out (`tests/binary_layout.rs` checks). The results
//! are glibc's, bit for bit: the same functions, each found once by `dlsym` and then
//! called through its pointer.

use std::ffi::{CStr, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};

/// The library, as the linker would have named it (its soname).
const LIBM: &CStr = c"libm.so.6";

/// The function `name` of libm, found once and kept in `slot`. Aborts, saying why,
/// if libm or the function cannot be found (glibc ships both).
fn resolve(slot: &AtomicPtr<c_void>, name: &CStr) -> *mut c_void {
    let known = slot.load(Ordering::Acquire);
    if !known.is_null() {
        return known;
    }
    // SAFETY: both strings are NUL-terminated; dlopen and dlsym are thread-safe, and
    // a second dlopen of a loaded library only counts a reference.
    let found = unsafe {
        let lib = libc::dlopen(LIBM.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        if lib.is_null() {
            std::ptr::null_mut()
        } else {
            libc::dlsym(lib, name.as_ptr())
        }
    };
    if found.is_null() {
        eprintln!(
            "imp: cannot load {} from {}",
            name.to_string_lossy(),
            LIBM.to_string_lossy()
        );
        std::process::abort();
    }
    slot.store(found, Ordering::Release);
    found
}

/// A libm function of one `f64` argument.
type Unary = unsafe extern "C" fn(f64) -> f64;
/// A libm function of two `f64` arguments.
type Binary = unsafe extern "C" fn(f64, f64) -> f64;

static POW: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static LOG: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static LOG10: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// C's `pow`: glibc's.
#[unsafe(no_mangle)]
pub extern "C" fn pow(x: f64, y: f64) -> f64 {
    // SAFETY: libm's `pow` has this signature.
    unsafe {
        let f: Binary = std::mem::transmute(resolve(&POW, c"pow"));
        f(x, y)
    }
}

/// C's `log`: glibc's.
#[unsafe(no_mangle)]
pub extern "C" fn log(x: f64) -> f64 {
    // SAFETY: libm's `log` has this signature.
    unsafe {
        let f: Unary = std::mem::transmute(resolve(&LOG, c"log"));
        f(x)
    }
}

/// C's `log10`: glibc's.
#[unsafe(no_mangle)]
pub extern "C" fn log10(x: f64) -> f64 {
    // SAFETY: libm's `log10` has this signature.
    unsafe {
        let f: Unary = std::mem::transmute(resolve(&LOG10, c"log10"));
        f(x)
    }
}

#[cfg(test)]
mod tests {
    /// The values come through (from libm, loaded on the first call), and the
    /// standard library's float functions reach them.
    #[test]
    fn pow_log_log10_are_libms() {
        assert_eq!(super::pow(2.0, 10.0), 1024.0);
        assert_eq!(super::pow(9.0, 0.5), 3.0);
        assert_eq!(super::log(1.0), 0.0);
        assert_eq!(super::log(std::f64::consts::E), 1.0);
        assert_eq!(super::log10(1000.0), 3.0);
        assert!(super::log(-1.0).is_nan());
        assert_eq!(super::log10(0.0), f64::NEG_INFINITY);
        let x = std::hint::black_box(1.7_f64);
        assert_eq!(x.powf(std::hint::black_box(2.3)), super::pow(1.7, 2.3));
        assert_eq!(x.ln(), super::log(1.7));
        assert_eq!(x.log10(), super::log10(1.7));
    }
}
