//! Who may type into a session now, and what must not be typed over.
//!
//! Two agents typing into one session at once would interleave their
//! characters within a line. So a call that types *holds* the session
//! from the moment it looks at the prompt until its Enter is pressed; a
//! second call meanwhile is refused at once, told who holds it (never
//! queued: a refusal cannot deadlock, and the hold is released when its
//! call ends, however it ends).
//!
//! Text someone typed at a shell's prompt and did not submit (a person at
//! the keyboard, or another agent's `send`) is never typed over or
//! submitted by `run`: the logger knows where the prompt ends and what
//! follows it, and the call is refused with that text and who typed it.
//!
//! A line an agent has just submitted takes the prompt until the logger
//! sees something come of it: its command's region opens, a new prompt is
//! shown, or the pane's shell or output ends (a new session, or one on a
//! new tmux server after the old one died, never inherits it). A fixed
//! time is only the upper bound, for shells without markers.
//!
//! Holds themselves live in process memory: they last a moment. Which
//! agent left half-typed text at a prompt is also written to the agent's
//! state with the session, so a restarted server still tells that text as
//! the agent's (see `agents.rs`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::keys::Key;
use crate::tools::{Party, Refusal};
use dtmcp_core::protocol::Status;

/// The longest an agent's just-submitted line takes its prompt when the
/// logger sees nothing come of it (no region, no new prompt).
const SUBMITTED_MS: u64 = 2_000;

/// Who holds a session while typing.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Holder {
    /// The agent.
    pub actor: String,
    /// The tool typing.
    pub tool: String,
    /// Since when, in ms since the epoch.
    pub since_ms: u64,
    /// Which hold this is (so that an old guard never releases a new hold).
    #[serde(skip)]
    token: u64,
}

/// The last thing an agent typed into a session.
#[derive(Clone, Debug)]
pub struct Typed {
    /// The agent.
    pub actor: String,
    /// What it typed (the last piece).
    pub text: String,
    /// Whether it pressed Enter after it.
    pub submitted: bool,
    /// The prompts the session had shown when it typed.
    pub prompts: u64,
    /// The regions the session had opened when it typed.
    pub regions: u64,
    /// The pid of the shell it typed at (0 when unknown): another shell,
    /// in a new pane or on a new tmux server, is another prompt.
    pub shell_pid: u32,
    /// When.
    pub at: Instant,
}

/// A key an agent pressed last at a shell's prompt that left its line
/// editor waiting (see [`crate::keys::Pending`]).
#[derive(Clone, Debug)]
pub struct Pressed {
    /// The key as the agent named it.
    pub name: String,
    /// What the editor waits for.
    pub pending: crate::keys::Pending,
    /// The prompts the session had shown when it was pressed.
    pub prompts: u64,
    /// The pid of the shell it was pressed at.
    pub shell_pid: u32,
}

/// Whether Enter was pressed after a piece of typed text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enter {
    /// It was: the text was submitted.
    Pressed,
    /// It was not: the text waits at the prompt.
    NotPressed,
}

/// Every session's holder and last agent typing, server-wide.
#[derive(Debug, Default)]
pub struct Holds {
    holders: Mutex<HashMap<String, Holder>>,
    typed: Mutex<HashMap<String, Typed>>,
    pressed: Mutex<HashMap<String, Pressed>>,
    tokens: std::sync::atomic::AtomicU64,
}

/// A session held by one call; dropping it releases the session.
pub struct Hold<'a> {
    holds: &'a Holds,
    session: String,
    token: u64,
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        let mut holders = self.holds.holders.lock().unwrap_or_else(|e| e.into_inner());
        if holders.get(&self.session).is_some_and(|h| h.token == self.token) {
            holders.remove(&self.session);
        }
    }
}

