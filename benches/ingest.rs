//! Ingest, memory and restart on a big session: `cat` of a 25 MB /
//! 3 million-line file through a real pane, with our logger against
//! `pipe-pane` into plain `cat > file` in the same run; peak RSS of router
//! and logger with that session open, read and searched; router restart to
//! first answer.
//!
//! The floor and ours are measured alike: both are integrated bash panes
//! made by the router on the same tmux server, the router is stopped
//! while they run (its watchdog would otherwise re-attach a logger to the
//! floor's pane), the `cat` is typed with `tmux send-keys`, and a run ends
//! when the pipe's sink holds the end mark. The floor's pane differs only
//! in its `pipe-pane` target. Floor and ours alternate for several rounds,
//! and the CPU each takes is read from `/proc`, since wall times on a
//! shared machine are noisy. The `run` of the same `cat` over MCP is
//! timed separately.
//!
//! The call-to-reply of that `run` against tmux's own floor, in turns
//! with the router running, comes from `shared/ingest.rs`, which the scale
//! bench judges too (issue 42's rows).
//!
//! `cargo bench --bench ingest` (add `-- LINES [ROUNDS]` for another size
//! or number of rounds). Prints a table against DESIGN.md's targets;
//! asserts nothing.

#[path = "shared/ingest.rs"]
mod shared;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dtmcp::mcp_client::McpChild;
use serde_json::json;

