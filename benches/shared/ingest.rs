//! The big ingest, measured in turns against tmux's own floor; shared by
//! the `ingest` and `scale` benches (each includes this file with
//! `#[path]`).
//!
//! A round is two runs of `cat BIG` (a generated file of short lines):
//!
//! - the floor: an integrated bash pane on a tmux server of its own whose
//!   `pipe-pane` goes into plain `cat > file`, the command typed with
//!   `send-keys`; it ends when the file holds the shell's "finished"
//!   marker after the output (what tmux alone takes to carry the output);
//! - ours: a `run` of the same command over MCP stdio in a fresh session
//!   of the router under test, from the call to its reply (typing, the
//!   logger's wait, and the reply made from a clipped output: its summary,
//!   and where the whole output is; a reply copies a region into a file of
//!   its own only up to 16 MiB, so at the default size it names the lines
//!   of `session.txt` instead).
//!
//! The rounds' ratios are judged by their median, since a shared machine
//! drifts between rounds; the router's CPU time is read around each call.
//! After the rounds the last session is read (three ranges) and searched
//! (a literal, a regex, a pattern that never matches), and the peak RSS
//! (`VmHWM`) of the router and of that session's logger is taken.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dtmcp::mcp_client::McpChild;
use serde_json::json;

/// The size: 3 million lines (33 MB as generated here).
pub const DEFAULT_LINES: u64 = 3_000_000;

/// What one measurement is asked to do.
pub struct Plan<'a> {
    /// The router binary (its logger is the `dtmcp-pane-logger` beside it).
    pub exe: &'a Path,
    /// A scratch directory, removed by the caller.
    pub tmp: &'a Path,
    /// Lines of the generated file.
    pub lines: u64,
    /// Rounds of floor and ours.
    pub rounds: usize,
}

/// Everything measured, per round where it varies.
#[derive(Default)]
pub struct Turns {
    /// The generated file's size in bytes.
    pub bytes: u64,
    /// The floor's time per round.
    pub floor: Vec<Duration>,
    /// Our call-to-reply time per round.
    pub ours: Vec<Duration>,
    /// From the call to the output's end in `raw.log` (the shell's marker
    /// after it), per round: the rest of `ours` is the reply's making.
    pub logged: Vec<Duration>,
    /// Each round's ours / floor.
    pub ratios: Vec<f64>,
    /// The router's CPU time over each call.
    pub router_cpu: Vec<Duration>,
    /// The logger's CPU time over each call.
    pub logger_cpu: Vec<Duration>,
    /// The tmux server's CPU time over each call.
    pub tmux_cpu: Vec<Duration>,
    /// The floor's tmux server's CPU time over each of its rounds.
    pub floor_tmux_cpu: Vec<Duration>,
    /// The router's peak RSS in kB, over all rounds, reads and searches.
    pub router_kb: u64,
    /// The last session's logger's peak RSS in kB, over its life.
    pub logger_kb: u64,
    /// Whether every call's reply said `exit 0` and the last session's
    /// `session.txt` holds every line.
    pub complete: bool,
}

/// Writes the input, then runs the rounds.
pub async fn measure(plan: &Plan<'_>) -> anyhow::Result<Turns> {
    let big = plan.tmp.join("big.txt");
    let bytes = write_big(&big, plan.lines)?;
    let socket = format!("dtmcp-bench-ingest-{}", std::process::id());
    let floor_socket = format!("{socket}-floor");
    let result = async {
        let floor = Floor::start(&plan.tmp.join("floor"), &floor_socket)?;
        turns(plan, (&big, bytes), &socket, &floor).await
    }
    .await;
    for s in [&floor_socket, &socket] {
        kill_tmux(s);
    }
    result
}

/// Kills the tmux server on socket `socket`, and any process of it that
/// outlived `kill-server` (seen on this machine: the socket gone, the
/// server still up), found by its `-L SOCKET` arguments.
fn kill_tmux(socket: &str) {
    dtmcp::tmux::kill_server_now(socket);
    let Ok(procs) = std::fs::read_dir("/proc") else { return };
    for pid in procs.flatten().filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok()) {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        let ours = args.first().is_some_and(|a| a.ends_with(b"tmux"))
            && args.windows(2).any(|w| w[0] == b"-L" && w[1] == socket.as_bytes());
        if ours {
            // Only a tmux of this bench's own socket.
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
    }
}

