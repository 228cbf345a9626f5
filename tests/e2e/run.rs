//! `run`, `wait` and `read` on an integrated bash.

use std::time::Instant;

use serde_json::json;

use crate::assert_has;
use crate::support::World;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_statuses_and_pipelines_are_exact() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let r = s.run("t1", "echo hello").await;
    assert_has!(r, "exit 0");
    assert_has!(r, "hello");
    assert!(!r.contains("echo hello"), "the echoed command is not output:\n{r}");
    assert_has!(s.run("t1", "false").await, "exit 1");
    assert_has!(s.run("t1", "(exit 3)").await, "exit 3");
    let r = s.run("t1", "true | false").await;
    assert_has!(r, "exit 1");
    assert_has!(r, "pipeline: 0 1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shell_keeps_its_directory_between_runs() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let dir = w.tmp.path().join("here");
    std::fs::create_dir(&dir).expect("mkdir");
    s.run("t1", &format!("cd {}", dir.display())).await;
    assert_has!(s.run("t1", "pwd").await, dir.display().to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_output_is_clipped_but_every_line_can_be_read() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let r = s.run("t1", "seq 1 5000").await;
    assert_has!(r, "5000 lines of output");
    assert_has!(r, "lines not shown");
    assert!(r.len() < 2000, "the reply should be small, got {} bytes", r.len());
    // The gap line names the range; read it back exactly.
    let region = r.split("region ").nth(1).and_then(|t| t.split_whitespace().next()).expect("region id");
    let all = s.ok("read", json!({"session": "t1", "region": region.parse::<u64>().expect("number")})).await;
    let first_line: u64 = all
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("numbered line");
    let page =
        s.ok("read", json!({"session": "t1", "from_line": first_line + 2000, "to_line": first_line + 2009})).await;
    let values: Vec<&str> = page.lines().skip(1).map(|l| l.split_whitespace().nth(1).unwrap_or("")).collect();
    let expected: Vec<String> = (2001..=2010).map(|n| n.to_string()).collect();
    assert_eq!(values, expected, "{page}");
    // Pages of 400 cover the whole output.
    let mut seen = 0u64;
    let mut from = first_line;
    while seen < 5000 {
        let page = s.ok("read", json!({"session": "t1", "from_line": from, "to_line": first_line + 4999})).await;
        let n = page.lines().skip(1).filter(|l| !l.starts_with('…')).count() as u64;
        assert!(n > 0, "{page}");
        seen += n;
        from += n;
    }
    assert_eq!(seen, 5000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_and_replayed_markers_are_plain_output() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    // A forged "finished" marker in the middle of a command must not end it.
    let forged = r"printf '\033]133;D;7;dtmcp=1.99999999999999.12345\007'; sleep 0.3; echo after";
    let r = s.run("t1", forged).await;
    assert_has!(r, "exit 0");
    assert_has!(r, "after");
    // Replaying the session's own log repeats valid-looking markers with old
    // sequence numbers; they must change nothing.
    let raw = w.session_dir("t1").join("raw.log");
    let r = s.run("t1", &format!("cat {} >/dev/null; cat {}; echo replayed", raw.display(), raw.display())).await;
    assert_has!(r, "exit 0");
    assert_has!(r, "replayed");
    let r = s.run("t1", "echo next").await;
    assert_has!(r, "exit 0");
    assert_has!(r, "next");
    assert!(!r.contains("replayed"), "the replay must not confuse the next command:\n{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_leaves_the_command_running_and_wait_picks_it_up() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let r = s.ok("run", json!({"session": "t1", "command": "sleep 1; echo woke", "timeout": 0.2})).await;
    assert_has!(r, "still running");
    assert_has!(r, "wait session=t1");
    let r = s.ok("wait", json!({"session": "t1", "timeout": 10})).await;
    assert_has!(r, "exit 0");
    assert_has!(r, "woke");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_goes_on_after_the_lines_the_last_reply_showed() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let cmd = "echo alpha; echo beta; sleep 1.5; echo gamma; sleep 0.5; echo delta";
    let r = s.ok("run", json!({"session": "t1", "command": cmd, "timeout": 0.5})).await;
    assert_has!(r, "still running");
    assert_has!(r, "alpha\nbeta");
    // Nothing new yet: said so, with where the earlier lines are.
    let r = s.ok("wait", json!({"session": "t1", "timeout": 0.2})).await;
    assert_has!(r, "were in an earlier reply; read session=t1 from_line=");
    assert_has!(r, "(no new output)");
    assert!(!r.contains("alpha"), "{r}");
    let r = s.ok("wait", json!({"session": "t1", "until": "gamma", "timeout": 10})).await;
    assert_has!(r, "gamma");
    assert!(!r.contains("beta"), "{r}");
    let r = s.ok("wait", json!({"session": "t1", "timeout": 10})).await;
    assert_has!(r, "exit 0");
    assert_has!(r, "delta");
    assert!(!r.contains("gamma"), "{r}");
    // The lines it points at are the ones left out.
    let from = r.split("from_line=").nth(1).and_then(|t| t.split_whitespace().next()).expect("from_line");
    let to = r.split("to_line=").nth(1).and_then(|t| t.split_whitespace().next()).expect("to_line");
    let args = json!({"session": "t1", "from_line": from.parse::<u64>().expect("n"), "to_line": to.parse::<u64>().expect("n")});
    let earlier = s.ok("read", args).await;
    assert_has!(earlier, "alpha");
    assert_has!(earlier, "gamma");
    // A shaped reply, and the next command, show their whole output.
    let r = s.ok("run", json!({"session": "t1", "command": "echo one; sleep 0.8; echo two", "timeout": 0.3})).await;
    assert_has!(r, "one");
    let r = s.ok("wait", json!({"session": "t1", "last_lines": 5, "timeout": 10})).await;
    assert_has!(r, "one");
    assert_has!(r, "two");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_of_128_plus_a_signal_names_the_signal() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let r = s.call("run", json!({"session": "t1", "command": "bash -c 'kill -SEGV $$'"})).await;
    assert_has!(r.text, "exit 139 (SIGSEGV: segmentation fault)");
    let facts = r.structured.expect("structuredContent");
    assert_eq!((facts["exit_code"].as_i64(), facts["signal"].as_str()), (Some(139), Some("SIGSEGV")), "{facts}");
    let r = s.call("run", json!({"session": "t1", "command": "(exit 3)"})).await;
    let facts = r.structured.expect("structuredContent");
    assert_eq!((facts["exit_code"].as_i64(), facts.get("signal")), (Some(3), None), "{facts}");
    assert_has!(s.ok("regions", json!({"session": "t1"})).await, "exit 139 (SIGSEGV) ·");
    // ctrl+z stops a command rather than ending it: the shell keeps it.
    let r = s.ok("run", json!({"session": "t1", "command": "sleep 30", "timeout": 0.5})).await;
    assert_has!(r, "still running");
    let r = s.ok("send", json!({"session": "t1", "keys": ["ctrl+z"], "wait": 0.5})).await;
    assert_has!(r, "`sleep 30` (region 3) was stopped: exit 148 (SIGTSTP: stopped, as by ctrl+z");
    s.ok("run", json!({"session": "t1", "command": "kill %1"})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continuation_prompt_takes_the_next_line_at_once() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    // Each line of a heredoc goes in as soon as the shell asks for more,
    // at its continuation prompt: no wait for a primary prompt that is not
    // coming (that was 2 s a line), nor for the output to go quiet (250 ms).
    let body: Vec<String> = (1..=30).map(|i| format!("line {i}")).collect();
    let command = format!("cat <<'X'\n{}\nX", body.join("\n"));
    let started = std::time::Instant::now();
    let r = s.ok("run", json!({"session": "t1", "command": command})).await;
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "took {:?}:\n{r}", started.elapsed());
    // The lines that went in say so, and only the whole command reports.
    assert_has!(r, "$ cat <<'X'\n$ line 1\n$ line 2\n");
    assert_has!(r, "$ line 30\n$ X\nexit 0");
    assert_has!(r, "line 30");
    assert!(!r.contains("nothing ran") && !r.contains("no shell integration"), "{r}");
    // A command left open says so, as data too.
    let r = s.call("run", json!({"session": "t1", "command": "if true; then\necho in-if"})).await;
    assert_has!(r.text, "the shell waits for the rest of the command at its continuation prompt `>`");
    assert!(!r.text.contains("no shell integration"), "{}", r.text);
    let facts = r.structured.expect("structuredContent");
    assert_eq!(facts["state"], "waiting_for_input", "{facts}");
    let r = s.ok("run", json!({"session": "t1", "command": "fi"})).await;
    assert_has!(r, "exit 0");
    assert_has!(r, "in-if");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_jobs_line_after_the_prompt_is_no_typing() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let r = s.run("t1", "(sleep 0.3; echo said-in-the-back$((1+1))) &").await;
    // A subshell is named by what it runs, not as a copy of the shell.
    // (It may not have started `sleep` yet: then it is `( subshell )`.)
    assert_has!(r, "running in the background: pid ");
    assert!(r.contains("`( sleep 0.3 … )`") || r.contains("`( subshell )`"), "{r}");
    w.until_on_screen("t1", "said-in-the-back2");
    let r = s.ok("run", json!({"session": "t1", "command": "echo next-$((2+3))"})).await;
    assert_has!(r, "`said-in-the-back2` after the prompt is output of a program in the background, not typing");
    assert_has!(r, "an Enter drew a fresh prompt for the command");
    assert_has!(r, "next-5");
    assert_has!(r, "exit 0");
    // The command went on a prompt of its own: its label is what was
    // typed, not the job's line before it.
    let listed = s.ok("session_list", json!({})).await;
    assert_has!(listed, "last: `echo next-$((2+3))` exit 0");
    let screen = w.screen("t1");
    let on_a_prompt = |l: &str| l.ends_with("$ echo next-$((2+3))") || l.ends_with("# echo next-$((2+3))");
    assert!(screen.lines().any(on_a_prompt), "{screen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_router_loses_nothing() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let cmd = "for i in $(seq 1 300); do echo line$i; sleep 0.005; done";
    let r = s.ok("run", json!({"session": "t1", "command": cmd, "timeout": 0.3})).await;
    assert_has!(r, "still running");
    s.kill().await;
    // The logger belongs to tmux and keeps logging while no router runs.
    let s = w.server().await;
    assert_has!(s.ok("session_list", json!({})).await, "t1");
    let r = s.ok("wait", json!({"session": "t1", "timeout": 20})).await;
    assert_has!(r, "exit 0");
    let region = r.split("region ").nth(1).and_then(|t| t.split_whitespace().next()).expect("region id");
    let all = s.ok("read", json!({"session": "t1", "region": region.parse::<u64>().expect("number")})).await;
    for i in [1, 150, 300] {
        assert_has!(all, format!(" line{i}\n"));
    }
    let numbered = |l: &&str| l.split_whitespace().nth(1).is_some_and(|w| w.starts_with("line"));
    assert_eq!(all.lines().skip(1).filter(numbered).count(), 300, "{all}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn until_returns_at_the_pattern_and_never_matches_the_echoed_command() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    // The command line itself holds "READY"; only the output may match.
    let cmd = "sleep 0.3; echo READY; sleep 30";
    let started = std::time::Instant::now();
    let r = s.ok("run", json!({"session": "t1", "command": cmd, "until": "READY", "timeout": 20})).await;
    assert_has!(r, "`until` matched");
    assert_has!(r, "READY");
    assert_has!(r, "wait session=t1");
    let took = started.elapsed();
    assert!(took > std::time::Duration::from_millis(250), "matched the echo after {took:?}");
    assert!(took < std::time::Duration::from_secs(10), "{took:?}");
    s.ok("send", json!({"session": "t1", "keys": ["ctrl+c"]})).await;
    // The line waited for is often the command's last: its end is told,
    // with its exit status, rather than "it keeps running".
    // (The end may also come in the same piece of output as the line:
    // then the reply is the plain one of a command that ended.)
    let cmd = "sleep 0.3; echo BUILD OK; sleep 0.02; exit_with() { return $1; }; exit_with 3";
    let r = s.ok("run", json!({"session": "t1", "command": cmd, "until": "BUILD OK", "timeout": 20})).await;
    let told = r.contains("`until` matched on line") && r.contains("and the command ended right after: exit 3");
    assert!(told || r.starts_with("exit 3"), "{r}");
    assert!(!r.contains("keeps running"), "{r}");
    let structured = s.call("run", json!({"session": "t1", "command": "echo DONE-$((1+1))", "until": "DONE-2"})).await;
    assert_eq!(structured.structured.expect("structuredContent")["state"], "done", "{}", structured.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_last_lines_and_save_to_shape_the_reply() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let cmd = "for i in $(seq 1 300); do echo step $i; [ $((i % 100)) = 0 ] && echo WARN at $i; done";
    let r = s.ok("run", json!({"session": "t1", "command": cmd, "show": "^WARN", "show_after": 1})).await;
    assert_has!(r, "3 of 303 output lines match show");
    assert_has!(r, "WARN at 200");
    assert_has!(r, "step 201");
    assert!(!r.contains("step 150"), "{r}");
    let r = s.ok("run", json!({"session": "t1", "command": "seq 1 1000", "last_lines": 3})).await;
    assert_has!(r, "997 earlier lines");
    assert!(r.trim_end().ends_with("1000"), "{r}");
    let out = w.tmp.path().join("saved.txt");
    let path = out.display().to_string();
    let r = s.ok("run", json!({"session": "t1", "command": "seq 1 5000", "save_to": path})).await;
    assert_has!(r, "saved 5000 lines");
    let saved = std::fs::read_to_string(&out).expect("saved file");
    assert_eq!(saved.lines().count(), 5000);
    assert_eq!(saved.lines().last(), Some("5000"));
    // An existing file is kept unless overwrite says so; nothing is typed.
    let e = s.err("run", json!({"session": "t1", "command": "echo NOT-RUN", "save_to": path})).await;
    assert_has!(e, "overwrite");
    let e = s.err("run", json!({"session": "t1", "command": "echo NOT-RUN", "show": "("})).await;
    assert_has!(e, "show: invalid pattern");
    let log = std::fs::read_to_string(w.session_dir("t1").join("session.txt")).expect("log");
    assert!(!log.contains("NOT-RUN"), "a refused call typed nothing");
}

/// The router answers every agent on one thread (`cli::runtime`): a call
/// waiting on a long command holds that thread for nothing, and another
/// session's call meanwhile comes back first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_on_a_long_command_holds_up_no_other_call() {
    let w = World::new();
    let s = w.server().await;
    s.create("slow").await;
    s.create("quick").await;
    let slow = async {
        let r = s.ok("run", json!({"session": "slow", "command": "sleep 3", "timeout": 30})).await;
        (Instant::now(), r)
    };
    let quick = async {
        // Once the slow call is under way.
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let r = s.run("quick", "echo fine").await;
        (Instant::now(), r)
    };
    let ((slow_done, slow), (quick_done, quick)) = tokio::join!(slow, quick);
    assert_has!(slow, "exit 0");
    assert_has!(quick, "fine");
    assert!(quick_done < slow_done, "the quick call waited for the slow one:\n{quick}\n---\n{slow}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_ends_the_session_at_once_and_its_name_can_be_taken_again() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    s.run("t1", "echo before-exit").await;
    let started = std::time::Instant::now();
    let r = s.ok("run", json!({"session": "t1", "command": "exit"})).await;
    assert_has!(r, "the session t1 ended (its pane closed)");
    // Told by the logger, not found out by trying to reach one again.
    assert!(started.elapsed() < std::time::Duration::from_secs(3), "took {:?}:\n{r}", started.elapsed());
    // The name is free at once, while the old logger may still be ending:
    // the new session gets its own logger, not the old one's answers.
    s.create("t1").await;
    let r = s.ok("run", json!({"session": "t1", "command": "echo after-$((6*7))"})).await;
    assert_has!(r, "after-42");
    assert_has!(r, "exit 0");
    let listed = s.ok("session_list", json!({})).await;
    assert_has!(listed, "t1: bash");
}
