use super::timing::{Record, Timeline};
use super::*;
use crate::region::LinePos;
use crate::types::RegionId;

fn region(id: u64, command: &str, exit: Option<i32>, depth: u32) -> Region {
    Region {
        id: RegionId(id),
        command: command.into(),
        exit,
        depth,
        end: exit.map(|_| LinePos::default()),
        ..Region::default()
    }
}

/// A log of two commands: `echo é` (the character cut between two pieces
/// of output) and a `sleep` with a resize and a long pause in it.
fn session() -> (Vec<u8>, Timeline, Vec<Region>) {
    let mut raw = Vec::new();
    raw.extend_from_slice(b"$ echo \xc3\xa9\r\n"); // 0..12
    let open1 = raw.len() as u64;
    raw.extend_from_slice(b"\xc3"); // the piece ends mid-character
    let cut = raw.len() as u64;
    raw.extend_from_slice(b"\xa9\r\n");
    let close1 = raw.len() as u64;
    raw.extend_from_slice(b"$ sleep 9; secret=hunter2\r\n");
    let open2 = raw.len() as u64;
    raw.extend_from_slice(b"zz\xff\r\n");
    let resized = raw.len() as u64;
    raw.extend_from_slice(b"\x1b[2Jdone\r\n");
    let close2 = raw.len() as u64;
    raw.extend_from_slice(b"$ ");
    let records = [
        Record::Start { ms: 10_000, raw: 0 },
        Record::Size { at: 0, cols: 80, rows: 24 },
        Record::Output { at: 0, ms: 10_000 },
        Record::Open { id: 1, at: open1 },
        Record::Output { at: cut, ms: 10_100 },
        Record::Close { id: 1, at: close1 },
        Record::Output { at: close1, ms: 11_000 },
        Record::Open { id: 2, at: open2 },
        Record::Output { at: resized, ms: 20_000 },
        Record::Size { at: resized, cols: 100, rows: 30 },
        Record::Close { id: 2, at: close2 },
        Record::End { ms: 20_500 },
    ];
    let regions = vec![region(1, "echo é", Some(0), 0), region(2, "sleep 9; secret=hunter2", Some(3), 0)];
    (raw, Timeline::from_records(&records), regions)
}

fn cast_of(select: Select) -> (Cast, Vec<u8>) {
    let (raw, t, regions) = session();
    let span = span(&t, &regions, raw.len() as u64, select).expect("span");
    let bytes = raw[span.from as usize..span.to as usize].to_vec();
    let mut label = |c: &str| c.replace("hunter2", "‹secret›");
    let input = Input {
        raw: &bytes,
        span,
        timeline: &t,
        regions: &regions,
        label: &mut label,
        exit: (select == Select::All).then_some(3),
        title: "s1".into(),
    };
    (build(input), bytes)
}

fn output(cast: &Cast) -> String {
    cast.events.iter().filter(|e| e.code == Code::Output).map(|e| e.data.as_str()).collect()
}

fn markers(cast: &Cast) -> Vec<&str> {
    cast.events.iter().filter(|e| e.code == Code::Marker).map(|e| e.data.as_str()).collect()
}

#[test]
fn the_output_events_join_into_the_logs_bytes() {
    let (cast, bytes) = cast_of(Select::All);
    // Valid UTF-8 comes back byte for byte; the one stray byte is U+FFFD.
    assert_eq!(output(&cast).into_bytes(), String::from_utf8_lossy(&bytes).into_owned().into_bytes());
    assert!(output(&cast).contains("é\r\n"));
    // No event holds half a character: the cut one waited for the rest.
    assert!(cast.events.iter().all(|e| !e.data.contains('\u{fffd}') || e.data.starts_with("zz")));
}

#[test]
fn markers_name_commands_and_their_statuses_with_secrets_hidden() {
    let (cast, _) = cast_of(Select::All);
    assert_eq!(markers(&cast), ["echo é", "exit 0", "sleep 9; secret=‹secret›", "exit 3"]);
    assert_eq!(
        cast.events.iter().filter(|e| e.code == Code::Resize).map(|e| &e.data[..]).collect::<Vec<_>>(),
        ["100x30"]
    );
    assert_eq!(cast.events.last().map(|e| (e.code, e.data.as_str())), Some((Code::Exit, "3")));
    assert!(cast.events.windows(2).all(|w| w[0].ms <= w[1].ms), "times never go back");
    assert_eq!((cast.cols, cast.rows, cast.start_ms), (80, 24, 10_000));
}

