//! Resources a client can show: the session's history (`rewind://log`) and, per checkpoint,
//! what a restore to it would undo as a unified diff (`rewind://checkpoint/{id}/diff`).

use rmcp::model::{ReadResourceResult, Resource, ResourceContents, ResourceTemplate};
use rmcp::ErrorData;
use serde_json::json;

use crate::Server;

/// The log's URI.
const LOG: &str = "rewind://log";
/// The most checkpoints listed as resources, newest first.
const LISTED: usize = 50;

fn diff_uri(id: &str) -> String {
    format!("rewind://checkpoint/{id}/diff")
}

/// The log, and a diff resource for each of the session's newest checkpoints.
pub(crate) async fn list(server: &Server) -> Result<Vec<Resource>, ErrorData> {
    let mut out = vec![Resource::new(LOG, "log")
        .with_title("Rewind history")
        .with_description("This session's checkpoints and changes (epochs), newest first")
        .with_mime_type("application/json")];
    let log = server
        .call("log", json!({"limit": 0}))
        .await
        .map_err(|e| ErrorData::internal_error(e.message, None))?;
    let checkpoints = log["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["type"] == "checkpoint")
        .take(LISTED);
    for c in checkpoints {
        let id = c["id"].as_str().unwrap_or_default();
        let label = c["label"].as_str().unwrap_or(id);
        out.push(
            Resource::new(diff_uri(id), format!("checkpoint {id}"))
                .with_title(format!("Undone by a restore to {label}"))
                .with_description(format!(
                    "What a restore to checkpoint {id} ({}) would undo: the checkpoint \
                     against now, as a unified diff",
                    c["time"].as_str().unwrap_or_default()
                ))
                .with_mime_type("text/x-diff"),
        );
    }
    Ok(out)
}

/// The template of the checkpoint diffs.
pub(crate) fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new("rewind://checkpoint/{id}/diff", "checkpoint diff")
            .with_description(
                "What a restore to a checkpoint (id, unique prefix or message id) would undo, \
                 as a unified diff",
            )
            .with_mime_type("text/x-diff"),
    ]
}

/// Reads `uri`; an unknown one, or an unknown checkpoint, is "resource not found".
pub(crate) async fn read(server: &Server, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let not_found = |why: String| ErrorData::resource_not_found(why, Some(json!({"uri": uri})));
    if uri == LOG {
        let log = server
            .call("log", json!({"limit": 0}))
            .await
            .map_err(|e| not_found(e.message))?;
        let text = serde_json::to_string_pretty(&log).unwrap_or_default();
        let c = ResourceContents::text(text, uri).with_mime_type("application/json");
        return Ok(ReadResourceResult::new(vec![c]));
    }
    let id = uri
        .strip_prefix("rewind://checkpoint/")
        .and_then(|r| r.strip_suffix("/diff"))
        .filter(|id| !id.is_empty() && !id.contains('/'))
        .ok_or_else(|| {
            not_found(format!(
                "no resource {uri}: the resources are {LOG} and rewind://checkpoint/{{id}}/diff"
            ))
        })?;
    let diff = server
        .call("diff", json!({"id": id}))
        .await
        .map_err(|e| not_found(e.message))?;
    let text: String = diff["files"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["patch"].as_str())
        .collect();
    let c = ResourceContents::text(text, uri).with_mime_type("text/x-diff");
    Ok(ReadResourceResult::new(vec![c]))
}
