//! Who may use a listener: the Host and Origin every request carries, and on
//! TCP the bearer token.
//!
//! - `Host` (TCP only): one of the allowed names (loopback names, plus the
//!   `--allowed-hosts` list a non-loopback bind must give), so a web page
//!   cannot reach the port by DNS rebinding. A Unix socket has no names.
//! - `Origin`: when present, its host must be an allowed name (on the Unix
//!   socket: a loopback name) and, on TCP, its port the one the request
//!   was sent to (`Host`'s): a page of another local server,
//!   `http://localhost:3000`, is another origin. Anything else (including
//!   `null`) gets 403, as the MCP specification asks of servers.
//! - Token (TCP only, every route but `/health`): `Authorization: Bearer T`,
//!   compared in constant time; missing or wrong gives 401 with
//!   `WWW-Authenticate`. A token in the URL is refused outright (400): URLs
//!   end up in logs and histories.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::token::Token;

/// Names that always mean this machine.
pub const LOOPBACK_NAMES: [&str; 4] = ["localhost", "127.0.0.1", "::1", "[::1]"];

/// The rules of one listener.
#[derive(Clone, Debug)]
pub struct Guard {
    /// The token every route but `/health` needs; `None` on the Unix socket.
    pub token: Option<Token>,
    /// The host names `Host` may carry; `None`: any (the Unix socket).
    pub hosts: Option<Vec<String>>,
}

impl Guard {
    /// The rules of the Unix socket: its modes and peer check do the work.
    pub fn unix() -> Guard {
        Guard { token: None, hosts: None }
    }

    /// The rules of a TCP port: loopback names plus `extra`, and the token.
    pub fn tcp(token: Token, extra: &[String]) -> Guard {
        let mut hosts: Vec<String> = LOOPBACK_NAMES.iter().map(|s| s.to_string()).collect();
        hosts.extend(extra.iter().map(|h| h.to_ascii_lowercase()));
        Guard { token: Some(token), hosts: Some(hosts) }
    }

    fn host_allowed(&self, name: &str) -> bool {
        match &self.hosts {
            None => true,
            Some(hosts) => hosts.iter().any(|h| h == name),
        }
    }

    /// Whether `origin` may send requests to `host` (the request's `Host`).
    fn origin_allowed(&self, origin: &str, host: Option<&str>) -> bool {
        let Some(Origin { name, port, scheme_port }) = origin_host(origin) else { return false };
        match &self.hosts {
            None => LOOPBACK_NAMES.contains(&name.as_str()),
            Some(hosts) => hosts.contains(&name) && port == host.and_then(host_port).or(scheme_port),
        }
    }

    /// Whether `headers` carry this listener's bearer token (or an agent
    /// token made from it).
    fn token_shown(&self, headers: &HeaderMap) -> bool {
        let offered = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer);
        self.token.as_ref().is_some_and(|t| offered.is_some_and(|o| t.matches(o) || t.agent_of(o).is_some()))
    }

    /// The agent the request's bearer token names, when it is an agent
    /// token of this port's token (see [`Token::for_agent`]).
    pub fn agent_of(&self, headers: &HeaderMap) -> Option<String> {
        let offered = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer)?;
        self.token.as_ref()?.agent_of(offered)
    }

    /// Checks one request; `Err` is the response to send instead.
    pub fn check(&self, path: &str, query: Option<&str>, headers: &HeaderMap) -> Result<(), Refusal> {
        self.check_for(path, query, headers, Opens::Token)
    }

    /// Checks one request that `opens` decides: with [`Opens::ViewCookie`]
    /// everything but the token is checked here, and the web view checks
    /// its login cookie itself.
    pub fn check_for(&self, path: &str, query: Option<&str>, headers: &HeaderMap, opens: Opens) -> Result<(), Refusal> {
        if self.hosts.is_some() {
            let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).map(host_name);
            match host {
                Some(h) if self.host_allowed(&h) => {}
                Some(h) => {
                    return Err(refuse(
                        StatusCode::FORBIDDEN,
                        &format!(
                            "Host {h:?} is not one this server answers to; start it with --allowed-hosts naming it"
                        ),
                    ));
                }
                None => return Err(refuse(StatusCode::BAD_REQUEST, "a Host header is required")),
            }
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("?");
            let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
            if !self.origin_allowed(origin, host) {
                return Err(refuse(
                    StatusCode::FORBIDDEN,
                    &format!("requests from the origin {origin:?} are not allowed"),
                ));
            }
        }
        let Some(token) = &self.token else { return Ok(()) };
        if query.is_some_and(query_has_token) {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "a token is never accepted in a URL; send it as Authorization: Bearer TOKEN",
            ));
        }
        if path == "/health" || opens == Opens::ViewCookie {
            return Ok(());
        }
        let offered = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer);
        match offered {
            Some(t) if token.matches(t) || token.agent_of(t).is_some() => Ok(()),
            Some(_) => Err(unauthorized("the bearer token is wrong")),
            None => Err(unauthorized(
                "this port needs Authorization: Bearer TOKEN; `docent-terminal-mcp token` prints the token",
            )),
        }
    }
}

