//! `fields=`: the response field selection Argo CD's HTTP layer applies, in its two flavours.
//!
//! - The generic one (argoproj/pkg `grpc/http` forwarders, used for the application stream and
//!   managed resources): [`FieldSelection::apply`] walks the JSON from the root. A key whose dotted
//!   path is listed is kept whole; a key that is a (textual) prefix of a listed path is kept and
//!   walked into; any other key is removed. Arrays are transparent (`items.name` applies to every
//!   element of `items`). With a leading `-` the listed paths are removed instead and everything
//!   else is kept.
//! - The application list's (Argo CD's `processApplicationListField`): only a fixed set of
//!   fields per item can be selected ([`LIST_FIELDS`]), `metadata` of the list is always whole,
//!   and anything else asked for is silently absent. See [`select_list`].

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

/// A parsed `fields` query value. `None` from [`FieldSelection::parse`] means no selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldSelection {
    paths: BTreeSet<String>,
    exclude: bool,
}

impl FieldSelection {
    /// `a.b,c` keeps those paths; `-a.b,c` removes them. Empty: no selection. The paths are
    /// taken as written (no trimming), as Argo CD does.
    pub(crate) fn parse(raw: &str) -> Option<FieldSelection> {
        if raw.is_empty() {
            return None;
        }
        let (exclude, list) = match raw.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, raw),
        };
        Some(FieldSelection {
            paths: list.split(',').map(str::to_string).collect(),
            exclude,
        })
    }

    /// The generic selection, in place, from the root of `value`.
    pub(crate) fn apply(&self, value: &mut Value) {
        self.walk("", value);
    }

    fn walk(&self, path: &str, item: &mut Value) {
        match item {
            Value::Object(map) => {
                let keys: Vec<String> = map.keys().cloned().collect();
                for key in keys {
                    let here = if path.is_empty() {
                        key.clone()
                    } else {
                        format!("{path}.{key}")
                    };
                    let listed = self.paths.contains(&here);
                    let leads_to_listed = listed || self.paths.iter().any(|p| p.starts_with(&here));
                    let keep = if self.exclude {
                        !listed
                    } else {
                        leads_to_listed
                    };
                    if !keep {
                        map.remove(&key);
                    } else if !listed && let Some(child) = map.get_mut(&key) {
                        self.walk(&here, child);
                    }
                }
            }
            Value::Array(items) => {
                for child in items {
                    self.walk(path, child);
                }
            }
            _ => {}
        }
    }
}

/// The item fields the application list can select (`items.<field>`), and where each comes from.
pub(crate) const LIST_FIELDS: [&str; 17] = [
    "metadata.name",
    "metadata.namespace",
    "metadata.annotations",
    "metadata.labels",
    "metadata.creationTimestamp",
    "metadata.deletionTimestamp",
    "spec",
    "status.sourceHydrator",
    "status.sync.status",
    "status.health",
    "status.summary",
    "status.operationState.startedAt",
    "status.operationState.finishedAt",
    "status.resources",
    "operation.sync",
    "status.operationState.phase",
    "status.operationState.operation.sync",
];

// One list field of one Application, as Argo CD's Go code yields it: `None` is skipped, a Go
// nil pointer or map inside a present field is `null`.
fn list_field(app: &Value, field: &str) -> Option<Value> {
    let at = |pointer: &str| app.pointer(pointer).cloned();
    let op_state = app.pointer("/status/operationState");
    match field {
        "metadata.name" | "metadata.namespace" | "metadata.creationTimestamp" => {
            let pointer = format!("/{}", field.replace('.', "/"));
            Some(at(&pointer).unwrap_or(json!("")))
        }
        "metadata.annotations" | "metadata.labels" | "metadata.deletionTimestamp" => {
            let pointer = format!("/{}", field.replace('.', "/"));
            Some(at(&pointer).unwrap_or(Value::Null))
        }
        "spec" => Some(at("/spec").unwrap_or(json!({}))),
        "status.sourceHydrator" => Some(at("/status/sourceHydrator").unwrap_or(json!({}))),
        "status.sync.status" => Some(at("/status/sync/status").unwrap_or(json!(""))),
        "status.health" => Some(at("/status/health").unwrap_or(json!({}))),
        "status.summary" => Some(at("/status/summary").unwrap_or(json!({}))),
        "status.resources" => {
            at("/status/resources").filter(|r| r.as_array().is_some_and(|a| !a.is_empty()))
        }
        "status.operationState.startedAt" => {
            op_state.map(|s| s.get("startedAt").cloned().unwrap_or(json!("")))
        }
        "status.operationState.phase" => {
            op_state.map(|s| s.get("phase").cloned().unwrap_or(json!("")))
        }
        "status.operationState.finishedAt" => {
            op_state.map(|s| s.get("finishedAt").cloned().unwrap_or(Value::Null))
        }
        // Argo CD fills this one with the operation's syncResult, not its sync operation.
        "status.operationState.operation.sync" => {
            op_state.map(|s| s.get("syncResult").cloned().unwrap_or(Value::Null))
        }
        "operation.sync" => app
            .get("operation")
            .map(|o| o.get("sync").cloned().unwrap_or(Value::Null)),
        _ => None,
    }
}

