//! `docent-terminal-mcp skill DIR [--plugin]`: the long form of the
//! guidance as a Claude Code skill, which a client loads on demand and
//! without the 2048-character cut. `SKILL.md` carries the instructions and
//! the `patterns` topic; every other topic is a reference file beside it.
//! With `--plugin`, DIR becomes a plugin: a manifest, an `.mcp.json` that
//! starts this server, and the skill under `skills/`.

use std::io;
use std::path::{Path, PathBuf};

use super::texts::{self, TOPICS};

/// The skill's name, and its directory's.
pub const SKILL_NAME: &str = "terminal-sessions";

/// When a client should load the skill (its front matter's description).
const WHEN: &str = "Persistent, logged terminal sessions (the terminal MCP server: session_create, run, wait, \
send, expect, read, search, regions). Use for builds, test suites, servers, debuggers, REPLs and ssh instead \
of one-shot shell calls; covers answering prompts, waiting for a server to listen (no sleep-and-curl loops), \
reading clipped output, full-screen programs and sharing a terminal with a person.";

/// Writes the skill (or, with `plugin`, a plugin holding it) under `dir`,
/// creating directories as needed and replacing earlier generated files.
/// Returns the files written.
pub fn write(dir: &Path, plugin: bool) -> io::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let skills = if plugin {
        let manifest = dir.join(".claude-plugin");
        std::fs::create_dir_all(&manifest)?;
        written.push(put(&manifest.join("plugin.json"), &plugin_json())?);
        written.push(put(&dir.join(".mcp.json"), &mcp_json(&server_command()))?);
        dir.join("skills")
    } else {
        dir.to_path_buf()
    };
    let skill = skills.join(SKILL_NAME);
    std::fs::create_dir_all(&skill)?;
    written.push(put(&skill.join("SKILL.md"), &skill_md())?);
    for t in &TOPICS[1..] {
        written.push(put(&skill.join(format!("{}.md", t.name)), t.text)?);
    }
    Ok(written)
}

fn put(path: &Path, text: &str) -> io::Result<PathBuf> {
    std::fs::write(path, text)?;
    Ok(path.to_path_buf())
}

/// `SKILL.md`: front matter, the instructions, the patterns, and an index
/// of the reference files.
pub fn skill_md() -> String {
    // Quoted: the description holds ": ", which plain YAML takes for a key.
    let mut out = format!("---\nname: {SKILL_NAME}\ndescription: {WHEN:?}\n---\n\n# Terminal sessions\n\n");
    out.push_str(texts::INSTRUCTIONS.trim_end());
    out.push_str("\n\n");
    // The patterns topic's own title becomes a section of this file.
    out.push_str(&TOPICS[0].text.replacen("# ", "## ", 1).replace("\n## ", "\n### "));
    out.push_str("\n## More\n\nRead these when the situation comes up:\n\n");
    for t in &TOPICS[1..] {
        out.push_str(&format!("- [{}]({}.md): {}\n", t.name, t.name, t.about));
    }
    out
}

fn plugin_json() -> String {
    let manifest = serde_json::json!({
        "name": "docent-terminal-mcp",
        "version": env!("CARGO_PKG_VERSION"),
        "description": env!("CARGO_PKG_DESCRIPTION"),
    });
    format!("{manifest:#}\n")
}

/// `.mcp.json`: one server, `terminal`, started as `command`.
fn mcp_json(command: &str) -> String {
    let servers = serde_json::json!({ "mcpServers": { "terminal": { "command": command, "args": [] } } });
    format!("{servers:#}\n")
}

/// This very binary when its path is known, so the plugin starts the
/// server that wrote it; else the name on `PATH`.
fn server_command() -> String {
    std::env::current_exe()
        .ok()
        .filter(|p| p.file_name().is_some_and(|n| n == "docent-terminal-mcp" || n == "dtmcp"))
        .map_or_else(|| "docent-terminal-mcp".to_string(), |p| p.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skill_is_its_main_file_and_one_reference_per_other_topic() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = write(dir.path(), false).expect("written");
        assert_eq!(files.len(), TOPICS.len());
        let main = std::fs::read_to_string(dir.path().join("terminal-sessions/SKILL.md")).expect("SKILL.md");
        assert!(main.starts_with("---\nname: terminal-sessions\ndescription: \"Persistent"), "{main}");
        assert!(!WHEN.contains('"') && !WHEN.contains('\\'), "the description quotes as YAML does");
        assert!(main.contains(texts::INSTRUCTIONS.trim_end()));
        assert!(main.contains("## Patterns"));
        for t in &TOPICS[1..] {
            assert!(main.contains(&format!("]({}.md)", t.name)), "{} is listed", t.name);
            let path = dir.path().join(format!("terminal-sessions/{}.md", t.name));
            assert_eq!(std::fs::read_to_string(path).expect("reference"), t.text);
        }
        assert!(!dir.path().join(".mcp.json").exists());
    }

    #[test]
    fn a_plugin_starts_the_server_and_holds_the_skill() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), true).expect("written");
        let read = |p: &str| std::fs::read_to_string(dir.path().join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
        let manifest: serde_json::Value = serde_json::from_str(&read(".claude-plugin/plugin.json")).expect("json");
        assert_eq!(manifest["name"], "docent-terminal-mcp");
        let mcp: serde_json::Value = serde_json::from_str(&read(".mcp.json")).expect("json");
        let command = mcp["mcpServers"]["terminal"]["command"].as_str().expect("a command");
        assert!(command.ends_with("docent-terminal-mcp"), "{command}");
        assert!(read("skills/terminal-sessions/SKILL.md").contains("name: terminal-sessions"));
        assert!(dir.path().join("skills/terminal-sessions/sharing.md").is_file());
        // Writing again replaces the generated files.
        write(dir.path(), true).expect("written again");
    }
}
