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

#[path = "layout/imports.rs"]
mod imports;
