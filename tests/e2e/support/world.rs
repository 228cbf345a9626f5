//! One test's world: a private tmux socket, state home and runtime dir,
//! a real server binary driven by a real MCP client, and teardown that
//! kills only what the test started; with the few facts about a session's
//! processes and files that many tests look at.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use dtmcp::mcp_client::{McpChild, Reply};
use serde_json::{Value, json};

use super::poll;

/// The server binary under test.
pub const SERVER: &str = env!("CARGO_BIN_EXE_docent-terminal-mcp");

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// One test's world: state home, runtime dir and tmux socket of its own.
pub struct World {
    /// The temporary directory holding the state home and runtime dir.
    pub tmp: tempfile::TempDir,
    /// The tmux socket name (`-L`).
    pub socket: String,
}

impl World {
    /// A fresh world.
    pub fn new() -> World {
        let tmp = tempfile::Builder::new().prefix("dtmcp-e2e-").tempdir().expect("tempdir");
        std::fs::create_dir_all(tmp.path().join("run")).expect("runtime dir");
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let socket = format!("dtmcp-e2e-{}-{n}", std::process::id());
        World { tmp, socket }
    }

    /// The state home.
    pub fn home(&self) -> PathBuf {
        self.tmp.path().join("state")
    }

    /// A session's directory.
    pub fn session_dir(&self, name: &str) -> PathBuf {
        self.home().join("sessions").join(name)
    }

    /// The environment a server of this world runs with.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("DOCENT_TERMINAL_MCP_HOME".into(), self.home().display().to_string()),
            ("DOCENT_TERMINAL_MCP_SOCKET".into(), self.socket.clone()),
            ("XDG_RUNTIME_DIR".into(), self.tmp.path().join("run").display().to_string()),
        ]
    }

    /// Starts a server of this world and connects to it.
    pub async fn server(&self) -> Server {
        self.server_with(&[]).await
    }

    /// Starts a server of this world with `extra` environment variables.
    pub async fn server_with(&self, extra: &[(&str, &str)]) -> Server {
        let mut env = self.env();
        env.extend(extra.iter().map(|&(k, v)| (k.to_string(), v.to_string())));
        Server::start(Path::new(SERVER), &[], &env).await
    }

    /// Runs tmux on this world's socket.
    pub fn tmux(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new("tmux").arg("-L").arg(&self.socket).args(args).output().expect("tmux")
    }

    /// The visible rows of session `name`'s pane.
    pub fn screen(&self, name: &str) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-t", &format!("={name}:")]).stdout).into_owned()
    }

    /// Waits (up to 5 s) until session `name`'s screen shows `needle`.
    pub fn until_on_screen(&self, name: &str, needle: &str) {
        poll::until(&format!("{needle:?} on the screen of {name}"), Duration::from_secs(5), || {
            let screen = self.screen(name);
            if screen.contains(needle) { Ok(()) } else { Err(screen) }
        })
    }

    /// Every live process (not a zombie, not this test) whose environment
    /// names this world's tmux socket, or that is a tmux server on it (`-L
    /// SOCKET` in its command line), with its command line. The name holds
    /// the test process's pid and a counter, so nothing of another test or
    /// user matches.
    pub fn processes(&self) -> Vec<(i32, String)> {
        let needle = format!("DOCENT_TERMINAL_MCP_SOCKET={}\0", self.socket);
        let me = std::process::id();
        let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
        let mut found = Vec::new();
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
            let Ok(environ) = std::fs::read(entry.path().join("environ")) else { continue };
            let named =
                memchr::memmem::find(&environ, needle.as_bytes()).is_some_and(|at| at == 0 || environ[at - 1] == 0);
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            // A tmux server has none of our settings in its environment (a
            // pane would inherit them): it is known by its `-L SOCKET`.
            let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
            let tmux_of_ours = args.windows(2).any(|w| w[0] == b"-L" && w[1] == self.socket.as_bytes());
            if (named || tmux_of_ours) && !has_exited(pid) && pid as u32 != me {
                found.push((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
            }
        }
        found
    }

    /// The live pane loggers of this world's sessions: those whose session
    /// directory lies in its temporary directory (under its state home, or
    /// another home a test chose there).
    fn loggers(&self) -> Vec<i32> {
        let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
        let within = self.tmp.path().as_os_str().as_encoded_bytes();
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|&pid| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
                args.first().is_some_and(|a| a.ends_with(dtmcp::config::PANE_LOGGER.as_bytes()))
                    && args.get(1).is_some_and(|dir| dir.starts_with(within))
                    && !has_exited(pid)
            })
            .collect()
    }
}

/// How long a world's end waits for its loggers to write their last files.
const LOGGERS_END_WITHIN: Duration = Duration::from_secs(3);

