//! Trusted listings: when a directory's cached names can stand in for reading it (the rule
//! is in the parent module's header, its proof in `docs/format.md`, "Trusted directory
//! listings"), and the `lstat`s that check a reused listing entry by entry.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rewind_store::EntryKind;

use super::{EntryStat, StatEntry, State, PARALLEL_STAT_AT, PARALLEL_STAT_CHUNK};
use crate::capture::ignore_rules::Rules;
use crate::capture::state::DirStamp;

/// A directory's own `lstat`, as its parent's listing found it.
#[derive(Clone, Copy, Debug)]
pub(super) struct DirStat {
    pub(super) mtime_ns: i64,
    pub(super) ctime_ns: i64,
    pub(super) ino: u64,
}

impl DirStat {
    /// The `lstat` of directory `abs` now.
    pub(super) fn of_path(abs: &Path) -> Option<DirStat> {
        let st = EntryStat::from(std::fs::symlink_metadata(abs).ok()?);
        Some(DirStat::of_lstat(&st))
    }

    fn of_lstat(st: &EntryStat) -> DirStat {
        DirStat {
            mtime_ns: st.mtime_ns,
            ctime_ns: st.ctime_ns,
            ino: st.ino,
        }
    }

    pub(super) fn of(s: &StatEntry) -> DirStat {
        DirStat {
            mtime_ns: s.mtime_ns,
            ctime_ns: s.ctime_ns,
            ino: s.ino,
        }
    }
}

/// Whether the file system under `root` is one where every change to a directory's entries
/// sets its mtime and ctime from the kernel's clock: the local ones Linux maintains itself
/// (ext2/3/4, XFS, btrfs, tmpfs, F2FS). Elsewhere (network, FUSE, overlay and unknown file
/// systems) every directory is read.
pub(crate) fn keeps_directory_mtimes(root: &Path) -> bool {
    const EXT: i64 = 0xEF53;
    const XFS: i64 = 0x5846_5342;
    const BTRFS: i64 = 0x9123_683E;
    const TMPFS: i64 = 0x0102_1994;
    const F2FS: i64 = 0xF2F5_2010;
    let Ok(c) = std::ffi::CString::new(root.as_os_str().as_bytes()) else {
        return false;
    };
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and out-pointer.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return false;
    }
    #[allow(clippy::unnecessary_cast)]
    let magic = st.f_type as i64;
    [EXT, XFS, BTRFS, TMPFS, F2FS].contains(&magic)
}

/// What a listing's filtering depended on besides the directory's names: the ignore rules in
/// force (none when ignored paths are captured too) and whether the directory is inside an
/// ignored one (then only what was captured before is kept).
pub(super) fn listing_rules(rules: Option<&Rules>, under_ignored: bool) -> [u8; 16] {
    let mut h = blake3::Hasher::new();
    match rules {
        Some(r) => h.update(b"rules").update(&r.digest()),
        None => h.update(b"capture ignored"),
    };
    h.update(&[under_ignored as u8]);
    let mut d = [0u8; 16];
    d.copy_from_slice(&h.finalize().as_bytes()[..16]);
    d
}

/// Whether `stamp` can vouch for its directory in a later walk at all: the directory's last
/// change came a granule before the listing was read.
pub(crate) fn can_vouch(stamp: &DirStamp, granule: i64) -> bool {
    let listed = stamp.listed_ns.div_euclid(granule);
    stamp.mtime_ns.div_euclid(granule) < listed && stamp.ctime_ns.div_euclid(granule) < listed
}

/// Whether `stamp`, taken when a directory's listing was read, vouches that the directory still
/// has the same names now that its `lstat` is `now` (see the module header).
pub(super) fn vouches(stamp: &DirStamp, now: &DirStat, rules: &[u8; 16], granule: i64) -> bool {
    stamp.mtime_ns == now.mtime_ns
        && stamp.ctime_ns == now.ctime_ns
        && stamp.ino == now.ino
        && stamp.rules == *rules
        && can_vouch(stamp, granule)
}

