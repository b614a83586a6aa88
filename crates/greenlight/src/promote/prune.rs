//! The prune survey (`greenlight promote prune-survey`, `docs/promote.md#prune-survey`): what Argo
//! CD would delete if prune were turned on for an Application — the resources that are live but
//! no longer in git — asked of Argo CD itself, never guessed.
//!
//! How: a dry-run sync with prune (`POST …/sync` `{"dryRun": true, "prune": true}`), waited for
//! (bounded) until its operation has finished, then read from `status.operationState`: gitops-
//! engine reports each object a prune would delete `Pruned` with `pruned (dry run)`, and one whose
//! `Prune=false` sync option keeps it `PruneSkipped` with `ignored (no prune)`. The comparison's
//! `status.resources[].requiresPruning` is read too: an object it names that the dry run did not
//! report is said, not dropped (`docs/sandbox-fidelity.md`, row 20b).
//!
//! Must never: request anything but a dry run (the client cannot: it only has
//! [`ArgoClient::request_dry_run_prune`]); change the Application's spec; start the dry run while
//! a change other than a prune is waiting for an app with automated sync — Argo CD's automated
//! sync takes the last operation's revision as already attempted, dry run or not, so a dry run
//! to a commit not yet deployed would hold that commit back (the survey waits, bounded, instead).

use greenlight_argocd::ArgoClient;
use greenlight_argocd::client::ArgoError;
use greenlight_argocd::model::{Application, OperationState};
use greenlight_core::directive::AppRef;
use serde::Serialize;
use std::time::Duration;

/// One live resource, as Argo CD names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Resource {
    pub group: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// Argo CD's words for it in the dry run's result (`pruned (dry run)`, `ignored (no
    /// prune)`); empty when it is not in the result.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl Resource {
    /// `group/kind namespace/name` (`kind` alone for the core group; `name` alone when
    /// cluster-scoped).
    pub fn label(&self) -> String {
        let kind = if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}/{}", self.group, self.kind)
        };
        if self.namespace.is_empty() {
            format!("{kind} {}", self.name)
        } else {
            format!("{kind} {}/{}", self.namespace, self.name)
        }
    }

    fn same(&self, group: &str, kind: &str, namespace: &str, name: &str) -> bool {
        self.group == group && self.kind == kind && self.namespace == namespace && self.name == name
    }
}

/// What the dry run found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Survey {
    /// The commit the dry run compared against (`syncResult.revision`).
    pub revision: String,
    /// What a sync with prune would delete.
    pub would_prune: Vec<Resource>,
    /// What a sync with prune would leave although git no longer has it (a `Prune=false` sync
    /// option), with Argo CD's words.
    pub kept: Vec<Resource>,
    /// Resources Argo CD's comparison says require pruning that the dry run's result does not
    /// name.
    pub not_in_result: Vec<Resource>,
    pub started_at: String,
    pub finished_at: String,
}

/// Why no survey could be made.
#[derive(Debug, thiserror::Error)]
pub enum SurveyError {
    #[error("Argo CD at {url} has no Application `{app}` (or the token may not see it)")]
    NotFound { app: String, url: String },
    #[error("cannot survey Application `{app}`: {error}")]
    Argo { app: String, error: ArgoError },
    #[error(
        "cannot survey Application `{app}`: waited {} for {what}; nothing was requested of it (try again later, or raise --timeout)",
        humantime::format_duration(*waited)
    )]
    NotReady {
        app: String,
        waited: Duration,
        what: String,
    },
    #[error(
        "Application `{app}`: the dry run's operation did not finish within {} ({what}); a dry run changes nothing, Argo CD may still finish it (raise --timeout)",
        humantime::format_duration(*waited)
    )]
    Unfinished {
        app: String,
        waited: Duration,
        what: String,
    },
    #[error(
        "Application `{app}`: the dry run ended {phase}: {message}; nothing can be said of what a prune would delete"
    )]
    Failed {
        app: String,
        phase: String,
        message: String,
    },
    #[error(
        "Application `{app}`: {what} before the dry run's result was read; run the survey again"
    )]
    Replaced { app: String, what: String },
}

/// How long to wait in all, and how often to look.
#[derive(Clone, Copy, Debug)]
pub struct Wait {
    pub timeout: Duration,
    pub poll: Duration,
}

