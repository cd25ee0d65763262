//! The integration tests of rewind-cli, as one test binary: each `tests/*.rs` is a module
//! of it, and `common/` holds what they share (what other crates' tests share too is in the
//! rewind-testutil crate). A file of `tests/` that is not declared here would not be compiled
//! or run: `every_test_file_is_a_module` checks.
//!
//! They run the real `rewind` binary, built with failpoints (rewind-cli's dev-dependencies).

mod common;

mod baseline;
mod basics;
mod completions_man;
mod contract;
mod crash;
mod docs;
mod exec_sandbox;
mod fail_closed;
mod gc;
mod gc_crash;
mod guard;
mod hooks;
mod invocation_dir;
mod listings;
mod looking;
mod mcp;
mod merge;
mod moved;
mod overlapping_epochs;
mod real_claude;
mod reflink;
#[macro_use]
mod remote;
mod remote_gc;
mod restore_failures;
mod restore_safety;
mod rewind_concurrency;
mod rewind_crash;
mod rewind_sessions;
mod rewind_shell;
mod sandbox_cli;
mod sandbox_mode;
mod serve;
mod shadow;
mod tui;
mod web;
mod worktree;

#[test]
fn every_test_file_is_a_module() {
    rewind_testutil::assert_every_test_file_is_a_module(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"),
    );
}
