//! A sweep on a real Slurm: a single-node cluster (munged, slurmctld, slurmd) brought up
//! in a temporary directory, `scripts/slurm/sweep.sbatch` submitted as a 4-task array
//! over a 20-seed sweep, and `imp sim merge` of the tasks' shard files checked against
//! the same sweep run here in one `imp sim --seeds`.
//!
//! Everything the cluster writes (key, sockets, state, spool, logs, pid files) is in its
//! own directory, its ports are free ones picked at start, and its daemons are stopped
//! and the directory removed at the end, on failure too (their logs are printed then).
//! Needs root and Debian's `slurm-wlm` and `munge`; skips, saying why, without them,
//! and fails instead under `IMP_REQUIRE_SLURM` or `IMP_REQUIRE_ROOT`.

#[path = "../../impnet/tests/common/require.rs"]
mod require;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

#[path = "common/lossy_pair.rs"]
mod lossy_pair;

/// The shared lossy two-host scenario (different seeds, different figures).
fn sweep_scenario() -> String {
    lossy_pair::lossy_pair("slurm-sweep", "1M", "")
}

/// The programs the cluster needs.
const PROGRAMS: [&str; 8] = [
    "munged",
    "mungekey",
    "slurmctld",
    "slurmd",
    "sbatch",
    "squeue",
    "sinfo",
    "scancel",
];

/// Whether the test must run (CI): `IMP_REQUIRE_SLURM` or `IMP_REQUIRE_ROOT`.
fn slurm_required() -> bool {
    require::required() || std::env::var_os("IMP_REQUIRE_SLURM").is_some()
}

