//! The machine as the bench sees it: CPU time, quiet, memory.

use super::*;

/// The CPU time all threads of a process have run so far (shared with
/// the ingest bench).
pub(crate) use super::ingest::cpu_time;

/// How busy the machine must be at most, as a share of all its CPU time,
/// before anything is timed; how long one look lasts; and how long the
/// bench waits for it at most (another tenant may never let it be quiet).
pub(crate) const QUIET_BUSY: f64 = 0.10;
pub(crate) const QUIET_LOOK: Duration = Duration::from_millis(500);
pub(crate) const QUIET_AT_MOST: Duration = Duration::from_secs(20);

/// Waits until the machine is quiet: what the last step set going (shells
/// reading their start files, loggers opening their logs, a server
/// reattaching its sessions, the kernel writing back) has settled, and no
/// timing pays for it. `what` names the moment in the log.
pub(crate) async fn quiet(what: &str) {
    let started = Instant::now();
    let mut busy = f64::NAN;
    while started.elapsed() < QUIET_AT_MOST {
        let Some(a) = cpu_totals() else { return };
        tokio::time::sleep(QUIET_LOOK).await;
        let Some(b) = cpu_totals() else { return };
        let total = b.1.saturating_sub(a.1).max(1) as f64;
        busy = b.0.saturating_sub(a.0) as f64 / total;
        if busy < QUIET_BUSY {
            break;
        }
    }
    eprintln!("  ({what}: quiet after {:.1} s, {:.0} % busy)", started.elapsed().as_secs_f64(), busy * 100.0);
}

/// The machine's busy and total CPU time so far, in clock ticks, from
/// `/proc/stat` (idle and waiting for I/O count as not busy).
pub(crate) fn cpu_totals() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let f: Vec<u64> = line.split_whitespace().filter_map(|v| v.parse().ok()).collect();
    let total: u64 = f.iter().take(8).sum();
    let idle = f.get(3)? + f.get(4)?;
    Some((total - idle, total))
}

/// A process's user + system CPU time in clock ticks (0 once gone).
pub(crate) fn ticks(pid: u32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0 };
    let Some((_, rest)) = stat.rsplit_once(") ") else { return 0 };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    n(11) + n(12)
}

pub(crate) async fn idle(world: &World, router: u32, over: Duration) -> anyhow::Result<Idle> {
    let tmux = tmux_pid(world).context("the tmux server's pid")?;
    let loggers = logger_pids(world);
    let sum = |pids: &[u32]| pids.iter().map(|&p| ticks(p)).sum::<u64>();
    let before = (ticks(tmux), ticks(router), sum(&loggers));
    tokio::time::sleep(over).await;
    let after = (ticks(tmux), ticks(router), sum(&loggers));
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok().flatten().unwrap_or(100) as f64;
    let pct = |a: u64, b: u64| (b.saturating_sub(a)) as f64 / hz / over.as_secs_f64() * 100.0;
    Ok(Idle { tmux: pct(before.0, after.0), router: pct(before.1, after.1), loggers: pct(before.2, after.2) })
}

/// Proportional set size in kB of the router and of every logger together.
pub(crate) fn pss(world: &World, router: u32) -> (u64, u64) {
    let of = |pid: u32| -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
            .ok()
            .and_then(|s| {
                s.lines().find_map(|l| {
                    l.strip_prefix("Pss:").and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                })
            })
            .unwrap_or(0)
    };
    (of(router), logger_pids(world).into_iter().map(of).sum())
}
