//! Layer ④ of Rewind: running an agent's shell commands in an OS sandbox on Linux —
//! bubblewrap for the filesystem, process and network isolation, plus a seccomp program
//! (built with `seccompiler`, handed to bwrap with `--add-seccomp-fd`) for what namespaces
//! cannot stop (host unix sockets, io_uring, ptrace, 32-bit/x32 syscalls).
//!
//! # Use
//!
//! ```no_run
//! use rewind_sandbox::{Mode, Policy, SandboxConfig};
//! # fn main() -> Result<(), rewind_sandbox::Error> {
//! # let (workspace, state_dir, config) = (std::path::Path::new("."), std::path::Path::new("/s"), SandboxConfig::default());
//! let mut policy = Policy::new(workspace, state_dir)?;   // workspace-write, network off
//! policy.apply_config(&config)?;                         // the user's `[sandbox]` section
//! // policy.restrict(AgentRequest { .. })?;              // what an agent asked: only tightens
//! let status = policy.command(["cargo", "test"], None)?.status()?;
//! # let _ = status; Ok(()) }
//! ```
//!
//! [`Policy::command`] returns a [`Sandboxed`]: the prepared `bwrap` invocation together with
//! the descriptors it reads (seccomp program, status channel) and the placeholders it mounts
//! over; they stay alive until the [`SandboxedChild`] is waited for. Its `wait` fails with
//! [`Error::Unavailable`] when bubblewrap could not start the command, so "the command failed"
//! and "nothing ran" are never confused. Every error except [`Error::Io`] and
//! [`Error::CommandNotFound`] is a refusal ([`Error::is_refusal`]): nothing was run.
//!
//! `danger-full-access` returns the command unwrapped; it can be set by the user
//! ([`Policy::set_mode`], config) but never by [`Policy::restrict`].
//!
//! See `docs/sandbox.md` for the policy, the exact argv, the seccomp rules and known limits.

pub mod argv;
mod config;
pub mod env;
mod error;
mod ghost;
mod paths;
mod policy;
pub mod preflight;
pub mod protect;
pub mod seccomp;
mod spawn;

pub use config::{Mode, SandboxConfig};
pub use error::{Error, Result};
pub use policy::{AgentRequest, Policy, MAX_DENY_FILES};
pub use preflight::Report;
pub use spawn::{Sandboxed, SandboxedChild};
