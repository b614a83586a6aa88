//! The one reader of the files a user names to greenlight by a flag, a config key or an
//! argument — the configs (`watch --config`, `promote.yaml`, `.greenlight.toml`), the
//! AnalysisTemplates the gate imports (`analysisTemplate.file`), token files
//! (`--git-token-file`, `--argocd-token-file`, …), `--argocd-ca-file`, `lint`'s inputs and the
//! charts' files it reads, `trailer check`'s message, `state import`'s document: bounded, and
//! only a regular file. Standard input, where a command reads it, is bounded by
//! [`read_stdin_bounded`].
//!
//! A path may name anything: `/dev/zero` never ends, a FIFO blocks its reader until a writer
//! comes, a directory or a device is no text at all. The file is opened non-blocking (so that
//! opening a FIFO never waits for a writer), the opened descriptor's type is checked (not the
//! path's, which could change between a check and the open), and at most `limit + 1` bytes are
//! read: one more than the limit means too large, refused without reading further.
//!
//! Must never: block on what it opens, read more than `limit + 1` bytes, or put a file's
//! contents in an error (a token file's contents are a secret).

use std::fmt;
use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The most a YAML file the gate reads may hold (`promote.yaml`, an AnalysisTemplate): 1 MiB.
pub const YAML_LIMIT: u64 = 1 << 20;
/// The most a token file may hold: 64 KiB (a token is a line).
pub const TOKEN_LIMIT: u64 = 64 << 10;
/// The most a CA bundle (`--argocd-ca-file`) may hold: 1 MiB.
pub const CA_LIMIT: u64 = 1 << 20;
/// The most a TOML config file (`watch --config`, `.greenlight.toml`) may hold: 1 MiB.
pub const CONFIG_LIMIT: u64 = 1 << 20;
/// The most a commit message (`trailer check`'s file) may hold: 1 MiB.
pub const MESSAGE_LIMIT: u64 = 1 << 20;
/// The most a state document (`state import`) may hold: 256 MiB.
pub const STATE_DOCUMENT_LIMIT: u64 = 256 << 20;

/// Why a named file was not read. The message names the flag or key, the path and the reason;
/// never the contents.
#[derive(Debug)]
pub struct FileError {
    /// The flag or config key that named the file (`--git-token-file`,
    /// `analysisTemplate.file`).
    pub what: String,
    /// The path as given.
    pub path: PathBuf,
    /// What was wrong.
    pub problem: Problem,
}

