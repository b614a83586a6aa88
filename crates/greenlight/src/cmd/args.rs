//! The flag groups that more than one command takes (`#[command(flatten)]`), each with the one
//! function that reads it: git's (`watch`, `promote run`/`self-test`, `promote gc`), Argo CD's
//! (`watch`, `promote run`/`self-test`), the judge's (`watch`, `promote run`/`self-test`) and
//! the one Application's source (`wait`, `verify`).
//!
//! A command whose words for a flag are its own says them with [`help_of`] on its own arguments
//! (`promote run`'s author writes the run's commits, not reverts); names, defaults and parsing
//! stay here.

use crate::cmd::{
    author_arg, parse_author, positive_duration_arg, positive_duration_flag, secret_file, usage,
};
use anyhow::Result;
use clap::{Arg, Args};
use greenlight::GIT_TOKEN_ENV;
use greenlight_argocd::CaBundle;
use greenlight_core::repo_url::RepoUrl;
use greenlight_git::Secret;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How greenlight commits and pushes: the token git is given and the author of its commits.
#[derive(Args, Clone)]
pub struct GitArgs {
    /// File holding a git token (given to git through its credential helper, never argv); or
    /// set the GREENLIGHT_GIT_TOKEN environment variable (this flag wins when both are given).
    #[arg(long = "git-token-file")]
    pub git_token_file: Option<PathBuf>,
    /// Author of revert commits, "Name <email>".
    #[arg(
        long = "git-author",
        default_value = "greenlight <greenlight@localhost>",
        value_parser = author_arg
    )]
    pub git_author: String,
}

/// [`GitArgs`], read.
pub struct Git {
    pub token: Option<Secret>,
    pub author_name: String,
    pub author_email: String,
}

impl GitArgs {
    /// The author (`"Name <email>"`), then the token: `--git-token-file`, else
    /// `GREENLIGHT_GIT_TOKEN`. A bad one is a usage error naming its flag or variable.
    pub fn read(&self) -> Result<Git> {
        let (author_name, author_email) = parse_author(&self.git_author)?;
        let token = git_token(self.git_token_file.as_deref())?;
        Ok(Git {
            token,
            author_name,
            author_email,
        })
    }
}

/// The git token of a command that only reads git (`audit`): `--git-token-file`, else
/// `GREENLIGHT_GIT_TOKEN`.
#[derive(Args, Clone)]
pub struct GitTokenArgs {
    /// File holding a git token (given to git through its credential helper, never argv); or
    /// set the GREENLIGHT_GIT_TOKEN environment variable (this flag wins when both are given).
    #[arg(long = "git-token-file")]
    pub git_token_file: Option<PathBuf>,
}

impl GitTokenArgs {
    pub fn read(&self) -> Result<Option<Secret>> {
        git_token(self.git_token_file.as_deref())
    }
}

/// `--git-token-file`'s token, else `GREENLIGHT_GIT_TOKEN`'s; a bad one is a usage error naming
/// its flag or variable.
fn git_token(file: Option<&Path>) -> Result<Option<Secret>> {
    match file {
        Some(p) => Ok(Some(secret_file("--git-token-file", p)?)),
        None => env_secret(GIT_TOKEN_ENV),
    }
}

/// A secret from the environment variable `var`: unset or empty is none; surrounding
/// whitespace is dropped. Errors name the variable, never the value.
fn env_secret(var: &str) -> Result<Option<Secret>> {
    match std::env::var(var) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(usage(format!("{var}: the value is not valid UTF-8")))
        }
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) if v.trim().contains(['\n', '\r']) => Err(usage(format!(
            "{var}: the value holds a line break; give one token"
        ))),
        Ok(v) => Ok(Some(Secret::new(v.trim()))),
    }
}