impl Holds {
    /// Holds `session` for `actor`'s `tool`, or says who holds it.
    pub fn take(&self, session: &str, actor: &str, tool: &str) -> Result<Hold<'_>, Box<Refusal>> {
        let mut holders = self.holders.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = holders.get(session) {
            return Err(Box::new(Refusal::Held {
                session: session.to_string(),
                by: Party::agent(&h.actor, actor),
                tool: h.tool.clone(),
                for_ms: crate::config::now_ms().saturating_sub(h.since_ms),
            }));
        }
        let token = self.tokens.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let since_ms = crate::config::now_ms();
        holders.insert(session.to_string(), Holder { actor: actor.into(), tool: tool.into(), since_ms, token });
        Ok(Hold { holds: self, session: session.to_string(), token })
    }

    /// Who holds `session` now, if anyone.
    pub fn holder(&self, session: &str) -> Option<Holder> {
        self.holders.lock().unwrap_or_else(|e| e.into_inner()).get(session).cloned()
    }

    /// Notes that `actor` typed `text` into the pane `session` (its id: a
    /// new session of an old name is another pane) when the logger's state
    /// was `before`, and whether Enter followed it.
    pub fn note_typed(&self, session: &str, actor: &str, text: &str, enter: Enter, before: &Status) {
        let typed = Typed {
            actor: actor.into(),
            text: text.into(),
            submitted: enter == Enter::Pressed,
            prompts: lands_at(before),
            regions: before.mark.regions,
            shell_pid: before.shell.pid,
            at: Instant::now(),
        };
        self.typed.lock().unwrap_or_else(|e| e.into_inner()).insert(session.to_string(), typed);
    }

    /// Notes the keys an agent pressed into the pane `session` (its id),
    /// the logger's state being `after` once they were pressed: the last,
    /// when it leaves the line editor of an integrated shell at its prompt
    /// waiting (for the key that completes a sequence, a search's text, a
    /// count's key); a key that ends such a wait forgets it. Says what
    /// waits, if anything. `submitted` says that the text typed before the
    /// keys held a newline; `reached` that the keys may have reached the
    /// shell (not only a program that ended meanwhile).
    pub fn note_pressed(
        &self,
        session: &str,
        keys: &[(String, Key)],
        submitted: bool,
        reached: bool,
        after: &Status,
    ) -> Option<Pressed> {
        let mut pressed = self.pressed.lock().unwrap_or_else(|e| e.into_inner());
        if submitted || keys.iter().any(|(_, k)| k.ends_pending()) {
            pressed.remove(session);
        }
        let (name, key) = keys.last()?;
        let shell = &after.shell;
        let at_prompt = reached && shell.integrated && shell.at_prompt && !after.eof;
        let p = Pressed {
            name: name.clone(),
            pending: key.leaves_pending().filter(|_| at_prompt)?,
            prompts: after.mark.prompts,
            shell_pid: shell.pid,
        };
        pressed.insert(session.to_string(), p.clone());
        Some(p)
    }

    /// Takes what an agent's last key left waiting at the prompt `status`
    /// shows in the pane `session`, if it is still that prompt.
    pub fn take_pressed(&self, session: &str, status: &Status) -> Option<Pressed> {
        let mut pressed = self.pressed.lock().unwrap_or_else(|e| e.into_inner());
        let p = pressed.remove(session)?;
        let here = p.prompts == status.mark.prompts && p.shell_pid == status.shell.pid && status.shell.at_prompt;
        here.then_some(p)
    }

    /// The last thing an agent typed into `session`.
    pub fn last_typed(&self, session: &str) -> Option<Typed> {
        self.typed.lock().unwrap_or_else(|e| e.into_inner()).get(session).cloned()
    }

    /// When an agent last typed into `session`, if one did.
    pub fn typed_at(&self, session: &str) -> Option<Instant> {
        self.typed.lock().unwrap_or_else(|e| e.into_inner()).get(session).map(|t| t.at)
    }

    /// Forgets what was typed into the pane `session` (it closed).
    pub fn forget(&self, session: &str) {
        self.typed.lock().unwrap_or_else(|e| e.into_inner()).remove(session);
        self.pressed.lock().unwrap_or_else(|e| e.into_inner()).remove(session);
    }
}

