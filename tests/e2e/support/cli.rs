//! Running a program to its end, as a person runs a command: stdin closed,
//! stdout and stderr captured, and a bound on how long it may take (a
//! program still running then is killed, and the test fails with what it
//! printed so far). `cli` runs this build's command line in a world.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::poll;
use super::world::{SERVER, World};

/// How long a command of the command line may take.
const CLI_LIMIT: Duration = Duration::from_secs(30);

/// What one run of a program gave.
pub struct Ran {
    /// How it was called, for messages.
    what: String,
    /// Its exit code (-1 when a signal ended it).
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    /// Whether it exited 0.
    pub fn success(&self) -> bool {
        self.code == 0
    }

    /// Its stdout; it must have exited 0.
    pub fn ok(self) -> String {
        assert!(self.success(), "{} exited {}: {}", self.what, self.code, self.stderr);
        self.stdout
    }
}

/// Runs the command line with `args` in `w`'s environment; at most 30 s.
pub fn cli(w: &World, args: &[&str]) -> Ran {
    cli_with(w, &[], args)
}

/// Runs the command line with `args` in `w`'s environment plus `extra`.
pub fn cli_with(w: &World, extra: &[(&str, &str)], args: &[&str]) -> Ran {
    let mut env = w.env();
    env.extend(extra.iter().map(|&(k, v)| (k.to_string(), v.to_string())));
    run_for(Path::new(SERVER), args, &env, CLI_LIMIT)
}

/// Runs `program args` with `env` added (and `NO_COLOR` taken away, so
/// that a test sees the program's own choice), for at most `limit`.
pub fn run_for(program: &Path, args: &[&str], env: &[(String, String)], limit: Duration) -> Ran {
    let what = format!("{} {args:?}", program.display());
    let mut child = Command::new(program)
        .args(args)
        .env_remove("NO_COLOR")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {what}: {e}"));
    let (stdout, out) = reader(child.stdout.take().expect("stdout"));
    let (stderr, err) = reader(child.stderr.take().expect("stderr"));
    let mut running = Running(child);
    // Done when it exited and its output ended (a child of its own may
    // still hold the pipes).
    let status = poll::until(&format!("{what} to end"), limit, || match running.0.try_wait().expect("wait") {
        Some(status) if out.is_finished() && err.is_finished() => Ok(status),
        _ => Err(format!("so far it printed:\n{}\n{}", text(&stdout), text(&stderr))),
    });
    Ran { what, code: status.code().unwrap_or(-1), stdout: text(&stdout), stderr: text(&stderr) }
}

/// A child killed (and reaped) when dropped: a run whose time is up does
/// not outlive its test.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reads `pipe` to its end on a thread of its own, into a buffer the
/// caller may look at meanwhile.
fn reader(mut pipe: impl Read + Send + 'static) -> (Arc<Mutex<Vec<u8>>>, std::thread::JoinHandle<()>) {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let sink = buf.clone();
    let thread = std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut chunk) {
            if n == 0 {
                break;
            }
            sink.lock().expect("output").extend_from_slice(&chunk[..n]);
        }
    });
    (buf, thread)
}

/// What a reader took so far, as text.
fn text(buf: &Mutex<Vec<u8>>) -> String {
    String::from_utf8_lossy(&buf.lock().expect("output")).into_owned()
}
