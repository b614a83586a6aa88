//! Manifests as text the promotion gate reads and writes: a spanned document as JSON, a JSON
//! value as YAML, and one image changed in place with everything else — comments, order,
//! quoting, other documents — left as it was, so a promotion commit's diff is that one line.
//!
//! Must never: reformat what it does not change, or panic on any input.

use crate::yaml::{self, Limits, Node, Pos, Value as YamlValue};
use serde_json::{Map, Number, Value};

/// Why an image could not be changed in a manifest's text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    #[error("line {line}: the manifest is not valid YAML: {message}")]
    Syntax { line: u32, message: String },
    #[error("no {kind} named {name:?} in the manifest (found: {found})")]
    NoWorkload {
        kind: String,
        name: String,
        found: String,
    },
    #[error(
        "{kind}/{name} has no container named {container:?} with an image (its containers: {found})"
    )]
    NoContainer {
        kind: String,
        name: String,
        container: String,
        found: String,
    },
    #[error(
        "line {line}: the image of container {container:?} is not a plain or quoted scalar on one line"
    )]
    Unsupported { line: u32, container: String },
}

/// The documents of a manifest stream as JSON (YAML 1.2 core schema: plain `true`/`false`,
/// `null`/`~`/empty, integers and floats resolve; everything quoted or else is a string).
pub fn documents_as_json(text: &str) -> Result<Vec<Value>, EditError> {
    yaml::load_stream(text, &Limits::default())
        .into_iter()
        .map(|d| match d {
            Ok(doc) => Ok(node_to_json(&doc.root)),
            Err(e) => Err(EditError::Syntax {
                line: e.pos.line,
                message: e.message,
            }),
        })
        .filter(|d| !matches!(d, Ok(Value::Null)))
        .collect()
}

/// One node as JSON.
pub fn node_to_json(node: &Node) -> Value {
    match &node.value {
        YamlValue::Scalar(s) if !s.plain => Value::String(s.text.clone()),
        YamlValue::Scalar(s) => plain_scalar(&s.text),
        YamlValue::Seq(items) => Value::Array(items.iter().map(node_to_json).collect()),
        YamlValue::Map(entries) => {
            let mut m = Map::new();
            for e in entries {
                let key = match node_to_json(&e.key) {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                m.insert(key, node_to_json(&e.value));
            }
            Value::Object(m)
        }
    }
}

fn plain_scalar(t: &str) -> Value {
    match t {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    if let Ok(i) = t.parse::<i64>() {
        return Value::Number(i.into());
    }
    let looks_numeric = t
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E'))
        && t.chars().any(|c| c.is_ascii_digit());
    if looks_numeric
        && let Ok(f) = t.parse::<f64>()
        && let Some(n) = Number::from_f64(f)
    {
        return Value::Number(n);
    }
    Value::String(t.to_string())
}

/// A JSON value as block YAML, keys in the value's order. Strings are double-quoted unless
/// they read back as the same plain string, so what is written reads back as what was given.
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    block(value, 0, &mut out);
    out
}

/// `value` as lines at `indent`, each ending in a newline.
fn block(value: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match value {
        Value::Object(m) if !m.is_empty() => {
            for (k, v) in m {
                out.push_str(&pad);
                out.push_str(&scalar_text(k));
                out.push(':');
                after_key(v, indent, out);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for v in a {
                match v {
                    // `- key: value`, the mapping's other keys under the first one.
                    Value::Object(m) if !m.is_empty() => {
                        let mut item = String::new();
                        block(v, indent + 2, &mut item);
                        out.push_str(&pad);
                        out.push_str("- ");
                        out.push_str(&item[indent + 2..]);
                    }
                    Value::Array(inner) if !inner.is_empty() => {
                        out.push_str(&pad);
                        out.push_str("-\n");
                        block(v, indent + 2, out);
                    }
                    _ => {
                        out.push_str(&pad);
                        out.push_str("- ");
                        out.push_str(&leaf(v));
                        out.push('\n');
                    }
                }
            }
        }
        _ => {
            out.push_str(&pad);
            out.push_str(&leaf(value));
            out.push('\n');
        }
    }
}

/// What follows `key:`.
fn after_key(v: &Value, indent: usize, out: &mut String) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            block(v, indent + 2, out);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            block(v, indent + 2, out);
        }
        _ => {
            out.push(' ');
            out.push_str(&leaf(v));
            out.push('\n');
        }
    }
}

fn leaf(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => scalar_text(s),
        Value::Object(_) => "{}".into(),
        Value::Array(_) => "[]".into(),
    }
}

