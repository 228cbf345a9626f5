//! The processes of a pane: its first process (usually its shell) and
//! every process started under it, background jobs and their children
//! included, as `/proc` shows them at one moment; and which of them are
//! jobs the shell runs in the background.
//!
//! A process's children are listed in `/proc/PID/task/TID/children`, one
//! file per thread (a child belongs to the thread that forked it; a Go
//! program forks from any of its threads), so the walk reads a few files
//! per process of the tree and none of the rest of the machine. A kernel
//! built without `CONFIG_PROC_CHILDREN` has no such file: then every
//! `/proc/*/stat` is read once and the tree is put together from the
//! parents they name. Either way a process that left the tree (a daemon
//! that forked twice, so that init adopted it) is not in it.
//!
//! A background job is a process group of the tree that is neither the
//! shell's own nor the terminal's foreground group, nor one on the way
//! from the shell to the foreground (a nested shell running a command),
//! nor one a foreground program other than a shell started (a debugger's
//! inferior).
//! Its job number (`%1`) is the shell's own bookkeeping, which `/proc`
//! does not show: jobs are named by their leader's pid.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs;
use std::io::ErrorKind;

use super::parse::{self, Stat};

/// The most processes a tree is walked to: a fork bomb in a pane costs a
/// bounded look.
pub const MAX_PROCS: usize = 1024;

/// A pane's processes, its first one first and each before its children.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tree {
    /// The processes; the first is the pane's.
    pub procs: Vec<Stat>,
}

impl Tree {
    /// The pane's first process.
    pub fn root(&self) -> Option<&Stat> {
        self.procs.first()
    }

    /// The processes of process group `pgid`, in tree order.
    pub fn group(&self, pgid: i32) -> impl Iterator<Item = &Stat> {
        self.procs.iter().filter(move |p| p.pgrp == pgid)
    }
}

/// Walks the tree under `root` (see the module doc).
pub fn walk(root: u32) -> Result<Tree, String> {
    walk_all(&[root]).pop().unwrap_or_else(|| Err("no tree".into()))
}

/// Walks the trees under each of `roots` (several panes at once): through
/// the `children` files, or by one scan of `/proc` shared by all of them.
pub fn walk_all(roots: &[u32]) -> Vec<Result<Tree, String>> {
    let firsts: Vec<Result<Stat, String>> = roots.iter().map(|&r| read_stat(r as i32)).collect();
    let Some(probe) = firsts.iter().flatten().next() else { return firsts.into_iter().map(|f| f.map(one)).collect() };
    if children_of(probe).is_some() {
        return firsts
            .into_iter()
            .map(|f| {
                f.map(|first| match children_of(&first) {
                    Some(kids) => by_children(first, kids),
                    None => one(first),
                })
            })
            .collect();
    }
    let lowest = firsts.iter().flatten().map(|f| f.pid).min().unwrap_or(0);
    let mut by_parent = scan(lowest);
    firsts.into_iter().map(|f| f.map(|first| from_parents(first, &mut by_parent))).collect()
}

/// Whether `root` is a shell with no child process: nothing under it can
/// listen or run in the background, and a shell listens on nothing of its
/// own (zsh's `ztcp -l` aside, which this does not see). Two small reads
/// through one descriptor of its directory (its `comm`, taken in one call
/// since it ends at its newline, and its `children` file, complete since
/// the shells named are single-threaded), so a reply at a quiet prompt
/// skips the whole look; `false` whenever it cannot tell (no `children`
/// files on this kernel, a process gone).
pub fn lone_shell(root: u32) -> bool {
    let Some(dir) = super::ProcDir::open(root) else { return false };
    let Some(comm) = dir.read("comm", Some(b'\n')) else { return false };
    super::is_shell_name(String::from_utf8_lossy(&comm).trim_end()) && dir.childless(root) == Some(true)
}

/// Whether process `pid`'s main thread has no child, from its `children`
/// file alone (one read); `None` when the kernel has no such files or the
/// process is gone. Complete only for a process of one thread: another
/// thread's children are in that thread's file.
pub fn childless(pid: u32) -> Option<bool> {
    super::ProcDir::open(pid)?.childless(pid)
}

