//! The daemon's watch over what it runs (docs/configuration.md#re-exec): the config file and
//! the binary on disk, compared with those it started from. A change of content — not of a
//! modification time alone — ends the daemon the way SIGTERM does (the current step finishes,
//! the locks are released) and the caller re-executes the same command line
//! ([`exec`]); the store resumes every watch from its recorded times.
//!
//! Polled, without inotify: a Kubernetes ConfigMap mount swaps a symlink (`..data`), a package
//! upgrade renames a new binary over the old one, and both are seen by reading through the path
//! as given (symlinks followed). What is not usable is said and not acted on: a changed config
//! file the command would refuse (an error line naming its `file:line:column`; the daemon keeps
//! the configuration it started with), a binary that is gone, not executable or does not
//! answer `--version` (a warning; the daemon keeps running the one it started).

use crate::clock::Clock;
use crate::output::Output;
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Checks a config file's new text as the command would read it: `Err` is the refusal, with
/// its `file:line:column`.
pub type ConfigCheck = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// What changed on disk, worth a re-exec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    Config(PathBuf),
    Binary(PathBuf),
}

impl Change {
    /// The one line the daemon logs before it stops.
    pub fn line(&self) -> String {
        let what = match self {
            Change::Config(p) => format!("the config file {} changed", p.display()),
            Change::Binary(p) => format!("the binary {} changed", p.display()),
        };
        format!(
            "{what}: finishing the current step, then re-executing with the same arguments and environment"
        )
    }
}

/// What a look at the disk found to say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Note {
    Warn(String),
    Error(String),
}

/// A file's identity on disk (through symlinks): a rename, a write or a chmod changes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    mode: u32,
}

impl Identity {
    fn of(m: &std::fs::Metadata) -> Identity {
        Identity {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
            ctime_ns: m.ctime() * 1_000_000_000 + m.ctime_nsec(),
            mode: m.mode(),
        }
    }
}

struct Config {
    path: PathBuf,
    /// The text the daemon runs on.
    running: String,
    /// A changed text already refused (said once).
    refused: Option<String>,
    /// An unreadable file already said.
    unreadable: bool,
    check: ConfigCheck,
}

struct Binary {
    path: PathBuf,
    /// The image this process runs (`/proc/self/exe`, readable after a rename replaced the
    /// file); `None` where there is none, and then a new identity is a change.
    running: Option<PathBuf>,
    /// The identity last looked at: a new one is read again.
    seen: Option<Identity>,
    /// The identity last warned about while it is looked at again (a binary that could not be
    /// started, as while it is still being written).
    warned: Option<Identity>,
    gone_said: bool,
}

/// The config file and the binary, as the daemon started with them.
pub struct SelfWatch {
    config: Option<Config>,
    binary: Option<Binary>,
}

impl SelfWatch {
    /// Watch `config` (its path and the text the daemon read) and the binary at `binary`.
    pub fn new(
        config: Option<(PathBuf, String, ConfigCheck)>,
        binary: Option<PathBuf>,
    ) -> SelfWatch {
        SelfWatch {
            config: config.map(|(path, running, check)| Config {
                path,
                running,
                refused: None,
                unreadable: false,
                check,
            }),
            binary: binary.map(|path| Binary {
                seen: std::fs::metadata(&path).ok().map(|m| Identity::of(&m)),
                running: Some(PathBuf::from("/proc/self/exe")).filter(|p| p.exists()),
                path,
                warned: None,
                gone_said: false,
            }),
        }
    }

    /// [`SelfWatch::new`] comparing the binary with `running` rather than this process's
    /// image (tests).
    pub fn comparing_binary_with(mut self, running: PathBuf) -> SelfWatch {
        if let Some(b) = &mut self.binary {
            b.running = Some(running);
        }
        self
    }

