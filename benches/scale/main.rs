//! Cost at scale: what a call costs with 1, 100 and 300 sessions open, with
//! 20 agents calling at once, and what an idle server costs, each beside a
//! floor measured in the same run (see issue "flat at any number of
//! sessions and agents" and DESIGN.md's budget).
//!
//! `cargo bench --bench scale` runs every level; `-- --levels 1,100`
//! picks levels, `-- --samples N` the samples per row (default 200).
//! Prints a table with each target and the ratio it is judged by, and exits
//! non-zero when a target measured in this run is missed (the machine is
//! shared: only ratios measured together mean much, so every target is a
//! ratio to a floor or to ourselves, and the rows in turns are judged by
//! the median of their rounds).
//! Where two ways are compared in turns, the median of the rounds' own
//! ratios is printed too: a drift of the machine between rounds weighs on
//! both sides of each ratio alike. The growth from one session to 100 is
//! printed beside the raw floor's, measured both ways too: tmux polls
//! every pane's terminal on each turn of its loop, so its own cost per
//! call grows with the panes it holds.
//!
//! `-- --loop stdio|http [--sessions N]` only runs `run true` for 20 s in
//! one of N sessions and prints the server's pid first, for a profiler
//! (`perf record -p PID`) or a look at its CPU time; `agents20` runs 20
//! agents at once, `list` session_list, `raw` one raw pane among N and
//! `raw20` 20 raw panes at once (the floors), `bridge` `run true` through
//! the `connect` bridge (the bridge's pid printed after the server's), and
//! `split` prints where one call's CPU goes, process by process, beside
//! the raw floor's at as many panes (see `split.rs`); `split20` does the
//! same for 20 agents at once.
//!
//! Nothing is timed until the machine is quiet (under a tenth of it busy
//! for half a second) after a world, server or set of raw panes starts;
//! the log says how long each wait took.
//!
//! The big ingest's rows (a `cat` of 3 M lines against tmux's floor, the
//! router's CPU over it, peak RSS on that session) come last; see
//! `ingest_rows.rs` for their flags (`--ingest-lines 0` leaves them out).
//!
//! Every client here is a few lines of raw JSON-RPC in Rust (stdio lines, or
//! HTTP/1.1 kept alive over the server's Unix socket), so the client's own
//! cost stays near a tenth of a millisecond.

#[path = "../shared/cleanup.rs"]
mod cleanup;
mod clients;
mod floor;
// Shared with the ingest bench, which uses the helpers this one does not.
#[allow(dead_code)]
#[path = "../shared/ingest.rs"]
mod ingest;
mod ingest_rows;
mod machine;
mod split;

use clients::*;
use floor::*;
use machine::*;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use dtmcp::tmux::Tmux;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The server measured: this build's, or the one `SCALE_EXE` names (to
/// set two builds side by side on the same machine).
fn exe() -> String {
    std::env::var("SCALE_EXE").unwrap_or_else(|_| env!("CARGO_BIN_EXE_docent-terminal-mcp").to_string())
}
const LIMIT: Duration = Duration::from_secs(120);

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    let samples: usize = value("--samples").and_then(|s| s.parse().ok()).unwrap_or(200);
    let levels: Vec<usize> = value("--levels")
        .map(|l| l.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 100, 300]);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build()?;
    let tmp = tempfile::Builder::new().prefix("dtmcp-bench-scale-").tempdir()?;
    let world = World::new(tmp.path())?;
    if let Some(how) = value("--loop") {
        // For a profiler: `run true` in a loop for 20 s in one of
        // `--sessions N` (1), the server's pid printed first; with
        // `agents20`, 20 agents at once in 20 of them.
        let n = value("--sessions").and_then(|n| n.parse().ok()).unwrap_or(1);
        let result = rt.block_on(profile_loop(&world, &how, n));
        dtmcp::tmux::kill_server_now(&world.socket);
        cleanup::remove_when_let_go(tmp);
        return result;
    }
    let asked = ingest_rows::Asked::from_args(&args);
    let result = match asked.only {
        true => Ok(Table::default()),
        false => rt.block_on(measure(&world, &levels, samples)),
    };
    dtmcp::tmux::kill_server_now(&world.socket);
    let ingested = match &result {
        Ok(_) => rt.block_on(ingest_rows::measure(&asked, tmp.path(), Path::new(&exe()))),
        Err(_) => Ok(None),
    };
    cleanup::remove_when_let_go(tmp);
    let table = result?;
    let ingested = ingested?;
    let mut missed = if asked.only { Vec::new() } else { table.print(&levels) };
    missed.extend(ingest_rows::print(ingested.as_ref(), &asked, Path::new(&exe())));
    if !missed.is_empty() {
        // Said plainly and without a backtrace: a miss is a result.
        eprintln!("\n{} target(s) missed:", missed.len());
        for m in &missed {
            eprintln!("  {m}");
        }
        std::process::exit(1);
    }
    Ok(())
}

