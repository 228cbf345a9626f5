//! Shaping a command's output for the reply: `show` (matching lines and a
//! few after each), `last_lines` (only the end), and `save_to` (a copy of
//! the whole output in a file the caller names). Every option is checked
//! before anything is typed, so a bad one rejects the call whole.

use std::fmt::Write as _;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use regex::bytes::Regex;

use crate::docent::summary;
use crate::tools::ToolError;
use crate::tools::replies::output;
use dtmcp_core::search::{self, Page, Scope};
use dtmcp_core::store::{LineReader, marks};
use dtmcp_core::types::LineNo;

/// The most `show` hits a reply lists.
const MAX_SHOW_HITS: u64 = 40;
/// The most lines after each `show` hit.
const MAX_SHOW_AFTER: u64 = 20;
/// The most lines `last_lines` may ask for.
const MAX_LAST_LINES: u64 = 400;
/// The lines `save_to` copies per read, so a huge output is never held whole.
const SAVE_CHUNK: u64 = 10_000;

/// The shaping options of `run` and `wait`, as given (their tool schemas
/// describe each one).
#[derive(Clone, Debug, Default)]
pub struct ShapeParams {
    /// A regex for the lines to show.
    pub show: Option<String>,
    /// Lines shown after each `show` match.
    pub show_after: Option<u64>,
    /// Show only the last this many lines.
    pub last_lines: Option<u64>,
    /// Also write the whole output to this file.
    pub save_to: Option<String>,
    /// `save_to` may replace an existing file.
    pub overwrite: Option<bool>,
}

/// The options, checked.
#[derive(Clone, Debug, Default)]
pub struct Shape {
    show: Option<Show>,
    last_lines: Option<u64>,
    save_to: Option<SaveTo>,
}

/// `show`, checked.
#[derive(Clone, Debug)]
struct Show {
    /// The lines to show.
    re: Regex,
    /// How many lines after each match to show too.
    after: u64,
}

/// `save_to`, checked.
#[derive(Clone, Debug)]
struct SaveTo {
    /// The file to write.
    path: PathBuf,
    /// It may replace an existing regular file.
    overwrite: bool,
}

impl Shape {
    /// Checks the options; the error says what to fix.
    pub fn parse(p: &ShapeParams) -> Result<Shape, ToolError> {
        Shape::check(p).map_err(ToolError::BadInput)
    }

    fn check(p: &ShapeParams) -> Result<Shape, String> {
        if p.show.is_some() && p.last_lines.is_some() {
            return Err("give show or last_lines, not both".into());
        }
        let after = p.show_after.unwrap_or(0);
        if after > MAX_SHOW_AFTER {
            return Err(format!("show_after is at most {MAX_SHOW_AFTER}"));
        }
        if p.show_after.is_some() && p.show.is_none() {
            return Err("show_after needs show".into());
        }
        let show = match &p.show {
            Some(pat) => Some(Show { re: search::compile(pat).map_err(|e| format!("show: {e}"))?, after }),
            None => None,
        };
        if p.last_lines.is_some_and(|n| n == 0 || n > MAX_LAST_LINES) {
            return Err(format!("last_lines must be between 1 and {MAX_LAST_LINES}"));
        }
        let overwrite = p.overwrite.unwrap_or(false);
        let save_to = match &p.save_to {
            Some(path) => Some(SaveTo { path: check_save_path(path, overwrite)?, overwrite }),
            None if p.overwrite.is_some() => return Err("overwrite needs save_to".into()),
            None => None,
        };
        Ok(Shape { show, last_lines: p.last_lines, save_to })
    }

    /// Whether the reply replaces head-and-tail clipping.
    pub fn replaces_clipping(&self) -> bool {
        self.show.is_some() || self.last_lines.is_some()
    }

    /// The reply body for lines `first..=last` of the log in `dir`, when
    /// [`Shape::replaces_clipping`]; the unfinished line is not included.
    pub fn render(&self, dir: &Path, first: LineNo, last: LineNo) -> Result<String, ToolError> {
        if let Some(n) = self.last_lines {
            let from = LineNo(last.0.saturating_sub(n - 1).max(first.0));
            let lines = read(dir, from, last)?;
            let skipped = from.0 - first.0;
            let mut out = String::new();
            if skipped > 0 {
                let _ = writeln!(out, "… {skipped} earlier lines ({first}-{}) not shown", from.0 - 1);
            }
            out.push_str(&output::numbered(from, &lines, output::digits(last.0)));
            return Ok(out);
        }
        let Some(show) = &self.show else { return Ok(String::new()) };
        self.render_show(dir, show, Scope { first, last })
    }

