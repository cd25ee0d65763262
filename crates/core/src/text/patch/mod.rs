//! Unified diffs as `git diff` writes them: a hand-written parser and an in-memory applier.
//!
//! Understood: `diff --git` sections with `old mode`/`new mode`, `new file mode`,
//! `deleted file mode`, `rename from`/`rename to`, `copy from`/`copy to`, `similarity index`,
//! `index`; `---`/`+++` names (`/dev/null` for absent, C-quoted names, a tab and anything after it
//! ignored); hunks `@@ -a,b +c,d @@` with `\ No newline at end of file`. Plain `diff -u` output
//! (no `diff --git` line) is accepted too. Binary patches, symlinks and submodules are refused.
//!
//! Applying is exact: every context and removed line must equal the file's bytes (CRLF included).
//! A hunk is tried at the line its header states; if the lines there differ, the nearest exact
//! match elsewhere after the previous hunk is used, as `git apply` does (never fuzz: no context
//! line is ever dropped). A hunk with no context lines applies only at its stated line; one whose
//! old range starts at line 0 or 1 must match at the start of the file, and one with leading
//! but no trailing context must match at its end.

mod apply;

pub use apply::{apply, HunkError};

use std::fmt;

/// How a file section of a patch changes its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchOp {
    /// Changes an existing file in place (content or mode).
    Modify,
    /// Creates a file (`--- /dev/null`).
    Add,
    /// Removes a file (`+++ /dev/null`).
    Delete,
    /// Moves a file to a new name, maybe changing it too.
    Rename,
    /// Creates a file from a copy of another, maybe changed; the source stays.
    Copy,
}

/// One file's section of a patch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilePatch {
    /// `None` for a new file.
    pub old_path: Option<Vec<u8>>,
    /// `None` for a deleted file.
    pub new_path: Option<Vec<u8>>,
    /// Git modes (`0o100644`, `0o100755`, …) when the patch states them.
    pub old_mode: Option<u32>,
    /// The file's git mode after the patch, when stated (`new mode`, `new file mode`).
    pub new_mode: Option<u32>,
    /// `copy from`/`copy to` rather than a rename.
    pub copy: bool,
    /// The content changes, in file order; empty for a pure rename, copy or mode change.
    pub hunks: Vec<Hunk>,
    /// Line of the patch where this section starts (1-based), for messages.
    pub line: usize,
}

impl FilePatch {
    /// What the section does, from its old and new paths.
    pub fn op(&self) -> PatchOp {
        match (&self.old_path, &self.new_path) {
            (None, _) => PatchOp::Add,
            (_, None) => PatchOp::Delete,
            (Some(a), Some(b)) if a != b => {
                if self.copy {
                    PatchOp::Copy
                } else {
                    PatchOp::Rename
                }
            }
            _ => PatchOp::Modify,
        }
    }

    /// The path the section is about, for messages (the new name unless deleted).
    pub fn path(&self) -> &[u8] {
        self.new_path
            .as_deref()
            .or(self.old_path.as_deref())
            .unwrap_or_default()
    }
}

/// One hunk: the old lines (context and removed) are replaced by the new ones (context and
/// added). Lines keep their terminator, except a last line marked "No newline at end of file".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hunk {
    /// `-a`: the first old line, 1-based (for an empty old range, the line after which the
    /// new lines go; 0 at the start of the file).
    pub old_start: usize,
    /// `,b`: how many old lines (context and removed) the hunk covers.
    pub old_len: usize,
    /// `+c`: where the new lines start in the patched file, 1-based.
    pub new_start: usize,
    /// `,d`: how many new lines (context and added) it leaves.
    pub new_len: usize,
    /// The hunk's body in order.
    pub lines: Vec<HunkLine>,
    /// Line of the patch holding the `@@` header (1-based).
    pub line: usize,
}

/// One line of a hunk's body, without its ` `, `-` or `+` marker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HunkLine {
    /// Must be in the file, and stays.
    Context(Vec<u8>),
    /// Must be in the file, and goes.
    Remove(Vec<u8>),
    /// Comes in.
    Add(Vec<u8>),
}

impl HunkLine {
    fn bytes_mut(&mut self) -> &mut Vec<u8> {
        match self {
            HunkLine::Context(b) | HunkLine::Remove(b) | HunkLine::Add(b) => b,
        }
    }
}

