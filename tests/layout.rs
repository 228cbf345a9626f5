//! The workspace's shape, checked: the pane logger and the core link
//! nothing of MCP, HTTP, an async runtime or the command line. A new arrow
//! from either into those crates fails here (and in `.ci/run`), not in a
//! review.

use std::process::Command;

/// Crates the logger and the core must never depend on, directly or not.
const FORBIDDEN: &[&str] = &["tokio", "rmcp", "axum", "hyper", "clap", "docent-terminal-mcp"];

/// The names of the normal (non-dev, non-build) dependencies of `package`.
fn normal_dependencies(package: &str) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(cargo)
        .args(["tree", "-p", package, "-e", "normal", "--prefix", "none", "--format", "{p}"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(out.status.success(), "cargo tree -p {package} failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_string).collect()
}

#[test]
fn the_logger_links_no_router_crate() {
    let deps = normal_dependencies("dtmcp-logger");
    assert!(deps.iter().any(|d| d == "dtmcp-core"), "the logger builds on the core: {deps:?}");
    let bad: Vec<_> = deps.iter().filter(|d| FORBIDDEN.contains(&d.as_str())).collect();
    assert!(bad.is_empty(), "dtmcp-logger depends on {bad:?}; the pane logger must stay synchronous and small");
}

#[test]
fn the_core_links_no_router_crate() {
    let deps = normal_dependencies("dtmcp-core");
    assert!(deps.iter().any(|d| d == "vte"), "the tree was read: {deps:?}");
    let bad: Vec<_> =
        deps.iter().filter(|d| FORBIDDEN.contains(&d.as_str()) || d.starts_with("dtmcp-logger")).collect();
    assert!(bad.is_empty(), "dtmcp-core depends on {bad:?}; the core names neither process");
}

/// A file of this repository, as text.
fn repo_file(path: &str) -> String {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// The first command of the README's first `sh` block: what a newcomer
/// copies first.
fn readme_first_command() -> String {
    let readme = repo_file("README.md");
    let block = readme.split("```sh\n").nth(1).and_then(|b| b.split("```").next()).expect("a sh block in README.md");
    let line = block.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with('#'));
    line.expect("a command in the README's first sh block").to_string()
}

/// `cargo run` builds only the binary it runs, so a README that starts
/// with it leaves the pane logger unbuilt and every session failing. The
/// first command must build every binary (a plain `cargo build`, which
/// builds every binary of the default members) before it runs one.
#[test]
fn the_readmes_first_command_builds_every_binary_before_running_one() {
    let command = readme_first_command();
    let build = command.find("cargo build").unwrap_or_else(|| panic!("the first command builds nothing: {command}"));
    let build_step = command[build..].split("&&").next().unwrap_or_default();
    for narrowing in ["--bin", "-p ", "--package", "--lib", "--example"] {
        assert!(!build_step.contains(narrowing), "`{build_step}` builds only part of the workspace ({narrowing})");
    }
    if let Some(run) = command.find("cargo run") {
        assert!(build < run, "the first command runs before it builds: {command}");
    }
    // What `cargo build` builds: the root package is a default member, and
    // it declares the pane logger among its binaries.
    let manifest = repo_file("Cargo.toml");
    assert!(manifest.contains("default-members = [\".\""), "the root package is built by a plain `cargo build`");
    for bin in ["docent-terminal-mcp", "dtmcp", "dtmcp-pane-logger"] {
        assert!(
            manifest.contains(&format!("[[bin]]\nname = \"{bin}\"")),
            "Cargo.toml's root package does not declare the binary {bin}"
        );
    }
}

/// The `DOCENT_TERMINAL_MCP_*` names in `text`.
fn variables_in(text: &str) -> std::collections::BTreeSet<String> {
    const PREFIX: &str = "DOCENT_TERMINAL_MCP_";
    let mut found = std::collections::BTreeSet::new();
    for (at, _) in text.match_indices(PREFIX) {
        let rest = &text[at + PREFIX.len()..];
        let tail: String = rest.chars().take_while(|c| c.is_ascii_uppercase() || *c == '_').collect();
        let tail = tail.trim_end_matches('_');
        if !tail.is_empty() {
            found.insert(format!("{PREFIX}{tail}"));
        }
    }
    found
}

/// Every file under `dir`, recursively.
fn files_under(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// The README's configuration table is the one list of settings: it names
/// every `DOCENT_TERMINAL_MCP_*` variable the code reads or sets, each
/// with a default, and no other.
#[test]
fn the_readmes_configuration_table_names_exactly_the_variables_of_the_code() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "crates", "bin", "shell"] {
        files_under(&root.join(dir), &mut files);
    }
    let mut in_code = std::collections::BTreeSet::new();
    for file in &files {
        if let Ok(text) = std::fs::read_to_string(file) {
            in_code.extend(variables_in(&text));
        }
    }
    assert!(in_code.contains("DOCENT_TERMINAL_MCP_HOME"), "the code was read: {in_code:?}");

    let readme = repo_file("README.md");
    let section = readme.split("\n## Configuration\n").nth(1).expect("a Configuration section in README.md");
    let section = section.split("\n## ").next().unwrap_or_default();
    let mut in_table = std::collections::BTreeSet::new();
    for row in section.lines().filter(|l| l.starts_with("| `DOCENT_TERMINAL_MCP_")) {
        let cells: Vec<&str> = row.split(" | ").collect();
        let name = cells[0].trim_start_matches("| ").trim_matches('`').to_string();
        assert!(cells.len() >= 3 && !cells[2].trim_end_matches(" |").trim().is_empty(), "{name} has no default: {row}");
        assert!(in_table.insert(name.clone()), "{name} is in the table twice");
    }
    let missing: Vec<_> = in_code.difference(&in_table).collect();
    let stale: Vec<_> = in_table.difference(&in_code).collect();
    assert!(missing.is_empty(), "the code reads {missing:?}, which README.md's Configuration table leaves out");
    assert!(stale.is_empty(), "README.md's Configuration table names {stale:?}, which no code reads");
}

#[path = "layout/imports.rs"]
mod imports;
