//! The POSIX sh scripts that carry the shell integration to another host
//! or into a container: the bootstrap (unpack into a temporary directory,
//! start the user's shell with it, leave nothing behind), the installer
//! and the remover. Pure text generation, so each script is tested as text
//! and, in the end-to-end tests, by running it.
//!
//! The scripts need nothing beyond a POSIX `sh`, `mkdir`, `cat`, `rm` and
//! (for the bootstrap) `mktemp`, with a fallback when it is missing. Over
//! ssh they travel base64-encoded inside the remote command (see
//! [`remote_command`]), because the far side hands that command to the
//! user's login shell, which may be csh or fish: the encoded form holds no
//! character any of them treats specially.

use std::fmt::Write;

use crate::shell::INTEGRATION_VERSION;

/// The line that ends each file's here-document.
const EOF: &str = "__DTMCP_EOF__";

/// Variables never carried across: they describe the far side, which sets
/// them itself (or, for the integration's own, works them out again).
const NOT_CARRIED: &[&str] = &[
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "PWD",
    "OLDPWD",
    "PATH",
    "HOSTNAME",
    "MAIL",
    "__DTMCP_TTY",
    "__DTMCP_K0",
    "__DTMCP_K1",
    "__DTMCP_K2",
    "__DTMCP_K3",
];

/// The variable naming what else to carry across a hop.
pub const ENV_SSH_ENV: &str = "DOCENT_TERMINAL_MCP_SSH_ENV";

