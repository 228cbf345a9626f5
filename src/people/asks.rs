//! `pending`, `allow`, `deny` and the hidden `answer`: a person answers
//! what the policy asks, from any shell of the same user (against a stdio
//! server or `serve` alike: asks and answers are files in the state home,
//! see [`crate::policy::asks`]). `answer N` is what a tmux popup runs: it
//! shows the ask and takes one key.

use std::io::Write;
use std::time::Duration;

use crate::config::Config;
use crate::people::Failure;
use crate::policy::asks::{Answer, AnswerError, Ask, AskDir, Decision, Scope, Via};

/// `pending`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  dtmcp pending              the open asks: number, agent, session, age, line
  dtmcp allow 7              let ask 7's line be typed, once
  dtmcp allow 7 --scope session   and the same line in that session again
  dtmcp deny 7 --why 'not on the shared box'")]
pub struct PendingArgs {
    /// One JSON object per line instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `allow`.
#[derive(Debug, clap::Args)]
pub struct AllowArgs {
    /// The ask's number (from `pending`).
    pub id: u64,
    /// For how much: this line once, this line in this session until the
    /// server stops, or whatever this agent's lines would ask until then.
    #[arg(long, value_enum, default_value_t = Scope::Once)]
    pub scope: Scope,
    /// Say the outcome as JSON.
    #[arg(long)]
    pub json: bool,
    /// The channel the answer came through (a tmux popup says tmux).
    #[arg(long, value_enum, default_value_t = Via::Cli, hide = true)]
    pub via: Via,
}

/// `deny`.
#[derive(Debug, clap::Args)]
pub struct DenyArgs {
    /// The ask's number (from `pending`).
    pub id: u64,
    /// Why, told to the agent.
    #[arg(long, value_name = "TEXT")]
    pub why: Option<String>,
    /// Say the outcome as JSON.
    #[arg(long)]
    pub json: bool,
    /// The channel the answer came through.
    #[arg(long, value_enum, default_value_t = Via::Cli, hide = true)]
    pub via: Via,
}

/// `answer`.
#[derive(Debug, clap::Args)]
pub struct AnswerArgs {
    /// The ask's number.
    pub id: u64,
}

fn asks() -> Result<AskDir, Failure> {
    let cfg = Config::from_env().map_err(|e| Failure::Trouble(e.to_string()))?;
    Ok(AskDir::new(&cfg.home))
}

/// The name of the person at this terminal.
pub fn me() -> String {
    crate::config::user_name().unwrap_or_else(|| "a person".into())
}

/// How long ago `ms` was, short.
fn age(ms: u64) -> String {
    let s = dtmcp_core::now_ms().saturating_sub(ms) / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        _ => format!("{}h", s / 3600),
    }
}

/// `pending [--json]`.
pub fn pending(args: PendingArgs) -> Result<(), Failure> {
    let open = asks()?.pending();
    let mut out = std::io::stdout().lock();
    let written = (|| -> std::io::Result<()> {
        if args.json {
            for ask in &open {
                writeln!(out, "{}", serde_json::to_string(ask).map_err(std::io::Error::other)?)?;
            }
            return Ok(());
        }
        if open.is_empty() {
            return writeln!(out, "no asks are waiting");
        }
        writeln!(out, "{:>4}  {:<16} {:<14} {:>5}  LINE", "ASK", "AGENT", "SESSION", "AGE")?;
        for ask in &open {
            let to = if ask.to == "shell" { String::new() } else { format!(" (into {})", ask.to) };
            writeln!(
                out,
                "{:>4}  {:<16} {:<14} {:>5}  {}{to}",
                ask.id,
                ask.agent,
                ask.session,
                age(ask.since_ms),
                ask.line
            )?;
        }
        Ok(())
    })();
    written.map_err(|_| Failure::OutputClosed)
}

/// `allow ID`.
pub fn allow(args: AllowArgs) -> Result<(), Failure> {
    let answer = Answer {
        decision: Decision::Allow,
        scope: args.scope,
        by: me(),
        via: args.via,
        why: None,
        ms: dtmcp_core::now_ms(),
    };
    give(args.id, &answer, args.json)
}

/// `deny ID`.
pub fn deny(args: DenyArgs) -> Result<(), Failure> {
    let answer = Answer {
        decision: Decision::Deny,
        scope: Scope::Once,
        by: me(),
        via: args.via,
        why: args.why,
        ms: dtmcp_core::now_ms(),
    };
    give(args.id, &answer, args.json)
}

