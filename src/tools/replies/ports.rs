//! What a `run`, `wait` or `expect` reply says of the ports a session's
//! processes listen on and of its background jobs: a line for what began
//! listening and one for what stopped since the last reply to the same
//! agent in the same session, a line for a background job that started or
//! ended, and the whole picture as data in the structured result.
//!
//! The look itself is `dtmcp_core::procs::sockets::look`, taken on the
//! blocking pool when a reply is made, never on a timer. What each agent
//! was last told is kept here, per agent and session, at most
//! [`REMEMBERED`] of them: a courtesy a restart may forget (the next reply
//! then says what listens, once more).
//!
//! A session whose processes lead elsewhere (`ssh HOST`, `podman exec`)
//! says once that what listens there is not seen: that `/proc` is not
//! this host's, and nothing is guessed.

use std::fmt::Write;

use serde_json::{Value, json};

use crate::lru::Lru;
use crate::tools::Terminal;
use crate::tools::replies::reply::Reply;
use dtmcp_core::procs::sockets::{self, Job, Listener, Look};

/// The most (agent, session) pairs whose last look is kept.
pub const REMEMBERED: usize = 1024;

/// How long after a look that shows a new background job it is looked at
/// again, to be told only if it is still there.
const CONFIRM_MS: u64 = 30;

/// What one agent was last told of one session.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Told {
    /// The listeners it was told of.
    pub listeners: Vec<Listener>,
    /// The background jobs.
    pub jobs: Vec<Job>,
    /// The places said to be out of sight.
    pub far: Vec<String>,
}

/// Each agent's [`Told`] in each session.
pub struct PortMemory(Lru<(String, String), Told>);

impl Default for PortMemory {
    fn default() -> PortMemory {
        PortMemory(Lru::new(REMEMBERED))
    }
}

/// What changed between what an agent was told and a look.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Change {
    /// Listening now, not told before.
    pub opened: Vec<Listener>,
    /// Told before, not listening now.
    pub closed: Vec<Listener>,
    /// Background jobs new since.
    pub started: Vec<Job>,
    /// Background jobs gone since.
    pub ended: Vec<Job>,
    /// Places out of sight, new since.
    pub far: Vec<String>,
}

/// What changed from `before` to `now`.
pub fn change(before: &Told, now: &Look) -> Change {
    let new_of = |a: &[Listener], b: &[Listener]| -> Vec<Listener> {
        a.iter().filter(|l| !b.iter().any(|o| o.same(l))).cloned().collect()
    };
    let jobs_of = |a: &[Job], b: &[Job]| -> Vec<Job> {
        a.iter().filter(|j| !b.iter().any(|o| o.pid == j.pid)).cloned().collect()
    };
    Change {
        opened: new_of(&now.listeners, &before.listeners),
        closed: new_of(&before.listeners, &now.listeners),
        started: jobs_of(&now.jobs, &before.jobs),
        ended: jobs_of(&before.jobs, &now.jobs),
        far: now.far.iter().filter(|f| !before.far.contains(f)).cloned().collect(),
    }
}

impl Change {
    /// The reply's lines about it (empty when nothing changed).
    pub fn lines(&self) -> String {
        let mut out = String::new();
        if !self.opened.is_empty() {
            let _ = writeln!(out, "listening: {}", sockets::said(&self.opened));
        }
        if !self.closed.is_empty() {
            let _ = writeln!(out, "stopped listening: {}", sockets::said(&self.closed));
        }
        for j in &self.started {
            let _ = writeln!(out, "running in the background: {}", j.line());
        }
        for j in &self.ended {
            let _ = writeln!(out, "background job ended: pid {} `{}`", j.pid, j.command);
        }
        for place in &self.far {
            let _ = writeln!(out, "{}", not_seen(place));
        }
        out
    }
}

/// The sentence for a place whose ports are out of sight.
pub fn not_seen(place: &str) -> String {
    format!("(ports opened on {place} are not seen: that /proc is not this host's)")
}

/// A listener as data: its fields, and where a client on this host
/// reaches it (`connect`).
pub fn listener_json(l: &Listener) -> Value {
    let mut v = serde_json::to_value(l).unwrap_or(Value::Null);
    if let (Value::Object(map), Some(at)) = (&mut v, l.reach()) {
        map.insert("connect".into(), at.to_string().into());
    }
    v
}

/// The look as the structured result's data: `listening`, `jobs`,
/// `ports_not_seen`, and the change's `stopped_listening`.
pub fn details(look: &Look, change: Option<&Change>) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    out.insert("listening".into(), Value::Array(look.listeners.iter().map(listener_json).collect()));
    if !look.jobs.is_empty() {
        out.insert("jobs".into(), json!(look.jobs));
    }
    if !look.far.is_empty() {
        out.insert("ports_not_seen".into(), json!(look.far));
    }
    if let Some(c) = change.filter(|c| !c.closed.is_empty()) {
        out.insert("stopped_listening".into(), Value::Array(c.closed.iter().map(listener_json).collect()));
    }
    out
}

