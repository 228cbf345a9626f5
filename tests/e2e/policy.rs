//! The user's policy, seen from outside (issue 39): denied lines never
//! reach the pane, an allow-list types only what it names, a person asked
//! answers at the command line, in a tmux popup or through the client's
//! own prompt (the Python SDK), an unanswered ask is a refusal, read-only
//! agents read and never type, the file is followed as it changes, a bad
//! file stops the server at start, and every decision is in the audit.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Person, SERVER, Serve, Server, World, bridge, cli, poll, python_sdk, run_for};

/// Writes `text` as the world's policy file and returns its path.
fn policy_file(w: &World, text: &str) -> PathBuf {
    let path = w.tmp.path().join("policy.toml");
    std::fs::write(&path, text).expect("policy file");
    path
}

/// A server of `w` under the policy `text`.
async fn governed(w: &World, text: &str) -> Server {
    let path = policy_file(w, text);
    w.server_with(&[("DOCENT_TERMINAL_MCP_POLICY", &path.display().to_string())]).await
}

/// The audit's records.
fn audit(w: &World) -> Vec<Value> {
    let text = std::fs::read_to_string(w.home().join("audit.jsonl")).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).expect("an audit line is JSON")).collect()
}

/// What session `name`'s pane was sent, as its raw log holds it.
fn raw(w: &World, name: &str) -> String {
    String::from_utf8_lossy(&std::fs::read(w.session_dir(name).join("raw.log")).unwrap_or_default()).into_owned()
}

/// The open asks, as `pending --json` lists them.
fn pending(w: &World) -> Vec<Value> {
    let out = cli(w, &["pending", "--json"]).ok();
    out.lines().map(|l| serde_json::from_str(l).expect("pending --json gives JSON lines")).collect()
}

/// Waits until `n` asks are open; their numbers.
fn until_pending(w: &World, n: usize) -> Vec<u64> {
    let mut ids = Vec::new();
    poll::until(&format!("{n} open asks"), Duration::from_secs(15), || {
        let open = pending(w);
        ids = open.iter().filter_map(|a| a["id"].as_u64()).collect();
        if open.len() == n { Ok(()) } else { Err(format!("{open:?}")) }
    });
    ids
}

const DENY_RM: &str = r#"
default = "allow"

[[rule]]
action = "deny"
command = '^rm\s+-[a-z]*r'
why = "recursive deletes need a person"

