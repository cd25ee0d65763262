//! The scenarios: many-file trees (random bytes, and source-like text git compresses), one big
//! file with a small overwrite, and the peak memory of capturing a huge file. Each runs through
//! git and Rewind in fresh directories of the same run; which tool goes first alternates
//! between repetitions.

use std::collections::BTreeSet;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};

use crate::measure::{self, du, Sample};
use crate::report::{KindReport, Report, Tool};

/// The baseline scripts, built into the binary so a run needs nothing outside the repository.
const GIT_SHADOW: &str = include_str!("../scripts/git-shadow-baseline.sh");
const MKTREE: &str = include_str!("../scripts/mktree.py");

/// What the many-files tree holds (`mktree.py --kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// Random bytes: nothing compresses.
    Binary,
    /// Source-like text: git's zlib and Rewind's zstd both compress it.
    Text,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Binary => "binary",
            Kind::Text => "text",
        }
    }

    /// The extension mktree.py gives the files.
    fn ext(self) -> &'static str {
        match self {
            Kind::Binary => "bin",
            Kind::Text => "rs",
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct Opts {
    /// Directory for trees, shadow repositories and stores (fresh per run; removed at the end
    /// unless --keep).
    #[arg(long)]
    pub work: PathBuf,
    /// The `rewind` binary [default: beside this binary].
    #[arg(long)]
    pub rewind: Option<PathBuf>,
    /// The many-files trees to run, in order.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Kind::Binary, Kind::Text])]
    pub kinds: Vec<Kind>,
    /// Directories of the many-files trees (mktree.py --dirs).
    #[arg(long, default_value_t = 400)]
    pub dirs: u32,
    /// Files per directory (mktree.py --files-per-dir).
    #[arg(long, default_value_t = 100)]
    pub files_per_dir: u32,
    /// Repetitions of each many-files scenario, each on fresh copies (medians are reported);
    /// git goes first in even repetitions, Rewind in odd ones.
    #[arg(long, default_value_t = 4)]
    pub reps: u32,
    /// Size of the big file in MiB (0 skips the scenario).
    #[arg(long, default_value_t = 256)]
    pub big_mib: u64,
    /// Repetitions of the big-file scenario (the first tool alternates as above).
    #[arg(long, default_value_t = 2)]
    pub big_reps: u32,
    /// Size of the huge file for the memory check in MiB (0 skips the scenario).
    #[arg(long, default_value_t = 4096)]
    pub huge_mib: u64,
    /// Also run git on the huge file (slow).
    #[arg(long)]
    pub with_git_4g: bool,
    /// Keep the work directory.
    #[arg(long)]
    pub keep: bool,
    /// Also write the Markdown report to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The code measured, as the report should name it (crates/bench/scripts/run.sh passes the commit).
    #[arg(long, default_value = "unknown")]
    pub code_rev: String,
}

pub fn run(opts: &Opts) -> Result<()> {
    let me = std::env::current_exe()?;
    let rewind = match &opts.rewind {
        Some(p) => p.clone(),
        None => me.with_file_name("rewind"),
    };
    ensure!(rewind.is_file(), "no rewind binary at {}", rewind.display());
    ensure!(opts.reps >= 1, "--reps must be at least 1");
    std::fs::create_dir_all(&opts.work)?;
    let work = opts.work.canonicalize()?;
    isolate(&work.join("home"))?;
    let scripts = work.join("scripts");
    std::fs::create_dir_all(&scripts)?;
    std::fs::write(scripts.join("git-shadow-baseline.sh"), GIT_SHADOW)?;
    std::fs::write(scripts.join("mktree.py"), MKTREE)?;
    let mut b = Bench {
        opts,
        work: work.clone(),
        scripts,
        rewind,
        me,
        start: Instant::now(),
        report: Report::new(&work, &opts.code_rev),
        ctx: Ctx::default(),
    };
    let result = b.all();
    if !opts.keep {
        b.log(format_args!("removing {}", work.display()));
        std::fs::remove_dir_all(&work).ok();
    }
    result?;
    b.report.run_time = b.start.elapsed();
    let md = b.report.markdown(opts);
    print!("{md}");
    if let Some(out) = &opts.out {
        std::fs::write(out, &md).with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}

/// The environment every child (git, rewind, cp, python3) inherits and the library calls made
/// in this process see: no user or system git config (`GIT_CONFIG_GLOBAL=/dev/null`,
/// `GIT_CONFIG_NOSYSTEM=1`), no hook (`core.hooksPath=/dev/null` as command-line config, which
/// wins over every file), a `HOME` and `XDG_CONFIG_HOME` of its own (Rewind reads the global
/// excludes file from there, as git would), and no inherited `GIT_*` or `REWIND_*` variable.
fn isolate(home: &Path) -> Result<()> {
    std::fs::create_dir_all(home.join(".config"))?;
    let inherited: Vec<_> = std::env::vars_os()
        .map(|(k, _)| k)
        .filter(|k| {
            let k = k.to_string_lossy();
            k.starts_with("GIT_") || k.starts_with("REWIND_") || k == "XDG_CONFIG_HOME"
        })
        .collect();
    // Called before this process starts any thread or child.
    for k in inherited {
        std::env::remove_var(k);
    }
    std::env::set_var("HOME", home);
    std::env::set_var("XDG_CONFIG_HOME", home.join(".config"));
    for (k, v) in ISOLATION {
        std::env::set_var(k, v);
    }
    Ok(())
}

/// The git isolation variables, as the report lists them.
pub const ISOLATION: [(&str, &str); 5] = [
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_CONFIG_COUNT", "1"),
    ("GIT_CONFIG_KEY_0", "core.hooksPath"),
    ("GIT_CONFIG_VALUE_0", "/dev/null"),
];

/// Where the samples being taken belong (for the raw sample list and per-repetition tables).
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    pub scenario: &'static str,
    pub rep: u32,
    pub first: Tool,
}

impl Default for Ctx {
    fn default() -> Ctx {
        Ctx {
            scenario: "-",
            rep: 0,
            first: Tool::Git,
        }
    }
}

struct Bench<'a> {
    opts: &'a Opts,
    work: PathBuf,
    scripts: PathBuf,
    rewind: PathBuf,
    me: PathBuf,
    start: Instant,
    report: Report,
    ctx: Ctx,
}

