//! Where the `imp` binary is: W5-W8 and W10 run `imp serve`, `imp route`, `imp link`,
//! `imp ttcp`, `imp sim` and `imp proxy` as child processes. In order: `--imp PATH`,
//! then `$IMP_BIN`, then `imp` in the directory of `imp-bench` itself (where
//! `cargo build --workspace` and `cargo test --workspace` put both).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// `--imp PATH`, set once from the command line before any workload runs.
static FLAG: OnceLock<PathBuf> = OnceLock::new();

/// Record `--imp PATH` (a second call keeps the first path).
pub(crate) fn set_flag(path: PathBuf) {
    let _ = FLAG.set(path);
}

/// The `imp` binary to run, or an error naming every place looked at.
pub(crate) fn path() -> Result<PathBuf, String> {
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot find the imp binary: own executable: {e}"))?;
    locate(
        FLAG.get().map(PathBuf::as_path),
        std::env::var_os("IMP_BIN"),
        &exe,
    )
}

/// The `imp` binary from the flag, the variable or beside `exe`; it must be a file.
fn locate(flag: Option<&Path>, env: Option<OsString>, exe: &Path) -> Result<PathBuf, String> {
    let (path, from) = if let Some(path) = flag {
        (path.to_path_buf(), "--imp")
    } else if let Some(path) = env.filter(|p| !p.is_empty()) {
        (PathBuf::from(path), "IMP_BIN")
    } else {
        let dir = exe.parent().unwrap_or(Path::new("."));
        let name = format!("imp{}", std::env::consts::EXE_SUFFIX);
        (dir.join(name), "beside imp-bench")
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "no imp binary at {} ({from}): build it with `cargo build -p impnet-cli` \
             (`--release` for a release imp-bench), or give --imp PATH or IMP_BIN",
            path.display()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory with an `imp` file in it, removed on drop.
    struct Dir(PathBuf);

    impl Dir {
        fn new(tag: &str) -> Dir {
            let dir = std::env::temp_dir().join(format!("imp-bin-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join(format!("imp{}", std::env::consts::EXE_SUFFIX)),
                b"",
            )
            .unwrap();
            Dir(dir)
        }

        fn imp(&self) -> PathBuf {
            self.0.join(format!("imp{}", std::env::consts::EXE_SUFFIX))
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn the_flag_wins_then_the_variable_then_the_directory() {
        let beside = Dir::new("beside");
        let other = Dir::new("other");
        let exe = beside.0.join("imp-bench");
        let env = || Some(OsString::from(other.imp()));
        assert_eq!(locate(Some(&other.imp()), None, &exe), Ok(other.imp()));
        assert_eq!(locate(None, env(), &exe), Ok(other.imp()));
        assert_eq!(locate(Some(&beside.imp()), env(), &exe), Ok(beside.imp()));
        assert_eq!(locate(None, None, &exe), Ok(beside.imp()));
        // An empty IMP_BIN is no IMP_BIN.
        assert_eq!(locate(None, Some(OsString::new()), &exe), Ok(beside.imp()));
    }

    #[test]
    fn a_missing_imp_is_an_error_naming_where_it_looked() {
        let empty = std::env::temp_dir().join(format!("imp-bin-none-{}", std::process::id()));
        let exe = empty.join("imp-bench");
        let err = locate(None, None, &exe).unwrap_err();
        assert!(
            err.contains(&empty.join("imp").display().to_string()),
            "{err}"
        );
        assert!(err.contains("beside imp-bench"), "{err}");
        let err = locate(None, Some("/nonexistent/imp".into()), &exe).unwrap_err();
        assert!(err.contains("/nonexistent/imp (IMP_BIN)"), "{err}");
        let err = locate(Some(Path::new("/nonexistent/x")), None, &exe).unwrap_err();
        assert!(err.contains("/nonexistent/x (--imp)"), "{err}");
    }
}
