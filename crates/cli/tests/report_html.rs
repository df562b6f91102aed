//! `DIR/index.html`, the report `imp sim --out DIR` writes, opened in headless Chromium:
//! for one run, a `--seeds` sweep and an `imp sim merge --out` of shards, the page loads
//! with no error and shows every plot the run wrote (its inline script marks `<body>`
//! with `data-rendered="N plots"` once every plot has decoded and has a size on screen,
//! and `<html>` with `data-errors` on any uncaught error; `--dump-dom` prints both).
//!
//! Without Chromium (Debian's `chromium`) the pages are still written and checked as
//! text, and the browser's part is skipped, saying why; under `IMP_REQUIRE_CHROMIUM` it
//! fails instead.

#[path = "../../impnet/tests/common/require.rs"]
mod require;

#[path = "common/lossy_pair.rs"]
mod lossy_pair;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Scenario text a page must show escaped, never as markup.
const HOSTILE: &str = "<script>document.title='owned'</script> & <img src=x onerror=alert(1)>";

/// The shared lossy two-host scenario, with a description that is markup.
fn scenario() -> String {
    let description = format!("description = {HOSTILE:?}\nseed = 5");
    lossy_pair::lossy_pair("report-html", "128K", &description)
}

fn imp(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_imp"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "imp {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("imp-report-html-{}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The files in `dir` ending in `.svg` (every plot is written as SVG and PNG).
fn svgs(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "svg"))
        .count()
}

/// The value of attribute `name` in `html`'s first `<tag ...>`.
fn attribute(html: &str, tag: &str, name: &str) -> Option<String> {
    let start = html.find(&format!("<{tag}"))?;
    let end = start + html[start..].find('>')?;
    let open = &html[start..end];
    let at = open.find(&format!(" {name}=\""))? + name.len() + 3;
    let len = open[at..].find('"')?;
    Some(open[at..at + len].to_string())
}

/// Checks `dir/index.html` as text: it embeds every plot in `dir`, shows `needles`,
/// escapes the hostile description and fetches nothing. Returns the plot count.
fn check_text(dir: &Path, needles: &[&str]) -> usize {
    let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
    let plots = svgs(dir);
    assert!(plots > 0, "no plots in {}", dir.display());
    assert_eq!(
        attribute(&html, "body", "data-plots"),
        Some(plots.to_string()),
        "the page embeds a plot per SVG in {}",
        dir.display()
    );
    assert_eq!(html.matches("<img class=\"plot\"").count(), plots);
    for needle in needles {
        assert!(
            html.contains(needle),
            "{needle:?} missing from {}",
            dir.display()
        );
    }
    assert!(
        !html.contains("<script>document.title"),
        "unescaped description"
    );
    assert!(!html.contains("src=\"http") && !html.contains("src=\"//"));
    plots
}

/// The Chromium binary, if installed.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    ["chromium", "chromium-browser"].iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

/// `page` loaded in headless Chromium with a fresh profile: the DOM after load.
fn dump_dom(browser: &Path, page: &Path, scratch: &Path) -> String {
    let name = page.parent().and_then(Path::file_name).unwrap();
    let profile = scratch.join("profile").join(name);
    let (stdout, stderr) = (scratch.join("dom.html"), scratch.join("chromium.log"));
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().ok();
            child.wait().ok();
            panic!(
                "chromium did not finish loading {} in 120 s: {}",
                page.display(),
                std::fs::read_to_string(&stderr).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let dom = std::fs::read_to_string(&stdout).unwrap_or_default();
    assert!(
        status.success() && !dom.is_empty(),
        "chromium {status} on {}: {}",
        page.display(),
        std::fs::read_to_string(&stderr).unwrap_or_default()
    );
    std::fs::remove_dir_all(&profile).ok();
    dom
}

/// Runs `imp sim` three ways and checks the pages as text; then in Chromium.
#[test]
fn index_html_renders_every_plot_without_errors() {
    let dir = scratch();
    let file = dir.join("report.toml");
    std::fs::write(&file, scenario()).unwrap();
    let file = file.to_str().unwrap();
    let (run, sweep, shards, merged) = (
        dir.join("run"),
        dir.join("sweep"),
        dir.join("shards"),
        dir.join("merged"),
    );
    let path = |p: &Path| p.to_str().unwrap().to_string();
    imp(&["sim", file, "--out", &path(&run)]);
    imp(&["sim", file, "--seeds", "1..3", "--out", &path(&sweep)]);
    for shard in ["1/2", "2/2"] {
        imp(&[
            "sim",
            file,
            "--seeds",
            "1..3",
            "--shard",
            shard,
            "--out",
            &path(&shards),
        ]);
    }
    imp(&["sim", "merge", &path(&shards), "--out", &path(&merged)]);
    let pages = [
        (
            &run,
            check_text(&run, &["--seed 5", "verdict", "bulk-tsg.svg", "ab.pcap"]),
        ),
        (
            &sweep,
            check_text(&sweep, &["--seeds 1..3", "goodput Mbit/s", "std"]),
        ),
        (
            &merged,
            check_text(&merged, &["imp sim merge", "goodput Mbit/s"]),
        ),
    ];
    let Some(browser) = chromium() else {
        let why =
            "chromium is not installed (Debian: chromium): the pages were checked as text only";
        assert!(
            std::env::var_os("IMP_REQUIRE_CHROMIUM").is_none(),
            "IMP_REQUIRE_CHROMIUM is set, so this test may not skip: {why}"
        );
        require::report("chromium missing", why);
        return;
    };
    for (out, plots) in pages {
        let dom = dump_dom(&browser, &out.join("index.html"), &dir);
        assert_eq!(
            attribute(&dom, "html", "data-errors"),
            None,
            "errors on {}/index.html",
            out.display()
        );
        assert_eq!(
            attribute(&dom, "body", "data-rendered"),
            Some(format!("{plots} plots")),
            "{}/index.html does not show every plot (data-broken marks the ones missing)",
            out.display()
        );
        assert!(!dom.contains(" data-broken="), "a plot marked broken");
    }
    std::fs::remove_dir_all(&dir).ok();
}
