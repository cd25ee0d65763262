//! Collected samples and sizes, and the Markdown report with the pass/fail list.

use std::fmt::Write;
use std::path::Path;
use std::time::Duration;

use crate::measure::{summarize, Sample, Summary};
use crate::scenarios::Opts;

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

#[derive(Default)]
pub struct Report {
    samples: Vec<(String, Tool, Sample)>,
    machine: String,
    load_start: String,
    pub git_version: String,
    /// Size of the many-files tree.
    pub tree: Option<Du>,
    /// [git, rewind] x (after the first capture, after every step), first repetition.
    pub sizes_many: [(Du, Du); 2],
    pub pack_bytes_many: u64,
    /// [git, rewind] x (after the first capture, after the second).
    pub sizes_big: [(Du, Du); 2],
    pub pack_growth_big: u64,
    /// [git, rewind] apparent store bytes after capturing the huge file.
    pub size_huge: [u64; 2],
    /// Created files git's whole-tree `restore` left in place.
    pub git_restore_leftovers: usize,
}

impl Report {
    pub fn new(work: &Path) -> Report {
        Report {
            machine: machine(work),
            load_start: loadavg(),
            ..Report::default()
        }
    }

    pub fn add(&mut self, key: &str, tool: Tool, s: Sample) {
        self.samples.push((key.to_string(), tool, s));
    }

    fn get(&self, key: &str, tool: Tool) -> Option<Summary> {
        let v: Vec<Sample> = self
            .samples
            .iter()
            .filter(|(k, t, _)| k == key && *t == tool)
            .map(|s| s.2)
            .collect();
        summarize(&v)
    }

    fn wall(&self, key: &str, tool: Tool) -> Option<Duration> {
        self.get(key, tool).map(|s| s.median.wall)
    }

