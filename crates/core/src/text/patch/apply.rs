//! Applying a file's hunks to its content: each hunk is found at its line or the nearest
//! offset where its context matches, and a hunk that matches nowhere says why.

use std::fmt;

use super::*;

/// Why a hunk does not apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HunkError {
    /// 1-based hunk number within its file.
    pub hunk: usize,
    /// Its `@@ -a,b +c,d @@` header.
    pub header: String,
    /// Why it does not apply, for the caller to fix the patch.
    pub message: String,
}

impl fmt::Display for HunkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "hunk #{} ({}) {}", self.hunk, self.header, self.message)
    }
}

pub(super) fn show_line(l: &[u8]) -> String {
    let s = String::from_utf8_lossy(strip_eol(l)).into_owned();
    if s.chars().count() > 100 {
        format!("{}…", s.chars().take(100).collect::<String>())
    } else {
        s
    }
}

/// Applies `hunks` (in order) to `content`. Exact: see the module documentation.
pub fn apply(content: &[u8], hunks: &[Hunk]) -> Result<Vec<u8>, HunkError> {
    let lines = split_lines(content);
    let mut out = Vec::with_capacity(content.len());
    let mut cursor = 0;
    for (k, h) in hunks.iter().enumerate() {
        let old = h.old_lines();
        let fail = |message: String| HunkError {
            hunk: k + 1,
            header: h.header(),
            message,
        };
        if old.len() != h.old_len {
            return Err(fail(
                "has a line count that does not match its lines".into(),
            ));
        }
        let has_context = h.lines.iter().any(|l| matches!(l, HunkLine::Context(_)));
        let want = if h.old_len == 0 {
            h.old_start
        } else {
            h.old_start.saturating_sub(1)
        };
        let match_begin = has_context && h.old_start <= 1;
        let match_end = has_context && h.trailing_context() == 0 && h.leading_context() > 0;
        let fits = |pos: usize| {
            pos >= cursor
                && pos + old.len() <= lines.len()
                && (!match_begin || pos == 0)
                && (!match_end || pos + old.len() == lines.len())
                && old.iter().zip(&lines[pos..]).all(|(a, b)| a == b)
        };
        let found = if fits(want) {
            Some(want)
        } else if !has_context || match_begin {
            None
        } else {
            let mut found = None;
            let limit = lines.len().max(want);
            for d in 1..=limit {
                if want + d <= lines.len() && fits(want + d) {
                    found = Some(want + d);
                    break;
                }
                if d <= want && want - d >= cursor && fits(want - d) {
                    found = Some(want - d);
                    break;
                }
                if want + d > lines.len() && (d > want || want - d < cursor) {
                    break;
                }
            }
            found
        };
        let Some(pos) = found else {
            return Err(fail(describe_mismatch(&lines, &old, want, cursor)));
        };
        for l in &lines[cursor..pos] {
            out.extend_from_slice(l);
        }
        for l in h.new_lines() {
            out.extend_from_slice(l);
        }
        cursor = pos + old.len();
    }
    for l in &lines[cursor..] {
        out.extend_from_slice(l);
    }
    Ok(out)
}

pub(super) fn describe_mismatch(
    lines: &[&[u8]],
    old: &[&[u8]],
    want: usize,
    cursor: usize,
) -> String {
    if want < cursor {
        return format!(
            "overlaps the previous hunk (it starts at line {}, the previous one ends at line {cursor})",
            want + 1
        );
    }
    for (j, o) in old.iter().enumerate() {
        match lines.get(want + j) {
            None => {
                return format!(
                    "does not apply: it expects line {} `{}` but the file has only {} lines",
                    want + j + 1,
                    show_line(o),
                    lines.len()
                )
            }
            Some(l) if l != o => {
                let eol = strip_eol(l) == strip_eol(o);
                return format!(
                    "does not apply at line {} and its lines match nowhere else: line {} is `{}`, the patch expects `{}`{}",
                    want + 1,
                    want + j + 1,
                    show_line(l),
                    show_line(o),
                    if eol {
                        " (they differ in line ending or final newline)"
                    } else {
                        ""
                    }
                );
            }
            Some(_) => {}
        }
    }
    format!(
        "does not apply at line {}: the lines match there but the hunk must be at the {} of the file",
        want + 1,
        if want == 0 { "end" } else { "start" }
    )
}
