//! What the web view shows of a session's text, with its secrets hidden
//! as the session's replies hide them: the same redactor, the same
//! placeholders (the session's table), and the same switches
//! (`DOCENT_TERMINAL_MCP_REDACT=0` for the server, `redact=false` for one
//! session). A person watching may well be allowed to see a secret, but a
//! page of the view is reached by a link, and a link travels; so the view
//! hides by default.

use crate::tools::Terminal;

/// Hides the secrets of one session.
#[derive(Clone)]
pub struct Hide {
    terminal: Terminal,
    name: String,
}

impl Hide {
    /// For session `name` of `terminal`.
    pub fn new(terminal: &Terminal, name: &str) -> Hide {
        Hide { terminal: terminal.clone(), name: name.to_string() }
    }

    /// `text` with its secrets hidden. A captured screen's colour escapes
    /// may stand inside a secret: they are looked through, and the ones
    /// inside a secret go with it.
    pub fn text(&self, text: &str) -> String {
        self.terminal.redacted(Some(&self.name), text)
    }

    /// A screen `cols` wide as `capture-pane -e -p` gives it, with its
    /// secrets hidden, a secret that wraps from one row into the next
    /// included; as many rows as before.
    pub fn screen(&self, capture: &str, cols: u32) -> String {
        let rows: Vec<&str> = capture.split('\n').collect();
        self.terminal.redacted_screen(&self.name, &rows, cols).join("\n")
    }

    /// `lines` (in order, as one text, so that a key over several of them
    /// is seen whole) with their secrets hidden; as many lines as before.
    pub fn lines(&self, lines: Vec<String>) -> Vec<String> {
        if lines.is_empty() {
            return lines;
        }
        let joined = lines.join("\n");
        let hidden = self.text(&joined);
        if hidden == joined {
            return lines;
        }
        let out: Vec<String> = hidden.split('\n').map(str::to_string).collect();
        // The redactor keeps the lines; should it ever not, hide each alone.
        match out.len() == lines.len() {
            true => out,
            false => lines.iter().map(|l| self.text(l)).collect(),
        }
    }
}