/// What lets a request in, besides the Host and Origin checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opens {
    /// The bearer token (on TCP).
    Token,
    /// The web view's login cookie, which the view checks: only its own
    /// `GET` routes (see [`crate::web::opens_with_cookie`]).
    ViewCookie,
}

/// The middleware form of [`Guard::check`].
pub async fn enforce(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    let uri = request.uri();
    let opens = match crate::web::opens_with_cookie(request.method(), uri.path()) {
        true => Opens::ViewCookie,
        false => Opens::Token,
    };
    if let Err(refusal) = guard.check_for(uri.path(), uri.query(), request.headers(), opens) {
        return refusal.into_response();
    }
    // The connection is wanted: it sent a whole request, with the token
    // where one is needed (see `conns`).
    if let Some(proof) = request.extensions().get::<super::conns::Proof>()
        && (guard.token.is_none() || guard.token_shown(request.headers()))
    {
        proof.prove();
    }
    let mut request = request;
    if let Some(agent) = guard.agent_of(request.headers()) {
        request.extensions_mut().insert(crate::agents::caller::TokenAgent(agent));
    }
    next.run(request).await
}

/// A request turned away: its status and why, for the person reading it.
#[derive(Debug)]
pub struct Refusal {
    /// The HTTP status.
    pub status: StatusCode,
    /// Why, in a sentence.
    pub why: String,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let mut r = (self.status, format!("{}\n", self.why)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            let challenge = header::HeaderValue::from_static("Bearer realm=\"docent-terminal-mcp\"");
            r.headers_mut().insert(header::WWW_AUTHENTICATE, challenge);
        }
        r
    }
}

fn refuse(status: StatusCode, why: &str) -> Refusal {
    Refusal { status, why: why.to_string() }
}

fn unauthorized(why: &str) -> Refusal {
    refuse(StatusCode::UNAUTHORIZED, why)
}

fn bearer(value: &str) -> Option<&str> {
    let (scheme, rest) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
}

fn query_has_token(query: &str) -> bool {
    query.split('&').any(|pair| {
        let name = pair.split('=').next().unwrap_or("").to_ascii_lowercase();
        name.contains("token") || name == "auth" || name == "authorization" || name == "key"
    })
}

/// The host name of a `Host` value, lowercased, without its port.
pub fn host_name(value: &str) -> String {
    let value = value.trim().to_ascii_lowercase();
    if value.starts_with('[') {
        // [::1]:8766 → ::1
        return value.split(']').next().unwrap_or("").trim_start_matches('[').to_string();
    }
    match value.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) && !name.contains(':') => name.to_string(),
        _ => value,
    }
}

/// What an `Origin` names.
#[derive(Debug, PartialEq, Eq)]
struct Origin {
    /// Its host name, lowercased.
    name: String,
    /// Its port: the one written, else its scheme's.
    port: Option<u16>,
    /// Its scheme's port (80 for http, 443 for https).
    scheme_port: Option<u16>,
}

/// What an `Origin` (`scheme://host[:port]`) names; `None` for `null`, for
/// anything without a scheme, and for a port that is no port.
fn origin_host(origin: &str) -> Option<Origin> {
    let (scheme, rest) = origin.split_once("://")?;
    let authority = rest.split('/').next()?.trim().to_ascii_lowercase();
    let scheme_port = match scheme.to_ascii_lowercase().as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    };
    let written = match authority.strip_prefix('[') {
        Some(v6) => v6.split_once(']').and_then(|(_, after)| after.strip_prefix(':')),
        None => authority.rsplit_once(':').map(|(_, port)| port),
    };
    let port = match written {
        Some(p) => Some(p.parse().ok()?),
        None => scheme_port,
    };
    Some(Origin { name: host_name(&authority), port, scheme_port })
}

