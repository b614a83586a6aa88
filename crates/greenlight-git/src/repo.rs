//! The watchdog's clone of a remote and every read the judge needs from it: the remote's
//! branches, new commits, commit data, changed paths, ancestry, existing reverts.
//!
//! Owns greenlight's clone under its data directory and nothing else: it must never touch a
//! repository it did not clone (a directory whose origin differs is refused, not
//! repurposed), and never write to the remote except through `revert_and_push`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::command::{Credentials, GitEnv, failure, write_askpass};
use crate::error::{Error, Result};
use crate::in_process::InProcess;
use crate::secret::{Secret, UrlCredentials, redact, split_credentials};

/// Credentials for an http(s) remote. They reach git through greenlight's credential script
/// and the child's environment only. Credentials embedded in the remote URL are used when
/// these are unset: `https://user:password@host/…` as a username and a token, and
/// `https://TOKEN@host/…` (a user without a password) as a token given as the username,
/// sent with an empty password as git itself would, and redacted like a token.
#[derive(Clone, Default)]
pub struct Auth {
    /// The token (a password or an access token), read by the caller from a file.
    pub token: Option<Secret>,
    /// The username sent with the token; `x-access-token` when unset (what GitHub and
    /// Gitea accept for tokens; GitLab accepts any username with a token).
    pub username: Option<String>,
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Auth")
            .field("token", &self.token)
            .field("username", &self.username)
            .finish()
    }
}

/// What the watchdog needs to know about one commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitData {
    /// The full commit id.
    pub sha: String,
    /// Full ids of the parents, first parent first (empty for a root commit).
    pub parents: Vec<String>,
    /// The first line of the message, as `git revert` quotes it.
    pub subject: String,
    /// The raw message (`%B`), trailing newline and all: the input of the trailer parser.
    pub message: String,
    /// The author's name.
    pub author_name: String,
    /// The author's e-mail.
    pub author_email: String,
    /// Author time, seconds since the Unix epoch.
    pub author_time: i64,
    /// The committer's name.
    pub committer_name: String,
    /// The committer's e-mail.
    pub committer_email: String,
    /// Committer time, seconds since the Unix epoch.
    pub committer_time: i64,
}

impl CommitData {
    /// Whether the commit is a merge (two or more parents).
    pub fn is_merge(&self) -> bool {
        self.parents.len() > 1
    }
}

/// A non-bare working clone owned by greenlight, under its data directory.
///
/// Reads take `&self` and may run concurrently. Operations that change the clone (fetch,
/// revert) are serialised inside one `Repo`; two processes must not share a clone (the
/// daemon's state-file lock is what guarantees it).
pub struct Repo {
    dir: PathBuf,
    remote: String,
    env: GitEnv,
    writer: Mutex<()>,
    /// The reads answered without a git process, when the clone can be read in process.
    in_process: Option<InProcess>,
    /// Whether those reads are used (tests and benchmarks turn them off to compare).
    use_in_process: AtomicBool,
    /// How many reads the in-process reader answered (the rest went to git).
    answered_in_process: AtomicU64,
}

impl fmt::Debug for Repo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Repo")
            .field("dir", &self.dir)
            .field("remote", &redact(&self.remote))
            .field("token", &self.env.credentials.as_ref().map(|c| &c.password))
            .finish()
    }
}

impl fmt::Display for Repo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.env.label)
    }
}

