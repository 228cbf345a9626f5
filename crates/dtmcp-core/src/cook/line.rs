//! The unfinished line as a row of screen cells, and the edits a terminal
//! makes to such a row.
//!
//! A cell holds one character of width 1 or 2; a wide character's second
//! cell holds [`WIDE_TAIL`]. Zero-width characters (combining accents, ZWJ,
//! variation selectors) ride on the cell before the cursor. Cells past the
//! end of the row are blank: erasing to the right truncates the row, and
//! moving the cursor past the end creates nothing until something is
//! printed there.
//!
//! Output lines never wrap here: a line is what a program printed between
//! line feeds, however wide. The line a shell's line editor draws is the
//! exception, once the shell said how wide its terminal is (see
//! [`LineBuf::wrap_at`]): an editor that reaches the right margin goes on
//! in the next screen row and moves between its rows with carriage
//! returns, cursor up and line feeds, so those are read as moves between
//! the rows of one line, and the line is its rows one after another.
//!
//! The common case, printing ASCII at the end of the row, is one push onto
//! a `Vec` of 12-byte cells; zero-width characters live in one side buffer
//! per line, so nothing allocates per character.

use unicode_width::UnicodeWidthChar;

/// How far past the end of the row cursor movement, tabs, inserted blanks
/// and a kept column after a line feed may reach.
///
/// A terminal bounds all of these by its width; a row without a width would
/// let `ESC [ 65535 C x` turn nine bytes into 64 KiB of blanks, line after
/// line. 4096 columns is wider than any real pane, so only hostile or
/// broken output notices the limit. Printed text itself is never limited.
pub(super) const BLANK_REACH: usize = 4096;

/// The content of the second cell of a wide character. NUL never reaches a
/// cell otherwise, because control characters are dropped before printing.
const WIDE_TAIL: char = '\0';

/// The side buffer of zero-width characters is first compacted at this
/// size; see [`LineBuf::compact_marks`].
const MARKS_COMPACT_MIN: usize = 4096;

/// Tab stops are every eight columns, as on a freshly reset terminal.
const TAB_WIDTH: usize = 8;

/// One screen cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cell {
    /// The character drawn here, a blank, or [`WIDE_TAIL`].
    ch: char,
    /// Where this cell's zero-width characters start in `LineBuf::marks`.
    mark_start: u32,
    /// How many zero-width characters this cell carries.
    mark_len: u32,
}

impl Cell {
    const BLANK: Cell = Cell::new(' ');
    const TAIL: Cell = Cell::new(WIDE_TAIL);

    const fn new(ch: char) -> Cell {
        Cell { ch, mark_start: 0, mark_len: 0 }
    }

    fn is_tail(self) -> bool {
        self.ch == WIDE_TAIL
    }

    fn is_blank(self) -> bool {
        self.ch == ' ' && self.mark_len == 0
    }

    fn marks(self) -> std::ops::Range<usize> {
        let start = self.mark_start as usize;
        start..start + self.mark_len as usize
    }
}

/// Which part of the row an erase in line (`CSI K`) clears.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum EraseLine {
    /// From the cursor to the end, the cursor's cell included.
    Right,
    /// From the start to the cursor, the cursor's cell included.
    Left,
    /// The whole row.
    All,
}

impl EraseLine {
    /// The mode `CSI n K` selects; other values of `n` mean nothing to a row.
    pub(super) fn from_param(n: u16) -> Option<EraseLine> {
        match n {
            0 => Some(EraseLine::Right),
            1 => Some(EraseLine::Left),
            2 => Some(EraseLine::All),
            _ => None,
        }
    }
}

