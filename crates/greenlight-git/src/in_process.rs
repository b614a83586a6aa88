//! The clone's reads answered in process (gitoxide), without starting a git process:
//! ancestry, commit data and changed paths, the questions the judge asks per commit and per
//! observation.
//!
//! Every answer here must equal git's. So a question is answered in process only in the
//! plain case: revisions given as full object ids, commits in canonical form (no `encoding`
//! header, identities of the form `Name <email> seconds ±hhmm`, a UTF-8 message without NUL),
//! a clone that is neither shallow nor has replacement objects or grafts. Anything else, and
//! any error or panic inside the reader, answers `None`: "ask git", and the caller runs the git
//! command as before. The property tests in `tests/in_process.rs` hold both to the same answers over
//! generated histories.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use gix::ObjectId;
use gix::bstr::ByteSlice;
use gix::commitgraph::{Graph, Position};
use gix::diff::tree::recorder::Change;

use crate::repo::CommitData;

/// The in-process reader of one clone.
pub(crate) struct InProcess {
    // One repository handle: its object and pack caches serve every question. The reads it
    // answers take microseconds, so one lock costs nothing the judge would notice.
    state: Mutex<Reader>,
}

struct Reader {
    repo: gix::Repository,
    /// The commit-graph as last loaded, and what its files looked like then: a fetch writes
    /// a new layer (`fetch.writeCommitGraph`), and the next question loads it.
    graph: Option<(Vec<Stamp>, Option<Graph>)>,
    /// Ancestor sets of the descendants most recently asked about, over the loaded graph.
    reach: Reach,
}

/// The reachability index: for a few descendants (the revisions Argo CD synced, which the
/// judge asks about again and again), the set of their ancestors as a bitset over the
/// commit-graph's positions, so that a question against one of them is a bit test.
///
/// A question against a descendant with no set is answered from a new set when the descendant
/// reaches the newest kept one within `walk_budget` commits (the branch moved on: that set and
/// the commits between); else by a walk from the descendant, pruned by levels and dates (most
/// questions end within a few commits: a watched commit near the synced revision), and only a
/// walk that visits more than `walk_budget` commits builds the set, by one walk of the
/// descendant's whole history.
/// The sets are dropped when the graph is loaded again (its positions may change).
struct Reach {
    /// (descendant, the positions of its ancestors and itself), the newest last.
    sets: VecDeque<(Position, Vec<u64>)>,
    walk_budget: usize,
}

/// How many descendants' sets are kept (each is one bit per commit of the graph).
const SETS_KEPT: usize = 4;

/// A pruned walk that visits more commits than this builds the descendant's ancestor set.
const WALK_BUDGET: usize = 2048;

impl Reach {
    fn new() -> Reach {
        Reach {
            sets: VecDeque::new(),
            walk_budget: WALK_BUDGET,
        }
    }

    /// `d`'s ancestor set, the newest kept first when several match.
    fn get(&self, d: Position) -> Option<&Vec<u64>> {
        self.sets
            .iter()
            .rev()
            .find(|(at, _)| *at == d)
            .map(|(_, s)| s)
    }

    fn keep(&mut self, d: Position, set: Vec<u64>) {
        self.sets.retain(|(at, _)| *at != d);
        if self.sets.len() == SETS_KEPT {
            self.sets.pop_front();
        }
        self.sets.push_back((d, set));
    }
}

/// A file's identity and size as `stat` gives them: a changed file is loaded again.
type Stamp = Option<(u64, u64, i64, i64)>;

impl Reader {
    /// The commit-graph, loaded again when its files changed; `None` when there is none.
    fn graph(&mut self) -> Option<&Graph> {
        let info = self.repo.objects.store_ref().path().join("info");
        let stamps: Vec<Stamp> = [
            info.join("commit-graph"),
            info.join("commit-graphs").join("commit-graph-chain"),
        ]
        .iter()
        .map(|p| stamp(p))
        .collect();
        if self.graph.as_ref().is_none_or(|(s, _)| *s != stamps) {
            let graph = self.repo.commit_graph_if_enabled().ok().flatten();
            self.graph = Some((stamps, graph));
            self.reach.sets.clear();
        }
        self.graph.as_ref().and_then(|(_, g)| g.as_ref())
    }
}