/// For a profiler, 20 s of `how`: `run true` over `stdio` or `http` in
/// the first of `sessions` sessions, `session_list` over HTTP (`list`),
/// 20 agents at once over HTTP (`agents20`), or the raw floor of those:
/// one raw pane among `sessions` (`raw`), 20 alone (`raw20`); or `run
/// true` through the `connect` bridge (`bridge`).
async fn profile_loop(world: &World, how: &str, sessions: usize) -> anyhow::Result<()> {
    let mut stdio = StdioClient::start(&exe(), &[], &world.env()).await?;
    stdio.grow(0, sessions.max(1)).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let spent = Duration::from_secs(20);
    let n = match how {
        "raw20" => {
            // The floor of `agents20`: 20 raw panes at once.
            stdio.stop().await;
            eprintln!("pid 0");
            raw_panes(&world.root, 20, 4000).await?.len()
        }
        "raw" => {
            // The floor of `stdio`: one raw pane among `sessions` - 1 idle.
            stdio.stop().await;
            let raw = RawServer::start(&world.root, 1, sessions.max(1) - 1).await?;
            eprintln!("pid 0");
            let started = Instant::now();
            let mut n = 0;
            while started.elapsed() < spent {
                match raw.round(0, 1000).await {
                    Ok(out) => n += out.len(),
                    Err(e) => {
                        raw.stop();
                        return Err(e);
                    }
                }
            }
            raw.stop();
            n
        }
        "agents20" => {
            // 20 agents at once, each in its own of the first 20 sessions.
            stdio.grow(sessions.max(1), sessions.max(20)).await?;
            stdio.stop().await;
            let serve = Serve::start(world).await?;
            eprintln!("pid {}", serve.pid());
            let started = Instant::now();
            let mut n = 0;
            while started.elapsed() < spent {
                n += twenty_agents(world, 200).await?.len();
            }
            serve.stop();
            n
        }
        "stdio" => {
            eprintln!("pid {}", stdio.child.id().unwrap_or(0));
            let started = Instant::now();
            let mut n = 0;
            while started.elapsed() < spent {
                n += run_true(&mut stdio, 100).await?.len();
            }
            stdio.stop().await;
            n
        }
        "bridge" => {
            // `run true` through the `connect` bridge to a fresh `serve`;
            // the bridge's pid printed after the server's.
            stdio.stop().await;
            let serve = Serve::start(world).await?;
            let mut bridge = StdioClient::start(&exe(), &["connect", "--actor", "loop"], &world.env()).await?;
            eprintln!("pid {} bridge {}", serve.pid(), bridge.child.id().unwrap_or(0));
            let started = Instant::now();
            let mut n = 0;
            while started.elapsed() < spent {
                n += run_true(&mut bridge, 100).await?.len();
            }
            bridge.stop().await;
            serve.stop();
            n
        }
        "split" => {
            stdio.stop().await;
            split::split(world, sessions, 2000).await?
        }
        "split20" => {
            stdio.grow(sessions.max(1), sessions.max(20)).await?;
            stdio.stop().await;
            split::split20(world, 200).await?
        }
        "list" => {
            // session_list over HTTP among `--sessions N`.
            stdio.stop().await;
            http_for(world, spent, async |http| {
                let r = http.call("session_list", json!({})).await?;
                ensure!(!r.1, "session_list: {}", r.0);
                Ok(1)
            })
            .await?
        }
        _ => {
            stdio.stop().await;
            http_for(world, spent, async |http| Ok(run_true(http, 100).await?.len())).await?
        }
    };
    eprintln!("{n} calls");
    Ok(())
}

/// A fresh `serve` and one HTTP client of it, its pid printed: `one` is
/// called (it says how many calls it made) until `spent` has passed; the
/// number of calls.
async fn http_for(
    world: &World,
    spent: Duration,
    mut one: impl AsyncFnMut(&mut HttpClient) -> anyhow::Result<usize>,
) -> anyhow::Result<usize> {
    let serve = Serve::start(world).await?;
    let mut http = HttpClient::connect(&world.server_socket(), "bench").await?;
    eprintln!("pid {}", serve.pid());
    let started = Instant::now();
    let mut n = 0;
    while started.elapsed() < spent {
        n += one(&mut http).await?;
    }
    serve.stop();
    Ok(n)
}

/// Everything measured, by row and level.
#[derive(Default)]
struct Table {
    floor_pane: Vec<Duration>,
    floor_ping: Vec<Duration>,
    floor_20: Vec<Duration>,
    /// The same 20 panes on a server of 100 (80 more idle at their
    /// prompt): tmux in the state the 20 agents at 100 sessions find it.
    floor_20_of_100: Vec<Duration>,
    /// Per level, each round's median `run true` (stdio) among that many
    /// sessions over its median in a world of one, in turns.
    level_ratio: BTreeMap<usize, Vec<f64>>,
    /// The same for the raw floor: one raw pane among that many panes
    /// over one raw pane alone, both servers up, in turns.
    floor_level_ratio: BTreeMap<usize, Vec<f64>>,
    /// The raw pane's `true` on a tmux server of that many panes (the
    /// others idle at their prompt).
    floor_among: BTreeMap<usize, Vec<Duration>>,
    bridge_ping: Vec<Duration>,
    stdio: BTreeMap<usize, Vec<Duration>>,
    http: BTreeMap<usize, Vec<Duration>>,
    http_keyed: BTreeMap<usize, Vec<Duration>>,
    bridge: BTreeMap<usize, Vec<Duration>>,
    list: BTreeMap<usize, Vec<Duration>>,
    agents20: BTreeMap<usize, Vec<Duration>>,
    /// At 100 sessions, 20 agents and the raw floor of 20 of 100 panes in
    /// turns: each round's ratio, and every call of each.
    agents_turns: (Vec<f64>, Vec<Duration>, Vec<Duration>),
    idle: BTreeMap<usize, Idle>,
    pss_kb: BTreeMap<usize, (u64, u64)>,
    paired: Paired,
}

