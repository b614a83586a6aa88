//! Every file the promotion gate reads from the file system is bounded and must be a regular
//! file (docs/promote.md, "Files the gate reads"): `promote plan` and `promote run` given a
//! config whose `analysisTemplate.file` is `/dev/zero`, a FIFO, a directory or an oversized
//! file, a `--config` that is a FIFO, and a `--git-token-file` that is a FIFO or `/dev/zero`.
//! Each ends promptly (a bounded wait: a read of `/dev/zero` never ends, a FIFO blocks until a
//! writer comes) with an error naming the flag or key and the file, and a non-zero exit.

use greenlight_testkit::process::Proc;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Far longer than reading a config takes; far shorter than the test harness's patience.
const WITHIN: Duration = Duration::from_secs(30);

const DIGEST: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000001";

const HEAD: &str = "apiVersion: greenlight.dev/v1alpha1
kind: Promotion
live:
  app: web
  manifest: deploy/prod/web.yaml
  workload:
    kind: Deployment
    name: web
    namespace: shop
    container: web
candidate:
  app: web-candidates
  path: deploy/candidates
  port: 8080
checks:
";

fn config_with_template(file: &Path) -> String {
    format!(
        "{HEAD}  - name: success-rate
    analysisTemplate:
      file: {}
",
        file.display()
    )
}

fn config_with_http() -> String {
    format!(
        "{HEAD}  - name: ready
    http:
      url: http://{{{{candidate.service}}}}.{{{{candidate.namespace}}}}.svc:{{{{candidate.port}}}}/healthz
"
    )
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path and a mode; mkfifo touches nothing else.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(rc, 0, "mkfifo {}", path.display());
}

/// `greenlight promote <action> --config <config> [extra]` in `dir`; its exit code and its
/// output, waited for with a bound.
fn promote(dir: &Path, action: &str, config: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let mut args: Vec<String> = vec![
        "promote".into(),
        action.into(),
        "--config".into(),
        config.display().to_string(),
    ];
    if action == "run" {
        for a in [
            "--repo",
            "/nonexistent/deploy.git",
            "--argocd-url",
            "http://127.0.0.1:1",
            "--candidate",
        ] {
            args.push(a.into());
        }
        args.push(format!("registry.example/web@{DIGEST}"));
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let mut p = Proc::spawn_in(env!("CARGO_BIN_EXE_greenlight"), Some(dir), &args, &[]);
    let status = p.wait_exit(WITHIN);
    (status.code(), p.output())
}

/// The files that are no AnalysisTemplate a reader could finish: each with the words its
/// error must hold.
fn bad_files(dir: &Path) -> Vec<(PathBuf, String)> {
    let fifo = dir.join("template.fifo");
    mkfifo(&fifo);
    let directory = dir.join("templates");
    std::fs::create_dir(&directory).unwrap();
    // One byte over the 1 MiB a YAML file may hold: a comment, valid YAML all the way.
    let big = dir.join("big.yaml");
    let mut text = String::from("# ");
    text.push_str(&"x".repeat((1 << 20) - 2));
    text.push('\n');
    assert_eq!(text.len(), (1 << 20) + 1);
    std::fs::write(&big, text).unwrap();
    vec![
        (
            PathBuf::from("/dev/zero"),
            "cannot read /dev/zero: is a character device, not a regular file".into(),
        ),
        (
            fifo.clone(),
            format!(
                "cannot read {}: is a FIFO (named pipe), not a regular file",
                fifo.display()
            ),
        ),
        (
            directory.clone(),
            format!(
                "cannot read {}: is a directory, not a regular file",
                directory.display()
            ),
        ),
        (
            big.clone(),
            format!(
                "cannot read {}: larger than 1 MiB (1048576 bytes), the most analysisTemplate.file may hold",
                big.display()
            ),
        ),
    ]
}

#[test]
fn an_analysis_template_that_is_no_regular_file_or_too_large_is_refused_promptly() {
    let d = tempfile::tempdir().unwrap();
    let config = d.path().join("promote.yaml");
    for (file, want) in bad_files(d.path()) {
        std::fs::write(&config, config_with_template(&file)).unwrap();
        for action in ["plan", "run"] {
            let (code, out) = promote(d.path(), action, &config, &[]);
            assert_eq!(code, Some(2), "{action} {}: {out}", file.display());
            assert!(
                out.contains("checks[0].analysisTemplate.file: "),
                "{action}: names the key: {out}"
            );
            assert!(out.contains(&want), "{action}: wants {want:?}: {out}");
            assert!(
                out.contains("problem(s); nothing was"),
                "{action}: nothing ran: {out}"
            );
        }
    }
}

#[test]
fn a_config_that_is_a_fifo_is_refused_promptly() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("promote.yaml");
    mkfifo(&fifo);
    for action in ["plan", "run"] {
        let (code, out) = promote(d.path(), action, &fifo, &[]);
        assert_eq!(code, Some(2), "{action}: {out}");
        assert_eq!(
            out,
            format!(
                "error: cannot read promotion config {}: is a FIFO (named pipe), not a regular file",
                fifo.display()
            ),
            "{action}"
        );
    }
}

#[test]
fn a_git_token_file_that_is_a_fifo_or_a_device_is_refused_promptly() {
    let d = tempfile::tempdir().unwrap();
    let config = d.path().join("promote.yaml");
    std::fs::write(&config, config_with_http()).unwrap();
    let fifo = d.path().join("token");
    mkfifo(&fifo);
    for (token, kind) in [
        (fifo.as_path(), "a FIFO (named pipe)"),
        (Path::new("/dev/zero"), "a character device"),
    ] {
        let (code, out) = promote(
            d.path(),
            "run",
            &config,
            &["--git-token-file", token.to_str().unwrap()],
        );
        assert_eq!(code, Some(2), "{out}");
        assert!(
            out.contains(&format!(
                "--git-token-file {}: is {kind}, not a regular file",
                token.display()
            )),
            "{out}"
        );
    }
    // Over the 64 KiB a token file may hold: refused, its contents never shown.
    let big = d.path().join("big-token");
    std::fs::write(&big, "t0ken".repeat(20_000)).unwrap();
    let (code, out) = promote(
        d.path(),
        "run",
        &config,
        &["--git-token-file", big.to_str().unwrap()],
    );
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains(&format!(
            "--git-token-file {}: larger than 64 KiB (65536 bytes), the most --git-token-file may hold",
            big.display()
        )),
        "{out}"
    );
    assert!(!out.contains("t0ken"), "{out}");
}
