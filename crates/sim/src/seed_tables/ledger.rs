//! The figures ledger of `scenarios/seeds/README.md`: every figure of a seed document
//! the README quotes, the seed's value beside imp's, whether imp's comes from a model
//! (predicted) or is an input (fitted to it, or a cost the seed measured, taken as it
//! stands), and for a predicted figure more than 20% off, why. Generated from the runs
//! that generate the README's tables, and checked by the same tests.

use std::fmt::Write;

use crate::experiment::Report;

use super::{Run1975, TABLE_VI, TABLES_VII_IX, flow, measured_1975, significant};

/// How imp's figure relates to the seed's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Predicted by the model; more than 20% off needs a reason.
    Model,
    /// Fitted to this figure (a seed's one fitted figure; two for seed 001).
    Fitted,
    /// A cost or a setting the seed states, given to the model as it stands.
    Given,
    /// Not run: the reason says why.
    NotRun,
}

impl Role {
    fn label(self) -> &'static str {
        match self {
            Role::Model => "model",
            Role::Fitted => "input (fitted)",
            Role::Given => "input (the seed's own figure, as it stands)",
            Role::NotRun => "not run",
        }
    }
}

/// One figure of a seed document, as the ledger shows it.
#[derive(Debug, Clone)]
pub struct Figure {
    /// The seed: "000" to "004".
    pub seed: &'static str,
    /// What the figure is.
    pub what: String,
    /// The seed's value as the seed gives it.
    pub value: String,
    /// The seed's value as a number, or the lowest and highest of its range.
    pub range: (f64, f64),
    /// imp's value (None: not run).
    pub imp: Option<f64>,
    /// imp's value as shown (with its unit).
    pub imp_text: String,
    /// Model or input.
    pub role: Role,
    /// Why a model figure is more than 20% off (or why it is not run); shown only then.
    pub why: &'static str,
}

impl Figure {
    /// A figure `what` whose seed value `value` is `range`, imp's `imp` shown as
    /// `imp_text`.
    pub fn new(
        seed: &'static str,
        what: impl Into<String>,
        (value, range): (&str, (f64, f64)),
        (imp, imp_text): (f64, String),
        role: Role,
        why: &'static str,
    ) -> Figure {
        Figure {
            seed,
            what: what.into(),
            value: value.to_string(),
            range,
            imp: Some(imp),
            imp_text,
            role,
            why,
        }
    }

    /// imp's value over the seed's: 1 inside the seed's range, else over the nearer
    /// end.
    pub fn ratio(&self) -> Option<f64> {
        let imp = self.imp?;
        let (lo, hi) = self.range;
        Some(if imp < lo {
            imp / lo
        } else if imp > hi {
            imp / hi
        } else {
            1.0
        })
    }

    /// Within 20% of the seed's value (or inside its range).
    pub fn within_20(&self) -> bool {
        self.ratio().is_some_and(|r| (0.8..=1.2).contains(&r))
    }
}

/// The ledger's table in Markdown: a model figure's reason shows only when
/// it is more than 20% off, and such a figure without a reason is an error (so the
/// ledger stays true when the figures move).
pub fn rows_markdown(rows: &[Figure]) -> Result<String, String> {
    let mut out = String::from(HEADER);
    for f in rows {
        let ratio = match (f.ratio(), f.range.0 < f.range.1) {
            (None, _) => "-".to_string(),
            (Some(r), true) if (r - 1.0).abs() < f64::EPSILON => "in range".to_string(),
            (Some(r), _) => format!("{r:.2}"),
        };
        let needs_reason = match f.role {
            Role::Model => !f.within_20(),
            Role::NotRun => true,
            Role::Fitted | Role::Given => false,
        };
        if needs_reason && f.why.is_empty() {
            return Err(format!(
                "seed {} `{}`: imp {} against {} is more than 20% off and the ledger \
                 gives no reason",
                f.seed, f.what, f.imp_text, f.value
            ));
        }
        let why = if needs_reason || f.role != Role::Model {
            f.why
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {ratio} | {} | {why} |",
            f.seed,
            f.what,
            f.value,
            f.imp_text,
            f.role.label()
        );
    }
    Ok(out)
}

/// The ledger's header row.
pub const HEADER: &str = "| seed | figure | seed's value | imp | imp / seed | imp's figure is | why more than 20% off (or what the input is) |\n|---|---|---|---|---|---|---|\n";

