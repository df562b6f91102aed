//! An unmodified quinn server and client endpoint on simulated hosts, over the simulated
//! UDP (quinn's abstract socket, [`quinn::AsyncUdpSocket`], over
//! [`impnet_sim_tokio::net::UdpSocket`]), replayed byte for byte from the seed.
//!
//! Every random or wall-clock input of quinn and rustls is given by the test from the
//! seed and the virtual clock, through their own configuration:
//! - quinn: the endpoint's rng ([`quinn::EndpointConfig::rng_seed`]: per-connection
//!   rngs, packet-number skips, transport-parameter grease), the connection IDs (a
//!   seeded [`quinn::ConnectionIdGenerator`], a seeded client initial destination ID),
//!   the stateless-reset key, the address-validation token key, and the token clock
//!   ([`quinn::TimeSource`], virtual time);
//! - rustls: a crypto provider of ring's whose `secure_random` is a seeded generator
//!   (client and server randoms, session tickets) and whose only key exchange is X25519
//!   with private keys drawn from that generator (through ring's fixed-output test
//!   generator, as ring's own X25519 draws from the system); the certificate and its
//!   key are Ed25519 from a fixed key (Ed25519 signatures are deterministic, ring's
//!   ECDSA ones are not), and the certificate-validity clock is the virtual one.
//!
//! So the configuration here is for tests, not for a deployment: the keys are
//! predictable from the seed.

mod common;

use std::cell::Cell;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use impnet_sim_tokio::net::UdpSocket;
use impnet_sim_tokio::{HostId, Sim};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::rustls::{self, crypto::CryptoProvider, pki_types};
use quinn::udp::{RecvMeta, Transmit};
use quinn::{ConnectionError, ConnectionId, ConnectionIdGenerator};
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

/// An imp simulated UDP socket as quinn's socket: one datagram per call each way.
#[derive(Debug)]
struct SimSocket(UdpSocket);

