//! The fault-injection suite (issue 10): the real binaries, tmux and
//! clients, broken on purpose, one file a kind of break. Each test is
//! named for what it proves; docs/testing.md lists them by the fault they
//! inject, and `cargo test --release --test e2e faults::` runs them all.
//! The full sizes (2,000,000 lines under six kills, a 2 GB flood and 60 s
//! of `yes`, 1,000 calls over ten restarts, 100 connect/kill cycles, a
//! 31 s outage) run with `DTMCP_SLOW=1`; without it the same tests run
//! smaller and say so.

use std::path::Path;

mod leaks;
mod loggers;
mod output;
mod restarts;

/// Whether `raw.log` of `dir` holds `want` as one contiguous slice.
fn raw_holds(dir: &Path, want: &[u8]) -> bool {
    let raw = std::fs::read(dir.join("raw.log")).expect("raw.log");
    memchr::memmem::find(&raw, want).is_some()
}

/// Sends `sig` to `pid` (a process of this test's world), whatever became
/// of it meanwhile.
fn signal(pid: i32, sig: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
}

/// A file as a terminal prints it.
fn through_terminal(file: &Path) -> Vec<u8> {
    let body = std::fs::read(file).expect("flood file");
    let mut v = Vec::with_capacity(body.len() + body.len() / 50);
    for &b in &body {
        if b == b'\n' {
            v.push(b'\r');
        }
        v.push(b);
    }
    v
}
