//! Link options of the `imp` binary that keep its resident memory small.
//!
//! - `imp.order` (lld's `--symbol-ordering-file`): the functions an `imp proxy` runs,
//!   from start-up to its first connections, laid out together at the start of
//!   `.text`. The kernel maps code in 64 KiB runs around each page touched, so code
//!   spread over the binary costs a process far more than what it runs.
//!   `scripts/imp-order` regenerates the list.
//! - `-z pack-relative-relocs`: the position-independent binary's relative relocations
//!   as a bitmap (`DT_RELR`, glibc 2.36) instead of 24 bytes each, which the dynamic
//!   loader reads, every page of them, at every start.
//!
//! Both only where the linker is Rust's default for the target, lld (x86_64 Linux
//! with glibc, since Rust 1.90), and no linker of one's own is configured:
//! GNU ld takes neither option as is.

use std::env;

fn main() {
    println!("cargo:rerun-if-changed=imp.order");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER");
    if !default_lld() {
        return;
    }
    let dir = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    for arg in [
        "-Wl,-z,pack-relative-relocs".to_string(),
        format!("-Wl,--symbol-ordering-file={dir}/imp.order"),
        "-Wl,--no-warn-symbol-ordering".to_string(),
    ] {
        println!("cargo:rustc-link-arg-bin=imp={arg}");
    }
    // For tests/binary_layout.rs: the options reached the linker.
    println!("cargo:rustc-env=IMP_LINK_LAYOUT=1");
}

/// Whether rustc links this build with its own lld: the target is x86_64 Linux on
/// glibc and neither a linker nor linker flags of one's own are set.
fn default_lld() -> bool {
    let target = env::var("TARGET").unwrap_or_default();
    if target != "x86_64-unknown-linux-gnu" {
        return false;
    }
    let own_linker = env::var_os("RUSTC_LINKER").is_some()
        || env::var_os("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER").is_some();
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    !own_linker && !flags.contains("link")
}
