//! `greenlight audit`: every Application of an Argo CD — read from its REST API, or from the
//! Kubernetes API with `--source kube` — judged `watchable` and `arm_ready` by the core's
//! [`greenlight_core::audit`], printed as a table or one JSON document (`docs/audit.md`). It
//! reads; it never writes anything anywhere.

use crate::argocd::ArgoCd;
use anyhow::{Context, Result};
use greenlight_argocd::Application;
use greenlight_argocd::audit::{ImageUpdater, arm_facts};
use greenlight_core::audit::{AppAudit, audit_app, namespaces_by_name};
use greenlight_core::directive::AppRef;
use greenlight_core::judge::JudgeConfig;
use greenlight_core::record::Tally;
use greenlight_core::repo_url::RepoUrl;
use greenlight_git::{Auth, Repo, Secret};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Where the Applications are read.
pub enum AuditSource {
    /// Argo CD's REST API, and the most its listing may hold, in bytes.
    ArgoCd(ArgoCd, usize),
    /// The Kubernetes API: `kubeconfig` (else the usual order), one namespace or all.
    Kube {
        kubeconfig: Option<PathBuf>,
        namespace: Option<String>,
    },
}

pub struct AuditConfig {
    pub repo: RepoUrl,
    /// `None`: the remote's default branch, asked of a scratch clone.
    pub branch: Option<String>,
    pub git_token: Option<Secret>,
    pub source: AuditSource,
}

/// What was read of Image Updater's `ImageUpdater` resources.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpdatersRead {
    Read(usize),
    NotInstalled,
    /// Not read, and why: the REST API does not serve them, or they could not be listed. An
    /// app's `arm_ready` then assumes none selects it, and says so.
    NotRead(String),
}

/// The audit's answer.
pub struct Audited {
    pub source: &'static str,
    pub repo: String,
    pub branch: String,
    pub apps: Vec<AppAudit>,
    /// Applications that could not be decoded, each naming itself and what was wrong.
    pub unreadable: Vec<String>,
    pub updaters: UpdatersRead,
    /// Each app's track record (by `namespace/name`), when a store was given, and the samples
    /// it takes to arm.
    pub record: Option<(BTreeMap<String, Tally>, u64)>,
}

/// Each audited app's share of the track record: the tallies of the names its watches used
/// (`web`, `argocd/web`) summed under its `namespace/name`. A bare name shared by several
/// namespaces counts for each of them.
pub fn record_by_app(
    apps: &[AppAudit],
    record: &BTreeMap<String, Tally>,
) -> BTreeMap<String, Tally> {
    let mut out = BTreeMap::new();
    for a in apps {
        let mut t = Tally::default();
        for (named, tally) in record {
            if let Ok(r) = AppRef::parse(named)
                && r.name == a.name
                && r.namespace.as_ref().is_none_or(|ns| *ns == a.namespace)
            {
                t.add(tally);
            }
        }
        out.insert(a.key(), t);
    }
    out
}

fn evidence(t: &Tally, min_samples: u64) -> String {
    if t.verdicts == 0 {
        return "none".to_string();
    }
    let mut s = format!("{} decided of {min_samples}", t.decided());
    if t.would_revert > 0 {
        s.push_str(&format!(
            ", agreement {}/{}",
            t.agreed,
            t.would_revert - t.pending_would_revert
        ));
    }
    for (n, what) in [
        (t.misses, "miss"),
        (t.false_alarms, "false alarm"),
        (t.overruled, "overruled"),
    ] {
        if n > 0 {
            s.push_str(&format!(", {n} {what}"));
        }
    }
    if t.pending() > 0 {
        s.push_str(&format!(", {} in its day", t.pending()));
    }
    if t.ready_to_arm(min_samples) {
        s.push_str(", enough");
    }
    s
}

