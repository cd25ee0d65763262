//! The §6 sandbox test list, run for real under bubblewrap. Each test names its §6 numbers.
//! Without bwrap these fail with "install bubblewrap" (see `common::require_bwrap`).

use crate::common;
use common::probe;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use common::{errno_of, run_argv, sh, syscall, wait_until, Fx, Gate, SECRET};
use rewind_sandbox::{AgentRequest, Error, Mode, Policy};

const EPERM: i32 = libc::EPERM;

/// Not a test of its own: the entry point of syscall probes run inside the sandbox.
#[test]
fn probe() {
    probe::main_if_probing();
}

// ---------------------------------------------------------------- A. filesystem writes

#[test]
fn a01_a02_a03_a04_writes_inside_extra_outside_etc_home() {
    let f = Fx::new();
    let p = f.policy_extra();
    let r = sh(
        &p,
        &format!(
            "echo ok > {}/f && echo x > {}/f",
            f.ws.display(),
            f.extra.display()
        ),
    );
    assert!(r.ok(), "{r:?}");
    assert_eq!(f.read(f.ws.join("f")), "ok\n");
    assert_eq!(f.read(f.extra.join("f")), "x\n");
    for target in [
        f.out.join("f"),
        Path::new("/etc/sbx-probe").to_path_buf(),
        f.home.join(".bashrc"),
    ] {
        let r = sh(&p, &format!("echo x > '{}'", target.display()));
        assert!(!r.ok(), "{target:?} {r:?}");
        assert!(r.err.contains("Read-only file system"), "{r:?}");
    }
    assert!(!f.out.join("f").exists());
    assert!(!Path::new("/etc/sbx-probe").exists());
    assert_eq!(f.read(f.home.join(".bashrc")), "# rc\n");
}

#[test]
fn a05_a06_a07_git_metadata_is_read_only() {
    let f = Fx::new();
    let p = f.policy();
    let ws = f.ws.display();
    for cmd in [
        format!("echo x > {ws}/.git/config"),
        format!("echo x > {ws}/.git/hooks/pre-commit"),
        format!("mkdir {ws}/.git/hooks/x"),
        format!("mv {ws}/.git {ws}/g2"),
        format!("rm -rf {ws}/.git"),
        format!("touch {ws}/.git/index.lock"), // what `git commit` needs first (A7, pinned)
    ] {
        let r = sh(&p, &cmd);
        assert!(!r.ok(), "{cmd}: {r:?}");
    }
    assert_eq!(f.read(f.ws.join(".git/config")), "[core]\n");
    assert_eq!(f.read(f.ws.join(".git/hooks/pre-commit")), "#!/bin/sh\n");
    assert!(!f.ws.join(".git/hooks/x").exists() && !f.ws.join("g2").exists());
    // Work outside .git is unaffected.
    assert!(sh(&p, &format!("echo y > {ws}/src/lib.rs")).ok());
}

#[test]
fn a07_git_commit_fails_because_git_is_read_only() {
    let f = Fx::new();
    std::fs::remove_dir_all(f.ws.join(".git")).unwrap();
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(&f.ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git is needed for this test")
    };
    assert!(git(&["init", "-q"]).status.success());
    let p = f.policy();
    let r = sh(
        &p,
        "git -c user.name=a -c user.email=a@b add README && git -c user.name=a -c user.email=a@b commit -qm m",
    );
    assert!(!r.ok(), "{r:?}");
    assert!(
        r.err.contains("Read-only") || r.err.contains("index.lock"),
        "{r:?}"
    );
    // git still reads the repository fine.
    let r = sh(&p, "git status --porcelain");
    assert!(r.ok(), "{r:?}");
}

#[test]
fn a08_a09_nested_repo_and_worktree_pointer() {
    let f = Fx::new();
    std::fs::create_dir_all(f.ws.join("vendor/sub/.git/hooks")).unwrap();
    // A worktree whose git dir lives in another repository (outside the writable area) and a
    // second one whose git dir lives inside the extra writable root.
    let main_git = f.extra.join("main/.git");
    let gitdir = main_git.join("worktrees/wt");
    std::fs::create_dir_all(main_git.join("hooks")).unwrap();
    std::fs::create_dir_all(&gitdir).unwrap();
    std::fs::write(gitdir.join("commondir"), "../..\n").unwrap();
    std::fs::create_dir_all(f.ws.join("wt")).unwrap();
    let pointer = format!("gitdir: {}\n", gitdir.display());
    std::fs::write(f.ws.join("wt/.git"), &pointer).unwrap();
    let p = f.policy_extra();
    for cmd in [
        format!(
            "echo x > {}/vendor/sub/.git/hooks/pre-commit",
            f.ws.display()
        ),
        format!("printf 'gitdir: /tmp/evil' > {}/wt/.git", f.ws.display()),
        format!("echo x > {}/hooks/x", main_git.display()),
        format!("echo ../evil > {}/commondir", gitdir.display()),
    ] {
        let r = sh(&p, &cmd);
        assert!(!r.ok(), "{cmd}: {r:?}");
    }
    assert!(!f.ws.join("vendor/sub/.git/hooks/pre-commit").exists());
    assert_eq!(f.read(f.ws.join("wt/.git")), pointer);
    assert!(!main_git.join("hooks/x").exists());
    assert_eq!(f.read(gitdir.join("commondir")), "../..\n");
    // The extra root itself stays writable.
    assert!(sh(&p, &format!("echo ok > {}/main/file", f.extra.display())).ok());
}

