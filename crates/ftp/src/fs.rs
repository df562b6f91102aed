//! The file trees a server serves: [`DiskFs`], a directory on disk with every path
//! kept inside it (symbolic links included), and [`MemFs`], files in memory (the
//! simulator's server and the tests). Paths given to a [`FileTree`] are already
//! normalised by [`crate::path::resolve`].

use std::collections::BTreeMap;
use std::io::{self, Cursor, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What the server needs to know about a file or directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// A directory (else a regular file).
    pub is_dir: bool,
    /// Bytes (0 for a directory).
    pub len: u64,
    /// Last modification, seconds since 1970 UTC, when known.
    pub modified: Option<u64>,
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The entry's name.
    pub name: String,
    /// Its metadata.
    pub meta: Meta,
}

/// A readable file, positioned where the transfer starts.
pub type Reader = Box<dyn Read + Send>;
/// A writable file, positioned where the transfer starts.
pub type Writer = Box<dyn Write + Send>;

/// A tree of files, addressed by normalised absolute paths (`/`, `/a/b`).
pub trait FileTree: Send {
    /// Metadata of a file or directory.
    fn stat(&self, path: &str) -> io::Result<Meta>;
    /// The entries of a directory, sorted by name.
    fn list(&self, dir: &str) -> io::Result<Vec<Entry>>;
    /// A regular file, read from byte `offset`.
    fn open(&self, path: &str, offset: u64) -> io::Result<Reader>;
    /// A regular file written from byte `offset` (0: created or truncated).
    fn create(&self, path: &str, offset: u64) -> io::Result<Writer>;
}

fn outside() -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        "outside the served directory",
    )
}

/// A directory on disk. Every path is looked up with its symbolic links resolved and
/// refused unless it still lies inside the root.
#[derive(Debug, Clone)]
pub struct DiskFs {
    /// The root, canonical (no symbolic links, absolute).
    root: PathBuf,
}

impl DiskFs {
    /// Serves the tree under `root` (which must exist).
    pub fn new(root: &Path) -> io::Result<DiskFs> {
        let root = root.canonicalize()?;
        if !root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                "not a directory",
            ));
        }
        Ok(DiskFs { root })
    }

    /// The path on disk under the root, links not yet resolved.
    fn joined(&self, path: &str) -> PathBuf {
        let mut out = self.root.clone();
        out.extend(path.split('/').filter(|p| !p.is_empty()));
        out
    }

    /// An existing path, resolved, inside the root.
    fn existing(&self, path: &str) -> io::Result<PathBuf> {
        let real = self.joined(path).canonicalize()?;
        if real.starts_with(&self.root) {
            Ok(real)
        } else {
            Err(outside())
        }
    }
}

fn meta_of(m: &std::fs::Metadata) -> Meta {
    Meta {
        is_dir: m.is_dir(),
        len: if m.is_dir() { 0 } else { m.len() },
        modified: m
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_secs()),
    }
}

impl FileTree for DiskFs {
    fn stat(&self, path: &str) -> io::Result<Meta> {
        Ok(meta_of(&std::fs::metadata(self.existing(path)?)?))
    }

