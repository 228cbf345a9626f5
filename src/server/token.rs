//! The bearer token of the TCP listener: `$DOCENT_TERMINAL_MCP_HOME/token`,
//! 32 random bytes in hex, mode 0600, made on first use. A port is open to
//! every user who can reach it; the token file is not.
//!
//! A token may also name its agent (`docent-terminal-mcp token --agent
//! NAME`): `dtmcp-agent.NAME.MAC`, where MAC is the HMAC-SHA256 of the name
//! under the server's token. It opens what the token opens, and whoever
//! calls with it is agent NAME, whatever else the request says: this is how
//! a client over TCP with no session of its own (2026-07-28) is named.
//! Nothing is stored: a new server token ends every agent token.

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use hmac::{KeyInit, Mac};
use subtle::ConstantTimeEq;

/// What an agent token starts with.
const AGENT_PREFIX: &str = "dtmcp-agent.";
/// The longest agent name a token carries.
const MAX_AGENT: usize = 64;

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

    /// A token that opens what this one opens and names agent `name`;
    /// `Err` says why the name cannot be one (letters, digits, `_`, `-`
    /// and `#`, at most 64).
    pub fn for_agent(&self, name: &str) -> Result<String, String> {
        let fit = !name.is_empty()
            && name.len() <= MAX_AGENT
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'#'));
        if !fit {
            return Err(format!(
                "agent name {name:?} is not one a token can carry: use letters, digits, '_', '-' or '#' (at most {MAX_AGENT})"
            ));
        }
        Ok(format!("{AGENT_PREFIX}{name}.{}", self.mac(name)))
    }

    /// The agent `offered` names, when it is an agent token of this token.
    pub fn agent_of(&self, offered: &str) -> Option<String> {
        let (name, mac) = offered.strip_prefix(AGENT_PREFIX)?.rsplit_once('.')?;
        let good: bool = self.mac(name).as_bytes().ct_eq(mac.as_bytes()).into();
        (good && self.for_agent(name).is_ok()).then(|| name.to_string())
    }

    /// The HMAC of `name` under this token, in hex.
    fn mac(&self, name: &str) -> String {
        // An HMAC takes a key of any length: new_from_slice cannot fail.
        let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(self.0.as_bytes()) else { return String::new() };
        mac.update(b"docent-terminal-mcp agent token\0");
        mac.update(name.as_bytes());
        mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
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

    #[test]
    fn an_agent_token_names_its_agent_and_nothing_forges_one() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let token = Token::load_or_create(&tmp.path().join("token")).expect("token");
        let alice = token.for_agent("alice").expect("a name");
        assert!(alice.starts_with("dtmcp-agent.alice."), "{alice}");
        assert_eq!(token.agent_of(&alice).as_deref(), Some("alice"));
        assert!(!token.matches(&alice), "an agent token is not the server's token");
        // Another name on the same MAC, a changed MAC, another server's token.
        assert_eq!(token.agent_of(&alice.replace("alice", "bob")), None);
        // (The MAC's last digit changed: to 1 where it was 0, else to 0.)
        let changed = if alice.ends_with('0') { '1' } else { '0' };
        assert_eq!(token.agent_of(&format!("{}{changed}", &alice[..alice.len() - 1])), None);
        let other = Token::load_or_create(&tmp.path().join("other")).expect("token");
        assert_eq!(other.agent_of(&alice), None);
        assert_eq!(token.agent_of(token.as_str()), None);
        assert!(token.for_agent("a b").is_err() && token.for_agent("").is_err() && token.for_agent("x.y").is_err());
    }
}
