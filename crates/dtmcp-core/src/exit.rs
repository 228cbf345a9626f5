//! How an exit status reads. A shell reports a command that a signal
//! killed as 128 + the signal's number; a reply spells the signal out, so
//! that `exit 139` reads as the segmentation fault it is.

/// `exit N`, followed by the signal behind it when `code` is 128 + the
/// number of a signal that ends programs.
pub fn words(code: i32) -> String {
    match signal(code) {
        Some((name, what)) => format!("exit {code} ({name}: {what})"),
        None => format!("exit {code}"),
    }
}

/// As [`words`], with the signal's name alone (`exit 139 (SIGSEGV)`): for
/// a listing of many commands.
pub fn short(code: i32) -> String {
    match signal(code) {
        Some((name, _)) => format!("exit {code} ({name})"),
        None => format!("exit {code}"),
    }
}

/// Whether an exit status says the command was stopped (kept by its
/// shell as a job), not ended: 128 + SIGSTOP, SIGTSTP, SIGTTIN or SIGTTOU.
pub fn stopped(code: i32) -> bool {
    matches!(code - 128, 19..=22)
}

/// The signal an exit status of 128 + N names, and what it usually means;
/// `None` for any other status (a program may still choose such a status
/// itself, which nothing here can tell apart).
pub fn signal(code: i32) -> Option<(&'static str, &'static str)> {
    Some(match code.checked_sub(128)? {
        1 => ("SIGHUP", "its terminal hung up"),
        2 => ("SIGINT", "interrupted, as by ctrl+c"),
        3 => ("SIGQUIT", "quit, as by ctrl+\\"),
        4 => ("SIGILL", "illegal instruction"),
        5 => ("SIGTRAP", "trace or breakpoint trap"),
        6 => ("SIGABRT", "aborted, as by a failed assertion"),
        7 => ("SIGBUS", "bus error"),
        8 => ("SIGFPE", "arithmetic error, such as a division by zero"),
        9 => ("SIGKILL", "killed, as by kill -9 or the out-of-memory killer"),
        11 => ("SIGSEGV", "segmentation fault"),
        13 => ("SIGPIPE", "broken pipe: what it wrote to had gone"),
        14 => ("SIGALRM", "its alarm went off"),
        15 => ("SIGTERM", "terminated"),
        19 => ("SIGSTOP", "stopped; the shell keeps it as a job: fg goes on with it"),
        20 => ("SIGTSTP", "stopped, as by ctrl+z; the shell keeps it as a job: fg goes on with it"),
        21 => ("SIGTTIN", "stopped for reading the terminal from the background: fg lets it"),
        22 => ("SIGTTOU", "stopped for writing to the terminal from the background: fg lets it"),
        24 => ("SIGXCPU", "over its CPU time limit"),
        25 => ("SIGXFSZ", "over its file size limit"),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case(0, "exit 0")]
    #[case(1, "exit 1")]
    #[case(127, "exit 127")]
    #[case(128, "exit 128")]
    #[case(130, "exit 130 (SIGINT: interrupted, as by ctrl+c)")]
    #[case(137, "exit 137 (SIGKILL: killed, as by kill -9 or the out-of-memory killer)")]
    #[case(139, "exit 139 (SIGSEGV: segmentation fault)")]
    #[case(138, "exit 138")]
    #[case(148, "exit 148 (SIGTSTP: stopped, as by ctrl+z; the shell keeps it as a job: fg goes on with it)")]
    #[case(255, "exit 255")]
    #[case(-1, "exit -1")]
    fn statuses_name_the_signal_behind_them(#[case] code: i32, #[case] words_: &str) {
        assert_eq!(words(code), words_);
        let name = signal(code).map(|(n, _)| format!(" ({n})")).unwrap_or_default();
        assert_eq!(short(code), format!("exit {code}{name}"));
        assert_eq!(stopped(code), code == 148);
    }
}
