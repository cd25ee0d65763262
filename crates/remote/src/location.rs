//! Where a remote is: its URL (`s3://bucket/prefix`, `file:///path`), endpoint and region,
//! and the client for it (`object_store`: one code path for S3 and local directories).
//!
//! Invariants:
//! - Credentials come from the standard AWS environment variables (`AWS_ACCESS_KEY_ID`,
//!   `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`/`AWS_DEFAULT_REGION`,
//!   `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`) or the remote's section of `config.toml`; never from
//!   arguments. They go to the client and nowhere else: not into a [`Location`]'s identity,
//!   messages, or any table.
//! - A URL or endpoint carrying a user name or password is refused: it would end up in
//!   `config.toml` listings and the op log's remote tables.

use std::sync::Arc;

use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::ObjectStore;
use rewind_core::config::RemoteConfig;

use crate::error::{Error, Result};

/// A parsed remote URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Url {
    /// `s3://bucket/prefix`.
    S3 {
        /// The bucket.
        bucket: String,
        /// The prefix inside it (no leading or trailing `/`; may be empty).
        prefix: String,
    },
    /// `file:///absolute/path`: a directory (a shared mount).
    File {
        /// The directory.
        path: std::path::PathBuf,
    },
}

/// Parses a remote URL, refusing anything but `s3://bucket[/prefix]` and `file:///path`.
pub fn parse_url(url: &str) -> Result<Url> {
    let bad = |why: &str| {
        Error::Usage(format!(
            "{url:?} is not a remote URL ({why}); write s3://BUCKET/PREFIX or file:///ABSOLUTE/PATH"
        ))
    };
    if let Some(rest) = url.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(bad("no bucket"));
        }
        if bucket.contains('@') || bucket.contains(':') {
            return Err(bad(
                "credentials or a port do not belong in it: use AWS_ACCESS_KEY_ID and \
                 AWS_SECRET_ACCESS_KEY, and --endpoint for the server",
            ));
        }
        let prefix = prefix.trim_matches('/').to_string();
        if prefix.split('/').any(|c| c == "." || c == "..") {
            return Err(bad("`.` and `..` are not prefix components"));
        }
        return Ok(Url::S3 {
            bucket: bucket.to_string(),
            prefix,
        });
    }
    if let Some(rest) = url.strip_prefix("file://") {
        if !rest.starts_with('/') {
            return Err(bad("a file URL needs an absolute path: file:///path"));
        }
        let path = std::path::PathBuf::from(rest);
        if path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(bad("`..` is not allowed in it"));
        }
        return Ok(Url::File { path });
    }
    Err(bad("unknown scheme"))
}

/// Refuses an endpoint that is not `http(s)://host[:port][/path]` or that carries credentials.
pub fn check_endpoint(endpoint: &str) -> Result<()> {
    let rest = endpoint
        .strip_prefix("http://")
        .or_else(|| endpoint.strip_prefix("https://"))
        .ok_or_else(|| {
            Error::Usage(format!(
                "the endpoint {endpoint:?} is not an http:// or https:// URL"
            ))
        })?;
    let host = rest.split('/').next().unwrap_or("");
    if host.is_empty() || host.contains('@') {
        return Err(Error::Usage(
            "the endpoint must be http(s)://HOST[:PORT] without credentials; give credentials \
             through AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
                .into(),
        ));
    }
    Ok(())
}

/// A remote as configured: its name, URL, endpoint and region, and credentials if the
/// configuration file has them (else the environment's apply).
#[derive(Clone, Debug)]
pub struct Location {
    /// Its name here (`origin`), or the URL itself for a URL given directly.
    pub name: String,
    /// Its URL, as given.
    pub url: String,
    /// The parsed URL.
    pub parsed: Url,
    /// The S3 endpoint, if not AWS's.
    pub endpoint: Option<String>,
    /// The S3 region.
    pub region: Option<String>,
    /// The key file of an encrypted remote (an absolute path): its objects are sealed with the
    /// key in it (`seal`). Only the path; the key is read when the remote is opened.
    pub key_file: Option<std::path::PathBuf>,
    /// The rest of the configuration section (credentials), if it came from `config.toml`.
    config: Option<RemoteConfig>,
}

impl Location {
    /// A location from a URL and options (checked).
    pub fn new(
        name: &str,
        url: &str,
        endpoint: Option<&str>,
        region: Option<&str>,
    ) -> Result<Location> {
        let parsed = parse_url(url)?;
        if let Some(e) = endpoint {
            check_endpoint(e)?;
            if matches!(parsed, Url::File { .. }) {
                return Err(Error::Usage(
                    "--endpoint and --region are for s3:// remotes only".into(),
                ));
            }
        }
        if region.is_some() && matches!(parsed, Url::File { .. }) {
            return Err(Error::Usage(
                "--endpoint and --region are for s3:// remotes only".into(),
            ));
        }
        Ok(Location {
            name: name.to_string(),
            url: url.to_string(),
            parsed,
            endpoint: endpoint.map(str::to_string),
            region: region.map(str::to_string),
            key_file: None,
            config: None,
        })
    }

