//! Finding sessions against a real tmux on a private socket: what a call
//! costs tmux with many sessions open. No logger is needed to find a
//! session, so the panes here are plain `sleep`s named as ours would be.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{OPT_NAME, Sessions};
use crate::config::Config;
use crate::tmux::Tmux;
use crate::tmux::tests::harness::eventually;
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
    let cpu = w.tmux_cpu();
    let start = Instant::now();
    for _ in 0..LISTS {
        assert_eq!(w.sessions.panes_with(super::Listing::Bare).await.expect("lists").len(), 100);
    }
    println!(
        "bare listing (no current command or path), 100 sessions: {:?} per call, tmux CPU {:?} per call",
        start.elapsed() / LISTS as u32,
        (w.tmux_cpu() - cpu) / LISTS as u32
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolving_costs_one_small_command_whatever_the_number_of_sessions() {
    let w = World::new();
    for i in 1..=100 {
        w.session(&format!("t{i}"));
    }
    w.sessions.resolve_quiet("t1").await.expect("resolves");
    // The stray watch looks once when the control client connects; let it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = w.sessions.tmux.counts();
    for i in 1..=100 {
        let name = format!("t{i}");
        let s = w.sessions.resolve_quiet(&name).await.expect("resolves");
        assert_eq!((s.name.as_str(), s.pane.tmux_session.as_str()), (name.as_str(), name.as_str()));
        assert!(s.pane.pane_current_command.is_empty(), "nothing in /proc was asked for");
    }
    let after = w.sessions.tmux.counts();
    assert_eq!(after.listings - before.listings, 0, "no call listed the panes");
    assert_eq!(after.commands - before.commands, 100, "one command per call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_killed_in_tmux_is_gone_at_the_next_call_and_a_renamed_one_stays() {
    let w = World::new();
    w.session("k1");
    w.session("k2");
    w.session("k3");
    w.sessions.resolve_quiet("k1").await.expect("resolves");
    w.tmux(&["kill-session", "-t", "=k1"]);
    let err = w.sessions.resolve_quiet("k1").await.expect_err("k1 is gone").to_string();
    assert!(err.contains("session \"k1\" is closed (its program ended, or it was closed) (open: k2, k3)"), "{err}");
    w.tmux(&["rename-session", "-t", "=k2", "elsewhere"]);
    let s = w.sessions.resolve_quiet("k2").await.expect("the pane still carries its name");
    assert_eq!(s.pane.tmux_session, "elsewhere", "a person attaches to the new name");
    // A pane recorded in meta.json that now belongs to another session is
    // not taken for this one.
    let k3 = w.sessions.resolve_quiet("k3").await.expect("resolves");
    w.meta("k4", k3.pane.pane_id.as_str());
    let err = w.sessions.resolve_quiet("k4").await.expect_err("k4 has no pane").to_string();
    assert!(err.contains("session \"k4\" is closed"), "{err}");
    // Nor is a dead pane's id once tmux forgot it (k3 was described just
    // now: it is forgotten as soon as tmux's notice of the kill is heard).
    let heard = w.sessions.tmux.changes();
    w.tmux(&["kill-pane", "-t", k3.pane.pane_id.as_str()]);
    assert!(eventually(Duration::from_secs(5), || w.sessions.tmux.changes() != heard).await, "no notice of the kill");
    assert!(w.sessions.resolve_quiet("k3").await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pane_seen_lately_is_not_asked_for_again_until_tmux_tells_of_a_change_or_time_passes() {
    let w = World::new();
    w.session("c1");
    w.sessions.resolve_quiet("c1").await.expect("the first call starts the control client");
    // The stray watch looks once when the control client connects; let it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = |since: crate::tmux::Counts| w.sessions.tmux.counts().commands - since.commands;
    let before = w.sessions.tmux.counts();
    w.sessions.resolve_quiet("c1").await.expect("resolves");
    let again = w.sessions.resolve_quiet("c1").await.expect("resolves");
    assert_eq!(asked(before), 1, "the second call asked tmux nothing");
    assert_eq!(again.pane.tmux_session, "c1");
    // A change tmux tells of: the next call asks again, and sees it.
    let heard = w.sessions.tmux.changes();
    assert!(heard.is_some(), "a control client listens");
    w.tmux(&["rename-session", "-t", "=c1", "renamed"]);
    assert!(eventually(Duration::from_secs(5), || w.sessions.tmux.changes() != heard).await, "no notice of the rename");
    assert_eq!(w.sessions.resolve_quiet("c1").await.expect("resolves").pane.tmux_session, "renamed");
    // What tmux does not tell of (a resize by someone else) is asked for
    // again once the description is half a second old.
    w.tmux(&["resize-window", "-t", "=renamed:", "-x", "100", "-y", "30"]);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let before = w.sessions.tmux.counts();
    let s = w.sessions.resolve_quiet("c1").await.expect("resolves");
    assert_eq!((asked(before), s.pane.pane_width, s.pane.pane_height), (1, 100, 30));
    // A pane whose shell ended is asked for at once.
    w.sessions.resolve_quiet("c1").await.expect("resolves");
    let pid = s.pane.pane_pid.to_string();
    let heard = w.sessions.tmux.changes();
    let _ = std::process::Command::new("kill").arg(&pid).status();
    // The cache stands while the process is there and tmux told of no
    // change: a zombie passes its cheap check until tmux reaps it (and a
    // zombie left to an init that does not reap stays, but then tmux
    // itself is gone, which ends the control client: a change).
    let ended = || !super::process_exists(s.pane.pane_pid) || w.sessions.tmux.changes() != heard;
    let ended = eventually(Duration::from_secs(20), ended).await;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    assert!(ended, "the pane's process {pid} is still there and tmux told of nothing: {stat}");
    let before = w.sessions.tmux.counts();
    let _ = w.sessions.resolve_quiet("c1").await;
    assert!(asked(before) >= 1, "a pane whose process ended was taken on trust");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pane_split_with_tmux_keys_is_taken_on_without_a_call() {
    let w = World::new();
    let first = w.session("s1");
    w.sessions.resolve_quiet("s1").await.expect("the first call starts the watch");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = w.sessions.tmux.counts();
    // A person splits the window in a tmux client of their own.
    let split = w.tmux(&["split-window", "-d", "-P", "-F", "#{pane_id}", "-t", &first, "sleep 100000"]);
    let split = split.trim().to_string();
    let named = || w.tmux(&["display", "-p", "-t", &split, "#{@dtmcp_name}"]).trim().to_string();
    assert!(eventually(Duration::from_secs(5), || named() == "s1+1").await, "not adopted: {:?}", named());
    let meta = store::read_meta(&w.sessions.cfg.session_dir("s1+1")).expect("meta.json of the adopted pane");
    assert_eq!((meta.adopted, meta.parent.as_deref(), meta.pane_id.as_str()), (true, Some("s1"), split.as_str()));
    assert_eq!(meta.command, ["sleep"], "what it ran when taken on");
    let listed = w.sessions.tmux.counts().listings - before.listings;
    assert!((1..=2).contains(&listed), "one look (two with the adoption's second look), not {listed}");
    // Our own panes made in the meantime are no strays.
    assert_eq!(w.sessions.resolve_quiet("s1+1").await.expect("resolves").pane.pane_id.as_str(), split);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweeping_handle_never_watches_for_strays() {
    let w = World::new();
    w.session("q1");
    let sweeping = Sessions::new(w.sessions.cfg.clone(), w.sessions.tmux.clone()).expect("sessions").for_sweeping();
    sweeping.resolve_quiet("q1").await.expect("resolves");
    assert!(matches!(*sweeping.strays.lock().expect("lock"), super::panes::StrayWatch::Never));
    w.sessions.resolve_quiet("q1").await.expect("resolves");
    assert!(matches!(*w.sessions.strays.lock().expect("lock"), super::panes::StrayWatch::Running(_)));
}
