//! Speed of `search`: its core on a 25 MB / 3 M-line session, beside
//! `rg -c` on the same file in the same run (when ripgrep is installed);
//! and the whole tool, called over MCP on the real server, in sessions of
//! one, 20 and 6,000 commands holding the same text, so that what a long
//! history costs (labelling hits with their regions) shows as the
//! difference between the last two, which show the same 20 regions.
//!
//! `cargo bench --bench search` (add `-- N` for N samples, default 20;
//! `-- history` for the second table alone).
//! The core's times are in-process, as the router searches; rg's include
//! starting a process. Prints tables against DESIGN.md's targets; asserts
//! nothing.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use dtmcp::mcp_client::McpChild;
use dtmcp_core::region::{LinePos, Region};
use dtmcp_core::search::{self, Page};
use dtmcp_core::store::{self, LineWriter, Meta, RegionLog, files};
use dtmcp_core::types::{LineNo, RegionId};
use serde_json::json;

/// Lines in the generated session.
const LINES: u64 = 3_000_000;

/// (label, pattern) pairs measured.
const CASES: &[(&str, &str)] = &[
    ("literal, rare (1 line in 1000)", "failed"),
    ("literal, common (\"77\")", "77"),
    ("simple regex, rare", "^error: step [0-9]+ failed$"),
    ("case-insensitive literal, rare", "(?i)FAILED"),
    ("every line matches (worst case)", "^"),
];

fn main() -> anyhow::Result<()> {
    let samples: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(20);
    if std::env::args().any(|a| a == "history") {
        return history(samples.max(50));
    }
    let tmp = tempfile::tempdir()?;
    let bytes = generate(tmp.path())?;
    println!("session: {} lines, {:.1} MB; {samples} samples each", LINES, bytes as f64 / 1e6);
    let rg = Command::new("rg").arg("--version").output().is_ok_and(|o| o.status.success());
    println!(
        "\n{:<34} {:>9} {:>11} {:>11} {:>11} {:>7}",
        "pattern", "count", "ours med", "ours max", "rg -c med", "ratio"
    );
    for (label, pattern) in CASES {
        let re = search::compile(pattern)?;
        let mut count = 0;
        let ours = time(samples, || {
            count =
                search::search(tmp.path(), &re, None, Page { offset: 0, max_hits: 20 }).map(|f| f.total).unwrap_or(0);
        });
        let theirs = if rg { Some(time(samples, || rg_count(tmp.path(), pattern, count))) } else { None };
        let ms = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1e3);
        let (rg_med, ratio) = match &theirs {
            Some(t) => (ms(median(t)), format!("{:.2}", median(&ours).as_secs_f64() / median(t).as_secs_f64())),
            None => ("-".into(), "-".into()),
        };
        let max = ours.iter().max().copied().unwrap_or_default();
        println!("{label:<34} {count:>9} {:>11} {:>11} {rg_med:>11} {ratio:>7}", ms(median(&ours)), ms(max));
    }
    println!("\ntarget (DESIGN.md): < 5 ms median, < 50 ms worst, literal or simple regex, with count");
    if !rg {
        println!("rg is not installed: `apt-get install -y ripgrep` adds the comparison");
    }
    history(samples.max(50))
}

/// Lines of output in each history session: the same in both.
const HISTORY_LINES: u64 = 60_000;
/// Commands in the long history.
const COMMANDS: u64 = 6_000;
/// Commands in the short history that labels the same hits as the long
/// one: one per hit, so each hit lies in a region of its own there too.
const SHORT: u64 = NEEDLES;
/// Lines matching the pattern searched, spread evenly.
const NEEDLES: u64 = 20;

