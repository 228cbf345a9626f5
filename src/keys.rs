//! Key names as a model writes them (`ctrl+c`, `page down`, `q`), read into
//! what tmux's `send-keys` understands.
//!
//! Pure: no tmux, no terminal. The `send` tool parses every name before it
//! types anything, so one malformed name refuses the whole call.
//!
//! # What is accepted
//!
//! - Named keys, case-insensitive, with spaces, `_` and `-` inside a name
//!   ignored (`PageUp`, `page up`, `page_down` are all fine): enter, tab,
//!   escape, space, backspace, delete, insert, up, down, left, right, home,
//!   end, pageup, pagedown, f1 to f12; also tmux's own spellings (`BSpace`,
//!   `DC`, `PPage`, `NPage`, `BTab`).
//! - One character, typed as it is: `q`, `Q`, `:`, `/`, `é`.
//! - Modifiers before a key, joined by `+` or `-`: `ctrl+c`, `Ctrl-C`,
//!   `C-c`, `^c`, `alt+x`, `M-x`, `ctrl+alt+d`, `shift+tab`, `ctrl+left`.
//!   Ctrl takes a letter, one of `@ [ \ ] ^ _ ?`, space or a named key; the
//!   letter's case does not matter (a terminal cannot tell them apart).
//!   Alt keeps the character's case (`alt+X` is not `alt+x`). Shift on a
//!   letter is its capital; on a named key it is tmux's `S-` form.

pub mod typing;

use std::fmt;

/// One key press, ready for tmux.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Key {
    /// A key tmux knows by name, in tmux's spelling (`Enter`, `C-c`, `M-x`,
    /// `PPage`): sent with `send-keys NAME`.
    Named(String),
    /// One printable character, typed literally (`send-keys -l`), so that
    /// tmux never reads it as a key name of its own.
    Char(char),
}

impl Key {
    /// Whether this is ctrl+c, after which a reply says what still runs.
    pub fn is_interrupt(&self) -> bool {
        matches!(self, Key::Named(n) if n == "C-c")
    }
}

/// What a line editor (readline, zle) waits for after a key pressed last at
/// a shell's prompt: a line typed next would not be taken as typed text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pending {
    /// The first key of a sequence (Escape, ctrl+x): the next key makes a
    /// binding with it (Escape then `g` is alt+g).
    Prefix,
    /// An incremental history search (ctrl+r, ctrl+s): typed text is
    /// searched for, and Enter runs the line found.
    Search,
    /// A count for the next key (alt+3): it would be repeated.
    Count,
}

impl Pending {
    /// What it means for a line typed next, in a few words.
    pub fn words(self) -> &'static str {
        match self {
            Pending::Prefix => {
                "waiting for the rest of a key sequence (Escape then g is alt+g), or in command mode with vi keys"
            }
            Pending::Search => "in a history search (text typed next is searched for; Enter runs the line found)",
            Pending::Count => "holding a count for the next key (it would be repeated)",
        }
    }
}

impl Key {
    /// What the shell's line editor waits for after this key, when it is
    /// the last pressed at its prompt (emacs keys, as bash and zsh have by
    /// default).
    pub fn leaves_pending(&self) -> Option<Pending> {
        let Key::Named(name) = self else { return None };
        match name.as_str() {
            "Escape" | "C-[" | "C-x" => Some(Pending::Prefix),
            "C-r" | "C-s" => Some(Pending::Search),
            _ => name
                .strip_prefix("M-")
                .filter(|rest| rest.len() == 1 && rest.chars().all(|c| c.is_ascii_digit() || c == '-'))
                .map(|_| Pending::Count),
        }
    }

    /// Whether this key ends whatever [`Key::leaves_pending`] began: Enter
    /// submits, ctrl+g and ctrl+c give up.
    pub fn ends_pending(&self) -> bool {
        matches!(self, Key::Named(n) if matches!(n.as_str(), "Enter" | "C-g" | "C-c" | "C-m" | "C-j"))
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Named(n) => f.write_str(n),
            Key::Char(c) => write!(f, "{c}"),
        }
    }
}

/// A key name that could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("key name {name:?} is not understood{}; {}", why(.reason), ACCEPTED)]
pub struct KeyError {
    /// The name as given.
    pub name: String,
    /// What in particular is wrong, when more can be said.
    pub reason: Option<&'static str>,
}

fn why(reason: &Option<&'static str>) -> String {
    reason.map(|r| format!(" ({r})")).unwrap_or_default()
}

