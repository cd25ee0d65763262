use std::path::PathBuf;

/// Everything that can stop a sandboxed run. Every variant except [`Error::Io`] and
/// [`Error::CommandNotFound`] means "refused, nothing was run" (the CLI's exit 6).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// This operating system or CPU has no sandbox backend. Never falls back to running open.
    #[error("the sandbox is not supported on {platform}; refusing to run the command unsandboxed (use --mode danger-full-access only if you accept that)")]
    Unsupported {
        /// The OS, OS/architecture, or architecture without seccomp, as detected.
        platform: String,
    },

    /// No `bwrap` executable was found.
    #[error("bubblewrap (bwrap) not found ({searched}); install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap, Fedora: dnf install bubblewrap)")]
    BwrapMissing {
        /// Where it was looked for, or why the one found could not be run.
        searched: String,
    },

    /// `bwrap` is too old for the flags the policy needs.
    #[error("{path} is bubblewrap {found}, but {needed} or newer is needed (for --disable-userns and --add-seccomp-fd); install a newer bubblewrap")]
    BwrapTooOld {
        /// The `bwrap` executable that was run.
        path: PathBuf,
        /// Its `--version` output, or "of unknown version" when it printed nothing.
        found: String,
        /// The minimum version, `MAJOR.MINOR.PATCH`.
        needed: String,
    },

    /// The preflight trial run, or bubblewrap itself, failed before the command started.
    #[error("{what}{}", hint_suffix(.hint))]
    Unavailable {
        /// What failed, as bubblewrap or the preflight reported it.
        what: String,
        /// How to fix it on this host (user namespaces, AppArmor, a container), or empty.
        hint: String,
    },

    /// A configured path or mode is unacceptable. `key` names the setting (config key or flag).
    #[error("{key} = {value:?}: {reason}")]
    InvalidSetting {
        /// The config key or flag, such as `sandbox.writable_roots`.
        key: String,
        /// The value as written (lossily converted to UTF-8).
        value: String,
        /// Why it is refused.
        reason: String,
    },

    /// A path the sandbox must mount over is a symlink; mounting would follow it, so refuse.
    #[error("{path} is a symlink (to {target}); the sandbox keeps it read-only and will not mount over a symlink. Replace it with the real directory or file, then retry")]
    SymlinkedMountTarget {
        /// The symlink itself.
        path: PathBuf,
        /// Where it points (empty if the link could not be read).
        target: PathBuf,
    },

    /// An agent asked for more than the user's policy allows.
    #[error("refused: {0}")]
    Refused(String),

    /// The command to run does not exist (checked on the host before starting bubblewrap).
    #[error("command not found: {0}")]
    CommandNotFound(String),

    /// The seccomp program could not be built.
    #[error("building the seccomp filter: {0}")]
    Seccomp(String),

    /// A file-system or process operation failed on the host. Not a refusal: the command may
    /// have run.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done, such as "starting".
        op: &'static str,
        /// The file or program it was done to.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
}

fn hint_suffix(hint: &str) -> String {
    if hint.is_empty() {
        String::new()
    } else {
        format!("; {hint}")
    }
}

impl Error {
    /// True when the error means "the sandbox refused or is unavailable; nothing was run".
    pub fn is_refusal(&self) -> bool {
        !matches!(self, Error::Io { .. } | Error::CommandNotFound(_))
    }

    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn setting(
        key: &str,
        value: impl AsRef<std::ffi::OsStr>,
        reason: impl Into<String>,
    ) -> Self {
        Error::InvalidSetting {
            key: key.to_string(),
            value: value.as_ref().to_string_lossy().into_owned(),
            reason: reason.into(),
        }
    }
}

/// The sandbox's result: [`Error`] unless said otherwise.
pub type Result<T, E = Error> = std::result::Result<T, E>;
