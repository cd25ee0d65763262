//! `rewind hook AGENT`: an agent's hook events turned into Rewind sessions, checkpoints, epochs
//! and guard decisions, so users keep their agent and gain per-tool-call, per-session rewind.
//! Claude Code, Codex and Gemini CLI speak dialects of one protocol ([`Dialect`]; the table of
//! names is in `event`); Codex reports no reads, so its edits are recorded but not guarded.
//!
//! One event per process, JSON on standard input. What each event does (Claude Code's names):
//!
//! | event | action |
//! |---|---|
//! | `SessionStart` | register the workspace (the event's `cwd`) if it is not; export `REWIND_SESSION` through `CLAUDE_ENV_FILE` |
//! | `UserPromptSubmit` | a checkpoint bound to the prompt's `prompt_id` (else a per-session counter), labelled with its first line |
//! | `PostToolUse` of `Read` | record what was read (partial with `offset`/`limit`) |
//! | `PreToolUse` of `Edit`, `Write`, `NotebookEdit`, `MultiEdit` | the guard; then an exact epoch over the file, keyed by `tool_use_id` |
//! | `PreToolUse` of `Bash` | rewritten to run through `rewind exec --sandbox MODE` with its `tool_use_id` (Claude Code, and Gemini CLI's `run_shell_command` with its call id; unless the sandbox mode is `danger-full-access` or bubblewrap is missing); else an opaque epoch keyed by `tool_use_id` |
//! | `PostToolUse`, `PostToolUseFailure` | settle (or abort) that epoch; after a file tool, the session knows the file as written |
//! | `Stop`, `SessionEnd` | settle what the session left open |
//!
//! The Rewind session is the agent's `session_id`. Invariants:
//! - Only a guard refusal blocks the agent (exit 2, the reason on standard error for the model,
//!   with `[hooks] guard = "enforce"`, the default). Anything else that goes wrong, a malformed
//!   or unknown event included, is a warning on standard error and exit 0: the agent is never
//!   blocked by accident.
//! - Parallel tool calls (several `PreToolUse` before their `PostToolUse`): each opens its own
//!   epoch, and opening one settles the session's open one first. So the calls of a parallel
//!   batch are grouped into the newest call's epoch: every change is recorded once, attributed
//!   to the earlier calls up to the moment the next one began, to the newest after it. A
//!   `PostToolUse` whose epoch was settled that way has nothing left to do.
//! - With `rewind serve` running for the workspace, every operation of an event goes through
//!   its socket ([`rewind_api::Endpoint`]): the hook process opens nothing of the workspace
//!   (no database, no stat cache, no walk), so its cost does not grow with the tree. The
//!   operations and their results are the same as without a server.

mod actions;
mod event;
pub mod install;
pub mod slash;

pub use actions::{run, Outcome};
pub use event::Dialect;
