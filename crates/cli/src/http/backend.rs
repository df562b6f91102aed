//! [`RootedFs`]: the files of `imp serve --http` for tower-http's `ServeDir`, read with
//! `std::fs` in the task, never from outside the served directory.
//!
//! `ServeDir`'s own back-end hands every stat, open and read to tokio's blocking
//! threads: two thread switches each, several per request, which on a small host cost
//! more than the request itself. Files served from the page cache answer in
//! microseconds, so this one does the calls where it is (a slow disk would stall the
//! connections of this thread meanwhile: a trade a test and bench server can make).

use std::ffi::CString;
use std::future::{Ready, ready};
use std::io::{self, Seek, SeekFrom};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant as StdInstant};

use tokio::io::{AsyncRead, AsyncSeek, ReadBuf};
use tower_http::services::fs::{Backend, File};

/// A `ServeDir` back-end over one directory: paths whose resolved form (symbolic links
/// followed) lies outside it are `NotFound`.
#[derive(Clone, Debug)]
pub struct RootedFs {
    /// The directory, canonical.
    root: PathBuf,
    /// The directory, opened (`O_PATH`): paths are resolved beneath it.
    dir: Arc<OwnedFd>,
    /// The file the last `metadata` call opened, for the `open` that follows it.
    last: Arc<Mutex<Option<Opened>>>,
}

/// How long a file opened for its metadata waits for the `open` of the same request.
const OPENED_FOR: Duration = Duration::from_millis(10);

/// A file `metadata` opened (read-only), with its metadata: `ServeDir` asks for a file's
/// metadata, then opens it, then asks the open file for its metadata again. As nginx
/// does, the one open and `fstat` serve all three (seven system calls down to three).
#[derive(Debug)]
struct Opened {
    path: PathBuf,
    file: std::fs::File,
    metadata: std::fs::Metadata,
    at: StdInstant,
}

impl RootedFs {
    /// The files under `root` (which must exist).
    pub fn new(root: &Path) -> io::Result<RootedFs> {
        let root = root.canonicalize()?;
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(&root)?;
        Ok(RootedFs {
            root,
            dir: Arc::new(dir.into()),
            last: Arc::new(Mutex::new(None)),
        })
    }

    /// `path`'s metadata. Opened read-only (non-blocking, so a FIFO does not hang), the
    /// file is kept for the `open` that follows; what cannot be opened so (no read
    /// permission) is looked at through an `O_PATH` descriptor.
    fn metadata_of(&self, path: &Path) -> io::Result<std::fs::Metadata> {
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;
        let file = match self.open(path, flags) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                return self.open(path, libc::O_PATH)?.metadata();
            }
            Err(e) => return Err(e),
        };
        let metadata = file.metadata()?;
        let opened = Opened {
            path: path.to_path_buf(),
            file,
            metadata: metadata.clone(),
            at: StdInstant::now(),
        };
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(opened);
        Ok(metadata)
    }

    /// `path` opened for reading: the file `metadata` just opened when it is this one,
    /// else opened now.
    fn open_file(&self, path: &Path) -> io::Result<StdFile> {
        let cached = self
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take_if(|o| o.path == path && o.at.elapsed() < OPENED_FOR);
        if let Some(opened) = cached
            && opened.metadata.is_file()
        {
            return Ok(StdFile::with_metadata(opened.file, opened.metadata));
        }
        StdFile::new(self.open(path, libc::O_RDONLY)?)
    }

    /// The served directory, canonical.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Open `path` (under the root) with `flags`, resolving it beneath the root:
    /// `openat2` with `RESOLVE_BENEATH` refuses a `..` or a symbolic link that leaves
    /// the directory in the one call that opens the file. Kernels before 5.6 lack it:
    /// there the resolved path is compared with the root first.
    fn open(&self, path: &Path, flags: libc::c_int) -> io::Result<std::fs::File> {
        let relative = path.strip_prefix(&self.root).map_err(|_| outside())?;
        let relative = if relative.as_os_str().is_empty() {
            Path::new(".")
        } else {
            relative
        };
        let name = CString::new(relative.as_os_str().as_bytes())?;
        // SAFETY: open_how is plain integers, for which zero is a valid value.
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        how.flags = (flags | libc::O_CLOEXEC) as u64;
        how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
        // SAFETY: a live directory descriptor, a NUL-terminated name and a live
        // open_how of the size passed; the descriptor returned is ours.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                self.dir.as_raw_fd(),
                name.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if let Ok(fd) = i32::try_from(fd)
            && fd >= 0
        {
            // SAFETY: `fd` was just opened and nothing else owns it.
            return Ok(unsafe { std::fs::File::from_raw_fd(fd) });
        }
        let error = io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EXDEV) => Err(outside()),
            Some(libc::ENOSYS) => self.open_checked(path, flags),
            _ => Err(error),
        }
    }

    /// [`RootedFs::open`] without `openat2`.
    fn open_checked(&self, path: &Path, flags: libc::c_int) -> io::Result<std::fs::File> {
        let resolved = path.canonicalize()?;
        if !resolved.starts_with(&self.root) {
            return Err(outside());
        }
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(flags & !libc::O_ACCMODE)
            .open(resolved)
    }
}

