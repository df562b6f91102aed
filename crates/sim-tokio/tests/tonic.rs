//! An unmodified tonic gRPC server and client on simulated hosts, over the simulated
//! TCP: tonic's server takes the accepted connections as its incoming stream, its
//! client's channel dials through a connector. The messages are prost structs and the
//! service is written out as tonic's code generator writes it (so no `protoc` at build
//! time). The pair exchanges messages byte for byte, a seed replays its run to the same
//! capture byte for byte, a partition times a call out and the heal lets the next one
//! through on the same connection, and a crashed server's client sees its call in
//! flight fail on the reset and its retries refused (`Unavailable`) until the restarted
//! server answers one.

mod common;

use std::cell::Cell;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use impnet_sim_tokio::net::{TcpListener, TcpStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::codegen::http::{self, Uri, uri::PathAndQuery};
use tonic::codegen::{GrpcMethod, Service, tokio_stream::Stream};
use tonic::server::{NamedService, UnaryService};
use tonic::transport::server::Connected;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Code, Status};
use tonic_prost::ProstCodec;

/// What `impnet.test.Echo/Echo` takes: a sequence number and a payload.
#[derive(Clone, PartialEq, prost::Message)]
struct EchoRequest {
    #[prost(uint32, tag = "1")]
    seq: u32,
    #[prost(bytes = "vec", tag = "2")]
    payload: Vec<u8>,
}

/// What it answers: the number, the payload reversed, and which start of the server
/// answered (1 before its crash, 2 after its restart).
#[derive(Clone, PartialEq, prost::Message)]
struct EchoReply {
    #[prost(uint32, tag = "1")]
    seq: u32,
    #[prost(bytes = "vec", tag = "2")]
    payload: Vec<u8>,
    #[prost(uint32, tag = "3")]
    generation: u32,
}

const SERVICE: &str = "impnet.test.Echo";
const METHOD_PATH: &str = "/impnet.test.Echo/Echo";

/// The server side of the service, as tonic's codegen would write it.
#[derive(Clone)]
struct EchoServer {
    generation: u32,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl Service<http::Request<tonic::body::Body>> for EchoServer {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let generation = self.generation;
        if request.uri().path() != METHOD_PATH {
            return Box::pin(async {
                Ok(common::dated(
                    Status::unimplemented("no such method").into_http(),
                ))
            });
        }
        Box::pin(async move {
            let mut grpc =
                tonic::server::Grpc::new(ProstCodec::<EchoReply, EchoRequest>::default());
            Ok(common::dated(
                grpc.unary(Echo { generation }, request).await,
            ))
        })
    }
}

impl NamedService for EchoServer {
    const NAME: &'static str = SERVICE;
}

/// The method's handler.
struct Echo {
    generation: u32,
}

impl UnaryService<EchoRequest> for Echo {
    type Response = EchoReply;
    type Future = BoxFuture<tonic::Response<EchoReply>, Status>;

    fn call(&mut self, request: tonic::Request<EchoRequest>) -> Self::Future {
        let generation = self.generation;
        Box::pin(async move {
            let EchoRequest { seq, mut payload } = request.into_inner();
            payload.reverse();
            Ok(tonic::Response::new(EchoReply {
                seq,
                payload,
                generation,
            }))
        })
    }
}

/// The client side, as tonic's codegen would write it.
#[derive(Clone)]
struct EchoClient {
    inner: tonic::client::Grpc<Channel>,
}

impl EchoClient {
    /// A client whose channel dials "server:50051" over the simulated TCP when first
    /// used, and again after its connection broke.
    fn new() -> EchoClient {
        let connector = tower::service_fn(|uri: Uri| async move {
            let host = uri.host().unwrap_or_default().to_string();
            let stream = TcpStream::connect((host.as_str(), uri.port_u16().unwrap_or(80))).await?;
            Ok::<_, io::Error>(TokioIo::new(stream))
        });
        let channel =
            Endpoint::from_static("http://server:50051").connect_with_connector_lazy(connector);
        EchoClient {
            inner: tonic::client::Grpc::new(channel),
        }
    }

    async fn echo(&mut self, request: EchoRequest) -> Result<EchoReply, Status> {
        self.inner
            .ready()
            .await
            .map_err(|e| Status::unknown(format!("service was not ready: {e}")))?;
        let mut request = tonic::Request::new(request);
        request
            .extensions_mut()
            .insert(GrpcMethod::new(SERVICE, "Echo"));
        let path = PathAndQuery::from_static(METHOD_PATH);
        let codec = ProstCodec::<EchoRequest, EchoReply>::default();
        Ok(self.inner.unary(request, path, codec).await?.into_inner())
    }
}

/// An accepted simulated connection as tonic's server takes it.
struct Conn(TcpStream);

impl Connected for Conn {
    type ConnectInfo = Option<std::net::SocketAddr>;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.0.peer_addr().ok()
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// The listener's connections as the stream `serve_with_incoming` takes.
struct Incoming(TcpListener);

impl Stream for Incoming {
    type Item = io::Result<Conn>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0
            .poll_accept(cx)
            .map(|accepted| Some(accepted.map(|(stream, _)| Conn(stream))))
    }
}

