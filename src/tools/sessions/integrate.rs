//! `shell_integrate`: adds the shell integration to a bash or zsh that
//! could not inherit it (one reached by ssh, `su -`, `sudo -i`, or started
//! with a clean environment).
//!
//! It first learns which shell is at the prompt -- from `/proc` when the
//! pane's foreground job is a shell on this host, otherwise by typing one
//! harmless `echo` that each shell answers in its own way -- and then
//! types one readable line that loads the integration and hands the shell
//! the session's secret. It types nothing where the shell already marks
//! its prompts, and nothing into fish or a plain `sh`, which it names.
//!
//! Where the files are: the server's own `shell/` directory on this host
//! when the user at the prompt can read it, else
//! `~/.local/share/docent-terminal-mcp/vN` on that host, where
//! `docent-terminal-mcp install` puts them. A host found without them is
//! remembered for 12 hours (see [`crate::hosts`]).

use std::fmt::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{schemars, tool, tool_router};
use serde::Deserialize;

use crate::session::{LoggerClient, Session};
use crate::shell::Shell;
use crate::tools::Terminal;
use crate::tools::typing::target;
use crate::tools::{Refusal, ToolError};
use dtmcp_core::procs::{Activity, Job};
use dtmcp_core::protocol::{Status, WaitReason, WaitSpec};

/// How long the shell may take to answer the question or load the file.
const ANSWER_MS: u64 = 5_000;

/// Arguments of `shell_integrate`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IntegrateParams {
    /// The session's name, as session_create or session_list gave it.
    pub session: String,
    /// Type the line even though the files were found missing on that host in the last 12 hours (say, after running docent-terminal-mcp install there).
    #[serde(default)]
    pub retry: bool,
}

/// The answer to the question typed at an unknown prompt: the shell's
/// `$0`. The two halves of the tag are quoted apart so that the echo of
/// the typed line never matches.
const QUESTION: &str = r#"echo "dtmcp-""shell $0 ${BASH_VERSION-} ${ZSH_VERSION-}""#;
static ANSWER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"dtmcp-shell (\S+)").expect("regex"));
/// What a shell says when `.` finds no file.
const NOT_THERE: &str = r"(?i)no such file|can't open|cannot open|not found";

/// Which shell is at a prompt, as far as it can be told.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Found {
    /// One the integration knows.
    Known(Shell),
    /// fish, sh, dash, ksh, tcsh, ... by name.
    Other(String),
    /// It did not say.
    Unknown,
}

/// Whether the tool typed the integration line, and what came of it.
enum Loaded {
    /// The shell showed a marked prompt.
    Yes,
    /// The shell said the file is not there.
    Missing,
    /// Neither within the time allowed.
    NoSign,
}

#[tool_router(router = integrate_router, vis = "pub(crate)")]
impl Terminal {
    /// Adds the shell integration to the shell at a session's prompt.
    #[tool(
        name = "shell_integrate",
        description = crate::docent::texts::tool::SHELL_INTEGRATE.trim_end(),
        meta = crate::tools::always_load()
    )]
    pub async fn shell_integrate(&self, Parameters(p): Parameters<IntegrateParams>) -> CallToolResult {
        let name = p.session.clone();
        self.call(crate::tools::ToolName::ShellIntegrate, Some(&name), self.integrate_body(p)).await
    }
}

