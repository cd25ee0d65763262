//! Known ids (`Store::share_known_ids`): a long-running process's writers answer their
//! deduplication lookups from memory. A wrong "already stored" would lose the content (the
//! writer skips it and the caller refers to an object that is not there), so each test here
//! puts content again after something made the set's "yes" untrue, and reads it back: after a
//! sweep removed it, in a database made anew at the same path, after the transaction that
//! indexed it rolled back. And the set must still deduplicate.

use std::sync::Arc;

use crate::common;

use common::{open_in, random, TestStore};
use rewind_store::{KnownIds, StoreConfig};

fn packed() -> StoreConfig {
    StoreConfig {
        inline_limit: 0,
        ..StoreConfig::default()
    }
}

#[test]
fn stores_sharing_the_set_deduplicate_what_either_committed() {
    let t = TestStore::with_config(packed());
    let known = Arc::new(KnownIds::new());
    t.store.share_known_ids(known.clone());
    let old = {
        let w = t.store.writer().unwrap();
        let id = w.put_blob(&random(1, 5000)).unwrap();
        w.commit().unwrap();
        id
    };
    // A second store of the process (another service of a server), sharing the set: what the
    // first had indexed before the set was loaded, and what it commits after, are found.
    let other = open_in(t.dir.path(), packed());
    other.share_known_ids(known.clone());
    let w = other.writer().unwrap();
    assert_eq!(w.put_blob(&random(1, 5000)).unwrap(), old);
    let new = w.put_blob(&random(2, 5000)).unwrap();
    assert_eq!(
        w.commit().unwrap().new_objects,
        1,
        "the old blob found, the new one stored"
    );
    let w = t.store.writer().unwrap();
    assert_eq!(w.put_blob(&random(2, 5000)).unwrap(), new);
    assert_eq!(
        w.commit().unwrap().new_objects,
        0,
        "the other store's commit is known"
    );
}

#[test]
fn content_a_sweep_removed_is_stored_again() {
    let t = TestStore::with_config(packed());
    let known = Arc::new(KnownIds::new());
    t.store.share_known_ids(known.clone());
    let w = t.store.writer().unwrap();
    let keep = w.put_blob(&random(1, 3000)).unwrap();
    let gone = w.put_blob(&random(2, 3000)).unwrap();
    w.commit().unwrap();
    // The set is loaded by a writer's first lookup, and knows both.
    let w = t.store.writer().unwrap();
    w.put_blob(&random(1, 3000)).unwrap();
    assert_eq!(w.commit().unwrap().new_objects, 0);

    let mut plan = t
        .store
        .plan_sweep(&[keep].into_iter().collect(), false)
        .unwrap();
    t.store.repack(&mut plan).unwrap();
    t.store.commit_sweep(&plan).unwrap();
    t.store.finish_sweep(plan, &|| {}).unwrap();
    assert!(!t.store.has(&gone).unwrap(), "the sweep removed it");

    let w = t.store.writer().unwrap();
    assert_eq!(w.put_blob(&random(2, 3000)).unwrap(), gone);
    assert_eq!(
        w.commit().unwrap().new_objects,
        1,
        "stored again, not taken as known"
    );
    assert_eq!(t.store.read_blob(&gone).unwrap(), random(2, 3000));
}

#[test]
fn a_database_made_anew_at_the_same_path_is_not_taken_for_the_old_one() {
    let t = TestStore::with_config(packed());
    let known = Arc::new(KnownIds::new());
    t.store.share_known_ids(known.clone());
    let w = t.store.writer().unwrap();
    let id = w.put_blob(&random(1, 3000)).unwrap();
    w.commit().unwrap();
    t.store
        .writer()
        .unwrap()
        .put_blob(&random(1, 3000))
        .unwrap(); // loads the set

    // Everything removed and made again where it was, as a forgotten and re-initialised
    // workspace would be, while the process keeps its set.
    std::fs::remove_dir_all(t.dir.path().join("packs")).unwrap();
    for f in ["meta.sqlite", "meta.sqlite-wal", "meta.sqlite-shm"] {
        let _ = std::fs::remove_file(t.dir.path().join(f));
    }
    let fresh = open_in(t.dir.path(), packed());
    fresh.share_known_ids(known);
    let w = fresh.writer().unwrap();
    assert_eq!(w.put_blob(&random(1, 3000)).unwrap(), id);
    assert_eq!(
        w.commit().unwrap().new_objects,
        1,
        "stored in the new database"
    );
    assert_eq!(fresh.read_blob(&id).unwrap(), random(1, 3000));
}

#[test]
fn rows_of_a_rolled_back_transaction_are_not_taken_as_indexed() {
    let t = TestStore::with_config(packed());
    t.store.share_known_ids(Arc::new(KnownIds::new()));
    let w = t.store.writer().unwrap();
    w.put_blob(&random(9, 3000)).unwrap();
    w.commit().unwrap();
    t.store
        .writer()
        .unwrap()
        .put_blob(&random(9, 3000))
        .unwrap(); // loads the set

    // A writer whose rows join the caller's transaction, which then rolls back.
    let lost = {
        let db = t.store.db();
        db.execute_batch("BEGIN IMMEDIATE").unwrap();
        let w = t.store.writer().unwrap();
        let id = w.put_blob(&random(1, 3000)).unwrap();
        w.commit().unwrap();
        db.execute_batch("ROLLBACK").unwrap();
        id
    };
    assert!(!t.store.has(&lost).unwrap());
    let w = t.store.writer().unwrap();
    assert_eq!(w.put_blob(&random(1, 3000)).unwrap(), lost);
    assert_eq!(w.commit().unwrap().new_objects, 1, "stored again");
    assert_eq!(t.store.read_blob(&lost).unwrap(), random(1, 3000));

    // The same, committed: found, not stored twice.
    let kept = {
        let db = t.store.db();
        db.execute_batch("BEGIN IMMEDIATE").unwrap();
        let w = t.store.writer().unwrap();
        let id = w.put_blob(&random(2, 3000)).unwrap();
        w.commit().unwrap();
        db.execute_batch("COMMIT").unwrap();
        id
    };
    let w = t.store.writer().unwrap();
    assert_eq!(w.put_blob(&random(2, 3000)).unwrap(), kept);
    assert_eq!(w.commit().unwrap().new_objects, 0, "asked the index, found");
}

#[test]
fn content_another_process_stored_since_is_at_worst_stored_twice() {
    let t = TestStore::with_config(packed());
    t.store.share_known_ids(Arc::new(KnownIds::new()));
    t.store
        .writer()
        .unwrap()
        .put_blob(&random(9, 3000))
        .unwrap(); // loads the (empty) set
    let elsewhere = open_in(t.dir.path(), packed()); // does not share it
    let w = elsewhere.writer().unwrap();
    let id = w.put_blob(&random(1, 3000)).unwrap();
    w.commit().unwrap();
    let w = t.store.writer().unwrap();
    assert_eq!(w.put_blob(&random(1, 3000)).unwrap(), id);
    // Answered from memory, which does not know it: stored again.
    assert_eq!(w.commit().unwrap().new_objects, 1);
    assert_eq!(t.store.read_blob(&id).unwrap(), random(1, 3000));
    assert!(t.store.fsck().unwrap().problems.is_empty());
}
