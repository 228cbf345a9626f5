//! `send`: type text and press keys in a session, for programs that read
//! the keyboard rather than a command line (pagers, editors, REPLs,
//! prompts), and end a foreground job that ignores its keys with a signal.
//!
//! Everything is checked before the first key leaves: a call with one bad
//! key name types nothing. Text goes first, then each key as a tmux command
//! of its own, so a key can never overtake the text before it.

use std::fmt::Write;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{schemars, tool, tool_router};
use serde::Deserialize;

use crate::keys::typing::{Typing, TypingParams};
use crate::keys::{self, Key};
use crate::session::{LoggerClient, Session};
use crate::tools::reading::lines::{fetch, last_line};
use crate::tools::reading::views::{self, PaneState, ScreenMode};
use crate::tools::replies::output::{self, Plan};
use crate::tools::replies::reply::Reply;
use crate::tools::typing::consent::Line as Judge;
use crate::tools::typing::holds;
use crate::tools::typing::holds::Enter;
use crate::tools::typing::progress::Progress;
use crate::tools::typing::target::{self, Target};
use crate::tools::{Party, Refusal, ToolError};
use crate::tools::{Terminal, ToolName};
use dtmcp_core::procs::{self, Foreground, comm, foreground};
use dtmcp_core::protocol::{Status, WaitSpec};
use dtmcp_core::types::LineNo;

/// How long output may take to arrive when no wait is given.
const DEFAULT_WAIT_S: f64 = 0.3;
/// The longest wait one call may ask for; longer waits belong to `run` and `wait`.
const MAX_WAIT_S: f64 = 10.0;
/// The most text one call types, in bytes.
const MAX_TEXT: usize = 65_536;
/// The most keys one call presses.
const MAX_KEYS: usize = 200;

/// Arguments of `send`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendParams {
    /// The session's name.
    pub session: String,
    /// Text typed literally, before any keys (no Enter is added: press it with keys=["enter"]).
    #[serde(default)]
    pub text: Option<String>,
    /// Keys pressed in order after the text: enter, tab, escape, space, backspace, delete, up, down, left, right, home, end, pageup, pagedown, f1-f12, ctrl+<letter>, alt+<key>, shift+tab, or one character such as "q" or ":".
    #[serde(default)]
    pub keys: Option<Vec<String>>,
    /// Reply with the screen instead of the new log lines: "full" (every row), "cursor" (the cursor's row), "changes" (rows changed since the last look).
    #[serde(default)]
    pub screen: Option<String>,
    /// Seconds to let output arrive before replying (default 0.3, at most 10).
    #[serde(default)]
    pub wait: Option<f64>,
    /// "TERM" or "KILL": sent to the foreground job (never to the shell itself). Give it alone, without text or keys.
    #[serde(default)]
    pub signal: Option<String>,
    /// Type text as a person would, for someone watching: {speed, mistakes, seed} as for run.
    #[serde(default)]
    pub typing: Option<TypingParams>,
    /// Only when the user told you to: send even over text someone else left at the prompt, or to a program another agent started (refused otherwise).
    #[serde(default)]
    pub take_over: Option<bool>,
}

/// A `send` call, checked whole before anything is done.
#[derive(Debug, PartialEq)]
struct Request {
    /// Text to type, if any.
    text: Option<String>,
    /// Keys to press after it, as given and as read.
    keys: Vec<(String, Key)>,
    /// The screen to reply with instead of log lines.
    screen: Option<ScreenMode>,
    /// How long to let output arrive.
    wait_ms: u64,
    /// A signal for the foreground job, sent instead of any input.
    signal: Option<Signal>,
    /// How to type the text, when as a person would.
    typing: Option<Typing>,
}

impl Request {
    /// Whether the call interrupts the foreground program (ctrl+c as a key or in the text).
    fn interrupts(&self) -> bool {
        self.keys.iter().any(|(_, k)| k.is_interrupt()) || self.text.as_deref().is_some_and(|t| t.contains('\x03'))
    }

    /// The line this call enters: text followed by Enter and nothing else.
    fn line(&self) -> Option<&str> {
        let enter = matches!(&self.keys[..], [(_, Key::Named(k))] if k == "Enter");
        self.text.as_deref().filter(|t| enter && !t.contains(['\n', '\r']))
    }
}