/// The server's software: tonic's server on port 50051.
async fn serve(generation: u32) {
    let listener = TcpListener::bind("10.0.0.1:50051").await.unwrap();
    Server::builder()
        .add_service(EchoServer { generation })
        .serve_with_incoming(Incoming(listener))
        .await
        .unwrap();
}

/// Give `server` the echo service; returns how many times it has started.
fn install_server(
    sim: &mut impnet_sim_tokio::Sim,
    server: impnet_sim_tokio::HostId,
) -> Rc<Cell<u32>> {
    let starts = Rc::new(Cell::new(0));
    let counter = Rc::clone(&starts);
    sim.software(server, move || {
        counter.set(counter.get() + 1);
        serve(counter.get())
    });
    starts
}

/// Call `seq` with a `len`-byte payload and check the answer is the payload reversed;
/// returns the generation of the server that answered.
async fn call(client: &mut EchoClient, seq: u32, len: usize) -> Result<u32, Status> {
    let sent = common::payload(seq, len);
    let reply = client
        .echo(EchoRequest {
            seq,
            payload: sent.clone(),
        })
        .await?;
    assert_eq!(reply.seq, seq);
    let mut expected = sent;
    expected.reverse();
    assert!(reply.payload == expected, "call {seq}: the payload differs");
    Ok(reply.generation)
}

/// Calls of growing payloads (up to 200 kB), one after another on one channel.
async fn calls() -> Vec<u32> {
    let mut client = EchoClient::new();
    let mut generations = Vec::new();
    for (seq, len) in common::SIZES.into_iter().enumerate() {
        generations.push(call(&mut client, seq as u32, len).await.unwrap());
    }
    generations
}

#[test]
fn tonic_pair_exchanges_messages() {
    common::assert_exchange(install_server, calls());
}

#[test]
fn tonic_same_seed_same_capture_other_seed_differs() {
    common::assert_replays(21, |seed| {
        common::lossy_capture(
            seed,
            "tonic",
            |sim, server| drop(install_server(sim, server)),
            calls(),
        )
    });
}

#[test]
fn tonic_partition_then_crash_and_restart() {
    let (mut sim, server, client, link) = common::pair(3, common::path(10_000_000, 20, 0.0));
    let starts = install_server(&mut sim, server);
    let task = sim.spawn(client, async {
        let mut client = EchoClient::new();
        let generation = call(&mut client, 0, 1_000).await;
        (client, generation)
    });
    let (client_app, generation) = sim
        .run_until_complete(task, Duration::from_secs(10))
        .unwrap();
    assert_eq!(generation.unwrap(), 1);

    // A partition: the call times out (the client's own deadline, in virtual time).
    sim.partition(link);
    let task = sim.spawn(client, async move {
        let mut client = client_app;
        let outcome =
            tokio::time::timeout(Duration::from_secs(3), call(&mut client, 1, 1_000)).await;
        (client, outcome.is_err())
    });
    let (client_app, timed_out) = sim
        .run_until_complete(task, Duration::from_secs(30))
        .unwrap();
    assert!(timed_out, "a call crossed the partition");

    // The heal: the next call goes through on the same connection.
    sim.heal(link);
    let task = sim.spawn(client, async move {
        let mut client = client_app;
        let generation = call(&mut client, 2, 20_000).await;
        (client, generation)
    });
    let (client_app, generation) = sim
        .run_until_complete(task, Duration::from_secs(60))
        .unwrap();
    assert_eq!(generation.unwrap(), 1);

    // A crash: the client's calls fail (its connection reset, then new ones refused)
    // and it retries every 200 ms; after 2 s the server restarts and the retry gets
    // through to the new server.
    sim.crash(server);
    let task = sim.spawn(client, async move {
        let mut client = client_app;
        let mut failures = Vec::new();
        loop {
            match call(&mut client, 3, 1_000).await {
                Ok(generation) => return (failures, generation),
                Err(status) => failures.push((status.code(), io_error_kind(&status))),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    sim.run_for(Duration::from_secs(2)).unwrap();
    sim.restart(server);
    let (failures, generation) = sim
        .run_until_complete(task, Duration::from_secs(90))
        .unwrap();
    assert_eq!(generation, 2, "answered by the server before its crash");
    assert_eq!(starts.get(), 2);
    // The call in flight when the crash's reset arrives fails with tonic's transport
    // error; the new connections after it are refused until the restart.
    assert!(
        failures.len() >= 5,
        "{} failures in 2 s of retries",
        failures.len()
    );
    assert_eq!(
        failures[0],
        (Code::Unknown, Some(io::ErrorKind::ConnectionReset)),
        "{failures:?}"
    );
    assert!(
        failures[1..]
            .iter()
            .all(|f| *f == (Code::Unavailable, Some(io::ErrorKind::ConnectionRefused))),
        "{failures:?}"
    );
}

/// The kind of the I/O error under a failed call's status, if one caused it.
fn io_error_kind(status: &Status) -> Option<io::ErrorKind> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    while let Some(error) = source {
        if let Some(io) = error.downcast_ref::<io::Error>() {
            return Some(io.kind());
        }
        source = error.source();
    }
    None
}
