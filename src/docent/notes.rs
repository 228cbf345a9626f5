//! Notes in replies: a short piece of advice given the first time a
//! situation arises, once per agent per session. [`notes`] is a pure
//! function from the facts of one reply ([`Situation`]) to the notes that
//! apply; [`fresh`] keeps those already given out, by the agent's state in
//! the session (kept by the session's logger, see [`dtmcp_core::agent_state`]),
//! so a note is never repeated to the same agent in the same session.

use std::sync::LazyLock;

use regex::bytes::Regex;

use dtmcp_core::agent_state::AgentState;

/// The most notes one reply carries; the rest wait for the next reply in
/// which they still apply.
pub const MAX_PER_REPLY: usize = 2;

/// The facts a reply knows, gathered by the tool that composes it.
#[derive(Clone, Debug, Default)]
pub struct Situation<'a> {
    /// The session's name.
    pub session: &'a str,
    /// The tool replying: `run`, `wait`, `send` or `expect`.
    pub tool: &'a str,
    /// The command line the call typed, if it typed one.
    pub command: Option<&'a str>,
    /// The region of the command the reply is about.
    pub region: Option<u64>,
    /// The program holding the terminal, when it is not the session's shell.
    pub program: Option<&'a str>,
    /// The pager reading the terminal (`less` under `git log`), if one does.
    pub pager: Option<&'a str>,
    /// That program waits for input from the terminal.
    pub waiting: bool,
    /// It waits at a password prompt (input not echoed).
    pub password: bool,
    /// The unfinished line on screen: a program's prompt when it waits.
    pub prompt: Option<&'a str>,
    /// The command is still running after the reply (a timeout, not a prompt).
    pub running: bool,
    /// A full-screen program has the alternate screen.
    pub fullscreen: bool,
    /// A shell at its prompt that the shell integration does not reach.
    pub plain_shell: bool,
    /// The host the session moved to (over ssh), if it did.
    pub host: Option<&'a str>,
    /// The user the session now runs as, if another.
    pub user: Option<&'a str>,
    /// What leads to `host` when it is not ssh: `podman`, `kubectl`...
    pub carrier: Option<&'a str>,
    /// Whether `host` and `user` were looked up (a reply that looked only
    /// at its own text knows nothing of where the session is).
    pub place_known: bool,
    /// How many people are attached to the session.
    pub attached: u32,
    /// A person typed in the session since the agent's last call.
    pub person_typed: bool,
    /// The reply clipped the output.
    pub clipped: bool,
    /// The caller is named by its client's name alone, where two copies of
    /// that client could not be told apart (2026-07-28 over HTTP with no
    /// header, no named token and no bridge).
    pub alike: bool,
}

/// One note, with the key that makes it once-only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// What makes two notes the same: the situation, and for some the
    /// program or place it names.
    pub key: String,
    /// What the reply says.
    pub text: String,
}

impl Note {
    fn new(key: impl Into<String>, text: String) -> Note {
        Note { key: key.into(), text }
    }
}

// The habits are spelled in ASCII (`(?-u)`), over the command's bytes: a
// Unicode `\s` or `.` is compiled through a UTF-8 automaton whose working
// table takes 320 kB while it is built, a spike in the router's resident
// memory on the first `run`, for spellings no shell command needs.
static TAIL_HEAD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?-u)\|\s*(tail|head)\b").expect("regex"));
static PAGER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?-u)\|\s*(less|more)\b").expect("regex"));
static TEE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?-u)\|\s*tee\b").expect("regex"));
static BACKGROUND_THEN_SLEEP: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?-u)[^&]&\s*(\w+=\S*\s+)*sleep\s").expect("regex"));
static POLL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?-u)\bsleep\s+[\d.]+[smh]?\s*(;|&&)\s*(cat|tail|head|grep|ls|wc|jobs|ps|curl)\b|\bwhile\b.*\bsleep\b")
        .expect("regex")
});

