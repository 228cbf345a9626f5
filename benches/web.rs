//! The web view under measurement, each beside a reference taken in the
//! same run:
//!
//! - screen change → browser: keys typed into a pane (echoed at the
//!   prompt) until the session's event stream carries them; the reference
//!   is the same keys until `capture-pane`, asked in a tight loop, shows them.
//! - overview load with 50 sessions: from opening the overview's stream to
//!   its first event holding every card, on a server that just started
//!   (cold) and with the feed running (warm); the reference is
//!   `GET /api/sessions` over the Unix socket on the same sessions.
//! - a flood (`yes`): frames per second sent to one browser while a second
//!   one is connected and reads nothing, and the server's resident memory
//!   before, during and after.
//! - five browsers watching an idle server: the server's CPU time over a
//!   quiet stretch with the five streams open, beside the same stretch
//!   with none.
//!
//! `cargo bench --bench web` (add `-- N` for N latency samples, default
//! 60). Prints a table; asserts nothing.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dtmcp::mcp_client::McpChild;
use dtmcp::tmux::Tmux;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use serde_json::{Value, json};

const EXE: &str = env!("CARGO_BIN_EXE_docent-terminal-mcp");
/// Sessions for the overview's load.
const MANY: usize = 50;

fn main() -> anyhow::Result<()> {
    let samples: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(60);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let tmp = tempfile::Builder::new().prefix("dtmcp-bench-web-").tempdir()?;
    let world = World::new(tmp.path())?;
    let result = rt.block_on(measure(&world, samples));
    world.stop();
    let m = result?;
    println!("\n{:<58} {:>12} {:>12} {:>14}", "what", "median", "p90", "target");
    row(&format!("reference: keys → capture-pane shows them (n={samples})"), &m.floor, "");
    row(&format!("screen change → browser's event stream (n={samples})"), &m.latency, "≤ 100 ms");
    row(&format!("reference: GET /api/sessions, {MANY} sessions (n={})", m.api.len()), &m.api, "");
    row(&format!("overview, {MANY} sessions, cold: first event (n={})", m.cold.len()), &m.cold, "");
    row(&format!("overview, {MANY} sessions, warm: first event (n={})", m.warm.len()), &m.warm, "");
    println!();
    println!("{:<58} {:>12}", "flood (`yes`), one browser reading, one stalled", "");
    println!("{:<58} {:>12.1} {:>27}", "  frames per second sent", m.fps, "≤ 10 (the pace)");
    println!("{:<58} {:>9.1} MB", "  server RSS before the flood", m.rss_before);
    println!("{:<58} {:>9.1} MB", "  server RSS, highest during the flood", m.rss_peak);
    println!("{:<58} {:>9.1} MB", "  server RSS after the flood", m.rss_after);
    println!();
    println!("{:<58} {:>11.3}%", "reference: server CPU, idle, no browser", m.cpu_alone);
    println!("{:<58} {:>11.3}%", "server CPU, idle, five browsers watching", m.cpu_watched);
    println!("(CPU as a share of one core over {} s each.)", IDLE.as_secs());
    Ok(())
}

/// How long each idle stretch is measured.
const IDLE: Duration = Duration::from_secs(10);

fn row(what: &str, v: &[Duration], target: &str) {
    let ms = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1e3);
    println!("{what:<58} {:>12} {:>12} {:>14}", ms(pct(v, 50)), ms(pct(v, 90)), target);
}

fn pct(v: &[Duration], p: usize) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s.get((s.len() * p / 100).min(s.len().saturating_sub(1))).copied().unwrap_or_default()
}

/// What was measured.
struct Measured {
    floor: Vec<Duration>,
    latency: Vec<Duration>,
    api: Vec<Duration>,
    cold: Vec<Duration>,
    warm: Vec<Duration>,
    fps: f64,
    rss_before: f64,
    rss_peak: f64,
    rss_after: f64,
    cpu_alone: f64,
    cpu_watched: f64,
}

/// A private state home, runtime dir and tmux socket, and a server on it.
struct World {
    home: PathBuf,
    run: PathBuf,
    user_home: PathBuf,
    socket: String,
    port: u16,
    serve: std::cell::RefCell<Option<Child>>,
}

impl World {
    fn new(tmp: &Path) -> anyhow::Result<World> {
        let (home, run, user_home) = (tmp.join("state"), tmp.join("run"), tmp.join("home"));
        std::fs::create_dir_all(&run)?;
        std::fs::create_dir_all(&user_home)?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let socket = format!("dtmcp-bench-web-{}", std::process::id());
        Ok(World { home, run, user_home, socket, port, serve: Default::default() })
    }

