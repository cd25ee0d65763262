//! Text tools on bytes, with no I/O: exact string edits ([`edit`]) and unified-diff patches
//! ([`patch`]), as the guarded tools apply them.

pub mod edit;
pub mod patch;
