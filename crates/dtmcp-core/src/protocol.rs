//! The wire protocol between the router and a pane logger.
//!
//! # Transport
//! One local (Unix-domain, stream) socket per pane, `logger.sock` in the
//! session's directory, mode 0600 inside a 0700 directory: only the user who
//! owns the session may connect, and the logger trusts whoever can.
//!
//! # Framing
//! Every message is one frame: a 4-byte little-endian length `N`, then `N`
//! bytes of a [`Request`] or [`Response`] encoded with `postcard`. A frame
//! larger than [`MAX_FRAME`] is a protocol error and closes the connection;
//! so does a frame that does not decode.
//!
//! # Exchanges
//! Every frame's body is a [`Tagged`] message: the request with an id the
//! caller chose, the response with the id of the request it answers. A
//! connection carries any number of exchanges, and several may be in
//! flight at once: the logger answers each as soon as it can, so the
//! answers may come in another order than the requests (a
//! [`Request::Wait`] is answered after a [`Request::Status`] sent after
//! it). A caller uses a fresh id for each request on a connection;
//! [`Request::Cancel`] is the one request that gets no answer.
//!
//! # Versions
//! The first request on a connection should be [`Request::Hello`]; the
//! logger answers with its own [`PROTOCOL_VERSION`]. postcard is not
//! self-describing: a message of another version would be misread rather
//! than rejected, so a router that meets a different version stops and says
//! so instead of talking on. Any change to a message bumps the version.
//!
//! A test holds the wire still: one frame of every message kind, nested
//! region and agent-state types filled in, is checked in
//! (`tests/golden/frames.txt` of this crate) and compared with what the
//! encoder makes now. A field added anywhere in a message changes a frame
//! and fails it. To change the wire on purpose, bump [`PROTOCOL_VERSION`],
//! add a line below saying what changed, and regenerate the frames with
//! `DTMCP_BLESS=1 cargo test -p dtmcp-core --test golden`.
//!
//! - 1: the first wire.
//! - 2: input regions ([`Request::OpenInput`], regions' kind, the input
//!   region in the shell state).
//! - 3: the text typed at the prompt and not submitted ([`Status::typed`]).
//! - 4: agents' state ([`Request::Agent`], [`Request::SetAgent`],
//!   [`Response::Agent`], [`Response::Stored`]).
//! - 5: the questions the output asked the terminal, in the shell state
//!   (`ShellState::answers`).
//! - 6: exchanges carry ids ([`Tagged`]) and may overlap on one connection;
//!   [`Request::Cancel`]; [`Response::Waited`] carries the region the wait
//!   was about.
//! - 7: idempotency keys noted before typing ([`Request::Typing`],
//!   [`Request::Typed`], [`Response::Typed`]).
//! - 8: [`Request::StatusWait`], the status and a wait from it in one
//!   round trip.
//! - 9: [`Request::StatusWait`] carries a [`Settle`]: a shell between a
//!   command's end and its next prompt is given that prompt before the
//!   look is taken.
//!
//! # Waiting
//! [`Request::Wait`] is answered when its condition is met or its timeout
//! (capped at [`MAX_WAIT_MS`]) runs out; a timeout is an ordinary answer,
//! never an error. Meanwhile the connection carries other exchanges, which
//! are answered at once. The answer holds the status at that moment and
//! the first region opened after the wait's mark, so that a caller needs no
//! further round trip for it. [`Request::StatusWait`] asks for the status
//! and for a wait from its mark together, for a caller that looks at the
//! state before it types and then waits for what it typed: the wait is
//! held before the answer with the state leaves, so nothing that follows
//! the look can slip in between. A logger keeps a bounded number of waits per
//! connection ([`MAX_WAITS`]); one more is answered with an error.
//!
//! # Agent state
//! [`Request::Agent`] and [`Request::SetAgent`] read and replace one
//! agent's [`AgentState`] (see [`crate::agent_state`]): the logger holds
//! it for the router, which keeps none of its own across a restart, and
//! writes it to `state.json` in the background.
//!
//! # Idempotency keys
//! A `run` that carries an idempotency key is noted with
//! [`Request::Typing`] (answered once in memory) just before it types:
//! the key and the mark it typed at. A router started again after a crash
//! asks [`Request::Typed`] when the same key comes again, and follows the
//! command it finds there instead of typing it twice. The logger outlives
//! the router, so memory is enough; it keeps the last [`MAX_KEYS`].

