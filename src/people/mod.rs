//! The command line for people: `ls`, `tail`, `show`, `regions`, `search`,
//! `watch`, `attach`, `record` and `play`, the answers the tools give the model in the shape
//! a shell user expects.
//!
//! # Where the answers come from
//! Everything is read from the state home with the same `store` and
//! `search` code the logger and the tools use; live state (at a prompt, a
//! command running, new lines) is asked of each session's logger over its
//! socket; which panes live, and who is attached, is asked of tmux with one
//! spawned `list-panes` and one `list-clients` (spawned, never over a
//! control client: that would add a hidden session to the server). A
//! server need not run. Nothing here starts tmux or a server, replaces a
//! dead logger, adopts a pane or writes into a session's directory.
//!
//! # Conventions
//! - Exit status 0 on success, 1 when a session is not found or a search
//!   matches nothing, 2 for a usage error (clap's own, a bad name, an
//!   invalid regex). Messages go to stderr, output to stdout.
//! - Colour only when stdout is a terminal and `NO_COLOR` is unset or
//!   empty; in a pipe the output holds no escape codes and no progress.
//! - A closed pipe (`| head`) ends the command quietly with status 0.

pub mod asks;
pub mod attach;
pub mod complete;
pub mod look;
pub mod ls;
pub mod play;
pub mod record;
pub mod regions;
pub mod search;
pub mod show;
pub mod style;
pub mod tail;
pub mod watch;

use std::io::Write;
use std::path::PathBuf;

use crate::agents::journal::Journal;
use crate::config::Config;
use crate::session::Loggers;
use crate::tmux::Tmux;

/// Why a people's command stopped; each carries its exit status.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The command line asks for something that cannot be: status 2.
    #[error("{0}")]
    Usage(String),
    /// The session (or region) asked for does not exist: status 1.
    #[error("{0}")]
    NotFound(String),
    /// A search matched nothing: status 1, and nothing is said.
    #[error("no match")]
    NoMatch,
    /// Something failed on the way (a file, tmux, a logger): status 1.
    #[error("{0}")]
    Trouble(String),
    /// Whoever read the output stopped reading (`| head`): status 0,
    /// nothing said.
    #[error("the output was closed")]
    OutputClosed,
}

impl Failure {
    /// The exit status.
    pub fn code(&self) -> u8 {
        match self {
            Failure::Usage(_) => 2,
            Failure::NotFound(_) | Failure::NoMatch | Failure::Trouble(_) => 1,
            Failure::OutputClosed => 0,
        }
    }

    /// What to print on stderr, if anything.
    pub fn message(&self) -> Option<String> {
        match self {
            Failure::NoMatch | Failure::OutputClosed => None,
            other => Some(other.to_string()),
        }
    }

    /// A failure to write the output: a closed pipe ends quietly.
    pub fn output(e: std::io::Error) -> Failure {
        match e.kind() {
            std::io::ErrorKind::BrokenPipe => Failure::OutputClosed,
            _ => Failure::Trouble(format!("writing the output: {e}")),
        }
    }

    /// Something else that failed (a file, tmux, a logger), as it says.
    pub fn of(e: impl std::fmt::Display) -> Failure {
        Failure::Trouble(e.to_string())
    }
}

/// The results of people's commands.
pub type Outcome = Result<(), Failure>;

/// Where the sessions of this user live: the state home and the tmux
/// socket, as a server would find them (`DOCENT_TERMINAL_MCP_HOME`,
/// `DOCENT_TERMINAL_MCP_SOCKET`).
pub struct Home {
    /// The settings, read from the environment.
    pub cfg: Config,
    /// The tmux server, only ever spawned against.
    pub tmux: Tmux,
    /// Who typed what: the journal the servers keep, read here.
    pub journal: Journal,
    /// The connections to the sessions' loggers this command opens.
    pub loggers: Loggers,
}

impl Home {
    /// Reads the environment.
    pub fn from_env() -> Result<Home, Failure> {
        let cfg = Config::from_env().map_err(|e| Failure::Usage(e.to_string()))?;
        let tmux = Tmux::new(&cfg.socket);
        let journal = Journal::new(&cfg.home);
        Ok(Home { cfg, tmux, journal, loggers: Loggers::default() })
    }

    /// The directory of session `name`.
    pub fn dir(&self, name: &str) -> PathBuf {
        self.cfg.session_dir(name)
    }

    /// The command a person runs to attach to tmux session `tmux_session`,
    /// as words: the attach prefix, then `tmux -L SOCKET attach -t =NAME`.
    pub fn attach_words(&self, tmux_session: &str) -> Vec<String> {
        let mut words = self.cfg.attach_prefix.clone();
        let target = crate::tmux::session_target(tmux_session);
        words.extend(["tmux", "-L", &self.cfg.socket, "attach", "-t", &target].map(str::to_string));
        words
    }

