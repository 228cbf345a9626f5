//! The shapes of secrets: one rule per provider or format.
//!
//! Written here rather than loaded from a scanner's rule file: the rule
//! files of the well-kept scanners (gitleaks, ripsecrets, detect-secrets)
//! are tuned for source trees, where a false hit costs a reviewer a glance;
//! here a false hit hides text an agent needs, so every rule below asks for
//! the provider's fixed prefix or a named assignment, and each comes with a
//! table of look-alikes that must stay (see the tests). The patterns follow
//! the providers' published token formats.
//!
//! Each rule names the keywords one of which any match contains; the
//! [`Rules`] run a rule's regex only when an Aho-Corasick pass over the
//! text found one of its keywords, so text with none costs one linear scan.

use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use regex::Regex;

/// One shape of secret.
struct Rule {
    /// What the placeholder calls it (`github-token`).
    kind: &'static str,
    /// Any match contains one of these (compared ignoring ASCII case).
    keywords: &'static [&'static str],
    /// The pattern; when it has a group named `s`, only that group is the
    /// secret (the value of an assignment, the password of a URL).
    pattern: &'static str,
}

/// The rules, in order of precedence: where two matches overlap, the
/// earlier rule's wins.
const RULES: &[Rule] = &[
    Rule {
        kind: "private-key",
        keywords: &["PRIVATE KEY"],
        pattern: r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----",
    },
    Rule {
        // A block whose END lies beyond the text (a read range or a clip
        // ends inside it): the BEGIN line and the key's lines after it.
        kind: "private-key",
        keywords: &["PRIVATE KEY"],
        pattern: r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?:(?:\\r)?(?:\\n)?\n[ \t]*(?:\d+(?:  |[:-] ))?(?:[A-Za-z0-9+/]{16,}={0,2}|[A-Za-z0-9+/]*={1,2}|[A-Z][A-Za-z-]*: [^\n]*))*",
    },
    Rule {
        // A block whose BEGIN lies before the text: the key's lines before
        // the END line (the first one without its line-number prefix); an
        // END line alone shows nothing of the key and stays.
        kind: "private-key",
        keywords: &["PRIVATE KEY"],
        pattern: r"(?m)^[ \t]*(?:\d+(?:  |[:-] ))?(?P<k>(?:(?:[A-Za-z0-9+/]{16,}={0,2}|[A-Za-z0-9+/]*={1,2})(?:\\r)?(?:\\n)?\n[ \t]*(?:\d+(?:  |[:-] ))?)*[A-Za-z0-9+/]+={0,2}(?:\\r)?(?:\\n)?\n[ \t]*(?:\d+(?:  |[:-] ))?-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----)",
    },
    Rule { kind: "anthropic-key", keywords: &["sk-ant-"], pattern: r"\bsk-ant-[a-z]{3,6}\d{2}-[A-Za-z0-9_\-]{40,}" },
    Rule {
        kind: "openai-key",
        keywords: &["T3BlbkFJ", "sk-proj-", "sk-svcacct-", "sk-admin-"],
        pattern: r"\bsk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{40,}|[A-Za-z0-9_\-]{20,}T3BlbkFJ[A-Za-z0-9_\-]{20,})",
    },
    Rule { kind: "openai-key", keywords: &["sk-"], pattern: r"\bsk-[A-Za-z0-9]{48}\b" },
    Rule {
        kind: "github-token",
        keywords: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
        pattern: r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b",
    },
    Rule { kind: "github-token", keywords: &["github_pat_"], pattern: r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b" },
    Rule {
        kind: "gitlab-token",
        keywords: &["glpat-", "gldt-", "glptt-", "glrt-", "glsoat-"],
        pattern: r"\bgl(?:pat|dt|ptt|rt|soat)-[A-Za-z0-9_\-]{20,}",
    },
    Rule { kind: "slack-token", keywords: &["xox"], pattern: r"\bxox[abposre]-[A-Za-z0-9\-]{10,}" },
    Rule {
        kind: "slack-webhook",
        keywords: &["hooks.slack.com"],
        pattern: r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_\-]{20,}",
    },
    Rule {
        kind: "stripe-key",
        keywords: &["_live_", "_test_"],
        pattern: r"\b(?:sk|rk|whsec)_(?:live|test)_[A-Za-z0-9]{16,}\b",
    },
    Rule { kind: "google-api-key", keywords: &["AIza"], pattern: r"\bAIza[0-9A-Za-z_\-]{35}" },
    Rule { kind: "npm-token", keywords: &["npm_"], pattern: r"\bnpm_[A-Za-z0-9]{36}\b" },
    Rule { kind: "pypi-token", keywords: &["pypi-"], pattern: r"\bpypi-AgE[A-Za-z0-9_\-]{50,}" },
    Rule {
        kind: "aws-access-key-id",
        keywords: &["AKIA", "ASIA", "ABIA", "ACCA"],
        pattern: r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b",
    },
    Rule {
        kind: "aws-secret-key",
        keywords: &["aws"],
        pattern: r#"(?i)aws_?secret_?(?:access_?)?key\b["']?\s*[:=]\s*["']?(?P<s>[A-Za-z0-9/+=]{40})(?:[^A-Za-z0-9/+=]|\z)"#,
    },
    Rule {
        kind: "jwt",
        keywords: &["eyJ"],
        pattern: r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",
    },
    Rule { kind: "url-password", keywords: &["://"], pattern: r"[A-Za-z]://[^\s:@/]+:(?P<s>[^\s@/]{3,})@" },
    Rule {
        kind: "authorization",
        keywords: &["authorization", "bearer"],
        pattern: r"(?i)\b(?:authorization:\s*(?:bearer|basic|token)?|bearer)\s+(?P<s>[A-Za-z0-9._~+/=\-]{8,})",
    },
    Rule {
        kind: "password",
        keywords: &["passw", "pwd"],
        pattern: r#"(?i)(?:passw(?:or)?d|pwd)[A-Za-z0-9_.\-]*["']?[ \t]*[:=][ \t]*["']?(?P<s>[^\s"',;:=][^\s"',;]{7,})"#,
    },
    Rule {
        kind: "secret",
        keywords: &["token", "secret", "api_key", "apikey", "api-key", "credential", "private_key", "access_key"],
        pattern: r#"(?i)(?:token|secret|api[_\-]?key|credential|private_?key|access_?key)[A-Za-z0-9_.\-]*["']?[ \t]*[:=][ \t]*["']?(?P<s>[^\s"',;:=][^\s"',;]{7,})"#,
    },
];

