//! A secret value — a git, Argo CD, forge or Prometheus token, a webhook's signing secret — and
//! the one rule that turns a token file's text into one. Every crate that carries a secret
//! carries this type, so the value cannot reach a log line, an error or a panic message by
//! accident: `Debug` and `Display` print `***` (the same mask the URL redaction uses).
//!
//! It must never print or return a secret's value except through [`Secret::expose`], whose
//! callers hand it to where it is used: a child process's environment, an `Authorization`
//! header, an HMAC key.

use std::fmt;
use std::path::{Path, PathBuf};

/// A secret value. `Debug` and `Display` print `***`, so the value cannot
/// reach a log line, an error or a panic message by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The secret in the text of the file `path`, named on the command line by the option
    /// `flag` (`--git-token-file`). Surrounding whitespace and the trailing newline editors and
    /// `echo` add are dropped. An empty file is an error: an empty token would only surface
    /// later as a confusing authentication failure. The error names `flag` and `path`, never
    /// the contents.
    pub fn from_file_text(flag: &str, path: &Path, text: &str) -> Result<Secret, SecretFileError> {
        let value = text.trim();
        if value.is_empty() {
            return Err(SecretFileError::Empty {
                flag: flag.to_owned(),
                path: path.to_owned(),
            });
        }
        Ok(Secret(value.to_owned()))
    }

    /// The secret's value. Only for handing it to where it is used: a child's environment, an
    /// `Authorization` header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Why a token file's text is no token. The message names the option and the file; the
/// contents never reach it (an empty one has none).
#[derive(Debug, thiserror::Error)]
pub enum SecretFileError {
    /// The file holds only whitespace.
    #[error("{flag} {}: the file is empty", path.display())]
    Empty {
        /// The option that named the file.
        flag: String,
        /// The file.
        path: PathBuf,
    },
}

impl From<&str> for Secret {
    fn from(value: &str) -> Secret {
        Secret::new(value)
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Secret {
        Secret::new(value)
    }
}
