//! Every file a command reads besides the gate's (promote_files.rs) is bounded and must be a
//! regular file: `lint`'s `.greenlight.toml` (which it reads from the current directory, so a
//! pull request can make it a FIFO or a link to `/dev/zero`) and `--config`, its inputs and
//! standard input, `trailer check`'s message, `watch --config`, `state import`'s document and
//! standard input. Each ends promptly — a bounded wait: a read of `/dev/zero` never ends and a
//! FIFO blocks until a writer comes — with a non-zero exit and an error naming what and where.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Far longer than reading a small file takes; far shorter than the test harness's patience.
const WITHIN: Duration = Duration::from_secs(30);

const BIN: &str = env!("CARGO_BIN_EXE_greenlight");

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path and a mode; mkfifo touches nothing else.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(rc, 0, "mkfifo {}", path.display());
}

/// `greenlight args…` in `dir` with `stdin` (closed when `None`): its exit code and its
/// standard output and error, or a failure when it has not ended within [`WITHIN`].
#[track_caller]
fn run(dir: &Path, args: &[&str], stdin: Option<File>) -> (Option<i32>, String) {
    let out_path = dir.join(".out");
    let out = File::create(&out_path).unwrap();
    let err = out.try_clone().unwrap();
    let mut child = Command::new(BIN)
        .current_dir(dir)
        .args(args)
        .stdin(stdin.map_or_else(Stdio::null, Stdio::from))
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > WITHIN {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "greenlight {args:?} did not end within {WITHIN:?}: {}",
                std::fs::read_to_string(&out_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = std::fs::read_to_string(&out_path).unwrap_or_default();
    std::fs::remove_file(&out_path).unwrap();
    (status.code(), text)
}

/// A FIFO and `/dev/zero` (reached through a link named `name` in `dir`, as a pull request
/// would place it): each with the words its error must hold.
fn hostile(dir: &Path, name: &str) -> Vec<(PathBuf, &'static str)> {
    let fifo = dir.join(format!("{name}.fifo"));
    mkfifo(&fifo);
    let zero = dir.join(format!("{name}.zero"));
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    vec![
        (fifo, "is a FIFO (named pipe), not a regular file"),
        (zero, "is a character device, not a regular file"),
    ]
}

#[test]
fn lints_config_in_the_working_directory_that_is_a_fifo_or_dev_zero_is_refused_promptly() {
    for kind in ["fifo", "zero"] {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("deploy.yaml"), "kind: ConfigMap\n").unwrap();
        let config = d.path().join(".greenlight.toml");
        if kind == "fifo" {
            mkfifo(&config);
        } else {
            std::os::unix::fs::symlink("/dev/zero", &config).unwrap();
        }
        for command in ["lint", "guard"] {
            let args: &[&str] = if command == "lint" {
                &["lint", "deploy.yaml"]
            } else {
                &["guard", "image", "registry.example/web:1.2.3"]
            };
            let (code, out) = run(d.path(), args, None);
            assert_eq!(code, Some(2), "{command} {kind}: {out}");
            assert!(
                out.contains("cannot read config file .greenlight.toml: is a "),
                "{command} {kind}: {out}"
            );
        }
    }
    // Named by --config: the same.
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("deploy.yaml"), "kind: ConfigMap\n").unwrap();
    for (path, words) in hostile(d.path(), "config") {
        let p = path.to_str().unwrap();
        let (code, out) = run(d.path(), &["lint", "--config", p, "deploy.yaml"], None);
        assert_eq!(code, Some(2), "{out}");
        assert!(
            out.contains(&format!("cannot read config file {p}: {words}")),
            "{out}"
        );
    }
    // Over the 1 MiB a config may hold.
    let big = d.path().join("big.toml");
    std::fs::write(&big, format!("# {}\n", "x".repeat(1 << 20))).unwrap();
    let (code, out) = run(
        d.path(),
        &["lint", "--config", big.to_str().unwrap(), "deploy.yaml"],
        None,
    );
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("larger than 1 MiB (1048576 bytes)"), "{out}");
}

#[test]
fn a_lint_input_that_is_a_fifo_or_dev_zero_is_refused_promptly_and_stdin_is_bounded() {
    let d = tempfile::tempdir().unwrap();
    for (path, words) in hostile(d.path(), "deploy.yaml") {
        let p = path.to_str().unwrap();
        let (code, out) = run(d.path(), &["lint", p], None);
        assert_eq!(code, Some(2), "{out}");
        assert!(out.contains(&format!("cannot read {p}: {words}")), "{out}");
    }
    // Standard input that never ends: read up to the limit, reported, never linted.
    let zero = File::open("/dev/zero").unwrap();
    let (code, out) = run(d.path(), &["lint", "-"], Some(zero));
    assert_ne!(code, Some(0), "{out}");
    assert!(
        out.contains("<stdin>") && out.contains("byte limit; not linted"),
        "{out}"
    );
}

#[test]
fn a_commit_message_that_is_a_fifo_or_dev_zero_is_refused_promptly() {
    let d = tempfile::tempdir().unwrap();
    for (path, words) in hostile(d.path(), "COMMIT_EDITMSG") {
        let p = path.to_str().unwrap();
        let (code, out) = run(d.path(), &["trailer", "check", p], None);
        assert_eq!(code, Some(2), "{out}");
        assert!(
            out.contains(&format!("cannot read commit message {p}: {words}")),
            "{out}"
        );
    }
}

#[test]
fn a_watch_config_that_is_a_fifo_or_dev_zero_is_refused_promptly() {
    let d = tempfile::tempdir().unwrap();
    for (path, words) in hostile(d.path(), "greenlight.toml") {
        let p = path.to_str().unwrap();
        let (code, out) = run(d.path(), &["watch", "--config", p], None);
        assert_eq!(code, Some(2), "{out}");
        assert!(out.contains(p) && out.contains(words), "{out}");
    }
}

#[test]
fn a_state_document_that_is_a_fifo_or_dev_zero_is_refused_promptly() {
    let d = tempfile::tempdir().unwrap();
    let state = d.path().join("state.db");
    let s = state.to_str().unwrap();
    for (path, words) in hostile(d.path(), "doc.json") {
        let p = path.to_str().unwrap();
        let (code, out) = run(d.path(), &["state", "import", "--state", s, p], None);
        assert_eq!(code, Some(2), "{out}");
        assert!(
            out.contains(&format!("cannot read the document {p}: {words}")),
            "{out}"
        );
    }
    // Standard input that never ends: refused at the limit.
    let zero = File::open("/dev/zero").unwrap();
    let (code, out) = run(
        d.path(),
        &["state", "import", "--state", s, "-"],
        Some(zero),
    );
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("the document on stdin is larger than 256 MiB"),
        "{out}"
    );
    assert!(!state.exists(), "nothing is written for a refused document");
}