fn main() -> anyhow::Result<()> {
    let numbers: Vec<u64> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let lines = numbers.first().copied().unwrap_or(shared::DEFAULT_LINES);
    let rounds = numbers.get(1).copied().unwrap_or(3).max(1) as usize;
    let tmp = tempfile::tempdir()?;
    let big = tmp.path().join("big.txt");
    let bytes = shared::write_big(&big, lines)?;
    println!("input: {lines} lines, {:.1} MB, {rounds} rounds of floor and ours", bytes as f64 / 1e6);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let ours = rt.block_on(through_server(tmp.path(), &big, lines, bytes, rounds))?;
    println!("\n{:<58} {:>12} {:>14}", "what", "measured", "target");
    for (i, r) in ours.rounds.iter().enumerate() {
        println!(
            "{:<58} {:>12} {:>14}",
            format!("round {}: floor / ours, wall", i + 1),
            format!("{:.2}/{:.2} s", r.floor.wall.as_secs_f64(), r.ours.wall.as_secs_f64()),
            ""
        );
        println!(
            "{:<58} {:>12} {:>14}",
            format!("round {}: tmux CPU with floor / with ours", i + 1),
            format!("{:.2}/{:.2} s", r.floor.tmux_cpu.as_secs_f64(), r.ours.tmux_cpu.as_secs_f64()),
            ""
        );
        println!(
            "{:<58} {:>12} {:>14}",
            format!("round {}: sink CPU, `cat > file` / our logger", i + 1),
            format!("{:.2}/{:.2} s", r.floor.sink_cpu.as_secs_f64(), r.ours.sink_cpu.as_secs_f64()),
            ""
        );
    }
    let median = |f: &dyn Fn(&Round) -> f64| {
        let mut v: Vec<f64> = ours.rounds.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let floor_wall = median(&|r| r.floor.wall.as_secs_f64());
    let ours_wall = median(&|r| r.ours.wall.as_secs_f64());
    println!(
        "{:<58} {:>10.2} s {:>14}",
        "cat through a pane, pipe-pane into `cat > file` (floor), median", floor_wall, ""
    );
    println!("{:<58} {:>10.2} s {:>14}", "cat through a pane, our logger, median", ours_wall, "within 10 %");
    println!(
        "{:<58} {:>10.0} % {:>14}",
        "ours / floor, wall, median of the rounds' ratios",
        median(&|r| r.ours.wall.as_secs_f64() / r.floor.wall.as_secs_f64().max(1e-9)) * 100.0,
        "≤ 110 %"
    );
    println!(
        "{:<58} {:>10.0} % {:>14}",
        "tmux CPU with ours / with the floor, median",
        median(&|r| r.ours.tmux_cpu.as_secs_f64() / r.floor.tmux_cpu.as_secs_f64().max(1e-9)) * 100.0,
        ""
    );
    println!(
        "{:<58} {:>10.0} % {:>14}",
        "logger CPU / tmux CPU, median of the rounds",
        median(&|r| r.ours.sink_cpu.as_secs_f64() / r.ours.tmux_cpu.as_secs_f64().max(1e-9)) * 100.0,
        "< 25 %"
    );
    println!(
        "{:<58} {:>10.0} % {:>14}",
        "`cat > file` CPU / tmux CPU (floor), median",
        median(&|r| r.floor.sink_cpu.as_secs_f64() / r.floor.tmux_cpu.as_secs_f64().max(1e-9)) * 100.0,
        ""
    );
    println!("{:<58} {:>12} {:>14}", "run of the cat over MCP (type, wait for its end)", secs(ours.ingest), "");
    println!("{:<58} {:>12} {:>14}", "bytes in raw.log = bytes cat printed", ours.lossless.to_string(), "true");
    println!("{:<58} {:>12} {:>14}", "lines in session.txt", ours.lines.to_string(), format!("≥ {lines}"));
    let index = ours.timing_bytes as f64 / (ours.raw_bytes as f64).max(1.0) * 100.0;
    println!("{:<58} {:>10.3} % {:>14}", "timing.idx / raw.log (recordings)", index, "≤ 1 %");
    println!("{:<58} {:>12} {:>14}", "CPU in that run, tmux server", secs(ours.tmux_cpu), "");
    println!("{:<58} {:>12} {:>14}", "CPU in that run, logger", secs(ours.logger_cpu), "< 25 % of tmux's");
    println!("{:<58} {:>12} {:>14}", "CPU in that run, router (call to reply)", secs(ours.router_cpu), "≤ 0.05 s");
    println!("{:<58} {:>9} kB {:>14}", "peak RSS, router", ours.router_kb, "");
    println!("{:<58} {:>9} kB {:>14}", "peak RSS, logger", ours.logger_kb, "");
    println!("{:<58} {:>9} kB {:>14}", "peak RSS, router + logger", ours.router_kb + ours.logger_kb, "≤ 14000 kB");
    println!("{:<58} {:>12} {:>14}", "router restart → first answer (session_list)", ms(ours.restart), "≤ 100 ms");
    println!("{:<58} {:>12} {:>14}", "router restart → read of the last lines", ms(ours.restart_read), "");
    println!(
        "{:<58} {:>12} {:>14}",
        "logger killed → new one answers (from its checkpoint)",
        ms(ours.logger_restart),
        "small"
    );
    println!(
        "{:<58} {:>12} {:>14}",
        "logger killed → new one answers (no checkpoint: all raw.log)",
        ms(ours.logger_recover),
        "< 500 ms"
    );
    let share = ours.logger_cpu.as_secs_f64() / ours.tmux_cpu.as_secs_f64().max(1e-9) * 100.0;
    println!("{:<58} {:>10.0} % {:>14}", "logger CPU / tmux CPU in the run over MCP", share, "< 25 %");
    let (wall, cpu) = cook_rate(&big)?;
    println!("{:<58} {:>7.0} MB/s {:>14}", "cooking that file in-process, wall clock", wall, "≥ 200 MB/s");
    println!("{:<58} {:>7.0} MB/s {:>14}", "cooking that file in-process, on CPU", cpu, "");
    let dir = tmp.path().join("turns");
    std::fs::create_dir_all(&dir)?;
    let plan = shared::Plan { exe: &exe(), tmp: &dir, lines, rounds };
    let t = rt.block_on(shared::measure(&plan))?;
    let median_s = |v: &[Duration]| shared::median(&shared::secs(v)).unwrap_or(f64::NAN);
    let mb = t.bytes as f64 / 1e6;
    println!("\nin turns, with the router running ({} rounds of {mb:.1} MB, medians):", t.ratios.len());
    println!("{:<58} {:>10.2} s", "tmux floor: a raw pane piping into `cat > file`", median_s(&t.floor));
    println!("{:<58} {:>10.2} s", "run of the cat over MCP, call to reply", median_s(&t.ours));
    let ratio = shared::median(&t.ratios).unwrap_or(f64::NAN);
    println!("{:<58} {:>10.3} × {:>12}", "call to reply / tmux floor", ratio, "≤ 1.05 ×");
    println!("    ({})", shared::spread(&t.ratios));
    println!("{:<58} {:>10.3} s {:>12}", "router CPU per call", median_s(&t.router_cpu), "≤ 0.05 s");
    println!("    ({})", shared::spread(&shared::secs(&t.router_cpu)));
    println!("{:<58} {:>9} kB {:>12}", "peak RSS, router + logger", t.router_kb + t.logger_kb, "≤ 14000 kB");
    println!("{:<58} {:>12}", "every reply `exit 0`, every line in session.txt", t.complete.to_string());
    Ok(())
}

/// The router measured: this build's, or the one `SCALE_EXE` names (as
/// the scale bench takes it), with its logger beside it.
fn exe() -> PathBuf {
    std::env::var_os("SCALE_EXE")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_docent-terminal-mcp")), PathBuf::from)
}

/// Cooks `path` (as a pane shows it, LF turned to CR LF) in 64 KiB feeds;
/// MB/s by wall clock and by this thread's time on a CPU.
fn cook_rate(path: &Path) -> anyhow::Result<(f64, f64)> {
    let text = std::fs::read(path)?;
    let mut input = Vec::with_capacity(text.len() * 12 / 10);
    for line in text.split_inclusive(|&b| b == b'\n') {
        input.extend_from_slice(&line[..line.len() - 1]);
        input.extend_from_slice(b"\r\n");
    }
    let mut cooker = dtmcp_core::cook::Cooker::new(dtmcp_core::types::LineNo::FIRST);
    let mut events = Vec::new();
    let (started, cpu_started) = (Instant::now(), thread_cpu_ns());
    for chunk in input.chunks(64 << 10) {
        cooker.feed(chunk, &mut events);
        cooker.recycle(&mut events);
    }
    let (wall, cpu) = (started.elapsed().as_secs_f64(), (thread_cpu_ns() - cpu_started) as f64 / 1e9);
    let mb = input.len() as f64 / 1e6;
    Ok((mb / wall, mb / cpu.max(1e-9)))
}

/// Nanoseconds this thread has run on a CPU.
fn thread_cpu_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    stat.split_whitespace().next().and_then(|ns| ns.parse().ok()).unwrap_or(0)
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// One run of the `cat` through one pane.
#[derive(Clone, Copy, Default)]
struct Ingest {
    /// From typing the command to the end mark in the sink.
    wall: Duration,
    /// CPU the tmux server took meanwhile.
    tmux_cpu: Duration,
    /// CPU the pipe's sink took meanwhile.
    sink_cpu: Duration,
}

/// The floor and ours of one round.
struct Round {
    floor: Ingest,
    ours: Ingest,
}

/// Types `cat BIG; echo END-OF-BENCH` into `pane` of tmux server `socket`
/// (pid `tmux_pid`), and waits until `sink` (a file the pipe writes) holds
/// `bytes` more than now and ends with the end mark; the sink process is
/// `sink_pid`.
fn typed_cat(
    socket: &str,
    tmux_pid: u32,
    pane: &str,
    big: &Path,
    bytes: u64,
    sink: &Path,
    sink_pid: u32,
) -> anyhow::Result<Ingest> {
    let tmux = |args: &[&str]| std::process::Command::new("tmux").arg("-L").arg(socket).args(args).output();
    let before = std::fs::metadata(sink).map_or(0, |m| m.len());
    let (tmux_before, sink_before) = (shared::cpu_time(tmux_pid), shared::cpu_time(sink_pid));
    let started = Instant::now();
    tmux(&["send-keys", "-t", pane, "-l", &format!("cat {}; echo END-OF-BENCH", big.display())])?;
    tmux(&["send-keys", "-t", pane, "Enter"])?;
    let done = shared::wait_for(Duration::from_secs(300), || {
        std::fs::metadata(sink).is_ok_and(|m| m.len() > before + bytes) && shared::tail_has(sink, b"END-OF-BENCH\r\n")
    });
    let wall = started.elapsed();
    anyhow::ensure!(done, "{} never saw the end mark", sink.display());
    Ok(Ingest {
        wall,
        tmux_cpu: shared::cpu_time(tmux_pid).saturating_sub(tmux_before),
        sink_cpu: shared::cpu_time(sink_pid).saturating_sub(sink_before),
    })
}

/// The process running `pipe-pane`'s `exec cat > FILE` for `out`, a child
/// of the tmux server.
fn cat_pid(tmux_pid: u32, out: &Path) -> Option<u32> {
    let want = out.display().to_string();
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let ppid: u32 = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
        let is_cat = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?.trim() == "cat";
        let fd1 = std::fs::read_link(format!("/proc/{pid}/fd/1")).ok()?;
        (ppid == tmux_pid && is_cat && fd1.display().to_string() == want).then_some(pid)
    })
}

