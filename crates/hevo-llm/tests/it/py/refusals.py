"""Refusals the gateway answers before a request is a model call, with the official SDKs: a
body over the gateway's limit, and a served path called with GET. Prints one JSON line of
each error's class, status, body and `Allow` header."""
import json

import anthropic
import openai

oa = openai.OpenAI(max_retries=0)
an = anthropic.Anthropic(max_retries=0)
big = [{"role": "user", "content": "x" * 100_000}]
calls = {
    "openai_too_large": lambda: oa.chat.completions.create(model="gpt-test", messages=big),
    "anthropic_too_large": lambda: an.messages.create(model="claude-test", max_tokens=5,
                                                      messages=big),
    "openai_get": lambda: oa.get("/chat/completions", cast_to=object),
    "anthropic_get": lambda: an.get("/v1/messages", cast_to=object),
}
out = {}
for name, call in calls.items():
    try:
        call()
        out[name] = "answered"
    except (openai.APIStatusError, anthropic.APIStatusError) as e:
        out[name] = {"class": type(e).__name__, "status": e.status_code, "body": e.body,
                     "allow": e.response.headers.get("allow")}
print(json.dumps(out))
