//! Turning an argument vector into what tmux reads back as the same vector.
//!
//! Two readers exist. A control client's stdin is parsed like a line of a
//! configuration file (tmux's `cmd-parse.y`): whitespace splits words, `;`
//! separates commands, `#` starts a comment, `$X` and a leading `~` expand,
//! `{` opens a block, quotes group. [`quote_arg`] wraps any word that is not
//! plainly safe in double quotes, where `\`, `"`, `$` and a leading `~` are
//! still special (tmux expands `"~/x"` to the home directory) and backslash
//! escapes exist for everything:
//!
//! - `\\`, `\"`, `\$` and `\~` stand for themselves (every `~` is escaped);
//! - control characters (`\n`, `\r`, `\t`, `\x1b`, …, and DEL) are written as
//!   three-digit octal escapes (`\012`), which the parser turns back into the
//!   byte, so a newline never reaches the line-based control protocol raw;
//! - everything else, UTF-8 included, is copied as is.
//!
//! NUL cannot be carried at all (tmux's strings are C strings), so
//! [`command_line`] refuses it.
//!
//! A spawned `tmux` gets its arguments as argv and parses no quotes, but an
//! argument ending in `;` still ends a command there; [`argv_literal`] escapes
//! that one case so that both paths take every argument literally.

use std::fmt::Write as _;

/// Quotes one argument so that tmux's command parser reads it back as exactly
/// `s`. Plain words (letters, digits and `_-./:,+@`) are left bare.
pub fn quote_arg(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(is_plain) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' | '"' | '$' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_ascii_control() => {
                // Writing to a String cannot fail.
                let _ = write!(out, "\\{:03o}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Bytes that mean nothing to the parser anywhere in a word.
fn is_plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"_-./:,+@".contains(&b)
}

/// Why a command was not sent.
pub(crate) type Refusal = String;

/// One control-mode line (with its `\n`) that runs the command `args`, every
/// argument quoted. Refuses an empty command (an empty line would detach the
/// control client) and NUL bytes (tmux cannot carry them).
pub(crate) fn command_line(args: &[&str]) -> Result<String, Refusal> {
    check_args(args)?;
    let mut line = String::with_capacity(args.iter().map(|a| a.len() + 3).sum());
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        line.push_str(&quote_arg(arg));
    }
    line.push('\n');
    Ok(line)
}

/// The checks every path applies before a command leaves this process.
pub(crate) fn check_args(args: &[&str]) -> Result<(), Refusal> {
    if args.is_empty() {
        return Err("no command given".to_string());
    }
    match args.iter().position(|a| a.contains('\0')) {
        Some(i) => Err(format!("argument {i} holds a NUL byte, which tmux cannot carry")),
        None => Ok(()),
    }
}

/// The argv for a spawned `tmux` that reads every argument literally: an
/// argument ending in `;` would otherwise end the command, so its last `;`
/// becomes `\;`, which tmux turns back into `;`.
pub(crate) fn argv_literal(args: &[&str]) -> Vec<String> {
    args.iter()
        .map(|a| match a.strip_suffix(';') {
            Some(head) => format!("{head}\\;"),
            None => a.to_string(),
        })
        .collect()
}

/// Commands that must not go over the shared control client, each with a
/// reason:
///
/// - they attach, detach or move the calling client, which over control mode
///   is our control client (`attach-session`, `new-session`, `switch-client`,
///   `detach-client`, `suspend-client`, `lock-client`);
/// - they run other commands later, whose output arrives as extra reply
///   blocks and would shift every later answer (`if-shell`, `run-shell`,
///   `source-file`, `confirm-before`, `command-prompt`, the menus, popups and
///   choosers);
/// - they can hold the client's command queue for as long as they like
///   (`wait-for` without `-S`, `run-shell`).
///
/// Each pair is the full name and its alias (empty when none).
const OWN_PROCESS: &[(&str, &str)] = &[
    ("attach-session", "attach"),
    ("new-session", "new"),
    ("switch-client", "switchc"),
    ("detach-client", "detach"),
    ("suspend-client", "suspendc"),
    ("lock-client", "lockc"),
    ("if-shell", "if"),
    ("run-shell", "run"),
    ("source-file", "source"),
    ("confirm-before", "confirm"),
    ("command-prompt", ""),
    ("display-menu", "menu"),
    ("display-popup", "popup"),
    ("choose-tree", ""),
    ("choose-client", ""),
    ("choose-buffer", ""),
    ("wait-for", "wait"),
];

/// Names or aliases of harmless commands that are also prefixes of a name in
/// [`OWN_PROCESS`] (tmux prefers an exact alias to a prefix match).
const SAFE_PREFIXES: &[&str] = &["display", "display-message"];