    /// The location of a `[remote.NAME]` section (as [`crate::configured`] returns it: its key
    /// file's path absolute).
    pub fn from_config(name: &str, c: &RemoteConfig) -> Result<Location> {
        let mut l = Location::new(name, &c.url, c.endpoint.as_deref(), c.region.as_deref())?;
        l.key_file = c.key_file.clone();
        l.config = Some(c.clone());
        Ok(l)
    }

    /// The same location with the key file `path` (an encrypted remote), or without one.
    pub fn with_key_file(mut self, path: Option<std::path::PathBuf>) -> Location {
        self.key_file = path;
        self
    }

    /// What the workspace's tables key this remote by: its URL, and its endpoint when it has
    /// one (the same bucket name on two servers is two remotes). Holds no credential.
    pub fn key(&self) -> String {
        match &self.endpoint {
            Some(e) => format!("{} at {}", self.url, e.trim_end_matches('/')),
            None => self.url.clone(),
        }
    }

    /// Where credentials come from: `config` (its section has them), `environment`
    /// (`AWS_ACCESS_KEY_ID` is set), `none` (anonymous or instance credentials), or `-` for a
    /// `file://` remote. Says where, never what.
    pub fn credentials_source(&self) -> &'static str {
        if matches!(self.parsed, Url::File { .. }) {
            return "-";
        }
        if self
            .config
            .as_ref()
            .is_some_and(|c| c.access_key_id.is_some() || c.secret_access_key.is_some())
        {
            "config"
        } else if std::env::var_os("AWS_ACCESS_KEY_ID").is_some() {
            "environment"
        } else {
            "none"
        }
    }

    /// The client and the prefix inside it. A `file://` directory is created if `create`.
    pub(crate) fn client(&self, create: bool) -> Result<(Arc<dyn ObjectStore>, String)> {
        match &self.parsed {
            Url::File { path } => {
                if create {
                    std::fs::create_dir_all(path).map_err(|e| Error::Transport {
                        op: "creating",
                        object: String::new(),
                        remote: self.url.clone(),
                        message: e.to_string(),
                    })?;
                } else if !path.is_dir() {
                    return Err(Error::Unknown(format!(
                        "the remote {} does not exist (no directory {})",
                        self.url,
                        path.display()
                    )));
                }
                let fs = LocalFileSystem::new_with_prefix(path).map_err(|e| Error::Transport {
                    op: "opening",
                    object: String::new(),
                    remote: self.url.clone(),
                    message: e.to_string(),
                })?;
                Ok((Arc::new(fs), String::new()))
            }
            Url::S3 { bucket, prefix } => {
                // A few quick retries, not object_store's default of minutes: a command that
                // cannot reach its remote says so while the user is still waiting for it.
                let retry = object_store::RetryConfig {
                    max_retries: 4,
                    retry_timeout: std::time::Duration::from_secs(30),
                    ..Default::default()
                };
                let mut b = AmazonS3Builder::from_env()
                    .with_bucket_name(bucket)
                    .with_retry(retry);
                if let Some(e) = &self.endpoint {
                    b = b.with_endpoint(e);
                    if e.starts_with("http://") {
                        b = b.with_allow_http(true);
                    }
                }
                if let Some(r) = &self.region {
                    b = b.with_region(r);
                }
                if let Some(c) = &self.config {
                    if let Some(k) = &c.access_key_id {
                        b = b.with_access_key_id(k);
                    }
                    if let Some(s) = &c.secret_access_key {
                        b = b.with_secret_access_key(s.expose());
                    }
                    if let Some(t) = &c.session_token {
                        b = b.with_token(t.expose());
                    }
                    if let Some(h) = c.allow_http {
                        b = b.with_allow_http(h);
                    }
                }
                let s3 = b.build().map_err(|e| Error::Transport {
                    op: "configuring",
                    object: String::new(),
                    remote: self.url.clone(),
                    message: e.to_string(),
                })?;
                Ok((Arc::new(s3), prefix.clone()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("s3://b/some/prefix/").unwrap(),
            Url::S3 {
                bucket: "b".into(),
                prefix: "some/prefix".into()
            }
        );
        assert_eq!(
            parse_url("s3://b").unwrap(),
            Url::S3 {
                bucket: "b".into(),
                prefix: "".into()
            }
        );
        assert!(parse_url("s3://").is_err());
        assert!(parse_url("s3://key:secret@b/p").is_err());
        assert!(parse_url("file://relative").is_err());
        assert!(parse_url("file:///a/../b").is_err());
        assert!(parse_url("http://x").is_err());
        assert!(check_endpoint("http://127.0.0.1:3900").is_ok());
        assert!(check_endpoint("http://k:s@127.0.0.1:3900").is_err());
        assert!(check_endpoint("127.0.0.1:3900").is_err());
    }
}
