//! `tail NAME [-n N] [-f]`: the last cooked lines of a session with their
//! numbers, and with `-f` the new ones as they come.
//!
//! Following asks the session's logger to wait until a line after the
//! last one seen is written (a `Wait` whose pattern is empty: it matches
//! the first new line), then reads the new lines from `session.txt`: no
//! polling of the file. The logger answers at once when the pane's output
//! ends, which ends the follow. A logger that dies (its connection drops)
//! is told on stderr; the command then tries its socket again every
//! 250 ms until a new logger answers or the pane is gone. The lines the new
//! logger writes for the stretch it missed (`[log gap: …]`) are printed
//! like any other, highlighted on a terminal.

use std::path::Path;
use std::time::Duration;

use super::look::{self, Found};
use super::style::{Paint, Style};
use super::{Failure, Home, Out, Outcome};
use dtmcp_core::protocol::{WaitReason, WaitSpec};
use dtmcp_core::redact::Reader;
use dtmcp_core::store::LineReader;
use dtmcp_core::types::LineNo;

/// Arguments of `tail`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "\
Examples:
  dtmcp tail t1                 the last 20 lines of t1, numbered
  dtmcp tail -n 100 t1 | less   the last 100
  dtmcp tail -f t1              and then every new line, until ctrl+c or t1 closes")]
pub struct TailArgs {
    /// The session, open or closed.
    pub name: String,
    /// How many lines to show first.
    #[arg(short = 'n', long = "lines", default_value_t = 20, value_name = "N")]
    pub lines: u64,
    /// Then print new lines as they come, until ctrl+c or the session closes.
    #[arg(short, long)]
    pub follow: bool,
    /// Show secrets as placeholders (‹secret:KIND:N›), as the agents see
    /// them: for sharing a screen. By default the log shows as it is.
    #[arg(long)]
    pub redact: bool,
}

/// How long to wait before asking a dead logger's socket again.
const RECONNECT: Duration = Duration::from_millis(250);
/// How long one wait on the logger lasts before it is asked again.
const WAIT_MS: u64 = 60_000;

/// Runs `tail`.
pub async fn run(home: Home, args: TailArgs) -> Outcome {
    // Set up before anything else, so that a ctrl+c from now on ends the
    // follow cleanly rather than killing the process mid-line.
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(|e| Failure::Trouble(format!("setting up ctrl+c: {e}")))?;
    let found = look::find(&home, &args.name).await?;
    let total = committed(&found.dir)?;
    let mut printer = Printer::new(Style::for_stdout(), LineNo(total.saturating_sub(args.lines) + 1), total);
    printer.hide = args.redact.then(|| Reader::for_session(&found.dir));
    printer.catch_up(&found.dir)?;
    if !args.follow {
        return Ok(());
    }
    if !found.live() {
        eprintln!("{}: the session is closed; no more lines will come", found.name);
        return Ok(());
    }
    tokio::select! {
        r = follow(&home, &found, &mut printer) => r,
        _ = interrupt.recv() => printer.out.flush(),
    }
}

/// Follows the session until its output ends.
async fn follow(home: &Home, found: &Found, printer: &mut Printer) -> Outcome {
    let mut told_down = false;
    loop {
        let mut client = match found.logger().await {
            Ok(client) => client,
            Err(e) => {
                if !still_live(home, &found.name).await {
                    printer.catch_up(&found.dir)?;
                    eprintln!("{}: the session closed", found.name);
                    return Ok(());
                }
                if !told_down {
                    eprintln!(
                        "{}: {e}; following again once a logger answers (a running server replaces a dead one within about a second, and marks what it missed as a log gap)",
                        found.name
                    );
                    told_down = true;
                }
                tokio::time::sleep(RECONNECT).await;
                continue;
            }
        };
        if told_down {
            eprintln!("{}: a logger answers again", found.name);
            told_down = false;
        }
        let Ok(mut status) = client.status().await else { continue };
        loop {
            printer.catch_up(&found.dir)?;
            if status.eof {
                eprintln!("{}: the session closed", found.name);
                return Ok(());
            }
            let spec = WaitSpec {
                after: status.mark,
                pattern: Some(String::new()),
                timeout_ms: WAIT_MS,
                ..WaitSpec::default()
            };
            match client.wait(spec).await {
                Ok((reason, s)) => {
                    status = s;
                    status.eof |= reason == WaitReason::Eof;
                }
                // The logger went away: print what it wrote, then find the next one.
                Err(_) => break,
            }
        }
        printer.catch_up(&found.dir)?;
    }
}

/// Whether session `name`'s pane still lives (tmux asked once).
async fn still_live(home: &Home, name: &str) -> bool {
    look::Scene::look(home).await.is_ok_and(|s| s.panes.get(name).is_some_and(|p| !p.pane_dead))
}

/// Lines complete on disk in session directory `dir`.
fn committed(dir: &Path) -> Result<u64, Failure> {
    let reader = LineReader::open(dir).map_err(Failure::of)?;
    reader.extent().map(|(lines, _)| lines).map_err(Failure::of)
}

/// Prints numbered lines in order, each once.
struct Printer {
    out: Out,
    style: Style,
    /// The next line to print.
    next: LineNo,
    /// Digits of the line numbers.
    width: usize,
    /// Inside the screen dump of a log gap.
    in_gap: bool,
    /// Hides the secrets of the lines printed (`--redact`).
    hide: Option<Reader>,
}

/// The most lines read from disk at once.
const CHUNK: u64 = 10_000;

impl Printer {
    fn new(style: Style, next: LineNo, last: u64) -> Printer {
        let width = digits(last).max(4);
        Printer { out: Out::stdout(), style, next, width, in_gap: false, hide: None }
    }

    /// Prints every line on disk from the next one on.
    fn catch_up(&mut self, dir: &Path) -> Outcome {
        let reader = LineReader::open(dir).map_err(Failure::of)?;
        let (total, _) = reader.extent().map_err(Failure::of)?;
        while self.next.0 <= total {
            let count = (total + 1 - self.next.0).min(CHUNK);
            let lines = reader.read(self.next, count).map_err(Failure::of)?;
            if lines.is_empty() {
                break;
            }
            let lines = match self.hide.as_mut() {
                Some(h) => h.lines(&lines),
                None => lines,
            };
            for text in &lines {
                self.print(text)?;
            }
        }
        self.out.flush()
    }

    fn print(&mut self, text: &str) -> Outcome {
        let n = self.next.0;
        self.width = self.width.max(digits(n));
        let starts_gap = text.starts_with("[log gap:");
        let gap = starts_gap || self.in_gap;
        if starts_gap {
            self.in_gap = text.ends_with("resumed:]");
        } else if text == "[end of log gap]" {
            self.in_gap = false;
        }
        let number = self.style.paint(Paint::Dim, &format!("{n:>width$}", width = self.width));
        let text = if gap { self.style.paint(Paint::Yellow, text) } else { text.to_string() };
        self.out.line(&format!("{number}  {text}"))?;
        self.next = self.next.next();
        Ok(())
    }
}

/// How many decimal digits `n` has.
fn digits(n: u64) -> usize {
    n.max(1).ilog10() as usize + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_count() {
        assert_eq!([digits(0), digits(9), digits(10), digits(123_456)], [1, 1, 2, 6]);
    }
}
