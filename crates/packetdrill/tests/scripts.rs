//! The project's own packetdrill scripts (`tests/packetdrill/*.pkt`) through the shim,
//! with packetdrill built here from the source archive beside the repository
//! (`../shared/tools/packetdrill/packetdrill-src.tar.gz`, upstream's tool at a pinned
//! commit; CI reaches no source repositories).
//!
//! packetdrill is built once into the target directory
//! (`<target>/packetdrill/<archive hash>/packetdrill`) with Debian's bison, flex, gcc and
//! make, and rebuilt only when the archive changes. One change is made to its source
//! first: `%{ }%` blocks read TCP_INFO through the shim (`patch_tcp_info`), so scripts
//! can assert imp's TCP_INFO (they need python3, which packetdrill runs them with). Each script runs as
//! `packetdrill --so_filename=libimpnet_packetdrill.so --local_ip=192.168.0.2 SCRIPT`:
//! under `--so_filename` packetdrill opens no TUN device, creates no route and runs no
//! command of its own, and the project's scripts run no shell commands, so they need no
//! namespace (the test checks that no script holds a backquoted command). It needs root:
//! packetdrill locks its memory, and as another user its threads then cannot get their
//! stacks. A failing script fails the test with its name and packetdrill's output.
//!
//! Without the archive or a build tool the test skips, saying why (counted in
//! `scripts/test`'s last line). A missing build tool fails it instead under
//! `IMP_REQUIRE_ROOT` (set by `scripts/test` as root with every tool of
//! `scripts/test-packages`, which it installs) or `IMP_REQUIRE_PACKETDRILL`; a missing
//! archive under `IMP_REQUIRE_PACKETDRILL` (set by `.ci/run`, whose clone always has the
//! shared tools beside it).

#[path = "../../impnet/tests/common/require.rs"]
mod require;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The tools packetdrill's build needs (Debian packages of the same names), and
/// python3, which runs the scripts' `%{ }%` blocks.
const BUILD_TOOLS: [&str; 6] = ["tar", "gcc", "make", "bison", "flex", "python3"];
/// The shim's address, which `--local_ip` must match (the shim's default).
const LOCAL_IP: &str = "192.168.0.2";
/// Real time one script may take: scripts run on the shim's virtual time, in well under
/// a second each; past this packetdrill is stuck.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(60);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn archive() -> PathBuf {
    repo().join("../shared/tools/packetdrill/packetdrill-src.tar.gz")
}

/// Reports a skip (the caller then returns), or fails when `required`.
#[track_caller]
fn cannot_run(required: bool, reason: &str, why: &str) {
    assert!(!required, "this test may not skip here: {why}");
    require::report(reason, why);
}

/// The test binary's directory (`<target>/<profile>/deps`).
fn deps_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    exe.parent().expect("the test's directory").to_path_buf()
}

/// The shim, built by cargo with the crate (crate-type cdylib) beside this test.
fn library() -> PathBuf {
    let deps = deps_dir();
    let name = "libimpnet_packetdrill.so";
    for dir in [deps.as_path(), deps.parent().unwrap_or(&deps)] {
        if dir.join(name).exists() {
            return dir.join(name);
        }
    }
    panic!(
        "{name} not found in {} or its parent: cargo builds it with the crate (crate-type \
         cdylib); run `cargo test -p impnet-packetdrill`",
        deps.display()
    );
}

