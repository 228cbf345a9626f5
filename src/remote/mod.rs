//! `docent-terminal-mcp ssh`, `install` and `into`: the shell integration
//! taken to the shells a session reaches elsewhere.
//!
//! - `ssh [ssh options] [user@]host` runs `ssh -t` with a bootstrap script
//!   as its remote command: the integration is unpacked into a temporary
//!   directory there, the user's shell starts with it, and the directory
//!   goes when that shell exits. Nothing is typed at a prompt and nothing
//!   stays behind.
//! - `install [ssh options] [user@]host` copies the integration to
//!   `~/.local/share/docent-terminal-mcp/vN` there, in one ssh, for the
//!   shells `ssh` cannot start (a `sudo -i`, a second hop), which
//!   `shell_integrate` then loads; `--remove` takes it away.
//! - `into COMMAND...` runs the bootstrap through any command that opens a
//!   shell with a terminal somewhere else (`podman exec -it box`,
//!   `bwrap ... --`): COMMAND is run with `sh -c SCRIPT` appended.
//!
//! The session's secret (`__DTMCP_NONCE`) goes along, so the far shell's
//! markers prove themselves to the local logger like the local shell's;
//! so do `PAGER` and `GIT_PAGER` (a session sets both to `cat`) and
//! `PYTHON_BASIC_REPL` (set to 1), the
//! variables `DOCENT_TERMINAL_MCP_SSH_ENV` names, and the list.
//! `into` hands the secret over in the environment where the carrier is
//! known to pass it on, so it is on no command line; over ssh (and through
//! carriers such as `kubectl exec`) it can only travel in the script, which
//! the local ssh process keeps in its arguments while it runs; on the far
//! side the script runs from a file it removes at once.
//! The scripts are written by [`script`]; the ssh command line is read by
//! [`args`]. Each command replaces this process with ssh or COMMAND, so
//! what holds the pane's terminal is the carrier itself, which the process
//! inspection recognises.

pub mod args;
pub mod script;

use std::os::unix::process::CommandExt;

use anyhow::{Context, bail};

use args::SshArgs;

/// Our own flags `ssh` accepts among the ssh options.
const SSH_FLAGS: &[&str] = &["--print"];
/// Our own flags `install` accepts among the ssh options.
const INSTALL_FLAGS: &[&str] = &["--print", "--remove"];

/// The variables to carry, read from this process's environment, with a
/// warning for each name the list gives that cannot be carried.
fn carried_here(extra: &[&str]) -> Vec<(String, String)> {
    let (vars, skipped) = script::carried(|k| std::env::var(k).ok(), extra);
    for name in skipped {
        eprintln!(
            "docent-terminal-mcp: {} names {name:?}, which is not carried (not a variable name, or one the far side sets itself)",
            script::ENV_SSH_ENV
        );
    }
    vars
}

/// The ssh argv for `a` with `remote` as its remote command; `tty` asks
/// for a terminal (`-t`) unless the options already do, else none (`-T`).
pub fn ssh_argv(a: &SshArgs, remote: &str, tty: bool) -> Vec<String> {
    let mut argv = vec!["ssh".to_string()];
    if !tty {
        argv.push("-T".into());
    } else if !a.options.iter().any(|o| o == "-t" || o == "-tt") {
        argv.push("-t".into());
    }
    argv.extend(a.options.iter().cloned());
    argv.extend(["--".to_string(), a.destination.clone(), remote.to_string()]);
    argv
}

/// An argv as one line a person can read and paste, with the remote
/// command (the last word) shown as `shown_last`.
fn show(argv: &[String], shown_last: &str) -> String {
    let mut words: Vec<String> = argv[..argv.len().saturating_sub(1)].iter().map(|w| script::quote(w)).collect();
    words.push(shown_last.to_string());
    words.join(" ")
}

/// `docent-terminal-mcp ssh`: an integrated shell on the far host.
pub fn ssh(words: &[String], print: bool) -> anyhow::Result<()> {
    let a = args::parse(words, SSH_FLAGS).map_err(anyhow::Error::msg)?;
    let print = print || a.has("--print");
    let vars = carried_here(&[]);
    if print {
        let script = script::bootstrap(crate::shell::FILES, &script::masked(&vars));
        let argv = ssh_argv(&a, "", true);
        println!("# the ssh command; its remote command carries the script below, base64-encoded:");
        println!("{}", show(&argv, "'sh -c '\\''b=BASE64-OF-THE-SCRIPT; ...'\\'''"));
        println!("# the script ({} bytes):", script.len());
        print!("{script}");
        return Ok(());
    }
    let script = script::bootstrap(crate::shell::FILES, &vars);
    exec(&ssh_argv(&a, &script::remote_command(&script), true))
}

