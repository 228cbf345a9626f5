//! Pure readers of `/proc` text: no file is opened here, so every rule is
//! tested on captured text.

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
}

/// Reads `pid (comm) state ppid pgrp session tty_nr tpgid …`. The command
/// name may hold spaces and `)`, so it ends at the last `)`.
pub fn stat(text: &str) -> Option<Stat> {
    let (head, rest) = text.rsplit_once(')')?;
    let (pid, comm) = head.split_once(" (")?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let state = f.first()?.chars().next()?;
    let num = |i: usize| f.get(i)?.parse().ok();
    Some(Stat {
        pid: pid.trim().parse().ok()?,
        comm: comm.to_string(),
        state,
        ppid: num(1)?,
        pgrp: num(2)?,
        tpgid: num(5)?,
    })
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
        /// Its first argument (a descriptor for `read`, a count for `select`).
        arg0: u64,
    },
}

/// Reads `nr arg0 … arg5 sp pc` (numbers in hex after the first), `-1 sp pc`
/// or `running`.
pub fn syscall(text: &str) -> Option<Syscall> {
    let mut f = text.split_whitespace();
    let first = f.next()?;
    if first == "running" {
        return Some(Syscall::Running);
    }
    if first == "-1" {
        return Some(Syscall::Outside);
    }
    let nr = first.parse().ok()?;
    let arg0 = u64::from_str_radix(f.next()?.trim_start_matches("0x"), 16).ok()?;
    Some(Syscall::In { nr, arg0 })
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

/// x86_64 system call numbers of the waits that matter.
pub fn syscall_kind(nr: u64) -> WaitKind {
    match nr {
        0 | 17 | 19 | 295 => WaitKind::Read, // read, pread64, readv, preadv
        7 | 23 | 232 | 270 | 271 | 281 | 441 => WaitKind::Descriptors, // poll, select, epoll_wait, pselect6, ppoll, epoll_pwait(2)
        61 | 247 => WaitKind::Child,                                   // wait4, waitid
        35 | 230 => WaitKind::Timer,                                   // nanosleep, clock_nanosleep
        _ => WaitKind::Other,
    }
}

/// Whether a select-family call's first argument is a descriptor count
/// (`select`, `pselect6`) rather than a pointer (`poll`, `epoll`).
pub fn counts_descriptors(nr: u64) -> bool {
    matches!(nr, 23 | 270)
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

/// `ssh` options that take a value, given separately or joined (`-p22`).
const SSH_VALUED: &str = "bcDEeFIiJLlmOopQRSWw";

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

    /// Captured from a bash at its prompt, from `python3 -q` and a name with `) (` in it.
    const BASH: &str = "4242 (bash) S 4200 4242 4242 34816 4242 4194560 1082 0 0 0 1 0 0 0 20 0 1 0 1234 8589312 1280 18446744073709551615 1 1 0 0 0 0 65536 3686404 1266761467 0 0 0 17 1 0 0 0 0 0";
    const ODD: &str = "77 (a) b (c) R 1 77 77 0 -1 4194304 0";

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

    #[test]
    fn uid_is_the_real_one() {
        let status =
            "Name:\tbash\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t1000\t0\t0\t0\nGid:\t1000\t1000\t1000\t1000\n";
        assert_eq!(real_uid(status), Some(1000));
        assert_eq!(real_uid("Name:\tx\n"), None);
    }

    #[rstest]
    #[case::read_stdin("0 0x0 0x7ffd2a0b7a37 0x1 0x0 0x0 0x0 0x7ffd2a0b7a18 0x7f3c1d514992", Syscall::In { nr: 0, arg0: 0 })]
    #[case::pselect("270 0x1 0x7ffc5e0a3f10 0x0 0x0 0x0 0x0 0x7ffc5e0a3ec8 0x7f8a2a51c88d", Syscall::In { nr: 270, arg0: 1 })]
    #[case::read_fd_ten("0 0xa 0x55d0 0x2000 0x0 0x0 0x0 0x7ffe 0x7f01", Syscall::In { nr: 0, arg0: 10 })]
    #[case::outside("-1 0x7ffd2a0b7a18 0x7f3c1d514992", Syscall::Outside)]
    #[case::running("running", Syscall::Running)]
    fn syscall_lines(#[case] text: &str, #[case] want: Syscall) {
        assert_eq!(syscall(text), Some(want));
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

    #[test]
    fn cmdlines_split_at_nuls() {
        assert_eq!(cmdline(b"ssh\0-p\x002222\0me@box\0"), ["ssh", "-p", "2222", "me@box"]);
        assert!(cmdline(b"").is_empty());
    }

    fn argv(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
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
