//! The integration tests of rewind-store, as one test binary: each `tests/*.rs` is a module
//! of it, and `common/` holds what they share (what other crates' tests share too is in the
//! rewind-testutil crate). A file of `tests/` that is not declared here would not be compiled
//! or run: `every_test_file_is_a_module` checks.
//!
//! proptest keeps the seeds of past failures of a test file `tests/NAME.rs` in
//! `proptest-regressions/NAME.txt` at the crate's root (it finds them from this `main.rs`).
//!
//! `memory` installs a counting global allocator, which therefore counts for every test here; its
//! measuring test runs alone in a process of its own (see there).

mod common;

mod clone;
mod dedup;
mod durability;
mod fanout;
mod fsck;
mod gc;
mod inline;
mod known;
mod memory;
mod page_cache;
mod roundtrip;
mod transfer;
mod wal;

#[test]
fn every_test_file_is_a_module() {
    rewind_testutil::assert_every_test_file_is_a_module(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"),
    );
}
