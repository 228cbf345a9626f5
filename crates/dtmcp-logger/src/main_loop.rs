//! The logger's loop: one thread sleeps in one `poll` on the pane's output,
//! the pump's mailbox, the socket's listener and its connections, and
//! serves whichever is ready.
//!
//! The pump and the socket used to run on threads of their own, the pump
//! waking the socket's thread through a pipe after every chunk while a
//! wait was held. That cost every `run` a wake-up of a second thread (a
//! write, a poll, a read and a context switch) on the way from the
//! command's last output to its answer, and on a busy machine the woken
//! thread had to find a free core too. In one thread the waits are looked
//! at right after the chunk that may end them is published, and answered
//! in the same turn.
//!
//! A turn does the pump's part first (mail, then output or its timers), so
//! that the requests read in the same turn see the output read with them;
//! an input region asked for by a request is opened before the turn ends.
//! A burst of output (see [`super::pump`]) is let gather by leaving the
//! output out of the poll for [`BURST_NAP`], while the socket is served.

use std::io::Read;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, poll};

use super::LoggerError;
use super::pump::{BURST_NAP, Pump, READ_BYTES, Step};
use super::server::{self, Server};
use super::state::Shared;
use dtmcp_core::now_ms;
use dtmcp_core::store::StoreError;

/// Runs the pump and the socket on `input` until the output ends (the pump
/// has then taken its closing checkpoint) or `raw.log` is found deleted.
pub fn run(
    pump: &mut Pump,
    server: &mut Server,
    mut input: impl Read + AsFd,
    shared: &Shared,
) -> Result<(), LoggerError> {
    let io_err = |source| StoreError::Io { path: "stdin".into(), source };
    let mailbox = shared.inbox.connect().map_err(io_err)?;
    let mut buf = vec![0u8; READ_BYTES];
    let mut nap_until: Option<Instant> = None;
    loop {
        let now = Instant::now();
        nap_until = nap_until.filter(|&t| t > now);
        let pump_due = pump.due_ms().map(|ms| now + Duration::from_millis(ms.saturating_sub(now_ms())));
        let due = [pump_due, server.due(), nap_until].into_iter().flatten().min();
        let ready = {
            let listen = if nap_until.is_some() { PollFlags::empty() } else { PollFlags::POLLIN };
            let mut fds =
                vec![PollFd::new(input.as_fd(), listen), PollFd::new(mailbox.wake.as_fd(), PollFlags::POLLIN)];
            server.fds(&mut fds);
            match poll(&mut fds, server::timeout_until(due)) {
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(io_err(e.into()).into()),
                Ok(_) => {}
            }
            server::ready(&fds)
        };
        let (output, mail) = (!ready[0].is_empty(), !ready[1].is_empty());
        if mail {
            pump.take_mail(&mailbox, shared);
        }
        // While napping, the output is looked at only when it hung up.
        if output {
            match pump.take_output(&mut input, &mut buf, shared)? {
                Step::More => {}
                Step::Nap => nap_until = Some(Instant::now() + BURST_NAP),
                Step::Ended => break,
                Step::Deleted => return Ok(()),
            }
        } else if pump_due.is_some_and(|due| due <= Instant::now()) && pump.on_time(shared)? == Step::Deleted {
            return Ok(());
        }
        server.serve_ready(&ready[2..]);
        if server.asked_pump() {
            pump.take_mail(&mailbox, shared);
        }
        server.finish_turn();
    }
    pump.ended();
    Ok(())
}
