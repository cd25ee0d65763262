//! `docs/api.md` is generated from the types: every operation with the JSON Schemas of its
//! request and response, and the error tables. This test fails when the checked-in file differs
//! from what the types say now; `REWIND_BLESS=1 cargo test -p rewind-api` rewrites it.

use std::fmt::Write as _;
use std::path::Path;

use rewind_api::{ErrorKind, OPERATIONS};
use schemars::SchemaGenerator;

fn pretty(v: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(v).unwrap()
}

fn render() -> String {
    let mut g = SchemaGenerator::default();
    let mut out = String::new();
    out.push_str(
        "# Rewind service API\n\n\
         <!-- Generated from the types in crates/api by `crates/api/tests/docs.rs`. Do not edit: \
         change the types, then run `REWIND_BLESS=1 cargo test -p rewind-api`. -->\n\n\
         Every front end (the command line, `rewind serve`'s JSON-RPC, `rewind mcp`, the hook \
         adapters, the web UI) calls the same operations: a typed request in, a typed response \
         or an error out. The command line's `--json` output of a command is the response of its \
         operation.\n\n\
         **Context.** Each request is made for a *session* from a *directory* (the caller's \
         working directory, or `-C DIR`). The workspace is the nearest registered ancestor of \
         the directory, else the directory itself. A relative path in a request is taken from \
         the directory; an absolute one must be inside the workspace.\n\n\
         ## Errors\n\n\
         Every operation fails with one error document: \
         `{\"kind\": …, \"message\": …, \"hints\": […], \"data\": …}`. The kind says what \
         happened; each front maps it to its own code:\n\n\
         | kind | exit code | JSON-RPC code |\n|---|---|---|\n",
    );
    for k in ErrorKind::ALL {
        writeln!(
            out,
            "| `{}` | {} | {} |",
            k.as_str(),
            k.exit_code(),
            k.jsonrpc_code()
        )
        .unwrap();
    }
    out.push_str("\n## Operations\n");
    let schemas: Vec<_> = OPERATIONS
        .iter()
        .map(|op| ((op.request)(&mut g), (op.response)(&mut g)))
        .collect();
    let mut defs = g.take_definitions(true);
    // An operation's own request and response are shown with it; the types they share are
    // listed once, after the operations.
    let mut own = |schema: &schemars::Schema| -> String {
        let name = schema
            .get("$ref")
            .and_then(|r| r.as_str())
            .and_then(|r| r.strip_prefix("#/$defs/"));
        match name.and_then(|n| defs.remove(n).map(|d| (n.to_string(), d))) {
            Some((n, d)) => format!("`{n}`:\n\n```json\n{}\n```", pretty(&d)),
            None => format!("```json\n{}\n```", pretty(schema)),
        }
    };
    for (op, (req, resp)) in OPERATIONS.iter().zip(&schemas) {
        write!(
            out,
            "\n### `{}`\n\n{}\n\nRequest {}\n\nResponse {}\n",
            op.method,
            op.summary,
            own(req),
            own(resp)
        )
        .unwrap();
    }
    out.push_str("\n## Types\n\nThe types the operations' schemas refer to (`#/$defs/NAME`).\n");
    for (name, schema) in defs {
        write!(out, "\n### `{name}`\n\n```json\n{}\n```\n", pretty(&schema)).unwrap();
    }
    out
}

#[test]
fn api_md_matches_the_types() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/api.md");
    let want = render();
    if std::env::var_os("REWIND_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/api.md is not what the types say; run `REWIND_BLESS=1 cargo test -p rewind-api` \
         and commit the result"
    );
}

/// Every operation is documented once, and no method name is used twice.
#[test]
fn operations_have_unique_methods_and_summaries() {
    let mut names: Vec<&str> = OPERATIONS.iter().map(|o| o.method).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), OPERATIONS.len());
    assert!(OPERATIONS.iter().all(|o| !o.summary.is_empty()));
}