impl quinn::AsyncUdpSocket for SimSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn quinn::UdpPoller>> {
        Box::pin(Poller(self))
    }

    fn try_send(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        let size = (transmit.segment_size)
            .unwrap_or(transmit.contents.len())
            .max(1);
        for datagram in transmit.contents.chunks(size) {
            self.0.try_send_to(datagram, transmit.destination)?;
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
            return match self.0.poll_recv_from(cx, buf) {
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
                // An ICMP error an earlier datagram met (the crashed server's port
                // unreachable): QUIC has its own timers for a lost peer.
                Poll::Ready(Err(e)) if e.kind() != io::ErrorKind::NotConnected => continue,
                other => other.map_ok(|_| 0),
            };
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

#[derive(Debug)]
struct Poller(Arc<SimSocket>);

impl quinn::UdpPoller for Poller {
    fn poll_writable(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.0.poll_send_ready(cx)
    }
}

/// Wall-clock time as the endpoints see it: a fixed date plus the virtual time.
#[derive(Debug)]
struct VirtualClock;

impl VirtualClock {
    fn since_epoch() -> Duration {
        Duration::from_secs(1_800_000_000) + impnet_sim_tokio::elapsed().unwrap_or_default()
    }
}

impl rustls::time_provider::TimeProvider for VirtualClock {
    fn current_time(&self) -> Option<pki_types::UnixTime> {
        Some(pki_types::UnixTime::since_unix_epoch(Self::since_epoch()))
    }
}

impl quinn::TimeSource for VirtualClock {
    fn now(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Self::since_epoch()
    }
}

/// rustls's randomness, from a seed.
#[derive(Debug)]
struct SeededRandom(Mutex<SmallRng>);

impl rustls::crypto::SecureRandom for SeededRandom {
    fn fill(&self, buf: &mut [u8]) -> Result<(), rustls::crypto::GetRandomFailed> {
        self.0.lock().unwrap().fill_bytes(buf);
        Ok(())
    }
}

/// X25519 whose private keys come from a [`SeededRandom`].
#[derive(Debug)]
struct SeededX25519(&'static SeededRandom);

impl rustls::crypto::SupportedKxGroup for SeededX25519 {
    fn start(&self) -> Result<Box<dyn rustls::crypto::ActiveKeyExchange>, rustls::Error> {
        use rustls::crypto::SecureRandom;
        let mut seed = [0; 32];
        self.0.fill(&mut seed)?;
        #[allow(deprecated)] // ring's fixed-output generator lives in its `test` module
        let fixed = ring::test::rand::FixedSliceRandom { bytes: &seed };
        let private =
            ring::agreement::EphemeralPrivateKey::generate(&ring::agreement::X25519, &fixed)
                .map_err(|_| rustls::Error::FailedToGetRandomBytes)?;
        let public = (private.compute_public_key())
            .map_err(|_| rustls::Error::FailedToGetRandomBytes)?
            .as_ref()
            .to_vec();
        Ok(Box::new(X25519Exchange { private, public }))
    }

    fn name(&self) -> rustls::NamedGroup {
        rustls::NamedGroup::X25519
    }
}

struct X25519Exchange {
    private: ring::agreement::EphemeralPrivateKey,
    public: Vec<u8>,
}

impl rustls::crypto::ActiveKeyExchange for X25519Exchange {
    fn complete(
        self: Box<Self>,
        peer: &[u8],
    ) -> Result<rustls::crypto::SharedSecret, rustls::Error> {
        let peer = ring::agreement::UnparsedPublicKey::new(&ring::agreement::X25519, peer);
        ring::agreement::agree_ephemeral(self.private, &peer, |secret: &[u8]| {
            rustls::crypto::SharedSecret::from(secret)
        })
        .map_err(|_| rustls::PeerMisbehaved::InvalidKeyShare.into())
    }

    fn pub_key(&self) -> &[u8] {
        &self.public
    }

    fn group(&self) -> rustls::NamedGroup {
        rustls::NamedGroup::X25519
    }
}

/// A seeded 64-bit generator (a stream of `seed`).
fn rng(seed: u64) -> SmallRng {
    SmallRng::seed_from_u64(seed)
}

/// ring's crypto provider with its randomness and key exchange drawn from `seed`.
fn provider(seed: u64) -> Arc<CryptoProvider> {
    // rustls takes them as `&'static`: one small leak per endpoint, in a test.
    let random: &'static SeededRandom = Box::leak(Box::new(SeededRandom(Mutex::new(rng(seed)))));
    let x25519: &'static SeededX25519 = Box::leak(Box::new(SeededX25519(random)));
    Arc::new(CryptoProvider {
        kx_groups: vec![x25519],
        secure_random: random,
        ..rustls::crypto::ring::default_provider()
    })
}

/// The server's certificate (for the name "server") and its key: Ed25519 from a fixed
/// 32-byte seed, in PKCS#8 v1.
fn certificate() -> (
    pki_types::CertificateDer<'static>,
    pki_types::PrivateKeyDer<'static>,
) {
    const ED25519_PKCS8_PREFIX: [u8; 16] = [
        0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04,
        0x20,
    ];
    let mut pkcs8 = ED25519_PKCS8_PREFIX.to_vec();
    pkcs8.extend([0x5a; 32]);
    let key = pki_types::PrivateKeyDer::from(pki_types::PrivatePkcs8KeyDer::from(pkcs8));
    let pair = rcgen::KeyPair::try_from(&key).unwrap();
    let params = rcgen::CertificateParams::new(vec!["server".to_string()]).unwrap();
    let cert = params.self_signed(&pair).unwrap();
    (cert.der().clone(), key)
}

/// Connection IDs of 8 bytes from a seeded generator.
struct SeededCids(SmallRng);

impl ConnectionIdGenerator for SeededCids {
    fn generate_cid(&mut self) -> ConnectionId {
        ConnectionId::new(&self.0.next_u64().to_le_bytes())
    }

    fn cid_len(&self) -> usize {
        8
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

/// The endpoint configuration of every endpoint: its rng and connection IDs from
/// `seed`, its stateless-reset key from `reset_seed` (a server keeps it across its
/// restarts, so that its peers learn the old connections are gone).
fn endpoint_config(seed: u64, reset_seed: u64) -> quinn::EndpointConfig {
    let mut reset_key = [0; 64];
    rng(reset_seed).fill_bytes(&mut reset_key);
    let reset_key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &reset_key);
    let mut config = quinn::EndpointConfig::new(Arc::new(reset_key));
    let mut endpoint_seed = [0; 32];
    rng(seed ^ 0xe0).fill_bytes(&mut endpoint_seed);
    config.rng_seed(Some(endpoint_seed));
    config.cid_generator(move || Box::new(SeededCids(rng(seed ^ 0xc1d))));
    config
}

/// An endpoint on `addr` of the current simulated host.
async fn endpoint(
    addr: &str,
    config: quinn::EndpointConfig,
    server: Option<quinn::ServerConfig>,
) -> quinn::Endpoint {
    let socket = UdpSocket::bind(addr).await.unwrap();
    quinn::Endpoint::new_with_abstract_socket(
        config,
        server,
        Arc::new(SimSocket(socket)),
        Arc::new(quinn::TokioRuntime),
    )
    .unwrap()
}

/// The server's software (start number `generation`): answer each bidirectional stream
/// with the request reversed, followed by the generation.
async fn serve(seed: u64, generation: u32) {
    let start_seed = seed ^ (u64::from(generation) << 32);
    let (cert, key) = certificate();
    let tls =
        rustls::ServerConfig::builder_with_details(provider(start_seed), Arc::new(VirtualClock))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .unwrap();
    let mut token_key = [0; 64];
    rng(start_seed ^ 0x70c).fill_bytes(&mut token_key);
    let token_key = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, &[]).extract(&token_key);
    let mut config = quinn::ServerConfig::new(
        Arc::new(QuicServerConfig::try_from(tls).unwrap()),
        Arc::new(token_key),
    );
    config.time_source(Arc::new(VirtualClock));
    let endpoint = endpoint(
        "10.0.0.1:4433",
        endpoint_config(start_seed, seed),
        Some(config),
    )
    .await;
    while let Some(incoming) = endpoint.accept().await {
        tokio::spawn(async move {
            let Ok(connection) = incoming.await else {
                return;
            };
            while let Ok((mut send, mut recv)) = connection.accept_bi().await {
                tokio::spawn(async move {
                    let Ok(mut request) = recv.read_to_end(1 << 20).await else {
                        return;
                    };
                    request.reverse();
                    request.extend(generation.to_be_bytes());
                    let _ = send.write_all(&request).await;
                    let _ = send.finish();
                });
            }
        });
    }
}

/// Give `server` the QUIC service; returns how many times it has started.
fn install_server(sim: &mut Sim, server: HostId) -> Rc<Cell<u32>> {
    let seed = sim.seed();
    let starts = Rc::new(Cell::new(0));
    let counter = Rc::clone(&starts);
    sim.software(server, move || {
        counter.set(counter.get() + 1);
        serve(seed, counter.get())
    });
    starts
}

/// The client's endpoint, trusting the server's certificate.
async fn client_endpoint(seed: u64) -> quinn::Endpoint {
    let client_seed = seed ^ 0xc11e47;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(certificate().0).unwrap();
    let tls =
        rustls::ClientConfig::builder_with_details(provider(client_seed), Arc::new(VirtualClock))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    let mut config = quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls).unwrap()));
    let initial = Mutex::new(rng(client_seed ^ 0x1d));
    config.initial_dst_cid_provider(Arc::new(move || {
        let mut id = [0; 16];
        initial.lock().unwrap().fill_bytes(&mut id);
        ConnectionId::new(&id)
    }));
    let mut endpoint = endpoint(
        "10.0.0.2:0",
        endpoint_config(client_seed, client_seed),
        None,
    )
    .await;
    endpoint.set_default_client_config(config);
    endpoint
}

