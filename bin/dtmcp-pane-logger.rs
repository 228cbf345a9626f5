//! `dtmcp-pane-logger`: started by tmux as a pane's `pipe-pane -O` command.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match dtmcp::logger::run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // tmux discards a pipe command's stderr, so say it where the
            // router's diagnostics will find it too.
            eprintln!("dtmcp-pane-logger: {e}");
            ExitCode::FAILURE
        }
    }
}
