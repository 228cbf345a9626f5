//! The full-size switch: the fault and attack tests run small by default
//! and at the sizes their checklist names with `DTMCP_SLOW=1`.

/// Whether the slow, full-size variants run (`DTMCP_SLOW=1`).
pub fn slow() -> bool {
    std::env::var("DTMCP_SLOW").is_ok_and(|v| v == "1")
}

/// `full` with `DTMCP_SLOW=1`, else `short`, saying which on stderr.
pub fn size<T: std::fmt::Display>(what: &str, short: T, full: T) -> T {
    if slow() {
        full
    } else {
        eprintln!("{what}: {short} (the full {full} runs with DTMCP_SLOW=1)");
        short
    }
}
