//! Remotes: a workspace's history in object storage (`docs/format.md`, Remote store). Where
//! remotes are configured, how credentials are found and what each operation uploads or
//! fetches is `rewind-remote`'s; these are its requests and responses.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{ApiError, ErrorKind, Service};

pub use rewind_remote::{CloneReport, PullReport, PushReport, RemoteGcReport, RemoteInfo};

/// Add a remote to the user's configuration (`config.toml` in the state directory, never the
/// workspace's `.rewind.toml`, which an agent can write). Credentials are never arguments:
/// they come from the standard AWS environment variables or the remote's section of
/// `config.toml`. An encrypted remote (`encrypt`, or `key_file`) has every object but its
/// `config` sealed with a key kept outside it, in a key file: only the file's path is ever
/// passed or recorded.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoteAddRequest {
    /// Its name (letters, digits, `-`, `_`, `.`), such as `origin`.
    pub name: String,
    /// `s3://bucket/prefix` or `file:///absolute/path`.
    pub url: String,
    /// The S3 endpoint, for storage other than AWS's (`http://127.0.0.1:3900`).
    #[serde(default)]
    pub endpoint: Option<String>,
    /// The S3 region.
    #[serde(default)]
    pub region: Option<String>,
    /// Encrypt it with a new random key, generated into `keys/NAME.key` of the state directory
    /// (mode 0600; an existing file is never overwritten).
    #[serde(default)]
    pub encrypt: bool,
    /// Encrypt it with the key in this existing key file (32 bytes, raw or as 64 hex digits;
    /// readable by the user alone); relative to the caller's directory. With `encrypt`, this
    /// key is used and none is generated.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
}

/// The remote added, and the file it was written to.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct RemoteAddResponse {
    /// The remote as listed.
    pub remote: RemoteInfo,
    /// The configuration file written.
    pub config: String,
    /// The key file generated (`encrypt`), if one was. Back it up: without it the remote
    /// cannot be read.
    pub key_generated: Option<String>,
}

/// List the remotes: the user's, and the origin a cloned workspace came from.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoteListRequest {}

/// Every remote.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct RemoteListResponse {
    /// The remotes, configured ones first, by name.
    pub remotes: Vec<RemoteInfo>,
}

/// Remove a remote from the user's configuration. Nothing in the remote is touched.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoteRemoveRequest {
    /// Its name.
    pub name: String,
}

/// The remote removed.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct RemoteRemoveResponse {
    /// Its name.
    pub name: String,
    /// Its URL.
    pub url: String,
    /// Its key file, for an encrypted remote: left where it is (the remote cannot be read
    /// without it).
    pub key_file: Option<String>,
}

/// Upload what the remote lacks of this workspace's history: sealed packs, their indexes, the
/// op log's new rows, then a manifest. Idempotent; an interrupted push run again uploads only
/// what is missing.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PushRequest {
    /// The remote's name; may be left out when there is only one.
    #[serde(default)]
    pub remote: Option<String>,
}

/// Bring this workspace's view of the remote up to date: the history it follows (a clone's
/// origin) and the packs of it the store lacks. Files are not changed.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PullRequest {
    /// The remote's name; may be left out when there is only one.
    #[serde(default)]
    pub remote: Option<String>,
}

/// Materialise a checkpoint's tree from a remote into a new or empty directory and register
/// it as a workspace holding the remote's history. Nothing is written into the directory
/// unless every object the tree needs was fetched and verified.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CloneRequest {
    /// The remote's URL (`s3://bucket/prefix`, `file:///path`), or the name of a configured
    /// remote.
    pub url: String,
    /// The directory: absent or empty; relative to the caller's directory.
    pub dir: PathBuf,
    /// The checkpoint (id or unique prefix); default: the remote's newest.
    #[serde(default)]
    pub checkpoint: Option<String>,
    /// The S3 endpoint, for storage other than AWS's.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// The S3 region.
    #[serde(default)]
    pub region: Option<String>,
    /// The key file of an encrypted remote (relative to the caller's directory); default: the
    /// configured remote's `key_file`. Recorded (the path) in the clone, for its pulls.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
}

impl From<rewind_remote::Error> for ApiError {
    fn from(e: rewind_remote::Error) -> ApiError {
        use rewind_remote::Error as E;
        // The engine's and the store's errors keep their own kinds (and hints).
        let e = match e {
            E::Core(c) => return c.into(),
            E::Store(s) => return s.into(),
            other => other,
        };
        let kind = match &e {
            E::Usage(_) => ErrorKind::Usage,
            E::Unknown(_) => ErrorKind::Unknown,
            E::State(_) => ErrorKind::State,
            E::Missing { .. } | E::Corrupt { .. } => ErrorKind::Unavailable,
            E::Transport { .. } | E::Core(_) | E::Store(_) => ErrorKind::Error,
        };
        let mut out = ApiError::new(kind, e.to_string());
        match &e {
            E::Missing { .. } | E::Corrupt { .. } => {
                out = out.hint(
                    "nothing was written; the remote must be repaired (push again from a \
                     workspace that has the object) before this can succeed",
                )
            }
            E::Transport { .. } => {
                out = out.hint(
                    "check the URL, endpoint and region, and the credentials in \
                     AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or config.toml); then try again",
                )
            }
            _ => {}
        }
        out
    }
}

