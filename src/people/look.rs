//! What is known about each session, gathered for `ls`, `watch` and the
//! commands that name one session.
//!
//! For `ls` and `watch`, one spawned `tmux list-panes -a` says which
//! sessions live (sorted into sessions as the router sorts them), with the
//! current command and directory that `ls` shows, and one `list-clients`
//! who is attached; then per session its logger is asked for its status
//! (one connection), and its files for the rest. A command that names one
//! session asks tmux about that session's pane alone. `/proc` is read only for a session where something
//! runs or whose shell has no integration: that is where "waiting for
//! input" is decided, and it costs a walk of `/proc`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{Failure, Home};
use crate::session::{ClientError, LoggerClient, Loggers};
use crate::tmux::clients::{CLIENT_FORMAT, Client, parse_clients};
use crate::tmux::{PaneId, PaneInfo, bare_format, pane_format};
use dtmcp_core::contract::GAPS;
use dtmcp_core::procs::{self, Activity, Job, sockets};
use dtmcp_core::protocol::Status;
use dtmcp_core::region::Region;
use dtmcp_core::store::{self, Meta, files};
use dtmcp_core::types::RegionId;

/// What a session is doing, as `ls --state` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// A program waits for someone to type.
    Waiting,
    /// A command runs.
    Running,
    /// The shell shows its prompt.
    Idle,
    /// The pane is gone; its logs remain.
    Closed,
}

/// How the session's logger answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LoggerState {
    /// It answered.
    Ok,
    /// It is stopped (SIGSTOP, a debugger) and answers nothing.
    Stalled,
    /// Nothing answers on its socket: it died, and the lines until a new
    /// one starts will be a log gap.
    Down,
    /// The session is closed: no logger is expected.
    None,
}

/// An agent that typed into the session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Agent {
    /// Its name (the MCP client's name, or `--actor`).
    pub name: String,
    /// When it last typed, ms since the epoch (to the second).
    pub typed_ms: u64,
}

/// A person: a tmux client attached to the session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Person {
    /// The client's terminal, like `/dev/pts/4`.
    pub tty: String,
    /// Its width.
    pub cols: u32,
    /// Its height.
    pub rows: u32,
    /// When it attached, ms since the epoch (to the second).
    pub attached_ms: u64,
    /// When it last pressed a key, if it has since attaching.
    pub last_input_ms: Option<u64>,
}

/// Everything `ls` says about one session; its JSON is `ls --json`'s, and
/// the field names are kept stable (documented in the README).
#[derive(Clone, Debug, Serialize)]
pub struct Facts {
    /// The session's name.
    pub name: String,
    /// What it is doing.
    pub state: State,
    /// Since when, ms since the epoch: the running command's start, the
    /// last command's end for a shell at its prompt, the close of a closed
    /// session.
    pub since_ms: Option<u64>,
    /// What holds the terminal (the foreground program's name); `null`
    /// once closed.
    pub program: Option<String>,
    /// The command line running now (running or waiting).
    pub command: Option<String>,
    /// Its region number.
    pub command_region: Option<u64>,
    /// The agent that typed it, if an agent did.
    pub started_by: Option<String>,
    /// Why it counts as waiting or running, from `/proc`.
    pub detail: Option<String>,
    /// The last command that finished.
    pub last_command: Option<String>,
    /// Its exit status (`null`: unknown, as in a shell without integration).
    pub last_exit: Option<i32>,
    /// Its region number.
    pub last_region: Option<u64>,
    /// The agents that typed into it, the latest first.
    pub agents: Vec<Agent>,
    /// The people attached.
    pub people: Vec<Person>,
    /// The host it runs on (the far host of an `ssh` in it, else this one).
    pub host: String,
    /// The user its shell runs as, when known.
    pub user: Option<String>,
    /// The foreground program's directory (on this host).
    pub cwd: Option<String>,
    /// Bytes of output logged (`raw.log`).
    pub log_bytes: u64,
    /// Cooked lines (`session.txt`).
    pub lines: u64,
    /// Stretches of output that were not logged.
    pub gaps: u64,
    /// How its logger answered.
    pub logger: LoggerState,
    /// The command that attaches to it; `null` once closed.
    pub attach: Option<String>,
    /// How it ended, when not by its program exiting.
    pub ended: Option<String>,
    /// Its directory.
    pub dir: PathBuf,
    /// When it was made, ms since the epoch.
    pub created_ms: u64,
    /// What its processes listen on.
    pub listening: Vec<sockets::Listener>,
    /// The jobs its shell runs in the background.
    pub jobs: Vec<sockets::Job>,
    /// Where its ports are out of sight (`box via ssh`).
    pub ports_not_seen: Vec<String>,
}

