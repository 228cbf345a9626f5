//! The command line of `docent-terminal-mcp` (alias `dtmcp`).

use std::sync::Arc;

use clap::{CommandFactory, Parser, Subcommand};
use rmcp::ServiceExt;

use crate::config::Config;
use crate::people;
use crate::retention::{Action, SweepMode};
use crate::session::{SessionError, Sessions, Sweep};
use crate::tmux::Tmux;
use crate::tools::Terminal;

/// Terminal sessions for AI models, in tmux panes people can watch and join.
#[derive(Debug, Parser)]
#[command(name = "docent-terminal-mcp", version, about, after_help = EXAMPLES)]
pub struct Cli {
    /// What to do; with none, serve MCP over stdio.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Serving over stdio: delete a closed session's logs after this many
    /// days unused (default 3; 0 keeps all).
    #[arg(long, value_name = "DAYS")]
    pub keep_closed_days: Option<u64>,
    /// Serving over stdio: the policy file (see `stdio --help`).
    #[arg(long, value_name = "FILE")]
    pub policy: Option<std::path::PathBuf>,
}

/// The settings of serving over stdio.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Serving {
    /// How long closed sessions' logs are kept.
    #[command(flatten)]
    pub retention: Retention,
    /// The policy file: what agents may type, and what a person is asked
    /// first (default $DOCENT_TERMINAL_MCP_POLICY, else
    /// ~/.config/docent-terminal-mcp/policy.toml when it exists).
    #[arg(long, value_name = "FILE")]
    pub policy: Option<std::path::PathBuf>,
}

/// The retention setting, on the commands that sweep logs (`stdio`,
/// `serve`, `logs`) and only there.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct Retention {
    /// Delete a closed session's logs after this many days unused (default 3; 0 keeps all).
    #[arg(long, value_name = "DAYS")]
    pub keep_closed_days: Option<u64>,
}

