//! The hardening of issue 37, seen from outside: secrets cut by a window
//! of any view or split by invisible characters and tabs, `save_to`
//! through a hard link, a session whose program is not found, the people's
//! `--redact`, and connections that never finish a request.

use serde_json::json;

use crate::support::{Server, World};

/// A GitHub token of the classic shape, made up.
const GH: &str = "ghp_opG6vx7AjG5PaUuBx9Kc2LmN4pQ8rS1tU3vW";
/// A JWT, made up.
const JWT: &str = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
/// The full lines of a made-up private key.
const PEM: [&str; 3] = [
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7dF3xK9pLm2Qw",
    "Tz8sR4vB1nHc6yJ0eWqL5mKp2oXu9gAiD3fE7hN4jS1kV8bM6cY0aZ5rU2tQ7xWe",
    "pL3mN8qR2sT6vW0xY4zA7bC1dE5fG9hJ2kL6mN0pQ4rS8tU1vW5xY9zA3bC7dE1f",
];

/// The first run of `n` characters of `value` that `text` shows, if any.
fn run_shown(text: &str, value: &str, n: usize) -> Option<String> {
    let chars: Vec<char> = value.chars().collect();
    chars.windows(n).map(|w| w.iter().collect::<String>()).find(|run| text.contains(run.as_str()))
}

/// Asserts that `text` shows no `n` characters in a row of any of `values`.
fn assert_hidden(text: &str, values: &[&str], n: usize, what: &str) {
    for v in values {
        if let Some(run) = run_shown(text, v, n) {
            panic!("{what} shows {run:?} of {v:?}:\n{text}");
        }
    }
}

/// A session `name` whose work directory holds `secrets.txt`: a token, a
/// JWT and a private key, each on lines of their own.
async fn session_with_secrets(s: &Server, w: &World, name: &str) {
    let work = w.tmp.path().join(format!("work-{name}"));
    std::fs::create_dir_all(&work).expect("work dir");
    let key = format!("-----BEGIN PRIVATE KEY-----\n{}\nAb12==\n-----END PRIVATE KEY-----", PEM.join("\n"));
    std::fs::write(work.join("secrets.txt"), format!("token {GH} here\njwt: {JWT}\n{key}\n")).expect("secrets");
    s.ok("session_create", json!({ "name": name, "cwd": work.display().to_string() })).await;
}

