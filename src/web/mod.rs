//! The web view: a live, read-only page of every session, for watching
//! from a browser (another machine, a phone) without tmux.
//!
//! # Where it lives
//! The shared server serves it on its TCP port (`serve --tcp`), at `/`.
//! `docent-terminal-mcp web` asks the server over its Unix socket (so only
//! its own user can) for a one-time login link (see [`login`]), prints it
//! and opens it when there is a display.
//!
//! # Read-only by construction, but for one answer
//! The login cookie opens only the view's own `GET` routes and one
//! `POST`, a person's answer to what the policy asks ([`asks`];
//! [`opens_with_cookie`]); MCP, `/api/*` and everything that types,
//! resizes or closes still need the bearer token, and nothing else on the
//! page sends anything. That answer also needs the page's own `Origin`
//! and the login's CSRF token. Host and Origin are checked by the server's
//! guard as on every route; every answer here carries a Content Security
//! Policy of `default-src 'self'` with no inline script, `frame-ancestors
//! 'none'`, and `Referrer-Policy: no-referrer`.
//!
//! # How it stays live
//! One task per watched session and one for the overview ([`feeds`]) wake
//! on the sessions' file changes ([`changes`]) and tmux's notifications
//! ([`tmux_events`]), look again at a bounded rate, and hand snapshots to
//! the browsers' event streams ([`sse`]). The screen is tmux's own
//! rendering (`capture-pane -e`), turned into HTML rows ([`render`]): the
//! page needs no terminal emulator and no script from anywhere else. Every
//! asset is compiled into the binary. Replays of a recording are played
//! into frames of such rows on the server ([`replay`]). The asks waiting for a person come
//! on a stream of their own, woken by the asks directory's changes
//! ([`asks`]).

pub mod asks;
pub mod card;
pub mod changes;
pub mod data;
pub mod feeds;
pub mod hide;
pub mod login;
pub mod render;
pub mod replay;
pub mod screen;
pub mod sse;
pub mod tmux_events;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;

use crate::server::options::ServeOptions;
use crate::tools::Terminal;
use feeds::Hub;
use login::Logins;

const INDEX_HTML: &str = include_str!("assets/index.html");
const LOGIN_HTML: &str = include_str!("assets/login.html");
const SIGNED_IN_HTML: &str = include_str!("assets/signed-in.html");
const APP_JS: &str = include_str!("assets/app.js");
const REPLAY_JS: &str = include_str!("assets/replay.js");
const STYLE_CSS: &str = include_str!("assets/style.css");

/// The policy every answer of the view carries.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; \
                   object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The web view of one server, shared by its listeners.
pub struct Web {
    /// The server's tools, for its sessions.
    pub terminal: Terminal,
    /// Login codes and browser sessions.
    pub logins: Logins,
    /// The live feeds.
    pub hub: Arc<Hub>,
    /// Where a login link points (`http://HOST:PORT`); `None` without a TCP port.
    pub link_base: Option<String>,
    /// The cookie's name: one per port, as browsers share cookies between
    /// the ports of one host.
    pub cookie_name: String,
    /// The asks' feed.
    pub asks: asks::Asks,
}

impl Web {
    /// The view of `terminal`'s sessions, for a server started with `opts`.
    pub fn new(terminal: Terminal, opts: &ServeOptions) -> Arc<Web> {
        let hub = Arc::new(Hub::new(terminal.clone()));
        Arc::new(Web {
            terminal,
            logins: Logins::default(),
            hub,
            link_base: opts.tcp.map(|port| format!("http://{}:{port}", link_host(opts))),
            cookie_name: format!("dtmcp_web_{}", opts.tcp.unwrap_or(0)),
            asks: asks::Asks::default(),
        })
    }

    /// Whether the request carries a live browser session's cookie.
    fn admits(&self, headers: &HeaderMap) -> bool {
        self.csrf_of(headers).is_some()
    }

    /// The CSRF token of the live browser session whose cookie the request
    /// carries; `None` without one.
    fn csrf_of(&self, headers: &HeaderMap) -> Option<String> {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter_map(|v| login::cookie(v, &self.cookie_name))
            .find_map(|id| self.logins.csrf(id, Instant::now()))
    }
}

