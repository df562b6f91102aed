//! An unmodified axum app served over imp's tokio API answers `curl` from the kernel
//! side: the only imp-specific piece is the `axum::serve::Listener` adapter. Needs root
//! (skips without) and the `tokio` feature.
#![cfg(feature = "tokio")]
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

mod common;

use std::io;
use std::net::SocketAddr;

use axum::Router;
use axum::routing::get;
use common::{Link, have};

/// imp's async listener as axum's `Listener`.
struct ImpListener(impnet::tokio::TcpListener);

impl axum::serve::Listener for ImpListener {
    type Io = impnet::tokio::TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.0.accept().await {
                Ok(pair) => return pair,
                // As axum's own TcpListener: log, back off, go on.
                Err(e) => {
                    eprintln!("accept: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

#[test]
fn axum_on_imp_answers_curl() {
    let Some(link) = Link::new(53, false) else {
        return;
    };
    if !have("curl") {
        return;
    }
    let listener = impnet::tokio::TcpListener::bind(&link.rt, (link.imp_addr, 80)).expect("listen");
    let app = Router::new()
        .route("/", get(|| async { "hello from axum over imp\n" }))
        .route(
            "/big",
            get(|| async { "0123456789abcdef".repeat(64 * 1024) }),
        );
    let base = format!("http://{}", link.imp_addr);
    let ns_name = link.ns.name.clone();
    let client = std::thread::spawn(move || {
        let script = format!(
            "curl -sS -m 10 {base}/ && \
             curl -sS -m 10 -o /dev/null -w '%{{http_code}} %{{size_download}}\\n' {base}/big && \
             curl -sS -m 10 -o /dev/null -w '%{{http_code}}\\n' {base}/missing"
        );
        std::process::Command::new("ip")
            .args(["netns", "exec", &ns_name, "sh", "-c", &script])
            .output()
            .expect("curl")
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let out = rt.block_on(async move {
        let server = tokio::spawn(async move {
            axum::serve(ImpListener(listener), app).await.unwrap();
        });
        let out = tokio::task::spawn_blocking(move || client.join().unwrap())
            .await
            .unwrap();
        server.abort();
        out
    });
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "curl: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        text, "hello from axum over imp\n200 1048576\n404\n",
        "{text}"
    );
}
