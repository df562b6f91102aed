//! What a test does when it cannot run here (not root, a tool missing): it skips, saying
//! why, unless `IMP_REQUIRE_ROOT` is set. CI sets it (and runs as root with every tool
//! installed, see `.ci/run`), so there a skip is a failure and a green run means every
//! test ran. `IMP_REQUIRE_TSHARK` alone requires tshark, as before, and
//! `IMP_REQUIRE_VALGRIND` valgrind (`imp bench --breakdown`).
//!
//! Dependency-free apart from libc, so every test crate can include it with `#[path]`.
#![allow(dead_code)]

use std::process::Command;

/// Whether a test that cannot run must fail instead of skipping.
pub fn required() -> bool {
    std::env::var_os("IMP_REQUIRE_ROOT").is_some()
}

/// Whether tshark's checks must run (`IMP_REQUIRE_TSHARK` or `IMP_REQUIRE_ROOT`).
pub fn tshark_required() -> bool {
    required() || std::env::var_os("IMP_REQUIRE_TSHARK").is_some()
}

/// Whether valgrind must be there (`IMP_REQUIRE_VALGRIND`).
pub fn valgrind_required() -> bool {
    std::env::var_os("IMP_REQUIRE_VALGRIND").is_some()
}

/// The test cannot run because of `why`: panics under `IMP_REQUIRE_ROOT`, otherwise
/// prints that it skips (the caller then returns).
#[track_caller]
pub fn skip(why: &str) {
    assert!(
        !required(),
        "IMP_REQUIRE_ROOT is set, so this test may not skip: {why}"
    );
    eprintln!("skipping: {why}");
}

/// True if the tests can create namespaces and TAPs (root, `/dev/net/tun`, `ip`); else
/// [`skip`]s.
#[track_caller]
pub fn can_run() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip("these tests need root (CAP_NET_ADMIN) for namespaces and TAPs");
        return false;
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        skip("/dev/net/tun is missing");
        return false;
    }
    if Command::new("ip").arg("-V").output().is_err() {
        skip("the `ip` tool (iproute2) is missing");
        return false;
    }
    true
}

/// True if `program` can be run; else [`skip`]s.
#[track_caller]
pub fn have(program: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        skip(&format!("`{program}` is not installed"));
    }
    found
}
