//! `run` and `wait`: type a command line, and wait for it to finish.

use std::fmt::Write;
use std::time::{Duration, Instant};

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{schemars, tool, tool_router};
use serde::Deserialize;

use crate::keys::typing::{Typing, TypingParams};
use crate::session::client::HeldWait;
use crate::session::{LoggerClient, Session};
use crate::tools::Terminal;
use crate::tools::ToolName;
use crate::tools::replies::reply::{Facts, Outcome, Reply};
use crate::tools::replies::report::{Waited, describe};
use crate::tools::replies::shape::{Shape, ShapeParams};
use crate::tools::typing::args::{EMPTY, command_lines, timeout_ms};
use crate::tools::typing::consent::{Judged, Line as Judge};
use crate::tools::typing::holds::{self, Enter, Hold};
use crate::tools::typing::listen::{Ask, Heard, Want};
use crate::tools::typing::progress::Progress;
use crate::tools::typing::target::{self, Target};
use crate::tools::{Party, Refusal, ToolError};
use dtmcp_core::protocol::{Mark, Status, WaitReason, WaitSpec};
use dtmcp_core::region::{Region, RegionKind};
use dtmcp_core::types::{LineNo, RegionId};

/// Output quiet this long is when `run` looks whether a program waits at
/// a prompt (a REPL started by the command, a question).
const QUIET_MS: u64 = 250;
/// While output stays quiet, how often to look again.
const RECHECK_MS: u64 = 1_000;
/// Quiet this long, a program blocked reading the terminal is taken to
/// wait for input even with no prompt on its line.
const READ_QUIET_MS: u64 = 2_000;
/// How long a full-screen program may take to draw its first screen.
const FIRST_SCREEN_MS: u64 = 2_000;
/// Quiet this long after a full-screen program starts: its screen is drawn.
const SCREEN_QUIET_MS: u64 = 200;

/// Declares a parameter struct of `run` or `wait`: its own fields, then the
/// waiting and shaping options both share. (serde's `flatten` cannot be
/// combined with `deny_unknown_fields`, hence a macro instead of a nested
/// struct.)
macro_rules! with_wait_options {
    ($(#[$meta:meta])* pub struct $name:ident { $($own:tt)* }) => {
        $(#[$meta])*
        #[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $($own)*
            /// A regex: return as soon as it appears in the command's new output (never matching the echoed command line); the command keeps running.
            #[serde(default)]
            pub until: Option<String>,
            /// A regex: reply with only the output lines that match it (plus show_after lines after each), e.g. "error|warning". The full output stays readable with read.
            #[serde(default)]
            pub show: Option<String>,
            /// With show: how many lines after each match to include (default 0, at most 20).
            #[serde(default)]
            pub show_after: Option<u64>,
            /// Reply with only the last N lines of output (at most 400), instead of head and tail.
            #[serde(default)]
            pub last_lines: Option<u64>,
            /// An absolute file path: also write the whole output there (it must not exist unless overwrite is true; symlinks are never followed).
            #[serde(default)]
            pub save_to: Option<String>,
            /// With save_to: replace an existing regular file.
            #[serde(default)]
            pub overwrite: Option<bool>,
            /// A TCP or UDP port: return as soon as a process of the session listens on it (the command keeps running); a command that ends first is reported at once. No sleep-and-curl loop is needed.
            #[serde(default)]
            pub port: Option<u64>,
            /// true: return as soon as a process of the session listens on any new port or socket path.
            #[serde(default)]
            pub listening: Option<bool>,
        }
    };
}

with_wait_options! {
    /// Arguments of `run`.
    pub struct RunParams {
        /// The session's name, as session_create or session_list gave it.
        pub session: String,
        /// The command line to type and run, e.g. "make -j4". Several lines run one after another, each waited for. At a program's prompt an empty line is an Enter (a blank last line ends a python block).
        pub command: String,
        /// Seconds to wait for the command to finish (default 30, at most 600). At the timeout the command keeps running: the reply says so and wait picks it up.
        #[serde(default)]
        pub timeout: Option<f64>,
        /// Type the line as a person would, for someone watching: {speed (characters per second), mistakes (share corrected with backspace), seed}; {} for the defaults. The line typed is exact either way.
        #[serde(default)]
        pub typing: Option<TypingParams>,
    }
}

with_wait_options! {
    /// Arguments of `wait`.
    pub struct WaitParams {
        /// The session's name.
        pub session: String,
        /// Seconds to wait (default 30, at most 600).
        #[serde(default)]
        pub timeout: Option<f64>,
    }
}

/// `run`'s and `wait`'s options for waiting and shaping, checked.
struct Options {
    until: Option<String>,
    shape: Shape,
    /// A listener to wait for (`port`, `listening`).
    listen: Option<Ask>,
}

macro_rules! options_of {
    ($p:expr) => {{
        let shape = ShapeParams {
            show: $p.show.clone(),
            show_after: $p.show_after,
            last_lines: $p.last_lines,
            save_to: $p.save_to.clone(),
            overwrite: $p.overwrite,
        };
        Options::parse($p.until.clone(), &shape, $p.port, $p.listening)
    }};
}

impl Options {
    fn parse(
        until: Option<String>,
        shape: &ShapeParams,
        port: Option<u64>,
        on: Option<bool>,
    ) -> Result<Options, ToolError> {
        if let Some(u) = &until {
            regex::Regex::new(u).map_err(|e| ToolError::BadInput(format!("until: invalid pattern: {e}")))?;
        }
        let listen = Ask::parse(port, on).map_err(ToolError::BadInput)?;
        Ok(Options { until, shape: Shape::parse(shape)?, listen })
    }

    fn spec(&self, after: Mark, timeout_ms: u64) -> WaitSpec {
        WaitSpec {
            after,
            command_done: true,
            pattern: self.until.clone(),
            timeout_ms,
            settle_ms: Some(QUIET_MS),
            full_screen: true,
        }
    }
}

#[tool_router(router = run_router, vis = "pub(crate)")]
impl Terminal {
    /// Types a command line and waits for it.
    #[tool(
        name = "run",
        description = crate::docent::texts::tool::RUN.trim_end(),
        meta = crate::tools::always_load()
    )]
    pub async fn run(&self, Parameters(p): Parameters<RunParams>, progress: Progress) -> CallToolResult {
        let name = p.session.clone();
        let command = p.command.clone();
        self.call_noted(crate::tools::ToolName::Run, &name, Some(&command), self.run_body(p, &progress)).await
    }

    /// Keeps waiting for a running command.
    #[tool(
        name = "wait",
        description = crate::docent::texts::tool::WAIT.trim_end(),
        meta = crate::tools::always_load()
    )]
    pub async fn wait(&self, Parameters(p): Parameters<WaitParams>, progress: Progress) -> CallToolResult {
        let name = p.session.clone();
        self.call_noted(crate::tools::ToolName::Wait, &name, None, self.wait_body(p, &progress)).await
    }
}