impl Repo {
    /// Opens greenlight's clone of `remote` at `dir`, cloning it first if `dir` does not
    /// exist (or is an empty directory).
    ///
    /// `remote` is a URL (`https://`, `ssh://`, `git@host:org/r`, `file://`) or a local
    /// repository's path. Credentials inside an http(s) URL are taken out of it (the clone's
    /// config and git's argv never see them) and used as `auth`'s defaults.
    ///
    /// A clone is made in a temporary sibling directory and renamed into place, so a crash
    /// mid-clone never leaves a half clone at `dir`. An existing `dir` whose `origin` is
    /// another remote is an error ([`Error::OriginMismatch`]), never repurposed.
    pub fn open_or_clone(remote: &str, dir: &Path, auth: Auth) -> Result<Repo> {
        if remote.trim().is_empty() || remote.starts_with('-') {
            return Err(Error::InvalidInput {
                what: "remote",
                value: redact(remote),
                reason: "expected a URL or a repository path",
            });
        }
        let (url, from_url) = split_credentials(remote);
        let url = local_path_of(&url)
            .and_then(|p| p.canonicalize().ok())
            .map(|p| p.display().to_string())
            .unwrap_or(url);
        let credentials = credentials(auth, from_url);
        let label = format!("{} (remote {})", dir.display(), redact(&url));

        let exists = dir.exists();
        let empty = exists
            && std::fs::read_dir(dir)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false);
        if exists && !empty {
            let env = GitEnv {
                cwd: dir.to_path_buf(),
                label,
                askpass: Some(askpass_path(dir)),
                credentials,
            };
            let mut repo = Repo {
                dir: dir.to_path_buf(),
                remote: url,
                env,
                writer: Mutex::new(()),
                in_process: None,
                use_in_process: AtomicBool::new(true),
                answered_in_process: AtomicU64::new(0),
            };
            repo.check_existing()?;
            repo.in_process = InProcess::open(dir);
            write_askpass(&askpass_path(dir))?;
            return Ok(repo);
        }
        Repo::clone_into(url, dir, label, credentials)
    }

    fn clone_into(
        url: String,
        dir: &Path,
        label: String,
        credentials: Option<Credentials>,
    ) -> Result<Repo> {
        let parent = match dir.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).map_err(|source| Error::Io {
            what: "creating the data directory",
            path: parent.display().to_string(),
            source,
        })?;
        let staging = tempfile::Builder::new()
            .prefix(".greenlight-clone-")
            .tempdir_in(&parent)
            .map_err(|source| Error::Io {
                what: "creating a staging directory in",
                path: parent.display().to_string(),
                source,
            })?;
        let staged = staging.path().join("repo");
        let clone_askpass = staging.path().join("askpass");
        write_askpass(&clone_askpass)?;
        let env = GitEnv {
            cwd: parent.clone(),
            label: label.clone(),
            askpass: Some(clone_askpass),
            credentials: credentials.clone(),
        };
        env.git(["clone", "--no-checkout", "--quiet", "--"])
            .arg(&url)
            .arg(staged.as_os_str())
            .network()
            .run_ok()?;
        // Later fetches keep the commit-graph current (fetch.writeCommitGraph); a clone does
        // not write one, and ancestry queries over a large history want it from the start.
        GitEnv {
            cwd: staged.clone(),
            ..env.clone()
        }
        .git(["commit-graph", "write", "--reachable", "--split"])
        .run_ok()?;
        let staged_askpass = askpass_path(&staged);
        write_askpass(&staged_askpass)?;
        std::fs::rename(&staged, dir).map_err(|source| Error::Io {
            what: "moving the new clone into place at",
            path: dir.display().to_string(),
            source,
        })?;
        Ok(Repo {
            dir: dir.to_path_buf(),
            remote: url,
            env: GitEnv {
                cwd: dir.to_path_buf(),
                label,
                askpass: Some(askpass_path(dir)),
                credentials,
            },
            writer: Mutex::new(()),
            in_process: InProcess::open(dir),
            use_in_process: AtomicBool::new(true),
            answered_in_process: AtomicU64::new(0),
        })
    }

    /// The in-process reader, unless it is unavailable or turned off.
    fn reader(&self) -> Option<&InProcess> {
        self.in_process
            .as_ref()
            .filter(|_| self.use_in_process.load(Ordering::Relaxed))
    }

    /// Whether ancestry, commit data and changed paths are read in process (the default when
    /// the clone allows it) or by a git process each. Both give the same answers; tests and
    /// benchmarks compare them.
    pub fn set_in_process_reads(&self, on: bool) {
        self.use_in_process.store(on, Ordering::Relaxed);
    }

    /// How many commits an in-process ancestry walk visits before it builds the descendant's
    /// ancestor set, which answers later questions against that descendant at once. For tests
    /// and benchmarks (0: every question is answered from a set); the default suits the judge.
    #[doc(hidden)]
    pub fn set_ancestry_walk_budget(&self, budget: usize) {
        if let Some(reader) = &self.in_process {
            reader.set_walk_budget(budget);
        }
    }

    /// Whether in-process reads are available for this clone and turned on.
    pub fn reads_in_process(&self) -> bool {
        self.reader().is_some()
    }

    /// How many reads were answered in process so far (the others ran git).
    pub fn answered_in_process(&self) -> u64 {
        self.answered_in_process.load(Ordering::Relaxed)
    }

    /// Asks the in-process reader; counts an answer.
    fn in_process<T>(&self, read: impl FnOnce(&InProcess) -> Option<T>) -> Option<T> {
        let answer = read(self.reader()?)?;
        self.answered_in_process.fetch_add(1, Ordering::Relaxed);
        Some(answer)
    }

    /// Refuses a directory that is not a non-bare clone of this remote.
    fn check_existing(&self) -> Result<()> {
        let not_a_clone = |reason: String| Error::NotAClone {
            dir: self.dir.display().to_string(),
            reason,
        };
        // Without its own `.git`, git would find an enclosing repository and we would
        // operate on someone else's work.
        if !self.dir.join(".git").is_dir() {
            return Err(not_a_clone("it has no .git directory".into()));
        }
        let out = self
            .env
            .git(["config", "--get", "remote.origin.url"])
            .run()?;
        if !out.status.success() {
            return Err(not_a_clone("it has no `origin` remote".into()));
        }
        let found = out.stdout_str().trim().to_owned();
        if remote_identity(&found) != remote_identity(&self.remote) {
            return Err(Error::OriginMismatch {
                dir: self.dir.display().to_string(),
                expected: redact(&self.remote),
                found: redact(&found),
            });
        }
        Ok(())
    }

    /// The clone's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The remote's URL or path, without credentials.
    pub fn remote(&self) -> &str {
        &self.remote
    }

    pub(crate) fn env(&self) -> &GitEnv {
        &self.env
    }

    /// Removes the lock files a git process killed mid-command left in the clone — `index.lock`,
    /// `HEAD.lock`, a ref's or `packed-refs`' lock, the config's, the commit-graph's: while one
    /// stays, every later command that takes the same lock fails (`cannot lock ref 'HEAD'`), a
    /// revert included. Returns the paths removed, relative to the clone, for the caller to say.
    ///
    /// Call it only while this process holds the clone alone (greenlight's data-directory lock),
    /// before any git command of its own runs in it: a lock of a git process still running would
    /// otherwise be taken from under it.
    pub fn clear_stale_locks(&self) -> Result<Vec<String>> {
        let git_dir = self.dir.join(".git");
        let mut found = Vec::new();
        // Git's lock files live beside the file they lock: the top of the git directory, the
        // refs and reflogs, and the object store's info and pack directories (commit-graph,
        // multi-pack-index). Loose object directories hold none.
        collect_locks(&git_dir, false, &mut found)?;
        for sub in ["refs", "logs", "objects/info", "objects/pack"] {
            collect_locks(&git_dir.join(sub), true, &mut found)?;
        }
        let mut removed = Vec::new();
        for path in found {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => {
                    return Err(Error::Io {
                        what: "removing a stale git lock file",
                        path: path.display().to_string(),
                        source,
                    });
                }
            }
            let shown = path.strip_prefix(&self.dir).unwrap_or(&path);
            removed.push(shown.display().to_string());
        }
        removed.sort();
        Ok(removed)
    }

    pub(crate) fn lock_writer(&self) -> MutexGuard<'_, ()> {
        // A panic in another thread mid-write leaves nothing to protect: the next write
        // starts with a hard reset of the work tree anyway.
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The remote's default branch (what its `HEAD` points to), asked of the remote.
    pub fn remote_default_branch(&self) -> Result<String> {
        let out = self
            .env
            .git(["ls-remote", "--symref", "origin", "HEAD"])
            .network()
            .run_ok()?;
        let text = out.stdout_str();
        text.lines()
            .find_map(|line| {
                let (target, name) = line.strip_prefix("ref: ")?.split_once('\t')?;
                (name == "HEAD").then_some(target)
            })
            .and_then(|target| target.strip_prefix("refs/heads/"))
            .map(str::to_owned)
            .ok_or_else(|| Error::UnexpectedOutput {
                command: out.command.clone(),
                repo: self.env.label.clone(),
                detail: "the remote's HEAD names no branch (an empty repository?); pass the branch explicitly".into(),
            })
    }

    /// Fetches `branch` from the remote into `refs/remotes/origin/<branch>` and returns the
    /// remote's tip (full sha). History rewritten on the remote is followed (forced update
    /// of the remote-tracking ref): the remote is the truth.
    pub fn fetch(&self, branch: &str) -> Result<String> {
        let _guard = self.lock_writer();
        self.fetch_locked(branch)
    }

    pub(crate) fn fetch_locked(&self, branch: &str) -> Result<String> {
        self.check_branch(branch)?;
        let refspec = format!("+refs/heads/{branch}:refs/remotes/origin/{branch}");
        let out = self
            .env
            .git([
                "fetch",
                "--quiet",
                "--no-tags",
                "--no-recurse-submodules",
                "origin",
            ])
            .arg(&refspec)
            .network()
            .run()?;
        if !out.status.success() {
            if out.stderr.contains("couldn't find remote ref") {
                return Err(Error::BranchNotFound {
                    branch: branch.to_owned(),
                    repo: self.env.label.clone(),
                });
            }
            return Err(failure(&self.env, &out));
        }
        self.resolve(&format!("refs/remotes/origin/{branch}"))?
            .ok_or_else(|| Error::UnexpectedOutput {
                command: out.command,
                repo: self.env.label.clone(),
                detail: format!("fetch succeeded but refs/remotes/origin/{branch} is missing"),
            })
    }

    /// Refuses branch names git would refuse, and any that could pass for an option.
    pub(crate) fn check_branch(&self, branch: &str) -> Result<()> {
        let bad = |reason| Error::InvalidInput {
            what: "branch",
            value: branch.to_owned(),
            reason,
        };
        if branch.is_empty() || branch.starts_with('-') {
            return Err(bad("a branch name cannot be empty or start with '-'"));
        }
        let ok = self
            .env
            .git(["check-ref-format"])
            .arg(format!("refs/heads/{branch}"))
            .run()?
            .status
            .success();
        if ok {
            Ok(())
        } else {
            Err(bad("not a valid branch name (see git check-ref-format)"))
        }
    }

    /// Commits in `from_exclusive..to`, oldest first: `git rev-list --reverse --topo-order`,
    /// so every commit comes after its parents, and commits of merged branches are included
    /// along with the merge commits.
    ///
    /// `from_exclusive = None` returns an empty list: with no baseline there is no "new";
    /// the caller decides (greenlight records `to` as its baseline and watches nothing
    /// before it). A `from` that is not an ancestor of `to` (history rewritten) still
    /// yields what `to` has and `from` lacks.
    pub fn new_commits(&self, from_exclusive: Option<&str>, to: &str) -> Result<Vec<String>> {
        let Some(from) = from_exclusive else {
            return Ok(Vec::new());
        };
        if let Some(line) = self.in_process(|r| r.new_commits(from, to)) {
            return Ok(line);
        }
        let out = self
            .env
            .git(["rev-list", "--reverse", "--topo-order", "--end-of-options"])
            .arg(format!("{from}^{{commit}}..{to}^{{commit}}"))
            .arg("--")
            .run()?;
        if !out.status.success() {
            return Err(self.unknown_or_failure(&[from, to], &out)?);
        }
        Ok(out.stdout_str().lines().map(str::to_owned).collect())
    }

    /// The data of one commit. An unknown revision is [`Error::UnknownCommit`].
    pub fn commit(&self, rev: &str) -> Result<CommitData> {
        if let Some(data) = self.in_process(|r| r.commit(rev)) {
            return Ok(data);
        }
        let out = self
            .env
            .git([
                "log",
                "-1",
                "--no-show-signature",
                "--format=format:%H%x00%P%x00%an%x00%ae%x00%at%x00%cn%x00%ce%x00%ct%x00%B",
                "--end-of-options",
            ])
            .arg(format!("{rev}^{{commit}}"))
            .arg("--")
            .run()?;
        if !out.status.success() {
            return Err(self.unknown_or_failure(&[rev], &out)?);
        }
        let text = out.stdout_str();
        let unexpected = |detail: &str| Error::UnexpectedOutput {
            command: out.command.clone(),
            repo: self.env.label.clone(),
            detail: detail.to_owned(),
        };
        let fields: Vec<&str> = text.splitn(9, '\0').collect();
        let [sha, parents, an, ae, at, cn, ce, ct, message] = fields[..] else {
            return Err(unexpected("expected 9 NUL-separated fields"));
        };
        let time = |s: &str| {
            s.parse::<i64>()
                .map_err(|_| unexpected("a commit time is not a number"))
        };
        Ok(CommitData {
            sha: sha.to_owned(),
            parents: parents.split_whitespace().map(str::to_owned).collect(),
            subject: subject_of(message),
            message: message.to_owned(),
            author_name: an.to_owned(),
            author_email: ae.to_owned(),
            author_time: time(at)?,
            committer_name: cn.to_owned(),
            committer_email: ce.to_owned(),
            committer_time: time(ct)?,
        })
    }

    /// Paths the commit changed against its first parent (merge commits too: what the merge
    /// brought into the branch); for a root commit, every file. Renames are not detected,
    /// so both the old and the new path appear. Paths are relative to the repository root;
    /// a path that is not UTF-8 is converted lossily.
    pub fn changed_paths(&self, rev: &str) -> Result<Vec<String>> {
        if let Some(paths) = self.in_process(|r| r.changed_paths(rev, None)) {
            return Ok(paths);
        }
        let out = self
            .env
            .git([
                "diff-tree",
                "-r",
                "-z",
                "--no-commit-id",
                "--name-only",
                "--no-renames",
                "--no-ext-diff",
                "--root",
                "--diff-merges=first-parent",
                "--end-of-options",
            ])
            .arg(format!("{rev}^{{commit}}"))
            .arg("--")
            .run()?;
        if !out.status.success() {
            return Err(self.unknown_or_failure(&[rev], &out)?);
        }
        Ok(out
            .stdout
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect())
    }

    /// Paths that differ between `base` and `rev` (a merge against the parent that was the
    /// branch: what the merge brought into it). Same conventions as [`Repo::changed_paths`].
    pub fn changed_paths_against(&self, rev: &str, base: &str) -> Result<Vec<String>> {
        if let Some(paths) = self.in_process(|r| r.changed_paths(rev, Some(base))) {
            return Ok(paths);
        }
        let out = self
            .env
            .git([
                "diff-tree",
                "-r",
                "-z",
                "--name-only",
                "--no-renames",
                "--no-ext-diff",
                "--end-of-options",
            ])
            .arg(format!("{base}^{{commit}}"))
            .arg(format!("{rev}^{{commit}}"))
            .arg("--")
            .run()?;
        if !out.status.success() {
            return Err(self.unknown_or_failure(&[base, rev], &out)?);
        }
        Ok(out
            .stdout
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect())
    }

    /// Whether `ancestor` is an ancestor of, or equal to, `descendant`.
    /// `Ok(None)` when either is not a commit known to the clone (not fetched yet, a typo,
    /// a Helm version): "unknown" is never reported as "no".
    pub fn is_ancestor(&self, ancestor: &str, descendant: &str) -> Result<Option<bool>> {
        if ancestor.is_empty() || descendant.is_empty() {
            return Ok(None);
        }
        if let Some(answer) = self.in_process(|r| r.is_ancestor(ancestor, descendant)) {
            return Ok(answer);
        }
        let out = self
            .env
            .git(["merge-base", "--is-ancestor", "--end-of-options"])
            .arg(format!("{ancestor}^{{commit}}"))
            .arg(format!("{descendant}^{{commit}}"))
            .run()?;
        match out.code() {
            Some(0) => Ok(Some(true)),
            Some(1) => Ok(Some(false)),
            _ => {
                if self.resolve(ancestor)?.is_none() || self.resolve(descendant)?.is_none() {
                    Ok(None)
                } else {
                    Err(failure(&self.env, &out))
                }
            }
        }
    }

    /// The full sha of the commit `rev` names (a sha, a prefix, a ref), or `None` if it
    /// names no commit in the clone.
    pub fn resolve(&self, rev: &str) -> Result<Option<String>> {
        if rev.is_empty() {
            return Ok(None);
        }
        if let Some(answer) = self.in_process(|r| r.resolve(rev)) {
            return Ok(answer);
        }
        let out = self
            .env
            .git(["rev-parse", "--verify", "--quiet", "--end-of-options"])
            .arg(format!("{rev}^{{commit}}"))
            .run()?;
        if out.status.success() {
            Ok(Some(out.stdout_str().trim().to_owned()))
        } else {
            Ok(None)
        }
    }

    /// The error for a failed command over `revs`: [`Error::UnknownCommit`] naming the first
    /// rev that names no commit, else git's failure. Asked only after a failure, so the
    /// common path costs one git process.
    fn unknown_or_failure(&self, revs: &[&str], out: &crate::command::Output) -> Result<Error> {
        for rev in revs {
            if self.resolve(rev)?.is_none() {
                return Ok(Error::UnknownCommit {
                    rev: (*rev).to_owned(),
                    repo: self.env.label.clone(),
                });
            }
        }
        Ok(failure(&self.env, out))
    }

    /// The full sha of `rev`, or [`Error::UnknownCommit`].
    pub(crate) fn full_commit(&self, rev: &str) -> Result<String> {
        self.resolve(rev)?.ok_or_else(|| Error::UnknownCommit {
            rev: rev.to_owned(),
            repo: self.env.label.clone(),
        })
    }

    /// The revert of `reverted` in `range_from_exclusive..tip` that is still in effect at `tip`
    /// (a revert that was itself reverted is not; a later revert then may be): its message
    /// says `This reverts commit <sha>` — what `git revert` writes, for greenlight's reverts
    /// and humans' alike. The sha may be abbreviated (`git revert --reference` writes
    /// `This reverts commit 1a2b3c4 (…)`), seven hex digits at least.
    pub fn find_revert_of(
        &self,
        reverted: &str,
        range_from_exclusive: &str,
        tip: &str,
    ) -> Result<Option<String>> {
        let reverted = self.full_commit(reverted)?;
        // Follow the chain: a revert that was itself reverted (the change re-landed) is no
        // longer in effect, and a later revert of the commit may be.
        let mut in_effect: Option<String> = None;
        for (sha, message) in self.reverts_in(range_from_exclusive, tip)? {
            match &in_effect {
                None if message_reverts(&message, &reverted) => in_effect = Some(sha),
                Some(r) if message_reverts(&message, r) => in_effect = None,
                _ => {}
            }
        }
        Ok(in_effect)
    }

    /// The first revert of `reverted` in `range_from_exclusive..tip`, whether or not it is
    /// still in effect.
    pub fn find_first_revert_of(
        &self,
        reverted: &str,
        range_from_exclusive: &str,
        tip: &str,
    ) -> Result<Option<String>> {
        let reverted = self.full_commit(reverted)?;
        Ok(self
            .reverts_in(range_from_exclusive, tip)?
            .into_iter()
            .find(|(_, message)| message_reverts(message, &reverted))
            .map(|(sha, _)| sha))
    }

    /// The commits in `range_from_exclusive..tip` whose message says `This reverts commit`,
    /// oldest first, with their messages.
    fn reverts_in(&self, range_from_exclusive: &str, tip: &str) -> Result<Vec<(String, String)>> {
        let from = self.full_commit(range_from_exclusive)?;
        let tip = self.full_commit(tip)?;
        let out = self
            .env
            .git([
                "log",
                "-z",
                "--reverse",
                "--topo-order",
                "--no-show-signature",
                "--format=format:%H%n%B",
                "--fixed-strings",
                "--grep=This reverts commit ",
                "--end-of-options",
            ])
            .arg(format!("{from}..{tip}"))
            .arg("--")
            .run_ok()?;
        Ok(out
            .stdout_str()
            .split('\0')
            .filter_map(|record| record.split_once('\n'))
            .map(|(sha, message)| (sha.trim().to_owned(), message.to_owned()))
            .collect())
    }
}