/// Run the survey of `app`: wait (bounded) until it can take a dry run, request the dry-run sync
/// with prune, wait (within the same bound) for its operation to finish, and read its result.
pub async fn survey(argo: &ArgoClient, app: &AppRef, wait: Wait) -> Result<Survey, SurveyError> {
    let started = tokio::time::Instant::now();
    let deadline = started + wait.timeout;
    let shown = app.to_string();
    let ns = app.namespace.as_deref().unwrap_or("");
    let argo_err = |error: ArgoError| SurveyError::Argo {
        app: shown.clone(),
        error,
    };
    let not_found = || SurveyError::NotFound {
        app: shown.clone(),
        url: argo.base_url().to_string(),
    };
    // Until the dry run is requested.
    loop {
        let current = argo.get(ns, &app.name).await.map_err(argo_err)?;
        let current = current.ok_or_else(not_found)?;
        let why = match not_ready(&current) {
            None => match argo.request_dry_run_prune(ns, &app.name).await {
                Ok(Some(_)) => break,
                Ok(None) => return Err(not_found()),
                // An operation started between the read and the request (Argo CD answers
                // FailedPrecondition): wait for it as for one seen running.
                Err(e) if in_progress(&e) => "the operation under way on it to finish".to_string(),
                Err(e) => return Err(argo_err(e)),
            },
            Some(why) => why,
        };
        if tokio::time::Instant::now() + wait.poll > deadline {
            return Err(SurveyError::NotReady {
                app: shown.clone(),
                waited: started.elapsed(),
                what: why,
            });
        }
        tokio::time::sleep(wait.poll).await;
    }
    // Until its operation has finished.
    loop {
        let current = argo.get(ns, &app.name).await.map_err(argo_err)?;
        let current = current.ok_or_else(not_found)?;
        match read(&current) {
            Progress::Done(survey) => return Ok(survey),
            Progress::Failed { phase, message } => {
                return Err(SurveyError::Failed {
                    app: shown.clone(),
                    phase,
                    message,
                });
            }
            Progress::Replaced(what) => {
                return Err(SurveyError::Replaced {
                    app: shown.clone(),
                    what,
                });
            }
            Progress::Running(what) => {
                if tokio::time::Instant::now() + wait.poll > deadline {
                    return Err(SurveyError::Unfinished {
                        app: shown.clone(),
                        waited: started.elapsed(),
                        what,
                    });
                }
            }
        }
        tokio::time::sleep(wait.poll).await;
    }
}

/// Argo CD refused the request because an operation is under way (`another operation is already
/// in progress`, gRPC FailedPrecondition).
fn in_progress(e: &ArgoError) -> bool {
    e.argo_message()
        .is_some_and(|m| m.contains("another operation is already in progress"))
}

/// Why the app cannot take a dry run now, if it cannot: an operation is under way, or (with
/// automated sync) a change other than a prune waits to be synced.
pub fn not_ready(app: &Application) -> Option<String> {
    if app.operation.is_some() {
        return Some("the operation under way on it to finish".into());
    }
    if !super::apps::automated(app) {
        return None;
    }
    let waiting: Vec<String> = app
        .status
        .resources
        .iter()
        .filter(|r| r.status == "OutOfSync" && !r.requires_pruning && !r.hook)
        .map(|r| {
            Resource {
                group: r.group.clone(),
                kind: r.kind.clone(),
                namespace: r.namespace.clone(),
                name: r.name.clone(),
                message: String::new(),
            }
            .label()
        })
        .collect();
    if waiting.is_empty() {
        return None;
    }
    Some(format!(
        "its automated sync to deploy what is OutOfSync ({}): Argo CD takes a dry run to a commit as that commit's sync attempt, so a dry run now would hold it back",
        waiting.join(", ")
    ))
}

/// Where the requested dry run stands, read from the Application.
#[derive(Debug, PartialEq, Eq)]
pub enum Progress {
    Running(String),
    Done(Survey),
    Failed { phase: String, message: String },
    Replaced(String),
}

fn is_dry_run_prune(state: &OperationState) -> bool {
    state
        .operation
        .as_ref()
        .and_then(|o| o.sync.as_ref())
        .is_some_and(|s| s.dry_run && s.prune)
}

fn requested_is_dry_run_prune(app: &Application) -> bool {
    app.operation.as_ref().is_some_and(|op| {
        op.pointer("/sync/dryRun") == Some(&serde_json::json!(true))
            && op.pointer("/sync/prune") == Some(&serde_json::json!(true))
    })
}

