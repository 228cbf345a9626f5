//! `session_list`: a few lines and a row of data for every open session,
//! then the closed sessions whose logs are kept.
//!
//! A listing is the one call whose work grows with the sessions open, so
//! each kind of question is asked once for all of them, and all at once.
//! First, for every session, the stamps of its logger's files are taken
//! and what the last listing kept is looked up (cheap: two `stat`s and two
//! lookups each): its logger's status while nothing could have changed it
//! (see [`crate::tools::sessions::statuses`]), and, while that status
//! holds and says its shell sits at its prompt, what `/proc` said of its
//! pane (see [`crate::tools::sessions::currents`]). Then, together: one
//! listing of the panes beside one of the pinned windows; the loggers
//! whose status did not hold asked all at once (their round trips overlap,
//! and the loggers answer on both cores); on the blocking pool, `/proc`
//! read for the panes whose answer was not kept, and the ports looked at
//! for those not known to be a shell alone. `meta.json` and `state.json`
//! are read again only when they were replaced (see [`crate::stamped`]).
//! The panes, pinned windows and ports are asked afresh on every call.

use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use dtmcp_core::procs::current;
use dtmcp_core::procs::sockets::Look;
use dtmcp_core::protocol::Status;
use dtmcp_core::region::{Region, RegionKind};
use dtmcp_core::store::{Meta, files};
use serde_json::Value;

use crate::session::Listing;
use crate::tmux::PaneInfo;
use crate::tools::replies::ports;
use crate::tools::replies::reply::Reply;
use crate::tools::sessions::currents::Found;
use crate::tools::sessions::presence::pane_line;
use crate::tools::sessions::statuses::{Since, Written};
use crate::tools::{Terminal, ToolError};

/// What a listing found out about one session.
struct Gathered<'a> {
    pane: &'a PaneInfo,
    /// Its `meta.json`; `None` for a tmux session that is not ours.
    meta: Option<Arc<Meta>>,
    /// Its logger's status; `None` when it did not answer.
    status: Option<Arc<Status>>,
    /// What its processes listen on; `None` for a dead pane.
    look: Option<Look>,
    /// The command still running when the newest region is a line typed
    /// into it (a debugger's `(Pdb) b 4`).
    running: Option<Region>,
}

impl Terminal {
    /// The reply of `session_list`.
    pub(super) async fn list_body(&self) -> Result<Reply, ToolError> {
        let sessions = self.sessions();
        // Listed bare: the current command and directory are found below,
        // off tmux's one thread and beside the loggers' answers.
        let mut panes = sessions.panes_with(Listing::Bare).await?;
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
        let (statuses, looks) = self.gather(&mut panes, &dirs, &metas).await;
        let mut rows = Vec::with_capacity(panes.len());
        let gathered = panes.iter().zip(metas).zip(statuses).zip(looks);
        for ((((pane, meta), status), look), dir) in gathered.zip(&dirs) {
            let running = self.running_under_input(dir, status.as_deref());
            let g = Gathered { pane, meta, status, look, running };
            let (mut entry, row) = self.list_entry(&g).await;
            // Each session's lines and row with its own placeholders: the
            // pass over the whole reply knows the server's secrets only.
            let mut row = Value::Object(row);
            let mut facts = Vec::new();
            texts_of(&mut row, &mut facts);
            let counts = self.inner.secrets.redact_row(dir, &mut entry, &mut facts);
            // Counted in the reply's note and `redactions`: the pass over
            // the whole reply finds none of them again.
            crate::tools::replies::secrets::hidden_early(&counts);
            reply.push_str(&entry);
            rows.push(row);
        }
        if !panes.is_empty() {
            reply.push_str(&closed);
        }
        reply.facts.details.insert("sessions".into(), Value::Array(rows));
        Ok(reply)
    }

