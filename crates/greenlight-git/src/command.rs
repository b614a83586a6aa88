//! Running git: one place that builds every git child process with its isolation from the
//! user's and the system's configuration, its environment, and its credentials.
//!
//! Owns the rule that a secret reaches git through the environment only (askpass), never
//! through argv, and that everything returned in an error is redacted. It must never pass a
//! token as an argument, nor let a user's config, hooks or credential helpers run.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use crate::error::{Error, Result};
use crate::secret::{Secret, redact_with};

/// The credential program greenlight writes beside its clone. It holds no secret: it answers
/// from the environment git inherited from greenlight. git runs it as its credential helper
/// (`get`: username and password on stdout; `store` and `erase`: nothing to do), so git has
/// both before it would prompt, and no credential ever reaches a command line: git's password
/// prompt names the username (`Password for 'https://USER@host': `), and a prompt is an
/// askpass program's argument. It is `GIT_ASKPASS` too, so that nothing else (a terminal, an
/// `SSH_ASKPASS`) is ever asked.
pub const ASKPASS_SCRIPT: &str = r#"#!/bin/sh
# greenlight's credentials for git: answers from the environment that greenlight gave this
# one git process, as git's credential helper and as its askpass. This file holds no secret.
case "$1" in
  get)
    cat >/dev/null
    printf 'username=%s\npassword=%s\n' "${GREENLIGHT_GIT_USERNAME:-x-access-token}" "${GREENLIGHT_GIT_TOKEN}" ;;
  store|erase) cat >/dev/null ;;
  Username*|username*) printf '%s\n' "${GREENLIGHT_GIT_USERNAME:-x-access-token}" ;;
  *) printf '%s\n' "${GREENLIGHT_GIT_TOKEN}" ;;
esac
"#;

/// `-c` options given to every git invocation. The user's global and system config are
/// already off (environment); these also neutralise what the clone's own config or git's
/// defaults could bring in.
const ISOLATION: &[&str] = &[
    // No credential helper of the user's or the clone's may answer (or store) anything:
    // greenlight's own, added after this for commands that talk to the remote, is the only
    // source.
    "credential.helper=",
    // Hooks in the clone never run (a pre-commit hook could block a revert).
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "commit.gpgSign=false",
    "core.quotePath=false",
    // `ext::` remotes run arbitrary commands; greenlight never needs them.
    "protocol.ext.allow=never",
    // A stalled HTTP transfer aborts instead of hanging the daemon forever.
    "http.lowSpeedLimit=1000",
    "http.lowSpeedTime=60",
    // Faster ancestry queries after each fetch.
    "fetch.writeCommitGraph=true",
    "init.defaultBranch=main",
    "advice.detachedHead=false",
];

/// Environment variables kept from greenlight's own environment although they start with
/// `GIT_`: the user's choice of ssh program. All other `GIT_*` variables are dropped, so a
/// `GIT_DIR` or `GIT_INDEX_FILE` from a surrounding hook cannot redirect greenlight's git.
const KEPT_GIT_VARS: &[&str] = &["GIT_SSH", "GIT_SSH_COMMAND", "GIT_SSH_VARIANT"];

/// How git is run for one repository: where, with which credentials, named how in errors.
#[derive(Clone)]
pub(crate) struct GitEnv {
    /// The working directory for git (the clone, or its parent while cloning).
    pub cwd: PathBuf,
    /// The repository as errors name it (directory and redacted remote).
    pub label: String,
    pub askpass: Option<PathBuf>,
    pub credentials: Option<Credentials>,
}

/// What git answers when an http(s) remote asks who it is.
#[derive(Clone)]
pub(crate) struct Credentials {
    /// The username; the credential script's default (`x-access-token`) when unset.
    pub username: Option<String>,
    /// The password: a token, or empty when the username is the token.
    pub password: Secret,
    /// The username is itself the token (`https://TOKEN@host/…`): it is redacted like one.
    pub username_is_secret: bool,
}

impl Credentials {
    /// The values no text may show.
    fn secrets(&self) -> Vec<&str> {
        let mut secrets = vec![self.password.expose()];
        if self.username_is_secret
            && let Some(user) = &self.username
        {
            secrets.push(user);
        }
        secrets
    }
}

/// The outcome of one git run.
pub(crate) struct Output {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: String,
    pub command: String,
}

impl Output {
    pub fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }
}

