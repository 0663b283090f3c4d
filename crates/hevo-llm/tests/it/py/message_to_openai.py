"""An Anthropic message, sent with the official `anthropic` SDK, to `gpt-test`, a model an
`openai` backend serves: the gateway translates it into a chat completion. Its `max_tokens`
is 37. Prints one JSON line: the answer's text and stop reason."""
import json

import anthropic

m = anthropic.Anthropic(max_retries=0).messages.create(
    model="gpt-test", max_tokens=37, messages=[{"role": "user", "content": "limited"}])
print(json.dumps({"text": m.content[0].text, "stop": m.stop_reason}))
