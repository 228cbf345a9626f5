//! Terminal answers nobody read, cleared from a prompt before typing: a
//! program asked the terminal a question (a cursor position, colours) and
//! ended before reading the answer, which the shell's line editor then
//! took as typed text. It is nobody's text, so it must neither make a
//! `run` refused as someone's unsubmitted line nor be typed in front of
//! the command (see [`dtmcp_core::answers`]). Lines a job in the
//! background printed after a prompt are nobody's text either: an empty
//! Enter draws a fresh prompt below them, so that the command is not
//! typed on their line, nor labelled with them. And a key an agent
//! pressed last that left the line editor waiting (Escape, ctrl+r) is
//! given up with ctrl+g, so that the command is typed as text.

use std::time::{Duration, Instant};

use crate::session::{LoggerClient, Session};
use crate::tools::{Terminal, ToolError};
use dtmcp_core::protocol::{Status, WaitSpec};

/// How long a terminal's answer may take to reach a fresh prompt, and the
/// quiet after which it has (see [`Terminal::clear_stray_answers`]).
const ANSWER_WAIT_MS: u64 = 300;
const ANSWER_QUIET_MS: u64 = 60;
/// How long clearing such an answer may take to show.
const CLEAR_MS: u64 = 1_000;

/// The prompt after [`Terminal::clear_stray_answers`].
pub(crate) struct Cleared {
    /// The status to go on from.
    pub status: Status,
    /// A note for the reply, when something was cleared.
    pub note: Option<String>,
}

impl Terminal {
    /// Clears what the shell's line editor left at its prompt of terminal
    /// answers nobody read (see [`dtmcp_core::answers`]): it is nobody's text,
    /// so it neither makes the run refused as someone's unsubmitted line
    /// nor gets typed in front of the command.
    pub(crate) async fn clear_stray_answers(
        &self,
        s: &Session,
        logger: &mut LoggerClient,
        mut status: Status,
    ) -> Result<Cleared, ToolError> {
        if !status.shell.answers.due(status.shell.prompts) || !status.shell.at_prompt {
            return Ok(Cleared { status, note: None });
        }
        if status.typed.is_empty() {
            // The output asked just before this prompt: the answer may
            // still be on its way to it.
            status = settled(logger, &status).await?;
        }
        let last = self.last_typed(s);
        let Some(text) = crate::tools::typing::holds::stray_answer(&status, last.as_ref()) else {
            return Ok(Cleared { status, note: None });
        };
        let tmux = &self.sessions().tmux;
        let pane = s.pane.pane_id.as_str();
        for key in ["C-e", "C-u"] {
            tmux.send_key(pane, key).await?;
        }
        let now = until_shown(logger, |now| now.typed.is_empty()).await?;
        // Answers the terminal driver echoed before the line editor took
        // over sit in front of the prompt, where the editor does not know
        // of them: its redraw after the clearing may wipe the prompt, and
        // the command would be typed beside them. An empty Enter puts a
        // fresh prompt on a line of its own. (Not cleared in time: the
        // refusal that follows says what is there.)
        let now = match now.typed.is_empty() {
            true => self.fresh_prompt(s, logger, now).await?,
            false => now,
        };
        let note = now.typed.is_empty().then(|| {
            format!(
                "(`{text}` at the prompt was the terminal's answer to a question in the last command's \
                 output, which nothing read; it was cleared before typing)"
            )
        });
        Ok(Cleared { status: now, note })
    }

    /// Cancels with ctrl+g what an agent's last key left the shell's line
    /// editor waiting for at this prompt (the rest of a key sequence, a
    /// history search's text, a count's key; see [`crate::keys::Pending`]),
    /// so that the command is typed as text: after ctrl+r, `ls` and Enter
    /// would run the last line holding `ls`. ctrl+g gives up each of
    /// them in readline and zle alike (after Escape it makes alt+ctrl+g,
    /// which both bind to the same).
    pub(crate) async fn cancel_pending_keys(
        &self,
        s: &Session,
        logger: &mut LoggerClient,
        status: Status,
    ) -> Result<Cleared, ToolError> {
        let pane = s.pane.pane_id.as_str();
        let Some(p) = self.inner.holds.take_pressed(pane, &status) else {
            return Ok(Cleared { status, note: None });
        };
        self.sessions().tmux.send_key(pane, "C-g").await?;
        // What ctrl+g shows differs: readline rings the bell, or redraws a
        // search's line as the prompt; zle may give up the line and draw a
        // new prompt. The look waits for it to settle, so that the command
        // is typed at the prompt shown last and its wait starts there.
        let after = settled(logger, &status).await?;
        let now = match after.typed.is_empty() {
            true => after,
            false => until_shown(logger, |now| now.typed.is_empty()).await?,
        };
        let note = format!(
            "({} had left the shell's line editor {}: ctrl+g cancelled that before typing)",
            p.name,
            p.pending.words()
        );
        Ok(Cleared { status: now, note: Some(note) })
    }

    /// Presses Enter at a prompt whose line a job in the background wrote
    /// on (nothing typed there: see `Terminal::output_at_prompt`), and
    /// waits, for [`CLEAR_MS`] at most, for the fresh prompt it draws; the
    /// status to go on from.
    pub(crate) async fn fresh_prompt(
        &self,
        s: &Session,
        logger: &mut LoggerClient,
        status: Status,
    ) -> Result<Status, ToolError> {
        self.sessions().tmux.send_enter(s.pane.pane_id.as_str()).await?;
        // An integrated shell counts its prompts; a plain one shows
        // nothing typed after output that came since.
        until_shown(logger, |now| match status.shell.integrated {
            true => now.shell.prompts > status.shell.prompts && now.shell.at_prompt,
            false => now.mark.raw > status.mark.raw && now.typed.trim().is_empty(),
        })
        .await
    }
}

/// The logger's status once output after `status` has come and gone
/// quiet for [`ANSWER_QUIET_MS`], or after [`ANSWER_WAIT_MS`] at most.
async fn settled(logger: &mut LoggerClient, status: &Status) -> Result<Status, ToolError> {
    let spec = WaitSpec {
        after: status.mark,
        settle_ms: Some(ANSWER_QUIET_MS),
        timeout_ms: ANSWER_WAIT_MS,
        ..WaitSpec::default()
    };
    Ok(logger.wait(spec).await?.1)
}

/// The logger's status once `shown` holds of it, or as it is after
/// [`CLEAR_MS`]: what keys pressed at a prompt led to.
async fn until_shown(logger: &mut LoggerClient, shown: impl Fn(&Status) -> bool) -> Result<Status, ToolError> {
    let deadline = Instant::now() + Duration::from_millis(CLEAR_MS);
    loop {
        let now = logger.status().await?;
        if shown(&now) || Instant::now() >= deadline {
            return Ok(now);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
