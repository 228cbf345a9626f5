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
        return Err(format!("timeout must be between 0 and {MAX_TIMEOUT_S} seconds; got {t}"));
    }
    Ok((t * 1000.0) as u64)
}

/// Splits `command` into the lines to type, refusing what cannot be typed
/// as a command line.
pub(crate) fn command_lines(command: &str) -> Result<Vec<String>, String> {
    let lines: Vec<String> =
        command.trim_end_matches(['\n', '\r']).split('\n').map(|l| l.trim_end_matches('\r').to_string()).collect();
    if lines.iter().all(|l| l.trim().is_empty()) {
        return Err("command is empty; give the line to type, e.g. \"ls -l\"".into());
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
        assert!(command_lines("").is_err());
        assert!(command_lines("  \n ").is_err());
        assert!(command_lines("echo \u{1b}[31m").is_err());
        assert_eq!(command_lines("a\nb\n").expect("lines"), ["a", "b"]);
    }

    #[test]
    fn timeouts_are_bounded() {
        assert_eq!(timeout_ms(None), Ok(30_000));
        assert!(timeout_ms(Some(0.0)).is_err());
        assert!(timeout_ms(Some(f64::NAN)).is_err());
        assert!(timeout_ms(Some(601.0)).is_err());
    }
}