async fn turns(plan: &Plan<'_>, (big, bytes): (&Path, u64), socket: &str, floor: &Floor) -> anyhow::Result<Turns> {
    let state = plan.tmp.join("state");
    let home = plan.tmp.join("home");
    let run = plan.tmp.join("run");
    for d in [&home, &run] {
        std::fs::create_dir_all(d)?;
    }
    let (state_s, home_s, run_s) = (state.display().to_string(), home.display().to_string(), run.display().to_string());
    let env = [
        ("DOCENT_TERMINAL_MCP_HOME", state_s.as_str()),
        ("DOCENT_TERMINAL_MCP_SOCKET", socket),
        ("XDG_RUNTIME_DIR", run_s.as_str()),
        ("HOME", home_s.as_str()),
    ];
    let server = McpChild::start(plan.exe, &[], &env).await?;
    let router = server.pid().ok_or_else(|| anyhow::anyhow!("the router has no pid"))?;
    let mut t = Turns { complete: true, bytes, ..Turns::default() };
    let command = format!("cat {}", big.display());
    let mut last = String::new();
    for i in 0..plan.rounds {
        let (wall, tmux_cpu) = floor.round(big)?;
        t.floor.push(wall);
        t.floor_tmux_cpu.push(tmux_cpu);
        let name = format!("ingest{i}");
        server.call("session_create", json!({"name": name})).await?;
        let dir = state.join("sessions").join(&name);
        let logger = logger_pid(&dir).unwrap_or(0);
        let tmux = tmux_pid(socket).unwrap_or(0);
        // What starting the session set going settles first.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = (cpu_time(router), cpu_time(logger), cpu_time(tmux));
        let started = Instant::now();
        let logged = watch_log(dir.join("raw.log"), bytes, started);
        let r = server.call("run", json!({"session": name, "command": command, "timeout": 600})).await?;
        let took = started.elapsed();
        t.logged.push(logged.join().ok().flatten().unwrap_or(took));
        t.router_cpu.push(cpu_time(router).saturating_sub(before.0));
        t.logger_cpu.push(cpu_time(logger).saturating_sub(before.1));
        t.tmux_cpu.push(cpu_time(tmux).saturating_sub(before.2));
        t.complete &= !r.is_error && r.text.contains("exit 0");
        t.ours.push(took);
        t.ratios.push(took.as_secs_f64() / wall.as_secs_f64().max(1e-9));
        // The round before goes: one big session (and its logger) at a time.
        if !last.is_empty() {
            server.call("session_close", json!({"session": last})).await?;
        }
        last = name;
    }
    let lines = plan.lines;
    for (from, to) in [(1, 400), (lines / 2, lines / 2 + 399), (lines.saturating_sub(399).max(1), lines)] {
        server.call("read", json!({"session": last, "from_line": from, "to_line": to})).await?;
    }
    for pattern in [format!("{:07} ok", lines / 3), "^00[0-9]{4}99 ok$".to_string(), "never-printed".to_string()] {
        server.call("search", json!({"session": last, "pattern": pattern})).await?;
    }
    let dir = state.join("sessions").join(&last);
    t.complete &= std::fs::metadata(dir.join("lines.idx")).map_or(0, |m| m.len() / 8) >= lines;
    t.router_kb = peak_kb(router);
    t.logger_kb = logger_pid(&dir).map_or(0, peak_kb);
    server.kill().await?;
    Ok(t)
}

/// Watches `log` from a thread until it has grown by more than `bytes`
/// and ends with a shell's marker; the time from `started` it took, or
/// `None` after five minutes.
fn watch_log(log: PathBuf, bytes: u64, started: Instant) -> std::thread::JoinHandle<Option<Duration>> {
    let before = std::fs::metadata(&log).map_or(0, |m| m.len());
    std::thread::spawn(move || {
        let done = wait_for(Duration::from_secs(300), || {
            std::fs::metadata(&log).is_ok_and(|m| m.len() > before + bytes) && tail_has(&log, MARKER_D)
        });
        done.then(|| started.elapsed())
    })
}

/// The floor's tmux server: one integrated bash pane piping into a file.
struct Floor {
    socket: String,
    sink: PathBuf,
    tmux_pid: u32,
}

