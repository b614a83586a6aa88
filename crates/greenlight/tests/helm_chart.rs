//! The Helm chart (`deploy/helm/greenlight`) and the image it runs (`Dockerfile`), checked with
//! real tools: `helm lint` and `helm template` (helm v4, `greenlight_testkit::helm`), greenlight's
//! own linter on the rendered manifests, and the chart's ServiceAccount, RBAC and CRDs applied
//! to a real kube-apiserver (`greenlight_testkit::KubeApiserver`) where a token of that
//! ServiceAccount is asked, right by right, what it may and may not do (`kubectl auth can-i`).

mod common;
mod yaml;

use common::BIN;
use greenlight_testkit::KubeApiserver;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const CHART: &str = "deploy/helm/greenlight";

fn root() -> PathBuf {
    yaml::repo_root()
}

/// `helm template gl deploy/helm/greenlight <args…>`, run at the repository's root.
#[track_caller]
fn render(args: &[&str]) -> String {
    let mut all = vec!["--name-template", "gl"];
    all.extend_from_slice(args);
    greenlight_testkit::helm::template(&root(), CHART, &all)
}

/// The rendered objects.
#[track_caller]
fn objects(args: &[&str]) -> Vec<Value> {
    yaml::load_all_str("helm template", &render(args))
}

#[track_caller]
fn one<'a>(objs: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = objs.iter().filter(|o| o["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind} in {objs:#?}");
    found[0]
}

fn kinds(objs: &[Value]) -> Vec<String> {
    objs.iter()
        .map(|o| o["kind"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// Every toggle of the chart on: the ServiceMonitor, the PrometheusRule, Applications in two
/// namespaces, Argo CD's API with a token and a CA, an image pinned by digest, more config.
const ALL_ON: &[&str] = &[
    "--namespace",
    "greenlight",
    "--set",
    "serviceMonitor.enabled=true",
    "--set",
    "prometheusRule.enabled=true",
    "--set",
    "namespaces={apps,team-a}",
    "--set",
    "argocd.url=https://argocd-server.argocd.svc",
    "--set",
    "argocd.token.existingSecret=greenlight-argocd",
    "--set",
    "argocd.ca.existingConfigMap=greenlight-argocd-ca",
    "--set",
    "image.repository=registry.example.com/platform/greenlight",
    "--set",
    "image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    "--set-string",
    "config.stable-for=10m",
    "--set",
    "dryRun=false",
    "--set",
    "pushHooks.github.existingSecret=greenlight-hooks",
    "--set",
    "pushHooks.gitlab.existingSecret=greenlight-hooks",
    "--set",
    "pushHooks.gitea.existingSecret=greenlight-hooks",
];

/// `greenlight lint - --fail-on warning` on `manifests`: its exit code and output.
fn lint(manifests: &str) -> (i32, String) {
    let mut child = Command::new(BIN)
        .args(["lint", "-", "--fail-on", "warning"])
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run greenlight lint");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(manifests.as_bytes()).expect("write stdin");
    }
    let out = child.wait_with_output().expect("wait for greenlight lint");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn helm_lint_strict_passes_with_default_values_and_every_toggle() {
    for extra in [&[][..], ALL_ON] {
        let out = Command::new(greenlight_testkit::helm::binary())
            .args(["lint", "--strict", CHART])
            .args(extra)
            .current_dir(root())
            .env(
                "HELM_CACHE_HOME",
                std::env::temp_dir().join("greenlight-test-helm/cache"),
            )
            .env(
                "HELM_CONFIG_HOME",
                std::env::temp_dir().join("greenlight-test-helm/config"),
            )
            .env(
                "HELM_DATA_HOME",
                std::env::temp_dir().join("greenlight-test-helm/data"),
            )
            .output()
            .expect("run helm lint");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "helm lint --strict {extra:?}:\n{text}"
        );
        assert!(
            text.contains("1 chart(s) linted, 0 chart(s) failed"),
            "{text}"
        );
    }
}

#[test]
fn the_rendered_chart_passes_greenlight_lint_and_a_broken_one_does_not() {
    let default = render(&[]);
    let (code, out) = lint(&default);
    assert_eq!(code, 0, "default values:\n{out}");
    let all_on = render(ALL_ON);
    let (code, out) = lint(&all_on);
    assert_eq!(code, 0, "every toggle on:\n{out}");
    let old = render(&["--kube-version", "1.20"]);
    let (code, out) = lint(&old);
    assert_eq!(code, 0, "--kube-version 1.20:\n{out}");

    // The linter does read the chart's Deployment and PodDisruptionBudget: the same render with
    // a mutable tag fails, and with a budget that blocks drains too.
    let mutable = default.replace(
        "image: \"greenlight:0.1.0\"",
        "image: \"greenlight:latest\"",
    );
    assert_ne!(mutable, default, "the default image is greenlight:0.1.0");
    let (code, out) = lint(&mutable);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("GL001"), "{out}");
    let blocking = default.replace(
        "maxUnavailable: 1\n  selector",
        "maxUnavailable: 0\n  selector",
    );
    assert_ne!(
        blocking, default,
        "the PodDisruptionBudget's maxUnavailable: 1"
    );
    let (code, out) = lint(&blocking);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("GL401"), "{out}");
}

