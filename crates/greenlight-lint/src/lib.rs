//! Rollout-safety lint for Kubernetes manifests.
pub mod yaml;
