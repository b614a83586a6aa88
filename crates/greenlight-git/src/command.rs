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

/// The askpass program greenlight writes beside its clone. It holds no secret: it prints
/// what git asks for from the environment git inherited from greenlight.
pub const ASKPASS_SCRIPT: &str = r#"#!/bin/sh
# greenlight askpass: answers git's credential prompts from the environment that
# greenlight gave this one git process. This file holds no secret.
case "$1" in
  Username*|username*) printf '%s\n' "${GREENLIGHT_GIT_USERNAME:-x-access-token}" ;;
  *) printf '%s\n' "${GREENLIGHT_GIT_TOKEN}" ;;
esac
"#;

/// `-c` options given to every git invocation. The user's global and system config are
/// already off (environment); these also neutralise what the clone's own config or git's
/// defaults could bring in.
const ISOLATION: &[&str] = &[
    // No credential helper may answer (or store) anything: askpass is the only source.
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
    pub username: Option<String>,
    pub token: Option<Secret>,
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
        redact_with(text, self.token.as_ref())
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
        if self.network
            && let (Some(askpass), Some(token)) = (&self.env.askpass, &self.env.token)
        {
            cmd.env("GIT_ASKPASS", askpass)
                .env("GREENLIGHT_GIT_TOKEN", token.expose());
            if let Some(user) = &self.env.username {
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
            username: Some("bot".into()),
            token: Some(Secret::new("tok-123")),
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

        // A local command gets no credentials at all.
        let local = env.git(["rev-parse", "HEAD"]).command();
        assert!(
            local
                .get_envs()
                .all(|(k, v)| k != "GREENLIGHT_GIT_TOKEN" || v.is_none())
        );
    }
}
