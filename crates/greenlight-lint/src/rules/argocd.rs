//! Argo CD Applications (and ApplicationSet templates) whose settings make a watchdog's revert
//! dangerous: automated sync with prune, and Image Updater writing back only to the cluster
//! (configured by the Application's annotations, or by an `ImageUpdater` resource).
//! Must never: treat `automated: {enabled: false}` as automated sync (Argo CD's
//! `IsAutomatedSyncEnabled`: `automated != nil && (enabled == nil || *enabled)`).

use super::{Check, Docs, Emit, Rule, entry_span, holder_span, key_value_span};
use crate::diagnostic::Severity;
use crate::object::Object;
use crate::yaml::Node;

pub const AUTOMATED_PRUNE: Rule = Rule {
    id: "GL601",
    name: "argocd-automated-prune",
    severity: Severity::Warning,
    default_enabled: true,
    summary: "An Argo CD Application syncs automatically with prune: true",
    docs: Docs {
        what: "Flags an Argo CD Application, or an ApplicationSet's template, whose \
               `syncPolicy.automated` is present, not `enabled: false`, and sets `prune: true`.",
        why: "With automated prune, whatever disappears from git is deleted from the cluster on the \
              next sync. A bad merge, a path rename or a revert that removes a manifest turns into \
              deleted Deployments, Services or PVC-backed StatefulSets within minutes, with no one \
              approving it; a watchdog's revert becomes deletions too.",
        example: "kind: Application\nspec:\n  syncPolicy:\n    automated:\n      prune: true\n",
        fix: "Survey what prune would delete (a dry run) before enabling it, protect what must \
              never be pruned (`argocd.argoproj.io/sync-options: Prune=false`), and never enable \
              prune in the same change as the pipeline; or sync without prune and prune by hand.",
    },
    check: Check::Object(check_prune),
};

pub const IMAGE_UPDATER_ARGOCD: Rule = Rule {
    id: "GL602",
    name: "argocd-image-updater-argocd-write-back",
    severity: Severity::Warning,
    default_enabled: true,
    summary: "Argo CD Image Updater writes image changes back to the cluster only",
    docs: Docs {
        what: "Flags an Application (or ApplicationSet template) with Argo CD Image Updater \
               annotations whose write-back method is `argocd`: either \
               `argocd-image-updater.argoproj.io/write-back-method: argocd`, or an `image-list` \
               with no method (`argocd` is the default). Also Image Updater's own `ImageUpdater` \
               resource (`argocd-image-updater.argoproj.io/v1alpha1`, Image Updater 1.0 and \
               later), where the method is `spec.writeBackConfig.method`, overridden per \
               `spec.applicationRefs[]` entry by its own `writeBackConfig.method`, and `argocd` \
               when neither sets one: each `method: argocd` that some application reference \
               uses, and once for the resource when references fall back to the default.",
        why: "With the `argocd` method the new image tag lives only in the Application's parameter \
              overrides in the cluster, not in git. git no longer describes what runs: a revert of \
              the last commit does not revert the image, a re-created Application silently goes \
              back to the old image, and a post-deploy check against git compares the wrong tag.",
        example: "metadata:\n  annotations:\n    argocd-image-updater.argoproj.io/image-list: web=registry.example/web\n",
        fix: "Set `argocd-image-updater.argoproj.io/write-back-method: git` (on an \
              `ImageUpdater`: `spec.writeBackConfig.method: git`, or per application reference) \
              so every update is a commit (reviewable and revertible).",
    },
    check: Check::Object(check_image_updater),
};

/// The Application spec and metadata to judge, with their paths: the object itself, or an
/// ApplicationSet's template.
fn app_parts<'a>(
    obj: &Object<'a>,
) -> Option<(
    Option<&'a Node>,
    &'static str,
    Option<&'a Node>,
    &'static str,
)> {
    if obj.is_argo("Application") {
        Some((
            obj.root.get("spec"),
            "spec",
            obj.root.get("metadata"),
            "metadata",
        ))
    } else if obj.is_argo("ApplicationSet") {
        let t = obj.root.at(&["spec", "template"])?;
        Some((
            t.get("spec"),
            "spec.template.spec",
            t.get("metadata"),
            "spec.template.metadata",
        ))
    } else {
        None
    }
}

fn check_prune(obj: &Object, emit: &mut Emit) {
    let Some((Some(spec), spec_path, _, _)) = app_parts(obj) else {
        return;
    };
    let Some(sync) = spec.get("syncPolicy") else {
        return;
    };
    // `automated: {}` (or `automated:` with no value) is automated sync too.
    let Some(auto_entry) = sync.entry("automated") else {
        return;
    };
    let auto = &auto_entry.value;
    if auto.get("enabled").and_then(Node::as_bool) == Some(false) {
        return;
    }
    let Some(prune) = auto.get("prune") else {
        return;
    };
    if prune.as_bool() != Some(true) {
        return;
    }
    let self_heal = auto.get("selfHeal").and_then(Node::as_bool) == Some(true);
    emit.at(
        obj,
        entry_span(auto, "prune").unwrap_or(prune.span),
        &format!("{spec_path}.syncPolicy.automated.prune"),
        format!(
            "automated sync with prune: true{}: anything removed from git (a bad merge, a rename, a revert) is deleted \
             from the cluster on the next sync, without review",
            if self_heal { " and selfHeal" } else { "" }
        ),
    )
    .fix("survey what prune would delete before enabling it, protect critical resources with `Prune=false`, or prune by hand");
}

