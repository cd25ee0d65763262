//! Exact string replacement for `rewind edit`, with errors that help the caller fix its request:
//! a missing match names the nearest lines, an ambiguous one names where each match is.
//!
//! Line endings: when every line of the file ends in CRLF, bare LFs in the old and new text are
//! read as CRLF (agents send LF), so the file keeps its line endings. Nothing outside the match
//! is touched, so a missing or present final newline stays as it was.

/// What an edit asks for.
#[derive(Clone, Debug, Default)]
pub struct EditSpec {
    /// The exact text to replace (not empty; LF read as CRLF in a CRLF file).
    pub old: Vec<u8>,
    /// The text to put in its place (different from `old`).
    pub new: Vec<u8>,
    /// Replace every occurrence (otherwise exactly one must exist).
    pub all: bool,
}

/// Why an edit cannot be made; the message is for the caller (an agent) to act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EditError {
    /// How many times the old text occurs (0: no match, or the request itself is wrong).
    pub matches: usize,
    /// What is wrong and how to fix the request.
    pub message: String,
}

/// Every line ends in CRLF (and there is at least one line break).
pub fn is_crlf(content: &[u8]) -> bool {
    let mut any = false;
    for (i, b) in content.iter().enumerate() {
        if *b == b'\n' {
            if i == 0 || content[i - 1] != b'\r' {
                return false;
            }
            any = true;
        }
    }
    any
}

/// Bare LF → CRLF (existing CRLF stays).
pub fn to_crlf(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + text.len() / 16);
    for (i, b) in text.iter().enumerate() {
        if *b == b'\n' && (i == 0 || text[i - 1] != b'\r') {
            out.push(b'\r');
        }
        out.push(*b);
    }
    out
}

/// Start offsets of the non-overlapping occurrences of `needle`, left to right.
pub fn find_all(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    if needle.is_empty() || needle.len() > hay.len() {
        return out;
    }
    let first = needle[0];
    let mut i = 0;
    while i + needle.len() <= hay.len() {
        match hay[i..=hay.len() - needle.len()]
            .iter()
            .position(|b| *b == first)
        {
            None => break,
            Some(k) => {
                let at = i + k;
                if &hay[at..at + needle.len()] == needle {
                    out.push(at);
                    i = at + needle.len();
                } else {
                    i = at + 1;
                }
            }
        }
    }
    out
}

fn line_of(content: &[u8], offset: usize) -> usize {
    content[..offset].iter().filter(|b| **b == b'\n').count() + 1
}

/// Applies an edit to `content`; returns the new content and the number of replacements.
pub fn apply(content: &[u8], spec: &EditSpec) -> Result<(Vec<u8>, usize), EditError> {
    if spec.old.is_empty() {
        return Err(EditError {
            matches: 0,
            message: "the old text is empty; give the exact text to replace (a whole-file write \
                      replaces a whole file)"
                .into(),
        });
    }
    if spec.old == spec.new {
        return Err(EditError {
            matches: 0,
            message: "the old and new text are the same; nothing to change".into(),
        });
    }
    let (old, new) = if is_crlf(content) {
        (to_crlf(&spec.old), to_crlf(&spec.new))
    } else {
        (spec.old.clone(), spec.new.clone())
    };
    let hits = find_all(content, &old);
    if hits.is_empty() {
        return Err(EditError {
            matches: 0,
            message: no_match_message(content, &old),
        });
    }
    if hits.len() > 1 && !spec.all {
        let lines: Vec<String> = hits
            .iter()
            .take(10)
            .map(|h| line_of(content, *h).to_string())
            .collect();
        let more = if hits.len() > 10 { ", …" } else { "" };
        return Err(EditError {
            matches: hits.len(),
            message: format!(
                "the old text matches {} times (at lines {}{more}); include more surrounding text \
                 to make it unique, or pass --all to replace every occurrence",
                hits.len(),
                lines.join(", ")
            ),
        });
    }
    let mut out = Vec::with_capacity(content.len() + hits.len() * new.len());
    let mut last = 0;
    for h in &hits {
        out.extend_from_slice(&content[last..*h]);
        out.extend_from_slice(&new);
        last = h + old.len();
    }
    out.extend_from_slice(&content[last..]);
    Ok((out, hits.len()))
}

fn trimmed(l: &[u8]) -> &[u8] {
    l.trim_ascii()
}

