//! WAL checkpoints on a thread of their own, for a process that keeps running.
//!
//! Why: SQLite copies the WAL back into the database (a checkpoint: write the pages, flush the
//! database) inside the commit that takes the WAL past `wal_autocheckpoint` pages. In
//! `rewind serve` that was the commit of every other capture of 1,000 changed files: the
//! store's commit took 17 ms instead of 6, before the client got its answer. A server's stores
//! turn the automatic checkpoint off ([`crate::Store::leave_checkpoints_to`]) and the server
//! asks this thread to look after each request ([`WalCheckpointer::nudge`]); it checkpoints,
//! on a connection of its own, once the WAL holds more than that many pages.
//!
//! Safety is SQLite's: a checkpoint by any connection of the database is as good as one by the
//! committing connection, and a `PASSIVE` one never blocks a writer or a reader. What changes
//! is only when the copy happens. Short-lived processes keep the automatic checkpoint (and the
//! restart at exit, see `Index`'s drop).
//!
//! The same thread folds the index's recent rows into its main table once there are more than
//! [`FOLD_IN_BACKGROUND_AT`] of them (see `index::FOLD_AT`), so that a server's commits
//! neither grow that table to its bound nor pay for the fold. A fold is one transaction, as
//! safe on this connection as on any other. It counts them only when the stores that leave
//! their checkpoints here have added that many since the last fold: a look per request cost
//! a 4 KiB write over the socket about a tenth of its time. (Rows other processes add are not
//! counted; their commits fold at the table's bound.)

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crate::index::{fold_if_over, open_database, AUTOCHECKPOINT_PAGES, FOLD_IN_BACKGROUND_AT};
use crate::Result;

/// Checkpoints one database's WAL on its own thread when asked. Dropping it stops the thread.
pub struct WalCheckpointer {
    db: PathBuf,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    /// Rows the stores that leave their checkpoints here added to the index's recent rows,
    /// less those folded since (see `Index::recent_added`).
    recent_added: Arc<AtomicUsize>,
}

#[derive(Default)]
struct State {
    asked: bool,
    stop: bool,
    /// Checkpoints that copied every frame of the WAL, some of them first.
    completed: u64,
    /// Folds of the index's recent rows that moved some.
    folds: u64,
}

impl WalCheckpointer {
    /// Starts the thread, with a connection of its own to the database at `db`.
    pub(crate) fn start(db: &Path) -> Result<WalCheckpointer> {
        let conn = open_database(db)?;
        let shared = Arc::new(Shared::default());
        let theirs = shared.clone();
        let thread = std::thread::Builder::new()
            .name("rewind-wal".into())
            .spawn(move || run(&conn, &theirs))
            .map_err(|e| crate::Error::Io {
                op: "start the WAL checkpoint thread",
                path: db.to_owned(),
                source: e,
            })?;
        Ok(WalCheckpointer {
            db: db.to_owned(),
            shared,
            thread: Some(thread),
        })
    }

    /// The database it checkpoints.
    pub(crate) fn db(&self) -> &Path {
        &self.db
    }

    /// Where a store that leaves its checkpoints here counts the recent rows it adds.
    pub(crate) fn recent_added(&self) -> Arc<AtomicUsize> {
        self.shared.recent_added.clone()
    }

    /// Asks for a look at the WAL: a checkpoint if it holds more than the automatic
    /// checkpoint's bound. Returns at once; asks made while one runs make one more look.
    pub fn nudge(&self) {
        let mut st = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        st.asked = true;
        self.shared.wake.notify_one();
    }

    /// How many checkpoints so far copied the whole WAL, some of it not yet copied by anyone
    /// (for tests and traces).
    pub fn completed(&self) -> u64 {
        self.shared
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .completed
    }

    /// How many folds of the index's recent rows moved some (for tests and traces).
    pub fn folds(&self) -> u64 {
        self.shared
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .folds
    }
}

impl Drop for WalCheckpointer {
    fn drop(&mut self) {
        {
            let mut st = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
            st.stop = true;
            self.shared.wake.notify_one();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(conn: &rusqlite::Connection, shared: &Shared) {
    loop {
        {
            let mut st = shared.state.lock().unwrap_or_else(|p| p.into_inner());
            while !st.asked && !st.stop {
                st = shared.wake.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            if st.stop {
                return;
            }
            st.asked = false;
        }
        // A failure (another process holding the write lock past the busy timeout) is retried
        // at the next nudge; commits fold themselves at the table's bound meanwhile.
        let added = shared.recent_added.load(Ordering::Relaxed);
        if added > FOLD_IN_BACKGROUND_AT {
            if let Ok(moved) = fold_if_over(conn, FOLD_IN_BACKGROUND_AT) {
                // Less what was counted when the look began: rows added since are still to
                // fold.
                shared.recent_added.fetch_sub(added, Ordering::Relaxed);
                if moved > 0 {
                    let mut st = shared.state.lock().unwrap_or_else(|p| p.into_inner());
                    st.folds += 1;
                }
            }
        }
        // NOOP only reads the WAL index: how many frames the log holds, and how many of them
        // are already in the database (a checkpoint by another connection, or a commit's own
        // in a process that does not leave its checkpoints here). Nothing to copy: no work.
        let (frames, copied) = conn
            .query_row("PRAGMA wal_checkpoint(NOOP)", [], |r| {
                Ok((r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
            })
            .unwrap_or((0, 0));
        if frames <= AUTOCHECKPOINT_PAGES || copied >= frames {
            continue;
        }
        // PASSIVE: copies what no reader still needs, waits for nothing. A failure (the
        // database busy being checkpointed by another process) is retried at the next nudge.
        let done = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ))
        });
        if matches!(done, Ok((0, log, copied)) if log == copied) {
            let mut st = shared.state.lock().unwrap_or_else(|p| p.into_inner());
            st.completed += 1;
        }
    }
}
