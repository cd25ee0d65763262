//! Done-when 6: a model-based property test of the op log and rewind layer.
//!
//! Random sequences of exact and opaque epochs, the user's plain file writes between them,
//! checkpoints, restores (to checkpoints and to epochs, forced or not), undos and whole-tree
//! restores across two sessions run against a real workspace through the library, and against
//! an in-memory model of docs/design.md "Rewinding":
//!
//! - the model is the file map plus, per session, the ordered list of its epochs, each with the
//!   (path, pre, post) of every path it changed;
//! - restore session S to checkpoint X: for each path S changed after X, target = pre of S's
//!   earliest change after X, expected = post of S's latest; a path already at its target is
//!   left alone; current ≠ expected is a conflict; any conflict refuses the whole restore
//!   (nothing changes) unless forced; an epoch target means "just before that epoch";
//! - undo of an epoch = its changes reversed with the same conflict rule;
//! - restores and undos are themselves epochs of S (with their steps as changes), so undo after
//!   a rewind is redo;
//! - `--all` to checkpoint X makes every path what it was when X was taken.
//!
//! The file universe is 4 paths with 3 contents and 2 modes, so overlaps and conflicts are
//! frequent. After every operation the disk must equal the model, and every restore/undo's
//! steps and conflicts (and its dry run's) must be the model's.

use crate::common;

use std::os::unix::fs::PermissionsExt;

use proptest::prelude::*;
use rewind_core::{
    CheckpointRow, EpochSpec, LiveWatch, Mode, RewindOptions, RewindOutcome, Target,
};
use rewind_store::{ObjectId, ObjectKind};

const N: usize = 4;
const PATHS: [&str; N] = ["p0", "p1", "p2", "p3"];
const CONTENTS: [&[u8]; 3] = [b"a", b"bb", b"a\n"];
const SESSIONS: [&str; 2] = ["A", "B"];
/// Files whose bytes Rewind has never stored when the run starts: `u` is ignored (by
/// `.git/info/exclude`), `big` is over the size cap (4 bytes, in the home's config). `Rules`
/// ops un-ignore and re-ignore `u` and raise and lower the cap, between epochs or inside one.
/// Nothing ever writes them: after every operation both must still hold their bytes.
const UNCAPTURED: [(&str, &[u8]); 2] = [("u", b"never-captured secret\n"), ("big", b"BIGGER")];

/// A path's state: absent, or (content index, executable).
type Val = Option<(u8, bool)>;
type Files = [Val; N];
type Writes = [Option<Val>; N];

#[derive(Clone, Debug)]
enum Op {
    /// `epoch begin --path …` on the declared paths, writes (to declared paths only), end.
    Exact {
        s: usize,
        declared: [bool; N],
        writes: Writes,
    },
    /// Two sessions' exact epochs overlapping: S begins on `declared`, writes `early`; the other
    /// session runs a whole exact epoch (`inner`, writing `inner_writes`); S writes `late` and
    /// ends. Each epoch's "before" of a path is what the op log says it held when the change
    /// was made, so S's change of a path the other session also declared starts from the
    /// state the other's epoch left.
    Overlap {
        s: usize,
        declared: [bool; N],
        early: Writes,
        inner: [bool; N],
        inner_writes: Writes,
        late: Writes,
    },
    /// An opaque epoch (like `exec`) around the writes.
    Opaque {
        s: usize,
        writes: Writes,
    },
    /// The user's editor, between epochs.
    External {
        writes: Writes,
    },
    Checkpoint {
        s: usize,
    },
    /// Ignore rules and the size cap change: by the user between epochs (`within: None`) or
    /// inside an opaque epoch of a session (an agent's command editing them).
    Rules {
        within: Option<usize>,
        ignore_u: bool,
        cap_big: bool,
    },
    /// Restore S to one of its checkpoints (index modulo their number).
    Restore {
        s: usize,
        pick: usize,
        force: bool,
    },
    /// Restore S to just before one of its epochs.
    RestoreEpoch {
        s: usize,
        pick: usize,
        force: bool,
    },
    /// `--all` to one of S's checkpoints.
    RestoreAll {
        s: usize,
        pick: usize,
    },
    Undo {
        s: usize,
        force: bool,
    },
}

