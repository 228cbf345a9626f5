//! Pure readers of `/proc` text: no file is opened here, so every rule is
//! tested on captured text.
//!
//! `stat`, `syscall` and the targets of descriptor links are read with
//! `procfs-core`'s parsers, handed the text [`super`] has already read:
//! its types are the `procfs` crate's without the file access, so they
//! cost no system call and no start-up work. Three wrinkles are handled
//! here: procfs-core cuts a `stat` line at its parentheses without
//! checking they are where the kernel puts them (text of another shape
//! would panic there, so [`stat`] checks the shape first); it expects six
//! arguments after every `syscall` number, while the kernel writes only
//! `-1 sp pc` for a thread blocked outside a system call (that form is
//! read here); and its `Status` insists on some thirty fields whose set
//! varies with the kernel, so the one number wanted from `status` (the
//! real uid) is read here too.
//!
//! What procfs-core has no parser for is read by hand: an epoll
//! descriptor's `fdinfo` (the `tfd:` lines), the wait channel (`wchan`),
//! `cmdline`, the system call numbers of each architecture, and the
//! `pollfd` arrays and `fd_set` bitmaps read from a process's memory.

use procfs_core::FromRead;
use procfs_core::process::FDTarget;

/// The fields of `/proc/PID/stat` this crate uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stat {
    /// The process id.
    pub pid: i32,
    /// Its command name (at most 15 bytes; may hold spaces and parentheses).
    pub comm: String,
    /// Its state letter: `R` running, `S` sleeping, `D` in the disk, `T` stopped…
    pub state: char,
    /// Its parent's pid.
    pub ppid: i32,
    /// Its process group.
    pub pgrp: i32,
    /// The foreground process group of its controlling terminal (-1: none).
    pub tpgid: i32,
    /// How many threads it has (each may have started children).
    pub threads: i64,
}

/// Reads `pid (comm) state ppid pgrp session tty_nr tpgid …`. The command
/// name may hold spaces and `)`, so it ends at the last `)`.
pub fn stat(text: &str) -> Option<Stat> {
    // procfs-core slices at `" ("` before the first `(` and `") "` after
    // the last `)` unchecked: both must be there.
    let line = text.trim();
    let (open, close) = (line.find('(')?, line.rfind(')')?);
    let shaped =
        open > 0 && close > open && line.as_bytes()[open - 1] == b' ' && line.as_bytes().get(close + 1) == Some(&b' ');
    if !shaped {
        return None;
    }
    let s = procfs_core::process::Stat::from_read(line.as_bytes()).ok()?;
    Some(Stat {
        pid: s.pid,
        comm: s.comm,
        state: s.state,
        ppid: s.ppid,
        pgrp: s.pgrp,
        tpgid: s.tpgid,
        threads: s.num_threads,
    })
}

/// The pids of `/proc/PID/task/TID/children` (`"41 42 "`).
pub fn children(text: &str) -> Vec<i32> {
    text.split_ascii_whitespace().filter_map(|p| p.parse().ok()).collect()
}

/// A `pid_max` at or below which pids may wrap around within a session's
/// life (the old default, 32768, and its double).
pub const SMALL_PID_MAX: i32 = 65_536;

/// The last pid handed out, the last field of `/proc/loadavg`
/// (`0.20 0.18 0.12 1/80 11206`).
pub fn last_pid(loadavg: &str) -> Option<i32> {
    loadavg.split_ascii_whitespace().nth(4)?.parse().ok()
}

