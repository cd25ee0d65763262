//! The op log's rows as the engine hands them out: epochs (with their kind, state and owner),
//! checkpoints, and changes with the epoch they belong to. How they are stored is `db::oplog`.

use rewind_store::ObjectId;
use serde::Serialize;

use crate::model::entry::Change;

/// What an epoch is.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum EpochKind {
    /// An edit/write/patch tool: only its declared paths, no scan.
    Exact,
    /// A shell command or anything else: whole-workspace capture before and after.
    Opaque,
    /// Changes found on disk that no epoch made (the user's editor, another program).
    External,
    /// A rewind, undo or redo.
    Restore,
}

impl EpochKind {
    /// The name stored in the op log and shown to users (`exact`, `opaque`, `external`,
    /// `restore`).
    pub fn as_str(self) -> &'static str {
        match self {
            EpochKind::Exact => "exact",
            EpochKind::Opaque => "opaque",
            EpochKind::External => "external",
            EpochKind::Restore => "restore",
        }
    }
    pub(crate) fn parse(s: &str) -> EpochKind {
        match s {
            "exact" => EpochKind::Exact,
            "opaque" => EpochKind::Opaque,
            "restore" => EpochKind::Restore,
            _ => EpochKind::External,
        }
    }
}

/// Where an epoch is in its life. Only an open epoch can still gain changes.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum EpochState {
    /// Begun and not yet ended: its tool may be writing now.
    Open,
    /// Ended, its changes recorded (by its owner, or by recovery once the owner was gone).
    Settled,
    /// Ended as failed (`epoch abort`, a guarded write refused after it opened); what changed
    /// meanwhile is still recorded as its changes.
    Aborted,
}

impl EpochState {
    /// The name stored in the op log and shown to users (`open`, `settled`, `aborted`).
    pub fn as_str(self) -> &'static str {
        match self {
            EpochState::Open => "open",
            EpochState::Settled => "settled",
            EpochState::Aborted => "aborted",
        }
    }
    pub(crate) fn parse(s: &str) -> EpochState {
        match s {
            "open" => EpochState::Open,
            "aborted" => EpochState::Aborted,
            _ => EpochState::Settled,
        }
    }
}

/// Who an open epoch belongs to: a process (`exec`; settled by whoever finds it dead) or the
/// session (`epoch begin`; open across commands until `epoch end`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase", tag = "type")]
pub enum Owner {
    /// The process that opened it; alive while a process with this pid and start time is.
    Process {
        /// Its process id.
        pid: u32,
        /// Its start time (clock ticks since boot, from `/proc/PID/stat`): pids are reused.
        start: u64,
    },
    /// The session, until `epoch end`; settled by the session's next epoch if never ended.
    Session,
}

/// One epoch (one mutation, usually one tool call) as the op log holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct EpochRow {
    /// 16 random hex digits; accepted by unique prefix.
    pub id: String,
    /// Its op-log position, taken when it opened: it orders it against every other epoch and
    /// checkpoint of the workspace.
    pub pos: i64,
    /// The session it belongs to; `""` for an external epoch.
    pub session: String,
    /// How its changes are found.
    pub kind: EpochKind,
    /// Open, settled or aborted.
    pub state: EpochState,
    /// The tool that made it as the caller named it (`edit`, `exec`, `restore`, …).
    pub tool: Option<String>,
    /// The agent's id for the tool call, when it gave one.
    pub tool_call: Option<String>,
    /// The session's head (a conversation message id) when the epoch opened, if it had one.
    pub message: Option<String>,
    /// Who may end it while it is open.
    pub owner: Owner,
    /// Declared paths of an exact epoch.
    #[serde(skip)]
    pub paths: Vec<Vec<u8>>,
    /// An opaque epoch's whole tree before its command ran.
    #[serde(skip)]
    pub pre_root: Option<ObjectId>,
    /// Settled by recovery after its owner died, not by the owner.
    pub recovered: bool,
    /// Free text for `log` and `show`: the command line of an `exec`, a restore's target.
    pub note: Option<String>,
    /// When it opened, in nanoseconds since the Unix epoch.
    pub created_ns: i64,
    /// When it was settled or aborted (ns since the Unix epoch); `None` while open.
    pub settled_ns: Option<i64>,
    /// When garbage collection dropped the content its changes name (ns since the Unix
    /// epoch): it can no longer be undone, restored to or diffed. `None`: not collected.
    pub collected_ns: Option<i64>,
}

/// A checkpoint: a point in a session's history, bound to a conversation message.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct CheckpointRow {
    /// 16 random hex digits; accepted by unique prefix.
    pub id: String,
    /// Its op-log position: rewinding to it undoes the session's epochs after this.
    pub pos: i64,
    /// The session it belongs to.
    pub session: String,
    /// The conversation message it is bound to; the session's head moves there.
    pub message: Option<String>,
    /// The message before it in the conversation (by default the session's head at the time).
    pub parent: Option<String>,
    /// A name the caller gave it, for people.
    pub label: Option<String>,
    /// The id of the whole workspace tree at that moment (hex in JSON).
    #[serde(serialize_with = "crate::base::serde_id")]
    #[schemars(with = "String")]
    pub root: ObjectId,
    /// Bytes the caller stored with it (such as the conversation's state), at most
    /// `checkpoint.max_payload_size`.
    #[serde(skip)]
    pub payload: Option<Vec<u8>>,
    /// Kept by garbage collection whatever the policy (`pin`, `unpin`).
    pub pinned: bool,
    /// When it was made, in nanoseconds since the Unix epoch.
    pub created_ns: i64,
    /// When garbage collection dropped what restoring to it needs (ns since the Unix epoch):
    /// it can no longer be restored to or diffed. `None`: not collected.
    pub collected_ns: Option<i64>,
}

/// A change row with the epoch it belongs to, for attribution queries.
#[derive(Clone, Debug)]
pub struct ChangeRow {
    /// The id of the epoch that made the change.
    pub epoch: String,
    /// The op-log position at which the change was recorded (for an opaque epoch, its
    /// settle): the newest change to a path is the one with the largest.
    pub pos: i64,
    /// The path and its entry before and after.
    pub change: Change,
    /// An open exact epoch's preimage whose post is not known yet.
    pub pending: bool,
}

/// A recorded whole-tree snapshot.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Snapshot {
    /// Its number: 1 for the first capture, increasing.
    pub seq: i64,
    /// The id of the whole workspace tree captured (hex in JSON).
    #[serde(serialize_with = "crate::base::serde_id")]
    #[schemars(with = "String")]
    pub root: ObjectId,
    /// When its walk started (ns since the Unix epoch, coarse clock): later captures compare
    /// birth times with it.
    pub created_ns: i64,
    /// What took it: the label given to a capture (`init`), or the session whose command did.
    pub label: String,
}