/// Checks every argument; nothing has been typed when this fails.
fn check(p: &SendParams) -> Result<Request, String> {
    let text = p.text.clone().filter(|t| !t.is_empty());
    if let Some(t) = &text {
        if t.contains('\0') {
            return Err("text contains a NUL byte, which cannot be typed".into());
        }
        if t.len() > MAX_TEXT {
            return Err(format!("text is {} bytes; at most {MAX_TEXT} can be typed in one call", t.len()));
        }
    }
    let names = p.keys.clone().unwrap_or_default();
    if names.len() > MAX_KEYS {
        return Err(format!("{} keys given; at most {MAX_KEYS} per call", names.len()));
    }
    let parsed = keys::parse_all(&names).map_err(|e| format!("{e}. Nothing was typed."))?;
    let screen = p.screen.as_deref().map(ScreenMode::parse).transpose()?;
    let signal = p.signal.as_deref().map(parse_signal).transpose()?;
    if signal.is_some() && (text.is_some() || !names.is_empty()) {
        return Err("signal goes alone: send it without text or keys (one call for each)".into());
    }
    if signal.is_none() && text.is_none() && names.is_empty() {
        return Err("nothing to send: give text, keys or signal (to only look, use read view=\"screen\")".into());
    }
    let keys = names.into_iter().zip(parsed).collect();
    let typing = p.typing.as_ref().map(|t| Typing::parse(t, target::fresh_seed())).transpose()?;
    if typing.is_some() && text.is_none() {
        return Err("typing applies to text; give the text to type".into());
    }
    Ok(Request { text, keys, screen, wait_ms: wait_ms(p.wait)?, signal, typing })
}

fn wait_ms(wait: Option<f64>) -> Result<u64, String> {
    let w = wait.unwrap_or(DEFAULT_WAIT_S);
    if !w.is_finite() || !(0.0..=MAX_WAIT_S).contains(&w) {
        return Err(format!(
            "wait must be between 0 and {MAX_WAIT_S} seconds; got {w} (to wait for a command to finish, use wait)"
        ));
    }
    Ok((w * 1000.0) as u64)
}

fn parse_signal(s: &str) -> Result<Signal, String> {
    let name = s.trim().to_ascii_uppercase();
    match name.strip_prefix("SIG").unwrap_or(&name) {
        "TERM" => Ok(Signal::SIGTERM),
        "KILL" => Ok(Signal::SIGKILL),
        _ => Err(format!("signal {s:?} is not \"TERM\" or \"KILL\" (for an interrupt, press keys=[\"ctrl+c\"])")),
    }
}

#[tool_router(router = send_router, vis = "pub(crate)")]
impl Terminal {
    /// Types text and presses keys.
    #[tool(
        name = "send",
        description = crate::docent::texts::tool::SEND.trim_end(),
        meta = crate::tools::always_load()
    )]
    pub async fn send(&self, Parameters(p): Parameters<SendParams>, progress: Progress) -> CallToolResult {
        let name = p.session.clone();
        self.call_noted(crate::tools::ToolName::Send, &name, None, self.send_body(p, &progress)).await
    }
}

