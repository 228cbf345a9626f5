//! Recordings: `record` and `play` on a real session (a pause, a `\r`
//! progress bar, a full-screen program, a resize), `session_logs
//! action="record"`, and the shell's exit status at the end.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Pty, SERVER, World, cli, poll, regions};

/// A recording read back: its header and events, each line checked to
/// be one JSON value.
struct Cast {
    header: Value,
    /// (time as written, code, data).
    events: Vec<(f64, String, String)>,
}

impl Cast {
    fn parse(text: &str) -> Cast {
        let mut lines = text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l}")));
        let header = lines.next().expect("a header line");
        let events = lines
            .map(|e| {
                let time = e[0].as_f64().expect("a time");
                (time, e[1].as_str().expect("a code").to_string(), e[2].as_str().expect("data").to_string())
            })
            .collect();
        Cast { header, events }
    }

    /// The output events joined.
    fn output(&self) -> String {
        self.events.iter().filter(|e| e.1 == "o").map(|e| e.2.as_str()).collect()
    }

    fn of(&self, code: &str) -> Vec<&str> {
        self.events.iter().filter(|e| e.1 == code).map(|e| e.2.as_str()).collect()
    }

    /// Seconds from the start to each event (v3 intervals summed).
    fn clock(&self) -> Vec<f64> {
        self.events
            .iter()
            .scan(0.0, |t, e| {
                *t += e.0;
                Some(*t)
            })
            .collect()
    }

    /// When the first output event holding `needle` came, in seconds.
    fn when(&self, needle: &str) -> f64 {
        let at = self.events.iter().position(|e| e.1 == "o" && e.2.contains(needle));
        self.clock()[at.unwrap_or_else(|| panic!("no output holds {needle:?}"))]
    }
}

