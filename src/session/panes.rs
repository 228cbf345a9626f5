//! Panes as sessions: which pane is which session, panes made by
//! splitting a session's window, panes someone else made (split with
//! tmux's own keys) taken on as sessions, and pinning a pane's size.
//!
//! A session's pane carries its name in the pane option `@dtmcp_name`.
//! Panes made before that option existed are known by their tmux session's
//! name and the pane id in `meta.json`. A pane without a name in a tmux
//! session that holds one of ours is a *stray*: it is adopted (named
//! `<window>+N`, given a logger, marked `adopted`) the next time the panes
//! are listed, which every call and the logger watchdog do.

use std::collections::{BTreeMap, HashSet};

use super::{SessionError, Sessions, validate_name};
use crate::config::{hostname, now_ms};
use crate::tmux::PaneInfo;
use dtmcp_core::store::{self, Meta};

/// The pane option that names a pane's session.
pub const OPT_NAME: &str = "@dtmcp_name";

/// Panes sorted into ours and strays.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Sorted {
    /// Our sessions' panes, `session_name` set to the session's name, and
    /// panes of tmux sessions that are not ours (as tmux names them).
    pub sessions: Vec<PaneInfo>,
    /// Unnamed panes in tmux sessions holding one of ours.
    pub strays: Vec<PaneInfo>,
}

/// Sorts `panes`: a pane named by its option is that session; an unnamed
/// pane is its tmux session's first pane when `original` (the pane id in
/// that session's `meta.json`) says so and no other pane claims the name,
/// else a stray when its tmux session holds one of ours. Tmux sessions in
/// `busy` (a pane being made there) have no strays.
pub(super) fn sort_panes(
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

impl Drop for Making<'_> {
    fn drop(&mut self) {
        self.sessions.making.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.tmux_session);
    }
}

impl Sessions {
    /// Every live pane that is one of our sessions (named as we named it),
    /// after adopting the strays.
    pub async fn panes(&self) -> Result<Vec<PaneInfo>, SessionError> {
        let sorted = self.sorted().await?;
        if sorted.strays.is_empty() {
            return Ok(sorted.sessions);
        }
        let _adopting = self.adopting.lock().await;
        // Another call may have adopted them meanwhile: look again.
        let sorted = self.sorted().await?;
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

    async fn sorted(&self) -> Result<Sorted, SessionError> {
        let panes = self.tmux.list_panes().await?;
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
        };
        store::write_meta(&dir, &meta)?;
        self.tmux.run(&["set-option", "-p", "-t", pane.pane_id.as_str(), OPT_NAME, &name]).await?;
        pane.session_name.clone_from(&name);
        pane.dtmcp_name.clone_from(&name);
        let session = super::Session { name, dir, pane: pane.clone(), meta };
        self.attach_logger(&session, None).await?;
        Ok(pane)
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
                let alone = self.panes().await?.iter().filter(|p| p.window_id == s.pane.window_id).count() == 1;
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
        let shown = self.tmux.display(pane, "#{pane_width} #{pane_height}").await?;
        let mut f = shown.split_whitespace().map(|n| n.parse().unwrap_or(0));
        Ok((f.next().unwrap_or(0), f.next().unwrap_or(0)))
    }

    /// Whether session `name`'s window keeps its size whatever clients
    /// attach (`window-size` is manual for it).
    pub async fn pinned(&self, pane: &str) -> bool {
        self.tmux.display(pane, "#{window-size}").await.is_ok_and(|v| v.trim() == "manual")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tmux::PaneId;

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
        // A tmux session getting a pane from us has no strays.
        let busy = HashSet::from(["t1".to_string()]);
        assert_eq!(names(&sort_panes(panes, original, &busy).strays), vec![("%4", "old")]);
    }

    #[test]
    fn split_names_take_the_first_free_number() {
        let taken = HashSet::from(["t1".to_string(), "t1+1".to_string(), "t1+3".to_string()]);
        assert_eq!(split_name("t1", &taken), "t1+2");
        assert_eq!(split_name("b", &taken), "b+1");
    }
}
