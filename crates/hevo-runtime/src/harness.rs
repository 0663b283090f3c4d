//! Harness directories: `harness.toml` (entry, optional prepare, timeout, `[params]`), the
//! resolved parameter values and a content hash that identifies a candidate.
//!
//! This module only reads and validates; starting the harness process is the job of
//! [`crate::trial`] (through its single [`crate::launch::Launcher`] seam).

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The longest harness name, in characters (a proposed candidate's too): the name names the
/// harness's folders in a run (`archive/candidates/NNN-<name>`, `eval-<name>-<hash>`).
pub const MAX_NAME_CHARS: usize = 64;

/// One tunable knob declared under `[params]`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(
    deny_unknown_fields,
    expecting = "a knob as a table of its values and default, e.g. \
                 `threshold = { values = [2, 4, 6], default = 2 }`"
)]
pub struct ParamSpec {
    /// The values a params proposer may choose from.
    pub values: Vec<Value>,
    /// The value used when nothing else is chosen; must be one of `values`.
    pub default: Value,
}

/// The parsed `harness.toml`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The harness's name (defaults to the directory name).
    #[serde(default)]
    pub name: Option<String>,
    /// The command of one trial, e.g. `["python3", "harness.py"]`.
    pub entry: Vec<String>,
    /// Optional command run once per candidate on the train split.
    #[serde(default)]
    pub prepare: Option<Vec<String>>,
    /// Optional per-trial time limit in seconds.
    #[serde(default)]
    pub timeout_s: Option<f64>,
    /// Optional knobs a params proposer may turn.
    #[serde(default)]
    pub params: BTreeMap<String, ParamSpec>,
}

/// A loaded harness: its directory, manifest and chosen parameter values.
#[derive(Clone, Debug)]
pub struct Harness {
    /// Canonical path of the harness directory.
    pub dir: PathBuf,
    /// The harness's name.
    pub name: String,
    /// The parsed manifest.
    pub manifest: Manifest,
    /// The chosen parameter values (the defaults unless overridden), as a JSON object.
    pub params: serde_json::Map<String, Value>,
    /// SHA-256 over the directory's files (see [`content_hash`]).
    pub code_hash: String,
}

/// Why a harness could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// The directory or `harness.toml` could not be read.
    #[error("cannot read `{}`: {source}", path.display())]
    Read {
        /// The path.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: io::Error,
    },
    /// `harness.toml` is missing.
    #[error("`{}` is missing; a harness directory needs a `harness.toml` with \
             `entry = [\"python3\", \"harness.py\"]` (see docs/harness-protocol.md)", path.display())]
    Missing {
        /// The expected manifest path.
        path: PathBuf,
    },
    /// `harness.toml` is not valid.
    #[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Invalid {
        /// The manifest path.
        path: PathBuf,
        /// The line, when known.
        line: Option<usize>,
        /// What is wrong and how to fix it.
        message: String,
    },
}

impl Manifest {
    /// The per-trial time limit this manifest asks for: its `timeout_s`, else
    /// [`crate::eval::DEFAULT_TIMEOUT`] (what an evaluation applies unless `--timeout`
    /// overrides it).
    pub fn time_limit(&self) -> std::time::Duration {
        self.timeout_s
            .and_then(crate::limits::seconds)
            .unwrap_or(crate::eval::DEFAULT_TIMEOUT)
    }

