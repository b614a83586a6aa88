//! The sandbox: a local Argo CD stand-in that greenlight is demonstrated and tested against.
//!
//! It keeps a private clone of a git remote, fetches the tracked branch every `sync_interval`,
//! renders each application's manifests straight from the fetched commit, reconciles and syncs
//! them the way Argo CD's controller does with automated sync (below), models workload health
//! over time (Progressing for `rollout_time`, then Healthy or Degraded depending on whether the
//! images exist), and serves the Argo CD REST subset greenlight uses:
//!
//! | route | answer |
//! |---|---|
//! | `GET /api/v1/applications[?name=&appNamespace=&projects=&refresh=&fields=]` | `{"metadata":{"resourceVersion"},"items":[Application…]}`, as stored (see *resource health*) |
//! | `GET /api/v1/applications/{name}[?appNamespace=&project=&refresh=]` | one Application (see *unknown apps*), resource health re-filled |
//! | `PATCH /api/v1/applications/{name}` | body `{"name","patch","patchType","appNamespace","project"}`, `patch` a JSON document as a string, `patchType` `merge` or `json`; answers the updated Application as stored, resource health not re-filled (see *spec edits*) |
//! | `GET /api/v1/applications/{name}/resource-tree[?project=]` | `{"nodes":[…]}` (see *the resource tree*) |
//! | `GET /api/v1/applications/{name}/resource?namespace=&resourceName=&version=&group=&kind=[&project=]` | `{"manifest":"<live object as JSON>"}` (see *live objects*) |
//! | `GET /api/v1/applications/{name}/managed-resources[?project=&group=&kind=&namespace=&name=&fields=]` | `{"items":[ResourceDiff…]}` (see *managed resources*) |
//! | `POST /api/v1/applications/{name}/sync` | body `{"revision","dryRun","prune","resources":[{group,kind,name,namespace}],"syncOptions":{"items"},"strategy","project"}` (all optional); answers the Application with `operation` set |
//! | `GET /api/v1/stream/applications[?name=&appNamespace=&projects=&resourceVersion=&fields=]` | `{"result":{"type","application"}}` messages (see *the stream*) |
//! | `POST /sandbox/v1/pause`, `POST /sandbox/v1/resume` | stop / restart syncing (no auth) |
//! | `POST /sandbox/v1/outage?seconds=N` | for N seconds every `/api/v1` route answers 503 code 14 and open streams end with an error (no auth) |
//! | `POST /sandbox/v1/hide?app=NAME&seconds=N` | for N seconds the token may not see the app, as after an RBAC change: left out of listings and streams, 403 `permission denied` for it (no auth) |
//! | `POST /sandbox/v1/health?app=NAME&kind=KIND&name=NAME&health=H&seconds=N[&namespace=NS][&message=M]` | for N seconds (on the sandbox's clock) the app's live resource reports health H (`Healthy`, `Progressing`, `Degraded`, `Suspended`, `Missing`, `Unknown`) with message M (default: the sandbox's words) in the tree, `status.resources[]` (inline or re-filled) and, aggregated as its own health would be, the app's health; one update when it starts, one when it ends; its Pods are unchanged; a new hold on the resource replaces the last, `seconds=0` ends it; 400 naming the parameter otherwise (no auth) |
//! | `POST /sandbox/v1/delete?app=NAME&kind=KIND&name=NAME[&namespace=NS]` | a human deletes the app's live object out of band (`kubectl delete`): the controller reconciles at once, the resource `Missing` and `OutOfSync` in `status.resources[]` and the tree (a node without uid), the app `OutOfSync` and its health aggregated per version (from 3.4 it is left out, before it makes the app `Missing`), one update; automated sync re-creates it at once only with `selfHeal` (a sync naming what is not Synced, no history), else with the next commit's sync; a hold on it ends; 400 naming the parameter otherwise (no auth) |
//! | `POST /sandbox/v1/garble?what=no-items\|nested&seconds=N[&on=listing\|reads\|both]` | for N seconds (a fault injection: a broken proxy or a misbehaving server) `GET /api/v1/applications` (`listing`) and/or `GET /api/v1/applications/{name}[/…]` (`reads`; default `both`) answer 200 `application/json` with `{}` (`no-items`) or `{"items":[[[…]]]}`, 100000 nested arrays (`nested`); streams are left alone; a new garble replaces the last, `seconds=0` ends it (no auth) |
//! | `POST /sandbox/v1/default-backend?seconds=N` | for N seconds every new `/api/v1` request answers 404 `default backend - 404` (text/plain), as an ingress's default backend does while Argo CD's server rolls out; open streams stay open (no auth) |
//! | forge routes (`greenlight sandbox --forge github\|gitlab\|gitea`, a listener of its own) | GitHub's, GitLab's or Gitea's pull-request API over the same bare repository, and `/sandbox/v1/forge/…` control routes: see [`forge`] |
//!
//! Errors have Argo CD's body `{"error":m,"code":grpc,"message":m}`. *Unknown apps*: an app that
//! does not exist (or is asked for in another `appNamespace`) is 403 code 7 `permission denied`,
//! as Argo CD cannot tell it from one the caller may not see, unless `?project=default` is given
//! (every sandbox app is in project `default`): then 404 code 5. An existing app asked for with
//! another project is 403. A sync while an operation is requested or running, or (for an app with
//! automated sync) to a revision other than its target revision (compared as text, `HEAD`
//! included; dry runs exempt) is
//! 400 code 9 (`another operation is already in progress`, `Cannot sync to <rev>: auto-sync
//! currently set to <target>`); a body that is not JSON is 400 code 3. `refresh=normal|hard`
//! fetches and reconciles at once. With a token, every `/api/v1` route wants
//! `Authorization: Bearer <token>` (401 code 16 otherwise); a token that is not JWT-shaped (three
//! non-empty dot-separated parts) is accepted but pointed out once at start: Argo CD would not
//! use it. [`SandboxConfig::scoped_tokens`] are tokens that see only the apps whose
//! `default/<name>` one of their globs matches, as Argo CD accounts whose RBAC grants `get` on
//! those only: the others are left out of listings and streams and answer 403 code 7, as an app
//! that does not exist. With [`SandboxConfig::tls`] the API is served over HTTPS.
//!
//! *Resource health* follows [`SandboxConfig::argocd_version`]. From 3.0 on the stored
//! Application has `status.resourceHealthSource: "appTree"` and no `health` in
//! `status.resources[]`: the list serves it so; Get and the stream re-fill each entry's `health`
//! from the resource tree as it is when they answer (an entry whose node has no health gets
//! none; ignore-healthcheck is not applied, the tree's health is copied). A change of one
//! resource's health that changes nothing app-level is then no update at all (no resourceVersion
//! bump, nothing on the stream), though Get shows it. With 2.14 there is no
//! `resourceHealthSource` and each entry of `status.resources[]` carries `health` {status,
//! message} in the stored object (none for kinds without health, such as ConfigMap, nor for
//! resources annotated `argocd.argoproj.io/ignore-healthcheck: "true"`; a resource not created
//! yet is `Missing`), so a resource's health change is an update. Every app is in project
//! `default`, with `spec.syncPolicy` `{"automated":{"prune":<p>,"selfHeal":<h>},"retry":
//! {"limit":2,"backoff":{"duration":<retry_backoff>,"factor":2,"maxDuration":<36 ×
//! retry_backoff>}}}`, `<p>` true for the apps named in [`SandboxConfig::prune`] (false for the
//! others), `<h>` false for the apps named in [`SandboxConfig::no_self_heal`] (true for the
//! others), `automated` also carrying `"allowEmpty":true` for those in
//! [`SandboxConfig::allow_empty`]; except the apps named in [`SandboxConfig::manual_sync`]: no
//! `automated` (they are compared at every tip and synced only on request, to any revision),
//! until a spec edit changes that. Timestamps are whole seconds (`metav1.Time`). An empty
//! `status.resources` or `status.summary.images` is left out (`omitempty`).
//!
//! *Spec edits* (`PATCH`, as `argocd app patch` or Argo CD Image Updater's `argocd` write-back
//! send it): the patch (`merge`: an RFC 7386 merge patch; `json`, also when `patchType` is empty:
//! an RFC 6902 patch with `add`, `remove`, `replace`, `move`, `copy`, `test`) is applied to the
//! stored Application, and the result's `spec` and `metadata.annotations` are kept (annotations
//! a map of strings, published as edited; `argocd.argoproj.io/refresh` refused, since Argo CD's
//! controller acts on it and removes it). Argo CD keeps its labels and finalizers too; the
//! sandbox models neither and refuses a patch that would change anything else outside `spec`,
//! naming the first such field (`metadata.labels`, `status.sync.status`). In `spec`:
//! - `project`, `destination`, `syncPolicy.retry`, `source.repoURL`, `source.path`,
//!   `source.targetRevision`, `source.chart` and `sourceHydrator` come from the command line and
//!   cannot change (refused, naming the field);
//! - `syncPolicy.automated` is honoured: removed (or, from 3.4 on, `enabled: false`) the app has
//!   no automated sync, as with `--manual-sync` (new commits are compared, not synced; any
//!   revision may be requested); present it has, pruning when `prune` is true and allowed to
//!   prune everything when `allowEmpty` is, self-healing when `selfHeal` is (a live object
//!   deleted by hand is synced again at once). Before 3.4 the CRD has no
//!   `enabled`: it is dropped and the app stays automated;
//! - a source with more than one of `kustomize`, `helm`, `directory`, `plugin` is refused with
//!   Argo CD's `InvalidSpecError` (`multiple application sources defined: Kustomize,Directory`):
//!   to give a path app `kustomize`, remove its `directory`;
//! - anything else (`source.kustomize.images`, `source.helm.parameters`, `source.directory`,
//!   `sources`, `ignoreDifferences`, `info`, …) is stored and published as given, null members
//!   dropped, and **changes nothing the sandbox renders**: it keeps rendering the app's path (or
//!   chart) as before, and `status` (`comparedTo`, `syncResult.source`, `history[].source`,
//!   `sourceType`) keeps naming the source it renders, where Argo CD would name the edited one.
//!
//! An accepted edit is one update (none when the spec comes out unchanged). One that changes
//! `source`, `sources` or `ignoreDifferences`, or turns automated sync on, makes Argo CD's
//! controller refresh the app: the sandbox fetches and reconciles it at once, as for
//! `?refresh=normal` (waiting while syncing is paused), so turning automated sync on syncs an
//! OutOfSync app; other edits reconcile nothing. Refusals, a body that is not JSON and a patch
//! that does not parse or apply are 400 code 3 with a sentence naming what is wrong; an unknown
//! `patchType` is 400 code 3 `Patch type 'x' is not supported`. Same 403/404 rules as Get.
//!
//! *The stream*, as Argo CD's Watch and its HTTP gateway serve it:
//! - Each message is `{"result":{"type":"ADDED|MODIFIED","application":{…}}}` followed by `\n`.
//!   With `Accept: text/event-stream` exactly (not merely containing it) a message is framed
//!   `data: {…} \n\n` (a space before the blank line) and then the same `\n`, and a heartbeat
//!   line `:\n` is written every [`SandboxConfig::heartbeat`] from the first message on;
//!   plain JSON gets no heartbeats.
//! - The response (status line and headers) is held back until the first message is ready: a
//!   stream that sees nothing (`?name=nope`, another project, every app filtered out) sends
//!   nothing at all, heartbeats included, so a client's header timeout fires.
//! - Unless `resourceVersion` is given without `name`, the stream starts with ADDED for every
//!   app it may see, sorted by `namespace/name`, and only then subscribes to updates (after
//!   [`SandboxConfig::stream_subscribe_delay`]): an update in between is never sent on it.
//!   `resourceVersion=N` leaves out apps whose resourceVersion is below N, burst and updates
//!   alike; nothing is replayed (it is no resume). `name` (with `appNamespace`, default `argocd`)
//!   and `projects` (repeatable; or `project`) narrow what it sees; `appNamespace` alone does not.
//! - Each stream's subscription holds [`SandboxConfig::stream_buffer`] updates (of every app)
//!   not yet taken; an update that finds it full is dropped for that stream, silently, and never
//!   sent later. A sync's stages are published together, so a buffer smaller than five loses
//!   some of them even for a client that reads.
//! - A message byte for byte identical (after `fields` and framing) to the last one sent on the
//!   stream for the same app name is not sent.
//! - An outage ends a stream that has written something with grpc-gateway's error chunk
//!   `{"error":{"grpc_code":14,"http_code":503,"message":"…","http_status":"Service Unavailable"}}`
//!   (SSE-framed on an SSE stream, `fields` applied, no `\n` after it), then the response ends.
//!   A stream that has written nothing yet answers instead with the status and the usual error
//!   body, as Argo CD does when its gRPC stream fails before its header: so do an outage before
//!   the first message, a missing or wrong token (401 code 16) and a stream opened during an
//!   outage (503 code 14).
//!
//! *`fields=`* (`a.b,c.d`; a leading `-` means all but those): on the stream and on managed
//! resources it is argoproj/pkg's generic selection from the root of each message: a key whose
//! dotted path is listed is kept whole, a key whose path is a textual prefix of a listed path is
//! kept and walked into, any other key is removed; arrays are walked through (`items.name`
//! applies to each item); with `-`, listed paths are removed and everything else kept. The
//! stream's paths start at `result` (`result.type`, `result.application.metadata.name`); the
//! stream error chunk goes through it too. On the list it is Argo CD's own selection: the
//! list's `metadata` is always whole, and each item holds only those of `metadata.name`,
//! `metadata.namespace`, `metadata.annotations`, `metadata.labels`,
//! `metadata.creationTimestamp`, `metadata.deletionTimestamp`, `spec`, `status.sourceHydrator`,
//! `status.sync.status`, `status.health`, `status.summary`, `status.resources` (when not empty),
//! `status.operationState.{startedAt,finishedAt,phase}`, `status.operationState.operation.sync`
//! (which Argo CD fills with the operation's `syncResult`) and `operation.sync` that are listed
//! as `items.<field>` (with `-`: not listed); anything else, such as `items.status.sync.revision`,
//! is absent; `items` is `null` when there are none.
//!
//! *The resource tree*: `{"nodes":[…]}` sorted by `group/kind/namespace/name`, each node
//! `{group,version,kind,namespace,name,uid,resourceVersion,images,health,createdAt,parentRefs,
//! info}` with empty fields left out, as are the empty `orphanedNodes` and `hosts` (Argo CD's
//! `omitempty`; no project here enables orphaned resources). A live object has the health of its
//! own check (none for kinds without one, such as ConfigMap; ignore-healthcheck not applied).
//! Each Deployment has a ReplicaSet child `<deployment>-<hash of its template>` (the
//! Deployment's health status) and that one Pod per replica (at most 10)
//! `<replicaset>-<suffix>`; each StatefulSet a ControllerRevision child `<name>-<hash>` (no
//! health) and Pods `<name>-0`, `<name>-1`, … (only `-0` while its Pods are not running, as the
//! default `OrderedReady` pod management creates the next once the one before is ready; all with
//! `podManagementPolicy: Parallel`). Children carry `parentRefs` `[{group,kind,namespace,name,
//! uid}]` naming their owner. A Pod (a child or a managed one) has its own health, by
//! gitops-engine's Pod check: `Progressing` without message while Pending (unschedulable, or its
//! containers being created during the rollout time: Argo CD gives a Pending Pod its
//! `status.message`, which the scheduler leaves empty), `Healthy` once running, `Degraded`
//! `Back-off pulling image "<image>"` when its image does not exist; and Argo CD's `info`
//! `[{"name":"Status Reason","value":"Pending|ContainerCreating|ImagePullBackOff|Running"},
//! {"name":"Node","value":"sandbox"},{"name":"Containers","value":"<ready>/<count>"}]`, the
//! Node without value until scheduled. A resource in git not created yet is a node
//! `{version,kind,namespace,name,health:{"status":"Missing"}}` without uid, resourceVersion or
//! createdAt. Hook objects are not in it (see *Hooks*).
//!
//! *Live objects* (Argo CD's GetResource): the node of the resource tree named by `group`,
//! `kind`, `namespace` and `resourceName` (`version` is not matched), as read from the cluster,
//! in `{"manifest": "<JSON>"}`: a managed object as applied (annotations included, the server's
//! `uid`, `resourceVersion`, `creationTimestamp`; a Secret's values masked); a ReplicaSet or
//! ControllerRevision as its controller made it (`ownerReferences`); a Pod with its template's
//! labels and annotations, the revision's hash label, `ownerReferences`, `spec.nodeName` once
//! scheduled, and a `status` as the scheduler and kubelet leave it: unschedulable, `phase:
//! Pending` and the condition `{type: PodScheduled, status: "False", reason: Unschedulable,
//! message: <the scheduler's message>}`; else `Initialized`, `Ready`, `ContainersReady`,
//! `PodScheduled` conditions and `containerStatuses` (waiting `ContainerCreating` or
//! `ImagePullBackOff`, or running). A resource that is no node of the tree is 400 code 3
//! `<kind> <group> <name> not found as part of application <app>`; a managed resource not
//! created yet is the API server's NotFound, 404 code 5 (`configmaps "x" not found`). Same
//! 403/404 rules as Get.
//!
//! *Managed resources*: one `ResourceDiff` per resource of the last comparison,
//! `{group,kind,namespace,name,targetState,liveState,normalizedLiveState,predictedLiveState,
//! resourceVersion,modified}` where the four states are JSON strings of objects: the object in
//! git (namespace set), the live one (as applied from git, annotations included, with
//! `metadata.uid`, `resourceVersion`, `creationTimestamp`), the live one again, and what applying
//! the target would leave; `"null"` where there is no object. Fields at their zero value are left
//! out (`omitempty`): `hook` (hooks are not managed resources: none is listed), `modified` when in
//! sync, `resourceVersion` when not created. No health. A Secret's values are masked. Same 403/404
//! rules as Get.
//!
//! The controller model. Every step below is one observable update (resourceVersion bump and a
//! stream event); an update that would change nothing publishes nothing.
//! - A *reconcile* (a new tip of the branch, an explicit refresh, the end of an operation)
//!   compares git with the live objects: `status.sync` {status, revision = the commit},
//!   `status.resources`, app health, `summary`, `reconciledAt` = the reconcile's start. Only
//!   reconciles move `reconciledAt`; a look at the live objects after they changed (a rollout
//!   ending, the registry changing, objects applied while an operation backs off) updates
//!   health and `summary` alone.
//! - *Automated sync* (Argo CD's autoSync, its checks in its order) of an OutOfSync app with no
//!   operation, unless only pruning is needed (every resource not Synced `requiresPruning`) and
//!   automated prune is off (nothing happens, no condition), or the last sync to that commit
//!   failed (below), or automated prune is on, `allowEmpty` off and every resource would be
//!   pruned (a `SyncError` condition `Skipping sync attempt to [<sha>]: auto-sync will wipe out
//!   all resources`, no operation, until a commit changes that). It runs in stages: (a) the reconcile,
//!   OutOfSync at the new commit; (b) `operation` set and `operationState` Running with
//!   `startedAt` and `syncResult.revision` = the commit; (c) a new `history[]` entry while still
//!   Running; (d) `Succeeded`, `operation` removed, `finishedAt`, `syncResult.resources`, with
//!   `status.sync`, health, `summary` and `reconciledAt` still those of (a); (e) the refresh:
//!   Synced, the new health (Progressing for changed workloads). A commit that leaves the rendered objects as
//!   they are is one reconcile, Synced at the new commit, no operation. A sync that runs hooks
//!   has its steps between (b) and (c) (see *Hooks*).
//! - A *requested sync* (`POST …/sync`, initiated by `{"username":"admin"}`) records the revision
//!   as requested (`main`, `HEAD`, a commit; empty = the target revision). The sync loop resolves
//!   it (the branch's tip for the target revision, the branch or `HEAD`; a commit id the mirror
//!   has; nothing else) and runs it like (b)–(e), `syncResult.revision` moving from the requested
//!   revision to the commit while Running. Dry runs apply nothing, record no history and run no
//!   refresh; partial syncs (`resources`) apply only the named objects and record no history;
//!   both finish `Succeeded`. A revision that does not resolve, or does not render, ends in phase
//!   `Error` with Argo CD's ComparisonError message (after the retries). While syncing is paused
//!   a requested sync waits.
//! - *Pruning*: a live object git no longer has is compared `OutOfSync` with `requiresPruning:
//!   true` and keeps its health (it still counts in app health, the tree and `summary`). A sync
//!   prunes when its operation says `prune: true`: an automated sync of an app with automated
//!   prune, a requested sync whose body asks for it (a partial sync prunes only the resources it
//!   names). Pruning runs before applying, as in gitops-engine's runTasks: each such object gets
//!   a `syncResult.resources[]` entry first, `status: "Pruned"`, `message: "pruned"` (`pruned
//!   (dry run)` in a dry run, which deletes nothing), `hookPhase: "Succeeded"`, `syncPhase:
//!   "Sync"`, and is deleted at once; a sync that does not prune leaves it live and reports
//!   `status: "PruneSkipped"`, `message: "ignored (requires pruning)"`, so the app stays
//!   OutOfSync; an object whose `argocd.argoproj.io/sync-options` lists `Prune=false` is never
//!   pruned (`PruneSkipped`, `ignored (no prune)`). A sync with nothing to apply nor prune
//!   succeeds with `successfully synced (no more tasks)` and no `resources`. A requested sync
//!   clears the last operation's `status.operationState` as it sets its own (Argo CD's
//!   SetAppOperation), and automated sync takes the last operation's revision, a dry run's too,
//!   as already attempted.
//! - *Failures and retries*: applying an object annotated [`APPLY_ANNOTATION`]`: fail` fails (the
//!   other objects are applied). The operation then backs off (Running, `Retrying attempt #N at
//!   <time>.`, `finishedAt` set, `syncResult` kept, `retryCount`), and when the back-off ends the
//!   retry starts (`finishedAt` removed: its own update, driven by the sandbox's clock). Argo CD's
//!   arithmetic is kept: the message announces `duration × factor^(N-1)` but the retry starts
//!   `duration × factor^N` after `finishedAt`. After the limit: `Failed`, `one or more objects
//!   failed to apply, reason: <detail> (retried 2 times).`, no history, still OutOfSync; the
//!   refresh that follows shows a `SyncError` condition (`Failed last sync attempt to [<sha>]:
//!   …`) and automated sync does not try that commit again; a new commit starts a new operation.
//! - *Hooks*: a manifest annotated `argocd.argoproj.io/hook` (`PreSync`, `Sync`, `PostSync`,
//!   `SyncFail`, comma-separated) is a resource hook, not a managed resource: it is in no
//!   comparison (a commit that changes only a hook is Synced at once), not in `status.resources`,
//!   managed resources, the tree, `summary.images` nor app health. `Skip` alone leaves an object
//!   out altogether. A full sync that is not a dry run nor of the `apply` strategy and has a hook
//!   to run goes in steps, as gitops-engine's sync context does, each step one update: PreSync
//!   hooks, then the Sync phase (the managed objects and `Sync` hooks), then PostSync hooks
//!   (partial syncs and dry runs run no hook and finish as above). After a phase is applied the
//!   operation stays `Running`: `waiting for completion of hook <group>/<kind>/<name>` while a hook
//!   of it runs, else, when the sync has more than one phase, `waiting for healthy state of
//!   <group>/<kind>/<name>` until every object applied is Healthy or has no health (` and N more
//!   resources`, or `hooks` when all are hooks; the core group is empty: `/Service/web`). The step
//!   that finds them done runs the next phase. A hook that is a workload (a Job, a Pod) runs for
//!   [`SandboxConfig::hook_time`], then succeeds, or fails when annotated [`HOOK_ANNOTATION`]`:
//!   fail`; a hook of another kind succeeds at the next step; one annotated
//!   [`APPLY_ANNOTATION`]`: fail` is refused as any object is. Each hook gets a `syncResult.resources[]`
//!   entry, after those of earlier phases: `status: "Synced"`, `hookType` and `syncPhase` its
//!   phase, `hookPhase` `Running` then `Succeeded` or `Failed`, `message` `job.batch/<name>
//!   created`, then the Job's `Reached expected number of succeeded pods` or `Job has reached the
//!   specified backoff limit` (a failed Pod: `container "<name>" failed with exit code 1`; a kind
//!   without health: `<name> created`). An awaited object that turns Degraded fails its task
//!   (`hookPhase: "Failed"`, its health message) and no later phase runs. A hook or task that
//!   failed ends the attempt with `one or more synchronization tasks completed unsuccessfully`
//!   (`, reason: …` only for objects that failed to apply), which is retried like any failed sync,
//!   the whole sync again, then `Failed` without history; a PreSync hook that fails leaves the Sync
//!   phase unapplied. A sync with hooks succeeds with `successfully synced (no more tasks)` at the
//!   step that finds nothing left to run, or `successfully synced (all tasks run)` as soon as its
//!   last phase is applied when that phase has no hook (a PreSync hook alone does not wait for
//!   health); history and the refresh follow as above. A hook object stays in the cluster after it
//!   has run, unseen, unless its `argocd.argoproj.io/hook-delete-policy` deletes it when the
//!   operation succeeds (`HookSucceeded`) or fails (`HookFailed`); with `BeforeHookCreation` (also
//!   the default, no policy given) the next run of a hook whose object is still there first
//!   deletes it, one step `waiting for deletion of hook <group>/<kind>/<name>`. A hook with only `generateName` is named `<generateName><the
//!   commit's first 7 characters>-<phase>-<the operation's start in Unix seconds>`.
//! - A manifest that *fails to render* (bad YAML, the app path missing) runs no operation: the
//!   reconcile shows `Unknown` at the unresolved target revision (`main`) with a
//!   `ComparisonError` condition (`Failed to load target state: failed to generate manifest for
//!   source 1 of 1: rpc error: code = Unknown desc = Manifest generation error (cached):
//!   <detail>`) and every live resource `Unknown`; operation state, history, live objects and so
//!   health stay. For [`SandboxConfig::repo_error_grace`] after it first fails, the app shows
//!   nothing of it (no update at all), as Argo CD on polled refreshes; then the sandbox's clock
//!   publishes it. An explicit refresh shows it at once. A commit that renders clears it. A
//!   path that exists but holds no manifest (a directory with only a `.gitkeep`) renders to
//!   nothing: Synced and Healthy with no resources, no operation. Git keeps no empty directory:
//!   a path whose last file a commit removes no longer exists, which is this ComparisonError
//!   (`<path>: app path does not exist`), and what it deployed stays live, never pruned.
//!
//! In-process use (the `demo` command and tests):
//!
//! ```no_run
//! # async fn demo() -> Result<(), greenlight_sandbox::SandboxError> {
//! use greenlight_sandbox::{AppSpec, SandboxConfig};
//! let mut config = SandboxConfig::new("/tmp/origin.git", "127.0.0.1:0".parse().unwrap(),
//!     vec![AppSpec::parse("nav-canary=apps/nav-canary").unwrap()]);
//! config.sync_interval = std::time::Duration::from_millis(200);
//! let sandbox = greenlight_sandbox::start(config).await?; // listening, first sync done
//! let url = format!("http://{}", sandbox.addr());
//! let app = sandbox.application("nav-canary"); // the Application JSON the API serves
//! sandbox.shutdown().await;
//! # let _ = (url, app); Ok(()) }
//! ```
//!
//! `start` must be called inside a Tokio runtime; the sandbox spawns its tasks on it. It uses
//! the real clock: it stands in for the world, it does not judge anything.
//!
//! The health model, per resource: workloads (Deployment, StatefulSet, DaemonSet, ReplicaSet,
//! Pod, Job, CronJob, argoproj.io Rollout) are Progressing for `rollout_time` after a sync that
//! changed them (gitops-engine's waiting messages: `Waiting for rollout to finish: 0 of N updated
//! replicas are available...`, `Waiting for N pods to be ready...`), then Healthy if every image
//! exists, else Degraded with Argo CD's message (`Deployment "x" exceeded its progress
//! deadline`) — except a StatefulSet, which has no progress deadline: it stays Progressing
//! while its Pods cannot start, and is Healthy with `partitioned roll out complete: N new pods
//! have been updated...` (`statefulset has N ready pods` when updated `OnDelete`). A workload
//! whose pod template (a Pod's own metadata) carries [`SCHEDULE_ANNOTATION`] has Pods that
//! stay Pending, unschedulable (see *the resource tree* and *live objects*): it stays
//! Progressing with its waiting message whatever the rollout time; a Deployment turns Degraded
//! (`Deployment "x" exceeded its progress deadline`) `spec.progressDeadlineSeconds` (default
//! 600) after it was applied, on the sandbox's clock, as the Deployment controller marks
//! `ProgressDeadlineExceeded`; a StatefulSet never does. A Service is Healthy; other kinds have
//! no health. A paused Deployment or Rollout and a suspended CronJob are Suspended. The object
//! annotation [`HEALTH_ANNOTATION`] (`Healthy|Progressing|Degraded|Missing|Suspended`) overrides
//! all of this. App health is the worst health of the managed resources (Healthy < Suspended <
//! Progressing < Missing < Degraded < Unknown), leaving out resources annotated
//! `argocd.argoproj.io/ignore-healthcheck: "true"` (read from git up to 3.0, from the live object
//! from 3.4); a resource in git that does not exist is Missing and, before 3.4, makes the app
//! Missing; from 3.4 it is left out unless no managed resource exists at all. An app with no
//! resources is Healthy.
//!
//! Deviations from Argo CD, on purpose: a Deployment whose image does not exist turns Degraded at
//! the end of the rollout time, not at its progress deadline (only unschedulable Pods wait for
//! the deadline); live objects carry no `status` except Pods, and the Pods' status and `info`
//! are the sandbox's sketch of what the scheduler and kubelet write (a ReplicaSet keeps its
//! Deployment's health status, a StatefulSet's Pods appear together once the first runs, not
//! one by one, no events are recorded); a pruned object is gone at once (Argo CD deletes it in the
//! foreground: until its Pods have terminated it is still there, `Progressing` `Pending
//! deletion`, and a sync with several phases waits for it); the `Prune=false` sync option is not
//! read; self-heal has no back-off (Argo CD's `selfHealBackoff` spaces attempts; the sandbox
//! heals at once and, if a self-heal leaves the app OutOfSync, does not try again), and live
//! objects change outside syncs only through `POST /sandbox/v1/delete`; an app never reconciled
//! yet (started paused) shows OutOfSync and Missing with no revision, where Argo CD leaves those
//! fields empty; a hydrator app is not hydrated: it renders its path from the tracked branch and
//! reports that branch's commits as its revisions, where Argo CD would report the commits of
//! `environment/<name>`; a helm app's chart is never fetched: it renders one Deployment named
//! after the chart, at the chart version given, and is reconciled at start and on refresh only;
//! the `selector` query parameter is not read (sandbox apps have no labels); a spec edit other
//! than `syncPolicy.automated` is published but not rendered, one outside `spec` or of a field
//! the sandbox derives is refused (see *spec edits*), and a patch that does not parse or apply
//! is 400 code 3 where Argo CD answers code 2 (HTTP 500). Hooks: `SyncFail`
//! hooks never run, nor does any hook in a dry run; a hook's outcome is the sandbox's annotation,
//! not its images or health annotation; Helm's hook annotations are not read; hook objects are
//! shown nowhere, where Argo CD shows the ones it keeps in the tree; sync waves are not modelled
//! (each phase is one wave); a hook whose object is still there and whose policy lacks
//! `BeforeHookCreation` runs again, where Argo CD applies the finished object again and takes its
//! old outcome.

