//! Sessions: making a pane with its logger, finding it again on every call,
//! listing and closing. A session is one tmux pane; its name is the tmux
//! session's name and the name of its directory under the state home.
//!
//! Nothing here is kept between calls: tmux and the session directories are
//! the truth, so a router killed at any moment leaves nothing to clean up.
//! Finding a session asks tmux about its one pane, never lists them all
//! (see [`panes`]).

pub mod client;
mod names;
mod panes;
mod repair;
mod stopped;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashSet};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::{Config, hostname, now_ms};
use crate::retention::{Action, Decision, SweepMode, Sweeper};
use crate::tmux::{PaneInfo, Tmux, TmuxError};
use dtmcp_core::contract::{OPT_DIR, OPT_LOGGER, PIPE_COMMAND};
use dtmcp_core::marker::Secret;
use dtmcp_core::protocol::{Status, WaitReason, WaitSpec};
use dtmcp_core::store::{self, Meta, files};

pub use client::{ClientError, LoggerClient, Loggers};
pub use names::validate_name;
pub use panes::{Listing, OPT_NAME, Size};
pub(crate) use panes::{is_session, sort_panes};

/// How long a new pane's logger may take to come up.
const LOGGER_START_TIMEOUT: Duration = Duration::from_secs(5);
/// How long `session_create` waits for the first prompt.
const FIRST_PROMPT_TIMEOUT_MS: u64 = 10_000;

