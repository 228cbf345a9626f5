//! Making, listing and closing sessions; bad input; the server lock and the
//! call log.

use std::time::Duration;

use serde_json::json;

use crate::assert_has;
use crate::support::{SERVER, Server, World, kill_logger, logger_pid, poll, session_text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_named_listed_attached_and_closed() {
    let w = World::new();
    let s = w.server().await;
    let r = s.ok("session_create", json!({})).await;
    assert_has!(r, "session t1 ready");
    assert_has!(r, format!("tmux -L {} attach -t t1", w.socket));
    assert_has!(s.ok("session_create", json!({})).await, "session t2 ready");
    let list = s.ok("session_list", json!({})).await;
    assert_has!(list, "t1: bash");
    assert_has!(list, "t2: bash");
    s.run("t1", "(exit 4)").await;
    assert_has!(s.ok("session_list", json!({})).await, "exit 4");
    assert_has!(s.ok("session_close", json!({"session": "t2"})).await, "closed");
    let list = s.ok("session_list", json!({})).await;
    assert!(!list.contains("t2:"), "{list}");
    // The log of a closed session stays.
    assert!(w.session_dir("t2").join("raw.log").exists());
    assert!(!w.session_dir("t2").join("logger.sock").exists(), "the logger finished");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_killed_or_renamed_with_tmux_are_seen_at_the_next_call() {
    let w = World::new();
    let s = w.server().await;
    s.create("r1").await;
    s.create("r2").await;
    assert!(w.tmux(&["rename-session", "-t", "=r1", "renamed"]).status.success());
    assert_has!(s.run("r1", "echo still-$((40+2))").await, "still-42");
    let list = s.ok("session_list", json!({})).await;
    assert_has!(list, "r1: bash");
    assert_has!(list, format!("tmux -L {} attach -t renamed", w.socket));
    assert!(w.tmux(&["kill-session", "-t", "=r2"]).status.success());
    let gone = s.err("run", json!({"session": "r2", "command": "true"})).await;
    // Its logs are still here: it is named as closed, with how to read them.
    assert_has!(gone, "session \"r2\" is closed (its program ended, or it was closed) (open: r1); read session=r2");
    assert!(!s.ok("session_list", json!({})).await.contains("r2:"));
    // The logs of the killed one stay, and say it is closed.
    assert!(w.session_dir("r2").join("raw.log").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_clearly_and_the_server_keeps_answering() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    assert_has!(s.err("run", json!({"session": "nope", "command": "ls"})).await, "no session named \"nope\"");
    for bad in ["a/b", "..", "a\u{1b}b", "a:1", "=t1", "%1", "t1.0", ""] {
        assert_has!(s.err("session_create", json!({"name": bad})).await, "use letters, digits");
        assert_has!(s.err("run", json!({"session": bad, "command": "ls"})).await, "use letters, digits");
    }
    assert_has!(s.err("run", json!({"session": "t1", "command": "  "})).await, "command is empty");
    assert_has!(s.err("session_create", json!({"name": "t1"})).await, "already open");
    assert_has!(s.err("read", json!({"session": "t1", "view": "bogus"})).await, "not available");
    // A call the schema refuses is refused whole, and nothing is done.
    for args in [json!({"session": "t1", "command": "ls", "bogus": 1}), json!({"session": "t1"})] {
        let r = s.client().call("run", args).await;
        eprintln!("{r:?}");
        assert!(r.is_err() || r.is_ok_and(|r| r.is_error));
    }
    // What does not fit is said of the argument, with what it takes.
    let said = s.err("read", json!({"session": "t1", "from_line": -3})).await;
    assert_has!(said, "`from_line` takes a whole number ≥ 0, not -3. Nothing was done");
    let said = s.err("send", json!({"session": "t1", "keys": "enter"})).await;
    assert_has!(said, "`keys` takes a list, each item a string, not \"enter\"");
    let said = s.err("run", json!({"session": "t1", "command": "ls", "bogus": 1})).await;
    assert_has!(said, "`bogus` is not an argument of run; it takes ");
    assert_has!(s.err("run", json!({"command": "ls"})).await, "run needs `session` (a string)");
    // The server still answers normally, and no stray session was made.
    assert_has!(s.run("t1", "echo still-here").await, "still-here");
    let list = s.ok("session_list", json!({})).await;
    assert_eq!(list.matches("attach:").count(), 1, "{list}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_server_on_the_same_home_is_refused_by_name() {
    let w = World::new();
    let s = w.server().await;
    let out = std::process::Command::new(SERVER)
        .envs(w.env())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("second server");
    assert!(!out.status.success());
    let msg = String::from_utf8_lossy(&out.stderr);
    assert_has!(msg, format!("pid {}", s.pid()));
    assert_has!(msg, "on host");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_are_logged_without_their_input_or_output() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    s.run("t1", "echo secret-value").await;
    s.err("run", json!({"session": "nope", "command": "ls"})).await;
    let log = std::fs::read_to_string(w.home().join("calls.log")).expect("calls.log");
    let lines: Vec<serde_json::Value> = log.lines().map(|l| serde_json::from_str(l).expect("json line")).collect();
    assert_eq!(lines.len(), 3, "{log}");
    assert_eq!(lines[1]["tool"], "run");
    assert_eq!(lines[1]["session"], "t1");
    assert_eq!(lines[1]["ok"], true);
    assert_eq!(lines[2]["ok"], false);
    assert!(lines[1]["ms"].as_f64().is_some());
    assert!(!log.contains("secret-value"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_command_can_be_a_session_and_no_output_is_lost_at_start() {
    let w = World::new();
    let s = w.server().await;
    // The program prints at once; the pane holds it until the logger is
    // attached, so its first line is in the log.
    let r = s.ok("session_create", json!({"name": "p", "command": "echo first-line-$((6*7)); exec cat"})).await;
    assert_has!(r, "session p ready");
    let text = std::fs::read_to_string(w.session_dir("p").join("session.txt")).expect("session.txt");
    assert_has!(text, "first-line-42");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn targets_are_exact_so_similar_names_never_collide() {
    let w = World::new();
    let s = w.server().await;
    s.create("t10").await;
    s.create("t1").await;
    assert_has!(s.run("t1", "echo in-t1").await, "in-t1");
    s.ok("session_close", json!({"session": "t1"})).await;
    // tmux would take "t1" as a prefix of "t10" without the exact form.
    let ls = String::from_utf8_lossy(&w.tmux(&["ls", "-F", "#{session_name}"]).stdout).to_string();
    assert!(ls.lines().any(|l| l == "t10"), "{ls}");
    assert!(!ls.lines().any(|l| l == "t1"), "{ls}");
    assert_has!(s.run("t10", "echo in-t10").await, "in-t10");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_last_session_lets_the_tmux_server_exit() {
    let w = World::new();
    let s = w.server().await;
    s.create("only").await;
    s.run("only", "true").await;
    s.ok("session_close", json!({"session": "only"})).await;
    // The hidden control session must not keep it alive.
    let gone = async || !w.tmux(&["ls"]).status.success();
    poll::until_async("the tmux server to exit", std::time::Duration::from_secs(2), gone).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_logger_is_replaced_and_the_gap_is_recorded_not_skipped() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    s.run("t1", "echo before").await;
    let dir = w.session_dir("t1");
    let pid = kill_logger(&dir);
    // Typed straight into tmux while no logger runs: this output is lost.
    w.tmux(&["send-keys", "-t", "=t1:", "-l", "echo during-the-gap"]);
    w.tmux(&["send-keys", "-t", "=t1:", "Enter"]);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let r = s.run("t1", "echo after").await;
    assert_has!(r, "after");
    let new_pid = logger_pid(&dir).expect("a new logger runs");
    assert_ne!(new_pid, pid);
    let text = session_text(&dir);
    assert_has!(text, "[log gap: output between");
    assert_has!(text, "[end of log gap]");
    assert!(dir.join("gaps.jsonl").exists());
    // The reply of the call that found the gap (or the watchdog's note on
    // the next one) says so.
    let note_seen = r.contains("log gap") || s.run("t1", "true").await.contains("log gap");
    assert!(note_seen, "{r}");
    // The new logger still knows which markers it has seen: replaying the
    // log must not end the replaying command early.
    let raw = dir.join("raw.log");
    let r = s
        .run("t1", &format!("cat {} >/dev/null; cat {}; sleep 0.2; echo replayed-ok", raw.display(), raw.display()))
        .await;
    assert_has!(r, "exit 0");
    assert_has!(r, "replayed-ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_names_the_foreground_program_and_its_directory_as_tmux_does() {
    let w = World::new();
    let s = w.server().await;
    s.create("fg").await;
    let dir = w.tmp.path().join("deeper dir");
    std::fs::create_dir_all(&dir).expect("dir");
    let line = format!("cd '{}' && exec -a -sleeper sleep 30", dir.display());
    // A shell that runs a program in its place, under a login-style name.
    s.ok("run", json!({"session": "fg", "command": format!("bash -c \"{line}\""), "timeout": 0.5})).await;
    let said = |fmt: &str| {
        let out = w.tmux(&["display", "-p", "-t", "=fg:", fmt]);
        String::from_utf8_lossy(&out.stdout).trim_end().to_string()
    };
    let facts = poll::until_async("sleeper in the list", std::time::Duration::from_secs(10), async || {
        let listed = s.call("session_list", json!({})).await;
        let row = listed.structured.unwrap_or_default()["sessions"][0].clone();
        match row["program"] == "sleeper" {
            true => Ok(row),
            false => Err(row),
        }
    })
    .await;
    assert_eq!(facts["program"], said("#{pane_current_command}"), "{facts}");
    assert_eq!(facts["cwd"], said("#{pane_current_path}"), "{facts}");
    assert_eq!(facts["cwd"], dir.canonicalize().expect("canonical").display().to_string());
    assert_has!(s.ok("session_list", json!({})).await, "fg: sleeper in ");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_follows_what_an_agent_or_a_person_does_at_a_prompt_it_listed_before() {
    // A listing keeps a resting pane's command and directory for the next
    // (see `src/tools/sessions/currents.rs`): each step waits until the
    // logger has the shell's prompt and lists twice, so the second listing
    // of a step uses what the first kept, and the next step's change must
    // get past that.
    let w = World::new();
    let s = w.server().await;
    s.create("moves").await;
    let place = |name: &str| {
        let dir = w.tmp.path().join(name);
        std::fs::create_dir_all(&dir).expect("dir");
        dir.canonicalize().expect("canonical").display().to_string()
    };
    let (by_agent, by_person) = (place("by agent"), place("by person"));
    let said = |fmt: &str| {
        let out = w.tmux(&["display", "-p", "-t", "=moves:", fmt]);
        String::from_utf8_lossy(&out.stdout).trim_end().to_string()
    };
    let types = |keys: &str| {
        assert!(w.tmux(&["send-keys", "-t", "=moves:", "-l", keys]).status.success(), "{keys}");
        assert!(w.tmux(&["send-keys", "-t", "=moves:", "Enter"]).status.success());
    };
    let logged = || log_len(&w, "moves");
    until_prompt_since(&w, "moves", 0);
    for _ in 0..2 {
        let row = first_row(&s).await;
        assert_eq!((&row["program"], &row["cwd"]), (&json!("bash"), &json!(said("#{pane_current_path}"))), "{row}");
    }
    // An agent moves the shell.
    let from = logged();
    s.run("moves", &format!("cd '{by_agent}'")).await;
    until_prompt_since(&w, "moves", from);
    for _ in 0..2 {
        assert_eq!(first_row(&s).await["cwd"], by_agent);
    }
    // A person moves it, typing straight into the pane.
    let from = logged();
    types(&format!("cd '{by_person}'"));
    until_prompt_since(&w, "moves", from);
    for _ in 0..2 {
        let row = first_row(&s).await;
        assert_eq!((&row["program"], &row["cwd"]), (&json!("bash"), &json!(by_person)), "{row}");
    }
    // A person starts a program that, writing nothing, runs another in
    // its place: the first is listed, then the one that replaced it.
    let from = logged();
    types("sh -c 'sleep 2; exec sleep 30'");
    poll::until("the command started in the log", Duration::from_secs(5), || {
        log_since(&w, "moves", from).contains("\u{1b}]133;C;")
    });
    poll::until("tmux to see sh", Duration::from_secs(5), || said("#{pane_current_command}") == "sh");
    let row = first_row(&s).await;
    assert!(row["program"] == "sh" || row["program"] == "sleep", "{row}");
    let row = poll::until_async("sleep in the list", Duration::from_secs(10), async || {
        let row = first_row(&s).await;
        if row["program"] == "sleep" { Ok(row) } else { Err(row) }
    })
    .await;
    assert_eq!(row["cwd"], by_person, "{row}");
    assert_has!(s.ok("session_list", json!({})).await, format!("moves: sleep in {by_person}"));
}

/// The row of the first session in a listing.
async fn first_row(s: &Server) -> serde_json::Value {
    let listed = s.call("session_list", json!({})).await;
    listed.structured.unwrap_or_default()["sessions"][0].clone()
}

/// The length of session `name`'s `raw.log`.
fn log_len(w: &World, name: &str) -> usize {
    std::fs::metadata(w.session_dir(name).join("raw.log")).map_or(0, |m| m.len() as usize)
}

/// What session `name`'s `raw.log` holds past its first `from` bytes.
fn log_since(w: &World, name: &str, from: usize) -> String {
    let raw = std::fs::read(w.session_dir(name).join("raw.log")).unwrap_or_default();
    String::from_utf8_lossy(raw.get(from..).unwrap_or_default()).into_owned()
}

/// Waits (up to 5 s) until session `name`'s log has a prompt drawn past
/// its first `from` bytes, and nothing after it: the shell rests there and
/// its logger has the prompt (OSC 133 `A` starts it, `B` ends it).
fn until_prompt_since(w: &World, name: &str, from: usize) {
    poll::until("a prompt at the end of the log", Duration::from_secs(5), || {
        let text = log_since(w, name, from);
        let last = text.rsplit("\u{1b}]133;").next().unwrap_or_default();
        let ends_it = last.starts_with("B;") && last.ends_with('\u{7}') && !last.contains('\u{1b}');
        if text.contains("\u{1b}]133;A;") && ends_it { Ok(()) } else { Err(format!("{text:?}")) }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pane_kept_after_its_shell_exited_is_listed_as_exited() {
    let w = World::new();
    let s = w.server().await;
    s.create("kept").await;
    let set = w.tmux(&["set-option", "-w", "-t", "=kept:", "remain-on-exit", "on"]);
    assert!(set.status.success(), "{}", String::from_utf8_lossy(&set.stderr));
    let shell = w.tmux(&["display", "-p", "-t", "=kept:", "#{pane_pid}"]);
    let pid: i32 = String::from_utf8_lossy(&shell.stdout).trim().parse().expect("pane pid");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL).expect("kill the shell");
    let row = poll::until_async("the pane listed as exited", std::time::Duration::from_secs(10), async || {
        let listed = s.call("session_list", json!({})).await;
        let row = listed.structured.unwrap_or_default()["sessions"][0].clone();
        match row["exited"] == true {
            true => Ok(row),
            false => Err(row),
        }
    })
    .await;
    assert_eq!(row["name"], "kept", "{row}");
    assert_eq!(row["program"], "", "{row}");
    assert_has!(s.ok("session_list", json!({})).await, "kept: its process exited");
}