/// The port a `Host` value names, if it names one.
fn host_port(value: &str) -> Option<u16> {
    let value = value.trim();
    let port = match value.strip_prefix('[') {
        Some(v6) => v6.split_once(']')?.1.strip_prefix(':')?,
        None => value.rsplit_once(':')?.1,
    };
    port.parse().ok()
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;
    use rstest::rstest;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    fn tcp() -> Guard {
        let tmp = tempfile::tempdir().expect("tempdir");
        Guard::tcp(Token::load_or_create(&tmp.path().join("t")).expect("token"), &["box.lan".into()])
    }

    #[rstest]
    #[case::loopback_with_port("localhost:8766", "localhost")]
    #[case::ipv6("[::1]:8766", "::1")]
    #[case::bare("Box.LAN", "box.lan")]
    fn host_names(#[case] value: &str, #[case] name: &str) {
        assert_eq!(host_name(value), name);
    }

    #[rstest]
    #[case::foreign_host(&[("host", "evil.example:8766")], 403)]
    #[case::no_host(&[], 400)]
    #[case::foreign_origin(&[("host", "localhost:8766"), ("origin", "http://evil.example")], 403)]
    #[case::null_origin(&[("host", "localhost:8766"), ("origin", "null")], 403)]
    #[case::no_token(&[("host", "localhost:8766")], 401)]
    #[case::wrong_token(&[("host", "box.lan:8766"), ("authorization", "Bearer nope")], 401)]
    #[case::foreign_origin_on_health(&[("host", "localhost"), ("origin", "https://evil.example")], 403)]
    #[case::another_local_port(&[("host", "localhost:8766"), ("origin", "http://localhost:3000")], 403)]
    #[case::no_port_is_80(&[("host", "localhost:8766"), ("origin", "http://localhost")], 403)]
    fn tcp_refusals(#[case] pairs: &[(&'static str, &'static str)], #[case] status: u16) {
        let r = tcp().check("/mcp", None, &headers(pairs)).expect_err("refused").into_response();
        assert_eq!(r.status().as_u16(), status);
        if status == 401 {
            assert!(r.headers().contains_key(header::WWW_AUTHENTICATE));
        }
    }

    #[rstest]
    #[case::own_port("http://localhost:8766", Some(("localhost", Some(8766))))]
    #[case::ipv6("http://[::1]:8766", Some(("::1", Some(8766))))]
    #[case::ipv6_default("https://[::1]", Some(("::1", Some(443))))]
    #[case::default_http("http://box.lan/", Some(("box.lan", Some(80))))]
    #[case::bad_port("http://localhost:99999", None)]
    #[case::null("null", None)]
    fn origins_are_read_with_their_port(#[case] origin: &str, #[case] want: Option<(&str, Option<u16>)>) {
        assert_eq!(origin_host(origin).map(|o| (o.name, o.port)), want.map(|(n, p)| (n.to_string(), p)));
    }

    #[test]
    fn an_origin_on_the_port_the_request_went_to_is_let_in() {
        let g = tcp();
        let own = headers(&[("host", "localhost:8766"), ("origin", "http://localhost:8766")]);
        assert_eq!(g.check("/mcp", None, &own).expect_err("still needs the token").status.as_u16(), 401);
        let other = headers(&[("host", "localhost:8766"), ("origin", "http://localhost:8767")]);
        assert_eq!(g.check("/mcp", None, &other).expect_err("refused").status.as_u16(), 403);
        // Behind a proxy on port 80, the browser's origin names the proxy's.
        let proxied = headers(&[("host", "localhost"), ("origin", "http://localhost")]);
        assert_eq!(g.check("/mcp", None, &proxied).expect_err("still needs the token").status.as_u16(), 401);
    }

    #[test]
    fn health_needs_no_token_but_the_right_host() {
        let g = tcp();
        assert!(g.check("/health", None, &headers(&[("host", "127.0.0.1:8766")])).is_ok());
        assert!(g.check("/health", None, &headers(&[("host", "evil.example")])).is_err());
        let in_url = g.check("/mcp", Some("access_token=x"), &headers(&[("host", "localhost")]));
        assert_eq!(in_url.expect_err("refused").status.as_u16(), 400);
    }

    #[test]
    fn the_view_needs_no_token_but_the_right_host_and_origin() {
        let g = tcp();
        let ok = g.check_for("/", None, &headers(&[("host", "127.0.0.1:8766")]), Opens::ViewCookie);
        assert!(ok.is_ok());
        let foreign = g.check_for("/", None, &headers(&[("host", "evil.example")]), Opens::ViewCookie);
        assert_eq!(foreign.expect_err("refused").status.as_u16(), 403);
        let origin = headers(&[("host", "localhost"), ("origin", "http://evil.example")]);
        assert!(g.check_for("/web/overview", None, &origin, Opens::ViewCookie).is_err());
        assert!(g.check_for("/login", Some("token=x"), &headers(&[("host", "localhost")]), Opens::ViewCookie).is_err());
    }

    #[test]
    fn the_unix_socket_takes_any_host_but_no_foreign_origin() {
        let g = Guard::unix();
        assert!(g.check("/api/sessions", None, &headers(&[("host", "x")])).is_ok());
        assert!(g.check("/mcp", None, &headers(&[("host", "x"), ("origin", "http://localhost:3000")])).is_ok());
        assert!(g.check("/mcp", None, &headers(&[("host", "x"), ("origin", "https://evil.example")])).is_err());
    }
}
