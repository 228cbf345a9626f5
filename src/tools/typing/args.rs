//! Checks of the arguments the typing tools share (`run`, `wait`,
//! `expect`): made before anything is typed, so a bad one rejects the call
//! whole.

/// The default wait, well under the 60 s some clients allow one call.
const DEFAULT_TIMEOUT_S: f64 = 30.0;
/// The longest wait one call may ask for.
const MAX_TIMEOUT_S: f64 = 600.0;

/// A call's `timeout` in ms, checked: the default when none is given.
pub(crate) fn timeout_ms(t: Option<f64>) -> Result<u64, String> {
    let t = t.unwrap_or(DEFAULT_TIMEOUT_S);
    if !t.is_finite() || t <= 0.0 || t > MAX_TIMEOUT_S {
        return Err(format!("timeout must be more than 0 and at most {MAX_TIMEOUT_S} seconds; got {t}"));
    }
    Ok((t * 1000.0) as u64)
}

/// Why a command with nothing to type is refused.
pub(crate) const EMPTY: &str = "command is empty; give the line to type, e.g. \"ls -l\" (at a program's prompt, such as python's `...`, an empty command presses Enter alone)";

/// Splits `command` into the lines to type, refusing what cannot be typed
/// as a command line. Its last line end is only that; with `blank_last`,
/// an empty line after it is typed as one (a REPL's block ends with it),
/// and a command of nothing but line ends is one empty line. The caller
/// decides where an empty line may go.
pub(crate) fn command_lines(command: &str, blank_last: bool) -> Result<Vec<String>, String> {
    let body = command.strip_suffix('\n').map_or(command, |c| c.strip_suffix('\r').unwrap_or(c));
    let trimmed = body.trim_end_matches(['\n', '\r']);
    let mut lines: Vec<String> = trimmed.split('\n').map(|l| l.trim_end_matches('\r').to_string()).collect();
    if lines.iter().all(|l| l.trim().is_empty()) {
        return if blank_last { Ok(vec![String::new()]) } else { Err(EMPTY.into()) };
    }
    if blank_last && trimmed.len() < body.len() {
        lines.push(String::new());
    }
    if lines.iter().any(|l| l.chars().any(|c| c.is_control() && c != '\t')) {
        return Err("command holds control characters; type plain text here (keys such as ctrl+c are not part of a command line)".into());
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_refuse_empty_and_control_input() {
        assert!(command_lines("", false).is_err());
        assert!(command_lines("  \n ", false).is_err());
        assert!(command_lines("echo \u{1b}[31m", true).is_err());
        assert_eq!(command_lines("a\nb\n", false).expect("lines"), ["a", "b"]);
        assert_eq!(command_lines("a\nb\n\n\n", false).expect("lines"), ["a", "b"]);
    }

    #[test]
    fn a_blank_last_line_is_kept_when_asked() {
        // One line end is the line's own; one more is an empty line.
        assert_eq!(command_lines("a\nb\n", true).expect("lines"), ["a", "b"]);
        assert_eq!(command_lines("a\r\n", true).expect("lines"), ["a"]);
        assert_eq!(command_lines("for i in x:\n  f(i)\n\n", true).expect("lines"), ["for i in x:", "  f(i)", ""]);
        assert_eq!(command_lines("a\n\n\n\n", true).expect("lines"), ["a", ""]);
        assert_eq!(command_lines("", true).expect("lines"), [""]);
        assert_eq!(command_lines("\n", true).expect("lines"), [""]);
        assert!(command_lines("   ", false).is_err());
    }

    #[test]
    fn timeouts_are_bounded() {
        assert_eq!(timeout_ms(None), Ok(30_000));
        assert!(timeout_ms(Some(0.0)).is_err());
        assert!(timeout_ms(Some(f64::NAN)).is_err());
        assert!(timeout_ms(Some(601.0)).is_err());
    }
}