impl Floor {
    fn start(dir: &Path, socket: &str) -> anyhow::Result<Floor> {
        let shell = dtmcp::shell::install(&dir.join("shell"))?;
        let home = dir.join("home");
        std::fs::create_dir_all(&home)?;
        // The router's default size, and a nonce, as its panes have.
        let started = std::process::Command::new("tmux")
            .args(["-L", socket, "new-session", "-d", "-s", "floor", "-x", "120", "-y", "40"])
            .args(["-e", "__DTMCP_NONCE=11.22.33.44", "--"])
            .args(dtmcp::shell::bash_argv(&shell))
            .env("HOME", &home)
            .env_remove("TMUX")
            .status()?;
        anyhow::ensure!(started.success(), "tmux new-session failed for the floor");
        let sink = dir.join("floor.out");
        let floor = Floor { socket: socket.to_string(), sink, tmux_pid: tmux_pid(socket).unwrap_or(0) };
        floor.tmux(&["pipe-pane", "-O", "-t", "=floor:", &format!("exec cat > {}", floor.sink.display())])?;
        // A first command's marker in the file: the shell and the pipe are up.
        floor.tmux(&["send-keys", "-t", "=floor:", "true", "Enter"])?;
        anyhow::ensure!(
            wait_for(Duration::from_secs(20), || tail_has(&floor.sink, MARKER_D)),
            "the floor's shell finished no command"
        );
        Ok(floor)
    }

    fn tmux(&self, args: &[&str]) -> anyhow::Result<()> {
        let out = std::process::Command::new("tmux").arg("-L").arg(&self.socket).args(args).output()?;
        anyhow::ensure!(out.status.success(), "tmux {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        Ok(())
    }

    /// Types `cat BIG` and waits until the file holds all of it and the
    /// marker after it; the time that took and tmux's CPU time meanwhile.
    fn round(&self, big: &Path) -> anyhow::Result<(Duration, Duration)> {
        let bytes = std::fs::metadata(big)?.len();
        let before = std::fs::metadata(&self.sink).map_or(0, |m| m.len());
        let cpu_before = cpu_time(self.tmux_pid);
        let started = Instant::now();
        self.tmux(&["send-keys", "-t", "=floor:", "-l", &format!("cat {}", big.display())])?;
        self.tmux(&["send-keys", "-t", "=floor:", "Enter"])?;
        let done = wait_for(Duration::from_secs(300), || {
            std::fs::metadata(&self.sink).is_ok_and(|m| m.len() > before + bytes) && tail_has(&self.sink, MARKER_D)
        });
        let wall = started.elapsed();
        anyhow::ensure!(done, "the floor never finished its cat");
        Ok((wall, cpu_time(self.tmux_pid).saturating_sub(cpu_before)))
    }
}

/// The start of the "finished" marker a shell prints before its prompt.
const MARKER_D: &[u8] = b"\x1b]133;D";

/// Writes `lines` lines of log-like text; returns the byte count.
pub fn write_big(path: &Path, lines: u64) -> anyhow::Result<u64> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut n = 0u64;
    for i in 0..lines {
        let line = format!("{i:07} ok\n");
        n += line.len() as u64;
        f.write_all(line.as_bytes())?;
    }
    f.flush()?;
    Ok(n)
}

/// Whether the last 4 KiB of `path` hold `needle`.
pub fn tail_has(path: &Path, needle: &[u8]) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else { return false };
    let _ = f.seek(SeekFrom::End(-4096));
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).is_ok() && buf.windows(needle.len()).any(|w| w == needle)
}

/// Polls `check` every 5 ms for at most `limit`.
pub fn wait_for(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// The CPU time all threads of a process have run so far (from the
/// scheduler's own accounting, in nanoseconds: finer than clock ticks).
pub fn cpu_time(pid: u32) -> Duration {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Duration::ZERO };
    let ns: u64 = tasks
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()))
        .sum();
    Duration::from_nanos(ns)
}

/// VmHWM of a process, in kB (0 once it is gone).
pub fn peak_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The logger serving session directory `dir`, from the pid it wrote.
pub fn logger_pid(dir: &Path) -> Option<u32> {
    std::fs::read_to_string(dir.join("logger.pid")).ok()?.trim().parse().ok()
}

/// The pid of the tmux server on socket `socket`.
pub fn tmux_pid(socket: &str) -> Option<u32> {
    let out = std::process::Command::new("tmux").args(["-L", socket, "display", "-p", "#{pid}"]).output().ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// The median of `v` (the upper one of an even count), if it has any.
pub fn median(v: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

/// How `v` spreads: its lowest, median and highest.
pub fn spread(v: &[f64]) -> String {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    s.sort_by(f64::total_cmp);
    match (s.first(), median(&s), s.last()) {
        (Some(lo), Some(mid), Some(hi)) => {
            format!("{} rounds: lowest {lo:.3}, median {mid:.3}, highest {hi:.3}", s.len())
        }
        _ => "no rounds".to_string(),
    }
}

/// Seconds of each duration.
pub fn secs(v: &[Duration]) -> Vec<f64> {
    v.iter().map(Duration::as_secs_f64).collect()
}
