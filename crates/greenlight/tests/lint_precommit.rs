//! The repository's pre-commit hooks (`.pre-commit-hooks.yaml`) under real pre-commit, as a
//! user's repository uses them: a `.pre-commit-config.yaml` naming this repository's hooks by
//! `repo:` and `rev:`, `pre-commit install` of the `pre-commit` and `commit-msg` hook types, and
//! `git commit`, with the built `greenlight` first on `PATH` (the hooks are `language: system`).
//!
//! pre-commit comes from `scripts/test` (greenlight-testkit's `pre_commit` module finds it);
//! without it the test fails, naming that script — it never skips. Its home (clones of hook
//! repositories) is a temporary directory, never the user's `~/.cache/pre-commit`.

mod yaml;

use greenlight_testkit::{git, git_cmd, pre_commit};
use std::path::Path;
use std::process::{Command, Output};

/// The hooks each have a test here; a hook added to `.pre-commit-hooks.yaml` needs one.
const TESTED_HOOKS: [&str; 2] = ["greenlight-lint", "greenlight-trailer-check"];

const MUTABLE: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  strategy:
    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}
  template:
    spec:
      containers:
        - name: web
          image: registry.example/web:latest
";

const PINNED: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  strategy:
    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}
  template:
    spec:
      containers:
        - name: web
          image: registry.example/web:sha-1a2b3c4
";

/// A deploy script without an extension: pre-commit knows it for a shell script by its shebang.
const SCRIPT_MUTABLE: &str = "#!/bin/sh
set -eu
kubectl set image deployment/web web=registry.example/web:latest
";

const SCRIPT_PINNED: &str = "#!/bin/sh
set -eu
kubectl set image deployment/web web=registry.example/web:sha-1a2b3c4
";

/// An unrendered chart template: the hook leaves `templates/` out (linted as written it would be
/// a GL003 warning on the template expression).
const CHART_TEMPLATE: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  template:
    spec:
      containers:
        - name: web
          image: \"{{ .Values.image.repository }}:latest\"
";

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

/// Everything pre-commit runs under: its home, and a `PATH` with only the built `greenlight`
/// ahead of the inherited one.
struct Env {
    home: std::path::PathBuf,
    path: std::ffi::OsString,
}

impl Env {
    fn new(root: &Path) -> Env {
        let home = root.join("pre-commit-home");
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_greenlight"), bin.join("greenlight"))
            .unwrap();
        let inherited = std::env::var_os("PATH").unwrap_or_default();
        let path =
            std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(&inherited)))
                .unwrap();
        Env { home, path }
    }

    fn pre_commit(&self, dir: &Path, args: &[&str]) -> Output {
        pre_commit::command(dir, &self.home)
            .env("PATH", &self.path)
            .args(args)
            .output()
            .expect("run pre-commit")
    }

    /// `git commit` in `dir`, which runs the installed hooks.
    fn commit(&self, dir: &Path, message: &str) -> Output {
        let mut cmd: Command = git_cmd(dir);
        pre_commit::isolate(&mut cmd, &self.home)
            .env("PATH", &self.path)
            .args(["commit", "-m", message])
            .output()
            .expect("run git commit")
    }
}

fn commits(dir: &Path) -> usize {
    let out = git_cmd(dir)
        .args(["rev-list", "--count", "HEAD"])
        .output()
        .unwrap();
    if out.status.success() {
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    } else {
        0
    }
}