#[test]
fn the_default_render_runs_two_leader_elected_replicas_on_the_kube_store() {
    let objs = objects(&[]);
    let mut k = kinds(&objs);
    k.sort();
    assert_eq!(
        k,
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "Deployment",
            "PodDisruptionBudget",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount"
        ],
        "ServiceMonitor and PrometheusRule are off by default"
    );
    let d = one(&objs, "Deployment");
    assert_eq!(d["spec"]["replicas"], 2);
    let pod = &d["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[0], "watch");
    for want in [
        "--leader-elect",
        "--store=kube",
        "--source=kube",
        "--store-name=gl-greenlight",
        "--lease-name=gl-greenlight",
        "--listen=0.0.0.0:9090",
        "--config=/etc/greenlight/watch.toml",
        "--data-dir=/var/lib/greenlight",
        "--git-token-file=/var/run/secrets/greenlight/git/token",
    ] {
        assert!(args.contains(&want), "{want} in {args:?}");
    }
    // No token in an argument or an environment variable: the tokens are mounted files.
    assert!(
        !args.iter().any(|a| a.contains("token=") || a.contains("@")),
        "{args:?}"
    );
    let env = c["env"].as_array().unwrap();
    let identity = env
        .iter()
        .find(|e| e["name"] == "GREENLIGHT_IDENTITY")
        .expect("GREENLIGHT_IDENTITY");
    assert_eq!(
        identity["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );
    assert!(
        !env.iter()
            .any(|e| e["name"] == "GREENLIGHT_GIT_TOKEN"
                || !e["valueFrom"]["secretKeyRef"].is_null()),
        "{env:?}"
    );

    // The probes, on the named port.
    let port = &c["ports"][0];
    assert_eq!(port["name"], "metrics");
    assert_eq!(port["containerPort"], 9090);
    for (probe, path) in [
        ("startupProbe", "/startupz"),
        ("readinessProbe", "/readyz"),
        ("livenessProbe", "/healthz"),
    ] {
        assert_eq!(c[probe]["httpGet"]["path"], path, "{probe}");
        assert_eq!(c[probe]["httpGet"]["port"], "metrics", "{probe}");
    }

    // The security context.
    let sc = &c["securityContext"];
    assert_eq!(sc["runAsNonRoot"], true);
    assert_eq!(sc["runAsUser"], 65532);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );

    // The clone and /tmp on emptyDirs (no PersistentVolumeClaim), the config a directory.
    let volumes = pod["volumes"].as_array().unwrap();
    let volume = |name: &str| {
        volumes
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("volume {name} in {volumes:?}"))
    };
    assert!(volume("data")["emptyDir"].is_object());
    assert!(volume("tmp")["emptyDir"].is_object());
    assert_eq!(volume("config")["configMap"]["name"], "gl-greenlight");
    assert_eq!(
        volume("git-token")["secret"]["secretName"],
        "greenlight-git"
    );
    assert!(
        !volumes
            .iter()
            .any(|v| !v["persistentVolumeClaim"].is_null())
    );
    let mounts = c["volumeMounts"].as_array().unwrap();
    let mount = |name: &str| {
        mounts
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("mount {name} in {mounts:?}"))
    };
    assert_eq!(mount("data")["mountPath"], "/var/lib/greenlight");
    assert_eq!(mount("tmp")["mountPath"], "/tmp");
    assert_eq!(mount("config")["mountPath"], "/etc/greenlight");
    assert!(
        mounts.iter().all(|m| m["subPath"].is_null()),
        "never subPath"
    );

    // The config file: dry run by default.
    let cm = one(&objs, "ConfigMap");
    assert_eq!(
        cm["data"]["watch.toml"].as_str().unwrap().trim(),
        "dry-run = true"
    );

    // A PodDisruptionBudget that never blocks a drain, policy/v1 on a current Kubernetes.
    let pdb = one(&objs, "PodDisruptionBudget");
    assert_eq!(pdb["apiVersion"], "policy/v1");
    assert!(
        pdb["spec"]["maxUnavailable"].as_i64().unwrap() >= 1,
        "{pdb}"
    );
    assert!(pdb["spec"]["minAvailable"].is_null());
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"],
        d["spec"]["selector"]["matchLabels"]
    );
}

#[test]
fn the_disruption_budget_api_follows_the_kubernetes_version() {
    for (version, api) in [
        ("1.20", "policy/v1beta1"),
        ("1.21", "policy/v1"),
        ("1.25", "policy/v1"),
    ] {
        let objs = objects(&["--kube-version", version]);
        assert_eq!(
            one(&objs, "PodDisruptionBudget")["apiVersion"],
            api,
            "{version}"
        );
    }
    // A cluster's discovery (as `helm install` and Argo CD pass it) decides where it names the
    // kind.
    let objs = objects(&["--api-versions", "policy/v1/PodDisruptionBudget"]);
    assert_eq!(one(&objs, "PodDisruptionBudget")["apiVersion"], "policy/v1");
}

