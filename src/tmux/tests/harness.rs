//! A private tmux server per test, torn down when the test ends.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::super::{PaneId, Tmux};

/// Numbers the sockets of one test process.
static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A private socket `dtmcp-t-<pid>-<n>`, a [`Tmux`] on it and a temporary
/// directory. Dropping it kills that server (and only that one).
pub(crate) struct TmuxHarness {
    /// The `-L` name, unique to this test.
    pub socket: String,
    /// The handle under test.
    pub tmux: Arc<Tmux>,
    /// Scratch files for the test's panes.
    pub dir: tempfile::TempDir,
}

impl TmuxHarness {
    /// A harness whose server is not started yet.
    pub fn new() -> TmuxHarness {
        let socket = format!("dtmcp-t-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::SeqCst));
        let tmux = Arc::new(Tmux::new(&socket));
        let dir = tempfile::tempdir().expect("a temporary directory");
        TmuxHarness { socket, tmux, dir }
    }

    /// A harness whose server runs one session `main` with a `sleep` pane.
    pub fn with_session() -> TmuxHarness {
        let harness = TmuxHarness::new();
        harness.start_session("main", "sleep 1000");
        harness
    }

    /// Starts session `name` running `command` from a tmux process of our
    /// own (with no configuration file); returns its pane.
    pub fn start_session(&self, name: &str, command: &str) -> PaneId {
        let out = self
            .tmux_cli(&["-f", "/dev/null", "-L", &self.socket, "new-session", "-d", "-s", name])
            .args(["-x", "80", "-y", "24", "-P", "-F", "#{pane_id}", command])
            .output()
            .expect("tmux runs");
        assert!(out.status.success(), "new-session failed: {}", String::from_utf8_lossy(&out.stderr));
        PaneId::parse(String::from_utf8_lossy(&out.stdout).trim()).expect("new-session prints a pane id")
    }

    /// Runs a tmux command from the side (not through the handle under test).
    pub fn side(&self, args: &[&str]) -> Result<String, String> {
        let out = self.tmux_cli(&["-L", &self.socket]).args(args).output().map_err(|e| e.to_string())?;
        match out.status.success() {
            true => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
            false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
        }
    }

    fn tmux_cli(&self, args: &[&str]) -> Command {
        let mut command = Command::new("tmux");
        command.arg("-u").args(args).env_remove("TMUX");
        command
    }
}

impl Drop for TmuxHarness {
    fn drop(&mut self) {
        super::super::kill_server_now(&self.socket);
    }
}

/// Polls `check` every 10 ms until it holds or `limit` passes.
pub(crate) async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    check()
}

/// Whether a process exists (as anything, zombie included).
pub(crate) fn process_exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}