    fn env(&self) -> Vec<(String, String)> {
        vec![
            ("DOCENT_TERMINAL_MCP_HOME".into(), self.home.display().to_string()),
            ("DOCENT_TERMINAL_MCP_SOCKET".into(), self.socket.clone()),
            ("XDG_RUNTIME_DIR".into(), self.run.display().to_string()),
            ("HOME".into(), self.user_home.display().to_string()),
        ]
    }

    fn socket_path(&self) -> PathBuf {
        self.run.join("docent-terminal-mcp").join("server.sock")
    }

    /// Starts `serve --tcp` and waits until its socket answers.
    async fn start(&self) -> anyhow::Result<u32> {
        let child = Command::new(EXE)
            .args(["serve", "--tcp", &self.port.to_string()])
            .envs(self.env())
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let pid = child.id();
        *self.serve.borrow_mut() = Some(child);
        let started = Instant::now();
        while unix_post(&self.socket_path(), "/web/login-link").await.is_err() {
            anyhow::ensure!(started.elapsed() < Duration::from_secs(15), "serve did not come up");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(pid)
    }

    /// Stops the server (SIGTERM) and waits for it.
    fn stop_server(&self) {
        if let Some(mut child) = self.serve.borrow_mut().take() {
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let _ = child.wait();
        }
    }

    /// Stops the server and this world's tmux server.
    fn stop(&self) {
        self.stop_server();
        dtmcp::tmux::kill_server_now(&self.socket);
    }

    /// A cookie header from a fresh login link.
    async fn cookie(&self) -> anyhow::Result<String> {
        let answer = unix_post(&self.socket_path(), "/web/login-link").await?;
        let url = answer["url"].as_str().ok_or_else(|| anyhow::anyhow!("no link: {answer}"))?;
        let path = url.split_once(&format!(":{}", self.port)).map(|(_, p)| p.to_string()).unwrap_or_default();
        let (_, headers) = tcp_get(self.port, &path, "").await?;
        let set = headers.into_iter().find(|(k, _)| k == "set-cookie").map(|(_, v)| v);
        let set = set.ok_or_else(|| anyhow::anyhow!("no cookie"))?;
        Ok(set.split(';').next().unwrap_or_default().to_string())
    }

    async fn agent(&self) -> anyhow::Result<McpChild> {
        let env = self.env();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        McpChild::start(Path::new(EXE), &["connect", "--actor", "bench"], &env).await
    }
}

/// `POST path` over the Unix socket; the JSON answer.
async fn unix_post(socket: &Path, path: &str) -> anyhow::Result<Value> {
    let stream = tokio::net::UnixStream::connect(socket).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let req = hyper::Request::post(path).header("host", "localhost").body(Empty::<Bytes>::new())?;
    let body = sender.send_request(req).await?.into_body().collect().await?.to_bytes();
    Ok(serde_json::from_slice(&body)?)
}

/// `GET path` over the Unix socket; the time it took.
async fn unix_get_timed(socket: &Path, path: &str) -> anyhow::Result<Duration> {
    let t = Instant::now();
    let stream = tokio::net::UnixStream::connect(socket).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let req = hyper::Request::get(path).header("host", "localhost").body(Empty::<Bytes>::new())?;
    let body = sender.send_request(req).await?.into_body().collect().await?.to_bytes();
    anyhow::ensure!(!body.is_empty(), "an empty answer");
    Ok(t.elapsed())
}

/// `GET path` on the TCP port with `cookie`: status and headers.
async fn tcp_get(port: u16, path: &str, cookie: &str) -> anyhow::Result<(u16, Vec<(String, String)>)> {
    let resp = tcp_request(port, path, cookie).await?;
    let headers = resp.headers().iter().map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string())).collect();
    Ok((resp.status().as_u16(), headers))
}

/// `GET path` on the TCP port with `cookie`, on a connection of its own:
/// the response, its body not yet read.
async fn tcp_request(port: u16, path: &str, cookie: &str) -> anyhow::Result<hyper::Response<hyper::body::Incoming>> {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let req = hyper::Request::get(path)
        .header("host", format!("127.0.0.1:{port}"))
        .header("cookie", cookie)
        .body(Empty::<Bytes>::new())?;
    Ok(sender.send_request(req).await?)
}

