//! Configuration: `$REWIND_HOME/config.toml`, overridden key by key by `.rewind.toml` at the
//! workspace root. Unknown keys are an error naming the file, so a typo never silently turns a
//! protection off.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

pub use rewind_sandbox::SandboxConfig;

use crate::Error;

/// File name of the per-workspace override at the root.
pub const WORKSPACE_CONFIG: &str = ".rewind.toml";
/// File name of the user-level config in `$REWIND_HOME`.
pub const USER_CONFIG: &str = "config.toml";

/// The whole configuration, user file and workspace file merged ([`Config::load`]); a
/// missing section or key means its default.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `[capture]`: what a capture takes and how long it may run.
    #[serde(default)]
    pub capture: CaptureConfig,
    /// `[sandbox]`: the user's sandbox policy (see `docs/sandbox.md`). A workspace file may
    /// only tighten it.
    #[serde(default)]
    pub sandbox: SandboxConfig,
    /// `[retention]`: the defaults of garbage collection (`gc`).
    #[serde(default)]
    pub retention: RetentionConfig,
    /// `[checkpoint]`: limits of checkpoints.
    #[serde(default)]
    pub checkpoint: CheckpointConfig,
    /// `[restore]`: how a restore treats paths someone else changed since.
    #[serde(default)]
    pub restore: RestoreConfig,
    /// `[hooks]`: what the agent hook adapters (`rewind hook`) do.
    #[serde(default)]
    pub hooks: HooksConfig,
    /// `[shadow]`: the shadow git history.
    #[serde(default)]
    pub shadow: ShadowConfig,
    /// `[remote]`: `auto_push`, and the remotes as `[remote.NAME]` (`rewind remote add`); only
    /// in the user's `config.toml`.
    #[serde(default)]
    pub remote: RemoteSection,
}

/// The `[remote]` table: when to push by itself, and each `[remote.NAME]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct RemoteSection {
    /// `"checkpoint"`: after each checkpoint, push to every remote in the background (a
    /// detached `rewind push NAME`; the checkpoint never waits for it). `"off"` (the default):
    /// only `rewind push` pushes.
    #[serde(default)]
    pub auto_push: AutoPush,
    /// `[remote.NAME]` sections, by name.
    #[serde(flatten)]
    pub remotes: std::collections::BTreeMap<String, RemoteConfig>,
}

/// `[remote] auto_push`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AutoPush {
    /// Only `rewind push` pushes.
    #[default]
    Off,
    /// Every checkpoint starts a push in the background.
    Checkpoint,
}

/// One `[remote.NAME]` section: where a remote is, and (optionally) its credentials. The
/// standard AWS environment variables apply first; keys here replace them.
#[derive(Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RemoteConfig {
    /// `s3://bucket/prefix` or `file:///absolute/path`.
    pub url: String,
    /// The S3 endpoint (`http://127.0.0.1:3900`), for storage other than AWS's.
    pub endpoint: Option<String>,
    /// The S3 region.
    pub region: Option<String>,
    /// The access key id (else `AWS_ACCESS_KEY_ID`).
    pub access_key_id: Option<String>,
    /// The secret access key (else `AWS_SECRET_ACCESS_KEY`). Never shown, logged or recorded.
    pub secret_access_key: Option<Secret>,
    /// A session token (else `AWS_SESSION_TOKEN`). Never shown, logged or recorded.
    pub session_token: Option<Secret>,
    /// Allow plain HTTP to the endpoint (else `AWS_ALLOW_HTTP`; an `http://` endpoint implies it).
    pub allow_http: Option<bool>,
    /// The key file of an encrypted remote (relative to the state directory unless absolute):
    /// its objects are sealed with the key in it. Only the path is here, never the key.
    pub key_file: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for RemoteConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteConfig")
            .field("url", &self.url)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field(
                "access_key_id",
                &self.access_key_id.as_ref().map(|_| "(set)"),
            )
            .field("secret_access_key", &self.secret_access_key)
            .field("session_token", &self.session_token)
            .field("allow_http", &self.allow_http)
            .field("key_file", &self.key_file)
            .finish()
    }
}

