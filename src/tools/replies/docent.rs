//! The facts behind the docent's notes, gathered after a `run`, `wait`,
//! `send` or `expect` has composed its reply: the reply's own facts (see
//! [`Reply`]), and, unless those say all, what holds the terminal
//! (`/proc`), what the logger knows of the shell, what tmux shows (the
//! alternate screen, attached clients). The notes themselves are chosen by
//! the pure [`crate::docent::notes::notes`]; this only looks.

use std::future::Future;
use std::time::Instant;

use rmcp::model::CallToolResult;

use crate::docent::notes::{self, Situation};
use crate::tools::ToolError;
use crate::tools::replies::reply::{Facts, Outcome, Reply};
use crate::tools::{Terminal, ToolName};
use dtmcp_core::procs::{self, Activity};

impl Terminal {
    /// Like [`Terminal::call`], for the tools that drive a session: a reply
    /// that succeeded ends with the notes that apply and were not yet given
    /// to this agent in this session. `command` is the line the call typed.
    pub(crate) fn call_noted<'a, F>(
        &'a self,
        tool: ToolName,
        session: &'a str,
        command: Option<&'a str>,
        body: F,
    ) -> impl Future<Output = CallToolResult> + 'a
    where
        F: Future<Output = Result<Reply, ToolError>> + 'a,
    {
        // Boxed before anything awaits (see [`Terminal::call`]).
        let body = Box::pin(body);
        async move {
            let started = Instant::now();
            let finished = self.finished_before(tool, Some(session)).await;
            let (mut outcome, early) = crate::tools::replies::secrets::counting_early(body).await;
            if let Ok(reply) = &mut outcome
                && matches!(tool, ToolName::Run | ToolName::Wait | ToolName::Expect)
            {
                self.tell_ports(session, reply).await;
            }
            if let Ok(reply) = &mut outcome {
                for note in self.notes_for(tool.as_str(), session, command, reply).await {
                    reply.push_str(&note);
                    reply.push_str("\n");
                }
            }
            self.finish_call(tool, Some(session), started, outcome, early, finished)
        }
    }

    /// The fresh notes for a reply `reply` of `tool` in session `name`.
    /// The agent's state in the session records them as given, the time
    /// of this reply, and the commands it leaves running.
    async fn notes_for(&self, tool: &str, name: &str, command: Option<&str>, reply: &Reply) -> Vec<String> {
        let Some(before) = self.agent_state(name).await else { return Vec::new() };
        let now_s = crate::config::now_ms() / 1000;
        // The fast path (`run` of `true`) pays for no look at tmux or /proc.
        if let Some(situation) = told_by_reply(reply, name, tool, command) {
            let region = situation.region;
            let all = notes::notes(&situation);
            return self.given(name, now_s, all, |running| running.retain(|&id| Some(id) != region)).await;
        }
        // A reply about a command still running needs no settled look.
        let settle = !matches!(reply.facts.outcome, Outcome::Running | Outcome::Matched);
        let Some((situation, open)) = self.look(name, before.last_reply_s, settle).await else {
            return Vec::new();
        };
        let all = notes::notes(&situation.as_situation(name, tool, command, &reply.facts));
        self.watch_running(name, &open);
        self.given(name, now_s, all, |running| *running = open).await
    }

    /// Records the reply at `now_s` in the agent's state, with `running`
    /// changed as the reply says, and returns the notes of `all` it was not
    /// given before.
    async fn given(
        &self,
        name: &str,
        now_s: u64,
        all: Vec<notes::Note>,
        running: impl FnOnce(&mut Vec<u64>),
    ) -> Vec<String> {
        let fresh = self
            .update_agent(name, |state| {
                state.last_reply_s = now_s;
                running(&mut state.running);
                notes::fresh(state, all)
            })
            .await;
        fresh.unwrap_or_default().into_iter().map(|n| n.text).collect()
    }

    /// What the session shows after a reply that did not end with a
    /// finished command: the facts for its notes, and the regions running
    /// now. `last_reply_s` is when the agent last got a reply (0: never).
    /// With `settle`, a shell with nothing running that is on a CPU is
    /// looked at again for a moment (see [`crate::tools::typing::target::settled_job`]).
    async fn look(&self, name: &str, last_reply_s: u64, settle: bool) -> Option<(Looked, Vec<u64>)> {
        let s = self.sessions().resolve_quiet(name).await.ok()?;
        let mut logger = s.logger().await.ok()?;
        let status = logger.status().await.ok()?;
        if status.eof {
            return None;
        }
        let open = crate::tools::memory::running_regions(&status);
        let pane = crate::tools::typing::target::pane(&s);
        // A shell with nothing running may have just drawn its prompt and
        // not yet blocked reading the terminal: it gets a moment to settle.
        let (job, status) = match settle && status.shell.open.is_empty() {
            true => {
                // A command that has just ended: the logger sees the
                // prompt come (or its grace run out) before the look.
                let status = crate::tools::typing::target::settled(&s, &mut logger, status).await.ok()?;
                (crate::tools::typing::target::settled_job(pane).await.ok(), status)
            }
            false => (procs::job(pane).ok(), status),
        };
        let shown = self.sessions().tmux.display(s.pane.pane_id.as_str(), "#{alternate_on} #{session_attached}").await;
        let shown = shown.unwrap_or_default();
        let mut fields = shown.split_whitespace();
        // On the alternate screen, or a program that draws on the whole
        // screen without it (top in some terminals, `less -X`).
        let keys_only = job.as_ref().is_some_and(|j| procs::KEYS_ONLY.contains(&j.reader.as_str()));
        let fullscreen = fields.next() == Some("1") || keys_only;
        let attached = fields.next().and_then(|n| n.parse().ok()).unwrap_or(0);
        let person_typed = attached > 0 && last_reply_s > 0 && self.person_typed_since(name, last_reply_s).await;
        let waiting = job.as_ref().is_some_and(|j| j.activity == Activity::WaitingForInput);
        let is_shell = job.as_ref().is_some_and(procs::Job::shell_holds);
        let integrated_prompt = status.shell.integrated && (status.shell.at_prompt || status.shell.at_continuation);
        // A shell reading the terminal is at a prompt without our
        // integration, unless it is the pane's own integrated shell inside
        // one of its commands (a builtin that reads, such as `read`; after
        // an `exec` the program's name differs) or a shell running a script.
        let started = s.meta.command.first().map(|p| p.rsplit('/').next().unwrap_or(p).trim_start_matches('-'));
        let builtin_reads = job.as_ref().is_some_and(|j| {
            j.own_shell && status.shell.integrated && !status.shell.open.is_empty() && started == Some(j.comm.as_str())
        });
        let bare_prompt = is_shell
            && waiting
            && !integrated_prompt
            && !builtin_reads
            && job.as_ref().is_some_and(procs::Job::shell_for_a_person);
        let place = job.as_ref().map(|j| &j.place);
        // Where the integrated shell itself says it is, when no carrier in
        // the process chain tells (an integrated shell on another host
        // reached by a hop the chain cannot see, or `su` there).
        let (marked_host, marked_user) = marked_place(&s.meta.host, &status.shell);
        let looked = Looked {
            region: status.last_region.as_ref().map(|r| r.id.0),
            // An editor a command started is what takes the keys (`vi`
            // under `git commit`); a pager is named beside its command.
            program: job.as_ref().filter(|_| !is_shell).map(|j| {
                let editor = j.keys_reader().filter(|r| !procs::PAGERS.contains(r));
                editor.unwrap_or(&j.comm).to_string()
            }),
            pager: job.as_ref().filter(|j| procs::PAGERS.contains(&j.reader.as_str())).map(|j| j.reader.clone()),
            waiting,
            password: job.as_ref().is_some_and(|j| j.password),
            prompt: Some(status.current_text.clone()).filter(|_| waiting),
            running: !status.shell.open.is_empty() && !waiting,
            fullscreen,
            plain_shell: bare_prompt,
            host: place.and_then(|p| p.host.clone()).or(marked_host.map(str::to_string)),
            user: place.and_then(|p| p.user.clone()).or(marked_user.map(str::to_string)),
            carrier: place.and_then(|p| p.carrier.clone()),
            place_known: place.is_some(),
            attached,
            person_typed,
        };
        Some((looked, open))
    }

    /// Whether a client attached to session `name` pressed keys after
    /// `since` (seconds since the epoch). tmux stamps a client's activity
    /// when it attaches and at each key; activity later than the client's
    /// creation is keys.
    async fn person_typed_since(&self, name: &str, since: u64) -> bool {
        let target = format!("={name}");
        let args = ["list-clients", "-t", target.as_str(), "-F", "#{client_created} #{client_activity}"];
        let Ok(out) = self.sessions().tmux.run(&args).await else { return false };
        out.lines().any(|line| {
            let mut f = line.split_whitespace().map(|n| n.parse::<u64>().unwrap_or(0));
            let (created, active) = (f.next().unwrap_or(0), f.next().unwrap_or(0));
            active > created && active > since
        })
    }
}