/// `run true` at one session four ways, measured in turns (a few calls
/// of each per round) so that the machine's drift weighs on all alike.
#[derive(Default)]
struct Paired {
    stdio: Vec<Duration>,
    http: Vec<Duration>,
    keyed: Vec<Duration>,
    bridge: Vec<Duration>,
    /// `ping` the same ways: the transport's share of a call.
    ping_stdio: Vec<Duration>,
    ping_http: Vec<Duration>,
    ping_bridge: Vec<Duration>,
    /// The server's CPU time over the `run` rounds, stdio and HTTP.
    cpu_stdio: Duration,
    cpu_http: Duration,
    /// Each round's median HTTP and bridged call over its median stdio
    /// call: the machine's drift between rounds cancels out.
    http_ratio: Vec<f64>,
    bridge_ratio: Vec<f64>,
}

/// Calls of each kind per round of [`side_by_side`].
const TURN: usize = 5;
/// Rounds of 20 agents beside rounds of the raw floor at 100 sessions.
/// One round of each lasts a few tenths of a second; a burst of another
/// tenant's load can carry a round to three times its neighbours, so the
/// median is taken over many.
const AGENT_ROUNDS: usize = 40;

/// Measures [`Paired`]: the stdio server runs in a twin world of its own
/// (a second server on one state home is refused), beside `serve` in
/// `world`, whose `s0` the HTTP client and a bridge call.
async fn side_by_side(world: &World, http: &mut HttpClient, serve: u32, samples: usize) -> anyhow::Result<Paired> {
    let twin = World::new(&world.root.join("twin"))?.named(&format!("{}-twin", world.socket));
    let result = async {
        let mut stdio = StdioClient::start(&exe(), &[], &twin.env()).await?;
        stdio.grow(0, 1).await?;
        let mut bridge = StdioClient::start(&exe(), &["connect", "--actor", "bench-paired"], &world.env()).await?;
        quiet("the twin world started").await;
        let mut p = Paired::default();
        // One round to warm every path, not kept.
        run_true_rounds(&mut stdio, "s0", Samples::warmed(0, TURN)).await?;
        run_true_rounds(http, "s0", Samples::warmed(0, TURN)).await?;
        run_true_keyed_rounds(http, Samples::warmed(0, TURN)).await?;
        run_true_rounds(&mut bridge, "s0", Samples::warmed(0, TURN)).await?;
        let twin_pid = stdio.child.id().context("the twin's pid")?;
        eprintln!("  (pids: serve {serve}, stdio twin {twin_pid})");
        for _ in 0..samples.div_ceil(TURN) {
            let before = cpu_time(twin_pid);
            let stdio_round = run_true_rounds(&mut stdio, "s0", Samples::warmed(TURN, 0)).await?;
            p.cpu_stdio += cpu_time(twin_pid).saturating_sub(before);
            let before = cpu_time(serve);
            let http_round = run_true_rounds(http, "s0", Samples::warmed(TURN, 0)).await?;
            p.cpu_http += cpu_time(serve).saturating_sub(before);
            p.keyed.extend(run_true_keyed_rounds(http, Samples::warmed(TURN, 0)).await?);
            let bridge_round = run_true_rounds(&mut bridge, "s0", Samples::warmed(TURN, 0)).await?;
            let base = pct(&stdio_round, 50).as_secs_f64();
            p.http_ratio.push(pct(&http_round, 50).as_secs_f64() / base);
            p.bridge_ratio.push(pct(&bridge_round, 50).as_secs_f64() / base);
            p.stdio.extend(stdio_round);
            p.http.extend(http_round);
            p.bridge.extend(bridge_round);
            p.ping_stdio.extend(ping_rounds(&mut stdio, TURN).await?);
            p.ping_http.extend(ping_rounds(http, TURN).await?);
            p.ping_bridge.extend(ping_rounds(&mut bridge, TURN).await?);
        }
        bridge.stop().await;
        stdio.stop().await;
        Ok(p)
    }
    .await;
    dtmcp::tmux::kill_server_now(&twin.socket);
    result
}