impl Service {
    /// `e`, with a hint when it is content this workspace lacks and it is a clone whose
    /// history's other packs have not been pulled: they may hold it.
    pub(crate) fn clone_hint(&self, e: ApiError) -> ApiError {
        if e.kind != ErrorKind::Unavailable {
            return e;
        }
        let cloned = self
            .ws()
            .ok()
            .and_then(|ws| ws.remote_links().ok())
            .is_some_and(|links| !links.is_empty());
        if cloned {
            e.hint(
                "this workspace is a clone, which fetched only its tree's packs: pull (operation \
                 pull) fetches the rest of its history's, then try again",
            )
        } else {
            e
        }
    }

    /// The `remote.add` operation: see [`RemoteAddRequest`].
    pub fn remote_add(&self, req: &RemoteAddRequest) -> Result<RemoteAddResponse, ApiError> {
        let home = rewind_core::rewind_home()?;
        let l = rewind_remote::Location::new(
            &req.name,
            &req.url,
            req.endpoint.as_deref(),
            req.region.as_deref(),
        )?
        .with_key_file(req.key_file.as_ref().map(|p| self.ctx.file(p)));
        let generate = req.encrypt && req.key_file.is_none();
        let added = rewind_remote::add(&home, &l, generate)?;
        let remote = rewind_remote::list(&home, None)?
            .into_iter()
            .find(|r| r.name == req.name)
            .ok_or_else(|| ApiError::new(ErrorKind::Error, "the remote added is not listed"))?;
        Ok(RemoteAddResponse {
            remote,
            config: added.config.display().to_string(),
            key_generated: added.key_generated.map(|p| p.display().to_string()),
        })
    }

    /// The `remote.list` operation: see [`RemoteListRequest`]. Does not register the
    /// directory as a workspace.
    pub fn remote_list(&self, _req: &RemoteListRequest) -> Result<RemoteListResponse, ApiError> {
        let home = rewind_core::rewind_home()?;
        let ws = if self.ctx.state_dir().is_some() {
            Some(self.ws()?)
        } else {
            None
        };
        Ok(RemoteListResponse {
            remotes: rewind_remote::list(&home, ws)?,
        })
    }

    /// The `remote.remove` operation: see [`RemoteRemoveRequest`].
    pub fn remote_remove(
        &self,
        req: &RemoteRemoveRequest,
    ) -> Result<RemoteRemoveResponse, ApiError> {
        let home = rewind_core::rewind_home()?;
        let (url, key_file) = rewind_remote::remove(&home, &req.name)?;
        Ok(RemoteRemoveResponse {
            name: req.name.clone(),
            url,
            key_file: key_file.map(|p| p.display().to_string()),
        })
    }

    /// The remotes a checkpoint pushes to by itself: every configured remote when the user's
    /// `[remote] auto_push = "checkpoint"`, else none. A front that made a checkpoint starts
    /// `rewind push NAME` for each in the background (it never waits for the push).
    pub fn auto_push_remotes(&self) -> Result<Vec<String>, ApiError> {
        let home = rewind_core::rewind_home()?;
        let section = rewind_core::Config::load(&home, None)?.remote;
        Ok(match section.auto_push {
            rewind_core::AutoPush::Checkpoint => section.remotes.into_keys().collect(),
            rewind_core::AutoPush::Off => Vec::new(),
        })
    }

    /// The `push` operation: see [`PushRequest`].
    pub fn push(&self, req: &PushRequest) -> Result<PushReport, ApiError> {
        let home = rewind_core::rewind_home()?;
        let ws = self.ws()?;
        let l = rewind_remote::resolve(&home, ws, req.remote.as_deref())?;
        let remote = rewind_remote::Remote::open(l, true)?;
        Ok(rewind_remote::push(ws, &remote)?)
    }

    /// The `pull` operation: see [`PullRequest`].
    pub fn pull(&self, req: &PullRequest) -> Result<PullReport, ApiError> {
        let home = rewind_core::rewind_home()?;
        let ws = self.ws()?;
        let l = rewind_remote::resolve(&home, ws, req.remote.as_deref())?;
        let remote = rewind_remote::Remote::open(l, false)?;
        Ok(rewind_remote::pull(ws, &remote)?)
    }

    /// The `clone` operation: see [`CloneRequest`].
    pub fn clone_remote(&self, req: &CloneRequest) -> Result<CloneReport, ApiError> {
        let home = rewind_core::rewind_home()?;
        let configured = rewind_remote::configured(&home)?;
        let l = match configured.get(&req.url) {
            Some(c) if !req.url.contains("://") => {
                rewind_remote::Location::from_config(&req.url, c)?
            }
            _ => rewind_remote::location_for_url(
                &home,
                &req.url,
                req.endpoint.as_deref(),
                req.region.as_deref(),
            )?,
        };
        // A key file given wins over the configured one.
        let l = match &req.key_file {
            Some(k) => l.with_key_file(Some(self.ctx.file(k))),
            None => l,
        };
        let remote = rewind_remote::Remote::open(l, false)?;
        let dir = self.ctx.file(&req.dir);
        Ok(rewind_remote::clone(
            &home,
            &remote,
            &dir,
            req.checkpoint.as_deref(),
        )?)
    }
}