/// A look at the processes under `pid`, on the blocking pool; `None` when
/// the pane's process is gone.
pub async fn look(pid: u32) -> Option<Look> {
    tokio::task::spawn_blocking(move || sockets::look(pid).ok()).await.ok().flatten()
}

/// Looks at the processes under each pane of `asked` (its first process's
/// pid, 0 for a dead pane, which gets `None`; and its current command), in
/// this thread: call it on the blocking pool. A pane whose shell is its
/// current command and that has no child (one read of its `children`
/// file) has nothing to show, and no more is read of it: most of a
/// listing's sessions sit at their prompts.
pub fn looks(asked: &[(u32, &str)]) -> Vec<Option<Look>> {
    let known: Vec<(u32, bool)> =
        asked.iter().map(|(pid, comm)| (*pid, *pid != 0 && lone_by_name(*pid, comm))).collect();
    looks_known(&known)
}

/// As [`looks`], for panes whose first process is already known to be a
/// shell with no child (`true`) or not: only the others are looked at.
pub fn looks_known(asked: &[(u32, bool)]) -> Vec<Option<Look>> {
    let rest: Vec<u32> = asked.iter().filter(|(pid, lone)| *pid != 0 && !lone).map(|(pid, _)| *pid).collect();
    let mut got = sockets::looks(&rest).into_iter();
    asked
        .iter()
        .map(|(pid, lone)| match (*pid, *lone) {
            (0, _) => None,
            (_, true) => Some(Look { processes: 1, ..Look::default() }),
            _ => got.next().and_then(Result::ok),
        })
        .collect()
}

/// Whether the pane process `pid`, which tmux calls `comm`, is one of the
/// single-threaded shells with no child: its `children` file then says
/// all (see [`dtmcp_core::procs::tree::childless`]).
fn lone_by_name(pid: u32, comm: &str) -> bool {
    dtmcp_core::procs::is_shell_name(comm) && dtmcp_core::procs::tree::childless(pid) == Some(true)
}

/// A session's lines in `session_list`: what listens, its background
/// jobs, and where ports are out of sight.
pub fn listing(look: &Look) -> String {
    let mut out = String::new();
    if !look.listeners.is_empty() {
        let _ = writeln!(out, "  listening: {}", sockets::said(&look.listeners));
    }
    if !look.jobs.is_empty() {
        let jobs: Vec<String> = look.jobs.iter().map(Job::line).collect();
        let _ = writeln!(out, "  background jobs: {}", jobs.join("; "));
    }
    for place in &look.far {
        let _ = writeln!(out, "  {}", not_seen(place));
    }
    out
}

impl Terminal {
    /// What the processes of each of `panes` listen on and run in the
    /// background, as data (`listening`, `jobs`, `ports_not_seen`), their
    /// secrets hidden as a reply hides them; `None` for a dead pane.
    pub async fn ports_of(&self, panes: &[crate::tmux::PaneInfo]) -> Vec<Option<serde_json::Map<String, Value>>> {
        let asked: Vec<(u32, String)> =
            panes.iter().map(|p| (if p.pane_dead { 0 } else { p.pane_pid }, p.pane_current_command.clone())).collect();
        let n = asked.len();
        let found = tokio::task::spawn_blocking(move || {
            looks(&asked.iter().map(|(pid, comm)| (*pid, comm.as_str())).collect::<Vec<_>>())
        })
        .await
        // A look that failed to run leaves every pane unlooked at.
        .unwrap_or_else(|_| (0..n).map(|_| None).collect());
        panes
            .iter()
            .zip(found)
            .map(|(pane, look)| {
                let data = Value::Object(details(&look?, None));
                let hidden = self.redacted(Some(&pane.session_name), &data.to_string());
                match serde_json::from_str(&hidden) {
                    Ok(Value::Object(map)) => Some(map),
                    _ => None,
                }
            })
            .collect()
    }

