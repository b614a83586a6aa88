//! `greenlight verify`: parse, call the library's [`greenlight::verify::verify`], print one
//! line per container. Exit 0 every Pod runs the pinned digest, 1 some or none do, 2 a tag
//! (verify means nothing for it) or usage (docs/verify.md). `--source kube` reads the
//! Application and the Pods from the Kubernetes API instead of Argo CD's.

use crate::cmd::args::{ArgoCdArgs, OneAppSourceArgs};
use crate::cmd::usage;
use anyhow::Result;
use clap::Args;
use greenlight::verify::kube::LIVE_TEMPLATES;
use greenlight::verify::{Answer, VerifyConfig, VerifySource};
use greenlight_core::directive::AppRef;
use std::path::PathBuf;
use std::process::ExitCode;

/// The most a `--manifest` file may hold.
const MANIFEST_LIMIT_BYTES: u64 = 16 << 20;

#[derive(Args)]
// `--argocd-url` is required with `--source argocd` only: `run` says so, not clap.
#[command(mut_arg("argocd_url", |a| a
    .required(false)
    .help("Argo CD API server, e.g. https://argocd.example.com (required with --source argocd; not read with --source kube)")))]
pub struct VerifyArgs {
    /// The Argo CD Application (`name`, or `namespace/name`).
    #[arg(long)]
    pub app: String,
    /// The live manifest (a local file of Kubernetes YAML) whose pinned digests are checked;
    /// default: the app's target state from Argo CD (git as Argo CD rendered it), or with
    /// --source kube the live workloads' own templates (docs/verify.md#source-kube).
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<PathBuf>,
    #[command(flatten)]
    pub source: OneAppSourceArgs,
    #[command(flatten)]
    pub argocd: ArgoCdArgs,
    /// `text`: one line per container; `json`: one object (docs/verify.md#json).
    #[arg(long, value_enum, default_value = "text")]
    pub output: VerifyOutput,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerifyOutput {
    Text,
    Json,
}

pub fn run(a: VerifyArgs) -> Result<ExitCode> {
    let app = AppRef::parse(&a.app).map_err(|e| usage(format!("--app {:?}: {e}", a.app)))?;
    let manifest = match &a.manifest {
        None => None,
        Some(path) => {
            let text = greenlight::files::read_text(path, MANIFEST_LIMIT_BYTES, "--manifest")
                .map_err(|e| usage(e.to_string()))?;
            let docs = greenlight_lint::edit::documents_as_json(&text)
                .map_err(|e| usage(format!("--manifest {}: {e}", path.display())))?;
            Some((path.display().to_string(), docs))
        }
    };
    let source = match a.source.read()? {
        None if a.argocd.argocd_url.is_none() => {
            return Err(usage(
                "--argocd-url is required with --source argocd (the default); --source kube reads the Kubernetes API instead",
            ));
        }
        None => VerifySource::ArgoCd(a.argocd.read()?),
        Some(kube) => {
            for (given, flag) in [
                (a.argocd.argocd_url.is_some(), "--argocd-url"),
                (a.argocd.argocd_token_file.is_some(), "--argocd-token-file"),
                (a.argocd.argocd_ca_file.is_some(), "--argocd-ca-file"),
            ] {
                if given {
                    return Err(usage(format!(
                        "{flag}: not read with --source kube (the Application, its workloads and their Pods are read from the Kubernetes API)"
                    )));
                }
            }
            VerifySource::Kube(kube)
        }
    };
    crate::install_crypto();
    let cfg = VerifyConfig {
        source,
        app,
        manifest,
    };
    let rt = tokio::runtime::Runtime::new()?;
    let v = rt.block_on(greenlight::verify::verify(&cfg))?;
    if a.output == VerifyOutput::Json {
        outln!("{}", serde_json::to_string(&v)?);
        return Ok(ExitCode::from(v.exit_code));
    }
    for note in &v.notes {
        errln!("note: {note}");
    }
    if v.containers.is_empty() {
        outln!(
            "{}: no Deployment, StatefulSet or DaemonSet container in {}: nothing to verify",
            v.app,
            v.desired_from
        );
    }
    let sync = format!(
        "Argo CD: {} at {}",
        if v.sync_status.is_empty() {
            "no sync status"
        } else {
            &v.sync_status
        },
        v.sync_revision.chars().take(12).collect::<String>()
    );
    for c in &v.containers {
        let d = &c.desired;
        let head = format!("{} container {}", d.workload, d.container);
        let pinned = d.image.rsplit_once('@').map_or("", |(_, dg)| dg);
        let others = |o: &std::collections::BTreeMap<String, usize>| {
            o.iter()
                .map(|(dg, n)| format!("{} ×{n}", short_digest(dg)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match &c.answer {
            Answer::All { pods } => outln!(
                "{head}: all {pods} Pod(s) run {} — the digest pinned",
                short_digest(pinned)
            ),
            Answer::Some {
                running,
                pods,
                others: o,
            } => outln!(
                "{head}: a rollout in progress — {running} of {pods} Pod(s) run {}; the others run {}",
                short_digest(pinned),
                others(o)
            ),
            Answer::None { pods: 0, .. } => outln!(
                "{head}: no Pod of it runs at all, so none runs {} ({sync})",
                short_digest(pinned)
            ),
            Answer::None { pods, others: o } => outln!(
                "{head}: none of {pods} Pod(s) runs {}: they run {} — the sync stalled or the change is not applied ({sync})",
                short_digest(pinned),
                others(o)
            ),
            Answer::Tag => outln!(
                "{head}: {} names a tag, not a digest: what a tag runs can change under it, so verify means nothing here; pin it (`greenlight guard image --resolve {}` prints the reference by digest)",
                d.image,
                d.image
            ),
        }
    }
    if v.desired_from == LIVE_TEMPLATES {
        // The cluster's own spec is git's only where Argo CD compared them equal.
        outln!(
            "(pinned digests from {}: what the cluster was told to run, which is git's only when Argo CD says Synced at the revision you expect — {sync}; give --manifest to compare with a file of git's)",
            v.desired_from
        );
    } else {
        outln!("(pinned digests from {})", v.desired_from);
    }
    Ok(ExitCode::from(v.exit_code))
}

/// `sha256:1a2b3c4d5e6f…` (12 digits). What a server sent is cut by characters, never bytes.
fn short_digest(d: &str) -> String {
    match d.strip_prefix("sha256:") {
        Some(hex) if hex.chars().count() > 12 => {
            format!("sha256:{}…", hex.chars().take(12).collect::<String>())
        }
        _ => d.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::short_digest;

    #[test]
    fn a_digest_is_shortened_by_characters() {
        assert_eq!(
            short_digest(&format!("sha256:{}", "a".repeat(64))),
            "sha256:aaaaaaaaaaaa…"
        );
        // What a server sends need not be hex: never a panic on a character boundary.
        assert_eq!(short_digest("sha256:ééééééééééééé"), "sha256:éééééééééééé…");
        assert_eq!(short_digest("none yet"), "none yet");
    }
}