/// `search` over MCP in a session of one command, one of [`SHORT`] and
/// one of [`COMMANDS`], each [`HISTORY_LINES`] lines; beside it, what
/// labelling the hits cost by reading every region record, as the router
/// did before it kept an index.
///
/// A reply labels each hit with its region, read back from the file one
/// record per region shown: 20 hits in one region cost one read, in 20
/// regions 20. The session of [`SHORT`] commands shows the same 20
/// regions as the long one, so the two differ in history alone.
fn history(samples: usize) -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let home = tmp.path().join("home");
    for (name, commands) in [("one", 1), ("short", SHORT), ("many", COMMANDS)] {
        write_history(&home.join("sessions").join(name), commands)?;
    }
    let many = home.join("sessions").join("many");
    let regions_bytes = std::fs::metadata(many.join(files::REGIONS))?.len();
    println!(
        "\nsearch in history: closed sessions of {HISTORY_LINES} lines each, of 1, {SHORT} and {COMMANDS} commands \
         ({:.1} MB of region records in the last); {NEEDLES} hits, in one region of the first and each in its own \
         region of the others; {samples} calls each",
        regions_bytes as f64 / 1e6
    );
    let hits: Vec<LineNo> = (1..=NEEDLES).map(|n| LineNo(n * (HISTORY_LINES / NEEDLES) - 1)).collect();
    let reread = time(samples, || {
        let regions = store::read_regions(&many).unwrap_or_default();
        let labelled = hits.iter().filter(|&&l| search::region_at(&regions, l).is_some()).count();
        assert_eq!(labelled as u64, NEEDLES);
    });
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let calls = rt.block_on(search_calls(tmp.path(), &home, samples))?;
    println!("\n{:<58} {:>10} {:>10} {:>10}", "what", "first", "median", "p90");
    let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1e3);
    for (label, first, v) in &calls {
        println!("{label:<58} {:>10} {:>10} {:>10}", ms(*first), ms(median(v)), ms(pct90(v)));
    }
    let reread_label = format!("(before: read all region records + label, {COMMANDS} cmds)");
    println!("{reread_label:<58} {:>10} {:>10} {:>10}", "-", ms(median(&reread)), ms(pct90(&reread)));
    if let [(_, _, one), (_, _, short), (_, _, many), (_, _, one_new), (_, _, short_new), (_, _, many_new)] =
        calls.as_slice()
    {
        let ratio = |a: &[Duration], b: &[Duration]| median(b).as_secs_f64() / median(a).as_secs_f64();
        println!(
            "\n{COMMANDS} commands / {SHORT} commands, the same regions shown, median: {:.2} same pattern, {:.2} new pattern \
             (target: as fast, within noise of 1.0)",
            ratio(short, many),
            ratio(short_new, many_new)
        );
        println!(
            "{COMMANDS} commands / 1 command, median: {:.2} same pattern, {:.2} new pattern \
             ({NEEDLES} regions read back to label the hits against 1)",
            ratio(one, many),
            ratio(one_new, many_new)
        );
    }
    Ok(())
}

