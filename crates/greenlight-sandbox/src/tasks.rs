//! The sync tasks of one attempt of a sync operation, as gitops-engine's sync context keeps them:
//! one per managed object (Sync phase), one per live object git no longer has (a prune task, Sync
//! phase) and one per hook and phase it runs in, each with its result (an entry of
//! `syncResult.resources[]`) once it has run. Pure data and wording: the world runs
//! the tasks against its live objects and its clock.

use std::time::{Instant, SystemTime};

use serde_json::{Value, json};

use crate::manifests::{DeletePolicy, Rendered, ResourceKey, SyncPhase};

/// How far a task got: gitops-engine's `hookPhase` of its result (`Pending`: not run, no result).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskState {
    Pending,
    Running,
    Succeeded,
    Failed,
}

impl TaskState {
    fn as_str(self) -> &'static str {
        match self {
            TaskState::Pending => "",
            TaskState::Running => "Running",
            TaskState::Succeeded => "Succeeded",
            TaskState::Failed => "Failed",
        }
    }
}

/// What a hook task knows besides its result.
#[derive(Debug, Clone)]
pub(crate) struct HookTask {
    /// The hook's object as rendered (the sandbox's hook annotation included).
    pub object: Value,
    pub delete_policy: DeletePolicy,
    /// While it runs: when it finishes.
    pub done_at: Option<Instant>,
}

/// One task and its result.
#[derive(Debug, Clone)]
pub(crate) struct Task {
    pub key: ResourceKey,
    pub version: String,
    /// `syncPhase`; for a hook also its `hookType`.
    pub phase: SyncPhase,
    pub hook: Option<HookTask>,
    /// `status` `SyncFailed` (applying it failed) rather than `Synced`.
    pub apply_failed: bool,
    /// A prune task: a live object git no longer has (`status` `Pruned` or `PruneSkipped`).
    pub is_prune: bool,
    /// The prune task did not delete the object: the sync does not prune (`PruneSkipped`).
    pub prune_skipped: bool,
    pub state: TaskState,
    pub message: String,
}

impl Task {
    /// A managed object's task of the Sync phase, not run yet.
    pub(crate) fn resource(key: ResourceKey, version: String) -> Task {
        Task {
            key,
            version,
            phase: SyncPhase::Sync,
            hook: None,
            apply_failed: false,
            is_prune: false,
            prune_skipped: false,
            state: TaskState::Pending,
            message: String::new(),
        }
    }

    /// A prune task of the Sync phase, not run yet.
    pub(crate) fn prune(key: ResourceKey, version: String) -> Task {
        Task {
            is_prune: true,
            ..Task::resource(key, version)
        }
    }

    /// A prune task that has run: the object deleted (`Pruned`) or, when the sync does not prune,
    /// left live (`PruneSkipped`). gitops-engine gives either result the operation state
    /// `Succeeded` at once.
    pub(crate) fn pruned(key: ResourceKey, version: String, skipped: bool, message: &str) -> Task {
        Task {
            prune_skipped: skipped,
            state: TaskState::Succeeded,
            message: message.to_string(),
            ..Task::prune(key, version)
        }
    }

    pub(crate) fn is_hook(&self) -> bool {
        self.hook.is_some()
    }

    /// Its entry of `syncResult.resources[]` (Argo CD leaves empty group and namespace out).
    pub(crate) fn to_json(&self) -> Value {
        let mut r = json!({
            "version": self.version,
            "kind": self.key.kind,
            "name": self.key.name,
            "status": match (self.apply_failed, self.is_prune, self.prune_skipped) {
                (true, _, _) => "SyncFailed",
                (false, true, false) => "Pruned",
                (false, true, true) => "PruneSkipped",
                (false, false, _) => "Synced",
            },
            "message": self.message,
            "hookPhase": self.state.as_str(),
            "syncPhase": self.phase.as_str(),
        });
        if !self.key.group.is_empty() {
            r["group"] = json!(self.key.group);
        }
        if !self.key.namespace.is_empty() {
            r["namespace"] = json!(self.key.namespace);
        }
        if self.is_hook() {
            r["hookType"] = json!(self.phase.as_str());
        }
        r
    }

