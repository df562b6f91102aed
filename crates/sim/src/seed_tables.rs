//! The tables of `scenarios/seeds/README.md`: each seed document's figures next to
//! imp's, from a run of the seed's scenario file, in Markdown.
//!
//! `imp sim scenarios/seeds/NNN-....toml --markdown` prints a seed's tables; the README
//! holds them between `<!-- BEGIN generated: FILE -->` and `<!-- END generated -->`
//! markers, and a test (`crates/sim/tests/scenarios.rs`) fails when what is committed
//! differs from what the run prints. The historical figures are text kept here, next to
//! the rows they belong to; imp's figures and the bounds come from the [`Report`].

pub mod ledger;

use std::fmt::Write;

use crate::experiment::{FlowReport, Report};

/// The README section a seed's tables go in: the scenario file's name.
pub fn file_of(report: &Report) -> Option<&'static str> {
    Some(match report.scenario.as_str() {
        "seed000-vax-ethernet" => "000-vax-ethernet.toml",
        "seed001-text-vs-binary" => "001-text-vs-binary.toml",
        "seed002-oc12-sack" => "002-oc12-sack.toml",
        "seed002-oc12-policing" => "002-oc12-policing.toml",
        "seed003-noisy-serial" => "003-noisy-serial.toml",
        "seed003-nic-ping" => "003-nic-ping.toml",
        "seed004-selfloop" => "004-selfloop-letters.toml",
        _ => return None,
    })
}

/// A seed scenario's tables (and the sentences that quote its numbers) in Markdown,
/// ending in a newline. An error if `report` is not from one of the seed files, or a
/// flow the tables need is missing.
pub fn markdown(report: &Report) -> Result<String, String> {
    match report.scenario.as_str() {
        "seed000-vax-ethernet" => seed000(report),
        "seed001-text-vs-binary" => seed001(report),
        "seed002-oc12-sack" => seed002(report),
        "seed002-oc12-policing" => seed002_policing(report),
        "seed003-noisy-serial" => seed003(report),
        "seed003-nic-ping" => seed003_nic_ping(report),
        "seed004-selfloop" => seed004(report),
        other => Err(format!(
            "`{other}` is not one of the seed scenarios (scenarios/seeds/): no tables for it"
        )),
    }
}

/// The marker line that opens the generated block for `file`.
pub fn begin_marker(file: &str) -> String {
    format!("<!-- BEGIN generated: imp sim scenarios/seeds/{file} --markdown -->")
}

/// The marker line that closes a generated block.
pub const END_MARKER: &str = "<!-- END generated -->";

/// The text between `file`'s markers in `readme` (without the marker lines), if the
/// markers are there.
pub fn committed<'a>(readme: &'a str, file: &str) -> Option<&'a str> {
    committed_block(readme, &begin_marker(file))
}

/// The text between the marker line `begin` and the next [`END_MARKER`] in `readme`
/// (without the marker lines), if both are there: the generated blocks that no
/// scenario file prints (the test plan's, `crates/sim/tests/test_plan.rs`).
pub fn committed_block<'a>(readme: &'a str, begin: &str) -> Option<&'a str> {
    let start = readme.find(begin)? + begin.len();
    let start = start + readme[start..].find('\n')? + 1;
    let end = start + readme[start..].find(END_MARKER)?;
    Some(&readme[start..end])
}

/// `readme` with the text between `file`'s markers replaced by `tables`.
pub fn replace(readme: &str, file: &str, tables: &str) -> Option<String> {
    replace_block(readme, &begin_marker(file), tables)
}

/// `readme` with the text between the marker line `begin` and the next
/// [`END_MARKER`] replaced by `tables`.
pub fn replace_block(readme: &str, begin: &str, tables: &str) -> Option<String> {
    let old = committed_block(readme, begin)?;
    let start = old.as_ptr() as usize - readme.as_ptr() as usize;
    let end = start + old.len();
    Some(format!("{}{tables}{}", &readme[..start], &readme[end..]))
}

fn flow<'a>(r: &'a Report, name: &str) -> Result<&'a FlowReport, String> {
    r.flows
        .iter()
        .find(|f| f.name == name)
        .ok_or_else(|| format!("{}: no flow `{name}`", r.scenario))
}

/// One Markdown table row (an empty cell stays `| |`).
fn push_row(out: &mut String, cells: &[&str]) {
    for cell in cells {
        out.push_str("| ");
        out.push_str(cell);
        if !cell.is_empty() {
            out.push(' ');
        }
    }
    out.push_str("|\n");
}

