//! The first ten minutes: the narrated demo runs every step against the
//! real server, and a router without its pane logger says so at start,
//! in one line, instead of failing every call later.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::{Ran, SERVER, World, poll, run_for};
use crate::{assert_has, needs};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_runs_every_step_and_exits_zero() {
    needs!("tmux");
    let world = World::new();
    let Ran { code, stdout: out, stderr: err, .. } =
        run_for(Path::new(SERVER), &["demo"], &world.env(), Duration::from_secs(120));
    assert!(code == 0, "the demo failed (exit {code}):\n{out}\n{err}");
    assert_eq!(out.matches("\n← ").count(), 16, "every step was answered:\n{out}");
    assert_eq!(out.matches(" (error)").count(), 1, "only the step meant to be refused was:\n{out}");
    assert_has!(out, "hello from Linux");
    assert_has!(out, "done sleeping");
    // Its directory is gone, and stays gone once its loggers have ended.
    let home = out.split_once("state home: ").and_then(|(_, rest)| rest.split_once(" (")).expect("the state home").0;
    let dir = Path::new(home).parent().expect("the demo's directory");
    assert!(dir.file_name().is_some_and(|n| n.to_string_lossy().starts_with("dtmcp-demo-")), "{}", dir.display());
    std::thread::sleep(Duration::from_millis(500));
    assert!(!dir.exists(), "the demo left {} behind", dir.display());
}

/// The server binary alone in a directory of its own, as a build that made
/// only it would leave it.
fn lonely_server(world: &World) -> std::path::PathBuf {
    let dir = world.tmp.path().join("bin");
    std::fs::create_dir_all(&dir).expect("bin dir");
    let exe = dir.join("docent-terminal-mcp");
    std::fs::copy(SERVER, &exe).expect("copy the server");
    exe
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_its_pane_logger_the_router_says_so_in_one_line_and_stops() {
    let world = World::new();
    let exe = lonely_server(&world);
    let logger = exe.with_file_name("dtmcp-pane-logger");
    for args in [&["demo"][..], &[], &["stdio"], &["serve"]] {
        let started = Instant::now();
        let Ran { code, stdout: out, stderr: err, .. } = run_for(&exe, args, &world.env(), Duration::from_secs(20));
        assert!(code != 0, "{args:?} went on without a logger:\n{out}\n{err}");
        assert!(started.elapsed() < Duration::from_secs(5), "{args:?} took {:?} to stop", started.elapsed());
        assert_eq!(out, "", "{args:?} printed before it stopped");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line:\n{err}");
        assert_has!(err, format!("the pane logger {} is missing", logger.display()));
        assert_has!(err, "cargo build --release");
        assert_has!(err, "cargo install --profile dist --path .");
    }
    // There, but not executable.
    std::fs::write(&logger, b"#!/bin/sh\n").expect("a logger that cannot run");
    let Ran { code, stderr: err, .. } = run_for(&exe, &["demo"], &world.env(), Duration::from_secs(20));
    assert!(code != 0);
    assert_has!(err, format!("the pane logger {} is not executable", logger.display()));
}

/// Started by hand in a terminal, the server says what it is and where to
/// go instead of waiting in silence; ctrl+d leaves without an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_started_by_hand_in_a_terminal_says_what_it_is() {
    needs!("tmux");
    let world = World::new();
    let mut args: Vec<String> =
        ["new-session", "-d", "-s", "byhand", "-x", "200", "-y", "20"].map(String::from).to_vec();
    for (k, v) in world.env() {
        args.extend(["-e".to_string(), format!("{k}={v}")]);
    }
    args.push(format!("'{SERVER}'; echo \"exited with $?\"; sleep 60"));
    let made = world.tmux(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let text = pane_until(&world, "=byhand:", "--help", Duration::from_secs(10)).await;
    assert_has!(text, "docent-terminal-mcp: an MCP server");
    assert_has!(text, "docent-terminal-mcp demo");
    assert_eq!(text.lines().filter(|l| !l.trim().is_empty()).count(), 1, "one line:\n{text}");
    world.tmux(&["send-keys", "-t", "=byhand:", "C-d"]);
    let text = pane_until(&world, "=byhand:", "exited with", Duration::from_secs(20)).await;
    assert_has!(text, "exited with 0");
    assert!(!text.contains("connection closed"), "{text}");
}

/// The demo's own tmux socket named in `text` (`tmux -L dtmcp-demo-N`).
fn demo_socket(text: &str) -> Option<String> {
    let at = text.find("tmux -L dtmcp-demo-")?;
    text[at + "tmux -L ".len()..].split_whitespace().next().map(str::to_string)
}

/// Kills a demo's tmux server when the test ends, however it ends.
struct DemoTmux(Option<String>);

impl Drop for DemoTmux {
    fn drop(&mut self) {
        if let Some(socket) = self.0.take() {
            dtmcp::tmux::kill_server_now(&socket);
        }
    }
}

fn demo_has_its_session(socket: &str) -> bool {
    let out = std::process::Command::new("tmux").args(["-L", socket, "has-session", "-t", "=demo"]).output();
    out.is_ok_and(|o| o.status.success())
}

/// Waits (at most `limit`) until the whole text of `world`'s pane `target`
/// holds `needle`, and returns it.
async fn pane_until(world: &World, target: &str, needle: &str, limit: Duration) -> String {
    poll::until_async(&format!("{needle:?} in pane {target}"), limit, async || {
        let out = world.tmux(&["capture-pane", "-p", "-J", "-S", "-", "-t", target]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if text.contains(needle) { Ok(text) } else { Err(text) }
    })
    .await
}

/// In a terminal the demo's attach line works until Enter; `--keep`
/// leaves the session for later, and says how to clean up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_keeps_its_session_until_enter_or_for_good_with_keep() {
    needs!("tmux");
    let world = World::new();
    let run = format!("env -u TMUX '{SERVER}' demo; echo \"demo exited with $?\"; sleep 60");
    let made = world.tmux(&["new-session", "-d", "-s", "tour", "-x", "200", "-y", "50", &run]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let text = pane_until(&world, "=tour:", "Press Enter", Duration::from_secs(90)).await;
    let socket = demo_socket(&text).unwrap_or_else(|| panic!("no attach line:\n{text}"));
    let _guard = DemoTmux(Some(socket.clone()));
    assert!(demo_has_its_session(&socket), "the attach line leads nowhere:\n{text}");
    world.tmux(&["send-keys", "-t", "=tour:", "Enter"]);
    let text = pane_until(&world, "=tour:", "demo exited with", Duration::from_secs(30)).await;
    assert_has!(text, "demo exited with 0");
    assert_has!(text, "Next: register the server with your agent");
    assert!(!demo_has_its_session(&socket), "the demo left its tmux server behind");

    let Ran { code, stdout: out, stderr: err, .. } =
        run_for(Path::new(SERVER), &["demo", "--keep"], &world.env(), Duration::from_secs(120));
    let kept = demo_socket(&out);
    let _kept_guard = DemoTmux(kept.clone());
    assert!(code == 0, "{out}\n{err}");
    let kept = kept.unwrap_or_else(|| panic!("no attach line:\n{out}"));
    assert_has!(out, "stays open");
    assert!(demo_has_its_session(&kept), "--keep did not keep the session:\n{out}");
    let dir = out.split("; rm -r ").nth(1).and_then(|r| r.lines().next()).expect("how to clean up").to_string();
    assert!(Path::new(&dir).join("state/sessions/demo/raw.log").is_file(), "the logs are kept in {dir}");
    let _ = std::fs::remove_dir_all(&dir);
}
