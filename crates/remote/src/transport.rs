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
//! - An encrypted remote (its location has a key file) seals every object but `config` on the
//!   way up and opens it on the way down (`seal`): above this module every object is its
//!   plaintext and every size a plaintext size (a stored size is mapped back exactly; see
//!   `seal::plain_len`), so the layers above are the same for both kinds of remote. An object
//!   that does not open is [`Error::Corrupt`], naming it; nothing of it is returned.

use std::sync::Arc;

use futures::StreamExt;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use crate::error::{Error, Result};
use crate::location::Location;
use crate::seal::{self, Keys};

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
    /// Its size in bytes (the plaintext's, for a sealed object).
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
    /// The keys of an encrypted remote (from its key file).
    keys: Option<Keys>,
}

impl Remote {
    /// Connects to `location` (nothing is sent yet); a `file://` directory is created when
    /// `create` (a push), else must exist. A location with a key file reads it first.
    pub fn open(location: Location, create: bool) -> Result<Remote> {
        let keys = match &location.key_file {
            Some(path) => Some(crate::key::load(path)?),
            None => None,
        };
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
            keys,
        })
    }

    /// The keys it is sealed with here, when its location has a key file.
    pub(crate) fn keys(&self) -> Option<&Keys> {
        self.keys.as_ref()
    }

    /// The keys `name` is sealed with: every object of an encrypted remote but `config`.
    fn sealing(&self, name: &str) -> Option<&Keys> {
        self.keys.as_ref().filter(|_| name != crate::layout::CONFIG)
    }

    /// The size of `name` above this module, for `stored` bytes in the remote: the plaintext's
    /// for a sealed object. A size no sealed object has is returned as stored (it matches no
    /// size a caller expects, and the object does not open).
    fn plain_size(&self, name: &str, stored: u64) -> u64 {
        match self.sealing(name) {
            Some(_) => seal::plain_len(stored).unwrap_or(stored),
            None => stored,
        }
    }

    /// The name of content `bytes` in this remote (op-log segments): its BLAKE3 in hex, keyed
    /// with the remote's naming key when it is encrypted (so a name reveals nothing of the
    /// content, and equal content is equal in this remote only).
    pub fn content_name(&self, bytes: &[u8]) -> String {
        match &self.keys {
            Some(k) => k.content_name(bytes),
            None => blake3::hash(bytes).to_hex().to_string(),
        }
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

    /// The bytes of `name` (opened, for a sealed object), or `None` if it does not exist.
    pub fn get(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let path = self.path(name);
        let stored = self.rt.block_on(async {
            match self.store.get(&path).await {
                Ok(r) => match r.bytes().await {
                    Ok(b) => Ok(Some(b.to_vec())),
                    Err(e) => Err(self.transport("reading", name, e)),
                },
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(self.transport("reading", name, e)),
            }
        })?;
        match (stored, self.sealing(name)) {
            (Some(bytes), Some(keys)) => {
                keys.open(name, &bytes)
                    .map(Some)
                    .map_err(|e| Error::Corrupt {
                        remote: self.location.url.clone(),
                        object: name.to_string(),
                        reason: e.0,
                    })
            }
            (stored, _) => Ok(stored),
        }
    }

    /// The size of `name` (its plaintext's, for a sealed object), or `None` if it does not
    /// exist.
    pub fn head(&self, name: &str) -> Result<Option<u64>> {
        let path = self.path(name);
        self.rt.block_on(async {
            match self.store.head(&path).await {
                Ok(m) => Ok(Some(self.plain_size(name, m.size))),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(self.transport("inspecting", name, e)),
            }
        })
    }

    /// Creates `name` with `bytes` (sealed, in an encrypted remote) unless it exists (see the
    /// module's invariants); an existing object's size is its plaintext's.
    pub fn create(&self, name: &str, bytes: Vec<u8>) -> Result<Created> {
        let bytes = match self.sealing(name) {
            Some(keys) => keys.seal(name, &bytes).map_err(Error::State)?,
            None => bytes,
        };
        match self.create_stored(name, bytes)? {
            Created::Existed(n) => Ok(Created::Existed(self.plain_size(name, n))),
            Created::Written => Ok(Created::Written),
        }
    }

    /// Creates `name` with exactly `bytes`, unless it exists.
    fn create_stored(&self, name: &str, bytes: Vec<u8>) -> Result<Created> {
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

    /// The objects under `dir` (a name ending in `/`), as (name relative to the prefix, size:
    /// the plaintext's, for a sealed object), by name.
    pub fn list(&self, dir: &str) -> Result<Vec<(String, u64)>> {
        Ok(self
            .list_meta(dir)?
            .into_iter()
            .map(|o| (o.name, o.size))
            .collect())
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
                let name = full.strip_prefix(&strip).unwrap_or(&full).to_string();
                let size = self.plain_size(&name, m.size);
                out.push(ObjectInfo {
                    name,
                    size,
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