/// Examples under the top-level `--help`.
const EXAMPLES: &str = "\
Examples:
  docent-terminal-mcp                   serve MCP over stdio (what an agent's client starts)
  dtmcp ls                              the sessions: what runs, who typed, who watches
  dtmcp tail -f t1                      follow t1's log as it grows
  dtmcp show t1 --failed | less         the last failed command of t1 and its output
  dtmcp search t1 -C 2 'error|panic'    matching lines of t1's log, with context
  dtmcp watch                           a live overview; q quits
  dtmcp attach t1                       watch or join t1 in tmux
  dtmcp completions bash > ~/.local/share/bash-completion/completions/dtmcp

The people's commands (ls, tail, show, regions, search, watch, attach) read
the state home and ask the sessions' loggers; they need no server and start
nothing. Exit status: 0 done, 1 not found or no match, 2 usage error.";

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve MCP over stdio (the default).
    Stdio(Serving),
    /// Run a narrated demo: a scripted MCP client drives a real session on a
    /// private tmux socket with a temporary state home.
    Demo {
        /// Pause this many milliseconds between steps, for a person reading along.
        #[arg(long, default_value_t = 0)]
        pause_ms: u64,
        /// Leave the session open when the demo ends (with its private tmux
        /// server and state home), to look at it afterwards.
        #[arg(long)]
        keep: bool,
    },
    /// Write the guidance as a Claude Code skill: DIR/terminal-sessions/SKILL.md
    /// and one reference file per topic (e.g. into ~/.claude/skills).
    Skill {
        /// Where to write it.
        dir: std::path::PathBuf,
        /// Write a plugin instead: .claude-plugin/plugin.json, an .mcp.json
        /// that starts this server, and the skill under skills/.
        #[arg(long)]
        plugin: bool,
    },
    /// Serve many agents: MCP over HTTP on a Unix socket (and a TCP port
    /// with --tcp), plus /health and /api/*.
    Serve {
        /// The Unix socket (default $XDG_RUNTIME_DIR/docent-terminal-mcp/server.sock).
        #[arg(long, value_name = "PATH")]
        socket: Option<std::path::PathBuf>,
        /// Also listen on this TCP port (default 8766), bearer token required.
        #[arg(long, value_name = "PORT", num_args = 0..=1, default_missing_value = "8766")]
        tcp: Option<u16>,
        /// The address the TCP port binds to (default 127.0.0.1).
        #[arg(long, value_name = "ADDRESS", requires = "tcp")]
        host: Option<String>,
        /// Host names clients use to reach the TCP port, besides the loopback ones
        /// (required with a non-loopback --host).
        #[arg(long, value_name = "NAMES", value_delimiter = ',', requires = "tcp")]
        allowed_hosts: Vec<String>,
        /// The policy file: what agents may type, and what a person is asked
        /// first (default $DOCENT_TERMINAL_MCP_POLICY, else
        /// ~/.config/docent-terminal-mcp/policy.toml when it exists).
        #[arg(long, value_name = "FILE")]
        policy: Option<std::path::PathBuf>,
        /// How long closed sessions' logs are kept.
        #[command(flatten)]
        retention: Retention,
    },
    /// A stdio bridge to the shared server, for clients that start a command.
    Connect {
        /// The agent's name, stable across reconnects (X-Terminal-Actor).
        #[arg(long, value_name = "NAME")]
        actor: Option<String>,
        /// The Unix socket (default as for serve).
        #[arg(long, value_name = "PATH")]
        socket: Option<std::path::PathBuf>,
    },
    /// Print the bearer token of the TCP port (made on first use).
    Token {
        /// Print a token that names this agent instead: whoever calls with
        /// it is NAME (for a client over TCP that cannot send a header).
        #[arg(long, value_name = "NAME")]
        agent: Option<String>,
    },
    /// Close a session, even one someone uses.
    Close {
        /// Close it even when a person is attached or another agent's command runs.
        #[arg(long)]
        force: bool,
        /// The session.
        name: String,
    },
    /// Open an integrated shell on another host: ssh with the shell
    /// integration brought along in a bootstrap that leaves nothing behind.
    Ssh {
        /// Show the ssh command and the script instead of running them.
        #[arg(long)]
        print: bool,
        /// ssh options, then [user@]host (no remote command).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true, value_name = "SSH ARGS")]
        args: Vec<String>,
    },
    /// Copy the shell integration to ~/.local/share/docent-terminal-mcp/vN on
    /// another host (one ssh), for shell_integrate there.
    Install {
        /// Show the ssh command, the script and the files instead of running them.
        #[arg(long)]
        print: bool,
        /// Remove the installed files instead.
        #[arg(long)]
        remove: bool,
        /// ssh options, then [user@]host.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true, value_name = "SSH ARGS")]
        args: Vec<String>,
    },
    /// Run the integration's bootstrap through a command that opens a shell
    /// with a terminal elsewhere: `into podman exec -it box`, `into bwrap ... --`.
    Into {
        /// Show the command and the script instead of running them.
        #[arg(long)]
        print: bool,
        /// The command; `sh -c SCRIPT` is appended to it.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Watch every session from a browser: print a one-time login link to
    /// the running server's read-only web view (serve --tcp), and open it.
    Web(crate::web::WebArgs),
    /// Decide what happens to session logs, or sweep now.
    Logs {
        /// How long closed sessions' logs are kept (for `due` and `sweep`).
        #[command(flatten)]
        retention: Retention,
        /// What to do.
        #[command(subcommand)]
        action: LogsCommand,
    },
    /// List the sessions: what each runs or waits for, its last command,
    /// the agents that typed, the people attached, where it runs.
    Ls(people::ls::LsArgs),
    /// Print the last lines of a session's log, numbered; -f follows it.
    Tail(people::tail::TailArgs),
    /// Print one command of a session: its header and its output.
    Show(people::show::ShowArgs),
    /// List a session's commands with status, duration and who typed them.
    Regions(people::regions::RegionsArgs),
    /// Search a session's log with a regex, as grep -n would.
    Search(people::search::SearchArgs),
    /// A live overview of every session; q quits.
    Watch(people::watch::WatchArgs),
    /// Attach to a session's tmux session, to watch or type.
    Attach(people::attach::AttachArgs),
    /// Write a session (or some of its commands) as an asciicast recording.
    Record(people::record::RecordArgs),
    /// Play a session's recording in this terminal; q quits.
    Play(people::play::PlayArgs),
    /// Print a shell completion script; it completes session names too
    /// (bash: `source <(dtmcp completions bash)` in ~/.bashrc).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// List the asks waiting for a person: an agent's line the policy
    /// wants allowed first.
    Pending(people::asks::PendingArgs),
    /// Allow an ask's line (once, for the session, or for the agent).
    Allow(people::asks::AllowArgs),
    /// Deny an ask's line.
    Deny(people::asks::DenyArgs),
    /// Answer one ask with a key (what a tmux popup runs).
    #[command(hide = true)]
    Answer(people::asks::AnswerArgs),
    /// Print the manual page (roff), or write one page per subcommand.
    #[command(after_help = "\
Examples:
  dtmcp man | man -l -
  dtmcp man --dir ~/.local/share/man/man1")]
    Man {
        /// Write the pages into this directory instead: dtmcp.1 and
        /// docent-terminal-mcp.1, and one page per subcommand under each name.
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
    },
}

/// The `logs` subcommands.
#[derive(Debug, Subcommand)]
pub enum LogsCommand {
    /// Keep a session's logs for good.
    Keep {
        /// The session.
        name: String,
    },
    /// Put a session's logs back under the usual rule.
    Default {
        /// The session.
        name: String,
    },
    /// Delete a session's logs when it closes.
    DeleteOnClose {
        /// The session.
        name: String,
    },
    /// Delete a closed session's logs now.
    Delete {
        /// The session.
        name: String,
    },
    /// List what the next sweep would delete, deleting nothing.
    Due,
    /// Run a sweep now.
    Sweep,
}

/// The whole program: parses the arguments, runs, and turns an error chain
/// into one message and a failing exit code.
pub fn entry() -> std::process::ExitCode {
    crate::allocator::tune();
    survive_file_size_limit();
    let me = invoked_name();
    people::complete::answer_if_asked(me);
    match main(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => match e.downcast_ref::<people::Failure>() {
            Some(failure) => {
                if let Some(message) = failure.message() {
                    eprintln!("{me}: {message}");
                }
                std::process::ExitCode::from(failure.code())
            }
            None => {
                eprintln!("{me}: {e:#}");
                std::process::ExitCode::FAILURE
            }
        },
    }
}

/// A write past the file size limit (`ulimit -f`) sends SIGXFSZ, which
/// kills by default; the server must instead get the write's error and say
/// so in a reply. A handler that does nothing (rather than ignoring the
/// signal) is reset by `exec`, so tmux and the programs in its panes still
/// get the default.
fn survive_file_size_limit() {
    extern "C" fn nothing(_: nix::libc::c_int) {}
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    let action = SigAction::new(SigHandler::Handler(nothing), SaFlags::SA_RESTART, SigSet::empty());
    // SAFETY: the handler touches nothing (async-signal-safe by being
    // empty), and no other code of this process handles SIGXFSZ.
    let _ = unsafe { sigaction(Signal::SIGXFSZ, &action) };
}

/// Runs the command line.
pub fn main(cli: Cli) -> anyhow::Result<()> {
    if let Some(file) = policy_flag(&cli)? {
        // SAFETY: as below, no other thread exists yet.
        unsafe { std::env::set_var(crate::policy::ENV_POLICY, file) };
    }
    if let Some(days) = keep_closed_days(&cli)? {
        // SAFETY: no other thread exists yet (the runtime is built below),
        // so nothing can read the environment while it changes.
        unsafe { std::env::set_var(crate::retention::ENV_KEEP_DAYS, days.to_string()) };
    }
    // Built per command, not before: `serve` binds its socket first, while
    // no other thread exists.
    match cli.command {
        Some(Command::Serve { socket, tcp, host, allowed_hosts, .. }) => {
            serve(socket, crate::server::ServeOptions { tcp, host, allowed_hosts })
        }
        Some(Command::Connect { actor, socket }) => {
            let path = crate::config::server_socket_path(socket.as_deref())?;
            runtime()?.block_on(crate::bridge::run(path, actor))
        }
        Some(Command::Token { agent }) => {
            let cfg = Config::from_env()?;
            let token = crate::server::token::Token::load_or_create(&cfg.token_file())
                .map_err(|e| anyhow::anyhow!("cannot read or make {}: {e}", cfg.token_file().display()))?;
            match agent {
                None => println!("{}", token.as_str()),
                Some(name) => println!("{}", token.for_agent(&name).map_err(|e| anyhow::anyhow!(e))?),
            }
            Ok(())
        }
        Some(Command::Close { force, name }) => runtime()?.block_on(close(name, force)),
        None | Some(Command::Stdio(_)) => runtime()?.block_on(serve_stdio()),
        Some(Command::Demo { pause_ms, keep }) => {
            runtime()?.block_on(crate::demo::run(crate::demo::Options { pause_ms, keep }))
        }
        Some(Command::Logs { action, .. }) => runtime()?.block_on(logs(action)),
        Some(Command::Skill { dir, plugin }) => skill(&dir, plugin),
        Some(Command::Ssh { print, args }) => crate::remote::ssh(&args, print),
        Some(Command::Install { print, remove, args }) => crate::remote::install(&args, print, remove),
        Some(Command::Into { print, command }) => crate::remote::into(&command, print),
        Some(Command::Ls(a)) => Ok(people::block_on(|h| people::ls::run(h, a))?),
        Some(Command::Tail(a)) => Ok(people::block_on(|h| people::tail::run(h, a))?),
        Some(Command::Show(a)) => Ok(people::block_on(|h| people::show::run(h, a))?),
        Some(Command::Regions(a)) => Ok(people::block_on(|h| people::regions::run(h, a))?),
        Some(Command::Search(a)) => Ok(people::block_on(|h| people::search::run(h, a))?),
        Some(Command::Watch(a)) => Ok(people::block_on(|h| people::watch::run(h, a))?),
        Some(Command::Attach(a)) => Ok(people::block_on(|h| people::attach::run(h, a))?),
        Some(Command::Record(a)) => Ok(people::block_on(|h| people::record::run(h, a))?),
        Some(Command::Play(a)) => Ok(people::block_on(|h| people::play::run(h, a))?),
        Some(Command::Completions { shell }) => Ok(people::complete::print_script(shell, invoked_name())?),
        Some(Command::Man { dir }) => Ok(man(dir.as_deref())?),
        Some(Command::Web(args)) => crate::web::cli(args),
        Some(Command::Pending(a)) => Ok(people::asks::pending(a)?),
        Some(Command::Allow(a)) => Ok(people::asks::allow(a)?),
        Some(Command::Deny(a)) => Ok(people::asks::deny(a)?),
        Some(Command::Answer(a)) => Ok(people::asks::answer(a)?),
    }
}

/// The retention setting given on the command line, if any: on the
/// commands that sweep, or before no subcommand (serving over stdio).
fn keep_closed_days(cli: &Cli) -> Result<Option<u64>, people::Failure> {
    let own = match &cli.command {
        None => None,
        Some(
            Command::Stdio(Serving { retention: r, .. })
            | Command::Serve { retention: r, .. }
            | Command::Logs { retention: r, .. },
        ) => r.keep_closed_days,
        Some(_) if cli.keep_closed_days.is_some() => {
            let why = "--keep-closed-days goes with serving (stdio, serve) and `logs`; this command keeps no logs";
            return Err(people::Failure::Usage(why.to_string()));
        }
        Some(_) => None,
    };
    Ok(own.or(cli.keep_closed_days))
}

/// The policy file given on the command line, made absolute (the server
/// follows it from wherever it runs); refused on commands that do not serve.
fn policy_flag(cli: &Cli) -> Result<Option<std::path::PathBuf>, people::Failure> {
    let own = match &cli.command {
        None => None,
        Some(Command::Stdio(Serving { policy, .. }) | Command::Serve { policy, .. }) => policy.clone(),
        Some(_) if cli.policy.is_some() => {
            return Err(people::Failure::Usage("--policy goes with serving (stdio, serve)".into()));
        }
        Some(_) => None,
    };
    let Some(file) = own.or_else(|| cli.policy.clone()) else { return Ok(None) };
    let file = std::path::absolute(&file)
        .map_err(|e| people::Failure::Usage(format!("the policy file {}: {e}", file.display())))?;
    Ok(Some(file))
}

/// The name this program was started as (`dtmcp` or
/// `docent-terminal-mcp`), for completions that complete what was typed
/// and messages that name what was run.
pub fn invoked_name() -> &'static str {
    let started_as = std::env::args_os()
        .next()
        .and_then(|a| std::path::Path::new(&a).file_name().map(|n| n.to_string_lossy().into_owned()));
    match started_as.as_deref() {
        Some("dtmcp") => "dtmcp",
        _ => "docent-terminal-mcp",
    }
}