    /// Each session's logger status (`None` when it did not answer or
    /// the session is not ours, with no `meta`) and what its processes
    /// listen on, with each pane's current command and directory set.
    /// What still holds of the last listing is used again, and what can be
    /// is kept for the next.
    async fn gather(
        &self,
        panes: &mut [PaneInfo],
        dirs: &[PathBuf],
        metas: &[Option<Arc<Meta>>],
    ) -> (Vec<Option<Arc<Status>>>, Vec<Option<Look>>) {
        // Before any stamp is taken: what `/proc` says after it is kept
        // with it (see `currents`).
        let begun = Instant::now();
        let known: Vec<Option<Known>> = panes
            .iter()
            .zip(dirs)
            .zip(metas)
            .map(|((pane, dir), meta)| meta.as_ref().map(|_| self.known_before_listing(pane, dir)))
            .collect();
        let asks = panes
            .iter()
            .zip(&known)
            .map(|(pane, k)| Ask { pid: live_pid(pane), known: k.as_ref().and_then(|k| k.found.clone()) });
        let statuses = futures_util::future::join_all(dirs.iter().zip(&known).map(|(dir, k)| async move {
            let k = k.as_ref()?;
            match &k.status {
                Some(status) => Some(Arc::clone(status)),
                None => self.ask_status(dir, k.written).await,
            }
        }));
        let ((founds, looks), statuses) = tokio::join!(currents_and_looks(asks.collect()), statuses);
        let fresh = panes.iter().zip(dirs).zip(&known).zip(&founds).zip(&statuses);
        for ((((pane, dir), k), found), status) in fresh {
            if let Some(k) = k.as_ref().filter(|k| k.found.is_none()) {
                self.inner.currents.keep(dir, live_pid(pane), k.written, begun, status.as_deref(), found);
            }
        }
        for (pane, found) in panes.iter_mut().zip(founds) {
            pane.pane_current_command = found.current.command;
            pane.pane_current_path = found.current.path;
        }
        (statuses, looks)
    }