/// What tmux says: the live sessions and the people attached.
#[derive(Debug, Default)]
pub struct Scene {
    /// Our sessions' live panes, by session name.
    pub panes: BTreeMap<String, PaneInfo>,
    /// The clients attached, by tmux session.
    pub people: HashMap<String, Vec<Client>>,
}

impl Scene {
    /// Asks tmux (spawned, so a server that does not run stays so).
    pub async fn look(home: &Home) -> Result<Scene, Failure> {
        let Some(text) = ask_tmux(home, &["list-panes", "-a", "-F", pane_format()]).await? else {
            return Ok(Scene::default());
        };
        let panes = crate::tmux::parse_panes(&text).map_err(Failure::of)?;
        let panes = name_panes(panes, |name| store::read_meta(&home.dir(name)).ok().map(|m| m.pane_id));
        if panes.is_empty() {
            return Ok(Scene::default());
        }
        let format = format!("#{{client_session}}\x1f{CLIENT_FORMAT}");
        let people = ask_tmux(home, &["list-clients", "-F", &format]).await?.map(|t| people_of(&t)).unwrap_or_default();
        Ok(Scene { panes, people })
    }
}

/// Runs one tmux command; `None` when no server runs (or tmux is not
/// installed): then no session is live.
async fn ask_tmux(home: &Home, args: &[&str]) -> Result<Option<String>, Failure> {
    match home.tmux.spawn(args).await {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.is_no_server() => Ok(None),
        Err(crate::tmux::TmuxError::Command { stderr, .. })
            if stderr.contains("no current target") || stderr.starts_with("can't find pane") =>
        {
            Ok(None)
        }
        Err(crate::tmux::TmuxError::Spawn { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Failure::Trouble(e.to_string())),
    }
}

/// Our sessions among `panes`, by the router's own rule
/// ([`crate::session::sort_panes`]): a pane carrying a valid `@dtmcp_name`
/// is that session; an unnamed pane is the session its tmux session is
/// named after when that session's `meta.json` (read by `original`) records
/// this pane. Other panes (a pane split off by hand and not yet adopted, a
/// tmux session someone else made on the socket, the router's hidden one)
/// are no sessions of ours.
fn name_panes(panes: Vec<PaneInfo>, original: impl Fn(&str) -> Option<String>) -> BTreeMap<String, PaneInfo> {
    let sorted = crate::session::sort_panes(panes, original, &HashSet::new());
    let mut out = BTreeMap::new();
    for pane in sorted.sessions.into_iter().filter(|p| !sorted.foreign.contains(&p.pane_id)) {
        out.entry(pane.session_name.clone()).or_insert(pane);
    }
    out
}

/// Session `name`'s pane, asked of tmux by the id its `meta.json` records
/// (one spawned `display`), when it lives and is still that session's.
async fn pane_of(home: &Home, name: &str) -> Result<Option<PaneInfo>, Failure> {
    let Ok(meta) = store::read_meta(&home.dir(name)) else { return Ok(None) };
    let Ok(id) = PaneId::parse(&meta.pane_id) else { return Ok(None) };
    let Some(text) = ask_tmux(home, &["display", "-p", "-t", id.as_str(), bare_format()]).await? else {
        return Ok(None);
    };
    let pane = crate::tmux::parse_pane(&text, &id).map_err(Failure::of)?;
    Ok(pane.filter(|p| crate::session::is_session(p, name)).map(|mut p| {
        p.session_name = name.to_string();
        p
    }))
}

/// Reads `list-clients` output whose records start with the client's
/// session, then [`CLIENT_FORMAT`]: the people per tmux session.
fn people_of(text: &str) -> HashMap<String, Vec<Client>> {
    let mut out: HashMap<String, Vec<Client>> = HashMap::new();
    for line in text.lines() {
        let Some((session, rest)) = line.split_once('\x1f') else { continue };
        for client in parse_clients(rest) {
            out.entry(session.to_string()).or_default().push(client);
        }
    }
    out
}

/// The names of the session directories that hold logs, sorted.
pub fn logged_names(home: &Home) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(home.cfg.sessions_dir()) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().join(files::META).is_file() || e.path().join(files::TEXT).is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| super::check_name(n).is_ok())
        .collect();
    names.sort_by_key(|a| natural(a));
    names
}