impl Terminal {
    /// `e`, and when it refuses a line because a command is busy, who
    /// started that command (region `open` of `s`): an agent, else a
    /// person.
    fn started_by(&self, mut e: ToolError, s: &Session, open: Option<RegionId>) -> ToolError {
        if let (ToolError::Refused { refusal, .. }, Some(open)) = (&mut e, open)
            && let Refusal::Busy { started_by, .. } = refusal.as_mut()
        {
            *started_by = Some(self.journal().starter_of(&s.name, open).map_or(Party::Person, Party::Agent));
        }
        e
    }

    /// Whether the text at `status`'s prompt that `why` refuses, which
    /// nobody can be named for, came without a key: tmux stamps a
    /// session's activity (to the second) at each key a client presses and
    /// at attaching, and agents' keys are known, so text there with no
    /// stamp since the session was made, or since the prompt's command
    /// ended, and that ends a line, is output of a job in the background (a
    /// server's first lines), not typing.
    async fn output_at_prompt(&self, s: &Session, status: &Status, why: &Refusal) -> bool {
        // Typing ends no line at a prompt (Enter submits it); a job's
        // output does, leaving the cursor on a line of its own.
        let ends_a_line = status.typed.contains('\n') || status.current_text.trim().is_empty();
        if !matches!(why, Refusal::Unsubmitted { by: Party::Someone, .. }) || !ends_a_line {
            return false;
        }
        let since_ms = status.last_region.as_ref().and_then(|r| r.ended_ms).unwrap_or(s.meta.created_ms);
        let format = "#{session_activity} #{session_created}";
        let Ok(stamps) = self.sessions().tmux.display(s.pane.pane_id.as_str(), format).await else { return false };
        let mut stamps = stamps.split_whitespace().map(str::parse::<u64>);
        let (Some(Ok(activity_s)), Some(Ok(created_s))) = (stamps.next(), stamps.next()) else { return false };
        // Stamped at its making only, or not since the command ended.
        activity_s == created_s || (activity_s + 1) * 1000 <= since_ms
    }

