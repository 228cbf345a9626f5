//! Whether someone else uses a session: a person attached to it, or a
//! command running that another party started. `session_close` refuses
//! such a session; a person closes it with `close --force`.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::tmux::PaneInfo;
use crate::tmux::clients::{CLIENT_FORMAT, Client, parse_clients};
use crate::tools::typing::holds::Holder;
use crate::tools::{Party, Refusal, Terminal, ToolError};
use dtmcp_core::protocol::Status;

/// Who else uses a session, for a refusal.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Presence {
    /// tmux clients attached to the session (people: our own control client
    /// attaches elsewhere).
    pub attached: u32,
    /// The running command and who started it (`None`: a person).
    pub running: Option<(String, Option<String>)>,
    /// Text an agent typed at the prompt and left unsubmitted.
    pub left: Option<LeftBy>,
}

impl Presence {
    /// Why `actor` may not close the session, if it may not.
    pub fn refusal(&self, name: &str, actor: Option<&str>) -> Option<Refusal> {
        let running = match &self.running {
            Some((cmd, Some(who))) if Some(who.as_str()) != actor => Some((cmd.clone(), Party::Agent(who.clone()))),
            Some((cmd, None)) => Some((cmd.clone(), Party::Person)),
            _ => None,
        };
        let left = self.left.as_ref().filter(|l| Some(l.actor.as_str()) != actor);
        let left = left.map(|l| (Party::Agent(l.actor.clone()), l.text.clone()));
        (self.attached > 0 || running.is_some() || left.is_some()).then(|| Refusal::InUse {
            session: name.to_string(),
            attached: self.attached,
            running,
            left,
            window_of: None,
        })
    }
}

impl Terminal {
    /// Closes session `name` for `actor`, unless someone else uses it and
    /// `force` is off.
    pub async fn close_session(&self, name: &str, force: bool, actor: Option<&str>) -> Result<String, ToolError> {
        if !force && let Some(why) = self.presence(name).await?.refusal(name, actor) {
            return Err(why.into());
        }
        // Pane ids start again at %0 with a new tmux server: what was typed
        // into this pane must not be taken for the next one's.
        if let Ok(s) = self.sessions().resolve(name).await {
            self.inner.holds.forget(s.pane.pane_id.as_str());
        }
        let dir = self.sessions().close(name).await?;
        self.inner.currents.forget(&dir);
        if !dir.exists() {
            return Ok(format!("session {name} closed; its logs were deleted, as it was marked"));
        }
        Ok(format!("session {name} closed; its log stays in {}", dir.display()))
    }

    /// Who uses session `name` now.
    pub async fn presence(&self, name: &str) -> Result<Presence, ToolError> {
        let s = self.sessions().resolve(name).await?;
        let attached = s.pane.session_attached;
        let mut running = None;
        if let Ok(mut logger) = s.logger().await
            && let Ok(status) = logger.status().await
            && let Some(&open) = status.shell.open.first()
        {
            let cmd = match logger.region(open).await {
                Ok(Some(r)) => r.command,
                _ => "a command".to_string(),
            };
            running = Some((cmd, self.journal().starter_of(name, open)));
        }
        let left = self.left_at_prompt(name).await;
        Ok(Presence { attached, running, left })
    }
}

/// Who is in a session: the people attached, the agents that typed, who
/// types now.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Seen {
    /// The people (tmux clients) attached to the session's tmux session.
    pub clients: Vec<Client>,
    /// The latest key any of them pressed, epoch seconds.
    pub human_input: Option<u64>,
    /// Each agent's last typing call, epoch seconds.
    pub agents_typed: BTreeMap<String, u64>,
    /// The agent and tool holding the session while typing, if any.
    pub typing_now: Option<Holder>,
    /// Text an agent typed at the prompt and left there unsubmitted.
    pub left_at_prompt: Option<LeftBy>,
}

/// Text an agent left unsubmitted at a session's prompt.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LeftBy {
    /// The agent.
    pub actor: String,
    /// What it typed.
    pub text: String,
}

