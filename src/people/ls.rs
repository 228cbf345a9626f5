//! `ls`: one line per session, or a JSON array with `--json`.

use super::look::{Facts, LoggerState, State};
use super::style::{Paint, Style, cells, fit, fit_tail, pad};
use super::{Failure, Home, Out, Outcome, age, first_line, size};

/// Arguments of `ls`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "\
Examples:
  dtmcp ls                          the open sessions
  dtmcp ls --all                    closed ones too, while their logs remain
  dtmcp ls --state waiting          the sessions where a program waits for input
  dtmcp ls --json | jq -r '.[] | select(.last_exit != 0) | .name'")]
pub struct LsArgs {
    /// Also list closed sessions whose logs remain.
    #[arg(long, short = 'a')]
    pub all: bool,
    /// Print a JSON array of objects (fields: name, state, since_ms, program,
    /// command, last_command, last_exit, agents, people, host, cwd,
    /// log_bytes, listening, jobs, …; see the README).
    #[arg(long)]
    pub json: bool,
    /// Only sessions in these states (repeat it, or separate with commas).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "STATE")]
    pub state: Vec<State>,
}

/// Runs `ls`.
pub async fn run(home: Home, args: LsArgs) -> Outcome {
    let closed = args.all || args.state.contains(&State::Closed);
    let mut facts = super::look::all(&home, closed).await?;
    if !args.state.is_empty() {
        facts.retain(|f| args.state.contains(&f.state));
    }
    let mut out = Out::stdout();
    if args.json {
        let text = serde_json::to_string_pretty(&facts).map_err(Failure::of)?;
        return out.line(&text);
    }
    let style = Style::for_stdout();
    let terminal = super::style::stdout_is_terminal();
    if facts.is_empty() && terminal {
        let more = if closed { "" } else { " (--all lists closed ones too)" };
        eprintln!("no sessions{more}");
    }
    let now = crate::config::now_ms();
    let width = if terminal { super::style::stdout_width() } else { None };
    for line in table(&facts, now, style, terminal, width) {
        out.line(&line)?;
    }
    Ok(())
}

/// The column headings.
const HEADINGS: [&str; 8] = ["NAME", "STATE", "LAST", "LISTENING", "AGENTS", "PEOPLE", "WHERE", "LOG"];
/// The widest each column gets, in cells.
const CAPS: [usize; 8] = [64, 44, 36, 40, 30, 16, 32, 16];

/// The table's lines: a heading when `heading`, then one line per session,
/// cut to `width` cells when given.
pub fn table(facts: &[Facts], now: u64, style: Style, heading: bool, width: Option<usize>) -> Vec<String> {
    let rows: Vec<[(String, Option<Paint>); 8]> = facts.iter().map(|f| cells_of(f, now)).collect();
    let mut widths = [0usize; 8];
    for (i, w) in widths.iter_mut().enumerate() {
        let longest = rows.iter().map(|r| cells(&r[i].0)).max().unwrap_or(0);
        *w = longest.max(if heading { HEADINGS[i].len() } else { 0 });
    }
    let mut lines = Vec::with_capacity(rows.len() + 1);
    if heading && !rows.is_empty() {
        let heads = HEADINGS.map(|h| (h.to_string(), Some(Paint::Bold)));
        lines.push(join(&heads, &widths, style, width));
    }
    for row in &rows {
        lines.push(join(row, &widths, style, width));
    }
    lines
}

/// One line of padded cells, painted, cut at `width` cells.
fn join(row: &[(String, Option<Paint>); 8], widths: &[usize; 8], style: Style, width: Option<usize>) -> String {
    let mut line = String::new();
    let mut used = 0;
    let last = row.len() - 1;
    for (i, (text, paint)) in row.iter().enumerate() {
        let mut text = if i == last { text.clone() } else { pad(text, widths[i]) };
        if let Some(room) = width.map(|w| w.saturating_sub(used)) {
            if room == 0 {
                break;
            }
            text = fit(&text, room);
        }
        used += cells(&text) + 2;
        let trimmed = text.trim_end();
        let blanks = &text[trimmed.len()..];
        line.push_str(&match paint {
            Some(p) => style.paint(*p, trimmed),
            None => trimmed.to_string(),
        });
        line.push_str(blanks);
        if i < last {
            line.push_str("  ");
        }
    }
    line.trim_end().to_string()
}

