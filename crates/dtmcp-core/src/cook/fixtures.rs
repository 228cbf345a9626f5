//! Reference tests from real bytes: every `tests/fixtures/cook/CASE/raw.log`
//! of the workspace (captured from a real tmux pane by `capture.sh` beside
//! it) is cooked and tracked as the logger does ([`crate::pipeline`]), and
//! the result must equal the `session.txt` and
//! `regions.jsonl` beside it, whether the log is fed whole, byte by byte
//! or in pseudo-random chunks.
//!
//! `regions.jsonl` holds each region's final form, one JSON object a line
//! in id order, with the clock at 0. Placeholders of full-screen programs
//! are named as the logger names them ([`super::name_screen`]). Run with `DTMCP_BLESS=1` to rewrite
//! the expectations after a reviewed change, and read every changed
//! `session.txt`: it must read as a person saw the terminal.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use super::Cooker;
use super::tests::lcg;
use crate::marker::Secret;
use crate::pipeline::Pipeline;
use crate::region::{Region, RegionChange, RegionTracker};
use crate::types::{CookEvent, LineNo, RegionId};

/// What a fixture's bytes turn into: the text of `session.txt` and of
/// `regions.jsonl`.
#[derive(Debug, PartialEq, Eq)]
struct Expected {
    session: String,
    regions: String,
}

/// The fixture directories, in name order.
fn cases() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/cook");
    let mut dirs: Vec<PathBuf> = fs::read_dir(&root)
        .unwrap_or_else(|err| panic!("reading {}: {err}", root.display()))
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.join("raw.log").is_file())
        .collect();
    dirs.sort();
    dirs
}

/// Cooks and tracks `raw`, fed in the pieces `chunks` gives.
fn replay(raw: &[u8], secret: &Secret, mut chunks: impl FnMut() -> usize) -> Expected {
    let tracker = RegionTracker::new(Some(secret.clone()), RegionId(1));
    let mut pipe = Pipeline::new(Cooker::new(LineNo::FIRST), tracker);
    let mut changes = Vec::new();
    let mut session = String::new();
    let mut rest = raw;
    while !rest.is_empty() {
        let (piece, tail) = rest.split_at(chunks().clamp(1, rest.len()));
        rest = tail;
        pipe.feed(piece, 0, &mut changes, |event| {
            if let CookEvent::Line { text, .. } = event {
                session.push_str(text);
                session.push('\n');
            }
        });
    }
    Expected { session, regions: final_regions(changes) }
}

/// Each region's last change, as JSON lines in id order.
fn final_regions(changes: Vec<RegionChange>) -> String {
    let mut regions: Vec<Region> = Vec::new();
    for change in changes {
        let (RegionChange::Opened(region) | RegionChange::Closed(region)) = change;
        match regions.iter_mut().find(|old| old.id == region.id) {
            Some(old) => *old = region,
            None => regions.push(region),
        }
    }
    regions.sort_by_key(|region| region.id);
    let mut out = String::new();
    for region in &regions {
        let json = serde_json::to_string(region).unwrap_or_else(|err| panic!("region to JSON: {err}"));
        let _ = writeln!(out, "{json}");
    }
    out
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|err| panic!("reading {}: {err}", path.display()))
}

/// Checks one fixture, or rewrites its expectations when blessing.
fn check(dir: &Path, bless: bool) {
    let name = dir.file_name().map_or_else(String::new, |name| name.to_string_lossy().into_owned());
    let raw = fs::read(dir.join("raw.log")).unwrap_or_else(|err| panic!("{name}: raw.log: {err}"));
    let secret =
        Secret::from_nonce(&read(&dir.join("secret"))).unwrap_or_else(|| panic!("{name}: secret is not a nonce"));
    let whole = replay(&raw, &secret, || usize::MAX);
    assert_eq!(replay(&raw, &secret, || 1), whole, "{name}: byte by byte");
    for seed in 1..=4 {
        assert_eq!(replay(&raw, &secret, lcg(seed)), whole, "{name}: chunks of seed {seed}");
    }
    if bless {
        fs::write(dir.join("session.txt"), &whole.session).unwrap_or_else(|err| panic!("{name}: {err}"));
        fs::write(dir.join("regions.jsonl"), &whole.regions).unwrap_or_else(|err| panic!("{name}: {err}"));
        return;
    }
    let expected = Expected { session: read(&dir.join("session.txt")), regions: read(&dir.join("regions.jsonl")) };
    assert_eq!(whole.session, expected.session, "{name}: session.txt");
    assert_eq!(whole.regions, expected.regions, "{name}: regions.jsonl");
}

#[test]
fn fixtures_cook_as_expected() {
    let bless = std::env::var_os("DTMCP_BLESS").is_some_and(|v| v == "1");
    let cases = cases();
    assert!(cases.len() >= 9, "expected the captured cases, found {}", cases.len());
    for dir in &cases {
        check(dir, bless);
    }
}
