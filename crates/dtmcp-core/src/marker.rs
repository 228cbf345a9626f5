//! Shell-integration markers: what the integrated shell prints, how it is
//! parsed, and how the logger decides whether to believe it.
//!
//! # Wire format
//!
//! `shell/integration.bash` prints five OSC 133 sequences, each ended by BEL
//! (`ESC \` is accepted too, since the cooker handles both):
//!
//! ```text
//! ESC ] 133 ; A ; dtmcp=PID.SEQ.PROOF ; host=HOST ; user=USER BEL   primary prompt starts
//! ESC ] 133 ; A ; k=s ; dtmcp=PID.SEQ.PROOF BEL                     continuation (PS2) prompt starts
//! ESC ] 133 ; B ; dtmcp=PID.SEQ.PROOF ; cols=COLS BEL               a prompt ends; typing starts
//! ESC ] 133 ; C ; dtmcp=PID.SEQ.PROOF BEL                           the command's output starts
//! ESC ] 133 ; D ; EXIT ; dtmcp=PID.SEQ.PROOF ; ps=S1,S2,... BEL     the command finished
//! ```
//!
//! (spaces added for reading; none are sent). `PID` is the shell's process
//! id, `SEQ` a per-shell counter, `PROOF` a keyed hash of (kind, pid, seq),
//! all in decimal. `EXIT` is `$?`, and `ps` lists `PIPESTATUS`, one status
//! per pipeline stage. `COLS` is `$COLUMNS`, the width the line editor
//! wraps the typed line at (the cooker reads it; see `cook::line`).
//! `HOST` and `USER` are percent-encoded: `;`, `%` and
//! control bytes become `%XX`, everything else is sent as it is.
//!
//! [`parse`] is given the bytes after `133;`. It ignores `key=value`
//! parameters it does not know, so the format can grow, and rejects
//! anything else it cannot read: a missing or doubled `dtmcp=`, a bare word
//! where a `key=value` belongs, a bad number or escape, a `k=` other than
//! `k=i` (the default) or `k=s` on an `A`.
//!
//! # Trust
//!
//! A marker is believed only if its proof is right under the session's
//! [`Secret`] and its `SEQ` is above the last one believed from that pid
//! ([`Verifier`]). The secret reaches the shell as `__DTMCP_NONCE` in its
//! environment and never appears in the output, so this stops:
//!
//! - replay: `cat raw.log` inside the session prints markers whose sequence
//!   numbers were already used;
//! - foreign markers: another session's log, or a program printing OSC 133
//!   of its own (a nested terminal, a test suite), has no valid proof.
//!
//! It does not stop a program running in the session that reads
//! `__DTMCP_NONCE` from its environment and prints well-formed markers
//! with fresh sequence numbers. The proof is a keyed mixing function
//! chosen because bash can compute it with arithmetic alone (no fork on
//! every prompt); it is not a cryptographic MAC.
//!
//! Sequence numbers of a new shell start at the time in microseconds, so a
//! later shell that happens to get an old pid starts above its predecessor.
//! Gaps are normal: a marker computed for a prompt that went elsewhere, or
//! a `C` never shown for an empty line.

use std::collections::HashMap;
use std::io::Read;

use serde::{Deserialize, Serialize};

/// The prime 2^31 - 1: proofs and keys are below it, and bash can multiply
/// two such numbers without overflowing its signed 64-bit arithmetic.
pub const MODULUS: u32 = 2_147_483_647;

/// The bits of a pid that enter the proof (pids on Linux stay below 2^22).
const PID_MASK: u32 = (1 << 27) - 1;

/// The session's secret: four keys below 2^31 - 1, known to the logger and
/// the session's shells only.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Secret {
    /// The keys, each in `1..2^31-1`.
    pub keys: [u32; 4],
}

// The keys are the secret; keep them out of debug output and logs.
impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret { .. }")
    }
}

