//! The async API: a tokio HTTP server on imp answers `curl` from the kernel side, and a
//! tokio client on imp downloads from a kernel-side server. Needs root (skips without)
//! and the `tokio` feature.
#![cfg(feature = "tokio")]
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

mod common;

use common::{Link, have};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn handle(mut stream: impnet::tokio::TcpStream) {
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.expect("read");
        if n == 0 {
            return;
        }
        request.extend_from_slice(&buf[..n]);
    }
    let path = String::from_utf8_lossy(&request)
        .split_whitespace()
        .nth(1)
        .unwrap_or("/")
        .to_string();
    let body = format!("hello from tokio over imp: {path}\n").repeat(1000);
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    stream.write_all(body.as_bytes()).await.expect("body");
    stream.shutdown().await.expect("shutdown");
}

#[test]
fn tokio_server_on_imp_answers_curl() {
    let Some(link) = Link::new(41, false) else {
        return;
    };
    if !have("curl") {
        return;
    }
    let listener = impnet::tokio::TcpListener::bind(&link.rt, (link.imp_addr, 80)).expect("listen");
    let urls: Vec<String> = (0..3)
        .map(|i| format!("http://{}/page{i}", link.imp_addr))
        .collect();
    let ns_name = link.ns.name.clone();
    let client = std::thread::spawn(move || {
        let mut args = vec!["netns", "exec", &ns_name, "curl", "-sS", "--max-time", "10"];
        args.extend(urls.iter().map(String::as_str));
        std::process::Command::new("ip")
            .args(&args)
            .output()
            .expect("curl")
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let mut tasks = Vec::new();
                for _ in 0..3 {
                    let (stream, _) = listener.accept().await.expect("accept");
                    tasks.push(tokio::task::spawn_local(handle(stream)));
                }
                for t in tasks {
                    t.await.expect("handler");
                }
            })
            .await;
    });
    let out = client.join().expect("client thread");
    assert!(
        out.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for i in 0..3 {
        let line = format!("hello from tokio over imp: /page{i}\n");
        assert_eq!(text.matches(&line).count(), 1000, "page {i}");
    }
}

#[test]
fn tokio_client_on_imp_downloads_from_linux() {
    let Some(link) = Link::new(42, true) else {
        return;
    };
    if !have("python3") {
        return;
    }
    let script = "
import socket, sys
s = socket.socket()
s.bind((sys.argv[1], 8000))
s.listen(1)
print('ready', flush=True)
c, _ = s.accept()
c.sendall(bytes(range(256)) * 4096)
c.close()
";
    let kernel = link.kernel_addr.to_string();
    let mut server = link.ns.spawn("python3", &["-u", "-c", script, &kernel]);
    {
        use std::io::BufRead;
        let stdout = server.0.as_mut().unwrap().stdout.as_mut().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .unwrap();
        assert!(line.contains("ready"));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let got = rt.block_on(async {
        let mut stream = impnet::tokio::TcpStream::connect(&link.rt, (link.kernel_addr, 8000))
            .await
            .expect("connect");
        let mut got = Vec::new();
        stream.read_to_end(&mut got).await.expect("read");
        got
    });
    let want: Vec<u8> = (0..4096).flat_map(|_| 0..=255u8).collect();
    assert!(got == want, "got {} bytes", got.len());
}
