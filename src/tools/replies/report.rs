//! The reply about a command that was waited for: a headline (how it ended,
//! or why the wait stopped), what the foreground job does, its output
//! shaped (whole, head and tail with a summary of the middle, or as `show`,
//! `last_lines` and `save_to` ask), and what to do about a command that
//! still runs. `run`, `wait`, `expect` and a replayed `run` all reply so,
//! and the reply carries the facts its text was made from.

use std::fmt::Write;

use crate::session::{LoggerClient, Session};
use crate::tools::ToolError;
use crate::tools::reading::lines::{fetch, region_lines};
use crate::tools::replies::output::{self, Plan};
use crate::tools::replies::reply::{Facts, Outcome, Reply};
use crate::tools::replies::shape::Shape;
use crate::tools::typing::target;
use dtmcp_core::protocol::{Status, WaitReason};
use dtmcp_core::region::{Region, RegionKind};
use dtmcp_core::types::LineNo;

/// Where a wait for a command stopped.
pub(crate) struct Waited<'a> {
    /// The logger's status when it stopped.
    pub status: &'a Status,
    /// Why it stopped.
    pub reason: &'a WaitReason,
    /// The command's region, once it has one.
    pub region: Option<&'a Region>,
    /// The line the command was typed on: without a region, its output is
    /// what follows.
    pub typed_on: LineNo,
    /// The last line of the command's output an earlier reply to this
    /// agent showed while it ran: the text goes on after it.
    pub seen: Option<LineNo>,
}

