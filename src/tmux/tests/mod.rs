//! Tests of the tmux module against a real tmux on a private socket each.

pub(crate) mod harness;

use std::time::{Duration, Instant};

use rstest::rstest;

use super::{CONTROL_SESSION, Tmux, TmuxError, session_target, window_target};
use harness::{TmuxHarness, eventually, process_exists};

const SECOND: Duration = Duration::from_secs(1);

#[test]
fn tmux_can_be_shared_between_tasks() {
    fn shareable<T: Send + Sync + 'static>() {}
    shareable::<Tmux>();
}

#[tokio::test]
async fn run_answers_over_the_control_client() {
    let h = TmuxHarness::with_session();
    assert_eq!(h.tmux.run(&["display", "-p", "hello"]).await.expect("display"), "hello\n");
    assert!(h.tmux.control_pid().is_some(), "a control client runs");
    let mode = h.tmux.run(&["display", "-p", "#{client_control_mode}"]).await.expect("display");
    assert_eq!(mode, "1\n", "the command came over the control client");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_runs_get_their_own_answers() {
    let h = TmuxHarness::with_session();
    let tasks: Vec<_> = (0..8)
        .map(|task| {
            let tmux = h.tmux.clone();
            tokio::spawn(async move {
                for i in 0..25 {
                    let asked = format!("task {task} request {i}");
                    let got = tmux.run(&["display", "-p", &format!("{asked} #{{pid}}")]).await.expect("display");
                    assert!(got.starts_with(&asked) && got.ends_with('\n'), "asked {asked:?}, got {got:?}");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task finished");
    }
}

/// More at once than the client's stdin pipe holds (64 KiB): the writer
/// task's batches wait for room, and every answer still reaches the
/// command that asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_larger_than_the_pipe_keeps_every_answer_with_its_command() {
    let h = TmuxHarness::with_session();
    h.tmux.run(&["display", "-p", "up"]).await.expect("connect");
    let pad = "p".repeat(2000);
    let asks = (0..200).map(|i| {
        let tmux = h.tmux.clone();
        let asked = format!("burst {i} {pad}");
        async move {
            let got = tmux.run(&["display", "-p", &asked]).await.expect("display");
            assert_eq!(got, format!("{asked}\n"), "request {i}");
        }
    });
    tokio::time::timeout(20 * SECOND, futures_util::future::join_all(asks)).await.expect("every answer within 20 s");
}

#[tokio::test]
async fn an_error_block_is_a_command_error() {
    let h = TmuxHarness::with_session();
    let err = h.tmux.run(&["has-session", "-t", "=nope"]).await.expect_err("no such session");
    assert!(matches!(&err, TmuxError::Command { stderr, .. } if stderr == "can't find session: nope"), "{err}");
    let err = h.tmux.run(&["send-keys", "-t", "%999", "x"]).await.expect_err("no such pane");
    assert!(matches!(&err, TmuxError::Command { stderr, .. } if stderr == "can't find pane: %999"), "{err}");
    let err = h.tmux.run(&["no-such-command"]).await.expect_err("no such command");
    assert!(matches!(&err, TmuxError::Command { stderr, .. } if stderr.contains("unknown command")), "{err}");
    assert_eq!(h.tmux.run(&["display", "-p", "after"]).await.expect("still in step"), "after\n");
}

#[tokio::test]
async fn what_tmux_cannot_carry_is_refused_before_sending() {
    let h = TmuxHarness::with_session();
    let err = h.tmux.run(&["display", "-p", "a\0b"]).await.expect_err("NUL");
    assert!(matches!(err, TmuxError::Invalid { .. }), "{err}");
    assert!(matches!(h.tmux.run(&[]).await, Err(TmuxError::Invalid { .. })));
    let loose = h.tmux.send_text("=main:", "x").await;
    assert!(matches!(loose, Err(TmuxError::Invalid { .. })), "keys go to exact pane ids only: {loose:?}");
}

#[tokio::test]
async fn reconnects_after_the_server_restarts() {
    let h = TmuxHarness::with_session();
    h.tmux.run(&["display", "-p", "x"]).await.expect("display");
    let first = h.tmux.control_pid().expect("connected");
    h.tmux.spawn(&["kill-server"]).await.expect("kill-server");
    assert!(eventually(SECOND, || h.tmux.control_pid().is_none()).await, "the client noticed");
    h.tmux.spawn(&["new-session", "-d", "-s", "again", "sleep 1000"]).await.expect("new server");
    let mode = h.tmux.run(&["display", "-p", "#{client_control_mode}"]).await.expect("display");
    assert_eq!(mode, "1\n");
    assert_ne!(h.tmux.control_pid(), Some(first), "a new client");
    assert!(eventually(SECOND, || !process_exists(first)).await, "the old client was reaped");
}

#[tokio::test]
async fn without_a_server_nothing_is_listed_and_nothing_starts() {
    let h = TmuxHarness::new();
    assert_eq!(h.tmux.list_panes().await.expect("no server is not an error"), vec![]);
    let err = h.tmux.run(&["display", "-p", "x"]).await.expect_err("no server");
    assert!(err.is_no_server(), "{err}");
    assert!(h.side(&["list-sessions"]).is_err(), "no server was started");
}

#[tokio::test]
async fn the_web_views_notification_client_starts_no_server() {
    let h = TmuxHarness::new();
    let (tell, _told) = tokio::sync::watch::channel(0);
    let events = crate::web::tmux_events::TmuxEvents::start(&h.tmux, tell).expect("tmux runs");
    assert!(eventually(Duration::from_secs(5), || !events.alive()).await, "the client gave up");
    // attach-session alone starts a server when none runs: its socket
    // would be there.
    assert!(h.side(&["list-sessions"]).is_err(), "no server was started");
    let dir = std::env::var("TMUX_TMPDIR").unwrap_or_else(|_| "/tmp".into());
    let socket = format!("{dir}/tmux-{}/{}", nix::unistd::getuid(), h.socket);
    assert!(!std::path::Path::new(&socket).exists(), "{socket} was made");
}

#[tokio::test]
async fn list_panes_leaves_out_the_control_session() {
    let h = TmuxHarness::with_session();
    let other = h.start_session("other", "sleep 1000");
    h.tmux.run(&["display", "-p", "x"]).await.expect("connect");
    let panes = h.tmux.list_panes().await.expect("list");
    let names: Vec<&str> = panes.iter().map(|p| p.session_name.as_str()).collect();
    assert_eq!(names, ["main", "other"]);
    // The pane's program may still be on its way to exec'ing sleep.
    let mut sleeping = false;
    for _ in 0..200 {
        let panes = h.tmux.list_panes().await.expect("list");
        if panes.iter().any(|p| p.pane_id == other && p.pane_current_command == "sleep" && !p.pane_dead) {
            sleeping = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(sleeping, "the other pane runs sleep");
    let sessions = h.side(&["list-sessions", "-F", "#{session_name}"]).expect("ls");
    assert!(sessions.lines().any(|s| s == CONTROL_SESSION), "the hidden session exists: {sessions:?}");
}

#[tokio::test]
async fn the_control_client_is_never_a_person() {
    let h = TmuxHarness::with_session();
    // A new session through run is spawned, so the control client stays put.
    h.tmux.run(&["new-session", "-d", "-s", "second", "sleep 1000"]).await.expect("new-session");
    let clients = h.tmux.run(&["list-clients", "-F", "#{client_control_mode} #{client_flags} #{session_name}"]).await;
    let clients = clients.expect("list-clients");
    assert_eq!(clients.lines().count(), 1, "{clients:?}");
    assert!(
        clients.starts_with("1 ") && clients.contains("ignore-size") && clients.contains("no-output"),
        "{clients:?}"
    );
    assert!(clients.trim_end().ends_with(CONTROL_SESSION), "{clients:?}");
    let attached = h.tmux.run(&["display", "-p", "-t", &window_target("second"), "#{session_attached}"]).await;
    assert_eq!(attached.expect("display"), "0\n");
}

#[rstest]
#[case::empty("")]
#[case::spaces("  two  spaces  ")]
#[case::semicolons("a ; b; c;")]
#[case::lone_semicolon(";")]
#[case::escaped_semicolon("a\\;")]
#[case::comment("#not a comment")]
#[case::format("#{session_name} #[fg=red]")]
#[case::dollar("$HOME ${HOME} $")]
#[case::tilde("~")]
#[case::tilde_path("~/x ~root")]
#[case::braces("{ } {x} }")]
#[case::double_quotes("say \"hi\"")]
#[case::single_quotes("it's 'quoted'")]
#[case::backslashes("\\ \\\\ \\n \\t \\0 \\u00e9 \\")]
#[case::leading_dash("-x --y")]
#[case::percent("%if 1")]
#[case::assignment("A=b")]
#[case::utf8("é€😀 中文")]
#[case::newline("two\nlines\n")]
#[case::control("tab\tcr\resc\x1b[0mbell\x07del\x7f")]
#[tokio::test]
async fn quoting_round_trips_through_tmux(#[case] value: &str) {
    let h = TmuxHarness::with_session();
    for spawned in [false, true] {
        let set = ["set-option", "-g", "@dtmcp_test", value];
        let shown = if spawned {
            h.tmux.spawn(&set).await.expect("set");
            h.tmux.spawn(&["show-options", "-gv", "@dtmcp_test"]).await
        } else {
            h.tmux.run(&set).await.expect("set");
            assert!(h.tmux.control_pid().is_some(), "sent over the control client");
            h.tmux.run(&["show-options", "-gv", "@dtmcp_test"]).await
        };
        assert_eq!(shown.expect("show"), format!("{value}\n"), "spawned: {spawned}");
    }
}

#[tokio::test]
async fn send_text_arrives_intact() {
    let h = TmuxHarness::with_session();
    let out = h.dir.path().join("typed");
    let pane = h.start_session("cat", &format!("cat > '{}'", out.display()));
    let text = "-n\tb; c 'single' \"double\" $HOME ~ #x {y} \\z é€ x\x16\x01y";
    h.tmux.send_text(&pane, text).await.expect("send_text");
    h.tmux.send_enter(&pane).await.expect("send_enter");
    let expected = "-n\tb; c 'single' \"double\" $HOME ~ #x {y} \\z é€ x\x01y\n";
    let arrived = || std::fs::read_to_string(&out).is_ok_and(|s| s.ends_with('\n'));
    assert!(eventually(5 * SECOND, arrived).await, "cat wrote the line");
    assert_eq!(std::fs::read_to_string(&out).expect("read"), expected);
}

#[tokio::test]
async fn wait_for_signal_wakes_a_waiter() {
    let h = TmuxHarness::with_session();
    let tmux = h.tmux.clone();
    let waiter = tokio::spawn(async move { tmux.run(&["wait-for", "dtmcp-test-chan"]).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    h.tmux.wait_for_signal("dtmcp-test-chan").await.expect("signal");
    let woke = tokio::time::timeout(2 * SECOND, waiter).await.expect("woke in time");
    woke.expect("task").expect("wait-for");
}

#[tokio::test]
async fn attach_command_attaches_to_exactly_that_session() {
    let h = TmuxHarness::with_session();
    h.start_session("t10", "sleep 1000");
    h.start_session("t1", "sleep 1000");
    let argv = h.tmux.attach_command("t1");
    assert_eq!(argv[1..], ["-L", &h.socket, "attach", "-t", "=t1"]);
    h.start_session("viewer", &format!("env -u TMUX {}", argv.join(" ")));
    let attached = || {
        let clients = h.side(&["list-clients", "-F", "#{client_control_mode} #{session_name}"]).unwrap_or_default();
        clients.lines().any(|l| l == "0 t1")
    };
    assert!(eventually(5 * SECOND, attached).await, "a person's client is on t1");
}

#[tokio::test]
async fn a_timeout_replaces_the_control_client() {
    let h = TmuxHarness::new();
    h.start_session("main", "sleep 1000");
    let tmux = Tmux::new(&h.socket).with_timeout(SECOND);
    tmux.run(&["display", "-p", "x"]).await.expect("connect");
    let first = tmux.control_pid().expect("connected");
    let control = tmux.live_control().expect("live");
    // Over control mode `wait-for` answers at once and then holds the
    // client's queue, so the next command gets no answer (run would have
    // spawned it for that reason).
    let wait = tmux.run_on(&control, &["wait-for", "never"], "wait-for never\n".to_string()).await;
    assert!(matches!(wait, Some(Ok(_))), "{wait:?}");
    let answer = tmux.run_on(&control, &["display", "-p", "x"], "display -p x\n".to_string()).await;
    assert!(matches!(answer, Some(Err(TmuxError::Timeout { ms: 1000, .. }))), "{answer:?}");
    drop(control);
    assert_eq!(tmux.run(&["display", "-p", "y"]).await.expect("fresh client"), "y\n");
    assert_ne!(tmux.control_pid(), Some(first));
    assert!(eventually(SECOND, || !process_exists(first)).await, "the stuck client was killed and reaped");
}

#[tokio::test]
async fn a_spawned_command_times_out_too() {
    let h = TmuxHarness::with_session();
    let tmux = Tmux::new(&h.socket).with_timeout(Duration::from_millis(200));
    let err = tmux.run(&["wait-for", "never"]).await.expect_err("nobody signals");
    assert!(matches!(err, TmuxError::Timeout { ms: 200, .. }), "{err}");
}

#[tokio::test]
async fn a_missing_tmux_binary_is_a_spawn_error() {
    let tmux = Tmux::new("dtmcp-t-no-binary").with_bin("/nonexistent/tmux");
    let err = tmux.run(&["display", "-p", "x"]).await.expect_err("no binary");
    assert!(matches!(err, TmuxError::Spawn { .. }), "{err}");
    assert_eq!(tmux.bin(), std::path::Path::new("/nonexistent/tmux"));
}

#[tokio::test]
async fn a_control_client_that_cannot_start_falls_back_to_spawn() {
    use std::os::unix::fs::PermissionsExt;
    let h = TmuxHarness::with_session();
    let fake = h.dir.path().join("tmux-without-control-mode");
    let script =
        "#!/bin/sh\nfor a; do [ \"$a\" = -C ] && { echo 'no control mode' >&2; exit 1; }; done\nexec tmux \"$@\"\n";
    std::fs::write(&fake, script).expect("write script");
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let tmux = Tmux::new(&h.socket).with_bin(&fake);
    for _ in 0..3 {
        assert_eq!(tmux.run(&["display", "-p", "x"]).await.expect("spawned"), "x\n");
    }
    assert_eq!(tmux.control_pid(), None);
}

#[tokio::test]
async fn dropping_tmux_kills_and_reaps_its_client() {
    let h = TmuxHarness::with_session();
    let tmux = Tmux::new(&h.socket);
    tmux.run(&["display", "-p", "x"]).await.expect("connect");
    let pid = tmux.control_pid().expect("connected");
    drop(tmux);
    assert!(eventually(2 * SECOND, || !process_exists(pid)).await, "killed and reaped");
}

#[tokio::test]
async fn shutdown_control_lets_an_empty_server_exit() {
    let h = TmuxHarness::with_session();
    h.tmux.run(&["display", "-p", "x"]).await.expect("connect");
    h.tmux.run(&["kill-session", "-t", &session_target("main")]).await.expect("kill-session");
    assert!(
        h.side(&["has-session", "-t", &session_target(CONTROL_SESSION)]).is_ok(),
        "hidden session holds the server"
    );
    h.tmux.shutdown_control().await;
    assert!(eventually(2 * SECOND, || h.side(&["list-sessions"]).is_err()).await, "the server exited");
    assert_eq!(h.tmux.control_pid(), None);
    assert_eq!(h.tmux.list_panes().await.expect("empty"), vec![]);
}

#[tokio::test]
async fn timing_control_versus_spawn() {
    let h = TmuxHarness::with_session();
    h.tmux.run(&["display", "-p", "x"]).await.expect("connect");
    let mut control = Vec::new();
    for _ in 0..200 {
        let start = Instant::now();
        h.tmux.run(&["display", "-p", "x"]).await.expect("run");
        control.push(start.elapsed());
    }
    let mut spawned = Vec::new();
    for _ in 0..50 {
        let start = Instant::now();
        h.tmux.spawn(&["display", "-p", "x"]).await.expect("spawn");
        spawned.push(start.elapsed());
    }
    println!("median display -p x: control {:?}, spawn {:?}", median(&mut control), median(&mut spawned));
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

#[test]
fn the_scope_command_names_a_unit_per_socket_and_runs_tmux_unchanged() {
    let argv = ["-L", "my sock", "new-session", "-d"].map(str::to_string);
    let args = super::scope_args("my sock", std::path::Path::new("/usr/bin/tmux"), &argv);
    assert_eq!(
        args,
        [
            "--user",
            "--scope",
            "--quiet",
            "--collect",
            "--unit",
            "docent-terminal-mcp-tmux-my_sock.scope",
            "--",
            "/usr/bin/tmux",
            "-u",
            "-L",
            "my sock",
            "new-session",
            "-d"
        ]
    );
}

#[test]
fn systemd_plumbing_and_an_outer_tmux_never_reach_a_pane() {
    for name in ["NOTIFY_SOCKET", "INVOCATION_ID", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "TMUX"] {
        assert!(super::SCRUBBED_ENV.contains(&name), "{name} is not scrubbed");
    }
}

/// Waits until the topology counter moves past `seen`; false after `limit`.
async fn moved(changes: &mut tokio::sync::watch::Receiver<u64>, limit: Duration) -> bool {
    tokio::time::timeout(limit, changes.changed()).await.is_ok_and(|r| r.is_ok()) && {
        changes.borrow_and_update();
        true
    }
}

#[tokio::test]
async fn panes_made_anywhere_move_the_topology_counter() {
    let h = TmuxHarness::with_session();
    let other = h.start_session("other", "sleep 1000");
    let mut changes = h.tmux.topology();
    h.tmux.run(&["display", "-p", "x"]).await.expect("connect");
    assert!(moved(&mut changes, SECOND).await, "a new control client counts as a change");
    // Let the notices of the client's own start pass.
    tokio::time::sleep(Duration::from_millis(100)).await;
    changes.borrow_and_update();
    // A split in a session the control client is not attached to: only
    // the hooks tell of it.
    h.side(&["split-window", "-d", "-t", other.as_str(), "sleep 1000"]).expect("split");
    assert!(moved(&mut changes, SECOND).await, "a split elsewhere is told");
    h.side(&["new-window", "-d", "-t", &session_target("other"), "sleep 1000"]).expect("new-window");
    assert!(moved(&mut changes, SECOND).await, "a new window is told");
    h.side(&["rename-session", "-t", &session_target("other"), "renamed"]).expect("rename");
    assert!(moved(&mut changes, SECOND).await, "a renamed session is told");
    // Sending keys, resizing and killing a pane are not.
    tokio::time::sleep(Duration::from_millis(100)).await;
    changes.borrow_and_update();
    h.side(&["send-keys", "-t", other.as_str(), "x"]).expect("send-keys");
    h.side(&["kill-pane", "-t", other.as_str()]).expect("kill-pane");
    assert!(!moved(&mut changes, Duration::from_millis(300)).await, "no change told");
}

#[tokio::test]
async fn the_hooks_leave_a_persons_own_alone_and_go_with_the_control_client() {
    let h = TmuxHarness::with_session();
    h.side(&["set-hook", "-g", "after-split-window", "set -g @theirs 1"]).expect("their hook");
    h.tmux.run(&["display", "-p", "x"]).await.expect("connect");
    let hooks = h.side(&["show-hooks", "-g"]).expect("show-hooks");
    let ours = format!("after-split-window[{}] if-shell -F", super::HOOK_INDEX);
    assert!(hooks.contains("after-split-window[0] set-option -g @theirs 1") && hooks.contains(&ours), "{hooks}");
    // Their hook still runs.
    h.side(&["split-window", "-d", "-t", &window_target("main"), "sleep 1000"]).expect("split");
    assert_eq!(h.side(&["show", "-gv", "@theirs"]).expect("their option").trim(), "1");
    // Another real session keeps the server up after ours is shut down.
    h.start_session("theirs", "sleep 1000");
    h.tmux.shutdown_control().await;
    let hooks = h.side(&["show-hooks", "-g"]).expect("show-hooks");
    assert!(hooks.contains("after-split-window[0]") && !hooks.contains(super::TOPOLOGY_WINDOW), "{hooks}");
}

#[tokio::test]
async fn a_hook_left_behind_never_fails_a_persons_split() {
    let h = TmuxHarness::with_session();
    h.tmux.run(&["display", "-p", "x"]).await.expect("connect");
    // The hidden session killed by hand: the hooks stay, naming it.
    h.side(&["kill-session", "-t", &session_target(CONTROL_SESSION)]).expect("kill the hidden session");
    assert!(h.side(&["show-hooks", "-g"]).expect("show-hooks").contains(super::TOPOLOGY_WINDOW));
    h.side(&["split-window", "-d", "-t", &window_target("main"), "sleep 1000"]).expect("the split succeeds");
}