/// The row being drawn and the cursor on it. It lives as long as the
/// cooker; `finish` hands out the text and empties it for the next line,
/// keeping its allocations.
#[derive(Debug)]
pub(super) struct LineBuf {
    /// The row's cells from column 0; everything past the end is blank.
    cells: Vec<Cell>,
    /// The zero-width characters of all cells, back to back; cells refer to
    /// ranges of it. Overwritten cells leave their marks behind until the
    /// line is finished.
    marks: Vec<char>,
    /// The cursor column in cells, counted from 0; it may lie past the end
    /// of `cells`, but never past [`LineBuf::reach`].
    col: usize,
    /// Whether a character other than ASCII was printed on this line. Until
    /// one is, every cell holds one ASCII byte of text, and the text is a
    /// plain copy of the cells; that keeps committing a line cheap.
    non_ascii: bool,
    /// The size of `marks` at which the marks of overwritten cells are
    /// next dropped from it.
    marks_compact_at: usize,
    /// The width of the terminal the line wraps on, when a shell's line
    /// editor draws it (0: it does not wrap). Cell `i` is then column
    /// `i % wrap` of the line's screen row `i / wrap`.
    wrap: usize,
    /// Whether the last edit printed: a cursor just past a row's last
    /// column is then still on that row, as a terminal holds a wrap
    /// pending until the next character comes.
    printed: bool,
    /// The lowest screen row of a wrapping line that anything was drawn
    /// on or the cursor went to (rows erased since count too, because
    /// the editor still counts them as its own).
    reached: usize,
}

impl Default for LineBuf {
    fn default() -> Self {
        LineBuf {
            cells: Vec::new(),
            marks: Vec::new(),
            col: 0,
            non_ascii: false,
            marks_compact_at: MARKS_COMPACT_MIN,
            wrap: 0,
            printed: false,
            reached: 0,
        }
    }
}

impl LineBuf {
    /// The cursor column, in cells.
    pub(super) fn col(&self) -> usize {
        self.col
    }

    /// Whether nothing at all is drawn on the row.
    pub(super) fn is_empty(&self) -> bool {
        self.cells.is_empty() && self.marks.is_empty()
    }

    /// Whether the row is as a line feed leaves it at column 0: nothing
    /// drawn, no marks, the cursor at the start. A line printed on such a
    /// row and finished reads as its own trimmed text, and leaves the row
    /// fresh again.
    pub(super) fn is_fresh(&self) -> bool {
        self.is_empty()
            && self.col == 0
            && !self.non_ascii
            && self.marks_compact_at == MARKS_COMPACT_MIN
            && self.wrap == 0
    }

    /// From now until the line ends, the line wraps at `width` columns:
    /// a shell's line editor draws it on a terminal that wide. Widths
    /// below 2 or beyond [`BLANK_REACH`] are not believed.
    pub(super) fn wrap_at(&mut self, width: usize) {
        if (2..=BLANK_REACH).contains(&width) {
            self.wrap = width;
        }
    }

    /// The first cell of the screen row the cursor is on, in a wrapping
    /// line, and the cell the cursor stands on (one left of `col` while a
    /// wrap is pending); `None` in a line that does not wrap.
    fn row(&self) -> Option<(usize, usize)> {
        let w = self.wrap;
        if w == 0 {
            return None;
        }
        let at = match self.printed && self.col > 0 && self.col.is_multiple_of(w) {
            true => self.col - 1,
            false => self.col,
        };
        Some((at - at % w, at))
    }

    /// [`LineBuf::row`] for an edit at the cursor (erase, insert, delete),
    /// which moves nothing: a cursor held past a row's last column (a
    /// pending wrap) edits that row from past its end, as tmux does, and
    /// the wrap stays pending.
    fn edit_row(&self) -> Option<(usize, usize)> {
        self.row().map(|(start, _)| (start, self.col))
    }

    /// Whether the cursor's screen row is the last the wrapping line
    /// reaches (nothing drawn below it).
    fn on_last_row(&self, start: usize) -> bool {
        start + self.wrap >= self.cells.len()
    }

    /// The lowest screen row the wrapping line has reached, counting the
    /// rows drawn now.
    fn reached(&self) -> usize {
        self.reached.max(self.cells.len().saturating_sub(1) / self.wrap.max(1))
    }

