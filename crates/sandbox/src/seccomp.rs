//! The seccomp program bubblewrap installs (via `--add-seccomp-fd`) just before it execs the
//! command. bwrap sets `PR_SET_NO_NEW_PRIVS` itself, so no re-exec helper is needed.
//!
//! Default **allow**, listed calls fail with `EPERM`. What the namespaces cannot stop is what is
//! listed:
//! - host unix sockets stay reachable through `--ro-bind / /` (connect ignores read-only
//!   mounts), so `socket(AF_UNIX)` is refused and `socketpair` is limited to stream/seqpacket
//!   (a datagram socketpair can `sendmsg` to any path address, and `sendmsg` can't be filtered);
//! - network off: every `socket()`, plus `connect`/`bind`/`listen`/`accept` and addressed
//!   `sendto` on inherited descriptors; network on: only `AF_INET`, `AF_INET6`, `AF_NETLINK`;
//! - io_uring (it creates sockets without `socket()`), `ptrace`, `process_vm_*`;
//! - namespace and mount calls, `clone(CLONE_NEWUSER)`, keyrings, `TIOCSTI`/`TIOCLINUX`;
//! - set-user-ID and set-group-ID bits: `chmod` & co. with them, and `open`/`openat`/`creat`/
//!   `mknod` creating a file with them. The workspace is mounted `nosuid` inside, but the
//!   bits stay on the host, where the user (often root) may later run the file. `openat2`
//!   passes its mode in memory a filter cannot read, so it answers `ENOSYS` (callers fall back
//!   to `openat`);
//! - 32-bit syscalls (seccompiler's architecture check kills them) and, on x86-64, x32 syscall
//!   numbers (`nr >= 0x40000000`), which a default-allow filter would otherwise let through.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition,
    SeccompFilter, SeccompRule,
};

use crate::error::{Error, Result};

const X32_SYSCALL_BIT: u32 = 0x4000_0000;
const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
const CLONE_NEWUSER: u64 = 0x1000_0000;
const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541C;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
/// `__O_TMPFILE` without `O_DIRECTORY`: `O_TMPFILE` creates an inode (with a mode) to link later.
const O_TMPFILE_BIT: u64 = (libc::O_TMPFILE & !libc::O_DIRECTORY) as u64;

/// The syscalls denied outright in every sandboxed mode.
pub fn always_denied() -> Vec<(&'static str, i64)> {
    vec![
        ("io_uring_setup", libc::SYS_io_uring_setup),
        ("io_uring_enter", libc::SYS_io_uring_enter),
        ("io_uring_register", libc::SYS_io_uring_register),
        ("ptrace", libc::SYS_ptrace),
        ("process_vm_readv", libc::SYS_process_vm_readv),
        ("process_vm_writev", libc::SYS_process_vm_writev),
        ("unshare", libc::SYS_unshare),
        ("setns", libc::SYS_setns),
        ("mount", libc::SYS_mount),
        ("umount2", libc::SYS_umount2),
        ("pivot_root", libc::SYS_pivot_root),
        ("open_tree", libc::SYS_open_tree),
        ("move_mount", libc::SYS_move_mount),
        ("fsopen", libc::SYS_fsopen),
        ("fsconfig", libc::SYS_fsconfig),
        ("fsmount", libc::SYS_fsmount),
        ("fspick", libc::SYS_fspick),
        ("mount_setattr", libc::SYS_mount_setattr),
        ("keyctl", libc::SYS_keyctl),
        ("add_key", libc::SYS_add_key),
        ("request_key", libc::SYS_request_key),
    ]
}

/// Further syscalls denied outright when the network is off.
pub fn denied_without_network() -> Vec<(&'static str, i64)> {
    vec![
        ("socket", libc::SYS_socket),
        ("connect", libc::SYS_connect),
        ("bind", libc::SYS_bind),
        ("listen", libc::SYS_listen),
        ("accept", libc::SYS_accept),
        ("accept4", libc::SYS_accept4),
    ]
}

fn cond(arg: u8, len: Len, op: Op, value: u64) -> Result<SeccompCondition> {
    SeccompCondition::new(arg, len, op, value).map_err(|e| Error::Seccomp(e.to_string()))
}

fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule> {
    SeccompRule::new(conds).map_err(|e| Error::Seccomp(e.to_string()))
}

