//! The big ingest's rows of the scale bench: a `run` of `cat` of a
//! 3 M-line file over MCP against tmux's own floor, in turns; the router's
//! CPU time over that call; and the peak RSS of router and logger on that
//! session once read and searched (see `benches/shared/ingest.rs`).
//!
//! `--ingest-lines N` sets the file's size (the 3 M lines by
//! default; targets are judged only at that size or above, since a smaller
//! run weighs the reply's fixed cost more), `--ingest-rounds R` the rounds
//! (5), `--ingest-lines 0` leaves the rows out and `--ingest-only` runs
//! nothing else. A few rounds with a tenth of the lines follow, and the
//! router's CPU for them is printed beside the full size's: the reply's
//! cost must not grow with the output (no target; it shows the flatness).

use super::ingest::{self, Turns};

use std::path::Path;
use std::time::Duration;

/// Rounds of floor and ours by default: each lasts a few seconds at the
/// issue's size.
const ROUNDS: usize = 5;

/// The ingest's targets (issue 42).
const RATIO_LIMIT: f64 = 1.05;
const ROUTER_CPU_LIMIT_S: f64 = 0.05;
/// 14 MB, read as the issue reads `/proc`: 14,000 of its kB.
const PEAK_LIMIT_KB: f64 = 14_000.0;

/// What the command line asked of the ingest rows.
pub(crate) struct Asked {
    pub(crate) lines: u64,
    pub(crate) rounds: usize,
    pub(crate) only: bool,
}

impl Asked {
    pub(crate) fn from_args(args: &[String]) -> Asked {
        let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1));
        Asked {
            lines: value("--ingest-lines").and_then(|n| n.parse().ok()).unwrap_or(ingest::DEFAULT_LINES),
            rounds: value("--ingest-rounds").and_then(|n| n.parse().ok()).unwrap_or(ROUNDS).max(1),
            only: args.iter().any(|a| a == "--ingest-only"),
        }
    }
}

/// The ingest's rounds, and a few more of a tenth of the lines: the
/// router's work for the reply must not grow with the output.
pub(crate) struct Measured {
    full: Turns,
    tenth: Turns,
}

/// Rounds of the tenth-size ingest.
const TENTH_ROUNDS: usize = 3;

/// Runs the rounds in `tmp` against router `exe`; `None` when not asked.
pub(crate) async fn measure(asked: &Asked, tmp: &Path, exe: &Path) -> anyhow::Result<Option<Measured>> {
    if asked.lines == 0 {
        return Ok(None);
    }
    eprintln!("ingest: {} lines, {} rounds of the tmux floor and a run over MCP…", asked.lines, asked.rounds);
    let full = ingest_in(&tmp.join("ingest"), exe, asked.lines, asked.rounds).await?;
    let tenth = ingest_in(&tmp.join("ingest-tenth"), exe, (asked.lines / 10).max(1), TENTH_ROUNDS).await?;
    Ok(Some(Measured { full, tenth }))
}

async fn ingest_in(dir: &Path, exe: &Path, lines: u64, rounds: usize) -> anyhow::Result<Turns> {
    std::fs::create_dir_all(dir)?;
    let turns = ingest::measure(&ingest::Plan { exe, tmp: dir, lines, rounds }).await;
    // 33 MB per round of session text and region files go now.
    let _ = std::fs::remove_dir_all(dir);
    turns
}

/// Prints the rows; returns the targets measured and missed.
pub(crate) fn print(measured: Option<&Measured>, asked: &Asked, exe: &Path) -> Vec<String> {
    let Some(Measured { full: t, tenth }) = measured else { return Vec::new() };
    let ms = |v: &[Duration]| ingest::median(&ingest::secs(v)).unwrap_or(f64::NAN) * 1e3;
    println!(
        "\ningest of `cat` of {} lines ({:.1} MB), {} rounds in turns (median of the rounds):",
        asked.lines,
        t.bytes as f64 / 1e6,
        t.ratios.len()
    );
    println!("  tmux floor: a raw pane piping into `cat > file`            {:>9.0} ms", ms(&t.floor));
    println!("  ours: run over MCP stdio, call to reply                      {:>9.0} ms", ms(&t.ours));
    println!("    of which the output's end in raw.log                       {:>9.0} ms", ms(&t.logged));
    let made: Vec<Duration> = t.ours.iter().zip(&t.logged).map(|(o, l)| o.saturating_sub(*l)).collect();
    println!("    and the reply's making after it                            {:>9.0} ms", ms(&made));
    println!("  router CPU per call                                          {:>9.1} ms", ms(&t.router_cpu));
    println!(
        "    (with a tenth of the lines: {:.1} ms; flat, as the reply reads only what it shows)",
        ms(&tenth.router_cpu)
    );
    println!("  logger CPU per call                                          {:>9.0} ms", ms(&t.logger_cpu));
    println!(
        "  tmux CPU per call, ours / the floor's                        {:>4.0}/{:.0} ms",
        ms(&t.tmux_cpu),
        ms(&t.floor_tmux_cpu)
    );
    println!("  peak RSS router / logger                                     {:>6}/{} kB", t.router_kb, t.logger_kb);
    println!("  (the router measured: {})", exe.display());
    println!("\n{:<58} {:>10} {:>8} {:>6}", "target", "measured", "limit", "");
    let judged = asked.lines >= ingest::DEFAULT_LINES;
    let mut missed = Vec::new();
    // `digits` after the point, for the measure and the limit alike.
    let mut verdict = |what: &str, got: Option<f64>, limit: f64, (digits, unit): (usize, &str)| match got {
        Some(g) if judged => {
            let ok = g <= limit;
            let (shown, limit) = (format!("{g:.digits$}{unit}"), format!("{limit:.digits$}{unit}"));
            if !ok {
                missed.push(format!("{} {shown} > {limit}", what.trim()));
            }
            println!("{what:<58} {shown:>10} {limit:>8} {:>6}", if ok { "ok" } else { "OVER" });
        }
        Some(g) => println!("{what:<58} {:>10} {:>8} {:>6}", format!("{g:.digits$}{unit}"), "—", "(small)"),
        None => println!("{what:<58} {:>10}", "not run"),
    };
    verdict("ingest, call to reply / tmux floor, median of rounds", ingest::median(&t.ratios), RATIO_LIMIT, (2, "×"));
    println!("    ({})", ingest::spread(&t.ratios));
    let cpu = ingest::secs(&t.router_cpu);
    verdict("router CPU during that ingest, median of rounds", ingest::median(&cpu), ROUTER_CPU_LIMIT_S, (3, " s"));
    println!("    ({})", ingest::spread(&cpu));
    let peak = (t.router_kb > 0 && t.logger_kb > 0).then(|| (t.router_kb + t.logger_kb) as f64);
    verdict("peak RSS router + logger, that session read and searched", peak, PEAK_LIMIT_KB, (0, " kB"));
    if !t.complete || !tenth.complete {
        missed.push("the ingest was incomplete: a reply without `exit 0`, or lines missing".to_string());
        println!("  (INCOMPLETE: a reply without `exit 0`, or lines missing from session.txt)");
    }
    missed
}
