//! turmoil's `examples/axum`, ported: an axum 0.8 router served by `axum::serve` over a
//! listener adapter, and hyper-util's pooled client (`client::legacy::Client`) with a
//! tower connector that dials `http://server:9999` by the host's name.
//!
//! The example's code is turmoil's with the socket types swapped (the listener adapter
//! and the connector wrap impnet-sim-tokio's `TcpListener` and `TcpStream` instead of
//! turmoil's); the harness joins the two hosts with a link (turmoil's are implicit) and
//! runs the client task with `run_until_complete` instead of `sim.client` and
//! `sim.run()`. Beyond the example: the answer byte for byte, a replay by the seed, a
//! crashed server refusing and its restart answering, and a partition timing a
//! request out and the heal letting the next through.

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use axum::{Router, body::Body, extract::Path, http::Request, routing::get, serve::Listener};
use http_body_util::BodyExt as _;
use hyper_util::{client::legacy::Client, rt::TokioExecutor};
use impnet_sim_tokio::{HostId, LinkId, Sim, net};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The server and client hosts, the example's software on the server.
fn setup(seed: u64) -> (Sim, HostId, HostId, LinkId) {
    let addr = (IpAddr::from(Ipv4Addr::UNSPECIFIED), 9999);

    let (mut sim, server, client, link) = common::pair(seed, common::path(0, 10, 0.0));

    let router = Router::new()
        .route(
            "/greet/{name}",
            get(|Path(name): Path<String>| async move { format!("Hello {name}!") }),
        )
        // The date from the virtual clock, so that a seed replays (common::dated).
        .layer(axum::middleware::map_response(
            |response: axum::response::Response| async { common::dated(response) },
        ));

    sim.software(server, move || {
        let router = router.clone();
        async move {
            let listener = net::TcpListener::bind(addr).await.unwrap();
            axum::serve(SimListener(listener), router).await.unwrap();
        }
    });
    (sim, server, client, link)
}

/// The example's client: one GET through hyper-util's pooled client.
async fn greet(name: &str) -> Result<(hyper::StatusCode, bytes::Bytes), Error> {
    let client = Client::builder(TokioExecutor::new()).build(connector::connector());

    let mut request = Request::new(Body::empty());
    *request.uri_mut() = format!("http://server:9999/greet/{name}").parse()?;
    let res = client.request(request).await?;

    let (parts, body) = res.into_parts();
    let body = body.collect().await?.to_bytes();
    Ok((parts.status, body))
}

struct SimListener(net::TcpListener);

impl Listener for SimListener {
    type Io = net::TcpStream;

    type Addr = SocketAddr;

    #[expect(clippy::manual_async_fn, reason = "turmoil's example as written")]
    fn accept(&mut self) -> impl std::future::Future<Output = (Self::Io, Self::Addr)> + Send {
        async move { self.0.accept().await.unwrap() }
    }

    fn local_addr(&self) -> tokio::io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

mod connector {
    use hyper::Uri;
    use impnet_sim_tokio::net::TcpStream;
    use pin_project_lite::pin_project;
    use std::{future::Future, io::Error, pin::Pin};
    use tokio::io::AsyncWrite;
    use tower::Service;

    type Fut = Pin<Box<dyn Future<Output = Result<SimConnection, Error>> + Send>>;

    pub fn connector()
    -> impl Service<Uri, Response = SimConnection, Error = Error, Future = Fut> + Clone {
        tower::service_fn(|uri: Uri| {
            Box::pin(async move {
                let conn = TcpStream::connect(uri.authority().unwrap().as_str()).await?;
                Ok::<_, Error>(SimConnection { fut: conn })
            }) as Fut
        })
    }

    pin_project! {
        pub struct SimConnection{
            #[pin]
            fut: TcpStream
        }
    }

    impl hyper::rt::Read for SimConnection {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            mut buf: hyper::rt::ReadBufCursor<'_>,
        ) -> std::task::Poll<Result<(), Error>> {
            // SAFETY: as in turmoil's example: tokio's ReadBuf over the cursor's
            // uninitialised bytes; `advance` counts only the bytes it filled.
            let n = unsafe {
                let mut tbuf = tokio::io::ReadBuf::uninit(buf.as_mut());
                let result = tokio::io::AsyncRead::poll_read(self.project().fut, cx, &mut tbuf);
                match result {
                    std::task::Poll::Ready(Ok(())) => tbuf.filled().len(),
                    other => return other,
                }
            };

            // SAFETY: `n` bytes were initialised by the read above.
            unsafe {
                buf.advance(n);
            }
            std::task::Poll::Ready(Ok(()))
        }
    }

    impl hyper::rt::Write for SimConnection {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<Result<usize, Error>> {
            Pin::new(&mut self.fut).poll_write(cx, buf)
        }

        fn poll_flush(
            mut self: Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Error>> {
            Pin::new(&mut self.fut).poll_flush(cx)
        }

        fn poll_shutdown(
            mut self: Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Error>> {
            Pin::new(&mut self.fut).poll_shutdown(cx)
        }
    }

    impl hyper_util::client::legacy::connect::Connection for SimConnection {
        fn connected(&self) -> hyper_util::client::legacy::connect::Connected {
            hyper_util::client::legacy::connect::Connected::new()
        }
    }
}

/// The example's run: the client's answer, the trace hash, virtual and wall time.
fn example(seed: u64) -> (hyper::StatusCode, bytes::Bytes, u64) {
    let (mut sim, _, client, _) = setup(seed);
    let task = sim.spawn(client, async { greet("foo").await.unwrap() });
    let (status, body) = sim
        .run_until_complete(task, Duration::from_secs(10))
        .unwrap();
    eprintln!(
        "turmoil axum example on imp: {:?} virtual",
        Duration::from_nanos(sim.now().as_nanos())
    );
    (status, body, sim.trace_hash())
}

#[test]
fn axum_answers_the_example_request() {
    let started = std::time::Instant::now();
    let (status, body, hash) = example(1);
    eprintln!("turmoil axum example on imp: {:?} wall", started.elapsed());
    assert_eq!(status, hyper::StatusCode::OK);
    assert_eq!(&body[..], b"Hello foo!");
    // The same seed replays the run frame for frame.
    assert_eq!(example(1).2, hash);
}

#[test]
fn axum_after_a_crash_and_a_partition() {
    let (mut sim, server, client, link) = setup(2);
    // A crashed server's stack refuses the connection; after its restart it answers.
    sim.crash(server);
    let task = sim.spawn(client, async {
        greet("down").await.map_err(|e| e.to_string())
    });
    let refused = sim
        .run_until_complete(task, Duration::from_secs(10))
        .unwrap();
    assert!(refused.is_err(), "{refused:?}");
    sim.restart(server);
    let task = sim.spawn(client, async { greet("again").await.unwrap() });
    let (_, body) = sim
        .run_until_complete(task, Duration::from_secs(20))
        .unwrap();
    assert_eq!(&body[..], b"Hello again!");
    // A partition: the request times out (the client's own timeout, in virtual time);
    // after the heal the next one is answered.
    sim.partition(link);
    let task = sim.spawn(client, async {
        tokio::time::timeout(Duration::from_secs(5), greet("cut"))
            .await
            .is_err()
    });
    assert!(
        sim.run_until_complete(task, Duration::from_secs(60))
            .unwrap()
    );
    sim.heal(link);
    let task = sim.spawn(client, async { greet("healed").await.unwrap() });
    let (_, body) = sim
        .run_until_complete(task, Duration::from_secs(120))
        .unwrap();
    assert_eq!(&body[..], b"Hello healed!");
}
