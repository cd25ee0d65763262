//! The bubblewrap argument vector, built from a resolved [`Plan`]. Pure: no filesystem access,
//! so the exact argv is unit-tested without bwrap.

use std::ffi::OsString;
use std::os::fd::RawFd;
use std::path::PathBuf;

/// Everything the argv needs, already canonical and checked on the host.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Unshare the network namespace (network off).
    pub unshare_net: bool,
    /// Bound writable, in order (workspace first). Empty in `read-only`.
    pub writable: Vec<PathBuf>,
    /// Bound read-only again on top of the writable binds (`.git`, agent config, …).
    pub read_only: Vec<PathBuf>,
    /// Hidden behind an empty mode-000 read-only tmpfs.
    pub deny_dirs: Vec<PathBuf>,
    /// Hidden behind an empty mode-000 read-only file.
    pub deny_files: Vec<PathBuf>,
    /// Working directory of the command.
    pub cwd: PathBuf,
}

/// Descriptors bwrap reads: the seccomp program, its status channel, and one empty source per
/// denied file (each `--ro-bind-data` consumes its descriptor).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fds {
    /// The compiled seccomp program (`--add-seccomp-fd`).
    pub seccomp: RawFd,
    /// Where bwrap writes its JSON status lines (`--json-status-fd`): how a failure of
    /// bubblewrap itself is told from the command's own exit status.
    pub json_status: RawFd,
    /// One empty source per [`Plan::deny_files`] entry, in the same order.
    pub deny_files: Vec<RawFd>,
}

fn push(out: &mut Vec<OsString>, parts: &[&str]) {
    out.extend(parts.iter().map(OsString::from));
}

fn push_path_twice(out: &mut Vec<OsString>, flag: &str, p: &std::path::Path) {
    out.push(flag.into());
    out.push(p.into());
    out.push(p.into());
}

/// The options for bwrap, without the trailing `-- CMD…` (so they can go through `--args`).
pub fn options(plan: &Plan, fds: &Fds) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    // Process isolation. As root, bwrap only creates a user namespace when asked, and without
    // one the command would keep CAP_SYS_ADMIN and could unmount the protections.
    // `--as-pid-1`: otherwise PID 1 inside is bwrap's own init, which runs *without* the
    // seccomp filter and is writable through /proc/1/mem by the (same-uid) command — a way to
    // run unfiltered syscalls, e.g. connect to a host unix socket.
    push(
        &mut a,
        &[
            "--new-session",
            "--die-with-parent",
            "--unshare-user",
            "--unshare-pid",
            "--as-pid-1",
            "--unshare-ipc",
        ],
    );
    if plan.unshare_net {
        push(&mut a, &["--unshare-net"]);
    }
    push(&mut a, &["--disable-userns", "--cap-drop", "ALL"]);
    // The filesystem: everything read-only, fresh /dev and /proc, private /tmp before any bind
    // below /tmp so those binds are not hidden by it.
    push(
        &mut a,
        &[
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
        ],
    );
    for w in &plan.writable {
        push_path_twice(&mut a, "--bind", w);
    }
    for p in &plan.read_only {
        push_path_twice(&mut a, "--ro-bind", p);
    }
    // Deny-read last, so nothing bound later re-exposes what they hide.
    for d in &plan.deny_dirs {
        push(&mut a, &["--perms", "000", "--tmpfs"]);
        a.push(d.into());
        a.push("--remount-ro".into());
        a.push(d.into());
    }
    for (f, fd) in plan.deny_files.iter().zip(&fds.deny_files) {
        push(&mut a, &["--perms", "000", "--ro-bind-data"]);
        a.push(fd.to_string().into());
        a.push(f.into());
    }
    push(&mut a, &["--add-seccomp-fd"]);
    a.push(fds.seccomp.to_string().into());
    push(&mut a, &["--json-status-fd"]);
    a.push(fds.json_status.to_string().into());
    a.push("--chdir".into());
    a.push((&plan.cwd).into());
    a
}

/// The complete argv after the bwrap program name: options, `--`, then the command.
pub fn build(plan: &Plan, fds: &Fds, command: &[OsString]) -> Vec<OsString> {
    let mut a = options(plan, fds);
    a.push("--".into());
    a.extend(command.iter().cloned());
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan {
            unshare_net: true,
            writable: vec!["/w".into(), "/extra".into()],
            read_only: vec!["/w/.git".into(), "/w/.rewind.toml".into()],
            deny_dirs: vec!["/h/.ssh".into()],
            deny_files: vec!["/h/.aws/credentials".into()],
            cwd: "/w/sub".into(),
        }
    }

    fn fds() -> Fds {
        Fds {
            seccomp: 7,
            json_status: 8,
            deny_files: vec![9],
        }
    }

    fn s(v: &[OsString]) -> String {
        v.iter()
            .map(|x| x.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn workspace_write_argv_in_order() {
        let argv = s(&build(&plan(), &fds(), &["echo".into(), "--bind".into()]));
        assert_eq!(
            argv,
            "--new-session --die-with-parent --unshare-user --unshare-pid --as-pid-1 --unshare-ipc \
             --unshare-net --disable-userns --cap-drop ALL \
             --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp \
             --bind /w /w --bind /extra /extra \
             --ro-bind /w/.git /w/.git --ro-bind /w/.rewind.toml /w/.rewind.toml \
             --perms 000 --tmpfs /h/.ssh --remount-ro /h/.ssh \
             --perms 000 --ro-bind-data 9 /h/.aws/credentials \
             --add-seccomp-fd 7 --json-status-fd 8 --chdir /w/sub -- echo --bind"
        );
    }

    #[test]
    fn network_on_keeps_net_namespace_and_read_only_has_no_binds() {
        let mut p = plan();
        p.unshare_net = false;
        p.writable.clear();
        p.read_only.clear();
        let argv = s(&build(&p, &fds(), &["true".into()]));
        assert!(!argv.contains("--unshare-net"));
        assert!(!argv.contains("--bind "));
        assert!(argv.contains("--unshare-user --unshare-pid --as-pid-1"));
        assert!(argv.contains("--add-seccomp-fd 7"));
    }

    #[test]
    fn tmp_comes_before_binds_and_denies_after_everything() {
        let argv = build(&plan(), &fds(), &["true".into()]);
        let pos = |needle: &str| argv.iter().position(|x| x == needle).unwrap();
        assert!(pos("/tmp") < pos("/w"));
        assert!(pos("/w/.git") < pos("/h/.ssh"));
        assert!(pos("--add-seccomp-fd") > pos("/h/.aws/credentials"));
        assert_eq!(argv.iter().filter(|x| *x == "--").count(), 1);
    }
}
