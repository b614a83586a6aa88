//! What greenlight needs to reach its world, run as a user runs it: an Argo CD behind a
//! certificate signed by a private CA (`--argocd-ca-file`), a token whose RBAC cannot see an app
//! a trailer names (`watch --once` fails naming both), a git token in `--repo`'s URL (warned
//! about, never shown) or in `GREENLIGHT_GIT_TOKEN`, and state files greenlight cannot use
//! (every error names the file). Certificates are made with the openssl command line; the git
//! remote that demands credentials is the kit's smart-HTTP server.

mod common;
use common::*;
use greenlight_testkit::GitHttpServer;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(args: &[String], envs: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args).env_remove("GREENLIGHT_GIT_TOKEN");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[track_caller]
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A private CA (`ca.pem`) and a certificate for 127.0.0.1 it signed (`server.pem`,
/// `server.key`), as an operator's CA signs the certificate argocd-server serves; a
/// self-signed certificate of another CA (`other.pem`, `other.key`); and a self-signed
/// certificate that is no CA (`self.pem`, `self.key`), as Argo CD generates its default one
/// (`IsCA: false`, its own names and localhost).
struct Certs {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    other_ca: PathBuf,
    other_key: PathBuf,
    self_signed: PathBuf,
    self_key: PathBuf,
}

fn make_certs(dir: &Path) -> Certs {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
    for (name, cn) in [("ca", "greenlight test CA"), ("other", "another CA")] {
        let (key, pem, subj) = (
            format!("{name}.key"),
            format!("{name}.pem"),
            format!("/CN={cn}"),
        );
        let mut args = vec!["req", "-x509", "-nodes", "-days", "2", "-subj", &subj];
        args.extend(ec);
        args.extend([
            "-keyout",
            &key,
            "-out",
            &pem,
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        openssl(dir, &args);
    }
    let mut args = vec![
        "req",
        "-x509",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/O=Argo CD",
    ];
    args.extend(ec);
    args.extend([
        "-keyout",
        "self.key",
        "-out",
        "self.pem",
        "-addext",
        "basicConstraints=critical,CA:FALSE",
        "-addext",
        "subjectAltName=DNS:localhost,DNS:argocd-server,IP:127.0.0.1",
        "-addext",
        "extendedKeyUsage=serverAuth",
    ]);
    openssl(dir, &args);
    let mut args = vec!["req", "-new", "-nodes", "-subj", "/CN=127.0.0.1"];
    args.extend(ec);
    args.extend(["-keyout", "server.key", "-out", "server.csr"]);
    openssl(dir, &args);
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.pem",
        ],
    );
    Certs {
        ca: dir.join("ca.pem"),
        cert: dir.join("server.pem"),
        key: dir.join("server.key"),
        other_ca: dir.join("other.pem"),
        other_key: dir.join("other.key"),
        self_signed: dir.join("self.pem"),
        self_key: dir.join("self.key"),
    }
}

#[test]
fn an_argocd_behind_a_private_ca_needs_argocd_ca_file_and_works_with_it() {
    let repo = Repo::new();
    let certs = make_certs(repo.root());
    let sb = sandbox(
        &repo,
        &["web=apps/web"],
        &[
            "--tls-cert",
            certs.cert.to_str().unwrap(),
            "--tls-key",
            certs.key.to_str().unwrap(),
        ],
    );
    assert!(sb.url.starts_with("https://127.0.0.1:"), "{}", sb.url);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web\n\n{}", trailer("web", "60", "shadow")),
    );
    let state = repo.path("once.db");
    let once = |extra: &[&str]| {
        let mut args = vec!["--once"];
        args.extend(extra);
        run(&watch_args(&repo, &sb.url, &state, &args), &[])
    };

    // Without the CA: a failure that says what happened and what to give.
    let out = once(&[]);
    let text = stderr(&out);
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("the TLS handshake failed"), "{text}");
    assert!(
        text.contains("not signed by any authority greenlight trusts"),
        "{text}"
    );
    assert!(text.contains("UnknownIssuer"), "{text}");
    assert!(text.contains("--argocd-ca-file <"), "{text}");
    assert!(text.contains("argocd-server-tls"), "{text}");

    // Another CA's certificate is no help, and the message names the file given.
    let out = once(&["--argocd-ca-file", certs.other_ca.to_str().unwrap()]);
    let text = stderr(&out);
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains(&format!(
            "--argocd-ca-file {} does not hold the CA",
            certs.other_ca.display()
        )),
        "{text}"
    );

    // With it: the self-check passes, and the trailer's watch would start.
    let out = once(&["--argocd-ca-file", certs.ca.to_str().unwrap()]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("self-check passed"), "{text}");
    assert!(text.contains("1 watch(es) would start"), "{text}");

    // And the daemon reaches a verdict over HTTPS.
    let wd = watchdog(
        &repo,
        &sb.url,
        &["--argocd-ca-file", certs.ca.to_str().unwrap()],
        &[],
    );
    let c2 = repo.set_image(
        "web",
        GOOD,
        &format!("web back\n\n{}", trailer("web", "60", "shadow")),
    );
    assert_ne!(c, c2);
    wd.wait_state(&c2, "CONFIRMED", std::time::Duration::from_secs(60));
}

