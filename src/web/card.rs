//! One session at a glance: the card the overview shows for it, and the
//! head of its own page. What it is running and in what state, its last
//! command, who typed and who watches, where it runs, what its processes
//! listen on and run in the background, and the last rows of its screen. Made from tmux, the session's logger, `/proc` and the
//! agents' typing records; for a closed session, from its files.

use std::path::Path;

use serde::Serialize;

use super::hide::Hide;
use super::render;
use crate::agents::journal::Journal;
use crate::session::Session;
use crate::tmux::PaneInfo;
use crate::tools::Terminal;
use dtmcp_core::procs::{self, Activity, Job, sockets};
use dtmcp_core::protocol::Status;
use dtmcp_core::region::Region;
use dtmcp_core::store::{self, LineReader, files};
use dtmcp_core::types::LineNo;

/// How many rows of the screen (or lines of a closed log) a card shows.
pub const TAIL_ROWS: usize = 6;
/// The longest prompt text a card quotes.
const MAX_PROMPT: usize = 80;

/// What a session is doing, in one word the page styles by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// A command or program is busy.
    Working,
    /// A program waits for a line at its prompt.
    Input,
    /// A program waits for a password.
    Password,
    /// The shell waits at its prompt.
    Idle,
    /// A full-screen program holds the screen.
    Screen,
    /// The pane's program ended.
    Exited,
    /// The session is closed; its logs remain.
    Closed,
    /// Nothing could be told.
    Unknown,
}

/// A command and how it went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Command {
    /// Its region.
    pub region: u64,
    /// The command line.
    pub command: String,
    /// Its exit status; `None` while it runs.
    pub exit: Option<i32>,
    /// When it started, ms since the epoch.
    pub started_ms: u64,
    /// When it ended.
    pub ended_ms: Option<u64>,
    /// The agent that typed it, if an agent did.
    pub by: Option<String>,
}

/// An agent's last typing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Agent {
    /// The agent.
    pub actor: String,
    /// When it last typed, seconds since the epoch.
    pub at: u64,
}

/// A person attached.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Person {
    /// Their terminal.
    pub tty: String,
    /// Since when, seconds since the epoch.
    pub since: u64,
    /// Their last key, seconds since the epoch.
    pub last_input: Option<u64>,
}

/// A socket a session's processes listen on, as the page shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Port {
    /// Where: `127.0.0.1:8123`, `udp 0.0.0.0:5353`, `unix /tmp/app.sock`.
    pub at: String,
    /// Who holds it: `python3 -m http.server 8123, pid 4242`.
    pub by: String,
    /// A link to open it, for a TCP port on loopback (or on every
    /// address, reached on loopback): the page cannot know it speaks
    /// HTTP, a person can try.
    pub link: Option<String>,
}

impl Port {
    /// The page's form of `l`, its command line's secrets hidden.
    pub fn of(l: &sockets::Listener, hide: &Hide) -> Port {
        let link = match (l.kind, l.reach()) {
            (sockets::Kind::Tcp, Some(at)) if at.ip().is_loopback() => Some(format!("http://{at}/")),
            _ => None,
        };
        Port { at: l.endpoint(), by: hide.text(&l.holder()), link }
    }
}

/// One session's card.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Card {
    /// The session's name.
    pub name: String,
    /// Whether its pane lives.
    pub open: bool,
    /// The program in the foreground (or the one it started with, closed).
    pub program: String,
    /// Its state.
    pub state: State,
    /// The state in words, for a person.
    pub says: String,
    /// The prompt a program waits at (input or password).
    pub prompt: Option<String>,
    /// The command running or last run.
    pub last: Option<Command>,
    /// The agents that typed, latest first.
    pub agents: Vec<Agent>,
    /// An agent typing this very moment.
    pub typing_now: Option<String>,
    /// The people attached.
    pub people: Vec<Person>,
    /// The host it runs on when not this one (ssh, a container).
    pub host: Option<String>,
    /// The user it runs as when not ours.
    pub user: Option<String>,
    /// The last rows of its screen (or log), as HTML.
    pub tail: Vec<String>,
    /// The command a person runs to join it.
    pub attach: Option<String>,
    /// Its size, columns and rows.
    pub size: Option<(u32, u32)>,
    /// When it was made, ms since the epoch.
    pub created_ms: u64,
    /// When output last came, ms since the epoch.
    pub last_output_ms: u64,
    /// What its processes listen on.
    pub listening: Vec<Port>,
    /// Its background jobs, one line each.
    pub jobs: Vec<String>,
    /// Where its ports are out of sight (`box via ssh`).
    pub unseen: Vec<String>,
}