/// The warning for a URL flag that carries credentials (`https://user:TOKEN@host/…`,
/// `https://TOKEN@host/…`): a process's arguments are visible to every user of the machine
/// (`ps`, `/proc/<pid>/cmdline`). The URL is shown redacted; `None` when it carries none.
pub fn url_credentials_warning(flag: &str, url: &RepoUrl) -> Option<String> {
    let text = url.expose().trim();
    let (scheme, rest) = text.split_once("://")?;
    if !matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https") {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if !authority.contains('@') {
        return None;
    }
    Some(format!(
        "{flag} {} carries credentials in its URL, and greenlight's command line is visible to every user of this machine (ps, /proc/<pid>/cmdline): give the token with --git-token-file <file> or the {GIT_TOKEN_ENV} environment variable and the URL without it (they are still used; greenlight never prints them)",
        url.redacted()
    ))
}

/// Where the Applications are read: Argo CD's API server and its token.
#[derive(Args, Clone)]
pub struct ArgoCdArgs {
    /// Argo CD API server, e.g. https://argocd.example.com
    #[arg(long = "argocd-url", required = true)]
    pub argocd_url: Option<String>,
    /// File holding an Argo CD API token (sent as a bearer token).
    #[arg(long = "argocd-token-file")]
    pub argocd_token_file: Option<PathBuf>,
    /// PEM file of the certificate authorities that sign Argo CD's server certificate, trusted
    /// besides the system's roots (Argo CD's default certificate is self-signed: its own CA).
    #[arg(long = "argocd-ca-file", value_name = "PEM")]
    pub argocd_ca_file: Option<PathBuf>,
    /// The most one answer of Argo CD's may hold, in MiB: an Application, its resource tree,
    /// its managed resources, one resource, a sync's answer. A larger one is refused with a
    /// warning naming this flag (the app unobserved, never absent); a listing has
    /// --listing-limit-mib where a command lists.
    #[arg(long = "read-limit-mib", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub read_limit_mib: u32,
}

/// [`ArgoCdArgs`], read: where Argo CD is and how to reach it.
pub use greenlight::argocd::ArgoCd;

/// `--argocd-ca-file`: a file that is missing, unreadable, not a regular file, larger than
/// [`CA_LIMIT`](greenlight::files::CA_LIMIT) or holds no certificate is a usage error naming
/// the flag and the path.
fn read_ca_file(path: &Path) -> Result<CaBundle> {
    let shown = path.display().to_string();
    let bad = |why: String| usage(format!("--argocd-ca-file {shown}: {why}"));
    let pem =
        greenlight::files::read_bounded(path, greenlight::files::CA_LIMIT, "--argocd-ca-file")
            .map_err(|e| match e.problem {
                greenlight::files::Problem::Io(_) => bad(format!("cannot read it: {}", e.reason())),
                _ => bad(e.reason()),
            })?;
    CaBundle::from_pem(&pem, &shown).map_err(bad)
}

impl ArgoCdArgs {
    /// The token file and the CA file, read: a bad one is a usage error naming its flag. The
    /// URL is required (clap requires it where this group is flattened as it is).
    pub fn read(&self) -> Result<ArgoCd> {
        self.read_optional()?
            .ok_or_else(|| crate::cmd::usage("--argocd-url is required"))
    }

    /// As [`ArgoCdArgs::read`], `None` without `--argocd-url` (where a command made it
    /// optional: `watch --source kube`). A token file without a URL is a usage error.
    pub fn read_optional(&self) -> Result<Option<ArgoCd>> {
        let Some(url) = self.argocd_url.clone() else {
            if self.argocd_token_file.is_some() {
                return Err(crate::cmd::usage(
                    "--argocd-token-file: given without --argocd-url, which it is for",
                ));
            }
            return Ok(None);
        };
        let token = self
            .argocd_token_file
            .as_deref()
            .map(|p| secret_file("--argocd-token-file", p).map(|s| s.expose().to_owned()))
            .transpose()?;
        let ca = self
            .argocd_ca_file
            .as_deref()
            .map(read_ca_file)
            .transpose()?;
        Ok(Some(ArgoCd {
            url,
            token,
            ca,
            read_limit_bytes: (self.read_limit_mib as usize) << 20,
        }))
    }
}

