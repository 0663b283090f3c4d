"""A harness that takes the first event of a streamed answer and exits at once, while the
rest of the stream is still coming: with the `openai` SDK (a streamed chat completion) or
the `anthropic` SDK (a streamed message), as `HEVO_TEST_SDK` says. `HEVO_TEST_PROMPT` is the
user message (the upstream reads its behaviour from it). Prints one JSON line: the first
event's type.
"""
import json
import os

import anthropic
import openai

sdk = os.environ["HEVO_TEST_SDK"]
prompt = os.environ["HEVO_TEST_PROMPT"]
messages = [{"role": "user", "content": prompt}]

if sdk == "openai":
    stream = openai.OpenAI(max_retries=0).chat.completions.create(
        model="gpt-test", messages=messages, stream=True)
    first = next(iter(stream)).object
else:
    stream = anthropic.Anthropic(max_retries=0).messages.create(
        model="claude-test", max_tokens=100, messages=messages, stream=True)
    first = next(iter(stream)).type

print(json.dumps({"first": first}), flush=True)
# like a harness that is done: no goodbye to the connection
os._exit(0)
