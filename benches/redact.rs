//! The cost of redaction, in two tables.
//!
//! 1. A reply of 20,000 characters: ordinary build output (no keyword, so
//!    only the prefilter runs), output full of the keywords (`token`,
//!    `password`, URLs) without secrets, a few secrets, and a secret every
//!    40 lines; each with the in-memory table alone and with the router's
//!    way (the session's `secrets.json` read, and written when it changed),
//!    against a floor measured in the same run: copying the text, which any
//!    reply does anyway.
//! 2. `run` of `true` end to end over stdio, with redaction on (a session
//!    that knows a few secrets) and off (`DOCENT_TERMINAL_MCP_REDACT=0`):
//!    two servers, their calls taken in turns so that the machine's load
//!    weighs on both alike.
//!
//! `cargo bench --bench redact` (add `-- N` for N round trips each,
//! default 300). Prints the tables; asserts nothing.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use dtmcp::mcp_client::McpChild;
use dtmcp::tools::replies::secrets::Secrets;
use dtmcp_core::redact::{Known, Table, redact};
use serde_json::json;

const SIZE: usize = 20_000;
const ROUNDS: u32 = 2_000;

/// Lines repeated up to [`SIZE`] characters, numbered as `read` numbers them.
fn text(lines: &[&str]) -> String {
    let mut out = String::new();
    for (i, l) in lines.iter().cycle().enumerate() {
        if out.len() >= SIZE {
            break;
        }
        out.push_str(&format!("{:>5}  {l}\n", i + 1));
    }
    out.truncate(SIZE);
    out
}

/// The mean time of `f` over `rounds` rounds, in microseconds.
fn time(rounds: u32, mut f: impl FnMut()) -> f64 {
    for _ in 0..rounds / 10 {
        f();
    }
    let start = Instant::now();
    for _ in 0..rounds {
        f();
    }
    start.elapsed().as_secs_f64() * 1e6 / f64::from(rounds)
}

fn main() -> anyhow::Result<()> {
    let samples: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(300);
    replies()?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let tmp = tempfile::tempdir()?;
    let (on, off) = rt.block_on(round_trips(tmp.path(), samples))?;
    println!("\n{:<52} {:>10} {:>10}", format!("run `true` over stdio (n = {samples} each)"), "median", "p90");
    row("redaction off (DOCENT_TERMINAL_MCP_REDACT=0)", &off);
    row("redaction on, the session knowing 3 secrets", &on);
    let diff = pct(&on, 50).as_secs_f64() - pct(&off, 50).as_secs_f64();
    println!("{:<52} {:>+10.3} ms", "on − off, medians", diff * 1e3);
    Ok(())
}

