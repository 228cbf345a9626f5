//! Secrets stay out of replies (issue 18): redaction in every view a model
//! reads, placeholders typed back, the switches, and logs on disk left
//! byte-exact.

use serde_json::json;

use crate::assert_has;
use crate::support::{Server, World, poll, session_text};

/// A GitHub token of the classic shape, made up.
fn github() -> String {
    format!("ghp_{}", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8")
}

const PASSWORD: &str = "correct-horse-battery";
const URL_PASSWORD: &str = "hunter2hunter2";
const ENV_VALUE: &str = "plain-words-deploy-value";
const PEM_BODY: &str = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7";

/// Asserts that no secret of `values` shows in `text`. A failure quotes
/// the lines that show one, not the whole text: a long message loses its
/// head in a clipped CI log.
fn assert_clean(text: &str, values: &[&str]) {
    for v in values {
        let showing: Vec<&str> = text.lines().filter(|l| l.contains(v)).take(4).collect();
        assert!(
            showing.is_empty(),
            "{v:?} shows {} times, in lines such as:\n{}",
            text.matches(v).count(),
            showing.join("\n")
        );
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
    assert_clean(&out, &all);

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

/// The part of [`github`] before and after a colour change printed inside it.
fn halves() -> (String, String) {
    let gh = github();
    let (head, tail) = gh.split_at(20);
    (head.to_string(), tail.to_string())
}

/// The lines of the key in `pem` between its BEGIN and END lines that are
/// long enough to tell (its last line may be a few characters).
fn key_body(pem: &str) -> Vec<String> {
    pem.lines().filter(|l| !l.starts_with("-----") && l.len() >= 8).map(str::to_string).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_keys_escapes_and_keys_read_piecemeal_stay_hidden() {
    if !crate::support::installed("openssl") {
        eprintln!("skipped: openssl is not installed (apt-get install openssl), so no key can be generated");
        return;
    }
    let w = World::new();
    let s = w.server().await;
    let work = session_with_fixtures(&s, &w, "k5").await;
    let (head, tail) = halves();

    // A key openssl prints: one line of base64 between BEGIN and END.
    let out = s.run("k5", "openssl genpkey -algorithm ed25519 -out ed.pem && cat ed.pem").await;
    let ed = key_body(&std::fs::read_to_string(work.join("ed.pem")).expect("ed.pem"));
    assert!(!ed.is_empty());
    let body: Vec<&str> = ed.iter().map(String::as_str).collect();
    assert_clean(&out, &body);
    assert_has!(out, "‹secret:private-key:1›");

    // A larger key, never shown whole in a reply, read a few lines at a time.
    s.run("k5", "openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out rsa.pem 2>/dev/null").await;
    let out = s.ok("run", json!({ "session": "k5", "command": "cat rsa.pem", "last_lines": 1 })).await;
    assert_has!(out, "-----END PRIVATE KEY-----");
    let rsa = key_body(&std::fs::read_to_string(work.join("rsa.pem")).expect("rsa.pem"));
    let body: Vec<&str> = rsa.iter().map(String::as_str).collect();
    assert_clean(&out, &body);
    let text = session_text(&w.session_dir("k5"));
    let first = text.lines().position(|l| l.contains(body[0])).expect("the key is in the log") as u64 + 1;
    let last = first + body.len() as u64 + 1;
    for (from, to) in [
        (first - 1, first + 1),
        (first + 2, first + 4),
        (first + 10, first + 12),
        (last - 2, last),
        (first + 5, first + 5),
    ] {
        let out = s.ok("read", json!({ "session": "k5", "from_line": from, "to_line": to })).await;
        assert_clean(&out, &body);
        assert_has!(out, "‹secret:private-key");
    }

    // A colour change in the middle of a token, as the example
    // prints it: neither half shows, in the reply, the raw view, the
    // screen or a search.
    let out = s.run("k5", &format!("printf '{head}\\e[31m{tail}\\e[0m\\n'")).await;
    assert_clean(&out, &[&head, &tail]);
    assert_has!(out, "‹secret:github-token:1›");
    let raw = s.ok("read", json!({ "session": "k5", "view": "raw" })).await;
    // The escape inside the token goes with it; the one after it stays.
    assert_has!(raw, "‹secret:github-token:1›\\e[0m");
    assert_clean(&raw, &[&head, &tail]);
    let screen = s.ok("read", json!({ "session": "k5", "view": "screen" })).await;
    assert_clean(&screen, &[&head, &tail]);
    assert_has!(screen, "‹secret:github-token:1›");
    // The command line and its output both hold the token: both counted.
    let found = s.ok("search", json!({ "session": "k5", "pattern": "ghp_" })).await;
    assert_clean(&found, &[&head, &tail]);
    assert_has!(found, "hits 1-2 of 2");
    assert!(found.matches("‹secret:github-token:1›").count() >= 2, "{found}");

    // A token the screen wraps from one row into the next (the pane is
    // 120 wide: 100 blanks, then the token's 40 characters) shows in
    // neither row; the screen's finds count in the reply's note.
    s.run("k5", "clear").await;
    s.run("k5", &format!("printf '%100s%s\\n' '' {}", github())).await;
    let screen = s.ok("read", json!({ "session": "k5", "view": "screen" })).await;
    assert_clean(&screen, &[&head, &tail]);
    assert_has!(screen, "‹secret:github-token:1›\n");
    assert_has!(screen, "  ‹…›\n");
    assert_has!(screen, "[redacted 2 secrets: 2 github-token]");
}

/// The name of the session a `session_split` reply made.
fn split_name(reply: &str) -> String {
    let rest = reply.strip_prefix("session ").unwrap_or_else(|| panic!("not a split reply: {reply}"));
    rest.split_whitespace().next().expect("a name").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_list_and_split_panes_use_their_sessions_placeholders() {
    let w = World::new();
    let s = w.server().await;
    let gh = github();
    let gh2 = gh.replace("A1", "Z9");
    s.create("p1").await;
    s.run("p1", &format!("echo {gh}")).await;
    let out = s.run("p1", &format!("echo {gh2}")).await;
    assert_has!(out, "‹secret:github-token:2›");
    // The list quotes the last command with the session's own number, and
    // counts what it hid like any reply.
    let listed = s.call("session_list", json!({})).await;
    let list = listed.text;
    assert_clean(&list, &[&gh, &gh2]);
    assert_has!(list, "echo ‹secret:github-token:2›");
    assert_has!(list, "[redacted 1 secret: ");
    let facts = listed.structured.expect("structuredContent");
    assert_eq!(facts["redactions"], json!(1), "{facts}");

    // A pane split from p1 keeps p1's placeholders and learns its own
    // environment.
    let env = json!({ "CHILD_TOKEN": "child-only-secret-value" });
    let cwd = w.tmp.path().display().to_string();
    let made = s.ok("session_split", json!({ "session": "p1", "env": env, "cwd": cwd })).await;
    let child = split_name(&made);
    let typed = format!("echo {gh2}; echo $CHILD_TOKEN; printf %s ‹secret:github-token:1› > typed.txt");
    let out = s.run(&child, &typed).await;
    assert_clean(&out, &[&gh, &gh2, "child-only-secret-value"]);
    assert_has!(out, "‹secret:github-token:2›");
    assert_has!(out, "‹secret:child-token:1›");
    assert_eq!(std::fs::read_to_string(w.tmp.path().join("typed.txt")).expect("typed.txt"), gh);
    // A line typed with the child's own placeholder holds the value: the
    // list's rows as data hide it with that session's placeholder too.
    s.run(&child, "printf '%s\\n' ‹secret:child-token:1› > /dev/null").await;
    let listed = s.call("session_list", json!({})).await;
    let facts = listed.structured.expect("structuredContent").to_string();
    assert!(!facts.contains("child-only-secret-value"), "{facts}");
    assert_has!(facts, "‹secret:child-token:1›");

    // A pane split from a session that is not redacted is not either.
    s.ok("session_create", json!({ "name": "p3", "redact": false })).await;
    let made = s.ok("session_split", json!({ "session": "p3", "cwd": cwd })).await;
    let open = split_name(&made);
    let out = s.run(&open, &format!("echo {gh}")).await;
    assert_has!(out, gh);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridged_run_leaves_the_value_nowhere_but_the_sessions_logs() {
    let (world, _serve, mut bridge) = crate::support::bridged("k", "b1").await;
    let limit = std::time::Duration::from_secs(20);
    let gh = github();
    let (out, err) = bridge.call("run", json!({ "session": "b1", "command": format!("echo {gh}") }), limit).await;
    assert!(!err, "{out}");
    assert_has!(out, "‹secret:github-token:1›");
    let typed = "printf '%s\\n' ‹secret:github-token:1›";
    let (out, err) = bridge.call("run", json!({ "session": "b1", "command": typed }), limit).await;
    assert!(!err, "{out}");
    assert_clean(&out, &[&gh]);
    // The bridge's keys live in the logger's memory: no file per call.
    assert!(!world.home().join("requests").exists(), "no request records on disk");
    let logs = world.session_dir("b1");
    let mut files = vec![world.home()];
    let mut looked = 0;
    while let Some(path) = files.pop() {
        if path == logs {
            continue;
        }
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).expect("read_dir").flatten().map(|e| e.path()));
        } else if let Ok(body) = std::fs::read(&path) {
            looked += 1;
            assert!(!String::from_utf8_lossy(&body).contains(&gh), "{} holds the value", path.display());
        }
    }
    assert!(looked >= 3, "calls.log, the typing records and the HTTP session were looked at");
    assert!(session_text(&logs).matches(gh.as_str()).count() >= 2, "the value was typed and printed");
}

/// The answer to `GET path` on loopback `port` with `cookie`, as it came:
/// read to its end or, for an event stream (which never ends by itself),
/// until `enough` holds of what came so far, for at most `wait`.
async fn get_until(
    port: u16,
    path: &str,
    cookie: &str,
    wait: std::time::Duration,
    enough: impl Fn(&str) -> bool,
) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
    let request =
        format!("GET {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncookie: {cookie}\r\nconnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut body = Vec::new();
    let mut chunk = [0u8; 8192];
    poll::until_async(&format!("GET {path} to end or give enough"), wait, async || {
        // What has come meanwhile (a bounded amount a look, so that a
        // stream that never pauses still lets the poll keep time).
        let mut ended = false;
        for _ in 0..64 {
            match tokio::time::timeout(std::time::Duration::from_millis(20), stream.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => body.extend_from_slice(&chunk[..n]),
                Ok(_) => {
                    ended = true;
                    break;
                }
                Err(_) => break,
            }
        }
        let text = String::from_utf8_lossy(&body).into_owned();
        if ended || enough(&text) { Ok(text) } else { Err(text) }
    })
    .await
}

/// An event stream of the overview with the card of session `name` left
/// out of every event.
fn without_card(stream: &str, name: &str) -> String {
    let mut out = String::new();
    for line in stream.lines() {
        let parsed = line.strip_prefix("data: ").and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok());
        match parsed {
            Some(mut data) => {
                if let Some(cards) = data.get_mut("cards").and_then(|c| c.as_array_mut()) {
                    cards.retain(|c| c["name"] != name);
                }
                out.push_str(&format!("data: {data}\n"));
            }
            None => out.push_str(&format!("{line}\n")),
        }
    }
    out
}

/// The whole body of `GET path` (a request that ends).
async fn get(port: u16, path: &str, cookie: &str) -> String {
    get_until(port, path, cookie, std::time::Duration::from_secs(30), |_| false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_view_hides_secrets_unless_the_session_is_not_redacted() {
    use crate::support::{Serve, bridge, cli, free_port};
    let w = World::new();
    let port = free_port();
    let _serve = Serve::start(&w, &["--tcp", &port.to_string()]);
    let agent = bridge(&w, "alice").await;
    let gh = github();
    let (head, tail) = halves();
    agent.ok("session_create", json!({ "name": "w1" })).await;
    agent
        .ok("run", json!({ "session": "w1", "command": format!("echo {gh}; printf '{head}\\e[1m{tail}\\e[0m\\n'") }))
        .await;
    // Output that the screen wraps in the middle of the token.
    agent.ok("run", json!({ "session": "w1", "command": format!("printf '%100s%s\\n' '' {gh}") })).await;
    agent.ok("session_create", json!({ "name": "w2", "redact": false })).await;
    agent.ok("run", json!({ "session": "w2", "command": format!("echo {gh}") })).await;

    // A signed-in browser's cookie, as `web` links give.
    let link = cli(&w, &["web", "--no-open"]).ok().trim().to_string();
    let login = get(port, link.trim_start_matches(&format!("http://127.0.0.1:{port}")), "").await;
    let cookie = login
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .and_then(|c| c.split(';').next())
        .unwrap_or_else(|| panic!("no cookie in:\n{login}"))
        .to_string();

    let lines = get(port, "/web/s/w1/lines?from=1&count=200", &cookie).await;
    assert_clean(&lines, &[&head, &tail]);
    assert_has!(lines, "‹secret:github-token:1›");
    let found = get(port, "/web/s/w1/search?q=ghp_", &cookie).await;
    assert_clean(&found, &[&head, &tail]);
    assert_has!(found, "\"total\":");
    assert_has!(found, "‹secret:github-token:1›");
    let regions = get(port, "/web/s/w1/regions?before=1000", &cookie).await;
    assert_clean(&regions, &[&head, &tail]);
    assert_has!(regions, "echo ‹secret:github-token:1›");
    // The live page: screen rows, card and timeline, and the overview's cards.
    let whole = std::time::Duration::from_secs(30);
    let first = |s: &str| ["event: screen", "event: card", "event: regions"].iter().all(|e| s.contains(e));
    let live = get_until(port, "/web/s/w1/events", &cookie, whole, first).await;
    assert_has!(live, "event: screen");
    assert_clean(&live, &[&head, &tail]);
    assert_has!(live, "‹secret:github-token:1›");
    let both = |s: &str| s.contains("\"name\":\"w1\"") && s.contains("\"name\":\"w2\"");
    let overview = get_until(port, "/web/overview", &cookie, whole, both).await;
    assert!(both(&overview), "the overview shows both sessions:\n{overview}");
    // w2's card shows its text as it is (however its screen wraps it).
    assert_clean(&without_card(&overview, "w2"), &[&head, &tail]);

    // A session made with redact=false shows its text as it is.
    let lines = get(port, "/web/s/w2/lines?from=1&count=200", &cookie).await;
    assert_has!(lines, gh);
    agent.stop().await;
}

/// A reply's facts carry text from the session too, such as a background
/// job's command line: they are redacted with the reply's text, one table
/// for both, and hold the same placeholder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_in_a_background_jobs_command_line_is_hidden_in_the_facts_too() {
    let w = World::new();
    let s = w.server().await;
    s.create("j1").await;
    let gh = github();
    // The pause lets the job's fork of bash become `sh` before the reply
    // looks at it.
    let r = s.call("run", json!({"session": "j1", "command": format!("sh -c 'sleep 30' {gh} & sleep 0.3")})).await;
    assert!(!r.is_error, "{}", r.text);
    assert_clean(&r.text, &[&gh]);
    assert_has!(r.text, "‹secret:github-token:1›");
    let facts = r.structured.expect("structuredContent").to_string();
    assert!(!facts.contains(&gh), "{facts}");
    assert_has!(facts, "‹secret:github-token:1›");
    assert_has!(facts, "\"redactions\":");
    s.run("j1", "kill %1; wait").await;
}