fn mbit(bps: f64) -> f64 {
    bps / 1e6
}

/// `v` with `digits` significant digits (at least one decimal below 10 when
/// `digits` allows, none at or above 10^digits).
fn significant(v: f64, digits: i32) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let magnitude = v.abs().log10().floor() as i32;
    let decimals = (digits - 1 - magnitude).max(0) as usize;
    format!("{v:.decimals$}")
}

fn seed000(r: &Report) -> Result<String, String> {
    let mut out = String::from(
        "| rung | 1981 figure | imp (VAX cost model) | of 1981 | sender / receiver CPU busy | wire bound |\n\
         |---|---|---|---|---|---|\n",
    );
    for rung in &r.ladder {
        let f = flow(r, &rung.flow)?;
        let seed = rung
            .seed_mbit
            .map_or(String::new(), |m| format!("{m} Mbit/s"));
        let imp = format!("{:.2} Mbit/s ({:.1} s)", rung.imp_mbit, f.seconds);
        let pct = rung
            .pct_of_seed
            .map_or(String::new(), |p| format!("{p:.0}%"));
        let busy = f.cpu.as_ref().map_or(String::new(), |c| {
            let p = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}%"));
            format!("{} / {}", p(c.sender_busy_pct), p(c.receiver_busy_pct))
        });
        let bound = format!("{:.2} Mbit/s", mbit(f.bound_bps));
        push_row(&mut out, &[&rung.step, &seed, &imp, &pct, &busy, &bound]);
    }
    let wire = flow(r, "3mb-1024-wire")?;
    let _ = writeln!(
        out,
        "\nThe measurement's transfer between hosts that cost no time: {:.2} Mbit/s ({:.1} s), \
         {:.0}% of the 3 Mbit/s cable.",
        mbit(wire.goodput_bps),
        wire.seconds,
        wire.capacity_pct
    );
    Ok(out)
}

/// Seed 001's rows: (flow, the report's row, its kB/s, fitted or predicted).
const SEED001_RATES: [(&str, &str, f64, &str); 5] = [
    ("1985-binary", "TCP BYTE 8, UNIX 750", 43.7, "fitted"),
    ("1985-text", "TCP ASCII, UNIX 750", 9.2, "fitted"),
    ("lispm-binary", "TCP BYTE 8, LISPM", 22.2, "predicted"),
    ("lispm-text", "TCP ASCII, LISPM", 7.0, "predicted"),
    ("lispm-chaos", "EX CHAOS, LAM3 LISPM", 5.9, "predicted"),
];

/// Seed 001's packets-per-second column: (flow, the report's row, its figure).
const SEED001_MESSAGES: [(&str, &str, f64); 3] = [
    ("1985-binary", "TCP BYTE 8, UNIX 750", 21.0),
    ("lispm-binary", "TCP BYTE 8, LISPM", 11.0),
    ("lispm-chaos", "EX CHAOS, LAM3 LISPM", 12.0),
];

/// Messages handed to the reading application per second: its reads of the data.
pub fn seed001_messages_per_s(f: &FlowReport) -> Option<f64> {
    f.data_reads
        .map(|n| n as f64 / f.seconds)
        .filter(|v| v.is_finite())
}

