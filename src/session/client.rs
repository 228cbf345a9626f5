//! The router's side of the logger protocol: one persistent connection per
//! logger, shared by every call of this process, every exchange bounded by
//! a timeout.
//!
//! # The pool
//!
//! Connections are kept in a pool keyed by socket path. A frame is written
//! whole at once by its caller, without waiting, when nothing queues before
//! it and the socket takes it; what the socket does not take at once goes to
//! the connection's outbox, which a writer task empties in order (so a call
//! given up midway never leaves half a frame on the wire, and the common
//! exchange hands nothing between tasks on its way out). A reader task hands each
//! answer to the exchange waiting for its id (see
//! [`dtmcp_core::protocol`]): many calls, waits among them, share one
//! connection. A wait given up by its caller (a timeout, a cancelled call)
//! is cancelled at the logger, so that it does not hold a place there.
//!
//! When a logger's connection closes (it ended or was killed) the pool
//! drops it, fails the exchanges in flight, and tells whoever listens
//! ([`closed_connections`]): the router's repair replaces a dead logger at
//! once, without a per-second sweep.
//!
//! # Stalls
//!
//! A logger that is stopped (SIGSTOP, a debugger) keeps its socket but
//! answers nothing. Rather than wait out a timeout, the client looks at the
//! logger's state in `/proc` before it connects and while an exchange
//! waits, and reports the stall as soon as it is seen twice.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use std::os::fd::{AsFd, OwnedFd};

use tokio::io::AsyncReadExt;
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot};

use dtmcp_core::agent_state::AgentState;
use dtmcp_core::protocol::{
    self, Mark, PROTOCOL_VERSION, Request, Response, Settle, Status, Tagged, WaitReason, WaitSpec,
};
use dtmcp_core::region::Region;
use dtmcp_core::types::{LineNo, RegionId};

use crate::quiet_socket::{QuietSocket, ReadHalf, WriteHalf};

/// How long an ordinary (non-wait) exchange may take before the logger is
/// called wedged.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(5);

/// How often an exchange looks whether its logger was stopped meanwhile.
const STALL_POLL: Duration = Duration::from_millis(250);

/// Why talking to a logger failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No logger answers on the socket.
    #[error("the session's logger does not answer at {path}: {source}")]
    Connect {
        /// The socket.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The exchange failed midway.
    #[error("the session's logger failed: {0}")]
    Frame(#[from] protocol::FrameError),
    /// The logger is stopped: it holds its socket but answers nothing.
    #[error(
        "the session's logger is stalled: it (pid {pid}) is stopped, so nothing is logged or answered for now; the pane's output waits in tmux and nothing is lost. `kill -CONT {pid}` lets it go on, then call again"
    )]
    Stalled {
        /// The logger's pid.
        pid: u32,
    },
    /// The logger took too long.
    #[error("the session's logger did not answer within {0:?}")]
    Timeout(Duration),
    /// The logger speaks another protocol version.
    #[error(
        "the session's logger speaks protocol {theirs}, this server {PROTOCOL_VERSION}; restart the session or use a matching server"
    )]
    Version {
        /// The logger's version.
        theirs: u32,
    },
    /// The logger answered with an error.
    #[error("the session's logger says: {0}")]
    Remote(String),
    /// The logger answered something else than asked.
    #[error("the session's logger answered out of turn")]
    Unexpected,
    /// The logger ended after the pane's output did: no other comes.
    #[error(
        "the session's pane has closed (its program exited) and its logger has ended with it; the logs stay on disk: read and search work on them"
    )]
    Ended,
    /// The connection closed before the answer came.
    #[error(
        "the session's logger went away before it answered (it ended or was killed); a new one is being attached: call again"
    )]
    Closed,
}

/// The connections to the loggers, by socket path: one per logger, shared
/// by every call of its owner (a server's session registry, or one command
/// of the people's command line). Cheap to clone: clones share the pool.
#[derive(Clone, Default)]
pub struct Loggers(Arc<Pool>);

impl std::fmt::Debug for Loggers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let open = lock(&self.0.slots).len();
        f.debug_struct("Loggers").field("open", &open).finish()
    }
}

#[derive(Default)]
struct Pool {
    slots: Mutex<HashMap<PathBuf, Arc<Slot>>>,
    /// Told the session directory of every connection that closes.
    listeners: Mutex<Vec<mpsc::UnboundedSender<PathBuf>>>,
}

/// One socket's place in the pool.
#[derive(Default)]
struct Slot {
    conn: Mutex<Option<Arc<Conn>>>,
    /// Held while connecting, so that callers arriving together share one
    /// connection.
    connecting: tokio::sync::Mutex<()>,
}