impl Terminal {
    async fn send_body(&self, p: SendParams, progress: &Progress) -> Result<Reply, ToolError> {
        let req = check(&p).map_err(ToolError::BadInput)?;
        let s = self.sessions().resolve(&p.session).await?;
        let mut logger = self.sessions().logger(&s).await?;
        let before = logger.status().await?;
        if before.eof {
            return Err(Refusal::Ended { session: s.name.clone() }.into());
        }
        if p.take_over != Some(true) {
            self.owns(&s, &mut logger, &before).await?;
        }
        if req.signal.is_none() {
            self.judge_submitted(&s, &mut logger, (&req, &before), progress).await?;
        }
        let tmux = &self.sessions().tmux;
        let pane = s.pane.pane_id.as_str();
        let state = views::pane_state(tmux, pane).await?;
        // A line entered into a program is an input region, like run's.
        if let (Some(line), None) = (req.line(), req.signal)
            && let Ok((Target::Program(job), now)) = target::target(&s, &mut logger, before.clone()).await
        {
            target::open_input(&s, &mut logger, &now, &job, line).await?;
        }
        let mut out = Reply::text(match req.signal {
            Some(sig) => deliver(&s.name, state.pane_pid, sig)?,
            None => {
                let actor = self.actor();
                let _hold = self.inner.holds.take(&s.name, &actor, "send")?;
                let typed = self.type_in(pane, &req, &state).await?;
                if let Some(text) = &req.text {
                    let enter = req.keys.iter().any(|(_, k)| matches!(k, Key::Named(n) if n == "Enter"));
                    let enter = match enter || text.contains(['\r', '\n']) {
                        true => Enter::Pressed,
                        false => Enter::NotPressed,
                    };
                    self.inner.holds.note_typed(s.pane.pane_id.as_str(), &actor, text, enter, &before);
                    self.note_left(&s.name, text, enter, &before).await;
                }
                typed
            }
        });
        let spec = WaitSpec { after: before.mark, timeout_ms: req.wait_ms, ..WaitSpec::default() };
        let (_, after) = logger.wait(spec).await?;
        // The keys' last is noted at the prompt shown after them: they
        // were pressed at it, or text before them may have ended a program
        // (`:q!` and Enter in vi), so that they reached the shell. (Keys
        // alone that end a program, nano's ctrl+x, went to the program.)
        let submitted = req.text.as_deref().is_some_and(|t| t.contains(['\r', '\n']));
        let reached = before.shell.at_prompt || req.text.is_some();
        let pressed = match req.signal {
            Some(_) => None,
            None => self.inner.holds.note_pressed(pane, &req.keys, submitted, reached, &after),
        };
        let _ = writeln!(out, "; {} s later:", req.wait_ms as f64 / 1000.0);
        if after.eof {
            let _ = writeln!(out, "the session {} ended (its pane closed)", s.name);
        } else if let Some(mode) = req.screen {
            out.push_str(&self.screen(&s, mode).await?);
        } else {
            out.push(appeared(&s, &mut logger, &before, &after).await?);
        }
        // A command the keys or the signal ended says how (ctrl+c: exit 130).
        if let Some(&open) = before.shell.open.first()
            && !after.eof
            && !after.shell.open.contains(&open)
            && let Ok(Some(r)) = logger.region(open).await
            && r.end.is_some()
        {
            let status = r.exit.map_or_else(|| "exit status unknown".to_string(), dtmcp_core::exit::words);
            let command = r.command.lines().next().unwrap_or_default();
            let ended = match r.exit.is_some_and(dtmcp_core::exit::stopped) {
                true => "was stopped",
                false => "ended",
            };
            let _ = writeln!(out, "`{command}` (region {open}) {ended}: {status}");
        }
        if let Some(p) = pressed {
            let _ = writeln!(
                out,
                "note: {} left the shell's line editor {}; a run cancels that (ctrl+g) before it types its command",
                p.name,
                p.pending.words()
            );
        }
        if (req.interrupts() || req.signal.is_some()) && !after.eof {
            out.push_str(&foreground_note(state.pane_pid).await);
        } else if !after.eof {
            let pane = procs::Pane { pid: state.pane_pid, tty: &s.pane.pane_tty };
            // The shell at its own prompt is the usual case and goes unsaid.
            if let Some(job) = procs::job(pane).ok().filter(|j| !j.own_shell || j.password) {
                let _ = writeln!(out, "{}", job.line());
            }
        }
        Ok(out)
    }

    /// Judges, by the user's policy, every line this call would submit:
    /// each part of the text before a newline, and the last part when the
    /// keys press Enter; at a shell's prompt the text already typed there
    /// counts as the start of the first (so an Enter alone is judged on
    /// what it submits). Nothing is typed when one is refused.
    async fn judge_submitted(
        &self,
        s: &Session,
        logger: &mut LoggerClient,
        (req, before): (&Request, &Status),
        progress: &Progress,
    ) -> Result<(), ToolError> {
        if !self.inner.governor.governs() {
            return Ok(());
        }
        let text = req.text.as_deref().unwrap_or_default();
        let enter = req.keys.iter().any(|(_, k)| matches!(k, Key::Named(n) if n == "Enter"));
        let mut parts: Vec<&str> = text.split(['\n', '\r']).collect();
        let last = parts.pop().unwrap_or_default();
        if enter {
            parts.push(last);
        }
        if parts.is_empty() {
            return Ok(());
        }
        let target = match target::target(s, logger, before.clone()).await {
            Ok((target, _)) => target,
            Err(_) => target::job(s).map(Target::Program).unwrap_or(Target::Shell),
        };
        for (i, part) in parts.iter().enumerate() {
            let line = match (i, &target) {
                (0, Target::Shell) => format!("{}{part}", before.typed),
                _ => part.to_string(),
            };
            if line.trim().is_empty() {
                continue;
            }
            let judged = Judge { session: s, tool: ToolName::Send, text: &line, target: &target };
            self.judged(judged, progress).await?;
        }
        Ok(())
    }

