//! The response cache: deterministic requests (temperature 0 or a fixed seed) answered once and
//! replayed from disk afterwards, across trials and across runs.
//!
//! Entries are content-addressed: the key is the SHA-256 of the canonical JSON (sorted keys, no
//! whitespace) of the backend's identity (`Backend::cache_identity`: an upstream's URL, the local
//! model's file and evaluation), model, messages and every sampling parameter. Each entry is
//! one JSON file `<dir>/<first two hex digits>/<key>.json`, written atomically (temp file +
//! rename), so concurrent runs can share one directory.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::LlmError;
use crate::types::{ChatRequest, ChatResponse};

/// An on-disk, content-addressed cache of chat responses.
#[derive(Debug, Clone)]
pub struct ResponseCache {
    dir: PathBuf,
}

impl ResponseCache {
    /// Opens (creating if needed) a cache in `dir`.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, LlmError> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(|e| LlmError::io(&dir, e))?;
        Ok(Self { dir })
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The content address of `request` sent to the backend whose cache identity is
    /// `backend`.
    pub fn key(backend: &str, request: &ChatRequest) -> String {
        let mut value = serde_json::to_value(request).expect("a request serializes");
        if let Value::Object(map) = &mut value {
            map.insert("backend".into(), Value::String(backend.to_owned()));
        }
        let mut canonical = String::new();
        write_canonical(&value, &mut canonical);
        hex::encode(Sha256::digest(canonical.as_bytes()))
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(&key[..2]).join(format!("{key}.json"))
    }

    /// The stored response for `key`, if any (an unreadable entry counts as a miss).
    pub fn get(&self, key: &str) -> Option<ChatResponse> {
        let bytes = std::fs::read(self.path(key)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Stores `response` under `key`.
    pub fn put(&self, key: &str, response: &ChatResponse) -> Result<(), LlmError> {
        let path = self.path(key);
        let parent = path.parent().expect("entry has a parent");
        std::fs::create_dir_all(parent).map_err(|e| LlmError::io(parent, e))?;
        let tmp = parent.join(format!(".{key}.{}.tmp", std::process::id()));
        let bytes = serde_json::to_vec(response).expect("a response serializes");
        std::fs::write(&tmp, bytes).map_err(|e| LlmError::io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| LlmError::io(&path, e))
    }
}

/// Writes `value` as JSON with object keys sorted and no whitespace.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{ChatMessage, FinishReason, Usage};

    fn request(temperature: f32) -> ChatRequest {
        let mut r = ChatRequest::new("m", vec![ChatMessage::new("user", "hi")]);
        r.temperature = Some(temperature);
        r
    }

    #[test]
    fn key_depends_on_every_parameter() {
        let a = ResponseCache::key("b", &request(0.0));
        assert_eq!(a, ResponseCache::key("b", &request(0.0)));
        assert_ne!(a, ResponseCache::key("b", &request(0.5)));
        assert_ne!(a, ResponseCache::key("other", &request(0.0)));
        let mut r = request(0.0);
        r.max_tokens = Some(3);
        assert_ne!(a, ResponseCache::key("b", &r));
        // Who asks is not part of the request: another trial's same request is a hit.
        let mut r = request(0.0);
        r.caller = "run/c3/0/task".into();
        assert_eq!(a, ResponseCache::key("b", &r));
    }

    #[test]
    fn put_then_get_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ResponseCache::open(dir.path()).unwrap();
        let key = ResponseCache::key("b", &request(0.0));
        assert!(cache.get(&key).is_none());
        let response = ChatResponse {
            model: "m".into(),
            content: "hello".into(),
            finish_reason: FinishReason::Stop,
            usage: Usage {
                prompt_tokens: 3,
                cached_tokens: 1,
                output_tokens: 2,
                ..Usage::default()
            },
            logprobs: None,
            stop_sequence: None,
        };
        cache.put(&key, &response).unwrap();
        assert_eq!(cache.get(&key), Some(response));
    }
}
