//! `imp sim FILE [--out DIR]`: run a scenario file in virtual time, print a table per
//! flow, and write pcaps, a JSON summary and plots. `--markdown` prints a seed
//! scenario's tables for `scenarios/seeds/README.md` instead. `--set KEY=VALUE`
//! changes a key of the file; `--seeds A..B` runs it once per seed, in parallel, and
//! reports the spread of each flow's figures (`seeds.rs`); with `--shard I/N` it runs
//! one slice of those seeds for a sweep over many machines, and `imp sim merge DIR...`
//! joins the slices (`sweep.rs`). With `--out DIR`, a run or a sweep also writes
//! `DIR/index.html`, a self-contained report to open in a browser (`page.rs`, built
//! with `html.rs`).

mod html;
mod page;
mod seeds;
mod sweep;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration as WallDuration, Instant as WallInstant};

use clap::{Args, Subcommand};
use impnet_sim::experiment::{self, FlowReport, Progress, Report};
use impnet_sim::plot;
use impnet_sim::scenario::{Override, Scenario};
use impnet_sim::seed_tables;

/// `println!` into a `String` (which cannot fail).
macro_rules! put {
    ($out:expr) => {
        $out.push('\n')
    };
    ($out:expr, $($arg:tt)*) => {{
        $out.push_str(&format!($($arg)*));
        $out.push('\n');
    }};
}

/// Options of `imp sim`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct SimArgs {
    /// `imp sim merge DIR...` instead of running a scenario.
    #[command(subcommand)]
    pub command: Option<SimCommand>,
    /// The scenario file (TOML; see scenarios/README.md).
    #[arg(required = true)]
    pub file: Option<PathBuf>,
    /// Write pcaps, summary.json, plots (SVG and PNG) and index.html (a report to open in
    /// a browser) into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Override the scenario's seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Run the scenario once per seed from A to B (both included, e.g. 1..10), in
    /// parallel on every core, and report min, max, mean and std of each flow's
    /// figures (with --out: summary.json, a plot per figure across the seeds and
    /// index.html; no pcaps).
    #[arg(long, value_name = "A..B", value_parser = seeds::parse_seeds,
          conflicts_with_all = ["seed", "markdown"])]
    pub seeds: Option<seeds::SeedRange>,
    /// Run only shard I of N of --seeds (1 <= I <= N): the seeds whose index in A..B
    /// is I-1 modulo N, and write their figures to `--out DIR/shard-I-of-N.json` for
    /// `imp sim merge` (e.g. one Slurm array task per shard).
    #[arg(long, value_name = "I/N", value_parser = sweep::parse_shard,
          requires_all = ["seeds", "out"])]
    pub shard: Option<sweep::Shard>,
    /// Threads for --seeds (default: one per core).
    #[arg(long, value_name = "N", requires = "seeds")]
    pub jobs: Option<usize>,
    /// Change a key of the scenario before it is read (repeatable): `seed=7`,
    /// `duration=60s`, `link.0.loss=1%`, `link[NAME].delay=20ms`,
    /// `host[NAME].tcp.sack=false`, `flow[NAME].bytes=10M`. A value that is not TOML
    /// is taken as a string.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<Override>,
    /// Print the JSON summary on stdout instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Skip the plots (pcaps, the summary and index.html are still written with --out).
    #[arg(long)]
    pub no_plots: bool,
    /// Print the seed scenario's tables for scenarios/seeds/README.md (Markdown)
    /// instead of the usual tables (only for the files in scenarios/seeds/).
    #[arg(long, conflicts_with = "json")]
    pub markdown: bool,
}

/// What `imp sim` does besides running a scenario.
#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Merge the shard files of a sweep (`--seeds A..B --shard I/N --out DIR`) and
    /// print the table one `--seeds A..B` run prints.
    Merge(sweep::MergeArgs),
}

/// Check the arguments before anything runs (no file is read or written): every
/// error names the option.
pub fn validate(args: &SimArgs) -> Result<(), String> {
    if let Some(SimCommand::Merge(merge)) = &args.command {
        return sweep::validate(merge);
    }
    if file(args).as_os_str().is_empty() {
        return Err("FILE is empty: give the scenario file to run".into());
    }
    if args.jobs == Some(0) {
        return Err("--jobs 0: give at least 1 thread".into());
    }
    if let Some(out) = &args.out {
        check_out("--out", out)?;
    }
    Ok(())
}

