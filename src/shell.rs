//! The shell-integration scripts, compiled into the binary and written to a
//! versioned directory under the state home, so an installed binary needs
//! no checkout and two versions never overwrite each other's files.

use std::path::{Path, PathBuf};

/// The version of the scripts below; bump it with any change to them.
pub const INTEGRATION_VERSION: u32 = 4;

/// `(path, contents)` of every script, the path relative to [`dir`] (`/`
/// separates a subdirectory). The one list of the integration's files:
/// whatever installs or carries the integration elsewhere takes it from here.
pub const FILES: &[(&str, &str)] = &[
    ("bashrc", include_str!("../shell/bashrc")),
    ("integration.bash", include_str!("../shell/integration.bash")),
    ("integration.zsh", include_str!("../shell/integration.zsh")),
    ("zsh/.zshenv", include_str!("../shell/zsh/.zshenv")),
    ("zsh/.zprofile", include_str!("../shell/zsh/.zprofile")),
    ("zsh/.zshrc", include_str!("../shell/zsh/.zshrc")),
    ("zsh/.zlogin", include_str!("../shell/zsh/.zlogin")),
    ("zsh/.zlogout", include_str!("../shell/zsh/.zlogout")),
];

/// The shells the integration knows, by the name their program goes by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shell {
    /// bash 4.4 or later.
    Bash,
    /// zsh 5.3 or later.
    Zsh,
}

impl Shell {
    /// The shell a program name (`bash`, `-zsh`, `/bin/zsh`) stands for, if
    /// the integration knows it.
    pub fn from_program(name: &str) -> Option<Shell> {
        let base = name.rsplit('/').next().unwrap_or(name).trim_start_matches('-');
        match base {
            "bash" => Some(Shell::Bash),
            "zsh" => Some(Shell::Zsh),
            _ => None,
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Shell::Bash => "bash",
            Shell::Zsh => "zsh",
        }
    }

    /// The integration script it loads, relative to [`dir`].
    pub fn script(self) -> &'static str {
        match self {
            Shell::Bash => "integration.bash",
            Shell::Zsh => "integration.zsh",
        }
    }
}

/// The directory holding this version's scripts under `home`.
pub fn dir(home: &Path) -> PathBuf {
    home.join("shell").join(format!("v{INTEGRATION_VERSION}"))
}

/// Writes the scripts to [`dir`] unless they are there already, and returns
/// the directory. Each file is written to a temporary name and renamed, so
/// a shell starting meanwhile never reads half a script.
pub fn install(home: &Path) -> std::io::Result<PathBuf> {
    let dir = dir(home);
    // Readable by others (a shell of another user may read the scripts),
    // writable by no one else, whatever the umask.
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    std::fs::DirBuilder::new().recursive(true).mode(0o755).create(&dir)?;
    for (name, body) in FILES {
        let path = dir.join(name);
        if std::fs::read(&path).is_ok_and(|old| old == body.as_bytes()) {
            continue;
        }
        let parent = path.parent().unwrap_or(&dir);
        std::fs::DirBuilder::new().recursive(true).mode(0o755).create(parent)?;
        let base = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = parent.join(format!(".{base}.{}.tmp", std::process::id()));
        std::io::Write::write_all(
            &mut std::fs::OpenOptions::new().create(true).truncate(true).write(true).mode(0o644).open(&tmp)?,
            body.as_bytes(),
        )?;
        std::fs::rename(&tmp, &path)?;
    }
    Ok(dir)
}

/// The argv that starts an integrated bash from the scripts in `dir`.
pub fn bash_argv(dir: &Path) -> Vec<String> {
    vec!["bash".into(), "--rcfile".into(), dir.join("bashrc").to_string_lossy().into_owned(), "-i".into()]
}

/// The program and environment that start an integrated zsh from the
/// scripts in `dir`: a login zsh (as a tmux pane runs one) whose ZDOTDIR is
/// ours; the user's own ZDOTDIR, when `user_zdotdir` names one, goes along
/// in `__DTMCP_ZDOTDIR` for our files to read theirs from.
pub fn zsh_start(dir: &Path, user_zdotdir: Option<&str>) -> (Vec<String>, Vec<(String, String)>) {
    let mut env = vec![("ZDOTDIR".to_string(), dir.join("zsh").to_string_lossy().into_owned())];
    if let Some(theirs) = user_zdotdir.filter(|z| Path::new(z) != dir.join("zsh")) {
        env.push(("__DTMCP_ZDOTDIR".into(), theirs.to_string()));
    }
    (vec!["zsh".into(), "-l".into()], env)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_writes_every_script_once() {
        let home = tempfile::tempdir().expect("tempdir");
        let d = install(home.path()).expect("install");
        for (name, body) in FILES {
            assert_eq!(std::fs::read_to_string(d.join(name)).expect("read"), *body);
        }
        install(home.path()).expect("second install is a no-op");
        assert!(d.join("zsh/.zshrc").is_file(), "subdirectories are made");
    }

    #[test]
    fn shells_are_known_by_their_program_names() {
        assert_eq!(Shell::from_program("-zsh"), Some(Shell::Zsh));
        assert_eq!(Shell::from_program("/usr/bin/bash"), Some(Shell::Bash));
        assert_eq!(Shell::from_program("fish"), None);
        assert_eq!(Shell::from_program("sh"), None);
    }

    #[test]
    fn zsh_gets_our_zdotdir_and_keeps_the_users() {
        let d = Path::new("/s/v2");
        let (argv, env) = zsh_start(d, Some("/home/u/.config/zsh"));
        assert_eq!(argv, ["zsh", "-l"]);
        assert!(env.contains(&("ZDOTDIR".into(), "/s/v2/zsh".into())));
        assert!(env.contains(&("__DTMCP_ZDOTDIR".into(), "/home/u/.config/zsh".into())));
        let (_, env) = zsh_start(d, None);
        assert_eq!(env.len(), 1);
    }

    #[test]
    fn every_file_is_listed_once_and_exists_in_the_checkout() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("shell");
        let mut seen = std::collections::HashSet::new();
        for (name, body) in FILES {
            assert!(seen.insert(*name), "{name} listed twice");
            assert_eq!(std::fs::read_to_string(root.join(name)).expect("in shell/"), *body);
        }
    }
}