/// The host name a login link uses: the loopback address for a loopback
/// bind, else the first name clients were said to use.
fn link_host(opts: &ServeOptions) -> String {
    let host = opts.host.as_deref().unwrap_or("127.0.0.1");
    let loopback = host == "localhost"
        || host.trim_matches(['[', ']']).parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    match (loopback, opts.allowed_hosts.first()) {
        (false, Some(name)) => name.clone(),
        _ if host.contains(':') && !host.starts_with('[') => format!("[{host}]"),
        _ => host.to_string(),
    }
}

/// Whether a request is one the login cookie may open instead of the
/// bearer token: a `GET` (or `HEAD`) of the view's own pages, streams,
/// reads and assets, and the `POST` of an answer to an ask (which checks
/// its Origin and CSRF token besides, see [`asks`]). Nothing else is.
pub fn opens_with_cookie(method: &Method, path: &str) -> bool {
    let read = method == Method::GET || method == Method::HEAD;
    let view = path == "/" || path == "/login" || path.starts_with("/s/") || path.starts_with("/web/");
    (read && view) || (method == Method::POST && asks::is_answer_path(path))
}

/// The view's routes on the TCP port.
pub fn view_routes(web: Arc<Web>) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/s/{name}", get(page))
        .route("/login", get(sign_in))
        .route("/web/app.js", get(|| async { asset(APP_JS, "text/javascript; charset=utf-8") }))
        .route("/web/replay.js", get(|| async { asset(REPLAY_JS, "text/javascript; charset=utf-8") }))
        .route("/web/s/{name}/replay", get(replay::replay_frames))
        .route("/web/s/{name}/cast", get(replay::cast_file))
        .route("/web/style.css", get(|| async { asset(STYLE_CSS, "text/css; charset=utf-8") }))
        .route("/web/palette.css", get(|| async { asset(palette(), "text/css; charset=utf-8") }))
        .route("/web/overview", get(overview_events))
        .route("/web/asks", get(asks::events))
        .route("/web/asks/{id}", post(asks::answer))
        .route("/web/s/{name}/events", get(session_events))
        .route("/web/s/{name}/lines", get(lines))
        .route("/web/s/{name}/search", get(search))
        .route("/web/s/{name}/regions", get(regions))
        .with_state(web)
        .layer(axum::middleware::from_fn(policy))
}

/// The view's routes on the Unix socket: handing out login links.
pub fn socket_routes(web: Arc<Web>) -> Router {
    Router::new().route("/web/login-link", post(login_link)).with_state(web)
}

/// The stylesheet of the 256 colours, made once.
fn palette() -> &'static str {
    static CSS: OnceLock<String> = OnceLock::new();
    CSS.get_or_init(render::palette_css)
}

fn asset(body: &'static str, kind: &'static str) -> Response {
    let mut r = body.into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

fn html(status: StatusCode, body: &'static str) -> Response {
    let mut r = (status, body).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    r
}

/// Adds the view's security headers to every answer.
async fn policy(request: Request, next: Next) -> Response {
    let mut r = next.run(request).await;
    let h = r.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    r
}

/// The answer to a request without a live cookie.
fn signed_out() -> Response {
    (StatusCode::UNAUTHORIZED, "not signed in: run `docent-terminal-mcp web` for a login link\n").into_response()
}

/// `GET /` and `GET /s/NAME`: the page (its script draws the rest), with
/// the login's CSRF token in it; or the login page.
async fn page(State(web): State<Arc<Web>>, headers: HeaderMap) -> Response {
    match web.csrf_of(&headers) {
        // The token is hex: nothing in it needs escaping.
        Some(csrf) => {
            let mut r = (StatusCode::OK, INDEX_HTML.replace(CSRF_SLOT, &csrf)).into_response();
            r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
            r
        }
        None => html(StatusCode::UNAUTHORIZED, LOGIN_HTML),
    }
}

/// Where the page's CSRF token goes in `index.html`.
const CSRF_SLOT: &str = "{{csrf}}";

/// The query of `GET /login`.
#[derive(Debug, Deserialize)]
struct SignIn {
    code: Option<String>,
}

/// `GET /login?code=CODE`: trades a code for a cookie, then sends the
/// browser on to `/` (a page that moves on by itself, so that the code
/// leaves the address bar; a plain redirect would not carry a
/// `SameSite=Strict` cookie when the link was opened from another site).
async fn sign_in(State(web): State<Arc<Web>>, Query(q): Query<SignIn>) -> Response {
    let Some(code) = q.code else { return html(StatusCode::UNAUTHORIZED, LOGIN_HTML) };
    match web.logins.redeem(&code, Instant::now()) {
        Ok(id) => {
            let cookie = format!("{}={id}; HttpOnly; SameSite=Strict; Path=/", web.cookie_name);
            let mut r = html(StatusCode::OK, SIGNED_IN_HTML);
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r
        }
        Err(e) => {
            let mut r = html(StatusCode::UNAUTHORIZED, LOGIN_HTML);
            if let Ok(v) = HeaderValue::from_str(&e.to_string()) {
                r.headers_mut().insert("x-login-refused", v);
            }
            r
        }
    }
}

/// `POST /web/login-link` (Unix socket only): a new one-time link.
async fn login_link(State(web): State<Arc<Web>>) -> Response {
    let Some(base) = &web.link_base else {
        let why = "this server has no TCP port, so a browser cannot reach it; start it with `serve --tcp [PORT]`";
        return (StatusCode::CONFLICT, Json(json!({ "error": why }))).into_response();
    };
    match web.logins.issue(Instant::now()) {
        Ok(code) => {
            Json(json!({ "url": format!("{base}/login?code={code}"), "expires_in": login::CODE_TTL.as_secs() }))
                .into_response()
        }
        Err(e) => {
            (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({ "error": format!("no randomness: {e}") }))).into_response()
        }
    }
}

