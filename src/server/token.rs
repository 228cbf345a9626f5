//! The bearer token of the TCP listener: `$DOCENT_TERMINAL_MCP_HOME/token`,
//! 32 random bytes in hex, mode 0600, made on first use. A port is open to
//! every user who can reach it; the token file is not.

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use subtle::ConstantTimeEq;

/// A token, compared in constant time.
#[derive(Clone)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// Reads the token at `path`, making one first if there is none. A file
    /// whose mode let others read it holds a token others may know: it is
    /// replaced by a new one (0600), and the old token stops working.
    pub fn load_or_create(path: &Path) -> std::io::Result<Token> {
        match std::fs::read_to_string(path) {
            Ok(text) if !text.trim().is_empty() => {
                let mode = std::fs::metadata(path)?.permissions().mode();
                if mode & 0o077 == 0 {
                    return Ok(Token(text.trim().to_string()));
                }
                eprintln!(
                    "docent-terminal-mcp: {} was readable by others (mode {:o}); it now holds a new token",
                    path.display(),
                    mode & 0o777
                );
                std::fs::remove_file(path)?;
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        if let Some(dir) = path.parent() {
            dtmcp_core::store::private_dir_all(dir)?;
        }
        let mut bytes = [0u8; 32];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        // Written whole under a temporary name, then renamed: a reader never
        // sees half a token, and two first uses cannot both win.
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new().create(true).truncate(true).write(true).mode(0o600).open(&tmp)?;
        f.write_all(token.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        match std::fs::hard_link(&tmp, path) {
            Ok(()) => {
                let _ = std::fs::remove_file(&tmp);
                Ok(Token(token))
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let _ = std::fs::remove_file(&tmp);
                Ok(Token(std::fs::read_to_string(path)?.trim().to_string()))
            }
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        }
    }

    /// The token's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `offered` is the token, in time independent of where they differ.
    pub fn matches(&self, offered: &str) -> bool {
        self.0.as_bytes().ct_eq(offered.as_bytes()).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_once_private_and_then_reused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("token");
        let a = Token::load_or_create(&path).expect("create");
        assert_eq!(a.as_str().len(), 64);
        assert_eq!(std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777, 0o600);
        let b = Token::load_or_create(&path).expect("reuse");
        assert!(b.matches(a.as_str()));
        assert!(!b.matches("wrong"));
        assert!(!b.matches(""));
        assert_eq!(format!("{a:?}"), "Token(..)");
    }
}
