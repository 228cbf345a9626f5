//! Redaction at the reply edge and placeholders typed back.
//!
//! Detection is pure and lives in [`dtmcp_core::redact`]; this module
//! decides where it applies and keeps its state on disk, since the router
//! is stateless between calls: a session's placeholders are in
//! `secrets.json` of its directory (0600, the values beside the logs that
//! hold them anyway), a session created with `redact=false` has a
//! `redact-off` file there, and the agents told how placeholders work are
//! listed in `redaction-told`. The logs themselves are never touched.
//!
//! The server's switch and the user's list come from the environment:
//! `DOCENT_TERMINAL_MCP_REDACT=0` turns redaction off; and
//! `DOCENT_TERMINAL_MCP_SECRETS` lists, separated by commas, names of
//! variables whose values are secret (in the server's environment and in
//! each session's shell) and files of secret values, one a line (a path,
//! which must not be readable by group or others).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::ops::Range;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use dtmcp_core::redact::{self, Counts, Cut, Known, OFF_FILE, TABLE_FILE, Table};

use crate::lru::Lru;
use crate::tools::{Refusal, ToolError};

/// The variable that turns redaction off for the server (`0`).
pub const ENV_REDACT: &str = "DOCENT_TERMINAL_MCP_REDACT";
/// The variable that lists secret variables' names and files of values.
pub const ENV_SECRETS: &str = "DOCENT_TERMINAL_MCP_SECRETS";

/// The server's redaction settings, read once at start.
#[derive(Debug, Default)]
pub struct Secrets {
    /// Whether the server redacts at all.
    pub on: bool,
    /// The values the user listed (by variable or file).
    known: Known,
    /// The variable names the user listed, looked up in each session too.
    names: Vec<String>,
    /// The sessions' placeholder tables, held between calls.
    tables: Tables,
}

