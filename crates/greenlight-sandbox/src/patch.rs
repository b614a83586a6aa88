//! `PATCH /api/v1/applications/{name}`: how a patch edits an Application, as Argo CD's API
//! server does it, and which edits the sandbox keeps.
//!
//! Argo CD applies the patch to the whole stored Application (`merge`: an RFC 7386 JSON merge
//! patch; `json`, also when the type is empty: an RFC 6902 JSON patch), then persists only the
//! result's `spec`, labels, annotations and finalizers (`updateApp`). The sandbox models `spec`
//! and annotations (strings, as Go's `map[string]string`; not the refresh annotation, which the
//! controller acts on and removes): a patch that would change anything else is refused, naming
//! the first field it would change, rather than silently dropped. Within `spec`:
//! - the fields the sandbox derives from its command line (`project`, `destination`,
//!   `syncPolicy.retry`, `source.repoURL|path|targetRevision|chart`, `sourceHydrator`) cannot
//!   change: the sandbox could not honour the edit, so it refuses it, naming the field;
//! - `syncPolicy.automated` is honoured: present turns automated sync on, absent (or, from 3.4
//!   on, `enabled: false`) off; so are its `prune`, `allowEmpty` and `selfHeal`;
//! - a source with more than one of `kustomize`, `helm`, `directory`, `plugin` is refused with
//!   the InvalidSpecError Argo CD's manifest generation gives it;
//! - everything else is stored and published as is, null members removed (Go drops them);
//!   before 3.4 `syncPolicy.automated.enabled` is no field of the CRD and is dropped too.
//!
//! The patch algorithms are plain functions on `serde_json::Value`; every error is a sentence
//! naming what is wrong (the API answers it as 400 code 3).

use serde_json::{Map, Value};

use crate::ArgoCdVersion;

/// `patchType` of an `ApplicationPatchRequest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchType {
    /// RFC 7386 JSON merge patch.
    Merge,
    /// RFC 6902 JSON patch.
    Json,
}

impl PatchType {
    /// `merge`, or `json` (also when empty, as Argo CD defaults); anything else is refused with
    /// Argo CD's words.
    pub(crate) fn parse(text: &str) -> Result<PatchType, String> {
        match text {
            "merge" => Ok(PatchType::Merge),
            "json" | "" => Ok(PatchType::Json),
            other => Err(format!("Patch type '{other}' is not supported")),
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            PatchType::Merge => "merge",
            PatchType::Json => "json",
        }
    }
}

/// Parses `text` as a patch of type `kind` and applies it to `doc`. On error `doc` may be half
/// patched: apply it to a copy.
pub(crate) fn apply(doc: &mut Value, kind: PatchType, text: &str) -> Result<(), String> {
    if text.trim().is_empty() {
        return Err("patch: missing (a JSON document as a string)".into());
    }
    let patch: Value =
        serde_json::from_str(text).map_err(|e| format!("patch: not a JSON document: {e}"))?;
    match kind {
        PatchType::Merge => {
            if !patch.is_object() {
                return Err("patch: a merge patch must be a JSON object".into());
            }
            merge(doc, &patch);
            Ok(())
        }
        PatchType::Json => json_patch(doc, &patch),
    }
}

