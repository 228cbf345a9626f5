//! Getting into the web view: one-time login codes and the browser
//! sessions they open.
//!
//! `docent-terminal-mcp web` asks the server, over its Unix socket (so
//! only this user), for a code. The code is good for one use within
//! [`CODE_TTL`]; `GET /login?code=…` trades it for a browser session whose
//! id goes into an `HttpOnly`, `SameSite=Strict` cookie. Sessions live in
//! this process's memory only: a restart of the server ends them, and the
//! person asks for a new link. A session unused for [`SESSION_IDLE`] ends
//! too. Both tables are capped, the oldest entry giving way, so nobody can
//! make them grow.
//!
//! Codes and ids are 32 random bytes from `/dev/urandom`, in hex: far
//! beyond guessing, so a plain map lookup is safe to use for them.
//!
//! Each browser session also has its own CSRF token (32 more random
//! bytes), which the page carries and the view's one write (answering an
//! ask, see [`super::asks`]) must send back: a page of another site can
//! make the browser send the cookie, but cannot read the token.

use std::collections::HashMap;
use std::io::Read;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a login code stays good.
pub const CODE_TTL: Duration = Duration::from_secs(60);
/// How long a browser session lasts without being used.
pub const SESSION_IDLE: Duration = Duration::from_secs(12 * 60 * 60);
/// The most codes waiting to be used.
const MAX_CODES: usize = 32;
/// The most browser sessions at once.
const MAX_SESSIONS: usize = 128;

/// Why a code opened nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LoginError {
    /// Never issued, or already used.
    #[error("this login link was already used or never issued; run `docent-terminal-mcp web` for a new one")]
    Unknown,
    /// Issued, but too long ago.
    #[error("this login link expired (links last 60 seconds); run `docent-terminal-mcp web` for a new one")]
    Expired,
}

/// The codes and sessions of one server.
#[derive(Default)]
pub struct Logins {
    inner: Mutex<Tables>,
}

#[derive(Default)]
struct Tables {
    /// Codes not yet used, and when each was issued.
    codes: HashMap<String, Instant>,
    /// Browser sessions by id.
    sessions: HashMap<String, Browser>,
}

/// One browser session.
struct Browser {
    /// When it was last used.
    used: Instant,
    /// Its CSRF token.
    csrf: String,
}

impl Logins {
    fn tables(&self) -> std::sync::MutexGuard<'_, Tables> {
        // Every change is a whole insert or remove: a poisoned lock still
        // holds consistent maps.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new one-time code.
    pub fn issue(&self, now: Instant) -> std::io::Result<String> {
        let code = random_hex()?;
        let mut t = self.tables();
        t.codes.retain(|_, at| now.duration_since(*at) < CODE_TTL);
        make_room(&mut t.codes, MAX_CODES, |at| *at);
        t.codes.insert(code.clone(), now);
        Ok(code)
    }

    /// Uses `code` up and opens a browser session; returns its id.
    pub fn redeem(&self, code: &str, now: Instant) -> Result<String, LoginError> {
        let issued = self.tables().codes.remove(code).ok_or(LoginError::Unknown)?;
        if now.duration_since(issued) >= CODE_TTL {
            return Err(LoginError::Expired);
        }
        let id = random_hex().map_err(|_| LoginError::Unknown)?;
        let csrf = random_hex().map_err(|_| LoginError::Unknown)?;
        let mut t = self.tables();
        t.sessions.retain(|_, b| now.duration_since(b.used) < SESSION_IDLE);
        make_room(&mut t.sessions, MAX_SESSIONS, |b| b.used);
        t.sessions.insert(id.clone(), Browser { used: now, csrf });
        Ok(id)
    }

    /// Whether `id` is a live browser session; using it keeps it alive.
    pub fn admits(&self, id: &str, now: Instant) -> bool {
        self.csrf(id, now).is_some()
    }