fn last_event_id(headers: &HeaderMap) -> Option<&str> {
    headers.get("last-event-id").and_then(|v| v.to_str().ok())
}

/// `GET /web/overview`: the overview's event stream.
async fn overview_events(State(web): State<Arc<Web>>, headers: HeaderMap) -> Response {
    if !web.admits(&headers) {
        return signed_out();
    }
    match sse::overview(&web.hub, last_event_id(&headers)).await {
        Ok(events) => events.into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, e).into_response(),
    }
}

/// `GET /web/s/NAME/events`: one session's event stream.
async fn session_events(State(web): State<Arc<Web>>, Path(name): Path<String>, headers: HeaderMap) -> Response {
    if !web.admits(&headers) {
        return signed_out();
    }
    let journal = std::sync::Arc::clone(web.terminal.journal());
    let hide = hide::Hide::new(&web.terminal, &name);
    match sse::session(&web.hub, &name, journal, hide, last_event_id(&headers)).await {
        Ok(events) => events.into_response(),
        Err(e) => (StatusCode::NOT_FOUND, e).into_response(),
    }
}

/// The directory of session `name`'s logs, open or closed, for a signed-in
/// browser; otherwise the answer to give instead (signed out, or no such
/// session).
async fn admitted_logs(web: &Web, headers: &HeaderMap, name: &str) -> Result<std::path::PathBuf, Response> {
    if !web.admits(headers) {
        return Err(signed_out());
    }
    match web.terminal.sessions().open_logs(name).await {
        Ok(logs) => Ok(logs.dir),
        Err(e) => Err((StatusCode::NOT_FOUND, Json(json!({ "error": e.to_string() }))).into_response()),
    }
}

/// Runs a blocking read of the log off the runtime's threads.
async fn blocking<T: serde::Serialize + Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Response {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Json(v).into_response(),
        Ok(Err(e)) => (StatusCode::BAD_REQUEST, Json(json!({ "error": e }))).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({ "error": e.to_string() }))).into_response(),
    }
}

/// The query of `GET /web/s/NAME/lines`.
#[derive(Debug, Deserialize)]
struct LinesQuery {
    from: Option<u64>,
    count: Option<u64>,
}

/// `GET /web/s/NAME/lines?from=N&count=M`: numbered lines of the log.
async fn lines(
    State(web): State<Arc<Web>>,
    Path(name): Path<String>,
    Query(q): Query<LinesQuery>,
    headers: HeaderMap,
) -> Response {
    let dir = match admitted_logs(&web, &headers, &name).await {
        Ok(d) => d,
        Err(r) => return r,
    };
    let hide = hide::Hide::new(&web.terminal, &name);
    blocking(move || {
        let mut lines = data::lines(&dir, q.from.unwrap_or(1), q.count.unwrap_or(100))?;
        lines.lines = hide.lines(lines.lines).into_iter().map(data::shown).collect();
        Ok(lines)
    })
    .await
}

