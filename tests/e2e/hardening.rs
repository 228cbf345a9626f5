//! The hardening of issue 37, seen from outside: secrets cut by a window
//! of any view or split by invisible characters and tabs, `save_to`
//! through a hard link, a session whose program is not found, the people's
//! `--redact`, and connections that never finish a request.

use serde_json::json;

use crate::harness::{Server, World};

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
