//! `docent-terminal-mcp connect`: placeholder.
use std::path::PathBuf;
/// Runs the bridge.
pub async fn run(_socket: PathBuf, _actor: Option<String>) -> anyhow::Result<()> {
    Ok(())
}
