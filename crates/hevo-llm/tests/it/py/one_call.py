"""An ordinary harness: one chat completion with the `openai` SDK, allowed
`HEVO_TEST_TIMEOUT` seconds, no retries. Prints one JSON line: the answer, or the error.
"""
import json
import os

import openai

client = openai.OpenAI(timeout=float(os.environ["HEVO_TEST_TIMEOUT"]), max_retries=0)
try:
    answer = client.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "hi"}])
    print(json.dumps({"answer": answer.choices[0].message.content}))
except Exception as e:  # noqa: BLE001 - reported, the test fails on it
    print(json.dumps({"error": "%s: %s" % (type(e).__name__, e)}))
