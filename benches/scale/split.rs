//! Where one call's CPU goes (`-- --loop split`): the router's, its
//! logger's, the tmux server's and the shell's CPU time per `run true`
//! over HTTP, beside the router's per `ping` (what any call costs before a
//! tool runs) and the raw floor's tmux, shell and `cat` per `true`. Read
//! from each process's scheduler accounting over a few thousand calls, one
//! agent at a time, so the shares hold whatever else the machine runs.

use super::*;

/// The tmux server's pid and the pid of the process in pane `target`.
fn server_and_pane(socket: &str, target: &str) -> Option<(u32, u32)> {
    let out = std::process::Command::new("tmux")
        .args(["-L", socket, "display", "-p", "-t", target, "#{pid} #{pane_pid}"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut it = text.split_whitespace().filter_map(|n| n.parse().ok());
    Some((it.next()?, it.next()?))
}

/// The CPU of `pids` together while `work` runs, per call it made.
async fn per_call(pids: &[Vec<u32>], work: impl AsyncFnOnce() -> anyhow::Result<usize>) -> anyhow::Result<Vec<f64>> {
    let sum = |group: &[u32]| group.iter().map(|&p| cpu_time(p)).sum::<Duration>();
    let before: Vec<Duration> = pids.iter().map(|g| sum(g)).collect();
    let n = work().await?.max(1) as f64;
    Ok(pids.iter().zip(before).map(|(g, b)| sum(g).saturating_sub(b).as_secs_f64() * 1e6 / n).collect())
}

/// Every child of `pid` (the `sh -c cat` of a pipe and its `cat`).
fn children(pid: u32) -> Vec<u32> {
    let path = format!("/proc/{pid}/task/{pid}/children");
    let direct: Vec<u32> =
        std::fs::read_to_string(path).unwrap_or_default().split_whitespace().filter_map(|p| p.parse().ok()).collect();
    let mut all = direct.clone();
    for c in direct {
        all.extend(children(c));
    }
    all
}

pub(crate) async fn split(world: &World, sessions: usize, calls: usize) -> anyhow::Result<usize> {
    let serve = Serve::start(world).await?;
    let result = async {
        let mut http = HttpClient::connect(&world.server_socket(), "split").await?;
        run_true(&mut http, 50).await?;
        let (tmux, shell) = server_and_pane(&world.socket, "=s0:").context("the pane's pids")?;
        let router = vec![serve.pid()];
        let groups = [router.clone(), logger_pids(world), vec![tmux], vec![shell]];
        quiet("the split's server started").await;
        let ping = per_call(&[router], async || Ok(ping_rounds(&mut http, calls).await?.len())).await?;
        let run = per_call(&groups, async || Ok(run_true(&mut http, calls).await?.len())).await?;
        Ok::<_, anyhow::Error>((ping[0], run))
    }
    .await;
    serve.stop();
    let (ping, run) = result?;
    let raw = RawServer::start(&world.root, 1, sessions.max(1) - 1).await?;
    let floor = async {
        let (tmux, shell) = server_and_pane(raw.socket(), "=f0:").context("the raw pane's pids")?;
        let cat: Vec<u32> = children(tmux).into_iter().filter(|&p| p != shell).collect();
        raw.round(50, 0).await?;
        per_call(&[vec![tmux], vec![shell], cat], async || Ok(raw.round(0, calls).await?.len())).await
    }
    .await;
    raw.stop();
    let floor = floor?;
    println!("CPU per call, µs ({calls} calls, one agent, {} sessions; the floor as many panes):", sessions.max(1));
    println!("  {:<28} {:>8} {:>8}", "", "ours", "floor");
    println!("  {:<28} {:>8.1} {:>8}", "router, ping", ping, "—");
    println!("  {:<28} {:>8.1} {:>8}", "router, run true", run[0], "—");
    println!("  {:<28} {:>8.1} {:>8.1}", "logger (floor: cat)", run[1], floor[2]);
    println!("  {:<28} {:>8.1} {:>8.1}", "tmux server", run[2], floor[0]);
    println!("  {:<28} {:>8.1} {:>8.1}", "shell", run[3], floor[1]);
    let ours: f64 = run.iter().sum();
    let theirs: f64 = floor.iter().sum();
    println!("  {:<28} {:>8.1} {:>8.1}  ({:.2}×)", "all", ours, theirs, ours / theirs);
    Ok(calls * 2)
}

/// The pid of every pane on tmux server `socket` (the hidden session's
/// `sleep` among them, idle).
fn pane_pids(socket: &str) -> Vec<u32> {
    let out = std::process::Command::new("tmux").args(["-L", socket, "list-panes", "-a", "-F", "#{pane_pid}"]).output();
    let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    text.split_whitespace().filter_map(|p| p.parse().ok()).collect()
}

/// Where the CPU of 20 agents at once goes (`-- --loop split20`): as
/// [`split`], with 20 agents each calling `run true` in a session of its
/// own over HTTP, beside 20 raw panes at once. The bench's own CPU (its
/// HTTP clients, or its tmux client and FIFO reads) is a row too: at 20 at
/// once the machine is busy, and every process's share counts.
pub(crate) async fn split20(world: &World, per_agent: usize) -> anyhow::Result<usize> {
    let me = vec![std::process::id()];
    let serve = Serve::start(world).await?;
    let ours = async {
        twenty_agents(world, 20).await?;
        let tmux = tmux_pid(world).context("the tmux server's pid")?;
        let groups = [vec![serve.pid()], logger_pids(world), vec![tmux], pane_pids(&world.socket), me.clone()];
        quiet("the split's server started").await;
        per_call(&groups, async || Ok(twenty_agents(world, per_agent).await?.len())).await
    }
    .await;
    serve.stop();
    let ours = ours?;
    let raw = RawServer::start(&world.root, 20, 0).await?;
    let floor = async {
        raw.round(20, 0).await?;
        let (tmux, _) = server_and_pane(raw.socket(), "=f0:").context("the raw pane's pids")?;
        let shells = pane_pids(raw.socket());
        let cat: Vec<u32> = children(tmux).into_iter().filter(|p| !shells.contains(p)).collect();
        per_call(&[cat, vec![tmux], shells, me.clone()], async || Ok(raw.round(0, per_agent).await?.len())).await
    }
    .await;
    raw.stop();
    let floor = floor?;
    println!("CPU per call, µs (20 agents at once, {per_agent} calls each; the floor 20 raw panes at once):");
    println!("  {:<28} {:>8} {:>8}", "", "ours", "floor");
    println!("  {:<28} {:>8.1} {:>8}", "router", ours[0], "—");
    println!("  {:<28} {:>8.1} {:>8.1}", "loggers (floor: cat)", ours[1], floor[0]);
    println!("  {:<28} {:>8.1} {:>8.1}", "tmux server", ours[2], floor[1]);
    println!("  {:<28} {:>8.1} {:>8.1}", "shells", ours[3], floor[2]);
    println!("  {:<28} {:>8.1} {:>8.1}", "the bench's clients", ours[4], floor[3]);
    let (a, b): (f64, f64) = (ours.iter().sum(), floor.iter().sum());
    println!("  {:<28} {:>8.1} {:>8.1}  ({:.2}×)", "all", a, b, a / b);
    Ok(per_agent * 40)
}