/// An open event stream.
struct Stream {
    body: hyper::body::Incoming,
    buf: String,
    /// Bytes received so far.
    bytes: usize,
}

/// One event: its kind and data.
struct Event {
    kind: String,
    data: String,
}

impl Stream {
    async fn open(port: u16, path: &str, cookie: &str) -> anyhow::Result<Stream> {
        let resp = tcp_request(port, path, cookie).await?;
        anyhow::ensure!(resp.status().is_success(), "{path}: {}", resp.status());
        Ok(Stream { body: resp.into_body(), buf: String::new(), bytes: 0 })
    }

    /// The next event within `wait`.
    async fn next(&mut self, wait: Duration) -> Option<Event> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            while let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let mut e = Event { kind: String::new(), data: String::new() };
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event: ") {
                        e.kind = v.to_string();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        e.data.push_str(v);
                    }
                }
                if !e.kind.is_empty() {
                    return Some(e);
                }
            }
            let frame = tokio::time::timeout_at(deadline, self.body.frame()).await.ok()??.ok()?;
            if let Ok(bytes) = frame.into_data() {
                self.bytes += bytes.len();
                self.buf.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
    }

    /// Reads events until one of `kind` holds `needle`; `None` on timeout.
    async fn until(&mut self, kind: &str, needle: &str, wait: Duration) -> Option<()> {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let e = self.next(left).await?;
            if e.kind == kind && e.data.contains(needle) {
                return Some(());
            }
        }
    }

    /// Reads whatever comes until `quiet` passes without an event (or
    /// eight times that in all, for a stream that never goes quiet).
    async fn drain(&mut self, quiet: Duration) {
        let end = Instant::now() + quiet * 8;
        while Instant::now() < end && self.next(quiet).await.is_some() {}
    }
}

/// A process's resident memory, MB.
fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

/// A process's CPU time (user + system), in seconds.
fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14 and 15 of stat, counted after the command's closing paren.
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok().flatten().unwrap_or(100) as f64;
    (ticks(11) + ticks(12)) / hz
}

async fn measure(world: &World, samples: usize) -> anyhow::Result<Measured> {
    let pid = world.start().await?;
    let agent = world.agent().await?;
    let made = agent.call("session_create", json!({ "name": "lat" })).await?;
    anyhow::ensure!(!made.is_error, "session_create: {}", made.text);
    let tmux = Tmux::new(&world.socket);
    let cookie = world.cookie().await?;
    let (floor, latency) = latency(world, &tmux, &cookie, samples).await?;
    let (fps, rss_before, rss_peak, rss_after) = flood(world, &agent, &tmux, &cookie, pid).await?;
    for i in 0..MANY {
        let r = agent.call("session_create", json!({ "name": format!("m{i}") })).await?;
        anyhow::ensure!(!r.is_error, "session_create m{i}: {}", r.text);
    }
    let (cpu_alone, cpu_watched) = idle(world, &cookie, pid).await?;
    let mut api = Vec::new();
    for _ in 0..5 {
        api.push(unix_get_timed(&world.socket_path(), "/api/sessions").await?);
    }
    drop(agent);
    let (cold, warm) = overview(world).await?;
    Ok(Measured { floor, latency, api, cold, warm, fps, rss_before, rss_peak, rss_after, cpu_alone, cpu_watched })
}

/// Typed text until capture-pane shows it, and until the stream carries it.
async fn latency(
    world: &World,
    tmux: &Tmux,
    cookie: &str,
    samples: usize,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let mut stream = Stream::open(world.port, "/web/s/lat/events", cookie).await?;
    stream.drain(Duration::from_millis(800)).await;
    let (mut floor, mut latency) = (Vec::new(), Vec::new());
    for i in 0..samples + 5 {
        // The reference: the same kind of keys, polled for on the screen.
        let mark = format!("f{i:04}q");
        let t = Instant::now();
        tmux.run(&["send-keys", "-t", "=lat:", "-l", &mark]).await?;
        loop {
            let screen = tmux.run(&["capture-pane", "-p", "-t", "=lat:"]).await?;
            if screen.contains(&mark) {
                break;
            }
            anyhow::ensure!(t.elapsed() < Duration::from_secs(5), "the pane never showed {mark}");
        }
        let took = t.elapsed();
        tmux.run(&["send-keys", "-t", "=lat:", "C-u"]).await?;
        stream.drain(Duration::from_millis(250)).await;
        // The product: the keys until the browser's stream carries them.
        let mark = format!("w{i:04}q");
        let t = Instant::now();
        tmux.run(&["send-keys", "-t", "=lat:", "-l", &mark]).await?;
        stream.until("screen", &mark, Duration::from_secs(5)).await.ok_or_else(|| anyhow::anyhow!("no {mark}"))?;
        let web = t.elapsed();
        tmux.run(&["send-keys", "-t", "=lat:", "C-u"]).await?;
        stream.drain(Duration::from_millis(250)).await;
        if i >= 5 {
            floor.push(took);
            latency.push(web);
        }
    }
    Ok((floor, latency))
}