/// The reply for a finished (or timed-out) command; `note`, a caller's own
/// word on the outcome (expect's), stands in for the headline.
pub(crate) async fn describe(
    s: &Session,
    logger: &mut LoggerClient,
    waited: &Waited<'_>,
    shape: &Shape,
    note: Option<&str>,
) -> Result<Reply, ToolError> {
    let Waited { status, reason, region, typed_on, seen } = *waited;
    // The shell, or a program, waits for the rest of what it was given.
    let continues = matches!((reason, region), (WaitReason::Prompt, None) if status.shell.at_continuation)
        || program_continues(s, waited);
    let mut facts = Facts {
        region: region.map(|r| r.id),
        outcome: match continues {
            true => Outcome::Waiting,
            false => Outcome::of(reason, region),
        },
        continues,
        preface: note.is_some(),
        pipeline: region.map(|r| r.pipestatus.clone()).unwrap_or_default(),
        ..Facts::default()
    };
    // Where the wait ended at a prompt, a shell that has just drawn it is
    // given a moment to block reading the terminal; a command still running
    // is shown as it is.
    let job = match shows_job(reason, region) {
        true if at_a_prompt(reason, region) => Some(target::settled_job(target::pane(s)).await),
        true => Some(target::job(s)),
        false => None,
    };
    // A shell running a script (`bash build.sh` at its `read`) shows no
    // shell's prompt.
    let shell = job.as_ref().is_some_and(|j| j.as_ref().is_ok_and(dtmcp_core::procs::Job::shell_for_a_person));
    let back = back_at_shell(s, waited, shell);
    // A program that answered and waits at its prompt again is named in
    // the headline: a job line would only say again that it waits.
    let asker = job.as_ref().and_then(|j| j.as_ref().ok()).filter(|j| plainly_waiting(j)).map(|j| j.comm.as_str());
    let unmarked = job.as_ref().and_then(|j| j.as_ref().ok()).and_then(|j| unmarked_prompt(s, waited, j));
    let (mut out, folded) = match (note, unmarked) {
        (Some(n), _) => (format!("{n}\n"), false),
        (None, Some(line)) => {
            facts.outcome = Outcome::Ended { exit: None };
            (line, true)
        }
        (None, None) => headline(s, waited, back, asker),
    };
    // Back at a shell's prompt, the headline says what the job does.
    if let Some(job) = job.filter(|_| !back && !folded) {
        let line = job.map_or_else(|e| format!("(could not tell what the job does: {e})"), |j| j.line());
        let _ = writeln!(out, "{line}");
    }
    let (first, last) = match region {
        Some(r) => region_lines(r, status),
        None => (typed_on.next(), crate::tools::reading::lines::last_line(status)),
    };
    facts.lines = (last >= first).then_some((first, last));
    // Lines before the unfinished one are on disk; that one only the logger has.
    let committed = LineNo(last.0.min(status.mark.line.0.saturating_sub(1)));
    let unfinished = match last >= status.mark.line {
        true => fetch(logger, status, status.mark.line, status.mark.line, region).await?,
        false => Vec::new(),
    };
    if let Some(note) = shape.save(&s.dir, first, committed, unfinished.first().map(String::as_str))? {
        let _ = writeln!(out, "{note}");
    }
    if shape.replaces_clipping() {
        out.push_str(&shape.render(&s.dir, first, committed)?);
        out.push_str(&output::plain(&unfinished));
        return Ok(Reply { text: finish(out, s, reason, region), facts });
    }
    let hint = |a: u64, b: u64| match region {
        Some(r) => format!("read session={} region={} (or from_line={a} to_line={b})", s.name, r.id),
        None => format!("read session={} from_line={a} to_line={b}", s.name),
    };
    facts.shown_through = Some(committed).filter(|&c| c >= first);
    // What an earlier reply showed this agent of the running command is
    // not shown again.
    let whole = (first, last);
    let first = match seen.filter(|&t| t >= first) {
        Some(t) => {
            let again = format!("read session={} from_line={first} to_line={t}", s.name);
            let _ = writeln!(out, "(lines {first}-{t} were in an earlier reply; {again} shows them again)");
            if t >= last {
                out.push_str("(no new output)\n");
                facts.shown_through = Some(t);
                return Ok(Reply { text: finish(out, s, reason, region), facts });
            }
            t.next()
        }
        None => first,
    };
    match output::plan(first, last) {
        Plan::Empty => out.push_str("(no output)\n"),
        Plan::Whole(a, b) => {
            let lines = fetch(logger, status, a, b, region).await?;
            out.push_str(&output::plain(&lines));
        }
        Plan::Clipped { head, tail } => {
            let h = fetch(logger, status, head.0, head.1, region).await?;
            let t = fetch(logger, status, tail.0, tail.1, region).await?;
            let gap = head.1.next()..=LineNo(tail.0.0 - 1);
            out.push_str(&crate::tools::replies::shape::summary(&s.dir, *gap.start(), *gap.end())?);
            let _ =
                writeln!(out, "{} lines of output (lines {first}-{last}); first and last shown:", last.0 - first.0 + 1);
            out.push_str(&output::clipped((head.0, &h), (tail.0, &t), &hint(head.1.0 + 1, tail.0.0 - 1)));
            facts.clipped = Some(gap);
            // A finished region that was clipped is the one most likely to be
            // read again: its file is written now, for grep and less.
            if let Some(r) = region.filter(|r| r.end.is_some()) {
                let dir = s.dir.clone();
                let r = r.clone();
                let note = tokio::task::spawn_blocking(move || {
                    crate::tools::reading::lines::clipped_region_note(&dir, &r, whole)
                })
                .await
                .unwrap_or_default();
                out.push_str(&note);
            }
        }
    }
    Ok(Reply { text: finish(out, s, reason, region), facts })
}

/// Ends a reply with what to do about a command that still runs.
fn finish(mut out: String, s: &Session, reason: &WaitReason, region: Option<&Region>) -> String {
    let running = region.is_some_and(|r| r.end.is_none());
    if matches!(reason, WaitReason::Timeout) || (running && matches!(reason, WaitReason::Matched(_))) {
        let _ = writeln!(out, "It keeps running: call wait session={} to keep waiting.", s.name);
    }
    out
}

