"""The query string of every OpenAI endpoint through hevo's gateway, with the official SDK
(`extra_query`, as Azure-style `api-version` clients send it). Prints one JSON line."""
import json

import openai

oa = openai.OpenAI(max_retries=0)
query = {"api-version": "2024-10-21"}
user = [{"role": "user", "content": "q"}]
tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
out = {
    "plain": oa.chat.completions.create(model="gpt-test", messages=user,
                                        extra_query=query).choices[0].message.content,
    "tools": oa.chat.completions.create(model="gpt-test", messages=user, tools=[tool],
                                        extra_query=query).choices[0].finish_reason,
    "responses": oa.responses.create(model="gpt-test", input="q",
                                     extra_query=query).output_text,
    "embeddings": len(oa.embeddings.create(model="embed-test", input="q",
                                           extra_query=query).data),
}
print(json.dumps(out))
