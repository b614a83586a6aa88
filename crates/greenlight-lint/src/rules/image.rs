//! GL001, GL002 and GL003: container images with a mutable or missing tag, (off by default)
//! images not pinned by digest, and references that are placeholders or invalid. Reference parsing and the mutable-tag policy are `greenlight_core::image`'s — the
//! same judge `greenlight guard image` uses, so lint and guard can never disagree.
//! Must never: split an image on its last `:` (that reads `host:5000/app` as tag `5000/app`).

use super::{Check, Docs, Emit, Rule, key_value_span};
use crate::diagnostic::Severity;
use crate::object::{DeployImage, Object, Workload};
use crate::yaml::{Node, Span};
use greenlight_core::image::{ImageRef, TagVerdict};

pub use greenlight_core::image::TagPolicy;

pub const MUTABLE_TAG: Rule = Rule {
    id: "GL001",
    name: "mutable-image-tag",
    severity: Severity::Error,
    default_enabled: true,
    summary: "A container image uses a mutable tag (latest, main, alpine, …) or no tag",
    docs: Docs {
        what: "Flags every container, init container and ephemeral container image, in every pod \
               template (Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController, \
               OpenShift DeploymentConfig, Job, CronJob, Pod, Argo Rollout, Experiment and AnalysisTemplate job templates, \
               JobSet and LeaderWorkerSet), and every kustomization `images[].newTag`, whose tag \
               is mutable or missing (which means `latest`). Mutable: `latest`, `main`, \
               `master`, `stable`, `edge`, `[lint] mutable-tags` in `.greenlight.toml`, and any \
               tag that names no version — one without a digit (`alpine`, `stable-alpine`, \
               `mainline`) or ending in `-latest` — unless `[lint] immutable-tags` declares it. \
               A tag that names no version but is no known floating name (a part such as \
               `latest`, `main`, `stable`, `edge`, `alpine`, `slim`, `nightly`, `dev`, a \
               distribution codename, or a branch-like `feature-…`) is a `warning`: \
               `argoproj/rollouts-demo:blue` may be pushed once. A digest (`app@sha256:…`, also \
               `app:v1@sha256:…`, or a kustomize `digest`) is never flagged. A registry port is \
               not a tag: `host:5000/app` has no tag and is flagged. References that are not \
               valid yet (placeholders, templates) are GL003's. A container in a file that \
               the run's kustomizations render (through `resources`, from each kustomization \
               no other includes) is judged as written only when some rendering keeps its \
               tag: when every one replaces it (`images[]` with `newTag` or `digest`, matched \
               by name, after any `newName`), those entries are judged instead. An entry with \
               only `newName` keeps the container's tag and is no finding of its own. A \
               container whose image a file of the run replaces at deploy time is reported as \
               `info`, its message naming that file: a `skaffold.yaml` (`apiVersion: \
               skaffold/…`) that builds the image (`build.artifacts[].image`, also under \
               `profiles[]`), or a kustomization whose `images[]` entry of that name sets \
               `newTag` or `digest`, or nothing but the name (the place a deploy-time \
               `kustomize edit set image` fills), in the container's directory or above it.",
        why: "The same tag can point at new content. Redeploying `app:latest` renders an identical \
              pod spec, so Kubernetes creates no new ReplicaSet and pulls nothing: helm reports \
              success, `rollout status` says complete, a \"running image contains the tag\" check \
              passes — and production still runs the old build.",
        example: "containers:\n- name: web\n  image: registry.example/web:latest\n",
        fix: "Deploy an immutable tag such as `sha-<short-sha>`, or pin the digest \
              (`greenlight guard image --resolve <ref>` prints `<ref>@sha256:…`).",
    },
    check: Check::Object(check_mutable),
};

pub const NOT_PINNED: Rule = Rule {
    id: "GL002",
    name: "image-not-pinned-by-digest",
    severity: Severity::Warning,
    default_enabled: false,
    summary: "A container image is not pinned by digest (off by default)",
    docs: Docs {
        what: "Flags every image without an `@sha256:` digest, whatever its tag. Off by default: \
               enable it with `--select GL002` or `[lint] extend-select = [\"GL002\"]`.",
        why: "Even a version tag can be pushed again. Only a digest names exactly one image, so \
              what was reviewed is what runs, and a post-deploy check can compare the digest in \
              git with the `imageID` of the running pods.",
        example: "image: registry.example/web:1.4.2\n",
        fix: "Pin the digest: `registry.example/web:1.4.2@sha256:…` (`greenlight guard image \
              --resolve registry.example/web:1.4.2` prints it).",
    },
    check: Check::Workload(check_not_pinned),
};

