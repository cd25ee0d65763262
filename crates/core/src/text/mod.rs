//! Text tools on bytes, with no I/O: exact string edits ([`edit`]) and unified-diff patches
//! ([`patch`]), as the guarded tools apply them, and the three-way merge of lines ([`merge`])
//! a merged restore undoes one writer's change with.

pub mod edit;
pub mod merge;
pub mod patch;