/// Argo CD's default certificate is self-signed: given as `--argocd-ca-file`, it is trusted.
/// A self-signed CA certificate served as the server's own is refused even when given, and the
/// error says why and what to do instead.
#[test]
fn a_self_signed_certificate_is_trusted_when_given_unless_it_is_a_ca() {
    let repo = Repo::new();
    let certs = make_certs(repo.root());
    let state = repo.path("once.db");
    for (cert, key, works) in [
        (&certs.self_signed, &certs.self_key, true),
        (&certs.other_ca, &certs.other_key, false),
    ] {
        let sb = sandbox(
            &repo,
            &["web=apps/web"],
            &[
                "--tls-cert",
                cert.to_str().unwrap(),
                "--tls-key",
                key.to_str().unwrap(),
            ],
        );
        let bare = run(&watch_args(&repo, &sb.url, &state, &["--once"]), &[]);
        let text = stderr(&bare);
        assert_ne!(bare.status.code(), Some(0), "{text}");
        let given = run(
            &watch_args(
                &repo,
                &sb.url,
                &state,
                &["--once", "--argocd-ca-file", cert.to_str().unwrap()],
            ),
            &[],
        );
        let text = stderr(&given);
        if works {
            assert_eq!(given.status.code(), Some(0), "{text}");
        } else {
            assert_ne!(given.status.code(), Some(0), "{text}");
            assert!(
                text.contains("is itself a CA certificate")
                    && text.contains("argocd-server-tls")
                    && text.contains("--argocd-ca-file"),
                "{text}"
            );
        }
    }
}

