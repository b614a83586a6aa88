//! The fleet audit: for every Application, can a commit's watch judge it (`watchable`), and may
//! a watch of it be armed without a revert doing harm or nothing (`arm_ready`)? Pure: the
//! callers read Argo CD (or the Kubernetes API) and hand over each app's snapshot and the few
//! facts the judge does not need ([`ArmFacts`]). Watchability is the judge's own answer
//! ([`crate::judge::unwatchable`]), so the survey and a watch never disagree.
//! `docs/audit.md` says what each reason means and what to do about it.

use crate::judge::{JudgeConfig, unwatchable};
use crate::reason::Unwatchable;
use crate::snapshot::AppSnapshot;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// `spec.syncPolicy.automated` as it bears on a revert: `None` in [`ArmFacts::automated`] is
/// no automated sync (absent, or `enabled: false`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AutoSync {
    pub prune: bool,
    pub self_heal: bool,
}

/// Argo CD Image Updater manages the app's images: by whom (`annotations`, or the
/// `ImageUpdater` resource `namespace/name`) and with which write-back method (`argocd`, its
/// default, or `git…`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageUpdaterUse {
    pub by: String,
    pub method: String,
}

impl ImageUpdaterUse {
    /// The `argocd` write-back: the image lives in the Application's parameters in the
    /// cluster, not in git. Anything not `git…` counts (unknown methods fail closed).
    pub fn writes_to_cluster(&self) -> bool {
        let m = self.method.trim();
        !(m == "git" || m.starts_with("git:"))
    }
}

/// What the audit needs beyond the judge's snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ArmFacts {
    pub automated: Option<AutoSync>,
    pub image_updater: Vec<ImageUpdaterUse>,
    /// Applications among the app's own resources (`namespace/name`): an app-of-apps parent.
    pub child_apps: Vec<String>,
}

/// Why arming a watch of this app is not (yet) safe or useful.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotArmReady {
    /// No watch of it can be judged, so none can be armed.
    Unwatchable,
    /// Image Updater's `argocd` write-back: the image is set in the cluster, a git revert
    /// reverts nothing of it.
    ImageUpdaterInCluster { by: String, method: String },
    /// Automated sync prunes: a revert that removes a manifest deletes live objects.
    AutomatedPrune,
    /// No automated sync: a pushed revert waits for someone to sync it.
    NoAutomatedSync,
    /// Automated sync without selfHeal: the revert's commit is synced, but what was changed in
    /// the cluster by hand (or partly applied by the failed sync's hooks) is left as it is.
    SelfHealOff,
    /// An app-of-apps parent: a revert of its repository changes other Applications.
    AppOfApps { children: Vec<String> },
}

impl NotArmReady {
    pub fn code(&self) -> &'static str {
        match self {
            NotArmReady::Unwatchable => "unwatchable",
            NotArmReady::ImageUpdaterInCluster { .. } => "image_updater_argocd_write_back",
            NotArmReady::AutomatedPrune => "automated_prune",
            NotArmReady::NoAutomatedSync => "no_automated_sync",
            NotArmReady::SelfHealOff => "self_heal_off",
            NotArmReady::AppOfApps { .. } => "app_of_apps",
        }
    }

    /// A few words for the table.
    pub fn short(&self) -> String {
        match self {
            NotArmReady::Unwatchable => "unwatchable".into(),
            NotArmReady::ImageUpdaterInCluster { method, .. } => {
                format!("Image Updater write-back {method}")
            }
            NotArmReady::AutomatedPrune => "automated prune".into(),
            NotArmReady::NoAutomatedSync => "no automated sync".into(),
            NotArmReady::SelfHealOff => "selfHeal off".into(),
            NotArmReady::AppOfApps { children } => {
                format!(
                    "app-of-apps ({} Application{})",
                    children.len(),
                    if children.len() == 1 { "" } else { "s" }
                )
            }
        }
    }
}