#[test]
fn every_toggle_renders_what_it_names() {
    let objs = objects(ALL_ON);
    let d = one(&objs, "Deployment");
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        c["image"],
        "registry.example.com/platform/greenlight:0.1.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    );
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    for want in [
        "--namespace=apps",
        "--namespace=team-a",
        "--argocd-url=https://argocd-server.argocd.svc",
        "--argocd-token-file=/var/run/secrets/greenlight/argocd/token",
        "--argocd-ca-file=/etc/greenlight-argocd-ca/ca.crt",
        "--store-namespace=greenlight",
        "--github-webhook-secret-file=/var/run/secrets/greenlight/hooks/github/secret",
        "--gitlab-webhook-token-file=/var/run/secrets/greenlight/hooks/gitlab/secret",
        "--gitea-webhook-secret-file=/var/run/secrets/greenlight/hooks/gitea/secret",
    ] {
        assert!(args.contains(&want), "{want} in {args:?}");
    }
    // Each hook secret is a volume of the key asked for, mounted read-only where its flag reads.
    let spec = &d["spec"]["template"]["spec"];
    for forge in ["github", "gitlab", "gitea"] {
        let name = format!("hook-{forge}");
        let volume = spec["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name.as_str())
            .unwrap_or_else(|| panic!("volume {name}"));
        assert_eq!(volume["secret"]["secretName"], "greenlight-hooks");
        assert_eq!(volume["secret"]["items"][0]["key"], forge);
        let mount = c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name.as_str())
            .unwrap_or_else(|| panic!("mount {name}"));
        assert_eq!(
            mount["mountPath"],
            format!("/var/run/secrets/greenlight/hooks/{forge}").as_str()
        );
        assert_eq!(mount["readOnly"], true);
    }
    let toml = one(&objs, "ConfigMap")["data"]["watch.toml"]
        .as_str()
        .unwrap();
    assert!(toml.contains("dry-run = false"), "{toml}");
    assert!(toml.contains("stable-for = \"10m\""), "{toml}");

    // Applications in the two namespaces only: a Role in each, no ClusterRole.
    assert!(
        !kinds(&objs)
            .iter()
            .any(|k| k == "ClusterRole" || k == "ClusterRoleBinding")
    );
    let roles: Vec<&Value> = objs.iter().filter(|o| o["kind"] == "Role").collect();
    let mut where_: Vec<&str> = roles
        .iter()
        .map(|r| r["metadata"]["namespace"].as_str().unwrap())
        .collect();
    where_.sort();
    assert_eq!(where_, ["apps", "greenlight", "team-a"]);

    let sm = one(&objs, "ServiceMonitor");
    assert_eq!(sm["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(sm["spec"]["endpoints"][0]["port"], "metrics");
    assert_eq!(sm["spec"]["endpoints"][0]["path"], "/metrics");
    let svc = one(&objs, "Service");
    assert_eq!(
        sm["spec"]["selector"]["matchLabels"],
        svc["spec"]["selector"]
    );
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], "metrics");

    // The PrometheusRule's groups are exactly deploy/prometheus/rules.yaml's.
    let rule = one(&objs, "PrometheusRule");
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    let source = yaml::load("deploy/prometheus/rules.yaml");
    assert!(
        source["spec"]["groups"]
            .as_array()
            .is_some_and(|g| !g.is_empty())
    );
    assert_eq!(rule["spec"]["groups"], source["spec"]["groups"]);
}

#[test]
fn values_that_would_mislead_are_refused_naming_the_value() {
    let refused = |args: &[&str], says: &str| {
        let out = Command::new(greenlight_testkit::helm::binary())
            .args(["template", "gl", CHART])
            .args(args)
            .current_dir(root())
            .env(
                "HELM_CACHE_HOME",
                std::env::temp_dir().join("greenlight-test-helm/cache"),
            )
            .env(
                "HELM_CONFIG_HOME",
                std::env::temp_dir().join("greenlight-test-helm/config"),
            )
            .env(
                "HELM_DATA_HOME",
                std::env::temp_dir().join("greenlight-test-helm/data"),
            )
            .output()
            .expect("run helm template");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "{args:?} rendered");
        assert!(err.contains(says), "{args:?}: {err}");
    };
    // A flag the chart sets, in the config file, where the flag would silently win.
    refused(
        &["--set", "config.namespace={other}"],
        "config.namespace: the chart sets --namespace itself; use the value namespaces instead",
    );
    refused(&["--set", "config.dry-run=false"], "config.dry-run");
    // A dry-run switch that is not a boolean: refused, not taken as off.
    refused(&["--set-string", "dryRun=no"], "dryRun: give true or false");
    refused(
        &["--set", "podDisruptionBudget.maxUnavailable=0"],
        "would block every node drain",
    );
    refused(&["--set", "repo="], "repo: give the deployment repository");
    refused(
        &["--set", "argocd.token.existingSecret=t"],
        "give argocd.url too",
    );
    refused(&["--set", "image.digest=sha256:abc"], "image.digest");
}