impl Secrets {
    /// The settings from the server's environment. A listed file that is
    /// missing or readable by others is skipped with a warning on stderr.
    pub fn from_env() -> Secrets {
        let on = std::env::var(ENV_REDACT).map_or(true, |v| !matches!(v.trim(), "0" | "false" | "off" | "no"));
        let listed = std::env::var(ENV_SECRETS).unwrap_or_default();
        let mut names = Vec::new();
        let mut known = Known::default();
        for item in listed.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            if item.contains('/') {
                match read_private(Path::new(item)) {
                    Ok(text) => known.add_lines(&text),
                    Err(why) => {
                        eprintln!("docent-terminal-mcp: {ENV_SECRETS}: {item}: {why}; its values are not redacted")
                    }
                }
            } else {
                names.push(item.to_string());
            }
        }
        let server_env: Vec<(String, String)> = std::env::vars().filter(|(n, _)| names.contains(n)).collect();
        let own = Known::from_env(server_env.iter().map(|(n, v)| (n.as_str(), v.as_str())), &names);
        for (kind, value) in own.pairs() {
            known.add(kind, value);
        }
        Secrets { on, known, names, tables: Tables::default() }
    }

    /// Whether replies of the session in `dir` are redacted.
    pub fn applies(&self, dir: &Path) -> bool {
        self.on && !dir.join(OFF_FILE).exists()
    }

    /// `text` redacted for the session in `dir` (or for no session), and
    /// what was found. A new placeholder is saved at once, so that the next
    /// reply and a typed placeholder find it.
    pub fn redact(&self, dir: Option<&Path>, text: &str) -> (String, Counts) {
        let Some(dir) = dir else {
            return match self.on {
                true => redact::redact(text, &self.known, &mut Table::default()),
                false => (text.to_string(), Counts::default()),
            };
        };
        if !self.applies(dir) {
            return (text.to_string(), Counts::default());
        }
        self.tables.with_table(&dir.join(TABLE_FILE), |table| redact::redact(text, &self.known, table))
    }

    /// A reply's text and its facts (as JSON) redacted for the session in
    /// `dir`, with one look at whether the session redacts and at its
    /// table; what was found in the text. The facts' findings are not
    /// counted: they repeat what the text says (a session's name, a
    /// command line).
    pub fn redact_reply(&self, dir: Option<&Path>, text: &str, facts: &str) -> (String, Counts, String) {
        let Some(dir) = dir else {
            let (text, counts) = self.redact(None, text);
            return (text, counts, self.redact(None, facts).0);
        };
        if !self.applies(dir) {
            return (text.to_string(), Counts::default(), facts.to_string());
        }
        self.tables.with_table(&dir.join(TABLE_FILE), |table| {
            let (text, counts) = redact::redact(text, &self.known, table);
            (text, counts, redact::redact(facts, &self.known, table).0)
        })
    }

    /// The rows of a screen `cols` wide of the session in `dir`, redacted
    /// as one text in which a full row goes on in the next (see
    /// [`redact::redact_screen`]), and what was found.
    pub fn redact_screen<S: AsRef<str>>(&self, dir: &Path, rows: &[S], cols: usize) -> (Vec<String>, Counts) {
        if !self.applies(dir) {
            return (rows.iter().map(|r| r.as_ref().to_string()).collect(), Counts::default());
        }
        self.tables.with_table(&dir.join(TABLE_FILE), |table| redact::redact_screen(rows, cols, &self.known, table))
    }

    /// The part `shown` of `context` (a window of a longer text of the
    /// session in `dir`, with the text around it; `cut` says where the
    /// context itself was cut inside a line), with every secret that
    /// touches it hidden, and what was hidden (see
    /// [`redact::redact_window`]).
    pub fn redact_window(&self, dir: &Path, context: &str, shown: Range<usize>, cut: Cut) -> (String, Counts) {
        if !self.applies(dir) {
            return (context.get(shown).unwrap_or_default().to_string(), Counts::default());
        }
        self.tables
            .with_table(&dir.join(TABLE_FILE), |table| redact::redact_window(context, shown, cut, &self.known, table))
    }

    /// `lines` of the session in `dir`, in order, redacted as one text (so
    /// that a key over several of them is seen whole) before anything cuts
    /// them short; as many lines as before, and what was hidden.
    pub fn redact_lines(&self, dir: &Path, lines: &[String]) -> (Vec<String>, Counts) {
        if lines.is_empty() || !self.applies(dir) {
            return (lines.to_vec(), Counts::default());
        }
        self.tables.with_table(&dir.join(TABLE_FILE), |table| redact::redact_lines(lines, &self.known, table))
    }

    /// A text and the facts that repeat it (a row of a list), each
    /// redacted alone for the session in `dir`, in place, with one look at
    /// its table; what was hidden in `text`. The facts' findings are not
    /// counted, as in [`Secrets::redact_reply`]. All are first read as one
    /// text: when that holds no secret (most often), none of them does,
    /// and each is read alone only when it does.
    pub fn redact_row(&self, dir: &Path, text: &mut String, facts: &mut [&mut String]) -> Counts {
        if !self.applies(dir) {
            return Counts::default();
        }
        self.tables.with_table(&dir.join(TABLE_FILE), |table| {
            let all = std::iter::once(text.as_str()).chain(facts.iter().map(|f| f.as_str()));
            let joined = all.collect::<Vec<_>>().join("\n");
            if redact::redact(&joined, &self.known, table).0 == joined {
                return Counts::default();
            }
            let (hidden, counts) = redact::redact(text, &self.known, table);
            *text = hidden;
            for fact in facts.iter_mut() {
                **fact = redact::redact(fact, &self.known, table).0;
            }
            counts
        })
    }

    /// `input` with the placeholders of the session in `dir` replaced by
    /// their values; an unknown placeholder refuses the call.
    pub fn substitute(&self, dir: &Path, input: &str) -> Result<String, ToolError> {
        if !input.contains(redact::OPEN) {
            return Ok(input.to_string());
        }
        self.tables
            .with_table(&dir.join(TABLE_FILE), |table| table.substitute(input))
            .map_err(|e| Refusal::UnknownPlaceholder { why: e.to_string() }.into())
    }

    /// Learns the secrets of a session just made in `dir`: the values of
    /// its shell's environment (`/proc/PID/environ` of `pid`) and of the
    /// `env` it was given whose names say secret or that the user listed.
    pub fn learn_session(&self, dir: &Path, pid: u32, env: &BTreeMap<String, String>) {
        if !self.applies(dir) {
            return;
        }
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let shell: Vec<(String, String)> = environ
            .split(|b| *b == 0)
            .filter_map(|kv| std::str::from_utf8(kv).ok()?.split_once('=').map(|(k, v)| (k.into(), v.into())))
            .collect();
        let shell = shell.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        let vars = shell.chain(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let known = Known::from_env(vars, &self.names);
        self.tables.with_table(&dir.join(TABLE_FILE), |table| {
            table.learn_all(&known);
            table.learn_all(&self.known);
        });
    }

    /// Marks the session in `dir` as not redacted.
    pub fn turn_off(dir: &Path) -> std::io::Result<()> {
        std::fs::write(dir.join(OFF_FILE), b"redact=false at session_create\n")
    }

    /// What a reply that redacted `counts` adds: the count always, and how
    /// to use a placeholder the first time `actor` meets one in the session
    /// in `dir`.
    pub fn note(dir: Option<&Path>, actor: &str, counts: &Counts) -> String {
        let mut out = format!("\n[redacted {}: {counts}]", plural(counts.total()));
        if let Some(dir) = dir
            && first_time(&dir.join(TOLD_FILE), actor)
        {
            out.push_str(
                "\nSecrets in replies show as ‹secret:KIND:N›, the same for the same value in every reply of this session; \
                 the logs on disk keep the real text. Type a placeholder in run, send or expect (e.g. \
                 `git push https://x:‹secret:url-password:1›@host/repo`) and the real value is typed instead.",
            );
        }
        out.push('\n');
        out
    }
}