impl Card {
    /// The card of the live session in `pane`.
    pub async fn live(terminal: &Terminal, pane: &PaneInfo) -> Card {
        let sessions = terminal.sessions();
        let name = pane.session_name.clone();
        let dir = sessions.cfg.session_dir(&name);
        let meta = store::read_meta(&dir).unwrap_or_default();
        let loggers = sessions.loggers.clone();
        let session = Session { name: name.clone(), dir: dir.clone(), pane: pane.clone(), meta: meta.clone(), loggers };
        let status = match session.logger().await {
            Ok(mut logger) => logger.status().await.ok(),
            Err(_) => None,
        };
        let (pid, tty) = (pane.pane_pid, pane.pane_tty.clone());
        let (job, look) = match pane.pane_dead {
            true => (None, None),
            false => tokio::task::spawn_blocking(move || {
                (procs::job(procs::Pane { pid, tty: &tty }).ok(), sockets::look(pid).ok())
            })
            .await
            .unwrap_or_default(),
        };
        let look = look.unwrap_or_default();
        let seen = terminal.seen(pane).await;
        let capture = sessions.tmux.run(&["capture-pane", "-e", "-p", "-t", pane.pane_id.as_str()]).await;
        // The session's secrets stay hidden in every text the card shows.
        let hide = Hide::new(terminal, &name);
        let (state, says, prompt) = judge(pane, status.as_ref(), job.as_ref());
        let (says, prompt) = (hide.text(&says), prompt.map(|p| hide.text(&p)));
        let journal = terminal.journal();
        let last = status.as_ref().and_then(|s| s.last_region.as_ref()).map(|r| command_of(journal, &name, r, &hide));
        let (host, user) = place(status.as_ref(), job.as_ref());
        Card {
            program: pane.pane_current_command.clone(),
            state,
            says,
            prompt,
            last,
            agents: agents(seen.agents_typed),
            typing_now: seen.typing_now.map(|h| format!("{} ({})", h.actor, h.tool)),
            people: seen
                .clients
                .iter()
                .map(|c| Person { tty: c.tty.clone(), since: c.attached, last_input: c.last_input })
                .collect(),
            host,
            user,
            tail: capture.map(|text| tail_of_screen(&hide.screen(&text, pane.pane_width))).unwrap_or_default(),
            attach: Some(sessions.attach_command(&pane.tmux_session)),
            size: Some((pane.pane_width, pane.pane_height)),
            created_ms: meta.created_ms,
            last_output_ms: status.as_ref().map_or(0, |s| s.last_output_ms),
            listening: look.listeners.iter().map(|l| Port::of(l, &hide)).collect(),
            jobs: look.jobs.iter().map(|j| hide.text(&j.line())).collect(),
            unseen: look.far.iter().map(|f| hide.text(f)).collect(),
            open: true,
            name,
        }
    }

    /// The card of a session whose pane is gone, from its directory, its
    /// secrets hidden by `hide`.
    pub fn closed(journal: &Journal, name: &str, dir: &Path, hide: &Hide) -> Card {
        let meta = store::read_meta(dir).unwrap_or_default();
        let regions = store::read_regions(dir).unwrap_or_default();
        let last = regions.last().map(|r| command_of(journal, name, r, hide));
        let ended = modified_ms(&dir.join(files::RAW));
        let typed = journal.agents_typed(name);
        Card {
            name: name.to_string(),
            open: false,
            program: meta.command.first().cloned().unwrap_or_default(),
            state: State::Closed,
            says: "closed; its logs remain".to_string(),
            prompt: None,
            last,
            agents: agents(typed),
            typing_now: None,
            people: Vec::new(),
            host: None,
            user: None,
            tail: tail_of_log(dir, hide),
            attach: None,
            size: None,
            created_ms: meta.created_ms,
            last_output_ms: ended,
            listening: Vec::new(),
            jobs: Vec::new(),
            unseen: Vec::new(),
        }
    }
}

