//! `greenlight state export` and `state import` (docs/state.md#moving-state), and the flags that
//! name a store, which `status` and `breaker reset` share: `--state <file>` or `--store kube`.

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use greenlight::store::{KubeStore, SqliteStore, Store, export};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Where the state is: exactly one of `--state <file>` and `--store kube`.
#[derive(Args, Clone, Debug)]
pub struct StoreArgs {
    /// The state file (SQLite) the watchdog runs with.
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// `kube`: the cluster store (the watches.greenlight.dev and watchdogs.greenlight.dev
    /// objects of `watch --store kube`) instead of --state.
    #[arg(long, value_name = "STORE", value_parser = ["kube"])]
    pub store: Option<String>,
    /// With --store kube: the kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config,
    /// else the pod's service account).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// With --store kube: the namespace of the store's objects (default: the kubeconfig's
    /// namespace, or the pod's).
    #[arg(long, value_name = "NAMESPACE")]
    pub store_namespace: Option<String>,
    /// With --store kube: the store's name, its Watchdog object's (default: greenlight).
    #[arg(long, value_name = "NAME")]
    pub store_name: Option<String>,
}

/// How a command opens its store.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Open {
    /// An existing store, read only (`status`, `state export`).
    Read,
    /// An existing store, written (`breaker reset`).
    Write,
    /// A new store or an empty one (`state import`).
    Create,
}

/// The chosen store.
pub enum Chosen {
    File(PathBuf),
    Kube(Box<KubeStore>),
}

impl StoreArgs {
    /// The store the flags name, opened for `open`. Any problem with the flags, a state file
    /// that does not exist, a store that does not exist or a kubeconfig that cannot be used is a
    /// usage error.
    pub fn choose(&self, open: Open) -> Result<Chosen> {
        let u = |m: String| crate::cmd::usage(m);
        match (&self.state, self.store.as_deref()) {
            (Some(_), Some(_)) => {
                return Err(u(
                    "give either --state <file> or --store kube, not both".into()
                ));
            }
            (None, None) => return Err(u("give --state <file> or --store kube".into())),
            (Some(path), None) => {
                for (given, flag) in [
                    (self.kubeconfig.is_some(), "--kubeconfig"),
                    (self.store_namespace.is_some(), "--store-namespace"),
                    (self.store_name.is_some(), "--store-name"),
                ] {
                    if given {
                        return Err(u(format!(
                            "{flag} is for --store kube; --state names a state file"
                        )));
                    }
                }
                return Ok(Chosen::File(path.clone()));
            }
            (None, Some(_)) => {}
        }
        let mut store = KubeStore::connect(
            self.kubeconfig.as_deref(),
            self.store_namespace.as_deref(),
            self.store_name.as_deref().unwrap_or("greenlight"),
        )?;
        if open != Open::Create {
            store.require_existing().map_err(|e| u(format!("{e:#}")))?;
        }
        Ok(Chosen::Kube(Box::new(store)))
    }

    /// [`StoreArgs::choose`], a state file opened as the store.
    pub fn open(&self, open: Open) -> Result<Box<dyn Store>> {
        Ok(match self.choose(open)? {
            Chosen::Kube(k) => k,
            Chosen::File(path) => Box::new(open_file(&path, open)?),
        })
    }
}

/// A state file opened for `open`; a missing one (unless created) is a usage error.
pub fn open_file(path: &std::path::Path, open: Open) -> Result<SqliteStore> {
    let r = match open {
        Open::Read => SqliteStore::open_existing(path, true),
        Open::Write => SqliteStore::open_existing(path, false),
        Open::Create => SqliteStore::open_or_create(path),
    };
    r.map_err(|e| crate::cmd::usage(format!("{e:#}")))
}

#[derive(Args)]
pub struct StateArgs {
    #[command(subcommand)]
    pub action: StateAction,
}

#[derive(Subcommand)]
pub enum StateAction {
    /// Write the state as one JSON document: repository, branch, baseline, tip, the breaker,
    /// every retained watch's record, idle observations and arrived commits. Events are not
    /// carried.
    Export {
        #[command(flatten)]
        store: StoreArgs,
        /// Write the document to this file instead of stdout.
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Read a document `state export` wrote into a new or empty store (no watch, no tip), in
    /// one write, bound to the document's repository and branch. Events are not carried.
    Import {
        #[command(flatten)]
        store: StoreArgs,
        /// The document: a file, or `-` for stdin.
        #[arg(value_name = "FILE|-")]
        input: String,
    },
}

pub fn run(a: StateArgs) -> Result<ExitCode> {
    match a.action {
        StateAction::Export { store, output } => {
            let mut store = store.open(Open::Read)?;
            let doc = export::export(&mut *store)?;
            let text = format!("{}\n", serde_json::to_string_pretty(&doc)?);
            match output {
                Some(path) => std::fs::write(&path, text)
                    .with_context(|| format!("cannot write {}", path.display()))?,
                None => crate::cmd::out(&text)?,
            }
            Ok(ExitCode::SUCCESS)
        }
        StateAction::Import { store, input } => {
            use greenlight::files::STATE_DOCUMENT_LIMIT as LIMIT;
            let text = if input == "-" {
                let bytes = greenlight::files::read_stdin_bounded(std::io::stdin(), LIMIT)
                    .context("cannot read the document from stdin")?
                    .ok_or_else(|| {
                        crate::cmd::usage(format!(
                            "the document on stdin is larger than {}, the most a state document may hold",
                            greenlight::files::size(LIMIT)
                        ))
                    })?;
                String::from_utf8(bytes).map_err(|e| {
                    crate::cmd::usage(format!(
                        "the document on stdin is not UTF-8 text (invalid byte at offset {})",
                        e.utf8_error().valid_up_to()
                    ))
                })?
            } else {
                greenlight::files::read_text(Path::new(&input), LIMIT, "a state document").map_err(
                    |e| {
                        crate::cmd::usage(format!(
                            "cannot read the document {input}: {}",
                            e.reason()
                        ))
                    },
                )?
            };
            let doc =
                export::parse(&text).map_err(|e| crate::cmd::usage(format!("{input}: {e:#}")))?;
            let (mut target, _lock): (Box<dyn Store>, _) = match store.choose(Open::Create)? {
                Chosen::Kube(k) => (k, None),
                Chosen::File(path) => {
                    let file = open_file(&path, Open::Create)?;
                    // No daemon may run on the file while it is filled.
                    let lock = greenlight::lock::lock_state(&path)?;
                    (Box::new(file), Some(lock))
                }
            };
            let done = export::import(&doc, &mut *target)?;
            outln!(
                "imported {} watch(es) into {}",
                done.watches,
                target.describe()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}