/// What an error lists as accepted.
pub const ACCEPTED: &str = "use ctrl+<letter> (ctrl+c, ctrl+d), alt+<key>, shift+tab, enter, tab, escape, space, \
backspace, delete, insert, up, down, left, right, home, end, pageup, pagedown, f1-f12, or one character such as \
q or : (tmux's C-c and M-x forms work too)";

/// Named keys: a normalised name (lowercase, no spaces, `_` or `-`) and
/// tmux's name for it.
const NAMED: &[(&str, &str)] = &[
    ("enter", "Enter"),
    ("return", "Enter"),
    ("tab", "Tab"),
    ("btab", "BTab"),
    ("escape", "Escape"),
    ("esc", "Escape"),
    ("space", "Space"),
    ("backspace", "BSpace"),
    ("bspace", "BSpace"),
    ("delete", "DC"),
    ("del", "DC"),
    ("dc", "DC"),
    ("insert", "IC"),
    ("ins", "IC"),
    ("ic", "IC"),
    ("up", "Up"),
    ("down", "Down"),
    ("left", "Left"),
    ("right", "Right"),
    ("home", "Home"),
    ("end", "End"),
    ("pageup", "PPage"),
    ("pgup", "PPage"),
    ("ppage", "PPage"),
    ("pagedown", "NPage"),
    ("pgdn", "NPage"),
    ("pgdown", "NPage"),
    ("npage", "NPage"),
];

/// Modifier words (lowercase) and which modifier each is.
const MODIFIERS: &[(&str, Modifier)] = &[
    ("ctrl", Modifier::Ctrl),
    ("control", Modifier::Ctrl),
    ("c", Modifier::Ctrl),
    ("alt", Modifier::Alt),
    ("meta", Modifier::Alt),
    ("opt", Modifier::Alt),
    ("option", Modifier::Alt),
    ("m", Modifier::Alt),
    ("shift", Modifier::Shift),
    ("s", Modifier::Shift),
];

/// Characters ctrl can combine with besides letters.
const CTRL_PUNCTUATION: &str = "@[\\]^_?";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Modifier {
    Ctrl,
    Alt,
    Shift,
}

/// The modifiers held for one key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Modifiers {
    ctrl: bool,
    alt: bool,
    shift: bool,
}

impl Modifiers {
    fn add(&mut self, m: Modifier) {
        match m {
            Modifier::Ctrl => self.ctrl = true,
            Modifier::Alt => self.alt = true,
            Modifier::Shift => self.shift = true,
        }
    }

    fn none(self) -> bool {
        self == Modifiers::default()
    }

    /// tmux's prefix for them: `C-M-S-`.
    fn prefix(self) -> String {
        let mut p = String::new();
        for (on, s) in [(self.ctrl, "C-"), (self.alt, "M-"), (self.shift, "S-")] {
            if on {
                p.push_str(s);
            }
        }
        p
    }
}

/// The key without its modifiers.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Base {
    /// tmux's name for a named key.
    Named(&'static str),
    /// A printable character.
    Char(char),
}

/// Reads one key name.
pub fn parse(name: &str) -> Result<Key, KeyError> {
    let fail = |reason| KeyError { name: name.to_string(), reason };
    let (mods, rest) = split_modifiers(name);
    let base = base(rest).ok_or_else(|| fail(None))?;
    combine(mods, base).map_err(|r| fail(Some(r)))
}

/// Reads every name, or fails on the first that cannot be read.
pub fn parse_all<S: AsRef<str>>(names: &[S]) -> Result<Vec<Key>, KeyError> {
    names.iter().map(|n| parse(n.as_ref())).collect()
}

/// Takes modifier words off the front of `name` while a key remains after
/// them, so that `-`, `c` and `ctrl+` alone are not mistaken for modifiers.
fn split_modifiers(name: &str) -> (Modifiers, &str) {
    let mut mods = Modifiers::default();
    let mut rest = name;
    if let Some(after) = rest.strip_prefix('^')
        && after.chars().count() == 1
    {
        mods.ctrl = true;
        return (mods, after);
    }
    while let Some((m, after)) = split_one(rest) {
        mods.add(m);
        rest = after;
    }
    (mods, rest)
}

/// One modifier word and its `+` or `-` off the front of `s`, if a key follows.
fn split_one(s: &str) -> Option<(Modifier, &str)> {
    let sep = s.find(['+', '-'])?;
    let word = s[..sep].trim().to_ascii_lowercase();
    let after = s[sep + 1..].trim_start();
    let &(_, m) = MODIFIERS.iter().find(|(w, _)| *w == word)?;
    (!after.is_empty()).then_some((m, after))
}

