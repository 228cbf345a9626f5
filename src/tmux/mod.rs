//! Talking to the tmux server on our private socket (`tmux -L NAME`).
//!
//! Everything the router asks of tmux goes through [`Tmux`]: [`Tmux::run`]
//! for the hot path (send-keys, display, capture, list), [`Tmux::spawn`] for
//! a `tmux` process of its own. Starting a process costs about 1.6 ms, a
//! command over a control client about 0.02 ms, so `run` keeps one
//! persistent control client (`tmux -C`) per [`Tmux`] and
//! sends each command over it as one quoted line (see [`quote_arg`]).
//!
//! # The hidden session
//!
//! A control client must be attached to a session, so it attaches to one of
//! its own, [`CONTROL_SESSION`] (`__dtmcp_ctl`, one `sleep` pane, directory
//! `/`), with the client flags `ignore-size` (it never resizes windows) and
//! `no-output` (no pane output is sent to it). It is never a person:
//!
//! - sessions: leave out `#{session_name}` for which [`is_control_session`]
//!   holds; [`Tmux::list_panes`] already does;
//! - clients: leave out `#{client_control_mode}` = `1`, which is how
//!   `list-clients -F` marks every control client (ours, another router's).
//!
//! The hidden session keeps the tmux server alive after the last real
//! session closes; [`Tmux::shutdown_control`] kills it (and the client) so
//! the server can exit. To avoid starting or reviving a server by itself,
//! `run` connects only when the server runs and holds at least one real
//! session; otherwise it spawns. Hooks such as `session-created` fire for the
//! hidden session too and should skip it.
//!
//! # Knowing when panes appear
//!
//! [`Tmux::topology`] hands out a counter that goes up whenever a pane may
//! have appeared anywhere on the server, so that a caller can look again
//! then instead of at every call. The control client is told of new
//! windows and sessions wherever they are, but in tmux 3.3a of a split only
//! in its own session's windows; so on connecting it sets global hooks
//! ([`TOPOLOGY_HOOKS`], at index [`HOOK_INDEX`] of each, leaving a person's
//! own hooks alone) that rename the hidden session's window, which every
//! control client is told about. [`Tmux::shutdown_control`] removes them.
//! A new control client also bumps the counter: nobody was told what
//! happened while none was connected.
//!
//! # Semantics of `run`
//!
//! - One command per call. Every argument is literal: `;`, quotes, `$`, `~`,
//!   `#`, braces, UTF-8 and control characters (encoded as octal escapes) all
//!   arrive as given. NUL cannot be carried and is refused.
//! - Commands run as if from the control client, whose current session is
//!   the hidden one: always give an exact target (`-t %N`; `-t =NAME` where
//!   a session is expected, `-t =NAME:` where a window or pane is; see
//!   [`session_target`], [`window_target`]) rather than relying on "the
//!   current" anything. `display -t` falls back to the current pane when its
//!   target does not exist, so check existence with `has-session`.
//! - Commands that would attach, move or detach the calling client, run
//!   other commands later, or block the client's queue (`new-session`,
//!   `attach`, `if-shell`, `run-shell`, `wait-for` without `-S`, …) are
//!   spawned instead, where they behave as on the command line.
//! - Each command has a timeout (default 5 s, [`Tmux::with_timeout`]). A
//!   control client that times out is killed; the next call starts another.
//! - When tmux restarts, the next call reconnects. A command in flight when
//!   the client dies fails with [`TmuxError::Lost`]: it may or may not have
//!   run; a question (a listing, `display -p`) is asked again, spawned. A
//!   command never sent (the client had already died) is spawned.

pub mod clients;
mod control;
mod format;
mod ops;
mod quote;
mod reply;
mod target;
#[cfg(test)]
pub(crate) mod tests;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::watch;

use control::{Control, Reply};

/// Where tmux keeps the socket of `-L name`: `$TMUX_TMPDIR/tmux-UID/name`.
pub fn socket_path(name: &str) -> PathBuf {
    let uid = nix::unistd::getuid();
    let dir = std::env::var_os("TMUX_TMPDIR").filter(|d| !d.is_empty()).unwrap_or_else(|| "/tmp".into());
    Path::new(&dir).join(format!("tmux-{uid}")).join(name)
}

