//! The logger's wire cannot change by accident.
//!
//! postcard is not self-describing: a field added to a message, or to a
//! region or agent-state type inside one, makes the other side misread
//! every frame after it. So one frame of every message kind, each field
//! filled with a value that is not its default, is encoded with the real
//! frame encoder and compared with `golden/frames.txt` beside this file,
//! which also names the [`PROTOCOL_VERSION`] the frames were made at.
//!
//! When the wire changes on purpose: bump `PROTOCOL_VERSION`, say what
//! changed in the version list of the protocol module's documentation,
//! and regenerate the frames with
//!
//! ```text
//! DTMCP_BLESS=1 cargo test -p dtmcp-core --test golden
//! ```
//!
//! Blessing refuses to write frames that changed while the version did
//! not. The samples name every field (none is left to `Default`), so a
//! field added to a message type fails to compile here until it is given
//! a value.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;

use dtmcp_core::agent_state::{AgentState, LeftText, SeenScreen};
use dtmcp_core::answers::{Answers, Queries};
use dtmcp_core::protocol::{
    self, Mark, PROTOCOL_VERSION, Request, Response, Settle, Status, Tagged, WaitReason, WaitSpec,
};
use dtmcp_core::region::{InputSpec, LinePos, Region, RegionKind, ShellState};
use dtmcp_core::types::{ByteOffset, LineNo, RegionId};

/// The command that regenerates the frames.
const BLESS: &str = "DTMCP_BLESS=1 cargo test -p dtmcp-core --test golden";

/// How many kinds of request and of response there are; [`request_kind`]
/// and [`response_kind`] number them.
const REQUEST_KINDS: usize = 13;
const RESPONSE_KINDS: usize = 9;

/// Numbers each kind of request. No arm may be a catch-all: a new kind
/// fails to compile here until it is numbered and given a sample.
fn request_kind(r: &Request) -> usize {
    match r {
        Request::Hello { .. } => 0,
        Request::Status => 1,
        Request::Read { .. } => 2,
        Request::Regions { .. } => 3,
        Request::Region { .. } => 4,
        Request::Wait(_) => 5,
        Request::OpenInput(_) => 6,
        Request::Agent { .. } => 7,
        Request::SetAgent { .. } => 8,
        Request::Cancel { .. } => 9,
        Request::Typing { .. } => 10,
        Request::Typed { .. } => 11,
        Request::StatusWait(..) => 12,
    }
}

/// Numbers each kind of response, as [`request_kind`] does requests.
fn response_kind(r: &Response) -> usize {
    match r {
        Response::Hello { .. } => 0,
        Response::Status(_) => 1,
        Response::Lines { .. } => 2,
        Response::Regions(_) => 3,
        Response::Waited { .. } => 4,
        Response::Agent(_) => 5,
        Response::Stored => 6,
        Response::Error { .. } => 7,
        Response::Typed(_) => 8,
    }
}

/// Every reason a wait can end; the match makes a new one fail to compile.
fn wait_reasons() -> Vec<(&'static str, WaitReason)> {
    let all = vec![
        ("region-ended", WaitReason::RegionEnded(RegionId(41))),
        ("prompt", WaitReason::Prompt),
        ("matched", WaitReason::Matched(LineNo(1_234))),
        ("settled", WaitReason::Settled),
        ("full-screen", WaitReason::FullScreen),
        ("eof", WaitReason::Eof),
        ("timeout", WaitReason::Timeout),
    ];
    for (_, reason) in &all {
        match reason {
            WaitReason::RegionEnded(_)
            | WaitReason::Prompt
            | WaitReason::Matched(_)
            | WaitReason::Settled
            | WaitReason::FullScreen
            | WaitReason::Eof
            | WaitReason::Timeout => {}
        }
    }
    all
}

fn mark() -> Mark {
    Mark { raw: ByteOffset(300_000), regions: 41, prompts: 57, line: LineNo(9_876), screens: 2 }
}

/// A region with every field set; `kind` tells command from input.
fn region(kind: RegionKind) -> Region {
    Region {
        id: RegionId(41),
        kind,
        command: "make -j2 check".into(),
        pid: 4242,
        host: "box".into(),
        user: "alice".into(),
        depth: 1,
        parent: Some(RegionId(40)),
        start: LinePos { line: LineNo(9_000), bytes: 3 },
        end: Some(LinePos { line: LineNo(9_870), bytes: 17 }),
        exit: Some(-2),
        pipestatus: vec![0, 2],
        started_ms: 1_764_000_000_000,
        ended_ms: Some(1_764_000_009_999),
    }
}

