//! The operations, one module per concept; each has a request and a response type. The list in
//! [`OPERATIONS`] names them for JSON-RPC and MCP and generates `docs/api.md`.

pub mod workspace;

use schemars::{JsonSchema, Schema, SchemaGenerator};

/// One operation: its method name (as JSON-RPC calls it), what it does, and the schemas of its
/// request and response.
pub struct Operation {
    pub method: &'static str,
    pub summary: &'static str,
    pub request: fn(&mut SchemaGenerator) -> Schema,
    pub response: fn(&mut SchemaGenerator) -> Schema,
}

fn schema<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

macro_rules! operations {
    ($($method:literal => $req:ty, $resp:ty, $summary:literal;)*) => {
        /// Every operation of the service.
        pub const OPERATIONS: &[Operation] = &[$(Operation {
            method: $method,
            summary: $summary,
            request: schema::<$req>,
            response: schema::<$resp>,
        }),*];
    };
}

operations! {
    "init" => workspace::InitRequest, workspace::InitResponse,
        "Register the workspace (on first use) and take a whole-tree capture.";
    "status" => workspace::StatusRequest, workspace::StatusResponse,
        "The workspace, its store, sessions and heads, open epochs, unfinished restores and uncovered paths.";
    "fsck" => workspace::FsckRequest, workspace::FsckResponse,
        "Verify every stored object and reference; name what is lost.";
    "recover" => workspace::RecoverRequest, workspace::RecoverResponse,
        "Finish interrupted restores and settle epochs whose process died.";
}
