//! `rewind remote add|list|remove`: `[remote.NAME]` sections of the user's `config.toml` in
//! the state directory (`$REWIND_HOME`).
//!
//! Why there and not in the workspace's `.rewind.toml`: a remote says where the history (the
//! source code, and whatever secrets were in the tree) goes, and an agent can write files in
//! the workspace; the state directory is the user's. So a remote is the user's for every
//! workspace: each pushes its own history into it (`histories/<workspace id>/`).
//!
//! Invariants:
//! - The file is edited as text, so the user's comments and layout stay: `add` appends a
//!   section, `remove` cuts one out; the result is parsed and compared with what was meant
//!   (the same configuration with that one remote added or gone) before it replaces the file
//!   (written aside, fsynced, renamed), else nothing changes and the error says to edit it by
//!   hand.
//! - Credentials are never written by these commands; `list` says where they come from, never
//!   what they are.
//! - An encrypted remote's section names its key file (`key_file`), never the key. `add
//!   --encrypt` generates the key into `keys/NAME.key` of the state directory before the
//!   section is written (and removes it again if the section cannot be); `remove` leaves the key
//!   file alone (it may be the only copy of the key of a remote that still holds data).

use std::path::{Path, PathBuf};

use rewind_core::config::{RemoteConfig, USER_CONFIG};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::location::Location;

/// One remote as `remote list` shows it.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct RemoteInfo {
    /// Its name.
    pub name: String,
    /// Its URL.
    pub url: String,
    /// The S3 endpoint, if set.
    pub endpoint: Option<String>,
    /// The S3 region, if set.
    pub region: Option<String>,
    /// Where it is defined: `config` (`config.toml`), or `clone` (the workspace was cloned
    /// from it).
    pub source: String,
    /// Where its credentials come from: `config`, `environment`, `none`, or `-` (a directory).
    pub credentials: String,
    /// For an encrypted remote: the file its key is read from (the path; never the key).
    pub key_file: Option<String>,
}

/// What [`add`] did.
#[derive(Clone, Debug)]
pub struct Added {
    /// The configuration file written.
    pub config: PathBuf,
    /// The key file generated for the remote (`--encrypt`), if one was.
    pub key_generated: Option<PathBuf>,
}

fn config_path(home: &Path) -> PathBuf {
    home.join(USER_CONFIG)
}

fn read_text(path: &Path) -> Result<String> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(rewind_core::Error::Io {
            op: "reading",
            path: path.to_path_buf(),
            source: e,
        }
        .into()),
    }
}

fn parse(path: &Path, text: &str) -> Result<toml::Table> {
    text.parse::<toml::Table>().map_err(|e| {
        rewind_core::Error::Config {
            file: path.to_path_buf(),
            message: e.to_string(),
        }
        .into()
    })
}

/// The remotes of the user's configuration, their key files' paths made absolute (a relative
/// one is relative to the state directory `home`).
pub fn configured(home: &Path) -> Result<std::collections::BTreeMap<String, RemoteConfig>> {
    let mut remotes = rewind_core::Config::load(home, None)?.remote.remotes;
    for c in remotes.values_mut() {
        if let Some(k) = &mut c.key_file {
            if k.is_relative() {
                *k = home.join(&*k);
            }
        }
    }
    Ok(remotes)
}

