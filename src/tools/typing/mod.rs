//! Typing into a pane: `run` and `wait`, `send`, `expect`, and what only
//! they need — where a line goes (a shell's prompt or a program's input),
//! who holds a session while typing, progress while waiting, and the
//! replay of a `run` whose idempotency key comes again.

pub mod args;
pub mod consent;
pub mod expect;
pub mod holds;
pub mod listen;
pub mod progress;
pub mod replay;
pub mod run;
pub mod send;
pub mod stray;
pub mod target;
