//! The bench's clients: raw JSON-RPC over stdio lines or HTTP/1.1 kept
//! alive on the server's Unix socket, and the `serve` they reach.

use super::*;

pub(crate) fn tool_text(result: &Value) -> anyhow::Result<(String, bool)> {
    if let Some(e) = result.get("error") {
        bail!("JSON-RPC error: {e}");
    }
    let r = result.get("result").context("no result")?;
    let text = r["content"]
        .as_array()
        .map(|c| c.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"))
        .unwrap_or_default();
    Ok((text, r["isError"].as_bool().unwrap_or(false)))
}

/// A server or bridge on stdio, spoken to in raw JSON-RPC lines.
pub(crate) struct StdioClient {
    pub(crate) child: Child,
    stdin: ChildStdin,
    lines: tokio::io::Lines<BufReader<ChildStdout>>,
    next: u64,
}

impl StdioClient {
    pub(crate) async fn start(program: &str, args: &[&str], env: &[(String, String)]) -> anyhow::Result<StdioClient> {
        let mut child = Command::new(program)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {program}"))?;
        let stdin = child.stdin.take().context("stdin")?;
        let lines = BufReader::new(child.stdout.take().context("stdout")?).lines();
        let mut s = StdioClient { child, stdin, lines, next: 1 };
        let init = json!({"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench-scale", "version": "0"}});
        s.request("initialize", init).await?;
        s.stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n").await?;
        Ok(s)
    }

    pub(crate) async fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.next;
        self.next += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.stdin.write_all(format!("{msg}\n").as_bytes()).await?;
        tokio::time::timeout(LIMIT, async {
            loop {
                let line = self.lines.next_line().await?.context("the server closed its output")?;
                let v: Value = serde_json::from_str(&line)?;
                if v["id"].as_u64() == Some(id) {
                    return Ok(v);
                }
            }
        })
        .await
        .context("no answer within the limit")?
    }

    /// Creates sessions `s{from}` up to (not including) `s{to}`.
    pub(crate) async fn grow(&mut self, from: usize, to: usize) -> anyhow::Result<()> {
        for i in from..to {
            let r = self.call("session_create", json!({"name": format!("s{i}")})).await?;
            ensure!(!r.1, "session_create s{i}: {}", r.0);
        }
        Ok(())
    }

    pub(crate) async fn stop(mut self) {
        drop(self.stdin);
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await.is_err() {
            let _ = self.child.kill().await;
        }
    }
}

impl Caller for StdioClient {
    async fn call(&mut self, tool: &str, args: Value) -> anyhow::Result<(String, bool)> {
        tool_text(&self.request("tools/call", json!({"name": tool, "arguments": args})).await?)
    }

    async fn ping(&mut self) -> anyhow::Result<()> {
        let v = self.request("ping", json!({})).await?;
        ensure!(v.get("result").is_some(), "ping: {v}");
        Ok(())
    }
}

/// An MCP session over streamable HTTP on the server's Unix socket, one
/// kept-alive connection.
pub(crate) struct HttpClient {
    stream: BufReader<tokio::net::UnixStream>,
    session: String,
    next: u64,
}

impl HttpClient {
    pub(crate) async fn connect(socket: &Path, actor: &str) -> anyhow::Result<HttpClient> {
        let stream = tokio::net::UnixStream::connect(socket).await.context("connecting to serve")?;
        let mut h = HttpClient { stream: BufReader::new(stream), session: String::new(), next: 1 };
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": actor, "version": "0"}}});
        let (headers, _) = h.post(&init).await?;
        h.session = headers.get("mcp-session-id").cloned().context("no mcp-session-id")?;
        h.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await?;
        Ok(h)
    }

    /// One POST to /mcp; the headers and the JSON-RPC messages of the body.
    pub(crate) async fn post(&mut self, msg: &Value) -> anyhow::Result<(BTreeMap<String, String>, Vec<Value>)> {
        let body = msg.to_string();
        let mut req = format!(
            "POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\n",
            body.len()
        );
        if !self.session.is_empty() {
            req.push_str(&format!("mcp-session-id: {}\r\nmcp-protocol-version: 2025-06-18\r\n", self.session));
        }
        req.push_str("\r\n");
        req.push_str(&body);
        self.stream.get_mut().write_all(req.as_bytes()).await?;
        tokio::time::timeout(LIMIT, self.response()).await.context("no HTTP answer within the limit")?
    }

    pub(crate) async fn response(&mut self) -> anyhow::Result<(BTreeMap<String, String>, Vec<Value>)> {
        let mut status = String::new();
        self.stream.read_line(&mut status).await?;
        ensure!(status.starts_with("HTTP/1.1 2"), "HTTP status: {}", status.trim());
        let mut headers = BTreeMap::new();
        loop {
            let mut line = String::new();
            ensure!(self.stream.read_line(&mut line).await? > 0, "connection closed in the headers");
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
            }
        }
        let mut body = Vec::new();
        if headers.get("transfer-encoding").is_some_and(|t| t.contains("chunked")) {
            loop {
                let mut size = String::new();
                self.stream.read_line(&mut size).await?;
                let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16)
                    .with_context(|| format!("chunk size {size:?}"))?;
                let mut chunk = vec![0u8; n + 2];
                self.stream.read_exact(&mut chunk).await?;
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            }
        } else {
            let n: usize = headers.get("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
            body.resize(n, 0);
            self.stream.read_exact(&mut body).await?;
        }
        let text = String::from_utf8_lossy(&body);
        let sse = headers.get("content-type").is_some_and(|c| c.contains("event-stream"));
        let messages = if sse {
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str(d.trim()).ok())
                .collect()
        } else {
            serde_json::from_str(&text).into_iter().collect()
        };
        Ok((headers, messages))
    }
}

impl Caller for HttpClient {
    async fn call(&mut self, tool: &str, args: Value) -> anyhow::Result<(String, bool)> {
        self.call_with(tool, args, json!({})).await
    }

    async fn ping(&mut self) -> anyhow::Result<()> {
        let id = self.next;
        self.next += 1;
        let (_, messages) = self.post(&json!({"jsonrpc": "2.0", "id": id, "method": "ping"})).await?;
        ensure!(
            messages.iter().any(|m| m["id"].as_u64() == Some(id) && m.get("result").is_some()),
            "ping: {messages:?}"
        );
        Ok(())
    }
}

impl HttpClient {
    /// A tool call with `meta` as its `_meta`.
    pub(crate) async fn call_with(&mut self, tool: &str, args: Value, meta: Value) -> anyhow::Result<(String, bool)> {
        let id = self.next;
        self.next += 1;
        let params = json!({"name": tool, "arguments": args, "_meta": meta});
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        let (_, messages) = self.post(&msg).await?;
        let answer = messages.into_iter().find(|m| m["id"].as_u64() == Some(id)).context("no answer in the body")?;
        tool_text(&answer)
    }
}

/// `docent-terminal-mcp serve` of the world, up until stopped.
pub(crate) struct Serve {
    child: std::process::Child,
}

impl Serve {
    pub(crate) async fn start(world: &World) -> anyhow::Result<Serve> {
        let child = std::process::Command::new(exe())
            .arg("serve")
            .envs(world.env())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let serve = Serve { child };
        let started = Instant::now();
        loop {
            if let Ok(mut h) = HttpClient::connect(&world.server_socket(), "probe").await
                && h.call("session_list", json!({})).await.is_ok()
            {
                return Ok(serve);
            }
            ensure!(started.elapsed() < Duration::from_secs(60), "serve did not come up");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn stop(mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.child.wait();
    }
}