    /// One look at the disk (blocking): a change to re-execute for, and what to say.
    pub fn poll(&mut self) -> (Option<Change>, Vec<Note>) {
        let mut notes = Vec::new();
        let config_change = self.config.as_mut().and_then(|c| c.poll(&mut notes));
        if config_change.is_some() {
            return (config_change, notes);
        }
        let refused = self.config.as_ref().is_some_and(|c| c.refused.is_some());
        let binary_change = self.binary.as_mut().and_then(|b| b.poll(&mut notes));
        match binary_change {
            Some(Change::Binary(p)) if refused => {
                let config = &self.config.as_ref().expect("refused").path;
                notes.push(Note::Warn(format!(
                    "the binary {} changed, but the config file {} is refused as it stands: not re-executing until it is fixed",
                    p.display(),
                    config.display()
                )));
                // Looked at again when the config is fixed.
                if let Some(b) = &mut self.binary {
                    b.seen = None;
                }
                (None, notes)
            }
            c => (c, notes),
        }
    }

    /// Look every `interval` until a change is worth a re-exec, saying what is not.
    pub async fn changed(
        mut self,
        interval: Duration,
        out: Output,
        clock: Arc<dyn Clock>,
    ) -> Change {
        loop {
            tokio::time::sleep(interval).await;
            let looked = tokio::task::spawn_blocking(move || {
                let found = self.poll();
                (self, found)
            })
            .await;
            let (back, (change, notes)) = match looked {
                Ok(v) => v,
                Err(e) => {
                    out.warn(
                        clock.now(),
                        &format!("the watch over the config file and the binary stopped: {e}"),
                    );
                    return std::future::pending().await;
                }
            };
            self = back;
            for n in notes {
                match n {
                    Note::Warn(m) => out.warn(clock.now(), &m),
                    Note::Error(m) => out.error(clock.now(), &m),
                }
            }
            if let Some(c) = change {
                return c;
            }
        }
    }
}

impl Config {
    fn poll(&mut self, notes: &mut Vec<Note>) -> Option<Change> {
        let text = match crate::files::read_text(&self.path, crate::files::CONFIG_LIMIT, "--config")
            .map_err(std::io::Error::from)
        {
            Ok(t) => t,
            Err(e) => {
                if !self.unreadable {
                    notes.push(Note::Warn(format!(
                        "cannot read the config file {}: {e}; running on the configuration read at start",
                        self.path.display()
                    )));
                    self.unreadable = true;
                }
                return None;
            }
        };
        self.unreadable = false;
        if text == self.running {
            self.refused = None;
            return None;
        }
        if self.refused.as_ref() == Some(&text) {
            return None;
        }
        match (self.check)(&text) {
            Ok(()) => Some(Change::Config(self.path.clone())),
            Err(why) => {
                notes.push(Note::Error(format!(
                    "the config file {} changed and is refused: {why}; running on the configuration read at start until it is fixed",
                    self.path.display()
                )));
                self.refused = Some(text);
                None
            }
        }
    }
}

impl Binary {
    fn poll(&mut self, notes: &mut Vec<Note>) -> Option<Change> {
        let path = self.path.display();
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            Err(e) => {
                if !self.gone_said {
                    notes.push(Note::Warn(format!(
                        "the binary {path} cannot be read ({e}): running on, not re-executing"
                    )));
                    self.gone_said = true;
                }
                self.seen = None;
                return None;
            }
        };
        self.gone_said = false;
        let id = Identity::of(&meta);
        if self.seen == Some(id) {
            return None;
        }
        self.seen = Some(id);
        let same = match &self.running {
            Some(running) => same_content(running, &self.path),
            None => Ok(false),
        };
        match same {
            Ok(true) => None,
            Err(e) => {
                notes.push(Note::Warn(format!(
                    "the binary {path} changed on disk but cannot be compared ({e}): running on, not re-executing"
                )));
                None
            }
            Ok(false) if id.mode & 0o111 == 0 || !meta.is_file() => {
                notes.push(Note::Warn(format!(
                    "the binary {path} changed but is not an executable file: running on, not re-executing"
                )));
                None
            }
            Ok(false) => match answers_version(&self.path) {
                Ok(()) => Some(Change::Binary(self.path.clone())),
                Err(Version::Failed(why)) => {
                    notes.push(Note::Warn(format!(
                        "the binary {path} changed but `{path} --version` {why}: running on, not re-executing"
                    )));
                    None
                }
                // Not started (busy while still being written, …): looked at again next time,
                // said once.
                Err(Version::NotStarted(e)) => {
                    if self.warned != Some(id) {
                        notes.push(Note::Warn(format!(
                            "the binary {path} changed but cannot be started ({e}): running on, trying again"
                        )));
                        self.warned = Some(id);
                    }
                    self.seen = None;
                    None
                }
            },
        }
    }
}

