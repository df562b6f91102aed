//! Argument parsing under arbitrary input (issue 13): `Cli::try_parse_from` returns the
//! parsed command or an error, never panics, whatever the words. The cargo-fuzz
//! project cannot link a binary crate's private types, so this runs on stable: every
//! file under `fuzz/corpus/cli_parse/` (words separated by NUL bytes), then a seeded
//! sweep of argument vectors built from the real subcommands and flags (read from
//! clap) and values meant to break the value parsers (units, impairments, CIDRs).
//! `IMP_CLI_SWEEP=N` runs N vectors instead of the default.

use clap::{CommandFactory, Parser};

use crate::Cli;

/// Parse `words` (after the program name): an error must render to some text.
fn parse(words: &[String]) {
    let argv = std::iter::once("imp".to_string()).chain(words.iter().cloned());
    if let Err(e) = Cli::try_parse_from(argv) {
        assert!(
            !e.render().to_string().is_empty(),
            "{words:?}: an empty error"
        );
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

/// Values aimed at the value parsers' edges.
const VALUES: &[&str] = &[
    "",
    "0",
    "1",
    "-1",
    "1K",
    "8k",
    "1M",
    "1.5G",
    "1e30G",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999T",
    "0.5",
    "-0.5",
    "1.5",
    "nan",
    "inf",
    "-inf",
    "1e-400",
    "10ms",
    "1s",
    "0s",
    "-1ms",
    "1.5us",
    "999999999999h",
    "100mbit",
    "1gbit",
    "0bit",
    "1.8e19bit",
    "2%",
    "150%",
    "loss=0.1",
    "loss=2,delay=-1ms",
    "rate=1mbit,delay=5ms,loss=0.01,reorder=0.1,mtu=0",
    "delay=",
    "=",
    ",,",
    "a=b=c",
    "10.0.0.1/24",
    "10.0.0.1/33",
    "300.0.0.1/8",
    "0.0.0.0/0=10.0.0.1",
    "tap0=10.0.0.1/24",
    "tap0=10.0.0.1/24,mtu=0",
    "tap0=10.0.0.1/24,mtu=99999999",
    "tap0:loss=1",
    "allow tcp 10.0.0.0/8 any",
    "deny",
    "fq_codel",
    "codel",
    "x",
    "ts",
    "tsandaddr",
    "é",
    "\u{0}",
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
        let result = std::panic::catch_unwind(|| parse(&words));
        assert!(result.is_ok(), "imp {words:?} panics");
    }
}