/// The key that `s` names, without modifiers.
fn base(s: &str) -> Option<Base> {
    let mut chars = s.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        return match c {
            ' ' => Some(Base::Named("Space")),
            c if c.is_control() => None,
            c => Some(Base::Char(c)),
        };
    }
    let norm: String = s.chars().filter(|c| !matches!(c, ' ' | '_' | '-')).collect::<String>().to_lowercase();
    if let Some(&(_, tmux)) = NAMED.iter().find(|(n, _)| *n == norm) {
        return Some(Base::Named(tmux));
    }
    function_key(&norm).map(Base::Named)
}

/// `f1`..`f12` as tmux names them.
fn function_key(norm: &str) -> Option<&'static str> {
    const F: [&str; 12] = ["F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "F9", "F10", "F11", "F12"];
    let n: usize = norm.strip_prefix('f')?.parse().ok()?;
    F.get(n.checked_sub(1)?).copied()
}

/// Puts modifiers and key together in tmux's spelling.
fn combine(mods: Modifiers, base: Base) -> Result<Key, &'static str> {
    match base {
        Base::Named(n) if mods.none() => Ok(Key::Named(n.to_string())),
        Base::Named("Tab") if mods == (Modifiers { shift: true, ..Modifiers::default() }) => {
            Ok(Key::Named("BTab".to_string()))
        }
        Base::Named(n) => Ok(Key::Named(format!("{}{n}", mods.prefix()))),
        Base::Char(c) if mods.none() => Ok(Key::Char(c)),
        Base::Char(c) => combine_char(mods, c),
    }
}