#[test]
fn a10_a11_symlink_escapes() {
    let f = Fx::new();
    let p = f.policy();
    let r = sh(
        &p,
        &format!(
            "cd {} && ln -s {}/pwn l && echo x > l",
            f.ws.display(),
            f.out.display()
        ),
    );
    assert!(!r.ok() && r.err.contains("Read-only"), "{r:?}");
    assert!(!f.out.join("pwn").exists());
    std::os::unix::fs::symlink(&f.out, f.ws.join("o")).unwrap();
    let r = sh(&p, &format!("echo x > {}/o/f", f.ws.display()));
    assert!(!r.ok() && r.err.contains("Read-only"), "{r:?}");
    assert!(!f.out.join("f").exists());
}

#[test]
fn a12_symlinked_git_fails_closed_with_clear_error() {
    let f = Fx::new();
    std::fs::rename(f.ws.join(".git"), f.ws.join("decoy")).unwrap();
    std::os::unix::fs::symlink("decoy", f.ws.join(".git")).unwrap();
    let e = f
        .policy()
        .command(["/bin/sh", "-c", "echo x > .git/config"], None)
        .unwrap_err();
    assert!(
        matches!(e, Error::SymlinkedMountTarget { .. }) && e.is_refusal(),
        "{e}"
    );
    assert!(e.to_string().contains(".git is a symlink"), "{e}");
    assert_eq!(f.read(f.ws.join("decoy/config")), "[core]\n");
}

/// A descriptor of this process without `O_CLOEXEC`, numbered 200 or above so that nothing
/// the sandboxed command opens itself can take its number by chance.
fn inheritable(path: &Path, flags: i32) -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: plain system calls; the result is checked and owned below.
    unsafe {
        let fd = libc::open(c.as_ptr(), flags, 0o644);
        assert!(fd >= 0, "open {path:?}");
        let high = libc::fcntl(fd, libc::F_DUPFD, 200); // F_DUPFD: no close-on-exec
        libc::close(fd);
        assert!(high >= 200);
        std::os::fd::OwnedFd::from_raw_fd(high)
    }
}

/// The descriptors a sandboxed shell sees, as `ls /proc/self/fd` lists them (3 is `ls`'s own).
fn visible_fds(p: &Policy) -> Vec<String> {
    let r = sh(p, "ls /proc/self/fd");
    assert!(r.ok(), "{r:?}");
    r.out.lines().map(str::to_owned).collect()
}

#[test]
fn h63_inherited_descriptors_do_not_reach_the_command() {
    use std::os::fd::AsRawFd;
    let f = Fx::new();
    let log = f.out.join("log");
    std::fs::write(&log, "").unwrap();
    // As `exec 9>>/outside/log 8</outside` in the caller's shell would leave them.
    let file = inheritable(&log, libc::O_WRONLY | libc::O_APPEND);
    let dir = inheritable(&f.out, libc::O_RDONLY | libc::O_DIRECTORY);
    let (file, dir) = (file.as_raw_fd(), dir.as_raw_fd());
    let mut cases = vec![];
    for (mode, network) in [
        (Mode::WorkspaceWrite, false),
        (Mode::WorkspaceWrite, true),
        (Mode::ReadOnly, false),
    ] {
        let mut p = f.policy();
        p.set_mode(mode);
        p.set_network(network);
        cases.push((format!("{mode}-{network}"), p));
    }
    // And with the large-option path (`--args FD`, one more control descriptor).
    let mut big = f.policy();
    for i in 0..1000 {
        let d = f
            .home
            .join(format!("denied-directory-with-a-long-name-{i:05}"));
        std::fs::create_dir_all(&d).unwrap();
        big.add_deny_read("test", d.as_os_str()).unwrap();
    }
    assert!(big
        .command(["true"], None)
        .unwrap()
        .args()
        .iter()
        .any(|a| a == "--args"));
    // (400 mounts make every run slow: this case is only listed.)
    assert_eq!(visible_fds(&big), ["0", "1", "2", "3"], "args-fd");
    for (tag, p) in &cases {
        // Only standard input, output and error: not ours, not bwrap's control descriptors.
        assert_eq!(visible_fds(p), ["0", "1", "2", "3"], "{tag}");
        // (dash takes only one-digit numbers in `>&N`; the magic link is the shell's way.)
        let r = sh(p, &format!("echo pwned >> /proc/self/fd/{file}"));
        assert!(!r.ok(), "{tag}: {r:?}");
        assert_eq!(
            errno_of(&syscall(p, &format!("fd-write {file}"))),
            libc::EBADF,
            "{tag}"
        );
        let r = syscall(p, &format!("fd-openat {dir} pwn"));
        assert_eq!(errno_of(&r), libc::EBADF, "{tag}");
        let r = syscall(p, &format!("fd-mkdirat {dir} pwnd"));
        assert_eq!(errno_of(&r), libc::EBADF, "{tag}");
        // The magic link of the directory descriptor, which would lead past every mount.
        let r = sh(p, &format!("echo x > /proc/self/fd/{dir}/pwn2"));
        assert!(!r.ok(), "{tag}: {r:?}");
    }
    // The outside state, not only the exit codes.
    assert_eq!(f.read(&log), "");
    let mut left: Vec<_> = std::fs::read_dir(&f.out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["log"]);
    // Unwrapped (danger-full-access) the command inherits them like any child: the test can
    // tell the difference, so the checks above are not vacuous.
    let mut p = f.policy();
    p.set_mode(Mode::DangerFullAccess);
    assert!(sh(&p, &format!("echo unwrapped >> /proc/self/fd/{file}")).ok());
    assert_eq!(f.read(&log), "unwrapped\n");
}

