//! The MCP sessions of HTTP clients, kept on disk so that a restarted
//! server picks them up: a client that keeps its `Mcp-Session-Id` across
//! the restart goes on as if nothing happened (rmcp restores the session
//! from the stored `initialize` parameters). One file per session,
//! `$DOCENT_TERMINAL_MCP_HOME/http-sessions/ID.json`, mode 0600.

use std::path::PathBuf;

use rmcp::transport::streamable_http_server::session::store::{SessionState, SessionStore, SessionStoreError};

/// How long an untouched session file is kept.
const KEEP_MS: u128 = 7 * 24 * 60 * 60 * 1000;

/// Session files under one directory.
pub struct FileSessions {
    dir: PathBuf,
}

impl FileSessions {
    /// Sessions kept in `dir`; files older than a week are removed now.
    pub fn new(dir: PathBuf) -> FileSessions {
        if let Ok(entries) = std::fs::read_dir(&dir) {
            let now = std::time::SystemTime::now();
            for e in entries.filter_map(Result::ok) {
                let age = e.metadata().and_then(|m| m.modified()).ok().and_then(|t| now.duration_since(t).ok());
                if age.is_some_and(|a| a.as_millis() > KEEP_MS) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        FileSessions { dir }
    }

    /// The file of session `id`, when `id` is a plausible one (it names a file).
    fn path(&self, id: &str) -> Result<PathBuf, SessionStoreError> {
        let ok = !id.is_empty()
            && id.len() <= 128
            && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !ok {
            return Err(format!("unusable session id {id:?}").into());
        }
        Ok(self.dir.join(format!("{id}.json")))
    }
}

#[async_trait::async_trait]
impl SessionStore for FileSessions {
    async fn load(&self, id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let Ok(path) = self.path(id) else { return Ok(None) };
        match std::fs::read(&path) {
            Ok(body) => Ok(serde_json::from_slice(&body).ok()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    async fn store(&self, id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let path = self.path(id)?;
        let body = serde_json::to_vec(state)?;
        let dir = self.dir.clone();
        // It must outlive a restart of the server, not a power cut: no
        // fsync, and the file work off the async workers.
        let write = move || {
            dtmcp_core::store::private_dir_all(&dir)?;
            dtmcp_core::store::write_replace(&path, &body)
        };
        tokio::task::spawn_blocking(write).await.map_err(std::io::Error::other)??;
        Ok(())
    }

    async fn delete(&self, id: &str) -> Result<(), SessionStoreError> {
        match std::fs::remove_file(self.path(id)?) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }
}
