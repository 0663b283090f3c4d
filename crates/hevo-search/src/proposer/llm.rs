//! The `llm` proposer: one model call through the gateway that returns a whole new harness
//! file, for users without a coding-agent CLI.
//!
//! The prompt shows the best harnesses so far (their manifest and entry file), their
//! validation estimates, and sampled failures: the inputs of tasks the best harness got
//! wrong and the model calls it made on them (from its traces). It never shows an expected
//! answer or anything of the test split. The reply must hold the complete new entry file in
//! one fenced code block and a line `HYPOTHESIS: ...`; the candidate is the parent's
//! directory with that file replaced. A reply without a code block writes nothing (the
//! iteration then has no candidate from this call, and the reason is logged).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::archive::{Candidate, CandidateMeta};
use crate::proposer::{ProposeContext, ProposeError, Proposer};
use hevo_runtime::model_access::ModelEnv;
use hevo_stats::estimate::Estimate;

/// Most bytes of one file shown in the prompt.
const FILE_BYTES: usize = 12_000;
/// Failing tasks sampled per call.
const FAILURES: usize = 3;

/// The `llm` proposer.
pub struct LlmProposer {
    /// The model name sent in requests (a route of the gateway).
    pub model: String,
    /// Where the gateway is and the key for the proposer's calls.
    pub model_env: ModelEnv,
    /// The run directory (to find trial traces in its store).
    pub run_dir: PathBuf,
    /// Time limit of one call.
    pub timeout: Duration,
    /// Most tokens of the reply.
    pub max_tokens: u32,
}

impl Proposer for LlmProposer {
    fn deterministic(&self) -> bool {
        false
    }

    fn propose(&mut self, ctx: &ProposeContext<'_>) -> Result<(), ProposeError> {
        let mut ranked: Vec<&(Candidate, Estimate)> = ctx
            .history
            .iter()
            .filter(|(_, e)| e.value.is_finite())
            .collect();
        ranked.sort_by(|a, b| b.1.value.total_cmp(&a.1.value));
        let Some((best, _)) = ranked.first().copied() else {
            return Err("no evaluated candidate to start from".into());
        };
        let entry = entry_file(&best.code()).ok_or("the best candidate's entry names no file")?;
        let mut written = 0;
        for j in 0..ctx.k {
            let prompt = self.prompt(&ranked, best, &entry, j);
            let reply = self.call(&prompt)?;
            let Some(code) = code_block(&reply) else {
                continue;
            };
            let hypothesis = reply
                .lines()
                .find_map(|l| l.trim().strip_prefix("HYPOTHESIS:"))
                .map(|h| h.trim().to_string())
                .unwrap_or_else(|| "model rewrite of the best harness".into());
            let name = format!(
                "{}.llm{}c{}",
                best.meta.name.split(".llm").next().unwrap_or("h"),
                ctx.iteration,
                j
            );
            let dest = ctx.archive.pending_dir().join(&name);
            crate::archive::copy_dir(&best.code(), &dest).map_err(|e| e.to_string())?;
            std::fs::write(dest.join(&entry), code).map_err(|e| e.to_string())?;
            let meta = CandidateMeta {
                name: name.clone(),
                parent: Some(best.meta.name.clone()),
                iteration: ctx.iteration,
                hypothesis,
                axis: "exploitation".into(),
                components: vec!["code".into()],
            };
            let toml = toml::to_string(&meta).map_err(|e| e.to_string())?;
            std::fs::write(dest.join("candidate.toml"), toml).map_err(|e| e.to_string())?;
            written += 1;
        }
        if written == 0 {
            return Err("the model's replies held no fenced code block".into());
        }
        Ok(())
    }
}

impl LlmProposer {
    fn prompt(
        &self,
        ranked: &[&(Candidate, Estimate)],
        best: &Candidate,
        entry: &str,
        j: u32,
    ) -> String {
        let mut p = String::from(
            "You improve an LLM harness: the program around a frozen language model that decides \
             what the model sees and how its output becomes an answer. It reads one task's input \
             as JSON on stdin and prints {\"answer\": ...} as the last stdout line; it calls the \
             model through OPENAI_BASE_URL / OPENAI_API_KEY; its [params] arrive in HEVO_PARAMS.\n\
             Rules: generalize (no task-specific hints, no dataset or benchmark names in code); \
             keep the same input and output format; standard library only unless the harness \
             already imports more.\n\n## Scores so far (validation estimates, 95% intervals)\n",
        );
        for (c, e) in ranked.iter().take(5) {
            p += &format!(
                "- {}: {:.3} [{:.3}, {:.3}] — {}\n",
                c.meta.name, e.value, e.ci_low, e.ci_high, c.meta.hypothesis
            );
        }
        p += &format!(
            "\n## The best harness: {}\n\n### harness.toml\n```toml\n",
            best.meta.name
        );
        p += &read_capped(&best.code().join("harness.toml"));
        p += &format!("```\n\n### {entry}\n```\n");
        p += &read_capped(&best.code().join(entry));
        p += "```\n\n## Tasks it got wrong (inputs and its model calls; answers are not shown)\n";
        for (task, detail) in self
            .failures(best)
            .into_iter()
            .skip(j as usize % 2)
            .take(FAILURES)
        {
            p += &format!("\n### task {task}\n{detail}\n");
        }
        p += &format!(
            "\nWrite an improved, complete `{entry}`. Reply with one line `HYPOTHESIS: <what you \
             changed and why it should help>`, then the whole file in one fenced code block.\n"
        );
        p
    }

