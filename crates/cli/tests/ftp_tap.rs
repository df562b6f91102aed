//! FTP interop over a TAP in network namespaces the tests create (the harness of
//! `crates/impnet/tests/common`): Debian's curl downloads from `imp serve --ftp` in
//! TYPE I and TYPE A (the CRLF translation checked on the wire and in the file), over
//! EPSV, PASV, EPRT and PORT data connections, lists, uploads, aborts with ABOR and
//! logs in with a user; `imp ftp` downloads from a Linux FTP server (Python's
//! pyftpdlib, Debian's python3-pyftpdlib) in every data mode and both types. Needs
//! root; each test skips, saying why, without it or a tool (and fails instead under
//! `IMP_REQUIRE_ROOT`).
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

#[path = "../../impnet/tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use common::{ChildGuard, NetNs, can_run, have, text, wait_limited};

const IMP: &str = env!("CARGO_BIN_EXE_imp");

/// A namespace with a TAP `imp0` whose kernel side is 10.216.S.1/24; imp runs in the
/// namespace as 10.216.S.2/24.
struct Net {
    ns: NetNs,
    kernel: String,
    imp: String,
}

impl Net {
    fn new(subnet: u8) -> Option<Net> {
        if !can_run() {
            return None;
        }
        let ns = NetNs::new();
        ns.ip(&["tuntap", "add", "dev", "imp0", "mode", "tap"]);
        let kernel = format!("10.216.{subnet}.1");
        ns.ip(&["addr", "add", &format!("{kernel}/24"), "dev", "imp0"]);
        ns.ip(&["link", "set", "imp0", "up"]);
        Some(Net {
            ns,
            kernel,
            imp: format!("10.216.{subnet}.2"),
        })
    }

    fn addr_arg(&self) -> String {
        format!("{}/24", self.imp)
    }

    /// `imp serve ARGS...` in the namespace, once it has printed its startup line.
    fn serve(&self, args: &[&str]) -> ChildGuard {
        let mut all = vec!["serve", "--tap", "imp0", "--addr"];
        let addr = self.addr_arg();
        all.push(&addr);
        all.extend_from_slice(args);
        let mut child = self.ns.spawn(IMP, &all);
        let stdout = child.0.as_mut().unwrap().stdout.take().unwrap();
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        reader.read_line(&mut line).expect("imp serve's first line");
        assert!(line.contains("ftp (21)"), "imp serve said: {line:?}");
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = reader.read_to_string(&mut rest);
        });
        child
    }

    /// curl in the namespace (giving up after 30 s).
    fn curl(&self, args: &[&str]) -> Output {
        let mut all = vec!["-sS", "--max-time", "30"];
        all.extend_from_slice(args);
        self.ns.exec("curl", &all)
    }

    /// `imp ftp` in the namespace against the kernel side's server.
    fn imp_ftp(&self, args: &[&str]) -> Output {
        let mut all = vec!["ftp", "--tap", "imp0", "--addr"];
        let addr = self.addr_arg();
        all.push(&addr);
        all.extend_from_slice(args);
        wait_limited(self.ns.spawn(IMP, &all), Duration::from_secs(60))
    }
}

/// A directory of files to serve, removed on drop: `text.txt` (lines ending in LF,
/// one with a CR of its own before its LF, one with a bare CR), `bin.dat` (every byte
/// value, CR and LF included, 1 MiB), `incoming/`.
struct Site {
    dir: PathBuf,
    text: Vec<u8>,
    binary: Vec<u8>,
}