/// Whether the reply says what the foreground job does: while a command
/// still runs or waits, and after a line typed into a program.
fn shows_job(reason: &WaitReason, region: Option<&Region>) -> bool {
    let ended = region.is_some_and(|r| r.end.is_some());
    at_a_prompt(reason, region)
        || matches!(reason, WaitReason::Timeout)
        || (matches!(reason, WaitReason::Matched(_)) && !ended)
}

/// Whether the wait for a command ended at a prompt: a program's (or a
/// shell's inside), or the one a line typed into a program came back to.
fn at_a_prompt(reason: &WaitReason, region: Option<&Region>) -> bool {
    let waits = matches!(reason, WaitReason::Prompt) && region.is_some();
    waits || typed_line_ended(reason, region)
}

/// Whether the wait ended with the input region of a line typed into a
/// program.
fn typed_line_ended(reason: &WaitReason, region: Option<&Region>) -> bool {
    matches!(reason, WaitReason::RegionEnded(_)) && region.is_some_and(|r| r.kind == RegionKind::Input)
}

/// Whether a line typed into a program ended back at a shell's prompt: the
/// program (or the line, in a shell without the integration) ended.
/// `shell` says the foreground job is a shell.
fn back_at_shell(s: &Session, waited: &Waited<'_>, shell: bool) -> bool {
    let Waited { status, reason, region, .. } = *waited;
    let integrated = s.meta.integrated && status.shell.at_prompt;
    typed_line_ended(reason, region) && (integrated || (shell && !status.current_text.trim_end().is_empty()))
}

/// The headline for a command whose own shell is back at a prompt that
/// came without its marker: the command replaced the prompt hook (set
/// PROMPT_COMMAND or the prompt afresh, as sourcing a bashrc does), so
/// its end and status were never told. bash puts the hook back itself
/// before the next command's prompt.
fn unmarked_prompt(s: &Session, waited: &Waited<'_>, job: &dtmcp_core::procs::Job) -> Option<String> {
    let Waited { status, reason, region, .. } = *waited;
    let r = region.filter(|r| r.kind != RegionKind::Input && r.end.is_none())?;
    let prompt = status.current_text.trim_end();
    let own = u32::try_from(job.pgid).is_ok_and(|pgid| pgid == r.pid);
    // bash reads its command line with the line editor, and a question
    // of its own (`read`) without, so the two are told apart; zsh asks its
    // questions (`rm *`) in the line editor too.
    // The reads of /proc and the terminal come last, when the rest holds.
    let at_prompt = || {
        job.activity == dtmcp_core::procs::Activity::WaitingForInput
            && job.comm == "bash"
            && job.shell_for_a_person()
            && dtmcp_core::procs::line_editing(&s.pane.pane_tty) == Some(true)
    };
    if !(s.meta.integrated && matches!(reason, WaitReason::Prompt) && own && !prompt.is_empty() && at_prompt()) {
        return None;
    }
    Some(format!(
        "back at the shell's prompt `{prompt}` · exit status unknown: the prompt came without its marker, as when a command sets PROMPT_COMMAND or the prompt afresh (sourcing a bashrc does); the next command puts it back · region {}\n",
        r.id
    ))
}

/// Whether a line typed into a program ended at its continuation prompt
/// (python's `...`): it waits for the rest of the statement.
fn program_continues(s: &Session, waited: &Waited<'_>) -> bool {
    let Waited { status, reason, region, .. } = *waited;
    matches!((reason, region), (WaitReason::RegionEnded(_), Some(r)) if r.kind == RegionKind::Input)
        && !(s.meta.integrated && status.shell.at_prompt)
        && dtmcp_core::region::continues_a_statement(status.current_text.trim_end())
}

/// How the statement a program's continuation prompt `prompt` waits on
/// is ended, where that is known: an empty line in python and ipython,
/// a `;` in the SQL shells.
fn ends_a_statement(prompt: &str) -> &'static str {
    let prompt = prompt.trim();
    if prompt == "..." {
        // python's and node's alike.
        " (in python an empty line ends a block: run command=\"\"; in node, .break drops the statement)"
    } else if prompt == "...:" {
        " (in ipython an empty line ends a block: run command=\"\")"
    } else if prompt == "...>" || prompt == "->" || prompt.ends_with("-#") || prompt.ends_with("(#") {
        " (a `;` ends it)"
    } else {
        ""
    }
}