/// Audit what was read. `apps` in any order; the answer is sorted by `namespace/name`.
pub fn survey(
    apps: &[Application],
    updaters: &[ImageUpdater],
    repo: &RepoUrl,
    branch: &str,
    branch_is_default: bool,
) -> Vec<AppAudit> {
    let config = JudgeConfig::new(repo.expose(), branch, branch_is_default);
    let names = namespaces_by_name(
        apps.iter()
            .map(|a| (a.metadata.namespace.as_str(), a.metadata.name.as_str())),
    );
    let mut out: Vec<AppAudit> = apps
        .iter()
        .map(|app| {
            let snap = greenlight_argocd::snapshot(app, None, repo.expose());
            let facts = arm_facts(app, updaters);
            let name_in = names.get(&app.metadata.name).map_or(&[][..], |v| v);
            audit_app(&snap, &facts, &config, name_in)
        })
        .collect();
    out.sort_by_key(|a| a.key());
    out
}

/// Read the fleet and audit it.
pub fn audit(cfg: AuditConfig) -> Result<Audited> {
    let (branch, branch_is_default) = match &cfg.branch {
        Some(b) => (b.clone(), false),
        None => (default_branch(&cfg)?, true),
    };
    let rt = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let (source, apps, unreadable, updaters, updaters_read) = match &cfg.source {
        AuditSource::ArgoCd(argocd, listing_limit) => {
            let options = greenlight_argocd::ClientOptions {
                max_listing_bytes: *listing_limit,
                ..argocd.client_options()
            };
            let client = greenlight_argocd::ArgoClient::with_options(
                &argocd.url,
                argocd.token.clone(),
                options,
            )
            .map_err(|e| crate::usage(format!("--argocd-url: {e}")))?;
            let listed = rt
                .block_on(client.list_whole())
                .with_context(|| format!("cannot list Applications from {}", argocd.url))?;
            let mut apps = Vec::new();
            let mut unreadable = Vec::new();
            for item in listed {
                match item {
                    Ok(app) => apps.push(app),
                    Err(e) => unreadable.push(format!("Application {e}")),
                }
            }
            let why =
                "Argo CD's REST API does not serve them; --source kube reads them".to_string();
            (
                "argocd",
                apps,
                unreadable,
                Vec::new(),
                UpdatersRead::NotRead(why),
            )
        }
        AuditSource::Kube {
            kubeconfig,
            namespace,
        } => {
            let (apps, updaters) = rt.block_on(async {
                let client = greenlight_kube::client(kubeconfig.as_deref())
                    .await
                    .map_err(|e| crate::usage(format!("--source kube: {e}")))?;
                let apps = greenlight_kube::audit::list_applications(&client, namespace.as_deref())
                    .await
                    .map_err(anyhow::Error::msg)?;
                let updaters = greenlight_kube::audit::list_image_updaters(&client).await;
                anyhow::Ok((apps, updaters))
            })?;
            let mut read = Vec::new();
            let mut unreadable = Vec::new();
            for a in apps {
                match a {
                    Ok(app) => read.push(app),
                    Err(why) => unreadable.push(why),
                }
            }
            let (list, state) = match updaters {
                greenlight_kube::audit::Updaters::Read(list) => {
                    let n = list.len();
                    (list, UpdatersRead::Read(n))
                }
                greenlight_kube::audit::Updaters::NotInstalled => {
                    (Vec::new(), UpdatersRead::NotInstalled)
                }
                greenlight_kube::audit::Updaters::NotRead(why) => {
                    (Vec::new(), UpdatersRead::NotRead(why))
                }
            };
            ("kube", read, unreadable, list, state)
        }
    };
    let audited = survey(&apps, &updaters, &cfg.repo, &branch, branch_is_default);
    Ok(Audited {
        source,
        repo: cfg.repo.redacted(),
        branch,
        apps: audited,
        unreadable,
        updaters: updaters_read,
        record: None,
    })
}

fn default_branch(cfg: &AuditConfig) -> Result<String> {
    let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
    let auth = Auth {
        token: cfg.git_token.clone(),
        username: None,
    };
    let repo = Repo::open_or_clone(cfg.repo.expose(), &scratch.path().join("repo"), auth)?;
    Ok(repo.remote_default_branch()?)
}