/// Connect to the server by name.
async fn connect(endpoint: &quinn::Endpoint) -> Result<quinn::Connection, ConnectionError> {
    let addr = SocketAddr::new(impnet_sim_tokio::net::lookup("server").unwrap(), 4433);
    endpoint.connect(addr, "server").unwrap().await
}

/// Request `seq` of `len` bytes on a new stream of `connection`; checks the answer is
/// the request reversed and returns the generation of the server that answered.
async fn request(
    connection: &quinn::Connection,
    seq: u32,
    len: usize,
) -> Result<u32, ConnectionError> {
    let lost = |connection: &quinn::Connection| {
        connection
            .close_reason()
            .unwrap_or(ConnectionError::LocallyClosed)
    };
    let (mut send, mut recv) = connection.open_bi().await?;
    let sent = common::payload(seq, len);
    send.write_all(&sent).await.map_err(|_| lost(connection))?;
    send.finish().map_err(|_| lost(connection))?;
    let answer = recv
        .read_to_end(1 << 20)
        .await
        .map_err(|_| lost(connection))?;
    let (reversed, generation) = answer.split_at(answer.len() - 4);
    assert!(
        reversed.iter().rev().eq(sent.iter()),
        "request {seq}: the answer differs"
    );
    Ok(u32::from_be_bytes(generation.try_into().unwrap()))
}