/// The rule map (syscall → rules; an empty rule list means "always") for a mode.
pub fn rules(network: bool) -> Result<BTreeMap<i64, Vec<SeccompRule>>> {
    let mut map: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (_, nr) in always_denied() {
        map.insert(nr, vec![]);
    }
    // socketpair: only AF_UNIX stream/seqpacket. (AF_UNIX turns SOCK_RAW into SOCK_DGRAM.)
    let unix = libc::AF_UNIX as u64;
    map.insert(
        libc::SYS_socketpair,
        vec![
            rule(vec![cond(0, Len::Dword, Op::Ne, unix)?])?,
            rule(vec![cond(
                1,
                Len::Dword,
                Op::MaskedEq(0xf),
                libc::SOCK_DGRAM as u64,
            )?])?,
            rule(vec![cond(
                1,
                Len::Dword,
                Op::MaskedEq(0xf),
                libc::SOCK_RAW as u64,
            )?])?,
        ],
    );
    map.insert(
        libc::SYS_clone,
        vec![rule(vec![cond(
            0,
            Len::Qword,
            Op::MaskedEq(CLONE_NEWUSER),
            CLONE_NEWUSER,
        )?])?],
    );
    map.insert(
        libc::SYS_ioctl,
        vec![
            rule(vec![cond(1, Len::Dword, Op::Eq, TIOCSTI)?])?,
            rule(vec![cond(1, Len::Dword, Op::Eq, TIOCLINUX)?])?,
        ],
    );
    for (nr, rules) in setid_rules()? {
        map.insert(nr, rules);
    }
    if network {
        // Internet sockets (and netlink, which resolvers use to list addresses) only.
        map.insert(
            libc::SYS_socket,
            vec![rule(vec![
                cond(0, Len::Dword, Op::Ne, libc::AF_INET as u64)?,
                cond(0, Len::Dword, Op::Ne, libc::AF_INET6 as u64)?,
                cond(0, Len::Dword, Op::Ne, libc::AF_NETLINK as u64)?,
            ])?],
        );
    } else {
        for (_, nr) in denied_without_network() {
            map.insert(nr, vec![]);
        }
        // An address on sendto can only matter for an inherited unbound datagram socket.
        map.insert(
            libc::SYS_sendto,
            vec![rule(vec![cond(4, Len::Qword, Op::Ne, 0)?])?],
        );
    }
    Ok(map)
}

/// The calls that can give a file a set-user-ID or set-group-ID bit, each with the rules that
/// match when they would. Mode arguments are `mode_t`: the low 32 bits.
fn setid_rules() -> Result<Vec<(i64, Vec<SeccompRule>)>> {
    const SETID: [u64; 2] = [libc::S_ISUID as u64, libc::S_ISGID as u64];
    // Any mode with either bit, at argument `mode`.
    let with_bit = |mode: u8| -> Result<Vec<SeccompRule>> {
        SETID
            .iter()
            .map(|&bit| rule(vec![cond(mode, Len::Dword, Op::MaskedEq(bit), bit)?]))
            .collect()
    };
    // An open that creates (`O_CREAT` or `O_TMPFILE` in argument `flags`) with either bit.
    let creating = |flags: u8, mode: u8| -> Result<Vec<SeccompRule>> {
        let mut out = vec![];
        for create in [libc::O_CREAT as u64, O_TMPFILE_BIT] {
            for bit in SETID {
                out.push(rule(vec![
                    cond(flags, Len::Dword, Op::MaskedEq(create), create)?,
                    cond(mode, Len::Dword, Op::MaskedEq(bit), bit)?,
                ])?);
            }
        }
        Ok(out)
    };
    let mut calls = vec![
        (libc::SYS_fchmod, with_bit(1)?),
        (libc::SYS_fchmodat, with_bit(2)?),
        (libc::SYS_fchmodat2, with_bit(2)?),
        (libc::SYS_mknodat, with_bit(2)?),
        (libc::SYS_openat, creating(2, 3)?),
    ];
    // The legacy path calls exist on x86-64 only (aarch64 and riscv64 have just the *at ones).
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        (libc::SYS_chmod, with_bit(1)?),
        (libc::SYS_mknod, with_bit(1)?),
        (libc::SYS_creat, with_bit(1)?),
        (libc::SYS_open, creating(1, 2)?),
    ]);
    Ok(calls)
}

