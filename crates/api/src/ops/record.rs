//! Recording: checkpoints (turn boundaries), epochs opened and settled by an agent's hooks, and
//! a command run as one opaque epoch.

use std::ffi::OsString;
use std::io::Read;
use std::path::PathBuf;

use rewind_core::restore::StepView;
use rewind_core::{EpochKind, EpochSpec, EpochState, Settled};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::command::{exit_code, Output, Runnable};
use crate::{ApiError, ErrorKind, SandboxMode, Service};

/// Mark a turn boundary, bound to a conversation node (message id).
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointRequest {
    /// The conversation node (message id) this checkpoint belongs to.
    #[serde(default)]
    pub message: Option<String>,
    /// The node's parent (default: the session head).
    #[serde(default)]
    pub parent: Option<String>,
    /// A name for people, shown by `log` and `show`.
    #[serde(default)]
    pub label: Option<String>,
    /// A file whose content is stored with the checkpoint and returned by `restore` (e.g. the
    /// conversation); at most `checkpoint.max_payload_size` (config; default 64M).
    #[serde(default)]
    pub payload_file: Option<PathBuf>,
}

/// The checkpoint made.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct CheckpointResponse {
    /// The checkpoint's id (16 hex digits).
    pub id: String,
    /// Its op-log position.
    pub pos: i64,
    /// The session it belongs to.
    pub session: String,
    /// The message it is bound to, now the session's head.
    pub message: Option<String>,
    /// The message's parent in the conversation.
    pub parent: Option<String>,
    /// The workspace tree at this moment.
    pub root: String,
}

/// Open an epoch for the session: exact (only the declared paths are captured, no scan) when
/// `paths` are given, else opaque (whole-workspace capture).
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EpochBeginRequest {
    /// The tool name recorded with the epoch.
    #[serde(default)]
    pub tool: Option<String>,
    /// The agent's tool call id recorded with the epoch.
    #[serde(default)]
    pub tool_call: Option<String>,
    /// Paths the tool will write; a directory declares everything below it.
    #[serde(default)]
    pub paths: Vec<PathBuf>,
    /// Owned by the calling process instead of the session: once that process is gone,
    /// the next command's recovery settles it (what `exec` does around its command). Over a
    /// server's socket, the calling process is the one connected.
    #[serde(default)]
    pub process_owned: bool,
    /// Free text shown by `log` and `show`, such as a shell command's command line.
    #[serde(default)]
    pub note: Option<String>,
}

/// The epoch opened.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct EpochBeginResponse {
    /// The epoch's id (16 hex digits), for `epoch_end`.
    pub id: String,
    /// `exact` (paths declared) or `opaque`.
    pub kind: EpochKind,
    /// The session that owns it until it is ended.
    pub session: String,
}

/// Settle (or abort) the session's open epoch, or the named one: record what changed.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EpochEndRequest {
    /// The epoch (id or unique prefix); default: the session's open epoch.
    #[serde(default)]
    pub epoch: Option<String>,
    /// Close it as aborted (what changed is still recorded).
    #[serde(default)]
    pub abort: bool,
}

/// The epoch settled or aborted, and what it changed.
#[derive(Serialize, Deserialize, JsonSchema)]
pub struct EpochEndResponse {
    /// The epoch's id.
    pub id: String,
    /// `settled`, or `aborted` with `abort`.
    pub state: EpochState,
    /// What it changed, per path.
    pub changes: Vec<StepView>,
}

/// The epochs still open: the session's, or every session's. Reads the op log only (no
/// capture, no lock): what a hook asks before it settles its tool call's epoch.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EpochListRequest {
    /// Every session's open epochs, not only the session's.
    #[serde(default)]
    pub all_sessions: bool,
}

/// The open epochs, oldest first.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct EpochListResponse {
    /// Each open epoch, as `status` shows it.
    pub epochs: Vec<rewind_core::EpochRow>,
}

