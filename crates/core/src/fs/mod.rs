//! The workspace on disk: workspace-relative paths ([`relpath`]), file operations confined to
//! the root that never follow a symlink out of it ([`root`]), and what a path holds now
//! ([`probe`]).

pub mod probe;
pub mod relpath;
pub mod root;

/// Directory names that are never captured and never written, wherever they appear:
/// version-control metadata, which has its own history that a restore must never rewrite.
pub const NEVER_CAPTURED: &[&[u8]] = &[b".git"];
