//! What Claude Code's `/rewind` command runs (`rewind hook command rewind [ARG…]`): the text
//! the user sees, and the model reads, for the session's checkpoints, a previewed rewind and its
//! undo. Three steps, each one command the user types, so nothing is written before they have
//! seen the plan:
//!
//! - `/rewind`: the session's last 10 checkpoints (one per prompt), numbered from 1, the newest;
//! - `/rewind N`: what rewinding the files to checkpoint N would do (a dry run: nothing written);
//! - `/rewind N yes`: do it; `/rewind undo` takes the rewind back.
//!
//! The numbering is stable while the user types these: the hook makes no checkpoint for the
//! prompts of Rewind's own commands.

use rewind_api::{
    ApiError, CheckpointRow, LogItem, LogRequest, RestoreRequest, RestoreResponse, Service,
    UndoRequest,
};

/// How many checkpoints `/rewind` lists.
pub const LISTED: usize = 10;

/// The prompts of Rewind's own slash commands, which get no checkpoint.
pub fn is_own_command(prompt: &str) -> bool {
    let word = prompt.split_whitespace().next().unwrap_or_default();
    matches!(word, "/rewind" | "/sandbox")
}

/// Runs `/rewind ARGS` for the service's session; the text to show.
pub fn rewind(svc: &Service, args: &[String]) -> Result<String, ApiError> {
    let args: Vec<&str> = args.iter().flat_map(|a| a.split_whitespace()).collect();
    match args.as_slice() {
        [] => list(svc),
        ["undo"] => {
            let out = svc.undo(&UndoRequest::default())?;
            Ok(summary(
                &out,
                "Undone: the last rewind (or change) of this session was taken back.",
            ))
        }
        [n] => preview(svc, number(n)?),
        [n, "yes"] => apply(svc, number(n)?),
        _ => Err(usage()),
    }
}

fn usage() -> ApiError {
    ApiError::usage(
        "usage: /rewind (list the checkpoints), /rewind N (preview), /rewind N yes (rewind), \
         /rewind undo",
    )
}

fn number(s: &str) -> Result<usize, ApiError> {
    match s.parse::<usize>() {
        Ok(n) if (1..=LISTED).contains(&n) => Ok(n),
        _ => Err(usage()),
    }
}

/// The session's checkpoints, newest first.
fn checkpoints(svc: &Service) -> Result<Vec<CheckpointRow>, ApiError> {
    let log = svc.log(&LogRequest {
        all_sessions: false,
        limit: 0,
    })?;
    Ok(log
        .items
        .into_iter()
        .filter_map(|e| match e.item {
            LogItem::Checkpoint { checkpoint } => Some(checkpoint),
            _ => None,
        })
        .take(LISTED)
        .collect())
}

fn nth(svc: &Service, n: usize) -> Result<CheckpointRow, ApiError> {
    checkpoints(svc)?.into_iter().nth(n - 1).ok_or_else(|| {
        ApiError::usage(format!(
            "this session has no checkpoint {n}; /rewind lists them"
        ))
    })
}

fn name(c: &CheckpointRow) -> String {
    match &c.label {
        Some(l) => format!("{l:?}"),
        None => c.id.clone(),
    }
}

fn list(svc: &Service) -> Result<String, ApiError> {
    let all = checkpoints(svc)?;
    if all.is_empty() {
        return Ok(
            "This session has no checkpoints yet: Rewind makes one at each prompt.\n".into(),
        );
    }
    let mut out = String::from(
        "Checkpoints of this session (one per prompt), newest first. Rewinding to one puts the \
         files back as they were when that prompt was sent; other sessions' and your own edits \
         are kept.\n\n",
    );
    for (i, c) in all.iter().enumerate() {
        out.push_str(&format!(
            "  {:>2}  {}  {}\n",
            i + 1,
            &c.id[..10.min(c.id.len())],
            name(c)
        ));
    }
    out.push_str(
        "\nType /rewind N to see what rewinding to N would change (nothing is written).\n",
    );
    Ok(out)
}

fn preview(svc: &Service, n: usize) -> Result<String, ApiError> {
    let c = nth(svc, n)?;
    let out = svc.restore(&RestoreRequest {
        target: c.id.clone(),
        dry_run: true,
        files_only: true,
        ..Default::default()
    })?;
    let mut text = summary(&out, &format!("Rewinding to {n} ({}) would:", name(&c)));
    if out.refused {
        text.push_str(
            "\nResolve the conflicts first, or run `rewind restore --force` in a terminal.\n",
        );
    } else if !out.steps.is_empty() {
        text.push_str(&format!(
            "\nType /rewind {n} yes to do it; /rewind undo takes it back.\n"
        ));
    }
    Ok(text)
}

fn apply(svc: &Service, n: usize) -> Result<String, ApiError> {
    let c = nth(svc, n)?;
    let out = svc.restore(&RestoreRequest {
        target: c.id.clone(),
        files_only: true,
        ..Default::default()
    })?;
    let mut text = summary(&out, &format!("Rewound the files to {n} ({}):", name(&c)));
    if out.applied {
        text.push_str("\n/rewind undo takes it back. The conversation itself is not rewound.\n");
    }
    Ok(text)
}

/// The plan or result, one line per path.
fn summary(out: &RestoreResponse, head: &str) -> String {
    let mut text = format!("{head}\n");
    if out.steps.is_empty() && out.conflicts.is_empty() {
        text.push_str("  nothing: the files are already as they were then\n");
    }
    for s in &out.steps {
        text.push_str(&format!("  {:<7} {}\n", s.action, s.path));
    }
    if !out.conflicts.is_empty() {
        text.push_str("Refused, nothing written: changed by someone else since:\n");
        for c in &out.conflicts {
            text.push_str(&format!(
                "  {}  (by {})\n",
                String::from_utf8_lossy(&c.path),
                c.changed_by
            ));
        }
    }
    for s in &out.skipped {
        text.push_str(&format!(
            "  left alone: {} ({})\n",
            String::from_utf8_lossy(&s.path),
            s.reason
        ));
    }
    text
}