impl Drop for World {
    fn drop(&mut self) {
        let loggers = self.loggers();
        // Only this test's tmux server, by its own socket.
        dtmcp::tmux::kill_server_now(&self.socket);
        // Then every process still carrying the socket's name: a server of
        // this world still running, and a tmux server it started while
        // `kill-server` ran (which then lost its socket file and can no
        // longer be reached by name).
        for (pid, _) in self.processes() {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
        // The loggers end with their panes and write their last files (the
        // end of the log, a checkpoint): the temporary directory goes only
        // after them, or what they wrote would keep it on the disk.
        let started = std::time::Instant::now();
        while loggers.iter().any(|&pid| !has_exited(pid)) && started.elapsed() < LOGGERS_END_WITHIN {
            std::thread::sleep(Duration::from_millis(10));
        }
        for pid in loggers.into_iter().filter(|&pid| !has_exited(pid)) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// A server the test speaks MCP to over stdio (the router itself, or a
/// `connect` bridge to a shared one), and its client.
pub struct Server {
    child: Option<McpChild>,
}

impl Server {
    /// Starts `program args` with `env` added, and connects to it.
    pub async fn start(program: &Path, args: &[&str], env: &[(String, String)]) -> Server {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let child = McpChild::start(program, args, &env).await;
        Server { child: Some(child.unwrap_or_else(|e| panic!("starting {} {args:?}: {e:#}", program.display()))) }
    }

    fn child(&self) -> &McpChild {
        self.child.as_ref().expect("server is running")
    }

    /// Calls a tool and returns its reply.
    pub async fn call(&self, tool: &str, args: Value) -> Reply {
        self.child().call(tool, args).await.unwrap_or_else(|e| panic!("{tool} failed at the protocol level: {e:#}"))
    }

    /// Calls a tool that must succeed, and returns its text.
    pub async fn ok(&self, tool: &str, args: Value) -> String {
        let r = self.call(tool, args).await;
        assert!(!r.is_error, "{tool} returned an error: {}", r.text);
        r.text
    }

    /// Calls a tool that must fail, and returns its message.
    pub async fn err(&self, tool: &str, args: Value) -> String {
        let r = self.call(tool, args).await;
        assert!(r.is_error, "{tool} should have failed but said: {}", r.text);
        r.text
    }

    /// Makes a session named `name` and returns the reply.
    pub async fn create(&self, name: &str) -> String {
        self.ok("session_create", json!({ "name": name })).await
    }

    /// Runs `command` in `session` and returns the reply.
    pub async fn run(&self, session: &str, command: &str) -> String {
        self.ok("run", json!({ "session": session, "command": command })).await
    }

    /// The `regions` listing of `session` (its last 20 regions).
    pub async fn regions(&self, session: &str) -> String {
        self.ok("regions", json!({ "session": session })).await
    }

    /// Starts `command` in `session` and leaves it running: `run` returns
    /// at its short timeout, saying so.
    pub async fn leave_running(&self, session: &str, command: &str) {
        let r = self.ok("run", json!({ "session": session, "command": command, "timeout": 0.5 })).await;
        assert!(r.contains("still running"), "`{command}` did not keep running:\n{r}");
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.child().pid().expect("pid")
    }

    /// Kills the server with SIGKILL.
    pub async fn kill(mut self) {
        if let Some(c) = self.child.take() {
            c.kill().await.expect("kill server");
        }
    }

    /// Ends the MCP session and waits (a while) for the server to exit.
    pub async fn stop(mut self) {
        if let Some(c) = self.child.take() {
            c.stop().await.expect("stop the server");
        }
    }

    /// Direct access to the client.
    pub fn client(&self) -> &McpChild {
        self.child()
    }
}

/// The pid of the pane logger serving session directory `dir`.
pub fn logger_pid(dir: &Path) -> Option<i32> {
    let want = dir.display().to_string();
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        let ours = args.first().is_some_and(|a| a.ends_with(b"dtmcp-pane-logger"));
        (ours && args.get(1).is_some_and(|a| *a == want.as_bytes())).then_some(pid)
    })
}

/// Kills the logger of session directory `dir` (a process this test's
/// session started) with SIGKILL and returns its pid.
pub fn kill_logger(dir: &Path) -> i32 {
    let pid = logger_pid(dir).expect("the logger runs");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL).expect("kill");
    pid
}

/// The cooked log of session directory `dir`.
pub fn session_text(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("session.txt")).expect("session.txt")
}

/// Whether process `pid` has exited: it is gone, or a zombie not yet reaped.
pub fn has_exited(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
    stat.map_or(true, |s| s.split(") ").nth(1).is_some_and(|state| state.starts_with('Z')))
}

/// The permission bits of `path` (of a link itself, not what it names).
pub fn mode(path: &Path) -> u32 {
    let meta = std::fs::symlink_metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777
}

/// Whether `program` is on PATH.
pub fn installed(program: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {program} >/dev/null")])
        .status()
        .is_ok_and(|s| s.success())
}

/// Skips the calling test, saying what it needs, when `program` is absent.
#[macro_export]
macro_rules! needs {
    ($program:expr) => {
        if !$crate::support::world::installed($program) {
            eprintln!("skipped: needs {}", $program);
            return;
        }
    };
}

/// Asserts that `haystack` contains `needle`, printing both when not.
#[macro_export]
macro_rules! assert_has {
    ($haystack:expr, $needle:expr) => {{
        let (h, n) = (&$haystack, &$needle);
        assert!(h.contains(n as &str), "expected to find {:?} in:\n{}", n, h);
    }};
}