    async fn run_body(&self, p: RunParams, progress: &Progress) -> Result<Reply, ToolError> {
        let timeout = timeout_ms(p.timeout).map_err(ToolError::BadInput)?;
        let lines = command_lines(&p.command, true).map_err(ToolError::BadInput)?;
        let opts = options_of!(p)?;
        let typing = p.typing.as_ref().map(|t| Typing::parse(t, target::fresh_seed())).transpose();
        let typing = typing.map_err(ToolError::BadInput)?;
        let s = self.sessions().resolve(&p.session).await?;
        let mut logger = self.sessions().logger(&s).await?;
        let mut out = Reply::default();
        let deadline = Instant::now() + Duration::from_millis(timeout);
        // What listened before the line, when the call waits for a listener.
        let want = Want::of(opts.listen, s.pane.pane_pid, false).await;
        let call = Call { opts: &opts, deadline, typing, progress, want };
        let actor = self.actor();
        // Who allowed the line being typed, when the policy asked a person.
        let mut approved: Option<String> = None;
        // Blank lines left out of a python block (see below).
        let mut dropped = 0;
        let mut i = 0;
        while let Some(line) = lines.get(i) {
            if progress.cancelled() {
                // The client gave up on the call: what is typed runs on,
                // nothing more is typed.
                let _ = match i {
                    0 => writeln!(out, "(the call was cancelled before anything was typed)"),
                    _ => writeln!(
                        out,
                        "(the call was cancelled; the remaining {} lines were not typed)",
                        lines.len() - i
                    ),
                };
                break;
            }
            // Held from the look at the prompt to the Enter: nobody else's
            // characters get into this line.
            let hold = self.inner.holds.take(&s.name, &actor, "run")?;
            // A line typed at once: the look at the prompt also starts the
            // wait for the line (one round trip to the logger, not two), and
            // the logger takes the look once a prompt follows a command that
            // has just ended. The wait serves only if nothing below takes a
            // new look.
            let (status, held) = match call.typing {
                None => {
                    let left = deadline.saturating_duration_since(Instant::now()).as_millis() as u64;
                    let spec = opts.spec(Mark::default(), slice_ms(left.max(1)));
                    logger.status_wait(spec, target::settle(&s)).await?
                }
                Some(_) => (logger.status().await?, None),
            };
            let status = match held {
                Some(_) => status,
                None => target::settled(&s, &mut logger, status).await?,
            };
            let status = target::plain_shell_ready(&s, &mut logger, status).await?;
            let open = status.shell.open.first().copied();
            let (target, mut status) = match target::target(&s, &mut logger, status).await {
                Ok(decided) => decided,
                Err(e) => return Err(self.started_by(e, &s, open)),
            };
            // An empty line is an Enter for a program (a REPL's block ends
            // with one) and goes into a command a shell is still being
            // given (a heredoc's); at a shell's own prompt it does nothing,
            // and is not typed.
            if line.trim().is_empty() && matches!(target, Target::Shell) && !status.shell.at_continuation {
                if lines.iter().all(|l| l.trim().is_empty()) {
                    return Err(ToolError::BadInput(EMPTY.into()));
                }
                i += 1;
                continue;
            }
            // python's prompt ends a block at a blank line, so one inside
            // a block (between two methods of a class) would end it early
            // and fail the rest on their indentation. It is left out.
            if matches!(&target, Target::Program(job) if job.comm.starts_with("python"))
                && matches!(status.current_text.trim(), ">>>" | "...")
                && blank_inside_a_block(&lines, i)
            {
                dropped += 1;
                i += 1;
                continue;
            }
            // At a continuation prompt the text typed so far is this
            // command's own earlier lines, not someone else's.
            let ours = i > 0 && status.typed.trim_start().starts_with(lines[0].trim());
            if matches!(target, Target::Shell) && !ours {
                let cancelled = self.cancel_pending_keys(&s, &mut logger, status).await?;
                let cleared = self.clear_stray_answers(&s, &mut logger, cancelled.status).await?;
                status = cleared.status;
                for note in [cancelled.note, cleared.note].into_iter().flatten() {
                    let _ = writeln!(out, "{note}");
                }
                let last = self.last_typed(&s);
                if let Some(why) = crate::tools::typing::holds::refusal(
                    &s.name,
                    &status,
                    last.as_ref(),
                    &actor,
                    s.pane.session_attached,
                ) {
                    if !self.output_at_prompt(&s, &status, &why).await {
                        return Err(ToolError::Refused { refusal: Box::new(why), said: out.text });
                    }
                    // Its first line names it; the screen has the rest.
                    let mut printed = status.typed.lines().map(str::trim).filter(|l| !l.is_empty());
                    let first = printed.next().unwrap_or_default();
                    let more = if printed.next().is_some() { " …" } else { "" };
                    let _ = writeln!(
                        out,
                        "(`{first}`{more} after the prompt is output of a program in the background, not typing: no key was pressed in {} since its prompt came; an Enter drew a fresh prompt for the command)",
                        s.name
                    );
                    status = self.fresh_prompt(&s, &mut logger, status).await?;
                }
            }
            // A question that reads one key (zsh's `[yn]`) would take the
            // line's first character as its answer, and whatever reads next
            // the rest: `yes` would answer y and run `es`.
            let question = status.current_text.trim();
            if matches!(target, Target::Program(_))
                && line.trim().chars().count() != 1
                && crate::tools::replies::report::reads_one_key(question)
            {
                return Err(ToolError::BadInput(format!(
                    "{} asks `{question}`{}: a line typed there would answer with its first character, and the \
                     rest would go to whatever reads next, so nothing was typed. Send the one key: send \
                     session={} text=\"y\" (or \"n\"), no Enter",
                    s.name,
                    crate::tools::replies::report::answers_taken(question),
                    s.name
                )));
            }
            if approved.is_none() {
                let judged = Judge { session: &s, tool: ToolName::Run, text: line, target: &target };
                if let Judged::Ask(pending) = self.judge_line(judged)? {
                    // A person may take minutes: nobody is held meanwhile,
                    // and the prompt is looked at again once they answer.
                    drop(hold);
                    approved = Some(self.consent(&s, *pending, progress).await?);
                    continue;
                }
            }
            let caller = crate::agents::caller::Caller::current();
            if i == 0 {
                // Who typed, and the call's key, before typing.
                holds::before_typing(self.journal(), &s.name, &caller, &logger, status.mark);
            }
            if let Some(allowed) = approved.take() {
                self.journal().record_consent(&s.name, &actor, status.mark.regions, &allowed);
                let _ = writeln!(out, "(`{line}` was {allowed})");
            }
            // Each line says it went in when there are several to type
            // (a shell is not given the blank ones at its prompt).
            let several = match target {
                Target::Shell => lines.iter().filter(|l| !l.trim().is_empty()).count() > 1,
                Target::Program(_) => lines.len() > 1,
            };
            let held = held.filter(|h| h.after() == status.mark);
            let typed = Line { text: line, before: &status, target, hold, held };
            let part = self.run_line(&s, &mut logger, typed, &call).await?;
            if several {
                let _ = writeln!(out, "$ {line}");
            }
            let finished = part.facts.outcome.lets_next_line_go();
            // A line the shell took as part of a command still being given
            // (a heredoc's, an open `if`'s) needs no report of its own when
            // more lines follow: its `$ line` says it went in.
            let continues = part.facts.continues;
            match continues && i + 1 < lines.len() {
                true => out.push(Reply { text: String::new(), ..part }),
                false => out.push(part),
            }
            if !finished && i + 1 < lines.len() {
                let _ = writeln!(out, "(the remaining {} lines were not typed)", lines.len() - i - 1);
                break;
            }
            i += 1;
        }
        if dropped > 0 {
            let _ = writeln!(
                out,
                "({dropped} blank line{} inside an indented block left out: python's prompt ends a block at a blank line)",
                if dropped == 1 { "" } else { "s" }
            );
        }
        Ok(out)
    }