/// An error if `out`, the directory of `option`, is empty or a file.
fn check_out(option: &str, out: &std::path::Path) -> Result<(), String> {
    if out.as_os_str().is_empty() {
        return Err(format!("{option} is empty: give a directory"));
    }
    if out.exists() && !out.is_dir() {
        return Err(format!(
            "{option} {}: exists and is not a directory",
            out.display()
        ));
    }
    Ok(())
}

/// The scenario file (clap requires it unless a subcommand is given).
fn file(args: &SimArgs) -> &std::path::Path {
    args.file.as_deref().unwrap_or(std::path::Path::new(""))
}

/// The scenario to run: the file, read and checked (errors name the file, the line
/// and the field), with `--seed` applied. Nothing runs yet.
pub fn plan(args: &SimArgs) -> Result<Scenario, String> {
    let mut scenario = Scenario::load_with(file(args), &args.set).map_err(|mut e| {
        // A name that is blank at an end or holds control characters is quoted, so
        // the message still shows which file.
        let name = file(args).display().to_string();
        if name.trim() != name || name.chars().any(char::is_control) {
            e.origin = format!("FILE {name:?}");
        }
        e.to_string()
    })?;
    if let Some(seed) = args.seed {
        scenario.seed = seed;
    }
    Ok(scenario)
}

/// Run `imp sim`.
pub fn run(args: &SimArgs) -> Result<(), String> {
    validate(args)?;
    if let Some(SimCommand::Merge(merge)) = &args.command {
        return sweep::merge(merge);
    }
    let scenario = plan(args)?;
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    if let Some(range) = args.seeds {
        return run_seeds(args, &scenario, range);
    }
    let started = WallInstant::now();
    let mut bar: Option<indicatif::ProgressBar> = None;
    let show = std::io::stderr().is_terminal();
    let mut on_progress = |p: &Progress| {
        // Only long runs get a bar, and only on a terminal.
        if !show || started.elapsed() < WallDuration::from_millis(700) {
            return;
        }
        let bar = bar.get_or_insert_with(|| {
            let bar = indicatif::ProgressBar::new(1000);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {percent:>3}% {msg}",
            ) {
                bar.set_style(style);
            }
            bar
        });
        bar.set_position((p.fraction * 1000.0) as u64);
        bar.set_message(format!("virtual t={:.2} s", p.now.as_secs_f64()));
    };
    let outcome = experiment::run(&scenario, args.out.as_deref(), &mut on_progress)
        .map_err(|e| e.to_string())?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let json = serde_json::to_string_pretty(&outcome.report).expect("the report serialises");
    if let Some(dir) = &args.out {
        write_out(args, dir, &outcome, &json)?;
    }
    if args.json {
        println!("{json}");
    } else if args.markdown {
        print!("{}", seed_tables::markdown(&outcome.report)?);
    } else {
        print_tables(&outcome.report);
        if let Some(dir) = &args.out {
            println!("\nwrote pcaps, summary.json and plots to {}", dir.display());
        }
    }
    let broken: Vec<&str> = outcome
        .report
        .flows
        .iter()
        .filter(|f| f.data_ok == Some(false) && f.completed)
        .map(|f| f.name.as_str())
        .collect();
    if broken.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "flows {} received data that differs from what was sent (seed {})",
            broken.join(", "),
            scenario.seed
        ))
    }
}

/// `--out DIR` of one run: summary.json, the plots (unless `--no-plots`) and
/// index.html (the pcaps are written by the run).
fn write_out(
    args: &SimArgs,
    dir: &std::path::Path,
    outcome: &experiment::Outcome,
    json: &str,
) -> Result<(), String> {
    let path = dir.join("summary.json");
    std::fs::write(&path, format!("{json}\n"))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let mut plots = Vec::new();
    if !args.no_plots {
        let named: Vec<(&str, &impnet_sim::trace::FlowTrace)> = outcome
            .report
            .flows
            .iter()
            .map(|f| f.name.as_str())
            .zip(&outcome.traces)
            .collect();
        plots.extend(plot::write_flow_plots(dir, &named)?);
        plots.extend(plot::write_queue_plots(dir, &outcome.queues)?);
    }
    let report = &outcome.report;
    let seed = ["--seed".to_string(), report.seed.to_string()];
    let command = replay_words(args, &seed, dir);
    let html = page::run_page(report, &tables(report), &command, dir, &plots)?;
    page::write(dir, &html)?;
    Ok(())
}

