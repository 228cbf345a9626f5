//! The shared server: its Unix socket, TCP port, token, guards and API,
//! driven over real sockets; and the official Python MCP SDK against it.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::assert_has;
use crate::support::serve::tcp_http;
use crate::support::{
    Person, SERVER, Serve, World, bridge, free_port, mode, poll, request, socket_of, unix_get, unix_http,
    until_answering,
};

pub const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

pub fn mcp_headers<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut h = vec![("content-type", "application/json"), ("accept", "application/json, text/event-stream")];
    h.extend_from_slice(extra);
    h
}

#[test]
fn socket_and_token_are_private_and_health_names_the_server() {
    let world = World::new();
    let port = free_port().to_string();
    let serve = Serve::start(&world, &["--tcp", &port]);
    assert_eq!(mode(&serve.socket), 0o600, "socket mode");
    assert_eq!(mode(serve.socket.parent().expect("dir")), 0o700, "socket directory mode");
    let token_file = world.home().join("token");
    assert_eq!(mode(&token_file), 0o600, "token mode");
    let printed = Command::new(SERVER).arg("token").envs(world.env()).output().expect("token");
    let token = std::fs::read_to_string(&token_file).expect("token file");
    assert_eq!(String::from_utf8_lossy(&printed.stdout).trim(), token.trim());
    let (status, body) = unix_get(&serve.socket, "/health");
    assert_eq!(status, 200);
    let health: Value = serde_json::from_str(&body).expect("health is JSON");
    assert_eq!(health["service"], "docent-terminal-mcp");
    assert!(health["host"].as_str().is_some_and(|h| !h.is_empty()), "{health}");
    assert!(health["user"].as_str().is_some_and(|u| !u.is_empty()), "{health}");
    let first = health["instance"].as_str().expect("instance").to_string();
    // A second server on the same socket path is refused, even with another state home.
    let other = World::new();
    let mut env = other.env();
    env.push(("DOCENT_TERMINAL_MCP_SOCKET_PATH".into(), serve.socket.display().to_string()));
    let second = Command::new(SERVER).arg("serve").envs(env).output().expect("second serve");
    assert!(!second.status.success());
    assert_has!(String::from_utf8_lossy(&second.stderr), "already listens on");
    // A restart is a new instance.
    assert!(serve.stop().success());
    assert!(!socket_of(&world).exists(), "the socket is removed on shutdown");
    let again = Serve::start(&world, &[]);
    let (_, body) = unix_get(&again.socket, "/health");
    let health: Value = serde_json::from_str(&body).expect("health is JSON");
    assert_ne!(health["instance"].as_str().expect("instance"), first);
}

#[test]
fn tcp_wants_the_right_token_in_the_header_only() {
    let world = World::new();
    let port = free_port();
    let _serve = Serve::start(&world, &["--tcp", &port.to_string()]);
    let token = std::fs::read_to_string(world.home().join("token")).expect("token").trim().to_string();
    let host = format!("127.0.0.1:{port}");
    let right = format!("Bearer {token}");
    let api = |auth: Option<&str>| {
        let mut h = vec![("host", host.as_str())];
        if let Some(a) = auth {
            h.push(("authorization", a));
        }
        tcp_http(port, &request("GET", "/api/sessions", &h, ""))
    };
    let (status, headers, _) = api(None);
    assert_eq!(status, 401);
    assert!(headers.iter().any(|(k, v)| k == "www-authenticate" && v.starts_with("Bearer")), "{headers:?}");
    assert_eq!(api(Some("Bearer wrong")).0, 401);
    assert_eq!(api(Some(&format!("Bearer {}x", token))).0, 401);
    let (status, _, body) = api(Some(&right));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"sessions\""), "{body}");
    // Never in a URL, even the right one.
    let (status, _, _) =
        tcp_http(port, &request("GET", &format!("/api/sessions?token={token}"), &[("host", &host)], ""));
    assert_eq!(status, 400);
    // MCP itself: refused without the token, served with it.
    let (status, _, _) = tcp_http(port, &request("POST", "/mcp", &mcp_headers(&[("host", &host)]), INIT));
    assert_eq!(status, 401);
    let h = mcp_headers(&[("host", &host), ("authorization", &right)]);
    let (status, _, body) = tcp_http(port, &request("POST", "/mcp", &h, INIT));
    assert_eq!(status, 200, "{body}");
    assert_has!(body, "docent-terminal-mcp");
    // /health needs no token.
    assert_eq!(tcp_http(port, &request("GET", "/health", &[("host", &host)], "")).0, 200);
}