    /// Whether the cursor of a wrapping line stands on a screen row below
    /// everything drawn (blanks do not count): the editor moved down off
    /// its line.
    pub(super) fn below_drawn(&self) -> bool {
        let drawn = self.cells.iter().rposition(|cell| !cell.is_blank()).map_or(0, |i| i + 1);
        self.row().is_some_and(|(start, _)| start >= drawn && start > 0)
    }

    /// Draws `c` at the cursor and moves past it. Control characters are
    /// dropped here too, because vte hands a C1 character that arrived
    /// split across feeds to `print` rather than `execute`, and DEL always.
    #[inline(always)]
    pub(super) fn print(&mut self, c: char) {
        self.printed = true;
        if (' '..='~').contains(&c) && self.col == self.cells.len() {
            self.cells.push(Cell::new(c));
            self.col += 1;
        } else {
            self.print_elsewhere(c);
        }
    }

    /// Prints a run of printable ASCII (`0x20..=0x7e`, checked by the
    /// caller), exactly as `print` would one character after another.
    pub(super) fn print_ascii(&mut self, run: &[u8]) {
        debug_assert!(run.iter().all(|b| (0x20..=0x7e).contains(b)));
        self.printed |= !run.is_empty();
        if self.col == self.cells.len() {
            self.cells.extend(run.iter().map(|&b| Cell::new(char::from(b))));
            self.col += run.len();
        } else {
            for &b in run {
                self.print(char::from(b));
            }
        }
    }

    /// `print` for everything but ASCII at the end of the row, kept out of
    /// line so that the common case stays small enough to inline.
    #[inline(never)]
    fn print_elsewhere(&mut self, c: char) {
        if c.is_control() {
            return;
        }
        self.non_ascii |= !c.is_ascii();
        match c.width() {
            Some(0) => self.attach(c),
            Some(1) => self.put(c, 1),
            Some(_) => self.put(c, 2),
            None => {}
        }
    }

    /// Writes a character of `width` cells at the cursor, blanking the other
    /// half of any wide character it partly covers.
    fn put(&mut self, c: char, width: usize) {
        // A wide character that does not fit in the row's last column goes
        // to the next row, as a terminal puts it.
        if width == 2 && self.wrap > 0 && self.col % self.wrap == self.wrap - 1 {
            self.col += 1;
        }
        let start = self.col;
        let end = start + width;
        self.pad_to(end);
        self.split_wide_at(start);
        self.split_wide_at(end);
        self.cells[start] = Cell::new(c);
        if width == 2 {
            self.cells[start + 1] = Cell::TAIL;
        }
        self.col = end;
    }

    /// Attaches a zero-width character to the cell left of the cursor (the
    /// head, if that is a wide character). At column 0 there is no such
    /// cell, and the character is dropped as a terminal drops it.
    fn attach(&mut self, mark: char) {
        let Some(mut i) = self.col.checked_sub(1) else {
            return;
        };
        self.pad_to(self.col);
        if self.cells[i].is_tail() && i > 0 {
            i -= 1;
        }
        self.push_mark(i, mark);
    }

    /// Appends `mark` to cell `i`'s marks. They usually end the side buffer
    /// already and simply grow; otherwise they are copied to its end first.
    fn push_mark(&mut self, i: usize, mark: char) {
        let cell = self.cells[i];
        let range = cell.marks();
        let in_place = cell.mark_len > 0 && range.end == self.marks.len();
        let start = if in_place { range.start } else { self.marks.len() };
        // Past 4 Gi marks on one line the input is not text; dropping the
        // mark beats a cell that points at the wrong place.
        let (Ok(mark_start), Ok(mark_len)) = (u32::try_from(start), u32::try_from(range.len() + 1)) else {
            return;
        };
        if !in_place {
            self.marks.extend_from_within(range);
        }
        // Compacting moves every cell's marks, so it may only happen once
        // this cell's marks are in place and counted.
        let compact = self.marks.len() >= self.marks_compact_at;
        self.marks.push(mark);
        self.cells[i] = Cell { ch: cell.ch, mark_start, mark_len };
        if compact {
            self.compact_marks();
        }
    }

