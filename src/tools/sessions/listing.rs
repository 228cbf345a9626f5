//! `session_list`: a few lines and a row of data for every open session,
//! then the closed sessions whose logs are kept.
//!
//! A listing is the one call whose work grows with the sessions open, so
//! each kind of question is asked once for all of them, and all at once:
//! one listing of the panes beside one of the pinned windows, one look at
//! every pane's processes on the blocking pool, every logger's status
//! asked together (their round trips overlap, and the loggers answer on
//! both cores), and each session's `meta.json` and `state.json` read
//! again only when they were replaced (see [`crate::stamped`]). Nothing
//! that can change while the files stay the same is kept: the panes,
//! ports and statuses are asked afresh on every call.

use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dtmcp_core::procs::current::{self, Current};
use dtmcp_core::procs::is_shell_name;
use dtmcp_core::procs::sockets::Look;
use dtmcp_core::protocol::Status;
use dtmcp_core::store::{Meta, files};
use serde_json::Value;

use crate::session::Listing;
use crate::tmux::PaneInfo;
use crate::tools::replies::ports;
use crate::tools::replies::reply::Reply;
use crate::tools::sessions::presence::pane_line;
use crate::tools::sessions::statuses::{Since, Written};
use crate::tools::{Terminal, ToolError};

/// What a listing found out about one session.
struct Gathered<'a> {
    pane: &'a PaneInfo,
    /// Whether its window's size is pinned.
    pinned: bool,
    /// Its `meta.json`; `None` for a tmux session that is not ours.
    meta: Option<Arc<Meta>>,
    /// Its logger's status; `None` when it did not answer.
    status: Option<Arc<Status>>,
    /// What its processes listen on; `None` for a dead pane.
    look: Option<Look>,
}

impl Terminal {
    /// The reply of `session_list`.
    pub(super) async fn list_body(&self) -> Result<Reply, ToolError> {
        let sessions = self.sessions();
        // Listed bare: the current command and directory are found below,
        // off tmux's one thread and beside the loggers' answers.
        let (panes, pinned) = tokio::join!(sessions.panes_with(Listing::Bare), sessions.pinned_windows());
        let mut panes = panes?;
        // The sessions just listed are the live ones: no second listing.
        let live = panes.iter().map(|p| p.session_name.clone()).collect();
        let closed = self.closed_lines(&live);
        let mut reply = Reply::default();
        if panes.is_empty() {
            reply.push_str(&format!("no sessions are open; session_create makes one\n{closed}"));
        }
        let dirs: Vec<PathBuf> = panes.iter().map(|p| sessions.cfg.session_dir(&p.session_name)).collect();
        // A pane whose meta.json cannot be read is no session of ours (a
        // tmux session someone else made): it has no logger to ask.
        let metas: Vec<Option<Arc<Meta>>> = dirs.iter().map(|dir| sessions.meta_in(dir).ok()).collect();
        let statuses =
            futures_util::future::join_all(panes.iter().zip(&dirs).zip(&metas).map(|((pane, dir), meta)| async move {
                meta.as_ref()?;
                self.status_for_listing(pane, dir).await
            }));
        let ((currents, looks), statuses) = tokio::join!(currents_and_looks(&panes), statuses);
        for (pane, current) in panes.iter_mut().zip(currents) {
            pane.pane_current_command = current.command;
            pane.pane_current_path = current.path;
        }
        let mut rows = Vec::with_capacity(panes.len());
        let gathered = panes.iter().zip(metas).zip(statuses).zip(looks);
        for ((((pane, meta), status), look), dir) in gathered.zip(&dirs) {
            let g = Gathered { pane, pinned: pinned.contains(&pane.window_id), meta, status, look };
            let (mut entry, row) = self.list_entry(&g).await;
            // Each session's lines and row with its own placeholders: the
            // pass over the whole reply knows the server's secrets only.
            let mut row = Value::Object(row);
            let mut texts = vec![&mut entry];
            texts_of(&mut row, &mut texts);
            self.inner.secrets.redact_each(dir, &mut texts);
            reply.push_str(&entry);
            rows.push(row);
        }
        if !panes.is_empty() {
            reply.push_str(&closed);
        }
        reply.facts.details.insert("sessions".into(), Value::Array(rows));
        Ok(reply)
    }