    async fn run_line(
        &self,
        s: &Session,
        logger: &mut LoggerClient,
        line: Line<'_>,
        call: &Call<'_>,
    ) -> Result<Reply, ToolError> {
        let Line { text: line, before, target, hold, held } = line;
        let quoted = quote_tabs(line, &target);
        let tmux = &self.sessions().tmux;
        let pane = s.pane.pane_id.as_str();
        if let Target::Program(job) = &target {
            target::open_input(s, logger, before, job, line).await?;
        }
        let actor = self.actor();
        let left = call.deadline.saturating_duration_since(Instant::now()).as_millis() as u64;
        // Typed already: whatever stops the wait now, the reply says so.
        let typed = |e: ToolError| {
            ToolError::Failed(format!(
                "`{line}` was typed into {} (it runs there), but its outcome cannot be followed: {e}. Once that is fixed, wait session={} shows how it went",
                s.name, s.name
            ))
        };
        let follow = Follow { progress: call.progress, from: before.mark.line.next() };
        let spec = call.opts.spec(before.mark, left.max(1));
        let pressed = |hold: crate::tools::typing::holds::Hold| {
            self.inner.holds.note_typed(pane, &actor, line, Enter::Pressed, before);
            drop(hold);
        };
        let waited = if call.typing.is_none() {
            // The line and its Enter in one tmux command: no person's key
            // can fall between them. The wait is asked for while tmux
            // types: with many agents at once tmux answers late, and the
            // command has often ended by then. (A wait that starts before
            // the line is typed looks again until the shell answers it.)
            let send = async {
                tmux.send_line(pane, &quoted).await?;
                pressed(hold);
                Ok(())
            };
            let wait = self.wait_line(s, logger, spec, follow, held);
            let wait =
                async { self.wait_or_listen(s, call.want.as_ref(), call.progress, left, wait).await.map_err(typed) };
            tokio::try_join!(send, wait)?.1
        } else {
            target::type_text(tmux, pane, &quoted, call.typing).await?;
            // Typed slowly, a person attached may have typed at the same
            // time: the line must read as typed before Enter submits it.
            if matches!(target, Target::Shell)
                && s.pane.session_attached > 0
                && let Err(why) = typed_alone(s, logger, line).await
            {
                self.inner.holds.note_typed(pane, &actor, line, Enter::NotPressed, before);
                return Err(why.reworded(|why| format!("{why} (in {})", s.name)));
            }
            tmux.send_enter(pane).await?;
            pressed(hold);
            let wait = self.wait_line(s, logger, spec, follow, held);
            self.wait_or_listen(s, call.want.as_ref(), call.progress, left, wait).await.map_err(typed)?
        };
        let (mut reason, mut status, mut region) = match waited {
            Heard::Listening(look, want) => {
                return self.listening_reply(s, logger, before.mark, &want, &look, &call.opts.shape).await;
            }
            Heard::Logger(waited) => *waited,
        };
        if reason == WaitReason::FullScreen {
            let spec = WaitSpec {
                after: before.mark,
                command_done: true,
                settle_ms: Some(SCREEN_QUIET_MS),
                timeout_ms: FIRST_SCREEN_MS,
                ..WaitSpec::default()
            };
            (reason, status, region) = logger.wait_region(spec).await?;
            if !matches!(reason, WaitReason::RegionEnded(_) | WaitReason::Prompt | WaitReason::Eof) {
                return self.first_screen(s).await;
            }
        }
        if matches!(reason, WaitReason::Matched(_)) {
            (status, region) = ended_right_after(logger, before.mark, status, region).await?;
        }
        let into_program = matches!(target, Target::Program(_));
        if into_program && matches!(reason, WaitReason::RegionEnded(_)) && status.shell.open.is_empty() {
            // The program ended with its input: let the shell's prompt come.
            // (A shell command's reply does not wait for it: drawing the
            // prompt overlaps the client's turn, and the next call waits
            // for it only if it is not there yet.)
            status = target::ready_status(s, logger).await?;
            // The region as it is now, not as the wait left it.
            region = match status.mark.regions > before.mark.regions {
                true => logger.region(RegionId(before.mark.regions + 1)).await?,
                false => None,
            };
        }
        // The program was the command's own shell, at a prompt that came
        // without its marker (the command replaced the prompt hook): the
        // line began a command of its own, whose region opened as the
        // input's closed. The reply follows that command, as a run at a
        // marked prompt would.
        if let (Target::Program(job), WaitReason::RegionEnded(input)) = (&target, &reason)
            && job.own_shell
            && status.mark.regions > input.0
            && let Some(next) = logger.region(RegionId(input.0 + 1)).await?
            && next.kind == RegionKind::Command
            && u32::try_from(job.pgid).is_ok_and(|pgid| pgid == next.pid)
        {
            let after = Mark { regions: input.0, ..before.mark };
            let left = call.deadline.saturating_duration_since(Instant::now()).as_millis() as u64;
            let follow = Follow { progress: call.progress, from: before.mark.line.next() };
            (reason, status, region) =
                self.wait_line(s, logger, call.opts.spec(after, left.max(1)), follow, None).await.map_err(typed)?;
        }
        let waited = Waited {
            status: &status,
            reason: &reason,
            region: region.as_ref(),
            typed_on: before.mark.line,
            seen: None,
        };
        // Still at the prompt the line went in at, the shell waiting for a
        // key: it asks about the line before it runs it (zsh's `correct`).
        let asks = reason == WaitReason::Prompt
            && region.is_none()
            && matches!(target, Target::Shell)
            && status.shell.at_prompt
            && status.mark.prompts == before.mark.prompts;
        let question = status.current_text.trim();
        let note = asks.then(|| {
            format!(
                "the shell asks before it runs the line: `{question}`{}; answer with send text=\"…\" (zsh reads one key: no Enter)",
                crate::tools::replies::report::answers_taken(question)
            )
        });
        let mut reply = describe(s, logger, &waited, &call.opts.shape, note.as_deref()).await?;
        if asks {
            reply.facts.outcome = Outcome::Waiting;
        }
        self.inner.shown.note(&actor, &s.name, &reply.facts);
        Ok(Want::unmet_in(call.want.as_ref(), &reason, reply))
    }