/// Kills the tmux server on socket `name`, and only it, and removes the
/// socket file tmux 3.3a leaves behind. For teardown of private servers
/// (tests, the demo, benchmarks); blocking.
pub fn kill_server_now(name: &str) {
    let _ = std::process::Command::new("tmux").args(["-L", name, "kill-server"]).env_remove("TMUX").output();
    let _ = std::fs::remove_file(socket_path(name));
}

pub use format::{FormatError, PaneInfo, SEP, bare_format, field_end, pane_format, parse_pane, parse_panes};
pub use reply::TOPOLOGY_WINDOW;

/// The hooks that tell control clients of a pane made or moved anywhere
/// (see the module docs).
pub const TOPOLOGY_HOOKS: [&str; 4] = ["after-split-window", "after-join-pane", "after-move-pane", "after-swap-pane"];

/// The index our command takes in each of [`TOPOLOGY_HOOKS`]' arrays.
pub const HOOK_INDEX: u32 = 77;
pub use quote::quote_arg;
pub use target::{BadPaneId, CONTROL_SESSION, PaneId, is_control_session, session_target, window_target};

/// How long a command may take unless [`Tmux::with_timeout`] says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// A failed tmux command, with what was asked and what tmux said.
#[derive(Debug, thiserror::Error)]
pub enum TmuxError {
    /// tmux could not be started.
    #[error("could not run tmux {argv:?}: {source}")]
    Spawn {
        /// The arguments.
        argv: Vec<String>,
        /// Why.
        source: std::io::Error,
    },
    /// tmux answered with an error.
    #[error("tmux {argv:?} failed: {stderr}")]
    Command {
        /// The arguments.
        argv: Vec<String>,
        /// What tmux said.
        stderr: String,
    },
    /// tmux did not answer in time.
    #[error("tmux {argv:?} did not answer within {ms} ms")]
    Timeout {
        /// The arguments.
        argv: Vec<String>,
        /// How long we waited.
        ms: u64,
    },
    /// The command was not sent: it cannot be expressed to tmux.
    #[error("tmux {argv:?} not sent: {reason}")]
    Invalid {
        /// The arguments.
        argv: Vec<String>,
        /// What is wrong with them.
        reason: String,
    },
    /// The control client died between sending the command and its answer
    /// (usually because the tmux server went away); it may or may not have run.
    #[error("tmux {argv:?}: the connection to tmux was lost before it answered; the command may or may not have run")]
    Lost {
        /// The arguments.
        argv: Vec<String>,
    },
    /// tmux answered with output we could not read.
    #[error("tmux {argv:?} gave unreadable output: {reason}")]
    Unexpected {
        /// The arguments.
        argv: Vec<String>,
        /// What was wrong with it.
        reason: String,
    },
}

impl TmuxError {
    /// Whether tmux said no server runs on the socket (none was ever started,
    /// it exited, or its socket file is stale or gone). A server that exits
    /// while a client connects (after its last session closed) says "server
    /// exited unexpectedly" or "lost server": the same state, reached a moment
    /// later.
    pub fn is_no_server(&self) -> bool {
        match self {
            TmuxError::Command { stderr, .. } => {
                ["no server running", "error connecting to", "server exited unexpectedly", "lost server"]
                    .iter()
                    .any(|s| stderr.contains(s))
            }
            _ => false,
        }
    }
}

