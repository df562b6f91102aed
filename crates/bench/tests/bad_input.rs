//! `imp-bench` on bad command lines: each is refused before anything runs, with exit
//! status 2 and one line on stderr naming the option or value (clap's own errors, and
//! the bench's checks of its arguments); nothing on stdout, never a panic. These are
//! the checks `imp bench` had in the `imp` command's tests before it became its own
//! program.

use std::process::Command;

/// `imp-bench ARGS` must exit with 2, print nothing on stdout and a message holding
/// `expect` on stderr, without a panic; `own` when it is the bench's own check (one
/// line, `imp-bench: ...`).
fn refused(args: &[&str], expect: &str, own: bool) {
    let out = Command::new(env!("CARGO_BIN_EXE_imp-bench"))
        .args(args)
        .env("IMP_BENCH_TINY", "1")
        .output()
        .expect("imp-bench starts");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "imp-bench {args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "imp-bench {args:?}: {stderr}");
    assert!(stderr.contains(expect), "imp-bench {args:?}: {stderr}");
    assert!(out.stdout.is_empty(), "imp-bench {args:?}: printed stdout");
    if own {
        assert!(stderr.starts_with("imp-bench: "), "{stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    }
}

#[test]
fn a_wrong_command_line_exits_2_with_a_message_naming_it() {
    // clap's own errors.
    refused(&["--nosuch"], "--nosuch", false);
    refused(&["bench"], "bench", false);
    refused(&["--repeat", "x"], "x", false);
    refused(&["--breakdown", "--only", "W1"], "--only", false);
    // The bench's checks.
    for (args, expect) in [
        (&["--only", "W0"][..], "W0"),
        (&["--impl", "quic"], "quic"),
        (&["--scale", "0"], "--scale 0"),
        (&["--scale", "nan"], "--scale"),
        (&["--repeat", "0"], "--repeat"),
        (&["--breakdown-child", "W4"], "--breakdown-child `W4`"),
        (&["--w4-connections", "100,0"], "--w4-connections"),
        (&["--budget-idle-child", "0"], "--budget-idle-child 0"),
        (&["--breakdown-amount", "0"], "--breakdown-amount 0"),
    ] {
        refused(args, expect, true);
    }
}

#[test]
fn help_and_version_succeed() {
    for args in [&["--help"][..], &["--version"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_imp-bench"))
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "imp-bench {args:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("imp-bench"), "{stdout}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_imp-bench"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--quick",
        "--json",
        "--only",
        "--impl",
        "--breakdown",
        "--imp ",
    ] {
        assert!(help.contains(flag), "{flag} missing from\n{help}");
    }
}
