//! Shells other than the session's own bash: an integrated zsh, shells
//! inside shells, `shell_integrate` for a shell that could not inherit the
//! integration, fish named and left alone, and plain shells that work by
//! prompt matching.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::support::{Server, World, poll};
use crate::{assert_has, needs};

/// A home directory of the test's own, with a `.zshrc` and a `.zshenv`
/// that leave traces, so a test can see the user's files were read.
fn fake_home(w: &World) -> PathBuf {
    let home = w.tmp.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::write(home.join(".zshenv"), "export FROM_ZSHENV=env-read\n").expect(".zshenv");
    // PATH set afresh, as many rc files do: the session's command must
    // still come first.
    let rc = "export FROM_ZSHRC=rc-read\nPS1='zz%# '\nPATH=/usr/local/bin:/usr/bin:/bin\n";
    std::fs::write(home.join(".zshrc"), rc).expect(".zshrc");
    home
}

/// Makes session `name` running `command` with HOME at `home`.
async fn create_in(s: &Server, name: &str, command: &str, home: &Path) -> String {
    let env = json!({ "HOME": home.display().to_string() });
    s.ok("session_create", json!({ "name": name, "command": command, "env": env })).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zsh_sessions_are_integrated_and_read_the_users_files() {
    needs!("zsh");
    let w = World::new();
    let s = w.server().await;
    let home = fake_home(&w);
    let r = create_in(&s, "z", "zsh", &home).await;
    assert_has!(r, "zsh with shell integration, at its prompt");
    let r = s.run("z", "echo $FROM_ZSHENV $FROM_ZSHRC").await;
    assert_has!(r, "exit 0");
    assert_has!(r, "env-read rc-read");
    let r = s.run("z", "command -v docent-terminal-mcp").await;
    assert_has!(r, format!("{}/bin/docent-terminal-mcp", w.home().display()));
    assert_has!(s.run("z", "false").await, "exit 1");
    assert_has!(s.run("z", "(exit 3)").await, "exit 3");
    let r = s.run("z", "true | false").await;
    assert_has!(r, "exit 1");
    assert_has!(r, "pipeline: 0 1");
    // A theme that rebuilds PS1 in its own hook is wrapped again.
    s.run("z", "precmd_functions+=(retheme); retheme() { PS1='new%# ' }").await;
    assert_has!(s.run("z", "(exit 5)").await, "exit 5");
    assert_has!(s.run("z", "echo again").await, "exit 0");
    // Output without a newline stays in its region (zsh's end-of-line
    // mark comes after the command's end).
    let r = s.run("z", "printf 'no newline'").await;
    assert_has!(r, "no newline");
    assert!(!r.contains("no newline%") && !r.contains("no newline#"), "no end-of-line mark: {r}");
    // A continuation prompt is no prompt: the heredoc runs as one command.
    let r = s.ok("run", json!({"session": "z", "command": "cat <<'X'\nline one\nX"})).await;
    assert_has!(r, "exit 0");
    assert_has!(r, "line one");
}

/// Runs `inner` (a shell) in session `name`, a failing command inside it,
/// then leaves it with status 7, and checks every status on the way.
async fn nest(s: &Server, name: &str, inner: &str) {
    s.run(name, inner).await;
    let r = s.run(name, "echo inside $$; (exit 4)").await;
    assert_has!(r, "exit 4");
    assert_has!(r, "inside");
    s.run(name, "exit 7").await;
    let list = s.regions(name).await;
    let outer = list.lines().find(|l| l.contains(&format!("`{inner}`"))).unwrap_or_default();
    assert_has!(outer, "exit 7");
    // The outer shell's prompt is back and answers for itself.
    let r = s.run(name, "echo outside; (exit 2)").await;
    assert_has!(r, "exit 2");
    assert_has!(r, "outside");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shells_inside_shells_close_their_regions_with_their_statuses() {
    needs!("zsh");
    let w = World::new();
    let s = w.server().await;
    let home = fake_home(&w);
    create_in(&s, "b", "bash", &home).await;
    nest(&s, "b", "bash").await;
    nest(&s, "b", "zsh").await;
    // zsh inside reads the user's files too.
    s.run("b", "zsh").await;
    assert_has!(s.run("b", "echo $FROM_ZSHRC").await, "rc-read");
    s.run("b", "exit").await;
    create_in(&s, "z", "zsh", &home).await;
    nest(&s, "z", "bash").await;
    nest(&s, "z", "zsh").await;
}

/// How many lines loading the integration were typed in session `name`.
fn typed_lines(w: &World, name: &str) -> usize {
    let raw = std::fs::read(w.session_dir(name).join("raw.log")).expect("raw");
    memchr::memmem::find_iter(&raw, b"export __DTMCP_NONCE=").count()
}

/// A line that starts a bash or zsh with nothing inherited, as a fresh
/// login over ssh would: no integration, no secret.
fn clean_shell(home: &Path, shell: &str) -> String {
    format!("env -i HOME={} PATH=\"$PATH\" TERM=\"$TERM\" {shell}", home.display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shell_integrate_adds_the_integration_to_a_plain_bash_and_zsh() {
    needs!("zsh");
    let w = World::new();
    let s = w.server().await;
    let home = fake_home(&w);
    create_in(&s, "b", "bash", &home).await;
    for (shell, start) in [("bash", "bash --norc"), ("zsh", "zsh -f")] {
        s.run("b", &clean_shell(&home, start)).await;
        let r = s.run("b", "false").await;
        assert_has!(r, "exit status unknown");
        let r = s.ok("shell_integrate", json!({ "session": "b" })).await;
        assert_has!(r, format!("b now has the shell integration ({shell}"));
        assert_has!(s.run("b", "false").await, "exit 1");
        assert_has!(s.run("b", "(exit 6)").await, "exit 6");
        // Integrated now: a second call types nothing.
        let typed = typed_lines(&w, "b");
        let r = s.ok("shell_integrate", json!({ "session": "b" })).await;
        assert_has!(r, "nothing typed");
        assert_has!(r, "has the shell integration already");
        assert_eq!(typed_lines(&w, "b"), typed, "nothing was typed");
        s.run("b", "exit 3").await;
        let list = s.regions("b").await;
        let outer = list.lines().rfind(|l| l.contains("env -i")).unwrap_or_default();
        assert_has!(outer, "exit 3");
        assert_has!(s.run("b", "(exit 2)").await, "exit 2");
    }
}

/// A program called `ssh` (a copy of bash) that starts `inner` with a
/// clean environment and HOME at `home`, so the server takes it for a
/// login to `host` and cannot see the far shell's process for what it is.
fn fake_ssh(w: &World, home: &Path, host: &str, inner: &str) -> String {
    let bin = w.tmp.path().join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    let ssh = bin.join("ssh");
    if !ssh.exists() {
        let bash = std::process::Command::new("sh").args(["-c", "command -v bash"]).output().expect("bash");
        std::fs::copy(String::from_utf8_lossy(&bash.stdout).trim(), &ssh).expect("copy bash as ssh");
    }
    // `-c` is a valued option to ssh, so the destination is `host`; the
    // `; exit` keeps the copy alive as the far shell's parent.
    format!("{} -c '{}; exit' {host}", ssh.display(), clean_shell(home, inner))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shell_integrate_names_the_install_command_where_the_files_are_missing() {
    let w = World::new();
    let s = w.server().await;
    let home = fake_home(&w);
    let far = w.tmp.path().join("far-home");
    std::fs::create_dir_all(&far).expect("far home");
    create_in(&s, "b", "bash", &home).await;
    s.run("b", &fake_ssh(&w, &far, "box.example", "bash --norc -i")).await;
    let r = s.err("shell_integrate", json!({ "session": "b" })).await;
    assert_has!(r, "docent-terminal-mcp install box.example");
    assert_has!(r, "remembered for 12 hours");
    let memory = std::fs::read_to_string(w.home().join("integration-missing.json")).expect("remembered");
    assert_has!(memory, "box.example");
    // Remembered: the second call answers without typing.
    assert_eq!(typed_lines(&w, "b"), 1);
    let r = s.err("shell_integrate", json!({ "session": "b" })).await;
    assert_has!(r, "in the last 12 hours, so nothing was typed");
    assert_eq!(typed_lines(&w, "b"), 1, "nothing was typed");
    // Installed by hand where `install` would put them: a retry loads them
    // and clears the memory.
    let installed = far.join(format!(".local/share/docent-terminal-mcp/v{}", dtmcp::shell::INTEGRATION_VERSION));
    for (name, body) in dtmcp::shell::FILES {
        let path = installed.join(name);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, body).expect("write");
    }
    let r = s.ok("shell_integrate", json!({ "session": "b", "retry": true })).await;
    assert_has!(r, "now has the shell integration (bash");
    assert_has!(r, "~/.local/share/docent-terminal-mcp/v");
    let memory = std::fs::read_to_string(w.home().join("integration-missing.json")).expect("file");
    assert!(!memory.contains("box.example"), "a success clears the entry: {memory}");
    assert_has!(s.run("b", "(exit 9)").await, "exit 9");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fish_is_named_and_left_alone() {
    needs!("fish");
    let w = World::new();
    let s = w.server().await;
    let home = fake_home(&w);
    // Seen by its process on this host.
    create_in(&s, "f", "fish", &home).await;
    let r = s.err("shell_integrate", json!({ "session": "f" })).await;
    assert_has!(r, "nothing typed");
    assert_has!(r, "fish, which the shell integration does not cover");
    // Asked over a carrier that hides it: fish answers in its own way.
    create_in(&s, "b", "bash", &home).await;
    s.run("b", &fake_ssh(&w, &home, "fishbox", "fish --no-config")).await;
    let r = s.err("shell_integrate", json!({ "session": "b" })).await;
    assert_has!(r, "fish, which the shell integration does not cover");
    for name in ["f", "b"] {
        assert_eq!(typed_lines(&w, name), 0, "{name}: no integration line typed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_sh_works_by_prompt_matching_and_says_statuses_are_unknown() {
    let w = World::new();
    let s = w.server().await;
    let args = json!({
        "name": "p",
        "command": "env PS1='READY~ ' sh",
        "prompt_pattern": "READY~ $",
    });
    let r = s.ok("session_create", args).await;
    assert_has!(r, "no shell integration");
    assert_has!(r, "exit statuses are unknown");
    let started = std::time::Instant::now();
    let r = s.run("p", "echo one; false").await;
    assert_has!(r, "one");
    assert_has!(r, "exit status unknown");
    assert_has!(r, "shell_integrate");
    // The prompt ended the command, not a timeout or a long quiet spell.
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "took {:?}", started.elapsed());
    let r = s.run("p", "echo two").await;
    assert_has!(r, "two");
    let r = s.err("shell_integrate", json!({ "session": "p" })).await;
    assert_has!(r, "sh, which has no shell integration");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_shell_still_busy_after_drawing_its_prompt_is_taken_as_back_at_it() {
    let w = World::new();
    let s = w.server().await;
    // The prompt is drawn, then the shell stays on a CPU for 150 ms before
    // it reads the terminal, as any shell may for a moment on a busy machine.
    let busy = r#"e=$(( ${EPOCHREALTIME/./} + 150000 )); while (( ${EPOCHREALTIME/./} < e )); do :; done"#;
    let args = json!({
        "name": "p",
        "command": format!("env PS1= PROMPT_COMMAND='printf \"READY~ \"; {busy}' bash --norc --noprofile"),
        "prompt_pattern": "READY~ $",
    });
    s.ok("session_create", args).await;
    let r = s.run("p", "echo one").await;
    assert_has!(r, "back at the shell's prompt `READY~`");
    assert_has!(r, "exit status unknown");
    assert!(!r.contains("is working"), "{r}");
    assert_has!(r, "shell_integrate session=p");
    assert_has!(s.run("p", "echo two").await, "two");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shell_integrate_rejects_bad_input_whole() {
    let w = World::new();
    let s = w.server().await;
    let r = s.err("shell_integrate", json!({ "session": "nope" })).await;
    assert_has!(r, "nope");
    let refused = s.client().call("shell_integrate", json!({ "session": "x", "shell": "bash" })).await;
    assert!(refused.is_err() || refused.is_ok_and(|r| r.is_error), "an unknown argument is refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn su_to_another_user_degrades_clearly_and_says_how_to_integrate() {
    needs!("su");
    if !nix::unistd::getuid().is_root() {
        eprintln!("skipped: `su -` without a password needs root");
        return;
    }
    let w = World::new();
    let s = w.server().await;
    s.create("b").await;
    // `su -` starts a login shell with a clean environment: no secret, so
    // no markers, and the reply must say so rather than make statuses up.
    let first = s.ok("run", json!({"session": "b", "command": "su - nobody -s /bin/bash", "timeout": 10})).await;
    assert_has!(first.lines().next().unwrap_or_default(), "waiting for input at `nobody@");
    let r = s.run("b", "id -un; false").await;
    assert_has!(r, "nobody");
    assert_has!(r, "exit status unknown");
    // Said once, on the first reply from the plain shell.
    assert_has!(format!("{first}{r}"), "shell_integrate session=b adds the integration");
    // nobody cannot read the server's files here and has no home to
    // install them in: shell_integrate names the command that would.
    let r = s.call("shell_integrate", json!({ "session": "b" })).await;
    match r.is_error {
        true => assert_has!(r.text, "docent-terminal-mcp install"),
        false => assert_has!(s.run("b", "false").await, "exit 1"),
    }
    s.run("b", "exit").await;
    assert_has!(s.run("b", "(exit 2)").await, "exit 2");
}

/// bash, and zsh where it is installed.
fn bash_and_zsh() -> Vec<&'static str> {
    let mut shells = vec!["bash"];
    if crate::support::installed("zsh") {
        shells.push("zsh");
    }
    shells
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_answers_nobody_read_are_cleared_not_taken_for_someones_text() {
    let w = World::new();
    let s = w.server().await;
    let home = fake_home(&w);
    let shells = bash_and_zsh();
    // Questions to the terminal in plain output (device attributes, the
    // cursor's place, the window's size): tmux answers them into the
    // pane's input once printf has exited, and the line editor of the
    // shell's next prompt shows what it does not understand of them.
    let ask = "printf 'asked:\\033[c\\033[>c\\033[6n\\033[18t\\n'";
    for (i, shell) in shells.into_iter().enumerate() {
        let name = format!("q{i}");
        create_in(&s, &name, shell, &home).await;
        assert_has!(s.run(&name, ask).await, "asked:");
        w.until_on_screen(&name, "1;2c");
        let r = s.ok("run", json!({"session": name, "command": "echo after-$((1+1))"})).await;
        assert_has!(r, "after-2");
        assert_has!(r, "exit 0");
        assert_has!(r, "the terminal's answer to a question in the last command's output");
        let regions = s.regions(&name).await;
        assert!(regions.contains("echo after-$((1+1))"), "{regions}\nafter:\n{r}\nscreen:\n{}", w.screen(&name));
        // Answers that come while the command still runs are echoed by the
        // terminal driver in front of the next prompt: the command goes on
        // a fresh prompt of its own, not beside them.
        assert_has!(s.run(&name, &format!("{ask}; sleep 0.5")).await, "asked:");
        let r = s.ok("run", json!({"session": name, "command": "echo after-$((3+3))"})).await;
        assert_has!(r, "after-6");
        let screen = w.screen(&name);
        let typed = screen.lines().find(|l| l.ends_with("echo after-$((3+3))")).unwrap_or_default();
        assert!(!typed.is_empty() && !typed.contains("^["), "{shell}: typed beside the answers:\n{screen}");
        // Text someone typed after the answer is theirs: refused, kept.
        assert_has!(s.run(&name, ask).await, "asked:");
        w.until_on_screen(&name, "1;2c");
        w.tmux(&["send-keys", "-t", &format!("={name}:"), "-l", "ls -l"]);
        w.until_on_screen(&name, "ls -l");
        let refused = s.err("run", json!({"session": name, "command": "echo not-typed"})).await;
        assert_has!(refused, "not submitted");
        assert!(!w.screen(&name).contains("not-typed"), "{shell}: the line was typed");
        // An answer that is not at a prompt right after the question is
        // left alone by later commands: nothing is cleared without one.
        s.ok("send", json!({"session": name, "keys": ["ctrl+e", "ctrl+u"]})).await;
        let r = s.run(&name, "echo plain").await;
        assert!(!r.contains("terminal's answer"), "{shell}: {r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_that_leave_the_line_editor_waiting_are_cancelled_before_a_run_types() {
    let w = World::new();
    let s = w.server().await;
    let home = fake_home(&w);
    for (i, shell) in bash_and_zsh().into_iter().enumerate() {
        let name = format!("k{i}");
        create_in(&s, &name, shell, &home).await;
        assert_has!(s.run(&name, "echo history-$((6*7))").await, "history-42");
        // ctrl+r: typed into the search, `echo hist` would find the line
        // above, and Enter would run it.
        let sent = s.ok("send", json!({"session": name, "keys": ["ctrl+r"]})).await;
        assert_has!(sent, "history search");
        let r = s.ok("run", json!({"session": name, "command": "echo hist"})).await;
        assert_has!(r, "ctrl+g cancelled that");
        assert!(r.contains("hist") && !r.contains("history-42"), "{shell}: the search ran a line from history:\n{r}");
        // Escape: with the `t` that follows it makes alt+t (transpose words).
        s.ok("send", json!({"session": name, "keys": ["escape"]})).await;
        let r = s.ok("run", json!({"session": name, "command": "true && echo esc-$((1+1))"})).await;
        assert!(r.contains("esc-2") && r.contains("exit 0"), "{shell}: {r}\nscreen:\n{}", w.screen(&name));
        // A count: alt+3 then `e` types three of them.
        s.ok("send", json!({"session": name, "keys": ["alt+3"]})).await;
        let r = s.ok("run", json!({"session": name, "command": "echo count-$((1+1))"})).await;
        assert!(r.contains("count-2") && r.contains("exit 0"), "{shell}: {r}\nscreen:\n{}", w.screen(&name));
        // In vi's keys, Escape is command mode: ctrl+g (bound by the
        // integration) goes back to insert mode, and the line is text.
        let (vi, emacs) = match shell {
            "zsh" => ("bindkey -v", "bindkey -e"),
            _ => ("set -o vi", "set -o emacs"),
        };
        s.run(&name, vi).await;
        s.ok("send", json!({"session": name, "keys": ["escape"]})).await;
        let r = s.ok("run", json!({"session": name, "command": "true && echo vi-$((2+2))"})).await;
        assert!(r.contains("vi-4") && r.contains("exit 0"), "{shell}: {r}\nscreen:\n{}", w.screen(&name));
        s.run(&name, emacs).await;
        // Nothing waits after an ordinary key: nothing is cancelled.
        s.ok("send", json!({"session": name, "keys": ["ctrl+a"]})).await;
        let r = s.run(&name, "echo plain").await;
        assert!(!r.contains("ctrl+g"), "{shell}: {r}");
    }
    // A search someone else began at bash's prompt is theirs: refused,
    // not typed into (the prompt is drawn over, so the line tells).
    w.tmux(&["send-keys", "-t", "=k0:", "C-r"]);
    w.until_on_screen("k0", "reverse-i-search");
    let refused = s.err("run", json!({"session": "k0", "command": "echo hist"})).await;
    assert_has!(refused, "(reverse-i-search)");
    let screen = w.screen("k0");
    let last = screen.lines().rfind(|l| !l.trim().is_empty()).unwrap_or_default();
    assert_eq!(last.trim_end(), "(reverse-i-search)`':", "typed into the search:\n{screen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_asking_about_a_line_says_so_and_takes_no_command_line_as_the_answer() {
    if !crate::support::installed("zsh") {
        return;
    }
    let w = World::new();
    let s = w.server().await;
    let home = fake_home(&w);
    create_in(&s, "z", "zsh", &home).await;
    s.run("z", "setopt correct; gti() { echo the-typo-ran; }; git() { echo corrected-$((1+1)); }").await;
    s.run("z", "unfunction gti").await;
    // zsh offers `git` for `gti` before it runs the line, and reads a key.
    let started = std::time::Instant::now();
    let r = s.ok("run", json!({"session": "z", "command": "gti status", "timeout": 20})).await;
    assert_has!(r, "the shell asks before it runs the line: `zsh: correct 'gti' to 'git' [nyae]?`");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}", started.elapsed());
    // A command line would be its answer: refused, nothing typed.
    let refused = s.err("run", json!({"session": "z", "command": "echo not-typed"})).await;
    assert_has!(refused, "has not run your line `gti status`: it asks");
    assert!(!w.screen("z").contains("not-typed"), "{}", w.screen("z"));
    let r = s.ok("send", json!({"session": "z", "text": "y", "wait": 1.0})).await;
    assert_has!(r, "corrected-2");
    assert_has!(s.run("z", "echo after").await, "exit 0");
    // A question that reads one key takes no line: `yes` would answer y
    // and hand `es` to the next prompt.
    let dir = w.tmp.path().join("many");
    std::fs::create_dir_all(&dir).expect("mkdir");
    for f in ["a", "b"] {
        std::fs::write(dir.join(f), "").expect("touch");
    }
    let r = s.ok("run", json!({"session": "z", "command": format!("rm {}/*", dir.display())})).await;
    assert_has!(r, "[yn]?` (a yes/no question: it takes one key, y or n)");
    let refused = s.err("run", json!({"session": "z", "command": "yes"})).await;
    assert_has!(refused, "would answer with its first character");
    assert_eq!(std::fs::read_dir(&dir).map(Iterator::count).unwrap_or(0), 2, "answered by the refused line");
    s.ok("send", json!({"session": "z", "text": "n", "wait": 0.5})).await;
    assert_has!(s.run("z", "echo kept").await, "exit 0");
    assert_eq!(std::fs::read_dir(&dir).map(Iterator::count).unwrap_or(0), 2);
}

/// Polls the `regions` listing of session `name` until it shows `label`.
async fn until_labelled(s: &Server, name: &str, label: &str) -> String {
    poll::until_async(&format!("{label:?} in the regions of {name}"), std::time::Duration::from_secs(10), async || {
        let list = s.regions(name).await;
        if list.contains(label) { Ok(list) } else { Err(list) }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_typed_past_the_right_margin_is_logged_and_labelled_whole() {
    // Typed a key at a time (as a person types, and as `run` types with
    // `typing`), a line longer than the pane is wide makes the line editor
    // wrap it onto the next row and move between its rows; the log and
    // the command's label still read the line whole.
    let w = World::new();
    let s = w.server().await;
    let home = fake_home(&w);
    let shells = bash_and_zsh();
    for (i, shell) in shells.into_iter().enumerate() {
        let name = format!("m{i}");
        let env = json!({ "HOME": home.display().to_string() });
        s.ok("session_create", json!({ "name": name, "command": shell, "env": env, "cols": 40 })).await;
        let cmd = "echo typed-past-the-margin-of-forty-columns | tr a-z A-Z";
        let typing = json!({ "speed": 100, "mistakes": 0.2, "seed": 3 });
        let r = s.ok("run", json!({ "session": name, "command": cmd, "typing": typing })).await;
        assert_has!(r, "TYPED-PAST-THE-MARGIN-OF-FORTY-COLUMNS");
        assert_has!(until_labelled(&s, &name, cmd).await, format!("`{cmd}`"));
        // A person: a key at a time, the last one erased back.
        let target = format!("={name}:");
        for c in "echo a-person-typed-a-line-longer-than-its-row-X".chars() {
            w.tmux(&["send-keys", "-t", &target, "-l", &c.to_string()]);
        }
        w.tmux(&["send-keys", "-t", &target, "BSpace", "BSpace", "Enter"]);
        let theirs = "echo a-person-typed-a-line-longer-than-its-row";
        assert_has!(until_labelled(&s, &name, &format!("`{theirs}`")).await, format!("`{theirs}`"));
        let log = s.ok("read", json!({ "session": name, "from_line": 1, "to_line": 50 })).await;
        assert_has!(log, cmd);
        assert_has!(log, theirs);
    }
}

/// A command that replaces bash's prompt hook -- sourcing an rc file that
/// sets PROMPT_COMMAND and PS1 afresh, or unsetting PROMPT_COMMAND --
/// loses that command's end, and at most the next one's status: the next
/// command's PS0 puts the hook back, and no output goes missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_replaces_the_prompt_hook_costs_at_most_the_next_status() {
    let w = World::new();
    let s = w.server().await;
    let rc = w.tmp.path().join("rc");
    std::fs::write(&rc, "PROMPT_COMMAND='history -a'\nPS1='rc> '\n").expect("rc");
    s.ok("session_create", json!({ "name": "b" })).await;
    let r = s.run("b", &format!("source {}", rc.display())).await;
    assert_has!(r, "back at the shell's prompt `rc>` · exit status unknown");
    assert_has!(r, "the next command puts it back");
    // Its output is shown, though the user's new prompt command ran before
    // the hook could see the status.
    let r = s.run("b", "echo one; (exit 3)").await;
    assert_has!(r, "finished (exit status unknown)");
    assert_has!(r, "one");
    let r = s.run("b", "echo two; (exit 4)").await;
    assert_has!(r, "exit 4");
    assert_has!(r, "two");
    // The new prompt command is the user's part, run at every prompt.
    assert_has!(s.run("b", "echo \"[$__DTMCP_USER_PC]\"").await, "[history -a]");
    // Unset, the hook comes back first, in time for the next status.
    s.run("b", "unset PROMPT_COMMAND").await;
    let r = s.run("b", "echo three; (exit 5)").await;
    assert_has!(r, "exit 5");
    assert_has!(r, "three");
    assert_has!(s.run("b", "echo four; (exit 6)").await, "exit 6");
    // The prompt command is a plain exported string again: a bash started
    // inside inherits the hook and reports its own statuses.
    let r = s.run("b", "declare -p PROMPT_COMMAND").await;
    assert_has!(r, "declare -x PROMPT_COMMAND=\"__dtmcp_hook\"");
    s.run("b", "bash --norc").await;
    assert_has!(s.run("b", "(exit 7)").await, "exit 7");
}

/// A tab in a command line, in a heredoc's text, or in a line typed into
/// python arrives as a tab: the line editors would take it for a
/// completion (bash completed `'a<tab>b'` into a file name of the
/// directory) or drop it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tabs_in_a_command_are_typed_as_tabs_not_completions() {
    let w = World::new();
    let s = w.server().await;
    let home = fake_home(&w);
    // Files a completion of `a` or `b` would find.
    for f in ["apple.txt", "banana.txt"] {
        std::fs::write(home.join(f), "").expect("file");
    }
    for (i, shell) in bash_and_zsh().into_iter().enumerate() {
        let name = format!("t{i}");
        create_in(&s, &name, shell, &home).await;
        s.run(&name, &format!("cd {}", home.display())).await;
        let r = s.run(&name, "printf '%s' 'a\tb' | od -An -c").await;
        assert_has!(r, "a  \\t   b");
        let r = s.run(&name, &format!("cat > t{i}.tsv <<'EOF'\nk\tv\nEOF")).await;
        assert_has!(r, "exit 0");
        let tsv = std::fs::read_to_string(home.join(format!("t{i}.tsv"))).expect("tsv");
        assert_eq!(tsv, "k\tv\n", "{shell}");
    }
    s.run("t0", "python3").await;
    let r = s.run("t0", "print(repr('a\tb'))").await;
    assert_has!(r, "'a\\tb'");
}

/// `!` is text in a command line: the sessions' shells do no history
/// expansion, which would take in the last command for `!!` or refuse
/// the line on "event not found".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exclamation_mark_is_text_not_history() {
    let w = World::new();
    let s = w.server().await;
    let home = fake_home(&w);
    for (i, shell) in bash_and_zsh().into_iter().enumerate() {
        let name = format!("h{i}");
        create_in(&s, &name, shell, &home).await;
        s.run(&name, "echo earlier-command").await;
        let r = s.run(&name, "echo \"done!!\" a!b").await;
        assert_has!(r, "exit 0");
        assert_has!(r, "done!! a!b");
    }
    // A person who wants it back turns it on.
    s.run("h0", "set -H").await;
    assert_has!(s.run("h0", "echo a!zzz-no-such-event").await, "event not found");
}
