//! A live pane's screen as the page shows it: captured from tmux with its
//! colours (`capture-pane -e -p`), its size and cursor (`display -p`),
//! rendered to HTML rows, each with a hash so that a browser is sent only
//! the rows that changed since the frame it has.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use serde::Serialize;

use super::hide::Hide;
use super::render;
use crate::tmux::Tmux;

/// What `display -p` is asked for, in [`Geometry::parse`]'s order.
const GEOMETRY: &str = "#{cursor_x} #{cursor_y} #{cursor_flag} #{pane_width} #{pane_height} #{alternate_on}";

/// A pane's size, cursor and screen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Geometry {
    /// The cursor's column.
    pub cursor_x: u32,
    /// The cursor's row.
    pub cursor_y: u32,
    /// Whether the program shows the cursor.
    pub cursor_shown: bool,
    /// Columns.
    pub cols: u32,
    /// Rows.
    pub rows: u32,
    /// Whether the alternate screen (a full-screen program's) is up.
    pub alternate: bool,
}

impl Geometry {
    /// Reads the answer to [`GEOMETRY`].
    pub fn parse(text: &str) -> Option<Geometry> {
        let f: Vec<u32> = text.split_whitespace().map(|w| w.parse().ok()).collect::<Option<_>>()?;
        let [cursor_x, cursor_y, shown, cols, rows, alternate] = f[..] else { return None };
        Some(Geometry { cursor_x, cursor_y, cursor_shown: shown == 1, cols, rows, alternate: alternate == 1 })
    }
}

/// One row: its HTML and a hash of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The row as HTML spans.
    pub html: Arc<str>,
    /// A hash of `html`, to find changed rows without comparing text.
    pub hash: u64,
}

impl Row {
    fn new(html: String) -> Row {
        let mut h = std::hash::DefaultHasher::new();
        html.hash(&mut h);
        Row { html: html.into(), hash: h.finish() }
    }
}

/// A screen as the page shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// A hash of what it shows (size, cursor, rows): equal pictures have
    /// equal ids, whichever watcher made them, so a browser's stream can
    /// resume on it (see [`super::sse`]).
    pub id: u64,
    /// Size and cursor.
    pub geometry: Geometry,
    /// The rows, top to bottom, exactly `geometry.rows` of them.
    pub rows: Vec<Row>,
}

/// What a browser is sent of a frame.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct FrameMessage {
    /// Columns.
    pub cols: u32,
    /// Rows.
    pub rows: u32,
    /// The cursor, when shown: column and row.
    pub cursor: Option<(u32, u32)>,
    /// The alternate screen is up.
    pub alternate: bool,
    /// `true`: `lines` replaces every row; `false`: only the rows listed.
    pub full: bool,
    /// Rows by index, with their HTML.
    pub lines: Vec<(usize, Arc<str>)>,
}

impl Frame {
    /// The frame of a capture (rows with SGR escapes) and its geometry.
    pub fn new(geometry: Geometry, capture: &str) -> Frame {
        let cursor_row = geometry.cursor_shown.then_some(geometry.cursor_y as usize);
        let mut lines = capture.split('\n');
        let rows = (0..geometry.rows as usize)
            .map(|i| {
                let text = lines.next().unwrap_or("");
                let col = (cursor_row == Some(i)).then_some(geometry.cursor_x as usize);
                Row::new(render::row_html(text, col))
            })
            .collect::<Vec<Row>>();
        let mut h = std::hash::DefaultHasher::new();
        geometry.hash(&mut h);
        rows.iter().for_each(|r| r.hash.hash(&mut h));
        Frame { id: h.finish(), geometry, rows }
    }

    /// What to send a browser that has `before` (all of it when `None`,
    /// or when the size changed).
    pub fn message(&self, before: Option<&Frame>) -> FrameMessage {
        let g = self.geometry;
        let same_size = before.is_some_and(|b| b.geometry.cols == g.cols && b.geometry.rows == g.rows);
        let lines = match (before, same_size) {
            (Some(b), true) => self
                .rows
                .iter()
                .enumerate()
                .filter(|(i, r)| b.rows.get(*i).is_none_or(|o| o.hash != r.hash))
                .map(|(i, r)| (i, r.html.clone()))
                .collect(),
            _ => self.rows.iter().enumerate().map(|(i, r)| (i, r.html.clone())).collect(),
        };
        FrameMessage {
            cols: g.cols,
            rows: g.rows,
            cursor: g.cursor_shown.then_some((g.cursor_x, g.cursor_y)),
            alternate: g.alternate,
            full: !same_size,
            lines,
        }
    }
}

/// Captures pane `pane` now: its geometry, then its screen, its secrets
/// hidden by `hide`. Two commands over the router's control client, in
/// order, so the cursor belongs to the screen unless output came between
/// them (then the next frame, which that output causes, is right).
pub async fn capture(tmux: &Tmux, pane: &str, hide: &Hide) -> Result<Frame, String> {
    let geometry = tmux.display(pane, GEOMETRY).await.map_err(|e| e.to_string())?;
    let geometry = Geometry::parse(&geometry).ok_or_else(|| format!("unreadable pane geometry {geometry:?}"))?;
    let text = tmux.run(&["capture-pane", "-e", "-p", "-t", pane]).await.map_err(|e| e.to_string())?;
    Ok(Frame::new(geometry, &hide.screen(&text, geometry.cols)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo(cols: u32, rows: u32, cursor: Option<(u32, u32)>) -> Geometry {
        let (x, y) = cursor.unwrap_or_default();
        Geometry { cursor_x: x, cursor_y: y, cursor_shown: cursor.is_some(), cols, rows, alternate: false }
    }

    #[test]
    fn geometry_is_read_or_refused() {
        assert_eq!(Geometry::parse("3 1 1 80 24 0"), Some(geo(80, 24, Some((3, 1)))));
        assert_eq!(Geometry::parse("3 1 0 80 24 1").map(|g| (g.cursor_shown, g.alternate)), Some((false, true)));
        assert_eq!(Geometry::parse("3 1 1 80"), None);
        assert_eq!(Geometry::parse("x 1 1 80 24 0"), None);
    }

    #[test]
    fn a_frame_has_every_row_and_the_cursor() {
        let f = Frame::new(geo(10, 3, Some((2, 1))), "top\n$ \n");
        assert_eq!(f.rows.len(), 3);
        assert_eq!(&*f.rows[1].html, "$ <span class=\"cur\"> </span>");
        assert_eq!(&*f.rows[2].html, "");
    }

    #[test]
    fn only_changed_rows_are_sent_unless_the_size_changed() {
        let a = Frame::new(geo(10, 3, None), "one\ntwo\nthree");
        let b = Frame::new(geo(10, 3, None), "one\nTWO\nthree");
        assert_ne!(a.id, b.id);
        assert_eq!(a.id, Frame::new(geo(10, 3, None), "one\ntwo\nthree").id, "the same picture, the same id");
        assert_ne!(a.id, Frame::new(geo(10, 3, Some((0, 0))), "one\ntwo\nthree").id, "the cursor counts");
        let m = b.message(Some(&a));
        assert!(!m.full);
        assert_eq!(m.lines, vec![(1, Arc::from("TWO"))]);
        assert_eq!(b.message(None).lines.len(), 3);
        let wider = Frame::new(geo(20, 3, None), "one\nTWO\nthree");
        let m = wider.message(Some(&b));
        assert!(m.full);
        assert_eq!(m.lines.len(), 3);
    }
}