fn cells_of(f: &Facts, now: u64) -> [(String, Option<Paint>); 8] {
    let fitted = |s: String, i: usize| fit(&s, CAPS[i]);
    [
        (fitted(f.name.clone(), 0), Some(Paint::Cyan)),
        (fitted(state_text(f, now), 1), Some(state_paint(f))),
        (fitted(last_text(f), 2), last_paint(f)),
        (fitted(listening_text(f), 3), (!f.listening.is_empty()).then_some(Paint::Green)),
        (fitted(agents_text(f, now), 4), None),
        (fitted(people_text(f, now), 5), None),
        (fit_tail(&where_text(f), CAPS[6]), None),
        (fitted(log_text(f), 7), (f.gaps > 0).then_some(Paint::Yellow)),
    ]
}

/// What the session does, and for how long.
pub fn state_text(f: &Facts, now: u64) -> String {
    let since = f.since_ms.map(|t| age(now.saturating_sub(t)));
    let what = f.command.as_deref().map(|c| first_line(c, 30)).or_else(|| f.program.clone()).unwrap_or_default();
    let mut text = match f.state {
        State::Running => format!("running: {what}"),
        State::Waiting => format!("waiting for input: {what}"),
        State::Idle => "at the prompt".to_string(),
        State::Closed => "closed".to_string(),
    };
    match (f.state, since) {
        (State::Closed, Some(s)) => text.push_str(&format!(" {s} ago")),
        (_, Some(s)) => text.push_str(&format!(" ({s})")),
        _ => {}
    }
    match f.logger {
        LoggerState::Down => text.push_str(" [logger down]"),
        LoggerState::Stalled => text.push_str(" [logger stalled]"),
        _ => {}
    }
    text
}

fn state_paint(f: &Facts) -> Paint {
    match (f.logger, f.state) {
        (LoggerState::Down | LoggerState::Stalled, _) => Paint::Red,
        (_, State::Running) => Paint::Yellow,
        (_, State::Waiting) => Paint::Magenta,
        (_, State::Idle) => Paint::Green,
        (_, State::Closed) => Paint::Dim,
    }
}

/// The last command that finished and how.
pub fn last_text(f: &Facts) -> String {
    let Some(command) = &f.last_command else { return "-".to_string() };
    let exit = f.last_exit.map_or_else(|| "exit ?".to_string(), dtmcp_core::exit::short);
    format!("{} ({exit})", first_line(command, 24))
}

fn last_paint(f: &Facts) -> Option<Paint> {
    match f.last_exit {
        Some(0) => None,
        Some(_) => Some(Paint::Red),
        None => Some(Paint::Dim),
    }
}

/// Where its processes listen, and how many background jobs it has;
/// `?` for ports out of sight (inside an ssh).
pub fn listening_text(f: &Facts) -> String {
    let mut parts: Vec<String> = f.listening.iter().map(|l| l.endpoint()).collect();
    if !f.ports_not_seen.is_empty() {
        parts.push(format!("? on {}", f.ports_not_seen.join(", ")));
    }
    match f.jobs.len() {
        0 => {}
        1 => parts.push("1 job".to_string()),
        n => parts.push(format!("{n} jobs")),
    }
    if parts.is_empty() { "-".to_string() } else { parts.join(", ") }
}

/// The agents that typed, the latest two with how long ago.
pub fn agents_text(f: &Facts, now: u64) -> String {
    if f.agents.is_empty() {
        return "-".to_string();
    }
    let mut parts: Vec<String> =
        f.agents.iter().take(2).map(|a| format!("{} {}", a.name, age(now.saturating_sub(a.typed_ms)))).collect();
    if f.agents.len() > 2 {
        parts.push(format!("+{}", f.agents.len() - 2));
    }
    parts.join(", ")
}

/// The people attached, and when one last typed.
pub fn people_text(f: &Facts, now: u64) -> String {
    if f.people.is_empty() {
        return "-".to_string();
    }
    let typed = f.people.iter().filter_map(|p| p.last_input_ms).max();
    match typed {
        Some(t) => format!("{}, typed {}", f.people.len(), age(now.saturating_sub(t))),
        None => f.people.len().to_string(),
    }
}

/// Where it runs: host and directory, the home directory as `~`.
pub fn where_text(f: &Facts) -> String {
    let mut host = f.host.clone();
    if let Some(user) = f.user.as_ref().filter(|u| Some(u.as_str()) != me().as_deref()) {
        host = format!("{user}@{host}");
    }
    match &f.cwd {
        None => host,
        Some(cwd) => {
            let home = std::env::var("HOME").unwrap_or_default();
            let cwd = match cwd.strip_prefix(&home) {
                Some(rest) if !home.is_empty() && (rest.is_empty() || rest.starts_with('/')) => format!("~{rest}"),
                _ => cwd.clone(),
            };
            format!("{host}:{cwd}")
        }
    }
}

