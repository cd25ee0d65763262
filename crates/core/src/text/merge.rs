//! Three-way merge of lines, for undoing one writer's change to a file another writer has
//! changed since (`rewind restore --merge`).
//!
//! Lines keep their terminators (`\n`, `\r\n`, or none at the end of a file), so line endings,
//! a missing final newline and bytes that are not UTF-8 come out exactly as they went in.
//!
//! [`merge`] takes a common ancestor and two descendants. Each descendant's change is the
//! list of hunks a line diff finds against the ancestor. Hunks of the two sides that overlap
//! *or touch* (no unchanged ancestor line between them) are one region: where only one side
//! changed a region, its lines are taken; where both did, the region merges only if both made
//! it the same, else it is a conflict, and the whole merge fails naming every such region. A
//! conflict is never resolved by picking a side: the caller changes nothing.

use std::ops::Range;

use similar::{capture_diff_slices, Algorithm, DiffOp};

/// A region both sides changed differently: its lines in each (1-based, inclusive; `end <
/// start` for none, at the place it would be).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Overlap {
    /// The region in the ancestor.
    pub ancestor: (usize, usize),
    /// The region in the first descendant.
    pub ours: (usize, usize),
    /// The region in the second descendant.
    pub theirs: (usize, usize),
}

/// Why two changes could not be merged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MergeError {
    /// One of the three is not text (it holds a NUL byte).
    Binary,
    /// Both changed these regions differently.
    Overlaps(Vec<Overlap>),
}

/// The lines of `text`, each with its terminator.
pub fn lines(text: &[u8]) -> Vec<&[u8]> {
    text.split_inclusive(|b| *b == b'\n').collect()
}

/// One changed region of a descendant: ancestor lines `base` became its lines `other`.
#[derive(Clone, Debug)]
struct Hunk {
    base: Range<usize>,
    other: Range<usize>,
}

fn hunks(base: &[&[u8]], other: &[&[u8]]) -> Vec<Hunk> {
    let mut out: Vec<Hunk> = Vec::new();
    for op in capture_diff_slices(Algorithm::Myers, base, other) {
        let (b, o) = match op {
            DiffOp::Equal { .. } => continue,
            DiffOp::Delete {
                old_index,
                old_len,
                new_index,
            } => (old_index..old_index + old_len, new_index..new_index),
            DiffOp::Insert {
                old_index,
                new_index,
                new_len,
            } => (old_index..old_index, new_index..new_index + new_len),
            DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => (
                old_index..old_index + old_len,
                new_index..new_index + new_len,
            ),
        };
        // Adjacent operations (a delete then an insert) are one hunk.
        match out.last_mut() {
            Some(h) if h.base.end == b.start && h.other.end == o.start => {
                h.base.end = b.end;
                h.other.end = o.end;
            }
            _ => out.push(Hunk { base: b, other: o }),
        }
    }
    out
}