impl Seen {
    /// One line for `session_list`: people, agents, who types.
    pub fn line(&self, now_s: u64) -> Option<String> {
        let ago = |t: u64| format!("{} s ago", now_s.saturating_sub(t));
        let mut parts = Vec::new();
        if !self.clients.is_empty() {
            let mut p = format!("{} person(s) attached", self.clients.len());
            if let Some(t) = self.human_input {
                let _ = write!(p, ", last typed {}", ago(t));
            }
            parts.push(p);
        }
        if !self.agents_typed.is_empty() {
            let typed: Vec<String> = self.agents_typed.iter().map(|(a, t)| format!("{a} {}", ago(*t))).collect();
            parts.push(format!("agents typed: {}", typed.join(", ")));
        }
        if let Some(h) = &self.typing_now {
            parts.push(format!("typing now: {} ({})", h.actor, h.tool));
        }
        if let Some(l) = &self.left_at_prompt {
            parts.push(format!("left typed at the prompt by {}: `{}`", l.actor, l.text.trim()));
        }
        (!parts.is_empty()).then(|| parts.join(" · "))
    }
}

/// The pane part of a `session_list` entry.
pub fn pane_line(pane: &PaneInfo) -> String {
    format!(
        "pane {} · window {} pane {}{} · {}x{}",
        pane.pane_id.as_ref() as &str,
        pane.window_index,
        pane.pane_index,
        if pane.pane_active { " (active)" } else { "" },
        pane.pane_width,
        pane.pane_height
    )
}

impl Terminal {
    /// Who is in the session of `pane` now.
    pub async fn seen(&self, pane: &PaneInfo) -> Seen {
        let left = self.left_at_prompt(&pane.session_name).await;
        self.seen_with(pane, left).await
    }

    /// The same where the session's logger status was asked already
    /// (`None`: it did not answer), as a listing of every session does.
    pub(crate) async fn seen_given(&self, pane: &PaneInfo, status: Option<&Status>) -> Seen {
        let left = status.and_then(|status| self.left_given(&pane.session_name, status));
        self.seen_with(pane, left).await
    }

    /// Who is in the session of `pane`, `left` being what an agent left at
    /// its prompt.
    async fn seen_with(&self, pane: &PaneInfo, left: Option<LeftBy>) -> Seen {
        // A session that no client is attached to has none to list: a
        // listing of every session (session_list) asks tmux nothing more.
        let clients = match pane.session_attached {
            0 => Vec::new(),
            _ => {
                let target = crate::tmux::session_target(&pane.tmux_session);
                let out = self.sessions().tmux.run(&["list-clients", "-t", &target, "-F", CLIENT_FORMAT]).await;
                out.map(|t| parse_clients(&t)).unwrap_or_default()
            }
        };
        let human_input = clients.iter().filter_map(|c| c.last_input).max();
        Seen {
            clients,
            human_input,
            agents_typed: self.journal().agents_typed(&pane.session_name),
            typing_now: self.inner.holds.holder(&pane.session_name),
            left_at_prompt: left,
        }
    }

    /// The text an agent left at session `name`'s prompt that is still
    /// there, unsubmitted, as the agents' states keep it.
    async fn left_at_prompt(&self, name: &str) -> Option<LeftBy> {
        if self.left_texts(name).is_empty() {
            return None;
        }
        let s = self.sessions().resolve_quiet(name).await.ok()?;
        let status = s.logger().await.ok()?.status().await.ok()?;
        self.left_given(name, &status)
    }

    /// The same, given the logger's `status` of session `name`.
    fn left_given(&self, name: &str, status: &Status) -> Option<LeftBy> {
        let pending = status.typed.as_str();
        // Nothing pending at a prompt: no text left there, and no look at
        // the agents' states (a listing asks this of every session).
        if !status.shell.at_prompt || pending.trim().is_empty() {
            return None;
        }
        let here = |l: &dtmcp_core::agent_state::LeftText| {
            status.shell.at_prompt
                && l.prompts == status.mark.prompts
                && (l.shell_pid == 0 || l.shell_pid == status.shell.pid)
                && !l.text.trim().is_empty()
                && pending.contains(l.text.trim())
        };
        let left = self.left_texts(name);
        let (actor, _) = left.iter().find(|(_, l)| here(l))?;
        Some(LeftBy { actor: actor.clone(), text: pending.to_string() })
    }