/// Character-bigram Dice similarity in [0, 1].
fn similarity(a: &[u8], b: &[u8]) -> f64 {
    if a == b {
        return 1.0;
    }
    if a.len() < 2 || b.len() < 2 {
        return 0.0;
    }
    let mut grams: Vec<[u8; 2]> = a.windows(2).map(|w| [w[0], w[1]]).collect();
    grams.sort_unstable();
    let mut hits = 0usize;
    let mut used = vec![false; grams.len()];
    for w in b.windows(2) {
        let g = [w[0], w[1]];
        if let Ok(mut i) = grams.binary_search(&g) {
            while i > 0 && grams[i - 1] == g {
                i -= 1;
            }
            while i < grams.len() && grams[i] == g {
                if !used[i] {
                    used[i] = true;
                    hits += 1;
                    break;
                }
                i += 1;
            }
        }
    }
    2.0 * hits as f64 / (a.len() - 1 + b.len() - 1) as f64
}

fn show(l: &[u8]) -> String {
    let s = String::from_utf8_lossy(l.strip_suffix(b"\r").unwrap_or(l)).into_owned();
    if s.chars().count() > 100 {
        format!("{}…", s.chars().take(100).collect::<String>())
    } else {
        s
    }
}

fn no_match_message(content: &[u8], old: &[u8]) -> String {
    let lines: Vec<&[u8]> = content.split(|b| *b == b'\n').collect();
    let old_lines: Vec<&[u8]> = old
        .split(|b| *b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .collect();
    // Matches when leading/trailing whitespace of every line is ignored: the usual cause.
    let want: Vec<&[u8]> = old_lines.iter().map(|l| trimmed(l)).collect();
    let want = {
        let s = want.iter().position(|l| !l.is_empty()).unwrap_or(0);
        let e = want
            .iter()
            .rposition(|l| !l.is_empty())
            .map_or(0, |e| e + 1);
        &want[s..e.max(s)]
    };
    if !want.is_empty() {
        for start in 0..lines.len() {
            if start + want.len() <= lines.len()
                && want
                    .iter()
                    .zip(&lines[start..])
                    .all(|(w, l)| *w == trimmed(l))
            {
                return format!(
                    "the old text was not found (0 matches); it matches at line {} if whitespace at the \
                     start and end of lines is ignored (check indentation: tabs vs spaces); \
                     copy the exact text from a fresh read",
                    start + 1
                );
            }
        }
    }
    let probe = want.first().copied().unwrap_or_default();
    let mut scored: Vec<(f64, usize)> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| (similarity(probe, trimmed(l)), i))
        .filter(|(s, _)| *s >= 0.4)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.truncate(3);
    if scored.is_empty() {
        return "the old text was not found (0 matches), and no line of the file resembles its first line; \
                read the file again and copy the exact text"
            .into();
    }
    let near: Vec<String> = scored
        .iter()
        .map(|(_, i)| format!("  {}: {}", i + 1, show(lines[*i])))
        .collect();
    format!(
        "the old text was not found (0 matches); the nearest lines to its first line are:\n{}",
        near.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(old: &str, new: &str, all: bool) -> EditSpec {
        EditSpec {
            old: old.into(),
            new: new.into(),
            all,
        }
    }

    #[test]
    fn replaces_unique_and_all() {
        assert_eq!(
            apply(b"a b a", &spec("b", "c", false)).unwrap(),
            (b"a c a".to_vec(), 1)
        );
        let e = apply(b"a b a", &spec("a", "c", false)).unwrap_err();
        assert_eq!(e.matches, 2);
        assert!(e.message.contains("2 times"), "{}", e.message);
        assert_eq!(
            apply(b"a b a", &spec("a", "c", true)).unwrap(),
            (b"c b c".to_vec(), 2)
        );
        assert_eq!(find_all(b"aaaa", b"aa"), vec![0, 2]);
    }

    #[test]
    fn crlf_and_final_newline_kept() {
        let f = b"one\r\ntwo\r\nthree";
        assert_eq!(
            apply(f, &spec("one\ntwo", "1\n2\n2b", false)).unwrap().0,
            b"1\r\n2\r\n2b\r\nthree"
        );
        assert!(!is_crlf(b"a\r\nb\n"));
    }

    #[test]
    fn missing_match_names_nearest_lines() {
        let f = b"fn main() {\n    let x = 1;\n}\n";
        let e = apply(f, &spec("let y = 1;", "z", false)).unwrap_err();
        assert_eq!(e.matches, 0);
        assert!(e.message.contains("2:     let x = 1;"), "{}", e.message);
        let e = apply(f, &spec("fn main() {\n  let x = 1;", "z", false)).unwrap_err();
        assert!(e.message.contains("whitespace"), "{}", e.message);
    }
}
