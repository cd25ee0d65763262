//! The crate rules of `docs/design.md`, checked on the manifests: imports go one way
//! (fronts → api → core → store), and a front never depends on the engine's crates directly,
//! not even for its tests.

use std::collections::BTreeMap;
use std::path::Path;

/// Each crate of the workspace and the workspace crates it may depend on.
const ALLOWED: &[(&str, &[&str])] = &[
    ("store", &[]),
    ("sandbox", &[]),
    ("core", &["store", "sandbox"]),
    ("remote", &["core", "store"]),
    ("api", &["core", "store", "sandbox", "remote"]),
    ("server", &["api"]),
    ("hook", &["api"]),
    ("mcp", &["api"]),
    ("tui", &["api"]),
    ("web", &["api", "server"]),
    ("cli", &["api", "server", "hook", "mcp", "tui", "web"]),
    ("bench", &["core", "store"]),
    ("testutil", &[]),
];

/// The `rewind-*` crates a manifest names in its dependency tables (normal, dev and build),
/// without the `rewind-` prefix; itself and the dev-only test helpers excluded.
fn workspace_deps(manifest: &str, own: &str) -> Vec<String> {
    let doc: toml::Table = manifest.parse().unwrap();
    let mut out = Vec::new();
    for table in ["dependencies", "dev-dependencies", "build-dependencies"] {
        if let Some(deps) = doc.get(table).and_then(|t| t.as_table()) {
            for name in deps.keys() {
                if let Some(c) = name.strip_prefix("rewind-") {
                    if c != own && !(c == "testutil" && table == "dev-dependencies") {
                        out.push(c.to_string());
                    }
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn each_crate_depends_only_on_crates_below_it() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let mut wrong = Vec::new();
    for entry in std::fs::read_dir(&crates).unwrap() {
        let dir = entry.unwrap().path();
        let Ok(manifest) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let Some(may) = allowed.get(name.as_str()) else {
            wrong.push(format!(
                "crates/{name} is not in the table of docs/design.md"
            ));
            continue;
        };
        for dep in workspace_deps(&manifest, &name) {
            if !may.contains(&dep.as_str()) {
                wrong.push(format!("crates/{name} depends on rewind-{dep}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "crate rules broken (docs/design.md, Crates):\n{}",
        wrong.join("\n")
    );
}

/// The checker itself: it sees a front that reaches past the service.
#[test]
fn the_checker_reads_every_dependency_table() {
    let manifest = r#"
        [dependencies]
        rewind-api = { path = "../api" }
        [dev-dependencies]
        rewind-core = { path = "../core" }
        rewind-testutil = { path = "../testutil" }
    "#;
    assert_eq!(workspace_deps(manifest, "cli"), ["api", "core"]);
}
