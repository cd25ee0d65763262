//! rewind-api's integration tests, one binary.

mod docs;
