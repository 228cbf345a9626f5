//! The logger's socket: an event loop serving every connection, answering
//! requests from the shared state and the files (see
//! [`dtmcp_core::protocol`] for the wire).
//!
//! The logger runs the loop in the pump's thread (see
//! [`super::main_loop`]): one `poll` sleeps on the pane's output, the
//! listener and the connections, and the waits held are looked at again
//! right after each chunk of output is published, and when their time
//! comes. The tests run it on a thread of its own ([`serve`]), which a
//! publication wakes through the wake-up pipe (see [`super::state`]). A
//! wait is kept as a [`Watch`] with a deadline; an input region is asked
//! of the pump and answered once the pump has opened it.
//!
//! Nothing blocks the loop on a client: sockets are non-blocking, answers
//! go to a connection's out buffer and are written as the client reads. A
//! client that stops reading stops being read once its buffer passes
//! [`OUT_PAUSE`], and is dropped once it passes [`OUT_LIMIT`]. The numbers of
//! connections ([`MAX_CONNECTIONS`]) and of waits per connection
//! ([`MAX_WAITS`]) are bounded.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

use interprocess::local_socket::{GenericFilePath, Listener, ListenerOptions, prelude::*};
use interprocess::os::unix::local_socket::ListenerOptionsExt;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::LoggerError;
use super::state::{Shared, Watch};
use dtmcp_core::protocol::{
    self, MAX_FRAME, MAX_READ_LINES, MAX_WAITS, PROTOCOL_VERSION, Request, Response, Status, Tagged, WaitReason,
    WaitSpec,
};
use dtmcp_core::region::Region;
use dtmcp_core::store::LineReader;

/// The most connections served at once; more are closed at once.
pub const MAX_CONNECTIONS: usize = 64;
/// Past this many unsent bytes a connection's requests are no longer read
/// until its client reads.
const OUT_PAUSE: usize = 1 << 20;
/// Past this many unsent bytes the client is taken for gone and dropped.
const OUT_LIMIT: usize = MAX_FRAME + (8 << 20);
/// The most bytes read from one connection per turn of the loop, so that
/// one busy client does not starve the others.
const READ_TURN: usize = 64 << 10;
/// How long the pump may take to open an input region.
const OPEN_TIMEOUT: Duration = Duration::from_secs(2);

/// Binds `path` with mode 0600, replacing a socket left by a dead logger.
pub fn bind(path: &Path) -> Result<UnixListener, LoggerError> {
    let err = |source| LoggerError::Socket { path: path.to_path_buf(), source };
    // A stale socket file from a killed logger would make bind fail; this
    // logger owns the pane now, so the old name is ours to take.
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(err(e)),
        _ => {}
    }
    let name = path.to_fs_name::<GenericFilePath>().map_err(err)?;
    let listener = ListenerOptions::new().name(name).mode(0o600).create_sync().map_err(err)?;
    let Listener::UdSocket(listener) = listener;
    let listener = UnixListener::from(listener);
    listener.set_nonblocking(true).map_err(err)?;
    Ok(listener)
}

/// Serves connections on a thread of its own until the process ends,
/// woken through the wake-up pipe by publications made on other threads:
/// how the tests run the socket (they publish in the pump's place). The
/// logger runs the same loop in the pump's thread (see [`super::main_loop`]).
#[cfg(test)]
pub fn serve(listener: UnixListener, shared: Arc<Shared>) {
    let mut server = Server::new(listener, shared, false);
    loop {
        server.turn(None);
    }
}

/// The loop's state.
pub struct Server {
    listener: UnixListener,
    shared: Arc<Shared>,
    conns: Vec<Conn>,
    /// The pump published during the last look: look again at once.
    again: bool,
    /// Served in the pump's thread, which looks at the waits itself after
    /// each chunk: publications never ring the wake-up pipe.
    inline: bool,
}

/// One client.
struct Conn {
    stream: UnixStream,
    /// Bytes read and not yet a whole frame.
    inbuf: Vec<u8>,
    /// Answers not yet written, from `out_at` on.
    out: Vec<u8>,
    out_at: usize,
    /// The waits held for it, by request id.
    waits: Vec<(u64, Watch)>,
    /// Input regions asked of the pump, by request id.
    opens: Vec<Open>,
    /// Looks at the state that wait for the shell's next prompt.
    settling: Vec<Settling>,
    /// It went away or broke the protocol: dropped at the end of the turn.
    dead: bool,
    /// Requests it sent.
    served: u64,
}

