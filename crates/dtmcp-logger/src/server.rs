//! The logger's socket: one thread per connection, answering requests from
//! the shared state and the files (see [`dtmcp_core::protocol`] for the wire).

use std::io::{BufReader, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use interprocess::local_socket::{GenericFilePath, Listener, ListenerOptions, Stream, prelude::*};
use interprocess::os::unix::local_socket::ListenerOptionsExt;

use super::LoggerError;
use super::state::Shared;
use dtmcp_core::protocol::{self, MAX_READ_LINES, PROTOCOL_VERSION, Request, Response};
use dtmcp_core::store::LineReader;

/// The most connections served at once; more are closed at once, so a
/// runaway client cannot exhaust the logger's threads.
const MAX_CONNECTIONS: usize = 64;

/// Binds `path` with mode 0600, replacing a socket left by a dead logger.
pub fn bind(path: &Path) -> Result<Listener, LoggerError> {
    let err = |source| LoggerError::Socket { path: path.to_path_buf(), source };
    // A stale socket file from a killed logger would make bind fail; this
    // logger owns the pane now, so the old name is ours to take.
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(err(e)),
        _ => {}
    }
    let name = path.to_fs_name::<GenericFilePath>().map_err(err)?;
    ListenerOptions::new().name(name).mode(0o600).create_sync().map_err(err)
}

/// Accepts connections until the process ends.
pub fn serve(listener: Listener, shared: Arc<Shared>) {
    let active = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        if active.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::AcqRel);
            continue;
        }
        let (shared, counter) = (Arc::clone(&shared), Arc::clone(&active));
        let spawned = std::thread::Builder::new().name("logger-conn".into()).spawn(move || {
            connection(conn, &shared);
            counter.fetch_sub(1, Ordering::AcqRel);
        });
        if spawned.is_err() {
            // The thread never ran, so neither did its decrement.
            active.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

fn connection(conn: Stream, shared: &Shared) {
    let mut reader = BufReader::new(&conn);
    let mut writer = BufWriter::new(&conn);
    loop {
        let request: Request = match protocol::read_frame(&mut reader) {
            Ok(Some(r)) => r,
            Ok(None) | Err(_) => return,
        };
        let response = answer(request, shared);
        if protocol::write_frame(&mut writer, &response).is_err() || writer.flush().is_err() {
            return;
        }
    }
}

fn answer(request: Request, shared: &Shared) -> Response {
    match request {
        Request::Hello { .. } => Response::Hello { version: PROTOCOL_VERSION, pid: std::process::id() },
        Request::Status => Response::Status(shared.lock().status()),
        Request::Read { from, count } => read(shared, from, count),
        Request::Regions { last } => {
            let live = shared.lock();
            let skip = live.regions.len().saturating_sub(last as usize);
            Response::Regions(live.regions[skip..].to_vec())
        }
        Request::Region { id } => Response::Regions(shared.lock().region(id).cloned().into_iter().collect()),
        Request::Wait(spec) => match shared.wait(&spec) {
            Ok((reason, status)) => Response::Waited { reason, status },
            Err(message) => Response::Error { message },
        },
        Request::OpenInput(spec) => match shared.inbox.open_input(spec) {
            Ok(region) => Response::Regions(vec![region]),
            Err(message) => Response::Error { message },
        },
        Request::Agent { actor } => Response::Agent(shared.agents.get(&actor)),
        Request::SetAgent { actor, state } => match shared.agents.set(&actor, state) {
            Ok(()) => Response::Stored,
            Err(e) => Response::Error { message: e.to_string() },
        },
    }
}

fn read(shared: &Shared, from: dtmcp_core::types::LineNo, count: u64) -> Response {
    let result = LineReader::open(&shared.dir).and_then(|r| r.read(from, count.min(MAX_READ_LINES)));
    match result {
        Ok(lines) => Response::Lines { first: from, lines },
        Err(e) => Response::Error { message: e.to_string() },
    }
}
