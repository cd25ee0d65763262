//! The timeline of one session drawn as its conversation tree: checkpoints are the nodes
//! (bound to message ids, each pointing at its parent message), epochs hang on the node that
//! was the session's head when they began, and a rewind followed by a new message makes a
//! branch. Rows come newest first, like `jj log`, each with the graph glyphs on its left.
//!
//! Pure: built from the log entries the service returned, so it is tested without a terminal.

use rewind_api::{EpochKind, LogEntry, LogItem};

/// What one row of the timeline shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RowKind {
    /// The log entry at this index (of the entries the timeline was built from).
    Item(usize),
    /// Branches joining their parent node (drawn `├─╯`).
    Join,
    /// The log goes on past what was loaded.
    More,
}

/// One row: its graph glyphs (two columns per lane) and what it shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// Box-drawing glyphs of the tree, as wide as the widest row's graph.
    pub graph: String,
    /// What the row is.
    pub kind: RowKind,
}

/// The key epochs before the session's first checkpoint hang on.
const ROOT: &str = "\u{0}root";

/// Builds the rows of `entries` (newest first, as `log` returns them). `head` is the
/// session's current message; `keep` says which entries to show (a path filter), the
/// checkpoints always being shown as they hold the tree together; `more` adds a last row
/// saying older entries were not loaded.
pub fn build(
    entries: &[LogEntry],
    head: Option<&str>,
    keep: impl Fn(&LogEntry) -> bool,
    more: bool,
) -> Vec<Row> {
    // Each lane waits for the message key of the node that continues it further down.
    let mut lanes: Vec<Option<String>> = Vec::new();
    let mut rows: Vec<(Vec<char>, RowKind)> = Vec::new();
    let mut last_lane = 0usize;
    let active = |lanes: &Vec<Option<String>>| -> Vec<char> {
        lanes
            .iter()
            .map(|l| if l.is_some() { '│' } else { ' ' })
            .collect()
    };
    let lane_for = |lanes: &mut Vec<Option<String>>, key: &str| -> usize {
        if let Some(i) = lanes.iter().position(|l| l.as_deref() == Some(key)) {
            return i;
        }
        let i = lanes
            .iter()
            .position(Option::is_none)
            .unwrap_or(lanes.len());
        if i == lanes.len() {
            lanes.push(None);
        }
        lanes[i] = Some(key.to_string());
        i
    };
    for (idx, e) in entries.iter().enumerate() {
        match &e.item {
            LogItem::Checkpoint { checkpoint: c } => {
                let key = c.message.clone().unwrap_or_else(|| c.id.clone());
                let waiting: Vec<usize> = lanes
                    .iter()
                    .enumerate()
                    .filter(|(_, l)| l.as_deref() == Some(key.as_str()))
                    .map(|(i, _)| i)
                    .collect();
                let lane = match waiting.first() {
                    Some(&i) => i,
                    None => lane_for(&mut lanes, &key),
                };
                if waiting.len() > 1 {
                    rows.push((join_glyphs(&lanes, lane, &waiting[1..]), RowKind::Join));
                    for &i in &waiting[1..] {
                        lanes[i] = None;
                    }
                }
                let mut g = active(&lanes);
                g[lane] = if head == c.message.as_deref() && head.is_some() {
                    '@'
                } else {
                    '○'
                };
                rows.push((g, RowKind::Item(idx)));
                lanes[lane] = c
                    .parent
                    .clone()
                    .filter(|p| *p != key)
                    .or_else(|| Some(ROOT.to_string()));
                last_lane = lane;
            }
            LogItem::Epoch { epoch, .. } => {
                let lane = if epoch.kind == EpochKind::External {
                    // Not the session's: drawn where the session was at the time.
                    if lanes.get(last_lane).is_some_and(Option::is_some) {
                        last_lane
                    } else {
                        lane_for(&mut lanes, head.unwrap_or(ROOT))
                    }
                } else {
                    let key = epoch.message.as_deref().unwrap_or(ROOT);
                    // Two branches may wait for the same message: stay on the one drawn last,
                    // which is where the session was.
                    if lanes
                        .get(last_lane)
                        .is_some_and(|l| l.as_deref() == Some(key))
                    {
                        last_lane
                    } else {
                        lane_for(&mut lanes, key)
                    }
                };
                last_lane = lane;
                if !keep(e) {
                    continue;
                }
                let mut g = active(&lanes);
                g[lane] = match epoch.kind {
                    EpochKind::External => '◆',
                    EpochKind::Restore => '↺',
                    _ => '•',
                };
                rows.push((g, RowKind::Item(idx)));
            }
            // Filtered out when the log is read (not part of a session's conversation).
            LogItem::Setting { .. } => {}
        }
        while lanes.last().is_some_and(Option::is_none) {
            lanes.pop();
        }
    }
    if more {
        let mut g = active(&lanes);
        if g.is_empty() {
            g.push('┆');
        }
        for c in g.iter_mut().filter(|c| **c == '│') {
            *c = '┆';
        }
        rows.push((g, RowKind::More));
    }
    let width = rows.iter().map(|(g, _)| g.len()).max().unwrap_or(0);
    rows.into_iter()
        .map(|(g, kind)| {
            let mut graph = String::new();
            for i in 0..width {
                let c = g.get(i).copied().unwrap_or(' ');
                graph.push(c);
                // Between a join's columns the line runs on.
                let next = g.get(i + 1).copied();
                let bridge = kind == RowKind::Join
                    && matches!(c, '├' | '─' | '┼' | '┴')
                    && matches!(next, Some('─' | '┼' | '┴' | '╯'));
                graph.push(if bridge { '─' } else { ' ' });
            }
            Row { graph, kind }
        })
        .collect()
}

/// The glyphs of a join row: `lane` goes on, `merging` lanes end in it.
fn join_glyphs(lanes: &[Option<String>], lane: usize, merging: &[usize]) -> Vec<char> {
    let last = *merging.iter().max().unwrap_or(&lane);
    lanes
        .iter()
        .enumerate()
        .map(|(i, l)| {
            if i == lane {
                '├'
            } else if merging.contains(&i) {
                if i == last {
                    '╯'
                } else {
                    '┴'
                }
            } else if i > lane && i < last {
                if l.is_some() {
                    '┼'
                } else {
                    '─'
                }
            } else if l.is_some() {
                '│'
            } else {
                ' '
            }
        })
        .collect()
}
