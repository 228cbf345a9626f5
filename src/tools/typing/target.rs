//! Typing a line where it belongs: at an integrated shell's prompt it is a
//! command (a region from the shell's markers); anywhere else -- gdb,
//! python, sqlite3, a shell without the integration, a question -- it is
//! input to a program, and the logger is asked to open an *input region*
//! for it first, labelled with the program's prompt and the line (never
//! the line itself at a password prompt).
//!
//! Also here: typing as a person would (see [`crate::keys::typing`]), and
//! the test for a program waiting at its prompt that `run` returns on.

use std::time::Duration;

use crate::keys::typing::{self, StrokeKey, Typing};
use crate::session::{LoggerClient, Session};
use crate::tmux::Tmux;
use crate::tools::{Refusal, ToolError};
use dtmcp_core::procs::{self, Activity, Job};
use dtmcp_core::protocol::{MAX_WAIT_MS, Settle, Status, WaitSpec};
use dtmcp_core::region::{InputSpec, Region};

/// What stands in a label for input typed at a password prompt.
pub const HIDDEN_INPUT: &str = "(input not shown)";

/// Where a line goes.
pub enum Target {
    /// An integrated shell at its prompt: the line is a command.
    Shell,
    /// A program (or a plain shell) that reads the terminal.
    Program(Job),
}

/// The session's pane, as [`procs`] looks at it.
pub fn pane(s: &Session) -> procs::Pane<'_> {
    procs::Pane { pid: s.pane.pane_pid, tty: &s.pane.pane_tty }
}

/// The foreground job of the session's pane, measured now.
pub fn job(s: &Session) -> Result<Job, String> {
    procs::job(pane(s))
}

/// The foreground job of `pane` once a shell holding it has settled: a
/// shell that has just drawn its prompt may still be on a CPU for a moment
/// before it blocks reading the terminal (more so on a loaded machine), so
/// a shell found working is looked at again for up to [`BUSY_GRACE`]. Any
/// other job is returned as first seen.
pub async fn settled_job(pane: procs::Pane<'_>) -> Result<Job, String> {
    let settled = with_busy_grace(|| match procs::job(pane) {
        Ok(job) if job.shell_holds() && job.activity == Activity::Working => Err(Box::new(job)),
        look => Ok(look),
    });
    settled.await.unwrap_or_else(|busy| Ok(*busy))
}

/// Decides where a line typed now would go, refusing when a command is
/// busy rather than reading its input; with the status it was decided on.
/// A look that finds no place yet is repeated, with a fresh status (taken
/// once the shell shows its prompt, see [`ready_status`]): a
/// command that ends meanwhile -- a person's, say -- leaves its shell at
/// the prompt, and the status it was first judged on would still show it
/// running, taking the shell for a program reading a line.
pub async fn target(s: &Session, logger: &mut LoggerClient, mut status: Status) -> Result<(Target, Status), ToolError> {
    let started = std::time::Instant::now();
    loop {
        let waited = started.elapsed();
        match target_now(s, &status) {
            Ok(target) => return Ok((target, status)),
            Err(Look::Starting(_)) if waited < STARTING_GRACE => {}
            // (A program that takes keys only will not take a line later.)
            Err(Look::Refused(ref why)) if waited < BUSY_GRACE && !matches!(**why, Refusal::KeysOnly { .. }) => {}
            Err(Look::Behind(_)) if waited < BUSY_GRACE => {}
            // A plain shell still busy after its grace gets the line all the
            // same: it reads it once it is ready. So does a shell builtin
            // reading a line with the line editor (`read -e`).
            Err(Look::Starting(job) | Look::Behind(job)) => return Ok((Target::Program(*job), status)),
            Err(Look::Refused(why)) => return Err(why.into()),
        }
        tokio::time::sleep(Duration::from_millis(15)).await;
        status = ready_status(s, logger).await?;
    }
}

/// The status once a shell without the integration holding the terminal
/// shows something on its line (its prompt), waiting up to
/// [`STARTING_GRACE`]: a shell just started (a pane just split) may not
/// have drawn its first prompt, and a line typed before it would be taken
/// as answered by it.
pub async fn plain_shell_ready(
    s: &Session,
    logger: &mut LoggerClient,
    mut status: Status,
) -> Result<Status, ToolError> {
    let started = std::time::Instant::now();
    while !status.shell.integrated
        && !status.eof
        && status.current_text.trim().is_empty()
        && started.elapsed() < STARTING_GRACE
        && job(s).is_ok_and(|j| j.own_shell)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
        status = logger.status().await?;
    }
    Ok(status)
}