/// `docent-terminal-mcp install [--remove]`: the integration copied to (or
/// removed from) the far host's `~/.local/share/docent-terminal-mcp`.
pub fn install(words: &[String], print: bool, remove: bool) -> anyhow::Result<()> {
    let a = args::parse(words, INSTALL_FLAGS).map_err(anyhow::Error::msg)?;
    let (print, remove) = (print || a.has("--print"), remove || a.has("--remove"));
    let script = if remove { script::remover() } else { script::installer(crate::shell::FILES) };
    if print {
        let argv = ssh_argv(&a, "", false);
        println!("# the ssh command; its remote command carries the script below, base64-encoded:");
        println!("{}", show(&argv, "'sh -c '\\''b=BASE64-OF-THE-SCRIPT; ...'\\'''"));
        if !remove {
            println!("# the files, into {}:", script::install_dir_sh());
            for (name, body) in crate::shell::FILES {
                println!("#   {name} ({} bytes)", body.len());
            }
        }
        println!("# the script ({} bytes):", script.len());
        print!("{script}");
        return Ok(());
    }
    let argv = ssh_argv(&a, &script::remote_command(&script), false);
    let status = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .status()
        .with_context(|| format!("cannot run {}: is it installed and on PATH?", argv[0]))?;
    if !status.success() {
        bail!("ssh {} ended with {status}; nothing is known to have changed there", a.destination);
    }
    if !remove {
        forget_missing(&a.destination);
    }
    Ok(())
}

/// Clears what `shell_integrate` remembered about `destination` missing
/// the files, under the key it uses (`user@host`, or the host alone); a
/// destination without a user is the local user's login there.
fn forget_missing(destination: &str) {
    let Ok(cfg) = crate::config::Config::from_env() else { return };
    let mut keys = vec![destination.to_string()];
    if !destination.contains('@')
        && let Ok(user) = std::env::var("USER").or_else(|_| std::env::var("LOGNAME"))
    {
        keys.push(format!("{user}@{destination}"));
    }
    for key in keys {
        if let Err(e) = crate::hosts::forget_missing(&cfg.home, &key) {
            eprintln!("docent-terminal-mcp: installed, but could not update {}: {e}", crate::hosts::MISSING_FILE);
        }
    }
}

/// `docent-terminal-mcp into COMMAND...`: COMMAND runs the bootstrap as
/// `COMMAND... sh -c SCRIPT`.
pub fn into(command: &[String], print: bool) -> anyhow::Result<()> {
    let Some(first) = command.first() else {
        bail!("name the command that opens a shell elsewhere, e.g. into podman exec -it box");
    };
    if first.starts_with('-') {
        bail!("{first:?} is not a command; put our own options (--print) before the command");
    }
    let mut vars = carried_here(&["TERM"]);
    let command = &secret_by_environment(command, &mut vars);
    if print {
        let script = script::bootstrap(crate::shell::FILES, &script::masked(&vars));
        let mut argv = command.to_vec();
        argv.extend(["sh".to_string(), "-c".to_string(), String::new()]);
        println!("# the command:");
        println!("{}", show(&argv, "\"$SCRIPT\""));
        println!("# SCRIPT ({} bytes):", script.len());
        print!("{script}");
        return Ok(());
    }
    let mut argv = command.to_vec();
    argv.extend(["sh".to_string(), "-c".to_string(), script::bootstrap(crate::shell::FILES, &vars)]);
    exec(&argv)
}

/// Commands known to hand their environment to the command they run.
const PASS_ENVIRONMENT: &[&str] =
    &["sh", "bash", "dash", "zsh", "env", "bwrap", "unshare", "nsenter", "chroot", "firejail", "setpriv"];
/// Container tools whose `exec` passes a variable named by `-e NAME`.
const EXEC_WITH_E: &[&str] = &["podman", "docker", "nerdctl"];

