//! Bad input at every edge of the command line (issue 13): whatever the words,
//! `imp` parses them (clap) and runs each command's checks of its arguments
//! (`crate::validate`, and for `imp sim` the scenario read, `sim::plan`) without a
//! panic, and every error is a non-empty message naming an option or a value given.
//! Nothing here opens a device, sends a packet or runs a simulation: the checks come
//! before all of that. Three sources of argument vectors: every file under
//! `fuzz/corpus/cli_parse/` (words separated by NUL bytes); a seeded sweep built from
//! the real subcommands and flags (read from clap) and values meant to break the
//! value parsers (`IMP_CLI_SWEEP=N` runs N vectors instead of the default); and a
//! proptest over the same material plus arbitrary strings, which shrinks a failure to
//! a small command line (`PROPTEST_CASES=N` changes its case count).

use clap::{CommandFactory, Parser};
use proptest::prelude::*;

use crate::{Cli, Command};

/// What `imp WORDS...` gets before it does anything: the parse, then the command's
/// checks. Ok(None): it would run; Ok(Some(text)): clap refused it; Err(message):
/// the command's checks refused it.
fn outcome(words: &[String]) -> Result<Option<String>, String> {
    let argv = std::iter::once("imp".to_string()).chain(words.iter().cloned());
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(e) => return Ok(Some(e.render().to_string())),
    };
    crate::validate(&cli.command)?;
    if let Command::Sim(args) = &cli.command {
        crate::sim::plan(args)?;
    }
    Ok(None)
}

/// What an error may name: the words given (whole, and either side of `=`), the long
/// form of a short flag given, and the options and positional names of the
/// subcommand (for an option that is missing).
fn needles(words: &[String]) -> Vec<String> {
    let root = Cli::command();
    let sub = words
        .first()
        .and_then(|name| root.get_subcommands().find(|c| c.get_name() == name));
    let mut out = Vec::new();
    for word in words.iter().skip(1) {
        let word = word.trim();
        if word.is_empty() {
            continue;
        }
        out.push(word.to_string());
        if let Some((flag, value)) = word.split_once('=') {
            out.extend(
                [flag, value]
                    .iter()
                    .filter(|s| !s.is_empty())
                    .map(|s| s.to_string()),
            );
        }
        if let (Some(sub), Some(short)) = (sub, word.strip_prefix('-')) {
            let mut chars = short.chars();
            if let (Some(c), None) = (chars.next(), chars.next()) {
                let long = sub
                    .get_arguments()
                    .find(|a| a.get_short() == Some(c))
                    .and_then(|a| a.get_long());
                out.extend(long.map(|l| format!("--{l}")));
            }
        }
    }
    for arg in sub.iter().flat_map(|s| s.get_arguments()) {
        match arg.get_long() {
            Some(long) => out.push(format!("--{long}")),
            None => out.extend(
                arg.get_value_names()
                    .into_iter()
                    .flatten()
                    .map(ToString::to_string),
            ),
        }
    }
    out
}

/// Check one command line: no panic (the caller catches one), a non-empty clap error,
/// or a non-empty message from the command's checks that names an option or a value.
fn check(words: &[String]) -> Result<(), String> {
    match outcome(words) {
        Ok(None) => Ok(()),
        Ok(Some(text)) if text.trim().is_empty() => {
            Err(format!("imp {words:?}: an empty clap error"))
        }
        Ok(Some(_)) => Ok(()),
        Err(message) if message.trim().is_empty() => Err(format!("imp {words:?}: an empty error")),
        Err(message) => {
            if needles(words).iter().any(|n| message.contains(n.as_str())) {
                Ok(())
            } else {
                Err(format!(
                    "imp {words:?}: the error names no option or value given: {message}"
                ))
            }
        }
    }
}

/// Parse and check `words` (after the program name); panics on a failed check.
fn parse(words: &[String]) {
    if let Err(e) = check(words) {
        panic!("{e}");
    }
}

/// The words of a corpus file: NUL-separated, lossy UTF-8.
fn words(data: &[u8]) -> Vec<String> {
    data.split(|&b| b == 0)
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect()
}

#[test]
fn clap_definition_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn cli_parse_corpus() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/cli_parse");
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut count = 0;
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        let data = std::fs::read(&path).expect("a corpus file reads");
        let result = std::panic::catch_unwind(|| parse(&words(&data)));
        assert!(result.is_ok(), "{} panics", path.display());
        count += 1;
    }
    assert!(count > 0, "no corpus in {}", dir.display());
}