/// The rules compiled, with the keyword prefilter.
pub(super) struct Rules {
    /// Every rule's keywords, for one pass over the text.
    keywords: AhoCorasick,
    /// The rule each keyword pattern belongs to.
    owner: Vec<usize>,
    /// Each rule's regex, in [`RULES`] order, compiled the first time its
    /// keyword is seen: most output names none of them, and the twenty
    /// compiled at once held close to a megabyte of the router's heap.
    regexes: Vec<OnceLock<Regex>>,
}

/// A secret found by shape: where it lies in the text and what it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Found {
    /// Its byte range.
    pub range: std::ops::Range<usize>,
    /// Its kind.
    pub kind: &'static str,
}

impl Rules {
    /// Compiles the keyword prefilter; each rule's regex waits for its
    /// keyword. They are constants, so a failure is a bug caught by the
    /// tests.
    pub(super) fn compile() -> Rules {
        let mut words = Vec::new();
        let mut owner = Vec::new();
        for (i, rule) in RULES.iter().enumerate() {
            for w in rule.keywords {
                words.push(*w);
                owner.push(i);
            }
        }
        // A contiguous NFA, not the DFA the builder picks for so few
        // keywords: 15 kB held for the router's life instead of 110 kB, for
        // a scan about a tenth slower over text that is only ever a reply's
        // shown lines.
        let keywords = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .kind(Some(AhoCorasickKind::ContiguousNFA))
            .build(&words)
            .expect("the keywords are constants");
        let regexes = RULES.iter().map(|_| OnceLock::new()).collect();
        Rules { keywords, owner, regexes }
    }