impl Secret {
    /// A new random secret, from `/dev/urandom`.
    pub fn generate() -> std::io::Result<Secret> {
        let mut bytes = [0u8; 16];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
        let mut keys = [0u32; 4];
        for (key, chunk) in keys.iter_mut().zip(bytes.chunks_exact(4)) {
            let word = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
            // Into 1..MODULUS; the slight bias does not matter here.
            *key = 1 + word % (MODULUS - 1);
        }
        Ok(Secret { keys })
    }

    /// The form exported to shells as `__DTMCP_NONCE`: `k0.k1.k2.k3`.
    pub fn to_nonce(&self) -> String {
        let k = self.keys;
        format!("{}.{}.{}.{}", k[0], k[1], k[2], k[3])
    }

    /// Parses the form written by [`Secret::to_nonce`]; `None` unless it is
    /// four decimal keys, each in `1..2^31-1`.
    pub fn from_nonce(s: &str) -> Option<Secret> {
        let mut keys = [0u32; 4];
        let mut parts = s.trim().split('.');
        for k in &mut keys {
            *k = parse_decimal(parts.next()?.as_bytes())?;
            if !(1..MODULUS).contains(k) {
                return None;
            }
        }
        parts.next().is_none().then_some(Secret { keys })
    }

    /// The proof of a marker of `kind` from shell `pid` with number `seq`.
    ///
    /// Mirrors `__DTMCP_PF` in `shell/integration.bash` step by step; every
    /// product has both factors below 2^31, as bash needs.
    pub fn proof(&self, kind: Kind, pid: u32, seq: u64) -> u32 {
        let p = u64::from(MODULUS);
        let [k0, k1, k2, k3] = self.keys.map(u64::from);
        let (lo, hi) = (seq & p, seq >> 31);
        let a = ((lo ^ k0) * k1 + hi + 1) % p;
        let mixed = a ^ u64::from(pid & PID_MASK) ^ (u64::from(kind.code()) << 27);
        let b = (mixed * k2 + k3) % p;
        let c = ((b ^ (b >> 15)) * k0 + k2) % p;
        let proof = ((c ^ (c >> 13)) * k3 + k1) % p;
        // Below MODULUS, so it fits.
        proof as u32
    }
}

/// What a marker says happened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// `A`: the primary prompt starts.
    #[default]
    Prompt,
    /// `A;k=s`: a continuation prompt (PS2) starts.
    Continuation,
    /// `B`: a prompt ends and typing starts.
    PromptEnd,
    /// `C`: the command's output starts.
    CommandStart,
    /// `D`: the command finished.
    CommandEnd,
}

impl Kind {
    /// The number that stands for the kind in the proof.
    pub fn code(self) -> u32 {
        match self {
            Kind::Prompt => 1,
            Kind::PromptEnd => 2,
            Kind::CommandStart => 3,
            Kind::CommandEnd => 4,
            Kind::Continuation => 5,
        }
    }
}

/// One parsed marker, not yet believed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    /// What happened.
    pub kind: Kind,
    /// The pid of the shell that printed it.
    pub pid: u32,
    /// The shell's sequence number for it.
    pub seq: u64,
    /// The proof the shell computed.
    pub proof: u32,
    /// The shell's host (primary prompts only; empty otherwise).
    pub host: String,
    /// The shell's user (primary prompts only; empty otherwise).
    pub user: String,
    /// The exit status (`D` only).
    pub exit: Option<i32>,
    /// Every pipeline stage's status (`D` only; may be empty).
    pub pipestatus: Vec<i32>,
}