fn outside() -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, "outside the served directory")
}

impl Backend for RootedFs {
    type File = StdFile;
    type Metadata = std::fs::Metadata;
    type OpenFuture = Ready<io::Result<StdFile>>;
    type MetadataFuture = Ready<io::Result<std::fs::Metadata>>;

    fn open(&self, path: PathBuf) -> Self::OpenFuture {
        ready(self.open_file(&path))
    }

    fn metadata(&self, path: PathBuf) -> Self::MetadataFuture {
        ready(self.metadata_of(&path))
    }
}

/// An open file read synchronously behind tokio's `AsyncRead` and `AsyncSeek`.
#[derive(Debug)]
pub struct StdFile {
    file: std::fs::File,
    /// The file's metadata when opened.
    metadata: std::fs::Metadata,
    /// The file's length when opened: reads stop there (the length announced).
    len: u64,
    /// Where the next read starts.
    position: u64,
    /// The outcome of the seek `start_seek` did, for `poll_complete`.
    seek: Option<io::Result<u64>>,
}

impl StdFile {
    fn new(file: std::fs::File) -> io::Result<StdFile> {
        let metadata = file.metadata()?;
        Ok(StdFile::with_metadata(file, metadata))
    }

    fn with_metadata(file: std::fs::File, metadata: std::fs::Metadata) -> StdFile {
        StdFile {
            file,
            len: metadata.len(),
            metadata,
            position: 0,
            seek: None,
        }
    }
}

impl AsyncRead for StdFile {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // Only what is left of the file: `ServeDir` offers a whole chunk, which would
        // otherwise be zeroed for every read.
        let left = self.len.saturating_sub(self.position);
        let want = usize::try_from(left).map_or(buf.remaining(), |l| l.min(buf.remaining()));
        if want == 0 {
            return Poll::Ready(Ok(()));
        }
        // Read into the buffer's uninitialised part directly: zeroing it first (as
        // `initialize_unfilled_to` would) costs as much as the read itself for a fresh
        // 64 KiB chunk.
        // SAFETY: nothing de-initialises the unfilled part: `read` only writes to it.
        let unfilled = unsafe { &mut buf.unfilled_mut()[..want] };
        // SAFETY: `read` writes at most `want` bytes into the live, writable memory of
        // `unfilled`, which it never reads.
        let n = unsafe {
            libc::read(
                self.file.as_raw_fd(),
                unfilled.as_mut_ptr().cast::<libc::c_void>(),
                want,
            )
        };
        let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
        // SAFETY: `read` initialised the first `n` bytes of the unfilled part.
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        self.position += n as u64;
        Poll::Ready(Ok(()))
    }
}

impl AsyncSeek for StdFile {
    fn start_seek(mut self: Pin<&mut Self>, position: SeekFrom) -> io::Result<()> {
        let outcome = self.file.seek(position);
        if let Ok(at) = outcome {
            self.position = at;
        }
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

    /// The metadata taken when the file was opened (a second `fstat` would tell the
    /// same, microseconds later).
    fn metadata(&self) -> Self::MetadataFuture<'_> {
        ready(Ok(self.metadata.clone()))
    }
}