/// Whether a commit message says it reverts `full_sha`.
pub(crate) fn message_reverts(message: &str, full_sha: &str) -> bool {
    const MARK: &str = "This reverts commit ";
    message.match_indices(MARK).any(|(i, _)| {
        let rest = &message[i + MARK.len()..];
        let hex_len = rest
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(rest.len());
        let named = rest[..hex_len].to_ascii_lowercase();
        named.len() >= 7 && full_sha.starts_with(&named)
    })
}

/// What git is given when the remote asks who it is: `auth`'s token, else the URL's
/// password, each with `auth`'s username or else the URL's; else a URL user without a password,
/// which is a token given as the username (`https://TOKEN@host/…`: GitHub and GitLab take a
/// token so), sent with an empty password — git itself asks for a password there, and an empty
/// one is what such a remote takes.
fn credentials(auth: Auth, from_url: UrlCredentials) -> Option<Credentials> {
    let UrlCredentials { username, password } = from_url;
    match auth.token.or(password) {
        Some(password) => Some(Credentials {
            username: auth.username.or(username),
            password,
            username_is_secret: false,
        }),
        None => username.map(|token| Credentials {
            username: Some(token),
            password: Secret::new(""),
            username_is_secret: true,
        }),
    }
}

/// Where the askpass script lives for the clone at `dir`.
fn askpass_path(dir: &Path) -> PathBuf {
    dir.join(".git").join("greenlight").join("askpass")
}

