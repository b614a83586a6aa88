//! The promotion gate's pure logic (`docs/promote.md`). Like `greenlight-core`, nothing here
//! performs IO, reads a clock or spawns a task: the driver in the `greenlight` library executes
//! what the machine decides and reports back what happened.
//!
//! Start reading at [`machine::Gate`]: it decides what one run does next — commit the candidate,
//! have the judge watch it, run each check in the written order, promote in one commit, keep a
//! failed candidate. The candidate is made from the live workload by [`candidate`]; the
//! validated `promote.yaml` and its worst-case plan are [`config`]; the metric checks' analysis
//! with Argo Rollouts' semantics is [`analysis`]; every word the gate says is [`reason`], and the trailers of its commits are written and read
//! in [`trailers`]
//! (the analysis keeps its own beside it, [`analysis::reason`]).
//!
//! It builds on `greenlight-core`'s shared vocabulary (time, directives, commits, repository
//! URLs, images) and never on the watch judge's internals.

pub mod analysis;
pub mod candidate;
pub mod config;
pub mod machine;
pub mod reason;
pub mod trailers;