/// A tree of `first` alone.
fn one(first: Stat) -> Tree {
    Tree { procs: vec![first] }
}

/// Breadth first through the `children` files.
fn by_children(first: Stat, kids: Vec<i32>) -> Tree {
    let mut seen: HashSet<i32> = HashSet::from([first.pid]);
    let mut procs = vec![first];
    let mut queue: VecDeque<i32> = kids.into();
    while let Some(pid) = queue.pop_front() {
        if procs.len() >= MAX_PROCS {
            break;
        }
        // Gone since its parent listed it, or listed twice: skipped.
        if !seen.insert(pid) {
            continue;
        }
        let Ok(stat) = read_stat(pid) else { continue };
        queue.extend(children_of(&stat).unwrap_or_default());
        procs.push(stat);
    }
    Tree { procs }
}

/// The children of `p` from its threads' `children` files; `None` when
/// the kernel has no such files.
fn children_of(p: &Stat) -> Option<Vec<i32>> {
    let single = format!("/proc/{0}/task/{0}/children", p.pid);
    if p.threads <= 1 {
        return match super::read_proc(&single) {
            Ok(text) => Some(parse::children(&text)),
            Err(e) if e.kind() == ErrorKind::NotFound && fs::metadata(format!("/proc/{}", p.pid)).is_ok() => None,
            Err(_) => Some(Vec::new()),
        };
    }
    let tasks = fs::read_dir(format!("/proc/{}/task", p.pid)).ok()?;
    let mut out = Vec::new();
    let mut any = false;
    for task in tasks.filter_map(Result::ok) {
        let path = task.path().join("children");
        if let Ok(text) = fs::read_to_string(path) {
            any = true;
            out.extend(parse::children(&text));
        }
    }
    any.then_some(out)
}

/// Every process's `stat` once, by parent. Pids are handed out in
/// increasing order, wrapping at `pid_max`: while the last one handed out
/// (`/proc/loadavg`) is above `lowest` (the oldest pane's first process)
/// and `pid_max` is large, no process under a pane can have a lower pid
/// than it, and the older processes (the host's daemons, tmux, this
/// router) are not read.
fn scan(lowest: i32) -> HashMap<i32, Vec<Stat>> {
    let mut by_parent: HashMap<i32, Vec<Stat>> = HashMap::new();
    let Ok(dir) = fs::read_dir("/proc") else { return by_parent };
    let skip_below = match no_wrap_since(lowest) {
        true => lowest,
        false => 0,
    };
    for entry in dir.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        if pid <= skip_below {
            continue;
        }
        if let Ok(stat) = read_stat(pid) {
            by_parent.entry(stat.ppid).or_default().push(stat);
        }
    }
    by_parent
}

/// The tree under `first`, breadth first through `by_parent` (whose
/// entries it takes: trees do not overlap).
fn from_parents(first: Stat, by_parent: &mut HashMap<i32, Vec<Stat>>) -> Tree {
    let mut procs = vec![first];
    let mut at = 0;
    while at < procs.len() && procs.len() < MAX_PROCS {
        let mut kids = by_parent.remove(&procs[at].pid).unwrap_or_default();
        kids.sort_by_key(|s| s.pid);
        let room = MAX_PROCS - procs.len();
        procs.extend(kids.into_iter().take(room));
        at += 1;
    }
    Tree { procs }
}

/// Whether pids have surely not wrapped around since `pid` was handed
/// out: the last one is above it and `pid_max` is over [`parse::SMALL_PID_MAX`]
/// (a host handing out millions of pids in a session's life is not
/// expected; one with a small `pid_max` may wrap in hours).
fn no_wrap_since(pid: i32) -> bool {
    let last = fs::read_to_string("/proc/loadavg").ok().and_then(|t| parse::last_pid(&t));
    let max = fs::read_to_string("/proc/sys/kernel/pid_max").ok().and_then(|t| t.trim().parse::<i32>().ok());
    matches!((last, max), (Some(last), Some(max)) if last >= pid && max > parse::SMALL_PID_MAX)
}