fn stmt(code: u16, k: u32) -> seccompiler::sock_filter {
    seccompiler::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> seccompiler::sock_filter {
    seccompiler::sock_filter { code, jt, jf, k }
}

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
const BPF_RET_K: u16 = 0x06;

/// The compiled program for this machine's architecture.
pub fn program(network: bool) -> Result<BpfProgram> {
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|_| Error::Unsupported {
            platform: format!("{} (no seccomp support)", std::env::consts::ARCH),
        })?;
    let filter = SeccompFilter::new(
        rules(network)?,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| Error::Seccomp(e.to_string()))?;
    let body: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| Error::Seccomp(e.to_string()))?;
    let mut prog = Vec::with_capacity(body.len() + 6);
    if cfg!(target_arch = "x86_64") {
        // x32 guard, ahead of seccompiler's own program: on x86-64, x32 calls arrive with
        // AUDIT_ARCH_X86_64 and nr | 0x40000000, which the rules below would not match.
        prog.push(stmt(BPF_LD_W_ABS, 4)); // seccomp_data.arch
        prog.push(jump(BPF_JEQ_K, AUDIT_ARCH_X86_64, 1, 0));
        prog.push(stmt(BPF_RET_K, SECCOMP_RET_KILL_PROCESS));
        prog.push(stmt(BPF_LD_W_ABS, 0)); // seccomp_data.nr
        prog.push(jump(BPF_JGE_K, X32_SYSCALL_BIT, 0, 1));
        prog.push(stmt(BPF_RET_K, SECCOMP_RET_KILL_PROCESS));
    }
    // openat2 → ENOSYS, not EPERM: its mode is in memory (see the module header), and ENOSYS
    // is what makes glibc and other callers fall back to openat, which the rules do inspect.
    // (On x86-64 the architecture was checked above; elsewhere a foreign call with this
    // number fails too, which is harmless.)
    prog.push(stmt(BPF_LD_W_ABS, 0)); // seccomp_data.nr
    prog.push(jump(BPF_JEQ_K, libc::SYS_openat2 as u32, 0, 1));
    prog.push(stmt(BPF_RET_K, SECCOMP_RET_ERRNO | libc::ENOSYS as u32));
    prog.extend(body);
    Ok(prog)
}