/// A key that sorts `t2` before `t10`: runs of digits compare as numbers.
pub fn natural(name: &str) -> Vec<(String, u64)> {
    let mut key = Vec::new();
    let mut text = String::new();
    let mut digits = String::new();
    for c in name.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            if !digits.is_empty() {
                key.push((std::mem::take(&mut text), digits.parse().unwrap_or(u64::MAX)));
                digits.clear();
            }
            text.push(c);
        }
    }
    key.push((text, digits.parse().unwrap_or(0)));
    key
}

/// One session found by name, open or closed.
#[derive(Debug)]
pub struct Found {
    /// Its name.
    pub name: String,
    /// Its directory.
    pub dir: PathBuf,
    /// Its pane, while it lives.
    pub pane: Option<PaneInfo>,
    /// The pool its logger's connection is kept in.
    pub loggers: Loggers,
}

impl Found {
    /// Whether its pane lives.
    pub fn live(&self) -> bool {
        self.pane.as_ref().is_some_and(|p| !p.pane_dead)
    }

    /// A connection to its logger, if one answers.
    pub async fn logger(&self) -> Result<LoggerClient, ClientError> {
        self.loggers.connect(&self.dir.join(files::SOCKET)).await
    }
}

/// Finds session `name`, or says which sessions there are.
pub async fn find(home: &Home, name: &str) -> Result<Found, Failure> {
    super::check_name(name)?;
    let dir = home.dir(name);
    if !dir.join(files::META).is_file() && !dir.join(files::TEXT).is_file() {
        let scene = Scene::look(home).await?;
        return Err(Failure::NotFound(unknown(home, &scene, name)));
    }
    let pane = pane_of(home, name).await?;
    Ok(Found { name: name.to_string(), dir, pane, loggers: home.loggers.clone() })
}

/// The message for a session that does not exist.
fn unknown(home: &Home, scene: &Scene, name: &str) -> String {
    let open: Vec<&str> = scene.panes.keys().map(String::as_str).collect();
    let closed: Vec<String> = logged_names(home).into_iter().filter(|n| !scene.panes.contains_key(n)).collect();
    let list = |v: &[&str]| if v.is_empty() { "none".to_string() } else { v.join(", ") };
    let closed: Vec<&str> = closed.iter().map(String::as_str).collect();
    let gone = crate::retention::tombstone::find(&home.cfg.home, name)
        .map(|t| format!(" (its logs were deleted: {})", crate::retention::tombstone::describe(&t)))
        .unwrap_or_default();
    format!(
        "no session named {name:?} here, open or closed{gone}; open: {}; closed: {} (state home {})",
        list(&open),
        list(&closed),
        home.cfg.home.display()
    )
}