/// Merges the changes `ancestor` → `ours` and `ancestor` → `theirs` (see the module header).
pub fn merge(ancestor: &[u8], ours: &[u8], theirs: &[u8]) -> Result<Vec<u8>, MergeError> {
    if [ancestor, ours, theirs].iter().any(|t| t.contains(&0)) {
        return Err(MergeError::Binary);
    }
    let (base, a, b) = (lines(ancestor), lines(ours), lines(theirs));
    let (ha, hb) = (hunks(&base, &a), hunks(&base, &b));
    // Every hunk, by where it starts in the ancestor; `true` for ours.
    let mut all: Vec<(bool, &Hunk)> = ha
        .iter()
        .map(|h| (true, h))
        .chain(hb.iter().map(|h| (false, h)))
        .collect();
    all.sort_by_key(|(_, h)| (h.base.start, h.base.end));
    let mut out: Vec<u8> = Vec::with_capacity(theirs.len());
    let mut overlaps = Vec::new();
    // Ancestor lines copied so far, and how far each side is ahead of the ancestor.
    let (mut pos, mut shift_a, mut shift_b) = (0usize, 0isize, 0isize);
    let mut i = 0;
    while i < all.len() {
        // A region: hunks that overlap or touch, from either side.
        let (start, mut end) = (all[i].1.base.start, all[i].1.base.end);
        let mut j = i + 1;
        while j < all.len() && all[j].1.base.start <= end {
            end = end.max(all[j].1.base.end);
            j += 1;
        }
        let region = &all[i..j];
        for l in &base[pos..start] {
            out.extend_from_slice(l);
        }
        let side = |ours: bool, text: &[&[u8]]| -> Vec<u8> {
            let mut v = Vec::new();
            let mut p = start;
            for (_, h) in region.iter().filter(|(o, _)| *o == ours) {
                for l in &base[p..h.base.start] {
                    v.extend_from_slice(l);
                }
                for l in &text[h.other.clone()] {
                    v.extend_from_slice(l);
                }
                p = h.base.end;
            }
            for l in &base[p..end] {
                v.extend_from_slice(l);
            }
            v
        };
        let (in_a, in_b) = (
            region.iter().any(|(o, _)| *o),
            region.iter().any(|(o, _)| !*o),
        );
        let (va, vb) = (side(true, &a), side(false, &b));
        let count = |v: &[u8]| lines(v).len() as isize;
        let (len_a, len_b) = (count(&va), count(&vb));
        match (in_a, in_b) {
            (true, false) => out.extend_from_slice(&va),
            (false, true) => out.extend_from_slice(&vb),
            _ if va == vb => out.extend_from_slice(&va),
            _ => {
                let at = |shift: isize, len: isize| {
                    let s = (start as isize + shift) as usize + 1;
                    (s, (s as isize + len - 1) as usize)
                };
                overlaps.push(Overlap {
                    ancestor: (start + 1, end),
                    ours: at(shift_a, len_a),
                    theirs: at(shift_b, len_b),
                });
            }
        }
        let base_len = (end - start) as isize;
        shift_a += len_a - base_len;
        shift_b += len_b - base_len;
        pos = end;
        i = j;
    }
    if !overlaps.is_empty() {
        return Err(MergeError::Overlaps(overlaps));
    }
    for l in &base[pos..] {
        out.extend_from_slice(l);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(a: &str, o: &str, t: &str) -> Result<String, MergeError> {
        merge(a.as_bytes(), o.as_bytes(), t.as_bytes()).map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn disjoint_changes_merge_and_touching_ones_conflict() {
        let base = "1\n2\n3\n4\n5\n6\n";
        assert_eq!(
            m(base, "1\nX\n3\n4\n5\n6\n", "1\n2\n3\n4\nY\n6\n").unwrap(),
            "1\nX\n3\n4\nY\n6\n"
        );
        assert_eq!(m(base, base, base).unwrap(), base);
        assert_eq!(
            m(base, "1\nX\n3\n4\n5\n6\n", "1\nX\n3\n4\n5\n6\n").unwrap(),
            "1\nX\n3\n4\n5\n6\n"
        );
        // Lines 2 and 3 touch: a conflict, with the regions named.
        let e = m(base, "1\nX\n3\n4\n5\n6\n", "1\n2\nY\n4\n5\n6\n").unwrap_err();
        assert_eq!(
            e,
            MergeError::Overlaps(vec![Overlap {
                ancestor: (2, 3),
                ours: (2, 3),
                theirs: (2, 3)
            }])
        );
        assert_eq!(m("a\0", "b", "c"), Err(MergeError::Binary));
    }

    #[test]
    fn line_endings_and_a_missing_final_newline_are_kept() {
        let base = "a\r\nb\r\nc\r\nd";
        assert_eq!(
            m(base, "A\r\nb\r\nc\r\nd", "a\r\nb\r\nc\r\nD").unwrap(),
            "A\r\nb\r\nc\r\nD"
        );
        let raw = b"\xff\n2\n3\n\xfe";
        let out = merge(raw, b"\xff\n2\n3\nZ", b"Y\n2\n3\n\xfe").unwrap();
        assert_eq!(out, b"Y\n2\n3\nZ");
    }
}