/// The words of the `imp sim` command that replays this one: the file, `which` (the
/// seed or the seeds), every `--set`, `--no-plots` if given and `--out DIR`.
fn replay_words(args: &SimArgs, which: &[String], dir: &std::path::Path) -> Vec<String> {
    let mut words = vec![
        "imp".to_string(),
        "sim".to_string(),
        file(args).display().to_string(),
    ];
    words.extend(which.iter().cloned());
    for o in &args.set {
        words.extend(["--set".to_string(), format!("{}={}", o.key, o.value)]);
    }
    if args.no_plots {
        words.push("--no-plots".into());
    }
    words.extend(["--out".to_string(), dir.display().to_string()]);
    words
}

/// `--seeds`: every run, then the spread of the figures (a table, or JSON); with
/// `--shard`, the shard's runs and its file.
fn run_seeds(args: &SimArgs, scenario: &Scenario, range: seeds::SeedRange) -> Result<(), String> {
    let threads = args.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    if let Some(shard) = args.shard {
        return run_shard(args, scenario, range, shard, threads);
    }
    let all: Vec<u64> = (range.first..=range.last).collect();
    let summary = seeds::summarise(seeds::run_all(scenario, &all, threads)?)?;
    let json = serde_json::to_string_pretty(&summary).expect("the summary serialises");
    let figures: Vec<seeds::RunFigures> = summary.runs.iter().map(seeds::RunFigures::of).collect();
    if let Some(dir) = &args.out {
        let path = dir.join("summary.json");
        std::fs::write(&path, format!("{json}\n"))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        let which = [
            "--seeds".to_string(),
            format!("{}..{}", range.first, range.last),
        ];
        let command = replay_words(args, &which, dir);
        let description = summary.runs.first().map_or("", |r| r.description.as_str());
        let html = page::sweep_page(
            &summary,
            &figures,
            description,
            "",
            &command,
            dir,
            args.no_plots,
        )?;
        page::write(dir, &html)?;
    }
    if args.json {
        println!("{json}");
    } else {
        seeds::print(&summary);
    }
    data_check(&figures)
}

/// `--seeds A..B --shard I/N --out DIR`: the shard's seeds, their figures written to
/// `DIR/shard-I-of-N.json` (printed with `--json`), and their table.
fn run_shard(
    args: &SimArgs,
    scenario: &Scenario,
    range: seeds::SeedRange,
    shard: sweep::Shard,
    threads: usize,
) -> Result<(), String> {
    let Some(dir) = &args.out else {
        return Err("--shard needs --out DIR for its file".into());
    };
    // The identity is taken before the runs, so a file edited meanwhile is not named.
    let identity = sweep::scenario_sha256(file(args), &args.set)?;
    let reports = seeds::run_all(scenario, &shard.seeds(range), threads)?;
    let written = sweep::shard_file(identity, &scenario.name, range, shard, &reports);
    let json = serde_json::to_string_pretty(&written).expect("the shard file serialises");
    let path = dir.join(shard.file_name());
    // Written whole under another name first, so a merge never reads half a file.
    let partial = dir.join(format!(".{}.partial", shard.file_name()));
    std::fs::write(&partial, format!("{json}\n"))
        .and_then(|()| std::fs::rename(&partial, &path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    if args.json {
        println!("{json}");
    } else {
        if !reports.is_empty() {
            seeds::print(&seeds::summarise(reports)?);
            println!();
        }
        println!(
            "shard {shard} of seeds {}..{}: {} runs, wrote {}",
            range.first,
            range.last,
            written.runs.len(),
            path.display()
        );
    }
    data_check(&written.runs)
}

/// An error naming every flow (and seed) whose data differed from what was sent.
fn data_check(runs: &[seeds::RunFigures]) -> Result<(), String> {
    let broken: Vec<String> = runs.iter().flat_map(seeds::RunFigures::broken).collect();
    if broken.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "flows {} received data that differs from what was sent",
            broken.join(", ")
        ))
    }
}

fn print_tables(r: &Report) {
    println!(
        "imp sim {}: seed {}, {:.3} virtual seconds, {} events, trace {}",
        r.scenario, r.seed, r.end_s, r.steps, r.trace_hash
    );
    if !r.description.is_empty() {
        println!("{}", r.description.trim());
    }
    print!("{}", tables(r));
}

