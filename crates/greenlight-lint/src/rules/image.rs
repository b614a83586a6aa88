//! GL001 and GL002: container images with a mutable or missing tag, and (off by default) images not pinned
//! by digest. Reference parsing and the mutable-tag policy are `greenlight_core::image`'s — the
//! same judge `greenlight guard image` uses, so lint and guard can never disagree.
//! Must never: split an image on its last `:` (that reads `host:5000/app` as tag `5000/app`).

use super::{Check, Docs, Emit, Rule, key_value_span};
use crate::diagnostic::Severity;
use crate::object::Workload;
use greenlight_core::image::{ImageRef, TagVerdict};

pub use greenlight_core::image::TagPolicy;

pub const MUTABLE_TAG: Rule = Rule {
    id: "GL001",
    name: "mutable-image-tag",
    severity: Severity::Error,
    default_enabled: true,
    summary: "A container image uses a mutable tag (latest, main, …) or no tag",
    docs: Docs {
        what: "Flags every container, init container and ephemeral container image whose tag is \
               mutable (`latest`, `main`, `master`, `stable`, `edge`, plus `[lint] mutable-tags` \
               in `.greenlight.toml`) or missing (which means `latest`). A digest \
               (`app@sha256:…`, also `app:v1@sha256:…`) is never flagged. A registry port is not a \
               tag: `host:5000/app` has no tag and is flagged.",
        why: "The same tag can point at new content. Redeploying `app:latest` renders an identical \
              pod spec, so Kubernetes creates no new ReplicaSet and pulls nothing: helm reports \
              success, `rollout status` says complete, a \"running image contains the tag\" check \
              passes — and production still runs the old build.",
        example: "containers:\n- name: web\n  image: registry.example/web:latest\n",
        fix: "Deploy an immutable tag such as `sha-<short-sha>`, or pin the digest \
              (`greenlight guard image --resolve <ref>` prints `<ref>@sha256:…`).",
    },
    check: Check::Workload(check_mutable),
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

fn check_mutable(w: &Workload, emit: &mut Emit) {
    for c in w.all_containers() {
        let Some(e) = c.node.entry("image") else {
            continue;
        };
        let Some(text) = e.value.as_str() else {
            continue;
        };
        let span = key_value_span(&e.key, &e.value);
        let field = format!("{}.image", c.path);
        let image = match ImageRef::parse(text.trim()) {
            Ok(i) => i,
            Err(err) => {
                // Templated values (`${IMAGE}`, `{{ .Values.image }}`) are not references yet.
                if text.contains('$') || text.contains("{{") {
                    continue;
                }
                emit.at(
                    w.object,
                    span,
                    &field,
                    format!("container `{}`: {err}", c.name),
                )
                .fix(
                    "write a valid image reference: `[registry/]repository[:tag][@sha256:digest]`",
                );
                continue;
            }
        };
        let verdict = emit.settings.tag_policy.judge(&image);
        if verdict.is_acceptable() {
            continue;
        }
        let problem = verdict.problem(&image).unwrap_or_default();
        let f = emit.at(
            w.object,
            span,
            &field,
            format!("container `{}`: {problem}", c.name),
        );
        if let Some(fix) = verdict.fix(&image) {
            f.fix(fix);
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
