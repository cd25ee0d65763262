//! WAL checkpoints on a thread of their own (`Store::start_wal_checkpointer`): a store that
//! leaves its checkpoints to that thread never copies the WAL in its own commits, the thread
//! copies it when nudged, and the WAL file stays bounded as commits go on. Read through a
//! connection of the test's own, as another process would see the database.

use std::time::{Duration, Instant};

use crate::common;

use common::{random, TestStore};
use rewind_store::{Store, StoreConfig, WalCheckpointer};

/// A store whose writers keep up to 8 MiB in the index itself: one commit of 6 MiB of
/// random blobs writes about 1,500 WAL pages, past the automatic checkpoint's 1,000.
fn store() -> TestStore {
    TestStore::with_config(StoreConfig {
        inline_limit: 8 << 20,
        ..StoreConfig::default()
    })
}

fn commit_big(store: &Store, seed: u64) {
    let w = store.writer().unwrap();
    for i in 0..6 {
        w.put_blob(&random(seed * 100 + i, 1 << 20)).unwrap();
    }
    w.commit().unwrap();
}

/// (frames in the WAL, frames of it copied into the database).
fn wal(t: &TestStore) -> (i64, i64) {
    let db = rusqlite::Connection::open(t.dir.path().join("meta.sqlite")).unwrap();
    db.query_row("PRAGMA wal_checkpoint(NOOP)", [], |r| {
        Ok((r.get(1)?, r.get(2)?))
    })
    .unwrap()
}

/// Waits until the thread has completed `completed` checkpoints (30 s at most).
fn wait_for(c: &WalCheckpointer, completed: u64) {
    wait_until("no checkpoint", || c.completed() >= completed);
}

/// Waits until the thread has folded the recent rows `folds` times (30 s at most).
fn wait_for_folds(c: &WalCheckpointer, folds: u64) {
    wait_until("no fold", || c.folds() >= folds);
}

fn wait_until(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(30), "{what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn a_commit_past_the_bound_checkpoints_itself_without_the_thread() {
    let t = store();
    commit_big(&t.store, 1);
    let (log, copied) = wal(&t);
    assert!(log > 1000, "{log} frames");
    assert_eq!(
        copied, log,
        "the automatic checkpoint copied the WAL in the commit"
    );
}

#[test]
fn a_store_that_leaves_checkpoints_to_the_thread_does_not_copy_in_its_commits() {
    let t = store();
    let c = t.store.start_wal_checkpointer().unwrap();
    t.store.leave_checkpoints_to(&c).unwrap();
    commit_big(&t.store, 1);
    let (log, copied) = wal(&t);
    assert!(log > 1000, "{log} frames");
    assert_eq!(copied, 0, "nothing copied before the thread is asked");
    c.nudge();
    wait_for(&c, 1);
    let (log_after, copied) = wal(&t);
    assert_eq!(
        (log_after, copied),
        (log, log),
        "the thread copied all of it"
    );
    assert_eq!(
        t.store
            .read_blob(&rewind_store::ObjectId::compute(
                rewind_store::ObjectKind::Blob,
                &random(100, 1 << 20)
            ))
            .unwrap(),
        random(100, 1 << 20)
    );
}

#[test]
fn a_checkpointer_of_another_database_changes_nothing() {
    let t = store();
    let other = store();
    let c = other.store.start_wal_checkpointer().unwrap();
    t.store.leave_checkpoints_to(&c).unwrap();
    commit_big(&t.store, 1);
    let (log, copied) = wal(&t);
    assert_eq!(copied, log, "still checkpointed in the commit");
}

#[test]
fn the_wal_stays_bounded_while_commits_go_on() {
    let t = store();
    let c = t.store.start_wal_checkpointer().unwrap();
    t.store.leave_checkpoints_to(&c).unwrap();
    let wal_file = t.dir.path().join("meta.sqlite-wal");
    commit_big(&t.store, 0);
    let one = std::fs::metadata(&wal_file).unwrap().len();
    c.nudge();
    wait_for(&c, 1);
    for round in 1..8 {
        commit_big(&t.store, round);
        c.nudge();
        wait_for(&c, round + 1);
    }
    let size = std::fs::metadata(&wal_file).unwrap().len();
    assert!(
        size <= 2 * one,
        "the WAL is {size} bytes after 8 commits of {one}: it is not started over"
    );
}