/// The variables set on the far side: the session's secret (markers from
/// there must still prove it), the session's name, the pagers a session
/// sets (`PAGER=cat`: a far shell's pager would hold the pane as a near
/// one would) and `PYTHON_BASIC_REPL`, the list `DOCENT_TERMINAL_MCP_SSH_ENV` names and the list
/// itself, then `extra`.
/// `get` reads a variable; unset ones are left out. Names the list gives
/// that are not variable names, or that describe the far side (`HOME`,
/// `PATH`...), are returned apart, to be warned about.
pub fn carried(get: impl Fn(&str) -> Option<String>, extra: &[&str]) -> (Vec<(String, String)>, Vec<String>) {
    let mut names: Vec<String> =
        ["__DTMCP_NONCE", "DOCENT_TERMINAL_MCP_SESSION", "PAGER", "GIT_PAGER", "PYTHON_BASIC_REPL", ENV_SSH_ENV]
            .map(str::to_string)
            .to_vec();
    let mut skipped = Vec::new();
    let listed = get(ENV_SSH_ENV).unwrap_or_default();
    for name in listed.split(|c: char| c.is_whitespace() || c == ',' || c == ':').filter(|n| !n.is_empty()) {
        if !is_name(name) || NOT_CARRIED.contains(&name) {
            skipped.push(name.to_string());
        } else if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    for name in extra {
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    let vars = names.into_iter().filter_map(|n| get(&n).map(|v| (n, v))).collect();
    (vars, skipped)
}

/// Whether `s` can name a shell variable.
fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `s` as one sh word, in single quotes.
pub fn quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"@%+=:,./_-".contains(&b)) {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Commands that write `files` into the directory held by `$__dtmcp_d`,
/// making subdirectories (`zsh/.zshrc`) first. A file ending in a newline
/// goes as a quoted here-document, readable as it is; any other as one
/// quoted `printf` argument, byte for byte.
pub fn unpack(files: &[(&str, &str)]) -> String {
    let mut out = String::new();
    let mut dirs: Vec<&str> = files.iter().filter_map(|(name, _)| name.rsplit_once('/').map(|(d, _)| d)).collect();
    dirs.sort_unstable();
    dirs.dedup();
    for dir in dirs {
        let _ = writeln!(out, "mkdir -p \"$__dtmcp_d\"/{}", quote(dir));
    }
    for (name, body) in files {
        let target = format!("\"$__dtmcp_d\"/{}", quote(name));
        if body.ends_with('\n') && !body.lines().any(|l| l == EOF) {
            let _ = write!(out, "cat >{target} <<'{EOF}'\n{body}{EOF}\n");
        } else {
            let _ = writeln!(out, "printf %s {} >{target}", quote(body));
        }
    }
    out
}

/// `export NAME=value` lines for the carried variables.
fn exports(vars: &[(String, String)]) -> String {
    vars.iter().map(|(k, v)| format!("export {k}={}\n", quote(v))).collect()
}

/// The line each script starts with: a script run from a file (see
/// [`remote_command`]) removes that file at once; sh has it open already.
const SELF_REMOVE: &str = "case $0 in */dtmcp-boot.*) command rm -f -- \"$0\" ;; esac\n";

/// The bootstrap: unpacks `files` into a fresh private directory, sets
/// `vars`, and runs the user's shell, integrated, removing the directory
/// when that shell ends (a zsh or bash started inside still reads the
/// files meanwhile). zsh is chosen when it is the login shell and the files
/// include the zsh ones; otherwise bash; with neither, the login shell
/// without integration, and a line saying so. The session's secret is
/// taken from the environment when `vars` leaves it out (the carrier
/// passes it, so it is in no command line); a line says when it is missing.
pub fn bootstrap(files: &[(&str, &str)], vars: &[(String, String)]) -> String {
    let mut s = format!(
        "# docent-terminal-mcp bootstrap: the shell integration (v{INTEGRATION_VERSION}) for one shell.\n\
         # Unpacked into a private temporary directory, which goes again when\n\
         # the shell exits.\n"
    );
    s.push_str(SELF_REMOVE);
    s.push_str(
        r#"umask 077
__dtmcp_d=$(mktemp -d "${TMPDIR:-/tmp}/dtmcp.XXXXXXXX" 2>/dev/null) ||
    { __dtmcp_d=${TMPDIR:-/tmp}/dtmcp.$$ && mkdir "$__dtmcp_d"; } || __dtmcp_d=
__dtmcp_sh=${SHELL:-sh}
if [ -z "$__dtmcp_d" ]; then
    echo "docent-terminal-mcp: no temporary directory could be made here; a plain $__dtmcp_sh (exit statuses unknown)" >&2
    exec "$__dtmcp_sh" -l
fi
"#,
    );
    s.push_str(&unpack(files));
    // What an integrated shell on this side exported describes this side
    // (its terminal's path, its keys): the far shell works it out afresh.
    s.push_str("unset __DTMCP_TTY __DTMCP_K0 __DTMCP_K1 __DTMCP_K2 __DTMCP_K3 __DTMCP_BIN\n");
    s.push_str(&exports(vars));
    s.push_str(
        r#"if [ -z "${__DTMCP_NONCE-}" ]; then
    echo "docent-terminal-mcp: the session's secret did not come along (the command in between cleared the environment), so exit statuses stay unknown here; shell_integrate can add them" >&2
fi
trap 'rm -rf "$__dtmcp_d"; exit 129' HUP
trap 'rm -rf "$__dtmcp_d"; exit 143' TERM
if [ "${__dtmcp_sh##*/}" = zsh ] && [ -r "$__dtmcp_d/zsh/.zshrc" ] && command -v zsh >/dev/null 2>&1; then
    export __DTMCP_ZDOTDIR="${ZDOTDIR:-$HOME}"
    ZDOTDIR=$__dtmcp_d/zsh zsh -l
elif command -v bash >/dev/null 2>&1; then
    bash --rcfile "$__dtmcp_d/bashrc" -i
else
    rm -rf "$__dtmcp_d"
    echo "docent-terminal-mcp: no bash here; a plain $__dtmcp_sh (exit statuses unknown)" >&2
    exec "$__dtmcp_sh" -l
fi
__dtmcp_s=$?
rm -rf "$__dtmcp_d"
exit "$__dtmcp_s"
"#,
    );
    s
}

/// Where `install` puts the files on the far side, for the shell there.
pub fn install_dir_sh() -> String {
    format!("$HOME/.local/share/docent-terminal-mcp/v{INTEGRATION_VERSION}")
}

/// The installer: writes `files` to a new directory beside the final one,
/// removes every other version's directory, then moves the new one into
/// place, and says what it did.
pub fn installer(files: &[(&str, &str)]) -> String {
    let v = INTEGRATION_VERSION;
    let mut s = format!(
        "# docent-terminal-mcp install: the shell integration v{v} in ~/.local/share/docent-terminal-mcp/v{v}\n\
         {SELF_REMOVE}set -e\numask 022\n__dtmcp_base=$HOME/.local/share/docent-terminal-mcp\n\
         __dtmcp_d=$__dtmcp_base/.v{v}.$$\nmkdir -p \"$__dtmcp_base\"\nrm -rf \"$__dtmcp_d\"\nmkdir \"$__dtmcp_d\"\n"
    );
    s.push_str(&unpack(files));
    let _ = write!(
        s,
        r#"for __dtmcp_old in "$__dtmcp_base"/v*; do
    [ -e "$__dtmcp_old" ] && [ "$__dtmcp_old" != "$__dtmcp_base/v{v}" ] || continue
    rm -rf "$__dtmcp_old"
    echo "removed the older ~/.local/share/docent-terminal-mcp/${{__dtmcp_old##*/}}"
done
rm -rf "$__dtmcp_base/v{v}"
mv "$__dtmcp_d" "$__dtmcp_base/v{v}"
echo "installed {n} files in ~/.local/share/docent-terminal-mcp/v{v} for $(id -un) on $(uname -n)"
"#,
        n = files.len()
    );
    s
}

/// The remover: every version's directory, then the parent if empty.
pub fn remover() -> String {
    let head = "# docent-terminal-mcp install --remove: the shell integration goes from ~/.local/share\n";
    head.to_string()
        + SELF_REMOVE
        + r#"__dtmcp_base=$HOME/.local/share/docent-terminal-mcp
if [ -d "$__dtmcp_base" ]; then
    rm -rf "$__dtmcp_base"/v* "$__dtmcp_base"/.v*
    rmdir "$__dtmcp_base" 2>/dev/null || true
    echo "removed ~/.local/share/docent-terminal-mcp for $(id -un) on $(uname -n)"
else
    echo "nothing to remove: ~/.local/share/docent-terminal-mcp is not there for $(id -un) on $(uname -n)"
fi
"#
}

/// The remote command that runs `script` on the far side of an ssh: one
/// `sh -c` word holding the script base64-encoded, so whatever login shell
/// reads it there (bash, zsh, csh, fish) passes it on untouched. The word
/// decodes the script into a private file and replaces itself with `sh`
/// reading that file, which the script removes first thing: the process
/// that stays (the parent of the user's shell) has no script, and so no
/// secret, in its command line.
pub fn remote_command(script: &str) -> String {
    let blob = base64(script.as_bytes());
    format!(
        "sh -c 'umask 077; b={blob}; f=$(mktemp \"${{TMPDIR:-/tmp}}/dtmcp-boot.XXXXXXXX\" 2>/dev/null) || \
         {{ f=${{TMPDIR:-/tmp}}/dtmcp-boot.$$; (set -C; : >\"$f\") || exit 1; }}; \
         if printf %s \"$b\" | base64 -d >\"$f\" 2>/dev/null || printf %s \"$b\" | base64 -D >\"$f\" 2>/dev/null; \
         then exec sh \"$f\"; else rm -f \"$f\"; echo \"docent-terminal-mcp: no base64 here to unpack the script; use plain ssh\" >&2; exit 127; fi'"
    )
}

/// Standard base64 with padding.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `vars` with the session secret's value hidden, for printing.
pub fn masked(vars: &[(String, String)]) -> Vec<(String, String)> {
    vars.iter()
        .map(|(k, v)| match k.as_str() {
            "__DTMCP_NONCE" => (k.clone(), "(the session secret, not shown)".to_string()),
            _ => (k.clone(), v.clone()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::process::Command;

    use super::*;

    #[test]
    fn base64_matches_the_reference_vectors() {
        for (plain, coded) in
            [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE=")]
        {
            assert_eq!(base64(plain.as_bytes()), coded);
        }
    }

    #[test]
    fn quoting_survives_sh() {
        for s in ["plain", "", "it's", "a b\nc", "$HOME `x` \\ \"q\"", "'"] {
            let out = Command::new("sh").arg("-c").arg(format!("printf %s {}", quote(s))).output().expect("sh");
            assert_eq!(String::from_utf8_lossy(&out.stdout), s);
        }
    }

    #[test]
    fn carried_takes_the_list_and_itself_and_refuses_what_belongs_to_the_far_side() {
        let env: HashMap<&str, &str> = [
            ("__DTMCP_NONCE", "1.2.3.4"),
            (ENV_SSH_ENV, "ADJUTANT_EDITOR, HOME bad-name UNSET"),
            ("ADJUTANT_EDITOR", "zed"),
            ("HOME", "/root"),
            ("TERM", "xterm"),
            ("PAGER", "cat"),
        ]
        .into();
        let (vars, skipped) = carried(|k| env.get(k).map(|v| v.to_string()), &["TERM"]);
        let names: Vec<&str> = vars.iter().map(|(k, _)| k.as_str()).collect();
        // GIT_PAGER is not set here, so it is not carried.
        assert_eq!(names, ["__DTMCP_NONCE", "PAGER", ENV_SSH_ENV, "ADJUTANT_EDITOR", "TERM"]);
        assert_eq!(skipped, ["HOME", "bad-name"]);
        assert_eq!(masked(&vars)[0].1, "(the session secret, not shown)");
    }

    #[test]
    fn the_shipped_files_unpack_exactly() {
        let mut files: Vec<(&str, &str)> = crate::shell::FILES.to_vec();
        // A name with a directory and bodies without a final newline or
        // holding the delimiter line travel too.
        files.push(("zsh/no-newline", "no final newline"));
        let odd = format!("x\n{EOF}\ny\n");
        files.push(("sub/dir/odd", &odd));
        let dir = tempfile::tempdir().expect("tempdir");
        let script = format!("__dtmcp_d={}\n{}", quote(&dir.path().display().to_string()), unpack(&files));
        let out = Command::new("sh").arg("-c").arg(&script).output().expect("sh");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        for (name, body) in &files {
            assert_eq!(std::fs::read_to_string(dir.path().join(name)).expect(name), *body, "{name}");
        }
    }

    #[test]
    fn the_remote_command_is_one_word_any_login_shell_passes_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cmd = remote_command(&format!("{SELF_REMOVE}echo hi\n"));
        let inner = cmd.strip_prefix("sh -c '").and_then(|c| c.strip_suffix('\'')).expect("one quoted word");
        assert!(!inner.contains(['\'', '!', '\n', '\\']), "{inner}");
        let out = Command::new("sh").arg("-c").arg(&cmd).env("TMPDIR", dir.path()).output().expect("sh");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
        let left: Vec<_> = std::fs::read_dir(dir.path()).expect("dir").collect();
        assert!(left.is_empty(), "the decoded script removes itself: {left:?}");
    }

    #[test]
    fn the_bootstrap_names_every_file_and_exports_the_carried_variables() {
        let vars = vec![("ADJUTANT_EDITOR".to_string(), "it's".to_string())];
        let s = bootstrap(crate::shell::FILES, &vars);
        for (name, _) in crate::shell::FILES {
            assert!(s.contains(&format!("\"$__dtmcp_d\"/{}", quote(name))), "{name}");
        }
        assert!(s.contains("export ADJUTANT_EDITOR='it'\\''s'\n"));
        let out = Command::new("sh").arg("-n").arg("-c").arg(&s).output().expect("sh -n");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        for script in [installer(crate::shell::FILES), remover()] {
            let out = Command::new("sh").arg("-n").arg("-c").arg(&script).output().expect("sh -n");
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
    }
}
