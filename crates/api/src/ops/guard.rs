//! The guarded tools: read a file (recording what the session saw), check that a write would
//! be allowed, and write, edit or patch files only where the session has read them as they are.

use std::path::PathBuf;

use rewind_core::restore::StepView;
use rewind_core::{
    relpath, EditSpec, Fingerprint, GuardRefusal, LineRange, PatchOptions, PatchedFile, Settled,
    StagedWrite, ToolCall,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ops::record::changes;
use crate::{ApiError, ErrorKind, Service};

/// Read files and record what the session has seen of them: the baseline the read-before-edit
/// guard checks writes against. Symlinks are never followed.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadRequest {
    /// The files, relative to the context's directory (or absolute inside the workspace).
    pub paths: Vec<PathBuf>,
    /// Only these lines, 1-based and inclusive: `START:END`, `START:` or `:END` (the whole
    /// file's fingerprint is still recorded).
    #[serde(default, deserialize_with = "crate::serde_util::opt_from_str")]
    #[schemars(with = "Option<String>")]
    pub range: Option<LineRange>,
    /// Only record what the session has seen; return no content (`content` empty): what an
    /// agent's hook does for a file the agent read or wrote itself.
    #[serde(default)]
    pub record_only: bool,
}

/// One file read.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ReadFile {
    /// Workspace-relative path.
    pub path: String,
    /// Size of the whole file in bytes.
    pub size: u64,
    /// Number of lines in the whole file.
    pub lines: usize,
    /// The lines returned (1-based, inclusive) when a range was asked for; `[start, start - 1]`
    /// when the range starts past the end.
    pub range: Option<(usize, usize)>,
    /// Less than the whole file was returned.
    pub partial: bool,
    /// The bytes returned (lossy UTF-8 when `utf8` is false).
    pub content: String,
    /// The bytes returned are valid UTF-8, so `content` is exact.
    pub utf8: bool,
    /// What the session is now recorded to have seen of the whole file.
    pub fingerprint: Fingerprint,
    /// The bytes returned, exactly.
    #[serde(skip)]
    pub bytes: Vec<u8>,
}

/// The files read, in the order asked.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ReadResponse {
    /// The session the reads are recorded for.
    pub session: String,
    /// One per path asked for.
    pub files: Vec<ReadFile>,
}

/// Would a guarded write of these paths be allowed now? Writes nothing.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckWriteRequest {
    /// The files, relative to the context's directory (or absolute inside the workspace).
    pub paths: Vec<PathBuf>,
}

/// The guard's verdict on one path.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Verdict {
    /// Workspace-relative path.
    pub path: String,
    /// A guarded write of it would go ahead now.
    pub allowed: bool,
    /// It does not exist, so no read is needed.
    pub new_file: bool,
    /// The session read only part of it.
    pub partial_read: bool,
    /// Why not, in words.
    pub reason: Option<String>,
    /// The refusal, structured; `None` when allowed.
    pub refusal: Option<GuardRefusal>,
}

/// One verdict per path (a refused path may name several refusals). Any refusal: the command
/// line exits 5.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(transparent)]
pub struct CheckWriteResponse(pub Vec<Verdict>);

/// Guarded write of a whole file (one exact epoch): an existing file must have been read in
/// this session and be unchanged since; a new file needs no read.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteRequest {
    /// The file, relative to the context's directory (or absolute inside the workspace).
    pub path: PathBuf,
    /// The new content.
    #[serde(deserialize_with = "crate::serde_util::text_bytes")]
    #[schemars(with = "String")]
    pub content: Vec<u8>,
    /// The tool name recorded with the epoch [default: write].
    #[serde(default)]
    pub tool: Option<String>,
    /// The agent's tool call id recorded with the epoch.
    #[serde(default)]
    pub tool_call: Option<String>,
}

