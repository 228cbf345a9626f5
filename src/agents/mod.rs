//! The agents: who makes a call (the name an agent goes by at each door,
//! the idempotency key its call carries) and the journal of what each
//! agent typed where.
//!
//! This room sits below the tools, the server, the web view, the people's
//! command line, the bridge and the call log, which all need to name
//! agents; it names none of them.

pub mod caller;
pub mod journal;