/// Whether `args` is a tmux command that only reads (lists, shows,
/// captures, prints), so that sending it twice changes nothing. Only full
/// names and tmux's own aliases count: the router writes them out.
pub(crate) fn only_reads(args: &[&str]) -> bool {
    const READERS: &[&str] = &[
        "list-panes",
        "lsp",
        "list-sessions",
        "ls",
        "list-windows",
        "lsw",
        "list-clients",
        "lsc",
        "has-session",
        "has",
        "show-options",
        "show",
        "capture-pane",
        "capturep",
        "show-buffer",
        "showb",
    ];
    match args.first() {
        Some(&("display-message" | "display")) => args.contains(&"-p"),
        Some(first) => READERS.contains(first),
        None => false,
    }
}

/// Whether `args` must run as a spawned `tmux` rather than over the control
/// client (see [`OWN_PROCESS`]). tmux accepts any unique prefix of a command
/// name, so a prefix of a listed name counts too; an ambiguous prefix is
/// spawned and tmux reports it.
pub(crate) fn needs_own_process(args: &[&str]) -> bool {
    let Some(&name) = args.first() else {
        return false;
    };
    if SAFE_PREFIXES.contains(&name) {
        return false;
    }
    if is_wait_for(name) && matches!(args.get(1), Some(&"-S") | Some(&"-U")) {
        // Signalling and unlocking never block.
        return false;
    }
    OWN_PROCESS.iter().any(|&(full, alias)| name == alias || (!name.is_empty() && full.starts_with(name)))
}

fn is_wait_for(name: &str) -> bool {
    name == "wait" || (name.len() >= 2 && "wait-for".starts_with(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::list(&["list-panes", "-a"], true)]
    #[case::print(&["display", "-p", "#{pid}"], true)]
    #[case::message(&["display", "hello"], false)]
    #[case::send(&["send-keys", "-t", "%1", "x"], false)]
    #[case::kill(&["kill-session", "-t", "=a"], false)]
    #[case::nothing(&[], false)]
    fn only_questions_are_asked_again(#[case] args: &[&str], #[case] reads: bool) {
        assert_eq!(only_reads(args), reads);
    }

    #[rstest]
    #[case::plain("abc", "abc")]
    #[case::target_chars("dtmcp-t_1.2:x,y+z@w", "dtmcp-t_1.2:x,y+z@w")]
    #[case::empty("", "\"\"")]
    #[case::space("a b", "\"a b\"")]
    #[case::semicolon(";", "\";\"")]
    #[case::pane_id("%12", "\"%12\"")]
    #[case::exact_target("=t1", "\"=t1\"")]
    #[case::dollar("$HOME", "\"\\$HOME\"")]
    #[case::tilde("~/x~", "\"\\~/x\\~\"")]
    #[case::quotes("a\"b'c", "\"a\\\"b'c\"")]
    #[case::backslash("a\\b", "\"a\\\\b\"")]
    #[case::newline("a\nb", "\"a\\012b\"")]
    #[case::tab_esc_del("\t\x1b\x7f", "\"\\011\\033\\177\"")]
    #[case::utf8("é€😀", "\"é€😀\"")]
    fn quoting(#[case] input: &str, #[case] quoted: &str) {
        assert_eq!(quote_arg(input), quoted);
    }

    #[test]
    fn command_line_quotes_each_word_and_ends_the_line() {
        assert_eq!(
            command_line(&["send-keys", "-t", "%1", "-l", "--", "a b;"]),
            Ok("send-keys -t \"%1\" -l -- \"a b;\"\n".to_string())
        );
    }

    #[rstest]
    #[case::empty(&[])]
    #[case::nul(&["display", "-p", "a\0b"])]
    fn command_line_refuses(#[case] args: &[&str]) {
        assert!(command_line(args).is_err());
    }

    #[test]
    fn argv_escapes_only_a_trailing_semicolon() {
        assert_eq!(argv_literal(&[";", "a;", "a\\;", "a;b", "x"]), ["\\;", "a\\;", "a\\\\;", "a;b", "x"]);
    }

    #[rstest]
    #[case::new_session(&["new-session", "-d"], true)]
    #[case::new_alias(&["new", "-d"], true)]
    #[case::attach_prefix(&["attach"], true)]
    #[case::if_shell(&["if-shell", "true", "x"], true)]
    #[case::if_prefix(&["if-s", "true", "x"], true)]
    #[case::run(&["run", "true"], true)]
    #[case::wait(&["wait-for", "chan"], true)]
    #[case::wait_lock(&["wait-for", "-L", "chan"], true)]
    #[case::wait_signal(&["wait-for", "-S", "chan"], false)]
    #[case::wait_alias_signal(&["wait", "-S", "chan"], false)]
    #[case::display(&["display", "-p", "x"], false)]
    #[case::display_message(&["display-message", "-p", "x"], false)]
    #[case::display_popup(&["display-popup"], true)]
    #[case::send_keys(&["send-keys", "-t", "%1", "x"], false)]
    #[case::new_window(&["new-window", "-d"], false)]
    #[case::neww(&["neww", "-d"], false)]
    #[case::list_panes(&["list-panes", "-a"], false)]
    #[case::kill_server(&["kill-server"], false)]
    fn routing(#[case] args: &[&str], #[case] spawned: bool) {
        assert_eq!(needs_own_process(args), spawned, "{args:?}");
    }
}
