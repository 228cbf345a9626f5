//! End-to-end tests: the real server binary, driven by a real MCP client,
//! with real tmux and bash on private sockets.

mod agents;
mod bridge;
mod cli;
mod conformance;
mod demo;
mod docent;
mod eras;
mod expect;
mod faults;
mod hardening;
mod inspector;
mod logger;
mod metrics;
mod ownership;
mod panes;
mod people;
mod policy;
mod ports;
mod procs;
mod programs;
mod progress;
mod record;
mod remote;
mod retention;
mod run;
mod search;
mod secrets;
mod security;
mod send;
mod serve;
mod sessions;
mod shells;
mod support;
mod web;