pub const INVALID_REFERENCE: Rule = Rule {
    id: "GL003",
    name: "invalid-image-reference",
    severity: Severity::Error,
    default_enabled: true,
    summary: "An image reference is a placeholder or not a valid reference",
    docs: Docs {
        what: "Flags an image (wherever GL001 reads them) that still holds a placeholder — \
               `<DOCKER_REPO>/app:1.0`, `gcr.io/PROJECT_ID/app`, `${IMAGE}`, `{{ .Values.image }}` \
               — as a `warning`, and any other reference that does not follow the image \
               reference grammar (whitespace, uppercase repository, a bad tag or digest) as an \
               `error`.",
        why: "Kubernetes accepts any image string, and the kubelet then fails to pull it \
              (InvalidImageName, ErrImagePull): the pod never starts, and a rollout that needs it \
              stalls. A placeholder is fine in a file that is rendered before it is applied, but \
              then the rendered output is what should be linted; a reference that cannot parse \
              can never be pulled.",
        example: "containers:\n- name: chatbot\n  image: <DOCKER_REPO>/chatbot:1.0\n",
        fix: "Substitute the placeholder before applying (kustomize `images`, Helm values, \
              envsubst) and lint the rendered output, or write a valid reference: \
              `[registry/]repository[:tag][@sha256:digest]`.",
    },
    check: Check::Object(check_invalid),
};

/// One place an image reference is written: a container's `image`, or a kustomization's
/// `images[]` entry (`newName` / `newTag`, composed as kustomize composes them).
struct Site {
    /// What the message names: ``container `web` `` or ``kustomize image `app` ``.
    who: String,
    /// A container whose every rendering by the run's kustomizations replaces its tag
    /// (`images[].newTag` / `digest`): GL001 judges those entries instead.
    retagged: bool,
    /// The reference as it will be pulled.
    text: String,
    span: Span,
    /// The image scalar itself (a container's `image`), where `--fix --resolve` pins it.
    value_span: Option<Span>,
    field: String,
    /// A container whose image name a file of the run replaces at deploy time (skaffold,
    /// kustomize): GL001 says so and reports it as `info`.
    deployed: Option<DeployImage>,
}

/// The name of a reference: without its digest and tag (a registry port is no tag).
fn image_name(reference: &str) -> &str {
    let without_digest = reference.split('@').next().unwrap_or(reference);
    match without_digest.rfind(':') {
        Some(c) if !without_digest[c + 1..].contains('/') => &without_digest[..c],
        _ => without_digest,
    }
}

fn sites(obj: &Object) -> Vec<Site> {
    let mut out = Vec::new();
    for w in Workload::all(obj) {
        for c in w.all_containers() {
            let Some(e) = c.node.entry("image") else {
                continue;
            };
            let Some(text) = e.value.as_str() else {
                continue;
            };
            let text_t = text.trim();
            out.push(Site {
                retagged: !obj.kustomize_renders.is_empty()
                    && obj
                        .kustomize_renders
                        .iter()
                        .all(|r| retagged_by(text_t, &r.images)),
                who: format!("container `{}`", c.name),
                text: text.trim().to_string(),
                span: key_value_span(&e.key, &e.value),
                value_span: Some(e.value.span),
                field: format!("{}.image", c.path),
                deployed: obj
                    .deploy_images
                    .iter()
                    .find(|d| d.name == image_name(text_t) && d.covers(obj.file))
                    .cloned(),
            });
        }
    }
    if obj.is_kustomization() {
        let images = obj.root.get("images").map(Node::as_seq).unwrap_or_default();
        for (i, img) in images.iter().enumerate() {
            // A digest replaces the tag: the entry is pinned.
            if img.get("digest").is_some_and(|d| !d.is_null()) {
                continue;
            }
            let name = img.get("name").and_then(Node::as_str).unwrap_or("?");
            let new_name = img.get("newName").and_then(Node::as_str);
            let at = match (img.entry("newTag"), img.entry("newName")) {
                (Some(t), _) if !t.value.is_null() => Some((t, "newTag")),
                (_, Some(n)) if !n.value.is_null() => Some((n, "newName")),
                _ => None,
            };
            let Some((e, key)) = at else {
                continue;
            };
            let Some(value) = e.value.as_str() else {
                continue;
            };
            let text = match key {
                "newTag" => format!("{}:{}", new_name.unwrap_or(name).trim(), value.trim()),
                _ => value.trim().to_string(),
            };
            out.push(Site {
                retagged: false,
                who: format!("kustomize image `{name}`"),
                text,
                span: key_value_span(&e.key, &e.value),
                value_span: None,
                field: format!("images[{i}].{key}"),
                deployed: None,
            });
        }
    }
    out
}