    /// The texts agents left at session `name`'s prompts (see
    /// [`crate::tools::memory::left_texts`]), `state.json` read again
    /// only when the logger replaced it.
    fn left_texts(&self, name: &str) -> std::sync::Arc<Vec<(String, dtmcp_core::agent_state::LeftText)>> {
        let dir = self.sessions().cfg.session_dir(name);
        let path = dir.join(dtmcp_core::agent_state::FILE);
        self.inner.left.present(&path, |_| crate::tools::memory::left_texts(&dir)).unwrap_or_default()
    }

    /// The presence and pane-kind line of `session_list` for `pane`, from
    /// its `meta.json` and who is in it.
    pub(crate) fn presence_line(
        pane_pinned: bool,
        meta: Option<&dtmcp_core::store::Meta>,
        seen: &Seen,
    ) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(meta) = meta {
            if let Some(parent) = &meta.parent {
                parts.push(format!("split from {parent}"));
            }
            if meta.adopted {
                parts.push("adopted (no shell integration)".to_string());
            }
        }
        if pane_pinned {
            parts.push("size pinned".to_string());
        }
        let now_s = crate::config::now_ms() / 1000;
        parts.extend(seen.line(now_s));
        (!parts.is_empty()).then(|| parts.join(" · "))
    }

    /// Closes every pane of session `name`'s window for `actor`, unless
    /// someone else uses one of them and `force` is off.
    pub async fn close_window(&self, name: &str, force: bool, actor: Option<&str>) -> Result<String, ToolError> {
        let s = self.sessions().resolve(name).await?;
        let panes = self.sessions().panes().await?;
        let in_window: Vec<PaneInfo> = panes.into_iter().filter(|p| p.window_id == s.pane.window_id).collect();
        let window: Vec<String> = in_window.iter().map(|p| p.session_name.clone()).collect();
        if !force {
            for other in &window {
                if let Some(mut why) = self.presence(other).await?.refusal(other, actor) {
                    if let Refusal::InUse { window_of, .. } = &mut why {
                        *window_of = Some((name.to_string(), window.clone()));
                    }
                    return Err(why.into());
                }
            }
        }
        for p in &in_window {
            self.inner.holds.forget(p.pane_id.as_str());
        }
        let gone = self.sessions().close_window(name).await?;
        let mut out = format!("closed the window of {name}: {} session(s)\n", gone.len());
        for (n, dir) in gone {
            let _ = writeln!(out, "  {n}: log stays in {}", dir.display());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_who_uses_it_and_how_a_person_closes_it() {
        let p = Presence { attached: 1, running: None, left: None };
        let why = p.refusal("t1", Some("a")).expect("refused").to_string();
        assert!(why.contains("a person is attached") && why.contains("close --force t1"), "{why}");
        let p = Presence { attached: 0, running: Some(("make".into(), Some("b".into()))), left: None };
        let by_b = p.refusal("t1", Some("a")).expect("refused");
        assert!(matches!(&by_b, Refusal::InUse { running: Some((_, Party::Agent(b))), .. } if b == "b"));
        assert!(by_b.to_string().contains("started by b"));
        assert_eq!(p.refusal("t1", Some("b")), None);
        let p = Presence { attached: 0, running: Some(("vi".into(), None)), left: None };
        assert!(p.refusal("t1", Some("a")).expect("refused").to_string().contains("typed by a person"));
        assert_eq!(Presence::default().refusal("t1", None), None);
        let left = LeftBy { actor: "b".into(), text: "echo hal".into() };
        let p = Presence { left: Some(left), ..Presence::default() };
        assert!(p.refusal("t1", Some("a")).expect("refused").to_string().contains("agent b typed `echo hal`"));
        assert_eq!(p.refusal("t1", Some("b")), None, "its own text does not keep an agent from closing");
    }
}