    /// Every match in `text` of a rule whose keyword occurs there, in rule
    /// order (so earlier rules come first), values that are plainly no
    /// secret left out.
    pub(super) fn find(&self, text: &str) -> Vec<Found> {
        let mut wanted = vec![false; RULES.len()];
        for m in self.keywords.find_overlapping_iter(text) {
            wanted[self.owner[m.pattern().as_usize()]] = true;
        }
        let mut found = Vec::new();
        for (i, rule) in RULES.iter().enumerate().filter(|(i, _)| wanted[*i]) {
            let regex = self.regexes[i].get_or_init(|| Regex::new(rule.pattern).expect("the rules are constants"));
            for caps in regex.captures_iter(text) {
                let Some(m) = caps.name("s").or_else(|| caps.name("k")).or_else(|| caps.get(0)) else { continue };
                if caps.name("s").is_some() && !plausible_value(m.as_str()) {
                    continue;
                }
                found.push(Found { range: m.range(), kind: rule.kind });
            }
        }
        found
    }
}

/// The widths of a private key's full lines: 64 in PEM, 70 in OpenSSH's
/// own format.
const KEY_WIDTHS: [usize; 2] = [64, 70];
/// A line's end as the raw view spells it out, before the real one.
const SPELLED_ENDS: [&str; 3] = ["\\r\\n", "\\n", "\\r"];
/// The longest line-number prefix a reply puts before a line (`1234567  `).
const MAX_PREFIX: usize = 16;

/// The lines of a private key seen without its BEGIN and END lines (a read
/// range inside the block): full-width lines of base64 with both cases
/// and a digit (each line after its line-number prefix, if any), and the
/// shorter last line right after them. A run inside a block that says it
/// is not a private key (a certificate, a public key) stays. Base64 that
/// `base64` prints is 76 wide and stays too.
pub(super) fn key_lines(text: &str) -> Vec<std::ops::Range<usize>> {
    let mut lines = Vec::new();
    let mut at = 0;
    for line in text.split('\n') {
        lines.push((at, line));
        at += line.len() + 1;
    }
    let body = |line: &str| {
        let start = super::prefix_len(line);
        // The raw view spells a line's end out before the real one.
        let rest = SPELLED_ENDS.iter().find_map(|end| line[start..].strip_suffix(end)).unwrap_or(&line[start..]);
        let b64 =
            !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
        (start, rest.len(), b64)
    };
    // Whether a line is as long as a key's line with a prefix can be:
    // most lines are not, and are passed over at once.
    let fits = |line: &str| (KEY_WIDTHS[0]..=KEY_WIDTHS[1] + MAX_PREFIX).contains(&line.len());
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let full = |j: usize| {
            let (start, len, b64) = body(lines[j].1);
            let rest = &lines[j].1[start..start + len];
            // Both cases and a digit, as base64 of random bytes has: hex
            // digests and words do not.
            let mixed = rest.bytes().any(|b| b.is_ascii_uppercase())
                && rest.bytes().any(|b| b.is_ascii_lowercase())
                && rest.bytes().any(|b| b.is_ascii_digit());
            b64 && mixed && KEY_WIDTHS.contains(&len) && !rest.ends_with('=')
        };
        if !fits(lines[i].1) || !full(i) {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < lines.len() && fits(lines[j].1) && full(j) {
            j += 1;
        }
        let mut end = j;
        if j < lines.len() {
            let (_, len, b64) = body(lines[j].1);
            if b64 && len < KEY_WIDTHS[1] {
                end = j + 1;
            }
        }
        if !in_other_block(text, lines[i].0, lines.get(end).map(|l| l.1)) {
            for &(start, line) in &lines[i..end] {
                let (skip, len, _) = body(line);
                found.push(start + skip..start + skip + len);
            }
        }
        i = end.max(i + 1);
    }
    found
}