mod api;
mod engine;
mod fields;
pub mod forge;
mod health;
mod manifests;
mod patch;
mod repo;
mod tasks;
mod timefmt;
mod tls;
mod world;

use greenlight_core::repo_url::RepoUrl;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use engine::{Sandbox, start};

/// The namespace every sandbox Application lives in.
pub const APP_NAMESPACE: &str = "argocd";
/// The project every sandbox Application is in.
pub const APP_PROJECT: &str = "default";
/// The object annotation that overrides the modelled health of one resource.
pub const HEALTH_ANNOTATION: &str = "sandbox.greenlight.dev/health";
/// The object annotation that makes applying the object fail (value `fail`), so that a sync
/// operation fails and is retried.
pub const APPLY_ANNOTATION: &str = "sandbox.greenlight.dev/apply";
/// The object annotation that makes a resource hook (`argocd.argoproj.io/hook`) fail when it has
/// run (value `fail`), so that the sync operation fails; without it a hook succeeds.
pub const HOOK_ANNOTATION: &str = "sandbox.greenlight.dev/hook";
/// The pod annotation (on a workload's pod template, a Pod's own metadata) that keeps its pods
/// Pending, unschedulable: the value is the scheduler's message, e.g. `0/3 nodes are available:
/// 3 Insufficient nvidia.com/gpu.`, shown in each Pod's `PodScheduled` condition.
pub const SCHEDULE_ANNOTATION: &str = "sandbox.greenlight.dev/schedule";