fn stamp(path: &Path) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.ino(), m.len(), m.mtime(), m.mtime_nsec()))
}

impl InProcess {
    /// Opens the clone at `dir` for in-process reads; `None` when that cannot be done (or
    /// must not be: a shallow clone, replacement objects or grafts, whose history git
    /// rewrites).
    pub(crate) fn open(dir: &Path) -> Option<InProcess> {
        let mut repo = gix::open_opts(dir, gix::open::Options::isolated()).ok()?;
        // Grafts (`info/grafts`), which git still applies to every parent it reads, likewise.
        if repo.is_shallow().unwrap_or(true)
            || has_replacements(&repo)
            || repo.common_dir().join("info/grafts").exists()
        {
            return None;
        }
        repo.object_cache_size_if_unset(4 * 1024 * 1024);
        Some(InProcess {
            state: Mutex::new(Reader {
                repo,
                graph: None,
                reach: Reach::new(),
            }),
        })
    }

    /// Runs `read` on the reader; `None` (ask git) on any panic inside it.
    fn with_reader<T>(&self, read: impl FnOnce(&mut Reader) -> Option<T>) -> Option<T> {
        let mut reader = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        catch_unwind(AssertUnwindSafe(|| read(&mut reader)))
            .ok()
            .flatten()
    }

    /// Runs `read` on the repository; `None` (ask git) on any panic inside it.
    fn with<T>(&self, read: impl FnOnce(&gix::Repository) -> Option<T>) -> Option<T> {
        self.with_reader(|r| read(&r.repo))
    }

    /// The full id of `rev` when it is a full object id: `Some(Some(id))` for a commit,
    /// `Some(None)` for an id the clone lacks, `None` (ask git) otherwise.
    pub(crate) fn resolve(&self, rev: &str) -> Option<Option<String>> {
        let id = full_id(rev)?;
        self.with(|repo| Some(commit_exists(repo, id)?.then(|| id.to_string())))
    }

    /// Whether `ancestor` is an ancestor of, or equal to, `descendant` (both full ids):
    /// `Some(None)` when either is not in the clone.
    pub(crate) fn is_ancestor(&self, ancestor: &str, descendant: &str) -> Option<Option<bool>> {
        let (a, d) = (full_id(ancestor)?, full_id(descendant)?);
        self.with_reader(|reader| {
            // As git does: both must be commits in the object database, graph or no graph.
            if !commit_exists(&reader.repo, a)? || !commit_exists(&reader.repo, d)? {
                return Some(None);
            }
            reader.graph();
            let Reader { graph, reach, .. } = reader;
            let graph = graph.as_ref().and_then(|(_, g)| g.as_ref());
            if let Some(answer) = graph.and_then(|g| reaches(g, reach, a, d)) {
                return Some(Some(answer));
            }
            reader.repo.is_ancestor(a, d).ok().map(Some)
        })
    }

    /// How many commits an ancestry walk may visit: the pruned walk before the descendant's
    /// ancestor set is built instead, and the walk that extends the newest kept set (tests set
    /// 0: every question is answered from a set built whole).
    pub(crate) fn set_walk_budget(&self, budget: usize) {
        self.with_reader(|reader| {
            reader.reach.walk_budget = budget;
            reader.reach.sets.clear();
            Some(())
        });
    }

    /// The commits in `from..to` (full ids), oldest first, when that range is a line: every
    /// commit in it has one parent, and following them from `to` reaches `from`. A line has one
    /// topological order, the one `git rev-list --reverse --topo-order` lists. Anything else
    /// (a merge in the range, a `from` that is not an ancestor of `to`, a commit the clone
    /// lacks) is `None`: ask git.
    pub(crate) fn new_commits(&self, from: &str, to: &str) -> Option<Vec<String>> {
        let (from, to) = (full_id(from)?, full_id(to)?);
        self.with(|repo| {
            if !commit_exists(repo, from)? {
                return None;
            }
            let mut line = Vec::new();
            let mut at = to;
            while at != from {
                let object = repo.try_find_object(at).ok()??;
                if object.kind != gix::object::Kind::Commit {
                    return None;
                }
                let commit =
                    gix::objs::CommitRef::from_bytes(&object.data, repo.object_hash()).ok()?;
                let [parent] = commit.parents[..] else {
                    return None;
                };
                line.push(at.to_string());
                at = full_id(parent.to_str().ok()?)?;
            }
            line.reverse();
            Some(line)
        })
    }

