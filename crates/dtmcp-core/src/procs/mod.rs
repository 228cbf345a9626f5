//! What holds a pane's terminal and what it is doing: the foreground job,
//! whether it waits for input (and whether that input is a password), and
//! where the session is (an `ssh` host, another user's shell).
//!
//! Everything comes from `/proc` and one `tcgetattr` on the pane's
//! terminal; nothing is ever read from the terminal itself. The rules live
//! in [`parse`] as pure functions; this module only opens files.
//!
//! A thread's exact wait comes from `/proc/PID/task/TID/syscall`, which
//! needs ptrace access (root, or Yama's `ptrace_scope` 0) and is decoded
//! on x86_64 and aarch64. Then the descriptors it waits on are read too:
//! `read`'s from its argument, `poll`'s and `select`'s from the process's
//! memory (`/proc/PID/mem`, the same access), `epoll`'s from the epoll
//! descriptor's `/proc/PID/fdinfo`. A job is waiting for input only when
//! the terminal is among them; one waiting on other descriptors (an
//! expect script driving gdb, a `connect()`) is working. Without that
//! access the wait channel (`wchan`) decides: a job sleeping in a read or
//! poll is taken to wait for input when its standard input is the
//! terminal, and the reason says that is a guess.

pub mod current;
pub mod diag;
pub mod net;
pub mod parse;
pub mod sockets;
pub mod tree;

use std::fs;
use std::os::unix::fs::{FileExt, OpenOptionsExt};

use nix::sys::termios::{LocalFlags, tcgetattr};

use parse::{Call, Stat, Syscall, WaitKind};

/// The most `pollfd` entries read from a process's memory.
const MAX_POLL_FDS: u64 = 4096;
/// The most descriptors of a `select` set read from a process's memory.
const MAX_SELECT_FDS: u64 = 65_536;
/// The most parents followed from the foreground job to the pane's shell.
const MAX_CHAIN: usize = 64;

/// What a foreground job is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Activity {
    /// It waits on the pane's terminal: at a prompt, or a question.
    WaitingForInput,
    /// It is on a CPU, or between system calls.
    Working,
    /// It waits on something other than the terminal: a timer, a child, a pipe.
    Sleeping,
    /// Nothing could be told.
    Unknown,
}

/// The pane whose terminal is looked at.
#[derive(Clone, Copy, Debug)]
pub struct Pane<'a> {
    /// The pid of the pane's first process, usually its shell.
    pub pid: u32,
    /// Its terminal's path, like `/dev/pts/3`.
    pub tty: &'a str,
}

/// Where a session is: the host and user its foreground job runs as.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Place {
    /// The host an `ssh` in the chain logs in to, or the container, pod or
    /// sandbox another carrier leads to.
    pub host: Option<String>,
    /// The carrier that leads there (`ssh`, `podman`...), if one does.
    pub carrier: Option<String>,
    /// The user on that host, or of a local shell run as another user.
    pub user: Option<String>,
    /// The command names from the pane's shell down to the foreground job.
    pub via: Vec<String>,
}

/// The foreground job of a pane, as measured once.
#[derive(Clone, Debug)]
pub struct Job {
    /// Its process group.
    pub pgid: i32,
    /// Its leader's command name.
    pub comm: String,
    /// Whether the pane's own shell (its first process's group) holds the
    /// terminal. A shell started inside it (`bash` typed at the prompt,
    /// `ssh`) is another group: see [`Job::shell_holds`].
    pub own_shell: bool,
    /// What it is doing.
    pub activity: Activity,
    /// Why it was judged so, in words.
    pub reason: String,
    /// The command name of the process that was judged: the one reading
    /// the terminal (`less` under `git log`), else the leader's.
    pub reader: String,
    /// Whether it waits for input with echo off and lines on: a password prompt.
    pub password: bool,
    /// Where it runs.
    pub place: Place,
}

/// Why a process blocked in `read(2)` on the terminal is waiting for input.
const READS_THE_TERMINAL: &str = "it reads the terminal";

