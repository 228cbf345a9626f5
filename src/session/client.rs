//! The router's side of the logger protocol: one connection per call, every
//! exchange bounded by a timeout.
//!
//! A logger that is stopped (SIGSTOP, a debugger) still accepts
//! connections (the kernel queues them) but answers nothing. Rather than
//! wait out a timeout, the client looks at the logger's state in `/proc`
//! before it connects and while it waits, and reports the stall at once.

use std::path::Path;
use std::time::Duration;

use interprocess::local_socket::tokio::{Stream, prelude::*};
use interprocess::local_socket::{GenericFilePath, ToFsName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use dtmcp_core::agent_state::AgentState;
use dtmcp_core::protocol::{self, PROTOCOL_VERSION, Request, Response, Status, WaitReason, WaitSpec};
use dtmcp_core::region::Region;
use dtmcp_core::types::{LineNo, RegionId};

/// How long an ordinary (non-wait) exchange may take before the logger is
/// called wedged.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(5);

/// How often an exchange looks whether its logger was stopped meanwhile.
const STALL_POLL: Duration = Duration::from_millis(250);

/// Why talking to a logger failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No logger answers on the socket.
    #[error("the session's logger does not answer at {path}: {source}")]
    Connect {
        /// The socket.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The exchange failed midway.
    #[error("the session's logger failed: {0}")]
    Frame(#[from] protocol::FrameError),
    /// The logger is stopped: it holds its socket but answers nothing.
    #[error(
        "the session's logger is stalled: it (pid {pid}) is stopped, so nothing is logged or answered for now; the pane's output waits in tmux and nothing is lost. `kill -CONT {pid}` lets it go on, then call again"
    )]
    Stalled {
        /// The logger's pid.
        pid: u32,
    },
    /// The logger took too long.
    #[error("the session's logger did not answer within {0:?}")]
    Timeout(Duration),
    /// The logger speaks another protocol version.
    #[error(
        "the session's logger speaks protocol {theirs}, this server {PROTOCOL_VERSION}; restart the session or use a matching server"
    )]
    Version {
        /// The logger's version.
        theirs: u32,
    },
    /// The logger answered with an error.
    #[error("the session's logger says: {0}")]
    Remote(String),
    /// The logger answered something else than asked.
    #[error("the session's logger answered out of turn")]
    Unexpected,
}

/// A connection to one pane's logger.
pub struct LoggerClient {
    stream: Stream,
    /// The session directory, where the logger leaves its pid.
    dir: std::path::PathBuf,
}

impl LoggerClient {
    /// Connects to the logger socket at `path` and checks its version.
    pub async fn connect(path: &Path) -> Result<LoggerClient, ClientError> {
        let err = |source| ClientError::Connect { path: path.display().to_string(), source };
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        if let Some(pid) = super::repair::stopped_logger(&dir) {
            return Err(ClientError::Stalled { pid });
        }
        let name = path.to_fs_name::<GenericFilePath>().map_err(err)?;
        let stream = tokio::time::timeout(EXCHANGE_TIMEOUT, Stream::connect(name))
            .await
            .map_err(|_| ClientError::Timeout(EXCHANGE_TIMEOUT))?
            .map_err(err)?;
        let mut client = LoggerClient { stream, dir };
        match client.exchange(&Request::Hello { version: PROTOCOL_VERSION }, EXCHANGE_TIMEOUT).await? {
            Response::Hello { version, .. } if version == PROTOCOL_VERSION => Ok(client),
            Response::Hello { version, .. } => Err(ClientError::Version { theirs: version }),
            _ => Err(ClientError::Unexpected),
        }
    }

