"""A harness whose SDK gives up on its calls: `HEVO_TEST_CALLS` calls one after the other,
each with a timeout of `HEVO_TEST_TIMEOUT` seconds and no retries, while the upstream holds
its answers (`MODE:hold`). `HEVO_TEST_KIND` says which call:

- `translated`: a plain chat completion (`openai` SDK), answered by translation;
- `forwarded`: an Anthropic message with a tool (`anthropic` SDK), forwarded;
- `stream`: a streamed chat completion (`openai` SDK), forwarded; its headers are held;
- `across`: a plain Anthropic message (`anthropic` SDK) to `gpt-test`, translated into a
  chat completion for its `openai` backend.

Prints one JSON line: how many calls timed out, were refused with 429 (the SDK's
RateLimitError), or failed otherwise (with the first such error).
"""
import json
import os

import anthropic
import openai

kind = os.environ["HEVO_TEST_KIND"]
calls = int(os.environ["HEVO_TEST_CALLS"])
timeout = float(os.environ["HEVO_TEST_TIMEOUT"])
TOOL = {"name": "f", "description": "A tool.",
        "input_schema": {"type": "object", "properties": {}}}


def call(i):
    prompt = [{"role": "user", "content": "MODE:hold call %d" % i}]
    if kind == "translated":
        client = openai.OpenAI(timeout=timeout, max_retries=0)
        client.chat.completions.create(model="gpt-test", messages=prompt, max_tokens=50)
    elif kind == "forwarded":
        client = anthropic.Anthropic(timeout=timeout, max_retries=0)
        client.messages.create(model="claude-test", max_tokens=50, messages=prompt,
                               tools=[TOOL])
    elif kind == "across":
        client = anthropic.Anthropic(timeout=timeout, max_retries=0)
        client.messages.create(model="gpt-test", max_tokens=50, messages=prompt)
    else:
        client = openai.OpenAI(timeout=timeout, max_retries=0)
        for _ in client.chat.completions.create(model="gpt-test", messages=prompt,
                                                max_tokens=50, stream=True):
            pass


out = {"timeout": 0, "refused": 0, "other": 0, "error": None}
for i in range(calls):
    try:
        call(i)
        out["other"] += 1
        out["error"] = out["error"] or "answered"
    except (openai.APITimeoutError, anthropic.APITimeoutError):
        out["timeout"] += 1
    except (openai.RateLimitError, anthropic.RateLimitError):
        out["refused"] += 1
    except Exception as e:  # noqa: BLE001 - reported, the test fails on it
        out["other"] += 1
        out["error"] = out["error"] or "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
