//! `watch`: a live one-screen overview of the sessions (what runs, who
//! typed, what waits for input), `q` quits. When standard input or output
//! is not a terminal it prints the list once, as `ls` does, and exits.
//!
//! # What redraws the screen
//! - A change a logger reports: every live session has one connection to
//!   its logger holding a `Wait` that ends at a new line of output, a
//!   command finishing (a new prompt), or a full-screen program starting.
//!   No file is polled. A busy session wakes the screen at most every
//!   [`SETTLE`].
//! - A key, and a resize of the terminal (SIGWINCH).
//! - A slow tick, every [`TICK`], for what no logger reports: a person
//!   attaching, a session made or closed, a program starting to wait for
//!   input (seen in `/proc`, which sends no event), the ages in the table.
//!
//! The terminal is put in raw mode on the alternate screen and given back
//! as it was on every way out: `q`, ctrl+c, ctrl+d, SIGTERM, SIGHUP, an
//! error, or a panic (the guard's `Drop`).

use std::collections::HashMap;
use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::time::Duration;

use nix::sys::termios::{self, SetArg, Termios};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use super::look::{self, Facts, State};
use super::style::{Paint, Style, fit};
use super::{Failure, Home, Outcome};
use crate::session::Loggers;
use dtmcp_core::protocol::{WaitReason, WaitSpec};
use dtmcp_core::store::files;

/// Arguments of `watch`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "\
Examples:
  dtmcp watch          the open sessions, live; q quits
  dtmcp watch --all    closed ones too
  dtmcp watch | cat    the list once, as `ls` prints it")]
pub struct WatchArgs {
    /// Also list closed sessions whose logs remain.
    #[arg(long, short = 'a')]
    pub all: bool,
}

/// How often the screen is redrawn when nothing reports a change.
pub const TICK: Duration = Duration::from_secs(2);
/// The least time between two wake-ups from one session.
pub const SETTLE: Duration = Duration::from_millis(300);
/// How long one wait on a logger lasts before it is asked again.
const WAIT_MS: u64 = 60_000;

/// Why the screen may need drawing again.
#[derive(Debug)]
enum Event {
    /// A key was pressed.
    Key(u8),
    /// Standard input ended.
    InputEnded,
    /// A session's logger reported a change.
    Changed,
}

/// Runs `watch`.
pub async fn run(home: Home, args: WatchArgs) -> Outcome {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        let ls = super::ls::LsArgs { all: args.all, json: false, state: Vec::new() };
        return super::ls::run(home, ls).await;
    }
    let screen = Screen::enter()?;
    let result = live(&home, &args, &screen).await;
    drop(screen);
    result
}