fn record(w: &World, args: &[&str]) -> Cast {
    let ran = cli(w, &[&["record"], args].concat());
    assert!(ran.success(), "record {args:?}: {}", ran.stderr);
    Cast::parse(&ran.stdout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_replays_the_log_with_a_marker_per_command() {
    crate::needs!("tmux");
    let w = World::new();
    let s = w.server().await;
    s.create("r1").await;
    s.run("r1", "echo one").await;
    s.run("r1", "sleep 0.5; echo A").await;
    s.run("r1", r"for i in 1 2 3; do printf '\r%d%%' $((i*33)); sleep 0.1; done; echo").await;
    // A full-screen program, left and quit with keys.
    let r = s.ok("run", json!({"session": "r1", "command": "vim -u NONE -N -n", "timeout": 2})).await;
    assert!(r.contains("alternate screen on"), "{r}");
    s.ok("send", json!({"session": "r1", "text": ":q!", "keys": ["enter"], "wait": 1})).await;
    let out = w.tmux(&["resize-window", "-t", "=r1:", "-x", "100", "-y", "30"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    tokio::time::sleep(Duration::from_millis(100)).await;
    s.run("r1", "echo after the resize").await;
    s.run("r1", "false").await;
    // Lines typed into a program at times the test notes.
    s.leave_running("r1", "cat").await;
    let mut typed = Vec::new();
    for i in 0..3 {
        tokio::time::sleep(Duration::from_millis(300 + 100 * i)).await;
        typed.push(Instant::now());
        let keys = w.tmux(&["send-keys", "-t", "=r1:", "-l", &format!("typed-{i}")]);
        assert!(keys.status.success());
    }
    s.ok("send", json!({"session": "r1", "keys": ["enter", "ctrl+d"], "wait": 0.5})).await;
    let dir = w.session_dir("r1");
    let cast = record(&w, &["r1"]);

    // The header and the events are asciicast v3.
    assert_eq!(cast.header["version"], 3, "{}", cast.header);
    assert!(cast.header["term"]["cols"].as_u64().is_some() && cast.header["timestamp"].as_u64().is_some());
    assert!(cast.events.iter().all(|e| e.0 >= 0.0 && ["o", "m", "r", "x"].contains(&e.1.as_str())));
    // The output is raw.log, byte for byte.
    let raw = std::fs::read(dir.join("raw.log")).expect("raw.log");
    assert_eq!(cast.output(), String::from_utf8(raw.clone()).expect("this log is UTF-8"));
    assert!(cast.output().contains("\r33%\r66%\r99%"), "the progress bar's returns are kept");
    assert!(cast.output().contains("\u{1b}[?1049h"), "vim's screen is in the output");
    // A marker at each region's start and end, in order.
    // The last record of each region is what it is now.
    let mut last = std::collections::BTreeMap::new();
    for r in regions::records(&dir) {
        last.insert(r["id"].as_u64().expect("id"), r);
    }
    let mut want = Vec::new();
    for r in last.values() {
        want.push(r["command"].as_str().expect("command").to_string());
        want.push(r["exit"].as_i64().map_or("ended".to_string(), |e| format!("exit {e}")));
    }
    let mut got: Vec<String> = cast.of("m").into_iter().map(str::to_string).collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
    assert!(cast.of("m").contains(&"exit 1"), "false's status");
    assert!(cast.of("r").contains(&"100x30"), "the resize: {:?}", cast.of("r"));
    // Times never go back; a pause shows; typed lines come when typed.
    assert!(cast.clock().windows(2).all(|t| t[0] <= t[1]));
    let one = record(&w, &["r1", "--region", "2"]);
    let start = one.events.iter().position(|e| e.1 == "m").expect("a start marker");
    let printed = start + one.events[start..].iter().position(|e| e.1 == "o" && e.2.contains('A')).expect("A");
    let pause = one.clock()[printed] - one.clock()[start];
    assert!((0.49..0.6).contains(&pause), "sleep 0.5 shows as {pause} s");
    for i in 1..3 {
        let asked = typed[i].duration_since(typed[i - 1]).as_secs_f64();
        let seen = cast.when(&format!("typed-{i}")) - cast.when(&format!("typed-{}", i - 1));
        assert!((seen - asked).abs() <= 0.010, "typed {asked:.3} s apart, recorded {seen:.3} s apart");
    }

    // One region: its prompt, its command, its output, two markers.
    let one = record(&w, &["r1", "--region", "1"]);
    assert_eq!(one.of("m"), ["echo one", "exit 0"]);
    let text = one.output();
    assert!(String::from_utf8_lossy(&raw).contains(&text), "a region is a stretch of raw.log");
    assert!(text.contains("echo one") && text.contains("one\r\n"));
    assert!(one.of("x").is_empty());
    let range = record(&w, &["r1", "--from-region", "1", "--to-region", "3"]);
    assert_eq!(range.of("m").len(), 6);
    assert!(range.output().starts_with(&text));
    // A long pause is cut.
    let cut = record(&w, &["r1", "--idle-max", "0.2"]);
    assert!(cut.events.iter().all(|e| e.0 <= 0.2 + 1e-9));

    // v2 to a file: absolute times, no exit event.
    let file = w.home().join("old.cast");
    assert!(cli(&w, &["record", "r1", "--region", "4", "--v2", "-o", file.to_str().expect("utf-8")]).success());
    let v2 = Cast::parse(&std::fs::read_to_string(&file).expect("file"));
    assert_eq!((v2.header["version"].as_u64(), v2.header["width"].as_u64().is_some()), (Some(2), true));
    assert!(v2.events.windows(2).all(|e| e[0].0 <= e[1].0));
    asciinema_accepts(&file, &v2.output());
    let whole = w.home().join("whole.cast");
    assert!(cli(&w, &["record", "r1", "-o", whole.to_str().expect("utf-8")]).success());
    asciinema_accepts(&whole, &Cast::parse(&std::fs::read_to_string(&whole).expect("file")).output());

    // Bad requests say what to do.
    let bad = cli(&w, &["record", "r1", "--region", "99"]);
    assert!(!bad.success() && bad.stderr.contains("no region 99"), "{}", bad.stderr);
    let bad = cli(&w, &["record", "r1", "--idle-max", "0"]);
    assert!(bad.code == 2 && bad.stderr.contains("--idle-max"), "{}", bad.stderr);
}

/// The real asciinema (3.x) reads the file, when it is installed: its raw
/// export (the output without timing) is exactly `output`, the file's `o`
/// events joined.
fn asciinema_accepts(file: &Path, output: &str) {
    if !crate::support::installed("asciinema") {
        eprintln!(
            "skipped: asciinema is not installed (`cargo install asciinema`); the recording was not checked with it"
        );
        return;
    }
    let out = std::process::Command::new("asciinema")
        .args(["convert", "--quiet", "-f", "raw"])
        .arg(file)
        .arg("-")
        .output()
        .expect("asciinema");
    assert!(out.status.success(), "asciinema convert: {}", String::from_utf8_lossy(&out.stderr));
    // The export sizes the terminal first and at each resize (`ESC [ 8 ;
    // rows ; cols t`), from the header and the `r` events.
    let sizes = regex::Regex::new("\x1b\\[8;\\d+;\\d+t").expect("regex");
    let exported = String::from_utf8_lossy(&out.stdout);
    assert_eq!(sizes.replace_all(&exported, ""), output, "asciinema's raw export of {}", file.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn play_shows_a_region_and_q_quits() {
    crate::needs!("tmux");
    let w = World::new();
    let s = w.server().await;
    s.create("p1").await;
    s.run("p1", "sleep 0.3; echo played-back").await;
    s.run("p1", "sleep 1.5; echo never-seen").await;
    let env = w.env();
    let mut fast = Pty::start(SERVER, &["play", "p1", "--region", "1", "--speed", "10"], &env);
    assert_eq!(fast.exit_code(Duration::from_secs(10)), 0);
    assert!(fast.text().contains("played-back"), "{}", fast.text());
    // A slow play quits at `q`, before the second command's output.
    let mut slow = Pty::start(SERVER, &["play", "p1", "--idle-max", "5"], &env);
    slow.wait_for("played-back", 0, Duration::from_secs(10));
    slow.types("q");
    assert_eq!(slow.exit_code(Duration::from_secs(3)), 0);
    // Its last bytes may still be on their way through the pty's reader.
    let put_back = "\u{1b}[?25h\u{1b}[0m\r\n";
    slow.wait_for(put_back, 0, Duration::from_secs(5));
    assert!(!slow.text().contains("never-seen"));
    assert!(slow.text().ends_with(put_back), "the terminal's modes are put back");
    let mode = nix::sys::termios::tcgetattr(slow.slave()).expect("termios");
    assert!(mode.local_flags.contains(nix::sys::termios::LocalFlags::ICANON), "raw mode is left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_gets_a_path_and_the_shells_exit_ends_the_recording() {
    crate::needs!("tmux");
    let w = World::new();
    let s = w.server().await;
    s.create("a1").await;
    s.run("a1", "echo the-output-itself").await;
    let r = s.ok("session_logs", json!({"session": "a1", "action": "record", "region": 1})).await;
    assert!(!r.contains("the-output-itself"), "a path, not the content: {r}");
    let path = w.session_dir("a1").join("recordings/region-1.cast");
    assert!(r.contains(&path.display().to_string()), "{r}");
    let cast = Cast::parse(&std::fs::read_to_string(&path).expect("recording"));
    assert!(cast.output().contains("the-output-itself"));
    let outside = w.home().parent().expect("parent").join("a1.cast");
    let r = s.ok("session_logs", json!({"session": "a1", "action": "record", "save_to": outside})).await;
    assert!(r.contains("a1.cast") && outside.is_file(), "{r}");
    let r = s.err("session_logs", json!({"session": "a1", "action": "record", "save_to": "rel.cast"})).await;
    assert!(r.contains("absolute"), "{r}");
    let r = s.err("session_logs", json!({"session": "a1", "action": "keep", "region": 1})).await;
    assert!(r.contains("action=\"record\""), "{r}");
    // The shell leaves with a status: the recording ends with it.
    let keys = w.tmux(&["send-keys", "-t", "=a1:", "-l", "exit 3"]);
    assert!(keys.status.success());
    w.tmux(&["send-keys", "-t", "=a1:", "Enter"]);
    let dir = w.session_dir("a1");
    poll::until("the logger to end", Duration::from_secs(10), || crate::support::logger_pid(&dir).is_none());
    let cast = record(&w, &["a1"]);
    assert_eq!(cast.events.last().map(|e| (e.1.as_str(), e.2.as_str())), Some(("x", "3")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordinary_session_keeps_its_timing_index_under_one_percent_of_its_log() {
    crate::needs!("tmux");
    let w = World::new();
    let s = w.server().await;
    s.create("o1").await;
    for command in [
        "ls -la /usr/bin | head -40",
        "seq 1 300",
        "cat /etc/services",
        "uname -a",
        "ps -o pid,comm",
        "printf '\\e[32mok\\e[0m %s\\n' build test lint",
        "grep -c . /etc/services",
        "for i in 1 2 3; do echo step $i; sleep 0.1; done",
        "env | sort | head -30",
        "echo done",
    ] {
        s.run("o1", command).await;
    }
    let dir = w.session_dir("o1");
    let raw = std::fs::metadata(dir.join("raw.log")).expect("raw.log").len();
    let index = std::fs::metadata(dir.join("timing.idx")).expect("timing.idx").len();
    let share = index as f64 / raw as f64 * 100.0;
    eprintln!("timing.idx: {index} bytes for {raw} bytes of raw.log ({share:.2} %)");
    assert!(share <= 1.0, "timing.idx is {share:.2} % of raw.log");
}