/// Receives one human-readable line per sync or health transition.
pub type LogSink = Arc<dyn Fn(&str) + Send + Sync>;

/// The Argo CD release whose behaviour the sandbox imitates where releases differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum ArgoCdVersion {
    /// Resource health inline in `status.resources[]`; a Missing resource makes the app Missing.
    V2_14,
    /// Resource health in the tree (`resourceHealthSource: appTree`); Missing still counts.
    V3_0,
    /// Missing (not yet created) resources no longer make the app Missing.
    V3_4,
    /// The default.
    #[default]
    V3_5,
}

impl ArgoCdVersion {
    /// Every version `--argocd-version` accepts, oldest first.
    pub const ALL: [ArgoCdVersion; 4] = [
        ArgoCdVersion::V2_14,
        ArgoCdVersion::V3_0,
        ArgoCdVersion::V3_4,
        ArgoCdVersion::V3_5,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ArgoCdVersion::V2_14 => "2.14",
            ArgoCdVersion::V3_0 => "3.0",
            ArgoCdVersion::V3_4 => "3.4",
            ArgoCdVersion::V3_5 => "3.5",
        }
    }

    /// Before 3.0 the controller persists each resource's health in `status.resources[]`.
    pub(crate) fn inline_resource_health(self) -> bool {
        self < ArgoCdVersion::V3_0
    }

    /// Before 3.4 a managed resource that does not exist makes the app Missing.
    pub(crate) fn missing_counts_in_app_health(self) -> bool {
        self < ArgoCdVersion::V3_4
    }

    /// Up to 3.1 `ignore-healthcheck` is read from the object in git, from 3.2 on from the live one.
    pub(crate) fn ignore_healthcheck_on_live(self) -> bool {
        self >= ArgoCdVersion::V3_4
    }

    /// `spec.syncPolicy.automated.enabled` exists (3.0 has no such field; 3.4 has it).
    pub(crate) fn automated_enabled_field(self) -> bool {
        self >= ArgoCdVersion::V3_4
    }
}

