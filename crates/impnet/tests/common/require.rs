//! What a test does when it cannot run here (not root, a tool missing): it skips, saying
//! why where a user sees it, unless `IMP_REQUIRE_ROOT` is set. CI sets it (and runs as
//! root with every tool installed, see `scripts/test`), so there a skip is a failure and
//! a green run means every test ran. `IMP_REQUIRE_TSHARK` alone requires tshark, as
//! before, and `IMP_REQUIRE_VALGRIND` valgrind (`imp-bench --breakdown`).
//!
//! A skip is written straight to the process's standard error, which the test harness
//! does not capture (it captures only `print!` and `eprint!`), so `cargo test` shows it
//! beside the test's `ok`. With `IMP_SKIP_LOG` set to a file, each skip also appends one
//! line to it, `reason<TAB>binary<TAB>test<TAB>why`: `scripts/test` counts, by reason,
//! the tests that skipped and passed, in its last line.
//!
//! Dependency-free apart from libc, so every test crate can include it with `#[path]`.
#![allow(dead_code)]

use std::io::Write;
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
/// reports the skip (the caller then returns). `reason` is the short key the run's last
/// line counts skips by ("not root", "tshark missing").
#[track_caller]
pub fn skip_for(reason: &str, why: &str) {
    assert!(
        !required(),
        "IMP_REQUIRE_ROOT is set, so this test may not skip: {why}"
    );
    report(reason, why);
}

/// [`skip_for`] with the reason taken from `why` itself.
#[track_caller]
pub fn skip(why: &str) {
    skip_for(why, why);
}

/// Reports a skip (standard error, uncaptured, and `IMP_SKIP_LOG`) without the
/// `IMP_REQUIRE_ROOT` check: for a check that its own variable governs
/// (`IMP_REQUIRE_TSHARK`, `IMP_REQUIRE_VALGRIND`), which the caller has made.
pub fn report(reason: &str, why: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("?");
    // The test binary, as cargo names it (`tap_v6-0123abcd`: the stem before the hash),
    // so tests of one name in two binaries are two skips.
    let exe = std::env::current_exe().ok();
    let stem = exe
        .as_deref()
        .and_then(|p| p.file_stem())
        .and_then(|s| s.to_str())
        .unwrap_or("?");
    let binary = stem.rsplit_once('-').map_or(stem, |(name, _)| name);
    // One line each: a reason or why of several lines (a command's output) is joined.
    let one_line = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let (reason, why) = (one_line(reason), one_line(why));
    // One write each, so lines from tests running at once do not interleave.
    let line = format!("skipped: {test}: {why}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Some(path) = std::env::var_os("IMP_SKIP_LOG") {
        let entry = format!("{reason}\t{binary}\t{test}\t{why}\n");
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = file.write_all(entry.as_bytes());
        }
    }
}

/// True if the tests can create namespaces and TAPs (root, `/dev/net/tun`, `ip`); else
/// [`skip`]s.
#[track_caller]
pub fn can_run() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip_for(
            "not root",
            "these tests need root (CAP_NET_ADMIN) for namespaces and TAPs",
        );
        return false;
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        skip_for("no /dev/net/tun", "/dev/net/tun is missing");
        return false;
    }
    if !found("ip") {
        skip_for("ip missing", "the `ip` tool (iproute2) is missing");
        return false;
    }
    true
}

/// Whether `program` is on the PATH.
pub fn found(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// True if `program` can be run; else [`skip`]s (reason "`program` missing").
#[track_caller]
pub fn have(program: &str) -> bool {
    let present = found(program);
    if !present {
        skip_for(
            &format!("{program} missing"),
            &format!("`{program}` is not installed"),
        );
    }
    present
}

/// True if every one of `programs` can be run; else [`skip`]s naming the first missing.
#[track_caller]
pub fn have_all(programs: &[&str]) -> bool {
    programs.iter().all(|p| have(p))
}

/// True if tshark is on the PATH; else fails when [`tshark_required`], or reports a skip
/// (reason "tshark missing").
#[track_caller]
pub fn have_tshark() -> bool {
    if found("tshark") {
        return true;
    }
    assert!(
        !tshark_required(),
        "IMP_REQUIRE_TSHARK or IMP_REQUIRE_ROOT is set but tshark is not on PATH"
    );
    report("tshark missing", "tshark is not installed");
    false
}

/// True if valgrind is on the PATH; else fails when [`valgrind_required`], or reports a
/// skip (reason "valgrind missing").
#[track_caller]
pub fn have_valgrind() -> bool {
    if found("valgrind") {
        return true;
    }
    assert!(
        !valgrind_required() && !required(),
        "IMP_REQUIRE_VALGRIND or IMP_REQUIRE_ROOT is set, but valgrind is not on PATH"
    );
    report("valgrind missing", "valgrind is not installed");
    false
}
