//! The remote's layout (`docs/format.md`, Remote store): every object's name, the `config`
//! object, manifests and op-log segments' encoding.
//!
//! ```text
//! <prefix>/config                                    format and version of the remote
//! <prefix>/packs/<xx>/<name>.pack                    a sealed pack, byte for byte
//! <prefix>/index/<xx>/<name>.idx                     its tail: trailer and footer
//! <prefix>/oplog/<xx>/<blake3>.seg                   an op-log segment (zstd JSON)
//! <prefix>/histories/<id>/manifests/<ns>-<rand>.json one per push
//! ```
//!
//! In an encrypted remote every object but `config` is stored sealed (the transport seals and
//! opens them; `seal`), and a segment's name is its keyed BLAKE3. `config` says whether the
//! remote is encrypted and carries the key check: [`read_config`] refuses, before anything
//! else is read or written, a remote whose encryption the connection here does not match (no
//! key for an encrypted remote, another key, a key for a plain one).

use rewind_core::{Collected, OplogSegment, SegmentRecord};
use rewind_store::ObjectId;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::seal;
use crate::transport::Remote;

/// The name of the `config` object (the one object never sealed).
pub const CONFIG: &str = "config";
/// The `config` object's format name.
pub const REMOTE_FORMAT: &str = "rewind-remote";
/// The remote format version this binary writes and reads.
pub const REMOTE_VERSION: u32 = 1;
/// A manifest's format name.
pub const MANIFEST_FORMAT: &str = "rewind-manifest";
/// The manifest version this binary writes (it reads 1 and 2 too: a version 1 manifest lists
/// nothing collected). Version 3: the history's packs may hold fan-out trees (the store's
/// `tree::fanout`), which a binary that writes version 2 cannot read, so it must refuse the
/// history ("upgrade rewind") rather than find its trees damaged.
pub const MANIFEST_VERSION: u32 = 3;
/// zstd level of segments (small JSON; the level barely matters).
const SEGMENT_ZSTD_LEVEL: i32 = 3;

/// The `config` object at the prefix's root, written once by the first push.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteConfigObject {
    /// [`REMOTE_FORMAT`].
    pub format: String,
    /// [`REMOTE_VERSION`].
    pub version: u32,
    /// Client-side encryption of every other object: `null` (none), or
    /// `{"scheme": "xchacha20poly1305-stream-1m", "key_check": …}` ([`Encryption`]). A reader
    /// that does not know the scheme refuses the remote.
    pub encryption: Option<serde_json::Value>,
}

/// The `encryption` of an encrypted remote's `config` object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Encryption {
    /// [`seal::SCHEME`].
    pub scheme: String,
    /// A value derived from the master key (`seal::Keys::key_check`), never the key: a key
    /// that does not give it is not this remote's.
    pub key_check: String,
}

/// A pack a history needs, as its manifest lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PackRef {
    /// Its name (32 hex digits).
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
}

/// A checkpoint named in a manifest, so a clone can choose a history without reading its op
/// log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckpointRef {
    /// Its id.
    pub id: String,
    /// When it was made (ns since the Unix epoch).
    pub created_ns: i64,
}

/// One push's manifest: everything needed to rebuild the history up to `pos` from the remote
/// alone. Cumulative: the newest manifest of a history is enough.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`MANIFEST_FORMAT`].
    pub format: String,
    /// [`MANIFEST_VERSION`].
    pub version: u32,
    /// The history: the id of the workspace that pushed it.
    pub history: String,
    /// The history it started from, for a clone that pushes (its first segments are that
    /// history's).
    pub source: Option<String>,
    /// When it was written (ns since the Unix epoch): remote gc's grace period counts from it.
    pub created_ns: i64,
    /// The last op-log position its segments cover.
    pub pos: i64,
    /// The op-log segments, in order.
    pub segments: Vec<SegmentRecord>,
    /// Every pack the history's objects are in.
    pub packs: Vec<PackRef>,
    /// The newest checkpoint its segments hold.
    pub newest_checkpoint: Option<CheckpointRef>,
    /// The checkpoints and epochs the workspace's garbage collection dropped (version 2): a
    /// clone or pull marks them collected, and their content may be gone from the remote.
    #[serde(default)]
    pub collected: Collected,
    /// Large files cloned into the history's state (`capture.reflink`) and the content each
    /// was packed as: `[clone id, content id]`, 64 hex digits each, sorted. A clone file stays
    /// on the machine that made it; a reader of the remote finds its bytes here. Absent when
    /// there are none (older readers then read the manifest as before).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clones: Vec<[String; 2]>,
}

