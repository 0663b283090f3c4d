"""Plain requests through hevo's gateway to a backend of their own API, with the official SDKs.

Anthropic: prompt caching (`cache_control` on the system prompt and a user block) with
`anthropic-beta` and a chosen `anthropic-version`, and a `beta.messages` call with `?beta=true`.
OpenAI: a `developer` message with `max_completion_tokens` and an `OpenAI-Beta` header.
Then two deterministic requests of each API, twice. Prints one JSON line of what it saw.
"""
import json

import anthropic
import openai

an = anthropic.Anthropic(max_retries=0)
oa = openai.OpenAI(max_retries=0)
out = {}
system = [{"type": "text", "text": "You are careful. " * 40, "cache_control": {"type": "ephemeral"}}]
question = [{"type": "text", "text": "cached question", "cache_control": {"type": "ephemeral"}}]
m = an.messages.create(
    model="claude-test", max_tokens=50, system=system,
    messages=[{"role": "user", "content": question}],
    extra_headers={"anthropic-beta": "context-1m-2025-08-07", "anthropic-version": "2023-01-01"})
out["cache_creation"] = m.usage.cache_creation_input_tokens
out["message_id"] = m.id
# `?beta=true` as Claude Code sends it (this SDK marks beta calls without a query)
beta = an.beta.messages.create(model="claude-test", max_tokens=10, betas=["x-beta-1"],
                               messages=[{"role": "user", "content": "beta"}],
                               extra_query={"beta": "true"})
out["beta_text"] = beta.content[0].text
chat = oa.chat.completions.create(
    model="gpt-test", max_completion_tokens=64,
    messages=[{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "dev"}],
    extra_headers={"OpenAI-Beta": "x-openai-beta"})
out["chat_text"] = chat.choices[0].message.content
out["chat_id"] = chat.id
out["chat_cached"], out["message_cached"] = [], []
for _ in range(2):
    c = oa.chat.completions.create(model="gpt-test", temperature=0, max_completion_tokens=20,
                                   messages=[{"role": "user", "content": "same"}])
    out["chat_cached"].append([c.choices[0].message.content, c.usage.prompt_tokens])
    a = an.messages.create(model="claude-test", max_tokens=20, extra_body={"temperature": 0},
                           messages=[{"role": "user", "content": "same"}])
    out["message_cached"].append([a.content[0].text, a.stop_reason, a.usage.input_tokens])
print(json.dumps(out))
