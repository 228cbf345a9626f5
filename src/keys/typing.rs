//! Typing as a person would, for a human watching a session: a plan of
//! keystrokes with human-looking delays, pauses after words, and now and
//! then a slip of a finger that is noticed and corrected with backspace.
//!
//! The plan is a pure function of the text, the options and a seed, so the
//! same call types the same way twice; what ends up on the line is always
//! exactly the text. Its total time is bounded: a long text is typed faster
//! rather than slower than [`MAX_TOTAL_MS`].

use serde::Deserialize;

/// The longest a typed text may take, all delays together.
pub const MAX_TOTAL_MS: u64 = 20_000;
/// Characters per second when no speed is given.
pub const DEFAULT_CPS: f64 = 14.0;
/// The share of characters mistyped (then corrected) by default.
pub const DEFAULT_MISTAKES: f64 = 0.03;

/// The options of the `typing` parameter.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TypingParams {
    /// Characters per second (1 to 100; default 14).
    #[serde(default)]
    pub speed: Option<f64>,
    /// The share of characters mistyped and corrected with backspace (0 to 0.3; default 0.03).
    #[serde(default)]
    pub mistakes: Option<f64>,
    /// A seed: the same text and seed are typed the same way again (default: a new way each time).
    #[serde(default)]
    pub seed: Option<u64>,
}

/// One keystroke of a plan, pressed after waiting `delay_ms`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stroke {
    /// How long to wait before it.
    pub delay_ms: u64,
    /// What to press.
    pub key: StrokeKey,
}

/// What one keystroke presses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StrokeKey {
    /// A character, typed literally.
    Char(char),
    /// Backspace, taking the last character back.
    Backspace,
}

/// Checked typing options.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Typing {
    /// Characters per second.
    pub cps: f64,
    /// The share of characters mistyped.
    pub mistakes: f64,
    /// The seed of the plan.
    pub seed: u64,
}

impl Typing {
    /// Checks `p`; `fresh_seed` stands in for a seed not given.
    pub fn parse(p: &TypingParams, fresh_seed: u64) -> Result<Typing, String> {
        let cps = p.speed.unwrap_or(DEFAULT_CPS);
        if !cps.is_finite() || !(1.0..=100.0).contains(&cps) {
            return Err(format!("typing.speed must be between 1 and 100 characters per second; got {cps}"));
        }
        let mistakes = p.mistakes.unwrap_or(DEFAULT_MISTAKES);
        if !mistakes.is_finite() || !(0.0..=0.3).contains(&mistakes) {
            return Err(format!("typing.mistakes must be between 0 and 0.3; got {mistakes}"));
        }
        Ok(Typing { cps, mistakes, seed: p.seed.unwrap_or(fresh_seed) })
    }
}

/// A small, well-mixed generator (splitmix64): enough for human jitter,
/// and the same sequence on every platform.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Keys next to each other on a US keyboard, for believable slips.
const ROWS: [&str; 3] = ["qwertyuiop", "asdfghjkl", "zxcvbnm"];

/// A key next to `c` (same case), or `None` when `c` is not a letter.
fn neighbour(c: char, rng: &mut Rng) -> Option<char> {
    let lower = c.to_ascii_lowercase();
    let row = ROWS.iter().find(|r| r.contains(lower))?;
    let chars: Vec<char> = row.chars().collect();
    let i = chars.iter().position(|&k| k == lower)?;
    let j = match (i, rng.next() % 2) {
        (0, _) => 1,
        (i, _) if i + 1 == chars.len() => i - 1,
        (i, 0) => i - 1,
        (i, _) => i + 1,
    };
    let n = chars[j];
    Some(if c.is_ascii_uppercase() { n.to_ascii_uppercase() } else { n })
}