fn set_path(target: &mut Map<String, Value>, path: &str, value: Value) {
    match path.split_once('.') {
        None => {
            target.insert(path.to_string(), value);
        }
        Some((head, rest)) => {
            let child = target
                .entry(head.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(map) = child {
                set_path(map, rest, value);
            }
        }
    }
}

/// The application list with `fields`: each item holds only the [`LIST_FIELDS`] selected
/// (`items.<field>` listed; with `exclude`, not listed), `items` is `null` when there are none,
/// and `metadata` is the list's metadata as it is.
pub(crate) fn select_list(items: &[Value], metadata: Value, selection: &FieldSelection) -> Value {
    let selected: Vec<Value> = items
        .iter()
        .map(|app| {
            let mut out = Map::new();
            for field in LIST_FIELDS {
                if selection.paths.contains(&format!("items.{field}")) == selection.exclude {
                    continue;
                }
                if let Some(value) = list_field(app, field) {
                    set_path(&mut out, field, value);
                }
            }
            Value::Object(out)
        })
        .collect();
    json!({
        "items": if selected.is_empty() { Value::Null } else { Value::Array(selected) },
        "metadata": metadata,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> Value {
        json!({"result": {"type": "MODIFIED", "application": {
            "metadata": {"name": "web", "namespace": "argocd", "resourceVersion": "7"},
            "status": {
                "sync": {"status": "Synced", "revision": "abc"},
                "resources": [{"kind": "Deployment", "name": "web", "health": {"status": "Healthy"}},
                              {"kind": "Service", "name": "web"}],
            },
        }}})
    }

    #[test]
    fn keeps_only_the_listed_paths_walking_through_arrays() {
        let mut v = event();
        FieldSelection::parse(
            "result.type,result.application.metadata.name,result.application.status.resources.kind",
        )
        .unwrap()
        .apply(&mut v);
        assert_eq!(
            v,
            json!({"result": {"type": "MODIFIED", "application": {
                "metadata": {"name": "web"},
                "status": {"resources": [{"kind": "Deployment"}, {"kind": "Service"}]},
            }}})
        );
    }

    #[test]
    fn a_listed_path_is_kept_whole_and_a_leading_minus_excludes() {
        let mut v = event();
        FieldSelection::parse("result.application.status.sync")
            .unwrap()
            .apply(&mut v);
        assert_eq!(
            v,
            json!({"result": {"application": {"status": {"sync": {"status": "Synced", "revision": "abc"}}}}})
        );
        let mut v = event();
        FieldSelection::parse("-result.application.status.resources,result.type")
            .unwrap()
            .apply(&mut v);
        assert!(v["result"].get("type").is_none());
        assert!(
            v["result"]["application"]["status"]
                .get("resources")
                .is_none()
        );
        assert_eq!(
            v["result"]["application"]["status"]["sync"]["status"],
            "Synced"
        );
        assert_eq!(
            v["result"]["application"]["metadata"]["resourceVersion"],
            "7"
        );
    }

    #[test]
    fn prefixes_are_textual_as_in_argo_cd() {
        // `result.application.stat` is a prefix of nothing listed; `status` is a prefix of
        // `statusX.y` as text, so it stays (emptied).
        let mut v = event();
        FieldSelection::parse("result.application.statusX.y")
            .unwrap()
            .apply(&mut v);
        assert_eq!(v, json!({"result": {"application": {"status": {}}}}));
        assert_eq!(FieldSelection::parse(""), None);
    }

    #[test]
    fn the_list_selects_from_its_fixed_set_only() {
        let app = json!({
            "metadata": {"name": "web", "namespace": "argocd", "resourceVersion": "9", "creationTimestamp": "t"},
            "spec": {"project": "default"},
            "status": {"sync": {"status": "Synced", "revision": "abc"}, "resources": [],
                       "operationState": {"phase": "Succeeded", "startedAt": "s", "syncResult": {"revision": "abc"}}},
        });
        let meta = json!({"resourceVersion": "12"});
        let sel = FieldSelection::parse("items.metadata.name,items.status.sync.status,items.status.sync.revision,items.metadata.resourceVersion,items.status.operationState.operation.sync,items.status.resources,items.metadata.labels,metadata.resourceVersion").unwrap();
        assert_eq!(
            select_list(std::slice::from_ref(&app), meta.clone(), &sel),
            json!({"items": [{
                "metadata": {"name": "web", "labels": null},
                "status": {"sync": {"status": "Synced"}, "operationState": {"operation": {"sync": {"revision": "abc"}}}},
            }], "metadata": {"resourceVersion": "12"}})
        );
        let all_but = FieldSelection::parse("-items.spec,items.status.summary").unwrap();
        let item = &select_list(std::slice::from_ref(&app), meta.clone(), &all_but)["items"][0];
        assert!(item.get("spec").is_none());
        assert_eq!(item["status"]["operationState"]["phase"], "Succeeded");
        assert_eq!(item["status"]["operationState"]["finishedAt"], Value::Null);
        assert!(item["status"].get("summary").is_none());
        assert!(item.get("operation").is_none(), "no operation: left out");
        assert_eq!(select_list(&[], meta, &sel)["items"], Value::Null);
    }
}
