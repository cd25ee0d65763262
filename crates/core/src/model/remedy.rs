//! What the caller can do about an error, as an operation of the service rather than a command
//! line: each front words it in its own syntax (the CLI as the command to run, an MCP server as
//! the tool to call), so the engine's messages say what happened and nothing else.

use serde::Serialize;

/// An action that resolves (or explains) an error.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Remedy {
    /// Register the workspace (again, with `force`: a broad root, or a replaced directory).
    Init {
        /// Whether registering needs the force flag.
        force: bool,
    },
    /// List the checkpoints, epochs and messages the session can name.
    Log,
    /// Verify the store and name what is lost.
    Fsck,
    /// Open an epoch first.
    EpochBegin,
    /// Create the file with a whole-file write (an edit needs an existing file).
    Write,
    /// Act from inside the project directory instead.
    ProjectDir,
}
