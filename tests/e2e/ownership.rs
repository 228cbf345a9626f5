//! What one agent leaves in a session is not another's to type over:
//! `send` keeps the rules `run` keeps (text left at the prompt, a line just
//! submitted, a program another agent started), and `session_close` and
//! `session_logs` leave a session alone while another agent has text in
//! it. Each refusal names whose it is; `take_over=true` is the way through
//! once the user says so.

use serde_json::json;

use crate::assert_has;
use crate::support::{Person, Serve, World, bridge};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_does_not_type_over_or_submit_another_agents_text() {
    let world = World::new();
    let _serve = Serve::start(&world, &[]);
    let alice = bridge(&world, "alice").await;
    let bob = bridge(&world, "bob").await;
    alice.ok("session_create", json!({"name": "o1"})).await;
    alice.ok("send", json!({"session": "o1", "text": "echo ALICE2"})).await;
    world.until_on_screen("o1", "echo ALICE2");
    for attempt in [
        json!({"session": "o1", "text": " BOB; echo pwned"}),
        json!({"session": "o1", "keys": ["ctrl+u"]}),
        json!({"session": "o1", "keys": ["enter"]}),
    ] {
        let why = bob.err("send", attempt.clone()).await;
        assert_has!(why, "agent alice");
        assert_has!(why, "take_over=true");
    }
    assert!(!world.screen("o1").contains("pwned"), "bob's text got in:\n{}", world.screen("o1"));
    let regions = alice.ok("regions", json!({"session": "o1"})).await;
    assert!(!regions.contains("ALICE2"), "alice's line was submitted by someone: {regions}");
    // Her session, her text: she may close and may not be closed on.
    let close = bob.err("session_close", json!({"session": "o1"})).await;
    assert_has!(close, "agent alice typed `echo ALICE2`");
    let logs = bob.err("session_logs", json!({"session": "o1", "action": "delete_on_close"})).await;
    assert_has!(logs, "agent alice typed");
    // Her own send finishes it.
    let done = alice.ok("send", json!({"session": "o1", "keys": ["enter"]})).await;
    assert_has!(done, "ALICE2");
    // Told to by the user, bob may take over.
    alice.ok("send", json!({"session": "o1", "text": "echo half"})).await;
    world.until_on_screen("o1", "echo half");
    bob.ok("send", json!({"session": "o1", "keys": ["ctrl+e", "ctrl+u"], "take_over": true})).await;
    let r = bob.ok("run", json!({"session": "o1", "command": "echo bob-$((2+3))"})).await;
    assert_has!(r, "bob-5");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_and_signals_for_another_agents_program_are_refused_with_whose_it_is() {
    let world = World::new();
    let _serve = Serve::start(&world, &[]);
    let alice = bridge(&world, "alice").await;
    let bob = bridge(&world, "bob").await;
    alice.ok("session_create", json!({"name": "o2"})).await;
    let left = alice.ok("run", json!({"session": "o2", "command": "sleep 30", "timeout": 0.3})).await;
    assert_has!(left, "still running");
    let why = bob.err("send", json!({"session": "o2", "keys": ["ctrl+c"]})).await;
    assert_has!(why, "`sleep 30` in o2 was started by agent alice");
    let why = bob.err("send", json!({"session": "o2", "signal": "KILL"})).await;
    assert_has!(why, "agent alice");
    let close = bob.err("session_close", json!({"session": "o2"})).await;
    assert_has!(close, "started by alice");
    // Still running: nothing reached it.
    let still = alice.ok("wait", json!({"session": "o2", "timeout": 0.3})).await;
    assert_has!(still, "still running");
    // Her own ctrl+c ends it.
    let r = alice.ok("send", json!({"session": "o2", "keys": ["ctrl+c"], "wait": 0.5})).await;
    assert_has!(r, "pressed ctrl+c");
    let ended = alice.ok("wait", json!({"session": "o2", "timeout": 5})).await;
    assert!(!ended.contains("still running"), "{ended}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_does_not_add_to_a_persons_unsubmitted_line() {
    let world = World::new();
    let _serve = Serve::start(&world, &[]);
    let bob = bridge(&world, "bob").await;
    bob.ok("session_create", json!({"name": "o3"})).await;
    // A person attached, typing.
    let mut person = Person::attach(&world, "o3");
    person.types("make inst");
    world.until_on_screen("o3", "make inst");
    let why = bob.err("send", json!({"session": "o3", "text": "all; echo pwned", "keys": ["enter"]})).await;
    assert_has!(why, "by a person");
    assert!(!world.screen("o3").contains("pwned"), "{}", world.screen("o3"));
    drop(person);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_carry_their_facts_as_data_and_never_the_output_again() {
    let world = World::new();
    let _serve = Serve::start(&world, &[]);
    let alice = bridge(&world, "alice").await;
    let bob = bridge(&world, "bob").await;
    alice.ok("session_create", json!({"name": "o4"})).await;
    let r = alice.call("run", json!({"session": "o4", "command": "echo facts-$((6*7)); true | false"})).await;
    let facts = r.structured.expect("structuredContent");
    assert_eq!(facts["tool"], "run");
    assert_eq!(facts["ok"], true);
    assert_eq!(facts["session"], "o4");
    assert_eq!(facts["state"], "done");
    assert_eq!(facts["exit_code"], 1);
    assert_eq!(facts["pipeline"], json!([0, 1]));
    assert!(facts["region"].as_u64().is_some_and(|n| n >= 1), "{facts}");
    assert!(facts["lines"]["first"].as_u64().is_some(), "{facts}");
    assert!(!facts.to_string().contains("facts-42"), "the output came twice: {facts}");
    assert_has!(r.text, "facts-42");
    // A refusal is data: its kind and whom it names.
    alice.ok("send", json!({"session": "o4", "text": "echo mine"})).await;
    world.until_on_screen("o4", "echo mine");
    let no = bob.call("run", json!({"session": "o4", "command": "echo bobs"})).await;
    assert!(no.is_error);
    let facts = no.structured.expect("structuredContent on an error too");
    assert_eq!(facts["ok"], false);
    assert_eq!(facts["error"], "refused");
    assert_eq!(facts["refusal"]["refusal"], "unsubmitted");
    assert_eq!(facts["refusal"]["by"], json!({"kind": "agent", "name": "alice"}));
    let list = bob.call("session_list", json!({})).await.structured.expect("structuredContent");
    let rows = list["sessions"].as_array().expect("sessions");
    assert!(rows.iter().any(|s| s["name"] == "o4" && s["attach"].as_str().is_some_and(|a| a.contains("attach"))));
    // Every tool declares the shape its facts come in.
    let tools = alice.client().tools().await.expect("tools");
    for t in &tools {
        let schema = t.output_schema.as_ref().unwrap_or_else(|| panic!("{} has no outputSchema", t.name));
        assert_eq!(schema.get("type").and_then(|t| t.as_str()), Some("object"), "{}", t.name);
        assert!(t.annotations.as_ref().and_then(|a| a.title.as_ref()).is_some(), "{} has no title", t.name);
    }
}