#[test]
fn foreign_origins_and_hosts_are_refused_on_every_route() {
    let world = World::new();
    let port = free_port();
    let serve = Serve::start(&world, &["--tcp", &port.to_string()]);
    let token = std::fs::read_to_string(world.home().join("token")).expect("token").trim().to_string();
    let auth = format!("Bearer {token}");
    let good_host = format!("localhost:{port}");
    for (method, path, body) in [("POST", "/mcp", INIT), ("GET", "/api/sessions", ""), ("GET", "/health", "")] {
        let base = mcp_headers(&[("authorization", &auth)]);
        let with = |extra: &[(&str, &str)]| {
            let mut h = base.clone();
            h.extend_from_slice(extra);
            request(method, path, &h, body)
        };
        let evil_host = tcp_http(port, &with(&[("host", "evil.example:8766")])).0;
        assert_eq!(evil_host, 403, "{path} with a foreign Host");
        let evil_origin = tcp_http(port, &with(&[("host", &good_host), ("origin", "https://evil.example")])).0;
        assert_eq!(evil_origin, 403, "{path} with a foreign Origin");
        let own_origin =
            tcp_http(port, &with(&[("host", &good_host), ("origin", &format!("http://localhost:{port}"))])).0;
        assert_eq!(own_origin, 200, "{path} with our own Origin");
        // Another local server's page is another origin.
        let next_port = format!("http://localhost:{}", port.wrapping_add(1));
        let other_port = tcp_http(port, &with(&[("host", &good_host), ("origin", &next_port)])).0;
        assert_eq!(other_port, 403, "{path} with an Origin on another port");
        let unix = unix_http(&serve.socket, &with(&[("host", "x"), ("origin", "https://evil.example")])).0;
        assert_eq!(unix, 403, "{path} on the socket with a foreign Origin");
    }
    // A non-loopback bind without allowed hosts does not start.
    let out = Command::new(SERVER)
        .args(["serve", "--tcp", "0", "--host", "0.0.0.0"])
        .envs(World::new().env())
        .output()
        .expect("serve");
    assert!(!out.status.success());
    assert_has!(String::from_utf8_lossy(&out.stderr), "--allowed-hosts");
}