    /// The reply when a full-screen program took the screen: what it shows.
    async fn first_screen(&self, s: &Session) -> Result<Reply, ToolError> {
        let screen = self.screen(s, crate::tools::reading::views::ScreenMode::Full).await?;
        let who = target::job(s)
            .map(|j| match j.keys_reader() {
                Some(reader) => format!(" (`{reader}`, under `{}`)", j.comm),
                None => format!(" (`{}`)", j.comm),
            })
            .unwrap_or_default();
        let text = format!(
            "a full-screen program{who} holds the screen; it keeps running. Its first screen:\n{screen}Press its keys with send (e.g. keys=[\"q\"], or [\"escape\", \":\", \"q\", \"enter\"] in vi) and look again with read view=\"screen\".\n"
        );
        Ok(Reply { text, facts: Facts { outcome: Outcome::FullScreen, ..Facts::default() } })
    }

    pub(crate) async fn wait_body(&self, p: WaitParams, progress: &Progress) -> Result<Reply, ToolError> {
        let timeout = timeout_ms(p.timeout).map_err(ToolError::BadInput)?;
        let opts = options_of!(p)?;
        let s = self.sessions().resolve(&p.session).await?;
        let mut logger = self.sessions().logger(&s).await?;
        let status = logger.status().await?;
        let want = Want::of(opts.listen, s.pane.pane_pid, true).await;
        // A line typed into a program is what runs, when one is still open.
        let Some(open) = status.shell.input.or_else(|| status.shell.open.first().copied()) else {
            if let Some(want) = &want {
                return Ok(self.listen_at_prompt(&s, want, timeout, progress).await);
            }
            return Ok(Reply::text(format!("nothing is running in {}; it is at its prompt", s.name)));
        };
        // Wait as if the command had just been typed: its region is the
        // first one after a mark taken just before it opened.
        let mut after = status.mark;
        after.regions = open.0 - 1;
        let follow = Follow { progress, from: after.line };
        // The wait's answer carries region `after.regions + 1`: `open`.
        let wait = self.wait_line(&s, &mut logger, opts.spec(after, timeout), follow, None);
        let (reason, mut status, mut region) =
            match self.wait_or_listen(&s, want.as_ref(), progress, timeout, wait).await? {
                Heard::Logger(waited) => *waited,
                Heard::Listening(look, want) => {
                    return self.listening_reply(&s, &mut logger, after, &want, &look, &opts.shape).await;
                }
            };
        if matches!(reason, WaitReason::Matched(_)) {
            (status, region) = ended_right_after(&mut logger, after, status, region).await?;
        }
        // An earlier reply's lines of this command are not shown again.
        let actor = self.actor();
        let seen = region.as_ref().and_then(|r| self.inner.shown.through(&actor, &s.name, r.id));
        let waited =
            Waited { status: &status, reason: &reason, region: region.as_ref(), typed_on: status.mark.line, seen };
        let reply = describe(&s, &mut logger, &waited, &opts.shape, None).await?;
        self.inner.shown.note(&actor, &s.name, &reply.facts);
        Ok(Want::unmet_in(want.as_ref(), &reason, reply))
    }
}