fn combine_char(mut mods: Modifiers, mut c: char) -> Result<Key, &'static str> {
    if mods.shift {
        if !c.is_alphabetic() {
            return Err("shift+ takes a letter or a named key; type the shifted character itself");
        }
        c = c.to_uppercase().next().unwrap_or(c);
        mods.shift = false;
    }
    if mods.ctrl {
        if !(c.is_ascii_alphabetic() || CTRL_PUNCTUATION.contains(c)) {
            return Err("ctrl+ takes a letter, one of @[\\]^_?, space or a named key");
        }
        c = c.to_ascii_lowercase();
    }
    if mods.none() {
        return Ok(Key::Char(c));
    }
    Ok(Key::Named(format!("{}{c}", mods.prefix())))
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn named(n: &str) -> Key {
        Key::Named(n.to_string())
    }

    #[rstest]
    #[case::escape("escape", Some(Pending::Prefix))]
    #[case::ctrl_bracket("ctrl+[", Some(Pending::Prefix))]
    #[case::ctrl_x("ctrl+x", Some(Pending::Prefix))]
    #[case::reverse_search("ctrl+r", Some(Pending::Search))]
    #[case::forward_search("C-s", Some(Pending::Search))]
    #[case::count("alt+3", Some(Pending::Count))]
    #[case::negative_count("M--", Some(Pending::Count))]
    #[case::alt_letter("alt+b", None)]
    #[case::enter("enter", None)]
    #[case::letter("x", None)]
    #[case::ctrl_letter("ctrl+a", None)]
    fn keys_that_leave_a_line_editor_waiting(#[case] name: &str, #[case] pending: Option<Pending>) {
        assert_eq!(parse(name).map(|k| k.leaves_pending()), Ok(pending), "{name}");
    }

    #[rstest]
    #[case::enter("enter", true)]
    #[case::abort("ctrl+g", true)]
    #[case::interrupt("ctrl+c", true)]
    #[case::letter("a", false)]
    #[case::escape("escape", false)]
    fn keys_that_end_what_waits(#[case] name: &str, #[case] ends: bool) {
        assert_eq!(parse(name).map(|k| k.ends_pending()), Ok(ends), "{name}");
    }

    #[rstest]
    #[case::enter("enter", named("Enter"))]
    #[case::enter_any_case("ENTER", named("Enter"))]
    #[case::return_is_enter("Return", named("Enter"))]
    #[case::tab("tab", named("Tab"))]
    #[case::escape("escape", named("Escape"))]
    #[case::esc("Esc", named("Escape"))]
    #[case::arrows("up", named("Up"))]
    #[case::arrow_any_case("LEFT", named("Left"))]
    #[case::home("home", named("Home"))]
    #[case::end("End", named("End"))]
    #[case::page_up_one_word("pageup", named("PPage"))]
    #[case::page_up_with_space("page up", named("PPage"))]
    #[case::page_down_with_underscore("page_down", named("NPage"))]
    #[case::page_down_camel("PageDown", named("NPage"))]
    #[case::page_down_dashed("page-down", named("NPage"))]
    #[case::tmux_ppage("PPage", named("PPage"))]
    #[case::backspace("backspace", named("BSpace"))]
    #[case::delete("delete", named("DC"))]
    #[case::insert("insert", named("IC"))]
    #[case::f1("f1", named("F1"))]
    #[case::f12("F12", named("F12"))]
    #[case::space_word("space", named("Space"))]
    #[case::space_char(" ", named("Space"))]
    fn named_keys(#[case] name: &str, #[case] key: Key) {
        assert_eq!(parse(name), Ok(key));
    }

    #[rstest]
    #[case::letter("q", Key::Char('q'))]
    #[case::capital_keeps_case("G", Key::Char('G'))]
    #[case::colon(":", Key::Char(':'))]
    #[case::minus("-", Key::Char('-'))]
    #[case::plus("+", Key::Char('+'))]
    #[case::caret("^", Key::Char('^'))]
    #[case::lone_c("c", Key::Char('c'))]
    #[case::semicolon(";", Key::Char(';'))]
    #[case::non_ascii("é", Key::Char('é'))]
    fn single_characters_are_typed_as_they_are(#[case] name: &str, #[case] key: Key) {
        assert_eq!(parse(name), Ok(key));
    }

    #[rstest]
    #[case::ctrl_plus("ctrl+c", "C-c")]
    #[case::ctrl_any_case("Ctrl+C", "C-c")]
    #[case::ctrl_dash("ctrl-d", "C-d")]
    #[case::control_word("control+z", "C-z")]
    #[case::tmux_form("C-c", "C-c")]
    #[case::tmux_form_lower("c-x", "C-x")]
    #[case::caret_form("^C", "C-c")]
    #[case::ctrl_bracket("ctrl+[", "C-[")]
    #[case::ctrl_backslash("ctrl+\\", "C-\\")]
    #[case::ctrl_space("ctrl+space", "C-Space")]
    #[case::ctrl_arrow("ctrl+left", "C-Left")]
    #[case::alt("alt+x", "M-x")]
    #[case::alt_keeps_case("alt+X", "M-X")]
    #[case::meta_tmux_form("M-f", "M-f")]
    #[case::alt_colon("alt+:", "M-:")]
    #[case::alt_minus("alt+-", "M--")]
    #[case::ctrl_alt("ctrl+alt+d", "C-M-d")]
    #[case::shift_tab("shift+tab", "BTab")]
    #[case::shift_arrow("shift+up", "S-Up")]
    #[case::alt_enter("alt+enter", "M-Enter")]
    #[case::spaces_around_plus("ctrl + c", "C-c")]
    fn modified_keys(#[case] name: &str, #[case] tmux: &str) {
        assert_eq!(parse(name), Ok(named(tmux)));
    }

    #[test]
    fn shift_on_a_letter_is_its_capital() {
        assert_eq!(parse("shift+a"), Ok(Key::Char('A')));
        assert_eq!(parse("alt+shift+a"), Ok(named("M-A")));
    }

    #[rstest]
    #[case::unknown_word("bogus")]
    #[case::empty("")]
    #[case::modifier_alone("ctrl")]
    #[case::modifier_with_nothing_after("ctrl+")]
    #[case::ctrl_of_unknown("ctrl+bogus")]
    #[case::ctrl_of_digit("ctrl+1")]
    #[case::shift_of_digit("shift+1")]
    #[case::f0("f0")]
    #[case::f13("f13")]
    #[case::control_character("\u{3}")]
    #[case::escape_byte("\u{1b}")]
    #[case::two_letters("ab")]
    #[case::unknown_modifier("hyper+x")]
    fn malformed_names_are_refused_by_name(#[case] name: &str) {
        let err = parse(name).expect_err("malformed");
        let text = err.to_string();
        assert!(text.contains(&format!("{name:?}")), "{text}");
        assert!(text.contains("ctrl+<letter>") && text.contains("pagedown"), "{text}");
    }

    #[test]
    fn one_bad_name_refuses_the_list() {
        assert_eq!(parse_all(&["enter", "q"]), Ok(vec![named("Enter"), Key::Char('q')]));
        let err = parse_all(&["enter", "ctrl+bogus", "q"]).expect_err("refused");
        assert_eq!(err.name, "ctrl+bogus");
    }

    #[test]
    fn only_ctrl_c_is_an_interrupt() {
        assert!(parse("ctrl+c").is_ok_and(|k| k.is_interrupt()));
        assert!(parse("C-C").is_ok_and(|k| k.is_interrupt()));
        assert!(parse("c").is_ok_and(|k| !k.is_interrupt()));
        assert!(parse("alt+c").is_ok_and(|k| !k.is_interrupt()));
    }
}
