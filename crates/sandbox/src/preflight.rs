//! Can the sandbox work here? Finding bubblewrap, its version, the platform, and (for
//! `rewind sandbox check`) a trial run. Any failure is a refusal with the fix in the message;
//! there is no unsandboxed or Docker fallback.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{Error, Result};

/// Oldest bubblewrap with every flag the policy uses (`--disable-userns` is 0.8.0).
pub const MIN_VERSION: (u32, u32, u32) = (0, 8, 0);

/// Refuses operating systems and CPUs without a backend.
pub fn platform(os: &str, arch: &str) -> Result<()> {
    if os != "linux" {
        return Err(Error::Unsupported {
            platform: os.to_string(),
        });
    }
    if !matches!(arch, "x86_64" | "aarch64" | "riscv64") {
        return Err(Error::Unsupported {
            platform: format!("{os}/{arch}"),
        });
    }
    Ok(())
}

/// `explicit`, else the first executable `bwrap` in `path_var` (absolute entries only: a
/// relative PATH entry would let the current directory pick the sandbox).
pub fn find_bwrap(explicit: Option<&Path>, path_var: Option<&OsStr>) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if let Some(p) = explicit {
        return if executable(p) {
            Ok(p.to_path_buf())
        } else {
            Err(Error::BwrapMissing {
                searched: format!("{} is not an executable file", p.display()),
            })
        };
    }
    let path_var = path_var.unwrap_or_default();
    for dir in std::env::split_paths(path_var) {
        if dir.is_absolute() {
            let cand = dir.join("bwrap");
            if executable(&cand) {
                return Ok(cand);
            }
        }
    }
    Err(Error::BwrapMissing {
        searched: format!("not in PATH={}", path_var.to_string_lossy()),
    })
}

/// `bubblewrap 0.8.0` → (0, 8, 0).
pub fn parse_version(text: &str) -> Option<(u32, u32, u32)> {
    let v = text
        .split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))?;
    let mut it = v.split('.').map(|p| {
        p.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse::<u32>()
            .ok()
    });
    Some((
        it.next()??,
        it.next().flatten().unwrap_or(0),
        it.next().flatten().unwrap_or(0),
    ))
}

/// Runs `bwrap --version` (with an empty environment) and checks it against [`MIN_VERSION`].
pub fn check_version(bwrap: &Path) -> Result<String> {
    let out = Command::new(bwrap)
        .arg("--version")
        .env_clear()
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|e| Error::BwrapMissing {
            searched: format!("{} could not be run: {e}", bwrap.display()),
        })?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let needed = format!("{}.{}.{}", MIN_VERSION.0, MIN_VERSION.1, MIN_VERSION.2);
    match parse_version(&text) {
        Some(v) if v >= MIN_VERSION => Ok(format!("{}.{}.{}", v.0, v.1, v.2)),
        _ => Err(Error::BwrapTooOld {
            path: bwrap.to_path_buf(),
            found: if text.is_empty() {
                "of unknown version".into()
            } else {
                text
            },
            needed,
        }),
    }
}

fn read_sysctl(name: &str) -> Option<String> {
    std::fs::read_to_string(Path::new("/proc/sys").join(name))
        .ok()
        .map(|s| s.trim().to_string())
}

/// What to tell the user when bubblewrap cannot create its namespaces.
pub fn namespace_hint() -> String {
    let mut hints = Vec::new();
    if read_sysctl("user/max_user_namespaces").as_deref() == Some("0") {
        hints.push("user namespaces are disabled: sysctl -w user.max_user_namespaces=15000");
    }
    if read_sysctl("kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        hints.push(
            "unprivileged user namespaces are off: sysctl -w kernel.unprivileged_userns_clone=1",
        );
    }
    if read_sysctl("kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        hints.push("AppArmor restricts user namespaces (Ubuntu 24.04+): add an AppArmor profile allowing userns for /usr/bin/bwrap, or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0");
    }
    if hints.is_empty() {
        "bubblewrap needs user namespaces; inside a container, allow them (e.g. docker --security-opt seccomp=unconfined, or run the agent outside the container)".into()
    } else {
        hints.join("; ")
    }
}

/// The result of a successful `rewind sandbox check`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The `bwrap` executable that will be used.
    pub bwrap: PathBuf,
    /// Its version, `MAJOR.MINOR.PATCH`.
    pub version: String,
    /// (check, outcome) in the order run.
    pub checks: Vec<(String, String)>,
}

/// The PATH the sandbox will see (used to find bwrap and to check the command).
pub fn host_path() -> Option<OsString> {
    std::env::var_os("PATH")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(parse_version("bubblewrap 0.8.0"), Some((0, 8, 0)));
        assert_eq!(parse_version("bubblewrap 0.11.0\n"), Some((0, 11, 0)));
        assert_eq!(parse_version("bubblewrap 0.4"), Some((0, 4, 0)));
        assert_eq!(parse_version("garbage"), None);
        assert!((0, 4, 0) < MIN_VERSION && (0, 10, 1) > MIN_VERSION);
    }

    #[test]
    fn platforms() {
        assert!(platform("linux", "x86_64").is_ok());
        for (os, arch) in [
            ("macos", "aarch64"),
            ("windows", "x86_64"),
            ("linux", "mips"),
        ] {
            let e = platform(os, arch).unwrap_err();
            assert!(matches!(e, Error::Unsupported { .. }), "{os}");
            assert!(e.is_refusal());
        }
    }

    #[test]
    fn bwrap_lookup_uses_absolute_path_entries_only() {
        let d = tempfile::tempdir().unwrap();
        let e = find_bwrap(None, Some(OsStr::new("relative:"))).unwrap_err();
        assert!(e.to_string().contains("install bubblewrap"), "{e}");
        let fake = d.path().join("bwrap");
        std::fs::write(&fake, "#!/bin/sh\necho bubblewrap 0.4.0\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let found = find_bwrap(None, Some(d.path().as_os_str())).unwrap();
        assert_eq!(found, fake);
        let e = check_version(&found).unwrap_err();
        assert!(matches!(e, Error::BwrapTooOld { .. }), "{e}");
        assert!(e.to_string().contains("0.4.0"), "{e}");
        let e = find_bwrap(Some(Path::new("/nonexistent/bwrap")), None).unwrap_err();
        assert!(matches!(e, Error::BwrapMissing { .. }));
    }
}
