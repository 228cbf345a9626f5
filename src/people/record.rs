//! `record NAME [--region N | --from-region A --to-region B] [-o FILE]`:
//! the session, one command or a range of them as an asciicast v3 file
//! (`--v2` for older players), on stdout or in FILE. Idle stretches longer
//! than `--idle-max` are cut, as asciinema does.

use std::path::PathBuf;

use super::look;
use super::{Failure, Home, Out, Outcome};
use dtmcp_core::cast::{Select, Version};

/// Arguments of `record`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "\
Examples:
  dtmcp record t1 > t1.cast                 the whole session
  dtmcp record t1 --region 3 -o r.cast      one command, from its prompt
  dtmcp record t1 --from-region 3 --to-region 7 --v2 -o old.cast
  asciinema play r.cast                     play it with asciinema 3")]
pub struct RecordArgs {
    /// The session, open or closed.
    pub name: String,
    /// One region (a number from `regions`).
    #[arg(long, value_name = "N", conflicts_with_all = ["from_region", "to_region"])]
    pub region: Option<u64>,
    /// The first region of a range.
    #[arg(long, value_name = "A", requires = "to_region")]
    pub from_region: Option<u64>,
    /// The last region of a range.
    #[arg(long, value_name = "B", requires = "from_region")]
    pub to_region: Option<u64>,
    /// Write the recording to FILE instead of stdout.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Write asciicast v2 (asciinema 2.x) instead of v3.
    #[arg(long)]
    pub v2: bool,
    /// Cut pauses longer than this many seconds to this length.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    pub idle_max: f64,
}

/// What the region options select.
pub fn select(region: Option<u64>, from: Option<u64>, to: Option<u64>) -> Select {
    match (region, from, to) {
        (Some(n), _, _) => Select::One(n),
        (None, Some(a), Some(b)) => Select::Range(a, b),
        _ => Select::All,
    }
}

/// `--idle-max` in milliseconds, or a usage error.
pub fn idle_ms(seconds: f64) -> Result<u64, Failure> {
    if !(seconds.is_finite() && seconds > 0.0 && seconds <= 86_400.0) {
        return Err(Failure::Usage(format!(
            "--idle-max {seconds} is not a number of seconds above 0 (and at most a day); try --idle-max 2"
        )));
    }
    Ok((seconds * 1000.0).round().max(1.0) as u64)
}

/// Runs `record`.
pub async fn run(home: Home, args: RecordArgs) -> Outcome {
    let idle = idle_ms(args.idle_max)?;
    let found = look::find(&home, &args.name).await?;
    let select = select(args.region, args.from_region, args.to_region);
    let redact = crate::recording::redacts(&found.dir);
    let cast = crate::recording::cast(&found.dir, &found.name, select, redact).map_err(Failure::NotFound)?;
    let version = if args.v2 { Version::V2 } else { Version::V3 };
    let body = crate::recording::text(&cast, version, idle);
    match &args.output {
        Some(path) => crate::recording::save(path, &body)
            .map_err(|e| Failure::Trouble(format!("writing {}: {e}", path.display()))),
        None => Out::stdout().put(&String::from_utf8_lossy(&body)),
    }
}
