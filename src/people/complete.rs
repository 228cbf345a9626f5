//! Shell completions that know the sessions: `completions SHELL` prints a
//! small script that asks this program, at each TAB, what may come next
//! (clap_complete's dynamic completion, `COMPLETE=SHELL`). Subcommands and
//! options come from the same definitions as `--help`; a session name is
//! completed from the session directories in the state home, open or
//! closed, without asking tmux or a logger.

use clap::CommandFactory;
use clap_complete::engine::{ArgValueCandidates, CompletionCandidate};
use clap_complete::env::{Bash, Elvish, EnvCompleter, Fish, Powershell, Zsh};

use super::{Failure, Out, Outcome};
use crate::config::Config;

/// The variable that makes this program complete instead of run.
const VAR: &str = "COMPLETE";

/// The subcommands whose `name` argument is a session, and the `logs`
/// subcommands that take one.
const TAKES_A_SESSION: [&str; 9] = ["tail", "show", "regions", "search", "attach", "record", "play", "close", "logs"];

/// Answers a completion request and exits, when the shell's script asked
/// for one (`COMPLETE` set); returns at once otherwise.
pub fn answer_if_asked(name: &'static str) {
    clap_complete::CompleteEnv::with_factory(move || command(name)).var(VAR).complete();
}

/// The command line as completions see it: named as it was started, with
/// session names offered wherever a session goes.
pub fn command(name: &'static str) -> clap::Command {
    let mut cmd = crate::cli::Cli::command().name(name).bin_name(name);
    for sub in TAKES_A_SESSION {
        cmd = cmd.mut_subcommand(sub, |s| {
            if s.get_subcommands().next().is_some() {
                // `logs keep NAME` and its siblings; `due` and `sweep` take none.
                let names: Vec<String> = s.get_subcommands().map(|c| c.get_name().to_string()).collect();
                names.iter().fold(s, |s, n| s.mut_subcommand(n, with_session_names))
            } else {
                with_session_names(s)
            }
        });
    }
    cmd
}

/// Adds the session names to `cmd`'s `name` argument, if it has one.
/// (In place: `mut_arg` would move it behind the other positionals.)
fn with_session_names(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| if a.get_id() == "name" { a.add(ArgValueCandidates::new(session_names)) } else { a })
}

/// The names of the sessions that have logs in the state home, sorted.
fn session_names() -> Vec<CompletionCandidate> {
    let Ok(cfg) = Config::from_env() else { return Vec::new() };
    let Ok(entries) = std::fs::read_dir(cfg.sessions_dir()) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().join(dtmcp_core::store::files::META).is_file())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| super::check_name(n).is_ok())
        .collect();
    names.sort_by_key(|n| super::look::natural(n));
    names.into_iter().map(CompletionCandidate::new).collect()
}

/// Prints the script that registers completions for `name` in `shell`.
pub fn print_script(shell: clap_complete::Shell, name: &'static str) -> Outcome {
    let completer: &dyn EnvCompleter = match shell {
        clap_complete::Shell::Bash => &Bash,
        clap_complete::Shell::Elvish => &Elvish,
        clap_complete::Shell::Fish => &Fish,
        clap_complete::Shell::PowerShell => &Powershell,
        clap_complete::Shell::Zsh => &Zsh,
        other => return Err(Failure::Usage(format!("no completions for {other}"))),
    };
    // The script runs this program at each TAB as it was called now: by
    // name when found on PATH, else by its absolute path (a link left as a
    // link, so that it keeps its name).
    let called = std::env::args_os().next().map(std::path::PathBuf::from).unwrap_or_else(|| name.into());
    let called = match called.components().count() {
        1 => called,
        _ => std::path::absolute(&called).unwrap_or(called),
    };
    let mut script = Vec::new();
    completer
        .write_registration(VAR, name, name, &called.to_string_lossy(), &mut script)
        .map_err(|e| Failure::Trouble(format!("writing the completion script: {e}")))?;
    Out::stdout().put(&String::from_utf8_lossy(&script))
}
