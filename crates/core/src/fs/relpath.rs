//! Workspace-relative paths as raw bytes, `/`-separated, validated at the edge so nothing
//! downstream can be pointed outside the root.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::Error;

/// Turns a user-supplied path (relative to `cwd`, or absolute inside `root`) into a
/// workspace-relative byte path. Rejects `..` that leaves the root, NUL, and paths outside.
pub fn from_user(root: &Path, cwd: &Path, input: &Path) -> Result<Vec<u8>, Error> {
    if input.as_os_str().as_bytes().contains(&0) {
        return Err(Error::Usage("a path contains a NUL byte".into()));
    }
    // A relative path is taken from `cwd`, like a shell would, and nowhere else: the CLI
    // passes the directory the command acts from (`-C DIR` or the current directory, always
    // the root or inside it), so the same words name the same file wherever they are typed.
    inside(root, &cwd.join(input), input)
}

/// `joined` normalised lexically (never resolving symlinks: they are data here), relative to
/// `root`, or an error naming what the user typed.
fn inside(root: &Path, joined: &Path, input: &Path) -> Result<Vec<u8>, Error> {
    let mut parts: Vec<&OsStr> = Vec::new();
    for c in joined.components() {
        match c {
            Component::RootDir | Component::Prefix(_) => parts.clear(),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop();
            }
            Component::Normal(p) => parts.push(p),
        }
    }
    let norm: PathBuf = std::iter::once(OsStr::new("/")).chain(parts).collect();
    let rel = norm.strip_prefix(root).map_err(|_| {
        Error::Usage(format!(
            "{} is outside the workspace {}; give a path inside it",
            input.display(),
            root.display()
        ))
    })?;
    Ok(rel.as_os_str().as_bytes().to_vec())
}

/// Checks a stored relative path (from a plan, a tree walk or a database row).
pub fn check(rel: &[u8]) -> Result<(), Error> {
    let ok = !rel.is_empty()
        && !rel.starts_with(b"/")
        && rel.split(|b| *b == b'/').all(rewind_store::valid_name);
    if ok {
        Ok(())
    } else {
        Err(Error::Usage(format!(
            "refusing path {:?}: not a plain relative path inside the workspace",
            String::from_utf8_lossy(rel)
        )))
    }
}

/// `dir/name`; just `name` when `dir` is the root (empty).
pub fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    if dir.is_empty() {
        name.to_vec()
    } else {
        let mut p = Vec::with_capacity(dir.len() + 1 + name.len());
        p.extend_from_slice(dir);
        p.push(b'/');
        p.extend_from_slice(name);
        p
    }
}

/// `a/b/c` → (`a/b`, `c`); `c` → (``, `c`).
pub fn split(rel: &[u8]) -> (&[u8], &[u8]) {
    match rel.iter().rposition(|b| *b == b'/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => (&[], rel),
    }
}

/// The path for messages and JSON: lossy UTF-8 (bytes that are not UTF-8 show as U+FFFD).
pub fn display(rel: &[u8]) -> String {
    String::from_utf8_lossy(rel).into_owned()
}

/// The path of `rel` under `root` (`root` itself for the empty path). Nothing is resolved:
/// writes go through `RootDir`'s descriptors, never through such a path.
pub fn to_path(root: &Path, rel: &[u8]) -> PathBuf {
    if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(OsStr::from_bytes(rel))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_paths() {
        let root = Path::new("/w");
        assert_eq!(
            from_user(root, Path::new("/w/sub"), Path::new("a/../b")).unwrap(),
            b"sub/b"
        );
        assert_eq!(
            from_user(root, Path::new("/x"), Path::new("/w/f")).unwrap(),
            b"f"
        );
        assert!(from_user(root, Path::new("/w"), Path::new("../etc/passwd")).is_err());
        assert!(from_user(root, Path::new("/w"), Path::new("/etc")).is_err());
        // A relative path is never re-read from the root when it lands outside.
        assert!(from_user(root, Path::new("/elsewhere"), Path::new("src/x")).is_err());
        // From the workspace's parent, `w/src/x` is already inside: taken as typed.
        assert_eq!(
            from_user(root, Path::new("/"), Path::new("w/src/x")).unwrap(),
            b"src/x"
        );
        // From inside the workspace, a path that climbs out is refused, not re-read from root.
        assert!(from_user(root, Path::new("/w/sub"), Path::new("../../x")).is_err());
        assert!(check(b"a/../b").is_err());
        assert!(check(b"/a").is_err());
        assert!(check(b"a//b").is_err());
        assert!(check(b"a/b\xff").is_ok());
    }
}