/// Parses the parameters of an OSC 133 sequence (the bytes after `133;`).
/// `None` if they are not one of our markers, or not well formed.
pub fn parse(params: &[u8]) -> Option<Marker> {
    let mut fields = params.split(|&b| b == b';');
    let mut marker = Marker::default();
    let mut kind = match fields.next()? {
        b"A" => Kind::Prompt,
        b"B" => Kind::PromptEnd,
        b"C" => Kind::CommandStart,
        b"D" => {
            marker.exit = Some(parse_status(fields.next()?)?);
            Kind::CommandEnd
        }
        _ => return None,
    };
    let mut proven = false;
    for field in fields {
        let eq = field.iter().position(|&b| b == b'=')?;
        let (key, value) = (&field[..eq], &field[eq + 1..]);
        match key {
            b"dtmcp" if !proven => {
                (marker.pid, marker.seq, marker.proof) = parse_proof(value)?;
                proven = true;
            }
            b"dtmcp" => return None,
            b"k" if kind == Kind::Prompt && value == b"s" => kind = Kind::Continuation,
            b"k" if kind == Kind::Prompt && value == b"i" => {}
            b"k" => return None,
            b"host" => marker.host = percent_decode(value)?,
            b"user" => marker.user = percent_decode(value)?,
            b"ps" if kind == Kind::CommandEnd => marker.pipestatus = parse_statuses(value)?,
            _ => {}
        }
    }
    marker.kind = kind;
    proven.then_some(marker)
}

/// Reads `PID.SEQ.PROOF`.
fn parse_proof(value: &[u8]) -> Option<(u32, u64, u32)> {
    let mut parts = value.split(|&b| b == b'.');
    let pid: u32 = parse_decimal(parts.next()?)?;
    let seq: u64 = parse_decimal(parts.next()?)?;
    let proof: u32 = parse_decimal(parts.next()?)?;
    // Bash counts in signed 64 bits, so a larger seq is not from a shell.
    let fits = pid > 0 && i64::try_from(seq).is_ok() && proof < MODULUS;
    (parts.next().is_none() && fits).then_some((pid, seq, proof))
}

/// Reads a list of statuses separated by commas; empty means none.
fn parse_statuses(value: &[u8]) -> Option<Vec<i32>> {
    if value.is_empty() {
        return Some(Vec::new());
    }
    value.split(|&b| b == b',').map(parse_status).collect()
}

/// Reads an exit status: decimal digits with an optional minus sign.
fn parse_status(value: &[u8]) -> Option<i32> {
    match value.strip_prefix(b"-") {
        Some(digits) => parse_decimal::<i32>(digits).map(|n| -n),
        None => parse_decimal(value),
    }
}

