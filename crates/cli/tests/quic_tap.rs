//! `imp serve --quic-echo` against a kernel-side quinn client: quinn on a kernel UDP
//! socket inside a network namespace the test creates, imp on a TAP there; streams
//! come back byte-exact through imp's UDP and quinn on imp. Needs root (skips, saying
//! why, without it; fails instead under `IMP_REQUIRE_ROOT`). Run under
//! `flock /tmp/imp-netns.lock` beside other namespace tests.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

#[path = "../../impnet/tests/common/mod.rs"]
#[allow(unused_imports)] // the harness offers more than this file uses
mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::time::Duration;

use common::{NetNs, can_run};
use impnet::quic::quinn;

const IMP: &str = env!("CARGO_BIN_EXE_imp");

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15 ^ seed;
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

/// A quinn client on a kernel UDP socket (made on this thread, so in its namespace)
/// echoes `sizes` on as many concurrent streams through the server at `server`.
fn kernel_client(server: SocketAddr, cert: Vec<u8>, sizes: &[usize]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async {
        let cert = quinn::rustls::pki_types::CertificateDer::from(cert);
        let config = impnet::quic::client_trusting(cert).expect("client config");
        let mut endpoint = quinn::Endpoint::client("0.0.0.0:0".parse().unwrap()).expect("endpoint");
        endpoint.set_default_client_config(config);
        let connecting = endpoint
            .connect(server, &server.ip().to_string())
            .expect("connect");
        let connection = tokio::time::timeout(Duration::from_secs(20), connecting)
            .await
            .expect("handshake timed out")
            .expect("handshake");
        let tasks: Vec<_> = sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| {
                let connection = connection.clone();
                tokio::spawn(async move {
                    let data = pattern(size, i as u64);
                    let (mut send, mut recv) = connection.open_bi().await.expect("open_bi");
                    let reader = tokio::spawn(async move { recv.read_to_end(64 << 20).await });
                    send.write_all(&data).await.expect("write");
                    send.finish().expect("finish");
                    let echoed = reader.await.expect("reader").expect("read");
                    (data, echoed)
                })
            })
            .collect();
        let mut results = Vec::new();
        for task in tasks {
            let result = tokio::time::timeout(Duration::from_secs(120), task)
                .await
                .expect("stream timed out");
            results.push(result.expect("stream task"));
        }
        connection.close(0u32.into(), b"done");
        endpoint.wait_idle().await;
        results
    })
}

#[test]
fn quic_echo_answers_a_kernel_quinn_client() {
    if !can_run() {
        return;
    }
    let ns = NetNs::new();
    ns.ip(&["tuntap", "add", "dev", "imp0", "mode", "tap"]);
    ns.ip(&["addr", "add", "10.207.1.1/24", "dev", "imp0"]);
    ns.ip(&["link", "set", "imp0", "up"]);
    let cert_path = std::env::temp_dir().join(format!("imp-quic-{}.der", std::process::id()));
    let mut server = ns.spawn(
        IMP,
        &[
            "serve",
            "--tap",
            "imp0",
            "--addr",
            "10.207.1.2/24",
            "--quic-echo",
            "--quic-cert",
            cert_path.to_str().unwrap(),
        ],
    );
    let stdout = server.0.as_mut().unwrap().stdout.take().unwrap();
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    reader.read_line(&mut line).expect("imp's first line");
    // Keep draining stdout so imp never writes to a closed pipe.
    let rest = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut reader, &mut rest);
        rest
    });
    assert!(line.contains("quic-echo (4433"), "startup line: {line:?}");
    assert!(
        !line.contains("echo (7)"),
        "--quic-echo alone starts nothing else: {line}"
    );
    let cert = std::fs::read(&cert_path).expect("the certificate was written");
    let _ = std::fs::remove_file(&cert_path);
    let server_addr: SocketAddr = "10.207.1.2:4433".parse().unwrap();
    let sizes = [1 << 20, 1, 0, 100_000, 300_000];
    let results = ns.enter(|| kernel_client(server_addr, cert, &sizes));
    for (i, (sent, echoed)) in results.iter().enumerate() {
        assert_eq!(echoed.len(), sent.len(), "stream {i}");
        assert!(
            echoed == sent,
            "stream {i} of {} bytes echoed byte-exact",
            sent.len()
        );
    }
    // SIGTERM: imp stops cleanly, counting the connection.
    let pid = server.0.as_ref().unwrap().id() as i32;
    // SAFETY: kill has no memory arguments; the pid is our own live child.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let out = common::wait_limited(server, Duration::from_secs(10));
    assert!(
        out.status.success(),
        "imp serve exit: {}",
        common::text(&out)
    );
    let rest = rest.join().expect("stdout reader");
    assert!(rest.contains("stopped after 1 connections"), "{rest}");
}

#[test]
fn quic_options_are_checked() {
    for (args, want) in [
        (&["--quic-echo", "0"][..], "--quic-echo 0"),
        (
            &["--quic-cert", "/tmp/x.der"][..],
            "--quic-cert needs --quic-echo",
        ),
        (&["--echo", "--quic-echo", "7"][..], "UDP echo's port"),
    ] {
        let mut all = vec!["serve", "--tap", "imp-none0", "--addr", "10.0.0.2/24"];
        all.extend_from_slice(args);
        let out = std::process::Command::new(IMP)
            .args(&all)
            .output()
            .expect("imp");
        assert!(!out.status.success(), "{args:?} must fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}
