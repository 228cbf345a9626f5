//! The web view, as a person sees it: a real `serve --tcp`, real sessions
//! made through a real bridge, and headless Chromium driven over
//! WebDriver (chromedriver on a free loopback port, ended by pid). Also
//! the event streams read raw, for what a browser does not show: resuming
//! without loss or duplicates, and the cookie opening nothing else.
//!
//! The asks of a policy are answered from the page too: its one write,
//! which needs the cookie, the page's own Origin and its CSRF token.
//!
//! Set `DTMCP_WEB_SCREENSHOTS=DIR` to keep the desktop and phone
//! screenshots there (the README's come from `docs/`).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use serde_json::{Value, json};

use crate::support::{Person, Serve, Server, World, bridge, cli, free_port, installed, poll, request, unix_http};
use crate::{assert_has, needs};

/// How long anything on the page may take to appear.
const PATIENCE: Duration = Duration::from_secs(20);

/// A served world with a TCP port, and a bridge to it.
struct Served {
    world: World,
    serve: Serve,
    port: u16,
    agent: Server,
}

impl Served {
    async fn start() -> Served {
        Served::start_with(None).await
    }

    /// As [`Served::start`], under the policy `text` (`serve --policy`).
    async fn with_policy(text: &str) -> Served {
        Served::start_with(Some(text)).await
    }

    async fn start_with(policy: Option<&str>) -> Served {
        let world = World::new();
        let port = free_port();
        let mut args = vec!["--tcp".to_string(), port.to_string()];
        if let Some(text) = policy {
            let file = world.tmp.path().join("policy.toml");
            std::fs::write(&file, text).expect("write the policy");
            args.extend(["--policy".to_string(), file.display().to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let serve = Serve::start(&world, &args);
        let agent = bridge(&world, "alice").await;
        Served { world, serve, port, agent }
    }

    /// A fresh one-time login link, from `docent-terminal-mcp web`.
    fn link(&self) -> String {
        let url = cli(&self.world, &["web", "--no-open"]).ok().trim().to_string();
        assert!(url.starts_with(&format!("http://127.0.0.1:{}/login?code=", self.port)), "{url}");
        url
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A cookie header opened by a fresh link, got without a browser.
    async fn cookie(&self) -> String {
        let url = self.link();
        let path = url.trim_start_matches(&self.base()).to_string();
        let (status, headers, _) = http(self.port, "GET", &path, &[]).await;
        assert_eq!(status, 200);
        let set = headers.iter().find(|(k, _)| k == "set-cookie").map(|(_, v)| v.clone()).expect("a cookie");
        assert_has!(set, "HttpOnly");
        assert_has!(set, "SameSite=Strict");
        set.split(';').next().unwrap_or_default().to_string()
    }
}

/// One HTTP request to loopback `port`: status, headers, body.
async fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)]) -> (u16, Vec<(String, String)>, String) {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.expect("handshake");
    tokio::spawn(conn);
    let host = format!("127.0.0.1:{port}");
    let mut req = hyper::Request::builder().method(method).uri(path).header("host", host);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = sender.send_request(req.body(Empty::<Bytes>::new()).expect("request")).await.expect("send");
    let status = resp.status().as_u16();
    let hs = resp.headers().iter().map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string())).collect();
    let body = tokio::time::timeout(Duration::from_secs(10), resp.into_body().collect()).await;
    let body = body.ok().and_then(Result::ok).map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned());
    (status, hs, body.unwrap_or_default())
}

/// One server-sent event.
#[derive(Debug, Clone)]
struct Sse {
    kind: String,
    id: String,
    data: Value,
}

/// An open event stream, read event by event.
struct Stream {
    body: hyper::body::Incoming,
    buf: String,
}

impl Stream {
    async fn open(port: u16, path: &str, cookie: &str, last_id: Option<&str>) -> Stream {
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.expect("handshake");
        tokio::spawn(conn);
        let mut req = hyper::Request::get(path)
            .header("host", format!("127.0.0.1:{port}"))
            .header("cookie", cookie)
            .header("accept", "text/event-stream");
        if let Some(id) = last_id {
            req = req.header("last-event-id", id);
        }
        let resp = sender.send_request(req.body(Empty::<Bytes>::new()).expect("req")).await.expect("send");
        assert_eq!(resp.status().as_u16(), 200, "{path}");
        Stream { body: resp.into_body(), buf: String::new() }
    }

    /// The next event within `wait`, skipping comments.
    async fn next(&mut self, wait: Duration) -> Option<Sse> {
        let deadline = Instant::now() + wait;
        loop {
            while let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let (mut kind, mut id, mut data) = (String::new(), String::new(), String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event: ") {
                        kind = v.to_string();
                    } else if let Some(v) = line.strip_prefix("id: ") {
                        id = v.to_string();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data.push_str(v);
                    }
                }
                if !kind.is_empty() {
                    return Some(Sse { kind, id, data: serde_json::from_str(&data).expect("json data") });
                }
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            let frame = tokio::time::timeout(left, self.body.frame()).await.ok()??.ok()?;
            if let Ok(bytes) = frame.into_data() {
                self.buf.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
    }

    /// Every event until `until` says stop, within `wait`.
    async fn until(&mut self, wait: Duration, mut until: impl FnMut(&Sse) -> bool) -> Vec<Sse> {
        let deadline = Instant::now() + wait;
        let mut got = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let Some(e) = self.next(left).await else { break };
            let stop = until(&e);
            got.push(e);
            if stop {
                return got;
            }
        }
        panic!("the awaited event did not come within {wait:?}; got {got:#?}");
    }
}