/// Why a session operation failed; each message says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The name is not acceptable.
    #[error("{0}")]
    BadName(String),
    /// No live session has that name.
    #[error("{}", not_open(.name, .known, *.closed))]
    NotFound {
        /// The name asked for.
        name: String,
        /// The sessions that do exist.
        known: Vec<String>,
        /// Whether a closed session of that name has its logs here.
        closed: bool,
    },
    /// No session of that name, open or closed, has logs here.
    #[error("no session named {name:?}, open or closed, has logs here{}; session_list names the open ones", logs_list(.known))]
    NoLogs {
        /// The name asked for.
        name: String,
        /// The session directories that do exist.
        known: Vec<String>,
    },
    /// The session's logs were deleted; the tombstone says when and why.
    #[error("session {name:?} has no logs any more: {}", crate::retention::tombstone::describe(.gone))]
    Removed {
        /// The name asked for.
        name: String,
        /// The tombstone.
        gone: crate::retention::Tombstone,
    },
    /// A live session's logs cannot be deleted.
    #[error(
        "session {0:?} is open, so its logs cannot be deleted now; close it first, or use action \"delete_on_close\""
    )]
    Live(String),
    /// The name is taken.
    #[error("a session named {0:?} is already open; pick another name or omit it to get a free one")]
    Exists(String),
    /// A value for the pane is not usable.
    #[error("{0}")]
    BadInput(String),
    /// tmux failed.
    #[error(transparent)]
    Tmux(#[from] TmuxError),
    /// The logger failed.
    #[error(transparent)]
    Logger(#[from] ClientError),
    /// A file failed.
    #[error(transparent)]
    Store(#[from] store::StoreError),
    /// Some other I/O failed.
    #[error("{what}: {}", store::describe_io(source))]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
}

/// Why no session is named `name`: none ever was, or it is closed (its
/// logs still read).
fn not_open(name: &str, known: &[String], closed: bool) -> String {
    match closed {
        true => format!(
            "session {name:?} is closed (its program ended, or it was closed){}; read session={name} and search session={name} still read its logs, and session_create makes a new one",
            known_list(known)
        ),
        false => format!("no session named {name:?} is open{}; session_create makes one", known_list(known)),
    }
}

fn known_list(known: &[String]) -> String {
    if known.is_empty() { String::new() } else { format!(" (open: {})", known.join(", ")) }
}

fn logs_list(known: &[String]) -> String {
    if known.is_empty() { String::new() } else { format!(" (with logs: {})", known.join(", ")) }
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SessionError {
    let what = what.into();
    move |source| SessionError::Io { what, source }
}

/// What `session_create` was asked for.
#[derive(Clone, Debug, Default)]
pub struct CreateOptions {
    /// The name; a free `tN` when absent.
    pub name: Option<String>,
    /// A command line for `sh -c`; an integrated bash when absent or
    /// `bash`, an integrated zsh when `zsh`.
    pub command: Option<String>,
    /// Columns.
    pub cols: Option<u16>,
    /// Rows.
    pub rows: Option<u16>,
    /// Working directory.
    pub cwd: Option<String>,
    /// Extra environment.
    pub env: BTreeMap<String, String>,
    /// Mark the logs to be deleted when the session closes.
    pub delete_logs_on_close: bool,
    /// A regex for the session's own prompt (checked here).
    pub prompt_pattern: Option<String>,
}

/// A live session, resolved for one call.
#[derive(Clone, Debug)]
pub struct Session {
    /// Its name.
    pub name: String,
    /// Its directory.
    pub dir: PathBuf,
    /// Its pane.
    pub pane: PaneInfo,
    /// What was recorded at creation.
    pub meta: Meta,
    /// The pool its logger's connection is kept in.
    pub loggers: Loggers,
}

impl Session {
    /// The connection to the session's logger (shared, made when there is
    /// none; see [`client`]).
    pub async fn logger(&self) -> Result<LoggerClient, ClientError> {
        self.loggers.connect(&self.dir.join(files::SOCKET)).await
    }
}

/// A session's logs, open or closed, for reading through the store.
#[derive(Clone, Debug)]
pub struct SessionLogs {
    /// Its name.
    pub name: String,
    /// Its directory.
    pub dir: PathBuf,
    /// Whether its pane still lives.
    pub live: bool,
}

/// The sessions of one server: its tmux socket and state home.
pub struct Sessions {
    /// The server's settings.
    pub cfg: Config,
    /// Its tmux server.
    pub tmux: Arc<Tmux>,
    /// Where the shell scripts were written.
    shell_dir: PathBuf,
    /// The directory put first on every session's PATH (the command's link).
    bin_dir: PathBuf,
    /// Notes for a session's next reply (a repaired logger's gap), by name;
    /// lost with the process, which is fine: the gap is in the log too.
    notes: std::sync::Mutex<std::collections::HashMap<String, String>>,
    /// Held while a dead logger is being replaced.
    repairing: tokio::sync::Mutex<()>,
    /// The tmux sessions getting a new pane from us right now: their
    /// unnamed panes are not strays yet. Shared with the stray watch.
    making: Arc<std::sync::Mutex<HashSet<String>>>,
    /// Held while strays are adopted, so that each is adopted once. Shared
    /// with the stray watch.
    adopting: Arc<tokio::sync::Mutex<()>>,
    /// The task that adopts strays when tmux says panes changed.
    strays: std::sync::Mutex<panes::StrayWatch>,
    /// The pane of each session as tmux described it lately (see
    /// [`Sessions::by_meta`]).
    seen: std::sync::Mutex<std::collections::HashMap<String, Seen>>,
    /// The connections to the sessions' loggers, one per logger.
    pub loggers: Loggers,
    /// What the logger repair has said and read, so that it says each
    /// trouble once and each gap once.
    repair: repair::Said,
    /// Each session's `meta.json` as last read, read again when it is
    /// replaced (see [`crate::stamped`]): a listing reads every one.
    metas: Arc<crate::stamped::Stamped<Meta>>,
}

/// A pane as tmux described it, and when.
#[derive(Clone)]
struct Seen {
    pane: PaneInfo,
    /// The session's `meta.json` (written when the session is made, so
    /// it changes only with its pane) and its directory's inode.
    meta: Meta,
    instance: Option<u64>,
    /// The control client's count of changes before tmux was asked.
    changes: u64,
    /// When tmux was asked.
    at: std::time::Instant,
}

impl Seen {
    /// Whether this description still holds as far as tmux tells: taken
    /// under the same count of changes (`changes`, `None` when no
    /// notification is heard) and within [`SEEN_FOR`].
    fn fresh(&self, changes: Option<u64>) -> bool {
        Some(self.changes) == changes && self.at.elapsed() < SEEN_FOR
    }
}

/// Whether process `pid` is there: a signal 0 asks the kernel without a
/// `/proc` read (a zombie passes, for the moment before tmux reaps it).
fn process_exists(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else { return false };
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) | Err(nix::errno::Errno::EPERM) => pid > 0,
        Err(_) => false,
    }
}

/// How many sessions' `meta.json` are held parsed.
const METAS_HELD: usize = 4096;

/// How long a pane's description is taken as still true when tmux told of
/// no change since. tmux says nothing of a resize or of a pane option, so
/// this bounds how stale those may be.
const SEEN_FOR: std::time::Duration = std::time::Duration::from_millis(500);

impl Sessions {
    /// Prepares the state home (directories, shell scripts).
    pub fn new(cfg: Config, tmux: Arc<Tmux>) -> Result<Sessions, SessionError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(cfg.sessions_dir())
            .map_err(io(format!("creating {}", cfg.sessions_dir().display())))?;
        store::check_private_dir(&cfg.home).map_err(io("the state home"))?;
        let shell_dir = crate::shell::install(&cfg.home).map_err(io("writing the shell integration"))?;
        let bin_dir = crate::remote::install_shim(&cfg.home).map_err(io("linking the command into the state home"))?;
        Ok(Sessions {
            cfg,
            tmux,
            shell_dir,
            bin_dir,
            notes: Default::default(),
            repairing: Default::default(),
            making: Default::default(),
            adopting: Default::default(),
            strays: Default::default(),
            seen: Default::default(),
            loggers: Loggers::default(),
            repair: Default::default(),
            metas: Arc::new(crate::stamped::Stamped::new(METAS_HELD)),
        })
    }

    /// The same sessions for a task that only sweeps: it never starts the
    /// stray watch (one per server is enough, and it belongs with the
    /// handle that makes panes).
    pub fn for_sweeping(self) -> Sessions {
        *self.strays.lock().unwrap_or_else(|e| e.into_inner()) = panes::StrayWatch::Never;
        self
    }

    /// The command a person runs to watch or join the tmux session
    /// `tmux_session` (a split pane's session is its window's), led by
    /// `DOCENT_TERMINAL_MCP_ATTACH_PREFIX`'s words.
    pub fn attach_command(&self, tmux_session: &str) -> String {
        let mut words = self.cfg.attach_prefix.clone();
        words.extend(["tmux", "-L", &self.cfg.socket, "attach", "-t", tmux_session].map(str::to_string));
        words.iter().map(|w| shell_word(w)).collect::<Vec<_>>().join(" ")
    }

    /// Finds the live session `name`.
    pub async fn resolve(&self, name: &str) -> Result<Session, SessionError> {
        self.resolve_quiet(name).await
    }

    /// A connection to `s`'s logger; a logger found dead is replaced first
    /// (see [`Sessions::ensure_logger`]). Gaps its logger recorded since the
    /// last call are noted for the reply.
    pub async fn logger(&self, s: &Session) -> Result<LoggerClient, SessionError> {
        self.note_logger_gaps(s);
        if let Ok(client) = s.logger().await {
            return Ok(client);
        }
        self.ensure_logger(s).await?;
        Ok(s.logger().await?)
    }

    /// Finds the live session `name` (its logger is not checked): the pane
    /// its `meta.json` names, checked with one small tmux command. Only when
    /// that pane is not the session (gone, the logs deleted, a stray not yet
    /// taken on) are the panes listed, to find it or say which exist.
    pub async fn resolve_quiet(&self, name: &str) -> Result<Session, SessionError> {
        validate_name(name).map_err(SessionError::BadName)?;
        self.watch_strays();
        if let Some(s) = self.by_meta(name).await? {
            return Ok(s);
        }
        let panes = self.panes_with(Listing::Bare).await?;
        let Some(pane) = panes.iter().find(|p| p.session_name == name).cloned() else {
            let mut known: Vec<String> = panes.into_iter().map(|p| p.session_name).collect();
            known.dedup();
            let closed = self.cfg.session_dir(name).join(files::META).exists();
            return Err(SessionError::NotFound { name: name.to_string(), known, closed });
        };
        let dir = self.cfg.session_dir(name);
        let meta = match store::read_meta(&dir) {
            Err(store::StoreError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Err(SessionError::BadInput(format!(
                    "the logs of session {name} were deleted while it ran ({} is gone); its logger notices within a second and logging starts again in fresh files: call again",
                    dir.join(files::META).display()
                )));
            }
            other => other?,
        };
        Ok(Session { name: name.to_string(), dir, pane, meta, loggers: self.loggers.clone() })
    }

    /// The session of `pane`, a pane from [`Sessions::panes`], without asking
    /// tmux again; fails for a pane whose `meta.json` cannot be read (a tmux
    /// session someone else made on the socket).
    pub fn session_of(&self, pane: &PaneInfo) -> Result<Session, SessionError> {
        let dir = self.cfg.session_dir(&pane.session_name);
        let meta = Meta::clone(&*self.meta_in(&dir)?);
        Ok(Session { name: pane.session_name.clone(), dir, pane: pane.clone(), meta, loggers: self.loggers.clone() })
    }

    /// The `meta.json` of the session in `dir`, read again only when it
    /// was replaced since this process last read it.
    pub fn meta_in(&self, dir: &Path) -> Result<Arc<Meta>, SessionError> {
        Ok(self.metas.get(&dir.join(files::META), |_| store::read_meta(dir))?)
    }

    /// Session `name` found through the pane its `meta.json` records, if
    /// that pane is the session's. tmux is asked about the pane unless it
    /// described it less than [`SEEN_FOR`] ago, has told of no change
    /// since (see [`Tmux::changes`]) and the pane's shell still runs: with
    /// many agents calling at once, tmux (one thread for every pane) is
    /// what they queue for, and this spares it one command a call.
    async fn by_meta(&self, name: &str) -> Result<Option<Session>, SessionError> {
        let dir = self.cfg.session_dir(name);
        let changes = self.tmux.changes();
        if let Some(seen) = self.seen_lately(name, changes) {
            return Ok(Some(Session {
                name: name.to_string(),
                dir,
                pane: seen.pane,
                meta: seen.meta,
                loggers: self.loggers.clone(),
            }));
        }
        let Ok(meta) = store::read_meta(&dir) else { return Ok(None) };
        let Ok(id) = crate::tmux::PaneId::parse(&meta.pane_id) else { return Ok(None) };
        let Some(mut pane) = self.tmux.pane(&id).await?.filter(|p| is_session(p, name)) else {
            self.seen().remove(name);
            return Ok(None);
        };
        pane.session_name = name.to_string();
        if let Some(changes) = changes {
            let instance = std::fs::metadata(&dir).ok().map(|m| m.ino());
            let seen =
                Seen { pane: pane.clone(), meta: meta.clone(), instance, changes, at: std::time::Instant::now() };
            self.seen().insert(name.to_string(), seen);
        }
        Ok(Some(Session { name: name.to_string(), dir, pane, meta, loggers: self.loggers.clone() }))
    }

    /// Session `name` as tmux described its pane lately, if that still
    /// holds: described under the same count of changes (`changes`, `None`
    /// when no notification is heard), within [`SEEN_FOR`], its shell
    /// still there.
    fn seen_lately(&self, name: &str, changes: Option<u64>) -> Option<Seen> {
        let seen = self.seen().get(name).cloned()?;
        (seen.fresh(changes) && !seen.pane.pane_dead && process_exists(seen.pane.pane_pid)).then_some(seen)
    }

    /// The inode of session `name`'s directory (which tells a session made
    /// again under its name from the old one): as seen with its pane
    /// lately, else from the file system.
    pub fn instance(&self, name: &str) -> Option<u64> {
        let changes = self.tmux.changes();
        let seen = self.seen().get(name).filter(|s| s.fresh(changes)).and_then(|s| s.instance);
        seen.or_else(|| std::fs::metadata(self.cfg.session_dir(name)).ok().map(|m| m.ino()))
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Seen>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Finds the logs of session `name`, whether its pane lives or not.
    /// Nothing is written and no logger is needed.
    pub async fn open_logs(&self, name: &str) -> Result<SessionLogs, SessionError> {
        names::validate_logs_name(name).map_err(SessionError::BadName)?;
        let dir = self.cfg.session_dir(name);
        if !dir.join(files::TEXT).is_file() && !dir.join(files::META).is_file() {
            if let Some(gone) = crate::retention::tombstone::find(&self.cfg.home, name) {
                return Err(SessionError::Removed { name: name.to_string(), gone });
            }
            return Err(SessionError::NoLogs { name: name.to_string(), known: self.logged_names() });
        }
        // Reading changes no file; this tells the sweep the logs are in use.
        if let Err(e) = crate::retention::touch_last_used(&dir) {
            eprintln!("docent-terminal-mcp: could not mark {} as used: {e}", dir.display());
        }
        let live = validate_name(name).is_ok() && self.by_meta(name).await.is_ok_and(|s| s.is_some());
        Ok(SessionLogs { name: name.to_string(), dir, live })
    }

    /// The names of every session directory, sorted.
    fn logged_names(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.cfg.sessions_dir()) else { return Vec::new() };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.path().join(files::META).is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| names::validate_logs_name(n).is_ok())
            .collect();
        names.sort();
        names
    }

    /// Makes a new session and waits for its first prompt.
    pub async fn create(&self, opts: CreateOptions) -> Result<(Session, Status), SessionError> {
        let panes = self.panes_with(Listing::Bare).await?;
        let live: Vec<String> = self.taken_names(&panes).into_iter().collect();
        let name = match &opts.name {
            Some(n) => {
                validate_name(n).map_err(SessionError::BadName)?;
                if live.contains(n) {
                    return Err(SessionError::Exists(n.clone()));
                }
                n.clone()
            }
            None => names::free_name(&live),
        };
        check_options(&opts)?;
        let _making = panes::Making::new(self, &name);
        self.make(&name, &opts, Place::New, None).await
    }

    /// Splits session `from`'s pane: the new pane is session
    /// `<window>+N`, made as [`Sessions::create`] makes one.
    pub async fn split(
        &self,
        from: &str,
        split: Split,
        opts: CreateOptions,
    ) -> Result<(Session, Status), SessionError> {
        check_options(&opts)?;
        let parent = self.resolve(from).await?;
        let _making = panes::Making::new(self, &parent.pane.tmux_session);
        let taken = self.taken_names(&self.panes_with(Listing::Bare).await?);
        let name = panes::split_name(&parent.pane.tmux_session, &taken);
        let place = Place::Split { target: parent.pane.pane_id.to_string(), split };
        let made = self.make(&name, &opts, place, Some(parent.name.clone())).await?;
        // The new pane's replies are redacted as its parent's are, with the
        // same placeholders (the values it knows of its own are learnt by
        // the caller, which knows the server's secrets).
        if let Err(e) = dtmcp_core::redact::inherit(&parent.dir, &made.0.dir) {
            eprintln!("docent-terminal-mcp: {name} did not get {}'s placeholders: {e}", parent.name);
        }
        Ok(made)
    }

    /// Makes session `name`'s pane at `place`, its logger, and waits for
    /// the first prompt.
    async fn make(
        &self,
        name: &str,
        opts: &CreateOptions,
        place: Place,
        parent: Option<String>,
    ) -> Result<(Session, Status), SessionError> {
        let name = name.to_string();
        let dir = self.prepare_dir(&name)?;
        if opts.delete_logs_on_close {
            crate::retention::set_markers(&dir, Action::DeleteOnClose)
                .map_err(io(format!("marking {} delete-on-close", dir.display())))?;
        }
        let secret = Secret::generate().map_err(io("making the session secret"))?;
        write_private(&dir.join(files::SECRET), &secret.to_nonce())?;
        let (argv, integrated, extra_env) = self.program(opts);
        let mut opts = opts.clone();
        opts.env.extend(extra_env);
        let pane = self.start_pane(&name, &dir, (&opts, &place), &argv).await?;
        let undo = |pane: &str| ["kill-pane".to_string(), "-t".to_string(), pane.to_string()];
        if let Err(e) = self.tmux.run(&["set-option", "-p", "-t", &pane.pane_id, OPT_NAME, &name]).await {
            let _ = self.tmux.run(&undo(&pane.pane_id).each_ref().map(String::as_str)).await;
            return Err(e.into());
        }
        let meta = Meta {
            name: name.clone(),
            host: hostname(),
            tmux_socket: self.cfg.socket.clone(),
            tmux_socket_path: crate::tmux::socket_path(&self.cfg.socket).display().to_string(),
            tmux_pid: pane.tmux_pid,
            pane_id: pane.pane_id.clone(),
            command: argv,
            integrated,
            created_ms: now_ms(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            prompt_pattern: opts.prompt_pattern.clone(),
            adopted: false,
            parent,
            tty: pane.info.pane_tty.clone(),
        };
        if let Err(e) = store::write_meta(&dir, &meta) {
            // Undone whole (a full disk, say): no pane without its record.
            let _ = self.tmux.run(&undo(&pane.pane_id).each_ref().map(String::as_str)).await;
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e.into());
        }
        let mut info = pane.info;
        info.session_name.clone_from(&name);
        info.dtmcp_name.clone_from(&name);
        let session = Session { name, dir, pane: info, meta, loggers: self.loggers.clone() };
        let status = match self.attach_logger(&session, Some(&pane.channel)).await {
            Ok(()) => self.first_prompt(&session, integrated).await?,
            Err(e) => {
                let _ = self.tmux.run(&undo(&pane.pane_id).each_ref().map(String::as_str)).await;
                return Err(e);
            }
        };
        Ok((session, status))
    }

    /// The pane's program, whether it is an integrated shell, and what it
    /// adds to the session's environment.
    fn program(&self, opts: &CreateOptions) -> (Vec<String>, bool, Vec<(String, String)>) {
        match opts.command.as_deref().map(str::trim) {
            None | Some("") | Some("bash") => (crate::shell::bash_argv(&self.shell_dir), true, Vec::new()),
            Some("zsh") => {
                // The user's ZDOTDIR: the one asked for in `env`, else the server's.
                let theirs = opts.env.get("ZDOTDIR").cloned().or_else(|| std::env::var("ZDOTDIR").ok());
                let (argv, env) = crate::shell::zsh_start(&self.shell_dir, theirs.as_deref());
                (argv, true, env)
            }
            // `docent-terminal-mcp into ...` or `ssh ...` brings an integrated
            // shell along: its first prompt is awaited as bash's is.
            Some(cmd) => {
                (vec!["sh".into(), "-c".into(), cmd.to_string()], crate::remote::brings_integration(cmd), Vec::new())
            }
        }
    }

    /// Makes the session directory, moving a closed session's old one aside
    /// as `NAME.N`.
    fn prepare_dir(&self, name: &str) -> Result<PathBuf, SessionError> {
        let dir = self.cfg.session_dir(name);
        if dir.exists() {
            let archived = (1..)
                .map(|n| self.cfg.session_dir(&format!("{name}.{n}")))
                .find(|p| !p.exists())
                .unwrap_or_else(|| self.cfg.session_dir(&format!("{name}.0")));
            std::fs::rename(&dir, &archived).map_err(io(format!("archiving {}", dir.display())))?;
        }
        std::fs::DirBuilder::new().mode(0o700).create(&dir).map_err(io(format!("creating {}", dir.display())))?;
        Ok(dir)
    }

    async fn start_pane(
        &self,
        name: &str,
        dir: &Path,
        (opts, place): (&CreateOptions, &Place),
        argv: &[String],
    ) -> Result<NewPane, SessionError> {
        let channel = format!("dtmcp-ready-{}-{}", std::process::id(), now_ms());
        let mut args: Vec<String> = match place {
            Place::New => {
                let cols = opts.cols.unwrap_or(120).to_string();
                let rows = opts.rows.unwrap_or(40).to_string();
                ["new-session", "-d", "-P", "-F", "#{pid} #{pane_id}", "-s", name, "-x", &cols, "-y", &rows]
                    .map(str::to_string)
                    .to_vec()
            }
            Place::Split { target, split } => {
                let mut args: Vec<String> =
                    ["split-window", "-d", "-P", "-F", "#{pid} #{pane_id}", "-t", target.as_str()]
                        .map(str::to_string)
                        .to_vec();
                args.push(if split.beside { "-h" } else { "-v" }.to_string());
                if let Some(size) = split.size {
                    args.extend(["-l".to_string(), size.to_string()]);
                }
                args
            }
        };
        if let Some(cwd) = &opts.cwd {
            args.extend(["-c".to_string(), cwd.clone()]);
        }
        let mut env = opts.env.clone();
        // The secret itself is read from its file by the hold below: a
        // value on tmux's command line would show in every user's `ps` for
        // as long as the tmux server runs (it keeps its first client's argv).
        env.insert("__DTMCP_SECRET_FILE".into(), dir.join(files::SECRET).display().to_string());
        env.insert("DOCENT_TERMINAL_MCP_SESSION".into(), name.to_string());
        // The command on PATH: put first by the hold below for any program
        // (tmux gives a new session's first program the client's PATH,
        // whatever -e says), and again by an integrated shell after the
        // profile files (Debian's /etc/profile sets PATH afresh).
        env.insert("__DTMCP_BIN".into(), self.bin_dir.display().to_string());
        // The session's shell keeps its history with its logs, so the
        // commands agents type stay out of the person's ~/.bash_history.
        env.insert("__DTMCP_HISTFILE".into(), dir.join("history").display().to_string());
        // No pager: a reply already clips long output and keeps all of it
        // readable, while a pager would hold the terminal until sent `q`
        // and log only the pages shown. The caller's env wins.
        for pager in ["PAGER", "GIT_PAGER"] {
            env.entry(pager.into()).or_insert_with(|| "cat".into());
        }
        // Python 3.13's own REPL indents a line after a `:` by itself, so
        // a block typed line by line would be indented twice; the basic
        // one takes each line as typed. The caller's env wins here too.
        env.entry("PYTHON_BASIC_REPL".into()).or_insert_with(|| "1".into());
        for (k, v) in &env {
            args.extend(["-e".to_string(), format!("{k}={v}")]);
        }
        // The pane's first program waits on a tmux channel until its logger
        // is attached, so not one byte of its output goes unlogged.
        let hold = "IFS= read -r __DTMCP_NONCE <\"$__DTMCP_SECRET_FILE\"; export __DTMCP_NONCE; unset __DTMCP_SECRET_FILE; \
                    PATH=$__DTMCP_BIN:$PATH; \"$0\" wait-for \"$1\"; shift; exec \"$@\"";
        args.extend(["--", "sh", "-c", hold, &tmux_path(), &channel].map(str::to_string));
        args.extend(argv.iter().cloned());
        let argv_ref: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self.tmux.spawn(&argv_ref).await?;
        let (tmux_pid, pane_id) = parse_new_pane(&out)
            .ok_or_else(|| SessionError::BadInput(format!("tmux answered new-session with {out:?}")))?;
        let info = self.find_pane(&pane_id).await?;
        Ok(NewPane { tmux_pid, pane_id, channel, info, dir: dir.to_path_buf() })
    }

    async fn find_pane(&self, pane_id: &str) -> Result<PaneInfo, SessionError> {
        let vanished = || SessionError::BadInput(format!("the new pane {pane_id} vanished at once"));
        let id = crate::tmux::PaneId::parse(pane_id).map_err(|_| vanished())?;
        self.tmux.pane(&id).await?.ok_or_else(vanished)
    }

    /// Starts the pane's logger, waits until it answers, then releases the
    /// pane's first program.
    async fn attach_logger(&self, s: &Session, channel: Option<&str>) -> Result<(), SessionError> {
        let logger = self.cfg.pane_logger.to_string_lossy().into_owned();
        let dir = s.dir.to_string_lossy().into_owned();
        let pane = s.pane.pane_id.as_str();
        // `#{q:...}` escapes shell specials but not newlines or other control
        // characters, which would end the pipe command early.
        for path in [&logger, &dir] {
            if path.chars().any(char::is_control) {
                return Err(SessionError::BadInput(format!(
                    "the path {path:?} holds control characters; move the state home or the binary elsewhere"
                )));
            }
        }
        self.tmux.run(&["set-option", "-p", "-t", pane, OPT_LOGGER, &logger]).await?;
        self.tmux.run(&["set-option", "-p", "-t", pane, OPT_DIR, &dir]).await?;
        self.tmux.run(&["pipe-pane", "-O", "-t", pane, PIPE_COMMAND]).await?;
        let started = Instant::now();
        loop {
            match s.logger().await {
                Ok(_) => break,
                Err(e) if started.elapsed() > LOGGER_START_TIMEOUT => {
                    let said = std::fs::read_to_string(s.dir.join("logger.log")).unwrap_or_default();
                    return Err(SessionError::BadInput(format!(
                        "the pane logger ({logger}) did not come up within {LOGGER_START_TIMEOUT:?}: {e} {}",
                        said.trim()
                    )));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(2)).await,
            }
        }
        if let Some(channel) = channel {
            self.tmux.run(&["wait-for", "-S", channel]).await?;
        }
        Ok(())
    }

    async fn first_prompt(&self, s: &Session, integrated: bool) -> Result<Status, SessionError> {
        let mut logger = s.logger().await?;
        let status = logger.status().await?;
        let spec = if integrated {
            WaitSpec {
                after: status.mark,
                command_done: true,
                timeout_ms: FIRST_PROMPT_TIMEOUT_MS,
                ..WaitSpec::default()
            }
        } else {
            WaitSpec { after: status.mark, settle_ms: Some(300), timeout_ms: 2_000, ..WaitSpec::default() }
        };
        let (reason, status) = logger.wait(spec).await?;
        if reason == WaitReason::Eof || status.eof {
            return Err(SessionError::BadInput(ended_at_once(s)));
        }
        Ok(status)
    }

    /// Closes session `name`: its pane ends, its logger finishes, its logs stay.
    pub async fn close(&self, name: &str) -> Result<PathBuf, SessionError> {
        let s = self.resolve(name).await?;
        self.tmux.run(&["kill-pane", "-t", s.pane.pane_id.as_str()]).await?;
        self.closed(std::slice::from_ref(&s.dir)).await;
        Ok(s.dir)
    }

    /// Closes every pane of session `name`'s window; returns the sessions
    /// closed and their directories.
    pub async fn close_window(&self, name: &str) -> Result<Vec<(String, PathBuf)>, SessionError> {
        let s = self.resolve(name).await?;
        let gone: Vec<(String, PathBuf)> = self
            .panes_with(Listing::Bare)
            .await?
            .into_iter()
            .filter(|p| p.window_id == s.pane.window_id)
            .map(|p| (p.session_name.clone(), self.cfg.session_dir(&p.session_name)))
            .collect();
        self.tmux.run(&["kill-window", "-t", s.pane.pane_id.as_str()]).await?;
        let dirs: Vec<PathBuf> = gone.iter().map(|(_, d)| d.clone()).collect();
        self.closed(&dirs).await;
        Ok(gone)
    }

    /// After panes were killed: waits briefly for their loggers to finish,
    /// lets an empty tmux server go, and sweeps delete-on-close logs.
    async fn closed(&self, dirs: &[PathBuf]) {
        // The logger ends when its pipe closes; wait briefly so the caller
        // sees a finished log.
        let deadline = Instant::now() + Duration::from_secs(2);
        while dirs.iter().any(|d| d.join(files::SOCKET).exists()) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Our hidden control session would keep an otherwise empty tmux
        // server alive; let it go with the last session.
        if self.tmux.list_panes_bare().await.is_ok_and(|p| p.is_empty()) {
            self.tmux.shutdown_control().await;
        }
        // A session marked delete-on-close goes now, not at the next minute.
        self.sweep(SweepMode::DeleteOnCloseOnly, Sweep::Delete).await;
    }

    /// The sweeper of this server's state home and tmux socket.
    pub fn sweeper(&self) -> Sweeper {
        Sweeper {
            home: self.cfg.home.clone(),
            host: hostname(),
            socket: self.cfg.socket.clone(),
            policy: crate::retention::Policy::from_env(),
        }
    }

    /// The names of the live sessions, or `None` when tmux could not say.
    /// Strays are not adopted here: they have no logs to keep or sweep yet.
    pub async fn live_names(&self) -> Option<HashSet<String>> {
        match self.sorted(Listing::Bare).await {
            Ok(sorted) => Some(sorted.sessions.into_iter().map(|p| p.session_name).collect()),
            Err(e) => {
                eprintln!("docent-terminal-mcp: no sweep, tmux did not list its panes: {e}");
                None
            }
        }
    }

    /// Runs a sweep (or, with [`Sweep::DryRun`], only says what it would
    /// delete). Errors are logged, never returned: a sweep is housekeeping.
    pub async fn sweep(&self, mode: SweepMode, how: Sweep) -> Vec<Decision> {
        let sweeper = self.sweeper();
        let Some(live) = self.live_names().await else { return Vec::new() };
        let due = sweeper.due(now_ms(), &live, mode);
        if how == Sweep::DryRun || due.is_empty() {
            return due;
        }
        // Liveness again, just before deleting: a session may have been
        // reopened under the same name meanwhile.
        let Some(live) = self.live_names().await else { return Vec::new() };
        // Deleting blocks; off the runtime's few workers it goes. Once
        // started it runs to the end even if the sweep's task is aborted.
        let apply = tokio::task::spawn_blocking(move || sweeper.apply(now_ms(), &due, &live));
        apply.await.unwrap_or_else(|e| {
            eprintln!("docent-terminal-mcp: the sweep failed: {e}");
            Vec::new()
        })
    }

    /// Applies a `session_logs` action to session `name`, returning its
    /// directory.
    pub async fn set_retention(&self, name: &str, action: Action) -> Result<PathBuf, SessionError> {
        let logs = self.open_logs(name).await?;
        if action != Action::Delete {
            crate::retention::set_markers(&logs.dir, action)
                .map_err(io(format!("setting the markers of {}", logs.dir.display())))?;
            return Ok(logs.dir);
        }
        let live = self.live_names().await.ok_or_else(|| {
            SessionError::BadInput("tmux did not say which sessions are open, so nothing was deleted".into())
        })?;
        let sweeper = self.sweeper();
        let closed = sweeper.facts_of(name, &live).is_some_and(|f| f.closed);
        if logs.live || live.contains(name) {
            return Err(SessionError::Live(name.to_string()));
        }
        if !closed {
            return Err(SessionError::BadInput(format!(
                "session {name:?} was made by another host or tmux socket (see its meta.json); its server decides about its logs"
            )));
        }
        sweeper
            .delete(name, crate::retention::Why::Asked, now_ms())
            .map_err(io(format!("deleting {}", logs.dir.display())))?;
        Ok(logs.dir)
    }
}

