//! Speed of `search`'s core on a 25 MB / 3 M-line session, beside
//! `rg -c` on the same file in the same run (when ripgrep is installed).
//!
//! `cargo bench --bench search` (add `-- N` for N samples, default 20).
//! Our times are in-process, as the router searches; rg's include starting
//! a process. Prints a table against DESIGN.md's target; asserts nothing.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use dtmcp_core::search::{self, Page};
use dtmcp_core::store::{LineWriter, files};

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

fn median(v: &[Duration]) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s.get(s.len() / 2).copied().unwrap_or_default()
}