/// The program as the raw `struct sock_filter[]` bytes bwrap reads from the fd.
pub fn program_bytes(network: bool) -> Result<Vec<u8>> {
    let prog = program(network)?;
    let mut out = Vec::with_capacity(prog.len() * 8);
    for ins in &prog {
        out.extend_from_slice(&ins.code.to_ne_bytes());
        out.push(ins.jt);
        out.push(ins.jf);
        out.extend_from_slice(&ins.k.to_ne_bytes());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_selection() {
        let off = rules(false).unwrap();
        let on = rules(true).unwrap();
        for (name, nr) in always_denied() {
            assert!(off.get(&nr).is_some_and(Vec::is_empty), "{name} off");
            assert!(on.get(&nr).is_some_and(Vec::is_empty), "{name} on");
        }
        for (name, nr) in denied_without_network() {
            assert!(off.get(&nr).is_some_and(Vec::is_empty), "{name} off");
        }
        // network on: socket is conditional (inet allowed), connect is not filtered
        assert!(on.get(&libc::SYS_socket).is_some_and(|r| r.len() == 1));
        assert!(!on.contains_key(&libc::SYS_connect));
        assert!(!on.contains_key(&libc::SYS_sendto));
        assert!(off.contains_key(&libc::SYS_sendto));
        // socketpair limits in both modes
        assert_eq!(off[&libc::SYS_socketpair].len(), 3);
        assert_eq!(on[&libc::SYS_socketpair].len(), 3);
    }

    #[test]
    fn program_bytes_are_whole_instructions_with_x32_guard() {
        let bytes = program_bytes(false).unwrap();
        assert_eq!(bytes.len() % 8, 0);
        assert!(bytes.len() / 8 < 4096, "BPF_MAXINSNS");
        if cfg!(target_arch = "x86_64") {
            let prog = program(true).unwrap();
            assert_eq!(prog[4].code, BPF_JGE_K);
            assert_eq!(prog[4].k, X32_SYSCALL_BIT);
            assert_eq!(prog[5].k, SECCOMP_RET_KILL_PROCESS);
        }
        assert_ne!(program_bytes(true).unwrap(), bytes);
    }

    /// Applies the program in a forked child (no bwrap needed) and reports errno of probes.
    fn in_child(network: bool, probe: impl FnOnce() -> i32) -> i32 {
        let prog = program(network).unwrap();
        // SAFETY: the child only makes raw syscalls and exits.
        unsafe {
            let pid = libc::fork();
            assert!(pid >= 0);
            if pid == 0 {
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                let fprog = libc::sock_fprog {
                    len: prog.len() as u16,
                    filter: prog.as_ptr() as *mut libc::sock_filter,
                };
                if libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &fprog as *const _ as libc::c_ulong,
                ) != 0
                {
                    libc::_exit(99);
                }
                libc::_exit(probe());
            }
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
            assert!(libc::WIFEXITED(status), "status {status}");
            libc::WEXITSTATUS(status)
        }
    }

    fn errno() -> i32 {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }

    fn sock(domain: i32, ty: i32) -> i32 {
        // SAFETY: plain syscall.
        let fd = unsafe { libc::socket(domain, ty, 0) };
        if fd >= 0 {
            0
        } else {
            errno()
        }
    }

    fn pair(ty: i32) -> i32 {
        let mut fds = [0i32; 2];
        // SAFETY: plain syscall.
        if unsafe { libc::socketpair(libc::AF_UNIX, ty, 0, fds.as_mut_ptr()) } == 0 {
            0
        } else {
            errno()
        }
    }

    #[test]
    fn filter_enforced_in_process() {
        let eperm = libc::EPERM;
        assert_eq!(
            in_child(false, || sock(libc::AF_INET, libc::SOCK_STREAM)),
            eperm
        );
        assert_eq!(
            in_child(false, || sock(libc::AF_UNIX, libc::SOCK_STREAM)),
            eperm
        );
        assert_eq!(in_child(true, || sock(libc::AF_INET, libc::SOCK_STREAM)), 0);
        assert_eq!(
            in_child(true, || sock(libc::AF_UNIX, libc::SOCK_STREAM)),
            eperm
        );
        assert_eq!(
            in_child(true, || sock(libc::AF_VSOCK, libc::SOCK_STREAM)),
            eperm
        );
        assert_eq!(in_child(false, || pair(libc::SOCK_STREAM)), 0);
        assert_eq!(in_child(false, || pair(libc::SOCK_DGRAM)), eperm);
        assert_eq!(
            in_child(false, || {
                // SAFETY: plain syscall with invalid args; only the errno matters.
                let r = unsafe { libc::syscall(libc::SYS_io_uring_setup, 1, 0) };
                if r < 0 {
                    errno()
                } else {
                    0
                }
            }),
            eperm
        );
    }

    /// An argument of a raw system call probe: the probe's path, or a number.
    #[derive(Clone, Copy)]
    enum Arg {
        Path,
        N(i64),
    }

    #[test]
    fn setid_bits_are_refused_and_plain_modes_allowed() {
        use std::os::unix::fs::PermissionsExt;
        use Arg::{Path, N};
        let dir = tempfile::tempdir().unwrap();
        let (at, creat) = (
            N(libc::AT_FDCWD as i64),
            N((libc::O_CREAT | libc::O_WRONLY) as i64),
        );
        let tmpfile = N((libc::O_TMPFILE | libc::O_WRONLY) as i64);
        let (suid, sgid, plain) = (N(0o4755), N(0o2755), N(0o755));
        let reg = |mode: i64| N(libc::S_IFREG as i64 | mode);
        let (eperm, enosys) = (libc::EPERM, libc::ENOSYS);
        // (name, whether the file exists first, call, arguments, errno wanted)
        let mut cases = vec![
            (
                "fchmodat-suid",
                true,
                libc::SYS_fchmodat,
                [at, Path, suid, N(0)],
                eperm,
            ),
            (
                "fchmodat-sgid",
                true,
                libc::SYS_fchmodat,
                [at, Path, sgid, N(0)],
                eperm,
            ),
            (
                "fchmodat-plain",
                true,
                libc::SYS_fchmodat,
                [at, Path, plain, N(0)],
                0,
            ),
            (
                "fchmodat2-suid",
                true,
                libc::SYS_fchmodat2,
                [at, Path, suid, N(0)],
                eperm,
            ),
            (
                "openat-suid",
                false,
                libc::SYS_openat,
                [at, Path, creat, suid],
                eperm,
            ),
            (
                "openat-sgid",
                false,
                libc::SYS_openat,
                [at, Path, creat, sgid],
                eperm,
            ),
            (
                "openat-plain",
                false,
                libc::SYS_openat,
                [at, Path, creat, plain],
                0,
            ),
            // Without O_CREAT the mode argument means nothing and is not looked at.
            (
                "openat-read",
                true,
                libc::SYS_openat,
                [at, Path, N(0), suid],
                0,
            ),
            (
                "mknodat-suid",
                false,
                libc::SYS_mknodat,
                [at, Path, reg(0o4755), N(0)],
                eperm,
            ),
            (
                "mknodat-plain",
                false,
                libc::SYS_mknodat,
                [at, Path, reg(0o644), N(0)],
                0,
            ),
        ];
        #[cfg(target_arch = "x86_64")]
        cases.extend([
            (
                "chmod-suid",
                true,
                libc::SYS_chmod,
                [Path, suid, N(0), N(0)],
                eperm,
            ),
            (
                "creat-suid",
                false,
                libc::SYS_creat,
                [Path, suid, N(0), N(0)],
                eperm,
            ),
            (
                "open-suid",
                false,
                libc::SYS_open,
                [Path, creat, suid, N(0)],
                eperm,
            ),
            (
                "mknod-suid",
                false,
                libc::SYS_mknod,
                [Path, reg(0o4755), N(0), N(0)],
                eperm,
            ),
        ]);
        for (name, exists, nr, args, want) in cases {
            let path = dir.path().join(name);
            if exists {
                std::fs::write(&path, "").unwrap();
            }
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
            let a = args.map(|a| match a {
                Path => c.as_ptr() as i64,
                N(n) => n,
            });
            // SAFETY: a raw system call whose pointer argument is a valid C string.
            let probe = || ok_or_errno(unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3]) });
            assert_eq!(in_child(false, probe), want, "{name}");
            let mode = std::fs::metadata(&path).map_or(0, |m| m.permissions().mode());
            assert_eq!(mode & 0o6000, 0, "{name}: mode {mode:o}");
        }
        // O_TMPFILE makes an inode with a mode, to be linked in later.
        let d = std::ffi::CString::new(dir.path().as_os_str().as_encoded_bytes()).unwrap();
        let [a0, _, a2, a3] = [at, Path, tmpfile, suid].map(|a| match a {
            Path => 0,
            N(n) => n,
        });
        // SAFETY: as above.
        let probe =
            || ok_or_errno(unsafe { libc::syscall(libc::SYS_openat, a0, d.as_ptr(), a2, a3) });
        assert_eq!(in_child(false, probe), eperm, "O_TMPFILE");
        // openat2's mode is in memory: the call answers ENOSYS so callers fall back to openat.
        let p = std::ffi::CString::new(
            dir.path()
                .join("openat2")
                .into_os_string()
                .into_encoded_bytes(),
        )
        .unwrap();
        let how: [u64; 3] = [(libc::O_CREAT | libc::O_WRONLY) as u64, 0o4755, 0];
        // SAFETY: a valid C string and a valid `struct open_how` of 24 bytes.
        let probe = || {
            ok_or_errno(unsafe {
                libc::syscall(
                    libc::SYS_openat2,
                    libc::AT_FDCWD,
                    p.as_ptr(),
                    how.as_ptr(),
                    24,
                )
            })
        };
        assert_eq!(in_child(false, probe), enosys, "openat2");
        assert!(!dir.path().join("openat2").exists());
        // Unfiltered, the same call does set the bit: the checks above can fail.
        let c = std::ffi::CString::new(
            dir.path()
                .join("fchmodat-plain")
                .into_os_string()
                .into_encoded_bytes(),
        )
        .unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::chmod(c.as_ptr(), 0o4755) }, 0);
    }

    /// 0 if the call succeeded, else its errno.
    fn ok_or_errno(r: i64) -> i32 {
        if r < 0 {
            errno()
        } else {
            0
        }
    }
}