    fn list(&self, dir: &str) -> io::Result<Vec<Entry>> {
        let real = self.existing(dir)?;
        let mut out = Vec::new();
        for entry in std::fs::read_dir(real)? {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            // A link out of the tree is not shown (it could not be opened either).
            let Ok(real) = entry.path().canonicalize() else {
                continue;
            };
            if !real.starts_with(&self.root) {
                continue;
            }
            if let Ok(m) = std::fs::metadata(&real) {
                out.push(Entry {
                    name,
                    meta: meta_of(&m),
                });
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn open(&self, path: &str, offset: u64) -> io::Result<Reader> {
        let real = self.existing(path)?;
        if real.is_dir() {
            return Err(io::Error::new(io::ErrorKind::IsADirectory, "a directory"));
        }
        let mut file = std::fs::File::open(real)?;
        file.seek(SeekFrom::Start(offset))?;
        Ok(Box::new(file))
    }

    fn create(&self, path: &str, offset: u64) -> io::Result<Writer> {
        let joined = self.joined(path);
        let parent = joined.parent().ok_or_else(outside)?.canonicalize()?;
        if !parent.starts_with(&self.root) {
            return Err(outside());
        }
        let target = parent.join(joined.file_name().ok_or_else(outside)?);
        match std::fs::symlink_metadata(&target) {
            // Never write through a link, wherever it points.
            Ok(m) if m.file_type().is_symlink() => return Err(outside()),
            Ok(m) if m.is_dir() => {
                return Err(io::Error::new(io::ErrorKind::IsADirectory, "a directory"));
            }
            _ => {}
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(offset == 0)
            .open(target)?;
        file.seek(SeekFrom::Start(offset))?;
        Ok(Box::new(file))
    }
}

/// Files in memory, by normalised path; directories are implied by the files'
/// paths. Clones share the same files.
#[derive(Debug, Clone, Default)]
pub struct MemFs {
    files: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
}

impl MemFs {
    /// An empty tree.
    pub fn new() -> MemFs {
        MemFs::default()
    }

    /// Adds (or replaces) a file.
    pub fn insert(&self, path: &str, data: Vec<u8>) {
        self.lock().insert(path.to_string(), data);
    }

    /// A file's bytes.
    pub fn get(&self, path: &str) -> Option<Vec<u8>> {
        self.lock().get(path).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<u8>>> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn is_dir(files: &BTreeMap<String, Vec<u8>>, path: &str) -> bool {
        path == "/"
            || files
                .keys()
                .any(|k| crate::path::is_within(k, path) && k != path)
    }
}

fn not_found() -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, "no such file or directory")
}

impl FileTree for MemFs {
    fn stat(&self, path: &str) -> io::Result<Meta> {
        let files = self.lock();
        match files.get(path) {
            Some(data) => Ok(Meta {
                is_dir: false,
                len: data.len() as u64,
                modified: Some(0),
            }),
            None if MemFs::is_dir(&files, path) => Ok(Meta {
                is_dir: true,
                len: 0,
                modified: Some(0),
            }),
            None => Err(not_found()),
        }
    }

    fn list(&self, dir: &str) -> io::Result<Vec<Entry>> {
        let files = self.lock();
        if !MemFs::is_dir(&files, dir) {
            return Err(not_found());
        }
        let prefix = if dir == "/" {
            "/".to_string()
        } else {
            format!("{dir}/")
        };
        let mut out: BTreeMap<String, Meta> = BTreeMap::new();
        for (path, data) in files.iter() {
            let Some(rest) = path.strip_prefix(&prefix) else {
                continue;
            };
            let (name, is_dir) = match rest.split_once('/') {
                Some((name, _)) => (name, true),
                None => (rest, false),
            };
            let len = if is_dir { 0 } else { data.len() as u64 };
            out.insert(
                name.to_string(),
                Meta {
                    is_dir,
                    len,
                    modified: Some(0),
                },
            );
        }
        Ok(out
            .into_iter()
            .map(|(name, meta)| Entry { name, meta })
            .collect())
    }

    fn open(&self, path: &str, offset: u64) -> io::Result<Reader> {
        let data = self.lock().get(path).cloned().ok_or_else(not_found)?;
        let mut cursor = Cursor::new(data);
        cursor.set_position(offset);
        Ok(Box::new(cursor))
    }

    fn create(&self, path: &str, offset: u64) -> io::Result<Writer> {
        if MemFs::is_dir(&self.lock(), path) {
            return Err(io::Error::new(io::ErrorKind::IsADirectory, "a directory"));
        }
        let mut data = if offset == 0 {
            Vec::new()
        } else {
            self.get(path).unwrap_or_default()
        };
        data.resize(offset as usize, 0);
        Ok(Box::new(MemWriter {
            fs: self.clone(),
            path: path.to_string(),
            data,
        }))
    }
}

/// A file being written into a [`MemFs`]: it appears whole when dropped or flushed.
struct MemWriter {
    fs: MemFs,
    path: String,
    data: Vec<u8>,
}

impl Write for MemWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.data.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.fs.insert(&self.path, self.data.clone());
        Ok(())
    }
}

impl Drop for MemWriter {
    fn drop(&mut self) {
        self.fs.insert(&self.path, std::mem::take(&mut self.data));
    }
}

/// Seconds since 1970 as (year, month 1-12, day 1-31, hour, minute, second), UTC
/// (the proleptic Gregorian calendar; Howard Hinnant's days-to-civil algorithm).
pub fn civil(seconds: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = (seconds / 86_400) as i64;
    let rem = seconds % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    (year, month, day, h as u32, m as u32, s as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_civil() {
        assert_eq!(civil(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(civil(951_782_400), (2000, 2, 29, 0, 0, 0));
        assert_eq!(civil(1_700_000_000), (2023, 11, 14, 22, 13, 20));
    }

    #[test]
    fn memory_tree_lists_and_writes() {
        let fs = MemFs::new();
        fs.insert("/pub/a.txt", b"hello".to_vec());
        fs.insert("/top", b"x".to_vec());
        assert!(fs.stat("/pub").unwrap().is_dir);
        assert_eq!(fs.stat("/pub/a.txt").unwrap().len, 5);
        let names: Vec<String> = fs.list("/").unwrap().into_iter().map(|e| e.name).collect();
        assert_eq!(names, ["pub", "top"]);
        let mut s = String::new();
        fs.open("/pub/a.txt", 2)
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "llo");
        drop(fs.create("/up", 0).unwrap().write_all(b"new"));
        assert_eq!(fs.get("/up").unwrap(), b"new");
        assert_eq!(
            fs.stat("/nope").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }

    #[cfg(unix)]
    #[test]
    fn disk_tree_refuses_links_out() {
        let base = std::env::temp_dir().join(format!("impnet-ftp-fs-{}", std::process::id()));
        let root = base.join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(base.join("secret"), b"s").unwrap();
        std::fs::write(root.join("sub/f"), b"file").unwrap();
        std::os::unix::fs::symlink(base.join("secret"), root.join("out")).unwrap();
        std::os::unix::fs::symlink(root.join("sub/f"), root.join("in")).unwrap();
        let fs = DiskFs::new(&root).unwrap();
        assert_eq!(fs.stat("/sub/f").unwrap().len, 4);
        assert_eq!(
            fs.stat("/in").unwrap().len,
            4,
            "a link inside the tree is fine"
        );
        assert_eq!(
            fs.open("/out", 0).err().unwrap().kind(),
            io::ErrorKind::PermissionDenied
        );
        assert_eq!(
            fs.create("/out", 0).err().unwrap().kind(),
            io::ErrorKind::PermissionDenied
        );
        let names: Vec<String> = fs.list("/").unwrap().into_iter().map(|e| e.name).collect();
        assert_eq!(names, ["in", "sub"], "the link out is not listed");
        drop(fs.create("/sub/new", 0).unwrap().write_all(b"up"));
        assert_eq!(std::fs::read(root.join("sub/new")).unwrap(), b"up");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
