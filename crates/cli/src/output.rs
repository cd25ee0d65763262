//! Output rules: human text by default, exactly one JSON document on stdout with `--json`.

use serde::Serialize;

/// Prints `value` as JSON when `json` is set, otherwise runs `human`.
pub fn emit<T: Serialize>(json: bool, value: &T, human: impl FnOnce(&T)) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(value)?);
    } else {
        human(value);
    }
    Ok(())
}

/// `1048576` → `1.0 MiB`, for human output only.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}
