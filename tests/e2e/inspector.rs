//! How people get the server and connect to it, tried with tools nobody
//! here wrote: the official MCP Inspector CLI (npm, pinned by
//! `tests/inspector/package-lock.json`) over stdio, over HTTP with the
//! token and through the `connect` bridge; and `cargo install`.
//!
//! The Inspector is installed by `npm ci` in `tests/inspector` (`.ci/run`
//! does it when npm is there). Without node or that install, the Inspector
//! tests say what is missing and skip.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::assert_has;
use crate::support::{Ran, Serve, Server, World, free_port, logger_pid, run_for};

/// How long one Inspector run may take (it starts node, and for stdio our
/// server, each time).
const INSPECTOR_TIMEOUT: Duration = Duration::from_secs(60);

/// The Inspector's command line launcher, once installed.
fn inspector_bin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/inspector/node_modules/.bin/mcp-inspector")
}

/// The oldest node the Inspector has been run on here. Its package asks
/// for 22.19; every command these tests use works on 20.
const NODE_MAJOR: u32 = 20;

/// Why the Inspector cannot run on this machine, if it cannot.
fn inspector_missing() -> Option<String> {
    let version = Command::new("node").arg("--version").output().ok().filter(|o| o.status.success());
    let Some(version) = version else { return Some("needs node (and npm) on PATH".into()) };
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    let major: u32 = version.trim_start_matches('v').split('.').next().and_then(|m| m.parse().ok()).unwrap_or(0);
    if major < NODE_MAJOR {
        return Some(format!("the MCP Inspector needs node {NODE_MAJOR} or newer, this is {version}"));
    }
    let installed = inspector_bin().exists();
    (!installed).then(|| "the MCP Inspector is not installed; run `npm ci` in tests/inspector".into())
}

/// Skips the calling test, saying why, when the Inspector cannot run.
macro_rules! needs_inspector {
    () => {
        if let Some(why) = inspector_missing() {
            eprintln!("skipped: {why}");
            return;
        }
    };
}

/// What an Inspector run printed, read as its JSON output.
trait Printed {
    /// The `result` of its JSON output, which must have succeeded.
    fn result(&self) -> Value;

    /// The text and `isError` of a `tools/call` result.
    fn reply(&self) -> (String, bool);
}

impl Printed for Ran {
    fn result(&self) -> Value {
        assert_eq!(self.code, 0, "the Inspector failed:\n{}\n{}", self.stdout, self.stderr);
        let out: Value = serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("the Inspector printed no JSON ({e}):\n{}", self.stdout));
        out.get("result").cloned().unwrap_or_else(|| panic!("no result in {out}"))
    }

    fn reply(&self) -> (String, bool) {
        let result = self.result();
        let text = result["content"].as_array().into_iter().flatten().filter_map(|c| c["text"].as_str()).collect();
        (text, result["isError"] == json!(true))
    }
}

/// Runs the Inspector CLI with `args` (and JSON output), in a home of
/// `world`'s own so that it keeps nothing of its own elsewhere.
fn inspect(world: &World, args: &[&str]) -> Ran {
    let home = world.tmp.path().join("inspector-home");
    std::fs::create_dir_all(&home).expect("inspector home");
    let args = [&["--cli"], args, &["--format", "json"]].concat();
    let env = [("HOME", home.display().to_string()), ("MCP_INSPECTOR_SECRET_STORE", "memory".into())];
    run_for(&inspector_bin(), &args, &env.map(|(k, v)| (k.to_string(), v)), INSPECTOR_TIMEOUT)
}

/// The `-e KEY=VALUE` arguments that hand `world`'s environment to a
/// server the Inspector starts (it passes on only a few variables of its own).
fn env_args(world: &World) -> Vec<String> {
    world.env().into_iter().flat_map(|(k, v)| ["-e".to_string(), format!("{k}={v}")]).collect()
}

/// `tools/list --strict`: every tool, and no portability finding. The
/// Inspector (2.12) prints its findings on stderr and adds them to the JSON
/// as `schemaFindings`; without findings it prints neither.
fn assert_lists_portable_tools(ran: &Ran) {
    assert_eq!(ran.code, 0, "tools/list failed:\n{}\n{}", ran.stdout, ran.stderr);
    let out: Value = serde_json::from_str(ran.stdout.trim()).expect("JSON from tools/list");
    assert!(out.get("schemaFindings").is_none(), "schema findings: {:#}", out["schemaFindings"]);
    for finding in ["Warning: tool", "Error: tool", "Schema portability"] {
        assert!(!ran.stderr.contains(finding), "the Inspector found problems:\n{}", ran.stderr);
    }
    let tools = out["result"]["tools"].as_array().expect("tools");
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    for tool in ["session_create", "run", "read", "send", "session_close"] {
        assert!(names.contains(&tool), "{tool} missing from {names:?}");
    }
    // The same check this repository's unit test makes, on the schemas as
    // they arrived at an outside client.
    for tool in tools {
        let found = dtmcp::tools::schema::problems(&tool["inputSchema"]);
        assert!(found.is_empty(), "{}: {found:?}", tool["name"]);
    }
}