/// The name of the user running this command.
fn me() -> Option<String> {
    crate::config::user_name()
}

fn log_text(f: &Facts) -> String {
    match f.gaps {
        0 => size(f.log_bytes),
        1 => format!("{} (1 gap)", size(f.log_bytes)),
        n => format!("{} ({n} gaps)", size(f.log_bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::people::look::{Agent, Person};

    fn facts(name: &str, state: State) -> Facts {
        Facts {
            name: name.into(),
            state,
            since_ms: Some(40_000),
            program: Some("bash".into()),
            command: None,
            command_region: None,
            started_by: None,
            detail: None,
            last_command: Some("ls -la".into()),
            last_exit: Some(0),
            last_region: Some(3),
            agents: vec![Agent { name: "claude".into(), typed_ms: 58_000 }],
            people: Vec::new(),
            host: "box".into(),
            user: None,
            cwd: Some("/srv".into()),
            log_bytes: 2048,
            lines: 10,
            gaps: 0,
            logger: LoggerState::Ok,
            attach: None,
            ended: None,
            dir: "/tmp/x".into(),
            created_ms: 1,
            listening: Vec::new(),
            jobs: Vec::new(),
            ports_not_seen: Vec::new(),
        }
    }

    #[test]
    fn each_session_is_one_aligned_line_without_colour_in_a_pipe() {
        let mut running = facts("t10", State::Running);
        running.command = Some("make -j4\nsecond".into());
        running.last_exit = Some(2);
        running.people =
            vec![Person { tty: "/dev/pts/3".into(), cols: 80, rows: 24, attached_ms: 1, last_input_ms: Some(55_000) }];
        running.gaps = 1;
        let lines = table(&[facts("t1", State::Idle), running], 60_000, Style::plain(), true, None);
        assert_eq!(lines.len(), 3, "{lines:#?}");
        assert!(lines[0].starts_with("NAME  STATE"), "{}", lines[0]);
        assert!(lines[1].starts_with("t1    at the prompt (20s)"), "{}", lines[1]);
        assert!(lines[2].contains("running: make -j4… (20s)"), "{}", lines[2]);
        assert!(lines[2].contains("ls -la (exit 2)") && lines[2].contains("1, typed 5s"), "{}", lines[2]);
        assert!(lines[2].ends_with("2.0K (1 gap)"), "{}", lines[2]);
        assert!(lines.iter().all(|l| !l.contains('\x1b')));
        let column = |l: &str| cells(&l[..l.find("claude").expect("agents")]);
        assert_eq!(column(&lines[1]), column(&lines[2]), "columns line up");
    }

    #[test]
    fn colour_on_a_terminal_and_lines_cut_to_its_width() {
        let lines = table(&[facts("t1", State::Closed)], 60_000, Style { on: true }, true, Some(30));
        assert!(lines[1].contains("\x1b[2mclosed 20s ago"), "{:?}", lines[1]);
        let plain = table(&[facts("t1", State::Closed)], 60_000, Style::plain(), true, Some(30));
        assert!(plain.iter().all(|l| cells(l) <= 30), "{plain:#?}");
    }

    #[test]
    fn states_say_what_waits() {
        let mut f = facts("t1", State::Waiting);
        f.program = Some("python3".into());
        f.logger = LoggerState::Down;
        assert_eq!(state_text(&f, 100_000), "waiting for input: python3 (1m) [logger down]");
        f.last_exit = None;
        assert_eq!(last_text(&f), "ls -la (exit ?)");
        assert_eq!(where_text(&f), "box:/srv");
    }

    #[test]
    fn what_listens_is_one_cell() {
        let mut f = facts("t1", State::Running);
        assert_eq!(listening_text(&f), "-");
        f.listening = vec![dtmcp_core::procs::sockets::Listener {
            kind: dtmcp_core::procs::sockets::Kind::Tcp,
            address: Some("127.0.0.1".parse().expect("ip")),
            port: Some(8123),
            path: None,
            pid: 7,
            program: "python3".into(),
            command: "python3 -m http.server 8123".into(),
        }];
        f.ports_not_seen = vec!["box via ssh".into()];
        assert_eq!(listening_text(&f), "127.0.0.1:8123, ? on box via ssh");
        let lines = table(&[f], 60_000, Style::plain(), true, None);
        assert!(lines[0].contains("LISTENING") && lines[1].contains("127.0.0.1:8123"), "{lines:#?}");
    }
}