/// Prints the manual page, or writes every page into `dir` and names them.
fn man(dir: Option<&std::path::Path>) -> people::Outcome {
    let cmd = Cli::command();
    let Some(dir) = dir else {
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd)
            .render(&mut page)
            .map_err(|e| people::Failure::Trouble(format!("rendering the manual page: {e}")))?;
        return people::Out::stdout().put(&String::from_utf8_lossy(&page));
    };
    let failed = |e: std::io::Error| people::Failure::Trouble(format!("{}: {e}", dir.display()));
    std::fs::create_dir_all(dir).map_err(failed)?;
    // Pages under both names, so that `man dtmcp-ls` and `man
    // docent-terminal-mcp-ls` both find theirs, each naming the program
    // as it is called.
    for name in ["docent-terminal-mcp", "dtmcp"] {
        clap_mangen::generate_to(cmd.clone().name(name).bin_name(name), dir).map_err(failed)?;
    }
    let ours = |p: &std::path::Path| {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        p.extension().is_some_and(|x| x == "1")
            && (name.starts_with("docent-terminal-mcp") || name == "dtmcp.1" || name.starts_with("dtmcp-"))
    };
    let mut written: Vec<_> =
        std::fs::read_dir(dir).map_err(failed)?.filter_map(Result::ok).map(|e| e.path()).filter(|p| ours(p)).collect();
    written.sort();
    let mut out = people::Out::stdout();
    for path in written {
        out.line(&path.display().to_string())?;
    }
    Ok(())
}