/// The marker line that opens the ledger block for `source` (a scenario file, or
/// `test_plan`).
pub fn begin_marker(source: &str) -> String {
    format!("<!-- BEGIN generated: ledger of {source} -->")
}

/// The ledger rows of a seed scenario's run (None for a scenario without ledger
/// rows).
pub fn ledger(r: &Report) -> Option<Result<String, String>> {
    let rows = match r.scenario.as_str() {
        "seed000-vax-ethernet" => seed000(r),
        "seed001-text-vs-binary" => seed001(r),
        "seed002-oc12-sack" => seed002(r),
        "seed002-oc12-policing" => seed002_policing(r),
        "seed003-noisy-serial" => seed003(r),
        "seed003-nic-ping" => seed003_ping(r),
        "seed004-selfloop" => Ok(seed004(r)),
        _ => return None,
    };
    Some(rows.and_then(|rows| rows_markdown(&rows)))
}

fn mbit(v: f64) -> String {
    format!("{} Mbit/s", significant(v, 3))
}

fn seed000(r: &Report) -> Result<Vec<Figure>, String> {
    let mut rows = Vec::new();
    for (i, rung) in r.ladder.iter().enumerate() {
        let Some(seed) = rung.seed_mbit else { continue };
        rows.push(Figure::new(
            "000",
            format!("rung: {}", rung.step),
            (&format!("{seed} Mbit/s"), (seed, seed)),
            (rung.imp_mbit, mbit(rung.imp_mbit)),
            if i == 0 { Role::Fitted } else { Role::Model },
            "",
        ));
    }
    let measured = flow(r, "3mb-1024")?;
    let idle = 100.0
        - measured
            .cpu
            .as_ref()
            .and_then(|c| c.receiver_busy_pct)
            .unwrap_or(100.0);
    rows.push(Figure::new(
        "000",
        "the 11/780 receiver's idle time",
        ("about 30%", (30.0, 30.0)),
        (idle, format!("{idle:.0}%")),
        Role::Model,
        "",
    ));
    Ok(rows)
}

fn seed001(r: &Report) -> Result<Vec<Figure>, String> {
    let mut rows = Vec::new();
    for (name, row, figure, role) in super::SEED001_RATES {
        let kb = flow(r, name)?.goodput_bytes_per_s / 1e3;
        rows.push(Figure::new(
            "001",
            row,
            (&format!("{figure} kB/s"), (figure, figure)),
            (kb, format!("{} kB/s", significant(kb, 3))),
            if role == "fitted" {
                Role::Fitted
            } else {
                Role::Model
            },
            "",
        ));
    }
    for (name, row, figure) in super::SEED001_MESSAGES {
        let per_s = super::seed001_messages_per_s(flow(r, name)?).unwrap_or(0.0);
        rows.push(Figure::new(
            "001",
            format!("packets/s, {row}"),
            (&format!("{figure}"), (figure, figure)),
            (per_s, significant(per_s, 3)),
            Role::Model,
            "",
        ));
    }
    for (binary, text, what, figure) in [
        ("1985-binary", "1985-text", "binary/text, UNIX 750", 4.75),
        ("lispm-binary", "lispm-text", "binary/text, LISPM", 3.2),
    ] {
        let ratio = flow(r, binary)?.goodput_bps / flow(r, text)?.goodput_bps;
        rows.push(Figure::new(
            "001",
            what,
            (&format!("{figure}"), (figure, figure)),
            (ratio, format!("{ratio:.2}")),
            if binary == "1985-binary" {
                Role::Fitted
            } else {
                Role::Model
            },
            if binary == "1985-binary" {
                "the quotient of the two fitted rows"
            } else {
                ""
            },
        ));
    }
    rows.extend(seed001_given());
    Ok(rows)
}