fn seed001(r: &Report) -> Result<String, String> {
    let kb = |v: f64| significant(v / 1e3, 3);
    let mut out = String::from(
        "| 1985 row | 1985 | imp (the Lambda model) | imp / 1985 | | client / server CPU busy |\n\
         |---|---|---|---|---|---|\n",
    );
    for (name, row, figure, role) in SEED001_RATES {
        let f = flow(r, name)?;
        let busy = f.cpu.as_ref().map_or(String::new(), |c| {
            let p = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}%"));
            format!("{} / {}", p(c.sender_busy_pct), p(c.receiver_busy_pct))
        });
        let ratio = f.goodput_bytes_per_s / 1e3 / figure;
        push_row(
            &mut out,
            &[
                row,
                &format!("{figure} kB/s"),
                &format!("{} kB/s", kb(f.goodput_bytes_per_s)),
                &format!("{ratio:.2}"),
                role,
                &busy,
            ],
        );
    }
    out.push_str(
        "\n| packets/s column | 1985 | imp (messages read per second) | imp / 1985 |\n\
         |---|---|---|---|\n",
    );
    for (name, row, figure) in SEED001_MESSAGES {
        let f = flow(r, name)?;
        let imp = seed001_messages_per_s(f).ok_or_else(|| format!("{name}: no reads"))?;
        push_row(
            &mut out,
            &[
                row,
                &format!("{figure}"),
                &significant(imp, 3),
                &format!("{:.2}", imp / figure),
            ],
        );
    }
    out.push_str("\n| without CPU cost (today) | imp | bound |\n|---|---|---|\n");
    for (name, run, note) in [
        ("today-binary", "binary", ""),
        ("today-text", "text", " (the CR bytes)"),
    ] {
        let f = flow(r, name)?;
        let imp = format!("{} kB/s{note}", kb(f.goodput_bytes_per_s));
        let bound = format!("{:.0} kB/s", f.bound_bps / 8e3);
        push_row(&mut out, &[run, &imp, &bound]);
    }
    let ratio = |binary: &str, text: &str| -> Result<f64, String> {
        Ok(flow(r, binary)?.goodput_bps / flow(r, text)?.goodput_bps)
    };
    let _ = writeln!(
        out,
        "\nRatio binary/text: report 4.75 (UNIX) and 3.2 (LISPM); imp {:.2} and {:.2} with \
         the 1985 model, {:.2} without CPU cost.",
        ratio("1985-binary", "1985-text")?,
        ratio("lispm-binary", "lispm-text")?,
        ratio("today-binary", "today-text")?
    );
    Ok(out)
}

fn seed002(r: &Report) -> Result<String, String> {
    let rows = [
        ("nosack", "no SACK, cell loss", "150-300 Mbit/s"),
        ("sack", "SACK, cell loss", "300-480 Mbit/s"),
        (
            "slowstart-1g",
            "no loss, 1 GB",
            "513 Mbit/s (local loop through the GSR)",
        ),
        ("cubic", "SACK + CUBIC, cell loss", "(CUBIC is from 2008)"),
        (
            "vegas",
            "SACK + Vegas, cell loss",
            "\"TCP Vegas\" as a next step",
        ),
    ];
    let mut out = String::from("| run | report's figure | imp | bound |\n|---|---|---|---|\n");
    for (i, (name, run, figure)) in rows.into_iter().enumerate() {
        let f = flow(r, name)?;
        let report = if i == 0 {
            " (report: 539.6 \"to appl. via TCP\")"
        } else {
            ""
        };
        let imp = format!("{:.0} Mbit/s", mbit(f.goodput_bps));
        let bound = format!("{:.1} Mbit/s{report}", mbit(f.bound_bps));
        push_row(&mut out, &[run, figure, &imp, &bound]);
    }
    let gain = |name: &str, over: &str| -> Result<f64, String> {
        Ok(100.0 * (flow(r, name)?.goodput_bps / flow(r, over)?.goodput_bps - 1.0))
    };
    let _ = writeln!(
        out,
        "\nSACK beats no SACK by {:.0}%; under the same losses CUBIC gains {:.0}% over NewReno with SACK, Vegas {:.0}%.",
        gain("sack", "nosack")?,
        gain("cubic", "sack")?,
        gain("vegas", "sack")?
    );
    out.push('\n');
    out.push_str(&seed002_slow_start(r)?);
    Ok(out)
}

/// The slow-start table: wasted time = completion time - size / bound.
fn seed002_slow_start(r: &Report) -> Result<String, String> {
    let (g1, m100) = (flow(r, "slowstart-1g")?, flow(r, "slowstart-100m")?);
    let wasted = |f: &FlowReport| f.seconds - f.bytes as f64 * 8.0 / f.bound_bps;
    let (w1, w100) = (wasted(g1), wasted(m100));
    let rtt_ms = r
        .links
        .iter()
        .find(|l| l.a == g1.from || l.b == g1.from)
        .map_or(0.0, |l| 2.0 * l.delay_ms);
    let mut out = format!(
        "Wasted time on the loss-free runs: {w100:.3} s (100 MB) and {w1:.3} s (1 GB), \
         about {:.0} round trips of {rtt_ms:.0} ms.\n\n",
        w1 * 1e3 / rtt_ms
    );
    out.push_str(
        "| file size | report: min time / wasted / share | imp: min time / wasted / share |\n\
         |---|---|---|\n",
    );
    let rows = [
        ("10 GB", 10 * g1.bytes, w1, "178 s / 0.54 s / 0.30%"),
        ("1 GB", g1.bytes, w1, "18.2 s / 0.54 s / 2.9%"),
        ("100 MB", m100.bytes, w100, "2.31 s / 0.54 s / 23.4%"),
    ];
    for (size, bytes, wasted, figure) in rows {
        let min = bytes as f64 * 8.0 / g1.bound_bps;
        // The report's share: wasted time over the minimum time.
        let share = 100.0 * wasted / min;
        let imp = format!(
            "{} s / {wasted:.3} s / {}%",
            significant(min, 3),
            significant(share, 2)
        );
        push_row(&mut out, &[size, figure, &imp]);
    }
    Ok(out)
}

