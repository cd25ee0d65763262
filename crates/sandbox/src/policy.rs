//! [`Policy`]: what a sandboxed command may do, validated against the workspace, the home
//! directory and Rewind's state directory, and turned into a [`Plan`] for the argv.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::argv::Plan;
use crate::config::{Mode, SandboxConfig};
use crate::error::{Error, Result};
use crate::paths::{absolutize, canonicalize_lenient, check_syntax, is_within};
use crate::protect;

/// Above this many denied files, refuse (each needs its own descriptor); deny the directory.
pub const MAX_DENY_FILES: usize = 256;

/// A sandbox policy for one workspace. Build it with [`Policy::new`], apply the user's
/// configuration ([`Policy::apply_config`]) and flags, then call [`Policy::command`].
#[derive(Clone, Debug)]
pub struct Policy {
    mode: Mode,
    network: bool,
    workspace: PathBuf,
    state_dir: PathBuf,
    home: Option<PathBuf>,
    writable_roots: Vec<PathBuf>,
    deny_dirs: Vec<PathBuf>,
    deny_files: Vec<PathBuf>,
    protect: Vec<String>,
    env_allow: Vec<String>,
    bwrap: Option<PathBuf>,
}

/// What an agent (not the user) asks for; it can only make the policy stricter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AgentRequest {
    /// A mode no more open than the policy's (`read-only` under `workspace-write`); `None`
    /// keeps the policy's.
    pub mode: Option<Mode>,
    /// `Some(false)` turns the network off; `Some(true)` is refused unless it is already on.
    pub network: Option<bool>,
}

/// Where Rewind keeps worktrees inside its state directory (`$REWIND_HOME/worktrees`): the
/// one place in it a workspace may be.
pub const WORKTREES_DIR: &str = "worktrees";

impl Policy {
    /// The default policy (`workspace-write`, network off) for `workspace`, with Rewind's state
    /// in `state_dir` and the user's home from `$HOME`.
    pub fn new(workspace: &Path, state_dir: &Path) -> Result<Policy> {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        Policy::with_home(workspace, state_dir, home.as_deref())
    }

    /// [`Policy::new`] with an explicit home directory (`None`: no home checks, `~` rejected).
    pub fn with_home(workspace: &Path, state_dir: &Path, home: Option<&Path>) -> Result<Policy> {
        let home = home.map(canonicalize_lenient);
        let ws = workspace
            .canonicalize()
            .map_err(|e| Error::setting("workspace", workspace, format!("cannot be used: {e}")))?;
        if !ws.is_dir() {
            return Err(Error::setting("workspace", &ws, "is not a directory"));
        }
        let state_dir = canonicalize_lenient(state_dir);
        let policy = Policy {
            mode: Mode::default(),
            network: false,
            workspace: ws.clone(),
            state_dir,
            home,
            writable_roots: Vec::new(),
            deny_dirs: Vec::new(),
            deny_files: Vec::new(),
            protect: Vec::new(),
            env_allow: Vec::new(),
            bwrap: None,
        };
        policy.check_writable("workspace", &ws)?;
        Ok(policy)
    }

    /// Applies a `[sandbox]` section; errors name the `sandbox.*` key and the value.
    pub fn apply_config(&mut self, cfg: &SandboxConfig) -> Result<()> {
        if let Some(m) = cfg.mode {
            self.mode = m;
        }
        if let Some(n) = cfg.network {
            self.network = n;
        }
        for r in &cfg.writable_roots {
            self.add_writable_root("sandbox.writable_roots", OsStr::new(r))?;
        }
        for r in &cfg.deny_read {
            self.add_deny_read("sandbox.deny_read", OsStr::new(r))?;
        }
        for r in &cfg.protect {
            self.add_protect("sandbox.protect", r)?;
        }
        for r in &cfg.env_allow {
            self.allow_env("sandbox.env_allow", r)?;
        }
        Ok(())
    }

