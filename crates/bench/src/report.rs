//! Collected samples and sizes, and the Markdown report: the tables, the pass/fail list, the
//! per-repetition figures and every sample in the order it was taken (the raw data the tables
//! are computed from).

use std::fmt::Write;
use std::path::Path;
use std::time::Duration;

use crate::measure::{summarize, Sample, Summary};
use crate::scenarios::{Ctx, Opts, ISOLATION};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    Git,
    Rewind,
}

impl Tool {
    pub fn name(self) -> &'static str {
        match self {
            Tool::Git => "git",
            Tool::Rewind => "rewind",
        }
    }
}

/// (allocated, apparent) bytes.
pub type Du = (u64, u64);

/// One sample, with where and when it was taken.
struct Rec {
    ctx: Ctx,
    key: String,
    tool: Tool,
    sample: Sample,
    /// The 1-minute load average just before the step.
    load1: String,
}

/// What a many-files scenario found besides times.
#[derive(Default)]
pub struct KindReport {
    pub kind: &'static str,
    pub files: usize,
    /// Size of the tree.
    pub tree: Du,
    /// [git, rewind] x (after the first capture, after every step), first repetition.
    pub sizes: [(Du, Du); 2],
    pub pack_bytes: u64,
    /// Created files git's whole-tree `restore` / `restore-fast` left in place.
    pub restore_leftovers: usize,
    pub restore_fast_leftovers: usize,
    /// How many files both tools captured (the same set, asserted), at the first capture and
    /// after the edits.
    pub same_files: [Option<usize>; 2],
}

#[derive(Default)]
pub struct Report {
    samples: Vec<Rec>,
    /// (repetition, load averages at its start).
    reps: Vec<(Ctx, String)>,
    machine: String,
    load_start: String,
    code_rev: String,
    pub git_version: String,
    pub rewind_version: String,
    /// `git config --list --show-scope` in the run's environment.
    pub git_config: String,
    pub kinds: Vec<KindReport>,
    /// [git, rewind] x (after the first capture, after the second), first repetition.
    pub sizes_big: [(Du, Du); 2],
    pub pack_growth_big: u64,
    /// [git, rewind] apparent store bytes after capturing the huge file.
    pub size_huge: [u64; 2],
    /// How long the whole run took, set at its end.
    pub run_time: Duration,
}

const HEAD: &str = "| Step | git | Rewind | git ÷ Rewind | git peak RSS | Rewind peak RSS | git CPU | Rewind CPU |\n|---|---|---|---|---|---|---|---|";

impl Report {
    pub fn new(work: &Path, code_rev: &str) -> Report {
        Report {
            machine: machine(work),
            load_start: loadavg(),
            code_rev: code_rev.to_string(),
            ..Report::default()
        }
    }

    pub fn add(&mut self, ctx: Ctx, key: &str, tool: Tool, sample: Sample) {
        self.samples.push(Rec {
            ctx,
            key: key.to_string(),
            tool,
            sample,
            load1: loadavg().split(' ').next().unwrap_or("").to_string(),
        });
    }

    pub fn begin_rep(&mut self, ctx: Ctx) {
        self.reps.push((ctx, loadavg()));
    }

    /// The report of the many-files scenario running now.
    pub fn kind(&mut self) -> &mut KindReport {
        self.kinds
            .last_mut()
            .expect("a many-files scenario is running")
    }

    /// The summary of `key`'s samples by `tool` in `scenario` (in repetition `rep` if given).
    fn get(&self, scenario: &str, key: &str, tool: Tool, rep: Option<u32>) -> Option<Summary> {
        let v: Vec<Sample> = self
            .samples
            .iter()
            .filter(|r| r.ctx.scenario == scenario && r.key == key && r.tool == tool)
            .filter(|r| rep.is_none_or(|n| r.ctx.rep == n))
            .map(|r| r.sample)
            .collect();
        summarize(&v)
    }

    fn wall(&self, scenario: &str, key: &str, tool: Tool) -> Option<Duration> {
        self.get(scenario, key, tool, None).map(|s| s.median.wall)
    }