impl std::fmt::Display for ArgoCdVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ArgoCdVersion {
    type Err = ArgoCdVersionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim();
        let wanted = wanted.strip_prefix('v').unwrap_or(wanted);
        ArgoCdVersion::ALL
            .into_iter()
            .find(|v| v.as_str() == wanted)
            .ok_or_else(|| ArgoCdVersionError {
                text: s.to_string(),
            })
    }
}

/// An `--argocd-version` value the sandbox does not imitate.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unsupported Argo CD version {text:?} (accepted: 2.14, 3.0, 3.4, 3.5)")]
pub struct ArgoCdVersionError {
    pub text: String,
}

/// Everything the sandbox needs to run. Build it with [`SandboxConfig::new`] and adjust the
/// public fields; the defaults match the `greenlight sandbox` command line.
#[derive(Clone)]
pub struct SandboxConfig {
    /// The git remote, a path or a URL, reported verbatim as `spec.source.repoURL` (credentials
    /// in a URL are removed from what the API and the log show).
    pub repo: String,
    /// Where to listen; port 0 picks a free port (see [`Sandbox::addr`]).
    pub listen: SocketAddr,
    pub apps: Vec<AppSpec>,
    /// The tracked branch; `None` = the remote's HEAD branch.
    pub branch: Option<String>,
    /// How often the branch is fetched (default 1 s). Must be above zero.
    pub sync_interval: Duration,
    /// How long a changed workload stays Progressing before it turns Healthy or Degraded (default 5 s).
    pub rollout_time: Duration,
    /// How long a resource hook that is a workload (a Job, a Pod) runs before it succeeds or
    /// fails (default 1 s; zero: it completes at the operation's next step).
    pub hook_time: Duration,
    /// A file listing the image references that exist, one per line (`#` comments). Without it,
    /// an image exists unless its tag contains `does-not-exist`. Re-read when it changes.
    pub registry: Option<PathBuf>,
    /// When set, every `/api/v1` request must carry `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// Tokens that see only some apps, as Argo CD accounts whose RBAC grants `get` on some
    /// `<project>/<app>` objects only; with any, every `/api/v1` request must carry a token.
    pub scoped_tokens: Vec<ScopedToken>,
    /// Serve HTTPS with this certificate chain and key instead of HTTP.
    pub tls: Option<TlsFiles>,
    /// Start with syncing paused: apps are never synced until `POST /sandbox/v1/resume`.
    pub start_paused: bool,
    /// The Argo CD release to imitate (default 3.5).
    pub argocd_version: ArgoCdVersion,
    /// How long a manifest that fails to render stays hidden after it first fails: the app keeps
    /// its previous sync status and shows no ComparisonError until then, as Argo CD does on
    /// polled refreshes (default 0: shown at once). An explicit refresh shows it at once.
    pub repo_error_grace: Duration,
    /// The base back-off of the apps' sync retry policy (`spec.syncPolicy.retry.backoff.duration`,
    /// default 5 s; the maximum scales with it: 36 times the base, 3 m for 5 s). Must be above zero.
    pub retry_backoff: Duration,
    /// Apps without automated sync (`spec.syncPolicy.automated` absent): compared at every
    /// tip, synced only through `POST /api/v1/applications/{name}/sync`. Each must name an app.
    pub manual_sync: Vec<String>,
    /// Apps whose automated sync prunes (`spec.syncPolicy.automated.prune: true`): a resource
    /// removed from git is deleted by the next automated sync. The others keep it live,
    /// `requiresPruning`. Each must name an app with automated sync.
    pub prune: Vec<String>,
    /// Apps whose automated sync may prune every resource
    /// (`spec.syncPolicy.automated.allowEmpty: true`); without it an automated sync that would
    /// leave the app empty is refused, as Argo CD refuses it. Each must name an app with
    /// automated sync.
    pub allow_empty: Vec<String>,
    /// Apps whose automated sync does not self-heal (`spec.syncPolicy.automated.selfHeal:
    /// false`): a live object deleted by hand (`POST /sandbox/v1/delete`) stays `Missing` until
    /// the next commit's sync. The others sync it again at once. Each must name an app with
    /// automated sync.
    pub no_self_heal: Vec<String>,
    /// How long a new stream waits between sending its ADDED burst and subscribing to updates
    /// (default 0). Argo CD has this gap too, only shorter: an update in it is never sent on
    /// that stream. A longer one lets tests make it happen on purpose.
    pub stream_subscribe_delay: Duration,
    /// How many updates each stream subscription holds while its client is not keeping up
    /// (default 1000, Argo CD's `ARGOCD_WATCH_API_BUFFER_SIZE`); further updates are dropped for
    /// that stream, silently. Must be above zero.
    pub stream_buffer: usize,
    /// How often an SSE stream (`Accept: text/event-stream`) gets a `:` heartbeat line, from its
    /// first message on (default 15 s, as Argo CD). Must be above zero.
    pub heartbeat: Duration,
    /// Where transition lines go; `None` keeps the sandbox silent. [`SandboxConfig::new`] logs to stderr.
    pub log: Option<LogSink>,
}