impl Hunk {
    /// The `@@ -a,b +c,d @@` header, rebuilt from the numbers, for messages.
    pub fn header(&self) -> String {
        format!(
            "@@ -{},{} +{},{} @@",
            self.old_start, self.old_len, self.new_start, self.new_len
        )
    }
    fn old_lines(&self) -> Vec<&[u8]> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                HunkLine::Context(b) | HunkLine::Remove(b) => Some(b.as_slice()),
                HunkLine::Add(_) => None,
            })
            .collect()
    }
    fn new_lines(&self) -> impl Iterator<Item = &[u8]> {
        self.lines.iter().filter_map(|l| match l {
            HunkLine::Context(b) | HunkLine::Add(b) => Some(b.as_slice()),
            HunkLine::Remove(_) => None,
        })
    }
    fn leading_context(&self) -> usize {
        self.lines
            .iter()
            .take_while(|l| matches!(l, HunkLine::Context(_)))
            .count()
    }
    fn trailing_context(&self) -> usize {
        self.lines
            .iter()
            .rev()
            .take_while(|l| matches!(l, HunkLine::Context(_)))
            .count()
    }
}

/// A malformed patch: the line (1-based) and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The patch line (1-based) where it went wrong.
    pub line: usize,
    /// What is wrong there.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "patch line {}: {}", self.line, self.message)
    }
}

fn perr(line: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        line: line + 1,
        message: message.into(),
    }
}

/// Without its line terminator (`\n` or `\r\n`).
fn strip_eol(l: &[u8]) -> &[u8] {
    let l = l.strip_suffix(b"\n").unwrap_or(l);
    l.strip_suffix(b"\r").unwrap_or(l)
}

