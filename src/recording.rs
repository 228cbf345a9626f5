//! Recordings of a session, for `record` and `play`, `session_logs
//! action="record"` and the web view's player: reads a session's
//! `raw.log`, `timing.idx` and regions from its directory and hands them
//! to the core's [`cast`](dtmcp_core::cast), which builds the asciicast.
//!
//! The output in a recording is the log's bytes as they came (a replay
//! must show what the terminal showed); what is redacted, unless the
//! session was made with `redact=false`, are the markers' labels: the
//! command lines, which a reader sees without playing.

use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use dtmcp_core::cast::{self, Cast, Select, Version, timing};
use dtmcp_core::redact::{OFF_FILE, Reader};
use dtmcp_core::store::{self, files};

/// Whether a recording of the session in `dir` hides the secrets in its
/// labels: yes, unless the session was made with `redact=false`.
pub fn redacts(dir: &Path) -> bool {
    !dir.join(OFF_FILE).exists()
}

/// The recording of `select` in the session whose directory is `dir`,
/// titled `title`, its labels redacted when `redact`; or what stands in
/// the way, as a sentence saying what to do.
pub fn cast(dir: &Path, title: &str, select: Select, redact: bool) -> Result<Cast, String> {
    let index = std::fs::read(dir.join(files::TIMING)).unwrap_or_default();
    let timeline = timing::Timeline::from_records(&timing::decode(&index));
    let regions = store::read_regions(dir).map_err(|e| e.to_string())?;
    let raw_path = dir.join(files::RAW);
    let raw = std::fs::File::open(&raw_path).map_err(|e| format!("{}: {e}", raw_path.display()))?;
    let raw_len = raw.metadata().map_err(|e| format!("{}: {e}", raw_path.display()))?.len();
    let span = cast::span(&timeline, &regions, raw_len, select)?;
    let mut bytes = vec![0u8; usize::try_from(span.to - span.from).map_err(|e| e.to_string())?];
    raw.read_exact_at(&mut bytes, span.from).map_err(|e| format!("{}: {e}", raw_path.display()))?;
    let mut reader = redact.then(|| Reader::for_session(dir));
    let mut label = |text: &str| match reader.as_mut() {
        Some(r) => r.text(text),
        None => text.to_string(),
    };
    let exit = (span.to == raw_len).then(|| cast::shell_exit(&regions, &timeline)).flatten();
    let input = cast::Input {
        raw: &bytes,
        span,
        timeline: &timeline,
        regions: &regions,
        label: &mut label,
        exit,
        title: title.to_string(),
    };
    Ok(cast::build(input))
}

/// `cast` as the text of an asciicast file.
pub fn text(cast: &Cast, version: Version, idle_max_ms: u64) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing to memory cannot fail.
    let _ = cast::write(cast, version, idle_max_ms, &mut out);
    out
}

/// Writes `body` to `path` (mode 0600, through a temporary name renamed
/// over it, so a reader never sees half a recording).
pub fn save(path: &Path, body: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
    f.write_all(body)?;
    drop(f);
    std::fs::rename(&tmp, path)
}
