//! The narrated demo: a scripted MCP client starts this very binary as an
//! MCP server over stdio, on a private tmux socket with a temporary state
//! home, and drives a real session through the tools, printing every call
//! and every reply as an agent's harness would see them.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};

use crate::mcp_client::McpChild;

/// The steps: what is said, which tool is called, with what.
fn script() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        ("Open a session: an integrated bash in a tmux pane.", "session_create", json!({"name": "demo"})),
        (
            "Run a command; the reply carries its exit status.",
            "run",
            json!({"session": "demo", "command": "echo hello from $(uname -s)"}),
        ),
        (
            "A failing pipeline: every stage's status is reported.",
            "run",
            json!({"session": "demo", "command": "true | false"}),
        ),
        (
            "The shell keeps its state between runs.",
            "run",
            json!({"session": "demo", "command": "cd /tmp && export GREETING=hi"}),
        ),
        ("", "run", json!({"session": "demo", "command": "pwd; echo $GREETING"})),
        (
            "Bulk output is clipped to its head and tail; nothing is lost.",
            "run",
            json!({"session": "demo", "command": "seq 1 5000"}),
        ),
        (
            "Any part of it can be read back by line number.",
            "read",
            json!({"session": "demo", "from_line": 2500, "to_line": 2504}),
        ),
        (
            "Search the whole log; hits name their region.",
            "search",
            json!({"session": "demo", "pattern": "^49[0-9]7$"}),
        ),
        ("The commands so far, failed ones only.", "regions", json!({"session": "demo", "failed_only": true})),
        (
            "A program that reads input: run returns while it waits...",
            "run",
            json!({"session": "demo", "command": "cat", "timeout": 0.3}),
        ),
        (
            "...and send types text, then presses keys.",
            "send",
            json!({"session": "demo", "text": "typed by the model", "keys": ["enter", "ctrl+d"]}),
        ),
        (
            "A slow command outlives a short timeout...",
            "run",
            json!({"session": "demo", "command": "sleep 1; echo done sleeping", "timeout": 0.3}),
        ),
        ("...and wait picks it up.", "wait", json!({"session": "demo"})),
        (
            "Bad input gets a clear error, and the server keeps going.",
            "run",
            json!({"session": "no/such", "command": "ls"}),
        ),
        ("The sessions, with the command a person uses to watch.", "session_list", json!({})),
        ("Close the session; its logs stay on disk.", "session_close", json!({"session": "demo"})),
    ]
}

/// Runs the demo, pausing `pause_ms` between steps.
pub async fn run(pause_ms: u64) -> anyhow::Result<()> {
    let tmp = tempfile_dir()?;
    let socket = format!("dtmcp-demo-{}", std::process::id());
    let home = tmp.join("state");
    let result = narrate(&home, &socket, pause_ms).await;
    // Only the demo's own tmux server, by its private socket.
    crate::tmux::kill_server_now(&socket);
    let _ = std::fs::remove_dir_all(&tmp);
    result
}

async fn narrate(home: &std::path::Path, socket: &str, pause_ms: u64) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("locating this program")?;
    let home_s = home.display().to_string();
    let env = [("DOCENT_TERMINAL_MCP_HOME", home_s.as_str()), ("DOCENT_TERMINAL_MCP_SOCKET", socket)];
    println!("docent-terminal-mcp demo: a scripted MCP client drives a real server.");
    println!("tmux socket: {socket} (private) · state home: {home_s} (temporary)\n");
    let server = McpChild::start_as("dtmcp-demo", &exe, &[], &env).await?;
    println!("tools: {}\n", server.tool_names().await?.join(", "));
    for (say, tool, args) in script() {
        if !say.is_empty() {
            println!("# {say}");
        }
        println!("→ {tool} {args}");
        let started = Instant::now();
        let reply = server.call(tool, args).await?;
        let flag = if reply.is_error { " (error)" } else { "" };
        println!("← {:.1} ms{flag}", started.elapsed().as_secs_f64() * 1e3);
        for line in reply.text.lines() {
            println!("  {line}");
        }
        println!();
        tokio::time::sleep(Duration::from_millis(pause_ms)).await;
    }
    let calls = std::fs::read_to_string(home.join("calls.log")).unwrap_or_default();
    println!(
        "calls.log recorded {} calls (tool, session, duration, ok; never input or output).",
        calls.lines().count()
    );
    server.stop().await
}

fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let base = std::env::temp_dir().join(format!("dtmcp-demo-{}", std::process::id()));
    std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
    Ok(base)
}
