//! The fuzz targets: one function per parser, fed raw bytes, that returns `Err` when the
//! parser broke a promise (an error that does not name its file, a line past the end). A
//! panic inside a parser is a bug of its own. The libFuzzer binaries (`fuzz_targets/`) and
//! the short CI mode (`crates/hevo-cli/tests/fuzz_short.rs`) call exactly these functions.

use std::path::Path;

/// A target: `Err` says which promise its parser broke on the input.
pub type Target = fn(&[u8]) -> Result<(), String>;

/// Every target by its name (the name of its `fuzz_targets/` binary and `corpus/` folder).
pub const TARGETS: &[(&str, Target)] = &[
    ("suite", suite),
    ("harness", harness),
    ("config", config),
    ("gateway", gateway),
    ("matrix", matrix),
];

/// Where the parsers are told their input came from; no file is read or written there.
const SUITE_DIR: &str = "/nonexistent/hevo-fuzz/suite";
const HARNESS_FILE: &str = "/nonexistent/hevo-fuzz/harness/harness.toml";
const CONFIG_FILE: &str = "/nonexistent/hevo-fuzz/hevo.toml";
const MATRIX_FILE: &str = "/nonexistent/hevo-fuzz/matrix.csv";
const COST_FILE: &str = "/nonexistent/hevo-fuzz/matrix.cost.csv";

/// Splits an input at its first NUL byte: the first file and, when there is one, the second.
fn split(data: &[u8]) -> (&[u8], Option<&[u8]>) {
    match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], Some(&data[i + 1..])),
        None => (data, None),
    }
}

/// Checks that a reported 1-based line lies inside `text` (one past its end at most).
fn line_inside(line: u64, text: &[u8], what: &str) -> Result<(), String> {
    let lines = text.iter().filter(|&&b| b == b'\n').count() as u64 + 1;
    if line == 0 || line > lines {
        return Err(format!(
            "{what}: line {line} is outside the input's {lines} lines"
        ));
    }
    Ok(())
}

/// Checks that an error's message names its origin.
fn names(message: &str, origin: &str) -> Result<(), String> {
    if message.contains(origin) {
        Ok(())
    } else {
        Err(format!("the error does not name `{origin}`: {message}"))
    }
}

/// `suite.toml`, a NUL, then `tasks.jsonl` (raw bytes: invalid UTF-8 and BOMs included).
pub fn suite(data: &[u8]) -> Result<(), String> {
    use hevo_runtime::suite::{Suite, SuiteError};
    let (toml, tasks) = split(data);
    let toml = String::from_utf8_lossy(toml);
    let dir = Path::new(SUITE_DIR);
    match Suite::parse(dir, &toml, tasks.unwrap_or_default()) {
        Ok(suite) => {
            if suite.tasks.iter().any(|t| t.id.trim().is_empty()) {
                return Err("a task with an empty id was accepted".into());
            }
            Ok(())
        }
        Err(SuiteError::Invalid { problems, .. }) => {
            if problems.is_empty() {
                return Err("an invalid suite with no problem listed".into());
            }
            for p in &problems {
                names(&p.to_string(), SUITE_DIR)?;
                if p.path.ends_with("tasks.jsonl") {
                    // Only a file without a line holding anything ("has no tasks") may have
                    // a problem without a line.
                    let blank = String::from_utf8_lossy(tasks.unwrap_or_default())
                        .lines()
                        .all(|l| l.trim().is_empty());
                    let line = match p.line {
                        Some(line) => line,
                        None if blank => continue,
                        None => return Err(format!("a tasks.jsonl problem without a line: {p}")),
                    };
                    line_inside(line as u64, tasks.unwrap_or_default(), "tasks.jsonl")?;
                } else if let Some(line) = p.line {
                    line_inside(line as u64, toml.as_bytes(), "suite.toml")?;
                }
            }
            Ok(())
        }
        Err(other) => names(&other.to_string(), SUITE_DIR),
    }
}