/// Where a new pane goes.
enum Place {
    /// A tmux session of its own.
    New,
    /// Beside or below the pane `target`.
    Split {
        /// The pane split.
        target: String,
        /// How.
        split: Split,
    },
}

/// How `session_split` splits a pane.
#[derive(Clone, Copy, Debug, Default)]
pub struct Split {
    /// Side by side (a vertical line between), rather than one above the other.
    pub beside: bool,
    /// The new pane's width (beside) or height (below), in cells.
    pub size: Option<u16>,
}

/// A pane just made.
struct NewPane {
    tmux_pid: u32,
    pane_id: String,
    channel: String,
    info: PaneInfo,
    #[allow(dead_code)]
    dir: PathBuf,
}

/// What to say of session `s` whose program ended before it was ready (a
/// command not found, a program that failed at once): the last lines it
/// printed, which say why (`sh: 1: /nonexistent: not found`). A check of
/// `PATH` beforehand could not say as much: the command is a shell line,
/// run with the session's own environment, and may start with a builtin,
/// a variable or a path the server's environment does not see.
fn ended_at_once(s: &Session) -> String {
    /// The lines of output quoted.
    const LAST: u64 = 5;
    let said = store::LineReader::open(&s.dir)
        .and_then(|r| {
            let (lines, _) = r.extent()?;
            let from = lines.saturating_sub(LAST - 1).max(1);
            r.read(dtmcp_core::types::LineNo(from), lines + 1 - from)
        })
        .unwrap_or_default();
    let said: Vec<&str> = said.iter().map(|l| l.trim_end()).filter(|l| !l.is_empty()).collect();
    let said = match said.is_empty() {
        true => "(it printed nothing)".to_string(),
        false => said.join("\n  "),
    };
    let command = s.meta.command.last().map_or("", String::as_str);
    format!(
        "session {} did not start: its program ({command}) ended at once. It printed:\n  {said}\n\
         Check the command: is it installed, on the PATH of the session's shell, spelled right? Nothing runs in {}; \
         its log is kept in {}",
        s.name,
        s.name,
        s.dir.display()
    )
}

