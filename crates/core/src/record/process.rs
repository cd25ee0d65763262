//! Who owns an open epoch: this process's identity (pid and start time, since pids are
//! reused), and whether an owner is still alive to settle it itself.

use crate::db::oplog::Owner;

/// This process's identity for ownership of open epochs: pid and start time (pids are reused).
pub fn this_process() -> Owner {
    process(std::process::id())
}

/// Process `pid`'s identity (see [`this_process`]).
pub fn process(pid: u32) -> Owner {
    Owner::Process {
        pid,
        start: process_start(pid).unwrap_or(0),
    }
}

pub(super) fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22 (starttime), counted after the parenthesised command name.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the owner of an open epoch can still settle it itself.
pub fn owner_alive(owner: &Owner) -> bool {
    match *owner {
        Owner::Session => true,
        Owner::Process { pid, start } => {
            // SAFETY: signal 0 only checks for existence.
            let exists = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0
                || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
            exists && (start == 0 || process_start(pid) == Some(start))
        }
    }
}