    /// The command a session's shell still runs, when the newest region
    /// is a line typed into that command's program rather than a command:
    /// the listing names what runs, not the last answer alone. Read from
    /// the region index only then (a line answered at a REPL or debugger).
    fn running_under_input(&self, dir: &Path, status: Option<&Status>) -> Option<Region> {
        let status = status?;
        let last = status.last_region.as_ref().filter(|r| r.kind == RegionKind::Input)?;
        let open = *status.shell.open.last()?;
        (open != last.id).then_some(())?;
        self.inner.searches.with_regions(dir, |index| Ok(index.region(open)?)).ok().flatten()
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
        if let (Some(cmd), Some(line)) = (&g.running, g.status.as_ref().and_then(|s| s.last_region.as_ref())) {
            let _ = write!(out, " · running: `{}` · answered last: `{}`", cmd.command, line.command);
            row.insert("last_command".into(), cmd.command.as_str().into());
            row.insert("last_answered".into(), line.command.as_str().into());
        } else if let Some(r) = g.status.as_ref().and_then(|s| s.last_region.as_ref()) {
            match (r.exit, r.end) {
                (Some(code), _) => {
                    let _ = write!(out, " · last: `{}` {}", r.command, dtmcp_core::exit::short(code));
                    row.insert("last_exit".into(), code.into());
                }
                // A line typed into a program, answered: programs tell no status.
                (None, Some(_)) => {
                    let _ = write!(out, " · last: `{}` ended", r.command);
                }
                (None, None) => {
                    let _ = write!(out, " · last: `{}` running", r.command);
                }
            }
            row.insert("last_command".into(), r.command.as_str().into());
        }
        let _ = writeln!(out, "\n  {}", pane_line(pane));
        let seen = self.seen_given(pane, g.status.as_deref()).await;
        if let Some(who) = Terminal::presence_line(pane.window_pinned, g.meta.as_deref(), &seen) {
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

    /// What the last listing found of `pane`'s session (in `dir`) that
    /// still holds, and the stamps of its files now.
    fn known_before_listing(&self, pane: &PaneInfo, dir: &Path) -> Known {
        let written = Written::of(dir);
        let holds = &self.inner.holds;
        let since = Since {
            typed: holds.typed_at(pane.pane_id.as_str()),
            held: holds.holder(&pane.session_name).is_some(),
            connected: self.sessions().loggers.connected(dir),
        };
        let status = self.inner.statuses.get(dir, written.as_ref(), &since);
        let found = match (&status, &written, live_pid(pane)) {
            (Some(status), Some(now), pid) if pid != 0 => self.inner.currents.get(dir, pid, status, now, &since),
            _ => None,
        };
        Known { written, status, found }
    }

    /// The status of the logger of the session in `dir`, whose files
    /// were `before`, asked now and kept for the next listing if it may
    /// be; `None` when it does not answer.
    async fn ask_status(&self, dir: &Path, before: Option<Written>) -> Option<Arc<Status>> {
        let taken = Instant::now();
        let mut logger = self.sessions().loggers.connect(&dir.join(files::SOCKET)).await.ok()?;
        let status = Arc::new(logger.status().await.ok()?);
        self.inner.statuses.keep(dir, before, &status, taken);
        Some(status)
    }
}

/// What a listing knows of one session before it asks anyone: what the
/// last listing found that still holds.
struct Known {
    /// The stamps of its logger's files, taken before anything else was
    /// asked about it; `None` without a `raw.log`.
    written: Option<Written>,
    /// Its logger's status, when the kept one holds.
    status: Option<Arc<Status>>,
    /// What `/proc` said of its pane, when that holds.
    found: Option<Found>,
}

/// The first process of `pane`; 0 for a dead pane, which has none.
fn live_pid(pane: &PaneInfo) -> u32 {
    if pane.pane_dead { 0 } else { pane.pane_pid }
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

/// What a listing asks of one pane's processes.
struct Ask {
    /// Its first process; 0 for a dead pane.
    pid: u32,
    /// What `/proc` said of it, kept from an earlier listing.
    known: Option<Found>,
}

impl Ask {
    /// Whether answering it reads `/proc`: its current command unless it
    /// is known, its ports unless it is known to be a shell alone.
    fn reads(&self) -> bool {
        self.pid != 0 && self.known.as_ref().is_none_or(|k| !k.lone_shell())
    }
}

/// Each live pane's current command and directory as tmux would name them
/// (see [`dtmcp_core::procs::current`]), whether its first process has a
/// child, and what its processes listen on; a dead pane has none of them.
/// Read on the blocking pool, shared between two threads when there are
/// many to read (a listing of a hundred panes reads a few hundred `/proc`
/// files), and not at all when every answer is known.
async fn currents_and_looks(asks: Vec<Ask>) -> (Vec<Found>, Vec<Option<Look>>) {
    let reads = asks.iter().filter(|a| a.reads()).count();
    if reads == 0 {
        return currents_and_looks_here(asks);
    }
    let parts = if reads < SHARED_FROM { vec![asks] } else { halves(asks, reads) };
    let found = futures_util::future::join_all(parts.into_iter().map(|asks| async move {
        let n = asks.len();
        // A look that failed to run leaves its panes unlooked at, none missing.
        tokio::task::spawn_blocking(move || currents_and_looks_here(asks))
            .await
            .unwrap_or_else(|_| ((0..n).map(|_| Found::default()).collect(), (0..n).map(|_| None).collect()))
    }))
    .await;
    found.into_iter().fold((Vec::new(), Vec::new()), |(mut founds, mut looks), (f, l)| {
        founds.extend(f);
        looks.extend(l);
        (founds, looks)
    })
}

/// From how many panes to read a listing's look at their processes is
/// shared between two threads.
const SHARED_FROM: usize = 16;

/// `asks` cut in two, each with about half of the `reads` panes to read.
fn halves(mut asks: Vec<Ask>, reads: usize) -> Vec<Vec<Ask>> {
    let mut seen = 0;
    let cut = asks
        .iter()
        .position(|a| {
            seen += usize::from(a.reads());
            seen > reads / 2
        })
        .unwrap_or(asks.len());
    let second = asks.split_off(cut);
    vec![asks, second]
}

/// [`currents_and_looks`] of `asks`, in this thread.
fn currents_and_looks_here(asks: Vec<Ask>) -> (Vec<Found>, Vec<Option<Look>>) {
    let mut founds = Vec::with_capacity(asks.len());
    let mut known = Vec::with_capacity(asks.len());
    for ask in asks {
        let found = match (ask.pid, ask.known) {
            (0, _) => Found::default(),
            (_, Some(kept)) => kept,
            (pid, None) => {
                let (current, childless) = current::now(pid);
                Found { current, childless }
            }
        };
        // A shell with no child listens on nothing of its own.
        known.push((ask.pid, ask.pid != 0 && found.lone_shell()));
        founds.push(found);
    }
    (founds, ports::looks_known(&known))
}