    /// Parses and validates the text of a `harness.toml` read from `path` (which every error
    /// names, with the line where there is one).
    pub fn parse(text: &str, path: &Path) -> Result<Manifest, HarnessError> {
        let manifest: Manifest = toml::from_str(text).map_err(|err| HarnessError::Invalid {
            path: path.to_path_buf(),
            line: err.span().map(|s| crate::suite::line_of(text, s.start)),
            message: format!(
                "{} (keys: name, entry, prepare, timeout_s, [params])",
                err.message()
            ),
        })?;
        // The error at the line of the dotted key `at`.
        let invalid = |at: &str, message: String| HarnessError::Invalid {
            path: path.to_path_buf(),
            line: crate::toml_line::key_line(text, at),
            message,
        };
        if let Some(name) = &manifest.name {
            let chars = name.chars().count();
            if name.trim().is_empty() || chars > MAX_NAME_CHARS {
                return Err(invalid(
                    "name",
                    format!(
                        "`name` is {}: a harness's name names its folders in a run, so give \
                         1 to {MAX_NAME_CHARS} characters, e.g. `name = \"few-shot-v2\"`",
                        if chars > MAX_NAME_CHARS {
                            format!("{chars} characters long")
                        } else {
                            "empty".to_string()
                        }
                    ),
                ));
            }
        }
        if manifest.entry.is_empty() || manifest.entry[0].trim().is_empty() {
            return Err(invalid(
                "entry",
                "`entry` must be a non-empty command, e.g. `entry = [\"python3\", \"harness.py\"]`"
                    .into(),
            ));
        }
        if matches!(&manifest.prepare, Some(p) if p.is_empty()) {
            return Err(invalid(
                "prepare",
                "`prepare` must be a non-empty command or be left out".into(),
            ));
        }
        if let Some(t) = manifest.timeout_s {
            if let Err(message) = crate::limits::time_limit("`timeout_s`", t) {
                return Err(invalid("timeout_s", message));
            }
        }
        for (key, spec) in &manifest.params {
            if spec.values.is_empty() {
                return Err(invalid(
                    &format!("params.{key}"),
                    format!("[params] `{key}` has no `values`; list the values it may take"),
                ));
            }
            if let Some(twice) = spec
                .values
                .iter()
                .enumerate()
                .find_map(|(i, v)| spec.values[..i].contains(v).then_some(v))
            {
                // A value listed twice is drawn twice as often by the params proposer.
                return Err(invalid(
                    &format!("params.{key}"),
                    format!(
                        "[params] `{key}` lists {twice} twice in its values {}; list each \
                         value once",
                        Value::Array(spec.values.clone())
                    ),
                ));
            }
            if !spec.values.contains(&spec.default) {
                return Err(invalid(
                    &format!("params.{key}.default"),
                    format!(
                        "[params] `{key}`: default {} is not one of its values {}; make it one \
                         of them",
                        spec.default,
                        Value::Array(spec.values.clone())
                    ),
                ));
            }
        }
        Ok(manifest)
    }
}

/// The manifest `text` (a `harness.toml`) with its `name` and each of `config`'s `[params]`
/// defaults replaced in place: comments, layout, inline or standalone tables and number
/// formats are kept, so a params candidate's diff against its parent shows the parameter
/// change and nothing else. With [`Manifest::parse`], the only code that reads or writes a
/// `harness.toml`.
pub fn edited_manifest(
    text: &str,
    name: &str,
    config: &BTreeMap<String, Value>,
) -> Result<String, String> {
    use toml_edit::{DocumentMut, Item};
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e| format!("harness.toml cannot be edited: {e}"))?;
    set_keeping_layout(&mut doc["name"], toml_edit::Value::from(name));
    for (param, value) in config {
        let Some(spec) = doc
            .get_mut("params")
            .and_then(|p| p.get_mut(param))
            .and_then(Item::as_table_like_mut)
        else {
            continue;
        };
        let value = toml_value(value)?;
        match spec.get_mut("default") {
            Some(item) => set_keeping_layout(item, value),
            None => {
                spec.insert("default", Item::Value(value));
            }
        }
    }
    Ok(doc.to_string())
}

/// Replaces `item` with `value`, keeping the spaces and comments around the old value.
fn set_keeping_layout(item: &mut toml_edit::Item, mut value: toml_edit::Value) {
    if let Some(old) = item.as_value() {
        *value.decor_mut() = old.decor().clone();
    }
    *item = toml_edit::Item::Value(value);
}

