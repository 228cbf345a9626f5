//! What listens in a session, with real servers: `run`/`wait` with
//! `port=` and `listening=true`, the reply's lines about ports opened and
//! closed, background jobs, `session_list`, `/api/sessions` and `dtmcp ls`,
//! and a session inside ssh whose far ports are not seen. Every port is
//! found free by binding port 0 first.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Serve, World, cli, free_port, installed, poll, unix_get};
use crate::{assert_has, needs};

/// A reply's text and structured result.
async fn call(s: &crate::support::Server, tool: &str, args: Value) -> (String, Value) {
    let r = s.call(tool, args).await;
    assert!(!r.is_error, "{tool} failed: {}", r.text);
    (r.text, r.structured.unwrap_or(Value::Null))
}

/// Whether something answers a TCP connection on loopback `port`.
fn answers(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1)).is_ok()
}

/// The acceptance case: `run python3 -m http.server PORT port=PORT` comes
/// back once it binds, naming the port and the process, and
/// `session_list`, `/api/sessions` and `dtmcp ls` show it; a `ctrl+c`
/// releases it and the next reply says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_with_port_returns_once_python_listens_and_every_listing_shows_it() {
    needs!("python3");
    let w = World::new();
    let serve = Serve::start(&w, &[]);
    let s = crate::support::bridge(&w, "alice").await;
    s.create("t1").await;
    let port = free_port();
    let started = Instant::now();
    let command = format!("python3 -m http.server {port} --bind 127.0.0.1");
    let (r, data) = call(&s, "run", json!({"session": "t1", "command": command, "port": port, "timeout": 20})).await;
    let took = started.elapsed();
    println!("run port={port} came back after {took:?}");
    assert_has!(r, &format!("port {port} is listening: 127.0.0.1:{port} (python3 -m http.server {port}"));
    assert_has!(r, "It keeps running");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(answers(port), "the server is up");
    assert_eq!(data["state"], "running", "{data}");
    assert_eq!(data["now_listening"][0]["port"], port, "{data}");
    assert_eq!(data["now_listening"][0]["connect"], format!("127.0.0.1:{port}"), "{data}");
    let pid = data["now_listening"][0]["pid"].as_i64().expect("pid");
    assert_has!(r, &format!("pid {pid}"));
    // Told once: the next reply does not say it again.
    let (again, _) = call(&s, "wait", json!({"session": "t1", "timeout": 0.3})).await;
    assert!(!again.contains("listening:"), "said twice:\n{again}");

    let (listed, data) = call(&s, "session_list", json!({})).await;
    assert_has!(listed, &format!("listening: 127.0.0.1:{port} (python3 -m http.server {port}"));
    assert_eq!(data["sessions"][0]["listening"][0]["port"], port, "{data}");
    let (_, body) = unix_get(&serve.socket, "/api/sessions");
    let api: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(api["sessions"][0]["listening"][0]["port"], port, "{body}");
    let ls = cli(&w, &["ls"]).ok();
    assert_has!(ls, &format!("127.0.0.1:{port}"));
    let json_ls: Value = serde_json::from_str(&cli(&w, &["ls", "--json"]).ok()).expect("ls --json");
    assert_eq!(json_ls[0]["listening"][0]["port"], port, "{json_ls}");

    s.ok("send", json!({"session": "t1", "keys": ["ctrl+c"]})).await;
    let (r, data) = call(&s, "run", json!({"session": "t1", "command": "true"})).await;
    assert_has!(r, &format!("stopped listening: 127.0.0.1:{port}"));
    assert_eq!(data["stopped_listening"][0]["port"], port, "{data}");
    assert!(!answers(port), "released");
}

