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
    /// With --source kube: the kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config,
    /// else the pod's service account).
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
                (a.kubeconfig.is_some(), "--kubeconfig"),
                (a.namespace.is_some(), "--namespace"),
            ] {
                if given {
                    return Err(usage(format!(
                        "{flag}: only read with --source kube (the source is Argo CD's REST API)"
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
                kubeconfig: a.kubeconfig,
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
    let audited = greenlight::audit::audit(AuditConfig {
        repo,
        branch: a.branch,
        git_token: a.git.read()?,
        source,
    })?;
    match a.output {
        AuditOutput::Json => outln!("{}", serde_json::to_string_pretty(&audited.to_json())?),
        AuditOutput::Text => crate::cmd::out(&audited.table())?,
    }
    Ok(ExitCode::SUCCESS)
}
