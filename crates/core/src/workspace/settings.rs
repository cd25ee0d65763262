//! Settings of one workspace changed from a front, read and written through the op log (see
//! `db::settings`). Today one: the sandbox mode, which replaces `[sandbox] mode` of the user's
//! `config.toml` for this workspace (the workspace's `.rewind.toml` may still tighten it).

use crate::db::{self, oplog, settings::SettingRow};
use crate::workspace::Workspace;
use crate::Error;

/// Who changes a setting, recorded with it.
#[derive(Clone, Debug, Default)]
pub struct Setter {
    /// The session that asked, if any.
    pub session: Option<String>,
    /// The front it came through (`cli`, `web`, `tui`, `rpc`).
    pub front: String,
}

impl Workspace {
    /// The newest change of `key` made for this workspace, if any.
    pub fn setting(&self, key: &str) -> Result<Option<SettingRow>, Error> {
        db::settings::current(&self.db(), key)
    }

    /// Records `key = value` (with what applied before, `previous`) at the next op-log
    /// position. `expect`: the value the caller saw and decided from; when the current value
    /// is another one (someone changed it meanwhile), nothing is written and the error says
    /// so.
    pub fn set_setting(
        &self,
        key: &str,
        value: &str,
        previous: Option<&str>,
        by: &Setter,
    ) -> Result<SettingRow, Error> {
        let conn = self.db();
        db::transaction(&conn, || {
            if let Some(now) = db::settings::current(&conn, key)? {
                if Some(now.value.as_str()) != previous {
                    return Err(Error::State(format!(
                        "{key} was changed to {} meanwhile (by {}); look again and retry",
                        now.value,
                        now.front.as_deref().unwrap_or("another process")
                    )));
                }
            }
            let row = SettingRow {
                pos: oplog::next_pos(&conn)?,
                key: key.to_string(),
                value: value.to_string(),
                previous: previous.map(str::to_string),
                session: by.session.clone(),
                by_user: Some(user_name()),
                by_pid: Some(std::process::id() as i64),
                front: Some(by.front.clone()),
                created_ns: crate::base::now_ns(),
            };
            db::settings::insert(&conn, &row)?;
            Ok(row)
        })
    }
}

/// The name of the user this process runs as (its uid when it has no name).
fn user_name() -> String {
    // SAFETY: getuid cannot fail; getpwuid returns a pointer into static storage or null,
    // read at once.
    unsafe {
        let uid = libc::getuid();
        let pw = libc::getpwuid(uid);
        if pw.is_null() || (*pw).pw_name.is_null() {
            return uid.to_string();
        }
        std::ffi::CStr::from_ptr((*pw).pw_name)
            .to_string_lossy()
            .into_owned()
    }
}
