"""Streams that end badly, read to their end with the official SDKs, one after the other: a
streamed chat completion (`openai`), a streamed message (`anthropic`) and a streamed
response (`openai` Responses API), each asking the upstream for an ending (`MODE:<mode>`).
Prints one JSON line: `streams`, for each stream in order how many events the SDK gave and
the error it raised, if any.
"""
import json

import anthropic
import openai

CASES = [
    ("chat", "break"),
    ("messages", "break"),
    ("messages", "error_event"),
    ("responses", "error_event"),
    ("messages", "no_end"),
    ("chat", "no_end"),
    ("messages", "plain"),
]

oa = openai.OpenAI(max_retries=0)
an = anthropic.Anthropic(max_retries=0)


def events(api, mode):
    prompt = "MODE:%s" % mode
    if api == "chat":
        return oa.chat.completions.create(
            model="gpt-test", stream=True,
            messages=[{"role": "user", "content": prompt}])
    if api == "messages":
        return an.messages.create(
            model="claude-test", max_tokens=100, stream=True,
            messages=[{"role": "user", "content": prompt}])
    return oa.responses.create(model="gpt-test", input=prompt, stream=True)


out = []
for api, mode in CASES:
    seen, error = 0, None
    try:
        for _ in events(api, mode):
            seen += 1
    except Exception as e:  # noqa: BLE001 - what the SDK raises is the point
        error = "%s: %s" % (type(e).__name__, e)
    out.append({"case": "%s %s" % (api, mode), "events": seen, "error": error})
print(json.dumps({"streams": out}))
