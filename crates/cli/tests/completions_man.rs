//! `rewind completions SHELL` and `rewind man`: generated from the clap definitions, so these
//! check what the generators cannot promise: that the scripts are valid in their shell and
//! complete every command, and that the man page names every command and renders.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::{help_commands, stdout_ok, text, Env};

/// Every command, and the commands under `epoch`, `sandbox`, `workspace`, `worktree`, `hook`
/// and `remote`. Written out, not read from the
/// binary: `every_command_is_listed` checks this against `rewind --help`.
const COMMANDS: &[&str] = &[
    "init",
    "status",
    "workspace",
    "worktree",
    "fsck",
    "exec",
    "epoch",
    "checkpoint",
    "log",
    "show",
    "diff",
    "restore",
    "undo",
    "recover",
    "gc",
    "baseline",
    "shadow-path",
    "pin",
    "unpin",
    "sandbox",
    "serve",
    "ui",
    "hook",
    "mcp",
    "read",
    "check-write",
    "write",
    "edit",
    "apply-patch",
    "completions",
    "man",
    "tui",
    "remote",
    "push",
    "pull",
    "clone",
];
const NESTED: &[(&str, &[&str])] = &[
    ("epoch", &["begin", "end", "abort", "list"]),
    ("sandbox", &["check", "exec", "mode", "toggle"]),
    ("workspace", &["list", "move", "adopt", "forget"]),
    ("worktree", &["create", "list", "path", "merge", "discard"]),
    ("remote", &["add", "list", "remove"]),
    (
        "hook",
        &[
            "claude-code",
            "codex",
            "gemini",
            "install",
            "uninstall",
            "command",
        ],
    ),
];

#[test]
fn every_command_is_listed() {
    let env = Env::new();
    assert_eq!(help_commands(&env, &[]), COMMANDS);
    for (parent, subs) in NESTED {
        assert_eq!(help_commands(&env, &[parent]), *subs, "{parent}");
    }
}

/// Runs a shell script with `bash`, the completion script in the file `script`.
fn shell(program: &str, args: &[&str], script: &str) -> Output {
    Command::new(program)
        .args(args)
        .arg(script)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
}

fn have(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

fn completion_file(env: &Env, shell: &str) -> tempfile::TempPath {
    let script = stdout_ok(env.run(&["completions", shell]));
    assert!(!script.is_empty());
    let mut f = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut f, script.as_bytes()).unwrap();
    f.into_temp_path()
}

/// What bash offers after `words` (the last one being completed), through the script's
/// completion function, as the shell calls it on TAB.
fn bash_complete(script: &Path, words: &[&str]) -> Vec<String> {
    let words: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let cword = words.len() - 1;
    let run = format!(
        "source '{}'\n\
         COMP_WORDS=({})\n\
         COMP_CWORD={cword}\n\
         COMP_LINE=\"${{COMP_WORDS[*]}}\"\n\
         COMP_POINT=${{#COMP_LINE}}\n\
         _rewind rewind \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        words.join(" ")
    );
    let o = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &run])
        .output()
        .unwrap();
    stdout_ok(o).lines().map(str::to_string).collect()
}

#[test]
fn bash_completion_is_valid_bash_and_completes_every_command() {
    let env = Env::new();
    let script = completion_file(&env, "bash");
    let o = shell("bash", &["-n"], script.to_str().unwrap());
    assert_eq!(o.status.code(), Some(0), "bash -n: {}", text(&o));

    let offered = bash_complete(&script, &["rewind", ""]);
    for c in COMMANDS {
        assert!(
            offered.iter().any(|o| o == c),
            "{c} not offered: {offered:?}"
        );
    }
    let mut che = bash_complete(&script, &["rewind", "che"]);
    che.sort();
    assert_eq!(che, ["check-write", "checkpoint"]);
    for (parent, subs) in NESTED {
        let offered = bash_complete(&script, &["rewind", parent, ""]);
        for s in *subs {
            assert!(offered.iter().any(|o| o == s), "{parent} {s}: {offered:?}");
        }
    }
    // Flags, global ones included, and the values of a flag with a fixed set.
    let offered = bash_complete(&script, &["rewind", "restore", "--"]);
    for flag in ["--dry-run", "--force", "--all", "--json", "--session"] {
        assert!(offered.iter().any(|o| o == flag), "{flag}: {offered:?}");
    }
    let shells = bash_complete(&script, &["rewind", "completions", ""]);
    let shells: Vec<&String> = shells.iter().filter(|w| !w.starts_with('-')).collect();
    assert_eq!(shells, ["bash", "zsh", "fish"]);
}

