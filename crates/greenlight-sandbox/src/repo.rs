//! The sandbox's private clone of the remote: it fetches the tracked branch and reads manifest
//! files straight out of commits (`git ls-tree`, `git cat-file`). It never writes to the remote
//! and never checks out a worktree. Git runs with system and global configuration ignored and
//! terminal prompts off, so that a test machine's settings cannot change what the sandbox sees.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use greenlight_core::repo_url::{RepoUrl, redact};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// A file read from a commit: its path in the repository and its bytes.
pub(crate) struct RepoFile {
    pub path: String,
    pub bytes: Vec<u8>,
}

pub(crate) struct Mirror {
    // Removed from disk when the mirror is dropped.
    dir: tempfile::TempDir,
    remote: RepoUrl,
    branch: String,
}

fn git(cwd: Option<&Path>) -> Command {
    let mut cmd = Command::new("git");
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    cmd
}

// A git that hangs (an unreachable host) must not stall the sync loop, and `pause` waits for it.
const GIT_TIMEOUT: Duration = Duration::from_secs(60);

async fn output(mut cmd: Command, what: &str) -> Result<Vec<u8>, String> {
    let out = tokio::time::timeout(GIT_TIMEOUT, cmd.output())
        .await
        .map_err(|_| format!("{what}: no answer within {}s", GIT_TIMEOUT.as_secs()))?
        .map_err(|e| format!("{what}: cannot run git: {e}"))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        // Git's first "fatal:"/"error:" line says what went wrong; the rest is advice.
        let lines: Vec<&str> = stderr
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let detail = lines
            .iter()
            .find(|l| l.starts_with("fatal:") || l.starts_with("error:"))
            .or(lines.first())
            .copied()
            .unwrap_or("")
            .to_string();
        Err(format!(
            "{what} failed ({}): {}",
            out.status,
            redact(&detail)
        ))
    }
}

/// The remote as git should be given it: an existing local path is made absolute (git runs
/// inside the private clone, where a relative path would mean something else).
pub(crate) fn remote_for_git(repo: &str) -> RepoUrl {
    let path = PathBuf::from(repo);
    if !repo.contains("://")
        && path.exists()
        && let Ok(abs) = path.canonicalize()
    {
        return RepoUrl::new(abs.to_string_lossy());
    }
    RepoUrl::new(repo)
}

/// The branch the remote's HEAD points at (`git ls-remote --symref <repo> HEAD`).
pub(crate) async fn default_branch(remote: &RepoUrl) -> Result<String, String> {
    let mut cmd = git(None);
    cmd.args(["ls-remote", "--symref", "--", remote.expose(), "HEAD"]);
    let out = output(cmd, &format!("git ls-remote {remote}")).await?;
    let text = String::from_utf8_lossy(&out);
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("ref: ")
            && let Some((target, _)) = rest.split_once('\t')
            && let Some(branch) = target.strip_prefix("refs/heads/")
        {
            return Ok(branch.to_string());
        }
    }
    Err(format!(
        "{remote} has no HEAD branch (is it empty?); name the branch with --branch"
    ))
}

impl Mirror {
    pub(crate) async fn create(remote: RepoUrl, branch: String) -> Result<Mirror, String> {
        let dir = tempfile::Builder::new()
            .prefix("greenlight-sandbox-")
            .tempdir()
            .map_err(|e| format!("cannot create the sandbox's private clone: {e}"))?;
        let mut cmd = git(Some(dir.path()));
        cmd.args(["init", "--quiet", "--bare", "."]);
        output(cmd, "git init").await?;
        Ok(Mirror {
            dir,
            remote,
            branch,
        })
    }

    /// Fetches the tracked branch and returns its tip.
    pub(crate) async fn fetch(&self) -> Result<String, String> {
        let refspec = format!("+refs/heads/{}:refs/sandbox/tip", self.branch);
        let mut cmd = git(Some(self.dir.path()));
        cmd.args([
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--",
            self.remote.expose(),
            &refspec,
        ]);
        let what = format!("git fetch {} {}", self.remote, self.branch);
        match output(cmd, &what).await {
            Ok(_) => {}
            Err(e) if e.contains("couldn't find remote ref") => {
                return Err(format!(
                    "branch {:?} does not exist in {}",
                    self.branch, self.remote
                ));
            }
            Err(e) => return Err(e),
        }
        let mut cmd = git(Some(self.dir.path()));
        cmd.args([
            "rev-parse",
            "--verify",
            "--quiet",
            "refs/sandbox/tip^{commit}",
        ]);
        let out = output(cmd, "git rev-parse").await?;
        Ok(String::from_utf8_lossy(&out).trim().to_string())
    }

    /// The commit a hexadecimal commit id (4 to 40 digits) names in the mirror, if it has it.
    /// Nothing else resolves: the mirror holds the tracked branch only, and a revision from a
    /// request never reaches git as anything but a hexadecimal id.
    pub(crate) async fn resolve(&self, revision: &str) -> Result<Option<String>, String> {
        let hex =
            (4..=40).contains(&revision.len()) && revision.bytes().all(|b| b.is_ascii_hexdigit());
        if !hex {
            return Ok(None);
        }
        let mut cmd = git(Some(self.dir.path()));
        cmd.args([
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{revision}^{{commit}}"),
        ]);
        let out = tokio::time::timeout(GIT_TIMEOUT, cmd.output())
            .await
            .map_err(|_| format!("git rev-parse: no answer within {}s", GIT_TIMEOUT.as_secs()))?
            .map_err(|e| format!("git rev-parse: cannot run git: {e}"))?;
        Ok(out
            .status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
            .filter(|sha| sha.len() == 40))
    }

