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
    fn in_child(network: bool, probe: fn() -> i32) -> i32 {
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
}