/// One open connection.
struct Conn {
    /// Where frames go out.
    outbox: Arc<Outbox>,
    /// The exchanges waiting for an answer, by id; `None` once closed.
    pending: Mutex<Option<HashMap<u64, oneshot::Sender<Response>>>>,
    next_id: AtomicU64,
    closed: AtomicBool,
    /// The logger said its output ended (the pane closed): once it goes
    /// away, no other logger comes for the pane.
    ended: AtomicBool,
    /// Tells the reader task to stop (a connection refused after its hello).
    shutdown: tokio::sync::Notify,
    /// The socket once more, to see at once whether the logger hung up
    /// (died) before its reader task has run.
    probe: OwnedFd,
    /// The session directory, where the logger leaves its pid.
    dir: PathBuf,
    /// The socket's path.
    path: PathBuf,
    /// The pool it belongs to, told when it closes.
    pool: Weak<Pool>,
}

impl Loggers {
    /// A receiver of the session directories whose logger connection
    /// closed, from now on. The repair listens to replace dead loggers.
    pub fn closed_connections(&self) -> mpsc::UnboundedReceiver<PathBuf> {
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&self.0.listeners).push(tx);
        rx
    }

    /// Whether this pool holds an open connection to the logger of the
    /// session in `dir`.
    pub fn connected(&self, dir: &Path) -> bool {
        let slot = lock(&self.0.slots).get(&dir.join(dtmcp_core::store::files::SOCKET)).cloned();
        slot.is_some_and(|s| lock(&s.conn).as_ref().is_some_and(|c| !c.closed.load(Ordering::Acquire)))
    }

    /// The pooled connection to the logger socket at `path`: the open one,
    /// or a new one whose version is checked.
    pub async fn connect(&self, path: &Path) -> Result<LoggerClient, ClientError> {
        let pool = &self.0;
        let slot = Arc::clone(lock(&pool.slots).entry(path.to_path_buf()).or_default());
        if let Some(conn) = open(&slot) {
            return Ok(LoggerClient { conn });
        }
        let _one = slot.connecting.lock().await;
        if let Some(conn) = open(&slot) {
            return Ok(LoggerClient { conn });
        }
        let conn = match new_connection(path, Arc::downgrade(pool)).await {
            Ok(conn) => conn,
            Err(e) => {
                // No empty slot is kept for a socket nobody answers on.
                let mut slots = lock(&pool.slots);
                if slots.get(path).is_some_and(|s| Arc::ptr_eq(s, &slot) && lock(&s.conn).is_none()) {
                    slots.remove(path);
                }
                return Err(e);
            }
        };
        *lock(&slot.conn) = Some(Arc::clone(&conn));
        // A slot dropped from the pool meanwhile (its old connection closed)
        // is put back.
        lock(&pool.slots).entry(path.to_path_buf()).or_insert_with(|| Arc::clone(&slot));
        Ok(LoggerClient { conn })
    }
}

impl Pool {
    /// Whether anyone listens for closed connections (a repair that will
    /// attach a new logger), so that an exchange cut short may be asked
    /// again of the next one.
    fn repaired(&self) -> bool {
        !lock(&self.listeners).is_empty()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Conn {
    /// Sends `req` and waits for its answer, at most `limit`, and not at
    /// all once the logger is seen stopped.
    async fn exchange(&self, req: Request, limit: Duration) -> Result<Response, ClientError> {
        let (id, answer) = self.start()?;
        let mut flight = InFlight { conn: self, id, wait: matches!(req, Request::Wait(_)), answered: false };
        self.send(&Tagged { id, msg: req })?;
        let response = receive(&self.dir, answer, limit).await?;
        flight.answered = true;
        match response {
            Response::Error { message } => Err(ClientError::Remote(message)),
            r => Ok(r),
        }
    }

    /// Sends a [`Request::StatusWait`]: the status now (or once the shell's
    /// next prompt is shown, as `settle` says), and a wait from its mark
    /// that the logger holds from the same look on. Returns the status, and
    /// the wait to take its answer from.
    async fn status_wait(self: &Arc<Self>, spec: WaitSpec, settle: Settle) -> Result<(Status, HeldWait), ClientError> {
        let limit = Duration::from_millis(spec.timeout_ms) + EXCHANGE_TIMEOUT;
        let settling = Duration::from_millis(settle.grace_ms.min(protocol::MAX_WAIT_MS));
        // Two ids at once: the wait's answer comes under the second.
        let id = self.next_id.fetch_add(2, Ordering::Relaxed);
        let (answer, wait_answer) = (self.expect(id)?, self.expect(id + 1)?);
        let mut flight = InFlight { conn: self, id, wait: false, answered: false };
        let mut held = HeldWait {
            conn: Arc::clone(self),
            id: id + 1,
            answer: Some(wait_answer),
            after: spec.after,
            limit,
            answered: false,
        };
        self.send(&Tagged { id, msg: Request::StatusWait(spec, settle) })?;
        let response = receive(&self.dir, answer, settling + EXCHANGE_TIMEOUT).await?;
        flight.answered = true;
        match response {
            Response::Status(status) => {
                held.after = status.mark;
                Ok((status, held))
            }
            Response::Error { message } => Err(ClientError::Remote(message)),
            _ => Err(ClientError::Unexpected),
        }
    }

    /// Sends one request; a connection that takes nothing more is ended.
    fn send(&self, req: &Tagged<Request>) -> Result<(), ClientError> {
        let frame = protocol::encode(req)?;
        if !self.outbox.send(frame) {
            self.end();
            return Err(ClientError::Closed);
        }
        Ok(())
    }

    /// Registers an exchange: its id and where its answer will come.
    fn start(&self) -> Result<(u64, oneshot::Receiver<Response>), ClientError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        Ok((id, self.expect(id)?))
    }

    /// Where the answer under `id` will come.
    fn expect(&self, id: u64) -> Result<oneshot::Receiver<Response>, ClientError> {
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).as_mut().ok_or(ClientError::Closed)?.insert(id, tx);
        Ok(rx)
    }

