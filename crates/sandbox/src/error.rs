use std::path::PathBuf;

/// Everything that can stop a sandboxed run. Every variant except [`Error::Io`] and
/// [`Error::CommandNotFound`] means "refused, nothing was run" (the CLI's exit 6).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// This operating system or CPU has no sandbox backend. Never falls back to running open.
    #[error("the sandbox is not supported on {platform}; refusing to run the command unsandboxed (use --mode danger-full-access only if you accept that)")]
    Unsupported { platform: String },

    /// No `bwrap` executable was found.
    #[error("bubblewrap (bwrap) not found ({searched}); install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap, Fedora: dnf install bubblewrap)")]
    BwrapMissing { searched: String },

    /// `bwrap` is too old for the flags the policy needs.
    #[error("{path} is bubblewrap {found}, but {needed} or newer is needed (for --disable-userns and --add-seccomp-fd); install a newer bubblewrap")]
    BwrapTooOld {
        path: PathBuf,
        found: String,
        needed: String,
    },

    /// The preflight trial run, or bubblewrap itself, failed before the command started.
    #[error("{what}{}", hint_suffix(.hint))]
    Unavailable { what: String, hint: String },

    /// A configured path or mode is unacceptable. `key` names the setting (config key or flag).
    #[error("{key} = {value:?}: {reason}")]
    InvalidSetting {
        key: String,
        value: String,
        reason: String,
    },

    /// A path the sandbox must mount over is a symlink; mounting would follow it, so refuse.
    #[error("{path} is a symlink (to {target}); the sandbox keeps it read-only and will not mount over a symlink. Replace it with the real directory or file, then retry")]
    SymlinkedMountTarget { path: PathBuf, target: PathBuf },

    /// An agent asked for more than the user's policy allows.
    #[error("refused: {0}")]
    Refused(String),

    /// The command to run does not exist (checked on the host before starting bubblewrap).
    #[error("command not found: {0}")]
    CommandNotFound(String),

    /// The seccomp program could not be built.
    #[error("building the seccomp filter: {0}")]
    Seccomp(String),

    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
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

pub type Result<T, E = Error> = std::result::Result<T, E>;