/// The ConfigMap's `watch.toml` as the chart renders it with `args`.
#[track_caller]
fn rendered_config(args: &[&str]) -> String {
    let objs = objects(args);
    one(&objs, "ConfigMap")["data"]["watch.toml"]
        .as_str()
        .expect("watch.toml")
        .to_string()
}

#[test]
fn watch_starts_on_the_rendered_config_file_and_refuses_a_bad_value_in_it() {
    let repo = common::Repo::new();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("watch.toml");
    std::fs::write(
        &file,
        rendered_config(&[
            "--set-string",
            "config.stable-for=10m",
            "--set",
            "config.listing-limit-mib=256",
            "--set-string",
            "config.fetch-interval=200ms",
        ]),
    )
    .unwrap();
    let state = dir.path().join("s.db");
    let args = |file: &Path| {
        vec![
            "watch".to_string(),
            "--config".into(),
            file.display().to_string(),
            "--repo".into(),
            repo.repo().to_string(),
            // Nobody answers there: starting is all this test needs.
            "--argocd-url".into(),
            "http://127.0.0.1:1".into(),
            "--state".into(),
            state.display().to_string(),
        ]
    };
    let wd = common::Proc::spawn(BIN, args(&file), &[]);
    wd.wait_line(
        greenlight_testkit::watch::WATCHING,
        std::time::Duration::from_secs(60),
    );
    drop(wd);

    // A value `watch` refuses, written through the chart: exit 2, naming the file's line.
    let bad = dir.path().join("bad.toml");
    let text = rendered_config(&["--set-string", "config.stable-for=soon"]);
    std::fs::write(&bad, &text).unwrap();
    let out = Command::new(BIN).args(args(&bad)).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let line = text
        .lines()
        .position(|l| l.starts_with("stable-for"))
        .expect("stable-for in the file")
        + 1;
    assert!(
        err.contains(&format!("{}:{line}:", bad.display())) && err.contains("\"soon\""),
        "{err}"
    );
}

#[test]
fn every_flag_the_chart_passes_is_one_of_watchs() {
    let help = Command::new(BIN)
        .args(["watch", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).to_string();
    assert!(help.contains("--source"), "{help}");
    let objs = objects(ALL_ON);
    let c = &one(&objs, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    let flags: Vec<String> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str()?.strip_prefix("--"))
        .map(|f| f.split('=').next().unwrap_or(f).to_string())
        .collect();
    assert!(flags.len() > 10, "{flags:?}");
    let known = |f: &str| help.contains(&format!("--{f} ")) || help.contains(&format!("--{f}\n"));
    for f in &flags {
        assert!(known(f), "--{f} is no flag of watch");
    }
    // Every key the ConfigMap may carry is a key `watch` takes: the default's, and a tunable.
    for key in ["dry-run", "stable-for"] {
        assert!(help.contains(&format!("--{key}")), "--{key}");
    }
}

// ---------------------------------------------------------------------------------------------
// The Dockerfile

struct Stage {
    from: String,
    lines: Vec<String>,
}

/// The Dockerfile's stages, each with its instructions (continuation lines joined, comments
/// left out).
fn stages() -> Vec<Stage> {
    let text = std::fs::read_to_string(root().join("Dockerfile")).expect("read the Dockerfile");
    let mut instructions: Vec<String> = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') || (t.is_empty() && current.is_empty()) {
            continue;
        }
        match t.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part);
                current.push(' ');
            }
            None => {
                current.push_str(t);
                instructions.push(std::mem::take(&mut current));
            }
        }
    }
    let mut out: Vec<Stage> = Vec::new();
    for i in instructions {
        if let Some(from) = i.strip_prefix("FROM ") {
            out.push(Stage {
                from: from.trim().to_string(),
                lines: Vec::new(),
            });
        } else {
            out.last_mut()
                .expect("an instruction before the first FROM")
                .lines
                .push(i);
        }
    }
    out
}

