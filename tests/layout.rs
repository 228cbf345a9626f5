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