impl fmt::Display for NotArmReady {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotArmReady::Unwatchable => {
                write!(f, "no watch of it can be judged, so none can be armed")
            }
            NotArmReady::ImageUpdaterInCluster { by, method } => write!(
                f,
                "Argo CD Image Updater ({by}) writes its images back with method {method:?}: the image is set in the Application in the cluster, not in git, so a git revert does not revert it; use the git write-back before arming"
            ),
            NotArmReady::AutomatedPrune => write!(
                f,
                "automated sync prunes (spec.syncPolicy.automated.prune): a revert that removes a manifest deletes the live object; arm an app without automated prune first"
            ),
            NotArmReady::NoAutomatedSync => write!(
                f,
                "no automated sync (spec.syncPolicy.automated): a pushed revert stays undeployed until someone syncs it"
            ),
            NotArmReady::SelfHealOff => write!(
                f,
                "automated sync without selfHeal (spec.syncPolicy.automated.selfHeal): the revert's commit is synced, but what was changed in the cluster by hand or left by a failed sync is not undone, so the app may stay broken after a revert"
            ),
            NotArmReady::AppOfApps { children } => write!(
                f,
                "an app-of-apps parent of {} Application{} ({}): a revert of its commit changes other apps' definitions",
                children.len(),
                if children.len() == 1 { "" } else { "s" },
                shown_list(children, 5)
            ),
        }
    }
}

fn shown_list(items: &[String], max: usize) -> String {
    let mut s = items
        .iter()
        .take(max)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > max {
        s.push_str(&format!(" and {} more", items.len() - max));
    }
    s
}

/// Why a trailer's watch of this app cannot be judged, in the audit's vocabulary: the judge's
/// [`Unwatchable`], refined where a finer name helps (OCI, several sources).
pub fn unwatchable_code(u: &Unwatchable) -> &'static str {
    match u {
        Unwatchable::NotFromRepo { sources, .. } => {
            if !sources.is_empty() && sources.iter().all(|s| s.starts_with("oci://")) {
                "oci"
            } else if sources.len() > 1 {
                "multi_source_without_repo"
            } else {
                "other_repository"
            }
        }
        Unwatchable::HelmChart { .. } => "chart",
        Unwatchable::NotGitRevision { revision, .. } if revision.starts_with("sha256:") => "oci",
        Unwatchable::NotGitRevision { .. } => "not_git_revision",
        Unwatchable::OtherBranch { .. } => "other_branch",
        Unwatchable::SourceHydrator { .. } => "source_hydrator",
        Unwatchable::AmbiguousApp { .. } => "ambiguous_name",
        Unwatchable::AppMissing { .. } => "missing",
        Unwatchable::MutableTag { .. } => "mutable_tag",
    }
}

/// A few words for the table.
pub fn unwatchable_short(u: &Unwatchable) -> String {
    match u {
        Unwatchable::NotFromRepo { sources, .. } => match unwatchable_code(u) {
            "oci" => format!("OCI source {}", shown_list(sources, 2)),
            "multi_source_without_repo" => {
                format!("{} sources, none the repository", sources.len())
            }
            _ => format!("other repository {}", shown_list(sources, 2)),
        },
        Unwatchable::HelmChart { chart, .. } => format!("chart {chart}"),
        Unwatchable::NotGitRevision { revision, .. } => format!("revision {revision}"),
        Unwatchable::OtherBranch { target, .. } => format!("tracks {target}"),
        Unwatchable::SourceHydrator { .. } => "source hydrator".into(),
        Unwatchable::AmbiguousApp { app, namespaces } => {
            format!("name {app} in {} namespaces", namespaces.len())
        }
        Unwatchable::AppMissing { .. } => "missing".into(),
        Unwatchable::MutableTag { .. } => "mutable tag".into(),
    }
}

/// One app's line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppAudit {
    pub namespace: String,
    pub name: String,
    /// `None`: a trailer's watch of it can be judged.
    pub unwatchable: Option<Unwatchable>,
    /// Empty: it may be armed.
    pub not_arm_ready: Vec<NotArmReady>,
    /// Worth knowing, blocking nothing (Image Updater's git write-back).
    pub notes: Vec<String>,
}

impl AppAudit {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
    pub fn watchable(&self) -> bool {
        self.unwatchable.is_none()
    }
    pub fn arm_ready(&self) -> bool {
        self.not_arm_ready.is_empty()
    }
}