/// How long a shell without the integration that is on a CPU (starting
/// up: a pane just split, reading its rc files) is waited for before a
/// line is typed into it: typed earlier, its first prompt would be taken
/// for the end of the line's command.
const STARTING_GRACE: Duration = Duration::from_secs(2);

/// Runs `look` until it succeeds or [`BUSY_GRACE`] has passed, and returns
/// its last answer. A program that has just drawn its prompt may still be
/// on a CPU for a moment before it blocks reading the terminal (more so on
/// a loaded machine), so a look that finds it busy is repeated for a short
/// while before it counts.
pub async fn with_busy_grace<T, E>(mut look: impl FnMut() -> Result<T, E>) -> Result<T, E> {
    let deadline = std::time::Instant::now() + BUSY_GRACE;
    loop {
        match look() {
            Err(_) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(15)).await;
            }
            outcome => return outcome,
        }
    }
}

/// How long a job may look busy before typing into it is refused.
const BUSY_GRACE: std::time::Duration = std::time::Duration::from_millis(300);

/// Why a look found no place for a line.
enum Look {
    /// A plain shell holds the terminal and is on a CPU (starting up, most
    /// likely), not reading it yet.
    Starting(Box<Job>),
    /// The session's own integrated shell reads the terminal with its line
    /// editor, while the logger still has a command open: that command has
    /// ended and its end is on its way to the logger (or a builtin reads a
    /// line with the line editor: `read -e`).
    Behind(Box<Job>),
    /// Nothing takes a line now, for the reason given.
    Refused(Box<Refusal>),
}

/// [`target`] as things are this instant.
fn target_now(s: &Session, status: &Status) -> Result<Target, Look> {
    if status.eof {
        return Err(Look::Refused(Box::new(Refusal::Ended { session: s.name.clone() })));
    }
    // A marked prompt of the innermost shell: a command line, in any
    // session (one whose shell was integrated by shell_integrate, too).
    if status.shell.integrated && status.shell.at_prompt {
        return Ok(Target::Shell);
    }
    let integrated = s.meta.integrated && status.shell.integrated;
    if integrated && status.shell.open.is_empty() {
        return Ok(Target::Shell);
    }
    let job = job(s).map_err(|why| Look::Refused(Box::new(Refusal::NotReady { session: s.name.clone(), why })))?;
    // The session's own integrated shell holding the terminal with nothing
    // running is at its prompt, even before its logger has seen a marker
    // (a logger just restarted knows nothing of the shell yet).
    if s.meta.integrated && job.own_shell && status.shell.open.is_empty() {
        return Ok(Target::Shell);
    }
    if integrated
        && job.own_shell
        && job.activity == Activity::WaitingForInput
        && procs::line_editing(&s.pane.pane_tty) == Some(true)
    {
        return Err(Look::Behind(Box::new(job)));
    }
    let plain_shell = job.own_shell && !integrated;
    if plain_shell && job.activity == Activity::Working {
        return Err(Look::Starting(Box::new(job)));
    }
    // A pager or an editor waits for keys: a line would be taken key by
    // key. So would it by most programs drawing on the alternate screen
    // (a curses menu, a TUI): send types what they take.
    if job.activity == Activity::WaitingForInput
        && !job.shell_holds()
        && (procs::KEYS_ONLY.contains(&job.reader.as_str()) || status.shell.full_screen)
    {
        let last = status.last_region.as_ref().filter(|r| r.end.is_none());
        return Err(Look::Refused(Box::new(Refusal::KeysOnly {
            session: s.name.clone(),
            program: job.reader.clone(),
            command: last.map(|r| r.command.clone()),
            region: last.map(|r| r.id.0),
            pager: procs::PAGERS.contains(&job.reader.as_str()),
        })));
    }
    if job.activity == Activity::WaitingForInput || plain_shell {
        return Ok(Target::Program(job));
    }
    Err(Look::Refused(Box::new(Refusal::Busy {
        session: s.name.clone(),
        command: status.last_region.as_ref().map(|r| r.command.clone()),
        job: job.line(),
        started_by: None,
    })))
}

/// The label of an input region: the prompt as shown, then the line, or
/// a stand-in for a line typed with echo off.
pub fn label(prompt: &str, line: &str, password: bool) -> String {
    let input = if password { HIDDEN_INPUT } else { line };
    match prompt.trim_end() {
        "" => input.to_string(),
        p => format!("{p} {input}"),
    }
}

