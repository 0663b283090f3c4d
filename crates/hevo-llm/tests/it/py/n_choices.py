"""`n: 2` through hevo's gateway with the official `openai` SDK: plain and streamed to an
`openai` backend, then to an `anthropic` backend, which cannot carry it. Prints one JSON
line of what it saw."""
import json

import openai

oa = openai.OpenAI(max_retries=0)
user = [{"role": "user", "content": "two"}]
out = {}
plain = oa.chat.completions.create(model="gpt-test", n=2, max_tokens=5, messages=user)
out["plain"] = [c.message.content for c in plain.choices]
indices = set()
for chunk in oa.chat.completions.create(model="gpt-test", n=2, messages=user, stream=True):
    indices.update(c.index for c in chunk.choices)
out["stream_indices"] = sorted(indices)
try:
    oa.chat.completions.create(model="claude-test", n=2, max_tokens=5, messages=user)
except openai.BadRequestError as e:
    out["refused"] = e.message
print(json.dumps(out))