/// Read the dry run's progress from the Application after it was requested. Argo CD clears the
/// last operation's state as it sets a new operation, so a state that is a dry run with prune is
/// the one requested; one that is not, once the requested operation is gone, means another
/// operation has replaced it.
pub fn read(app: &Application) -> Progress {
    let state = app.status.operation_state.as_ref();
    let ours = state.filter(|s| is_dry_run_prune(s));
    let Some(state) = ours else {
        if app.operation.is_none() || !requested_is_dry_run_prune(app) {
            let what = match state {
                Some(s) => format!(
                    "another operation (phase {}, started {}) took the dry run's place",
                    s.phase, s.started_at
                ),
                None => "the dry run's operation went away".to_string(),
            };
            return Progress::Replaced(what);
        }
        return Progress::Running("Argo CD has not started it yet".into());
    };
    match state.phase.as_str() {
        "Succeeded" if app.operation.is_none() => Progress::Done(found(app, state)),
        "Failed" | "Error" if app.operation.is_none() => Progress::Failed {
            phase: state.phase.clone(),
            message: state.message.clone(),
        },
        phase => Progress::Running(if state.message.is_empty() {
            format!("phase {phase}")
        } else {
            // e.g. "Waiting for pruning confirmation of …" (a Prune=confirm resource).
            format!("phase {phase}: {}", state.message)
        }),
    }
}

