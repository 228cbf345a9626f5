//! The policy: what an agent may type, judged before it is typed.
//!
//! Pure: [`Policy::parse`] reads the text of a policy file (TOML) and
//! [`Policy::judge`] judges one typed line. Loading the file, asking a
//! person and counting sessions or calls are the router's.
//!
//! # The file
//!
//! `default` (`allow`, `ask` or `deny`; `allow` when left out) is the action
//! for a command no rule matches. Each `[[rule]]` has an `action`, a
//! `command` regex and/or a `program` glob (at least one; when both, both
//! must match), `agents` and `sessions` globs (all when left out; an empty
//! list is an error, as it would match no one), `to` (`shell`, `program` or
//! `any`; `program` when a `program` glob is given, which only `program`
//! allows, else `shell`) and a `why` quoted in refusals. `[agents."glob"]`
//! tables give a `role` (`operator`, the default, or `read-only`).
//! `[limits]` holds `sessions_per_agent`, `calls_per_agent` (calls one agent
//! may have in flight) and `ask_timeout` (`"120s"`, `"2m"`, `"1h"`,
//! `"500ms"` or whole seconds; 120 s when left out). Limits must be more than
//! zero. Any key not named here is an error, as is a regex or glob that does
//! not compile: a typo in a guard rail must fail loudly, with its line and
//! column ([`PolicyError`]).
//!
//! # Judging
//!
//! A rule applies to a typed line when one of its `agents` globs matches the
//! agent, one of its `sessions` globs the session, and its `to` fits where
//! the line goes: `shell` lines typed at a shell, `program` lines typed into
//! a running program (whose name its `program` glob, if any, must match),
//! `any` both. Its `command` regex is searched for anywhere in the text (as
//! [`regex::Regex::is_match`]; anchor it with `^` to mean the start).
//!
//! A line to a shell is judged as a whole, trimmed, and as each of its
//! simple commands ([`shell::simple_commands`]). Its action is the greatest
//! of: the action of every applying rule that matches the whole line, and
//! for each simple command, the greatest action of the applying rules that
//! match it, or `default` when none does. So a deny or ask anywhere wins,
//! and under an allow-list (`default = "deny"` and allow rules) every
//! simple command must be allowed: allowing only `^git status` denies
//! `git status && rm x`. A line with no simple command (blank, or only a
//! comment) is judged as one piece, the whole line, default included.
//! A line to a program is one piece: it is not split.
//!
//! The order is `allow` < `ask` < `deny` whatever the order of the rules.
//! The verdict names the first rule in the file with the deciding action
//! (none when only `default` decided) and the simple command it decided on
//! when that is not the whole line.
//!
//! Every rule's regex is compiled into one [`regex::RegexSet`], so a piece
//! is searched once for all rules, and the globs are only tried for the
//! rules whose regex matched. A policy of 200 rules judges a line such as
//! `cargo test --release -p foo 2>&1 && echo ok` in a few microseconds
//! (see the ignored test `policy::tests::judge::timing`).

mod parse;
pub mod shell;
#[cfg(test)]
mod tests;

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use shell::simple_commands;

/// What to do with a typed line. Ordered: `Allow < Ask < Deny`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Allow,
    Ask,
    Deny,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Allow => "allow",
            Action::Ask => "ask",
            Action::Deny => "deny",
        })
    }
}

/// What an agent may do at all. Several `[agents."…"]` globs matching one
/// agent: read-only wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    #[default]
    Operator,
    ReadOnly,
}

/// Where a typed line goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum To<'a> {
    /// A shell at its prompt.
    Shell,
    /// A running program, by the name of its process (`python3`).
    Program(&'a str),
}

/// A line an agent wants typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Typed<'a> {
    pub agent: &'a str,
    pub session: &'a str,
    pub line: &'a str,
    pub to: To<'a>,
}

/// The judgement of a typed line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub action: Action,
    /// The deciding rule; `None` when `default` decided.
    pub rule: Option<RuleRef>,
    /// The simple command that decided, when it is not the whole line.
    pub piece: Option<String>,
}

impl fmt::Display for Verdict {
    /// `deny: rule 2 (line 7, `rm\s+-rf`): why, on `rm -rf x``, or
    /// `deny: the default, on `rm x``.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.action)?;
        match &self.rule {
            Some(rule) => write!(f, "{rule}")?,
            None => f.write_str("the default")?,
        }
        match &self.piece {
            Some(piece) => write!(f, ", on `{piece}`"),
            None => Ok(()),
        }
    }
}

/// A rule of the file, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleRef {
    /// Its index among the file's rules, from 0.
    pub index: usize,
    /// The 1-based line of its `[[rule]]` header.
    pub line: usize,
    pub action: Action,
    pub why: Option<String>,
    /// Its `command` regex, or its `program` glob when it has no regex.
    pub pattern: String,
}

impl fmt::Display for RuleRef {
    /// `rule 2 (line 7, `rm\s+-rf`): why`; rules are counted from 1 here.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rule {} (line {}, `{}`)", self.index + 1, self.line, self.pattern)?;
        match &self.why {
            Some(why) => write!(f, ": {why}"),
            None => Ok(()),
        }
    }
}

/// The `[limits]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub sessions_per_agent: Option<usize>,
    /// Calls one agent may have in flight at once.
    pub calls_per_agent: Option<usize>,
    /// How long an ask waits for a person; unanswered, it is a refusal.
    pub ask_timeout: Duration,
}

impl Limits {
    pub const DEFAULT_ASK_TIMEOUT: Duration = Duration::from_secs(120);
}