/// The query of `GET /web/s/NAME/search`.
#[derive(Debug, Deserialize)]
struct SearchQuery {
    q: Option<String>,
    offset: Option<u64>,
}

/// `GET /web/s/NAME/search?q=REGEX&offset=N`: a page of matching lines.
async fn search(
    State(web): State<Arc<Web>>,
    Path(name): Path<String>,
    Query(q): Query<SearchQuery>,
    headers: HeaderMap,
) -> Response {
    let dir = match admitted_logs(&web, &headers, &name).await {
        Ok(d) => d,
        Err(r) => return r,
    };
    let pattern = q.q.unwrap_or_default();
    let hide = hide::Hide::new(&web.terminal, &name);
    // A browser that gives up drops this handler; the search then stops
    // at its next block rather than scanning on for nobody.
    let gone = Arc::new(AtomicBool::new(false));
    let _gone = GoneOnDrop(gone.clone());
    let until = Instant::now() + SEARCH_BUDGET;
    blocking(move || {
        let stop = || gone.load(Ordering::Relaxed) || Instant::now() >= until;
        let mut hits = data::find(&dir, &pattern, q.offset.unwrap_or(0), &stop)?;
        // A hit on a secret still counts; its text shows the placeholder.
        let texts = hide.lines(hits.hits.iter().map(|h| h.text.clone()).collect());
        hits.hits.iter_mut().zip(texts).for_each(|(h, t)| h.text = data::shown(t));
        Ok(hits)
    })
    .await
}

/// How long one search of the view may scan before it answers with what
/// it found.
const SEARCH_BUDGET: std::time::Duration = std::time::Duration::from_secs(10);

/// Marks a search's caller gone when its handler ends, however it ends.
struct GoneOnDrop(Arc<AtomicBool>);

impl Drop for GoneOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The query of `GET /web/s/NAME/regions`.
#[derive(Debug, Deserialize)]
struct RegionsQuery {
    before: u64,
}

/// `GET /web/s/NAME/regions?before=ID`: earlier regions of the timeline.
async fn regions(
    State(web): State<Arc<Web>>,
    Path(name): Path<String>,
    Query(q): Query<RegionsQuery>,
    headers: HeaderMap,
) -> Response {
    let dir = match admitted_logs(&web, &headers, &name).await {
        Ok(d) => d,
        Err(r) => return r,
    };
    let journal = std::sync::Arc::clone(web.terminal.journal());
    let hide = hide::Hide::new(&web.terminal, &name);
    blocking(move || {
        let (mut regions, more) = data::regions_before(&journal, &name, &dir, q.before)?;
        regions.iter_mut().for_each(|r| r.command = hide.text(&r.command));
        Ok(json!({ "regions": regions, "more_before": more }))
    })
    .await
}

/// The `web` subcommand's options.
#[derive(Debug, clap::Args)]
pub struct WebArgs {
    /// The server's Unix socket (default as for serve).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<std::path::PathBuf>,
    /// Print the link only; do not open a browser.
    #[arg(long)]
    pub no_open: bool,
}

/// `docent-terminal-mcp web`: asks the running server for a login link,
/// prints it, and opens it with `xdg-open` when there is a display.
pub fn cli(args: WebArgs) -> anyhow::Result<()> {
    let path = crate::config::server_socket_path(args.socket.as_deref())?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let url = runtime.block_on(ask_for_link(&path))?;
    println!("{url}");
    eprintln!("(the link works once, within {} seconds; the page is read-only)", login::CODE_TTL.as_secs());
    let display = ["DISPLAY", "WAYLAND_DISPLAY"].iter().any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()));
    if display && !args.no_open {
        let opened = std::process::Command::new("xdg-open")
            .arg(&url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        if let Err(e) = opened {
            eprintln!("could not run xdg-open ({e}); open the link yourself");
        }
    }
    Ok(())
}