/// A string as a YAML scalar: plain when it reads back as the same string, else double-quoted
/// (JSON's escapes are YAML's). "Reads back" is also judged by YAML 1.1, which Kubernetes'
/// and Argo CD's Go parsers still speak: `yes`, `on`, `0777`, `1_000`, `1:30` and `.inf` are
/// strings in YAML 1.2 but not there, so they are quoted too.
fn scalar_text(s: &str) -> String {
    let yaml_1_1_special = matches!(
        s.to_ascii_lowercase().as_str(),
        "y" | "yes" | "n" | "no" | "on" | "off" | "true" | "false" | "null" | "~"
    ) || s
        .starts_with(|c: char| c.is_ascii_digit() || matches!(c, '+' | '-' | '.'));
    let plain_safe = !s.is_empty()
        && !yaml_1_1_special
        && s.trim() == s
        && plain_scalar(s) == Value::String(s.to_string())
        && !s.starts_with(|c: char| "-?:,[]{}#&*!|>'\"%@`".contains(c))
        && !s.contains(": ")
        && !s.contains(" #")
        && !s.ends_with(':')
        && s.chars().all(|c| !c.is_control());
    if plain_safe {
        s.to_string()
    } else {
        serde_json::to_string(s).unwrap_or_default()
    }
}

/// `text` with the image of `container` in the `kind` named `name` set to `image`; nothing else
/// changes. The image keeps its quoting style (plain stays plain when that reads back).
pub fn set_container_image(
    text: &str,
    kind: &str,
    name: &str,
    container: &str,
    image: &str,
) -> Result<String, EditError> {
    let mut found = Vec::new();
    for doc in yaml::load_stream(text, &Limits::default()) {
        let doc = doc.map_err(|e| EditError::Syntax {
            line: e.pos.line,
            message: e.message,
        })?;
        let root = &doc.root;
        let (Some(k), Some(n)) = (
            root.get("kind").and_then(Node::as_str),
            root.at(&["metadata", "name"]).and_then(Node::as_str),
        ) else {
            continue;
        };
        found.push(format!("{k}/{n}"));
        if k != kind || n != name {
            continue;
        }
        let containers = root
            .at(&["spec", "template", "spec", "containers"])
            .map(Node::as_seq)
            .unwrap_or_default();
        let names: Vec<&str> = containers
            .iter()
            .filter_map(|c| c.get("name").and_then(Node::as_str))
            .collect();
        let Some(image_node) = containers
            .iter()
            .find(|c| c.get("name").and_then(Node::as_str) == Some(container))
            .and_then(|c| c.get("image"))
        else {
            return Err(EditError::NoContainer {
                kind: kind.into(),
                name: name.into(),
                container: container.into(),
                found: if names.is_empty() {
                    "none".into()
                } else {
                    names.join(", ")
                },
            });
        };
        let unsupported = || EditError::Unsupported {
            line: image_node.span.start.line,
            container: container.into(),
        };
        let YamlValue::Scalar(scalar) = &image_node.value else {
            return Err(unsupported());
        };
        let start = byte_offset(text, image_node.span.start).ok_or_else(unsupported)?;
        let end = start + written_len(&text[start..], scalar.plain).ok_or_else(unsupported)?;
        let written = &text[start..end];
        if written.contains('\n') || (scalar.plain && written != scalar.text) {
            return Err(unsupported());
        }
        let replacement = if scalar.plain && scalar_text(image) == image {
            image.to_string()
        } else if written.starts_with('\'') && !image.contains('\'') {
            format!("'{image}'")
        } else {
            serde_json::to_string(image).unwrap_or_default()
        };
        return Ok(format!("{}{replacement}{}", &text[..start], &text[end..]));
    }
    Err(EditError::NoWorkload {
        kind: kind.into(),
        name: name.into(),
        found: if found.is_empty() {
            "nothing".into()
        } else {
            found.join(", ")
        },
    })
}

/// The length in bytes of the scalar written at the start of `rest`: a plain one runs to the
/// end of the line or to a ` #` comment (trailing spaces not included); a quoted one to its
/// closing quote.
fn written_len(rest: &str, plain: bool) -> Option<usize> {
    let line = &rest[..rest.find('\n').unwrap_or(rest.len())];
    if plain {
        let body = match line.find(" #") {
            Some(i) => &line[..i],
            None => line,
        };
        return Some(body.trim_end().len());
    }
    let mut chars = line.char_indices();
    let (_, quote) = chars.next()?;
    match quote {
        '"' => {
            let mut escaped = false;
            for (i, c) in chars {
                match c {
                    _ if escaped => escaped = false,
                    '\\' => escaped = true,
                    '"' => return Some(i + 1),
                    _ => {}
                }
            }
            None
        }
        '\'' => {
            let bytes = line.as_bytes();
            let mut i = 1;
            while i < bytes.len() {
                if bytes[i] == b'\'' {
                    if bytes.get(i + 1) == Some(&b'\'') {
                        i += 2;
                        continue;
                    }
                    return Some(i + 1);
                }
                i += 1;
            }
            None
        }
        _ => None,
    }
}