/// Where Applications are read (`watch`, `wait` and `verify`'s `--source`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// Argo CD's REST API (`--argocd-url`).
    Argocd,
    /// The Kubernetes API: Argo CD's `applications.argoproj.io` custom resources.
    Kube,
}

/// Where `wait` and `verify` read their one Application: `--source`, and with `kube` the
/// kubeconfig and the Application's namespace. (`watch` has its own: its `--namespace` names
/// the namespaces watched, and repeats.)
#[derive(Args, Clone)]
pub struct OneAppSourceArgs {
    /// Where the Application is read: Argo CD's REST API (the default), or the Kubernetes API
    /// (its `applications.argoproj.io` resource, with a kubeconfig or in-cluster).
    #[arg(long, value_enum, default_value = "argocd")]
    pub source: SourceKind,
    /// With --source kube: the kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config,
    /// else the pod's service account).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// With --source kube: the Application's namespace when --app names none (default: the
    /// kubeconfig context's namespace, as kubectl's; in a pod, its own).
    #[arg(long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
}

impl OneAppSourceArgs {
    /// With `--source kube`, where the Application is found; `None` with `--source argocd`,
    /// where `--kubeconfig` and `--namespace` are usage errors (they would do nothing).
    pub fn read(&self) -> Result<Option<greenlight::kube::KubeApp>> {
        match self.source {
            SourceKind::Argocd => {
                for (given, flag) in [
                    (self.kubeconfig.is_some(), "--kubeconfig"),
                    (self.namespace.is_some(), "--namespace"),
                ] {
                    if given {
                        return Err(usage(format!(
                            "{flag}: only read with --source kube (the source is Argo CD's REST API; --app names the namespace there)"
                        )));
                    }
                }
                Ok(None)
            }
            SourceKind::Kube => {
                if let Some(ns) = &self.namespace {
                    greenlight::kube::dns_label(ns)
                        .map_err(|why| usage(format!("--namespace {ns:?}: {why}")))?;
                }
                Ok(Some(greenlight::kube::KubeApp {
                    kubeconfig: self.kubeconfig.clone(),
                    namespace: self.namespace.clone(),
                }))
            }
        }
    }
}

/// The judge's timing: how long health must hold, when an observation is stale, how long an
/// app may not exist yet, how often the branch is fetched.
#[derive(Args, Clone)]
pub struct JudgeArgs {
    /// How long the health condition must hold without a break.
    #[arg(long = "stable-for", default_value = "120s", value_parser = positive_duration_arg)]
    pub stable_for: String,
    /// An observation older than this when a deadline decides makes the verdict INCONCLUSIVE.
    #[arg(long = "stale-after", default_value = "30s", value_parser = positive_duration_arg)]
    pub stale_after: String,
    /// How long to wait for an app that does not exist yet. Longer than Argo CD takes to create
    /// the app of an app-of-apps commit: its refresh (timeout.reconciliation, 120s) plus up to
    /// 60s of jitter.
    #[arg(long = "unknown-app-grace", default_value = "300s", value_parser = positive_duration_arg)]
    pub unknown_app_grace: String,
    /// How often to fetch the branch (and re-list apps as a safety net).
    #[arg(long = "fetch-interval", default_value = "10s", value_parser = positive_duration_arg)]
    pub fetch_interval: String,
}

/// [`JudgeArgs`], read.
pub struct Judge {
    pub stable_for_ms: i64,
    pub stale_after_ms: i64,
    pub unknown_app_grace_ms: i64,
    pub fetch_interval: Duration,
}

impl JudgeArgs {
    /// Each duration in the order of the flags; each must be above zero.
    pub fn read(&self) -> Result<Judge> {
        // Durations are parsed from i64 milliseconds, so `as_millis` fits back into one.
        Ok(Judge {
            stable_for_ms: positive_duration_flag("--stable-for", &self.stable_for)?.as_millis()
                as i64,
            stale_after_ms: positive_duration_flag("--stale-after", &self.stale_after)?.as_millis()
                as i64,
            unknown_app_grace_ms: positive_duration_flag(
                "--unknown-app-grace",
                &self.unknown_app_grace,
            )?
            .as_millis() as i64,
            fetch_interval: positive_duration_flag("--fetch-interval", &self.fetch_interval)?,
        })
    }
}