#[test]
fn h64_standard_descriptors_the_caller_redirected_stay() {
    let f = Fx::new();
    let p = f.policy();
    let target = f.out.join("stdout.txt");
    let mut cmd = p
        .command(["/bin/sh", "-c", "echo to-the-callers-file"], None)
        .unwrap();
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&target).unwrap())
        .stderr(std::process::Stdio::null());
    assert!(cmd.status().unwrap().success());
    assert_eq!(f.read(&target), "to-the-callers-file\n");
}

#[test]
fn a13_a14_hardlink_mknod_setuid() {
    let f = Fx::new();
    let p = f.policy();
    let ws = f.ws.display();
    let r = sh(
        &p,
        &format!("ln {}/.aws/credentials {ws}/hl", f.home.display()),
    );
    assert!(!r.ok(), "{r:?}");
    assert!(!f.ws.join("hl").exists());
    let r = sh(&p, &format!("mknod {ws}/d c 1 3"));
    assert!(!r.ok() && r.err.contains("not permitted"), "{r:?}");
    // A set-id file made on the host still gives nothing inside: the workspace is nosuid.
    std::fs::copy("/bin/sh", f.ws.join("host-s")).unwrap();
    std::fs::set_permissions(f.ws.join("host-s"), PermissionsExt::from_mode(0o4755)).unwrap();
    let r = sh(
        &p,
        &format!("{ws}/host-s -c 'grep CapEff /proc/self/status'"),
    );
    assert!(r.out.contains("CapEff:\t0000000000000000"), "{r:?}");
    let r = sh(&p, &format!("grep ' {ws} ' /proc/self/mountinfo"));
    assert!(r.out.contains("nosuid"), "{r:?}");
}

/// Whether the host sees a set-user-ID or set-group-ID bit on `p` (false if absent).
fn has_setid(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.permissions().mode() & 0o6000 != 0)
}

#[test]
fn h65_no_setuid_or_setgid_files_from_inside() {
    let f = Fx::new();
    let ws = f.ws.display();
    for (mode, network) in [(Mode::WorkspaceWrite, false), (Mode::WorkspaceWrite, true)] {
        let mut p = f.policy();
        p.set_mode(mode);
        p.set_network(network);
        // The tools an agent would use: chmod, install, cp --preserve of a set-id file.
        for (name, cmd) in [
            ("s", format!("cp /bin/sh {ws}/s && chmod u+s {ws}/s")),
            ("g", format!("cp /bin/sh {ws}/g && chmod g+s {ws}/g")),
            ("n", format!("cp /bin/sh {ws}/n && chmod 4755 {ws}/n")),
            ("i", format!("install -m 4755 /bin/sh {ws}/i")),
        ] {
            let r = sh(&p, &cmd);
            assert!(!r.ok() && r.err.contains("not permitted"), "{cmd}: {r:?}");
            assert!(!has_setid(&f.ws.join(name)), "{cmd}");
        }
        // Each system call that can make one, raw (no library fallback in between).
        for (probe, name, want) in [
            ("openat-mode", "o", EPERM),
            ("openat-mode", "og", EPERM),
            ("mknodat-mode", "m", EPERM),
            ("openat2-mode", "o2", libc::ENOSYS),
            ("fchmodat-mode", "README", EPERM),
        ] {
            let mode = if name == "og" { "2755" } else { "4755" };
            let path = f.ws.join(name);
            let r = syscall(&p, &format!("{probe} {} {mode}", path.display()));
            assert_eq!(errno_of(&r), want, "{probe} {name}");
            assert!(!has_setid(&path), "{probe} {name}");
        }
        let r = syscall(&p, &format!("tmpfile-mode {ws} 4755"));
        assert_eq!(errno_of(&r), EPERM, "O_TMPFILE");
        // Plain modes still work.
        let r = syscall(&p, &format!("openat-mode {ws}/plain 755"));
        assert_eq!(errno_of(&r), 0);
        assert!(sh(&p, &format!("chmod 700 {ws}/plain && chmod +x {ws}/README")).ok());
        for n in ["s", "g", "n", "i", "plain"] {
            let _ = std::fs::remove_file(f.ws.join(n));
        }
    }
}

#[test]
fn a15_tmp_is_private() {
    let f = Fx::new();
    let name = format!("/tmp/rewind-sbx-probe-{}", std::process::id());
    let r = sh(&f.policy(), &format!("echo x > {name} && cat {name}"));
    assert!(r.ok() && r.out == "x\n", "{r:?}");
    assert!(!Path::new(&name).exists());
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = walk(dir);
    v.sort();
    v
}