[[rule]]
action = "deny"
command = '(?i)drop\s+table'
to = "program"
why = "no drops"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denied_lines_never_reach_the_pane_whichever_tool_would_type_them() {
    let w = World::new();
    let s = governed(&w, DENY_RM).await;
    s.create("d1").await;
    assert!(s.run("d1", "echo allowed-$((20+22))").await.contains("allowed-42"));
    // A compound line is judged by each of its commands.
    let r = s.call("run", json!({ "session": "d1", "command": "echo a && rm -rf /tmp/nothing-here" })).await;
    assert!(r.is_error, "{}", r.text);
    assert!(r.text.contains("policy.toml:4") && r.text.contains("recursive deletes need a person"), "{}", r.text);
    assert!(r.text.contains("Nothing was typed"), "{}", r.text);
    let refusal = &r.structured.as_ref().expect("structured")["refusal"];
    assert_eq!(refusal["refusal"], "policy", "{refusal}");
    assert_eq!(refusal["rule"], 4, "{refusal}");
    // send: text with Enter, and text left at the prompt then an Enter alone.
    let e = s.err("send", json!({ "session": "d1", "text": "rm -r /tmp/nothing", "keys": ["enter"] })).await;
    assert!(e.contains("was not typed"), "{e}");
    s.ok("send", json!({ "session": "d1", "text": "rm -r /tmp/nothing-here-either" })).await;
    let e = s.err("send", json!({ "session": "d1", "keys": ["enter"] })).await;
    assert!(e.contains("rm -r /tmp/nothing-here-either"), "the Enter is judged on what it submits: {e}");
    s.ok("send", json!({ "session": "d1", "keys": ["ctrl+e", "ctrl+u"] })).await;
    // expect: its command line, and the lines its rules type.
    let e = s
        .err(
            "expect",
            json!({ "session": "d1", "command": "rm -rf /tmp/x", "rules": [{ "pattern": "never", "stop": true }] }),
        )
        .await;
    assert!(e.contains("was not typed"), "{e}");
    let r = s
        .call(
            "expect",
            json!({ "session": "d1", "command": "read -p 'what? ' a; echo got-$a",
                    "rules": [{ "pattern": "what\\?", "line": "DROP TABLE users" }], "timeout": 5 }),
        )
        .await;
    assert!(r.is_error && r.text.contains("was not typed") && r.text.contains("no drops"), "{}", r.text);
    s.ok("send", json!({ "session": "d1", "keys": ["ctrl+c"] })).await;
    // The same words to a shell are not what that rule judges.
    s.run("d1", "echo drop table").await;
    let typed = raw(&w, "d1");
    assert!(
        !typed.contains("rm -rf /tmp") && !typed.contains("rm -r /tmp/nothing\r"),
        "a denied line reached the pane"
    );
    assert!(!typed.contains("DROP TABLE"), "a denied answer reached the program");
    let records = audit(&w);
    let denied = records.iter().filter(|r| r["decision"] == "denied").count();
    assert!(denied >= 5, "every denial is audited: {records:?}");
    assert!(records.iter().any(|r| r["decision"] == "allowed" && r["line"] == "echo allowed-$((20+22))"));
    assert!(records.iter().all(|r| r["agent"].is_string() && r["time"].is_string()), "{records:?}");
    let calls = std::fs::read_to_string(w.home().join("calls.log")).expect("calls.log");
    assert!(calls.contains(r#""policy":{"allowed":0,"asked":0,"denied":1}"#), "{calls}");
    assert!(!calls.contains("rm -rf"), "calls.log counts decisions, never lines");
    #[cfg(unix)]
    assert_eq!(crate::support::mode(&w.home().join("audit.jsonl")) & 0o777, 0o600);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allow_list_types_only_what_it_names() {
    let w = World::new();
    let s = governed(
        &w,
        r#"
default = "deny"

[[rule]]
action = "allow"
command = '^(echo|printf|true)\b'
"#,
    )
    .await;
    s.create("a1").await;
    assert!(s.run("a1", "echo listed").await.contains("listed"));
    let e = s.err("run", json!({ "session": "a1", "command": "echo ok && whoami" })).await;
    assert!(e.contains("allows only what its rules name") && e.contains("`whoami`"), "{e}");
    let e = s.err("run", json!({ "session": "a1", "command": "echo $(id -u)" })).await;
    assert!(e.contains("`id -u`"), "a command substitution is a command too: {e}");
    assert!(s.run("a1", "printf 'a; rm -rf x\\n'").await.contains("a; rm -rf x"), "quotes hide operators");
}

const ASK_TOUCH: &str = r#"
[[rule]]
action = "ask"
command = '^touch\s'
why = "new files in this tree are reviewed"

[limits]
ask_timeout = "30s"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_answers_at_the_command_line_and_the_first_answer_wins() {
    let w = World::new();
    let s = Arc::new(governed(&w, ASK_TOUCH).await);
    s.create("c1").await;
    s.create("c2").await;
    let work = w.tmp.path().join("work");
    std::fs::create_dir_all(&work).expect("work dir");
    let file = |n: &str| work.join(n).display().to_string();
    // Two asks at once, one in each session.
    let (a, b) = (s.clone(), s.clone());
    let (fa, fb) = (file("by-cli"), file("refused"));
    let first =
        tokio::spawn(async move { a.call("run", json!({ "session": "c1", "command": format!("touch {fa}") })).await });
    let second =
        tokio::spawn(async move { b.call("run", json!({ "session": "c2", "command": format!("touch {fb}") })).await });
    let ids = until_pending(&w, 2);
    let listed = cli(&w, &["pending"]).ok();
    assert!(listed.contains("touch") && listed.contains("c1") && listed.contains("c2"), "{listed}");
    let ask_of = |session: &str| {
        pending(&w).into_iter().find(|a| a["session"] == session).and_then(|a| a["id"].as_u64()).expect("an ask")
    };
    let (ask1, ask2) = (ask_of("c1"), ask_of("c2"));
    assert_eq!(ids.len(), 2);
    let said = cli(&w, &["allow", &ask1.to_string()]).ok();
    assert!(said.contains("allowed by"), "{said}");
    let again = cli(&w, &["deny", &ask1.to_string()]);
    assert!(!again.success() && again.stderr.contains("answered already"), "{}", again.stderr);
    cli(&w, &["deny", &ask2.to_string(), "--why", "not today"]).ok();
    let first = first.await.expect("first call");
    assert!(!first.is_error, "{}", first.text);
    assert!(first.text.contains("allowed by") && first.text.contains("(cli)"), "{}", first.text);
    assert!(Path::new(&file("by-cli")).exists());
    let second = second.await.expect("second call");
    assert!(
        second.is_error && second.text.contains("denied by") && second.text.contains("not today"),
        "{}",
        second.text
    );
    assert!(!Path::new(&file("refused")).exists(), "a denied line ran");
    // The region says who allowed it.
    let regions = s.regions("c1").await;
    assert!(regions.contains("allowed by"), "{regions}");
    let records = audit(&w);
    let asked: Vec<&Value> = records.iter().filter(|r| r["ask"].is_u64()).collect();
    assert_eq!(asked.len(), 2, "{records:?}");
    assert!(asked.iter().any(|r| r["decision"] == "allowed" && r["via"] == "cli" && r["waited_ms"].is_u64()));
    assert!(asked.iter().any(|r| r["decision"] == "denied" && r["why"] == "not today"));
    // Allowed for the session: the same line there is not asked again.
    let c = s.clone();
    let again_file = file("twice");
    let line = format!("touch {again_file}");
    let l2 = line.clone();
    let third = tokio::spawn(async move { c.call("run", json!({ "session": "c1", "command": l2 })).await });
    let id = until_pending(&w, 1)[0];
    cli(&w, &["allow", &id.to_string(), "--scope", "session"]).ok();
    assert!(!third.await.expect("third").is_error);
    let r = tokio::time::timeout(Duration::from_secs(10), s.call("run", json!({ "session": "c1", "command": line })))
        .await
        .expect("the same line in the same session is not asked again");
    assert!(!r.is_error, "{}", r.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_nobody_answers_is_a_refusal_once_its_time_is_up() {
    let w = World::new();
    let s = governed(&w, &ASK_TOUCH.replace("30s", "1s")).await;
    s.create("t1").await;
    let target = w.tmp.path().join("never");
    let started = std::time::Instant::now();
    let e = s.err("run", json!({ "session": "t1", "command": format!("touch {}", target.display()) })).await;
    assert!(e.contains("did not answer") || e.contains("nobody answered"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(10), "the ask ended at its timeout");
    assert!(!target.exists());
    assert!(pending(&w).is_empty(), "a refused ask is no longer open");
    assert!(audit(&w).iter().any(|r| r["via"] == "timeout" && r["decision"] == "denied"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_attached_in_tmux_answers_in_a_popup() {
    let w = World::new();
    let s = Arc::new(governed(&w, ASK_TOUCH).await);
    s.create("p1").await;
    let mut person = Person::attach_seeing(&w, "p1");
    let target = w.tmp.path().join("by-tmux");
    let line = format!("touch {}", target.display());
    let c = s.clone();
    let call = tokio::spawn(async move { c.call("run", json!({ "session": "p1", "command": line })).await });
    let id = until_pending(&w, 1)[0];
    person.pty().wait_for(&format!("ask {id}"), 0, Duration::from_secs(10));
    person.types("a");
    let r = call.await.expect("call");
    assert!(!r.is_error && r.text.contains("(tmux)"), "{}", r.text);
    assert!(target.exists());
    assert!(audit(&w).iter().any(|r| r["via"] == "tmux" && r["decision"] == "allowed"));
    person.leave(&w);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_own_user_answers_through_elicitation() {
    if !crate::support::installed("python3") {
        eprintln!("skipped: python3 is missing");
        return;
    }
    let python = match python_sdk() {
        Ok(p) => p,
        Err(why) => return eprintln!("skipped: the Python MCP SDK is not available: {why}"),
    };
    let w = World::new();
    let path = policy_file(&w, ASK_TOUCH);
    let mut env = w.env();
    env.push(("DOCENT_TERMINAL_MCP_POLICY".into(), path.display().to_string()));
    for (mode, session) in [("legacy", "e1"), ("2026-07-28", "e2")] {
        let target = w.tmp.path().join(format!("by-client-{session}"));
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/e2e/policy.py");
        let args = [script, SERVER, &target.display().to_string(), mode, session];
        let out = run_for(&python, &args, &env, Duration::from_secs(60));
        let what = format!("{mode}: {}\n{}", out.stdout, out.stderr);
        assert!(out.success(), "{what}");
        assert!(out.stdout.contains("asked: True"), "{what}");
        if mode == "legacy" {
            // The call waits while the client's user decides, and says so.
            assert!(out.stdout.contains("progress: True"), "{what}");
        }
        assert!(out.stdout.contains("allowed: False True"), "{what}");
        assert!(out.stdout.contains("denied: True"), "{what}");
        assert!(target.exists(), "{what}");
    }
    let records = audit(&w);
    let by_client = records.iter().filter(|r| r["via"] == "client" && r["decision"] == "allowed").count();
    assert_eq!(by_client, 2, "{records:?}");
    assert!(pending(&w).is_empty(), "no ask is left open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_agent_reads_and_never_types() {
    let w = World::new();
    let path = policy_file(
        &w,
        r#"
[agents."reviewer*"]
role = "read-only"

[limits]
sessions_per_agent = 1
"#,
    );
    let _serve = Serve::start(&w, &["--policy", &path.display().to_string()]);
    let alice = bridge(&w, "alice").await;
    let reviewer = bridge(&w, "reviewer-1").await;
    alice.create("r1").await;
    let e = alice.err("session_create", json!({ "name": "r2" })).await;
    assert!(e.contains("sessions_per_agent = 1"), "{e}");
    alice.run("r1", "echo from-alice").await;
    assert!(reviewer.ok("read", json!({ "session": "r1" })).await.contains("from-alice"));
    reviewer.ok("session_list", json!({})).await;
    reviewer.ok("regions", json!({ "session": "r1" })).await;
    for (tool, args) in [
        ("run", json!({ "session": "r1", "command": "echo from-reviewer" })),
        ("send", json!({ "session": "r1", "text": "x" })),
        ("session_resize", json!({ "session": "r1", "cols": 100, "rows": 30 })),
        ("session_close", json!({ "session": "r1" })),
        ("session_create", json!({ "name": "r3" })),
    ] {
        let e = reviewer.err(tool, args).await;
        assert!(e.contains("read-only"), "{tool}: {e}");
    }
    assert!(!raw(&w, "r1").contains("from-reviewer"));
    assert!(audit(&w).iter().any(|r| r["agent"] == "reviewer-1" && r["decision"] == "denied"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_follows_its_file_and_a_bad_change_keeps_the_last_good_one() {
    let w = World::new();
    let path = policy_file(&w, DENY_RM);
    let serve = Serve::start(&w, &["--policy", &path.display().to_string()]);
    let s = bridge(&w, "alice").await;
    s.create("f1").await;
    s.err("run", json!({ "session": "f1", "command": "rm -r /tmp/nothing-at-all" })).await;
    // Replaced as an editor saves: a new file renamed over the old one.
    let tmp = w.tmp.path().join("policy.toml.new");
    std::fs::write(&tmp, "default = \"allow\"\n").expect("write");
    std::fs::rename(&tmp, &path).expect("rename");
    poll::until("the new policy", Duration::from_secs(10), || {
        let health = crate::support::unix_get(&serve.socket, "/health").1;
        if health.contains(r#""rules":0"#) { Ok(()) } else { Err(health) }
    });
    s.run("f1", "rm -r /tmp/nothing-at-all-2 || true").await;
    // A change that does not parse: the last good policy stays, and says so.
    std::fs::write(&path, "default = \"allow\"\n[[rule]]\naction = \"deny\"\ncommand = '('\n").expect("write");
    poll::until("the broken policy reported", Duration::from_secs(10), || {
        let health = crate::support::unix_get(&serve.socket, "/health").1;
        if health.contains("policy.toml:4:") { Ok(()) } else { Err(health) }
    });
    let r = s.run("f1", "echo still-allowed").await;
    assert!(r.contains("does not parse") && r.contains("last good policy"), "{r}");
    assert!(!s.run("f1", "echo twice").await.contains("does not parse"), "said once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_that_does_not_parse_stops_the_server_at_start() {
    let w = World::new();
    let path = policy_file(&w, "default = \"allow\"\n\n[[rule]]\naction = \"deny\"\ncommand = 'a('\n");
    let arg = path.display().to_string();
    for args in [vec!["stdio", "--policy", &arg], vec!["serve", "--policy", &arg]] {
        let out = run_for(Path::new(SERVER), &args, &w.env(), Duration::from_secs(20));
        assert!(!out.success(), "{args:?} started");
        assert!(out.stderr.contains(&format!("{arg}:5:")), "{args:?}: {}", out.stderr);
    }
    let missing = w.tmp.path().join("missing.toml").display().to_string();
    let out = run_for(Path::new(SERVER), &["stdio", "--policy", &missing], &w.env(), Duration::from_secs(20));
    assert!(!out.success() && out.stderr.contains("cannot read the policy file"), "{}", out.stderr);
    let out = cli(&w, &["tail", "--policy", &arg, "x"]);
    assert_eq!(out.code, 2, "--policy goes with serving only: {}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_allow_and_deny_answer_a_shared_server_too() {
    let w = World::new();
    let path = policy_file(&w, ASK_TOUCH);
    let _serve = Serve::start(&w, &["--policy", &path.display().to_string()]);
    let agent = Arc::new(bridge(&w, "alice").await);
    agent.create("v1").await;
    let target = w.tmp.path().join("by-cli-on-serve");
    let line = format!("touch {}", target.display());
    let a = agent.clone();
    let call = tokio::spawn(async move { a.call("run", json!({ "session": "v1", "command": line })).await });
    let id = until_pending(&w, 1)[0];
    let open = pending(&w);
    assert_eq!(open[0]["agent"], "alice", "{open:?}");
    let said = cli(&w, &["allow", &id.to_string(), "--json"]).ok();
    let said: Value = serde_json::from_str(said.trim()).expect("allow --json gives JSON");
    assert_eq!(said["answered"], true, "{said}");
    let r = call.await.expect("call");
    assert!(!r.is_error && r.text.contains("(cli)"), "{}", r.text);
    assert!(target.exists());
}
