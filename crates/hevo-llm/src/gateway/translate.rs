//! Strict translation: [`translate_request`], a request body as the gateway would translate
//! it, and the helpers every dialect's parser uses. A request becomes a [`ChatRequest`] only
//! when every field it sets is carried exactly; anything else is a
//! [`Refusal::Unsupported`], never silently dropped.

use serde_json::{Map, Value};

#[cfg(doc)]
use crate::types::ChatRequest;

use super::{anthropic_api, openai_api, responses_api, Refusal};

/// Translates a request body of `api` into the provider-neutral [`ChatRequest`] the
/// gateway answers from a non-forwarding backend, with the checks its handlers make before
/// any backend is asked (valid JSON, a string `model`, the dialect's fields). The error is
/// the message the 400 would carry. Embeddings and token counting are never translated.
pub fn translate_request(
    api: crate::backend::Api,
    body: &[u8],
) -> Result<crate::types::ChatRequest, String> {
    use crate::backend::Api;
    let raw: Value =
        serde_json::from_slice(body).map_err(|e| format!("request body is not valid JSON: {e}"))?;
    if raw.get("model").and_then(Value::as_str).is_none() {
        return Err("model: a string `model` is required".into());
    }
    let translated = match api {
        Api::ChatCompletions => openai_api::parse(&raw).map(|(request, _)| request),
        Api::Responses => responses_api::parse(&raw).map(|(request, _)| request),
        Api::Messages => anthropic_api::parse(&raw).map(|(request, _)| request),
        Api::Embeddings | Api::CountTokens => {
            return Err(format!("`{}` is forwarded, never translated", api.path()))
        }
    };
    translated.map_err(|refusal| match refusal {
        Refusal::Invalid(message) | Refusal::Unsupported(message) => message,
    })
}

/// True for a field that says nothing: `null` or an empty array.
pub(crate) fn absent(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.is_empty(),
        _ => false,
    }
}

/// Fails on the first field of `object` that is set and neither in `known` nor accepted by
/// `also` (which sees the key and the value).
pub(crate) fn check_fields(
    object: &Map<String, Value>,
    known: &[&str],
    also: impl Fn(&str, &Value) -> bool,
    what: &str,
) -> Result<(), Refusal> {
    for (key, value) in object {
        if absent(value) || known.contains(&key.as_str()) || also(key, value) {
            continue;
        }
        return Err(Refusal::Unsupported(format!("{what}`{key}`")));
    }
    Ok(())
}

/// The text of a message `content`: a string, or an array of text parts (`{"type": "text"}`,
/// or `input_text` / `output_text` in the Responses API). A part's `cache_control` is a
/// caching hint and carries nothing; any other kind of part is
/// [`Refusal::Unsupported`]. `what` names the field in messages.
pub(crate) fn content_text(value: &Value, what: &str) -> Result<String, Refusal> {
    match value {
        Value::Null => Ok(String::new()),
        Value::String(text) => Ok(text.clone()),
        Value::Array(parts) => {
            let mut out = String::new();
            for (i, part) in parts.iter().enumerate() {
                let Some(object) = part.as_object() else {
                    return Err(Refusal::Invalid(format!(
                        "{what}[{i}]: a content part must be an object"
                    )));
                };
                match object.get("type").and_then(Value::as_str) {
                    Some("text" | "input_text" | "output_text") => {}
                    Some(kind) => {
                        return Err(Refusal::Unsupported(format!(
                            "content parts of type `{kind}` ({what}[{i}])"
                        )))
                    }
                    None => {
                        return Err(Refusal::Invalid(format!(
                            "{what}[{i}]: a content part needs a `type`"
                        )))
                    }
                }
                let Some(Value::String(text)) = object.get("text") else {
                    return Err(Refusal::Invalid(format!(
                        "{what}[{i}]: a text part needs a string `text`"
                    )));
                };
                check_fields(
                    object,
                    &["type", "text", "cache_control", "annotations", "logprobs"],
                    |_, _| false,
                    &format!("{what}[{i}]."),
                )?;
                out.push_str(text);
            }
            Ok(out)
        }
        other => Err(Refusal::Invalid(format!(
            "{what} must be a string or an array of text parts, got {}",
            match other {
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                _ => "an object",
            }
        ))),
    }
}

/// Reads an optional field with serde, naming it when its type is wrong.
pub(crate) fn field<T: serde::de::DeserializeOwned>(
    object: &Map<String, Value>,
    key: &str,
) -> Result<Option<T>, Refusal> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => serde_json::from_value(value.clone())
            .map(Some)
            .map_err(|e| Refusal::Invalid(format!("`{key}`: {e}"))),
    }
}
