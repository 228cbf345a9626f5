//! Finding sessions against a real tmux on a private socket: what a call
//! costs tmux with many sessions open. No logger is needed to find a
//! session, so the panes here are plain `sleep`s named as ours would be.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{OPT_NAME, Sessions};
use crate::config::Config;
use crate::tmux::Tmux;
use dtmcp_core::store::{self, Meta};

/// A private tmux server and state home, torn down when dropped.
struct World {
    socket: String,
    home: tempfile::TempDir,
    sessions: Sessions,
}

impl World {
    fn new() -> World {
        static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let socket = format!("dtmcp-s-{}-{n}", std::process::id());
        let home = tempfile::tempdir().expect("a temporary state home");
        let cfg = Config {
            home: home.path().to_path_buf(),
            socket: socket.clone(),
            pane_logger: "/bin/false".into(),
            attach_prefix: Vec::new(),
        };
        let sessions = Sessions::new(cfg, Arc::new(Tmux::new(&socket))).expect("sessions");
        World { socket, home, sessions }
    }

    /// Runs tmux on this world's socket from the side.
    fn tmux(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("tmux")
            .args(["-u", "-f", "/dev/null", "-L", &self.socket])
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("tmux runs");
        assert!(out.status.success(), "tmux {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A session `name` as ours look: its own tmux session, its pane named
    /// by the option, a `meta.json` that records the pane.
    fn session(&self, name: &str) -> String {
        let args = ["new-session", "-d", "-s", name, "-x", "80", "-y", "24", "-P", "-F", "#{pane_id}", "sleep 100000"];
        let out = self.tmux(&args);
        let pane = out.trim().to_string();
        self.tmux(&["set-option", "-p", "-t", &pane, OPT_NAME, name]);
        self.meta(name, &pane);
        pane
    }

    fn meta(&self, name: &str, pane: &str) {
        let dir = self.sessions.cfg.session_dir(name);
        std::fs::create_dir_all(&dir).expect("session directory");
        let meta = Meta { name: name.into(), pane_id: pane.into(), ..Meta::default() };
        store::write_meta(&dir, &meta).expect("meta.json");
    }

    /// CPU time the tmux server has used so far.
    fn tmux_cpu(&self) -> Duration {
        let pid = self.tmux(&["display", "-p", "#{pid}"]);
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).expect("tmux's stat");
        let after = &stat[stat.rfind(')').expect("comm ends") + 2..];
        let fields: Vec<&str> = after.split(' ').collect();
        let ticks: u64 = fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
        let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok().flatten().unwrap_or(100) as u64;
        Duration::from_millis(ticks * 1000 / hz)
    }
}

impl Drop for World {
    fn drop(&mut self) {
        crate::tmux::kill_server_now(&self.socket);
        let _ = &self.home;
    }
}

/// Prints what resolving a session and listing them costs with 100
/// sessions open: the time of one call (median and 90th percentile) and
/// the tmux server's CPU per call. Run by hand:
/// `cargo test --lib session::tests::measure -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, run by hand"]
async fn measure_resolve_with_100_sessions() {
    let w = World::new();
    for i in 1..=100 {
        w.session(&format!("t{i}"));
    }
    w.sessions.resolve_quiet("t1").await.expect("warm up");
    tokio::time::sleep(Duration::from_millis(500)).await;
    const CALLS: usize = 500;
    let cpu = w.tmux_cpu();
    let mut times = Vec::with_capacity(CALLS);
    for i in 0..CALLS {
        let name = format!("t{}", i % 100 + 1);
        let start = Instant::now();
        let s = w.sessions.resolve_quiet(&name).await.expect("resolves");
        times.push(start.elapsed());
        assert_eq!(s.name, name);
    }
    let cpu = w.tmux_cpu() - cpu;
    times.sort();
    println!(
        "resolve, 100 sessions: median {:?}, p90 {:?}, tmux CPU {:?} per call ({CALLS} calls)",
        times[CALLS / 2],
        times[CALLS * 9 / 10],
        cpu / CALLS as u32
    );
    const LISTS: usize = 50;
    let cpu = w.tmux_cpu();
    let start = Instant::now();
    for _ in 0..LISTS {
        assert_eq!(w.sessions.panes().await.expect("lists").len(), 100);
    }
    println!(
        "panes (session_list's listing), 100 sessions: {:?} per call, tmux CPU {:?} per call",
        start.elapsed() / LISTS as u32,
        (w.tmux_cpu() - cpu) / LISTS as u32
    );
}
