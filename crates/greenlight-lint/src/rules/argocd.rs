//! Argo CD Applications (and ApplicationSet templates) whose settings make a watchdog's revert
//! dangerous: automated sync with prune, and Image Updater writing back only to the cluster.
//! Must never: treat `automated: {enabled: false}` as automated sync (Argo CD's
//! `IsAutomatedSyncEnabled`: `automated != nil && (enabled == nil || *enabled)`).

use super::{Check, Docs, Emit, Rule, entry_span, key_value_span};
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
               with no method (`argocd` is the default).",
        why: "With the `argocd` method the new image tag lives only in the Application's parameter \
              overrides in the cluster, not in git. git no longer describes what runs: a revert of \
              the last commit does not revert the image, a re-created Application silently goes \
              back to the old image, and a post-deploy check against git compares the wrong tag.",
        example: "metadata:\n  annotations:\n    argocd-image-updater.argoproj.io/image-list: web=registry.example/web\n",
        fix: "Set `argocd-image-updater.argoproj.io/write-back-method: git` so every update is a \
              commit (reviewable and revertible).",
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
                "Argo CD Image Updater writes back with method `argocd`: new image tags live only in the cluster, \
                 so git no longer says what runs and a revert does not revert the image"
                    .to_string(),
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