fn walk(dir: &Path) -> Vec<String> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        out.push(e.path().display().to_string());
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&e.path()));
        }
    }
    out
}

#[test]
fn a16_a60_no_ghost_files() {
    let f = Fx::new();
    let mut p = f.policy();
    p.add_protect("test", "AGENTS.md").unwrap();
    p.add_protect("test", ".vscode/").unwrap();
    p.add_deny_read("test", f.ws.join("../out/missing-secret").as_os_str())
        .unwrap_err(); // '..'
    p.add_deny_read("test", f.out.join("missing-secret").as_os_str())
        .unwrap();
    let before = (listing(&f.ws), listing(&f.out));
    // Inside, the missing protected paths exist read-only, and cannot be created.
    let r = sh(
        &p,
        "test -e .rewind.toml && test -d .claude && test -e AGENTS.md && \
         ! echo '[sandbox]' > .rewind.toml && ! mkdir -p .claude/commands && ! echo x > AGENTS.md && \
         ! touch .vscode/tasks.json && echo inside-ok",
    );
    assert!(r.out.contains("inside-ok"), "{r:?}");
    assert_eq!(
        (listing(&f.ws), listing(&f.out)),
        before,
        "no leftover mount points"
    );
    assert!(!f.out.join("missing-secret").exists());
}

#[test]
fn a16_concurrent_runs_keep_placeholders_until_the_last_ends() {
    let f = Fx::new();
    let p = f.policy();
    // The long run signals that it runs (its placeholder mounted), then waits on a FIFO until
    // the short runs are over: they overlap it however slow the machine.
    let gate = Gate::new(f.ws.join(".gate"));
    let mut long = p
        .command(
            [
                "/bin/sh",
                "-c",
                ": > .started; read go < .gate; test -e .rewind.toml",
            ],
            None,
        )
        .unwrap();
    long.stdin(std::process::Stdio::null());
    let mut long = long.spawn().unwrap();
    assert!(
        wait_until(Duration::from_secs(30), || f.ws.join(".started").exists()),
        "the long run never started"
    );
    // A short run finishing meanwhile must not remove the placeholder the long run mounted.
    assert!(sh(&p, "true").ok());
    assert!(
        f.ws.join(".rewind.toml").exists(),
        "placeholder kept while a sandbox runs"
    );
    let r = sh(&p, "! echo x > .rewind.toml");
    assert!(r.ok(), "{r:?}");
    gate.open();
    let st = long.wait_timeout(Duration::from_secs(30)).unwrap().unwrap();
    assert!(st.success());
    assert!(
        !f.ws.join(".rewind.toml").exists(),
        "removed by the last run"
    );
}

#[test]
fn a17_own_metadata_and_state_dir_read_only() {
    let f = Fx::new();
    std::fs::write(f.ws.join(".rewind.toml"), "[sandbox]\n").unwrap();
    std::fs::create_dir_all(f.ws.join(".claude")).unwrap();
    let p = f.policy();
    for cmd in [
        "echo 'mode = \"danger-full-access\"' >> .rewind.toml".to_string(),
        "echo x > .claude/settings.json".to_string(),
        format!("echo x > {}/config.toml", f.state.display()),
        format!("ls {}/sandbox", f.state.display()),
    ] {
        let r = sh(&p, &cmd);
        assert!(!r.ok(), "{cmd}: {r:?}");
    }
    assert_eq!(f.read(f.ws.join(".rewind.toml")), "[sandbox]\n");
    assert!(!f.state.join("config.toml").exists());
}

#[test]
fn a17_state_dir_inside_workspace_is_read_only() {
    let f = Fx::new();
    let state = f.ws.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let p = Policy::with_home(&f.ws, &state, Some(&f.home)).unwrap();
    let r = sh(&p, "echo x > state/pwn");
    assert!(!r.ok(), "{r:?}");
    assert!(!state.join("pwn").exists());
}

// ---------------------------------------------------------------- B. reads

#[test]
fn b18_b19_b20_b21_b22_denied_reads() {
    let f = Fx::new();
    let p = f.policy();
    let h = f.home.display();
    std::os::unix::fs::symlink(f.home.join(".ssh"), f.ws.join("k")).unwrap();
    for cmd in [
        format!("cat {h}/.ssh/id_rsa"),
        format!("ls {h}/.ssh"),
        format!("cat {h}/.aws/credentials"),
        format!("cat {}/k/id_rsa", f.ws.display()),
        format!("cat {h}/.netrc"),
        format!("cat {h}/dotfiles/netrc"),
        format!("cat /proc/self/root{h}/.ssh/id_rsa"),
        format!("cat /proc/1/root{h}/.ssh/id_rsa"),
    ] {
        let r = sh(&p, &cmd);
        assert!(!r.ok(), "{cmd}: {r:?}");
        assert!(
            !r.all().contains("PRIVATE-KEY") && !r.all().contains("secret"),
            "{cmd}: {r:?}"
        );
    }
    let r = sh(&p, &format!("cat {h}/.aws/config"));
    assert!(r.ok() && r.out == "region\n", "{r:?}");
    let r = sh(&p, &format!("cat {h}/.ssh/id_rsa"));
    assert!(r.err.contains("Permission denied"), "{r:?}");
}