/// Writes the skill (or a plugin holding it) and names what it wrote.
fn skill(dir: &std::path::Path, plugin: bool) -> anyhow::Result<()> {
    let files = crate::docent::skill::write(dir, plugin)
        .map_err(|e| anyhow::anyhow!("writing the skill under {}: {e}", dir.display()))?;
    for f in files {
        println!("{}", f.display());
    }
    Ok(())
}

/// Runs the shared server. The state lock is taken and the socket bound
/// before the runtime starts: binding sets the umask, which is only safe
/// while no other thread exists.
fn serve(socket: Option<std::path::PathBuf>, opts: crate::server::ServeOptions) -> anyhow::Result<()> {
    let cfg = Config::from_env()?;
    cfg.check_pane_logger()?;
    if let Some(port) = opts.tcp {
        crate::server::tcp_address(&opts, port)?;
    }
    let _lock = crate::lock::acquire(&cfg.home)?;
    let path = crate::config::server_socket_path(socket.as_deref())?;
    let bound = crate::server::socket::bind(&path)?;
    runtime()?.block_on(crate::server::run(cfg, bound, opts))
}

/// The runtime of every command: one thread. The router's async work is
/// waiting on tmux, the loggers and its clients; a call's own CPU is a few
/// hundred microseconds. Whatever could take longer (a search over a whole
/// log, a region's lines, a recording, a look through `/proc` at many
/// panes) already runs on tokio's blocking pool, so no agent waits behind
/// another's. One thread means no message is handed between two threads on
/// its way through, and the multi-threaded scheduler is not linked at all
/// (nor libm, for its `powf`): the router's resident memory is smaller by
/// its code, its worker threads' stacks and that library.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()
}

