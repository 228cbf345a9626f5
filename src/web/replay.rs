//! Replays in the browser: a recording (see `crate::recording`) played
//! through asciinema's own terminal emulator, `avt`, here on the server,
//! and handed to the page as frames of HTML rows made as the live screen's
//! are ([`super::render::row_html`], secrets hidden by [`Hide`]).
//!
//! # Why not a player in the page
//! asciinema-player 3 runs `avt` compiled to WebAssembly, which a page may
//! start only with `'wasm-unsafe-eval'` in its Content-Security-Policy;
//! xterm.js writes `<style>` elements of its own, which `style-src 'self'`
//! refuses. The view's policy stays as it is: the same emulator runs here,
//! and the page's script (`assets/replay.js`) only swaps rows at the
//! frames' times, seeks, and draws the commands' markers on its bar. The
//! frames hide secrets as every other text of the view does, which a
//! player fed the raw recording could not.
//!
//! # Frames
//! The recording's events are played in order (pauses cut as `record`
//! cuts them); output within [`FRAME_MS`] of a frame joins it, so a flood
//! makes a frame per tick, not per piece. A frame carries only the rows
//! that changed since the one before (all of them after a resize), so a
//! page seeks by applying frames from the start.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::Web;
use super::hide::Hide;
use super::render::row_html;
use dtmcp_core::cast::{Cast, Code, played_times};

/// The shortest time between two frames, in ms of played time.
pub const FRAME_MS: u64 = 40;
/// The most frames one replay holds: a longer recording gets fewer, each
/// covering more time.
const MAX_FRAMES: u64 = 20_000;

/// What the page plays.
#[derive(Debug, Serialize)]
pub struct Replay {
    /// The title (the session's name).
    pub title: String,
    /// The terminal's size at the start.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
    /// How long it plays, in ms (pauses cut).
    pub duration: u64,
    /// The frames, in time order.
    pub frames: Vec<Frame>,
    /// The markers: each command's start and end.
    pub markers: Vec<Marker>,
}

/// The screen at one moment: the rows that changed.
#[derive(Debug, Serialize)]
pub struct Frame {
    /// When, in ms from the start.
    pub t: u64,
    /// The terminal's new size, when it changed here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<(u16, u16)>,
    /// (row, its HTML) for each row that changed.
    pub rows: Vec<(usize, String)>,
}

/// A marker on the bar.
#[derive(Debug, Serialize)]
pub struct Marker {
    /// When, in ms from the start.
    pub t: u64,
    /// Its label (a command line, or `exit N`), secrets hidden.
    pub label: String,
}

/// Plays `cast` into frames, pauses cut to `idle_ms`.
pub fn frames(cast: &Cast, idle_ms: u64, hide: &Hide) -> Result<Replay, String> {
    let times = played_times(cast, idle_ms);
    let duration = times.last().copied().unwrap_or(0);
    let tick = FRAME_MS.max(duration / MAX_FRAMES);
    let (cols, rows) = (cast.cols.max(1), cast.rows.max(1));
    let vt = avt::Terminal::new(cols as usize, rows as usize).map_err(|e| format!("{e:?}"))?;
    let mut player = Player { vt, hide, shown: Vec::new(), size: (cols, rows), resized: true };
    let mut replay =
        Replay { title: cast.title.clone(), cols, rows, duration, frames: Vec::new(), markers: Vec::new() };
    replay.frames.push(player.frame(0));
    let mut pending: Option<u64> = None;
    for (event, t) in cast.events.iter().zip(times) {
        if let Some(at) = pending.filter(|&at| t >= at + tick) {
            replay.frames.push(player.frame(at));
            pending = None;
        }
        match event.code {
            Code::Output => {
                player.vt.feed(event.data.as_str());
                pending = Some(pending.map_or(t, |at| at.max(t)));
            }
            Code::Resize => {
                if let Some((c, r)) = parse_size(&event.data) {
                    player.vt.resize(c as usize, r as usize);
                    (player.size, player.resized) = ((c, r), true);
                    pending = Some(pending.map_or(t, |at| at.max(t)));
                }
            }
            Code::Marker => replay.markers.push(Marker { t, label: hide.text(&event.data) }),
            Code::Exit => {}
        }
    }
    if let Some(at) = pending {
        replay.frames.push(player.frame(at));
    }
    Ok(replay)
}

/// `COLSxROWS`, as an `r` event says it.
fn parse_size(text: &str) -> Option<(u16, u16)> {
    let (c, r) = text.split_once('x')?;
    let (c, r) = (c.parse::<u16>().ok()?, r.parse::<u16>().ok()?);
    (c > 0 && r > 0).then_some((c, r))
}

/// The emulator and what the page was last sent.
struct Player<'a> {
    vt: avt::Terminal,
    hide: &'a Hide,
    /// Each row's HTML as last sent.
    shown: Vec<String>,
    size: (u16, u16),
    /// The size changed since the last frame: every row goes.
    resized: bool,
}

impl Player<'_> {
    /// The frame for the screen now, at `t`.
    fn frame(&mut self, t: u64) -> Frame {
        let screen = self.vt.screen();
        let capture: Vec<String> = screen.visible_lines().map(sgr_row).collect();
        let hidden = self.hide.screen(&capture.join("\n"), u32::from(self.size.0));
        let cursor = self.vt.cursor().position();
        let html: Vec<String> = hidden
            .split('\n')
            .enumerate()
            .map(|(i, row)| row_html(row, cursor.filter(|c| c.1 == i).map(|c| c.0)))
            .collect();
        let all = std::mem::take(&mut self.resized) || self.shown.len() != html.len();
        let rows = html
            .iter()
            .enumerate()
            .filter(|(i, h)| all || self.shown.get(*i) != Some(h))
            .map(|(i, h)| (i, h.clone()))
            .collect();
        let size = all.then_some(self.size);
        self.shown = html;
        Frame { t, size, rows }
    }
}