#[test]
fn b23_b24_b26_environment_scrubbed() {
    let f = Fx::new();
    let p = f.policy();
    let r = sh(&p, "printenv FAKE_API_KEY");
    assert_eq!(r.code, 1, "{r:?}");
    let r = sh(
        &p,
        "env; tr '\\0' '\\n' < /proc/1/environ; tr '\\0' ' ' < /proc/1/cmdline",
    );
    assert!(r.ok(), "{r:?}");
    assert!(!r.out.contains(SECRET), "{}", r.out);
    assert!(!r.out.contains("SSH_AUTH_SOCK"), "{}", r.out);
    assert!(
        r.out.contains("/bin/sh"),
        "PID 1 is the command itself: {}",
        r.out
    );
    let allowed = rewind_sandbox::env::DEFAULT_ALLOW;
    for line in sh(&p, "env").out.lines() {
        let name = line.split('=').next().unwrap();
        if name == rewind_sandbox::env::SANDBOX_VAR {
            assert_eq!(line, "REWIND_SANDBOX=workspace-write", "the sandbox's mode");
            continue;
        }
        let ok = name == "PWD"
            || name == "SHLVL"
            || name == "_"
            || allowed.iter().any(|a| {
                a.strip_suffix('*')
                    .map_or(*a == name, |pre| name.starts_with(pre))
            });
        assert!(ok, "unexpected variable {name}");
    }
}

#[test]
fn b25_pid_namespace() {
    let f = Fx::new();
    let r = sh(
        &f.policy(),
        &format!(
            "ls /proc | grep -c '^[0-9]'; kill -0 {} 2>&1; echo rc=$?",
            std::process::id()
        ),
    );
    let n: usize = r.out.lines().next().unwrap().trim().parse().unwrap();
    assert!(n < 10, "{r:?}");
    assert!(r.out.contains("rc=1") || !r.out.contains("rc=0"), "{r:?}");
}

// ---------------------------------------------------------------- C. network

#[test]
fn c27_c28_c29_c30_c37_network_off() {
    let f = Fx::new();
    let p = f.policy();
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    host.set_nonblocking(true).unwrap();
    let port = host.local_addr().unwrap().port();
    assert_eq!(errno_of(&syscall(&p, "tcp 192.0.2.1:80")), EPERM);
    assert_eq!(
        errno_of(&syscall(&p, &format!("tcp 127.0.0.1:{port}"))),
        EPERM
    );
    assert_eq!(errno_of(&syscall(&p, "udp 192.0.2.1:53")), EPERM);
    let r = run_argv(&p, &["getent", "ahosts", "example.com"], &[]);
    assert!(!r.ok(), "{r:?}");
    let r = run_argv(
        &p,
        &[
            "bash",
            "-c",
            &format!("echo hi > /dev/tcp/127.0.0.1/{port}"),
        ],
        &[("http_proxy", "")],
    );
    assert!(!r.ok(), "{r:?}");
    // No pause needed: every attempt has returned, and a connect that succeeds has completed
    // its handshake by then, so it would already wait in the listener's queue.
    assert!(host.accept().is_err(), "host listener saw a connection");
}

#[test]
fn c31_c32_c33_c26_host_unix_sockets_unreachable() {
    let f = Fx::new();
    use std::os::unix::net::{UnixDatagram, UnixListener};
    let stream = UnixListener::bind(f.out.join("h.sock")).unwrap();
    stream.set_nonblocking(true).unwrap();
    let dgram = UnixDatagram::bind(f.out.join("d.sock")).unwrap();
    dgram.set_nonblocking(true).unwrap();
    use std::os::linux::net::SocketAddrExt;
    let name = format!("rewind-sbx-{}", std::process::id());
    let abs = UnixListener::bind_addr(
        &std::os::unix::net::SocketAddr::from_abstract_name(&name).unwrap(),
    )
    .unwrap();
    abs.set_nonblocking(true).unwrap();
    for network in [false, true] {
        let mut p = f.policy();
        p.set_network(network);
        let s = f.out.join("h.sock").display().to_string();
        let d = f.out.join("d.sock").display().to_string();
        assert_eq!(
            errno_of(&syscall(&p, &format!("unix-stream {s}"))),
            EPERM,
            "net={network}"
        );
        assert_eq!(
            errno_of(&syscall(&p, &format!("unix-dgram {d}"))),
            EPERM,
            "net={network}"
        );
        assert_eq!(
            errno_of(&syscall(&p, &format!("socketpair-dgram-sendmsg {d}"))),
            EPERM
        );
        assert_eq!(
            errno_of(&syscall(&p, &format!("unix-abstract {name}"))),
            EPERM
        );
    }
    // No pause needed: every attempt has returned, and a local connect or send that succeeds
    // has queued its connection or datagram by then.
    assert!(stream.accept().is_err(), "stream listener saw a connection");
    assert!(
        dgram.recv(&mut [0u8; 16]).is_err(),
        "datagram listener received something"
    );
    assert!(abs.accept().is_err(), "abstract listener saw a connection");
}

