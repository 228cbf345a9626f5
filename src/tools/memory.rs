//! Per-agent state on the router's side (see [`dtmcp_core::agent_state`]): a
//! cache over what each session's logger keeps, so that the state outlives
//! this process.
//!
//! The first time this process needs an agent's state in a session it asks
//! the session's logger; after that, the copy here is the one that counts
//! (a single router serves a state home) and every change is sent on to the
//! logger: awaited when it matters after a crash (a note given, a command
//! left running, a screen seen), in the background when only the time of
//! the last reply moved.
//!
//! Also here: "finished since your last call", the commands that were
//! running at an agent's last reply and have ended since, told at the top
//! of its next call in that session.

use std::collections::HashMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::session::Loggers;
use crate::tools::Terminal;
use crate::tools::typing::holds::Enter;
use dtmcp_core::agent_state::{AgentState, LeftText};
use dtmcp_core::protocol::Status;
use dtmcp_core::region::Region;
use dtmcp_core::store::files;
use dtmcp_core::types::RegionId;

/// The most states cached; past it the cache starts over (each state is
/// asked of its logger again when next needed).
const MAX_CACHED: usize = 4096;
/// The most finished commands one reply lists.
const MAX_FINISHED: usize = 5;

/// The agents' states this process has read or changed.
#[derive(Debug, Default)]
pub struct AgentMemory {
    held: Mutex<HashMap<Key, AgentState>>,
}

/// One agent in one session: a session's name is reused after it closes,
/// so its directory's inode tells the instances apart.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Key {
    session: String,
    instance: u64,
    actor: String,
}

