//! Why a tool call failed: a [`ToolError`], whose message the model reads
//! and which already says what to do next. A refusal (the session is not
//! in a state to take the call) is a [`Refusal`], data naming whom it is
//! about, rendered to text here and nowhere else.

use crate::session::{ClientError, SessionError};
use crate::tmux::TmuxError;
use dtmcp_core::search::SearchError;
use dtmcp_core::store::StoreError;

/// Why a tool body failed. Each variant renders the message the model
/// reads, which already says what to do next.
///
/// The wrapped errors are not offered as `source`s: their messages carry
/// their causes already, and a chain printed from them would say each
/// cause twice.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The call's arguments cannot be acted on; nothing was done.
    #[error("{0}")]
    BadInput(String),
    /// The session is not in a state to take this call now (held by another
    /// call, text at its prompt, in use, busy); nothing was typed.
    #[error("{0}")]
    Refused(String),
    /// Finding, making or changing a session failed.
    #[error("{0}")]
    Session(SessionError),
    /// The session's logger failed.
    #[error("{0}")]
    Logger(ClientError),
    /// tmux failed.
    #[error("{0}")]
    Tmux(TmuxError),
    /// A session's files could not be read.
    #[error("{0}")]
    Store(StoreError),
    /// Another failure, said in words: `/proc` that cannot be read, a file
    /// that cannot be written, a typed command whose outcome cannot be
    /// followed.
    #[error("{0}")]
    Failed(String),
}

impl ToolError {
    /// The same failure told in other words: `f` gets the message. Bad
    /// input and refusals stay what they were; anything else becomes
    /// [`ToolError::Failed`], its message now being the new one.
    pub fn reworded(self, f: impl FnOnce(String) -> String) -> ToolError {
        match self {
            ToolError::BadInput(m) => ToolError::BadInput(f(m)),
            ToolError::Refused(m) => ToolError::Refused(f(m)),
            other => ToolError::Failed(f(other.to_string())),
        }
    }
}

impl From<SessionError> for ToolError {
    fn from(e: SessionError) -> ToolError {
        ToolError::Session(e)
    }
}

impl From<ClientError> for ToolError {
    fn from(e: ClientError) -> ToolError {
        ToolError::Logger(e)
    }
}

impl From<TmuxError> for ToolError {
    fn from(e: TmuxError) -> ToolError {
        ToolError::Tmux(e)
    }
}

impl From<StoreError> for ToolError {
    fn from(e: StoreError) -> ToolError {
        ToolError::Store(e)
    }
}

impl From<SearchError> for ToolError {
    fn from(e: SearchError) -> ToolError {
        match e {
            SearchError::Pattern(_) => ToolError::BadInput(e.to_string()),
            SearchError::Store(e) => ToolError::Store(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_as_their_messages() {
        assert_eq!(ToolError::BadInput("give a command".into()).to_string(), "give a command");
        let missing = SessionError::NotFound { name: "t9".into(), known: vec![] };
        let text = missing.to_string();
        let e = ToolError::from(missing);
        assert_eq!(e.to_string(), text);
        assert!(std::error::Error::source(&e).is_none());
    }
}
