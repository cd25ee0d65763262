//! The OS sandbox (bubblewrap + seccomp): check that it works here, and run a command under
//! the workspace's policy (the `[sandbox]` config, overridden by the request).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use rewind_sandbox::Policy;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::command::{exit_code, Output, Runnable};
use crate::{ApiError, SandboxMode, Service};

/// Preflight: does the sandbox work here? Checks the platform, that bubblewrap is installed and
/// new enough, and runs `true` under the workspace's policy. Fails (kind `sandbox`) with the
/// reason when it does not.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SandboxCheckRequest {}

/// One check the preflight ran, and its outcome.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct SandboxCheck {
    /// What was checked: `platform`, `bubblewrap`, `trial run`.
    pub check: String,
    /// What it found.
    pub result: String,
}

/// The sandbox works here.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct SandboxCheckResponse {
    /// Always true: a sandbox that does not work is an error of kind `sandbox` instead.
    pub ok: bool,
    /// The workspace root the policy was built for.
    pub workspace: PathBuf,
    /// The mode commands would run in (`workspace-write`, `read-only`,
    /// `danger-full-access`).
    pub mode: String,
    /// Whether commands would get the network.
    pub network: bool,
    /// The `bwrap` executable used.
    pub bwrap: Option<PathBuf>,
    /// Its version, `MAJOR.MINOR.PATCH`.
    pub version: Option<String>,
    /// The checks run, in order.
    pub checks: Vec<SandboxCheck>,
    /// Always `null` (see `ok`).
    pub error: Option<String>,
}

/// Run a command under the sandbox policy, in the request's directory, with this process's
/// standard input, output and error. Nothing is recorded.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SandboxExecRequest {
    /// The command and its arguments.
    #[serde(deserialize_with = "crate::serde_util::os_strings")]
    #[schemars(with = "Vec<String>")]
    pub command: Vec<OsString>,
    /// workspace-write (default), read-only, or danger-full-access (no sandbox at all).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub mode: Option<SandboxMode>,
    /// Allow network access (internet sockets; host unix sockets stay blocked).
    #[serde(default)]
    pub network: bool,
    /// Other directories the command may write.
    #[serde(default, deserialize_with = "crate::serde_util::os_strings")]
    #[schemars(with = "Vec<String>")]
    pub writable_roots: Vec<OsString>,
    /// Files or directories the command may not read.
    #[serde(default, deserialize_with = "crate::serde_util::os_strings")]
    #[schemars(with = "Vec<String>")]
    pub deny_read: Vec<OsString>,
    /// Give the command empty standard input and return its standard output and error in
    /// the response (what a server does: it cannot pass them through).
    #[serde(default)]
    pub collect_output: bool,
}

/// How the command ended.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct SandboxExecResponse {
    /// The command's exit code (128+N if killed by signal N).
    pub exit_code: i32,
    /// What it printed, with `collect_output`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Output>,
}

/// A command ready to run under its policy ([`Service::sandbox_prepare`]).
pub struct SandboxRun {
    policy: Policy,
    command: Vec<OsString>,
    cwd: PathBuf,
    collect_output: bool,
}

impl SandboxRun {
    /// The mode it will run in (`danger-full-access`: no sandbox at all, which a front should
    /// say before running).
    pub fn mode(&self) -> SandboxMode {
        self.policy.mode()
    }

    /// Runs the command and waits for it.
    pub fn run(self) -> Result<SandboxExecResponse, ApiError> {
        let cmd = self.policy.command(&self.command, Some(&self.cwd))?;
        let (status, output) = Runnable::Sandboxed(cmd).run(self.collect_output)?;
        Ok(SandboxExecResponse {
            exit_code: exit_code(status),
            output,
        })
    }
}

/// A relative path given by the caller is relative to the request's directory (`~` and what
/// looks like a flag are left for the policy to read or refuse).
fn from_dir(dir: &Path, raw: &OsString) -> OsString {
    let p = Path::new(raw);
    if p.is_absolute()
        || raw.to_string_lossy().starts_with('~')
        || raw.to_string_lossy().starts_with('-')
    {
        raw.clone()
    } else {
        dir.join(p).into_os_string()
    }
}

impl Service {
    /// The workspace's sandbox policy from config (user `config.toml` and the workspace's
    /// `.rewind.toml`); the workspace root is the one every operation uses.
    pub(crate) fn sandbox_policy(&self) -> Result<Policy, ApiError> {
        let ws = self.ctx.root();
        let home = rewind_core::rewind_home()?;
        let config = rewind_core::Config::load(&home, Some(&ws))?;
        let mut p = Policy::new(&ws, &home)?;
        p.apply_config(&config.sandbox)?;
        Ok(p)
    }

    /// The `sandbox_check` operation: see [`SandboxCheckRequest`].
    pub fn sandbox_check(
        &self,
        _req: &SandboxCheckRequest,
    ) -> Result<SandboxCheckResponse, ApiError> {
        let p = self.sandbox_policy()?;
        let report = p
            .preflight()
            .map_err(|e| ApiError::from(e).context("sandbox unavailable"))?;
        Ok(SandboxCheckResponse {
            ok: true,
            workspace: self.ctx.root(),
            mode: p.mode().to_string(),
            network: p.network(),
            bwrap: Some(report.bwrap),
            version: Some(report.version),
            checks: report
                .checks
                .into_iter()
                .map(|(check, result)| SandboxCheck { check, result })
                .collect(),
            error: None,
        })
    }

    /// The policy with the request's overrides, and the command ready to run under it.
    pub fn sandbox_prepare(&self, req: &SandboxExecRequest) -> Result<SandboxRun, ApiError> {
        let dir = self.ctx.dir();
        let mut p = self.sandbox_policy()?;
        if let Some(m) = req.mode {
            p.set_mode(m);
        }
        if req.network {
            p.set_network(true);
        }
        for r in &req.writable_roots {
            p.add_writable_root("--writable-root", &from_dir(dir, r))?;
        }
        for r in &req.deny_read {
            p.add_deny_read("--deny-read", &from_dir(dir, r))?;
        }
        Ok(SandboxRun {
            policy: p,
            command: req.command.clone(),
            cwd: dir.to_path_buf(),
            collect_output: req.collect_output,
        })
    }
}

impl Service {
    /// [`Service::sandbox_prepare`], then [`SandboxRun::run`].
    pub fn sandbox_exec(&self, req: &SandboxExecRequest) -> Result<SandboxExecResponse, ApiError> {
        self.sandbox_prepare(req)?.run()
    }
}
