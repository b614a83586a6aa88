//! The promotion gate's IO, around the pure machine of `greenlight-gate`: its files,
//! `promote.yaml` ([`config`]) and the Argo Rollouts AnalysisTemplates its checks import
//! ([`analysis_template`]), read with spans over greenlight-lint's YAML tree into the gate's
//! [`Promotion`] (every problem names the file, line, column and field: [`ConfigError`]); the
//! Applications' checks ([`apps`]); the candidates' directory protocol in git ([`candidates`]:
//! the lock, the README, `kept-until`, the survey `gc` shares); how a promotion lands ([`land`]);
//! the driver of one run ([`run`]); `gc` ([`gc`]); and the survey of what a prune would delete ([`prune`], a
//! dry run through Argo CD's API). The rules of the gate itself, and the plan, are
//! `greenlight_gate::config`'s.

pub mod analysis_template;
pub mod apps;
pub mod candidates;
pub mod config;
pub mod gc;
pub mod land;
pub mod prune;
mod reader;
pub mod run;

pub use config::{LoadError, load};
pub use greenlight_gate::config::Promotion;
pub use reader::ConfigError;
