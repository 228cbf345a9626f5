//! Reading a policy file: TOML through serde, then checks that need the
//! positions of values (regexes, globs, limits).

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use toml::Spanned;

use super::{Action, Glob, Limits, Policy, PolicyError, Role, Rule, Target};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    default: Option<Action>,
    #[serde(default)]
    rule: Vec<Spanned<RawRule>>,
    #[serde(default)]
    agents: BTreeMap<Spanned<String>, RawAgent>,
    limits: Option<RawLimits>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    action: Action,
    command: Option<Spanned<String>>,
    agents: Option<Spanned<Vec<Spanned<String>>>>,
    sessions: Option<Spanned<Vec<Spanned<String>>>>,
    to: Option<Spanned<RawTarget>>,
    program: Option<Spanned<String>>,
    why: Option<String>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum RawTarget {
    Shell,
    Program,
    Any,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgent {
    #[serde(default)]
    role: Role,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    sessions_per_agent: Option<Spanned<usize>>,
    calls_per_agent: Option<Spanned<usize>>,
    ask_timeout: Option<Spanned<RawDuration>>,
}

/// A duration as the file may spell it; checked while deserializing, so a
/// bad one carries the position of its value.
struct RawDuration(Duration);

impl<'de> Deserialize<'de> for RawDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(DurationVisitor)
    }
}

struct DurationVisitor;

impl Visitor<'_> for DurationVisitor {
    type Value = RawDuration;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(r#"a duration such as "120s", "2m", "1h" or "500ms", or a whole number of seconds"#)
    }

    fn visit_u64<E: de::Error>(self, seconds: u64) -> Result<RawDuration, E> {
        Ok(RawDuration(Duration::from_secs(seconds)))
    }

    fn visit_i64<E: de::Error>(self, seconds: i64) -> Result<RawDuration, E> {
        u64::try_from(seconds)
            .map(|s| RawDuration(Duration::from_secs(s)))
            .map_err(|_| E::custom(format!("a negative duration: {seconds}")))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<RawDuration, E> {
        parse_duration(text).map(RawDuration).map_err(E::custom)
    }
}

/// `"120s"`, `"2m"`, `"1h"`, `"500ms"`: a whole number and one unit.
pub(super) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let bad = || format!(r#"bad duration "{text}": use a whole number and ms, s, m or h, as "120s" or "2m""#);
    let number: u64 = number.parse().map_err(|_| bad())?;
    let millis = match unit.trim_start() {
        "ms" => Some(number),
        "s" => number.checked_mul(1_000),
        "m" => number.checked_mul(60_000),
        "h" => number.checked_mul(3_600_000),
        _ => return Err(bad()),
    };
    millis.map(Duration::from_millis).ok_or_else(|| format!(r#"duration "{text}" is too long"#))
}

/// Builds errors at byte offsets of one text.
struct At<'t>(&'t str);

impl At<'_> {
    fn error(&self, offset: usize, message: impl Into<String>) -> PolicyError {
        let (line, column) = line_column(self.0, offset);
        PolicyError { line, column, message: message.into() }
    }

    fn line(&self, span: &Range<usize>) -> usize {
        line_column(self.0, span.start).0
    }

    fn globs(&self, key: &str, globs: Option<Spanned<Vec<Spanned<String>>>>) -> Result<Vec<Glob>, PolicyError> {
        let Some(globs) = globs else { return Ok(vec![Glob { source: "*".into(), pattern: None }]) };
        if globs.get_ref().is_empty() {
            let message = format!("`{key}` is empty and would match nothing; leave it out to mean all");
            return Err(self.error(globs.span().start, message));
        }
        globs.into_inner().into_iter().map(|g| self.glob(g)).collect()
    }

    fn glob(&self, glob: Spanned<String>) -> Result<Glob, PolicyError> {
        let start = glob.span().start;
        let source = glob.into_inner();
        if source == "*" {
            return Ok(Glob { source, pattern: None });
        }
        match glob::Pattern::new(&source) {
            Ok(pattern) => Ok(Glob { source, pattern: Some(pattern) }),
            Err(e) => Err(self.error(start, format!("bad glob `{source}`: {e}"))),
        }
    }

    fn limit(&self, key: &str, value: Option<Spanned<usize>>) -> Result<Option<usize>, PolicyError> {
        match value {
            Some(v) if *v.get_ref() == 0 => Err(self.error(v.span().start, format!("`{key}` must be at least 1"))),
            Some(v) => Ok(Some(v.into_inner())),
            None => Ok(None),
        }
    }
}

