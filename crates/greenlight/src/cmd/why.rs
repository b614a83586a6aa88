//! `greenlight why <commit> [--app x]`: each watch of the commit, its timeline in words and a
//! replay of its recorded judge inputs through this build's judge (docs/why.md). Exit 0 when
//! every replay reached the recorded verdict (or there was nothing to replay), 3 when one
//! judged otherwise, 2 usage, 1 an unreadable store or tape, or no watch of the commit.

use crate::cmd::state::{Open, StoreArgs};
use crate::cmd::usage;
use anyhow::{Result, bail};
use clap::Args;
use greenlight::why::explain;
use greenlight_core::directive::AppRef;
use serde_json::json;
use std::process::ExitCode;

#[derive(Args)]
pub struct WhyArgs {
    /// The commit: its full SHA or a prefix of at least 4 hex digits.
    #[arg(required_unless_present = "all")]
    pub commit: Option<String>,
    /// Every watch the store holds, whatever its commit (a check after an upgrade: exit 3 when
    /// any replay judges otherwise).
    #[arg(long, conflicts_with = "commit")]
    pub all: bool,
    #[command(flatten)]
    pub store: StoreArgs,
    /// Only this app's watch (`name` or `namespace/name`, as trailers name it).
    #[arg(long)]
    pub app: Option<String>,
    /// Print JSON instead of lines (docs/why.md#json).
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: WhyArgs) -> Result<ExitCode> {
    let given = a.commit.clone().unwrap_or_default();
    let prefix = given.trim().to_ascii_lowercase();
    if !a.all
        && (prefix.len() < 4 || prefix.len() > 64 || !prefix.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Err(usage(format!(
            "{given:?}: not a commit SHA or a prefix of one (4 to 64 hex digits)"
        )));
    }
    let wanted = a
        .app
        .as_deref()
        .map(|s| AppRef::parse(s).map_err(|e| usage(format!("--app {s:?}: {e}"))))
        .transpose()?;
    let mut store = a.store.open(Open::Read)?;
    let loaded = store.load()?;
    let mut watches: Vec<_> = loaded
        .watches
        .into_iter()
        .filter(|w| w.commit.as_str().starts_with(&prefix))
        .filter(|w| {
            wanted.as_ref().is_none_or(|x| {
                w.app.name == x.name
                    && (x.namespace.is_none()
                        || w.app.namespace.is_none()
                        || w.app.namespace == x.namespace)
            })
        })
        .collect();
    let mut commits: Vec<&str> = watches.iter().map(|w| w.commit.as_str()).collect();
    commits.sort();
    commits.dedup();
    if commits.len() > 1 && !a.all {
        return Err(usage(format!(
            "{prefix} names {} commits with watches ({}): give more of the SHA",
            commits.len(),
            commits.join(", ")
        )));
    }
    if watches.is_empty() && a.all {
        outln!("no watch in the {}", store.describe());
        return Ok(ExitCode::SUCCESS);
    }
    if watches.is_empty() {
        bail!(
            "no watch of commit {prefix}{} in the {}",
            a.app
                .as_deref()
                .map(|x| format!(" on app {x}"))
                .unwrap_or_default(),
            store.describe()
        );
    }
    watches.sort_by(|x, y| (x.watch_started_at, &x.id).cmp(&(y.watch_started_at, &y.id)));
    let mut disagree = false;
    let mut unreadable = false;
    let mut docs = Vec::new();
    for listed in &watches {
        // The watch and its tape as one read: what a running daemon wrote meanwhile is in both
        // or in neither.
        let why = match store.tape(&listed.id) {
            Ok((Some(w), steps)) => explain(&w, Ok(steps)),
            Ok((None, _)) => explain(listed, Err("the watch was pruned meanwhile".into())),
            Err(e) => {
                unreadable = true;
                explain(listed, Err(format!("{e:#}")))
            }
        };
        disagree |= why.outcome.disagrees();
        if a.json {
            docs.push(why.to_json());
        } else {
            for line in why.lines() {
                outln!("{line}");
            }
        }
    }
    if a.json {
        let doc = json!({ "schema": "greenlight.why/v1", "watches": docs });
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    }
    Ok(if disagree {
        ExitCode::from(3)
    } else if unreadable {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