/// The frames the policer of `f`'s link dropped in `f`'s direction.
fn police_drops(r: &Report, f: &FlowReport) -> Result<u64, String> {
    r.links
        .iter()
        .flat_map(|l| &l.directions)
        .find(|d| d.from == f.from)
        .map(|d| d.police_drops)
        .ok_or_else(|| format!("{}: no link from `{}`", r.scenario, f.from))
}

fn seed002_policing(r: &Report) -> Result<String, String> {
    let rows = [
        (
            "scr-ignored",
            "router shapes to the PCR only (SCR ignored)",
            "300-480 Mbit/s with SACK; 3-4 packet losses per 3-5 min test",
        ),
        (
            "scr-honoured",
            "router shapes to PCR, SCR and MBS (the fix)",
            "572 Mbit/s ATM rate of 600 max (95%)",
        ),
        (
            "scr-unpoliced",
            "no SCR anywhere (PCR only)",
            "513 Mbit/s (local loop through the GSR, no ATM switch)",
        ),
    ];
    let mut out = String::from(
        "| run | report's figure | imp | policer drops | share of bound |\n|---|---|---|---|---|\n",
    );
    for (name, run, figure) in rows {
        let f = flow(r, name)?;
        let unfinished = if f.completed { "" } else { "+" };
        let imp = format!(
            "{:.0} Mbit/s ({:.1}{unfinished} s)",
            mbit(f.goodput_bps),
            f.seconds
        );
        let drops = police_drops(r, f)?.to_string();
        let share = format!("{:.1}%", f.bound_pct);
        push_row(&mut out, &[run, figure, &imp, &drops, &share]);
    }
    let bound = flow(r, "scr-unpoliced")?.bound_bps;
    let _ = writeln!(
        out,
        "\nBound: {:.1} Mbit/s (the line); the SCR of 518.7 Mbit/s allows {:.1} Mbit/s of TCP payload.",
        mbit(bound),
        mbit(bound) * 518.7 / 544.092
    );
    Ok(out)
}

fn seed003(r: &Report) -> Result<String, String> {
    // (flow, run, 1990 figure, the report's optimum in bytes/s, its name in the bound column)
    let rows = [
        (
            "good-9600-large-window",
            "good TCP, 9600, large window (8 KB)",
            "80-95% of 768",
            768.0,
            true,
        ),
        (
            "good-9600-small-window",
            "good TCP, 9600, small window (384 B)",
            "80-95% of 768",
            768.0,
            false,
        ),
        ("good-1200", "good TCP, 1200", "73-92 B/s", 96.0, false),
        (
            "vm-like-9600",
            "IBM VM, 9600 (imp: the vm-1990 model)",
            "299-382 B/s (about 45%)",
            768.0,
            false,
        ),
        (
            "vm-like-1200",
            "IBM VM, 1200 (imp: the vm-1990 model)",
            "49-54 B/s",
            96.0,
            false,
        ),
        (
            "good-9600-list",
            "good TCP, 9600, LIST of 200 files",
            "(none given)",
            768.0,
            false,
        ),
        (
            "vm-like-list",
            "IBM VM, 9600, LIST of 200 files (vm-1990)",
            "\"excruciatingly slow\"",
            768.0,
            false,
        ),
    ];
    let mut out = String::from("| run | 1990 figure | imp | bound |\n|---|---|---|---|\n");
    for (name, run, figure, optimum, named) in rows {
        let f = flow(r, name)?;
        let bound = f.bound_bps / 8.0;
        let bound_text = if named {
            format!("{optimum:.0} (report), {bound:.0} (imp)")
        } else {
            format!("{optimum:.0}, {bound:.0}")
        };
        let imp = format!(
            "{} B/s ({:.0}% of {optimum:.0}, {:.0}% of bound)",
            significant(f.goodput_bytes_per_s, 3),
            100.0 * f.goodput_bytes_per_s / optimum,
            f.bound_pct
        );
        push_row(&mut out, &[run, figure, &imp, &bound_text]);
    }
    out.push('\n');
    out.push_str(&seed003_judgement(r, &rows.map(|row| (row.0, row.1)))?);
    Ok(out)
}