/// RFC 7386: objects are merged member by member, a null member removes the member, anything
/// else (arrays included) replaces the target.
pub(crate) fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(members) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target) = target else {
        unreachable!("made an object above")
    };
    for (key, value) in members {
        if value.is_null() {
            target.remove(key);
        } else {
            merge(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// RFC 6902: every operation in order (`add`, `remove`, `replace`, `move`, `copy`, `test`).
pub(crate) fn json_patch(doc: &mut Value, ops: &Value) -> Result<(), String> {
    let Value::Array(ops) = ops else {
        return Err("patch: a json patch must be a JSON array of operations".into());
    };
    for (i, op) in ops.iter().enumerate() {
        operation(doc, op).map_err(|e| format!("patch: operation {i}: {e}"))?;
    }
    Ok(())
}

fn operation(doc: &mut Value, op: &Value) -> Result<(), String> {
    let Value::Object(op) = op else {
        return Err("not a JSON object".into());
    };
    let text = |field: &str| -> Result<&str, String> {
        match op.get(field) {
            Some(Value::String(s)) => Ok(s),
            Some(_) => Err(format!("{field:?} must be a string")),
            None => Err(format!("{field:?} is missing")),
        }
    };
    let value = || op.get("value").cloned().ok_or("\"value\" is missing");
    let name = text("op")?;
    let path = text("path")?;
    let at = pointer(path)?;
    match name {
        "add" => add(doc, &at, value()?),
        "remove" => remove(doc, &at).map(drop),
        "replace" => {
            let value = value()?;
            let target = get_mut(doc, &at).ok_or_else(|| format!("{path}: no such member"))?;
            *target = value;
            Ok(())
        }
        "move" => {
            let from_text = text("from")?;
            let from = pointer(from_text)?;
            if at.len() > from.len() && at[..from.len()] == from[..] {
                return Err(format!("cannot move {from_text} into itself ({path})"));
            }
            let moved = remove(doc, &from)?;
            add(doc, &at, moved)
        }
        "copy" => {
            let from_text = text("from")?;
            let copied = get(doc, &pointer(from_text)?)
                .cloned()
                .ok_or_else(|| format!("{from_text}: no such member"))?;
            add(doc, &at, copied)
        }
        "test" => {
            let expected = value()?;
            match get(doc, &at) {
                Some(actual) if *actual == expected => Ok(()),
                Some(actual) => Err(format!("test failed: {path} is {actual}, not {expected}")),
                None => Err(format!("test failed: {path} does not exist")),
            }
        }
        other => Err(format!(
            "unknown op {other:?} (add, remove, replace, move, copy and test are known)"
        )),
    }
}

/// An RFC 6901 JSON pointer's reference tokens (`""` is the whole document).
fn pointer(text: &str) -> Result<Vec<String>, String> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = text.strip_prefix('/') else {
        return Err(format!(
            "{text:?} is not a JSON pointer (it must start with /)"
        ));
    };
    Ok(rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect())
}

/// An array index token: `0` or digits without a leading zero.
fn index(token: &str) -> Option<usize> {
    let digits = !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit());
    if !digits || (token.len() > 1 && token.starts_with('0')) {
        return None;
    }
    token.parse().ok()
}

fn get<'a>(doc: &'a Value, at: &[String]) -> Option<&'a Value> {
    at.iter().try_fold(doc, |here, token| match here {
        Value::Object(map) => map.get(token),
        Value::Array(items) => index(token).and_then(|i| items.get(i)),
        _ => None,
    })
}

fn get_mut<'a>(doc: &'a mut Value, at: &[String]) -> Option<&'a mut Value> {
    at.iter().try_fold(doc, |here, token| match here {
        Value::Object(map) => map.get_mut(token),
        Value::Array(items) => index(token).and_then(|i| items.get_mut(i)),
        _ => None,
    })
}

fn shown(at: &[String]) -> String {
    at.iter()
        .map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1")))
        .collect()
}