/// One tmux server, reached by its socket name (`tmux -L NAME`).
///
/// Share it in an `Arc`; every method takes `&self`. Dropping it kills its
/// control client.
pub struct Tmux {
    /// The `-L` socket name.
    socket: String,
    /// The tmux executable.
    bin: PathBuf,
    /// How long one command may take.
    timeout: Duration,
    /// The live control client, if any; replaced when it dies.
    current: Mutex<Option<Arc<Control>>>,
    /// Held while a control client is being started (or shut down), so that
    /// concurrent callers start one, not one each.
    connecting: tokio::sync::Mutex<()>,
    /// Failed connection attempts so far; callers that waited for an attempt
    /// that failed spawn instead of trying again at once.
    failed_attempts: AtomicU64,
    /// When a control client last failed to start although the server ran;
    /// until [`RESTART_PAUSE`] has passed, commands are spawned without
    /// trying again (each try costs two processes).
    start_failed: Mutex<Option<Instant>>,
    /// Start the tmux server in a systemd scope of its own (see
    /// [`scope_wanted`]), so that a service restart does not kill it.
    scope: bool,
    /// Goes up when a pane may have appeared (see [`Tmux::topology`]);
    /// handed to every control client this handle starts.
    topology: Arc<watch::Sender<u64>>,
    /// Goes up at every notification but pane output, and whenever a
    /// control client starts or ends (see [`Tmux::changes`]).
    changes: Arc<AtomicU64>,
    /// Commands asked of tmux so far, and how many of them listed panes.
    counts: [AtomicU64; 2],
}

/// How many commands a [`Tmux`] has sent, for tests and measurements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Every command, over the control client or spawned.
    pub commands: u64,
    /// The `list-panes` among them.
    pub listings: u64,
}

/// Variables of the server's own environment that must not reach a pane:
/// systemd's service plumbing. (The tmux server copies the environment of
/// whoever starts it into every pane.)
pub const SCRUBBED_ENV: &[&str] = &[
    "NOTIFY_SOCKET",
    "INVOCATION_ID",
    "WATCHDOG_USEC",
    "WATCHDOG_PID",
    "LISTEN_FDS",
    "LISTEN_PID",
    "LISTEN_FDNAMES",
    "JOURNAL_STREAM",
    "MANAGERPID",
    "SYSTEMD_EXEC_PID",
    "TMUX",
];

/// The prefix of this program's own settings. None reaches a pane: the
/// server's token, its secrets list and its paths are the server's, not
/// the shell's (a session gets `DOCENT_TERMINAL_MCP_SESSION` on its own).
const OWN_PREFIX: &str = "DOCENT_TERMINAL_MCP_";
/// The settings a pane keeps, read there by the commands the integration
/// puts on its PATH: which variables `docent-terminal-mcp ssh` carries to
/// the far side, and the state home `docent-terminal-mcp install` records
/// a host's files in. Neither is a secret.
const KEPT_OWN: [&str; 2] = ["DOCENT_TERMINAL_MCP_SSH_ENV", "DOCENT_TERMINAL_MCP_HOME"];

/// Leaves out of `command`'s environment what no pane may inherit: the
/// tmux server copies the environment of the client that starts it into
/// every pane, so each command that may start it is scrubbed.
pub fn scrub_env(command: &mut tokio::process::Command) {
    for name in SCRUBBED_ENV {
        command.env_remove(name);
    }
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(|n| n.starts_with(OWN_PREFIX) && !KEPT_OWN.contains(&n)) {
            command.env_remove(name);
        }
    }
}

/// Whether a new tmux server should get a systemd scope of its own: we run
/// under systemd (`INVOCATION_ID` is set) and `systemd-run` exists.
pub fn scope_wanted() -> bool {
    std::env::var_os("INVOCATION_ID").is_some()
        && std::env::var_os("PATH")
            .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join("systemd-run").is_file()))
}

/// The scope unit a tmux server on `socket` runs in.
pub fn scope_unit(socket: &str) -> String {
    let safe: String = socket.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    format!("docent-terminal-mcp-tmux-{safe}.scope")
}

/// The arguments of `systemd-run` that start `BIN -u ARGV` (a tmux command
/// that starts the server on `socket`) in a transient scope of its own,
/// removed once it ends, failed or not.
pub fn scope_args(socket: &str, bin: &Path, argv: &[String]) -> Vec<String> {
    let mut args: Vec<String> = ["--user", "--scope", "--quiet", "--collect", "--unit"].map(str::to_string).to_vec();
    args.push(scope_unit(socket));
    args.push("--".into());
    args.push(bin.display().to_string());
    args.push("-u".into());
    args.extend(argv.iter().cloned());
    args
}

/// How long to spawn commands after a control client failed to start.
const RESTART_PAUSE: Duration = Duration::from_secs(1);