/// Run a command as one opaque epoch: capture before, run, capture after, record the changes.
/// The command runs in the request's directory with this process's standard input, output
/// and error, or with `collect_output` with empty input and its output in the response.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecRequest {
    /// The command and its arguments.
    #[serde(deserialize_with = "crate::serde_util::os_strings")]
    #[schemars(with = "Vec<String>")]
    pub command: Vec<OsString>,
    /// Run under the sandbox in this mode.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub sandbox: Option<SandboxMode>,
    /// The tool name recorded with the epoch [default: exec].
    #[serde(default)]
    pub tool: Option<String>,
    /// The agent's tool call id recorded with the epoch.
    #[serde(default)]
    pub tool_call: Option<String>,
    /// Give the command empty standard input and return its standard output and error in
    /// the response (what a server does: it cannot pass them through).
    #[serde(default)]
    pub collect_output: bool,
}

/// How the command ended and what its epoch recorded.
#[derive(Serialize, Deserialize, JsonSchema)]
pub struct ExecResponse {
    /// The command's exit code (128+N if killed by signal N).
    pub exit_code: i32,
    /// The opaque epoch that recorded it.
    pub epoch: String,
    /// What the command changed, per path.
    pub changes: Vec<StepView>,
    /// What it printed, with `collect_output`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Output>,
}

/// The response of operations that settle an epoch, and what they changed.
pub(crate) fn changes(s: &Settled) -> Vec<StepView> {
    s.changes.iter().map(StepView::from).collect()
}

impl Service {
    /// The `checkpoint` operation: see [`CheckpointRequest`].
    pub fn checkpoint(&self, req: &CheckpointRequest) -> Result<CheckpointResponse, ApiError> {
        let ws = self.ws()?;
        let payload = match &req.payload_file {
            Some(f) => {
                // Read at most one byte past the cap: a huge file is refused, never loaded whole.
                let cap = ws.config().checkpoint.max_payload_size();
                let mut bytes = Vec::new();
                std::fs::File::open(self.ctx.file(f))
                    .and_then(|file| file.take(cap + 1).read_to_end(&mut bytes))
                    .map_err(|e| {
                        ApiError::new(ErrorKind::Error, e.to_string())
                            .context(format!("reading payload file {}", f.display()))
                    })?;
                if bytes.len() as u64 > cap {
                    let e = rewind_core::payload_too_large(bytes.len() as u64, cap);
                    return Err(ApiError::from(e).context(format!("payload file {}", f.display())));
                }
                Some(bytes)
            }
            None => None,
        };
        let c = ws.checkpoint(
            self.ctx.session(),
            req.message.as_deref(),
            req.parent.as_deref(),
            req.label.as_deref(),
            payload,
        )?;
        Ok(CheckpointResponse {
            id: c.id,
            pos: c.pos,
            session: c.session,
            message: c.message,
            parent: c.parent,
            root: c.root.to_hex(),
        })
    }

    /// The `epoch_begin` operation: see [`EpochBeginRequest`].
    pub fn epoch_begin(&self, req: &EpochBeginRequest) -> Result<EpochBeginResponse, ApiError> {
        self.begin(req, self.ctx.peer())
    }

    /// Opens the epoch; a process-owned one is owned by `owner` when given, else by this
    /// process.
    fn begin(
        &self,
        req: &EpochBeginRequest,
        owner: Option<u32>,
    ) -> Result<EpochBeginResponse, ApiError> {
        let ws = self.ws()?;
        let spec = EpochSpec {
            tool: req.tool.clone(),
            tool_call: req.tool_call.clone(),
            paths: self.ctx.ws_paths(ws.root(), &req.paths)?,
            process_owned: req.process_owned,
            owner_pid: owner.filter(|_| req.process_owned),
            note: req.note.clone(),
        };
        let e = ws.begin_epoch(self.ctx.session(), &spec)?;
        Ok(EpochBeginResponse {
            id: e.id,
            kind: e.kind,
            session: e.session,
        })
    }

    /// The `epoch_end` operation: see [`EpochEndRequest`].
    pub fn epoch_end(&self, req: &EpochEndRequest) -> Result<EpochEndResponse, ApiError> {
        let ws = self.ws()?;
        let s = ws.end_epoch(self.ctx.session(), req.epoch.as_deref(), req.abort)?;
        Ok(EpochEndResponse {
            changes: changes(&s),
            id: s.epoch.id,
            state: s.epoch.state,
        })
    }

