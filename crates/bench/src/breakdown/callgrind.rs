//! Reading callgrind's output file: the exclusive (self) cost of every (source file,
//! function) pair, with the source file of inlined code (`fi=`/`fe=`) where callgrind
//! gives it, so code inlined from `impnet_wire::checksum` into a TCP function still
//! counts as checksum code.
//!
//! The format is callgrind's "callgrind format" (valgrind's docs, "Callgrind Format
//! Specification"): `fl=`, `fi=`, `fe=`, `fn=` set the current file and function; the
//! `c*=` lines name the callee of the `calls=` line that follows them, and the cost
//! line after a `calls=` line is the inclusive cost of that call (not the caller's own
//! cost, so it is skipped here). Names may be compressed: `(12) name` defines id 12,
//! a later `(12)` refers to it, and `fn`/`cfn` (and `fl`/`fi`/`fe`/`cfi`/`cfl`) share
//! one table.

use std::collections::HashMap;

/// One function's own instructions, by the source file they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelfCost {
    /// The source file of the instructions (the inlined file where there is one).
    pub file: String,
    /// The function (symbol) they ran in, demangled.
    pub function: String,
    /// Instructions (`Ir`).
    pub instructions: u64,
}

/// The parsed profile.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    /// Self costs, one entry per (file, function).
    pub costs: Vec<SelfCost>,
    /// The total callgrind reports (`summary:` or `totals:`), when it reports one.
    pub total: Option<u64>,
}

impl Profile {
    /// The sum of all self costs.
    pub fn sum(&self) -> u64 {
        self.costs.iter().map(|c| c.instructions).sum()
    }
}

/// Compressed-name tables: files and functions.
#[derive(Default)]
struct Names {
    files: HashMap<String, String>,
    functions: HashMap<String, String>,
}

/// Resolve `(id) name`, `(id)` or a plain `name` against `table`, defining the id.
fn resolve(table: &mut HashMap<String, String>, value: &str) -> Result<String, String> {
    let value = value.trim();
    let Some(rest) = value.strip_prefix('(') else {
        return Ok(value.to_string());
    };
    let close = rest
        .find(')')
        .ok_or_else(|| format!("callgrind output: unclosed name id in `{value}`"))?;
    let id = &rest[..close];
    let name = rest[close + 1..].trim();
    if name.is_empty() {
        table
            .get(id)
            .cloned()
            .ok_or_else(|| format!("callgrind output: name id ({id}) used before it was defined"))
    } else {
        table.insert(id.to_string(), name.to_string());
        Ok(name.to_string())
    }
}

/// Whether `line` is a cost line: a position (a number, `+n`, `-n`, `*`, or a `0x`
/// address) followed by costs.
fn is_cost_line(line: &str) -> bool {
    line.starts_with(|c: char| c.is_ascii_digit() || c == '+' || c == '-' || c == '*')
}

/// The first event (`Ir`) of a cost line; a line with no cost column costs nothing.
fn first_event(line: &str, at: usize) -> Result<u64, String> {
    match line.split_whitespace().nth(1) {
        None => Ok(0),
        Some(cost) => cost
            .parse()
            .map_err(|_| format!("callgrind output, line {at}: bad cost `{cost}`")),
    }
}

/// Parse the text of a callgrind output file.
pub fn parse(text: &str) -> Result<Profile, String> {
    let mut names = Names::default();
    let mut fl = String::new();
    let mut file = String::new();
    let mut function = String::new();
    let mut after_calls = false;
    let mut costs: HashMap<(String, String), u64> = HashMap::new();
    let mut total = None;
    let mut saw_events = false;
    for (index, line) in text.lines().enumerate() {
        let at = index + 1;
        if is_cost_line(line) {
            let ir = first_event(line, at)?;
            if after_calls {
                after_calls = false;
            } else if ir > 0 {
                *costs.entry((file.clone(), function.clone())).or_default() += ir;
            }
            continue;
        }
        after_calls = false;
        let Some((key, value)) = line.split_once('=') else {
            if let Some(v) = line
                .strip_prefix("summary:")
                .or_else(|| line.strip_prefix("totals:"))
            {
                let first = v.split_whitespace().next().unwrap_or("");
                total = first.parse().ok();
            } else if line.starts_with("events:") {
                saw_events = true;
            }
            continue;
        };
        match key {
            "fl" => {
                fl = resolve(&mut names.files, value)?;
                file.clone_from(&fl);
            }
            "fi" | "fe" => file = resolve(&mut names.files, value)?,
            "fn" => {
                function = resolve(&mut names.functions, value)?;
                file.clone_from(&fl);
            }
            "cfi" | "cfl" => {
                resolve(&mut names.files, value)?;
            }
            "cfn" => {
                resolve(&mut names.functions, value)?;
            }
            "calls" => after_calls = true,
            _ => {}
        }
    }
    if !saw_events {
        return Err("callgrind output: no `events:` line (not a callgrind file?)".into());
    }
    let mut costs: Vec<SelfCost> = costs
        .into_iter()
        .map(|((file, function), instructions)| SelfCost {
            file,
            function,
            instructions,
        })
        .collect();
    // Largest first; ties in a fixed order, so the report is the same every run.
    costs.sort_by(|a, b| {
        (b.instructions, &a.function, &a.file).cmp(&(a.instructions, &b.function, &b.file))
    });
    Ok(Profile { costs, total })
}

/// The size of a cache line, in bytes.
pub const LINE: u64 = 64;