    /// Adds to `reply` what changed in session `name`'s listeners and jobs
    /// since this agent's last reply there, and the whole look as data.
    pub(crate) async fn tell_ports(&self, name: &str, reply: &mut Reply) {
        let Ok(s) = self.sessions().resolve_quiet(name).await else { return };
        if s.pane.pane_dead {
            return;
        }
        // A shell alone at its prompt, where this agent was told of nothing:
        // nothing to say, and no look to pay for (most replies).
        if dtmcp_core::procs::tree::lone_shell(s.pane.pane_pid) && self.told_nothing(name) {
            return;
        }
        let Some(mut now) = look(s.pane.pane_pid).await else { return };
        // A job this agent was not told of is looked at again a moment
        // later, and told only if still there: under load, a process the
        // shell's prompt commands run for an instant (pyenv's hook runs
        // `stat`) was once caught looking like a job of its own, told as
        // started, and in the next reply as ended.
        if self.any_new_job(name, &now) {
            tokio::time::sleep(std::time::Duration::from_millis(CONFIRM_MS)).await;
            if let Some(again) = look(s.pane.pane_pid).await {
                now.jobs.retain(|j| again.jobs.iter().any(|a| a.pid == j.pid));
            }
        }
        let change = self.told_ports(name, &now);
        let lines = change.lines();
        if !lines.is_empty() {
            if !reply.text.is_empty() && !reply.text.ends_with('\n') {
                reply.push_str("\n");
            }
            reply.push_str(&lines);
        }
        let quiet = now.listeners.is_empty() && now.jobs.is_empty() && now.far.is_empty();
        if !quiet || !change.closed.is_empty() {
            reply.facts.details.extend(details(&now, Some(&change)));
        }
    }

    /// Whether `now` holds a background job this agent was not told of in
    /// session `name`.
    fn any_new_job(&self, name: &str, now: &Look) -> bool {
        if now.jobs.is_empty() {
            return false;
        }
        let told = self.inner.ports.0.get(&(self.actor(), name.to_string()), Told::default);
        let told = told.lock().unwrap_or_else(|e| e.into_inner());
        now.jobs.iter().any(|j| !told.jobs.iter().any(|t| t.pid == j.pid))
    }

    /// Whether this agent was told of nothing listening or running in the
    /// background in session `name` (or never told of it).
    fn told_nothing(&self, name: &str) -> bool {
        let told = self.inner.ports.0.get(&(self.actor(), name.to_string()), Told::default);
        let told = told.lock().unwrap_or_else(|e| e.into_inner());
        told.listeners.is_empty() && told.jobs.is_empty() && told.far.is_empty()
    }

    /// Records `now` as what this agent was told of session `name`, and
    /// returns what changed since it was last told.
    pub(crate) fn told_ports(&self, name: &str, now: &Look) -> Change {
        let key = (self.actor(), name.to_string());
        let told = self.inner.ports.0.get(&key, Told::default);
        let mut told = told.lock().unwrap_or_else(|e| e.into_inner());
        let change = change(&told, now);
        *told = Told { listeners: now.listeners.clone(), jobs: now.jobs.clone(), far: now.far.clone() };
        change
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dtmcp_core::procs::sockets::Kind;

    fn tcp(port: u16, pid: i32) -> Listener {
        Listener {
            kind: Kind::Tcp,
            address: Some("127.0.0.1".parse().expect("ip")),
            port: Some(port),
            path: None,
            pid,
            program: "python3".into(),
            command: format!("python3 -m http.server {port}"),
        }
    }

    fn job(pid: i32) -> Job {
        Job { pid, pgid: pid, command: "sleep 60".into(), stopped: false, processes: 1, listening: Vec::new() }
    }

    #[test]
    fn what_opened_and_closed_since_the_last_reply() {
        let before = Told { listeners: vec![tcp(8000, 7)], jobs: vec![job(7), job(9)], far: Vec::new() };
        let now = Look {
            listeners: vec![tcp(8123, 8)],
            jobs: vec![job(7), job(8)],
            far: vec!["box via ssh".into()],
            ..Look::default()
        };
        let c = change(&before, &now);
        assert_eq!(
            c.lines(),
            "listening: 127.0.0.1:8123 (python3 -m http.server 8123, pid 8)\n\
             stopped listening: 127.0.0.1:8000 (python3 -m http.server 8000, pid 7)\n\
             running in the background: pid 8 `sleep 60`\n\
             background job ended: pid 9 `sleep 60`\n\
             (ports opened on box via ssh are not seen: that /proc is not this host's)\n"
        );
        let told = Told { listeners: now.listeners.clone(), jobs: now.jobs.clone(), far: now.far.clone() };
        assert_eq!(change(&told, &now), Change::default(), "told once, not again");
    }

    #[test]
    fn data_says_where_to_connect() {
        let look = Look { listeners: vec![tcp(8123, 8)], ..Look::default() };
        let d = details(&look, None);
        assert_eq!(d["listening"][0]["port"], 8123);
        assert_eq!(d["listening"][0]["connect"], "127.0.0.1:8123");
        assert_eq!(d["listening"][0]["kind"], "tcp");
        assert!(d.get("jobs").is_none() && d.get("stopped_listening").is_none());
    }
}