/// A parameter value (JSON, as manifests are read) as a TOML value.
fn toml_value(v: &Value) -> Result<toml_edit::Value, String> {
    use serde_json::Value as J;
    Ok(match v {
        J::Bool(b) => (*b).into(),
        J::Number(n) => match n.as_i64() {
            Some(i) => i.into(),
            None => n.as_f64().unwrap_or(f64::NAN).into(),
        },
        J::String(s) => s.as_str().into(),
        J::Array(items) => {
            let mut array = toml_edit::Array::new();
            for item in items {
                array.push(toml_value(item)?);
            }
            array.into()
        }
        J::Object(map) => {
            let mut table = toml_edit::InlineTable::new();
            for (k, item) in map {
                table.insert(k, toml_value(item)?);
            }
            table.into()
        }
        J::Null => return Err("a parameter value cannot be null in TOML".into()),
    })
}

impl Harness {
    /// Loads and validates the harness in `dir`, with its default parameter values.
    pub fn load(dir: &Path) -> Result<Harness, HarnessError> {
        let dir = dir.canonicalize().map_err(|source| HarnessError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join("harness.toml");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(HarnessError::Missing { path })
            }
            Err(source) => return Err(HarnessError::Read { path, source }),
        };
        let manifest = Manifest::parse(&text, &path)?;
        let params = manifest
            .params
            .iter()
            .map(|(key, spec)| (key.clone(), spec.default.clone()))
            .collect();
        let name = manifest.name.clone().unwrap_or_else(|| {
            dir.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "harness".into())
        });
        let code_hash = content_hash(&dir).map_err(|source| HarnessError::Read {
            path: dir.clone(),
            source,
        })?;
        Ok(Harness {
            dir,
            name,
            manifest,
            params,
            code_hash,
        })
    }

    /// Overrides one parameter; the value must be one of the declared values.
    pub fn set_param(&mut self, key: &str, value: Value) -> Result<(), HarnessError> {
        let path = self.dir.join("harness.toml");
        let Some(spec) = self.manifest.params.get(key) else {
            return Err(HarnessError::Invalid {
                path,
                line: None,
                message: format!("no parameter `{key}` is declared under [params]"),
            });
        };
        if !spec.values.contains(&value) {
            return Err(HarnessError::Invalid {
                path,
                line: None,
                message: format!("[params] `{key}` may not be {value}"),
            });
        }
        self.params.insert(key.to_string(), value);
        Ok(())
    }

    /// The parameter values as compact JSON (what `HEVO_PARAMS` and `params.json` hold).
    pub fn params_json(&self) -> String {
        Value::Object(self.params.clone()).to_string()
    }

    /// The entry command with paths relative to the harness directory made absolute.
    pub fn entry_argv(&self) -> Vec<String> {
        resolve_argv(&self.manifest.entry, &self.dir)
    }

    /// The prepare command (if any) with paths made absolute like [`Harness::entry_argv`].
    pub fn prepare_argv(&self) -> Option<Vec<String>> {
        self.manifest
            .prepare
            .as_ref()
            .map(|p| resolve_argv(p, &self.dir))
    }

    /// Checks that the programs of `entry` and `prepare` exist (on `PATH` or in the harness
    /// directory), so a typo is an error before anything runs, not a failed trial.
    pub fn check_programs(&self) -> Result<(), HarnessError> {
        let env = crate::launch::base_env(&self.dir);
        for (key, argv) in std::iter::once(("entry", self.entry_argv()))
            .chain(self.prepare_argv().map(|a| ("prepare", a)))
        {
            let program = crate::launch::resolve_program(&argv[0], &env);
            if !program.is_file() {
                let path = self.dir.join("harness.toml");
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                return Err(HarnessError::Invalid {
                    line: crate::toml_line::key_line(&text, key),
                    path,
                    message: format!(
                        "`{key}`: program `{}` not found (neither on PATH nor in the harness \
                         directory); fix `{key}` or install it",
                        argv[0]
                    ),
                });
            }
        }
        Ok(())
    }
}

