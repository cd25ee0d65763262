//! What stays read-only inside a writable root: every `.git` (directory or worktree pointer
//! file, the git directory it points to and that directory's `commondir`, nested
//! repositories), `.rewind.toml`, agent configuration, and user-listed paths.
//!
//! Why: anything written there runs later *outside* the sandbox — git hooks and
//! `core.fsmonitor`/`core.hooksPath` run on the user's next git command, agent config files
//! grant the next agent run more (hooks, MCP servers, `danger-full-access`).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Protected at the workspace root even when missing (a placeholder stops their creation).
/// A trailing `/` means the placeholder is a directory.
pub const DEFAULT_PROTECT: &[&str] = &[
    ".rewind.toml",
    ".claude/",
    ".codex/",
    ".gemini/",
    ".agents/",
];

/// Nested repositories are searched this deep below the workspace …
const MAX_DEPTH: usize = 6;
/// … visiting at most this many directory entries …
const MAX_ENTRIES: usize = 50_000;
/// … and never inside these (huge, generated, and not where repositories live).
const SKIP_DIRS: &[&str] = &["node_modules", "target", ".venv", "__pycache__"];

/// A protected path that does not exist yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missing {
    /// Where the placeholder goes (below the workspace root).
    pub path: PathBuf,
    /// Whether the placeholder is a directory (the name ended in `/`) rather than a file.
    pub dir: bool,
}

/// What [`top_git`], [`nested_git`] and [`named`] collect: the paths to keep read-only.
#[derive(Debug, Default)]
pub struct Found {
    /// Existing paths to bind read-only (not yet filtered to the writable area).
    pub existing: Vec<PathBuf>,
    /// Protected names that do not exist yet: a read-only placeholder keeps them from being
    /// created.
    pub missing: Vec<Missing>,
}

fn refuse_symlink(path: &Path) -> Error {
    Error::SymlinkedMountTarget {
        path: path.to_path_buf(),
        target: std::fs::read_link(path).unwrap_or_default(),
    }
}

/// A `.git` entry at `dotgit`: protect it, and if it is a pointer file, what it points to.
fn git_entry(dotgit: &Path, ft: std::fs::FileType, out: &mut Found) -> Result<()> {
    if ft.is_symlink() {
        return Err(refuse_symlink(dotgit));
    }
    out.existing.push(dotgit.to_path_buf());
    if ft.is_file() {
        let text = std::fs::read_to_string(dotgit).unwrap_or_default();
        if let Some(rest) = text.lines().next().and_then(|l| l.strip_prefix("gitdir:")) {
            let target = dotgit.parent().unwrap_or(Path::new("/")).join(rest.trim());
            if let Ok(gitdir) = target.canonicalize() {
                out.existing.push(gitdir.clone());
                if let Ok(common) = std::fs::read_to_string(gitdir.join("commondir")) {
                    if let Ok(c) = gitdir.join(common.trim()).canonicalize() {
                        out.existing.push(c);
                    }
                }
            }
        }
    }
    Ok(())
}

/// The `.git` at the top of `root`, if any.
pub fn top_git(root: &Path, out: &mut Found) -> Result<()> {
    let dotgit = root.join(".git");
    match std::fs::symlink_metadata(&dotgit) {
        Ok(m) => git_entry(&dotgit, m.file_type(), out),
        Err(_) => Ok(()),
    }
}

/// `.git` entries below `root` (not `root/.git` itself), bounded by depth and entry count.
pub fn nested_git(root: &Path, out: &mut Found) -> Result<()> {
    let mut budget = MAX_ENTRIES;
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in rd.flatten() {
            if budget == 0 {
                return Ok(());
            }
            budget -= 1;
            let Ok(ft) = entry.file_type() else { continue };
            let name = entry.file_name();
            let path = entry.path();
            if name == ".git" {
                if dir != root {
                    git_entry(&path, ft, out)?;
                }
                continue;
            }
            if ft.is_dir() && depth < MAX_DEPTH && !SKIP_DIRS.iter().any(|s| name == *s) {
                stack.push((path, depth + 1));
            }
        }
    }
    Ok(())
}

/// Named paths at the root of the workspace (built-in plus `extra`).
pub fn named(root: &Path, extra: &[String], out: &mut Found) -> Result<()> {
    for name in DEFAULT_PROTECT
        .iter()
        .copied()
        .chain(extra.iter().map(String::as_str))
    {
        let dir = name.ends_with('/');
        let path = root.join(name.trim_end_matches('/'));
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => return Err(refuse_symlink(&path)),
            Ok(_) => out.existing.push(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Only where the parent exists: a placeholder never creates directories above it.
                if path.parent().is_some_and(|p| p.is_dir()) {
                    out.missing.push(Missing { path, dir });
                }
            }
            Err(e) => return Err(Error::io("inspecting", path, e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_top_nested_and_worktree_git() {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path().canonicalize().unwrap();
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(ws.join("vendor/sub/.git")).unwrap();
        std::fs::create_dir_all(ws.join("node_modules/x/.git")).unwrap();
        let main = tempfile::tempdir().unwrap();
        let main = main.path().canonicalize().unwrap();
        let gitdir = main.join(".git/worktrees/wt");
        std::fs::create_dir_all(&gitdir).unwrap();
        std::fs::write(gitdir.join("commondir"), "../..\n").unwrap();
        std::fs::create_dir_all(ws.join("wt")).unwrap();
        std::fs::write(
            ws.join("wt/.git"),
            format!("gitdir: {}\n", gitdir.display()),
        )
        .unwrap();
        let mut f = Found::default();
        top_git(&ws, &mut f).unwrap();
        nested_git(&ws, &mut f).unwrap();
        let mut got = f.existing.clone();
        got.sort();
        let mut want = vec![
            ws.join(".git"),
            ws.join("vendor/sub/.git"),
            ws.join("wt/.git"),
            gitdir.clone(),
            main.join(".git"),
        ];
        want.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn symlinked_git_and_names_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path();
        std::fs::create_dir(ws.join("decoy")).unwrap();
        std::os::unix::fs::symlink("decoy", ws.join(".git")).unwrap();
        let e = top_git(ws, &mut Found::default()).unwrap_err().to_string();
        assert!(e.contains(".git is a symlink"), "{e}");
        std::fs::remove_file(ws.join(".git")).unwrap();
        std::os::unix::fs::symlink("decoy", ws.join(".claude")).unwrap();
        let e = named(ws, &[], &mut Found::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains(".claude is a symlink"), "{e}");
    }

    #[test]
    fn missing_names_become_placeholders() {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path();
        std::fs::write(ws.join(".rewind.toml"), "").unwrap();
        let mut f = Found::default();
        named(ws, &["AGENTS.md".into(), "nope/CLAUDE.md".into()], &mut f).unwrap();
        assert_eq!(f.existing, vec![ws.join(".rewind.toml")]);
        let missing: Vec<_> = f.missing.iter().map(|m| (m.path.clone(), m.dir)).collect();
        assert!(missing.contains(&(ws.join(".claude"), true)));
        assert!(missing.contains(&(ws.join("AGENTS.md"), false)));
        assert!(!missing.iter().any(|(p, _)| p.ends_with("CLAUDE.md")));
    }
}