#[test]
fn the_dockerfile_pins_its_bases_and_runs_what_the_chart_mounts() {
    let stages = stages();
    assert!(stages.len() >= 2, "a builder stage and a runtime stage");
    for s in &stages {
        // image:tag@sha256:<64 hex> [AS name]
        let image = s.from.split_whitespace().next().unwrap();
        let (name, digest) = image
            .split_once("@sha256:")
            .unwrap_or_else(|| panic!("FROM {} is not pinned by digest", s.from));
        assert!(
            name.contains(':'),
            "FROM {}: a tag beside the digest",
            s.from
        );
        assert!(
            digest.len() == 64
                && digest
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
            "FROM {}: 64 lowercase hex digits",
            s.from
        );
    }
    assert!(
        stages[0].from.contains("rust:"),
        "the builder is Rust's image"
    );
    assert!(
        stages[0]
            .lines
            .iter()
            .any(|l| l.contains("cargo build --release --locked")),
        "the builder builds the locked release"
    );
    let last = stages.last().unwrap();
    let run: String = last
        .lines
        .iter()
        .filter(|l| l.starts_with("RUN "))
        .cloned()
        .collect::<Vec<_>>()
        .join("\n");
    // git and the CAs installed in the final stage.
    assert!(run.contains("apt-get install"), "{run}");
    for pkg in ["git", "ca-certificates"] {
        assert!(
            run.split_whitespace().any(|w| w == pkg),
            "{pkg} is installed in the final stage: {run}"
        );
    }
    // The binary comes from the builder.
    assert!(
        last.lines
            .iter()
            .any(|l| l.starts_with("COPY --from=") && l.contains("/usr/local/bin/greenlight")),
        "{:?}",
        last.lines
    );

    // USER: numeric, not root, the uid the chart runs as.
    let user = last
        .lines
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("a USER in the final stage");
    let (uid, gid) = user.trim().split_once(':').unwrap_or((user.trim(), ""));
    let uid: u32 = uid
        .parse()
        .unwrap_or_else(|_| panic!("USER {user} is numeric"));
    assert_ne!(uid, 0, "USER {user} is not root");
    if !gid.is_empty() {
        let gid: u32 = gid
            .parse()
            .unwrap_or_else(|_| panic!("USER {user}: a numeric group"));
        assert_ne!(gid, 0);
    }

    // The chart's container: the same uid, the same port, and its mount paths made in the image.
    let objs = objects(&[]);
    let c = &one(&objs, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["securityContext"]["runAsUser"], uid);
    let expose: Vec<&str> = last
        .lines
        .iter()
        .filter_map(|l| l.strip_prefix("EXPOSE "))
        .flat_map(str::split_whitespace)
        .collect();
    assert_eq!(
        expose,
        [c["ports"][0]["containerPort"].to_string().as_str()],
        "EXPOSE is the chart's containerPort"
    );
    for m in c["volumeMounts"].as_array().unwrap() {
        let path = m["mountPath"].as_str().unwrap();
        if path.starts_with("/var/run/secrets/") {
            continue; // made by the kubelet for a Secret
        }
        // One command of a RUN (`… && install -d … <path> && …`) makes it.
        let made = run.split("&&").any(|cmd| {
            let words: Vec<&str> = cmd.split_whitespace().collect();
            words.starts_with(&["install", "-d"]) && words.contains(&path)
        });
        assert!(
            made,
            "{path} (mounted by the chart) is created in the image: {run}"
        );
    }
    // The data dir and the config dir are the user's.
    for path in ["/var/lib/greenlight", "/etc/greenlight"] {
        assert!(
            run.contains(&format!("-o {uid} -g {uid} -m 0750 {path}"))
                || run.contains(&format!("-o {uid} -g {uid} -m 0755 {path}")),
            "{path} owned by {uid}: {run}"
        );
    }

    let ignore = std::fs::read_to_string(root().join(".dockerignore")).expect(".dockerignore");
    assert!(
        ignore.lines().any(|l| l.trim() == "*"),
        "the context is allow-listed"
    );
}

// ---------------------------------------------------------------------------------------------
// RBAC against a real kube-apiserver

/// Applies the chart's CRDs and what `helm template` renders (PodDisruptionBudget included, as
/// policy/v1beta1: the test apiserver is v1.20) in `namespace`, less the kinds whose CRDs are
/// the Prometheus Operator's; returns a kubeconfig holding a token of the chart's
/// ServiceAccount.
fn install(kube: &KubeApiserver, namespace: &str, args: &[&str]) -> PathBuf {
    let mut all = vec![
        "--namespace",
        namespace,
        "--kube-version",
        "1.20",
        "--include-crds",
    ];
    all.extend_from_slice(args);
    let objs = objects(&all);
    let (crds, rest): (Vec<&Value>, Vec<&Value>) = objs
        .iter()
        .filter(|o| o["apiVersion"] != "monitoring.coreos.com/v1")
        .partition(|o| o["kind"] == "CustomResourceDefinition");
    let mut names: Vec<&str> = crds
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["watchdogs.greenlight.dev", "watches.greenlight.dev"]
    );
    let list = |items: &[&Value]| {
        serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
    };
    kube.kubectl_stdin(&["create"], &list(&crds));
    for name in &names {
        kube.wait_until(&format!("{name} is Established"), || {
            kube.kubectl(&[
                "get",
                "crd",
                name,
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Established\")].status}",
            ])
            .stdout
                == b"True"
        });
    }
    let out = kube.kubectl_stdin(&["create", "--validate=strict"], &list(&rest));
    assert!(
        out.contains("deployment.apps/gl-greenlight created"),
        "{out}"
    );
    assert!(
        out.contains("poddisruptionbudget.policy/gl-greenlight created"),
        "{out}"
    );
    let token = kube.create_token(namespace, "gl-greenlight");
    let config = kube.dir().join(format!("sa-{namespace}.kubeconfig"));
    kube.write_token_kubeconfig(&config, &token, namespace);
    config
}