impl Site {
    fn new(tag: &str) -> Site {
        let dir = std::env::temp_dir().join(format!("imp-ftp-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(dir.join("incoming")).unwrap();
        let mut text = Vec::new();
        for i in 0..2000 {
            text.extend_from_slice(format!("line {i} of the text file, as in RFC 959").as_bytes());
            match i {
                7 => text.extend_from_slice(b"\r\n"),
                9 => text.extend_from_slice(b"\rbare\n"),
                _ => text.push(b'\n'),
            }
        }
        let binary = pattern(1 << 20);
        std::fs::write(dir.join("text.txt"), &text).unwrap();
        std::fs::write(dir.join("bin.dat"), &binary).unwrap();
        Site { dir, text, binary }
    }

    fn scratch(&self, name: &str) -> PathBuf {
        self.dir.with_extension(name)
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        for ext in ["out", "up"] {
            let _ = std::fs::remove_file(self.dir.with_extension(ext));
        }
    }
}

fn pattern(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// The TYPE A network form: every LF as CRLF.
fn crlf(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in data {
        if b == b'\n' {
            out.push(b'\r');
        }
        out.push(b);
    }
    out
}

/// pyftpdlib's TYPE A form: a CR before every LF that has none (a file's own CRLF
/// goes as it is).
fn pyftpdlib_crlf(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, &b) in data.iter().enumerate() {
        if b == b'\n' && (i == 0 || data[i - 1] != b'\r') {
            out.push(b'\r');
        }
        out.push(b);
    }
    out
}

/// What curl writes for a TYPE A download: CRLF as LF, any other CR as LF.
fn curl_lf(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, &b) in data.iter().enumerate() {
        match b {
            b'\r' if data.get(i + 1) == Some(&b'\n') => {}
            b'\r' => out.push(b'\n'),
            _ => out.push(b),
        }
    }
    out
}

/// The network form back: every CRLF as LF.
fn lf(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, &b) in data.iter().enumerate() {
        if !(b == b'\r' && data.get(i + 1) == Some(&b'\n')) {
            out.push(b);
        }
    }
    out
}

fn read(path: &Path) -> Vec<u8> {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let _ = std::fs::remove_file(path);
    data
}