#[test]
fn the_inspector_lists_portable_tools_creates_a_session_and_runs_over_stdio() {
    needs_inspector!();
    let world = World::new();
    let env = env_args(&world);
    let server = crate::support::SERVER;
    let stdio = |method: &[&str]| {
        let mut args: Vec<&str> = env.iter().map(String::as_str).collect();
        args.extend_from_slice(method);
        args.push(server);
        inspect(&world, &args)
    };
    assert_lists_portable_tools(&stdio(&["--method", "tools/list", "--strict"]));

    // Each Inspector run starts a server of its own; the session outlives it.
    let create = r#"{"name": "i1"}"#;
    let (text, failed) =
        stdio(&["--method", "tools/call", "--tool-name", "session_create", "--tool-args-json", create]).reply();
    assert!(!failed, "session_create: {text}");
    assert_has!(text, "session i1 ready");
    let run = r#"{"session": "i1", "command": "echo from-the-inspector; (exit 3)"}"#;
    let (text, failed) = stdio(&["--method", "tools/call", "--tool-name", "run", "--tool-args-json", run]).reply();
    assert!(!failed, "run: {text}");
    assert!(text.starts_with("exit 3 "), "the exit status leads the reply: {text}");
    assert_has!(text, "from-the-inspector");
    assert!(logger_pid(&world.session_dir("i1")).is_some(), "the session has its pane logger");
}

