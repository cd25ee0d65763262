//! `rewind remote add NAME URL | list | remove NAME`: where histories are pushed to and
//! cloned from.

use std::path::PathBuf;

use clap::Subcommand;
use rewind_api::{RemoteAddRequest, RemoteListRequest, RemoteRemoveRequest};

use crate::output::emit;
use crate::Cli;

/// Remotes: object storage (S3 and compatible servers) or a directory that holds workspaces'
/// histories, so they outlive the machine.
///
/// Remotes are the user's: `remote add` writes `[remote.NAME]` to config.toml in the state
/// directory ($REWIND_HOME), never to a workspace. Each workspace pushes its own history into
/// a remote; a clone can start from any of them. Credentials are never arguments: they come
/// from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (AWS_REGION,
/// AWS_ENDPOINT_URL and AWS_ALLOW_HTTP too), or from access_key_id / secret_access_key in the
/// remote's section of config.toml, and are never printed.
///
/// A remote can be encrypted: with --encrypt (a new random key, written to keys/NAME.key in
/// the state directory) or --key-file PATH (an existing key), every object pushed but the
/// remote's small config object is sealed (XChaCha20-Poly1305) before it leaves the machine.
/// The key stays outside the remote, in that file: back it up, since without it the remote
/// cannot be read. Another machine reads the remote with the key file: rewind clone URL DIR
/// --key-file PATH.
///
///   rewind remote add origin s3://my-bucket/rewind --endpoint http://127.0.0.1:3900 --region garage
///   rewind remote add shared file:///mnt/team/rewind
///   rewind remote add vault s3://my-bucket/private --encrypt
///   rewind push origin
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
}

#[derive(Subcommand, Debug)]
pub enum Sub {
    /// Add a remote: s3://BUCKET/PREFIX or file:///ABSOLUTE/PATH.
    Add {
        /// Its name: letters, digits, '-', '_', '.' (like origin).
        name: String,
        /// s3://BUCKET/PREFIX or file:///ABSOLUTE/PATH.
        url: String,
        /// The S3 endpoint, for storage other than AWS's (http://127.0.0.1:3900).
        #[arg(long, value_name = "URL")]
        endpoint: Option<String>,
        /// The S3 region.
        #[arg(long, value_name = "REGION")]
        region: Option<String>,
        /// Encrypt the remote with a new random key, written to keys/NAME.key in the state
        /// directory (mode 0600). Back that file up: without it the remote cannot be read.
        #[arg(long)]
        encrypt: bool,
        /// Encrypt the remote with the key in this file (32 bytes, raw or as 64 hex digits,
        /// readable by you alone), such as another machine's keys/NAME.key.
        #[arg(long, value_name = "PATH")]
        key_file: Option<PathBuf>,
    },
    /// List the remotes: name, URL, where credentials come from (never what they are).
    List,
    /// Remove a remote from the configuration; nothing in the remote is touched.
    Remove {
        /// Its name.
        name: String,
    },
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let service = super::service(cli)?;
    match &args.command {
        Sub::Add {
            name,
            url,
            endpoint,
            region,
            encrypt,
            key_file,
        } => {
            let r = service.remote_add(&RemoteAddRequest {
                name: name.clone(),
                url: url.clone(),
                endpoint: endpoint.clone(),
                region: region.clone(),
                encrypt: *encrypt,
                key_file: key_file.clone(),
            })?;
            // Said whatever the output format: a key nobody backed up is a remote nobody can
            // read.
            if let Some(k) = &r.key_generated {
                eprintln!(
                    "rewind: the key of {} was generated into {k}; back that file up (a password \
                     manager, another machine): without it the remote cannot be read",
                    r.remote.name
                );
            }
            emit(cli.json, &r, |r| {
                println!(
                    "added remote {} ({}) to {}",
                    r.remote.name, r.remote.url, r.config
                );
                if let Some(k) = &r.remote.key_file {
                    println!("encrypted with the key in {k}");
                }
            })?;
        }
        Sub::List => {
            let l = service.remote_list(&RemoteListRequest {})?;
            emit(cli.json, &l, |l| {
                if l.remotes.is_empty() {
                    println!("no remotes; add one: rewind remote add NAME URL");
                    return;
                }
                for r in &l.remotes {
                    let mut extra = String::new();
                    if let Some(e) = &r.endpoint {
                        extra.push_str(&format!(" endpoint {e}"));
                    }
                    if let Some(g) = &r.region {
                        extra.push_str(&format!(" region {g}"));
                    }
                    if let Some(k) = &r.key_file {
                        extra.push_str(&format!(" encrypted (key file {k})"));
                    }
                    println!(
                        "{:<12} {}{extra} ({}; credentials: {})",
                        r.name, r.url, r.source, r.credentials
                    );
                }
            })?;
        }
        Sub::Remove { name } => {
            let r = service.remote_remove(&RemoteRemoveRequest { name: name.clone() })?;
            emit(cli.json, &r, |r| {
                println!("removed remote {} ({})", r.name, r.url);
                if let Some(k) = &r.key_file {
                    println!("its key file {k} was left where it is");
                }
            })?;
        }
    }
    Ok(0)
}
