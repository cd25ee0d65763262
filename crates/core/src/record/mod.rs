//! Recording: epochs (exact, opaque, external) and checkpoints, attributed per writer.
//!
//! The rule that keeps attribution honest: before anything is recorded for a session, whatever
//! is on disk that differs from the *last known state* (the newest op-log change to the path,
//! else the stat cache, else the newest whole-tree snapshot) was made by someone else and is
//! recorded first as an `external` epoch. So the user's edits are never attributed to the agent,
//! and they are protected like any other change.

mod checkpoint;
mod epoch;
mod found;
mod process;

pub use checkpoint::payload_too_large;
pub(crate) use epoch::changed;
pub use process::{owner_alive, this_process};

use crate::capture::state::StateStamp;
use crate::capture::Capture;
use crate::db::oplog::{self, EpochRow};
use crate::model::entry::{Change, Entry};

use crate::fs::probe::{disk_entry_known, existed_before, subtree, tree_lookup, uncaptured_like};
use crate::model::entry::same;

/// What to open.
#[derive(Clone, Debug, Default)]
pub struct EpochSpec {
    /// The tool that is about to write, as the caller names it (`edit`, `exec`, …).
    pub tool: Option<String>,
    /// The agent's id for the tool call, if it has one.
    pub tool_call: Option<String>,
    /// Declared paths: an exact epoch. Empty: an opaque epoch.
    pub paths: Vec<Vec<u8>>,
    /// False: owned by the session (open across commands). True: owned by this process, or by
    /// `owner_pid`.
    pub process_owned: bool,
    /// With `process_owned`: the process that owns it when that is not this one (a server's
    /// client that runs the command itself): settled by recovery once that process is gone.
    pub owner_pid: Option<u32>,
    /// Free text shown by `log`/`show` (e.g. the command line of `exec`).
    pub note: Option<String>,
}

/// A settled epoch with its changes.
#[derive(Clone, Debug)]
pub struct Settled {
    /// The epoch as stored after settling.
    pub epoch: EpochRow,
    /// What it changed, sorted by path (as stored).
    pub changes: Vec<Change>,
}

/// What a whole-tree capture found, attributed.
pub(crate) struct Found {
    pub capture: Capture,
    /// Paths whose disk state differs from the last known state.
    pub changes: Vec<Change>,
    /// The state file the capture started from, if it is still the one on disk.
    pub stamp: Option<StateStamp>,
    /// The cache the capture started from is newer than that file (a server's, kept unsaved).
    pub unsaved: bool,
}

/// The last known state of `rel`, `None` inside meaning absent, outer `None` meaning never seen
/// (no capture yet).
fn row_state(r: &oplog::ChangeRow) -> Option<Entry> {
    if r.pending {
        r.change.before
    } else {
        r.change.after
    }
}

#[cfg(test)]
mod tests {
    use crate::{EpochSpec, OpenOptions, Workspace};