/// The keystrokes that type `text` as a person would.
pub fn plan(text: &str, t: Typing) -> Vec<Stroke> {
    let mut rng = Rng(t.seed);
    let base = 1000.0 / t.cps;
    let mut out = Vec::with_capacity(text.len() + 8);
    let mut prev = ' ';
    for c in text.chars() {
        // Jitter of ±40 %, a longer gap after a word or a sentence.
        let mut delay = base * (0.6 + 0.8 * rng.unit());
        if prev == ' ' && c != ' ' && rng.unit() < 0.15 {
            delay += base * 3.0 * rng.unit();
        }
        if matches!(prev, '.' | ',' | ';' | '|' | '&') {
            delay += base * 2.0;
        }
        if let Some(slip) = (rng.unit() < t.mistakes).then(|| neighbour(c, &mut rng)).flatten() {
            out.push(Stroke { delay_ms: delay as u64, key: StrokeKey::Char(slip) });
            // Noticed a moment later, taken back, then typed right.
            out.push(Stroke { delay_ms: (base * (2.0 + 2.0 * rng.unit())) as u64, key: StrokeKey::Backspace });
            delay = base * (0.8 + 0.4 * rng.unit());
        }
        out.push(Stroke { delay_ms: delay as u64, key: StrokeKey::Char(c) });
        prev = c;
    }
    fit(&mut out);
    out
}

/// Scales the delays down so that the whole plan fits [`MAX_TOTAL_MS`].
fn fit(strokes: &mut [Stroke]) {
    let total: u64 = strokes.iter().map(|s| s.delay_ms).sum();
    if total <= MAX_TOTAL_MS {
        return;
    }
    for s in strokes {
        s.delay_ms = s.delay_ms * MAX_TOTAL_MS / total;
    }
}

/// What the keystrokes of `plan` leave on the line.
pub fn result(plan: &[Stroke]) -> String {
    let mut line = String::new();
    for s in plan {
        match s.key {
            StrokeKey::Char(c) => line.push(c),
            StrokeKey::Backspace => {
                line.pop();
            }
        }
    }
    line
}

/// The total time of a plan, in ms.
pub fn total_ms(plan: &[Stroke]) -> u64 {
    plan.iter().map(|s| s.delay_ms).sum()
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn typing(seed: u64, mistakes: f64) -> Typing {
        Typing { cps: DEFAULT_CPS, mistakes, seed }
    }

    #[rstest]
    #[case::plain("ls -l /tmp")]
    #[case::unicode("echo héllo wörld ✓")]
    #[case::symbols("grep -E 'a|b' file && echo $? ; printf '%s\\n' x")]
    #[case::empty("")]
    fn the_line_ends_up_exact(#[case] text: &str) {
        for seed in 0..200 {
            let p = plan(text, typing(seed, 0.3));
            assert_eq!(result(&p), text, "seed {seed}");
        }
    }

    #[test]
    fn the_same_seed_types_the_same_way() {
        let text = "make -j4 check RUNTESTFLAGS=gdb.base/break.exp";
        assert_eq!(plan(text, typing(7, 0.1)), plan(text, typing(7, 0.1)));
        assert_ne!(plan(text, typing(7, 0.1)), plan(text, typing(8, 0.1)));
    }

    #[test]
    fn mistakes_are_made_and_taken_back() {
        let text = "the quick brown fox jumps over the lazy dog";
        let p = plan(text, typing(3, 0.3));
        let backspaces = p.iter().filter(|s| s.key == StrokeKey::Backspace).count();
        assert!(backspaces > 0, "{p:?}");
        assert_eq!(p.len(), text.chars().count() + 2 * backspaces);
        let none = plan(text, typing(3, 0.0));
        assert!(none.iter().all(|s| s.key != StrokeKey::Backspace));
    }

    #[test]
    fn speed_sets_the_pace_and_the_total_is_bounded() {
        let text = "echo hello world";
        let ms = total_ms(&plan(text, typing(1, 0.0)));
        let per_char = ms as f64 / text.len() as f64;
        assert!((40.0..150.0).contains(&per_char), "{per_char} ms per character");
        let long = "x".repeat(5_000);
        assert!(total_ms(&plan(&long, typing(1, 0.1))) <= MAX_TOTAL_MS);
    }

    #[rstest]
    #[case::slow(TypingParams { speed: Some(0.5), ..TypingParams::default() })]
    #[case::nan(TypingParams { speed: Some(f64::NAN), ..TypingParams::default() })]
    #[case::sloppy(TypingParams { mistakes: Some(0.5), ..TypingParams::default() })]
    fn bad_options_are_refused(#[case] p: TypingParams) {
        assert!(Typing::parse(&p, 1).is_err());
    }

    #[test]
    fn a_given_seed_wins() {
        let p = TypingParams { seed: Some(5), ..TypingParams::default() };
        assert_eq!(Typing::parse(&p, 99).map(|t| t.seed), Ok(5));
        assert_eq!(Typing::parse(&TypingParams::default(), 99).map(|t| t.seed), Ok(99));
    }
}
