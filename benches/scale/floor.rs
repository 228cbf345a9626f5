//! The floor: integrated bash panes on a raw tmux server, each piping
//! into a FIFO read here, timed as the server is.

use super::*;

pub(crate) async fn raw_panes(tmp: &Path, n: usize, samples: usize) -> anyhow::Result<Vec<Duration>> {
    raw_panes_among(tmp, n, 0, samples).await
}

/// As [`raw_panes`], with `idle` more panes on the server that only sit at
/// their prompt (the floor of one call on a server of many panes).
pub(crate) async fn raw_panes_among(
    tmp: &Path,
    n: usize,
    idle: usize,
    samples: usize,
) -> anyhow::Result<Vec<Duration>> {
    let raw = RawServer::start(tmp, n, idle).await?;
    let result = raw.round(10, samples).await;
    raw.stop();
    result
}

/// A raw tmux server of `n` integrated bash panes piping into FIFOs read
/// here, and `idle` more sitting at their prompt: the floor, kept for
/// several rounds.
pub(crate) struct RawServer {
    socket: String,
    tmux: Arc<Tmux>,
    /// Each measured pane's target and the FIFO its output comes through.
    panes: std::sync::Mutex<Vec<(String, std::fs::File)>>,
}

impl RawServer {
    pub(crate) async fn start(tmp: &Path, n: usize, idle: usize) -> anyhow::Result<RawServer> {
        static SERVERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let k = SERVERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let socket = format!("dtmcp-bench-scale-floor-{}-{k}", std::process::id());
        let raw = RawServer { tmux: Arc::new(Tmux::new(&socket)), socket, panes: Default::default() };
        match raw.make(&tmp.join(format!("raw{k}")), n, idle).await {
            Ok(()) => Ok(raw),
            Err(e) => {
                raw.stop();
                Err(e)
            }
        }
    }

    pub(crate) async fn make(&self, dir: &Path, n: usize, idle: usize) -> anyhow::Result<()> {
        let shell = dtmcp::shell::install(&dir.join("shell"))?;
        let home = dir.join("home");
        std::fs::create_dir_all(&home)?;
        let mut fifos = Vec::new();
        for i in 0..n + idle {
            let name = format!("f{i}");
            let started = std::process::Command::new("tmux")
                .args(["-L", &self.socket, "new-session", "-d", "-s", &name, "-x", "120", "-y", "40"])
                .args(["-e", "__DTMCP_NONCE=11.22.33.44", "--"])
                .args(dtmcp::shell::bash_argv(&shell))
                .env("HOME", &home)
                .status()?;
            ensure!(started.success(), "tmux new-session failed");
            if i >= n {
                continue;
            }
            let fifo = dir.join(format!("pipe-{i}"));
            nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))?;
            let target = format!("={name}:");
            self.tmux.run(&["pipe-pane", "-O", "-t", &target, &format!("cat > {}", fifo.display())]).await?;
            fifos.push((target, fifo));
        }
        quiet(&format!("{} raw panes started", n + idle)).await;
        let mut panes = Vec::new();
        for (target, fifo) in fifos {
            // Opened in a thread: a FIFO's open waits for its writer.
            let file = tokio::task::spawn_blocking(move || std::fs::File::open(&fifo)).await??;
            panes.push((target, file));
        }
        *self.panes.lock().map_err(|_| anyhow::anyhow!("poisoned"))? = panes;
        Ok(())
    }

    /// Every pane runs `true` `samples` times at once (after `warm`
    /// untimed ones); the time of each.
    pub(crate) async fn round(&self, warm: usize, samples: usize) -> anyhow::Result<Vec<Duration>> {
        let panes = std::mem::take(&mut *self.panes.lock().map_err(|_| anyhow::anyhow!("poisoned"))?);
        let start = Arc::new(std::sync::Barrier::new(panes.len()));
        let mut tasks = Vec::new();
        for (target, mut pipe) in panes {
            let (tmux, start) = (Arc::clone(&self.tmux), Arc::clone(&start));
            let rt = tokio::runtime::Handle::current();
            tasks.push(tokio::task::spawn_blocking(move || {
                start.wait();
                let mut out = Vec::with_capacity(samples);
                let mut timed = || -> anyhow::Result<()> {
                    for i in 0..samples + warm {
                        let t = Instant::now();
                        rt.block_on(tmux.run(&["send-keys", "-H", "-t", &target, "74", "72", "75", "65", "0d"]))?;
                        wait_marker(&mut pipe)?;
                        if i >= warm {
                            out.push(t.elapsed());
                        }
                    }
                    Ok(())
                };
                let result = timed();
                (target, pipe, result.map(|()| out))
            }));
        }
        let mut all = Vec::new();
        let mut back = Vec::new();
        let mut failed = None;
        for t in tasks {
            let (target, pipe, result) = t.await?;
            back.push((target, pipe));
            match result {
                Ok(out) => all.extend(out),
                Err(e) => failed = Some(e),
            }
        }
        *self.panes.lock().map_err(|_| anyhow::anyhow!("poisoned"))? = back;
        match failed {
            Some(e) => Err(e),
            None => Ok(all),
        }
    }

    /// The tmux socket's name.
    pub(crate) fn socket(&self) -> &str {
        &self.socket
    }

    pub(crate) fn stop(&self) {
        dtmcp::tmux::kill_server_now(&self.socket);
    }
}

/// Reads until a "finished" marker (`ESC ] 133 ; D`) has gone by.
pub(crate) fn wait_marker(pipe: &mut std::fs::File) -> anyhow::Result<()> {
    let needle = b"\x1b]133;D";
    let mut window: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let n = pipe.read(&mut buf)?;
        ensure!(n > 0, "the pane's pipe closed");
        window.extend_from_slice(&buf[..n]);
        if window.windows(needle.len()).any(|w| w == needle) {
            return Ok(());
        }
    }
    bail!("no marker within 20 s")
}