fn give(id: u64, answer: &Answer, json: bool) -> Result<(), Failure> {
    let asks = asks()?;
    let ask = asks.ask(id);
    match asks.answer(id, answer) {
        Ok(()) => {
            if json {
                println!("{}", serde_json::json!({ "ask": id, "answered": true, "answer": answer }));
            } else {
                let line = ask.map(|a| format!(" (`{}` by {} in {})", a.line, a.agent, a.session)).unwrap_or_default();
                let scope = match answer.decision {
                    Decision::Allow => format!(", {}", answer.scope.says()),
                    Decision::Deny => String::new(),
                };
                println!("ask {id}{line}: {}{scope}", answer.by_whom());
            }
            Ok(())
        }
        Err(AnswerError::Answered { answer: first, .. }) if json => {
            println!("{}", serde_json::json!({ "ask": id, "answered": false, "answer": first }));
            Err(Failure::NoMatch)
        }
        Err(e @ (AnswerError::Answered { .. } | AnswerError::Unknown(_))) => Err(Failure::NotFound(e.to_string())),
        Err(e) => Err(Failure::Trouble(e.to_string())),
    }
}

/// `answer ID`: shows ask `id` and takes one key; ends by itself when the
/// ask is answered elsewhere (saying by whom) or gone.
pub fn answer(args: AnswerArgs) -> Result<(), Failure> {
    let asks = asks()?;
    let id = args.id;
    let Some(ask) = asks.ask(id) else {
        return Err(Failure::NotFound(format!("ask {id} is no longer open")));
    };
    show(&ask);
    let raw = RawMode::enter();
    let outcome = loop {
        if let Some(first) = asks.answer_of(id) {
            break format!("answered already: {}", first.by_whom());
        }
        if asks.ask(id).is_none() {
            break "the ask was closed (its call ended)".to_string();
        }
        if dtmcp_core::now_ms() > ask.until_ms {
            break "the time to answer is up".to_string();
        }
        let Some(key) = read_key(Duration::from_millis(200)) else { continue };
        let (decision, scope) = match key {
            b'a' | b'y' => (Decision::Allow, Scope::Once),
            b's' => (Decision::Allow, Scope::Session),
            b'g' => (Decision::Allow, Scope::Agent),
            b'd' | b'n' => (Decision::Deny, Scope::Once),
            // Escape or q: leave it to the other channels.
            b'q' | 0x1b => break "left open for someone else to answer".to_string(),
            _ => continue,
        };
        let answer = Answer { decision, scope, by: me(), via: Via::Tmux, why: None, ms: dtmcp_core::now_ms() };
        break match asks.answer(id, &answer) {
            Ok(()) => answer.by_whom(),
            Err(e) => e.to_string(),
        };
    };
    drop(raw);
    println!("\r\n{outcome}\r");
    std::thread::sleep(Duration::from_millis(1200));
    Ok(())
}

/// The ask, as the popup shows it.
fn show(ask: &Ask) {
    let to = if ask.to == "shell" { "its shell".to_string() } else { format!("the program {}", ask.to) };
    println!("Agent {} wants to type into {} (session {}):\n", ask.agent, to, ask.session);
    println!("  {}\n", ask.line);
    if let Some(why) = &ask.why {
        let rule = ask.rule_line.map(|n| format!(" (rule at line {n})")).unwrap_or_default();
        println!("The policy asks a person first{rule}: {why}\n");
    }
    let left = ask.until_ms.saturating_sub(dtmcp_core::now_ms()) / 1000;
    println!("  a  allow once        s  allow this line in this session");
    println!("  g  allow this agent until the server stops");
    println!("  d  deny              q  leave it to someone else");
    println!("\n(unanswered, it is denied in {left} s)");
    let _ = std::io::stdout().flush();
}

/// One key from stdin, waiting `within` at most.
fn read_key(within: Duration) -> Option<u8> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
    let ms = PollTimeout::try_from(within.as_millis() as u64).unwrap_or(PollTimeout::NONE);
    if poll(&mut fds, ms).ok()? == 0 {
        return None;
    }
    let mut byte = [0u8; 1];
    match nix::unistd::read(&stdin, &mut byte) {
        Ok(1) => Some(byte[0]),
        // End of input: nothing more will come; wait as if no key came.
        _ => {
            std::thread::sleep(within);
            None
        }
    }
}

/// The terminal in raw mode (one key at a time, no echo) until dropped;
/// nothing when stdin is not a terminal.
struct RawMode(Option<nix::sys::termios::Termios>);

impl RawMode {
    fn enter() -> RawMode {
        use nix::sys::termios::{SetArg, cfmakeraw, tcgetattr, tcsetattr};
        let stdin = std::io::stdin();
        let Ok(saved) = tcgetattr(&stdin) else { return RawMode(None) };
        let mut raw = saved.clone();
        cfmakeraw(&mut raw);
        // Output as usual: newlines still return the carriage.
        raw.output_flags = saved.output_flags;
        let _ = tcsetattr(&stdin, SetArg::TCSANOW, &raw);
        RawMode(Some(saved))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if let Some(saved) = &self.0 {
            let _ = nix::sys::termios::tcsetattr(std::io::stdin(), nix::sys::termios::SetArg::TCSANOW, saved);
        }
    }
}