/// The agents that typed, latest first.
fn agents(typed: std::collections::BTreeMap<String, u64>) -> Vec<Agent> {
    let mut list: Vec<Agent> = typed.into_iter().map(|(actor, at)| Agent { actor, at }).collect();
    list.sort_by(|a, b| b.at.cmp(&a.at).then_with(|| a.actor.cmp(&b.actor)));
    list
}

/// What the session is doing, from its logger's status and its
/// foreground job as `/proc` shows it.
pub fn judge(pane: &PaneInfo, status: Option<&Status>, job: Option<&Job>) -> (State, String, Option<String>) {
    if pane.pane_dead {
        return (State::Exited, "its program exited".into(), None);
    }
    let comm = job.map_or_else(|| pane.pane_current_command.clone(), |j| j.comm.clone());
    if status.is_some_and(|s| s.shell.full_screen) {
        return (State::Screen, format!("full-screen program `{comm}`"), None);
    }
    let prompt = status.map(|s| quote_prompt(&s.current_text)).filter(|p| !p.is_empty());
    let at_prompt = status.is_some_and(|s| s.shell.at_prompt);
    let Some(job) = job else {
        return match at_prompt {
            true => (State::Idle, "idle at the shell prompt".into(), None),
            false => (State::Unknown, format!("`{comm}`: its state could not be read"), None),
        };
    };
    match job.activity {
        Activity::WaitingForInput if job.password => {
            (State::Password, format!("`{comm}` waits at a password prompt"), prompt)
        }
        Activity::WaitingForInput if job.own_shell => (State::Idle, "idle at the shell prompt".into(), None),
        Activity::WaitingForInput => {
            let at = prompt.as_deref().map(|p| format!(" at `{p}`")).unwrap_or_default();
            (State::Input, format!("`{comm}` waits for input{at}"), prompt)
        }
        Activity::Working | Activity::Sleeping => (State::Working, format!("`{comm}` is working"), None),
        Activity::Unknown if at_prompt => (State::Idle, "idle at the shell prompt".into(), None),
        Activity::Unknown => (State::Unknown, format!("`{comm}`: {}", job.reason), None),
    }
}

/// The end of the unfinished line, where a prompt is.
fn quote_prompt(text: &str) -> String {
    let chars: Vec<char> = text.trim_end().chars().collect();
    let start = chars.len().saturating_sub(MAX_PROMPT);
    chars[start..].iter().collect()
}

/// Where the session runs, when not here as us: the logger's innermost
/// integrated shell, else what `/proc` shows of an ssh or container.
fn place(status: Option<&Status>, job: Option<&Job>) -> (Option<String>, Option<String>) {
    let here = crate::config::hostname();
    let me = std::env::var("USER").unwrap_or_default();
    let mut host = job.and_then(|j| j.place.host.clone());
    let mut user = job.and_then(|j| j.place.user.clone());
    if let Some(shell) = status.map(|s| &s.shell) {
        if !shell.host.is_empty() && shell.host != here {
            host = Some(shell.host.clone());
        }
        if !shell.user.is_empty() && !me.is_empty() && shell.user != me {
            user = Some(shell.user.clone());
        }
    }
    (host, user)
}

/// A region as a card's command, with the agent that typed it.
fn command_of(journal: &Journal, name: &str, r: &Region, hide: &Hide) -> Command {
    Command {
        region: r.id.0,
        command: hide.text(&r.command),
        exit: r.exit,
        started_ms: r.started_ms,
        ended_ms: r.ended_ms,
        by: journal.starter_of(name, r.id),
    }
}

/// The last non-blank rows of a captured screen, as HTML.
pub fn tail_of_screen(capture: &str) -> Vec<String> {
    let rows: Vec<&str> = capture.lines().collect();
    let used = rows.iter().rposition(|r| !render::row_text(r).trim().is_empty()).map_or(0, |i| i + 1);
    let rows = &rows[..used];
    rows[rows.len().saturating_sub(TAIL_ROWS)..].iter().map(|r| render::row_html(r, None)).collect()
}