/// A command line cut short for a listing: the program's name without its
/// directory, and the arguments after it with any path to a script or
/// binary cut to its last part (`node /app/node_modules/.bin/vite` is
/// `node vite`), at most `max` characters, an ellipsis marking a cut.
pub fn short_command(argv: &[String], max: usize) -> String {
    let base = |a: &str| -> String {
        match a.starts_with('-') || !a.contains('/') || a.ends_with('/') {
            true => a.to_string(),
            false => a.rsplit('/').next().unwrap_or(a).to_string(),
        }
    };
    let words: Vec<String> = argv.iter().map(|a| base(a)).collect();
    let line = words.join(" ");
    match line.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

/// The real uid from `/proc/PID/status` (`Uid:\treal\teffective\tsaved\tfs`).
pub fn real_uid(status: &str) -> Option<u32> {
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// What `/proc/PID/syscall` says about a thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Syscall {
    /// It is on a CPU (`running`).
    Running,
    /// It is blocked, but not inside a system call (`-1 sp pc`).
    Outside,
    /// It is blocked in system call `nr` with these arguments.
    In {
        /// The call's number (architecture-specific).
        nr: u64,
        /// Its six arguments (a descriptor for `read`, a count for `select`,
        /// a pointer for `poll`...).
        args: [u64; 6],
    },
}

/// Reads `nr arg0 … arg5 sp pc` (numbers in hex after the first), `-1 sp pc`
/// or `running`.
pub fn syscall(text: &str) -> Option<Syscall> {
    use procfs_core::process::Syscall as Read;
    match Read::from_read(text.as_bytes()) {
        Ok(Read::Running) => Some(Syscall::Running),
        Ok(Read::Blocked { syscall_number, argument_registers, .. }) => match u64::try_from(syscall_number) {
            Ok(nr) => Some(Syscall::In { nr, args: argument_registers }),
            Err(_) => Some(Syscall::Outside),
        },
        // The short form procfs-core does not take (see the module doc).
        Err(_) if text.split_whitespace().next() == Some("-1") => Some(Syscall::Outside),
        _ => None,
    }
}

/// A system call a thread can wait in, by what it waits for, whatever the
/// architecture's number for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// `read`, `pread64`, `readv`, `preadv`: one descriptor, the first argument.
    Read,
    /// `write`, `pwrite64`, `writev`, `pwritev`: one descriptor, the first
    /// argument (blocked while its reader is behind).
    Write,
    /// `poll`, `ppoll`: an array of `struct pollfd` at the first argument,
    /// its length the second.
    Poll,
    /// `select`, `pselect6`: a count, then the read set's address.
    Select,
    /// `epoll_wait`, `epoll_pwait`, `epoll_pwait2`: an epoll descriptor.
    Epoll,
    /// `connect`, `accept`, `accept4`, `recvfrom`, `recvmsg`: the network.
    Network,
    /// `wait4`, `waitid`.
    Child,
    /// `nanosleep`, `clock_nanosleep`.
    Timer,
    /// `futex`: another thread, or a lock.
    Futex,
    /// `pause`, `rt_sigsuspend`, `rt_sigtimedwait`: a signal.
    Signal,
    /// Anything else.
    Other,
}

/// The x86_64 numbers.
pub fn call_x86_64(nr: u64) -> Call {
    match nr {
        0 | 17 | 19 | 295 => Call::Read,
        1 | 18 | 20 | 296 => Call::Write,
        7 | 271 => Call::Poll,
        23 | 270 => Call::Select,
        232 | 281 | 441 => Call::Epoll,
        42 | 43 | 45 | 47 | 288 => Call::Network,
        61 | 247 => Call::Child,
        35 | 230 => Call::Timer,
        202 => Call::Futex,
        34 | 128 | 130 => Call::Signal,
        _ => Call::Other,
    }
}

/// The aarch64 numbers (the generic table: no `poll`, `select` or
/// `epoll_wait`, only their newer forms).
pub fn call_aarch64(nr: u64) -> Call {
    match nr {
        63 | 65 | 67 | 69 => Call::Read,
        64 | 66 | 68 | 70 => Call::Write,
        73 => Call::Poll,
        72 => Call::Select,
        22 | 441 => Call::Epoll,
        202 | 203 | 207 | 212 | 242 => Call::Network,
        95 | 260 => Call::Child,
        101 | 115 => Call::Timer,
        98 => Call::Futex,
        133 | 137 => Call::Signal,
        _ => Call::Other,
    }
}

/// The call `nr` is on this machine; `None` where the numbers are not
/// known (architectures other than x86_64 and aarch64).
pub fn call(nr: u64) -> Option<Call> {
    if cfg!(target_arch = "x86_64") {
        Some(call_x86_64(nr))
    } else if cfg!(target_arch = "aarch64") {
        Some(call_aarch64(nr))
    } else {
        None
    }
}

/// `POLLIN` and `POLLPRI`: a `pollfd` that waits for something to read.
const POLL_READ: i16 = 0x001 | 0x002;

/// The descriptors an array of `struct pollfd` (`int fd; short events;
/// short revents`, native endian) waits to read from; negative ones are
/// ignored, as `poll` does.
pub fn poll_fds(raw: &[u8]) -> Vec<u64> {
    raw.chunks_exact(8)
        .filter_map(|p| {
            let fd = i32::from_ne_bytes([p[0], p[1], p[2], p[3]]);
            let events = i16::from_ne_bytes([p[4], p[5]]);
            (fd >= 0 && events & POLL_READ != 0).then_some(fd as u64)
        })
        .collect()
}

