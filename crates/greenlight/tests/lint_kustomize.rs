//! `kubectl kustomize <dir> | greenlight lint --kustomize-root <dir> -` with the real kubectl
//! (its built-in kustomize), as the README shows it: findings on the rendered objects land in the
//! kustomization's source files at the offending field's line, and what the overlay's `images`
//! rewrote is what is judged.
//!
//! kubectl comes from `scripts/test` (greenlight-testkit's `kubectl` module finds it); without it
//! the test fails, naming that script — it never skips.

use greenlight_testkit::kubectl;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// A base Deployment: `web`'s tag is pinned here and made mutable by the overlay, `proxy`'s is
/// mutable here and pinned by the overlay; a 20 s preStop sleep over a 10 s grace period.
const BASE_DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 10
      containers:
        - name: web
          image: ghcr.io/acme/web:1.0.0
          lifecycle:
            preStop:
              exec:
                command: [\"sh\", \"-c\", \"sleep 20\"]
        - name: proxy
          image: ghcr.io/acme/proxy:main
";

const BASE_KUSTOMIZATION: &str = "resources:
  - deployment.yaml
";

/// A resource of the overlay's own, with a mutable tag no `images` entry touches.
const OVERLAY_WORKER: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: worker
spec:
  replicas: 3
  strategy:
    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}
  template:
    spec:
      containers:
        - name: worker
          image: ghcr.io/acme/worker:edge
";

const OVERLAY_KUSTOMIZATION: &str = "apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namePrefix: prod-
resources:
  - ../../base
  - worker.yaml
images:
  - name: ghcr.io/acme/web
    newTag: latest
  - name: ghcr.io/acme/proxy
    newTag: 2.4.1
buildMetadata: [originAnnotations]
";

fn greenlight(dir: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_greenlight"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run greenlight");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// The 1-based line of `text` that contains `needle`; exactly one must.
#[track_caller]
fn line_of(text: &str, needle: &str) -> u64 {
    let lines: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(needle))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(lines.len(), 1, "`{needle}` on one line of:\n{text}");
    lines[0] as u64
}

/// Line `n` (1-based) of `text`.
fn line(text: &str, n: u64) -> &str {
    text.lines().nth(n as usize - 1).unwrap_or_default()
}

#[test]
fn real_kubectl_kustomize_output_maps_to_the_source_lines_and_honours_images() {
    let d = tempfile::tempdir().unwrap();
    for (path, text) in [
        ("base/deployment.yaml", BASE_DEPLOYMENT),
        ("base/kustomization.yaml", BASE_KUSTOMIZATION),
        ("overlays/prod/worker.yaml", OVERLAY_WORKER),
        ("overlays/prod/kustomization.yaml", OVERLAY_KUSTOMIZATION),
    ] {
        let p = d.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    let rendered = kubectl::kustomize(d.path(), "overlays/prod");
    let version = kubectl::version();
    // What the mapping stands on: kustomize wrote the origins and applied the overlay's images.
    assert!(
        rendered.contains("config.kubernetes.io/origin")
            && rendered.contains("path: ../../base/deployment.yaml")
            && rendered.contains("path: worker.yaml"),
        "{version}: no origin annotations in:\n{rendered}"
    );
    for image in [
        "image: ghcr.io/acme/web:latest",
        "image: ghcr.io/acme/proxy:2.4.1",
        "image: ghcr.io/acme/worker:edge",
    ] {
        line_of(&rendered, image);
    }

    let o = greenlight(
        d.path(),
        &[
            "lint",
            "--kustomize-root",
            "overlays/prod",
            "--format",
            "json",
            "--select",
            "GL001,GL101",
            "-",
        ],
        &rendered,
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{version}: {stderr}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    let found: Vec<(&str, &str, u64, &str)> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["rule"].as_str().unwrap(),
                d["file"].as_str().unwrap(),
                d["line"].as_u64().unwrap(),
                d["field"].as_str().unwrap(),
            )
        })
        .collect();
    let image_0 = "spec.template.spec.containers[0].image";
    assert_eq!(
        found,
        [
            // `web` is pinned in the base; the overlay's `newTag: latest` is what is rendered,
            // and the finding is at the base's `image:` line all the same.
            (
                "GL001",
                "base/deployment.yaml",
                line_of(BASE_DEPLOYMENT, "image: ghcr.io/acme/web:1.0.0"),
                image_0,
            ),
            (
                "GL101",
                "base/deployment.yaml",
                line_of(BASE_DEPLOYMENT, "sleep 20"),
                "spec.template.spec.containers[0].lifecycle.preStop.exec.command[2]",
            ),
            // The overlay's own resource, in the overlay's directory.
            (
                "GL001",
                "overlays/prod/worker.yaml",
                line_of(OVERLAY_WORKER, "image: ghcr.io/acme/worker:edge"),
                image_0,
            ),
            // And no finding for `proxy`: `main` in the base, `2.4.1` after the overlay.
        ],
        "{version}: {v:#}"
    );

    let diags = v["diagnostics"].as_array().unwrap();
    // The message judges the rendered reference, not the base's.
    let web = diags[0]["message"].as_str().unwrap();
    assert!(
        web.contains("`ghcr.io/acme/web:latest`") && web.contains("mutable tag `latest`"),
        "{web}"
    );
    // Each mapped finding relates the line of the rendered output it came from.
    for (d, rendered_text) in [
        (&diags[0], "image: ghcr.io/acme/web:latest"),
        (&diags[1], "sleep 20"),
        (&diags[2], "image: ghcr.io/acme/worker:edge"),
    ] {
        let related = d["related"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["message"] == "in the rendered output")
            .unwrap_or_else(|| panic!("no rendered line related: {d:#}"));
        assert_eq!(related["file"], "<stdin>", "{d:#}");
        assert_eq!(
            related["line"].as_u64(),
            Some(line_of(&rendered, rendered_text)),
            "{d:#}\n{rendered}"
        );
    }

    // The human report points at the same source lines and shows their text.
    let o = greenlight(
        d.path(),
        &[
            "lint",
            "--kustomize-root",
            "overlays/prod",
            "--select",
            "GL001",
            "-",
        ],
        &rendered,
    );
    let human = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{human}");
    for (file, text, needle) in [
        ("base/deployment.yaml", BASE_DEPLOYMENT, "web:1.0.0"),
        ("overlays/prod/worker.yaml", OVERLAY_WORKER, "worker:edge"),
    ] {
        let n = line_of(text, needle);
        let col = line(text, n).find("image:").unwrap() + 1;
        assert!(
            human.contains(&format!("--> {file}:{n}:{col}\n"))
                && human.contains(line(text, n).trim()),
            "{file}:{n}:{col} in:\n{human}"
        );
    }
}