/// The ids of the regions in `regions` events.
fn region_ids(events: &[Sse]) -> Vec<u64> {
    events
        .iter()
        .filter(|e| e.kind == "regions")
        .flat_map(|e| e.data["regions"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| r["id"].as_u64())
        .collect()
}

/// Headless Chromium under chromedriver, ended when dropped.
struct Browser {
    client: Option<Client>,
    driver: Child,
    profile: tempfile::TempDir,
}

impl Browser {
    /// `None` (and a note) when Chromium or chromedriver is missing.
    async fn start() -> Option<Browser> {
        let chromium = ["chromium", "chromium-browser"].into_iter().find(|p| installed(p))?;
        if !installed("chromedriver") {
            return None;
        }
        let binary = which(chromium);
        let port = free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver");
        let profile = tempfile::Builder::new().prefix("dtmcp-chromium-").tempdir().expect("profile dir");
        poll::until_async("chromedriver to listen", Duration::from_secs(15), async || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        })
        .await;
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            "--window-size=1280,900",
        ];
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        let mut caps = serde_json::Map::new();
        caps.insert("goog:chromeOptions".into(), json!({ "binary": binary, "args": args }));
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a WebDriver session");
        Some(Browser { client: Some(client), driver, profile })
    }

    fn c(&self) -> &Client {
        self.client.as_ref().expect("open")
    }

    async fn text(&self, css: &str) -> String {
        // The page redraws live: an element found may be replaced before its
        // text is read (a stale element), so it is found again until then.
        let started = Instant::now();
        loop {
            let el = self.c().wait().at_most(PATIENCE).for_element(Locator::Css(css)).await;
            let el = el.unwrap_or_else(|e| panic!("{css} never appeared: {e}"));
            match el.text().await {
                Ok(text) => return text,
                Err(e) if started.elapsed() < PATIENCE => {
                    eprintln!("{css} was redrawn while read ({e}); again");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("{css}: its text could not be read: {e}"),
            }
        }
    }

    /// Waits until the text of `css` contains `needle`.
    async fn until_text(&self, css: &str, needle: &str) -> String {
        poll::until_async(&format!("{needle:?} in {css}"), PATIENCE, async || {
            let text = match self.c().find(Locator::Css(css)).await {
                Ok(el) => el.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            };
            if text.contains(needle) { Ok(text) } else { Err(text) }
        })
        .await
    }

    async fn eval(&self, script: &str) -> Value {
        self.c().execute(script, vec![]).await.expect("script")
    }

    async fn shot(&self, name: &str) -> Vec<u8> {
        let png = self.c().screenshot().await.expect("screenshot");
        assert!(png.starts_with(b"\x89PNG") && png.len() > 5_000, "a real picture");
        if let Some(dir) = std::env::var_os("DTMCP_WEB_SCREENSHOTS") {
            std::fs::write(PathBuf::from(dir).join(name), &png).expect("keep screenshot");
        }
        png
    }

    async fn close(mut self) {
        if let Some(c) = self.client.take() {
            let _ = c.close().await;
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Chromium processes of this test (found by their own profile
        // directory), then the driver, by pid.
        let needle = format!("--user-data-dir={}", self.profile.path().display());
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for e in entries.flatten() {
                let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
                let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else { continue };
                if cmdline.split(|&b| b == 0).any(|a| a == needle.as_bytes()) {
                    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
                }
            }
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn which(program: &str) -> String {
    let out = Command::new("sh").args(["-c", &format!("command -v {program}")]).output().expect("sh");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

macro_rules! browser {
    () => {
        match Browser::start().await {
            Some(b) => b,
            None => {
                eprintln!("skipped: needs chromium and chromedriver (apt-get install chromium chromium-driver)");
                return;
            }
        }
    };
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_link_works_once_and_opens_nothing_but_the_view() {
    needs!("tmux");
    let s = Served::start().await;
    // Without a cookie: the login page, and 401 for every stream and read.
    let (status, _, body) = http(s.port, "GET", "/", &[]).await;
    assert_eq!(status, 401);
    assert_has!(body, "docent-terminal-mcp web");
    for path in ["/web/overview", "/web/s/x/events", "/web/s/x/lines", "/web/s/x/search?q=a"] {
        assert_eq!(http(s.port, "GET", path, &[]).await.0, 401, "{path}");
    }
    // The cookie opens the view's reads, and nothing that needs the token.
    let cookie = s.cookie().await;
    let with = [("cookie", cookie.as_str())];
    let (status, headers, _) = http(s.port, "GET", "/", &with).await;
    assert_eq!(status, 200);
    let csp = headers.iter().find(|(k, _)| k == "content-security-policy").map(|(_, v)| v.as_str());
    assert!(csp.is_some_and(|p| p.contains("default-src 'self'") && p.contains("frame-ancestors 'none'")), "{csp:?}");
    assert!(headers.iter().any(|(k, v)| k == "referrer-policy" && v == "no-referrer"), "{headers:?}");
    s.agent.ok("session_create", json!({ "name": "t1" })).await;
    for (method, path) in [
        ("GET", "/api/sessions"),
        ("POST", "/api/sessions/t1/close"),
        ("POST", "/api/sweep"),
        ("POST", "/mcp"),
        ("POST", "/web/s/t1/events"),
        ("POST", "/web/login-link"),
    ] {
        let status = http(s.port, method, path, &with).await.0;
        assert!(status == 401 || status == 405, "{method} {path} with the cookie answered {status}");
    }
    // A foreign Origin or Host is refused here as everywhere.
    let foreign = [("cookie", cookie.as_str()), ("origin", "http://evil.example")];
    assert_eq!(http(s.port, "GET", "/web/overview", &foreign).await.0, 403);
    // Login links come only over the Unix socket.
    let (status, _, body) = unix_http(&s.serve.socket, &request("POST", "/web/login-link", &[("host", "x")], ""));
    assert_eq!(status, 200, "{body}");

    let browser = browser!();
    let link = s.link();
    browser.c().goto(&link).await.expect("open the link");
    let heading = browser.text("h3").await.to_lowercase();
    assert_eq!(heading, "open sessions");
    let url = browser.c().current_url().await.expect("url");
    assert_eq!(url.path(), "/");
    assert!(url.query().is_none(), "the code left the address bar: {url}");
    browser.until_text("article[data-name='t1']", "t1").await;
    // The same link again, without the cookie: refused.
    browser.c().delete_all_cookies().await.expect("forget the cookie");
    browser.c().goto(&link).await.expect("open the link again");
    assert_has!(browser.text("h1").await, "Sign in");
    browser.c().goto(&format!("{}/", s.base())).await.expect("home");
    assert_has!(browser.text("h1").await, "Sign in");
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_watches_sessions_live_and_cannot_type_into_them() {
    needs!("tmux");
    let s = Served::start().await;
    s.agent.ok("session_create", json!({ "name": "w1" })).await;
    s.agent.ok("run", json!({ "session": "w1", "command": "printf '\\e[1;32mready\\e[0m %s\\n' steady" })).await;
    let browser = browser!();
    browser.c().goto(&s.link()).await.expect("log in");
    // The overview lists the session, its state and its screen's last rows.
    let card = browser.until_text("article[data-name='w1']", "ready steady").await;
    assert_has!(card, "idle at the shell prompt");
    assert_has!(card, "alice");
    // Its page: text a `run` prints appears on the live screen.
    browser.c().find(Locator::Css("article[data-name='w1'] h2 a")).await.expect("link").click().await.expect("click");
    browser.until_text("#screen", "ready steady").await;
    let green = browser.eval("return document.querySelector('#screen .f2.B') !== null").await;
    assert_eq!(green, json!(true), "colours are kept");
    assert_eq!(browser.eval("return document.querySelectorAll('#screen .cur').length").await, json!(1), "the cursor");
    s.agent.ok("run", json!({ "session": "w1", "command": "for i in 1 2 3; do echo line-$i-of-web; done" })).await;
    browser.until_text("#screen", "line-3-of-web").await;
    // A failed command stands out in the timeline with its status.
    s.agent.ok("run", json!({ "session": "w1", "command": "ls /no/such/dir/here" })).await;
    let failed = browser.until_text("table.timeline tr.fail", "exit 2").await;
    assert_has!(failed, "ls /no/such/dir/here");
    assert_has!(failed, "alice");
    // Its output, with the line numbers `read` uses.
    browser.c().find(Locator::Css("table.timeline tr.fail")).await.expect("row").click().await.expect("click");
    let output = browser.until_text(".output .lines", "No such file or directory").await;
    let number = browser
        .eval(
            "return [...document.querySelectorAll('.output .l')]\
             .find(l => l.textContent.includes('No such file')).querySelector('.n').textContent",
        )
        .await;
    let number: u64 =
        number.as_str().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("no line number in {output:?}"));
    let read = s.agent.ok("read", json!({ "session": "w1", "from_line": number, "to_line": number })).await;
    assert_has!(read, "No such file or directory");
    // Search finds a line and opens it.
    let input = browser.c().find(Locator::Css(".search input")).await.expect("search box");
    input.send_keys("line-2-of").await.expect("type");
    browser.c().find(Locator::Css(".search button")).await.expect("button").click().await.expect("click");
    let hits = browser.until_text(".found", "1 matching line").await;
    assert_has!(hits, "line-2-of-web");
    browser.c().find(Locator::Css(".hits li")).await.expect("hit").click().await.expect("open it");
    browser.until_text(".output .l.hit", "line-2-of-web").await;
    // The attach command is there to copy.
    assert_has!(browser.text(".attach-command").await, "attach -t");
    browser.shot("web-desktop.png").await;

    // Nothing on the page can type into the pane: typing into every field
    // and pressing every button leaves the pane as it was.
    let typed = "typed-by-the-browser";
    assert_eq!(
        browser.eval("return document.querySelectorAll('form, textarea, [contenteditable]').length").await,
        json!(0)
    );
    for input in browser.c().find_all(Locator::Css("input")).await.expect("inputs") {
        let _ = input.send_keys(&format!("{typed}\u{e007}")).await;
    }
    for button in browser.c().find_all(Locator::Css("button")).await.expect("buttons") {
        let _ = button.click().await;
    }
    let _ = browser.c().find(Locator::Css("#screen")).await.expect("screen").send_keys(typed).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pane = s.world.tmux(&["capture-pane", "-p", "-t", "=w1:"]);
    let pane = String::from_utf8_lossy(&pane.stdout).into_owned();
    assert_has!(pane, "line-3-of-web");
    assert!(!pane.contains(typed), "the pane got keys from the page:\n{pane}");
    let log = std::fs::read_to_string(s.world.session_dir("w1").join("raw.log")).expect("raw.log");
    assert!(!log.contains(typed), "the log holds keys from the page");

    // On a phone: one column, nothing wider than the screen but the
    // terminal itself, which scrolls in its own box.
    browser.c().set_window_size(390, 844).await.expect("phone size");
    browser.c().goto(&format!("{}/s/w1", s.base())).await.expect("session page");
    browser.until_text("#screen", "line-3-of-web").await;
    let wide = browser.eval("return document.documentElement.scrollWidth <= window.innerWidth + 1").await;
    assert_eq!(wide, json!(true), "the page fits a phone's width");
    let fits =
        browser.eval("return document.querySelector('h1').getBoundingClientRect().right <= window.innerWidth").await;
    assert_eq!(fits, json!(true));
    browser.c().goto(&format!("{}/", s.base())).await.expect("overview");
    browser.until_text("article[data-name='w1']", "line-3-of-web").await;
    browser.shot("web-phone.png").await;
    browser.c().set_window_size(1280, 900).await.expect("desktop size");

    // A closed session stays listed, with its last command.
    s.agent.ok("session_close", json!({ "session": "w1" })).await;
    let closed = browser.until_text("article.state-closed[data-name='w1']", "closed").await;
    assert_has!(closed, "ls /no/such/dir/here");
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_resume_without_loss_or_duplicates() {
    needs!("tmux");
    let s = Served::start().await;
    s.agent.ok("session_create", json!({ "name": "r1" })).await;
    s.agent.ok("run", json!({ "session": "r1", "command": "echo first" })).await;
    let cookie = s.cookie().await;
    let path = "/web/s/r1/events";
    let mut stream = Stream::open(s.port, path, &cookie, None).await;
    let got = stream.until(PATIENCE, |e| e.kind == "regions").await;
    assert_eq!(region_ids(&got), vec![1]);
    let screen = got.iter().find(|e| e.kind == "screen").expect("a first screen");
    assert_eq!(screen.data["full"], json!(true));
    // Live: a command's start and end, each once.
    s.agent.ok("run", json!({ "session": "r1", "command": "echo second" })).await;
    let ended = |e: &Sse, id: u64| {
        e.kind == "regions"
            && e.data["regions"]
                .as_array()
                .is_some_and(|l| l.iter().any(|r| r["id"] == json!(id) && r["exit"] == json!(0)))
    };
    let got = stream.until(PATIENCE, |e| ended(e, 2)).await;
    let mut last = got.last().expect("events").id.clone();
    // Drain what else comes for this command (the screen, the card).
    while let Some(e) = stream.next(Duration::from_millis(1500)).await {
        last = e.id.clone();
    }
    drop(stream);
    // Away: two commands run.
    s.agent.ok("run", json!({ "session": "r1", "command": "echo third" })).await;
    s.agent.ok("run", json!({ "session": "r1", "command": "echo fourth; false" })).await;
    // Back: exactly the regions missed, and the screen that changed.
    let mut stream = Stream::open(s.port, path, &cookie, Some(&last)).await;
    let got = stream.until(PATIENCE, |e| e.kind == "regions").await;
    let mut ids = region_ids(&got);
    ids.dedup();
    assert_eq!(ids, vec![3, 4], "the missed regions, in order: {got:#?}");
    assert!(got.iter().any(|e| e.kind == "screen"), "the screen changed meanwhile");
    let mut last = got.last().expect("events").id.clone();
    while let Some(e) = stream.next(Duration::from_millis(1500)).await {
        assert_ne!(e.kind, "regions", "no region twice: {e:?}");
        last = e.id.clone();
    }
    drop(stream);
    // Back again, nothing missed: nothing is sent again.
    let mut stream = Stream::open(s.port, path, &cookie, Some(&last)).await;
    assert!(stream.next(Duration::from_secs(2)).await.is_none(), "nothing twice");
    drop(stream);

    // The overview resumes too.
    let mut overview = Stream::open(s.port, "/web/overview", &cookie, None).await;
    let first = overview.next(PATIENCE).await.expect("the overview");
    assert_eq!(first.data["reset"], json!(true));
    assert!(first.data["cards"].as_array().is_some_and(|c| c.iter().any(|c| c["name"] == "r1")));
    drop(overview);
    let mut overview = Stream::open(s.port, "/web/overview", &cookie, Some(&first.id)).await;
    s.agent.ok("run", json!({ "session": "r1", "command": "echo fifth" })).await;
    let next = overview.until(PATIENCE, |e| e.data["cards"].to_string().contains("echo fifth")).await;
    assert!(next.iter().all(|e| e.data["reset"] == json!(false)), "{next:#?}");
    // A person attaching shows at once (tmux tells; the files do not).
    let person = Person::attach(&s.world, "r1");
    let people = |e: &Sse| {
        e.data["cards"].as_array().is_some_and(|c| {
            c.iter().any(|c| c["name"] == "r1" && c["people"].as_array().is_some_and(|p| p.len() == 1))
        })
    };
    overview.until(PATIENCE, people).await;
    drop(person);
    let nobody = |e: &Sse| {
        e.data["cards"].as_array().is_some_and(|c| c.iter().any(|c| c["name"] == "r1" && c["people"] == json!([])))
    };
    overview.until(PATIENCE, nobody).await;

    // A flood is sent at a bounded frame rate.
    let mut stream = Stream::open(s.port, path, &cookie, None).await;
    stream.until(PATIENCE, |e| e.kind == "regions").await;
    s.world.tmux(&["send-keys", "-t", "=r1:", "yes web-flood", "Enter"]);
    let started = Instant::now();
    let mut frames = 0;
    while started.elapsed() < Duration::from_secs(3) {
        match stream.next(Duration::from_millis(500)).await {
            Some(e) if e.kind == "screen" => frames += 1,
            _ => {}
        }
    }
    s.world.tmux(&["send-keys", "-t", "=r1:", "C-c"]);
    assert!(frames >= 3, "the flood was shown: {frames} frames");
    assert!(frames <= 36, "at most about 10 frames a second: {frames} in 3 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_says_what_each_session_is_doing() {
    needs!("tmux");
    needs!("python3");
    let s = Served::start().await;
    for name in ["busy", "secret", "repl"] {
        s.agent.ok("session_create", json!({ "name": name })).await;
    }
    let cookie = s.cookie().await;
    let mut overview = Stream::open(s.port, "/web/overview", &cookie, None).await;
    let keys = |session: &str, line: &str| {
        let target = format!("={session}:");
        s.world.tmux(&["send-keys", "-t", &target, "-l", line]);
        s.world.tmux(&["send-keys", "-t", &target, "Enter"]);
    };
    keys("busy", "sleep 60");
    keys("secret", "read -s -p 'Password: ' pw");
    keys("repl", "python3 -q");
    let mut cards: std::collections::HashMap<String, Value> = Default::default();
    let wanted = [("busy", "working"), ("secret", "password"), ("repl", "input")];
    overview
        .until(PATIENCE, |e| {
            for c in e.data["cards"].as_array().cloned().unwrap_or_default() {
                cards.insert(c["name"].as_str().unwrap_or_default().to_string(), c);
            }
            wanted.iter().all(|(n, state)| cards.get(*n).is_some_and(|c| c["state"] == json!(state)))
        })
        .await;
    assert_eq!(cards["repl"]["prompt"], json!(">>>"), "the prompt it waits at: {}", cards["repl"]);
    assert_has!(cards["secret"]["says"].as_str().unwrap_or_default(), "password prompt");
    assert_eq!(cards["busy"]["last"]["command"], json!("sleep 60"));
    assert_eq!(cards["busy"]["last"]["exit"], json!(null), "still running");
    s.world.tmux(&["send-keys", "-t", "=busy:", "C-c"]);
    let idle = |e: &Sse| {
        e.data["cards"].as_array().is_some_and(|c| c.iter().any(|c| c["name"] == "busy" && c["state"] == "idle"))
    };
    overview.until(PATIENCE, idle).await;
}

/// A session's card says what its processes listen on, a loopback TCP
/// port with a link to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_names_what_listens_and_links_a_loopback_port() {
    needs!("tmux");
    needs!("python3");
    let s = Served::start().await;
    s.agent.ok("session_create", json!({ "name": "srv" })).await;
    let port = free_port();
    let command = format!("python3 -m http.server {port} --bind 127.0.0.1");
    let r = s.agent.ok("run", json!({"session": "srv", "command": command, "port": port, "timeout": 20})).await;
    assert_has!(r, &format!("port {port} is listening"));
    let cookie = s.cookie().await;
    let mut overview = Stream::open(s.port, "/web/overview", &cookie, None).await;
    let at = format!("127.0.0.1:{port}");
    let mut card = Value::Null;
    overview
        .until(PATIENCE, |e| {
            let cards = e.data["cards"].as_array().cloned().unwrap_or_default();
            match cards.into_iter().find(|c| c["name"] == "srv" && c["listening"][0]["at"] == json!(at)) {
                Some(c) => {
                    card = c;
                    true
                }
                None => false,
            }
        })
        .await;
    assert_eq!(card["listening"][0]["link"], json!(format!("http://{at}/")), "{card}");
    assert_has!(card["listening"][0]["by"].as_str().unwrap_or_default(), "python3 -m http.server");
    s.agent.ok("send", json!({"session": "srv", "keys": ["ctrl+c"]})).await;
}

/// At a desktop's 1280 px the session page's two columns stay apart: the
/// screen of a wide pane (here 160 columns of text) fits its own column,
/// shown whole rather than scrolled or spilling under the commands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wide_screen_fits_its_column_at_1280_px() {
    needs!("tmux");
    let s = Served::start().await;
    s.agent.ok("session_create", json!({ "name": "wide", "cols": 160, "rows": 30 })).await;
    s.agent.ok("run", json!({ "session": "wide", "command": "printf '%0160d\\n' 0 | tr 0 '#'" })).await;
    let browser = browser!();
    browser.c().set_window_size(1280, 900).await.expect("desktop size");
    browser.c().goto(&s.link()).await.expect("log in");
    browser.c().goto(&format!("{}/s/wide", s.base())).await.expect("session page");
    browser.until_text("#screen", "##########").await;
    let measured = browser
        .eval(
            "const box = document.querySelector('.screenbox').getBoundingClientRect();\
             const side = document.querySelector('.side').getBoundingClientRect();\
             const screen = document.querySelector('#screen');\
             const rect = screen.getBoundingClientRect();\
             return { box_right: box.right, side_left: side.left, screen_right: rect.right,\
                      scroll: screen.scrollWidth, client: screen.clientWidth,\
                      page: document.documentElement.scrollWidth, window: window.innerWidth };",
        )
        .await;
    let n = |k: &str| measured[k].as_f64().unwrap_or_else(|| panic!("{k} in {measured}"));
    assert!(n("box_right") <= n("side_left"), "the screen's column runs under the commands: {measured}");
    assert!(n("screen_right") <= n("box_right") + 0.5, "the screen spills out of its column: {measured}");
    assert!(n("scroll") <= n("client") + 1.0, "the screen's rows do not fit it: {measured}");
    assert!(n("page") <= n("window") + 1.0, "the page is wider than the window: {measured}");
    browser.close().await;
}

/// A policy that asks a person before any `touch`.
const ASK_TOUCH: &str = r#"
[limits]
ask_timeout = "60s"

[[rule]]
action = "ask"
command = '^touch '
why = "touching files needs a person"
"#;

/// `POST path` to loopback `port` with `body`: status and body.
async fn post(port: u16, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.expect("handshake");
    tokio::spawn(conn);
    let mut req = hyper::Request::post(path).header("host", format!("127.0.0.1:{port}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let body = http_body_util::Full::new(Bytes::from(body.to_string()));
    let resp = sender.send_request(req.body(body).expect("request")).await.expect("send");
    let status = resp.status().as_u16();
    let body = tokio::time::timeout(Duration::from_secs(10), resp.into_body().collect()).await;
    let body = body.ok().and_then(Result::ok).map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned());
    (status, body.unwrap_or_default())
}

/// The CSRF token in the page a cookie opens.
async fn page_token(port: u16, cookie: &str) -> String {
    let (status, _, page) = http(port, "GET", "/", &[("cookie", cookie)]).await;
    assert_eq!(status, 200);
    let needle = r#"name="csrf-token" content=""#;
    let start = page.find(needle).expect("the token in the page") + needle.len();
    let token = page[start..].split('"').next().unwrap_or_default().to_string();
    assert_eq!(token.len(), 64, "{token}");
    token
}

/// Whether ask `id` of `world` is still open and unanswered.
fn still_asking(world: &World, id: u64) -> bool {
    let asks = world.home().join("asks");
    asks.join(format!("{id}.ask.json")).exists() && !asks.join(format!("{id}.answer.json")).exists()
}

/// The audit's records.
fn audit(world: &World) -> Vec<Value> {
    let text = std::fs::read_to_string(world.home().join("audit.jsonl")).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

impl Browser {
    /// Clicks the first element `css` matches, once it is there.
    async fn click(&self, css: &str) {
        let el = self.c().wait().at_most(PATIENCE).for_element(Locator::Css(css)).await;
        el.unwrap_or_else(|e| panic!("{css} never appeared: {e}")).click().await.expect("click");
    }

    /// Waits until nothing matches `css`.
    async fn until_gone(&self, css: &str) {
        poll::until_async(&format!("{css} to go"), PATIENCE, async || self.c().find(Locator::Css(css)).await.is_err())
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_answers_asks_with_the_pages_buttons() {
    needs!("tmux");
    let s = Served::with_policy(ASK_TOUCH).await;
    s.agent.ok("session_create", json!({ "name": "w1" })).await;
    let browser = browser!();
    browser.c().goto(&s.link()).await.expect("log in");
    browser.until_text("article[data-name='w1']", "w1").await;
    let file = |name: &str| s.world.tmp.path().join(name);
    let touch = |name: &str| json!({ "session": "w1", "command": format!("touch {}", file(name).display()) });

    // Allow once, on the overview: the agent's call waits, the page shows
    // the ask without a reload, one click lets it through.
    let (reply, said) = tokio::join!(s.agent.call("run", touch("allowed-by-web")), async {
        let shown = browser.until_text("article.ask[data-ask='1']", "allowed-by-web").await;
        for part in ["ask 1", "alice", "w1", "(to the shell)", "touching files needs a person", "Allow once"] {
            assert_has!(shown, part);
        }
        browser.shot("ask-overview.png").await;
        browser.click("article.ask[data-ask='1'] button.allow-once").await;
        browser.until_gone("article.ask[data-ask='1']").await;
        browser.until_text("#asks .answered[data-ask='1']", "allowed by").await
    });
    assert!(!reply.is_error, "the run was refused: {}", reply.text);
    assert!(file("allowed-by-web").exists(), "the line was typed");
    assert_has!(said, "ask 1: allowed by");
    assert_has!(said, "(web)");
    let records = audit(&s.world);
    let allowed =
        records.iter().find(|r| r["ask"] == json!(1)).unwrap_or_else(|| panic!("no audit of ask 1: {records:?}"));
    assert_eq!((&allowed["via"], &allowed["decision"]), (&json!("web"), &json!("allowed")), "{allowed}");
    // Who allowed a line shows in `regions`, and in the page's command table.
    let regions = s.agent.regions("w1").await;
    assert_has!(regions, "allowed by");
    browser.c().goto(&format!("{}/s/w1", s.base())).await.expect("session page");
    browser.until_text("td.agent", "allowed by").await;

    // Deny with a reason, on the session's page: the agent is told who
    // and why, and nothing is typed. The line shows as text, markup and all.
    browser.c().goto(&format!("{}/s/w1", s.base())).await.expect("session page");
    let markup =
        json!({ "session": "w1", "command": format!("touch {} '<img src=x>'", file("denied-by-web").display()) });
    let (reply, said) = tokio::join!(s.agent.call("run", markup), async {
        browser.until_text("article.ask[data-ask='2']", "denied-by-web '<img src=x>'").await;
        let images = browser.eval("return document.querySelectorAll('#asks img').length;").await;
        assert_eq!(images, json!(0), "the line's markup became an element");
        let why = browser.c().find(Locator::Css("article.ask[data-ask='2'] input.denywhy")).await.expect("reason box");
        why.send_keys("not on a Sunday").await.expect("type a reason");
        browser.click("article.ask[data-ask='2'] button.deny").await;
        browser.until_text("#asks .answered[data-ask='2']", "denied by").await
    });
    assert!(reply.is_error, "a denied line ran: {}", reply.text);
    assert_has!(reply.text, "denied by");
    assert_has!(reply.text, "not on a Sunday");
    assert_has!(said, "ask 2: denied by");
    assert!(!file("denied-by-web").exists(), "a denied line was typed");

    // Allow this agent: its next `touch` is not asked about.
    let (reply, ()) = tokio::join!(s.agent.call("run", touch("agent-1")), async {
        browser.click("article.ask[data-ask='3'] button.allow-agent").await;
        browser.until_text("#asks .answered[data-ask='3']", "allowed by").await;
    });
    assert!(!reply.is_error, "{}", reply.text);
    let next = tokio::time::timeout(PATIENCE, s.agent.call("run", touch("agent-2"))).await;
    let next = next.expect("the agent's next touch was asked about again");
    assert!(!next.is_error && file("agent-2").exists(), "{}", next.text);
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_needs_the_cookie_the_pages_token_and_its_origin() {
    needs!("tmux");
    let s = Served::with_policy(ASK_TOUCH).await;
    s.agent.ok("session_create", json!({ "name": "w2" })).await;
    let cookie = s.cookie().await;
    let token = page_token(s.port, &cookie).await;
    let other_token = page_token(s.port, &s.cookie().await).await;
    assert_ne!(token, other_token, "each login has its own token");
    let target = s.world.tmp.path().join("never-typed");
    let run = json!({ "session": "w2", "command": format!("touch {}", target.display()) });
    let (reply, ()) = tokio::join!(s.agent.call("run", run), async {
        poll::until_async("the ask to open", PATIENCE, async || still_asking(&s.world, 1)).await;
        let own = s.base();
        let body = |csrf: Option<&str>| json!({ "decision": "allow", "scope": "once", "csrf": csrf }).to_string();
        let good = body(Some(&token));
        let json_type = ("content-type", "application/json");
        let refused = async |what: &str, headers: &[(&str, &str)], body: &str, status: u16, says: &str| {
            let (got, answer) = post(s.port, "/web/asks/1", headers, body).await;
            assert_eq!(got, status, "{what}: {answer}");
            assert_has!(answer, says);
            assert!(still_asking(&s.world, 1), "{what} answered the ask");
        };
        let (with_cookie, with_origin) = (("cookie", cookie.as_str()), ("origin", own.as_str()));
        refused("no cookie", &[with_origin, json_type], &good, 401, "not signed in").await;
        refused("no token", &[with_cookie, with_origin, json_type], &body(None), 403, "no CSRF token").await;
        let wrong = body(Some(&"0".repeat(64)));
        refused("a wrong token", &[with_cookie, with_origin, json_type], &wrong, 403, "CSRF token is wrong").await;
        let others = body(Some(&other_token));
        refused("another login's token", &[with_cookie, with_origin, json_type], &others, 403, "CSRF token is wrong")
            .await;
        let foreign = ("origin", "http://evil.example");
        refused("a foreign origin", &[with_cookie, foreign, json_type], &good, 403, "not allowed").await;
        refused("no origin", &[with_cookie, json_type], &good, 403, "Origin").await;
        let form = ("content-type", "application/x-www-form-urlencoded");
        let form_body = format!("decision=allow&csrf={token}");
        refused("a form", &[with_cookie, with_origin, form], &form_body, 415, "application/json").await;
        let all = [("cookie", cookie.as_str()), ("origin", own.as_str()), json_type];
        let (got, answer) = post(s.port, "/web/asks/99", &all, &good).await;
        assert_eq!(got, 404, "{answer}");
        let deny = json!({ "decision": "deny", "why": "checked by hand", "csrf": token }).to_string();
        let (got, answer) = post(s.port, "/web/asks/1", &all, &deny).await;
        assert_eq!(got, 200, "{answer}");
        let answer: Value = serde_json::from_str(&answer).expect("json");
        assert_eq!(answer["answered"], json!(true));
        assert_has!(answer["by_whom"].as_str().unwrap_or_default(), "denied by");
        let (got, late) = post(s.port, "/web/asks/1", &all, &good).await;
        assert_eq!(got, 409, "{late}");
        assert_has!(late, "denied by");
    });
    assert!(reply.is_error, "{}", reply.text);
    assert_has!(reply.text, "denied by");
    assert_has!(reply.text, "checked by hand");
    assert!(!target.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_replays_in_the_page_with_its_markers() {
    needs!("tmux");
    let s = Served::start().await;
    s.agent.ok("session_create", json!({ "name": "v1" })).await;
    s.agent.ok("run", json!({ "session": "v1", "command": "echo first" })).await;
    s.agent.ok("run", json!({ "session": "v1", "command": "sleep 0.3; printf 'replayed-%s\\n' text" })).await;
    s.agent.ok("run", json!({ "session": "v1", "command": "false" })).await;
    // The frames come behind the login; the recording itself only for a
    // session whose secrets the view shows.
    let cookie = s.cookie().await;
    let (status, _, body) = http(s.port, "GET", "/web/s/v1/replay?region=2", &[("Cookie", &cookie)]).await;
    assert_eq!(status, 200, "{body}");
    let frames: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(frames["markers"].as_array().map(Vec::len), Some(2), "{body}");
    assert_eq!(http(s.port, "GET", "/web/s/v1/replay?region=2", &[]).await.0, 401);
    let (status, _, body) = http(s.port, "GET", "/web/s/v1/cast", &[("Cookie", &cookie)]).await;
    assert_eq!(status, 403, "{body}");
    let browser = browser!();
    browser.c().goto(&s.link()).await.expect("log in");
    browser.c().goto(&format!("{}/s/v1", s.base())).await.expect("session page");
    browser.until_text("table.timeline tr[data-region='2']", "replayed").await;
    let play = "table.timeline tr[data-region='2'] button.replay";
    browser.c().find(Locator::Css(play)).await.expect("replay button").click().await.expect("click");
    browser.until_text("#replay .replayscreen", "replayed-text").await;
    assert_eq!(browser.eval("return document.querySelectorAll('#replay .mark').length").await, json!(2));
    let marks = browser.text("#replay .marklist").await;
    assert_has!(marks, "sleep 0.3; printf");
    assert_has!(marks, "exit 0");
    poll::until_async("the replay to end", PATIENCE, async || {
        browser.eval("return document.querySelector('#replay').dataset.state").await == json!("ended")
    })
    .await;
    // The whole session: a mark at each command's start and end.
    browser
        .c()
        .find(Locator::Css("button.replay:not(td button)"))
        .await
        .expect("session")
        .click()
        .await
        .expect("click");
    browser.until_text("#replay .marklist", "exit 1").await;
    assert_eq!(browser.eval("return document.querySelectorAll('#replay .mark').length").await, json!(6));
    browser.shot("web-replay.png").await;
    browser.close().await;
}
