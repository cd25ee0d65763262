//! A rewind being previewed: what it is (a restore to a target, or an undo), the options a
//! person can change before confirming (the mode, the whole tree, merging) and the dry-run
//! plan the service returned for them.

use std::path::PathBuf;

use rewind_api::{ApiError, RestoreRequest, RestoreResponse, Service, UndoRequest};

/// What is rewound.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Restore the session to a checkpoint or to just before an epoch.
    Restore {
        /// The checkpoint or epoch id.
        target: String,
        /// How people know it (`checkpoint msg-2`, `just before epoch 3fa9c2d1`).
        label: String,
    },
    /// Undo the session's newest epoch or the named one (undoing a restore is redo).
    Undo {
        /// The epoch; `None`: the session's newest.
        epoch: Option<String>,
    },
}

/// What a restore changes: the three modes of the service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Files and the conversation head (the default).
    Both,
    /// Files only: the head stays.
    FilesOnly,
    /// The head only: "undo the message, keep the files".
    HeadOnly,
}

impl Mode {
    /// The next mode, for the key that cycles them.
    pub fn next(self) -> Mode {
        match self {
            Mode::Both => Mode::FilesOnly,
            Mode::FilesOnly => Mode::HeadOnly,
            Mode::HeadOnly => Mode::Both,
        }
    }

    /// For people.
    pub fn describe(self) -> &'static str {
        match self {
            Mode::Both => "files and conversation head",
            Mode::FilesOnly => "files only (the head stays)",
            Mode::HeadOnly => "conversation head only (the files stay)",
        }
    }
}

/// A previewed rewind.
pub struct Preview {
    /// What is rewound.
    pub action: Action,
    /// Which of files and head (restores only).
    pub mode: Mode,
    /// The whole tree (or the filtered paths) made equal to the target, whoever changed it.
    pub all: bool,
    /// Merge where someone else changed other lines; `None`: the workspace's setting.
    pub merge: Option<bool>,
    /// Only these paths (the timeline's path filter).
    pub paths: Vec<PathBuf>,
    /// The dry run's answer for the options above.
    pub plan: RestoreResponse,
    /// The first line of the plan on screen.
    pub scroll: usize,
}

impl Preview {
    /// Plans `action` with the default options.
    pub fn new(svc: &Service, action: Action, paths: Vec<PathBuf>) -> Result<Preview, ApiError> {
        let plan = run(svc, &action, Mode::Both, false, None, &paths, true, false)?;
        Ok(Preview {
            plan,
            action,
            mode: Mode::Both,
            all: false,
            merge: None,
            paths,
            scroll: 0,
        })
    }

    /// Runs the dry run again (after an option changed, or the workspace did).
    pub fn replan(&mut self, svc: &Service) -> Result<(), ApiError> {
        self.plan = self.run(svc, true, false)?;
        Ok(())
    }

    /// Runs it: a dry run, or the real thing (`force` overwriting conflicts).
    pub fn run(
        &self,
        svc: &Service,
        dry_run: bool,
        force: bool,
    ) -> Result<RestoreResponse, ApiError> {
        let (a, m, all, merge, paths) =
            (&self.action, self.mode, self.all, self.merge, &self.paths);
        run(svc, a, m, all, merge, paths, dry_run, force)
    }

    /// The title: what is rewound, for people.
    pub fn title(&self) -> String {
        match &self.action {
            Action::Restore { label, .. } => format!("Rewind to {label}"),
            Action::Undo { epoch: Some(e) } => format!("Undo epoch {}", short(e)),
            Action::Undo { epoch: None } => "Undo the session's newest epoch".into(),
        }
    }

    /// Whether this is a restore (modes apply) rather than an undo.
    pub fn is_restore(&self) -> bool {
        matches!(self.action, Action::Restore { .. })
    }

    /// The plan as lines for the pane: (style, text).
    pub fn lines(&self) -> Vec<(PlanTag, String)> {
        let p = &self.plan;
        let mut out = Vec::new();
        for s in &p.steps {
            let merged = p.merged.iter().any(|m| m.path == s.path);
            let action = if merged { "merge" } else { s.action.as_str() };
            out.push((PlanTag::Step, format!("{action:<8} {}", s.path)));
        }
        for c in &p.conflicts {
            out.push((
                PlanTag::Conflict,
                format!(
                    "conflict {}  changed since by {}",
                    String::from_utf8_lossy(&c.path),
                    c.changed_by
                ),
            ));
            if let Some(why) = &c.unmerged {
                out.push((PlanTag::Conflict, format!("         {why}")));
            }
        }
        for s in &p.skipped {
            out.push((
                PlanTag::Skipped,
                format!(
                    "cannot   {}  {}",
                    String::from_utf8_lossy(&s.path),
                    s.reason
                ),
            ));
        }
        for s in &p.kept {
            out.push((
                PlanTag::Skipped,
                format!(
                    "keep     {}  {}",
                    String::from_utf8_lossy(&s.path),
                    s.reason
                ),
            ));
        }
        if out.is_empty() {
            out.push((
                PlanTag::Note,
                "nothing to restore: no file would change".into(),
            ));
        }
        out
    }
}

/// What a line of the plan is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanTag {
    /// A path written: create, modify, delete, …
    Step,
    /// A path someone else changed since.
    Conflict,
    /// A path that cannot be restored or is kept.
    Skipped,
    /// A remark.
    Note,
}

/// The first 8 characters of an id.
pub fn short(id: &str) -> &str {
    &id[..id.len().min(8)]
}

#[allow(clippy::too_many_arguments)]
fn run(
    svc: &Service,
    action: &Action,
    mode: Mode,
    all: bool,
    merge: Option<bool>,
    paths: &[PathBuf],
    dry_run: bool,
    force: bool,
) -> Result<RestoreResponse, ApiError> {
    match action {
        Action::Restore { target, .. } => svc.restore(&RestoreRequest {
            target: target.clone(),
            dry_run,
            force,
            all,
            files_only: mode == Mode::FilesOnly,
            head_only: mode == Mode::HeadOnly,
            paths: paths.to_vec(),
            merge,
        }),
        Action::Undo { epoch } => svc.undo(&UndoRequest {
            epoch: epoch.clone(),
            dry_run,
            force,
            merge,
        }),
    }
}
