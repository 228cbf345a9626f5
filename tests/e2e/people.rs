//! The command line for people (`ls`, `tail`, `show`, `regions`, `search`,
//! `watch`, `attach`; `completions` and `man` are in `cli.rs`), run as a subprocess with the
//! world's environment against real sessions: open, closed, with a log
//! gap, with a person attached; `--json` parsed, exit statuses, colour
//! only on a terminal and never with `NO_COLOR`.

use std::io::{BufRead, Read};
use std::os::fd::AsFd;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::assert_has;
use crate::support::{Person, Pty, SERVER, World, cli, cli_with, logger_pid, poll};

/// Runs the command line and parses its stdout as JSON; it must succeed.
fn json_of(w: &World, args: &[&str]) -> Value {
    let ran = cli(w, args);
    assert_eq!(ran.code, 0, "{args:?} failed: {}", ran.stderr);
    serde_json::from_str(&ran.stdout).unwrap_or_else(|e| panic!("{args:?} gave no JSON ({e}): {}", ran.stdout))
}

/// The session called `name` in an `ls --json` array.
fn entry<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("{name} is not listed: {list:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ls_tells_open_closed_waiting_running_gaps_people_and_agents() {
    let w = World::new();
    let s = w.server().await;
    for name in ["p1", "p2", "p3", "p4", "p5"] {
        s.create(name).await;
    }
    s.run("p1", "echo hello; false").await;
    let r = s.ok("run", json!({"session": "p2", "command": "sleep 30", "timeout": 0.3})).await;
    assert_has!(r, "still running");
    s.ok("run", json!({"session": "p3", "command": "read -r -p 'name? ' answer", "timeout": 0.5})).await;
    s.ok("session_close", json!({"session": "p4"})).await;
    // A log gap in p5: its logger dies; the server's watchdog starts a new one.
    let dir = w.session_dir("p5");
    let dead = crate::support::kill_logger(&dir);
    poll::until("a new logger of p5 and its gap", Duration::from_secs(15), || {
        logger_pid(&dir).is_some_and(|p| p != dead) && dir.join("gaps.jsonl").exists()
    });
    let _person = Person::attach(&w, "p1");

    let list = json_of(&w, &["ls", "--json"]);
    let names: Vec<&str> = list.as_array().expect("array").iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(names, ["p1", "p2", "p3", "p5"], "a closed session is left out without --all");
    let p1 = entry(&list, "p1");
    assert_eq!(p1["state"], "idle", "{p1:#}");
    assert_eq!((p1["last_command"].as_str(), p1["last_exit"].as_i64()), (Some("echo hello; false"), Some(1)));
    assert_eq!(p1["people"].as_array().map(Vec::len), Some(1), "the person attached: {p1:#}");
    assert!(p1["people"][0]["tty"].as_str().is_some_and(|t| t.starts_with("/dev/")), "{p1:#}");
    assert_eq!(p1["agents"][0]["name"], "dtmcp-test-client", "{p1:#}");
    assert!(p1["agents"][0]["typed_ms"].as_u64().is_some_and(|t| t > 0));
    assert!(p1["log_bytes"].as_u64().is_some_and(|b| b > 0) && !p1["host"].as_str().unwrap_or("").is_empty());
    assert_eq!(p1["logger"], "ok");
    assert_eq!(p1["attach"], format!("tmux -L {} attach -t =p1", w.socket));
    let p2 = entry(&list, "p2");
    assert_eq!((p2["state"].as_str(), p2["command"].as_str()), (Some("running"), Some("sleep 30")), "{p2:#}");
    assert_eq!(p2["program"], "sleep");
    assert_eq!(p2["started_by"], "dtmcp-test-client");
    let p3 = entry(&list, "p3");
    assert_eq!(p3["state"], "waiting", "{p3:#}");
    assert!(p3["command"].as_str().is_some_and(|c| c.starts_with("read")), "{p3:#}");
    let p5 = entry(&list, "p5");
    assert!(p5["gaps"].as_u64().is_some_and(|g| g >= 1), "{p5:#}");
    assert_eq!(p5["people"], json!([]));

    let all = json_of(&w, &["ls", "--all", "--json"]);
    let p4 = entry(&all, "p4");
    assert_eq!((p4["state"].as_str(), p4["logger"].as_str()), (Some("closed"), Some("none")), "{p4:#}");
    assert!(p4["attach"].is_null() && p4["since_ms"].as_u64().is_some());
    let waiting = json_of(&w, &["ls", "--state", "waiting", "--json"]);
    assert_eq!(waiting.as_array().map(|a| a.iter().map(|s| s["name"].clone()).collect()), Some(vec![json!("p3")]));
    let some = json_of(&w, &["ls", "--state", "running,closed", "--json"]);
    let names: Vec<&str> = some.as_array().expect("array").iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(names, ["p2", "p4"]);

    // In a pipe: one line per session, no heading, no escape codes.
    let plain = cli(&w, &["ls", "--all"]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    let lines: Vec<&str> = plain.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{}", plain.stdout);
    assert!(lines[0].starts_with("p1 ") && lines[0].contains("at the prompt") && lines[0].contains("(exit 1)"));
    assert!(lines[1].contains("running: sleep 30"), "{}", lines[1]);
    assert!(lines[2].contains("waiting for input: read"), "{}", lines[2]);
    assert!(lines[3].contains("closed") && lines[4].contains("1 gap"), "{}", plain.stdout);
    assert!(!plain.stdout.contains('\x1b'));
    let bad = cli(&w, &["ls", "--state", "sleepy"]);
    assert_eq!(bad.code, 2, "a bad state is a usage error: {}", bad.stderr);
    assert_has!(bad.stderr, "possible values");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_prints_numbered_lines_then_follows_a_new_line_within_200_ms() {
    let w = World::new();
    let s = w.server().await;
    s.create("f1").await;
    s.run("f1", "seq 1 30").await;
    let tail = cli(&w, &["tail", "-n", "5", "f1"]);
    assert_eq!(tail.code, 0, "{}", tail.stderr);
    let lines: Vec<(u64, String)> = tail
        .stdout
        .lines()
        .map(|l| {
            let (n, text) = l.trim_start().split_once("  ").expect("a numbered line");
            (n.parse().expect("a number"), text.to_string())
        })
        .collect();
    assert_eq!(lines.len(), 5, "{}", tail.stdout);
    assert_eq!(lines.last().map(|l| l.1.as_str()), Some("30"));
    assert!(lines.windows(2).all(|p| p[1].0 == p[0].0 + 1), "consecutive numbers: {}", tail.stdout);

    let mut follow = Command::new(SERVER)
        .args(["tail", "-f", "-n", "1", "f1"])
        .envs(w.env())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tail -f");
    let seen: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    let (stdout, sink) = (follow.stdout.take().expect("stdout"), seen.clone());
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            sink.lock().expect("sink").push((Instant::now(), line));
        }
    });
    poll::until("tail -f to print the last line", Duration::from_secs(10), || {
        seen.lock().expect("seen").iter().any(|(_, l)| l.ends_with("  30"))
    });
    // A line printed after it started: typed straight into the pane; the
    // clock runs from before the keys are sent.
    let sent = Instant::now();
    let typed = w.tmux(&["send-keys", "-t", "=f1:", "echo tailed-$((6*7))", "Enter"]);
    assert!(typed.status.success());
    poll::until("the new line in tail -f", Duration::from_secs(10), || {
        seen.lock().expect("seen").iter().any(|(_, l)| l.ends_with("  tailed-42"))
    });
    let arrived = seen.lock().expect("seen").iter().find(|(_, l)| l.ends_with("  tailed-42")).map(|(t, _)| *t);
    let latency = arrived.expect("arrived").duration_since(sent);
    eprintln!("tail -f: a new line shown {latency:?} after it was typed");
    assert!(latency < Duration::from_millis(200), "tail -f took {latency:?}");

    // The person's command has ended (its line came before its end
    // marker): the session closes, and tail -f ends by itself, cleanly.
    poll::until_async("the typed command to end", Duration::from_secs(10), async || {
        let list = s.regions("f1").await;
        match list.lines().any(|l| l.contains("tailed-$((6*7))") && l.contains("exit 0")) {
            true => Ok(()),
            false => Err(list),
        }
    })
    .await;
    s.ok("session_close", json!({"session": "f1"})).await;
    let status =
        poll::until("tail -f to end with its session", Duration::from_secs(10), || follow.try_wait().expect("wait"));
    let mut stderr = String::new();
    let _ = follow.stderr.take().expect("stderr").read_to_string(&mut stderr);
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_has!(stderr, "f1: the session closed");
    // A closed session still tails, and -f says nothing more will come.
    let closed = cli(&w, &["tail", "-f", "-n", "3", "f1"]);
    assert_eq!(closed.code, 0, "{}", closed.stderr);
    assert_eq!(closed.stdout.lines().count(), 3);
    assert_has!(closed.stderr, "closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_f_ends_on_ctrl_c_and_marks_a_log_gap() {
    let w = World::new();
    let s = w.server().await;
    s.create("g1").await;
    let mut follow = Command::new(SERVER)
        .args(["tail", "-f", "g1"])
        .envs(w.env())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tail -f");
    let out: Arc<Mutex<String>> = Arc::default();
    let (mut stdout, sink) = (follow.stdout.take().expect("stdout"), out.clone());
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().expect("sink").push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    s.run("g1", "echo before-$((1+1))").await;
    poll::until("the line before the gap", Duration::from_secs(10), || out.lock().expect("out").contains("before-2"));
    let dir = w.session_dir("g1");
    let dead = crate::support::kill_logger(&dir);
    poll::until("a new logger", Duration::from_secs(15), || logger_pid(&dir).is_some_and(|p| p != dead));
    s.run("g1", "echo after-$((1+2))").await;
    poll::until("the gap and the line after it", Duration::from_secs(15), || {
        let text = out.lock().expect("out").clone();
        text.contains("[log gap:") && text.contains("after-3")
    });
    let text = out.lock().expect("out").clone();
    assert!(text.find("before-2") < text.find("[log gap:") && text.find("[log gap:") < text.rfind("after-3"), "{text}");
    assert!(!text.contains('\x1b'), "no colour in a pipe");
    // ctrl+c: a clean end, at once.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(follow.id() as i32), nix::sys::signal::Signal::SIGINT)
        .expect("SIGINT");
    let status = poll::until("tail -f to end on ctrl+c", Duration::from_secs(5), || follow.try_wait().expect("wait"));
    let mut stderr = String::new();
    let _ = follow.stderr.take().expect("stderr").read_to_string(&mut stderr);
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_has!(stderr, "following again once a logger answers");
    assert_has!(stderr, "a logger answers again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_and_regions_give_headers_outputs_and_json_for_open_and_closed_sessions() {
    let w = World::new();
    let s = w.server().await;
    s.create("r1").await;
    s.run("r1", "echo one").await;
    s.run("r1", "sh -c 'echo bad; echo worse; exit 3'").await;
    s.run("r1", "echo two").await;

    let regions = json_of(&w, &["regions", "r1", "--json"]);
    let list = regions.as_array().expect("array");
    assert_eq!(list.len(), 3, "{regions:#}");
    let exits: Vec<i64> = list.iter().filter_map(|r| r["exit"].as_i64()).collect();
    assert_eq!(exits, [0, 3, 0]);
    assert!(list.iter().all(|r| r["status"] == "finished" && r["started_by"] == "dtmcp-test-client"), "{regions:#}");
    assert_eq!(list[1]["command"], "sh -c 'echo bad; echo worse; exit 3'");
    assert!(list[1]["last_line"].as_u64() > list[1]["first_line"].as_u64(), "{:#}", list[1]);
    let failed = cli(&w, &["regions", "r1", "--failed"]);
    assert_eq!(failed.code, 0, "{}", failed.stderr);
    assert_eq!(failed.stdout.lines().count(), 1, "{}", failed.stdout);
    assert_has!(failed.stdout, "exit 3");
    assert_eq!(json_of(&w, &["regions", "r1", "--last", "1", "--json"])[0]["command"], "echo two");

    let shown = cli(&w, &["show", "r1", "--failed"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(shown.stdout.starts_with("region 2 of r1: sh -c 'echo bad; echo worse; exit 3'\n"), "{}", shown.stdout);
    for part in ["status:   exit 3", "typed by: dtmcp-test-client", "took:", "where:", "\n\nbad\nworse\n"] {
        assert_has!(shown.stdout, part);
    }
    assert_eq!(cli(&w, &["show", "r1", "--failed", "--no-header"]).stdout, "bad\nworse\n");
    assert_eq!(cli(&w, &["show", "r1", "--no-header"]).stdout, "two\n", "the last command by default");
    let numbered = cli(&w, &["show", "r1", "1", "-n", "--no-header"]).stdout;
    assert!(numbered.trim_start().split_once("  ").is_some_and(|(n, t)| n.parse::<u64>().is_ok() && t == "one\n"));
    let missing = cli(&w, &["show", "r1", "9"]);
    assert_eq!(missing.code, 1);
    assert_has!(missing.stderr, "r1 has no region 9");
    let both = cli(&w, &["show", "r1", "2", "--failed"]);
    assert_eq!(both.code, 2, "a region and --failed are a usage error");

    // Closed, the same answers come from its files.
    s.ok("session_close", json!({"session": "r1"})).await;
    assert_eq!(cli(&w, &["show", "r1", "--failed", "--no-header"]).stdout, "bad\nworse\n");
    assert_eq!(json_of(&w, &["regions", "r1", "--json"]).as_array().map(Vec::len), Some(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_exits_like_grep_and_gives_json() {
    let w = World::new();
    let s = w.server().await;
    s.create("s1").await;
    s.run("s1", "printf 'alpha\\nbeta\\ngamma\\n'").await;
    let hit = cli(&w, &["search", "s1", "^beta$"]);
    assert_eq!(hit.code, 0, "{}", hit.stderr);
    let line = hit.stdout.trim_end();
    assert!(line.split_once(':').is_some_and(|(n, t)| n.parse::<u64>().is_ok() && t == "beta"), "{}", hit.stdout);
    let none = cli(&w, &["search", "s1", "^zzz"]);
    assert_eq!((none.code, none.stdout.as_str(), none.stderr.as_str()), (1, "", ""), "no match: 1, silently");
    let bad = cli(&w, &["search", "s1", "a("]);
    assert_eq!(bad.code, 2);
    assert_has!(bad.stderr, "invalid pattern");
    assert_eq!(cli(&w, &["search", "s1", "-c", "-i", "^(ALPHA|gamma)$"]).stdout, "2\n");

    let answer = json_of(&w, &["search", "s1", "-C", "1", "--json", "^beta$"]);
    assert_eq!((answer["session"].as_str(), answer["matches"].as_u64()), (Some("s1"), Some(1)), "{answer:#}");
    let lines = answer["lines"].as_array().expect("lines");
    let texts: Vec<&str> = lines.iter().filter_map(|l| l["text"].as_str()).collect();
    assert_eq!(texts, ["alpha", "beta", "gamma"]);
    let hit = &lines[1];
    assert_eq!((hit["match"].as_bool(), hit["region"].as_u64()), (Some(true), Some(1)), "{hit:#}");
    let region = cli(&w, &["search", "s1", "--region", "1", "-c", "a"]);
    assert_eq!(region.stdout, "3\n", "only the region's output, not the echoed command: {}", region.stderr);
    let unknown = cli(&w, &["search", "nope", "x"]);
    assert_eq!(unknown.code, 1);
    assert_has!(unknown.stderr, "no session named \"nope\"");
    assert_has!(unknown.stderr, "open: s1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_redraws_on_a_change_quits_with_q_and_gives_the_terminal_back() {
    let w = World::new();
    let s = w.server().await;
    s.create("w1").await;
    let mut screen = Pty::start(SERVER, &["watch"], &w.env());
    screen.wait_for("w1", 0, Duration::from_secs(10));
    screen.wait_for("at the prompt", 0, Duration::from_secs(10));
    let before = nix::sys::termios::tcgetattr(screen.slave().as_fd()).expect("mode");
    assert!(!before.local_flags.contains(nix::sys::termios::LocalFlags::ICANON), "raw mode while it runs");
    let from = screen.len();
    s.run("w1", "echo watched-$((2+3))").await;
    let ran = Instant::now();
    // Well before the slow tick would (it comes up to TICK after the last
    // draw): the logger said so.
    screen.wait_for("echo watched-$((2+3))", from, Duration::from_secs(10));
    let redrawn = ran.elapsed();
    eprintln!("watch: redrawn {redrawn:?} after the command finished");
    assert!(redrawn < dtmcp::people::watch::TICK / 3, "redrawn after {redrawn:?}, as the tick would");
    screen.types("q");
    assert_eq!(screen.exit_code(Duration::from_secs(5)), 0, "{}", screen.text());
    // The pty's last bytes may reach the reader thread after the exit.
    screen.wait_for("\x1b[?1049l", 0, Duration::from_secs(5));
    let text = screen.text();
    let tail: String = text.chars().rev().take(80).collect::<Vec<_>>().into_iter().rev().collect();
    assert!(text.contains("\x1b[?1049h") && text.ends_with("\x1b[?1049l"), "the alternate screen is left: {tail:?}");
    let after = nix::sys::termios::tcgetattr(screen.slave().as_fd()).expect("mode");
    assert!(after.local_flags.contains(nix::sys::termios::LocalFlags::ICANON), "the terminal's mode is back");

    // Not a terminal: the list once.
    let once = cli(&w, &["watch"]);
    assert_eq!(once.code, 0, "{}", once.stderr);
    assert!(once.stdout.starts_with("w1 ") && !once.stdout.contains('\x1b'), "{}", once.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colour_only_on_a_terminal_and_never_with_no_color() {
    let w = World::new();
    let s = w.server().await;
    s.create("c1").await;
    s.run("c1", "false").await;
    let coloured = Pty::start(SERVER, &["ls"], &w.env());
    coloured.wait_for("c1", 0, Duration::from_secs(10));
    let mut coloured = coloured;
    assert_eq!(coloured.exit_code(Duration::from_secs(10)), 0);
    assert!(coloured.text().contains("\x1b[1mNAME"), "a heading, painted: {:?}", coloured.text());
    let mut env = w.env();
    env.push(("NO_COLOR".into(), "1".into()));
    let mut plain = Pty::start(SERVER, &["ls"], &env);
    plain.wait_for("c1", 0, Duration::from_secs(10));
    assert_eq!(plain.exit_code(Duration::from_secs(10)), 0);
    let text = plain.text();
    assert!(text.contains("NAME") && text.contains("c1"), "{text:?}");
    assert!(!text.contains('\x1b'), "NO_COLOR: {text:?}");
    let mut env = w.env();
    env.push(("NO_COLOR".into(), "1".into()));
    let mut regions = Pty::start(SERVER, &["regions", "c1"], &env);
    regions.wait_for("false", 0, Duration::from_secs(10));
    assert_eq!(regions.exit_code(Duration::from_secs(10)), 0);
    assert!(!regions.text().contains('\x1b') && regions.text().contains("exit 1"), "{:?}", regions.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_runs_tmux_attach_with_the_prefix() {
    let w = World::new();
    let s = w.server().await;
    s.create("a1").await;
    let print = cli(&w, &["attach", "--print", "a1"]);
    assert_eq!(print.stdout, format!("tmux -L {} attach -t =a1\n", w.socket));
    let prefixed =
        cli_with(&w, &[("DOCENT_TERMINAL_MCP_ATTACH_PREFIX", "env DTMCP_X=1")], &["attach", "--print", "a1"]);
    assert_eq!(prefixed.stdout, format!("env DTMCP_X=1 tmux -L {} attach -t =a1\n", w.socket));
    let mut env = w.env();
    env.push(("DOCENT_TERMINAL_MCP_ATTACH_PREFIX".into(), "env DTMCP_X=1".into()));
    let _person = Pty::start(SERVER, &["attach", "a1"], &env);
    poll::until("the attach to show as a client", Duration::from_secs(10), || {
        let out = w.tmux(&["list-clients", "-t", "=a1", "-F", "#{client_tty}"]);
        !String::from_utf8_lossy(&out.stdout).trim().is_empty()
    });
    let list = json_of(&w, &["ls", "--json"]);
    assert_eq!(entry(&list, "a1")["people"].as_array().map(Vec::len), Some(1));
    let closed = cli(&w, &["close", "--force", "a1"]);
    assert_eq!(closed.code, 0, "{}", closed.stderr);
    let closed = cli(&w, &["attach", "a1"]);
    assert_eq!(closed.code, 1);
    assert_has!(closed.stderr, "a1 is closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_server_unknown_sessions_are_named_and_nothing_starts_tmux() {
    let w = World::new();
    let empty = cli(&w, &["ls", "--all", "--json"]);
    assert_eq!((empty.code, empty.stdout.trim()), (0, "[]"), "{}", empty.stderr);
    assert_eq!(cli(&w, &["ls"]).stdout, "");
    for args in [&["tail", "t9"][..], &["show", "t9"], &["regions", "t9"], &["search", "t9", "x"], &["attach", "t9"]] {
        let ran = cli(&w, args);
        assert_eq!(ran.code, 1, "{args:?}: {}", ran.stderr);
        assert_has!(ran.stderr, "no session named \"t9\" here, open or closed");
        assert_eq!(ran.stdout, "");
    }
    let bad = cli(&w, &["show", "../etc"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert_has!(bad.stderr, "session name");
    let usage = cli(&w, &["tail"]);
    assert_eq!(usage.code, 2);
    assert!(
        !dtmcp::tmux::socket_path(&w.socket).exists(),
        "a command of the people's command line started a tmux server"
    );
    assert!(!w.home().join("sessions").exists(), "nothing was written into the state home");
}
