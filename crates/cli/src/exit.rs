//! Exit codes of SPEC.md and the mapping from library errors to them.

pub const OK: i32 = 0;
pub const ERROR: i32 = 1;
pub const USAGE: i32 = 2;
#[allow(dead_code)]
pub const CONFLICT: i32 = 3;
pub const BUSY: i32 = 4;
pub const GUARD: i32 = 5;
pub const SANDBOX: i32 = 6;
pub const UNAVAILABLE: i32 = 7;

/// An error the CLI itself raises with a chosen exit code (e.g. a usage problem clap cannot see).
#[derive(Debug)]
pub struct Exit {
    pub code: i32,
    pub message: String,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

#[allow(dead_code)]
pub fn fail(code: i32, message: impl Into<String>) -> anyhow::Error {
    Exit {
        code,
        message: message.into(),
    }
    .into()
}

pub fn code_for(err: &anyhow::Error) -> i32 {
    for cause in err.chain() {
        if let Some(e) = cause.downcast_ref::<Exit>() {
            return e.code;
        }
        if let Some(e) = cause.downcast_ref::<rewind_core::Error>() {
            return core_code(e);
        }
        if let Some(e) = cause.downcast_ref::<rewind_store::Error>() {
            return store_code(e);
        }
        if let Some(e) = cause.downcast_ref::<rewind_sandbox::Error>() {
            // Refused or unavailable: nothing was run.
            return if e.is_refusal() { SANDBOX } else { ERROR };
        }
    }
    ERROR
}

fn core_code(e: &rewind_core::Error) -> i32 {
    use rewind_core::Error as E;
    match e {
        E::Busy { .. } => BUSY,
        E::Store(s) => store_code(s),
        E::Usage(_) => USAGE,
        E::Guard(_) => GUARD,
        _ => ERROR,
    }
}

fn store_code(e: &rewind_store::Error) -> i32 {
    use rewind_store::Error as E;
    match e {
        E::Missing { .. } | E::Corrupt { .. } | E::MissingPack { .. } => UNAVAILABLE,
        _ => ERROR,
    }
}

/// The message for stderr: the whole cause chain, outermost first.
pub fn describe(err: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in err.chain() {
        let s = cause.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
    }
    parts.join(": ")
}