/// One row of the emulator's screen as text with SGR escapes, as tmux's
/// `capture-pane -e` gives a row (what the live view renders).
fn sgr_row(line: &avt::Line) -> String {
    let cells = line.cells();
    let end = cells.iter().rposition(|c| c.char() != ' ' || sgr(c.pen()) != "0").map_or(0, |i| i + 1);
    let mut out = String::new();
    let mut pen = String::from("0");
    for cell in &cells[..end] {
        if cell.width() == 0 {
            continue;
        }
        let this = sgr(cell.pen());
        if this != pen {
            out.push_str("\x1b[");
            out.push_str(if this == "0" { "0" } else { &this });
            out.push('m');
            pen = this;
        }
        out.push(cell.char());
    }
    if pen != "0" {
        out.push_str("\x1b[0m");
    }
    out
}

/// The SGR parameters of `pen`, `0` for the default.
fn sgr(pen: &avt::Pen) -> String {
    let mut p: Vec<String> = vec!["0".into()];
    if pen.is_bold() {
        p.push("1".into());
    }
    if pen.is_faint() {
        p.push("2".into());
    }
    for (on, code) in
        [(pen.is_italic(), "3"), (pen.is_underline(), "4"), (pen.is_inverse(), "7"), (pen.is_strikethrough(), "9")]
    {
        if on {
            p.push(code.into());
        }
    }
    for (color, base) in [(pen.foreground(), 30u16), (pen.background(), 40u16)] {
        match color {
            Some(avt::Color::Indexed(n)) if n < 8 => p.push((base + u16::from(n)).to_string()),
            Some(avt::Color::Indexed(n)) if n < 16 => p.push((base + 60 + u16::from(n) - 8).to_string()),
            Some(avt::Color::Indexed(n)) => p.push(format!("{};5;{n}", base + 8)),
            Some(avt::Color::RGB(c)) => p.push(format!("{};2;{};{};{}", base + 8, c.r, c.g, c.b)),
            None => {}
        }
    }
    if p.len() == 1 { "0".into() } else { p[1..].join(";") }
}

/// The query of `GET /web/s/NAME/replay` and `/cast`: one region, or the
/// whole session.
#[derive(Debug, Deserialize)]
pub(super) struct ReplayQuery {
    /// The region; none: the whole session.
    region: Option<u64>,
}

impl ReplayQuery {
    fn select(&self) -> dtmcp_core::cast::Select {
        self.region.map_or(dtmcp_core::cast::Select::All, dtmcp_core::cast::Select::One)
    }
}

/// `GET /web/s/NAME/replay?region=N`: the frames the page's player shows
/// (see [`frames`]), secrets hidden.
pub(super) async fn replay_frames(
    State(web): State<Arc<Web>>,
    Path(name): Path<String>,
    Query(q): Query<ReplayQuery>,
    headers: HeaderMap,
) -> Response {
    let dir = match super::admitted_logs(&web, &headers, &name).await {
        Ok(d) => d,
        Err(r) => return r,
    };
    let hide = Hide::new(&web.terminal, &name);
    super::blocking(move || {
        let cast = crate::recording::cast(&dir, &name, q.select(), false)?;
        frames(&cast, dtmcp_core::cast::IDLE_MAX_MS, &hide)
    })
    .await
}

/// `GET /web/s/NAME/cast?region=N`: the recording itself (asciicast v3),
/// for a session whose secrets the view does not hide: a recording holds
/// the output as it came, which no redactor can rewrite byte for byte.
pub(super) async fn cast_file(
    State(web): State<Arc<Web>>,
    Path(name): Path<String>,
    Query(q): Query<ReplayQuery>,
    headers: HeaderMap,
) -> Response {
    let dir = match super::admitted_logs(&web, &headers, &name).await {
        Ok(d) => d,
        Err(r) => return r,
    };
    if web.terminal.redacts(&name) {
        let why = "the view hides this session's secrets, and a recording holds the output as it came; \
                   run `docent-terminal-mcp record` on the server's machine instead";
        return (StatusCode::FORBIDDEN, Json(json!({ "error": why }))).into_response();
    }
    let made = tokio::task::spawn_blocking(move || {
        let cast = crate::recording::cast(&dir, &name, q.select(), false)?;
        Ok::<_, String>(crate::recording::text(&cast, dtmcp_core::cast::Version::V3, dtmcp_core::cast::IDLE_MAX_MS))
    })
    .await;
    match made {
        Ok(Ok(body)) => {
            let mut r = body.into_response();
            r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/x-asciicast"));
            r
        }
        Ok(Err(e)) => (StatusCode::BAD_REQUEST, Json(json!({ "error": e }))).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({ "error": e.to_string() }))).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_keep_their_colours_and_wide_characters() {
        let mut vt = avt::Terminal::new(20, 2).expect("terminal");
        vt.feed("a\x1b[1;31mb\x1b[0m 漢x\r\n\x1b[48;5;200m \x1b[0m");
        let rows: Vec<String> = vt.screen().visible_lines().map(sgr_row).collect();
        assert_eq!(rows[0], "a\x1b[1;31mb\x1b[0m 漢x");
        assert_eq!(rows[1], "\x1b[48;5;200m \x1b[0m");
        assert_eq!(parse_size("100x30"), Some((100, 30)));
        assert_eq!(parse_size("0x30"), None);
    }
}