fn val() -> impl Strategy<Value = Val> {
    prop_oneof![
        1 => Just(None),
        4 => (0..CONTENTS.len() as u8, prop::bool::weighted(0.2)).prop_map(Some),
    ]
}

fn writes() -> impl Strategy<Value = Writes> {
    prop::array::uniform4(prop::option::weighted(0.45, val()))
}

fn op(with_all: bool) -> impl Strategy<Value = Op> {
    let s = 0..SESSIONS.len();
    let all_weight = if with_all { 2 } else { 0 };
    prop_oneof![
        5 => (s.clone(), prop::array::uniform4(any::<bool>()), writes()).prop_map(
            |(s, mut declared, writes)| {
                if !declared.contains(&true) {
                    declared[0] = true;
                }
                Op::Exact { s, declared, writes }
            }
        ),
        3 => (
            s.clone(),
            (prop::array::uniform4(any::<bool>()), writes()),
            (prop::array::uniform4(any::<bool>()), writes()),
            writes(),
        )
            .prop_map(|(s, (mut declared, early), (mut inner, inner_writes), late)| {
                declared[0] |= !declared.contains(&true);
                inner[0] |= !inner.contains(&true);
                Op::Overlap { s, declared, early, inner, inner_writes, late }
            }),
        5 => (s.clone(), writes()).prop_map(|(s, writes)| Op::Opaque { s, writes }),
        3 => writes().prop_map(|writes| Op::External { writes }),
        3 => s.clone().prop_map(|s| Op::Checkpoint { s }),
        2 => (prop::option::of(s.clone()), any::<bool>(), any::<bool>())
            .prop_map(|(within, ignore_u, cap_big)| Op::Rules { within, ignore_u, cap_big }),
        4 => (s.clone(), any::<usize>(), prop::bool::weighted(0.25))
            .prop_map(|(s, pick, force)| Op::Restore { s, pick, force }),
        2 => (s.clone(), any::<usize>(), prop::bool::weighted(0.25))
            .prop_map(|(s, pick, force)| Op::RestoreEpoch { s, pick, force }),
        all_weight => (s.clone(), any::<usize>()).prop_map(|(s, pick)| Op::RestoreAll { s, pick }),
        3 => (s, prop::bool::weighted(0.25)).prop_map(|(s, force)| Op::Undo { s, force }),
    ]
}

// ---- the disk ----

fn read_disk(root: &std::path::Path) -> Files {
    let mut out = [None; N];
    for (i, p) in PATHS.iter().enumerate() {
        let path = root.join(p);
        match std::fs::symlink_metadata(&path) {
            Err(_) => {}
            Ok(m) => {
                assert!(m.is_file(), "{p} is not a file");
                let data = std::fs::read(&path).unwrap();
                let c = CONTENTS
                    .iter()
                    .position(|c| *c == data.as_slice())
                    .unwrap_or_else(|| panic!("{p} holds unknown bytes {data:?}"));
                let mode = m.permissions().mode() & 0o7777;
                assert!(mode == 0o644 || mode == 0o755, "{p} has mode {mode:o}");
                out[i] = Some((c as u8, mode == 0o755));
            }
        }
    }
    out
}

