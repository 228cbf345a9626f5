//! Real bash, real tmux: the integration's own bytes through the cooker
//! and the tracker.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use super::*;
use crate::cook::Cooker;
use crate::pipeline::Pipeline;

const SECRET_NONCE: &str = "1234567891.987654321.2147483646.7";

/// Skips the test, saying why, when a program it needs is missing.
macro_rules! needs {
    ($program:literal) => {
        if Command::new($program).arg("-V").output().is_err() {
            eprintln!("skipped: {} is not installed", $program);
            return;
        }
    };
}

/// The shell directory of the checkout (the workspace's root holds it).
fn shell_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shell")
}

/// One integrated bash in a tmux server of its own (its socket in a
/// temporary HOME), its output piped to `raw.log` there. Dropping it
/// kills that server and nothing else.
struct TmuxHarness {
    socket: PathBuf,
    home: tempfile::TempDir,
    secret: Secret,
    /// Primary prompts the log should hold once the shell is ready.
    prompts: usize,
}

impl TmuxHarness {
    /// Starts bash with `profile` as its `~/.bash_profile`, and waits for
    /// its first prompt.
    fn start(profile: &str) -> TmuxHarness {
        let home = tempfile::tempdir().expect("temp dir");
        std::fs::write(home.path().join(".bash_profile"), profile).expect("write profile");
        let mut h = TmuxHarness {
            socket: home.path().join("tmux.sock"),
            home,
            secret: Secret::generate().expect("urandom"),
            prompts: 0,
        };
        // The pane waits until the pipe is attached, so no byte is lost.
        let bash = format!(
            "tmux -S {} wait-for go; exec env HOME={} __DTMCP_NONCE={} bash --rcfile {}/bashrc -i",
            h.socket.display(),
            h.home.path().display(),
            h.secret.to_nonce(),
            shell_dir().display()
        );
        h.tmux(&["-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40", &bash]);
        let log = h.log();
        h.tmux(&["pipe-pane", "-O", &format!("cat >> {}", log.display())]);
        h.tmux(&["wait-for", "-S", "go"]);
        h.wait_prompt();
        h
    }