/// What a finding on a container adds when a file of the run replaces its image at deploy
/// time; empty otherwise.
fn deployed_note(site: &Site) -> String {
    match &site.deployed {
        Some(d) if d.tool == "skaffold" => format!(
            " (but {} builds `{}` at `{}` and replaces this reference at deploy time: lint what \
             `skaffold render` writes)",
            d.file, d.name, d.field
        ),
        Some(d) if d.name_only => format!(
            " (but the kustomization {} lists `{}` at `{}` with no tag, the place a deploy-time \
             `kustomize edit set image` fills: lint what it renders)",
            d.file, d.name, d.field
        ),
        Some(d) => format!(
            " (but the kustomization {} sets `{}` at `{}`, so `kustomize build` replaces it: \
             lint what it renders)",
            d.file, d.name, d.field
        ),
        None => String::new(),
    }
}

/// Whether kustomize `images` lists (innermost first) replace the tag of `reference`: an
/// entry whose `name` is the image's name (as renamed by earlier entries' `newName`) sets a
/// `newTag` or a `digest`.
fn retagged_by(reference: &str, images: &[(&str, &Node)]) -> bool {
    let without_digest = reference.split('@').next().unwrap_or(reference);
    let mut name = image_name(without_digest).to_string();
    let mut retagged = false;
    for (_, list) in images {
        for entry in list.as_seq() {
            if entry.get("name").and_then(Node::as_str).map(str::trim) != Some(name.as_str()) {
                continue;
            }
            if entry.get("newTag").is_some() || entry.get("digest").is_some() {
                retagged = true;
            }
            if let Some(n) = entry.get("newName").and_then(Node::as_str) {
                name = n.trim().to_string();
            }
        }
    }
    retagged
}