use std::io::{Read, Write};

use serde::{Deserialize, Serialize, de::DeserializeOwned};

use crate::agent_state::AgentState;
use crate::region::{InputSpec, Region, ShellState};
use crate::types::{ByteOffset, LineNo, RegionId};

/// The version both sides must speak.
pub const PROTOCOL_VERSION: u32 = 9;
/// The largest frame either side sends or accepts.
pub const MAX_FRAME: usize = 16 << 20;
/// The longest a single wait may last.
pub const MAX_WAIT_MS: u64 = 10 * 60 * 1000;
/// The most lines one read returns.
pub const MAX_READ_LINES: u64 = 100_000;
/// The most waits a logger holds for one connection at once.
pub const MAX_WAITS: usize = 256;
/// The most idempotency keys a logger remembers (the oldest goes first).
pub const MAX_KEYS: usize = 256;
/// The longest idempotency key a logger keeps.
pub const MAX_KEY: usize = 200;

/// A message with the id that pairs a response with its request: every
/// frame's body.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Tagged<T> {
    /// Chosen by the caller for a request, copied into its response.
    pub id: u64,
    /// The request or the response.
    pub msg: T,
}

/// What the router asks.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Request {
    /// Names the protocol version; answered by [`Response::Hello`].
    Hello {
        /// The caller's [`PROTOCOL_VERSION`].
        version: u32,
    },
    /// The logger's state now.
    Status,
    /// Cooked lines `from..from+count` (committed ones; the unfinished line
    /// is in the status).
    Read {
        /// The first line wanted.
        from: LineNo,
        /// How many lines, at most [`MAX_READ_LINES`].
        count: u64,
    },
    /// The last `last` regions, oldest first.
    Regions {
        /// How many.
        last: u64,
    },
    /// One region by id.
    Region {
        /// Its id.
        id: RegionId,
    },
    /// Waits for something to happen after a mark.
    Wait(WaitSpec),
    /// Opens an input region for a line about to be typed into a program;
    /// answered by [`Response::Regions`] holding it.
    OpenInput(InputSpec),
    /// One agent's state in this session; answered by [`Response::Agent`].
    Agent {
        /// The agent.
        actor: String,
    },
    /// Keeps one agent's state (unless the logger holds a newer version);
    /// answered by [`Response::Stored`] once it is in memory, before it
    /// reaches `state.json`.
    SetAgent {
        /// The agent.
        actor: String,
        /// Its whole state.
        state: AgentState,
    },
    /// Drops the wait sent with id `id` on this connection, unanswered (its
    /// caller gave up on it). Gets no answer itself; an id that names no
    /// wait is ignored.
    Cancel {
        /// The wait's request id.
        id: u64,
    },
    /// The call with idempotency key `key` is about to type at `mark`;
    /// answered by [`Response::Stored`] once it is in memory.
    Typing {
        /// The key (at most [`MAX_KEY`] bytes).
        key: String,
        /// The session's position when the call looked, before typing.
        mark: Mark,
    },
    /// What [`Request::Typing`] said of `key`; answered by
    /// [`Response::Typed`].
    Typed {
        /// The key.
        key: String,
    },
    /// The logger's state now and a wait from it, taken in one look: the
    /// state is answered at once ([`Response::Status`], under this
    /// request's id), and the wait, whose `after` becomes that state's
    /// mark, is held and answered as a [`Request::Wait`] is, under id + 1
    /// (the caller keeps both ids for this request). With a [`Settle`],
    /// a look that finds the shell between a command's end and its next
    /// prompt is taken again once that prompt is shown (or the grace is
    /// over), and both answers wait for it; a [`Request::Cancel`] of
    /// either id drops the request.
    StatusWait(WaitSpec, Settle),
}

/// Whether a [`Request::StatusWait`] waits out the moment between a
/// command's end and the next prompt: a mark taken in it would take that
/// prompt for the end of whatever is typed next.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settle {
    /// The session's own shell is integrated, so a prompt follows every
    /// command's end at its depth (see [`Status::between_commands`]).
    pub own_integrated: bool,
    /// How long to wait for that prompt, at most; 0 takes the look at once.
    pub grace_ms: u64,
}

