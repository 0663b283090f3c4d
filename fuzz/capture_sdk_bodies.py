"""Records the request bodies the real openai and anthropic SDKs send to a loopback server
as the gateway target's seeds: `python3 fuzz/capture_sdk_bodies.py fuzz/corpus/gateway`."""
import json, threading, http.server, sys
bodies = []
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get('content-length', 0)); bodies.append((self.path, self.rfile.read(n)))
        self.send_response(400); self.send_header('content-type','application/json'); self.end_headers()
        self.wfile.write(b'{"error":{"message":"captured","type":"invalid_request_error"}}')
    def log_message(self,*a): pass
srv = http.server.HTTPServer(('127.0.0.1', 0), H); port = srv.server_address[1]
threading.Thread(target=srv.serve_forever, daemon=True).start()
import openai, anthropic
o = openai.OpenAI(base_url=f'http://127.0.0.1:{port}/v1', api_key='k', max_retries=0)
a = anthropic.Anthropic(base_url=f'http://127.0.0.1:{port}', api_key='k', max_retries=0)
calls = [
 ('chat-plain', lambda: o.chat.completions.create(model='m', messages=[{'role':'system','content':'Be brief.'},{'role':'user','content':'Classify: great movie'}], temperature=0, max_tokens=8, seed=3)),
 ('chat-stream', lambda: list(o.chat.completions.create(model='m', messages=[{'role':'user','content':[{'type':'text','text':'hi'}]}], stream=True, stream_options={'include_usage':True}, stop=['\n'], logprobs=True, top_logprobs=2))),
 ('chat-tools', lambda: o.chat.completions.create(model='m', messages=[{'role':'user','content':'weather?'}], tools=[{'type':'function','function':{'name':'w','parameters':{'type':'object','properties':{}}}}], tool_choice='auto')),
 ('responses-plain', lambda: o.responses.create(model='m', input='Say ok', instructions='Be brief.', max_output_tokens=16, temperature=0)),
 ('responses-items', lambda: o.responses.create(model='m', input=[{'role':'user','content':[{'type':'input_text','text':'hi'}]}], stream=True)),
 ('messages-plain', lambda: a.messages.create(model='m', max_tokens=16, system='Be brief.', messages=[{'role':'user','content':'hi'},{'role':'assistant','content':'hello'},{'role':'user','content':[{'type':'text','text':'again'}]}], stop_sequences=['x'])),
 ('messages-stream', lambda: list(a.messages.create(model='m', max_tokens=16, messages=[{'role':'user','content':'hi'}], stream=True))),
 ('messages-thinking', lambda: a.messages.create(model='m', max_tokens=2048, thinking={'type':'enabled','budget_tokens':1024}, messages=[{'role':'user','content':'hi'}])),
]
dialect = {'chat': 0, 'responses': 1, 'messages': 2}
for name, f in calls:
    before = len(bodies)
    try: f()
    except Exception as e: err = e
    if len(bodies) == before: print(name, 'sent nothing:', repr(err)); continue
    path, body = bodies[-1]
    open(f'{sys.argv[1]}/{name}', 'wb').write(bytes([dialect[name.split('-')[0]]]) + body)
    print(name, path, len(body))