/// What a yes/no question at `prompt` takes, where its prompt says
/// (`(y or [n])`, `[Y/n]`, `(yes/no/[fingerprint])?`): a command line
/// typed there is read as a wrong answer, and it asks again.
pub(crate) fn answers_taken(prompt: &str) -> &'static str {
    match choices(prompt).iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["yes", "no", ..] => " (a yes/no question: it takes yes or no, spelled out)",
        ["yn"] => " (a yes/no question: it takes one key, y or n)",
        ["nyae"] => {
            " (zsh's correction: one key, y runs the corrected line, n the line as typed, a drops it, e edits it)"
        }
        [y, n] if *y == "y" && *n == "n" => {
            " (a yes/no question: it takes y or n; Enter alone takes the bracketed default)"
        }
        _ => "",
    }
}

/// Whether the question at `prompt` reads one key, not a line (zsh's
/// `[yn]` and `[nyae]`): a line typed there answers with its first
/// character, and the rest goes to whatever reads next.
pub(crate) fn reads_one_key(prompt: &str) -> bool {
    matches!(choices(prompt).as_slice(), [c] if c == "yn" || c == "nyae")
}

/// The choices in the last bracketed group that ends `prompt`, lowercased
/// (`(y or [n])` gives y and n).
fn choices(prompt: &str) -> Vec<String> {
    let p = prompt.trim_end().trim_end_matches([':', '?', ' ']).to_ascii_lowercase();
    // The last group, whichever brackets close it: `(y or [n])` is one.
    let opener = match p.chars().last() {
        Some(')') => '(',
        Some(']') => '[',
        _ => return Vec::new(),
    };
    let Some(open) = p.rfind(opener) else { return Vec::new() };
    p[open..]
        .split(['(', ')', '[', ']', '/', ' '])
        .filter(|w| !w.is_empty() && *w != "or")
        .map(str::to_string)
        .collect()
}

/// Whether `job` waits for input here, at no password prompt: all its
/// job line would say.
fn plainly_waiting(job: &dtmcp_core::procs::Job) -> bool {
    job.activity == dtmcp_core::procs::Activity::WaitingForInput
        && !job.password
        && job.place.host.is_none()
        && job.place.user.is_none()
}