fn write_disk(root: &std::path::Path, i: usize, v: Val) {
    let path = root.join(PATHS[i]);
    match v {
        None => {
            let _ = std::fs::remove_file(&path);
        }
        Some((c, x)) => {
            // In place (same inode) when the file exists, like an editor that truncates.
            std::fs::write(&path, CONTENTS[c as usize]).unwrap();
            let mode = if x { 0o755 } else { 0o644 };
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
    }
}

// ---- the model ----

#[derive(Clone, Debug)]
struct Epoch {
    session: usize,
    /// Its id in the real op log.
    id: String,
    changes: Vec<(usize, Val, Val)>,
}

#[derive(Clone, Debug)]
struct Checkpoint {
    row: CheckpointRow,
    /// Number of epochs recorded when it was taken: later ones are "after" it.
    at: usize,
    files: Files,
}

#[derive(Default)]
struct Model {
    files: Files,
    epochs: Vec<Epoch>,
    checkpoints: [Vec<Checkpoint>; 2],
}

/// What the model says a restore/undo does.
#[derive(Debug, PartialEq, Eq)]
struct Expect {
    /// Paths the plan writes (forced conflicts included), sorted.
    steps: Vec<usize>,
    conflicts: Vec<usize>,
    applied: bool,
}

impl Model {
    /// Rewinds `changes` (in op-log order) coalesced per path; applies unless refused.
    fn rewind(
        &mut self,
        session: usize,
        changes: Vec<(usize, Val, Val)>,
        force: bool,
        dry_run: bool,
    ) -> (Expect, Vec<(usize, Val, Val)>) {
        let mut per: std::collections::BTreeMap<usize, (Val, Val)> = Default::default();
        for (p, pre, post) in changes {
            per.entry(p)
                .and_modify(|v| v.1 = post)
                .or_insert((pre, post));
        }
        let mut steps = Vec::new();
        let mut conflicts = Vec::new();
        for (p, (target, expected)) in per {
            let current = self.files[p];
            if current == target {
                continue;
            }
            if current != expected {
                conflicts.push(p);
                if !force {
                    continue;
                }
            }
            steps.push((p, current, target));
        }
        let refused = !conflicts.is_empty() && !force;
        let applied = !refused && !dry_run;
        if applied {
            for &(p, _, after) in &steps {
                self.files[p] = after;
            }
        }
        let expect = Expect {
            // A refused plan still lists its other steps (nothing is applied).
            steps: steps.iter().map(|s| s.0).collect(),
            conflicts,
            applied,
        };
        let _ = session;
        (expect, steps)
    }

    fn changes_of(&self, session: usize, from: usize) -> Vec<(usize, Val, Val)> {
        self.epochs[from..]
            .iter()
            .filter(|e| e.session == session)
            .flat_map(|e| e.changes.iter().cloned())
            .collect()
    }
}

fn is_uncaptured(p: &[u8]) -> bool {
    UNCAPTURED.iter().any(|(name, _)| name.as_bytes() == p)
}

/// Writes the ignore rule and the size cap: `u` ignored or not, `big` over the cap or not.
fn write_rules(root: &std::path::Path, home: &std::path::Path, ignore_u: bool, cap_big: bool) {
    let exclude = if ignore_u { "u\n" } else { "" };
    std::fs::write(root.join(".git/info/exclude"), exclude).unwrap();
    let cap = if cap_big { "4" } else { "1048576" };
    std::fs::write(
        home.join("config.toml"),
        format!("[capture]\nmax_file_size = {cap}\n"),
    )
    .unwrap();
}

/// No restore or undo touches a file whose bytes Rewind never had (checked before anything
/// maps the outcome's paths to the model's).
fn untouched(out: &RewindOutcome, ctx: &str) -> Result<(), TestCaseError> {
    for s in &out.steps {
        prop_assert!(
            !is_uncaptured(&s.path),
            "{}: a step writes {}",
            ctx,
            String::from_utf8_lossy(&s.path)
        );
    }
    Ok(())
}

/// The changes of the model's paths (an epoch may also record `u` or `big` appearing).
fn model_changes(changes: &[rewind_core::Change]) -> impl Iterator<Item = &rewind_core::Change> {
    changes.iter().filter(|c| !is_uncaptured(&c.path))
}

fn path_index(p: &[u8]) -> usize {
    PATHS
        .iter()
        .position(|x| x.as_bytes() == p)
        .unwrap_or_else(|| panic!("unexpected path {}", String::from_utf8_lossy(p)))
}

fn observed(out: &RewindOutcome) -> Expect {
    let mut steps: Vec<usize> = out.steps.iter().map(|s| path_index(&s.path)).collect();
    steps.sort();
    let mut conflicts: Vec<usize> = out.conflicts.iter().map(|c| path_index(&c.path)).collect();
    conflicts.sort();
    Expect {
        steps,
        conflicts,
        applied: out.applied,
    }
}

fn opts(force: bool, dry_run: bool) -> RewindOptions {
    RewindOptions {
        dry_run,
        force,
        ..Default::default()
    }
}

/// Runs the ops against a fresh workspace and the model; Err names the first divergence.
/// Runs `ops` against a real workspace and the model; with `live`, every handle shares one
/// [`LiveWatch`] (as `rewind serve`'s do), so captures re-read only what it saw change.
fn run(ops: &[Op], live: bool) -> Result<(), TestCaseError> {
    let env = common::Env::new();
    let root = env.root().to_path_buf();
    // A start state with every path present.
    for i in 0..N {
        write_disk(&root, i, Some(((i % CONTENTS.len()) as u8, false)));
    }
    std::fs::create_dir_all(root.join(".git/info")).unwrap();
    for (name, bytes) in UNCAPTURED {
        std::fs::write(root.join(name), bytes).unwrap();
    }
    write_rules(&root, env.home.path(), true, true);
    let live = live.then(|| LiveWatch::new(&root).expect("inotify works here"));
    let open = || {
        let ws = env.open();
        if let Some(w) = &live {
            ws.use_live_watch(w.clone());
        }
        ws
    };
    let mut ws = open();
    ws.snapshot("base", None).unwrap();
    let mut m = Model {
        files: read_disk(&root),
        ..Default::default()
    };
    let mut msg = 0;
    for (step, op) in ops.iter().enumerate() {
        let ctx = format!("op #{step} {op:?}");
        match op {
            Op::Exact {
                s,
                declared,
                writes,
            } => {
                let paths: Vec<Vec<u8>> = (0..N)
                    .filter(|i| declared[*i])
                    .map(|i| PATHS[i].as_bytes().to_vec())
                    .collect();
                let spec = EpochSpec {
                    tool: Some("edit".into()),
                    tool_call: Some(format!("call-{step}")),
                    paths,
                    process_owned: false,
                    owner_pid: None,
                    note: None,
                };
                let row = ws.begin_epoch(SESSIONS[*s], &spec).unwrap();
                let pre = m.files;
                for i in 0..N {
                    if let (true, Some(v)) = (declared[i], writes[i]) {
                        write_disk(&root, i, v);
                        m.files[i] = v;
                    }
                }
                let settled = ws.end_epoch(SESSIONS[*s], Some(&row.id), false).unwrap();
                let changes: Vec<_> = (0..N)
                    .filter(|i| pre[*i] != m.files[*i])
                    .map(|i| (i, pre[i], m.files[i]))
                    .collect();
                let mut got: Vec<usize> = model_changes(&settled.changes)
                    .map(|c| path_index(&c.path))
                    .collect();
                got.sort();
                prop_assert_eq!(
                    got,
                    changes.iter().map(|c| c.0).collect::<Vec<_>>(),
                    "{}: recorded changes",
                    ctx
                );
                m.epochs.push(Epoch {
                    session: *s,
                    id: row.id,
                    changes,
                });
            }
            Op::Overlap {
                s,
                declared,
                early,
                inner,
                inner_writes,
                late,
            } => {
                let other = 1 - *s;
                let spec = |decl: &[bool; N], tag: &str| EpochSpec {
                    tool: Some("edit".into()),
                    tool_call: Some(format!("call-{step}-{tag}")),
                    paths: (0..N)
                        .filter(|i| decl[*i])
                        .map(|i| PATHS[i].as_bytes().to_vec())
                        .collect(),
                    process_owned: false,
                    owner_pid: None,
                    note: None,
                };
                let write_declared = |m: &mut Model, decl: &[bool; N], w: &Writes| {
                    for i in 0..N {
                        if let (true, Some(v)) = (decl[i], w[i]) {
                            write_disk(&root, i, v);
                            m.files[i] = v;
                        }
                    }
                };
                let outer = ws
                    .begin_epoch(SESSIONS[*s], &spec(declared, "outer"))
                    .unwrap();
                let pre_outer = m.files;
                write_declared(&mut m, declared, early);
                let row = ws
                    .begin_epoch(SESSIONS[other], &spec(inner, "inner"))
                    .unwrap();
                let pre_inner = m.files;
                write_declared(&mut m, inner, inner_writes);
                let settled = ws.end_epoch(SESSIONS[other], Some(&row.id), false).unwrap();
                let inner_changes: Vec<_> = (0..N)
                    .filter(|i| inner[*i] && pre_inner[*i] != m.files[*i])
                    .map(|i| (i, pre_inner[i], m.files[i]))
                    .collect();
                check_recorded(&settled, &inner_changes, &format!("{ctx}: inner"))?;
                m.epochs.push(Epoch {
                    session: other,
                    id: row.id,
                    changes: inner_changes,
                });
                let after_inner = m.files;
                write_declared(&mut m, declared, late);
                let settled = ws.end_epoch(SESSIONS[*s], Some(&outer.id), false).unwrap();
                let outer_changes: Vec<_> = (0..N)
                    .filter(|i| declared[*i])
                    .map(|i| {
                        let before = if inner[i] {
                            after_inner[i]
                        } else {
                            pre_outer[i]
                        };
                        (i, before, m.files[i])
                    })
                    .filter(|c| c.1 != c.2)
                    .collect();
                check_recorded(&settled, &outer_changes, &format!("{ctx}: outer"))?;
                m.epochs.push(Epoch {
                    session: *s,
                    id: outer.id,
                    changes: outer_changes,
                });
            }
            Op::Opaque { s, writes } => {
                let row = ws
                    .begin_epoch(SESSIONS[*s], &common::shell_epoch(step))
                    .unwrap();
                let pre = m.files;
                for (i, w) in writes.iter().enumerate() {
                    if let Some(v) = w {
                        write_disk(&root, i, *v);
                        m.files[i] = *v;
                    }
                }
                if live.is_some() {
                    // Time for the watcher's thread to read the files ahead (see
                    // `capture/watch/ahead.rs`), as it does while a command runs: the capture
                    // then takes what it prepared.
                    std::thread::sleep(std::time::Duration::from_millis(3));
                }
                let settled = ws.end_epoch(SESSIONS[*s], Some(&row.id), false).unwrap();
                let changes: Vec<_> = (0..N)
                    .filter(|i| pre[*i] != m.files[*i])
                    .map(|i| (i, pre[i], m.files[i]))
                    .collect();
                let mut got: Vec<usize> = model_changes(&settled.changes)
                    .map(|c| path_index(&c.path))
                    .collect();
                got.sort();
                prop_assert_eq!(
                    got,
                    changes.iter().map(|c| c.0).collect::<Vec<_>>(),
                    "{}: recorded changes",
                    ctx
                );
                m.epochs.push(Epoch {
                    session: *s,
                    id: row.id,
                    changes,
                });
            }
            Op::External { writes } => {
                for (i, w) in writes.iter().enumerate() {
                    if let Some(v) = w {
                        write_disk(&root, i, *v);
                        m.files[i] = *v;
                    }
                }
            }
            Op::Rules {
                within,
                ignore_u,
                cap_big,
            } => {
                match within {
                    None => write_rules(&root, env.home.path(), *ignore_u, *cap_big),
                    Some(s) => {
                        let row = ws
                            .begin_epoch(SESSIONS[*s], &common::shell_epoch(step))
                            .unwrap();
                        write_rules(&root, env.home.path(), *ignore_u, *cap_big);
                        let settled = ws.end_epoch(SESSIONS[*s], Some(&row.id), false).unwrap();
                        prop_assert_eq!(model_changes(&settled.changes).count(), 0, "{}", ctx);
                        m.epochs.push(Epoch {
                            session: *s,
                            id: row.id,
                            changes: Vec::new(),
                        });
                    }
                }
                // The size cap is configuration: read when a workspace is opened.
                ws = open();
            }
            Op::Checkpoint { s } => {
                msg += 1;
                let row = ws
                    .checkpoint(SESSIONS[*s], Some(&format!("m{msg}")), None, None, None)
                    .unwrap();
                m.checkpoints[*s].push(Checkpoint {
                    row,
                    at: m.epochs.len(),
                    files: m.files,
                });
            }
            Op::Restore { s, pick, force } => {
                if m.checkpoints[*s].is_empty() {
                    continue;
                }
                let cp = m.checkpoints[*s][pick % m.checkpoints[*s].len()].clone();
                let target = Target::Checkpoint(cp.row.clone());
                let changes = m.changes_of(*s, cp.at);
                restore_both(&ws, &mut m, *s, &target, changes, *force, &ctx)?;
            }
            Op::RestoreEpoch { s, pick, force } => {
                let mine: Vec<usize> = (0..m.epochs.len())
                    .filter(|i| m.epochs[*i].session == *s)
                    .collect();
                if mine.is_empty() {
                    continue;
                }
                let at = mine[pick % mine.len()];
                let target = ws.resolve(SESSIONS[*s], &m.epochs[at].id).unwrap();
                prop_assert!(matches!(target, Target::Epoch(_)));
                let changes = m.changes_of(*s, at);
                restore_both(&ws, &mut m, *s, &target, changes, *force, &ctx)?;
            }
            Op::RestoreAll { s, pick } => {
                if m.checkpoints[*s].is_empty() {
                    continue;
                }
                let cp = m.checkpoints[*s][pick % m.checkpoints[*s].len()].clone();
                let target = Target::Checkpoint(cp.row.clone());
                let o = RewindOptions {
                    all: true,
                    mode: Mode::FilesOnly,
                    ..Default::default()
                };
                let out = ws.restore(SESSIONS[*s], &target, &o).unwrap();
                untouched(&out, &ctx)?;
                let steps: Vec<_> = (0..N)
                    .filter(|i| m.files[*i] != cp.files[*i])
                    .map(|i| (i, m.files[i], cp.files[i]))
                    .collect();
                m.files = cp.files;
                let id = out.epoch.clone().expect("an applied restore has an epoch");
                m.epochs.push(Epoch {
                    session: *s,
                    id,
                    changes: steps,
                });
                prop_assert_eq!(read_disk(&root), m.files, "{}: disk vs model", ctx);
            }
            Op::Undo { s, force } => {
                let last = m.epochs.iter().rposition(|e| e.session == *s);
                let Some(last) = last else {
                    let r = ws.undo(SESSIONS[*s], None, &opts(*force, false));
                    prop_assert!(r.is_err(), "{}: undo with no epoch must fail", ctx);
                    continue;
                };
                let changes: Vec<_> = m.epochs[last]
                    .changes
                    .iter()
                    .map(|&(p, pre, post)| (p, pre, post))
                    .collect();
                let dry = ws.undo(SESSIONS[*s], None, &opts(*force, true)).unwrap();
                untouched(&dry, &ctx)?;
                let (want_dry, _) = m.rewind(*s, changes.clone(), *force, true);
                prop_assert_eq!(observed(&dry), want_dry, "{}: dry run", ctx);
                prop_assert_eq!(read_disk(&root), m.files, "{}: the dry run wrote", ctx);
                let out = ws.undo(SESSIONS[*s], None, &opts(*force, false)).unwrap();
                untouched(&out, &ctx)?;
                let (want, steps) = m.rewind(*s, changes, *force, false);
                prop_assert_eq!(observed(&out), want, "{}: undo", ctx);
                dry_run_told_the_truth(&ws, &dry, &out, &ctx)?;
                if out.applied {
                    m.epochs.push(Epoch {
                        session: *s,
                        id: out.epoch.clone().unwrap(),
                        changes: steps,
                    });
                }
            }
        }
        prop_assert_eq!(read_disk(&root), m.files, "{}: disk vs model", ctx);
        for (name, bytes) in UNCAPTURED {
            let now = std::fs::read(root.join(name)).ok();
            prop_assert_eq!(
                now.as_deref(),
                Some(bytes),
                "{}: {} lost its bytes",
                ctx,
                name
            );
        }
    }
    let (report, lost) = ws.fsck().unwrap();
    prop_assert!(report.problems.is_empty() && lost.is_empty(), "fsck");
    Ok(())
}

/// The dry run said exactly what the real run right after it did: the same steps (path,
/// before, after), conflicts and kept paths; and an applied run's restore epoch recorded
/// exactly its steps.
fn dry_run_told_the_truth(
    ws: &rewind_core::Workspace,
    dry: &RewindOutcome,
    real: &RewindOutcome,
    ctx: &str,
) -> Result<(), TestCaseError> {
    let triples = |v: &[rewind_core::Change]| -> Vec<(Vec<u8>, Val, Val)> {
        let mut t: Vec<_> = v
            .iter()
            .map(|c| (c.path.clone(), val_of(&c.before), val_of(&c.after)))
            .collect();
        t.sort();
        t
    };
    prop_assert_eq!(
        triples(&dry.steps),
        triples(&real.steps),
        "{}: dry vs real steps",
        ctx
    );
    let paths = |v: &[rewind_core::Skipped]| v.iter().map(|k| k.path.clone()).collect::<Vec<_>>();
    prop_assert_eq!(
        paths(&dry.kept),
        paths(&real.kept),
        "{}: dry vs real kept",
        ctx
    );
    let conflicts = |o: &RewindOutcome| {
        o.conflicts
            .iter()
            .map(|c| c.path.clone())
            .collect::<Vec<_>>()
    };
    prop_assert_eq!(
        conflicts(dry),
        conflicts(real),
        "{}: dry vs real conflicts",
        ctx
    );
    if let Some(id) = &real.epoch {
        let recorded = ws.epoch_changes(id).unwrap();
        prop_assert_eq!(
            triples(&recorded),
            triples(&real.steps),
            "{}: recorded restore",
            ctx
        );
    }
    Ok(())
}

/// The paths an epoch recorded, and each one's before and after, are the model's.
fn check_recorded(
    settled: &rewind_core::Settled,
    want: &[(usize, Val, Val)],
    ctx: &str,
) -> Result<(), TestCaseError> {
    let mut got: Vec<(usize, Val, Val)> = model_changes(&settled.changes)
        .map(|c| (path_index(&c.path), val_of(&c.before), val_of(&c.after)))
        .collect();
    got.sort();
    prop_assert_eq!(got, want.to_vec(), "{}: recorded changes", ctx);
    Ok(())
}

/// A recorded entry as the model's value: its content's index and whether it is executable.
fn val_of(e: &Option<rewind_core::Entry>) -> Val {
    e.as_ref().map(|e| {
        let c = CONTENTS
            .iter()
            .position(|c| ObjectId::compute(ObjectKind::Blob, c) == e.id)
            .expect("a known content");
        (c as u8, e.mode & 0o111 != 0)
    })
}

fn restore_both(
    ws: &rewind_core::Workspace,
    m: &mut Model,
    s: usize,
    target: &Target,
    changes: Vec<(usize, Val, Val)>,
    force: bool,
    ctx: &str,
) -> Result<(), TestCaseError> {
    let root = ws.root().to_path_buf();
    let dry = ws.restore(SESSIONS[s], target, &opts(force, true)).unwrap();
    untouched(&dry, ctx)?;
    let (want_dry, _) = m.rewind(s, changes.clone(), force, true);
    prop_assert_eq!(observed(&dry), want_dry, "{}: dry run", ctx);
    prop_assert_eq!(read_disk(&root), m.files, "{}: the dry run wrote", ctx);
    let out = ws
        .restore(SESSIONS[s], target, &opts(force, false))
        .unwrap();
    untouched(&out, ctx)?;
    let (want, steps) = m.rewind(s, changes, force, false);
    prop_assert_eq!(observed(&out), want, "{}: restore", ctx);
    dry_run_told_the_truth(ws, &dry, &out, ctx)?;
    if out.applied {
        m.epochs.push(Epoch {
            session: s,
            id: out.epoch.clone().expect("an applied restore has an epoch"),
            changes: steps,
        });
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        max_shrink_iters: 400,
        ..ProptestConfig::default()
    })]

    /// Session-scoped semantics: epochs, external edits, checkpoints, restores, undos.
    #[test]
    fn op_log_matches_the_model(ops in prop::collection::vec(op(false), 1..28)) {
        run(&ops, false)?;
    }

    /// The same with a live watcher (a server's): every capture after the first re-reads only
    /// the directories it saw change, and must find exactly what a walk finds.
    #[test]
    fn op_log_with_a_live_watcher_matches_the_model(ops in prop::collection::vec(op(true), 1..28)) {
        run(&ops, true)?;
    }

    /// The same with `--all` restores mixed in.
    #[test]
    fn op_log_with_restore_all_matches_the_model(ops in prop::collection::vec(op(true), 1..28)) {
        run(&ops, false)?;
    }
}
