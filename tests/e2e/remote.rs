//! `docent-terminal-mcp ssh`, `install` and `into`, against a private sshd
//! on a loopback port (its own host key, authorized key, HOME and TMPDIR
//! for the shells it starts, all in a temp dir), and local carriers (`sh -c`,
//! `bwrap`). Nothing of the machine's own sshd or ~/.ssh is touched.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::assert_has;
use crate::support::{SERVER, World, installed, poll};

/// A private sshd for one test, killed (by its pid) when dropped.
pub(crate) struct Sshd {
    dir: tempfile::TempDir,
    child: Child,
    port: u16,
}

impl Sshd {
    /// Starts one, or says why it cannot run here.
    pub(crate) fn start() -> Result<Sshd, String> {
        Sshd::start_with("")
    }

    /// Starts one whose sessions also get the `NAME=value` words of
    /// `set_env` (a login shell other than the account's: `SHELL=...`).
    fn start_with(set_env: &str) -> Result<Sshd, String> {
        let sshd = "/usr/sbin/sshd";
        if !Path::new(sshd).exists() || !installed("ssh") || !installed("ssh-keygen") {
            return Err("needs openssh-server and openssh-client (.ci/run installs them)".into());
        }
        let dir = tempfile::Builder::new().prefix("dtmcp-sshd-").tempdir().map_err(|e| e.to_string())?;
        let d = dir.path();
        for sub in ["home", "tmp"] {
            std::fs::create_dir(d.join(sub)).map_err(|e| e.to_string())?;
        }
        for key in ["hostkey", "key"] {
            let out = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(d.join(key))
                .output()
                .map_err(|e| e.to_string())?;
            if !out.status.success() {
                return Err(format!("ssh-keygen failed: {}", String::from_utf8_lossy(&out.stderr)));
            }
        }
        std::fs::copy(d.join("key.pub"), d.join("authorized_keys")).map_err(|e| e.to_string())?;
        // Privilege separation wants this directory when sshd runs as root.
        if nix::unistd::getuid().is_root() {
            let _ = std::fs::create_dir_all("/run/sshd");
        }
        let config = format!(
            "ListenAddress 127.0.0.1\nHostKey {d}/hostkey\nAuthorizedKeysFile {d}/authorized_keys\nPidFile none\n\
             StrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
             PermitRootLogin prohibit-password\nSetEnv HOME={d}/home TMPDIR={d}/tmp {set_env}\n",
            d = d.display()
        );
        std::fs::write(d.join("sshd_config"), config).map_err(|e| e.to_string())?;
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(|e| e.to_string())?.port();
        let mut child = Command::new(sshd)
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .args(["-p", &port.to_string(), "-h"])
            .arg(d.join("hostkey"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("sshd.log")).map_err(|e| e.to_string())?)
            .spawn()
            .map_err(|e| format!("cannot start sshd: {e}"))?;
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(d.join("sshd.log")).unwrap_or_default();
                return Err(format!("sshd exited ({status}): {}", log.trim()));
            }
            if started.elapsed() > Duration::from_secs(5) {
                let _ = child.kill();
                let _ = child.wait();
                return Err("sshd did not listen within 5 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let sshd = Sshd { dir, child, port };
        // A login must work before anything is blamed on our commands.
        let out = Command::new("ssh").args(sshd.options()).args(["127.0.0.1", "true"]).output();
        match out {
            Ok(o) if o.status.success() => Ok(sshd),
            Ok(o) => Err(format!("a test login failed: {}", String::from_utf8_lossy(&o.stderr).trim())),
            Err(e) => Err(format!("cannot run ssh: {e}")),
        }
    }

    /// The ssh options that reach it.
    fn options(&self) -> Vec<String> {
        let d = self.dir.path().display();
        [
            "-p".to_string(),
            self.port.to_string(),
            "-i".into(),
            format!("{d}/key"),
            "-o".into(),
            format!("UserKnownHostsFile={d}/known_hosts"),
            "-o".into(),
            "StrictHostKeyChecking=no".into(),
            "-o".into(),
            "BatchMode=yes".into(),
            "-o".into(),
            "LogLevel=ERROR".into(),
        ]
        .to_vec()
    }

    /// The options as one line for a shell.
    pub(crate) fn line(&self) -> String {
        self.options().join(" ")
    }

    /// HOME of the shells it starts.
    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// TMPDIR of the shells it starts: where the bootstrap unpacks.
    fn tmp(&self) -> PathBuf {
        self.dir.path().join("tmp")
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a private sshd, or prints why not and returns from the test.
macro_rules! sshd_or_skip {
    () => {
        match Sshd::start() {
            Ok(s) => s,
            Err(why) => {
                eprintln!("skipped: {why}");
                return;
            }
        }
    };
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

/// Waits (up to 5 s) until `dir` is empty again: the files a shell
/// unpacked go when it exits.
fn until_empty(dir: &Path) {
    poll::until(&format!("{} to be empty", dir.display()), Duration::from_secs(5), || {
        let left = entries(dir);
        if left.is_empty() { Ok(()) } else { Err(format!("left behind: {left:?}")) }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_have_the_command_on_their_path() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let r = s.run("t1", "command -v docent-terminal-mcp").await;
    assert_has!(r, "exit 0");
    assert_has!(r, &format!("{}/bin/docent-terminal-mcp", w.home().display()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssh_with_the_bootstrap_gives_statuses_and_tags_regions_and_leaves_nothing() {
    let sshd = sshd_or_skip!();
    let w = World::new();
    let s = w.server().await;
    let env = json!({"DOCENT_TERMINAL_MCP_SSH_ENV": "ADJUTANT_EDITOR", "ADJUTANT_EDITOR": "zed it's"});
    s.ok("session_create", json!({"name": "t1", "env": env})).await;
    let r = s
        .ok("run", json!({"session": "t1", "command": format!("docent-terminal-mcp ssh {} 127.0.0.1", sshd.line()), "timeout": 15}))
        .await;
    assert_has!(r, "on 127.0.0.1");
    let host = dtmcp::config::hostname();
    let r = s.run("t1", "false").await;
    assert_has!(r, "exit 1 · ");
    assert_has!(r, &format!(" · on {host}"));
    let r = s.run("t1", "echo \"$HOME|$ADJUTANT_EDITOR|$DOCENT_TERMINAL_MCP_SSH_ENV|$PAGER\"; (exit 3) | true").await;
    // The session's PAGER=cat goes along: no pager holds the far side either.
    assert_has!(r, &format!("{}|zed it's|ADJUTANT_EDITOR|cat", sshd.home().display()));
    assert_has!(r, "exit 0 (pipeline: 3 0)");
    // The unpacked files stay while the shell runs (a zsh started inside
    // reads them); the decoded script removed itself.
    let unpacked = entries(&sshd.tmp());
    assert!(unpacked.len() == 1 && unpacked[0].starts_with("dtmcp."), "{unpacked:?}");
    // The far shell's `exit` gets no status of its own (that shell is gone
    // before it could print one); the ssh command ends with its status.
    let r = s.ok("run", json!({"session": "t1", "command": "exit", "timeout": 10})).await;
    assert_has!(r, "back on this host");
    let mut r = String::new();
    for _ in 0..50 {
        r = s.ok("regions", json!({"session": "t1"})).await;
        if r.lines().any(|l| l.starts_with("#1 exit 0")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_has!(r, &format!("`false` · on {host}"));
    assert!(r.lines().any(|l| l.contains("docent-terminal-mcp ssh") && !l.contains(" · on ")), "{r}");
    until_empty(&sshd.tmp());
    let r = s.run("t1", "true").await;
    let regions = s.ok("regions", json!({"session": "t1"})).await;
    assert!(!r.contains(" · on "), "back home, untagged: {r}\n{regions}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssh_to_a_zsh_user_gives_an_integrated_zsh() {
    crate::needs!("zsh");
    let zsh = String::from_utf8_lossy(&Command::new("sh").args(["-c", "command -v zsh"]).output().expect("sh").stdout)
        .trim()
        .to_string();
    let sshd = match Sshd::start_with(&format!("SHELL={zsh}")) {
        Ok(s) => s,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    std::fs::write(sshd.home().join(".zshrc"), "export FROM_FAR_ZSHRC=yes\n").expect(".zshrc");
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let line = format!("docent-terminal-mcp ssh {} 127.0.0.1", sshd.line());
    let r = s.ok("run", json!({"session": "t1", "command": line, "timeout": 15})).await;
    assert_has!(r, "on 127.0.0.1");
    let r = s.run("t1", "echo \"zsh=$ZSH_VERSION rc=$FROM_FAR_ZSHRC\"").await;
    assert_has!(r, "exit 0");
    assert_has!(r, "rc=yes");
    assert!(!r.contains("zsh= "), "the far shell is zsh: {r}");
    let r = s.run("t1", "true | false").await;
    assert_has!(r, "exit 1 (pipeline: 0 1)");
    assert_has!(r, " · on ");
    // A bash started inside the far zsh inherits the integration.
    s.run("t1", "bash").await;
    assert_has!(s.run("t1", "(exit 6)").await, "exit 6");
    s.run("t1", "exit").await;
    let r = s.ok("run", json!({"session": "t1", "command": "exit", "timeout": 10})).await;
    assert_has!(r, "back on this host");
    until_empty(&sshd.tmp());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_ssh_works_and_its_statuses_are_unknown() {
    let sshd = sshd_or_skip!();
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let r = s
        .ok("run", json!({"session": "t1", "command": format!("ssh -t {} 127.0.0.1", sshd.line()), "timeout": 15}))
        .await;
    assert_has!(r, "on 127.0.0.1");
    let r = s.ok("run", json!({"session": "t1", "command": "echo far-$((6*7)); false", "timeout": 10})).await;
    assert_has!(r, "far-42");
    assert_has!(r, "on 127.0.0.1 via ssh");
    assert!(!r.contains("exit 1"), "a plain shell's status cannot be known: {r}");
    s.ok("run", json!({"session": "t1", "command": "exit", "timeout": 10})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_copies_the_files_removes_older_versions_and_remove_takes_them_away() {
    let sshd = sshd_or_skip!();
    let base = sshd.home().join(".local/share/docent-terminal-mcp");
    std::fs::create_dir_all(base.join("v0")).expect("an older version");
    // shell_integrate found the files missing there before.
    let state = tempfile::tempdir().expect("state home");
    for key in ["127.0.0.1", "ann@127.0.0.1", "elsewhere"] {
        dtmcp::hosts::remember_missing(state.path(), key, dtmcp::config::now_ms()).expect("remember");
    }
    let cli = |extra: &[&str]| {
        let out = Command::new(SERVER)
            .arg("install")
            .args(extra)
            .args(sshd.options())
            .arg("127.0.0.1")
            .env("DOCENT_TERMINAL_MCP_HOME", state.path())
            .env("USER", "ann")
            .output();
        let out = out.expect("runs");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "install {extra:?} failed: {text}");
        text
    };
    let printed = cli(&["--print"]);
    assert_has!(printed, "integration.bash");
    assert_has!(printed, "ssh -T -p");
    assert!(base.join("v0").exists() && !base.join("v1").exists(), "--print changed nothing");
    let said = cli(&[]);
    let v = dtmcp::shell::INTEGRATION_VERSION;
    assert_has!(
        said,
        &format!("installed {} files in ~/.local/share/docent-terminal-mcp/v{v}", dtmcp::shell::FILES.len())
    );
    assert_has!(said, "removed the older ~/.local/share/docent-terminal-mcp/v0");
    for (name, body) in dtmcp::shell::FILES {
        assert_eq!(std::fs::read_to_string(base.join(format!("v{v}")).join(name)).expect(name), *body);
    }
    assert_eq!(entries(&base), [format!("v{v}")]);
    let now = dtmcp::config::now_ms();
    for key in ["127.0.0.1", "ann@127.0.0.1"] {
        assert_eq!(dtmcp::hosts::missing_since(state.path(), key, now), None, "{key} forgotten");
    }
    assert!(dtmcp::hosts::missing_since(state.path(), "elsewhere", now).is_some(), "another host kept");
    let said = cli(&["--remove"]);
    assert_has!(said, "removed ~/.local/share/docent-terminal-mcp");
    assert!(!base.exists(), "removed: {:?}", entries(&base));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn into_a_plain_sh_carrier_gives_an_integrated_shell_as_the_session_program() {
    let w = World::new();
    let s = w.server().await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let env = json!({"TMPDIR": tmp.path().display().to_string()});
    let command = "docent-terminal-mcp into sh -c 'exec \"$@\"' carrier";
    let r = s.call("session_create", json!({"name": "t1", "command": command, "env": env})).await;
    if r.is_error {
        let log = std::fs::read_to_string(w.session_dir("t1").join("logger.log")).unwrap_or_default();
        let raw = std::fs::read_to_string(w.session_dir("t1").join("raw.log")).unwrap_or_default();
        panic!("{} / {log} / {raw:?}", r.text);
    }
    let r = s.run("t1", "false").await;
    assert_has!(r, "exit 1 · ");
    let r = s.run("t1", "echo inside-$$").await;
    assert_has!(r, "exit 0");
    // The secret came by environment: no command line shows it.
    let secret = std::fs::read_to_string(w.session_dir("t1").join("secret")).expect("secret");
    let ps = Command::new("ps").args(["-eo", "args"]).output().expect("ps");
    let ps = String::from_utf8_lossy(&ps.stdout);
    assert!(ps.contains("integration.bash"), "the script is on a command line, as expected: {ps}");
    let shown: Vec<&str> = ps.lines().filter(|l| l.contains(secret.trim())).collect();
    assert!(shown.is_empty(), "the secret shows in ps: {shown:?}");
    // A zsh started inside reads the unpacked files, which stay until the
    // shell exits.
    if installed("zsh") {
        s.run("t1", "zsh").await;
        assert_has!(s.run("t1", "false").await, "exit 1");
        s.run("t1", "exit").await;
        assert_has!(s.run("t1", "(exit 3)").await, "exit 3");
    }
    assert!(!entries(tmp.path()).is_empty(), "the files stay while the shell runs");
    let _ = s.call("run", json!({"session": "t1", "command": "exit", "timeout": 5})).await;
    until_empty(tmp.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn into_bwrap_gives_an_integrated_shell_in_the_sandbox() {
    let works = Command::new("bwrap").args(["--ro-bind", "/", "/", "--dev", "/dev", "true"]).status();
    if !works.is_ok_and(|s| s.success()) {
        eprintln!("skipped: bwrap cannot make a sandbox here (missing, or no user namespaces)");
        return;
    }
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    // The terminal must keep its path inside (--dev-bind /dev): a fresh
    // /dev has no pts of the session, and the integration marks only the
    // session's own terminal.
    let line =
        "docent-terminal-mcp into bwrap --ro-bind / / --dev-bind /dev /dev --proc /proc --tmpfs /tmp --unshare-pid --";
    let r = s.ok("run", json!({"session": "t1", "command": line, "timeout": 10})).await;
    assert!(!r.contains("exit "), "the sandbox's shell is running: {r}");
    let r = s.run("t1", "touch /usr/x 2>/dev/null; echo pid-$$").await;
    assert_has!(r, "exit 0");
    assert_has!(r, "pid-");
    let r = s.run("t1", "test -w /usr").await;
    assert_has!(r, "exit 1 · ");
    // The sandbox's shell exits before it can report `exit 4`; the
    // command that entered the sandbox ends with that status.
    let left = s.ok("run", json!({"session": "t1", "command": "exit 4", "timeout": 10})).await;
    let r = s.run("t1", "true").await;
    if !r.contains("exit 0") {
        let regions = s.ok("regions", json!({"session": "t1"})).await;
        let raw = std::fs::read(w.session_dir("t1").join("raw.log")).unwrap_or_default();
        panic!("after `exit 4` ({left}), `true` gave: {r}\n{regions}\n{:?}", String::from_utf8_lossy(&raw));
    }
    let regions = s.ok("regions", json!({"session": "t1"})).await;
    assert!(regions.lines().any(|l| l.contains("exit 4") && l.contains("into bwrap")), "{regions}");
}

#[test]
fn print_shows_the_commands_and_scripts_but_not_the_secret() {
    let run = |args: &[&str]| {
        let out = Command::new(SERVER)
            .args(args)
            .env("__DTMCP_NONCE", "11.22.33.44")
            .env("DOCENT_TERMINAL_MCP_SSH_ENV", "ADJUTANT_EDITOR")
            .env("ADJUTANT_EDITOR", "zed")
            .output()
            .expect("runs");
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let ssh = run(&["ssh", "--print", "-p", "2222", "me@box"]);
    assert_has!(ssh, "ssh -t -p 2222 -- me@box ");
    assert_has!(ssh, "cat >\"$__dtmcp_d\"/integration.bash <<'__DTMCP_EOF__'");
    assert_has!(ssh, "export ADJUTANT_EDITOR=zed");
    assert_has!(ssh, "export DOCENT_TERMINAL_MCP_SSH_ENV=ADJUTANT_EDITOR");
    assert_has!(ssh, "the session secret, not shown");
    assert!(!ssh.contains("11.22.33.44"), "{ssh}");
    let into = run(&["into", "--print", "podman", "exec", "-it", "box"]);
    // The secret goes by environment, named (not valued) on the command line.
    assert_has!(into, "podman exec -e __DTMCP_NONCE -it box sh -c \"$SCRIPT\"");
    assert!(!into.contains("export __DTMCP_NONCE"), "{into}");
    assert_has!(into, "bash --rcfile");
    let err = Command::new(SERVER).args(["ssh", "box", "uptime"]).output().expect("runs");
    assert!(!err.status.success());
    assert_has!(String::from_utf8_lossy(&err.stderr), "cannot follow the host");
}
