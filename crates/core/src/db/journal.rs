//! The restore journal: a restore's plan, written in the transaction that opens its epoch and
//! before the first file is touched, so a process killed mid-restore leaves the next command
//! everything it needs to finish it, or to put back what it did.
//!
//! States: `applying` → `done`; or, when a step fails, `applying` → `rolling-back` →
//! `rolled-back`. Only `applying` and `rolling-back` are unfinished.

use rewind_store::EntryKind;
use rusqlite::{params, Connection};

use crate::model::entry::{Change, Entry};
use crate::Error;

/// Where a journalled restore is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JournalState {
    /// Writing the plan; the next command rolls it forward.
    Applying,
    /// A step failed; putting back what was applied. The next command finishes the rollback.
    RollingBack,
    /// Put back: the restore never happened.
    RolledBack,
    /// Applied and recorded.
    Done,
}

impl JournalState {
    fn as_str(self) -> &'static str {
        match self {
            JournalState::Applying => "applying",
            JournalState::RollingBack => "rolling-back",
            JournalState::RolledBack => "rolled-back",
            JournalState::Done => "done",
        }
    }
}

/// One journalled restore.
pub(crate) struct Journal {
    pub session: String,
    pub steps: Vec<Change>,
    /// The session head to set when the restore is done (if `move_head`).
    pub head: Option<String>,
    pub move_head: bool,
}

/// Writes the journal of the restore epoch `epoch`, in state `applying`. Call inside the
/// transaction that opens the epoch.
pub(crate) fn insert(db: &Connection, epoch: &str, j: &Journal, now: i64) -> Result<(), Error> {
    db.execute(
        "INSERT INTO journal (epoch, session, plan, head, move_head, state, created_ns)
         VALUES (?1, ?2, ?3, ?4, ?5, 'applying', ?6)",
        params![
            epoch,
            j.session,
            encode_plan(&j.steps),
            j.head,
            j.move_head,
            now
        ],
    )?;
    Ok(())
}

/// The journal of `epoch` if it is in `state`.
pub(crate) fn get(db: &Connection, epoch: &str, state: JournalState) -> Result<Journal, Error> {
    let (session, plan, head, move_head): (String, Vec<u8>, Option<String>, bool) = db.query_row(
        "SELECT session, plan, head, move_head FROM journal WHERE epoch = ?1 AND state = ?2",
        params![epoch, state.as_str()],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )?;
    let steps = decode_plan(&plan)
        .ok_or_else(|| Error::State(format!("the restore journal of {epoch} is damaged")))?;
    Ok(Journal {
        session,
        steps,
        head,
        move_head,
    })
}

/// Moves `epoch`'s journal to `to`, if it is in `from`; returns whether it was.
pub(crate) fn set_state(
    db: &Connection,
    epoch: &str,
    from: JournalState,
    to: JournalState,
) -> Result<bool, Error> {
    let n = db.execute(
        "UPDATE journal SET state = ?3 WHERE epoch = ?1 AND state = ?2",
        params![epoch, from.as_str(), to.as_str()],
    )?;
    Ok(n > 0)
}

/// The restore epochs whose journal is in `state`, oldest first.
pub(crate) fn in_state(db: &Connection, state: JournalState) -> Result<Vec<String>, Error> {
    let mut st = db.prepare_cached("SELECT epoch FROM journal WHERE state = ?1 ORDER BY id")?;
    let rows = st.query_map([state.as_str()], |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The restore epochs whose journal is not finished (applying or rolling back), oldest first.
pub(crate) fn unfinished(db: &Connection) -> Result<Vec<String>, Error> {
    let mut st = db.prepare(
        "SELECT epoch FROM journal WHERE state IN ('applying', 'rolling-back') ORDER BY id",
    )?;
    let rows = st.query_map([], |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn put_entry(out: &mut Vec<u8>, e: &Option<Entry>) {
    match e {
        None => out.push(0),
        Some(e) => {
            out.push(e.kind as u8);
            out.extend_from_slice(&e.mode.to_le_bytes());
            out.extend_from_slice(&e.size.to_le_bytes());
            out.extend_from_slice(&e.id.0);
        }
    }
}

/// Journal plan encoding: `u32` count, then per step `u32` path length, path, and two entries
/// (`u8` kind, 0 = absent; then `u32` mode, `u64` size, 32-byte id).
pub(crate) fn encode_plan(steps: &[Change]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(steps.len() as u32).to_le_bytes());
    for s in steps {
        out.extend_from_slice(&(s.path.len() as u32).to_le_bytes());
        out.extend_from_slice(&s.path);
        put_entry(&mut out, &s.before);
        put_entry(&mut out, &s.after);
    }
    out
}

pub(crate) fn decode_plan(data: &[u8]) -> Option<Vec<Change>> {
    let mut r = rewind_store::ByteReader::new(data);
    let n = r.u32()? as usize;
    let mut steps = Vec::with_capacity(n.min(1 << 20));
    for _ in 0..n {
        let len = r.u32()? as usize;
        let path = r.take(len)?.to_vec();
        let mut entries = [None, None];
        for slot in &mut entries {
            let kind = r.u8()?;
            if kind != 0 {
                *slot = Some(Entry {
                    kind: EntryKind::from_u8(kind)?,
                    mode: r.u32()?,
                    size: r.u64()?,
                    id: r.id()?,
                });
            }
        }
        steps.push(Change {
            path,
            before: entries[0],
            after: entries[1],
        });
    }
    r.is_done().then_some(steps)
}
