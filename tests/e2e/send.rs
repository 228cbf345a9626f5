//! `send` (text, keys, screens, signals) and `read`'s screen and raw views,
//! against programs that read the keyboard.

use std::time::Duration;

use serde_json::json;

use crate::support::World;
use crate::{assert_has, needs};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_then_enter_reaches_a_program() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    s.leave_running("t1", "cat").await;
    let r = s.ok("send", json!({"session": "t1", "text": "hello-cat", "keys": ["enter"], "wait": 0.5})).await;
    assert_has!(r, "typed 9 characters, then pressed enter");
    // Once echoed by the terminal, once printed by cat.
    assert_eq!(r.matches("hello-cat").count(), 2, "{r}");
    s.ok("send", json!({"session": "t1", "keys": ["ctrl+d"]})).await;
    assert_has!(s.run("t1", "echo done").await, "exit 0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_interrupts_and_the_shell_takes_commands_again() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    s.leave_running("t1", "sleep 100").await;
    let r = s.ok("send", json!({"session": "t1", "keys": ["ctrl+c"]})).await;
    assert_has!(r, "pressed ctrl+c");
    assert_has!(r, "the shell is in the foreground again");
    assert_has!(r, "`sleep 100` (region 1) ended: exit 130 (SIGINT: interrupted, as by ctrl+c)");
    let r = s.run("t1", "echo after-interrupt").await;
    assert_has!(r, "exit 0");
    assert_has!(r, "after-interrupt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_ends_a_program_that_ignores_ctrl_c() {
    needs!("python3");
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    s.leave_running(
        "t1",
        "python3 -c 'import signal,time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(100)'",
    )
    .await;
    let r = s.ok("send", json!({"session": "t1", "keys": ["ctrl+c"]})).await;
    assert_has!(r, "still in the foreground: `python");
    let r = s.ok("send", json!({"session": "t1", "signal": "KILL", "wait": 0.5})).await;
    assert_has!(r, "sent SIGKILL to `python");
    assert_has!(r, "the shell is in the foreground again");
    assert_has!(r, "ended: exit 137 (SIGKILL");
    assert_has!(s.run("t1", "echo alive").await, "alive");
    // With only the shell in front there is nothing to signal.
    assert_has!(s.err("send", json!({"session": "t1", "signal": "TERM"})).await, "only the pane's own process (`bash`");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_key_types_nothing_at_all() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let before = w.screen("t1");
    let args = json!({"session": "t1", "text": "echo should-not-appear", "keys": ["enter", "ctrl+bogus"]});
    let r = s.err("send", args).await;
    assert_has!(r, "\"ctrl+bogus\"");
    assert_has!(r, "Nothing was typed");
    assert_has!(r, "pagedown");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(w.screen("t1"), before);
    assert!(!s.ok("read", json!({"session": "t1"})).await.contains("should-not-appear"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_full_screen_shows_rows_and_cursor() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let args = json!({"session": "t1", "text": "echo on-screen", "keys": ["enter"], "screen": "full"});
    let r = s.ok("send", args).await;
    assert_has!(r, "screen 120x40");
    assert_has!(r, "cursor at row");
    assert_has!(r, "alternate screen off");
    assert!(r.lines().any(|l| l.trim_start().ends_with("  on-screen")), "{r}");
    let r = s.ok("send", json!({"session": "t1", "keys": ["enter"], "screen": "cursor"})).await;
    assert_eq!(r.lines().count(), 3, "headline, screen line, cursor row:\n{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pager_shows_on_the_alternate_screen() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let file = w.tmp.path().join("nums.txt");
    let nums: String = (1..=300).map(|n| format!("number-{n}\n")).collect();
    std::fs::write(&file, nums).expect("write");
    // run returns at the pager's first screen rather than at its timeout.
    let r = s.ok("run", json!({"session": "t1", "command": format!("less {}", file.display()), "timeout": 20})).await;
    assert_has!(r, "a full-screen program (`less`) holds the screen");
    assert_has!(r, "number-1\n");
    let r = s.ok("read", json!({"session": "t1", "view": "screen"})).await;
    assert_has!(r, "alternate screen on");
    assert_has!(r, "number-1\n");
    let r = s.ok("send", json!({"session": "t1", "keys": ["page down"], "screen": "changes"})).await;
    assert_has!(r, "40 rows changed since the last look");
    assert_has!(r, "number-45");
    let r = s.ok("send", json!({"session": "t1", "keys": ["q"], "screen": "cursor"})).await;
    assert_has!(r, "alternate screen off");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_raw_view_spells_out_escapes() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    s.run("t1", r"printf '\033[31mred\033[0m\a\n'").await;
    let r = s.ok("read", json!({"session": "t1", "view": "raw"})).await;
    assert_has!(r, r"\e[31mred\e[0m\x07\r\n");
    assert!(!r.chars().any(|c| c.is_control() && c != '\n'), "{r:?}");
    let r = s.ok("read", json!({"session": "t1", "view": "raw", "from_byte": 0, "bytes": 16})).await;
    assert_has!(r, "bytes 0-16 of");
    assert_has!(r, "later bytes");
    // A region's bytes: its prompt, its command line and its output, not
    // what later commands printed.
    s.run("t1", "printf 'second\\033[0m\\n'").await;
    s.run("t1", "echo third-command").await;
    let r = s.ok("read", json!({"session": "t1", "view": "raw", "region": 2})).await;
    assert_has!(r, r"second\e[0m\r\n");
    assert!(!r.contains(r"\e[31mred") && !r.contains("third-command"), "{r}");
    // An argument the view does not take is named, not ignored.
    let r = s.err("read", json!({"session": "t1", "view": "screen", "region": 2})).await;
    assert_has!(r, "`region` is not taken by view=\"screen\"");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pane_in_copy_mode_is_taken_out_of_it_before_typing() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    assert!(w.tmux(&["copy-mode", "-t", "=t1:"]).status.success());
    let r = s.ok("send", json!({"session": "t1", "text": "echo out-of-copy", "keys": ["enter"], "wait": 0.5})).await;
    assert_has!(r, "left copy mode, then typed");
    assert_has!(r, "out-of-copy\n");
    assert_has!(s.run("t1", "echo next").await, "exit 0");
}