/// The reply's first line; `back` says a typed line ended back at a
/// shell's prompt (see [`back_at_shell`]). `asker` is the program waiting
/// at its prompt, named where a line it answered brought that prompt back;
/// the flag says it was (its job line is then left out).
fn headline(s: &Session, waited: &Waited<'_>, back: bool, asker: Option<&str>) -> (String, bool) {
    let Waited { status, reason, region, .. } = *waited;
    let mut named = false;
    let mut id = region.map(|r| format!(" · region {}", r.id)).unwrap_or_default();
    // A command run by a shell inside the session's own (over ssh, in a
    // container) says where, as region lists do.
    if let Some(r) = region.filter(|r| dtmcp_core::region::tagged_with_host(r, &s.meta.host)) {
        let _ = write!(id, " · on {}", r.host);
    }
    let prompt = status.current_text.trim_end();
    let line = match (reason, region) {
        (WaitReason::RegionEnded(_), Some(r)) if r.kind == RegionKind::Input => {
            let ms = r.ended_ms.unwrap_or(r.started_ms).saturating_sub(r.started_ms);
            match prompt.is_empty() {
                _ if s.meta.integrated && status.shell.at_prompt => {
                    format!("the program ended; back at the shell's prompt · {}{id}\n", duration(ms))
                }
                true => format!("output settled · {}{id}\n", duration(ms)),
                false if back => format!(
                    "back at the shell's prompt `{prompt}` · exit status unknown (this shell has no shell integration) · {}{id}\n",
                    duration(ms)
                ),
                false if program_continues(s, waited) => format!(
                    "at the program's continuation prompt `{prompt}`: it waits for the rest of the statement{} · {}{id}\n",
                    ends_a_statement(prompt),
                    duration(ms)
                ),
                false => {
                    named = asker.is_some();
                    let waits =
                        asker.map_or("at the program's prompt".to_string(), |p| format!("`{p}` waits at its prompt"));
                    format!("answered; {waits} `{prompt}` · {}{id}\n", duration(ms))
                }
            }
        }
        (WaitReason::RegionEnded(_), Some(r)) => {
            let exit = r.exit.map_or("finished (exit status unknown)".to_string(), dtmcp_core::exit::words);
            let pipe = if r.pipestatus.len() > 1 {
                format!(" (pipeline: {})", r.pipestatus.iter().map(i32::to_string).collect::<Vec<_>>().join(" "))
            } else {
                String::new()
            };
            let ms = r.ended_ms.unwrap_or(r.started_ms).saturating_sub(r.started_ms);
            format!("{exit}{pipe} · {}{id}\n", duration(ms))
        }
        (WaitReason::Prompt, Some(_)) if !prompt.is_empty() => {
            format!("waiting for input at `{prompt}`{}{id}\n", answers_taken(prompt))
        }
        (WaitReason::Prompt, Some(_)) => {
            format!("waiting for input: it reads the terminal, and no prompt shows{id}\n")
        }
        (WaitReason::Prompt, None) if status.shell.at_continuation => {
            format!("the shell waits for the rest of the command at its continuation prompt `{prompt}`\n")
        }
        (WaitReason::Prompt, None) => {
            "back at the prompt; nothing ran (an empty line, a comment, or a syntax error)\n".to_string()
        }
        (WaitReason::Eof, _) => format!("the session {} ended (its pane closed){id}\n", s.name),
        (WaitReason::Timeout, _) => format!("still running{id}; output so far:\n"),
        (WaitReason::Matched(line), Some(r)) if r.end.is_some() => {
            let then = match r.kind {
                RegionKind::Input => "and the program answered the line right after".to_string(),
                _ => {
                    let exit = r.exit.map_or("exit status unknown".to_string(), dtmcp_core::exit::words);
                    format!("and the command ended right after: {exit}")
                }
            };
            let ms = r.ended_ms.unwrap_or(r.started_ms).saturating_sub(r.started_ms);
            format!("`until` matched on line {line}, {then} · {}{id}\n", duration(ms))
        }
        (WaitReason::Matched(line), _) => format!("`until` matched on line {line}{id}\n"),
        _ => format!("done{id}\n"),
    };
    (line, named)
}

fn duration(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms} ms"),
        1000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yes_no_questions_say_what_they_take() {
        let yn = " (a yes/no question: it takes y or n; Enter alone takes the bracketed default)";
        assert_eq!(answers_taken("Make breakpoint pending on future shared library load? (y or [n])"), yn);
        assert_eq!(answers_taken("Do you want to continue? [Y/n]"), yn);
        assert_eq!(answers_taken("Proceed (y/n)? "), yn);
        let yes = " (a yes/no question: it takes yes or no, spelled out)";
        assert_eq!(answers_taken("Are you sure you want to continue connecting (yes/no/[fingerprint])?"), yes);
        assert_eq!(
            answers_taken("zsh: sure you want to delete all 2 files in /tmp/x [yn]?"),
            " (a yes/no question: it takes one key, y or n)"
        );
        assert!(answers_taken("zsh: correct 'gti' to 'git' [nyae]?").contains("n the line as typed"));
        assert_eq!(answers_taken(">>>"), "");
        assert_eq!(answers_taken("Name [default]:"), "");
        assert_eq!(answers_taken("Select (1/2/3):"), "");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(12), "12 ms");
        assert_eq!(duration(1500), "1.5 s");
        assert_eq!(duration(125_000), "2m05s");
    }
}
