//! Pure readers of the socket tables under `/proc/PID/net/` (`tcp`,
//! `tcp6`, `udp`, `udp6`, `unix`): no file is opened here.
//!
//! The TCP and UDP tables are parsed by `procfs-core`. A table holds every
//! socket of a network namespace, and procfs-core makes a `String` and
//! decodes two addresses for each line, so the lines are first picked by
//! their inode (the tenth column, found without allocating): only the
//! sockets a pane's processes hold are parsed, whatever else the host
//! runs.
//!
//! The Unix table is read by hand: procfs-core drops its `Flags` column,
//! and that column is the only place the kernel says a stream socket
//! listens (`__SO_ACCEPTCON`); without it the connections a server has
//! accepted, which carry its path too, would each count as a listener.

use std::collections::HashSet;
use std::net::SocketAddr;

use procfs_core::FromBufReadSI;
use procfs_core::net::{TcpNetEntries, TcpState, UdpNetEntries, UdpState};

/// The flag of a Unix socket that listens (`__SO_ACCEPTCON`).
const ACCEPTING: u32 = 0x0001_0000;
/// `SOCK_STREAM`, `SOCK_DGRAM` and `SOCK_SEQPACKET`.
const STREAM: u16 = 1;
const DGRAM: u16 = 2;
const SEQPACKET: u16 = 5;
/// The Unix socket state `SS_UNCONNECTED`.
const UNCONNECTED: u8 = 1;

/// What a socket of a table is, as far as listening goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Socket {
    /// A TCP socket in the `LISTEN` state.
    TcpListen(SocketAddr),
    /// A UDP socket bound to a port and connected to nothing.
    UdpBound(SocketAddr),
    /// A Unix socket with a path in the file system that takes
    /// connections (stream, seqpacket) or datagrams.
    UnixBound(String),
    /// Any other socket of the table: a connection, an unbound socket, an
    /// abstract name.
    Other,
}

/// The lines of a TCP or UDP table (its heading first) whose inode is in
/// `inodes`; the others are left out unparsed.
pub fn lines_holding(table: &str, inodes: &HashSet<u64>) -> String {
    let mut lines = table.lines();
    let mut out = String::new();
    if let Some(heading) = lines.next() {
        out.push_str(heading);
        out.push('\n');
    }
    for line in lines {
        let inode = line.split_ascii_whitespace().nth(9).and_then(|i| i.parse::<u64>().ok());
        if inode.is_some_and(|i| inodes.contains(&i)) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The sockets of a TCP table (`tcp` or `tcp6`), by inode. Each line is
/// handed to procfs-core alone: a line it cannot read (a state it does not
/// know) is left out, not the table.
pub fn tcp(table: &str, little_endian: bool) -> Vec<(u64, Socket)> {
    let info = system(little_endian);
    each_line(table, |one| {
        let entries = TcpNetEntries::from_buf_read(one, &info).ok()?;
        entries.0.into_iter().next().map(|e| {
            let what = match e.state {
                TcpState::Listen => Socket::TcpListen(e.local_address),
                _ => Socket::Other,
            };
            (e.inode, what)
        })
    })
}

/// The sockets of a UDP table (`udp` or `udp6`), by inode: a socket
/// bound to a port and to no peer receives datagrams from anyone.
pub fn udp(table: &str, little_endian: bool) -> Vec<(u64, Socket)> {
    let info = system(little_endian);
    each_line(table, |one| {
        let entries = UdpNetEntries::from_buf_read(one, &info).ok()?;
        entries.0.into_iter().next().map(|e| {
            let bound = e.local_address.port() != 0 && e.remote_address.port() == 0;
            let what = match (e.state, bound) {
                (UdpState::Close, true) => Socket::UdpBound(e.local_address),
                _ => Socket::Other,
            };
            (e.inode, what)
        })
    })
}

/// `read` of each line of a table after its heading, given as a table of
/// that one line (procfs-core skips a first line).
fn each_line(table: &str, read: impl Fn(&[u8]) -> Option<(u64, Socket)>) -> Vec<(u64, Socket)> {
    let mut one = Vec::new();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            one.clear();
            one.extend_from_slice(b"-\n");
            one.extend_from_slice(line.as_bytes());
            read(&one)
        })
        .collect()
}

/// The sockets of the Unix table whose inode is in `inodes`:
/// `Num RefCount Protocol Flags Type St Inode Path`, the path being the
/// rest of the line (it may hold spaces), `@` first for an abstract name.
pub fn unix(table: &str, inodes: &HashSet<u64>) -> Vec<(u64, Socket)> {
    table.lines().skip(1).filter_map(|line| unix_line(line, inodes)).collect()
}