    fn render_show(&self, dir: &Path, show: &Show, scope: Scope) -> Result<String, ToolError> {
        let page = Page { offset: 0, max_hits: MAX_SHOW_HITS };
        let found = search::search(dir, &show.re, Some(scope), page)?;
        let mut out = format!("{} of {} output lines match show:\n", found.total, scope.last.0 + 1 - scope.first.0);
        let mut shown_to = 0u64;
        for hit in &found.hits {
            let from = LineNo(hit.0.max(shown_to + 1));
            let to = LineNo((hit.0 + show.after).min(scope.last.0));
            if from > to {
                continue;
            }
            if shown_to > 0 && from.0 > shown_to + 1 {
                out.push_str("--\n");
            }
            out.push_str(&output::numbered(from, &read(dir, from, to)?, output::digits(scope.last.0)));
            shown_to = to.0;
        }
        if found.total > MAX_SHOW_HITS {
            let _ = writeln!(out, "… {} more matches: search finds them all", found.total - MAX_SHOW_HITS);
        }
        Ok(out)
    }

    /// Copies lines `first..=last` (plus `tail`, an unfinished last line) to
    /// the `save_to` file, if one was asked for; says what it did.
    pub fn save(
        &self,
        dir: &Path,
        first: LineNo,
        last: LineNo,
        tail: Option<&str>,
    ) -> Result<Option<String>, ToolError> {
        let Some(target) = &self.save_to else { return Ok(None) };
        let path = &target.path;
        let mut f = open_target(target).map_err(ToolError::Failed)?;
        let err = |e: std::io::Error| ToolError::Failed(format!("writing {}: {e}", path.display()));
        let mut from = first;
        let mut count = 0u64;
        while from <= last {
            let to = LineNo((from.0 + SAVE_CHUNK - 1).min(last.0));
            for l in read(dir, from, to)? {
                f.write_all(l.as_bytes()).and_then(|()| f.write_all(b"\n")).map_err(err)?;
                count += 1;
            }
            from = to.next();
        }
        if let Some(t) = tail.filter(|t| !t.is_empty()) {
            f.write_all(t.as_bytes()).and_then(|()| f.write_all(b"\n")).map_err(err)?;
            count += 1;
        }
        Ok(Some(format!("saved {count} lines to {}", path.display())))
    }
}

/// The summary lines of `first..=last` (the part a clipped reply leaves
/// out), rendered to lead the reply; empty when there are none or
/// `DOCENT_TERMINAL_MCP_SUMMARY=0`. The logger noted the lines a summary
/// looks at as it cooked them ([`marks`]): only those are read, so the
/// cost does not grow with the output. A session cooked by a logger that
/// kept no such index, or whose index cannot be read, is scanned instead,
/// in blocks, looking only at the lines holding a word a summary line
/// needs ([`summary::feed_text`]).
pub fn summary(dir: &Path, first: LineNo, last: LineNo) -> Result<String, ToolError> {
    if !summary::enabled() || last < first {
        return Ok(String::new());
    }
    // An index that cannot be read (damaged, or cut short by a full disk)
    // costs a scan, not the reply.
    if let Ok(Some(s)) = marks::summarize(dir, first, last) {
        return Ok(render_summary(&s, first, last));
    }
    let mut s = summary::Summarizer::new();
    LineReader::open(dir)?.scan(first, last, |number, block| {
        summary::feed_text(&mut s, block, number);
    })?;
    Ok(render_summary(&s.finish(), first, last))
}

/// Renders a summary under a line saying where its lines come from.
fn render_summary(s: &summary::Summary, first: LineNo, last: LineNo) -> String {
    if s.lines.is_empty() {
        return String::new();
    }
    let mut out = format!("summary of lines {first}-{last} (not shown below): failures, errors, results\n");
    let width = output::digits(last.0);
    for (n, text) in &s.lines {
        let _ = writeln!(out, "{n:>width$}  {text}");
    }
    if s.more > 0 {
        let _ = writeln!(out, "{:>width$}  … {} more failure lines: search finds them all", "", s.more);
    }
    out
}

fn read(dir: &Path, from: LineNo, to: LineNo) -> Result<Vec<String>, ToolError> {
    if to < from {
        return Ok(Vec::new());
    }
    Ok(LineReader::open(dir)?.read(from, to.0 - from.0 + 1)?)
}

