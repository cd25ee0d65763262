//! Turning configured path strings into canonical host paths, and the rules that reject the
//! dangerous ones. Everything is resolved on the host *before* bubblewrap sees it, so no mount
//! destination is ever a path the sandboxed command could have redirected.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// Rejects strings that are never a sensible path setting, whatever they resolve to: empty,
/// NUL, newline or other control characters (they corrupt logs and argv files), a leading `-`
/// (would read as an option to a tool), and `..` components (the resolved meaning depends on
/// symlinks; write the real path instead).
pub fn check_syntax(key: &str, raw: &OsStr) -> Result<()> {
    let bytes = raw.as_bytes();
    if bytes.is_empty() {
        return Err(Error::setting(key, raw, "empty path"));
    }
    if bytes.contains(&0) {
        return Err(Error::setting(key, raw, "path contains a NUL byte"));
    }
    if bytes.iter().any(|b| *b == b'\n' || *b == b'\r') {
        return Err(Error::setting(key, raw, "path contains a newline"));
    }
    if bytes.iter().any(|b| b.is_ascii_control()) {
        return Err(Error::setting(
            key,
            raw,
            "path contains a control character",
        ));
    }
    if bytes[0] == b'-' {
        return Err(Error::setting(
            key,
            raw,
            "path starts with '-'; write ./NAME for a relative name",
        ));
    }
    if Path::new(raw)
        .components()
        .any(|c| c == Component::ParentDir)
    {
        return Err(Error::setting(
            key,
            raw,
            "path contains '..'; write the real path",
        ));
    }
    Ok(())
}

/// `~` / `~/x` → under `home`; relative → under `base`; absolute stays. Lexical only.
pub fn absolutize(raw: &OsStr, base: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let bytes = raw.as_bytes();
    if bytes == b"~" || bytes.starts_with(b"~/") {
        let home = home?;
        let rest = Path::new(OsStr::from_bytes(&bytes[1..]));
        let rest = rest.strip_prefix("/").unwrap_or(rest);
        return Some(home.join(rest));
    }
    let p = Path::new(raw);
    Some(if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    })
}

/// Canonicalises the longest existing prefix of `p` and appends the rest, so a path that does
/// not exist yet (the state directory before first use) still compares correctly.
pub fn canonicalize_lenient(p: &Path) -> PathBuf {
    let mut existing = p.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(c) = existing.canonicalize() {
            let mut out = c;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => return p.to_path_buf(),
        }
    }
}

/// `inner` is `outer` or below it (both canonical).
pub fn is_within(inner: &Path, outer: &Path) -> bool {
    inner.starts_with(outer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bad(raw: &str) -> String {
        check_syntax("sandbox.writable_roots", OsStr::new(raw))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn syntax_rejections_name_key_and_value() {
        for (raw, why) in [
            ("", "empty"),
            ("a\0b", "NUL"),
            ("/a\nb", "newline"),
            ("--bind", "starts with '-'"),
            ("/x/../etc", "'..'"),
            ("../x", "'..'"),
        ] {
            let m = bad(raw);
            assert!(m.contains("sandbox.writable_roots"), "{m}");
            assert!(m.contains(why), "{raw:?}: {m}");
        }
        assert!(check_syntax("k", OsStr::new("/ok/path")).is_ok());
        assert!(check_syntax("k", OsStr::new("./-rf")).is_ok());
    }

    #[test]
    fn absolutize_home_and_relative() {
        let home = Path::new("/h");
        let base = Path::new("/ws");
        assert_eq!(
            absolutize(OsStr::new("~/.ssh"), base, Some(home)).unwrap(),
            Path::new("/h/.ssh")
        );
        assert_eq!(
            absolutize(OsStr::new("~"), base, Some(home)).unwrap(),
            Path::new("/h")
        );
        assert_eq!(
            absolutize(OsStr::new("cache"), base, Some(home)).unwrap(),
            Path::new("/ws/cache")
        );
        assert!(absolutize(OsStr::new("~/x"), base, None).is_none());
    }

    #[test]
    fn lenient_canonicalization_keeps_missing_tail() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().canonicalize().unwrap();
        assert_eq!(
            canonicalize_lenient(&d.path().join("a/b")),
            real.join("a/b")
        );
    }
}