/// Values aimed at the value parsers' edges and at each command's checks.
const VALUES: &[&str] = &[
    // Numbers and quantities.
    "",
    " ",
    "0",
    "1",
    "-1",
    "-0",
    "+1",
    "0x10",
    "1_000",
    "1K",
    "8k",
    "1M",
    "1.5G",
    "100G",
    "1e30G",
    "255",
    "256",
    "65535",
    "65536",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999T",
    "0.5",
    "-0.5",
    "1.5",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e20",
    "1e-300",
    "1e309",
    "1e-400",
    "10ms",
    "1s",
    "0s",
    "0ms",
    "-1ms",
    "1.5us",
    "999999999999h",
    "999999999s",
    "100mbit",
    "1gbit",
    "0bit",
    "1bit",
    "1.8e19bit",
    "2%",
    "150%",
    "on",
    "off",
    "newreno",
    "bbr",
    "bbr1",
    "reno",
    // Impairments.
    "loss=0.1",
    "loss=2,delay=-1ms",
    "rate=1mbit,delay=5ms,loss=0.01,reorder=0.1,mtu=0",
    "rate=1bit,queue=0",
    "delay=1e18ns",
    "qdisc=fq_codel,target=0",
    "qdisc=codel,interval=1e-300s",
    "reorder=1/0ms",
    "delay=",
    "=",
    ",,",
    "a=b=c",
    // Addresses, prefixes, sockets.
    "10.0.0.1",
    "10.0.0.256",
    "1.2.3",
    "0.0.0.0",
    "255.255.255.255",
    "224.0.0.1",
    "::1",
    "[::1]:80",
    "10.0.0.1:0",
    "10.0.0.1:80",
    "10.0.0.1:65536",
    "0.0.0.0:80",
    "255.255.255.255:1",
    "224.0.0.1:5",
    "10.0.0.1/24",
    "10.0.0.2/24",
    "10.0.0.0/24",
    "10.0.0.255/24",
    "10.0.0.1/32",
    "10.0.0.1/33",
    "127.0.0.1/8",
    "0.0.0.0/0",
    "300.0.0.1/8",
    "0.0.0.0/0=10.0.0.1",
    "10.9.0.0/16=10.0.1.1",
    "10.9.0.0/16=10.0.2.7",
    // TAP names and route specs.
    "tap0",
    "a",
    "a/b",
    "x:y",
    "sixteen_chars_xx",
    ".",
    "..",
    "tap0=10.0.0.1/24",
    "a=10.0.1.1/24",
    "b=10.0.2.1/24",
    "a=10.0.1.0/24",
    "b=10.0.1.1/24",
    "tap0=10.0.0.1/24,mtu=0",
    "tap0=10.0.0.1/24,mtu=575",
    "tap0=10.0.0.1/24,mtu=99999999",
    "veryveryverylongname=10.0.0.1/24",
    "tap0:loss=1",
    "a:delay=1ms",
    "c:rate=10mbit",
    "udp:10.0.2.1:9",
    "udp:10.0.2.1:9,rate=1e-300",
    "icmp:10.0.2.1,rate=0.0001,size=70000",
    "udp:10.0.2.1:99999,count=-1",
    "icmp:10.0.2.1,rate=inf",
    // Access rules and queue disciplines.
    "allow tcp 10.0.0.0/8 any",
    "deny",
    "deny in=nosuch",
    "allow out=b proto=udp",
    "deny in=a dport=5-1",
    "deny src=10.0.0.0/33",
    "fq_codel",
    "codel",
    "fifo",
    "red",
    // Bench names.
    "W1",
    "W8",
    "w8",
    "W9",
    "imp",
    "IMP",
    "smoltcp",
    "quic",
    // Paths that do not exist, devices and directories.
    "/nonexistent/imp/scenario.toml",
    "/dev/zero",
    "/dev/null",
    "/",
    "../../scenarios/seeds/004-selfloop-letters.toml",
    "Cargo.toml",
    // Words.
    "x",
    "ts",
    "tsonly",
    "tsandaddr",
    "é",
    "\u{0}",
    "\n",
    "--",
    "-",
    "--help",
    "-h",
    "--version",
];

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.next() as usize % items.len()]
    }
}

/// A value: one from the list, sometimes cut, joined or given a stray character.
fn value(rng: &mut Rng) -> String {
    let mut v = rng.pick(VALUES).to_string();
    match rng.next() % 6 {
        0 => {
            let mut at = rng.next() as usize % (v.len() + 1);
            while !v.is_char_boundary(at) {
                at -= 1;
            }
            v.truncate(at);
        }
        1 => {
            let more: &&str = rng.pick(VALUES);
            v.push_str(more);
        }
        2 => v.insert(0, *rng.pick(&['-', '+', ' ', '.', 'e', '9'])),
        _ => {}
    }
    v
}