/// The distinct [`LINE`]-byte lines of code holding an instruction that ran (its own
/// cost, `Ir`) at least `min_count` times, in the text of a callgrind output file
/// written with `--dump-instr=yes` (`positions: instr line`): the code a workload runs
/// once per unit of work when `min_count` is about the units, which is what has to fit
/// the instruction cache for the loop to run from it.
///
/// Addresses are compressed as callgrind writes them: `0x…` absolute, `+n`/`-n`
/// relative to the previous cost line's, `*` the same. The cost line after a
/// `calls=` line is the call's inclusive cost, not the caller's own, and is skipped.
pub fn hot_lines(text: &str, min_count: u64) -> Result<usize, String> {
    let mut by_address: HashMap<u64, u64> = HashMap::new();
    let mut address: u64 = 0;
    let mut after_calls = false;
    let mut instr = false;
    for (index, line) in text.lines().enumerate() {
        let at = index + 1;
        if let Some(positions) = line.strip_prefix("positions:") {
            instr = positions.split_whitespace().next() == Some("instr");
            continue;
        }
        if !is_cost_line(line) {
            after_calls = line.starts_with("calls=");
            continue;
        }
        if !instr {
            return Err(
                "callgrind output: no `positions: instr` (run with --dump-instr=yes)".into(),
            );
        }
        let mut fields = line.split_whitespace();
        let position = fields.next().unwrap_or("");
        address = next_address(address, position)
            .ok_or_else(|| format!("callgrind output, line {at}: bad address `{position}`"))?;
        let ir = match fields.nth(1) {
            None => 0,
            Some(cost) => cost
                .parse::<u64>()
                .map_err(|_| format!("callgrind output, line {at}: bad cost `{cost}`"))?,
        };
        if after_calls {
            after_calls = false;
        } else {
            *by_address.entry(address).or_default() += ir;
        }
    }
    let mut lines: Vec<u64> = (by_address.into_iter())
        .filter(|&(_, ir)| ir >= min_count)
        .map(|(address, _)| address / LINE)
        .collect();
    lines.sort_unstable();
    lines.dedup();
    Ok(lines.len())
}

/// The address a cost line's first position gives, after `previous`.
fn next_address(previous: u64, position: &str) -> Option<u64> {
    let number = |s: &str| match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    };
    match position.as_bytes().first()? {
        b'*' => Some(previous),
        b'+' => previous.checked_add(number(&position[1..])?),
        b'-' => previous.checked_sub(number(&position[1..])?),
        _ => number(position),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "# callgrind format
version: 1
positions: line
events: Ir
summary: 1000

ob=(1) /bin/imp
fl=(1) /src/crates/core/src/tcp/output.rs
fn=(1) impnet_core::tcp::output::write
10 100
fi=(2) /src/crates/wire/src/checksum.rs
+2 300
fe=(1)
-1 50
cfl=(2)
cfn=(2) impnet_wire::checksum::data
calls=3 5
12 9999
+1 25

fl=(2)
fn=(2)
5 500
cob=(3) /lib/libc.so.6
cfl=(3) memmove.S
cfn=(3) __memcpy_avx_unaligned_erms
calls=1 0
5 25
";

    #[test]
    fn self_costs_follow_inlined_files_and_skip_call_costs() {
        let p = parse(SAMPLE).unwrap();
        let get = |file: &str, function: &str| {
            p.costs
                .iter()
                .find(|c| c.file.ends_with(file) && c.function == function)
                .map(|c| c.instructions)
        };
        assert_eq!(
            get("output.rs", "impnet_core::tcp::output::write"),
            Some(175)
        );
        assert_eq!(
            get("checksum.rs", "impnet_core::tcp::output::write"),
            Some(300)
        );
        assert_eq!(get("checksum.rs", "impnet_wire::checksum::data"), Some(500));
        assert_eq!(p.sum(), 975);
        assert_eq!(p.total, Some(1000));
    }

    const INSTR: &str = "# callgrind format
positions: instr line
events: Ir
fn=(1) f
0x1000 10 20
+4 11 20
+60 12 20
+4 * 5
cfn=(2) g
calls=20 0x2000 5
+3 12 9999
fn=(2)
0x2000 5 20
-0x40 6 19
";

    #[test]
    fn hot_lines_count_the_cache_lines_of_instructions_that_ran_enough() {
        // 0x1000 and 0x1004 share a line; 0x1040 is the next; 0x1044 ran only 5 times
        // and 0x1047's cost is a call's, not its own; 0x2000 is a third line and
        // 0x1fc0 ran 19 times.
        assert_eq!(hot_lines(INSTR, 20), Ok(3));
        assert_eq!(hot_lines(INSTR, 19), Ok(4));
        assert_eq!(hot_lines(INSTR, 5), Ok(4));
        assert_eq!(hot_lines(INSTR, 21), Ok(0));
        // Without instruction positions there is nothing to count by.
        assert!(hot_lines(SAMPLE, 1).is_err());
        for text in [
            "positions: instr line\n-5 1 1\n",
            "positions: instr line\n0xzz 1 1\n",
        ] {
            assert!(hot_lines(text, 1).is_err());
        }
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert!(parse("").is_err());
        assert!(parse("events: Ir\nfn=(7)\n").is_err());
        assert!(parse("events: Ir\nfn=(7\n").is_err());
        assert!(parse("events: Ir\nfn=x\n12 abc\n").is_err());
        // Arbitrary bytes never panic.
        for text in ["events: Ir\n+", "events: Ir\n*\n-", "events:\ncalls=\n5"] {
            let _ = parse(text);
        }
    }
}
