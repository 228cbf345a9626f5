//! Retention: `session_logs`, delete-on-close, and what a read of deleted
//! logs says.

use serde_json::json;

use crate::assert_has;
use crate::support::{World, cli};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_closed_sessions_logs_leaves_word_of_when_and_why() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    s.create("t2").await;
    s.run("t1", "echo hello").await;
    s.ok("session_close", json!({"session": "t1"})).await;
    assert_has!(s.ok("session_list", json!({})).await, "t1, logs kept until");
    assert_has!(s.ok("session_logs", json!({"session": "t1", "action": "delete"})).await, "deleted");
    assert!(!w.session_dir("t1").exists());
    let said = s.err("read", json!({"session": "t1"})).await;
    assert_has!(said, "deleted on");
    assert_has!(said, "asked for");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_sessions_logs_are_not_deleted() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    assert_has!(s.err("session_logs", json!({"session": "t1", "action": "delete"})).await, "close it first");
    assert!(w.session_dir("t1").join("raw.log").exists());
    assert_has!(s.ok("session_logs", json!({"session": "t1", "action": "keep"})).await, "kept for good");
    assert!(w.session_dir("t1").join("keep").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_on_close_session_goes_when_it_closes_and_a_sweep_finds_the_rest() {
    let w = World::new();
    let s = w.server().await;
    s.ok("session_create", json!({"name": "t1", "delete_logs_on_close": true})).await;
    s.create("t2").await;
    s.create("t3").await;
    assert!(w.session_dir("t1").join("delete-on-close").exists());
    assert_has!(s.ok("session_close", json!({"session": "t1"})).await, "were deleted");
    assert!(!w.session_dir("t1").exists());
    // A pane that ends by itself is found by the next sweep.
    s.ok("session_logs", json!({"session": "t2", "action": "delete_on_close"})).await;
    w.tmux(&["kill-session", "-t", "=t2"]);
    let due = cli(&w, &["logs", "due"]).ok();
    assert_has!(due, "t2\t");
    assert!(w.session_dir("t2").exists(), "a dry run deletes nothing");
    cli(&w, &["logs", "sweep"]).ok();
    assert!(!w.session_dir("t2").exists());
    assert!(w.session_dir("t3").exists());
    assert_has!(s.err("read", json!({"session": "t2"})).await, "delete-on-close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archived_generation_stays_readable_by_its_name() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    s.run("t1", "echo first-generation-output").await;
    s.ok("session_close", json!({"session": "t1"})).await;
    // The name is free again; its old logs move aside as t1.1.
    s.create("t1").await;
    s.run("t1", "echo second-generation-output").await;
    assert!(w.session_dir("t1.1").join("raw.log").exists());
    assert_has!(s.ok("session_list", json!({})).await, "t1.1, logs kept until");
    let old = s.ok("read", json!({"session": "t1.1"})).await;
    assert_has!(old, "first-generation-output");
    assert!(!old.contains("second-generation-output"), "{old}");
    assert_has!(s.ok("search", json!({"session": "t1.1", "pattern": "first-gen"})).await, "first-generation-output");
    assert_has!(s.ok("regions", json!({"session": "t1.1"})).await, "echo first-generation-output");
    // A dotted name that is not a generation is still refused, with the rule.
    assert_has!(s.err("read", json!({"session": "t1.old"})).await, "letters, digits");
}