/// Whether two files hold the same bytes, read in blocks.
fn same_content(a: &Path, b: &Path) -> std::io::Result<bool> {
    use std::io::Read;
    let (fa, fb) = (std::fs::File::open(a)?, std::fs::File::open(b)?);
    if fa.metadata()?.len() != fb.metadata()?.len() {
        return Ok(false);
    }
    let (mut ra, mut rb) = (
        std::io::BufReader::with_capacity(1 << 16, fa),
        std::io::BufReader::with_capacity(1 << 16, fb),
    );
    let (mut ba, mut bb) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let n = read_full(&mut ra, &mut ba)?;
        let m = read_full(&mut rb, &mut bb)?;
        if n != m || ba[..n] != bb[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }

    fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut filled = 0;
        while filled < buf.len() {
            match r.read(&mut buf[filled..])? {
                0 => break,
                n => filled += n,
            }
        }
        Ok(filled)
    }
}

/// How long a new binary has to answer `--version`.
const VERSION_WITHIN: Duration = Duration::from_secs(20);

/// Why a new binary's `--version` did not answer.
enum Version {
    /// It could not be started (`ETXTBSY` while it is still being written, …).
    NotStarted(std::io::Error),
    /// It ran and failed, or did not answer in time.
    Failed(String),
}