/// The last lines of a closed session's log, as HTML.
fn tail_of_log(dir: &Path, hide: &Hide) -> Vec<String> {
    let Ok(reader) = LineReader::open(dir) else { return Vec::new() };
    let Ok((lines, _)) = reader.extent() else { return Vec::new() };
    let from = LineNo(lines.saturating_sub(TAIL_ROWS as u64 - 1).max(1));
    let text = reader.read(from, TAIL_ROWS as u64).unwrap_or_default();
    hide.lines(text).iter().map(|l| render::escape(l)).collect()
}

/// A file's modification time, ms since the epoch (0: unknown).
pub fn modified_ms(path: &Path) -> u64 {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tmux::PaneId;

    fn pane(dead: bool) -> PaneInfo {
        PaneInfo {
            pane_id: PaneId::parse("%1").expect("pane id"),
            session_name: "t1".into(),
            tmux_session: "t1".into(),
            window_index: 0,
            pane_index: 0,
            pane_pid: 1,
            pane_tty: "/dev/pts/9".into(),
            pane_current_command: "bash".into(),
            pane_current_path: "/".into(),
            pane_dead: dead,
            pane_width: 80,
            pane_height: 24,
            pane_active: true,
            window_id: "@1".into(),
            session_attached: 0,
            window_pinned: false,
            dtmcp_name: "t1".into(),
        }
    }

    fn job(comm: &str, activity: Activity, is_shell: bool, password: bool) -> Job {
        Job {
            pgid: 7,
            comm: comm.into(),
            own_shell: is_shell,
            activity,
            reason: "read".into(),
            reader: comm.into(),
            password,
            place: Default::default(),
        }
    }

    fn status(text: &str, at_prompt: bool, full_screen: bool) -> Status {
        let mut s = Status { current_text: text.into(), ..Status::default() };
        s.shell.at_prompt = at_prompt;
        s.shell.full_screen = full_screen;
        s
    }

    #[test]
    fn states_are_judged_from_the_logger_and_the_job() {
        let p = pane(false);
        let idle =
            judge(&p, Some(&status("$ ", true, false)), Some(&job("bash", Activity::WaitingForInput, true, false)));
        assert_eq!(idle.0, State::Idle);
        let gdb = judge(
            &p,
            Some(&status("(gdb) ", false, false)),
            Some(&job("gdb", Activity::WaitingForInput, false, false)),
        );
        assert_eq!((gdb.0, gdb.2.as_deref()), (State::Input, Some("(gdb)")));
        assert!(gdb.1.contains("`gdb` waits for input at `(gdb)`"), "{}", gdb.1);
        let pw = judge(
            &p,
            Some(&status("Password: ", false, false)),
            Some(&job("sudo", Activity::WaitingForInput, false, true)),
        );
        assert_eq!(pw.0, State::Password);
        let busy = judge(&p, Some(&status("", false, false)), Some(&job("make", Activity::Working, false, false)));
        assert_eq!(busy.0, State::Working);
        let vim = judge(&p, Some(&status("", false, true)), Some(&job("vim", Activity::WaitingForInput, false, false)));
        assert_eq!(vim.0, State::Screen);
        assert_eq!(judge(&pane(true), None, None).0, State::Exited);
        assert_eq!(judge(&p, Some(&status("$ ", true, false)), None).0, State::Idle);
    }

    #[test]
    fn the_screen_tail_skips_the_blank_rows_below() {
        let capture = "one\n\x1b[31mtwo\x1b[0m\n$ \n\n\n";
        assert_eq!(tail_of_screen(capture), vec!["one", "<span class=\"f1\">two</span>", "$ "]);
        let many: String = (0..20).map(|i| format!("row {i}\n")).collect();
        let tail = tail_of_screen(&many);
        assert_eq!(tail.len(), TAIL_ROWS);
        assert_eq!(tail.last().map(String::as_str), Some("row 19"));
    }
}