/// Guarded exact string replacement in a file (one exact epoch).
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditRequest {
    /// The file, relative to the context's directory (or absolute inside the workspace).
    pub path: PathBuf,
    /// The exact text to replace: must match once unless `all`.
    pub old: String,
    /// The text to put in its place.
    pub new: String,
    /// Replace every occurrence.
    #[serde(default)]
    pub all: bool,
    /// The tool name recorded with the epoch [default: edit].
    #[serde(default)]
    pub tool: Option<String>,
    /// The agent's tool call id recorded with the epoch.
    #[serde(default)]
    pub tool_call: Option<String>,
}

/// Guarded, all-or-nothing unified diff (as `git diff` writes it; paths relative to the
/// workspace root), from `patch` or from `file` (one exact epoch over every touched path).
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyPatchRequest {
    /// The patch text.
    #[serde(default, deserialize_with = "crate::serde_util::opt_text_bytes")]
    #[schemars(with = "Option<String>")]
    pub patch: Option<Vec<u8>>,
    /// A file holding the patch (when `patch` is not given).
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// Check everything (guard, every hunk) and write nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Strip N leading components from the file names [default: 1 for git diffs; for plain
    /// diffs 1 when the names look like a/… and b/…, else 0].
    #[serde(default)]
    pub strip: Option<usize>,
    /// The tool name recorded with the epoch [default: apply-patch].
    #[serde(default)]
    pub tool: Option<String>,
    /// The agent's tool call id recorded with the epoch.
    #[serde(default)]
    pub tool_call: Option<String>,
}

/// What a guarded write, edit or patch recorded: its epoch and changes.
#[derive(Serialize, JsonSchema)]
pub struct WriteResponse {
    /// The exact epoch the write was recorded as.
    pub id: String,
    /// The session it belongs to.
    pub session: String,
    /// `edit`: how many replacements were made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replacements: Option<usize>,
    /// `apply-patch`: the files of the patch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<PatchedFile>>,
    /// What the epoch changed, per path.
    pub changes: Vec<StepView>,
}

/// See [`EditRequest`].
pub type EditResponse = WriteResponse;

/// A patch checked and not applied (`dry_run`).
#[derive(Serialize, JsonSchema)]
pub struct PatchDryRun {
    /// Always true: nothing was written.
    pub dry_run: bool,
    /// The files the patch would touch.
    pub files: Vec<PatchedFile>,
}

/// The patch applied, or (dry run) checked.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ApplyPatchResponse {
    /// Checked with `dry_run`: everything would apply.
    DryRun(PatchDryRun),
    /// Applied and recorded.
    Applied(WriteResponse),
}

impl WriteResponse {
    fn new(s: &Settled) -> WriteResponse {
        WriteResponse {
            id: s.epoch.id.clone(),
            session: s.epoch.session.clone(),
            replacements: None,
            files: None,
            changes: changes(s),
        }
    }
}

fn tool_call(tool: &Option<String>, id: &Option<String>, default: &str) -> ToolCall {
    ToolCall {
        name: tool.clone().unwrap_or_else(|| default.to_string()),
        id: id.clone(),
    }
}

impl Service {
    /// The `read` operation: see [`ReadRequest`].
    pub fn read(&self, req: &ReadRequest) -> Result<ReadResponse, ApiError> {
        let ws = self.ws()?;
        let mut files = Vec::new();
        for p in &req.paths {
            let rel = self.ctx.path(ws.root(), p)?;
            let mut r = ws.read_file(self.ctx.session(), &rel.0, req.range)?;
            if req.record_only {
                r.content.clear();
            }
            files.push(ReadFile {
                path: relpath::display(&r.path),
                size: r.size,
                lines: r.lines,
                range: r.range,
                partial: r.partial,
                utf8: std::str::from_utf8(&r.content).is_ok(),
                content: String::from_utf8_lossy(&r.content).into_owned(),
                fingerprint: r.fingerprint,
                bytes: r.content,
            });
        }
        Ok(ReadResponse {
            session: self.ctx.session().to_string(),
            files,
        })
    }

