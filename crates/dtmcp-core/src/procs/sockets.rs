//! What a pane's processes listen on, and which of them are background
//! jobs: one [`look`] at the tree under its first process.
//!
//! Each process's descriptors are read as links (`/proc/PID/fd/N` →
//! `socket:[INODE]`, parsed by procfs-core) relative to its open `fd`
//! directory, so a link costs one `readlinkat` and no walk of the path.
//! Only when some process holds a socket are the socket tables read, from
//! `/proc/ROOT/net/` (the tables of the pane's network namespace), one
//! after another until every inode is placed: `tcp`, `tcp6`, `unix`,
//! `udp`, `udp6`; in the router's own namespace the kernel is asked for
//! the TCP listeners over sock_diag instead of `tcp` and `tcp6`, which
//! cost milliseconds on a big host ([`super::diag`]). An inode in none of them (a process of the tree in
//! another namespace: `unshare -n`, a container's) sends the look to the
//! tables of that process's own namespace, for a few namespaces at most.
//! Sockets of other kinds (netlink, packet) are in no table and are left
//! out.
//!
//! A process of another user (`sudo`) whose descriptors cannot be read is
//! counted, and its sockets are not seen. Nothing here runs unless asked:
//! a reply, a listing or a wait calls [`look`], nothing calls it on a
//! timer.

use std::collections::{HashMap, HashSet};
use std::fmt::Write;
use std::fs;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;

use nix::dir::Dir;
use nix::fcntl::{OFlag, readlinkat};
use nix::sys::stat::Mode;
use procfs_core::process::FDTarget;

use super::net::{self, Socket};
use super::parse;
use super::tree::{self, Background, Tree};

/// The most network namespaces besides the pane's whose tables one look reads.
const MAX_OTHER_NAMESPACES: usize = 4;
/// The longest command line a listener or job is named by, in characters.
pub const COMMAND_CHARS: usize = 60;

/// What kind of socket listens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A TCP socket in `LISTEN` (IPv4 or IPv6).
    Tcp,
    /// A UDP socket bound to a port.
    Udp,
    /// A Unix socket bound to a path.
    Unix,
}

/// One socket a process of the tree listens on, and who holds it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Listener {
    /// Its kind.
    pub kind: Kind,
    /// The address it is bound to (TCP, UDP).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub address: Option<IpAddr>,
    /// Its port (TCP, UDP).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub port: Option<u16>,
    /// Its path (Unix).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub path: Option<String>,
    /// The process that holds it (the first in the tree, when several do:
    /// a server's workers share its socket).
    pub pid: i32,
    /// That process's command name.
    pub program: String,
    /// Its command line, cut short (see [`parse::short_command`]).
    pub command: String,
}

impl Listener {
    /// Where it listens: `127.0.0.1:8123`, `[::]:5173`, `udp 0.0.0.0:5353`,
    /// `unix /tmp/app.sock`.
    pub fn endpoint(&self) -> String {
        match (self.kind, self.address, self.port, &self.path) {
            (Kind::Tcp, Some(a), Some(p), _) => SocketAddr::new(a, p).to_string(),
            (Kind::Udp, Some(a), Some(p), _) => format!("udp {}", SocketAddr::new(a, p)),
            (_, _, _, Some(path)) => format!("unix {path}"),
            _ => "?".to_string(),
        }
    }

    /// An address on this host a client can reach it at: a socket bound to
    /// every address (`0.0.0.0`, `::`) is reached on loopback. `None` for
    /// a Unix socket.
    pub fn reach(&self) -> Option<SocketAddr> {
        let (address, port) = (self.address?, self.port?);
        let address = match address {
            IpAddr::V4(a) if a.is_unspecified() => IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            IpAddr::V6(a) if a.is_unspecified() => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
            other => other,
        };
        Some(SocketAddr::new(address, port))
    }

    /// What a reply calls its holder: `python3 -m http.server 8123, pid 4242`.
    pub fn holder(&self) -> String {
        let what = if self.command.is_empty() { &self.program } else { &self.command };
        format!("{what}, pid {}", self.pid)
    }

    /// Whether two looks saw the same socket (the same place, the same
    /// holder).
    pub fn same(&self, other: &Listener) -> bool {
        (self.kind, self.address, self.port, &self.path, self.pid)
            == (other.kind, other.address, other.port, &other.path, other.pid)
    }
}