/// Seed 003's ping to NIC.DDN.MIL: srtt, mdev and the share of requests lost.
fn seed003_nic_ping(r: &Report) -> Result<String, String> {
    let f = flow(r, "nic-ping")?;
    let smoothed = f.ping_smoothed.unwrap_or_default();
    let sent = f.pings_sent.unwrap_or(0);
    let received = f.pings_received.unwrap_or(0);
    let lost = sent - received;
    let mut out = String::from("| figure | 1990 | imp |\n|---|---|---|\n");
    let srtt = format!("{:.3} s", smoothed.srtt_ms / 1e3);
    let mdev = format!("{:.3} s", smoothed.mdev_ms / 1e3);
    let loss = format!(
        "{lost} of {sent} ({:.0}%)",
        100.0 * f64::from(lost) / f64::from(sent.max(1))
    );
    push_row(&mut out, &["srtt", "2.420 s", &srtt]);
    push_row(&mut out, &["mdev", "0.605 s", &mdev]);
    push_row(&mut out, &["requests lost", "2/3", &loss]);
    Ok(out)
}

/// Seed 003's criteria ("less than MSS sized packets, too many retransmissions,
/// timeouts of 20 seconds or more, and failure to combine ACKs with bidirectional
/// data") judged by `imp analyze` on each flow's capture: the sender's data, the
/// receiver's ACKs.
fn seed003_judgement(r: &Report, rows: &[(&str, &str)]) -> Result<String, String> {
    let mut out = String::from(
        "| run | segments below MSS | retransmissions (spurious) | RTOs | longest stall | receiver's ACKs pure / on data | sender's control ACKs alone / on data | RTT min/avg/max | goodput | verdict |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (name, run) in rows {
        let f = flow(r, name)?;
        let a = f
            .analysis
            .as_ref()
            .ok_or_else(|| format!("flow `{name}` has no analysis"))?;
        let [data, acks] = &a.directions;
        let rtt = &data.rtt_ms;
        // The sender is the FTP server: the second direction of the control connection.
        let control = f.control_analysis.as_ref().map(|c| &c.directions[1]);
        let verdict = seed003_verdict(data, control);
        push_row(
            &mut out,
            &[
                run,
                &format!("{} of {}", data.segments_below_mss, data.data_segments),
                &format!(
                    "{} ({})",
                    data.retransmissions, data.spurious_retransmissions
                ),
                &data.rtos.to_string(),
                &format!("{:.1} s", data.longest_stall_ms / 1e3),
                &format!("{} / {}", acks.pure_acks, acks.piggybacked_acks),
                &control.map_or("-".to_string(), |c| {
                    format!("{} / {}", c.uncombined_acks, c.combined_acks)
                }),
                &format!("{:.0}/{:.0}/{:.0} ms", rtt.min, rtt.avg, rtt.max),
                &format!("{} B/s", significant(data.goodput_bps / 8.0, 3)),
                &verdict,
            ],
        );
    }
    Ok(out)
}