impl Job {
    /// Whether it is blocked reading the terminal itself (`cat`, `read`, a
    /// script's `input()`), not waiting in `select` on it among other
    /// things (`ssh`, a REPL's line editor): a program blocked so, with
    /// nothing printed for a while, waits for someone to type.
    pub fn reads_terminal(&self) -> bool {
        let reads = READS_THE_TERMINAL.trim_start_matches("it ");
        self.activity == Activity::WaitingForInput && self.reason.ends_with(reads)
    }

    /// The program reading the terminal when it takes keys only and is
    /// not the job's leader: an editor or a pager the command started
    /// (`vi` under `git commit`, `less` under `git log`), whose keys are
    /// the ones that count.
    pub fn keys_reader(&self) -> Option<&str> {
        (self.reader != self.comm && KEYS_ONLY.contains(&self.reader.as_str())).then_some(self.reader.as_str())
    }

    /// Whether a shell holds the terminal: the pane's own, or one started
    /// inside it (a nested `bash`, the far shell of an `ssh` run as a
    /// command), by its leader's name.
    pub fn shell_holds(&self) -> bool {
        self.own_shell || is_shell_name(&self.comm)
    }

    /// As [`Job::shell_holds`], for a shell at a prompt: not one that runs
    /// a script or a command string (`bash build.sh` waiting at its
    /// `read`), told by its command line.
    pub fn shell_for_a_person(&self) -> bool {
        self.own_shell || (is_shell_name(&self.comm) && !parse::shell_runs_script(&argv(self.pgid)))
    }
}

/// Programs that read keys, not lines: pagers, editors and monitors
/// that draw on the whole screen. A command line typed into one is taken
/// key by key (`less` reads `s` as "save to a file"). Terminal
/// multiplexers are not among them: a line typed into a nested `tmux`
/// reaches the shell inside.
pub const KEYS_ONLY: &[&str] = &[
    "less", "more", "most", "pg", "vim", "vi", "nvim", "view", "vimdiff", "nano", "pico", "emacs", "mc", "top", "htop",
    "btop", "atop", "iotop", "iftop", "watch", "ncdu", "tig", "ranger", "nnn", "mutt", "neomutt", "nethack",
];

/// Pagers among [`KEYS_ONLY`]: they show another command's output.
pub const PAGERS: &[&str] = &["less", "more", "most", "pg"];

/// The command names of the shells this project knows: a pane without our
/// integration whose foreground program is one of them, reading the
/// terminal, is at its prompt. The one list, for the router and the
/// people's command line alike.
pub const SHELLS: [&str; 14] =
    ["bash", "zsh", "sh", "dash", "ash", "fish", "ksh", "mksh", "tcsh", "csh", "busybox", "nu", "elvish", "xonsh"];

/// A process's arguments (empty for a kernel thread, or once it is gone).
pub fn argv(pid: i32) -> Vec<String> {
    parse::cmdline(&fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default())
}

/// Whether `comm` names a shell (a login shell's leading `-` aside).
pub fn is_shell_name(comm: &str) -> bool {
    SHELLS.contains(&comm.trim_start_matches('-'))
}

impl Job {
    /// One line for a reply.
    pub fn line(&self) -> String {
        let name = &self.comm;
        let mut line = match (self.activity, self.password) {
            (Activity::WaitingForInput, true) => {
                format!("`{name}` waits at a password prompt: input is not echoed and never logged")
            }
            (Activity::WaitingForInput, false) => format!("`{name}` waits for input ({})", self.reason),
            (Activity::Working, _) => format!("`{name}` is working ({})", self.reason),
            (Activity::Sleeping, _) => format!("`{name}` is sleeping, not waiting for input ({})", self.reason),
            (Activity::Unknown, _) => format!("`{name}`: could not tell what it does ({})", self.reason),
        };
        if let Some(host) = &self.place.host {
            let via = self.place.carrier.as_deref().unwrap_or("ssh");
            line.push_str(&format!(" · on {host} via {via}"));
        }
        if let Some(user) = &self.place.user {
            line.push_str(&format!(" · as {user}"));
        }
        line
    }
}

