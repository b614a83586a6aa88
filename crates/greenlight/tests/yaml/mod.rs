//! A YAML file of the repository (`action.yml`, `.pre-commit-hooks.yaml`) read as JSON, with saphyr:
//! a parser of its own, not the linter's, so the tests of these files do not lean on the code
//! they ship beside.

use saphyr::{LoadableYamlNode, Scalar, Yaml};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// The repository's root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The one document of the file `rel` (from the repository's root). Panics, naming the file,
/// when it is unreadable, does not parse, or holds other than one document.
#[track_caller]
pub fn load(rel: &str) -> Value {
    let path = repo_root().join(rel);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let docs = Yaml::load_from_str(&text).unwrap_or_else(|e| panic!("{rel}: {e}"));
    assert_eq!(docs.len(), 1, "{rel}: one YAML document");
    to_json(&docs[0]).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn to_json(node: &Yaml) -> Result<Value, String> {
    Ok(match node {
        Yaml::Value(Scalar::Null) => Value::Null,
        Yaml::Value(Scalar::Boolean(b)) => Value::Bool(*b),
        Yaml::Value(Scalar::Integer(i)) => Value::from(*i),
        Yaml::Value(Scalar::FloatingPoint(f)) => Value::from(f.into_inner()),
        Yaml::Value(Scalar::String(s)) => Value::String(s.to_string()),
        Yaml::Representation(text, _, _) => Value::String(text.to_string()),
        Yaml::Sequence(items) => Value::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        Yaml::Mapping(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let Value::String(key) = to_json(k)? else {
                    return Err(format!("a mapping key that is not a string: {k:?}"));
                };
                if out.insert(key.clone(), to_json(v)?).is_some() {
                    return Err(format!("the key `{key}` twice in one mapping"));
                }
            }
            Value::Object(out)
        }
        Yaml::Tagged(_, inner) => to_json(inner)?,
        Yaml::Alias(_) => return Err("an unresolved alias".into()),
        Yaml::BadValue => return Err("a value that does not parse".into()),
    })
}

/// Every document of `text` (a multi-document stream, e.g. `helm template`'s output), empty
/// ones left out. Panics, naming `what`, when it does not parse.
#[allow(dead_code)] // Not every test file that reads YAML reads a stream.
#[track_caller]
pub fn load_all_str(what: &str, text: &str) -> Vec<Value> {
    let docs = Yaml::load_from_str(text).unwrap_or_else(|e| panic!("{what}: {e}"));
    docs.iter()
        .map(|d| to_json(d).unwrap_or_else(|e| panic!("{what}: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}
