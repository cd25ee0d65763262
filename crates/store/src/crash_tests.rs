//! placeholder
pub(crate) fn after_rename_hook() {}
