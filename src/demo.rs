//! The narrated demo: a scripted MCP client starts this very binary as an
//! MCP server over stdio, on a private tmux socket with a temporary state
//! home, and drives a real session through the tools, printing every call
//! and every reply as an agent's harness would see them.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};

use crate::mcp_client::McpChild;

/// One step of the demo: what is said, which tool is called, with what,
/// and whether the call is meant to be refused.
struct Step {
    say: &'static str,
    tool: &'static str,
    args: Value,
    refused: bool,
}

/// A step whose call must succeed.
fn step(say: &'static str, tool: &'static str, args: Value) -> Step {
    Step { say, tool, args, refused: false }
}

/// The steps, in order.
fn script() -> Vec<Step> {
    vec![
        step("Open a session: an integrated bash in a tmux pane.", "session_create", json!({"name": "demo"})),
        step(
            "Run a command; the reply carries its exit status.",
            "run",
            json!({"session": "demo", "command": "echo hello from $(uname -s)"}),
        ),
        step(
            "A failing pipeline: every stage's status is reported.",
            "run",
            json!({"session": "demo", "command": "true | false"}),
        ),
        step(
            "The shell keeps its state between runs.",
            "run",
            json!({"session": "demo", "command": "cd /tmp && export GREETING=hi"}),
        ),
        step("", "run", json!({"session": "demo", "command": "pwd; echo $GREETING"})),
        step(
            "Bulk output is clipped to its head and tail; nothing is lost.",
            "run",
            json!({"session": "demo", "command": "seq 1 5000"}),
        ),
        step(
            "Any part of it can be read back by line number.",
            "read",
            json!({"session": "demo", "from_line": 2500, "to_line": 2504}),
        ),
        step(
            "Search the whole log; hits name their region.",
            "search",
            json!({"session": "demo", "pattern": "^49[0-9]7$"}),
        ),
        step("The commands so far, failed ones only.", "regions", json!({"session": "demo", "failed_only": true})),
        step(
            "A program that reads input: run returns while it waits...",
            "run",
            json!({"session": "demo", "command": "cat", "timeout": 0.3}),
        ),
        step(
            "...and send types text, then presses keys.",
            "send",
            json!({"session": "demo", "text": "typed by the model", "keys": ["enter", "ctrl+d"]}),
        ),
        step(
            "A slow command outlives a short timeout...",
            "run",
            json!({"session": "demo", "command": "sleep 1; echo done sleeping", "timeout": 0.3}),
        ),
        step("...and wait picks it up.", "wait", json!({"session": "demo"})),
        Step {
            say: "Bad input gets a clear error, and the server keeps going.",
            tool: "run",
            args: json!({"session": "no/such", "command": "ls"}),
            refused: true,
        },
        step("The sessions, with the command a person uses to watch.", "session_list", json!({})),
        step("Close the session; its logs stay on disk.", "session_close", json!({"session": "demo"})),
    ]
}

/// Runs the demo, pausing `pause_ms` between steps.
pub async fn run(pause_ms: u64) -> anyhow::Result<()> {
    // The server this demo starts is this very program; without its pane
    // logger beside it every step would fail, so say so before the first.
    crate::config::check_pane_logger(&crate::config::sibling_binary(crate::config::PANE_LOGGER)?)?;
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
    for (n, Step { say, tool, args, refused }) in script().into_iter().enumerate() {
        if !say.is_empty() {
            println!("# {say}");
        }
        println!("→ {tool} {args}");
        let started = Instant::now();
        let reply = server.call(tool, args).await.with_context(|| format!("step {} ({tool})", n + 1))?;
        let flag = if reply.is_error { " (error)" } else { "" };
        println!("← {:.1} ms{flag}", started.elapsed().as_secs_f64() * 1e3);
        for line in reply.text.lines() {
            println!("  {line}");
        }
        println!();
        if reply.is_error != refused {
            let _ = server.stop().await;
            let what = if refused { "was meant to be refused but succeeded" } else { "failed" };
            let first = reply.text.lines().next().unwrap_or("");
            anyhow::bail!("step {} ({tool}) {what}: {first}; the demo stops here", n + 1);
        }
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