/// A long WAL is checkpointed without waiting for a quiet while, but still between
/// requests: while a request says it runs (`busy`), a nudge starts no checkpoint; once the
/// request ends, the checkpoint follows; a request that never ends puts it off only half a
/// second.
#[test]
fn a_checkpoint_waits_for_the_request_under_way_but_not_forever() {
    let t = store();
    let c = t.store.start_wal_checkpointer().unwrap();
    t.store.leave_checkpoints_to(&c).unwrap();
    commit_big(&t.store, 1);
    let under_way = c.busy();
    c.nudge();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(c.completed(), 0, "nothing while a request runs");
    drop(under_way);
    wait_for(&c, 1);

    commit_big(&t.store, 2);
    let _forever = c.busy();
    let asked = Instant::now();
    c.nudge();
    wait_for(&c, 2);
    // Half a second for the end of the request, none for a quiet while: a short WAL's work
    // waits a second (see the next test).
    let put_off = asked.elapsed();
    assert!(
        put_off >= Duration::from_millis(450),
        "put off for {put_off:?} only"
    );
    assert!(
        put_off < Duration::from_millis(850),
        "a long WAL waited {put_off:?} for a quiet while"
    );
}

/// Three commits of 1,000 small blobs each: recent rows past the thread's fold bound.
fn recent_rows_to_fold(t: &TestStore, first_seed: u64) {
    for seed in first_seed..first_seed + 3 {
        let w = t.store.writer().unwrap();
        for i in 0..1000 {
            w.put_blob(&random(seed * 1000 + i, 100)).unwrap();
        }
        w.commit().unwrap();
    }
}

/// With a short WAL, the thread's work waits for the request under way and then for a quiet
/// while (20 ms) after it, and a request that never ends puts it off about a second (half a
/// second for the quiet while, half a second for the end of the request).
#[test]
fn a_fold_waits_for_a_quiet_while_after_the_requests() {
    let t = TestStore::new();
    let c = t.store.start_wal_checkpointer().unwrap();
    t.store.leave_checkpoints_to(&c).unwrap();
    recent_rows_to_fold(&t, 0);
    let under_way = c.busy();
    c.nudge();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(c.folds(), 0, "nothing while a request runs");
    drop(under_way);
    let ended = Instant::now();
    wait_for_folds(&c, 1);
    assert!(
        ended.elapsed() >= Duration::from_millis(15),
        "folded {:?} after the request ended",
        ended.elapsed()
    );

    recent_rows_to_fold(&t, 10);
    let _forever = c.busy();
    let asked = Instant::now();
    c.nudge();
    wait_for_folds(&c, 2);
    assert!(
        asked.elapsed() >= Duration::from_millis(900),
        "put off for {:?} only",
        asked.elapsed()
    );
}

/// Rows in each of the index's two tables of packed objects (the recent ones, the rest).
fn rows(t: &TestStore) -> (i64, i64) {
    let db = rusqlite::Connection::open(t.dir.path().join("meta.sqlite")).unwrap();
    let count = |table: &str| -> i64 {
        db.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap()
    };
    (count("store_objects_recent"), count("store_objects"))
}

/// Small commits leave their rows in the index's table of recent rows; once there are more
/// than the thread's bound (2,048), the thread folds them into the main table when nudged,
/// and every object is still read back.
#[test]
fn the_thread_folds_the_recent_rows_when_nudged() {
    let t = TestStore::new();
    let c = t.store.start_wal_checkpointer().unwrap();
    t.store.leave_checkpoints_to(&c).unwrap();
    let mut ids = Vec::new();
    for seed in 0..3 {
        let w = t.store.writer().unwrap();
        for i in 0..1000 {
            ids.push(w.put_blob(&random(seed * 1000 + i, 100)).unwrap());
        }
        w.commit().unwrap();
    }
    assert_eq!(rows(&t), (3000, 0), "commits under the bound do not fold");
    c.nudge();
    let start = Instant::now();
    while c.folds() < 1 {
        assert!(start.elapsed() < Duration::from_secs(30), "no fold");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(rows(&t), (0, 3000));
    for (k, id) in ids.iter().enumerate() {
        let (seed, i) = (k as u64 / 1000, k as u64 % 1000);
        assert_eq!(t.store.read_blob(id).unwrap(), random(seed * 1000 + i, 100));
    }
}
