//! The promotion gate's files: `promote.yaml` ([`config`]) and the Argo Rollouts
//! AnalysisTemplates its checks import ([`analysis_template`]), read with spans over
//! greenlight-lint's YAML tree into greenlight-core's [`Promotion`]. Every problem names the
//! file, line, column and field ([`ConfigError`]). The rules of the gate itself, and the plan,
//! are greenlight-core's (`greenlight_core::promote`); this module reads them, checks the two
//! Applications ([`apps`]) and surveys what a prune would delete ([`prune`], a dry run through
//! Argo CD's API).

pub mod analysis_template;
pub mod apps;
pub mod config;
pub mod prune;
mod reader;

pub use config::{LoadError, load};
pub use greenlight_core::promote::Promotion;
pub use reader::ConfigError;