/// Every raw window of `width` bytes that starts, or ends, at each byte of
/// `value` in the raw log of session `name`: none shows eight characters
/// of it in a row.
async fn raw_windows_hide(s: &Server, w: &World, name: &str, value: &str, width: u64) {
    let raw = std::fs::read(w.session_dir(name).join("raw.log")).expect("raw.log");
    let at = memchr::memmem::rfind(&raw, value.as_bytes()).expect("the value is in raw.log") as u64;
    for n in at..at + value.len() as u64 {
        let mut windows = vec![n];
        if n >= width {
            windows.push(n - width);
        }
        for from in windows {
            let args = json!({ "session": name, "view": "raw", "from_byte": from, "bytes": width });
            let out = s.ok("read", args).await;
            assert_hidden(&out, &[value], 8, &format!("raw bytes {from}+{width}"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_windows_starting_or_ending_inside_a_secret_show_none_of_it() {
    let w = World::new();
    let s = w.server().await;
    session_with_secrets(&s, &w, "win1").await;
    // Printed, never shown whole in a reply: the session has not learnt
    // the values, and each window must be judged with its lines around it.
    let out = s.ok("run", json!({ "session": "win1", "command": "cat secrets.txt; echo end", "last_lines": 1 })).await;
    assert_hidden(&out, &[GH, JWT, PEM[0]], 8, "the run");
    raw_windows_hide(&s, &w, "win1", GH, 20).await;
    raw_windows_hide(&s, &w, "win1", JWT, 20).await;
    raw_windows_hide(&s, &w, "win1", PEM[1], 20).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_lines_cut_by_a_read_or_a_search_and_a_screens_top_row_hide_their_secret() {
    let w = World::new();
    let s = w.server().await;
    let work = w.tmp.path().join("work-win2");
    std::fs::create_dir_all(&work).expect("work dir");
    // A line of 2,046 characters: a reply shows its first 2,000, and the
    // token stands across that cut; a search shows 300, cut the same way.
    std::fs::write(work.join("long.txt"), format!("{}{GH} after\n", " ".repeat(1980))).expect("long.txt");
    std::fs::write(work.join("hit.txt"), format!("{} {JWT}\n", "x".repeat(289))).expect("hit.txt");
    // A JWT that wraps at the right edge of the 120 columns, and enough
    // lines after it that its first row scrolls away: the screen's top row
    // starts inside it.
    std::fs::write(work.join("wrap.txt"), format!("{}{JWT}\n", " ".repeat(100))).expect("wrap.txt");
    s.ok("session_create", json!({ "name": "win2", "cwd": work.display().to_string() })).await;
    for file in ["long.txt", "hit.txt"] {
        let out = s
            .ok("run", json!({ "session": "win2", "command": format!("cat {file}; echo end"), "last_lines": 1 }))
            .await;
        assert_hidden(&out, &[GH, JWT], 8, "the run");
    }
    let out = s.ok("read", json!({ "session": "win2", "from_line": 1 })).await;
    assert_hidden(&out, &[GH], 8, "a read of the long line");
    let found = s.ok("search", json!({ "session": "win2", "pattern": "^x+ eyJ" })).await;
    assert_hidden(&found, &[JWT], 8, "a search hit");
    assert!(found.contains("1 line"), "{found}");

    s.run("win2", "clear").await;
    s.ok("run", json!({ "session": "win2", "command": "cat wrap.txt; seq 38", "last_lines": 1 })).await;
    let screen = s.ok("read", json!({ "session": "win2", "view": "screen" })).await;
    assert!(!screen.contains("cat wrap.txt"), "the command's row scrolled away:\n{screen}");
    assert_hidden(&screen, &[JWT], 8, "the screen");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_named_secret_in_one_line_is_hidden_in_every_line_of_the_same_reply() {
    let w = World::new();
    let s = w.server().await;
    let work = w.tmp.path().join("work-aws1");
    std::fs::create_dir_all(&work).expect("work dir");
    let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    let text = format!(
        "AKIAIOSFODNN7EXAMPLE {secret}\n[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\n\
         aws_secret_access_key = {secret}\nregion = eu-west-1\noutput = json\naws configure: {secret}\n"
    );
    std::fs::write(work.join("creds.txt"), text).expect("creds.txt");
    s.ok("session_create", json!({ "name": "aws1", "cwd": work.display().to_string() })).await;
    // The first reply that meets the value: only one line names it secret.
    let out = s.run("aws1", "cat creds.txt").await;
    assert_hidden(&out, &[secret], 8, "the first reply");
    assert!(out.contains("aws configure: ‹secret:aws-secret-key:1›"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_split_by_an_invisible_character_or_a_tab_stays_hidden() {
    let w = World::new();
    let s = w.server().await;
    let work = w.tmp.path().join("work-inv1");
    std::fs::create_dir_all(&work).expect("work dir");
    let (head, tail) = GH.split_at(17);
    let gaps = ['\u{200b}', '\u{200c}', '\u{200d}', '\u{2060}', '\u{feff}', '\u{ad}', '\t'];
    let text: String = gaps.iter().enumerate().map(|(i, gap)| format!("key{i} {head}{gap}{tail} done\n")).collect();
    std::fs::write(work.join("inv.txt"), text).expect("inv.txt");
    s.ok("session_create", json!({ "name": "inv1", "cwd": work.display().to_string() })).await;
    let out = s.run("inv1", "cat inv.txt").await;
    assert_hidden(&out, &[head, tail], 8, "the run");
    for i in 0..gaps.len() {
        assert!(out.contains(&format!("key{i} ‹secret:github-token:1› done")), "line {i}:\n{out}");
    }
    let raw = s.ok("read", json!({ "session": "inv1", "view": "raw" })).await;
    assert_hidden(&raw, &[head, tail], 8, "the raw view");
    let screen = s.ok("read", json!({ "session": "inv1", "view": "screen" })).await;
    assert_hidden(&screen, &[head, tail], 8, "the screen");
    let found = s.ok("search", json!({ "session": "inv1", "pattern": "done$" })).await;
    assert_hidden(&found, &[head, tail], 8, "a search");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn save_to_refuses_a_second_name_of_a_file_and_process_memory() {
    let w = World::new();
    let s = w.server().await;
    s.create("sv1").await;
    let meta = w.session_dir("sv1").join("meta.json");
    let before = std::fs::read(&meta).expect("meta.json");
    let outside = w.tmp.path().join("outside");
    std::fs::create_dir_all(&outside).expect("dir");
    let link = outside.join("x");
    std::fs::hard_link(&meta, &link).expect("a hard link out of the state home");
    let args = json!({ "session": "sv1", "command": "echo overwritten", "save_to": link.display().to_string(), "overwrite": true });
    let refused = s.err("run", args).await;
    assert!(refused.contains("2 names"), "{refused}");
    assert_eq!(std::fs::read(&meta).expect("meta.json"), before, "meta.json keeps its bytes");
    let args = json!({ "session": "sv1", "command": "echo x", "save_to": "/proc/self/mem", "overwrite": true });
    assert!(s.err("run", args).await.contains("/proc"));
    // The session goes on as before.
    assert!(s.run("sv1", "echo still-here").await.contains("still-here"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_whose_program_is_not_found_says_so_instead_of_ready() {
    let w = World::new();
    let s = w.server().await;
    let said = s.err("session_create", json!({ "name": "nx1", "command": "/nonexistent" })).await;
    assert!(!said.contains("ready"), "{said}");
    assert!(said.contains("did not start") && said.contains("not found"), "{said}");
    // A program that runs is ready as before.
    let ok = s.ok("session_create", json!({ "name": "nx2", "command": "cat" })).await;
    assert!(ok.contains("ready"), "{ok}");
}

/// Runs the command line with `args` in `w`'s environment; its stdout.
fn people(w: &World, args: &[&str]) -> String {
    crate::support::cli(w, args).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_people_commands_show_secrets_to_their_person_and_hide_them_with_redact() {
    let w = World::new();
    let s = w.server().await;
    s.create("pp1").await;
    s.run("pp1", &format!("echo token {GH}")).await;
    for args in [&["show", "pp1"][..], &["tail", "pp1"], &["search", "pp1", "token"]] {
        assert!(people(&w, args).contains(GH), "{args:?} shows the log as it is");
        let mut redacted = args.to_vec();
        redacted.push("--redact");
        let out = people(&w, &redacted);
        assert_hidden(&out, &[GH], 8, &format!("{redacted:?}"));
        assert!(out.contains("‹secret:github-token:1›"), "{redacted:?}:\n{out}");
    }
}

/// Lets the process `cmd` starts open `n` files at most (soft and hard).
fn open_files_at_most(cmd: &mut std::process::Command, n: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec and only
    // makes the setrlimit system call, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, n, n)
                .map_err(std::io::Error::from)
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_never_finish_a_request_starve_nobody() {
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};

    use crate::support::serve::tcp_http;
    use crate::support::{Serve, bridge, free_port, request, unix_get};

    let w = World::new();
    let port = free_port();
    // 256 files at most: without a cap, 300 idle connections take them all.
    let serve = Serve::start_with(&w, &["--tcp", &port.to_string()], |cmd| open_files_at_most(cmd, 256));

    // A request line sent in part is closed once the header time is out.
    let mut slow = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    slow.write_all(b"GET /health HT").expect("write");
    slow.set_read_timeout(Some(Duration::from_secs(25))).expect("timeout");
    let started = Instant::now();
    let mut rest = Vec::new();
    let _ = slow.read_to_end(&mut rest);
    assert!(started.elapsed() < Duration::from_secs(20), "the half-sent request was held {:?}", started.elapsed());

    // 300 connections that send nothing, or half a request line.
    let mut held = Vec::new();
    for i in 0..300 {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        if i % 2 == 0 {
            let _ = c.write_all(b"POST /mcp HTTP/1.1\r\nhost: localhost\r\n");
        }
        held.push(c);
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(unix_get(&serve.socket, "/health").0, 200, "/health on the socket");
    let agent = bridge(&w, "alice").await;
    let listed = agent.call("session_list", json!({})).await;
    assert!(!listed.is_error, "{}", listed.text);
    let host = format!("127.0.0.1:{port}");
    assert_eq!(tcp_http(port, &request("GET", "/health", &[("host", &host)], "")).0, 200, "/health on TCP");
    // The oldest of them were closed to make room.
    let mut closed = 0;
    for c in &mut held {
        let _ = c.set_read_timeout(Some(Duration::from_millis(50)));
        if matches!(c.read(&mut [0u8; 64]), Ok(0)) {
            closed += 1;
        }
    }
    assert!(closed >= 200, "only {closed} of 300 idle connections were closed");
}

#[test]
fn json_rpc_that_is_no_message_or_no_call_gets_a_json_rpc_error() {
    use crate::serve::mcp_headers;
    use crate::support::{Serve, request, unix_http};

    let w = World::new();
    let serve = Serve::start(&w, &[]);
    let post = |body: &str| {
        let (status, _, text) =
            unix_http(&serve.socket, &request("POST", "/mcp", &mcp_headers(&[("host", "x")]), body));
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {status} {text}"));
        (status, v["error"]["code"].as_i64(), v["error"]["message"].as_str().unwrap_or_default().to_string())
    };
    let (status, code, _) = post("{not json");
    assert_eq!((status, code), (400, Some(-32700)));
    let (status, code, why) = post(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#);
    assert_eq!((status, code), (400, Some(-32700)));
    assert!(why.contains("batch"), "{why}");
    let call = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run","arguments":"echo hi"}}"#;
    let (_, code, why) = post(call);
    assert_eq!(code, Some(-32602), "{why}");
    assert!(why.contains("`arguments` must be an object"), "{why}");
}