fn shell() -> ShellState {
    ShellState {
        integrated: true,
        at_prompt: true,
        at_continuation: true,
        prompts: 57,
        regions: 41,
        open: vec![RegionId(39), RegionId(40)],
        pid: 4242,
        host: "box".into(),
        user: "alice".into(),
        input: Some(RegionId(41)),
        full_screen: true,
        screens: 2,
        answers: Answers { prompts: 56, queries: Queries::DEVICE.with(Queries::COLOUR) },
    }
}

fn status() -> Status {
    Status {
        mark: mark(),
        shell: shell(),
        current_text: "alice@box:~$ ls".into(),
        last_output_ms: 1_764_000_010_000,
        eof: true,
        last_region: Some(region(RegionKind::Command)),
        typed: "ls".into(),
    }
}

fn agent_state() -> AgentState {
    AgentState {
        version: 12,
        notes: BTreeSet::from(["moved:box".to_string(), "password".to_string()]),
        place: Some("box".into()),
        last_reply_s: 1_764_000_000,
        running: vec![40, 41],
        announced: BTreeSet::from([40]),
        screen: Some(SeenScreen { cols: 120, rows: vec![7, 0xdead_beef_cafe_f00d] }),
        left: Some(LeftText { text: "git sta".into(), prompts: 57, regions: 41, shell_pid: 4242 }),
    }
}

fn requests() -> Vec<(String, Request)> {
    let input =
        InputSpec { label: "(gdb) bt".into(), pid: 77, prompt_pattern: Some(r"^\(gdb\) $".into()), timeout_ms: 60_000 };
    let wait = WaitSpec {
        after: mark(),
        command_done: true,
        pattern: Some("error|warning".into()),
        settle_ms: Some(1_500),
        timeout_ms: 30_000,
        full_screen: true,
    };
    let all = vec![
        ("hello", Request::Hello { version: 7 }),
        ("status", Request::Status),
        ("read", Request::Read { from: LineNo(9_000), count: 250 }),
        ("regions", Request::Regions { last: 3 }),
        ("region", Request::Region { id: RegionId(41) }),
        ("wait", Request::Wait(wait.clone())),
        ("open-input", Request::OpenInput(input)),
        ("agent", Request::Agent { actor: "claude-code#2".into() }),
        ("set-agent", Request::SetAgent { actor: "claude-code#2".into(), state: agent_state() }),
        ("cancel", Request::Cancel { id: 1 << 40 }),
        ("typing", Request::Typing { key: "0f1e2d3c4b5a69788796a5b4-17".into(), mark: status().mark }),
        ("typed", Request::Typed { key: "0f1e2d3c4b5a69788796a5b4-17".into() }),
        ("status-wait", Request::StatusWait(wait, Settle { own_integrated: true, grace_ms: 2_000 })),
    ];
    all.into_iter().map(|(name, r)| (format!("request/{name}"), r)).collect()
}

fn responses() -> Vec<(String, Response)> {
    let mut all = vec![
        ("hello".to_string(), Response::Hello { version: 7, pid: 31_337 }),
        ("status".into(), Response::Status(status())),
        (
            "lines".into(),
            Response::Lines { first: LineNo(9_000), lines: vec!["one".into(), String::new(), "三".into()] },
        ),
        ("regions".into(), Response::Regions(vec![region(RegionKind::Command), region(RegionKind::Input)])),
        ("agent".into(), Response::Agent(Some(agent_state()))),
        ("agent-unknown".into(), Response::Agent(None)),
        ("stored".into(), Response::Stored),
        ("error".into(), Response::Error { message: "no region 99".into() }),
        ("typed".into(), Response::Typed(Some(status().mark))),
        ("typed-unknown".into(), Response::Typed(None)),
    ];
    for (name, reason) in wait_reasons() {
        let region = Some(region(RegionKind::Command));
        all.push((format!("waited/{name}"), Response::Waited { reason, status: status(), region }));
    }
    all.push((
        "waited/no-region".into(),
        Response::Waited { reason: WaitReason::Prompt, status: status(), region: None },
    ));
    all.into_iter().map(|(name, r)| (format!("response/{name}"), r)).collect()
}

/// The id every sample frame carries: more than one byte as a varint.
const FRAME_ID: u64 = 300;

/// Each sample's name and frame, in hex.
fn frames() -> Vec<(String, String)> {
    let hex = |frame: Vec<u8>| {
        frame.iter().fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
    };
    let mut out = Vec::new();
    for (name, r) in requests() {
        let tagged = Tagged { id: FRAME_ID, msg: r };
        let frame = protocol::encode(&tagged).unwrap_or_else(|e| panic!("{name}: {e}"));
        let back: Tagged<Request> = protocol::decode(&frame[4..]).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(format!("{back:?}"), format!("{tagged:?}"), "{name} does not read back");
        out.push((name, hex(frame)));
    }
    for (name, r) in responses() {
        let tagged = Tagged { id: FRAME_ID, msg: r };
        let frame = protocol::encode(&tagged).unwrap_or_else(|e| panic!("{name}: {e}"));
        let back: Tagged<Response> = protocol::decode(&frame[4..]).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(format!("{back:?}"), format!("{tagged:?}"), "{name} does not read back");
        out.push((name, hex(frame)));
    }
    out
}