/// A credential: its text is only ever handed to the client that signs requests; `Debug`
/// shows `(secret)`, and it is never serialised.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// The credential itself, for the client that signs requests, and nothing else.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("(secret)")
    }
}

/// The `[shadow]` section.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ShadowConfig {
    /// Checkpoints write their shadow commit themselves, incrementally, once the shadow
    /// repository exists (`rewind shadow-path` creates it). Default true; false: only
    /// `shadow-path` writes it.
    pub eager: Option<bool>,
}

impl ShadowConfig {
    /// Whether checkpoints write their shadow commit.
    pub fn eager(&self) -> bool {
        self.eager.unwrap_or(true)
    }
}

/// The `[hooks]` section.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct HooksConfig {
    /// What the read-before-edit guard does to an agent's file edit: refuse it (`enforce`,
    /// the default), let it through with a warning (`warn`), or nothing (`off`).
    pub guard: Option<HookGuard>,
}

/// See [`HooksConfig::guard`].
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum HookGuard {
    /// Refuse the edit, with the reason for the agent.
    #[default]
    Enforce,
    /// Let it through; say why it would have been refused.
    Warn,
    /// No check.
    Off,
}

/// The `[restore]` section.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RestoreConfig {
    /// Restores and undos merge by default (`--merge`): a path someone else changed since is
    /// merged when the changes touch different lines. Default false.
    pub merge: Option<bool>,
}

impl RestoreConfig {
    /// Whether restores merge unless told otherwise.
    pub fn merge(&self) -> bool {
        self.merge.unwrap_or(false)
    }
}

/// The `[checkpoint]` section.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CheckpointConfig {
    /// The largest payload (`checkpoint --payload-file`) a checkpoint stores. Default 64M.
    pub max_payload_size: Option<Size>,
}

impl CheckpointConfig {
    /// The payload cap in bytes, default 64 MiB.
    pub fn max_payload_size(&self) -> u64 {
        self.max_payload_size.map(|s| s.0).unwrap_or(64 << 20)
    }
}

/// What happens to paths the ignore rules match.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum IgnoredPolicy {
    /// Not captured and never touched by a restore (default).
    #[default]
    Skip,
    /// Captured and restored like any other path.
    Capture,
}

/// The `[capture]` section.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CaptureConfig {
    /// Files larger than this are recorded as uncovered. Default 2G.
    pub max_file_size: Option<Size>,
    /// A capture that runs longer than this stops hashing and records the rest as uncovered.
    pub time_budget: Option<Span>,
    /// Whether paths the ignore rules match are captured. Default skip.
    pub ignored: Option<IgnoredPolicy>,
    /// What happens to files over the size cap, which cannot be restored. Default uncovered.
    pub large_files: Option<LargeFiles>,
    /// Whether large files are cloned into the store where the file system can. Default auto.
    pub reflink: Option<Reflink>,
}

/// `capture.reflink`: whether a file of at least [`rewind_store::CLONE_FROM`] bytes is
/// captured by cloning it into the store (`FICLONE`: no bytes read or copied, no space used
/// until one side changes) rather than by packing it. As `cp --reflink`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Reflink {
    /// Clone where the file system can (btrfs, XFS with reflink, bcachefs; the state
    /// directory on the workspace's file system), pack elsewhere. A file over
    /// `max_file_size` is covered when it can be cloned.
    #[default]
    Auto,
    /// Always pack; files over `max_file_size` are uncovered.
    Never,
}

/// `capture.large_files`: what a file over `max_file_size` (recorded as uncovered: Rewind
/// cannot restore it) is in a sandboxed command.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LargeFiles {
    /// Writable like any file; recorded as uncovered (`status` lists it).
    #[default]
    Uncovered,
    /// Bind-mounted read-only inside the sandbox: a sandboxed command cannot change, remove
    /// or rename what Rewind could not put back.
    Protect,
}

