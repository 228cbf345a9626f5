//! The one way a test waits for something to happen: a bounded poll that
//! looks again every 20 ms and, when its time is up, panics naming what it
//! waited for and, where the check says, what it saw instead.

use std::fmt::Display;
use std::time::{Duration, Instant};

/// How long a poll sleeps between two looks.
const EVERY: Duration = Duration::from_millis(20);

/// What one look returns: `bool` (there or not yet), `Option<T>` (there,
/// with a value), or `Result<T, E>` (there with a value, or not yet with
/// what was seen instead, which the panic message quotes).
pub trait Look {
    /// What the poll returns once the look finds it.
    type Found;

    /// The value found, or what was seen instead (if the look says).
    fn found(self) -> Result<Self::Found, Option<String>>;
}

impl Look for bool {
    type Found = ();

    fn found(self) -> Result<(), Option<String>> {
        if self { Ok(()) } else { Err(None) }
    }
}

impl<T> Look for Option<T> {
    type Found = T;

    fn found(self) -> Result<T, Option<String>> {
        self.ok_or(None)
    }
}

impl<T, E: Display> Look for Result<T, E> {
    type Found = T;

    fn found(self) -> Result<T, Option<String>> {
        self.map_err(|seen| Some(seen.to_string()))
    }
}

/// Looks with `look` until it finds `what`, for at most `limit`, sleeping
/// the thread between looks. For plain tests, and for async ones whose
/// look asks only files, `/proc` or tmux.
pub fn until<L: Look>(what: &str, limit: Duration, mut look: impl FnMut() -> L) -> L::Found {
    let started = Instant::now();
    loop {
        let seen = match look().found() {
            Ok(found) => return found,
            Err(seen) => seen,
        };
        if started.elapsed() >= limit {
            time_is_up(what, limit, seen);
        }
        std::thread::sleep(EVERY);
    }
}

/// As [`until`], in an async test: the look may await (a tool call, a
/// page), and the wait between looks leaves the runtime's thread free.
pub async fn until_async<L: Look>(what: &str, limit: Duration, mut look: impl AsyncFnMut() -> L) -> L::Found {
    let started = Instant::now();
    loop {
        let seen = match look().await.found() {
            Ok(found) => return found,
            Err(seen) => seen,
        };
        if started.elapsed() >= limit {
            time_is_up(what, limit, seen);
        }
        tokio::time::sleep(EVERY).await;
    }
}

/// The panic of a poll whose time is up.
fn time_is_up(what: &str, limit: Duration, seen: Option<String>) -> ! {
    match seen {
        Some(seen) => panic!("waited {limit:?} for {what}, in vain; the last look saw:\n{seen}"),
        None => panic!("waited {limit:?} for {what}, in vain"),
    }
}
