//! [`apply`] through a batch: file writes begun together, on several threads, still go in
//! the plan's order around the steps that are not file writes, and a failure stops the restore
//! exactly at the step that failed.

use super::*;
use rewind_store::{ObjectKind, StoreConfig};
use rewind_testutil::tree::{read_tree, Node};

fn file(id: ObjectId, size: u64) -> Option<Entry> {
    Some(Entry {
        kind: EntryKind::File,
        mode: 0o644,
        size,
        id,
    })
}

/// 300 file writes (more than two batches' worth) with a directory made between them: the file
/// written into that directory right after it goes in; an object missing from the store at
/// step 250 stops the restore there: every step before it is done, none after it, and no
/// temporary file is left.
#[test]
fn batched_writes_keep_the_plan_order_and_stop_at_the_failed_step() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    for d in 0..3 {
        std::fs::create_dir_all(ws.join(format!("d{d}"))).unwrap();
    }
    let path = |i: usize| format!("d{}/f{i:03}", i % 3);
    for i in 0..300 {
        std::fs::write(ws.join(path(i)), format!("old {i}")).unwrap();
    }
    let store = Store::open(
        &t.path().join("packs"),
        &t.path().join("meta.sqlite"),
        StoreConfig::default(),
    )
    .unwrap();
    let w = store.writer().unwrap();
    let ids: Vec<(ObjectId, u64)> = (0..300)
        .map(|i| w.put_content(&mut format!("new {i}").as_bytes()).unwrap())
        .collect();
    w.commit().unwrap();
    let missing = ObjectId::compute(ObjectKind::Blob, b"never stored");

    let mut steps: Vec<Change> = (0..300)
        .map(|i| Change {
            path: path(i).into_bytes(),
            before: None,
            after: if i == 250 {
                file(missing, 12)
            } else {
                file(ids[i].0, ids[i].1)
            },
        })
        .collect();
    let dir = Change {
        path: b"made".to_vec(),
        before: None,
        after: Some(Entry {
            kind: EntryKind::Dir,
            mode: 0o755,
            size: 0,
            id: ObjectId::ZERO,
        }),
    };
    let inside = Change {
        path: b"made/x".to_vec(),
        ..steps[0].clone()
    };
    steps.splice(100..100, [dir, inside]);

    let root = RootDir::open(&ws).unwrap();
    let plan = RestorePlan {
        steps,
        skipped: Vec::new(),
    };
    let err = apply(&root, &store, &plan, ApplyOptions::from_store()).unwrap_err();
    assert_eq!(err.steps_done, 252, "{}", err.cause);
    // Exactly these files, with these contents, and nothing else (no temporary file).
    let mut want: Vec<(String, String)> = (0..300)
        .map(|i| {
            (
                path(i),
                format!("{} {i}", if i < 250 { "new" } else { "old" }),
            )
        })
        .collect();
    want.push(("made/x".into(), "new 0".into()));
    want.sort();
    let got: Vec<(String, String)> = read_tree(&ws)
        .into_iter()
        .filter_map(|(p, n)| match n {
            Node::File { data, .. } => Some((
                String::from_utf8(p).unwrap(),
                String::from_utf8(data).unwrap(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(got, want);
}
