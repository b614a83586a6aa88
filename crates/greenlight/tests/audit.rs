//! End to end: `greenlight audit` over a fleet of every kind, read from the sandbox's REST API
//! and from a real kube-apiserver (the sandbox's Applications mirrored as Argo CD's controller
//! writes them, plus Applications the sandbox cannot serve and Image Updater's `ImageUpdater`
//! resources under their CRD). The audit reads only; it exits 0 whatever the apps are.

#[macro_use]
mod common;
use common::*;
use serde_json::{Value, json};
use std::process::Output;

fn audit(args: &[&str]) -> Output {
    std::process::Command::new(BIN)
        .arg("audit")
        .args(args)
        .env_remove("GREENLIGHT_GIT_TOKEN")
        .output()
        .expect("run greenlight audit")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn json_of(o: &Output) -> Value {
    let (out, err) = text(o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\nstderr:\n{err}"))
}

/// `app`'s entry of an audit document.
fn entry<'a>(doc: &'a Value, app: &str) -> &'a Value {
    doc["apps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["app"] == app)
        .unwrap_or_else(|| panic!("no {app} in {doc:#}"))
}

fn codes(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| r["code"].as_str().unwrap().to_string())
        .collect()
}

/// (watchable codes, arm-ready codes) of `app`.
fn reasons(doc: &Value, app: &str) -> (Vec<String>, Vec<String>) {
    let e = entry(doc, app);
    assert_eq!(
        e["watchable"],
        codes(&e["watchable_reasons"]).is_empty(),
        "{e:#}"
    );
    assert_eq!(
        e["arm_ready"],
        codes(&e["arm_ready_reasons"]).is_empty(),
        "{e:#}"
    );
    (
        codes(&e["watchable_reasons"]),
        codes(&e["arm_ready_reasons"]),
    )
}