/// Checks a remote name: letters, digits, `-`, `_`, `.`, not starting with `.` or `-`.
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name != "auto_push"
        && name.len() <= 64
        && !name.starts_with(['.', '-'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if ok {
        Ok(())
    } else {
        Err(Error::Usage(format!(
            "{name:?} is not a remote name; use letters, digits, -, _ and . (like origin)"
        )))
    }
}

fn quote(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn write_atomic(path: &Path, text: &str) -> Result<()> {
    let io = |e: std::io::Error| -> Error {
        rewind_core::Error::Io {
            op: "writing",
            path: path.to_path_buf(),
            source: e,
        }
        .into()
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let tmp = path.with_extension(format!("toml.tmp.{}", std::process::id()));
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(text.as_bytes()).map_err(io)?;
        f.sync_all().map_err(io)?;
    }
    std::fs::rename(&tmp, path).map_err(io)?;
    if let Some(dir) = path.parent() {
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(())
}

/// Adds `[remote.NAME]` to the user's `config.toml`. Refused if the name is taken. An
/// encrypted remote: `location`'s key file (absolute; checked here), or a new key generated into
/// `keys/NAME.key` of `home` when `generate_key` (and `location` has none).
pub fn add(home: &Path, location: &Location, generate_key: bool) -> Result<Added> {
    check_name(&location.name)?;
    let path = config_path(home);
    let text = read_text(&path)?;
    let before = parse(&path, &text)?;
    // The whole configuration must load before and after (unknown keys are errors).
    let remotes = configured(home)?;
    if let Some(r) = remotes.get(&location.name) {
        return Err(Error::Usage(format!(
            "a remote named {} exists already ({}); remove it first (rewind remote remove {}) \
             or pick another name",
            location.name, r.url, location.name
        )));
    }
    let mut section = format!(
        "\n[remote.{}]\nurl = {}\n",
        location.name,
        quote(&location.url)
    );
    if let Some(e) = &location.endpoint {
        section.push_str(&format!("endpoint = {}\n", quote(e)));
    }
    if let Some(r) = &location.region {
        section.push_str(&format!("region = {}\n", quote(r)));
    }
    // What `key_file` says: a key file given (checked: it must hold a key, the user's alone), or
    // the one to generate, relative to the state directory.
    let key_file: Option<String> =
        match (&location.key_file, generate_key) {
            (Some(_), true) => {
                return Err(Error::Usage(
                    "a key is either generated (--encrypt) or given (--key-file), not both".into(),
                ))
            }
            (Some(path), false) => {
                crate::key::load(path)?;
                Some(path.to_str().map(str::to_string).ok_or_else(|| {
                    Error::Usage(format!("{} is not a UTF-8 path", path.display()))
                })?)
            }
            (None, true) => {
                let rel = crate::key::default_key_file(&location.name);
                if home.join(&rel).symlink_metadata().is_ok() {
                    return Err(Error::Usage(format!(
                        "{} exists already (the key of a remote removed earlier?); it is never \
                     overwritten: use it with --key-file {}, or move it away first",
                        home.join(&rel).display(),
                        home.join(&rel).display()
                    )));
                }
                Some(rel.to_string_lossy().into_owned())
            }
            (None, false) => None,
        };
    if let Some(k) = &key_file {
        section.push_str(&format!("key_file = {}\n", quote(k)));
    }
    let mut new_text = text.clone();
    if !new_text.is_empty() && !new_text.ends_with('\n') {
        new_text.push('\n');
    }
    new_text.push_str(&section);
    let after = parse(&path, &new_text)?;
    let mut expected = before;
    let remote_table = expected
        .entry("remote")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let mut entry = toml::Table::new();
    entry.insert("url".into(), location.url.clone().into());
    if let Some(e) = &location.endpoint {
        entry.insert("endpoint".into(), e.clone().into());
    }
    if let Some(r) = &location.region {
        entry.insert("region".into(), r.clone().into());
    }
    if let Some(k) = &key_file {
        entry.insert("key_file".into(), k.clone().into());
    }
    match remote_table {
        toml::Value::Table(t) => {
            t.insert(location.name.clone(), toml::Value::Table(entry));
        }
        _ => return Err(by_hand(&path)),
    }
    if after != expected {
        return Err(by_hand(&path));
    }
    let generated = match (generate_key, &key_file) {
        (true, Some(rel)) => {
            let p = home.join(rel);
            crate::key::generate(&p)?;
            Some(p)
        }
        _ => None,
    };
    if let Err(e) = write_atomic(&path, &new_text) {
        // The key was never used: nothing can be sealed with it yet.
        if let Some(p) = &generated {
            let _ = std::fs::remove_file(p);
        }
        return Err(e);
    }
    Ok(Added {
        config: path,
        key_generated: generated,
    })
}

fn by_hand(path: &Path) -> Error {
    Error::Usage(format!(
        "{} is laid out in a way this command does not edit safely (a [remote] table written \
         inline?); nothing was changed: edit it by hand",
        path.display()
    ))
}

/// Removes `[remote.NAME]` from the user's `config.toml`; returns its URL and its key file
/// (which stays where it is).
pub fn remove(home: &Path, name: &str) -> Result<(String, Option<PathBuf>)> {
    check_name(name)?;
    let path = config_path(home);
    let text = read_text(&path)?;
    let before = parse(&path, &text)?;
    let Some(url) = before
        .get("remote")
        .and_then(|r| r.get(name))
        .and_then(|r| r.get("url"))
        .and_then(|u| u.as_str())
        .map(str::to_string)
    else {
        return Err(Error::Unknown(format!(
            "no remote named {name} in {}; `rewind remote list` shows them",
            path.display()
        )));
    };
    // Cut from its header to the next header.
    let header = |l: &str| {
        let t = l.trim();
        t.starts_with('[')
    };
    let is_ours = |l: &str| {
        let t: String = l.chars().filter(|c| !c.is_whitespace()).collect();
        t == format!("[remote.{name}]") || t == format!("[remote.\"{name}\"]")
    };
    let mut out = String::new();
    let mut skipping = false;
    for line in text.split_inclusive('\n') {
        if header(line) {
            skipping = is_ours(line);
            if skipping && out.ends_with("\n\n") {
                // The blank line `add` put before the section.
                out.pop();
            }
        }
        if !skipping {
            out.push_str(line);
        }
    }
    let after = parse(&path, &out)?;
    let mut expected = before;
    if let Some(toml::Value::Table(t)) = expected.get_mut("remote") {
        t.remove(name);
    }
    // An emptied `[remote]` table and none at all are the same configuration.
    let norm = |mut t: toml::Table| {
        if t.get("remote")
            .is_some_and(|r| r.as_table().is_some_and(|r| r.is_empty()))
        {
            t.remove("remote");
        }
        t
    };
    if norm(after) != norm(expected) {
        return Err(by_hand(&path));
    }
    let key_file = configured(home)?.remove(name).and_then(|c| c.key_file);
    write_atomic(&path, &out)?;
    Ok((url, key_file))
}