/// Rounds of floor and ours on panes the router made (`floorN`, `oursN`),
/// with the router stopped.
fn rounds(home: &Path, tmp: &Path, socket: &str, big: &Path, bytes: u64, rounds: usize) -> anyhow::Result<Vec<Round>> {
    let tmux = |args: &[&str]| std::process::Command::new("tmux").arg("-L").arg(socket).args(args).output();
    let tmux_pid: u32 = String::from_utf8_lossy(&tmux(&["display", "-p", "#{pid}"])?.stdout).trim().parse()?;
    let mut out = Vec::new();
    for i in 1..=rounds {
        let floor_dir = home.join(format!("sessions/floor{i}"));
        let floor_pane = dtmcp_core::store::read_meta(&floor_dir)?.pane_id;
        let sink = tmp.join(format!("floor{i}.out"));
        // Stop the logger, then pipe into plain cat.
        tmux(&["pipe-pane", "-t", &floor_pane])?;
        tmux(&["pipe-pane", "-O", "-t", &floor_pane, &format!("exec cat > {}", sink.display())])?;
        let sink_pid = (0..200)
            .find_map(|_| {
                cat_pid(tmux_pid, &sink).or_else(|| {
                    std::thread::sleep(Duration::from_millis(5));
                    None
                })
            })
            .ok_or_else(|| anyhow::anyhow!("the floor's cat did not start"))?;
        let floor = typed_cat(socket, tmux_pid, &floor_pane, big, bytes, &sink, sink_pid)?;
        let ours_dir = home.join(format!("sessions/ours{i}"));
        let ours_pane = dtmcp_core::store::read_meta(&ours_dir)?.pane_id;
        let logger = logger_pid(&ours_dir).ok_or_else(|| anyhow::anyhow!("no logger for ours{i}"))?;
        let ours = typed_cat(socket, tmux_pid, &ours_pane, big, bytes, &ours_dir.join("raw.log"), logger)?;
        out.push(Round { floor, ours });
    }
    Ok(out)
}

