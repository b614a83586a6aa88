//! Commit ids: a full git SHA-1, validated once where it enters (git's output, a state file, a
//! `This reverts commit` line) so the judge compares ids, never spellings. This module only
//! names commits; it never asks git anything about them (ancestry is the caller's question).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// A commit's changed paths, shared: the arrived commit, and the batch and later commits of
/// every watch it touches, hold one list (a commit of 1,000 apps' paths with 1,000 watches is
/// one list in memory, not 1,000). Serialized as a plain list.
pub type Paths = Arc<[String]>;
use std::str::FromStr;

/// A commit: 40 hex digits, lower-cased (git prints them so; an upper-case spelling is the
/// same commit). Serialized as that string, so JSON shapes are those of a plain SHA.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CommitId(String);

/// Text that is not a full 40-hex commit id.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a full 40-hex commit id")]
pub struct NotACommitId(pub String);

impl CommitId {
    pub fn parse(s: &str) -> Result<CommitId, NotACommitId> {
        if s.len() == 40 && s.bytes().all(|c| c.is_ascii_hexdigit()) {
            Ok(CommitId(s.to_ascii_lowercase()))
        } else {
            Err(NotACommitId(s.to_string()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 8 digits, as messages quote a commit.
    pub fn short(&self) -> &str {
        &self.0[..8]
    }
}

impl FromStr for CommitId {
    type Err = NotACommitId;
    fn from_str(s: &str) -> Result<CommitId, NotACommitId> {
        CommitId::parse(s)
    }
}

impl TryFrom<String> for CommitId {
    type Error = NotACommitId;
    fn try_from(s: String) -> Result<CommitId, NotACommitId> {
        CommitId::parse(&s)
    }
}

impl From<CommitId> for String {
    fn from(c: CommitId) -> String {
        c.0
    }
}

impl AsRef<str> for CommitId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CommitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for CommitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

// Comparisons with a spelled-out SHA (git's output, a revision Argo CD reports) are by value,
// as git compares them: case does not matter.
impl PartialEq<str> for CommitId {
    fn eq(&self, other: &str) -> bool {
        self.0.eq_ignore_ascii_case(other)
    }
}

impl PartialEq<&str> for CommitId {
    fn eq(&self, other: &&str) -> bool {
        self.0.eq_ignore_ascii_case(other)
    }
}

impl PartialEq<String> for CommitId {
    fn eq(&self, other: &String) -> bool {
        self.0.eq_ignore_ascii_case(other)
    }
}

impl PartialEq<CommitId> for str {
    fn eq(&self, other: &CommitId) -> bool {
        other == self
    }
}

impl PartialEq<CommitId> for &str {
    fn eq(&self, other: &CommitId) -> bool {
        other == *self
    }
}

impl PartialEq<CommitId> for String {
    fn eq(&self, other: &CommitId) -> bool {
        other == self
    }
}

/// A commit that arrived on the tracked branch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitInfo {
    pub sha: CommitId,
    pub parents: Vec<CommitId>,
    pub subject: String,
    pub message: String,
    /// Files changed against the first parent (every file for a root commit).
    pub changed_paths: Paths,
    /// For a merge: the parent that was the branch's tip side before it, when greenlight could
    /// tell (the one parent that contains the tip it recorded before the fetch that brought
    /// the merge). A `git pull --no-rebase` merge has the developer's commit first, so this is
    /// not always the first parent (`docs/verdicts.md#evidence`). `None` for a commit with one
    /// parent, and for a merge whose side greenlight could not tell.
    #[serde(default)]
    pub mainline: Option<CommitId>,
}

impl CommitInfo {
    /// The parents a merge brings into the branch: all but the mainline, or, with the mainline
    /// unknown, all but the first (git's own default).
    pub fn brought_parents(&self) -> Vec<&CommitId> {
        match &self.mainline {
            Some(m) => self.parents.iter().filter(|p| *p != m).collect(),
            None => self.parents.iter().skip(1).collect(),
        }
    }

    /// The parents, the mainline first.
    pub(crate) fn parents_mainline_first(&self) -> Vec<CommitId> {
        let mut parents = self.parents.clone();
        if let Some(m) = &self.mainline
            && let Some(i) = parents.iter().position(|p| p == m)
        {
            let m = parents.remove(i);
            parents.insert(0, m);
        }
        parents
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_full_hex_shas_are_commit_ids_and_they_are_lower_cased() {
        let upper = "ABCDEF0123456789ABCDEF0123456789ABCDEF01";
        let id = CommitId::parse(upper).unwrap();
        assert_eq!(id.as_str(), upper.to_ascii_lowercase());
        assert_eq!(id.short(), "abcdef01");
        assert_eq!(id, *upper);
        for bad in [
            "",
            "abc",
            "main",
            "sha256:0123",
            &"g".repeat(40),
            &"a".repeat(41),
        ] {
            assert!(CommitId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn serialized_as_the_plain_string() {
        let id = CommitId::parse(&"a".repeat(40)).unwrap();
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"{}\"", "a".repeat(40)));
        assert_eq!(serde_json::from_str::<CommitId>(&json).unwrap(), id);
        assert!(serde_json::from_str::<CommitId>("\"main\"").is_err());
    }
}