fn add(doc: &mut Value, at: &[String], value: Value) -> Result<(), String> {
    let Some((last, parent_at)) = at.split_last() else {
        *doc = value;
        return Ok(());
    };
    let parent = get_mut(doc, parent_at)
        .ok_or_else(|| format!("{}: no such member to add to", shown(parent_at)))?;
    match parent {
        Value::Object(map) => {
            map.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(items) if last == "-" => {
            items.push(value);
            Ok(())
        }
        Value::Array(items) => match index(last).filter(|i| *i <= items.len()) {
            Some(i) => {
                items.insert(i, value);
                Ok(())
            }
            None => Err(format!("{}: no such array index", shown(at))),
        },
        _ => Err(format!(
            "{}: cannot add into a value that is neither an object nor an array",
            shown(at)
        )),
    }
}

fn remove(doc: &mut Value, at: &[String]) -> Result<Value, String> {
    let Some((last, parent_at)) = at.split_last() else {
        return Err("cannot remove the whole document".into());
    };
    let missing = || format!("{}: no such member", shown(at));
    match get_mut(doc, parent_at).ok_or_else(missing)? {
        Value::Object(map) => map.remove(last).ok_or_else(missing),
        Value::Array(items) => match index(last).filter(|i| *i < items.len()) {
            Some(i) => Ok(items.remove(i)),
            None => Err(missing()),
        },
        _ => Err(missing()),
    }
}

/// A field of `spec` the sandbox derives from its command line, and why it cannot change.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Owned {
    /// JSON pointer inside `spec`.
    pub pointer: &'static str,
    pub why: &'static str,
}

/// What an accepted edit leaves: the spec to publish and what it means for the controller.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SpecEdit {
    pub spec: Value,
    /// `spec.syncPolicy.automated` is set (and not disabled).
    pub automated: bool,
    /// `spec.syncPolicy.automated.prune` is true.
    pub prune: bool,
    /// `spec.syncPolicy.automated.allowEmpty` is true.
    pub allow_empty: bool,
    /// `spec.syncPolicy.automated.selfHeal` is true.
    pub self_heal: bool,
    /// Argo CD's controller refreshes the app for this change: a source or `ignoreDifferences`
    /// changed, or automated sync was turned on.
    pub refresh: bool,
    /// `metadata.annotations` as the patch leaves them (Argo CD keeps them): empty when none.
    pub annotations: Map<String, Value>,
}

/// The annotation Argo CD's controller reads as a request to refresh and then removes: the
/// sandbox does not model it (a refresh is asked for with `?refresh=`), so a patch that sets it
/// is refused rather than kept for good.
const REFRESH_ANNOTATION: &str = "argocd.argoproj.io/refresh";

/// Applies the patch to `stored` (the Application as stored) and checks the result: only
/// `spec` may change, and within it none of `owned`; see the module doc.
pub(crate) fn edit_spec(
    stored: &Value,
    kind: PatchType,
    patch: &str,
    owned: &[Owned],
    version: ArgoCdVersion,
) -> Result<SpecEdit, String> {
    let mut patched = stored.clone();
    apply(&mut patched, kind, patch)?;
    let annotations = annotations_of(stored, &patched)?;
    let without = |v: &Value| {
        let mut v = v.clone();
        if let Some(Value::Object(meta)) = v.get_mut("metadata") {
            meta.remove("annotations");
        }
        v
    };
    if let Some(field) = change_outside_spec(&without(stored), &without(&patched)) {
        return Err(format!(
            "the sandbox keeps only spec and metadata.annotations of a patched Application: this patch changes {field}"
        ));
    }
    let old = stored.get("spec").cloned().unwrap_or(Value::Null);
    let Some(Value::Object(_)) = patched.get("spec") else {
        return Err("spec: must be a JSON object".into());
    };
    let mut spec = patched["spec"].take();
    drop_nulls(&mut spec);
    if !version.automated_enabled_field()
        && let Some(Value::Object(automated)) = spec.pointer_mut("/syncPolicy/automated")
    {
        automated.remove("enabled");
    }
    for field in owned {
        if old.pointer(field.pointer) != spec.pointer(field.pointer) {
            return Err(format!(
                "{} cannot be changed in the sandbox: {}",
                dotted(field.pointer),
                field.why
            ));
        }
    }
    let automated = automation(&spec)?;
    let prune = automated_flag(&spec, "prune")?;
    let allow_empty = automated_flag(&spec, "allowEmpty")?;
    let self_heal = automated_flag(&spec, "selfHeal")?;
    let name = stored.pointer("/metadata/name").and_then(Value::as_str);
    let sources = std::iter::once(spec.get("source"))
        .chain(
            spec.get("sources")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(Some),
        )
        .flatten();
    for source in sources {
        if let Some(types) = several_types(source) {
            let path = source.get("path").and_then(Value::as_str).unwrap_or("");
            return Err(format!(
                "application spec for {} is invalid: InvalidSpecError: Unable to generate manifests in {path}: rpc error: code = Unknown desc = multiple application sources defined: {types}",
                name.unwrap_or("")
            ));
        }
    }
    let was_automated = automation(&old).unwrap_or(false);
    let differs = |field: &str| old.get(field) != spec.get(field);
    let refresh = differs("source")
        || differs("sources")
        || differs("ignoreDifferences")
        || (automated && !was_automated);
    Ok(SpecEdit {
        spec,
        automated,
        prune,
        allow_empty,
        self_heal,
        refresh,
        annotations,
    })
}