/// The edits applied to the many-files tree: 10 files rewritten, 5 created, 5 deleted.
struct Edits {
    kind: Kind,
    edited: Vec<String>,
    created: Vec<String>,
    deleted: Vec<String>,
}

impl Edits {
    fn new(kind: Kind, dirs: u32, fpd: u32) -> Result<Edits> {
        ensure!(
            dirs >= 1 && fpd >= 2,
            "need at least 1 dir and 2 files per dir"
        );
        let ext = kind.ext();
        let path = |d: u32, f: u32| format!("d{:04}/f{:03}.{ext}", d % dirs, f % fpd);
        let edited: Vec<_> = (0..10).map(|k| path(k * dirs / 10, 3 + k)).collect();
        let deleted: Vec<_> = (0..5)
            .map(|k| path(k * dirs / 5 + dirs / 10 + 1, fpd - 1 - k))
            .collect();
        let created = (0..5)
            .map(|k| format!("d{:04}/new{k}.{ext}", (k * dirs / 5) % dirs))
            .collect();
        let mut all: Vec<&String> = edited.iter().chain(&deleted).collect();
        all.sort();
        all.dedup();
        ensure!(
            all.len() == 15,
            "edit and delete sets overlap; use more files"
        );
        Ok(Edits {
            kind,
            edited,
            created,
            deleted,
        })
    }

    fn paths(&self) -> impl Iterator<Item = &String> {
        self.edited.iter().chain(&self.created).chain(&self.deleted)
    }

    /// Applies the edits; `variant` changes the written content.
    fn apply(&self, root: &Path, variant: u64) -> Result<()> {
        for (k, p) in self.edited.iter().chain(&self.created).enumerate() {
            std::fs::write(
                root.join(p),
                content(self.kind, variant * 1000 + k as u64, 4096),
            )?;
        }
        for p in &self.deleted {
            match std::fs::remove_file(root.join(p)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
        Ok(())
    }

    /// Checks that `root` is back to `master` on the edited paths. Returns how many created
    /// files were left in place (a restore that does not delete them is noted, not failed).
    fn verify(&self, master: &Path, root: &Path, who: &str) -> Result<usize> {
        for p in self.edited.iter().chain(&self.deleted) {
            let want = std::fs::read(master.join(p))?;
            let got = std::fs::read(root.join(p)).with_context(|| format!("{who}: {p} missing"))?;
            ensure!(want == got, "{who}: {p} was not restored");
        }
        Ok(self
            .created
            .iter()
            .filter(|p| root.join(p).exists())
            .count())
    }
}

/// Deterministic pseudo-random bytes (xorshift64*).
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Content of the tree's kind: random bytes, or lines of lower-case words.
fn content(kind: Kind, seed: u64, len: usize) -> Vec<u8> {
    let bytes = noise(seed, len);
    match kind {
        Kind::Binary => bytes,
        Kind::Text => bytes
            .iter()
            .enumerate()
            .map(|(i, b)| match (i % 64, b % 8) {
                (63, _) => b'\n',
                (_, 0) => b' ',
                _ => b'a' + b % 26,
            })
            .collect(),
    }
}

/// Writes `mib` MiB of pseudo-random bytes (incompressible) to `file`.
fn write_noise_file(file: &Path, mib: u64) -> Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(file)?);
    for k in 0..mib {
        f.write_all(&noise(0x5EED_0000 + k, 1 << 20))?;
    }
    f.into_inner()?.sync_all()?;
    Ok(())
}

