//! What a listing of every session finds in `/proc` for each pane (its
//! current command and directory, and whether its first process has a
//! child), kept from one listing to the next while the pane's shell sits
//! at its prompt and nothing could have changed it.
//!
//! Finding it costs a listing a few `/proc` files per pane, over a third
//! of the router's time in a listing of 100 idle sessions. A shell at its
//! prompt changes its directory or starts a foreground program only by
//! running a command, and running one writes to the pane (the echo of the
//! line, and an integrated shell's markers), which the logger appends to
//! `raw.log`. So an answer is kept with the pane's first process and the
//! [`Written`] stamps taken *before* `/proc` was read, and only when the
//! status of the same listing says the shell is at rest ([`at_rest`]): a
//! program in the foreground can change its directory, or run another in
//! its place, without a byte of output. It is used again only while
//!
//! - the pane's first process is the same,
//! - the listing used the session's kept status again (see
//!   [`super::statuses`]: its files unchanged, its logger connected, no
//!   agent typed there or holds it), and that status says the shell is at
//!   rest,
//! - the files' stamps are still the ones taken before the answer was
//!   read (so nothing was written since it was read), and no agent typed
//!   there since.
//!
//! What it cannot see is a change that writes nothing: a background job
//! ending leaves the kept `childless` false (which costs only the look at
//! the pane's ports it would have had anyway), and a key binding that
//! runs a program without redrawing the line is not followed. Between a
//! command starting and its echo reaching `raw.log` (the pipe from tmux,
//! a millisecond or so) a listing still shows the shell, as one made an
//! instant earlier would.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use dtmcp_core::procs::current::Current;
use dtmcp_core::procs::is_shell_name;
use dtmcp_core::protocol::Status;

use crate::tools::sessions::statuses::{Since, Written};

/// How many panes' answers are kept.
const KEPT: usize = 4096;

/// What a listing finds in `/proc` about one pane's first process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Found {
    /// Its current command and directory, as tmux would name them.
    pub current: Current,
    /// Whether it has no child; `None` when that could not be read.
    pub childless: Option<bool>,
}

impl Found {
    /// Whether it is a shell with no child, which listens on nothing of
    /// its own: its ports need no look.
    pub fn lone_shell(&self) -> bool {
        self.childless == Some(true) && is_shell_name(&self.current.command)
    }
}

/// An answer as it was read, and what it was read under.
#[derive(Clone, Debug)]
struct Kept {
    /// The pane's first process.
    pid: u32,
    /// The session's files, stamped before `/proc` was read.
    written: Written,
    /// When the listing that read it began (before the stamps).
    read: Instant,
    found: Found,
}

/// Whether `status` says the pane's shell is at rest: integrated (its
/// markers are believed), showing its primary prompt, with no command,
/// full-screen program or nested shell open, and its output not ended.
pub fn at_rest(status: &Status) -> bool {
    let shell = &status.shell;
    shell.integrated && shell.at_prompt && shell.open.is_empty() && !shell.full_screen && !status.eof
}

/// Whether `kept` may stand in for a fresh look at pane `pid`, whose
/// session's files are `now`, given what may have happened `since`.
fn still_true(kept: &Kept, pid: u32, now: &Written, since: &Since) -> bool {
    kept.pid == pid && since.nothing_since(&kept.written, now, kept.read)
}

/// The answers kept, by session directory.
#[derive(Debug, Default)]
pub struct KeptCurrents(Mutex<HashMap<PathBuf, Kept>>);

impl KeptCurrents {
    /// The answer kept for pane `pid` of the session in `dir`, if it still
    /// holds: `kept_status` is the session's status this listing used
    /// again from [`super::statuses::KeptStatuses::get`] (a status asked
    /// afresh does not count: something was written), its files are `now`
    /// and `since` says nothing else happened.
    pub fn get(&self, dir: &Path, pid: u32, kept_status: &Status, now: &Written, since: &Since) -> Option<Found> {
        if !at_rest(kept_status) {
            return None;
        }
        let mut kept = self.lock();
        match kept.get(dir) {
            Some(k) if still_true(k, pid, now, since) => Some(k.found.clone()),
            Some(_) => {
                kept.remove(dir);
                None
            }
            None => None,
        }
    }

    /// Keeps `found` for pane `pid` of the session in `dir`, read after
    /// `read` and after its files were stamped `before`, if the session's
    /// `status` in the same listing says the shell is at rest; otherwise
    /// forgets what was kept for it.
    pub fn keep(
        &self,
        dir: &Path,
        pid: u32,
        before: Option<Written>,
        read: Instant,
        status: Option<&Status>,
        found: &Found,
    ) {
        let Some(written) = before.filter(|_| pid != 0 && status.is_some_and(at_rest)) else {
            self.forget(dir);
            return;
        };
        let mut kept = self.lock();
        if kept.len() >= KEPT && !kept.contains_key(dir) {
            kept.clear();
        }
        kept.insert(dir.to_path_buf(), Kept { pid, written, read, found: found.clone() });
    }

