//! The worst a pane can print: a flood with a person attached, garbage
//! bytes, escape sequences aimed at whoever reads the replies, and forged
//! or replayed shell-integration markers. The router stays up, bounded and
//! clean, and believes no marker without the session's secret.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{raw_holds, signal, through_terminal};
use crate::assert_has;
use crate::support::raw::{RawClient, assert_no_control_chars};
use crate::support::{Person, SERVER, World, logger_pid, regions, size, until_answering};

/// A field of `/proc/PID/status` counted in kB (`VmHWM:`, the peak
/// resident set), 0 if it cannot be read.
fn vm_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_with_a_person_attached_is_byte_exact_bounded_in_memory_and_stops_on_ctrl_c() {
    let mb: u64 = size("MB of the byte-exact flood with a person attached", 20, 2000);
    let secs: u64 = size("seconds of yes with a person attached", 3, 60);
    let w = World::new();
    let s = w.server().await;
    s.create("f1").await;
    let dir = w.session_dir("f1");
    let person = Person::attach(&w, "f1");
    // Byte-exact: a known file through the pane, found whole in raw.log.
    let file = w.tmp.path().join("flood.txt");
    let made = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("head -c {} /dev/urandom | base64 -w 76 > '{}'", mb * 750_000, file.display()))
        .status()
        .expect("flood file");
    assert!(made.success());
    let r = s.ok("run", json!({"session": "f1", "command": format!("cat '{}'", file.display()), "timeout": 600})).await;
    assert_has!(r, "exit 0");
    assert!(raw_holds(&dir, &through_terminal(&file)), "raw.log is not byte-exact");
    // A flood that does not end: ctrl+c must get through quickly.
    let r = s.ok("run", json!({"session": "f1", "command": "yes flood-line", "timeout": secs as f64})).await;
    assert_has!(r, "still running");
    let started = Instant::now();
    let r = s.ok("send", json!({"session": "f1", "keys": ["ctrl+c"]})).await;
    let w8 = s.ok("wait", json!({"session": "f1", "timeout": 10})).await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(2), "ctrl+c took {took:?}: {r}\n{w8}");
    assert_has!(s.run("f1", "echo after-flood").await, "after-flood");
    let rss = vm_kb(s.pid(), "VmHWM:");
    eprintln!("a flood with a person attached: router peak RSS {rss} kB after {mb} MB and {secs} s of yes");
    assert!(rss < 64 * 1024, "router peak RSS {rss} kB");
    drop(person);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_garbage_split_utf8_nul_c1_and_a_huge_osc_are_survived() {
    let w = World::new();
    let mut c = RawClient::start(&[], &w.env()).await;
    let t = Duration::from_secs(60);
    let (r, err) = c.call("session_create", json!({"name": "b1"}), t).await;
    assert!(!err, "{r}");
    let lines = [
        // Fixed bytes, not /dev/urandom: random data now and then holds a
        // terminal question whose answer tmux types at the next prompt in a
        // form the stray-answer check does not know yet (seen once: sixty
        // spaces and two invalid bytes), and a lottery has no place in CI.
        "python3 -c 'import random,sys; r=random.Random(7); sys.stdout.buffer.write(r.randbytes(300000))'; echo",
        "printf '\\xe6\\x97'; sleep 0.2; printf '\\xa5\\xe6\\x9c\\xac split\\n'",
        "printf 'nul:\\0:\\0\\0:end\\n'",
        "printf 'c1:\\x9b31m:\\xc2\\x9b:\\x85:bad\\xff\\xfeutf8\\n'",
        "printf '\\033]0;'; head -c 1048576 /dev/zero | tr '\\0' a; echo; echo osc-survived",
    ];
    for l in lines {
        let (text, err) = c.call("run", json!({"session": "b1", "command": l, "timeout": 60}), t).await;
        assert!(!err, "{l}: {text}");
        assert_no_control_chars(l, &text);
    }
    let (text, _) = c.call("run", json!({"session": "b1", "command": "echo still-$((2+2))"}), t).await;
    assert_has!(text, "still-4");
    let (cooked, err) = c.call("read", json!({"session": "b1", "view": "cooked"}), t).await;
    assert!(!err, "{cooked}");
    assert_no_control_chars("cooked", &cooked);
    assert_has!(cooked, "日本 split");
    assert_has!(cooked, "\u{fffd}");
    for view in ["screen", "raw"] {
        let (text, err) = c.call("read", json!({"session": "b1", "view": view}), t).await;
        assert!(!err, "{view}: {text}");
        assert_no_control_chars(view, &text);
    }
    let (found, _) = c.call("search", json!({"session": "b1", "pattern": "utf8"}), t).await;
    assert_no_control_chars("search", &found);
    let dir = w.session_dir("b1");
    assert!(logger_pid(&dir).is_some(), "the logger died");
    let text = std::fs::read_to_string(dir.join("session.txt")).expect("session.txt is UTF-8");
    assert_has!(text, "osc-survived");
    assert!(c.received.iter().all(|m| m.get("error").is_none()), "a protocol error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_injection_never_reaches_a_reply_or_the_server_log() {
    let w = World::new();
    let log = w.tmp.path().join("server.log");
    let mut child = std::process::Command::new(SERVER)
        .arg("serve")
        .envs(w.env())
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("serve");
    until_answering(&w);
    let socket = crate::support::socket_of(&w);
    let mut c = RawClient::start(&["connect", "--actor", "esc\u{1b}[31mred"], &w.env()).await;
    let t = Duration::from_secs(30);
    let (r, err) = c.call("session_create", json!({"name": "e1"}), t).await;
    assert!(!err, "{r}");
    let attacks = [
        "printf '\\033]52;c;ZWNobyBwd25lZA==\\a'; echo osc52",
        "printf '\\033]8;;http://evil.example/\\033\\\\link\\033]8;;\\033\\\\\\n'",
        "printf '\\033]0;title\\a\\033[21t\\033[20t\\033[>c\\033[6n'; echo reports",
        "printf '\\033P$q\"p\\033\\\\\\033P+q544e\\033\\\\'; echo decrqss",
        "printf 'bidi:\\xe2\\x80\\xaeevil\\xe2\\x80\\xac:\\xe2\\x81\\xa6x\\xe2\\x81\\xa9\\n'",
        "printf '\\x9b2J\\x9d0;c1title\\x07\\n'",
    ];
    let mut replies = Vec::new();
    for a in attacks {
        // The terminal's answers to the reports asked for land at the next
        // prompt; they are nobody's text, so no run is refused for them.
        let (text, err) = c.call("run", json!({"session": "e1", "command": a, "timeout": 10}), t).await;
        assert!(!err, "{a}: {text}");
        replies.push(text);
    }
    for view in ["cooked", "screen", "raw"] {
        replies.push(c.call("read", json!({"session": "e1", "view": view}), t).await.0);
    }
    replies.push(c.call("search", json!({"session": "e1", "pattern": "evil|title|bidi"}), t).await.0);
    replies.push(c.call("regions", json!({"session": "e1"}), t).await.0);
    for bad in ["x\u{1b}]0;pwn\u{7}", "a\u{9b}b", "\u{1b}[2J"] {
        let (text, err) = c.call("session_create", json!({"name": bad}), t).await;
        assert!(err, "a session named {bad:?} was made");
        replies.push(text);
    }
    replies.push(c.call("read", json!({"session": "\u{1b}[31m"}), t).await.0);
    replies.push(c.call("session_list", json!({}), t).await.0);
    for r in &replies {
        assert_no_control_chars("a reply", r);
        assert!(!r.contains('\u{202e}') && !r.contains('\u{2066}'), "a bidi override in a reply: {r:?}");
    }
    let (_, body) = crate::support::unix_get(&socket, "/api/sessions");
    assert_no_control_chars("/api/sessions", &body);
    signal(child.id() as i32, nix::sys::signal::Signal::SIGTERM);
    let _ = child.wait();
    let text = String::from_utf8_lossy(&std::fs::read(&log).expect("log")).into_owned();
    assert_no_control_chars("the server log", &text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_and_replayed_markers_make_no_region_or_status() {
    let w = World::new();
    let s = w.server().await;
    s.create("m1").await;
    let dir = w.session_dir("m1");
    assert_has!(s.run("m1", "echo genuine; (exit 3)").await, "exit 3");
    let before = std::fs::read_to_string(dir.join("regions.jsonl")).expect("regions").lines().count();
    let regions_before = regions::count(&dir);
    // Without the secret: markers with a made-up proof, sequence numbers
    // far ahead, and the shell's own pid.
    let forged = "p=$$; for k in A B C; do printf '\\033]133;%s;dtmcp=%s.99999999999999.12345\\a' $k $p; done; \
                  printf '\\033]133;D;77;dtmcp=%s.99999999999999.54321;ps=77\\a' $p; echo forged-done";
    let r = s.run("m1", forged).await;
    assert_has!(r, "exit 0");
    assert!(!r.contains("exit 77"), "{r}");
    // Replayed with it: the log itself catted (its markers carry the
    // secret's proofs, with used sequence numbers) and a child that reads
    // the secret from its environment and prints an old marker again.
    let r = s
        .run(
            "m1",
            &format!(
                "cat '{}' >/dev/null; cat '{}' | head -c 20000; echo",
                dir.join("raw.log").display(),
                dir.join("raw.log").display()
            ),
        )
        .await;
    assert_has!(r, "exit 0");
    let replay = "python3 -c 'import os,re,sys; raw=open(sys.argv[1],\"rb\").read(); \
                  m=re.findall(rb\"\\x1b]133;D;[^\\x07]*\\x07\", raw); sys.stdout.buffer.write(m[0] if m else b\"\"); \
                  print(\"nonce-len\", len(os.environ.get(\"__DTMCP_NONCE\",\"\")))' ";
    let r = s.run("m1", &format!("{replay}'{}'", dir.join("raw.log").display())).await;
    assert_has!(r, "exit 0");
    assert_has!(r, "nonce-len");
    // Each command above is one region; nothing phantom appeared.
    assert_eq!(
        regions::count(&dir),
        regions_before + 3,
        "{}",
        std::fs::read_to_string(dir.join("regions.jsonl")).unwrap_or_default()
    );
    let text = std::fs::read_to_string(dir.join("regions.jsonl")).expect("regions");
    assert!(!text.contains("\"exit\":77"), "a forged status was believed: {text}");
    assert!(text.lines().count() > before);
    assert_has!(s.run("m1", "(exit 5)").await, "exit 5");
}