/// A [`Request::StatusWait`] that found the shell between a command's end
/// and its next prompt: answered once that prompt is shown, the output
/// ends, or `deadline` passes.
struct Settling {
    id: u64,
    spec: WaitSpec,
    own_integrated: bool,
    deadline: Instant,
}

impl Settling {
    fn done(&self, status: &Status, now: Instant) -> bool {
        now >= self.deadline || status.eof || !status.between_commands(self.own_integrated)
    }
}

/// An input region asked of the pump.
struct Open {
    id: u64,
    answer: Receiver<Result<Region, String>>,
    deadline: Instant,
}

impl Server {
    /// The socket's loop over `listener`; `inline` when the pump's thread
    /// runs it (publications then never ring the wake-up pipe).
    pub fn new(listener: UnixListener, shared: Arc<Shared>, inline: bool) -> Server {
        Server { listener, shared, conns: Vec::new(), again: false, inline }
    }

    /// One turn on its own: sleep until something happens (at most until
    /// `cap`), then serve it.
    fn turn(&mut self, cap: Option<Instant>) {
        let due = [self.due(), cap].into_iter().flatten().min();
        let ready = {
            let mut fds = Vec::with_capacity(2 + self.conns.len());
            self.fds(&mut fds);
            match poll(&mut fds, timeout_until(due)) {
                Ok(_) => {}
                Err(_) => return, // EINTR; nothing else is expected of poll
            }
            ready(&fds)
        };
        self.serve_ready(&ready);
        self.finish_turn();
    }

    /// When the loop must look again though nothing happens: at once after
    /// a publication it may have missed, else when the first held wait or
    /// input region is due.
    pub fn due(&self) -> Option<Instant> {
        if self.again {
            return Some(Instant::now());
        }
        self.next_due()
    }

