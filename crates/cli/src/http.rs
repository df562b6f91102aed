//! The HTTP/1.1 file server of `imp serve --http DIR`: hyper serving tower-http's
//! `ServeDir` over impnet's tokio sockets. The libraries do the HTTP: request parsing
//! and keep-alive (hyper), GET and HEAD, `Range` (206 and 416), content types from the
//! file name, `If-Modified-Since` / `If-Unmodified-Since` (304 and 412), `..` refused,
//! 404 for what is not there and 405 for other methods (`ServeDir`).
//!
//! The files come through [`RootedFs`], a `ServeDir` back-end that reads with `std::fs`
//! in the task and refuses whatever resolves (symbolic links followed) outside DIR.

mod backend;

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{HeaderValue, SERVER};
use hyper::server::conn::http1;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tower::Service;
use tower_http::services::ServeDir;
use tower_http::services::fs::ServeFileSystemResponseBody;

pub use backend::RootedFs;

/// How long a connection may take to send a request head, idle keep-alive time
/// included: then hyper closes it.
const HEAD_TIMEOUT: Duration = Duration::from_secs(60);

/// Bytes `ServeDir` reads from a file at a time (and hands to hyper as one piece).
const READ_CHUNK: usize = 64 * 1024;

/// The files served: `ServeDir` over one directory.
#[derive(Clone, Debug)]
pub struct Site {
    files: ServeDir<tower_http::services::fs::DefaultServeDirFallback, RootedFs>,
}

impl Site {
    /// Serve the files under `root` (which must exist).
    pub fn new(root: &Path) -> io::Result<Site> {
        let backend = RootedFs::new(root)?;
        let root = backend.root().to_path_buf();
        let files = ServeDir::with_backend(root, backend)
            .append_index_html_on_directories(true)
            .with_buf_chunk_size(READ_CHUNK);
        Ok(Site { files })
    }

    /// The response to one request.
    async fn respond(&self, request: Request<Incoming>) -> Response<ServeFileSystemResponseBody> {
        let mut files = self.files.clone();
        let response = files.call(request).await;
        let mut response = response.unwrap_or_else(|never: Infallible| match never {});
        response
            .headers_mut()
            .insert(SERVER, HeaderValue::from_static("imp"));
        response
    }
}

/// Serve HTTP/1.1 requests on one connection until the peer closes it, a response
/// closes it, or it idles past [`HEAD_TIMEOUT`].
pub async fn serve_connection<S>(stream: S, site: Arc<Site>) -> Result<(), hyper::Error>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request| {
        let site = Arc::clone(&site);
        async move { Ok::<_, Infallible>(site.respond(request).await) }
    });
    http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), service)
        .await
}

/// Accept connections on `listener` and serve each in its own task, on a
/// single-threaded tokio runtime in this thread that also runs `driver` (the imp
/// runtime's `impnet::tokio::drive`, so frames are taken in on this thread), until
/// the imp runtime stops; `on_accept` is called for every connection.
pub fn run(
    driver: impl Future<Output = io::Result<()>> + Send + 'static,
    listener: impnet::tokio::TcpListener,
    site: Site,
    on_accept: impl Fn() + Send + 'static,
) -> io::Result<()> {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .enable_io()
        .build()?;
    let site = Arc::new(site);
    // Frames for the connections are taken in on this thread.
    tokio.spawn(driver);
    tokio.block_on(async move {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                // The imp runtime was shut down.
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return Ok(()),
                Err(e) => {
                    eprintln!("imp serve: http: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            on_accept();
            // Responses go out in one write each: Nagle's algorithm would only hold
            // back the last segment of a body until the previous one is acknowledged.
            let _ = stream.set_nodelay(true);
            let site = Arc::clone(&site);
            tokio::spawn(async move {
                if let Err(e) = serve_connection(stream, site).await
                    && !quiet(&e)
                {
                    eprintln!("imp serve: http with {peer}: {e}");
                }
            });
        }
    })
}

/// Errors that are the normal end of a connection: the peer went away, the head
/// timed out, or the imp runtime stopped.
fn quiet(e: &hyper::Error) -> bool {
    if e.is_incomplete_message() || e.is_timeout() || e.is_canceled() {
        return true;
    }
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        if let Some(io) = inner.downcast_ref::<io::Error>() {
            return matches!(
                io.kind(),
                io::ErrorKind::NotConnected
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::BrokenPipe
                    | io::ErrorKind::ConnectionAborted
            );
        }
        source = inner.source();
    }
    false
}

#[cfg(test)]
mod tests;