async fn live(home: &Home, args: &WatchArgs, screen: &Screen) -> Outcome {
    let trouble = |e: std::io::Error| Failure::Trouble(format!("watching for signals: {e}"));
    let mut resized = signal(SignalKind::window_change()).map_err(trouble)?;
    let mut terminated = signal(SignalKind::terminate()).map_err(trouble)?;
    let mut hung_up = signal(SignalKind::hangup()).map_err(trouble)?;
    let mut interrupted = signal(SignalKind::interrupt()).map_err(trouble)?;
    let (tx, mut rx) = mpsc::channel(256);
    read_keys(tx.clone());
    let mut watchers = Watchers::default();
    loop {
        let facts = look::all(home, args.all).await?;
        watchers.follow(&home.loggers, &facts, &tx);
        screen.draw(&facts)?;
        tokio::select! {
            event = rx.recv() => match event {
                Some(Event::Key(b'q' | b'Q' | 0x03 | 0x04)) | Some(Event::InputEnded) | None => break,
                Some(Event::Key(_) | Event::Changed) => {}
            },
            _ = resized.recv() => {}
            _ = tokio::time::sleep(TICK) => {}
            _ = terminated.recv() => break,
            _ = hung_up.recv() => break,
            _ = interrupted.recv() => break,
        }
        // Let a burst of changes arrive, then draw them at once.
        tokio::time::sleep(Duration::from_millis(30)).await;
        while let Ok(event) = rx.try_recv() {
            if matches!(event, Event::Key(b'q' | b'Q' | 0x03 | 0x04) | Event::InputEnded) {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Reads keys on a thread of its own (a blocking read of the terminal; the
/// thread ends with the process).
fn read_keys(tx: mpsc::Sender<Event>) {
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin();
        let mut byte = [0u8; 1];
        loop {
            let event = match stdin.read(&mut byte) {
                Ok(1) => Event::Key(byte[0]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                _ => Event::InputEnded,
            };
            let ended = matches!(event, Event::InputEnded);
            if tx.blocking_send(event).is_err() || ended {
                return;
            }
        }
    });
}

/// One task per live session, waiting on its logger.
#[derive(Default)]
struct Watchers {
    running: HashMap<String, tokio::task::JoinHandle<()>>,
}

impl Watchers {
    /// Starts a watcher for every live session without one, and stops
    /// those of sessions gone or closed.
    fn follow(&mut self, loggers: &Loggers, facts: &[Facts], tx: &mpsc::Sender<Event>) {
        let live: HashMap<&str, &Facts> =
            facts.iter().filter(|f| f.state != State::Closed).map(|f| (f.name.as_str(), f)).collect();
        self.running.retain(|name, task| {
            let keep = live.contains_key(name.as_str()) && !task.is_finished();
            if !keep {
                task.abort();
            }
            keep
        });
        for (name, f) in live {
            if !self.running.contains_key(name) {
                let task = tokio::spawn(watch_one(loggers.clone(), f.dir.join(files::SOCKET), tx.clone()));
                self.running.insert(name.to_string(), task);
            }
        }
    }
}

impl Drop for Watchers {
    fn drop(&mut self) {
        for task in self.running.values() {
            task.abort();
        }
    }
}

/// Tells `tx` whenever the logger at `socket` sees something change,
/// until its output ends or it cannot be reached (the tick then starts
/// another watcher, should the session still live).
async fn watch_one(loggers: Loggers, socket: PathBuf, tx: mpsc::Sender<Event>) {
    let Ok(mut client) = loggers.connect(&socket).await else { return };
    let Ok(mut status) = client.status().await else { return };
    while !status.eof {
        let spec = WaitSpec {
            after: status.mark,
            command_done: true,
            pattern: Some(String::new()),
            full_screen: true,
            timeout_ms: WAIT_MS,
            ..WaitSpec::default()
        };
        let Ok((reason, now)) = client.wait(spec).await else { return };
        if reason != WaitReason::Timeout && tx.send(Event::Changed).await.is_err() {
            return;
        }
        status = now;
        tokio::time::sleep(SETTLE).await;
    }
    let _ = tx.send(Event::Changed).await;
}

/// The terminal in raw mode on the alternate screen; dropping it puts the
/// terminal back as it was.
struct Screen {
    saved: Termios,
}

impl Screen {
    fn enter() -> Result<Screen, Failure> {
        let stdin = std::io::stdin();
        let saved =
            termios::tcgetattr(&stdin).map_err(|e| Failure::Trouble(format!("reading the terminal's mode: {e}")))?;
        let mut raw = saved.clone();
        termios::cfmakeraw(&mut raw);
        termios::tcsetattr(&stdin, SetArg::TCSANOW, &raw)
            .map_err(|e| Failure::Trouble(format!("setting the terminal's mode: {e}")))?;
        let screen = Screen { saved };
        // Alternate screen, cursor hidden.
        screen.write("\x1b[?1049h\x1b[?25l")?;
        Ok(screen)
    }

    fn write(&self, text: &str) -> Outcome {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(Failure::output)
    }

    /// Draws the overview over the whole screen.
    fn draw(&self, facts: &[Facts]) -> Outcome {
        let (cols, rows) = super::style::terminal_size(nix::libc::STDOUT_FILENO).unwrap_or((80, 24));
        let frame = frame(facts, crate::config::now_ms(), Style::for_stdout(), cols, rows);
        let mut text = String::from("\x1b[H");
        for line in frame {
            text.push_str(&line);
            text.push_str("\x1b[K\r\n");
        }
        text.push_str("\x1b[J");
        self.write(text.trim_end_matches("\r\n"))
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = self.write("\x1b[?25h\x1b[?1049l");
        let _ = termios::tcsetattr(std::io::stdin(), SetArg::TCSANOW, &self.saved);
    }
}

/// The lines of one screen of `cols` x `rows`.
fn frame(facts: &[Facts], now: u64, style: Style, cols: usize, rows: usize) -> Vec<String> {
    let open = facts.iter().filter(|f| f.state != State::Closed).count();
    let count = |s: State| facts.iter().filter(|f| f.state == s).count();
    let mut title = format!(
        "dtmcp watch · {open} open: {} running, {} waiting for input, {} at the prompt",
        count(State::Running),
        count(State::Waiting),
        count(State::Idle)
    );
    if open < facts.len() {
        title.push_str(&format!(" · {} closed", facts.len() - open));
    }
    title.push_str(&format!(" · {} · q quits", super::clock(now)));
    let mut lines = vec![style.paint(Paint::Bold, &fit(&title, cols)), String::new()];
    if facts.is_empty() {
        lines.push("no sessions".to_string());
        return lines;
    }
    let table = super::ls::table(facts, now, style, true, Some(cols));
    let room = rows.saturating_sub(lines.len()).max(1);
    if table.len() > room {
        let shown = room.saturating_sub(1);
        lines.extend(table.into_iter().take(shown));
        lines.push(format!("… {} more (a taller terminal shows them)", facts.len() + 1 - shown));
    } else {
        lines.extend(table);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_screen_says_so_and_a_short_one_says_how_many_are_left_out() {
        let lines = frame(&[], 0, Style::plain(), 80, 24);
        assert!(lines[0].starts_with("dtmcp watch · 0 open"), "{lines:?}");
        assert_eq!(lines.last().map(String::as_str), Some("no sessions"));
    }
}
