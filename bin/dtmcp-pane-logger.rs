//! `dtmcp-pane-logger`: started by tmux as a pane's `pipe-pane -O` command.

use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match dtmcp_logger::run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // tmux throws a pipe command's stderr away, so the reason also
            // goes to `logger.log` in the session directory, where a person
            // (or the router) can find it.
            eprintln!("dtmcp-pane-logger: {e}");
            if let Some(dir) = args.first() {
                let log = std::path::Path::new(dir).join("logger.log");
                if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(log) {
                    let _ = writeln!(f, "dtmcp-pane-logger: {e}");
                }
            }
            ExitCode::FAILURE
        }
    }
}
