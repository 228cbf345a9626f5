//! Token economy: how much of a command's output reaches the model, over
//! realistic scenarios driven through the real server. For each reply:
//! the raw output's size (what the session logged), the reply's size, and
//! whether every failure line of the raw output is in the reply. Each
//! scenario runs twice, with summaries on and with
//! `DOCENT_TERMINAL_MCP_SUMMARY=0`, for an A/B.
//!
//! `cargo bench --bench tokens` (`TOKENS_SHOW=1` prints every reply). Prints a table against the targets (every
//! failure line kept; over 20 KB of output, a reply under 10 % of it; no
//! reply over ~20,000 characters); asserts nothing. Scenarios whose
//! program is missing (cargo, pytest, gdb, gcc) are skipped with a reason.

use std::path::{Path, PathBuf};
use std::time::Duration;

use dtmcp::mcp_client::McpChild;
use regex::Regex;
use serde_json::{Value, json};

#[path = "shared/cleanup.rs"]
mod cleanup;

/// The largest reply a client should ever get, in characters.
const MAX_REPLY: usize = 20_000;
/// Outputs above this size must shrink to under [`BIG_RATIO`] of it.
const BIG: usize = 20_000;
const BIG_RATIO: f64 = 0.10;

/// One measured reply.
struct Row {
    scenario: String,
    raw: usize,
    reply: usize,
    failures: usize,
    kept: usize,
}

fn main() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let tmp = tempfile::Builder::new().prefix("dtmcp-tokens-").tempdir()?;
    let measured = measure(&rt, tmp.path());
    cleanup::remove_when_let_go(tmp);
    report(&measured?);
    Ok(())
}

/// Every scenario, with summaries on and then off.
fn measure(rt: &tokio::runtime::Runtime, tmp: &Path) -> anyhow::Result<Vec<Row>> {
    let fixtures = prepare(tmp)?;
    let mut rows = Vec::new();
    for summary in ["1", "0"] {
        rows.extend(rt.block_on(scenarios(tmp, &fixtures, summary))?);
    }
    Ok(rows)
}

/// What the scenarios need on disk, made before any server starts.
struct Fixtures {
    /// A cargo workspace whose tests fail twice, already compiled.
    workspace: Option<PathBuf>,
    /// A 20,000-line build log with three compiler errors.
    build_log: PathBuf,
    /// A pytest file with two failures among many passes, and the python to run it.
    pytest: Option<(PathBuf, String)>,
    /// A program that crashes, built with debug info.
    crash: Option<PathBuf>,
}

fn prepare(tmp: &Path) -> anyhow::Result<Fixtures> {
    Ok(Fixtures { workspace: workspace(tmp)?, build_log: build_log(tmp)?, pytest: pytest(tmp)?, crash: crash(tmp)? })
}

fn installed(program: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {program} >/dev/null")])
        .status()
        .is_ok_and(|s| s.success())
}

