//! QUIC over imp (feature `quic`): quinn endpoints whose UDP
//! socket is an imp [`crate::tokio::UdpSocket`], through quinn's abstract
//! socket interface ([`quinn::AsyncUdpSocket`] and [`quinn::UdpPoller`]). Timers and
//! tasks are tokio's ([`quinn::TokioRuntime`]); the datagrams go through imp.
//!
//! ```no_run
//! # async fn f(rt: &impnet::Runtime, server: impnet::quic::quinn::ServerConfig) -> std::io::Result<()> {
//! let endpoint = impnet::quic::endpoint(rt, "0.0.0.0:4433", Some(server))?;
//! while let Some(incoming) = endpoint.accept().await {
//!     // ...
//! #   drop(incoming);
//! }
//! # Ok(()) }
//! ```

use std::io::{self, IoSliceMut};
use std::net::{SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

pub use quinn;
use quinn::rustls;
use quinn::udp::{RecvMeta, Transmit};

use crate::Runtime;
use crate::tokio::UdpSocket;

/// A quinn endpoint on `addr` over imp (a server when `server` is given; any endpoint
/// can open connections with [`quinn::Endpoint::connect_with`] or after
/// [`quinn::Endpoint::set_default_client_config`]). Must be called inside a tokio
/// runtime with its timer enabled: quinn spawns its driver there.
pub fn endpoint(
    rt: &Runtime,
    addr: impl ToSocketAddrs,
    server: Option<quinn::ServerConfig>,
) -> io::Result<quinn::Endpoint> {
    endpoint_on(UdpSocket::bind(rt, addr)?, server)
}

/// A quinn endpoint on a socket already bound (as [`endpoint`] does).
pub fn endpoint_on(
    socket: UdpSocket,
    server: Option<quinn::ServerConfig>,
) -> io::Result<quinn::Endpoint> {
    quinn::Endpoint::new_with_abstract_socket(
        quinn::EndpointConfig::default(),
        server,
        Arc::new(QuicSocket::new(socket)),
        Arc::new(quinn::TokioRuntime),
    )
}

/// A server configuration with a new self-signed certificate for `names` (DNS names
/// or IP addresses), and that certificate, for clients to trust.
pub fn self_signed(
    names: Vec<String>,
) -> io::Result<(
    quinn::ServerConfig,
    rustls::pki_types::CertificateDer<'static>,
)> {
    let invalid = |e: &dyn std::fmt::Display| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("self-signed certificate: {e}"),
        )
    };
    let certified = rcgen::generate_simple_self_signed(names).map_err(|e| invalid(&e))?;
    let cert = certified.cert.der().clone();
    let key = rustls::pki_types::PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der());
    let config = quinn::ServerConfig::with_single_cert(vec![cert.clone()], key.into())
        .map_err(|e| invalid(&e))?;
    Ok((config, cert))
}

/// A client configuration that trusts `cert` (and nothing else).
pub fn client_trusting(
    cert: rustls::pki_types::CertificateDer<'static>,
) -> io::Result<quinn::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(cert)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    quinn::ClientConfig::with_root_certificates(Arc::new(roots))
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// An imp UDP socket as quinn's [`quinn::AsyncUdpSocket`]: one datagram per call each
/// way (no GSO or GRO batches), no ECN.
#[derive(Debug)]
pub struct QuicSocket {
    socket: UdpSocket,
}

impl QuicSocket {
    /// Wrap `socket` for [`quinn::Endpoint::new_with_abstract_socket`].
    pub fn new(socket: UdpSocket) -> QuicSocket {
        QuicSocket { socket }
    }
}

impl quinn::AsyncUdpSocket for QuicSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn quinn::UdpPoller>> {
        Box::pin(Poller { socket: self })
    }

    /// Sends the datagram, or each `segment_size` piece of a batch (quinn batches
    /// only when `max_transmit_segments` says more than one, which is never here).
    fn try_send(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        let size = transmit
            .segment_size
            .unwrap_or(transmit.contents.len())
            .max(1);
        for datagram in transmit.contents.chunks(size) {
            self.socket.try_send_to(datagram, transmit.destination)?;
        }
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let (Some(buf), Some(meta)) = (bufs.first_mut(), meta.first_mut()) else {
            return Poll::Ready(Ok(0));
        };
        loop {
            return match self.socket.poll_recv_slice(cx, buf) {
                Poll::Ready(Ok((len, addr))) => {
                    *meta = RecvMeta {
                        addr,
                        len,
                        stride: len,
                        ecn: None,
                        dst_ip: None,
                    };
                    Poll::Ready(Ok(1))
                }
                // An ICMP error an earlier datagram met: QUIC has its own timers for
                // lost peers, and a kernel socket would not report it unconnected.
                Poll::Ready(Err(e)) if delivery_error(&e) => continue,
                other => other.map_ok(|_| 0),
            };
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }
}

/// Whether `e` is an ICMP-reported delivery failure of an earlier datagram, the only
/// errors a receive reports besides the socket or runtime being gone (`NotConnected`).
fn delivery_error(e: &io::Error) -> bool {
    e.kind() != io::ErrorKind::NotConnected
}

/// quinn's writability poller for a [`QuicSocket`].
#[derive(Debug)]
struct Poller {
    socket: Arc<QuicSocket>,
}

impl quinn::UdpPoller for Poller {
    fn poll_writable(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.socket.socket.poll_send_ready(cx)
    }
}
