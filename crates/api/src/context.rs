//! Who asks and from where: the one rule every front uses to turn "where the caller is" into a
//! workspace and its paths.
//!
//! A request carries a directory (the caller's working directory, `git -C DIR`'s meaning) and
//! a session. The workspace is the nearest registered ancestor of that directory (so a command
//! works from a subdirectory, like git), else the directory itself. A path the caller gives is
//! taken from the directory when relative and must be inside the workspace when absolute; it
//! becomes a [`WsPath`], relative to the workspace root.

use std::path::{Path, PathBuf};

use rewind_core::{OpenOptions, Workspace};

use crate::error::ApiError;

/// The caller's directory and session, checked.
#[derive(Clone, Debug)]
pub struct Context {
    dir: PathBuf,
    session: String,
    /// The process the requests come from, when that is not this one (a server's client).
    peer: Option<u32>,
}

/// A path relative to the workspace root (bytes, as the file system has them; empty is the
/// root itself).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WsPath(pub Vec<u8>);

impl WsPath {
    /// The path as text (lossy where it is not UTF-8), for messages.
    pub fn display(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }
}

impl Context {
    /// A context for `session` acting from `dir` (absolute, or relative to the process's
    /// current directory). The directory must exist; it is made canonical so it compares with
    /// workspace roots.
    pub fn new(dir: &Path, session: &str) -> Result<Context, ApiError> {
        if session.is_empty() {
            return Err(ApiError::usage("a session name cannot be empty"));
        }
        let dir = std::fs::canonicalize(dir).map_err(|e| {
            ApiError::usage(format!("cannot use {}: {e}", dir.display()))
                .hint("give an existing directory")
        })?;
        Ok(Context {
            dir,
            session: session.to_string(),
            peer: None,
        })
    }

    /// The same, for requests that process `pid` makes through this one (a server's client):
    /// an epoch it asks to own is owned by that process.
    pub fn with_peer(mut self, pid: u32) -> Context {
        self.peer = Some(pid);
        self
    }

    /// The same, for requests of `peer` (`None`: of this process).
    pub(crate) fn set_peer(&mut self, peer: Option<u32>) {
        self.peer = peer;
    }

    /// The process the requests come from, when that is not this one.
    pub fn peer(&self) -> Option<u32> {
        self.peer
    }

    /// The directory the request acts from (canonical).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The session the request acts for.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// The workspace root: the nearest registered ancestor of the directory, or a nearer one
    /// that is the moved root of a registered workspace (opening re-links it), else the
    /// directory itself.
    pub fn root(&self) -> PathBuf {
        match rewind_core::rewind_home() {
            Ok(home) => rewind_core::locate(&home, &self.dir),
            Err(_) => self.dir.clone(),
        }
    }

    /// The state directory of the workspace, if it is registered, without opening it.
    pub fn state_dir(&self) -> Option<PathBuf> {
        rewind_core::state_dir_of(&rewind_core::rewind_home().ok()?, &self.root())
    }

    /// Opens the workspace (registering it on first use; `force` allows a broad root or one
    /// replaced since it was registered).
    pub(crate) fn open(&self, force: bool) -> Result<Workspace, ApiError> {
        let ws = Workspace::open(&self.root(), &OpenOptions { force, home: None })?;
        rewind_core::trace::phase("workspace open");
        Ok(ws)
    }

    /// A path the caller gave, as a workspace path of `ws`: a relative one is taken from the
    /// directory, an absolute one must be inside the workspace.
    pub fn path(&self, ws_root: &Path, user: &Path) -> Result<WsPath, ApiError> {
        Ok(WsPath(rewind_core::relpath::from_user(
            ws_root, &self.dir, user,
        )?))
    }

    /// Several paths the caller gave, as workspace paths (bytes) of `ws_root`.
    pub(crate) fn ws_paths(
        &self,
        ws_root: &Path,
        user: &[PathBuf],
    ) -> Result<Vec<Vec<u8>>, ApiError> {
        user.iter().map(|p| Ok(self.path(ws_root, p)?.0)).collect()
    }

    /// A file the caller named that is not a workspace path (a payload, a patch file): a
    /// relative one is taken from the directory, like workspace paths.
    pub fn file(&self, user: &Path) -> PathBuf {
        self.dir.join(user)
    }
}
