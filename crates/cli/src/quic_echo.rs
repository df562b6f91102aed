//! `imp serve --quic-echo [PORT]`: a QUIC echo server (quinn over imp's UDP, see
//! `impnet::quic`): each bidirectional stream a client opens is sent back as it came,
//! then finished. The server has a new self-signed certificate for imp's addresses
//! (and the name `imp`); `--quic-cert FILE` writes it (DER) for clients to trust.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use impnet::Runtime;
use impnet::quic::{self, quinn};
use impnet::tokio::UdpSocket;

/// The ALPN-free QUIC echo's largest stream: what a client sends beyond it is refused.
const MAX_STREAM: usize = 64 << 20;

/// How often the accept loop looks whether `imp serve` is stopping.
const STOP_CHECK: Duration = Duration::from_millis(200);

/// The server's endpoint and certificate, made before `imp serve` reports it is up.
pub struct QuicEcho {
    /// The certificate's subject names.
    names: Vec<String>,
    server: quinn::ServerConfig,
    /// Bound before `imp serve` says it is up, so a client's first packet finds it.
    socket: UdpSocket,
}

impl QuicEcho {
    /// A server on `rt` at `local` with a self-signed certificate for `ips`, written
    /// to `cert_out` when given.
    pub fn new(
        rt: &Runtime,
        local: SocketAddr,
        ips: &[IpAddr],
        cert_out: Option<&Path>,
    ) -> Result<QuicEcho, String> {
        let mut names = vec!["imp".to_string()];
        names.extend(ips.iter().map(IpAddr::to_string));
        let (server, cert) = quic::self_signed(names.clone()).map_err(|e| e.to_string())?;
        if let Some(path) = cert_out {
            std::fs::write(path, cert.as_ref())
                .map_err(|e| format!("--quic-cert {}: {e}", path.display()))?;
        }
        let socket = UdpSocket::bind(rt, local)
            .map_err(|e| format!("cannot bind UDP {local} for quic-echo: {e}"))?;
        Ok(QuicEcho {
            names,
            server,
            socket,
        })
    }

    /// What the startup line says about it.
    pub fn describe(&self) -> String {
        let port = self.socket.local_addr().map_or(0, |a| a.port());
        format!(
            "quic-echo ({port}, certificate for {})",
            self.names.join(" ")
        )
    }

    /// Serve until `stop` is set or the runtime stops; counts connections.
    pub fn run(self, stop: &AtomicBool, connections: &AtomicU64) -> io::Result<()> {
        let tokio = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()?;
        tokio.block_on(async move {
            let endpoint = quic::endpoint_on(self.socket, Some(self.server))?;
            while !stop.load(Ordering::Relaxed) {
                let incoming = match tokio::time::timeout(STOP_CHECK, endpoint.accept()).await {
                    Err(_) => continue,
                    // The endpoint stopped: the imp runtime was shut down.
                    Ok(None) => break,
                    Ok(Some(incoming)) => incoming,
                };
                connections.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(serve_connection(incoming));
            }
            endpoint.close(0u32.into(), b"imp serve stopping");
            Ok(())
        })
    }
}

/// Echo every bidirectional stream of one connection until it closes.
async fn serve_connection(incoming: quinn::Incoming) {
    let connection = match incoming.await {
        Ok(connection) => connection,
        Err(e) => {
            eprintln!("imp serve: quic-echo: handshake failed: {e}");
            return;
        }
    };
    let peer = connection.remote_address();
    while let Ok((send, recv)) = connection.accept_bi().await {
        tokio::spawn(async move {
            if let Err(e) = echo_stream(send, recv).await {
                eprintln!("imp serve: quic-echo with {peer}: {e}");
            }
        });
    }
}

/// Send back what arrives on one stream, piece by piece, then finish it.
async fn echo_stream(
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
) -> Result<(), String> {
    let mut total = 0usize;
    while let Some(chunk) = recv
        .read_chunk(64 * 1024, true)
        .await
        .map_err(|e| e.to_string())?
    {
        total += chunk.bytes.len();
        if total > MAX_STREAM {
            let _ = recv.stop(1u32.into());
            return Err(format!("stream longer than {MAX_STREAM} bytes: stopped"));
        }
        send.write_all(&chunk.bytes)
            .await
            .map_err(|e| e.to_string())?;
    }
    send.finish().map_err(|e| e.to_string())?;
    let _ = send.stopped().await;
    Ok(())
}
