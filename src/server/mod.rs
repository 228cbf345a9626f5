//! `docent-terminal-mcp serve`: one server for many agents.
//!
//! MCP over streamable HTTP at `/mcp`, plus `/health` and `/api/*`, on a
//! Unix socket (always) and a TCP port (with `--tcp`). The tool layer is the
//! same as over stdio; each HTTP MCP session gets its own connection
//! identity (see [`crate::agents::caller`]), and the sessions, sweeps and the
//! logger watchdog are the server's, run once whatever the number of
//! clients. Under systemd it reports `READY=1` once the socket is bound and
//! the state lock held, `WATCHDOG=1` when asked to, and `STOPPING=1`.

pub mod api;
pub mod conns;
pub mod direct;
pub mod guard;
pub mod notify;
pub mod options;
pub mod socket;
pub mod store;
pub mod token;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{any, get, post};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::session::Sessions;
use crate::tmux::Tmux;
use crate::tools::Terminal;
use guard::Guard;
pub use options::{ServeError, ServeOptions, tcp_address};
use socket::BoundSocket;
use token::Token;

/// The default TCP port.
pub const DEFAULT_PORT: u16 = 8766;

/// What `/health` says about this start.
fn health(socket: &std::path::Path) -> serde_json::Value {
    let user = crate::config::user_name().unwrap_or_default();
    json!({
        "service": "docent-terminal-mcp",
        "host": crate::config::hostname(),
        "user": user,
        "instance": instance_id(),
        "version": env!("CARGO_PKG_VERSION"),
        "pid": std::process::id(),
        "socket": socket,
    })
}

/// A random id, new at every start.
fn instance_id() -> String {
    let mut bytes = [0u8; 8];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
    if read.is_err() {
        bytes = (crate::config::now_ms() ^ u64::from(std::process::id()) << 32).to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The routes of one listener.
fn router(app: api::App, guard: Guard, ct: &CancellationToken, kept: Arc<store::FileSessions>, web: Router) -> Router {
    let terminal = app.terminal.clone();
    // Host and Origin are checked by our guard, for every route alike; the
    // Unix socket's clients send any Host, which rmcp's own list would refuse.
    let mut config =
        StreamableHttpServerConfig::default().disable_allowed_hosts().with_cancellation_token(ct.child_token());
    // A restarted server takes up the HTTP clients' sessions where they were.
    config.session_store = Some(kept);
    let manager = Arc::new(LocalSessionManager::default());
    let base = terminal.clone();
    let mcp = StreamableHttpService::new(move || Ok(base.for_connection()), manager.clone(), config);
    let mcp = Arc::new(direct::Direct::new(mcp, manager, terminal));
    Router::new()
        .route("/health", get(api::health))
        .route("/metrics", get(api::metrics))
        .route("/api/sessions", get(api::sessions))
        .route("/api/sessions/{name}/close", post(api::close))
        .route("/api/sessions/{name}/logs", post(api::logs))
        .route("/api/sweep", post(api::sweep))
        .with_state(app)
        .route("/mcp", any(direct::Direct::serve).with_state(mcp))
        .merge(web)
        .layer(axum::middleware::from_fn_with_state(guard, guard::enforce))
        .layer(axum::middleware::from_fn(crate::agents::caller::stamp_arrival))
}

/// Serves until SIGTERM or SIGINT. `bound` is the Unix socket, bound before
/// the runtime started (see [`socket::bind`]); the state lock is held by
/// the caller.
pub async fn run(cfg: Config, bound: BoundSocket, opts: ServeOptions) -> anyhow::Result<()> {
    let tmux = Arc::new(Tmux::new(&cfg.socket).with_scope(crate::tmux::scope_wanted()));
    let sessions = Sessions::new(cfg.clone(), tmux.clone())?;
    crate::agents::journal::prune_requests(&cfg.home);
    let governor = crate::policy::Governor::open(&cfg.home, None)?;
    let sweeps = tokio::spawn(crate::session::sweep_forever(Sessions::new(cfg.clone(), tmux)?));
    let terminal = Terminal::governed(sessions, governor);
    terminal.start_watchdog();
    let web = crate::web::Web::new(terminal.clone(), &opts);
    let app = api::App { terminal, health: Arc::new(health(&bound.path)) };
    let ct = CancellationToken::new();
    let kept = Arc::new(store::FileSessions::new(cfg.home.join("http-sessions")));
    let mut servers = tokio::task::JoinSet::new();
    let open_files = conns::raise_open_files();

    // The port (and its token) first: once the socket answers, all is up.
    if let Some(port) = opts.tcp {
        let addr = tcp_address(&opts, port)?;
        let token = Token::load_or_create(&cfg.token_file())
            .map_err(|e| anyhow::anyhow!("cannot read or make the token {}: {e}", cfg.token_file().display()))?;
        let listener =
            tokio::net::TcpListener::bind(addr).await.map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
        let view = crate::web::view_routes(web.clone());
        let tcp_routes = router(app.clone(), Guard::tcp(token, &opts.allowed_hosts), &ct, kept.clone(), view);
        let limits = conns::Limits::for_open_files(open_files, Some(conns::HEADER_TIMEOUT));
        servers.spawn(conns::serve(listener, tcp_routes, limits, ct.clone()));
        eprintln!("docent-terminal-mcp: serving on http://{addr}/mcp (bearer token in {})", cfg.token_file().display());
        eprintln!("docent-terminal-mcp: a read-only web view is at http://{addr}/ (`docent-terminal-mcp web` logs in)");
    }

    let unix = socket::PeerChecked::new(bound.listener.try_clone()?)?;
    let unix_routes = router(app.clone(), Guard::unix(), &ct, kept, crate::web::socket_routes(web));
    servers.spawn(conns::serve(unix, unix_routes, conns::Limits::for_open_files(open_files, None), ct.clone()));
    eprintln!("docent-terminal-mcp: serving on {}", bound.path.display());

    notify::ready();
    let watchdog = notify::watchdog_interval().map(|every| tokio::spawn(notify::keep_alive(every)));
    let why = tokio::select! {
        s = shutdown_signal() => s,
        r = servers.join_next() => format!("a listener ended{}", match r {
            Some(Err(e)) => format!(": {e}"),
            _ => String::new(),
        }),
    };
    eprintln!("docent-terminal-mcp: stopping ({why})");
    notify::stopping();
    ct.cancel();
    // Open event streams may hold a graceful shutdown forever; a bounded
    // wait, then whatever is left is dropped with the runtime.
    let _ = tokio::time::timeout(Duration::from_secs(3), async { while servers.join_next().await.is_some() {} }).await;
    servers.abort_all();
    if let Some(w) = watchdog {
        w.abort();
    }
    sweeps.abort();
    drop(bound);
    Ok(())
}

async fn shutdown_signal() -> String {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        std::future::pending::<()>().await;
        return String::new();
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM".into(),
        _ = int.recv() => "SIGINT".into(),
    }
}
