//! Panes as sessions: which pane is which session, panes made by
//! splitting a session's window, panes someone else made (split with
//! tmux's own keys) taken on as sessions, and pinning a pane's size.
//!
//! A session's pane carries its name in the pane option `@dtmcp_name`.
//! Panes made before that option existed are known by their tmux session's
//! name and the pane id in `meta.json`. A pane without a name in a tmux
//! session that holds one of ours is a *stray*: it is adopted (named
//! `<window>+N`, given a logger, marked `adopted`) the next time the panes
//! are listed.
//!
//! Finding one session lists nothing: `meta.json` names its pane, and one
//! small tmux command checks that pane (see [`Sessions::resolve_quiet`]).
//! So that strays are still taken on while no call lists the panes, a task
//! started with the first call ([`Sessions::watch_strays`]) lists them once
//! whenever tmux says a pane may have appeared
//! ([`crate::tmux::Tmux::topology`]), and never on a timer.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use super::{SessionError, Sessions, validate_name};
use crate::config::{hostname, now_ms};
use crate::tmux::{PaneId, PaneInfo};
use dtmcp_core::store::{self, Meta};
use tokio::sync::watch;

/// How long the stray watch lets a burst of notifications settle (a new
/// session brings three) before it lists the panes once.
const SETTLE: Duration = Duration::from_millis(20);

/// The pane option that names a pane's session.
pub const OPT_NAME: &str = "@dtmcp_name";

/// Panes sorted into ours and strays.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Sorted {
    /// Our sessions' panes, `session_name` set to the session's name, and
    /// panes of tmux sessions that are not ours (as tmux names them).
    pub sessions: Vec<PaneInfo>,
    /// Unnamed panes in tmux sessions holding one of ours.
    pub strays: Vec<PaneInfo>,
    /// Which of `sessions` are panes of tmux sessions that are not ours.
    pub foreign: HashSet<PaneId>,
}

/// Whether `pane`, found where `meta.json` of session `name` says its pane
/// is, is that session: named so by its option, or (made before the option
/// existed) unnamed and first in the tmux session of that name. The same
/// rule as [`sort_panes`], for one pane.
pub(crate) fn is_session(pane: &PaneInfo, name: &str) -> bool {
    match validate_name(&pane.dtmcp_name) {
        Ok(()) => pane.dtmcp_name == name,
        Err(_) => pane.tmux_session == name,
    }
}

/// Sorts `panes`: a pane named by its option is that session; an unnamed
/// pane is its tmux session's first pane when `original` (the pane id in
/// that session's `meta.json`) says so and no other pane claims the name,
/// else a stray when its tmux session holds one of ours. Tmux sessions in
/// `busy` (a pane being made there) have no strays. A pane of a tmux session
/// that is none of ours stays under its tmux session's name, marked foreign.
pub(crate) fn sort_panes(
    panes: Vec<PaneInfo>,
    original: impl Fn(&str) -> Option<String>,
    busy: &HashSet<String>,
) -> Sorted {
    let claimed: HashSet<String> = panes.iter().map(|p| p.dtmcp_name.clone()).filter(|n| !n.is_empty()).collect();
    let ours: HashSet<String> =
        panes.iter().filter(|p| !p.dtmcp_name.is_empty()).map(|p| p.tmux_session.clone()).collect();
    let mut originals = BTreeMap::new();
    let mut sorted = Sorted::default();
    for mut pane in panes {
        if !pane.dtmcp_name.is_empty() && validate_name(&pane.dtmcp_name).is_ok() {
            pane.session_name.clone_from(&pane.dtmcp_name);
            sorted.sessions.push(pane);
            continue;
        }
        let tmux_session = pane.tmux_session.clone();
        if validate_name(&tmux_session).is_err() {
            continue;
        }
        let first = originals.entry(tmux_session.clone()).or_insert_with(|| original(&tmux_session)).clone();
        if !claimed.contains(&tmux_session) && first.as_deref() == Some(pane.pane_id.as_ref() as &str) {
            sorted.sessions.push(pane);
        } else if (ours.contains(&tmux_session) || first.is_some()) && !busy.contains(&tmux_session) {
            sorted.strays.push(pane);
        } else if !ours.contains(&tmux_session) && first.is_none() {
            sorted.foreign.insert(pane.pane_id.clone());
            sorted.sessions.push(pane);
        }
    }
    sorted
}

