"""A tool-using harness written with the official `anthropic` SDK, run through hevo's gateway.

Messages streamed with a tool and thinking (tool_use arrives as input_json_delta), the
tool_result sent back (with the thinking block), the final answer without streaming, a
count_tokens call and a plain call with `temperature` (through `extra_body`: 2.x has no such
argument). The tool writes a file; prints one JSON line of what it saw.
"""
import json

import anthropic

TOOL = {"name": "write_file", "description": "Write a file.", "input_schema": {
    "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"]}}

client = anthropic.Anthropic(max_retries=0)
out = {"sdk": anthropic.__version__}
messages = [{"role": "user", "content": "Write the file."}]
system = [{"type": "text", "text": "You write files.", "cache_control": {"type": "ephemeral"}}]
deltas = []
with client.messages.stream(
        model="claude-test", max_tokens=2000, system=system, messages=messages, tools=[TOOL],
        tool_choice={"type": "auto"}, thinking={"type": "enabled", "budget_tokens": 1024},
        extra_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"}) as stream:
    for event in stream:
        if event.type == "content_block_delta":
            deltas.append(event.delta.type)
    message = stream.get_final_message()
out["stream_deltas"] = sorted(set(deltas))
out["stop_reason"] = message.stop_reason
out["model"] = message.model
use = next(b for b in message.content if b.type == "tool_use")
with open(use.input["path"], "w") as f:
    f.write(use.input["content"])
messages.append({"role": "assistant", "content": [b.model_dump() for b in message.content]})
messages.append({"role": "user", "content": [
    {"type": "tool_result", "tool_use_id": use.id, "content": "ok"}]})
final = client.messages.create(model="claude-test", max_tokens=2000, system=system,
                               messages=messages, tools=[TOOL],
                               thinking={"type": "enabled", "budget_tokens": 1024})
out["final_text"] = "".join(b.text for b in final.content if b.type == "text")
out["final_stop"] = final.stop_reason
count = client.messages.count_tokens(model="claude-test", messages=messages, tools=[TOOL])
out["count_tokens"] = count.input_tokens
plain = client.messages.create(model="claude-test", max_tokens=50,
                               extra_body={"temperature": 0}, messages=[{"role": "user", "content": "hi"}])
out["plain"] = plain.content[0].text
print(json.dumps(out))