    /// Forgets the exchange `id` (its caller stopped waiting for it);
    /// `cancel` a wait the logger still holds.
    fn forget(&self, id: u64, cancel: bool) {
        if let Some(p) = lock(&self.pending).as_mut() {
            p.remove(&id);
        }
        if cancel {
            let cancel = Tagged { id: self.next_id.fetch_add(1, Ordering::Relaxed), msg: Request::Cancel { id } };
            if let Ok(frame) = protocol::encode(&cancel) {
                let _ = self.outbox.send(frame);
            }
        }
    }

    /// Marks the connection closed and fails the exchanges in flight.
    fn close(&self) -> bool {
        let was_open = !self.closed.swap(true, Ordering::AcqRel);
        lock(&self.pending).take();
        self.shutdown.notify_one();
        self.outbox.shut();
        was_open
    }

    /// Closes a connection that ended (its logger hung up, or the socket
    /// failed): the first to see it also drops it from the pool and tells
    /// the listeners, once.
    fn end(&self) {
        if !self.close() {
            return;
        }
        let Some(pool) = self.pool.upgrade() else { return };
        let mut slots = lock(&pool.slots);
        if let Some(slot) = slots.get(&self.path) {
            let ours = lock(&slot.conn).as_ref().is_some_and(|c| std::ptr::eq(Arc::as_ptr(c), self));
            if ours {
                slots.remove(&self.path);
            }
        }
        drop(slots);
        lock(&pool.listeners).retain(|tx| tx.send(self.dir.clone()).is_ok());
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // The writer task ends with the last handle on its connection.
        self.outbox.shut();
    }
}

/// The frames of one connection on their way out, in order.
struct Outbox {
    /// The socket's writing half; written without waiting (`try_write`),
    /// by callers and the writer task alike, only while `queue` is locked.
    tx: WriteHalf,
    /// Bytes the socket did not take yet, oldest first (the front may be
    /// the rest of a frame partly written).
    queue: Mutex<VecDeque<Vec<u8>>>,
    /// Wakes the writer task when something was queued, or shut.
    wake: tokio::sync::Notify,
    /// Set when the connection closed: nothing more is written.
    shut: AtomicBool,
}

impl Outbox {
    /// Writes `frame` now if nothing queues before it and the socket takes
    /// it, else queues (the rest of) it for the writer task; `false` once
    /// the connection is shut or the socket failed.
    fn send(&self, frame: Vec<u8>) -> bool {
        if self.shut.load(Ordering::Acquire) {
            return false;
        }
        let mut queue = lock(&self.queue);
        if queue.is_empty() {
            match write_now(&self.tx, &frame) {
                Ok(n) if n == frame.len() => return true,
                Ok(n) => queue.push_back(frame[n..].to_vec()),
                Err(_) => return false,
            }
        } else {
            queue.push_back(frame);
        }
        drop(queue);
        self.wake.notify_one();
        true
    }

    /// Writes what is queued, as far as the socket takes it now: `Ok(true)`
    /// when the queue is empty.
    fn flush_now(&self) -> std::io::Result<bool> {
        let mut queue = lock(&self.queue);
        while let Some(front) = queue.front_mut() {
            let n = write_now(&self.tx, front)?;
            if n < front.len() {
                front.drain(..n);
                return Ok(false);
            }
            queue.pop_front();
        }
        Ok(true)
    }

    /// Stops the writer task; nothing more is written.
    fn shut(&self) {
        self.shut.store(true, Ordering::Release);
        self.wake.notify_one();
    }
}