    /// Adds what the loop polls: the wake-up pipe, the listener and the
    /// connections, in the order [`Server::serve_ready`] takes their events.
    pub fn fds<'a>(&'a self, fds: &mut Vec<PollFd<'a>>) {
        fds.push(PollFd::new(self.shared.wake_fd(), PollFlags::POLLIN));
        fds.push(PollFd::new(self.listener.as_fd(), PollFlags::POLLIN));
        for c in &self.conns {
            let mut flags = PollFlags::empty();
            if c.unsent() < OUT_PAUSE {
                flags |= PollFlags::POLLIN;
            }
            if c.unsent() > 0 {
                flags |= PollFlags::POLLOUT;
            }
            fds.push(PollFd::new(c.stream.as_fd(), flags));
        }
    }

    /// Serves what `poll` found on the descriptors [`Server::fds`] added
    /// (their events, in the same order): requests, answers to write, new
    /// connections.
    pub fn serve_ready(&mut self, ready: &[PollFlags]) {
        let [woken, accept, conns @ ..] = ready else { return };
        if !woken.is_empty() {
            self.shared.drain_wake();
        }
        for (conn, flags) in self.conns.iter_mut().zip(conns) {
            if flags.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR) {
                conn.read_requests(&self.shared);
            }
            if flags.contains(PollFlags::POLLOUT) {
                conn.flush();
                // Requests held back while the client did not read.
                if conn.unsent() < OUT_PAUSE && !conn.inbuf.is_empty() {
                    conn.serve_buffered(&self.shared);
                }
            }
        }
        if !accept.is_empty() {
            self.accept();
        }
    }

    /// Ends a turn: answers the held waits and input regions that are done,
    /// and drops the connections that went away.
    pub fn finish_turn(&mut self) {
        self.look_again();
        self.conns.retain(|c| !c.dead);
    }

    /// How many requests the connections open now have sent.
    fn served(&self) -> u64 {
        self.conns.iter().map(|c| c.served).sum()
    }

    /// Whether an input region asked of the pump awaits its answer.
    pub fn asked_pump(&self) -> bool {
        self.conns.iter().any(|c| !c.opens.is_empty())
    }

    /// After the output ended: serves until every held wait and input
    /// region is answered (they learn of the end), and then for as long as
    /// requests keep coming, each within `quiet` of the last (a client told
    /// of the end reads what the command printed), `limit` at most.
    pub fn answer_all(&mut self, limit: Duration, quiet: Duration) {
        let deadline = Instant::now() + limit;
        let mut last = Instant::now();
        let mut seen = self.served();
        loop {
            self.finish_turn();
            if self.served() != seen {
                (seen, last) = (self.served(), Instant::now());
            }
            let held = self.conns.iter().any(|c| c.held() > 0);
            let now = Instant::now();
            if now >= deadline || (!held && now >= last + quiet) {
                return;
            }
            let cap = if held { deadline } else { deadline.min(last + quiet) };
            self.turn(Some(cap));
        }
    }

    /// Takes the connections waiting on the listener; past
    /// [`MAX_CONNECTIONS`] they are closed at once.
    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if self.conns.len() >= MAX_CONNECTIONS || stream.set_nonblocking(true).is_err() {
                        continue; // dropped: closed
                    }
                    self.conns.push(Conn {
                        stream,
                        inbuf: Vec::new(),
                        out: Vec::new(),
                        out_at: 0,
                        waits: Vec::new(),
                        opens: Vec::new(),
                        settling: Vec::new(),
                        dead: false,
                        served: 0,
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return, // WouldBlock, or a failure the next turn retries
            }
        }
    }

    /// Looks at every held wait and input region again, answering those
    /// that are done; then tells the pump whether a publication must wake
    /// the loop. If the pump published meanwhile, the next turn looks again
    /// without sleeping, so that no publication goes unseen.
    fn look_again(&mut self) {
        self.again = false;
        if self.conns.iter().all(|c| c.held() == 0) {
            let mut live = self.shared.lock();
            live.watching = 0;
            live.rung = false;
            return;
        }
        let (version, status) = {
            let mut live = self.shared.lock();
            // Publications from now on ring again.
            live.rung = false;
            (live.version, live.status())
        };
        let now = Instant::now();
        let mut held = 0;
        for conn in &mut self.conns {
            conn.look_again(&self.shared, &status, now);
            held += conn.held();
        }
        let mut live = self.shared.lock();
        live.watching = if self.inline { 0 } else { held };
        // Published meanwhile, before the pump knew to ring: look again
        // after a poll that does not sleep (so that a flood of output does
        // not keep the loop from reading requests).
        self.again = held > 0 && live.version != version;
    }

    /// The earliest moment a held wait or input region must be looked at
    /// though nothing happens.
    fn next_due(&self) -> Option<Instant> {
        let now = Instant::now();
        let waits = self.conns.iter().flat_map(|c| c.waits.iter().map(move |(_, w)| w.next_check(now)));
        let opens = self.conns.iter().flat_map(|c| c.opens.iter().map(|o| o.deadline));
        let settling = self.conns.iter().flat_map(|c| c.settling.iter().map(|s| s.deadline));
        waits.chain(opens).chain(settling).min()
    }
}

impl Conn {
    fn unsent(&self) -> usize {
        self.out.len() - self.out_at
    }

    /// The waits, input regions and settling looks held for it.
    fn held(&self) -> usize {
        self.waits.len() + self.opens.len() + self.settling.len()
    }

