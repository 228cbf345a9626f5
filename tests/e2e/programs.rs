//! Real interactive programs driven through run, send and expect: gdb on
//! a buggy C program, the python3, sqlite3 and node REPLs, vi, top, a
//! plain shell, password prompts, and jobs that ignore ctrl+c.

use serde_json::{Value, json};

use crate::support::{Server, World};
use crate::{assert_has, needs};

/// Runs `command` with a generous timeout; the reply must not be a timeout.
async fn line(s: &Server, command: &str) -> String {
    let r = s.ok("run", json!({"session": "t1", "command": command, "timeout": 20})).await;
    assert!(!r.contains("still running"), "`{command}` sat out its timeout:\n{r}");
    r
}

/// The session's last 50 regions: more than the default 20, as these
/// tests type many lines.
async fn last_regions(s: &Server) -> String {
    s.ok("regions", json!({"session": "t1", "last": 50})).await
}

const BUGGY_C: &str = r#"#include <stdio.h>
int sum_to(int n) {
    int total = 0;
    for (int i = 1; i <= n; i++)
        total += i;
    return total;
}
int main(void) {
    int *p = NULL;
    int s = sum_to(4);
    printf("sum is %d\n", s);
    return *p + s;
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gdb_breaks_runs_and_shows_the_crash() {
    needs!("gdb");
    needs!("gcc");
    let w = World::new();
    let src = w.tmp.path().join("bug.c");
    std::fs::write(&src, BUGGY_C).expect("write source");
    let exe = w.tmp.path().join("bug");
    let cc = std::process::Command::new("gcc").arg("-g").arg("-O0").arg("-o").arg(&exe).arg(&src).status();
    assert!(cc.is_ok_and(|s| s.success()), "gcc failed");
    let s = w.server().await;
    s.create("t1").await;
    let r = line(&s, &format!("gdb -q -nx {}", exe.display())).await;
    assert_has!(r, "waiting for input at `(gdb)`");
    // A question says what it takes: a command line is a wrong answer.
    let r = line(&s, "break no_such_function").await;
    assert_has!(r, "(a yes/no question: it takes y or n;");
    line(&s, "n").await;
    let r = line(&s, "break sum_to").await;
    assert_has!(r, "answered; `gdb` waits at its prompt `(gdb)`");
    // The headline names the program: no job line says it again.
    assert!(!r.contains("`gdb` waits for input"), "{r}");
    // A line typed into a program on this host names no host.
    assert!(!r.contains(" · on "), "{r}");
    assert_has!(r, "Breakpoint 1 at");
    let r = line(&s, "run").await;
    assert_has!(r, "Breakpoint 1, sum_to (n=4)");
    // The program gdb runs is gdb's work, not a job in the background.
    assert!(!r.contains("in the background"), "{r}");
    let r = line(&s, "bt").await;
    assert_has!(r, "#0  sum_to (n=4)");
    assert_has!(r, "#1  ");
    assert!(!r.contains("(gdb) bt"), "the echoed line is the label, not output:\n{r}");
    let r = line(&s, "finish").await;
    assert_has!(r, "Value returned is $1 = 10");
    let r = line(&s, "continue").await;
    assert_has!(r, "sum is 10");
    assert_has!(r, "SIGSEGV");
    let r = line(&s, "print p").await;
    assert_has!(r, "(int *) 0x0");
    let list = last_regions(&s).await;
    assert_has!(list, "input");
    assert_has!(list, "`(gdb) bt`");
    assert_has!(list, "`(gdb) print p`");
    // quit asks whether to kill the program: a question run returns at.
    let r = line(&s, "quit").await;
    assert_has!(r, "(y or n)");
    let r = line(&s, "y").await;
    assert_has!(r, "back at the shell's prompt");
    assert_has!(line(&s, "echo after-gdb").await, "exit 0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_takes_a_multi_line_definition() {
    needs!("python3");
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    assert_has!(line(&s, "python3 -q").await, "waiting for input at `>>>`");
    // A line returns at the next prompt, not after a quiet spell or the timeout.
    let started = std::time::Instant::now();
    assert_has!(line(&s, "6 * 7").await, "42");
    let took = started.elapsed();
    eprintln!("python line to its next prompt: {took:?}");
    assert!(took.as_millis() < 1_000, "{took:?}");
    // The listing names the command that runs, and the line answered last.
    let list = s.call("session_list", json!({})).await;
    assert_has!(list.text, "running: `python3 -q` · answered last: `>>> 6 * 7`");
    let row = &list.structured.expect("structuredContent")["sessions"][0];
    assert_eq!((row["last_command"].as_str(), row["last_answered"].as_str()), (Some("python3 -q"), Some(">>> 6 * 7")));
    let r = line(&s, "def square(x):\n    y = x * x\n    return y\n\nprint(square(7), 'squared')").await;
    assert_has!(r, "49 squared");
    // The lines the definition continues with go in without a report each.
    assert_has!(r, "$ def square(x):\n$     y = x * x\n$     return y\n$ \n");
    assert!(!r.contains("continuation prompt"), "{r}");
    // A block ends with the empty line after it, kept at the end of a run.
    let r = line(&s, "for i in range(2):\n    print('round', i)\n\n").await;
    assert_has!(r, "round 0\nround 1");
    assert_has!(r, "answered; `python3` waits at its prompt `>>>`");
    // A line left open says so, as data too, and an empty command ends it.
    let open = s.call("run", json!({"session": "t1", "command": "for i in range(2): print('loop', i)"})).await;
    assert_has!(
        open.text,
        "at the program's continuation prompt `...`: it waits for the rest of the statement (in python an empty line ends a block: run command=\"\";"
    );
    assert_eq!(open.structured.expect("structuredContent")["state"], "waiting_for_input");
    let r = line(&s, "").await;
    assert_has!(r, "loop 0\nloop 1");
    let list = last_regions(&s).await;
    assert_has!(list, "`>>> def square(x):`");
    assert_has!(list, "`...     return y`");
    // A line whose answer takes a while is waited for, not settled early.
    let r = line(&s, "import time; time.sleep(2); print('slept')").await;
    assert_has!(r, "slept");
    // A line still running at run's timeout is picked up by wait.
    let r = s.ok("run", json!({"session": "t1", "command": "time.sleep(2); print('woke')", "timeout": 0.5})).await;
    assert_has!(r, "still running");
    let r = s.ok("wait", json!({"session": "t1", "timeout": 10})).await;
    assert_has!(r, "woke");
    assert_has!(r, "answered; `python3` waits at its prompt `>>>`");
    // A blank line between two methods would end the class at python's
    // prompt: it is left out, and the class keeps both.
    let r = line(
        &s,
        "class A:\n    def a(self):\n        return 1\n\n    def b(self):\n        return 2\n\nprint(A().b())",
    )
    .await;
    assert_has!(r, "return 1\n$     def b(self):");
    assert_has!(r, "(1 blank line inside an indented block left out");
    assert!(!r.contains("IndentationError"), "{r}");
    assert_has!(r, "\n2\n");
    assert_has!(line(&s, "exit()").await, "back at the shell's prompt");
}

/// Python 3.13's own REPL indents after a `:` by itself: sessions ask for
/// the basic one, so a block typed line by line is indented once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_3_13_takes_a_block_typed_line_by_line() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    assert_has!(line(&s, "echo basic=$PYTHON_BASIC_REPL").await, "basic=1");
    // One that runs: a pyenv shim answers for versions it does not have.
    let pyenv = std::env::var("HOME").map(|h| format!("{h}/.pyenv/versions/3.13.0/bin/python3.13")).unwrap_or_default();
    let runs = |p: &str| std::process::Command::new(p).args(["-c", "pass"]).output().is_ok_and(|o| o.status.success());
    let Some(python) = [pyenv.as_str(), "python3.13"].into_iter().find(|p| runs(p)) else {
        return eprintln!("skipped: no python 3.13 here");
    };
    assert_has!(line(&s, python).await, "waiting for input at `>>>`");
    let r = line(&s, "def f():\n    x = 20\n    return x + 22\n\nprint(f())").await;
    assert!(!r.contains("IndentationError"), "{r}");
    assert_has!(r, "42");
    assert_has!(line(&s, "exit()").await, "back at the shell's prompt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite3_answers_at_its_prompt() {
    needs!("sqlite3");
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    assert_has!(line(&s, "sqlite3").await, "waiting for input at `sqlite>`");
    let r = line(&s, "create table t(a);\ninsert into t values (20), (22);\nselect 'total=' || sum(a) from t;").await;
    assert_has!(r, "total=42");
    // A statement left open shows the continuation prompt.
    let r = line(&s, "select 1 +").await;
    assert_has!(
        r,
        "at the program's continuation prompt `   ...>`: it waits for the rest of the statement (a `;` ends it)"
    );
    assert_has!(line(&s, "1;").await, "2");
    assert_has!(line(&s, ".quit").await, "back at the shell's prompt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_answers_at_its_prompt() {
    needs!("node");
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    assert_has!(line(&s, "node").await, "waiting for input at `>`");
    let r = line(&s, "[1, 2, 3].map(x => x * 7).join('+')").await;
    assert_has!(r, "'7+14+21'");
    assert_has!(line(&s, ".exit").await, "back at the shell's prompt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_shell_gets_input_regions_ending_at_its_prompt() {
    let w = World::new();
    let s = w.server().await;
    s.ok("session_create", json!({"name": "t1", "command": "bash --norc --noprofile"})).await;
    let started = std::time::Instant::now();
    let r = line(&s, "echo plain-$((6 * 7))").await;
    assert_has!(r, "plain-42");
    assert!(started.elapsed().as_secs() < 5, "it should return at the prompt: {:?}", started.elapsed());
    let list = last_regions(&s).await;
    assert_has!(list, "input");
    assert_has!(list, "`bash-");
    assert_has!(list, " echo plain-$((6 * 7))`");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sessions_prompt_pattern_ends_input_regions() {
    let w = World::new();
    let s = w.server().await;
    let e = s.err("session_create", json!({"name": "t1", "prompt_pattern": "("})).await;
    assert_has!(e, "prompt_pattern");
    let args =
        json!({"name": "t1", "command": "env PS1='ready~ ' bash --norc --noprofile", "prompt_pattern": "ready~ $"});
    s.ok("session_create", args).await;
    let started = std::time::Instant::now();
    let r = line(&s, "echo custom-prompt").await;
    assert_has!(r, "back at the shell's prompt `ready~` · exit status unknown");
    assert!(started.elapsed().as_millis() < 1_400, "ended by the pattern, not by settling: {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vi_returns_at_its_first_screen_and_quits_with_its_keys() {
    needs!("vi");
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let file = w.tmp.path().join("note.txt");
    let r = line(&s, &format!("vi {}", file.display())).await;
    assert_has!(r, "holds the screen");
    assert_has!(r, "alternate screen on");
    s.ok("send", json!({"session": "t1", "text": "ihello from vi", "keys": ["escape"]})).await;
    let r =
        s.ok("send", json!({"session": "t1", "text": ":wq", "keys": ["enter"], "wait": 1.0, "screen": "cursor"})).await;
    assert_has!(r, "alternate screen off");
    assert_eq!(std::fs::read_to_string(&file).unwrap_or_default(), "hello from vi\n");
    assert_has!(line(&s, "echo after-vi").await, "exit 0");
    // A command line is not typed into an editor key by key.
    line(&s, &format!("vi {}", file.display())).await;
    let why = s.err("run", json!({"session": "t1", "command": "echo into-vi"})).await;
    assert_has!(why, "draws on the whole screen of t1 and takes keys, not command lines, so nothing was typed");
    s.ok("send", json!({"session": "t1", "text": ":q", "keys": ["enter"], "wait": 0.5})).await;
    assert_eq!(std::fs::read_to_string(&file).unwrap_or_default(), "hello from vi\n");
    assert_has!(line(&s, "echo after-vi-again").await, "exit 0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_made_with_a_program_treats_it_as_that_program_not_a_shell() {
    needs!("python3");
    let w = World::new();
    let s = w.server().await;
    // The command runs under `sh -c`: that shell is no prompt anyone types
    // at, and python's `>>>` is no shell's prompt.
    let made = s.ok("session_create", json!({"name": "py", "command": "python3 -q"})).await;
    assert!(!made.contains("no shell integration"), "{made}");
    let r = s.ok("run", json!({"session": "py", "command": "6*7"})).await;
    assert_has!(r, "answered; `python3` waits at its prompt `>>>`");
    assert_has!(r, "42");
    assert!(!r.contains("shell's prompt") && !r.contains("shell integration"), "{r}");
    let list = s.ok("session_list", json!({})).await;
    assert_has!(list, "py: python3 in ");
    // A script's own `read` loop is no shell's prompt either.
    let looped = "while true; do read -p 'cmd? ' x; echo got $x; done";
    let made = s.ok("session_create", json!({"name": "loop", "command": looped})).await;
    assert!(!made.contains("no shell integration"), "{made}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_a_command_opens_is_named_and_keys_after_it_reach_the_shell_safely() {
    needs!("vi");
    needs!("git");
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let repo = w.tmp.path().join("repo");
    line(&s, &format!("git init -q {0} && cd {0}", repo.display())).await;
    // The editor git starts takes the keys, and is the one named.
    let r = line(&s, "git -c core.editor=vi -c user.name=t -c user.email=t@t commit --allow-empty").await;
    assert_has!(r, "(`vi`, under `git`) holds the screen");
    assert_has!(r, "To leave vi: send keys=[\"escape\"]");
    // Text then keys: `:q!` ends vi and the commit, so the Escape after it
    // reaches the shell's prompt, where it would make the next command's
    // first key alt+g.
    let sent = s.ok("send", json!({"session": "t1", "text": ":q!\r", "keys": ["escape"], "wait": 1.0})).await;
    assert_has!(sent, "Aborting commit");
    assert_has!(sent, "a run cancels that (ctrl+g)");
    let r = line(&s, "git status --short --branch").await;
    assert!(r.contains("exit 0") && r.contains("## "), "{r}\nscreen:\n{}", w.screen("t1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_start_without_a_pager_unless_asked_for_one() {
    needs!("git");
    needs!("less");
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let repo = w.tmp.path().join("repo");
    line(&s, &format!("git init -q {0} && cd {0}", repo.display())).await;
    let commits = (1..=60).map(|i| format!("git -c user.name=t -c user.email=t@t commit -q --allow-empty -m c{i}"));
    line(&s, &commits.collect::<Vec<_>>().join(" && ")).await;
    // The whole log comes back at once, with its status: no pager waits.
    let r = line(&s, "git log --oneline").await;
    assert_has!(r, "exit 0");
    assert_has!(r, " c60\n");
    assert!(!r.contains("pager"), "{r}");
    // A session asked for one has it.
    let made = s.ok("session_create", json!({"name": "t2", "cwd": repo, "env": {"GIT_PAGER": "less"}})).await;
    assert_has!(made, "ready");
    let r = s.ok("run", json!({"session": "t2", "command": "git log --oneline", "timeout": 5})).await;
    assert_has!(r, "`git` shows its output in the pager `less`");
    s.ok("send", json!({"session": "t2", "keys": ["q"], "wait": 0.5})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_on_the_alternate_screen_takes_no_command_line_even_unknown() {
    needs!("python3");
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let menu = "import curses; curses.wrapper(lambda w: (w.addstr(0, 0, 'pick-a-key'), w.refresh(), w.getch()))";
    let r = s.ok("run", json!({"session": "t1", "command": format!("python3 -c \"{menu}\""), "timeout": 10})).await;
    assert_has!(r, "pick-a-key");
    let why = s.err("run", json!({"session": "t1", "command": "echo typed-into-the-menu"})).await;
    assert_has!(why, "`python3` (under `python3 -c");
    assert_has!(why, "draws on the whole screen of t1 and takes keys, not command lines, so nothing was typed");
    s.ok("send", json!({"session": "t1", "keys": ["x"], "wait": 0.5})).await;
    let r = line(&s, "echo after-the-menu").await;
    assert_has!(r, "exit 0");
    assert!(!r.contains("typed-into-the-menu"), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pager_is_told_and_takes_no_command_line() {
    needs!("less");
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    // less -X keeps the normal screen (git's LESS=FRX does): only the
    // program reading the terminal tells it is a pager.
    let r = line(&s, "seq 1 500 | LESS=X less").await;
    assert_has!(r, "note: `less` is a pager, which takes keys, not command lines");
    assert_has!(r, "keys=[\"q\"] quits it");
    let started = std::time::Instant::now();
    let why = s.err("run", json!({"session": "t1", "command": "echo typed-into-less"})).await;
    assert_has!(why, "`less` (under `seq 1 500 | LESS=X less`) is a pager in t1");
    assert_has!(why, "nothing was typed");
    assert!(started.elapsed().as_millis() < 250, "refused at once, not after a grace: {:?}", started.elapsed());
    s.ok("send", json!({"session": "t1", "keys": ["q"], "wait": 0.5})).await;
    let r = line(&s, "echo after-less").await;
    assert_has!(r, "exit 0");
    assert!(!r.contains("typed-into-less"), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_is_a_placeholder_in_the_cooked_view() {
    needs!("top");
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let r = line(&s, "top -d 1").await;
    assert_has!(r, "a full-screen program (`top`) holds the screen");
    assert_has!(r, "load average");
    let cooked = s.ok("read", json!({"session": "t1"})).await;
    assert_has!(cooked, "[full-screen program: top]");
    assert!(!cooked.contains("load average"), "{cooked}");
    s.ok("send", json!({"session": "t1", "keys": ["q"], "wait": 0.5})).await;
    assert_has!(line(&s, "echo after-top").await, "exit 0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_typed_with_send_is_never_logged() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let r = line(&s, "read -s -p 'Password: ' pw; echo; echo \"length ${#pw}\"").await;
    assert_has!(r, "password prompt");
    let r = s.ok("send", json!({"session": "t1", "text": "s3cret-pw", "keys": ["enter"], "wait": 1.0})).await;
    assert_has!(r, "length 9");
    let list = last_regions(&s).await;
    assert_has!(list, "`Password: (input not shown)`");
    let mut seen = vec![r, list, s.ok("read", json!({"session": "t1"})).await];
    for file in ["raw.log", "session.txt", "regions.jsonl"] {
        seen.push(std::fs::read_to_string(w.session_dir("t1").join(file)).unwrap_or_default());
    }
    seen.push(std::fs::read_to_string(w.home().join("calls.log")).unwrap_or_default());
    for text in seen {
        assert!(!text.contains("s3cret"), "the password leaked:\n{text}");
    }
    // Asked on /dev/tty (getpass, ssh, sudo and ssh-keygen open it): the
    // same terminal, told at once rather than after the whole timeout.
    if crate::support::installed("python3") {
        let ask = "python3 -c \"import getpass; print('got', len(getpass.getpass('Key phrase: ')))\"";
        let started = std::time::Instant::now();
        let r = s.ok("run", json!({"session": "t1", "command": ask, "timeout": 20})).await;
        assert_has!(r, "waits at a password prompt");
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}: {r}", started.elapsed());
        let r = s.ok("send", json!({"session": "t1", "text": "abc", "keys": ["enter"], "wait": 1.0})).await;
        assert_has!(r, "got 3");
    }
}

/// `read -e` reads its line with the shell's own line editor, as the
/// shell's prompt does; `run` still types the answer into it as input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_with_the_line_editor_takes_runs_line_as_its_answer() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let r = line(&s, "read -e -p 'Your name? ' n; echo \"hi $n\"").await;
    assert_has!(r, "Your name?");
    let r = s.ok("run", json!({"session": "t1", "command": "Ada Lovelace"})).await;
    assert_has!(r, "hi Ada Lovelace");
    assert_has!(last_regions(&s).await, "`Your name? Ada Lovelace`");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_prompts_are_answered_by_expect() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let cmd = r#"read -p "Name: " n; read -s -p "PIN: " pin; echo; echo "hello $n, pin of ${#pin}""#;
    let rules = json!([{"pattern": "^Name: $", "line": "Ada"}, {"pattern": "^PIN: $", "line": "4711"}]);
    let r = s.ok("expect", json!({"session": "t1", "command": cmd, "rules": rules, "timeout": 20})).await;
    assert_has!(r, "hello Ada, pin of 4");
    assert_has!(r, "exit 0");
    let list = last_regions(&s).await;
    assert_has!(list, "`PIN: (input not shown)`");
    assert!(!list.contains("4711") && !r.contains("4711"), "{list}\n{r}");
}

async fn send(s: &Server, args: Value) -> String {
    s.ok("send", args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sleep_ends_by_ctrl_c_and_by_signal() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    s.leave_running("t1", "sleep 100").await;
    let r = send(&s, json!({"session": "t1", "keys": ["ctrl+c"], "wait": 0.5})).await;
    assert_has!(r, "the shell is in the foreground again");
    s.leave_running("t1", "sleep 100").await;
    let r = send(&s, json!({"session": "t1", "signal": "TERM", "wait": 0.5})).await;
    assert_has!(r, "sent SIGTERM to `sleep`");
    assert_has!(r, "the shell is in the foreground again");
    assert_has!(last_regions(&s).await, "exit 143");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_ignoring_sigint_ends_by_term_or_kill() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    for (sig, status) in [("TERM", "exit 143"), ("KILL", "exit 137")] {
        s.leave_running("t1", "bash -c \"trap '' INT; sleep 100; true\"").await;
        let r = send(&s, json!({"session": "t1", "keys": ["ctrl+c"], "wait": 0.5})).await;
        assert_has!(r, "still in the foreground: `bash`");
        let r = send(&s, json!({"session": "t1", "signal": sig, "wait": 0.5})).await;
        assert_has!(r, "the shell is in the foreground again");
        let r = s.ok("regions", json!({"session": "t1", "last": 1})).await;
        assert_has!(r, status);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_like_a_person_leaves_the_exact_line() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let cmd = "echo typed-by-hand | tr a-z A-Z";
    let typing = json!({"speed": 60, "mistakes": 0.3, "seed": 11});
    let started = std::time::Instant::now();
    let r = s.ok("run", json!({"session": "t1", "command": cmd, "typing": typing})).await;
    assert!(started.elapsed().as_millis() > 300, "typed at once: {:?}", started.elapsed());
    assert_has!(r, "exit 0");
    assert_has!(r, "TYPED-BY-HAND");
    assert_has!(last_regions(&s).await, &format!("`{cmd}`"));
    let e = s.err("run", json!({"session": "t1", "command": "true", "typing": {"speed": 0}})).await;
    assert_has!(e, "typing.speed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_without_a_prompt_ends_its_input_when_output_settles() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    s.leave_running("t1", "cat").await;
    let started = std::time::Instant::now();
    let r = line(&s, "no-prompt-here").await;
    let took = started.elapsed();
    assert_has!(r, "output settled");
    assert_eq!(r.matches("no-prompt-here").count(), 1, "cat's copy, not the echo:\n{r}");
    assert!((1_000..6_000).contains(&took.as_millis()), "settling took {took:?}");
    let list = last_regions(&s).await;
    assert_has!(list, "input ended");
    assert_has!(list, "`no-prompt-here`");
    s.ok("send", json!({"session": "t1", "keys": ["ctrl+d"]})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_reading_the_terminal_without_a_prompt_is_waiting_for_input() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    // `cat` shows no prompt: blocked reading the terminal with nothing
    // printed, it waits for input, which run says long before its timeout.
    let r = s.call("run", json!({"session": "t1", "command": "cat", "timeout": 25})).await;
    assert_has!(r.text, "waiting for input: it reads the terminal, and no prompt shows");
    assert_has!(r.text, "To leave cat: send keys=[\"ctrl+d\"]");
    assert_eq!(r.structured.expect("structuredContent")["state"], "waiting_for_input");
    let r = line(&s, "typed-into-cat").await;
    assert_has!(r, "typed-into-cat");
    assert_has!(s.ok("send", json!({"session": "t1", "keys": ["ctrl+d"], "wait": 0.5})).await, "ended: exit 0");
    // A command that sleeps is no such program: its run waits on.
    let r = s.ok("run", json!({"session": "t1", "command": "sleep 4; echo slept", "timeout": 25})).await;
    assert_has!(r, "slept");
    assert_has!(r, "exit 0");
}