/// What `golden/frames.txt` holds: the version and each frame.
#[derive(Debug, PartialEq, Eq)]
struct Golden {
    version: u32,
    frames: Vec<(String, String)>,
}

impl Golden {
    fn path() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/frames.txt")
    }

    fn read() -> Golden {
        let path = Golden::path();
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}; write it with `{BLESS}`", path.display()));
        let mut golden = Golden { version: 0, frames: Vec::new() };
        for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
            let (key, value) = line.split_once(' ').unwrap_or((line, ""));
            match key {
                "version" => golden.version = value.trim().parse().unwrap_or(0),
                _ => golden.frames.push((key.to_string(), value.trim().to_string())),
            }
        }
        golden
    }

    fn write(&self) {
        let mut text = String::from(
            "# The logger's wire: one frame of each message kind, in hex (4-byte\n\
             # length, then postcard), made by crates/dtmcp-core/tests/golden.rs.\n\
             # Never edit by hand; see that file for when and how to regenerate.\n",
        );
        let _ = writeln!(text, "version {}", self.version);
        for (name, frame) in &self.frames {
            let _ = writeln!(text, "{name} {frame}");
        }
        let path = Golden::path();
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }
}

/// The kinds whose frames differ, appeared or went away.
fn changed(old: &[(String, String)], new: &[(String, String)]) -> Vec<String> {
    let mut names: Vec<&String> = old.iter().chain(new).map(|(name, _)| name).collect();
    names.sort();
    names.dedup();
    let frame = |list: &[(String, String)], name: &String| list.iter().find(|(n, _)| n == name).map(|(_, f)| f.clone());
    names.into_iter().filter(|name| frame(old, name) != frame(new, name)).cloned().collect()
}

#[test]
fn every_message_kind_has_a_golden_frame() {
    let (requests, responses) = (requests(), responses());
    let mut seen = [false; REQUEST_KINDS];
    for (name, r) in &requests {
        let kind = request_kind(r);
        assert!(kind < REQUEST_KINDS, "{name}: request kind {kind}; raise REQUEST_KINDS");
        seen[kind] = true;
    }
    assert!(seen.iter().all(|&s| s), "a request kind has no sample: {seen:?}");
    let mut seen = [false; RESPONSE_KINDS];
    for (name, r) in &responses {
        let kind = response_kind(r);
        assert!(kind < RESPONSE_KINDS, "{name}: response kind {kind}; raise RESPONSE_KINDS");
        seen[kind] = true;
    }
    assert!(seen.iter().all(|&s| s), "a response kind has no sample: {seen:?}");
}

#[test]
fn the_version_is_noted_in_the_protocol_doc() {
    let doc = include_str!("../src/protocol.rs");
    let note = format!("//! - {PROTOCOL_VERSION}: ");
    assert!(
        doc.contains(&note),
        "the protocol module doc has no line `{note}…` saying what version {PROTOCOL_VERSION} changed"
    );
}

#[test]
fn golden_frames_match_the_wire() {
    let now = Golden { version: PROTOCOL_VERSION, frames: frames() };
    let bless = std::env::var_os("DTMCP_BLESS").is_some_and(|v| v == "1");
    let old = if bless && !Golden::path().exists() { None } else { Some(Golden::read()) };
    let changes = old.as_ref().map_or_else(Vec::new, |old| changed(&old.frames, &now.frames));
    let old_version = old.as_ref().map(|old| old.version);
    if bless {
        assert!(
            changes.is_empty() || old_version != Some(PROTOCOL_VERSION),
            "the wire changed ({}) but PROTOCOL_VERSION is still {PROTOCOL_VERSION}: bump it and note why in the \
             protocol module doc before blessing",
            changes.join(", ")
        );
        now.write();
        return;
    }
    assert!(
        changes.is_empty(),
        "the wire changed: {}.\nIf that is meant, bump PROTOCOL_VERSION (now {PROTOCOL_VERSION}), say what changed in \
         the version list of the protocol module doc, and regenerate the frames with `{BLESS}`; if it is not meant, \
         undo the change to the message types",
        changes.join(", ")
    );
    assert_eq!(
        old_version,
        Some(PROTOCOL_VERSION),
        "PROTOCOL_VERSION changed but the frames were made at another version: regenerate them with `{BLESS}`"
    );
}
