//! A small MCP client that starts a server as a child process and calls its
//! tools: the demo, the end-to-end tests and the benchmarks drive the real
//! server through it, exactly as an agent's harness would.

use std::path::Path;
use std::process::Stdio;

use anyhow::Context;
use rmcp::model::ProtocolVersion;
use rmcp::model::{CallToolRequestParams, ClientConfig, Implementation};
use rmcp::service::RunningService;
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient};
use tokio::process::{Child, Command};

/// A server child and the MCP session with it.
pub struct McpChild {
    service: RunningService<RoleClient, ClientConfig>,
    child: Child,
}

/// The era of the protocol a client speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    /// `initialize` first, then requests in that session (up to 2025-11-25).
    Handshake,
    /// `server/discover`, then requests that each name their version and
    /// client in `_meta` (2026-07-28).
    Sessionless,
}

/// One tool call's reply: its text and whether it is flagged as an error.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The text content, joined.
    pub text: String,
    /// The `isError` flag.
    pub is_error: bool,
    /// The structured result (`structuredContent`), when the server gave one.
    pub structured: Option<serde_json::Value>,
}

impl Era {
    /// How an rmcp client of this era starts its MCP lifecycle.
    pub fn lifecycle(self) -> ClientLifecycleMode {
        match self {
            Era::Handshake => ClientLifecycleMode::Initialize,
            Era::Sessionless => {
                ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] }
            }
        }
    }
}

/// Calls `tool` with JSON object `args` over any rmcp client `peer`.
pub async fn call_on(peer: &rmcp::Peer<RoleClient>, tool: &str, args: serde_json::Value) -> anyhow::Result<Reply> {
    let mut params = CallToolRequestParams::new(tool.to_string());
    if let serde_json::Value::Object(map) = args {
        params = params.with_arguments(map);
    }
    let result = peer.call_tool(params).await?;
    let text = result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join("\n");
    Ok(Reply { text, is_error: result.is_error.unwrap_or(false), structured: result.structured_content })
}

impl McpChild {
    /// Starts `program args` with `env` added, and initializes MCP with it
    /// as the client `dtmcp-test-client`.
    pub async fn start(program: &Path, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<McpChild> {
        McpChild::start_as("dtmcp-test-client", program, args, env).await
    }

    /// As [`McpChild::start`], introducing itself as the client `name`
    /// (which the server takes as the agent's name).
    pub async fn start_as(name: &str, program: &Path, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<McpChild> {
        McpChild::start_in(Era::Handshake, name, program, args, env).await
    }

    /// As [`McpChild::start_as`], speaking the protocol of `era`.
    pub async fn start_in(
        era: Era,
        name: &str,
        program: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<McpChild> {
        let mut cmd = Command::new(program);
        cmd.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().with_context(|| format!("starting {}", program.display()))?;
        let stdout = child.stdout.take().context("child stdout")?;
        let stdin = child.stdin.take().context("child stdin")?;
        let info = ClientConfig::new(Default::default(), Implementation::new(name, env!("CARGO_PKG_VERSION")));
        let service = info.serve_with_lifecycle((stdout, stdin), era.lifecycle()).await.context("MCP start")?;
        Ok(McpChild { service, child })
    }

    /// The server's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// The MCP session, to call what [`McpChild`] does not wrap.
    pub fn peer(&self) -> &rmcp::Peer<RoleClient> {
        self.service.peer()
    }

    /// The protocol version agreed with the server.
    pub fn protocol_version(&self) -> Option<String> {
        self.service.peer_info().map(|i| i.protocol_version.to_string())
    }

    /// The server's instructions.
    pub fn instructions(&self) -> Option<String> {
        self.service.peer_info().and_then(|i| i.instructions.clone())
    }

    /// Calls `tool` with JSON object `args`.
    pub async fn call(&self, tool: &str, args: serde_json::Value) -> anyhow::Result<Reply> {
        call_on(self.service.peer(), tool, args).await
    }

    /// The names of the server's tools.
    pub async fn tool_names(&self) -> anyhow::Result<Vec<String>> {
        let tools = self.service.list_all_tools().await?;
        Ok(tools.into_iter().map(|t| t.name.to_string()).collect())
    }

    /// The server's tools, as listed over the wire.
    pub async fn tools(&self) -> anyhow::Result<Vec<rmcp::model::Tool>> {
        Ok(self.service.list_all_tools().await?)
    }

    /// Kills the server with SIGKILL, as a crash would.
    pub async fn kill(mut self) -> anyhow::Result<()> {
        self.child.kill().await?;
        Ok(())
    }

    /// Ends the MCP session and waits for the server to exit.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let _ = self.service.cancel().await;
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), self.child.wait()).await;
        let _ = self.child.kill().await;
        Ok(())
    }
}
