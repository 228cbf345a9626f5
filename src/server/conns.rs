//! Serving a listener's connections: HTTP/1 by hyper, with what
//! `axum::serve` does not give, so that connections that never finish a
//! request cannot starve everyone else of file descriptors.
//!
//! - A header-read timeout (TCP): a connection has that long to send a
//!   request's headers, whether it is new or kept alive between requests.
//!   A half-sent request line no longer holds its descriptor for good.
//! - A cap on connections not yet shown to be wanted: on TCP, those that
//!   have not sent a request carrying the bearer token; on the Unix socket
//!   (whose peers are our own user), those that have not sent a whole
//!   request. Past the cap the oldest such connection is closed, so a
//!   flood of idle connections costs at most the cap in descriptors, and a
//!   client that sends its request at once (as every real client does) is
//!   served before its turn to be closed comes.
//! - At start the soft limit on open files is raised to the hard one
//!   ([`raise_open_files`]); the cap is a quarter of it, within bounds.
//!
//! How a connection shows it is wanted: each request carries a [`Proof`]
//! in its extensions, and the guard ([`super::guard::enforce`]) proves it
//! once a request passed its checks with the token (TCP) or at all (Unix).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::serve::Listener;
use hyper::body::Incoming;
use hyper::service::Service as _;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio_util::sync::CancellationToken;

/// How long a TCP connection may take to send a request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The fewest and the most unproven connections allowed at once.
const UNPROVEN_BOUNDS: (usize, usize) = (16, 1024);

/// How one listener treats its connections.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// How long a connection may take to send a request's headers; `None`:
    /// as long as it likes (the Unix socket's kept bridge connections).
    pub header_timeout: Option<Duration>,
    /// How many connections may be open at once without having proved
    /// themselves; past it the oldest is closed.
    pub max_unproven: usize,
}

impl Limits {
    /// The limits for a process allowed `open_files` descriptors.
    pub fn for_open_files(open_files: u64, header_timeout: Option<Duration>) -> Limits {
        let quarter = usize::try_from(open_files / 4).unwrap_or(usize::MAX);
        Limits { header_timeout, max_unproven: quarter.clamp(UNPROVEN_BOUNDS.0, UNPROVEN_BOUNDS.1) }
    }
}

/// Raises the soft limit on open files to the hard one (systemd starts a
/// service at 1,024 whatever its hard limit) and returns the soft limit
/// in force. A failure leaves the limit as it was.
pub fn raise_open_files() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else { return 1024 };
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        return hard;
    }
    soft
}

/// The connections of one listener that have not proved themselves yet,
/// oldest first, each with the token that closes it.
#[derive(Default)]
struct Unproven {
    next: u64,
    open: BTreeMap<u64, CancellationToken>,
}

/// A connection's place among the unproven ones: proving it (or its end)
/// takes it out.
#[derive(Clone)]
pub struct Proof {
    id: u64,
    unproven: Arc<Mutex<Unproven>>,
}

impl Proof {
    /// The connection showed it is wanted (or ended): it no longer counts,
    /// nor can it be closed for the cap.
    pub fn prove(&self) {
        self.unproven.lock().unwrap_or_else(|e| e.into_inner()).open.remove(&self.id);
    }
}

/// Serves `app` on the connections of `listener` within `limits`, until
/// `stop` is cancelled; then lets open connections finish their requests
/// and returns once they have closed.
pub async fn serve<L: Listener>(mut listener: L, app: Router, limits: Limits, stop: CancellationToken) {
    let unproven: Arc<Mutex<Unproven>> = Arc::default();
    let (done_tx, done_rx) = tokio::sync::watch::channel(());
    loop {
        let io = tokio::select! {
            (io, _) = listener.accept() => io,
            () = stop.cancelled() => break,
        };
        let (proof, evict) = admit(&unproven, limits.max_unproven);
        // The connection's end takes it out of the unproven ones too.
        let ended = proof.clone();
        let app = TowerToHyperService::new(app.clone());
        let service = hyper::service::service_fn(move |mut request: axum::http::Request<Incoming>| {
            request.extensions_mut().insert(proof.clone());
            app.call(request)
        });
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
        let (stop, done_rx) = (stop.clone(), done_rx.clone());
        tokio::spawn(async move {
            let conn = http.serve_connection(TokioIo::new(io), service);
            tokio::pin!(conn);
            let mut stopping = false;
            loop {
                tokio::select! {
                    _ = conn.as_mut() => break,
                    () = evict.cancelled() => break,
                    () = stop.cancelled(), if !stopping => {
                        stopping = true;
                        conn.as_mut().graceful_shutdown();
                    }
                }
            }
            ended.prove();
            drop(done_rx);
        });
    }
    drop(done_rx);
    drop(listener);
    done_tx.closed().await;
}

/// Counts a new connection as unproven, closing the oldest unproven one
/// when that makes more than `max`; its proof, and the token that closes
/// it.
fn admit(unproven: &Arc<Mutex<Unproven>>, max: usize) -> (Proof, CancellationToken) {
    let mut u = unproven.lock().unwrap_or_else(|e| e.into_inner());
    let id = u.next;
    u.next += 1;
    let evict = CancellationToken::new();
    u.open.insert(id, evict.clone());
    while u.open.len() > max {
        if let Some((_, oldest)) = u.open.pop_first() {
            oldest.cancel();
        }
    }
    (Proof { id, unproven: unproven.clone() }, evict)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_cap_the_oldest_unproven_connection_is_closed_and_a_proven_one_never() {
        let unproven: Arc<Mutex<Unproven>> = Arc::default();
        let (first, first_evict) = admit(&unproven, 2);
        first.prove();
        let (_, second) = admit(&unproven, 2);
        let (_, third) = admit(&unproven, 2);
        assert!(!second.is_cancelled() && !third.is_cancelled());
        let (_, fourth) = admit(&unproven, 2);
        assert!(second.is_cancelled(), "the oldest unproven one goes");
        assert!(!third.is_cancelled() && !fourth.is_cancelled() && !first_evict.is_cancelled());
    }

    #[test]
    fn the_cap_follows_the_open_files_allowed() {
        assert_eq!(Limits::for_open_files(1024, None).max_unproven, 256);
        assert_eq!(Limits::for_open_files(20, None).max_unproven, 16);
        assert_eq!(Limits::for_open_files(1 << 20, None).max_unproven, 1024);
    }
}
