//! What `greenlight audit` reads of an Application beyond the judge's snapshot
//! ([`greenlight_core::audit::ArmFacts`]): its automated sync policy, Argo CD Image Updater's
//! hold on it — the legacy annotations, and the v1 `ImageUpdater` resources that select it —
//! and the Applications among its own resources (an app-of-apps parent). Pure, as the
//! reduction is.
//!
//! Image Updater's facts (its `pkg/argocd/annotations.go`, `api/v1alpha1/imageupdater_types.go`
//! and `docs/configuration/applications.md`):
//! - annotations: `argocd-image-updater.argoproj.io/image-list` marks the app; its
//!   `…/write-back-method` is `argocd` when absent, else `argocd`, `git` or `git:<creds>`;
//! - an `ImageUpdater` (`argocd-image-updater.argoproj.io/v1alpha1`) selects the Applications
//!   of one namespace — `spec.namespace` in the first v1 releases, the resource's own namespace
//!   once that field was removed — whose name matches an `applicationRefs[].namePattern` (a
//!   glob) and whose labels match its `labelSelectors`; the write-back method is the ref's
//!   `writeBackConfig.method`, else the spec's, else `argocd`.
//!
//! What cannot be read is counted as selecting, never as not: a pattern or selector greenlight
//! does not understand makes the app "managed by Image Updater", so the audit fails closed.

use crate::model::{Application, ObjectMeta};
use greenlight_core::audit::{ArmFacts, AutoSync, ImageUpdaterUse};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The annotation that puts an app under Image Updater's legacy (annotation) configuration.
pub const IMAGE_LIST: &str = "argocd-image-updater.argoproj.io/image-list";
/// Its write-back method; `argocd` when absent.
pub const WRITE_BACK_METHOD: &str = "argocd-image-updater.argoproj.io/write-back-method";

/// The API group, version and plural of Image Updater's custom resource.
pub const IMAGE_UPDATER_GROUP: &str = "argocd-image-updater.argoproj.io";
pub const IMAGE_UPDATER_VERSION: &str = "v1alpha1";
pub const IMAGE_UPDATER_PLURAL: &str = "imageupdaters";