impl Terminal {
    async fn integrate_body(&self, p: IntegrateParams) -> Result<String, ToolError> {
        let s = self.sessions().resolve(&p.session).await?;
        let mut logger = self.sessions().logger(&s).await?;
        // A command that has just ended: its shell's next prompt is a moment away.
        let status = crate::tools::typing::target::ready_status(&s, &mut logger).await?;
        if status.eof {
            return Err(Refusal::Ended { session: s.name.clone() }.into());
        }
        if status.shell.integrated && status.shell.at_prompt {
            return Ok(already(&s, &status));
        }
        let job = target::with_busy_grace(|| waiting_job(&s))
            .await
            .map_err(|why| Refusal::NotReady { session: s.name.clone(), why })?;
        let host = host_key(&job);
        let found = match local_shell(&job) {
            Some(found) => found,
            None => self.ask(&s, &mut logger).await?,
        };
        let shell = match found {
            Found::Known(shell) => shell,
            Found::Other(name) => {
                return Err(Refusal::Integration { session: s.name.clone(), why: unsupported(&s.name, &name) }.into());
            }
            Found::Unknown => {
                let why = format!(
                    "could not tell which shell is at {}'s prompt (it did not answer `{QUESTION}`); nothing was typed. If it is bash or zsh, load the integration yourself: {}",
                    s.name,
                    line_for(Shell::Bash, &self.files_dir(&job), "…").replace("…", "<secret>")
                );
                return Err(Refusal::Integration { session: s.name.clone(), why }.into());
            }
        };
        let home = &self.sessions().cfg.home;
        let now = crate::config::now_ms();
        let dir = self.files_dir(&job);
        let remote = dir.starts_with('~');
        if remote && !p.retry && crate::hosts::missing_since(home, &host, now).is_some() {
            let why = missing(&s.name, &host, shell, Learned::Earlier);
            return Err(Refusal::Integration { session: s.name.clone(), why }.into());
        }
        let secret = std::fs::read_to_string(s.dir.join(dtmcp_core::store::files::SECRET))
            .map_err(|e| ToolError::Failed(format!("reading the session's secret: {e}")))?;
        let line = line_for(shell, &dir, secret.trim());
        match self.load(&s, &mut logger, &line).await? {
            Loaded::Yes => {
                if remote {
                    let _ = crate::hosts::forget_missing(home, &host);
                }
                let status = logger.status().await?;
                let mut out = format!("{} now has the shell integration ({}", s.name, shell.name());
                if !status.shell.host.is_empty() {
                    let _ = write!(out, " as {}@{}", status.shell.user, status.shell.host);
                }
                let _ = write!(
                    out,
                    ", from {dir}): run reports exit statuses there from now on. A {} started inside inherits it; exiting this shell returns to the one before.",
                    if shell == Shell::Bash { "bash or zsh" } else { "zsh or bash" }
                );
                Ok(out)
            }
            Loaded::Missing if remote => {
                crate::hosts::remember_missing(home, &host, now).map_err(|e| {
                    ToolError::Failed(format!("the files are missing on {host}, and remembering that failed: {e}"))
                })?;
                Err(ToolError::Failed(missing(&s.name, &host, shell, Learned::Now)))
            }
            Loaded::Missing => Err(ToolError::Failed(format!(
                "{} could not read {dir}/{}; the server's shell directory may be gone (a restart of the server writes it again). Nothing else was changed.",
                s.name,
                shell.script()
            ))),
            Loaded::NoSign => Err(ToolError::Failed(format!(
                "typed `{}` in {}, but no marked prompt came within {} s. The shell may be older than bash 4.4 or zsh 5.3, or still busy: look with read session={} view=\"screen\".",
                line.replace(secret.trim(), "<secret>").trim(),
                s.name,
                ANSWER_MS / 1000,
                s.name
            ))),
        }
    }

    /// Types the question and reads which shell answered.
    async fn ask(&self, s: &Session, logger: &mut LoggerClient) -> Result<Found, ToolError> {
        let before = logger.status().await?;
        self.type_integration_line(s, QUESTION).await?;
        let spec = WaitSpec {
            after: before.mark,
            pattern: Some(r"dtmcp-shell \S|fish:|Unknown command|command not found".into()),
            timeout_ms: ANSWER_MS,
            ..WaitSpec::default()
        };
        let (_, after) = logger.wait(spec).await?;
        // Let the shell's next prompt come, so the line typed next is not
        // typed into the middle of the answer.
        let settle = WaitSpec { after: after.mark, settle_ms: Some(150), timeout_ms: 1_000, ..WaitSpec::default() };
        let _ = logger.wait(settle).await;
        let count = after.mark.line.0.saturating_sub(before.mark.line.0) + 2;
        let lines = logger.read(before.mark.line, count).await?;
        Ok(answer(&lines))
    }

    /// Types the line loading the integration and waits for a marked prompt
    /// or the shell's word that the file is missing.
    async fn load(&self, s: &Session, logger: &mut LoggerClient, line: &str) -> Result<Loaded, ToolError> {
        let before = logger.status().await?;
        self.type_integration_line(s, line).await?;
        let spec = WaitSpec {
            after: before.mark,
            command_done: true,
            pattern: Some(NOT_THERE.into()),
            timeout_ms: ANSWER_MS,
            ..WaitSpec::default()
        };
        let (reason, status) = logger.wait(spec).await?;
        Ok(match reason {
            WaitReason::Matched(_) => Loaded::Missing,
            _ if status.shell.integrated && status.mark.prompts > before.mark.prompts => Loaded::Yes,
            _ => Loaded::NoSign,
        })
    }