/// How long a command whose output matched `until` is given to end: the
/// line waited for is often its last ("BUILD OK"), and its exit status
/// then says more than "it keeps running".
const MATCH_END_MS: u64 = 100;

/// The status and region once the command (region `after.regions + 1`)
/// whose output matched `until` ended, if it does within [`MATCH_END_MS`];
/// else `status` and `region` as they were.
async fn ended_right_after(
    logger: &mut LoggerClient,
    after: Mark,
    status: Status,
    region: Option<Region>,
) -> Result<(Status, Option<Region>), ToolError> {
    if region.as_ref().is_none_or(|r| r.end.is_some()) {
        return Ok((status, region));
    }
    let spec = WaitSpec { after, command_done: true, timeout_ms: MATCH_END_MS, ..WaitSpec::default() };
    match logger.wait_region(spec).await? {
        (WaitReason::RegionEnded(_), now, Some(r)) if r.end.is_some() => Ok((now, Some(r))),
        _ => Ok((status, region)),
    }
}

/// One line of a `run`, about to be typed.
struct Line<'a> {
    /// The line.
    text: &'a str,
    /// The logger's status just before it is typed.
    before: &'a Status,
    /// Where it goes.
    target: Target,
    /// The session, held for this call until the line's Enter.
    hold: Hold<'a>,
    /// The wait for the line the logger holds already, from `before`'s mark
    /// (see [`LoggerClient::status_wait`]).
    held: Option<HeldWait>,
}

