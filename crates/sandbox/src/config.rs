//! The `[sandbox]` section of `config.toml` / `.rewind.toml`, as the user writes it.
//!
//! Only parsing lives here; meaning (resolution, validation against the workspace) is
//! [`crate::Policy`]'s job, because it needs the workspace, home and state directory.

use serde::Deserialize;

/// How much a sandboxed command may do.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Read everything except `deny_read`, write only the workspace and `writable_roots`
    /// (minus `.git`, agent config and Rewind's own state), network off unless `network`.
    #[default]
    WorkspaceWrite,
    /// Read everything except `deny_read`, write nothing but the private `/tmp`.
    ReadOnly,
    /// No sandbox at all: the command runs as a plain child process. Only ever chosen by the
    /// user (flag or config), never by an agent request (see [`crate::Policy::restrict`]).
    DangerFullAccess,
}

impl Mode {
    /// Every mode, from the default to the most open (for help texts and completions).
    pub const ALL: [Mode; 3] = [Mode::WorkspaceWrite, Mode::ReadOnly, Mode::DangerFullAccess];

    /// The name users write in config and flags (`workspace-write`, `read-only`,
    /// `danger-full-access`).
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::WorkspaceWrite => "workspace-write",
            Mode::ReadOnly => "read-only",
            Mode::DangerFullAccess => "danger-full-access",
        }
    }

    /// Higher is more permissive; used to let agent requests only tighten, and by the fronts
    /// to ask before a change loosens the sandbox.
    pub fn openness(self) -> u8 {
        match self {
            Mode::ReadOnly => 0,
            Mode::WorkspaceWrite => 1,
            Mode::DangerFullAccess => 2,
        }
    }

    /// What `rewind sandbox toggle` (and the toggle of the web UI and the TUI) sets from this
    /// mode: full access from any sandbox, `workspace-write` back from full access.
    pub fn toggled(self) -> Mode {
        match self {
            Mode::DangerFullAccess => Mode::WorkspaceWrite,
            _ => Mode::DangerFullAccess,
        }
    }

    /// What commands may do under this mode, in the words every front uses when it asks
    /// before loosening the sandbox.
    pub fn consequence(self) -> &'static str {
        match self {
            Mode::ReadOnly => "commands can read but write nothing outside a private /tmp",
            Mode::WorkspaceWrite => {
                "commands can write the workspace only, with no network and secrets scrubbed"
            }
            Mode::DangerFullAccess => {
                "commands run with no sandbox at all: they can write anywhere, use the network \
                 and read every secret your user can"
            }
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        Mode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| {
                format!("{s:?} is not a sandbox mode; use workspace-write, read-only or danger-full-access")
            })
    }
}

/// The `[sandbox]` section of `config.toml` / `.rewind.toml`, as written by the user.
///
/// Unknown keys are an error (`deny_unknown_fields`) so a typo never silently turns a
/// protection off, and a missing `network` means **off**.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SandboxConfig {
    /// `workspace-write` (default), `read-only` or `danger-full-access`.
    pub mode: Option<Mode>,
    /// Allow network access (default false).
    pub network: Option<bool>,
    /// Extra directories the command may write (absolute, `~/…`, or relative to the workspace).
    #[serde(default)]
    pub writable_roots: Vec<String>,
    /// Files or directories the command may not read (missing ones are skipped).
    #[serde(default)]
    pub deny_read: Vec<String>,
    /// Extra workspace-relative paths kept read-only (a trailing `/` means a directory), on top
    /// of the built-in `.git`, `.rewind.toml`, `.claude/`, `.codex/`, `.gemini/`, `.agents/`.
    #[serde(default)]
    pub protect: Vec<String>,
    /// Extra environment variable names passed into the sandbox (`NAME` or `PREFIX_*`).
    #[serde(default)]
    pub env_allow: Vec<String>,
}