    /// Rebuilds the side buffer from the marks cells still carry. Without
    /// this a line redrawn with `\r` for hours, never ended, would keep
    /// every mark it ever showed. The threshold doubles with what stays,
    /// so the copying costs O(1) per mark over time.
    fn compact_marks(&mut self) {
        let mut marks = Vec::new();
        for cell in &mut self.cells {
            let range = cell.marks();
            match u32::try_from(marks.len()) {
                Ok(start) if !range.is_empty() => {
                    marks.extend_from_slice(&self.marks[range]);
                    cell.mark_start = start;
                }
                _ => cell.mark_len = 0,
            }
        }
        self.marks = marks;
        self.marks_compact_at = (2 * self.marks.len()).max(MARKS_COMPACT_MIN);
    }

    /// Makes the row at least `len` cells long by appending blanks.
    fn pad_to(&mut self, len: usize) {
        if self.cells.len() < len {
            self.cells.resize(len, Cell::BLANK);
        }
    }

    /// Makes the boundary before cell `i` clean: if it cuts a wide
    /// character in two, both halves become blanks, as on a terminal.
    fn split_wide_at(&mut self, i: usize) {
        if i > 0 && self.cells.get(i).is_some_and(|cell| cell.is_tail()) {
            self.cells[i - 1] = Cell::BLANK;
            self.cells[i] = Cell::BLANK;
        }
    }

    /// The furthest column the cursor may be moved to: the end of the row,
    /// or [`BLANK_REACH`] if the row is shorter.
    fn reach(&self) -> usize {
        self.cells.len().max(BLANK_REACH)
    }

    /// Carriage return: back to column 0 (of the cursor's screen row, in
    /// a wrapping line).
    pub(super) fn carriage_return(&mut self) {
        self.col = self.row().map_or(0, |(start, _)| start);
        self.printed = false;
    }

    /// Backspace: one cell left, stopping at column 0.
    pub(super) fn backspace(&mut self) {
        self.back(1);
    }

    /// Horizontal tab: on to the next tab stop, writing nothing.
    pub(super) fn tab(&mut self) {
        let (start, at) = self.row().unwrap_or((0, self.col));
        self.set_col(((at - start) / TAB_WIDTH + 1) * TAB_WIDTH);
    }

    /// Cursor forward (`CSI n C`).
    pub(super) fn forward(&mut self, n: usize) {
        let (start, at) = self.row().unwrap_or((0, self.col));
        self.set_col((at - start).saturating_add(n));
    }

    /// Cursor back (`CSI n D`), stopping at column 0.
    pub(super) fn back(&mut self, n: usize) {
        let (start, at) = self.row().unwrap_or((0, self.col));
        self.col = at.saturating_sub(n).max(start);
        self.printed = false;
    }

    /// Moves the cursor to column `col` (0-based) of its screen row (the
    /// line, if it does not wrap), within reach.
    pub(super) fn set_col(&mut self, col: usize) {
        self.col = match self.row() {
            Some((start, _)) => start + col.min(self.wrap - 1),
            None => col.min(self.reach()),
        };
        self.printed = false;
    }

    /// Cursor up `n` screen rows (`CSI n A`, reverse index), as far as the
    /// wrapping line's first row; a line that does not wrap has no rows.
    pub(super) fn up(&mut self, n: usize) {
        if let Some((start, at)) = self.row() {
            self.col = at - n.min(start / self.wrap) * self.wrap;
            self.printed = false;
        }
    }

    /// Cursor down `n` screen rows (`CSI n B`), as far as the wrapping
    /// line's last row.
    pub(super) fn down(&mut self, n: usize) {
        if let Some((start, at)) = self.row() {
            let below = self.reached().saturating_sub(start / self.wrap);
            self.col = at + n.min(below) * self.wrap;
            self.printed = false;
        }
    }