    /// One table row: times, ratio, peak RSS and CPU of both tools.
    fn row(&self, out: &mut String, label: &str, git: &str, rw: &str) {
        let (g, r) = (self.get(git, Tool::Git), self.get(rw, Tool::Rewind));
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
            (Some(g), Some(r)) => format!(
                "**{:.1}x**",
                g.median.wall.as_secs_f64() / r.median.wall.as_secs_f64()
            ),
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
        let head = "| Step | git | Rewind | git ÷ Rewind | git peak RSS | Rewind peak RSS | git CPU | Rewind CPU |\n|---|---|---|---|---|---|---|---|";
        let _ = writeln!(
            s,
            "Machine: {}; {}. Load average (1/5/15 min) at start {}, at end {}.\n",
            self.machine,
            self.git_version,
            self.load_start,
            loadavg()
        );
        let _ = writeln!(
            s,
            "Times are wall-clock medians of whole child processes (range and count in brackets); \
             peak RSS is the largest `ru_maxrss` over the samples (for git it covers every `git` \
             process the script ran); CPU is user + system of the median sample.\n"
        );

        let (alloc, apparent) = self.tree.unwrap_or_default();
        let _ = writeln!(
            s,
            "#### Many files: {} dirs × {} files, 1–8 KiB random ({} files, {} MB, {} MB on disk); fresh copies per tool: {}\n",
            o.dirs,
            o.files_per_dir,
            o.dirs * o.files_per_dir,
            apparent / 1_000_000,
            alloc / 1_000_000,
            o.reps
        );
        let _ = writeln!(s, "{head}");
        self.row(
            &mut s,
            "First capture (git `init` + `track`; Rewind `init`)",
            "first+init",
            "first",
        );
        self.row(&mut s, "First capture, git `track` alone", "first", "first");
        self.row(
            &mut s,
            "No-op capture (after a warm-up re-capture)",
            "noop",
            "noop",
        );
        self.row(
            &mut s,
            "Capture after editing 10, creating 5, deleting 5 files",
            "edited",
            "edited",
        );
        self.row(
            &mut s,
            "Whole-tree restore to the first capture (git `restore`; Rewind `restore_tree`)",
            "restore",
            "restore",
        );
        self.row(
            &mut s,
            "Restore of the 20 paths (git `revert TREE paths…`; Rewind `restore_tree` scoped)",
            "revert",
            "revert",
        );
        let _ = writeln!(
            s,
            "\n#### The op log (issue 3), same tree, same run\n\n{head}"
        );
        self.row(
            &mut s,
            "Exact epoch around one 4 KiB write (`epoch begin --path`, write, `epoch end`: two processes; git: none)",
            "-",
            "exact",
        );
        self.row(
            &mut s,
            "Exact epoch around one 4 KiB write in one process (guarded `rewind write`; git: none)",
            "-",
            "guarded-write",
        );
        self.row(
            &mut s,
            "Exact epoch around one 4 KiB write with no process started (library `begin_epoch`, write, `end_epoch` on an open workspace, as an embedding agent or MCP server; git: none)",
            "-",
            "exact-lib",
        );
        self.row(
            &mut s,
            "Opaque epoch around `true` (`rewind exec -- true`) vs git's no-op `track`",
            "noop",
            "exec-noop",
        );
        self.row(
            &mut s,
            "Rewind a turn that changed 20 files (`rewind restore CHECKPOINT`) vs git's whole-tree `restore`",
            "restore",
            "turn-rewind",
        );
        self.row(
            &mut s,
            "Rewind a turn that changed 20 files vs git's per-file `revert TREE paths…`",
            "revert",
            "turn-rewind",
        );
        let [(g0, g1), (r0, r1)] = self.sizes_many;
        let _ = writeln!(
            s,
            "\n| Store (first copy) | git shadow dir | `$REWIND_HOME` | git ÷ Rewind |\n|---|---|---|---|"
        );
        size_row(&mut s, "After the first capture, on disk", g0.0, r0.0);
        size_row(
            &mut s,
            "After the first capture, apparent bytes",
            g0.1,
            r0.1,
        );
        size_row(&mut s, "After all steps, on disk", g1.0, r1.0);
        let _ = writeln!(
            s,
            "\nRewind pack bytes after all steps: {}. ",
            mb(self.pack_bytes_many)
        );
        if self.git_restore_leftovers > 0 {
            let _ = writeln!(
                s,
                "Git's whole-tree `restore` (`read-tree` + `checkout-index -a -f`) left the {} created files in place (it never deletes); Rewind's restore removed them.",
                self.git_restore_leftovers
            );
        }

        if o.big_mib > 0 {
            let _ = writeln!(
                s,
                "\n#### One {} MiB file, then 1 MiB overwritten in the middle\n",
                o.big_mib
            );
            let _ = writeln!(s, "{head}");
            self.row(
                &mut s,
                "First capture (`track`; `init`)",
                "big-first",
                "big-first",
            );
            self.row(
                &mut s,
                "Capture after the overwrite",
                "big-second",
                "big-second",
            );
            let [(g0, g1), (r0, r1)] = self.sizes_big;
            let _ = writeln!(
                s,
                "\n| Store (apparent bytes) | git shadow dir | `$REWIND_HOME` |\n|---|---|---|"
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

        if o.huge_mib > 0 {
            let _ = writeln!(s, "\n#### One {} MiB file: first capture\n", o.huge_mib);
            let _ = writeln!(s, "{head}");
            self.row(
                &mut s,
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

        let _ = writeln!(s, "\n#### Targets\n");
        for line in self.targets(o) {
            let _ = writeln!(s, "- {line}");
        }
        s
    }

    fn targets(&self, o: &Opts) -> Vec<String> {
        let mark = |ok: bool| if ok { "**PASS**" } else { "**FAIL**" };
        let mut v = Vec::new();
        if let (Some(g), Some(r)) = (
            self.wall("first", Tool::Git),
            self.wall("first", Tool::Rewind),
        ) {
            let x = g.as_secs_f64() / r.as_secs_f64();
            v.push(format!(
                "{} first capture ≥ 6x faster than git's first `track`: {} vs {} = {x:.1}x",
                mark(x >= 6.0),
                secs(g),
                secs(r)
            ));
        }
        if let (Some(g), Some(r)) = (
            self.wall("noop", Tool::Git),
            self.wall("noop", Tool::Rewind),
        ) {
            v.push(format!(
                "{} no-op capture no slower than git's no-op `track`: {} vs {}",
                mark(r <= g),
                secs(g),
                secs(r)
            ));
        }
        if let Some(r) = self.wall("guarded-write", Tool::Rewind) {
            v.push(format!(
                "{} exact epoch around one 4 KiB write under 10 ms: {} (one process, `rewind write`)",
                mark(r.as_secs_f64() < 0.010),
                secs(r)
            ));
        }
        // For reference, not the target's measure: the same epoch split over two processes
        // (each pays a process start and a workspace open) and with none at all.
        if let Some(r) = self.wall("exact", Tool::Rewind) {
            v.push(format!(
                "(reference) the same exact epoch over two processes, `epoch begin` + `epoch end`: {}{}",
                secs(r),
                self.wall("exact-lib", Tool::Rewind)
                    .map(|l| format!("; in a long-running process (library): {}", secs(l)))
                    .unwrap_or_default()
            ));
        }
        if let (Some(g), Some(r)) = (
            self.wall("noop", Tool::Git),
            self.wall("exec-noop", Tool::Rewind),
        ) {
            v.push(format!(
                "{} opaque epoch around a command that changes nothing no slower than git's no-op `track`: {} vs {}",
                mark(r <= g),
                secs(g),
                secs(r)
            ));
        }
        if let (Some(g), Some(gr), Some(r)) = (
            self.wall("restore", Tool::Git),
            self.wall("revert", Tool::Git),
            self.wall("turn-rewind", Tool::Rewind),
        ) {
            let x = g.as_secs_f64() / r.as_secs_f64();
            v.push(format!(
                "{} rewinding a 20-file turn ≥ 20x faster than git's whole-tree `restore`: {} vs {} = {x:.0}x",
                mark(x >= 20.0),
                secs(g),
                secs(r)
            ));
            v.push(format!(
                "{} rewinding a 20-file turn no slower than git's per-file `revert`: {} vs {}",
                mark(r <= gr),
                secs(gr),
                secs(r)
            ));
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
        if let Some(h) = self.get("huge-first", Tool::Rewind) {
            v.push(format!(
                "{} peak memory < 200 MiB capturing a {} MiB file: {}",
                mark(h.max_rss < 200 << 20),
                o.huge_mib,
                mib(h.max_rss)
            ));
        }
        v
    }
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