/// Opens the input region for `line` typed into `job`'s program.
pub async fn open_input(
    s: &Session,
    logger: &mut LoggerClient,
    status: &Status,
    job: &Job,
    line: &str,
) -> Result<Region, ToolError> {
    let spec = InputSpec {
        label: label(&status.current_text, line, job.password),
        pid: u32::try_from(job.pgid).unwrap_or(0),
        prompt_pattern: s.meta.prompt_pattern.clone(),
        timeout_ms: MAX_WAIT_MS,
    };
    Ok(logger.open_input(spec).await?)
}

/// Types `text` into `pane`, at once or as a person would.
pub async fn type_text(tmux: &Tmux, pane: &str, text: &str, how: Option<Typing>) -> Result<(), ToolError> {
    let Some(how) = how else {
        return Ok(tmux.send_text(pane, text).await?);
    };
    for stroke in typing::plan(text, how) {
        tokio::time::sleep(Duration::from_millis(stroke.delay_ms)).await;
        match stroke.key {
            StrokeKey::Char(c) => tmux.send_text(pane, c.encode_utf8(&mut [0; 4])).await?,
            StrokeKey::Backspace => tmux.send_key(pane, "BSpace").await?,
        }
    }
    Ok(())
}

/// A seed for a typing plan when the caller gave none.
pub fn fresh_seed() -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    t.as_nanos() as u64 ^ u64::from(std::process::id()).rotate_left(32)
}

/// Whether the pane's foreground program waits for input at a prompt or
/// question: text on the unfinished line, and the program reading the
/// terminal.
pub fn waits_at_prompt(s: &Session, status: &Status) -> bool {
    looks_like_prompt(&status.current_text, s.meta.prompt_pattern.as_deref())
        && !status.shell.full_screen
        && job(s).is_ok_and(|j| j.activity == Activity::WaitingForInput)
}

/// Whether an unfinished line (trailing blanks trimmed) reads as a prompt
/// or a question: a known prompt, or text ending the way prompts and
/// questions end (`:`, `?`, `>`, `)`, `]`, `$`, `#`, `%`), rather than a
/// row of a program's screen.
pub fn looks_like_prompt(text: &str, own: Option<&str>) -> bool {
    let text = text.trim_end();
    let known = dtmcp_core::region::Prompts::new(own).is_ok_and(|set| set.is_match(&format!("{text} ")));
    known || text.ends_with([':', '?', '>', ')', ']', '$', '#', '%'])
}

/// How long a shell may take from a command's end to its next prompt.
const PROMPT_GRACE_MS: u64 = 2_000;

/// The logger's status once the shell shows its prompt: a command that has
/// just finished leaves a moment between its end and the next prompt, and a
/// mark taken in it would take that prompt for the end of the next command.
pub(crate) async fn ready_status(s: &Session, logger: &mut LoggerClient) -> Result<Status, ToolError> {
    let status = logger.status().await?;
    settled(s, logger, status).await
}

/// `status`, or the status once the shell shows its prompt if `status` was
/// taken between a command's end and that prompt (see [`ready_status`]).
pub(crate) async fn settled(s: &Session, logger: &mut LoggerClient, status: Status) -> Result<Status, ToolError> {
    if !status.between_commands(s.meta.integrated) || status.eof {
        return Ok(status);
    }
    let spec = WaitSpec { after: status.mark, command_done: true, timeout_ms: PROMPT_GRACE_MS, ..WaitSpec::default() };
    Ok(logger.wait(spec).await?.1)
}

/// What [`settled`] does, asked of the logger with a look at the prompt:
/// the look waits out a shell between a command's end and its next prompt.
pub(crate) fn settle(s: &Session) -> Settle {
    Settle { own_integrated: s.meta.integrated, grace_ms: PROMPT_GRACE_MS }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_and_questions_look_like_prompts() {
        for text in ["(gdb)", ">>>", "...", "sqlite>", "Name:", "Continue? [y/n]", "Quit anyway? (y or n)", "ready~"] {
            assert!(looks_like_prompt(text, Some("ready~ $")), "{text:?}");
        }
        for text in ["", "   36 root  20   0  0:00.41 kcompactd0", "compiling foo.c", "ready~"] {
            assert!(!looks_like_prompt(text, None), "{text:?}");
        }
    }

    #[test]
    fn labels_carry_the_prompt_and_hide_passwords() {
        assert_eq!(label("(gdb)", "break main", false), "(gdb) break main");
        assert_eq!(label(">>> ", "1+1", false), ">>> 1+1");
        assert_eq!(label("", "hello", false), "hello");
        assert_eq!(label("Password:", "hunter2", true), format!("Password: {HIDDEN_INPUT}"));
    }
}