/// Overwrites 1 MiB in the middle of `file`.
fn overwrite_middle(file: &Path) -> Result<()> {
    let mut f = std::fs::OpenOptions::new().write(true).open(file)?;
    let len = f.metadata()?.len();
    f.seek(SeekFrom::Start(len / 2))?;
    f.write_all(&noise(7, 1 << 20))?;
    f.sync_all()?;
    Ok(())
}

/// `sync(2)`: flush all dirty data, so a measurement does not pay for earlier steps' writes.
fn settle_writeback() {
    // SAFETY: no arguments, no memory.
    unsafe { libc::sync() };
}

fn sum(a: Sample, b: Sample) -> Sample {
    Sample {
        wall: a.wall + b.wall,
        cpu: a.cpu + b.cpu,
        max_rss: a.max_rss.max(b.max_rss),
    }
}

/// The regular files and symlinks under `root` (relative paths), `.git` directories skipped.
fn files_on_disk(root: &Path) -> Result<BTreeSet<Vec<u8>>> {
    use std::os::unix::ffi::OsStrExt;
    fn walk(dir: &Path, prefix: &[u8], out: &mut BTreeSet<Vec<u8>>) -> Result<()> {
        for e in std::fs::read_dir(dir).with_context(|| format!("{}", dir.display()))? {
            let e = e?;
            let name = e.file_name();
            let mut p = prefix.to_vec();
            if !p.is_empty() {
                p.push(b'/');
            }
            p.extend_from_slice(name.as_bytes());
            let ty = e.file_type()?;
            if ty.is_dir() {
                if name != ".git" {
                    walk(&e.path(), &p, out)?;
                }
            } else {
                out.insert(p);
            }
        }
        Ok(())
    }
    let mut out = BTreeSet::new();
    walk(root, b"", &mut out)?;
    Ok(out)
}

/// The paths (files, symlinks, uncovered files) of the Rewind tree `hex`, read from the store.
fn rewind_files(root: &Path, home: &Path, hex: &str) -> Result<BTreeSet<Vec<u8>>> {
    use rewind_store::{EntryKind, ObjectId, Store};
    fn walk(
        store: &Store,
        id: &ObjectId,
        prefix: &[u8],
        out: &mut BTreeSet<Vec<u8>>,
    ) -> Result<()> {
        for e in store.read_tree(id)?.entries() {
            let mut p = prefix.to_vec();
            if !p.is_empty() {
                p.push(b'/');
            }
            p.extend_from_slice(&e.name);
            match e.kind {
                EntryKind::Dir => walk(store, &e.id, &p, out)?,
                _ => {
                    out.insert(p);
                }
            }
        }
        Ok(())
    }
    let ws = rewind_core::Workspace::open(
        root,
        &rewind_core::OpenOptions {
            force: false,
            home: Some(home.to_path_buf()),
        },
    )?;
    let id = ObjectId::from_hex(hex).with_context(|| format!("bad tree id {hex}"))?;
    let mut out = BTreeSet::new();
    walk(ws.store(), &id, b"", &mut out)?;
    Ok(out)
}

/// `None` if the sets are equal, else a description of (up to 5 of) the differences.
fn set_difference(
    a_name: &str,
    a: &BTreeSet<Vec<u8>>,
    b_name: &str,
    b: &BTreeSet<Vec<u8>>,
) -> Option<String> {
    if a == b {
        return None;
    }
    let show = |x: &BTreeSet<Vec<u8>>, y: &BTreeSet<Vec<u8>>| {
        let d: Vec<_> = x.difference(y).collect();
        let list: Vec<_> = d
            .iter()
            .take(5)
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        format!("{} ({})", d.len(), list.join(", "))
    };
    Some(format!(
        "{a_name}: {} files, {b_name}: {} files; only {a_name}: {}; only {b_name}: {}",
        a.len(),
        b.len(),
        show(a, b),
        show(b, a)
    ))
}

/// What one tool's part of a many-files repetition leaves for the file-set check.
struct Captured {
    /// The tree of the first capture, and of the capture after the edits.
    trees: [String; 2],
    /// The git shadow directory, or `$REWIND_HOME`.
    store: PathBuf,
    /// The work tree.
    root: PathBuf,
}