/// Why `actor` may not type a line at `session`'s prompt now, if it may
/// not: text someone left there unsubmitted, or a line an agent has just
/// submitted there whose command has not started yet. `attached` is how
/// many clients (people) are attached.
pub fn refusal(session: &str, status: &Status, last: Option<&Typed>, actor: &str, attached: u32) -> Option<Refusal> {
    let same_prompt = |t: &&Typed| at_this_prompt(t, status);
    let pending = status.typed.as_str();
    // Taken until its command starts (a region opens) or the upper bound.
    let not_started = |t: &&Typed| t.regions == status.mark.regions && t.at.elapsed() < ms(SUBMITTED_MS);
    let just = last.filter(same_prompt).filter(|t| t.submitted).filter(not_started);
    if let Some(just) = just.filter(|t| pending.is_empty() || pending.contains(t.text.trim())) {
        let by = Party::agent(&just.actor, actor);
        return Some(Refusal::JustSubmitted { session: session.to_string(), by, text: just.text.clone() });
    }
    if pending.is_empty() {
        return None;
    }
    // Submitted here a while ago and still not started, with a line of the
    // shell's after it: the shell asks about it before it runs it (zsh's
    // `correct`), and keys typed now answer that.
    let held = last.filter(same_prompt).filter(|t| t.submitted && t.regions == status.mark.regions);
    if let Some(t) = held.filter(|t| !t.text.trim().is_empty() && pending.contains(t.text.trim())) {
        let question = pending.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or_default();
        if pending.lines().count() > 1 && !question.ends_with(t.text.trim()) {
            return Some(Refusal::ShellAsks {
                session: session.to_string(),
                by: Party::agent(&t.actor, actor),
                text: t.text.trim().to_string(),
                question: question.to_string(),
            });
        }
    }
    // At a continuation prompt the shell holds a command still being given
    // (an open `if`, a heredoc): the agent whose line last went into it
    // may go on with it; anyone else is refused, naming that agent.
    if let Some(t) = last.filter(|t| continues(t, status)) {
        if t.actor == actor {
            return None;
        }
        let by = Party::agent(&t.actor, actor);
        return Some(Refusal::Unsubmitted { session: session.to_string(), by, text: pending.to_string() });
    }
    let by = match agents_unsubmitted(status, last) {
        Some(t) => Party::agent(&t.actor, actor),
        None if attached > 0 => Party::Person,
        None => Party::Someone,
    };
    Some(Refusal::Unsubmitted { session: session.to_string(), by, text: pending.to_string() })
}

/// The text at `status`'s prompt when it is what the line editor left of
/// terminal answers nobody read (see [`dtmcp_core::answers`]), and no agent's
/// unsubmitted text explains it.
pub fn stray_answer(status: &Status, last: Option<&Typed>) -> Option<String> {
    let shell = &status.shell;
    if !shell.at_prompt || status.eof || !shell.answers.explain(&status.typed, shell.prompts) {
        return None;
    }
    agents_unsubmitted(status, last).is_none().then(|| status.typed.trim().to_string())
}

/// Whether `t` is the last line of the command the shell at `status`'s
/// continuation prompt is still being given: submitted there (the same
/// shell, no primary prompt since), and among the lines it holds.
fn continues(t: &Typed, status: &Status) -> bool {
    let same_shell = t.shell_pid == 0 || t.shell_pid == status.shell.pid;
    status.shell.at_continuation
        && !status.eof
        && same_shell
        && t.submitted
        && t.prompts == status.mark.prompts
        && status.typed.contains(t.text.trim())
}

/// Whether `t` was typed at the prompt `status` shows: the same shell, no
/// prompt since.
fn at_this_prompt(t: &Typed, status: &Status) -> bool {
    let same_shell = t.shell_pid == 0 || t.shell_pid == status.shell.pid;
    t.prompts == status.mark.prompts && same_shell && status.shell.at_prompt && !status.eof
}