const UPDATER: &str = "argocd-image-updater.argoproj.io/";

fn check_image_updater(obj: &Object, emit: &mut Emit) {
    if obj.kind == "ImageUpdater" && obj.api_version.starts_with(UPDATER) {
        check_image_updater_resource(obj, emit);
        return;
    }
    let Some((_, _, Some(meta), meta_path)) = app_parts(obj) else {
        return;
    };
    let Some(ann) = meta.get("annotations") else {
        return;
    };
    let method_key = format!("{UPDATER}write-back-method");
    let list_key = format!("{UPDATER}image-list");
    if let Some(e) = ann.entry(&method_key) {
        let method = e.value.as_str().unwrap_or("").trim();
        if method == "argocd" {
            emit.at(
                obj,
                key_value_span(&e.key, &e.value),
                &format!("{meta_path}.annotations[{method_key}]"),
                ARGOCD_METHOD.to_string(),
            )
            .fix(format!("set `{method_key}: git`"));
        }
        return;
    }
    if let Some(e) = ann.entry(&list_key) {
        emit.at(
            obj,
            key_value_span(&e.key, &e.value),
            &format!("{meta_path}.annotations[{list_key}]"),
            "Argo CD Image Updater is enabled with no write-back method, so it uses the default `argocd`: new image tags \
             live only in the cluster, so git no longer says what runs and a revert does not revert the image"
                .to_string(),
        )
        .fix(format!("add `{method_key}: git`"));
    }
}

/// A `writeBackConfig`'s `method`, trimmed, with its entry: `None` when the field is absent,
/// null or empty (the resource's default then applies).
fn write_back_method(config: Option<&Node>) -> Option<(&str, &crate::yaml::Entry)> {
    let e = config?.entry("method")?;
    let m = e.value.as_str()?.trim();
    (!m.is_empty()).then_some((m, e))
}

const ARGOCD_METHOD: &str = "Argo CD Image Updater writes back with method `argocd`: new image tags live only in \
    the cluster, so git no longer says what runs and a revert does not revert the image";

/// Image Updater 1.0's `ImageUpdater` resource: `spec.writeBackConfig.method` is the default
/// for every `spec.applicationRefs[]` entry, which may set its own; with neither, `argocd`.
fn check_image_updater_resource(obj: &Object, emit: &mut Emit) {
    let Some(spec) = obj.root.get("spec") else {
        return;
    };
    let global = write_back_method(spec.get("writeBackConfig"));
    let refs = spec
        .get("applicationRefs")
        .map(Node::as_seq)
        .unwrap_or_default();
    let mut inherit_global = false;
    let mut defaulted: Vec<String> = Vec::new();
    for (i, r) in refs.iter().enumerate() {
        if !r.is_map() {
            continue;
        }
        match write_back_method(r.get("writeBackConfig")) {
            Some(("argocd", e)) => {
                emit.at(
                    obj,
                    key_value_span(&e.key, &e.value),
                    &format!("spec.applicationRefs[{i}].writeBackConfig.method"),
                    ARGOCD_METHOD.to_string(),
                )
                .fix("set `method: git` (or `git:<credentials>`)");
            }
            Some(_) => {}
            None => match global {
                Some(_) => inherit_global = true,
                None => defaulted.push(
                    r.get("namePattern")
                        .and_then(Node::as_str)
                        .map_or_else(|| format!("#{i}"), |p| format!("`{p}`")),
                ),
            },
        }
    }
    if let Some(("argocd", e)) = global
        && inherit_global
    {
        emit.at(
            obj,
            key_value_span(&e.key, &e.value),
            "spec.writeBackConfig.method",
            ARGOCD_METHOD.to_string(),
        )
        .fix("set `spec.writeBackConfig.method: git` (or `git:<credentials>`)");
    }
    if !defaulted.is_empty() {
        let span = spec
            .entry("applicationRefs")
            .map_or_else(|| holder_span(obj, &["spec"]), |e| e.key.span);
        let which = if defaulted.len() == refs.len() {
            "its application references set".to_string()
        } else if let [one] = defaulted.as_slice() {
            format!("application reference {one} sets")
        } else {
            format!("application references {} set", defaulted.join(", "))
        };
        emit.at(
            obj,
            span,
            "spec.writeBackConfig.method",
            format!(
                "Argo CD Image Updater: neither `spec.writeBackConfig` nor {which} a write-back \
                 method, so it uses the default `argocd`: new image tags live only in the cluster, \
                 so git no longer says what runs and a revert does not revert the image"
            ),
        )
        .fix("set `spec.writeBackConfig.method: git` (or `git:<credentials>`)");
    }
}