/// Listeners said in one line, those of one holder together:
/// `127.0.0.1:8123, [::1]:8123 (python3 -m http.server 8123, pid 4242); …`.
pub fn said(listeners: &[Listener]) -> String {
    let mut holders: Vec<(i32, String, Vec<String>)> = Vec::new();
    for l in listeners {
        match holders.iter_mut().find(|(pid, _, _)| *pid == l.pid) {
            Some((_, _, places)) => places.push(l.endpoint()),
            None => holders.push((l.pid, l.holder(), vec![l.endpoint()])),
        }
    }
    let mut out = String::new();
    for (i, (_, holder, places)) in holders.iter().enumerate() {
        if i > 0 {
            out.push_str("; ");
        }
        let _ = write!(out, "{} ({holder})", places.join(", "));
    }
    out
}

/// A background job with its command line and what it listens on.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Job {
    /// Its leader's pid.
    pub pid: i32,
    /// Its process group.
    pub pgid: i32,
    /// Its leader's command line, cut short.
    pub command: String,
    /// Whether it is stopped.
    pub stopped: bool,
    /// How many processes it has.
    pub processes: usize,
    /// The ports and paths its processes listen on.
    pub listening: Vec<String>,
}

impl Job {
    /// One line for a listing: `pid 4242 python3 -m http.server 8123 (listening on [::]:8123)`.
    pub fn line(&self) -> String {
        let mut line = format!("pid {} `{}`", self.pid, self.command);
        if self.stopped {
            line.push_str(" (stopped)");
        }
        if !self.listening.is_empty() {
            let _ = write!(line, " listening on {}", self.listening.join(", "));
        }
        line
    }
}

/// One look at a pane's processes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Look {
    /// What they listen on, in tree order of their holders.
    pub listeners: Vec<Listener>,
    /// The jobs the shell runs in the background.
    pub jobs: Vec<Job>,
    /// Where a process of the tree leads to a host or container whose
    /// `/proc` is not this one (`box via ssh`): what listens there is not
    /// seen.
    pub far: Vec<String>,
    /// How many processes the tree has.
    pub processes: usize,
    /// How many of them hid their descriptors (another user's).
    pub unreadable: usize,
}

/// Looks at the tree under `root` (see the module doc).
pub fn look(root: u32) -> Result<Look, String> {
    looks(&[root]).pop().unwrap_or_else(|| Err("no look".into()))
}

/// Looks at the trees under each of `roots` at once (a listing of every
/// session): one walk of `/proc` and one read of each socket table serve
/// them all.
pub fn looks(roots: &[u32]) -> Vec<Result<Look, String>> {
    let trees = tree::walk_all(roots);
    let walked: Vec<&Tree> = trees.iter().flatten().collect();
    let mut looks: Vec<Look> = walked.iter().map(|t| Look { processes: t.procs.len(), ..Look::default() }).collect();
    // Each socket inode and the first process (in tree order) holding it.
    let mut held: HashMap<u64, (usize, usize)> = HashMap::new();
    for (t, tree) in walked.iter().enumerate() {
        // A shell alone listens on nothing of its own (see
        // [`tree::lone_shell`]): its descriptors are not read.
        if tree.procs.len() == 1 && tree.root().is_some_and(|r| super::is_shell_name(&r.comm)) {
            continue;
        }
        for (i, p) in tree.procs.iter().enumerate() {
            match socket_inodes(p.pid) {
                Ok(inodes) => inodes.into_iter().for_each(|ino| {
                    held.entry(ino).or_insert((t, i));
                }),
                Err(_) => looks[t].unreadable += 1,
            }
        }
    }
    let mut commands: HashMap<i32, Vec<String>> = HashMap::new();
    let mut argv = |pid: i32| commands.entry(pid).or_insert_with(|| super::argv(pid)).clone();
    for (ino, socket) in place(&walked, &held) {
        let Some(&(t, i)) = held.get(&ino) else { continue };
        let p = &walked[t].procs[i];
        let (kind, address, port, path) = match socket {
            Socket::TcpListen(a) => (Kind::Tcp, Some(a.ip()), Some(a.port()), None),
            Socket::UdpBound(a) => (Kind::Udp, Some(a.ip()), Some(a.port()), None),
            Socket::UnixBound(path) => (Kind::Unix, None, None, Some(path)),
            Socket::Other => continue,
        };
        let command = parse::short_command(&argv(p.pid), COMMAND_CHARS);
        looks[t].listeners.push(Listener { kind, address, port, path, pid: p.pid, program: p.comm.clone(), command });
    }
    for (look, tree) in looks.iter_mut().zip(&walked) {
        let order: HashMap<i32, usize> = tree.procs.iter().enumerate().map(|(i, p)| (p.pid, i)).collect();
        look.listeners.sort_by_key(|l| (order.get(&l.pid).copied(), l.kind, l.port, l.address, l.path.clone()));
        let shell = tree.root().map(|r| r.pid);
        look.jobs = tree::background(tree).into_iter().map(|b| job(b, shell, &look.listeners, &mut argv)).collect();
        look.far = far(tree, &mut argv);
    }
    let mut looks = looks.into_iter();
    trees.into_iter().map(|t| t.map(|_| looks.next().unwrap_or_default())).collect()
}