/// The notes that apply to `s`, most useful first.
pub fn notes(s: &Situation) -> Vec<Note> {
    let mut out = Vec::new();
    if s.alike {
        out.push(name_yourself());
    }
    if s.person_typed || s.attached > 0 {
        out.push(person(s));
    }
    match place(s.host.map(|h| with_carrier(h, s.carrier)).as_deref(), s.user) {
        Some(place) => {
            out.push(moved(s.session, &place));
            // Whatever waits there is that host's shell, not a program to answer.
            if s.host.is_some() {
                return finish(out, s);
            }
        }
        None if s.place_known => out.push(home(s.session)),
        None => {}
    }
    if let (Some(pager), Some(program), true) = (s.pager, s.program, s.waiting) {
        out.push(paging(s, program, pager));
    } else if s.fullscreen {
        out.push(fullscreen(s));
    } else if let (Some(program), true) = (s.program, s.waiting) {
        out.push(prompt(s, program));
        if s.tool == "run" || s.tool == "expect" {
            out.push(foreground(s.session, program));
        }
    }
    if s.plain_shell {
        out.push(plain_shell(s));
    }
    finish(out, s)
}

fn name_yourself() -> Note {
    Note::new(
        "name-yourself".to_string(),
        "note: this server knows you only by your client's name, and so would another copy of the same \
         client: its text at a prompt would pass for yours. Name yourself with the X-Terminal-Actor header, \
         a token from `docent-terminal-mcp token --agent NAME`, or connect through `docent-terminal-mcp connect`."
            .to_string(),
    )
}

fn moved(name: &str, place: &str) -> Note {
    Note::new(
        format!("moved:{place}"),
        format!(
            "note: {name} is now {place}: commands typed with run execute there. Exit statuses need the \
             shell integration on that side; `exit` returns to the shell before."
        ),
    )
}

/// The key of the place a session starts at: its own host and user.
pub const HOME: &str = "moved:home";

fn home(name: &str) -> Note {
    Note::new(HOME, format!("note: {name} is back on this host as the server's user: commands run here again."))
}

fn foreground(name: &str, program: &str) -> Note {
    Note::new(
        format!("foreground:{program}"),
        format!(
            "note: `{program}` is still in the foreground of {name}: it needs no relaunch, and send types \
             into it. {}",
            leave(program)
        ),
    )
}

/// A container's or sandbox's name with what leads there: `box (podman)`.
fn with_carrier(host: &str, carrier: Option<&str>) -> String {
    match carrier {
        Some(c) if c != "ssh" => format!("{host} ({c})"),
        _ => host.to_string(),
    }
}

/// Where the session moved to, in words (`on db1 as root`), if it did.
fn place(host: Option<&str>, user: Option<&str>) -> Option<String> {
    match (host, user) {
        (Some(h), Some(u)) => Some(format!("on {h} as {u}")),
        (Some(h), None) => Some(format!("on {h}")),
        (None, Some(u)) => Some(format!("running as {u}")),
        (None, None) => None,
    }
}

/// Adds the notes that do not depend on what holds the terminal.
fn finish(mut out: Vec<Note>, s: &Situation) -> Vec<Note> {
    let name = s.session;
    if let Some(command) = s.command {
        out.extend(habits(name, command));
    }
    if s.running && !s.waiting {
        out.push(Note::new(
            "running",
            format!(
                "note: a command that outlives the timeout keeps running and loses nothing: \
                 wait session={name} picks it up (again as often as needed), until=\"regex\" returns \
                 as soon as a line appears, and a longer timeout (at most 600) needs fewer calls."
            ),
        ));
    }
    if s.clipped {
        let region = s.region.map_or_else(|| "from_line=… to_line=…".to_string(), |r| format!("region={r}"));
        out.push(Note::new(
            "clipped",
            format!(
                "note: the middle of this output was left out, not lost: read session={name} {region} \
                 pages through it, search session={name} {region} pattern=\"…\" finds lines in it, and \
                 on run or wait, show=\"regex\" or last_lines=N shape the reply up front."
            ),
        ));
    }
    out
}