/// Checks a `save_to` path before anything is typed: absolute, its parent a
/// directory outside the state home and on a file system of files (not
/// `/proc` or `/sys`), not a symlink, and not an existing file unless
/// `overwrite`, which must then be a regular file with one name only.
fn check_save_path(path: &str, overwrite: bool) -> Result<PathBuf, String> {
    use std::os::unix::fs::MetadataExt;
    let p = PathBuf::from(path);
    if !p.is_absolute() {
        return Err(format!("save_to must be an absolute path; got {path:?}"));
    }
    let Some(parent) = p.parent().filter(|d| d.is_dir()) else {
        return Err(format!("save_to: the directory of {path:?} does not exist"));
    };
    if let Some(home) = state_home()
        && within(&p, &home)
    {
        return Err(in_state_home(path, &home));
    }
    if let Ok(fs) = nix::sys::statfs::statfs(parent)
        && let Some(kind) = pseudo_fs(fs.filesystem_type())
    {
        return Err(format!("save_to: {path:?} is on {kind}, where files are not files; pick a path on a disk"));
    }
    match std::fs::symlink_metadata(&p) {
        Ok(m) if m.file_type().is_symlink() => {
            Err(format!("save_to: {path:?} is a symlink; symlinks are not followed"))
        }
        Ok(m) if !m.is_file() => Err(format!("save_to: {path:?} exists and is not a regular file")),
        Ok(_) if !overwrite => Err(format!("save_to: {path:?} exists; pass overwrite=true to replace it")),
        Ok(m) if m.nlink() > 1 => Err(linked(path, m.nlink())),
        _ => Ok(p),
    }
}

/// The server's state home, if the environment names one.
fn state_home() -> Option<PathBuf> {
    crate::config::Config::from_env().ok().map(|c| c.home)
}

fn in_state_home(path: &str, home: &Path) -> String {
    format!(
        "save_to: {path:?} is inside the server's state directory {}, which only the server writes; pick a path outside it",
        home.display()
    )
}

fn linked(path: &str, links: u64) -> String {
    format!(
        "save_to: {path:?} has {links} names (hard links): writing it would change the file under its other names too, \
         which may be a session's own record; pick a new path, or remove the other names first"
    )
}

/// The name of a file system whose files are no files (process memory,
/// kernel settings, devices), if `kind` is one.
fn pseudo_fs(kind: nix::sys::statfs::FsType) -> Option<&'static str> {
    use nix::sys::statfs as fs;
    let pseudo = [
        (fs::PROC_SUPER_MAGIC, "/proc"),
        (fs::SYSFS_MAGIC, "/sys"),
        (fs::DEVPTS_SUPER_MAGIC, "devpts"),
        (fs::DEBUGFS_MAGIC, "debugfs"),
        (fs::TRACEFS_MAGIC, "tracefs"),
        (fs::SECURITYFS_MAGIC, "securityfs"),
        (fs::SELINUX_MAGIC, "selinuxfs"),
        (fs::CGROUP_SUPER_MAGIC, "cgroupfs"),
        (fs::BPF_FS_MAGIC, "bpffs"),
        (fs::NSFS_MAGIC, "nsfs"),
    ];
    pseudo.iter().find(|(magic, _)| *magic == kind).map(|(_, name)| *name)
}

/// Whether `path` (its directory's links resolved) lies inside `root`.
fn within(path: &Path, root: &Path) -> bool {
    let Some(parent) = path.parent().and_then(|d| d.canonicalize().ok()) else { return false };
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    parent.starts_with(&root)
}

/// Opens `path` for writing as `save_to` does (checked the same way: an
/// absolute path outside the state home, on a disk, no symlink, replaced
/// only with `overwrite`), for another tool's copy of something.
pub(crate) fn open_save_to(path: &str, overwrite: bool) -> Result<(PathBuf, std::fs::File), String> {
    let target = SaveTo { path: check_save_path(path, overwrite)?, overwrite };
    let file = open_target(&target)?;
    Ok((target.path, file))
}

