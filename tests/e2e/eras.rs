//! Both eras of MCP at every door: the handshake era (`initialize`,
//! 2025-06-18 and 2025-11-25) and 2026-07-28 (`server/discover`, the
//! version and the client in each request's `_meta`, no HTTP session),
//! over stdio, HTTP on the Unix socket, HTTP on TCP with the token, and the
//! `connect` bridge, driven by the official Python SDK (`mode="legacy"`,
//! `"auto"`, and pinned to `"2026-07-28"`). Each run lists the tools (every
//! one with an output schema), makes a session, runs a command with
//! progress, lists and closes; the SDK checks every structured result
//! against its tool's schema. Two copies of one client through two bridges
//! are two agents. rmcp's own client takes every door in both eras too.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use dtmcp::mcp_client::{Era, McpChild, call_on};

use crate::assert_has;
use crate::support::{SERVER, Serve, World, free_port, poll, python_sdk, socket_of};

/// The Python side: one door in one era, or two copies of one client.
const SCRIPT: &str = include_str!("eras.py");

/// The SDK's Python, or `None` (the test then says why it is skipped).
fn python() -> Option<PathBuf> {
    if !crate::support::installed("python3") {
        eprintln!("skipped: python3 is missing");
        return None;
    }
    python_sdk().map_err(|why| eprintln!("skipped: the Python MCP SDK is not available: {why}")).ok()
}

/// Runs the script with `args` in `world`'s environment; its stdout.
fn drive(python: &Path, world: &World, args: &[&str]) -> String {
    let script = world.tmp.path().join(format!("eras-{}.py", args.first().copied().unwrap_or_default()));
    std::fs::write(&script, SCRIPT).expect("script");
    let out = Command::new(python)
        .arg(&script)
        .args(args)
        .envs(world.env())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("python runs");
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{args:?} failed: {said}\n{}", String::from_utf8_lossy(&out.stderr));
    said
}

#[test]
fn every_door_takes_both_eras_with_checked_results_and_progress() {
    let Some(python) = python() else { return };
    let shared = World::new();
    let port = free_port();
    let _serve = Serve::start(&shared, &["--tcp", &port.to_string()]);
    let token = std::fs::read_to_string(shared.home().join("token")).expect("token").trim().to_string();
    let socket = socket_of(&shared).display().to_string();
    // A stdio server holds its state home alone: a world of its own.
    let alone = World::new();
    let doors = [
        ("stdio", &alone, String::new()),
        ("unix", &shared, socket),
        ("tcp", &shared, format!("{port}:{token}")),
        ("bridge", &shared, String::new()),
    ];
    // The doors at once (each waits on its commands most of the time), the
    // eras of one door in turn.
    std::thread::scope(|scope| {
        for (door, world, arg) in &doors {
            let python = &python;
            scope.spawn(move || {
                for (i, mode) in ["legacy", "auto", "2026-07-28"].into_iter().enumerate() {
                    check_door(python, world, door, mode, arg, &format!("{door}{i}"));
                }
            });
        }
    });
}

/// One door in one era, checked.
fn check_door(python: &Path, world: &World, door: &str, mode: &str, arg: &str, session: &str) {
    let said = drive(python, world, &[door, mode, SERVER, arg, session]);
    let what = format!("{door} in {mode}:\n{said}");
    let version = said.lines().find_map(|l| l.strip_prefix("version ")).unwrap_or_default();
    match mode {
        "legacy" => assert!(version.starts_with("2025-"), "{what}"),
        _ => assert_eq!(version, "2026-07-28", "{what}"),
    }
    assert_has!(said, "tools 15 True");
    assert_has!(said, "create False session_create");
    assert_has!(said, "run False done 0 True");
    // Only a sessionless client over plain HTTP, with its token or socket
    // alone, cannot be told from another copy of itself: it is told how
    // to name itself.
    let alike = mode != "legacy" && matches!(door, "unix" | "tcp");
    assert_has!(said, &format!("alike {}", if alike { "True" } else { "False" }));
    let ticks: u32 = said.lines().find_map(|l| l.strip_prefix("progress ")?.parse().ok()).unwrap_or(0);
    assert!(ticks >= 1, "no progress while run waited: {what}");
    assert_has!(said, &format!("'{session}'"));
    assert_has!(said, "close False");
    // The run given up after a second ended then, its command going on;
    // or, should the cancel have overtaken the call on a loaded machine,
    // it was cancelled as it came, before anything was typed.
    let after = said.lines().find_map(|l| l.strip_prefix("after-cancel ")).unwrap_or_default();
    assert!(matches!(after, "False running" | "False done" | "False nothing_ran"), "{what}");
    let calls = std::fs::read_to_string(world.home().join("calls.log")).expect("calls.log");
    let runs: Vec<f64> = calls
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["tool"] == "run" && e["session"] == session)
        .filter_map(|e| e["ms"].as_f64())
        .collect();
    assert_eq!(runs.len(), 2, "{what}\n{calls}");
    assert!(runs[1] < 3_500.0, "the cancelled run went on for {} ms: {what}", runs[1]);
}