/// `program`'s path: on the PATH, or in /usr/sbin or /sbin (the daemons' home, which a
/// user's PATH may lack).
fn locate(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// True if the cluster can be brought up here; else skips (or fails when required).
fn can_run() -> bool {
    // SAFETY: geteuid has no preconditions.
    let why = if unsafe { libc::geteuid() } != 0 {
        Some((
            "not root",
            "the Slurm sweep test needs root to run slurmd".to_string(),
        ))
    } else {
        PROGRAMS.iter().find(|p| locate(p).is_none()).map(|p| {
            (
                "slurm missing",
                format!("`{p}` is not installed (Debian: slurm-wlm, munge)"),
            )
        })
    };
    let Some((reason, why)) = why else {
        return true;
    };
    assert!(
        !slurm_required(),
        "IMP_REQUIRE_SLURM or IMP_REQUIRE_ROOT is set, so this test may not skip: {why}"
    );
    require::report(reason, &why);
    false
}

/// A single-node cluster; stops its daemons (job first) and removes its directory
/// when dropped.
struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
    /// munged, slurmctld, slurmd, in start order.
    daemons: Vec<(&'static str, Child)>,
    /// The job to cancel if the test ends before it does.
    job: Option<String>,
}

impl Cluster {
    /// Starts munged, slurmctld and slurmd in `dir` and waits for the node to be idle.
    fn start(dir: &Path) -> Cluster {
        if dir.exists() {
            std::fs::remove_dir_all(dir).unwrap();
        }
        for sub in ["munge", "state", "spool"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        // munged wants its socket's directories open to all.
        set_mode(dir, 0o755);
        set_mode(&dir.join("munge"), 0o755);
        let mut cluster = Cluster {
            dir: dir.to_path_buf(),
            conf: dir.join("slurm.conf"),
            daemons: Vec::new(),
            job: None,
        };
        let key = dir.join("munge/munge.key");
        let made = cluster
            .command("mungekey")
            .arg("--create")
            .arg(format!("--keyfile={}", key.display()))
            .output()
            .unwrap();
        assert!(made.status.success(), "mungekey: {}", text(&made));
        let socket = dir.join("munge/socket");
        // In the foreground munged logs to standard error (not to --log-file).
        let log = std::fs::File::create(dir.join("munged.log")).unwrap();
        let munged = cluster
            .command("munged")
            .arg("--foreground")
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--key-file={}", key.display()))
            .arg(format!(
                "--pid-file={}",
                dir.join("munge/munged.pid").display()
            ))
            .arg(format!(
                "--seed-file={}",
                dir.join("munge/munged.seed").display()
            ))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        cluster.daemons.push(("munged", munged));
        cluster.wait_for("munged's socket", Duration::from_secs(20), || {
            socket.exists()
        });

        std::fs::write(&cluster.conf, slurm_conf(dir, &socket)).unwrap();
        for daemon in ["slurmctld", "slurmd"] {
            let child = cluster
                .command(daemon)
                .arg("-D")
                .arg("-f")
                .arg(&cluster.conf)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            cluster.daemons.push((daemon, child));
        }
        let mut sinfo = cluster.command("sinfo");
        sinfo.args(["-h", "-N", "-o", "%t"]);
        cluster.wait_for("the node to be idle", Duration::from_secs(60), || {
            sinfo
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "idle")
        });
        cluster
    }

    /// `program` with the cluster's configuration and no Slurm variables of a job
    /// this test may itself be running in.
    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(locate(program).unwrap());
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("SLURM_") {
                command.env_remove(name);
            }
        }
        command.env("SLURM_CONF", &self.conf);
        command
    }

    /// Polls `ready` every 200 ms; panics (naming `what`) after `limit`, or when a
    /// daemon has exited.
    fn wait_for(&mut self, what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
        let deadline = Instant::now() + limit;
        while !ready() {
            for (name, child) in &mut self.daemons {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("{name} exited ({status}) while waiting for {what}");
                }
            }
            assert!(Instant::now() < deadline, "no {what} after {limit:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The last lines of every log, for a failure.
    fn print_logs(&self) {
        let mut logs = vec![
            self.dir.join("munged.log"),
            self.dir.join("slurmctld.log"),
            self.dir.join("slurmd.log"),
        ];
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            let mut tasks: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "out"))
                .collect();
            tasks.sort();
            logs.extend(tasks);
        }
        for log in logs {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(25)..];
            eprintln!(
                "--- {} (last {} lines)\n{}",
                log.display(),
                tail.len(),
                tail.join("\n")
            );
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.print_logs();
        }
        if let Some(job) = self.job.take() {
            let _ = self.command("scancel").arg(&job).output();
        }
        // SIGTERM first, so slurmctld stops its script helper; SIGKILL after 10 s.
        for (_, child) in self.daemons.iter_mut().rev() {
            let pid = libc::pid_t::try_from(child.id()).unwrap_or(0);
            if pid > 0 {
                // SAFETY: signalling a child this test started and has not reaped.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A minimal single-node slurm.conf: this host as controller and only node, free ports,
/// every file in `dir`, no cgroups, accounting or MPI.
fn slurm_conf(dir: &Path, munge_socket: &Path) -> String {
    let host = short_hostname();
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let d = dir.display();
    format!(
        "ClusterName=imptest\n\
         SlurmctldHost={host}(127.0.0.1)\n\
         SlurmctldPort={ctld}\n\
         SlurmdPort={slurmd}\n\
         AuthType=auth/munge\n\
         CredType=cred/munge\n\
         AuthInfo=socket={socket}\n\
         SlurmUser=root\n\
         SlurmdUser=root\n\
         StateSaveLocation={d}/state\n\
         SlurmdSpoolDir={d}/spool\n\
         SlurmctldPidFile={d}/slurmctld.pid\n\
         SlurmdPidFile={d}/slurmd.pid\n\
         SlurmctldLogFile={d}/slurmctld.log\n\
         SlurmdLogFile={d}/slurmd.log\n\
         ProctrackType=proctrack/linuxproc\n\
         TaskPlugin=task/none\n\
         JobAcctGatherType=jobacct_gather/none\n\
         AccountingStorageType=accounting_storage/none\n\
         JobCompType=jobcomp/none\n\
         SchedulerType=sched/builtin\n\
         SelectType=select/cons_tres\n\
         SelectTypeParameters=CR_Core\n\
         MpiDefault=none\n\
         ReturnToService=2\n\
         NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN\n\
         PartitionName=imp Nodes={host} Default=YES MaxTime=INFINITE State=UP\n",
        ctld = free_port(),
        slurmd = free_port(),
        socket = munge_socket.display(),
    )
}

/// A TCP port nothing listens on now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// The host name before its first dot, as Slurm matches it.
fn short_hostname() -> String {
    let mut name = [0u8; 256];
    // SAFETY: `name` is writable for its whole length, which is passed.
    let rc = unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) };
    assert_eq!(rc, 0, "gethostname failed");
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    let full = String::from_utf8_lossy(&name[..end]).into_owned();
    full.split('.').next().unwrap_or(&full).to_string()
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_slurm_job_array_sweep_merges_to_the_local_table() {
    if !can_run() {
        return;
    }
    let started = Instant::now();
    let dir = std::env::temp_dir().join(format!("imp-slurm-{}", std::process::id()));
    let mut cluster = Cluster::start(&dir);
    let up = started.elapsed();
    let scenario = dir.join("sweep.toml");
    std::fs::write(&scenario, sweep_scenario()).unwrap();
    let out = dir.join("out");
    let imp = env!("CARGO_BIN_EXE_imp");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/slurm/sweep.sbatch");

    let submitted = cluster
        .command("sbatch")
        .env("IMP", imp)
        .arg("--parsable")
        .arg("--array=1-4")
        .arg(format!("--chdir={}", dir.display()))
        .arg(format!("--output={}/task-%A_%a.out", dir.display()))
        .arg(&script)
        .arg(&scenario)
        .arg("1..20")
        .arg(&out)
        .output()
        .unwrap();
    assert!(submitted.status.success(), "sbatch: {}", text(&submitted));
    let job = String::from_utf8_lossy(&submitted.stdout)
        .trim()
        .to_string();
    cluster.job = Some(job.clone());
    let mut squeue = cluster.command("squeue");
    squeue.args(["-h", "-j", &job, "-o", "%i %T"]);
    cluster.wait_for("the array to end", Duration::from_secs(120), || {
        squeue
            .output()
            .is_ok_and(|o| o.status.success() && o.stdout.iter().all(u8::is_ascii_whitespace))
    });
    cluster.job = None;
    let ran = started.elapsed();

    let shards: Vec<PathBuf> = (1..=4)
        .map(|i| out.join(format!("shard-{i}-of-4.json")))
        .collect();
    for shard in &shards {
        assert!(shard.is_file(), "task did not write {}", shard.display());
    }
    let merged = Command::new(imp)
        .args(["sim", "merge"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(merged.status.success(), "merge: {}", text(&merged));
    let local = Command::new(imp)
        .arg("sim")
        .arg(&scenario)
        .args(["--seeds", "1..20"])
        .output()
        .unwrap();
    assert!(local.status.success(), "local: {}", text(&local));
    let (merged, local) = (
        String::from_utf8(merged.stdout).unwrap(),
        String::from_utf8(local.stdout).unwrap(),
    );
    assert!(local.contains("20 runs, seeds 1..20"), "{local}");
    assert_eq!(
        merged, local,
        "the Slurm sweep's merge differs from the local run"
    );
    eprintln!(
        "slurm sweep: cluster up in {:.1} s, array done {:.1} s after start, total {:.1} s",
        up.as_secs_f64(),
        ran.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}