/// The tables of a run, each after a blank line, as the terminal shows them.
fn tables(r: &Report) -> String {
    let mut o = String::new();
    let of_kind =
        |kind: &str| -> Vec<&FlowReport> { r.flows.iter().filter(|f| f.kind == kind).collect() };
    // An FTP flow's figures are a bulk transfer's (over its data connection).
    let bulk: Vec<&FlowReport> = r
        .flows
        .iter()
        .filter(|f| f.kind == "bulk" || f.kind == "ftp")
        .collect();
    write_bulk(&mut o, &bulk);
    write_rr(&mut o, &of_kind("rr"));
    write_keystroke(&mut o, &of_kind("keystroke"));
    write_ping(&mut o, &of_kind("ping"));
    if let Some(index) = r.fairness {
        put!(
            o,
            "\nJain's fairness index over the bulk flows' goodput: {index:.4}"
        );
    }
    write_cpus(&mut o, r);
    write_ladder(&mut o, r);
    write_links(&mut o, r);
    write_routers(&mut o, r);
    o
}

/// Where the hosts' time went, for flows whose hosts have a CPU model.
fn write_cpus(o: &mut String, r: &Report) {
    let flows: Vec<&FlowReport> = r.flows.iter().filter(|f| f.cpu.is_some()).collect();
    if flows.is_empty() {
        return;
    }
    put!(o);
    put!(
        o,
        "{:<24} {:>12} {:>12} {:>16}",
        "cpu (flow)",
        "sender busy",
        "recv busy",
        "no rx buffer"
    );
    for f in flows {
        let Some(c) = &f.cpu else { continue };
        let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}%"));
        put!(
            o,
            "{:<24} {:>12} {:>12} {:>16}",
            f.name,
            pct(c.sender_busy_pct),
            pct(c.receiver_busy_pct),
            c.receiver_no_rx_buffer + c.sender_no_rx_buffer
        );
    }
}

/// The scenario's ladder: each rung's goodput beside the historical figure.
fn write_ladder(o: &mut String, r: &Report) {
    if r.ladder.is_empty() {
        return;
    }
    put!(o);
    put!(
        o,
        "{:<68} {:>10} {:>10} {:>8}",
        "ladder",
        "seed Mb/s",
        "imp Mb/s",
        "of seed"
    );
    for rung in &r.ladder {
        put!(
            o,
            "{:<68} {:>10} {:>10.2} {:>8}",
            rung.step,
            rung.seed_mbit.map_or("-".to_string(), |v| format!("{v}")),
            rung.imp_mbit,
            rung.pct_of_seed
                .map_or("-".to_string(), |v| format!("{v:.0}%"))
        );
    }
}

/// Each router interface's forwarding, drops by reason and egress queue (nothing
/// without routers). Interfaces that carried nothing are left out.
fn write_routers(o: &mut String, r: &Report) {
    if r.routers.is_empty() {
        return;
    }
    put!(o);
    put!(
        o,
        "{:<40} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>17}",
        "router interface",
        "rx",
        "tx",
        "forwarded",
        "q full",
        "aqm",
        "ce",
        "lost",
        "no rte",
        "ttl",
        "fragneed",
        "queue max/avg ms"
    );
    for router in &r.routers {
        for i in &router.interfaces {
            if i.rx_frames == 0 && i.tx_frames == 0 {
                continue;
            }
            let d = &i.drops;
            put!(
                o,
                "{:<40} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>17}",
                format!("{} -> {} ({})", router.name, i.peer, i.link),
                i.rx_frames,
                i.tx_frames,
                i.forwarded,
                d.queue_full,
                d.aqm,
                d.ce_marked,
                d.wire_loss,
                d.no_route,
                d.ttl_exceeded,
                d.frag_needed,
                format!("{:.2}/{:.2}", i.queue.max_delay_ms, i.queue.mean_delay_ms)
            );
        }
    }
}

/// The bulk flows' table (nothing if there are none).
fn write_bulk(o: &mut String, bulk: &[&FlowReport]) {
    if !bulk.is_empty() {
        put!(o);
        put!(
            o,
            "{:<22} {:>12} {:>10} {:>15} {:>11} {:>7} {:>7} {:>7} {:>22}",
            "bulk flow",
            "bytes",
            "time (s)",
            "goodput",
            "bytes/s",
            "% link",
            "% bound",
            "retx",
            "rtt min/avg/max ms"
        );
        for f in bulk {
            put!(
                o,
                "{:<22} {:>12} {:>10} {:>15} {:>11.1} {:>6.1}% {:>6.1}% {:>7} {:>22}{}",
                f.name,
                f.bytes,
                time(f),
                format_rate(f.goodput_bps),
                f.goodput_bytes_per_s,
                f.capacity_pct,
                f.bound_pct,
                f.retransmits,
                rtt(f),
                match f.data_ok {
                    Some(false) if f.completed => "  DATA MISMATCH",
                    _ => "",
                }
            );
        }
    }
}

