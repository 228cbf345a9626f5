//! People at terminals. A `Pty` is a program on a pseudo-terminal of its
//! own, made its controlling terminal as a terminal emulator would: keys
//! are written to the master side, and what the program draws is read (and
//! kept, if asked) so the terminal never fills. A `Person` is a real tmux
//! client attached to a session from such a terminal.

use std::fs::File;
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::poll;
use super::world::World;

/// A program on a pseudo-terminal of its own; killed when dropped.
pub struct Pty {
    child: Child,
    master: File,
    /// The slave side, kept open to read the terminal's mode.
    slave: File,
    /// What the program drew, when it is kept.
    seen: Arc<Mutex<Vec<u8>>>,
}

impl Pty {
    /// Starts `program args` on a 120x30 terminal with `env` added, keeping
    /// what it draws.
    pub fn start(program: &str, args: &[&str], env: &[(String, String)]) -> Pty {
        Pty::spawn(program, args, env, (120, 30), true)
    }

    /// Starts `program args` on a `cols`x`rows` terminal with `env` added;
    /// what it draws is read and kept only if `keep` says so (a tmux client
    /// under a flood draws far more than a test should hold).
    fn spawn(program: &str, args: &[&str], env: &[(String, String)], (cols, rows): (u16, u16), keep: bool) -> Pty {
        let size = nix::pty::Winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
        let pty = nix::pty::openpty(Some(&size), None).expect("openpty");
        let slave = File::from(pty.slave);
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env_remove("TMUX")
            .env_remove("NO_COLOR")
            .env("TERM", "xterm-256color")
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::from(slave.try_clone().expect("slave")))
            .stdout(Stdio::from(slave.try_clone().expect("slave")))
            .stderr(Stdio::from(slave.try_clone().expect("slave")));
        // SAFETY: between fork and exec the child only calls setsid and
        // ioctl, both async-signal-safe.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                nix::unistd::setsid().map_err(std::io::Error::from)?;
                // Make the pty the controlling terminal, as a terminal
                // emulator would.
                if nix::libc::ioctl(0, nix::libc::TIOCSCTTY, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap_or_else(|e| panic!("starting {program} on a pty: {e}"));
        let master = File::from(pty.master);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (mut reader, sink) = (master.try_clone().expect("master"), seen.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if keep {
                    sink.lock().expect("sink").extend_from_slice(&buf[..n]);
                }
            }
        });
        Pty { child, master, slave, seen }
    }

    /// Everything drawn so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock().expect("seen")).into_owned()
    }

    /// Waits until what was drawn (from byte `from` on) holds `needle`.
    pub fn wait_for(&self, needle: &str, from: usize, limit: Duration) {
        poll::until(&format!("{needle:?} on the terminal"), limit, || {
            self.seen.lock().expect("seen").get(from..).is_some_and(|b| String::from_utf8_lossy(b).contains(needle))
        });
    }

    /// How many bytes were drawn so far.
    pub fn len(&self) -> usize {
        self.seen.lock().expect("seen").len()
    }

    /// The terminal's slave side, to read its mode.
    pub fn slave(&self) -> &File {
        &self.slave
    }

    /// Presses keys: writes `keys` to the terminal at once.
    pub fn types(&mut self, keys: &str) {
        self.master.write_all(keys.as_bytes()).expect("type into the pty");
    }

    /// Waits for the program to exit; its status code.
    pub fn exit_code(&mut self, limit: Duration) -> i32 {
        let status = poll::until("the program on the pty to exit", limit, || self.child.try_wait().expect("wait"));
        status.code().unwrap_or(-1)
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A person at a terminal: a tmux client attached to a session of a world
/// from a pty of its own, whose keys go to the pty; leaves when dropped.
pub struct Person {
    pty: Pty,
    session: String,
}

impl Person {
    /// Attaches to session `session` of `world` from a 100x30 terminal.
    pub fn attach(world: &World, session: &str) -> Person {
        Person::attach_sized(world, session, 100, 30)
    }

    /// Attaches to session `session` of `world` from a `cols`x`rows`
    /// terminal, and waits until tmux lists the client.
    pub fn attach_sized(world: &World, session: &str, cols: u16, rows: u16) -> Person {
        Person::attach_with(world, session, (cols, rows), false)
    }

    /// Attaches as [`Person::attach`] does, keeping what the client draws
    /// (see [`Person::pty`]).
    pub fn attach_seeing(world: &World, session: &str) -> Person {
        Person::attach_with(world, session, (100, 30), true)
    }

    fn attach_with(world: &World, session: &str, (cols, rows): (u16, u16), keep: bool) -> Person {
        let target = format!("={session}");
        let args = ["-L", &world.socket, "attach", "-t", &target];
        // With the world's environment, so that a client left behind is
        // found by the world's teardown.
        let pty = Pty::spawn("tmux", &args, &world.env(), (cols, rows), keep);
        let person = Person { pty, session: session.to_string() };
        poll::until("the person's client to attach", Duration::from_secs(10), || !clients(world, session).is_empty());
        person
    }

    /// Presses keys: writes `keys` to the terminal at once.
    pub fn types(&mut self, keys: &str) {
        self.pty.types(keys);
    }

    /// The terminal the client draws on.
    pub fn pty(&self) -> &Pty {
        &self.pty
    }

    /// Detaches by ending the client, and waits until tmux lists it no more.
    pub fn leave(self, world: &World) {
        let Person { pty, session } = self;
        drop(pty);
        poll::until("the person's client to go", Duration::from_secs(5), || clients(world, &session).is_empty());
    }
}

/// The ttys of the tmux clients attached to session `session` of `world`.
fn clients(world: &World, session: &str) -> String {
    let out = world.tmux(&["list-clients", "-t", &format!("={session}"), "-F", "#{client_tty}"]);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
