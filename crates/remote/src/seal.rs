//! Client-side authenticated encryption of a remote's objects (`docs/format.md`, Remote store,
//! Encryption): XChaCha20-Poly1305 (RustCrypto's `chacha20poly1305`) in the STREAM
//! construction, so an object of any size is sealed in chunks of at most [`CHUNK`] bytes whose
//! order, number and end are authenticated.
//!
//! ```text
//! magic        8 bytes   "RWSEAL\0\x01"
//! nonce prefix 19 bytes  random, one per object
//! chunk 0      min(n, CHUNK) bytes of ciphertext, then its 16-byte tag
//! chunk 1 …    the same; every chunk but the last holds exactly CHUNK plaintext bytes
//! ```
//!
//! Chunk `i` is sealed with the nonce `prefix ‖ i (u32, big-endian) ‖ last (1 byte: 1 for the
//! last chunk, else 0)` and the object's name (relative to the remote's prefix, UTF-8) as
//! associated data. An empty object is one chunk of 0 bytes (its tag alone).
//!
//! Invariants:
//! - Opening authenticates everything or returns nothing: a flipped bit anywhere, a chunk
//!   moved, dropped or repeated, an object cut short at any byte (a chunk boundary included: the
//!   chunk before it was not sealed as the last), an object stored under another name, or
//!   another key, is an error, and no plaintext comes out.
//! - The keys that do the work are derived from the remote's master key with BLAKE3's
//!   `derive_key`, one context each: the cipher's key, the key that names content
//!   ([`Keys::content_name`]), and the key check the `config` object carries. None of them
//!   gives back the master key or another of them.
//! - Key material is never printed: [`Keys`]' `Debug` says `(keys)`, and it is wiped when
//!   dropped.

use chacha20poly1305::aead::AeadInOut;
use chacha20poly1305::{KeyInit, Tag, XChaCha20Poly1305, XNonce};
use zeroize::Zeroizing;

/// The scheme's name in the `config` object.
pub const SCHEME: &str = "xchacha20poly1305-stream-1m";
/// What every sealed object starts with.
pub const MAGIC: &[u8; 8] = b"RWSEAL\0\x01";
/// Plaintext bytes per chunk (the last may hold fewer).
pub const CHUNK: usize = 1 << 20;
/// Random bytes of the nonce an object's chunks share.
pub const PREFIX: usize = 19;
/// Poly1305's tag, after each chunk.
pub const TAG: usize = 16;
/// Magic and nonce prefix.
pub const HEADER: usize = MAGIC.len() + PREFIX;

const CONTEXT_CIPHER: &str = "rewind remote 2026-01 object encryption key";
const CONTEXT_NAMES: &str = "rewind remote 2026-01 content naming key";
const CONTEXT_CHECK: &str = "rewind remote 2026-01 key check";

/// Why an object did not open. Says nothing of the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenError(pub String);

/// The keys of one remote, derived from its 32-byte master key.
pub struct Keys {
    cipher: XChaCha20Poly1305,
    names: Zeroizing<[u8; 32]>,
    check: String,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("(keys)")
    }
}

/// The number of chunks a plaintext of `n` bytes is sealed in.
fn chunks(n: u64) -> u64 {
    n.div_ceil(CHUNK as u64).max(1)
}

/// The size of the sealed object of `n` plaintext bytes.
pub fn sealed_len(n: u64) -> u64 {
    HEADER as u64 + n + TAG as u64 * chunks(n)
}

/// The plaintext size of a sealed object of `stored` bytes, or `None` if no plaintext seals to
/// that size (the object was cut or padded).
pub fn plain_len(stored: u64) -> Option<u64> {
    let body = stored.checked_sub(HEADER as u64)?;
    if body < TAG as u64 {
        return None;
    }
    let n = body - TAG as u64 * body.div_ceil((CHUNK + TAG) as u64);
    (sealed_len(n) == stored).then_some(n)
}

fn nonce(prefix: &[u8; PREFIX], index: u32, last: bool) -> XNonce {
    let mut n = [0u8; 24];
    n[..PREFIX].copy_from_slice(prefix);
    n[PREFIX..PREFIX + 4].copy_from_slice(&index.to_be_bytes());
    n[23] = u8::from(last);
    XNonce::from(n)
}