#[test]
fn another_user_is_refused_even_with_loosened_modes() {
    if !nix::unistd::getuid().is_root() {
        eprintln!("skipped: connecting as another uid needs root (to switch to nobody)");
        return;
    }
    if !Path::new("/usr/bin/python3").exists() {
        eprintln!("skipped: needs /usr/bin/python3, which another user can run");
        return;
    }
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    // Loosen every mode on the way: only the peer check is left to refuse.
    for p in [world.tmp.path(), &world.tmp.path().join("run"), serve.socket.parent().expect("dir"), &serve.socket] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    let script = "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\n\
                  s.sendall(b'GET /health HTTP/1.1\\r\\nhost: x\\r\\nconnection: close\\r\\n\\r\\n')\n\
                  d=b''\nwhile True:\n  c=s.recv(4096)\n  if not c: break\n  d+=c\nprint(d.decode())";
    let out = std::os::unix::process::CommandExt::uid(
        Command::new("/usr/bin/python3").args(["-c", script]).arg(&serve.socket),
        65534,
    )
    .output()
    .expect("python as nobody");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "python as nobody failed: {}", String::from_utf8_lossy(&out.stderr));
    assert_has!(said, "403 Forbidden");
    assert_has!(said, "uid 65534");
    assert!(!said.contains("docent-terminal-mcp\""), "health leaked: {said}");
    // Our own user still gets in.
    assert_eq!(unix_get(&serve.socket, "/health").0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_lists_closes_and_sweeps() {
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    let agent = bridge(&world, "alice").await;
    agent.call("session_create", json!({"name": "api1"})).await;
    let r = agent.call("run", json!({"session": "api1", "command": "sleep 30", "timeout": 0.5})).await;
    assert!(!r.is_error, "{}", r.text);
    let (status, body) = unix_get(&serve.socket, "/api/sessions");
    assert_eq!(status, 200);
    let list: Value = serde_json::from_str(&body).expect("JSON");
    let s = &list["sessions"][0];
    assert_eq!(s["name"], "api1");
    assert_eq!(s["started_by"], "alice");
    // Times in ms since the epoch, as `ls --json` gives them.
    let now = dtmcp::config::now_ms();
    let recent = |v: &Value| v.as_u64().is_some_and(|t| t.abs_diff(now) < 600_000);
    assert!(recent(&s["agents_typed_ms"]["alice"]) && recent(&s["last_output_ms"]), "{s}");
    let ls = Command::new(SERVER).args(["ls", "--json"]).envs(world.env()).output().expect("ls");
    let ls: Value = serde_json::from_slice(&ls.stdout).expect("ls --json");
    assert_eq!(ls[0]["agents"][0]["typed_ms"], s["agents_typed_ms"]["alice"], "one unit: {ls} {s}");
    assert_eq!(s["running"]["started_by"], "alice", "{s}");
    assert_has!(s["attach"].as_str().expect("attach"), "attach -t api1");
    // A size set by an agent holds against people, and the list says so.
    assert_eq!(s["pinned"], false, "{s}");
    let resized = agent.call("session_resize", json!({"session": "api1", "cols": 70, "rows": 20})).await;
    assert!(!resized.is_error, "{}", resized.text);
    let (_, body) = unix_get(&serve.socket, "/api/sessions");
    let list: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(list["sessions"][0]["pinned"], true, "{body}");
    // Another agent may not close it while alice's command runs; a person may, with force.
    let bob = bridge(&world, "bob").await;
    let refused = bob.call("session_close", json!({"session": "api1"})).await;
    assert!(refused.is_error, "{}", refused.text);
    assert_has!(refused.text, "started by alice");
    assert_has!(refused.text, "close --force api1");
    let close = |force: &str| {
        request("POST", "/api/sessions/api1/close", &[("host", "x"), ("content-type", "application/json")], force)
    };
    assert_eq!(unix_http(&serve.socket, &close("{}")).0, 409);
    let (status, _, body) = unix_http(&serve.socket, &close(r#"{"force": true}"#));
    assert_eq!(status, 200, "{body}");
    let (_, body) = unix_get(&serve.socket, "/api/sessions");
    assert!(!body.contains("api1"), "{body}");
    let sweep = request("POST", "/api/sweep?dry_run=1", &[("host", "x")], "");
    let (status, _, body) = unix_http(&serve.socket, &sweep);
    assert_eq!(status, 200, "{body}");
    assert_has!(body, "\"dry_run\":true");
    let logs = request(
        "POST",
        "/api/sessions/api1/logs",
        &[("host", "x"), ("content-type", "application/json")],
        r#"{"action":"keep"}"#,
    );
    assert_eq!(unix_http(&serve.socket, &logs).0, 200);
    assert!(world.session_dir("api1").join("keep").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_force_on_the_command_line_closes_a_session_in_use() {
    let world = World::new();
    let _serve = Serve::start(&world, &[]);
    let agent = bridge(&world, "alice").await;
    agent.call("session_create", json!({"name": "f1"})).await;
    agent.call("run", json!({"session": "f1", "command": "sleep 30", "timeout": 0.3})).await;
    let plain = Command::new(SERVER).args(["close", "f1"]).envs(world.env()).output().expect("close");
    assert!(!plain.status.success());
    assert_has!(String::from_utf8_lossy(&plain.stderr), "is in use");
    let forced = Command::new(SERVER).args(["close", "--force", "f1"]).envs(world.env()).output().expect("close");
    assert!(forced.status.success(), "{}", String::from_utf8_lossy(&forced.stderr));
    assert_has!(String::from_utf8_lossy(&forced.stdout), "session f1 closed");
}

#[test]
fn the_official_python_sdk_drives_the_tcp_endpoint() {
    crate::needs!("python3");
    let python = match crate::support::python_sdk() {
        Ok(p) => p,
        Err(why) => {
            eprintln!("skipped: the Python MCP SDK is not available: {why}");
            return;
        }
    };
    let world = World::new();
    let port = free_port();
    let _serve = Serve::start(&world, &["--tcp", &port.to_string()]);
    let token = std::fs::read_to_string(world.home().join("token")).expect("token").trim().to_string();
    let script = r#"
import asyncio, sys
from mcp import ClientSession
import mcp.client.streamable_http as http

def connect(url, headers):
    # mcp 2 takes an HTTP client; mcp 1 took the headers.
    if hasattr(http, "streamable_http_client"):
        return http.streamable_http_client(url, http_client=http.create_mcp_http_client(headers=headers))
    return http.streamablehttp_client(url, headers=headers)

async def main(url, token):
    headers = {"Authorization": "Bearer " + token, "X-Terminal-Actor": "python-sdk"}
    async with connect(url, headers) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            tools = await session.list_tools()
            print("tools:", " ".join(sorted(t.name for t in tools.tools)))
            r = await session.call_tool("session_create", {"name": "py1"})
            print("create:", r.content[0].text)
            r = await session.call_tool("run", {"session": "py1", "command": "echo py-$((6*7))"})
            error = getattr(r, "is_error", getattr(r, "isError", None))
            print("run:", error, r.content[0].text)

asyncio.run(main(sys.argv[1], sys.argv[2]))
"#;
    let out = Command::new(&python)
        .args(["-c", script, &format!("http://127.0.0.1:{port}/mcp"), &token])
        .output()
        .expect("python");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "python failed: {said}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_has!(said, "session_create");
    assert_has!(said, "run: False");
    assert_has!(said, "py-42");
    let calls = std::fs::read_to_string(world.home().join("calls.log")).expect("calls.log");
    assert_has!(calls, "\"actor\":\"python-sdk\"");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_user_systemd_the_tmux_server_runs_in_a_scope_of_its_own() {
    let manager = Command::new("systemctl").args(["--user", "show-environment"]).output();
    if !manager.as_ref().is_ok_and(|o| o.status.success()) {
        let why = manager.map_or_else(|e| e.to_string(), |o| String::from_utf8_lossy(&o.stderr).trim().to_string());
        eprintln!("skipped: no user systemd manager answers `systemctl --user` here ({why})");
        return;
    }
    let world = World::new();
    let mut cmd = Command::new(SERVER);
    cmd.arg("serve").envs(world.env()).env("INVOCATION_ID", "0123456789abcdef").stdin(Stdio::null());
    let mut child = cmd.spawn().expect("serve");
    until_answering(&world);
    let agent = bridge(&world, "alice").await;
    let made = agent.call("session_create", json!({"name": "sc1"})).await;
    assert!(!made.is_error, "{}", made.text);
    let pid = String::from_utf8_lossy(&world.tmux(&["display", "-p", "#{pid}"]).stdout).trim().to_string();
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("cgroup");
    let _ = child.kill();
    let _ = child.wait();
    assert_has!(cgroup, dtmcp::tmux::scope_unit(&world.socket));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn systemd_hears_ready_watchdog_and_stopping_and_panes_see_none_of_it() {
    let world = World::new();
    let notify_path = world.tmp.path().join("notify.sock");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).expect("notify socket");
    notify.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let mut cmd = Command::new(SERVER);
    cmd.arg("serve").envs(world.env()).stdin(Stdio::null());
    cmd.env("NOTIFY_SOCKET", &notify_path).env("WATCHDOG_USEC", "200000").env("INVOCATION_ID", "0123456789abcdef");
    let mut child = cmd.spawn().expect("serve");
    let mut heard = String::new();
    let mut buf = [0u8; 256];
    while !(heard.contains("READY=1") && heard.contains("WATCHDOG=1")) {
        let n = notify.recv(&mut buf).expect("a notification within 10 s");
        heard.push_str(&String::from_utf8_lossy(&buf[..n]));
        heard.push('\n');
    }
    // Ready means the socket answers.
    assert_eq!(unix_get(&socket_of(&world), "/health").0, 200);
    let agent = bridge(&world, "alice").await;
    agent.call("session_create", json!({"name": "env1"})).await;
    let r = agent
        .call(
            "run",
            json!({"session": "env1", "command": "env | grep -cE '^(NOTIFY_SOCKET|INVOCATION_ID|WATCHDOG_)='"}),
        )
        .await;
    assert_has!(r.text, "\n0\n");
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM);
    while !heard.contains("STOPPING=1") {
        let n = notify.recv(&mut buf).expect("STOPPING within 10 s");
        heard.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(child.wait().expect("exit").success());
    // The sessions outlive the server.
    let listed = world.tmux(&["list-sessions", "-F", "#{session_name}"]);
    assert_has!(String::from_utf8_lossy(&listed.stdout), "env1");
}

#[test]
fn a_notify_socket_that_is_not_there_is_said_once() {
    let world = World::new();
    let mut cmd = Command::new(SERVER);
    cmd.arg("serve").envs(world.env()).stdin(Stdio::null()).stderr(Stdio::piped());
    // The watchdog asks for a notification every 50 ms.
    cmd.env("NOTIFY_SOCKET", world.tmp.path().join("nobody-listens.sock")).env("WATCHDOG_USEC", "100000");
    let mut child = cmd.spawn().expect("serve");
    until_answering(&world);
    std::thread::sleep(Duration::from_secs(1));
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM);
    assert!(child.wait().expect("exit").success());
    let mut stderr = String::new();
    child.stderr.take().expect("stderr").read_to_string(&mut stderr).expect("stderr");
    assert_eq!(stderr.matches("could not notify systemd").count(), 1, "{stderr}");
    assert_has!(stderr, "nobody-listens.sock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_close_refuses_while_a_person_is_attached() {
    let world = World::new();
    let _serve = Serve::start(&world, &[]);
    let agent = bridge(&world, "alice").await;
    agent.call("session_create", json!({"name": "p1"})).await;
    let person = Person::attach(&world, "p1");
    let refused = agent.call("session_close", json!({"session": "p1"})).await;
    assert!(refused.is_error, "{}", refused.text);
    assert_has!(refused.text, "a person is attached");
    assert_has!(refused.text, "close --force p1");
    drop(person);
    poll::until_async("session_close to close p1 once the person left", Duration::from_secs(10), async || {
        let r = agent.call("session_close", json!({"session": "p1"})).await;
        if r.is_error { Err(r.text) } else { Ok(()) }
    })
    .await;
}

/// An MCP session over raw HTTP on `socket`, initialized: its id.
fn mcp_session(socket: &Path) -> String {
    let (status, headers, body) = unix_http(socket, &request("POST", "/mcp", &mcp_headers(&[("host", "x")]), INIT));
    assert_eq!(status, 200, "{body}");
    let id = headers.iter().find(|(k, _)| k == "mcp-session-id").map(|(_, v)| v.clone()).expect("a session id");
    let with_id = mcp_headers(&[("host", "x"), ("mcp-session-id", &id), ("mcp-protocol-version", "2025-06-18")]);
    let done = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(unix_http(socket, &request("POST", "/mcp", &with_id, done)).0, 202);
    id
}

#[test]
fn an_http_client_keeps_its_mcp_session_across_a_restart() {
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    let id = mcp_session(&serve.socket);
    let with_id = mcp_headers(&[("host", "x"), ("mcp-session-id", &id), ("mcp-protocol-version", "2025-06-18")]);
    serve.kill();
    let again = Serve::start(&world, &[]);
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let (status, _, body) = unix_http(&again.socket, &request("POST", "/mcp", &with_id, list));
    assert_eq!(status, 200, "{body}");
    assert_has!(body, "session_create");
}

/// Two `serve` processes of `world` started at the same instant: the one
/// that exits, with its stderr, and the pid of the one that runs on.
fn start_two_at_once(world: &World) -> (String, u32) {
    let spawn = || {
        Command::new(SERVER)
            .arg("serve")
            .envs(world.env())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start serve")
    };
    let mut both = [spawn(), spawn()];
    let started = Instant::now();
    let loser = loop {
        if let Some(i) = (0..2).find(|&i| both[i].try_wait().expect("try_wait").is_some()) {
            break i;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "neither server gave way to the other");
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut said = String::new();
    both[loser].stderr.take().expect("stderr").read_to_string(&mut said).expect("read stderr");
    let winner = both[1 - loser].id();
    let socket = socket_of(world);
    while unix_get(&socket, "/health").0 != 200 {
        assert!(started.elapsed() < Duration::from_secs(15), "the winner did not come up:\n{said}");
        std::thread::sleep(Duration::from_millis(20));
    }
    for child in &mut both {
        let _ = child.kill();
        let _ = child.wait();
    }
    (said, winner)
}

#[test]
fn of_two_servers_started_at_once_the_one_that_gives_way_names_the_other() {
    let world = World::new();
    let host = dtmcp::config::hostname();
    // Each round's winner is killed and leaves its name in the lock file,
    // as a crashed server does: the next round's loser must not take that
    // for the holder.
    for round in 0..3 {
        let (said, winner) = start_two_at_once(&world);
        assert_has!(said, format!("another docent-terminal-mcp server (pid {winner} on host {host})"));
        assert!(!said.contains("unknown holder"), "round {round}:\n{said}");
    }
}

/// A client that hangs up in the middle of a call answered on the direct
/// path does not cut the command short: the line after the one running
/// when it left is still typed.
#[test]
fn a_client_hanging_up_mid_call_does_not_cut_the_command_short() {
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    let id = mcp_session(&serve.socket);
    let with_id = mcp_headers(&[("host", "x"), ("mcp-session-id", &id), ("mcp-protocol-version", "2025-06-18")]);
    let call = |id: u32, name: &str, args: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": args}})
            .to_string()
    };
    let create = call(2, "session_create", json!({"name": "hang1"}));
    let (status, headers, body) = unix_http(&serve.socket, &request("POST", "/mcp", &with_id, &create));
    assert_eq!(status, 200, "{body}");
    let kind = headers.iter().find(|(k, _)| k == "content-type").map(|(_, v)| v.as_str());
    assert_eq!(kind, Some("application/json"), "not answered on the direct path: {body}");
    let run = call(3, "run", json!({"session": "hang1", "command": "sleep 1\necho after-the-hang-$((6*7))"}));
    let mut stream = std::os::unix::net::UnixStream::connect(&serve.socket).expect("connect");
    stream.write_all(request("POST", "/mcp", &with_id, &run).as_bytes()).expect("send");
    // Gone while `sleep 1` runs, before the second line is typed.
    std::thread::sleep(Duration::from_millis(400));
    drop(stream);
    let dir = world.session_dir("hang1");
    poll::until("the second line to be typed", Duration::from_secs(15), || {
        let text = std::fs::read_to_string(dir.join("session.txt")).unwrap_or_default();
        if text.contains("after-the-hang-42") { Ok(()) } else { Err(text) }
    });
}