impl CaptureConfig {
    /// What happens to files over the size cap, default [`LargeFiles::Uncovered`].
    pub fn large_files(&self) -> LargeFiles {
        self.large_files.unwrap_or_default()
    }
    /// The size cap in bytes, default 2 GiB.
    pub fn max_file_size(&self) -> u64 {
        self.max_file_size.map(|s| s.0).unwrap_or(2 << 30)
    }
    /// The time budget of a capture; `None` (the default): no limit.
    pub fn time_budget(&self) -> Option<Duration> {
        self.time_budget.map(|s| s.0)
    }
    /// What happens to ignored paths, default [`IgnoredPolicy::Skip`].
    pub fn ignored(&self) -> IgnoredPolicy {
        self.ignored.unwrap_or_default()
    }
    /// Whether large files are cloned where they can be, default [`Reflink::Auto`].
    pub fn reflink(&self) -> Reflink {
        self.reflink.unwrap_or_default()
    }
}

/// The `[retention]` section: what garbage collection may drop, when `gc`'s flags do not say.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RetentionConfig {
    /// A size budget for the workspace's state (`gc --max-bytes`).
    pub max_bytes: Option<Size>,
    /// An age past which checkpoints may be dropped (`gc --max-age`).
    pub max_age: Option<Span>,
    /// How many of each session's newest checkpoints are always kept (`gc --keep`).
    pub keep: Option<u64>,
}

/// A size as the configuration file writes it: `1048576`, `500K`, `500M`, `2G` (binary multiples).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size(pub u64);

/// A duration as the configuration file writes it: `30s`, `15m`, `12h`, `7d`, `2w`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span(pub Duration);

impl std::str::FromStr for Size {
    type Err = String;
    fn from_str(s: &str) -> Result<Size, String> {
        let bad = || format!("{s:?} is not a size; write 1048576, 500K, 500M or 2G");
        let t = s.trim();
        let (num, mult) = match t.char_indices().last() {
            Some((i, c)) if c.is_ascii_alphabetic() => {
                let m: u64 = match c.to_ascii_uppercase() {
                    'K' => 1 << 10,
                    'M' => 1 << 20,
                    'G' => 1 << 30,
                    'T' => 1 << 40,
                    _ => return Err(bad()),
                };
                (&t[..i], m)
            }
            _ => (t, 1),
        };
        let n: u64 = num.parse().map_err(|_| bad())?;
        n.checked_mul(mult).map(Size).ok_or_else(bad)
    }
}