/// When every entry of a trusted cached listing still has its cached stat (files and
/// symlinks not racy, none uncovered), the listing's subdirectories with their `lstat`s now;
/// `None` when anything differs (then the listing is walked entry by entry, each name
/// `lstat`ed again: keeping the `lstat`s taken here for that saved 5% of an epoch that changes
/// one file of a 100k-entry directory, and cost the no-op walk of that directory 10% for the
/// vector of them). Large listings are checked on every core, as a large directory's entries
/// are stat'ed.
pub(super) fn unchanged_listing<'c>(
    dir: &std::os::fd::OwnedFd,
    cached: &'c [StatEntry],
    old: &State,
) -> Option<Vec<(&'c [u8], DirStat)>> {
    let check = |c: &'c StatEntry| -> Result<Option<(&'c [u8], DirStat)>, ()> {
        let st = EntryStat::from(lstat_at(dir, &c.name).map_err(|_| ())?);
        let kind = match st.mode & libc::S_IFMT {
            libc::S_IFDIR => EntryKind::Dir,
            libc::S_IFLNK => EntryKind::Symlink,
            libc::S_IFREG => EntryKind::File,
            _ => return Err(()),
        };
        if c.kind != kind || c.mode != st.mode & 0o7777 {
            return Err(());
        }
        if kind == EntryKind::Dir {
            return Ok(Some((c.name.as_slice(), DirStat::of_lstat(&st))));
        }
        let same = c.size == st.size
            && c.mtime_ns == st.mtime_ns
            && c.ctime_ns == st.ctime_ns
            && c.ino == st.ino
            && !old.is_racy(c);
        if same {
            Ok(None)
        } else {
            Err(())
        }
    };
    let subdirs: Result<Vec<_>, ()> = if cached.len() >= PARALLEL_STAT_AT {
        use rayon::prelude::*;
        cached
            .par_iter()
            .with_min_len(PARALLEL_STAT_CHUNK)
            .filter_map(|c| check(c).transpose())
            .collect()
    } else {
        cached.iter().filter_map(|c| check(c).transpose()).collect()
    };
    subdirs.ok()
}

/// Opens directory `abs` for `fstatat` (no following a symlink put in its place); `None`
/// when it cannot be (then it is listed as usual).
pub(super) fn open_dir(abs: &Path) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let c = std::ffi::CString::new(abs.as_os_str().as_bytes()).ok()?;
    // SAFETY: a valid C string; the descriptor is owned below.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    // SAFETY: a fresh descriptor this function owns.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// `lstat` of `name` in directory `dir`, the name copied onto the stack (a name is at most