/// The patched `metadata.annotations`: Go's `map[string]string`, so an object of strings (null
/// members gone, as a merge patch's `null` removes a key); the refresh annotation refused.
fn annotations_of(stored: &Value, patched: &Value) -> Result<Map<String, Value>, String> {
    let before = stored.pointer("/metadata/annotations");
    let mut out = match patched.pointer("/metadata/annotations") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err("metadata.annotations: must be a JSON object".into()),
    };
    out.retain(|_, v| !v.is_null());
    for (k, v) in &out {
        if !v.is_string() {
            return Err(format!("metadata.annotations.{k}: must be a string"));
        }
        if k == REFRESH_ANNOTATION && before.and_then(|b| b.get(k)) != Some(v) {
            return Err(format!(
                "metadata.annotations.{k}: the sandbox does not model a refresh asked for by annotation; ask with ?refresh=normal"
            ));
        }
    }
    Ok(out)
}

/// A boolean of `spec.syncPolicy.automated` (absent: false).
fn automated_flag(spec: &Value, field: &str) -> Result<bool, String> {
    match spec.pointer(&format!("/syncPolicy/automated/{field}")) {
        None => Ok(false),
        Some(Value::Bool(on)) => Ok(*on),
        Some(_) => Err(format!(
            "spec.syncPolicy.automated.{field}: must be true or false"
        )),
    }
}

/// `spec.syncPolicy.automated`: an object turns automated sync on unless it says
/// `enabled: false`.
fn automation(spec: &Value) -> Result<bool, String> {
    match spec.pointer("/syncPolicy/automated") {
        None => Ok(false),
        Some(Value::Object(automated)) => match automated.get("enabled") {
            None => Ok(true),
            Some(Value::Bool(enabled)) => Ok(*enabled),
            Some(_) => Err("spec.syncPolicy.automated.enabled: must be true or false".into()),
        },
        Some(_) => Err("spec.syncPolicy.automated: must be a JSON object".into()),
    }
}

/// Argo CD's `ExplicitType`: more than one source type block, named in its order.
fn several_types(source: &Value) -> Option<String> {
    let types: Vec<&str> = [
        ("kustomize", "Kustomize"),
        ("helm", "Helm"),
        ("directory", "Directory"),
        ("plugin", "Plugin"),
    ]
    .into_iter()
    .filter(|(key, _)| source.get(key).is_some_and(|v| !v.is_null()))
    .map(|(_, name)| name)
    .collect();
    (types.len() > 1).then(|| types.join(","))
}

/// The first field outside `spec` whose value differs, dotted (`metadata.labels`, `status`).
fn change_outside_spec(old: &Value, new: &Value) -> Option<String> {
    let (Value::Object(old), Value::Object(new)) = (old, new) else {
        return Some("the whole Application".into());
    };
    let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| k.as_str() != "spec")
        .find_map(|k| first_difference(k, old.get(k), new.get(k)))
}