/// `run true` over stdio in `stdio`'s world of `n` sessions and in a twin
/// world of one session, in turns of [`TURN`] calls: each round's ratio of
/// the medians.
async fn beside_one(world: &World, stdio: &mut StdioClient, n: usize, samples: usize) -> anyhow::Result<Vec<f64>> {
    let one = World::new(&world.root.join(format!("one-{n}")))?.named(&format!("{}-one-{n}", world.socket));
    let result = async {
        let mut single = StdioClient::start(&exe(), &[], &one.env()).await?;
        single.grow(0, 1).await?;
        // Its shell's start settles first, as the big world's did.
        quiet("the world of one started").await;
        run_true_rounds(&mut single, "s0", Samples::warmed(0, TURN)).await?;
        let ratios = round_ratios(
            samples,
            async || run_true_rounds(&mut single, "s0", Samples::warmed(TURN, 0)).await,
            async || run_true_rounds(stdio, "s0", Samples::warmed(TURN, 0)).await,
        )
        .await?;
        single.stop().await;
        Ok(ratios)
    };
    let result = result.await;
    dtmcp::tmux::kill_server_now(&one.socket);
    result
}

/// Rounds of `alone` then `among` (each a turn of [`TURN`] calls) until
/// twice `samples` calls of each: every round's median of `among` over
/// that of `alone`. A round is a few milliseconds, so twice the rounds
/// cost little, and the median of twice as many ratios moves less from
/// one run to the next.
async fn round_ratios(
    samples: usize,
    mut alone: impl AsyncFnMut() -> anyhow::Result<Vec<Duration>>,
    mut among: impl AsyncFnMut() -> anyhow::Result<Vec<Duration>>,
) -> anyhow::Result<Vec<f64>> {
    let mut ratios = Vec::new();
    for _ in 0..(2 * samples).div_ceil(TURN) {
        let one = alone().await?;
        let many = among().await?;
        ratios.push(pct(&many, 50).as_secs_f64() / pct(&one, 50).as_secs_f64());
    }
    Ok(ratios)
}

/// The raw floor of [`beside_one`]: one raw pane on a server of `n`
/// panes and one on a server of its own, both up, in turns of [`TURN`]
/// calls; each round's ratio of the medians.
async fn raw_beside_one(tmp: &Path, n: usize, samples: usize) -> anyhow::Result<Vec<f64>> {
    let among = RawServer::start(tmp, 1, n - 1).await?;
    let one = match RawServer::start(tmp, 1, 0).await {
        Ok(one) => one,
        Err(e) => {
            among.stop();
            return Err(e);
        }
    };
    let result = async {
        quiet("the raw floor of one beside the raw floor of many").await;
        one.round(TURN, 0).await?;
        among.round(TURN, 0).await?;
        round_ratios(samples, async || one.round(0, TURN).await, async || among.round(0, TURN).await).await
    }
    .await;
    one.stop();
    among.stop();
    result
}

/// Idle CPU over a quiet stretch, in % of one core.
#[derive(Clone, Copy, Default)]
struct Idle {
    tmux: f64,
    router: f64,
    loggers: f64,
}

/// A private state home, runtime dir, user home and tmux socket.
struct World {
    root: PathBuf,
    socket: String,
}

impl World {
    fn new(root: &Path) -> anyhow::Result<World> {
        for d in ["run", "home", "state"] {
            std::fs::create_dir_all(root.join(d))?;
        }
        Ok(World { root: root.to_path_buf(), socket: format!("dtmcp-bench-scale-{}", std::process::id()) })
    }

    /// The same world on tmux socket `socket`.
    fn named(self, socket: &str) -> World {
        World { socket: socket.to_string(), ..self }
    }

    fn env(&self) -> Vec<(String, String)> {
        vec![
            ("DOCENT_TERMINAL_MCP_HOME".into(), self.root.join("state").display().to_string()),
            ("DOCENT_TERMINAL_MCP_SOCKET".into(), self.socket.clone()),
            ("XDG_RUNTIME_DIR".into(), self.root.join("run").display().to_string()),
            // An empty home: the machine's own prompt hooks weigh on nothing.
            ("HOME".into(), self.root.join("home").display().to_string()),
        ]
    }

    fn server_socket(&self) -> PathBuf {
        self.root.join("run").join("docent-terminal-mcp").join("server.sock")
    }

    fn sessions_dir(&self) -> PathBuf {
        self.root.join("state").join("sessions")
    }
}