/// An `ImageUpdater` resource, the fields the audit reads.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ImageUpdater {
    pub metadata: ObjectMeta,
    pub spec: ImageUpdaterSpec,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ImageUpdaterSpec {
    /// Removed in later v1 releases (the resource's namespace is used instead).
    pub namespace: Option<String>,
    pub write_back_config: Option<WriteBackConfig>,
    pub application_refs: Option<Vec<ApplicationRef>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WriteBackConfig {
    pub method: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ApplicationRef {
    pub name_pattern: Option<String>,
    pub label_selectors: Option<LabelSelector>,
    pub write_back_config: Option<WriteBackConfig>,
}

/// Kubernetes' `metav1.LabelSelector`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LabelSelector {
    pub match_labels: Option<BTreeMap<String, String>>,
    pub match_expressions: Option<Vec<LabelRequirement>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LabelRequirement {
    pub key: String,
    pub operator: String,
    pub values: Option<Vec<String>>,
}

impl ImageUpdater {
    /// `namespace/name`, as the audit names it.
    pub fn key(&self) -> String {
        format!("{}/{}", self.metadata.namespace, self.metadata.name)
    }

    /// The namespace whose Applications it selects.
    fn target_namespace(&self) -> &str {
        match self.spec.namespace.as_deref() {
            Some(ns) if !ns.is_empty() => ns,
            _ => &self.metadata.namespace,
        }
    }

    /// The write-back method it applies to `app`, or `None` when it does not select it.
    pub fn selects(&self, app: &Application) -> Option<String> {
        if app.metadata.namespace != self.target_namespace() {
            return None;
        }
        let spec_method = self
            .spec
            .write_back_config
            .as_ref()
            .and_then(|w| w.method.clone());
        for r in self.spec.application_refs.iter().flatten() {
            let named = match r.name_pattern.as_deref() {
                // A ref without a pattern is invalid in the CRD; count it as selecting.
                None => true,
                Some(p) => glob(p, &app.metadata.name).unwrap_or(true),
            };
            let labelled = r
                .label_selectors
                .as_ref()
                .is_none_or(|s| s.matches(&app.metadata.labels));
            if named && labelled {
                let method = r
                    .write_back_config
                    .as_ref()
                    .and_then(|w| w.method.clone())
                    .or_else(|| spec_method.clone())
                    .filter(|m| !m.trim().is_empty())
                    .unwrap_or_else(|| "argocd".to_string());
                return Some(method);
            }
        }
        None
    }
}

impl LabelSelector {
    /// Kubernetes' semantics; an operator it does not know matches (fail closed).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let by_labels = self
            .match_labels
            .iter()
            .flatten()
            .all(|(k, v)| labels.get(k) == Some(v));
        let by_exprs = self.match_expressions.iter().flatten().all(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            let value = labels.get(&e.key);
            match e.operator.as_str() {
                "In" => value.is_some_and(|v| values.contains(v)),
                "NotIn" => value.is_none_or(|v| !values.contains(v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                _ => true,
            }
        });
        by_labels && by_exprs
    }
}

/// A glob pattern Go's `path.Match` would refuse (`ErrBadPattern`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadPattern;

/// Go's `path.Match`: `*` any run of characters but `/`, `?` one, `[…]` a class (`^` negates,
/// `a-z` ranges), `\` escapes. `Err` for a malformed pattern.
pub fn glob(pattern: &str, name: &str) -> Result<bool, BadPattern> {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    glob_at(&p, &n)
}

fn glob_at(p: &[char], n: &[char]) -> Result<bool, BadPattern> {
    let Some(&c) = p.first() else {
        return Ok(n.is_empty());
    };
    match c {
        '*' => {
            // The rest is tried at least once (with every name), so a malformed rest is `Err`.
            for skip in 0..=n.len() {
                if skip > 0 && n[skip - 1] == '/' {
                    break;
                }
                if glob_at(&p[1..], &n[skip..])? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        '?' => match n.first() {
            Some(&x) if x != '/' => glob_at(&p[1..], &n[1..]),
            _ => check_rest(&p[1..]),
        },
        '[' => {
            let (matched, rest) = class(&p[1..], n.first().copied())?;
            if matched && n.first().is_some_and(|&x| x != '/') {
                glob_at(rest, &n[1..])
            } else {
                check_rest(rest)
            }
        }
        '\\' => {
            let &lit = p.get(1).ok_or(BadPattern)?;
            if n.first() == Some(&lit) {
                glob_at(&p[2..], &n[1..])
            } else {
                check_rest(&p[2..])
            }
        }
        lit => {
            if n.first() == Some(&lit) {
                glob_at(&p[1..], &n[1..])
            } else {
                check_rest(&p[1..])
            }
        }
    }
}

/// A mismatch: still `Err` when the rest of the pattern is malformed, as Go reports it.
fn check_rest(p: &[char]) -> Result<bool, BadPattern> {
    glob_at(p, &[]).map(|_| false)
}

/// A class after its `[`: whether `c` is in it, and the pattern after its `]`.
fn class(p: &[char], c: Option<char>) -> Result<(bool, &[char]), BadPattern> {
    let (negated, mut i) = match p.first() {
        Some('^') => (true, 1),
        _ => (false, 0),
    };
    let mut hit = false;
    let mut first = true;
    loop {
        let &x = p.get(i).ok_or(BadPattern)?;
        if x == ']' && !first {
            break;
        }
        first = false;
        let (lo, next) = class_char(p, i)?;
        i = next;
        let hi = if p.get(i) == Some(&'-') {
            let (hi, next) = class_char(p, i + 1)?;
            i = next;
            hi
        } else {
            lo
        };
        if lo > hi {
            return Err(BadPattern);
        }
        if c.is_some_and(|c| lo <= c && c <= hi) {
            hit = true;
        }
    }
    Ok((hit != negated, &p[i + 1..]))
}

fn class_char(p: &[char], i: usize) -> Result<(char, usize), BadPattern> {
    match p.get(i) {
        None | Some('-') | Some(']') => Err(BadPattern),
        Some('\\') => p.get(i + 1).map(|&c| (c, i + 2)).ok_or(BadPattern),
        Some(&c) => Ok((c, i + 1)),
    }
}

/// The audit's facts of one app; `updaters` are the `ImageUpdater` resources read (none when
/// they could not be: the caller says so).
pub fn arm_facts(app: &Application, updaters: &[ImageUpdater]) -> ArmFacts {
    let automated = app
        .spec
        .sync_policy
        .as_ref()
        .and_then(|p| p.automated.as_ref())
        .filter(|a| a.enabled != Some(false))
        .map(|a| AutoSync {
            prune: a.prune.unwrap_or(false),
            self_heal: a.self_heal.unwrap_or(false),
        });
    let mut image_updater = Vec::new();
    if app.metadata.annotations.contains_key(IMAGE_LIST) {
        let method = app
            .metadata
            .annotations
            .get(WRITE_BACK_METHOD)
            .map(|m| m.trim().to_string())
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| "argocd".to_string());
        image_updater.push(ImageUpdaterUse {
            by: "annotations".to_string(),
            method,
        });
    }
    for u in updaters {
        if let Some(method) = u.selects(app) {
            image_updater.push(ImageUpdaterUse {
                by: format!("ImageUpdater {}", u.key()),
                method,
            });
        }
    }
    let child_apps = app
        .status
        .resources
        .iter()
        .filter(|r| r.group == "argoproj.io" && r.kind == "Application")
        .map(|r| {
            if r.namespace.is_empty() {
                r.name.clone()
            } else {
                format!("{}/{}", r.namespace, r.name)
            }
        })
        .collect();
    ArmFacts {
        automated,
        image_updater,
        child_apps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn app(v: serde_json::Value) -> Application {
        serde_json::from_value(v).unwrap()
    }

    fn updater(v: serde_json::Value) -> ImageUpdater {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn glob_is_gos_path_match() {
        let ok = |p: &str, n: &str| glob(p, n).unwrap();
        assert!(ok("*", "web"));
        assert!(ok("web-*", "web-eu"));
        assert!(!ok("web-*", "api-eu"));
        assert!(ok("w?b", "web"));
        assert!(!ok("w?b", "wb"));
        assert!(ok("[a-c]pi", "api"));
        assert!(!ok("[^a-c]pi", "api"));
        assert!(ok("\\*x", "*x"));
        assert!(!ok("*", "a/b"));
        assert!(glob("[", "x").is_err());
        assert!(glob("a[", "b").is_err(), "malformed even after a mismatch");
        assert!(glob("[z-a]", "b").is_err());
        assert!(glob("*[", "abc").is_err());
    }

    #[test]
    fn automated_sync_prune_and_self_heal_default_off() {
        let f = arm_facts(
            &app(json!({"spec": {"syncPolicy": {"automated": {}}}})),
            &[],
        );
        assert_eq!(
            f.automated,
            Some(AutoSync {
                prune: false,
                self_heal: false
            })
        );
        let f = arm_facts(
            &app(json!({"spec": {"syncPolicy": {"automated": {"enabled": false, "prune": true}}}})),
            &[],
        );
        assert_eq!(f.automated, None);
        let f = arm_facts(&app(json!({"spec": {"syncPolicy": null}})), &[]);
        assert_eq!(f.automated, None);
    }

    #[test]
    fn annotations_default_to_the_argocd_write_back() {
        let f = arm_facts(
            &app(json!({"metadata": {"annotations": {IMAGE_LIST: "web=ghcr.io/acme/web"}}})),
            &[],
        );
        assert_eq!(
            f.image_updater,
            [ImageUpdaterUse {
                by: "annotations".into(),
                method: "argocd".into()
            }]
        );
        let f = arm_facts(
            &app(json!({"metadata": {"annotations": {
                IMAGE_LIST: "web=ghcr.io/acme/web", WRITE_BACK_METHOD: "git"}}})),
            &[],
        );
        assert_eq!(f.image_updater[0].method, "git");
        // Without the image list, a method annotation alone puts nothing under Image Updater.
        let f = arm_facts(
            &app(json!({"metadata": {"annotations": {WRITE_BACK_METHOD: "argocd"}}})),
            &[],
        );
        assert!(f.image_updater.is_empty());
    }

    #[test]
    fn an_image_updater_selects_by_namespace_pattern_and_labels() {
        let u = updater(json!({
            "metadata": {"name": "eu", "namespace": "argocd"},
            "spec": {
                "writeBackConfig": {"method": "git"},
                "applicationRefs": [
                    {"namePattern": "web-*", "labelSelectors": {"matchLabels": {"tier": "front"}},
                     "writeBackConfig": {"method": "argocd"}},
                    {"namePattern": "api", "labelSelectors": {"matchExpressions": [
                        {"key": "env", "operator": "NotIn", "values": ["dev"]}]}}
                ]
            }
        }));
        let a = |ns: &str, name: &str, labels: serde_json::Value| {
            app(json!({"metadata": {"name": name, "namespace": ns, "labels": labels}}))
        };
        assert_eq!(
            u.selects(&a("argocd", "web-eu", json!({"tier": "front"}))),
            Some("argocd".into())
        );
        assert_eq!(
            u.selects(&a("argocd", "web-eu", json!({"tier": "back"}))),
            None
        );
        assert_eq!(
            u.selects(&a("other", "web-eu", json!({"tier": "front"}))),
            None
        );
        assert_eq!(
            u.selects(&a("argocd", "api", json!({}))),
            Some("git".into())
        );
        assert_eq!(u.selects(&a("argocd", "api", json!({"env": "dev"}))), None);
        // The first v1 releases named the apps' namespace in the spec.
        let old = updater(json!({
            "metadata": {"name": "x", "namespace": "image-updater"},
            "spec": {"namespace": "argocd", "applicationRefs": [{"namePattern": "*"}]}
        }));
        assert_eq!(
            old.selects(&a("argocd", "web", json!({}))),
            Some("argocd".into())
        );
        assert_eq!(old.selects(&a("image-updater", "web", json!({}))), None);
    }

    #[test]
    fn what_cannot_be_read_selects() {
        let u = updater(json!({
            "metadata": {"name": "x", "namespace": "argocd"},
            "spec": {"applicationRefs": [
                {"namePattern": "[", "labelSelectors": {"matchExpressions": [
                    {"key": "k", "operator": "Gt", "values": ["1"]}]}}]}
        }));
        let a = app(json!({"metadata": {"name": "web", "namespace": "argocd"}}));
        assert_eq!(u.selects(&a), Some("argocd".into()));
    }

    #[test]
    fn applications_among_the_resources_make_a_parent() {
        let f = arm_facts(
            &app(
                json!({"metadata": {"name": "root", "namespace": "argocd"}, "status": {"resources": [
                    {"group": "argoproj.io", "kind": "Application", "namespace": "argocd", "name": "web"},
                    {"group": "apps", "kind": "Deployment", "namespace": "prod", "name": "web"},
                    {"group": "argoproj.io", "kind": "AppProject", "namespace": "argocd", "name": "p"}
                ]}}),
            ),
            &[],
        );
        assert_eq!(f.child_apps, ["argocd/web"]);
    }
}
