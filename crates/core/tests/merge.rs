//! The three-way line merge a merged restore uses, against a model: random texts (LF or CRLF,
//! with or without a final newline) edited by an "agent" and a "user" on line ranges with an
//! unchanged line between them; merging the agent's output (ancestor), the text before it
//! (ours: what the restore wants back) and the text with both edits (theirs: the disk now)
//! gives the text with only the user's edits. Both editing one line differently is a conflict
//! naming that line.

use proptest::prelude::*;
use rewind_core::merge::{merge, MergeError};

/// What an editor does to one line of the original text.
#[derive(Clone, Copy, Debug)]
enum Edit {
    Keep,
    Replace,
    Delete,
    InsertAfter,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Who {
    Nobody,
    Agent,
    User,
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        Just(Edit::Replace),
        Just(Edit::Delete),
        Just(Edit::InsertAfter),
        Just(Edit::Keep)
    ]
}

fn who() -> impl Strategy<Value = Who> {
    prop_oneof![4 => Just(Who::Nobody), 1 => Just(Who::Agent), 1 => Just(Who::User)]
}

/// The text after the edits of `by` (each line's edit applied if its owner is in `by`).
fn apply(lines: &[String], plan: &[(Who, Edit)], by: &[Who], eol: &str, last_eol: bool) -> Vec<u8> {
    let mut out: Vec<String> = Vec::new();
    for (i, (line, (w, e))) in lines.iter().zip(plan).enumerate() {
        let mine = by.contains(w);
        match (mine, e) {
            (true, Edit::Replace) => out.push(format!("{w:?} replaced {i}")),
            (true, Edit::Delete) => {}
            (true, Edit::InsertAfter) => {
                out.push(line.clone());
                out.push(format!("{w:?} inserted after {i}"));
            }
            _ => out.push(line.clone()),
        }
    }
    let mut text = out.join(eol);
    if last_eol && !out.is_empty() {
        text.push_str(eol);
    }
    text.into_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn disjoint_edits_merge_to_the_users_alone(
        n in 1usize..40,
        owners in prop::collection::vec((who(), edit()), 40),
        crlf in any::<bool>(),
        last_eol in any::<bool>(),
    ) {
        let lines: Vec<String> = (0..n).map(|i| format!("line {i} of the original")).collect();
        // An unchanged line between the agent's lines and the user's.
        let mut plan: Vec<(Who, Edit)> = owners[..n].to_vec();
        for i in 1..n {
            let (prev, cur) = (plan[i - 1].0, plan[i].0);
            if prev != Who::Nobody && cur != Who::Nobody && prev != cur {
                plan[i] = (Who::Nobody, Edit::Keep);
            }
        }
        // An insertion after the last line touches a missing final newline: keep it simple.
        if !last_eol {
            if let Some(l) = plan.last_mut() { *l = (Who::Nobody, Edit::Keep); }
        }
        let eol = if crlf { "\r\n" } else { "\n" };
        let original = apply(&lines, &plan, &[], eol, last_eol);
        let agent = apply(&lines, &plan, &[Who::Agent], eol, last_eol);
        let both = apply(&lines, &plan, &[Who::Agent, Who::User], eol, last_eol);
        let user_only = apply(&lines, &plan, &[Who::User], eol, last_eol);
        let merged = merge(&agent, &original, &both);
        prop_assert_eq!(merged, Ok(user_only));
    }

    #[test]
    fn one_line_edited_by_both_is_a_conflict_naming_it(
        n in 1usize..40,
        pick in any::<prop::sample::Index>(),
        crlf in any::<bool>(),
    ) {
        let eol = if crlf { "\r\n" } else { "\n" };
        let i = pick.index(n);
        let text = |f: &dyn Fn(usize) -> String| -> Vec<u8> {
            (0..n).map(|k| f(k) + eol).collect::<String>().into_bytes()
        };
        let original = text(&|k| format!("line {k}"));
        let agent = text(&|k| if k == i { "agent".into() } else { format!("line {k}") });
        let both = text(&|k| if k == i { "user".into() } else { format!("line {k}") });
        match merge(&agent, &original, &both) {
            Err(MergeError::Overlaps(o)) => {
                prop_assert_eq!(o.len(), 1);
                prop_assert_eq!(o[0].theirs, (i + 1, i + 1));
            }
            other => prop_assert!(false, "expected a conflict, got {:?}", other),
        }
    }
}