async fn measure(world: &World, levels: &[usize], samples: usize) -> anyhow::Result<Table> {
    let mut t = Table::default();
    let floor_tmp = world.root.join("floor");
    std::fs::create_dir_all(&floor_tmp)?;
    eprintln!("floor: raw panes…");
    t.floor_pane = raw_panes(&floor_tmp, 1, samples).await?;
    t.floor_20 = raw_panes(&floor_tmp, 20, samples / 4).await?;
    if levels.contains(&100) {
        t.floor_20_of_100 = raw_panes_among(&floor_tmp, 20, 80, samples / 4).await?;
    }
    for &n in levels {
        let among = if n <= 1 { t.floor_pane.clone() } else { raw_panes_among(&floor_tmp, 1, n - 1, samples).await? };
        t.floor_among.insert(n, among);
        if n > 1 {
            t.floor_level_ratio.insert(n, raw_beside_one(&floor_tmp, n, samples).await?);
        }
    }
    let mut made = 0;
    for &n in levels {
        eprintln!("level {n}: stdio server, growing to {n} sessions…");
        let mut stdio = StdioClient::start(&exe(), &[], &world.env()).await?;
        stdio.grow(made, n).await?;
        made = made.max(n);
        if t.floor_ping.is_empty() {
            let mut ping = Samples::new(samples);
            while ping.next() {
                stdio.request("ping", json!({})).await?;
                ping.done();
            }
            t.floor_ping = ping.out;
        }
        // What starting the sessions set going (shells' start files, the
        // loggers' first output) settles before anything is timed, and
        // the files it wrote are flushed now rather than by the kernel's
        // writeback in the middle of a timing.
        tokio::time::sleep(Duration::from_secs(1)).await;
        nix::unistd::sync();
        quiet(&format!("{n} sessions grown")).await;
        t.stdio.insert(n, run_true(&mut stdio, samples).await?);
        if n > 1 {
            t.level_ratio.insert(n, beside_one(world, &mut stdio, n, samples).await?);
        }
        stdio.stop().await;

        eprintln!("level {n}: serve over its Unix socket…");
        let serve = Serve::start(world).await?;
        let mut http = HttpClient::connect(&world.server_socket(), "bench").await?;
        quiet("serve started").await;
        t.http.insert(n, run_true(&mut http, samples).await?);
        t.http_keyed.insert(n, run_true_keyed(&mut http, samples).await?);
        if n == 1 {
            eprintln!("level 1: stdio, HTTP, keyed HTTP and the bridge in turns…");
            t.paired = side_by_side(world, &mut http, serve.pid(), samples).await?;
        }
        let list_samples = (samples / 10).max(5);
        let mut list = Samples::new(list_samples);
        while list.next() {
            let r = http.call("session_list", json!({})).await?;
            ensure!(!r.1, "session_list: {}", r.0);
            list.done();
        }
        t.list.insert(n, list.out);
        let mut bridge = StdioClient::start(&exe(), &["connect", "--actor", "bench-bridge"], &world.env()).await?;
        t.bridge.insert(n, run_true(&mut bridge, samples).await?);
        if t.bridge_ping.is_empty() {
            let mut ping = Samples::new(samples);
            while ping.next() {
                bridge.request("ping", json!({})).await?;
                ping.done();
            }
            t.bridge_ping = ping.out;
        }
        bridge.stop().await;
        if n >= 20 {
            t.agents20.insert(n, twenty_agents(world, samples / 4).await?);
        }
        if n == 100 {
            eprintln!("level 100: 20 agents and the raw floor of 20 among 100 panes in turns…");
            t.agents_turns = agents_beside_floor(world, &floor_tmp, n, AGENT_ROUNDS, (samples / 10).max(5)).await?;
        }
        eprintln!("level {n}: idle for 10 s…");
        tokio::time::sleep(Duration::from_secs(3)).await;
        t.idle.insert(n, idle(world, serve.pid(), Duration::from_secs(10)).await?);
        t.pss_kb.insert(n, pss(world, serve.pid()));
        drop(http);
        serve.stop();
    }
    Ok(t)
}