/// The descriptors below `nfds` set in an `fd_set` bitmap (native-endian
/// words of 64 bits, as on x86_64 and aarch64).
pub fn fd_set(raw: &[u8], nfds: u64) -> Vec<u64> {
    let mut out = Vec::new();
    for (w, word) in raw.chunks_exact(8).enumerate() {
        let bits = u64::from_ne_bytes(word.try_into().unwrap_or([0; 8]));
        for b in 0..64 {
            let fd = w as u64 * 64 + b;
            if fd < nfds && bits & (1 << b) != 0 {
                out.push(fd);
            }
        }
    }
    out
}

/// The descriptors an epoll instance watches, from its
/// `/proc/PID/fdinfo/FD` (`tfd:        5 events:       19 data: ...`).
pub fn epoll_fds(fdinfo: &str) -> Vec<u64> {
    fdinfo
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("tfd:"))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .collect()
}

/// What a descriptor is open on, as a reason names it, from its
/// `/proc/PID/fd/N` link: a path as it is, else the kind of object
/// (`pipe`, `socket`).
pub fn fd_label(link: &str) -> String {
    match link.parse::<FDTarget>() {
        Ok(FDTarget::Path(path)) => path.display().to_string(),
        Ok(FDTarget::MemFD(_)) => link.to_string(),
        Ok(FDTarget::Socket(_)) => "socket".into(),
        Ok(FDTarget::Net(_)) => "net".into(),
        Ok(FDTarget::Pipe(_)) => "pipe".into(),
        Ok(FDTarget::AnonInode(kind)) => kind.trim_matches(['[', ']']).to_string(),
        Ok(FDTarget::Other(kind, _) | FDTarget::Unknown(kind, _)) => kind,
        Err(_) => link.split(':').next().unwrap_or(link).to_string(),
    }
}

/// Whether a descriptor's link names the terminal at `path`: that file,
/// or `/dev/tty`, the process's controlling terminal, which is the pane's
/// for a process of its foreground job (ssh, sudo, ssh-keygen and git
/// open it to ask for a password).
pub fn fd_is(link: &str, path: &str) -> bool {
    matches!(link.parse::<FDTarget>(), Ok(FDTarget::Path(p)) if p.as_os_str() == path || p.as_os_str() == "/dev/tty")
}

/// What kind of wait a system call (x86_64 numbers) or wait channel is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitKind {
    /// Reading one descriptor (`read`, `n_tty_read`).
    Read,
    /// Waiting on several descriptors (`select`, `poll`, `epoll`).
    Descriptors,
    /// Waiting for a child to change state.
    Child,
    /// Sleeping on a timer.
    Timer,
    /// Something else: a lock, the disk, the network, a pipe.
    Other,
}

/// The kernel function a thread sleeps in, from `/proc/PID/wchan`.
pub fn wchan_kind(wchan: &str) -> Option<WaitKind> {
    Some(match wchan.trim() {
        "" | "0" => return None,
        "n_tty_read" | "wait_woken" | "tty_read" => WaitKind::Read,
        "do_select" | "core_sys_select" | "do_sys_poll" | "do_poll" | "ep_poll" => WaitKind::Descriptors,
        "do_wait" | "kernel_wait4" => WaitKind::Child,
        "hrtimer_nanosleep" | "do_nanosleep" | "common_nsleep" => WaitKind::Timer,
        _ => WaitKind::Other,
    })
}

/// Splits `/proc/PID/cmdline` (NUL-separated, NUL-ended) into arguments.
pub fn cmdline(raw: &[u8]) -> Vec<String> {
    raw.split(|&b| b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect()
}

/// Whether a shell's command line (`argv`, its name first) runs a script
/// or a command string (`bash build.sh`, `sh -c '…'`) rather than a shell
/// for a person: an operand after the options, or `-c`. `-i` makes it
/// interactive whatever else is given, and `-s` (commands from standard
/// input, a terminal here) leaves the operands to the shell's positional
/// parameters. `-o`/`+o`/`-O`/`+O` and `--rcfile`/`--init-file` take the
/// next argument.
pub fn shell_runs_script(argv: &[String]) -> bool {
    let (mut command, mut interactive, mut stdin) = (false, false, false);
    let mut operand = false;
    let mut args = argv.iter().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--" | "-" => {
                operand = args.next().is_some();
                break;
            }
            "--rcfile" | "--init-file" => {
                args.next();
            }
            long if long.starts_with("--") => {}
            flags if flags.len() > 1 && (flags.starts_with('-') || flags.starts_with('+')) => {
                for flag in flags.chars().skip(1) {
                    match flag {
                        'c' => command = true,
                        'i' => interactive = true,
                        's' => stdin = true,
                        'o' | 'O' => {
                            args.next();
                        }
                        _ => {}
                    }
                }
            }
            _ => {
                operand = true;
                break;
            }
        }
    }
    !interactive && (command || (operand && !stdin))
}

