//! `rewind fsck`: verify every object and reference; name what is lost.

use rewind_store::FsckProblem;
use serde::Serialize;

use crate::exit;
use crate::output::emit;
use crate::Cli;

/// Verify every stored object and every reference; name what is lost.
///
/// Exit 0 when everything checks out, 7 when something is corrupt or missing.
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {}

#[derive(Serialize)]
struct Report {
    ok: bool,
    packs_checked: u64,
    objects_checked: u64,
    problems: Vec<String>,
}

pub fn run(cli: &Cli, _args: &Args) -> anyhow::Result<i32> {
    let ws = super::open_workspace(cli, false)?;
    let (store_report, lost) = ws.fsck()?;
    let mut problems: Vec<String> = store_report.problems.iter().map(describe).collect();
    problems.extend(lost);
    let report = Report {
        ok: problems.is_empty(),
        packs_checked: store_report.packs_checked,
        objects_checked: store_report.objects_checked,
        problems,
    };
    emit(cli.json, &report, |r| {
        for p in &r.problems {
            println!("{p}");
        }
        if r.ok {
            println!(
                "ok: {} objects in {} packs verified",
                r.objects_checked, r.packs_checked
            );
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

fn describe(p: &FsckProblem) -> String {
    match p {
        FsckProblem::Corrupt {
            id,
            kind,
            pack,
            reason,
        } => {
            format!("corrupt: {kind:?} object {id} in pack {pack}: {reason}")
        }
        FsckProblem::MissingPack { pack, objects } => {
            format!("missing pack {pack}: {} objects lost", objects.len())
        }
        FsckProblem::UnreadablePack { pack, reason } => format!("unreadable pack {pack}: {reason}"),
    }
}