/// What the logger answers.
// A message is made once and encoded at once, never kept in bulk: the size
// of its largest variant costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Response {
    /// The logger's protocol version and pid.
    Hello {
        /// Its [`PROTOCOL_VERSION`].
        version: u32,
        /// Its process id.
        pid: u32,
    },
    /// A status snapshot.
    Status(Status),
    /// Lines read.
    Lines {
        /// The number of the first line in `lines`.
        first: LineNo,
        /// The lines' text.
        lines: Vec<String>,
    },
    /// Regions, oldest first.
    Regions(Vec<Region>),
    /// A wait ended.
    Waited {
        /// Why.
        reason: WaitReason,
        /// The state at that moment.
        status: Status,
        /// The first region opened after the wait's mark (id
        /// `after.regions + 1`) as it was at that moment; `None` when none
        /// opened.
        region: Option<Region>,
    },
    /// An agent's state; `None` when the session does not know the agent.
    Agent(Option<AgentState>),
    /// A [`Request::SetAgent`] or [`Request::Typing`] was taken.
    Stored,
    /// The request could not be served.
    Error {
        /// What went wrong, for a person.
        message: String,
    },
    /// The mark a key typed at; `None` when no call with it typed here
    /// (or so long ago that it was forgotten).
    Typed(Option<Mark>),
}

/// A moment in the logger's stream, for waits to start from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// Bytes logged so far.
    pub raw: ByteOffset,
    /// Regions opened so far.
    pub regions: u64,
    /// Primary prompts shown so far.
    pub prompts: u64,
    /// The line the cursor was on.
    pub line: LineNo,
    /// Full-screen programs started so far.
    pub screens: u64,
}

/// The logger's state.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Status {
    /// Where the stream is now.
    pub mark: Mark,
    /// What the region tracker knows about the shells.
    pub shell: ShellState,
    /// The text of the line not yet finished (usually the prompt and what
    /// is typed at it).
    pub current_text: String,
    /// When output last arrived, in ms since the epoch (0: never).
    pub last_output_ms: u64,
    /// The pane's output ended (the pane closed or the pipe was detached).
    pub eof: bool,
    /// The most recent region, if any.
    pub last_region: Option<Region>,
    /// Text typed at the shell's prompt and not yet submitted (after the
    /// prompt's end marker; empty when none or no prompt is shown).
    pub typed: String,
}

impl Status {
    /// Whether the innermost integrated shell has ended a command and not
    /// yet shown its next prompt: the session's own shell (integrated when
    /// `own_integrated`) with nothing open, or a shell inside it (ssh, a
    /// sandbox) whose last region ended at its depth or deeper (a shell
    /// started inside it that has just exited: its `exit` ended with the
    /// command that ran it).
    pub fn between_commands(&self, own_integrated: bool) -> bool {
        let shell = &self.shell;
        // At a continuation prompt the shell waits for the rest of a
        // command: no command has ended, and no primary prompt is coming.
        if !shell.integrated || shell.at_prompt || shell.at_continuation {
            return false;
        }
        let own = own_integrated && shell.open.is_empty();
        let inner = !shell.open.is_empty()
            && self.last_region.as_ref().is_some_and(|r| {
                r.kind == crate::region::RegionKind::Command && r.end.is_some() && r.depth as usize >= shell.open.len()
            });
        own || inner
    }
}

/// What to wait for. The first condition met ends the wait.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct WaitSpec {
    /// Where the caller's action began.
    pub after: Mark,
    /// The first region opened after the mark has finished, or a new
    /// primary prompt was shown after the mark.
    pub command_done: bool,
    /// A regex found in output after the mark (in the region's output when
    /// one opened, so the echoed command line never matches).
    pub pattern: Option<String>,
    /// No output for this long, once some output came after the mark.
    pub settle_ms: Option<u64>,
    /// Give up after this long.
    pub timeout_ms: u64,
    /// A full-screen program started after the mark.
    pub full_screen: bool,
}

/// Why a wait ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WaitReason {
    /// The command's region finished.
    RegionEnded(RegionId),
    /// A new primary prompt appeared (no region finished: a program's
    /// prompt, an inner shell, or a line that ran nothing).
    Prompt,
    /// The pattern matched on this line.
    Matched(LineNo),
    /// Output went quiet.
    Settled,
    /// A full-screen program took the screen.
    FullScreen,
    /// The pane's output ended.
    Eof,
    /// The timeout ran out.
    Timeout,
}