/// Where `program` is on `PATH`.
fn which(program: &str) -> anyhow::Result<PathBuf> {
    let out = std::process::Command::new("sh").args(["-c", &format!("command -v {program}")]).output()?;
    anyhow::ensure!(out.status.success(), "{program} is not on PATH");
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// Three crates of 120 tests each; `core` fails two of them.
fn workspace(tmp: &Path) -> anyhow::Result<Option<PathBuf>> {
    if !installed("cargo") {
        eprintln!("skipped cargo test: needs cargo");
        return Ok(None);
    }
    let ws = tmp.join("ws");
    std::fs::create_dir_all(&ws)?;
    std::fs::write(ws.join("Cargo.toml"), "[workspace]\nmembers = [\"core\", \"io\", \"cli\"]\nresolver = \"2\"\n")?;
    for name in ["core", "io", "cli"] {
        let dir = ws.join(name).join("src");
        std::fs::create_dir_all(&dir)?;
        let manifest = format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n");
        std::fs::write(ws.join(name).join("Cargo.toml"), manifest)?;
        let mut lib =
            String::from("pub fn double(x: u64) -> u64 { x * 2 }\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n");
        for i in 0..120 {
            let expected = if name == "core" && (i == 37 || i == 88) { i * 2 + 1 } else { i * 2 };
            lib.push_str(&format!("    #[test]\n    fn doubles_{i}() {{ assert_eq!(double({i}), {expected}); }}\n"));
        }
        lib.push_str("}\n");
        std::fs::write(dir.join("lib.rs"), lib)?;
    }
    let built = std::process::Command::new("cargo")
        .args(["test", "--workspace", "--no-run", "-q"])
        .current_dir(&ws)
        .env("CARGO_TARGET_DIR", ws.join("target"))
        .status()?;
    anyhow::ensure!(built.success(), "the bench workspace does not build");
    Ok(Some(ws))
}

/// A kernel-style build log: 20,000 lines, three errors, make giving up.
fn build_log(tmp: &Path) -> anyhow::Result<PathBuf> {
    let mut log = String::new();
    for i in 1..=20_000u32 {
        match i {
            4_321 => log.push_str("drivers/net/eth/phy.c:212:9: error: implicit declaration of function 'phy_reset_hw' [-Werror=implicit-function-declaration]\n"),
            11_002 => log.push_str("fs/ext4/inode.c:1187:17: error: 'struct inode' has no member named 'i_blkbits_old'\n"),
            17_650 => log.push_str("sound/core/pcm.c:58:1: error: expected ';' before '}' token\n"),
            19_999 => log.push_str("make[2]: *** [scripts/Makefile.build:243: sound/core/pcm.o] Error 1\n"),
            20_000 => log.push_str("make: *** [Makefile:1921: sound] Error 2\n"),
            _ if i % 97 == 0 => log.push_str(&format!("drivers/misc/m{i}.c:{}:5: warning: unused variable 'tmp' [-Wunused-variable]\n", i % 400)),
            _ => log.push_str(&format!("  CC [M]  drivers/misc/module_{i}/part_{}.o\n", i % 13)),
        }
    }
    let path = tmp.join("build.log");
    std::fs::write(&path, log)?;
    Ok(path)
}

/// 300 passing tests and two failures.
fn pytest(tmp: &Path) -> anyhow::Result<Option<(PathBuf, String)>> {
    let python = ["/usr/bin/python3", "python3"].into_iter().find(|p| {
        std::process::Command::new(p).args(["-m", "pytest", "--version"]).output().is_ok_and(|o| o.status.success())
    });
    let Some(python) = python else {
        eprintln!("skipped pytest: needs python3 -m pytest (apt install python3-pytest)");
        return Ok(None);
    };
    let dir = tmp.join("py");
    std::fs::create_dir_all(&dir)?;
    let tests = "import pytest\n\n\
        def parse(s):\n    return int(s.strip())\n\n\
        @pytest.mark.parametrize('n', range(300))\n\
        def test_parse(n):\n    assert parse(f' {n} ') == n\n\n\
        def test_parse_hex():\n    assert parse('0x10') == 16\n\n\
        def test_parse_empty():\n    assert parse('') == 0\n";
    std::fs::write(dir.join("test_parse.py"), tests)?;
    Ok(Some((dir, python.to_string())))
}

/// A C program that dereferences a null pointer three calls deep.
fn crash(tmp: &Path) -> anyhow::Result<Option<PathBuf>> {
    if !installed("gdb") || !installed("gcc") {
        eprintln!("skipped gdb: needs gdb and gcc");
        return Ok(None);
    }
    let src = tmp.join("crash.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\nstruct node { int v; struct node *next; };\n\
         int sum(struct node *n) { int s = 0; while (1) { s += n->v; n = n->next; } return s; }\n\
         int walk(struct node *n) { return sum(n); }\n\
         int main(void) { struct node b = {2, 0}, a = {1, &b}; printf(\"%d\\n\", walk(&a)); return 0; }\n",
    )?;
    let exe = tmp.join("crash");
    let ok = std::process::Command::new("gcc").args(["-g", "-O0", "-o"]).arg(&exe).arg(&src).status()?;
    anyhow::ensure!(ok.success(), "gcc failed");
    Ok(Some(exe))
}

/// A server with its own socket and state home.
struct Bench {
    server: McpChild,
    socket: String,
    home: PathBuf,
}

impl Bench {
    async fn start(tmp: &Path, summary: &str) -> anyhow::Result<Bench> {
        let socket = format!("dtmcp-bench-tokens-{}-{summary}", std::process::id());
        let home = tmp.join(format!("home-{summary}"));
        let user_home = tmp.join("user-home");
        std::fs::create_dir_all(&user_home)?;
        let (h, u) = (home.display().to_string(), user_home.display().to_string());
        let env = [
            ("DOCENT_TERMINAL_MCP_HOME", h.as_str()),
            ("DOCENT_TERMINAL_MCP_SOCKET", socket.as_str()),
            ("DOCENT_TERMINAL_MCP_SUMMARY", summary),
            ("HOME", u.as_str()),
        ];
        let server = McpChild::start(Path::new(env!("CARGO_BIN_EXE_docent-terminal-mcp")), &[], &env).await?;
        Ok(Bench { server, socket, home })
    }

    async fn call(&self, tool: &str, args: Value) -> anyhow::Result<String> {
        let r = self.server.call(tool, args).await?;
        anyhow::ensure!(!r.is_error, "{tool} failed: {}", r.text);
        Ok(r.text)
    }

    /// The session log's size, to measure what a call added to it.
    fn logged(&self, session: &str) -> usize {
        let path = self.home.join("sessions").join(session).join("session.txt");
        std::fs::metadata(path).map_or(0, |m| m.len() as usize)
    }

    /// Calls `tool`, and measures its reply against what it logged.
    async fn measure(
        &self,
        scenario: &str,
        session: &str,
        tool: &str,
        args: Value,
        fail: &Regex,
    ) -> anyhow::Result<Row> {
        let before = self.logged(session);
        let reply = self.call(tool, args).await?;
        if std::env::var_os("TOKENS_SHOW").is_some() {
            println!("===== {scenario}\n{reply}");
        }
        // The logger commits lines as they come; give the last ones a moment.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let path = self.home.join("sessions").join(session).join("session.txt");
        let log = std::fs::read(&path)?;
        let raw = String::from_utf8_lossy(&log[before.min(log.len())..]).into_owned();
        let failing: Vec<&str> = raw.lines().filter(|l| fail.is_match(l)).collect();
        let kept = failing.iter().filter(|l| reply.contains(l.trim_end())).count();
        Ok(Row { scenario: scenario.to_string(), raw: raw.len(), reply: reply.len(), failures: failing.len(), kept })
    }

    async fn stop(self) {
        let _ = self.server.stop().await;
        dtmcp::tmux::kill_server_now(&self.socket);
    }
}

async fn scenarios(tmp: &Path, f: &Fixtures, summary: &str) -> anyhow::Result<Vec<Row>> {
    let b = Bench::start(tmp, summary).await?;
    let result = run_all(&b, f, summary).await;
    b.stop().await;
    result
}

async fn run_all(b: &Bench, f: &Fixtures, summary: &str) -> anyhow::Result<Vec<Row>> {
    let tag = |name: &str| format!("{name} (summary {})", if summary == "0" { "off" } else { "on" });
    let mut rows = Vec::new();
    b.call("session_create", json!({"name": "w"})).await?;
    if let Some(ws) = &f.workspace {
        // The session's login shell starts from a clean HOME: give it this
        // cargo, and the toolchain settings rustup's proxy needs.
        let cargo = which("cargo")?;
        let bin = cargo.parent().map(|p| p.display().to_string()).unwrap_or_default();
        let mut setup =
            format!("cd {} && export CARGO_TARGET_DIR={}/target PATH={bin}:$PATH", ws.display(), ws.display());
        for var in ["RUSTUP_HOME", "CARGO_HOME", "RUSTUP_TOOLCHAIN"] {
            if let Ok(v) = std::env::var(var) {
                setup.push_str(&format!(" {var}={v}"));
            }
        }
        b.call("run", json!({"session": "w", "command": setup})).await?;
        let fail = Regex::new(r"^test .* \.\.\. FAILED$|panicked at|^test result: FAILED")?;
        let args = json!({"session": "w", "command": "cargo test --workspace --no-fail-fast", "timeout": 120});
        rows.push(b.measure(&tag("cargo test, workspace, 2 failures"), "w", "run", args, &fail).await?);
        b.call("run", json!({"session": "w", "command": "cd -"})).await?;
    }
    let fail = Regex::new(r": error: |^make(\[\d+\])?: \*\*\*")?;
    let args = json!({"session": "w", "command": format!("cat {}", f.build_log.display())});
    rows.push(b.measure(&tag("20,000-line build log, 3 errors"), "w", "run", args, &fail).await?);
    if let Some((dir, python)) = &f.pytest {
        let fail = Regex::new(r"^FAILED ")?;
        let cmd = format!("{python} -m pytest -p no:cacheprovider {}", dir.display());
        let args = json!({"session": "w", "command": cmd, "timeout": 120});
        rows.push(b.measure(&tag("pytest, 302 tests, 2 failures"), "w", "run", args, &fail).await?);
        let args = json!({"session": "w", "command": format!("{cmd} -v"), "timeout": 120});
        rows.push(b.measure(&tag("pytest -v, 302 tests, 2 failures"), "w", "run", args, &fail).await?);
    }
    if let Some(exe) = &f.crash {
        rows.extend(gdb(b, exe, &tag("gdb")).await?);
    }
    Ok(rows)
}

/// A gdb session: start, run to the crash, backtrace, locals, quit.
async fn gdb(b: &Bench, exe: &Path, tag: &str) -> anyhow::Result<Vec<Row>> {
    b.call("session_create", json!({"name": "g"})).await?;
    let none = Regex::new(r"^\b$")?;
    let crash = Regex::new(r"SIGSEGV|^#\d+ ")?;
    let mut rows = Vec::new();
    b.call("run", json!({"session": "g", "command": "set +o history"})).await?;
    let start = json!({"session": "g", "command": format!("gdb -q -nx {}", exe.display()), "timeout": 5});
    rows.push(b.measure(&format!("{tag}: start"), "g", "run", start, &none).await?);
    let steps: [(&str, &str, f64); 4] = [
        ("set pagination off", "settings", 1.0),
        ("run", "run to the crash", 5.0),
        ("bt", "backtrace", 1.0),
        ("info locals", "locals", 1.0),
    ];
    for (text, what, wait) in steps {
        let args = json!({"session": "g", "text": text, "keys": ["enter"], "wait": wait});
        rows.push(b.measure(&format!("{tag}: {what}"), "g", "send", args, &crash).await?);
    }
    b.call("send", json!({"session": "g", "text": "kill", "keys": ["enter"], "wait": 0.5})).await?;
    b.call("send", json!({"session": "g", "text": "quit", "keys": ["enter"], "wait": 0.5})).await?;
    Ok(rows)
}

fn report(rows: &[Row]) {
    println!("\n{:<48} {:>9} {:>9} {:>7} {:>9}  targets", "scenario", "raw B", "reply B", "ratio", "failures");
    for r in rows {
        let ratio = if r.raw == 0 { 0.0 } else { r.reply as f64 / r.raw as f64 };
        let mut missed = Vec::new();
        if r.kept < r.failures {
            missed.push("failure lines lost");
        }
        if r.raw > BIG && ratio >= BIG_RATIO {
            missed.push("reply ≥ 10 % of a big output");
        }
        if r.reply > MAX_REPLY {
            missed.push("reply over 20,000 chars");
        }
        let verdict = if missed.is_empty() { "met".to_string() } else { format!("MISSED: {}", missed.join(", ")) };
        println!(
            "{:<48} {:>9} {:>9} {:>6.1}% {:>4}/{:<4}  {verdict}",
            r.scenario,
            r.raw,
            r.reply,
            ratio * 100.0,
            r.kept,
            r.failures
        );
    }
}