#[test]
fn c35_c36_io_uring_netlink_and_no_regressions() {
    let f = Fx::new();
    let p = f.policy();
    assert_eq!(errno_of(&syscall(&p, "io_uring")), EPERM);
    assert_eq!(errno_of(&syscall(&p, "socket-netlink")), EPERM);
    assert_eq!(errno_of(&syscall(&p, "socket-vsock")), EPERM);
    assert_eq!(errno_of(&syscall(&p, "socket-inet6")), EPERM);
    assert_eq!(errno_of(&syscall(&p, "keyctl")), EPERM);
    assert_eq!(errno_of(&syscall(&p, "socketpair-stream")), 0);
    let r = sh(
        &p,
        "echo a | tr a b | cat && ls / >/dev/null && sort < README && (true & wait)",
    );
    assert!(r.ok() && r.out.starts_with("b\n"), "{r:?}");
}

// ---------------------------------------------------------------- D. process and escape

#[test]
fn d38_d39_d40_namespaces_caps_mounts() {
    let f = Fx::new();
    let p = f.policy();
    let r = run_argv(&p, &["unshare", "-Ur", "true"], &[]);
    assert!(!r.ok(), "{r:?}");
    assert_ne!(errno_of(&syscall(&p, "unshare-user")), 0);
    assert_eq!(errno_of(&syscall(&p, "unshare-ns")), EPERM);
    let r = sh(&p, "grep -E 'CapEff|CapPrm|NoNewPrivs' /proc/self/status");
    assert!(r.out.contains("CapEff:\t0000000000000000"), "{r:?}");
    assert!(r.out.contains("CapPrm:\t0000000000000000"), "{r:?}");
    assert!(r.out.contains("NoNewPrivs:\t1"), "{r:?}");
    assert_eq!(errno_of(&syscall(&p, "mount")), EPERM);
    let git = f.ws.join(".git").display().to_string();
    assert_eq!(errno_of(&syscall(&p, &format!("umount {git}"))), EPERM);
    let r = sh(&p, &format!("mount -o remount,rw {git} || umount {git}"));
    assert!(!r.ok(), "{r:?}");
    assert!(sh(&p, &format!("! echo x > {git}/config")).ok());
}

#[test]
fn d41_d42_ptrace_proc_mem_tiocsti() {
    let f = Fx::new();
    let p = f.policy();
    assert_eq!(errno_of(&syscall(&p, "ptrace")), EPERM);
    assert_eq!(errno_of(&syscall(&p, "vm_readv")), EPERM);
    // PID 1 is the (filtered) command itself, not an unfiltered bwrap init.
    let r = sh(&p, "cat /proc/1/comm; cat /proc/1/status | grep Seccomp:");
    assert!(
        r.out.starts_with("sh\n") && r.out.contains("Seccomp:\t2"),
        "{r:?}"
    );
    assert_eq!(errno_of(&syscall(&p, "tiocsti")), EPERM);
    let r = syscall(&p, "nnp");
    assert!(r.out.contains("nnp=1"), "{r:?}");
}

/// Host processes whose argv is exactly `argv` (scanning /proc; no `ps` needed).
fn host_processes(argv: &[&str]) -> usize {
    let want: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == want))
        .count()
}

#[test]
fn d43_d44_background_and_timeout_leave_no_orphans() {
    let f = Fx::new();
    let p = f.policy();
    let secs = format!("{}", 300 + std::process::id() % 1000);
    let start = std::time::Instant::now();
    let r = sh(
        &p,
        &format!(
            // Polls (up to 10 s) until the background job is `sleep`, not the forked shell.
            "sleep {secs} & i=0; while [ $i -lt 200 ]; do \
               grep -qx 'sleep' /proc/$!/comm && echo started && break; sleep 0.05; i=$((i+1)); \
             done; exit 0"
        ),
    );
    assert!(r.out.contains("started"), "{r:?}");
    assert!(start.elapsed() < Duration::from_secs(20), "{r:?}");
    // The sandbox's end kills its processes; the kernel may take a moment to finish them.
    assert!(
        wait_until(Duration::from_secs(10), || host_processes(&[
            "sleep", &secs
        ]) == 0),
        "background process survived"
    );
    let long = format!("{}", 100 + std::process::id() % 1000);
    let mut child = p
        .command(["sleep", long.as_str()], None)
        .unwrap()
        .spawn()
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || host_processes(&[
            "sleep", &long
        ]) == 1),
        "the command never ran"
    );
    assert!(child
        .wait_timeout(Duration::from_secs(1))
        .unwrap()
        .is_none());
    assert!(
        wait_until(Duration::from_secs(10), || host_processes(&[
            "sleep", &long
        ]) == 0),
        "timed-out child survived"
    );
}

#[cfg(target_arch = "x86_64")]
#[test]
fn d45_32bit_and_x32_syscalls_kill_the_process() {
    let f = Fx::new();
    let p = f.policy();
    for what in ["int80", "x32"] {
        let r = syscall(&p, what);
        assert!(!r.out.contains("errno="), "{what} returned: {r:?}");
        assert_eq!(r.code, 128 + libc::SIGSYS, "{what}: {r:?}");
    }
}

