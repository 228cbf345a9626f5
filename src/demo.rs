//! The narrated demo: a scripted MCP client starts this very binary as an
//! MCP server over stdio, on a private tmux socket with a temporary state
//! home, and drives a real session through the tools, printing every call
//! and every reply as an agent's harness would see them.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
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
        step(
            "The commands so far, failed ones only: status, time, the lines each printed and the file \
             that holds them (`-`: it printed nothing).",
            "regions",
            json!({"session": "demo", "failed_only": true}),
        ),
        step(
            "A program that reads input: run returns while it waits...",
            "run",
            json!({"session": "demo", "command": "cat", "timeout": 0.3}),
        ),
        step(
            "...and send types text, then presses keys. The text shows twice: the terminal echoes \
             what is typed, and cat prints it back.",
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
        step(
            "Close the session; its logs stay on disk (the demo's own go when it ends; --keep keeps them).",
            "session_close",
            json!({"session": "demo"}),
        ),
    ]
}

/// How the demo runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Milliseconds to pause between steps, for a person reading along.
    pub pause_ms: u64,
    /// Leave the session open, with its tmux server and state home, when
    /// the demo ends.
    pub keep: bool,
}

/// The longest the demo waits for a person to press Enter.
const ENTER_WAIT: Duration = Duration::from_secs(30 * 60);

/// Runs the demo.
pub async fn run(opts: Options) -> anyhow::Result<()> {
    // The server this demo starts is this very program; without its pane
    // logger beside it every step would fail, so say so before the first.
    crate::config::check_pane_logger(&crate::config::sibling_binary(crate::config::PANE_LOGGER)?)?;
    let tmp = tempfile_dir()?;
    let socket = format!("dtmcp-demo-{}", std::process::id());
    let result = narrate(&tmp, &socket, opts).await;
    if result.is_err() || !opts.keep {
        // Only the demo's own tmux server, by its private socket.
        crate::tmux::kill_server_now(&socket);
        remove_when_loggers_left(&tmp);
    }
    result
}

/// Removes the demo's directory once the pane loggers that wrote into it
/// are gone. A logger still ending when its logs vanish puts the session's
/// directory back to say so (that is how a person who deletes a live
/// session's logs learns it), which would leave it behind in `/tmp`. Waits
/// five seconds at most, then kills the loggers still there (the demo's
/// own, found by their pid files and their command lines naming its
/// directory).
fn remove_when_loggers_left(tmp: &Path) {
    let sessions = tmp.join("state").join("sessions");
    let pids: Vec<i32> = std::fs::read_dir(&sessions)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join(dtmcp_core::store::files::PID)).ok())
        .filter_map(|p| p.trim().parse().ok())
        .collect();
    let alive = |pid: i32| {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        memchr::memmem::find(&cmdline, sessions.as_os_str().as_encoded_bytes()).is_some()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // A logger still there (a loaded machine) is the demo's own: it ends
    // now, before its directory goes, so that it cannot put it back.
    for &pid in pids.iter().filter(|&&p| alive(p)) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    }
    let deadline = deadline.max(Instant::now() + Duration::from_secs(1));
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    while std::fs::remove_dir_all(tmp).is_err() && tmp.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
}

async fn narrate(tmp: &Path, socket: &str, opts: Options) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("locating this program")?;
    let home = tmp.join("state");
    let home_s = home.display().to_string();
    let env = [("DOCENT_TERMINAL_MCP_HOME", home_s.as_str()), ("DOCENT_TERMINAL_MCP_SOCKET", socket)];
    let lasts = if opts.keep { "kept when the demo ends" } else { "removed when the demo ends" };
    println!("docent-terminal-mcp demo: a scripted MCP client drives a real server.");
    println!("tmux socket: {socket} · state home: {home_s} (both {lasts})\n");
    let server = McpChild::start_as("dtmcp-demo", &exe, &[], &env).await?;
    println!("tools: {}\n", server.tool_names().await?.join(", "));
    let steps = script();
    let last = steps.len() - 1;
    for (n, step) in steps.into_iter().enumerate() {
        if n == last {
            if opts.keep {
                break;
            }
            wait_for_enter(socket).await;
        }
        if let Err(e) = take(&server, n, step).await {
            let _ = server.stop().await;
            return Err(e);
        }
        tokio::time::sleep(Duration::from_millis(opts.pause_ms)).await;
    }
    let calls = std::fs::read_to_string(home.join("calls.log")).unwrap_or_default();
    println!(
        "calls.log recorded {} calls (tool, session, duration, ok; never input or output).",
        calls.lines().count()
    );
    server.stop().await?;
    if opts.keep {
        kept(&exe, tmp, &home_s, socket);
    }
    next_step(&exe);
    Ok(())
}

/// Takes step `n`: says it, calls the tool, prints the reply, and fails
/// when the call did not go as scripted.
async fn take(server: &McpChild, n: usize, Step { say, tool, args, refused }: Step) -> anyhow::Result<()> {
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
        let what = if refused { "was meant to be refused but succeeded" } else { "failed" };
        let first = reply.text.lines().next().unwrap_or("");
        anyhow::bail!("step {} ({tool}) {what}: {first}; the demo stops here", n + 1);
    }
    Ok(())
}

/// Before the session closes, a person at a terminal may look at it:
/// the attach line works until they press Enter.
async fn wait_for_enter(socket: &str) {
    if !std::io::stdin().is_terminal() {
        return;
    }
    println!("The session is still open. From another terminal, watch it or type into it:");
    println!("  tmux -L {socket} attach -t demo      (ctrl+b then d leaves it)");
    println!("Press Enter to close it and end the demo.");
    let read = tokio::task::spawn_blocking(|| std::io::stdin().lines().next());
    let _ = tokio::time::timeout(ENTER_WAIT, read).await;
    println!();
}

/// What a person can do with the session `--keep` left open.
fn kept(exe: &Path, tmp: &Path, home: &str, socket: &str) {
    let exe = exe.display();
    println!("\nThe session demo stays open, with its logs:");
    println!("  tmux -L {socket} attach -t demo");
    println!("  DOCENT_TERMINAL_MCP_HOME={home} DOCENT_TERMINAL_MCP_SOCKET={socket} {exe} ls --all");
    println!("When you are done with it:");
    println!("  tmux -L {socket} kill-server; rm -r {}", tmp.display());
}

/// The way on: registering the server with an agent.
fn next_step(exe: &Path) {
    println!("\nNext: register the server with your agent. For Claude Code:");
    println!("  claude mcp add -s user terminal -- {}", exe.display());
    println!(
        "or install the three binaries first (`cargo install --profile dist --path .`) and register ~/.cargo/bin/docent-terminal-mcp."
    );
    println!("README.md (\"Register it with your agent\") and docs/clients.md cover Codex, Gemini CLI and others.");
}
fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let base = std::env::temp_dir().join(format!("dtmcp-demo-{}", std::process::id()));
    std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
    Ok(base)
}
