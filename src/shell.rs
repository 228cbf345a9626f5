//! The shell-integration scripts, compiled into the binary and written to a
//! versioned directory under the state home, so an installed binary needs
//! no checkout and two versions never overwrite each other's files.

use std::path::{Path, PathBuf};

/// The version of the scripts below; bump it with any change to them.
pub const INTEGRATION_VERSION: u32 = 1;

/// `(file name, contents)` of every script.
pub const FILES: &[(&str, &str)] =
    &[("bashrc", include_str!("../shell/bashrc")), ("integration.bash", include_str!("../shell/integration.bash"))];

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
        let tmp = dir.join(format!(".{name}.{}", std::process::id()));
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
    }
}
