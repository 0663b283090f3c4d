"""A stop sequence through hevo's gateway, with the official SDKs: the same deterministic
Anthropic request twice (the second from the response cache), and the OpenAI dialect to the
same Anthropic backend. Prints one JSON line of what it saw."""
import json

import anthropic
import openai

an = anthropic.Anthropic(max_retries=0)
oa = openai.OpenAI(max_retries=0)
out = {"messages": []}
for _ in range(2):
    m = an.messages.create(model="claude-test", max_tokens=20, stop_sequences=["END"],
                           extra_body={"temperature": 0},
                           messages=[{"role": "user", "content": "before END after"}])
    out["messages"].append([m.content[0].text, m.stop_reason, m.stop_sequence])
c = oa.chat.completions.create(model="claude-test", stop=["END"], max_tokens=20,
                               messages=[{"role": "user", "content": "before END after"}])
out["chat"] = [c.choices[0].message.content, c.choices[0].finish_reason]
print(json.dumps(out))