fn parse_new_pane(out: &str) -> Option<(u32, String)> {
    let mut words = out.split_whitespace();
    let pid = words.next()?.parse().ok()?;
    let pane = words.next()?;
    (pane.starts_with('%') && pane[1..].bytes().all(|b| b.is_ascii_digit())).then(|| (pid, pane.to_string()))
}

fn check_options(opts: &CreateOptions) -> Result<(), SessionError> {
    for (k, v) in &opts.env {
        let name_ok = !k.is_empty()
            && !k.starts_with(|c: char| c.is_ascii_digit())
            && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !name_ok || v.contains('\0') {
            return Err(SessionError::BadInput(format!(
                "env name {k:?} is not a valid variable name (letters, digits, '_', not starting with a digit)"
            )));
        }
    }
    for (what, n) in [("cols", opts.cols), ("rows", opts.rows)] {
        if n.is_some_and(|n| !(2..=1000).contains(&n)) {
            return Err(SessionError::BadInput(format!("{what} must be between 2 and 1000")));
        }
    }
    if let Some(p) = &opts.prompt_pattern
        && let Err(e) = dtmcp_core::region::Prompts::new(Some(p))
    {
        return Err(SessionError::BadInput(format!("prompt_pattern is not a valid regex: {e}")));
    }
    if let Some(cwd) = &opts.cwd
        && !Path::new(cwd).is_dir()
    {
        return Err(SessionError::BadInput(format!("cwd {cwd:?} is not a directory")));
    }
    if opts.command.as_deref().is_some_and(|c| c.contains('\0')) {
        return Err(SessionError::BadInput("command contains a NUL byte".into()));
    }
    if opts.command.as_deref().map(str::trim) == Some("zsh") && !on_path("zsh") {
        return Err(SessionError::BadInput(
            "zsh is not installed on the server's host (install it, e.g. apt-get install zsh), or leave command out for bash"
                .into(),
        ));
    }
    Ok(())
}