impl Table {
    /// Prints the table; returns the targets measured and missed.
    fn print(&self, levels: &[usize]) -> Vec<String> {
        let missed = std::cell::RefCell::new(Vec::new());
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let med = |v: &[Duration]| ms(pct(v, 50));
        println!("\nfloors measured in this run (median):");
        println!("  raw pane `true` (one send-keys -H, marker from the pipe)  {:>9.3} ms", med(&self.floor_pane));
        println!("  trivial MCP call (ping over stdio)                        {:>9.3} ms", med(&self.floor_ping));
        println!("  ping through the connect bridge (the hop alone)           {:>9.3} ms", med(&self.bridge_ping));
        println!("  raw tmux, 20 panes at once, per call                      {:>9.3} ms", med(&self.floor_20));
        println!("  the same 20 among 80 idle panes (100 in all), per call    {:>9.3} ms", med(&self.floor_20_of_100));
        println!(
            "\n{:<34} {}",
            "median (p90) per call",
            levels.iter().map(|n| format!("{:>22}", format!("{n} sessions"))).collect::<String>()
        );
        let line = |name: &str, m: &BTreeMap<usize, Vec<Duration>>| {
            let cells: String = levels
                .iter()
                .map(|n| match m.get(n) {
                    Some(v) => format!("{:>22}", format!("{:.2} ({:.2}) ms", med(v), ms(pct(v, 90)))),
                    None => format!("{:>22}", "—"),
                })
                .collect();
            println!("{name:<34} {cells}");
        };
        line("raw pane true (tmux floor)", &self.floor_among);
        line("run true, stdio", &self.stdio);
        line("run true, HTTP (Unix socket)", &self.http);
        line("run true, HTTP with a request key", &self.http_keyed);
        line("run true, connect bridge", &self.bridge);
        line("session_list, HTTP", &self.list);
        if !self.paired.stdio.is_empty() {
            let p = &self.paired;
            println!("\n1 session, in turns of {TURN} calls (median (p90)):");
            for (name, v) in [
                ("stdio", &p.stdio),
                ("HTTP", &p.http),
                ("HTTP with a request key", &p.keyed),
                ("connect bridge", &p.bridge),
            ] {
                println!("  run true, {name:<30} {:.2} ({:.2}) ms", med(v), ms(pct(v, 90)));
            }
            let per = |d: Duration, v: &[Duration]| ms(d) / v.len().max(1) as f64;
            println!(
                "  server CPU per run true: stdio {:.3} ms, HTTP {:.3} ms",
                per(p.cpu_stdio, &p.stdio),
                per(p.cpu_http, &p.http)
            );
            for (name, v) in [("stdio", &p.ping_stdio), ("HTTP", &p.ping_http), ("connect bridge", &p.ping_bridge)] {
                println!("  ping, {name:<34} {:.3} ({:.3}) ms", med(v), ms(pct(v, 90)));
            }
        }
        line("run true, 20 agents at once (HTTP)", &self.agents20);
        let idle: String = levels
            .iter()
            .map(|n| match self.idle.get(n) {
                Some(i) => format!("{:>22}", format!("{:.1}/{:.1}/{:.1} %", i.tmux, i.router, i.loggers)),
                None => format!("{:>22}", "—"),
            })
            .collect();
        println!("{:<34} {idle}", "idle CPU tmux/router/loggers");
        let pss: String = levels
            .iter()
            .map(|n| match self.pss_kb.get(n) {
                Some((r, l)) => format!("{:>22}", format!("{:.1}+{:.1} MB", *r as f64 / 1024.0, *l as f64 / 1024.0)),
                None => format!("{:>22}", "—"),
            })
            .collect();
        println!("{:<34} {pss}", "PSS router+loggers");

        println!("\n{:<58} {:>10} {:>8} {:>6}", "target", "measured", "limit", "");
        let verdict = |what: &str, got: Option<f64>, limit: f64, unit: &str| match got {
            Some(g) => {
                if g > limit {
                    missed.borrow_mut().push(format!("{} {g:.2}{unit} > {limit}{unit}", what.trim()));
                }
                println!(
                    "{what:<58} {:>10} {:>8} {:>6}",
                    format!("{g:.2}{unit}"),
                    format!("{limit}{unit}"),
                    if g <= limit { "ok" } else { "OVER" }
                )
            }
            None => println!("{what:<58} {:>10}", "not run"),
        };
        let at = |m: &BTreeMap<usize, Vec<Duration>>, n: usize| m.get(&n).map(|v| med(v));
        let ratio = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a / b);
        verdict("run true (stdio) at 100 sessions / at 1", ratio(at(&self.stdio, 100), at(&self.stdio, 1)), 1.2, "×");
        verdict(
            "  the same in turns with a world of 1, median of rounds",
            self.level_ratio.get(&100).and_then(|r| median(r)),
            1.2,
            "×",
        );
        if let Some(r) = self.level_ratio.get(&100) {
            println!("    ({})", spread(r));
        }
        if let Some(r) = ratio(at(&self.floor_among, 100), at(&self.floor_among, 1)) {
            println!(
                "{:<58} {:>10} {:>8}",
                "  (the raw tmux floor at 100 panes / at 1, no target)",
                format!("{r:.2}×"),
                "—"
            );
        }
        if let Some(r) = self.floor_level_ratio.get(&100).and_then(|r| median(r)) {
            // tmux's own growth measured as the row above it: its loop
            // polls every pane's terminal on each turn, ours and the
            // floor's alike.
            println!(
                "{:<58} {:>10} {:>8}",
                "  (the same floor in turns with a server of 1, no target)",
                format!("{r:.2}×"),
                "—"
            );
            if let Some(r) = self.floor_level_ratio.get(&100) {
                println!("    ({})", spread(r));
            }
        }
        verdict("run true (HTTP) at 100 sessions / at 1", ratio(at(&self.http, 100), at(&self.http, 1)), 1.2, "×");
        verdict(
            "session_list at 100 / one run true (HTTP) at 100",
            ratio(at(&self.list, 100), at(&self.http, 100)),
            5.0,
            "×",
        );
        // Judged against the floor on a tmux server of as many panes: tmux
        // visits every pane on each turn of its loop, ours and the floor's.
        let floor20 = Some(med(&self.floor_20)).filter(|f| *f > 0.0);
        let floor20_of_100 = Some(med(&self.floor_20_of_100)).filter(|f| *f > 0.0);
        verdict(
            "20 agents at once at 100, per call / raw 20 of 100 panes",
            ratio(at(&self.agents20, 100), floor20_of_100),
            1.5,
            "×",
        );
        let (turn_ratios, turn_ours, turn_floor) = &self.agents_turns;
        verdict("  the same in turns with that floor, median of rounds", median(turn_ratios), 1.5, "×");
        if !turn_ours.is_empty() {
            // Every call of all rounds on each side: the turns spread the
            // machine's drift over both alike, and a round the floor ran
            // in lockstep weighs as one round among many.
            verdict("  the same in turns, all rounds pooled", Some(med(turn_ours) / med(turn_floor)), 1.5, "×");
            println!(
                "{:<58} {:>10} {:>8}",
                "    (pooled: ours / floor, ms)",
                format!("{:.2}/{:.2}", med(turn_ours), med(turn_floor)),
                "—"
            );
            // How far the rounds spread: on a shared machine one burst of
            // someone else's load can carry a round.
            println!("    ({})", spread(turn_ratios));
        }
        if let Some(r) = ratio(at(&self.agents20, 100), floor20) {
            println!(
                "{:<58} {:>10} {:>8}",
                "  (the same / raw 20 panes on a server of 20, no target)",
                format!("{r:.2}×"),
                "—"
            );
        }
        let stdio1 = at(&self.stdio, 1);
        // Judged on the rows measured in turns, when they were.
        let p = &self.paired;
        let paired = |v: &[Duration]| Some(med(v)).filter(|_| !v.is_empty());
        let pstdio = paired(&p.stdio);
        verdict("bridged run / stdio run (1 session, in turns)", ratio(paired(&p.bridge), pstdio), 1.2, "×");
        verdict("  the same, median of the rounds' ratios", median(&p.bridge_ratio), 1.2, "×");
        verdict("HTTP run / stdio run (1 session, in turns)", ratio(paired(&p.http), pstdio), 1.15, "×");
        verdict("  the same, median of the rounds' ratios", median(&p.http_ratio), 1.15, "×");
        let floor = med(&self.floor_pane) + med(&self.floor_ping);
        verdict("stdio run true / (raw pane + trivial MCP call)", stdio1.map(|s| s / floor), 2.0, "×");
        if let Some(r) = ratio(at(&self.stdio, 300), at(&self.stdio, 1)) {
            println!(
                "{:<58} {:>10} {:>8}",
                "run true (stdio) at 300 sessions / at 1 (no target)",
                format!("{r:.2}×"),
                "—"
            );
        }
        let pss100 = self.pss_kb.get(&100).map(|(r, l)| (r + l) as f64 / 1024.0);
        verdict("router + 100 loggers PSS", pss100, 80.0, " MB");
        let idle100 = self.idle.get(&100);
        verdict("idle at 100 sessions: tmux, % of a core", idle100.map(|i| i.tmux), 2.0, " %");
        verdict("idle at 100 sessions: router, % of a core", idle100.map(|i| i.router), 1.0, " %");
        verdict("idle at 100 sessions: all loggers, % of a core", idle100.map(|i| i.loggers), 2.0, " %");
        missed.into_inner()
    }
}