    /// The same as one shell line.
    pub fn attach_line(&self, tmux_session: &str) -> String {
        let words = self.attach_words(tmux_session);
        words.iter().map(|w| crate::session::shell_word(w)).collect::<Vec<_>>().join(" ")
    }
}

/// Checks a session name given on the command line: a live session's name,
/// or an archived generation `NAME.N` of a closed one.
pub fn check_name(name: &str) -> Result<(), Failure> {
    let base = match name.rsplit_once('.') {
        Some((base, n)) if !n.is_empty() && n.len() <= 9 && n.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => name,
    };
    crate::session::validate_name(base).map_err(Failure::Usage)
}

/// Runs a people's command on a runtime of its own (one thread: every
/// wait here is for a socket or a child process).
pub fn block_on<F: std::future::Future<Output = Outcome>>(f: impl FnOnce(Home) -> F) -> Outcome {
    let home = Home::from_env()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Trouble(format!("starting the runtime: {e}")))?;
    runtime.block_on(f(home))
}

/// Standard output, buffered, with write errors turned into [`Failure`]s.
pub struct Out {
    inner: std::io::BufWriter<std::io::Stdout>,
}

impl Out {
    /// Standard output.
    pub fn stdout() -> Out {
        Out { inner: std::io::BufWriter::new(std::io::stdout()) }
    }

    /// Writes `text` as it is.
    pub fn put(&mut self, text: &str) -> Outcome {
        self.inner.write_all(text.as_bytes()).map_err(Failure::output)
    }

    /// Writes `text` and a newline.
    pub fn line(&mut self, text: &str) -> Outcome {
        self.put(text)?;
        self.put("\n")
    }

    /// Sends what is buffered on its way (for output that follows live).
    pub fn flush(&mut self) -> Outcome {
        self.inner.flush().map_err(Failure::output)
    }
}

impl Drop for Out {
    fn drop(&mut self) {
        let _ = self.inner.flush();
    }
}

/// Milliseconds as a short age: `12s`, `4m`, `3h`, `2d`.
pub fn age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// A duration in milliseconds, as the `regions` tool says it.
pub fn duration(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms}ms"),
        1_000..60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        _ => format!("{}m{:02}s", ms / 60_000, ms / 1000 % 60),
    }
}

/// A byte count as a short size: `812B`, `4.0K`, `1.2M`, `3.4G`.
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["K", "M", "G", "T"];
    if bytes < 1024 {
        return format!("{bytes}B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1}{}", UNITS[unit])
}

/// A time (ms since the epoch) as UTC to the second, `2025-05-01 12:03:11Z`.
pub fn clock(ms: u64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_seconds(at).to_string().replacen('T', " ", 1)
}

/// A command's first line, cut to `max` characters with `…` when longer
/// (or when more lines follow).
pub fn first_line(command: &str, max: usize) -> String {
    let mut lines = command.lines();
    let line = lines.next().unwrap_or("");
    let mut out: String = line.chars().take(max).collect();
    if lines.next().is_some() || line.chars().nth(max).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_statuses_follow_grep() {
        assert_eq!(Failure::Usage("x".into()).code(), 2);
        assert_eq!(Failure::NotFound("x".into()).code(), 1);
        assert_eq!((Failure::NoMatch.code(), Failure::NoMatch.message()), (1, None));
        let closed = Failure::output(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        assert_eq!((closed.code(), closed.message()), (0, None));
    }

    #[test]
    fn names_are_live_names_or_archived_generations() {
        assert!(check_name("t1").is_ok() && check_name("build.12").is_ok() && check_name("t1+1").is_ok());
        for bad in ["../x", "a/b", "", ".1", "x.", "-t"] {
            assert!(matches!(check_name(bad), Err(Failure::Usage(_))), "{bad:?}");
        }
    }

    #[test]
    fn small_numbers_read_short() {
        assert_eq!([age(900), age(61_000), age(7_200_000), age(3 * 86_400_000)], ["0s", "1m", "2h", "3d"]);
        assert_eq!([duration(12), duration(2_500), duration(125_000)], ["12ms", "2.5s", "2m05s"]);
        assert_eq!([size(812), size(4096), size(1_300_000)], ["812B", "4.0K", "1.2M"]);
        assert_eq!(clock(0), "1970-01-01 00:00:00Z");
        assert_eq!(first_line("make\nmore", 10), "make…");
        assert_eq!(first_line("abcdef", 3), "abc…");
    }
}