fn person(s: &Situation) -> Note {
    let who = if s.person_typed { "a person typed in" } else { "a person is attached to" };
    Note::new(
        "person",
        format!(
            "note: {who} {}: look before typing (read view=\"screen\"; a half-typed line of theirs \
             would join your command), say what you are doing, and do not close it under them.",
            s.session
        ),
    )
}

fn prompt(s: &Situation, program: &str) -> Note {
    let name = s.session;
    let quoted = s.prompt.map(str::trim).filter(|p| !p.is_empty()).map(|p| format!(" at {p:?}")).unwrap_or_default();
    let text = if s.password {
        format!(
            "note: `{program}` waits for a password{quoted}. Ask the person to type it (they attach with the \
             command session_list gives); what is typed there is neither echoed nor logged."
        )
    } else {
        format!(
            "note: `{program}` waits for input{quoted}. Answer with send session={name} text=\"…\" \
             keys=[\"enter\"], or expect with rules for several questions; the reply shows what it prints next."
        )
    };
    Note::new(format!("prompt:{program}"), text)
}

fn fullscreen(s: &Situation) -> Note {
    let program = s.program.unwrap_or("a full-screen program");
    Note::new(
        format!("fullscreen:{program}"),
        format!(
            "note: {program} draws on the full screen, so its log lines are cursor movements: see it with \
             read session={} view=\"screen\" or send … screen=\"full\", drive it with keys. {}",
            s.session,
            leave(program)
        ),
    )
}

fn paging(s: &Situation, program: &str, pager: &str) -> Note {
    let name = s.session;
    let shows = match program == pager {
        true => format!("`{pager}` is a pager"),
        false => format!("`{program}` shows its output in the pager `{pager}`"),
    };
    let read = s.region.map_or_else(|| format!("read session={name}"), |r| format!("read session={name} region={r}"));
    Note::new(
        format!("pager:{program}"),
        format!(
            "note: {shows}, which takes keys, not command lines: send session={name} keys=[\"q\"] quits it, \
             keys=[\"space\"] pages on. Only the pages it shows reach the log ({read}): for the whole output, \
             quit it and run the command with `git --no-pager …` or `systemctl --no-pager …`, or export \
             PAGER=cat GIT_PAGER=cat once in the session."
        ),
    )
}

fn plain_shell(s: &Situation) -> Note {
    Note::new(
        "plain-shell",
        format!(
            "note: the shell at {0}'s prompt has no shell integration: run goes by its prompt (prompt_pattern \
             at session_create for one it does not know), and exit statuses are unknown there. \
             shell_integrate session={0} adds the integration to a bash or zsh; in sh or fish end commands \
             with `; echo \"exit=$?\"` (fish: `$status`) and wait with until=\"exit=\".",
            s.session
        ),
    )
}

/// How to leave `program` and get the shell back. A pager's own note
/// (`paging`) covers `git log` and its kin: a `git` without one waits at
/// a question of its own (a credential prompt), which ctrl+c leaves.
fn leave(program: &str) -> String {
    // python3.13 and its kin are python.
    let versioned = program.strip_prefix("python").is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'));
    let keys = match if versioned { "python" } else { program } {
        "gdb" | "lldb" => "text=\"quit\" keys=[\"enter\"] (answer y if asked)",
        "python" | "python3" | "ipython" | "node" | "irb" | "bash" | "sh" | "zsh" => "keys=[\"ctrl+d\"]",
        "psql" => "text=\"\\\\q\" keys=[\"enter\"]",
        "sqlite3" => "text=\".quit\" keys=[\"enter\"]",
        "mysql" | "ssh" => "text=\"exit\" keys=[\"enter\"]",
        "less" | "more" | "man" | "top" | "htop" | "btop" => "keys=[\"q\"]",
        // procps' watch (Debian 12's 4.0.2) ignores q: only a signal ends it.
        "watch" => "keys=[\"ctrl+c\"]",
        "cat" | "tee" | "sort" | "wc" | "bc" => "keys=[\"ctrl+d\"] (the end of its input)",
        "vim" | "vi" | "nvim" | "vim.basic" | "vim.tiny" => {
            "keys=[\"escape\"], then text=\":q!\" keys=[\"enter\"] (or :wq to save)"
        }
        "nano" => "keys=[\"ctrl+x\"]",
        // A tmux client inside the pane detaches; its server and sessions go on.
        "tmux: client" | "tmux" => "keys=[\"ctrl+b\", \"d\"] (detaches: its sessions go on)",
        "emacs" => "keys=[\"ctrl+x\", \"ctrl+c\"]",
        _ => "its own quit command, or keys=[\"ctrl+c\"]",
    };
    let program = program.strip_prefix("a ").unwrap_or(program);
    format!("To leave {program}: send {keys}.")
}

