//! Paths as the client names them, confined to the served tree.
//!
//! The client sees a tree rooted at `/`. [`resolve`] joins a name to the working
//! directory and normalises it lexically: `.` goes, `..` takes the last component
//! off, and a `..` at the root is refused ([`PathError::Escape`]) rather than kept at
//! the root, so a client that tries to climb out is told so. Symbolic links that lead
//! out of the tree are the file tree's business ([`crate::fs::DiskFs`] refuses them).

use std::fmt;

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathError {
    /// `..` above the root.
    Escape,
    /// A NUL byte, or a backslash (never a separator here, refused so no host
    /// component can read it as one).
    BadCharacter,
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathError::Escape => f.write_str("outside the served directory"),
            PathError::BadCharacter => f.write_str("a NUL or backslash in the name"),
        }
    }
}

impl std::error::Error for PathError {}

/// `name` (absolute, or relative to `cwd`) as a normalised absolute path: `/` or
/// `/a/b`, no `.`, `..` or empty components. `cwd` must itself be normalised.
pub fn resolve(cwd: &str, name: &str) -> Result<String, PathError> {
    if name.contains(['\0', '\\']) {
        return Err(PathError::BadCharacter);
    }
    let mut parts: Vec<&str> = if name.starts_with('/') {
        Vec::new()
    } else {
        cwd.split('/').filter(|p| !p.is_empty()).collect()
    };
    for part in name.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop().ok_or(PathError::Escape)?;
            }
            p => parts.push(p),
        }
    }
    Ok(format!("/{}", parts.join("/")))
}

/// The last component of a normalised path (`""` for the root).
pub fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or("")
}

/// Whether normalised `path` is `dir` or lies under it.
pub fn is_within(path: &str, dir: &str) -> bool {
    dir == "/"
        || path == dir
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_inside_the_tree_only() {
        assert_eq!(resolve("/", "a/b"), Ok("/a/b".into()));
        assert_eq!(resolve("/pub", "x.txt"), Ok("/pub/x.txt".into()));
        assert_eq!(resolve("/pub", "/x.txt"), Ok("/x.txt".into()));
        assert_eq!(resolve("/pub", "../x"), Ok("/x".into()));
        assert_eq!(resolve("/pub", "./a//b/../c/"), Ok("/pub/a/c".into()));
        assert_eq!(resolve("/pub", ".."), Ok("/".into()));
        assert_eq!(resolve("/", ".."), Err(PathError::Escape));
        assert_eq!(resolve("/pub", "../../etc/passwd"), Err(PathError::Escape));
        assert_eq!(resolve("/", "/../etc"), Err(PathError::Escape));
        assert_eq!(resolve("/", "a\\..\\b"), Err(PathError::BadCharacter));
        assert_eq!(file_name("/a/b"), "b");
        assert!(is_within("/in/x", "/in") && !is_within("/inx", "/in"));
        assert!(is_within("/in", "/in") && is_within("/x", "/"));
    }
}