impl Default for Limits {
    fn default() -> Self {
        Limits { sessions_per_agent: None, calls_per_agent: None, ask_timeout: Self::DEFAULT_ASK_TIMEOUT }
    }
}

/// A policy file that does not parse, or does not make sense.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct PolicyError {
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    pub message: String,
}

/// A glob on names: `*` and `?` (and `[…]` classes).
#[derive(Debug, Clone)]
struct Glob {
    source: String,
    /// `None` for `*`, which matches without a call.
    pattern: Option<glob::Pattern>,
}

impl Glob {
    const OPTIONS: glob::MatchOptions = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: false,
        require_literal_leading_dot: false,
    };

    fn matches(&self, name: &str) -> bool {
        self.pattern.as_ref().is_none_or(|p| p.matches_with(name, Self::OPTIONS))
    }
}

/// Where a rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Shell,
    Program,
    Any,
}

#[derive(Debug, Clone)]
struct Rule {
    action: Action,
    line: usize,
    command: Option<String>,
    agents: Vec<Glob>,
    sessions: Vec<Glob>,
    to: Target,
    program: Option<Glob>,
    why: Option<String>,
}

impl Rule {
    fn applies(&self, typed: &Typed) -> bool {
        let to = match (self.to, typed.to) {
            (Target::Any, _) | (Target::Shell, To::Shell) => true,
            (Target::Program, To::Program(name)) => self.program.as_ref().is_none_or(|g| g.matches(name)),
            _ => false,
        };
        to && self.agents.iter().any(|g| g.matches(typed.agent))
            && self.sessions.iter().any(|g| g.matches(typed.session))
    }

    fn reference(&self, index: usize) -> RuleRef {
        let pattern = match (&self.command, &self.program) {
            (Some(command), _) => command.clone(),
            (None, Some(program)) => program.source.clone(),
            (None, None) => String::new(),
        };
        RuleRef { index, line: self.line, action: self.action, why: self.why.clone(), pattern }
    }
}

/// A parsed policy file.
#[derive(Debug, Clone)]
pub struct Policy {
    default: Action,
    rules: Vec<Rule>,
    /// The `command` regexes of the rules that have one.
    set: regex::RegexSet,
    /// For each regex of `set`, its rule.
    set_rules: Vec<usize>,
    /// The rules with no `command` (a `program` glob only).
    bare_rules: Vec<usize>,
    roles: Vec<(Glob, Role)>,
    limits: Limits,
}

impl Policy {
    /// Parses the text of a policy file.
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        parse::parse(text)
    }

    /// What no policy file means: everything allowed, no limits.
    pub fn allow_all() -> Policy {
        Policy {
            default: Action::Allow,
            rules: Vec::new(),
            set: regex::RegexSet::empty(),
            set_rules: Vec::new(),
            bare_rules: Vec::new(),
            roles: Vec::new(),
            limits: Limits::default(),
        }
    }

    pub fn default_action(&self) -> Action {
        self.default
    }

    /// How many rules.
    pub fn rules(&self) -> usize {
        self.rules.len()
    }

    /// The rule at `index` (from 0), for messages.
    pub fn rule(&self, index: usize) -> Option<RuleRef> {
        self.rules.get(index).map(|r| r.reference(index))
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The agent's role: read-only when any `[agents."…"]` glob that
    /// matches it says so, else operator.
    pub fn role(&self, agent: &str) -> Role {
        let read_only = self.roles.iter().any(|(g, role)| *role == Role::ReadOnly && g.matches(agent));
        if read_only { Role::ReadOnly } else { Role::Operator }
    }

    /// Judges a typed line (see the module doc).
    pub fn judge(&self, typed: &Typed) -> Verdict {
        let whole = typed.line.trim();
        // Index 0 is the whole line; it takes `default` only when it is
        // itself a piece.
        let mut pieces = vec![whole];
        let mut whole_is_piece = true;
        if typed.to == To::Shell {
            let commands = simple_commands(whole);
            whole_is_piece = commands.is_empty() || commands.contains(&whole);
            pieces.extend(commands.into_iter().filter(|p| *p != whole));
        }
        // (piece, rule) for every applying rule that matches a piece.
        let mut hits: Vec<(usize, usize)> = Vec::new();
        let mut action: Option<Action> = None;
        let mut defaulted: Option<usize> = None;
        for (p, piece) in pieces.iter().enumerate() {
            let before = hits.len();
            let matched = self.set.matches(piece);
            let by_regex = matched.iter().map(|m| self.set_rules[m]);
            let bare = if typed.to == To::Shell { &[][..] } else { &self.bare_rules[..] };
            let mut applying: Vec<usize> =
                by_regex.chain(bare.iter().copied()).filter(|&r| self.rules[r].applies(typed)).collect();
            applying.sort_unstable();
            hits.extend(applying.into_iter().map(|r| (p, r)));
            let best = hits[before..].iter().map(|&(_, r)| self.rules[r].action).max();
            let piece_action = match best {
                Some(best) => Some(best),
                None if p > 0 || whole_is_piece => {
                    defaulted.get_or_insert(p);
                    Some(self.default)
                }
                None => None,
            };
            action = action.max(piece_action);
        }
        let action = action.unwrap_or(self.default);
        let piece = |p: usize| (p > 0).then(|| pieces[p].to_string());
        let decider = hits.iter().filter(|&&(_, r)| self.rules[r].action == action).min_by_key(|&&(p, r)| (r, p));
        match decider {
            Some(&(p, r)) => Verdict { action, rule: Some(self.rules[r].reference(r)), piece: piece(p) },
            None => Verdict { action, rule: None, piece: defaulted.and_then(piece) },
        }
    }
}