#[test]
fn a_ca_file_greenlight_cannot_use_is_a_usage_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let key_only = dir.path().join("key.pem");
    std::fs::write(
        &key_only,
        "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ2bUyDTHC0fFDI6yKAMk2UxUD8HiKLM0wBgkZ9YX/Y0\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    let garbled = dir.path().join("garbled.pem");
    std::fs::write(
        &garbled,
        "-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let missing = dir.path().join("missing.pem");
    for (file, why) in [
        (&missing, "cannot read it"),
        (&key_only, "holds no PEM certificate"),
        (&garbled, "certificate"),
        (&dir.path().to_path_buf(), "is a directory"),
    ] {
        let args: Vec<String> = [
            "watch",
            "--repo",
            "/nonexistent",
            "--argocd-url",
            "https://127.0.0.1:1",
            "--state",
            dir.path().join("s.db").to_str().unwrap(),
            "--argocd-ca-file",
            file.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec();
        let out = run(&args, &[]);
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{file:?}: {text}");
        assert!(
            text.contains(&format!("--argocd-ca-file {}: ", file.display())) && text.contains(why),
            "{file:?}: {text}"
        );
    }
}

/// Argo CD answers for an app the token's RBAC hides exactly as for one that does not exist:
/// the listing leaves it out, a read is 403 code 7 `permission denied`.
#[test]
fn a_scoped_token_sees_only_its_apps_as_argo_cd_answers() {
    use greenlight_testkit::http_request;
    let repo = Repo::new();
    let dir = tempfile::tempdir().unwrap();
    let (admin, scoped) = (dir.path().join("admin"), dir.path().join("ci"));
    std::fs::write(&admin, "admin.token.one\n").unwrap();
    std::fs::write(&scoped, "ci.token.two\n").unwrap();
    let sb = sandbox(
        &repo,
        &["web=apps/web", "other=apps/other"],
        &[
            "--token-file",
            admin.to_str().unwrap(),
            "--scoped-token-file",
            &format!("{}=default/we*", scoped.display()),
        ],
    );
    let get = |path: &str, token: &str| {
        let bearer = format!("Bearer {token}");
        http_request(
            "GET",
            &format!("{}{path}", sb.url),
            &[("Authorization", &bearer)],
        )
        .unwrap()
    };
    let names = |token: &str| {
        let r = get("/api/v1/applications", token);
        assert_eq!(r.status, 200, "{}", r.body);
        let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        let mut names: Vec<String> = v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        names
    };
    assert_eq!(names("admin.token.one"), ["other", "web"]);
    assert_eq!(names("ci.token.two"), ["web"]);
    assert_eq!(get("/api/v1/applications/web", "ci.token.two").status, 200);
    let hidden = get("/api/v1/applications/other", "ci.token.two");
    let missing = get("/api/v1/applications/nope", "ci.token.two");
    for r in [&hidden, &missing] {
        assert_eq!(r.status, 403, "{}", r.body);
        let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(v["code"], 7);
        assert_eq!(v["message"], "permission denied");
    }
    assert_eq!(hidden.body, missing.body, "the two cannot be told apart");
    assert_eq!(
        get("/api/v1/applications/other", "admin.token.one").status,
        200
    );
    assert_eq!(get("/api/v1/applications", "no.such.token").status, 401);
}

#[test]
fn once_fails_naming_an_app_the_token_cannot_see_and_the_commit() {
    let repo = Repo::new();
    let dir = tempfile::tempdir().unwrap();
    let (admin, scoped) = (dir.path().join("admin"), dir.path().join("ci"));
    std::fs::write(&admin, "admin.token.one\n").unwrap();
    std::fs::write(&scoped, "ci.token.two\n").unwrap();
    let sb = sandbox(
        &repo,
        &["web=apps/web", "other=apps/other"],
        &[
            "--token-file",
            admin.to_str().unwrap(),
            "--scoped-token-file",
            &format!("{}=default/web", scoped.display()),
        ],
    );
    let c = repo.set_image(
        "other",
        GOOD2,
        &format!("other\n\n{}", trailer("other", "60", "shadow")),
    );
    let state = repo.path("once.db");
    let once = |token: &Path| {
        let args = watch_args(
            &repo,
            &sb.url,
            &state,
            &["--once", "--argocd-token-file", token.to_str().unwrap()],
        );
        run(&args, &[])
    };
    let out = once(&scoped);
    let text = stderr(&out);
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains(&format!(
            "app other, named by the trailer of commit {}, is not visible to this token",
            &c[..8]
        )),
        "{text}"
    );
    assert!(
        text.contains("it does not exist, or the token's RBAC cannot see it"),
        "{text}"
    );
    assert!(text.contains("Argo CD answers both the same"), "{text}");
    assert!(!text.contains("ci.token.two"), "{text}");

    // The token that sees it: the same range passes.
    let out = once(&admin);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // A trailer naming an app the scoped token sees passes with it.
    repo.set_image(
        "web",
        GOOD2,
        &format!("web\n\n{}", trailer("web", "60", "shadow")),
    );
    let out = once(&scoped);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

fn basic(user: &str, password: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let input = format!("{user}:{password}").into_bytes();
    let mut out = String::from("Basic ");
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A token in `--repo`'s URL still works, is warned about with the safer ways named, and never
/// shows; the same token from `GREENLIGHT_GIT_TOKEN` works without a warning, in no output and
/// in no process's command line.
#[test]
fn a_token_in_the_repo_url_is_warned_about_and_the_environment_is_the_safe_way() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let token = format!("url-token-{}", std::process::id());
    let state = repo.path("once.db");

    let server = GitHttpServer::start(repo.root(), &basic("bot", &token), vec![token.clone()]);
    let url = server.url(&format!("bot:{token}@"), "origin.git");
    let mut args = watch_args(&repo, &sb.url, &state, &["--once"]);
    args[2] = url;
    let out = run(&args, &[]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("--repo http://***@127.0.0.1:")
            && text.contains("carries credentials in its URL")
            && text.contains("--git-token-file")
            && text.contains("GREENLIGHT_GIT_TOKEN"),
        "{text}"
    );
    assert!(
        !text.contains(&token) && !String::from_utf8_lossy(&out.stdout).contains(&token),
        "{text}"
    );
    // The same URL from the environment (or `--config`) is in no command line: it works, and
    // nothing claims it is in `ps`.
    let without_repo: Vec<String> = args
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 1 && *i != 2)
        .map(|(_, a)| a.clone())
        .collect();
    assert_eq!(args[1], "--repo", "{args:?}");
    let out = run(&without_repo, &[("GREENLIGHT_REPO", &args[2])]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(!text.contains("carries credentials"), "{text}");
    assert!(!text.contains(&token), "{text}");
    drop(server);

    let env_token = format!("env-token-{}", std::process::id());
    let server = GitHttpServer::start(
        repo.root(),
        &basic("x-access-token", &env_token),
        vec![env_token.clone()],
    );
    args[2] = server.url("", "origin.git");
    // Without the token the remote refuses: the variable is what makes it work.
    let out = run(&args, &[]);
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(&args, &[("GREENLIGHT_GIT_TOKEN", &env_token)]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(!text.contains("carries credentials"), "{text}");
    assert!(!text.contains(&env_token), "{text}");
    let seen = server.seen();
    assert!(
        seen.requests.iter().any(|r| r.status == 200),
        "{:?}",
        seen.requests
    );
    assert!(
        seen.leaking_cmdlines.is_empty(),
        "{:?}",
        seen.leaking_cmdlines
    );
}

/// Every state file greenlight cannot use is named in the error: a directory, a file that is no
/// database, one a newer greenlight wrote, a path under a file.
#[test]
fn state_file_errors_name_the_file() {
    let repo = Repo::new();
    let dir = tempfile::tempdir().unwrap();
    let a_dir = dir.path().join("a-dir");
    std::fs::create_dir(&a_dir).unwrap();
    let corrupt = dir.path().join("corrupt.db");
    std::fs::write(&corrupt, "this is not a database ".repeat(200)).unwrap();
    let under_a_file = corrupt.join("state.db");
    // A newer greenlight's file: a real SQLite database with a schema version from the future.
    let newer = dir.path().join("newer.db");
    {
        let c = rusqlite::Connection::open(&newer).unwrap();
        c.execute_batch(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
             INSERT INTO meta VALUES ('schema_version', '999');",
        )
        .unwrap();
    }
    let sb_url = "http://127.0.0.1:1";
    for (state, why) in [
        (&a_dir, "is a directory"),
        (&corrupt, "is not a greenlight state file"),
        (&newer, "a newer greenlight wrote it"),
        (&under_a_file, "cannot create"),
    ] {
        let args = watch_args(&repo, sb_url, state, &[]);
        let out = run(&args, &[]);
        let text = stderr(&out);
        assert!(
            matches!(out.status.code(), Some(1) | Some(2)),
            "{state:?}: {text}"
        );
        let named = if state == &under_a_file {
            corrupt.display().to_string()
        } else {
            state.display().to_string()
        };
        assert!(
            text.contains(&named) && text.contains(why),
            "{state:?}: {text}"
        );
        // `status` reads the same files and names them too.
        if state != &under_a_file {
            let out = Command::new(BIN)
                .args(["status", "--state", state.to_str().unwrap()])
                .output()
                .unwrap();
            let text = stderr(&out);
            assert_ne!(out.status.code(), Some(0), "{state:?}: {text}");
            assert!(
                text.contains(&state.display().to_string()),
                "{state:?}: {text}"
            );
        }
    }
    assert_eq!(
        std::fs::read(&corrupt).unwrap(),
        "this is not a database ".repeat(200).into_bytes(),
        "a file greenlight cannot read is left as it was"
    );
}

/// The token from `GREENLIGHT_GIT_TOKEN` is what pushes a revert to a remote that demands it:
/// the stand-in reads the same remote over HTTP (its credentials from git's environment-given
/// config), the watchdog fetches and pushes with the variable alone, and the token is in no
/// output and no process's command line.
#[test]
fn a_revert_is_pushed_with_the_token_from_the_environment() {
    let repo = Repo::new();
    let token = format!("push-token-{}", std::process::id());
    // git http-backend refuses pushes from a request without REMOTE_USER unless told to.
    repo.bare_git(&["config", "http.receivepack", "true"]);
    let server = GitHttpServer::start(
        repo.root(),
        &basic("x-access-token", &token),
        vec![token.clone()],
    );
    let url = server.url("", "origin.git");
    // The stand-in's git gets the token from a credential helper that reads it from the
    // environment: neither command line holds it.
    let helper = "!f() { echo username=x-access-token; echo \"password=$SANDBOX_GIT_TOKEN\"; }; f";
    let sb_envs = [
        ("GIT_CONFIG_COUNT", "1"),
        ("GIT_CONFIG_KEY_0", "credential.helper"),
        ("GIT_CONFIG_VALUE_0", helper),
        ("SANDBOX_GIT_TOKEN", token.as_str()),
    ];
    let sb_args = [
        "sandbox",
        "--repo",
        url.as_str(),
        "--listen",
        "127.0.0.1:0",
        "--sync-interval",
        "300ms",
        "--rollout-time",
        "1s",
        "--app",
        "web=apps/web",
    ];
    let sb = Sandbox::wait_listening(Proc::spawn_in(BIN, None, sb_args, &sb_envs));
    let good = repo.remote_tip();
    sb.wait_app("web", std::time::Duration::from_secs(60), |a| {
        healthy_at(a, &good)
    });
    let state = repo.path("state/greenlight.db");
    let wd = Watchdog::start(
        BIN,
        &url,
        &sb.url,
        &state,
        &[],
        &[("GREENLIGHT_GIT_TOKEN", token.as_str())],
    );
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: bad\n\n{}", trailer("web", "5", "arm")),
    );
    let w = wd.wait_state(&bad, "REVERTED", std::time::Duration::from_secs(90));
    let revert = w["revert_commit"].as_str().unwrap().to_string();
    assert_eq!(repo.remote_tip(), revert, "the revert was pushed over HTTP");
    let seen = server.seen();
    assert!(
        seen.requests.iter().any(|r| r.method == "POST"
            && r.target.ends_with("git-receive-pack")
            && r.status == 200),
        "{:?}",
        seen.requests
    );
    assert!(
        seen.leaking_cmdlines.is_empty(),
        "{:?}",
        seen.leaking_cmdlines
    );
    let all = format!("{}\n{}", wd.proc.output(), sb.proc.output());
    assert!(!all.contains(&token), "{all}");
    assert!(!all.contains("carries credentials"), "{all}");
}

/// A directory greenlight may not write, and a state file it may only read, are named in the
/// error. File modes do not bind root, so as root the binary runs as `nobody` (setpriv).
#[test]
fn state_files_greenlight_may_not_write_are_named() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let mode = |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
    mode(dir.path(), 0o755).unwrap();
    let read_only_dir = dir.path().join("ro");
    std::fs::create_dir(&read_only_dir).unwrap();
    let writable_dir = dir.path().join("rw");
    std::fs::create_dir(&writable_dir).unwrap();
    let read_only_file = writable_dir.join("state.db");
    rusqlite::Connection::open(&read_only_file)
        .unwrap()
        .execute_batch("CREATE TABLE other (a)")
        .unwrap();
    mode(&read_only_dir, 0o555).unwrap();
    mode(&writable_dir, 0o777).unwrap();
    mode(&read_only_file, 0o444).unwrap();
    let root = unsafe { libc::geteuid() } == 0;
    for (state, named, why) in [
        (
            read_only_dir.join("state.db"),
            read_only_dir.join("state.db.lock"),
            "Permission denied",
        ),
        (
            read_only_file.clone(),
            read_only_file.clone(),
            "readonly database",
        ),
    ] {
        let args = [
            "watch",
            "--repo",
            "/nonexistent",
            "--argocd-url",
            "http://127.0.0.1:1",
            "--state",
            state.to_str().unwrap(),
        ];
        let out = if root {
            Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN])
                .args(args)
                .output()
                .expect("setpriv runs")
        } else {
            Command::new(BIN).args(args).output().unwrap()
        };
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{state:?}: {text}");
        assert!(
            text.contains(&named.display().to_string()) && text.contains(why),
            "{state:?}: {text}"
        );
    }
}
