//! Terminal answers nobody read.
//!
//! Some escape sequences are questions to the terminal: "what are you"
//! (device attributes), "where is the cursor", "which version", "what
//! colour is the background". tmux answers them by writing the answer into
//! the pane's input, as if typed. A program that asked reads its answer; but
//! when the question was only bytes in the output (`cat` of a binary file,
//! random data, a test printing escapes), nothing reads it before the
//! command ends, and the shell's line editor gets it: it drops the escape
//! and what it knows of the sequence and inserts the rest at the next
//! prompt (`1;2c`, `;80;24t`, `R`).
//!
//! That text is nobody's: no person and no agent typed it. The cooker
//! reports each question it sees ([`Queries`]), the region tracker keeps
//! which ones the output since a prompt asked ([`Answers`]), and a run that
//! finds text at the prompt asks [`Answers::explain`] whether it can be such
//! a remnant before it treats the text as someone's unsubmitted line.
//!
//! The judgement is deliberately narrow: the output since the previous
//! prompt must have asked, and every character of the text must be one the
//! answers to those questions contain, with the mark of at least one of
//! them (its final character). A person's half-typed command does not pass.

use serde::{Deserialize, Serialize};

/// A set of kinds of question, as bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Queries(u8);

impl Queries {
    /// Device attributes, primary or secondary (`CSI c`, `CSI > c`):
    /// answered `CSI ? 1 ; 2 c`, `CSI > 84 ; 0 ; 0 c`.
    pub const DEVICE: Queries = Queries(1);
    /// Device status and cursor position (`CSI 5 n`, `CSI 6 n`): answered
    /// `CSI 0 n`, `CSI row ; col R`.
    pub const STATUS: Queries = Queries(1 << 1);
    /// The terminal's name and version (`CSI > q`): answered
    /// `DCS > | tmux 3.3a ST`.
    pub const VERSION: Queries = Queries(1 << 2);
    /// Window and cell sizes (`CSI 14 t`, `CSI 16 t`, `CSI 18 t`):
    /// answered `CSI 4 ; h ; w t` and the like.
    pub const WINDOW: Queries = Queries(1 << 3);
    /// Colours (`OSC 4 ; n ; ?`, `OSC 10 ; ?`, `OSC 11 ; ?`, ...):
    /// answered `OSC 11 ; rgb:0000/0000/0000 ST`.
    pub const COLOUR: Queries = Queries(1 << 4);
    /// Modes and keyboard flags, which newer tmux answers (`CSI ? 2004 $ p`,
    /// `CSI ? u`): answered `CSI ? 2004 ; 2 $ y`, `CSI ? 0 u`.
    pub const MODE: Queries = Queries(1 << 5);

    /// No question.
    pub const NONE: Queries = Queries(0);

    /// Whether no question is in the set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether `other`'s questions are all in the set.
    pub fn contains(self, other: Queries) -> bool {
        self.0 & other.0 == other.0 && !other.is_empty()
    }

    /// Both sets together.
    #[must_use]
    pub fn with(self, other: Queries) -> Queries {
        Queries(self.0 | other.0)
    }

    /// Whether a CSI sequence ending in `action` can be a question at all:
    /// a cheap test before [`Queries::of_csi`], for the cooker's hot path.
    #[inline]
    pub fn csi_may_ask(action: char) -> bool {
        matches!(action, 'c' | 'n' | 'p' | 'q' | 't' | 'u')
    }

    /// The question a CSI sequence asks, if it asks one tmux answers:
    /// `first` is its first parameter (0 when absent), `private` its
    /// private marker or intermediates, `action` its final character.
    pub fn of_csi(first: u16, private: &[u8], action: char) -> Queries {
        match (private, action, first) {
            (b"" | b">", 'c', 0) => Queries::DEVICE,
            (b"", 'n', 5 | 6) | (b"?", 'n', _) => Queries::STATUS,
            (b">", 'q', 0) => Queries::VERSION,
            (b"", 't', 14 | 16 | 18) => Queries::WINDOW,
            (b"$" | b"?$", 'p', _) | (b"?", 'u', 0) => Queries::MODE,
            _ => Queries::NONE,
        }
    }