impl SandboxConfig {
    pub fn new(repo: impl Into<String>, listen: SocketAddr, apps: Vec<AppSpec>) -> Self {
        SandboxConfig {
            repo: repo.into(),
            listen,
            apps,
            branch: None,
            sync_interval: Duration::from_secs(1),
            rollout_time: Duration::from_secs(5),
            hook_time: Duration::from_secs(1),
            registry: None,
            token: None,
            scoped_tokens: Vec::new(),
            tls: None,
            start_paused: false,
            argocd_version: ArgoCdVersion::default(),
            repo_error_grace: Duration::ZERO,
            retry_backoff: Duration::from_secs(5),
            manual_sync: Vec::new(),
            prune: Vec::new(),
            allow_empty: Vec::new(),
            no_self_heal: Vec::new(),
            stream_subscribe_delay: Duration::ZERO,
            stream_buffer: 1000,
            heartbeat: Duration::from_secs(15),
            log: Some(Arc::new(|line: &str| eprintln!("{line}"))),
        }
    }
}

impl std::fmt::Debug for SandboxConfig {
    // Hand-written so that the token can never reach a log through `{:?}`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxConfig")
            .field("repo", &RepoUrl::new(self.repo.as_str()).redacted())
            .field("listen", &self.listen)
            .field("apps", &self.apps)
            .field("branch", &self.branch)
            .field("sync_interval", &self.sync_interval)
            .field("rollout_time", &self.rollout_time)
            .field("hook_time", &self.hook_time)
            .field("registry", &self.registry)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("scoped_tokens", &self.scoped_tokens)
            .field("tls", &self.tls)
            .field("start_paused", &self.start_paused)
            .field("argocd_version", &self.argocd_version)
            .field("repo_error_grace", &self.repo_error_grace)
            .field("retry_backoff", &self.retry_backoff)
            .field("manual_sync", &self.manual_sync)
            .field("prune", &self.prune)
            .field("allow_empty", &self.allow_empty)
            .field("no_self_heal", &self.no_self_heal)
            .field("stream_subscribe_delay", &self.stream_subscribe_delay)
            .field("stream_buffer", &self.stream_buffer)
            .field("heartbeat", &self.heartbeat)
            .finish_non_exhaustive()
    }
}