/// Who holds the pane's terminal.
#[derive(Debug, PartialEq, Eq)]
pub enum Foreground {
    /// The pane's first process (its shell) itself.
    Shell,
    /// Another process group: a job started from the shell.
    Job {
        /// Its process group id.
        pgid: i32,
        /// Its leader's command name, from `/proc/PGID/comm`.
        comm: String,
    },
}

/// Reads the pane's foreground process group from its shell's `/proc/PID/stat`.
pub fn foreground(pane_pid: u32) -> Result<Foreground, String> {
    let stat = read_stat(&format!("/proc/{pane_pid}/stat"))?;
    if stat.tpgid <= 1 || stat.tpgid == stat.pgrp {
        return Ok(Foreground::Shell);
    }
    Ok(Foreground::Job { pgid: stat.tpgid, comm: comm(stat.tpgid) })
}

/// A process's command name from `/proc/PID/comm`, or `?` when it is gone.
pub fn comm(pid: i32) -> String {
    fs::read_to_string(format!("/proc/{pid}/comm")).map_or_else(|_| "?".to_string(), |c| c.trim_end().to_string())
}

/// Measures the pane's foreground job: its processes, what they wait on,
/// whether it is a password prompt, and where it runs.
pub fn job(pane: Pane<'_>) -> Result<Job, String> {
    let shell = read_stat(&format!("/proc/{}/stat", pane.pid))?;
    let pgid = if shell.tpgid > 0 { shell.tpgid } else { shell.pgrp };
    let members = group(pgid);
    let judged: Vec<(Activity, String, &Stat)> = members
        .iter()
        .map(|m| {
            let (a, r) = process_activity(m, pane.tty);
            (a, r, m)
        })
        .collect();
    let Some((activity, reason, who)) = judged.into_iter().min_by_key(|(a, _, _)| *a) else {
        return Err(format!("no process of group {pgid} is left"));
    };
    let leader = members.iter().find(|m| m.pid == pgid).unwrap_or(who);
    // A session made with a command runs it under `sh -c`: that shell is
    // no shell anyone types at, and the program it started is the job
    // (`python3 -q` at its `>>>`, not `sh` at a prompt).
    let wrapper = i64::from(leader.pid) == i64::from(pane.pid)
        && is_shell_name(&leader.comm)
        && parse::shell_runs_script(&argv(leader.pid));
    let leader = match wrapper {
        true => members.iter().find(|m| m.ppid == leader.pid).unwrap_or(leader),
        false => leader,
    };
    let reason = match who.pid == leader.pid {
        true => reason,
        false => format!("its `{}` {}", who.comm, reason.strip_prefix("it ").unwrap_or(&reason)),
    };
    let password = activity == Activity::WaitingForInput && echo_off(pane.tty) == Some(true);
    // The deepest process (one with no child in the group) says where the job runs.
    let leaf = members.iter().find(|m| !members.iter().any(|c| c.ppid == m.pid)).unwrap_or(who);
    let place = place(&shell, leaf);
    let reader = who.comm.clone();
    Ok(Job {
        pgid,
        comm: leader.comm.clone(),
        own_shell: pgid == shell.pgrp && !wrapper,
        activity,
        reason,
        reader,
        password,
        place,
    })
}