/// The sender's failings by seed 003's criteria: from its data connection, and the
/// ACKs of its FTP control connection.
fn seed003_verdict(
    data: &crate::analyze::Direction,
    control: Option<&crate::analyze::Direction>,
) -> String {
    let v = data.verdict;
    let uncombined = v.uncombined_acks || control.is_some_and(|c| c.verdict.uncombined_acks);
    let failings: Vec<&str> = [
        (v.small_segments, "small segments"),
        (v.too_many_retransmissions, "needless retransmissions"),
        (v.long_timeouts, "20 s timeouts"),
        (uncombined, "ACKs not combined"),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .map(|(_, name)| *name)
    .collect();
    if failings.is_empty() {
        "none".to_string()
    } else {
        failings.join(", ")
    }
}

fn seed004(r: &Report) -> Result<String, String> {
    let policies = [
        ("timer", "timer (500 ms)"),
        ("immediate", "immediate"),
        ("delayed", "delayed (40 ms)"),
    ];
    let figures: [(u32, [&str; 3]); 3] = [
        (
            1,
            [
                "(1976 measured 10-70 characters:)",
                "forced ACKs: 2.5-3.1 (Tables VI, VII)",
                "no forced ACKs: 4.7-4.8 (Table VIII); tuned 5.7-6.6 (Table IX)",
            ],
        ),
        (90, ["", "2.5-3.1", "4.7-6.6"]),
        (972, ["", "", ""]),
    ];
    let mut out = String::from(
        "| letter | ACK policy | 1976 figure | imp | bound |\n|---|---|---|---|---|\n",
    );
    for (size, row_figures) in figures {
        for ((policy, label), figure) in policies.iter().zip(row_figures) {
            let f = flow(r, &format!("{policy}-{size}"))?;
            let letter = if size == 1 {
                "1 byte".to_string()
            } else {
                format!("{size} bytes")
            };
            let piggy = if size == 1 && *policy == "delayed" {
                ", piggy-backed"
            } else {
                ""
            };
            push_row(
                &mut out,
                &[
                    &letter,
                    &format!("{label}{piggy}"),
                    figure,
                    &significant(f.transactions_per_s.unwrap_or(0.0), 3),
                    &significant(f.transactions_bound_per_s.unwrap_or(0.0), 3),
                ],
            );
        }
    }
    out.push_str(&seed004_table_vi(r)?);
    Ok(out)
}

/// One row of a 1975-1976 table run on the exerciser with the 1975 CPU model: the
/// flow, its settings as the report gives them, and the report's letters a minute (a
/// range where two runs differ only by what the model does not have, the user's
/// priority) and retransmissions a minute.
pub struct Run1975 {
    /// The flow (and `x-`, `e-` hosts, `imp-` link) in `004-selfloop-letters.toml`.
    pub flow: &'static str,
    /// ACKs: "timer" (on the retransmission process's wakeup) or "forced".
    pub acks: &'static str,
    /// Letters in the pipeline (on the send queue).
    pub pipeline: u32,
    /// Letter length in characters.
    pub letter: u32,
    /// Retransmission timeout and wakeup, as printed.
    pub timeout: &'static str,
    /// The retransmission process's wakeup, as printed.
    pub wakeup: &'static str,
    /// The report's letters a minute: lowest and highest.
    pub letters: (f64, f64),
    /// The report's retransmissions a minute (Table VI only).
    pub retransmits: Option<(u32, u32)>,
}

const fn run(
    flow: &'static str,
    acks: &'static str,
    (pipeline, letter): (u32, u32),
    (timeout, wakeup): (&'static str, &'static str),
    letters: (f64, f64),
    retransmits: Option<(u32, u32)>,
) -> Run1975 {
    Run1975 {
        flow,
        acks,
        pipeline,
        letter,
        timeout,
        wakeup,
        letters,
        retransmits,
    }
}

/// Table VI (17 November 1975), row by row (the two priorities of the 4 s groups as a
/// range). The last row "blew up after running out of message storage" at 27 letters.
pub const TABLE_VI: [Run1975; 11] = [
    run(
        "t6-timer-p2",
        "timer",
        (2, 10),
        ("0.5 s", "0.5 s"),
        (176.0, 176.0),
        Some((72, 72)),
    ),
    run(
        "t6-timer-p2-w25",
        "timer",
        (2, 10),
        ("0.5 s", "0.25 s"),
        (171.0, 171.0),
        Some((72, 72)),
    ),
    run(
        "t6-timer-p3",
        "timer",
        (3, 10),
        ("0.5 s", "0.5 s"),
        (119.0, 119.0),
        Some((172, 172)),
    ),
    run(
        "t6-timer-p3-w25",
        "timer",
        (3, 10),
        ("0.5 s", "0.25 s"),
        (139.0, 139.0),
        Some((148, 148)),
    ),
    run(
        "t6-forced-p2",
        "forced",
        (2, 10),
        ("0.5 s", "0.5 s"),
        (108.0, 108.0),
        Some((113, 113)),
    ),
    run(
        "t6-forced-p2-w25",
        "forced",
        (2, 10),
        ("0.5 s", "0.25 s"),
        (107.0, 107.0),
        Some((114, 114)),
    ),
    run(
        "t6-forced-p3",
        "forced",
        (3, 10),
        ("0.5 s", "0.5 s"),
        (81.0, 81.0),
        Some((187, 187)),
    ),
    run(
        "t6-forced-p3-w25",
        "forced",
        (3, 10),
        ("0.5 s", "0.25 s"),
        (76.0, 76.0),
        Some((182, 182)),
    ),
    run(
        "t6-forced-p3-4s",
        "forced",
        (3, 10),
        ("4 s", "4 s"),
        (173.0, 178.0),
        Some((0, 0)),
    ),
    run(
        "t6-forced-p3-4s-70",
        "forced",
        (3, 70),
        ("4 s", "4 s"),
        (164.0, 170.0),
        Some((0, 0)),
    ),
    run(
        "t6-forced-p5-4s",
        "forced",
        (5, 10),
        ("4 s", "4 s"),
        (170.0, 170.0),
        Some((1, 1)),
    ),
];

/// Tables VII (29 December 1975, forced ACKs; the 60 s line), VIII (30 December, no
/// forced ACKs; 150 s, as letters a minute) and IX (31 December, Table VIII's settings
/// after the TCP's "pick send connection" and "pick receive connection" were rewritten;
/// the 60 s line): (table, run).
pub const TABLES_VII_IX: [(&str, Run1975); 10] = [
    (
        "VII",
        run(
            "t7-10-p1",
            "forced",
            (1, 10),
            ("0.5 s", "0.5 s"),
            (151.0, 151.0),
            None,
        ),
    ),
    (
        "VII",
        run(
            "t7-10-p1-4s",
            "forced",
            (1, 10),
            ("4 s", "4 s"),
            (155.0, 155.0),
            None,
        ),
    ),
    (
        "VII",
        run(
            "t7-10-p3-4s",
            "forced",
            (3, 10),
            ("4 s", "4 s"),
            (188.0, 188.0),
            None,
        ),
    ),
    (
        "VII",
        run(
            "t7-50-p1",
            "forced",
            (1, 50),
            ("0.5 s", "0.5 s"),
            (148.0, 148.0),
            None,
        ),
    ),
    (
        "VII",
        run(
            "t7-50-p1-4s",
            "forced",
            (1, 50),
            ("4 s", "4 s"),
            (152.0, 152.0),
            None,
        ),
    ),
    (
        "VII",
        run(
            "t7-50-p3-4s",
            "forced",
            (3, 50),
            ("4 s", "4 s"),
            (180.0, 180.0),
            None,
        ),
    ),
    (
        "VIII",
        run(
            "t8-10-p3-4s",
            "timer",
            (3, 10),
            ("4 s", "4 s"),
            (288.0, 288.0),
            None,
        ),
    ),
    (
        "VIII",
        run(
            "t8-50-p3-4s",
            "timer",
            (3, 50),
            ("4 s", "4 s"),
            (256.0, 256.0),
            None,
        ),
    ),
    (
        "IX",
        run(
            "t8-10-p3-4s",
            "timer",
            (3, 10),
            ("4 s", "4 s"),
            (386.0, 386.0),
            None,
        ),
    ),
    (
        "IX",
        run(
            "t8-50-p3-4s",
            "timer",
            (3, 50),
            ("4 s", "4 s"),
            (340.0, 340.0),
            None,
        ),
    ),
];

/// What imp's run of a [`Run1975`] gave.
#[derive(Debug, Clone, Copy)]
pub struct Measured1975 {
    /// Letters a minute (letters in the run over its minutes).
    pub letters_per_min: f64,
    /// Retransmissions a minute, both ends (the two halves of the looped connection).
    pub retransmits_per_min: f64,
    /// ACKs sent by the retransmission process's wakeup a minute, both ends.
    pub process_acks_per_min: f64,
    /// The exerciser's CPU busy, %.
    pub busy_pct: Option<f64>,
    /// Frames the exerciser sent per letter.
    pub frames_per_letter: f64,
}

/// imp's figures for `run` in report `r`.
pub fn measured_1975(r: &Report, run: &Run1975) -> Result<Measured1975, String> {
    let f = flow(r, run.flow)?;
    let minutes = (f.seconds / 60.0).max(1e-9);
    let letters = f.transactions.unwrap_or(0);
    let link = r
        .links
        .iter()
        .find(|l| l.name == format!("imp-{}", run.flow))
        .ok_or_else(|| format!("no link imp-{}", run.flow))?;
    let frames = link.directions.first().map_or(0, |d| d.submitted);
    let ends = [format!("x-{}", run.flow), format!("e-{}", run.flow)];
    let (retransmits, acks) = r
        .hosts
        .iter()
        .filter(|h| ends.contains(&h.name))
        .fold((0, 0), |(re, ack), h| {
            (re + h.retransmitted, ack + h.delayed_acks)
        });
    Ok(Measured1975 {
        letters_per_min: letters as f64 / minutes,
        retransmits_per_min: retransmits as f64 / minutes,
        process_acks_per_min: acks as f64 / minutes,
        busy_pct: f.cpu.as_ref().and_then(|c| c.sender_busy_pct),
        frames_per_letter: if letters > 0 {
            frames as f64 / letters as f64
        } else {
            0.0
        },
    })
}

/// imp's letters over the report's, against the report's lowest and highest.
fn ratio(imp: f64, (lo, hi): (f64, f64)) -> String {
    if (hi - lo).abs() < f64::EPSILON {
        format!("{:.2}", imp / lo)
    } else {
        format!("{:.2}-{:.2}", imp / hi, imp / lo)
    }
}

fn range(lo: f64, hi: f64) -> String {
    if (hi - lo).abs() < f64::EPSILON {
        format!("{lo:.0}")
    } else {
        format!("{lo:.0}-{hi:.0}")
    }
}

/// Table VI's settings on the exerciser with the 1975 CPU model, then Tables VII-IX.
fn seed004_table_vi(r: &Report) -> Result<String, String> {
    let mut out = String::from(
        "\nTable VI (17 November 1975), the exerciser with the 1975 CPU model (`elf-1975`, from \
         Table V), 60 s; letters and retransmissions a minute:\n\n\
         | ACKs | in pipeline | letter | timeout | wakeup | 1975 letters | imp letters | \
         imp / 1975 | 1975 retransmissions | imp retransmissions | imp ACKs on wakeup | \
         exerciser CPU busy | frames per letter |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for run in &TABLE_VI {
        let m = measured_1975(r, run)?;
        let busy = m.busy_pct.map_or(String::new(), |b| format!("{b:.0}%"));
        push_row(
            &mut out,
            &[
                run.acks,
                &run.pipeline.to_string(),
                &run.letter.to_string(),
                run.timeout,
                run.wakeup,
                &range(run.letters.0, run.letters.1),
                &format!("{:.0}", m.letters_per_min),
                &ratio(m.letters_per_min, run.letters),
                &run.retransmits.map_or(String::new(), |(lo, hi)| {
                    range(f64::from(lo), f64::from(hi))
                }),
                &format!("{:.0}", m.retransmits_per_min),
                &format!("{:.0}", m.process_acks_per_min),
                &busy,
                &format!("{:.2}", m.frames_per_letter),
            ],
        );
    }
    out.push_str(
        "\nTables VII-IX (29-31 December 1975) on the same model; letters a minute (Table \
         VIII's 150 s runs scaled to a minute; Table IX's settings are Table VIII's):\n\n\
         | table | ACKs | in pipeline | letter | timeout | 1975 letters | imp letters | \
         imp / 1975 | imp retransmissions |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for (table, run) in &TABLES_VII_IX {
        let m = measured_1975(r, run)?;
        push_row(
            &mut out,
            &[
                table,
                run.acks,
                &run.pipeline.to_string(),
                &run.letter.to_string(),
                run.timeout,
                &range(run.letters.0, run.letters.1),
                &format!("{:.0}", m.letters_per_min),
                &ratio(m.letters_per_min, run.letters),
                &format!("{:.0}", m.retransmits_per_min),
            ],
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn significant_digits() {
        assert_eq!(significant(93.40, 3), "93.4");
        assert_eq!(significant(5.98, 3), "5.98");
        assert_eq!(significant(1191.4, 3), "1191");
        assert_eq!(significant(0.2512, 2), "0.25");
        assert_eq!(significant(25.46, 2), "25");
    }

    #[test]
    fn rows_keep_empty_cells_narrow() {
        let mut out = String::new();
        push_row(&mut out, &["a", "", "c"]);
        assert_eq!(out, "| a | | c |\n");
    }

    #[test]
    fn blocks_are_found_and_replaced() {
        let readme = format!(
            "intro\n{}\nold table\n{END_MARKER}\nafter\n",
            begin_marker("x.toml")
        );
        assert_eq!(committed(&readme, "x.toml"), Some("old table\n"));
        assert_eq!(committed(&readme, "y.toml"), None);
        let new = replace(&readme, "x.toml", "new\n").unwrap();
        assert_eq!(
            new,
            format!(
                "intro\n{}\nnew\n{END_MARKER}\nafter\n",
                begin_marker("x.toml")
            )
        );
    }
}