#[test]
fn two_copies_of_one_client_through_two_bridges_are_two_agents() {
    let Some(python) = python() else { return };
    let world = World::new();
    let _serve = Serve::start(&world, &[]);
    let said = drive(&python, &world, &["two", SERVER, "b1"]);
    // The second copy is refused with the first's name, never "you".
    assert_has!(said, r#"b-run True {"by": {"kind": "agent", "name": "claude-code"}, "refusal": "unsubmitted""#);
    assert_has!(said, "a-send False");
    let calls = std::fs::read_to_string(world.home().join("calls.log")).expect("calls.log");
    assert_has!(calls, r#""actor":"claude-code""#);
    assert_has!(calls, r#""actor":"claude-code#2""#);
}

#[test]
fn a_token_that_names_its_agent_names_a_sessionless_client_over_tcp() {
    let Some(python) = python() else { return };
    let world = World::new();
    let port = free_port();
    let _serve = Serve::start(&world, &["--tcp", &port.to_string()]);
    let printed = Command::new(SERVER).args(["token", "--agent", "bot-a"]).envs(world.env()).output().expect("token");
    assert!(printed.status.success(), "{}", String::from_utf8_lossy(&printed.stderr));
    let agent_token = String::from_utf8_lossy(&printed.stdout).trim().to_string();
    assert!(agent_token.starts_with("dtmcp-agent.bot-a."), "{agent_token}");
    // A 2026-07-28 client over TCP: no session, no header, no bridge.
    let target = format!("{port}:{agent_token}");
    let said = drive(&python, &world, &["tcp", "2026-07-28", SERVER, &target, "named1", "keep"]);
    assert_has!(said, "run False done 0 True");
    let calls = std::fs::read_to_string(world.home().join("calls.log")).expect("calls.log");
    assert_has!(calls, r#""actor":"bot-a""#);
    // The people's view names it too: who made the session and who typed.
    let (_, body) = crate::support::unix_get(&socket_of(&world), "/api/sessions");
    let list: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let row = list["sessions"].as_array().and_then(|rows| rows.iter().find(|r| r["name"] == "named1")).cloned();
    let row = row.unwrap_or_else(|| panic!("named1 is not listed: {body}"));
    assert_eq!(row["started_by"], "bot-a", "{row}");
    assert!(row["agents_typed_ms"].get("bot-a").is_some(), "{row}");
    assert!(!calls.contains(r#""actor":"matrix-client""#), "the client's own name won: {calls}");
    // A forged one (another name on bot-a's MAC) opens nothing.
    let forged = agent_token.replace("bot-a", "bot-b");
    let bad = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", &format!("Authorization: Bearer {forged}")])
        .arg(format!("http://127.0.0.1:{port}/api/sessions"))
        .output();
    if let Ok(out) = bad {
        assert_eq!(String::from_utf8_lossy(&out.stdout), "401", "a forged agent token was let in");
    }
}

#[test]
fn a_sessionless_client_through_the_bridge_outlives_a_server_restart_and_types_once() {
    let Some(python) = python() else { return };
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    let marker = world.tmp.path().join("typed");
    let script = world.tmp.path().join("eras-restart.py");
    std::fs::write(&script, SCRIPT).expect("script");
    let mut child = Command::new(&python)
        .arg(&script)
        .args(["restart", SERVER, "r1"])
        .arg(&marker)
        .envs(world.env())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python runs");
    // Once the line is typed, the server goes while the run waits.
    poll::until("the command to be typed", Duration::from_secs(30), || marker.exists());
    serve.kill();
    let _again = Serve::start(&world, &[]);
    // (Its output is a few lines: the pipes cannot fill and hold it.)
    poll::until("the client to end", Duration::from_secs(60), || child.try_wait().expect("wait"));
    let out = child.wait_with_output().expect("python's output");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_has!(said, "run False True");
    let typed = std::fs::read_to_string(&marker).expect("marker");
    assert_eq!(typed.lines().count(), 1, "the line was typed {} times", typed.lines().count());
}

/// What one rmcp client makes of a door: the version agreed, then a
/// session made, a command run (its facts checked) and the session closed.
async fn check_with_rmcp(peer: &rmcp::Peer<rmcp::RoleClient>, version: Option<String>, era: Era, door: &str) {
    let what = format!("rmcp's client at {door} in {era:?}");
    let want = match era {
        Era::Handshake => "2025-",
        Era::Sessionless => "2026-07-28",
    };
    assert!(version.as_deref().is_some_and(|v| v.starts_with(want)), "{what}: version {version:?}");
    let tools = peer.list_all_tools().await.unwrap_or_else(|e| panic!("{what}: tools/list: {e}"));
    assert_eq!(tools.len(), 15, "{what}");
    assert!(tools.iter().all(|t| t.output_schema.is_some()), "{what}: a tool without an output schema");
    let call = async |tool: &str, args: serde_json::Value| {
        call_on(peer, tool, args).await.unwrap_or_else(|e| panic!("{what}: {tool} failed at the protocol level: {e:#}"))
    };
    let session = format!("rmcp-{door}-{era:?}").to_lowercase();
    let made = call("session_create", serde_json::json!({"name": session})).await;
    assert!(!made.is_error, "{what}: {}", made.text);
    let ran = call("run", serde_json::json!({"session": session, "command": "echo rmcp-$((6*7))"})).await;
    let facts = ran.structured.clone().unwrap_or_else(|| panic!("{what}: no structuredContent"));
    assert_eq!((facts["state"].as_str(), facts["exit_code"].as_i64()), (Some("done"), Some(0)), "{what}: {facts}");
    assert_has!(ran.text, "rmcp-42");
    let closed = call("session_close", serde_json::json!({"session": session})).await;
    assert!(!closed.is_error, "{what}: {}", closed.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcps_client_takes_every_door_in_both_eras() {
    use rmcp::ClientServiceExt;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let shared = World::new();
    let port = free_port();
    let serve = Serve::start(&shared, &["--tcp", &port.to_string()]);
    let token = std::fs::read_to_string(shared.home().join("token")).expect("token").trim().to_string();
    // rmcp's HTTP client for TCP is reqwest's, which this project does not
    // build; its Unix-socket client reaches the TCP port through a socket
    // that only passes bytes on: the requests, their Host and the token
    // are rmcp's own.
    let front = shared.tmp.path().join("tcp-front.sock");
    pipe_to_tcp(&front, port);
    let alone = World::new();
    let env = |w: &World| w.env();
    for era in [Era::Handshake, Era::Sessionless] {
        for (door, world, args) in [("stdio", &alone, &[][..]), ("bridge", &shared, &["connect"][..])] {
            let env = env(world);
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let c = McpChild::start_in(era, "rmcp-matrix", Path::new(SERVER), args, &env).await.expect("start");
            check_with_rmcp(c.peer(), c.protocol_version(), era, door).await;
            c.stop().await.expect("stop");
        }
        let unix = StreamableHttpClientTransportConfig::with_uri("http://localhost/mcp");
        let tcp =
            StreamableHttpClientTransportConfig::with_uri(format!("http://127.0.0.1:{port}/mcp")).auth_header(&token);
        for (door, socket, config) in [("unix", &serve.socket, unix), ("tcp", &front, tcp)] {
            let socket = socket.display().to_string();
            let transport =
                rmcp::transport::StreamableHttpClientTransport::from_unix_socket_with_config(&socket, config);
            let info = rmcp::model::ClientConfig::new(
                Default::default(),
                rmcp::model::Implementation::new("rmcp-matrix", env!("CARGO_PKG_VERSION")),
            );
            let service = info.serve_with_lifecycle(transport, era.lifecycle()).await.expect("rmcp over HTTP");
            let version = service.peer_info().map(|i| i.protocol_version.to_string());
            check_with_rmcp(service.peer(), version, era, door).await;
            let _ = service.cancel().await;
        }
    }
}

/// A Unix socket at `path` whose every connection is a TCP connection to
/// loopback `port`, byte for byte.
fn pipe_to_tcp(path: &Path, port: u16) {
    let listener = std::os::unix::net::UnixListener::bind(path).expect("bind the front socket");
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let Ok(tcp) = std::net::TcpStream::connect(("127.0.0.1", port)) else { continue };
            let (Ok(mut from_tcp), Ok(mut to_client)) = (tcp.try_clone(), conn.try_clone()) else { continue };
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut from_tcp, &mut to_client);
                let _ = to_client.shutdown(std::net::Shutdown::Both);
            });
            let (mut from_client, mut to_tcp) = (conn, tcp);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut from_client, &mut to_tcp);
                let _ = to_tcp.shutdown(std::net::Shutdown::Write);
            });
        }
    });
}