/// The request/response flows' table (nothing if there are none).
/// Keystroke flows: keystrokes echoed, echo latency, frames per keystroke.
fn write_keystroke(o: &mut String, flows: &[&FlowReport]) {
    if flows.is_empty() {
        return;
    }
    put!(o);
    put!(
        o,
        "{:<22} {:>10} {:>10} {:>18} {:>26}",
        "keystroke",
        "echoed",
        "time (s)",
        "frames/keystroke",
        "echo min/avg/max ms"
    );
    for f in flows {
        put!(
            o,
            "{:<22} {:>10} {:>10} {:>18.2} {:>26}",
            f.name,
            f.transactions.unwrap_or(0),
            time(f),
            f.packets_per_keystroke.unwrap_or(0.0),
            rtt(f)
        );
    }
}

fn write_rr(o: &mut String, rr: &[&FlowReport]) {
    if !rr.is_empty() {
        put!(o);
        put!(
            o,
            "{:<22} {:>12} {:>10} {:>12} {:>12} {:>7} {:>7} {:>26}",
            "request/response",
            "transactions",
            "time (s)",
            "per second",
            "bound /s",
            "% bound",
            "retx",
            "latency min/avg/max ms"
        );
        for f in rr {
            let tps = f.transactions_per_s.unwrap_or(0.0);
            let bound = f.transactions_bound_per_s.unwrap_or(0.0);
            put!(
                o,
                "{:<22} {:>12} {:>10} {:>12.2} {:>12.2} {:>6.1}% {:>7} {:>26}",
                f.name,
                f.transactions.unwrap_or(0),
                time(f),
                tps,
                bound,
                if bound > 0.0 {
                    100.0 * tps / bound
                } else {
                    0.0
                },
                f.retransmits,
                rtt(f)
            );
        }
    }
}

/// The ping flows' table (nothing if there are none).
fn write_ping(o: &mut String, ping: &[&FlowReport]) {
    if !ping.is_empty() {
        put!(o);
        put!(
            o,
            "{:<22} {:>8} {:>8} {:>26} {:>18}",
            "ping",
            "sent",
            "received",
            "rtt min/avg/max ms",
            "srtt/mdev ms"
        );
        for f in ping {
            let smoothed = f.ping_smoothed.map_or_else(
                || "-".into(),
                |s| format!("{:.0}/{:.0}", s.srtt_ms, s.mdev_ms),
            );
            put!(
                o,
                "{:<22} {:>8} {:>8} {:>26} {:>18}",
                f.name,
                f.pings_sent.unwrap_or(0),
                f.pings_received.unwrap_or(0),
                rtt(f),
                smoothed
            );
        }
    }
}

/// Each link direction's counters.
fn write_links(o: &mut String, r: &Report) {
    put!(o);
    put!(
        o,
        "{:<22} {:>8} {:>10} {:>10} {:>12} {:>10}",
        "link direction",
        "frames",
        "lost",
        "queue drop",
        "delivered",
        "bytes"
    );
    for l in &r.links {
        for d in &l.directions {
            put!(
                o,
                "{:<22} {:>8} {:>10} {:>10} {:>12} {:>10}",
                format!("{} from {}", l.name, d.from),
                d.submitted,
                d.lost,
                d.queue_drops,
                d.delivered,
                d.bytes_delivered
            );
        }
    }
}

fn time(f: &FlowReport) -> String {
    if f.completed {
        format!("{:.3}", f.seconds)
    } else {
        format!("{:.3}+", f.seconds)
    }
}

fn rtt(f: &FlowReport) -> String {
    if f.rtt.samples == 0 {
        "-".into()
    } else {
        format!(
            "{:.1}/{:.1}/{:.1}",
            f.rtt.min_ms, f.rtt.mean_ms, f.rtt.max_ms
        )
    }
}

fn format_rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.3} Gbit/s", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.3} Mbit/s", bps / 1e6)
    } else if bps >= 1e3 {
        format!("{:.3} kbit/s", bps / 1e3)
    } else {
        format!("{bps:.0} bit/s")
    }
}
