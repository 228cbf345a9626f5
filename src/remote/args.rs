//! Reading an `ssh` command line the way `ssh` does: which words are
//! options (and their values), which is the destination, and whether a
//! remote command follows. Pure, so every rule is a table test.

use dtmcp_core::procs::parse::SSH_VALUED;

/// The `ssh` options and destination of `docent-terminal-mcp ssh` or
/// `install`, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SshArgs {
    /// The options given before the destination, exactly as given.
    pub options: Vec<String>,
    /// The destination as given: `host`, `user@host` or `ssh://user@host:port`.
    pub destination: String,
    /// Our own flags found among the options (`--print`, `--remove`).
    pub flags: Vec<String>,
}

/// Options that would stop `ssh` from giving the bootstrap a shell with a
/// terminal, and why.
const REFUSED: &[(char, &str)] = &[
    ('N', "-N runs no remote command, so the integrated shell could not start"),
    ('T', "-T gives the far shell no terminal; the integrated shell needs one"),
    ('W', "-W forwards a port instead of starting a shell"),
    ('f', "-f sends ssh to the background; a session's shell must stay in front"),
];

/// Splits `args` (what follows `ssh` or `install`) into options and the
/// destination. `ours` names the long flags of our own that may appear
/// among the options. A remote command after the destination, a missing
/// destination, and options that defeat a terminal are refused, each with
/// what to do instead.
pub fn parse(args: &[String], ours: &[&str]) -> Result<SshArgs, String> {
    let mut options = Vec::new();
    let mut flags = Vec::new();
    let mut words = args.iter();
    let mut destination = None;
    while let Some(a) = words.next() {
        if ours.contains(&a.as_str()) {
            flags.push(a.clone());
            continue;
        }
        if a == "--" {
            destination = words.next().cloned();
            break;
        }
        if a.starts_with("--") {
            return Err(format!("{a:?} is not an ssh option; ssh options are single letters such as -p PORT"));
        }
        let Some(letters) = a.strip_prefix('-').filter(|f| !f.is_empty()) else {
            destination = Some(a.clone());
            break;
        };
        options.push(a.clone());
        // Grouped letters (`-tv`, `-vp22`): the first that takes a value
        // takes the rest of the word, or else the next word.
        for (at, c) in letters.char_indices() {
            if let Some((_, why)) = REFUSED.iter().find(|(r, _)| *r == c) {
                return Err(format!("{why}; leave it out"));
            }
            if SSH_VALUED.contains(c) {
                if at + c.len_utf8() == letters.len() {
                    let value = words.next().ok_or_else(|| format!("ssh option -{c} needs a value"))?;
                    options.push(value.clone());
                }
                break;
            }
        }
    }
    let destination = destination.filter(|d| !d.is_empty()).ok_or_else(|| {
        "name the host to connect to, as for ssh: [ssh options] [user@]host (e.g. -p 2222 me@box)".to_string()
    })?;
    let rest: Vec<&String> = words.collect();
    if !rest.is_empty() {
        return Err(format!(
            "a remote command ({}) cannot follow the host: this starts an integrated shell there; \
             to run one command, use plain ssh, or run it in the shell this opens",
            rest.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ")
        ));
    }
    Ok(SshArgs { options, destination, flags })
}

impl SshArgs {
    /// Whether our flag `name` was given.
    pub fn has(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }

    /// The host part of the destination, for messages.
    pub fn host(&self) -> &str {
        let d = self.destination.strip_prefix("ssh://").unwrap_or(&self.destination);
        let d = d.rsplit_once('@').map_or(d, |(_, h)| h);
        // `ssh://host:port`; a bare IPv6 address keeps its colons.
        match self.destination.starts_with("ssh://") {
            true => d.rsplit_once(':').map_or(d, |(h, _)| h),
            false => d,
        }
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    #[rstest]
    #[case::bare("box", &[], "box")]
    #[case::user_at("me@box", &[], "me@box")]
    #[case::port_apart("-p 2222 box", &["-p", "2222"], "box")]
    #[case::port_joined("-p2222 box", &["-p2222"], "box")]
    #[case::grouped("-vA -p 22 box", &["-vA", "-p", "22"], "box")]
    #[case::group_ending_in_value("-vi key box", &["-vi", "key"], "box")]
    #[case::many(
        "-i k -o UserKnownHostsFile=/x -o StrictHostKeyChecking=no -J jump box",
        &["-i", "k", "-o", "UserKnownHostsFile=/x", "-o", "StrictHostKeyChecking=no", "-J", "jump"],
        "box"
    )]
    #[case::tty_asked("-t box", &["-t"], "box")]
    #[case::after_dashes("-v -- box", &["-v"], "box")]
    #[case::url("ssh://me@box:2222", &[], "ssh://me@box:2222")]
    fn destinations(#[case] line: &str, #[case] options: &[&str], #[case] dest: &str) {
        let got = parse(&words(line), &["--print"]).expect("parses");
        assert_eq!(got.options, options);
        assert_eq!(got.destination, dest);
        assert!(got.flags.is_empty());
    }

    #[rstest]
    #[case::nothing("", "name the host")]
    #[case::only_options("-p 22", "name the host")]
    #[case::value_missing("-p", "needs a value")]
    #[case::command("box uptime", "cannot follow the host")]
    #[case::no_tty("-T box", "-T gives")]
    #[case::no_command("-vN box", "-N runs")]
    #[case::forward("-W h:22 box", "-W forwards")]
    #[case::long_option("--frob box", "not an ssh option")]
    fn refusals(#[case] line: &str, #[case] says: &str) {
        let err = parse(&words(line), &["--print"]).expect_err("refused");
        assert!(err.contains(says), "{err}");
    }

    #[test]
    fn our_flags_may_stand_among_the_options() {
        let got = parse(&words("-p 22 --print --remove me@box"), &["--print", "--remove"]).expect("parses");
        assert_eq!(got.options, ["-p", "22"]);
        assert!(got.has("--print") && got.has("--remove"));
        assert_eq!(got.host(), "box");
    }

    #[rstest]
    #[case("box", "box")]
    #[case("me@box.example.org", "box.example.org")]
    #[case("ssh://me@box:2222", "box")]
    #[case("fe80::1", "fe80::1")]
    fn hosts(#[case] dest: &str, #[case] host: &str) {
        let got = parse(&[dest.to_string()], &[]).expect("parses");
        assert_eq!(got.host(), host);
    }
}