/// `yes` for 8 s in a watched session: frames per second to a reading
/// browser, with a stalled one connected, and the server's memory.
async fn flood(
    world: &World,
    agent: &McpChild,
    tmux: &Tmux,
    cookie: &str,
    pid: u32,
) -> anyhow::Result<(f64, f64, f64, f64)> {
    let made = agent.call("session_create", json!({ "name": "flood" })).await?;
    anyhow::ensure!(!made.is_error, "session_create: {}", made.text);
    let mut reading = Stream::open(world.port, "/web/s/flood/events", cookie).await?;
    let _stalled = Stream::open(world.port, "/web/s/flood/events", cookie).await?;
    reading.drain(Duration::from_millis(800)).await;
    let before = rss_mb(pid);
    tmux.run(&["send-keys", "-t", "=flood:", "-l", "yes 'a line of flood output, again and again'"]).await?;
    tmux.run(&["send-keys", "-t", "=flood:", "Enter"]).await?;
    reading.drain(Duration::from_millis(500)).await;
    let (mut frames, mut peak) = (0u32, before);
    let started = Instant::now();
    let mut next_sample = Instant::now();
    while started.elapsed() < Duration::from_secs(8) {
        if let Some(e) = reading.next(Duration::from_millis(200)).await
            && e.kind == "screen"
        {
            frames += 1;
        }
        if Instant::now() >= next_sample {
            peak = peak.max(rss_mb(pid));
            next_sample += Duration::from_millis(500);
        }
    }
    let fps = f64::from(frames) / started.elapsed().as_secs_f64();
    tmux.run(&["send-keys", "-t", "=flood:", "C-c"]).await?;
    reading.drain(Duration::from_secs(2)).await;
    Ok((fps, before, peak, rss_mb(pid)))
}

/// The server's CPU over [`IDLE`], with no browser and then with five.
async fn idle(world: &World, cookie: &str, pid: u32) -> anyhow::Result<(f64, f64)> {
    tokio::time::sleep(Duration::from_secs(3)).await;
    let share = |cpu: f64| cpu / IDLE.as_secs_f64() * 100.0;
    let c0 = cpu_s(pid);
    tokio::time::sleep(IDLE).await;
    let alone = share(cpu_s(pid) - c0);
    let mut streams = Vec::new();
    for path in ["/web/overview", "/web/overview", "/web/s/lat/events", "/web/s/flood/events", "/web/s/m1/events"] {
        let mut s = Stream::open(world.port, path, cookie).await?;
        s.next(Duration::from_secs(20)).await.ok_or_else(|| anyhow::anyhow!("{path} sent nothing"))?;
        streams.push(s);
    }
    for s in &mut streams {
        s.drain(Duration::from_millis(300)).await;
    }
    // Let the cards' second looks pass, then measure a quiet stretch.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let c0 = cpu_s(pid);
    tokio::time::sleep(IDLE).await;
    let watched = share(cpu_s(pid) - c0);
    drop(streams);
    Ok((alone, watched))
}

/// The overview with [`MANY`] sessions: cold on a server just started
/// (three starts), warm while its feed runs.
async fn overview(world: &World) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    let want = format!("\"name\":\"m{}\"", MANY - 1);
    for _ in 0..3 {
        world.stop_server();
        world.start().await?;
        let cookie = world.cookie().await?;
        let t = Instant::now();
        let mut s = Stream::open(world.port, "/web/overview", &cookie).await?;
        s.until("overview", &want, Duration::from_secs(60)).await.ok_or_else(|| anyhow::anyhow!("no overview"))?;
        cold.push(t.elapsed());
        for _ in 0..5 {
            let t = Instant::now();
            let mut again = Stream::open(world.port, "/web/overview", &cookie).await?;
            again.until("overview", &want, Duration::from_secs(60)).await.ok_or_else(|| anyhow::anyhow!("none"))?;
            warm.push(t.elapsed());
        }
    }
    Ok((cold, warm))
}
