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
//! A command is written by its caller, at once and without waiting, when
//! nothing is queued before it and the pipe takes it whole (the common case:
//! nothing is handed between tasks on the way out); whatever the pipe does
//! not take joins a backlog that a writer task writes once the pipe has
//! room. The reply sender is queued and the line written (or put in the
//! backlog) under one lock, in the same order, and tmux answers commands in
//! the order it reads them, so a reader task that owns stdout can hand the
//! N-th answer block (see [`super::reply`]) to the N-th queued sender. A
//! caller that gives up waiting cannot cut a line in half: its line is in
//! the pipe or the backlog before `submit` returns.
//!
//! Notifications that may mean a new pane somewhere ([`Event::Topology`])
//! bump a counter that [`super::Tmux::topology`] hands out receivers of.
//!
//! When the client exits (tmux went away, the hidden session was killed) or
//! is told to die ([`Control::kill`], or dropping the [`Control`]), the
//! reader marks it dead, drops every queued sender (their callers see
//! [`Reply::Lost`]), kills the process and reaps it.

use std::collections::VecDeque;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWrite, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::{Notify, oneshot, watch};

use super::reply::{Event, ReplyParser};
use super::target::CONTROL_SESSION;

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

/// The client's stdin and what it has not taken yet.
struct Out {
    stdin: ChildStdin,
    /// Bytes of command lines not written yet, in order.
    backlog: Vec<u8>,
}

impl Out {
    /// Writes as much of `bytes` as the pipe takes without waiting.
    fn write_now(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        // A pipe that is full registers this no-op waker; the writer task
        // polls again with its own before it waits (see `write_loop`).
        let mut cx = Context::from_waker(Waker::noop());
        let mut done = 0;
        while done < bytes.len() {
            match std::pin::Pin::new(&mut self.stdin).poll_write(&mut cx, &bytes[done..]) {
                Poll::Ready(Ok(0)) => return Err(std::io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) => done += n,
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => break,
            }
        }
        Ok(done)
    }

    /// Writes the backlog as the pipe takes it; ready once it is empty.
    fn poll_backlog(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while !self.backlog.is_empty() {
            match std::pin::Pin::new(&mut self.stdin).poll_write(cx, &self.backlog) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => drop(self.backlog.drain(..n)),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// State the reader, the writer and callers share.
struct Shared {
    /// Reply senders of the commands written and not yet answered, oldest
    /// first. Locked only briefly, never across an `.await`.
    pending: Mutex<VecDeque<oneshot::Sender<Reply>>>,
    /// The way in; locked before `pending` when both are, never across an
    /// `.await`.
    out: Mutex<Out>,
    /// Wakes the writer task when the backlog grew, or the client died.
    wake: Notify,
    /// False once the reader has stopped; then nothing more is queued.
    alive: AtomicBool,
    /// Tells the reader to kill the client (a timeout, a broken write, drop).
    kill: Notify,
    /// Bumped at every topology notification; shared with the [`super::Tmux`]
    /// that outlives its clients.
    topology: Arc<watch::Sender<u64>>,
}

impl Shared {
    fn pending(&self) -> MutexGuard<'_, VecDeque<oneshot::Sender<Reply>>> {
        // A panic while holding this lock leaves a valid queue behind.
        self.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn out(&self) -> MutexGuard<'_, Out> {
        // A panic while holding this lock leaves whole bytes behind.
        self.out.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues `reply` and writes `line` (or adds it to the backlog), or
    /// answers `NotSent` when the client is dead. Holding the queue lock
    /// while checking `alive` means nothing is queued after the reader
    /// drained it; holding `out` throughout keeps lines and senders in one
    /// order.
    fn submit(&self, line: &[u8], reply: oneshot::Sender<Reply>) {
        let mut out = self.out();
        {
            let mut pending = self.pending();
            if !self.alive.load(Ordering::SeqCst) {
                let _ = reply.send(Reply::NotSent);
                return;
            }
            pending.push_back(reply);
        }
        if out.backlog.is_empty() {
            match out.write_now(line) {
                Ok(n) if n == line.len() => return,
                Ok(n) => out.backlog.extend_from_slice(&line[n..]),
                Err(_) => {
                    drop(out);
                    self.die();
                    return;
                }
            }
        } else {
            out.backlog.extend_from_slice(line);
        }
        drop(out);
        self.wake.notify_one();
    }

    /// Marks the client dead and fails every queued request.
    fn close(&self) {
        let mut pending = self.pending();
        self.alive.store(false, Ordering::SeqCst);
        for reply in pending.drain(..) {
            let _ = reply.send(Reply::Lost);
        }
        drop(pending);
        self.wake.notify_one();
    }

    /// Marks the client dead at once (a command submitted from now on is
    /// `NotSent`, free to go to a new client) and tells the reader to kill it.
    fn die(&self) {
        self.close();
        self.kill.notify_one();
    }
}

/// A running control client. Dropping it kills the client process.
pub(crate) struct Control {
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
            out: Mutex::new(Out { stdin, backlog: Vec::new() }),
            wake: Notify::new(),
            alive: AtomicBool::new(true),
            kill: Notify::new(),
            topology,
        });
        let (ready_tx, ready_rx) = oneshot::channel();
        tokio::spawn(read_loop(Pipes { stdout, stderr, child }, shared.clone(), ready_tx));
        tokio::spawn(write_loop(shared.clone()));
        let control = Control { shared, pid };
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
        self.shared.submit(line.as_bytes(), reply);
        rx
    }

    /// Whether the client can still take commands.
    pub(crate) fn is_alive(&self) -> bool {
        self.shared.alive.load(Ordering::SeqCst)
    }

    /// Kills the client; commands in flight get [`Reply::Lost`].
    pub(crate) fn kill(&self) {
        self.shared.die();
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
    for name in super::SCRUBBED_ENV {
        command.env_remove(name);
    }
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    command
}

/// Writes the backlog callers left as the pipe makes room, until the
/// client dies or a write fails. Lines piled up meanwhile go out together.
async fn write_loop(shared: Arc<Shared>) {
    loop {
        shared.wake.notified().await;
        if !shared.alive.load(Ordering::SeqCst) {
            return;
        }
        if std::future::poll_fn(|cx| shared.out().poll_backlog(cx)).await.is_err() {
            shared.die();
            return;
        }
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
