//! Turns `params` proposals into candidate directories in `pending/`.
//!
//! A params candidate is its parent's code with different `[params]` defaults in
//! `harness.toml`, so every candidate in the archive is a complete, runnable harness that a
//! person (or a later agent proposer) can read and run as it is.

use std::path::Path;

use super::params::{ParamConfig, ParamSpace};
use crate::archive::{copy_dir, CandidateMeta};
use hevo_runtime::harness::Harness;

/// Reads the parameter space and the current values (the defaults) of a harness directory.
pub fn read_params(code_dir: &Path) -> Result<(ParamSpace, ParamConfig), String> {
    let harness = Harness::load(code_dir).map_err(|e| e.to_string())?;
    let mut space = ParamSpace::new();
    let mut config = ParamConfig::new();
    for (name, spec) in &harness.manifest.params {
        space.insert(name.clone(), spec.values.clone());
        config.insert(name.clone(), spec.default.clone());
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
    // Loaded first: a parent whose manifest is invalid writes nothing.
    Harness::load(parent_code).map_err(|e| e.to_string())?;
    let manifest = parent_code.join("harness.toml");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|e| format!("cannot read `{}`: {e}", manifest.display()))?;
    let edited = hevo_runtime::harness::edited_manifest(&text, &meta.name, config)?;
    copy_dir(parent_code, dest).map_err(err)?;
    std::fs::write(dest.join("harness.toml"), edited).map_err(err)?;
    Harness::load(dest).map_err(|e| e.to_string())?;
    let meta_text = toml::to_string(meta).map_err(|e| e.to_string())?;
    std::fs::write(dest.join("candidate.toml"), meta_text).map_err(err)?;
    Ok(())
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

    /// The candidate's `harness.toml` differs from its parent's only in the changed lines:
    /// a rewrite through serde dropped comments, wrote `10` as `10.0` and expanded tables,
    /// so `hevo show` diffed the whole file.
    #[test]
    fn only_the_changed_defaults_and_the_name_differ_from_the_parent() {
        let parent_text = "# the rules harness\nname = \"p\"\nentry = [\"python3\", \"h.py\"]\ntimeout_s = 10\n\n[params]\n# how many examples\nshots = { values = [0, 2, 4], default = 0 }  # few\nmode = { values = [\"a\", \"b\"], default = \"a\" }\n\n[params.temp]\nvalues = [0.0, 0.5]\ndefault = 0.0\n";
        let tmp = tempfile::tempdir().unwrap();
        let parent = tmp.path().join("parent");
        std::fs::create_dir_all(&parent).unwrap();
        std::fs::write(parent.join("harness.toml"), parent_text).unwrap();
        std::fs::write(parent.join("h.py"), "print(1)\n").unwrap();
        let (_, mut config) = read_params(&parent).unwrap();
        config.insert("shots".into(), json!(4));
        config.insert("temp".into(), json!(0.5));
        let meta = CandidateMeta {
            name: "p.i1c0".into(),
            parent: Some("p".into()),
            iteration: 1,
            hypothesis: String::new(),
            axis: "exploitation".into(),
            components: vec![],
        };
        let dest = tmp.path().join("c");
        write_candidate(&parent, &config, &meta, &dest).unwrap();
        let written = std::fs::read_to_string(dest.join("harness.toml")).unwrap();
        let changed: Vec<(&str, &str)> = parent_text
            .lines()
            .zip(written.lines())
            .filter(|(a, b)| a != b)
            .collect();
        assert_eq!(
            changed,
            vec![
                ("name = \"p\"", "name = \"p.i1c0\""),
                (
                    "shots = { values = [0, 2, 4], default = 0 }  # few",
                    "shots = { values = [0, 2, 4], default = 4 }  # few"
                ),
                ("default = 0.0", "default = 0.5"),
            ],
            "{written}"
        );
        assert_eq!(
            parent_text.lines().count(),
            written.lines().count(),
            "{written}"
        );
    }
}