#[test]
fn cli_parse_sweep() {
    let n: usize = std::env::var("IMP_CLI_SWEEP").map_or(20_000, |v| v.parse().expect("a count"));
    let root = Cli::command();
    let subs: Vec<&clap::Command> = root.get_subcommands().collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..n {
        let sub = rng.pick(&subs);
        let flags: Vec<String> = sub
            .get_arguments()
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect();
        let mut words = vec![sub.get_name().to_string()];
        for _ in 0..rng.next() % 6 {
            match rng.next() % 4 {
                0 if !flags.is_empty() => {
                    let flag = rng.pick(&flags);
                    words.push(format!("{flag}={}", value(&mut rng)));
                }
                1 | 2 if !flags.is_empty() => {
                    words.push(rng.pick(&flags).clone());
                    words.push(value(&mut rng));
                }
                _ => words.push(value(&mut rng)),
            }
        }
        match std::panic::catch_unwind(|| check(&words)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("{e}"),
            Err(_) => panic!("imp {words:?} panics"),
        }
    }
}

/// The long and short flags of a subcommand, read from clap.
fn flags_of(sub: &clap::Command) -> Vec<String> {
    let mut flags: Vec<String> = sub
        .get_arguments()
        .flat_map(|a| {
            let long = a.get_long().map(|l| format!("--{l}"));
            let short = a.get_short().map(|c| format!("-{c}"));
            long.into_iter().chain(short)
        })
        .collect();
    flags.push("--help".into());
    flags
}

/// A value: from the list, two joined, one cut short, or arbitrary text and numbers.
fn any_value() -> impl Strategy<Value = String> {
    let listed = || prop::sample::select(VALUES);
    prop_oneof![
        6 => listed().prop_map(String::from),
        2 => (listed(), listed()).prop_map(|(a, b)| format!("{a}{b}")),
        1 => (listed(), 0usize..24).prop_map(|(v, cut)| {
            let mut at = cut.min(v.len());
            while !v.is_char_boundary(at) {
                at -= 1;
            }
            v[..at].to_string()
        }),
        2 => "\\PC{0,16}",
        1 => any::<String>(),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        1 => any::<f64>().prop_map(|f| f.to_string()),
    ]
}

/// One or two words: a flag with its value (apart or joined by `=`), a lone flag, or
/// a lone value.
fn token(flags: Vec<String>) -> impl Strategy<Value = Vec<String>> {
    let flag = prop::sample::select(flags);
    prop_oneof![
        3 => (flag.clone(), any_value()).prop_map(|(f, v)| vec![f, v]),
        2 => (flag.clone(), any_value()).prop_map(|(f, v)| vec![format!("{f}={v}")]),
        2 => flag.prop_map(|f| vec![f]),
        2 => any_value().prop_map(|v| vec![v]),
    ]
}

/// A command line: a real subcommand, then up to eight tokens built from its flags.
fn command_line() -> impl Strategy<Value = Vec<String>> {
    let root = Cli::command();
    let subs: Vec<(String, Vec<String>)> = root
        .get_subcommands()
        .map(|s| (s.get_name().to_string(), flags_of(s)))
        .collect();
    prop::sample::select(subs).prop_flat_map(|(name, flags)| {
        prop::collection::vec(token(flags), 0..8).prop_map(move |tokens| {
            let mut words = vec![name.clone()];
            words.extend(tokens.into_iter().flatten());
            words
        })
    })
}

/// Cases per property: `PROPTEST_CASES`, else `default`.
fn cases(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(cases(4096))]

    /// Any command line built from the real subcommands and flags: no panic, and an
    /// error names an option or a value.
    #[test]
    fn command_lines_never_panic_and_errors_name_the_culprit(words in command_line()) {
        if let Err(e) = check(&words) {
            prop_assert!(false, "{}", e);
        }
    }
}

proptest! {
    #![proptest_config(cases(1024))]

    /// Any words at all, the first one included.
    #[test]
    fn arbitrary_words_never_panic(words in prop::collection::vec(any_value(), 0..8)) {
        if let Err(e) = check(&words) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// The words of `line`: split at spaces, except inside single quotes (`--acl 'deny
/// in=c'`).
fn split_words(line: &str) -> Vec<String> {
    let mut words = vec![String::new()];
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '\'' => quoted = !quoted,
            ' ' if !quoted => words.push(String::new()),
            c => words.last_mut().expect("one word").push(c),
        }
    }
    words
}

/// What `imp LINE` (split as [`split_words`] does) says before running: clap's error
/// or the command's own.
fn error_of(line: &str) -> String {
    let words = split_words(line);
    match outcome(&words) {
        Ok(Some(text)) => text,
        Ok(None) => panic!("imp {line}: accepted"),
        Err(message) => message,
    }
}