// ---------------------------------------------------------------- E. modes

#[test]
fn e17_e46_e47_e48_mode_matrix() {
    let f = Fx::new();
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = host.local_addr().unwrap().port();
    let tcp = format!("tcp 127.0.0.1:{port}");
    // (mode, network) → (write ws, write /tmp, write outside, loopback tcp to the host)
    let cases = [
        (Mode::WorkspaceWrite, false, [true, true, false, false]),
        (Mode::WorkspaceWrite, true, [true, true, false, true]),
        (Mode::ReadOnly, false, [false, true, false, false]),
        (Mode::DangerFullAccess, false, [true, true, true, true]),
    ];
    for (mode, network, want) in cases {
        let mut p = f.policy();
        p.set_mode(mode);
        p.set_network(network);
        let tag = format!("{mode}-{network}");
        let ws = sh(&p, &format!("echo x > {}/{tag}", f.ws.display())).ok();
        let tmp = sh(&p, &format!("echo x > /tmp/{tag}-{}", std::process::id())).ok();
        let out = sh(&p, &format!("echo x > {}/{tag}", f.out.display())).ok();
        let net = errno_of(&syscall(&p, &tcp)) == 0;
        assert_eq!([ws, tmp, out, net], want, "{tag}");
        assert_eq!(f.out.join(&tag).exists(), want[2], "{tag}");
        let _ = std::fs::remove_file(format!("/tmp/{tag}-{}", std::process::id()));
    }
    // read-only: reading the workspace works.
    let mut p = f.policy();
    p.set_mode(Mode::ReadOnly);
    assert_eq!(sh(&p, "cat README").out, "hello\n");
    // danger-full-access is really unwrapped.
    p.set_mode(Mode::DangerFullAccess);
    let r = sh(
        &p,
        "cat /proc/1/comm; echo; cat /proc/self/status | grep -c NSpid",
    );
    assert!(!r.out.contains("bwrap"), "{r:?}");
    assert!(!p.command(["true"], None).unwrap().is_sandboxed());
}

#[test]
fn e47_network_on_allows_inet_but_keeps_escape_rules() {
    let f = Fx::new();
    let mut p = f.policy();
    p.set_network(true);
    assert_eq!(errno_of(&syscall(&p, "socket-inet")), 0);
    assert_eq!(errno_of(&syscall(&p, "socket-unix")), EPERM);
    assert_eq!(errno_of(&syscall(&p, "socket-vsock")), EPERM);
    assert_eq!(errno_of(&syscall(&p, "io_uring")), EPERM);
    assert_eq!(errno_of(&syscall(&p, "ptrace")), EPERM);
    let r = sh(&p, &format!("echo x > {}/f", f.out.display()));
    assert!(!r.ok() && r.err.contains("Read-only file system"), "{r:?}");
    assert!(!f.out.join("f").exists());
}

#[test]
fn e49_e50_agent_cannot_escalate_and_switching_applies_immediately() {
    let f = Fx::new();
    let mut p = f.policy();
    let e = p
        .restrict(AgentRequest {
            mode: Some(Mode::DangerFullAccess),
            network: None,
        })
        .unwrap_err();
    assert!(matches!(e, Error::Refused(_)));
    assert!(p
        .restrict(AgentRequest {
            mode: None,
            network: Some(true)
        })
        .is_err());
    // Whether the write went through, judged by the file on the host (then removed).
    let switched = f.ws.join("switched");
    let write = |p: &Policy| {
        let r = sh(p, "echo x > switched");
        let landed = std::fs::remove_file(&switched).is_ok();
        assert_eq!(r.ok(), landed, "{r:?}");
        landed
    };
    assert!(write(&p));
    p.set_mode(Mode::ReadOnly);
    assert!(!write(&p));
    p.set_mode(Mode::WorkspaceWrite);
    assert!(write(&p));
    p.restrict(AgentRequest {
        mode: Some(Mode::ReadOnly),
        network: None,
    })
    .unwrap();
    assert!(!write(&p));
}

// ---------------------------------------------------------------- F. refusal