    /// Reads what the client sent (at most [`READ_TURN`] bytes) and serves
    /// the whole requests in it.
    fn read_requests(&mut self, shared: &Shared) {
        let mut buf = [0u8; 16 << 10];
        let mut taken = 0;
        while taken < READ_TURN && !self.dead {
            match self.stream.read(&mut buf) {
                Ok(0) => self.dead = true,
                Ok(n) => {
                    self.inbuf.extend_from_slice(&buf[..n]);
                    taken += n;
                    // Short of the buffer: the socket is empty for now, and
                    // poll (level triggered) says when it is not.
                    if n < buf.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => self.dead = true,
            }
        }
        self.serve_buffered(shared);
    }

    /// Serves the whole requests read so far, until the answers waiting to
    /// be written pass [`OUT_PAUSE`]; the rest wait for the client to read.
    fn serve_buffered(&mut self, shared: &Shared) {
        let mut at = 0;
        while !self.dead && self.unsent() < OUT_PAUSE && self.inbuf.len() - at >= 4 {
            let prefix = [self.inbuf[at], self.inbuf[at + 1], self.inbuf[at + 2], self.inbuf[at + 3]];
            let Ok(len) = protocol::frame_len(prefix) else {
                self.dead = true;
                break;
            };
            if self.inbuf.len() - at - 4 < len {
                break;
            }
            let decoded = protocol::decode::<Tagged<Request>>(&self.inbuf[at + 4..at + 4 + len]);
            at += 4 + len;
            match decoded {
                Ok(request) => self.serve(request, shared),
                Err(_) => self.dead = true,
            }
        }
        self.inbuf.drain(..at);
        self.flush();
    }

    /// Serves one request: answered at once, or held.
    fn serve(&mut self, Tagged { id, msg }: Tagged<Request>, shared: &Shared) {
        self.served += 1;
        let held = self.held();
        let answer = match msg {
            Request::Cancel { id: wait } => {
                self.waits.retain(|(w, _)| *w != wait);
                self.settling.retain(|s| s.id != wait && s.id.wrapping_add(1) != wait);
                return;
            }
            Request::StatusWait(spec, settle) => {
                let status = shared.lock().status();
                if settle.grace_ms > 0
                    && held < MAX_WAITS
                    && !status.eof
                    && status.between_commands(settle.own_integrated)
                {
                    let grace = Duration::from_millis(settle.grace_ms.min(protocol::MAX_WAIT_MS));
                    let own_integrated = settle.own_integrated;
                    self.settling.push(Settling { id, spec, own_integrated, deadline: Instant::now() + grace });
                    return;
                }
                return self.status_wait(id, spec, status, shared);
            }
            Request::Wait(_) | Request::OpenInput(_) if held >= MAX_WAITS => Response::Error {
                message: format!(
                    "this connection already holds {MAX_WAITS} waits; wait for some to end or cancel them"
                ),
            },
            Request::Wait(spec) => match Watch::new(spec, Instant::now()) {
                Ok(mut watch) => {
                    let status = shared.lock().status();
                    match watch.check(shared, &status, Instant::now()) {
                        Some(reason) => waited(shared, &watch, reason, status),
                        None => {
                            self.waits.push((id, watch));
                            return;
                        }
                    }
                }
                Err(message) => Response::Error { message },
            },
            Request::OpenInput(spec) => match shared.inbox.open_input(spec) {
                Ok(answer) => {
                    self.opens.push(Open { id, answer, deadline: Instant::now() + OPEN_TIMEOUT });
                    return;
                }
                Err(message) => Response::Error { message },
            },
            other => answer(other, shared),
        };
        self.send(id, &answer);
    }

    /// Answers a [`Request::StatusWait`] with `status`, and holds its wait
    /// from that look: the output read after it is the wait's to see.
    fn status_wait(&mut self, id: u64, mut spec: WaitSpec, status: Status, shared: &Shared) {
        spec.after = status.mark;
        self.send(id, &Response::Status(status));
        self.serve(Tagged { id: id.wrapping_add(1), msg: Request::Wait(spec) }, shared);
    }

    /// Answers the held waits, input regions and settling looks that are
    /// done.
    fn look_again(&mut self, shared: &Shared, status: &Status, now: Instant) {
        let mut done = Vec::new();
        self.waits.retain_mut(|(id, watch)| match watch.check(shared, status, now) {
            Some(reason) => {
                done.push((*id, waited(shared, watch, reason, status.clone())));
                false
            }
            None => true,
        });
        self.opens.retain(|open| {
            let answer = match open.answer.try_recv() {
                Ok(Ok(region)) => Response::Regions(vec![region]),
                Ok(Err(message)) => Response::Error { message },
                Err(TryRecvError::Disconnected) => {
                    Response::Error { message: "the logger's pump stopped before it opened the input region".into() }
                }
                Err(TryRecvError::Empty) if now >= open.deadline => {
                    Response::Error { message: "the logger's pump did not answer in time".into() }
                }
                Err(TryRecvError::Empty) => return true,
            };
            done.push((open.id, answer));
            false
        });
        for (id, answer) in done {
            self.send(id, &answer);
        }
        if !self.settling.is_empty() {
            let (ready, still): (Vec<_>, Vec<_>) =
                std::mem::take(&mut self.settling).into_iter().partition(|s| s.done(status, now));
            self.settling = still;
            for s in ready {
                self.status_wait(s.id, s.spec, status.clone(), shared);
            }
        }
        if self.unsent() > 0 {
            self.flush();
        }
    }

    /// Puts an answer in the out buffer and writes what the socket takes.
    fn send(&mut self, id: u64, msg: &Response) {
        let frame = protocol::encode(&Tagged { id, msg }).or_else(|e| {
            protocol::encode(&Tagged { id, msg: &Response::Error { message: format!("the answer is too big: {e}") } })
        });
        match frame {
            Ok(frame) => self.out.extend_from_slice(&frame),
            Err(_) => self.dead = true,
        }
        if self.unsent() > OUT_LIMIT {
            self.dead = true;
        }
        self.flush();
    }

    /// Writes the out buffer until the socket would block.
    fn flush(&mut self) {
        while self.unsent() > 0 && !self.dead {
            match self.stream.write(&self.out[self.out_at..]) {
                Ok(0) => self.dead = true,
                Ok(n) => self.out_at += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => self.dead = true,
            }
        }
        if self.out_at == self.out.len() {
            self.out.clear();
            self.out_at = 0;
        } else if self.out_at > OUT_PAUSE {
            self.out.drain(..self.out_at);
            self.out_at = 0;
        }
    }
}

/// A poll timeout that ends at `due` (never, without one).
pub fn timeout_until(due: Option<Instant>) -> PollTimeout {
    let Some(due) = due else { return PollTimeout::NONE };
    // Rounded up: waking before the moment would only spin.
    let ms = due.saturating_duration_since(Instant::now()).as_micros().div_ceil(1000).min(60_000);
    PollTimeout::try_from(ms as u64).unwrap_or(PollTimeout::MAX)
}

/// The events `poll` found, one per descriptor.
pub fn ready(fds: &[PollFd<'_>]) -> Vec<PollFlags> {
    fds.iter().map(|fd| fd.revents().unwrap_or(PollFlags::empty())).collect()
}

/// The answer to a wait that ended for `reason` with the state `status`.
fn waited(shared: &Shared, watch: &Watch, reason: WaitReason, status: Status) -> Response {
    let region = shared.region_after(&watch.spec.after, &status);
    Response::Waited { reason, status, region }
}

/// The answer to a request served at once.
fn answer(request: Request, shared: &Shared) -> Response {
    match request {
        Request::Hello { .. } => Response::Hello { version: PROTOCOL_VERSION, pid: std::process::id() },
        Request::Status => Response::Status(shared.lock().status()),
        Request::Read { from, count } => read(shared, from, count),
        Request::Regions { last } => {
            Response::Regions(shared.lock().last_regions(usize::try_from(last).unwrap_or(usize::MAX)))
        }
        Request::Region { id } => Response::Regions(shared.region(id).into_iter().collect()),
        Request::Agent { actor } => Response::Agent(shared.agents.get(&actor)),
        Request::SetAgent { actor, state } => match shared.agents.set(&actor, state) {
            Ok(()) => Response::Stored,
            Err(e) => Response::Error { message: e.to_string() },
        },
        Request::Typing { key, mark } => match shared.keys.note(key, mark) {
            Ok(()) => Response::Stored,
            Err(message) => Response::Error { message },
        },
        Request::Typed { key } => Response::Typed(shared.keys.typed(&key)),
        // Served by the loop itself.
        Request::Wait(_) | Request::OpenInput(_) | Request::Cancel { .. } | Request::StatusWait(..) => {
            Response::Error { message: "internal: a held request was answered at once".into() }
        }
    }
}

fn read(shared: &Shared, from: dtmcp_core::types::LineNo, count: u64) -> Response {
    let result = LineReader::open(&shared.dir).and_then(|r| r.read(from, count.min(MAX_READ_LINES)));
    match result {
        Ok(lines) => Response::Lines { first: from, lines },
        Err(e) => Response::Error { message: e.to_string() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dtmcp_core::protocol::{Mark, Settle};
    use dtmcp_core::region::LinePos;
    use dtmcp_core::types::{ByteOffset, LineNo, RegionId};

    /// A logger's socket served from `dir`, with no pump: the test
    /// publishes instead. The loop's thread lives on with the test process.
    fn start(dir: &Path) -> (Arc<Shared>, std::path::PathBuf) {
        let shared = Arc::new(Shared::open(dir, None).expect("shared"));
        let path = dir.join("logger.sock");
        let listener = bind(&path).expect("bind");
        let for_loop = Arc::clone(&shared);
        std::thread::spawn(move || serve(listener, for_loop));
        (shared, path)
    }

    struct Client(UnixStream);

    impl Client {
        fn connect(path: &Path) -> Client {
            let stream = UnixStream::connect(path).expect("connect");
            stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
            Client(stream)
        }

        fn send(&mut self, id: u64, msg: Request) {
            protocol::write_frame(&mut self.0, &Tagged { id, msg }).expect("send");
        }

        /// Sends on a connection the server may already have closed (one
        /// past the limit): a broken pipe then is the answer, not a fault.
        fn try_send(&mut self, id: u64, msg: Request) -> bool {
            protocol::write_frame(&mut self.0, &Tagged { id, msg }).is_ok()
        }

        fn recv(&mut self) -> Option<Tagged<Response>> {
            protocol::read_frame(&mut self.0).ok().flatten()
        }
    }

    fn region(id: u64, ended: bool) -> Region {
        Region {
            id: RegionId(id),
            command: format!("command {id}"),
            start: LinePos { line: LineNo(id), bytes: 0 },
            end: ended.then_some(LinePos { line: LineNo(id), bytes: 1 }),
            ..Region::default()
        }
    }

    #[test]
    fn waits_in_flight_on_one_connection_are_answered_as_they_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (shared, path) = start(dir.path());
        let mut c = Client::connect(&path);
        let mark = shared.lock().status().mark;
        let screen = WaitSpec { after: mark, full_screen: true, timeout_ms: 10_000, ..WaitSpec::default() };
        let short = WaitSpec { after: mark, timeout_ms: 150, ..WaitSpec::default() };
        let cancelled = WaitSpec { after: mark, full_screen: true, timeout_ms: 10_000, ..WaitSpec::default() };
        let sent = Instant::now();
        c.send(1, Request::Wait(screen));
        c.send(2, Request::Wait(short));
        c.send(3, Request::Wait(cancelled));
        c.send(4, Request::Cancel { id: 3 });
        c.send(5, Request::Status);
        // The status first, though sent last; then the short wait's timeout.
        let first = c.recv().expect("status");
        assert_eq!(first.id, 5);
        assert!(matches!(first.msg, Response::Status(_)), "{first:?}");
        let second = c.recv().expect("timeout");
        assert_eq!(second.id, 2);
        assert!(matches!(second.msg, Response::Waited { reason: WaitReason::Timeout, .. }), "{second:?}");
        assert!(sent.elapsed() >= Duration::from_millis(150), "timed out early: {:?}", sent.elapsed());
        // A publication ends the first wait, which carries the region it
        // was about; the cancelled one is never answered.
        shared.publish(|live| {
            live.shell.screens += 1;
            live.shell.regions = mark.regions + 1;
            live.upsert(region(mark.regions + 1, false));
        });
        let third = c.recv().expect("full screen");
        assert_eq!(third.id, 1);
        let Response::Waited { reason, region, .. } = third.msg else { panic!("{third:?}") };
        assert_eq!(reason, WaitReason::FullScreen);
        assert_eq!(region.map(|r| r.id), Some(RegionId(mark.regions + 1)));
        c.send(6, Request::Status);
        assert_eq!(c.recv().expect("status").id, 6, "the cancelled wait was answered");
        assert_eq!(shared.lock().watching, 0, "the loop still holds waits");
    }

    #[test]
    fn a_status_and_a_wait_from_it_come_in_one_exchange() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (shared, path) = start(dir.path());
        shared.publish(|live| {
            live.raw_len = 40;
            live.shell.regions = 1;
            live.upsert(region(1, true));
        });
        let mut c = Client::connect(&path);
        // `after` is the logger's to fill in: from the caller's (before
        // region 1) the wait would end at once.
        let stale = Mark::default();
        let spec = WaitSpec { after: stale, command_done: true, timeout_ms: 10_000, ..WaitSpec::default() };
        c.send(10, Request::StatusWait(spec, Settle::default()));
        let first = c.recv().expect("status");
        assert_eq!(first.id, 10);
        let Response::Status(status) = first.msg else { panic!("{first:?}") };
        assert_eq!((status.mark.raw, status.mark.regions), (ByteOffset(40), 1));
        // Held: a status asked after it is answered first.
        c.send(12, Request::Status);
        assert_eq!(c.recv().expect("status").id, 12, "the wait ended from the caller's mark");
        // A region that opened after the look and ends: the wait's, under
        // the next id, with the region it was about.
        let next = status.mark.regions + 1;
        shared.publish(|live| {
            live.raw_len = 90;
            live.shell.regions = next;
            live.upsert(region(next, true));
        });
        let second = c.recv().expect("waited");
        assert_eq!(second.id, 11);
        let Response::Waited { reason, region, .. } = second.msg else { panic!("{second:?}") };
        assert_eq!(reason, WaitReason::RegionEnded(RegionId(next)));
        assert_eq!(region.map(|r| r.id), Some(RegionId(next)));
    }

    #[test]
    fn a_look_between_a_command_and_its_prompt_waits_for_the_prompt() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (shared, path) = start(dir.path());
        // Command 1 has ended; its prompt is not shown yet.
        shared.publish(|live| {
            live.raw_len = 40;
            live.shell.integrated = true;
            live.shell.regions = 1;
            live.upsert(region(1, true));
        });
        let mut c = Client::connect(&path);
        let spec = WaitSpec { command_done: true, timeout_ms: 10_000, ..WaitSpec::default() };
        let settle = Settle { own_integrated: true, grace_ms: 10_000 };
        c.send(10, Request::StatusWait(spec.clone(), settle));
        // Not answered yet: a status asked after it comes first.
        c.send(12, Request::Status);
        assert_eq!(c.recv().expect("status").id, 12, "the look was taken between the end and the prompt");
        // The prompt: now the look, from after it, and the wait held from
        // there (the prompt is not taken for the end of what comes next).
        shared.publish(|live| {
            live.raw_len = 60;
            live.shell.at_prompt = true;
            live.shell.prompts += 1;
        });
        let first = c.recv().expect("status");
        assert_eq!(first.id, 10);
        let Response::Status(status) = first.msg else { panic!("{first:?}") };
        assert!(status.shell.at_prompt);
        assert_eq!(status.mark.raw, ByteOffset(60));
        c.send(13, Request::Status);
        assert_eq!(c.recv().expect("status").id, 13, "the wait ended at the prompt it waited for");
        c.send(14, Request::Cancel { id: 11 });
        // Served in order: once 15 is answered, the cancel is done.
        c.send(15, Request::Status);
        assert_eq!(c.recv().expect("status").id, 15);
        // Cancelling the wait's id drops a look still settling.
        shared.publish(|live| {
            live.raw_len = 80;
            live.shell.at_prompt = false;
            live.shell.regions = 2;
            live.upsert(region(2, true));
        });
        c.send(20, Request::StatusWait(spec.clone(), settle));
        c.send(22, Request::Cancel { id: 21 });
        c.send(23, Request::Status);
        assert_eq!(c.recv().expect("status").id, 23);
        shared.publish(|live| live.shell.at_prompt = true);
        c.send(24, Request::Status);
        assert_eq!(c.recv().expect("status").id, 24, "a cancelled look was answered");
        // Without a settle (or past the grace) the look is taken at once.
        shared.publish(|live| live.shell.at_prompt = false);
        c.send(30, Request::StatusWait(spec.clone(), Settle::default()));
        assert_eq!(c.recv().expect("status").id, 30);
        c.send(40, Request::StatusWait(spec, Settle { own_integrated: true, grace_ms: 50 }));
        let started = Instant::now();
        let late = c.recv().expect("status");
        assert_eq!(late.id, 40);
        assert!(started.elapsed() >= Duration::from_millis(40), "answered before the grace was over");
        assert!(matches!(late.msg, Response::Status(ref s) if !s.shell.at_prompt));
    }

    #[test]
    fn a_client_that_never_reads_does_not_hold_up_the_others() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (shared, path) = start(dir.path());
        shared.publish(|live| {
            for id in 1..=1000 {
                live.upsert(Region { command: "x".repeat(200), ..region(id, true) });
            }
        });
        // Asks for far more than the socket holds, and reads none of it.
        let mut greedy = Client::connect(&path);
        greedy.0.set_write_timeout(Some(Duration::from_millis(200))).expect("timeout");
        let mut asked = 0;
        for id in 0..400 {
            let frame = protocol::encode(&Tagged { id, msg: Request::Regions { last: 1000 } }).expect("encode");
            if greedy.0.write_all(&frame).is_err() {
                break; // the loop stopped reading it: its buffer is full
            }
            asked += 1;
        }
        assert!(asked > 10, "only {asked} requests went out");
        let started = Instant::now();
        let mut other = Client::connect(&path);
        other.send(1, Request::Status);
        let answer = other.recv().expect("an answer");
        assert!(matches!(answer.msg, Response::Status(Status { .. })));
        assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
        // The greedy client still gets its answers when it reads.
        let first = greedy.recv().expect("its first answer");
        assert_eq!(first.id, 0);
        let Response::Regions(rs) = first.msg else { panic!("{first:?}") };
        assert_eq!(rs.len(), 1000);
    }