/// The facts of every live session, and of the closed ones when `closed`.
///
/// The live sessions are observed at once, each in a task of its own: a
/// logger answers when its thread is scheduled and `/proc` is read on the
/// blocking pool, so the waits overlap rather than add up.
pub async fn all(home: &Home, closed: bool) -> Result<Vec<Facts>, Failure> {
    let scene = Scene::look(home).await?;
    let mut tasks = tokio::task::JoinSet::new();
    for (i, (name, pane)) in scene.panes.iter().enumerate() {
        let (dir, pane, loggers) = (home.dir(name), pane.clone(), home.loggers.clone());
        tasks.spawn(async move { (i, observe(loggers, dir, pane).await) });
    }
    // What every session's processes listen on: one look for them all.
    let pids: Vec<u32> = scene.panes.values().filter(|p| !p.pane_dead).map(|p| p.pane_pid).collect();
    let mut ports = tokio::task::spawn_blocking(move || sockets::looks(&pids)).await.unwrap_or_default().into_iter();
    let mut seen: Vec<Option<Observed>> = (0..scene.panes.len()).map(|_| None).collect();
    while let Some(done) = tasks.join_next().await {
        let (i, observed) = done.map_err(|e| Failure::Trouble(format!("looking at a session: {e}")))?;
        seen[i] = Some(observed);
    }
    let mut out = Vec::with_capacity(scene.panes.len());
    for ((name, pane), observed) in scene.panes.iter().zip(seen) {
        let mut facts = live(home, &scene, name, pane, observed.unwrap_or_default());
        if !pane.pane_dead
            && let Some(Ok(look)) = ports.next()
        {
            facts.listening = look.listeners;
            facts.jobs = look.jobs;
            facts.ports_not_seen = look.far;
        }
        out.push(facts);
    }
    if closed {
        for name in logged_names(home).into_iter().filter(|n| !scene.panes.contains_key(n)) {
            out.push(closed_facts(home, &name));
        }
    }
    out.sort_by_key(|a| natural(&a.name));
    Ok(out)
}

/// What the files say, whether the session lives or not.
fn base(home: &Home, name: &str) -> (Facts, Meta) {
    let dir = home.dir(name);
    let meta = store::read_meta(&dir).unwrap_or_default();
    let raw = std::fs::metadata(dir.join(files::RAW)).ok();
    let lines = std::fs::metadata(dir.join(files::INDEX)).map_or(0, |m| m.len() / 8);
    let gaps = std::fs::read(dir.join(GAPS)).map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count() as u64);
    let last_output = raw.as_ref().and_then(|m| m.modified().ok()).map(ms_of);
    let ended = std::fs::read_to_string(dir.join(files::ENDED)).ok().map(|s| s.trim().to_string());
    let agents = agents_of(home, name);
    let facts = Facts {
        name: name.to_string(),
        state: State::Closed,
        since_ms: last_output,
        program: None,
        command: None,
        command_region: None,
        started_by: None,
        detail: None,
        last_command: None,
        last_exit: None,
        last_region: None,
        agents,
        people: Vec::new(),
        host: if meta.host.is_empty() { crate::config::hostname() } else { meta.host.clone() },
        user: None,
        cwd: None,
        log_bytes: raw.map_or(0, |m| m.len()),
        lines,
        gaps,
        logger: LoggerState::None,
        attach: None,
        ended,
        dir,
        created_ms: meta.created_ms,
        listening: Vec::new(),
        jobs: Vec::new(),
        ports_not_seen: Vec::new(),
    };
    (facts, meta)
}

/// The agents that typed into session `name`, the latest first.
fn agents_of(home: &Home, name: &str) -> Vec<Agent> {
    let typed = home.journal.agents_typed_ms(name);
    let mut agents: Vec<Agent> = typed.into_iter().map(|(name, typed_ms)| Agent { name, typed_ms }).collect();
    agents.sort_by(|a, b| b.typed_ms.cmp(&a.typed_ms).then_with(|| a.name.cmp(&b.name)));
    agents
}

