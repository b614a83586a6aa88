//! Secrets: a token reaches git through greenlight's credential script and the environment
//! only — never argv, the clone's files or an error — and credentials inside URLs are redacted
//! wherever they could surface. An HTTP server on 127.0.0.1 asks for Basic authentication,
//! records what git sends, and looks at every process's command line while git is talking to
//! it; a real smart-HTTP remote (`git http-backend` behind the test kit's front that demands one exact
//! `Authorization` header) shows that the credentials git sends are the ones that work.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use common::Fixture;
use greenlight_git::{ASKPASS_SCRIPT, Auth, Repo, Secret, redact_url};
use greenlight_testkit::{GitHttpServer, Remote, git};

/// What the server saw.
#[derive(Default)]
struct Seen {
    authorizations: Vec<String>,
    /// Command lines of processes that held a watched secret while a request was served.
    leaking_cmdlines: Vec<String>,
}

/// An HTTP server that answers 401 (Basic) to requests without credentials and 403 to
/// requests with them, so git asks for credentials once, sends them, and gives up.
struct AuthServer {
    port: u16,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl AuthServer {
    fn start(watched_secrets: Vec<String>) -> AuthServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (seen, stop) = (seen.clone(), stop.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(stream) = stream {
                        serve(stream, &seen, &watched_secrets);
                    }
                }
            })
        };
        AuthServer {
            port,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self, userinfo: &str) -> String {
        format!("http://{userinfo}127.0.0.1:{}/team/app.git", self.port)
    }
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(stream: TcpStream, seen: &Mutex<Seen>, watched: &[String]) {
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut authorization = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("authorization")
        {
            authorization = Some(value.trim().to_owned());
        }
    }
    // git (and its remote helper) are alive now: no command line may hold a secret.
    let leaks = cmdlines_containing(watched);
    let mut seen = seen.lock().unwrap();
    seen.leaking_cmdlines.extend(leaks);
    let response = match authorization {
        None => {
            "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"test\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        }
        Some(a) => {
            seen.authorizations.push(a);
            "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        }
    };
    let mut stream = stream;
    let _ = stream.write_all(response.as_bytes());
}

fn cmdlines_containing(secrets: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
        if secrets.iter().any(|s| cmdline.contains(s.as_str())) {
            found.push(cmdline);
        }
    }
    found
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
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A token no other process on the machine can hold by chance.
fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

fn files_containing(dir: &Path, needle: &str) -> Vec<String> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p)
                && String::from_utf8_lossy(&bytes).contains(needle)
            {
                hits.push(p.display().to_string());
            }
        }
    }
    hits
}

