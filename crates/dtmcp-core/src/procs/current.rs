//! A pane's current command and directory as tmux names them
//! (`pane_current_command`, `pane_current_path`), found here instead of by
//! tmux: its server is one thread, and a listing of many panes that asks it
//! for both makes every client wait while it looks in `/proc` pane by pane.
//!
//! tmux 3.3a (`osdep-linux.c`, `names.c`) takes the terminal's foreground
//! process group, reads the first word of its `/proc/PGID/cmdline` and
//! tidies it into a window name, and reads the link `/proc/PGID/cwd`
//! (falling back to the terminal's session leader's). Here the foreground
//! group comes from the pane's first process's `stat` (`tpgid`, the same
//! terminal's), which needs no descriptor of the terminal.
//!
//! A listing asks [`now`] instead, which spares the `stat` of a first
//! process that has no child (most panes, at their prompts): nothing but
//! its own descendants can have taken its terminal's foreground from it,
//! so the group is its own. The one exception is a job whose leader died
//! and left an orphan in the foreground; the shell takes the terminal back
//! as soon as it reaps that leader, so the names differ from tmux's for an
//! instant at most.

use std::fs;

use super::parse;

/// What tmux would call a pane's current command and directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Current {
    /// `pane_current_command`: the foreground program's name.
    pub command: String,
    /// `pane_current_path`: its working directory (empty when unreadable).
    pub path: String,
}

/// The current command and directory of the pane whose first process is
/// `pid`; both empty when that process is gone.
pub fn current(pid: u32) -> Current {
    let Ok(text) = super::read_proc(&format!("/proc/{pid}/stat")) else { return Current::default() };
    let Some(stat) = parse::stat(&text) else { return Current::default() };
    let group = (stat.tpgid > 0).then_some(stat.tpgid);
    // A session made with a command runs it under `sh -c`, which is no
    // shell anyone types at: the program it started names the pane (where
    // tmux would say `sh`).
    let wraps = || super::is_shell_name(&stat.comm) && parse::shell_runs_script(&super::argv(stat.pid));
    let group = match group {
        Some(g) if g == stat.pid && wraps() => first_child(stat.pid).or(group),
        _ => group,
    };
    let first_word = group.and_then(argv0).filter(|w| !w.is_empty());
    let command = window_name(first_word.as_deref().unwrap_or(&stat.comm));
    let link = |p: i32| fs::read_link(format!("/proc/{p}/cwd")).ok();
    let path = group.and_then(link).or_else(|| link(stat.pid));
    Current { command, path: path.map(|p| p.to_string_lossy().into_owned()).unwrap_or_default() }
}

/// As [`current`], and whether `pid` has no child (`None` when that could
/// not be read): a first process with no child is its own terminal's
/// foreground, so its `stat` is not read (see the module doc). Its three
/// files are opened from one descriptor of its `/proc` directory: the
/// kernel looks the process up once, not three times.
pub fn now(pid: u32) -> (Current, Option<bool>) {
    let Some(dir) = super::ProcDir::open(pid) else { return (Current::default(), None) };
    let childless = dir.childless(pid);
    if childless == Some(true) {
        // An empty command line is a zombie's: `current` names it by comm.
        let first = dir.read("cmdline", Some(0)).map(|b| first_word(&b)).filter(|w| !w.is_empty());
        if let Some(first) = first {
            let path = dir.link("cwd").unwrap_or_default();
            return (Current { command: window_name(&first), path }, childless);
        }
    }
    (current(pid), childless)
}

/// The first child of process `pid`'s main thread, if it has one.
fn first_child(pid: i32) -> Option<i32> {
    let text = super::read_proc(&format!("/proc/{pid}/task/{pid}/children")).ok()?;
    parse::children(&text).into_iter().next()
}

/// The first word of process `pid`'s command line (up to its first NUL).
fn argv0(pid: i32) -> Option<String> {
    let bytes = super::read_proc_until(&format!("/proc/{pid}/cmdline"), Some(0)).ok()?;
    Some(first_word(&bytes))
}

/// The first word of a command line as `/proc/PID/cmdline` holds it.
fn first_word(cmdline: &[u8]) -> String {
    let first = cmdline.split(|b| *b == 0).next().unwrap_or_default();
    String::from_utf8_lossy(first).into_owned()
}

/// A command line tidied into a window name as tmux's `parse_window_name`
/// does: quotes and a leading `exec ` dropped, leading spaces and dashes
/// (a login shell's `-bash`) skipped, the first word kept without trailing
/// blanks, and a path cut to its last part.
pub fn window_name(line: &str) -> String {
    let mut name = line.strip_prefix('"').unwrap_or(line);
    name = name.split('"').next().unwrap_or_default();
    name = name.strip_prefix("exec ").unwrap_or(name);
    name = name.trim_start_matches([' ', '-']);
    name = name.split(' ').next().unwrap_or_default();
    let kept = name.trim_end_matches(|c: char| !c.is_ascii_alphanumeric() && !c.is_ascii_punctuation());
    if kept.is_empty() {
        name = name.get(..name.chars().next().map_or(0, char::len_utf8)).unwrap_or_default();
    } else {
        name = kept;
    }
    if name.starts_with('/') {
        let last = name.trim_end_matches('/').rsplit('/').next().unwrap_or_default();
        return if last.is_empty() { "/".to_string() } else { last.to_string() };
    }
    name.to_string()
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case("bash", "bash")]
    #[case("-bash", "bash")]
    #[case("/usr/bin/python3", "python3")]
    #[case("exec vim", "vim")]
    #[case("\"less\" file", "less")]
    #[case("  top -d 1", "top")]
    #[case("/usr/lib/", "lib")]
    #[case("/", "/")]
    #[case("", "")]
    fn a_command_line_is_named_as_tmux_names_it(#[case] line: &str, #[case] name: &str) {
        assert_eq!(window_name(line), name);
    }

    #[test]
    fn a_process_without_a_terminal_is_its_own_current_command_and_directory() {
        // `setsid` leaves it no controlling terminal (tpgid -1), whatever
        // terminal the tests run in, so its own name and directory are found.
        let dir = tempfile::tempdir().expect("tempdir");
        let mut child = std::process::Command::new("setsid")
            .args(["sleep", "30"])
            .current_dir(dir.path())
            .spawn()
            .expect("setsid sleep");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut seen = current(child.id());
        while seen.command != "sleep" && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
            seen = current(child.id());
        }
        // With no child, the quick way reads the same names.
        let quick = now(child.id());
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(quick, (seen.clone(), Some(true)));
        let want = dir.path().canonicalize().expect("canonical");
        assert_eq!(seen, Current { command: "sleep".into(), path: want.to_string_lossy().into_owned() });
        assert_eq!(current(0), Current::default());
    }
}
