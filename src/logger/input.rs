//! How requests reach the pump: the pump owns the region tracker, so an
//! input region (see [`crate::region::InputSpec`]) is opened by a message
//! the pump handles between chunks of output, in order with them. The same
//! channel carries the output itself, read by a thread of its own, so that
//! the pump can also wake when an input region's time is up.

use std::sync::Mutex;
use std::sync::mpsc::{self, Sender};
use std::time::Duration;

use crate::region::{InputSpec, Region};

/// How long a socket thread waits for the pump to open an input region.
const OPEN_TIMEOUT: Duration = Duration::from_secs(2);

/// What the pump is handed, in order.
pub enum ToPump {
    /// A chunk of the pane's output.
    Bytes(Vec<u8>),
    /// The output ended, cleanly or not.
    End(Option<std::io::Error>),
    /// Open an input region; the answer goes back on the sender.
    OpenInput(InputSpec, Sender<Result<Region, String>>),
}

/// The socket threads' way to the pump, once it runs.
#[derive(Default)]
pub struct Inbox {
    tx: Mutex<Option<Sender<ToPump>>>,
}

impl Inbox {
    /// Connects the inbox to a running pump.
    pub fn connect(&self, tx: Sender<ToPump>) {
        *self.tx.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
    }

    /// Asks the pump to open an input region, and waits for it.
    pub fn open_input(&self, spec: InputSpec) -> Result<Region, String> {
        let (reply, answer) = mpsc::channel();
        let tx = self.tx.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let sent = tx.is_some_and(|tx| tx.send(ToPump::OpenInput(spec, reply)).is_ok());
        if !sent {
            return Err("the logger's pump is not running (the pane's output has ended)".into());
        }
        answer.recv_timeout(OPEN_TIMEOUT).map_err(|_| "the logger's pump did not answer in time".to_string())?
    }
}
