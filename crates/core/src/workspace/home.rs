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
