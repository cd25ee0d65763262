//! The integration tests of rewind-sandbox, as one test binary: each `tests/*.rs` is a module
//! of it, and `common/` holds what they share (what other crates' tests share too is in the
//! rewind-testutil crate). A file of `tests/` that is not declared here would not be compiled
//! or run: `every_test_file_is_a_module` checks.
//!
//! `bwrap::probe` is the entry point of the syscall probes that the sandbox tests run inside the
//! sandbox (this same binary, re-run with `--exact bwrap::probe`).

mod common;

mod bwrap;

#[test]
fn every_test_file_is_a_module() {
    rewind_testutil::assert_every_test_file_is_a_module(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"),
    );
}
