//! The attack half of issue 10's suite, and the full disk: names and
//! paths, the token, DNS rebinding, modes and owners, two servers at once,
//! a state home that runs out of space, and the advisory audit. Each test
//! is named for what it proves; docs/testing.md lists them by attack.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::assert_has;
use crate::support::{
    RawClient, SERVER, Serve, World, free_port, mode, request, slow, socket_of, unix_get, unix_http, until_answering,
};

// --------------------------------------------------------------- a full disk

/// A stdio server of `w` whose state home is a tmpfs of `kb` kB in a
/// private mount namespace; its files are read through `/proc/PID/root`.
async fn server_on_small_tmpfs(w: &World, kb: u64) -> Option<RawClient> {
    if !nix::unistd::getuid().is_root() {
        eprintln!("skipped: a tmpfs in a private mount namespace needs root here");
        return None;
    }
    std::fs::create_dir_all(w.home()).expect("home");
    let script =
        format!("mount -t tmpfs -o size={kb}k,mode=0700 dtmcp-full \"$DOCENT_TERMINAL_MCP_HOME\" && exec '{SERVER}'");
    let mut env = w.env();
    env.push(("DTMCP_UNSHARE_SCRIPT".into(), script.clone()));
    // `unshare` runs the server as its own child's exec, so the client
    // talks to the server itself.
    let probe = Command::new("unshare").args(["-m", "--propagation", "private", "true"]).status();
    if !probe.is_ok_and(|s| s.success()) {
        eprintln!("skipped: unshare -m is not permitted here");
        return None;
    }
    Some(RawClient::start_program("unshare", &["-m", "--propagation", "private", "sh", "-c", &script], &env).await)
}

