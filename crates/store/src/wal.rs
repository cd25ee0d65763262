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
use std::time::{Duration, Instant};

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

/// How long the thread waits after the last request ended before it works, when requests say
/// they run ([`WalCheckpointer::busy`]). An agent's requests come in bursts (a tool call, the
/// next a few milliseconds later), and a fold or a checkpoint started between two of them
/// (10-20 ms of a core, and a flush) takes the core that the next one's command and capture
/// want: in a server's 1,000-file epochs, the command then ran in 13-20 ms instead of 10-11.
const QUIET: Duration = Duration::from_millis(20);

/// The longest the thread puts off a look it was asked for while requests keep coming, so
/// that the WAL and the recent rows stay bounded under constant load.
const PUT_OFF_AT_MOST: Duration = Duration::from_millis(500);

/// Past this many frames in the WAL, copied or not, the thread does not wait for a quiet
/// while. Every process's first connection re-reads the whole WAL, so it must stay short, and
/// it starts over only at a commit whose transaction began after a checkpoint had copied all
/// of it. Under requests that follow one another, one checkpoint of 1,500 frames rarely ends
/// before the next request reads; checkpoints right after each request, each copying the few
/// frames the request added, soon do. (200 tool calls of 80 KiB grew the WAL to 27 MB with the
/// thread waiting for a quiet while; the bound is 1.5 times the automatic checkpoint's.)
const PUT_OFF_WAL_FRAMES: i64 = AUTOCHECKPOINT_PAGES * 3 / 2;

/// The longest the thread then waits for the requests under way to end (see `run`).
const GAP_AT_MOST: Duration = Duration::from_millis(500);

#[derive(Default)]
struct State {
    asked: bool,
    stop: bool,
    /// Requests under way ([`RequestUnderWay`]).
    busy: usize,
    /// When the last of them ended.
    idle_since: Option<Instant>,
    /// The thread waits for the requests under way to end (the only wait their end wakes).
    gap_wanted: bool,
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
        // Only a thread waiting for an ask is woken: one already asked is putting it off and
        // looks again by itself. (A wake-up per request cost a 4 KiB write over the socket
        // 0.14 ms: 1.14 against 1.28 ms, side by side.)
        if !st.asked {
            st.asked = true;
            self.shared.wake.notify_one();
        }
    }

    /// Says a request is under way until the guard is dropped: the thread starts no fold or
    /// checkpoint meanwhile, nor until [`QUIET`] after the last one ended (at most
    /// [`PUT_OFF_AT_MOST`] after it was asked).
    pub fn busy(&self) -> RequestUnderWay<'_> {
        let mut st = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        st.busy += 1;
        RequestUnderWay(&self.shared)
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

/// A request under way (see [`WalCheckpointer::busy`]).
pub struct RequestUnderWay<'a>(&'a Shared);

impl Drop for RequestUnderWay<'_> {
    fn drop(&mut self) {
        let mut st = self.0.state.lock().unwrap_or_else(|p| p.into_inner());
        st.busy -= 1;
        st.idle_since = Some(Instant::now());
        if st.busy == 0 && st.gap_wanted {
            self.0.wake.notify_one();
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
            // Put off while requests run, and until they have been quiet for `QUIET`, for
            // `PUT_OFF_AT_MOST` at most or until the WAL is long. Nothing wakes the thread
            // when a request ends: while one runs it looks every `QUIET`.
            let deadline = Instant::now() + PUT_OFF_AT_MOST;
            while !st.stop {
                let now = Instant::now();
                let until = match st.idle_since {
                    _ if st.busy > 0 => (now + QUIET).min(deadline),
                    Some(t) if t + QUIET > now => (t + QUIET).min(deadline),
                    _ => break,
                };
                if now >= until {
                    break;
                }
                // Not under the state's lock: requests take it to start and end.
                drop(st);
                let (frames, _) = wal_frames(conn);
                st = shared.state.lock().unwrap_or_else(|p| p.into_inner());
                if frames > PUT_OFF_WAL_FRAMES {
                    break;
                }
                st = shared
                    .wake
                    .wait_timeout(st, until - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            // Then, if requests still run, wait for them to end (`GAP_AT_MOST` at most): a
            // checkpoint that copies the whole WAL between two requests lets the next commit
            // start the WAL over, and one that copies it in the middle of a request's commits
            // never does (200 tool calls one after another grew the file to 27 MB).
            let gap_deadline = Instant::now() + GAP_AT_MOST;
            while st.busy > 0 && !st.stop {
                let now = Instant::now();
                if now >= gap_deadline {
                    break;
                }
                st.gap_wanted = true;
                st = shared
                    .wake
                    .wait_timeout(st, gap_deadline - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            st.gap_wanted = false;
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
        let (frames, copied) = wal_frames(conn);
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

/// How many frames the WAL holds, and how many of them are already in the database (a
/// checkpoint by another connection, or a commit's own in a process that does not leave its
/// checkpoints here); (0, 0) if SQLite cannot say. NOOP only reads the WAL index: no work.
fn wal_frames(conn: &rusqlite::Connection) -> (i64, i64) {
    conn.query_row("PRAGMA wal_checkpoint(NOOP)", [], |r| {
        Ok((r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
    })
    .unwrap_or((0, 0))
}
