//! The scenarios: a 100k-file tree, one big file with a small overwrite, and the peak memory of
//! capturing a huge file. Each runs through git and Rewind in fresh directories of the same run.

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};

use crate::measure::{self, du, Sample};
use crate::report::{Report, Tool};

#[derive(clap::Args, Debug)]
pub struct Opts {
    /// Directory for trees, shadow repositories and stores (fresh per run; removed at the end
    /// unless --keep).
    #[arg(long)]
    pub work: PathBuf,
    /// The shared directory holding `bench/mktree.py` and `bench/git-shadow-baseline.sh`.
    #[arg(long, default_value = "../shared")]
    pub shared: PathBuf,
    /// The `rewind` binary [default: beside this binary].
    #[arg(long)]
    pub rewind: Option<PathBuf>,
    /// Directories of the many-files tree (mktree.py --dirs).
    #[arg(long, default_value_t = 1000)]
    pub dirs: u32,
    /// Files per directory (mktree.py --files-per-dir).
    #[arg(long, default_value_t = 100)]
    pub files_per_dir: u32,
    /// Repetitions of the many-files scenario, each on fresh copies (medians are reported).
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// Size of the big file in MiB (0 skips the scenario).
    #[arg(long, default_value_t = 1024)]
    pub big_mib: u64,
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
}

pub fn run(opts: &Opts) -> Result<()> {
    let me = std::env::current_exe()?;
    let rewind = match &opts.rewind {
        Some(p) => p.clone(),
        None => me.with_file_name("rewind"),
    };
    let shared = opts
        .shared
        .canonicalize()
        .with_context(|| format!("shared dir {} (pass --shared)", opts.shared.display()))?;
    ensure!(rewind.is_file(), "no rewind binary at {}", rewind.display());
    std::fs::create_dir_all(&opts.work)?;
    let work = opts.work.canonicalize()?;
    let mut b = Bench {
        opts,
        work: work.clone(),
        shared,
        rewind,
        me,
        start: Instant::now(),
        report: Report::new(&work),
    };
    let result = b.all();
    if !opts.keep {
        b.log(format_args!("removing {}", work.display()));
        std::fs::remove_dir_all(&work).ok();
    }
    result?;
    let md = b.report.markdown(opts);
    print!("{md}");
    if let Some(out) = &opts.out {
        std::fs::write(out, &md).with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}

struct Bench<'a> {
    opts: &'a Opts,
    work: PathBuf,
    shared: PathBuf,
    rewind: PathBuf,
    me: PathBuf,
    start: Instant,
    report: Report,
}

/// The edits applied to the many-files tree: 10 files rewritten, 5 created, 5 deleted.
struct Edits {
    edited: Vec<String>,
    created: Vec<String>,
    deleted: Vec<String>,
}