    async fn exchange(&mut self, req: &Request, limit: Duration) -> Result<Response, ClientError> {
        let frame = protocol::encode(req)?;
        let io = async {
            self.stream.write_all(&frame).await?;
            let mut prefix = [0u8; 4];
            self.stream.read_exact(&mut prefix).await?;
            let mut body = vec![0u8; protocol::frame_len(prefix)?];
            self.stream.read_exact(&mut body).await?;
            protocol::decode::<Response>(&body)
        };
        let response = tokio::select! {
            r = tokio::time::timeout(limit, io) => r.map_err(|_| ClientError::Timeout(limit))??,
            pid = stall(&self.dir) => return Err(ClientError::Stalled { pid }),
        };
        match response {
            Response::Error { message } => Err(ClientError::Remote(message)),
            r => Ok(r),
        }
    }

    /// The logger's state now.
    pub async fn status(&mut self) -> Result<Status, ClientError> {
        match self.exchange(&Request::Status, EXCHANGE_TIMEOUT).await? {
            Response::Status(s) => Ok(s),
            _ => Err(ClientError::Unexpected),
        }
    }

    /// Committed lines `from..from+count`.
    pub async fn read(&mut self, from: LineNo, count: u64) -> Result<Vec<String>, ClientError> {
        match self.exchange(&Request::Read { from, count }, EXCHANGE_TIMEOUT).await? {
            Response::Lines { lines, .. } => Ok(lines),
            _ => Err(ClientError::Unexpected),
        }
    }

    /// The last `last` regions.
    pub async fn regions(&mut self, last: u64) -> Result<Vec<Region>, ClientError> {
        match self.exchange(&Request::Regions { last }, EXCHANGE_TIMEOUT).await? {
            Response::Regions(r) => Ok(r),
            _ => Err(ClientError::Unexpected),
        }
    }

    /// One region.
    pub async fn region(&mut self, id: RegionId) -> Result<Option<Region>, ClientError> {
        match self.exchange(&Request::Region { id }, EXCHANGE_TIMEOUT).await? {
            Response::Regions(r) => Ok(r.into_iter().next()),
            _ => Err(ClientError::Unexpected),
        }
    }

    /// Opens an input region for a line about to be typed into a program.
    pub async fn open_input(&mut self, spec: dtmcp_core::region::InputSpec) -> Result<Region, ClientError> {
        match self.exchange(&Request::OpenInput(spec), EXCHANGE_TIMEOUT).await? {
            Response::Regions(r) => r.into_iter().next().ok_or(ClientError::Unexpected),
            _ => Err(ClientError::Unexpected),
        }
    }

    /// One agent's state in the session, if the session knows it.
    pub async fn agent(&mut self, actor: &str) -> Result<Option<AgentState>, ClientError> {
        match self.exchange(&Request::Agent { actor: actor.to_string() }, EXCHANGE_TIMEOUT).await? {
            Response::Agent(state) => Ok(state),
            _ => Err(ClientError::Unexpected),
        }
    }

    /// Has the logger keep `state` for `actor`.
    pub async fn set_agent(&mut self, actor: &str, state: AgentState) -> Result<(), ClientError> {
        match self.exchange(&Request::SetAgent { actor: actor.to_string(), state }, EXCHANGE_TIMEOUT).await? {
            Response::Stored => Ok(()),
            _ => Err(ClientError::Unexpected),
        }
    }

    /// Waits as `spec` says; the exchange may last the wait's timeout plus
    /// the usual margin.
    pub async fn wait(&mut self, spec: WaitSpec) -> Result<(WaitReason, Status), ClientError> {
        let limit = Duration::from_millis(spec.timeout_ms) + EXCHANGE_TIMEOUT;
        match self.exchange(&Request::Wait(spec), limit).await? {
            Response::Waited { reason, status } => Ok((reason, status)),
            _ => Err(ClientError::Unexpected),
        }
    }
}

/// Returns once the logger of `dir` is seen stopped twice in a row (a
/// traced process flickers through a stop at every system call); never
/// while it runs.
async fn stall(dir: &Path) -> u32 {
    let mut seen = None;
    loop {
        tokio::time::sleep(STALL_POLL).await;
        let now = super::repair::stopped_logger(dir);
        if let Some(pid) = now.filter(|&p| seen == Some(p)) {
            return pid;
        }
        seen = now;
    }
}
