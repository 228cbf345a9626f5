//! `play NAME [--region N] [--speed X] [--idle-max SECONDS]`: plays a
//! session's recording (see `record`) in this terminal, as it came, idle
//! stretches cut. `q` (or Ctrl-C) quits, space pauses.
//!
//! While it plays, the terminal is in raw mode, so that keys arrive at
//! once and the output's bytes are shown as the pane showed them; the
//! modes are restored however playing ends (a key, the end, an error, a
//! panic), and the modes a played program may have left on (the alternate
//! screen, a hidden cursor, mouse reporting) are turned off.

use std::io::{IsTerminal, Read, Write};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::termios::{self, SetArg, Termios};

use super::record::idle_ms;
use super::{Failure, Home, Outcome, look};
use dtmcp_core::cast::{Code, Select, played_times};

/// Arguments of `play`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "\
Examples:
  dtmcp play t1                     the whole session
  dtmcp play t1 --region 3 --speed 4
Keys: q quits, space pauses.")]
pub struct PlayArgs {
    /// The session, open or closed.
    pub name: String,
    /// One region (a number from `regions`).
    #[arg(long, value_name = "N")]
    pub region: Option<u64>,
    /// How much faster than it happened (2: twice as fast).
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub speed: f64,
    /// Cut pauses longer than this many seconds to this length.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    pub idle_max: f64,
}

/// What a played program may have left on, turned off at the end: the
/// alternate screen, mouse and paste modes, a hidden cursor, colours.
const RESTORE: &str = "\x1b[?1049l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?2004l\x1b[?25h\x1b[0m\r\n";

/// Runs `play`.
pub async fn run(home: Home, args: PlayArgs) -> Outcome {
    if !(args.speed.is_finite() && args.speed > 0.0 && args.speed <= 1000.0) {
        return Err(Failure::Usage(format!("--speed {} is not above 0 (and at most 1000); try --speed 2", args.speed)));
    }
    let idle = idle_ms(args.idle_max)?;
    let found = look::find(&home, &args.name).await?;
    let select = args.region.map_or(Select::All, Select::One);
    let redact = crate::recording::redacts(&found.dir);
    let cast = crate::recording::cast(&found.dir, &found.name, select, redact).map_err(Failure::NotFound)?;
    let times = played_times(&cast, idle);
    let mut out = std::io::stdout().lock();
    let raw = RawMode::enter();
    let mut keys = Keys { on: raw.is_some(), paused_at: None, paused: Duration::ZERO };
    let started = Instant::now();
    for (event, at) in cast.events.iter().zip(times) {
        let due = started + Duration::from_secs_f64(at as f64 / 1000.0 / args.speed);
        if keys.wait_until(due) == Key::Quit {
            break;
        }
        if event.code == Code::Output {
            out.write_all(event.data.as_bytes()).and_then(|()| out.flush()).map_err(Failure::output)?;
        }
    }
    let _ = out.write_all(RESTORE.as_bytes()).and_then(|()| out.flush());
    drop(raw);
    Ok(())
}

/// What a key asked for.
#[derive(Debug, PartialEq, Eq)]
enum Key {
    Go,
    Quit,
}

/// The keys read from the terminal while playing.
struct Keys {
    /// Whether stdin is the terminal in raw mode (otherwise no key is read).
    on: bool,
    /// When a pause began.
    paused_at: Option<Instant>,
    /// How long the pauses so far lasted: every event is that much later.
    paused: Duration,
}

impl Keys {
    /// Waits until `due` and the pauses since the start, reading keys
    /// meanwhile.
    fn wait_until(&mut self, due: Instant) -> Key {
        loop {
            let (now, due) = (Instant::now(), due + self.paused);
            if self.paused_at.is_none() && now >= due {
                return Key::Go;
            }
            let left = if self.paused_at.is_some() { Duration::from_millis(200) } else { due - now };
            if !self.on {
                std::thread::sleep(left);
                continue;
            }
            let stdin = std::io::stdin();
            let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
            let ms = PollTimeout::from(left.as_millis().min(200) as u16);
            if !matches!(poll(&mut fds, ms), Ok(n) if n > 0) {
                continue;
            }
            let mut key = [0u8; 16];
            let n = stdin.lock().read(&mut key).unwrap_or(0);
            for &k in &key[..n] {
                match k {
                    b'q' | b'Q' | 0x03 => return Key::Quit,
                    b' ' => match self.paused_at.take() {
                        Some(since) => self.paused += since.elapsed(),
                        None => self.paused_at = Some(Instant::now()),
                    },
                    _ => {}
                }
            }
            if n == 0 {
                // The terminal went away: play on without keys.
                self.on = false;
            }
        }
    }
}

/// The terminal in raw mode for as long as this lives; its modes before
/// are put back when it is dropped.
struct RawMode {
    before: Termios,
}

impl RawMode {
    /// Raw mode on stdin, if stdin is a terminal.
    fn enter() -> Option<RawMode> {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return None;
        }
        let before = termios::tcgetattr(stdin.as_fd()).ok()?;
        let mut raw = before.clone();
        termios::cfmakeraw(&mut raw);
        termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw).ok()?;
        Some(RawMode { before })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, &self.before);
    }
}