/// Seed 001's costs given as they stand, and the row not run.
fn seed001_given() -> Vec<Figure> {
    let mut rows = Vec::new();
    for (what, value, imp) in [
        (
            "LOCAL FILE read (the server's `file_byte`)",
            "62.5 kB/s",
            "16.0 us a byte",
        ),
        (
            "TIME-V2 three-process chain (`handoff`)",
            "19.1 cycles/s",
            "52.4 ms a message",
        ),
        (
            "COPY-ARRAY-PORTION (`frame_byte`)",
            "114 kB/s",
            "8.77 us a byte",
        ),
    ] {
        rows.push(Figure {
            seed: "001",
            what: what.to_string(),
            value: value.to_string(),
            range: (1.0, 1.0),
            imp: None,
            imp_text: imp.to_string(),
            role: Role::Given,
            why: "a cost the report measured by itself, given to the model as it stands",
        });
    }
    rows.push(Figure {
        seed: "001",
        what: "EX CHAOS, UNIX 750".to_string(),
        value: "0.7 kB/s".to_string(),
        range: (0.7, 0.7),
        imp: None,
        imp_text: "-".to_string(),
        role: Role::NotRun,
        why: "the report puts it down to frames lost for want of receive buffers and gross \
              retransmission on the UNIX side; its Chaosnet driver is not modelled",
    });
    rows
}

fn seed002(r: &Report) -> Result<Vec<Figure>, String> {
    let mut rows = Vec::new();
    for (name, what, value, range) in [
        (
            "nosack",
            "no SACK, cell loss",
            "150-300 Mbit/s",
            (150.0, 300.0),
        ),
        ("sack", "SACK, cell loss", "300-480 Mbit/s", (300.0, 480.0)),
        (
            "slowstart-1g",
            "no loss (local loop through the GSR)",
            "513 Mbit/s",
            (513.0, 513.0),
        ),
    ] {
        let m = flow(r, name)?.goodput_bps / 1e6;
        rows.push(Figure::new(
            "002",
            format!("`002-oc12-sack.toml`: {what}"),
            (value, range),
            (m, format!("{m:.0} Mbit/s")),
            Role::Model,
            "",
        ));
    }
    let (g1, m100) = (flow(r, "slowstart-1g")?, flow(r, "slowstart-100m")?);
    let wasted = |f: &crate::experiment::FlowReport| f.seconds - f.bytes as f64 * 8.0 / f.bound_bps;
    let (w1, w100) = (wasted(g1), wasted(m100));
    rows.push(Figure::new(
        "002",
        "slow start's wasted time",
        ("0.54 s (11 round trips)", (0.54, 0.54)),
        (w1, format!("{w1:.3} s")),
        Role::Model,
        "imp's slow start begins at 10 segments (RFC 6928), the 1998 TCP's at 1 or 2: fewer \
         round trips",
    ));
    for (size, bytes, w, (min_s, share), why_min, why_share) in [
        ("10 GB", 10 * g1.bytes, w1, (178.0, 0.30), "", ""),
        ("1 GB", g1.bytes, w1, (18.2, 2.9), "", ""),
        (
            "100 MB",
            m100.bytes,
            w100,
            (2.31, 23.4),
            "the report's 100 MB time includes its 0.54 s of slow start; imp's minimum is \
             size over the bound",
            "",
        ),
    ] {
        let min = bytes as f64 * 8.0 / g1.bound_bps;
        let imp_share = 100.0 * w / min;
        rows.push(Figure::new(
            "002",
            format!("slow-start table, {size}: minimum time"),
            (&format!("{min_s} s"), (min_s, min_s)),
            (min, format!("{} s", significant(min, 3))),
            Role::Model,
            why_min,
        ));
        rows.push(Figure::new(
            "002",
            format!("slow-start table, {size}: share wasted"),
            (&format!("{share}%"), (share, share)),
            (imp_share, format!("{}%", significant(imp_share, 2))),
            Role::Model,
            why_share,
        ));
    }
    Ok(rows)
}

fn seed002_policing(r: &Report) -> Result<Vec<Figure>, String> {
    let ignored = flow(r, "scr-ignored")?;
    let honoured = flow(r, "scr-honoured")?;
    let m = ignored.goodput_bps / 1e6;
    let drops = super::police_drops(r, ignored)? as f64;
    Ok(vec![
        Figure::new(
            "002",
            "`002-oc12-policing.toml`: SCR ignored (the bug)",
            ("300-480 Mbit/s", (300.0, 480.0)),
            (m, format!("{m:.0} Mbit/s")),
            Role::Model,
            "",
        ),
        Figure::new(
            "002",
            "SCR ignored: packets lost per test",
            ("3-4 per 3-5 min test", (3.0, 4.0)),
            (
                drops,
                format!("{drops:.0} policer drops in {:.0} s", ignored.seconds),
            ),
            Role::Model,
            "the contract's SCR and MBS are assumed (the report gives neither); the drops \
             follow from them",
        ),
        Figure::new(
            "002",
            "shaped to the contract (the fix): share of the line",
            ("572 of 600 (95%)", (95.0, 95.0)),
            (
                honoured.bound_pct,
                format!("{:.1}% of the bound", honoured.bound_pct),
            ),
            Role::Model,
            "",
        ),
    ])
}

