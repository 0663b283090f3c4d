"""Calls through hevo's gateway with the official SDKs, one after another, as a harness makes
them, and reports what each call gave the harness.

`HEVO_TEST_CALLS` is a JSON list of calls: {"sdk": "openai" | "anthropic", "model": ...,
"stream": bool, "tools": bool}. The SDKs do not retry (`max_retries=0`), so every call is one
request to the gateway. Prints one JSON line: a list with, per call, {"ok": true, "text": ...}
or {"ok": false, "error": the SDK's exception class, "status": HTTP status, "message": ...}.
"""
import json
import os

import anthropic
import openai

openai_client = openai.OpenAI(max_retries=0, timeout=120)
anthropic_client = anthropic.Anthropic(max_retries=0, timeout=120)

OPENAI_TOOL = {"type": "function", "function": {
    "name": "f", "parameters": {"type": "object", "properties": {}}}}
ANTHROPIC_TOOL = {"name": "f", "input_schema": {"type": "object", "properties": {}}}
PROMPT = "say the words"


def openai_call(call):
    extra = {"tools": [OPENAI_TOOL]} if call.get("tools") else {}
    messages = [{"role": "user", "content": PROMPT}]
    if not call.get("stream"):
        r = openai_client.chat.completions.create(
            model=call["model"], messages=messages, **extra)
        return r.choices[0].message.content
    text = ""
    for chunk in openai_client.chat.completions.create(
            model=call["model"], messages=messages, stream=True, **extra):
        for choice in chunk.choices:
            text += choice.delta.content or ""
    return text


def anthropic_call(call):
    extra = {"tools": [ANTHROPIC_TOOL]} if call.get("tools") else {}
    messages = [{"role": "user", "content": PROMPT}]
    if not call.get("stream"):
        r = anthropic_client.messages.create(
            model=call["model"], max_tokens=1000, messages=messages, **extra)
        return "".join(b.text for b in r.content if b.type == "text")
    with anthropic_client.messages.stream(
            model=call["model"], max_tokens=1000, messages=messages, **extra) as stream:
        return "".join(stream.text_stream)


def run(call):
    try:
        if call["sdk"] == "openai":
            return {"ok": True, "text": openai_call(call)}
        return {"ok": True, "text": anthropic_call(call)}
    except Exception as e:  # noqa: BLE001 - reported, the test judges it
        return {"ok": False, "error": type(e).__name__,
                "status": getattr(e, "status_code", None), "message": str(e)[:600]}


print(json.dumps([run(c) for c in json.loads(os.environ["HEVO_TEST_CALLS"])]))
