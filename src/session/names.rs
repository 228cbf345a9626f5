//! Session names: what is accepted, and which name a new session gets.
//!
//! A name is a tmux session name and a directory name at once, so it must be
//! safe as both: no `/` or `..` (paths), no `:` or `.` (tmux target syntax),
//! no control characters, nothing tmux would read as a pattern or an id.

/// The longest accepted name.
pub const MAX_NAME: usize = 64;

/// Checks `name`; the error says what is allowed.
pub fn validate_name(name: &str) -> Result<(), String> {
    let why = if name.is_empty() {
        Some("is empty")
    } else if name.len() > MAX_NAME {
        Some("is longer than 64 bytes")
    } else if name.starts_with(['-', '+', '%', '$', '@', '=', '~']) {
        Some("starts with a character tmux reads as target syntax")
    } else if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'+') {
        Some("holds a character other than letters, digits, '_', '-' or '+'")
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => Err(format!(
            "session name {name:?} {why}; use letters, digits, '_', '-' or '+' (at most {MAX_NAME}), e.g. \"build\", or omit it to get t1, t2, …"
        )),
    }
}

/// Checks a name that may also be an archived generation, `NAME.N`: the
/// logs a session of that name left when the name was used again. Only
/// tools that read logs accept these; tmux never sees such a name.
pub fn validate_logs_name(name: &str) -> Result<(), String> {
    match name.rsplit_once('.') {
        Some((base, n)) if !n.is_empty() && n.len() <= 9 && n.bytes().all(|b| b.is_ascii_digit()) => {
            validate_name(base).map_err(|e| format!("{e}; an archived generation is NAME.N, e.g. \"build.1\""))
        }
        _ => validate_name(name),
    }
}

/// The first of `t1`, `t2`, … that no live session uses.
pub fn free_name(live: &[String]) -> String {
    (1..).map(|n| format!("t{n}")).find(|n| !live.contains(n)).unwrap_or_else(|| "t0".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::simple("t1")]
    #[case::words("build-server_2")]
    #[case::split_pane("t1+1")]
    fn good_names(#[case] name: &str) {
        assert!(validate_name(name).is_ok());
    }

    #[rstest]
    #[case::empty("")]
    #[case::slash("a/b")]
    #[case::dotdot("..")]
    #[case::dot("a.b")]
    #[case::colon("a:1")]
    #[case::control("a\u{1b}b")]
    #[case::newline("a\nb")]
    #[case::space("a b")]
    #[case::exact_prefix("=a")]
    #[case::pane_id("%1")]
    #[case::option_like("-t")]
    #[case::too_long(&"x".repeat(65))]
    fn bad_names(#[case] name: &str) {
        let err = validate_name(name).expect_err("should be refused");
        assert!(err.contains("letters, digits"), "{err}");
    }

    #[rstest]
    #[case::plain("t1", true)]
    #[case::generation("t1.1", true)]
    #[case::late_generation("build-2.12", true)]
    #[case::empty_generation("t1.", false)]
    #[case::word_generation("t1.old", false)]
    #[case::two_dots("t1.1.1", false)]
    #[case::dotdot("..", false)]
    #[case::bad_base("a/b.1", false)]
    #[case::only_number(".1", false)]
    fn logs_names(#[case] name: &str, #[case] ok: bool) {
        assert_eq!(validate_logs_name(name).is_ok(), ok, "{name}");
    }

    #[test]
    fn free_names_fill_gaps() {
        assert_eq!(free_name(&[]), "t1");
        assert_eq!(free_name(&["t1".into(), "t3".into()]), "t2");
    }
}