/// `wait port=` comes back within a short time of the bind: the server
/// writes the moment it bound, the test the moment the reply came.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_a_port_returns_soon_after_the_bind() {
    needs!("python3");
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let port = free_port();
    let stamp = w.tmp.path().join("bound-at");
    let script = format!(
        "import socket,time; time.sleep(1.5); s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); \
         s.bind(('127.0.0.1',{port})); s.listen(); open('{}','w').write(repr(time.time())); print('bound', flush=True); time.sleep(60)",
        stamp.display()
    );
    s.leave_running("t1", &format!("python3 -c \"{script}\"")).await;
    let (r, _) = call(&s, "wait", json!({"session": "t1", "port": port, "timeout": 20})).await;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs_f64();
    let bound: f64 = std::fs::read_to_string(&stamp).expect("the bind's time").trim().parse().expect("a time");
    let after = Duration::from_secs_f64((now - bound).max(0.0));
    println!("wait port={port} came back {after:?} after the bind");
    assert_has!(r, &format!("port {port} is listening"));
    assert!(after < Duration::from_secs(1), "{after:?} after the bind:\n{r}");
    s.ok("send", json!({"session": "t1", "keys": ["ctrl+c"]})).await;
}

/// Port 0 (the kernel picks), `listening=true`: the reply names the port
/// it got.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listening_true_finds_the_port_the_kernel_chose() {
    needs!("python3");
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let command = "python3 -m http.server 0 --bind 127.0.0.1";
    let (r, data) =
        call(&s, "run", json!({"session": "t1", "command": command, "listening": true, "timeout": 20})).await;
    assert_has!(r, "now listening: 127.0.0.1:");
    let port = data["now_listening"][0]["port"].as_u64().expect("a port") as u16;
    assert!(port > 0 && answers(port), "{data}");
    s.ok("send", json!({"session": "t1", "keys": ["ctrl+c"]})).await;
}

/// `nc -l` and a node server are found as well as python's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nc_and_node_listeners_are_named() {
    needs!("nc");
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let port = free_port();
    let (r, _) = call(
        &s,
        "run",
        json!({"session": "t1", "command": format!("nc -l 127.0.0.1 {port}"), "port": port, "timeout": 20}),
    )
    .await;
    assert_has!(r, &format!("port {port} is listening: 127.0.0.1:{port} (nc -l 127.0.0.1 {port}, pid "));
    s.ok("send", json!({"session": "t1", "keys": ["ctrl+c"]})).await;
    if !installed("node") {
        println!("skipped the node server: node is not installed");
        return;
    }
    let port = free_port();
    let js = format!("require('http').createServer((q, r) => r.end('hi')).listen({port}, '127.0.0.1')");
    let (r, _) =
        call(&s, "run", json!({"session": "t1", "command": format!("node -e \"{js}\""), "port": port, "timeout": 20}))
            .await;
    assert_has!(r, &format!("port {port} is listening: 127.0.0.1:{port} (node -e"));
    s.ok("send", json!({"session": "t1", "keys": ["ctrl+c"]})).await;
}

/// A server started with `&`: the command line ends at once, the call
/// follows the job it left until it listens; `session_list` lists the job;
/// once it is killed, the reply says the job ended and the port closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_in_the_background_is_waited_for_and_listed_as_a_job() {
    needs!("python3");
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let port = free_port();
    let command = format!("python3 -m http.server {port} --bind 127.0.0.1 >/dev/null 2>&1 &");
    let (r, _) = call(&s, "run", json!({"session": "t1", "command": command, "port": port, "timeout": 20})).await;
    assert_has!(r, &format!("port {port} is listening: 127.0.0.1:{port}"));
    let (listed, data) = call(&s, "session_list", json!({})).await;
    assert_has!(listed, "background jobs: pid ");
    assert_has!(listed, &format!("`python3 -m http.server {port} --bind 127.0.0.1` listening on 127.0.0.1:{port}"));
    let job = &data["sessions"][0]["jobs"][0];
    assert_eq!(job["listening"][0], format!("127.0.0.1:{port}"), "{data}");
    let (r, data) = call(&s, "run", json!({"session": "t1", "command": "kill %1; wait"})).await;
    assert_has!(r, &format!("stopped listening: 127.0.0.1:{port}"));
    assert_has!(r, "background job ended: pid ");
    assert!(data.get("jobs").is_none(), "{data}");
}