/// What holds for every line of one `run` call.
struct Call<'a> {
    /// How to wait and shape the reply.
    opts: &'a Options,
    /// When the call's wait runs out, for all its lines together.
    deadline: Instant,
    /// How to type each line: as a person would, or at once (`None`).
    typing: Option<Typing>,
    /// The client's progress and cancellation.
    progress: &'a Progress,
    /// A listener to wait for, and what listened before the call.
    want: Option<Want>,
}

/// A wait the client follows: where its progress goes, and the first line
/// of the command's output (for the lines it has printed and its last).
struct Follow<'a> {
    /// The client's progress and cancellation.
    progress: &'a Progress,
    /// The first line the command's output can be on.
    from: LineNo,
}

/// How long the echo of a typed line may take to show at the prompt.
const ECHO_MS: u64 = 500;

/// Checks, before Enter, that the prompt holds exactly the line just
/// typed: nobody else's keys got in. A line whose echo is still on its way
/// when [`ECHO_MS`] is up, or that is wider than the logger can tell
/// (wrapped), is let through.
async fn typed_alone(s: &Session, logger: &mut LoggerClient, line: &str) -> Result<(), ToolError> {
    let deadline = Instant::now() + Duration::from_millis(ECHO_MS);
    let want = line.trim_end();
    loop {
        let status = logger.status().await?;
        let typed = status.typed.trim_end();
        if typed == want || !status.shell.at_prompt {
            return Ok(());
        }
        let on_its_way = want.starts_with(typed);
        if !on_its_way && !typed.contains('\n') {
            return Err(Refusal::TypedOver { session: s.name.clone(), reads: typed.to_string() }.into());
        }
        if Instant::now() >= deadline {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

impl Terminal {
    /// Waits as `spec` says, and also returns (as [`WaitReason::Prompt`])
    /// when output has gone quiet with the foreground program waiting for
    /// input at a prompt or question: a REPL the command started, `read -p`.
    /// Between slices of at most a second it tells the client how the
    /// command goes, and a client that cancelled ends the wait as the
    /// timeout would. The region that opened first after `spec.after` comes
    /// with the answer, as the wait's end saw it (no further round trip).
    async fn wait_line(
        &self,
        s: &Session,
        logger: &mut LoggerClient,
        mut spec: WaitSpec,
        follow: Follow<'_>,
        mut held: Option<HeldWait>,
    ) -> Result<(WaitReason, Status, Option<Region>), ToolError> {
        let deadline = Instant::now() + Duration::from_millis(spec.timeout_ms);
        let typed_at = spec.after.raw;
        // Since when the output has not grown.
        let mut quiet_since = (Instant::now(), spec.after.raw);
        loop {
            let left = deadline.saturating_duration_since(Instant::now()).as_millis() as u64;
            spec.timeout_ms = slice_ms(left);
            // Every slice asks from the same mark (only `raw` moves, for
            // the quiet): an end or a match between two slices is found by
            // the next. The first may be held by the logger already.
            let (reason, status, region) = match held.take() {
                Some(first) => first.answer().await?,
                None => logger.wait_region(spec.clone()).await?,
            };
            let last = left <= spec.timeout_ms;
            match reason {
                WaitReason::Settled | WaitReason::Timeout => {
                    // An integrated shell still at its prompt has not begun
                    // the line (a slow machine, a shell inside the session's
                    // own): its markers, not the look of its prompt, say when
                    // it ends. Nor has a program that has shown nothing since
                    // (a shell still starting echoes the line late): the
                    // prompt on screen is the one the line was typed at.
                    let answered = status.mark.raw > typed_at;
                    if answered && !status.shell.at_prompt && target::waits_at_prompt(s, &status) {
                        return Ok((WaitReason::Prompt, status, region));
                    }
                    if status.mark.raw != quiet_since.1 {
                        quiet_since = (Instant::now(), status.mark.raw);
                    }
                    // A program blocked reading the terminal with nothing
                    // printed for a while (`cat`, a script's `input()`
                    // without a prompt) waits for someone to type.
                    // So does an integrated shell that, with no new prompt
                    // and no command begun since the line, reads a key: it
                    // asks about the line (zsh's `correct`).
                    let asks = status.shell.integrated
                        && status.mark.prompts == spec.after.prompts
                        && status.mark.regions == spec.after.regions;
                    if (!status.shell.at_prompt || asks)
                        && quiet_since.0.elapsed() >= Duration::from_millis(READ_QUIET_MS)
                        && target::job(s).is_ok_and(|j| j.reads_terminal())
                    {
                        return Ok((WaitReason::Prompt, status, region));
                    }
                    if (last && reason == WaitReason::Timeout) || follow.progress.cancelled() {
                        return Ok((WaitReason::Timeout, status, region));
                    }
                    follow.progress.tick(self, s, logger, &status, follow.from).await;
                    // Quiet, but nobody waits: look again after new output or a while.
                    spec.after.raw = status.mark.raw;
                }
                _ => return Ok((reason, status, region)),
            }
        }
    }
}

/// Whether line `i` of `lines` is blank and inside an indented block: the
/// next line that is not blank is indented, and no triple-quoted string
/// is open (where a blank line is part of the text).
fn blank_inside_a_block(lines: &[String], i: usize) -> bool {
    if !lines[i].trim().is_empty() {
        return false;
    }
    let next = lines[i + 1..].iter().find(|l| !l.trim().is_empty());
    let indented = next.is_some_and(|l| l.starts_with([' ', '\t']));
    let before = &lines[..i];
    let open = |quotes: &str| before.iter().map(|l| l.matches(quotes).count()).sum::<usize>() % 2 == 1;
    indented && !open("\"\"\"") && !open("'''")
}

/// Programs that read their lines with readline, where a tab asks for a
/// completion as it does at a shell's prompt.
/// (`python3.13` and its kin by their prefix.)
const READLINE: &[&str] = &["python", "gdb", "psql", "sqlite3", "bc"];

/// `line` as typed into `target`: each tab goes after a ctrl+v (the line
/// editors' quoted insert) where a line editor would take it for a
/// completion -- at a shell's prompt, in its heredocs, in readline's
/// programs -- so a tab in a command or a file's text arrives as a tab
/// instead of completing a file name into the line.
fn quote_tabs<'a>(line: &'a str, target: &Target) -> std::borrow::Cow<'a, str> {
    let edits = match target {
        Target::Shell => true,
        Target::Program(job) => job.shell_holds() || READLINE.iter().any(|p| job.comm.starts_with(p)),
    };
    match edits && line.contains('\t') {
        true => line.replace('\t', "\u{16}\t").into(),
        false => line.into(),
    }
}

/// How long one slice of a wait with `left_ms` to go lasts (see
/// [`Terminal::wait_line`]).
fn slice_ms(left_ms: u64) -> u64 {
    Progress::slice(left_ms).min(RECHECK_MS.max(QUIET_MS * 2))
}

#[cfg(test)]
mod tests {
    use super::blank_inside_a_block;

    fn lines(text: &str) -> Vec<String> {
        text.split('\n').map(str::to_string).collect()
    }

    #[test]
    fn blank_lines_inside_a_python_block_are_told_from_its_end() {
        let class =
            lines("class A:\n    def a(self):\n        return 1\n\n    def b(self):\n        return 2\n\nA().b()");
        // Between the methods: inside; after the class: its end.
        assert!(blank_inside_a_block(&class, 3));
        assert!(!blank_inside_a_block(&class, 6));
        assert!(!blank_inside_a_block(&class, 0), "not blank");
        // A blank line of a docstring is its text.
        let doc = lines("def f():\n    \"\"\"One.\n\n    Two.\"\"\"\n\n    return 1\n");
        assert!(!blank_inside_a_block(&doc, 2));
        assert!(blank_inside_a_block(&doc, 4));
        // The last line has nothing after it.
        assert!(!blank_inside_a_block(&lines("if x:\n    y\n"), 2));
    }
}