/// Audit one app. `name_in` are the namespaces where an Application of this name exists (this
/// one's included): a bare name in several cannot be named by a trailer without its namespace.
pub fn audit_app(
    snap: &AppSnapshot,
    facts: &ArmFacts,
    config: &JudgeConfig,
    name_in: &[String],
) -> AppAudit {
    let mut unwatchable = unwatchable(snap, config);
    if unwatchable.is_none() && name_in.len() > 1 {
        unwatchable = Some(Unwatchable::AmbiguousApp {
            app: snap.name.clone(),
            namespaces: name_in.to_vec(),
        });
    }
    let mut not_arm_ready = Vec::new();
    if unwatchable.is_some() {
        not_arm_ready.push(NotArmReady::Unwatchable);
    }
    let mut notes = Vec::new();
    for u in &facts.image_updater {
        if u.writes_to_cluster() {
            not_arm_ready.push(NotArmReady::ImageUpdaterInCluster {
                by: u.by.clone(),
                method: u.method.clone(),
            });
        } else {
            notes.push(format!(
                "Argo CD Image Updater ({}) commits image updates to git ({}): it may commit the newer tag again after a revert unless the tag is pinned",
                u.by, u.method
            ));
        }
    }
    match facts.automated {
        None => not_arm_ready.push(NotArmReady::NoAutomatedSync),
        Some(a) => {
            if a.prune {
                not_arm_ready.push(NotArmReady::AutomatedPrune);
            }
            if !a.self_heal {
                not_arm_ready.push(NotArmReady::SelfHealOff);
            }
        }
    }
    if !facts.child_apps.is_empty() {
        not_arm_ready.push(NotArmReady::AppOfApps {
            children: facts.child_apps.clone(),
        });
    }
    AppAudit {
        namespace: snap.namespace.clone(),
        name: snap.name.clone(),
        unwatchable,
        not_arm_ready,
        notes,
    }
}

/// The namespaces each bare name is found in, for [`audit_app`]'s `name_in`.
pub fn namespaces_by_name<'a>(
    apps: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> BTreeMap<String, Vec<String>> {
    let mut by: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (ns, name) in apps {
        let seen = by.entry(name.to_string()).or_default();
        if !seen.iter().any(|s| s == ns) {
            seen.push(ns.to_string());
        }
    }
    by.values_mut().for_each(|v| v.sort());
    by
}

/// One reason as JSON shows it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ReasonJson {
    pub code: &'static str,
    pub message: String,
}