/// Writes as much of `bytes` as the socket takes without waiting.
fn write_now(tx: &WriteHalf, bytes: &[u8]) -> std::io::Result<usize> {
    let mut done = 0;
    while done < bytes.len() {
        match tx.try_write(&bytes[done..]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Forgets an exchange when its caller stops waiting, answered or not; a
/// wait not answered is cancelled at the logger.
struct InFlight<'a> {
    conn: &'a Conn,
    id: u64,
    wait: bool,
    answered: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.conn.forget(self.id, self.wait && !self.answered);
    }
}

/// A wait the logger holds since a [`LoggerClient::status_wait`]: its
/// answer is taken with [`HeldWait::answer`]; dropped unanswered, it is
/// cancelled at the logger.
pub struct HeldWait {
    conn: Arc<Conn>,
    id: u64,
    answer: Option<oneshot::Receiver<Response>>,
    /// The mark it waits from: the status answered with it.
    after: Mark,
    /// How long its answer may take.
    limit: Duration,
    answered: bool,
}

impl HeldWait {
    /// The mark the wait waits from.
    pub fn after(&self) -> Mark {
        self.after
    }

    /// The wait's answer, as [`LoggerClient::wait_region`] gives it.
    pub async fn answer(mut self) -> Result<(WaitReason, Status, Option<Region>), ClientError> {
        let answer = self.answer.take().ok_or(ClientError::Unexpected)?;
        let response = receive(&self.conn.dir, answer, self.limit).await?;
        self.answered = true;
        match response {
            Response::Waited { reason, status, region } => Ok((reason, status, region)),
            Response::Error { message } => Err(ClientError::Remote(message)),
            _ => Err(ClientError::Unexpected),
        }
    }
}

impl Drop for HeldWait {
    fn drop(&mut self) {
        self.conn.forget(self.id, !self.answered);
    }
}

/// The answer coming on `answer`: an error once `limit` has passed, the
/// connection closed, or the logger of the session in `dir` is seen
/// stopped.
async fn receive(dir: &Path, answer: oneshot::Receiver<Response>, limit: Duration) -> Result<Response, ClientError> {
    tokio::select! {
        r = tokio::time::timeout(limit, answer) => match r {
            Err(_) => Err(ClientError::Timeout(limit)),
            Ok(Err(_)) => Err(ClientError::Closed),
            Ok(Ok(response)) => Ok(response),
        },
        pid = stall(dir) => Err(ClientError::Stalled { pid }),
    }
}

/// Reads answers and hands each to its exchange until the connection
/// closes; then drops the connection from the pool and says so.
async fn read_answers(rx: ReadHalf, conn: Arc<Conn>) {
    /// Closes the connection however the task ends (even when its runtime
    /// shuts down).
    struct OnEnd(Arc<Conn>);
    impl Drop for OnEnd {
        fn drop(&mut self) {
            self.0.end();
        }
    }
    let _end = OnEnd(Arc::clone(&conn));
    // Buffered: a frame's length and body (and often the next frame) come
    // in one read.
    let mut rx = tokio::io::BufReader::with_capacity(16 << 10, rx);
    loop {
        let frame = async {
            let mut prefix = [0u8; 4];
            rx.read_exact(&mut prefix).await.ok()?;
            let mut body = vec![0u8; protocol::frame_len(prefix).ok()?];
            rx.read_exact(&mut body).await.ok()?;
            protocol::decode::<Tagged<Response>>(&body).ok()
        };
        let read = tokio::select! {
            frame = frame => frame,
            () = conn.shutdown.notified() => None,
        };
        let Some(Tagged { id, msg }) = read else { return };
        if let Response::Status(status) | Response::Waited { status, .. } = &msg
            && status.eof
        {
            conn.ended.store(true, Ordering::Release);
        }
        // An answer nobody waits for any more (its caller gave up) is dropped.
        let waiter = lock(&conn.pending).as_mut().and_then(|p| p.remove(&id));
        if let Some(waiter) = waiter {
            let _ = waiter.send(msg);
        }
    }
}

/// Writes what callers queued, once the socket takes it, until the
/// connection is shut or the socket fails.
async fn write_frames(outbox: Arc<Outbox>, conn: std::sync::Weak<Conn>) {
    loop {
        outbox.wake.notified().await;
        loop {
            if outbox.shut.load(Ordering::Acquire) {
                return;
            }
            match outbox.flush_now() {
                Ok(true) => break,
                Ok(false) if outbox.tx.writable().await.is_ok() => {}
                _ => {
                    if let Some(conn) = conn.upgrade() {
                        conn.end();
                    }
                    return;
                }
            }
        }
    }
}

/// A handle on the connection to one pane's logger; cheap to clone, and
/// every handle on the same logger shares one connection.
#[derive(Clone)]
pub struct LoggerClient {
    conn: Arc<Conn>,
}

impl LoggerClient {
    /// One exchange. When the logger dies before it answers, a request
    /// that may be asked twice (all but opening an input region) is asked
    /// again of the logger that replaces it, if this process has a repair
    /// listening (see [`closed_connections`]) and it attaches one within
    /// [`EXCHANGE_TIMEOUT`].
    async fn exchange(&mut self, req: Request, limit: Duration) -> Result<Response, ClientError> {
        let again = !matches!(req, Request::OpenInput(_));
        match self.conn.exchange(req.clone(), limit).await {
            Err(ClientError::Closed) if self.conn.ended.load(Ordering::Acquire) => Err(ClientError::Ended),
            Err(ClientError::Closed) if again && self.repaired() => {
                self.conn = reconnect(&self.conn).await?;
                self.conn.exchange(req, limit).await
            }
            other => other,
        }
    }

    /// Whether this connection's pool has a repair listening.
    fn repaired(&self) -> bool {
        self.conn.pool.upgrade().is_some_and(|p| p.repaired())
    }

    /// The logger's state now.
    pub async fn status(&mut self) -> Result<Status, ClientError> {
        match self.exchange(Request::Status, EXCHANGE_TIMEOUT).await? {
            Response::Status(s) => Ok(s),
            _ => Err(ClientError::Unexpected),
        }
    }

    /// The logger's state now, and a wait from its mark for `spec` (whose
    /// `after` is not used) held by the logger from the same look on: one
    /// round trip where [`LoggerClient::status`] and then
    /// [`LoggerClient::wait_region`] take two. With a [`Settle`], a shell
    /// between a command's end and its next prompt is looked at once that
    /// prompt is shown (see [`Status::between_commands`]). The wait is
    /// `None` when the connection had to be made again (the status then
    /// comes from the new logger, asked the usual way, and is not settled).
    pub async fn status_wait(
        &mut self,
        spec: WaitSpec,
        settle: Settle,
    ) -> Result<(Status, Option<HeldWait>), ClientError> {
        match self.conn.status_wait(spec, settle).await {
            Ok((status, held)) => Ok((status, Some(held))),
            Err(ClientError::Closed) if self.conn.ended.load(Ordering::Acquire) => Err(ClientError::Ended),
            Err(ClientError::Closed) if self.repaired() => {
                self.conn = reconnect(&self.conn).await?;
                Ok((self.status().await?, None))
            }
            Err(e) => Err(e),
        }
    }

    /// Committed lines `from..from+count`.
    pub async fn read(&mut self, from: LineNo, count: u64) -> Result<Vec<String>, ClientError> {
        match self.exchange(Request::Read { from, count }, EXCHANGE_TIMEOUT).await? {
            Response::Lines { lines, .. } => Ok(lines),
            _ => Err(ClientError::Unexpected),
        }
    }

    /// The last `last` regions.
    pub async fn regions(&mut self, last: u64) -> Result<Vec<Region>, ClientError> {
        match self.exchange(Request::Regions { last }, EXCHANGE_TIMEOUT).await? {
            Response::Regions(r) => Ok(r),
            _ => Err(ClientError::Unexpected),
        }
    }

    /// One region.
    pub async fn region(&mut self, id: RegionId) -> Result<Option<Region>, ClientError> {
        match self.exchange(Request::Region { id }, EXCHANGE_TIMEOUT).await? {
            Response::Regions(r) => Ok(r.into_iter().next()),
            _ => Err(ClientError::Unexpected),
        }
    }

    /// Opens an input region for a line about to be typed into a program.
    pub async fn open_input(&mut self, spec: dtmcp_core::region::InputSpec) -> Result<Region, ClientError> {
        match self.exchange(Request::OpenInput(spec), EXCHANGE_TIMEOUT).await? {
            Response::Regions(r) => r.into_iter().next().ok_or(ClientError::Unexpected),
            _ => Err(ClientError::Unexpected),
        }
    }

    /// One agent's state in the session, if the session knows it.
    pub async fn agent(&mut self, actor: &str) -> Result<Option<AgentState>, ClientError> {
        match self.exchange(Request::Agent { actor: actor.to_string() }, EXCHANGE_TIMEOUT).await? {
            Response::Agent(state) => Ok(state),
            _ => Err(ClientError::Unexpected),
        }
    }

    /// Has the logger keep `state` for `actor`.
    pub async fn set_agent(&mut self, actor: &str, state: AgentState) -> Result<(), ClientError> {
        match self.exchange(Request::SetAgent { actor: actor.to_string(), state }, EXCHANGE_TIMEOUT).await? {
            Response::Stored => Ok(()),
            _ => Err(ClientError::Unexpected),
        }
    }

    /// Sends that the call with idempotency key `key` is about to type at
    /// `mark`, without waiting for the logger's answer: once the frame is
    /// on the socket the logger reads it even if this router dies, which
    /// is all the note is for. `false` when the connection is closed.
    pub fn send_typing_note(&self, key: &str, mark: Mark) -> bool {
        let id = self.conn.next_id.fetch_add(1, Ordering::Relaxed);
        let req = Request::Typing { key: key.to_string(), mark };
        // The answer, under an id nobody waits for, is dropped on arrival.
        protocol::encode(&Tagged { id, msg: req }).is_ok_and(|frame| self.conn.outbox.send(frame))
    }

    /// The mark the call with idempotency key `key` typed at, if one did.
    pub async fn typed(&mut self, key: &str) -> Result<Option<Mark>, ClientError> {
        match self.exchange(Request::Typed { key: key.to_string() }, EXCHANGE_TIMEOUT).await? {
            Response::Typed(mark) => Ok(mark),
            _ => Err(ClientError::Unexpected),
        }
    }

    /// Waits as `spec` says; the exchange may last the wait's timeout plus
    /// the usual margin.
    pub async fn wait(&mut self, spec: WaitSpec) -> Result<(WaitReason, Status), ClientError> {
        let (reason, status, _) = self.wait_region(spec).await?;
        Ok((reason, status))
    }

    /// Waits as [`LoggerClient::wait`] does, and also returns the first
    /// region opened after the wait's mark, as it was when the wait ended.
    pub async fn wait_region(&mut self, spec: WaitSpec) -> Result<(WaitReason, Status, Option<Region>), ClientError> {
        let limit = Duration::from_millis(spec.timeout_ms) + EXCHANGE_TIMEOUT;
        let _counted = crate::metrics::get().wait();
        match self.exchange(Request::Wait(spec), limit).await? {
            Response::Waited { reason, status, region } => Ok((reason, status, region)),
            _ => Err(ClientError::Unexpected),
        }
    }
}

/// A connection to the logger that replaces the dead one of `old`, once
/// the repair has attached it; tries for [`EXCHANGE_TIMEOUT`].
async fn reconnect(old: &Conn) -> Result<Arc<Conn>, ClientError> {
    let pool = Loggers(old.pool.upgrade().ok_or(ClientError::Closed)?);
    let deadline = tokio::time::Instant::now() + EXCHANGE_TIMEOUT;
    loop {
        match pool.connect(&old.path).await {
            Ok(client) => return Ok(client.conn),
            Err(e @ (ClientError::Stalled { .. } | ClientError::Version { .. })) => return Err(e),
            Err(e) if tokio::time::Instant::now() >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// The slot's connection if it is open. A logger that has just died may
/// not have been noticed by the reader task yet: the socket is asked too.
/// One whose logger said its output ended is not handed out again: a new
/// session of the same name has a new logger at the same path.
fn open(slot: &Slot) -> Option<Arc<Conn>> {
    let usable = |c: &&Arc<Conn>| !c.closed.load(Ordering::Acquire) && !c.ended.load(Ordering::Acquire);
    let conn = lock(&slot.conn).as_ref().filter(usable).cloned()?;
    if hung_up(&conn.probe) {
        conn.end();
        return None;
    }
    Some(conn)
}

/// Whether the other end of socket `fd` has closed it (one `poll` that
/// does not wait).
fn hung_up(fd: &OwnedFd) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    // A Unix stream socket whose peer closed it reports POLLHUP, which
    // needs no asking.
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::empty())];
    let gone = PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL;
    poll(&mut fds, PollTimeout::ZERO).is_ok_and(|n| n > 0) && fds[0].revents().is_some_and(|r| r.intersects(gone))
}

/// Connects to the logger at `path`, starts the connection's tasks and
/// checks the logger's version.
async fn new_connection(path: &Path, pool: Weak<Pool>) -> Result<Arc<Conn>, ClientError> {
    let err = |source| ClientError::Connect { path: path.display().to_string(), source };
    let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    if let Some(pid) = super::stopped::stopped_logger(&dir) {
        return Err(ClientError::Stalled { pid });
    }
    let stream = tokio::time::timeout(EXCHANGE_TIMEOUT, UnixStream::connect(path))
        .await
        .map_err(|_| ClientError::Timeout(EXCHANGE_TIMEOUT))?
        .map_err(err)?;
    let probe = stream.as_fd().try_clone_to_owned().map_err(err)?;
    // Watched for reading only: the logger reading a request does not
    // wake this side.
    let (rx, tx) = QuietSocket::from_tokio(stream).map_err(err)?.into_split();
    let outbox = Arc::new(Outbox {
        tx,
        queue: Mutex::new(VecDeque::new()),
        wake: tokio::sync::Notify::new(),
        shut: AtomicBool::new(false),
    });
    let conn = Arc::new(Conn {
        outbox: Arc::clone(&outbox),
        pending: Mutex::new(Some(HashMap::new())),
        next_id: AtomicU64::new(1),
        closed: AtomicBool::new(false),
        ended: AtomicBool::new(false),
        shutdown: tokio::sync::Notify::new(),
        probe,
        dir,
        path: path.to_path_buf(),
        pool,
    });
    tokio::spawn(write_frames(outbox, Arc::downgrade(&conn)));
    tokio::spawn(read_answers(rx, Arc::clone(&conn)));
    let hello = conn.exchange(Request::Hello { version: PROTOCOL_VERSION }, EXCHANGE_TIMEOUT).await;
    let checked = match hello {
        Ok(Response::Hello { version, .. }) if version == PROTOCOL_VERSION => Ok(()),
        Ok(Response::Hello { version, .. }) => Err(ClientError::Version { theirs: version }),
        Ok(_) => Err(ClientError::Unexpected),
        Err(e) => Err(e),
    };
    if let Err(e) = checked {
        // Not pooled: the reader stops, and the writer with the last handle.
        conn.close();
        return Err(e);
    }
    Ok(conn)
}

/// Returns once the logger of `dir` is seen stopped twice in a row (a
/// traced process flickers through a stop at every system call); never
/// while it runs.
async fn stall(dir: &Path) -> u32 {
    let mut seen = None;
    loop {
        tokio::time::sleep(STALL_POLL).await;
        let now = super::stopped::stopped_logger(dir);
        if let Some(pid) = now.filter(|&p| seen == Some(p)) {
            return pid;
        }
        seen = now;
    }
}

#[cfg(test)]
mod tests {
    //! The pool against a scripted peer on a real socket, which answers as
    //! each test says (the logger's own loop is tested in its crate, and
    //! with the router end to end).
    use super::*;
    use std::os::unix::net::UnixListener;

    type Peer = std::os::unix::net::UnixStream;

    fn recv(peer: &mut Peer) -> Tagged<Request> {
        protocol::read_frame(peer).expect("a frame").expect("not the end")
    }

    fn send(peer: &mut Peer, id: u64, msg: Response) {
        protocol::write_frame(peer, &Tagged { id, msg }).expect("send");
    }

    /// A socket in a fresh directory, and a thread that accepts one
    /// connection, answers its hello and hands it to `script`.
    fn peer(script: impl FnOnce(Peer) + Send + 'static) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("logger.sock");
        let listener = UnixListener::bind(&path).expect("bind");
        std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().expect("accept");
            let hello = recv(&mut conn);
            assert!(matches!(hello.msg, Request::Hello { .. }), "{hello:?}");
            send(&mut conn, hello.id, Response::Hello { version: PROTOCOL_VERSION, pid: 1 });
            script(conn);
        });
        (dir, path)
    }

    #[tokio::test]
    async fn answers_reach_their_exchange_in_whatever_order_they_come() {
        let loggers = Loggers::default();
        let (_dir, path) = peer(|mut conn| {
            let first = recv(&mut conn);
            let second = recv(&mut conn);
            let (wait, status) = if matches!(first.msg, Request::Wait(_)) { (first, second) } else { (second, first) };
            // The status is answered first, as the logger does while a
            // wait goes on.
            send(&mut conn, status.id, Response::Status(Status { current_text: "now".into(), ..Status::default() }));
            let region = Some(Region { id: RegionId(3), ..Region::default() });
            send(
                &mut conn,
                wait.id,
                Response::Waited { reason: WaitReason::Prompt, status: Status::default(), region },
            );
            // Keeps the connection open until the client is done.
            let _ = protocol::read_frame::<Tagged<Request>>(&mut conn);
        });
        let mut waiter = loggers.connect(&path).await.expect("connect");
        let mut asker = loggers.connect(&path).await.expect("the same connection");
        assert!(Arc::ptr_eq(&waiter.conn, &asker.conn), "a second connection was opened");
        let (waited, status) =
            tokio::join!(waiter.wait_region(WaitSpec { timeout_ms: 5_000, ..WaitSpec::default() }), async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                asker.status().await
            });
        assert_eq!(status.expect("status").current_text, "now");
        let (reason, _, region) = waited.expect("waited");
        assert_eq!(reason, WaitReason::Prompt);
        assert_eq!(region.map(|r| r.id), Some(RegionId(3)));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn frames_the_socket_cannot_take_at_once_go_out_later_whole_and_in_order() {
        let loggers = Loggers::default();
        const FRAMES: u64 = 64;
        let (got_tx, got_rx) = std::sync::mpsc::channel();
        let (_dir, path) = peer(move |mut conn| {
            // Reads nothing for a while: the socket's buffer fills.
            std::thread::sleep(Duration::from_millis(300));
            let ids: Vec<u64> = (0..FRAMES).map(|_| recv(&mut conn).id).collect();
            let _ = got_tx.send(ids);
            let _ = protocol::read_frame::<Tagged<Request>>(&mut conn);
        });
        let client = loggers.connect(&path).await.expect("connect");
        let actor = "x".repeat(16 * 1024);
        let mut queued = false;
        for id in 1000..1000 + FRAMES {
            let frame = protocol::encode(&Tagged { id, msg: Request::Agent { actor: actor.clone() } }).expect("encode");
            assert!(client.conn.outbox.send(frame), "frame {id} refused");
            queued |= !lock(&client.conn.outbox.queue).is_empty();
        }
        assert!(queued, "1 MB went out without the socket ever filling: the backlog was not tried");
        let got = tokio::task::spawn_blocking(move || got_rx.recv_timeout(Duration::from_secs(10)));
        let ids = got.await.expect("join").expect("the peer read every frame");
        assert_eq!(ids, (1000..1000 + FRAMES).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn a_wait_given_up_is_cancelled_and_a_closed_connection_is_announced() {
        let loggers = Loggers::default();
        let (cancelled_tx, cancelled_rx) = std::sync::mpsc::channel();
        let (dir, path) = peer(move |mut conn| {
            let wait = recv(&mut conn);
            let next = recv(&mut conn);
            let _ = cancelled_tx.send(matches!(next.msg, Request::Cancel { id } if id == wait.id));
            // Then the logger dies.
        });
        let mut closed = loggers.closed_connections();
        let mut client = loggers.connect(&path).await.expect("connect");
        let spec = WaitSpec { timeout_ms: 60_000, ..WaitSpec::default() };
        assert!(tokio::time::timeout(Duration::from_millis(100), client.wait(spec)).await.is_err());
        let cancelled = tokio::task::spawn_blocking(move || cancelled_rx.recv_timeout(Duration::from_secs(5)));
        assert_eq!(cancelled.await.expect("join").ok(), Some(true), "the wait was not cancelled at the logger");
        let announced = tokio::time::timeout(Duration::from_secs(5), async {
            while let Some(gone) = closed.recv().await {
                if gone == dir.path() {
                    return true;
                }
            }
            false
        });
        assert!(announced.await.unwrap_or(false), "the closed connection was not announced");
        assert!(!loggers.connected(dir.path()));
        assert!(matches!(client.status().await, Err(ClientError::Closed | ClientError::Connect { .. })));
    }

    #[tokio::test]
    async fn a_held_wait_is_answered_under_the_next_id_and_cancelled_when_dropped() {
        let loggers = Loggers::default();
        let (cancelled_tx, cancelled_rx) = std::sync::mpsc::channel();
        let (_dir, path) = peer(move |mut conn| {
            let asked = recv(&mut conn);
            assert!(matches!(asked.msg, Request::StatusWait(_, s) if s.grace_ms == 700), "{asked:?}");
            let mark = Mark { regions: 4, ..Mark::default() };
            let status = Status { mark, current_text: "$ ".into(), ..Status::default() };
            send(&mut conn, asked.id, Response::Status(status.clone()));
            let region = Some(Region { id: RegionId(5), ..Region::default() });
            send(
                &mut conn,
                asked.id + 1,
                Response::Waited { reason: WaitReason::RegionEnded(RegionId(5)), status, region },
            );
            // A second pair whose wait the client drops unanswered.
            let again = recv(&mut conn);
            send(&mut conn, again.id, Response::Status(Status::default()));
            let next = recv(&mut conn);
            let _ = cancelled_tx.send(matches!(next.msg, Request::Cancel { id } if id == again.id + 1));
            let _ = protocol::read_frame::<Tagged<Request>>(&mut conn);
        });
        let mut client = loggers.connect(&path).await.expect("connect");
        let spec = WaitSpec { command_done: true, timeout_ms: 5_000, ..WaitSpec::default() };
        let settle = Settle { own_integrated: true, grace_ms: 700 };
        let (status, held) = client.status_wait(spec.clone(), settle).await.expect("status");
        let held = held.expect("a held wait");
        assert_eq!(held.after(), status.mark, "the wait's mark is not the status's");
        let (reason, _, region) = held.answer().await.expect("waited");
        assert_eq!(reason, WaitReason::RegionEnded(RegionId(5)));
        assert_eq!(region.map(|r| r.id), Some(RegionId(5)));
        let (_, held) = client.status_wait(spec, settle).await.expect("status");
        drop(held);
        let cancelled = tokio::task::spawn_blocking(move || cancelled_rx.recv_timeout(Duration::from_secs(5)));
        assert_eq!(cancelled.await.expect("join").ok(), Some(true), "the held wait was not cancelled at the logger");
    }
}
