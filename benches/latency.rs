//! Latency of `run` of `true`, end to end over stdio, beside the floor
//! measured in the same run: the same keys sent over a tmux control client
//! and the shell's "finished" marker read straight from the pane's pipe.
//!
//! `cargo bench --bench latency` (add `-- N` for N samples, default 300).
//! Prints a table against DESIGN.md's targets; asserts nothing.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dtmcp::mcp_client::McpChild;
use dtmcp::tmux::Tmux;
use serde_json::json;

fn main() -> anyhow::Result<()> {
    let samples: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(300);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let tmp = tempfile::tempdir()?;
    let floor = rt.block_on(floor(tmp.path(), samples))?;
    let (e2e, create) = rt.block_on(end_to_end(tmp.path(), samples))?;
    println!("\n{:<52} {:>10} {:>10} {:>10}", "what (n = samples)", "median", "p90", "target");
    row(&format!("floor: keys over control client + marker from pipe (n={samples})"), &floor, "0.45 ms*");
    row(&format!("run `true`, integrated bash, MCP over stdio (n={samples})"), &e2e, "≤ 1.5 ms");
    row(&format!("session_create → first prompt ready (n={})", create.len()), &create, "≤ 150 ms");
    println!("* the floor DESIGN.md measured on its reference machine; this run's floor is the row above.");
    Ok(())
}

fn row(what: &str, v: &[Duration], target: &str) {
    let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1e3);
    println!("{what:<52} {:>10} {:>10} {:>10}", ms(pct(v, 50)), ms(pct(v, 90)), target);
}

fn pct(v: &[Duration], p: usize) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s.get((s.len() * p / 100).min(s.len().saturating_sub(1))).copied().unwrap_or_default()
}

/// The floor: an integrated bash whose pane pipes into a FIFO we read; keys
/// go over our control client; a sample ends at the next "finished" marker.
async fn floor(tmp: &Path, samples: usize) -> anyhow::Result<Vec<Duration>> {
    let socket = format!("dtmcp-bench-floor-{}", std::process::id());
    let home = tmp.join("floor");
    let shell = dtmcp::shell::install(&home)?;
    let fifo = tmp.join("pipe");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))?;
    let tmux = Arc::new(Tmux::new(&socket));
    // Started by hand so that the tmux server, and the shell, get the clean HOME.
    let started = std::process::Command::new("tmux")
        .args(["-L", &socket, "new-session", "-d", "-s", "floor", "-x", "120", "-y", "40"])
        .args(["-e", "__DTMCP_NONCE=11.22.33.44", "--"])
        .args(dtmcp::shell::bash_argv(&shell))
        .env("HOME", clean_home(tmp)?)
        .status()?;
    anyhow::ensure!(started.success(), "tmux new-session failed");
    let pipe_cmd = format!("cat > {}", fifo.display());
    tmux.run(&["pipe-pane", "-O", "-t", "=floor:", &pipe_cmd]).await?;
    let fifo_path = fifo.clone();
    let result = tokio::task::spawn_blocking(move || -> anyhow::Result<Vec<Duration>> {
        let mut pipe = std::fs::File::open(&fifo_path)?;
        let rt = tokio::runtime::Handle::current();
        let mut out = Vec::with_capacity(samples);
        // Let the first prompt come up; the warm-up rounds absorb the rest.
        std::thread::sleep(Duration::from_millis(300));
        for i in 0..samples + 20 {
            let t = Instant::now();
            rt.block_on(tmux.run(&["send-keys", "-t", "=floor:", "-l", "true"]))?;
            rt.block_on(tmux.run(&["send-keys", "-t", "=floor:", "Enter"]))?;
            wait_marker(&mut pipe)?;
            if i >= 20 {
                out.push(t.elapsed());
            }
        }
        Ok(out)
    })
    .await?;
    dtmcp::tmux::kill_server_now(&socket);
    result
}

/// An empty home directory for the shells of both measurements, so that
/// the machine's own prompt hooks (pyenv, git prompts) weigh on neither.
fn clean_home(tmp: &Path) -> anyhow::Result<std::path::PathBuf> {
    let home = tmp.join("home");
    std::fs::create_dir_all(&home)?;
    Ok(home)
}

/// Reads until a "finished" marker (`ESC ] 133 ; D`) has gone by.
fn wait_marker(pipe: &mut std::fs::File) -> anyhow::Result<()> {
    let needle = b"\x1b]133;D";
    let mut window: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let n = pipe.read(&mut buf)?;
        anyhow::ensure!(n > 0, "the pane's pipe closed");
        window.extend_from_slice(&buf[..n]);
        if window.windows(needle.len()).any(|w| w == needle) {
            return Ok(());
        }
    }
    anyhow::bail!("no marker within 10 s")
}

/// The product: `run` of `true` through the real server over stdio.
async fn end_to_end(tmp: &Path, samples: usize) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let socket = format!("dtmcp-bench-e2e-{}", std::process::id());
    let home = tmp.join("e2e").display().to_string();
    let exe = Path::new(env!("CARGO_BIN_EXE_docent-terminal-mcp"));
    let user_home = clean_home(tmp)?.display().to_string();
    let env = [
        ("DOCENT_TERMINAL_MCP_HOME", home.as_str()),
        ("DOCENT_TERMINAL_MCP_SOCKET", socket.as_str()),
        ("HOME", user_home.as_str()),
    ];
    let server = McpChild::start(exe, &[], &env).await?;
    let result = async {
        let created = server.call("session_create", json!({"name": "b"})).await?;
        anyhow::ensure!(!created.is_error, "session_create: {}", created.text);
        let mut out = Vec::with_capacity(samples);
        for i in 0..samples + 20 {
            let t = Instant::now();
            let r = server.call("run", json!({"session": "b", "command": "true"})).await?;
            anyhow::ensure!(r.text.contains("exit 0"), "unexpected reply: {}", r.text);
            if i >= 20 {
                out.push(t.elapsed());
            }
        }
        let mut creates = Vec::new();
        for i in 0..15 {
            let name = format!("c{i}");
            let t = Instant::now();
            let r = server.call("session_create", json!({"name": name})).await?;
            creates.push(t.elapsed());
            anyhow::ensure!(r.text.contains("at its prompt"), "unexpected reply: {}", r.text);
            server.call("session_close", json!({"session": name})).await?;
        }
        Ok((out, creates))
    }
    .await;
    server.stop().await?;
    dtmcp::tmux::kill_server_now(&socket);
    result
}