    /// A workspace in `t` with a file `a` in it.
    fn workspace(t: &tempfile::TempDir) -> (std::path::PathBuf, Workspace) {
        let (root, home) = (t.path().join("ws"), t.path().join("home"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("a"), b"1").unwrap();
        let opts = OpenOptions {
            force: false,
            home: Some(home),
        };
        let ws = Workspace::open(&root, &opts).unwrap();
        (root, ws)
    }

    fn synchronous(ws: &Workspace) -> i64 {
        ws.db()
            .query_row("PRAGMA synchronous", [], |r| r.get(0))
            .unwrap()
    }

    /// What a settle returns is what it stored: the epoch's row and its changes.
    fn answers_what_it_stored(ws: &Workspace, settled: &super::Settled) {
        let id = &settled.epoch.id;
        assert_eq!(
            Some(settled.epoch.clone()),
            crate::db::oplog::epoch(&ws.db(), id).unwrap()
        );
        let stored: Vec<_> = crate::db::oplog::epoch_changes(&ws.db(), id)
            .unwrap()
            .into_iter()
            .map(|r| r.change)
            .collect();
        assert_eq!(settled.changes, stored);
    }

    #[test]
    fn an_exact_settle_is_relaxed_and_leaves_full_durability_behind() {
        let t = tempfile::tempdir().unwrap();
        let (root, ws) = workspace(&t);
        ws.snapshot("init", None).unwrap();
        assert_eq!(synchronous(&ws), 2, "FULL by default");
        let spec = EpochSpec {
            tool: Some("write".into()),
            tool_call: None,
            paths: vec![b"a".to_vec()],
            process_owned: false,
            owner_pid: None,
            note: None,
        };
        let e = ws.begin_epoch("s", &spec).unwrap();
        std::fs::write(root.join("a"), b"2").unwrap();
        let settled = ws.end_epoch("s", Some(&e.id), false).unwrap();
        assert_eq!(settled.changes.len(), 1);
        answers_what_it_stored(&ws, &settled);
        assert_eq!(synchronous(&ws), 2, "the settle puts FULL back");
        let inner = ws
            .relaxed(|| {
                ws.relaxed(|| Ok(synchronous(&ws)))
                    .map(|i| (i, synchronous(&ws)))
            })
            .unwrap();
        assert_eq!(
            inner,
            (1, 1),
            "a nested relaxed call keeps the outer's NORMAL"
        );
        assert_eq!(synchronous(&ws), 2);
    }

    /// An opaque epoch's captures store what changed with an unflushed commit, which the
    /// durable commit of the epoch's row right after makes durable; that one is FULL.
    #[test]
    fn an_opaque_epochs_captures_commit_unflushed_before_its_durable_record() {
        let t = tempfile::tempdir().unwrap();
        let (root, ws) = workspace(&t);
        ws.snapshot("init", None).unwrap();
        let during = ws
            .capture_before_record(|| {
                assert_eq!(synchronous(&ws), 1, "the capture's commit is NORMAL");
                ws.capture_found(None)
            })
            .map(|_| synchronous(&ws))
            .unwrap();
        assert_eq!(during, 2, "FULL again for the record");
        let spec = EpochSpec {
            tool: Some("exec".into()),
            tool_call: None,
            paths: Vec::new(),
            process_owned: false,
            owner_pid: None,
            note: None,
        };
        let e = ws.begin_epoch("s", &spec).unwrap();
        std::fs::write(root.join("a"), b"2").unwrap();
        std::fs::write(root.join("b"), b"new").unwrap();
        let settled = ws.end_epoch("s", Some(&e.id), false).unwrap();
        assert_eq!(settled.changes.len(), 2);
        assert_eq!(synchronous(&ws), 2);
        answers_what_it_stored(&ws, &settled);
    }

    /// The query plan of `sql` on the workspace's database, one line per step.
    fn plan(ws: &Workspace, sql: &str) -> String {
        let db = ws.db();
        let mut st = db.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        for i in 1..=st.parameter_count() {
            st.raw_bind_parameter(i, "ab").unwrap();
        }
        let mut rows = st.raw_query();
        let mut steps = Vec::new();
        while let Some(r) = rows.next().unwrap() {
            steps.push(r.get::<_, String>(3).unwrap());
        }
        steps.join("\n")
    }

    /// Every epoch begin and end lists the open epochs and `epoch end ID` resolves ids: neither
    /// may read the whole history, or each tool call gets slower as a session grows (with 33k
    /// epochs they took 5-7 ms each).
    #[test]
    fn per_call_queries_do_not_scan_the_history() {
        let t = tempfile::tempdir().unwrap();
        let (_, ws) = workspace(&t);
        // With rows the planner has something to choose from.
        ws.snapshot("init", None).unwrap();
        let open = plan(&ws, &crate::db::oplog::open_epochs_sql());
        assert!(open.contains("epochs_open"), "{open}");
        let ids = plan(&ws, crate::db::oplog::IDS_WITH_PREFIX);
        assert!(!ids.contains("SCAN"), "{ids}");
        // `rewind log` of one session: found through the session's index, not by reading the
        // whole history newest first and filtering (as a session with few epochs did).
        let p = plan(&ws, &crate::db::oplog::epochs_sql(true));
        assert!(
            p.contains("SEARCH epochs USING INDEX epochs_by_session"),
            "{p}"
        );
        let p = plan(&ws, &crate::db::oplog::checkpoints_sql(true));
        assert!(
            p.contains("SEARCH checkpoints USING INDEX checkpoints_by_message"),
            "{p}"
        );
        // Both still find what they should (an id prefix in any case).
        let e = ws
            .begin_epoch(
                "s",
                &EpochSpec {
                    tool: None,
                    tool_call: None,
                    paths: vec![b"x".to_vec()],
                    process_owned: false,
                    owner_pid: None,
                    note: None,
                },
            )
            .unwrap();
        let found = crate::db::oplog::ids_with_prefix(&ws.db(), &e.id[..6].to_uppercase()).unwrap();
        assert_eq!(found, vec![(e.id.clone(), true)]);
        assert_eq!(crate::db::oplog::open_epochs(&ws.db()).unwrap().len(), 1);
    }
}