/// `close [--force] NAME`: closes a session of this user's server.
async fn close(name: String, force: bool) -> anyhow::Result<()> {
    let cfg = Config::from_env()?;
    let tmux = Arc::new(Tmux::new(&cfg.socket));
    let terminal = Terminal::new(Sessions::new(cfg, tmux)?);
    let said = terminal.close_session(&name, force, None).await.map_err(|e| anyhow::anyhow!(e))?;
    println!("{said}");
    Ok(())
}

/// Runs a `logs` subcommand against this user's state home and socket.
async fn logs(cmd: LogsCommand) -> anyhow::Result<()> {
    let cfg = Config::from_env()?;
    let tmux = Arc::new(Tmux::new(&cfg.socket));
    let sessions = Sessions::new(cfg, tmux)?;
    let (name, action) = match cmd {
        LogsCommand::Due | LogsCommand::Sweep => {
            let how = if matches!(cmd, LogsCommand::Due) { Sweep::DryRun } else { Sweep::Delete };
            let decisions = sessions.sweep(SweepMode::Full, how).await;
            for d in &decisions {
                println!("{}\t{}", d.name, d.why);
            }
            if decisions.is_empty() {
                eprintln!("{}", nothing_due(how));
            }
            return Ok(());
        }
        LogsCommand::Keep { name } => (name, Action::Keep),
        LogsCommand::Default { name } => (name, Action::Default),
        LogsCommand::DeleteOnClose { name } => (name, Action::DeleteOnClose),
        LogsCommand::Delete { name } => (name, Action::Delete),
    };
    let dir = sessions.set_retention(&name, action).await.map_err(|e| match e {
        SessionError::NoLogs { name, known } => {
            let with_logs = if known.is_empty() { "none".to_string() } else { known.join(", ") };
            anyhow::anyhow!(
                "no session named {name:?}, open or closed, has logs here (sessions with logs: {with_logs}); \
                 `{} ls --all` lists them",
                invoked_name()
            )
        }
        other => other.into(),
    })?;
    println!("{name}: {} ({})", action_done(action), dir.display());
    Ok(())
}