/// `POST /web/login-link` over the Unix socket at `path`.
async fn ask_for_link(path: &std::path::Path) -> anyhow::Result<String> {
    use http_body_util::{BodyExt, Full};
    use hyper::body::Bytes;
    let stream = tokio::net::UnixStream::connect(path).await.map_err(|e| {
        anyhow::anyhow!(
            "no server answers on {} ({e}); start one with `docent-terminal-mcp serve --tcp`",
            path.display()
        )
    })?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let request = hyper::Request::post("/web/login-link").header("host", "localhost").body(Full::new(Bytes::new()))?;
    let answer = tokio::time::timeout(std::time::Duration::from_secs(10), sender.send_request(request))
        .await
        .map_err(|_| anyhow::anyhow!("the server at {} did not answer within 10 s", path.display()))??;
    let status = answer.status();
    let body = answer.into_body().collect().await?.to_bytes();
    let value: serde_json::Value =
        serde_json::from_slice(&body).unwrap_or_else(|_| json!({ "error": String::from_utf8_lossy(&body) }));
    match (status.is_success(), value["url"].as_str()) {
        (true, Some(url)) => Ok(url.to_string()),
        _ if status == StatusCode::NOT_FOUND => Err(anyhow::anyhow!(
            "the server at {} has no web view (an older version?); restart it with this version",
            path.display()
        )),
        _ => Err(anyhow::anyhow!("{}", value["error"].as_str().unwrap_or("the server refused to make a link"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_opens_only_the_views_reads() {
        for path in ["/", "/login", "/s/t1", "/web/overview", "/web/s/t1/events", "/web/app.js"] {
            assert!(opens_with_cookie(&Method::GET, path), "{path}");
        }
        for path in ["/mcp", "/api/sessions", "/api/sessions/t1/close", "/health", "/sx"] {
            assert!(!opens_with_cookie(&Method::GET, path), "{path}");
        }
        assert!(!opens_with_cookie(&Method::POST, "/web/overview"));
        assert!(opens_with_cookie(&Method::POST, "/web/asks/7"), "the one answer");
        assert!(!opens_with_cookie(&Method::POST, "/web/asks"));
        assert!(!opens_with_cookie(&Method::DELETE, "/web/asks/7"));
        assert!(!opens_with_cookie(&Method::POST, "/web/login-link"));
        assert!(!opens_with_cookie(&Method::DELETE, "/s/t1"));
    }

    #[test]
    fn the_web_subcommand_parses() {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from(["dtmcp", "web", "--no-open"]).expect("parses");
        assert!(matches!(cli.command, Some(crate::cli::Command::Web(WebArgs { no_open: true, socket: None }))));
        let cli = crate::cli::Cli::try_parse_from(["dtmcp", "web", "--socket", "/tmp/s.sock"]).expect("parses");
        assert!(matches!(cli.command, Some(crate::cli::Command::Web(WebArgs { no_open: false, socket: Some(_) }))));
    }

    #[test]
    fn links_use_a_name_clients_can_reach() {
        let opts = |host: Option<&str>, allowed: &[&str]| ServeOptions {
            tcp: Some(8766),
            host: host.map(str::to_string),
            allowed_hosts: allowed.iter().map(|s| s.to_string()).collect(),
        };
        assert_eq!(link_host(&opts(None, &[])), "127.0.0.1");
        assert_eq!(link_host(&opts(Some("::1"), &[])), "[::1]");
        assert_eq!(link_host(&opts(Some("0.0.0.0"), &["box.lan"])), "box.lan");
        assert_eq!(link_host(&opts(Some("localhost"), &["box.lan"])), "localhost");
    }

    #[test]
    fn assets_load_nothing_from_elsewhere_and_run_no_inline_script() {
        let handler = regex::Regex::new(r"\son[a-z]+\s*=").expect("regex");
        for page in [INDEX_HTML, LOGIN_HTML, SIGNED_IN_HTML] {
            assert!(!page.contains("http://") && !page.contains("https://"), "{page}");
            assert!(!page.contains("<script>"), "inline script in {page}");
            assert!(!page.contains("style="), "inline style in {page}");
            assert!(!handler.is_match(page), "an event handler attribute in {page}");
        }
        assert!(!APP_JS.contains("http://") && !APP_JS.contains("https://"));
        assert!(!STYLE_CSS.contains("url("), "the stylesheet loads nothing");
        // Nothing on the page sends input: no form, and one POST only, the
        // answer to an ask, with its CSRF token.
        for forbidden in ["XMLHttpRequest", "WebSocket", "sendBeacon", "<form"] {
            assert!(!APP_JS.contains(forbidden), "app.js uses {forbidden}");
        }
        assert_eq!(APP_JS.matches("POST").count(), 1, "one POST in app.js");
        assert!(APP_JS.contains("\"/web/asks/\" + "), "the POST answers an ask");
        assert!(INDEX_HTML.contains(CSRF_SLOT), "the page carries the token");
    }
}
