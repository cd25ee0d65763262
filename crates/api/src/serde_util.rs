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