/// `ssh` options that take a value, given separately or joined (`-p22`).
pub const SSH_VALUED: &str = "bcDEeFIiJLlmOopQRSWw";

/// The host and user of an `ssh` command line: the first argument that is
/// not an option or an option's value; `user@host` and `-l user` name the
/// user. `None` when there is no destination.
pub fn ssh_target(argv: &[String]) -> Option<(String, Option<String>)> {
    let mut login = None;
    let mut args = argv.iter().skip(1);
    while let Some(a) = args.next() {
        if a == "--" {
            return args.next().map(|d| split_destination(d, login));
        }
        let Some(flags) = a.strip_prefix('-').filter(|f| !f.is_empty()) else {
            return Some(split_destination(a, login));
        };
        // Flags may be grouped (`-tt`, `-vp22`); the first valued one takes the rest.
        if let Some(at) = flags.find(|c| SSH_VALUED.contains(c)) {
            let joined = &flags[at + 1..];
            let value = if joined.is_empty() { args.next().cloned() } else { Some(joined.to_string()) };
            if flags[at..].starts_with('l') {
                login = value;
            }
        }
    }
    None
}

/// A program whose own process says nothing about the far end it carries
/// a terminal to: where it leads, read from its command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Carrier {
    /// The program: `ssh`, `podman`, `docker`, `nerdctl`, `kubectl` or `openshell`.
    pub program: String,
    /// Where it leads: the host, container, image, pod or sandbox.
    pub target: String,
    /// The user there, when the command line names one.
    pub user: Option<String>,
}

/// The command names [`carrier`] reads the command line of.
pub const CARRIERS: [&str; 6] = ["ssh", "podman", "docker", "nerdctl", "kubectl", "openshell"];

/// Options of the container tools that take a value as the next word
/// (global ones and those of `exec`, `run`, `attach`); any other option is
/// taken for a flag. A value joined with `=` needs no entry.
const CONTAINER_VALUED: &[&str] = &[
    "-c",
    "-H",
    "-l",
    "-n",
    "-s",
    "-e",
    "-u",
    "-w",
    "-v",
    "-p",
    "-h",
    "-a",
    "-f",
    "--context",
    "--host",
    "--config",
    "--log-level",
    "--url",
    "--connection",
    "--namespace",
    "--address",
    "--root",
    "--runroot",
    "--kubeconfig",
    "--cluster",
    "--server",
    "--env",
    "--env-file",
    "--user",
    "--workdir",
    "--detach-keys",
    "--name",
    "--volume",
    "--publish",
    "--network",
    "--net",
    "--hostname",
    "--entrypoint",
    "--mount",
    "--label",
    "--platform",
    "--pull",
    "--container",
    "--filename",
    "--pod-running-timeout",
    "--image",
    "--preserve-fds",
    "--cidfile",
    "--device",
    "--cap-add",
    "--cap-drop",
    "--security-opt",
    "--tmpfs",
    "--add-host",
    "--dns",
    "--memory",
    "--cpus",
    "--group-add",
    "--ulimit",
    "--userns",
    "--pod",
];

/// Where a carrier's command line leads, or `None` when it is not one that
/// holds a terminal on something else: `ssh HOST`, `podman|docker|nerdctl
/// exec|run -it ...`, `... attach NAME`, `kubectl exec|attach|run -it ...`,
/// `openshell sandbox exec|connect ...`.
pub fn carrier(argv: &[String]) -> Option<Carrier> {
    let program = argv.first()?.rsplit('/').next()?.to_string();
    match program.as_str() {
        "ssh" => ssh_target(argv).map(|(target, user)| Carrier { program, target, user }),
        "podman" | "docker" | "nerdctl" | "kubectl" => container(program, &argv[1..]),
        "openshell" => {
            let words = split_options(&argv[1..]);
            let sub: Vec<&str> = words.positional.iter().map(String::as_str).take(2).collect();
            if sub != ["sandbox", "exec"] && sub != ["sandbox", "connect"] {
                return None;
            }
            let target = words.value(&["-n", "--name"]).or_else(|| words.positional.get(2).cloned())?;
            Some(Carrier { program, target, user: None })
        }
        _ => None,
    }
}