#[test]
fn curl_downloads_from_imp_serve_ftp_in_both_types_and_every_data_mode() {
    let Some(net) = Net::new(1) else { return };
    if !have("curl") {
        return;
    }
    let site = Site::new("curl");
    let dir = site.dir.to_str().unwrap().to_string();
    let _server = net.serve(&["--ftp", &dir, "--ftp-upload", "incoming"]);
    let out = site.scratch("out");
    let out_arg = out.to_str().unwrap();
    let url = |name: &str| format!("ftp://{}/{name}", net.imp);
    // EPSV (curl's default), PASV, EPRT (curl's default with -P) and PORT.
    let modes: [&[&str]; 4] = [
        &[],
        &["--disable-epsv"],
        &["-P", &net.kernel],
        &["-P", &net.kernel, "--disable-eprt"],
    ];
    for mode in modes {
        let mut args = mode.to_vec();
        args.extend(["-o", out_arg, "-w", "%{size_download}"]);
        let bin = url("bin.dat");
        let r = net.curl(&[args.as_slice(), &[bin.as_str()]].concat());
        assert!(r.status.success(), "binary {mode:?}: {}", text(&r));
        assert!(
            read(&out) == site.binary,
            "binary {mode:?}: the bytes differ"
        );
        // TYPE A: the wire carries CRLF for every LF (size_download counts the wire's
        // bytes); curl turns each CRLF back into LF.
        let ascii = url("text.txt;type=a");
        let r = net.curl(&[args.as_slice(), &[ascii.as_str()]].concat());
        assert!(r.status.success(), "ascii {mode:?}: {}", text(&r));
        let network = crlf(&site.text);
        let on_wire: usize = String::from_utf8_lossy(&r.stdout).trim().parse().unwrap();
        assert_eq!(on_wire, network.len(), "ascii {mode:?}: bytes on the wire");
        // curl writes each CRLF as LF and any other CR as LF too (a loss only for
        // the file's own CRs).
        let got = read(&out);
        let expect = curl_lf(&network);
        let at = got.iter().zip(&expect).position(|(a, b)| a != b);
        assert!(
            got == expect,
            "ascii {mode:?}: {} bytes, {} expected, first difference at {at:?}",
            got.len(),
            expect.len(),
        );
    }
    // Listings: LIST (long) and NLST (names), sent in TYPE A (curl writes LF); SIZE.
    let r = net.curl(&[&url("")]);
    let listing = String::from_utf8_lossy(&r.stdout).to_string();
    assert!(
        r.status.success() && listing.contains(" bin.dat\n"),
        "{listing}"
    );
    assert!(
        listing.starts_with('-') || listing.starts_with('d'),
        "{listing}"
    );
    let r = net.curl(&["-l", &url("")]);
    assert_eq!(
        String::from_utf8_lossy(&r.stdout),
        "bin.dat\nincoming\ntext.txt\n"
    );
    let r = net.curl(&["-I", &url("bin.dat")]);
    let head = String::from_utf8_lossy(&r.stdout).to_string();
    assert!(head.contains("Content-Length: 1048576"), "SIZE: {head}");
    // A range: REST, then ABOR once curl has its bytes.
    let r = net.curl(&["-v", "-r", "1000-1999", "-o", out_arg, &url("bin.dat")]);
    assert!(r.status.success(), "range: {}", text(&r));
    let talk = String::from_utf8_lossy(&r.stderr).to_string();
    assert!(
        talk.contains("> REST 1000") && talk.contains("> ABOR"),
        "{talk}"
    );
    // The transfer ends with a 426 and the ABOR gets a 226 (RFC 959 §4.1.3). Which
    // one ends the transfer is a race: the ABOR ("226 ABOR successful") or curl's
    // close of the data connection before the server reads the ABOR ("226 No
    // transfer to abort"); both are the RFC's replies.
    let after_426 = talk.find("< 426 ").map(|at| &talk[at..]);
    assert!(
        after_426.is_some_and(|rest| rest.contains("< 226 ")),
        "{talk}"
    );
    assert!(read(&out) == site.binary[1000..2000], "range bytes");
    // Uploads only into incoming/, byte-exact in TYPE I, translated back in TYPE A.
    let up = site.scratch("up");
    std::fs::write(&up, &site.text).unwrap();
    let up_arg = up.to_str().unwrap();
    let r = net.curl(&["-T", up_arg, &url("incoming/up.bin")]);
    assert!(r.status.success(), "STOR: {}", text(&r));
    assert!(std::fs::read(site.dir.join("incoming/up.bin")).unwrap() == site.text);
    let r = net.curl(&["-T", up_arg, "-B", &url("incoming/up.txt")]);
    assert!(r.status.success(), "STOR TYPE A: {}", text(&r));
    let stored = std::fs::read(site.dir.join("incoming/up.txt")).unwrap();
    assert!(
        stored == site.text,
        "TYPE A upload: CRLF is LF again on disk"
    );
    let r = net.curl(&["-T", up_arg, &url("elsewhere.txt")]);
    assert!(!r.status.success(), "STOR outside incoming/ must fail");
    assert!(!site.dir.join("elsewhere.txt").exists());
    // Refusals: a missing file (550), a climb out of the tree, a wrong login (530).
    let r = net.curl(&["-o", out_arg, &url("nope.txt")]);
    assert_eq!(
        r.status.code(),
        Some(78),
        "RETR of a missing file: {}",
        text(&r)
    );
    let r = net.curl(&["--path-as-is", "-o", out_arg, &url("../../etc/passwd")]);
    assert!(!r.status.success(), "a path above the root: {}", text(&r));
    let r = net.curl(&["-u", "alice:secret", &url("")]);
    assert_eq!(r.status.code(), Some(67), "no such user: {}", text(&r));
    let _ = std::fs::remove_file(&out);
}