fn unix_line(line: &str, inodes: &HashSet<u64>) -> Option<(u64, Socket)> {
    let mut fields = line.split_ascii_whitespace();
    let _slot = fields.next()?;
    let _refs = fields.next()?;
    let _protocol = fields.next()?;
    let flags = u32::from_str_radix(fields.next()?, 16).ok()?;
    let kind = u16::from_str_radix(fields.next()?, 16).ok()?;
    let state = u8::from_str_radix(fields.next()?, 16).ok()?;
    let inode_text = fields.next()?;
    let inode: u64 = inode_text.parse().ok()?;
    if !inodes.contains(&inode) {
        return None;
    }
    // The path is everything after the inode and one space.
    let at = line.find(inode_text).map(|i| i + inode_text.len())?;
    let path = line[at..].strip_prefix(' ').unwrap_or("");
    let takes = match kind {
        STREAM | SEQPACKET => flags & ACCEPTING != 0,
        DGRAM => state == UNCONNECTED,
        _ => false,
    };
    let what = match takes && path.starts_with('/') {
        true => Socket::UnixBound(path.to_string()),
        false => Socket::Other,
    };
    Some((inode, what))
}

/// What procfs-core needs to read a table: only the byte order counts.
fn system(little_endian: bool) -> procfs_core::ExplicitSystemInfo {
    procfs_core::ExplicitSystemInfo {
        boot_time_secs: 0,
        ticks_per_second: 100,
        page_size: 4096,
        is_little_endian: little_endian,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured: a `python3 -m http.server 8123` (on `0.0.0.0`), an
    /// established connection to it, and sshd's listener.
    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1FBB 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 81233 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1FBB 0100007F:D2A4 01 00000000:00000000 00:00000000 00000000  1000        0 81240 1 0000000000000000 20 4 30 10 -1
   2: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1301 1 0000000000000000 100 0 0 10 0
";
    /// Captured: a node server on `[::]:5173` and one on `[::1]:3000`.
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1435 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 90001 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000001000000:0BB8 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 90002 1 0000000000000000 100 0 0 10 0
";
    /// Captured: `nc -u -l 9999`, and a resolver's connected socket.
    const UDP: &str = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  125: 00000000:270F 00000000:0000 07 00000000:00000000 00:00000000 00000000  1000        0 70001 2 0000000000000000 0
  201: 0100007F:C351 3500007F:0035 01 00000000:00000000 00:00000000 00000000  1000        0 70002 2 0000000000000000 0
";
    /// Captured: a listening stream socket, a connection it accepted
    /// (same path), a bound datagram socket, an abstract listener, a
    /// path with a space, and an unbound socket.
    const UNIX: &str = "Num       RefCount Protocol Flags    Type St Inode Path
0000000000000000: 00000002 00000000 00010000 0001 01 50001 /tmp/app.sock
0000000000000000: 00000003 00000000 00000000 0001 03 50002 /tmp/app.sock
0000000000000000: 00000002 00000000 00000000 0002 01 50003 /run/user/1000/log.sock
0000000000000000: 00000002 00000000 00010000 0001 01 50004 @/tmp/.X11-unix/X0
0000000000000000: 00000002 00000000 00010000 0005 01 50005 /tmp/a b.sock
0000000000000000: 00000003 00000000 00000000 0001 03 50006
";

    fn all(ids: &[u64]) -> HashSet<u64> {
        ids.iter().copied().collect()
    }

    #[test]
    fn tcp_listeners_and_not_their_connections() {
        let picked = lines_holding(TCP, &all(&[81233, 81240]));
        assert_eq!(picked.lines().count(), 3, "heading and two lines: {picked}");
        let got = tcp(&picked, true);
        assert_eq!(got[0], (81233, Socket::TcpListen("0.0.0.0:8123".parse().expect("addr"))));
        assert_eq!(got[1], (81240, Socket::Other));
    }

    #[test]
    fn tcp6_listeners_on_any_and_on_loopback() {
        let got = tcp(TCP6, true);
        assert_eq!(got[0], (90001, Socket::TcpListen("[::]:5173".parse().expect("addr"))));
        assert_eq!(got[1], (90002, Socket::TcpListen("[::1]:3000".parse().expect("addr"))));
    }

    #[test]
    fn udp_bound_but_not_connected() {
        let got = udp(UDP, true);
        assert_eq!(got[0], (70001, Socket::UdpBound("0.0.0.0:9999".parse().expect("addr"))));
        assert_eq!(got[1], (70002, Socket::Other));
    }

    #[test]
    fn unix_listeners_by_their_flag_with_a_path() {
        let got = unix(UNIX, &all(&[50001, 50002, 50003, 50004, 50005, 50006]));
        assert_eq!(
            got,
            vec![
                (50001, Socket::UnixBound("/tmp/app.sock".into())),
                (50002, Socket::Other),
                (50003, Socket::UnixBound("/run/user/1000/log.sock".into())),
                (50004, Socket::Other),
                (50005, Socket::UnixBound("/tmp/a b.sock".into())),
                (50006, Socket::Other),
            ]
        );
        assert!(unix(UNIX, &all(&[1])).is_empty(), "sockets of others are left out");
    }

    #[test]
    fn odd_tables_are_refused_or_skipped_not_panicked_on() {
        let odd_state = TCP.replace(" 0A ", " 0F ");
        assert_eq!(tcp(&odd_state, true).len(), 1, "only the connection's line is read");
        assert!(tcp("heading\n0: garbage\n", true).is_empty());
        assert!(tcp("", true).is_empty());
        assert_eq!(lines_holding("", &all(&[1])), "");
        assert!(unix("heading\nx: y\n0: 1 0 zz 1 1 5 /p\n", &all(&[5])).is_empty());
    }
}
