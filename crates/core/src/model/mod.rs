//! The engine's data model, shared by every layer and depending on none of them: what a path
//! holds ([`entry`]), the op log's rows ([`oplog`]), and what the guard keeps and says
//! ([`guard`]). Plain data: no I/O, no SQL.

pub mod entry;
pub mod guard;
pub mod oplog;
pub mod remedy;