#[test]
fn the_hooks_under_real_pre_commit_refuse_a_mutable_tag_and_a_bad_trailer() {
    let manifest = yaml::load(".pre-commit-hooks.yaml");
    let ids: Vec<&str> = manifest
        .as_array()
        .expect(".pre-commit-hooks.yaml is a list of hooks")
        .iter()
        .map(|h| h["id"].as_str().expect("every hook has an id"))
        .collect();
    assert_eq!(
        ids, TESTED_HOOKS,
        "a hook of .pre-commit-hooks.yaml has no test here (or a tested one is gone)"
    );

    let d = tempfile::tempdir().unwrap();
    let env = Env::new(d.path());
    let version = pre_commit::version();

    // The hooks' repository: this repository's .pre-commit-hooks.yaml, committed.
    let hooks = d.path().join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    git(&hooks, &["init", "-q", "--initial-branch=main"]);
    std::fs::copy(
        yaml::repo_root().join(".pre-commit-hooks.yaml"),
        hooks.join(".pre-commit-hooks.yaml"),
    )
    .unwrap();
    let o = env.pre_commit(&hooks, &["validate-manifest", ".pre-commit-hooks.yaml"]);
    assert!(o.status.success(), "{version}: {}", text(&o));
    git(&hooks, &["add", "."]);
    git(&hooks, &["commit", "-q", "-m", "hooks"]);
    let rev = git(&hooks, &["rev-parse", "HEAD"]);

    // A user's repository that uses them.
    let work = d.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    git(&work, &["init", "-q", "--initial-branch=main"]);
    write(
        &work,
        ".pre-commit-config.yaml",
        &format!(
            "repos:\n  - repo: {}\n    rev: {rev}\n    hooks:\n      - id: greenlight-lint\n      - id: greenlight-trailer-check\n",
            hooks.display()
        ),
    );
    let o = env.pre_commit(&work, &["validate-config"]);
    assert!(o.status.success(), "{version}: {}", text(&o));
    let o = env.pre_commit(
        &work,
        &[
            "install",
            "--hook-type",
            "pre-commit",
            "--hook-type",
            "commit-msg",
        ],
    );
    assert!(o.status.success(), "{version}: {}", text(&o));
    assert!(work.join(".git/hooks/pre-commit").is_file());
    assert!(work.join(".git/hooks/commit-msg").is_file());

    // The config alone is YAML greenlight reads and passes.
    git(&work, &["add", "."]);
    let o = env.commit(&work, "pre-commit config");
    let out = text(&o);
    assert!(o.status.success(), "{version}: {out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("greenlight lint") && l.ends_with("Passed")),
        "{version}: {out}"
    );
    assert_eq!(commits(&work), 1);

    // A manifest and a script that ship a mutable tag, and a chart template: refused.
    write(&work, "deploy/web.yaml", MUTABLE);
    write(&work, "scripts/rollout", SCRIPT_MUTABLE);
    make_executable(&work.join("scripts/rollout"));
    write(&work, "chart/templates/deployment.yaml", CHART_TEMPLATE);
    git(&work, &["add", "."]);
    let o = env.commit(&work, "web: latest");
    let out = text(&o);
    assert!(!o.status.success(), "{version}: {out}");
    assert_eq!(commits(&work), 1, "the commit was refused: {out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("greenlight lint") && l.ends_with("Failed")),
        "{version}: {out}"
    );
    assert!(
        out.contains("- hook id: greenlight-lint\n- exit code: 1\n"),
        "{out}"
    );
    assert!(
        out.contains("error[GL001]: container `web`: `registry.example/web:latest` uses the mutable tag `latest`")
            && out.contains(" --> deploy/web.yaml:12:11\n"),
        "{out}"
    );
    assert!(
        out.contains("error[GL701]: `kubectl set image` sets container `web` to `registry.example/web:latest`")
            && out.contains(" --> scripts/rollout:3:38\n"),
        "{out}"
    );
    assert!(
        !out.contains("chart/templates"),
        "templates/ is left out: {out}"
    );

    // Pinned: the same commit goes through.
    write(&work, "deploy/web.yaml", PINNED);
    write(&work, "scripts/rollout", SCRIPT_PINNED);
    git(&work, &["add", "."]);
    let o = env.commit(&work, "web: sha-1a2b3c4");
    let out = text(&o);
    assert!(o.status.success(), "{version}: {out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("greenlight lint") && l.ends_with("Passed")),
        "{out}"
    );
    assert_eq!(commits(&work), 2);
    assert_eq!(
        git(&work, &["show", "--name-only", "--format=", "HEAD"]),
        "chart/templates/deployment.yaml\ndeploy/web.yaml\nscripts/rollout"
    );

    // The commit-msg hook: a `Nav-Watchdog:` trailer greenlight cannot read is refused, naming
    // the field at fault; the same commit with a valid trailer goes through.
    write(&work, "notes/web.txt", "canary\n");
    git(&work, &["add", "."]);
    let o = env.commit(&work, "web: canary\n\nNav-Watchdog: app=web mode=armed");
    let out = text(&o);
    assert!(!o.status.success(), "{version}: {out}");
    assert_eq!(commits(&work), 2, "the commit was refused: {out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("greenlight trailer check") && l.ends_with("Failed")),
        "{version}: {out}"
    );
    assert!(
        out.contains("- hook id: greenlight-trailer-check\n- exit code: 1\n"),
        "{out}"
    );
    assert!(
        out.contains(
            "error: Nav-Watchdog trailer \"app=web mode=armed\": field `mode`: \"armed\" is not `shadow` or `arm`"
        ),
        "{out}"
    );

    let o = env.commit(
        &work,
        "web: canary\n\nNav-Watchdog: app=web deadline=15m mode=arm",
    );
    let out = text(&o);
    assert!(o.status.success(), "{version}: {out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("greenlight trailer check") && l.ends_with("Passed")),
        "{out}"
    );
    assert_eq!(commits(&work), 3);
    assert_eq!(
        git(
            &work,
            &[
                "log",
                "-1",
                "--format=%(trailers:key=Nav-Watchdog,valueonly)"
            ]
        ),
        "app=web deadline=15m mode=arm"
    );

    // Nothing went to the user's cache: pre-commit cloned the hooks into its home here.
    assert!(env.home.join("db.db").is_file(), "{}", env.home.display());
}