/// `command` made to carry the session's secret in its environment rather
/// than in the script, where every user's `ps` would show it: kept as it is
/// when it passes its environment on, given `-e __DTMCP_NONCE` when it is a
/// container tool's `exec`. For any other command the secret stays in
/// `vars`, to go in the script, as nothing else is known to reach the far
/// side.
fn secret_by_environment(command: &[String], vars: &mut Vec<(String, String)>) -> Vec<String> {
    let base = |w: &String| w.rsplit('/').next().unwrap_or(w).to_string();
    let first = command.first().map(base).unwrap_or_default();
    let mut out = command.to_vec();
    if EXEC_WITH_E.contains(&first.as_str()) && command.get(1).is_some_and(|w| w == "exec") {
        out.splice(2..2, ["-e".to_string(), "__DTMCP_NONCE".to_string()]);
    } else if !PASS_ENVIRONMENT.contains(&first.as_str()) {
        return out;
    }
    vars.retain(|(k, _)| k != "__DTMCP_NONCE");
    out
}

/// The directory put first on a session's PATH: it holds the command
/// (`docent-terminal-mcp`) as a link to this very binary, so `ssh`,
/// `install` and `into` can be run in any session. The link is made (or
/// pointed again, after an upgrade moved the binary) atomically.
pub fn install_shim(home: &std::path::Path) -> std::io::Result<std::path::PathBuf> {
    let bin = home.join("bin");
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700).create(&bin)?;
    let target = crate::config::sibling_binary("docent-terminal-mcp").map_err(std::io::Error::other)?;
    let link = bin.join("docent-terminal-mcp");
    if std::fs::read_link(&link).is_ok_and(|t| t == target) {
        return Ok(bin);
    }
    let tmp = bin.join(format!(".docent-terminal-mcp.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&target, &tmp)?;
    std::fs::rename(&tmp, &link)?;
    Ok(bin)
}

/// Whether the command line `cmd` (a session's program) runs our `ssh` or
/// `into`, so that the shell it leads to is integrated.
pub fn brings_integration(cmd: &str) -> bool {
    let mut words = cmd.split_whitespace();
    let program = words.next().map(|w| w.rsplit('/').next().unwrap_or(w));
    matches!(program, Some("docent-terminal-mcp" | "dtmcp")) && matches!(words.next(), Some("into" | "ssh"))
}

/// Replaces this process with `argv`; returns only when that failed.
fn exec(argv: &[String]) -> anyhow::Result<()> {
    let err = std::process::Command::new(&argv[0]).args(&argv[1..]).exec();
    Err(err).with_context(|| format!("cannot run {}: is it installed and on PATH?", argv[0]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn ssh_asks_for_a_terminal_once_and_keeps_the_options_in_order() {
        let a = args::parse(&words("-p 2222 -i key me@box"), SSH_FLAGS).expect("parses");
        assert_eq!(ssh_argv(&a, "CMD", true), words("ssh -t -p 2222 -i key -- me@box CMD"));
        let a = args::parse(&words("-t box"), SSH_FLAGS).expect("parses");
        assert_eq!(ssh_argv(&a, "CMD", true), words("ssh -t -- box CMD"));
        assert_eq!(ssh_argv(&a, "CMD", false)[..2], words("ssh -T"));
    }

    #[test]
    fn session_programs_that_bring_the_integration() {
        assert!(brings_integration("docent-terminal-mcp into podman exec -it box"));
        assert!(brings_integration("/opt/bin/dtmcp ssh -p 2 box"));
        assert!(!brings_integration("docent-terminal-mcp install box"));
        assert!(!brings_integration("ssh box"));
    }

    #[test]
    fn the_secret_goes_by_environment_where_the_carrier_passes_it() {
        let vars = || vec![("__DTMCP_NONCE".to_string(), "1.2.3.4".to_string()), ("TERM".into(), "xterm".into())];
        let mut v = vars();
        assert_eq!(secret_by_environment(&words("/usr/bin/bwrap --ro-bind / / --"), &mut v)[0], "/usr/bin/bwrap");
        assert_eq!(v.len(), 1, "left out of the script");
        let mut v = vars();
        assert_eq!(
            secret_by_environment(&words("podman exec -it box"), &mut v),
            words("podman exec -e __DTMCP_NONCE -it box")
        );
        assert_eq!(v.len(), 1);
        let mut v = vars();
        assert_eq!(secret_by_environment(&words("kubectl exec -it pod --"), &mut v), words("kubectl exec -it pod --"));
        assert_eq!(v.len(), 2, "nothing else reaches the far side");
    }

    #[test]
    fn shown_commands_quote_what_needs_it() {
        let argv = words("ssh -t -o x -- box last");
        assert_eq!(show(&argv, "SCRIPT"), "ssh -t -o x -- box SCRIPT");
        let argv = vec!["bwrap".to_string(), "a b".to_string(), "x".to_string()];
        assert_eq!(show(&argv, "S"), "bwrap 'a b' S");
    }
}