/// Notes about shell habits a session makes unnecessary.
fn habits(name: &str, command: &str) -> Vec<Note> {
    let mut out = Vec::new();
    if let Some(m) = TAIL_HEAD.captures(command.as_bytes()).and_then(|c| c.get(1)) {
        out.push(Note::new(
            "pipe-tail-head",
            format!(
                "note: `| {}` is unnecessary here: long output comes back clipped to its head and tail, \
                 last_lines=N gives only the end, and read session={name} region=N any part, so the \
                 command's whole output stays available.",
                String::from_utf8_lossy(m.as_bytes())
            ),
        ));
    }
    if PAGER.is_match(command.as_bytes()) {
        out.push(Note::new(
            "pipe-pager",
            "note: `| less` is unnecessary: run returns the output itself, and read pages through it. \
             A pager waits for keys; send keys=[\"q\"] if one is showing."
                .to_string(),
        ));
    }
    if TEE.is_match(command.as_bytes()) {
        out.push(Note::new(
            "pipe-tee",
            "note: `| tee` (and `2>&1`) are unnecessary: the session logs everything the command prints, \
             stderr included, and save_to=\"/absolute/path\" writes a copy of the output to a file."
                .to_string(),
        ));
    }
    if POLL.is_match(command.as_bytes()) {
        // `server & sleep 1; curl …`: the sleep waits for a port.
        let text = match BACKGROUND_THEN_SLEEP.is_match(command.as_bytes()) {
            true => format!(
                "note: instead of sleeping until a server started with `&` is up, run it alone with \
                 port=N (or listening=true): run returns the moment it listens, or at once with its exit \
                 status if it fails; then run the client. In another session (session_create) it keeps \
                 {name} free."
            ),
            false => format!(
                "note: instead of sleeping and looking, wait session={name} until=\"regex\" returns the \
                 moment a line appears (or when the command ends), without a fixed delay."
            ),
        };
        out.push(Note::new("polling", text));
    }
    out
}