/// Job `b` of the tree whose shell is `shell`. A subshell (`( … ) &`) is
/// a fork of that shell with its command line: it is named by the first
/// command it runs, as `( sleep 5 … )`, not as a second copy of the shell.
fn job(b: Background, shell: Option<i32>, listeners: &[Listener], argv: &mut impl FnMut(i32) -> Vec<String>) -> Job {
    let listening = listeners.iter().filter(|l| b.pids.contains(&l.pid)).map(Listener::endpoint).collect();
    let words = argv(b.pid);
    let subshell = !words.is_empty() && shell.is_some_and(|sh| sh != b.pid && argv(sh) == words);
    let command = if subshell {
        let inner = b.pids.iter().map(|&pid| argv(pid)).find(|w| !w.is_empty() && *w != words);
        match inner {
            Some(w) => format!("( {} … )", parse::short_command(&w, COMMAND_CHARS)),
            None => "( subshell )".to_string(),
        }
    } else if words.is_empty() {
        b.program.clone()
    } else {
        parse::short_command(&words, COMMAND_CHARS)
    };
    Job { pid: b.pid, pgid: b.pgid, command, stopped: b.stopped, processes: b.pids.len(), listening }
}

/// Where the tree's carriers (`ssh HOST`, `podman exec …`) lead.
fn far(tree: &Tree, argv: &mut impl FnMut(i32) -> Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in tree.procs.iter().filter(|p| parse::CARRIERS.contains(&p.comm.as_str())) {
        if let Some(c) = parse::carrier(&argv(p.pid)) {
            let place = format!("{} via {}", c.target, c.program);
            if !out.contains(&place) {
                out.push(place);
            }
        }
    }
    out
}

/// The sockets of `held` (by tree and process), each placed by the table
/// of its namespace that lists it; inodes no table lists are left out.
fn place(trees: &[&Tree], held: &HashMap<u64, (usize, usize)>) -> Vec<(u64, Socket)> {
    let Some(root) = trees.first().and_then(|t| t.root()) else { return Vec::new() };
    if held.is_empty() {
        return Vec::new();
    }
    let mut left: HashSet<u64> = held.keys().copied().collect();
    let own = namespace(std::process::id() as i32);
    let mine = namespace(root.pid);
    let mut out = tables(root.pid, &mut left, mine.is_some() && mine == own);
    if left.is_empty() {
        return out;
    }
    // Held in another network namespace: that namespace's own tables.
    let mut done: HashSet<String> = mine.into_iter().collect();
    let mut holders: Vec<i32> =
        left.iter().filter_map(|ino| held.get(ino)).map(|&(t, i)| trees[t].procs[i].pid).collect();
    holders.sort_unstable();
    holders.dedup();
    for pid in holders {
        if left.is_empty() || done.len() > MAX_OTHER_NAMESPACES {
            break;
        }
        if let Some(ns) = namespace(pid)
            && done.insert(ns.clone())
        {
            out.extend(tables(pid, &mut left, Some(ns) == own));
        }
    }
    out
}

/// The sockets of `left` in the tables of `pid`'s namespace, taken out
/// of `left` as they are found; a table is read only while some are left.
/// `ours`: that namespace is this process's, so the kernel is asked for
/// its TCP listeners over sock_diag rather than read `tcp` and `tcp6`
/// (see [`super::diag`]); then the TCP sockets not listed are no
/// listeners, though they may be connections the other tables do not
/// hold either.
fn tables(pid: i32, left: &mut HashSet<u64>, ours: bool) -> Vec<(u64, Socket)> {
    let little = cfg!(target_endian = "little");
    let mut out = Vec::new();
    let mut tcp_by_proc = !ours;
    if ours {
        match super::diag::tcp_listeners() {
            Ok(listening) => {
                for (ino, address) in listening {
                    if left.remove(&ino) {
                        out.push((ino, Socket::TcpListen(address)));
                    }
                }
            }
            Err(_) => tcp_by_proc = true,
        }
    }
    for name in ["tcp", "tcp6", "unix", "udp", "udp6"] {
        if left.is_empty() {
            break;
        }
        if name.starts_with("tcp") && !tcp_by_proc {
            continue;
        }
        let Ok(text) = fs::read_to_string(format!("/proc/{pid}/net/{name}")) else { continue };
        let found = match name {
            "unix" => net::unix(&text, left),
            "tcp" | "tcp6" => net::tcp(&net::lines_holding(&text, left), little),
            _ => net::udp(&net::lines_holding(&text, left), little),
        };
        for (ino, socket) in found {
            if left.remove(&ino) {
                out.push((ino, socket));
            }
        }
    }
    out
}