fn fill(path: &Path) {
    let mut f = std::fs::File::create(path).expect("fill file");
    let block = vec![b'x'; 64 * 1024];
    while f.write_all(&block).is_ok() {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_state_disk_keeps_the_pane_flowing_says_so_and_tears_no_json() {
    let w = World::new();
    let Some(mut c) = server_on_small_tmpfs(&w, 6 * 1024).await else { return };
    let t = Duration::from_secs(30);
    let pid = c.child.id().expect("pid");
    // The server's view of its home (the tmpfs), from outside.
    let home = PathBuf::from(format!("/proc/{pid}/root{}", w.home().display()));
    let (r, err) = c.call("session_create", json!({"name": "full1"}), t).await;
    assert!(!err, "{r}");
    let (r, _) = c.call("run", json!({"session": "full1", "command": "echo before-full"}), t).await;
    assert_has!(r, "before-full");
    fill(&home.join("filler"));
    // The pane keeps flowing although nothing can be logged.
    let (r, err) = c
        .call("run", json!({"session": "full1", "command": "seq 1 100000; echo end-while-full", "timeout": 3}), t)
        .await;
    assert!(!r.contains("end-while-full") || !err, "{r}");
    let mut shown = false;
    for _ in 0..100 {
        let screen = w.tmux(&["capture-pane", "-p", "-t", "=full1:"]);
        if String::from_utf8_lossy(&screen.stdout).contains("end-while-full") {
            shown = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(shown, "the pane blocked on a full disk");
    // A call that must write says plainly that the state directory is full.
    let (r, err) = c.call("session_create", json!({"name": "full2"}), t).await;
    assert!(err, "{r}");
    assert_has!(r, "state directory is full");
    crate::support::raw::assert_no_control_chars("the reply", &r);
    // No JSON state file is torn, and no temporary file is left behind.
    for dir in std::fs::read_dir(home.join("sessions")).expect("sessions").flatten() {
        for f in std::fs::read_dir(dir.path()).expect("dir").flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            assert!(!name.ends_with(".tmp"), "a temporary file is left: {}", f.path().display());
            if name.ends_with(".json") {
                let body = std::fs::read(f.path()).expect("read");
                serde_json::from_slice::<Value>(&body).unwrap_or_else(|e| {
                    panic!("{} is torn ({e}): {}", f.path().display(), String::from_utf8_lossy(&body))
                });
            }
        }
    }
    std::fs::remove_file(home.join("filler")).expect("free the space");
    // Within 15 s (the pane's logger catches up on what the full disk held
    // back; a loaded machine takes a while).
    let mut back = String::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while std::time::Instant::now() < deadline {
        let (r, err) = c.call("run", json!({"session": "full1", "command": "echo space-again"}), t).await;
        if !err && r.contains("space-again") {
            back = r;
            break;
        }
        back = format!("(the last try, an error: {err}) {r}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(
        back.contains("space-again") && !back.starts_with("(the last try"),
        "no run after the disk was freed: {back}"
    );
    let (r, err) = c.call("session_create", json!({"name": "full2"}), t).await;
    assert!(!err, "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_size_limit_on_the_router_is_an_error_not_a_death() {
    crate::needs!("prlimit");
    let w = World::new();
    let s = w.server().await;
    s.create("lim1").await;
    let pid = s.pid().to_string();
    // Every file the router writes may hold 100 bytes at most (the soft
    // limit, so that it can be raised again).
    let out = Command::new("prlimit").args(["--pid", &pid, "--fsize=100:"]).output().expect("prlimit");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = s.call("session_create", json!({"name": "lim2"})).await;
    assert!(r.is_error, "{}", r.text);
    assert_has!(r.text, "state directory is full");
    // Still alive, still answering, and what it wrote before is whole.
    assert_has!(s.run("lim1", "echo alive-under-limit").await, "alive-under-limit");
    let meta: Value =
        serde_json::from_slice(&std::fs::read(w.session_dir("lim1").join("meta.json")).expect("meta")).expect("whole");
    assert_eq!(meta["name"], "lim1");
    let out = Command::new("prlimit").args(["--pid", &pid, "--fsize=unlimited:"]).output().expect("prlimit");
    assert!(out.status.success());
    s.create("lim2").await;
}

// ----------------------------------------------------------- names and paths

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_session_names_are_refused_and_run_nothing() {
    let w = World::new();
    let s = w.server().await;
    let pwn = w.tmp.path().join("pwn");
    let long = "n".repeat(300);
    let names = [
        "..".to_string(),
        "a/b".into(),
        "-x".into(),
        "a:b.c".into(),
        "%d".into(),
        format!("#(touch {})", pwn.display()),
        long,
        "a\0b".into(),
        "#{pane_pid}".into(),
    ];
    for name in &names {
        let said = s.err("session_create", json!({"name": name})).await;
        assert_has!(said, "letters, digits");
        crate::support::raw::assert_no_control_chars("the refusal", &said);
        for tool in ["read", "run", "session_close"] {
            let r = s.call(tool, json!({"session": name, "command": "echo no"})).await;
            assert!(r.is_error, "{tool} accepted {name:?}: {}", r.text);
        }
    }
    assert!(!pwn.exists(), "a name ran a command");
    let sessions: Vec<String> = std::fs::read_dir(w.home().join("sessions"))
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    assert!(sessions.is_empty(), "directories were made: {sessions:?}");
    assert!(!w.tmp.path().join("a").exists() && !w.home().join("b").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn save_to_a_relative_path_a_link_an_existing_file_a_fifo_or_the_state_home_is_refused() {
    let w = World::new();
    let s = w.server().await;
    s.create("p1").await;
    let base = w.tmp.path().join("out");
    std::fs::create_dir_all(&base).expect("out");
    let victim = w.tmp.path().join("victim.txt");
    std::fs::write(&victim, "untouched").expect("victim");
    std::os::unix::fs::symlink(&victim, base.join("link.txt")).expect("link");
    std::os::unix::fs::symlink(w.home().join("sessions").join("p1"), base.join("logs")).expect("dir link");
    std::fs::write(base.join("exists.txt"), "old").expect("exists");
    let fifo = base.join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    let raw = w.session_dir("p1").join("raw.log");
    let cases: Vec<(String, Option<bool>, &str)> = vec![
        ("relative.txt".into(), None, "absolute"),
        (base.join("link.txt").display().to_string(), Some(true), "symlink"),
        (base.join("exists.txt").display().to_string(), None, "exists"),
        (fifo.display().to_string(), Some(true), "not a regular file"),
        (raw.display().to_string(), Some(true), "state directory"),
        (base.join("logs/raw.log").display().to_string(), Some(true), "state directory"),
        (w.home().join("token").display().to_string(), Some(true), "state directory"),
        (base.join("missing/dir/x.txt").display().to_string(), None, "does not exist"),
    ];
    let raw_before = std::fs::read(&raw).expect("raw");
    for (path, overwrite, why) in &cases {
        let mut args = json!({"session": "p1", "command": "echo saved-maybe", "save_to": path});
        if let Some(o) = overwrite {
            args["overwrite"] = json!(o);
        }
        let said = s.err("run", args).await;
        assert_has!(said, why);
    }
    // Refused before anything was typed or written.
    assert_eq!(std::fs::read_to_string(&victim).expect("victim"), "untouched");
    assert_eq!(std::fs::read_to_string(base.join("exists.txt")).expect("exists"), "old");
    let raw_after = std::fs::read(&raw).expect("raw");
    assert!(raw_after.starts_with(&raw_before));
    assert!(memchr::memmem::find(&raw_after, b"saved-maybe").is_none(), "a refused run was typed");
    // And a good path works.
    let good = base.join("good.txt");
    let r = s
        .ok("run", json!({"session": "p1", "command": "echo saved-here", "save_to": good.display().to_string()}))
        .await;
    assert_has!(r, "saved-here");
    assert_has!(std::fs::read_to_string(&good).expect("saved"), "saved-here");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_home_path_full_of_tmux_and_shell_syntax_is_used_literally() {
    let w = World::new();
    // Short enough for a socket path inside it (108 bytes at most).
    let pwn = PathBuf::from(format!("/tmp/pw{}", std::process::id()));
    let odd = w.tmp.path().join(format!("s %d #{{q}} #(touch {}) 'q\" $(id)", pwn.display()));
    std::fs::create_dir_all(&odd).expect("odd home");
    let home = odd.display().to_string();
    let s = w.server_with(&[("DOCENT_TERMINAL_MCP_HOME", &home)]).await;
    s.create("o1").await;
    assert_has!(s.run("o1", "echo odd-$((3*4))").await, "odd-12");
    let dir = odd.join("sessions").join("o1");
    assert!(std::fs::read(dir.join("raw.log")).is_ok_and(|r| memchr::memmem::find(&r, b"odd-12").is_some()));
    assert!(!pwn.exists(), "the state home's path ran a command");
    let _ = std::fs::remove_file(&pwn);
    assert_has!(s.ok("search", json!({"session": "o1", "pattern": "odd-12"})).await, "odd-12");
}

// ----------------------------------------------------------------- the token

/// One HTTP exchange over TCP: status.
fn tcp_status(port: u16, req: &str) -> u16 {
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return 0 };
    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
    if s.write_all(req.as_bytes()).is_err() {
        return 0;
    }
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

#[test]
fn a_missing_wrong_or_misplaced_token_is_refused_and_a_loose_token_file_replaced() {
    let world = World::new();
    let port = free_port();
    let serve = Serve::start(&world, &["--tcp", &port.to_string()]);
    let token = std::fs::read_to_string(world.home().join("token")).expect("token").trim().to_string();
    let host = format!("127.0.0.1:{port}");
    let get = |auth: Option<String>, path: &str| {
        let mut h = vec![("host", host.clone())];
        if let Some(a) = auth {
            h.push(("authorization", a));
        }
        let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
        tcp_status(port, &request("GET", path, &h, ""))
    };
    let half = token.len() / 2;
    let prefix_right = format!("{}{}", &token[..half], "0".repeat(token.len() - half));
    let flip_last = format!("{}{}", &token[..token.len() - 1], if token.ends_with('0') { "1" } else { "0" });
    for (what, auth) in [
        ("none", None),
        ("wrong", Some("Bearer wrong".to_string())),
        ("prefix right", Some(format!("Bearer {prefix_right}"))),
        ("last byte wrong", Some(format!("Bearer {flip_last}"))),
        ("shorter", Some(format!("Bearer {}", &token[..token.len() - 1]))),
        ("longer", Some(format!("Bearer {token}0"))),
        ("empty", Some("Bearer ".to_string())),
        ("not bearer", Some(format!("Basic {token}"))),
    ] {
        assert_eq!(get(auth, "/api/sessions"), 401, "{what}");
    }
    assert_eq!(get(Some(format!("Bearer {token}")), "/api/sessions"), 200);
    for q in ["token", "access_token", "auth"] {
        assert_eq!(get(None, &format!("/api/sessions?{q}={token}")), 400, "token in the URL as {q}");
    }
    // A token file others could read is a token others may know: the next
    // start makes a new one, 0600, and the old one stops working.
    serve.kill();
    let file = world.home().join("token");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let port2 = free_port();
    let _again = Serve::start(&world, &["--tcp", &port2.to_string()]);
    assert_eq!(mode(&file), 0o600);
    let fresh = std::fs::read_to_string(&file).expect("token").trim().to_string();
    assert_ne!(fresh, token, "a token that was readable by others is still in use");
    let host2 = format!("127.0.0.1:{port2}");
    let status = |t: &str| {
        tcp_status(
            port2,
            &request("GET", "/api/sessions", &[("host", &host2), ("authorization", &format!("Bearer {t}"))], ""),
        )
    };
    assert_eq!(status(&token), 401);
    assert_eq!(status(&fresh), 200);
}

#[test]
fn a_token_wrong_in_its_first_or_its_last_byte_takes_as_long_to_refuse() {
    let world = World::new();
    let port = free_port();
    let _serve = Serve::start(&world, &["--tcp", &port.to_string()]);
    let token = std::fs::read_to_string(world.home().join("token")).expect("token").trim().to_string();
    let host = format!("127.0.0.1:{port}");
    let swap = |c: char| if c == '0' { '1' } else { '0' };
    let first: String =
        std::iter::once(swap(token.chars().next().unwrap_or('0'))).chain(token.chars().skip(1)).collect();
    let last: String =
        token.chars().take(token.len() - 1).chain(std::iter::once(swap(token.chars().last().unwrap_or('0')))).collect();
    let req =
        |t: &str| request("GET", "/api/sessions", &[("host", &host), ("authorization", &format!("Bearer {t}"))], "");
    let (rf, rl) = (req(&first), req(&last));
    let rounds = if slow() { 2000 } else { 300 };
    let (mut tf, mut tl) = (Vec::new(), Vec::new());
    for i in 0..rounds {
        // Interleaved, so load on the machine hits both alike.
        for (r, into) in if i % 2 == 0 { [(&rf, &mut tf), (&rl, &mut tl)] } else { [(&rl, &mut tl), (&rf, &mut tf)] } {
            let started = Instant::now();
            assert_eq!(tcp_status(port, r), 401);
            into.push(started.elapsed().as_nanos() as f64);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let (mf, ml) = (median(&mut tf), median(&mut tl));
    eprintln!("token timing: median 401 for a wrong first byte {:.0} µs, last byte {:.0} µs", mf / 1e3, ml / 1e3);
    let tolerance = (mf.min(ml) * 0.25).max(150_000.0);
    assert!((mf - ml).abs() < tolerance, "first {mf} ns vs last {ml} ns");
}

// ------------------------------------------------------------- DNS rebinding

#[test]
fn dns_rebinding_is_refused_on_every_route() {
    let world = World::new();
    let port = free_port();
    let serve = Serve::start(&world, &["--tcp", &port.to_string()]);
    let token = std::fs::read_to_string(world.home().join("token")).expect("token").trim().to_string();
    let auth = format!("Bearer {token}");
    let routes: [(&str, &str, &str); 8] = [
        (
            "POST",
            "/mcp",
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"r","version":"0"}}}"#,
        ),
        ("GET", "/mcp", ""),
        ("DELETE", "/mcp", ""),
        ("GET", "/health", ""),
        ("GET", "/api/sessions", ""),
        ("POST", "/api/sessions/x/close", "{}"),
        ("POST", "/api/sessions/x/logs", r#"{"action":"keep"}"#),
        ("POST", "/api/sweep?dry_run=1", ""),
    ];
    for (method, path, body) in routes {
        for (host, origin) in [
            ("evil.example.com", None),
            ("evil.example.com:8766", Some("http://evil.example.com")),
            (&*format!("localhost:{port}"), Some("http://evil.example.com")),
            (&*format!("127.0.0.1:{port}"), Some("null")),
            ("127.0.0.1.evil.example", None),
            ("localhost.", None),
        ] {
            let mut h = vec![
                ("host", host),
                ("authorization", auth.as_str()),
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
            ];
            if let Some(o) = origin {
                h.push(("origin", o));
            }
            assert_eq!(
                tcp_status(port, &request(method, path, &h, body)),
                403,
                "{method} {path} Host {host} Origin {origin:?}"
            );
        }
        let on_socket = unix_http(
            &serve.socket,
            &request(method, path, &[("host", "x"), ("origin", "http://evil.example.com")], body),
        )
        .0;
        assert_eq!(on_socket, 403, "{method} {path} on the socket with a foreign Origin");
    }
    // The official conformance suite's own scenario runs in
    // conformance.rs with the suite's other scenarios.
}

// ---------------------------------------------------------- modes and owners

#[test]
fn modes_stay_private_under_umask_000() {
    let world = World::new();
    let port = free_port().to_string();
    let script = format!("umask 000; exec '{SERVER}' serve --tcp {port}");
    let mut child =
        Command::new("sh").args(["-c", &script]).envs(world.env()).stdin(Stdio::null()).spawn().expect("serve");
    until_answering(&world);
    let socket = socket_of(&world);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
    rt.block_on(async {
        let mut c = RawClient::start(&["connect", "--actor", "umask"], &world.env()).await;
        c.call("session_create", json!({"name": "um1"}), Duration::from_secs(20)).await;
        c.call("run", json!({"session": "um1", "command": "echo x"}), Duration::from_secs(20)).await;
    });
    assert_eq!(mode(&socket), 0o600, "socket");
    assert_eq!(mode(socket.parent().expect("dir")), 0o700, "socket directory");
    let mut loose = Vec::new();
    let mut stack = vec![world.home()];
    while let Some(p) = stack.pop() {
        let Ok(m) = std::fs::symlink_metadata(&p) else { continue };
        if m.is_dir() {
            stack.extend(std::fs::read_dir(&p).expect("dir").flatten().map(|e| e.path()));
        }
        if m.file_type().is_symlink() {
            continue; // a link's own mode means nothing; its target is checked where it lives
        }
        let bits = m.permissions().mode() & 0o777;
        // Nothing of ours may be written by others; private files not even read.
        let secret = ["token", "secret", "calls.log", "raw.log", "session.txt", "meta.json"]
            .iter()
            .any(|n| p.file_name().is_some_and(|f| f == *n));
        if bits & 0o022 != 0 || (secret && bits & 0o077 != 0) || (p == world.home() && bits & 0o077 != 0) {
            loose.push(format!("{:o} {}", bits, p.display()));
        }
    }
    assert!(loose.is_empty(), "loose modes under umask 000:\n{}", loose.join("\n"));
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_premade_runtime_dir_is_tightened_or_refused_when_another_user_owns_it() {
    let world = World::new();
    let dir = world.tmp.path().join("run").join("docent-terminal-mcp");
    std::fs::create_dir_all(&dir).expect("premade");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let serve = Serve::start(&world, &[]);
    assert_eq!(mode(&dir), 0o700, "a loose directory of ours is tightened");
    serve.stop();
    if !nix::unistd::getuid().is_root() {
        eprintln!("skipped: the other-owner half needs root (to chown)");
        return;
    }
    std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).expect("chown");
    let out = Command::new(SERVER).arg("serve").envs(world.env()).stdin(Stdio::null()).output().expect("serve");
    assert!(!out.status.success(), "served from a directory another user owns");
    assert_has!(String::from_utf8_lossy(&out.stderr), "owned by uid 65534");
    // A state home of another owner is refused the same way.
    let other = World::new();
    std::fs::create_dir_all(other.home()).expect("home");
    std::os::unix::fs::chown(other.home(), Some(65534), Some(65534)).expect("chown");
    let out = Command::new(SERVER).arg("serve").envs(other.env()).stdin(Stdio::null()).output().expect("serve");
    assert!(!out.status.success(), "used a state home another user owns");
    assert_has!(String::from_utf8_lossy(&out.stderr), "owned by uid 65534");
}

#[test]
fn another_uid_via_runuser_is_refused_by_the_peer_check() {
    if !nix::unistd::getuid().is_root() {
        eprintln!("skipped: runuser needs root");
        return;
    }
    crate::needs!("runuser");
    crate::needs!("python3");
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    for p in [world.tmp.path(), &world.tmp.path().join("run"), serve.socket.parent().expect("dir"), &serve.socket] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    let script = "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\n\
                  s.sendall(b'GET /api/sessions HTTP/1.1\\r\\nhost: x\\r\\nconnection: close\\r\\n\\r\\n')\n\
                  d=b''\nwhile True:\n  c=s.recv(4096)\n  if not c: break\n  d+=c\nprint(d.decode())";
    let out = Command::new("runuser")
        .args(["-u", "nobody", "--", "python3", "-c", script])
        .arg(&serve.socket)
        .output()
        .expect("runuser");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_has!(said, "403");
    assert!(!said.contains("\"sessions\""), "{said}");
}

// --------------------------------------------------------------- two servers

#[test]
fn of_two_servers_started_at_once_one_wins_and_a_kill9_needs_no_cleanup() {
    let world = World::new();
    let start = |n: usize| {
        let mut c = Command::new(SERVER);
        c.arg("serve").envs(world.env()).stdin(Stdio::null()).stderr(Stdio::piped());
        // The second on another socket path: only the state home is shared.
        if n == 1 {
            c.env("DOCENT_TERMINAL_MCP_SOCKET_PATH", world.tmp.path().join("other.sock"));
        }
        c.spawn().expect("serve")
    };
    for round in 0..3 {
        let mut a = start(0);
        let mut b = start(1);
        std::thread::sleep(Duration::from_millis(1500));
        let (ea, eb) = (a.try_wait().expect("a"), b.try_wait().expect("b"));
        let (mut winner, loser) = match (ea, eb) {
            (None, Some(_)) => (a, b),
            (Some(_), None) => (b, a),
            other => panic!("round {round}: exactly one must run: {other:?}"),
        };
        let out = loser.wait_with_output().expect("loser");
        assert!(!out.status.success());
        assert_has!(String::from_utf8_lossy(&out.stderr), "already");
        // kill -9 of the winner: the next start needs no cleanup.
        let _ = winner.kill();
        let _ = winner.wait();
    }
    let serve = Serve::start(&world, &[]);
    assert_eq!(unix_get(&serve.socket, "/health").0, 200);
    // A stdio server on the same home is refused while it runs.
    let out = Command::new(SERVER).envs(world.env()).stdin(Stdio::null()).output().expect("stdio");
    assert!(!out.status.success());
}

// ---------------------------------------------------------------- advisories

#[test]
fn dependencies_have_no_known_advisories() {
    let have = Command::new("cargo").args(["audit", "--version"]).output().is_ok_and(|o| o.status.success());
    if !have {
        eprintln!(
            "skipped: cargo-audit is not installed (.ci/run installs it and runs `cargo audit` before the tests)"
        );
        return;
    }
    let out = Command::new("cargo")
        .args(["audit", "--file"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.lock"))
        .output()
        .expect("cargo audit");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if said.contains("couldn't fetch advisory database") || said.contains("error fetching") {
        eprintln!("skipped: the advisory database could not be fetched:\n{said}");
        return;
    }
    assert!(out.status.success(), "cargo audit:\n{said}");
}