impl std::str::FromStr for Span {
    type Err = String;
    fn from_str(s: &str) -> Result<Span, String> {
        let bad = || format!("{s:?} is not a duration; write 30s, 15m, 12h, 7d or 2w");
        let t = s.trim();
        let unit = t.chars().last().ok_or_else(bad)?;
        let secs: u64 = match unit {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86400,
            'w' => 7 * 86400,
            _ => return Err(bad()),
        };
        let n: u64 = t[..t.len() - 1].parse().map_err(|_| bad())?;
        Ok(Span(Duration::from_secs(
            n.checked_mul(secs).ok_or_else(bad)?,
        )))
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Size, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(Size(n)),
            Raw::S(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Span, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl Config {
    /// Loads the user config from `home` and the workspace override from `root` (either may be
    /// absent). Keys of the workspace file replace the same keys of the user file.
    pub fn load(home: &Path, root: Option<&Path>) -> Result<Config, Error> {
        Config::load_with(home, root, toml::Table::new())
    }

    /// [`Config::load`], with `user` keys (settings the user made for this workspace from a
    /// front, such as its sandbox mode) replacing those of the user file; the workspace file
    /// still applies on top of both, and may still only tighten the sandbox.
    pub fn load_with(home: &Path, root: Option<&Path>, user: toml::Table) -> Result<Config, Error> {
        let mut merged = toml::Table::new();
        let mut files = vec![home.join(USER_CONFIG)];
        if let Some(root) = root {
            files.push(root.join(WORKSPACE_CONFIG));
        }
        for (i, file) in files.iter().enumerate() {
            if i == 1 {
                merge(&mut merged, user.clone());
            }
            if let Some(mut table) = read_table(file)? {
                if i > 0 {
                    refuse_loosening(file, &table)?;
                    keep_stricter_mode(&merged, &mut table);
                }
                merge(&mut merged, table);
            }
        }
        if files.len() == 1 {
            merge(&mut merged, user);
        }
        let shown = files
            .iter()
            .filter(|f| f.exists())
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(" and ");
        toml::Value::Table(merged)
            .try_into()
            .map_err(|e: toml::de::Error| Error::Config {
                file: PathBuf::from(shown),
                message: e.to_string(),
            })
    }
}

/// A workspace file may tighten the sandbox, never loosen it: an agent can write files in the
/// workspace (through a guarded tool, or an unsandboxed command), and must not be able to grant
/// itself the network, more writable roots or an unwrapped shell.
fn refuse_loosening(file: &Path, table: &toml::Table) -> Result<(), Error> {
    if table.contains_key("remote") {
        // An agent can write this file: a remote here could send the history elsewhere.
        return Err(Error::Config {
            file: file.to_path_buf(),
            message: format!(
                "[remote] cannot be set in a workspace file (an agent could write it and send \
                 the history elsewhere); add remotes with `rewind remote add`, which writes \
                 {USER_CONFIG} in the Rewind state directory"
            ),
        });
    }
    let Some(toml::Value::Table(sb)) = table.get("sandbox") else {
        return Ok(());
    };
    for (key, value) in sb {
        let tightening = match key.as_str() {
            "deny_read" | "protect" => true,
            "mode" => {
                value.as_str() == Some("read-only") || value.as_str() == Some("workspace-write")
            }
            "network" => value.as_bool() == Some(false),
            _ => false,
        };
        if !tightening {
            return Err(Error::Config {
                file: file.to_path_buf(),
                message: format!(
                    "sandbox.{key} = {value} would loosen the sandbox, and a workspace file cannot do that \
                     (an agent could write it); set it in {USER_CONFIG} in the Rewind state directory"
                ),
            });
        }
    }
    Ok(())
}

/// A workspace file's `sandbox.mode` tightens the mode set before it, never replaces a
/// stricter one: `workspace-write` there does not loosen a user's `read-only`.
fn keep_stricter_mode(before: &toml::Table, file: &mut toml::Table) {
    fn strictness(v: Option<&toml::Value>) -> u8 {
        match v.and_then(|v| v.as_str()) {
            Some("read-only") => 2,
            Some("workspace-write") | None => 1,
            _ => 0,
        }
    }
    let set = |t: &toml::Table| t.get("sandbox").and_then(|s| s.get("mode")).cloned();
    let (Some(old), Some(new)) = (set(before), set(file)) else {
        return;
    };
    if strictness(Some(&old)) > strictness(Some(&new)) {
        if let Some(toml::Value::Table(sb)) = file.get_mut("sandbox") {
            sb.insert("mode".into(), old);
        }
    }
}

fn read_table(file: &Path) -> Result<Option<toml::Table>, Error> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(Error::Io {
                op: "reading",
                path: file.to_path_buf(),
                source: e,
            })
        }
    };
    text.parse::<toml::Table>()
        .map(Some)
        .map_err(|e| Error::Config {
            file: file.to_path_buf(),
            message: e.to_string(),
        })
}