/// The agents told how placeholders work, one a line.
const TOLD_FILE: &str = "redaction-told";

tokio::task_local! {
    /// The secrets a call's body hid before its reply's text was whole (a
    /// screen, redacted row by row), for the reply's note to count.
    static HIDDEN_EARLY: std::cell::RefCell<Counts>;
}

/// Runs a call's body `f`, and says what [`hidden_early`] noted in it.
pub async fn counting_early<F: Future>(f: F) -> (F::Output, Counts) {
    HIDDEN_EARLY
        .scope(std::cell::RefCell::new(Counts::default()), async {
            let out = f.await;
            (out, HIDDEN_EARLY.with(|c| c.take()))
        })
        .await
}

/// Notes `counts` as hidden by the call in progress (nothing outside one).
pub fn hidden_early(counts: &Counts) {
    let _ = HIDDEN_EARLY.try_with(|c| c.borrow_mut().add(counts));
}

/// A session's placeholder table as last read or written here, and the
/// file's stamp then.
#[derive(Default)]
struct Held {
    stamp: Option<Stamp>,
    table: Table,
}

/// What tells one `secrets.json` from another: a save replaces the file
/// whole (a new inode), so a change by another process shows.
type Stamp = (u64, u64, u64);

fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino(), m.len()))
}

/// How many sessions' tables are held at once.
const HELD_TABLES: usize = 128;

/// The tables held, by path.
struct Tables(Lru<PathBuf, Held>);

impl Default for Tables {
    fn default() -> Tables {
        Tables(Lru::new(HELD_TABLES))
    }
}

impl std::fmt::Debug for Tables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tables")
    }
}