/// The first `<base>+N` not in `taken`.
pub(super) fn split_name(base: &str, taken: &HashSet<String>) -> String {
    (1..).map(|n| format!("{base}+{n}")).find(|n| !taken.contains(n)).unwrap_or_else(|| format!("{base}+0"))
}

/// The window a pane's size follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// Set to this size and pinned: attaching clients do not change it.
    Pinned {
        /// Columns.
        cols: u16,
        /// Rows.
        rows: u16,
    },
    /// Following the attached clients again (tmux's `window-size` option
    /// as the server sets it).
    Follow,
}

/// Marks a tmux session as getting a new pane, so that the pane is not
/// taken for a stray before it is named; unmarks it when dropped.
pub(super) struct Making<'a> {
    sessions: &'a Sessions,
    tmux_session: String,
}

impl<'a> Making<'a> {
    pub(super) fn new(sessions: &'a Sessions, tmux_session: &str) -> Making<'a> {
        sessions.making.lock().unwrap_or_else(|e| e.into_inner()).insert(tmux_session.to_string());
        Making { sessions, tmux_session: tmux_session.to_string() }
    }
}

/// What a pane listing asks tmux for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listing {
    /// Also each pane's current command and directory, for a reply that
    /// shows them (they cost tmux a look in `/proc` per pane).
    Shown,
    /// Only what finds and sorts the panes.
    Bare,
}

/// The task that takes on strays when tmux says a pane may have appeared.
#[derive(Debug, Default)]
pub(super) enum StrayWatch {
    /// Not started yet: the first call starts it.
    #[default]
    Idle,
    /// Running; aborted when its [`Sessions`] is dropped.
    Running(tokio::task::AbortHandle),
    /// Never started: this is the watch's own [`Sessions`], or one that
    /// only sweeps.
    Never,
}

impl Drop for Sessions {
    fn drop(&mut self) {
        if let StrayWatch::Running(task) = &*self.strays.lock().unwrap_or_else(|e| e.into_inner()) {
            task.abort();
        }
    }
}

impl Drop for Making<'_> {
    fn drop(&mut self) {
        self.sessions.making.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.tmux_session);
    }
}

impl Sessions {
    /// Every live pane that is one of our sessions (named as we named it),
    /// after adopting the strays, with its current command and directory:
    /// for the replies that show them.
    pub async fn panes(&self) -> Result<Vec<PaneInfo>, SessionError> {
        self.panes_with(Listing::Shown).await
    }

    /// The same, with only what `listing` asks for.
    pub async fn panes_with(&self, listing: Listing) -> Result<Vec<PaneInfo>, SessionError> {
        self.watch_strays();
        let sorted = self.sorted(listing).await?;
        if sorted.strays.is_empty() {
            return Ok(sorted.sessions);
        }
        let _adopting = self.adopting.lock().await;
        // Another call may have adopted them meanwhile: look again.
        let sorted = self.sorted(listing).await?;
        let mut sessions = sorted.sessions;
        for stray in sorted.strays {
            let taken = self.taken_names(&sessions);
            match self.adopt(stray, &taken).await {
                Ok(pane) => sessions.push(pane),
                Err(e) => eprintln!("docent-terminal-mcp: could not adopt a pane: {e}"),
            }
        }
        Ok(sessions)
    }

    /// The panes sorted, strays not adopted.
    pub(super) async fn sorted(&self, listing: Listing) -> Result<Sorted, SessionError> {
        let panes = match listing {
            Listing::Shown => self.tmux.list_panes().await?,
            Listing::Bare => self.tmux.list_panes_bare().await?,
        };
        let busy = self.making.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let original = |name: &str| store::read_meta(&self.cfg.session_dir(name)).ok().map(|m| m.pane_id);
        Ok(sort_panes(panes, original, &busy))
    }

