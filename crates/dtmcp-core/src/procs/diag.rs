//! The TCP sockets in `LISTEN` of this process's network namespace, asked
//! of the kernel over `NETLINK_SOCK_DIAG` (what `ss -ltn` does).
//!
//! `/proc/net/tcp` walks every bucket of the host's connection hash table
//! on each read, busy or not: 3.4 ms on the 2-core reference machine
//! (24 GB, a table sized to it), over three times the budget of a whole
//! look. A sock_diag dump that asks for the `LISTEN` state alone walks
//! only the listening table. The netlink socket is opened per look and
//! closed after it, and its answer is awaited for a bounded time.
//!
//! The wire: a `nlmsghdr` (length, type `SOCK_DIAG_BY_FAMILY`, flags
//! `NLM_F_REQUEST | NLM_F_DUMP`, sequence, port id; native endian) and an
//! `inet_diag_req_v2` (family, `IPPROTO_TCP`, no extensions, the state
//! mask, a zero socket id); each answer is a `nlmsghdr` and an
//! `inet_diag_msg`, whose ports and addresses are in network order and
//! whose inode is its last field; `NLMSG_DONE` ends the dump and
//! `NLMSG_ERROR` refuses it.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};

use nix::libc;
use nix::poll::{PollFd, PollFlags, poll};

/// `SOCK_DIAG_BY_FAMILY`.
const BY_FAMILY: u16 = 20;
/// `NLMSG_ERROR` and `NLMSG_DONE`.
const ERROR: u16 = 2;
const DONE: u16 = 3;
/// `NLM_F_REQUEST | NLM_F_DUMP`.
const DUMP: u16 = 0x1 | 0x300;
/// `TCP_LISTEN` as a bit of the state mask.
const LISTEN_BIT: u32 = 1 << 10;
/// Header and message sizes.
const HEADER: usize = 16;
const REQUEST: usize = 56;
const MESSAGE: usize = 72;
/// How long the kernel may take to answer one part of a dump.
const ANSWER_MS: u16 = 200;
/// The most parts of a dump read (a host with very many listeners is cut).
const MAX_PARTS: usize = 256;

/// A dump request for the listening TCP sockets of `family`
/// (`AF_INET` or `AF_INET6`).
pub fn request(family: u8, seq: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + REQUEST);
    out.extend_from_slice(&((HEADER + REQUEST) as u32).to_ne_bytes());
    out.extend_from_slice(&BY_FAMILY.to_ne_bytes());
    out.extend_from_slice(&DUMP.to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.extend_from_slice(&[family, libc::IPPROTO_TCP as u8, 0, 0]);
    out.extend_from_slice(&LISTEN_BIT.to_ne_bytes());
    out.resize(HEADER + REQUEST, 0);
    out
}

/// What one read of the answer held.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Part {
    /// The listening sockets: inode and local address.
    pub listeners: Vec<(u64, SocketAddr)>,
    /// Whether the dump ended here.
    pub done: bool,
    /// The error the kernel refused it with (a negative errno).
    pub error: Option<i32>,
}

/// Reads the messages of one datagram of the answer.
pub fn part(mut buf: &[u8]) -> Part {
    let mut out = Part::default();
    while buf.len() >= HEADER {
        let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        let kind = u16::from_ne_bytes([buf[4], buf[5]]);
        if len < HEADER || len > buf.len() {
            break;
        }
        let body = &buf[HEADER..len];
        match kind {
            DONE => out.done = true,
            ERROR => {
                let code = body.get(..4).map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                out.error = Some(code);
                out.done = true;
            }
            BY_FAMILY => out.listeners.extend(message(body)),
            _ => {}
        }
        buf = &buf[len.next_multiple_of(4).min(buf.len())..];
    }
    out
}

/// One `inet_diag_msg`: its inode and local address.
fn message(body: &[u8]) -> Option<(u64, SocketAddr)> {
    if body.len() < MESSAGE {
        return None;
    }
    let port = u16::from_be_bytes([body[4], body[5]]);
    let src = &body[8..24];
    let address = match i32::from(body[0]) {
        libc::AF_INET => IpAddr::V4(Ipv4Addr::new(src[0], src[1], src[2], src[3])),
        libc::AF_INET6 => IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(src).ok()?)),
        _ => return None,
    };
    let inode = u32::from_ne_bytes([body[68], body[69], body[70], body[71]]);
    Some((u64::from(inode), SocketAddr::new(address, port)))
}

