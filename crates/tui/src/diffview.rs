//! A diff as the diff pane shows it: the service's structured diff flattened to tagged lines,
//! each file introduced by a summary line, binary files summarised, and a huge file cut after
//! a budget of lines with a line saying how much more there is (`+` shows the next part).

use rewind_api::{Diff, Tag};

/// Lines of one file shown before it is cut; each `+` shows this many more.
pub const FILE_BUDGET: usize = 2000;

/// One line of the pane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiffLine {
    /// How it is drawn.
    pub tag: LineTag,
    /// Its text (a patch line with its `+`, `-` or ` ` marker).
    pub text: String,
}

/// What a line of the pane is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineTag {
    /// A file's summary: action, path, lines added and removed.
    File,
    /// One of the patch's own lines.
    Patch(Tag),
    /// A file was cut here.
    Cut,
}

/// The pane's content and where it is scrolled to.
pub struct DiffView {
    /// What the diff is of, for the title.
    pub title: String,
    diff: Diff,
    /// Per file, how many of its patch lines are shown.
    shown: Vec<usize>,
    lines: Vec<DiffLine>,
    /// Index of each file's summary line in `lines`.
    starts: Vec<usize>,
    /// The first line on screen.
    pub scroll: usize,
}

impl DiffView {
    /// The view of `diff`, each file shown up to [`FILE_BUDGET`] lines.
    pub fn new(title: String, diff: Diff) -> DiffView {
        let shown = vec![FILE_BUDGET; diff.files.len()];
        let mut v = DiffView {
            title,
            diff,
            shown,
            lines: Vec::new(),
            starts: Vec::new(),
            scroll: 0,
        };
        v.layout();
        v
    }

    fn layout(&mut self) {
        self.lines.clear();
        self.starts.clear();
        for (i, f) in self.diff.files.iter().enumerate() {
            self.starts.push(self.lines.len());
            let mut summary = format!("{} {}", f.action, f.path);
            if f.binary {
                summary.push_str("  (binary: no line diff)");
            } else if f.added + f.removed > 0 {
                summary.push_str(&format!("  +{} -{}", f.added, f.removed));
            }
            if let Some(c) = &f.conflict {
                summary.push_str(&format!("  [changed since by {c}]"));
            }
            self.lines.push(DiffLine {
                tag: LineTag::File,
                text: summary,
            });
            let patch = f.lines();
            let total = patch.len();
            let keep = self.shown[i].min(total);
            self.lines
                .extend(patch.into_iter().take(keep).map(|(tag, text)| DiffLine {
                    tag: LineTag::Patch(tag),
                    text,
                }));
            if keep < total {
                self.lines.push(DiffLine {
                    tag: LineTag::Cut,
                    text: format!(
                        "… {} more lines of {} not shown (+ shows {} more)",
                        total - keep,
                        f.path,
                        FILE_BUDGET.min(total - keep)
                    ),
                });
            }
        }
        for u in &self.diff.uncovered {
            self.lines.push(DiffLine {
                tag: LineTag::File,
                text: format!(
                    "uncovered {}  ({})",
                    String::from_utf8_lossy(&u.path),
                    u.reason
                ),
            });
        }
        if self.diff.pending > 0 {
            self.lines.push(DiffLine {
                tag: LineTag::Patch(Tag::Note),
                text: format!(
                    "{} paths of an open epoch are not shown: their new content is not recorded yet",
                    self.diff.pending
                ),
            });
        }
        if self.lines.is_empty() {
            self.lines.push(DiffLine {
                tag: LineTag::Patch(Tag::Note),
                text: "no differences".into(),
            });
        }
    }

    /// Every line of the pane as laid out now.
    pub fn lines(&self) -> &[DiffLine] {
        &self.lines
    }

    /// Files, lines added and removed, for the title.
    pub fn totals(&self) -> (usize, usize, usize) {
        (self.diff.files.len(), self.diff.added, self.diff.removed)
    }

    /// Shows more of the cut file nearest above the top of the screen (or the first cut one
    /// below it); false when nothing is cut.
    pub fn show_more(&mut self) -> bool {
        let file = self
            .cut_files()
            .into_iter()
            .min_by_key(|&i| (self.starts[i] as isize - self.scroll as isize).unsigned_abs());
        let Some(i) = file else { return false };
        self.shown[i] += FILE_BUDGET;
        self.layout();
        true
    }

    fn cut_files(&self) -> Vec<usize> {
        (0..self.diff.files.len())
            .filter(|&i| {
                let end = self.starts.get(i + 1).copied().unwrap_or(self.lines.len());
                self.lines[self.starts[i]..end]
                    .iter()
                    .any(|l| l.tag == LineTag::Cut)
            })
            .collect()
    }

    /// Scrolls by `delta` lines, within `0..=len-height`.
    pub fn scroll_by(&mut self, delta: isize, height: usize) {
        let max = self.lines.len().saturating_sub(height.max(1));
        self.scroll = (self.scroll as isize + delta).clamp(0, max as isize) as usize;
    }

    /// Scrolls to the next (or previous) file's summary line.
    pub fn jump_file(&mut self, forward: bool, height: usize) {
        let target = if forward {
            self.starts.iter().find(|&&s| s > self.scroll).copied()
        } else {
            self.starts
                .iter()
                .rev()
                .find(|&&s| s < self.scroll)
                .copied()
        };
        if let Some(t) = target {
            self.scroll = t;
            self.scroll_by(0, height);
        }
    }
}
