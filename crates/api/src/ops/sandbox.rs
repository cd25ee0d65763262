//! The OS sandbox (bubblewrap + seccomp): check that it works here, and run a command under
//! the workspace's policy (the `[sandbox]` config, overridden by the request).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use rewind_sandbox::Policy;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::command::{exit_code, Output, Runnable};
use crate::{ApiError, ErrorKind, SandboxMode, Service};

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

/// Show the workspace's sandbox mode, or change it. A change is kept in the op log (who,
/// when, from what to what; `log` shows it) and replaces `[sandbox] mode` of the user's
/// `config.toml` for this workspace; the workspace's `.rewind.toml` may still tighten it,
/// never loosen it. Refused from inside the sandbox.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SandboxModeRequest {
    /// The mode to set: `workspace-write`, `read-only` or `danger-full-access` (no sandbox).
    /// Neither this nor `toggle`: show the mode.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub set: Option<SandboxMode>,
    /// Flip the workspace's mode: `danger-full-access` becomes `workspace-write`, anything
    /// else `danger-full-access`.
    #[serde(default)]
    pub toggle: bool,
    /// The workspace's mode the caller decided from (`workspace_mode` of an earlier answer):
    /// if it changed meanwhile, nothing is written (kind `state`).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub expect: Option<SandboxMode>,
    /// The front the change comes through, recorded with it (`cli`, `web`, `tui`; `rpc` when
    /// a JSON-RPC client does not say).
    #[serde(default)]
    pub via: Option<String>,
}

/// The workspace's sandbox mode, and the change made, if any.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct SandboxModeResponse {
    /// The mode commands run in now: `workspace_mode`, tightened by `.rewind.toml` if it says
    /// so.
    pub mode: String,
    /// The workspace's own mode: the newest change made from a front, else `[sandbox] mode`
    /// of the user's `config.toml`, else `workspace-write`.
    pub workspace_mode: String,
    /// Where `workspace_mode` comes from: `setting` (a change made from a front), `config`
    /// or `default`.
    pub source: String,
    /// `.rewind.toml` when the workspace file tightens `workspace_mode` to `mode`.
    pub tightened_by: Option<String>,
    /// The change this request recorded; `null` when it only showed the mode or the mode was
    /// already the one asked for.
    pub changed: Option<rewind_core::SettingRow>,
    /// What `toggle` would set now (from `workspace_mode`).
    pub toggle_to: String,
    /// Whether that toggle loosens the sandbox: fronts ask for confirmation first, in the
    /// words of `toggle_consequence`.
    pub toggle_loosens: bool,
    /// What commands may do under `toggle_to`.
    pub toggle_consequence: String,
}

/// The environment variable the sandbox sets for the commands it runs (see `docs/sandbox.md`):
/// its mode.
pub const SANDBOX_ENV: &str = rewind_sandbox::env::SANDBOX_VAR;

impl Service {
    /// The change of the sandbox mode made for this workspace from a front, if any; read only
    /// when the workspace is registered (never registers it).
    fn sandbox_mode_setting(&self) -> Result<Option<rewind_core::SettingRow>, ApiError> {
        if self.ctx.state_dir().is_none() {
            return Ok(None);
        }
        Ok(self.ws()?.setting(rewind_core::SANDBOX_MODE)?)
    }

    /// The configuration for this workspace with the front's settings applied (see
    /// [`SandboxModeRequest`]): what commands run under.
    pub fn config_with_settings(&self) -> Result<rewind_core::Config, ApiError> {
        let home = rewind_core::rewind_home()?;
        let mut user = toml::Table::new();
        if let Some(s) = self.sandbox_mode_setting()? {
            user.insert(
                "sandbox".into(),
                toml::Value::Table(toml::Table::from_iter([(
                    "mode".to_string(),
                    toml::Value::String(s.value),
                )])),
            );
        }
        Ok(rewind_core::Config::load_with(
            &home,
            Some(&self.ctx.root()),
            user,
        )?)
    }