/// Whether an executable named `name` is in a directory of `$PATH`.
fn on_path(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .any(|d| std::fs::metadata(d.join(name)).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

fn write_private(path: &Path, body: &str) -> Result<(), SessionError> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .map_err(io(format!("writing {}", path.display())))?;
    f.write_all(body.as_bytes()).map_err(io(format!("writing {}", path.display())))
}

/// The tmux binary the pane uses to wait on its channel: the same one we run.
fn tmux_path() -> String {
    std::env::var("DTMCP_TMUX_BIN").unwrap_or_else(|_| "tmux".to_string())
}

/// Quotes `w` for a POSIX shell when it needs it.
pub fn shell_word(w: &str) -> String {
    if !w.is_empty() && w.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:@%+,".contains(&b)) {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

/// Whether a sweep deletes what is due or only says what it would delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sweep {
    /// Delete the directories that are due.
    Delete,
    /// Only list them.
    DryRun,
}

/// How often the full sweep runs.
const FULL_SWEEP_EVERY: Duration = Duration::from_secs(60 * 60);
/// How often sessions marked delete-on-close are swept.
const CLOSE_SWEEP_EVERY: Duration = Duration::from_secs(60);

/// Sweeps at start-up and hourly, and delete-on-close sessions every
/// minute, until aborted. A sweep logs its own errors.
pub async fn sweep_forever(sessions: Sessions) {
    let sessions = sessions.for_sweeping();
    let mut last_full = tokio::time::Instant::now();
    sessions.sweep(SweepMode::Full, Sweep::Delete).await;
    loop {
        tokio::time::sleep(CLOSE_SWEEP_EVERY).await;
        let mode = if last_full.elapsed() >= FULL_SWEEP_EVERY {
            last_full = tokio::time::Instant::now();
            SweepMode::Full
        } else {
            SweepMode::DeleteOnCloseOnly
        };
        sessions.sweep(mode, Sweep::Delete).await;
    }
}