impl Tmux {
    /// The tmux server on socket `socket` (a `-L` name), using `tmux` from `PATH`.
    pub fn new(socket: &str) -> Tmux {
        Tmux {
            socket: socket.to_string(),
            bin: PathBuf::from("tmux"),
            timeout: DEFAULT_TIMEOUT,
            current: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
            failed_attempts: AtomicU64::new(0),
            start_failed: Mutex::new(None),
            scope: false,
            topology: Arc::new(watch::channel(0).0),
            changes: Arc::default(),
            counts: Default::default(),
        }
    }

    /// The same, starting the tmux server in a systemd scope when `scope`.
    pub fn with_scope(self, scope: bool) -> Tmux {
        Tmux { scope, ..self }
    }

    /// The same, with another tmux executable.
    pub fn with_bin(self, bin: impl Into<PathBuf>) -> Tmux {
        Tmux { bin: bin.into(), ..self }
    }

    /// The same, with another per-command timeout.
    pub fn with_timeout(self, timeout: Duration) -> Tmux {
        Tmux { timeout, ..self }
    }

    /// The socket name.
    pub fn socket(&self) -> &str {
        &self.socket
    }

    /// The tmux executable.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// A receiver of the counter that goes up whenever a pane may have
    /// appeared (see the module docs). It is told only while a control
    /// client runs, which the first [`Tmux::run`] starts.
    pub fn topology(&self) -> watch::Receiver<u64> {
        self.topology.subscribe()
    }

    /// A count that goes up whenever tmux tells of a change that may touch
    /// a pane (a client attached or detached, a session renamed, a window
    /// made, closed or moved, a pane split, joined or swapped), and when
    /// the control client starts or ends; `None` while no control client
    /// listens, when nothing would be heard. Two equal counts mean tmux
    /// told of no such change in between, not that nothing changed: a
    /// resize, for one, goes unsaid.
    pub fn changes(&self) -> Option<u64> {
        self.live_control()?;
        Some(self.changes.load(Ordering::SeqCst))
    }

    /// How many commands this handle has sent so far.
    pub fn counts(&self) -> Counts {
        let [commands, listings] = &self.counts;
        Counts { commands: commands.load(Ordering::Relaxed), listings: listings.load(Ordering::Relaxed) }
    }