/// A token that sees only the apps whose `<project>/<name>` one of `sees` matches (`*` matches
/// any run of characters), as an Argo CD account with an RBAC policy like
/// `p, role:ci, applications, get, default/web-*, allow`.
#[derive(Clone)]
pub struct ScopedToken {
    pub token: String,
    pub sees: Vec<String>,
}

impl std::fmt::Debug for ScopedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopedToken")
            .field("token", &"<redacted>")
            .field("sees", &self.sees)
            .finish()
    }
}

/// The PEM files HTTPS is served with.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// The certificate chain, the server's own certificate first.
    pub cert: PathBuf,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// One Application the sandbox serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppSpec {
    /// A directory of plain manifests in the repository (`name=path`); `path` is relative to
    /// the repository root, `""` meaning the root itself.
    Path { name: String, path: String },
    /// A Helm chart from a chart repository (`name=helm:chart@version`): reports the chart
    /// version as its revision and renders one Healthy Deployment named after the chart.
    Helm {
        name: String,
        chart: String,
        version: String,
    },
    /// An app with a source hydrator (`name=hydrator:path`): `spec.sourceHydrator` whose dry
    /// source is `path` on the tracked branch and whose sync source is `path` on the branch
    /// `environment/<name>`; no `spec.source`. The sandbox does not hydrate: it renders `path`
    /// from the tracked branch and reports that branch's commits as the revisions.
    Hydrator { name: String, path: String },
}

