//! `attach NAME`: becomes `tmux -L SOCKET attach -t =SESSION` for the
//! session's tmux session (a split pane's is its window's), led by the
//! words of `DOCENT_TERMINAL_MCP_ATTACH_PREFIX` when they are set: the
//! same command the tools hand out.

use std::os::unix::process::CommandExt;

use super::look;
use super::{Failure, Home, Out, Outcome};

/// Arguments of `attach`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "\
Examples:
  dtmcp attach t1            watch or join t1 (tmux's prefix key, then d, detaches)
  dtmcp attach --print t1    print the command instead")]
pub struct AttachArgs {
    /// The session.
    pub name: String,
    /// Print the command (one shell line) instead of running it.
    #[arg(long)]
    pub print: bool,
}

/// Runs `attach`: on success it does not return, tmux takes the process.
pub async fn run(home: Home, args: AttachArgs) -> Outcome {
    let found = look::find(&home, &args.name).await?;
    let Some(pane) = found.pane.as_ref().filter(|_| found.live()) else {
        return Err(Failure::NotFound(format!(
            "{} is closed; its log remains: `dtmcp tail {0}`, `dtmcp show {0}`",
            found.name
        )));
    };
    if args.print {
        let mut out = Out::stdout();
        return out.line(&home.attach_line(&pane.tmux_session));
    }
    let words = home.attach_words(&pane.tmux_session);
    let Some((program, rest)) = words.split_first() else {
        return Err(Failure::Trouble("the attach command is empty".into()));
    };
    let err = std::process::Command::new(program).args(rest).exec();
    Err(Failure::Trouble(format!("could not run {program}: {err}")))
}