/// The zsh and fish scripts name every command (in the form each shell's completion list
/// takes), and are valid in their shell where it is installed.
#[test]
fn zsh_and_fish_completions_name_every_command() {
    let env = Env::new();
    let zsh = std::fs::read_to_string(completion_file(&env, "zsh")).unwrap();
    let fish_script = completion_file(&env, "fish");
    let fish = std::fs::read_to_string(&fish_script).unwrap();
    assert!(zsh.starts_with("#compdef rewind\n"), "{zsh:.200}");
    let nested = NESTED.iter().flat_map(|(_, subs)| subs.iter());
    for c in COMMANDS.iter().chain(nested) {
        assert!(zsh.contains(&format!("\n'{c}:")), "zsh script lacks {c}");
        assert!(
            fish.contains(&format!(" -a \"{c}\" ")),
            "fish script lacks {c}"
        );
    }

    if have("zsh") {
        let zsh_file = completion_file(&env, "zsh");
        let o = shell("zsh", &["-n"], zsh_file.to_str().unwrap());
        assert_eq!(o.status.code(), Some(0), "zsh -n: {}", text(&o));
    } else {
        eprintln!(
            "zsh not installed: its script's syntax is not checked (scripts/test installs it)"
        );
    }
    if have("fish") {
        let o = shell("fish", &["--no-execute"], fish_script.to_str().unwrap());
        assert_eq!(o.status.code(), Some(0), "fish --no-execute: {}", text(&o));
        // What fish offers on TAB after `rewind ep`, and after `rewind epoch `.
        let offered = |line: &str| {
            let run = format!(
                "source '{}'; complete --do-complete '{line}'",
                fish_script.display()
            );
            let out = stdout_ok(
                Command::new("fish")
                    .args(["--no-config", "-c", &run])
                    .output()
                    .unwrap(),
            );
            out.lines()
                .map(|l| l.split('\t').next().unwrap().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(offered("rewind ep"), ["epoch"]);
        let subs = offered("rewind epoch ");
        for s in ["begin", "end", "abort"] {
            assert!(subs.iter().any(|o| o == s), "{s}: {subs:?}");
        }
    } else {
        eprintln!("fish not installed: its script is not run (scripts/test installs it)");
    }
}

#[test]
fn man_page_names_every_command_and_renders() {
    let env = Env::new();
    let page = stdout_ok(env.run(&["man"]));
    assert!(page.contains(".TH rewind 1 "), "{page:.300}");
    for c in COMMANDS {
        // roff writes a hyphen as `\-`.
        let name = format!("rewind-{c}(1)").replace('-', "\\-");
        assert!(page.contains(&name), "the page does not name {c}");
    }
    for section in [
        "SYNOPSIS",
        "DESCRIPTION",
        "OPTIONS",
        "SUBCOMMANDS",
        "ENVIRONMENT",
    ] {
        assert!(page.contains(&format!(".SH {section}\n")), "{section}");
    }
    assert!(page.contains(".SH \"EXIT STATUS\"\n"), "EXIT STATUS");
    for code in 0..=7 {
        assert!(
            page.contains(&format!(".TP\n\\fB{code}\\fR\n")),
            "exit {code}"
        );
    }
    for var in [
        "REWIND_HOME",
        "REWIND_SESSION",
        "REWIND_LOCK_TIMEOUT",
        "REWIND_TRACE",
    ] {
        assert!(page.contains(&format!("\\fB{var}\\fR")), "{var}");
    }

    if !have("man") {
        eprintln!("man not installed: the page is not rendered");
        return;
    }
    let file = tempfile::Builder::new().suffix(".1").tempfile().unwrap();
    std::fs::write(file.path(), &page).unwrap();
    let o = Command::new("man")
        .arg("--warnings")
        .arg("-l")
        .arg(file.path())
        .env("MANWIDTH", "80")
        .env("MAN_KEEP_FORMATTING", "")
        .env_remove("MANPAGER")
        .env_remove("PAGER")
        .output()
        .unwrap();
    let shown = stdout_ok(o.clone());
    assert!(o.stderr.is_empty(), "man warns: {}", text(&o));
    for c in COMMANDS {
        assert!(shown.contains(&format!("rewind-{c}(1)")), "{c}: {shown}");
    }
    assert!(shown.contains("EXIT STATUS"), "{shown}");
}

#[test]
fn man_dir_writes_a_page_per_command() {
    let env = Env::new();
    // A relative --dir is taken from -C DIR (the workspace root here), as every path is.
    let written = stdout_ok(env.run(&["--json", "man", "--dir", "share/man1"]));
    let written: serde_json::Value = serde_json::from_str(&written).unwrap();
    let dir = env.root().join("share/man1");
    let mut expected = vec!["rewind.1".to_string()];
    expected.extend(COMMANDS.iter().map(|c| format!("rewind-{c}.1")));
    for (parent, subs) in NESTED {
        expected.extend(subs.iter().map(|s| format!("rewind-{parent}-{s}.1")));
    }
    let listed: Vec<&str> = written["written"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(listed.len(), expected.len(), "{listed:?}");
    for name in &expected {
        let path = dir.join(name);
        assert!(
            listed.contains(&path.to_str().unwrap()),
            "{name}: {listed:?}"
        );
        let page = std::fs::read_to_string(&path).unwrap();
        assert!(page.starts_with(".ie"), "{name}: {page:.100}");
    }
    let main = std::fs::read_to_string(dir.join("rewind.1")).unwrap();
    assert_eq!(
        main,
        stdout_ok(env.run(&["man"])),
        "rewind.1 is what `rewind man` prints"
    );
    let begin = std::fs::read_to_string(dir.join("rewind-epoch-begin.1")).unwrap();
    assert!(
        begin.contains(&format!(
            ".TH rewind-epoch-begin 1  \"rewind {}\"",
            env!("CARGO_PKG_VERSION")
        )),
        "{begin:.300}"
    );
    assert!(begin.contains("\\-\\-path"), "{begin}");
}

#[test]
fn json_documents_carry_the_script_and_the_page() {
    let env = Env::new();
    for shell in ["bash", "zsh", "fish"] {
        let doc: serde_json::Value =
            serde_json::from_str(&stdout_ok(env.run(&["--json", "completions", shell]))).unwrap();
        assert_eq!(doc["shell"], shell);
        assert_eq!(doc["script"], stdout_ok(env.run(&["completions", shell])));
    }
    let doc: serde_json::Value =
        serde_json::from_str(&stdout_ok(env.run(&["--json", "man"]))).unwrap();
    assert_eq!(doc["page"], "rewind.1");
    assert_eq!(doc["roff"], stdout_ok(env.run(&["man"])));
    // An unknown shell is a usage error, with the one JSON document.
    let o = env.run(&["--json", "completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["error"]["kind"], "usage");
}

/// Generating scripts and pages needs no workspace and leaves no state behind.
#[test]
fn completions_and_man_touch_no_state() {
    let env = Env::new();
    stdout_ok(env.run(&["completions", "bash"]));
    stdout_ok(env.run(&["man"]));
    let state: Vec<_> = std::fs::read_dir(env.home.path()).unwrap().collect();
    assert!(state.is_empty(), "state written: {state:?}");
    let here: Vec<_> = std::fs::read_dir(env.root()).unwrap().collect();
    assert!(here.is_empty(), "workspace written: {here:?}");
}