fn fake_bwrap(dir: &Path, script: &str) -> std::path::PathBuf {
    let path = dir.join("bwrap");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn f52_f53_f54_missing_old_or_broken_bwrap_refuses_and_runs_nothing() {
    let f = Fx::new();
    let marker = f.out.join("ran");
    let cmd = ["/bin/sh", "-c", "touch \"$0\"", marker.to_str().unwrap()];
    let mut p = f.policy();
    p.set_bwrap("/nonexistent/bwrap");
    let e = p.command(cmd, None).unwrap_err();
    assert!(
        matches!(e, Error::BwrapMissing { .. }) && e.to_string().contains("install bubblewrap"),
        "{e}"
    );
    let e = p.preflight().unwrap_err();
    assert!(e.is_refusal());

    p.set_bwrap(fake_bwrap(&f.out, "#!/bin/sh\necho bubblewrap 0.4.0\n"));
    let e = p.command(cmd, None).unwrap_err();
    assert!(matches!(e, Error::BwrapTooOld { .. }), "{e}");

    // New enough, but cannot create namespaces (what AppArmor or a container does).
    p.set_bwrap(fake_bwrap(
        &f.out,
        "#!/bin/sh\n[ \"$1\" = --version ] && { echo bubblewrap 0.9.0; exit 0; }\necho 'bwrap: No permissions to create new namespace' >&2; exit 1\n",
    ));
    let e = p.preflight().unwrap_err();
    assert!(matches!(e, Error::Unavailable { .. }), "{e}");
    assert!(e.to_string().contains("namespace"), "{e}");
    let e = p.command(cmd, None).unwrap().status().unwrap_err();
    assert!(matches!(e, Error::Unavailable { .. }), "{e}");
    assert!(!marker.exists(), "nothing may run unsandboxed");
}

#[test]
fn f_preflight_passes_here() {
    let f = Fx::new();
    let report = f.policy().preflight().unwrap();
    assert!(report.version.starts_with("0."), "{report:?}");
    assert!(report
        .checks
        .iter()
        .any(|(k, v)| k == "trial run" && v.starts_with("ok")));
}

// ---------------------------------------------------------------- G. bad config

#[test]
fn g56_g57_g58_g59_paths() {
    let f = Fx::new();
    let mut p = f.policy();
    let k = "sandbox.writable_roots";
    for bad in [
        "/nonexistent/root".to_string(),
        "/".into(),
        f.home.display().to_string(),
        f.root.display().to_string(),
        "../x".into(),
        "a\nb".into(),
        "-rf".into(),
    ] {
        let e = p.add_writable_root(k, bad.as_ref()).unwrap_err();
        assert!(e.is_refusal() && e.to_string().contains(k), "{bad:?}: {e}");
    }
    // A symlink to a real directory is canonicalised, and writes through it land there.
    std::os::unix::fs::symlink(&f.extra, f.out.join("extra-link")).unwrap();
    p.add_writable_root(k, f.out.join("extra-link").as_os_str())
        .unwrap();
    assert_eq!(p.writable_roots(), std::slice::from_ref(&f.extra));
    let r = sh(&p, &format!("echo x > {}/extra-link/via", f.out.display()));
    assert!(r.ok(), "{r:?}");
    assert!(f.extra.join("via").exists());
    // A deny_read path below a writable root still wins, for reads and writes.
    std::fs::create_dir_all(f.extra.join("secret")).unwrap();
    std::fs::write(f.extra.join("secret/s"), "s\n").unwrap();
    p.add_deny_read("sandbox.deny_read", f.extra.join("secret").as_os_str())
        .unwrap();
    let r = sh(
        &p,
        &format!(
            "cat {0}/secret/s || echo x > {0}/secret/s",
            f.extra.display()
        ),
    );
    assert!(!r.ok(), "{r:?}");
    assert_eq!(f.read(f.extra.join("secret/s")), "s\n");
}

#[test]
fn g59_workspace_with_hostile_name_works() {
    let f = Fx::new();
    for name in ["-rf", "$(touch pwned)", "a b;c"] {
        let ws = f.root.join(name);
        std::fs::create_dir_all(&ws).unwrap();
        let p = Policy::with_home(&ws, &f.state, Some(&f.home)).unwrap();
        let r = run_argv(&p, &["/bin/sh", "-c", "echo ok > file; pwd"], &[]);
        assert!(r.ok(), "{name}: {r:?}");
        assert_eq!(f.read(ws.join("file")), "ok\n");
        assert!(!f.root.join("pwned").exists() && !ws.join("pwned").exists());
    }
}

#[test]
fn g62_large_deny_list_goes_through_args_fd() {
    let f = Fx::new();
    let mut p = f.policy();
    let many = f.out.join("many");
    for i in 0..1000 {
        let d = many.join(format!("secret-directory-with-a-long-name-{i:05}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("s"), "s").unwrap();
        p.add_deny_read("sandbox.deny_read", d.as_os_str()).unwrap();
    }
    let s = p.command(["true"], None).unwrap();
    assert!(
        s.args().iter().any(|a| a == "--args"),
        "options passed by descriptor"
    );
    drop(s);
    let r = sh(
        &p,
        &format!("cat {0}/secret-directory-with-a-long-name-00000/s || cat {0}/secret-directory-with-a-long-name-00999/s || echo denied", many.display()),
    );
    assert_eq!(r.out, "denied\n", "{r:?}");
    // Beyond bubblewrap's argument limit: a clean refusal, naming the key.
    for i in 1000..1600 {
        let d = many.join(format!("secret-directory-with-a-long-name-{i:05}"));
        std::fs::create_dir_all(&d).unwrap();
        p.add_deny_read("sandbox.deny_read", d.as_os_str()).unwrap();
    }
    let e = p.command(["true"], None).unwrap_err();
    assert!(
        e.is_refusal() && e.to_string().contains("sandbox.deny_read"),
        "{e}"
    );
    // Too many denied *files* is a clean refusal.
    let mut p = f.policy();
    let mut last = Ok(());
    for i in 0..=rewind_sandbox::MAX_DENY_FILES {
        let file = f.out.join(format!("f{i}"));
        std::fs::write(&file, "x").unwrap();
        last = p.add_deny_read("sandbox.deny_read", file.as_os_str());
    }
    assert!(last
        .unwrap_err()
        .to_string()
        .contains("deny their directories"));
}
