//! How long the people's `ls` takes with 1 and with 100 sessions, beside
//! what tmux itself takes to list the same sessions in the same run (one
//! spawned `tmux list-sessions`, and the `list-panes -a` that `ls` spawns).
//!
//! `cargo bench --bench people` (add `-- N` for N samples, default 30).
//! Each sample is a whole process, as a person runs it, its output read
//! from a pipe. Of the 100 sessions, 10 run `sleep` (their foreground job
//! is looked at in `/proc`); the rest are at their prompt. Prints a table;
//! asserts nothing.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dtmcp::mcp_client::McpChild;
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_docent-terminal-mcp");

fn main() -> anyhow::Result<()> {
    let samples: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(30);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let tmp = tempfile::tempdir()?;
    let socket = format!("dtmcp-bench-people-{}", std::process::id());
    let result = rt.block_on(measure(tmp.path(), &socket, samples));
    dtmcp::tmux::kill_server_now(&socket);
    let rows = result?;
    println!("\n{:<58} {:>10} {:>10}", format!("what (n = {samples} runs each)"), "median", "p90");
    for (what, times) in &rows {
        let ms = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1e3);
        println!("{what:<58} {:>10} {:>10}", ms(pct(times, 50)), ms(pct(times, 90)));
    }
    Ok(())
}

async fn measure(tmp: &Path, socket: &str, samples: usize) -> anyhow::Result<Vec<(String, Vec<Duration>)>> {
    let home = tmp.join("state").display().to_string();
    let user_home = tmp.join("home");
    std::fs::create_dir_all(&user_home)?;
    let user_home = user_home.display().to_string();
    let env = [
        ("DOCENT_TERMINAL_MCP_HOME", home.as_str()),
        ("DOCENT_TERMINAL_MCP_SOCKET", socket),
        ("HOME", user_home.as_str()),
    ];
    let server = McpChild::start(Path::new(BIN), &[], &env).await?;
    let made = async {
        let mut rows = Vec::new();
        create(&server, "b0").await?;
        rows.push(("people: ls, 1 session".to_string(), time(&env, &["ls"], samples)?));
        for i in 1..100 {
            create(&server, &format!("b{i}")).await?;
        }
        for i in 0..10 {
            let r =
                server.call("run", json!({"session": format!("b{i}"), "command": "sleep 600", "timeout": 0.1})).await?;
            anyhow::ensure!(r.text.contains("still running"), "sleep did not start: {}", r.text);
        }
        let listed = run(&env, &["ls"])?;
        anyhow::ensure!(listed.lines().count() == 100, "ls listed {} sessions", listed.lines().count());
        rows.push(("people: ls, 100 sessions (10 running)".to_string(), time(&env, &["ls"], samples)?));
        rows.push(("people: ls --json, 100 sessions".to_string(), time(&env, &["ls", "--json"], samples)?));
        rows.push((
            "people: ls --state waiting, 100 sessions".to_string(),
            time(&env, &["ls", "--state", "waiting"], samples)?,
        ));
        let tmux = |args: &[&str]| -> anyhow::Result<Vec<Duration>> {
            let mut all = vec!["-L", socket];
            all.extend_from_slice(args);
            time_program("tmux", &env, &all, samples)
        };
        rows.push(("floor: tmux list-sessions, 100 sessions".to_string(), tmux(&["list-sessions"])?));
        rows.push((
            "floor: tmux list-panes -a -F (the format ls asks for)".to_string(),
            tmux(&["list-panes", "-a", "-F", dtmcp::tmux::pane_format()])?,
        ));
        rows.push((
            "floor: docent-terminal-mcp --version (process start)".to_string(),
            time(&env, &["--version"], samples)?,
        ));
        Ok(rows)
    }
    .await;
    server.stop().await?;
    made
}

async fn create(server: &McpChild, name: &str) -> anyhow::Result<()> {
    let r = server.call("session_create", json!({"name": name})).await?;
    anyhow::ensure!(!r.is_error, "session_create {name}: {}", r.text);
    Ok(())
}

/// Runs the command line once; its stdout.
fn run(env: &[(&str, &str)], args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(BIN).args(args).envs(env.iter().copied()).stdin(Stdio::null()).output()?;
    anyhow::ensure!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn time(env: &[(&str, &str)], args: &[&str], samples: usize) -> anyhow::Result<Vec<Duration>> {
    time_program(BIN, env, args, samples)
}

/// Wall time of `samples` runs of `program args` (after 3 untimed ones),
/// each to its exit, stdout read from a pipe.
fn time_program(program: &str, env: &[(&str, &str)], args: &[&str], samples: usize) -> anyhow::Result<Vec<Duration>> {
    let mut out = Vec::with_capacity(samples);
    for i in 0..samples + 3 {
        let t = Instant::now();
        let done = Command::new(program).args(args).envs(env.iter().copied()).stdin(Stdio::null()).output()?;
        let took = t.elapsed();
        anyhow::ensure!(done.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&done.stderr));
        if i >= 3 {
            out.push(took);
        }
    }
    Ok(out)
}

fn pct(v: &[Duration], p: usize) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s.get((s.len() * p / 100).min(s.len().saturating_sub(1))).copied().unwrap_or_default()
}