    /// `<group>/<kind>/<name>`, as gitops-engine names a task in its messages.
    fn path(&self) -> String {
        format!("{}/{}/{}", self.key.group, self.key.kind, self.key.name)
    }
}

/// The tasks of one attempt of a sync that runs hooks.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Every task, by phase, then by key.
    pub tasks: Vec<Task>,
    /// The tasks that have a result, in the order they got it: `syncResult.resources[]`.
    pub order: Vec<usize>,
    /// The tasks span more than one phase: after a phase is applied, the operation waits for
    /// its resources to be healthy too, not only for its hooks.
    pub multi_step: bool,
    /// Hook objects left by an earlier run were deleted: the next step creates them.
    pub deleting: bool,
    /// Managed objects that applying changed.
    pub changed: usize,
}

impl Plan {
    /// The tasks of a sync of `rendered` at `revision`, started at `started`, the live objects in
    /// `prunable` (key, version) being pruned in its Sync phase; `None` when no hook runs in it
    /// (Argo CD's plain apply, which finishes at once). A hook without a name is
    /// named as gitops-engine names it: its `generateName`, the revision's first seven
    /// characters, the phase and the operation's start in Unix seconds, lower-cased. `SyncFail`
    /// hooks are not run.
    pub(crate) fn new(
        rendered: &Rendered,
        prunable: &[(ResourceKey, String)],
        revision: &str,
        started: SystemTime,
    ) -> Option<Plan> {
        let mut hooks = Vec::new();
        for hook in &rendered.hooks {
            for phase in hook.phases.iter().copied() {
                if phase == SyncPhase::SyncFail {
                    continue;
                }
                let mut key = hook.manifest.key.clone();
                if key.name.is_empty() {
                    let short = revision.get(..7).unwrap_or(revision);
                    let unix = started
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs());
                    let postfix = format!("{short}-{}-{unix}", phase.as_str()).to_lowercase();
                    key.name = format!(
                        "{}{postfix}",
                        hook.generate_name.as_deref().unwrap_or_default()
                    );
                }
                hooks.push(Task {
                    key,
                    version: hook.manifest.version.clone(),
                    phase,
                    hook: Some(HookTask {
                        object: Value::clone(&hook.manifest.object),
                        delete_policy: hook.delete_policy,
                        done_at: None,
                    }),
                    apply_failed: false,
                    is_prune: false,
                    prune_skipped: false,
                    state: TaskState::Pending,
                    message: String::new(),
                });
            }
        }
        if hooks.is_empty() {
            return None;
        }
        let mut tasks: Vec<Task> = rendered
            .manifests
            .iter()
            .map(|m| Task::resource(m.key.clone(), m.version.clone()))
            .chain(
                prunable
                    .iter()
                    .map(|(key, version)| Task::prune(key.clone(), version.clone())),
            )
            .collect();
        tasks.extend(hooks);
        tasks.sort_by(|a, b| (a.phase, &a.key).cmp(&(b.phase, &b.key)));
        // A hook annotated twice with the same phase is one task.
        tasks.dedup_by(|a, b| a.phase == b.phase && a.key == b.key);
        let multi_step = tasks.first().map(|t| t.phase) != tasks.last().map(|t| t.phase);
        Some(Plan {
            tasks,
            order: Vec::new(),
            multi_step,
            deleting: false,
            changed: 0,
        })
    }

    /// Records that task `i` has a result from now on (its place in `syncResult.resources`).
    pub(crate) fn shown(&mut self, i: usize) {
        if !self.order.contains(&i) {
            self.order.push(i);
        }
    }

    /// `syncResult.resources[]`.
    pub(crate) fn results(&self) -> Vec<Value> {
        self.order
            .iter()
            .map(|&i| self.tasks[i].to_json())
            .collect()
    }

    /// The tasks the operation waits for: running hooks, and running resources too when the
    /// sync has several phases.
    pub(crate) fn awaited(&self) -> Vec<usize> {
        (0..self.tasks.len())
            .filter(|&i| {
                let t = &self.tasks[i];
                t.state == TaskState::Running && (self.multi_step || t.is_hook())
            })
            .collect()
    }
}