    /// One table row: times, ratio, peak RSS and CPU of both tools.
    fn row(&self, out: &mut String, sc: &str, label: &str, git: &str, rw: &str) {
        let (g, r) = (
            self.get(sc, git, Tool::Git, None),
            self.get(sc, rw, Tool::Rewind, None),
        );
        let time = |s: Option<Summary>| match s {
            Some(s) if s.n > 1 => format!(
                "{} ({}–{}, n={})",
                secs(s.median.wall),
                secs(s.min),
                secs(s.max),
                s.n
            ),
            Some(s) => secs(s.median.wall),
            None => "–".into(),
        };
        let ratio = match (g, r) {
            (Some(g), Some(r)) => format!("**{}**", ratio(g.median.wall, r.median.wall)),
            _ => "–".into(),
        };
        let rss = |s: Option<Summary>| s.map_or("–".into(), |s| mib(s.max_rss));
        let cpu = |s: Option<Summary>| s.map_or("–".into(), |s| secs(s.median.cpu));
        let _ = writeln!(
            out,
            "| {label} | {} | {} | {ratio} | {} | {} | {} | {} |",
            time(g),
            time(r),
            rss(g),
            rss(r),
            cpu(g),
            cpu(r)
        );
    }

    pub fn markdown(&self, o: &Opts) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "Code measured: `{}`. Machine: {}; nproc {}; {}; {}. Load average (1/5/15 min) at \
             start {}, at end {}. The run took {:.1} minutes.\n",
            self.code_rev,
            self.machine,
            nproc(),
            self.git_version,
            self.rewind_version,
            self.load_start,
            loadavg(),
            self.run_time.as_secs_f64() / 60.0
        );
        let env: Vec<String> = ISOLATION.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(
            s,
            "Isolation: every process of the run has `HOME` and `XDG_CONFIG_HOME` in a fresh \
             directory of its own, no inherited `GIT_*` or `REWIND_*` variable, and `{}`. \
             `git config --list --show-scope` in that environment prints only `{}`.\n",
            env.join(" "),
            self.git_config.replace('\t', " ")
        );
        let _ = writeln!(
            s,
            "Order: git runs first in even repetitions (0, 2, …), Rewind in odd ones, each on \
             its own fresh copy of the tree and its own fresh store.\n"
        );
        let _ = writeln!(
            s,
            "Times are wall-clock medians of whole child processes (range and count in brackets); \
             peak RSS is the largest `ru_maxrss` over the samples (for git it covers every `git` \
             process the script ran); CPU is user + system of the median sample.\n"
        );
        for k in &self.kinds {
            self.many_files(&mut s, o, k);
        }
        if o.big_mib > 0 {
            self.big(&mut s, o);
        }
        if o.huge_mib > 0 {
            let _ = writeln!(
                s,
                "\n### One {} MiB file of random bytes (written by the bench): first capture\n",
                o.huge_mib
            );
            let _ = writeln!(s, "{HEAD}");
            self.row(
                &mut s,
                "huge",
                "First capture (`track`; `init`)",
                "huge-first",
                "huge-first",
            );
            let _ = writeln!(
                s,
                "\nStore after capture: git {}, Rewind {}.",
                if o.with_git_4g {
                    mb(self.size_huge[0])
                } else {
                    "not run".into()
                },
                mb(self.size_huge[1])
            );
        }

        let _ = writeln!(s, "\n### Targets\n");
        for line in self.targets(o) {
            let _ = writeln!(s, "- {line}");
        }
        self.raw(&mut s);
        s
    }

    fn many_files(&self, s: &mut String, o: &Opts, k: &KindReport) {
        let sc = k.kind;
        let (alloc, apparent) = k.tree;
        let what = if sc == "text" {
            "source-like text, which git's zlib and Rewind's zstd compress"
        } else {
            "random bytes"
        };
        let _ = writeln!(
            s,
            "\n### Many files, {sc}: {} dirs × {} files of 1–8 KiB {what} ({} files, {} MB, {} MB on disk); repetitions: {}\n",
            o.dirs,
            o.files_per_dir,
            k.files,
            apparent / 1_000_000,
            alloc / 1_000_000,
            o.reps
        );
        let _ = writeln!(s, "{HEAD}");
        self.row(
            s,
            sc,
            "First capture (git `init` + `track`; Rewind `init`)",
            "first+init",
            "first",
        );
        self.row(s, sc, "First capture, git `track` alone", "first", "first");
        self.row(
            s,
            sc,
            "No-op capture (after a warm-up re-capture)",
            "noop",
            "noop",
        );
        self.row(
            s,
            sc,
            "Capture after editing 10, creating 5, deleting 5 files",
            "edited",
            "edited",
        );
        self.row(
            s,
            sc,
            "Whole-tree restore to the first capture: git `restore` (OpenCode's `read-tree` + `checkout-index -a -f`); Rewind `restore_tree`",
            "restore",
            "restore",
        );
        self.row(
            s,
            sc,
            "Whole-tree restore to the first capture: git `restore-fast` (`read-tree -u --reset`, right after a `track`); Rewind `restore_tree`",
            "restore-fast",
            "restore",
        );
        self.row(
            s,
            sc,
            "Restore of the 20 paths (git `revert TREE paths…`; Rewind `restore_tree` scoped)",
            "revert",
            "revert",
        );
        let _ = writeln!(
            s,
            "\n#### The op log (issue 3), {sc} tree, same run\n\n{HEAD}"
        );
        self.row(
            s,
            sc,
            "Exact epoch around one 4 KiB write (`epoch begin --path`, write, `epoch end`: two processes; git: none)",
            "-",
            "exact",
        );
        self.row(
            s,
            sc,
            "Exact epoch around one 4 KiB write in one process (guarded `rewind write`; git: none)",
            "-",
            "guarded-write",
        );
        self.row(
            s,
            sc,
            "Exact epoch around one 4 KiB write with no process started (library `begin_epoch`, write, `end_epoch` on an open workspace; git: none)",
            "-",
            "exact-lib",
        );
        self.row(
            s,
            sc,
            "Opaque epoch around `true` (`rewind exec -- true`) vs git's no-op `track`",
            "noop",
            "exec-noop",
        );
        self.row(
            s,
            sc,
            "Rewind a turn that changed 20 files (`rewind restore CHECKPOINT`) vs git's `restore`",
            "restore",
            "turn-rewind",
        );
        self.row(
            s,
            sc,
            "Rewind a turn that changed 20 files vs git's `restore-fast`",
            "restore-fast",
            "turn-rewind",
        );
        self.row(
            s,
            sc,
            "Rewind a turn that changed 20 files vs git's per-file `revert TREE paths…`",
            "revert",
            "turn-rewind",
        );
        let _ = writeln!(s);
        match k.same_files {
            [Some(a), Some(b)] => {
                let _ = writeln!(
                    s,
                    "Files captured (asserted in every repetition): git and Rewind captured the same {a} files at the first capture (the files on disk) and the same {b} after the edits."
                );
            }
            _ => {
                let _ = writeln!(s, "Files captured: not compared.");
            }
        }
        let _ = writeln!(
            s,
            "Created files left in place by git's whole-tree restores: `restore` {} of 5 (`checkout-index` never deletes), `restore-fast` {} of 5; Rewind's restore removed them (asserted).",
            k.restore_leftovers, k.restore_fast_leftovers
        );
        let [(g0, g1), (r0, r1)] = k.sizes;
        let _ = writeln!(
            s,
            "\n| Store (first repetition) | git shadow dir | `$REWIND_HOME` | git ÷ Rewind |\n|---|---|---|---|"
        );
        size_row(s, "After the first capture, on disk", g0.0, r0.0);
        size_row(s, "After the first capture, apparent bytes", g0.1, r0.1);
        size_row(s, "After all steps, on disk", g1.0, r1.0);
        let _ = writeln!(
            s,
            "\nRewind pack bytes after all steps: {}.",
            mb(k.pack_bytes)
        );

        let _ = writeln!(
            s,
            "\n#### Per repetition, {sc} (medians within the repetition)\n\n\
             | rep | first | load at start | git first `track` | Rewind `init` | ratio | git no-op | Rewind no-op | git `restore` | git `restore-fast` | Rewind `restore_tree` | git `revert` | Rewind turn rewind |\n\
             |---|---|---|---|---|---|---|---|---|---|---|---|---|"
        );
        for (ctx, load) in self.reps.iter().filter(|(c, _)| c.scenario == sc) {
            let w = |key: &str, tool: Tool| self.get(sc, key, tool, Some(ctx.rep));
            let t =
                |key: &str, tool: Tool| w(key, tool).map_or("–".into(), |x| secs(x.median.wall));
            let r = match (w("first", Tool::Git), w("first", Tool::Rewind)) {
                (Some(g), Some(r)) => ratio(g.median.wall, r.median.wall),
                _ => "–".into(),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {load} | {} | {} | {r} | {} | {} | {} | {} | {} | {} | {} |",
                ctx.rep,
                ctx.first.name(),
                t("first", Tool::Git),
                t("first", Tool::Rewind),
                t("noop", Tool::Git),
                t("noop", Tool::Rewind),
                t("restore", Tool::Git),
                t("restore-fast", Tool::Git),
                t("restore", Tool::Rewind),
                t("revert", Tool::Git),
                t("turn-rewind", Tool::Rewind),
            );
        }
    }

    fn big(&self, s: &mut String, o: &Opts) {
        let _ = writeln!(
            s,
            "\n### One {} MiB file, then 1 MiB overwritten in the middle; repetitions: {}\n",
            o.big_mib, o.big_reps
        );
        let _ = writeln!(s, "{HEAD}");
        self.row(
            s,
            "big",
            "First capture (`track`; `init`)",
            "big-first",
            "big-first",
        );
        self.row(
            s,
            "big",
            "Capture after the overwrite",
            "big-second",
            "big-second",
        );
        let [(g0, g1), (r0, r1)] = self.sizes_big;
        let _ = writeln!(
            s,
            "\n| Store (apparent bytes, first repetition) | git shadow dir | `$REWIND_HOME` |\n|---|---|---|"
        );
        let _ = writeln!(
            s,
            "| After the first capture | {} | {} |",
            mb(g0.1),
            mb(r0.1)
        );
        let _ = writeln!(
            s,
            "| Growth from the second capture | {} | {} (packs: {}) |",
            mb(g1.1.saturating_sub(g0.1)),
            mb(r1.1.saturating_sub(r0.1)),
            mb(self.pack_growth_big)
        );
    }

    fn targets(&self, o: &Opts) -> Vec<String> {
        let mark = |ok: bool| if ok { "**PASS**" } else { "**FAIL**" };
        let mut v = Vec::new();
        for k in &self.kinds {
            let sc = k.kind;
            let w = |key: &str, tool: Tool| self.wall(sc, key, tool);
            if let (Some(g), Some(r)) = (w("first", Tool::Git), w("first", Tool::Rewind)) {
                let x = g.as_secs_f64() / r.as_secs_f64();
                v.push(format!(
                    "{} ({sc}) first capture ≥ 6x faster than git's first `track`: {} vs {} = {x:.1}x",
                    mark(x >= 6.0),
                    secs(g),
                    secs(r)
                ));
            }
            if let (Some(g), Some(r)) = (w("noop", Tool::Git), w("noop", Tool::Rewind)) {
                v.push(format!(
                    "{} ({sc}) no-op capture no slower than git's no-op `track`: {} vs {}",
                    mark(r <= g),
                    secs(g),
                    secs(r)
                ));
            }
            if let Some(r) = w("guarded-write", Tool::Rewind) {
                v.push(format!(
                    "{} ({sc}) exact epoch around one 4 KiB write under 10 ms: {} (one process, `rewind write`)",
                    mark(r.as_secs_f64() < 0.010),
                    secs(r)
                ));
            }
            // For reference, not the target's measure: the same epoch split over two processes
            // (each pays a process start and a workspace open) and with none at all.
            if let Some(r) = w("exact", Tool::Rewind) {
                v.push(format!(
                    "(reference, {sc}) the same exact epoch over two processes, `epoch begin` + `epoch end`: {}{}",
                    secs(r),
                    w("exact-lib", Tool::Rewind)
                        .map(|l| format!("; in a long-running process (library): {}", secs(l)))
                        .unwrap_or_default()
                ));
            }
            if let (Some(g), Some(r)) = (w("noop", Tool::Git), w("exec-noop", Tool::Rewind)) {
                v.push(format!(
                    "{} ({sc}) opaque epoch around a command that changes nothing no slower than git's no-op `track`: {} vs {}",
                    mark(r <= g),
                    secs(g),
                    secs(r)
                ));
            }
            if let Some(r) = w("turn-rewind", Tool::Rewind) {
                if let Some(g) = w("restore", Tool::Git) {
                    let x = g.as_secs_f64() / r.as_secs_f64();
                    v.push(format!(
                        "{} ({sc}) rewinding a 20-file turn ≥ 20x faster than git's whole-tree `restore` (OpenCode's): {} vs {} = {x:.0}x",
                        mark(x >= 20.0),
                        secs(g),
                        secs(r)
                    ));
                }
                // No target was set against the stat-aware restore: the ratio, for reference.
                if let Some(g) = w("restore-fast", Tool::Git) {
                    v.push(format!(
                        "(reference, {sc}) rewinding a 20-file turn vs git's whole-tree `restore-fast`: {} vs {} = {}",
                        secs(g),
                        secs(r),
                        ratio(g, r)
                    ));
                }
                if let Some(g) = w("revert", Tool::Git) {
                    v.push(format!(
                        "{} ({sc}) rewinding a 20-file turn no slower than git's per-file `revert`: {} vs {}",
                        mark(r <= g),
                        secs(g),
                        secs(r)
                    ));
                }
            }
        }
        if o.big_mib > 0 {
            let [_, (r0, r1)] = self.sizes_big;
            let growth = r1.1.saturating_sub(r0.1);
            v.push(format!(
                "{} {} MiB file with 1 MiB overwritten grows the store ≤ 8 MiB: grew {} (whole `$REWIND_HOME`)",
                mark(growth <= 8 << 20),
                o.big_mib,
                mb(growth)
            ));
        }
        if let Some(h) = self.get("huge", "huge-first", Tool::Rewind, None) {
            v.push(format!(
                "{} peak memory < 200 MiB capturing a {} MiB file: {}",
                mark(h.max_rss < 200 << 20),
                o.huge_mib,
                mib(h.max_rss)
            ));
        }
        v
    }

    /// Every sample in the order taken: the data the tables are computed from.
    fn raw(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "\n### Every sample, in the order taken\n\n\
             `first`: the tool that ran first in that repetition; `load`: the 1-minute load \
             average just before the step. Steps without a git or Rewind counterpart, and \
             `first+init` (the sum of git's `git-init` and `first`), are listed as recorded.\n\n\
             | # | scenario | rep | first | tool | step | wall ms | CPU ms | peak RSS KiB | load |\n\
             |---|---|---|---|---|---|---|---|---|---|"
        );
        for (i, r) in self.samples.iter().enumerate() {
            let _ = writeln!(
                s,
                "| {i} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {} | {} |",
                r.ctx.scenario,
                r.ctx.rep,
                r.ctx.first.name(),
                r.tool.name(),
                r.key,
                r.sample.wall.as_secs_f64() * 1000.0,
                r.sample.cpu.as_secs_f64() * 1000.0,
                r.sample.max_rss / 1024,
                r.load1
            );
        }
    }
}