/// The first table: replies of 20,000 characters.
fn replies() -> anyhow::Result<()> {
    let build = text(&[
        "   Compiling serde v1.0.210",
        "   Compiling regex-automata v0.4.9 (commit 9fceb02d0ae598e95dc970b74767f19372d61af8)",
        "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  target/release/app",
        "test parser::tests::numbers_round_trip ... ok",
    ]);
    let keywords = text(&[
        "fetching https://example.com/api/v1/items?page=2",
        "the token count is 4096 (secret sauce: none)",
        "Enter your password: ",
        "git@github.com:me/repo.git",
    ]);
    let secret = "GITHUB_TOKEN=ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8";
    let mut few = build.clone();
    for (at, s) in [(2_000, secret), (9_000, "DB_PASSWORD=correct-horse-battery"), (15_000, "plain-words-deploy-value")]
    {
        let at = few[..at].rfind('\n').map_or(0, |i| i + 1);
        few.insert_str(at, &format!("{s}\n"));
    }
    few.truncate(SIZE);
    let mut lines = vec!["ordinary output line with words and numbers 12345"; 39];
    lines.push(secret);
    let many = text(&lines);
    let known = Known::from_env([("MY_DEPLOY_TOKEN", "plain-words-deploy-value")], &[]);

    // The router's way: a session directory with its table on disk.
    let secrets = Secrets::from_env();
    let dir = tempfile::tempdir()?;

    println!(
        "{:<36} {:>10} {:>12} {:>14} {:>8}",
        "reply of 20,000 characters", "floor µs", "redact µs", "router's µs", "secrets"
    );
    for (name, t) in [
        ("build output (no keyword)", &build),
        ("keywords, no secret", &keywords),
        ("3 secrets", &few),
        ("a secret every 40 lines", &many),
    ] {
        let floor = time(ROUNDS, || {
            black_box(black_box(t.as_str()).to_string());
        });
        let mut table = Table::default();
        let mut found = 0;
        let cost = time(ROUNDS, || {
            let (out, counts) = redact(black_box(t), &known, &mut table);
            found = counts.total();
            black_box(out);
        });
        let session = dir.path().join(name.replace([' ', ',', '(', ')'], "-"));
        std::fs::create_dir_all(&session)?;
        let env = [("MY_DEPLOY_TOKEN".to_string(), "plain-words-deploy-value".to_string())].into();
        secrets.learn_session(&session, std::process::id(), &env);
        let routed = time(ROUNDS / 4, || {
            black_box(secrets.redact(Some(&session), black_box(t)));
        });
        println!("{name:<36} {floor:>10.2} {cost:>12.2} {routed:>14.2} {found:>8}");
    }
    Ok(())
}

fn row(what: &str, v: &[Duration]) {
    let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1e3);
    println!("{what:<52} {:>10} {:>10}", ms(pct(v, 50)), ms(pct(v, 90)));
}

fn pct(v: &[Duration], p: usize) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s.get((s.len() * p / 100).min(s.len().saturating_sub(1))).copied().unwrap_or_default()
}

/// The second table: `run true` on a server that redacts and on one that
/// does not, in turns.
async fn round_trips(tmp: &Path, samples: usize) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let exe = Path::new(env!("CARGO_BIN_EXE_docent-terminal-mcp"));
    // An empty home for the shells, so that the machine's own prompt hooks
    // weigh on neither.
    let user_home = tmp.join("home");
    std::fs::create_dir_all(&user_home)?;
    let user_home = user_home.display().to_string();
    let mut servers = Vec::new();
    for (tag, redact) in [("on", "1"), ("off", "0")] {
        let socket = format!("dtmcp-bench-redact-{tag}-{}", std::process::id());
        let home = tmp.join(tag).display().to_string();
        let env = [
            ("DOCENT_TERMINAL_MCP_HOME", home.as_str()),
            ("DOCENT_TERMINAL_MCP_SOCKET", socket.as_str()),
            ("DOCENT_TERMINAL_MCP_REDACT", redact),
            ("HOME", user_home.as_str()),
        ];
        let server = McpChild::start(exe, &[], &env).await?;
        servers.push((server, socket));
    }
    let result = async {
        for (server, _) in &servers {
            let env = json!({
                "MY_DEPLOY_TOKEN": "plain-words-deploy-value",
                "DB_PASSWORD": "correct-horse-battery",
                "GITHUB_TOKEN": "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
            });
            let created = server.call("session_create", json!({"name": "b", "env": env})).await?;
            anyhow::ensure!(!created.is_error, "session_create: {}", created.text);
        }
        let mut times = [Vec::with_capacity(samples), Vec::with_capacity(samples)];
        for i in 0..samples + 20 {
            for (k, (server, _)) in servers.iter().enumerate() {
                let t = Instant::now();
                let r = server.call("run", json!({"session": "b", "command": "true"})).await?;
                let took = t.elapsed();
                anyhow::ensure!(r.text.contains("exit 0"), "unexpected reply: {}", r.text);
                if i >= 20 {
                    times[k].push(took);
                }
            }
        }
        let [on, off] = times;
        Ok((on, off))
    }
    .await;
    for (server, socket) in servers {
        server.stop().await?;
        dtmcp::tmux::kill_server_now(&socket);
    }
    result
}
