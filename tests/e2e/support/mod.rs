//! What the end-to-end tests share, one kind of thing a file: the world a
//! test runs in and its server (`world`), the shared server and its
//! bridges (`serve`), a raw JSON-RPC client (`raw`), the one bounded
//! wait (`poll`), people at terminals (`person`), a program run to its
//! end (`cli`), a session's regions on disk (`regions`), the switch
//! between small and full sizes (`slow`), and the outside implementations
//! of the protocol: the Python SDK (`python`) and the conformance suite
//! with its Node (`conformance`). A test file takes what it needs
//! from here and defines no helper another file defines too.

pub mod cli;
pub mod conformance;
pub mod person;
pub mod poll;
pub mod python;
pub mod raw;
pub mod regions;
pub mod serve;
pub mod slow;
pub mod world;

pub use cli::{Ran, cli, cli_with, run_for};
pub use person::{Person, Pty};
pub use python::python_sdk;
pub use raw::RawClient;
pub use serve::{Serve, bridge, bridged, free_port, request, socket_of, unix_get, unix_http, until_answering};
pub use slow::{size, slow};
pub use world::{SERVER, Server, World, has_exited, installed, kill_logger, logger_pid, mode, session_text};