/// The local path a remote names, if it names one (`/srv/r.git`, `./r`, `file:///srv/r`).
fn local_path_of(remote: &str) -> Option<PathBuf> {
    if let Some(path) = remote.strip_prefix("file://") {
        return Some(PathBuf::from(path));
    }
    if remote.contains("://") {
        return None;
    }
    // `host:org/repo` is git's scp-like syntax unless a slash comes before the colon.
    if let Some(colon) = remote.find(':')
        && !remote[..colon].contains('/')
    {
        return None;
    }
    Some(PathBuf::from(remote))
}

/// What makes two spellings of a remote the same remote: credentials dropped, local paths
/// canonical, trailing `/` and `.git` of network URLs ignored.
fn remote_identity(remote: &str) -> String {
    let (url, _) = split_credentials(remote.trim());
    if let Some(path) = local_path_of(&url) {
        return path
            .canonicalize()
            .unwrap_or(path)
            .display()
            .to_string()
            .trim_end_matches('/')
            .to_owned();
    }
    let url = url.trim_end_matches('/');
    url.strip_suffix(".git").unwrap_or(url).to_owned()
}

/// The subject `git revert` quotes: the first non-blank line of the message.
pub(crate) fn subject_of(message: &str) -> String {
    message
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim_end_matches('\r')
        .to_owned()
}