/// The byte offset of a 1-based line and 1-based character column in `text`.
fn byte_offset(text: &str, pos: Pos) -> Option<usize> {
    let mut line_start = 0usize;
    for _ in 1..pos.line {
        line_start += text[line_start..].find('\n')? + 1;
    }
    let line = &text[line_start..];
    let col = (pos.col as usize).checked_sub(1)?;
    let offset = line
        .char_indices()
        .nth(col)
        .map(|(i, _)| i)
        .or_else(|| (line.chars().count() == col).then_some(line.len()))?;
    Some(line_start + offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LIVE: &str = "# the live model server\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: llm  # prod\n  namespace: serving\nspec:\n  replicas: 4\n  template:\n    spec:\n      containers:\n        - name: sidecar\n          image: envoy:1\n        - name: server\n          image: registry.local/llm:1.0   # pinned below\n          ports:\n            - containerPort: 8080\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: llm\n";

    #[test]
    fn an_image_changes_in_place_and_nothing_else_does() {
        let out = set_container_image(
            LIVE,
            "Deployment",
            "llm",
            "server",
            "registry.local/llm@sha256:0123abcd",
        )
        .unwrap();
        let changed: Vec<(&str, &str)> = LIVE
            .lines()
            .zip(out.lines())
            .filter(|(a, b)| a != b)
            .collect();
        assert_eq!(
            changed,
            [(
                "          image: registry.local/llm:1.0   # pinned below",
                "          image: registry.local/llm@sha256:0123abcd   # pinned below"
            )]
        );
        assert_eq!(LIVE.lines().count(), out.lines().count());
    }

    #[test]
    fn a_quoted_image_stays_quoted() {
        for (written, expected) in [
            (
                "\"registry.local/llm:1.0\"",
                "\"registry.local/llm@sha256:ff\"",
            ),
            ("'registry.local/llm:1.0'", "'registry.local/llm@sha256:ff'"),
        ] {
            let text = LIVE.replace("registry.local/llm:1.0", written);
            let out = set_container_image(
                &text,
                "Deployment",
                "llm",
                "server",
                "registry.local/llm@sha256:ff",
            )
            .unwrap();
            assert!(
                out.contains(&format!("image: {expected}   # pinned below")),
                "{out}"
            );
            let docs = documents_as_json(&out).unwrap();
            assert_eq!(
                docs[0]["spec"]["template"]["spec"]["containers"][1]["image"],
                "registry.local/llm@sha256:ff"
            );
        }
    }

    #[test]
    fn what_cannot_be_changed_is_named() {
        let e = set_container_image(LIVE, "Deployment", "web", "server", "x@sha256:1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "no Deployment named \"web\" in the manifest (found: Deployment/llm, Service/llm)"
        );
        let e = set_container_image(LIVE, "Deployment", "llm", "main", "x@sha256:1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "Deployment/llm has no container named \"main\" with an image (its containers: sidecar, server)"
        );
        let e = set_container_image("a: [\n", "Deployment", "llm", "server", "x").unwrap_err();
        assert!(e.to_string().starts_with("line "), "{e}");
    }

    #[test]
    fn documents_read_as_json_with_yaml_types() {
        let docs = documents_as_json(LIVE).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0]["spec"]["replicas"], 4);
        assert_eq!(docs[0]["metadata"]["name"], "llm");
        assert_eq!(
            documents_as_json("a: \"4\"\nb: 1.5\nc: true\nd: ~\ne: 1.2.3\n").unwrap()[0],
            json!({"a": "4", "b": 1.5, "c": true, "d": null, "e": "1.2.3"})
        );
    }

    #[test]
    fn strings_yaml_1_1_would_read_as_something_else_are_quoted() {
        for s in [
            "yes", "No", "on", "OFF", "y", "0777", "1_000", "1:30", ".inf", "-1", "1.10",
        ] {
            let text = to_yaml(&json!({ "v": s }));
            assert_eq!(text, format!("v: \"{s}\"\n"), "{s}");
        }
        assert_eq!(to_yaml(&json!({"v": "nginx"})), "v: nginx\n");
    }

    #[test]
    fn json_written_as_yaml_reads_back_as_the_same_value() {
        let values = [
            json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "llm-candidate", "labels": {"app": "llm-candidate", "greenlight.dev/role": "candidate"}, "annotations": {}},
                "spec": {
                    "replicas": 1,
                    "template": {"spec": {"containers": [
                        {"name": "server", "image": "registry.local/llm@sha256:0123", "args": ["--port", "8080", "true", "", "a: b", "# no", "- x"],
                         "ports": [{"containerPort": 8080}], "resources": {"limits": {"nvidia.com/gpu": 1}}},
                        {"name": "empty", "env": [], "command": [["nested", 1]]},
                        {"name": "yaml-1.1", "args": ["yes", "No", "on", "OFF", "y", "0777", "1_000", "1:30", ".inf", "-1", "+1", "1.10"]},
                    ]}},
                    "weird": {"": "empty key", "yes": "1.0", "n": null, "f": 0.25, "neg": -3, "multi": "line one\nline two"},
                },
            }),
            json!([1, "two", {"three": 3}, []]),
        ];
        for v in values {
            let text = to_yaml(&v);
            let back = documents_as_json(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(back, vec![v.clone()], "{text}");
        }
    }
}