    /// Leaves copy mode if the pane (in `state`) is in it, types the text,
    /// presses the keys; says what it did.
    async fn type_in(&self, pane: &str, req: &Request, state: &PaneState) -> Result<String, ToolError> {
        let tmux = &self.sessions().tmux;
        let mut done = Vec::new();
        if state.in_mode {
            tmux.leave_mode(pane).await?;
            done.push("left copy mode".to_string());
        }
        if let Some(text) = &req.text {
            target::type_text(tmux, pane, text, req.typing).await?;
            done.push(match text.chars().count() {
                1 => "typed 1 character".to_string(),
                n => format!("typed {n} characters"),
            });
        }
        for (_, key) in &req.keys {
            match key {
                Key::Named(name) => tmux.send_key(pane, name).await,
                Key::Char(c) => tmux.send_text(pane, c.encode_utf8(&mut [0; 4])).await,
            }?;
        }
        if !req.keys.is_empty() {
            let names: Vec<&str> = req.keys.iter().map(|(n, _)| n.as_str()).collect();
            done.push(format!("pressed {}", names.join(", ")));
        }
        Ok(done.join(", then "))
    }
}

/// The log lines from the one the send began on to the last with text.
async fn appeared(s: &Session, logger: &mut LoggerClient, before: &Status, after: &Status) -> Result<Reply, ToolError> {
    if after.mark.raw == before.mark.raw {
        return Ok(Reply::text("(no output yet)\n"));
    }
    let (first, last) = (before.mark.line, last_line(after));
    Ok(match output::plan(first, last) {
        Plan::Empty => {
            Reply::text("(output arrived, but no text in the log: ask for screen=\"full\" to see the screen)\n")
        }
        Plan::Whole(a, b) => Reply::text(output::plain(&fetch(logger, after, a, b, None).await?)),
        Plan::Clipped { head, tail } => {
            let h = fetch(logger, after, head.0, head.1, None).await?;
            let t = fetch(logger, after, tail.0, tail.1, None).await?;
            let hint = format!("read session={} from_line={} to_line={}", s.name, head.1.0 + 1, tail.0.0 - 1);
            let mut shown = Reply::text(output::clipped((head.0, &h), (tail.0, &t), &hint));
            shown.facts.clipped = Some(head.1.next()..=LineNo(tail.0.0 - 1));
            shown
        }
    })
}

impl Terminal {
    /// Refuses a `send` into what belongs to someone else, as `run` would
    /// refuse its line: text another agent or a person left at the prompt
    /// (the caller's own is its to finish), a line another agent has just
    /// submitted, or a program another agent started. Text nobody can be
    /// named for, with no person attached, is anyone's to clear; a
    /// person's command gets the keys (they watch it).
    async fn owns(&self, s: &Session, logger: &mut LoggerClient, before: &Status) -> Result<(), ToolError> {
        let actor = self.actor();
        if before.shell.at_prompt {
            let last = self.last_typed(s);
            let refusal = holds::refusal(&s.name, before, last.as_ref(), &actor, s.pane.session_attached);
            return match refusal {
                Some(Refusal::Unsubmitted { by: Party::You | Party::Someone, .. }) => Ok(()),
                Some(Refusal::JustSubmitted { by: Party::You, .. } | Refusal::ShellAsks { by: Party::You, .. }) => {
                    Ok(())
                }
                Some(other) => Err(other.into()),
                None => Ok(()),
            };
        }
        let Some(&open) = before.shell.open.first() else { return Ok(()) };
        match self.journal().starter_of(&s.name, open) {
            Some(agent) if agent != actor => {
                let command = logger.region(open).await.ok().flatten().map(|r| r.command);
                let command = command.unwrap_or_else(|| format!("the command of region {open}"));
                Err(Refusal::NotYours { session: s.name.clone(), command, by: Party::Agent(agent) }.into())
            }
            _ => Ok(()),
        }
    }
}

