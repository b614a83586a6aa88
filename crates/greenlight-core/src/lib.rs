//! greenlight's pure logic. Nothing in this crate performs IO, reads a clock or spawns a task:
//! callers pass in what they observed and the current time, and get back what should happen.
//! That is what lets every judgement be a plain unit test and a seeded simulation.
//!
//! Start reading at [`judge::Engine`]: it owns the watches and the breaker and turns observations
//! into events and revert requests. A watch's phases and their data are [`watch`]; every word
//! said about a watch is [`reason`]. The promotion gate is a crate of its own
//! (`greenlight-gate`), built on this one's vocabulary.

pub mod audit;
pub mod breaker;
pub mod commit;
pub mod directive;
pub mod error_text;
pub mod event;
pub mod image;
pub mod judge;
pub mod paths;
pub mod reason;
pub mod record;
pub mod repo_url;
pub mod secret;
pub mod snapshot;
pub mod source;
pub mod state;
pub mod tape;
pub mod time;
pub mod trailer;
pub mod watch;
