//! Panes and people: a person stands in as a real tmux client attached
//! from a pseudo-terminal, typing into its master side. Splitting,
//! adopting, resizing, closing, and text at the prompt that no agent may
//! type over; four agents and a person typing into one session at once.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::assert_has;
use crate::support::{Person, Serve, Server, World, bridge, poll, unix_get};

/// `WIDTHxHEIGHT` of pane `target`.
fn pane_size(world: &World, target: &str) -> String {
    let out = world.tmux(&["display", "-p", "-t", target, "#{pane_width}x#{pane_height}"]);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The pane id of our session `name` (its `@dtmcp_name`).
fn pane_of(world: &World, name: &str) -> Option<String> {
    let out = world.tmux(&["list-panes", "-a", "-F", "#{pane_id} #{@dtmcp_name}"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines().find_map(|l| l.split_once(' ').filter(|(_, n)| *n == name).map(|(id, _)| id.to_string()))
}

/// Session `name`, made on `server`, with a person attached who has typed
/// `keys`; back once `shown` is on its screen.
async fn person_typing(world: &World, server: &Server, name: &str, keys: &str, shown: &str) -> Person {
    server.create(name).await;
    let mut person = Person::attach(world, name);
    // tmux stamps activity in whole seconds: a key in the second the client
    // attached looks like no key at all.
    std::thread::sleep(Duration::from_millis(1100));
    person.types(keys);
    world.until_on_screen(name, shown);
    person
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persons_unsubmitted_line_is_never_typed_over() {
    let world = World::new();
    let server = world.server().await;
    let mut person =
        person_typing(&world, &server, "p1", "echo from-person-$((40+2))", "echo from-person-$((40+2))").await;
    let refused = server.err("run", json!({"session": "p1", "command": "echo from-agent"})).await;
    assert_has!(refused, "by a person");
    assert_has!(refused, "`echo from-person-$((40+2))`");
    assert_has!(refused, "Nothing was typed over it");
    std::thread::sleep(Duration::from_millis(200));
    let shown = world.screen("p1");
    assert!(!shown.contains("from-agent"), "the agent's line reached the terminal:\n{shown}");
    // The person submits; the prompt is free again.
    person.types("\r");
    world.until_on_screen("p1", "from-person-42");
    let ran = server.run("p1", "echo from-agent-$((1+1))").await;
    assert_has!(ran, "from-agent-2");
    let list = server.ok("session_list", json!({})).await;
    assert_has!(list, "1 person(s) attached, last typed");
    assert_has!(list, "agents typed:");
}

/// A person's command that ends within a moment of an agent's `run` is
/// waited out, and the agent's line runs as a command after it: it is not
/// taken as input to the shell, which has just come back to its prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_run_as_a_persons_command_ends_is_a_command_after_it() {
    let world = World::new();
    let server = world.server().await;
    // Still running when the agent's line comes, but for less than the
    // 300 ms a busy job is given to settle.
    let _person = person_typing(&world, &server, "p2", "echo person-$((40+2)); sleep 0.2\r", "person-42").await;
    let ran = server.run("p2", "echo agent-$((1+1))").await;
    assert_has!(ran, "agent-2");
    assert_has!(ran, "exit 0");
    let regions = server.ok("regions", json!({"session": "p2"})).await;
    assert_has!(regions, "echo agent-$((1+1))");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_agents_half_typed_text_is_left_alone() {
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    let (alice, bob) = (bridge(&world, "alice").await, bridge(&world, "bob").await);
    let made = alice.call("session_create", json!({"name": "h1"})).await;
    assert!(!made.is_error, "{}", made.text);
    let sent = alice.call("send", json!({"session": "h1", "text": "echo alice-was-"})).await;
    assert!(!sent.is_error, "{}", sent.text);
    let refused = bob.call("run", json!({"session": "h1", "command": "echo bob"})).await;
    assert!(refused.is_error, "bob typed over alice's text: {}", refused.text);
    assert_has!(refused.text, "by agent alice");
    assert_has!(refused.text, "`echo alice-was-`");
    // Alice's own run is told it is her own text.
    let own = alice.call("run", json!({"session": "h1", "command": "echo x"})).await;
    assert_has!(own.text, "you (an earlier send)");
    let done = alice.call("send", json!({"session": "h1", "text": "here", "keys": ["enter"]})).await;
    assert!(!done.is_error, "{}", done.text);
    let ran = poll::until_async("bob's run to go in once alice's line ran", Duration::from_secs(5), async || {
        let r = bob.call("run", json!({"session": "h1", "command": "echo bob-$((3*3))"})).await;
        if r.is_error { Err(r.text) } else { Ok(r) }
    })
    .await;
    assert_has!(ran.text, "bob-9");
    let (_, body) = unix_get(&serve.socket, "/api/sessions");
    let list: Value = serde_json::from_str(&body).expect("JSON");
    let s = &list["sessions"][0];
    assert!(s["agents_typed_ms"]["alice"].is_u64() && s["agents_typed_ms"]["bob"].is_u64(), "{s}");
    assert_eq!(s["typing_now"], Value::Null, "{s}");
    assert_eq!(s["pane_id"].as_str().map(|p| p.starts_with('%')), Some(true), "{s}");
    assert_eq!((s["adopted"].clone(), s["integrated"].clone()), (json!(false), json!(true)), "{s}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_size_holds_against_a_person_and_follow_gives_it_back() {
    let world = World::new();
    let server = world.server().await;
    server.ok("session_create", json!({"name": "z1", "cols": 120, "rows": 40})).await;
    let person = Person::attach(&world, "z1");
    // By default the window takes the attached terminal's size (less tmux's status line).
    poll::until("the window to follow the person", Duration::from_secs(5), || pane_size(&world, "=z1:") == "100x29");
    let pinned = server.ok("session_resize", json!({"session": "z1", "cols": 70, "rows": 20})).await;
    assert_has!(pinned, "70x20");
    assert_has!(pinned, "pinned");
    assert_eq!(pane_size(&world, "=z1:"), "70x20");
    person.leave(&world);
    let other = Person::attach_sized(&world, "z1", 90, 25);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(pane_size(&world, "=z1:"), "70x20", "a pinned size changed when a person attached");
    assert_has!(server.ok("session_list", json!({})).await, "size pinned");
    let followed = server.ok("session_resize", json!({"session": "z1", "follow": true})).await;
    assert_has!(followed, "follows");
    poll::until("the window to follow again", Duration::from_secs(5), || pane_size(&world, "=z1:") == "90x24");
    let listed = server.ok("session_list", json!({})).await;
    assert!(!listed.contains("size pinned"), "{listed}");
    // Bad input is refused whole.
    let bad = server.err("session_resize", json!({"session": "z1", "cols": 1})).await;
    assert_has!(bad, "between 2 and 1000");
    let both = server.err("session_resize", json!({"session": "z1", "cols": 50, "follow": true})).await;
    assert_has!(both, "follow=true alone");
    assert_eq!(pane_size(&world, "=z1:"), "90x24");
    drop(other);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_is_a_session_and_a_window_closes_only_when_nobody_is_there() {
    let world = World::new();
    let server = world.server_with(&[("DOCENT_TERMINAL_MCP_ATTACH_PREFIX", "ssh -t box")]).await;
    let made = server.create("w1").await;
    assert_has!(made, "watch or join: ssh -t box tmux -L");
    let split = server.ok("session_split", json!({"session": "w1", "beside": true})).await;
    assert_has!(split, "session w1+1 ready (split from w1, beside it): bash with shell integration, at its prompt");
    assert_has!(split, "attach -t w1");
    let ran = server.run("w1+1", "echo split-$((20+1)); false").await;
    assert_has!(ran, "split-21");
    assert_has!(ran, "exit 1");
    assert!(!world.screen("w1").is_empty());
    assert!(pane_of(&world, "w1+1").is_some_and(|p| pane_of(&world, "w1") != Some(p)));
    assert!(world.session_dir("w1+1").join("raw.log").is_file());
    let list = server.ok("session_list", json!({})).await;
    assert_has!(list, "w1+1:");
    assert_has!(list, "split from w1");
    assert_has!(list, "attach: ssh -t box tmux -L");
    // Closing the window is refused while a person is attached.
    let person = Person::attach(&world, "w1");
    let refused = server.err("session_close", json!({"session": "w1+1", "window": true})).await;
    assert_has!(refused, "a person is attached");
    assert_has!(refused, "close --force");
    assert!(pane_of(&world, "w1").is_some() && pane_of(&world, "w1+1").is_some(), "nothing may close");
    person.leave(&world);
    let closed = server.ok("session_close", json!({"session": "w1", "window": true})).await;
    assert_has!(closed, "2 session(s)");
    assert!(pane_of(&world, "w1").is_none() && pane_of(&world, "w1+1").is_none());
    assert!(world.session_dir("w1+1").join("raw.log").is_file(), "the logs stay");
    let bad = server.err("session_split", json!({"session": "nope"})).await;
    assert_has!(bad, "no session named");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pane_split_with_tmux_keys_is_adopted() {
    let world = World::new();
    let server = world.server().await;
    server.create("k1").await;
    let mut person = Person::attach(&world, "k1");
    let prefix = String::from_utf8_lossy(&world.tmux(&["show", "-gv", "prefix"]).stdout).trim().to_string();
    if prefix == "C-b" {
        person.types("\x02%");
    } else {
        eprintln!("the tmux prefix is {prefix:?}, not C-b: splitting with split-window instead");
        assert!(world.tmux(&["split-window", "-h", "-t", "=k1:"]).status.success());
    }
    poll::until("tmux to split the pane", Duration::from_secs(5), || {
        let out = world.tmux(&["list-panes", "-t", "=k1:", "-F", "#{pane_id}"]);
        String::from_utf8_lossy(&out.stdout).lines().count() == 2
    });
    // It is taken on when tmux tells of the split, with no call asking.
    poll::until("the split pane to be taken on", Duration::from_secs(5), || {
        let out = world.tmux(&["list-panes", "-t", "=k1:", "-F", "#{@dtmcp_name}"]);
        let named = String::from_utf8_lossy(&out.stdout).lines().any(|name| name == "k1+1");
        named && world.session_dir("k1+1").join("logger.sock").exists()
    });
    let list = server.ok("session_list", json!({})).await;
    assert_has!(list, "k1+1:");
    assert_has!(list, "adopted");
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(world.session_dir("k1+1").join("meta.json")).expect("meta"))
            .expect("meta JSON");
    assert_eq!((meta["adopted"].clone(), meta["parent"].clone()), (json!(true), json!("k1")), "{meta}");
    let ran = server.run("k1+1", "echo adopted-$((6*7))").await;
    assert_has!(ran, "adopted-42");
    let log = std::fs::read_to_string(world.session_dir("k1+1").join("session.txt")).unwrap_or_default();
    assert_has!(log, "adopted-42");
    // The first pane is still k1, and keeps its integration.
    assert_has!(server.run("k1", "false").await, "exit 1");
    drop(person);
}

/// One round of [`four_agents_and_a_person_never_mix_a_line`]: every
/// agent runs a line at once, typed as a person would (slowly, so that
/// the others meet it) or at once; what each run answered.
async fn round(agents: &[Server], r: usize, slowly: bool) -> Vec<dtmcp::mcp_client::Reply> {
    let call = |k: usize| {
        let command = format!("sleep 0.2; echo agent-{k}-round-{r}-$(({k}*100+{r}))");
        let mut args = json!({"session": "many", "command": command});
        if slowly {
            args["typing"] = json!({"speed": 100, "mistakes": 0});
        }
        let agent = &agents[k];
        async move { agent.call("run", args).await }
    };
    let (a, b, c, d) = tokio::join!(call(0), call(1), call(2), call(3));
    vec![a, b, c, d]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_agents_and_a_person_never_mix_a_line() {
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    let mut agents = Vec::new();
    for k in 0..4 {
        agents.push(bridge(&world, &format!("agent{k}")).await);
    }
    let made = agents[0].call("session_create", json!({"name": "many"})).await;
    assert!(!made.is_error, "{}", made.text);
    let mut person = Person::attach_sized(&world, "many", 120, 40);
    let started = Instant::now();
    let (mut won, mut lost) = (0, 0);
    for r in 0..4 {
        // The person types a line of their own (in one burst, as a paste
        // arrives) while the agents race, and submits it a moment later.
        let typing_person = async {
            tokio::time::sleep(Duration::from_millis(150 + 100 * r as u64)).await;
            person.types(&format!("echo person-{r}-$((7*{r}))"));
            tokio::time::sleep(Duration::from_millis(400)).await;
            person.types("\r");
        };
        // The first rounds race the agents' slow typing; in the later
        // ones the person types too (the agents' lines go in at once).
        let slowly = r < 2;
        let typing_person = async {
            if !slowly {
                typing_person.await;
            }
        };
        let (replies, ()) = tokio::join!(round(&agents, r, slowly), typing_person);
        for reply in replies {
            if reply.is_error {
                lost += 1;
                let named = [
                    "agent agent",
                    "by a person",
                    "someone else typed",
                    "another call",
                    "started by agent",
                    "typed by a person",
                ]
                .iter()
                .any(|who| reply.text.contains(who));
                assert!(named, "a loser was not told who holds the session: {}", reply.text);
            } else {
                won += 1;
            }
        }
        // Let the round's last command finish before the next.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(started.elapsed() < Duration::from_secs(60), "the rounds took {:?}", started.elapsed());
    eprintln!("four agents and a person: {won} runs went in, {lost} were refused");
    assert!(won >= 1 && lost >= 1, "won {won}, lost {lost}: the agents never met");
    // Every command that ran is one whole line of one typist.
    let (_, body) = unix_get(&serve.socket, "/api/sessions");
    assert_has!(body, "\"clients\"");
    let line = regex::Regex::new(
        r"^(sleep 0\.2; echo agent-\d-round-\d-\$\(\(\d\*100\+\d\)\)|echo person-\d-\$\(\(7\*\d\)\))$",
    )
    .expect("re");
    let log = std::fs::read_to_string(world.session_dir("many").join("regions.jsonl")).expect("regions.jsonl");
    let mut commands = 0;
    for entry in log.lines() {
        let v: Value = serde_json::from_str(entry).expect("region JSON");
        let Some(command) = v["command"].as_str() else { continue };
        if command.is_empty() {
            continue;
        }
        commands += 1;
        assert!(line.is_match(command), "a mixed line ran: {command:?}\n{log}");
    }
    assert!(commands >= won, "{commands} commands ran, {won} runs succeeded");
    // Nobody holds the session any more, and it still answers.
    let after = agents[2].call("run", json!({"session": "many", "command": "echo still-$((2*2))"})).await;
    assert_has!(after.text, "still-4");
    drop(person);
}