impl Manifest {
    /// The `clones` pairs as ids; a malformed one is an error naming it.
    pub fn clone_pairs(&self) -> std::result::Result<Vec<(ObjectId, ObjectId)>, String> {
        self.clones
            .iter()
            .map(
                |[a, b]| match (ObjectId::from_hex(a), ObjectId::from_hex(b)) {
                    (Some(a), Some(b)) => Ok((a, b)),
                    _ => Err(format!("malformed clone pair [{a}, {b}] in the manifest")),
                },
            )
            .collect()
    }
}

/// The name of pack `name`.
pub fn pack_object(name: &str) -> String {
    format!("packs/{}/{name}.pack", &name[..2])
}

/// The name of pack `name`'s tail.
pub fn index_object(name: &str) -> String {
    format!("index/{}/{name}.idx", &name[..2])
}

/// The name of the segment whose bytes hash to `hash` (hex; keyed in an encrypted remote:
/// [`Remote::content_name`]).
pub fn segment_object(hash: &str) -> String {
    format!("oplog/{}/{hash}.seg", &hash[..2])
}

/// The directory of history `id`'s manifests.
pub fn manifests_dir(history: &str) -> String {
    format!("histories/{history}/manifests/")
}

/// A new manifest name: its time first, so names sort by age, and random digits, so two
/// writers never pick the same.
pub fn manifest_object(history: &str, created_ns: i64) -> String {
    format!("{}{}.json", manifests_dir(history), unique_stem(created_ns))
}

/// `<created_ns, 20 digits>-<16 random hex digits>`: names that sort by age and that two
/// writers never both pick.
pub fn unique_stem(created_ns: i64) -> String {
    let mut rand = [0u8; 8];
    let seed = blake3::hash(
        format!(
            "{created_ns} {} {:?}",
            std::process::id(),
            std::time::SystemTime::now()
        )
        .as_bytes(),
    );
    rand.copy_from_slice(&seed.as_bytes()[..8]);
    format!("{created_ns:020}-{}", hex::encode(rand))
}

