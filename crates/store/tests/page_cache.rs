//! `Store::limit_page_cache`: SQLite keeps every page a connection wrote in its cache, up to
//! the cache's bound, so a process holding many stores open (`rewind serve`, one per client)
//! grows by that bound for each. A limited store's cache stays within its limit while an
//! unlimited one, after the same commits, holds several times more (so the check can fail).

use crate::common;

use common::{random, TestStore};
use rewind_store::{Store, StoreConfig, PAGE_CACHE_BYTES};

/// Bytes of database pages the store's connection caches now (`SQLITE_DBSTATUS_CACHE_USED`).
fn cache_used(store: &Store) -> u64 {
    let db = store.db();
    let (mut now, mut high) = (0, 0);
    // SAFETY: the handle is the open connection `db` holds for the whole call.
    let rc = unsafe {
        rusqlite::ffi::sqlite3_db_status(
            db.handle(),
            rusqlite::ffi::SQLITE_DBSTATUS_CACHE_USED,
            &mut now,
            &mut high,
            0,
        )
    };
    assert_eq!(rc, rusqlite::ffi::SQLITE_OK);
    u64::try_from(now).unwrap()
}

/// 16 MiB of 2 KiB objects kept in the index itself, in commits of 1 MiB.
fn commit_many(store: &Store) {
    for c in 0..16 {
        let w = store.writer().unwrap();
        for i in 0..512 {
            w.put_blob(&random(c * 1000 + i, 2048)).unwrap();
        }
        w.commit().unwrap();
    }
}

fn store() -> TestStore {
    TestStore::with_config(StoreConfig {
        inline_limit: 8 << 20,
        ..StoreConfig::default()
    })
}

#[test]
fn a_limited_page_cache_stays_within_its_limit() {
    const LIMIT: u64 = 512 << 10;
    let limited = store();
    limited.store.limit_page_cache(LIMIT).unwrap();
    commit_many(&limited.store);
    let used = cache_used(&limited.store);
    // SQLite counts each page with its header: a little over the page size.
    assert!(used <= LIMIT * 5 / 4, "{used} bytes cached, limit {LIMIT}");

    let default = store();
    commit_many(&default.store);
    let unlimited = cache_used(&default.store);
    assert!(
        unlimited > LIMIT * 4 && unlimited <= PAGE_CACHE_BYTES * 5 / 4,
        "{unlimited} bytes cached with the default bound of {PAGE_CACHE_BYTES}"
    );
}
