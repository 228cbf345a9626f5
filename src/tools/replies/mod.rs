//! The replies: the value a tool body returns ([`reply::Reply`]), the
//! report of a command that was waited for, shaping and clipping its
//! output, the docent's notes and the facts they read, the redaction at
//! the edge, and messages sent unasked when a watched command ends.

pub mod docent;
pub mod output;
pub mod reply;
pub mod report;
pub mod secrets;
pub mod shape;
pub mod watch;