/// How a run's round ratios spread: their count, extremes and quartiles
/// (the middle one taken as [`median`] takes it).
fn spread(v: &[f64]) -> String {
    let v = sorted_finite(v);
    let at = |q: usize| v.get((v.len() * q / 100).min(v.len().saturating_sub(1))).copied().unwrap_or(f64::NAN);
    format!(
        "{} rounds: lowest {:.2}, quartiles {:.2} {:.2} {:.2}, highest {:.2}",
        v.len(),
        at(0),
        at(25),
        at(50),
        at(75),
        at(100)
    )
}

/// The median of `v`, if it has any.
fn median(v: &[f64]) -> Option<f64> {
    let v = sorted_finite(v);
    v.get(v.len() / 2).copied()
}

/// The finite values of `v`, in order.
fn sorted_finite(v: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v
}

fn pct(v: &[Duration], p: usize) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s.get((s.len() * p / 100).min(s.len().saturating_sub(1))).copied().unwrap_or_default()
}

/// Samples of one row: a tenth as many warm-up rounds come first and are
/// not kept.
struct Samples {
    warm: usize,
    want: usize,
    out: Vec<Duration>,
    started: Option<Instant>,
}

impl Samples {
    fn new(want: usize) -> Samples {
        Samples::warmed(want, (want / 10).max(2))
    }

    /// `want` samples after `warm` rounds not kept.
    fn warmed(want: usize, warm: usize) -> Samples {
        Samples { warm, want, out: Vec::with_capacity(want), started: None }
    }

    /// Whether another round is wanted; starts its clock.
    fn next(&mut self) -> bool {
        self.started = Some(Instant::now());
        self.out.len() < self.want
    }

    /// Ends the round begun by [`Samples::next`].
    fn done(&mut self) {
        let took = self.started.map(|s| s.elapsed()).unwrap_or_default();
        if self.warm > 0 {
            self.warm -= 1;
        } else {
            self.out.push(took);
        }
    }
}

/// Something that takes tool calls: text and the error flag back.
trait Caller {
    async fn call(&mut self, tool: &str, args: Value) -> anyhow::Result<(String, bool)>;
    async fn ping(&mut self) -> anyhow::Result<()>;
}

async fn run_true(c: &mut impl Caller, samples: usize) -> anyhow::Result<Vec<Duration>> {
    run_true_in(c, "s0", samples).await
}

async fn run_true_in(c: &mut impl Caller, session: &str, samples: usize) -> anyhow::Result<Vec<Duration>> {
    run_true_rounds(c, session, Samples::new(samples)).await
}

