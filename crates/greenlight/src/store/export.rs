//! `greenlight state export` and `state import`: a store's state as one JSON document, the
//! same for every store, so that a state file moves into the cluster store and back
//! (docs/state.md#moving-state). Watches and the breaker are carried as their records, in the
//! format both stores keep; events are not carried.

use super::{Store, Write, breaker_body, breaker_from_body, watch_body, watch_from_body};
use anyhow::{Context, Result, bail};
use greenlight_core::judge::{Arrived, Idle};
use greenlight_core::snapshot::AppKey;
use greenlight_core::tape::Step;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The document's format, written as `format`; a newer one is refused by its number.
pub const FORMAT: u32 = 1;

/// The exported state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Document {
    /// The document's format ([`FORMAT`]).
    pub format: u32,
    pub repo: Option<String>,
    pub branch: Option<String>,
    pub baseline: Option<String>,
    pub tip: Option<String>,
    /// The breaker's record.
    pub breaker: Value,
    /// Every retained watch's record, oldest start first.
    pub watches: Vec<Value>,
    /// Each app's idle observations, by `<namespace>/<name>`.
    pub idle: BTreeMap<String, Vec<Idle>>,
    /// The arrived commits kept, oldest first.
    pub arrived: Vec<Arrived>,
    /// The track record's counts of pruned watches, by app (absent in documents written before
    /// it was kept: none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub record_summary: super::Summary,
    /// Each watch's tape of judge inputs, by watch id (docs/why.md; absent in documents
    /// written before tapes were kept, and for watches without one).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tapes: BTreeMap<String, Vec<Step>>,
}

/// Everything `store` carries, as a document.
pub fn export(store: &mut dyn Store) -> Result<Document> {
    let e = store.export()?;
    let watches = e
        .loaded
        .watches
        .iter()
        .map(|w| Ok(serde_json::from_str(&watch_body(w)?)?))
        .collect::<Result<Vec<Value>>>()?;
    let mut tapes = BTreeMap::new();
    for w in &e.loaded.watches {
        let (_, steps) = store.tape(&w.id)?;
        if !steps.is_empty() {
            tapes.insert(w.id.clone(), steps);
        }
    }
    Ok(Document {
        format: FORMAT,
        repo: e.loaded.repo,
        branch: e.loaded.branch,
        baseline: e.loaded.baseline,
        tip: e.loaded.tip,
        breaker: serde_json::from_str(&breaker_body(&e.loaded.breaker)?)?,
        watches,
        idle: e
            .idle
            .into_iter()
            .map(|(k, v)| (format!("{}/{}", k.namespace, k.name), v))
            .collect(),
        arrived: e.arrived,
        record_summary: e.record_summary,
        tapes,
    })
}

/// What an import wrote.
#[derive(Debug, PartialEq, Eq)]
pub struct Imported {
    pub watches: usize,
}

/// Reads a document, refusing a newer format by its number.
pub fn parse(text: &str) -> Result<Document> {
    #[derive(Deserialize)]
    struct Probe {
        format: u32,
    }
    let probe: Probe = serde_json::from_str(text)
        .context("not a greenlight state document (`greenlight state export` writes one)")?;
    if probe.format > FORMAT {
        bail!(
            "the document has format {}; this greenlight reads formats up to {FORMAT} (a newer greenlight wrote it)",
            probe.format
        );
    }
    Ok(serde_json::from_str(text)?)
}

/// Writes `doc` into `store`, which must hold no watch and no tip: bound to the document's
/// repository and branch, then everything in one [`Store::write`].
pub fn import(doc: &Document, store: &mut dyn Store) -> Result<Imported> {
    let watches = doc
        .watches
        .iter()
        .enumerate()
        .map(|(i, v)| {
            watch_from_body(&v.to_string()).with_context(|| {
                format!(
                    "watch {} (number {} in the document) cannot be read",
                    v["id"].as_str().unwrap_or("without an id"),
                    i + 1
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let breaker =
        breaker_from_body(&doc.breaker.to_string()).context("the breaker cannot be read")?;
    let mut idle = Vec::new();
    for (k, v) in &doc.idle {
        let Some((namespace, name)) = k.split_once('/') else {
            bail!("idle observations of {k:?}: not <namespace>/<name>");
        };
        idle.push((
            AppKey {
                namespace: namespace.to_string(),
                name: name.to_string(),
            },
            v.clone(),
        ));
    }
    let mut tapes = Vec::new();
    for (id, steps) in &doc.tapes {
        if !watches.iter().any(|w| w.id == *id) {
            bail!("the tape of watch {id}: the document holds no such watch");
        }
        tapes.push((id.clone(), 0, steps.clone()));
    }
    let present = store.load()?;
    if !present.watches.is_empty() || present.tip.is_some() {
        bail!(
            "{} is not empty ({} watch(es), tip {}): import only into a new state",
            store.describe(),
            present.watches.len(),
            present.tip.as_deref().unwrap_or("none")
        );
    }
    match (&doc.repo, &doc.branch) {
        (Some(repo), Some(branch)) => store.bind(repo, branch)?,
        (None, None) => {}
        _ => bail!("the document names a repository without a branch, or a branch without one"),
    }
    store.write(Write {
        watches: &watches,
        breaker: Some(&breaker),
        tip: doc.tip.as_deref(),
        baseline: doc.baseline.as_deref(),
        idle: &idle,
        arrived: &doc.arrived,
        record_summary: (!doc.record_summary.is_empty()).then_some(&doc.record_summary),
        tapes: &tapes,
        ..Write::default()
    })?;
    Ok(Imported {
        watches: watches.len(),
    })
}
