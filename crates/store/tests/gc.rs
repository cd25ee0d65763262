//! The sweep: dead objects go, mostly dead packs are rewritten with their live objects, live
//! inline objects move into packs, and whatever the sweep's step a crash stops at, every live
//! object still reads back verified and fsck is clean.

use std::collections::HashSet;

use crate::common;

use common::{random, TestStore};
use rewind_store::{ObjectId, StoreConfig};

/// One pack holding a small live blob and a large dead one, plus inline objects (live, dead).
fn setup() -> (TestStore, ObjectId, ObjectId, ObjectId, ObjectId) {
    let t = TestStore::with_config(StoreConfig {
        inline_limit: 0,
        ..StoreConfig::default()
    });
    let w = t.store.writer().unwrap();
    let live = w.put_blob(&random(1, 20_000)).unwrap();
    let dead = w.put_blob(&random(2, 400_000)).unwrap();
    w.commit().unwrap();
    let inline = t.reopen();
    let w = inline.writer().unwrap();
    let live_inline = w.put_blob(&random(3, 1000)).unwrap();
    let dead_inline = w.put_blob(&random(4, 500)).unwrap();
    w.commit().unwrap();
    assert_eq!(
        t.pack_files().len(),
        1,
        "the second writer kept its objects inline"
    );
    (t, live, dead, live_inline, dead_inline)
}

#[test]
fn a_mostly_dead_pack_is_rewritten_and_dead_objects_go() {
    let (t, live, dead, live_inline, dead_inline) = setup();
    let keep: HashSet<ObjectId> = [live, live_inline].into_iter().collect();
    let before = t.pack_files();
    assert_eq!(
        t.store.sweeps().unwrap(),
        0,
        "writers' commits are not sweeps"
    );
    let mut plan = t.store.plan_sweep(&keep, false).unwrap();
    assert_eq!(plan.stats.objects_removed, 2, "{:?}", plan.stats);
    assert!(plan.stats.bytes_freed > 300_000, "{:?}", plan.stats);
    t.store.repack(&mut plan).unwrap();
    assert_eq!(t.store.sweeps().unwrap(), 0, "counted when the rows go");
    t.store.commit_sweep(&plan).unwrap();
    assert_eq!(t.store.sweeps().unwrap(), 1, "the sweep that removed rows");
    let stats = t.store.finish_sweep(plan, &|| {}).unwrap();
    assert_eq!(stats.packs_deleted, 1, "{stats:?}");
    assert_eq!(stats.packs_written, 1, "{stats:?}");
    assert_eq!(
        stats.objects_moved, 2,
        "the live packed and the live inline object"
    );
    for p in &before {
        assert!(!p.exists(), "{p:?} deleted");
    }
    let s = t.reopen();
    assert_eq!(s.read_blob(&live).unwrap(), random(1, 20_000));
    assert_eq!(s.read_blob(&live_inline).unwrap(), random(3, 1000));
    assert!(!s.has(&dead).unwrap() && !s.has(&dead_inline).unwrap());
    assert!(s.fsck().unwrap().problems.is_empty());
}

#[test]
fn a_sweep_stopped_at_any_step_loses_nothing_live() {
    for stop in 0..3 {
        let (t, live, dead, live_inline, _) = setup();
        let keep: HashSet<ObjectId> = [live, live_inline].into_iter().collect();
        let mut plan = t.store.plan_sweep(&keep, true).unwrap();
        t.store.repack(&mut plan).unwrap();
        if stop >= 1 {
            t.store.commit_sweep(&plan).unwrap();
        }
        if stop >= 2 {
            // Killed after the first pack delete: the rest stay on disk, unindexed.
            let deleted = std::cell::Cell::new(0);
            let killed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                t.store.finish_sweep(plan, &|| {
                    deleted.set(deleted.get() + 1);
                    if deleted.get() == 1 {
                        panic!("killed");
                    }
                })
            }));
            assert!(killed.is_err());
        } else {
            // Killed: the process's locks go with it, its publish markers stay.
            drop(plan);
        }
        // The next process: everything live reads back, fsck is clean, and a second sweep
        // (after removing what no row names) leaves only live objects.
        let s = t.reopen();
        assert_eq!(
            s.read_blob(&live).unwrap(),
            random(1, 20_000),
            "stop {stop}"
        );
        assert_eq!(s.read_blob(&live_inline).unwrap(), random(3, 1000));
        assert!(s.fsck().unwrap().problems.is_empty(), "stop {stop}");
        s.remove_unindexed_packs().unwrap();
        let mut plan = s.plan_sweep(&keep, true).unwrap();
        s.repack(&mut plan).unwrap();
        s.commit_sweep(&plan).unwrap();
        s.finish_sweep(plan, &|| {}).unwrap();
        assert!(!s.has(&dead).unwrap(), "stop {stop}");
        assert_eq!(s.read_blob(&live).unwrap(), random(1, 20_000));
        assert_eq!(s.stats().unwrap().objects, 2, "stop {stop}");
        assert!(s.fsck().unwrap().problems.is_empty(), "stop {stop}");
        // Stopped before its commit, the repack's pack was adopted (holding a live object the
        // index had inline): it stays as a second pack, wholly live.
        let packs = if stop == 0 { 2 } else { 1 };
        assert_eq!(
            t.pack_files().len(),
            packs,
            "stop {stop}: {:?}",
            t.pack_files()
        );
    }
}
