//! A blocking client over `object_store`'s async one: a small single-threaded tokio runtime of
//! this crate's own, so nothing above knows there is a runtime.
//!
//! Invariants:
//! - Every write is a create: `PutMode::Create` where the store supports conditional writes,
//!   else a `HEAD` first. Names are unique by construction (random pack names, content-named
//!   indexes and segments, time-and-random-named manifests), so an existing object is the same
//!   one and is never overwritten; [`Remote::create`] says which happened.
//! - Names are relative to the remote's prefix and made only by `layout`; nothing here joins
//!   user input into a key.

use std::sync::Arc;

use futures::StreamExt;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use crate::error::{Error, Result};
use crate::location::Location;

/// What [`Remote::create`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Created {
    /// The object was written.
    Written,
    /// It was there already (same name: the same content, by construction); its size.
    Existed(u64),
}

/// An object as a listing shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    /// Its name, relative to the remote's prefix.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// When it was last written (ns since the Unix epoch, the store's clock).
    pub modified_ns: i64,
}

/// A connected remote.
pub struct Remote {
    /// Where it is.
    pub location: Location,
    store: Arc<dyn ObjectStore>,
    prefix: String,
    rt: tokio::runtime::Runtime,
}

impl Remote {
    /// Connects to `location` (nothing is sent yet); a `file://` directory is created when
    /// `create` (a push), else must exist.
    pub fn open(location: Location, create: bool) -> Result<Remote> {
        let (store, prefix) = location.client(create)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::Transport {
                op: "starting the client for",
                object: String::new(),
                remote: location.url.clone(),
                message: e.to_string(),
            })?;
        Ok(Remote {
            location,
            store,
            prefix,
            rt,
        })
    }

    /// The URL, for messages.
    pub fn url(&self) -> &str {
        &self.location.url
    }

    fn path(&self, name: &str) -> ObjPath {
        if self.prefix.is_empty() {
            ObjPath::from(name)
        } else {
            ObjPath::from(format!("{}/{name}", self.prefix))
        }
    }

    fn transport(&self, op: &'static str, name: &str, e: object_store::Error) -> Error {
        Error::Transport {
            op,
            object: name.to_string(),
            remote: self.location.url.clone(),
            message: e.to_string(),
        }
    }

    /// The bytes of `name`, or `None` if it does not exist.
    pub fn get(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let path = self.path(name);
        self.rt.block_on(async {
            match self.store.get(&path).await {
                Ok(r) => match r.bytes().await {
                    Ok(b) => Ok(Some(b.to_vec())),
                    Err(e) => Err(self.transport("reading", name, e)),
                },
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(self.transport("reading", name, e)),
            }
        })
    }

    /// The size of `name`, or `None` if it does not exist.
    pub fn head(&self, name: &str) -> Result<Option<u64>> {
        let path = self.path(name);
        self.rt.block_on(async {
            match self.store.head(&path).await {
                Ok(m) => Ok(Some(m.size)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(self.transport("inspecting", name, e)),
            }
        })
    }

    /// Creates `name` with `bytes` unless it exists (see the module's invariants).
    pub fn create(&self, name: &str, bytes: Vec<u8>) -> Result<Created> {
        let path = self.path(name);
        self.rt.block_on(async {
            let opts = PutOptions::from(PutMode::Create);
            let payload = PutPayload::from(bytes.clone());
            match self.store.put_opts(&path, payload, opts).await {
                Ok(_) => Ok(Created::Written),
                Err(object_store::Error::AlreadyExists { .. }) => {
                    let size = self
                        .store
                        .head(&path)
                        .await
                        .map_err(|e| self.transport("inspecting", name, e))?
                        .size;
                    Ok(Created::Existed(size))
                }
                Err(object_store::Error::NotImplemented { .. }) => {
                    // A store without conditional writes: look first. Two writers racing to
                    // the same name write the same bytes.
                    match self.store.head(&path).await {
                        Ok(m) => Ok(Created::Existed(m.size)),
                        Err(object_store::Error::NotFound { .. }) => {
                            self.store
                                .put(&path, PutPayload::from(bytes))
                                .await
                                .map_err(|e| self.transport("uploading", name, e))?;
                            Ok(Created::Written)
                        }
                        Err(e) => Err(self.transport("inspecting", name, e)),
                    }
                }
                Err(e) => Err(self.transport("uploading", name, e)),
            }
        })
    }

    /// The objects under `dir` (a name ending in `/`), as (name relative to the prefix, size).
    pub fn list(&self, dir: &str) -> Result<Vec<(String, u64)>> {
        let path = self.path(dir.trim_end_matches('/'));
        let strip = if self.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", self.prefix)
        };
        self.rt.block_on(async {
            let mut out = Vec::new();
            let mut s = self.store.list(Some(&path));
            while let Some(m) = s.next().await {
                let m = m.map_err(|e| self.transport("listing", dir, e))?;
                let full = m.location.to_string();
                let rel = full.strip_prefix(&strip).unwrap_or(&full).to_string();
                out.push((rel, m.size));
            }
            out.sort();
            Ok(out)
        })
    }

    /// The objects under `dir` (a name ending in `/`) with their sizes and when they were last
    /// written (ns since the Unix epoch, by the store's clock), by name.
    pub fn list_meta(&self, dir: &str) -> Result<Vec<ObjectInfo>> {
        let path = self.path(dir.trim_end_matches('/'));
        let strip = if self.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", self.prefix)
        };
        self.rt.block_on(async {
            let mut out = Vec::new();
            let mut s = self.store.list(Some(&path));
            while let Some(m) = s.next().await {
                let m = m.map_err(|e| self.transport("listing", dir, e))?;
                let full = m.location.to_string();
                out.push(ObjectInfo {
                    name: full.strip_prefix(&strip).unwrap_or(&full).to_string(),
                    size: m.size,
                    modified_ns: m.last_modified.timestamp_nanos_opt().unwrap_or(i64::MAX),
                });
            }
            out.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(out)
        })
    }

    /// Deletes `name`; deleting what is not there is not an error (another gc may have).
    pub fn delete(&self, name: &str) -> Result<()> {
        let path = self.path(name);
        self.rt.block_on(async {
            match self.store.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(self.transport("deleting", name, e)),
            }
        })
    }

    /// The immediate "subdirectories" of `dir` (their last components).
    pub fn list_dirs(&self, dir: &str) -> Result<Vec<String>> {
        let path = self.path(dir.trim_end_matches('/'));
        self.rt.block_on(async {
            let r = self
                .store
                .list_with_delimiter(Some(&path))
                .await
                .map_err(|e| self.transport("listing", dir, e))?;
            let mut out: Vec<String> = r
                .common_prefixes
                .iter()
                .filter_map(|p| p.filename().map(str::to_string))
                .collect();
            out.sort();
            Ok(out)
        })
    }
}
