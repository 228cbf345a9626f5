//! Where things live: the state home, the tmux socket name, the helper
//! binaries, and the environment variables that override them.

use std::path::{Path, PathBuf};

/// Overrides the state home (`$XDG_STATE_HOME/docent-terminal-mcp`, else
/// `~/.local/state/docent-terminal-mcp`).
pub const ENV_HOME: &str = "DOCENT_TERMINAL_MCP_HOME";
/// Overrides the tmux socket name (`docent-terminal-mcp`).
pub const ENV_SOCKET: &str = "DOCENT_TERMINAL_MCP_SOCKET";
/// Words put before the attach command in replies.
pub const ENV_ATTACH_PREFIX: &str = "DOCENT_TERMINAL_MCP_ATTACH_PREFIX";
/// Overrides the shared server's Unix socket path.
pub const ENV_SOCKET_PATH: &str = "DOCENT_TERMINAL_MCP_SOCKET_PATH";

/// The default tmux socket name.
pub const DEFAULT_SOCKET: &str = "docent-terminal-mcp";
/// The pane logger's file name, installed beside the router.
pub const PANE_LOGGER: &str = "dtmcp-pane-logger";

/// The settings a server runs with, resolved once at start.
#[derive(Clone, Debug)]
pub struct Config {
    /// The state home: sessions, calls.log, the server lock.
    pub home: PathBuf,
    /// The tmux socket name (`tmux -L`).
    pub socket: String,
    /// The `dtmcp-pane-logger` binary tmux starts for each pane.
    pub pane_logger: PathBuf,
    /// Words put before `tmux -L … attach …` in replies.
    pub attach_prefix: Vec<String>,
}

impl Config {
    /// Reads the environment, falling back to the defaults.
    pub fn from_env() -> Result<Config, ConfigError> {
        let home = match std::env::var_os(ENV_HOME).filter(|v| !v.is_empty()) {
            Some(h) => PathBuf::from(h),
            None => default_home()?,
        };
        let socket =
            std::env::var(ENV_SOCKET).ok().filter(|s| !s.is_empty()).unwrap_or_else(|| DEFAULT_SOCKET.to_string());
        if socket.contains('/') || socket.len() > 64 {
            return Err(ConfigError::BadSocket(socket));
        }
        let attach_prefix = std::env::var(ENV_ATTACH_PREFIX)
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        Ok(Config { home: absolute(&home)?, socket, pane_logger: sibling_binary(PANE_LOGGER)?, attach_prefix })
    }

    /// `sessions/` under the state home.
    pub fn sessions_dir(&self) -> PathBuf {
        self.home.join("sessions")
    }

    /// The directory of session `name`.
    pub fn session_dir(&self, name: &str) -> PathBuf {
        self.sessions_dir().join(name)
    }

    /// The call log.
    pub fn calls_log(&self) -> PathBuf {
        self.home.join("calls.log")
    }

    /// The bearer token file of the TCP listener.
    pub fn token_file(&self) -> PathBuf {
        self.home.join("token")
    }

    /// Checks that the pane logger this server would start is there and
    /// may be run: without it every `session_create` would fail after a
    /// wait, with a message about a socket rather than the binary.
    pub fn check_pane_logger(&self) -> Result<(), ConfigError> {
        check_pane_logger(&self.pane_logger)
    }
}

/// Checks that `path` is an executable file, saying which and how to get
/// one when it is not.
pub fn check_pane_logger(path: &Path) -> Result<(), ConfigError> {
    let why = match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "is missing".to_string(),
        Err(e) => format!("cannot be read ({e})"),
        Ok(m) if !m.is_file() => "is not a file".to_string(),
        Ok(_) => match nix::unistd::access(path, nix::unistd::AccessFlags::X_OK) {
            Ok(()) => return Ok(()),
            Err(e) => format!("is not executable ({e})"),
        },
    };
    Err(ConfigError::NoPaneLogger { path: path.to_path_buf(), why })
}

/// The shared server's Unix socket: `explicit` (from `--socket`), else
/// `$DOCENT_TERMINAL_MCP_SOCKET_PATH`, else
/// `$XDG_RUNTIME_DIR/docent-terminal-mcp/server.sock`.
pub fn server_socket_path(explicit: Option<&Path>) -> Result<PathBuf, ConfigError> {
    if let Some(p) = explicit {
        return absolute(p);
    }
    if let Some(p) = std::env::var_os(ENV_SOCKET_PATH).filter(|v| !v.is_empty()) {
        return absolute(Path::new(&p));
    }
    let runtime = std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()).ok_or(ConfigError::NoRuntimeDir)?;
    Ok(PathBuf::from(runtime).join("docent-terminal-mcp").join("server.sock"))
}

/// Why the settings could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Neither the override nor `$HOME` is set.
    #[error("neither {ENV_HOME} nor HOME is set; set one of them")]
    NoHome,
    /// The tmux socket name is not a plain name.
    #[error("{ENV_SOCKET}={0:?} is not a plain socket name (no '/', at most 64 bytes)")]
    BadSocket(String),
    /// Neither the socket override nor `$XDG_RUNTIME_DIR` is set.
    #[error(
        "neither {ENV_SOCKET_PATH} nor XDG_RUNTIME_DIR is set, so the server's socket has no home; set one of them (or pass --socket)"
    )]
    NoRuntimeDir,
    /// The pane logger binary is not beside this program, or cannot run.
    #[error(
        "the pane logger {} {why}; build every binary with `cargo build --release` in the source tree, \
         or install all three with `cargo install --profile dist --path .`",
        path.display()
    )]
    NoPaneLogger {
        /// Where it was looked for.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// Our own executable could not be located.
    #[error("cannot locate the {0} binary next to this program: {1}")]
    Binary(String, std::io::Error),
}

fn default_home() -> Result<PathBuf, ConfigError> {
    if let Some(state) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(state).join("docent-terminal-mcp"));
    }
    let home = std::env::var_os("HOME").filter(|v| !v.is_empty()).ok_or(ConfigError::NoHome)?;
    Ok(PathBuf::from(home).join(".local/state/docent-terminal-mcp"))
}

fn absolute(p: &Path) -> Result<PathBuf, ConfigError> {
    std::path::absolute(p).map_err(|e| ConfigError::Binary("state home".into(), e))
}

/// The path of a binary installed beside the running one (cargo puts all of
/// a package's binaries in one directory; so does `cargo install`).
pub fn sibling_binary(name: &str) -> Result<PathBuf, ConfigError> {
    let exe = std::env::current_exe().map_err(|e| ConfigError::Binary(name.into(), e))?;
    let mut dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    // Test binaries live one level down, in target/<profile>/deps.
    if dir.ends_with("deps") && !dir.join(name).exists() {
        dir.pop();
    }
    Ok(dir.join(name))
}

/// The name of the user this process runs as (from the password database,
/// else `$USER`), looked up once.
pub fn user_name() -> Option<String> {
    static NAME: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        let from_db = nix::unistd::User::from_uid(nix::unistd::geteuid()).ok().flatten().map(|u| u.name);
        from_db.or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
    })
    .clone()
}

/// This host's name, for meta.json and the server lock.
pub fn hostname() -> String {
    nix::unistd::gethostname().ok().and_then(|h| h.into_string().ok()).unwrap_or_else(|| "localhost".to_string())
}

/// Milliseconds since the epoch (kept in the core: the logger stamps with it too).
pub use dtmcp_core::now_ms;
