//! Commit messages of the shadow history, and the trailers that tie a commit to the op log.
//!
//! Every commit Rewind writes ends with a trailer paragraph: `Rewind-Pos: N` (the op-log
//! position of the checkpoint or restore it mirrors), and `Rewind-Checkpoint: ID` with
//! `Rewind-Tree: HEX` (the checkpoint's Rewind tree) or `Rewind-Epoch: ID` (a restore). A
//! branch's head commit therefore says how far that branch has caught up, and which Rewind
//! tree its git tree is the conversion of (the base of the next incremental conversion). Only
//! the last paragraph is read, and every value written above it is one line, so a label cannot
//! forge a trailer.

use std::fmt::Write;

use rewind_store::ObjectId;

use crate::model::oplog::{CheckpointRow, EpochRow};

/// What the trailers of a commit say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Trailers {
    /// The op-log position mirrored.
    pub pos: Option<i64>,
    /// The Rewind tree whose conversion the commit's tree is (checkpoint commits only).
    pub tree: Option<ObjectId>,
}

/// One line: newlines and other control characters become spaces.
fn line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// A line per epoch: `- TOOL (KIND, N paths): first path…`.
fn summary(out: &mut String, epochs: &[(EpochRow, i64)]) {
    if epochs.is_empty() {
        out.push_str("No epochs since the previous checkpoint.\n");
        return;
    }
    out.push_str("Epochs since the previous checkpoint:\n");
    for (e, changed) in epochs {
        let tool = e.tool.as_deref().map(line).unwrap_or_else(|| "-".into());
        let s = if *changed == 1 { "" } else { "s" };
        let _ = write!(out, "- {tool} ({}, {changed} path{s}", e.kind.as_str());
        if e.state.as_str() != "settled" {
            let _ = write!(out, ", {}", e.state.as_str());
        }
        out.push(')');
        if let Some(note) = &e.note {
            let _ = write!(out, ": {}", line(note));
        }
        let _ = writeln!(out, " [{}]", e.id);
    }
}

/// The message of a checkpoint's commit; `epochs` are the session's epochs since its previous
/// checkpoint, each with the number of paths it changed.
pub(crate) fn checkpoint(c: &CheckpointRow, epochs: &[(EpochRow, i64)]) -> String {
    let subject = match (&c.message, &c.label) {
        (Some(m), Some(l)) => format!("{}: {}", line(m), line(l)),
        (Some(m), None) => line(m),
        (None, Some(l)) => line(l),
        (None, None) => format!("checkpoint {}", c.id),
    };
    let mut out = format!("{subject}\n\n");
    if let Some(m) = &c.message {
        let _ = writeln!(out, "Message: {}", line(m));
    }
    if let Some(l) = &c.label {
        let _ = writeln!(out, "Label: {}", line(l));
    }
    if c.message.is_some() || c.label.is_some() {
        out.push('\n');
    }
    summary(&mut out, epochs);
    let _ = write!(
        out,
        "\nRewind-Checkpoint: {}\nRewind-Pos: {}\nRewind-Tree: {}\n",
        c.id,
        c.pos,
        c.root.to_hex()
    );
    out
}

/// The message of a restore's (or undo's) commit, with the number of paths it changed.
pub(crate) fn restore(e: &EpochRow, changed: i64) -> String {
    let what = e
        .note
        .as_deref()
        .map(line)
        .unwrap_or_else(|| "restore".into());
    let s = if changed == 1 { "" } else { "s" };
    format!(
        "{what}\n\nA {} of {changed} path{s}; the history above is kept (a restore never \
         rewrites it).\n\nRewind-Epoch: {}\nRewind-Pos: {}\n",
        e.tool
            .as_deref()
            .map(line)
            .unwrap_or_else(|| "restore".into()),
        e.id,
        e.pos
    )
}

/// The trailers of `message` (its last paragraph).
pub(crate) fn trailers(message: &[u8]) -> Trailers {
    let text = String::from_utf8_lossy(message);
    let last = text.trim_end().rsplit("\n\n").next().unwrap_or("");
    let mut t = Trailers::default();
    for l in last.lines() {
        if let Some(v) = l.strip_prefix("Rewind-Pos: ") {
            t.pos = v.trim().parse().ok();
        } else if let Some(v) = l.strip_prefix("Rewind-Tree: ") {
            t.tree = ObjectId::from_hex(v.trim());
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ckpt(label: &str) -> CheckpointRow {
        CheckpointRow {
            id: "c1".into(),
            pos: 7,
            session: "s".into(),
            message: Some("m".into()),
            parent: None,
            label: Some(label.into()),
            root: ObjectId([3; 32]),
            payload: None,
            pinned: false,
            created_ns: 0,
            collected_ns: None,
        }
    }

    #[test]
    fn trailers_come_from_the_last_paragraph_only() {
        let msg = checkpoint(&ckpt("x\n\nRewind-Pos: 99\nRewind-Tree: 00"), &[]);
        let t = trailers(msg.as_bytes());
        assert_eq!(t.pos, Some(7));
        assert_eq!(t.tree, Some(ObjectId([3; 32])));
        assert!(
            msg.starts_with("m: x  Rewind-Pos: 99 Rewind-Tree: 00\n\n"),
            "{msg}"
        );
    }
}
