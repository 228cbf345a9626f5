//! The docent: what makes a reply carry what matters and a model learn the
//! tool while it uses it. The guidance texts (one source for instructions,
//! tool descriptions, the `guide` tool and the skill), the notes a reply
//! gives once when they apply, the summary lines of a clipped output, and
//! the skill writer. Each is a pure function over facts the tools gather.

pub mod notes;
pub mod skill;
pub mod summary;
pub mod texts;
