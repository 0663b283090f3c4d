//! Turns `params` proposals into candidate directories in `pending/`.
//!
//! A params candidate is its parent's code with different `[params]` defaults in
//! `harness.toml`, so every candidate in the archive is a complete, runnable harness that a
//! person (or a later agent proposer) can read and run as it is.

use std::path::Path;

use serde_json::Value;

use super::params::{ParamConfig, ParamSpace};
use crate::archive::{copy_dir, CandidateMeta};

/// Reads the parameter space and the current values (the defaults) of a harness directory.
pub fn read_params(code_dir: &Path) -> Result<(ParamSpace, ParamConfig), String> {
    let manifest = code_dir.join("harness.toml");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|e| format!("cannot read `{}`: {e}", manifest.display()))?;
    let table: toml::Table =
        toml::from_str(&text).map_err(|e| format!("`{}`: {e}", manifest.display()))?;
    let mut space = ParamSpace::new();
    let mut config = ParamConfig::new();
    if let Some(params) = table.get("params").and_then(|p| p.as_table()) {
        for (name, spec) in params {
            let values: Vec<Value> = spec
                .get("values")
                .and_then(|v| v.as_array())
                .map(|a| a.iter().map(toml_to_json).collect())
                .unwrap_or_default();
            if values.is_empty() {
                continue;
            }
            let default = spec
                .get("default")
                .map(toml_to_json)
                .unwrap_or_else(|| values[0].clone());
            space.insert(name.clone(), values);
            config.insert(name.clone(), default);
        }
    }
    Ok((space, config))
}

/// Writes a candidate: a copy of `parent_code` with `config` as its `[params]` defaults, and
/// its `candidate.toml`, into `dest` (which must not exist).
pub fn write_candidate(
    parent_code: &Path,
    config: &ParamConfig,
    meta: &CandidateMeta,
    dest: &Path,
) -> Result<(), String> {
    let err = |e: std::io::Error| format!("cannot write `{}`: {e}", dest.display());
    copy_dir(parent_code, dest).map_err(err)?;
    let manifest = dest.join("harness.toml");
    let text = std::fs::read_to_string(&manifest).map_err(err)?;
    let mut table: toml::Table =
        toml::from_str(&text).map_err(|e| format!("`{}`: {e}", manifest.display()))?;
    if let Some(params) = table.get_mut("params").and_then(|p| p.as_table_mut()) {
        for (name, value) in config {
            if let Some(spec) = params.get_mut(name).and_then(|s| s.as_table_mut()) {
                if let Some(v) = json_to_toml(value) {
                    spec.insert("default".into(), v);
                }
            }
        }
    }
    table.insert("name".into(), toml::Value::String(meta.name.clone()));
    let out = toml::to_string(&table).map_err(|e| e.to_string())?;
    std::fs::write(&manifest, out).map_err(err)?;
    let meta_text = toml::to_string(meta).map_err(|e| e.to_string())?;
    std::fs::write(dest.join("candidate.toml"), meta_text).map_err(err)?;
    Ok(())
}

/// A TOML value as JSON (datetimes become strings).
pub fn toml_to_json(v: &toml::Value) -> Value {
    match v {
        toml::Value::String(s) => Value::String(s.clone()),
        toml::Value::Integer(i) => Value::from(*i),
        toml::Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.clone(), toml_to_json(v)))
                .collect(),
        ),
    }
}

/// A JSON value as TOML (`null` has no TOML form and gives `None`).
pub fn json_to_toml(v: &Value) -> Option<toml::Value> {
    Some(match v {
        Value::Null => return None,
        Value::Bool(b) => toml::Value::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => toml::Value::Integer(i),
            None => toml::Value::Float(n.as_f64()?),
        },
        Value::String(s) => toml::Value::String(s.clone()),
        Value::Array(a) => toml::Value::Array(a.iter().filter_map(json_to_toml).collect()),
        Value::Object(o) => toml::Value::Table(
            o.iter()
                .filter_map(|(k, v)| Some((k.clone(), json_to_toml(v)?)))
                .collect(),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_written_candidate_carries_the_new_defaults() {
        let tmp = tempfile::tempdir().unwrap();
        let parent = tmp.path().join("parent");
        std::fs::create_dir_all(&parent).unwrap();
        std::fs::write(
            parent.join("harness.toml"),
            "name = \"p\"\nentry = [\"python3\", \"h.py\"]\n[params]\nshots = { values = [0, 2, 4], default = 0 }\nmode = { values = [\"a\", \"b\"], default = \"a\" }\n",
        )
        .unwrap();
        std::fs::write(parent.join("h.py"), "print(1)\n").unwrap();
        let (space, config) = read_params(&parent).unwrap();
        assert_eq!(space["shots"], vec![json!(0), json!(2), json!(4)]);
        assert_eq!(config["mode"], json!("a"));
        let mut new = config.clone();
        new.insert("shots".into(), json!(4));
        new.insert("mode".into(), json!("b"));
        let meta = CandidateMeta {
            name: "p.i1c0".into(),
            parent: Some("p".into()),
            iteration: 1,
            hypothesis: "more shots".into(),
            axis: "exploitation".into(),
            components: vec!["params".into()],
        };
        let dest = tmp.path().join("pending/p.i1c0");
        write_candidate(&parent, &new, &meta, &dest).unwrap();
        let (_, written) = read_params(&dest).unwrap();
        assert_eq!(written, new);
        assert!(dest.join("h.py").exists());
        assert!(dest.join("candidate.toml").exists());
    }
}
