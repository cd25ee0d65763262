//! What a file's extent map (`FIEMAP`) says about cloned content: which blocks a clone holds
//! alone, and which parts of two files are the very same blocks.
//!
//! Two files whose extents at the same offset are the same physical blocks hold the same bytes
//! there: on a copy-on-write file system a shared block is never written in place (a write to
//! either file gets new blocks). So comparing a workspace file with a clone of it reads only
//! the ranges where their blocks differ: nothing for an unchanged file, about the edit for an
//! edited one. Extents whose map cannot be trusted to mean that (delayed allocation,
//! preallocated but unwritten, compressed or encrypted, inline, unknown) are read like
//! differing ones, and so is everything when the file system has no `FIEMAP`.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

/// `FS_IOC_FIEMAP` (`_IOWR('f', 11, struct fiemap)`).
const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
/// Flush dirty data first, so that no extent is still only in memory.
const FIEMAP_FLAG_SYNC: u32 = 0x1;
const FIEMAP_EXTENT_LAST: u32 = 0x1;
/// Other files (or snapshots) also refer to the extent.
const FIEMAP_EXTENT_SHARED: u32 = 0x2000;
/// Flags under which an extent's physical address does not identify its bytes: unknown
/// location (0x2), delayed allocation (0x4), encoded/compressed (0x8), encrypted (0x80), not
/// block-aligned (0x100), inline in metadata (0x200), packed tail (0x400), unwritten (0x800).
const UNTRUSTED: u32 = 0x2 | 0x4 | 0x8 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800;

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FiemapExtent {
    logical: u64,
    physical: u64,
    length: u64,
    _reserved64: [u64; 2],
    flags: u32,
    _reserved: [u32; 3],
}

const BATCH: usize = 128;

#[repr(C)]
struct Fiemap {
    start: u64,
    length: u64,
    flags: u32,
    mapped_extents: u32,
    extent_count: u32,
    _reserved: u32,
    extents: [FiemapExtent; BATCH],
}

/// One extent: `length` bytes at file offset `logical` are the blocks at `physical`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Extent {
    logical: u64,
    physical: u64,
    length: u64,
    flags: u32,
}

/// Every extent of `file`, in file order.
fn extents(file: &File, flags: u32) -> io::Result<Vec<Extent>> {
    let mut out = Vec::new();
    let mut start = 0u64;
    loop {
        let mut map = Fiemap {
            start,
            length: u64::MAX - start,
            flags,
            mapped_extents: 0,
            extent_count: BATCH as u32,
            _reserved: 0,
            extents: [FiemapExtent::default(); BATCH],
        };
        // SAFETY: a valid descriptor and a fiemap header followed by room for BATCH extents,
        // as extent_count says; the kernel writes no further.
        if unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP as _, &mut map) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let got = &map.extents[..(map.mapped_extents as usize).min(BATCH)];
        out.extend(got.iter().map(|e| Extent {
            logical: e.logical,
            physical: e.physical,
            length: e.length,
            flags: e.flags,
        }));
        match got.last() {
            Some(e) if e.flags & FIEMAP_EXTENT_LAST == 0 && got.len() == BATCH => {
                start = e.logical + e.length;
            }
            _ => return Ok(out),
        }
    }
}

/// Bytes of `file`'s blocks that no other file shares: what removing it would free. A clone
/// costs nothing while the workspace file it was cloned from is unchanged, and the blocks the
/// workspace no longer has once it changes: this is what counts against a state's size budget,
/// not its length. Where the file system cannot say (no `FIEMAP`), its length.
pub fn exclusive_bytes(file: &File) -> u64 {
    match extents(file, 0) {
        Ok(list) => list
            .iter()
            .filter(|e| e.flags & FIEMAP_EXTENT_SHARED == 0)
            .map(|e| e.length)
            .sum(),
        Err(_) => file.metadata().map_or(0, |m| m.len()),
    }
}