    /// The question an OSC sequence asks, if it asks one: a colour
    /// (`4`, `10` to `19`, `104`...) whose value is given as `?`.
    pub fn of_osc(params: &[&[u8]]) -> Queries {
        let Some((&code, rest)) = params.split_first() else { return Queries::NONE };
        let colour = matches!(code, b"4" | b"10" | b"11" | b"12" | b"13" | b"14" | b"15" | b"16" | b"17" | b"19");
        match colour && rest.contains(&&b"?"[..]) {
            true => Queries::COLOUR,
            false => Queries::NONE,
        }
    }

    /// Each question in the set with what its answer may leave at a
    /// prompt: the characters it may contain (besides digits, which all
    /// have), and the marks of which at least one must be there.
    fn each(self) -> impl Iterator<Item = (&'static str, &'static [&'static str])> {
        const ALL: [(Queries, &str, &[&str]); 6] = [
            (Queries::DEVICE, "[?>;c", &["c"]),
            (Queries::STATUS, "[?;nR", &["n", "R"]),
            // The version after `tmux` is digits, dots and letters; the
            // line editor may turn `ESC P` into `:` and show `ESC \` as `^[\`.
            (Queries::VERSION, "P>|: .-^[\\abcdefghijklmnopqrstuvwxyz", &["tmux"]),
            (Queries::WINDOW, "[;t", &["t"]),
            (Queries::COLOUR, "];:/?^[\\rgbabcdef", &["rgb"]),
            (Queries::MODE, "[?;$yu", &["y", "u"]),
        ];
        ALL.into_iter().filter(move |(q, ..)| self.contains(*q)).map(|(_, chars, marks)| (chars, marks))
    }
}

/// The longest remnant taken for answers; anything longer is someone's.
const MAX_REMNANT: usize = 96;

/// Which questions the output asked since a prompt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answers {
    /// The count of primary prompts shown when they were asked.
    pub prompts: u64,
    /// What was asked.
    pub queries: Queries,
}

impl Answers {
    /// Notes `queries` asked while `prompts` prompts had been shown.
    pub fn asked(&mut self, queries: Queries, prompts: u64) {
        if queries.is_empty() {
            return;
        }
        if self.prompts != prompts {
            *self = Answers { prompts, queries: Queries::NONE };
        }
        self.queries = self.queries.with(queries);
    }

    /// Whether, when `prompts` prompts have been shown, the output since
    /// the previous prompt asked a question: its answer may be on its way
    /// to the prompt, or there already.
    pub fn due(&self, prompts: u64) -> bool {
        !self.queries.is_empty() && self.prompts + 1 >= prompts && self.prompts <= prompts
    }