/// The `*.lock` files directly in `dir` (and below it when `deep`); a missing `dir` holds none.
fn collect_locks(dir: &Path, deep: bool, found: &mut Vec<PathBuf>) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(Error::Io {
                what: "reading the clone's git directory",
                path: dir.display().to_string(),
                source,
            });
        }
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_dir() {
            if deep {
                collect_locks(&path, true, found)?;
            }
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "lock") {
            found.push(path);
        }
    }
    Ok(())
}

/// What to say about the lock files [`Repo::clear_stale_locks`] removed (empty: nothing).
pub fn stale_locks_note(removed: &[String]) -> Option<String> {
    (!removed.is_empty()).then(|| {
        format!(
            "removed git lock file(s) left in the clone by a git process that was killed mid-command: {}; every later git command that takes one of them would fail (this process holds the clone alone)",
            removed.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn revert_marker_matches_full_and_abbreviated_shas() {
        assert!(message_reverts(
            &format!("Revert \"x\"\n\nThis reverts commit {SHA}.\n"),
            SHA
        ));
        assert!(message_reverts(
            "Revert \"x\"\n\nThis reverts commit 0123456 (x, 2026-01-01).\n",
            SHA
        ));
        assert!(!message_reverts("This reverts commit 012345.\n", SHA));
        assert!(!message_reverts(
            "This reverts commit 0123456789abcdef0123456789abcdef01234568.\n",
            SHA
        ));
        assert!(!message_reverts("Revert something else\n", SHA));
    }

    #[test]
    fn remote_spellings() {
        assert_eq!(
            remote_identity("https://tok@host/org/r.git/"),
            remote_identity("https://host/org/r")
        );
        assert_ne!(
            remote_identity("https://host/org/r"),
            remote_identity("https://host/org/s")
        );
        assert_eq!(local_path_of("git@host:org/r"), None);
        assert_eq!(local_path_of("./a:b"), Some(PathBuf::from("./a:b")));
        assert_eq!(
            local_path_of("file:///srv/r.git"),
            Some(PathBuf::from("/srv/r.git"))
        );
    }
}