/// One git invocation being built.
pub(crate) struct Git<'a> {
    env: &'a GitEnv,
    args: Vec<OsString>,
    network: bool,
    stdin: Option<Vec<u8>>,
    extra_env: Vec<(&'static str, String)>,
}

impl GitEnv {
    pub fn git<I, S>(&self, args: I) -> Git<'_>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Git {
            env: self,
            args: args.into_iter().map(Into::into).collect(),
            network: false,
            stdin: None,
            extra_env: Vec::new(),
        }
    }

    /// Text of an error message, redacted of URL credentials and of the token.
    pub fn redact(&self, text: &str) -> String {
        let secrets = self
            .credentials
            .as_ref()
            .map(Credentials::secrets)
            .unwrap_or_default();
        redact_with(text, &secrets)
    }
}

impl Git<'_> {
    /// This command talks to the remote: it gets the credentials (askpass + token env).
    pub fn network(mut self) -> Self {
        self.network = true;
        self
    }

    pub fn arg(mut self, a: impl Into<OsString>) -> Self {
        self.args.push(a.into());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn stdin(mut self, bytes: Vec<u8>) -> Self {
        self.stdin = Some(bytes);
        self
    }

    pub fn env(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.extra_env.push((key, value.into()));
        self
    }

    /// The command line as errors show it: the arguments after `git`, redacted.
    fn display(&self) -> String {
        let mut s = String::from("git");
        for a in &self.args {
            s.push(' ');
            s.push_str(&a.to_string_lossy());
        }
        self.env.redact(&s)
    }

    /// Builds the child process. Separate from running it so tests can inspect argv.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new("git");
        cmd.current_dir(&self.env.cwd);
        for c in ISOLATION {
            cmd.arg("-c").arg(c);
        }
        let credentials = match (&self.env.askpass, &self.env.credentials) {
            (Some(script), Some(credentials)) if self.network => Some((script, credentials)),
            _ => None,
        };
        if let Some((script, _)) = credentials {
            cmd.arg("-c").arg(helper_config(script));
        }
        cmd.args(&self.args);

        for (key, _) in std::env::vars_os() {
            let k = key.to_string_lossy();
            let drop_git = k.starts_with("GIT_") && !KEPT_GIT_VARS.contains(&k.as_ref());
            if drop_git || k.starts_with("GREENLIGHT_GIT_") {
                cmd.env_remove(&key);
            }
        }
        cmd.env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_PAGER", "cat")
            .env("GIT_EDITOR", ":")
            .env("GIT_MERGE_AUTOEDIT", "no")
            .env("GIT_NO_REPLACE_OBJECTS", "1")
            .env("LC_ALL", "C");
        if std::env::var_os("GIT_SSH_COMMAND").is_none() && std::env::var_os("GIT_SSH").is_none() {
            // A daemon has nobody to answer ssh's prompts; dead connections must end.
            cmd.env(
                "GIT_SSH_COMMAND",
                "ssh -o BatchMode=yes -o ServerAliveInterval=15 -o ServerAliveCountMax=4",
            );
        }
        if let Some((script, credentials)) = credentials {
            cmd.env("GIT_ASKPASS", script)
                .env("GREENLIGHT_GIT_TOKEN", credentials.password.expose());
            if let Some(user) = &credentials.username {
                cmd.env("GREENLIGHT_GIT_USERNAME", user);
            }
        }
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
        cmd.stdin(if self.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        die_with_parent(&mut cmd);
        cmd
    }

    /// Runs git and returns its output whatever the exit status.
    pub fn run(self) -> Result<Output> {
        let command = self.display();
        let spawn_err = |source| Error::Spawn {
            command: command.clone(),
            repo: self.env.label.clone(),
            source,
        };
        let mut child = self.command().spawn().map_err(spawn_err)?;
        if let Some(input) = &self.stdin {
            // Taking stdin closes it once written, so git sees end-of-input.
            let mut pipe = child.stdin.take().expect("stdin is piped");
            match pipe.write_all(input) {
                // git exited without reading everything: its status and stderr say why.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                other => other.map_err(spawn_err)?,
            }
        }
        let out = child.wait_with_output().map_err(spawn_err)?;
        Ok(Output {
            status: out.status,
            stdout: out.stdout,
            stderr: self
                .env
                .redact(String::from_utf8_lossy(&out.stderr).trim_end()),
            command,
        })
    }

    /// Runs git and fails unless it exits 0.
    pub fn run_ok(self) -> Result<Output> {
        let env = self.env;
        let out = self.run()?;
        if out.status.success() {
            Ok(out)
        } else {
            Err(failure(env, &out))
        }
    }
}