/// A small `/proc` file, read whole. `fs::read_to_string` asks the size
/// first (a `/proc` file says 0) and then reads 32 bytes, 32, 64… until the
/// end: eight calls for a `stat`. Reads of 1 KiB take it in two (the second
/// finds the end), a longer file in a few more.
pub(crate) fn read_proc(path: &str) -> std::io::Result<String> {
    let out = read_proc_until(path, None)?;
    String::from_utf8(out).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// As [`read_proc`], as bytes, stopping after the read that brings the
/// byte `stop` (when given): the first word of a `cmdline` in one call.
pub(crate) fn read_proc_until(path: &str, stop: Option<u8>) -> std::io::Result<Vec<u8>> {
    read_fd_until(fs::File::open(path)?, stop)
}

/// One process's `/proc` directory, held open: the files read through it
/// cost the kernel one lookup of the process, not one per file.
pub(crate) struct ProcDir(std::os::fd::OwnedFd);

impl ProcDir {
    /// The directory of process `pid`; `None` when it is gone.
    pub(crate) fn open(pid: u32) -> Option<ProcDir> {
        use nix::fcntl::OFlag;
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        nix::fcntl::open(format!("/proc/{pid}").as_str(), flags, nix::sys::stat::Mode::empty()).ok().map(ProcDir)
    }

    /// The file `name` in it, read as [`read_proc_until`] reads.
    pub(crate) fn read(&self, name: &str, stop: Option<u8>) -> Option<Vec<u8>> {
        use nix::fcntl::OFlag;
        let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC;
        let fd = nix::fcntl::openat(&self.0, name, flags, nix::sys::stat::Mode::empty()).ok()?;
        read_fd_until(fs::File::from(fd), stop).ok()
    }

    /// Where the link `name` in it points (`cwd`, `exe`).
    pub(crate) fn link(&self, name: &str) -> Option<String> {
        nix::fcntl::readlinkat(&self.0, name).ok().map(|p| p.to_string_lossy().into_owned())
    }

    /// Whether the main thread of process `pid` (this directory's) has no
    /// child, from its `children` file (see [`tree::childless`]).
    pub(crate) fn childless(&self, pid: u32) -> Option<bool> {
        let text = self.read(&format!("task/{pid}/children"), None)?;
        Some(parse::children(&String::from_utf8_lossy(&text)).is_empty())
    }
}

/// As [`read_proc_until`], from a file already open.
pub(crate) fn read_fd_until(mut file: fs::File, stop: Option<u8>) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = [0u8; 1024];
    let mut out = Vec::new();
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                if stop.is_some_and(|b| buf[..n].contains(&b)) {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

fn read_stat(path: &str) -> Result<Stat, String> {
    let text = read_proc(path).map_err(|e| format!("reading {path}: {e}"))?;
    parse::stat(&text).ok_or_else(|| format!("unreadable {path}: {text:?}"))
}

/// The processes of a process group, by a scan of `/proc/*/stat`.
fn group(pgid: i32) -> Vec<Stat> {
    let Ok(dir) = fs::read_dir("/proc") else { return Vec::new() };
    let mut out: Vec<Stat> = dir
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit())))
        .filter_map(|e| read_stat(&format!("{}/stat", e.path().display())).ok())
        .filter(|s| s.pgrp == pgid)
        .collect();
    out.sort_by_key(|s| s.pid);
    out
}

