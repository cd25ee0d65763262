//! Rewind's remote store: a workspace's history in object storage (S3 and compatible servers,
//! or a directory), so it outlives the machine. `push` uploads what the remote lacks, `clone`
//! materialises a checkpoint's tree with its history on another machine, `pull` brings a
//! clone up to date. The layout and the upload order are in `docs/format.md`, Remote store.
//!
//! This crate holds the transfer and the remote's layout; everything it writes locally goes
//! through the engine (`rewind-core`: the op log's export and import, the clone's
//! materialisation, which is the worktree's) and the store (`rewind-store`: packs verified
//! before they are indexed). It is the one crate that depends on `object_store` (and its HTTP
//! client and TLS): nothing below it pays for them. `object_store` is async; a small runtime
//! of this crate's own makes every call here blocking.
//!
//! A remote may be encrypted (`docs/format.md`, Remote store, Encryption): every object but
//! `config` sealed client-side (`seal`, XChaCha20-Poly1305 in the STREAM construction) with a
//! key kept in a key file outside the remote (`key`); the transport seals and opens, so the
//! rest of the crate is the same for both kinds.
//!
//! Invariants every module keeps: credentials come from the environment or the user's
//! `config.toml` and go nowhere but the client (never into messages, tables or the op log);
//! so does an encrypted remote's key, of which only the key file's path is ever passed on;
//! nothing in a remote is ever overwritten; a missing or damaged remote object is an error
//! naming it, found before anything is written.

mod config_file;
mod error;
mod fetch;
mod gc;
mod key;
mod layout;
mod location;
mod push;
mod seal;
mod transport;

pub use config_file::{add, check_name, configured, remove, Added, RemoteInfo};
pub use error::{Error, Result};
pub use fetch::{clone, pull, CloneReport, PullReport};
pub use gc::{
    check_grace, gc, window as gc_window, RemoteGcOptions, RemoteGcReport, DEFAULT_GRACE,
};
pub use layout::{CheckpointRef, Manifest, PackRef};
pub use location::{check_endpoint, parse_url, Location, Url};
pub use push::{push, push_with, PushOptions, PushReport};
pub use transport::Remote;

use std::path::Path;

/// Every remote a workspace knows: the user's `[remote.NAME]` sections, then the origins it
/// was cloned from (when `ws` is given and they are not configured under the same name).
pub fn list(home: &Path, ws: Option<&rewind_core::Workspace>) -> Result<Vec<RemoteInfo>> {
    let mut out = Vec::new();
    for (name, c) in configured(home)? {
        let l = Location::from_config(&name, &c)?;
        out.push(RemoteInfo {
            name,
            url: c.url.clone(),
            endpoint: c.endpoint.clone(),
            region: c.region.clone(),
            source: "config".into(),
            credentials: l.credentials_source().into(),
            key_file: c.key_file.as_ref().map(|p| p.display().to_string()),
        });
    }
    if let Some(ws) = ws {
        for link in ws.remote_links()? {
            if out.iter().any(|r| r.name == link.name) {
                continue;
            }
            let l = Location::new(
                &link.name,
                &link.url,
                link.endpoint.as_deref(),
                link.region.as_deref(),
            )?;
            out.push(RemoteInfo {
                name: link.name.clone(),
                url: link.url.clone(),
                endpoint: link.endpoint.clone(),
                region: link.region.clone(),
                source: "clone".into(),
                credentials: l.credentials_source().into(),
                key_file: link.key_file.clone(),
            });
        }
    }
    Ok(out)
}

/// The remote `name` (or the only one, when `None`) as `ws` knows it: a configured one, else
/// the origin it was cloned from.
pub fn resolve(home: &Path, ws: &rewind_core::Workspace, name: Option<&str>) -> Result<Location> {
    let configured = configured(home)?;
    let links = ws.remote_links()?;
    let pick = match name {
        Some(n) => n.to_string(),
        None => {
            let mut names: Vec<String> = configured.keys().cloned().collect();
            for l in &links {
                if !names.contains(&l.name) {
                    names.push(l.name.clone());
                }
            }
            match names.as_slice() {
                [one] => one.clone(),
                [] => {
                    return Err(Error::Unknown(
                        "no remote is configured; add one: rewind remote add NAME URL".into(),
                    ))
                }
                many => {
                    return Err(Error::Usage(format!(
                        "there are several remotes ({}); name one",
                        many.join(", ")
                    )))
                }
            }
        }
    };
    if let Some(c) = configured.get(&pick) {
        return Location::from_config(&pick, c);
    }
    if let Some(l) = links.iter().find(|l| l.name == pick) {
        return Ok(
            Location::new(&l.name, &l.url, l.endpoint.as_deref(), l.region.as_deref())?
                .with_key_file(l.key_file.as_ref().map(std::path::PathBuf::from)),
        );
    }
    Err(Error::Unknown(format!(
        "no remote named {pick}; `rewind remote list` shows them, `rewind remote add` adds one"
    )))
}

/// A location for a URL given directly (`clone URL`): the configured remote with that URL if
/// there is one (its credentials apply), else one named `origin`.
pub fn location_for_url(
    home: &Path,
    url: &str,
    endpoint: Option<&str>,
    region: Option<&str>,
) -> Result<Location> {
    for (name, c) in configured(home)? {
        if c.url == url && (endpoint.is_none() || endpoint == c.endpoint.as_deref()) {
            return Location::from_config(&name, &c);
        }
    }
    Location::new("origin", url, endpoint, region)
}