    fn count(&self, args: &[&str]) {
        self.counts[0].fetch_add(1, Ordering::Relaxed);
        if args.first() == Some(&"list-panes") {
            self.counts[1].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Runs one command, over the control client when the server runs, and
    /// returns its output (each line ended by `\n`). See the module docs.
    pub async fn run(&self, args: &[&str]) -> Result<String, TmuxError> {
        self.count(args);
        let line = quote::command_line(args).map_err(|reason| TmuxError::Invalid { argv: self.argv(args), reason })?;
        if !quote::needs_own_process(args)
            && let Some(control) = self.control().await
            && let Some(answer) = self.run_on(&control, args, line).await
        {
            // A question lost with its client (tmux died or restarted while
            // it was asked) is asked again on its own: asking twice does
            // nothing, and the caller gets tmux's answer, not a maybe.
            match answer {
                Err(TmuxError::Lost { .. }) if quote::only_reads(args) => {}
                answer => return answer,
            }
        }
        self.spawn_argv(quote::argv_literal(args)).await
    }

    /// Runs one command as a spawned `tmux -u -L NAME ARGS…` process. As with
    /// [`Tmux::run`], every argument is literal: one ending in `;` (which on a
    /// command line would end the command) is passed so that tmux reads the
    /// `;` back. Commands that want a terminal (`attach`, `new-session`
    /// without `-d`) fail here as anywhere without one.
    pub async fn spawn(&self, args: &[&str]) -> Result<String, TmuxError> {
        self.count(args);
        quote::check_args(args).map_err(|reason| TmuxError::Invalid { argv: self.argv(args), reason })?;
        self.spawn_argv(quote::argv_literal(args)).await
    }

    /// Starts `tmux ARGS…` as a process of its own and returns at once: for
    /// a command that lasts as long as a person takes (`display-popup`
    /// waits until its popup closes). The process is reaped on a task of
    /// its own, and killed if it outlives `within`.
    pub fn start_detached(&self, args: &[&str], within: Duration) -> Result<(), TmuxError> {
        self.count(args);
        quote::check_args(args).map_err(|reason| TmuxError::Invalid { argv: self.argv(args), reason })?;
        let mut argv = vec!["-L".to_string(), self.socket.clone()];
        argv.extend(quote::argv_literal(args));
        let mut command = tokio::process::Command::new(&self.bin);
        command.arg("-u").args(&argv).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        scrub_env(&mut command);
        let mut child = command.kill_on_drop(true).spawn().map_err(|source| TmuxError::Spawn { argv, source })?;
        tokio::spawn(async move {
            let _ = tokio::time::timeout(within, child.wait()).await;
        });
        Ok(())
    }

    /// The pid of the live control client, if one runs.
    pub fn control_pid(&self) -> Option<u32> {
        self.live_control().and_then(|control| control.pid())
    }

    /// Kills the hidden session (by its exact name, so whichever router's
    /// control clients are attached to it leave) and our control client, so
    /// that a server with no real session left can exit. Call it after
    /// closing the last real session. Errors (no server, no such session)
    /// mean there was nothing to shut down.
    pub async fn shutdown_control(&self) {
        let _connecting = self.connecting.lock().await;
        let old = self.take_control();
        if let Some(old) = old.as_ref().filter(|c| c.is_alive()) {
            // Left behind, they would name a session that is gone.
            for hook in TOPOLOGY_HOOKS {
                let args = ["set-hook", "-gu", &format!("{hook}[{HOOK_INDEX}]")];
                self.command_on(old, &args).await;
            }
        }
        let _ = self.spawn(&["kill-session", "-t", &session_target(CONTROL_SESSION)]).await;
        drop(old);
    }

    /// Runs `args` over `control`, counted, its answer ignored.
    async fn command_on(&self, control: &Control, args: &[&str]) {
        self.count(args);
        if let Ok(line) = quote::command_line(args) {
            let _ = self.run_on(control, args, line).await;
        }
    }

    /// Sets [`TOPOLOGY_HOOKS`] on the server of a new control client and
    /// bumps the topology counter.
    async fn watch_topology(&self, control: &Control) {
        // Only while the hidden session exists: a hook that fails makes the
        // person's own split-window fail too (3.3a).
        let rename = format!(
            "if-shell -F '#{{S:#{{?#{{==:#{{session_name}},{CONTROL_SESSION}}},1,}}}}' 'rename-window -t {} {TOPOLOGY_WINDOW}'",
            window_target(CONTROL_SESSION)
        );
        for hook in TOPOLOGY_HOOKS {
            self.command_on(control, &["set-hook", "-g", &format!("{hook}[{HOOK_INDEX}]"), &rename]).await;
        }
        self.topology.send_modify(|n| *n = n.wrapping_add(1));
        self.changes.fetch_add(1, Ordering::SeqCst);
    }

    /// Sends `line` over `control` and waits for the answer. `None` means
    /// it was never sent (the client had died), so spawning it is safe.
    async fn run_on(&self, control: &Control, args: &[&str], line: String) -> Option<Result<String, TmuxError>> {
        let answer = tokio::time::timeout(self.timeout, control.submit(line)).await;
        let argv = || self.argv(args);
        Some(match answer {
            Ok(Ok(Reply::Done(output))) => Ok(output),
            Ok(Ok(Reply::Failed(stderr))) => Err(TmuxError::Command { argv: argv(), stderr }),
            Ok(Ok(Reply::NotSent)) => return None,
            Ok(Ok(Reply::Lost) | Err(_)) => Err(TmuxError::Lost { argv: argv() }),
            Err(_) => {
                control.kill();
                Err(TmuxError::Timeout { argv: argv(), ms: millis(self.timeout) })
            }
        })
    }

    /// The live control client, starting one if there is none and the
    /// server holds a real session; `None` means "spawn instead".
    async fn control(&self) -> Option<Arc<Control>> {
        if let Some(control) = self.live_control() {
            return Some(control);
        }
        let seen = self.failed_attempts.load(Ordering::SeqCst);
        let _connecting = self.connecting.lock().await;
        if let Some(control) = self.live_control() {
            return Some(control);
        }
        if self.failed_attempts.load(Ordering::SeqCst) != seen {
            return None;
        }
        match self.connect().await {
            Some(control) => {
                let control = Arc::new(control);
                self.watch_topology(&control).await;
                *self.slot() = Some(control.clone());
                Some(control)
            }
            None => {
                self.failed_attempts.fetch_add(1, Ordering::SeqCst);
                None
            }
        }
    }

    /// Starts a control client if the server runs and holds a session other
    /// than the hidden one (so that we never start or keep alive a server
    /// nobody uses).
    async fn connect(&self) -> Option<Control> {
        let paused = |failed: &Option<Instant>| failed.is_some_and(|at| at.elapsed() < RESTART_PAUSE);
        if paused(&lock(&self.start_failed)) {
            return None;
        }
        let sessions = self.spawn(&["list-sessions", "-F", "#{session_name}"]).await.ok()?;
        if !sessions.lines().any(|name| !is_control_session(name)) {
            return None;
        }
        let started =
            Control::start(&self.bin, &self.socket, self.timeout, self.topology.clone(), self.changes.clone()).await;
        *lock(&self.start_failed) = started.is_err().then(Instant::now);
        started.ok()
    }

    /// The current control client if it is alive; a dead one is dropped.
    fn live_control(&self) -> Option<Arc<Control>> {
        let mut slot = self.slot();
        match slot.as_ref() {
            Some(control) if control.is_alive() => Some(control.clone()),
            Some(_) => {
                slot.take();
                None
            }
            None => None,
        }
    }

    fn take_control(&self) -> Option<Arc<Control>> {
        self.slot().take()
    }

    fn slot(&self) -> MutexGuard<'_, Option<Arc<Control>>> {
        lock(&self.current)
    }

    async fn spawn_argv(&self, args: Vec<String>) -> Result<String, TmuxError> {
        let starts_server = self.scope
            && args.first().is_some_and(|a| a == "new-session")
            && std::os::unix::net::UnixStream::connect(socket_path(&self.socket)).is_err();
        let mut argv = vec!["-L".to_string(), self.socket.clone()];
        argv.extend(args);
        if starts_server {
            match self.spawn_in_scope(&argv).await {
                Some(answer) => return answer,
                None => eprintln!("docent-terminal-mcp: systemd-run failed; the tmux server starts in our own cgroup"),
            }
        }
        let mut command = tokio::process::Command::new(&self.bin);
        command.arg("-u").args(&argv);
        self.finish_spawn(command, argv).await
    }

    /// Runs `tmux ARGV` (which starts the server) under
    /// `systemd-run --user --scope`; `None` when systemd-run itself failed.
    async fn spawn_in_scope(&self, argv: &[String]) -> Option<Result<String, TmuxError>> {
        let mut command = tokio::process::Command::new("systemd-run");
        command.args(scope_args(&self.socket, &self.bin, argv));
        match self.finish_spawn(command, argv.to_vec()).await {
            Err(TmuxError::Command { stderr, .. }) if stderr.starts_with("Failed to") => None,
            Err(TmuxError::Spawn { .. }) => None,
            answer => Some(answer),
        }
    }

    async fn finish_spawn(&self, mut command: tokio::process::Command, argv: Vec<String>) -> Result<String, TmuxError> {
        scrub_env(&mut command);
        let run = command.stdin(Stdio::null()).kill_on_drop(true).output();
        let out = match tokio::time::timeout(self.timeout, run).await {
            Ok(Ok(out)) => out,
            Ok(Err(source)) => return Err(TmuxError::Spawn { argv, source }),
            Err(_) => return Err(TmuxError::Timeout { argv, ms: millis(self.timeout) }),
        };
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
            return Err(TmuxError::Command { argv, stderr });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The argument vector as reported in errors: `-L NAME ARGS…`.
    fn argv(&self, args: &[&str]) -> Vec<String> {
        ["-L", &self.socket].iter().chain(args).map(|s| s.to_string()).collect()
    }
}

/// Locks a mutex whose value stays valid even if a holder panicked.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