    /// The CSRF token of browser session `id`, while it lives; using it
    /// keeps it alive.
    pub fn csrf(&self, id: &str, now: Instant) -> Option<String> {
        let mut t = self.tables();
        match t.sessions.get_mut(id) {
            Some(b) if now.duration_since(b.used) < SESSION_IDLE => {
                b.used = now;
                Some(b.csrf.clone())
            }
            Some(_) => {
                t.sessions.remove(id);
                None
            }
            None => None,
        }
    }
}

/// Removes the oldest entries (by `at`) until `map` has room for one more.
fn make_room<V>(map: &mut HashMap<String, V>, max: usize, at: impl Fn(&V) -> Instant) {
    while map.len() >= max {
        let Some(oldest) = map.iter().min_by_key(|(_, v)| at(v)).map(|(k, _)| k.clone()) else { return };
        map.remove(&oldest);
    }
}

/// 32 random bytes in hex.
fn random_hex() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The value of cookie `name` in a `Cookie` header. (Written here rather
/// than taken from a cookie crate: the view sets exactly one cookie, and
/// reading `a=b; c=d` needs no more than this.)
pub fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').filter_map(|pair| pair.trim().split_once('=')).find(|(k, _)| *k == name).map(|(_, v)| v.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_opens_one_session_once() {
        let logins = Logins::default();
        let t0 = Instant::now();
        let code = logins.issue(t0).expect("code");
        assert_eq!(code.len(), 64);
        let id = logins.redeem(&code, t0 + Duration::from_secs(5)).expect("first use");
        assert!(logins.admits(&id, t0 + Duration::from_secs(6)));
        assert_eq!(logins.redeem(&code, t0 + Duration::from_secs(7)), Err(LoginError::Unknown));
        assert!(!logins.admits("not-a-session", t0));
        assert!(!logins.admits(&code, t0), "a code is not a session");
        let csrf = logins.csrf(&id, t0).expect("a token");
        assert_eq!(csrf.len(), 64);
        assert_ne!(csrf, id, "the token is not the cookie");
        let other = logins.redeem(&logins.issue(t0).expect("code"), t0).expect("another session");
        assert_ne!(logins.csrf(&other, t0), Some(csrf), "each session has its own token");
        assert_eq!(logins.csrf("not-a-session", t0), None);
    }

    #[test]
    fn codes_expire_after_a_minute_and_sessions_when_unused() {
        let logins = Logins::default();
        let t0 = Instant::now();
        let code = logins.issue(t0).expect("code");
        assert_eq!(logins.redeem(&code, t0 + CODE_TTL), Err(LoginError::Expired));
        let code = logins.issue(t0).expect("code");
        let id = logins.redeem(&code, t0).expect("session");
        let later = t0 + SESSION_IDLE / 2;
        assert!(logins.admits(&id, later), "use keeps it alive");
        assert!(logins.admits(&id, later + SESSION_IDLE / 2 + Duration::from_secs(1)));
        assert!(!logins.admits(&id, later + SESSION_IDLE * 2));
    }

    #[test]
    fn the_tables_stay_bounded() {
        let logins = Logins::default();
        let t0 = Instant::now();
        let first = logins.issue(t0).expect("code");
        for i in 1..=MAX_CODES as u64 {
            logins.issue(t0 + Duration::from_millis(i)).expect("code");
        }
        assert_eq!(logins.tables().codes.len(), MAX_CODES);
        assert_eq!(logins.redeem(&first, t0 + Duration::from_secs(1)), Err(LoginError::Unknown), "the oldest gave way");
    }

    #[test]
    fn cookies_are_found_by_exact_name() {
        let h = "a=1; dtmcp_web_8766=abc ; dtmcp_web_87=x";
        assert_eq!(cookie(h, "dtmcp_web_8766"), Some("abc"));
        assert_eq!(cookie(h, "dtmcp_web_87"), Some("x"));
        assert_eq!(cookie(h, "dtmcp_web"), None);
        assert_eq!(cookie("", "a"), None);
    }
}