fn ratio(git: Duration, rw: Duration) -> String {
    let x = git.as_secs_f64() / rw.as_secs_f64();
    if x >= 100.0 {
        format!("{x:.0}x")
    } else {
        format!("{x:.1}x")
    }
}

fn nproc() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

fn size_row(s: &mut String, label: &str, git: u64, rw: u64) {
    let _ = writeln!(
        s,
        "| {label} | {} | {} | {:.1}x |",
        mb(git),
        mb(rw),
        git as f64 / rw.max(1) as f64
    );
}

fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 10.0 {
        format!("{s:.1} s")
    } else if s >= 1.0 {
        format!("{s:.2} s")
    } else {
        format!("{:.0} ms", s * 1000.0)
    }
}

fn mib(b: u64) -> String {
    format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64)
}

fn mb(b: u64) -> String {
    format!("{:.1} MB", b as f64 / 1e6)
}

fn loadavg() -> String {
    let l = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    l.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

/// CPU model and count, RAM, kernel, and the filesystem holding `work`.
fn machine(work: &Path) -> String {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_kib: u64 = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    // The longest mount point that contains `work`.
    let mounts = read("/proc/mounts");
    let fs = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f.len() > 3 && work.starts_with(f[1])).then(|| (f[1].len(), f[2], f[3]))
        })
        .max_by_key(|m| m.0)
        .map(|(_, ty, opts)| format!("{ty} ({opts})"))
        .unwrap_or_else(|| "unknown".into());
    format!(
        "{cores} × {model}, {:.0} GiB RAM, Linux {}, work dir on {fs}",
        mem_kib as f64 / (1u64 << 20) as f64,
        read("/proc/sys/kernel/osrelease").trim()
    )
}