/// The error for a git run that failed.
pub(crate) fn failure(env: &GitEnv, out: &Output) -> Error {
    Error::Command {
        command: out.command.clone(),
        repo: env.label.clone(),
        status: out.status.to_string(),
        stderr: if out.stderr.is_empty() {
            "(no output on stderr)".into()
        } else {
            out.stderr.clone()
        },
    }
}

/// `credential.helper=!'<script>'`: the credential script as git's helper. git runs a helper
/// through the shell with the operation appended, so the path is quoted for it (a data
/// directory may hold spaces). The value names a file that holds no secret.
fn helper_config(script: &Path) -> OsString {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let mut value = b"credential.helper=!'".to_vec();
    for &byte in script.as_os_str().as_bytes() {
        if byte == b'\'' {
            value.extend_from_slice(b"'\\''");
        } else {
            value.push(byte);
        }
    }
    value.push(b'\'');
    OsString::from_vec(value)
}

/// Writes the askpass script (no secret in it) at `path`, executable by its owner only.
pub(crate) fn write_askpass(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let io = |source| Error::Io {
        what: "writing the askpass script",
        path: path.display().to_string(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    std::fs::write(path, ASKPASS_SCRIPT).map_err(io)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).map_err(io)?;
    Ok(())
}

/// A git left running by a watchdog that died (`kill -9`, an OOM kill) would go on fetching or
/// pushing in a clone that the next watchdog already works in, and the two race on its refs.
/// On Linux, git is told to stop (SIGTERM: it removes its lock files) when the thread that
/// started it dies.
#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs between fork and exec and calls only prctl(2), which is
    // async-signal-safe, with constant arguments.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut Command) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_reaches_env_never_argv() {
        let env = GitEnv {
            cwd: PathBuf::from("/"),
            label: "test".into(),
            askpass: Some(PathBuf::from("/x/askpass")),
            credentials: Some(Credentials {
                username: Some("bot".into()),
                password: Secret::new("tok-123"),
                username_is_secret: false,
            }),
        };
        let cmd = env.git(["fetch", "origin"]).network().command();
        assert!(
            cmd.get_args()
                .all(|a| !a.to_string_lossy().contains("tok-123"))
        );
        let envs: Vec<_> = cmd
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_string_lossy().into_owned(), v?.to_owned())))
            .collect();
        assert!(
            envs.iter()
                .any(|(k, v)| k == "GREENLIGHT_GIT_TOKEN" && v == "tok-123")
        );
        assert!(
            envs.iter()
                .any(|(k, v)| k == "GIT_ASKPASS" && v == "/x/askpass")
        );

        let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
        let helpers: Vec<_> = args
            .iter()
            .filter(|a| a.to_string_lossy().starts_with("credential.helper="))
            .collect();
        // The user's helpers are reset first, then greenlight's script is the only one.
        assert_eq!(
            helpers,
            ["credential.helper=", "credential.helper=!'/x/askpass'"]
        );

        // A local command gets no credentials at all.
        let local = env.git(["rev-parse", "HEAD"]).command();
        assert!(
            local
                .get_envs()
                .all(|(k, v)| k != "GREENLIGHT_GIT_TOKEN" || v.is_none())
        );
        assert!(
            local
                .get_args()
                .all(|a| a.to_string_lossy() != "credential.helper=!'/x/askpass'")
        );
    }

    /// git runs `<helper after the !> get` through `sh -c`; a path with a space and a quote
    /// must reach the shell as one word.
    #[test]
    fn the_helper_path_is_quoted_for_the_shell() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data dir's");
        let script = dir.join("askpass");
        write_askpass(&script).unwrap();
        let config = helper_config(&script);
        let helper = config
            .to_str()
            .unwrap()
            .strip_prefix("credential.helper=!")
            .unwrap();
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("{helper} get"))
            .env("GREENLIGHT_GIT_USERNAME", "bot")
            .env("GREENLIGHT_GIT_TOKEN", "t0k")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            "username=bot\npassword=t0k\n"
        );
    }
}