/// Opens the target and checks the file it got, as it is now (whatever
/// changed since [`check_save_path`]): no symlink followed, nothing but a
/// regular file with one name only, on a file system of files, outside
/// the state home. Only then is an existing file emptied, so a refusal
/// loses nothing.
fn open_target(target: &SaveTo) -> Result<std::fs::File, String> {
    use std::os::unix::fs::MetadataExt;
    let path = &target.path;
    let shown = path.display().to_string();
    let mut opts = std::fs::OpenOptions::new();
    // Non-blocking: a FIFO put there meanwhile must not hold the call.
    opts.write(true).mode(0o600).custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK);
    match target.overwrite {
        true => opts.create(true),
        false => opts.create_new(true),
    };
    let file = opts.open(path).map_err(|e| format!("save_to: cannot write {shown}: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("save_to: cannot look at {shown}: {e}"))?;
    let refusal = if !meta.is_file() {
        Some(format!("save_to: {shown:?} is not a regular file"))
    } else if meta.nlink() > 1 {
        Some(linked(&shown, meta.nlink()))
    } else if let Some(kind) = nix::sys::statfs::fstatfs(&file).ok().and_then(|fs| pseudo_fs(fs.filesystem_type())) {
        Some(format!("save_to: {shown:?} is on {kind}, where files are not files; pick a path on a disk"))
    } else {
        let real = std::fs::read_link(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&file)));
        let home = state_home().and_then(|h| h.canonicalize().ok());
        match (real, home) {
            (Ok(real), Some(home)) if real.starts_with(&home) => Some(in_state_home(&shown, &home)),
            _ => None,
        }
    };
    if let Some(why) = refusal {
        if !target.overwrite && meta.is_file() && meta.len() == 0 {
            // Made by this call: nothing of anyone's is lost with it.
            let _ = std::fs::remove_file(path);
        }
        return Err(why);
    }
    if target.overwrite {
        file.set_len(0).map_err(|e| format!("save_to: cannot empty {shown}: {e}"))?;
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(f: impl FnOnce(&mut ShapeParams)) -> ShapeParams {
        let mut p = ShapeParams::default();
        f(&mut p);
        p
    }

    #[test]
    fn bad_options_are_refused_before_anything_runs() {
        assert!(Shape::parse(&params(|p| p.show = Some("(".into()))).is_err());
        assert!(Shape::parse(&params(|p| p.show_after = Some(2))).is_err());
        assert!(Shape::parse(&params(|p| p.last_lines = Some(0))).is_err());
        assert!(Shape::parse(&params(|p| p.save_to = Some("relative.txt".into()))).is_err());
        assert!(Shape::parse(&params(|p| p.overwrite = Some(true))).is_err());
        let both = params(|p| {
            p.show = Some("x".into());
            p.last_lines = Some(3);
        });
        assert!(Shape::parse(&both).is_err());
    }

    #[test]
    fn save_to_refuses_symlinks_and_existing_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("target");
        std::fs::write(&target, "keep").expect("write");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        let path = |p: &Path| p.display().to_string();
        assert!(check_save_path(&path(&link), true).expect_err("symlink").contains("symlink"));
        assert!(check_save_path(&path(&target), false).expect_err("exists").contains("overwrite"));
        assert!(check_save_path(&path(&target), true).is_ok());
        assert!(check_save_path(&path(&dir.path().join("new")), false).is_ok());
        // A second name for a file, made anywhere, is refused before and at
        // the write; the file keeps its bytes.
        let other = dir.path().join("other");
        std::fs::hard_link(&target, &other).expect("link");
        assert!(check_save_path(&path(&other), true).expect_err("linked").contains("2 names"));
        let save = SaveTo { path: other.clone(), overwrite: true };
        assert!(open_target(&save).expect_err("linked").contains("2 names"));
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "keep");
        // Process memory passes for a regular file by its mode; not by its file system.
        assert!(check_save_path("/proc/self/mem", true).expect_err("proc").contains("/proc"));
        let mem = SaveTo { path: "/proc/self/mem".into(), overwrite: true };
        assert!(open_target(&mem).is_err());
    }

    #[test]
    fn show_lists_matches_with_lines_after_and_last_lines_the_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut w = dtmcp_core::store::LineWriter::open(dir.path()).expect("open");
        for t in ["$ make", "cc a.c", "a.c:3: error: x", "  detail", "cc b.c", "b.c:9: error: y", "done"] {
            w.push(t).expect("push");
        }
        w.flush().expect("flush");
        let shape = Shape::parse(&params(|p| {
            p.show = Some("error".into());
            p.show_after = Some(1);
        }))
        .expect("shape");
        let text = shape.render(dir.path(), LineNo(2), LineNo(7)).expect("render");
        assert!(text.starts_with("2 of 6 output lines match show:\n"), "{text}");
        assert!(text.contains("3  a.c:3: error: x\n4    detail\n--\n6  b.c:9: error: y\n7  done\n"), "{text}");
        let last = Shape::parse(&params(|p| p.last_lines = Some(2))).expect("shape");
        let text = last.render(dir.path(), LineNo(2), LineNo(7)).expect("render");
        assert_eq!(text, "… 4 earlier lines (2-5) not shown\n6  b.c:9: error: y\n7  done\n");
    }
}