    fn tmux(&self, args: &[&str]) -> Output {
        let out = Command::new("tmux").arg("-S").arg(&self.socket).args(args).output();
        let out = out.expect("tmux runs");
        assert!(out.status.success(), "tmux {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out
    }

    fn log(&self) -> PathBuf {
        self.home.path().join("raw.log")
    }

    fn raw(&self) -> Vec<u8> {
        std::fs::read(self.log()).unwrap_or_default()
    }

    /// Types `line` and Enter, as separate steps.
    fn type_line(&self, line: &str) {
        self.tmux(&["send-keys", "-l", line]);
        self.tmux(&["send-keys", "Enter"]);
    }

    /// Types `line` and waits for the next primary prompt.
    fn run(&mut self, line: &str) {
        self.type_line(line);
        self.wait_prompt();
    }

    fn wait_prompt(&mut self) {
        self.prompts += 1;
        let want = self.prompts;
        self.wait_until(&format!("{want} prompts"), |raw| count(raw, b"\x1b]133;A;dtmcp=") >= want);
    }

    fn wait_until(&self, what: &str, done: impl Fn(&[u8]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done(&self.raw()) {
            let raw = String::from_utf8_lossy(&self.raw()).into_owned();
            assert!(Instant::now() < deadline, "no {what} in time; log so far:\n{raw:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The log through a cooker and a tracker: the final form of each
    /// region, the tracker, and the cooked lines.
    fn regions(&self) -> (Vec<Region>, RegionTracker, Vec<String>) {
        let tracker = RegionTracker::new(Some(self.secret.clone()), RegionId(1));
        let mut pipe = Pipeline::new(Cooker::new(LineNo::FIRST), tracker);
        let (mut lines, mut changes) = (Vec::new(), Vec::new());
        pipe.feed(&self.raw(), 0, &mut changes, |ev| {
            if let CookEvent::Line { text, .. } = ev {
                lines.push(text.clone());
            }
        });
        let mut regions: Vec<Region> = Vec::new();
        for change in changes {
            let (RegionChange::Opened(r) | RegionChange::Closed(r)) = change;
            match regions.iter_mut().find(|old| old.id == r.id) {
                Some(old) => *old = r,
                None => regions.push(r),
            }
        }
        (regions, pipe.tracker, lines)
    }
}

impl Drop for TmuxHarness {
    fn drop(&mut self) {
        let kill = Command::new("tmux").arg("-S").arg(&self.socket).arg("kill-server").output();
        if let Err(e) = kill {
            eprintln!("could not stop the test's tmux server: {e}");
        }
    }
}

fn count(haystack: &[u8], needle: &[u8]) -> usize {
    haystack.windows(needle.len()).filter(|w| *w == needle).count()
}

/// What a test checks of a region: command, exit, statuses, depth.
fn brief(r: &Region) -> (&str, Option<i32>, &[i32], u32) {
    (r.command.as_str(), r.exit, r.pipestatus.as_slice(), r.depth)
}

#[test]
fn integrated_bash_marks_its_commands() {
    needs!("tmux");
    let mut h = TmuxHarness::start("");
    h.run("echo hi");
    h.run("false");
    h.run("true | false");
    h.type_line("cat <<EOF");
    h.type_line("x");
    h.run("EOF");
    h.run("bash");
    h.run("(exit 3)");
    h.run("exit");
    let (regions, tracker, _) = h.regions();
    let got: Vec<_> = regions.iter().map(brief).collect();
    let want: Vec<(&str, Option<i32>, &[i32], u32)> = vec![
        ("echo hi", Some(0), &[0], 0),
        ("false", Some(1), &[1], 0),
        ("true | false", Some(1), &[0, 1], 0),
        ("cat <<EOF\nx\nEOF", Some(0), &[0], 0),
        // `exit` leaves with the status of the command before it.
        ("bash", Some(3), &[3], 0),
        ("(exit 3)", Some(3), &[3], 1),
        ("exit", None, &[], 1),
    ];
    assert_eq!(got, want);
    assert_eq!(regions[5].parent, Some(regions[4].id));
    assert_ne!(regions[5].pid, regions[4].pid);
    let shell = tracker.shell();
    assert!(shell.integrated && shell.at_prompt && shell.open.is_empty());
    assert_eq!((shell.prompts, shell.pid), (8, regions[0].pid));
    assert!(!shell.user.is_empty() && !shell.host.is_empty());
}

/// A user's `set -eu`, an array PROMPT_COMMAND that reads `$?`, and a
/// framework that sets PS1 before every prompt; then a shell on a pty
/// of its own, which must print no markers.
#[test]
fn user_config_and_foreign_ptys_are_respected() {
    needs!("tmux");
    needs!("script");
    let profile = "set -eu\nPROMPT_COMMAND=('echo \"pc saw $?\"' 'PS1=\"fw\\$ \"')\n";
    let mut h = TmuxHarness::start(profile);
    h.run("echo ok");
    h.run("! true");
    h.type_line("script -qc 'bash --norc -i' /dev/null");
    h.wait_until("inner prompt", |raw| count(raw, b"bash-") >= 1);
    let (regions, _, lines) = h.regions();
    assert_eq!(regions.last().map(|r| r.exit), Some(None), "script should still run");
    h.type_line("echo in''side");
    h.wait_until("inner output", |raw| count(raw, b"inside\r\n") >= 1);
    h.run("exit");
    assert!(lines.iter().any(|l| l == "fw$ echo ok"), "{lines:#?}");
    assert!(lines.iter().any(|l| l == "pc saw 1"), "{lines:#?}");
    let (regions, tracker, _) = h.regions();
    let got: Vec<_> = regions.iter().map(brief).collect();
    let want: Vec<(&str, Option<i32>, &[i32], u32)> = vec![
        ("echo ok", Some(0), &[0], 0),
        ("! true", Some(1), &[0], 0),
        ("script -qc 'bash --norc -i' /dev/null", Some(0), &[0], 0),
    ];
    assert_eq!(got, want);
    assert_eq!(tracker.shell().prompts, 4);
    let raw = h.raw();
    let markers = count(&raw, b"\x1b]133;");
    assert_eq!(markers, 4 * 2 + 3 * 2, "only the session's shell marks");
}

/// The hook and the marked prompt it leaves cost far less than a
/// millisecond per prompt (a generous bound for a loaded debug machine).
#[test]
fn prompt_hook_is_cheap() {
    needs!("bash");
    let script = format!(
        r#". {}/integration.bash
        __DTMCP_TTY=/dev/null PS1='\u@\h:\w\$ '
        start=${{EPOCHREALTIME/[.,]/}}
        for ((i = 0; i < 500; i++)); do __DTMCP_RAN=1; true; __dtmcp_hook; x=${{PS1@P}}; done 2>/dev/null
        echo $(( (${{EPOCHREALTIME/[.,]/}} - start) / 500 ))"#,
        shell_dir().display()
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &script])
        .env("__DTMCP_NONCE", SECRET_NONCE)
        .output()
        .expect("bash runs");
    let micros: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().expect("a number");
    assert!(micros < 1000, "{micros} µs per prompt");
}