impl Edits {
    fn new(dirs: u32, fpd: u32) -> Result<Edits> {
        ensure!(
            dirs >= 1 && fpd >= 2,
            "need at least 1 dir and 2 files per dir"
        );
        let path = |d: u32, f: u32| format!("d{:04}/f{:03}.bin", d % dirs, f % fpd);
        let edited: Vec<_> = (0..10).map(|k| path(k * dirs / 10, 3 + k)).collect();
        let deleted: Vec<_> = (0..5)
            .map(|k| path(k * dirs / 5 + dirs / 10 + 1, fpd - 1 - k))
            .collect();
        let created = (0..5)
            .map(|k| format!("d{:04}/new{k}.bin", (k * dirs / 5) % dirs))
            .collect();
        let mut all: Vec<&String> = edited.iter().chain(&deleted).collect();
        all.sort();
        all.dedup();
        ensure!(
            all.len() == 15,
            "edit and delete sets overlap; use more files"
        );
        Ok(Edits {
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
            std::fs::write(root.join(p), noise(variant * 1000 + k as u64, 4096))?;
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

impl Bench<'_> {
    fn log(&self, msg: std::fmt::Arguments) {
        eprintln!("[{:7.1}s] {msg}", self.start.elapsed().as_secs_f64());
    }

    fn all(&mut self) -> Result<()> {
        self.report.git_version = self.untimed(Command::new("git").arg("--version"))?;
        self.many_files()?;
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
        self.log(format_args!(
            "{:<6} {key:<16} {:>9.3} s  cpu {:>8.3} s  rss {:>6} MiB",
            tool.name(),
            s.wall.as_secs_f64(),
            s.cpu.as_secs_f64(),
            s.max_rss >> 20
        ));
        self.report.add(key, tool, s);
        Ok((s, out))
    }

    fn untimed(&self, cmd: &mut Command) -> Result<String> {
        Ok(measure::run(cmd)?.1.trim().to_string())
    }

    fn mktree(&self, root: &Path, args: &[String]) -> Result<()> {
        self.log(format_args!("mktree {} {}", root.display(), args.join(" ")));
        std::fs::create_dir_all(root)?; // mktree.py --dirs 0 does not make the root
        let out = self.untimed(
            Command::new("python3")
                .arg(self.shared.join("bench/mktree.py"))
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

    /// `git-shadow-baseline.sh CMD WORKTREE SHADOW_GIT_DIR ARGS...`, isolated from the user's
    /// and the system's git config.
    fn git(&self, cmd: &str, wt: &Path, gd: &Path, args: &[&str]) -> Command {
        let mut c = Command::new("bash");
        c.arg(self.shared.join("bench/git-shadow-baseline.sh"))
            .arg(cmd)
            .arg(wt)
            .arg(gd)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null");
        c
    }

    /// `rewind -C TREE --json ARGS...` with `$REWIND_HOME` = `home`.
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
            note: None,
        };
        for k in 0..5u64 {
            let content = noise(9200 + k + 10 * rep as u64, 4096);
            settle_writeback();
            let cpu0 = measure::cpu_self();
            let t = Instant::now();
            let epoch = ws.begin_epoch("bench-lib", &spec)?;
            std::fs::write(tree.join(target), &content)?;
            ws.end_epoch("bench-lib", Some(&epoch.id), false)?;
            let s = Sample {
                wall: t.elapsed(),
                cpu: measure::cpu_self().saturating_sub(cpu0),
                max_rss: 0,
            };
            self.log(format_args!(
                "rewind exact (library)  {:>9.3} s  cpu {:>8.3} s",
                s.wall.as_secs_f64(),
                s.cpu.as_secs_f64()
            ));
            self.report.add("exact-lib", Tool::Rewind, s);
        }
        Ok(())
    }

    fn rw(&self, tree: &Path, home: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(&self.rewind);
        c.env("REWIND_HOME", home)
            .env_remove("REWIND_SESSION")
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

    fn pack_bytes(&self, tree: &Path, home: &Path) -> Result<u64> {
        let out = self.untimed(&mut self.rw(tree, home, &["status"]))?;
        let v: serde_json::Value = serde_json::from_str(&out).context("rewind status --json")?;
        v["store"]["pack_bytes"]
            .as_u64()
            .context("status has no store.pack_bytes")
    }

    fn many_files(&mut self) -> Result<()> {
        let o = self.opts;
        let master = self.work.join("tree-master");
        self.mktree(
            &master,
            &[
                format!("--dirs={}", o.dirs),
                format!("--files-per-dir={}", o.files_per_dir),
            ],
        )?;
        self.report.tree = Some(du(&master)?);
        let edits = Edits::new(o.dirs, o.files_per_dir)?;
        let paths: Vec<&str> = edits.paths().map(String::as_str).collect();
        for rep in 0..o.reps {
            let base = self.work.join(format!("many-{rep}"));

            // git: the shadow repository.
            let (wt, gd) = (base.join("git-tree"), base.join("git-shadow"));
            self.copy(&master, &wt)?;
            let (init, _) =
                self.step("git-init", Tool::Git, &mut self.git("init", &wt, &gd, &[]))?;
            let (track, out) =
                self.step("first", Tool::Git, &mut self.git("track", &wt, &gd, &[]))?;
            self.report.add("first+init", Tool::Git, sum(init, track));
            let tree0 = out.lines().last().unwrap_or_default().trim().to_string();
            ensure!(tree0.len() >= 40, "git track printed no tree id: {out:?}");
            let first_size = du(&gd)?;
            self.step("warmup", Tool::Git, &mut self.git("track", &wt, &gd, &[]))?;
            for _ in 0..3 {
                self.step("noop", Tool::Git, &mut self.git("track", &wt, &gd, &[]))?;
            }
            edits.apply(&wt, 1)?;
            self.step("edited", Tool::Git, &mut self.git("track", &wt, &gd, &[]))?;
            self.step(
                "restore",
                Tool::Git,
                &mut self.git("restore", &wt, &gd, &[&tree0]),
            )?;
            self.report.git_restore_leftovers = edits.verify(&master, &wt, "git restore")?;
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
                edits.verify(&master, &wt, "git revert")? == 0,
                "git revert kept created files"
            );
            if rep == 0 {
                self.report.sizes_many = [(first_size, du(&gd)?), Default::default()];
            }

            // Rewind.
            let (tree, home) = (base.join("rw-tree"), base.join("rw-home"));
            self.copy(&master, &tree)?;
            let v = self.rw_init("first", &tree, &home)?;
            let hex0 = v["root_tree"].as_str().context("no root_tree")?.to_string();
            let first_size = du(&home)?;
            self.rw_init("warmup", &tree, &home)?;
            for _ in 0..3 {
                self.rw_init("noop", &tree, &home)?;
            }
            edits.apply(&tree, 1)?;
            self.rw_init("edited", &tree, &home)?;
            self.step(
                "restore",
                Tool::Rewind,
                &mut self.restore(&tree, &home, &hex0, &[]),
            )?;
            ensure!(
                edits.verify(&master, &tree, "rewind restore")? == 0,
                "rewind kept created files"
            );
            edits.apply(&tree, 2)?;
            self.untimed(&mut self.rw(&tree, &home, &["init"]))?;
            self.step(
                "revert",
                Tool::Rewind,
                &mut self.restore(&tree, &home, &hex0, &paths),
            )?;
            ensure!(
                edits.verify(&master, &tree, "rewind revert")? == 0,
                "rewind kept created files"
            );
            self.op_log(&tree, &home, &edits, &master, rep)?;
            if rep == 0 {
                self.report.sizes_many[1] = (first_size, du(&home)?);
                self.report.pack_bytes_many = self.pack_bytes(&tree, &home)?;
            }
        }
        Ok(())
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
        let target = edits.edited[0].clone();
        for k in 0..5u64 {
            settle_writeback();
            let (b, _) = measure::run(&mut self.rw(
                tree,
                home,
                &["epoch", "begin", "--tool", "write", "--path", &target],
            ))?;
            std::fs::write(tree.join(&target), noise(9000 + k + 10 * rep as u64, 4096))?;
            let (e, _) = measure::run(&mut self.rw(tree, home, &["epoch", "end"]))?;
            let both = sum(b, e);
            self.log(format_args!(
                "rewind exact            {:>9.3} s  cpu {:>8.3} s",
                both.wall.as_secs_f64(),
                both.cpu.as_secs_f64()
            ));
            self.report.add("exact", Tool::Rewind, both);
        }
        // The same exact epoch in one process: a guarded `rewind write` of 4 KiB (stdin), which
        // begins the epoch, writes the file (temp + rename) and settles, as an agent's write
        // tool through the CLI does. A new file first, then the same file again (the session's
        // own write refreshed its read baseline).
        let payload = self.work.join(format!("payload-{rep}"));
        let written = format!("{}.written", edits.edited[1]);
        for k in 0..5u64 {
            std::fs::write(&payload, noise(9100 + k + 10 * rep as u64, 4096))?;
            settle_writeback();
            let (w, _) = measure::run_with_stdin(
                &mut self.rw(tree, home, &["-s", "bench", "write", &written]),
                std::process::Stdio::from(std::fs::File::open(&payload)?),
            )?;
            self.log(format_args!(
                "rewind write            {:>9.3} s  cpu {:>8.3} s",
                w.wall.as_secs_f64(),
                w.cpu.as_secs_f64()
            ));
            self.report.add("guarded-write", Tool::Rewind, w);
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
        let src = self.work.join(format!("turn-src-{rep}"));
        std::fs::create_dir_all(&src)?;
        let mut script = String::new();
        for (k, p) in edits.edited.iter().chain(&edits.created).enumerate() {
            let f = src.join(format!("{k}"));
            std::fs::write(&f, noise(5000 + k as u64, 4096))?;
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
        let master = self.work.join("big-master");
        self.mktree(
            &master,
            &["--dirs=0".into(), format!("--big-file-mib={mib}")],
        )?;
        let base = self.work.join("big");

        let (wt, gd) = (base.join("git-tree"), base.join("git-shadow"));
        self.copy(&master, &wt)?;
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
        self.report.sizes_big[0] = (before, du(&gd)?);
        std::fs::remove_dir_all(&wt)?;
        std::fs::remove_dir_all(&gd)?;

        let (tree, home) = (base.join("rw-tree"), base.join("rw-home"));
        self.copy(&master, &tree)?;
        self.rw_init("big-first", &tree, &home)?;
        let (before, packs_before) = (du(&home)?, self.pack_bytes(&tree, &home)?);
        overwrite_middle(&tree.join("big.bin"))?;
        self.rw_init("big-second", &tree, &home)?;
        self.report.sizes_big[1] = (before, du(&home)?);
        self.report.pack_growth_big = self.pack_bytes(&tree, &home)? - packs_before;
        std::fs::remove_dir_all(&base)?;
        std::fs::remove_dir_all(&master)?;
        Ok(())
    }

    fn huge_file(&mut self) -> Result<()> {
        let mib = self.opts.huge_mib;
        let base = self.work.join("huge");
        let tree = base.join("tree");
        self.mktree(&tree, &["--dirs=0".into(), format!("--big-file-mib={mib}")])?;
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
