"""Many concurrent calls through hevo's gateway with an official SDK (`HEVO_TEST_SDK`:
`openai` or `anthropic`), spread round-robin over the trial keys in `HEVO_TEST_KEYS`
(comma-separated), each asking for at most `HEVO_TEST_MAX_TOKENS` tokens. Prints one JSON
line: how many calls were answered, refused with 429 (the SDK's RateLimitError), or failed
otherwise, and the first refusal's message.
"""
import concurrent.futures
import json
import os

import anthropic
import openai

calls = int(os.environ["HEVO_TEST_CALLS"])
keys = os.environ["HEVO_TEST_KEYS"].split(",")
sdk = os.environ["HEVO_TEST_SDK"]
max_tokens = int(os.environ.get("HEVO_TEST_MAX_TOKENS", "16"))

if sdk == "openai":
    clients = [openai.OpenAI(api_key=k, max_retries=0) for k in keys]
else:
    clients = [anthropic.Anthropic(api_key=k, max_retries=0) for k in keys]


def call(i):
    client = clients[i % len(clients)]
    messages = [{"role": "user", "content": "call %d" % i}]
    try:
        if sdk == "openai":
            client.chat.completions.create(
                model="gpt-test", max_tokens=max_tokens, messages=messages)
        else:
            client.messages.create(
                model="claude-test", max_tokens=max_tokens, messages=messages)
        return "answered", None
    except (openai.RateLimitError, anthropic.RateLimitError) as e:
        return "refused", str(e)
    except Exception as e:  # noqa: BLE001 - reported, the test fails on it
        return "other", "%s: %s" % (type(e).__name__, e)


with concurrent.futures.ThreadPoolExecutor(max_workers=calls) as pool:
    results = list(pool.map(call, range(calls)))
out = {kind: sum(1 for k, _ in results if k == kind)
       for kind in ("answered", "refused", "other")}
out["refusal"] = next((m for k, m in results if k == "refused"), None)
out["errors"] = [m for k, m in results if k == "other"][:3]
out["sdk"] = sdk
print(json.dumps(out))
