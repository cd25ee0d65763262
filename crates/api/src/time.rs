//! Local times of the op log's nanosecond timestamps, as the documents and fronts show them.

/// Broken-down local time of a nanosecond Unix timestamp, and its UTC offset in seconds.
fn local_tm(ns: i64) -> Option<(libc::tm, i64)> {
    let secs: libc::time_t = ns.div_euclid(1_000_000_000) as libc::time_t;
    // SAFETY: an all-zero `tm` is a valid value; localtime_r fills it and touches nothing else.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let ok = unsafe { !libc::localtime_r(&secs, &mut tm).is_null() };
    ok.then(|| {
        let off = tm.tm_gmtoff;
        (tm, off)
    })
}

/// `2025-06-01 14:03:25` in local time.
pub fn local_time(ns: i64) -> String {
    match local_tm(ns) {
        Some((tm, _)) => format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
            tm.tm_year + 1900,
            tm.tm_mon + 1,
            tm.tm_mday,
            tm.tm_hour,
            tm.tm_min,
            tm.tm_sec
        ),
        None => format!("@{}", ns / 1_000_000_000),
    }
}

/// `2025-06-01T14:03:25.123+02:00`: local time with its offset (the `time` of documents).
pub fn rfc3339(ns: i64) -> String {
    match local_tm(ns) {
        Some((tm, off)) => {
            let sign = if off < 0 { '-' } else { '+' };
            let off = off.abs();
            format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}{sign}{:02}:{:02}",
                tm.tm_year + 1900,
                tm.tm_mon + 1,
                tm.tm_mday,
                tm.tm_hour,
                tm.tm_min,
                tm.tm_sec,
                ns.rem_euclid(1_000_000_000) / 1_000_000,
                off / 3600,
                (off % 3600) / 60
            )
        }
        None => String::new(),
    }
}
