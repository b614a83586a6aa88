//! What docs/deploy.md and deploy/ tell an operator to apply, checked against a real
//! kube-apiserver (`greenlight_testkit::KubeApiserver`): `deploy/rbac.yaml` is created, the
//! guide's Deployment (with its ConfigMap and PersistentVolumeClaim) passes the apiserver's own
//! validation (`kubectl apply --dry-run=server`), and every flag its container passes is one
//! `greenlight watch` takes.

mod common;
use common::*;
use greenlight_testkit::KubeApiserver;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// The first ```yaml block after `heading` in docs/deploy.md.
fn yaml_after(heading: &str) -> String {
    let doc = std::fs::read_to_string(format!("{ROOT}/docs/deploy.md")).unwrap();
    let at = doc
        .find(heading)
        .unwrap_or_else(|| panic!("docs/deploy.md has no {heading:?}"));
    let rest = &doc[at..];
    let start = rest.find("```yaml\n").expect("a yaml block") + "```yaml\n".len();
    let len = rest[start..].find("\n```").expect("the block's end");
    rest[start..start + len].to_string()
}

#[test]
fn the_guides_manifests_are_what_a_real_apiserver_accepts() {
    let kube = KubeApiserver::start();
    let rbac = std::fs::read_to_string(format!("{ROOT}/deploy/rbac.yaml")).unwrap();
    kube.kubectl_stdin(&["create"], &rbac);
    let deployment = yaml_after("### A Deployment by hand");
    assert!(deployment.contains("kind: Deployment"), "{deployment}");
    let out = kube.kubectl_stdin(&["apply", "--dry-run=server"], &deployment);
    assert!(
        out.contains("deployment.apps/greenlight") && out.contains("(server dry run)"),
        "{out}"
    );

    // Every flag the container passes is one of `watch`'s.
    let help = std::process::Command::new(BIN)
        .args(["watch", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).to_string();
    let flags: Vec<&str> = deployment
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- --"))
        .map(|f| f.split('=').next().unwrap_or(f))
        .collect();
    assert!(
        flags.contains(&"source") && flags.contains(&"listen"),
        "{flags:?}"
    );
    for f in flags {
        assert!(
            help.contains(&format!("--{f}")),
            "--{f} is no flag of watch"
        );
    }
}