/// The repository's fleet: `web` plain, `api` without automated sync, `root` an app-of-apps
/// parent with automated prune, `img` under Image Updater's annotations without selfHeal, a
/// chart and a source hydrator.
fn fleet() -> (Repo, greenlight_testkit::sandbox::Sandbox) {
    let repo = Repo::new();
    repo.write("apps/api/deploy.yaml", &deployment("api", GOOD))
        .write("apps/img/deploy.yaml", &deployment("img", GOOD))
        .write(
            "apps/root/children.yaml",
            "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: child\n  namespace: argocd\nspec:\n  project: default\n  source: {repoURL: https://git.example/child.git, path: child, targetRevision: main}\n  destination: {server: https://kubernetes.default.svc, namespace: child}\n",
        )
        .commit_push("the fleet");
    let sb = sandbox(
        &repo,
        &[
            "web=apps/web",
            "api=apps/api",
            "root=apps/root",
            "img=apps/img",
            "redis=helm:redis@18.1.0",
            "hyd=hydrator:apps/web",
        ],
        &[
            "--manual-sync",
            "api",
            "--prune",
            "root",
            "--no-self-heal",
            "img",
        ],
    );
    let r = sb.patch_app(
        "img",
        r#"{"metadata":{"annotations":{"argocd-image-updater.argoproj.io/image-list":"img=registry.local/web"}}}"#,
        "merge",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    settled(&sb, &repo, &["web", "root"]);
    (repo, sb)
}

/// Every kind the sandbox serves, over its REST API: the structural reasons, the arm reasons,
/// a table and JSON that agree, the caveat that ImageUpdater resources were not read.
#[test]
fn the_rest_audit_names_every_kind_of_app() {
    let (repo, sb) = fleet();
    let base = [
        "--repo",
        &repo.repo(),
        "--argocd-url",
        &sb.url,
        "--branch",
        "main",
    ];
    let mut args = base.to_vec();
    args.extend(["--output", "json"]);
    let doc = json_of(&audit(&args));
    assert_eq!(doc["schema"], "greenlight.audit/v1");
    assert_eq!(doc["source"], "argocd");
    assert_eq!(doc["branch"], "main");
    assert_eq!(doc["image_updater_resources"]["read"], false, "{doc:#}");
    let none: Vec<String> = Vec::new();
    assert_eq!(reasons(&doc, "argocd/web"), (none.clone(), none.clone()));
    assert_eq!(
        reasons(&doc, "argocd/api"),
        (none.clone(), vec!["no_automated_sync".to_string()])
    );
    assert_eq!(
        reasons(&doc, "argocd/root"),
        (
            none.clone(),
            vec!["automated_prune".to_string(), "app_of_apps".to_string()]
        )
    );
    let root = entry(&doc, "argocd/root");
    assert!(
        root["arm_ready_reasons"][1]["message"]
            .as_str()
            .unwrap()
            .contains("argocd/child"),
        "{root:#}"
    );
    assert_eq!(
        reasons(&doc, "argocd/img"),
        (
            none.clone(),
            vec![
                "image_updater_argocd_write_back".to_string(),
                "self_heal_off".to_string()
            ]
        )
    );
    assert_eq!(
        reasons(&doc, "argocd/redis"),
        (vec!["chart".to_string()], vec!["unwatchable".to_string()])
    );
    assert_eq!(
        reasons(&doc, "argocd/hyd"),
        (
            vec!["source_hydrator".to_string()],
            vec!["unwatchable".to_string()]
        )
    );
    assert_eq!(
        doc["summary"],
        json!({"apps": 6, "watchable": 4, "arm_ready": 1, "unreadable": 0})
    );

    // The table says the same, with the caveat.
    let o = audit(&base);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let line = |app: &str| {
        out.lines()
            .find(|l| l.starts_with(app))
            .unwrap_or_else(|| panic!("no {app} in:\n{out}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(line("argocd/web"), "argocd/web yes yes*");
    assert_eq!(line("argocd/redis"), "argocd/redis no no chart redis");
    assert_eq!(
        line("argocd/img"),
        "argocd/img yes no Image Updater write-back argocd; selfHeal off"
    );
    assert!(out.contains("were not read"), "{out}");
    assert!(out.ends_with(": 4 watchable, 1 arm-ready\n"), "{out}");

    // Another branch makes every git app unwatchable: the sandbox's apps track `main`.
    let o = audit(&[
        "--repo",
        &repo.repo(),
        "--argocd-url",
        &sb.url,
        "--branch",
        "release",
        "--output",
        "json",
    ]);
    let doc = json_of(&o);
    assert_eq!(reasons(&doc, "argocd/web").0, ["other_branch"]);
    // Without --branch, the remote's HEAD branch is asked: main, as given.
    let o = audit(&[
        "--repo",
        &repo.repo(),
        "--argocd-url",
        &sb.url,
        "--output",
        "json",
    ]);
    let doc = json_of(&o);
    assert_eq!(doc["branch"], "main");
    assert_eq!(reasons(&doc, "argocd/web").0, none);
}

/// Usage errors name the flag (exit 2); an Argo CD that cannot be read is exit 1, naming it.
#[test]
fn bad_input_is_named_and_an_unreachable_argocd_fails() {
    let repo = Repo::new();
    for (args, needle) in [
        (
            vec!["--repo", "x", "--branch", "main"],
            "--argocd-url is required",
        ),
        (
            vec![
                "--repo",
                "x",
                "--branch",
                "main",
                "--argocd-url",
                "http://127.0.0.1:1",
                "--namespace",
                "a",
            ],
            "--namespace: only read with --source kube or --store kube",
        ),
        (
            vec![
                "--repo",
                "x",
                "--branch",
                "main",
                "--source",
                "kube",
                "--namespace",
                "Not_A_Label",
            ],
            "--namespace \"Not_A_Label\"",
        ),
        (
            vec![
                "--repo",
                "x",
                "--branch",
                "main",
                "--source",
                "kube",
                "--argocd-url",
                "http://x",
            ],
            "--argocd-url: not read with --source kube",
        ),
    ] {
        let o = audit(&args);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let o = audit(&[
        "--repo",
        &repo.repo(),
        "--branch",
        "main",
        "--argocd-url",
        "http://127.0.0.1:1",
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        err.contains("cannot list Applications from http://127.0.0.1:1"),
        "{err}"
    );
    assert!(out.is_empty(), "{out}");
}

/// A minimal CRD for Image Updater's resource (the apiserver serves what it is told; the audit
/// reads `spec` as Image Updater's controller does).
const IMAGE_UPDATER_CRD: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1",
  "kind": "CustomResourceDefinition",
  "metadata": {"name": "imageupdaters.argocd-image-updater.argoproj.io"},
  "spec": {
    "group": "argocd-image-updater.argoproj.io",
    "names": {"kind": "ImageUpdater", "listKind": "ImageUpdaterList", "plural": "imageupdaters", "singular": "imageupdater"},
    "scope": "Namespaced",
    "versions": [{"name": "v1alpha1", "served": true, "storage": true,
      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
  }
}"#;

/// Over the Kubernetes API: the sandbox's apps as mirrored, Applications the sandbox cannot
/// serve (another branch, another repository, OCI, several sources without the repository, a
/// name in two namespaces), and Image Updater's resources, which only this API serves: one
/// selects `api` by name with the `argocd` write-back, one selects by label with `git` (a note).
/// Before the CRD exists the audit says Image Updater is not installed.
#[test]
fn the_kube_audit_reads_image_updater_resources_and_what_the_sandbox_cannot_serve() {
    let (repo, sb) = fleet();
    let kube = greenlight_testkit::KubeApiserver::start();
    let _mirror = kube.mirror_sandbox(&sb.url);
    let repo_url = sb.app("web")["spec"]["source"]["repoURL"]
        .as_str()
        .unwrap()
        .to_string();
    kube.ensure_namespace("team-b");
    let app = |ns: &str, name: &str, spec: Value, labels: Value| {
        json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": spec,
        })
    };
    let dest = json!({"server": "https://kubernetes.default.svc", "namespace": "x"});
    let auto = json!({"automated": {"selfHeal": true}});
    let src =
        |url: &str, rev: &str| json!({"repoURL": url, "path": "apps/web", "targetRevision": rev});
    let extra = [
        app(
            "argocd",
            "release",
            json!({"project": "default", "destination": dest, "syncPolicy": auto, "source": src(&repo_url, "release")}),
            json!({}),
        ),
        app(
            "argocd",
            "elsewhere",
            json!({"project": "default", "destination": dest, "syncPolicy": auto, "source": src("https://git.example/other.git", "main")}),
            json!({}),
        ),
        app(
            "argocd",
            "oci",
            json!({"project": "default", "destination": dest, "syncPolicy": auto, "source": src("oci://ghcr.io/acme/manifests", "1.2.0")}),
            json!({}),
        ),
        app(
            "argocd",
            "multi",
            json!({"project": "default", "destination": dest, "syncPolicy": auto, "sources": [src("https://git.example/a.git", "main"), src("https://git.example/b.git", "main")]}),
            json!({}),
        ),
        app(
            "team-b",
            "web",
            json!({"project": "default", "destination": dest, "syncPolicy": auto, "source": src(&repo_url, "main")}),
            json!({"tier": "front"}),
        ),
    ];
    for a in &extra {
        kube.kubectl_stdin(&["apply", "-f", "-"], &a.to_string());
    }
    let base = [
        "--repo",
        &repo.repo(),
        "--branch",
        "main",
        "--source",
        "kube",
        "--kubeconfig",
        kube.kubeconfig().to_str().unwrap(),
        "--output",
        "json",
    ];
    let doc = json_of(&audit(&base));
    assert_eq!(doc["source"], "kube");
    assert_eq!(
        doc["image_updater_resources"],
        json!({"read": true, "count": 0, "installed": false})
    );
    let none: Vec<String> = Vec::new();
    assert_eq!(reasons(&doc, "argocd/release").0, ["other_branch"]);
    assert_eq!(reasons(&doc, "argocd/elsewhere").0, ["other_repository"]);
    assert_eq!(reasons(&doc, "argocd/oci").0, ["oci"]);
    assert_eq!(
        reasons(&doc, "argocd/multi").0,
        ["multi_source_without_repo"]
    );
    // `web` in two namespaces: a bare `app=web` cannot be watched.
    assert_eq!(reasons(&doc, "argocd/web").0, ["ambiguous_name"]);
    assert_eq!(reasons(&doc, "team-b/web").0, ["ambiguous_name"]);
    // The mirrored apps read as over REST.
    assert_eq!(
        reasons(&doc, "argocd/api"),
        (none.clone(), vec!["no_automated_sync".to_string()])
    );
    assert_eq!(reasons(&doc, "argocd/redis").0, ["chart"]);
    assert_eq!(reasons(&doc, "argocd/hyd").0, ["source_hydrator"]);

    kube.kubectl_stdin(&["apply", "-f", "-"], IMAGE_UPDATER_CRD);
    kube.wait_until("the ImageUpdater CRD is served", || {
        kube.kubectl(&[
            "get",
            "imageupdaters.argocd-image-updater.argoproj.io",
            "-A",
        ])
        .status
        .success()
    });
    let updater = |ns: &str, name: &str, spec: Value| {
        json!({
            "apiVersion": "argocd-image-updater.argoproj.io/v1alpha1", "kind": "ImageUpdater",
            "metadata": {"name": name, "namespace": ns}, "spec": spec,
        })
    };
    for u in [
        updater(
            "argocd",
            "api-images",
            json!({
                "applicationRefs": [{"namePattern": "ap?"}],
                "images": [{"alias": "api", "imageName": "registry.local/api:1.0.0"}],
            }),
        ),
        updater(
            "team-b",
            "front",
            json!({
                "writeBackConfig": {"method": "git"},
                "applicationRefs": [{"namePattern": "*", "labelSelectors": {"matchLabels": {"tier": "front"}}}],
                "images": [{"alias": "web", "imageName": "registry.local/web:1.0.0"}],
            }),
        ),
    ] {
        kube.kubectl_stdin(&["apply", "-f", "-"], &u.to_string());
    }
    let doc = json_of(&audit(&base));
    assert_eq!(
        doc["image_updater_resources"],
        json!({"read": true, "count": 2})
    );
    assert_eq!(
        reasons(&doc, "argocd/api").1,
        ["image_updater_argocd_write_back", "no_automated_sync"]
    );
    assert!(
        entry(&doc, "argocd/api")["arm_ready_reasons"][0]["message"]
            .as_str()
            .unwrap()
            .contains("ImageUpdater argocd/api-images"),
        "{doc:#}"
    );
    let b = entry(&doc, "team-b/web");
    assert_eq!(codes(&b["arm_ready_reasons"]), ["unwatchable"], "{b:#}");
    assert!(
        b["notes"][0]
            .as_str()
            .unwrap()
            .contains("ImageUpdater team-b/front"),
        "{b:#}"
    );
    // The `argocd` namespace's `web` is not selected by team-b's resource.
    assert_eq!(entry(&doc, "argocd/web")["notes"], json!([]));

    // An account that may list Applications but not ImageUpdater resources: the audit still
    // answers, says it could not read them (the API's words), and marks arm-ready apps `yes*`.
    kube.kubectl_ok(&["create", "serviceaccount", "auditor", "-n", "argocd"]);
    kube.kubectl_ok(&[
        "create",
        "clusterrole",
        "apps-reader",
        "--verb=list",
        "--resource=applications.argoproj.io",
    ]);
    kube.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "auditor-apps",
        "--clusterrole=apps-reader",
        "--serviceaccount=argocd:auditor",
    ]);
    let token = kube.create_token("argocd", "auditor");
    let limited = kube.dir().join("auditor.kubeconfig");
    kube.write_token_kubeconfig(&limited, &token, "argocd");
    let mut args = base.to_vec();
    args[7] = limited.to_str().unwrap();
    let doc = json_of(&audit(&args));
    let u = &doc["image_updater_resources"];
    assert_eq!(u["read"], false, "{doc:#}");
    assert!(u["why"].as_str().unwrap().contains("forbidden"), "{u}");
    assert_eq!(reasons(&doc, "argocd/api").1, ["no_automated_sync"]);
    args.truncate(8);
    let o = audit(&args);
    let (out, _) = text(&o);
    assert!(
        out.contains("were not read (cannot list ImageUpdater"),
        "{out}"
    );

    // One namespace only: the other's `web` is not seen, so the name is not ambiguous.
    let mut one = base.to_vec();
    one.extend(["--namespace", "argocd"]);
    let doc = json_of(&audit(&one));
    assert_eq!(reasons(&doc, "argocd/web"), (none.clone(), none));
    assert!(
        doc["apps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["namespace"] == "argocd")
    );
}