/// Times `search` calls on the real server over stdio: (label, first call,
/// the calls after it).
async fn search_calls(
    tmp: &Path,
    home: &Path,
    samples: usize,
) -> anyhow::Result<Vec<(String, Duration, Vec<Duration>)>> {
    let socket = format!("dtmcp-bench-search-{}", std::process::id());
    let run = tmp.join("run");
    std::fs::create_dir_all(&run)?;
    let (home, run) = (home.display().to_string(), run.display().to_string());
    let env = [
        ("DOCENT_TERMINAL_MCP_HOME", home.as_str()),
        ("DOCENT_TERMINAL_MCP_SOCKET", socket.as_str()),
        ("XDG_RUNTIME_DIR", run.as_str()),
    ];
    let exe = Path::new(env!("CARGO_BIN_EXE_docent-terminal-mcp"));
    let server = McpChild::start(exe, &[], &env).await?;
    let result = async {
        let mut out = Vec::new();
        let rounds = [
            ("one", 1, true),
            ("short", SHORT, true),
            ("many", COMMANDS, true),
            ("one", 1, false),
            ("short", SHORT, false),
            ("many", COMMANDS, false),
        ];
        for (name, commands, same) in rounds {
            let mut first = None;
            let mut v = Vec::with_capacity(samples);
            for i in 0..=samples {
                // The same pattern again is answered from what the last
                // call scanned; a new one each time scans the whole log.
                let pattern = if same { "needle".to_string() } else { format!("needle|never-{i}-{commands}") };
                let args = json!({"session": name, "pattern": pattern});
                let t = Instant::now();
                let r = server.call("search", args).await?;
                let took = t.elapsed();
                anyhow::ensure!(r.text.starts_with(&format!("{NEEDLES} lines")), "unexpected reply: {}", r.text);
                anyhow::ensure!(r.text.contains("[region "), "hits without their regions: {}", r.text);
                if first.is_none() {
                    first = Some(took);
                } else {
                    v.push(took);
                }
            }
            let plural = if commands == 1 { "" } else { "s" };
            let how = if same { "same pattern" } else { "new pattern each call" };
            let label = format!("search over MCP, {commands} command{plural}, {how}");
            out.push((label, first.unwrap_or_default(), v));
        }
        Ok(out)
    }
    .await;
    server.stop().await?;
    dtmcp::tmux::kill_server_now(&socket);
    result
}

/// Writes a closed session of [`HISTORY_LINES`] lines cut into `commands`
/// regions, each opened and then ended, as the logger records them.
fn write_history(dir: &Path, commands: u64) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    store::write_meta(dir, &Meta { name, host: "bench".into(), ..Meta::default() })?;
    let mut w = LineWriter::open(dir)?;
    for i in 1..=HISTORY_LINES {
        match i % (HISTORY_LINES / NEEDLES) == HISTORY_LINES / NEEDLES - 1 {
            true => w.push(&format!("needle {i}"))?,
            false => w.push(&format!("output line {i} of a long build"))?,
        }
    }
    w.flush()?;
    let mut log = RegionLog::open(dir)?;
    let per = HISTORY_LINES / commands;
    for c in 0..commands {
        let start = LinePos { line: LineNo(c * per + 1), bytes: 0 };
        let open = Region {
            id: RegionId(c + 1),
            command: format!("make step-{c} --jobs=2"),
            pid: 4242,
            host: "bench".into(),
            user: "bench".into(),
            start,
            started_ms: 1_700_000_000_000 + c * 1000,
            ..Region::default()
        };
        log.append(&open)?;
        let end = LinePos { line: LineNo((c + 1) * per + 1), bytes: 0 };
        log.append(&Region { end: Some(end), exit: Some(0), ended_ms: Some(open.started_ms + 500), ..open })?;
    }
    Ok(())
}

/// Writes the session: numbers, one per line, with an error line every
/// 1000th, through the store's own writer. Returns the text's size.
fn generate(dir: &Path) -> anyhow::Result<u64> {
    let mut w = LineWriter::open(dir)?;
    for i in 1..=LINES {
        if i % 1000 == 0 {
            w.push(&format!("error: step {i} failed"))?;
        } else {
            w.push(&(1_000_000 + i).to_string())?;
        }
    }
    w.flush()?;
    Ok(std::fs::metadata(dir.join(files::TEXT))?.len())
}

fn rg_count(dir: &Path, pattern: &str, expected: u64) {
    let out = Command::new("rg").arg("-c").arg("--").arg(pattern).arg(dir.join(files::TEXT)).output();
    let got: Option<u64> = out.ok().and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok());
    if got != Some(expected) {
        eprintln!("rg -c {pattern:?} says {got:?}, we say {expected}");
    }
}

fn time(samples: usize, mut f: impl FnMut()) -> Vec<Duration> {
    f(); // warm the page cache and the regex
    (0..samples)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect()
}

fn pct90(v: &[Duration]) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s.get(s.len() * 9 / 10).copied().unwrap_or_default()
}

fn median(v: &[Duration]) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s.get(s.len() / 2).copied().unwrap_or_default()
}