fn ms_of(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// A closed session: its files only.
fn closed_facts(home: &Home, name: &str) -> Facts {
    let (mut facts, _) = base(home, name);
    // Since it closed, not since its last output: the directory changes
    // when the logger takes its socket away on leaving (and later only
    // when a marker file is made in it).
    let stamp = |f: &str| std::fs::metadata(facts.dir.join(f)).and_then(|m| m.modified()).ok().map(ms_of);
    facts.since_ms = ["", files::CHECKPOINT, files::ENDED].into_iter().filter_map(stamp).chain(facts.since_ms).max();
    if let Some(r) = last_finished_on_disk(&facts.dir) {
        set_last(&mut facts, &r);
    }
    facts
}

fn set_last(facts: &mut Facts, r: &Region) {
    facts.last_command = Some(r.command.clone());
    facts.last_exit = r.exit;
    facts.last_region = Some(r.id.0);
}

/// The last region of `dir` that finished, read from the end of
/// `regions.jsonl` (the whole file only when its tail holds none).
fn last_finished_on_disk(dir: &Path) -> Option<Region> {
    use std::os::unix::fs::FileExt;
    const TAIL: u64 = 64 * 1024;
    let file = std::fs::File::open(dir.join(files::REGIONS)).ok()?;
    let len = file.metadata().ok()?.len();
    let from = len.saturating_sub(TAIL);
    let mut buf = vec![0u8; (len - from) as usize];
    file.read_exact_at(&mut buf, from).ok()?;
    let text = String::from_utf8_lossy(&buf);
    // The first line of a tail may be cut; it does not parse and is skipped.
    let mut latest: BTreeMap<u64, Region> = BTreeMap::new();
    for line in text.lines() {
        if let Ok(r) = serde_json::from_str::<Region>(line) {
            latest.insert(r.id.0, r);
        }
    }
    let found = latest.into_values().rev().find(|r| r.end.is_some());
    match found {
        Some(r) => Some(r),
        None if from > 0 => store::read_regions(dir).ok()?.into_iter().rev().find(|r| r.end.is_some()),
        None => None,
    }
}

/// What the logger says about a live session.
struct Heard {
    logger: LoggerState,
    status: Option<Status>,
    /// The region running in the innermost shell (or the line typed into
    /// a program), if any.
    running: Option<Region>,
    /// The last region that finished.
    last: Option<Region>,
}

impl Default for Heard {
    fn default() -> Heard {
        Heard { logger: LoggerState::Down, status: None, running: None, last: None }
    }
}

async fn hear(loggers: &Loggers, dir: &Path) -> Heard {
    let mut heard = Heard::default();
    let mut client = match loggers.connect(&dir.join(files::SOCKET)).await {
        Ok(c) => c,
        Err(e) => {
            heard.logger = logger_state(&e);
            heard.last = last_finished_on_disk(dir);
            return heard;
        }
    };
    let status = match client.status().await {
        Ok(s) => s,
        Err(e) => {
            heard.logger = logger_state(&e);
            heard.last = last_finished_on_disk(dir);
            return heard;
        }
    };
    heard.logger = LoggerState::Ok;
    heard.running = running_region(&mut client, &status).await;
    heard.last = match status.last_region.clone().filter(|r| r.end.is_some()) {
        Some(r) => Some(r),
        None => client.regions(16).await.ok().and_then(|rs| rs.into_iter().rev().find(|r| r.end.is_some())),
    };
    heard.status = Some(status);
    heard
}

fn logger_state(e: &ClientError) -> LoggerState {
    match e {
        ClientError::Stalled { .. } => LoggerState::Stalled,
        _ => LoggerState::Down,
    }
}

/// The region that runs in the innermost shell now: the line typed into a
/// program, else the innermost open command, unless that shell shows its
/// prompt (then the open regions are the commands that started it).
async fn running_region(client: &mut LoggerClient, status: &Status) -> Option<Region> {
    let id: RegionId = match status.shell.input {
        Some(id) => id,
        None if status.shell.at_prompt => return None,
        None => *status.shell.open.last()?,
    };
    match status.last_region.as_ref().filter(|r| r.id == id) {
        Some(r) => Some(r.clone()),
        None => client.region(id).await.ok().flatten(),
    }
}

/// What a live pane's logger and `/proc` say.
#[derive(Default)]
struct Observed {
    heard: Heard,
    /// The foreground job, when it was looked at (not for an integrated
    /// shell at its prompt with nothing running: that is idle).
    job: Option<Job>,
    /// Whether the pane's shell has our integration (per its logger; per
    /// `meta.json` when no logger answers).
    integrated: bool,
}

/// Asks the logger of the session in `dir`, then `/proc` where needed.
async fn observe(loggers: Loggers, dir: PathBuf, pane: PaneInfo) -> Observed {
    if pane.pane_dead {
        return Observed::default();
    }
    let heard = hear(&loggers, &dir).await;
    let integrated = match &heard.status {
        Some(s) => s.shell.integrated,
        None => store::read_meta(&dir).is_ok_and(|m| m.integrated),
    };
    let quiet_shell = integrated && heard.running.is_none() && heard.status.as_ref().is_some_and(|s| s.shell.at_prompt);
    let job = match quiet_shell {
        true => None,
        false => tokio::task::spawn_blocking(move || {
            procs::job(procs::Pane { pid: pane.pane_pid, tty: &pane.pane_tty }).ok()
        })
        .await
        .ok()
        .flatten(),
    };
    Observed { heard, job, integrated }
}

/// A live session: its files, and what was observed of it.
fn live(home: &Home, scene: &Scene, name: &str, pane: &PaneInfo, seen: Observed) -> Facts {
    let (mut facts, meta) = base(home, name);
    if pane.pane_dead {
        if let Some(r) = last_finished_on_disk(&facts.dir) {
            set_last(&mut facts, &r);
        }
        return facts;
    }
    let Observed { heard, job, integrated } = seen;
    facts.logger = heard.logger;
    facts.program = Some(pane.pane_current_command.clone());
    facts.cwd = Some(pane.pane_current_path.clone()).filter(|p| !p.is_empty());
    facts.attach = Some(home.attach_line(&pane.tmux_session));
    facts.people = scene.people.get(&pane.tmux_session).map(|c| people(c)).unwrap_or_default();
    if let Some(r) = &heard.last {
        set_last(&mut facts, r);
    }
    if let Some(r) = &heard.running {
        facts.command = Some(r.command.clone());
        facts.command_region = Some(r.id.0);
        facts.started_by = home.journal.starter_of(name, r.id);
    }
    facts.state = judge(job.as_ref(), heard.running.is_some(), integrated);
    facts.since_ms = match facts.state {
        State::Running | State::Waiting => heard.running.as_ref().map(|r| r.started_ms),
        _ => heard.last.as_ref().and_then(|r| r.ended_ms).or(Some(meta.created_ms)).filter(|&t| t > 0),
    };
    if let Some(s) = &heard.status {
        if !s.shell.host.is_empty() {
            facts.host.clone_from(&s.shell.host);
        }
        facts.user = Some(s.shell.user.clone()).filter(|u| !u.is_empty());
    }
    if let Some(job) = &job {
        facts.program = Some(leaf(job));
        facts.detail = Some(job.line());
        if let Some(host) = &job.place.host {
            facts.host.clone_from(host);
        }
        if job.place.user.is_some() {
            facts.user.clone_from(&job.place.user);
        }
    }
    facts
}

/// The state from the foreground job (`None` when not looked at: an
/// integrated shell at its prompt with nothing running).
fn judge(job: Option<&Job>, running: bool, integrated: bool) -> State {
    let Some(job) = job else { return State::Idle };
    // The pane's shell reading the terminal is at its prompt, unless one
    // of its commands runs (`read` is the shell itself); a program under
    // it that reads the terminal waits for input.
    let shell_itself = job.own_shell && procs::is_shell_name(&leaf(job));
    match job.activity {
        Activity::WaitingForInput if shell_itself && !running => State::Idle,
        Activity::WaitingForInput => State::Waiting,
        _ if shell_itself && !running && !integrated => State::Idle,
        _ => State::Running,
    }
}

/// The deepest program of the foreground job: what holds the terminal.
fn leaf(job: &Job) -> String {
    job.place.via.last().cloned().unwrap_or_else(|| job.comm.clone())
}

fn people(clients: &[Client]) -> Vec<Person> {
    clients
        .iter()
        .map(|c| Person {
            tty: c.tty.clone(),
            cols: c.cols,
            rows: c.rows,
            attached_ms: c.attached * 1000,
            last_input_ms: c.last_input.map(|s| s * 1000),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use dtmcp_core::procs::Place;

    fn pane(id: &str, tmux_session: &str, named: &str) -> PaneInfo {
        let end = crate::tmux::field_end();
        let line = format!(
            "{id}\x1f{tmux_session}\x1f0\x1f0\x1f100\x1f/dev/pts/1\x1f0\x1f80\x1f24\x1f1\x1f@0\x1f0\x1flatest\x1f{named}{end}bash{end}/tmp{end}\n"
        );
        crate::tmux::parse_panes(&line).expect("pane").remove(0)
    }

    #[test]
    fn panes_are_sessions_by_their_name_or_their_meta() {
        let panes = vec![
            pane("%1", "t1", "t1"),
            pane("%2", "t1", "t1+1"),
            pane("%3", "old", ""),
            pane("%4", "old", ""),
            pane("%5", "theirs", ""),
            pane("%6", "__dtmcp_ctl", ""),
        ];
        let named = name_panes(panes, |n| (n == "old").then(|| "%3".to_string()));
        let got: Vec<(&str, &str)> = named.iter().map(|(n, p)| (n.as_str(), p.pane_id.as_str())).collect();
        assert_eq!(got, [("old", "%3"), ("t1", "%1"), ("t1+1", "%2")]);
        assert_eq!(named["t1+1"].tmux_session, "t1", "a split pane attaches through its window's session");
    }

    #[test]
    fn people_are_grouped_by_session_and_control_clients_left_out() {
        let text = "t1\x1f0\x1f/dev/pts/4\x1f80\x1f24\x1f100\x1f130\nt1\x1f1\x1f\x1f80\x1f24\x1f1\x1f2\nt2\x1f0\x1f/dev/pts/5\x1f80\x1f24\x1f100\x1f100\n";
        let people = people_of(text);
        assert_eq!(people["t1"].len(), 1);
        assert_eq!(people["t1"][0].last_input, Some(130));
        assert_eq!(people["t2"][0].last_input, None);
    }

    #[test]
    fn names_sort_as_people_count() {
        let mut names = vec!["t10", "t2", "b", "t1+1", "t1"];
        names.sort_by_key(|a| natural(a));
        assert_eq!(names, ["b", "t1", "t1+1", "t2", "t10"]);
    }

    fn job(comm: &str, is_shell: bool, activity: Activity) -> Job {
        Job {
            pgid: 1,
            comm: comm.into(),
            own_shell: is_shell,
            activity,
            reason: String::new(),
            reader: comm.into(),
            password: false,
            place: Place::default(),
        }
    }

    #[test]
    fn the_state_comes_from_the_foreground_job() {
        use Activity::*;
        assert_eq!(judge(None, false, true), State::Idle);
        assert_eq!(judge(Some(&job("sleep", false, Sleeping)), true, true), State::Running);
        assert_eq!(judge(Some(&job("bash", true, WaitingForInput)), true, true), State::Waiting, "read at a prompt");
        let mut python = job("sh", true, WaitingForInput);
        python.place.via = vec!["sh".into(), "python3".into()];
        assert_eq!(judge(Some(&python), false, false), State::Waiting, "sh -c python3");
        assert_eq!(judge(Some(&job("bash", true, WaitingForInput)), false, false), State::Idle, "a plain shell");
        assert_eq!(judge(Some(&job("python3", false, Working)), false, false), State::Running);
    }

    #[test]
    fn the_last_finished_region_is_read_from_the_tail() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = store::RegionLog::open(dir.path()).expect("open");
        for id in 1..=3u64 {
            let mut r = Region { id: RegionId(id), command: format!("c{id}"), ..Region::default() };
            log.append(&r).expect("append");
            if id < 3 {
                r.end = Some(Default::default());
                r.exit = Some(id as i32);
                log.append(&r).expect("append");
            }
        }
        let r = last_finished_on_disk(dir.path()).expect("a region");
        assert_eq!((r.command.as_str(), r.exit), ("c2", Some(2)));
    }
}
