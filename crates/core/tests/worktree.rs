//! Worktree merges against a model: random edits of the same text files in a workspace and in
//! its worktree, merged back; the result must be what the model says (each side's change
//! where only it changed a file, both edits where they are lines apart) or, when any file
//! conflicts, a refusal that leaves the workspace exactly as it was.

use proptest::prelude::*;
use rewind_core::{WorktreeCreateOptions, WorktreeMergeOptions};

use crate::common::{read_tree, Env};

const FILES: usize = 5;
const LINES: usize = 8;

/// What one side does to one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Keep,
    /// Rewrite line k (1-based).
    Edit(usize),
    /// Add a line at the end.
    Append,
    Delete,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::Keep),
        (1..=LINES).prop_map(Op::Edit),
        Just(Op::Append),
        Just(Op::Delete),
    ]
}

fn base(i: usize) -> Vec<String> {
    (1..=LINES).map(|j| format!("f{i} line {j}\n")).collect()
}

/// The file after `op` by `side`; `None`: deleted.
fn apply(lines: &[String], op: Op, side: &str) -> Option<Vec<String>> {
    let mut l = lines.to_vec();
    match op {
        Op::Keep => {}
        Op::Edit(k) => l[k - 1] = format!("edited by {side}\n"),
        Op::Append => l.push(format!("appended by {side}\n")),
        Op::Delete => return None,
    }
    Some(l)
}

/// Where an op changes the file, as a line position (an append is after the last line).
fn at(op: Op) -> usize {
    match op {
        Op::Edit(k) => k,
        _ => LINES + 1,
    }
}

/// The model: the merged file, or `Err(())` for a conflict.
fn expected(i: usize, here: Op, there: Op) -> Result<Option<Vec<String>>, ()> {
    let b = base(i);
    let (p, w) = (apply(&b, here, "here"), apply(&b, there, "there"));
    if p == w || there == Op::Keep {
        return Ok(p);
    }
    if here == Op::Keep {
        return Ok(w);
    }
    if here == Op::Delete || there == Op::Delete {
        return Err(());
    }
    // Both changed lines: clean only with an unchanged line between them.
    if at(here).abs_diff(at(there)) < 2 {
        return Err(());
    }
    let mut l = b.clone();
    for (op, side) in [(here, "here"), (there, "there")] {
        if let Op::Edit(k) = op {
            l[k - 1] = format!("edited by {side}\n");
        }
    }
    for (op, side) in [(here, "here"), (there, "there")] {
        if op == Op::Append {
            l.push(format!("appended by {side}\n"));
        }
    }
    Ok(Some(l))
}

fn write_side(dir: &std::path::Path, i: usize, op: Op, side: &str) {
    let path = dir.join(format!("f{i}.txt"));
    match apply(&base(i), op, side) {
        Some(l) => std::fs::write(&path, l.concat()).unwrap(),
        None => std::fs::remove_file(&path).unwrap(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn merge_matches_the_model(
        here in proptest::collection::vec(op(), FILES),
        there in proptest::collection::vec(op(), FILES),
    ) {
        let env = Env::new();
        for i in 0..FILES {
            std::fs::write(env.root().join(format!("f{i}.txt")), base(i).concat()).unwrap();
        }
        let ws = env.open();
        let wt = ws
            .create_worktree("S", "w", &WorktreeCreateOptions::default())
            .unwrap();
        let wt = std::path::PathBuf::from(wt.path);
        for i in 0..FILES {
            write_side(env.root(), i, here[i], "here");
            write_side(&wt, i, there[i], "there");
        }
        let before = read_tree(env.root());
        let model: Vec<_> = (0..FILES).map(|i| expected(i, here[i], there[i])).collect();
        let m = ws
            .merge_worktree("S", "w", &WorktreeMergeOptions::default())
            .unwrap();
        let conflicts = model.iter().filter(|r| r.is_err()).count();
        prop_assert_eq!(m.outcome.conflicts.len(), conflicts, "{:?}", m.outcome.conflicts);
        if conflicts > 0 {
            prop_assert!(!m.outcome.applied);
            prop_assert_eq!(read_tree(env.root()), before);
        } else {
            for (i, r) in model.into_iter().enumerate() {
                let got = std::fs::read_to_string(env.root().join(format!("f{i}.txt"))).ok();
                prop_assert_eq!(got, r.unwrap().map(|l| l.concat()), "f{}", i);
            }
        }
    }
}
