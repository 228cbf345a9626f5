//! The replies: the value a tool body returns ([`reply::Reply`]), the
//! report of a command that was waited for, shaping and clipping its
//! output, the docent's notes and the facts they read, the redaction at
//! the edge, messages sent unasked when a watched command ends, and what
//! listens in a session, and how far each agent was shown a running
//! command's output.

pub mod docent;
pub mod output;
pub mod ports;
pub mod reply;
pub mod report;
pub mod secrets;
pub mod shape;
pub mod shown;
pub mod watch;