#[test]
fn one_region_starts_at_its_prompt_and_ends_at_its_end() {
    let (cast, bytes) = cast_of(Select::One(2));
    assert_eq!(bytes, b"$ sleep 9; secret=hunter2\r\nzz\xff\r\n\x1b[2Jdone\r\n");
    assert_eq!(markers(&cast), ["sleep 9; secret=‹secret›", "exit 3"]);
    assert!(!cast.events.iter().any(|e| e.code == Code::Exit), "the log goes on after the region");
    let (range, _) = cast_of(Select::Range(1, 2));
    assert_eq!(markers(&range).len(), 4);
}

#[test]
fn spans_that_cannot_be_recorded_say_why() {
    let (raw, t, regions) = session();
    let len = raw.len() as u64;
    assert!(span(&t, &regions, len, Select::One(9)).is_err_and(|e| e.contains("no region 9")));
    assert!(span(&t, &regions, len, Select::Range(2, 1)).is_err_and(|e| e.contains("backwards")));
    let none = Timeline::default();
    assert!(span(&none, &regions, len, Select::All).is_err_and(|e| e.contains("no timing index")));
    let late = Timeline::from_records(&[Record::Start { ms: 1, raw: 40 }]);
    assert!(span(&late, &regions, len, Select::One(1)).is_err_and(|e| e.contains("before this session kept timings")));
}

#[test]
fn long_pauses_are_cut_in_both_versions() {
    let (cast, _) = cast_of(Select::All);
    let mut v3 = Vec::new();
    write(&cast, Version::V3, 2_000, &mut v3).expect("write");
    let v3 = String::from_utf8(v3).expect("utf-8");
    let lines: Vec<serde_json::Value> = v3.lines().map(|l| serde_json::from_str(l).expect("json line")).collect();
    assert_eq!(lines[0]["version"], 3);
    assert_eq!(lines[0]["term"]["cols"], 80);
    let intervals: Vec<f64> = lines[1..].iter().map(|e| e[0].as_f64().expect("time")).collect();
    assert!(intervals.iter().all(|&i| (0.0..=2.0).contains(&i)), "{intervals:?}");
    assert!(intervals.contains(&0.1), "the 100 ms before the cut character stays: {intervals:?}");
    assert_eq!(lines.last().expect("x")[1], "x");
    let mut v2 = Vec::new();
    write(&cast, Version::V2, 1_000, &mut v2).expect("write");
    let v2 = String::from_utf8(v2).expect("utf-8");
    let lines: Vec<serde_json::Value> = v2.lines().map(|l| serde_json::from_str(l).expect("json line")).collect();
    assert_eq!((lines[0]["version"].as_u64(), lines[0]["width"].as_u64()), (Some(2), Some(80)));
    let times: Vec<f64> = lines[1..].iter().map(|e| e[0].as_f64().expect("time")).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1] && w[1] - w[0] <= 1.0 + 1e-9), "{times:?}");
    assert!(lines.iter().skip(1).all(|e| e[1] != "x"), "v2 has no exit event");
}

#[test]
fn a_shell_left_by_exit_gives_its_status() {
    let ended = Timeline::from_records(&[Record::Start { ms: 1, raw: 0 }, Record::End { ms: 2 }]);
    let running = Timeline::from_records(&[Record::Start { ms: 1, raw: 0 }]);
    let with = |last: &str| vec![region(1, "false", Some(1), 0), region(2, "ls", Some(0), 1), region(3, last, None, 0)];
    assert_eq!(shell_exit(&with("exit 260"), &ended), Some(4));
    assert_eq!(shell_exit(&with("exit"), &ended), Some(1));
    assert_eq!(shell_exit(&with("exit"), &running), None);
    assert_eq!(shell_exit(&with("vim"), &ended), None);
}
