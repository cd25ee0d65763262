//! What every layer uses and that knows nothing of workspaces: the clock, random ids, freeing
//! large values off the exit path, failpoints, tracing, and how paths and object ids are
//! written in JSON.

use std::time::{SystemTime, UNIX_EPOCH};

pub mod failpoint;
pub mod trace;

/// Nanoseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// A fresh 16-hex-digit id for epochs and checkpoints.
pub(crate) fn random_hex() -> String {
    let mut buf = [0u8; 8];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut f, &mut buf);
    }
    if buf == [0; 8] {
        buf = now_ns().to_le_bytes();
    }
    hex::encode(buf)
}

/// A fresh 32-hex-digit workspace id (128 random bits: ids name state directories that must not
/// collide across machines).
pub(crate) fn random_id() -> std::io::Result<String> {
    let mut buf = [0u8; 16];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut buf)?;
    Ok(hex::encode(buf))
}

/// Frees `v` on a thread of its own: for the large maps of one small allocation per file (the
/// stat cache, a walk's findings) that a command would otherwise free on its way to the exit,
/// 7-10 ms at 100k files. A process that exits right after does not wait for it; if no thread
/// can be started, `v` is freed here.
pub(crate) fn drop_in_background<T: Send + 'static>(v: T) {
    let _ = std::thread::Builder::new()
        .name("rewind-free".into())
        .spawn(move || drop(v));
}

/// Writes a path (bytes) as a JSON string, lossily where it is not UTF-8.
pub(crate) fn serde_path<S: serde::Serializer>(p: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&String::from_utf8_lossy(p))
}

/// Writes an object id as its hex string.
pub(crate) fn serde_id<S: serde::Serializer>(
    id: &rewind_store::ObjectId,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_str(&id.to_hex())
}

/// Walks two lists sorted by the same key side by side, pairing equal keys: each item comes out
/// once, with its partner from the other list if there is one. The shape of every comparison of
/// two directory listings (a capture against the stat cache, a tree against another).
pub(crate) fn merge_sorted<'a, A, B, K: Ord>(
    a: &'a [A],
    b: &'a [B],
    key_a: impl Fn(&A) -> &K,
    key_b: impl Fn(&B) -> &K,
) -> impl Iterator<Item = (Option<&'a A>, Option<&'a B>)> {
    let (mut i, mut j) = (0, 0);
    std::iter::from_fn(move || {
        let pair = match (a.get(i), b.get(j)) {
            (None, None) => return None,
            (Some(x), Some(y)) => match key_a(x).cmp(key_b(y)) {
                std::cmp::Ordering::Less => (Some(x), None),
                std::cmp::Ordering::Greater => (None, Some(y)),
                std::cmp::Ordering::Equal => (Some(x), Some(y)),
            },
            (Some(x), None) => (Some(x), None),
            (None, Some(y)) => (None, Some(y)),
        };
        i += usize::from(pair.0.is_some());
        j += usize::from(pair.1.is_some());
        Some(pair)
    })
}

#[cfg(test)]
mod tests {
    /// Every item comes out once, in order, paired with its equal.
    #[test]
    fn merge_sorted_pairs_equal_keys() {
        let a = [1, 3, 4, 7];
        let b = [2, 3, 7, 8, 9];
        let pairs: Vec<_> = super::merge_sorted(&a, &b, |x| x, |y| y)
            .map(|(x, y)| (x.copied(), y.copied()))
            .collect();
        assert_eq!(
            pairs,
            [
                (Some(1), None),
                (None, Some(2)),
                (Some(3), Some(3)),
                (Some(4), None),
                (Some(7), Some(7)),
                (None, Some(8)),
                (None, Some(9)),
            ]
        );
        assert_eq!(super::merge_sorted(&a, &[], |x| x, |y: &i32| y).count(), 4);
    }
}

/// `2025-06-01T12:03:25Z`: a time (ns since the Unix epoch) in UTC, for messages.
pub fn utc(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

#[cfg(test)]
mod utc_tests {
    #[test]
    fn utc_dates() {
        assert_eq!(super::utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(
            super::utc(1_700_000_000_000_000_000),
            "2023-11-14T22:13:20Z"
        );
    }
}