impl Tables {
    /// Runs `f` on the table at `path`, held in memory and read again only
    /// when the file changed, and saves what `f` added. One table's users
    /// take turns: two replies that find new secrets at once must not both
    /// number theirs 1, nor the later save drop the earlier's placeholder.
    fn with_table<R>(&self, path: &Path, f: impl FnOnce(&mut Table) -> R) -> R {
        let held = self.0.get(&path.to_path_buf(), Held::default);
        let mut held = held.lock().unwrap_or_else(|e| e.into_inner());
        let now = stamp(path);
        if now != held.stamp {
            held.table = Table::load(path);
            held.stamp = now;
        }
        let out = f(&mut held.table);
        // A table that could not be saved keeps its new placeholders here
        // (they still type back while this server runs) and is saved again
        // at its next use.
        if held.table.unsaved() {
            if let Err(e) = held.table.save(path) {
                eprintln!("docent-terminal-mcp: cannot save {}: {e}", path.display());
            }
            held.stamp = stamp(path);
        }
        out
    }
}

fn plural(n: u32) -> String {
    if n == 1 { "1 secret".into() } else { format!("{n} secrets") }
}

/// Whether `actor` is not yet in the list at `path`; adds it.
fn first_time(path: &PathBuf, actor: &str) -> bool {
    let told = std::fs::read_to_string(path).unwrap_or_default();
    if told.lines().any(|l| l == actor) {
        return false;
    }
    let file = std::os::unix::fs::OpenOptionsExt::mode(std::fs::OpenOptions::new().create(true).append(true), 0o600)
        .open(path);
    if let Ok(mut f) = file {
        let _ = writeln!(f, "{actor}");
    }
    true
}

/// The text of a file the user listed secrets in, if only its owner may
/// read it.
fn read_private(path: &Path) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!("mode {:o}; chmod 600 it", meta.permissions().mode() & 0o777));
    }
    std::fs::read_to_string(path).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_file_readable_by_others_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("values");
        std::fs::write(&path, "value-one-1\n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert!(read_private(&path).unwrap_err().contains("chmod 600"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(read_private(&path).as_deref(), Ok("value-one-1\n"));
    }

    #[test]
    fn the_usage_note_comes_once_per_agent() {
        let dir = tempfile::tempdir().expect("tempdir");
        let counts = Counts([("jwt".to_string(), 2)].into_iter().collect());
        let first = Secrets::note(Some(dir.path()), "a", &counts);
        assert!(first.contains("[redacted 2 secrets: 2 jwt]") && first.contains("Type a placeholder"), "{first}");
        assert!(!Secrets::note(Some(dir.path()), "a", &counts).contains("Type a placeholder"));
        assert!(Secrets::note(Some(dir.path()), "b", &counts).contains("Type a placeholder"));
    }

    #[test]
    fn replies_at_once_keep_every_placeholder_and_see_other_writers() {
        let dir = tempfile::tempdir().expect("tempdir");
        let secrets = Secrets { on: true, ..Default::default() };
        let token = |i: usize| format!("ghp_{i:02}A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7");
        std::thread::scope(|s| {
            for i in 0..8 {
                let (secrets, dir) = (&secrets, dir.path());
                s.spawn(move || secrets.redact(Some(dir), &format!("echo {}", token(i))));
            }
        });
        // Every one of them has a placeholder of its own, on disk.
        let table = Table::load(&dir.path().join(TABLE_FILE));
        let mut values: Vec<String> = (1..=8)
            .map(|n| table.substitute(&format!("‹secret:github-token:{n}›")).expect("every number is known"))
            .collect();
        values.sort();
        assert_eq!(values, (0..8).map(token).collect::<Vec<_>>());
        // A table another process wrote is read again.
        let mut other = Table::default();
        let (_, _) = redact::redact(&token(42), &Known::default(), &mut other);
        other.save(&dir.path().join(TABLE_FILE)).expect("save");
        let (out, _) = secrets.redact(Some(dir.path()), &token(42));
        assert_eq!(out, "‹secret:github-token:1›");
    }
}
