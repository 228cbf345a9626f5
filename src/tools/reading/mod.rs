//! Reading a session's record: `read` (cooked lines, the screen, the raw
//! bytes), `search` and `regions`, for live sessions through their logger
//! and for closed ones from their files.

pub mod lines;
pub mod read;
pub mod regions;
pub mod search;
pub mod views;