/// Why a frame could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The socket failed.
    #[error("logger socket: {0}")]
    Io(#[from] std::io::Error),
    /// The frame was too large.
    #[error("frame of {0} bytes exceeds the limit of {MAX_FRAME}")]
    TooLarge(usize),
    /// The frame did not decode.
    #[error("undecodable frame: {0}")]
    Decode(#[from] postcard::Error),
}

/// Encodes `msg` as one frame.
pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, FrameError> {
    let body = postcard::to_stdvec(msg)?;
    if body.len() > MAX_FRAME {
        return Err(FrameError::TooLarge(body.len()));
    }
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
    frame.extend_from_slice(&body);
    Ok(frame)
}

/// Decodes the body of a frame.
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, FrameError> {
    Ok(postcard::from_bytes(body)?)
}

/// Reads the length prefix of a frame and checks it.
pub fn frame_len(prefix: [u8; 4]) -> Result<usize, FrameError> {
    let len = u32::from_le_bytes(prefix) as usize;
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge(len));
    }
    Ok(len)
}

/// Writes one frame to a blocking stream.
pub fn write_frame<T: Serialize>(w: &mut impl Write, msg: &T) -> Result<(), FrameError> {
    w.write_all(&encode(msg)?)?;
    w.flush()?;
    Ok(())
}

/// Reads one frame from a blocking stream; `None` at a clean end of stream.
pub fn read_frame<T: DeserializeOwned>(r: &mut impl Read) -> Result<Option<T>, FrameError> {
    let mut prefix = [0u8; 4];
    match r.read_exact(&mut prefix) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let mut body = vec![0u8; frame_len(prefix)?];
    r.read_exact(&mut body)?;
    decode(&body).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shell_is_between_commands_only_until_a_prompt_of_either_kind() {
        let mut status = Status::default();
        status.shell.integrated = true;
        assert!(status.between_commands(true), "ended, no prompt yet");
        status.shell.at_prompt = true;
        assert!(!status.between_commands(true), "at its prompt");
        status.shell.at_prompt = false;
        status.shell.at_continuation = true;
        assert!(!status.between_commands(true), "waiting for the rest of a command");
    }

    #[test]
    fn requests_round_trip_through_frames() {
        let reqs = [
            Request::Hello { version: PROTOCOL_VERSION },
            Request::Read { from: LineNo(7), count: 3 },
            Request::Wait(WaitSpec {
                after: Mark { raw: ByteOffset(9), regions: 2, prompts: 3, line: LineNo(4), screens: 0 },
                command_done: true,
                pattern: Some("a.*b".into()),
                settle_ms: None,
                timeout_ms: 500,
                full_screen: true,
            }),
            Request::OpenInput(InputSpec { label: "(gdb) bt".into(), pid: 7, prompt_pattern: None, timeout_ms: 9 }),
            Request::Agent { actor: "claude-code#2".into() },
            Request::SetAgent {
                actor: "alice".into(),
                state: AgentState {
                    version: 3,
                    notes: ["running".into()].into(),
                    running: vec![4],
                    ..Default::default()
                },
            },
        ];
        let mut buf = Vec::new();
        for (id, r) in reqs.iter().enumerate() {
            write_frame(&mut buf, &Tagged { id: id as u64 * 1000, msg: r.clone() }).expect("encode");
        }
        let mut rd = &buf[..];
        for (id, r) in reqs.iter().enumerate() {
            let back: Tagged<Request> = read_frame(&mut rd).expect("decode").expect("frame");
            assert_eq!(back.id, id as u64 * 1000);
            assert_eq!(format!("{r:?}"), format!("{:?}", back.msg));
        }
        assert!(read_frame::<Tagged<Request>>(&mut rd).expect("eof").is_none());
    }

    #[test]
    fn oversized_frames_are_refused() {
        let prefix = ((MAX_FRAME + 1) as u32).to_le_bytes();
        assert!(matches!(frame_len(prefix), Err(FrameError::TooLarge(_))));
    }

    #[test]
    fn status_with_regions_round_trips() {
        let status = Status {
            last_region: Some(Region { command: "ls".into(), exit: Some(2), ..Region::default() }),
            current_text: "$ ".into(),
            ..Status::default()
        };
        let frame = encode(&Tagged { id: 9, msg: Response::Status(status) }).expect("encode");
        let back: Tagged<Response> = decode(&frame[4..]).expect("decode");
        assert_eq!(back.id, 9);
        let Response::Status(s) = back.msg else { panic!("wrong variant") };
        assert_eq!(s.last_region.and_then(|r| r.exit), Some(2));
    }
}