fn merge(into: &mut toml::Table, from: toml::Table) {
    for (k, v) in from {
        match (into.get_mut(&k), v) {
            (Some(toml::Value::Table(a)), toml::Value::Table(b)) => merge(a, b),
            (_, v) => {
                into.insert(k, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_spans() {
        assert_eq!("500K".parse::<Size>().unwrap().0, 500 << 10);
        assert_eq!("2G".parse::<Size>().unwrap().0, 2 << 30);
        assert_eq!("1048576".parse::<Size>().unwrap().0, 1 << 20);
        assert!("5X".parse::<Size>().is_err());
        assert_eq!("2w".parse::<Span>().unwrap().0.as_secs(), 14 * 86400);
        assert!("12".parse::<Span>().is_err());
    }

    #[test]
    fn workspace_overrides_user_and_unknown_keys_fail() {
        let home = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join(USER_CONFIG),
            "[capture]\nmax_file_size = \"1M\"\nignored = \"capture\"\n",
        )
        .unwrap();
        std::fs::write(
            root.path().join(WORKSPACE_CONFIG),
            "[capture]\nmax_file_size = 10\n",
        )
        .unwrap();
        let c = Config::load(home.path(), Some(root.path())).unwrap();
        assert_eq!(c.capture.max_file_size(), 10);
        assert_eq!(c.capture.ignored(), IgnoredPolicy::Capture);
        std::fs::write(
            root.path().join(WORKSPACE_CONFIG),
            "[capture]\nmax_filesize = 10\n",
        )
        .unwrap();
        let err = Config::load(home.path(), Some(root.path()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("max_filesize"), "{err}");
        assert!(err.contains(WORKSPACE_CONFIG), "{err}");
    }

    #[test]
    fn a_workspace_file_never_replaces_a_stricter_mode_and_a_front_setting_sits_between() {
        let home = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let mode = |user: &str| {
            let mut t = toml::Table::new();
            if !user.is_empty() {
                let mut sb = toml::Table::new();
                sb.insert("mode".into(), user.into());
                t.insert("sandbox".into(), sb.into());
            }
            Config::load_with(home.path(), Some(root.path()), t)
                .unwrap()
                .sandbox
                .mode
                .map(|m| m.to_string())
        };
        std::fs::write(
            home.path().join(USER_CONFIG),
            "[sandbox]\nmode = \"read-only\"\n",
        )
        .unwrap();
        // The front's setting replaces the user file's key...
        assert_eq!(
            mode("danger-full-access").as_deref(),
            Some("danger-full-access")
        );
        assert_eq!(mode("").as_deref(), Some("read-only"));
        // ...and the workspace file tightens whatever is set before it, never loosens it.
        let ws = root.path().join(WORKSPACE_CONFIG);
        std::fs::write(&ws, "[sandbox]\nmode = \"workspace-write\"\n").unwrap();
        assert_eq!(mode("").as_deref(), Some("read-only"));
        assert_eq!(
            mode("danger-full-access").as_deref(),
            Some("workspace-write")
        );
        std::fs::write(&ws, "[sandbox]\nmode = \"read-only\"\n").unwrap();
        assert_eq!(mode("danger-full-access").as_deref(), Some("read-only"));
        // Without a workspace, the front's setting still applies.
        let no_root = Config::load_with(home.path(), None, {
            let mut t = toml::Table::new();
            t.insert(
                "sandbox".into(),
                toml::toml! { mode = "workspace-write" }.into(),
            );
            t
        })
        .unwrap();
        assert_eq!(
            no_root.sandbox.mode.map(|m| m.to_string()).as_deref(),
            Some("workspace-write")
        );
    }

    #[test]
    fn a_workspace_file_cannot_loosen_the_sandbox() {
        let home = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join(WORKSPACE_CONFIG);
        for loosening in [
            "network = true",
            "mode = \"danger-full-access\"",
            "writable_roots = [\"/tmp\"]",
        ] {
            std::fs::write(&ws, format!("[sandbox]\n{loosening}\n")).unwrap();
            let err = Config::load(home.path(), Some(root.path()))
                .unwrap_err()
                .to_string();
            assert!(err.contains("loosen"), "{loosening}: {err}");
        }
        std::fs::write(
            &ws,
            "[sandbox]\nmode = \"read-only\"\ndeny_read = [\"secrets\"]\n",
        )
        .unwrap();
        assert!(Config::load(home.path(), Some(root.path())).is_ok());
        // The user's own file may loosen it.
        std::fs::remove_file(&ws).unwrap();
        std::fs::write(home.path().join(USER_CONFIG), "[sandbox]\nnetwork = true\n").unwrap();
        assert_eq!(
            Config::load(home.path(), Some(root.path()))
                .unwrap()
                .sandbox
                .network,
            Some(true)
        );
    }
}