/// Requests of growing size (up to 200 kB), one after another on one connection.
async fn requests(seed: u64) -> Vec<u32> {
    let endpoint = client_endpoint(seed).await;
    let connection = connect(&endpoint).await.unwrap();
    let mut generations = Vec::new();
    for (seq, len) in common::SIZES.into_iter().enumerate() {
        generations.push(request(&connection, seq as u32, len).await.unwrap());
    }
    connection.close(0u32.into(), b"done");
    endpoint.wait_idle().await;
    generations
}

#[test]
fn quinn_pair_exchanges_data() {
    common::assert_exchange(install_server, requests(1));
}

#[test]
fn quinn_same_seed_same_capture_other_seed_differs() {
    common::assert_replays(31, |seed| {
        common::lossy_capture(
            seed,
            "quinn",
            |sim, server| drop(install_server(sim, server)),
            requests(seed),
        )
    });
}

#[test]
fn quinn_partition_then_crash_and_restart() {
    let (mut sim, server, client, link) = common::pair(3, common::path(10_000_000, 20, 0.0));
    let starts = install_server(&mut sim, server);
    let task = sim.spawn(client, async {
        let endpoint = client_endpoint(3).await;
        let connection = connect(&endpoint).await.unwrap();
        let generation = request(&connection, 0, 1_000).await;
        (endpoint, connection, generation)
    });
    let (endpoint, connection, generation) = sim
        .run_until_complete(task, Duration::from_secs(10))
        .unwrap();
    assert_eq!(generation, Ok(1));

    // A partition: the request times out (the client's own deadline, in virtual time).
    sim.partition(link);
    let task = sim.spawn(client, async move {
        let outcome =
            tokio::time::timeout(Duration::from_secs(3), request(&connection, 1, 1_000)).await;
        (connection, outcome.is_err())
    });
    let (connection, timed_out) = sim
        .run_until_complete(task, Duration::from_secs(30))
        .unwrap();
    assert!(timed_out, "a request crossed the partition");

    // The heal: the next request goes through on the same connection.
    sim.heal(link);
    let task = sim.spawn(client, async move {
        let generation = request(&connection, 2, 20_000).await;
        (connection, generation)
    });
    let (connection, generation) = sim
        .run_until_complete(task, Duration::from_secs(60))
        .unwrap();
    assert_eq!(generation, Ok(1));

    // A crash: the client's request on its connection goes unanswered until the
    // server restarts (2 s later); the restarted server, which keeps its reset key,
    // answers the old connection's packets with a stateless reset, and the client
    // connects again and gets its answer from the new server.
    sim.crash(server);
    let task = sim.spawn(client, async move {
        let lost = request(&connection, 3, 1_000).await;
        let connection = connect(&endpoint).await.unwrap();
        (lost, request(&connection, 4, 1_000).await)
    });
    sim.run_for(Duration::from_secs(2)).unwrap();
    sim.restart(server);
    let (lost, generation) = sim
        .run_until_complete(task, Duration::from_secs(90))
        .unwrap();
    assert_eq!(lost, Err(ConnectionError::Reset));
    assert_eq!(generation, Ok(2));
    assert_eq!(starts.get(), 2);
}