/// Whether `s` is a workspace (history) id: 32 lowercase hex digits.
pub fn is_history_id(s: &str) -> bool {
    s.len() == 32
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A segment's bytes: its JSON, zstd-compressed.
pub fn encode_segment(s: &OplogSegment) -> Result<Vec<u8>> {
    let json = serde_json::to_vec(s).map_err(|e| Error::State(e.to_string()))?;
    zstd::encode_all(&json[..], SEGMENT_ZSTD_LEVEL).map_err(|e| Error::State(e.to_string()))
}

/// Reads and checks the `config` object; `Ok(None)` if the remote has none (nothing pushed).
/// Refuses a remote this rewind cannot use, and one whose encryption the connection does not
/// match (see the module's doc): then nothing else was read or written.
pub fn read_config(remote: &Remote) -> Result<Option<RemoteConfigObject>> {
    let Some(bytes) = remote.get(CONFIG)? else {
        return Ok(None);
    };
    let corrupt = |reason: String| Error::Corrupt {
        remote: remote.url().to_string(),
        object: CONFIG.into(),
        reason,
    };
    let c: RemoteConfigObject =
        serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
    let encryption = match &c.encryption {
        None => None,
        Some(v) => match serde_json::from_value::<Encryption>(v.clone()) {
            Ok(e) if e.scheme == seal::SCHEME => Some(e),
            _ => {
                return Err(Error::State(format!(
                    "the remote {} is encrypted with a scheme this rewind does not know ({}); \
                     upgrade rewind",
                    remote.url(),
                    v.get("scheme").and_then(|s| s.as_str()).unwrap_or("?")
                )))
            }
        },
    };
    if c.format != REMOTE_FORMAT || c.version != REMOTE_VERSION {
        return Err(Error::State(format!(
            "the remote {} has format {} version {}, which this rewind cannot use; upgrade rewind",
            remote.url(),
            c.format,
            c.version,
        )));
    }
    check_encryption(remote, encryption.as_ref())?;
    Ok(Some(c))
}

/// Whether this connection to `remote` (its key file, or none) matches the remote's
/// `encryption`; else an error saying what to do.
fn check_encryption(remote: &Remote, encryption: Option<&Encryption>) -> Result<()> {
    let url = remote.url();
    let name = &remote.location.name;
    let key_file = remote.location.key_file.as_deref();
    match (encryption, remote.keys()) {
        (None, None) => Ok(()),
        (Some(e), Some(k)) if e.key_check == k.key_check() => Ok(()),
        (Some(_), Some(_)) => Err(Error::State(format!(
            "the key in {} is not the key of the remote {url} (the remote's key check differs); \
             nothing was read or written: give the key file this remote was encrypted with",
            key_file.map_or_else(|| "?".into(), |p| p.display().to_string())
        ))),
        (Some(_), None) => Err(Error::State(format!(
            "the remote {url} is encrypted and no key file is given for it here; nothing was \
             read or written: clone with --key-file PATH, or add the remote with its key \
             (rewind remote add {name} {url} --key-file PATH)"
        ))),
        (None, Some(_)) => Err(Error::State(format!(
            "the remote {url} is not encrypted, but a key file ({}) is given for it here; \
             nothing was read or written: an encrypted history goes to a new remote (another \
             prefix or directory); to use this one unencrypted, leave the key file out (remove \
             key_file from [remote.{name}] in config.toml)",
            key_file.map_or_else(|| "?".into(), |p| p.display().to_string())
        ))),
    }
}

/// Makes sure the remote has its `config` object (a push's first step): encrypted when this
/// connection has a key. Refuses (before anything is uploaded) a remote whose encryption does
/// not match.
pub fn ensure_config(remote: &Remote) -> Result<()> {
    if read_config(remote)?.is_some() {
        return Ok(());
    }
    let encryption = remote.keys().map(|k| {
        serde_json::to_value(Encryption {
            scheme: seal::SCHEME.into(),
            key_check: k.key_check().to_string(),
        })
        .expect("serialisable")
    });
    let c = RemoteConfigObject {
        format: REMOTE_FORMAT.into(),
        version: REMOTE_VERSION,
        encryption,
    };
    let bytes = serde_json::to_vec_pretty(&c).map_err(|e| Error::State(e.to_string()))?;
    remote.create(CONFIG, bytes)?;
    // Whoever won a race wrote it; read what is there (and refuse it if it does not match).
    read_config(remote)?.ok_or_else(|| Error::Missing {
        remote: remote.url().to_string(),
        object: CONFIG.into(),
        what: "it was just written and cannot be read back".into(),
    })?;
    Ok(())
}

/// The newest manifest of `history` (largest position, then newest), with its name; `None`
/// when the history has none.
pub fn newest_manifest(remote: &Remote, history: &str) -> Result<Option<(String, Manifest)>> {
    let names: Vec<String> = remote
        .list(&manifests_dir(history))?
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    newest_among(remote, &names)
}

/// The manifests a reader chooses among, of a history's objects `names` (as listed, sorted):
/// the two newest `.json` names. Names sort by time and one workspace pushes one at a time,
/// so the newest name is the furthest along; the one before it counts too, against a clock
/// that went backwards.
pub fn candidates(names: &[String]) -> impl Iterator<Item = &String> {
    names.iter().filter(|n| n.ends_with(".json")).rev().take(2)
}

/// The newest manifest among `names` (a history's objects, sorted; see [`candidates`]):
/// largest position, then newest.
pub fn newest_among(remote: &Remote, names: &[String]) -> Result<Option<(String, Manifest)>> {
    let mut best: Option<(String, Manifest)> = None;
    for name in candidates(names).cloned() {
        let Some(bytes) = remote.get(&name)? else {
            continue;
        };
        let m: Manifest = serde_json::from_slice(&bytes).map_err(|e| Error::Corrupt {
            remote: remote.url().to_string(),
            object: name.clone(),
            reason: e.to_string(),
        })?;
        if m.format != MANIFEST_FORMAT || !(1..=MANIFEST_VERSION).contains(&m.version) {
            return Err(Error::State(format!(
                "{name} in {} has version {}, which this rewind cannot read; upgrade rewind",
                remote.url(),
                m.version
            )));
        }
        let better = best
            .as_ref()
            .is_none_or(|(_, b)| (m.pos, m.created_ns) > (b.pos, b.created_ns));
        if better {
            best = Some((name, m));
        }
    }
    Ok(best)
}

/// Downloads segment `s` (opened, in an encrypted remote) and checks its size, hash and content
/// (`history`'s, format).
pub fn fetch_segment(remote: &Remote, s: &SegmentRecord) -> Result<OplogSegment> {
    let name = segment_object(&s.name);
    let bytes = remote.get(&name)?.ok_or_else(|| Error::Missing {
        remote: remote.url().to_string(),
        object: name.clone(),
        what: "an op-log segment a manifest lists".into(),
    })?;
    let corrupt = |reason: String| Error::Corrupt {
        remote: remote.url().to_string(),
        object: name.clone(),
        reason,
    };
    if bytes.len() as u64 != s.size {
        return Err(corrupt(format!(
            "{} bytes, the manifest says {}",
            bytes.len(),
            s.size
        )));
    }
    if remote.content_name(&bytes) != s.name {
        return Err(corrupt("its content does not match its name (hash)".into()));
    }
    let json = zstd::decode_all(&bytes[..]).map_err(|e| corrupt(e.to_string()))?;
    let seg: OplogSegment = serde_json::from_slice(&json).map_err(|e| corrupt(e.to_string()))?;
    if seg.from_pos != s.from_pos || seg.to_pos != s.to_pos {
        return Err(corrupt("its positions differ from the manifest's".into()));
    }
    Ok(seg)
}