/// The network namespace `pid` is in (`net:[4026531840]`).
fn namespace(pid: i32) -> Option<String> {
    fs::read_link(format!("/proc/{pid}/ns/net")).ok().map(|p| p.display().to_string())
}

/// The inodes of the sockets `pid` holds, from its descriptors' links.
pub fn socket_inodes(pid: i32) -> Result<Vec<u64>, String> {
    let path = format!("/proc/{pid}/fd");
    let mut dir = Dir::open(path.as_str(), OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())
        .map_err(|e| format!("{path}: {e}"))?;
    let raw = dir.as_raw_fd();
    // SAFETY: `dir` owns the descriptor and outlives every use of this
    // borrow, which ends with the loop below.
    let fd = unsafe { BorrowedFd::borrow_raw(raw) };
    let mut out = Vec::new();
    for entry in dir.iter().filter_map(Result::ok) {
        let name = entry.file_name();
        if name.to_bytes().first().is_none_or(|b| !b.is_ascii_digit()) {
            continue;
        }
        // A descriptor closed since the listing is skipped.
        let Ok(link) = readlinkat(fd, name) else { continue };
        let Ok(text) = std::str::from_utf8(link.as_bytes()) else { continue };
        if let Ok(FDTarget::Socket(inode)) = text.parse::<FDTarget>() {
            out.push(inode);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, UdpSocket};
    use std::os::unix::net::UnixListener;

    fn tcp(address: &str, pid: i32) -> Listener {
        let a: SocketAddr = address.parse().expect("address");
        Listener {
            kind: Kind::Tcp,
            address: Some(a.ip()),
            port: Some(a.port()),
            path: None,
            pid,
            program: "python3".into(),
            command: "python3 -m http.server".into(),
        }
    }

    #[test]
    fn endpoints_and_where_to_reach_them() {
        assert_eq!(tcp("0.0.0.0:8000", 1).endpoint(), "0.0.0.0:8000");
        assert_eq!(tcp("0.0.0.0:8000", 1).reach(), Some("127.0.0.1:8000".parse().expect("a")));
        assert_eq!(tcp("[::]:8000", 1).reach(), Some("[::1]:8000".parse().expect("a")));
        assert_eq!(tcp("192.168.1.4:80", 1).reach(), Some("192.168.1.4:80".parse().expect("a")));
        let unix =
            Listener { kind: Kind::Unix, address: None, port: None, path: Some("/tmp/s".into()), ..tcp("[::]:1", 1) };
        assert_eq!((unix.endpoint().as_str(), unix.reach()), ("unix /tmp/s", None));
    }

    #[test]
    fn one_holder_is_said_once() {
        let all = [tcp("0.0.0.0:8000", 7), tcp("[::]:8000", 7), tcp("127.0.0.1:9000", 8)];
        assert_eq!(
            said(&all),
            "0.0.0.0:8000, [::]:8000 (python3 -m http.server, pid 7); 127.0.0.1:9000 (python3 -m http.server, pid 8)"
        );
        assert!(all[0].same(&all[0].clone()) && !all[0].same(&all[2]));
    }

    #[test]
    fn this_process_is_seen_listening_on_tcp_udp_and_unix() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.sock");
        let t = TcpListener::bind("127.0.0.1:0").expect("tcp");
        let u = UdpSocket::bind("127.0.0.1:0").expect("udp");
        let x = UnixListener::bind(&path).expect("unix");
        let connected = std::net::TcpStream::connect(t.local_addr().expect("addr")).expect("connect");
        let look = look(std::process::id()).expect("look");
        let me = std::process::id() as i32;
        let ours: Vec<&Listener> = look.listeners.iter().filter(|l| l.pid == me).collect();
        let tport = t.local_addr().expect("addr").port();
        let uport = u.local_addr().expect("addr").port();
        assert!(ours.iter().any(|l| l.kind == Kind::Tcp && l.port == Some(tport)), "{ours:?}");
        assert!(ours.iter().any(|l| l.kind == Kind::Udp && l.port == Some(uport)), "{ours:?}");
        let path = path.display().to_string();
        assert!(ours.iter().any(|l| l.kind == Kind::Unix && l.path.as_deref() == Some(&path)), "{ours:?}");
        let connection = connected.local_addr().expect("addr").port();
        assert!(!ours.iter().any(|l| l.port == Some(connection)), "a connection is not a listener");
        drop((t, u, x, connected));
    }
}
