//! `rewind fsck`: verify every object and reference; name what is lost.

use crate::exit;
use crate::output::emit;
use crate::Cli;

/// Verify every stored object and every reference; name what is lost.
///
/// Exit 0 when everything checks out, 7 when something is corrupt or missing.
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {}

pub fn run(cli: &Cli, _args: &Args) -> anyhow::Result<i32> {
    let report = super::service(cli)?.fsck(&rewind_api::FsckRequest {})?;
    emit(cli.json, &report, |r| {
        for p in &r.problems {
            println!("{p}");
        }
        if r.ok {
            println!(
                "ok: {} objects in {} packs verified",
                r.objects_checked, r.packs_checked
            );
            if r.clones_unhashed > 0 {
                println!(
                    "{} of them large files cloned in, present at their length; their bytes have \
                     no hash to check until `rewind push` packs a copy",
                    r.clones_unhashed
                );
            }
        } else {
            println!(
                "{} problems found ({} objects in {} packs checked); the paths above cannot be restored",
                r.problems.len(),
                r.objects_checked,
                r.packs_checked
            );
        }
    })?;
    Ok(if report.ok {
        exit::OK
    } else {
        exit::UNAVAILABLE
    })
}
