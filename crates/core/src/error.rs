use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// Errors of the engine. Each variant is something a caller can act on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The workspace lock is held by another process (or another writer's shell command or
    /// tool call is still running) and the bounded wait ran out.
    #[error("the workspace is busy: {holder}; try again, or wait for it to finish")]
    Busy {
        /// Who holds it, for a person (the lock file's holder record, or the epoch waited for).
        holder: String,
    },
    /// An id, message or name that matches nothing here, or an id prefix that matches several
    /// things.
    #[error("{0}")]
    Unknown(String),
    /// A bad request: the arguments themselves are wrong, whatever the workspace holds (a path
    /// outside the root, a NUL byte).
    #[error("{0}")]
    Usage(String),
    /// A well-formed request the workspace's state does not allow now: no open epoch to end,
    /// nothing to undo, an epoch still open, a checkpoint where an epoch is needed; the same
    /// request may succeed later. Also state the engine cannot read (a damaged journal, a
    /// schema written by a newer version).
    #[error("{0}")]
    State(String),
    /// A configuration file is malformed or has an unknown key.
    #[error("configuration {file}: {message}")]
    Config {
        /// The file (`config.toml` or a workspace's `.rewind.toml`); both, joined by "and",
        /// when it is the merged configuration that does not parse.
        file: PathBuf,
        /// What is wrong, for a person.
        message: String,
    },
    /// The object store failed: missing or corrupt objects and packs, its I/O, its index.
    #[error(transparent)]
    Store(#[from] rewind_store::Error),
    /// The engine's tables in `meta.sqlite` failed.
    #[error("metadata database: {0}")]
    Db(#[from] rusqlite::Error),
    /// The directory is not a usable workspace root (refused, replaced, or misplaced state).
    #[error("{0}")]
    Workspace(String),
    /// A guarded write was refused: a file never read in this session, or changed since it was
    /// read. Nothing was written.
    #[error("refusing to write {}", crate::model::guard::describe_refusals(.0))]
    Guard(Vec<crate::model::guard::GuardRefusal>),
    /// A guarded tool could not do what was asked (no match for an edit, a hunk that does not
    /// apply, not a regular file). Nothing was written.
    #[error("{path}: {message}")]
    Tool {
        /// The workspace-relative path it was about (`patch` for a patch that does not parse).
        path: String,
        /// What went wrong, for a person.
        message: String,
    },
    /// Objects a restore needs are missing or corrupt; found before anything was written, so
    /// nothing was.
    #[error("{0}")]
    Unavailable(String),
    /// A restore failed part-way and what it had applied was put back: the workspace is as it
    /// was before the restore. The cause says which path and why.
    #[error("the restore was rolled back, nothing changed: {0}")]
    RolledBack(#[source] Box<Error>),
    /// A restore failed part-way and putting back what it had applied failed too; the next
    /// command that takes the workspace lock tries the rollback again.
    #[error("the restore failed ({cause}) and rolling it back failed too ({rollback}); the next rewind command tries the rollback again")]
    RollbackFailed {
        /// Why the restore failed.
        #[source]
        cause: Box<Error>,
        /// Why putting it back failed.
        rollback: Box<Error>,
    },
    /// Another error with what the caller can do about it (see
    /// [`Remedy`](crate::model::remedy::Remedy)).
    #[error("{error}")]
    Remedied {
        /// What happened.
        #[source]
        error: Box<Error>,
        /// What to do about it.
        remedy: crate::model::remedy::Remedy,
    },
    /// The shadow git history could not be read or written (a view: rebuilding it loses
    /// nothing the op log holds).
    #[error(transparent)]
    Shadow(#[from] ShadowError),
    /// A file-system operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done, such as "reading".
        op: &'static str,
        /// The path it was done to (workspace-relative for paths inside the workspace).
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
}

impl Error {
    /// This error, with what the caller can do about it.
    pub(crate) fn remedy(self, remedy: crate::model::remedy::Remedy) -> Error {
        Error::Remedied {
            error: Box::new(self),
            remedy,
        }
    }

    /// What the caller can do about this error, if the engine knows.
    pub fn remedy_of(&self) -> Option<&crate::model::remedy::Remedy> {
        match self {
            Error::Remedied { remedy, .. } => Some(remedy),
            Error::RolledBack(e) => e.remedy_of(),
            _ => None,
        }
    }

    /// An I/O error on `path`, for `map_err`: `.map_err(Error::io("reading", &path))`.
    pub(crate) fn io<'a>(
        op: &'static str,
        path: impl AsRef<std::path::Path> + 'a,
    ) -> impl FnOnce(std::io::Error) -> Error + 'a {
        move |source| Error::Io {
            op,
            path: path.as_ref().to_path_buf(),
            source,
        }
    }

    /// An I/O error on a workspace-relative path.
    pub(crate) fn io_rel<'a>(
        op: &'static str,
        rel: &'a [u8],
    ) -> impl FnOnce(std::io::Error) -> Error + 'a {
        move |source| Error::Io {
            op,
            path: std::path::PathBuf::from(std::ffi::OsStr::from_bytes(rel)),
            source,
        }
    }
}

/// The shadow history failed in git terms (its repository unreadable or a write refused). Here,
/// not in `shadow`, so that every module can name the error without importing the shadow
/// history (which imports most of them).
#[derive(Debug, thiserror::Error)]
#[error("shadow history: {what}: {message}; `rewind shadow-path --rebuild` writes it again from the op log")]
pub struct ShadowError {
    /// What was being done ("writing blob", "opening", …).
    pub what: &'static str,
    /// gix's error, for a person.
    pub message: String,
}