impl Keys {
    /// The keys derived from `master`.
    pub fn derive(master: &[u8; 32]) -> Keys {
        let cipher_key = Zeroizing::new(blake3::derive_key(CONTEXT_CIPHER, master));
        let cipher = XChaCha20Poly1305::new(&(*cipher_key).into());
        let names = Zeroizing::new(blake3::derive_key(CONTEXT_NAMES, master));
        let check = hex::encode(blake3::derive_key(CONTEXT_CHECK, master));
        Keys {
            cipher,
            names,
            check,
        }
    }

    /// The key check: a value derived from the master key (64 hex digits) that the remote's
    /// `config` object carries, so a wrong key is told apart before anything is read or written.
    pub fn key_check(&self) -> &str {
        &self.check
    }

    /// The name of content `bytes` in the remote: BLAKE3 keyed with the naming key, in hex, so
    /// equal content has equal names in this remote only, and a name tells nothing of content
    /// to whoever lacks the key.
    pub fn content_name(&self, bytes: &[u8]) -> String {
        blake3::keyed_hash(&self.names, bytes).to_hex().to_string()
    }

    /// `plain` sealed as the object `name`, with a fresh random nonce prefix.
    pub fn seal(&self, name: &str, plain: &[u8]) -> Result<Vec<u8>, String> {
        let mut prefix = [0u8; PREFIX];
        getrandom::fill(&mut prefix).map_err(|e| format!("no random numbers: {e}"))?;
        Ok(self.seal_with(name, plain, &prefix))
    }

    /// [`Keys::seal`] with a given nonce prefix (which must never be used twice with a key).
    pub(crate) fn seal_with(&self, name: &str, plain: &[u8], prefix: &[u8; PREFIX]) -> Vec<u8> {
        let mut out = Vec::with_capacity(sealed_len(plain.len() as u64) as usize);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(prefix);
        let n = chunks(plain.len() as u64) as usize;
        for i in 0..n {
            let piece = &plain[(i * CHUNK).min(plain.len())..((i + 1) * CHUNK).min(plain.len())];
            let start = out.len();
            out.extend_from_slice(piece);
            let index = u32::try_from(i).expect("objects are far below 4 PiB");
            let tag = self
                .cipher
                .encrypt_inout_detached(
                    &nonce(prefix, index, i + 1 == n),
                    name.as_bytes(),
                    (&mut out[start..]).into(),
                )
                .expect("a chunk is far below the cipher's limit");
            out.extend_from_slice(&tag);
        }
        out
    }

    /// The plaintext of the object `name` whose stored bytes are `sealed`; an error (and no
    /// plaintext) unless every chunk authenticates, in order, up to a last one.
    pub fn open(&self, name: &str, sealed: &[u8]) -> Result<Vec<u8>, OpenError> {
        let bad = |why: &str| OpenError(why.to_string());
        if sealed.len() < HEADER + TAG {
            return Err(bad("too short to be a sealed object"));
        }
        if &sealed[..MAGIC.len()] != MAGIC {
            return Err(bad("it is not a sealed object (no RWSEAL header)"));
        }
        let Some(n) = plain_len(sealed.len() as u64) else {
            return Err(bad(
                "its size is not that of any sealed object (cut short or padded)",
            ));
        };
        let prefix: [u8; PREFIX] = sealed[MAGIC.len()..HEADER].try_into().expect("19 bytes");
        let body = &sealed[HEADER..];
        let mut out = Vec::with_capacity(n as usize);
        let pieces: Vec<&[u8]> = body.chunks(CHUNK + TAG).collect();
        for (i, piece) in pieces.iter().enumerate() {
            let (ct, tag) = piece.split_at(piece.len() - TAG);
            let start = out.len();
            out.extend_from_slice(ct);
            let index = u32::try_from(i).map_err(|_| bad("too many chunks"))?;
            let tag = Tag::try_from(tag).expect("16 bytes");
            if self
                .cipher
                .decrypt_inout_detached(
                    &nonce(&prefix, index, i + 1 == pieces.len()),
                    name.as_bytes(),
                    (&mut out[start..]).into(),
                    &tag,
                )
                .is_err()
            {
                // Nothing of what did open comes out.
                zeroize::Zeroize::zeroize(&mut out);
                return Err(OpenError(format!(
                    "chunk {i} of {} does not authenticate: the object was damaged, cut, \
                     reordered, or sealed under another name or key",
                    pieces.len()
                )));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
