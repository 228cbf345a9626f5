//! Sessions themselves: `session_create`, `session_list`, `session_close`,
//! `session_split`, `session_resize`, `session_logs`, `shell_integrate`
//! and `guide`, and who else is in a session (people attached, commands
//! others started) before one is closed.

pub mod currents;
pub mod guide;
pub mod integrate;
pub mod lifecycle;
mod listing;
pub mod logs;
pub mod presence;
pub mod statuses;
