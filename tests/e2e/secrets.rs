//! Secrets stay out of replies (issue 18): redaction in every view a model
//! reads, placeholders typed back, the switches, and logs on disk left
//! byte-exact.

use serde_json::json;

use crate::assert_has;
use crate::harness::{Server, World, session_text};

/// A GitHub token of the classic shape, made up.
fn github() -> String {
    format!("ghp_{}", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8")
}

const PASSWORD: &str = "correct-horse-battery";
const URL_PASSWORD: &str = "hunter2hunter2";
const ENV_VALUE: &str = "plain-words-deploy-value";
const PEM_BODY: &str = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7";

/// Asserts that no secret of `values` shows in `text`.
fn assert_clean(text: &str, values: &[&str]) {
    for v in values {
        assert!(!text.contains(v), "{v:?} shows in:\n{text}");
    }
}

/// A session `name` in a directory holding a `.env` file and a private key.
async fn session_with_fixtures(s: &Server, w: &World, name: &str) -> std::path::PathBuf {
    let work = w.tmp.path().join(format!("work-{name}"));
    std::fs::create_dir_all(&work).expect("work dir");
    let env = format!("DB_PASSWORD={PASSWORD}\nGITHUB_TOKEN={}\nPLAIN=hello\n", github());
    std::fs::write(work.join(".env"), env).expect(".env");
    let pem = format!("-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n{PEM_BODY}\n-----END PRIVATE KEY-----\n");
    std::fs::write(work.join("key.pem"), pem).expect("key.pem");
    let env = json!({ "MY_DEPLOY_TOKEN": ENV_VALUE });
    s.ok("session_create", json!({ "name": name, "cwd": work.display().to_string(), "env": env })).await;
    work
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_redacted_in_every_view_and_the_logs_keep_them() {
    let w = World::new();
    let s = w.server().await;
    session_with_fixtures(&s, &w, "k1").await;
    let gh = github();
    let all = [gh.as_str(), PASSWORD, URL_PASSWORD, ENV_VALUE, PEM_BODY];

    let out = s.run("k1", "cat .env").await;
    assert_clean(&out, &all);
    assert_has!(out, "GITHUB_TOKEN=‹secret:github-token:1›");
    assert_has!(out, "DB_PASSWORD=‹secret:password:1›");
    assert_has!(out, "PLAIN=hello");
    assert_has!(out, "[redacted 2 secrets: 1 github-token, 1 password]");
    assert_has!(out, "Type a placeholder");
    let again = s.run("k1", "cat .env").await;
    assert_has!(again, "‹secret:github-token:1›");
    assert!(!again.contains("Type a placeholder"), "the usage note comes once:\n{again}");

    let out = s.run("k1", "env | grep DEPLOY").await;
    assert_clean(&out, &all);
    assert_has!(out, "MY_DEPLOY_TOKEN=‹secret:my-deploy-token:1›");

    let out = s.run("k1", "cat key.pem; echo after").await;
    assert_clean(&out, &all);
    assert_has!(out, "‹secret:private-key:1›");
    assert_has!(out, "after");

    let remote = format!("git init -q r && git -C r remote add origin https://bob:{URL_PASSWORD}@example.com/r.git");
    s.run("k1", &remote).await;
    let out = s.run("k1", "git -C r remote -v").await;
    assert_clean(&out, &all);
    assert_has!(out, "https://bob:‹secret:url-password:1›@example.com/r.git");

    // A colour escape in the middle, and a secret printed in two writes.
    let (head, tail) = gh.split_at(20);
    let out = s.run("k1", &format!("printf '{head}\\033[31m{tail}\\033[0m\\n'")).await;
    assert_clean(&out, &all);
    assert_has!(out, "‹secret:github-token:1›");
    let out = s.run("k1", &format!("printf '{head}'; sleep 0.3; printf '{tail}\\n'")).await;
    assert_clean(&out, &all);
    assert_has!(out, "‹secret:github-token:1›");

    // Read ranges that start and end on a secret's line, in the middle of the key.
    let dir = w.session_dir("k1");
    let text = session_text(&dir);
    let line_of = |needle: &str| text.lines().position(|l| l.contains(needle)).expect("line") as u64 + 1;
    let body = line_of(PEM_BODY);
    for (from, to) in [(body, body + 5), (body - 3, body), (body, body)] {
        let out = s.ok("read", json!({ "session": "k1", "from_line": from, "to_line": to })).await;
        assert_clean(&out, &all);
    }
    let env_line = line_of("GITHUB_TOKEN=");
    let out = s.ok("read", json!({ "session": "k1", "from_line": env_line, "to_line": env_line })).await;
    assert_clean(&out, &all);
    for view in ["cooked", "screen", "raw"] {
        let out = s.ok("read", json!({ "session": "k1", "view": view })).await;
        assert_clean(&out, &all);
    }
    let out = s.ok("read", json!({ "session": "k1", "view": "raw", "from_byte": 0, "bytes": 65536 })).await;
    assert_clean(&out, &[PASSWORD, ENV_VALUE, URL_PASSWORD]);

    // A search whose pattern matches a secret counts it and shows it redacted.
    let out = s.ok("search", json!({ "session": "k1", "pattern": "ghp_[A-Za-z0-9]+" })).await;
    assert_clean(&out, &all);
    assert_has!(out, "‹secret:github-token:1›");
    let out = s.ok("search", json!({ "session": "k1", "pattern": "hunter2", "context": 2 })).await;
    assert_clean(&out, &all);
    assert!(!out.contains("no match") && !out.contains("0 hits"), "{out}");

    let out = s.ok("regions", json!({ "session": "k1" })).await;
    assert_clean(&out, &all);
    let out = s.ok("session_list", json!({})).await;
    assert_clean(&out, &all);

    // The logs on disk keep every byte, privately.
    let text = session_text(&dir);
    for v in all {
        assert!(text.contains(v), "session.txt lost {v:?}");
    }
    let raw = std::fs::read(dir.join("raw.log")).expect("raw.log");
    assert!(raw.windows(PASSWORD.len()).any(|b| b == PASSWORD.as_bytes()), "raw.log keeps the bytes");
    let table = dir.join("secrets.json");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&table).expect("table").permissions());
    assert_eq!(mode & 0o777, 0o600);
    let calls = std::fs::read_to_string(w.home().join("calls.log")).expect("calls.log");
    assert_has!(calls, "\"redacted\":");
    assert_clean(&calls, &all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placeholders_type_back_across_a_restart_and_unknown_ones_are_refused() {
    let w = World::new();
    let s = w.server().await;
    let work = session_with_fixtures(&s, &w, "k2").await;
    let out = s.run("k2", "cat .env").await;
    assert_has!(out, "‹secret:github-token:1›");

    s.run("k2", "printf %s ‹secret:github-token:1› > typed.txt").await;
    assert_eq!(std::fs::read_to_string(work.join("typed.txt")).expect("typed.txt"), github());
    s.ok("send", json!({ "session": "k2", "text": "printf %s ‹secret:password:1› > sent.txt\n" })).await;
    s.run("k2", "true").await;
    assert_eq!(std::fs::read_to_string(work.join("sent.txt")).expect("sent.txt"), PASSWORD);

    let err =
        s.err("run", json!({ "session": "k2", "command": "echo marker-never-typed ‹secret:github-token:9›" })).await;
    assert_has!(err, "‹secret:github-token:9› is not a placeholder of this session");
    assert_has!(err, "nothing was typed");
    assert!(!session_text(&w.session_dir("k2")).contains("marker-never-typed"), "nothing was typed");

    // A restarted router numbers as before.
    s.kill().await;
    let s = w.server().await;
    let out = s.run("k2", "cat .env; cat typed.txt").await;
    assert_has!(out, "GITHUB_TOKEN=‹secret:github-token:1›");
    assert_clean(&out, &[&github(), PASSWORD]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redaction_turns_off_per_session_and_per_server() {
    let w = World::new();
    let s = w.server().await;
    let out = s.ok("session_create", json!({ "name": "k3", "redact": false })).await;
    assert_has!(out, "redaction: off for this session");
    let out = s.run("k3", &format!("echo {}", github())).await;
    assert_has!(out, github());
    s.kill().await;

    let s = w.server_with(&[("DOCENT_TERMINAL_MCP_REDACT", "0")]).await;
    let out = s.ok("session_create", json!({ "name": "k4" })).await;
    assert_has!(out, "redaction: off for this server");
    let out = s.run("k4", &format!("echo {}", github())).await;
    assert_has!(out, github());
}