/// A `harness.toml`.
pub fn harness(data: &[u8]) -> Result<(), String> {
    use hevo_runtime::harness::{HarnessError, Manifest};
    let text = String::from_utf8_lossy(data);
    match Manifest::parse(&text, Path::new(HARNESS_FILE)) {
        Ok(manifest) => {
            if manifest.entry.iter().all(|e| e.trim().is_empty())
                || manifest.entry[0].trim().is_empty()
            {
                return Err("an empty `entry` was accepted".into());
            }
            Ok(())
        }
        Err(err) => {
            if let HarnessError::Invalid {
                line: Some(line), ..
            } = &err
            {
                line_inside(*line as u64, text.as_bytes(), "harness.toml")?;
            }
            names(&err.to_string(), HARNESS_FILE)
        }
    }
}

/// A `hevo.toml`.
pub fn config(data: &[u8]) -> Result<(), String> {
    use hevo_search::config::{ConfigError, RunConfig};
    let text = String::from_utf8_lossy(data);
    match RunConfig::parse(&text, Path::new(CONFIG_FILE)) {
        Ok(_) => Ok(()),
        Err(err) => {
            if let ConfigError::Parse { location, .. } = &err {
                if let Some(line) = location.split(':').nth(1) {
                    let line = line
                        .parse()
                        .map_err(|_| format!("bad location {location}"))?;
                    line_inside(line, text.as_bytes(), "hevo.toml")?;
                }
            }
            names(&err.to_string(), CONFIG_FILE)
        }
    }
}

/// One byte choosing the dialect (OpenAI chat, Responses, Anthropic messages), then the
/// request body.
pub fn gateway(data: &[u8]) -> Result<(), String> {
    use hevo_llm::Api;
    let Some((&which, body)) = data.split_first() else {
        return Ok(());
    };
    let api = [Api::ChatCompletions, Api::Responses, Api::Messages][which as usize % 3];
    match hevo_llm::translate_request(api, body) {
        Ok(request) => {
            let raw: serde_json::Value = serde_json::from_slice(body)
                .map_err(|e| format!("a body that is not JSON was accepted: {e}"))?;
            if raw.get("model").and_then(|m| m.as_str()) != Some(request.model.as_str()) {
                return Err(format!("the model became `{}`", request.model));
            }
            Ok(())
        }
        Err(message) if message.trim().is_empty() => Err("a refusal with no message".into()),
        Err(_) => Ok(()),
    }
}

/// A replay CSV (`candidate,task,outcome[,cost_usd]`), optionally a NUL and a cost CSV; the
/// first file is also read as a per-attempt (`pass_at_1`) matrix.
pub fn matrix(data: &[u8]) -> Result<(), String> {
    use hevo_strategy::matrix::{Matrix, MatrixError};
    let (main, cost) = split(data);
    let main = String::from_utf8_lossy(main);
    let cost = cost.map(String::from_utf8_lossy);
    let check = |result: Result<Matrix, MatrixError>| -> Result<(), String> {
        match result {
            Ok(m) => {
                let cells = m.outcomes.iter().flatten();
                if m.outcomes.len() != m.candidates.len()
                    || m.outcomes.iter().any(|r| r.len() != m.tasks.len())
                {
                    return Err("a matrix of the wrong shape was accepted".into());
                }
                if cells.clone().any(|v| !(0.0..=1.0).contains(v)) {
                    return Err("an outcome outside [0, 1] was accepted".into());
                }
                Ok(())
            }
            Err(err) => {
                let text = err.to_string();
                if !text.contains(MATRIX_FILE) && !text.contains(COST_FILE) {
                    return Err(format!("the error names neither file: {text}"));
                }
                if let MatrixError::Line { path, line, .. } = &err {
                    let source = if path == COST_FILE {
                        cost.as_deref().unwrap_or_default()
                    } else {
                        main.as_ref()
                    };
                    line_inside(*line, source.as_bytes(), path)?;
                }
                Ok(())
            }
        }
    };
    check(Matrix::parse_csv(
        &main,
        MATRIX_FILE,
        cost.as_deref().map(|c| (c, COST_FILE)),
    ))?;
    check(Matrix::parse_attempts(&main, MATRIX_FILE, 2, 7))
}
