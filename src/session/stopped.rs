//! A logger that is alive but stopped (`kill -STOP`, a debugger): its
//! socket still accepts, nothing answers, and replacing it would leave two
//! writers. The calls that meet one report it instead, from `/proc`.

use dtmcp_core::procs::parse;
use dtmcp_core::store::files;

/// The pid of `dir`'s logger if it is alive but stopped (state `T`, or `t`
/// for a traced stop).
pub(super) fn stopped_logger(dir: &std::path::Path) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(dir.join(files::PID)).ok()?.trim().parse().ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    memchr::memmem::find(&cmdline, b"dtmcp-pane-logger")?;
    let stat = parse::stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)?;
    matches!(stat.state, 'T' | 't').then_some(pid)
}
