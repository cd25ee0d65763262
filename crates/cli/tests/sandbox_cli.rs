//! `rewind sandbox check|exec` end to end, under real bubblewrap: exit codes, refusals,
//! config handling, the mode matrix, secrets and ghost files through the CLI.

use crate::common;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{require_bwrap, text};

const SECRET: &str = "sk-cli-test-do-not-leak";

struct Fx {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    out: PathBuf,
    home: PathBuf,
    state: PathBuf,
}

impl Fx {
    fn new() -> Fx {
        let dir = tempfile::Builder::new()
            .prefix("sbx-cli")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        let root = dir.path().canonicalize().unwrap();
        let fx = Fx {
            ws: root.join("ws"),
            out: root.join("out"),
            home: root.join("home"),
            state: root.join("state"),
            _dir: dir,
        };
        for d in [
            &fx.ws.join(".git/hooks"),
            &fx.out,
            &fx.home.join(".ssh"),
            &fx.state,
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(fx.ws.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(fx.home.join(".ssh/id_rsa"), "PRIVATE\n").unwrap();
        fx
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_rewind"));
        c.args(args)
            .current_dir(&self.ws)
            .env("HOME", &self.home)
            .env("REWIND_HOME", &self.state)
            .env("FAKE_API_KEY", SECRET)
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        output_within(self.cmd(args), Duration::from_secs(30))
    }
}

/// Runs with a time bound (kills and fails on overrun).
fn output_within(mut c: Command, limit: Duration) -> Output {
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let id = child.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = done.clone();
    std::thread::spawn(move || {
        let start = Instant::now();
        while start.elapsed() < limit {
            if flag.load(std::sync::atomic::Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: kill by the pid we spawned.
        unsafe { libc::kill(id as i32, libc::SIGKILL) };
    });
    let out = child.wait_with_output().unwrap();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    out
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn check_passes_and_reports_json() {
    require_bwrap();
    let f = Fx::new();
    let o = f.run(&["sandbox", "check"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("sandbox ok"),
        "{}",
        text(&o)
    );
    let o = f.run(&["--json", "sandbox", "check"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["mode"], "workspace-write");
    assert_eq!(v["network"], false, "missing network key means off");
}

#[test]
fn f52_missing_bwrap_refuses_with_6_and_runs_nothing() {
    let f = Fx::new();
    let marker = f.out.join("ran");
    for args in [
        vec!["sandbox", "check"],
        vec![
            "sandbox",
            "exec",
            "--",
            "/bin/sh",
            "-c",
            "touch \"$0\"",
            marker.to_str().unwrap(),
        ],
    ] {
        let mut c = f.cmd(&args);
        c.env("PATH", "/nonexistent");
        let o = output_within(c, Duration::from_secs(30));
        assert_eq!(code(&o), 6, "{}", text(&o));
        let e = stderr(&o);
        assert!(
            e.starts_with("rewind: ") && e.contains("install bubblewrap"),
            "{e}"
        );
    }
    assert!(!marker.exists(), "never run unsandboxed");
}

#[test]
fn exec_passes_exit_code_and_enforces_workspace_write() {
    require_bwrap();
    let f = Fx::new();
    let o = f.run(&["sandbox", "exec", "--", "sh", "-c", "echo ok > f; exit 7"]);
    assert_eq!(code(&o), 7, "{}", text(&o));
    assert_eq!(std::fs::read_to_string(f.ws.join("f")).unwrap(), "ok\n");
    let out = format!("echo x > {}/f", f.out.display());
    let o = f.run(&["sandbox", "exec", "--", "sh", "-c", &out]);
    assert_ne!(code(&o), 0);
    // The fixture is outside /tmp (the sandbox's /tmp is private, which would make the write
    // fail for another reason): it fails because the outside is read-only.
    assert!(stderr(&o).contains("Read-only file system"), "{}", text(&o));
    assert!(!f.out.join("f").exists());
    let o = f.run(&["sandbox", "exec", "--", "sh", "-c", "echo x > .git/config"]);
    assert_ne!(code(&o), 0);
    assert_eq!(
        std::fs::read_to_string(f.ws.join(".git/config")).unwrap(),
        "[core]\n"
    );
}

#[test]
fn exec_command_not_found_and_usage() {
    require_bwrap();
    let f = Fx::new();
    let o = f.run(&["sandbox", "exec", "--", "no-such-command-xyz"]);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(
        stderr(&o).contains("rewind: command not found"),
        "{}",
        text(&o)
    );
    let o = f.run(&["sandbox", "exec"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    let o = f.run(&["sandbox", "exec", "--mode", "yolo", "--", "true"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
}

#[test]
fn g57_dangerous_writable_roots_refused_naming_them() {
    let f = Fx::new();
    let parent = f.ws.parent().unwrap().to_str().unwrap().to_string();
    let home = f.home.to_str().unwrap().to_string();
    let state = f.state.to_str().unwrap().to_string();
    for root in [
        "/",
        home.as_str(),
        parent.as_str(),
        state.as_str(),
        "../x",
        "/nonexistent",
    ] {
        let o = f.run(&["sandbox", "exec", "--writable-root", root, "--", "true"]);
        assert_eq!(code(&o), 6, "{root}: {}", text(&o));
        let e = stderr(&o);
        assert!(
            e.contains("--writable-root") && e.contains(root.trim_start_matches("../")),
            "{e}"
        );
    }
}

#[test]
fn g61_config_keys_and_types() {
    require_bwrap();
    let f = Fx::new();
    let cfg = f.ws.join(".rewind.toml");
    let user_cfg = f.state.join("config.toml");
    // Keys that would loosen the sandbox are refused in the workspace file (exit 1)...
    for (body, needle) in [
        ("[sandbox]\nnetwork = true\n", "loosen"),
        (
            "[sandbox]\nwritable_roots = [\"/tmp\"]\n",
            "sandbox.writable_roots",
        ),
        ("[sandbox]\nmode = \"danger-full-access\"\n", "loosen"),
    ] {
        std::fs::write(&cfg, body).unwrap();
        let o = f.run(&["sandbox", "exec", "--", "true"]);
        assert_eq!(code(&o), 1, "{body}: {}", text(&o));
        assert!(stderr(&o).contains(needle), "{body}: {}", text(&o));
    }
    std::fs::remove_file(&cfg).unwrap();
    // ...and checked like flags in the user's own config.
    for body in [
        "[sandbox]\nwritable_roots = [\"/\"]\n",
        "[sandbox]\nwritable_roots = [\"-rf\"]\n",
    ] {
        std::fs::write(&user_cfg, body).unwrap();
        let o = f.run(&["sandbox", "exec", "--", "true"]);
        assert_eq!(code(&o), 6, "{body}: {}", text(&o));
        assert!(
            stderr(&o).contains("sandbox.writable_roots"),
            "{body}: {}",
            text(&o)
        );
    }
    std::fs::remove_file(&user_cfg).unwrap();
    for (body, needle, want) in [
        ("[sandbox]\nnetwrok = true\n", "netwrok", 1),
        ("[sandbox]\nnetwork = \"yes\"\n", "network", 1),
        ("[sandbox]\nmode = \"yolo\"\n", "yolo", 1),
        (
            "[sandbox]\ndeny_read = [\"a\\nb\"]\n",
            "sandbox.deny_read",
            6,
        ),
    ] {
        std::fs::write(&cfg, body).unwrap();
        let o = f.run(&["sandbox", "exec", "--", "true"]);
        assert_eq!(code(&o), want, "{body}: {}", text(&o));
        assert!(stderr(&o).contains(needle), "{body}: {}", text(&o));
    }
    // Valid config: read-only from the workspace file applies.
    std::fs::write(
        &cfg,
        "[sandbox]\nmode = \"read-only\"\ndeny_read = [\"~/.ssh\"]\n",
    )
    .unwrap();
    let o = f.run(&["sandbox", "exec", "--", "sh", "-c", "echo x > f"]);
    assert_ne!(code(&o), 0, "{}", text(&o));
    assert!(!f.ws.join("f").exists(), "read-only from .rewind.toml");
    // `~` expanded by a shell, as an agent's command would have it.
    let o = f.run(&["sandbox", "exec", "--", "sh", "-c", "cat ~/.ssh/id_rsa"]);
    assert_ne!(code(&o), 0, "{}", text(&o));
    assert!(stderr(&o).contains("Permission denied"), "{}", text(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("PRIVATE"));
    let o = f.run(&[
        "sandbox",
        "exec",
        "--",
        "sh",
        "-c",
        "cat \"$HOME/.ssh/id_rsa\"",
    ]);
    assert_ne!(code(&o), 0, "{}", text(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("PRIVATE"));
}

#[test]
fn e_mode_matrix_through_cli() {
    require_bwrap();
    let f = Fx::new();
    let outside = format!("echo x > {}/m", f.out.display());
    let o = f.run(&[
        "sandbox",
        "exec",
        "--mode",
        "read-only",
        "--",
        "sh",
        "-c",
        "echo x > f",
    ]);
    assert_ne!(code(&o), 0);
    assert!(stderr(&o).contains("Read-only file system"), "{}", text(&o));
    assert!(!f.ws.join("f").exists());
    let o = f.run(&[
        "sandbox",
        "exec",
        "--mode",
        "read-only",
        "--",
        "sh",
        "-c",
        "echo x > /tmp/f",
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let o = f.run(&["sandbox", "exec", "--network", "--", "sh", "-c", &outside]);
    assert_ne!(code(&o), 0);
    assert!(stderr(&o).contains("Read-only file system"), "{}", text(&o));
    assert!(!f.out.join("m").exists());
    let o = f.run(&[
        "sandbox",
        "exec",
        "--mode",
        "danger-full-access",
        "--",
        "sh",
        "-c",
        &outside,
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(stderr(&o).contains("warning") && stderr(&o).contains("danger-full-access"));
    assert!(f.out.join("m").exists());
}

#[test]
fn b23_b24_secrets_absent_and_no_ghost_files() {
    require_bwrap();
    let f = Fx::new();
    let before = std::fs::read_dir(&f.ws).unwrap().count();
    let o = f.run(&[
        "sandbox",
        "exec",
        "--",
        "sh",
        "-c",
        "env; tr '\\0' '\\n' < /proc/1/environ; tr '\\0' ' ' < /proc/1/cmdline; ls -a",
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        !out.contains(SECRET) && !out.contains("FAKE_API_KEY"),
        "{out}"
    );
    assert!(
        out.contains(".rewind.toml"),
        "protected placeholder visible inside: {out}"
    );
    assert_eq!(
        std::fs::read_dir(&f.ws).unwrap().count(),
        before,
        "no ghost files"
    );
    assert!(!f.ws.join(".rewind.toml").exists() && !f.ws.join(".claude").exists());
}

#[test]
fn workspace_flag_and_home_as_workspace() {
    require_bwrap();
    let f = Fx::new();
    let ws = f.ws.to_str().unwrap();
    let mut c = f.cmd(&[
        "-C",
        ws,
        "sandbox",
        "exec",
        "--",
        "sh",
        "-c",
        "pwd; echo x > viaC",
    ]);
    c.current_dir(&f.out);
    let o = output_within(c, Duration::from_secs(30));
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(f.ws.join("viaC").exists());
    let mut c = f.cmd(&["sandbox", "exec", "--", "true"]);
    c.current_dir(&f.home);
    let o = output_within(c, Duration::from_secs(30));
    assert_eq!(code(&o), 6, "{}", text(&o));
    assert!(stderr(&o).contains("home directory"), "{}", text(&o));
}

/// `rewind ARGS…` started from a shell that ran `exec 9>>OUT/log 8<OUT` first (descriptors
/// without close-on-exec, as any shell redirect leaves them), with the fixture's environment.
fn with_open_descriptors(f: &Fx, args: &[&str]) -> Output {
    let rewind = f.cmd(args);
    let mut c = Command::new("bash");
    c.arg("-c")
        .arg(r#"exec 9>>"$OUT/log" 8<"$OUT"; exec "$@""#)
        .arg("bash")
        .arg(rewind.get_program())
        .args(rewind.get_args())
        .envs(rewind.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .env("OUT", &f.out)
        .current_dir(&f.ws)
        .stdin(Stdio::null());
    output_within(c, Duration::from_secs(30))
}

#[test]
fn h63_inherited_descriptors_blocked_in_every_mode_and_through_exec_sandbox() {
    require_bwrap();
    let f = Fx::new();
    std::fs::write(f.out.join("log"), "").unwrap();
    let o = f.run(&["init"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    // A file descriptor (9) and a directory descriptor (8) of the outside, used three ways:
    // directly, through the directory's magic link, and listed.
    let escape = "ls /proc/self/fd | tr '\\n' ' '; echo pwned >&9; echo x > /proc/self/fd/8/pwn; \
                  mkdir /proc/self/fd/8/pwnd; exit 0";
    for prefix in [
        &["sandbox", "exec", "--"][..],
        &["sandbox", "exec", "--mode", "read-only", "--"],
        &["sandbox", "exec", "--network", "--"],
        &["exec", "--sandbox", "workspace-write", "--"],
        &["exec", "--sandbox", "read-only", "--"],
    ] {
        let mut args = prefix.to_vec();
        args.extend(["sh", "-c", escape]);
        let o = with_open_descriptors(&f, &args);
        assert_eq!(code(&o), 0, "{prefix:?}: {}", text(&o));
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "0 1 2 3 ",
            "{prefix:?}: only standard descriptors (3 is ls's own)"
        );
        assert!(
            stderr(&o).contains("Bad file descriptor"),
            "{prefix:?}: {}",
            text(&o)
        );
        assert_eq!(std::fs::read_to_string(f.out.join("log")).unwrap(), "");
        let left: Vec<_> = std::fs::read_dir(&f.out)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["log"], "{prefix:?}");
    }
    // The harness does hand the descriptors over: unwrapped, the write lands.
    let o = with_open_descriptors(
        &f,
        &[
            "sandbox",
            "exec",
            "--mode",
            "danger-full-access",
            "--",
            "sh",
            "-c",
            "echo unwrapped >&9",
        ],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(f.out.join("log")).unwrap(),
        "unwrapped\n"
    );
}

#[test]
fn h64_a_callers_redirect_of_standard_output_stays() {
    require_bwrap();
    let f = Fx::new();
    let target = f.out.join("stdout.txt");
    let mut c = f.cmd(&["sandbox", "exec", "--", "echo", "to-the-callers-file"]);
    c.stdout(std::fs::File::create(&target).unwrap());
    assert!(c.status().unwrap().success());
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "to-the-callers-file\n"
    );
}

#[test]
fn h65_no_setuid_files_through_the_cli() {
    use std::os::unix::fs::PermissionsExt;
    require_bwrap();
    let f = Fx::new();
    let o = f.run(&["init"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    for (prefix, name) in [
        (&["sandbox", "exec", "--"][..], "s1"),
        (&["exec", "--sandbox", "workspace-write", "--"], "s2"),
    ] {
        let script = format!("cp /bin/sh {name} && chmod u+s {name}");
        let mut args = prefix.to_vec();
        args.extend(["sh", "-c", &script]);
        let o = f.run(&args);
        assert_ne!(code(&o), 0, "{prefix:?}: {}", text(&o));
        assert!(
            stderr(&o).contains("not permitted"),
            "{prefix:?}: {}",
            text(&o)
        );
        let mode = std::fs::metadata(f.ws.join(name))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o6000, 0, "{prefix:?}: mode {mode:o}");
    }
}