/// A server inside a nested `bash` belongs to the session too; two
/// sessions each list their own port and not the other's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_shell_and_two_sessions_keep_their_ports_apart() {
    needs!("python3");
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    s.create("t2").await;
    s.ok("run", json!({"session": "t1", "command": "bash", "timeout": 5})).await;
    let (p1, p2) = (free_port(), free_port());
    for (name, port) in [("t1", p1), ("t2", p2)] {
        let command = format!("python3 -m http.server {port} --bind 127.0.0.1");
        let (r, _) = call(&s, "run", json!({"session": name, "command": command, "port": port, "timeout": 20})).await;
        assert_has!(r, &format!("port {port} is listening"));
    }
    let (_, data) = call(&s, "session_list", json!({})).await;
    let sessions = data["sessions"].as_array().cloned().unwrap_or_default();
    let ports_of = |name: &str| -> Vec<u64> {
        let row = sessions.iter().find(|r| r["name"] == name).cloned().unwrap_or_default();
        row["listening"].as_array().map(|l| l.iter().filter_map(|x| x["port"].as_u64()).collect()).unwrap_or_default()
    };
    assert_eq!(ports_of("t1"), vec![u64::from(p1)], "{data}");
    assert_eq!(ports_of("t2"), vec![u64::from(p2)], "{data}");
    for name in ["t1", "t2"] {
        s.ok("send", json!({"session": name, "keys": ["ctrl+c"]})).await;
    }
}

/// A command that fails before it listens is reported at once, with its
/// exit status, not at the timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_fails_before_listening_comes_back_at_once() {
    needs!("python3");
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let port = free_port();
    let started = Instant::now();
    let command = "python3 -c 'import sys; print(\"no config\"); sys.exit(3)'";
    let (r, data) = call(&s, "run", json!({"session": "t1", "command": command, "port": port, "timeout": 30})).await;
    let took = started.elapsed();
    println!("a failing command came back after {took:?}");
    assert_has!(r, "exit 3");
    assert_has!(r, &format!("nothing listened on port {port}: the command ended first"));
    assert_eq!(data["exit_code"], 3, "{data}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    // At the prompt with nothing behind it, a wait for a port says so at once.
    let (r, _) = call(&s, "wait", json!({"session": "t1", "port": port, "timeout": 30})).await;
    assert_has!(r, "nothing runs there that could");
    let bad = s.err("run", json!({"session": "t1", "command": "true", "port": 70000})).await;
    assert_has!(bad, "port must be between 1 and 65535");
}

/// Inside ssh the far side's processes are not this host's to look at: the
/// reply and the listing say so, and guess no port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ports_inside_ssh_are_said_to_be_out_of_sight() {
    needs!("python3");
    let sshd = match crate::remote::Sshd::start() {
        Ok(d) => d,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let login = format!("ssh -t {} 127.0.0.1", sshd.line());
    let (r, _) = call(&s, "run", json!({"session": "t1", "command": login, "timeout": 15})).await;
    assert_has!(r, "(ports opened on 127.0.0.1 via ssh are not seen: that /proc is not this host's)");
    let port = free_port();
    let command = format!("python3 -m http.server {port} --bind 127.0.0.1");
    let (r, data) = call(&s, "run", json!({"session": "t1", "command": command, "timeout": 2})).await;
    poll::until("the far server", Duration::from_secs(10), || if answers(port) { Ok(()) } else { Err("not yet") });
    assert!(!r.contains(&format!("listening: 127.0.0.1:{port}")), "guessed:\n{r}");
    assert!(!r.contains("not seen"), "said twice:\n{r}");
    assert_eq!(data["ports_not_seen"][0], "127.0.0.1 via ssh", "{data}");
    let (listed, _) = call(&s, "session_list", json!({})).await;
    assert_has!(listed, "ports opened on 127.0.0.1 via ssh are not seen");
    assert!(!listed.contains(&format!("127.0.0.1:{port}")), "guessed:\n{listed}");
    s.ok("send", json!({"session": "t1", "keys": ["ctrl+c"]})).await;
    s.ok("send", json!({"session": "t1", "text": "exit", "keys": ["enter"]})).await;
}