fn read_stat(pid: i32) -> Result<Stat, String> {
    let path = format!("/proc/{pid}/stat");
    let text = super::read_proc(&path).map_err(|e| format!("reading {path}: {e}"))?;
    parse::stat(&text).ok_or_else(|| format!("unreadable {path}"))
}

/// A job the pane's shell runs in the background.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Background {
    /// Its process group.
    pub pgid: i32,
    /// Its leader (the group's first process in the tree when the leader
    /// has exited).
    pub pid: i32,
    /// The leader's command name.
    pub program: String,
    /// Whether it is stopped (`ctrl+z`, or `SIGTTIN` on reading the
    /// terminal).
    pub stopped: bool,
    /// Every process of the job in the tree.
    pub pids: Vec<i32>,
}

/// The background jobs of `tree` (see the module doc), in tree order.
pub fn background(tree: &Tree) -> Vec<Background> {
    let Some(root) = tree.root() else { return Vec::new() };
    let foreground = if root.tpgid > 0 { root.tpgid } else { root.pgrp };
    // The groups of the processes from the shell down to the foreground.
    let by_pid: HashMap<i32, &Stat> = tree.procs.iter().map(|p| (p.pid, p)).collect();
    let mut on_the_way: HashSet<i32> = HashSet::from([root.pgrp, foreground]);
    for p in tree.group(foreground) {
        let mut at = by_pid.get(&p.ppid);
        let mut steps = 0;
        while let Some(parent) = at {
            on_the_way.insert(parent.pgrp);
            steps += 1;
            if parent.pid == root.pid || steps > MAX_PROCS {
                break;
            }
            at = by_pid.get(&parent.ppid);
        }
    }
    // What a foreground program other than a shell started in groups of
    // their own (a debugger's inferior, a test runner's servers) is that
    // program's work, not a job of the shell's; a shell in front (a nested
    // `bash` at its prompt) has background jobs of its own.
    let shell_in_front = tree.group(foreground).any(|m| m.pid == foreground && super::is_shell_name(&m.comm));
    let under_foreground = |p: &Stat| {
        let mut at = by_pid.get(&p.ppid);
        let mut steps = 0;
        while let Some(parent) = at {
            if parent.pgrp == foreground {
                return true;
            }
            steps += 1;
            if parent.pid == root.pid || steps > MAX_PROCS {
                return false;
            }
            at = by_pid.get(&parent.ppid);
        }
        false
    };
    let mut jobs: Vec<Background> = Vec::new();
    for p in &tree.procs {
        if on_the_way.contains(&p.pgrp) || jobs.iter().any(|j| j.pgid == p.pgrp) {
            continue;
        }
        if !shell_in_front && under_foreground(p) {
            continue;
        }
        let members: Vec<&Stat> = tree.group(p.pgrp).collect();
        let leader = members.iter().find(|m| m.pid == p.pgrp).copied().unwrap_or(p);
        jobs.push(Background {
            pgid: p.pgrp,
            pid: leader.pid,
            program: leader.comm.clone(),
            stopped: members.iter().all(|m| matches!(m.state, 'T' | 't')),
            pids: members.iter().map(|m| m.pid).collect(),
        });
    }
    jobs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shell_alone_is_told_from_one_with_children() {
        use std::process::{Command, Stdio};
        if children_of(&read_stat(std::process::id() as i32).expect("own stat")).is_none() {
            return eprintln!("skipped: this kernel has no children files");
        }
        let spawn =
            |script: &str| Command::new("bash").args(["-c", script]).stdin(Stdio::piped()).spawn().expect("bash");
        let mut alone = spawn("read -r x");
        let mut parent = spawn("sleep 30 & read -r x; kill %1");
        let mut sleeper = Command::new("sleep").arg("30").spawn().expect("sleep");
        // Until each is what it will be: bash has forked its sleep, and the
        // lone bash carries its name. A vfork'd child lets its parent go on
        // before the kernel renames it, so `spawn` may return while its
        // comm is still this test thread's.
        let named = |pid: u32| read_stat(pid as i32).is_ok_and(|s| s.comm == "bash");
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while (children_of(&read_stat(parent.id() as i32).expect("stat")).is_none_or(|k| k.is_empty())
            || !named(alone.id()))
            && std::time::Instant::now() < until
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(lone_shell(alone.id()), "a shell reading its input alone");
        assert_eq!((childless(alone.id()), childless(parent.id())), (Some(true), Some(false)));
        assert!(!lone_shell(parent.id()), "a shell with a job");
        assert!(!lone_shell(sleeper.id()), "not a shell");
        // The job of the killed bash would outlive it.
        for job in children_of(&read_stat(parent.id() as i32).expect("stat")).unwrap_or_default() {
            let _ = Command::new("kill").arg(job.to_string()).status();
        }
        for child in [&mut alone, &mut parent, &mut sleeper] {
            let _ = child.kill();
            let _ = child.wait();
        }
        assert!(!lone_shell(alone.id()), "gone");
    }

    fn p(pid: i32, ppid: i32, pgrp: i32, comm: &str) -> Stat {
        Stat { pid, comm: comm.into(), state: 'S', ppid, pgrp, tpgid: -1, threads: 1 }
    }

    fn tree(tpgid: i32, rest: &[Stat]) -> Tree {
        let mut shell = p(100, 1, 100, "bash");
        shell.tpgid = tpgid;
        let mut procs = vec![shell];
        procs.extend(rest.iter().cloned());
        Tree { procs }
    }

    #[test]
    fn a_shell_at_its_prompt_with_two_jobs_behind_it() {
        let mut stopped = p(300, 100, 300, "vim");
        stopped.state = 'T';
        let t = tree(100, &[p(200, 100, 200, "python3"), p(201, 200, 200, "python3"), stopped]);
        let jobs = background(&t);
        assert_eq!(jobs.len(), 2);
        assert_eq!((jobs[0].pid, jobs[0].program.as_str(), jobs[0].pids.clone()), (200, "python3", vec![200, 201]));
        assert!(!jobs[0].stopped && jobs[1].stopped);
    }

    #[test]
    fn the_foreground_and_the_shells_on_its_way_are_not_background() {
        // A nested bash 500 runs `cat` 600 in the foreground and `node` 700
        // in the background; then a `make` with its compiler in front.
        let t = tree(600, &[p(500, 100, 500, "bash"), p(600, 500, 600, "cat"), p(700, 500, 700, "node")]);
        let jobs = background(&t);
        assert_eq!(jobs.iter().map(|j| j.pid).collect::<Vec<_>>(), vec![700], "{jobs:?}");
        let t = tree(200, &[p(200, 100, 200, "make"), p(201, 200, 200, "cc")]);
        assert!(background(&t).is_empty());
    }

    #[test]
    fn what_a_program_in_front_started_is_not_the_shells_job() {
        // gdb 200 in front, its inferior 300 stopped at a breakpoint in a
        // group of its own; the shell's own `sleep` 400 behind.
        let mut inferior = p(300, 200, 300, "crash");
        inferior.state = 't';
        let t = tree(200, &[p(200, 100, 200, "gdb"), inferior, p(400, 100, 400, "sleep")]);
        assert_eq!(background(&t).iter().map(|j| j.pid).collect::<Vec<_>>(), vec![400]);
        // A nested bash 500 at its prompt: its `node` 700 is its job.
        let t = tree(500, &[p(500, 100, 500, "bash"), p(700, 500, 700, "node")]);
        assert_eq!(background(&t).iter().map(|j| j.pid).collect::<Vec<_>>(), vec![700]);
    }

    #[test]
    fn a_job_whose_leader_exited_is_named_by_its_first_process() {
        let t = tree(100, &[p(201, 100, 200, "sleep")]);
        let jobs = background(&t);
        assert_eq!((jobs[0].pgid, jobs[0].pid), (200, 201));
    }

    #[test]
    fn this_process_has_a_tree_of_at_least_itself() {
        let me = std::process::id();
        let t = walk(me).expect("walked");
        assert_eq!(t.root().map(|r| r.pid), Some(me as i32));
        let child = std::process::Command::new("sleep").arg("5").spawn().expect("sleep");
        let t = walk(me).expect("walked");
        let found = t.procs.iter().any(|p| p.pid == child.id() as i32);
        let mut child = child;
        let _ = child.kill();
        let _ = child.wait();
        assert!(found, "the child is in the tree: {t:?}");
    }
}
