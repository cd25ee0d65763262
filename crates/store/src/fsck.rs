//! Checking the whole store: every object of every indexed pack is read, decompressed,
//! hashed and decoded. Read-only: repairs are a decision for the caller, who knows which
//! checkpoints the lost objects belong to.

use std::collections::HashSet;
use std::fs::File;
use std::io;

use crate::chunk::FileObject;
use crate::clone;
use crate::pack::{self, Entry, ReadError};
use crate::{Error, FsckProblem, FsckReport, ObjectKind, Result, Store};

pub(crate) fn run(store: &Store) -> Result<FsckReport> {
    let mut report = FsckReport::default();
    let mut indexed = HashSet::new();
    let mut by_pack = store.index.objects_by_pack()?;
    for row in store.index.packs()? {
        let entries = by_pack.remove(&row.id).unwrap_or_default();
        let path = pack::pack_path(&store.packs_dir, &row.name);
        indexed.insert(row.name.clone());
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                report.problems.push(FsckProblem::MissingPack {
                    pack: row.name,
                    objects: entries.iter().map(|e| e.id).collect(),
                });
                continue;
            }
            Err(source) => {
                return Err(Error::Io {
                    op: "open pack",
                    path,
                    source,
                })
            }
        };
        report.packs_checked += 1;
        for e in &entries {
            report.objects_checked += 1;
            count_clone(store, e, &mut report)?;
            if let Err(reason) = check_object(store, &file, e) {
                report.problems.push(FsckProblem::Corrupt {
                    id: e.id,
                    kind: e.kind,
                    pack: row.name.clone(),
                    reason,
                });
            }
        }
    }
    // Objects kept inline in the index: verified like packed ones.
    for id in store.index.inline_ids()? {
        let Some((e, stored)) = store.index.lookup_inline(&id)? else {
            continue;
        };
        report.objects_checked += 1;
        count_clone(store, &e, &mut report)?;
        let checked = pack::decode_object(&e, stored)
            .map_err(ReadError::reason)
            .and_then(|raw| check_decodes(store, &e, &raw));
        if let Err(reason) = checked {
            report.problems.push(FsckProblem::Corrupt {
                id,
                kind: e.kind,
                pack: crate::INLINE.to_string(),
                reason,
            });
        }
    }
    // Object rows naming no pack row: nothing says where their bytes are.
    let mut unnamed: Vec<_> = by_pack.into_iter().collect();
    unnamed.sort_by_key(|(pack, _)| *pack);
    for (pack, entries) in unnamed {
        report.problems.push(FsckProblem::MissingPack {
            pack: format!("#{pack} (no such pack row)"),
            objects: entries.iter().map(|e| e.id).collect(),
        });
    }
    // Packs on disk but not indexed are orphans the next `Store::open` adopts, unless their
    // trailer cannot be read: then nothing will ever find their objects.
    let mut orphans = pack::packs_on_disk(&store.packs_dir)?;
    orphans.sort();
    for name in orphans.into_iter().filter(|n| !indexed.contains(n)) {
        let path = pack::pack_path(&store.packs_dir, &name);
        let trailer = File::open(&path)
            .map_err(|e| e.to_string())
            .and_then(|f| pack::read_trailer(&f));
        if let Err(reason) = trailer {
            report
                .problems
                .push(FsckProblem::UnreadablePack { pack: name, reason });
        }
    }
    Ok(report)
}

fn check_object(store: &Store, file: &File, e: &Entry) -> Result<(), String> {
    let raw = pack::read_object(file, e).map_err(ReadError::reason)?;
    check_decodes(store, e, &raw)
}

fn check_decodes(store: &Store, e: &Entry, raw: &[u8]) -> Result<(), String> {
    match e.kind {
        ObjectKind::Clone => check_clone(store, e, raw),
        ObjectKind::Blob => Ok(()),
        ObjectKind::File => FileObject::decode(raw).map(drop),
        ObjectKind::Tree => crate::tree::check_layout(raw).map_err(|err| err.to_string()),
    }
}

fn count_clone(store: &Store, e: &Entry, report: &mut FsckReport) -> Result<()> {
    if e.kind == ObjectKind::Clone {
        report.clones_checked += 1;
        if store.clone_packed(&e.id)?.is_none() {
            report.clones_unhashed += 1;
        }
    }
    Ok(())
}

/// A clone's file is there with the record's length, or (fetched from a remote) its packed
/// twin is known. With both, the file must hash to the twin. A clone with no twin has no hash
/// to be checked against (`crate::clone`): damage inside its file is not found here.
fn check_clone(store: &Store, e: &Entry, raw: &[u8]) -> Result<(), String> {
    let reason = |err: Error| match err {
        Error::Corrupt { reason, .. } => reason,
        other => other.to_string(),
    };
    let twin = store.clone_packed(&e.id).map_err(reason)?;
    match clone::open(&store.packs_dir, &e.id, raw) {
        Ok((mut file, size)) => match twin {
            None => Ok(()),
            Some(content) => match crate::content_id(&mut file) {
                Ok((id, len)) if id == content && len == size => Ok(()),
                Ok(_) => Err(format!(
                    "its clone file does not hold what it was packed as ({content})"
                )),
                Err(err) => Err(reason(err)),
            },
        },
        Err(err) => match twin {
            Some(content) if store.has(&content).map_err(reason)? => Ok(()),
            Some(content) => Err(format!(
                "its clone file is not here and its packed content {content} is not stored"
            )),
            None => Err(reason(err)),
        },
    }
}