/// The facts [`Terminal::look`] gathered, owned so that they outlive the
/// connections they came from.
struct Looked {
    region: Option<u64>,
    program: Option<String>,
    pager: Option<String>,
    waiting: bool,
    password: bool,
    prompt: Option<String>,
    running: bool,
    fullscreen: bool,
    plain_shell: bool,
    host: Option<String>,
    carrier: Option<String>,
    user: Option<String>,
    place_known: bool,
    attached: u32,
    person_typed: bool,
}

impl Looked {
    fn as_situation<'a>(
        &'a self,
        session: &'a str,
        tool: &'a str,
        command: Option<&'a str>,
        facts: &Facts,
    ) -> Situation<'a> {
        Situation {
            session,
            tool,
            command,
            region: self.region,
            program: self.program.as_deref(),
            pager: self.pager.as_deref(),
            waiting: self.waiting,
            password: self.password,
            prompt: self.prompt.as_deref(),
            running: self.running,
            fullscreen: self.fullscreen,
            plain_shell: self.plain_shell,
            host: self.host.as_deref(),
            carrier: self.carrier.as_deref(),
            user: self.user.as_deref(),
            place_known: self.place_known,
            attached: self.attached,
            person_typed: self.person_typed,
            clipped: facts.clipped.is_some(),
            alike: crate::agents::caller::Caller::current().alike,
        }
    }
}