    async fn type_integration_line(&self, s: &Session, line: &str) -> Result<(), ToolError> {
        let tmux = &self.sessions().tmux;
        let pane = s.pane.pane_id.as_str();
        // Keys sent to a pane in copy mode are swallowed; out of a mode
        // this fails harmlessly.
        let _ = tmux.leave_mode(pane).await;
        tmux.send_text(pane, line).await?;
        Ok(tmux.send_enter(pane).await?)
    }

    /// Where the shell at the prompt finds the scripts: the server's own
    /// directory when that shell runs here as a user who can read it,
    /// else the directory `docent-terminal-mcp install` fills on its host.
    fn files_dir(&self, job: &Job) -> String {
        let ours = crate::shell::dir(&self.sessions().cfg.home);
        let here = job.place.host.is_none();
        let readable = match job.place.user.as_deref() {
            None | Some("root") => true,
            Some(_) => world_readable(&ours.join("integration.bash")),
        };
        if here && readable {
            return ours.display().to_string();
        }
        format!("~/.local/share/docent-terminal-mcp/v{}", crate::shell::INTEGRATION_VERSION)
    }
}

/// The pane's foreground job if it is waiting for input, else why not.
fn waiting_job(s: &Session) -> Result<Job, String> {
    let job = target::job(s)?;
    if job.activity != Activity::WaitingForInput {
        return Err(format!(
            "{} is not at a shell's prompt: {}. shell_integrate types at a prompt; wait for the command (wait session={}) or stop it (send keys=[\"ctrl+c\"]) first",
            s.name,
            job.line(),
            s.name
        ));
    }
    Ok(job)
}

/// The reply where the shell at the prompt marks its prompts already.
fn already(s: &Session, status: &Status) -> String {
    let place = match status.shell.host.is_empty() {
        true => String::new(),
        false => format!(" as {}@{}", status.shell.user, status.shell.host),
    };
    format!(
        "nothing typed: the shell at {}'s prompt (pid {}{place}) has the shell integration already, and run reports its exit statuses",
        s.name, status.shell.pid
    )
}

/// The reply for a shell the integration does not cover.
fn unsupported(session: &str, name: &str) -> String {
    let what = match name {
        "fish" => "fish, which the shell integration does not cover yet".to_string(),
        "sh" | "dash" | "ash" | "ksh" | "mksh" | "tcsh" | "csh" => format!("{name}, which has no shell integration"),
        other => format!("`{other}`, not a shell the integration knows"),
    };
    format!(
        "nothing typed: the shell at {session}'s prompt is {what}. It still works by prompt matching, without exit statuses (end commands with `; echo \"exit=$?\"` and wait with until=\"exit=\"{}). For exact statuses start bash or zsh there (run command=\"bash\") and call shell_integrate again.",
        if name == "fish" { ", `$status` in fish" } else { "" }
    )
}

/// When a host was found without the integration files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Learned {
    /// In the last 12 hours, as remembered: nothing was typed this time.
    Earlier,
    /// Just now: the shell said the file is not there.
    Now,
}

/// The reply for a host without the files.
fn missing(session: &str, host: &str, shell: Shell, learned: Learned) -> String {
    let when = match learned {
        Learned::Earlier => "was found without the integration files in the last 12 hours, so nothing was typed",
        Learned::Now => {
            "has no integration files (the shell said the file is not there); this is remembered for 12 hours"
        }
    };
    format!(
        "{host} {when}. Ask the user to run `docent-terminal-mcp install {host}` on the server's host once (it copies them to ~/.local/share/docent-terminal-mcp/v{}), then call shell_integrate session={session} retry=true. Until then the {} in {session} works by prompt matching, without exit statuses.",
        crate::shell::INTEGRATION_VERSION,
        shell.name()
    )
}

/// The line that loads `shell`'s integration from `dir` and hands it the
/// secret. It starts with a blank, which keeps it out of the history of
/// shells set to ignore such lines.
fn line_for(shell: Shell, dir: &str, nonce: &str) -> String {
    let file = format!("{dir}/{}", shell.script());
    let file = match file.strip_prefix("~/") {
        Some(rest) => format!("~/{}", quote(rest)),
        None => quote(&file),
    };
    format!(" . {file} && export __DTMCP_NONCE={nonce}")
}

/// `s` as one shell word: as it is when it holds nothing special, in
/// single quotes otherwise.
fn quote(s: &str) -> String {
    let plain = s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+,:@%".contains(c));
    match plain && !s.is_empty() {
        true => s.to_string(),
        false => format!("'{}'", s.replace('\'', r"'\''")),
    }
}