    /// The lines of `session_list` about one session, and its row as data.
    async fn list_entry(&self, g: &Gathered<'_>) -> (String, serde_json::Map<String, Value>) {
        let pane = g.pane;
        let name = &pane.session_name;
        let attach = self.sessions().attach_command(&pane.tmux_session);
        let mut out = String::with_capacity(256);
        let mut row = serde_json::Map::new();
        row.insert("name".into(), name.as_str().into());
        // A pane kept after its process exited (`remain-on-exit`) runs
        // nothing and is in no directory.
        if pane.pane_dead {
            let _ = write!(out, "{name}: its process exited");
            row.insert("exited".into(), true.into());
        } else {
            let _ = write!(out, "{name}: {} in {}", pane.pane_current_command, pane.pane_current_path);
        }
        row.insert("program".into(), pane.pane_current_command.as_str().into());
        row.insert("cwd".into(), pane.pane_current_path.as_str().into());
        if let Some(r) = g.status.as_ref().and_then(|s| s.last_region.as_ref()) {
            match r.exit {
                Some(code) => {
                    let _ = write!(out, " · last: `{}` exit {code}", r.command);
                    row.insert("last_exit".into(), code.into());
                }
                None => {
                    let _ = write!(out, " · last: `{}` running", r.command);
                }
            }
            row.insert("last_command".into(), r.command.as_str().into());
        }
        let _ = writeln!(out, "\n  {}", pane_line(pane));
        let seen = self.seen_given(pane, g.status.as_deref()).await;
        if let Some(who) = Terminal::presence_line(g.pinned, g.meta.as_deref(), &seen) {
            let _ = writeln!(out, "  {who}");
        }
        if let Some(look) = &g.look {
            out.push_str(&ports::listing(look));
            row.extend(ports::details(look, None));
        }
        let _ = writeln!(out, "  attach: {attach}");
        row.insert("attach".into(), attach.into());
        (out, row)
    }

    /// The status of the logger of `pane`'s session (in `dir`): the one
    /// the last listing had while it still holds (see
    /// [`crate::tools::sessions::statuses`]), else
    /// asked now; `None` when it does not answer.
    async fn status_for_listing(&self, pane: &PaneInfo, dir: &Path) -> Option<Arc<Status>> {
        let written = Written::of(dir);
        let holds = &self.inner.holds;
        let since = Since {
            typed: holds.typed_at(pane.pane_id.as_str()),
            held: holds.holder(&pane.session_name).is_some(),
            connected: self.sessions().loggers.connected(dir),
        };
        if let Some(kept) = self.inner.statuses.get(dir, written.as_ref(), &since) {
            return Some(kept);
        }
        let taken = std::time::Instant::now();
        let mut logger = self.sessions().loggers.connect(&dir.join(files::SOCKET)).await.ok()?;
        let status = Arc::new(logger.status().await.ok()?);
        self.inner.statuses.keep(dir, written, &status, taken);
        Some(status)
    }
}

/// Every string in `value`, to be rewritten in place.
fn texts_of<'a>(value: &'a mut Value, out: &mut Vec<&'a mut String>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter_mut().for_each(|v| texts_of(v, out)),
        Value::Object(map) => map.values_mut().for_each(|v| texts_of(v, out)),
        _ => {}
    }
}

/// Each live pane's current command and directory as tmux would name them
/// (see [`dtmcp_core::procs::current`]) and what its processes listen on,
/// on the blocking pool, the panes shared between two threads (a listing
/// of a hundred panes reads a few hundred `/proc` files); a dead pane has
/// neither.
async fn currents_and_looks(panes: &[PaneInfo]) -> (Vec<Current>, Vec<Option<Look>>) {
    let pids: Vec<u32> = panes.iter().map(|p| if p.pane_dead { 0 } else { p.pane_pid }).collect();
    let halves = if pids.len() < SHARED_FROM {
        vec![pids]
    } else {
        pids.chunks(pids.len().div_ceil(2)).map(<[u32]>::to_vec).collect()
    };
    let found = futures_util::future::join_all(halves.into_iter().map(|pids| async move {
        let n = pids.len();
        // A look that failed to run leaves its panes unlooked at, none missing.
        tokio::task::spawn_blocking(move || currents_and_looks_here(&pids))
            .await
            .unwrap_or_else(|_| ((0..n).map(|_| Current::default()).collect(), (0..n).map(|_| None).collect()))
    }))
    .await;
    found.into_iter().fold((Vec::new(), Vec::new()), |(mut currents, mut looks), (c, l)| {
        currents.extend(c);
        looks.extend(l);
        (currents, looks)
    })
}

/// From how many panes a listing's look at their processes is shared
/// between two threads.
const SHARED_FROM: usize = 16;

/// [`currents_and_looks`] of `pids` (0 for a dead pane), in this thread.
fn currents_and_looks_here(pids: &[u32]) -> (Vec<Current>, Vec<Option<Look>>) {
    let mut currents = Vec::with_capacity(pids.len());
    let mut known = Vec::with_capacity(pids.len());
    for &pid in pids {
        if pid == 0 {
            currents.push(Current::default());
            known.push((0, false));
            continue;
        }
        let (current, childless) = current::now(pid);
        // A shell with no child listens on nothing of its own.
        known.push((pid, childless == Some(true) && is_shell_name(&current.command)));
        currents.push(current);
    }
    (currents, ports::looks_known(&known))
}