    /// A line feed within the line: in a wrapping line whose cursor is
    /// above the lowest row it reached, the cursor moves down a row and
    /// `true` says so; otherwise the line feed ends the line.
    ///
    /// A line editor moves down a row with a line feed, to redraw or
    /// erase a row of its line; the line feed that ends the line comes
    /// from its lowest row. A row the line reached and then erased still
    /// counts: the editor goes down to it to make sure it is blank. (When
    /// the line has shrunk to fewer rows, the line feed of Enter may thus
    /// stop on such a row; the marker that follows ends the line, see
    /// [`LineBuf::below_drawn`].)
    pub(super) fn line_feed_within(&mut self) -> bool {
        match self.row() {
            Some((start, at)) if start / self.wrap < self.reached() && at + self.wrap <= self.reach() => {
                self.col = at + self.wrap;
                self.printed = false;
                true
            }
            _ => false,
        }
    }

    /// Erase in line (`CSI K`). Erasing to the right truncates the row,
    /// which reads the same as blanks and keeps trimming cheap.
    pub(super) fn erase_line(&mut self, mode: EraseLine) {
        if let Some((start, at)) = self.edit_row() {
            // One screen row of a wrapping line; the rows below stay.
            let end = start + self.wrap;
            match (mode, self.on_last_row(start)) {
                (EraseLine::Right, true) => self.truncate(at),
                (EraseLine::Right, false) => self.blank(at, end),
                (EraseLine::Left, _) => self.blank(start, (at + 1).min(end)),
                (EraseLine::All, true) => self.truncate(start),
                (EraseLine::All, false) => self.blank(start, end),
            }
            return;
        }
        match mode {
            EraseLine::Right => self.truncate(self.col),
            EraseLine::Left => self.blank(0, self.col.saturating_add(1)),
            EraseLine::All => self.cells.clear(),
        }
    }

    /// Erase characters (`CSI n X`): blanks `n` cells from the cursor on.
    pub(super) fn erase_chars(&mut self, n: usize) {
        match self.edit_row() {
            Some((start, at)) => self.blank(at, at.saturating_add(n).min(start + self.wrap)),
            None => self.blank(self.col, self.col.saturating_add(n)),
        }
    }

    /// Blanks the cells from `start` up to `end`, as far as they exist.
    fn blank(&mut self, start: usize, end: usize) {
        let end = end.min(self.cells.len());
        if start >= end {
            return;
        }
        self.split_wide_at(start);
        self.split_wide_at(end);
        self.cells[start..end].fill(Cell::BLANK);
    }

    /// Delete characters (`CSI n P`): removes `n` cells at the cursor and
    /// shifts the rest of the row left.
    pub(super) fn delete_chars(&mut self, n: usize) {
        if let Some((row, at)) = self.edit_row().filter(|&(row, _)| !self.on_last_row(row)) {
            // Within the screen row; blanks come in at its right margin.
            let end = row + self.wrap;
            let n = n.min(end - at);
            self.split_wide_at(at);
            self.split_wide_at(at + n);
            self.cells[at..end].rotate_left(n);
            self.cells[end - n..end].fill(Cell::BLANK);
            return;
        }
        let start = self.col;
        let end = start.saturating_add(n).min(self.cells.len());
        if start >= end {
            return;
        }
        if self.wrap > 0 {
            self.reached = self.reached();
        }
        self.split_wide_at(start);
        self.split_wide_at(end);
        self.cells.drain(start..end);
    }