fn seed003(r: &Report) -> Result<Vec<Figure>, String> {
    let mut rows = Vec::new();
    for (name, what, value, range, per) in [
        (
            "good-9600-large-window",
            "good TCP, 9600, 8 KB window",
            "80-95% of 768",
            (80.0, 95.0),
            768.0,
        ),
        (
            "good-9600-small-window",
            "good TCP, 9600, 384 B window",
            "80-95% of 768",
            (80.0, 95.0),
            768.0,
        ),
        (
            "good-1200",
            "good TCP, 1200",
            "73-92 B/s",
            (73.0, 92.0),
            0.0,
        ),
        (
            "vm-like-9600",
            "IBM VM, 9600 (vm-1990 model)",
            "299-382 B/s",
            (299.0, 382.0),
            0.0,
        ),
        (
            "vm-like-1200",
            "IBM VM, 1200 (vm-1990 model)",
            "49-54 B/s",
            (49.0, 54.0),
            0.0,
        ),
    ] {
        let b = flow(r, name)?.goodput_bytes_per_s;
        let (imp, text) = if per > 0.0 {
            (
                100.0 * b / per,
                format!("{:.0}% ({} B/s)", 100.0 * b / per, significant(b, 3)),
            )
        } else {
            (b, format!("{} B/s", significant(b, 3)))
        };
        rows.push(Figure::new(
            "003",
            what,
            (value, range),
            (imp, text),
            Role::Model,
            "",
        ));
    }
    seed003_vm(r, &mut rows)?;
    Ok(rows)
}

/// Seed 003's optimal bandwidths, the VM's timeouts and its transmission timeout.
fn seed003_vm(r: &Report, rows: &mut Vec<Figure>) -> Result<(), String> {
    for (name, value, figure) in [
        ("good-9600-small-window", "768 B/s", 768.0),
        ("good-1200", "96 B/s", 96.0),
    ] {
        let bound = flow(r, name)?.bound_bps / 8.0;
        rows.push(Figure::new(
            "003",
            format!(
                "optimal transfer bandwidth at {}",
                if figure > 100.0 { 9600 } else { 1200 }
            ),
            (value, (figure, figure)),
            (
                bound,
                format!("{bound:.0} B/s (imp's bound, 232-byte packets)"),
            ),
            Role::Model,
            "",
        ));
    }
    let vm = flow(r, "vm-like-9600")?;
    let timeout = vm
        .analysis
        .as_ref()
        .map_or(0.0, |a| a.directions[0].longest_timeout_ms / 1e3);
    rows.push(Figure::new(
        "003",
        "the VM's timeouts",
        ("20 s or more", (20.0, f64::INFINITY)),
        (
            timeout,
            format!("{timeout:.1} s (longest silence before a retransmission)"),
        ),
        Role::Model,
        "RFC 793's RTO (BETA 2, 1 s floor) on 0.15-1.9 s round trips gives a few seconds, \
         and this noise never backs one segment off four times in a row",
    ));
    rows.push(Figure {
        seed: "003",
        what: "the transmission timeout (`crates/sim/tests/transmission_timeout.rs`)".to_string(),
        value: "10 minutes".to_string(),
        range: (600.0, 600.0),
        imp: None,
        imp_text: "the vm-1990 model's user timeout, 600 s".to_string(),
        role: Role::Given,
        why: "a setting the report states (RFC 793's user timeout); the abort and `imp \
              analyze`'s verdict on it come out of the run",
    });
    Ok(())
}