    /// The `check_write` operation: see [`CheckWriteRequest`]. Writes nothing.
    pub fn check_write(&self, req: &CheckWriteRequest) -> Result<CheckWriteResponse, ApiError> {
        let ws = self.ws()?;
        let mut verdicts = Vec::new();
        for p in &req.paths {
            let rel = self.ctx.path(ws.root(), p)?;
            match ws.check_write(self.ctx.session(), &rel.0) {
                Ok(c) => verdicts.push(Verdict {
                    path: rel.display(),
                    allowed: true,
                    new_file: c.new_file,
                    partial_read: c.fingerprint.as_ref().is_some_and(|f| f.partial),
                    reason: None,
                    refusal: None,
                }),
                Err(rewind_core::Error::Guard(refusals)) => {
                    for r in refusals {
                        verdicts.push(Verdict {
                            path: relpath::display(&r.path),
                            allowed: false,
                            new_file: false,
                            partial_read: r.partial,
                            reason: Some(r.to_string()),
                            refusal: Some(r),
                        });
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(CheckWriteResponse(verdicts))
    }

    /// The workspace root (as the workspace will resolve it) and the path of a guarded write,
    /// known before the workspace is open: what a [`StagedWrite`] needs.
    fn staging_target(&self, p: &std::path::Path) -> Result<(PathBuf, Vec<u8>), ApiError> {
        let root = self.ctx.root();
        let root = std::fs::canonicalize(&root).unwrap_or(root);
        let rel = self.ctx.path(&root, p)?;
        Ok((root, rel.0))
    }

    /// The `write` operation: see [`WriteRequest`].
    pub fn write(&self, req: &WriteRequest) -> Result<WriteResponse, ApiError> {
        // The new content is staged (written and fsynced under no name) while the workspace
        // opens.
        let (root, rel) = self.staging_target(&req.path)?;
        let staged = StagedWrite::start(&root, rel, req.content.clone());
        let ws = self.ws()?;
        let call = tool_call(&req.tool, &req.tool_call, "write");
        let settled = ws.write_staged(self.ctx.session(), staged, &call)?;
        Ok(WriteResponse::new(&settled))
    }

    /// The `edit` operation: see [`EditRequest`].
    pub fn edit(&self, req: &EditRequest) -> Result<EditResponse, ApiError> {
        let spec = EditSpec {
            old: req.old.clone().into_bytes(),
            new: req.new.clone().into_bytes(),
            all: req.all,
        };
        // The edited content is computed and staged while the workspace opens; the edit proper
        // uses it if the file is still what the staging read.
        let (root, rel) = self.staging_target(&req.path)?;
        let staged = StagedWrite::start_edit(&root, rel, spec.clone());
        let ws = self.ws()?;
        let call = tool_call(&req.tool, &req.tool_call, "edit");
        let edited = ws.edit_staged(self.ctx.session(), staged, &spec, &call)?;
        let mut out = WriteResponse::new(&edited.settled);
        out.replacements = Some(edited.replacements);
        Ok(out)
    }

    /// The `apply_patch` operation: see [`ApplyPatchRequest`].
    pub fn apply_patch(&self, req: &ApplyPatchRequest) -> Result<ApplyPatchResponse, ApiError> {
        let ws = self.ws()?;
        let read;
        let text = match (&req.patch, &req.file) {
            (Some(text), _) => text,
            (None, Some(f)) => {
                read = std::fs::read(self.ctx.file(f)).map_err(|e| {
                    ApiError::new(ErrorKind::Error, e.to_string())
                        .context(format!("reading {}", f.display()))
                })?;
                &read
            }
            (None, None) => return Err(ApiError::usage("no patch given: a patch or a file")),
        };
        let opts = PatchOptions {
            strip: req.strip,
            dry_run: req.dry_run,
        };
        let call = tool_call(&req.tool, &req.tool_call, "apply-patch");
        let patched = ws.apply_patch(self.ctx.session(), text, &opts, &call)?;
        Ok(match &patched.settled {
            None => ApplyPatchResponse::DryRun(PatchDryRun {
                dry_run: true,
                files: patched.files,
            }),
            Some(s) => {
                let mut out = WriteResponse::new(s);
                out.files = Some(patched.files.clone());
                ApplyPatchResponse::Applied(out)
            }
        })
    }
}
