//! How requests reach the pump: the pump owns the region tracker, so an
//! input region (see [`dtmcp_core::region::InputSpec`]) is opened by a message
//! the pump handles between chunks of output, in order with them. A byte
//! on a wake-up pipe tells the pump, which polls that pipe beside its
//! standard input, a message is waiting; the same poll's timeout wakes it
//! when an input region's time is up.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::sync::Mutex;
use std::sync::mpsc::{self, Receiver, Sender};

use dtmcp_core::region::{InputSpec, Region};

/// A request the pump serves itself.
pub enum ToPump {
    /// Open an input region; the answer goes back on the sender.
    OpenInput(InputSpec, Sender<Result<Region, String>>),
}

/// The socket's way to the pump, once it runs.
#[derive(Default)]
pub struct Inbox {
    way: Mutex<Option<(Sender<ToPump>, std::fs::File)>>,
}

/// The pump's end of the inbox.
pub struct Mailbox {
    /// The requests.
    pub rx: Receiver<ToPump>,
    /// Readable when a request was sent (non-blocking).
    pub wake: OwnedFd,
}

impl Inbox {
    /// Connects the inbox to a running pump, returning the pump's end.
    pub fn connect(&self) -> std::io::Result<Mailbox> {
        let flags = nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK;
        let (wake, ring) = nix::unistd::pipe2(flags).map_err(std::io::Error::from)?;
        let (tx, rx) = mpsc::channel();
        *self.way.lock().unwrap_or_else(|e| e.into_inner()) = Some((tx, std::fs::File::from(ring)));
        Ok(Mailbox { rx, wake })
    }

    /// Asks the pump to open an input region; the answer comes on the
    /// receiver, within the same turn of the logger's loop (see
    /// `main_loop`).
    pub fn open_input(&self, spec: InputSpec) -> Result<Receiver<Result<Region, String>>, String> {
        let (reply, answer) = mpsc::channel();
        let sent = match self.way.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            // A full pipe already holds a wake-up; that is enough.
            Some((tx, ring)) => tx.send(ToPump::OpenInput(spec, reply)).is_ok() && ring.write(&[1]).is_ok(),
            None => false,
        };
        if !sent {
            return Err("the logger's pump is not running (the pane's output has ended)".into());
        }
        Ok(answer)
    }
}