/// For `#[command(mut_args(help_of(&[(id, help), …])))]`: the help of the arguments named,
/// replaced (`None`: no help). Unlike `mut_arg`, it keeps every argument where it stands, so
/// that completions list them in the order declared.
pub fn help_of(words: &'static [(&'static str, Option<&'static str>)]) -> impl FnMut(Arg) -> Arg {
    move |arg| match words.iter().find(|(id, _)| arg.get_id() == *id) {
        Some((_, help)) => arg.help(*help),
        None => arg,
    }
}

/// Where the daemon serves `/metrics` and its probes (`docs/metrics.md`); off when not given.
#[derive(Args, Clone)]
pub struct ListenArgs {
    /// Serve /metrics (Prometheus), /healthz, /readyz and /startupz on this address, e.g.
    /// 0.0.0.0:9090 (off by default).
    #[arg(long = "listen", value_name = "ADDR:PORT")]
    pub listen: Option<std::net::SocketAddr>,
    /// Serve POST /hooks/github on --listen: GitHub push webhooks signed with the secret in
    /// this file (X-Hub-Signature-256) fetch the tracked branch at once.
    #[arg(
        long = "github-webhook-secret-file",
        value_name = "FILE",
        requires = "listen"
    )]
    pub github_webhook_secret_file: Option<std::path::PathBuf>,
    /// Serve POST /hooks/gitlab on --listen: GitLab push webhooks carrying the secret token in
    /// this file (X-Gitlab-Token) fetch the tracked branch at once.
    #[arg(
        long = "gitlab-webhook-token-file",
        value_name = "FILE",
        requires = "listen"
    )]
    pub gitlab_webhook_token_file: Option<std::path::PathBuf>,
    /// Serve POST /hooks/gitea on --listen: Gitea (and Forgejo) push webhooks signed with the
    /// secret in this file (X-Gitea-Signature) fetch the tracked branch at once.
    #[arg(
        long = "gitea-webhook-secret-file",
        value_name = "FILE",
        requires = "listen"
    )]
    pub gitea_webhook_secret_file: Option<std::path::PathBuf>,
}

impl ListenArgs {
    /// Bind the listener, before start-up (so `/startupz` answers while the clone is made), and
    /// serve `metrics` on it in a task of its own; `None` without `--listen`.
    pub async fn serve(
        &self,
        metrics: &std::sync::Arc<greenlight::metrics::Metrics>,
        hooks: Option<std::sync::Arc<greenlight::hooks::PushHooks>>,
    ) -> Result<Option<tokio::task::JoinHandle<Result<()>>>> {
        let Some(addr) = self.listen else {
            return Ok(None);
        };
        let listener = greenlight::serve::bind("--listen", addr).await?;
        Ok(Some(tokio::spawn(greenlight::serve::serve(
            listener,
            metrics.clone(),
            hooks,
        ))))
    }

    /// The push hooks' secrets, each file read as a token file (`secret_file`).
    pub fn hook_secrets(&self) -> Result<greenlight::hooks::HookSecrets> {
        let read = |path: &Option<std::path::PathBuf>, forge: greenlight::hooks::Forge| {
            path.as_deref()
                .map(|p| crate::cmd::secret_file(forge.flag(), p))
                .transpose()
        };
        use greenlight::hooks::Forge;
        Ok(greenlight::hooks::HookSecrets {
            github: read(&self.github_webhook_secret_file, Forge::GitHub)?,
            gitlab: read(&self.gitlab_webhook_token_file, Forge::GitLab)?,
            gitea: read(&self.gitea_webhook_secret_file, Forge::Gitea)?,
        })
    }
}

