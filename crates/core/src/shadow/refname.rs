//! Session names as git branch names: `refs/heads/<escaped session>`.
//!
//! A session name is any non-empty string; a git ref name is not (`git check-ref-format`: no
//! `..`, no control characters, space, `~ ^ : ? * [ \`, no `@{`, no component that starts with
//! `.` or ends with `.lock`, no trailing `.` or `/`). The escape keeps `A-Z a-z 0-9 - _ .` and
//! writes every other byte as `%XX` (two uppercase hex digits), `%` and `/` included, so the
//! branch is one path component and the mapping is one-to-one. A `.` is escaped too where git
//! would refuse it: at the start, after another `.`, and at the end (which covers `.lock`).
//! Typical names (`default`, `mcp-1700000000-42`, a UUID) are their own branch name.

/// The full ref name of `session`'s branch.
pub(crate) fn branch_ref(session: &str) -> String {
    format!("refs/heads/{}", escape(session))
}

/// `session` as one valid ref-name component (see the module doc).
pub(crate) fn escape(session: &str) -> String {
    let bytes = session.as_bytes();
    let mut out = String::with_capacity(bytes.len());
    for (i, &b) in bytes.iter().enumerate() {
        let keep = match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' => true,
            b'.' => {
                i > 0
                    && bytes[i - 1] != b'.'
                    && i + 1 < bytes.len()
                    && !(i + 5 == bytes.len() && &bytes[i..] == b".lock")
            }
            _ => false,
        };
        if keep {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The session name a branch component stands for; `None` if it is not an escape's output.
#[cfg(test)]
pub(crate) fn unescape(component: &str) -> Option<String> {
    let b = component.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = component.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_are_kept_and_the_rest_escaped_reversibly() {
        for (s, e) in [
            ("default", "default"),
            ("mcp-17-42", "mcp-17-42"),
            ("a.b", "a.b"),
            ("a b/c", "a%20b%2Fc"),
            (".hidden", "%2Ehidden"),
            ("x..y", "x.%2Ey"),
            ("s.lock", "s%2Elock"),
            ("end.", "end%2E"),
            ("@{u}~^:?*[\\%", "%40%7Bu%7D%7E%5E%3A%3F%2A%5B%5C%25"),
            ("é", "%C3%A9"),
        ] {
            assert_eq!(escape(s), e, "{s}");
            assert_eq!(unescape(&escape(s)).as_deref(), Some(s));
        }
    }
}