impl Audited {
    /// The document `--output json` prints (`docs/audit.md#json`).
    pub fn to_json(&self) -> Value {
        let updaters = match &self.updaters {
            UpdatersRead::Read(n) => json!({"read": true, "count": n}),
            UpdatersRead::NotInstalled => json!({"read": true, "count": 0, "installed": false}),
            UpdatersRead::NotRead(why) => json!({"read": false, "why": why}),
        };
        json!({
            "schema": "greenlight.audit/v1",
            "source": self.source,
            "repo": self.repo,
            "branch": self.branch,
            "image_updater_resources": updaters,
            "summary": {
                "apps": self.apps.len(),
                "watchable": self.apps.iter().filter(|a| a.watchable()).count(),
                "arm_ready": self.apps.iter().filter(|a| a.arm_ready()).count(),
                "unreadable": self.unreadable.len(),
            },
            "apps": self.apps.iter().map(|a| {
                let mut v = json!({
                    "app": a.key(),
                    "namespace": a.namespace,
                    "name": a.name,
                    "watchable": a.watchable(),
                    "watchable_reasons": a.watchable_reasons(),
                    "arm_ready": a.arm_ready(),
                    "arm_ready_reasons": a.arm_ready_reasons(),
                    "notes": a.notes,
                });
                if let Some((record, min)) = &self.record {
                    let t = record.get(&a.key()).cloned().unwrap_or_default();
                    v["record"] = json!({
                        "counts": t,
                        "decided": t.decided(),
                        "ready_to_arm": t.ready_to_arm(*min),
                        "judgement": t.judgement(*min),
                    });
                }
                v
            }).collect::<Vec<_>>(),
            "unreadable": self.unreadable,
        })
    }

    /// The human table, a line per app, then what was not read and a summary.
    pub fn table(&self) -> String {
        let with_record = self.record.is_some();
        // The RECORD column only with a track record.
        let row = |cells: [String; 5]| -> Vec<String> {
            cells
                .into_iter()
                .enumerate()
                .filter(|(i, _)| *i != 3 || with_record)
                .map(|(_, c)| c)
                .collect()
        };
        let mut rows: Vec<Vec<String>> = vec![row([
            "APP".into(),
            "WATCHABLE".into(),
            "ARM-READY".into(),
            "RECORD".into(),
            "WHY NOT".into(),
        ])];
        let caveat = matches!(self.updaters, UpdatersRead::NotRead(_));
        for a in &self.apps {
            let mut why: Vec<String> = a
                .unwatchable
                .iter()
                .map(greenlight_core::audit::unwatchable_short)
                .collect();
            why.extend(
                a.not_arm_ready
                    .iter()
                    .filter(|r| !matches!(r, greenlight_core::audit::NotArmReady::Unwatchable))
                    .map(|r| r.short()),
            );
            let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();
            let arm = if a.arm_ready() && caveat {
                "yes*".to_string()
            } else {
                yes_no(a.arm_ready())
            };
            let record = match &self.record {
                Some((record, min)) => {
                    evidence(&record.get(&a.key()).cloned().unwrap_or_default(), *min)
                }
                None => String::new(),
            };
            rows.push(row([
                a.key(),
                yes_no(a.watchable()),
                arm,
                record,
                why.join("; "),
            ]));
        }
        // Every column but the last padded to its widest cell.
        let columns = rows[0].len();
        let widths: Vec<usize> = (0..columns - 1)
            .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
            .collect();
        let mut out = String::new();
        for r in &rows {
            let mut line = String::new();
            for (i, cell) in r.iter().enumerate() {
                match widths.get(i) {
                    Some(w) => line.push_str(&format!("{cell:w$}  ")),
                    None => line.push_str(cell),
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        for a in &self.apps {
            for n in &a.notes {
                out.push_str(&format!("note: {}: {n}\n", a.key()));
            }
        }
        for u in &self.unreadable {
            out.push_str(&format!("unreadable: {u}\n"));
        }
        if let UpdatersRead::NotRead(why) = &self.updaters {
            out.push_str(&format!(
                "* Image Updater's ImageUpdater resources were not read ({why}): arm-ready assumes none selects the app\n"
            ));
        }
        out.push_str(&format!(
            "{} app{} on {} {}: {} watchable, {} arm-ready{}\n",
            self.apps.len(),
            if self.apps.len() == 1 { "" } else { "s" },
            self.repo,
            self.branch,
            self.apps.iter().filter(|a| a.watchable()).count(),
            self.apps.iter().filter(|a| a.arm_ready()).count(),
            if self.unreadable.is_empty() {
                String::new()
            } else {
                format!(", {} unreadable", self.unreadable.len())
            }
        ));
        out
    }
}