    /// The names a new session may not take: our sessions' and every tmux
    /// session's (a tmux session outlives its first pane).
    pub(super) fn taken_names(&self, panes: &[PaneInfo]) -> HashSet<String> {
        panes.iter().flat_map(|p| [p.session_name.clone(), p.tmux_session.clone()]).collect()
    }

    /// Takes on `pane` as session `<its tmux session>+N`: a directory, a
    /// `meta.json` marked adopted, its name on the pane, and a logger. Its
    /// program runs already, so nothing waits for the logger: output
    /// before the adoption is not in the log.
    async fn adopt(&self, mut pane: PaneInfo, taken: &HashSet<String>) -> Result<PaneInfo, SessionError> {
        let name = split_name(&pane.tmux_session, taken);
        if pane.pane_current_command.is_empty() {
            // A bare listing leaves it out; what the pane ran when adopted
            // is recorded once.
            pane.pane_current_command = self.tmux.display(&pane.pane_id, "#{pane_current_command}").await?;
        }
        let dir = self.prepare_dir(&name)?;
        let meta = Meta {
            name: name.clone(),
            host: hostname(),
            tmux_socket: self.cfg.socket.clone(),
            tmux_socket_path: crate::tmux::socket_path(&self.cfg.socket).display().to_string(),
            tmux_pid: 0,
            pane_id: pane.pane_id.to_string(),
            command: vec![pane.pane_current_command.clone()],
            integrated: false,
            created_ms: now_ms(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            prompt_pattern: None,
            adopted: true,
            parent: Some(pane.tmux_session.clone()),
            tty: pane.pane_tty.clone(),
        };
        store::write_meta(&dir, &meta)?;
        self.tmux.run(&["set-option", "-p", "-t", pane.pane_id.as_str(), OPT_NAME, &name]).await?;
        pane.session_name.clone_from(&name);
        pane.dtmcp_name.clone_from(&name);
        let session = super::Session { name, dir, pane: pane.clone(), meta, loggers: self.loggers.clone() };
        self.attach_logger(&session, None).await?;
        Ok(pane)
    }

    /// Starts the stray watch unless it runs (or must not): a task that
    /// lists the panes, adopting strays, once after each burst of topology
    /// notifications. It needs a runtime, so the first call starts it.
    pub(super) fn watch_strays(&self) {
        let mut state = self.strays.lock().unwrap_or_else(|e| e.into_inner());
        if !matches!(*state, StrayWatch::Idle) || tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        // Subscribed now, before the first command connects a control
        // client (which counts as a change), so that it is not missed.
        let changes = self.tmux.topology();
        let watch = self.sibling();
        *state = StrayWatch::Running(tokio::spawn(async move { watch.adopt_on_change(changes).await }).abort_handle());
    }

    /// Lists the panes (adopting strays) after each change, until aborted.
    async fn adopt_on_change(&self, mut changes: watch::Receiver<u64>) {
        while changes.changed().await.is_ok() {
            tokio::time::sleep(SETTLE).await;
            changes.borrow_and_update();
            if let Err(e) = self.panes_with(Listing::Bare).await {
                eprintln!("docent-terminal-mcp: could not look for panes to take on: {e}");
            }
        }
    }

    /// Another handle on the same sessions for the stray watch: it shares
    /// which tmux sessions get a pane now and the adoption lock, and starts
    /// no watch of its own.
    fn sibling(&self) -> Sessions {
        Sessions {
            cfg: self.cfg.clone(),
            tmux: self.tmux.clone(),
            shell_dir: self.shell_dir.clone(),
            bin_dir: self.bin_dir.clone(),
            notes: Default::default(),
            repairing: Default::default(),
            making: self.making.clone(),
            adopting: self.adopting.clone(),
            strays: Mutex::new(StrayWatch::Never),
            seen: Default::default(),
            loggers: self.loggers.clone(),
            repair: Default::default(),
            metas: self.metas.clone(),
        }
    }

    /// Sets session `name`'s size, or lets it follow attached clients
    /// again; returns the pane's size afterwards.
    pub async fn resize(&self, name: &str, size: Size) -> Result<(u32, u32), SessionError> {
        let s = self.resolve(name).await?;
        let pane = s.pane.pane_id.as_str();
        match size {
            Size::Follow => {
                self.tmux.run(&["set-option", "-w", "-u", "-t", pane, "window-size"]).await?;
                // The window takes its clients' size again at once.
                self.tmux.run(&["resize-window", "-A", "-t", pane]).await?;
                self.tmux.run(&["set-option", "-w", "-u", "-t", pane, "window-size"]).await?;
            }
            Size::Pinned { cols, rows } => {
                let (c, r) = (cols.to_string(), rows.to_string());
                let alone = self.tmux.display(pane, "#{window_panes}").await?.trim() == "1";
                // resize-window sets the window's `window-size` to manual:
                // attaching clients no longer resize it.
                if alone {
                    self.tmux.run(&["resize-window", "-t", pane, "-x", &c, "-y", &r]).await?;
                } else {
                    self.tmux.run(&["set-option", "-w", "-t", pane, "window-size", "manual"]).await?;
                    self.tmux.run(&["resize-pane", "-t", pane, "-x", &c, "-y", &r]).await?;
                }
            }
        }
        // tmux tells nobody of a resize: the sizes seen lately may be old.
        self.seen().clear();
        let shown = self.tmux.display(pane, "#{pane_width} #{pane_height}").await?;
        let mut f = shown.split_whitespace().map(|n| n.parse().unwrap_or(0));
        Ok((f.next().unwrap_or(0), f.next().unwrap_or(0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pane(id: &str, tmux_session: &str, name: &str) -> PaneInfo {
        PaneInfo {
            pane_id: PaneId::parse(id).expect("pane id"),
            session_name: tmux_session.into(),
            tmux_session: tmux_session.into(),
            window_index: 0,
            pane_index: 0,
            pane_pid: 1,
            pane_tty: String::new(),
            pane_current_command: "bash".into(),
            pane_current_path: "/".into(),
            pane_dead: false,
            pane_width: 80,
            pane_height: 24,
            pane_active: true,
            window_id: "@0".into(),
            session_attached: 0,
            window_pinned: false,
            dtmcp_name: name.into(),
        }
    }

    fn names(panes: &[PaneInfo]) -> Vec<(&str, &str)> {
        panes.iter().map(|p| (p.pane_id.as_ref() as &str, p.session_name.as_str())).collect()
    }

    #[test]
    fn panes_are_named_by_option_then_by_meta_and_the_rest_are_strays() {
        let panes = vec![
            pane("%0", "t1", "t1"),
            pane("%1", "t1", "t1+1"),
            pane("%2", "t1", ""),
            pane("%3", "old", ""),
            pane("%4", "old", ""),
            pane("%5", "foreign", ""),
        ];
        let original = |s: &str| (s == "old").then(|| "%3".to_string());
        let sorted = sort_panes(panes.clone(), original, &HashSet::new());
        assert_eq!(names(&sorted.sessions), vec![("%0", "t1"), ("%1", "t1+1"), ("%3", "old"), ("%5", "foreign")]);
        assert_eq!(names(&sorted.strays), vec![("%2", "t1"), ("%4", "old")]);
        assert_eq!(sorted.foreign, HashSet::from([PaneId::parse("%5").expect("pane id")]));
        // A tmux session getting a pane from us has no strays.
        let busy = HashSet::from(["t1".to_string()]);
        assert_eq!(names(&sort_panes(panes, original, &busy).strays), vec![("%4", "old")]);
    }

    #[test]
    fn one_pane_is_its_session_by_the_same_rule() {
        assert!(is_session(&pane("%1", "t1", "t1+1"), "t1+1"));
        assert!(!is_session(&pane("%1", "t1", "t1+1"), "t1"), "a named pane is only its name");
        assert!(is_session(&pane("%3", "old", ""), "old"), "made before the option");
        assert!(is_session(&pane("%3", "old", "bad name"), "old"), "a name we cannot use is no name");
        assert!(!is_session(&pane("%3", "renamed", ""), "old"));
    }

    #[test]
    fn split_names_take_the_first_free_number() {
        let taken = HashSet::from(["t1".to_string(), "t1+1".to_string(), "t1+3".to_string()]);
        assert_eq!(split_name("t1", &taken), "t1+2");
        assert_eq!(split_name("b", &taken), "b+1");
    }
}