/// What one process does: the most telling of its threads.
fn process_activity(p: &Stat, tty: &str) -> (Activity, String) {
    let tids: Vec<i32> = fs::read_dir(format!("/proc/{}/task", p.pid))
        .map(|d| d.filter_map(Result::ok).filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    let tids = if tids.is_empty() { vec![p.pid] } else { tids };
    tids.into_iter()
        .map(|tid| thread_activity(p.pid, tid, tty))
        .min_by_key(|(a, _)| *a)
        .unwrap_or((Activity::Unknown, "it has no threads left".into()))
}

fn thread_activity(pid: i32, tid: i32, tty: &str) -> (Activity, String) {
    let base = format!("/proc/{pid}/task/{tid}");
    let state = read_stat(&format!("{base}/stat")).map_or('?', |s| s.state);
    match state {
        'R' => return (Activity::Working, "it is on a CPU".into()),
        'T' | 't' => return (Activity::Sleeping, "it is stopped".into()),
        'Z' | 'X' => return (Activity::Unknown, "it has exited".into()),
        _ => {}
    }
    let syscall = match parse::call(0) {
        Some(_) => fs::read_to_string(format!("{base}/syscall")).ok().and_then(|t| parse::syscall(&t)),
        None => None,
    };
    match syscall {
        Some(call) => by_syscall(pid, call, tty),
        None => by_wchan(pid, &base, tty),
    }
}

fn by_syscall(pid: i32, call: Syscall, tty: &str) -> (Activity, String) {
    let (nr, args) = match call {
        Syscall::Running => return (Activity::Working, "it is on a CPU".into()),
        Syscall::Outside => return (Activity::Working, "it is between system calls".into()),
        Syscall::In { nr, args } => (nr, args),
    };
    match parse::call(nr).unwrap_or(Call::Other) {
        Call::Read if fd_is_tty(pid, args[0], tty) => (Activity::WaitingForInput, READS_THE_TERMINAL.into()),
        Call::Read => (Activity::Sleeping, format!("it reads {}, not the terminal", fd_name(pid, args[0]))),
        Call::Write if fd_is_tty(pid, args[0], tty) => {
            (Activity::Working, "it writes to the terminal, faster than the terminal takes it".into())
        }
        Call::Write => (Activity::Sleeping, format!("it waits to write to {}", fd_name(pid, args[0]))),
        kind @ (Call::Poll | Call::Select | Call::Epoll) => watched(pid, kind, args, tty),
        Call::Network => (Activity::Working, "it waits on the network (connect, accept or receive)".into()),
        Call::Child => (Activity::Sleeping, "it waits for a child process".into()),
        Call::Timer => (Activity::Sleeping, "it sleeps on a timer".into()),
        Call::Futex => (Activity::Sleeping, "it waits on another thread or a lock".into()),
        Call::Signal => (Activity::Sleeping, "it waits for a signal".into()),
        Call::Other => (Activity::Sleeping, format!("it is blocked in system call {nr}")),
    }
}

/// A wait on several descriptors: for input when the terminal is among
/// those it waits to read, else working on the others.
fn watched(pid: i32, kind: Call, args: [u64; 6], tty: &str) -> (Activity, String) {
    let (name, fds) = match kind {
        Call::Poll => ("poll", read_mem(pid, args[0], args[1].min(MAX_POLL_FDS) * 8).map(|b| parse::poll_fds(&b))),
        Call::Select if args[1] == 0 => ("select", Ok(Vec::new())),
        Call::Select => {
            let nfds = args[0].min(MAX_SELECT_FDS);
            ("select", read_mem(pid, args[1], nfds.div_ceil(64) * 8).map(|b| parse::fd_set(&b, nfds)))
        }
        _ => {
            let info = fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", args[0]));
            ("epoll", info.map(|t| parse::epoll_fds(&t)).map_err(|e| e.to_string()))
        }
    };
    let fds = match fds {
        Ok(fds) => fds,
        Err(e) => {
            let what = format!("it waits in {name}, on descriptors that could not be read ({e})");
            return guess_from_stdin(pid, tty, &what);
        }
    };
    if fds.iter().any(|fd| fd_is_tty(pid, *fd, tty)) {
        return (Activity::WaitingForInput, format!("it waits in {name} on the terminal"));
    }
    let names: Vec<String> = fds.iter().take(4).map(|fd| fd_name(pid, *fd)).collect();
    let on = match names.is_empty() {
        true => "nothing to read".to_string(),
        false => names.join(", ") + if fds.len() > 4 { ", ..." } else { "" },
    };
    (Activity::Working, format!("it waits in {name} on {on}, not the terminal"))
}

/// Reads `len` bytes of `pid`'s memory at `addr` (needs ptrace access,
/// as `/proc/PID/syscall` does).
fn read_mem(pid: i32, addr: u64, len: u64) -> Result<Vec<u8>, String> {
    let file = fs::File::open(format!("/proc/{pid}/mem")).map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; usize::try_from(len).map_err(|e| e.to_string())?];
    file.read_exact_at(&mut buf, addr).map_err(|e| e.to_string())?;
    Ok(buf)
}

