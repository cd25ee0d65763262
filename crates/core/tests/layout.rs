//! The crate's layout rules, checked on its source so a change that breaks them fails here:
//!
//! - **Imports go one way.** No module imports a sibling that imports it back, directly or
//!   through others (`capture` may use `fs`, then `fs` may not use `capture`). A parent and its
//!   own children may use each other (`record` declares `record::epoch`, which uses
//!   `record`'s types): that is one concept in one folder, not a cycle between concepts.
//! - **SQL lives in `db/`.** Every query the engine runs is in one place, next to the schema it
//!   depends on.
//! - **No file over 800 lines.** A module that grows past it holds more than one concept and
//!   becomes a folder.
//!
//! The parser is deliberately small: it reads `crate::…` and `super::…` paths (including
//! `use crate::{a, b::{c, d}}` groups) outside comments, and resolves names re-exported by
//! `lib.rs` to the module they come from.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 800;

/// A module path below the crate root: `["record", "epoch"]`; the root itself is `[]`.
type ModPath = Vec<String>;

struct Source {
    file: PathBuf,
    module: ModPath,
    /// The code with comments blanked out (line structure kept, for line numbers).
    code: String,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn sources() -> Vec<Source> {
    let mut out = Vec::new();
    let mut stack = vec![src_dir()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src_dir()).unwrap();
                let mut module: ModPath = rel
                    .with_extension("")
                    .iter()
                    .map(|c| c.to_string_lossy().into_owned())
                    .collect();
                if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
                    module.pop();
                }
                let text = std::fs::read_to_string(&path).unwrap();
                out.push(Source {
                    file: rel.to_path_buf(),
                    module,
                    code: strip_comments(&text),
                });
            }
        }
    }
    out.sort_by(|a, b| a.file.cmp(&b.file));
    out
}

/// Blanks `//` comments (doc comments included) and string literals' contents, keeping
/// newlines, so paths named in prose or messages are not read as imports.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_str = false;
    while let Some(c) = chars.next() {
        if in_str {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => {
                    in_str = false;
                    out.push('"');
                }
                '\n' => out.push('\n'),
                _ => {}
            }
            continue;
        }
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            // A char literal holding a quote: `'"'`.
            '\'' if chars.peek() == Some(&'"') => {
                out.push('\'');
                out.push(chars.next().unwrap());
            }
            '"' => {
                in_str = true;
                out.push('"');
            }
            _ => out.push(c),
        }
    }
    out
}

/// The paths of a `use` tree starting right after `crate::` (or `super::`): `a::b`,
/// `{a, b::{c, d}}`, each as its segments.
fn use_paths(s: &str) -> Vec<Vec<String>> {
    fn ident(s: &str) -> (&str, &str) {
        let end = s
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        (&s[..end], &s[end..])
    }
    fn tree<'a>(s: &'a str, prefix: &[String], out: &mut Vec<Vec<String>>) -> &'a str {
        let s = s.trim_start();
        if let Some(mut rest) = s.strip_prefix('{') {
            loop {
                rest = rest.trim_start();
                if let Some(r) = rest.strip_prefix('}') {
                    return r;
                }
                rest = tree(rest, prefix, out);
                rest = rest.trim_start();
                rest = rest.strip_prefix(',').unwrap_or(rest);
                if rest.is_empty() {
                    return rest;
                }
            }
        }
        let (name, rest) = ident(s);
        if name.is_empty() {
            // `*` or something unexpected: what came before is the path.
            if !prefix.is_empty() {
                out.push(prefix.to_vec());
            }
            return s.get(1..).unwrap_or("");
        }
        let mut path = prefix.to_vec();
        path.push(name.to_string());
        if let Some(rest) = rest.strip_prefix("::") {
            tree(rest, &path, out)
        } else {
            out.push(path);
            rest
        }
    }
    let mut out = Vec::new();
    tree(s, &[], &mut out);
    out
}

struct Crate {
    sources: Vec<Source>,
    modules: BTreeSet<ModPath>,
    /// Names `lib.rs` re-exports (`pub use capture::Capture`) → the module they come from.
    reexports: BTreeMap<String, ModPath>,
}

impl Crate {
    fn load() -> Crate {
        let sources = sources();
        let modules: BTreeSet<ModPath> = sources.iter().map(|s| s.module.clone()).collect();
        let mut reexports = BTreeMap::new();
        let lib = sources.iter().find(|s| s.module.is_empty()).unwrap();
        for (i, _) in lib.code.match_indices("use ") {
            for path in use_paths(&lib.code[i + 4..]) {
                let (name, from) = path.split_last().unwrap();
                let module = Self::deepest(&modules, from);
                if !module.is_empty() {
                    reexports.insert(name.clone(), module);
                }
            }
        }
        Crate {
            sources,
            modules,
            reexports,
        }
    }

    /// The longest prefix of `path` that is a module of the crate.
    fn deepest(modules: &BTreeSet<ModPath>, path: &[String]) -> ModPath {
        let mut at = Vec::new();
        for seg in path {
            at.push(seg.clone());
            if !modules.contains(&at) {
                at.pop();
                break;
            }
        }
        at
    }

    /// The module a path written in `from` refers to (`crate::a::b`, `super::c`).
    fn resolve(&self, from: &ModPath, base: &str, path: &[String]) -> ModPath {
        let mut abs: Vec<String> = match base {
            "crate" => Vec::new(),
            _ => {
                // In `a/b.rs` (module a::b), `super` is `a`; in `a/b/mod.rs` (also a::b) too.
                let mut m = from.clone();
                m.pop();
                m
            }
        };
        let mut rest = path;
        while rest.first().map(String::as_str) == Some("super") {
            abs.pop();
            rest = &rest[1..];
        }
        abs.extend(rest.iter().cloned());
        let module = Self::deepest(&self.modules, &abs);
        if module.is_empty() {
            if let Some(first) = abs.first() {
                if let Some(m) = self.reexports.get(first) {
                    return m.clone();
                }
            }
        }
        module
    }