/// `watch`'s leader election among replicas (docs/deploy.md#leader).
#[derive(Args, Clone)]
pub struct ElectionArgs {
    /// Run as one of several replicas: only the holder of a coordination.k8s.io Lease judges,
    /// writes and pushes; the others stand by (needs --store kube).
    #[arg(long = "leader-elect")]
    pub leader_elect: bool,
    /// The Lease's name (default: --store-name), in --store-namespace.
    #[arg(long = "lease-name")]
    pub lease_name: Option<String>,
    /// How long a Lease not renewed stays the holder's: a standby takes it over after it has
    /// seen it unchanged this long.
    #[arg(long = "lease-duration", default_value = "15s", value_parser = crate::cmd::positive_duration_arg)]
    pub lease_duration: String,
    /// The leader stops (exits) when it could not renew its Lease for this long, measured from
    /// the last renewal it sent; shorter than --lease-duration, so it stops before a standby can
    /// take over.
    #[arg(long = "renew-deadline", default_value = "10s", value_parser = crate::cmd::positive_duration_arg)]
    pub renew_deadline: String,
    /// How often the leader renews and a standby tries the Lease.
    #[arg(long = "lease-retry-period", default_value = "2s", value_parser = crate::cmd::positive_duration_arg)]
    pub lease_retry_period: String,
    /// This replica's name in the Lease (default: the pod's name from $HOSTNAME); a suffix
    /// unique to the process is added.
    #[arg(long)]
    pub identity: Option<String>,
}

/// [`ElectionArgs`] read.
#[derive(Clone, Debug)]
pub struct Election {
    pub lease_name: Option<String>,
    pub lease_duration: std::time::Duration,
    pub renew_deadline: std::time::Duration,
    pub retry_period: std::time::Duration,
    pub identity: String,
}

impl ElectionArgs {
    /// The election's settings, or `None` without `--leader-elect`. The durations must order
    /// retry < renew deadline < lease duration: a leader must stop before a standby may take
    /// over, and try more than once before it stops.
    pub fn read(&self) -> Result<Option<Election>> {
        if !self.leader_elect {
            for (given, flag) in [
                (self.lease_name.is_some(), "--lease-name"),
                (self.identity.is_some(), "--identity"),
            ] {
                if given {
                    return Err(usage(format!("{flag}: only read with --leader-elect")));
                }
            }
            return Ok(None);
        }
        let lease_duration =
            crate::cmd::positive_duration_flag("--lease-duration", &self.lease_duration)?;
        let renew_deadline =
            crate::cmd::positive_duration_flag("--renew-deadline", &self.renew_deadline)?;
        let retry_period =
            crate::cmd::positive_duration_flag("--lease-retry-period", &self.lease_retry_period)?;
        if renew_deadline >= lease_duration {
            return Err(usage(format!(
                "--renew-deadline {} must be shorter than --lease-duration {}: a leader that cannot renew must stop before a standby may take the Lease",
                self.renew_deadline, self.lease_duration
            )));
        }
        if retry_period >= renew_deadline {
            return Err(usage(format!(
                "--lease-retry-period {} must be shorter than --renew-deadline {}: a leader must be able to try renewing more than once before it stops",
                self.lease_retry_period, self.renew_deadline
            )));
        }
        let base = match &self.identity {
            Some(i) if i.trim().is_empty() => {
                return Err(usage(
                    "--identity: empty; leave it out to use the pod's name",
                ));
            }
            Some(i) => i.trim().to_string(),
            None => std::env::var("HOSTNAME")
                .ok()
                .filter(|h| !h.trim().is_empty())
                .unwrap_or_else(|| "greenlight".to_string()),
        };
        Ok(Some(Election {
            lease_name: self.lease_name.clone(),
            lease_duration,
            renew_deadline,
            retry_period,
            identity: format!("{base}_{}", process_suffix()),
        }))
    }
}

/// Eight hex digits unique to this process (its pid and start instant, hashed with a random
/// key): two processes never share a Lease identity, even after a re-exec in the same pod or a
/// fixed `--identity` given to every replica.
fn process_suffix() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    format!("{:08x}", h.finish() as u32)
}