    /// The data of the commit `rev` (a full id), when it is in canonical form.
    pub(crate) fn commit(&self, rev: &str) -> Option<CommitData> {
        let id = full_id(rev)?;
        self.with(|repo| {
            let object = repo.try_find_object(id).ok()??;
            if object.kind != gix::object::Kind::Commit {
                return None;
            }
            let commit = gix::objs::CommitRef::from_bytes(&object.data, repo.object_hash()).ok()?;
            if commit.encoding.is_some()
                || !commit.extra_headers.iter().all(|(k, _)| *k != "encoding")
            {
                return None;
            }
            let message = std::str::from_utf8(commit.message).ok()?;
            if message.contains('\0') {
                return None;
            }
            let (author_name, author_email, author_time) = identity(commit.author)?;
            let (committer_name, committer_email, committer_time) = identity(commit.committer)?;
            let mut parents = Vec::with_capacity(commit.parents.len());
            for p in &commit.parents {
                parents.push(full_id(p.to_str().ok()?)?.to_string());
            }
            Some(CommitData {
                sha: id.to_string(),
                parents,
                subject: crate::repo::subject_of(message),
                message: message.to_owned(),
                author_name,
                author_email,
                author_time,
                committer_name,
                committer_email,
                committer_time,
            })
        })
    }

    /// Paths that differ between `base`'s tree (the first parent's when `None`, the empty tree
    /// for a root commit) and `rev`'s, files only, sorted as git lists them.
    pub(crate) fn changed_paths(&self, rev: &str, base: Option<&str>) -> Option<Vec<String>> {
        let id = full_id(rev)?;
        let base = match base {
            Some(b) => Some(full_id(b)?),
            None => None,
        };
        self.with(|repo| {
            let commit = repo.find_commit(id).ok()?;
            let new_tree = commit.tree_id().ok()?.detach();
            let old_tree = match base {
                Some(b) => Some(repo.find_commit(b).ok()?.tree_id().ok()?.detach()),
                None => match commit.parent_ids().next() {
                    Some(p) => Some(repo.find_commit(p.detach()).ok()?.tree_id().ok()?.detach()),
                    None => None,
                },
            };
            let hash = repo.object_hash();
            let new = repo.find_object(new_tree).ok()?.detach();
            let old = match old_tree {
                Some(t) => repo.find_object(t).ok()?.detach().data,
                None => Vec::new(),
            };
            let mut recorder = gix::diff::tree::Recorder::default();
            gix::diff::tree(
                gix::objs::TreeRefIter::from_bytes(&old, hash),
                gix::objs::TreeRefIter::from_bytes(&new.data, hash),
                gix::diff::tree::State::default(),
                &repo.objects,
                &mut recorder,
            )
            .ok()?;
            // Collected from an iterator over the records themselves, the paths would keep the
            // records' allocation (several times their size) for as long as the commit is held:
            // a fetch of 100,000 commits holds them all at once.
            let mut paths: Vec<String> = Vec::with_capacity(recorder.records.len());
            paths.extend(
                recorder
                    .records
                    .into_iter()
                    // A type change (file to directory and back) comes as a deletion and an
                    // addition; the trees themselves are not listed, as `git diff-tree -r` does not.
                    .filter_map(|change| match change {
                        Change::Addition {
                            entry_mode, path, ..
                        }
                        | Change::Deletion {
                            entry_mode, path, ..
                        }
                        | Change::Modification {
                            entry_mode, path, ..
                        } => (!entry_mode.is_tree()).then_some(path),
                    })
                    .map(|p| String::from_utf8_lossy(&p).into_owned()),
            );
            // Depth-first in tree order, as git lists them, is the byte order of the full paths.
            paths.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
            paths.dedup();
            Some(paths)
        })
    }
}