fn first_difference(path: &str, old: Option<&Value>, new: Option<&Value>) -> Option<String> {
    match (old, new) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter()
                .find_map(|k| first_difference(&format!("{path}.{k}"), a.get(k), b.get(k)))
        }
        (a, b) if a == b => None,
        _ => Some(path.to_string()),
    }
}

/// Null members of objects are absent once Argo CD has read the spec into its Go types.
fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

fn dotted(pointer: &str) -> String {
    format!("spec{}", pointer.replace('/', "."))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn merged(target: Value, patch: Value) -> Value {
        let mut target = target;
        merge(&mut target, &patch);
        target
    }

    #[test]
    fn merge_patches_follow_rfc_7386() {
        // The RFC's own examples (appendix A), a selection.
        assert_eq!(
            merged(json!({"a": "b"}), json!({"a": "c"})),
            json!({"a": "c"})
        );
        assert_eq!(
            merged(json!({"a": "b"}), json!({"b": "c"})),
            json!({"a": "b", "b": "c"})
        );
        assert_eq!(merged(json!({"a": "b"}), json!({"a": null})), json!({}));
        assert_eq!(
            merged(json!({"a": [{"b": "c"}]}), json!({"a": [1]})),
            json!({"a": [1]})
        );
        assert_eq!(
            merged(json!({"e": null}), json!({"a": 1})),
            json!({"e": null, "a": 1})
        );
        assert_eq!(
            merged(json!([1, 2]), json!({"a": "b", "c": null})),
            json!({"a": "b"})
        );
        assert_eq!(
            merged(json!({}), json!({"a": {"bb": {"ccc": null}}})),
            json!({"a": {"bb": {}}})
        );
        assert_eq!(merged(json!({"a": "foo"}), json!("bar")), json!("bar"));
    }

    fn patched(doc: Value, ops: Value) -> Result<Value, String> {
        let mut doc = doc;
        json_patch(&mut doc, &ops)?;
        Ok(doc)
    }

    #[test]
    fn json_patches_follow_rfc_6902() {
        let doc = json!({"a": {"b": [1, 2]}, "c": "x", "~/": 0});
        assert_eq!(
            patched(
                doc.clone(),
                json!([
                    {"op": "add", "path": "/a/b/1", "value": 9},
                    {"op": "add", "path": "/a/b/-", "value": 3},
                    {"op": "replace", "path": "/c", "value": "y"},
                    {"op": "remove", "path": "/~0~1"},
                    {"op": "copy", "from": "/c", "path": "/d"},
                    {"op": "move", "from": "/a/b", "path": "/e"},
                    {"op": "test", "path": "/e", "value": [1, 9, 2, 3]},
                ])
            )
            .unwrap(),
            json!({"a": {}, "c": "y", "d": "y", "e": [1, 9, 2, 3]})
        );
        for (ops, needle) in [
            (
                json!([{"op": "remove", "path": "/nope"}]),
                "operation 0: /nope: no such member",
            ),
            (
                json!([{"op": "replace", "path": "/x/y", "value": 1}]),
                "/x/y: no such member",
            ),
            (
                json!([{"op": "add", "path": "/x/y", "value": 1}]),
                "/x: no such member to add to",
            ),
            (
                json!([{"op": "add", "path": "/a/b/7", "value": 1}]),
                "no such array index",
            ),
            (
                json!([{"op": "add", "path": "/a/b/01", "value": 1}]),
                "no such array index",
            ),
            (json!([{"op": "add", "path": "/c"}]), "\"value\" is missing"),
            (
                json!([{"op": "merge", "path": "/c"}]),
                "unknown op \"merge\"",
            ),
            (json!([{"path": "/c"}]), "\"op\" is missing"),
            (
                json!([{"op": "add", "path": "c", "value": 1}]),
                "not a JSON pointer",
            ),
            (
                json!([{"op": "test", "path": "/c", "value": "z"}]),
                "test failed",
            ),
            (
                json!([{"op": "move", "from": "/a", "path": "/a/b/x"}]),
                "into itself",
            ),
            (json!({"op": "add"}), "a JSON array of operations"),
            (json!([7]), "operation 0: not a JSON object"),
        ] {
            let err = patched(doc.clone(), ops.clone()).unwrap_err();
            assert!(err.contains(needle), "{ops}: {err}");
        }
    }

    #[test]
    fn patch_types_are_merge_or_json_by_default() {
        assert_eq!(PatchType::parse("merge"), Ok(PatchType::Merge));
        assert_eq!(PatchType::parse("json"), Ok(PatchType::Json));
        assert_eq!(PatchType::parse(""), Ok(PatchType::Json));
        assert_eq!(
            PatchType::parse("strategic"),
            Err("Patch type 'strategic' is not supported".into())
        );
        let mut doc = json!({});
        for (kind, text, needle) in [
            (PatchType::Merge, "", "patch: missing"),
            (PatchType::Merge, "{nope", "patch: not a JSON document"),
            (
                PatchType::Merge,
                "[]",
                "a merge patch must be a JSON object",
            ),
            (PatchType::Json, "{}", "a JSON array of operations"),
        ] {
            let err = apply(&mut doc, kind, text).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    const OWNED: &[Owned] = &[
        Owned {
            pointer: "/project",
            why: "every sandbox app is in project default",
        },
        Owned {
            pointer: "/source/repoURL",
            why: "--repo sets it",
        },
    ];

    fn stored() -> Value {
        json!({
            "metadata": {"name": "web", "resourceVersion": "7"},
            "spec": {
                "project": "default",
                "source": {"repoURL": "/srv/origin.git", "path": "apps/web", "directory": {"recurse": true}},
                "syncPolicy": {"automated": {"prune": false, "selfHeal": true}},
            },
            "status": {"sync": {"status": "Synced"}},
        })
    }

    fn edit(kind: PatchType, patch: Value, version: ArgoCdVersion) -> Result<SpecEdit, String> {
        edit_spec(&stored(), kind, &patch.to_string(), OWNED, version)
    }

    /// Argo CD keeps a patched Application's annotations (`updateApp`): so does the sandbox,
    /// as a map of strings, but for the refresh annotation it does not model.
    #[test]
    fn annotations_are_kept_as_strings() {
        let paths = "argocd.argoproj.io/manifest-generate-paths";
        let e = edit(
            PatchType::Merge,
            json!({"metadata": {"annotations": {paths: ".;/shared"}}}),
            ArgoCdVersion::V3_5,
        )
        .unwrap();
        assert_eq!(e.annotations.get(paths), Some(&json!(".;/shared")));
        assert!(!e.refresh, "an annotation is no source change");
        let e = edit(
            PatchType::Json,
            json!([{"op": "add", "path": "/metadata/annotations", "value": {"a": "b", "c": null}}]),
            ArgoCdVersion::V3_5,
        )
        .unwrap();
        assert_eq!(e.annotations.len(), 1, "{:?}", e.annotations);
        for (patch, needle) in [
            (
                json!({"metadata": {"annotations": {"a": 1}}}),
                "metadata.annotations.a: must be a string",
            ),
            (
                json!({"metadata": {"annotations": ["a"]}}),
                "metadata.annotations: must be a JSON object",
            ),
            (
                json!({"metadata": {"annotations": {"argocd.argoproj.io/refresh": "hard"}}}),
                "does not model a refresh asked for by annotation",
            ),
        ] {
            let err = edit(PatchType::Merge, patch.clone(), ArgoCdVersion::V3_5).unwrap_err();
            assert!(err.contains(needle), "{patch}: {err}");
        }
    }

    #[test]
    fn only_spec_changes_and_not_the_owned_fields() {
        for (patch, needle) in [
            (
                json!({"status": {"sync": {"status": "OutOfSync"}}}),
                "this patch changes status.sync.status",
            ),
            (
                json!({"metadata": {"labels": {"a": "b"}}}),
                "this patch changes metadata.labels",
            ),
            (
                json!({"metadata": {"name": "api"}}),
                "changes metadata.name",
            ),
            (json!({"spec": null}), "spec: must be a JSON object"),
            (
                json!({"spec": {"source": {"repoURL": "https://elsewhere"}}}),
                "spec.source.repoURL cannot be changed in the sandbox: --repo sets it",
            ),
            (
                json!({"spec": {"source": null}}),
                "spec.source.repoURL cannot be changed",
            ),
            (
                json!({"spec": {"syncPolicy": {"automated": true}}}),
                "spec.syncPolicy.automated: must be a JSON object",
            ),
            (
                json!({"spec": {"source": {"kustomize": {"images": ["web=nginx:1.27"]}}}}),
                "application spec for web is invalid: InvalidSpecError: Unable to generate manifests in apps/web: rpc error: code = Unknown desc = multiple application sources defined: Kustomize,Directory",
            ),
        ] {
            let err = edit(PatchType::Merge, patch.clone(), ArgoCdVersion::V3_5).unwrap_err();
            assert!(err.contains(needle), "{patch}: {err}");
        }
    }

    #[test]
    fn an_accepted_edit_says_whether_automation_is_on_and_a_refresh_is_due() {
        let images = json!({"spec": {"source": {"directory": null, "kustomize": {"images": ["web=nginx:1.27"]}}}});
        let e = edit(PatchType::Merge, images, ArgoCdVersion::V3_5).unwrap();
        assert_eq!(
            e.spec["source"],
            json!({"repoURL": "/srv/origin.git", "path": "apps/web", "kustomize": {"images": ["web=nginx:1.27"]}})
        );
        assert!(e.automated && e.refresh);

        let off = json!({"spec": {"syncPolicy": {"automated": null}}});
        let e = edit(PatchType::Merge, off, ArgoCdVersion::V3_5).unwrap();
        assert_eq!(e.spec["syncPolicy"], json!({}));
        assert!(
            !e.automated && !e.refresh,
            "turning it off refreshes nothing"
        );

        let disabled =
            json!([{"op": "add", "path": "/spec/syncPolicy/automated/enabled", "value": false}]);
        let e = edit(PatchType::Json, disabled.clone(), ArgoCdVersion::V3_5).unwrap();
        assert!(!e.automated);
        assert_eq!(e.spec["syncPolicy"]["automated"]["enabled"], false);
        // Before 3.4 the field does not exist: dropped, automated sync stays on.
        let e = edit(PatchType::Json, disabled, ArgoCdVersion::V3_0).unwrap();
        assert!(e.automated);
        assert_eq!(
            e.spec["syncPolicy"]["automated"],
            json!({"prune": false, "selfHeal": true})
        );

        // Nulls are dropped wherever they are; a test on the stored object passes.
        let nulls = json!([
            {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
            {"op": "add", "path": "/spec/info", "value": [{"name": "a", "value": null}]},
            {"op": "add", "path": "/spec/revisionHistoryLimit", "value": null},
        ]);
        let e = edit(PatchType::Json, nulls, ArgoCdVersion::V3_5).unwrap();
        assert_eq!(e.spec["info"], json!([{"name": "a"}]));
        assert!(e.spec.get("revisionHistoryLimit").is_none());
        assert!(!e.refresh);
    }

    #[test]
    fn turning_automated_sync_on_asks_for_a_refresh() {
        let mut manual = stored();
        manual["spec"]["syncPolicy"] = json!({});
        let on = json!({"spec": {"syncPolicy": {"automated": {}}}}).to_string();
        let e = edit_spec(&manual, PatchType::Merge, &on, OWNED, ArgoCdVersion::V3_5).unwrap();
        assert!(e.automated && e.refresh);
    }
}