/// The 1-based line and column (in characters) of a byte offset.
pub(super) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |n| n + 1);
    (before.matches('\n').count() + 1, before[line_start..].chars().count() + 1)
}

pub(super) fn parse(text: &str) -> Result<Policy, PolicyError> {
    let at = At(text);
    let raw: RawPolicy = toml::from_str(text).map_err(|e| {
        let offset = e.span().map_or(0, |s| s.start);
        at.error(offset, e.message().trim_end())
    })?;
    let mut rules = Vec::with_capacity(raw.rule.len());
    let mut sources = Vec::new();
    let mut set_rules = Vec::new();
    let mut bare_rules = Vec::new();
    for (index, spanned) in raw.rule.into_iter().enumerate() {
        let header = spanned.span();
        let raw = spanned.into_inner();
        let to = match (&raw.to, &raw.program) {
            (Some(to), Some(_)) if *to.get_ref() != RawTarget::Program => {
                let message =
                    "a rule with `program` judges lines typed into a program: `to` must be \"program\" or left out";
                return Err(at.error(to.span().start, message));
            }
            (Some(to), _) => *to.get_ref(),
            (None, Some(_)) => RawTarget::Program,
            (None, None) => RawTarget::Shell,
        };
        let command = match raw.command {
            Some(command) => {
                let start = command.span().start;
                let source = command.into_inner();
                if let Err(e) = regex::Regex::new(&source) {
                    return Err(at.error(start, format!("bad regex `{source}`: {e}")));
                }
                sources.push(source.clone());
                set_rules.push(index);
                Some(source)
            }
            None if raw.program.is_some() => {
                bare_rules.push(index);
                None
            }
            None => return Err(at.error(header.start, "a rule needs a `command` regex or a `program` glob")),
        };
        rules.push(Rule {
            action: raw.action,
            line: at.line(&header),
            command,
            agents: at.globs("agents", raw.agents)?,
            sessions: at.globs("sessions", raw.sessions)?,
            to: match to {
                RawTarget::Shell => Target::Shell,
                RawTarget::Program => Target::Program,
                RawTarget::Any => Target::Any,
            },
            program: raw.program.map(|g| at.glob(g)).transpose()?,
            why: raw.why,
        });
    }
    let set = regex::RegexSet::new(&sources).map_err(|e| at.error(0, format!("the rules' regexes together: {e}")))?;
    let roles = raw.agents.into_iter().map(|(g, a)| Ok((at.glob(g)?, a.role))).collect::<Result<_, PolicyError>>()?;
    let limits = match raw.limits {
        None => Limits::default(),
        Some(l) => Limits {
            sessions_per_agent: at.limit("sessions_per_agent", l.sessions_per_agent)?,
            calls_per_agent: at.limit("calls_per_agent", l.calls_per_agent)?,
            ask_timeout: match l.ask_timeout {
                Some(t) if t.get_ref().0.is_zero() => {
                    return Err(at.error(t.span().start, "`ask_timeout` must be more than zero (deny refuses at once)"));
                }
                Some(t) => t.into_inner().0,
                None => Limits::DEFAULT_ASK_TIMEOUT,
            },
        },
    };
    Ok(Policy { default: raw.default.unwrap_or(Action::Allow), rules, set, set_rules, bare_rules, roles, limits })
}
