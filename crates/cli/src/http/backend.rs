//! [`RootedFs`]: the files of `imp serve --http` for tower-http's `ServeDir`, read with
//! `std::fs` in the task, never from outside the served directory.
//!
//! `ServeDir`'s own back-end hands every stat, open and read to tokio's blocking
//! threads: two thread switches each, several per request, which on a small host cost
//! more than the request itself. Files served from the page cache answer in
//! microseconds, so this one does the calls where it is (a slow disk would stall the
//! connections of this thread meanwhile: a trade a test and bench server can make).

use std::future::{Ready, ready};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncSeek, ReadBuf};
use tower_http::services::fs::{Backend, File};

/// A `ServeDir` back-end over one directory: paths whose resolved form (symbolic links
/// followed) lies outside it are `NotFound`.
#[derive(Clone, Debug)]
pub struct RootedFs {
    /// The directory, canonical.
    root: PathBuf,
}

impl RootedFs {
    /// The files under `root` (which must exist).
    pub fn new(root: &Path) -> io::Result<RootedFs> {
        Ok(RootedFs {
            root: root.canonicalize()?,
        })
    }

    /// The served directory, canonical.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `path` resolved, if it stays under the root.
    fn inside(&self, path: &Path) -> io::Result<PathBuf> {
        let resolved = path.canonicalize()?;
        if resolved.starts_with(&self.root) {
            Ok(resolved)
        } else {
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                "outside the served directory",
            ))
        }
    }
}

impl Backend for RootedFs {
    type File = StdFile;
    type Metadata = std::fs::Metadata;
    type OpenFuture = Ready<io::Result<StdFile>>;
    type MetadataFuture = Ready<io::Result<std::fs::Metadata>>;

    fn open(&self, path: PathBuf) -> Self::OpenFuture {
        ready(
            self.inside(&path)
                .and_then(std::fs::File::open)
                .map(|file| StdFile { file, seek: None }),
        )
    }

    fn metadata(&self, path: PathBuf) -> Self::MetadataFuture {
        ready(self.inside(&path).and_then(std::fs::metadata))
    }
}

/// An open file read synchronously behind tokio's `AsyncRead` and `AsyncSeek`.
#[derive(Debug)]
pub struct StdFile {
    file: std::fs::File,
    /// The outcome of the seek `start_seek` did, for `poll_complete`.
    seek: Option<io::Result<u64>>,
}

impl AsyncRead for StdFile {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let n = self.file.read(buf.initialize_unfilled())?;
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncSeek for StdFile {
    fn start_seek(mut self: Pin<&mut Self>, position: SeekFrom) -> io::Result<()> {
        let outcome = self.file.seek(position);
        self.seek = Some(outcome);
        Ok(())
    }

    fn poll_complete(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        Poll::Ready(match self.seek.take() {
            Some(outcome) => outcome,
            None => self.file.stream_position(),
        })
    }
}

impl File for StdFile {
    type Metadata = std::fs::Metadata;
    type MetadataFuture<'a> = Ready<io::Result<std::fs::Metadata>>;

    fn metadata(&self) -> Self::MetadataFuture<'_> {
        ready(self.file.metadata())
    }
}