/// `exec`, `run` or `attach` of a container tool, with a terminal.
fn container(program: String, args: &[String]) -> Option<Carrier> {
    let words = split_options(args);
    let mut positional = words.positional.iter().map(String::as_str);
    let mut sub = positional.next()?;
    if sub == "container" {
        sub = positional.next()?;
    }
    let tty = words
        .flags
        .iter()
        .any(|f| f == "--tty" || f == "--tty=true" || (f.starts_with('-') && !f.starts_with("--") && f.contains('t')));
    match sub {
        "exec" | "run" if tty => {}
        "attach" => {}
        _ => return None,
    }
    let named = if sub == "run" { words.value(&["--name"]) } else { None };
    let target = named.or_else(|| positional.next().map(str::to_string))?;
    let user = words.value(&["-u", "--user"]).filter(|_| program != "kubectl");
    Some(Carrier { program, target, user })
}

/// A command line split into options (with their values) and the other
/// words, up to a `--`.
struct Split {
    flags: Vec<String>,
    values: Vec<(String, String)>,
    positional: Vec<String>,
}

impl Split {
    fn value(&self, names: &[&str]) -> Option<String> {
        self.values.iter().find(|(k, _)| names.contains(&k.as_str())).map(|(_, v)| v.clone())
    }
}

fn split_options(args: &[String]) -> Split {
    let mut out = Split { flags: Vec::new(), values: Vec::new(), positional: Vec::new() };
    let mut words = args.iter();
    while let Some(w) = words.next() {
        if w == "--" {
            break;
        }
        if !w.starts_with('-') || w == "-" {
            out.positional.push(w.clone());
            continue;
        }
        if let Some((k, v)) = w.split_once('=') {
            out.values.push((k.to_string(), v.to_string()));
            out.flags.push(w.clone());
        } else if CONTAINER_VALUED.contains(&w.as_str()) {
            out.values.push((w.clone(), words.next().cloned().unwrap_or_default()));
        } else {
            out.flags.push(w.clone());
        }
    }
    out
}