/// A descriptor and what it is open on, for a reason: `descriptor 5 (pipe)`.
fn fd_name(pid: i32, fd: u64) -> String {
    match fd_link(pid, fd) {
        Some(link) => match parse::fd_label(&link) {
            label if label.is_empty() => format!("descriptor {fd}"),
            label => format!("descriptor {fd} ({label})"),
        },
        None => format!("descriptor {fd}"),
    }
}

/// When what a wait watches is not known: waiting for input if standard
/// input is the terminal, and the reason says what was seen.
fn guess_from_stdin(pid: i32, tty: &str, what: &str) -> (Activity, String) {
    match fd_is_tty(pid, 0, tty) {
        true => (Activity::WaitingForInput, format!("{what}, and its input is the terminal")),
        false => (Activity::Sleeping, format!("{what}, and its input is not the terminal")),
    }
}

fn by_wchan(pid: i32, base: &str, tty: &str) -> (Activity, String) {
    const NOTE: &str = "judged by its wait channel; /proc/PID/syscall is not readable";
    let wchan = fs::read_to_string(format!("{base}/wchan")).unwrap_or_default();
    let w = wchan.trim();
    match parse::wchan_kind(w) {
        None => (Activity::Unknown, "no wait channel is visible".into()),
        // wait_woken serves other waits too: the terminal must be its input.
        Some(WaitKind::Read) => guess_from_stdin(pid, tty, &format!("it sleeps in {w}, a terminal read; {NOTE}")),
        Some(WaitKind::Descriptors) => guess_from_stdin(pid, tty, &format!("it sleeps in {w}; {NOTE}")),
        Some(WaitKind::Child) => (Activity::Sleeping, format!("it waits for a child process; {NOTE}")),
        Some(WaitKind::Timer) => (Activity::Sleeping, format!("it sleeps on a timer; {NOTE}")),
        Some(WaitKind::Other) => (Activity::Sleeping, format!("it sleeps in {w}; {NOTE}")),
    }
}

/// What `/proc/PID/fd/FD` links to (see [`parse::fd_label`]).
fn fd_link(pid: i32, fd: u64) -> Option<String> {
    fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok().map(|p| p.display().to_string())
}

fn fd_is_tty(pid: i32, fd: u64, tty: &str) -> bool {
    fd_link(pid, fd).is_some_and(|link| parse::fd_is(&link, tty))
}

/// Whether the terminal reads lines with echo off (`ECHO` clear, `ICANON`
/// set), as password prompts do; a line editor clears both.
fn echo_off(tty: &str) -> Option<bool> {
    let flags = local_flags(tty)?;
    Some(!flags.contains(LocalFlags::ECHO) && flags.contains(LocalFlags::ICANON))
}

/// Whether the terminal is in a line editor's mode (`ECHO` and `ICANON`
/// both clear), as readline and zle set it at a shell's prompt; `read`
/// and most programs reading lines leave the terminal's own line mode on.
pub fn line_editing(tty: &str) -> Option<bool> {
    let flags = local_flags(tty)?;
    Some(!flags.contains(LocalFlags::ECHO) && !flags.contains(LocalFlags::ICANON))
}

/// The terminal's local mode flags. The terminal is opened without
/// becoming a controlling terminal and is never read.
fn local_flags(tty: &str) -> Option<LocalFlags> {
    let file =
        fs::OpenOptions::new().read(true).custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY).open(tty).ok()?;
    Some(tcgetattr(&file).ok()?.local_flags)
}

/// The chain from the pane's shell to `job`, with where a carrier in it
/// leads (an `ssh` host, a container), or another user.
fn place(shell: &Stat, job: &Stat) -> Place {
    let chain = chain(shell.pid, job);
    let mut place = Place { via: chain.iter().rev().map(|s| s.comm.clone()).collect(), ..Place::default() };
    // The innermost carrier is where the job's terminal leads.
    let carried = chain.iter().filter(|s| parse::CARRIERS.contains(&s.comm.as_str())).find_map(|s| {
        parse::carrier(&parse::cmdline(&fs::read(format!("/proc/{}/cmdline", s.pid)).unwrap_or_default()))
    });
    if let Some(c) = carried {
        place.host = Some(c.target);
        place.user = c.user;
        place.carrier = Some(c.program);
        return place;
    }
    place.user = other_user(shell.pid, chain.first().map_or(job.pid, |s| s.pid));
    place
}

