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
}

impl Rules {
    /// Rules at the workspace root: the root's own files, `.git/info/exclude` and the global
    /// excludes file (lowest precedence).
    pub fn for_root(root: &Path, warnings: &mut Vec<String>) -> Arc<Rules> {
        let mut base = None;
        if let Some(global) = ignore::gitignore::gitconfig_excludes_path() {
            base = Some(Arc::new(Rules {
                matcher: build(root, &[global], warnings),
                parent: None,
            }));
        }
        let exclude = root.join(".git/info/exclude");
        let base = Arc::new(Rules {
            matcher: build(root, &[exclude], warnings),
            parent: base,
        });
        Rules::for_dir(&base, root, warnings)
    }

    /// Rules in `dir`, a child of the directory these rules belong to.
    pub fn for_dir(self: &Arc<Rules>, dir: &Path, warnings: &mut Vec<String>) -> Arc<Rules> {
        let files: Vec<_> = IGNORE_FILES.iter().map(|f| dir.join(f)).collect();
        match build(dir, &files, warnings) {
            Some(m) => Arc::new(Rules {
                matcher: Some(m),
                parent: Some(self.clone()),
            }),
            None => self.clone(),
        }
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

fn build(
    dir: &Path,
    files: &[std::path::PathBuf],
    warnings: &mut Vec<String>,
) -> Option<Gitignore> {
    let present: Vec<_> = files.iter().filter(|f| f.is_file()).collect();
    if present.is_empty() {
        return None;
    }
    let mut b = GitignoreBuilder::new(dir);
    for f in present {
        if let Some(err) = b.add(f) {
            warnings.push(format!(
                "ignore file {}: {err} (its other lines still apply)",
                f.display()
            ));
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
