//! One persistent tmux control client (`tmux -C`) and the two tasks that
//! serve it.
//!
//! The client is started as
//! `tmux -u -L NAME -C new-session -A -s __dtmcp_ctl -f ignore-size,no-output -c / sleep 2147483647`:
//! it attaches to (or creates) the hidden session [`CONTROL_SESSION`], its
//! size is ignored when tmux sizes windows, and no pane output is sent to it.
//! `-u` keeps tmux from replacing non-ASCII output with `_` when the locale
//! is not UTF-8.
//!
//! A writer task owns the client's stdin: it takes requests (one command
//! line and a reply sender) from a channel, queues each reply sender, and
//! writes the lines. Queueing and writing happen in the same order, and tmux
//! answers commands in the order it reads them, so a reader task that owns
//! stdout can hand the N-th answer block (see [`super::reply`]) to the N-th
//! queued sender. A caller that gives up waiting cannot cut a line in half,
//! because it never writes.
//!
//! Notifications that may mean a new pane somewhere ([`Event::Topology`])
//! bump a counter that [`super::Tmux::topology`] hands out receivers of;
//! every notification but pane output, and the client's end, bump the
//! count behind [`super::Tmux::changes`].
//!
//! When the client exits (tmux went away, the hidden session was killed) or
//! is told to die ([`Control::kill`], or dropping the [`Control`]), the
//! reader marks it dead, drops every queued sender (their callers see
//! [`Reply::Lost`]), kills the process and reaps it.

use std::collections::VecDeque;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::{Notify, mpsc, oneshot, watch};

use super::reply::{Event, ReplyParser};
use super::target::CONTROL_SESSION;

/// The most bytes the writer puts in one `write` when requests pile up.
const MAX_BATCH: usize = 64 * 1024;

/// What became of one request.
#[derive(Debug)]
pub(crate) enum Reply {
    /// `%end`: the command's output.
    Done(String),
    /// `%error`: tmux's message.
    Failed(String),
    /// The client was already dead; the command was never written.
    NotSent,
    /// The client died after the command was written and before it was
    /// answered; it may or may not have run.
    Lost,
}

/// One command on its way to the writer.
struct Request {
    line: String,
    reply: oneshot::Sender<Reply>,
}

/// State the reader, the writer and callers share.
struct Shared {
    /// Reply senders of the commands written and not yet answered, oldest
    /// first. Locked only briefly, never across an `.await`.
    pending: Mutex<VecDeque<oneshot::Sender<Reply>>>,
    /// False once the reader has stopped; then nothing more is queued.
    alive: AtomicBool,
    /// Tells the reader to kill the client (a timeout, a broken write, drop).
    kill: Notify,
    /// Bumped at every topology notification; shared with the [`super::Tmux`]
    /// that outlives its clients.
    topology: Arc<watch::Sender<u64>>,
    /// Bumped at every notification but pane output, and when the client
    /// ends; shared with the [`super::Tmux`] as well.
    changes: Arc<AtomicU64>,
}

impl Shared {
    fn pending(&self) -> MutexGuard<'_, VecDeque<oneshot::Sender<Reply>>> {
        // A panic while holding this lock leaves a valid queue behind.
        self.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues the reply sender and adds the line to `batch`, or answers
    /// `NotSent` when the client is dead. Holding the queue lock while
    /// checking `alive` means nothing is queued after the reader drained it.
    fn enqueue(&self, request: Request, batch: &mut Vec<u8>) {
        let mut pending = self.pending();
        if self.alive.load(Ordering::SeqCst) {
            pending.push_back(request.reply);
            batch.extend_from_slice(request.line.as_bytes());
        } else {
            let _ = request.reply.send(Reply::NotSent);
        }
    }

    /// Marks the client dead and fails every queued request.
    fn close(&self) {
        let mut pending = self.pending();
        self.alive.store(false, Ordering::SeqCst);
        // What happens from now on goes unheard.
        self.changes.fetch_add(1, Ordering::SeqCst);
        for reply in pending.drain(..) {
            let _ = reply.send(Reply::Lost);
        }
    }
}

/// A running control client. Dropping it kills the client process.
pub(crate) struct Control {
    /// Requests to the writer task; dropping it also ends that task.
    requests: mpsc::UnboundedSender<Request>,
    /// Shared with both tasks.
    shared: Arc<Shared>,
    /// The client's process id, for diagnostics.
    pid: Option<u32>,
}

