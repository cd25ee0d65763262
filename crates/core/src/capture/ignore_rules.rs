//! Ignore rules with git's semantics: `.gitignore` and `.rewindignore` in every directory
//! (deeper files win), then `.git/info/exclude`, then the user's global excludes file.
//!
//! Ignored paths are, by default, neither captured nor touched by a restore. The matching is
//! done with the `ignore` crate's gitignore matchers (ripgrep's), inside our own walker. An
//! unreadable or malformed ignore file is reported and its valid lines still apply: an ignore
//! error may protect a file (leave it untouched), it never makes a restore delete one.

use std::path::Path;
use std::sync::Arc;

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;

/// The per-directory file names read for ignore rules.
pub const IGNORE_FILES: [&str; 2] = [".gitignore", ".rewindignore"];

/// The rules in force in one directory: its own matcher, then its parent's chain.
pub struct Rules {
    matcher: Option<Gitignore>,
    parent: Option<Arc<Rules>>,
    /// A digest of every ignore file's bytes in the chain, with where each was read: equal
    /// digests, equal rules. A directory listing is reused unread only under the rules it was
    /// filtered with (see `scan`'s trusted listings).
    digest: [u8; 16],
}

impl Rules {
    /// Rules at the workspace root: the root's own files, `.git/info/exclude` and the global
    /// excludes file (lowest precedence).
    pub fn for_root(root: &Path, warnings: &mut Vec<String>) -> Arc<Rules> {
        let mut base = None;
        if let Some(global) = ignore::gitignore::gitconfig_excludes_path() {
            base = Some(Arc::new(Rules::built(root, &[global], None, warnings)));
        }
        let exclude = root.join(".git/info/exclude");
        let base = Arc::new(Rules::built(root, &[exclude], base, warnings));
        Rules::for_dir(&base, root, warnings)
    }

    /// Rules in `dir`, a child of the directory these rules belong to.
    pub fn for_dir(self: &Arc<Rules>, dir: &Path, warnings: &mut Vec<String>) -> Arc<Rules> {
        let files: Vec<_> = IGNORE_FILES.iter().map(|f| dir.join(f)).collect();
        let rules = Rules::built(dir, &files, Some(self.clone()), warnings);
        if rules.matcher.is_some() {
            Arc::new(rules)
        } else {
            self.clone()
        }
    }

    /// The rules of `files` (those present) in `dir`, on top of `parent`.
    fn built(
        dir: &Path,
        files: &[std::path::PathBuf],
        parent: Option<Arc<Rules>>,
        warnings: &mut Vec<String>,
    ) -> Rules {
        let mut h = blake3::Hasher::new();
        h.update(parent.as_ref().map_or(&[0u8; 16], |p| &p.digest));
        let matcher = build(dir, files, &mut h, warnings);
        let mut digest = [0u8; 16];
        digest.copy_from_slice(&h.finalize().as_bytes()[..16]);
        Rules {
            matcher,
            parent,
            digest,
        }
    }

    /// Identifies these rules: see [`Rules::digest`].
    pub fn digest(&self) -> [u8; 16] {
        self.digest
    }

    /// Whether any rule is in force here (if not, nothing needs matching).
    pub fn has_matchers(&self) -> bool {
        self.matcher.is_some() || self.parent.as_ref().is_some_and(|p| p.has_matchers())
    }

    pub fn is_ignored(&self, abs: &Path, is_dir: bool) -> bool {
        let mut r = Some(self);
        while let Some(rules) = r {
            if let Some(m) = &rules.matcher {
                match m.matched(abs, is_dir) {
                    Match::Ignore(_) => return true,
                    Match::Whitelist(_) => return false,
                    Match::None => {}
                }
            }
            r = rules.parent.as_deref();
        }
        false
    }
}

/// The matcher of the ignore files among `files` that exist, each read once: its bytes (and
/// its path) go into `digest` exactly as they go into the matcher.
fn build(
    dir: &Path,
    files: &[std::path::PathBuf],
    digest: &mut blake3::Hasher,
    warnings: &mut Vec<String>,
) -> Option<Gitignore> {
    let present: Vec<_> = files.iter().filter(|f| f.is_file()).collect();
    if present.is_empty() {
        return None;
    }
    let mut b = GitignoreBuilder::new(dir);
    for f in present {
        let bytes = match std::fs::read(f) {
            Ok(b) => b,
            Err(err) => {
                warnings.push(format!("ignore file {}: {err}", f.display()));
                continue;
            }
        };
        let path = f.as_os_str().as_encoded_bytes();
        digest.update(&(path.len() as u64).to_le_bytes());
        digest.update(path);
        digest.update(&(bytes.len() as u64).to_le_bytes());
        digest.update(&bytes);
        // As `GitignoreBuilder::add` reads a file: line by line, a leading byte-order mark
        // dropped, a line that is not UTF-8 reported and skipped.
        for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let Ok(line) = std::str::from_utf8(line) else {
                warnings.push(format!(
                    "ignore file {}: line {} is not UTF-8 (its other lines still apply)",
                    f.display(),
                    i + 1
                ));
                continue;
            };
            let line = if i == 0 {
                line.trim_start_matches('\u{feff}')
            } else {
                line
            };
            if let Err(err) = b.add_line(Some(f.clone()), line) {
                warnings.push(format!(
                    "ignore file {}: line {}: {err} (its other lines still apply)",
                    f.display(),
                    i + 1
                ));
            }
        }
    }
    match b.build() {
        Ok(g) if !g.is_empty() => Some(g),
        Ok(_) => None,
        Err(err) => {
            warnings.push(format!(
                "ignore rules in {}: {err}; nothing there is ignored",
                dir.display()
            ));
            None
        }
    }
}
