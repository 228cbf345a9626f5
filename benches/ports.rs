//! The cost of a look at what a pane's processes listen on
//! (`dtmcp_core::procs::sockets::look`), in one table.
//!
//! A tree of 50 processes is started under one `sh` (48 `sleep`s and a
//! `python3 -m http.server` on a free port, or 49 `sleep`s without
//! python), and a lone `sh` with no children stands for a shell at its
//! prompt, the look every `run` reply pays for. Each is measured against
//! references taken in the same run: one read of `/proc/net/tcp`, the
//! process-tree walk alone (`tree::walk`), and the foreground-job look a
//! reply already makes (`procs::job`). The target is a look at 50
//! processes in at most 1 ms.
//!
//! `cargo bench --bench ports` (add `-- N` for N rounds, default 300).
//! Prints the table; asserts nothing.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dtmcp_core::procs::{self, sockets, tree};

/// Processes in the big tree, its root included.
const TREE: usize = 50;

/// The median and 90th percentile of `f` over `rounds` rounds, in µs.
fn time(rounds: usize, mut f: impl FnMut()) -> (f64, f64) {
    for _ in 0..rounds / 10 + 1 {
        f();
    }
    let mut all: Vec<f64> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    all.sort_by(f64::total_cmp);
    (all[all.len() / 2], all[all.len() * 9 / 10])
}

/// A free TCP port on loopback.
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Starts `sh` running `script` in its own process group.
fn sh(script: &str) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    Command::new("sh").arg("-c").arg(script).stdin(Stdio::null()).stdout(Stdio::null()).process_group(0).spawn()
}

/// Waits until the tree under `root` has `want` processes (and, with
/// `listening`, a listener), for at most 10 s.
fn settle(root: u32, want: usize, listening: bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let look = sockets::look(root).unwrap_or_default();
        if look.processes >= want && (!listening || !look.listeners.is_empty()) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("warning: the tree under {root} did not settle");
}

fn stop(mut child: Child) {
    // The whole group: sh and everything it started.
    let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::SIGTERM);
    let _ = child.wait();
}

fn row(what: &str, (median, p90): (f64, f64), reference: f64) {
    println!("{what:<58} {median:>9.1} {p90:>9.1} {:>8.2}", median / reference);
}

fn main() -> anyhow::Result<()> {
    let rounds: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(300);
    let python = Command::new("python3").arg("-c").arg("pass").status().is_ok_and(|s| s.success());
    let port = free_port()?;
    let sleeps = if python { TREE - 2 } else { TREE - 1 };
    let mut script = format!("for i in $(seq {sleeps}); do sleep 600 & done; ");
    if python {
        script.push_str(&format!("python3 -m http.server {port} --bind 127.0.0.1 >/dev/null 2>&1 & "));
    }
    script.push_str("wait");
    let big = sh(&script)?;
    let lone = sh("exec sleep 600")?;
    let (big_pid, lone_pid) = (big.id(), lone.id());
    settle(big_pid, TREE, python);
    let look = sockets::look(big_pid).map_err(anyhow::Error::msg)?;
    println!(
        "tree: {} processes, {} listening ({}); rounds: {rounds}",
        look.processes,
        look.listeners.len(),
        sockets::said(&look.listeners)
    );
    let tcp = time(rounds, || {
        let _ = std::hint::black_box(std::fs::read_to_string("/proc/net/tcp"));
    });
    let walk = time(rounds, || {
        let _ = std::hint::black_box(tree::walk(big_pid));
    });
    let diag = time(rounds, || {
        let _ = std::hint::black_box(procs::diag::tcp_listeners());
    });
    let pids: Vec<i32> = tree::walk(big_pid).map(|t| t.procs.iter().map(|p| p.pid).collect()).unwrap_or_default();
    let fds = time(rounds, || {
        for &pid in &pids {
            let _ = std::hint::black_box(sockets::socket_inodes(pid));
        }
    });
    let job = time(rounds, || {
        let _ = std::hint::black_box(procs::job(procs::Pane { pid: big_pid, tty: "/dev/null" }));
    });
    let full = time(rounds, || {
        let _ = std::hint::black_box(sockets::look(big_pid));
    });
    let quiet = time(rounds, || {
        let _ = std::hint::black_box(sockets::look(lone_pid));
    });
    println!("\n{:<58} {:>9} {:>9} {:>8}", "µs per look", "median", "p90", "÷ walk");
    row("one read of /proc/net/tcp", tcp, walk.0);
    row(&format!("the process-tree walk alone ({TREE} processes)"), walk, walk.0);
    row("the foreground-job look a reply makes already", job, walk.0);
    row("the TCP listeners over sock_diag (IPv4 and IPv6)", diag, walk.0);
    row(&format!("the descriptors of the {} processes", pids.len()), fds, walk.0);
    row(&format!("listeners and jobs of {TREE} processes (target ≤ 1000 µs)"), full, walk.0);
    row("listeners and jobs of a lone process (a quiet shell)", quiet, walk.0);
    stop(big);
    stop(lone);
    Ok(())
}