/// What was wrong with a named file.
#[derive(Debug)]
pub enum Problem {
    /// It could not be opened (missing, no permission) or read.
    Io(io::Error),
    /// It is not a regular file: what it is, in words (`a FIFO (named pipe)`).
    NotRegular(&'static str),
    /// It holds more than the limit, in bytes.
    TooLarge(u64),
    /// Text was expected: the offset of the first byte that is not UTF-8.
    NotUtf8(usize),
}

impl FileError {
    /// The reason alone, without the flag and the path: the operating system's words for an
    /// IO error, else what the file is or how large it may be (naming the flag or key).
    pub fn reason(&self) -> String {
        match &self.problem {
            Problem::Io(e) => e.to_string(),
            Problem::NotRegular(kind) => format!("is {kind}, not a regular file"),
            Problem::TooLarge(limit) => format!(
                "larger than {}, the most {} may hold",
                size(*limit),
                self.what
            ),
            Problem::NotUtf8(offset) => {
                format!("not UTF-8 text (invalid byte at offset {offset})")
            }
        }
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let reason = match &self.problem {
            Problem::Io(e) => format!("cannot read: {e}"),
            _ => self.reason(),
        };
        write!(f, "{} {}: {reason}", self.what, self.path.display())
    }
}

impl std::error::Error for FileError {}

/// For a caller that speaks `io::Error`: an IO error as it was, anything else in words (kind
/// `InvalidData`).
impl From<FileError> for io::Error {
    fn from(e: FileError) -> io::Error {
        match e.problem {
            Problem::Io(io) => io,
            _ => io::Error::new(io::ErrorKind::InvalidData, e.reason()),
        }
    }
}

/// `limit` in words: `1 MiB (1048576 bytes)`, `64 KiB (65536 bytes)`, `100 bytes`.
pub fn size(limit: u64) -> String {
    if limit >= 1 << 20 && limit.is_multiple_of(1 << 20) {
        format!("{} MiB ({limit} bytes)", limit >> 20)
    } else if limit >= 1 << 10 && limit.is_multiple_of(1 << 10) {
        format!("{} KiB ({limit} bytes)", limit >> 10)
    } else {
        format!("{limit} bytes")
    }
}

/// Reads the regular file `path`, named by `what` (a flag or a config key), refusing anything
/// else and anything over `limit` bytes. See the module's documentation.
pub fn read_bounded(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>, FileError> {
    let err = |problem| FileError {
        what: what.to_owned(),
        path: path.to_owned(),
        problem,
    };
    let file = match File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    {
        Ok(f) => f,
        // A Unix socket cannot be opened (ENXIO): say what it is rather than "no such device".
        Err(e) => {
            return Err(match std::fs::metadata(path) {
                Ok(meta) if !meta.is_file() => err(Problem::NotRegular(kind_of(&meta))),
                _ => err(Problem::Io(e)),
            });
        }
    };
    let meta = file.metadata().map_err(|e| err(Problem::Io(e)))?;
    if !meta.is_file() {
        return Err(err(Problem::NotRegular(kind_of(&meta))));
    }
    if meta.len() > limit {
        return Err(err(Problem::TooLarge(limit)));
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| err(Problem::Io(e)))?;
    if bytes.len() as u64 > limit {
        return Err(err(Problem::TooLarge(limit)));
    }
    Ok(bytes)
}

/// As [`read_bounded`], for a text file: bytes that are not UTF-8 are refused, naming the
/// offset of the first bad one (never the bytes).
pub fn read_text(path: &Path, limit: u64, what: &str) -> Result<String, FileError> {
    let bytes = read_bounded(path, limit, what)?;
    String::from_utf8(bytes).map_err(|e| FileError {
        what: what.to_owned(),
        path: path.to_owned(),
        problem: Problem::NotUtf8(e.utf8_error().valid_up_to()),
    })
}

/// Reads at most `limit` bytes from `input` (standard input): `Ok(None)` when it holds more —
/// refused after `limit + 1` bytes, never read to its end (`/dev/zero` piped in ends here).
pub fn read_stdin_bounded(input: impl Read, limit: u64) -> io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    input
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= limit).then_some(bytes))
}

/// What a file that is not a regular file is, in words.
fn kind_of(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_up_to_the_limit_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        std::fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read_bounded(&path, 10, "--x").unwrap(), b"0123456789");
        let err = read_bounded(&path, 9, "--x").unwrap_err();
        assert!(matches!(err.problem, Problem::TooLarge(9)), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!(
                "--x {}: larger than 9 bytes, the most --x may hold",
                path.display()
            )
        );
    }

    #[test]
    fn what_is_not_a_regular_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path and a mode; mkfifo touches nothing else.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let sock = dir.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        for (path, kind) in [
            (fifo.as_path(), "a FIFO (named pipe)"),
            (dir.path(), "a directory"),
            (Path::new("/dev/zero"), "a character device"),
            (sock.as_path(), "a socket"),
        ] {
            let err = read_bounded(path, YAML_LIMIT, "analysisTemplate.file").unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "analysisTemplate.file {}: is {kind}, not a regular file",
                    path.display()
                )
            );
        }
        let missing = dir.path().join("missing");
        let err = read_bounded(&missing, YAML_LIMIT, "--config").unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("--config {}: cannot read: ", missing.display())),
            "{err}"
        );
    }

    /// A token file that is not text: the error names the offset, never the bytes.
    #[test]
    fn text_that_is_not_utf8_is_refused_without_its_contents() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, b"tok-secret-\xff\xfe").unwrap();
        let err = read_text(&path, TOKEN_LIMIT, "--token-file").unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "--token-file {}: not UTF-8 text (invalid byte at offset 11)",
                path.display()
            )
        );
        assert!(!format!("{err} {err:?}").contains("tok-secret"), "{err:?}");
    }

    #[test]
    fn sizes_in_words() {
        assert_eq!(size(YAML_LIMIT), "1 MiB (1048576 bytes)");
        assert_eq!(size(TOKEN_LIMIT), "64 KiB (65536 bytes)");
        assert_eq!(size(1000), "1000 bytes");
    }
}