impl AppSpec {
    /// Parses `name=path`, `name=helm:<chart>@<version>` or `name=hydrator:<path>`.
    pub fn parse(text: &str) -> Result<AppSpec, AppSpecError> {
        let bad = |why: String| AppSpecError {
            text: text.to_string(),
            why,
        };
        let Some((name, target)) = text.split_once('=') else {
            return Err(bad(
                "expected <name>=<path>, <name>=helm:<chart>@<version> or <name>=hydrator:<path>"
                    .into(),
            ));
        };
        check_app_name(name).map_err(bad)?;
        let name = name.to_string();
        if let Some(chart_ref) = target.strip_prefix("helm:") {
            let Some((chart, version)) = chart_ref.rsplit_once('@') else {
                return Err(bad("a helm app needs helm:<chart>@<version>".into()));
            };
            if chart.is_empty() || version.is_empty() {
                return Err(bad("a helm app needs a non-empty chart and version".into()));
            }
            if chart.contains(char::is_whitespace) || version.contains(char::is_whitespace) {
                return Err(bad("the chart and version must not contain spaces".into()));
            }
            return Ok(AppSpec::Helm {
                name,
                chart: chart.to_string(),
                version: version.to_string(),
            });
        }
        if let Some(path) = target.strip_prefix("hydrator:") {
            let path = normalize_path(path).map_err(bad)?;
            return Ok(AppSpec::Hydrator { name, path });
        }
        let path = normalize_path(target).map_err(bad)?;
        Ok(AppSpec::Path { name, path })
    }

