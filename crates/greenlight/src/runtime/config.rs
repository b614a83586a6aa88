//! What `greenlight watch` was told, after parsing: the runtime's settings and the judge's.

use greenlight_core::judge::JudgeConfig;
use greenlight_core::repo_url::RepoUrl;
use std::path::PathBuf;
use std::time::Duration;

/// `--resync-interval`'s default: a listing every five minutes while the stream vouches.
pub const DEFAULT_RESYNC_INTERVAL: Duration = Duration::from_secs(300);

/// Everything `greenlight watch` was told.
#[derive(Clone)]
pub struct DaemonConfig {
    /// The watched repository; it shows itself only redacted.
    pub repo: RepoUrl,
    pub branch: Option<String>,
    pub git_token: Option<greenlight_git::Secret>,
    pub git_author_name: String,
    pub git_author_email: String,
    pub state: PathBuf,
    pub data_dir: PathBuf,
    pub stable_for_ms: i64,
    pub stale_after_ms: i64,
    pub unknown_app_grace_ms: i64,
    pub fetch_interval: Duration,
    /// While the stream vouches, how often the safety-net listing runs (`--resync-interval`);
    /// while it does not, a listing runs every `fetch_interval`.
    pub resync_interval: Duration,
    pub dry_run: bool,
    pub since: Option<String>,
    pub trailer_key: String,
    /// How long finished watches and their events stay in the state file.
    pub retain_ms: i64,
    /// How long after a `NOT_REACHED` a watch may re-open (0: never).
    pub reopen_horizon_ms: i64,
    /// Health by the strict aggregate only, never relative to a watch's baseline: the
    /// promotion gate's candidate must be clean (`JudgeConfig::strict_health`).
    pub strict_health: bool,
    /// Watch a promotion gate's candidate commits (`Greenlight-Judged-By`): the gate's own
    /// judge only (`JudgeConfig::gate_candidates`).
    pub gate_candidates: bool,
    /// With `strict_health`: the resources judged (`JudgeConfig::health_scope`); empty: the app.
    pub health_scope: Vec<greenlight_core::snapshot::ScopedResource>,
    /// Paths a later commit may change without making a verdict unattributable
    /// (`JudgeConfig::attribution_exempt`); empty: none.
    pub attribution_exempt: Vec<String>,
    /// The one watch `greenlight wait` asks for (`JudgeConfig::asked`); `None`: the trailers'.
    pub asked: Option<greenlight_core::judge::AskedWatch>,
    /// `--revert-via pull-request`: reverts proposed on a forge; `None`: pushed.
    pub revert_via_pull_request: Option<std::sync::Arc<super::git::PullRequestReverts>>,
    /// How a watch with `expect=Healthy,Running` reads what its Pods run; `None`: it cannot,
    /// and such a watch ends `INCONCLUSIVE` saying so.
    pub verifier: Option<std::sync::Arc<crate::verify::WatchVerifier>>,
    /// Push hooks ask for fetches through this (`crate::hooks`); `None`: none are served.
    pub fetch_nudge: Option<std::sync::Arc<crate::hooks::FetchNudge>>,
}

impl DaemonConfig {
    pub fn judge_config(&self, branch: &str, branch_is_default: bool) -> JudgeConfig {
        // The judge quotes the repository in reasons that are stored and shown by `status`:
        // never with the credentials a URL may carry.
        let repo = self.repo.redacted();
        let mut j = JudgeConfig::new(&repo, branch, branch_is_default);
        j.stable_for_ms = self.stable_for_ms;
        j.stale_after_ms = self.stale_after_ms;
        j.unknown_app_grace_ms = self.unknown_app_grace_ms;
        j.dry_run = self.dry_run;
        j.trailer_key = self.trailer_key.clone();
        j.reopen_horizon_ms = self.reopen_horizon_ms;
        j.strict_health = self.strict_health;
        j.gate_candidates = self.gate_candidates;
        j.health_scope = self.health_scope.clone();
        j.attribution_exempt = self.attribution_exempt.clone();
        j.asked = self.asked.clone();
        j
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_judge_never_holds_the_credentials_of_the_repo_url() {
        let cfg = DaemonConfig {
            repo: RepoUrl::new(
                "https://deploy-bot:s3cret-token@git.example.com/platform/deploy.git",
            ),
            branch: None,
            git_token: None,
            git_author_name: "g".into(),
            git_author_email: "g@example.com".into(),
            state: PathBuf::from("s.db"),
            data_dir: PathBuf::from("s.db.d"),
            stable_for_ms: 1,
            stale_after_ms: 1,
            unknown_app_grace_ms: 1,
            fetch_interval: Duration::from_secs(1),
            resync_interval: DEFAULT_RESYNC_INTERVAL,
            dry_run: false,
            since: None,
            trailer_key: "Nav-Watchdog".into(),
            retain_ms: 1,
            reopen_horizon_ms: 0,
            strict_health: false,
            gate_candidates: false,
            health_scope: Vec::new(),
            attribution_exempt: Vec::new(),
            asked: None,
            revert_via_pull_request: None,
            verifier: None,
            fetch_nudge: None,
        };
        // The judge quotes its repository in reasons (stored, shown by `status`).
        let j = cfg.judge_config("main", true);
        assert!(!j.repo.contains("s3cret-token"), "{}", j.repo);
        assert!(
            j.repo.contains("git.example.com/platform/deploy"),
            "{}",
            j.repo
        );
    }
}
