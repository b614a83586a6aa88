//! Exclusive locks that keep one watchdog per state file and per clone. A lock is held while its
//! file stays open; the OS releases it on any exit, `kill -9` included. Never waits: a lock
//! another process holds is a usage error that says which.

use crate::usage;
use anyhow::{Context, Result};
use std::path::Path;

/// One daemon per state file: an exclusive lock on `<state>.lock`.
pub fn lock_state(state: &Path) -> Result<std::fs::File> {
    if let Some(dir) = state.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut name = state
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".lock");
    let path = state.with_file_name(name);
    exclusive_lock(&path, || {
        format!(
            "another greenlight watch already runs with state {} (lock {} is held)",
            state.display(),
            path.display()
        )
    })
}

/// One daemon per clone: two state files given one `--data-dir` would share `<dir>/repo`, and
/// two daemons fetching and pushing reverts in one clone corrupt each other's work.
pub fn lock_data_dir(dir: &Path) -> Result<std::fs::File> {
    std::fs::create_dir_all(dir)
        .map_err(|e| usage(format!("--data-dir {}: cannot create: {e}", dir.display())))?;
    let path = dir.join("repo.lock");
    exclusive_lock(&path, || {
        format!(
            "--data-dir {} is in use by another greenlight watch (lock {} is held); give each --state its own --data-dir",
            dir.display(),
            path.display()
        )
    })
}

/// One promotion run per clone: two runs given one `--data-dir` would fetch, reset and commit
/// in one work tree at once, and fail on git's own locks in words that say nothing of why.
pub fn lock_promote_data_dir(dir: &Path) -> Result<std::fs::File> {
    std::fs::create_dir_all(dir)
        .map_err(|e| usage(format!("--data-dir {}: cannot create: {e}", dir.display())))?;
    let path = dir.join("promote.lock");
    exclusive_lock(&path, || {
        format!(
            "--data-dir {} is in use by another greenlight promote run or gc (lock {} is held): nothing was run; give each its own --data-dir, or wait for that one to end",
            dir.display(),
            path.display()
        )
    })
}

/// Take an exclusive lock on `path` (created if missing); held while the file is open. A lock
/// another process holds is a usage error worded by `held`.
fn exclusive_lock(path: &Path, held: impl FnOnce() -> String) -> Result<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open the lock file {}", path.display()))?;
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => Err(usage(held())),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(anyhow::Error::new(e).context(format!("cannot lock {}", path.display())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_same_state_is_refused_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state.db");
        let held = lock_state(&state).unwrap();
        let err = lock_state(&state).unwrap_err();
        assert!(err.is::<crate::UsageError>(), "{err:#}");
        assert!(
            err.to_string().contains("another greenlight watch"),
            "{err:#}"
        );
        drop(held);
        lock_state(&state).unwrap();
    }
}