    /// Whether `text`, found typed at the prompt when `prompts` prompts
    /// had been shown, can be what the line editor left of the answers to
    /// questions the output asked since the previous prompt.
    pub fn explain(&self, text: &str, prompts: u64) -> bool {
        let text = text.trim();
        if !self.due(prompts) || text.is_empty() || text.len() > MAX_REMNANT || text.contains('\n') {
            return false;
        }
        let allowed = |c: char| c.is_ascii_digit() || self.queries.each().any(|(chars, _)| chars.contains(c));
        let marked = self.queries.each().any(|(_, marks)| marks.iter().any(|m| text.contains(m)));
        marked && text.chars().all(allowed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(queries: Queries) -> Answers {
        let mut a = Answers::default();
        a.asked(queries, 4);
        a
    }

    #[test]
    fn the_questions_tmux_answers_are_known_by_their_sequence() {
        assert_eq!(Queries::of_csi(0, b"", 'c'), Queries::DEVICE);
        assert_eq!(Queries::of_csi(0, b">", 'c'), Queries::DEVICE);
        assert_eq!(Queries::of_csi(6, b"", 'n'), Queries::STATUS);
        assert_eq!(Queries::of_csi(5, b"", 'n'), Queries::STATUS);
        assert_eq!(Queries::of_csi(0, b">", 'q'), Queries::VERSION);
        assert_eq!(Queries::of_csi(18, b"", 't'), Queries::WINDOW);
        assert_eq!(Queries::of_csi(996, b"?", 'n'), Queries::STATUS);
        assert_eq!(Queries::of_csi(2004, b"?$", 'p'), Queries::MODE);
        assert_eq!(Queries::of_csi(0, b"?", 'u'), Queries::MODE);
        // Not questions: a colour, a mode, a window move.
        assert!(Queries::of_csi(31, b"", 'm').is_empty());
        assert!(Queries::of_csi(25, b"?", 'h').is_empty());
        assert!(Queries::of_csi(3, b"", 't').is_empty());
        assert!(Queries::of_csi(1, b"", 'c').is_empty());
        for action in ['c', 'n', 'p', 'q', 't', 'u'] {
            assert!(Queries::csi_may_ask(action));
        }
        assert!(!Queries::csi_may_ask('m') && !Queries::csi_may_ask('H'));
        assert_eq!(Queries::of_osc(&[b"11", b"?"]), Queries::COLOUR);
        assert_eq!(Queries::of_osc(&[b"4", b"1", b"?"]), Queries::COLOUR);
        assert!(Queries::of_osc(&[b"11", b"rgb:0000/0000/0000"]).is_empty());
        assert!(Queries::of_osc(&[b"0", b"?"]).is_empty());
        assert!(Queries::of_osc(&[]).is_empty());
    }

    #[test]
    fn what_the_line_editor_leaves_of_an_answer_is_explained() {
        // Seen with bash 5.2 in tmux 3.3a.
        assert!(asked(Queries::DEVICE).explain("1;2c", 5));
        assert!(asked(Queries::DEVICE).explain("1;2c84;0;0c", 5));
        assert!(asked(Queries::DEVICE.with(Queries::STATUS)).explain("1;2c84;0;0cR", 5));
        assert!(asked(Queries::STATUS).explain("R", 5));
        assert!(asked(Queries::STATUS).explain("n", 5));
        assert!(asked(Queries::WINDOW.with(Queries::STATUS)).explain(";80;24tn", 5));
        assert!(asked(Queries::VERSION).explain(":>|tmux 3.3a^[\\", 5));
        // Answers of newer tmux, as fish shows them (it drops only ESC).
        assert!(asked(Queries::STATUS).explain("[?997;1n", 5));
        assert!(asked(Queries::MODE).explain("[?2004;2$y[?0u", 5));
        // At the prompt where it was asked, too (a prompt that asks).
        assert!(asked(Queries::DEVICE).explain("1;2c", 4));
    }

    #[test]
    fn a_persons_text_or_an_old_question_is_not_explained() {
        // Nothing asked, or asked before the command before this prompt.
        assert!(!Answers::default().explain("1;2c", 5));
        assert!(!asked(Queries::DEVICE).explain("1;2c", 6));
        // Text that no answer holds, or without an answer's mark.
        assert!(!asked(Queries::DEVICE).explain("ls", 5));
        assert!(!asked(Queries::DEVICE).explain("make -j4", 5));
        assert!(!asked(Queries::DEVICE).explain("12;4", 5));
        assert!(!asked(Queries::STATUS).explain("1;2c", 5));
        assert!(!asked(Queries::VERSION).explain("make", 5));
        assert!(!asked(Queries::DEVICE).explain("", 5));
        assert!(!asked(Queries::DEVICE).explain("1;2c\n1;2c", 5));
        assert!(!asked(Queries::DEVICE).explain(&"1;2c".repeat(40), 5));
    }

    #[test]
    fn questions_are_kept_per_prompt() {
        let mut a = Answers::default();
        a.asked(Queries::DEVICE, 3);
        a.asked(Queries::STATUS, 3);
        assert!(a.queries.contains(Queries::DEVICE) && a.queries.contains(Queries::STATUS));
        a.asked(Queries::NONE, 4);
        assert_eq!(a.prompts, 3, "no question changes nothing");
        a.asked(Queries::WINDOW, 4);
        assert_eq!(a, Answers { prompts: 4, queries: Queries::WINDOW });
    }
}