    #[test]
    fn connections_past_the_limit_are_closed_and_the_rest_served() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_shared, path) = start(dir.path());
        let mut held: Vec<Client> = (0..MAX_CONNECTIONS)
            .map(|i| {
                let mut c = Client::connect(&path);
                c.send(i as u64, Request::Hello { version: PROTOCOL_VERSION });
                assert!(c.recv().is_some(), "connection {i} was not served");
                c
            })
            .collect();
        let mut over = Client::connect(&path);
        // The server may close it before or after the hello is written.
        if over.try_send(1, Request::Hello { version: PROTOCOL_VERSION }) {
            assert!(over.recv().is_none(), "a connection past the limit was served");
        }
        // One closed makes room for another.
        held.pop();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let mut again = Client::connect(&path);
            if again.try_send(1, Request::Hello { version: PROTOCOL_VERSION }) && again.recv().is_some() {
                break;
            }
            assert!(Instant::now() < deadline, "no room was made");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn waits_past_the_limit_are_refused_with_a_reason() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (shared, path) = start(dir.path());
        let mut c = Client::connect(&path);
        let mark = shared.lock().status().mark;
        for id in 0..=MAX_WAITS as u64 {
            c.send(
                id,
                Request::Wait(WaitSpec { after: mark, full_screen: true, timeout_ms: 60_000, ..WaitSpec::default() }),
            );
        }
        let refused = c.recv().expect("an answer");
        assert_eq!(refused.id, MAX_WAITS as u64);
        assert!(matches!(&refused.msg, Response::Error { message } if message.contains("waits")), "{refused:?}");
        shared.publish(|live| live.shell.screens += 1);
        for _ in 0..MAX_WAITS {
            assert!(matches!(c.recv().expect("waited").msg, Response::Waited { reason: WaitReason::FullScreen, .. }));
        }
    }

    #[test]
    fn the_region_table_keeps_the_last_regions_and_older_ones_come_from_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (shared, path) = start(dir.path());
        let mut log = dtmcp_core::store::RegionLog::open(dir.path()).expect("regions.jsonl");
        // Region 1 stays open all along (a shell an ssh session runs in).
        let total = 3 * super::super::state::KEPT_REGIONS as u64;
        for id in 1..=total {
            let r = region(id, id != 1);
            log.append(&r).expect("append");
            shared.publish(|live| {
                live.shell.regions = id;
                live.upsert(r);
            });
        }
        let len = shared.lock().table_len();
        assert!(len <= super::super::state::KEPT_REGIONS + 64 + 1, "the table holds {len} regions");
        let mut c = Client::connect(&path);
        for (n, id) in [1, 2, total / 2, total].into_iter().enumerate() {
            c.send(n as u64, Request::Region { id: RegionId(id) });
            let Response::Regions(rs) = c.recv().expect("answer").msg else { panic!("not regions") };
            assert_eq!(
                rs.iter().map(|r| (r.id.0, r.command.clone())).collect::<Vec<_>>(),
                [(id, format!("command {id}"))]
            );
        }
        assert!(shared.lock().region(RegionId(1)).is_some(), "the open region left the table");
        assert!(shared.lock().region(RegionId(2)).is_none(), "old ended regions stay in the table");
        c.send(9, Request::Region { id: RegionId(total + 1) });
        assert!(matches!(c.recv().expect("answer").msg, Response::Regions(rs) if rs.is_empty()));
    }
}