async fn run_true_rounds(c: &mut impl Caller, session: &str, mut runs: Samples) -> anyhow::Result<Vec<Duration>> {
    while runs.next() {
        let (text, err) = c.call("run", json!({"session": session, "command": "true"})).await?;
        ensure!(!err && text.contains("exit 0"), "unexpected reply: {text}");
        runs.done();
    }
    Ok(runs.out)
}

/// `run` of `true` with an idempotency key in `_meta`, as the `connect`
/// bridge sends every call: the server keeps a record per key.
async fn run_true_keyed(c: &mut HttpClient, samples: usize) -> anyhow::Result<Vec<Duration>> {
    run_true_keyed_rounds(c, Samples::new(samples)).await
}

async fn run_true_keyed_rounds(c: &mut HttpClient, mut runs: Samples) -> anyhow::Result<Vec<Duration>> {
    static KEYS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    while runs.next() {
        // A key used once only: a key seen before is answered from its record.
        let n = KEYS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let meta = json!({ (dtmcp::agents::caller::KEY_META): format!("bench-{}-{n}", std::process::id()) });
        let (text, err) = c.call_with("run", json!({"session": "s0", "command": "true"}), meta).await?;
        ensure!(!err && text.contains("exit 0"), "unexpected reply: {text}");
        runs.done();
    }
    Ok(runs.out)
}

/// `n` pings, each timed: what the transport alone costs a call.
async fn ping_rounds(c: &mut impl Caller, n: usize) -> anyhow::Result<Vec<Duration>> {
    let mut pings = Samples::warmed(n, 0);
    while pings.next() {
        c.ping().await?;
        pings.done();
    }
    Ok(pings.out)
}

/// 20 agents, each on its own HTTP connection and session, calling `run`
/// of `true` at the same time; every call's time.
async fn twenty_agents(world: &World, per_agent: usize) -> anyhow::Result<Vec<Duration>> {
    let mut tasks = Vec::new();
    let start = Arc::new(tokio::sync::Barrier::new(20));
    for i in 0..20 {
        let socket = world.server_socket();
        let start = Arc::clone(&start);
        tasks.push(tokio::spawn(async move {
            let mut h = HttpClient::connect(&socket, &format!("agent{i}")).await?;
            start.wait().await;
            run_true_in(&mut h, &format!("s{i}"), per_agent).await
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    Ok(all)
}

/// The floor: `n` integrated bash panes on a raw tmux server, each piping
/// into a FIFO read here; one `send-keys -H` types `true` and Enter, a
/// sample ends at the pane's next "finished" marker. With `n` > 1 every
/// pane runs its loop at the same time.
/// 20 agents at once in the world (at `n` sessions) and the raw floor of
/// 20 panes among `n` - 20 idle, in turns: a round of each, `rounds`
/// times, so that the machine's drift weighs on both alike. Each round's
/// median over the floor's round beside it, and every call's time of
/// each.
async fn agents_beside_floor(
    world: &World,
    tmp: &Path,
    n: usize,
    rounds: usize,
    per_round: usize,
) -> anyhow::Result<(Vec<f64>, Vec<Duration>, Vec<Duration>)> {
    let raw = RawServer::start(tmp, 20, n.saturating_sub(20)).await?;
    let result = async {
        let mut clients = Vec::new();
        for i in 0..20 {
            clients.push(HttpClient::connect(&world.server_socket(), &format!("agent{i}")).await?);
        }
        let (mut ratios, mut ours, mut floor) = (Vec::new(), Vec::new(), Vec::new());
        for r in 0..rounds + 1 {
            let f = raw.round(0, per_round).await?;
            let mut tasks = Vec::new();
            let start = Arc::new(tokio::sync::Barrier::new(clients.len()));
            for (i, mut h) in std::mem::take(&mut clients).into_iter().enumerate() {
                let start = Arc::clone(&start);
                tasks.push(tokio::spawn(async move {
                    start.wait().await;
                    let out = run_true_rounds(&mut h, &format!("s{i}"), Samples::warmed(per_round, 0)).await;
                    (h, out)
                }));
            }
            let mut o = Vec::new();
            for t in tasks {
                let (h, out) = t.await?;
                clients.push(h);
                o.extend(out?);
            }
            // The first round only warms both up.
            if r == 0 {
                continue;
            }
            ratios.push(pct(&o, 50).as_secs_f64() / pct(&f, 50).as_secs_f64().max(1e-9));
            ours.extend(o);
            floor.extend(f);
        }
        Ok((ratios, ours, floor))
    }
    .await;
    raw.stop();
    result
}

/// The world's logger pids, from the session directories.
fn logger_pids(world: &World) -> Vec<u32> {
    let Ok(dirs) = std::fs::read_dir(world.sessions_dir()) else { return Vec::new() };
    dirs.filter_map(|d| d.ok())
        .filter_map(|d| std::fs::read_to_string(d.path().join("logger.pid")).ok())
        .filter_map(|p| p.trim().parse().ok())
        .collect()
}

fn tmux_pid(world: &World) -> Option<u32> {
    let out =
        std::process::Command::new("tmux").args(["-L", &world.socket, "display", "-p", "#{pid}"]).output().ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}
