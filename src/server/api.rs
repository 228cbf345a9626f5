//! The plain HTTP routes beside `/mcp`: `/health` and `/api/*`, for people,
//! scripts and clients' buttons (a Close button posts `{"force": true}`).
//! Every time is in milliseconds since the epoch, in a field named `*_ms`,
//! as in `ls --json`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::retention::{Action, SweepMode, expires_ms};
use crate::session::Sweep;
use crate::tools::Terminal;

/// What the routes share.
#[derive(Clone)]
pub struct App {
    /// The MCP server, for its sessions.
    pub terminal: Terminal,
    /// This server's identity for `/health`.
    pub health: Arc<Value>,
}

/// `GET /health`: what answers here, and which start of it.
pub async fn health(State(app): State<App>) -> Json<Value> {
    let mut health = (*app.health).clone();
    health["policy"] = app.terminal.governor().health();
    Json(health)
}

/// The panes of the server's sessions (none when its tmux server is not
/// running), or the answer that says why they cannot be listed.
async fn live_panes(app: &App) -> Result<Vec<crate::tmux::PaneInfo>, Response> {
    match app.terminal.sessions().panes().await {
        Ok(p) => Ok(p),
        Err(e) if matches!(&e, crate::session::SessionError::Tmux(t) if t.is_no_server()) => Ok(Vec::new()),
        Err(e) => Err((StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response()),
    }
}

/// `GET /metrics`: the server's metrics in the Prometheus text format
/// (see [`crate::metrics`]). What is looked up is looked up now: the
/// sessions open, each one's `raw.log` size and gaps, the asks pending.
pub async fn metrics(State(app): State<App>) -> Response {
    let sessions = app.terminal.sessions();
    let panes = match live_panes(&app).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    let mut names: Vec<&str> = panes.iter().map(|p| p.session_name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let mut now = crate::metrics::Now {
        sessions: names.len() as i64,
        asks_pending: app.terminal.governor().asks_pending() as i64,
        ..Default::default()
    };
    for name in names {
        let dir = sessions.cfg.session_dir(name);
        let raw = std::fs::metadata(dir.join(dtmcp_core::store::files::RAW)).map_or(0, |m| m.len());
        now.logged_bytes += i64::try_from(raw).unwrap_or(i64::MAX);
        let (gaps, lost) = gaps_in(&dir);
        now.gaps += gaps;
        now.gap_bytes += lost;
    }
    let text = crate::metrics::get().encode(now);
    ([(axum::http::header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response()
}

/// How many gaps a session's log records, and the bytes they lost.
fn gaps_in(dir: &std::path::Path) -> (i64, i64) {
    let Ok(text) = std::fs::read_to_string(dir.join(dtmcp_core::contract::GAPS)) else { return (0, 0) };
    text.lines()
        .filter_map(|l| serde_json::from_str::<dtmcp_core::contract::Gap>(l).ok())
        .fold((0, 0), |(n, b), g| (n + 1, b.saturating_add(i64::try_from(g.dropped).unwrap_or(i64::MAX))))
}

/// `GET /api/sessions`: every live session's state.
pub async fn sessions(State(app): State<App>) -> Response {
    let sessions = app.terminal.sessions();
    let panes = match live_panes(&app).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    let live: std::collections::HashSet<String> = panes.iter().map(|p| p.session_name.clone()).collect();
    let sweeper = sessions.sweeper();
    // What every session's processes listen on: one look for them all.
    let ports = app.terminal.ports_of(&panes).await;
    let mut out = Vec::new();
    for (pane, ports) in panes.iter().zip(ports) {
        let mut v = one_session(&app.terminal, pane, &sweeper, &live).await;
        if let (Value::Object(map), Some(ports)) = (&mut v, ports) {
            map.extend(ports);
        }
        out.push(v);
    }
    Json(json!({ "sessions": out })).into_response()
}

async fn one_session(
    terminal: &Terminal,
    pane: &crate::tmux::PaneInfo,
    sweeper: &crate::retention::Sweeper,
    live: &std::collections::HashSet<String>,
) -> Value {
    let sessions = terminal.sessions();
    let name = pane.session_name.as_str();
    let mut v = json!({
        "name": name,
        "pane_id": pane.pane_id.as_ref() as &str,
        "window": pane.window_index,
        "window_id": pane.window_id,
        "tmux_session": pane.tmux_session,
        "index": pane.pane_index,
        "active": pane.pane_active,
        "dead": pane.pane_dead,
        "command": pane.pane_current_command,
        "cwd": pane.pane_current_path,
        "size": { "cols": pane.pane_width, "rows": pane.pane_height },
        "log_dir": sessions.cfg.session_dir(name),
        "attach": sessions.attach_command(&pane.tmux_session),
        "agents_typed_ms": terminal.journal().agents_typed_ms(name),
        "started_by": terminal.journal().creator_of(name),
        "pinned": pane.window_pinned,
        "place": Value::Null,
    });
    let seen = terminal.seen(pane).await;
    v["clients"] = json!(seen.clients.iter().map(client_json).collect::<Vec<_>>());
    v["human_input_ms"] = json!(seen.human_input.map(|s| s * 1000));
    v["typing_now"] = json!(seen.typing_now);
    v["left_at_prompt"] = json!(seen.left_at_prompt);
    if let Some(f) = sweeper.facts_of(name, live) {
        v["keep"] = json!(f.keep);
        v["delete_on_close"] = json!(f.delete_on_close);
        v["expires_ms"] = json!(expires_ms(sweeper.policy, &f));
    }
    if let Ok(s) = sessions.resolve(name).await {
        v["integrated"] = json!(s.meta.integrated);
        v["adopted"] = json!(s.meta.adopted);
        v["parent"] = json!(s.meta.parent);
        if let Ok(mut logger) = s.logger().await
            && let Ok(status) = logger.status().await
        {
            v["last_output_ms"] = json!(status.last_output_ms);
            v["at_prompt"] = json!(status.shell.at_prompt);
            v["place"] = place_of(&status.shell);
            if let Some(r) = &status.last_region {
                v["last_command"] = json!(r.command);
                v["exit"] = json!(r.exit);
                v["last_command_by"] = json!(terminal.journal().starter_of(name, r.id));
            }
        }
    }
    if let Ok(p) = terminal.presence(name).await {
        v["attached"] = json!(p.attached);
        v["running"] = json!(p.running.map(|(cmd, by)| json!({ "command": cmd, "started_by": by })));
    }
    redact_strings(terminal, name, &mut v);
    v
}

/// A person's terminal attached to a session, with its times in ms since
/// the epoch like every time here (tmux stamps them to the second).
fn client_json(c: &crate::tmux::clients::Client) -> Value {
    json!({
        "tty": c.tty,
        "cols": c.cols,
        "rows": c.rows,
        "attached_ms": c.attached * 1000,
        "last_input_ms": c.last_input.map(|s| s * 1000),
    })
}

/// Redacts every string in `v` as a reply of session `name` is redacted:
/// command lines show placeholders here too.
fn redact_strings(terminal: &Terminal, name: &str, v: &mut Value) {
    match v {
        Value::String(s) => *s = terminal.redacted(Some(name), s),
        Value::Array(items) => items.iter_mut().for_each(|i| redact_strings(terminal, name, i)),
        Value::Object(map) => map.values_mut().for_each(|i| redact_strings(terminal, name, i)),
        _ => {}
    }
}

/// Where the session's next line runs, when not on this host as this
/// user: the innermost integrated shell's host and user (an ssh, a `su`).
fn place_of(shell: &dtmcp_core::region::ShellState) -> Value {
    let here_host = crate::config::hostname();
    let here_user = std::env::var("USER").unwrap_or_default();
    let elsewhere = (!shell.host.is_empty() && shell.host != here_host)
        || (!shell.user.is_empty() && !here_user.is_empty() && shell.user != here_user);
    match elsewhere {
        true => json!({ "host": shell.host, "user": shell.user }),
        false => Value::Null,
    }
}

/// The body of `POST /api/sessions/NAME/close`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloseBody {
    /// Close even when someone uses it.
    #[serde(default)]
    pub force: bool,
}

/// `POST /api/sessions/NAME/close`.
pub async fn close(State(app): State<App>, Path(name): Path<String>, body: Option<Json<CloseBody>>) -> Response {
    let force = body.is_some_and(|b| b.force);
    match app.terminal.close_session(&name, force, None).await {
        Ok(text) => Json(json!({ "closed": name, "message": text })).into_response(),
        Err(e) => (StatusCode::CONFLICT, Json(json!({ "error": e.to_string() }))).into_response(),
    }
}

/// The body of `POST /api/sessions/NAME/logs`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogsBody {
    /// `keep`, `default`, `delete_on_close` or `delete`.
    pub action: String,
}

/// `POST /api/sessions/NAME/logs`.
pub async fn logs(State(app): State<App>, Path(name): Path<String>, Json(body): Json<LogsBody>) -> Response {
    let Some(action) = Action::parse(&body.action) else {
        let why = format!("action {:?} is not one of keep, default, delete_on_close, delete", body.action);
        return (StatusCode::BAD_REQUEST, Json(json!({ "error": why }))).into_response();
    };
    match app.terminal.sessions().set_retention(&name, action).await {
        Ok(dir) => Json(json!({ "session": name, "action": body.action, "dir": dir })).into_response(),
        Err(e) => (StatusCode::CONFLICT, Json(json!({ "error": e.to_string() }))).into_response(),
    }
}

/// The query of `POST /api/sweep`.
#[derive(Debug, Default, Deserialize)]
pub struct SweepQuery {
    /// `1` or `true`: only say what would go.
    #[serde(default)]
    pub dry_run: Option<String>,
}

/// `POST /api/sweep[?dry_run=1]`.
pub async fn sweep(State(app): State<App>, Query(q): Query<SweepQuery>) -> Json<Value> {
    let dry_run = q.dry_run.as_deref().is_some_and(|v| matches!(v, "1" | "true" | "yes"));
    let how = if dry_run { Sweep::DryRun } else { Sweep::Delete };
    let decisions = app.terminal.sessions().sweep(SweepMode::Full, how).await;
    let list: Vec<Value> = decisions.iter().map(|d| json!({ "name": d.name, "why": d.why.to_string() })).collect();
    Json(json!({ "dry_run": dry_run, "deleted": if dry_run { json!([]) } else { json!(list) }, "due": list }))
}