    pub fn name(&self) -> &str {
        match self {
            AppSpec::Path { name, .. }
            | AppSpec::Helm { name, .. }
            | AppSpec::Hydrator { name, .. } => name,
        }
    }
}

impl std::str::FromStr for AppSpec {
    type Err = AppSpecError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AppSpec::parse(s)
    }
}

/// A `--app` value that could not be understood.
#[derive(Debug, Clone, thiserror::Error)]
#[error("invalid app {text:?}: {why}")]
pub struct AppSpecError {
    pub text: String,
    pub why: String,
}

/// Why the sandbox could not start.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A setting is wrong; `flag` names the command-line flag it comes from.
    #[error("{flag}: {message}")]
    Config { flag: &'static str, message: String },
    /// Something outside the configuration failed (a git process could not run, …).
    #[error("{0}")]
    Runtime(String),
}

impl SandboxError {
    pub(crate) fn config(flag: &'static str, message: impl Into<String>) -> Self {
        SandboxError::Config {
            flag,
            message: message.into(),
        }
    }
}

// Application names become Kubernetes object names: a DNS-1123 subdomain.
fn check_app_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the app name is empty".into());
    }
    if name.len() > 253 {
        return Err("the app name is longer than 253 characters".into());
    }
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !name.chars().all(ok_char) || !edge(name.chars().next()) || !edge(name.chars().last()) {
        return Err(format!(
            "the app name {name:?} must be lower-case letters, digits, '-' or '.', starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

fn normalize_path(raw: &str) -> Result<String, String> {
    if raw.is_empty() {
        return Err("the path is empty (use . for the repository root)".into());
    }
    if raw.starts_with('/') {
        return Err(format!(
            "the path {raw:?} must be relative to the repository root"
        ));
    }
    let mut parts = Vec::new();
    for part in raw.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(format!("the path {raw:?} must not contain '..'")),
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_path_apps_and_normalizes_the_path() {
        assert_eq!(
            AppSpec::parse("web=./apps/web/").unwrap(),
            AppSpec::Path {
                name: "web".into(),
                path: "apps/web".into()
            }
        );
        assert_eq!(
            AppSpec::parse("root=.").unwrap(),
            AppSpec::Path {
                name: "root".into(),
                path: "".into()
            }
        );
    }

    #[test]
    fn parses_helm_apps() {
        assert_eq!(
            AppSpec::parse("mon=helm:kube-prometheus-stack@65.5.0").unwrap(),
            AppSpec::Helm {
                name: "mon".into(),
                chart: "kube-prometheus-stack".into(),
                version: "65.5.0".into()
            }
        );
    }

    #[test]
    fn parses_hydrator_apps() {
        assert_eq!(
            AppSpec::parse("web=hydrator:./apps/web").unwrap(),
            AppSpec::Hydrator {
                name: "web".into(),
                path: "apps/web".into()
            }
        );
        let err = AppSpec::parse("web=hydrator:../x").unwrap_err().to_string();
        assert!(err.contains("'..'"), "{err}");
    }

    #[test]
    fn argo_cd_versions_parse_and_refuse_others_naming_the_accepted_ones() {
        assert_eq!(
            "2.14".parse::<ArgoCdVersion>().unwrap(),
            ArgoCdVersion::V2_14
        );
        assert_eq!(
            "v3.0".parse::<ArgoCdVersion>().unwrap(),
            ArgoCdVersion::V3_0
        );
        assert_eq!(
            " 3.4 ".parse::<ArgoCdVersion>().unwrap(),
            ArgoCdVersion::V3_4
        );
        assert_eq!(ArgoCdVersion::default(), ArgoCdVersion::V3_5);
        for v in ArgoCdVersion::ALL {
            assert_eq!(v.to_string().parse::<ArgoCdVersion>().unwrap(), v);
        }
        let err = "3.3".parse::<ArgoCdVersion>().unwrap_err().to_string();
        assert_eq!(
            err,
            "unsupported Argo CD version \"3.3\" (accepted: 2.14, 3.0, 3.4, 3.5)"
        );
        assert!(ArgoCdVersion::V2_14.inline_resource_health());
        assert!(!ArgoCdVersion::V3_0.inline_resource_health());
        assert!(ArgoCdVersion::V3_0.missing_counts_in_app_health());
        assert!(!ArgoCdVersion::V3_4.missing_counts_in_app_health());
    }

    #[test]
    fn rejects_bad_app_values_with_the_reason() {
        for (text, needle) in [
            ("web", "expected <name>=<path>"),
            ("=apps/web", "name is empty"),
            ("Web=apps/web", "lower-case"),
            ("web=", "path is empty"),
            ("web=/abs", "relative"),
            ("web=a/../b", "'..'"),
            ("web=helm:chart", "helm:<chart>@<version>"),
            ("web=helm:@1.0", "non-empty"),
        ] {
            let err = AppSpec::parse(text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
            assert!(err.contains(&format!("{text:?}")), "{text}: {err}");
        }
    }
}