/// 255 bytes: no allocation per entry).
pub(super) fn lstat_at(dir: &std::os::fd::OwnedFd, name: &[u8]) -> std::io::Result<libc::stat> {
    use std::os::fd::AsRawFd;
    let mut buf = [0u8; 256];
    if name.len() >= buf.len() || name.contains(&0) {
        return Err(std::io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    buf[..name.len()].copy_from_slice(name);
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated name, a valid descriptor and out-pointer.
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            buf.as_ptr().cast(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc == 0 {
        Ok(st)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::super::TRUST_GRANULE_NS;
    use super::*;
    use proptest::prelude::*;

    /// What a directory's `lstat` says at time `at` on a file system whose timestamps are
    /// truncated to `tick` ns (kernels before multigrain timestamps stamp with the coarse
    /// clock; ext4 with small inodes keeps whole seconds), after namespace changes at `changes` and `touch -d`
    /// resets (mtime set back to `old`, ctime to the time of the reset) at `resets`.
    fn stat_at(at: i64, tick: i64, changes: &[i64], resets: &[(i64, i64)]) -> DirStat {
        let ts = |t: i64| t.div_euclid(tick) * tick;
        let (mut mtime, mut ctime) = (0, 0);
        let mut events: Vec<(i64, Option<i64>)> = changes.iter().map(|c| (*c, None)).collect();
        events.extend(resets.iter().map(|(t, old)| (*t, Some(*old))));
        events.sort();
        for (t, reset) in events {
            if t > at {
                break;
            }
            mtime = reset.unwrap_or(ts(t));
            ctime = ts(t);
        }
        DirStat {
            mtime_ns: mtime,
            ctime_ns: ctime,
            ino: 7,
        }
    }

    proptest! {
        /// The rule against a model of coarse timestamps: whenever a stamp vouches for a
        /// directory, no name changed in it after its listing was read. The stamp is the
        /// `lstat` at `s`, the coarse clock read at `l` (after `s`), the listing read at `r`
        /// (after `l`); the directory is looked at again at `n`. This holds for every clock
        /// tick up to the granule, which this kernel's own timestamps (fine-grained once
        /// queried) cannot show.
        #[test]
        fn a_stamp_never_vouches_across_a_later_change(
            tick_i in 0usize..5,
            clock_i in 0usize..2,
            granule_i in 0usize..2,
            s in 0i64..3_000_000_000,
            dl in 0i64..20_000_000,
            dr in 0i64..5_000_000,
            dn in 0i64..3_000_000_000,
            changes in prop::collection::vec(0i64..6_000_000_000, 0..6),
            resets in prop::collection::vec((0i64..6_000_000_000, 0i64..3_000_000_000), 0..2),
        ) {
            // The file system's timestamps are the clock's, truncated to its own tick.
            let tick = [1, 1_000_000, 4_000_000, 10_000_000, 1_000_000_000][tick_i];
            let clock = [1, 4_000_000][clock_i].min(tick);
            let granule = [TRUST_GRANULE_NS, 10_000_000][granule_i].max(tick);
            let (l, r) = (s + dl, s + dl + dr);
            let n = r + dn;
            let here = stat_at(s, tick, &changes, &resets);
            let stamp = DirStamp {
                mtime_ns: here.mtime_ns,
                ctime_ns: here.ctime_ns,
                ino: here.ino,
                listed_ns: l.div_euclid(clock) * clock,
                rules: [1; 16],
            };
            let now = stat_at(n, tick, &changes, &resets);
            let changed_after = changes
                .iter()
                .chain(resets.iter().map(|(t, _)| t))
                .any(|c| *c >= r && *c <= n);
            prop_assert!(
                !(changed_after && vouches(&stamp, &now, &[1; 16], granule)),
                "vouched across a change: stamp {:?}, now {:?}", stamp, now
            );
        }
    }

    /// Other ignore rules, another inode or another stat: no.
    #[test]
    fn a_stamp_vouches_only_for_its_rules_and_stat() {
        let stamp = DirStamp {
            mtime_ns: 1_000,
            ctime_ns: 2_000,
            ino: 3,
            listed_ns: 5_000_000_000,
            rules: [1; 16],
        };
        let now = DirStat {
            mtime_ns: 1_000,
            ctime_ns: 2_000,
            ino: 3,
        };
        assert!(vouches(&stamp, &now, &[1; 16], TRUST_GRANULE_NS));
        assert!(!vouches(&stamp, &now, &[2; 16], TRUST_GRANULE_NS));
        assert!(!vouches(
            &stamp,
            &DirStat { ino: 4, ..now },
            &[1; 16],
            TRUST_GRANULE_NS
        ));
        let later = DirStat {
            ctime_ns: 2_001,
            ..now
        };
        assert!(!vouches(&stamp, &later, &[1; 16], TRUST_GRANULE_NS));
        let same_second = DirStamp {
            listed_ns: 999_999_999,
            ..stamp
        };
        assert!(!vouches(&same_second, &now, &[1; 16], TRUST_GRANULE_NS));
    }
}
