"""A scripted provider for hevo's CLI tests: Anthropic messages and OpenAI Responses.

Plays one agent turn by reading the request: while the history has no tool result and the
agent offers its shell tool (Claude Code's `Bash`, Codex's `exec_command`), it calls that
tool with the command given as argv[1]; afterwards it answers with final text. Streams
when asked. A request whose body contains `MODE:hold` is never answered: the upstream holds
it until it is stopped. Prints its port on the first line of stdout; appends each request's
path to argv[2], one per line, as it arrives.

    python3 scripted_upstream.py COMMAND LOG
"""
import http.server
import json
import sys
import threading

COMMAND, LOG = sys.argv[1], sys.argv[2]


def sse(events):
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)


def messages(body):
    done = any(isinstance(m.get("content"), list)
               and any(b.get("type") == "tool_result" for b in m["content"])
               for m in body.get("messages", []))
    tools = [t.get("name") for t in body.get("tools", [])]
    usage = {"input_tokens": len(json.dumps(body)) // 4, "output_tokens": 9}
    if not done and "Bash" in tools:
        block = {"type": "tool_use", "id": "toolu_1", "name": "Bash",
                 "input": {"command": COMMAND, "description": "write a candidate"}}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": "Wrote the candidate."}
        stop = "end_turn"
    message = {"id": "msg_1", "type": "message", "role": "assistant",
               "model": body.get("model", "") + "-answered", "content": [block],
               "stop_reason": stop, "stop_sequence": None, "usage": usage}
    if not body.get("stream"):
        return "application/json", json.dumps(message)
    start = dict(message, content=[], stop_reason=None)
    if block["type"] == "tool_use":
        first = dict(block, input={})
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    else:
        first = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    return "text/event-stream", sse([
        ("message_start", {"type": "message_start", "message": start}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": first}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": stop, "stop_sequence": None},
                           "usage": {"output_tokens": 9}}),
        ("message_stop", {"type": "message_stop"}),
    ])


def responses(body):
    items = body.get("input") if isinstance(body.get("input"), list) else []
    done = any(i.get("type") == "function_call_output" for i in items)
    tools = [t.get("name") for t in body.get("tools", [])]
    if not done and "exec_command" in tools:
        item = {"type": "function_call", "id": "fc_1", "call_id": "call_1",
                "name": "exec_command", "arguments": json.dumps({"cmd": COMMAND}),
                "status": "completed"}
    else:
        item = {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": "Wrote the candidate.",
                             "annotations": []}]}
    n = len(json.dumps(body)) // 4
    response = {"id": "resp_1", "object": "response", "status": "completed",
                "model": body.get("model", "") + "-answered", "output": [item],
                "usage": {"input_tokens": n, "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens": 9, "total_tokens": n + 9}}
    events = [("response.created", {"type": "response.created",
                                    "response": dict(response, status="in_progress",
                                                     output=[], usage=None)}),
              ("response.output_item.added", {"type": "response.output_item.added",
                                              "output_index": 0, "item": item}),
              ("response.output_item.done", {"type": "response.output_item.done",
                                             "output_index": 0, "item": item}),
              ("response.completed", {"type": "response.completed", "response": response})]
    for seq, (_, data) in enumerate(events):
        data["sequence_number"] = seq
    return "text/event-stream", sse(events)


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.loads(raw)
        with open(LOG, "a") as f:
            f.write(self.path + "\n")
        if b"MODE:hold" in raw:
            threading.Event().wait()
        path = self.path.split("?")[0]
        if path == "/v1/messages":
            kind, text = messages(body)
        elif path == "/v1/responses":
            kind, text = responses(body)
        else:
            self.send_response(404)
            self.end_headers()
            return
        data = text.encode()
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
