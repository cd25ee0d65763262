//! Orphaned histories and moved roots, as housekeeping sees them: `orphan_state` tells a
//! history whose directory moved (re-linkable, or re-linked) from one whose directory is gone.

use std::path::Path;

use rewind_core::{orphan_state, registered, OpenOptions, OrphanState, RootState, Workspace};

fn open(home: &Path, root: &Path) -> Workspace {
    Workspace::open(
        root,
        &OpenOptions {
            force: false,
            home: Some(home.to_path_buf()),
        },
    )
    .unwrap()
}

/// A workspace at `base/a/proj` with a few files, captured; returns its id.
fn captured(home: &Path, base: &Path) -> String {
    let root = base.join("a/proj");
    for i in 0..10 {
        let p = root.join(format!("d{}/f{i}.txt", i % 3));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("{i}\n")).unwrap();
    }
    let ws = open(home, &root);
    ws.snapshot("init", None).unwrap();
    ws.id().to_string()
}

#[test]
fn a_moved_root_is_relinkable_then_relinked() {
    let home = tempfile::tempdir().unwrap();
    let base = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(base.path()).unwrap();
    let id = captured(home.path(), &base);
    assert!(matches!(
        orphan_state(home.path(), &id).unwrap(),
        OrphanState::Attached { ref moved_from } if moved_from.is_empty()
    ));
    // Renamed in place: found among the old root's siblings.
    std::fs::rename(base.join("a/proj"), base.join("a/proj2")).unwrap();
    assert_eq!(registered(home.path())[0].root_state, RootState::Missing);
    assert_eq!(
        orphan_state(home.path(), &id).unwrap(),
        OrphanState::Relinkable {
            dir: base.join("a/proj2").display().to_string()
        }
    );
    // Its parent renamed too: found two levels below the nearest ancestor still there.
    std::fs::rename(base.join("a"), base.join("b")).unwrap();
    let now = base.join("b/proj2");
    assert_eq!(
        orphan_state(home.path(), &id).unwrap(),
        OrphanState::Relinkable {
            dir: now.display().to_string()
        }
    );
    // Opening it there re-links it, once.
    let ws = open(home.path(), &now);
    assert_eq!(ws.id(), id);
    let r = ws.relinked().expect("re-linked");
    assert_eq!(r.from, base.join("a/proj").display().to_string());
    assert_eq!(r.to, now.display().to_string());
    drop(ws);
    assert!(open(home.path(), &now).relinked().is_none());
    assert_eq!(
        orphan_state(home.path(), &id).unwrap(),
        OrphanState::Attached {
            moved_from: vec![base.join("a/proj").display().to_string()]
        }
    );
}

#[test]
fn a_deleted_root_is_unclaimed() {
    let home = tempfile::tempdir().unwrap();
    let base = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(base.path()).unwrap();
    let id = captured(home.path(), &base);
    std::fs::remove_dir_all(base.join("a/proj")).unwrap();
    // Another directory in its place's neighbourhood is not it.
    std::fs::create_dir_all(base.join("a/other")).unwrap();
    assert_eq!(
        orphan_state(home.path(), &id).unwrap(),
        OrphanState::Unclaimed
    );
    assert!(orphan_state(home.path(), "00000000000000000000000000000000").is_err());
}
