//! The environment the sandbox gets. It is computed here and set on the **bubblewrap process
//! itself** (after `env_clear`), not with `--setenv`: inside `--unshare-pid`, PID 1 is bwrap and
//! its environment is readable at `/proc/1/environ`, and its argv at `/proc/1/cmdline`. So a
//! value bwrap was started with is a value the command can read, and no value goes in argv.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

/// Set for every sandboxed command, to the sandbox's mode (see `Policy::environment`).
pub const SANDBOX_VAR: &str = "REWIND_SANDBOX";

/// Passed through by default (exact names, or `PREFIX_*`).
pub const DEFAULT_ALLOW: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "TZ",
    "TMPDIR",
];

/// Never passed through via a pattern, even if allowed by one: credentials by name, and the
/// agent sockets that let a command use a credential without reading it. A name listed
/// *exactly* in `env_allow` still passes (the user asked for that one variable).
pub const DEFAULT_DENY: &[&str] = &[
    "*KEY*",
    "*SECRET*",
    "*TOKEN*",
    "*PASSWORD*",
    "*PASSWD*",
    "*CREDENTIAL*",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "AWS_*",
    "GOOGLE_APPLICATION_CREDENTIALS",
];

/// Shell-style match of `name` against `pattern` where `*` matches any run (case-insensitive).
fn glob_match(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((b'*', rest)) => (0..=name.len()).any(|i| glob_match(rest, &name[i..])),
        Some((c, rest)) => name
            .split_first()
            .is_some_and(|(n, tail)| n.eq_ignore_ascii_case(c) && glob_match(rest, tail)),
    }
}

fn matches_any(patterns: &[&str], name: &OsStr) -> bool {
    patterns
        .iter()
        .any(|p| glob_match(p.as_bytes(), name.as_bytes()))
}

/// The environment for the sandbox: the allowed subset of `vars`. `TMPDIR`, when set, is
/// pointed at the private `/tmp` (the host's temporary directory is not writable inside).
pub fn scrub<I>(vars: I, extra_allow: &[String]) -> Vec<(OsString, OsString)>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    let extra: Vec<&str> = extra_allow.iter().map(String::as_str).collect();
    let mut out: Vec<(OsString, OsString)> = vars
        .into_iter()
        .filter(|(name, _)| {
            let exact = extra
                .iter()
                .any(|e| !e.contains('*') && OsStr::new(e) == name);
            exact
                || ((matches_any(DEFAULT_ALLOW, name) || matches_any(&extra, name))
                    && !matches_any(DEFAULT_DENY, name))
        })
        .map(|(k, v)| {
            if k == "TMPDIR" {
                (k, OsString::from("/tmp"))
            } else {
                (k, v)
            }
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        list.iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    fn names(v: &[(OsString, OsString)]) -> Vec<String> {
        v.iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn allowlist_and_secret_patterns() {
        let out = scrub(
            vars(&[
                ("PATH", "/usr/bin"),
                ("HOME", "/h"),
                ("LC_ALL", "C"),
                ("OPENAI_API_KEY", "sk"),
                ("SSH_AUTH_SOCK", "/run/agent"),
                ("GITHUB_TOKEN", "t"),
                ("RANDOM_THING", "x"),
                ("TMPDIR", "/var/tmp/me"),
            ]),
            &[],
        );
        assert_eq!(names(&out), ["HOME", "LC_ALL", "PATH", "TMPDIR"]);
        assert_eq!(out[3].1, "/tmp");
    }

    #[test]
    fn extra_allow_patterns_never_admit_secrets_but_exact_names_do() {
        let v = vars(&[
            ("CARGO_HOME", "/c"),
            ("CARGO_REGISTRY_TOKEN", "t"),
            ("MY_API_KEY", "k"),
        ]);
        assert_eq!(
            names(&scrub(v.clone(), &["CARGO_*".into()])),
            ["CARGO_HOME"]
        );
        assert_eq!(
            names(&scrub(v, &["CARGO_*".into(), "MY_API_KEY".into()])),
            ["CARGO_HOME", "MY_API_KEY"]
        );
    }

    #[test]
    fn glob() {
        assert!(glob_match(b"*KEY*", b"openai_api_key"));
        assert!(glob_match(b"LC_*", b"LC_CTYPE"));
        assert!(!glob_match(b"LC_*", b"XLC_CTYPE"));
        assert!(!glob_match(b"PATH", b"PATHX"));
    }
}
