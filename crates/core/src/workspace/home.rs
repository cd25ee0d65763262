//! Where Rewind keeps its state: `$REWIND_HOME`, else `$XDG_DATA_HOME/rewind`, else
//! `~/.local/share/rewind`. Never inside a workspace.

use std::path::PathBuf;

use crate::Error;

/// The state directory this process uses (module header); [`Error::Usage`] when neither
/// `REWIND_HOME`, `XDG_DATA_HOME` nor `HOME` is set.
pub fn rewind_home() -> Result<PathBuf, Error> {
    let nonempty = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(p) = nonempty("REWIND_HOME") {
        return Ok(p);
    }
    if let Some(p) = nonempty("XDG_DATA_HOME") {
        return Ok(p.join("rewind"));
    }
    if let Some(p) = nonempty("HOME") {
        return Ok(p.join(".local/share/rewind"));
    }
    Err(Error::Usage(
        "cannot tell where to keep state: set REWIND_HOME (or HOME) to a directory".into(),
    ))
}

/// The state directory of the workspace registered for `root` (canonical) under `home`, without
/// opening it: one small file read. `None` when `root` is not registered.
pub fn state_dir_of(home: &std::path::Path, root: &std::path::Path) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let key = blake3::hash(root.as_os_str().as_bytes()).to_hex();
    let id = std::fs::read_to_string(home.join("roots").join(key.as_str())).ok()?;
    let id = id.trim();
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| home.join("workspaces").join(id))
}

/// Where worktrees go by default (`$REWIND_HOME/worktrees/<parent id>/<name>`): the only place
/// inside the state directory a workspace may be registered (it holds no state of its own).
pub const WORKTREES_DIR: &str = "worktrees";