/// `kubectl auth can-i <verb> <what> -n <ns>` (or `-A`) with the ServiceAccount's token: yes
/// or no, and nothing else (an error is a failure, not a no).
#[track_caller]
fn can(kube: &KubeApiserver, config: &Path, verb: &str, what: &str, ns: &str) -> bool {
    let mut cmd = kube.kubectl_cmd();
    cmd.env("KUBECONFIG", config)
        .args(["auth", "can-i", verb, what]);
    if ns == "*" {
        cmd.arg("-A");
    } else {
        cmd.args(["-n", ns]);
    }
    let out = cmd.output().expect("run kubectl auth can-i");
    let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
    match said.as_str() {
        "yes" => true,
        "no" => false,
        _ => panic!(
            "kubectl auth can-i {verb} {what} -n {ns}: {said}\n{}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

#[track_caller]
fn may(kube: &KubeApiserver, config: &Path, rights: &[(&str, &str, &str)]) {
    for (verb, what, ns) in rights {
        assert!(
            can(kube, config, verb, what, ns),
            "may {verb} {what} in {ns}"
        );
    }
}

#[track_caller]
fn may_not(kube: &KubeApiserver, config: &Path, rights: &[(&str, &str, &str)]) {
    for (verb, what, ns) in rights {
        assert!(
            !can(kube, config, verb, what, ns),
            "may not {verb} {what} in {ns}"
        );
    }
}

const APPS: &str = "applications.argoproj.io";
const EVENTS: &str = "events.events.k8s.io";
const LEASE: &str = "leases.coordination.k8s.io/gl-greenlight";
const LEASES: &str = "leases.coordination.k8s.io";
const WATCHES: &str = "watches.greenlight.dev";
const WATCHDOGS: &str = "watchdogs.greenlight.dev";

/// The store's rights in the release's namespace `ns`, and none in `other`.
#[track_caller]
fn store_rights(kube: &KubeApiserver, config: &Path, ns: &str, other: &str) {
    may(
        kube,
        config,
        &[
            ("get", LEASE, ns),
            ("update", LEASE, ns),
            ("create", LEASES, ns),
        ],
    );
    // docs/state.md's Role: what the leader, `status` and `breaker reset` use.
    for verb in ["get", "list", "create", "update", "delete"] {
        may(kube, config, &[(verb, WATCHES, ns)]);
    }
    for verb in ["get", "create", "update", "patch"] {
        may(kube, config, &[(verb, WATCHDOGS, ns)]);
    }
    may_not(
        kube,
        config,
        &[
            ("watch", WATCHES, ns),
            ("patch", WATCHES, ns),
            ("list", WATCHDOGS, ns),
            ("watch", WATCHDOGS, ns),
            ("delete", WATCHDOGS, ns),
        ],
    );
    for what in [WATCHES, WATCHDOGS] {
        may_not(
            kube,
            config,
            &[
                ("get", what, other),
                ("create", what, other),
                ("update", what, "*"),
            ],
        );
    }
    may_not(
        kube,
        config,
        &[
            // Another Lease of its namespace (another controller's), and any elsewhere.
            ("update", "leases.coordination.k8s.io/kube-scheduler", ns),
            ("get", "leases.coordination.k8s.io/someone-else", ns),
            ("delete", LEASE, ns),
            ("list", LEASES, ns),
            ("update", LEASE, other),
            ("get", LEASE, other),
            ("create", LEASES, other),
            // Secrets: the tokens are mounted files, never read through the API.
            ("get", "secrets", ns),
            ("list", "secrets", ns),
            ("get", "secrets", other),
            ("list", "secrets", "*"),
            ("get", "configmaps", ns),
            ("create", "pods", ns),
            ("update", "deployments.apps", ns),
            ("create", "rolebindings.rbac.authorization.k8s.io", ns),
        ],
    );
}

#[test]
fn the_service_account_may_do_what_the_watchdog_needs_and_nothing_more_in_all_namespaces() {
    let kube = KubeApiserver::start_with_namespaces(&["greenlight", "apps", "other"]);
    let config = install(&kube, "greenlight", &[]);
    // Applications in every namespace: read, never written; Events written where they live.
    for ns in ["*", "argocd", "apps"] {
        may(
            &kube,
            &config,
            &[("get", APPS, ns), ("list", APPS, ns), ("watch", APPS, ns)],
        );
    }
    for ns in ["argocd", "apps"] {
        may(
            &kube,
            &config,
            &[("create", EVENTS, ns), ("patch", EVENTS, ns)],
        );
    }
    may_not(
        &kube,
        &config,
        &[
            ("create", APPS, "argocd"),
            ("update", APPS, "argocd"),
            ("patch", APPS, "argocd"),
            ("delete", APPS, "argocd"),
            ("delete", APPS, "*"),
            ("delete", EVENTS, "argocd"),
            ("update", EVENTS, "argocd"),
            ("create", "events", "argocd"),
            ("get", "appprojects.argoproj.io", "argocd"),
        ],
    );
    store_rights(&kube, &config, "greenlight", "other");

    // The rights hold for real requests with the token: the Lease is created, read and
    // renewed; a Watchdog and a Watch object pass the CRDs' schemas.
    let as_sa = |args: &[&str], stdin: Option<&str>| {
        let mut cmd = kube.kubectl_cmd();
        cmd.env("KUBECONFIG", &config).args(args);
        if let Some(text) = stdin {
            let path = kube.dir().join("sa-input.json");
            std::fs::write(&path, text).unwrap();
            cmd.arg("-f").arg(path);
        }
        let out = cmd.output().expect("run kubectl");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let lease = serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "gl-greenlight", "namespace": "greenlight"},
        "spec": {"holderIdentity": "gl-greenlight-0", "leaseDurationSeconds": 15}
    });
    let (ok, out) = as_sa(&["create"], Some(&lease.to_string()));
    assert!(ok, "{out}");
    let (ok, out) = as_sa(&["get", "lease", "gl-greenlight", "-o", "json"], None);
    assert!(ok, "{out}");
    let mut held: Value = serde_json::from_str(&out).unwrap();
    held["spec"]["holderIdentity"] = "gl-greenlight-1".into();
    let (ok, out) = as_sa(&["replace"], Some(&held.to_string()));
    assert!(ok, "{out}");
    let (ok, out) = as_sa(&["delete", "lease", "gl-greenlight"], None);
    assert!(!ok && out.contains("forbidden"), "{out}");
    let watchdog = serde_json::json!({
        "apiVersion": "greenlight.dev/v1alpha1", "kind": "Watchdog",
        "metadata": {"name": "gl-greenlight", "namespace": "greenlight"},
        "state": {"schemaVersion": 1, "repo": "https://git.example.com/platform/deploy.git",
                  "branch": "main", "breakerState": "closed", "consecutiveReverts": 0}
    });
    let (ok, out) = as_sa(&["create"], Some(&watchdog.to_string()));
    assert!(ok, "{out}");
    let watch = serde_json::json!({
        "apiVersion": "greenlight.dev/v1alpha1", "kind": "Watch",
        "metadata": {"name": "w-0123456789ab-0", "namespace": "greenlight"},
        "record": {"id": "0123456789ab:0", "commit": "0123456789ab", "app": "argocd/web",
                   "state": "WAITING_REACH", "live": true, "body": "{}"}
    });
    let (ok, out) = as_sa(&["create"], Some(&watch.to_string()));
    assert!(ok, "{out}");
    let (ok, out) = as_sa(&["get", "watches.greenlight.dev", "-o", "name"], None);
    assert!(ok && out.contains("w-0123456789ab-0"), "{out}");
    let (ok, out) = as_sa(&["get", "secrets", "-n", "greenlight"], None);
    assert!(!ok && out.contains("forbidden"), "{out}");
}

#[test]
fn with_namespaces_given_applications_are_read_only_there() {
    let kube = KubeApiserver::start_with_namespaces(&["greenlight", "apps", "team-a", "other"]);
    let config = install(&kube, "greenlight", &["--set", "namespaces={apps,team-a}"]);
    for ns in ["apps", "team-a"] {
        may(
            &kube,
            &config,
            &[
                ("get", APPS, ns),
                ("list", APPS, ns),
                ("watch", APPS, ns),
                ("create", EVENTS, ns),
                ("patch", EVENTS, ns),
            ],
        );
        may_not(
            &kube,
            &config,
            &[("update", APPS, ns), ("delete", APPS, ns)],
        );
    }
    may_not(
        &kube,
        &config,
        &[
            ("list", APPS, "*"),
            ("list", APPS, "argocd"),
            ("get", APPS, "other"),
            ("create", EVENTS, "argocd"),
            ("create", EVENTS, "other"),
        ],
    );
    store_rights(&kube, &config, "greenlight", "other");
}

#[test]
fn the_readme_shows_the_rules_the_chart_grants() {
    let readme = std::fs::read_to_string(root().join(CHART).join("README.md")).unwrap();
    let rbac = &readme[readme.find("## RBAC").expect("README.md has ## RBAC")..];
    let blocks: Vec<Value> = rbac
        .split("```yaml\n")
        .skip(1)
        .take(2)
        .map(|b| {
            let body = b.split("\n```").next().unwrap();
            let mut docs = yaml::load_all_str("README.md", body);
            assert_eq!(docs.len(), 1, "{body}");
            docs.remove(0)
        })
        .collect();
    assert_eq!(blocks.len(), 2, "two rule blocks under ## RBAC");
    let objs = objects(&[]);
    assert_eq!(blocks[0], one(&objs, "ClusterRole")["rules"]);
    let shown = blocks[1]
        .to_string()
        .replace("<leaderElection.leaseName>", "gl-greenlight");
    assert_eq!(
        serde_json::from_str::<Value>(&shown).unwrap(),
        one(&objs, "Role")["rules"]
    );
    // The same rules where namespaces are given.
    let objs = objects(&["--set", "namespaces={apps}"]);
    let roles: Vec<&Value> = objs.iter().filter(|o| o["kind"] == "Role").collect();
    let apps = roles
        .iter()
        .find(|r| r["metadata"]["namespace"] == "apps")
        .expect("a Role in apps");
    assert_eq!(blocks[0], apps["rules"]);
}

/// The watchdog itself, as two replicas, with nothing but a token of the chart's ServiceAccount
/// (the chart's rendered RBAC applied, nothing else granted): the Lease, the store, the
/// Applications and their Events all work — a commit is confirmed, `status` reads the store with
/// the same token, and after SIGTERM the Lease passes to the other replica — and no request is
/// refused.
#[test]
fn two_replicas_run_on_nothing_but_the_charts_service_account() {
    use common::{GOOD2, Repo, sandbox, settled, trailer};
    use greenlight_testkit::process::Proc;
    use std::time::{Duration, Instant};
    const T: Duration = Duration::from_secs(90);
    let kube = KubeApiserver::start();
    let ns = greenlight_testkit::kube::ARGOCD_NAMESPACE;
    let config = install(&kube, ns, &[]);
    let rendered = objects(&["--namespace", ns, "--kube-version", "1.20"]);
    let args: Vec<String> = one(&rendered, "Deployment")["spec"]["template"]["spec"]["containers"]
        [0]["args"]
        .as_array()
        .expect("the container's args")
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let flag = |name: &str| -> String {
        args.iter()
            .find_map(|a| a.strip_prefix(&format!("--{name}=")))
            .unwrap_or_else(|| panic!("the chart passes --{name}=…: {args:?}"))
            .to_string()
    };
    let (store, lease, store_ns) = (
        flag("store-name"),
        flag("lease-name"),
        flag("store-namespace"),
    );
    assert_eq!(store_ns, ns);

    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let _mirror = kube.mirror_sandbox(&sb.url);
    let replica = |name: &str| {
        let data = repo.path(&format!("replicas/{name}"));
        let argv: Vec<String> = [
            "watch",
            "--repo",
            &repo.repo(),
            "--source",
            "kube",
            "--kubeconfig",
            config.to_str().unwrap(),
            "--store",
            "kube",
            "--store-namespace",
            &store_ns,
            "--store-name",
            &store,
            "--leader-elect",
            "--lease-name",
            &lease,
            "--lease-duration",
            "3s",
            "--renew-deadline",
            "2s",
            "--lease-retry-period",
            "500ms",
            "--identity",
            name,
            "--data-dir",
            data.to_str().unwrap(),
            "--stable-for",
            "2s",
            "--fetch-interval",
            "200ms",
            "--stale-after",
            "12s",
            "--unknown-app-grace",
            "3s",
            "--reexec-interval",
            "0",
            "--git-author",
            "greenlight-bot <bot@greenlight.test>",
        ]
        .map(String::from)
        .into();
        Proc::spawn(BIN, argv, &[])
    };
    let mut a = replica("a");
    a.wait_line(" leads: the Lease", T);
    a.wait_line(greenlight_testkit::watch::WATCHING, T);
    let b = replica("b");
    b.wait_line("standing by as b_", T);
    let good = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "30", "arm")),
    );
    // `status` with the same token reads the store.
    let status = || -> Value {
        let out = Command::new(BIN)
            .args(["status", "--store", "kube", "--kubeconfig"])
            .arg(&config)
            .args([
                "--store-namespace",
                &store_ns,
                "--store-name",
                &store,
                "--json",
            ])
            .output()
            .expect("status runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let end = Instant::now() + T;
    loop {
        let st = status();
        let confirmed = st["watches"].as_array().is_some_and(|ws| {
            ws.iter()
                .any(|w| w["commit"] == good.as_str() && w["state"] == "CONFIRMED")
        });
        if confirmed {
            break;
        }
        assert!(Instant::now() < end, "{st}\n--- a:\n{}", a.output());
        std::thread::sleep(Duration::from_millis(200));
    }
    // The verdict's Events, written with the token on the Application.
    let events = kube.kubectl_ok(&["get", "events.events.k8s.io", "-n", ns, "-o", "json"]);
    assert!(
        events.contains("CONFIRMED") || events.contains("Confirmed"),
        "{events}"
    );
    // The Lease passes on a graceful stop: the standby updates it with the same rights.
    a.sigterm();
    assert_eq!(a.wait_exit(T).code(), Some(0), "{}", a.output());
    b.wait_line(" leads: the Lease", T);
    b.wait_line(greenlight_testkit::watch::WATCHING, T);
    for (name, out) in [("a", a.output()), ("b", b.output())] {
        for refused in ["Forbidden", "forbidden", " 403"] {
            assert!(
                !out.contains(refused),
                "replica {name} was refused a request:\n{out}"
            );
        }
    }
}