    /// The user's explicit choice (flag or config). `DangerFullAccess` is only reachable here.
    pub fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
    }

    /// The user's choice of network access (flag or config); off by default.
    pub fn set_network(&mut self, on: bool) {
        self.network = on;
    }

    /// Uses this bwrap instead of searching `PATH` (embedding, tests). Not a config key on
    /// purpose: a workspace file must not be able to swap the sandbox for another program.
    pub fn set_bwrap(&mut self, path: impl Into<PathBuf>) {
        self.bwrap = Some(path.into());
    }

    /// An agent's request: may tighten (read-only, network off) but never loosen.
    pub fn restrict(&mut self, req: AgentRequest) -> Result<()> {
        if let Some(m) = req.mode {
            if m.openness() > self.mode.openness() {
                return Err(Error::Refused(format!(
                    "an agent asked for sandbox mode {m}, but the user's policy is {}; only the user can loosen it (flag or config)",
                    self.mode
                )));
            }
            self.mode = m;
        }
        if let Some(n) = req.network {
            if n && !self.network {
                return Err(Error::Refused(
                    "an agent asked for network access, but the user's policy has it off".into(),
                ));
            }
            self.network = n;
        }
        Ok(())
    }

    /// The mode commands will run in, after config and any agent request.
    pub fn mode(&self) -> Mode {
        self.mode
    }
    /// Whether commands get the network.
    pub fn network(&self) -> bool {
        self.network
    }
    /// The workspace: writable in `workspace-write`, the default working directory.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }
    /// Rewind's state directory for this workspace: always read-only inside the sandbox.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }
    /// Writable directories besides the workspace (canonical paths, no duplicates).
    pub fn writable_roots(&self) -> &[PathBuf] {
        &self.writable_roots
    }
    pub(crate) fn bwrap(&self) -> Option<&Path> {
        self.bwrap.as_deref()
    }

    fn resolve(&self, key: &str, raw: &OsStr) -> Result<PathBuf> {
        check_syntax(key, raw)?;
        absolutize(raw, &self.workspace, self.home.as_deref())
            .ok_or_else(|| Error::setting(key, raw, "uses ~ but HOME is not set"))
    }

    /// Rules for anything bound writable (the workspace included): never `/`, the home
    /// directory or above, a parent of the workspace, or anything holding Rewind's state.
    fn check_writable(&self, key: &str, p: &Path) -> Result<()> {
        if p == Path::new("/") {
            return Err(Error::setting(
                key,
                p,
                "is the root directory; refusing to make it writable",
            ));
        }
        if let Some(home) = &self.home {
            if is_within(home, p) {
                return Err(Error::setting(
                    key,
                    p,
                    "is your home directory or contains it; refusing to make it writable (name a project directory instead)",
                ));
            }
        }
        if key != "workspace" && p != self.workspace && is_within(&self.workspace, p) {
            return Err(Error::setting(
                key,
                p,
                "is a parent of the workspace; refusing to make it writable",
            ));
        }
        if key != "workspace" && is_within(&self.state_dir, p) {
            return Err(Error::setting(
                key,
                p,
                format!(
                    "contains the Rewind state directory {}; refusing to make it writable",
                    self.state_dir.display()
                ),
            ));
        }
        // A worktree under the state directory's `worktrees/` is a workspace like any other:
        // that directory holds copies of workspaces, none of Rewind's state.
        if is_within(p, &self.state_dir)
            && !(key == "workspace" && is_within(p, &self.state_dir.join(WORKTREES_DIR)))
        {
            return Err(Error::setting(
                key,
                p,
                format!(
                    "is inside the Rewind state directory {}",
                    self.state_dir.display()
                ),
            ));
        }
        Ok(())
    }

    /// Adds a directory the command may write. `key` names the setting in errors.
    pub fn add_writable_root(&mut self, key: &str, raw: &OsStr) -> Result<()> {
        let abs = self.resolve(key, raw)?;
        let canon = abs.canonicalize().map_err(|e| {
            Error::setting(
                key,
                raw,
                format!("does not exist or cannot be resolved ({e})"),
            )
        })?;
        if !canon.is_dir() {
            return Err(Error::setting(key, raw, "is not a directory"));
        }
        self.check_writable(key, &canon)?;
        if !self.writable_roots.contains(&canon) && canon != self.workspace {
            self.writable_roots.push(canon);
        }
        Ok(())
    }

    /// Adds a file or directory the command may not read. Missing paths are skipped (nothing
    /// to hide, and no mount point is created); symlinks are followed so the target is hidden.
    pub fn add_deny_read(&mut self, key: &str, raw: &OsStr) -> Result<()> {
        let abs = self.resolve(key, raw)?;
        if std::fs::symlink_metadata(&abs).is_err() {
            return Ok(());
        }
        let Ok(canon) = abs.canonicalize() else {
            return Ok(()); // dangling symlink: nothing readable behind it
        };
        if is_within(&self.workspace, &canon) {
            return Err(Error::setting(
                key,
                raw,
                "contains the workspace; the command could not run",
            ));
        }
        let list = if canon.is_dir() {
            &mut self.deny_dirs
        } else {
            &mut self.deny_files
        };
        if !list.contains(&canon) {
            list.push(canon);
        }
        if self.deny_files.len() > MAX_DENY_FILES {
            return Err(Error::setting(
                key,
                raw,
                format!("more than {MAX_DENY_FILES} denied files; deny their directories instead"),
            ));
        }
        Ok(())
    }

    /// Adds a workspace-relative path kept read-only (trailing `/`: a directory).
    pub fn add_protect(&mut self, key: &str, raw: &str) -> Result<()> {
        check_syntax(key, OsStr::new(raw))?;
        if raw.starts_with('/') || raw.starts_with('~') {
            return Err(Error::setting(
                key,
                raw,
                "must be relative to the workspace root",
            ));
        }
        if !self.protect.iter().any(|p| p == raw) {
            self.protect.push(raw.to_string());
        }
        Ok(())
    }

    /// Passes an extra environment variable (`NAME` or `PREFIX_*`) into the sandbox.
    pub fn allow_env(&mut self, key: &str, name: &str) -> Result<()> {
        let ok = !name.is_empty()
            && !name.starts_with('*')
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '*');
        if !ok {
            return Err(Error::setting(
                key,
                name,
                "is not an environment variable name (NAME or PREFIX_*)",
            ));
        }
        self.env_allow.push(name.to_string());
        Ok(())
    }

    /// Where the command starts: `cwd` if it is inside the workspace, else the workspace root.
    pub(crate) fn cwd_for(&self, cwd: Option<&Path>) -> PathBuf {
        cwd.and_then(|c| c.canonicalize().ok())
            .filter(|c| is_within(c, &self.workspace))
            .unwrap_or_else(|| self.workspace.clone())
    }

    /// Finds what must stay read-only. `create` makes placeholders for missing protected
    /// paths (returning `false` leaves them unprotected, used only for dry inspection).
    pub(crate) fn plan(
        &self,
        cwd: &Path,
        mut create: impl FnMut(&Path, bool) -> Result<bool>,
        hide: &[PathBuf],
    ) -> Result<Plan> {
        let mut plan = Plan {
            unshare_net: !self.network,
            deny_dirs: self.deny_dirs.clone(),
            deny_files: self.deny_files.clone(),
            cwd: cwd.to_path_buf(),
            ..Plan::default()
        };
        plan.deny_dirs.extend(hide.iter().cloned());
        if self.mode == Mode::ReadOnly {
            // The private /tmp would hide a workspace that lives under /tmp: show it again,
            // read-only.
            if is_within(&self.workspace, Path::new("/tmp")) {
                plan.read_only.push(self.workspace.clone());
            }
            return Ok(plan);
        }
        let mut writable = vec![self.workspace.clone()];
        for r in &self.writable_roots {
            // A root inside another writable root is already covered.
            if !writable.iter().any(|w| is_within(r, w)) {
                writable.push(r.clone());
            }
        }
        let mut found = protect::Found::default();
        for root in &writable {
            protect::top_git(root, &mut found)?;
        }
        protect::nested_git(&self.workspace, &mut found)?;
        protect::named(&self.workspace, &self.protect, &mut found)?;
        if self.state_dir.exists() {
            found.existing.push(self.state_dir.clone());
        }
        for m in &found.missing {
            if create(&m.path, m.dir)? {
                found.existing.push(m.path.clone());
            } else if std::fs::symlink_metadata(&m.path).is_ok_and(|md| md.file_type().is_symlink())
            {
                return Err(Error::SymlinkedMountTarget {
                    path: m.path.clone(),
                    target: std::fs::read_link(&m.path).unwrap_or_default(),
                });
            } else if m.path.exists() {
                found.existing.push(m.path.clone());
            }
        }
        let mut ro: Vec<PathBuf> = Vec::new();
        for p in found.existing {
            // Outside every writable root it is read-only already: no mount needed.
            if writable.iter().any(|w| is_within(&p, w)) && !ro.contains(&p) {
                ro.push(p);
            }
        }
        plan.writable = writable;
        plan.read_only = ro;
        Ok(plan)
    }

    /// The environment the sandbox gets (see [`crate::env`]), and `REWIND_SANDBOX` set to the
    /// mode: a command can tell it runs sandboxed, and `rewind` run inside refuses to change
    /// the sandbox mode with a clear reason (the state directory is read-only in there anyway).
    /// Whatever the caller's environment had under that name is replaced.
    pub fn environment(&self) -> Vec<(OsString, OsString)> {
        let mut env: Vec<_> = crate::env::scrub(std::env::vars_os(), &self.env_allow)
            .into_iter()
            .filter(|(k, _)| k != crate::env::SANDBOX_VAR)
            .collect();
        env.push((crate::env::SANDBOX_VAR.into(), self.mode().as_str().into()));
        env
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fx {
        _d: tempfile::TempDir,
        root: PathBuf,
    }

    fn fx() -> Fx {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().canonicalize().unwrap();
        for p in [
            "home/me",
            "home/me/ws/.git/hooks",
            "state",
            "extra",
            "home/me/.ssh",
        ] {
            std::fs::create_dir_all(root.join(p)).unwrap();
        }
        std::fs::write(root.join("home/me/.netrc"), "secret").unwrap();
        Fx { _d: d, root }
    }

    fn policy(f: &Fx) -> Policy {
        Policy::with_home(
            &f.root.join("home/me/ws"),
            &f.root.join("state"),
            Some(&f.root.join("home/me")),
        )
        .unwrap()
    }

    fn err(r: Result<()>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn dangerous_writable_roots_are_refused_naming_key_and_value() {
        let f = fx();
        let mut p = policy(&f);
        let key = "--writable-root";
        for (raw, why) in [
            ("/", "root directory"),
            ("~", "home directory"),
            (f.root.join("home").to_str().unwrap(), "home directory"),
            (
                f.root.join("state").to_str().unwrap(),
                "Rewind state directory",
            ),
            (f.root.to_str().unwrap(), "home directory"),
            ("/nonexistent/dir", "does not exist"),
            ("--bind", "starts with '-'"),
        ] {
            let m = err(p.add_writable_root(key, OsStr::new(raw)));
            assert!(m.contains(key) && m.contains(why), "{raw}: {m}");
        }
        p.add_writable_root(key, f.root.join("extra").as_os_str())
            .unwrap();
        assert_eq!(p.writable_roots(), [f.root.join("extra")]);
    }

    #[test]
    fn parent_of_workspace_and_state_holder_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("a/ws")).unwrap();
        std::fs::create_dir_all(root.join("b/state")).unwrap();
        let mut p = Policy::with_home(&root.join("a/ws"), &root.join("b/state"), None).unwrap();
        let m = err(p.add_writable_root("k", root.join("a").as_os_str()));
        assert!(m.contains("parent of the workspace"), "{m}");
        let m = err(p.add_writable_root("k", root.join("b").as_os_str()));
        assert!(m.contains("contains the Rewind state directory"), "{m}");
    }

    #[test]
    fn workspace_may_not_be_home_or_root() {
        let f = fx();
        let e = Policy::with_home(
            &f.root.join("home/me"),
            &f.root.join("state"),
            Some(&f.root.join("home/me")),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("workspace") && e.contains("home directory"),
            "{e}"
        );
        let e = Policy::with_home(Path::new("/"), &f.root.join("state"), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("root directory"), "{e}");
    }

    #[test]
    fn deny_read_resolves_symlinks_and_skips_missing() {
        let f = fx();
        let mut p = policy(&f);
        let h = f.root.join("home/me");
        std::os::unix::fs::symlink(h.join(".netrc"), h.join("netrc-link")).unwrap();
        p.add_deny_read("k", OsStr::new("~/.ssh")).unwrap();
        p.add_deny_read("k", OsStr::new("~/netrc-link")).unwrap();
        p.add_deny_read("k", OsStr::new("~/missing")).unwrap();
        assert_eq!(p.deny_dirs, [h.join(".ssh")]);
        assert_eq!(p.deny_files, [h.join(".netrc")]);
        let m = err(p.add_deny_read("k", OsStr::new("~")));
        assert!(m.contains("contains the workspace"), "{m}");
    }

    #[test]
    fn config_applies_and_names_keys() {
        let f = fx();
        let mut p = policy(&f);
        let cfg = SandboxConfig {
            writable_roots: vec!["../x".into()],
            ..Default::default()
        };
        let m = err(p.apply_config(&cfg));
        assert!(
            m.contains("sandbox.writable_roots") && m.contains("../x"),
            "{m}"
        );
        let cfg = SandboxConfig {
            mode: Some(Mode::ReadOnly),
            network: Some(true),
            deny_read: vec!["~/.ssh".into()],
            protect: vec!["AGENTS.md".into()],
            env_allow: vec!["CARGO_*".into()],
            ..Default::default()
        };
        p.apply_config(&cfg).unwrap();
        assert_eq!((p.mode(), p.network()), (Mode::ReadOnly, true));
        let m = err(p.allow_env("sandbox.env_allow", "A=B"));
        assert!(m.contains("sandbox.env_allow"), "{m}");
        let m = err(p.add_protect("sandbox.protect", "/abs"));
        assert!(m.contains("relative"), "{m}");
    }

    #[test]
    fn agent_requests_only_tighten() {
        let f = fx();
        let mut p = policy(&f);
        let e = p
            .restrict(AgentRequest {
                mode: Some(Mode::DangerFullAccess),
                network: None,
            })
            .unwrap_err();
        assert!(matches!(e, Error::Refused(_)) && e.is_refusal());
        assert_eq!(p.mode(), Mode::WorkspaceWrite);
        assert!(p
            .restrict(AgentRequest {
                mode: None,
                network: Some(true)
            })
            .is_err());
        p.restrict(AgentRequest {
            mode: Some(Mode::ReadOnly),
            network: Some(false),
        })
        .unwrap();
        assert_eq!(p.mode(), Mode::ReadOnly);
        p.set_mode(Mode::DangerFullAccess); // the user may
        p.restrict(AgentRequest {
            mode: Some(Mode::WorkspaceWrite),
            network: None,
        })
        .unwrap();
        assert_eq!(p.mode(), Mode::WorkspaceWrite);
    }

    #[test]
    fn plan_protects_git_and_names_inside_writable_area_only() {
        let f = fx();
        let mut p = policy(&f);
        p.add_writable_root("k", f.root.join("extra").as_os_str())
            .unwrap();
        std::fs::create_dir_all(f.root.join("extra/.git")).unwrap();
        let ws = p.workspace().to_path_buf();
        let mut created = Vec::new();
        let plan = p
            .plan(
                &ws,
                |path, dir| {
                    created.push((path.to_path_buf(), dir));
                    Ok(true)
                },
                &[],
            )
            .unwrap();
        assert_eq!(plan.writable, [ws.clone(), f.root.join("extra")]);
        assert!(plan.read_only.contains(&ws.join(".git")));
        assert!(plan.read_only.contains(&f.root.join("extra/.git")));
        assert!(plan.read_only.contains(&ws.join(".rewind.toml")));
        assert!(plan.read_only.contains(&ws.join(".claude")));
        assert!(
            !plan.read_only.contains(&f.root.join("state")),
            "state is outside: no mount"
        );
        assert!(created.contains(&(ws.join(".claude"), true)));
        assert!(created.contains(&(ws.join(".rewind.toml"), false)));
        assert!(plan.unshare_net);
        p.set_mode(Mode::ReadOnly);
        let plan = p
            .plan(&ws, |_, _| panic!("no placeholders in read-only"), &[])
            .unwrap();
        assert!(plan.writable.is_empty());
        // Only the workspace itself, and only when the private /tmp would hide it.
        let expect: Vec<PathBuf> = if ws.starts_with("/tmp") {
            vec![ws.clone()]
        } else {
            vec![]
        };
        assert_eq!(plan.read_only, expect);
    }
}