impl AgentMemory {
    fn get(&self, key: &Key) -> Option<AgentState> {
        self.lock().get(key).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, AgentState>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How a change must reach the logger.
#[derive(Debug, PartialEq, Eq)]
enum Send {
    /// Nothing changed.
    No,
    /// Only the time of the last reply: in the background.
    Later,
    /// Before the reply goes out.
    Now,
}

fn what_to_send(before: &AgentState, after: &AgentState) -> Send {
    if before == after {
        return Send::No;
    }
    let same_but_time = AgentState { last_reply_s: after.last_reply_s, ..before.clone() };
    if same_but_time == *after { Send::Later } else { Send::Now }
}

impl Terminal {
    /// This caller's key and its session's directory, if the session has one.
    fn agent_key(&self, name: &str) -> Option<(Key, PathBuf)> {
        crate::session::validate_name(name).ok()?;
        let dir = self.sessions().cfg.session_dir(name);
        let instance = self.sessions().instance(name)?;
        Some((Key { session: name.to_string(), instance, actor: self.actor() }, dir))
    }

    /// The calling agent's state in session `name`: from memory, else from
    /// the session's logger. `None` when the session has no logger to keep
    /// it (closed, or its logger is being replaced).
    pub(super) async fn agent_state(&self, name: &str) -> Option<AgentState> {
        let (key, dir) = self.agent_key(name)?;
        self.cached_or_fetched(&key, &dir).await
    }

    async fn cached_or_fetched(&self, key: &Key, dir: &Path) -> Option<AgentState> {
        if let Some(state) = self.inner.agents.get(key) {
            return Some(state);
        }
        let mut logger = self.sessions().loggers.connect(&dir.join(files::SOCKET)).await.ok()?;
        let state = logger.agent(&key.actor).await.ok()?.unwrap_or_default();
        let mut held = self.inner.agents.lock();
        if held.len() >= MAX_CACHED {
            held.clear();
        }
        // A change made meanwhile by a concurrent call wins over the fetch.
        Some(held.entry(key.clone()).or_insert(state).clone())
    }

    /// Changes the calling agent's state in session `name` with `f` and
    /// has the session's logger keep it; `None` (and nothing changed) when
    /// the session has no logger.
    pub(super) async fn update_agent<R>(&self, name: &str, f: impl FnOnce(&mut AgentState) -> R) -> Option<R> {
        let (key, dir) = self.agent_key(name)?;
        self.cached_or_fetched(&key, &dir).await?;
        let (result, changed) = {
            let mut held = self.inner.agents.lock();
            let state = held.entry(key.clone()).or_default();
            let before = state.clone();
            let result = f(state);
            // Only the commands still counted as running can be announced.
            state.announced.retain(|id| state.running.contains(id));
            let send = what_to_send(&before, state);
            if send != Send::No {
                state.version = before.version + 1;
            }
            (result, (send, state.clone()))
        };
        match changed {
            (Send::No, _) => {}
            (Send::Later, state) => {
                tokio::spawn(send_to_logger(self.sessions().loggers.clone(), dir, key.actor, state));
            }
            (Send::Now, state) => send_to_logger(self.sessions().loggers.clone(), dir, key.actor, state).await,
        }
        Some(result)
    }

    /// The commands that were running at this agent's last reply in
    /// session `name` and have ended since, as lines for the top of this
    /// reply; they are told once.
    pub(super) async fn finished_since(&self, name: &str) -> Option<String> {
        let state = self.agent_state(name).await?;
        if state.running.is_empty() {
            return None;
        }
        let socket = self.sessions().cfg.session_dir(name).join(files::SOCKET);
        let mut logger = self.sessions().loggers.connect(&socket).await.ok()?;
        let mut ended = Vec::new();
        let mut gone = Vec::new();
        for &id in &state.running {
            match logger.region(RegionId(id)).await {
                Ok(Some(r)) if r.end.is_some() => ended.push(r),
                Ok(Some(_)) => {}
                Ok(None) => gone.push(id),
                Err(_) => return None,
            }
        }
        let told: Vec<u64> = ended.iter().map(|r| r.id.0).chain(gone).collect();
        if told.is_empty() {
            return None;
        }
        self.update_agent(name, |s| s.running.retain(|id| !told.contains(id))).await;
        (!ended.is_empty()).then(|| finished_lines(name, &ended))
    }
}

impl Terminal {
    /// Records what the calling agent typed at session `name`'s prompt
    /// when the logger's state was `before`: kept while it is left
    /// unsubmitted, dropped once Enter submitted it.
    pub(super) async fn note_left(&self, name: &str, text: &str, enter: Enter, before: &Status) {
        let left = (enter == Enter::NotPressed).then(|| LeftText {
            text: text.to_string(),
            prompts: crate::tools::typing::holds::lands_at(before),
            regions: before.mark.regions,
            shell_pid: before.shell.pid,
        });
        self.update_agent(name, |s| s.left = left).await;
    }

    /// The last thing an agent typed into session `s`: what this process
    /// saw, else (after a restart) the text an agent left at its prompt,
    /// as the agents' states in the session keep it.
    pub(super) fn last_typed(&self, s: &crate::session::Session) -> Option<crate::tools::typing::holds::Typed> {
        if let Some(typed) = self.inner.holds.last_typed(s.pane.pane_id.as_str()) {
            return Some(typed);
        }
        let (actor, left) = left_texts(&s.dir).into_iter().next()?;
        let at = std::time::Instant::now();
        Some(crate::tools::typing::holds::Typed {
            actor,
            text: left.text,
            submitted: false,
            prompts: left.prompts,
            regions: left.regions,
            shell_pid: left.shell_pid,
            at,
        })
    }
}

/// The texts agents left at a prompt of the session in `dir`, per its
/// `state.json`, the latest prompt's first.
pub fn left_texts(dir: &Path) -> Vec<(String, LeftText)> {
    let agents = dtmcp_core::agent_state::load(dir).agents;
    let mut left: Vec<(String, LeftText)> = agents.into_iter().filter_map(|(a, s)| Some((a, s.left?))).collect();
    left.sort_by_key(|(_, l)| std::cmp::Reverse(l.prompts));
    left
}

impl Terminal {
    /// Records a reply to the calling agent in session `name` now, with the
    /// commands running in it, for the tools that do not look at them
    /// anyway (`read`, `search`, `regions`).
    pub(super) async fn note_reply(&self, name: &str) {
        let Some((_, dir)) = self.agent_key(name) else { return };
        let Ok(mut logger) = self.sessions().loggers.connect(&dir.join(files::SOCKET)).await else { return };
        let Ok(status) = logger.status().await else { return };
        if status.eof {
            return;
        }
        let now_s = crate::config::now_ms() / 1000;
        let open = running_regions(&status);
        self.update_agent(name, |s| {
            s.last_reply_s = now_s;
            s.running = open;
        })
        .await;
    }
}

/// The regions running per `status`: commands, and a line typed into a
/// program.
pub(super) fn running_regions(status: &Status) -> Vec<u64> {
    let mut open: Vec<u64> = status.shell.open.iter().map(|r| r.0).collect();
    open.extend(status.shell.input.map(|r| r.0).filter(|id| !open.contains(id)));
    open
}

/// Sends `state` to the logger of the session in `dir`. Best effort: a
/// state that does not arrive costs at most a repeated note after a restart.
async fn send_to_logger(loggers: Loggers, dir: PathBuf, actor: String, state: AgentState) {
    if let Ok(mut logger) = loggers.connect(&dir.join(files::SOCKET)).await {
        let _ = logger.set_agent(&actor, state).await;
    }
}

/// The lines telling an agent which commands of session `name` finished
/// since its last call.
fn finished_lines(name: &str, ended: &[Region]) -> String {
    let mut out = String::new();
    for r in ended.iter().take(MAX_FINISHED) {
        let status = r.exit.map_or_else(|| "exit status unknown".to_string(), dtmcp_core::exit::short);
        let command = r.command.lines().next().unwrap_or_default();
        let _ = writeln!(
            out,
            "finished since your last call: `{command}` (region {}) · {status} · read session={name} region={} shows its output",
            r.id, r.id
        );
    }
    if ended.len() > MAX_FINISHED {
        let _ = writeln!(out, "… and {} more (regions session={name} lists them)", ended.len() - MAX_FINISHED);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dtmcp_core::region::LinePos;

    #[test]
    fn only_a_moved_reply_time_goes_in_the_background() {
        let before = AgentState { version: 3, last_reply_s: 10, ..AgentState::default() };
        assert_eq!(what_to_send(&before, &before.clone()), Send::No);
        let later = AgentState { last_reply_s: 11, ..before.clone() };
        assert_eq!(what_to_send(&before, &later), Send::Later);
        let noted = AgentState { notes: ["running".into()].into(), ..later.clone() };
        assert_eq!(what_to_send(&before, &noted), Send::Now);
        let left_running = AgentState { running: vec![4], ..before.clone() };
        assert_eq!(what_to_send(&before, &left_running), Send::Now);
    }

    #[test]
    fn finished_commands_are_named_with_their_status_and_where_to_read_them() {
        let done = |id: u64, exit: Option<i32>| Region {
            id: RegionId(id),
            command: "make -j4\nsecond line".into(),
            end: Some(LinePos::default()),
            exit,
            ..Region::default()
        };
        let text = finished_lines("t1", &[done(3, Some(2)), done(4, None)]);
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(
            text.starts_with(
                "finished since your last call: `make -j4` (region 3) · exit 2 · read session=t1 region=3"
            )
        );
        assert!(text.contains("(region 4) · exit status unknown"), "{text}");
        let many: Vec<Region> = (1..=7).map(|i| done(i, Some(0))).collect();
        assert!(finished_lines("t1", &many).ends_with("… and 2 more (regions session=t1 lists them)\n"));
    }
}