    /// The `sandbox.mode` operation: see [`SandboxModeRequest`].
    pub fn sandbox_mode(&self, req: &SandboxModeRequest) -> Result<SandboxModeResponse, ApiError> {
        if req.set.is_some() && req.toggle {
            return Err(ApiError::usage("give a mode to set or toggle, not both"));
        }
        let home = rewind_core::rewind_home()?;
        let setting = self.sandbox_mode_setting()?;
        let configured = rewind_core::Config::load(&home, None)?.sandbox.mode;
        let (own, source) = match (&setting, configured) {
            (Some(s), _) => (
                s.value.parse::<SandboxMode>().map_err(|e| {
                    ApiError::new(
                        crate::ErrorKind::State,
                        format!(
                            "the op log holds an unknown sandbox mode {:?}: {e}",
                            s.value
                        ),
                    )
                })?,
                "setting",
            ),
            (None, Some(m)) => (m, "config"),
            (None, None) => (SandboxMode::default(), "default"),
        };
        let wanted = match (req.set, req.toggle) {
            (Some(m), _) => Some(m),
            (None, true) => Some(own.toggled()),
            (None, false) => None,
        };
        let mut changed = None;
        let mut own_now = own;
        if let Some(m) = wanted {
            if std::env::var_os(SANDBOX_ENV).is_some() {
                return Err(ApiError::new(
                    crate::ErrorKind::Sandbox,
                    "the sandbox mode cannot be changed from inside the sandbox; nothing was \
                     changed. Change it from a terminal of your own (rewind sandbox mode MODE)",
                ));
            }
            if let Some(e) = req.expect {
                if e != own {
                    return Err(ApiError::new(
                        crate::ErrorKind::State,
                        format!("the workspace's sandbox mode is {own} now, not {e}: it changed meanwhile; nothing was changed, look again"),
                    ));
                }
            }
            if m != own {
                let by = rewind_core::Setter {
                    session: Some(self.ctx.session().to_string()),
                    front: req.via.clone().unwrap_or_else(|| "rpc".into()),
                };
                let previous = setting.as_ref().map(|s| s.value.clone());
                let row = self.ws()?.set_setting(
                    rewind_core::SANDBOX_MODE,
                    m.as_str(),
                    previous.as_deref(),
                    &by,
                )?;
                changed = Some(row);
                own_now = m;
            }
        }
        let effective = self
            .config_with_settings()?
            .sandbox
            .mode
            .unwrap_or_default();
        Ok(SandboxModeResponse {
            mode: effective.to_string(),
            workspace_mode: own_now.to_string(),
            source: if changed.is_some() { "setting" } else { source }.to_string(),
            tightened_by: (effective != own_now).then(|| rewind_core::WORKSPACE_CONFIG.to_string()),
            changed,
            toggle_to: own_now.toggled().to_string(),
            toggle_loosens: own_now.toggled().openness() > own_now.openness(),
            toggle_consequence: own_now.toggled().consequence().to_string(),
        })
    }

    /// The workspace's sandbox policy from config (user `config.toml`, the mode set from a
    /// front, the workspace's `.rewind.toml`); the workspace root is the one every operation
    /// uses.
    pub(crate) fn sandbox_policy(&self) -> Result<Policy, ApiError> {
        let ws = self.ctx.root();
        let home = rewind_core::rewind_home()?;
        let config = self.config_with_settings()?;
        let mut p = Policy::new(&ws, &home)?;
        p.apply_config(&config.sandbox)?;
        Ok(p)
    }

    /// `policy` with every file over the size cap read-only, when `capture.large_files` is
    /// `protect` (else as it is). A path the sandbox cannot name (not UTF-8) is refused: the
    /// command does not run with it writable.
    pub(crate) fn protect_large_files(&self, mut policy: Policy) -> Result<Policy, ApiError> {
        let ws = self.ws()?;
        if ws.config().capture.large_files() != rewind_core::LargeFiles::Protect {
            return Ok(policy);
        }
        for p in ws.oversize_files()? {
            let Ok(rel) = String::from_utf8(p.clone()) else {
                return Err(ApiError::new(
                    ErrorKind::Usage,
                    format!(
                        "{} is over capture.max_file_size and its name is not UTF-8, so the \
                         sandbox cannot keep it read-only (capture.large_files = \"protect\")",
                        String::from_utf8_lossy(&p)
                    ),
                )
                .hint("rename it, raise capture.max_file_size, or set capture.large_files = \"uncovered\""));
            };
            policy.add_protect("capture.large_files", &rel)?;
        }
        Ok(policy)
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
        // In a workspace: files over the size cap as its last capture found them.
        if self.ctx.state_dir().is_some() {
            p = self.protect_large_files(p)?;
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