#[test]
fn the_inspector_drives_the_shared_server_over_http_and_through_the_bridge() {
    needs_inspector!();
    let world = World::new();
    let port = free_port();
    let _serve = Serve::start(&world, &["--tcp", &port.to_string()]);
    let token = std::fs::read_to_string(world.home().join("token")).expect("token").trim().to_string();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let auth = format!("Authorization: Bearer {token}");
    // `--header` takes every value up to the next option, so it comes last.
    let http = |method: &[&str]| {
        let mut args = vec![url.as_str()];
        args.extend_from_slice(method);
        args.extend_from_slice(&["--header", &auth, "X-Terminal-Actor: inspector"]);
        inspect(&world, &args)
    };
    assert_lists_portable_tools(&http(&["--method", "tools/list", "--strict"]));
    let (text, failed) =
        http(&["--method", "tools/call", "--tool-name", "session_create", "--tool-args-json", r#"{"name": "h1"}"#])
            .reply();
    assert!(!failed, "session_create: {text}");
    let run = r#"{"session": "h1", "command": "(exit 4)"}"#;
    let (text, failed) = http(&["--method", "tools/call", "--tool-name", "run", "--tool-args-json", run]).reply();
    assert!(!failed && text.starts_with("exit 4 "), "run over HTTP: {text}");

    // The bridge a client starts as a command finds the server through
    // XDG_RUNTIME_DIR, which such clients often do not pass on by themselves.
    let env = env_args(&world);
    let mut args: Vec<&str> = env.iter().map(String::as_str).collect();
    let run = r#"{"session": "h1", "command": "(exit 5)"}"#;
    args.extend_from_slice(&["--method", "tools/call", "--tool-name", "run", "--tool-args-json", run]);
    args.extend_from_slice(&[crate::support::SERVER, "connect", "--actor", "inspector-bridge"]);
    let (text, failed) = inspect(&world, &args).reply();
    assert!(!failed && text.starts_with("exit 5 "), "run through the bridge: {text}");
    let calls = std::fs::read_to_string(world.home().join("calls.log")).expect("calls.log");
    assert_has!(calls, r#""actor":"inspector""#);
    assert_has!(calls, r#""actor":"inspector-bridge""#);

    // Without the token: refused, and the Inspector is told what to send.
    let refused = inspect(&world, &[&url, "--method", "tools/list", "--stored-auth-only"]);
    assert_ne!(refused.code, 0, "served without a token:\n{}", refused.stdout);
    assert_has!(refused.stderr, "Authorization: Bearer");
}

/// Installs the package as people install Rust tools, into a root of its
/// own, then drives the installed server: it must find the pane logger
/// installed beside it. The build reuses this test run's target directory
/// and profile, so only the copy is new work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cargo_install_puts_three_binaries_side_by_side_and_the_server_finds_its_logger() {
    let world = World::new();
    let root = world.tmp.path().join("installed");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().expect("target dir").to_path_buf();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut install = Command::new(cargo);
    install.args(["install", "--path", env!("CARGO_MANIFEST_DIR"), "--locked", "--offline", "--root"]);
    install.arg(&root).arg("--target-dir").arg(&target);
    if cfg!(debug_assertions) {
        install.arg("--debug");
    }
    let out = install.output().expect("cargo install");
    assert!(out.status.success(), "cargo install failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let bin = root.join("bin");
    for name in ["docent-terminal-mcp", "dtmcp", "dtmcp-pane-logger"] {
        assert!(bin.join(name).is_file(), "{name} is not installed in {}", bin.display());
    }

    let server = Server::start(&bin.join("docent-terminal-mcp"), &[], &world.env()).await;
    let made = server.call("session_create", json!({ "name": "c1" })).await;
    assert!(!made.is_error, "session_create: {}", made.text);
    let ran = server.call("run", json!({ "session": "c1", "command": "echo installed; (exit 6)" })).await;
    assert!(!ran.is_error && ran.text.starts_with("exit 6 "), "run: {}", ran.text);
    let pid = logger_pid(&world.session_dir("c1")).expect("the session has a logger");
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).expect("the logger's executable");
    assert_eq!(exe, bin.join("dtmcp-pane-logger"), "the logger beside the installed server runs");
}

/// The `json` block under "A generic `mcp.json`" in docs/clients.md.
fn generic_mcp_json() -> Value {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/clients.md");
    let doc = std::fs::read_to_string(&doc).expect("docs/clients.md");
    let section = doc.split("## A generic `mcp.json`").nth(1).expect("the generic section");
    let block = section.split("```json\n").nth(1).and_then(|b| b.split("```").next()).expect("its json block");
    serde_json::from_str(block).unwrap_or_else(|e| panic!("the generic mcp.json does not parse: {e}\n{block}"))
}

/// Fills in a stdio entry of the generic file: this build's server, and the
/// environment of `world` over the placeholders.
fn fill_stdio(entry: &mut Value, world: &World) {
    assert_eq!(entry["command"], "/home/you/.cargo/bin/docent-terminal-mcp", "the placeholder path");
    entry["command"] = json!(crate::support::SERVER);
    for (k, v) in world.env() {
        entry["env"][k] = json!(v);
    }
}

#[test]
fn the_generic_mcp_json_here_works_as_written() {
    needs_inspector!();
    let mut config = generic_mcp_json();
    let (alone, shared) = (World::new(), World::new());
    let port = free_port();
    let _serve = Serve::start(&shared, &["--tcp", &port.to_string()]);
    let token = std::fs::read_to_string(shared.home().join("token")).expect("token").trim().to_string();
    let servers = &mut config["mcpServers"];
    fill_stdio(&mut servers["terminal"], &alone);
    assert_eq!(servers["terminal-shared"]["env"]["XDG_RUNTIME_DIR"], "/run/user/1000", "the bridge's variable");
    fill_stdio(&mut servers["terminal-shared"], &shared);
    let http = &mut servers["terminal-http"];
    assert_eq!(http["url"], "http://127.0.0.1:8766/mcp", "the default port");
    http["url"] = json!(format!("http://127.0.0.1:{port}/mcp"));
    assert_eq!(http["headers"]["Authorization"], "Bearer TOKEN", "the token placeholder");
    http["headers"]["Authorization"] = json!(format!("Bearer {token}"));
    let file = alone.tmp.path().join("mcp.json");
    std::fs::write(&file, serde_json::to_string_pretty(&config).expect("json")).expect("write mcp.json");
    let file = file.display().to_string();

    let call = |world: &World, server: &str, tool: &str, args: &str| {
        let argv = ["--config", &file, "--server", server, "--method", "tools/call", "--tool-name", tool];
        let (text, failed) = inspect(world, &[&argv[..], &["--tool-args-json", args]].concat()).reply();
        assert!(!failed, "{server} {tool}: {text}");
        text
    };
    call(&alone, "terminal", "session_create", r#"{"name": "g1"}"#);
    let text = call(&alone, "terminal", "run", r#"{"session": "g1", "command": "(exit 7)"}"#);
    assert!(text.starts_with("exit 7 "), "stdio: {text}");
    call(&shared, "terminal-shared", "session_create", r#"{"name": "g2"}"#);
    let text = call(&shared, "terminal-shared", "run", r#"{"session": "g2", "command": "(exit 8)"}"#);
    assert!(text.starts_with("exit 8 "), "bridge: {text}");
    let text = call(&shared, "terminal-http", "run", r#"{"session": "g2", "command": "(exit 9)"}"#);
    assert!(text.starts_with("exit 9 "), "HTTP: {text}");
    let calls = std::fs::read_to_string(shared.home().join("calls.log")).expect("calls.log");
    assert_has!(calls, r#""actor":"my-agent""#);
}