/// `ssh://user@host:port`, `user@host` or `host`, with `-l`'s user as a fallback.
fn split_destination(dest: &str, login: Option<String>) -> (String, Option<String>) {
    let dest = dest.strip_prefix("ssh://").unwrap_or(dest);
    let (user, host) = match dest.rsplit_once('@') {
        Some((u, h)) => (Some(u.to_string()), h),
        None => (login, dest),
    };
    let host = host.split(':').next().unwrap_or(host);
    (host.to_string(), user)
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    /// Captured from a bash at its prompt, from `python3 -q` and a name with `) (` in it
    /// (a busy bash copied to that name).
    const BASH: &str = "4242 (bash) S 4200 4242 4242 34816 4242 4194560 1082 0 0 0 1 0 0 0 20 0 1 0 1234 8589312 1280 18446744073709551615 1 1 0 0 0 0 65536 3686404 1266761467 0 0 0 17 1 0 0 0 0 0";
    const ODD: &str = "13463 (a) b (c) R 13460 13460 9601 0 -1 4194304 197 0 0 0 6 0 0 0 20 0 1 0 246096 4464640 739 18446744073709551615 93869868961792 93869869751197 140730993081248 0 0 0 0 6 65536 0 0 0 17 0 0 0 0 0 0 93869869984496 93869870032740 93869968146432 140730993085138 140730993085174 140730993085174 140730993086443 0\n";

    #[test]
    fn stat_of_a_shell() {
        let s = stat(BASH).expect("parsed");
        assert_eq!((s.pid, s.comm.as_str(), s.state, s.ppid, s.pgrp, s.tpgid), (4242, "bash", 'S', 4200, 4242, 4242));
    }

    #[test]
    fn names_with_parentheses_end_at_the_last() {
        let s = stat(ODD).expect("parsed");
        assert_eq!((s.comm.as_str(), s.state, s.tpgid), ("a) b (c", 'R', -1));
    }

    #[rstest]
    #[case::short("1 (x) S 0")]
    #[case::garbage("garbage")]
    #[case::no_pid("(x) S 1 2 3 4 5 6")]
    fn bad_stat_lines(#[case] text: &str) {
        assert_eq!(stat(text), None);
    }

    /// Command names as odd as a process can choose (`prctl`, a file
    /// name), in an otherwise real line, and lines cut where procfs-core
    /// would slice them without looking.
    #[rstest]
    #[case::space("a b", Some("a b"))]
    #[case::parens_only("()", Some("()"))]
    #[case::close_then_space(") ", Some(") "))]
    #[case::open_paren_first("(x", Some("(x"))]
    #[case::empty("", Some(""))]
    #[case::multibyte("ü)(ü", Some("ü)(ü"))]
    fn command_names_of_any_shape(#[case] comm: &str, #[case] want: Option<&str>) {
        let rest = BASH.split_once(") ").map_or("", |(_, rest)| rest);
        let line = format!("4242 ({comm}) {rest}");
        assert_eq!(stat(&line).map(|s| s.comm).as_deref(), want, "{line}");
    }

    #[rstest]
    #[case::nothing_after_the_name("1 (x)")]
    #[case::no_space_after_the_name("1 (x)S 1 2")]
    #[case::no_space_before_the_name("1(x) S 1 2")]
    #[case::closed_before_opened("1 )x( S 1 2")]
    #[case::only_an_open("1 (x S 1 2")]
    #[case::multibyte_before_the_name("ü(x) S 1 2")]
    fn misshapen_stat_lines_are_refused_not_panicked_on(#[case] text: &str) {
        assert_eq!(stat(text), None);
    }

    #[test]
    fn the_last_pid_ends_loadavg() {
        assert_eq!(last_pid("0.20 0.18 0.12 1/80 11206\n"), Some(11206));
        assert_eq!(last_pid("0.20 0.18"), None);
    }

    #[test]
    fn children_files_are_pids_apart() {
        assert_eq!(children("41 42 "), [41, 42]);
        assert!(children("").is_empty());
    }

    #[rstest]
    #[case::vite(&["node", "/home/u/app/node_modules/.bin/vite"], "node vite")]
    #[case::python(&["/usr/bin/python3", "-m", "http.server", "8123"], "python3 -m http.server 8123")]
    #[case::option_with_path(&["nc", "-U", "/tmp/x.sock"], "nc -U x.sock")]
    #[case::flag_holding_a_path(&["app", "--config=/etc/app.toml"], "app --config=/etc/app.toml")]
    #[case::cut(&["x", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"], "x aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa…")]
    fn command_lines_shortened(#[case] argv: &[&str], #[case] want: &str) {
        let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
        assert_eq!(short_command(&argv, 40), want);
    }

    #[test]
    fn uid_is_the_real_one() {
        let status =
            "Name:\tbash\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t1000\t0\t0\t0\nGid:\t1000\t1000\t1000\t1000\n";
        assert_eq!(real_uid(status), Some(1000));
        assert_eq!(real_uid("Name:\tx\n"), None);
    }

    #[rstest]
    #[case::read_stdin("0 0x0 0x7ffd2a0b7a37 0x1 0x0 0x0 0x0 0x7ffd2a0b7a18 0x7f3c1d514992", Syscall::In { nr: 0, args: [0, 0x7ffd2a0b7a37, 1, 0, 0, 0] })]
    #[case::pselect("270 0x1 0x7ffc5e0a3f10 0x0 0x0 0x0 0x0 0x7ffc5e0a3ec8 0x7f8a2a51c88d", Syscall::In { nr: 270, args: [1, 0x7ffc5e0a3f10, 0, 0, 0, 0] })]
    #[case::read_fd_ten("0 0xa 0x55d0 0x2000 0x0 0x0 0x0 0x7ffe 0x7f01", Syscall::In { nr: 0, args: [10, 0x55d0, 0x2000, 0, 0, 0] })]
    #[case::outside("-1 0x7ffd2a0b7a18 0x7f3c1d514992", Syscall::Outside)]
    #[case::running("running", Syscall::Running)]
    fn syscall_lines(#[case] text: &str, #[case] want: Syscall) {
        assert_eq!(syscall(text), Some(want));
    }

    #[rstest]
    #[case::empty("")]
    #[case::word("sleeping")]
    #[case::no_arguments("0")]
    #[case::cut_short("0 0x0 0x7ffd")]
    #[case::not_hex("0 0xzz 0x1 0x0 0x0 0x0 0x0 0x7ffe 0x7f01")]
    fn bad_syscall_lines(#[case] text: &str) {
        assert_eq!(syscall(text), None);
    }

    /// Links as `readlink /proc/PID/fd/N` shows them.
    #[rstest]
    #[case::tty("/dev/pts/3", "/dev/pts/3")]
    #[case::file_with_colon("/tmp/a:b", "/tmp/a:b")]
    #[case::deleted_file("/tmp/x (deleted)", "/tmp/x (deleted)")]
    #[case::memfd("/memfd:wayland-shm (deleted)", "/memfd:wayland-shm (deleted)")]
    #[case::pipe("pipe:[123456]", "pipe")]
    #[case::socket("socket:[98765]", "socket")]
    #[case::net("net:[4026531840]", "net")]
    #[case::anon_inode("anon_inode:[eventpoll]", "eventpoll")]
    #[case::timerfd("anon_inode:[timerfd]", "timerfd")]
    #[case::other_kind("mnt:[4026531841]", "mnt")]
    #[case::unknown_kind("weird:thing", "weird")]
    #[case::no_kind(":[1]", "")]
    fn descriptor_links(#[case] link: &str, #[case] want: &str) {
        assert_eq!(fd_label(link), want);
    }

    #[rstest]
    #[case::same("/dev/pts/3", "/dev/pts/3", true)]
    #[case::other_tty("/dev/pts/30", "/dev/pts/3", false)]
    #[case::pipe("pipe:[3]", "/dev/pts/3", false)]
    #[case::deleted("/dev/pts/3 (deleted)", "/dev/pts/3", false)]
    #[case::controlling_terminal("/dev/tty", "/dev/pts/3", true)]
    fn descriptor_on_the_terminal(#[case] link: &str, #[case] tty: &str, #[case] want: bool) {
        assert_eq!(fd_is(link, tty), want);
    }

    #[rstest]
    #[case::read(0, 63, Call::Read)]
    #[case::readv(19, 65, Call::Read)]
    #[case::ppoll(271, 73, Call::Poll)]
    #[case::pselect6(270, 72, Call::Select)]
    #[case::epoll_pwait(281, 22, Call::Epoll)]
    #[case::epoll_pwait2(441, 441, Call::Epoll)]
    #[case::connect(42, 203, Call::Network)]
    #[case::wait4(61, 260, Call::Child)]
    #[case::clock_nanosleep(230, 115, Call::Timer)]
    #[case::write(1, 64, Call::Write)]
    #[case::writev(20, 66, Call::Write)]
    #[case::ioctl(16, 29, Call::Other)]
    #[case::futex(202, 98, Call::Futex)]
    #[case::sigsuspend(130, 133, Call::Signal)]
    fn calls_by_architecture(#[case] x86_64: u64, #[case] aarch64: u64, #[case] want: Call) {
        assert_eq!((call_x86_64(x86_64), call_aarch64(aarch64)), (want, want));
    }

    #[test]
    fn x86_64_only_calls() {
        assert_eq!(call_x86_64(7), Call::Poll);
        assert_eq!(call_x86_64(23), Call::Select);
        assert_eq!(call_x86_64(232), Call::Epoll);
        // 7 is not poll on aarch64 (there it is fremovexattr).
        assert_eq!(call_aarch64(7), Call::Other);
    }

    fn pollfd(fd: i32, events: i16) -> Vec<u8> {
        let mut b = fd.to_ne_bytes().to_vec();
        b.extend_from_slice(&events.to_ne_bytes());
        b.extend_from_slice(&0i16.to_ne_bytes());
        b
    }

    #[test]
    fn pollfds_that_wait_to_read() {
        let raw = [pollfd(0, 1), pollfd(5, 4), pollfd(-1, 1), pollfd(7, 3)].concat();
        assert_eq!(poll_fds(&raw), [0, 7]);
        assert_eq!(poll_fds(&raw[..7]), Vec::<u64>::new(), "a cut entry is not read");
    }

    #[test]
    fn fd_sets_below_nfds() {
        let mut raw = (1u64 << 0 | 1 << 3 | 1 << 63).to_ne_bytes().to_vec();
        raw.extend_from_slice(&(1u64 << 1).to_ne_bytes());
        assert_eq!(fd_set(&raw, 66), [0, 3, 63, 65]);
        assert_eq!(fd_set(&raw, 4), [0, 3]);
    }

    #[test]
    fn epoll_fdinfo_lists_its_targets() {
        // Captured from node's epoll descriptor.
        let info = "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\ntfd:        0 events:       19 data:                0  pos:0 ino:3 sdev:19\ntfd:       17 events:       19 data:               11  pos:0 ino:4e2b sdev:f\n";
        assert_eq!(epoll_fds(info), [0, 17]);
        assert!(epoll_fds("pos:\t0\n").is_empty());
    }

    #[rstest]
    #[case("n_tty_read", Some(WaitKind::Read))]
    #[case("wait_woken", Some(WaitKind::Read))]
    #[case("do_select", Some(WaitKind::Descriptors))]
    #[case("do_sys_poll", Some(WaitKind::Descriptors))]
    #[case("ep_poll", Some(WaitKind::Descriptors))]
    #[case("do_wait", Some(WaitKind::Child))]
    #[case("hrtimer_nanosleep", Some(WaitKind::Timer))]
    #[case("pipe_read", Some(WaitKind::Other))]
    #[case("0", None)]
    fn wait_channels(#[case] wchan: &str, #[case] want: Option<WaitKind>) {
        assert_eq!(wchan_kind(wchan), want);
    }

    #[rstest]
    #[case::script("bash build.sh", true)]
    #[case::script_after_options("bash -e -o pipefail ./x.sh arg", true)]
    #[case::command_string("sh -c 'read a'", true)]
    #[case::joined_flags("bash -ec true", true)]
    #[case::after_double_dash("bash -- x.sh", true)]
    #[case::plain("bash", false)]
    #[case::login("-bash", false)]
    #[case::our_own("bash --rcfile /s/bashrc -i", false)]
    #[case::forced_interactive("bash -i x.sh", false)]
    #[case::option_value_is_no_script("bash -o vi", false)]
    #[case::stdin_takes_operands("bash -s a b", false)]
    #[case::long_options("zsh -l --no-rcs", false)]
    #[case::bare_double_dash("bash --", false)]
    fn a_shell_runs_a_script_or_is_for_a_person(#[case] line: &str, #[case] script: bool) {
        let argv: Vec<String> = line.split(' ').map(|w| w.trim_matches('\'').to_string()).collect();
        assert_eq!(shell_runs_script(&argv), script, "{line}");
    }

    #[test]
    fn cmdlines_split_at_nuls() {
        assert_eq!(cmdline(b"ssh\0-p\x002222\0me@box\0"), ["ssh", "-p", "2222", "me@box"]);
        assert!(cmdline(b"").is_empty());
    }

    fn argv(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    #[rstest]
    #[case::ssh("ssh -p 22 me@box", Some(("ssh", "box", Some("me"))))]
    #[case::podman_exec("podman exec -it box bash", Some(("podman", "box", None)))]
    #[case::podman_exec_user("/usr/bin/podman exec -ti -u root box sh -c x", Some(("podman", "box", Some("root"))))]
    #[case::docker_global("docker --context prod exec --tty -e A=1 web sh", Some(("docker", "web", None)))]
    #[case::docker_container_exec("docker container exec -it -w /src api bash", Some(("docker", "api", None)))]
    #[case::docker_run_named("docker run --rm -it --name dev -v /a:/b debian bash", Some(("docker", "dev", None)))]
    #[case::docker_run_image("docker run -it --rm debian:12", Some(("docker", "debian:12", None)))]
    #[case::nerdctl_attach("nerdctl attach box", Some(("nerdctl", "box", None)))]
    #[case::kubectl("kubectl exec -it -n prod web-0 -c app -- bash", Some(("kubectl", "web-0", None)))]
    #[case::kubectl_global("kubectl --context c -n ns exec --stdin --tty pod/web -- sh", Some(("kubectl", "pod/web", None)))]
    #[case::openshell("openshell sandbox exec -n box --tty -- sh", Some(("openshell", "box", None)))]
    #[case::exec_without_tty("podman exec box ls", None)]
    #[case::other_subcommand("docker ps -a", None)]
    #[case::not_a_carrier("bwrap --ro-bind / / -- bash", None)]
    #[case::openshell_other("openshell sandbox list", None)]
    fn carriers(#[case] line: &str, #[case] want: Option<(&str, &str, Option<&str>)>) {
        let got = carrier(&argv(line));
        let got = got.as_ref().map(|c| (c.program.as_str(), c.target.as_str(), c.user.as_deref()));
        assert_eq!(got, want);
    }

    #[rstest]
    #[case::plain("ssh box", Some(("box", None)))]
    #[case::user_at("ssh me@box.example.org", Some(("box.example.org", Some("me"))))]
    #[case::port_apart("ssh -p 2222 box", Some(("box", None)))]
    #[case::port_joined("ssh -p2222 box", Some(("box", None)))]
    #[case::login_flag("ssh -l root box", Some(("box", Some("root"))))]
    #[case::at_beats_login("ssh -l root me@box", Some(("box", Some("me"))))]
    #[case::grouped_flags("ssh -tt -vA box uptime", Some(("box", None)))]
    #[case::group_ending_in_value("ssh -vp 22 box", Some(("box", None)))]
    #[case::many_valued("ssh -i key -o StrictHostKeyChecking=no -J jump -L 8080:l:80 -F cfg box ls", Some(("box", None)))]
    #[case::url("ssh ssh://me@box:2222", Some(("box", Some("me"))))]
    #[case::after_dashes("ssh -v -- box", Some(("box", None)))]
    #[case::no_host("ssh -V", None)]
    #[case::value_missing("ssh -p", None)]
    fn ssh_destinations(#[case] line: &str, #[case] want: Option<(&str, Option<&str>)>) {
        let got = ssh_target(&argv(line));
        let got = got.as_ref().map(|(h, u)| (h.as_str(), u.as_deref()));
        assert_eq!(got, want);
    }
}