/// Whether the lines from byte `from` of `text` lie in a block whose
/// BEGIN line (before them) or END line (`next`, the line after them) says
/// it is not a private key.
fn in_other_block(text: &str, from: usize, next: Option<&str>) -> bool {
    let before = &text[..from];
    if let Some(begin) = before.rfind("-----BEGIN ")
        && !before[begin..].contains("-----END ")
    {
        let header = before[begin..].lines().next().unwrap_or_default();
        return !header.contains("PRIVATE KEY");
    }
    next.is_some_and(|l| l.contains("-----END ") && !l.contains("PRIVATE KEY"))
}

/// Whether the value of an assignment could be a secret: long enough, and
/// not a masked value (`****`), a variable (`$TOKEN`), a path, a number or
/// a placeholder of ours.
pub(super) fn plausible_value(value: &str) -> bool {
    value.chars().count() >= super::MIN_LEN
        && !value.contains('*')
        && !value.starts_with('$')
        && !value.starts_with('/')
        && !value.starts_with("~/")
        && !value.starts_with("./")
        && !value.contains(super::OPEN)
        && !value.contains('›')
        && !value.bytes().all(|b| b.is_ascii_digit())
        && !value.eq_ignore_ascii_case("<redacted>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn kinds(text: &str) -> Vec<(&'static str, String)> {
        let rules = Rules::compile();
        rules.find(text).into_iter().map(|f| (f.kind, text[f.range].to_string())).collect()
    }

    const GH: &str = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8";

    #[test]
    fn every_rule_compiles() {
        for rule in RULES {
            assert!(Regex::new(rule.pattern).is_ok(), "{}: {}", rule.kind, rule.pattern);
        }
    }

    #[rstest]
    #[case::aws_key_id("aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "aws-access-key-id", "AKIAIOSFODNN7EXAMPLE")]
    #[case::aws_secret(
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "aws-secret-key",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    )]
    #[case::github_classic(GH, "github-token", GH)]
    #[case::github_oauth(
        "token gho_16C7e42F292c6912E7710c838347Ae178B4a here",
        "github-token",
        "gho_16C7e42F292c6912E7710c838347Ae178B4a"
    )]
    #[case::github_fine_grained(
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "github-token",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"
    )]
    #[case::gitlab("glpat-xYz12AbC34dEf56GhI78jK", "gitlab-token", "glpat-xYz12AbC34dEf56GhI78jK")]
    #[case::slack("SLACK xoxb-2634-1234567890-AbCdEfGhIjKl", "slack-token", "xoxb-2634-1234567890-AbCdEfGhIjKl")]
    #[case::slack_webhook(
        "url=https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXXXXXXXXXX",
        "slack-webhook",
        "https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXXXXXXXXXX"
    )]
    #[case::stripe("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "stripe-key", "sk_live_4eC39HqLyjWDarjtT1zdp7dc")]
    #[case::openai_project(
        "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH",
        "openai-key",
        "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH"
    )]
    #[case::openai_legacy(
        "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKL",
        "openai-key",
        "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKL"
    )]
    #[case::anthropic(
        "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMN_-xyz",
        "anthropic-key",
        "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMN_-xyz"
    )]
    #[case::google(
        "key AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
        "google-api-key",
        "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"
    )]
    #[case::npm("npm_abcdefghijklmnopqrstuvwxyz0123456789", "npm-token", "npm_abcdefghijklmnopqrstuvwxyz0123456789")]
    #[case::pypi(
        "pypi-AgEIcHlwaS5vcmcCJDAwMDAwMDAwLTAwMDAtMDAwMC0wMDAwLTAwMDAwMDAwMDAwMAAA",
        "pypi-token",
        "pypi-AgEIcHlwaS5vcmcCJDAwMDAwMDAwLTAwMDAtMDAwMC0wMDAwLTAwMDAwMDAwMDAwMAAA"
    )]
    #[case::jwt(
        "Cookie: s=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "jwt",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
    )]
    #[case::url_password(
        "origin\thttps://bob:hunter2hunter2@example.com/r.git (fetch)",
        "url-password",
        "hunter2hunter2"
    )]
    #[case::postgres_url("DATABASE_URL=postgres://app:s3cr3tpw@db:5432/app", "url-password", "s3cr3tpw")]
    #[case::bearer("> Authorization: Bearer abc.def-ghi_jkl", "authorization", "abc.def-ghi_jkl")]
    #[case::env_password("DB_PASSWORD=correct-horse", "password", "correct-horse")]
    #[case::json_password(r#"  "password": "correct-horse","#, "password", "correct-horse")]
    #[case::env_token("MY_SERVICE_TOKEN=abcd1234efgh", "secret", "abcd1234efgh")]
    #[case::yaml_api_key("api_key: 0123abcd4567", "secret", "0123abcd4567")]
    #[case::npmrc("//registry.npmjs.org/:_authToken=a1b2c3d4e5f6", "secret", "a1b2c3d4e5f6")]
    #[case::client_secret(r#"{"client_secret":"q8r9s0t1u2v3"}"#, "secret", "q8r9s0t1u2v3")]
    fn each_rule_finds_its_shape(#[case] line: &str, #[case] kind: &str, #[case] secret: &str) {
        let found = kinds(line);
        assert!(found.iter().any(|(k, s)| *k == kind && s == secret), "{line:?}: {found:?}");
    }

    #[test]
    fn a_private_key_is_one_secret_from_begin_to_end() {
        let text = "x\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nAAAA\n-----END OPENSSH PRIVATE KEY-----\ny";
        let found = kinds(text);
        let body = &text[2..text.len() - 2];
        assert_eq!(found.first(), Some(&("private-key", body.to_string())));
        let head = "10  -----BEGIN PRIVATE KEY-----\n11  MIIEvQIBADANBgkqhkiG9w0BAQEFAASC";
        assert_eq!(kinds(head)[0].1, &head[4..], "a block cut at its end");
        let tail = "11  MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n12  -----END PRIVATE KEY-----\n13  $";
        assert_eq!(kinds(tail)[0].1, &tail[4..tail.len() - 6], "a block cut at its start");
        let footer =
            "10  -----BEGIN PRIVATE KEY-----\n11  MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n… 40 more lines: read from_line=12";
        assert_eq!(kinds(footer)[0].1, &footer[4..footer.find("\n…").expect("footer")], "the text after stays");
        let header = "lines 11-13 of 40\n11  MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n12  AAAA\n13  -----END PRIVATE KEY-----";
        assert_eq!(kinds(header)[0].1, &header[22..], "the text before stays");
        assert_eq!(kinds("1  -----END PRIVATE KEY-----\n2  $"), vec![], "an END line alone");
    }

    /// A full-width line of base64, different for each `n`.
    fn b64_line(n: usize, width: usize) -> String {
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        (0..width).map(|i| alphabet[(i * 7 + n * 13) % 64] as char).collect()
    }

    #[test]
    fn a_keys_middle_lines_are_found_without_its_begin_and_end() {
        let (a, b) = (b64_line(1, 64), b64_line(2, 64));
        let text = format!("lines 4-6 of 30\n  4  {a}\n  5  {b}\n  6  Xw9z\n… more: read from_line=7");
        let found: Vec<&str> = key_lines(&text).into_iter().map(|r| &text[r]).collect();
        assert_eq!(found, vec![a.as_str(), b.as_str(), "Xw9z"]);
        let ssh = format!("{}\n{}", b64_line(3, 70), b64_line(4, 70));
        assert_eq!(key_lines(&ssh).len(), 2);
    }

    #[test]
    fn a_keys_lines_as_the_raw_view_spells_them_are_found() {
        let (a, b) = (b64_line(5, 64), b64_line(6, 64));
        let raw = format!("{a}\\r\\n\n{b}\\r\\n\nXw9z\\r\\n\n$ ");
        let found: Vec<&str> = key_lines(&raw).into_iter().map(|r| &raw[r]).collect();
        assert_eq!(found, vec![a.as_str(), b.as_str(), "Xw9z"]);
        let head = format!("-----BEGIN PRIVATE KEY-----\\r\\n\n{a}\\r\\n\n{b}");
        assert_eq!(kinds(&head)[0].1, head, "a block cut at its end");
        let tail = format!("{a}\\r\\n\n{b}\\r\\n\n-----END PRIVATE KEY-----\\r\\n\n$ ");
        assert!(kinds(&tail)[0].1.starts_with(&a), "a block cut at its start");
    }

    #[test]
    fn base64_that_is_no_key_stays() {
        let one = format!("  4  {}\n  5  $", b64_line(1, 64));
        assert_eq!(key_lines(&one).len(), 1, "one line alone is hidden too");
        assert!(key_lines(&format!("{}\n", b64_line(1, 63))).is_empty(), "another width");
        let wide = format!("{}\n{}", b64_line(1, 76), b64_line(2, 76));
        assert!(key_lines(&wide).is_empty(), "base64's own width");
        let cert =
            format!("-----BEGIN CERTIFICATE-----\n{}\n{}\n-----END CERTIFICATE-----", b64_line(1, 64), b64_line(2, 64));
        assert!(key_lines(&cert).is_empty(), "a certificate");
        let cert_tail = format!("{}\n{}\n-----END CERTIFICATE-----", b64_line(1, 64), b64_line(2, 64));
        assert!(key_lines(&cert_tail).is_empty(), "a certificate's end");
        let words = format!("{}\n{}", "x".repeat(64), "word ".repeat(13));
        assert!(key_lines(&words).is_empty());
        let hashes = format!("{}\n{}", "e3b0c442".repeat(8), "9fceb02d".repeat(8));
        assert!(key_lines(&hashes).is_empty(), "hex digests, one a line");
    }

    /// Lines that look like secrets to a careless rule and must stay.
    #[rstest]
    #[case::git_hash("commit 9fceb02d0ae598e95dc970b74767f19372d61af8")]
    #[case::short_hash("9fceb02 fix: the parser")]
    #[case::uuid("id: 123e4567-e89b-12d3-a456-426614174000")]
    #[case::sha256("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  empty.txt")]
    #[case::container("f4a1b3c2d5e6   nginx:latest   \"/docker-entrypoint.…\"   Up 2 hours")]
    #[case::base64_data("aGVsbG8gd29ybGQsIHRoaXMgaXMgb3JkaW5hcnkgZGF0YQ==")]
    #[case::long_word("Pneumonoultramicroscopicsilicovolcanoconiosis")]
    #[case::token_count("tokens=12345678")]
    #[case::masked("secret_key     ****************ABCD shared-credentials-file")]
    #[case::variable("export GITHUB_TOKEN=$GH_TOKEN")]
    #[case::path("PASSWORD_STORE_DIR=/home/me/.password-store")]
    #[case::prose("Enter your password: ")]
    #[case::words("the token secret is kept elsewhere")]
    #[case::url_without_password("git@github.com:me/repo.git https://github.com/me/repo.git")]
    #[case::url_with_user("https://me@example.com/repo.git")]
    #[case::near_github("ghp_short")]
    #[case::near_aws("AKIA-not-a-key")]
    #[case::rust_path("std::secret::Token::new()")]
    #[case::sk_word("sk-learn is a library")]
    #[case::placeholder("GITHUB_TOKEN=‹secret:github-token:1›")]
    #[case::cargo("   Compiling secret-service v3.0.1")]
    #[case::docker_digest("sha256:a3ed95caeb02ffe68cdd9fd84406680ae93d633cb16422d00e8a7c22955b46d4")]
    fn look_alikes_stay(#[case] line: &str) {
        assert_eq!(kinds(line), vec![], "{line:?}");
    }
}
