"""A tool-using harness written with the official `openai` SDK, run through hevo's gateway.

Chat completions streamed with a tool, the tool's result sent back as `role: "tool"`, the
final answer without streaming; then the Responses API streamed with the same tool; then
embeddings. The tool writes a file; prints one JSON line of what it saw.
"""
import json
import sys

import openai

TOOL = {"type": "function", "function": {
    "name": "write_file", "description": "Write a file.",
    "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"]}}}


def write_file(arguments):
    args = json.loads(arguments)
    with open(args["path"], "w") as f:
        f.write(args["content"])
    return "ok"


client = openai.OpenAI(max_retries=0)
out = {"sdk": openai.__version__}

messages = [{"role": "system", "content": "You write files."},
            {"role": "user", "content": "Write the file."}]
stream = client.chat.completions.create(
    model="gpt-test", messages=messages, tools=[TOOL], tool_choice="auto", stream=True,
    temperature=0)
calls, finish, models = {}, None, set()
for chunk in stream:
    models.add(chunk.model)
    if not chunk.choices:
        continue
    choice = chunk.choices[0]
    for tc in choice.delta.tool_calls or []:
        entry = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
        entry["id"] = tc.id or entry["id"]
        if tc.function and tc.function.name:
            entry["name"] += tc.function.name
        if tc.function and tc.function.arguments:
            entry["arguments"] += tc.function.arguments
    finish = choice.finish_reason or finish
out["chat_finish"] = finish
out["chat_models"] = sorted(models)
call = calls[0]
result = write_file(call["arguments"])
messages.append({"role": "assistant", "content": None, "tool_calls": [{
    "id": call["id"], "type": "function",
    "function": {"name": call["name"], "arguments": call["arguments"]}}]})
messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
final = client.chat.completions.create(model="gpt-test", messages=messages, tools=[TOOL])
out["chat_final"] = final.choices[0].message.content
out["chat_final_finish"] = final.choices[0].finish_reason

rtool = {"type": "function", "name": "write_file", "description": "Write a file.",
         "parameters": TOOL["function"]["parameters"]}
events = []
fc = None
with client.responses.stream(model="gpt-test", input="Write the file.", tools=[rtool]) as s:
    for event in s:
        events.append(event.type)
    response = s.get_final_response()
for item in response.output:
    if item.type == "function_call":
        fc = item
out["responses_events"] = events
out["responses_call"] = fc.name if fc else None
write_file(fc.arguments)
followup = client.responses.create(model="gpt-test", tools=[rtool], input=[
    {"role": "user", "content": "Write the file."},
    {"type": "function_call", "call_id": fc.call_id, "name": fc.name, "arguments": fc.arguments},
    {"type": "function_call_output", "call_id": fc.call_id, "output": "ok"}])
out["responses_final"] = followup.output_text
out["responses_usage"] = followup.usage.input_tokens

emb = client.embeddings.create(model="embed-test", input=["a", "b"])
out["embeddings"] = len(emb.data)
print(json.dumps(out))
