//! The documentation stands alone and follows the binary: every link in README.md and docs/*.md
//! resolves inside the repository, and docs/cli.md (the contract) names every command, exit
//! code and environment variable the binary has.

use crate::common;

use std::path::{Path, PathBuf};

use common::{help_commands, Env};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md and every docs/*.md.
fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md")];
    for e in std::fs::read_dir(repo().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            files.push(p);
        }
    }
    files.sort();
    assert!(files.len() >= 4, "{files:?}");
    files
}

/// The targets of the inline links `[text](target)` of a Markdown text, outside code.
fn links(md: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Inline code spans hold no links.
        let prose: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = prose.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    out
}

/// The anchors GitHub gives a Markdown file's headings: lower case, punctuation dropped,
/// spaces to hyphens.
fn anchors(md: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        out.push(
            title
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
                .map(|c| if c == ' ' { '-' } else { c })
                .collect(),
        );
    }
    out
}

#[test]
fn every_link_in_the_docs_resolves_inside_the_repository() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in markdown_files() {
        let md = std::fs::read_to_string(&file).unwrap();
        for link in links(&md) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = match link.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (link.as_str(), None),
            };
            let target = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            let inside = target
                .canonicalize()
                .is_ok_and(|t| t.starts_with(repo().canonicalize().unwrap()));
            if !inside {
                broken.push(format!("{}: {link}: no such file", file.display()));
                continue;
            }
            if let Some(anchor) = anchor {
                let heads = anchors(&std::fs::read_to_string(&target).unwrap_or_default());
                if !heads.iter().any(|h| h == anchor) {
                    broken.push(format!("{}: {link}: no such heading", file.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(
        checked >= 10,
        "only {checked} links found: is the parser right?"
    );
}

#[test]
fn the_link_parser_sees_links_and_not_code() {
    let md = "see [a](a.md) and [b](b.md#x), `[c](c.md)`\n```\n[d](d.md)\n```\n[e](#f-g)\n";
    assert_eq!(links(md), ["a.md", "b.md#x", "#f-g"]);
    assert_eq!(
        anchors("# One (`-C`) two\n## Exit codes\n"),
        ["one--c-two", "exit-codes"]
    );
}

#[test]
fn the_contract_names_every_command_exit_code_and_variable() {
    let cli = std::fs::read_to_string(repo().join("docs/cli.md")).unwrap();
    let env = Env::new();
    let top = help_commands(&env, &[]);
    assert!(top.len() >= 20, "{top:?}");
    for c in &top {
        let nested = help_commands(&env, &[c]);
        let names: Vec<String> = if nested.is_empty() {
            vec![c.clone()]
        } else {
            nested.iter().map(|n| format!("{c} {n}")).collect()
        };
        for name in names {
            let entry = format!("**`rewind {name}");
            assert!(
                cli.contains(&format!("{entry}`**")) || cli.contains(&format!("{entry} ")),
                "docs/cli.md has no entry for `rewind {name}`"
            );
        }
    }
    for code in 0..=7 {
        assert!(cli.contains(&format!("\n| {code} |")), "exit code {code}");
    }
    // The variables the manual page lists (from the same code) are in the contract too.
    let o = env.run(&["man"]);
    let page = String::from_utf8(o.stdout).unwrap();
    let env_section = page.split(".SH ENVIRONMENT").nth(1).unwrap();
    let env_section = env_section.split(".SH ").next().unwrap();
    let mut vars = 0;
    for part in env_section.split("\\fB").skip(1) {
        let var = part.split("\\fR").next().unwrap();
        assert!(
            cli.contains(&format!("| `{var}` |")),
            "{var} not in docs/cli.md"
        );
        vars += 1;
    }
    assert!(vars >= 5, "{env_section}");
}
