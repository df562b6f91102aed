//! A sweep in shards: `imp sim FILE --seeds A..B --shard I/N --out DIR` for each I, then
//! `imp sim merge DIR`, prints the very table `imp sim FILE --seeds A..B` prints; a
//! merge of files that are not one whole sweep fails with one line saying why.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "common/lossy_pair.rs"]
mod lossy_pair;

/// The shared lossy two-host scenario (different seeds, different figures).
fn scenario() -> String {
    lossy_pair::lossy_pair("sweep-small", "256K", "")
}

fn imp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_imp"))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("imp-cli-sweep-{}-{name}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Standard output of a run that must succeed.
fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The error line of a run that must fail with status 1.
fn fails(out: Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    stderr
}

/// `imp sim FILE --seeds RANGE --shard I/N --out DIR` for every I of N.
fn shards(file: &Path, range: &str, count: u64, out: &Path, extra: &[&str]) {
    for index in 1..=count {
        let text = ok(imp()
            .arg("sim")
            .arg(file)
            .args(["--seeds", range, "--jobs", "1", "--shard"])
            .arg(format!("{index}/{count}"))
            .arg("--out")
            .arg(out)
            .args(extra)
            .output()
            .unwrap());
        assert!(
            text.contains(&format!("shard {index}/{count} of seeds {range}")),
            "{text}"
        );
    }
}

fn merge(paths: &[&Path], json: bool) -> Output {
    let mut command = imp();
    command.args(["sim", "merge"]).args(paths);
    if json {
        command.arg("--json");
    }
    command.output().unwrap()
}

#[test]
fn four_shards_merge_to_the_table_of_one_run() {
    let dir = scratch("equal");
    let file = dir.join("small.toml");
    std::fs::write(&file, scenario()).unwrap();
    let local = ok(imp()
        .arg("sim")
        .arg(&file)
        .args(["--seeds", "1..20"])
        .output()
        .unwrap());
    assert!(local.contains("20 runs, seeds 1..20"), "{local}");
    let out = dir.join("out");
    shards(&file, "1..20", 4, &out, &[]);
    let merged = ok(merge(&[&out], false));
    assert_eq!(
        merged, local,
        "the merge prints the single run's table, byte for byte"
    );

    // The JSON too: the single run's, less each run's report (the shard files keep
    // only the figures).
    let mut local_json: serde_json::Value = serde_json::from_str(&ok(imp()
        .arg("sim")
        .arg(&file)
        .args(["--seeds", "1..20", "--json"])
        .output()
        .unwrap()))
    .unwrap();
    local_json.as_object_mut().unwrap().remove("runs");
    let merged_json: serde_json::Value = serde_json::from_str(&ok(merge(&[&out], true))).unwrap();
    assert_eq!(merged_json, local_json);

    // Files named one by one, in any order, and a split into more shards than seeds
    // (the empty shards still write their files) merge to the same table.
    let files: Vec<PathBuf> = (1..=4)
        .rev()
        .map(|i| out.join(format!("shard-{i}-of-4.json")))
        .collect();
    let named: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    assert_eq!(ok(merge(&named, false)), local);
    let wide = dir.join("wide");
    shards(&file, "1..20", 23, &wide, &[]);
    assert_eq!(ok(merge(&[&wide], false)), local);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_merge_that_is_not_one_whole_sweep_says_why() {
    let dir = scratch("bad");
    let file = dir.join("small.toml");
    std::fs::write(&file, scenario()).unwrap();
    let out = dir.join("out");
    shards(&file, "1..8", 4, &out, &[]);

    // The same shards twice.
    let e = fails(merge(&[&out, &out], false));
    assert!(e.contains("seed 1 is in both"), "{e}");

    // A shard missing.
    let part = dir.join("part");
    std::fs::create_dir_all(&part).unwrap();
    for i in [1, 2, 4] {
        let name = format!("shard-{i}-of-4.json");
        std::fs::copy(out.join(&name), part.join(&name)).unwrap();
    }
    let e = fails(merge(&[&part], false));
    assert!(e.contains("2 of 8 missing (3, 7)"), "{e}");
    assert!(e.contains("no file for shard 3/4"), "{e}");

    // A shard of the scenario changed by --set.
    let other = dir.join("other");
    shards(&file, "1..8", 4, &other, &["--set", "link.0.loss=1%"]);
    let changed = other.join("shard-3-of-4.json");
    let e = fails(merge(&[&part, &changed], false));
    assert!(e.contains("are not one sweep: other scenarios"), "{e}");

    // A shard of another range.
    let range = dir.join("range");
    shards(&file, "1..12", 4, &range, &[]);
    let e = fails(merge(&[&part, &range.join("shard-3-of-4.json")], false));
    assert!(e.contains("other seeds, 1..8 and 1..12"), "{e}");

    // A file cut short: a run removed.
    let text = std::fs::read_to_string(out.join("shard-2-of-4.json")).unwrap();
    let mut cut: serde_json::Value = serde_json::from_str(&text).unwrap();
    cut["runs"].as_array_mut().unwrap().pop();
    let cut_dir = dir.join("cut");
    std::fs::create_dir_all(&cut_dir).unwrap();
    std::fs::write(cut_dir.join("shard-2-of-4.json"), cut.to_string()).unwrap();
    let e = fails(merge(&[&cut_dir], false));
    assert!(
        e.contains("holds seeds 2 but shard 2/4 of 1..8 runs 2, 6"),
        "{e}"
    );

    // A figure that is not a number, a file that is not a shard's, a directory
    // without shard files, a path that does not exist.
    let bad_figure = text.replacen("\"goodput_mbps\": \"", "\"goodput_mbps\": \"fast", 1);
    std::fs::write(cut_dir.join("shard-2-of-4.json"), bad_figure).unwrap();
    let e = fails(merge(&[&cut_dir], false));
    assert!(e.contains("is not a figure"), "{e}");
    let e = fails(merge(&[&file], false));
    assert!(e.contains("not JSON"), "{e}");
    std::fs::write(cut_dir.join("shard-2-of-4.json"), "{\"runs\": []}").unwrap();
    let e = fails(merge(&[&cut_dir], false));
    assert!(e.contains("format missing"), "{e}");
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let e = fails(merge(&[&empty], false));
    assert!(e.contains("holds no shard-*.json file"), "{e}");
    let e = fails(merge(&[Path::new("/dev/null")], false));
    assert!(e.contains("neither a directory nor a regular file"), "{e}");
    let e = fails(merge(&[&dir.join("absent")], false));
    assert!(e.contains("cannot read"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn shard_options_are_checked_before_anything_runs() {
    let dir = scratch("args");
    let file = dir.join("small.toml");
    std::fs::write(&file, scenario()).unwrap();
    let out = dir.join("out");
    for (args, needle) in [
        (&["--seeds", "1..4", "--shard", "5/4"][..], "from 1 to 4"),
        (&["--seeds", "1..4", "--shard", "0/4"][..], "from 1 to 4"),
        (&["--seeds", "1..4", "--shard", "2"][..], "give I/N"),
        (&["--shard", "1/4"][..], "--seeds"),
    ] {
        let result = imp()
            .arg("sim")
            .arg(&file)
            .args(args)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert_eq!(result.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
    // --shard without --out has nowhere to write.
    let result = imp()
        .arg("sim")
        .arg(&file)
        .args(["--seeds", "1..4", "--shard", "1/4"])
        .output()
        .unwrap();
    assert_eq!(result.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&result.stderr).contains("--out"));
    assert!(!out.exists(), "nothing ran, nothing was written");
    std::fs::remove_dir_all(&dir).unwrap();
}