/// The shell at the prompt when `/proc` can tell: a shell program on this
/// host holding the terminal. `None` means it has to be asked (a carrier
/// such as ssh, or a program of unknown name).
fn local_shell(job: &Job) -> Option<Found> {
    if job.place.host.is_some() {
        return None;
    }
    let name = job.comm.as_str();
    if let Some(shell) = Shell::from_program(name) {
        return Some(Found::Known(shell));
    }
    const OTHERS: [&str; 8] = ["fish", "sh", "dash", "ash", "ksh", "mksh", "tcsh", "csh"];
    OTHERS.contains(&name).then(|| Found::Other(name.to_string()))
}

/// Reads the shell's answer to [`QUESTION`] from the lines after it.
fn answer(lines: &[String]) -> Found {
    if let Some(name) = lines.iter().find_map(|l| ANSWER.captures(l)).map(|c| c[1].to_string()) {
        return match Shell::from_program(&name) {
            Some(shell) => Found::Known(shell),
            None => Found::Other(name.rsplit('/').next().unwrap_or(&name).trim_start_matches('-').to_string()),
        };
    }
    if lines.iter().any(|l| l.contains("fish:") || l.contains("fish: Unknown command")) {
        return Found::Other("fish".into());
    }
    Found::Unknown
}

/// The key a host is remembered under: `user@host` when the user is
/// known, else the host; a local shell of another user is `user@localhost`.
fn host_key(job: &Job) -> String {
    match (&job.place.host, &job.place.user) {
        (Some(h), Some(u)) => format!("{u}@{h}"),
        (Some(h), None) => h.clone(),
        (None, Some(u)) => format!("{u}@localhost"),
        (None, None) => "localhost".into(),
    }
}

/// Whether every user can read `file`: the file readable by others and
/// each directory above it searchable by them.
fn world_readable(file: &Path) -> bool {
    let mode = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode()).unwrap_or(0);
    mode(file) & 0o004 != 0 && file.ancestors().skip(1).all(|d| d.as_os_str().is_empty() || mode(d) & 0o001 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_readable_and_quote_only_what_needs_it() {
        assert_eq!(
            line_for(Shell::Bash, "/s/shell/v2", "1.2.3.4"),
            " . /s/shell/v2/integration.bash && export __DTMCP_NONCE=1.2.3.4"
        );
        assert_eq!(
            line_for(Shell::Zsh, "~/.local/share/docent-terminal-mcp/v2", "1.2.3.4"),
            " . ~/.local/share/docent-terminal-mcp/v2/integration.zsh && export __DTMCP_NONCE=1.2.3.4"
        );
        assert_eq!(
            line_for(Shell::Bash, "/a b/it's", "9"),
            r" . '/a b/it'\''s/integration.bash' && export __DTMCP_NONCE=9"
        );
    }

    #[test]
    fn answers_name_the_shell() {
        let l = |s: &str| vec!["$ echo \"dtmcp-\"\"shell $0\"".to_string(), s.to_string()];
        assert_eq!(answer(&l("dtmcp-shell -bash 5.2.15(1)-release ")), Found::Known(Shell::Bash));
        assert_eq!(answer(&l("dtmcp-shell zsh  5.9")), Found::Known(Shell::Zsh));
        assert_eq!(answer(&l("dtmcp-shell -sh  ")), Found::Other("sh".into()));
        assert_eq!(answer(&l("fish: ${ is not a valid variable in fish.")), Found::Other("fish".into()));
        assert_eq!(answer(&l("")), Found::Unknown);
    }

    #[test]
    fn hosts_are_keyed_by_user_and_host() {
        let job = |host: Option<&str>, user: Option<&str>| Job {
            pgid: 1,
            comm: "ssh".into(),
            own_shell: false,
            activity: Activity::WaitingForInput,
            reason: String::new(),
            reader: String::new(),
            password: false,
            place: dtmcp_core::procs::Place {
                host: host.map(str::to_string),
                user: user.map(str::to_string),
                via: Vec::new(),
                carrier: None,
            },
        };
        assert_eq!(host_key(&job(Some("box"), Some("ann"))), "ann@box");
        assert_eq!(host_key(&job(Some("box"), None)), "box");
        assert_eq!(host_key(&job(None, Some("bob"))), "bob@localhost");
        assert_eq!(local_shell(&job(Some("box"), None)), None, "over ssh it must be asked");
    }
}
