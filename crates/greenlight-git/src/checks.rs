//! The checks a write request's arguments pass before anything reaches git, shared by the
//! revert (`revert.rs`) and the change commit (`change.rs`): a path greenlight may write, an
//! author identity git takes as given, at least one push attempt.

use crate::error::{Error, Result};
use std::path::{Component, Path};

/// A repository path greenlight may write: relative, no `..`, never inside `.git`.
pub(crate) fn check_path(path: &str) -> Result<()> {
    let bad = |reason| {
        Err(Error::InvalidInput {
            what: "path",
            value: path.to_owned(),
            reason,
        })
    };
    if path.is_empty() || path.starts_with('-') {
        return bad("expected a path in the repository");
    }
    for c in Path::new(path).components() {
        match c {
            Component::Normal(s) if s == ".git" => return bad("must not be inside .git"),
            Component::Normal(_) | Component::CurDir => {}
            _ => return bad("must be relative, without `..`"),
        }
    }
    Ok(())
}

/// An author name and e-mail git accepts as given.
pub(crate) fn check_identity(name: &str, email: &str) -> Result<()> {
    for (what, value) in [("author name", name), ("author e-mail", email)] {
        let bad = |reason| {
            Err(Error::InvalidInput {
                what,
                value: value.to_owned(),
                reason,
            })
        };
        if value.trim().is_empty() {
            return bad("must not be empty");
        }
        if value.contains(['<', '>', '\n', '\r', '\0']) {
            return bad("must not contain '<', '>' or line breaks");
        }
    }
    Ok(())
}

/// At least one push attempt.
pub(crate) fn check_attempts(max_attempts: u32) -> Result<()> {
    if max_attempts == 0 {
        return Err(Error::InvalidInput {
            what: "max_attempts",
            value: "0".into(),
            reason: "at least one push attempt is needed",
        });
    }
    Ok(())
}