/// The new binary runs at all: `--version` exits 0 within [`VERSION_WITHIN`].
fn answers_version(path: &Path) -> Result<(), Version> {
    let mut child = std::process::Command::new(path)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(Version::NotStarted)?;
    let end = std::time::Instant::now() + VERSION_WITHIN;
    loop {
        match child.try_wait() {
            Ok(Some(s)) if s.success() => return Ok(()),
            Ok(Some(s)) => return Err(Version::Failed(format!("failed ({s})"))),
            Ok(None) if std::time::Instant::now() >= end => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Version::Failed(format!(
                    "did not answer within {VERSION_WITHIN:?}"
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(Version::Failed(format!("cannot be waited for: {e}"))),
        }
    }
}

/// Replace this process with `binary` run with `argv` (its `argv[0]` kept) and the same
/// environment. Returns only on failure. The caller has released its locks and closed the
/// state; whatever it still holds open is closed on exec (Rust opens files close-on-exec).
/// A binary still held open for writing (`ETXTBSY`) is tried again, every 100 ms for 5 s.
pub fn exec(binary: &Path, argv: &[OsString]) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    let mut tries = 50;
    loop {
        let mut cmd = std::process::Command::new(binary);
        if let Some((first, rest)) = argv.split_first() {
            cmd.arg0(first).args(rest);
        }
        let err = cmd.exec();
        tries -= 1;
        if err.kind() != std::io::ErrorKind::ExecutableFileBusy || tries == 0 {
            return err;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn check_toml() -> ConfigCheck {
        Box::new(|text: &str| {
            if text.contains("bad") {
                Err("w.toml:1:1: bad".to_string())
            } else {
                Ok(())
            }
        })
    }

    /// A ConfigMap mount: `w.toml -> ..data/w.toml`, `..data -> ..v1`; a new version is a new
    /// directory and `..data` swapped by a rename.
    fn swap(dir: &Path, version: &str, text: &str) {
        let v = dir.join(version);
        std::fs::create_dir_all(&v).unwrap();
        std::fs::write(v.join("w.toml"), text).unwrap();
        let tmp = dir.join("..data_tmp");
        let _ = std::fs::remove_file(&tmp);
        symlink(version, &tmp).unwrap();
        std::fs::rename(&tmp, dir.join("..data")).unwrap();
    }

    #[test]
    fn a_config_map_swap_is_a_change_a_touch_is_not_and_a_bad_file_is_said_once() {
        let dir = tempfile::tempdir().unwrap();
        swap(dir.path(), "..v1", "a = 1\n");
        let path = dir.path().join("w.toml");
        symlink("..data/w.toml", &path).unwrap();
        let mut w = SelfWatch::new(Some((path.clone(), "a = 1\n".into(), check_toml())), None);
        assert_eq!(w.poll(), (None, vec![]));
        // The same content under a new version (the kubelet's resync): nothing.
        swap(dir.path(), "..v2", "a = 1\n");
        assert_eq!(w.poll(), (None, vec![]));
        swap(dir.path(), "..v3", "a = bad\n");
        let (c, notes) = w.poll();
        assert_eq!(c, None);
        assert!(
            matches!(&notes[..], [Note::Error(m)] if m.contains("w.toml:1:1: bad")),
            "{notes:?}"
        );
        assert_eq!(w.poll(), (None, vec![]), "said once");
        swap(dir.path(), "..v4", "a = 2\n");
        assert_eq!(w.poll(), (Some(Change::Config(path.clone())), vec![]));
        std::fs::remove_file(&path).unwrap();
        let (c, notes) = w.poll();
        assert!(
            c.is_none() && matches!(&notes[..], [Note::Warn(_)]),
            "{notes:?}"
        );
    }

    fn script(path: &Path, body: &str, mode: u32) {
        let tmp = path.with_extension("new");
        std::fs::write(&tmp, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode)).unwrap();
        std::fs::rename(&tmp, path).unwrap();
    }

    #[test]
    fn a_binary_replaced_by_rename_is_a_change_once_it_runs() {
        let dir = tempfile::tempdir().unwrap();
        let running = dir.path().join("running");
        script(&running, "exit 0 # v1", 0o755);
        let bin = dir.path().join("greenlight");
        script(&bin, "exit 0 # v1", 0o755);
        let mut w = SelfWatch::new(None, Some(bin.clone())).comparing_binary_with(running);
        assert_eq!(w.poll(), (None, vec![]));
        // Rewritten with the same bytes: a new file, no change.
        script(&bin, "exit 0 # v1", 0o755);
        assert_eq!(w.poll(), (None, vec![]));
        script(&bin, "exit 0 # v2", 0o644);
        let (c, notes) = w.poll();
        assert!(
            c.is_none() && matches!(&notes[..], [Note::Warn(m)] if m.contains("not an executable")),
            "{notes:?}"
        );
        assert_eq!(w.poll(), (None, vec![]), "said once");
        script(&bin, "exit 3 # v3", 0o755);
        let (c, notes) = w.poll();
        assert!(
            c.is_none() && matches!(&notes[..], [Note::Warn(m)] if m.contains("--version` failed")),
            "{notes:?}"
        );
        std::fs::remove_file(&bin).unwrap();
        let (c, notes) = w.poll();
        assert!(
            c.is_none() && matches!(&notes[..], [Note::Warn(m)] if m.contains("cannot be read")),
            "{notes:?}"
        );
        script(&bin, "exit 0 # v4", 0o755);
        assert_eq!(w.poll(), (Some(Change::Binary(bin)), vec![]));
    }

    #[test]
    fn a_new_binary_waits_for_a_refused_config_to_be_fixed() {
        let dir = tempfile::tempdir().unwrap();
        let running = dir.path().join("running");
        script(&running, "exit 0 # v1", 0o755);
        let bin = dir.path().join("greenlight");
        script(&bin, "exit 0 # v1", 0o755);
        let cfg = dir.path().join("w.toml");
        std::fs::write(&cfg, "a = 1\n").unwrap();
        let mut w = SelfWatch::new(
            Some((cfg.clone(), "a = 1\n".into(), check_toml())),
            Some(bin.clone()),
        )
        .comparing_binary_with(running);
        std::fs::write(&cfg, "a = bad\n").unwrap();
        script(&bin, "exit 0 # v2", 0o755);
        let (c, notes) = w.poll();
        assert_eq!(c, None);
        assert_eq!(notes.len(), 2, "{notes:?}");
        std::fs::write(&cfg, "a = 1\n").unwrap();
        assert_eq!(w.poll(), (Some(Change::Binary(bin)), vec![]));
    }
}
