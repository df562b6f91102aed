//! What `DIR/index.html` shows (the page itself is built by `html.rs`): for one run,
//! the scenario's description, the command that replays it, the seed's figures beside
//! imp's (seed scenarios), the tables, the analyzer's verdict per flow, every plot and
//! the other files in DIR; for a sweep (`--seeds`, or `imp sim merge --out`), the
//! statistics table and a plot per figure across the seeds.

use std::path::{Path, PathBuf};

use impnet_sim::analyze::Connection;
use impnet_sim::experiment::Report;
use impnet_sim::{plot, seed_tables};

use super::html::{Page, shell_words};
use super::seeds::{self, RunFigures, SeedsSummary};

/// The page's file name in `--out DIR`.
pub const FILE: &str = "index.html";

/// The plots to embed of `written` (as `plot::write_*` return them): each plot's SVG,
/// or its PNG when it has no SVG.
fn embeddable(written: &[PathBuf]) -> Vec<PathBuf> {
    written
        .iter()
        .filter(|p| {
            let svg = p.extension().is_some_and(|e| e == "svg");
            svg || !written.contains(&p.with_extension("svg"))
        })
        .cloned()
        .collect()
}

/// The files in `dir` a reader may want beside the page (pcaps, JSON, plots), by name.
fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| !n.starts_with('.') && n != FILE)
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The replay section: `what` the command gives, the directory it runs from, the
/// command.
fn replay(page: &mut Page, what: &str, command: &[String]) {
    page.heading(2, "Replay");
    let cwd = std::env::current_dir().map_or_else(|_| ".".into(), |d| d.display().to_string());
    page.paragraphs(&format!("From this directory, this command gives {what}:"));
    page.preformatted(&format!(
        "cd {}\n{}",
        shell_words(&[cwd]),
        shell_words(command)
    ));
}

/// The page of one run written into `dir`: `tables` as the terminal shows them,
/// `plots` as written (empty without plots), `command` the words that replay it.
pub fn run_page(
    report: &Report,
    tables: &str,
    command: &[String],
    dir: &Path,
    plots: &[PathBuf],
) -> Result<String, String> {
    let mut page = Page::new(&format!("imp sim {}", report.scenario));
    page.paragraphs(&format!(
        "Seed {}, {:.3} virtual seconds, {} events, trace hash {}.",
        report.seed, report.end_s, report.steps, report.trace_hash
    ));
    page.paragraphs(&report.description);
    replay(&mut page, "the same run (the same trace hash)", command);
    if seed_tables::file_of(report).is_some() {
        page.heading(2, "The seed's figures beside imp's");
        page.markdown(&seed_tables::markdown(report)?);
    }
    page.heading(2, "Tables");
    page.preformatted(tables);
    verdicts(&mut page, report);
    let plots = embeddable(plots);
    if !plots.is_empty() {
        page.heading(2, "Plots");
        for plot in &plots {
            page.plot(plot)?;
        }
    }
    page.heading(2, "Files");
    page.links(&files_in(dir));
    Ok(page.finish())
}

/// The analyzer's judgement of each flow's captured connections (`imp analyze`'s
/// verdict: seed 003's four failings), per direction.
fn verdicts(page: &mut Page, report: &Report) {
    let mut rows = Vec::new();
    for flow in &report.flows {
        let connections: [(&str, &Option<Connection>); 2] = [
            ("data", &flow.analysis),
            ("control", &flow.control_analysis),
        ];
        for (role, connection) in connections {
            let Some(c) = connection else { continue };
            for d in &c.directions {
                let failings = d.verdict.failings();
                rows.push(vec![
                    flow.name.clone(),
                    role.to_string(),
                    format!("{} -> {}", d.from, d.to),
                    d.data_segments.to_string(),
                    d.segments_below_mss.to_string(),
                    format!("{} ({})", d.retransmissions, d.spurious_retransmissions),
                    format!("{:.3}", d.longest_timeout_ms / 1e3),
                    format!("{} / {}", d.uncombined_acks, d.combined_acks),
                    if failings.is_empty() {
                        "none".to_string()
                    } else {
                        failings.join("; ")
                    },
                ]);
            }
        }
    }
    page.heading(2, "The analyzer's verdict per flow");
    if rows.is_empty() {
        page.paragraphs("No flow's connection was captured (the analyzer judges TCP flows).");
        return;
    }
    page.table(
        &[
            "flow",
            "connection",
            "direction",
            "data segments",
            "below MSS",
            "retransmissions (spurious)",
            "longest timeout (s)",
            "ACKs alone / on data",
            "verdict",
        ],
        &rows,
    );
}

/// The page of a sweep: `summary`'s statistics and, unless `no_plots`, a chart per
/// figure across `runs`' seeds, written into `dir` as `sweep-FIGURE.svg/.png`.
/// `description` is the scenario's, when known (a merge of shards does not keep it);
/// `notes` say where the runs came from.
pub fn sweep_page(
    summary: &SeedsSummary,
    runs: &[RunFigures],
    description: &str,
    notes: &str,
    command: &[String],
    dir: &Path,
    no_plots: bool,
) -> Result<String, String> {
    let seeds = &summary.seeds;
    let mut page = Page::new(&format!(
        "imp sim {}: {} runs, seeds {}..{}",
        summary.scenario,
        seeds.len(),
        seeds.first().copied().unwrap_or(0),
        seeds.last().copied().unwrap_or(0)
    ));
    page.paragraphs(description);
    page.paragraphs(notes);
    replay(&mut page, "the same figures", command);
    page.heading(2, "Statistics over the seeds");
    let mut rows: Vec<Vec<String>> = Vec::new();
    for flow in &summary.flows {
        for (name, head, _) in seeds::FIGURES {
            let Some(s) = flow.figures.get(name) else {
                continue;
            };
            rows.push(
                [flow.name.clone(), head.to_string()]
                    .into_iter()
                    .chain([s.min, s.max, s.mean, s.std].map(seeds::figure))
                    .collect(),
            );
        }
    }
    page.table(&["flow", "figure", "min", "max", "mean", "std"], &rows);
    if !no_plots {
        page.heading(2, "Each figure across the seeds");
        for plot in embeddable(&sweep_plots(summary, runs, dir)?) {
            page.plot(&plot)?;
        }
    }
    page.heading(2, "Files");
    page.links(&files_in(dir));
    Ok(page.finish())
}

/// Writes a chart per figure (a series per flow, a mark per seed) into `dir`.
fn sweep_plots(
    summary: &SeedsSummary,
    runs: &[RunFigures],
    dir: &Path,
) -> Result<Vec<PathBuf>, String> {
    let mut written = Vec::new();
    for (name, head, _) in seeds::FIGURES {
        let series = summary
            .flows
            .iter()
            .enumerate()
            .map(|(i, flow)| {
                let points = runs
                    .iter()
                    .filter_map(|run| {
                        let value = run.flows.get(i)?.figures.get(name)?.0;
                        value.is_finite().then_some((run.seed as f64, value))
                    })
                    .collect();
                (flow.name.clone(), points)
            })
            .collect();
        let title = format!("{}: {head} across seeds", summary.scenario);
        let chart = plot::spread_chart(&title, head, series);
        written.extend(chart.save(&dir.join(format!("sweep-{name}")))?);
    }
    Ok(written)
}

/// Writes `html` as `dir/index.html`, whole or not at all.
pub fn write(dir: &Path, html: &str) -> Result<PathBuf, String> {
    let path = dir.join(FILE);
    let partial = dir.join(format!(".{FILE}.partial"));
    std::fs::write(&partial, html)
        .and_then(|()| std::fs::rename(&partial, &path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}