/// The notes of `all` not yet given to the agent whose state is `given`,
/// at most [`MAX_PER_REPLY`]; those returned count as given. A place note
/// (`moved:`) is given when the place differs from the one the agent was
/// last told (none yet means [`HOME`]), so each move is told once, coming
/// back included.
pub fn fresh(given: &mut AgentState, all: Vec<Note>) -> Vec<Note> {
    let mut out = Vec::new();
    for n in all {
        if out.len() == MAX_PER_REPLY {
            break;
        }
        let fresh = match n.key.starts_with("moved:") {
            true => {
                let last = given.place.as_deref().unwrap_or(HOME);
                (last != n.key).then(|| given.place = Some(n.key.clone())).is_some()
            }
            false => given.notes.insert(n.key.clone()),
        };
        if fresh {
            out.push(n);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn base() -> Situation<'static> {
        Situation { session: "t1", tool: "run", ..Situation::default() }
    }

    /// One situation per case, and the note keys it must give, in order.
    #[rstest]
    #[case::nothing_to_say(base(), &[])]
    #[case::tail(Situation { command: Some("seq 1 100000 | tail -3"), ..base() }, &["pipe-tail-head"])]
    #[case::head(Situation { command: Some("journalctl|head"), ..base() }, &["pipe-tail-head"])]
    #[case::less(Situation { command: Some("git log | less"), ..base() }, &["pipe-pager"])]
    #[case::tee(Situation { command: Some("make 2>&1 | tee build.log"), ..base() }, &["pipe-tee"])]
    #[case::polling(Situation { command: Some("sleep 5; cat out.txt"), ..base() }, &["polling"])]
    #[case::server_then_sleep(
        Situation { command: Some("python3 -m http.server 8000 & sleep 1; curl localhost:8000"), ..base() },
        &["polling"]
    )]
    #[case::polling_loop(Situation { command: Some("while ! test -f x; do sleep 1; done"), ..base() }, &["polling"])]
    #[case::tail_f_is_not_a_pipe(Situation { command: Some("tail -n 3 log"), ..base() }, &[])]
    #[case::prompt(
        Situation { program: Some("python3"), waiting: true, prompt: Some(">>> "), ..base() },
        &["prompt:python3", "foreground:python3"]
    )]
    #[case::prompt_on_send(
        Situation { tool: "send", program: Some("gdb"), waiting: true, prompt: Some("(gdb) "), ..base() },
        &["prompt:gdb"]
    )]
    #[case::busy_program(Situation { program: Some("make"), running: true, ..base() }, &["running"])]
    #[case::timeout_on_wait(Situation { tool: "wait", running: true, ..base() }, &["running"])]
    #[case::fullscreen(Situation { program: Some("vim"), fullscreen: true, waiting: true, ..base() }, &["fullscreen:vim"])]
    #[case::pager(
        Situation { program: Some("git"), pager: Some("less"), waiting: true, prompt: Some(":"), ..base() },
        &["pager:git"]
    )]
    #[case::pager_on_the_alternate_screen(
        Situation { program: Some("man"), pager: Some("less"), waiting: true, fullscreen: true, ..base() },
        &["pager:man"]
    )]
    #[case::plain_shell(Situation { plain_shell: true, ..base() }, &["plain-shell"])]
    #[case::moved(
        Situation { program: Some("ssh"), host: Some("db1"), user: Some("root"), waiting: true, ..base() },
        &["moved:on db1 as root"]
    )]
    #[case::container(
        Situation { program: Some("podman"), host: Some("box"), carrier: Some("podman"), ..base() },
        &["moved:on box (podman)"]
    )]
    #[case::su(Situation { user: Some("postgres"), ..base() }, &["moved:running as postgres"])]
    #[case::home_looked_up(Situation { place_known: true, ..base() }, &["moved:home"])]
    #[case::person(Situation { attached: 1, ..base() }, &["person"])]
    #[case::clipped(Situation { clipped: true, region: Some(4), ..base() }, &["clipped"])]
    fn situations_give_their_notes(#[case] s: Situation<'static>, #[case] keys: &[&str]) {
        let got: Vec<String> = notes(&s).into_iter().map(|n| n.key).collect();
        assert_eq!(got, keys);
    }

    /// Each (session, agent)'s state, as the logger keeps it.
    #[derive(Default)]
    struct Given(std::cell::RefCell<std::collections::HashMap<(String, String), AgentState>>);

    impl Given {
        fn fresh(&self, session: &str, actor: &str, all: Vec<Note>) -> Vec<Note> {
            let mut held = self.0.borrow_mut();
            fresh(held.entry((session.into(), actor.into())).or_default(), all)
        }
    }

    #[test]
    fn every_move_is_told_once_coming_back_included() {
        let given = Given::default();
        let at = |host: Option<&'static str>| Situation { host, place_known: true, ..base() };
        let told = |s: &Situation| given.fresh("t1", "a", notes(s)).into_iter().map(|n| n.key).collect::<Vec<_>>();
        assert!(told(&at(None)).is_empty(), "at home from the start: nothing to say");
        assert_eq!(told(&at(Some("db1"))), ["moved:on db1"]);
        assert!(told(&at(Some("db1"))).is_empty(), "still there: said already");
        assert_eq!(told(&at(None)), ["moved:home"]);
        assert!(told(&Situation { place_known: false, ..base() }).is_empty(), "unknown says nothing");
        assert_eq!(told(&at(Some("db1"))), ["moved:on db1"], "moving again is news again");
        // Another agent is told for itself.
        assert_eq!(given.fresh("t1", "b", notes(&at(Some("db1")))).len(), 1);
    }

    #[test]
    fn notes_say_what_to_do() {
        let s = Situation { program: Some("python3"), waiting: true, prompt: Some(">>> "), ..base() };
        let all = notes(&s);
        assert!(all[0].text.contains("\">>>\"") && all[0].text.contains("send session=t1"), "{}", all[0].text);
        assert!(all[1].text.contains("ctrl+d"), "{}", all[1].text);
        let tail = notes(&Situation { command: Some("seq 9 | tail -3"), ..base() });
        assert!(tail[0].text.contains("`| tail`") && tail[0].text.contains("last_lines"), "{}", tail[0].text);
        let clipped = notes(&Situation { clipped: true, region: Some(4), ..base() });
        assert!(clipped[0].text.contains("read session=t1 region=4"), "{}", clipped[0].text);
        let server = notes(&Situation { command: Some("./serve & sleep 2 && curl -s :80/"), ..base() });
        assert!(server[0].text.contains("port=N"), "{}", server[0].text);
        let and = notes(&Situation { command: Some("make && sleep 2; cat out"), ..base() });
        assert!(and[0].text.contains("until=\"regex\""), "{}", and[0].text);
        let password = notes(&Situation { program: Some("sudo"), waiting: true, password: true, ..base() });
        assert!(password[0].text.contains("Ask the person"), "{}", password[0].text);
        let tmux = notes(&Situation { program: Some("tmux: client"), fullscreen: true, waiting: true, ..base() });
        assert!(tmux[0].text.contains("To leave tmux: client: send keys=[\"ctrl+b\", \"d\"]"), "{}", tmux[0].text);
        // git with no pager waits at a question of its own: q would be typed into it.
        let asks = notes(&Situation { program: Some("git"), waiting: true, prompt: Some("Username: "), ..base() });
        assert!(asks[1].text.contains("ctrl+c") && !asks[1].text.contains("\"q\""), "{}", asks[1].text);
        // watch takes no q.
        assert_eq!(leave("watch"), "To leave watch: send keys=[\"ctrl+c\"].");
        assert_eq!(leave("python3.13"), "To leave python3.13: send keys=[\"ctrl+d\"].");
    }

    #[test]
    fn a_note_is_given_once_per_agent_and_session() {
        let given = Given::default();
        let all = || notes(&Situation { command: Some("x | tail"), ..base() });
        assert_eq!(given.fresh("t1", "claude", all()).len(), 1);
        assert!(given.fresh("t1", "claude", all()).is_empty(), "not twice");
        assert_eq!(given.fresh("t1", "codex", all()).len(), 1, "another agent hears it too");
        assert_eq!(given.fresh("t2", "claude", all()).len(), 1, "and so does another session");
    }

    #[test]
    fn a_reply_carries_at_most_two_notes_and_the_rest_come_later() {
        let given = Given::default();
        let s = Situation { command: Some("sleep 1; cat x | tail | tee y"), ..base() };
        assert_eq!(given.fresh("t1", "a", notes(&s)).len(), MAX_PER_REPLY);
        assert_eq!(given.fresh("t1", "a", notes(&s)).len(), 1);
    }

    #[test]
    fn a_caller_named_by_its_client_alone_is_told_how_to_name_itself() {
        let alike = Situation { session: "t1", tool: "run", alike: true, ..Situation::default() };
        let keys: Vec<String> = notes(&alike).into_iter().map(|n| n.key).collect();
        assert!(keys.contains(&"name-yourself".to_string()), "{keys:?}");
        let named = Situation { alike: false, ..alike };
        assert!(notes(&named).iter().all(|n| n.key != "name-yourself"));
    }
}
