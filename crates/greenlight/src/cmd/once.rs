//! `greenlight watch --once`: the self-check gate. One cycle of the watchdog's own runtime —
//! configuration, clone and fetch, every trailer in range, one listing of Argo CD, one judgement
//! of each watch — with dry-run forced, in a scratch directory that is removed afterwards, and
//! any failure a non-zero exit, so a broken release is caught before it runs as the daemon.

use anyhow::{Context, Result};
use greenlight::output::Output;
use greenlight::runtime::seams::Source;
use greenlight::runtime::{self, DaemonConfig};
use std::process::ExitCode;

pub async fn run(mut cfg: DaemonConfig, source: Source, out: Output) -> Result<ExitCode> {
    let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
    cfg.dry_run = true;
    cfg.state = scratch.path().join("state.db");
    cfg.data_dir = scratch.path().to_path_buf();
    let summary = runtime::once(cfg.clone(), source, out.clone()).await?;
    if summary.rejected > 0 {
        out.plain(&format!(
            "self-check: {} malformed trailer(s) in range (see directive_rejected above)",
            summary.rejected
        ));
    }
    out.plain(&format!(
        "self-check passed: {} {} at {}, {} commit(s) read, {} watch(es) would start, {} Application(s) listed (dry-run, no state written)",
        cfg.repo,
        summary.branch,
        &summary.tip[..summary.tip.len().min(12)],
        summary.commits,
        summary.watches,
        summary.apps_listed
    ));
    Ok(ExitCode::SUCCESS)
}