/// Whether `a` is `d` or one of its ancestors, answered from the commit-graph alone: `None`
/// when either is not in it (fetched after it was written) or the graph is inconsistent.
///
/// From `d`'s ancestor set when one is kept; else a walk over parent positions from `d` that
/// never goes below `a`: a commit's topological level is above each parent's, and so is its
/// corrected commit date, so a commit whose level or date is not above `a`'s cannot have `a`
/// among its ancestors (levels are compared only when every layer has them and `a`'s is not
/// saturated; dates only when every layer has them). A walk longer than the budget builds and
/// keeps `d`'s set instead.
fn reaches(graph: &Graph, reach: &mut Reach, a: ObjectId, d: ObjectId) -> Option<bool> {
    let (a, d) = (graph.lookup(a)?, graph.lookup(d)?);
    if a == d {
        return Some(true);
    }
    if let Some(set) = reach.get(d) {
        return Some(has(set, a));
    }
    // The branch moved on from the newest kept descendant: its set and the commits between.
    let budget = reach.walk_budget;
    let moved_on = match reach.sets.back() {
        Some((from, base)) => ancestors(graph, d, Some((*from, base)), budget)?,
        None => None,
    };
    let set = match moved_on {
        Some(set) => set,
        None => {
            if let Some(answer) = pruned_walk(graph, a, d, budget)? {
                return Some(answer);
            }
            ancestors(graph, d, None, usize::MAX)??
        }
    };
    let answer = has(&set, a);
    reach.keep(d, set);
    Some(answer)
}

/// The pruned walk: `Some(Some(answer))`, or `Some(None)` when it visited more than `budget`
/// commits without an answer.
fn pruned_walk(graph: &Graph, a: Position, d: Position, budget: usize) -> Option<Option<bool>> {
    let ancestor = graph.commit_at(a);
    let level = ancestor.generation();
    let level = (graph.generation_numbers_available()
        && level > 0
        && level < gix::commitgraph::GENERATION_NUMBER_MAX)
        .then_some(level);
    let date = if graph.corrected_commit_dates_available() {
        Some(ancestor.corrected_commit_date().ok()??)
    } else {
        None
    };
    let mut seen = bitset(graph);
    let mut stack = vec![d];
    let mut visited = 0usize;
    while let Some(at) = stack.pop() {
        if at == a {
            return Some(Some(true));
        }
        visited += 1;
        if visited > budget {
            return Some(None);
        }
        let commit = graph.commit_at(at);
        if level.is_some_and(|l| commit.generation() <= l) {
            continue;
        }
        if let Some(date) = date
            && commit.corrected_commit_date().ok()?? <= date
        {
            continue;
        }
        for parent in commit.iter_parents() {
            let parent = parent.ok()?;
            if mark(&mut seen, parent)? {
                stack.push(parent);
            }
        }
    }
    Some(Some(false))
}

/// The ancestors of `d` and `d` itself, as a bitset over graph positions. With `base` (a kept
/// set and its descendant), the walk does not enter the base set, and when it meets the base's
/// descendant the answer is what it visited joined with the base (every ancestor of a commit in
/// the base set is in it); when it does not meet it, or visits more than `budget` commits,
/// `Some(None)`.
fn ancestors(
    graph: &Graph,
    d: Position,
    base: Option<(Position, &[u64])>,
    budget: usize,
) -> Option<Option<Vec<u64>>> {
    let mut set = bitset(graph);
    mark(&mut set, d)?;
    let mut met = false;
    let mut stack = vec![d];
    let mut visited = 0usize;
    while let Some(at) = stack.pop() {
        visited += 1;
        if visited > budget {
            return Some(None);
        }
        for parent in graph.commit_at(at).iter_parents() {
            let parent = parent.ok()?;
            if let Some((from, base)) = base
                && has(base, parent)
            {
                met |= parent == from;
                continue;
            }
            if mark(&mut set, parent)? {
                stack.push(parent);
            }
        }
    }
    match base {
        None => Some(Some(set)),
        Some((from, _)) if d == from => Some(Some(set)),
        Some((_, base)) if met => {
            for (word, b) in set.iter_mut().zip(base) {
                *word |= b;
            }
            Some(Some(set))
        }
        Some(_) => Some(None),
    }
}