fn found(app: &Application, state: &OperationState) -> Survey {
    let result = state.sync_result.clone().unwrap_or_default();
    let mut survey = Survey {
        revision: result.revision.clone(),
        would_prune: Vec::new(),
        kept: Vec::new(),
        not_in_result: Vec::new(),
        started_at: state.started_at.clone(),
        finished_at: state.finished_at.clone(),
    };
    for r in result.resources.iter().filter(|r| r.hook_type.is_empty()) {
        let resource = Resource {
            group: r.group.clone(),
            kind: r.kind.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            message: r.message.clone(),
        };
        match r.status.as_str() {
            "Pruned" => survey.would_prune.push(resource),
            "PruneSkipped" => survey.kept.push(resource),
            _ => {}
        }
    }
    for r in app.status.resources.iter().filter(|r| r.requires_pruning) {
        let listed = survey
            .would_prune
            .iter()
            .chain(&survey.kept)
            .any(|x| x.same(&r.group, &r.kind, &r.namespace, &r.name));
        if !listed {
            survey.not_in_result.push(Resource {
                group: r.group.clone(),
                kind: r.kind.clone(),
                namespace: r.namespace.clone(),
                name: r.name.clone(),
                message: String::new(),
            });
        }
    }
    survey
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn app(v: Value) -> Application {
        greenlight_argocd::model::decode(v).unwrap()
    }

    /// An Application as Argo CD answers it after a dry-run sync with prune has finished: the
    /// operation gone, its state `Succeeded`, each task in `syncResult.resources[]`.
    fn finished(resources: Value, status_resources: Value) -> Application {
        app(json!({
            "metadata": {"name": "web-candidates", "namespace": "argocd"},
            "spec": {"syncPolicy": {"automated": {"selfHeal": true}}},
            "status": {
                "resources": status_resources,
                "operationState": {
                    "operation": {"sync": {"revision": "main", "dryRun": true, "prune": true}, "initiatedBy": {"username": "admin"}},
                    "phase": "Succeeded",
                    "message": "successfully synced (all tasks run)",
                    "syncResult": {"revision": "0123abc", "resources": resources},
                    "startedAt": "2026-12-05T03:00:00Z",
                    "finishedAt": "2026-12-05T03:00:01Z",
                },
            },
        }))
    }

    #[test]
    fn a_finished_dry_run_names_what_a_prune_would_delete_and_what_it_would_keep() {
        let a = finished(
            json!([
                {"group": "", "version": "v1", "kind": "ConfigMap", "namespace": "candidates", "name": "old", "status": "Pruned", "message": "pruned (dry run)", "hookPhase": "Succeeded", "syncPhase": "Sync"},
                {"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "candidates", "name": "web-candidate", "status": "Synced", "message": "deployment.apps/web-candidate unchanged (dry run)", "hookPhase": "Succeeded", "syncPhase": "Sync"},
                {"group": "", "kind": "Secret", "namespace": "candidates", "name": "keep", "status": "PruneSkipped", "message": "ignored (no prune)", "syncPhase": "Sync"},
                {"group": "batch", "kind": "Job", "namespace": "candidates", "name": "smoke", "status": "Synced", "hookType": "PostSync", "hookPhase": "Succeeded"},
                {"group": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gone", "status": "Pruned", "message": "pruned (dry run)", "hookPhase": "Succeeded"},
            ]),
            json!([
                {"version": "v1", "kind": "ConfigMap", "namespace": "candidates", "name": "old", "status": "OutOfSync", "requiresPruning": true},
                {"version": "v1", "kind": "Service", "namespace": "candidates", "name": "stray", "status": "OutOfSync", "requiresPruning": true},
                {"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "candidates", "name": "web-candidate", "status": "Synced"},
            ]),
        );
        let Progress::Done(s) = read(&a) else {
            panic!("{:?}", read(&a));
        };
        assert_eq!(s.revision, "0123abc");
        let labels = |v: &[Resource]| v.iter().map(Resource::label).collect::<Vec<_>>();
        assert_eq!(
            labels(&s.would_prune),
            [
                "ConfigMap candidates/old",
                "rbac.authorization.k8s.io/ClusterRole gone"
            ]
        );
        assert_eq!(s.would_prune[0].message, "pruned (dry run)");
        assert_eq!(labels(&s.kept), ["Secret candidates/keep"]);
        assert_eq!(s.kept[0].message, "ignored (no prune)");
        assert_eq!(labels(&s.not_in_result), ["Service candidates/stray"]);
        assert_eq!(
            serde_json::to_value(&s).unwrap()["wouldPrune"][0],
            json!({"group": "", "kind": "ConfigMap", "namespace": "candidates", "name": "old", "message": "pruned (dry run)"})
        );
    }

    #[test]
    fn a_dry_run_with_nothing_to_prune_is_an_empty_survey() {
        // Go writes `null` for an empty list; gitops-engine finds no task at all when nothing
        // is to apply nor prune.
        let a = finished(Value::Null, Value::Null);
        let Progress::Done(s) = read(&a) else {
            panic!("{:?}", read(&a));
        };
        assert!(s.would_prune.is_empty() && s.kept.is_empty() && s.not_in_result.is_empty());
    }

    #[test]
    fn a_dry_run_not_finished_failed_or_replaced_is_said_so() {
        let mut a = finished(json!([]), json!([]));
        // Requested, not started yet: the operation set, the state cleared.
        a.operation = Some(json!({"sync": {"dryRun": true, "prune": true}}));
        a.status.operation_state = None;
        assert!(matches!(read(&a), Progress::Running(_)), "{:?}", read(&a));
        // Running, waiting for a Prune=confirm resource.
        let mut running = finished(json!([]), json!([]));
        running.operation = Some(json!({"sync": {"dryRun": true, "prune": true}}));
        let state = running.status.operation_state.as_mut().unwrap();
        state.phase = "Running".into();
        state.message = "Waiting for pruning confirmation of v1/ConfigMap/old".into();
        assert_eq!(
            read(&running),
            Progress::Running(
                "phase Running: Waiting for pruning confirmation of v1/ConfigMap/old".into()
            )
        );
        let mut failed = finished(json!([]), json!([]));
        let state = failed.status.operation_state.as_mut().unwrap();
        state.phase = "Failed".into();
        state.message = "one or more objects failed to apply (dry run)".into();
        assert_eq!(
            read(&failed),
            Progress::Failed {
                phase: "Failed".into(),
                message: "one or more objects failed to apply (dry run)".into()
            }
        );
        // An automated sync took its place.
        let mut other = finished(json!([]), json!([]));
        let state = other.status.operation_state.as_mut().unwrap();
        state
            .operation
            .as_mut()
            .unwrap()
            .sync
            .as_mut()
            .unwrap()
            .dry_run = false;
        assert!(
            matches!(read(&other), Progress::Replaced(_)),
            "{:?}",
            read(&other)
        );
    }

    #[test]
    fn an_automated_app_with_a_change_waiting_is_not_dry_run() {
        let mut a = finished(
            json!([]),
            json!([
                {"version": "v1", "kind": "ConfigMap", "namespace": "candidates", "name": "old", "status": "OutOfSync", "requiresPruning": true},
                {"group": "apps", "kind": "Deployment", "namespace": "candidates", "name": "web-candidate", "status": "Synced"},
            ]),
        );
        assert_eq!(not_ready(&a), None, "only a prune waits");
        a.status.resources[1].status = "OutOfSync".into();
        let why = not_ready(&a).unwrap();
        assert!(
            why.contains("apps/Deployment candidates/web-candidate")
                && why.contains("hold it back"),
            "{why}"
        );
        // Without automated sync nothing is held back by a dry run.
        a.spec.sync_policy = None;
        assert_eq!(not_ready(&a), None);
        a.operation = Some(json!({"sync": {}}));
        assert!(not_ready(&a).unwrap().contains("operation under way"));
    }
}