    /// Forgets the answer kept for the session in `dir` (it closed).
    pub fn forget(&self, dir: &Path) {
        self.lock().remove(dir);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<PathBuf, Kept>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use dtmcp_core::store::files;
    use dtmcp_core::types::RegionId;
    use rstest::rstest;

    use super::*;

    /// A session directory with a `raw.log` of `raw` bytes.
    fn session(raw: usize) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(files::RAW), vec![b'x'; raw]).expect("raw.log");
        dir
    }

    fn written(dir: &tempfile::TempDir) -> Written {
        Written::of(dir.path()).expect("stamps")
    }

    /// The status of an integrated shell at its prompt.
    fn resting() -> Status {
        let mut s = Status::default();
        s.shell.integrated = true;
        s.shell.at_prompt = true;
        s
    }

    fn found(command: &str, path: &str) -> Found {
        Found { current: Current { command: command.into(), path: path.into() }, childless: Some(true) }
    }

    const QUIET: Since = Since { typed: None, held: false, connected: true };
    const PID: u32 = 4242;

    #[rstest]
    #[case::at_its_prompt(|_: &mut Status| {}, true)]
    #[case::not_integrated(|s: &mut Status| s.shell.integrated = false, false)]
    #[case::running_a_command(|s: &mut Status| { s.shell.at_prompt = false; s.shell.open = vec![RegionId(7)] }, false)]
    #[case::a_nested_shell_at_its_prompt(|s: &mut Status| s.shell.open = vec![RegionId(7)], false)]
    #[case::between_commands(|s: &mut Status| s.shell.at_prompt = false, false)]
    #[case::full_screen(|s: &mut Status| s.shell.full_screen = true, false)]
    #[case::output_ended(|s: &mut Status| s.eof = true, false)]
    fn only_a_shell_at_rest_counts(#[case] edit: fn(&mut Status), #[case] rests: bool) {
        let mut status = resting();
        edit(&mut status);
        assert_eq!(at_rest(&status), rests);
        // Neither kept nor used again otherwise.
        let dir = session(10);
        let kept = KeptCurrents::default();
        kept.keep(dir.path(), PID, Some(written(&dir)), Instant::now(), Some(&status), &found("bash", "/a"));
        let again = kept.get(dir.path(), PID, &resting(), &written(&dir), &QUIET);
        assert_eq!(again.is_some(), rests, "kept");
        kept.keep(dir.path(), PID, Some(written(&dir)), Instant::now(), Some(&resting()), &found("bash", "/a"));
        assert_eq!(kept.get(dir.path(), PID, &status, &written(&dir), &QUIET).is_some(), rests, "used");
    }

    #[test]
    fn an_answer_at_rest_is_used_again_while_nothing_is_written() {
        let dir = session(10);
        let kept = KeptCurrents::default();
        kept.keep(dir.path(), PID, Some(written(&dir)), Instant::now(), Some(&resting()), &found("bash", "/a"));
        let again = kept.get(dir.path(), PID, &resting(), &written(&dir), &QUIET);
        assert_eq!(again, Some(found("bash", "/a")));
        assert!(kept.get(dir.path(), PID, &resting(), &written(&dir), &QUIET).is_some(), "and again");
    }

    #[test]
    fn output_another_process_typing_a_hold_or_a_lost_logger_drops_it() {
        let dir = session(10);
        let kept = KeptCurrents::default();
        let read = Instant::now();
        let keep = || kept.keep(dir.path(), PID, Some(written(&dir)), read, Some(&resting()), &found("bash", "/a"));
        let get = |pid, since: &Since| kept.get(dir.path(), pid, &resting(), &written(&dir), since);
        keep();
        assert!(get(PID + 1, &QUIET).is_none(), "another first process");
        assert!(get(PID, &QUIET).is_none(), "dropped with it");
        keep();
        assert!(get(PID, &Since { typed: Some(Instant::now()), ..QUIET }).is_none(), "typed since");
        keep();
        let before = Since { typed: read.checked_sub(Duration::from_millis(1)), ..QUIET };
        assert!(get(PID, &before).is_some(), "typed before it was read");
        assert!(get(PID, &Since { held: true, ..QUIET }).is_none(), "held");
        keep();
        assert!(get(PID, &Since { connected: false, ..QUIET }).is_none(), "no logger");
        keep();
        std::fs::write(dir.path().join(files::RAW), vec![b'x'; 11]).expect("output");
        assert!(get(PID, &QUIET).is_none(), "output came");
    }

    #[test]
    fn an_answer_without_stamps_or_a_live_pane_is_not_kept_and_forgets_the_last() {
        let dir = session(10);
        let kept = KeptCurrents::default();
        let now = written(&dir);
        let keep = |pid, before, status: Option<&Status>| {
            kept.keep(dir.path(), pid, before, Instant::now(), status, &found("bash", "/a"));
        };
        let get = || kept.get(dir.path(), PID, &resting(), &now, &QUIET);
        keep(PID, Some(now), Some(&resting()));
        keep(PID, None, Some(&resting()));
        assert!(get().is_none(), "no raw.log");
        keep(PID, Some(now), Some(&resting()));
        keep(PID, Some(now), None);
        assert!(get().is_none(), "no status");
        keep(PID, Some(now), Some(&resting()));
        keep(0, Some(now), Some(&resting()));
        assert!(kept.get(dir.path(), 0, &resting(), &now, &QUIET).is_none(), "a dead pane");
        keep(PID, Some(now), Some(&resting()));
        kept.forget(dir.path());
        assert!(get().is_none(), "the session closed");
    }

    #[rstest]
    #[case::a_shell_alone(found("bash", "/"), true)]
    #[case::a_shell_with_a_job(Found { childless: Some(false), ..found("bash", "/") }, false)]
    #[case::unknown_children(Found { childless: None, ..found("zsh", "/") }, false)]
    #[case::a_program(found("python3", "/"), false)]
    fn only_a_childless_shell_needs_no_look_at_its_ports(#[case] f: Found, #[case] lone: bool) {
        assert_eq!(f.lone_shell(), lone);
    }
}