    /// Every (from module, to module, where) reference between modules.
    fn references(&self) -> Vec<(ModPath, ModPath, String)> {
        let mut out = Vec::new();
        for src in &self.sources {
            for base in ["crate::", "super::"] {
                for (i, _) in src.code.match_indices(base) {
                    // Not part of a longer name (`foo_crate::`).
                    let before = src.code[..i].chars().next_back();
                    if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                        continue;
                    }
                    let line = src.code[..i].matches('\n').count() + 1;
                    let kind = base.trim_end_matches("::");
                    for path in use_paths(&src.code[i + base.len()..]) {
                        let to = self.resolve(&src.module, kind, &path);
                        let at = format!("{}:{line}", src.file.display());
                        out.push((src.module.clone(), to, at));
                    }
                }
            }
        }
        out
    }
}

/// Lifts a reference to the two sibling modules it connects under their common parent, or
/// `None` for a reference between a module and its own ancestor or descendant.
fn siblings(from: &ModPath, to: &ModPath) -> Option<(ModPath, ModPath)> {
    let k = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    if k == from.len() || k == to.len() {
        return None;
    }
    Some((from[..=k].to_vec(), to[..=k].to_vec()))
}

#[test]
fn no_module_imports_a_module_that_imports_it_back() {
    let krate = Crate::load();
    let mut edges: BTreeMap<ModPath, BTreeMap<ModPath, String>> = BTreeMap::new();
    for (from, to, at) in krate.references() {
        if let Some((a, b)) = siblings(&from, &to) {
            edges.entry(a).or_default().entry(b).or_insert(at);
        }
    }
    // For every edge a → b, is there a path b → … → a?
    let mut cycles = Vec::new();
    for (a, outs) in &edges {
        for (b, at) in outs {
            if let Some(back) = path_between(&edges, b, a) {
                let names: Vec<String> = back.iter().map(|m| m.join("::")).collect();
                cycles.push(format!(
                    "{} → {} ({at}), and back: {}",
                    a.join("::"),
                    b.join("::"),
                    names.join(" → ")
                ));
            }
        }
    }
    assert!(
        cycles.is_empty(),
        "import cycles between modules of rewind-core (move the shared piece down a layer):\n{}",
        cycles.join("\n")
    );
}

/// A path of edges from `from` to `to`, with where each edge is written, if there is one.
fn path_between(
    edges: &BTreeMap<ModPath, BTreeMap<ModPath, String>>,
    from: &ModPath,
    to: &ModPath,
) -> Option<Vec<ModPath>> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![vec![from.clone()]];
    while let Some(path) = stack.pop() {
        let last = path.last().unwrap();
        if last == to {
            return Some(path);
        }
        if !seen.insert(last.clone()) {
            continue;
        }
        for next in edges.get(last).into_iter().flat_map(|m| m.keys()) {
            let mut p = path.clone();
            p.push(next.clone());
            stack.push(p);
        }
    }
    None
}

#[test]
fn no_sql_outside_db() {
    let krate = Crate::load();
    let words = [
        "SELECT ",
        "INSERT INTO",
        "INSERT OR",
        "DELETE FROM",
        "UPDATE ",
        "CREATE TABLE",
        "CREATE INDEX",
        "BEGIN IMMEDIATE",
    ];
    let mut found = Vec::new();
    for src in &krate.sources {
        if src.module.first().map(String::as_str) == Some("db") {
            continue;
        }
        // Strings are blanked in `code`; read the file itself, skipping comments.
        let text = std::fs::read_to_string(src_dir().join(&src.file)).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            if let Some(w) = words.iter().find(|w| code.contains(*w)) {
                found.push(format!("{}:{}: {w:?}", src.file.display(), n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "SQL outside src/db/ (move the query into a db module function):\n{}",
        found.join("\n")
    );
}

#[test]
fn no_source_file_over_the_line_limit() {
    let mut long = Vec::new();
    for src in Crate::load().sources {
        let n = std::fs::read_to_string(src_dir().join(&src.file))
            .unwrap()
            .lines()
            .count();
        if n > MAX_LINES {
            long.push(format!("{}: {n} lines", src.file.display()));
        }
    }
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines (split the concepts into a folder of modules):\n{}",
        long.join("\n")
    );
}

/// The checker itself: a cycle it must see, written the ways code writes imports.
#[test]
fn the_parser_reads_use_trees() {
    let paths = use_paths("{a, b::{c, d::e}, f::*};");
    let want: Vec<Vec<String>> = [vec!["a"], vec!["b", "c"], vec!["b", "d", "e"], vec!["f"]]
        .iter()
        .map(|p| p.iter().map(|s| s.to_string()).collect())
        .collect();
    assert_eq!(paths, want);
    assert_eq!(
        strip_comments("a // crate::x\n\"crate::y\" b"),
        "a \n\"\" b"
    );
    let m = |s: &str| -> ModPath { s.split("::").map(String::from).collect() };
    assert_eq!(
        siblings(&m("record::epoch"), &m("fs::probe")),
        Some((m("record"), m("fs")))
    );
    assert_eq!(siblings(&m("record::epoch"), &m("record")), None);
    assert_eq!(
        siblings(&m("record::epoch"), &m("record::checkpoint")),
        Some((m("record::epoch"), m("record::checkpoint")))
    );
}
