//! Exit codes (the contract: docs/cli.md) and the mapping from library errors to them.

pub const OK: i32 = 0;
pub const ERROR: i32 = 1;
pub const USAGE: i32 = 2;
pub const CONFLICT: i32 = 3;
pub const BUSY: i32 = 4;
pub const GUARD: i32 = 5;
pub const SANDBOX: i32 = 6;
pub const UNAVAILABLE: i32 = 7;

/// Every exit code and what it means, as the manual page prints them (docs/cli.md has the same
/// table).
pub const TABLE: &[(i32, &str)] = &[
    (OK, "Success."),
    (
        ERROR,
        "Error; the message on stderr says what and what to do. Also an unknown id, an \
         ambiguous id prefix (the candidates listed) and a request the state does not allow now \
         (no open epoch, nothing to undo).",
    ),
    (
        USAGE,
        "Usage error: words that are wrong whatever the workspace holds (an unknown flag, an \
         empty session name).",
    ),
    (
        CONFLICT,
        "Conflict: the restore or undo was refused and nothing was changed; the conflicts are \
         listed. --force overrides.",
    ),
    (
        BUSY,
        "Busy: the workspace lock could not be had within the wait bound \
         (REWIND_LOCK_TIMEOUT), or a restore waited in vain for another process's open epoch.",
    ),
    (
        GUARD,
        "Guard refusal: the file was never read in this session, or changed since it was read.",
    ),
    (
        SANDBOX,
        "The sandbox is unavailable or refused the command; nothing was run.",
    ),
    (
        UNAVAILABLE,
        "A checkpoint or object is unavailable (collected or corrupt); nothing was changed.",
    ),
];

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
    classify(err).0
}

/// The `kind` of the `--json` error document: what went wrong, finer than the exit code
/// (several kinds share exit 1). Stable words: scripts branch on them.
pub fn kind_for(err: &anyhow::Error) -> &'static str {
    classify(err).1
}

/// The exit code and kind of an error: the first cause in the chain that says.
fn classify(err: &anyhow::Error) -> (i32, &'static str) {
    for cause in err.chain() {
        if let Some(e) = cause.downcast_ref::<Exit>() {
            return (e.code, code_kind(e.code));
        }
        if let Some(e) = cause.downcast_ref::<rewind_api::ApiError>() {
            return (e.kind.exit_code(), e.kind.as_str());
        }
    }
    (ERROR, "error")
}

/// The kind of an error the CLI raised with only a code.
fn code_kind(code: i32) -> &'static str {
    match code {
        USAGE => "usage",
        CONFLICT => "conflict",
        BUSY => "busy",
        GUARD => "guard",
        SANDBOX => "sandbox",
        UNAVAILABLE => "unavailable",
        _ => "error",
    }
}

/// The one JSON document an error prints on stdout under `--json` (docs/cli.md: output rules).
pub fn json_document(kind: &str, message: &str, code: i32, hints: &[String]) -> String {
    let mut error = serde_json::json!({ "kind": kind, "message": message, "exit_code": code });
    if !hints.is_empty() {
        error["hints"] = serde_json::json!(hints);
    }
    serde_json::to_string_pretty(&serde_json::json!({ "error": error }))
        .expect("a JSON value serializes")
}

/// A remedy as the command to run.
fn remedy_hint(r: &rewind_api::Remedy) -> &'static str {
    use rewind_api::Remedy as R;
    match r {
        R::Init { force: false } => "run `rewind init`",
        R::Init { force: true } => "run `rewind init --force` to register it anew",
        R::Log => "`rewind log` lists them",
        R::Fsck => "`rewind fsck` names what is lost",
        R::EpochBegin => "open one with `rewind epoch begin`",
        R::Write => "use `rewind write` to create it",
        R::ProjectDir => {
            "run rewind inside the project directory (or pass -C DIR); \
             `rewind init --force` if you really mean it"
        }
    }
}

/// What the user can do about an error, in the command line's words: the service's hints,
/// with the guard's "read the file first" as the `rewind read` command that does it.
pub fn hints_for(err: &anyhow::Error) -> Vec<String> {
    let Some(e) = err
        .chain()
        .find_map(|c| c.downcast_ref::<rewind_api::ApiError>())
    else {
        return Vec::new();
    };
    if let Some(r) = &e.remedy {
        return vec![remedy_hint(r).to_string()];
    }
    if e.kind == rewind_api::ErrorKind::Guard {
        if let Some(refusals) = e.data.as_ref().and_then(|d| d.as_array()) {
            return refusals
                .iter()
                .filter_map(|r| r["path"].as_str())
                .map(|p| format!("run `rewind read {p}`, then redo the change"))
                .collect();
        }
    }
    e.hints.clone()
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