/// From `job` up through parents to the pane's shell, the job first.
fn chain(shell_pid: i32, job: &Stat) -> Vec<Stat> {
    let mut out = vec![job.clone()];
    while out.len() < MAX_CHAIN {
        let last = &out[out.len() - 1];
        if last.pid == shell_pid || last.ppid <= 1 {
            break;
        }
        match read_stat(&format!("/proc/{}/stat", last.ppid)) {
            Ok(parent) => out.push(parent),
            Err(_) => break,
        }
    }
    out
}

/// The name of `pid`'s user when it differs from the pane shell's.
fn other_user(shell_pid: i32, pid: i32) -> Option<String> {
    let uid = |p: i32| fs::read_to_string(format!("/proc/{p}/status")).ok().and_then(|s| parse::real_uid(&s));
    let (mine, theirs) = (uid(shell_pid)?, uid(pid)?);
    if mine == theirs {
        return None;
    }
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(theirs)).ok().flatten();
    Some(user.map_or_else(|| format!("uid {theirs}"), |u| u.name))
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[test]
    fn a_proc_file_is_read_whole_and_a_long_file_to_its_end() {
        let stat = read_proc(&format!("/proc/{}/stat", std::process::id())).expect("own stat");
        assert!(parse::stat(&stat).is_some_and(|s| s.pid == std::process::id() as i32), "{stat}");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("long");
        let text: String = (0..500).map(|i| format!("line {i}\n")).collect();
        fs::write(&path, &text).expect("write");
        assert_eq!(read_proc(path.to_str().expect("utf-8 path")).expect("read"), text);
        assert!(read_proc("/proc/0/stat").is_err(), "no such process");
    }

    fn job(activity: Activity, password: bool, place: Place) -> Job {
        let reason = "why".to_string();
        Job { pgid: 7, comm: "make".into(), own_shell: false, activity, reason, reader: "make".into(), password, place }
    }

    #[rstest]
    #[case::input(Activity::WaitingForInput, false, "`make` waits for input (why)")]
    #[case::password(
        Activity::WaitingForInput,
        true,
        "`make` waits at a password prompt: input is not echoed and never logged"
    )]
    #[case::working(Activity::Working, false, "`make` is working (why)")]
    #[case::sleeping(Activity::Sleeping, false, "`make` is sleeping, not waiting for input (why)")]
    #[case::unknown(Activity::Unknown, false, "`make`: could not tell what it does (why)")]
    fn one_line_per_activity(#[case] activity: Activity, #[case] password: bool, #[case] want: &str) {
        assert_eq!(job(activity, password, Place::default()).line(), want);
    }

    #[test]
    fn the_line_names_where_the_job_runs() {
        let place = Place {
            host: Some("box".into()),
            user: Some("me".into()),
            carrier: Some("ssh".into()),
            via: vec!["bash".into(), "ssh".into()],
        };
        assert_eq!(job(Activity::Working, false, place).line(), "`make` is working (why) · on box via ssh · as me");
    }

    #[test]
    fn waiting_for_input_outranks_working_and_sleeping() {
        let mut all = [Activity::Unknown, Activity::Sleeping, Activity::WaitingForInput, Activity::Working];
        all.sort();
        assert_eq!(all[0], Activity::WaitingForInput);
        assert_eq!(all[1], Activity::Working);
    }

    #[test]
    fn this_process_is_measured_without_a_terminal() {
        // The test runner has no pane: its own group is measured, and nothing
        // claims to wait on a terminal path that does not exist.
        let me = std::process::id();
        if let Ok(j) = super::job(Pane { pid: me, tty: "/nonexistent/tty" }) {
            assert!(!j.password);
            assert_ne!(j.activity, Activity::WaitingForInput, "{j:?}");
        }
    }
}