/// The input's lines and bytes, and how many rounds to run.
#[derive(Clone, Copy)]
struct Size {
    lines: u64,
    bytes: u64,
    rounds: usize,
}

struct Ours {
    rounds: Vec<Round>,
    ingest: Duration,
    lossless: bool,
    lines: u64,
    router_kb: u64,
    logger_kb: u64,
    restart: Duration,
    restart_read: Duration,
    tmux_cpu: Duration,
    logger_cpu: Duration,
    router_cpu: Duration,
    logger_restart: Duration,
    logger_recover: Duration,
    /// `timing.idx` beside `raw.log`, in bytes.
    timing_bytes: u64,
    raw_bytes: u64,
}

async fn through_server(tmp: &Path, big: &Path, lines: u64, bytes: u64, rounds: usize) -> anyhow::Result<Ours> {
    let socket = format!("dtmcp-bench-ingest-mcp-{}", std::process::id());
    let home = tmp.join("state");
    let user_home = tmp.join("home");
    std::fs::create_dir_all(&user_home)?;
    let (home_s, user_s) = (home.display().to_string(), user_home.display().to_string());
    let env = [
        ("DOCENT_TERMINAL_MCP_HOME", home_s.as_str()),
        ("DOCENT_TERMINAL_MCP_SOCKET", socket.as_str()),
        ("HOME", user_s.as_str()),
    ];
    let exe = exe();
    let result = measure(&exe, &env, &home, big, &socket, Size { lines, bytes, rounds }).await;
    dtmcp::tmux::kill_server_now(&socket);
    result
}