fn seed003_ping(r: &Report) -> Result<Vec<Figure>, String> {
    let f = flow(r, "nic-ping")?;
    let s = f.ping_smoothed.unwrap_or_default();
    let sent = f.pings_sent.unwrap_or(0);
    let lost = sent - f.pings_received.unwrap_or(0);
    let share = f64::from(lost) / f64::from(sent.max(1));
    Ok(vec![
        Figure::new(
            "003",
            "NIC.DDN.MIL ping: srtt",
            ("2.420 s", (2.42, 2.42)),
            (s.srtt_ms / 1e3, format!("{:.3} s", s.srtt_ms / 1e3)),
            Role::Model,
            "",
        ),
        Figure::new(
            "003",
            "NIC.DDN.MIL ping: mdev",
            ("0.605 s", (0.605, 0.605)),
            (s.mdev_ms / 1e3, format!("{:.3} s", s.mdev_ms / 1e3)),
            Role::Model,
            "the crowd is three constant-rate streams, so the queue stays full and steady; \
             the 1990 load was burstier (its shape is not fitted)",
        ),
        Figure::new(
            "003",
            "NIC.DDN.MIL ping: lost",
            ("2/3", (2.0 / 3.0, 2.0 / 3.0)),
            (share, format!("{lost} of {sent}")),
            Role::Fitted,
            "",
        ),
    ])
}

fn run_1975_row(r: &Report, table: &str, run: &Run1975, rows: &mut Vec<Figure>) {
    let Ok(m) = measured_1975(r, run) else { return };
    let settings = format!(
        "Table {table}, {} ACKs, {} in pipeline, {} characters, {} timeout{}",
        run.acks,
        run.pipeline,
        run.letter,
        run.timeout,
        if run.wakeup == run.timeout {
            String::new()
        } else {
            format!(", {} wakeup", run.wakeup)
        }
    );
    let (lo, hi) = run.letters;
    let value = if (hi - lo).abs() < f64::EPSILON {
        format!("{lo:.0}")
    } else {
        format!("{lo:.0}-{hi:.0}")
    };
    let timer = run.acks == "timer" && run.timeout == "0.5 s";
    let why = if timer {
        TIMER_WHY
    } else if run.acks == "forced" && run.timeout == "0.5 s" && run.pipeline == 2 {
        "a letter's ACK comes back within 0.5 s of CPU, so nothing is resent; the 1975 \
         self-loop's longer chain (the same CPU received the letter and made its ACK) is \
         not in the echo pair"
    } else if run.acks == "forced" && run.timeout == "0.5 s" && run.pipeline == 3 {
        "the collapse comes out, shallower: each letter's work is shorter in the echo pair \
         than in the 1975 self-loop (see the section on 004)"
    } else if run.pipeline == 5 {
        "five letters on a busy CPU: at times one waits over 4 s and is resent (1975: 1); \
         the letters are CPU time alone, as in the other 4 s rows"
    } else if table == "IX" {
        "Table IX's TCP was made faster (\"pick send connection\" rewritten); the model has \
         no such cost, its row is Table VIII's"
    } else {
        "CPU time alone: Table V's budget is less than the 1975 machine spent a letter \
         (RECEIVE after the budget's end, the RTP's HELLOs, null packets and RFNMs); not \
         fitted"
    };
    rows.push(Figure::new(
        "004",
        format!("{settings}: letters a minute"),
        (&value, run.letters),
        (m.letters_per_min, format!("{:.0}", m.letters_per_min)),
        Role::Model,
        why,
    ));
    if let Some((lo, hi)) = run.retransmits {
        let (lo, hi) = (f64::from(lo), f64::from(hi));
        let r = m.retransmits_per_min;
        rows.push(Figure::new(
            "004",
            format!("{settings}: retransmissions a minute"),
            (&range_text(lo, hi), (lo, hi)),
            (r, format!("{r:.0}")),
            Role::Model,
            if timer { TIMER_WHY } else { why },
        ));
    }
}

const TIMER_WHY: &str = "each echo carries its letter's ACK; the November 1975 letters carried \
                         none (ACKs only from the process): not modelled, see the section on 004";

fn range_text(lo: f64, hi: f64) -> String {
    if (hi - lo).abs() < f64::EPSILON {
        format!("{lo:.0}")
    } else {
        format!("{lo:.0}-{hi:.0}")
    }
}

fn seed004(r: &Report) -> Vec<Figure> {
    let mut rows = Vec::new();
    for run in &TABLE_VI {
        run_1975_row(r, "VI", run, &mut rows);
    }
    for (table, run) in &TABLES_VII_IX {
        run_1975_row(r, table, run, &mut rows);
    }
    rows
}