#[test]
fn a_token_reaches_the_server_through_the_credential_script_only() {
    let token = unique("tok");
    let server = AuthServer::start(vec![token.clone()]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data/clone");
    let auth = Auth {
        token: Some(Secret::new(token.clone())),
        username: None,
    };
    let err = Repo::open_or_clone(&server.url(""), &dir, auth).unwrap_err();

    let seen = server.seen.lock().unwrap();
    assert_eq!(
        seen.authorizations,
        vec![basic("x-access-token", &token)],
        "git sent the token with the default username"
    );
    assert!(
        seen.leaking_cmdlines.is_empty(),
        "{:?}",
        seen.leaking_cmdlines
    );
    let text = format!("{err} {err:?}");
    assert!(!text.contains(&token), "{text}");
    assert!(text.contains("git clone") && text.contains("403"), "{text}");
    assert!(files_containing(tmp.path(), &token).is_empty());
    assert!(!dir.exists());
}

#[test]
fn credentials_in_the_url_are_taken_out_of_argv_and_redacted() {
    let password = unique("hunter2");
    let server = AuthServer::start(vec![password.clone()]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data/clone");
    let url = server.url(&format!("bot:{password}@"));
    let err = Repo::open_or_clone(&url, &dir, Auth::default()).unwrap_err();

    let seen = server.seen.lock().unwrap();
    assert_eq!(seen.authorizations, vec![basic("bot", &password)]);
    assert!(
        seen.leaking_cmdlines.is_empty(),
        "{:?}",
        seen.leaking_cmdlines
    );
    let text = format!("{err} {err:?}");
    assert!(!text.contains(&password), "{text}");
    assert!(text.contains("127.0.0.1"), "{text}");
}

#[test]
fn an_existing_clone_fetches_with_the_token_from_the_environment() {
    let token = unique("tok");
    let server = AuthServer::start(vec![token.clone()]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("clone");
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q"]);
    git(&dir, &["remote", "add", "origin", &server.url("")]);
    let auth = Auth {
        token: Some(Secret::new(token.clone())),
        username: Some("ci-bot".into()),
    };
    let repo = Repo::open_or_clone(&server.url(""), &dir, auth).unwrap();
    let err = repo.fetch("main").unwrap_err();

    let seen = server.seen.lock().unwrap();
    assert_eq!(seen.authorizations, vec![basic("ci-bot", &token)]);
    assert!(
        seen.leaking_cmdlines.is_empty(),
        "{:?}",
        seen.leaking_cmdlines
    );
    assert!(!format!("{err} {err:?} {repo:?} {repo}").contains(&token));
    assert!(format!("{repo:?}").contains("***"));
    // The askpass script in the clone holds no secret; nothing in the clone does.
    let askpass = std::fs::read_to_string(dir.join(".git/greenlight/askpass")).unwrap();
    assert_eq!(askpass, ASKPASS_SCRIPT);
    assert!(files_containing(&dir, &token).is_empty());
}

#[test]
fn the_credential_script_answers_from_the_environment() {
    let fx = Fixture::build("history.sh");
    fx.open();
    let script = fx.clone_dir().join(".git/greenlight/askpass");
    let ask = |prompt: &str, user: Option<&str>| {
        let mut cmd = std::process::Command::new(&script);
        cmd.arg(prompt).env("GREENLIGHT_GIT_TOKEN", "t0ken");
        match user {
            Some(u) => cmd.env("GREENLIGHT_GIT_USERNAME", u),
            None => cmd.env_remove("GREENLIGHT_GIT_USERNAME"),
        };
        // The script was written just now; another test thread that forked while it was open
        // for writing holds that descriptor until its child execs, and an exec of the script
        // meanwhile fails with ETXTBSY. That window closes by itself: try again.
        let mut tries = 0;
        let out = loop {
            match cmd.output() {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                other => break other.unwrap(),
            }
        };
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(
        ask("Username for 'https://h.example': ", None),
        "x-access-token\n"
    );
    assert_eq!(
        ask("Username for 'https://h.example': ", Some("me")),
        "me\n"
    );
    assert_eq!(
        ask("Password for 'https://me@h.example': ", Some("me")),
        "t0ken\n"
    );
    // As git's credential helper: both answers at once, so git never prompts.
    assert_eq!(
        ask("get", None),
        "username=x-access-token\npassword=t0ken\n"
    );
    assert_eq!(ask("get", Some("me")), "username=me\npassword=t0ken\n");
    assert_eq!(ask("store", Some("me")), "");
    assert!(!ASKPASS_SCRIPT.contains("t0ken"));
}

#[test]
fn debug_and_display_never_show_credentials() {
    assert_eq!(
        redact_url("https://bot:ghp_x@git.example/team/app.git"),
        "https://***@git.example/team/app.git"
    );
    let auth = Auth {
        token: Some(Secret::new("ghp_x")),
        username: Some("bot".into()),
    };
    assert!(!format!("{auth:?}").contains("ghp_x"));

    let fx = Fixture::build("history.sh");
    let repo = Repo::open_or_clone(&fx.remote(), &fx.clone_dir(), auth).unwrap();
    let err = repo.fetch("missing-branch").unwrap_err();
    for text in [
        format!("{repo:?}"),
        format!("{repo}"),
        format!("{err}"),
        format!("{err:?}"),
    ] {
        assert!(!text.contains("ghp_x"), "{text}");
    }
}

/// Replaces the credential script of the clone at `dir` by one that records the arguments git
/// gives it (one line per run, in the returned file) and then answers as greenlight's does.
fn record_credential_script_args(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join(".git/greenlight/askpass");
    let original = dir.join(".git/greenlight/original-askpass");
    let log = dir.join(".git/greenlight/args.log");
    std::fs::write(&original, ASKPASS_SCRIPT).unwrap();
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            original.display()
        ),
    )
    .unwrap();
    for path in [&script, &original] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    log
}

#[test]
fn a_token_given_as_the_url_user_is_sent_with_an_empty_password() {
    let token = unique("tok");
    let remote = Remote::new("main");
    remote.write("app.yaml", "replicas: 1\n");
    let first = remote.commit_push("first");
    let server = GitHttpServer::start(remote.root(), &basic(&token, ""), vec![token.clone()]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data/clone");
    let url = server.url(&format!("{token}@"), "origin.git");

    let repo = Repo::open_or_clone(&url, &dir, Auth::default())
        .unwrap_or_else(|e| panic!("clone with the token as the URL's user: {e}"));
    assert_eq!(repo.remote_default_branch().unwrap(), "main");
    assert_eq!(repo.fetch("main").unwrap(), first);

    // Reopened as a restarted watchdog does: the existing clone fetches with the same
    // credentials, and git gives the credential script no argument that holds the token.
    drop(repo);
    let second = remote.commit_push("second");
    let repo = Repo::open_or_clone(&url, &dir, Auth::default()).unwrap();
    let args_log = record_credential_script_args(&dir);
    assert_eq!(repo.fetch("main").unwrap(), second);
    // git asked its credential helper and never prompted: a prompt (an askpass argument)
    // would name the user, here the token.
    let args = std::fs::read_to_string(&args_log).expect("git asked for credentials");
    assert!(args.lines().any(|l| l == "get"), "{args}");
    assert!(
        args.lines().all(|l| matches!(l, "get" | "store" | "erase")),
        "{args}"
    );

    let seen = server.seen();
    let passed: Vec<_> = seen.requests.iter().filter(|r| r.status == 200).collect();
    assert!(passed.len() >= 4, "{:?}", seen.requests);
    assert!(
        passed
            .iter()
            .all(|r| r.authorization.as_deref() == Some(basic(&token, "").as_str())),
        "{:?}",
        seen.requests
    );
    assert!(
        seen.leaking_cmdlines.is_empty(),
        "{:?}",
        seen.leaking_cmdlines
    );
    assert!(
        !format!("{repo:?} {repo} {}", repo.remote()).contains(&token),
        "{repo:?}"
    );
    assert!(files_containing(&dir, &token).is_empty());
}

#[test]
fn a_wrong_token_given_as_the_url_user_is_refused_and_redacted() {
    let token = unique("tok");
    let wrong = unique("wrong");
    let remote = Remote::new("main");
    remote.commit_push("first");
    let server = GitHttpServer::start(remote.root(), &basic(&token, ""), vec![wrong.clone()]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data/clone");
    let url = server.url(&format!("{wrong}@"), "origin.git");

    let err = Repo::open_or_clone(&url, &dir, Auth::default()).unwrap_err();

    let seen = server.seen();
    // git did offer the wrong token (as the user, with an empty password) and was refused.
    assert!(
        seen.requests
            .iter()
            .any(|r| r.status == 401 && r.authorization == Some(basic(&wrong, ""))),
        "{:?}",
        seen.requests
    );
    assert!(seen.requests.iter().all(|r| r.status == 401));
    assert!(
        seen.leaking_cmdlines.is_empty(),
        "{:?}",
        seen.leaking_cmdlines
    );
    let text = format!("{err} {err:?}");
    assert!(!text.contains(&wrong), "{text}");
    assert!(
        text.contains("git clone") && text.contains("127.0.0.1"),
        "{text}"
    );
    assert!(files_containing(tmp.path(), &wrong).is_empty());
    assert!(!dir.exists());
}

#[test]
fn a_token_file_goes_with_the_url_user_or_the_default_one() {
    let token = unique("tok");
    let remote = Remote::new("main");
    let tip = remote.commit_push("first");
    let tmp = tempfile::tempdir().unwrap();
    let auth = || Auth {
        token: Some(Secret::new(token.clone())),
        username: None,
    };

    let server = GitHttpServer::start(remote.root(), &basic("bot", &token), vec![token.clone()]);
    let dir = tmp.path().join("with-user/clone");
    let repo = Repo::open_or_clone(&server.url("bot@", "origin.git"), &dir, auth()).unwrap();
    assert_eq!(repo.fetch("main").unwrap(), tip);
    let seen = server.seen();
    assert!(seen.requests.iter().any(|r| r.status == 200));
    assert!(seen.leaking_cmdlines.is_empty());
    assert!(!format!("{repo:?} {repo}").contains(&token));

    let server = GitHttpServer::start(
        remote.root(),
        &basic("x-access-token", &token),
        vec![token.clone()],
    );
    let dir = tmp.path().join("without-user/clone");
    let repo = Repo::open_or_clone(&server.url("", "origin.git"), &dir, auth()).unwrap();
    assert_eq!(repo.fetch("main").unwrap(), tip);
    assert!(server.seen().requests.iter().any(|r| r.status == 200));
    assert!(files_containing(tmp.path(), &token).is_empty());
}