async fn measure(
    exe: &Path,
    env: &[(&str, &str)],
    home: &Path,
    big: &Path,
    socket: &str,
    size: Size,
) -> anyhow::Result<Ours> {
    let Size { lines, bytes, rounds: round_count } = size;
    let server = McpChild::start(exe, &[], env).await?;
    server.call("session_create", json!({"name": "big"})).await?;
    let tmux_pid = std::process::Command::new("tmux").args(["-L", socket, "display", "-p", "#{pid}"]).output()?;
    let tmux_pid: u32 = String::from_utf8_lossy(&tmux_pid.stdout).trim().parse()?;
    let tmux_before = shared::cpu_time(tmux_pid);
    let router_pid = server.pid().unwrap_or(0);
    let router_before = shared::cpu_time(router_pid);
    let started = Instant::now();
    let cmd = format!("cat {}", big.display());
    let r = server.call("run", json!({"session": "big", "command": cmd, "timeout": 600})).await?;
    let ingest = started.elapsed();
    let router_cpu = shared::cpu_time(router_pid).saturating_sub(router_before);
    anyhow::ensure!(r.text.contains("exit 0"), "cat did not finish: {}", r.text);
    for (from, to) in [(1, 400), (lines / 2, lines / 2 + 399), (lines - 399, lines)] {
        server.call("read", json!({"session": "big", "from_line": from, "to_line": to})).await?;
    }
    let dir = home.join("sessions/big");
    let raw = std::fs::read(dir.join("raw.log"))?;
    let expected = std::fs::read(big)?;
    let crlf: Vec<u8> = expected.split(|&b| b == b'\n').flat_map(|l| l.iter().copied().chain(*b"\r\n")).collect();
    let lossless = raw
        .windows(64)
        .position(|w| w == &crlf[..64])
        .is_some_and(|at| raw.get(at..at + crlf.len() - 2).is_some_and(|got| got == &crlf[..crlf.len() - 2]));
    let text_lines = std::fs::metadata(dir.join("lines.idx"))?.len() / 8;
    let timing_bytes = std::fs::metadata(dir.join("timing.idx")).map_or(0, |m| m.len());
    let raw_bytes = raw.len() as u64;
    let router_kb = shared::peak_kb(server.pid().unwrap_or(0));
    let logger = logger_pid(&dir);
    let logger_kb = logger.map_or(0, shared::peak_kb);
    let logger_cpu = logger.map_or(Duration::ZERO, shared::cpu_time);
    let tmux_cpu = shared::cpu_time(tmux_pid).saturating_sub(tmux_before);
    server.kill().await?;
    let started = Instant::now();
    let server = McpChild::start(exe, &[], env).await?;
    server.call("session_list", json!({})).await?;
    let restart = started.elapsed();
    server.call("read", json!({"session": "big"})).await?;
    let restart_read = started.elapsed();
    let logger_restart = replace_logger(&server, &dir).await?;
    // Without a checkpoint the new logger cooks all of raw.log.
    std::fs::remove_file(dir.join("checkpoint.json"))?;
    let logger_recover = replace_logger(&server, &dir).await?;
    // The rounds' panes, made after the restart was timed on one session.
    for i in 1..=round_count {
        for name in [format!("floor{i}"), format!("ours{i}")] {
            server.call("session_create", json!({"name": name})).await?;
        }
    }
    server.stop().await?;
    let tmp = home.parent().unwrap_or(home);
    let rounds = rounds(home, tmp, socket, big, bytes, round_count)?;
    Ok(Ours {
        timing_bytes,
        raw_bytes,
        rounds,
        ingest,
        lossless,
        lines: text_lines,
        router_kb,
        logger_kb,
        restart,
        restart_read,
        tmux_cpu,
        logger_cpu,
        router_cpu,
        logger_restart,
        logger_recover,
    })
}

/// Kills the logger of `dir` and times the next call, which finds it dead
/// and waits for a new one to answer.
async fn replace_logger(server: &McpChild, dir: &Path) -> anyhow::Result<Duration> {
    let pid = logger_pid(dir).ok_or_else(|| anyhow::anyhow!("no logger runs for {}", dir.display()))?;
    // The benchmark's own session's logger, by its pid.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL)?;
    let started = Instant::now();
    server.call("read", json!({"session": "big", "from_line": 1, "to_line": 2})).await?;
    Ok(started.elapsed())
}

/// The logger serving session directory `dir`, found by its command line.
fn logger_pid(dir: &Path) -> Option<u32> {
    let want = dir.display().to_string();
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        let is_logger = args.first().is_some_and(|a| a.ends_with(b"dtmcp-pane-logger"));
        (is_logger && args.get(1).is_some_and(|a| *a == want.as_bytes())).then_some(pid)
    })
}
