//! `expect`: answering questions by rules.

use serde_json::json;

use crate::assert_has;
use crate::support::World;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn questions_are_answered_by_rules_and_secrets_stay_out_of_the_log() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let cmd = r#"read -p "Continue? [y/n] " a; read -s -p "Password: " pw; echo; echo "got $a, ${#pw} chars""#;
    let rules = json!([
        {"pattern": "\\[y/n\\]", "line": "y"},
        {"pattern": "Password:", "line": "hunter2"},
    ]);
    let r = s.ok("expect", json!({"session": "t1", "command": cmd, "rules": rules, "timeout": 20})).await;
    assert_has!(r, "exit 0");
    assert_has!(r, "got y, 7 chars");
    assert!(!r.contains("hunter2"), "{r}");
    let raw = std::fs::read(w.session_dir("t1").join("raw.log")).expect("raw.log");
    assert!(!String::from_utf8_lossy(&raw).contains("hunter2"), "a no-echo answer must leave no trace");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_question_comes_back_and_a_stop_rule_stops() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let rules = json!([{"pattern": "never-appears", "line": "x"}]);
    let cmd = r#"read -p "Your name? " n; echo "hi $n""#;
    let r = s.ok("expect", json!({"session": "t1", "command": cmd, "rules": rules, "timeout": 20})).await;
    assert_has!(r, "no rule answers: `Your name?`");
    // Answer it by a rule now, without typing a command.
    let rules = json!([{"pattern": "name\\?", "line": "Ada"}, {"pattern": "^hi ", "stop": true}]);
    let r = s.ok("expect", json!({"session": "t1", "rules": rules, "timeout": 20})).await;
    assert_has!(r, "hi Ada");
    // A malformed rule rejects the whole call; nothing is typed.
    let bad = json!([{"pattern": "x", "line": "a", "keys": ["y"]}]);
    let e = s.err("expect", json!({"session": "t1", "command": "echo NOT-TYPED", "rules": bad})).await;
    assert_has!(e, "exactly one of");
    let log = std::fs::read_to_string(w.session_dir("t1").join("session.txt")).expect("log");
    assert!(!log.contains("NOT-TYPED"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_matching_a_programs_own_prompt_stops_after_a_few_answers() {
    if !crate::support::installed("python3") {
        return;
    }
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    // `>>>` comes back after every answer: the rule would answer forever.
    let rules = json!([{"pattern": ">>>", "line": "print(40+2)"}]);
    let args = json!({"session": "t1", "command": "python3 -q", "rules": rules, "timeout": 20});
    let r = s.ok("expect", args).await;
    assert_has!(r, "stopped: the same question came back after each of 4 answers: `>>>`");
    assert_eq!(r.matches("answered line").count(), 4, "{r}");
    // Questions that differ are each answered.
    let rules = json!([{"pattern": "\\? $|\\?$", "line": "y"}, {"pattern": "^done", "stop": true}]);
    let cmd = "exit()";
    s.ok("send", json!({"session": "t1", "text": cmd, "keys": ["enter"], "wait": 0.5})).await;
    let script = "for i in 1 2 3 4 5 6; do read -p \"step $i? \" a; done; echo done";
    let r = s.ok("expect", json!({"session": "t1", "command": script, "rules": rules, "timeout": 20})).await;
    assert_eq!(r.matches("answered line").count(), 6, "{r}");
    assert_has!(r, "done");
}