/// The count of the prompt that text typed at `before` is at: the one
/// shown, or, while the shell shows none and runs nothing (starting up, or
/// between a command's end and its next prompt), the next one, where the
/// terminal hands over what was typed ahead. A continuation prompt takes
/// it at once. Text typed while a command runs (cat) is that program's,
/// and lands at no prompt.
pub fn lands_at(before: &Status) -> u64 {
    let shell = &before.shell;
    let between = !shell.at_prompt && !shell.at_continuation && shell.open.is_empty();
    before.mark.prompts + u64::from(between)
}

/// The agent's unsubmitted text that the text at `status`'s prompt holds,
/// if the last thing typed was that.
/// The prompt may show only the start of it yet: its echo is on its way
/// (tmux draws before the logger reads), and it is no less the agent's.
fn agents_unsubmitted<'a>(status: &Status, last: Option<&'a Typed>) -> Option<&'a Typed> {
    let pending = status.typed.trim();
    let theirs = |t: &Typed| {
        let text = t.text.trim();
        pending.contains(text) || (!pending.is_empty() && text.starts_with(pending))
    };
    last.filter(|t| at_this_prompt(t, status) && !t.submitted && theirs(t))
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// What a `run` notes just before it types its first line, at `mark`:
/// who typed, and, when the call carries an idempotency key, the key (in
/// the session's logger, before anything is typed: a server that dies
/// after typing leaves it for the key sent again to follow). Done by
/// `run` itself, which has the mark from the status it takes anyway.
pub fn before_typing(
    journal: &crate::agents::journal::Journal,
    session: &str,
    caller: &crate::agents::caller::Caller,
    logger: &crate::session::LoggerClient,
    mark: dtmcp_core::protocol::Mark,
) {
    journal.record_typed(session, caller.actor.as_deref(), crate::tools::ToolName::Run.as_str(), mark.regions);
    if let Some(key) = &caller.key {
        // Best effort, as the typing record: a logger that cannot take it
        // costs only the following of this key after a crash. Not waited
        // for: the note is on the logger's socket before the keys go to
        // tmux, and the logger reads its socket in order.
        let _ = logger.send_typing_note(key, mark);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dtmcp_core::protocol::Mark;
    use dtmcp_core::region::ShellState;

    fn status(typed: &str, prompts: u64) -> Status {
        Status {
            typed: typed.into(),
            mark: Mark { prompts, regions: 5, ..Mark::default() },
            shell: ShellState { at_prompt: true, pid: 77, ..ShellState::default() },
            ..Status::default()
        }
    }

    fn typed(actor: &str, text: &str, submitted: bool, prompts: u64) -> Typed {
        let at = status("", prompts);
        let holds = Holds::default();
        let enter = if submitted { Enter::Pressed } else { Enter::NotPressed };
        holds.note_typed("%1", actor, text, enter, &at);
        holds.last_typed("%1").expect("noted")
    }

    #[test]
    fn a_command_left_open_at_a_continuation_prompt_is_its_agents_to_go_on_with() {
        let mut open = status("if true; then\necho in", 3);
        open.shell.at_prompt = false;
        open.shell.at_continuation = true;
        let mut at = open.clone();
        at.typed.clear();
        let holds = Holds::default();
        holds.note_typed("%1", "a", "echo in", Enter::Pressed, &at);
        let last = holds.last_typed("%1").expect("noted");
        assert_eq!(last.prompts, 3, "a continuation prompt takes the line at once");
        assert!(refusal("t1", &open, Some(&last), "a", 0).is_none(), "its own");
        let why = refusal("t1", &open, Some(&last), "b", 0).expect("another agent's");
        assert!(matches!(&why, Refusal::Unsubmitted { by: Party::Agent(a), .. } if a == "a"), "{why:?}");
        // Lines nobody here typed (a person's) stay refused.
        let theirs = typed("a", "ls", true, 3);
        assert!(matches!(
            refusal("t1", &open, Some(&theirs), "a", 1),
            Some(Refusal::Unsubmitted { by: Party::Person, .. })
        ));
    }

    #[test]
    fn a_line_the_shell_asks_about_takes_no_other_line() {
        let asking = status("gti status\nzsh: correct 'gti' to 'git' [nyae]?", 3);
        let sent = typed("a", "gti status", true, 3);
        let sent = Typed { at: Instant::now() - ms(SUBMITTED_MS + 1), ..sent };
        let why = refusal("t1", &asking, Some(&sent), "a", 0).expect("refused");
        assert!(
            matches!(&why, Refusal::ShellAsks { by: Party::You, question, .. } if question == "zsh: correct 'gti' to 'git' [nyae]?"),
            "{why:?}"
        );
        // Once it ran (a region opened), the text is no question of it.
        let ran = Status { mark: Mark { regions: 6, ..asking.mark }, ..asking.clone() };
        assert!(!matches!(refusal("t1", &ran, Some(&sent), "a", 0), Some(Refusal::ShellAsks { .. })));
    }

    #[test]
    fn a_held_session_names_its_holder_and_is_free_once_released() {
        let holds = Holds::default();
        let hold = holds.take("t1", "a", "run").expect("free");
        let why = holds.take("t1", "b", "run").err().expect("held");
        assert!(
            matches!(why.as_ref(), Refusal::Held { by: Party::Agent(a), tool, .. } if a == "a" && tool == "run"),
            "{why:?}"
        );
        let why = why.to_string();
        assert!(why.contains("agent a") && why.contains("run"), "{why}");
        let own = holds.take("t1", "a", "send").err().expect("held");
        assert!(own.to_string().contains("another call of yours"), "{own}");
        assert!(holds.take("t2", "b", "send").is_ok());
        assert_eq!(holds.holder("t1").map(|h| h.actor), Some("a".into()));
        drop(hold);
        assert!(holds.holder("t1").is_none());
        assert!(holds.take("t1", "b", "run").is_ok());
    }

    #[test]
    fn text_at_the_prompt_is_refused_with_who_typed_it() {
        assert_eq!(refusal("t1", &status("", 3), None, "a", 1), None);
        let person = refusal("t1", &status("rm -rf bu", 3), None, "a", 1).expect("refused");
        assert!(matches!(&person, Refusal::Unsubmitted { by: Party::Person, text, .. } if text == "rm -rf bu"));
        let person = person.to_string();
        assert!(person.contains("a person") && person.contains("`rm -rf bu`"), "{person}");
        let half = typed("b", "echo hal", false, 3);
        let other = refusal("t1", &status("echo hal", 3), Some(&half), "a", 0).expect("refused").to_string();
        assert!(other.contains("agent b"), "{other}");
        let own = refusal("t1", &status("echo hal", 3), Some(&half), "b", 0).expect("refused").to_string();
        assert!(own.contains("you (an earlier send)"), "{own}");
        // Its echo part way: still the agent's.
        let part = refusal("t1", &status("echo h", 3), Some(&half), "a", 1).expect("refused").to_string();
        assert!(part.contains("agent b"), "{part}");
        // Typed while the shell was starting, it lands at the first prompt.
        let starting =
            Status { shell: ShellState { at_prompt: false, pid: 0, ..ShellState::default() }, ..status("", 0) };
        let holds = Holds::default();
        holds.note_typed("%2", "b", "echo hal", Enter::NotPressed, &starting);
        let early = holds.last_typed("%2").expect("noted");
        let first = refusal("t1", &status("echo hal", 1), Some(&early), "a", 1).expect("refused");
        assert!(matches!(first, Refusal::Unsubmitted { by: Party::Agent(_), .. }), "{first:?}");
        // Typed between a command's end and its prompt: the next prompt's.
        let ending =
            Status { shell: ShellState { at_prompt: false, pid: 77, ..ShellState::default() }, ..status("", 3) };
        holds.note_typed("%4", "b", "echo hal", Enter::NotPressed, &ending);
        let ahead = holds.last_typed("%4").expect("noted");
        let next = refusal("t1", &status("echo hal", 4), Some(&ahead), "a", 1).expect("refused");
        assert!(matches!(next, Refusal::Unsubmitted { by: Party::Agent(_), .. }), "{next:?}");
        // A line typed into a program (cat) is the program's: when it ends,
        // the prompt after it is free.
        let open = vec![dtmcp_core::types::RegionId(6)];
        let in_cat =
            Status { shell: ShellState { at_prompt: false, pid: 77, open, ..ShellState::default() }, ..status("", 3) };
        holds.note_typed("%3", "b", "typed by the model", Enter::Pressed, &in_cat);
        let to_cat = holds.last_typed("%3").expect("noted");
        assert_eq!(refusal("t1", &status("", 4), Some(&to_cat), "a", 0), None);
        // An agent's text at an earlier prompt says nothing about this one.
        let old = typed("b", "echo hal", false, 2);
        assert!(
            refusal("t1", &status("echo hal", 3), Some(&old), "a", 1)
                .expect("refused")
                .to_string()
                .contains("a person")
        );
    }

    #[test]
    fn an_unread_terminal_answer_at_the_prompt_is_nobodys_text() {
        let mut junk = status("1;2c", 3);
        junk.shell.prompts = 3;
        assert_eq!(stray_answer(&junk, None), None, "no question was asked");
        junk.shell.answers.asked(dtmcp_core::answers::Queries::DEVICE, 2);
        assert_eq!(stray_answer(&junk, None).as_deref(), Some("1;2c"));
        // An agent that sent those very characters keeps them.
        let sent = typed("b", "1;2c", false, 3);
        assert_eq!(stray_answer(&junk, Some(&sent)), None);
        let person = Status { typed: "ls -l".into(), ..junk.clone() };
        assert_eq!(stray_answer(&person, None), None);
        let running = Status { shell: ShellState { at_prompt: false, ..junk.shell.clone() }, ..junk };
        assert_eq!(stray_answer(&running, None), None);
    }

    #[test]
    fn a_line_just_submitted_takes_the_prompt_for_a_moment() {
        let sent = typed("b", "make", true, 3);
        let why = refusal("t1", &status("", 3), Some(&sent), "a", 0).expect("refused").to_string();
        assert!(why.contains("agent b just submitted `make`"), "{why}");
        let again = refusal("t1", &status("make", 3), Some(&sent), "a", 0).expect("refused");
        assert!(matches!(again, Refusal::JustSubmitted { by: Party::Agent(_), .. }), "{again:?}");
        assert_eq!(refusal("t1", &status("", 4), Some(&sent), "a", 0), None);
        let stale = Typed { at: Instant::now() - ms(SUBMITTED_MS + 1), ..sent.clone() };
        assert_eq!(refusal("t1", &status("", 3), Some(&stale), "a", 0), None);
    }

    #[test]
    fn a_just_submitted_line_frees_the_prompt_once_anything_comes_of_it() {
        let sent = typed("b", "make", true, 3);
        // Its command started: a region opened, though no prompt came yet.
        let started = Status { mark: Mark { regions: 6, ..status("", 3).mark }, ..status("", 3) };
        assert_eq!(refusal("t1", &started, Some(&sent), "a", 0), None);
        // Another shell (a new pane, a new tmux server) at the same count.
        let other = Status { shell: ShellState { pid: 78, ..status("", 3).shell }, ..status("", 3) };
        assert_eq!(refusal("t1", &other, Some(&sent), "a", 0), None);
        // The pane's output ended.
        assert_eq!(refusal("t1", &Status { eof: true, ..status("", 3) }, Some(&sent), "a", 0), None);
    }
}
