//! The integration tests of rewind-tui, as one test binary: each `tests/*.rs` is a module of
//! it. A file of `tests/` that is not declared here would not be compiled or run:
//! `every_test_file_is_a_module` checks.

mod common;
mod screens;

#[test]
fn every_test_file_is_a_module() {
    rewind_testutil::assert_every_test_file_is_a_module(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"),
    );
}