/// The host and user the innermost integrated shell reported, each only
/// when it differs from the session's own (`home`, and the user this
/// server runs as).
fn marked_place<'a>(home: &str, shell: &'a dtmcp_core::region::ShellState) -> (Option<&'a str>, Option<&'a str>) {
    if !shell.integrated {
        return (None, None);
    }
    let host = Some(shell.host.as_str()).filter(|h| !h.is_empty() && *h != home);
    let me = crate::config::user_name();
    let user = Some(shell.user.as_str()).filter(|u| !u.is_empty() && me.as_deref().is_some_and(|me| me != *u));
    (host, user)
}

/// The situation of `reply` when its facts alone tell it: a command that
/// finished with an exit status, reported alone, has left its shell at the
/// prompt, and what the reply and the command line say is all there is to
/// note. `None`: the session must be looked at.
fn told_by_reply<'a>(
    reply: &Reply,
    session: &'a str,
    tool: &'a str,
    command: Option<&'a str>,
) -> Option<Situation<'a>> {
    reply.finished_alone().then(|| Situation {
        session,
        tool,
        command,
        clipped: reply.facts.clipped.is_some(),
        region: reply.facts.region.map(|r| r.0),
        alike: crate::agents::caller::Caller::current().alike,
        ..Situation::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::replies::reply::Outcome;
    use dtmcp_core::types::{LineNo, RegionId};

    fn finished(exit: Option<i32>, clipped: bool) -> Reply {
        let facts = Facts {
            region: Some(RegionId(12)),
            outcome: Outcome::Ended { exit },
            clipped: clipped.then_some(LineNo(17)..=LineNo(568)),
            ..Facts::default()
        };
        Reply { text: "exit 0 · 6 ms · region 12\n".into(), facts }
    }

    #[test]
    fn a_finished_command_is_noted_from_its_facts_alone() {
        let s = told_by_reply(&finished(Some(0), true), "t1", "run", Some("make | tail")).expect("told");
        assert_eq!((s.region, s.clipped, s.command), (Some(12), true, Some("make | tail")));
        let keys: Vec<String> = notes::notes(&s).into_iter().map(|n| n.key).collect();
        assert_eq!(keys, ["pipe-tail-head", "clipped"]);
        let plain = told_by_reply(&finished(Some(1), false), "t1", "wait", None).expect("told");
        assert!(!plain.clipped && !plain.place_known, "nothing looked at");
    }

    #[test]
    fn anything_else_is_looked_at() {
        assert!(told_by_reply(&finished(None, false), "t1", "run", None).is_none(), "status unknown");
        assert!(told_by_reply(&finished(Some(0), false).lead("$ true\n"), "t1", "run", None).is_none());
        let running = Reply { facts: Facts { outcome: Outcome::Running, ..Facts::default() }, ..Reply::default() };
        assert!(told_by_reply(&running, "t1", "run", None).is_none());
        assert!(told_by_reply(&Reply::text("typed 2 characters"), "t1", "send", None).is_none());
    }
}