/// What `logs due` and `logs sweep` say when no session's logs are due.
fn nothing_due(how: Sweep) -> String {
    let policy = crate::retention::Policy::from_env();
    let rule = match policy.keep_closed_days {
        0 => "closed sessions are kept until deleted by hand".to_string(),
        days => format!("a closed session's logs go after {days} days unused"),
    };
    let verb = if matches!(how, Sweep::DryRun) { "is due" } else { "was deleted" };
    format!("nothing {verb}: {rule}, or when it closes if marked delete-on-close")
}

fn action_done(action: Action) -> &'static str {
    match action {
        Action::Keep => "logs kept for good",
        Action::Default => "logs follow the usual rule",
        Action::DeleteOnClose => "logs will be deleted when it closes",
        Action::Delete => "logs deleted",
    }
}

/// Serves one MCP client over stdin/stdout until it disconnects.
pub async fn serve_stdio() -> anyhow::Result<()> {
    let cfg = Config::from_env()?;
    cfg.check_pane_logger()?;
    // A person who started the server by hand sees what it is, rather
    // than a silent terminal that ignores what they type.
    let by_hand = std::io::IsTerminal::is_terminal(&std::io::stdin());
    if by_hand {
        let me = invoked_name();
        eprintln!(
            "{me}: an MCP server for an agent's client, waiting for JSON-RPC on stdin; \
             try `{me} demo` for a tour or `{me} --help` (ctrl+d leaves)"
        );
    }
    let _lock = crate::lock::acquire(&cfg.home)?;
    let tmux = Arc::new(Tmux::new(&cfg.socket));
    let sessions = Sessions::new(cfg.clone(), tmux.clone())?;
    let governor = crate::policy::Governor::open(&cfg.home, None)?;
    let sweeps = tokio::spawn(crate::session::sweep_forever(Sessions::new(cfg, tmux)?));
    let terminal = Terminal::governed(sessions, governor);
    terminal.start_watchdog();
    let service = terminal.serve((crate::stdio::input(), crate::stdio::output())).await;
    let outcome = match service {
        Ok(service) => service.waiting().await.map(drop).map_err(anyhow::Error::from),
        // ctrl+d before any client spoke: the person leaves, nothing failed.
        Err(_) if by_hand => Ok(()),
        Err(e) => Err(e.into()),
    };
    // Aborting is safe: a sweep's deletions happen between awaits, each one
    // whole, and the next start-up sweep finishes what this one did not.
    sweeps.abort();
    outcome
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{Cli, Command, LogsCommand};

    #[test]
    fn logs_subcommands_parse_with_dashes() {
        let cli = Cli::try_parse_from(["dtmcp", "logs", "delete-on-close", "t1"]).expect("parses");
        assert!(
            matches!(cli.command, Some(Command::Logs { action: LogsCommand::DeleteOnClose { name }, .. }) if name == "t1")
        );
        let cli = Cli::try_parse_from(["dtmcp", "logs", "due"]).expect("parses");
        assert!(matches!(cli.command, Some(Command::Logs { action: LogsCommand::Due, .. })));
        assert!(Cli::try_parse_from(["dtmcp", "logs", "delete"]).is_err(), "delete needs a name");
        let cli = Cli::try_parse_from(["dtmcp", "--keep-closed-days", "0", "logs", "due"]).expect("parses");
        assert_eq!(cli.keep_closed_days, Some(0));
    }

    #[test]
    fn ssh_install_and_into_take_the_rest_as_given() {
        let cli = Cli::try_parse_from(["dtmcp", "ssh", "--print", "-p", "22", "me@box"]).expect("parses");
        assert!(matches!(cli.command, Some(Command::Ssh { print: true, args }) if args == ["-p", "22", "me@box"]));
        let cli = Cli::try_parse_from(["dtmcp", "install", "--remove", "-i", "k", "box"]).expect("parses");
        assert!(
            matches!(cli.command, Some(Command::Install { remove: true, print: false, args }) if args == ["-i", "k", "box"])
        );
        let cli = Cli::try_parse_from(["dtmcp", "into", "podman", "exec", "-it", "box"]).expect("parses");
        assert!(matches!(cli.command, Some(Command::Into { print: false, command }) if command.len() == 4));
        let cli = Cli::try_parse_from(["dtmcp", "into", "sh", "-c", "exec \"$@\"", "--print"]).expect("parses");
        assert!(matches!(cli.command, Some(Command::Into { print: false, command }) if command.len() == 4));
        assert!(Cli::try_parse_from(["dtmcp", "ssh"]).is_err(), "ssh needs a host");
    }

    #[test]
    fn the_peoples_commands_parse_as_their_help_says() {
        use crate::people::look::State;
        let cli = Cli::try_parse_from(["dtmcp", "ls", "--state", "waiting,closed", "--json"]).expect("parses");
        assert!(matches!(cli.command, Some(Command::Ls(a)) if a.json && a.state == [State::Waiting, State::Closed]));
        let cli = Cli::try_parse_from(["dtmcp", "tail", "-fn", "5", "t1"]).expect("parses");
        assert!(matches!(cli.command, Some(Command::Tail(a)) if a.follow && a.lines == 5 && a.name == "t1"));
        let cli = Cli::try_parse_from(["dtmcp", "search", "t1", "-C", "2", "--", "-x"]).expect("parses");
        assert!(matches!(cli.command, Some(Command::Search(a)) if a.regex == "-x" && a.context == 2));
        let cli = Cli::try_parse_from(["dtmcp", "show", "t1", "12"]).expect("parses");
        assert!(matches!(cli.command, Some(Command::Show(a)) if a.region == Some(12)));
        assert!(Cli::try_parse_from(["dtmcp", "show", "t1", "12", "--failed"]).is_err(), "a region or --failed");
        assert!(Cli::try_parse_from(["dtmcp", "ls", "--state", "asleep"]).is_err());
        assert!(Cli::try_parse_from(["dtmcp", "completions", "tcsh"]).is_err());
    }

    /// The retention setting is offered where logs are swept, and nowhere
    /// it would do nothing.
    #[test]
    fn keep_closed_days_is_only_where_it_does_something() {
        use clap::CommandFactory;
        for sub in ["token", "web", "connect", "tail", "ls", "attach"] {
            let mut cmd = Cli::command();
            let help = cmd.find_subcommand_mut(sub).expect(sub).render_long_help().to_string();
            assert!(!help.contains("keep-closed-days"), "{sub}'s help offers it:\n{help}");
        }
        for sub in ["stdio", "serve", "logs"] {
            let mut cmd = Cli::command();
            let help = cmd.find_subcommand_mut(sub).expect(sub).render_long_help().to_string();
            assert!(help.contains("keep-closed-days"), "{sub}'s help lacks it");
        }
        assert!(Cli::try_parse_from(["dtmcp", "tail", "--keep-closed-days", "3", "t1"]).is_err());
        let cli = Cli::try_parse_from(["dtmcp", "serve", "--keep-closed-days", "0"]).expect("parses");
        assert_eq!(super::keep_closed_days(&cli).expect("allowed"), Some(0));
        let cli = Cli::try_parse_from(["dtmcp", "logs", "--keep-closed-days", "5", "due"]).expect("parses");
        assert_eq!(super::keep_closed_days(&cli).expect("allowed"), Some(5));
        let cli = Cli::try_parse_from(["dtmcp", "--keep-closed-days", "2"]).expect("parses");
        assert_eq!(super::keep_closed_days(&cli).expect("allowed"), Some(2));
        let cli = Cli::try_parse_from(["dtmcp", "--keep-closed-days", "2", "token"]).expect("parses");
        assert!(super::keep_closed_days(&cli).is_err(), "refused where it does nothing");
    }

    #[test]
    fn skill_takes_a_directory_and_an_optional_plugin_flag() {
        let cli = Cli::try_parse_from(["dtmcp", "skill", "/tmp/x", "--plugin"]).expect("parses");
        assert!(matches!(cli.command, Some(Command::Skill { plugin: true, .. })));
        assert!(Cli::try_parse_from(["dtmcp", "skill"]).is_err(), "skill needs a directory");
    }
}