/// Splits into lines, each keeping its `\n` (the last may have none).
pub fn split_lines(text: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, b) in text.iter().enumerate() {
        if *b == b'\n' {
            out.push(&text[start..=i]);
            start = i + 1;
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// Parses a patch. `strip`: leading path components to remove from `---`/`+++` and
/// `diff --git` names (`-p`); `None` means 1 for git sections, and for plain diffs 1 when the
/// names look like `a/…`/`b/…` (or differ only in their first component), else 0.
pub fn parse(text: &[u8], strip: Option<usize>) -> Result<Vec<FilePatch>, ParseError> {
    let mut owned;
    let text = if text.is_empty() || text.ends_with(b"\n") {
        text
    } else {
        // A patch whose final newline was lost in transit (e.g. a JSON string).
        owned = text.to_vec();
        owned.push(b'\n');
        &owned
    };
    let lines = split_lines(text);
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        if l.starts_with(b"diff --git ") {
            let (fp, next) = parse_git(&lines, i, strip)?;
            out.push(fp);
            i = next;
        } else if l.starts_with(b"--- ") && lines.get(i + 1).is_some_and(|n| n.starts_with(b"+++ "))
        {
            let (fp, next) = parse_plain(&lines, i, strip)?;
            out.push(fp);
            i = next;
        } else if l.starts_with(b"@@ ") {
            return Err(perr(i, "a hunk without a file header (`---`/`+++` lines)"));
        } else if l.starts_with(b"GIT binary patch") || l.starts_with(b"Binary files ") {
            return Err(perr(i, "binary patches are not supported"));
        } else {
            // Preamble (a commit message, `index` lines of other tools, blank lines): ignored.
            i += 1;
        }
    }
    if out.is_empty() {
        return Err(ParseError {
            line: 1,
            message: "no file changes found (expected a unified diff as `git diff` writes it)"
                .into(),
        });
    }
    Ok(out)
}

fn parse_mode(line: usize, text: &[u8]) -> Result<u32, ParseError> {
    let s = std::str::from_utf8(text.trim_ascii()).unwrap_or("");
    let mode = u32::from_str_radix(s, 8).map_err(|_| perr(line, format!("bad mode {s:?}")))?;
    match mode & 0o170000 {
        0o100000 => Ok(mode),
        0o120000 => Err(perr(line, "symlinks are not supported by apply-patch")),
        0o160000 => Err(perr(line, "submodules are not supported by apply-patch")),
        _ => Err(perr(line, format!("unsupported file mode {s}"))),
    }
}

fn parse_git(
    lines: &[&[u8]],
    start: usize,
    strip: Option<usize>,
) -> Result<(FilePatch, usize), ParseError> {
    let p = strip.unwrap_or(1);
    let header = &strip_eol(lines[start])[b"diff --git ".len()..];
    let mut fp = FilePatch {
        old_path: None,
        new_path: None,
        old_mode: None,
        new_mode: None,
        copy: false,
        hunks: Vec::new(),
        line: start + 1,
    };
    let (mut created, mut deleted) = (false, false);
    let (mut from, mut to): (Option<Vec<u8>>, Option<Vec<u8>>) = (None, None);
    let mut i = start + 1;
    while i < lines.len() {
        let l = strip_eol(lines[i]);
        if let Some(m) = l.strip_prefix(b"old mode ") {
            fp.old_mode = Some(parse_mode(i, m)?);
        } else if let Some(m) = l.strip_prefix(b"new mode ") {
            fp.new_mode = Some(parse_mode(i, m)?);
        } else if let Some(m) = l.strip_prefix(b"deleted file mode ") {
            fp.old_mode = Some(parse_mode(i, m)?);
            deleted = true;
        } else if let Some(m) = l.strip_prefix(b"new file mode ") {
            fp.new_mode = Some(parse_mode(i, m)?);
            created = true;
        } else if let Some(n) = l.strip_prefix(b"rename from ") {
            from = Some(unquote(i, n)?);
        } else if let Some(n) = l.strip_prefix(b"rename to ") {
            to = Some(unquote(i, n)?);
        } else if let Some(n) = l.strip_prefix(b"copy from ") {
            from = Some(unquote(i, n)?);
            fp.copy = true;
        } else if let Some(n) = l.strip_prefix(b"copy to ") {
            to = Some(unquote(i, n)?);
            fp.copy = true;
        } else if l.starts_with(b"similarity index ")
            || l.starts_with(b"dissimilarity index ")
            || l.starts_with(b"index ")
        {
        } else if l.starts_with(b"GIT binary patch") || l.starts_with(b"Binary files ") {
            return Err(perr(i, "binary patches are not supported"));
        } else {
            break;
        }
        i += 1;
    }
    let (mut old_name, mut new_name) = (None, None);
    let mut have_names = false;
    if i < lines.len() && lines[i].starts_with(b"--- ") {
        if !lines.get(i + 1).is_some_and(|n| n.starts_with(b"+++ ")) {
            return Err(perr(i + 1, "expected a `+++` line after `---`"));
        }
        old_name = file_name(i, &lines[i][4..], p)?;
        new_name = file_name(i + 1, &lines[i + 1][4..], p)?;
        have_names = true;
        i += 2;
        i = parse_hunks(lines, i, &mut fp.hunks)?;
    } else if i < lines.len() && lines[i].starts_with(b"@@ ") {
        return Err(perr(i, "a hunk without `---`/`+++` lines"));
    }
    let header_names = || -> Result<Vec<u8>, ParseError> {
        git_header_name(header, p).ok_or_else(|| {
            perr(
                start,
                "cannot tell the file name from the `diff --git` line; add `---`/`+++` lines",
            )
        })
    };
    // Each side: absent if the file is created (old) or deleted (new); else the rename or copy
    // line's name, else the `---`/`+++` name, else the `diff --git` line's.
    let side = |absent: bool, named: Option<Vec<u8>>, dashed: Option<Vec<u8>>| {
        Ok(if absent {
            None
        } else if named.is_some() {
            named
        } else if have_names {
            dashed
        } else {
            Some(header_names()?)
        })
    };
    fp.old_path = side(created, from, old_name)?;
    fp.new_path = side(deleted, to, new_name)?;
    if fp.old_path.is_none() && fp.new_path.is_none() {
        return Err(perr(start, "a section with neither an old nor a new file"));
    }
    if created && fp.old_path.is_some() || deleted && fp.new_path.is_some() {
        return Err(perr(
            start,
            "`---`/`+++` names contradict the file mode lines",
        ));
    }
    Ok((fp, i))
}

fn parse_plain(
    lines: &[&[u8]],
    start: usize,
    strip: Option<usize>,
) -> Result<(FilePatch, usize), ParseError> {
    let raw_old = name_text(start, &lines[start][4..])?;
    let raw_new = name_text(start + 1, &lines[start + 1][4..])?;
    let p = strip.unwrap_or_else(|| guess_strip(&raw_old, &raw_new));
    let mut fp = FilePatch {
        old_path: strip_name(start, raw_old, p)?,
        new_path: strip_name(start + 1, raw_new, p)?,
        old_mode: None,
        new_mode: None,
        copy: false,
        hunks: Vec::new(),
        line: start + 1,
    };
    if fp.old_path.is_none() && fp.new_path.is_none() {
        return Err(perr(start, "both names are /dev/null"));
    }
    // Plain diffs name the old and new file the same way (`diff -u a/f b/f`); a different
    // name is not a rename there.
    if let (Some(_), Some(n)) = (&fp.old_path, &fp.new_path) {
        fp.old_path = Some(n.clone());
    }
    let i = parse_hunks(lines, start + 2, &mut fp.hunks)?;
    Ok((fp, i))
}

fn guess_strip(old: &Option<Vec<u8>>, new: &Option<Vec<u8>>) -> usize {
    let first = |n: &[u8]| -> Option<(Vec<u8>, Vec<u8>)> {
        let i = n.iter().position(|b| *b == b'/')?;
        Some((n[..i].to_vec(), n[i + 1..].to_vec()))
    };
    match (old, new) {
        (Some(o), Some(n)) => match (first(o), first(n)) {
            (Some((a, ra)), Some((b, rb))) => usize::from(a != b && ra == rb),
            _ => 0,
        },
        (Some(x), None) | (None, Some(x)) => {
            usize::from(x.starts_with(b"a/") || x.starts_with(b"b/"))
        }
        (None, None) => 0,
    }
}

/// The name on a `---`/`+++` line, before stripping; `None` for `/dev/null`.
fn name_text(line: usize, rest: &[u8]) -> Result<Option<Vec<u8>>, ParseError> {
    let rest = strip_eol(rest);
    let name = if rest.starts_with(b"\"") {
        unquote(line, rest)?
    } else {
        // `diff -u` appends a tab and a timestamp; git a tab after names with spaces.
        let end = rest.iter().position(|b| *b == b'\t').unwrap_or(rest.len());
        rest[..end].to_vec()
    };
    if name == b"/dev/null" {
        return Ok(None);
    }
    if name.is_empty() {
        return Err(perr(line, "an empty file name"));
    }
    Ok(Some(name))
}

fn file_name(line: usize, rest: &[u8], p: usize) -> Result<Option<Vec<u8>>, ParseError> {
    let n = name_text(line, rest)?;
    strip_name(line, n, p)
}

fn strip_name(line: usize, name: Option<Vec<u8>>, p: usize) -> Result<Option<Vec<u8>>, ParseError> {
    let Some(mut n) = name else { return Ok(None) };
    for _ in 0..p {
        match n.iter().position(|b| *b == b'/') {
            Some(i) => n.drain(..=i),
            None => {
                return Err(perr(
                    line,
                    format!(
                        "cannot strip {p} leading component(s) from {:?}",
                        String::from_utf8_lossy(&n)
                    ),
                ))
            }
        };
    }
    Ok(Some(n))
}

/// The file name of a `diff --git A B` line where both names are the same file (no rename
/// lines, no `---`/`+++`): quoted names are split exactly; unquoted ones by finding the split
/// where both halves name the same file after stripping.
fn git_header_name(header: &[u8], p: usize) -> Option<Vec<u8>> {
    let strip = |n: &[u8]| strip_name(0, Some(n.to_vec()), p).ok().flatten();
    if header.starts_with(b"\"") {
        let (a, rest) = unquote_prefix(header)?;
        let rest = rest.strip_prefix(b" ")?;
        let b = if rest.starts_with(b"\"") {
            unquote_prefix(rest)?.0
        } else {
            rest.to_vec()
        };
        let (a, b) = (strip(&a)?, strip(&b)?);
        return (a == b).then_some(a);
    }
    for (i, c) in header.iter().enumerate() {
        if *c == b' ' {
            let (a, b) = (&header[..i], &header[i + 1..]);
            if let (Some(x), Some(y)) = (strip(a), strip(b)) {
                if x == y {
                    return Some(x);
                }
            }
        }
    }
    None
}

/// A possibly C-quoted name (`"a/tab\there"`), the whole text.
fn unquote(line: usize, text: &[u8]) -> Result<Vec<u8>, ParseError> {
    let text = strip_eol(text);
    if !text.starts_with(b"\"") {
        return Ok(text.to_vec());
    }
    match unquote_prefix(text) {
        Some((n, rest)) if rest.is_empty() || rest.starts_with(b"\t") => Ok(n),
        _ => Err(perr(line, "a badly quoted file name")),
    }
}

/// Decodes a leading C-quoted string; returns it and what follows the closing quote.
fn unquote_prefix(text: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let mut out = Vec::new();
    let mut i = 1;
    while i < text.len() {
        match text[i] {
            b'"' => return Some((out, &text[i + 1..])),
            b'\\' => {
                let c = *text.get(i + 1)?;
                i += 2;
                match c {
                    b'a' => out.push(7),
                    b'b' => out.push(8),
                    b't' => out.push(b'\t'),
                    b'n' => out.push(b'\n'),
                    b'v' => out.push(11),
                    b'f' => out.push(12),
                    b'r' => out.push(b'\r'),
                    b'"' | b'\\' => out.push(c),
                    b'0'..=b'3' => {
                        let d = text.get(i..i + 2)?;
                        if !d.iter().all(|x| (b'0'..=b'7').contains(x)) {
                            return None;
                        }
                        out.push((c - b'0') * 64 + (d[0] - b'0') * 8 + (d[1] - b'0'));
                        i += 2;
                    }
                    _ => return None,
                }
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    None
}

fn parse_range(s: &str) -> Option<(usize, usize)> {
    let mut it = s.splitn(2, ',');
    let start = it.next()?.parse().ok()?;
    let len = match it.next() {
        Some(l) => l.parse().ok()?,
        None => 1,
    };
    Some((start, len))
}

fn parse_hunk_header(line: usize, l: &[u8]) -> Result<(usize, usize, usize, usize), ParseError> {
    let bad = || perr(line, "a malformed hunk header (expected `@@ -a,b +c,d @@`)");
    let s = std::str::from_utf8(strip_eol(l)).map_err(|_| bad())?;
    let rest = s.strip_prefix("@@ -").ok_or_else(bad)?;
    let end = rest.find(" @@").ok_or_else(bad)?;
    let mut parts = rest[..end].splitn(2, " +");
    let (a, b) = parse_range(parts.next().ok_or_else(bad)?).ok_or_else(bad)?;
    let (c, d) = parse_range(parts.next().ok_or_else(bad)?).ok_or_else(bad)?;
    Ok((a, b, c, d))
}

fn parse_hunks(lines: &[&[u8]], mut i: usize, out: &mut Vec<Hunk>) -> Result<usize, ParseError> {
    while i < lines.len() && lines[i].starts_with(b"@@ ") {
        let (a, b, c, d) = parse_hunk_header(i, lines[i])?;
        let mut h = Hunk {
            old_start: a,
            old_len: b,
            new_start: c,
            new_len: d,
            lines: Vec::new(),
            line: i + 1,
        };
        i += 1;
        let (mut o, mut n) = (0, 0);
        while o < b || n < d {
            let Some(&l) = lines.get(i) else {
                return Err(perr(
                    i.saturating_sub(1),
                    format!(
                        "the hunk {} ends early: {o} of {b} old and {n} of {d} new lines",
                        h.header()
                    ),
                ));
            };
            match l.first() {
                Some(b' ') => {
                    h.lines.push(HunkLine::Context(l[1..].to_vec()));
                    o += 1;
                    n += 1;
                }
                Some(b'-') => {
                    h.lines.push(HunkLine::Remove(l[1..].to_vec()));
                    o += 1;
                }
                Some(b'+') => {
                    h.lines.push(HunkLine::Add(l[1..].to_vec()));
                    n += 1;
                }
                // An empty context line whose leading space an editor removed.
                Some(b'\n') => {
                    h.lines.push(HunkLine::Context(b"\n".to_vec()));
                    o += 1;
                    n += 1;
                }
                Some(b'\\') => no_newline(&mut h, i)?,
                _ => {
                    return Err(perr(
                        i,
                        format!(
                            "unexpected line in the hunk {} ({o} of {b} old and {n} of {d} new lines read); \
                             hunk lines start with ' ', '-' or '+'",
                            h.header()
                        ),
                    ))
                }
            }
            if o > b || n > d {
                return Err(perr(
                    i,
                    format!(
                        "the hunk {} has more lines than its header says",
                        h.header()
                    ),
                ));
            }
            i += 1;
        }
        if lines.get(i).is_some_and(|l| l.starts_with(b"\\")) {
            no_newline(&mut h, i)?;
            i += 1;
        }
        out.push(h);
    }
    Ok(i)
}

fn no_newline(h: &mut Hunk, i: usize) -> Result<(), ParseError> {
    let last = h
        .lines
        .last_mut()
        .ok_or_else(|| perr(i, "`\\ No newline at end of file` with no line before it"))?;
    let b = last.bytes_mut();
    if b.last() == Some(&b'\n') {
        b.pop();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_git_sections() {
        let p = b"diff --git a/x b/y\nsimilarity index 90%\nrename from x\nrename to y\n\
--- a/x\n+++ b/y\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n\
diff --git a/m b/m\nold mode 100644\nnew mode 100755\n\
diff --git a/n b/n\nnew file mode 100644\nindex 0000000..e69de29\n\
diff --git a/d b/d\ndeleted file mode 100755\n--- a/d\n+++ /dev/null\n@@ -1 +0,0 @@\n-z\n\\ No newline at end of file\n";
        let f = parse(p, None).unwrap();
        assert_eq!(f.len(), 4);
        assert_eq!(f[0].op(), PatchOp::Rename);
        assert_eq!(f[0].old_path.as_deref(), Some(&b"x"[..]));
        assert_eq!(f[0].new_path.as_deref(), Some(&b"y"[..]));
        assert_eq!(f[1].op(), PatchOp::Modify);
        assert_eq!(f[1].new_mode, Some(0o100755));
        assert_eq!(f[1].new_path.as_deref(), Some(&b"m"[..]));
        assert_eq!(f[2].op(), PatchOp::Add);
        assert_eq!(f[2].new_path.as_deref(), Some(&b"n"[..]));
        assert!(f[2].hunks.is_empty());
        assert_eq!(f[3].op(), PatchOp::Delete);
        assert_eq!(f[3].hunks[0].lines, vec![HunkLine::Remove(b"z".to_vec())]);
    }

    #[test]
    fn quoted_and_spaced_names() {
        let p = b"diff --git \"a/t\\tb\" \"b/t\\tb\"\nnew file mode 100644\n\
diff --git a/s p b/s p\nold mode 100644\nnew mode 100755\n";
        let f = parse(p, None).unwrap();
        assert_eq!(f[0].new_path.as_deref(), Some(&b"t\tb"[..]));
        assert_eq!(f[1].new_path.as_deref(), Some(&b"s p"[..]));
        let p = b"--- a/s p\t\n+++ b/s p\t\n@@ -0,0 +1 @@\n+x\n";
        assert_eq!(
            parse(p, None).unwrap()[0].new_path.as_deref(),
            Some(&b"s p"[..])
        );
    }

    #[test]
    fn applies_with_offset_and_refuses_mismatch() {
        let p = b"--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n d\n";
        let f = parse(p, None).unwrap();
        assert_eq!(
            apply(b"a\nb\nc\nd\ne\n", &f[0].hunks).unwrap(),
            b"a\nb\nC\nd\ne\n"
        );
        // Shifted by two lines: found by exact search.
        assert_eq!(
            apply(b"x\ny\na\nb\nc\nd\n", &f[0].hunks).unwrap(),
            b"x\ny\na\nb\nC\nd\n"
        );
        let e = apply(b"a\nb\nX\nd\n", &f[0].hunks).unwrap_err();
        assert!(e.message.contains("line 3 is `X`"), "{e}");
    }

    #[test]
    fn no_newline_markers() {
        let p = b"--- a/f\n+++ b/f\n@@ -1 +1,2 @@\n-a\n\\ No newline at end of file\n+a\n+b\n\\ No newline at end of file\n";
        let f = parse(p, None).unwrap();
        assert_eq!(apply(b"a", &f[0].hunks).unwrap(), b"a\nb");
        assert!(apply(b"a\n", &f[0].hunks).is_err());
    }
}