/// gitops-engine's setRunningPhase: `waiting for completion of hook <first hook>` when a hook is
/// among `tasks`, else `waiting for healthy state of <first resource>`, with ` and N more
/// resources` (`hooks` when all are hooks); `deletion` makes it `waiting for deletion of [hook]`.
pub(crate) fn waiting_message(tasks: &[&Task], deletion: bool) -> String {
    let Some(first) = tasks.iter().find(|t| t.is_hook()).or_else(|| tasks.first()) else {
        return String::new();
    };
    let any_hook = tasks.iter().any(|t| t.is_hook());
    let all_hooks = tasks.iter().all(|t| t.is_hook());
    let reason = match (deletion, any_hook) {
        (true, true) => "deletion of hook",
        (true, false) => "deletion of",
        (false, true) => "completion of hook",
        (false, false) => "healthy state of",
    };
    let mut message = format!("waiting for {reason} {}", first.path());
    if tasks.len() > 1 {
        let more = if all_hooks { "hooks" } else { "resources" };
        message.push_str(&format!(" and {} more {more}", tasks.len() - 1));
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifests;
    use crate::repo::RepoFile;

    fn rendered(text: &str) -> Rendered {
        manifests::render(
            &[RepoFile {
                path: "a.yaml".into(),
                bytes: text.as_bytes().to_vec(),
            }],
            "default",
        )
        .unwrap()
    }

    const DEPLOY: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n";

    #[test]
    fn no_hook_no_plan_and_hooks_run_by_phase_then_key() {
        assert!(Plan::new(&rendered(DEPLOY), &[], "abc", SystemTime::UNIX_EPOCH).is_none());
        let text = format!(
            "{DEPLOY}---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: smoke\n  annotations: {{argocd.argoproj.io/hook: 'PostSync, PreSync'}}\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: notify\n  annotations: {{argocd.argoproj.io/hook: SyncFail}}\n"
        );
        let plan = Plan::new(&rendered(&text), &[], "abc", SystemTime::UNIX_EPOCH).unwrap();
        let tasks: Vec<String> = plan
            .tasks
            .iter()
            .map(|t| format!("{}:{}:{}", t.phase.as_str(), t.key.kind, t.is_hook()))
            .collect();
        assert_eq!(
            tasks,
            [
                "PreSync:Job:true",
                "Sync:Deployment:false",
                "PostSync:Job:true"
            ]
        );
        assert!(plan.multi_step);
    }

    #[test]
    fn a_hook_without_a_name_is_named_after_the_revision_phase_and_start() {
        let text = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  generateName: migrate-\n  annotations: {argocd.argoproj.io/hook: PreSync}\n";
        let started = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_780_000_000);
        let plan = Plan::new(&rendered(text), &[], &"A".repeat(40), started).unwrap();
        assert_eq!(plan.tasks[0].key.name, "migrate-aaaaaaa-presync-1780000000");
        assert!(!plan.multi_step, "one phase only");
    }

    #[test]
    fn waiting_messages_name_the_first_task_and_count_the_others() {
        let key = |group: &str, kind: &str, name: &str| ResourceKey {
            group: group.into(),
            kind: kind.into(),
            namespace: "default".into(),
            name: name.into(),
        };
        let deploy = Task::resource(key("apps", "Deployment", "web"), "v1".into());
        let svc = Task::resource(key("", "Service", "web"), "v1".into());
        let mut job = Task::resource(key("batch", "Job", "smoke"), "v1".into());
        job.hook = Some(HookTask {
            object: Value::Null,
            delete_policy: DeletePolicy::default(),
            done_at: None,
        });
        assert_eq!(
            waiting_message(&[&deploy], false),
            "waiting for healthy state of apps/Deployment/web"
        );
        assert_eq!(
            waiting_message(&[&svc, &deploy], false),
            "waiting for healthy state of /Service/web and 1 more resources"
        );
        assert_eq!(
            waiting_message(&[&svc, &job], false),
            "waiting for completion of hook batch/Job/smoke and 1 more resources"
        );
        assert_eq!(
            waiting_message(&[&job, &job], false),
            "waiting for completion of hook batch/Job/smoke and 1 more hooks"
        );
        assert_eq!(
            waiting_message(&[&job], true),
            "waiting for deletion of hook batch/Job/smoke"
        );
    }
}