    /// Every `*.yaml`, `*.yml` and `*.json` file under `path` ("" = the whole tree) at `commit`;
    /// `None` when nothing exists under `path` at that commit.
    pub(crate) async fn manifest_files(
        &self,
        commit: &str,
        path: &str,
    ) -> Result<Option<Vec<RepoFile>>, String> {
        let mut cmd = git(Some(self.dir.path()));
        cmd.args(["ls-tree", "-r", "-z", "--full-tree", commit]);
        if !path.is_empty() {
            cmd.args(["--", path]);
        }
        let listing = output(cmd, &format!("git ls-tree {commit}")).await?;
        let mut wanted: Vec<(String, String)> = Vec::new(); // (blob id, path)
        let mut path_exists = path.is_empty();
        for entry in listing.split(|b| *b == 0).filter(|e| !e.is_empty()) {
            let entry = String::from_utf8_lossy(entry);
            // "<mode> SP <type> SP <object> TAB <path>"
            let Some((meta, file)) = entry.split_once('\t') else {
                continue;
            };
            let mut meta = meta.split(' ');
            let (Some(mode), Some(kind), Some(id)) = (meta.next(), meta.next(), meta.next()) else {
                continue;
            };
            let under = path.is_empty() || file == path || file.starts_with(&format!("{path}/"));
            path_exists |= under;
            let manifest = [".yaml", ".yml", ".json"]
                .iter()
                .any(|ext| file.ends_with(ext));
            // Symlinks (120000) and submodules are not manifests Argo CD would read either.
            if kind == "blob" && mode.starts_with("100") && under && manifest {
                wanted.push((id.to_string(), file.to_string()));
            }
        }
        if !path_exists {
            return Ok(None);
        }
        if wanted.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let contents = self
            .read_blobs(wanted.iter().map(|(id, _)| id.as_str()))
            .await?;
        Ok(Some(
            wanted
                .into_iter()
                .zip(contents)
                .map(|((_, path), bytes)| RepoFile { path, bytes })
                .collect(),
        ))
    }

    async fn read_blobs<'a>(
        &self,
        ids: impl Iterator<Item = &'a str>,
    ) -> Result<Vec<Vec<u8>>, String> {
        let mut request = String::new();
        let mut count = 0;
        for id in ids {
            request.push_str(id);
            request.push('\n');
            count += 1;
        }
        let mut cmd = git(Some(self.dir.path()));
        cmd.args(["cat-file", "--batch"]).stdin(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("git cat-file: cannot run git: {e}"))?;
        let mut stdin = child.stdin.take().ok_or("git cat-file: no stdin")?;
        // Write while the output is being read, so that a large batch cannot deadlock on pipes.
        let writer = tokio::spawn(async move {
            let _ = stdin.write_all(request.as_bytes()).await;
            drop(stdin);
        });
        let out = tokio::time::timeout(GIT_TIMEOUT, child.wait_with_output())
            .await
            .map_err(|_| format!("git cat-file: no answer within {}s", GIT_TIMEOUT.as_secs()))?
            .map_err(|e| format!("git cat-file: {e}"))?;
        let _ = writer.await;
        if !out.status.success() {
            return Err(format!(
                "git cat-file failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        parse_batch(&out.stdout, count)
    }
}

// `git cat-file --batch` answers "<id> <type> <size>\n<bytes>\n" per object.
fn parse_batch(mut data: &[u8], count: usize) -> Result<Vec<Vec<u8>>, String> {
    let mut blobs = Vec::with_capacity(count);
    for _ in 0..count {
        let nl = data
            .iter()
            .position(|b| *b == b'\n')
            .ok_or("git cat-file: truncated output")?;
        let header = String::from_utf8_lossy(&data[..nl]).to_string();
        let size: usize = header
            .rsplit(' ')
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("git cat-file: unexpected header {header:?}"))?;
        let start = nl + 1;
        if data.len() < start + size {
            return Err("git cat-file: truncated object".into());
        }
        blobs.push(data[start..start + size].to_vec());
        data = data.get(start + size + 1..).unwrap_or(&[]);
    }
    Ok(blobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_masked_in_urls_and_git_messages() {
        let remote = remote_for_git("https://user:tok@example.com/org/r.git");
        assert_eq!(remote.to_string(), "https://***@example.com/org/r.git");
        assert_eq!(remote.expose(), "https://user:tok@example.com/org/r.git");
        assert_eq!(
            redact("fatal: unable to access 'https://u:p@h/r/': denied"),
            "fatal: unable to access 'https://***@h/r/': denied"
        );
    }

    #[test]
    fn parses_cat_file_batches() {
        let data = b"aaaa blob 3\nabc\nbbbb blob 0\n\n";
        assert_eq!(
            parse_batch(data, 2).unwrap(),
            vec![b"abc".to_vec(), Vec::new()]
        );
        assert!(parse_batch(b"aaaa blob 9\nabc\n", 1).is_err());
    }
}