/// The listening TCP sockets (IPv4 and IPv6) of this process's network
/// namespace; an error when netlink is not to be had (a sandbox that
/// forbids it): then the caller reads `/proc/PID/net/tcp*`.
pub fn tcp_listeners() -> Result<Vec<(u64, SocketAddr)>, String> {
    // SAFETY: socket(2) takes no pointers; the descriptor it returns is
    // checked and owned at once by an `OwnedFd`, which closes it.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(format!("a sock_diag socket: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    let mut socket = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let mut out = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    for (seq, family) in [(1, libc::AF_INET as u8), (2, libc::AF_INET6 as u8)] {
        // Unconnected, a netlink socket writes to the kernel.
        socket.write_all(&request(family, seq)).map_err(|e| format!("asking sock_diag: {e}"))?;
        let mut parts = 0;
        loop {
            parts += 1;
            if parts > MAX_PARTS {
                break;
            }
            let n = match socket.read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    let mut fds = [PollFd::new(socket.as_fd(), PollFlags::POLLIN)];
                    match poll(&mut fds, ANSWER_MS) {
                        Ok(0) => return Err("sock_diag did not answer".into()),
                        Ok(_) => continue,
                        Err(e) => return Err(format!("waiting for sock_diag: {e}")),
                    }
                }
                Err(e) => return Err(format!("reading sock_diag: {e}")),
            };
            let got = part(&buf[..n]);
            if let Some(code) = got.error {
                return Err(format!("sock_diag refused the dump: {}", std::io::Error::from_raw_os_error(-code)));
            }
            out.extend(got.listeners);
            if got.done || n == 0 {
                break;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer as the kernel writes it: one `inet_diag_msg` per socket.
    fn answer(sockets: &[(u8, &[u8], u16, u32)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (family, address, port, inode) in sockets {
            let mut body = vec![0u8; MESSAGE];
            body[0] = *family;
            body[1] = 10;
            body[4..6].copy_from_slice(&port.to_be_bytes());
            body[8..8 + address.len()].copy_from_slice(address);
            body[68..72].copy_from_slice(&inode.to_ne_bytes());
            out.extend_from_slice(&((HEADER + MESSAGE) as u32).to_ne_bytes());
            out.extend_from_slice(&BY_FAMILY.to_ne_bytes());
            out.extend_from_slice(&[0; 10]);
            out.extend_from_slice(&body);
        }
        out
    }

    fn done() -> Vec<u8> {
        let mut out = (HEADER as u32 + 4).to_ne_bytes().to_vec();
        out.extend_from_slice(&DONE.to_ne_bytes());
        out.extend_from_slice(&[0; 14]);
        out
    }

    #[test]
    fn a_request_is_a_header_and_a_v2_request() {
        let r = request(libc::AF_INET6 as u8, 7);
        assert_eq!(r.len(), 72);
        assert_eq!(u32::from_ne_bytes([r[0], r[1], r[2], r[3]]), 72);
        assert_eq!(u16::from_ne_bytes([r[4], r[5]]), BY_FAMILY);
        assert_eq!((r[16], r[17]), (libc::AF_INET6 as u8, 6));
        assert_eq!(u32::from_ne_bytes([r[20], r[21], r[22], r[23]]), 1 << 10);
    }

    #[test]
    fn answers_give_inodes_and_addresses() {
        let mut buf = answer(&[(libc::AF_INET as u8, &[127, 0, 0, 1], 8123, 81233)]);
        let mut v6 = [0u8; 16];
        v6[15] = 1;
        buf.extend(answer(&[(libc::AF_INET6 as u8, &v6, 5173, 90001)]));
        buf.extend(done());
        let got = part(&buf);
        assert!(got.done && got.error.is_none());
        assert_eq!(
            got.listeners,
            vec![(81233, "127.0.0.1:8123".parse().expect("a")), (90001, "[::1]:5173".parse().expect("a"))]
        );
    }

    #[test]
    fn an_error_ends_the_dump_and_a_cut_message_is_left() {
        let mut err = (HEADER as u32 + 4).to_ne_bytes().to_vec();
        err.extend_from_slice(&ERROR.to_ne_bytes());
        err.extend_from_slice(&[0; 10]);
        err.extend_from_slice(&(-1i32).to_ne_bytes());
        assert_eq!(part(&err).error, Some(-1));
        let whole = answer(&[(libc::AF_INET as u8, &[0, 0, 0, 0], 80, 5)]);
        assert_eq!(part(&whole[..40]), Part::default());
    }

    #[test]
    fn this_process_listening_is_dumped() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        match tcp_listeners() {
            Ok(all) => assert!(all.iter().any(|(_, a)| a.port() == port), "{all:?}"),
            Err(e) => eprintln!("skipped: no sock_diag here ({e})"),
        }
    }
}