    /// Failing tasks of `c` with what its traces show (the input it sent the model and the
    /// model's reply), from the run's store and trace files.
    fn failures(&self, c: &Candidate) -> Vec<(String, String)> {
        let scores: Value = std::fs::read(c.dir.join("scores.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null);
        let failing: Vec<String> = scores["outcomes"]
            .as_object()
            .map(|o| {
                o.iter()
                    .filter(|(_, v)| v.as_f64().unwrap_or(1.0) < 1.0)
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default();
        let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let code = canonical(&c.code());
        let run_dir = canonical(&self.run_dir);
        let Ok(code) = code.strip_prefix(&run_dir) else {
            return Vec::new();
        };
        let id = hevo_runtime::store::Store::open_read_only(&run_dir.join("hevo.db"))
            .ok()
            .and_then(|db| db.candidate_at(&code.to_string_lossy()).ok().flatten());
        let Some(id) = id else { return Vec::new() };
        failing
            .into_iter()
            .map(|task| {
                let dir = self
                    .run_dir
                    .join("traces")
                    .join(format!("c{id}"))
                    .join(hevo_runtime::eval::sanitize(&task));
                let calls = read_capped(&dir.join("0").join("model_calls.jsonl"));
                let stdout = read_capped(&dir.join("0.stdout"));
                let detail = format!(
                    "model calls:\n```\n{}```\nstdout:\n```\n{}```",
                    tail(&calls, 3000),
                    tail(&stdout, 1000)
                );
                (task, detail)
            })
            .collect()
    }

    fn call(&self, prompt: &str) -> Result<String, String> {
        let body = json!({
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0.7,
            "max_tokens": self.max_tokens,
        });
        let url = format!(
            "{}/chat/completions",
            self.model_env.openai_base_url.trim_end_matches('/')
        );
        hevo_runtime::rt::block_on(async {
            let client = reqwest::Client::builder()
                .timeout(self.timeout)
                .build()
                .map_err(|e| e.to_string())?;
            let resp = client
                .post(&url)
                .bearer_auth(&self.model_env.openai_api_key)
                .json(&body)
                .send()
                .await
                .map_err(|e| format!("the model call failed: {e}"))?;
            let status = resp.status();
            let v: Value = resp
                .json()
                .await
                .map_err(|e| format!("the model's reply is not JSON: {e}"))?;
            if !status.is_success() {
                return Err(format!("the model call failed with HTTP {status}: {v}"));
            }
            v["choices"][0]["message"]["content"]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("the model's reply has no message: {v}"))
        })
    }
}

/// The file the entry runs (the first argument that names a file in the directory).
pub fn entry_file(code: &Path) -> Option<String> {
    let harness = hevo_runtime::harness::Harness::load(code).ok()?;
    harness
        .manifest
        .entry
        .iter()
        .find(|a| code.join(a).is_file())
        .cloned()
}

/// The contents of the first fenced code block of a reply.
pub fn code_block(reply: &str) -> Option<String> {
    let start = reply.find("```")?;
    let after = &reply[start + 3..];
    let body_start = after.find('\n')? + 1;
    let body = &after[body_start..];
    let end = body.find("```")?;
    let code = &body[..end];
    (!code.trim().is_empty()).then(|| code.to_string())
}

fn read_capped(path: &Path) -> String {
    let mut s = std::fs::read_to_string(path).unwrap_or_default();
    if s.len() > FILE_BYTES {
        let mut cut = FILE_BYTES;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("\n[... cut ...]\n");
    }
    if !s.ends_with('\n') {
        s.push('\n');
    }
    s
}

fn tail(s: &str, n: usize) -> &str {
    if s.len() <= n {
        return s;
    }
    let mut start = s.len() - n;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_code_block_is_extracted() {
        let reply = "HYPOTHESIS: shorter prompt\n```python\nprint(1)\n```\nmore\n```\nx\n```";
        assert_eq!(code_block(reply).as_deref(), Some("print(1)\n"));
        assert_eq!(code_block("no code here"), None);
        assert_eq!(code_block("```python\n\n```"), None);
    }

    #[test]
    fn the_entry_file_is_the_argument_that_exists() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join("harness.toml"),
            "entry = [\"python3\", \"-u\", \"h.py\"]\n",
        )
        .unwrap();
        std::fs::write(tmp.path().join("h.py"), "").unwrap();
        assert_eq!(entry_file(tmp.path()).as_deref(), Some("h.py"));
    }
}
