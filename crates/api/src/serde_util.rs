//! How request fields that are bytes or OS strings inside are written in JSON: as strings.

use std::ffi::OsString;

use serde::{Deserialize, Deserializer};

/// Bytes (a file's new content, a patch) given as a JSON string.
pub fn text_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    Ok(String::deserialize(d)?.into_bytes())
}

/// Optional bytes given as a JSON string.
pub fn opt_text_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.map(String::into_bytes))
}

/// Command-line words (a command and its arguments) given as JSON strings.
pub fn os_strings<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<OsString>, D::Error> {
    Ok(Vec::<String>::deserialize(d)?
        .into_iter()
        .map(OsString::from)
        .collect())
}

/// A value given as the string its `FromStr` reads (`"120:180"` for a line range).
pub fn opt_from_str<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    Option::<String>::deserialize(d)?
        .map(|s| s.parse().map_err(serde::de::Error::custom))
        .transpose()
}

/// A number, or a string as the command line writes it: a size (`"500M"`) or a duration
/// (`"7d"`).
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)] // only its schema is used
pub enum NumberOrText {
    Number(u64),
    Text(String),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Given {
    Number(u64),
    Text(String),
}

/// A size in bytes, given as a number or as the command line writes it (`"500M"`, see
/// [`crate::Size`]).
pub fn opt_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    opt_number_or_text(d, |s| s.parse::<crate::Size>().map(|s| s.0))
}

/// A duration in seconds, given as a number of seconds or as the command line writes it
/// (`"7d"`, see [`crate::Span`]).
pub fn opt_secs<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    opt_number_or_text(d, |s| s.parse::<crate::Span>().map(|s| s.0.as_secs()))
}

/// An optional number, or a string `parse` reads as one.
fn opt_number_or_text<'de, D: Deserializer<'de>>(
    d: D,
    parse: impl Fn(&str) -> Result<u64, String>,
) -> Result<Option<u64>, D::Error> {
    Option::<Given>::deserialize(d)?
        .map(|g| match g {
            Given::Number(n) => Ok(n),
            Given::Text(s) => parse(&s).map_err(serde::de::Error::custom),
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use crate::GcRequest;

    fn gc(json: &str) -> Result<GcRequest, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    /// A JSON-RPC client may write a gc's limits as the command line does, under the command
    /// line's names, or as numbers under the API's: all mean the same request.
    #[test]
    fn gc_limits_as_numbers_or_as_the_command_line_writes_them() {
        let cli =
            gc(r#"{"max_bytes": "3M", "max_age": "7d", "remote": "r", "grace": "1h"}"#).unwrap();
        let api = gc(
            r#"{"max_bytes": 3145728, "max_age_secs": 604800, "remote": "r", "grace_secs": 3600}"#,
        )
        .unwrap();
        for r in [&cli, &api] {
            assert_eq!(r.max_bytes, Some(3 << 20));
            assert_eq!(r.max_age_secs, Some(7 * 86400));
            assert_eq!(r.grace_secs, Some(3600));
        }
        assert_eq!(
            gc(r#"{"max_age_secs": "12h"}"#).unwrap().max_age_secs,
            Some(43200)
        );
        assert_eq!(gc(r#"{"max_bytes": null}"#).unwrap().max_bytes, None);
        assert_eq!(gc("{}").unwrap().max_bytes, None);
        let e = gc(r#"{"max_bytes": "3 apples"}"#).unwrap_err();
        assert!(e.contains("is not a size; write 1048576, 500K"), "{e}");
        let e = gc(r#"{"max_age": "soon"}"#).unwrap_err();
        assert!(e.contains("is not a duration"), "{e}");
        let e = gc(r#"{"max_bytes": -1}"#).unwrap_err();
        assert!(!e.is_empty());
    }
}
