//! What the read-before-edit guard keeps and says: a session's fingerprint of each file it read,
//! and why it refused a write (the path, the session, and who changed the file since the
//! session read it, as far as the op log knows).

use std::fmt;

use rewind_store::ObjectId;
use serde::Serialize;

use crate::model::oplog::EpochKind;

/// What a session saw of a file when it last read (or wrote) it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Fingerprint {
    /// Workspace-relative path, `/`-separated raw bytes (a string in JSON).
    #[serde(serialize_with = "crate::base::serde_path")]
    #[schemars(with = "String")]
    pub path: Vec<u8>,
    /// The file's size in bytes as seen.
    pub size: u64,
    /// Recorded for diagnosis only: the guard compares content, never timestamps.
    pub mtime_ns: i64,
    /// Permission bits as seen (`st_mode & 0o7777`).
    pub mode: u32,
    /// BLAKE3 content id (the store's id for these bytes).
    #[serde(serialize_with = "crate::base::serde_id")]
    #[schemars(with = "String")]
    pub content: ObjectId,
    /// The op-log position when it was read: changes recorded after it happened after the read.
    pub pos: i64,
    /// Only a line range was returned to the session.
    pub partial: bool,
    /// When it was read or written, in nanoseconds since the Unix epoch.
    pub read_ns: i64,
}

/// Why the guard refused a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RefusalKind {
    /// The session never read the file.
    NeverRead,
    /// The file's content is not what the session last saw.
    Changed,
}

/// Who changed a file since the session read it, as far as the op log knows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum ChangedBy {
    /// Found on disk, made by no session (an editor, another program).
    External {
        /// The external epoch that recorded the change.
        epoch: String,
    },
    /// A session's epoch (possibly this session's, e.g. a shell command it ran).
    Epoch {
        /// The session whose epoch it was.
        session: String,
        /// The epoch's id.
        epoch: String,
        /// Its kind: a tool call, a shell command, a restore.
        kind: EpochKind,
        /// Its tool, as the caller named it.
        tool: Option<String>,
        /// Whether that session is the one refused.
        this_session: bool,
        /// Still open (its tool call may still be writing).
        open: bool,
    },
    /// The op log has no record of it yet (made outside any epoch, not captured since).
    Unrecorded,
}

impl fmt::Display for ChangedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChangedBy::External { epoch } => write!(
                f,
                "an external edit (not made by any session: an editor or another program; external epoch {epoch})"
            ),
            ChangedBy::Epoch {
                session,
                epoch,
                kind,
                tool,
                this_session,
                open,
            } => {
                let who = if *this_session {
                    "this session's".to_string()
                } else {
                    format!("session {session}'s")
                };
                let what = match kind {
                    EpochKind::Opaque => "shell command",
                    EpochKind::Restore => "restore or undo",
                    _ => "tool call",
                };
                write!(f, "{who} {what} ({} epoch {epoch}", kind.as_str())?;
                if let Some(t) = tool {
                    write!(f, ", tool {t}")?;
                }
                f.write_str(")")?;
                if *open {
                    f.write_str(", still running")?;
                }
                Ok(())
            }
            ChangedBy::Unrecorded => f.write_str(
                "changed on disk (not recorded yet), by something outside any epoch (an editor or another program)",
            ),
        }
    }
}

/// One refused path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct GuardRefusal {
    /// Workspace-relative path, `/`-separated raw bytes (a string in JSON).
    #[serde(serialize_with = "crate::base::serde_path")]
    #[schemars(with = "String")]
    pub path: Vec<u8>,
    /// The session whose write was refused.
    pub session: String,
    /// Never read, or changed since read.
    pub kind: RefusalKind,
    /// For `Changed`: who changed it, if the op log knows.
    pub changed_by: Option<ChangedBy>,
    /// For `Changed`: what differs (`size 10 -> 12 bytes`, …).
    pub detail: Option<String>,
    /// The session only read part of the file (for `Changed`).
    pub partial: bool,
}

impl fmt::Display for GuardRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = String::from_utf8_lossy(&self.path);
        match self.kind {
            RefusalKind::NeverRead => write!(
                f,
                "{p}: session {} has never read it; read it first",
                self.session
            ),
            RefusalKind::Changed => {
                write!(f, "{p}: changed since you read it")?;
                if let Some(d) = &self.detail {
                    write!(f, " ({d})")?;
                }
                if let Some(by) = &self.changed_by {
                    match by {
                        ChangedBy::Unrecorded => write!(f, ": {by}")?,
                        _ => write!(f, ", by {by}")?,
                    }
                }
                write!(f, "; read it again and redo the change")
            }
        }
    }
}

/// The refusals of one write, as one line.
pub(crate) fn describe_refusals(r: &[GuardRefusal]) -> String {
    r.iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}