/// A placeholder left in a reference: what it is and the text that shows it.
pub(crate) fn placeholder(text: &str) -> Option<(&'static str, String)> {
    let between = |open: &str, close: &str| -> Option<String> {
        let i = text.find(open)?;
        let rest = &text[i..];
        let mut end = rest.find(close).map_or(rest.len(), |j| j + close.len());
        // `<<PROJECT>>`: the closing run as long as it goes.
        while rest[end..].starts_with(close) && !close.is_empty() {
            end += close.len();
        }
        Some(rest[..end].to_string())
    };
    if let Some(t) = between("{{", "}}") {
        return Some(("a template expression", t));
    }
    if let Some(t) = between("${", "}").or_else(|| between("$(", ")")) {
        return Some(("a variable", t));
    }
    if let Some(i) = text.find('$') {
        let var: String = text[i + 1..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        return Some(("a variable", format!("${var}")));
    }
    if let Some(t) = between("<", ">") {
        return Some(("a placeholder", t));
    }
    // An all-capitals word in the name (registry and path): `PROJECT_ID`, `AWS_ACCOUNT_ID`,
    // `REGISTRY`. Repositories are lowercase and real hostnames are not written in capitals.
    let name_end = text.find('@').unwrap_or(text.len());
    let name = match text[..name_end].rfind(':') {
        Some(c) if !text[c + 1..name_end].contains('/') => &text[..c],
        _ => &text[..name_end],
    };
    name.split(['/', '.', ':'])
        .find(|w| {
            w.bytes().filter(u8::is_ascii_uppercase).count() >= 2
                && w.bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
                && (w.contains('_') || w.len() >= 4)
        })
        .map(|w| ("a placeholder", w.to_string()))
}

fn check_mutable(obj: &Object, emit: &mut Emit) {
    for site in sites(obj) {
        if site.retagged || placeholder(&site.text).is_some() {
            continue;
        }
        // An entry with only `newName` keeps the container's own tag, which is judged where
        // the container is written.
        if site.field.ends_with(".newName") {
            continue;
        }
        // Invalid references are GL003's.
        let Ok(image) = ImageRef::parse(&site.text) else {
            continue;
        };
        let verdict = emit.settings.tag_policy.judge(&image);
        if verdict.is_acceptable() {
            continue;
        }
        // A word that names no version but is no known floating name (`blue`) may well be
        // pushed once per build: a warning, which `[lint] immutable-tags` silences.
        if let TagVerdict::MutableTag { tag } = &verdict
            && !emit.settings.tag_policy.is_known_floating(tag)
        {
            emit.at(
                obj,
                site.span,
                &site.field,
                format!(
                    "{}: `{}` uses the tag `{tag}`, which names no version: if it is ever pushed \
                     again, a redeploy renders an identical pod spec and Kubernetes rolls out nothing{}",
                    site.who,
                    image.as_str(),
                    deployed_note(&site)
                ),
            )
            .severity(if site.deployed.is_some() {
                Severity::Info
            } else {
                Severity::Warning
            })
            .fix(format!(
                "deploy a version, a `sha-<short-sha>` tag or the digest (`greenlight guard image \
                 --resolve {}`), or, if `{tag}` is never pushed twice, declare it under [lint] \
                 `immutable-tags` in .greenlight.toml",
                image.as_str()
            ));
            if let (Some(f), Some(span)) = (emit.findings.last_mut(), site.value_span) {
                f.edit(
                    crate::fix::Edit::Pin {
                        span,
                        reference: site.text.clone(),
                    },
                    0,
                );
            }
            continue;
        }
        let problem = verdict.problem(&image).unwrap_or_default();
        let f = emit.at(
            obj,
            site.span,
            &site.field,
            format!("{}: {problem}{}", site.who, deployed_note(&site)),
        );
        if site.deployed.is_some() {
            f.severity(Severity::Info);
        }
        if let Some(fix) = verdict.fix(&image) {
            f.fix(fix);
        }
        // `--fix --resolve`: the reference pinned to the digest its registry serves.
        if let Some(span) = site.value_span {
            f.edit(
                crate::fix::Edit::Pin {
                    span,
                    reference: site.text.clone(),
                },
                0,
            );
        }
    }
}

fn check_invalid(obj: &Object, emit: &mut Emit) {
    for site in sites(obj) {
        if let Some((what, token)) = placeholder(&site.text) {
            let text = site.text.escape_debug().to_string();
            let holds = if token == site.text {
                format!("`{text}` is {what}")
            } else {
                format!("`{text}` holds {what}, `{token}`")
            };
            emit.at(
                obj,
                site.span,
                &site.field,
                format!(
                    "{}: {holds}, so it is not an image reference yet: applied as written, the pod \
                     cannot pull its image",
                    site.who
                ),
            )
            .severity(Severity::Warning)
            .fix("substitute it before applying (kustomize `images`, Helm values, envsubst) and lint the rendered output");
            continue;
        }
        if let Err(err) = ImageRef::parse(&site.text) {
            emit.at(obj, site.span, &site.field, format!("{}: {err}", site.who))
                .fix(
                    "write a valid image reference: `[registry/]repository[:tag][@sha256:digest]`",
                );
        }
    }
}

fn check_not_pinned(w: &Workload, emit: &mut Emit) {
    for c in w.all_containers() {
        let Some(e) = c.node.entry("image") else {
            continue;
        };
        let Some(text) = e.value.as_str() else {
            continue;
        };
        // Placeholders and invalid references are GL003's.
        if placeholder(text.trim()).is_some() {
            continue;
        }
        let Ok(image) = ImageRef::parse(text.trim()) else {
            continue;
        };
        if emit.settings.tag_policy.judge(&image) == TagVerdict::PinnedByDigest {
            continue;
        }
        emit.at(
            w.object,
            key_value_span(&e.key, &e.value),
            &format!("{}.image", c.path),
            format!("container `{}`: `{}` is not pinned by digest; the tag can be pushed again", c.name, image.as_str()),
        )
        .fix(format!(
            "pin the digest: `{}@sha256:<digest>` (`greenlight guard image --resolve {}` prints it)",
            image.as_str(),
            image.as_str()
        ));
    }
}
