//! The op log's rows as the engine hands them out: epochs (with their kind, state and owner),
//! checkpoints, and changes with the epoch they belong to. How they are stored is `db::oplog`.

use rewind_store::ObjectId;
use serde::Serialize;

use crate::model::entry::Change;

/// What an epoch is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EpochState {
    Open,
    Settled,
    Aborted,
}

impl EpochState {
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
    Process { pid: u32, start: u64 },
    Session,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct EpochRow {
    pub id: String,
    pub pos: i64,
    pub session: String,
    pub kind: EpochKind,
    pub state: EpochState,
    pub tool: Option<String>,
    pub tool_call: Option<String>,
    pub message: Option<String>,
    pub owner: Owner,
    /// Declared paths of an exact epoch.
    #[serde(skip)]
    pub paths: Vec<Vec<u8>>,
    #[serde(skip)]
    pub pre_root: Option<ObjectId>,
    pub recovered: bool,
    pub note: Option<String>,
    pub created_ns: i64,
    pub settled_ns: Option<i64>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct CheckpointRow {
    pub id: String,
    pub pos: i64,
    pub session: String,
    pub message: Option<String>,
    pub parent: Option<String>,
    pub label: Option<String>,
    #[serde(serialize_with = "crate::base::serde_id")]
    #[schemars(with = "String")]
    pub root: ObjectId,
    #[serde(skip)]
    pub payload: Option<Vec<u8>>,
    pub pinned: bool,
    pub created_ns: i64,
}

/// A change row with the epoch it belongs to, for attribution queries.
#[derive(Clone, Debug)]
pub struct ChangeRow {
    pub epoch: String,
    pub pos: i64,
    pub change: Change,
    /// An open exact epoch's preimage whose post is not known yet.
    pub pending: bool,
}

/// A recorded whole-tree snapshot.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Snapshot {
    pub seq: i64,
    #[serde(serialize_with = "crate::base::serde_id")]
    #[schemars(with = "String")]
    pub root: ObjectId,
    pub created_ns: i64,
    pub label: String,
}