/// 64-bit FNV-1a of `bytes`: the build cache's key (not a security measure; a changed
/// archive gets a new directory).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Runs `command`, failing with its output when it does not succeed.
fn run(command: &mut Command, what: &str) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start {command:?}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// packetdrill built from `archive` under `<target>/packetdrill/<hash>`, reused when
/// already there. The build happens in a directory of its own and is renamed into place
/// when complete, so an interrupted or concurrent build never leaves a half-built tool
/// where the next run looks.
fn build_packetdrill(archive: &Path) -> PathBuf {
    let bytes =
        std::fs::read(archive).unwrap_or_else(|e| panic!("cannot read {}: {e}", archive.display()));
    // <target>/<profile>/deps -> <target>
    let target = deps_dir()
        .parent()
        .and_then(Path::parent)
        .expect("the target directory")
        .to_path_buf();
    let root = target.join("packetdrill");
    let mut key = bytes;
    key.extend_from_slice(PATCH_VERSION.as_bytes());
    let done = root.join(format!("{:016x}", fnv1a(&key)));
    let binary = |dir: &Path| dir.join("packetdrill/gtests/net/packetdrill/packetdrill");
    if binary(&done).exists() {
        return binary(&done);
    }
    let work = root.join(format!("build-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).expect("the build directory");
    run(
        Command::new("tar")
            .arg("xzf")
            .arg(archive)
            .arg("-C")
            .arg(&work),
        "unpacking packetdrill's source",
    );
    let source = work.join("packetdrill/gtests/net/packetdrill");
    patch_tcp_info(&source.join("code.c"));
    run(
        Command::new("sh").arg("./configure").current_dir(&source),
        "packetdrill's ./configure",
    );
    let jobs = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    run(
        Command::new("make")
            .arg(format!("-j{jobs}"))
            .arg("packetdrill")
            .current_dir(&source),
        "building packetdrill (make packetdrill)",
    );
    assert!(
        binary(&work).exists(),
        "make succeeded but left no {}",
        binary(&work).display()
    );
    // Another run may have finished first: its build is as good as this one.
    if std::fs::rename(&work, &done).is_err() {
        let _ = std::fs::remove_dir_all(&work);
    }
    assert!(binary(&done).exists(), "no {}", binary(&done).display());
    binary(&done)
}

/// Names the change [`patch_tcp_info`] makes: part of the build cache's key.
const PATCH_VERSION: &str = "tcp_info-through-so-1";

/// packetdrill runs a script's `%{ }%` blocks on TCP_INFO it reads with the C library's
/// `getsockopt`, which knows nothing of the shim's sockets: asked through the shared
/// object's table instead when one is loaded, the blocks see imp's TCP_INFO
/// (`tests/packetdrill/README.md` gives the same change as two `sed` lines).
fn patch_tcp_info(code_c: &Path) {
    let text = std::fs::read_to_string(code_c)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", code_c.display()));
    let include = "#include \"code.h\"\n";
    let call = "\tint result = getsockopt(fd, level, opt_name, data, &opt_len);";
    assert!(
        text.matches(include).count() == 1 && text.matches(call).count() == 1,
        "{} is not the code.c the TCP_INFO change was written for: look for its \
         getsockopt call and update patch_tcp_info",
        code_c.display()
    );
    let text = text
        .replace(include, "#include \"code.h\"\n#include \"so_testing.h\"\n")
        .replace(
            call,
            "\tint result = state->so_instance ? \
             state->so_instance->ifc.getsockopt(state->so_instance->ifc.userdata, fd, \
             level, opt_name, data, &opt_len) : \
             getsockopt(fd, level, opt_name, data, &opt_len);",
        );
    std::fs::write(code_c, text)
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", code_c.display()));
}

/// Runs `command` to its end or [`SCRIPT_TIMEOUT`], whichever comes first (then kills
/// it): the output, or `None` on a timeout.
fn run_with_timeout(command: &mut Command) -> Option<Output> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start packetdrill");
    // Read the pipes on threads so a chatty script cannot block on a full pipe.
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stdout, &mut buf);
        buf
    });
    let err = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stderr, &mut buf);
        buf
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for packetdrill") {
            break Some(status);
        }
        if start.elapsed() > SCRIPT_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    status.map(|status| Output {
        status,
        stdout,
        stderr,
    })
}

/// The project's scripts, sorted.
fn scripts() -> Vec<PathBuf> {
    let dir = repo().join("tests/packetdrill");
    let mut scripts: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "pkt"))
        .collect();
    scripts.sort();
    scripts
}

#[test]
fn project_scripts_pass_under_packetdrill() {
    let archive = archive();
    if !archive.exists() {
        // Under IMP_REQUIRE_PACKETDRILL only: a clone without the shared tools beside
        // it is not a machine missing a package scripts/test installs.
        cannot_run(
            std::env::var_os("IMP_REQUIRE_PACKETDRILL").is_some(),
            "packetdrill source missing",
            &format!(
                "packetdrill's source archive is not at {} (the shared tools beside the \
                 repository)",
                archive.display()
            ),
        );
        return;
    }
    if let Some(tool) = BUILD_TOOLS.iter().find(|tool| !require::found(tool)) {
        cannot_run(
            require::required() || std::env::var_os("IMP_REQUIRE_PACKETDRILL").is_some(),
            &format!("{tool} missing"),
            &format!("`{tool}` is not installed: packetdrill cannot be built or run"),
        );
        return;
    }
    // packetdrill locks its memory (mlockall) and asks for real-time scheduling; as
    // another user its threads then cannot get their stacks (pthread_create: EAGAIN).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        require::skip_for(
            "not root",
            "packetdrill runs as root (it locks its memory, and its threads' stacks then \
             exceed an ordinary user's locked-memory limit)",
        );
        return;
    }
    let scripts = scripts();
    assert!(!scripts.is_empty(), "no tests/packetdrill/*.pkt");
    for script in &scripts {
        // A backquoted line is a shell command, which packetdrill runs on this host:
        // such a script would need a namespace of its own.
        let text = std::fs::read_to_string(script).expect("a script");
        assert!(
            !text.lines().any(|line| line.trim_start().starts_with('`')),
            "{} runs a shell command: give it a namespace or take the command out",
            script.display()
        );
    }
    let packetdrill = build_packetdrill(&archive);
    let library = library();
    let mut failures = Vec::new();
    for script in &scripts {
        let name = script.file_name().unwrap().to_string_lossy().into_owned();
        let mut command = Command::new(&packetdrill);
        command.arg(format!("--so_filename={}", library.display()));
        // The command line wins over a script's own options: an IPv6 script names its
        // address itself (`--local_ip=` at its top, the shim's `local_ip6`).
        let text = std::fs::read_to_string(script).expect("a script");
        if !text.lines().any(|line| line.starts_with("--local_ip=")) {
            command.arg(format!("--local_ip={LOCAL_IP}"));
        }
        let output = run_with_timeout(command.arg(&name).current_dir(script.parent().unwrap()));
        match output {
            Some(output) if output.status.success() => {}
            Some(output) => failures.push(format!(
                "{name}: packetdrill exited {}:\n{}{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )),
            None => failures.push(format!(
                "{name}: still running after {} s (real time)",
                SCRIPT_TIMEOUT.as_secs()
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} scripts failed under packetdrill ({}):\n\n{}",
        failures.len(),
        scripts.len(),
        packetdrill.display(),
        failures.join("\n")
    );
}