#[test]
fn imp_serve_ftp_takes_a_user_and_can_refuse_anonymous() {
    let Some(net) = Net::new(2) else { return };
    if !have("curl") {
        return;
    }
    let site = Site::new("user");
    let dir = site.dir.to_str().unwrap().to_string();
    let _server = net.serve(&[
        "--ftp",
        &dir,
        "--ftp-user",
        "alice:secret",
        "--ftp-no-anonymous",
    ]);
    let url = format!("ftp://{}/text.txt", net.imp);
    let r = net.curl(&["-u", "alice:secret", &url]);
    assert!(r.status.success(), "{}", text(&r));
    assert!(r.stdout == site.text, "TYPE I by default");
    let r = net.curl(&["-u", "alice:wrong", &url]);
    assert_eq!(r.status.code(), Some(67), "wrong password: {}", text(&r));
    let r = net.curl(&[&url]);
    assert_eq!(r.status.code(), Some(67), "anonymous refused: {}", text(&r));
}

/// pyftpdlib (Debian's python3-pyftpdlib) serving `dir` on the kernel's side at port
/// 2121, anonymous and read-only; `None` (a skip) without it.
fn pyftpdlib(net: &Net, dir: &str) -> Option<ChildGuard> {
    let python = "/usr/bin/python3";
    let probe = std::process::Command::new(python)
        .args(["-c", "import pyftpdlib"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        common::require::skip_for(
            "pyftpdlib missing",
            "pyftpdlib is not installed (apt-get install python3-pyftpdlib)",
        );
        return None;
    }
    let mut child = net.ns.spawn(
        python,
        &[
            "-m",
            "pyftpdlib",
            "-i",
            &net.kernel,
            "-p",
            "2121",
            "-d",
            dir,
        ],
    );
    // Ready once it listens.
    for _ in 0..100 {
        let ss = net.ns.exec("ss", &["-ltn", "sport = :2121"]);
        if String::from_utf8_lossy(&ss.stdout).contains("2121") {
            return Some(child);
        }
        if let Ok(Some(_)) = child.0.as_mut().unwrap().try_wait() {
            panic!("pyftpdlib exited: {}", text(&child.wait()));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("pyftpdlib did not start listening");
}

#[test]
fn imp_ftp_downloads_from_pyftpdlib_in_every_data_mode() {
    let Some(net) = Net::new(3) else { return };
    if !have("ss") {
        return;
    }
    let site = Site::new("pyftpd");
    let Some(_server) = pyftpdlib(&net, site.dir.to_str().unwrap()) else {
        return;
    };
    let server = format!("{}:2121", net.kernel);
    let out = site.scratch("out");
    let out_arg = out.to_str().unwrap();
    for mode in ["passive", "epsv", "active", "eprt"] {
        let r = net.imp_ftp(&["--mode", mode, &server, "bin.dat", "-o", out_arg]);
        assert!(r.status.success(), "{mode}: {}", text(&r));
        let line = String::from_utf8_lossy(&r.stdout).to_string();
        assert!(
            line.contains("1048576 bytes received in") && line.contains("bytes/s"),
            "{mode}: {line}"
        );
        assert!(read(&out) == site.binary, "{mode}: binary bytes differ");
        // TYPE A: pyftpdlib sends CRLF lines, imp ftp makes them LF again.
        let r = net.imp_ftp(&[
            "--mode", mode, "--ascii", &server, "text.txt", "-o", out_arg,
        ]);
        assert!(r.status.success(), "{mode} ascii: {}", text(&r));
        let line = String::from_utf8_lossy(&r.stdout).to_string();
        let wire = pyftpdlib_crlf(&site.text);
        assert!(
            line.contains(&format!("{} bytes received", wire.len())),
            "{mode}: {line}"
        );
        assert!(
            read(&out) == lf(&wire),
            "{mode}: text differs after translation"
        );
    }
    let r = net.imp_ftp(&["--nlst", &server]);
    assert!(r.status.success(), "{}", text(&r));
    let names = String::from_utf8_lossy(&r.stdout).to_string();
    assert!(
        names.contains("bin.dat") && names.contains("text.txt"),
        "{names}"
    );
    let r = net.imp_ftp(&[&server, "missing.txt"]);
    assert_eq!(r.status.code(), Some(1), "{}", text(&r));
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("550"),
        "{}",
        text(&r)
    );
}