/// Reads plain decimal digits (no sign, no blanks), 1 to 20 of them.
fn parse_decimal<T: std::str::FromStr>(digits: &[u8]) -> Option<T> {
    let plain = (1..=20).contains(&digits.len()) && digits.iter().all(u8::is_ascii_digit);
    if !plain {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Undoes the shell's `%XX` escapes; bytes that are not UTF-8 are replaced.
fn percent_decode(value: &[u8]) -> Option<String> {
    let mut out = Vec::with_capacity(value.len());
    let mut rest = value;
    while let Some((&b, tail)) = rest.split_first() {
        if b == b'%' {
            let hex = tail.get(..2)?;
            let text = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(text, 16).ok()?);
            rest = &tail[2..];
        } else {
            out.push(b);
            rest = tail;
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// Decides which markers to believe: those proven under the secret whose
/// sequence number is above the last one believed from the same pid.
#[derive(Clone, Debug)]
pub struct Verifier {
    /// The session's secret.
    secret: Secret,
    /// The last sequence number believed, per shell pid; kept for the
    /// session's life, since forgetting a pid would let its markers replay.
    last: HashMap<u32, u64>,
}

impl Verifier {
    /// A verifier for markers proven with `secret`.
    pub fn new(secret: Secret) -> Self {
        Verifier { secret, last: HashMap::new() }
    }

    /// The last sequence number believed per shell pid, to be kept across
    /// logger restarts so that markers seen before cannot be replayed.
    pub fn floors(&self) -> &HashMap<u32, u64> {
        &self.last
    }

    /// Raises the floors to at least those in `floors` (from a previous
    /// logger of the same session).
    pub fn raise_floors(&mut self, floors: &HashMap<u32, u64>) {
        for (&pid, &seq) in floors {
            let last = self.last.entry(pid).or_insert(seq);
            *last = (*last).max(seq);
        }
    }

    /// Whether to believe `marker`; if so, its sequence number is used up.
    pub fn accept(&mut self, marker: &Marker) -> bool {
        if self.secret.proof(marker.kind, marker.pid, marker.seq) != marker.proof {
            return false;
        }
        match self.last.get(&marker.pid) {
            Some(&last) if marker.seq <= last => false,
            _ => {
                self.last.insert(marker.pid, marker.seq);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    const SECRET: Secret = Secret { keys: [1_234_567_891, 987_654_321, 2_147_483_646, 1] };

    /// The marker bytes the shell would print, with a right proof.
    fn signed(secret: &Secret, kind: Kind, pid: u32, seq: u64, tail: &str) -> Vec<u8> {
        let letter = match kind {
            Kind::Prompt => "A",
            Kind::Continuation => "A;k=s",
            Kind::PromptEnd => "B",
            Kind::CommandStart => "C",
            Kind::CommandEnd => "D;0",
        };
        let proof = secret.proof(kind, pid, seq);
        format!("{letter};dtmcp={pid}.{seq}.{proof}{tail}").into_bytes()
    }

    #[rstest]
    #[case::prompt("A;dtmcp=42.7.9;host=box;user=ann", Kind::Prompt, "box", "ann")]
    #[case::encoded_names("A;dtmcp=42.7.9;host=a%3Bb;user=100%25%0A", Kind::Prompt, "a;b", "100%\n")]
    #[case::utf8_names("A;dtmcp=42.7.9;user=j\u{f6}rg", Kind::Prompt, "", "j\u{f6}rg")]
    #[case::continuation("A;k=s;dtmcp=42.7.9", Kind::Continuation, "", "")]
    #[case::initial_prompt("A;k=i;dtmcp=42.7.9", Kind::Prompt, "", "")]
    #[case::prompt_end("B;dtmcp=42.7.9", Kind::PromptEnd, "", "")]
    #[case::command_start("C;dtmcp=42.7.9", Kind::CommandStart, "", "")]
    #[case::unknown_keys_ignored("C;dtmcp=42.7.9;cl=m;aid=x", Kind::CommandStart, "", "")]
    fn parses(#[case] params: &str, #[case] kind: Kind, #[case] host: &str, #[case] user: &str) {
        let m = parse(params.as_bytes()).expect("parses");
        assert_eq!((m.kind, m.pid, m.seq, m.proof), (kind, 42, 7, 9));
        assert_eq!((m.host.as_str(), m.user.as_str()), (host, user));
    }

    #[rstest]
    #[case::success("D;0;dtmcp=1.2.3;ps=0", 0, &[0])]
    #[case::pipeline("D;1;dtmcp=1.2.3;ps=0,1,141", 1, &[0, 1, 141])]
    #[case::no_pipestatus("D;130;dtmcp=1.2.3", 130, &[])]
    #[case::empty_pipestatus("D;2;dtmcp=1.2.3;ps=", 2, &[])]
    #[case::negative("D;-1;dtmcp=1.2.3;ps=-1", -1, &[-1])]
    fn parses_command_end(#[case] params: &str, #[case] exit: i32, #[case] ps: &[i32]) {
        let m = parse(params.as_bytes()).expect("parses");
        assert_eq!((m.kind, m.exit, m.pipestatus.as_slice()), (Kind::CommandEnd, Some(exit), ps));
    }

    #[rstest]
    #[case::empty("")]
    #[case::unknown_letter("E;dtmcp=1.2.3")]
    #[case::plain_osc133("A")]
    #[case::no_proof("B;host=x")]
    #[case::two_proofs("B;dtmcp=1.2.3;dtmcp=1.2.4")]
    #[case::bare_word("C;dtmcp=1.2.3;junk")]
    #[case::short_proof("C;dtmcp=1.2")]
    #[case::long_proof("C;dtmcp=1.2.3.4")]
    #[case::signed_pid("C;dtmcp=+1.2.3")]
    #[case::zero_pid("C;dtmcp=0.2.3")]
    #[case::seq_beyond_bash("C;dtmcp=1.9223372036854775808.3")]
    #[case::proof_too_big("C;dtmcp=1.2.2147483647")]
    #[case::exit_missing("D;dtmcp=1.2.3")]
    #[case::exit_not_number("D;x;dtmcp=1.2.3")]
    #[case::bad_pipestatus("D;0;dtmcp=1.2.3;ps=0,,1")]
    #[case::bad_escape("A;dtmcp=1.2.3;host=%G1")]
    #[case::cut_escape("A;dtmcp=1.2.3;user=a%4")]
    #[case::right_prompt("A;k=r;dtmcp=1.2.3")]
    #[case::continuation_not_on_b("B;k=s;dtmcp=1.2.3")]
    #[case::lowercase_letter("a;dtmcp=1.2.3")]
    fn rejects(#[case] params: &str) {
        assert_eq!(parse(params.as_bytes()), None);
    }

    #[rstest]
    #[case::plain("1.2.3.4", Some([1, 2, 3, 4]))]
    #[case::largest("2147483646.1.1.1", Some([2_147_483_646, 1, 1, 1]))]
    #[case::with_newline("5.6.7.8\n", Some([5, 6, 7, 8]))]
    #[case::zero_key("0.2.3.4", None)]
    #[case::modulus_key("2147483647.2.3.4", None)]
    #[case::three_keys("1.2.3", None)]
    #[case::five_keys("1.2.3.4.5", None)]
    #[case::signed("+1.2.3.4", None)]
    #[case::empty("", None)]
    fn reads_nonces(#[case] nonce: &str, #[case] keys: Option<[u32; 4]>) {
        assert_eq!(Secret::from_nonce(nonce).map(|s| s.keys), keys);
    }

    #[test]
    fn generated_secrets_round_trip_and_differ() {
        let a = Secret::generate().expect("urandom");
        let b = Secret::generate().expect("urandom");
        assert!(a.keys.iter().all(|k| (1..MODULUS).contains(k)));
        assert_eq!(Secret::from_nonce(&a.to_nonce()), Some(a.clone()));
        assert_ne!(a, b);
        assert_eq!(format!("{a:?}"), "Secret { .. }");
    }

    #[rstest]
    #[case::fresh(&[(7, 100)], true)]
    #[case::next(&[(7, 100), (7, 101)], true)]
    #[case::gap(&[(7, 100), (7, 5000)], true)]
    #[case::same_again(&[(7, 100), (7, 100)], false)]
    #[case::older(&[(7, 100), (7, 99)], false)]
    #[case::other_pid_own_count(&[(7, 100), (8, 3)], true)]
    fn verifier_wants_growing_seq(#[case] seen: &[(u32, u64)], #[case] last_ok: bool) {
        let mut v = Verifier::new(SECRET);
        let mut verdicts = seen.iter().map(|&(pid, seq)| {
            let m = parse(&signed(&SECRET, Kind::PromptEnd, pid, seq, "")).expect("parses");
            v.accept(&m)
        });
        let verdicts: Vec<bool> = verdicts.by_ref().collect();
        assert_eq!(verdicts.last(), Some(&last_ok), "{verdicts:?}");
    }

    #[rstest]
    #[case::wrong_proof(|m: &mut Marker| m.proof = (m.proof + 1) % MODULUS)]
    #[case::other_kind(|m: &mut Marker| m.kind = Kind::CommandStart)]
    #[case::other_pid(|m: &mut Marker| m.pid += 1)]
    #[case::other_seq(|m: &mut Marker| m.seq += 1)]
    fn verifier_rejects_altered_markers(#[case] alter: fn(&mut Marker)) {
        let mut m = parse(&signed(&SECRET, Kind::PromptEnd, 7, 100, "")).expect("parses");
        alter(&mut m);
        assert!(!Verifier::new(SECRET).accept(&m));
    }

    #[test]
    fn verifier_rejects_other_secrets() {
        let other = Secret { keys: [5, 6, 7, 8] };
        let m = parse(&signed(&other, Kind::CommandStart, 7, 100, "")).expect("parses");
        assert!(!Verifier::new(SECRET).accept(&m));
        assert!(Verifier::new(other).accept(&m));
    }

    /// Cases for the bash comparison: extremes of every input.
    const PROOF_CASES: [(Kind, u32, u64); 7] = [
        (Kind::Prompt, 1, 0),
        (Kind::PromptEnd, 4_194_304, 1_700_000_000_123_456),
        (Kind::CommandStart, 123_456, (1 << 31) - 1),
        (Kind::CommandEnd, 99, 1 << 31),
        (Kind::Continuation, (1 << 27) - 1, 4_102_444_800_000_000),
        (Kind::Continuation, u32::MAX, 9_223_372_036_854_775_807),
        (Kind::Prompt, 8229, 1_796_205_436_437_189),
    ];

    /// Runs `argv` with `-c` on `prelude` plus `case`'s line for each of
    /// [`PROOF_CASES`] and checks it prints the proofs Rust computes, for
    /// several secrets; `missing` says why it is skipped without the shell.
    fn shell_agrees_on_proofs(argv: &[&str], prelude: &str, case: impl Fn(Kind, u32, u64) -> String, missing: &str) {
        let secrets = [SECRET, Secret { keys: [2_147_483_646; 4] }, Secret { keys: [1; 4] }];
        for secret in secrets {
            let mut cmd = prelude.to_string();
            for (kind, pid, seq) in PROOF_CASES {
                cmd += &case(kind, pid, seq);
            }
            let out = std::process::Command::new(argv[0])
                .args(&argv[1..])
                .args(["-c", &cmd])
                .env("__DTMCP_NONCE", secret.to_nonce())
                .output();
            let Ok(out) = out else {
                eprintln!("skipped: {missing}");
                return;
            };
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let want: Vec<String> =
                PROOF_CASES.iter().map(|&(k, pid, seq)| secret.proof(k, pid, seq).to_string()).collect();
            let got = String::from_utf8_lossy(&out.stdout);
            assert_eq!(got.lines().collect::<Vec<_>>(), want, "keys {:?}", secret.keys);
        }
    }

    /// Bash computes the same proofs with the integration's own expression.
    #[test]
    fn bash_and_rust_agree_on_proofs() {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shell/integration.bash");
        let case = |kind: Kind, pid, seq| {
            format!("__DTMCP_KIND={} __DTMCP_PID={pid} __DTMCP_SEQ={seq}; echo $((__DTMCP_PF)); ", kind.code())
        };
        let prelude = format!(". {script}; __dtmcp_start; ");
        shell_agrees_on_proofs(&["bash", "--norc", "--noprofile"], &prelude, case, "bash cannot be run here");
    }

    /// zsh computes them too, in `__dtmcp_mark` of `integration.zsh`.
    #[test]
    fn zsh_and_rust_agree_on_proofs() {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shell/integration.zsh");
        // The function counts up before it proves.
        let case = |kind: Kind, pid, seq| {
            let before = i128::from(seq) - 1;
            format!("__DTMCP_PID={pid} __DTMCP_SEQ={before}; __dtmcp_mark {}; echo ${{__dtmcp_m##*.}}; ", kind.code())
        };
        let prelude = format!(". {script}; __dtmcp_keys; ");
        shell_agrees_on_proofs(&["zsh", "-f"], &prelude, case, "zsh is not installed (.ci/run installs it)");
    }
}
