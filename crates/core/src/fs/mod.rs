//! The workspace on disk: workspace-relative paths ([`relpath`]), file operations confined to
//! the root that never follow a symlink out of it ([`root`]; many at once: [`batch`]), and what a
//! path holds now ([`probe`]); files opened for a capture to read ([`read`]).

pub mod batch;
pub mod probe;
pub(crate) mod read;
pub mod relpath;
pub mod root;

/// Directory names that are never captured and never written, wherever they appear:
/// version-control metadata, which has its own history that a restore must never rewrite.
pub const NEVER_CAPTURED: &[&[u8]] = &[b".git"];

/// Writes `value` as pretty JSON to `dir/name` atomically (temporary file, fsync, rename,
/// directory fsync): a reader sees the old file or the new one, never a mix.
pub(crate) fn write_json_atomic(
    dir: &std::path::Path,
    name: &str,
    value: &impl serde::Serialize,
) -> Result<(), crate::Error> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.{}.tmp", crate::base::random_hex()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        std::io::Write::write_all(
            &mut f,
            &serde_json::to_vec_pretty(value).expect("serializable"),
        )?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        std::fs::File::open(dir)?.sync_all()
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        crate::Error::io("writing", &path)(e)
    })
}

/// What a directory a command is about to fill (a clone, a worktree) is now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Destination {
    /// Nothing there: it will be made.
    Absent,
    /// An empty directory: it will be filled.
    Empty,
    /// A directory with entries: refused.
    NotEmpty,
    /// A file, symlink or other: refused.
    NotADirectory,
}

impl Destination {
    /// Looks at `path` without following a symlink.
    pub(crate) fn of(path: &std::path::Path) -> Result<Destination, crate::Error> {
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => {
                let empty = std::fs::read_dir(path)
                    .map_err(crate::Error::io("listing", path))?
                    .next()
                    .is_none();
                Ok(if empty {
                    Destination::Empty
                } else {
                    Destination::NotEmpty
                })
            }
            Ok(_) => Ok(Destination::NotADirectory),
            Err(_) => Ok(Destination::Absent),
        }
    }
}
