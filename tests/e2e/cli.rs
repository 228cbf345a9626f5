//! Command-line details a person meets first: completions that offer
//! session names, manual pages under both names, errors named by the
//! program as it was called, `logs` that say what they found, and a closed
//! session dated by its close.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::assert_has;
use crate::support::{Ran, SERVER, World, run_for};

const LIMIT: Duration = Duration::from_secs(30);

/// The program under the short name, as `cargo install` puts it beside the
/// long one: a link named `dtmcp`.
fn short_name(w: &World) -> PathBuf {
    let dir = w.tmp.path().join("bin");
    std::fs::create_dir_all(&dir).expect("bin dir");
    let link = dir.join("dtmcp");
    if !link.exists() {
        std::os::unix::fs::symlink(SERVER, &link).expect("link dtmcp");
    }
    link
}

/// What bash completes for `line` (its last word being completed), with
/// the script `dtmcp completions bash` prints.
async fn bash_completes(w: &World, dtmcp: &Path, line: &str) -> Vec<String> {
    let words: Vec<&str> = line.split(' ').collect();
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let script = format!(
        "source <('{exe}' completions bash) || exit 9\n\
         COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; COMP_TYPE=9\n\
         _clap_complete_dtmcp dtmcp '{cur}' '{prev}'\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        exe = dtmcp.display(),
        words = quoted.join(" "),
        cword = words.len() - 1,
        cur = words[words.len() - 1],
        prev = words[words.len().saturating_sub(2)],
    );
    let Ran { code, stdout: out, stderr: err, .. } = run_for(Path::new("bash"), &["-c", &script], &w.env(), LIMIT);
    assert!(code == 0, "bash completion failed (exit {code}): {err}");
    out.lines().map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_offer_subcommands_options_and_session_names() {
    crate::needs!("tmux");
    let w = World::new();
    let server = w.server().await;
    server.create("alpha").await;
    server.create("beta").await;
    server.ok("session_close", json!({ "session": "beta" })).await;
    let dtmcp = short_name(&w);

    let subs = bash_completes(&w, &dtmcp, "dtmcp ta").await;
    assert!(subs.contains(&"tail".to_string()), "{subs:?}");
    let options = bash_completes(&w, &dtmcp, "dtmcp tail --fo").await;
    assert!(options.contains(&"--follow".to_string()), "{options:?}");
    for line in ["dtmcp tail ", "dtmcp show ", "dtmcp logs keep ", "dtmcp attach "] {
        let names = bash_completes(&w, &dtmcp, line).await;
        assert!(names.contains(&"alpha".to_string()) && names.contains(&"beta".to_string()), "{line:?}: {names:?}");
    }
    let some = bash_completes(&w, &dtmcp, "dtmcp search al").await;
    assert_eq!(some, ["alpha"], "only the names that fit");

    // zsh's script asks the same way; its answer, by the protocol the script speaks.
    let Ran { code, stdout: script, .. } = run_for(&dtmcp, &["completions", "zsh"], &w.env(), LIMIT);
    assert!(code == 0);
    assert_has!(script, "compdef _clap_dynamic_completer_dtmcp dtmcp");
    let mut env = w.env();
    env.extend(
        [("COMPLETE", "zsh"), ("_CLAP_COMPLETE_INDEX", "2"), ("_CLAP_IFS", "\n")].map(|(k, v)| (k.into(), v.into())),
    );
    let Ran { code, stdout: out, stderr: err, .. } = run_for(&dtmcp, &["--", "dtmcp", "tail", ""], &env, LIMIT);
    assert!(code == 0, "{err}");
    assert!(out.lines().any(|l| l == "alpha") && out.lines().any(|l| l == "beta"), "{out}");
    for shell in ["fish", "elvish", "powershell"] {
        let Ran { code, stderr: err, .. } = run_for(&dtmcp, &["completions", shell], &w.env(), LIMIT);
        assert!(code == 0, "{shell}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn man_pages_are_written_under_both_names() {
    let w = World::new();
    let Ran { code, stdout: page, .. } = run_for(Path::new(SERVER), &["man"], &w.env(), LIMIT);
    assert!(code == 0);
    assert!(page.contains(".TH docent-terminal-mcp 1") && page.contains("tail"), "{page}");
    let dir = w.tmp.path().join("man1");
    let Ran { code, stdout: listed, stderr: err, .. } =
        run_for(Path::new(SERVER), &["man", "--dir", dir.to_str().expect("utf-8")], &w.env(), LIMIT);
    assert!(code == 0, "{err}");
    for (file, title) in [
        ("dtmcp.1", ".TH dtmcp 1"),
        ("dtmcp-ls.1", ".TH dtmcp-ls 1"),
        ("docent-terminal-mcp.1", ".TH docent-terminal-mcp 1"),
        ("docent-terminal-mcp-ls.1", ".TH docent-terminal-mcp-ls 1"),
        ("dtmcp-search.1", ".TH dtmcp-search 1"),
    ] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}\n{listed}"));
        assert_has!(text, title);
        assert_has!(listed, file);
    }
    for sub in ["ls", "tail", "show", "regions", "search", "watch", "attach"] {
        let Ran { code, stdout: help, .. } = run_for(Path::new(SERVER), &[sub, "--help"], &w.env(), LIMIT);
        assert!(code == 0);
        assert_has!(help, "Examples:");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_close_logs_and_ls_tell_what_is_there_as_dtmcp() {
    crate::needs!("tmux");
    let w = World::new();
    let dtmcp = short_name(&w);
    let server = w.server().await;
    server.create("t1").await;
    server.run("t1", "echo last words").await;
    // The last output is well before the close.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let closing = dtmcp::config::now_ms();
    let Ran { code, stderr: err, .. } = run_for(&dtmcp, &["close", "t1"], &w.env(), LIMIT);
    assert!(code == 0, "{err}");

    let Ran { code, stdout: out, stderr: err, .. } = run_for(&dtmcp, &["logs", "keep", "nosuch"], &w.env(), LIMIT);
    assert!(code != 0);
    assert_eq!(out, "");
    assert!(err.starts_with("dtmcp: "), "named as called: {err}");
    assert_has!(err, "sessions with logs: t1");
    assert_has!(err, "dtmcp ls --all");
    assert!(!err.contains("open: t1") && !err.contains("session_list"), "{err}");

    let Ran { code, stdout: out, stderr: err, .. } = run_for(&dtmcp, &["logs", "due"], &w.env(), LIMIT);
    assert!(code == 0, "{err}");
    assert_eq!(out, "", "nothing is due");
    assert_has!(err, "nothing is due");

    let Ran { code, stdout: out, stderr: err, .. } = run_for(&dtmcp, &["ls", "--all", "--json"], &w.env(), LIMIT);
    assert!(code == 0, "{err}");
    let list: Value = serde_json::from_str(&out).expect("JSON");
    let t1 = list.as_array().and_then(|a| a.iter().find(|s| s["name"] == "t1")).expect("t1 listed");
    assert_eq!(t1["state"], "closed");
    let since = t1["since_ms"].as_u64().expect("since_ms");
    assert!(since + 500 >= closing, "closed since its last output, not its close: {since} < {closing}");

    let Ran { stderr: err, .. } = run_for(Path::new(SERVER), &["tail", "t9"], &w.env(), LIMIT);
    assert!(err.starts_with("docent-terminal-mcp: "), "{err}");
    let Ran { stderr: err, .. } = run_for(&dtmcp, &["tail", "t9"], &w.env(), LIMIT);
    assert!(err.starts_with("dtmcp: "), "{err}");
}
