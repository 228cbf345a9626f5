//! What a policy costs a `run`: `run true` over stdio against two servers
//! of the same build, one without a policy and one under a policy of 200
//! rules (none of which matches, so every rule is looked at and the line is
//! allowed and audited), called in turn so that the machine's noise falls
//! on both alike; and the judge alone on a typical line.
//!
//! `cargo bench --bench policy` (add `-- N` for N samples, default 300).
//! Prints a table against the target (a 200-rule policy adds at
//! most 50 µs to a `run`); asserts nothing.

use std::path::Path;
use std::time::{Duration, Instant};

use dtmcp::mcp_client::McpChild;
use dtmcp_core::policy::{Policy, To, Typed};
use serde_json::json;

/// How many rules the policy has.
const RULES: usize = 200;

fn main() -> anyhow::Result<()> {
    let samples: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(300);
    let text = policy_text();
    let judge = judge_alone(&text, samples * 100)?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let tmp = tempfile::tempdir()?;
    let (plain, governed) = rt.block_on(in_turn(tmp.path(), &text, samples))?;
    let (p, g) = (pct(&plain, 50), pct(&governed, 50));
    let added = g.as_secs_f64() - p.as_secs_f64();
    println!("\n{:<58} {:>10} {:>10} {:>10}", "what (n = samples)", "median", "p90", "target");
    row(&format!("run `true`, no policy (n={samples})"), &plain, "");
    row(&format!("run `true`, {RULES}-rule policy, audited (n={samples})"), &governed, "");
    println!("{:<58} {:>10} {:>10} {:>10}", "  added by the policy (median)", us(added), "", "≤ 50 µs");
    println!(
        "{:<58} {:>10} {:>10} {:>10}",
        "  governed / plain (median)",
        format!("{:.3}", g.as_secs_f64() / p.as_secs_f64()),
        "",
        ""
    );
    row(&format!("the judge alone, {RULES} rules, a compound line (n={})", samples * 100), &judge, "");
    Ok(())
}

fn us(s: f64) -> String {
    format!("{:.1} µs", s * 1e6)
}

fn row(what: &str, v: &[Duration], target: &str) {
    println!("{what:<58} {:>10} {:>10} {:>10}", us(pct(v, 50).as_secs_f64()), us(pct(v, 90).as_secs_f64()), target);
}

fn pct(v: &[Duration], p: usize) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s.get((s.len() * p / 100).min(s.len().saturating_sub(1))).copied().unwrap_or_default()
}

/// A policy of [`RULES`] rules of every kind, none matching `true`.
fn policy_text() -> String {
    let mut text = String::from("default = \"allow\"\n");
    for i in 0..RULES {
        let action = ["deny", "ask", "allow"][i % 3];
        let to = ["shell", "any", "program"][i % 3];
        text.push_str(&format!(
            "\n[[rule]]\naction = \"{action}\"\ncommand = '(^|\\s)tool{i}\\s+--(force|yes)\\b'\nto = \"{to}\"\nagents = [\"agent-{i}*\", \"*\"]\nwhy = \"rule {i}\"\n"
        ));
    }
    text
}

/// The judge on a compound line, `n` times.
fn judge_alone(text: &str, n: usize) -> anyhow::Result<Vec<Duration>> {
    let policy = Policy::parse(text).map_err(|e| anyhow::anyhow!("{e}"))?;
    let line = "cargo test --release -p foo 2>&1 | tee log && echo ok";
    let typed = Typed { agent: "claude-code", session: "s", line, to: To::Shell };
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        std::hint::black_box(policy.judge(std::hint::black_box(&typed)));
        out.push(t.elapsed());
    }
    Ok(out)
}

/// `run true` on two servers, in turn: without a policy, and under one.
async fn in_turn(tmp: &Path, policy: &str, samples: usize) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let file = tmp.join("policy.toml");
    std::fs::write(&file, policy)?;
    let exe = Path::new(env!("CARGO_BIN_EXE_docent-terminal-mcp"));
    let user_home = tmp.join("home");
    std::fs::create_dir_all(&user_home)?;
    let start = |name: &'static str, policy: Option<&Path>| {
        let home = tmp.join(name).display().to_string();
        let socket = format!("dtmcp-bench-policy-{name}-{}", std::process::id());
        let mut env = vec![
            ("DOCENT_TERMINAL_MCP_HOME".to_string(), home),
            ("DOCENT_TERMINAL_MCP_SOCKET".to_string(), socket.clone()),
            ("HOME".to_string(), user_home.display().to_string()),
        ];
        if let Some(p) = policy {
            env.push(("DOCENT_TERMINAL_MCP_POLICY".to_string(), p.display().to_string()));
        }
        async move {
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            Ok::<_, anyhow::Error>((McpChild::start(exe, &[], &env).await?, socket))
        }
    };
    let (plain, plain_socket) = start("plain", None).await?;
    let (governed, governed_socket) = start("governed", Some(&file)).await?;
    let result = async {
        for s in [&plain, &governed] {
            let created = s.call("session_create", json!({"name": "b"})).await?;
            anyhow::ensure!(!created.is_error, "session_create: {}", created.text);
        }
        let (mut a, mut b) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
        for i in 0..samples + 20 {
            for (s, out) in [(&plain, &mut a), (&governed, &mut b)] {
                let t = Instant::now();
                let r = s.call("run", json!({"session": "b", "command": "true"})).await?;
                anyhow::ensure!(r.text.contains("exit 0"), "unexpected reply: {}", r.text);
                if i >= 20 {
                    out.push(t.elapsed());
                }
            }
        }
        Ok((a, b))
    }
    .await;
    plain.stop().await?;
    governed.stop().await?;
    dtmcp::tmux::kill_server_now(&plain_socket);
    dtmcp::tmux::kill_server_now(&governed_socket);
    let audit = std::fs::read_to_string(tmp.join("governed").join("audit.jsonl")).unwrap_or_default();
    anyhow::ensure!(audit.lines().count() > samples, "the governed server audited {} lines", audit.lines().count());
    result
}