impl Bench<'_> {
    fn log(&self, msg: std::fmt::Arguments) {
        eprintln!("[{:7.1}s] {msg}", self.start.elapsed().as_secs_f64());
    }

    fn all(&mut self) -> Result<()> {
        self.report.git_version = self.untimed(Command::new("git").arg("--version"))?;
        self.report.rewind_version = self.untimed(Command::new(&self.rewind).arg("--version"))?;
        // The git configuration every git process of the run sees, from a directory outside
        // any repository: only the command-line hooksPath (asserted).
        let config = self.untimed(
            Command::new("git")
                .args(["config", "--list", "--show-scope"])
                .current_dir(self.work.join("home")),
        )?;
        ensure!(
            config.lines().all(|l| l.starts_with("command\t")),
            "git still sees configuration outside the command line:\n{config}"
        );
        self.report.git_config = config;
        for &kind in &self.opts.kinds {
            self.many_files(kind)?;
        }
        if self.opts.big_mib > 0 {
            self.big_file()?;
        }
        if self.opts.huge_mib > 0 {
            self.huge_file()?;
        }
        Ok(())
    }

    /// Runs and records one measured step.
    fn step(&mut self, key: &str, tool: Tool, cmd: &mut Command) -> Result<(Sample, String)> {
        // Start every measured step with nothing left to write back: otherwise the first fsync
        // of a step (Rewind commits durably; git mostly does not) waits, on ext4's ordered
        // journal, for the data earlier steps left dirty (a 460 MB `cp -a` of the tree).
        settle_writeback();
        let (s, out) = measure::run(cmd)?;
        self.record(key, tool, s);
        Ok((s, out))
    }

    fn record(&mut self, key: &str, tool: Tool, s: Sample) {
        self.log(format_args!(
            "{:<6} {:<6} r{} {key:<16} {:>9.3} s  cpu {:>8.3} s  rss {:>6} MiB",
            self.ctx.scenario,
            tool.name(),
            self.ctx.rep,
            s.wall.as_secs_f64(),
            s.cpu.as_secs_f64(),
            s.max_rss >> 20
        ));
        self.report.add(self.ctx, key, tool, s);
    }

    fn untimed(&self, cmd: &mut Command) -> Result<String> {
        Ok(measure::run(cmd)?.1.trim().to_string())
    }

    fn mktree(&self, root: &Path, args: &[String]) -> Result<()> {
        self.log(format_args!("mktree {} {}", root.display(), args.join(" ")));
        std::fs::create_dir_all(root)?; // mktree.py --dirs 0 does not make the root
        let out = self.untimed(
            Command::new("python3")
                .arg(self.scripts.join("mktree.py"))
                .arg(root)
                .args(args),
        )?;
        self.log(format_args!("mktree: {out}"));
        Ok(())
    }

    fn copy(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::create_dir_all(to.parent().expect("has parent"))?;
        self.untimed(Command::new("cp").arg("-a").arg(from).arg(to))?;
        Ok(())
    }

    /// `git-shadow-baseline.sh CMD WORKTREE SHADOW_GIT_DIR ARGS...` (isolated: see [`isolate`]).
    fn git(&self, cmd: &str, wt: &Path, gd: &Path, args: &[&str]) -> Command {
        let mut c = Command::new("bash");
        c.arg(self.scripts.join("git-shadow-baseline.sh"))
            .arg(cmd)
            .arg(wt)
            .arg(gd)
            .args(args);
        c
    }

    /// The paths of the git tree `tree` in the shadow repository `gd`.
    fn git_files(&self, gd: &Path, tree: &str) -> Result<BTreeSet<Vec<u8>>> {
        let out = Command::new("git")
            .arg("--git-dir")
            .arg(gd)
            .args(["ls-tree", "-r", "-z", "--name-only", tree])
            .output()?;
        ensure!(
            out.status.success(),
            "git ls-tree {tree}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(out
            .stdout
            .split(|&b| b == 0)
            .filter(|p| !p.is_empty())
            .map(<[u8]>::to_vec)
            .collect())
    }

    /// The same exact epoch with no process started: the library calls an embedding agent (or
    /// an MCP or JSON-RPC server) makes on a workspace it keeps open. What separates this row
    /// from the whole-process ones is the cost of starting a process and opening the
    /// workspace. The workspace is dropped before the next step, so later processes again
    /// find no other connection to the database, as they do in every other step.
    fn exact_in_process(&mut self, tree: &Path, home: &Path, target: &str, rep: u32) -> Result<()> {
        let ws = rewind_core::Workspace::open(
            tree,
            &rewind_core::OpenOptions {
                force: false,
                home: Some(home.to_path_buf()),
            },
        )?;
        let spec = rewind_core::EpochSpec {
            tool: Some("write".into()),
            tool_call: None,
            paths: vec![target.as_bytes().to_vec()],
            process_owned: true,
            owner_pid: None,
            note: None,
        };
        let kind = self.kind();
        for k in 0..5u64 {
            let data = content(kind, 9200 + k + 10 * rep as u64, 4096);
            settle_writeback();
            let cpu0 = measure::cpu_self();
            let t = Instant::now();
            let epoch = ws.begin_epoch("bench-lib", &spec)?;
            std::fs::write(tree.join(target), &data)?;
            ws.end_epoch("bench-lib", Some(&epoch.id), false)?;
            let s = Sample {
                wall: t.elapsed(),
                cpu: measure::cpu_self().saturating_sub(cpu0),
                max_rss: 0,
            };
            self.record("exact-lib", Tool::Rewind, s);
        }
        Ok(())
    }

    fn kind(&self) -> Kind {
        if self.ctx.scenario == "text" {
            Kind::Text
        } else {
            Kind::Binary
        }
    }

    /// `rewind -C TREE --json ARGS...` with `$REWIND_HOME` = `home`.
    fn rw(&self, tree: &Path, home: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(&self.rewind);
        c.env("REWIND_HOME", home)
            .arg("-C")
            .arg(tree)
            .arg("--json")
            .args(args);
        c
    }

    fn restore(&self, tree: &Path, home: &Path, hex: &str, paths: &[&str]) -> Command {
        let mut c = Command::new(&self.me);
        c.arg("child-restore")
            .arg("--home")
            .arg(home)
            .arg("--root")
            .arg(tree)
            .args(["--tree", hex]);
        for p in paths {
            c.args(["--path", p]);
        }
        c
    }

    fn rw_init(&mut self, key: &str, tree: &Path, home: &Path) -> Result<serde_json::Value> {
        let (_, out) = self.step(key, Tool::Rewind, &mut self.rw(tree, home, &["init"]))?;
        let v: serde_json::Value = serde_json::from_str(&out).context("rewind init --json")?;
        if let Some(u) = v["uncovered"].as_array().filter(|u| !u.is_empty()) {
            bail!("rewind left paths uncovered: {u:?}");
        }
        Ok(v)
    }

    fn root_tree(v: &serde_json::Value) -> Result<String> {
        Ok(v["root_tree"]
            .as_str()
            .context("rewind init printed no root_tree")?
            .to_string())
    }

    fn pack_bytes(&self, tree: &Path, home: &Path) -> Result<u64> {
        let out = self.untimed(&mut self.rw(tree, home, &["status"]))?;
        let v: serde_json::Value = serde_json::from_str(&out).context("rewind status --json")?;
        v["store"]["pack_bytes"]
            .as_u64()
            .context("status has no store.pack_bytes")
    }

    fn many_files(&mut self, kind: Kind) -> Result<()> {
        let o = self.opts;
        self.ctx = Ctx {
            scenario: kind.name(),
            ..Ctx::default()
        };
        let master = self.work.join(format!("{}-master", kind.name()));
        self.mktree(
            &master,
            &[
                format!("--dirs={}", o.dirs),
                format!("--files-per-dir={}", o.files_per_dir),
                format!("--kind={}", kind.name()),
            ],
        )?;
        let on_disk = files_on_disk(&master)?;
        ensure!(
            on_disk.len() == (o.dirs * o.files_per_dir) as usize,
            "mktree made {} files",
            on_disk.len()
        );
        self.report.kinds.push(KindReport {
            kind: kind.name(),
            files: on_disk.len(),
            tree: du(&master)?,
            ..KindReport::default()
        });
        let edits = Edits::new(kind, o.dirs, o.files_per_dir)?;
        for rep in 0..o.reps {
            let first = if rep % 2 == 0 {
                Tool::Git
            } else {
                Tool::Rewind
            };
            self.ctx = Ctx {
                scenario: kind.name(),
                rep,
                first,
            };
            self.report.begin_rep(self.ctx);
            let base = self.work.join(format!("many-{}-{rep}", kind.name()));
            let (git, rw) = if first == Tool::Git {
                let g = self.many_git(&base, &master, &edits, rep)?;
                (g, self.many_rewind(&base, &master, &edits, rep)?)
            } else {
                let r = self.many_rewind(&base, &master, &edits, rep)?;
                (self.many_git(&base, &master, &edits, rep)?, r)
            };
            // Both tools must have captured the same files: else one of them did less work.
            for (i, what) in ["first capture", "capture after the edits"]
                .into_iter()
                .enumerate()
            {
                let g = self.git_files(&git.store, &git.trees[i])?;
                let r = rewind_files(&rw.root, &rw.store, &rw.trees[i])?;
                if let Some(d) = set_difference("git", &g, "Rewind", &r) {
                    bail!(
                        "{} rep {rep}, {what}: the tools captured different files: {d}",
                        kind.name()
                    );
                }
                if i == 0 {
                    if let Some(d) = set_difference("on disk", &on_disk, "both tools", &g) {
                        bail!("{} rep {rep}, {what}: {d}", kind.name());
                    }
                }
                let n = g.len();
                self.log(format_args!(
                    "{what}: git and Rewind captured the same {n} files"
                ));
                let kr = self.report.kinds.last_mut().expect("pushed above");
                kr.same_files[i] = Some(n);
            }
        }
        Ok(())
    }

    /// The git shadow repository's part of one repetition.
    fn many_git(
        &mut self,
        base: &Path,
        master: &Path,
        edits: &Edits,
        rep: u32,
    ) -> Result<Captured> {
        let paths: Vec<&str> = edits.paths().map(String::as_str).collect();
        let (wt, gd) = (base.join("git-tree"), base.join("git-shadow"));
        self.copy(master, &wt)?;
        let (init, _) = self.step("git-init", Tool::Git, &mut self.git("init", &wt, &gd, &[]))?;
        let (track, out) = self.step("first", Tool::Git, &mut self.git("track", &wt, &gd, &[]))?;
        self.report
            .add(self.ctx, "first+init", Tool::Git, sum(init, track));
        let tree_id = |out: &str| -> Result<String> {
            let t = out.lines().last().unwrap_or_default().trim().to_string();
            ensure!(t.len() >= 40, "git track printed no tree id: {out:?}");
            Ok(t)
        };
        let tree0 = tree_id(&out)?;
        let first_size = du(&gd)?;
        self.step("warmup", Tool::Git, &mut self.git("track", &wt, &gd, &[]))?;
        for _ in 0..3 {
            self.step("noop", Tool::Git, &mut self.git("track", &wt, &gd, &[]))?;
        }
        edits.apply(&wt, 1)?;
        let (_, out) = self.step("edited", Tool::Git, &mut self.git("track", &wt, &gd, &[]))?;
        let tree1 = tree_id(&out)?;
        // The stat-aware restore first, right after a capture, as it needs (a fresh index).
        self.step(
            "restore-fast",
            Tool::Git,
            &mut self.git("restore-fast", &wt, &gd, &[&tree0]),
        )?;
        let left = edits.verify(master, &wt, "git restore-fast")?;
        self.report.kind().restore_fast_leftovers = left;
        edits.apply(&wt, 2)?;
        self.untimed(&mut self.git("track", &wt, &gd, &[]))?;
        let mut args = vec![tree0.as_str()];
        args.extend(&paths);
        self.step(
            "revert",
            Tool::Git,
            &mut self.git("revert", &wt, &gd, &args),
        )?;
        ensure!(
            edits.verify(master, &wt, "git revert")? == 0,
            "git revert kept created files"
        );
        // OpenCode's restore last: it leaves an index without stat data, so a `track` after it
        // re-reads every file (untimed here, but minutes of run time over all repetitions).
        edits.apply(&wt, 3)?;
        self.untimed(&mut self.git("track", &wt, &gd, &[]))?;
        self.step(
            "restore",
            Tool::Git,
            &mut self.git("restore", &wt, &gd, &[&tree0]),
        )?;
        let left = edits.verify(master, &wt, "git restore")?;
        self.report.kind().restore_leftovers = left;
        if rep == 0 {
            self.report.kind().sizes[0] = (first_size, du(&gd)?);
        }
        Ok(Captured {
            trees: [tree0, tree1],
            store: gd,
            root: wt,
        })
    }

    /// Rewind's part of one repetition.
    fn many_rewind(
        &mut self,
        base: &Path,
        master: &Path,
        edits: &Edits,
        rep: u32,
    ) -> Result<Captured> {
        let paths: Vec<&str> = edits.paths().map(String::as_str).collect();
        let (tree, home) = (base.join("rw-tree"), base.join("rw-home"));
        self.copy(master, &tree)?;
        let hex0 = Self::root_tree(&self.rw_init("first", &tree, &home)?)?;
        let first_size = du(&home)?;
        self.rw_init("warmup", &tree, &home)?;
        for _ in 0..3 {
            self.rw_init("noop", &tree, &home)?;
        }
        edits.apply(&tree, 1)?;
        let hex1 = Self::root_tree(&self.rw_init("edited", &tree, &home)?)?;
        self.step(
            "restore",
            Tool::Rewind,
            &mut self.restore(&tree, &home, &hex0, &[]),
        )?;
        ensure!(
            edits.verify(master, &tree, "rewind restore")? == 0,
            "rewind kept created files"
        );
        edits.apply(&tree, 3)?;
        self.untimed(&mut self.rw(&tree, &home, &["init"]))?;
        self.step(
            "revert",
            Tool::Rewind,
            &mut self.restore(&tree, &home, &hex0, &paths),
        )?;
        ensure!(
            edits.verify(master, &tree, "rewind revert")? == 0,
            "rewind kept created files"
        );
        self.op_log(&tree, &home, edits, master, rep)?;
        if rep == 0 {
            let sizes = (first_size, du(&home)?);
            let packs = self.pack_bytes(&tree, &home)?;
            let kr = self.report.kind();
            kr.sizes[1] = sizes;
            kr.pack_bytes = packs;
        }
        Ok(Captured {
            trees: [hex0, hex1],
            store: home,
            root: tree,
        })
    }

    /// The op log on the many-files tree (issue 3): an exact epoch around one 4 KiB write, an
    /// opaque epoch around a command that changes nothing, and rewinding a turn that changed
    /// 20 files, each a whole process (the exact epoch is two: `epoch begin`, `epoch end`).
    fn op_log(
        &mut self,
        tree: &Path,
        home: &Path,
        edits: &Edits,
        master: &Path,
        rep: u32,
    ) -> Result<()> {
        let kind = edits.kind;
        let target = edits.edited[0].clone();
        for k in 0..5u64 {
            settle_writeback();
            let (b, _) = measure::run(&mut self.rw(
                tree,
                home,
                &["epoch", "begin", "--tool", "write", "--path", &target],
            ))?;
            std::fs::write(
                tree.join(&target),
                content(kind, 9000 + k + 10 * rep as u64, 4096),
            )?;
            let (e, _) = measure::run(&mut self.rw(tree, home, &["epoch", "end"]))?;
            self.record("exact", Tool::Rewind, sum(b, e));
        }
        // The same exact epoch in one process: a guarded `rewind write` of 4 KiB (stdin), which
        // begins the epoch, writes the file (temp + rename) and settles, as an agent's write
        // tool through the CLI does. A new file first, then the same file again (the session's
        // own write refreshed its read baseline).
        let payload = self.work.join(format!("payload-{rep}"));
        let written = format!("{}.written", edits.edited[1]);
        for k in 0..5u64 {
            std::fs::write(&payload, content(kind, 9100 + k + 10 * rep as u64, 4096))?;
            settle_writeback();
            let (w, _) = measure::run_with_stdin(
                &mut self.rw(tree, home, &["-s", "bench", "write", &written]),
                std::process::Stdio::from(std::fs::File::open(&payload)?),
            )?;
            self.record("guarded-write", Tool::Rewind, w);
        }
        std::fs::remove_file(tree.join(&written))?;
        self.exact_in_process(tree, home, &target, rep)?;
        // Put the file back as the master tree has it (an edit outside any epoch: recorded as
        // external at the next capture), so the turn below starts from the master tree.
        std::fs::write(tree.join(&target), std::fs::read(master.join(&target))?)?;
        self.untimed(&mut self.rw(tree, home, &["exec", "--", "true"]))?;
        for _ in 0..3 {
            self.step(
                "exec-noop",
                Tool::Rewind,
                &mut self.rw(tree, home, &["exec", "--", "true"]),
            )?;
        }
        // A turn: checkpoint, then one shell command that edits 10, creates 5 and deletes 5
        // files; rewinding it must touch exactly those 20.
        let src = self.work.join(format!("turn-src-{}-{rep}", kind.name()));
        std::fs::create_dir_all(&src)?;
        let mut script = String::new();
        for (k, p) in edits.edited.iter().chain(&edits.created).enumerate() {
            let f = src.join(format!("{k}"));
            std::fs::write(&f, content(kind, 5000 + k as u64, 4096))?;
            script.push_str(&format!("cp '{}' '{p}'\n", f.display()));
        }
        for p in &edits.deleted {
            script.push_str(&format!("rm -f '{p}'\n"));
        }
        let script_file = src.join("turn.sh");
        std::fs::write(&script_file, script)?;
        let label = format!("turn-{rep}");
        self.untimed(&mut self.rw(tree, home, &["checkpoint", "--message", &label]))?;
        let sf = script_file.to_string_lossy().into_owned();
        self.untimed(
            self.rw(tree, home, &["exec", "--", "sh", &sf])
                .current_dir(tree),
        )?;
        let (_, out) = self.step(
            "turn-rewind",
            Tool::Rewind,
            &mut self.rw(tree, home, &["restore", &label]),
        )?;
        let v: serde_json::Value = serde_json::from_str(&out).context("rewind restore --json")?;
        let steps = v["steps"].as_array().map(Vec::len).unwrap_or(0);
        ensure!(
            steps == 20,
            "rewinding the turn planned {steps} steps, not 20: {out}"
        );
        ensure!(
            edits.verify(master, tree, "rewind restore (turn)")? == 0,
            "the rewind kept created files"
        );
        Ok(())
    }

    fn big_file(&mut self) -> Result<()> {
        let mib = self.opts.big_mib;
        self.ctx = Ctx {
            scenario: "big",
            ..Ctx::default()
        };
        let master = self.work.join("big-master");
        self.mktree(
            &master,
            &["--dirs=0".into(), format!("--big-file-mib={mib}")],
        )?;
        for rep in 0..self.opts.big_reps {
            let first = if rep % 2 == 0 {
                Tool::Git
            } else {
                Tool::Rewind
            };
            self.ctx = Ctx {
                scenario: "big",
                rep,
                first,
            };
            self.report.begin_rep(self.ctx);
            let base = self.work.join(format!("big-{rep}"));
            let order = match first {
                Tool::Git => [Tool::Git, Tool::Rewind],
                Tool::Rewind => [Tool::Rewind, Tool::Git],
            };
            for tool in order {
                match tool {
                    Tool::Git => self.big_git(&base, &master, rep)?,
                    Tool::Rewind => self.big_rewind(&base, &master, rep)?,
                }
            }
            std::fs::remove_dir_all(&base)?;
        }
        std::fs::remove_dir_all(&master)?;
        Ok(())
    }

    fn big_git(&mut self, base: &Path, master: &Path, rep: u32) -> Result<()> {
        let (wt, gd) = (base.join("git-tree"), base.join("git-shadow"));
        self.copy(master, &wt)?;
        self.untimed(&mut self.git("init", &wt, &gd, &[]))?;
        self.step(
            "big-first",
            Tool::Git,
            &mut self.git("track", &wt, &gd, &[]),
        )?;
        let before = du(&gd)?;
        overwrite_middle(&wt.join("big.bin"))?;
        self.step(
            "big-second",
            Tool::Git,
            &mut self.git("track", &wt, &gd, &[]),
        )?;
        if rep == 0 {
            self.report.sizes_big[0] = (before, du(&gd)?);
        }
        // Removing a few big files is quick and frees the space for the next tool.
        std::fs::remove_dir_all(&wt)?;
        std::fs::remove_dir_all(&gd)?;
        Ok(())
    }

    fn big_rewind(&mut self, base: &Path, master: &Path, rep: u32) -> Result<()> {
        let (tree, home) = (base.join("rw-tree"), base.join("rw-home"));
        self.copy(master, &tree)?;
        self.rw_init("big-first", &tree, &home)?;
        let (before, packs_before) = (du(&home)?, self.pack_bytes(&tree, &home)?);
        overwrite_middle(&tree.join("big.bin"))?;
        self.rw_init("big-second", &tree, &home)?;
        if rep == 0 {
            self.report.sizes_big[1] = (before, du(&home)?);
            self.report.pack_growth_big = self.pack_bytes(&tree, &home)? - packs_before;
        }
        std::fs::remove_dir_all(&tree)?;
        std::fs::remove_dir_all(&home)?;
        Ok(())
    }

    fn huge_file(&mut self) -> Result<()> {
        let mib = self.opts.huge_mib;
        self.ctx = Ctx {
            scenario: "huge",
            rep: 0,
            first: Tool::Rewind,
        };
        self.report.begin_rep(self.ctx);
        let base = self.work.join("huge");
        let tree = base.join("tree");
        // Random bytes, as mktree.py --big-file-mib writes them, but a minute faster at 4 GiB.
        std::fs::create_dir_all(&tree)?;
        self.log(format_args!("writing a {mib} MiB file of random bytes"));
        write_noise_file(&tree.join("big.bin"), mib)?;
        let home = base.join("rw-home");
        std::fs::create_dir_all(&home)?;
        // The default max_file_size (2G) would record a bigger file as uncovered.
        std::fs::write(
            home.join("config.toml"),
            format!("[capture]\nmax_file_size = \"{}M\"\n", 2 * mib),
        )?;
        let v = self.rw_init("huge-first", &tree, &home)?;
        let hashed = v["bytes_hashed"].as_u64().unwrap_or(0);
        ensure!(
            hashed >= mib << 20,
            "rewind hashed {hashed} bytes of the huge file"
        );
        self.report.size_huge[1] = du(&home)?.1;
        if self.opts.with_git_4g {
            let gd = base.join("git-shadow");
            self.untimed(&mut self.git("init", &tree, &gd, &[]))?;
            self.step(
                "huge-first",
                Tool::Git,
                &mut self.git("track", &tree, &gd, &[]),
            )?;
            self.report.size_huge[0] = du(&gd)?.1;
        }
        std::fs::remove_dir_all(&base)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_name_the_tree_kinds_files() {
        for (kind, ext) in [(Kind::Binary, ".bin"), (Kind::Text, ".rs")] {
            let e = Edits::new(kind, 50, 100).unwrap();
            assert_eq!(e.paths().count(), 20);
            assert!(e.paths().all(|p| p.ends_with(ext)), "{:?}", e.edited);
        }
        assert!(Edits::new(Kind::Binary, 1, 1).is_err());
    }

    #[test]
    fn text_content_is_text() {
        let t = content(Kind::Text, 3, 4096);
        assert_eq!(t.len(), 4096);
        assert!(t
            .iter()
            .all(|b| b.is_ascii_lowercase() || b" \n".contains(b)));
        assert_eq!(content(Kind::Binary, 3, 100), noise(3, 100));
    }

    #[test]
    fn set_differences_are_named() {
        let set =
            |v: &[&str]| -> BTreeSet<Vec<u8>> { v.iter().map(|s| s.as_bytes().to_vec()).collect() };
        assert_eq!(set_difference("a", &set(&["x"]), "b", &set(&["x"])), None);
        let d = set_difference("git", &set(&["x", "y"]), "Rewind", &set(&["x", "z"])).unwrap();
        assert!(d.contains("only git: 1 (y)"), "{d}");
        assert!(d.contains("only Rewind: 1 (z)"), "{d}");
    }

    #[test]
    fn files_on_disk_skips_git_dirs() {
        let d = std::env::temp_dir().join(format!("rewind-bench-walk-{}", std::process::id()));
        std::fs::create_dir_all(d.join("a/.git")).unwrap();
        std::fs::write(d.join("a/f"), "x").unwrap();
        std::fs::write(d.join("a/.git/HEAD"), "x").unwrap();
        std::fs::write(d.join("top"), "x").unwrap();
        let got = files_on_disk(&d).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
        let want: BTreeSet<Vec<u8>> = [b"a/f".to_vec(), b"top".to_vec()].into();
        assert_eq!(got, want);
    }
}