    /// The `epoch_list` operation: see [`EpochListRequest`].
    pub fn epoch_list(&self, req: &EpochListRequest) -> Result<EpochListResponse, ApiError> {
        let session = self.ctx.session();
        let epochs = self
            .ws()?
            .open_epochs()?
            .into_iter()
            .filter(|e| req.all_sessions || e.session == session)
            .collect();
        Ok(EpochListResponse { epochs })
    }

    /// Runs the command (stdio passed through) as one process-owned opaque epoch. The epoch is
    /// settled even when the command could not start (what it may have changed is recorded);
    /// then that failure is the error.
    pub fn exec(&self, req: &ExecRequest) -> Result<ExecResponse, ApiError> {
        self.exec_with(req, self)
    }

    /// [`Service::exec`] with its epoch begun and ended by `recorder`: this service, or a
    /// server that watches the workspace (whose captures cost what changed, not a walk). The
    /// command runs here either way, in this process's directory and with its streams, and
    /// the epoch is owned by this process, so recovery settles it if this process dies.
    pub fn exec_with(
        &self,
        req: &ExecRequest,
        recorder: &dyn Recorder,
    ) -> Result<ExecResponse, ApiError> {
        let Some(program) = req.command.first() else {
            return Err(ApiError::usage("no command to run"));
        };
        // As `git -C`/`make -C`: the command runs in the request's directory, sandboxed or not
        // (it is the root or inside it).
        let cwd = self.ctx.dir();
        // Refuse before anything is recorded if the sandbox cannot run.
        let sandboxed = match req.sandbox {
            Some(mode) => {
                let mut policy = self.sandbox_policy()?;
                policy.set_mode(mode);
                Some(policy)
            }
            None => None,
        };
        let epoch = recorder.epoch_begin(&EpochBeginRequest {
            tool: req.tool.clone().or_else(|| Some("exec".into())),
            tool_call: req.tool_call.clone(),
            paths: Vec::new(),
            process_owned: true,
            note: Some(command_line(&req.command)),
        })?;
        rewind_core::trace::phase("epoch begun");
        let command = match sandboxed {
            // What the opening capture could not take (over the size cap) stays read-only in
            // there, with `capture.large_files = "protect"`. A failure here is the command's:
            // the epoch is aborted below.
            Some(policy) => self.protect_large_files(policy).and_then(|p| {
                p.command(&req.command, Some(cwd))
                    .map(Runnable::Sandboxed)
                    .map_err(ApiError::from)
            }),
            None => {
                let mut c = std::process::Command::new(program);
                c.args(&req.command[1..]).current_dir(cwd);
                Ok(Runnable::Plain(c))
            }
        };
        let ran = command.and_then(|c| c.run(req.collect_output));
        rewind_core::trace::phase("command ran");
        let settled = recorder.epoch_end(&EpochEndRequest {
            epoch: Some(epoch.id),
            abort: ran.is_err(),
        });
        rewind_core::trace::phase("epoch settled");
        let (status, output) = ran?;
        let settled = settled?;
        Ok(ExecResponse {
            exit_code: exit_code(status),
            changes: settled.changes,
            epoch: settled.id,
            output,
        })
    }
}

/// Where [`Service::exec_with`] records its epoch: a service of this process, or a server's.
pub trait Recorder {
    /// Opens the epoch ([`Service::epoch_begin`]).
    fn epoch_begin(&self, req: &EpochBeginRequest) -> Result<EpochBeginResponse, ApiError>;
    /// Settles or aborts it ([`Service::epoch_end`]).
    fn epoch_end(&self, req: &EpochEndRequest) -> Result<EpochEndResponse, ApiError>;
}

/// This process's service records the epochs of the commands this process runs: owned by
/// this process, whoever asked.
impl Recorder for Service {
    fn epoch_begin(&self, req: &EpochBeginRequest) -> Result<EpochBeginResponse, ApiError> {
        self.begin(req, None)
    }

    fn epoch_end(&self, req: &EpochEndRequest) -> Result<EpochEndResponse, ApiError> {
        Service::epoch_end(self, req)
    }
}

/// The command as a shell would show it, shortened for the log.
fn command_line(argv: &[OsString]) -> String {
    let mut s = argv
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    if s.len() > 200 {
        let mut cut = 200;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}