fn bitset(graph: &Graph) -> Vec<u64> {
    vec![0u64; (graph.num_commits() as usize).div_ceil(64)]
}

/// Whether position `at` is in `set` (false beyond its end).
fn has(set: &[u64], at: Position) -> bool {
    set.get(at.0 as usize / 64)
        .is_some_and(|w| w & (1u64 << (at.0 % 64)) != 0)
}

/// Adds `at` to `set`: `Some(true)` when it was not there, `None` when it is beyond the set
/// (an inconsistent graph).
fn mark(set: &mut [u64], at: Position) -> Option<bool> {
    let word = set.get_mut(at.0 as usize / 64)?;
    let bit = 1u64 << (at.0 % 64);
    let new = *word & bit == 0;
    *word |= bit;
    Some(new)
}

/// `rev` as an object id when it is one spelled out in full (40 hex digits).
fn full_id(rev: &str) -> Option<ObjectId> {
    if rev.len() != 40 || !rev.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    ObjectId::from_hex(rev.as_bytes()).ok()
}

/// `Some(true)` for a commit in the clone, `Some(false)` for an id it lacks, `None` for
/// another kind of object (a tag git would peel) or a failed read.
fn commit_exists(repo: &gix::Repository, id: ObjectId) -> Option<bool> {
    match repo.try_find_header(id).ok()? {
        None => Some(false),
        Some(header) => (header.kind() == gix::object::Kind::Commit).then_some(true),
    }
}

/// Whether the clone has replacement objects, which git applies to every read.
fn has_replacements(repo: &gix::Repository) -> bool {
    let Ok(refs) = repo.references() else {
        return true;
    };
    match refs.prefixed("refs/replace/") {
        Ok(mut it) => it.next().is_some(),
        Err(_) => true,
    }
}

/// A canonical identity `Name <email> seconds ±hhmm`: its name, e-mail and time, or `None`
/// for anything else (git parses those leniently; the reader leaves them to it).
fn identity(raw: &gix::bstr::BStr) -> Option<(String, String, i64)> {
    let raw = std::str::from_utf8(raw).ok()?;
    let (name, rest) = raw.split_once(" <")?;
    let (email, rest) = rest.split_once("> ")?;
    let (seconds, zone) = rest.split_once(' ')?;
    let plain = |s: &str| {
        !s.is_empty() && s.trim() == s && !s.contains(['<', '>', '\n', '\0']) && !s.contains("  ")
    };
    let zone_ok = zone.len() == 5
        && matches!(zone.as_bytes()[0], b'+' | b'-')
        && zone.bytes().skip(1).all(|b| b.is_ascii_digit());
    if !plain(name)
        || !plain(email)
        || !zone_ok
        || seconds.is_empty()
        || !seconds.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    Some((name.to_owned(), email.to_owned(), seconds.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_canonical_identities_are_read_in_process() {
        let id = |s: &str| identity(s.into());
        assert_eq!(
            id("Ann Example <ann@example.com> 1700000000 +0100"),
            Some((
                "Ann Example".into(),
                "ann@example.com".into(),
                1_700_000_000
            ))
        );
        for odd in [
            " Ann <a@b> 1 +0000",
            "Ann  Ex <a@b> 1 +0000",
            "<a@b> 1 +0000",
            "Ann <> 1 +0000",
            "Ann <a@b> x +0000",
            "Ann <a@b> 1 0000",
            "Ann <a@b> 1 +000",
            "Ann <a@b>",
            "Ann <a@b> 99999999999999999999 +0000",
        ] {
            assert_eq!(id(odd), None, "{odd:?}");
        }
    }

    #[test]
    fn only_full_ids_are_answered_in_process() {
        assert!(full_id(&"a".repeat(40)).is_some());
        assert!(full_id(&"A".repeat(40)).is_some());
        for rev in [
            "",
            "abc1234",
            "HEAD",
            &"g".repeat(40),
            &"a".repeat(41),
            &"a".repeat(64),
        ] {
            assert!(full_id(rev).is_none(), "{rev:?}");
        }
    }
}
