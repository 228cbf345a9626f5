//! The shared server as the tests meet it: a `serve` process of a world,
//! killed when dropped; its socket and a free TCP port; plain HTTP/1.1
//! exchanges over either; and the `connect` bridges that agents use.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;

use super::poll;
use super::raw::RawClient;
use super::world::{SERVER, Server, World};

/// A `serve` process of a world, killed when dropped.
pub struct Serve {
    child: Child,
    /// Its Unix socket.
    pub socket: PathBuf,
}

impl Serve {
    /// Starts `serve` (with `extra` arguments) and waits until `/health` answers.
    pub fn start(world: &World, extra: &[&str]) -> Serve {
        Serve::start_with(world, extra, |_| {})
    }

    /// [`Serve::start`], with `configure` given the command first.
    pub fn start_with(world: &World, extra: &[&str], configure: impl FnOnce(&mut Command)) -> Serve {
        let socket = socket_of(world);
        let mut cmd = Command::new(SERVER);
        cmd.arg("serve").args(extra).envs(world.env()).stdin(Stdio::null()).stderr(Stdio::inherit());
        configure(&mut cmd);
        let child = cmd.spawn().expect("start serve");
        let serve = Serve { child, socket };
        until_answering(world);
        serve
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills it with SIGKILL, as a crash would, and reaps it.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Stops it with SIGTERM and waits for it to exit.
    pub fn stop(mut self) -> std::process::ExitStatus {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        self.child.wait().expect("wait serve")
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits (up to 10 s) until a `serve` of `world` answers `/health` on its
/// socket: one started here, or one a test started with a command of its own.
pub fn until_answering(world: &World) {
    let socket = socket_of(world);
    poll::until("serve to answer /health", Duration::from_secs(10), || unix_get(&socket, "/health").0 == 200);
}

/// The socket path a world's server uses.
pub fn socket_of(world: &World) -> PathBuf {
    world.tmp.path().join("run").join("docent-terminal-mcp").join("server.sock")
}

/// A free TCP port on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// One HTTP/1.1 exchange over `stream`: status, headers (lowercased names)
/// and body.
fn exchange(mut stream: impl Read + Write, request: &str) -> (u16, Vec<(String, String)>, String) {
    if stream.write_all(request.as_bytes()).is_err() {
        return (0, Vec::new(), String::new());
    }
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|s| s.parse().ok()).unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers, body.to_string())
}

/// Builds a request; `headers` are added as given.
pub fn request(method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> String {
    let mut r = format!("{method} {path} HTTP/1.1\r\nconnection: close\r\ncontent-length: {}\r\n", body.len());
    for (k, v) in headers {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    r.push_str("\r\n");
    r.push_str(body);
    r
}

/// A request over the Unix socket.
pub fn unix_http(socket: &Path, request: &str) -> (u16, Vec<(String, String)>, String) {
    match std::os::unix::net::UnixStream::connect(socket) {
        Ok(s) => {
            let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
            exchange(s, request)
        }
        Err(_) => (0, Vec::new(), String::new()),
    }
}

/// `GET path` over the Unix socket: status and body.
pub fn unix_get(socket: &Path, path: &str) -> (u16, String) {
    let (status, _, body) = unix_http(socket, &request("GET", path, &[("host", "x")], ""));
    (status, body)
}

/// A request over TCP to loopback `port`.
pub fn tcp_http(port: u16, request: &str) -> (u16, Vec<(String, String)>, String) {
    let s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
    exchange(s, request)
}

/// A `connect` bridge of `world` for agent `actor`.
pub async fn bridge(world: &World, actor: &str) -> Server {
    Server::start(Path::new(SERVER), &["connect", "--actor", actor], &world.env()).await
}

/// The opening of the tests that go through a bridge: a fresh world, a
/// `serve` of it, a `connect` bridge speaking for `actor`, and the session
/// `session` made through the bridge. (Bound in this order, they are
/// dropped in the reverse one: bridge, server, then the world's tmux.)
pub async fn bridged(actor: &str, session: &str) -> (World, Serve, RawClient) {
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    let mut bridge = RawClient::start(&["connect", "--actor", actor], &world.env()).await;
    let args = json!({ "name": session });
    let (made, err) = bridge.call("session_create", args, Duration::from_secs(20)).await;
    assert!(!err, "session_create {session}: {made}");
    (world, serve, bridge)
}