/// Makes every argument that names an existing file or folder relative to `base` absolute;
/// everything else (`python3`, flags) passes unchanged.
pub fn resolve_argv(argv: &[String], base: &Path) -> Vec<String> {
    argv.iter()
        .map(|arg| {
            let p = Path::new(arg);
            if !arg.is_empty() && p.is_relative() && !arg.starts_with('-') {
                let full = base.join(p);
                if full.exists() {
                    return full.to_string_lossy().into_owned();
                }
            }
            arg.clone()
        })
        .collect()
}

/// SHA-256 (hex) over every file under `dir`: sorted relative paths, sizes and bytes.
///
/// Names starting with `.`, `__pycache__` folders, `*.pyc` files and run directories (folders
/// holding a `hevo.db`) are skipped, so byte-code caches, editor files and results kept
/// beside the code do not change a candidate's identity.
pub fn content_hash(dir: &Path) -> io::Result<String> {
    let mut files = Vec::new();
    collect_files(dir, dir, &mut files)?;
    files.sort();
    let mut h = Sha256::new();
    for (rel, is_link) in files {
        let bytes = read_for_hash(&dir.join(&rel), is_link)?;
        h.update(rel.to_string_lossy().as_bytes());
        h.update([0]);
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    Ok(hex::encode(h.finalize()))
}

/// A file's bytes for [`content_hash`]. It is opened without blocking and must be a regular
/// file (checked on the open file): a FIFO, socket or device fails instead of hanging or
/// reading without end. A link (in a user's own harness or suite) is followed to a regular
/// file, as before; an entry listed as a regular file is opened with `O_NOFOLLOW`, so a link
/// swapped in after the listing fails.
fn read_for_hash(path: &Path, is_link: bool) -> io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut flags = nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY;
    if !is_link {
        flags |= nix::libc::O_NOFOLLOW;
    }
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "`{}` is not a regular file (a FIFO, socket, device or folder); hevo reads \
                 only regular files",
                path.display()
            ),
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len().min(1 << 20) as usize);
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn collect_files(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, bool)>) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "__pycache__" || name.ends_with(".pyc") {
            continue;
        }
        let ty = entry.file_type()?;
        let path = entry.path();
        if ty.is_dir() {
            if !path.join("hevo.db").exists() {
                collect_files(root, &path, out)?;
            }
        } else if ty.is_file() || ty.is_symlink() {
            if let Ok(rel) = path.strip_prefix(root) {
                out.push((rel.to_path_buf(), ty.is_symlink()));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_defaults_and_resolves_entry() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("harness.toml"),
            "entry = [\"python3\", \"h.py\"]\n[params]\nk = { values = [1, 2], default = 2 }\n",
        )
        .unwrap();
        std::fs::write(d.path().join("h.py"), "print(1)").unwrap();
        let h = Harness::load(d.path()).unwrap();
        assert_eq!(h.params_json(), "{\"k\":2}");
        let argv = h.entry_argv();
        assert_eq!(argv[0], "python3");
        assert!(Path::new(&argv[1]).is_absolute());
        let before = h.code_hash.clone();
        std::fs::create_dir(d.path().join("__pycache__")).unwrap();
        std::fs::write(d.path().join("__pycache__/x.pyc"), "zz").unwrap();
        assert_eq!(content_hash(&h.dir).unwrap(), before);
        std::fs::write(d.path().join("h.py"), "print(2)").unwrap();
        assert_ne!(content_hash(&h.dir).unwrap(), before);
    }

    /// Every manifest error names the line of its key (they named only the file).
    #[test]
    fn manifest_errors_name_the_line_of_their_key() {
        let path = Path::new("h/harness.toml");
        let long_name = format!("entry = [\"x\"]\nname = \"{}\"\n", "n".repeat(65));
        let cases = [
            ("# c\nentry = []\n", 2, "non-empty command"),
            ("entry = [\"x\"]\n\nprepare = []\n", 3, "`prepare` must be"),
            ("entry = [\"x\"]\ntimeout_s = -1\n", 2, "timeout_s"),
            (
                "entry = [\"x\"]\n[params]\na = { values = [1], default = 1 }\n[params.b]\nvalues = [1, 2]\ndefault = 3\n",
                6,
                "default 3 is not one of its values [1,2]",
            ),
            ("entry = [\"x\"]\n[params.c]\nvalues = []\ndefault = 1\n", 2, "has no `values`"),
            // A name past the limit failed only when its run folders were made (exit 1).
            (
                &long_name,
                2,
                "`name` is 65 characters long: a harness's name names its folders in a run, \
                 so give 1 to 64 characters",
            ),
            ("name = \" \"\nentry = [\"x\"]\n", 1, "`name` is empty"),
            (
                "entry = [\"x\"]\n[params]\nk = { values = [2, 2, 6], default = 2 }\n",
                3,
                "[params] `k` lists 2 twice in its values [2,2,6]",
            ),
        ];
        for (text, line, needle) in cases {
            let err = Manifest::parse(text, path).unwrap_err().to_string();
            assert!(
                err.starts_with(&format!("h/harness.toml:{line}: ")) && err.contains(needle),
                "{text:?}: {err}"
            );
        }
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("harness.toml"),
            "# c\n\nentry = [\"no-such-program-x\"]\n",
        )
        .unwrap();
        let err = Harness::load(d.path())
            .unwrap()
            .check_programs()
            .unwrap_err()
            .to_string();
        assert!(err.contains("harness.toml:3: `entry`: program"), "{err}");
    }

    /// A link to `/dev/zero` or to a FIFO in a harness fails the hash at once: before, the
    /// FIFO hung `open` and `/dev/zero` was read until memory ran out.
    #[test]
    fn the_hash_refuses_fifos_and_devices_instead_of_hanging() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("h.py"), "print(1)").unwrap();
        std::fs::write(d.path().join("data.txt"), "lines").unwrap();
        std::os::unix::fs::symlink("data.txt", d.path().join("linked.txt")).unwrap();
        let with_link = content_hash(d.path()).unwrap();
        std::os::unix::fs::symlink("/dev/zero", d.path().join("zero")).unwrap();
        let err = content_hash(d.path()).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        std::fs::remove_file(d.path().join("zero")).unwrap();
        // A FIFO itself is not a file of the harness; a link to one fails.
        let fifo = d.path().join("pipe");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(content_hash(d.path()).unwrap(), with_link);
        std::os::unix::fs::symlink(&fifo, d.path().join("to-pipe")).unwrap();
        let err = content_hash(d.path()).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }

    #[test]
    fn bad_default_is_reported() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("harness.toml"),
            "entry = [\"x\"]\n[params]\nk = { values = [1, 2], default = 3 }\n",
        )
        .unwrap();
        let err = Harness::load(d.path()).unwrap_err().to_string();
        assert!(
            err.contains("harness.toml") && err.contains("default 3"),
            "{err}"
        );
    }

    /// A knob written as a bare value under `[params]` is told the form a knob takes, at
    /// its line, not serde's "expected struct ParamSpec".
    #[test]
    fn a_bare_value_under_params_is_shown_the_form_of_a_knob() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("harness.toml"),
            "entry = [\"x\"]\n[params]\nk = 3\n",
        )
        .unwrap();
        let err = Harness::load(d.path()).unwrap_err().to_string();
        assert!(err.contains("harness.toml:3"), "{err}");
        assert!(err.contains("{ values = [2, 4, 6], default = 2 }"), "{err}");
        assert!(!err.contains("ParamSpec"), "{err}");
    }

    #[test]
    fn missing_manifest_names_the_file() {
        let d = tempfile::tempdir().unwrap();
        let err = Harness::load(d.path()).unwrap_err().to_string();
        assert!(
            err.contains("harness.toml") && err.contains("missing"),
            "{err}"
        );
    }
}