/// Sends `sig` to the pane's foreground job, refusing when the shell
/// itself is in the foreground.
fn deliver(session: &str, pane_pid: u32, sig: Signal) -> Result<String, ToolError> {
    match foreground(pane_pid).map_err(ToolError::Failed)? {
        Foreground::Shell => {
            Err(Refusal::ShellInForeground { session: session.to_string(), comm: comm(pane_pid as i32) }.into())
        }
        Foreground::Job { pgid, comm } => {
            killpg(Pid::from_raw(pgid), sig).map_err(|e| {
                ToolError::Failed(format!("could not send {sig} to `{comm}` (process group {pgid}): {e}"))
            })?;
            Ok(format!("sent {sig} to `{comm}` (process group {pgid})"))
        }
    }
}

/// A line saying what holds the terminal now.
async fn foreground_note(pane_pid: u32) -> String {
    // A job that exits on the signal or key takes a moment to be reaped.
    tokio::time::sleep(Duration::from_millis(20)).await;
    match foreground(pane_pid) {
        Ok(Foreground::Job { pgid, comm }) => format!(
            "still in the foreground: `{comm}` (process group {pgid}); if it ignores keys, send signal=\"TERM\" or \"KILL\"\n"
        ),
        Ok(Foreground::Shell) => "the shell is in the foreground again\n".into(),
        Err(e) => format!("(could not tell what runs in the foreground: {e})\n"),
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn params(text: Option<&str>, keys: &[&str]) -> SendParams {
        SendParams {
            session: "t1".into(),
            text: text.map(str::to_string),
            keys: Some(keys.iter().map(|k| k.to_string()).collect()),
            screen: None,
            wait: None,
            signal: None,
            typing: None,
            take_over: None,
        }
    }

    #[test]
    fn a_bad_key_refuses_the_whole_call() {
        let err = check(&params(Some("echo hi"), &["enter", "ctrl+bogus"])).expect_err("refused");
        assert!(err.contains("\"ctrl+bogus\"") && err.contains("Nothing was typed"), "{err}");
    }

    #[test]
    fn text_then_keys_is_a_plan() {
        let req = check(&params(Some("hi"), &["enter", "ctrl+c"])).expect("ok");
        assert_eq!(req.text.as_deref(), Some("hi"));
        assert_eq!(req.keys.len(), 2);
        assert!(req.interrupts());
        assert_eq!(req.wait_ms, 300);
    }

    #[rstest]
    #[case::nothing(params(None, &[]))]
    #[case::empty_text(params(Some(""), &[]))]
    #[case::nul(params(Some("a\0b"), &[]))]
    #[case::signal_with_keys(SendParams { signal: Some("KILL".into()), ..params(None, &["enter"]) })]
    #[case::bad_signal(SendParams { signal: Some("HUP".into()), ..params(None, &[]) })]
    #[case::bad_screen(SendParams { screen: Some("all".into()), ..params(Some("x"), &[]) })]
    #[case::long_wait(SendParams { wait: Some(11.0), ..params(Some("x"), &[]) })]
    #[case::negative_wait(SendParams { wait: Some(-1.0), ..params(Some("x"), &[]) })]
    #[case::nan_wait(SendParams { wait: Some(f64::NAN), ..params(Some("x"), &[]) })]
    fn bad_calls_are_refused(#[case] p: SendParams) {
        assert!(check(&p).is_err());
    }

    #[rstest]
    #[case("TERM", Signal::SIGTERM)]
    #[case("kill", Signal::SIGKILL)]
    #[case("SIGKILL", Signal::SIGKILL)]
    fn signals_by_name(#[case] name: &str, #[case] sig: Signal) {
        assert_eq!(parse_signal(name), Ok(sig));
    }

    #[test]
    fn the_description_fits_what_clients_keep() {
        for tool in Terminal::send_router().list_all() {
            let len = tool.description.as_deref().map_or(0, str::len);
            assert!(len > 0 && len < 2048, "{} description is {len} bytes", tool.name);
        }
    }
}
