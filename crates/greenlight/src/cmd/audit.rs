//! `greenlight audit`: which Applications a trailer's watch can judge, and which may be armed
//! (docs/audit.md). Exit 0 whatever the apps are; 2 usage; 1 when the fleet could not be read.

use crate::cmd::args::{ArgoCdArgs, GitTokenArgs, SourceKind};
use crate::cmd::usage;
use anyhow::Result;
use clap::Args;
use greenlight::audit::{AuditConfig, AuditSource};
use greenlight_core::repo_url::RepoUrl;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
// `--argocd-url` is required with `--source argocd` only: `run` says so, not clap.
#[command(mut_arg("argocd_url", |a| a.required(false)))]
// The audit only lists (`--listing-limit-mib` bounds that): the one-answer limit is not its.
#[command(mut_arg("read_limit_mib", |a| a.hide(true)))]
pub struct AuditArgs {
    /// The deployment repository the watches would follow: a URL, or a bare repository's path.
    #[arg(long)]
    pub repo: String,
    /// The branch the watches would follow (default: the remote's HEAD branch, asked of a
    /// scratch clone; give it to skip the clone).
    #[arg(long)]
    pub branch: Option<String>,
    /// Where the Applications are read: Argo CD's REST API (the default), or the Kubernetes
    /// API, which also serves Image Updater's `ImageUpdater` resources.
    #[arg(long, value_enum, default_value = "argocd")]
    pub source: SourceKind,
    /// With --source kube or --store kube: the kubeconfig to use (default: $KUBECONFIG, else
    /// ~/.kube/config, else the pod's service account).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// With --source kube: the one namespace whose Applications are read (default: all).
    #[arg(long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    #[command(flatten)]
    pub argocd: ArgoCdArgs,
    #[command(flatten)]
    pub git: GitTokenArgs,
    /// With --source argocd: the most the listing of every Application, whole, may hold, in MiB.
    #[arg(long = "listing-limit-mib", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..))]
    pub listing_limit_mib: u32,
    /// The watchdog's state file: each app's line then says how much evidence its track record
    /// holds (docs/record.md).
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// `kube`: the track record from the cluster store instead (with --kubeconfig).
    #[arg(long, value_name = "STORE", value_parser = ["kube"])]
    pub store: Option<String>,
    /// With --store kube: the namespace of the store's objects.
    #[arg(long, value_name = "NAMESPACE")]
    pub store_namespace: Option<String>,
    /// With --store kube: the store's name (default: greenlight).
    #[arg(long, value_name = "NAME")]
    pub store_name: Option<String>,
    /// With a track record: how many decided verdicts, with no miss and no false alarm, make
    /// enough to arm.
    #[arg(long, default_value_t = greenlight_core::record::DEFAULT_MIN_SAMPLES, value_parser = clap::value_parser!(u64).range(1..))]
    pub min_samples: u64,
    /// `text`: a table; `json`: one JSON document (docs/audit.md#json).
    #[arg(long, value_enum, default_value = "text")]
    pub output: AuditOutput,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuditOutput {
    Text,
    Json,
}

pub fn run(a: AuditArgs) -> Result<ExitCode> {
    let source = match a.source {
        SourceKind::Argocd => {
            for (given, flag) in [
                (a.kubeconfig.is_some() && a.store.is_none(), "--kubeconfig"),
                (a.namespace.is_some(), "--namespace"),
            ] {
                if given {
                    return Err(usage(format!(
                        "{flag}: only read with --source kube or --store kube (the source is Argo CD's REST API)"
                    )));
                }
            }
            if a.argocd.argocd_url.is_none() {
                return Err(usage(
                    "--argocd-url is required with --source argocd (the default)",
                ));
            }
            AuditSource::ArgoCd(a.argocd.read()?, (a.listing_limit_mib as usize) << 20)
        }
        SourceKind::Kube => {
            if a.argocd.argocd_url.is_some() {
                return Err(usage(
                    "--argocd-url: not read with --source kube (the audit reads only Applications and ImageUpdater resources from the Kubernetes API)",
                ));
            }
            if let Some(ns) = &a.namespace {
                greenlight::kube::dns_label(ns)
                    .map_err(|why| usage(format!("--namespace {ns:?}: {why}")))?;
            }
            AuditSource::Kube {
                kubeconfig: a.kubeconfig.clone(),
                namespace: a.namespace,
            }
        }
    };
    if let Some(b) = &a.branch
        && (b.trim().is_empty() || b.starts_with('-'))
    {
        return Err(usage(format!("--branch {b:?}: not a branch name")));
    }
    let repo = RepoUrl::new(a.repo.clone());
    if repo.is_blank() {
        return Err(usage("--repo: empty"));
    }
    if let Some(warning) = crate::cmd::args::url_credentials_warning("--repo", &repo) {
        errln!("warning: {warning}");
    }
    crate::install_crypto();
    // The store first: one that cannot be opened is refused before the fleet is read.
    let record = if a.state.is_some() || a.store.is_some() {
        let args = crate::cmd::state::StoreArgs {
            state: a.state.clone(),
            store: a.store.clone(),
            kubeconfig: a.kubeconfig.clone(),
            store_namespace: a.store_namespace.clone(),
            store_name: a.store_name.clone(),
        };
        let mut store = args.open(crate::cmd::state::Open::Read)?;
        let exported = store.export()?;
        Some(greenlight::store::track_record(
            &exported,
            greenlight::clock::Clock::now(&greenlight::clock::SystemClock),
        ))
    } else {
        None
    };
    let mut audited = greenlight::audit::audit(AuditConfig {
        repo,
        branch: a.branch,
        git_token: a.git.read()?,
        source,
    })?;
    if let Some(record) = record {
        audited.record = Some((
            greenlight::audit::record_by_app(&audited.apps, &record),
            a.min_samples,
        ));
    }
    match a.output {
        AuditOutput::Json => outln!("{}", serde_json::to_string_pretty(&audited.to_json())?),
        AuditOutput::Text => crate::cmd::out(&audited.table())?,
    }
    Ok(ExitCode::SUCCESS)
}