impl Control {
    /// Starts a control client on socket `socket` and waits, up to `wait`,
    /// until it is attached. The error says why it could not start.
    pub(crate) async fn start(
        bin: &Path,
        socket: &str,
        wait: Duration,
        topology: Arc<watch::Sender<u64>>,
        changes: Arc<AtomicU64>,
    ) -> Result<Control, String> {
        let mut child =
            control_command(bin, socket).spawn().map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
        let pid = child.id();
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err("control client started without pipes".to_string());
        };
        let shared = Arc::new(Shared {
            pending: Mutex::new(VecDeque::new()),
            alive: AtomicBool::new(true),
            kill: Notify::new(),
            topology,
            changes,
        });
        let (ready_tx, ready_rx) = oneshot::channel();
        tokio::spawn(read_loop(Pipes { stdout, stderr, child }, shared.clone(), ready_tx));
        let (requests, rx) = mpsc::unbounded_channel();
        tokio::spawn(write_loop(stdin, rx, shared.clone()));
        let control = Control { requests, shared, pid };
        match tokio::time::timeout(wait, ready_rx).await {
            Ok(Ok(Ok(()))) => Ok(control),
            Ok(Ok(Err(reason))) => Err(reason),
            Ok(Err(_)) => Err("control client vanished while starting".to_string()),
            Err(_) => Err(format!("control client did not attach within {} ms", wait.as_millis())),
        }
    }

    /// Sends one command line (ending in `\n`); the receiver gets its reply.
    pub(crate) fn submit(&self, line: String) -> oneshot::Receiver<Reply> {
        let (reply, rx) = oneshot::channel();
        if let Err(mpsc::error::SendError(request)) = self.requests.send(Request { line, reply }) {
            let _ = request.reply.send(Reply::NotSent);
        }
        rx
    }

    /// Whether the client can still take commands.
    pub(crate) fn is_alive(&self) -> bool {
        self.shared.alive.load(Ordering::SeqCst)
    }

    /// Kills the client; commands in flight get [`Reply::Lost`].
    pub(crate) fn kill(&self) {
        self.shared.kill.notify_one();
    }

    /// The client's process id.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.pid
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The command line of a control client on `socket`.
fn control_command(bin: &Path, socket: &str) -> Command {
    let mut command = Command::new(bin);
    command.args(["-u", "-L", socket, "-C", "new-session", "-A", "-s", CONTROL_SESSION]).args([
        "-f",
        "ignore-size,no-output",
        "-c",
        "/",
        "sleep",
        "2147483647",
    ]);
    super::scrub_env(&mut command);
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    // The client dies with its router, even a killed one. Left behind, it
    // can hold a whole socket: tmux 3.3a ends `kill-server` only once every
    // client has gone, and a client whose router died before reading what
    // the server sent it never goes; the server then turns every new
    // client away ("server exited unexpectedly"). The kernel sends the
    // signal when the thread that spawned the client ends: a runtime's
    // worker or the thread blocking on it, which last as long as the
    // runtime (whose end kills the client anyway, `kill_on_drop`).
    let router = std::process::id();
    // SAFETY: the hook runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed: `prctl` and `getppid` are plain
    // system calls, and neither the hook nor the error it may return
    // allocates.
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
            // The router died before the signal was set: go now.
            if u32::try_from(nix::unistd::getppid().as_raw()).ok() != Some(router) {
                return Err(std::io::Error::from_raw_os_error(nix::libc::ESRCH));
            }
            Ok(())
        });
    }
    command
}

/// Writes queued command lines to the client's stdin until the channel
/// closes or a write fails.
async fn write_loop(mut stdin: ChildStdin, mut rx: mpsc::UnboundedReceiver<Request>, shared: Arc<Shared>) {
    let mut batch = Vec::new();
    while let Some(first) = rx.recv().await {
        batch.clear();
        shared.enqueue(first, &mut batch);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(next) => shared.enqueue(next, &mut batch),
                Err(_) => break,
            }
        }
        if !batch.is_empty() && stdin.write_all(&batch).await.is_err() {
            shared.kill.notify_one();
            break;
        }
    }
    rx.close();
    while let Ok(request) = rx.try_recv() {
        let _ = request.reply.send(Reply::NotSent);
    }
}

/// The client's process and the pipes the reader owns.
struct Pipes {
    stdout: ChildStdout,
    stderr: ChildStderr,
    child: Child,
}

/// Reads the client's output, answers queued requests in order, and when
/// the client ends (or must be killed) fails the rest and reaps the process.
async fn read_loop(pipes: Pipes, shared: Arc<Shared>, ready: oneshot::Sender<Result<(), String>>) {
    let Pipes { stdout, mut stderr, mut child } = pipes;
    let mut ready = Some(ready);
    let mut stdout = BufReader::new(stdout);
    let mut parser = ReplyParser::default();
    let mut line = Vec::new();
    loop {
        line.clear();
        tokio::select! {
            biased;
            _ = shared.kill.notified() => break,
            read = stdout.read_until(b'\n', &mut line) => {
                if !matches!(read, Ok(n) if n > 0) {
                    break;
                }
            }
        }
        let text = String::from_utf8_lossy(line.strip_suffix(b"\n").unwrap_or(&line));
        if let Some(event) = parser.feed(&text)
            && !deliver(event, &shared, &mut ready)
        {
            break;
        }
    }
    shared.close();
    if let Some(ready) = ready {
        let _ = ready.send(Err(exit_reason(&mut stderr).await));
    }
    let _ = child.start_kill();
    let _ = child.wait().await;
}

/// Acts on one parsed event; false when the client must be dropped.
fn deliver(event: Event, shared: &Shared, ready: &mut Option<oneshot::Sender<Result<(), String>>>) -> bool {
    match event {
        Event::Block { from_stdin: false, outcome } => {
            // The start-up command's block says whether we are attached.
            if let Some(ready) = ready.take() {
                let attached = outcome.is_ok();
                let _ = ready.send(outcome.map(drop));
                return attached;
            }
            true
        }
        Event::Block { from_stdin: true, outcome } => {
            let Some(reply) = shared.pending().pop_front() else {
                // An answer nobody asked for: the framing is lost.
                return false;
            };
            let _ = reply.send(match outcome {
                Ok(output) => Reply::Done(output),
                Err(message) => Reply::Failed(message),
            });
            true
        }
        Event::Exit => true,
        Event::Topology => {
            shared.topology.send_modify(|n| *n = n.wrapping_add(1));
            shared.changes.fetch_add(1, Ordering::SeqCst);
            true
        }
        Event::Change => {
            shared.changes.fetch_add(1, Ordering::SeqCst);
            true
        }
    }
}

/// What the client said on stderr before it left, or a generic reason.
async fn exit_reason(stderr: &mut ChildStderr) -> String {
    let mut text = String::new();
    let read = tokio::time::timeout(Duration::from_millis(500), stderr.read_to_string(&mut text)).await;
    match (read, text.trim()) {
        (Ok(Ok(_)), said) if !said.is_empty() => said.to_string(),
        _ => "control client exited before attaching".to_string(),
    }
}