/// Whether `a` and `b` hold the same bytes, reading only the ranges where their blocks are
/// not the same blocks (see the module doc).
pub fn same_content(a: &File, b: &File) -> io::Result<bool> {
    let len = a.metadata()?.len();
    if b.metadata()?.len() != len {
        return Ok(false);
    }
    let ranges = match (extents(a, FIEMAP_FLAG_SYNC), extents(b, FIEMAP_FLAG_SYNC)) {
        (Ok(x), Ok(y)) => to_read(&x, &y, len),
        _ => vec![(0, len)],
    };
    let (mut x, mut y) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    for (start, end) in ranges {
        let mut at = start;
        while at < end {
            let n = ((end - at) as usize).min(x.len());
            a.read_exact_at(&mut x[..n], at)?;
            b.read_exact_at(&mut y[..n], at)?;
            if x[..n] != y[..n] {
                return Ok(false);
            }
            at += n as u64;
        }
    }
    Ok(true)
}

/// The ranges of `[0, len)` whose bytes must be read to compare two files with extent maps
/// `a` and `b`: all but those where both are holes, or both are trusted extents mapping the
/// offset to the same physical address. Sorted, merged.
fn to_read(a: &[Extent], b: &[Extent], len: u64) -> Vec<(u64, u64)> {
    let mut cuts: Vec<u64> = vec![0, len];
    for e in a.iter().chain(b) {
        cuts.push(e.logical.min(len));
        cuts.push(e.logical.saturating_add(e.length).min(len));
    }
    cuts.sort_unstable();
    cuts.dedup();
    let covering = |list: &[Extent], at: u64| {
        let i = list.partition_point(|e| e.logical <= at);
        i.checked_sub(1)
            .map(|i| list[i])
            .filter(|e| at < e.logical.saturating_add(e.length))
    };
    let mut out: Vec<(u64, u64)> = Vec::new();
    for w in cuts.windows(2) {
        let (s, e) = (w[0], w[1]);
        if s >= e {
            continue;
        }
        let same = match (covering(a, s), covering(b, s)) {
            (None, None) => true,
            (Some(x), Some(y)) => {
                (x.flags | y.flags) & UNTRUSTED == 0
                    && x.physical.wrapping_sub(x.logical) == y.physical.wrapping_sub(y.logical)
            }
            _ => false,
        };
        if same {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.1 == s => last.1 = e,
            _ => out.push((s, e)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(logical: u64, physical: u64, length: u64) -> Extent {
        Extent {
            logical,
            physical,
            length,
            flags: 0,
        }
    }

    #[test]
    fn only_ranges_on_different_blocks_are_read() {
        let a = [ext(0, 1000, 100), ext(100, 5000, 50), ext(150, 1150, 50)];
        // b: the same blocks but for [100, 150), written anew.
        let b = [ext(0, 1000, 100), ext(100, 9000, 50), ext(150, 1150, 50)];
        assert_eq!(to_read(&a, &b, 200), [(100, 150)]);
        assert_eq!(to_read(&a, &a, 200), []);
        // A hole in both is the same zeros; a hole in one is read.
        assert_eq!(to_read(&a[..1], &b[..1], 200), []);
        assert_eq!(to_read(&a, &b[..1], 200), [(100, 200)]);
        // The same blocks at another offset are other bytes.
        assert_eq!(
            to_read(&[ext(0, 1000, 100)], &[ext(0, 1010, 100)], 100),
            [(0, 100)]
        );
        // An extent whose address does not identify its bytes is read.
        let mut c = a;
        c[0].flags = 0x8; // encoded
        assert_eq!(to_read(&a, &c, 200), [(0, 100)]);
        // Extents past the end are cut at the length.
        assert_eq!(
            to_read(&[ext(0, 1, 4096)], &[ext(0, 2, 4096)], 10),
            [(0, 10)]
        );
    }
}