    /// Insert characters (`CSI n @`): shifts the row right of the cursor by
    /// `n` blanks. Past the end of the row there is nothing to shift. Cells
    /// pushed beyond reach fall off, as they fall off a terminal's margin.
    pub(super) fn insert_blanks(&mut self, n: usize) {
        let (start, limit) = match self.edit_row() {
            Some((row, at)) => (at, row + self.wrap),
            None => (self.col, self.reach()),
        };
        if start >= self.cells.len() {
            return;
        }
        if limit < self.cells.len() {
            // Within a screen row above the last: what is pushed past its
            // right margin falls off, the rows below stay.
            let n = n.min(limit - start);
            self.split_wide_at(start);
            self.split_wide_at(limit);
            self.cells[start..limit].rotate_right(n);
            self.cells[start..start + n].fill(Cell::BLANK);
            return;
        }
        let n = n.min(limit - start);
        self.split_wide_at(start);
        self.cells.splice(start..start, std::iter::repeat_n(Cell::BLANK, n));
        self.truncate(limit);
    }

    /// Cuts the row to `len` cells, blanking a wide character cut in two.
    fn truncate(&mut self, len: usize) {
        if self.wrap > 0 {
            self.reached = self.reached();
        }
        if len < self.cells.len() {
            self.split_wide_at(len);
            self.cells.truncate(len);
        }
    }

    /// Ends the line: returns its text and empties the row. The cursor
    /// keeps its column, as a bare line feed keeps it on a terminal.
    pub(super) fn finish(&mut self) -> String {
        self.finish_into(String::new())
    }

    /// `finish`, writing the text into `text` (emptied first), so that a
    /// caller recycling strings spares an allocation per line.
    pub(super) fn finish_into(&mut self, mut text: String) -> String {
        text.clear();
        self.write_text(&mut text);
        self.cells.clear();
        self.marks.clear();
        self.marks_compact_at = MARKS_COMPACT_MIN;
        self.non_ascii = false;
        if let Some((start, at)) = self.row() {
            // The cursor keeps its column on the screen, not in the line.
            self.col = at - start;
        }
        self.col = self.col.min(BLANK_REACH);
        self.wrap = 0;
        self.printed = false;
        self.reached = 0;
        text
    }

    /// The row's text, trailing blanks trimmed.
    pub(super) fn text(&self) -> String {
        let mut text = String::new();
        self.write_text(&mut text);
        text
    }

    /// Appends the row's text, trailing blanks trimmed, to `text`.
    fn write_text(&self, text: &mut String) {
        let end = self.cells.iter().rposition(|cell| !cell.is_blank()).map_or(0, |i| i + 1);
        text.reserve(end);
        if !self.non_ascii {
            // Every cell holds one ASCII character: a plain copy, checked
            // by `from_utf8` at memory speed, not pushed char by char.
            // The string's own buffer is reused, so nothing allocates.
            let mut bytes = std::mem::take(text).into_bytes();
            bytes.extend(self.cells[..end].iter().map(|cell| cell.ch as u8));
            // All ASCII, so this never falls back; the fallback only
            // spares the code a panic path.
            *text = String::from_utf8(bytes).unwrap_or_else(|err| String::from_utf8_lossy(err.as_bytes()).into_owned());
            return;
        }
        for &cell in &self.cells[..end] {
            if cell.is_tail() {
                continue;
            }
            text.push(cell.ch);
            if cell.mark_len > 0 {
                text.extend(&self.marks[cell.marks()]);
            }
        }
    }

    /// Heap bytes the row holds.
    #[cfg(test)]
    pub(super) fn held_bytes(&self) -> usize {
        self.cells.capacity() * std::mem::size_of::<Cell>() + self.marks.capacity() * std::mem::size_of::<char>()
    }

    /// How many bytes of the untrimmed text lie left of the cursor: a wide
    /// character counts once, and blanks past the end count as spaces.
    pub(super) fn text_len(&self) -> usize {
        let end = self.col.min(self.cells.len());
        let drawn: usize = self.cells[..end].iter().map(|&cell| self.cell_text_len(cell)).sum();
        drawn + (self.col - end)
    }

    fn cell_text_len(&self, cell: Cell) -> usize {
        if cell.is_tail() {
            return 0;
        }
        let marks: usize = self.marks[cell.marks()].iter().map(|c| c.len_utf8()).sum();
        cell.ch.len_utf8() + marks
    }
}