/// Command lines that panicked, aborted, hung or failed unclearly once they ran, now
/// refused before anything runs, each with the option named.
#[test]
fn bad_values_found_at_the_edges_are_refused_up_front() {
    let taps = "--tap a=10.0.1.1/24 --tap b=10.0.2.1/24";
    for (line, expect) in [
        // Panicked in `Duration::from_secs_f64` (`imp route` with a TAP).
        (format!("route {taps} --stats 1e20"), "--stats"),
        (format!("route {taps} --stats inf"), "--stats"),
        (
            format!("route {taps} --generate icmp:10.0.2.9,rate=1e-300"),
            "rate",
        ),
        // Found only after opening every TAP, now before.
        (
            format!("route {taps} --acl 'deny in=nosuch'"),
            "which is no --tap",
        ),
        (
            format!("route {taps} --route 10.9.0.0/16=10.0.1.1"),
            "own address",
        ),
        (
            "route --tap a=10.0.1.1/24 --tap b=10.0.1.1/24".into(),
            "10.0.1.1",
        ),
        (
            "route --tap a/b=10.0.1.1/24 --tap b=10.0.2.1/24".into(),
            "a/b",
        ),
        (
            "route --tap a=10.0.1.255/24 --tap b=10.0.2.1/24".into(),
            "broadcast",
        ),
        // Overflowed the simulator's clock: most requests went at once at its end.
        ("ping -c 65535 -i 999999999s".into(), "--interval"),
        (
            "ping -c 2 --delay 999999999s -W 999999999s".into(),
            "--interval",
        ),
        // Aborted allocating a 100 GiB record.
        ("ttcp --record 100G".into(), "--record"),
        // Ran to a stall or to the simulation's time limit with an unclear error.
        ("ttcp --bytes 0".into(), "--bytes"),
        ("ttcp --rcvbuf 0".into(), "--rcvbuf"),
        ("ttcp --sndbuf 0".into(), "--sndbuf"),
        // Silently ignored.
        ("ttcp --impair loss=1%".into(), "--impair"),
        ("ping --gateway 10.0.0.1".into(), "--gateway"),
        // Failed only when the device opened or the socket bound.
        (
            "link --tap a --tap sixteen_chars_xx".into(),
            "sixteen_chars_xx",
        ),
        ("link --tap a --tap b --mtu 0".into(), "--mtu"),
        (
            "ttcp --tap t0 --addr 10.0.0.2/24 --listen 0".into(),
            "--listen",
        ),
        (
            "ttcp --tap t0 --addr 10.0.0.2/24 --connect 10.0.0.1:0".into(),
            "--connect",
        ),
        (
            "ttcp --tap t0 --addr 10.0.0.2/24 --connect 10.0.0.1:5001 --time 0".into(),
            "--time",
        ),
        ("ping --tap t0 --addr 10.0.0.0/24 10.0.0.1".into(), "--addr"),
        (
            "ping --tap t0 --addr 10.0.0.2/24 --gateway 10.9.0.1 10.0.0.1".into(),
            "--gateway",
        ),
        (
            "serve --tap t0 --addr 10.0.0.2/24 --http / --echo --http-port 7".into(),
            "echo's port",
        ),
        // Read /dev/zero until memory ran out.
        ("sim /dev/zero".into(), "not a regular file"),
        ("sim /".into(), "not a regular file"),
    ] {
        let error = error_of(&line);
        assert!(error.contains(expect), "imp {line}: {error}");
        assert_eq!(check(&split_words(&line)), Ok(()));
    }
}

/// `imp ftp` and `imp serve --ftp` refuse bad values before anything opens or runs,
/// each with the option or value named.
#[test]
fn ftp_values_are_refused_up_front() {
    for (line, expect) in [
        ("ftp --bytes 0", "--bytes"),
        ("ftp --rtt 999999999s", "--rtt"),
        ("ftp 10.0.0.1 f", "SERVER, PATH"),
        ("ftp --tap t0 --addr 10.0.0.2/24 10.0.0.1:0 f", "10.0.0.1:0"),
        ("ftp --tap t0 --addr 10.0.0.2/24 10.0.0.1", "PATH"),
        (
            "ftp --tap t0 --addr 10.0.0.2/24 --list --put /etc/hostname 10.0.0.1 f",
            "--put",
        ),
        (
            "serve --tap t0 --addr 10.0.0.2/24 --ftp-upload x",
            "--ftp-upload",
        ),
        (
            "serve --tap t0 --addr 10.0.0.2/24 --ftp / --echo --ftp-port 7",
            "echo's port",
        ),
        (
            "serve --tap t0 --addr 10.0.0.2/24 --ftp / --ftp-no-anonymous",
            "--ftp-user",
        ),
        (
            "serve --tap t0 --addr 10.0.0.2/24 --ftp / --ftp-user alice",
            "USER:PASSWORD",
        ),
        (
            "serve --tap t0 --addr 10.0.0.2/24 --ftp / --ftp-upload ../x",
            "--ftp-upload",
        ),
    ] {
        let error = error_of(line);
        assert!(error.contains(expect), "imp {line}: {error}");
        assert_eq!(check(&split_words(line)), Ok(()));
    }
}
