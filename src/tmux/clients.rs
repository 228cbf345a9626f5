//! The tmux clients attached to a session: the people watching it. Read
//! from `list-clients -F` output by a pure parser, tested on captured text.

/// One tmux client attached to a session: a person's terminal.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Client {
    /// Its terminal, like `/dev/pts/4`.
    pub tty: String,
    /// Its size, columns and rows.
    pub cols: u32,
    /// Rows.
    pub rows: u32,
    /// When it attached, epoch seconds.
    pub attached: u64,
    /// When it last pressed a key, epoch seconds (`None`: not since it
    /// attached). tmux stamps a client's activity when it attaches and at
    /// each key.
    pub last_input: Option<u64>,
}

/// The `list-clients -F` format [`parse_clients`] reads.
pub const CLIENT_FORMAT: &str = "#{client_control_mode}\x1f#{client_tty}\x1f#{client_width}\x1f#{client_height}\x1f#{client_created}\x1f#{client_activity}";

/// Reads `list-clients` output in [`CLIENT_FORMAT`], leaving out control
/// clients (routers, never people).
pub fn parse_clients(text: &str) -> Vec<Client> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split('\x1f').collect();
            let [control, tty, cols, rows, created, activity] = f[..] else { return None };
            let n = |s: &str| s.parse::<u64>().unwrap_or(0);
            (control != "1").then(|| Client {
                tty: tty.to_string(),
                cols: n(cols) as u32,
                rows: n(rows) as u32,
                attached: n(created),
                last_input: (n(activity) > n(created)).then(|| n(activity)),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_people_and_keys_are_activity_after_attaching() {
        let text = "0\x1f/dev/pts/4\x1f80\x1f24\x1f100\x1f100\n0\x1f/dev/pts/5\x1f120\x1f40\x1f100\x1f130\n1\x1f\x1f80\x1f24\x1f1\x1f2\n";
        let clients = parse_clients(text);
        assert_eq!(clients.len(), 2, "the control client is no person");
        assert_eq!((clients[0].last_input, clients[1].last_input), (None, Some(130)));
        assert_eq!((clients[1].cols, clients[1].rows), (120, 40));
    }
}