impl AppAudit {
    pub fn watchable_reasons(&self) -> Vec<ReasonJson> {
        self.unwatchable
            .iter()
            .map(|u| ReasonJson {
                code: unwatchable_code(u),
                message: u.to_string(),
            })
            .collect()
    }
    pub fn arm_ready_reasons(&self) -> Vec<ReasonJson> {
        self.not_arm_ready
            .iter()
            .map(|r| ReasonJson {
                code: r.code(),
                message: r.to_string(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{Health, ResourceHealthSource, SourceFacts, SourcePaths};

    fn snap(ns: &str, name: &str, source: SourceFacts) -> AppSnapshot {
        AppSnapshot {
            namespace: ns.into(),
            name: name.into(),
            source,
            sync_status: "Synced".into(),
            sync_revision: "a".repeat(40),
            health: Health::Healthy,
            health_message: String::new(),
            operation_running: false,
            last_operation: None,
            unhealthy_resources: Vec::new(),
            resource_health_source: ResourceHealthSource::Application,
            health_stale: false,
            automated_sync: true,
            reach_candidates: Vec::new(),
            compared_elsewhere: None,
            comparison_error: None,
            source_hydrator: false,
            inputs: Default::default(),
            resources: Vec::new(),
        }
    }

    fn from_repo(target: &str, chart: Option<&str>) -> SourceFacts {
        SourceFacts::FromRepo {
            target_revisions: vec![target.into()],
            chart: chart.map(Into::into),
            revisions: Vec::new(),
            paths: SourcePaths::Known(vec!["apps/web".into()]),
        }
    }

    fn config() -> JudgeConfig {
        JudgeConfig::new("https://git.example/deploy.git", "main", true)
    }

    fn safe() -> ArmFacts {
        ArmFacts {
            automated: Some(AutoSync {
                prune: false,
                self_heal: true,
            }),
            ..ArmFacts::default()
        }
    }

    #[test]
    fn a_git_app_without_prune_with_self_heal_is_watchable_and_arm_ready() {
        let a = audit_app(
            &snap("argocd", "web", from_repo("main", None)),
            &safe(),
            &config(),
            &["argocd".into()],
        );
        assert!(a.watchable(), "{a:?}");
        assert!(a.arm_ready(), "{a:?}");
    }

    #[test]
    fn each_structural_reason_is_named() {
        let cases = [
            (from_repo("main", Some("redis")), "chart"),
            (from_repo("release", None), "other_branch"),
            (
                SourceFacts::NotFromRepo {
                    repos: vec!["oci://ghcr.io/acme/charts".into()],
                },
                "oci",
            ),
            (
                SourceFacts::NotFromRepo {
                    repos: vec![
                        "https://a.example/x.git".into(),
                        "https://b.example/y.git".into(),
                    ],
                },
                "multi_source_without_repo",
            ),
            (
                SourceFacts::NotFromRepo {
                    repos: vec!["https://a.example/x.git".into()],
                },
                "other_repository",
            ),
        ];
        for (source, code) in cases {
            let a = audit_app(&snap("argocd", "x", source), &safe(), &config(), &[]);
            let reasons = a.watchable_reasons();
            assert_eq!(reasons.len(), 1, "{a:?}");
            assert_eq!(reasons[0].code, code, "{a:?}");
            assert_eq!(a.not_arm_ready, vec![NotArmReady::Unwatchable]);
        }
        let mut hydrated = snap("argocd", "h", from_repo("main", None));
        hydrated.source_hydrator = true;
        let a = audit_app(&hydrated, &safe(), &config(), &[]);
        assert_eq!(a.watchable_reasons()[0].code, "source_hydrator");
    }

    #[test]
    fn a_bare_name_in_two_namespaces_is_ambiguous() {
        let names = namespaces_by_name([("team-b", "web"), ("team-a", "web"), ("team-a", "api")]);
        assert_eq!(
            names["web"],
            vec!["team-a".to_string(), "team-b".to_string()]
        );
        let a = audit_app(
            &snap("team-a", "web", from_repo("main", None)),
            &safe(),
            &config(),
            &names["web"],
        );
        assert_eq!(a.watchable_reasons()[0].code, "ambiguous_name");
        assert!(
            a.watchable_reasons()[0]
                .message
                .contains("app=<namespace>/web")
        );
    }

    #[test]
    fn each_arm_reason_is_named_and_git_write_back_is_only_a_note() {
        let facts = ArmFacts {
            automated: Some(AutoSync {
                prune: true,
                self_heal: false,
            }),
            image_updater: vec![
                ImageUpdaterUse {
                    by: "annotations".into(),
                    method: "argocd".into(),
                },
                ImageUpdaterUse {
                    by: "ImageUpdater argocd/all".into(),
                    method: "git:secret:argocd/creds".into(),
                },
            ],
            child_apps: vec!["argocd/a".into(), "argocd/b".into()],
        };
        let a = audit_app(
            &snap("argocd", "root", from_repo("main", None)),
            &facts,
            &config(),
            &[],
        );
        let codes: Vec<_> = a.not_arm_ready.iter().map(|r| r.code()).collect();
        assert_eq!(
            codes,
            [
                "image_updater_argocd_write_back",
                "automated_prune",
                "self_heal_off",
                "app_of_apps"
            ]
        );
        assert_eq!(a.notes.len(), 1);
        assert!(a.notes[0].contains("git:secret:argocd/creds"));
        let manual = ArmFacts::default();
        let a = audit_app(
            &snap("argocd", "m", from_repo("main", None)),
            &manual,
            &config(),
            &[],
        );
        assert_eq!(a.not_arm_ready, vec![NotArmReady::NoAutomatedSync]);
    }

    #[test]
    fn an_unknown_write_back_method_fails_closed() {
        for (method, cluster) in [
            ("argocd", true),
            ("", true),
            ("kustomize?", true),
            ("git", false),
            ("git:secret:a/b", false),
        ] {
            let u = ImageUpdaterUse {
                by: "annotations".into(),
                method: method.into(),
            };
            assert_eq!(u.writes_to_cluster(), cluster, "{method}");
        }
    }
}
