"""Self-test of the classify example: both seed harnesses against a fake model, and the
suite builder's pure parts. Standard library only; no network beyond 127.0.0.1.

    python3 -m unittest examples/classify/test_harnesses.py

A tiny OpenAI-compatible server runs in a thread on 127.0.0.1:0. Its default "model" is
deterministic: each known label gets a logit equal to how often the label word occurs in
the whole prompt, so a text that names a label, or few-shot examples carrying a label,
pull the answer towards it. Tests can swap in their own behaviour.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.dont_write_bytecode = True  # never leave __pycache__ inside a harness directory

HERE = Path(__file__).resolve().parent
ZERO = HERE / "zero-shot"
FEW = HERE / "few-shot"


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ----------------------------------------------------------------------------- fake model
LABELS = ["happy", "sad", "sports", "tech", "politics", "fresh", "rotten"]


def prompt_of(body: dict) -> str:
    return "\n".join(m.get("content", "") for m in body["messages"])


def last_user(body: dict) -> str:
    return [m for m in body["messages"] if m["role"] == "user"][-1]["content"]


def counting_model(body: dict) -> dict[str, float]:
    """Label -> logit: occurrences of the label word in the whole prompt."""
    low = prompt_of(body).lower()
    return {lab: float(len(re.findall(rf"\b{lab}\b", low))) for lab in LABELS}


def respond(body: dict, logits: dict[str, float]) -> dict:
    """An OpenAI-style chat completion for the given label logits."""
    z = max(logits.values())
    tot = sum(math.exp(v - z) for v in logits.values()) + math.exp(-1 - z)  # + junk token
    ranked = sorted(logits.items(), key=lambda kv: -kv[1])
    top = []
    for lab, v in ranked:
        # vary the token shapes: capitalized whole word, or a leading-space 3-letter prefix
        tok = lab.capitalize() if LABELS.index(lab) % 2 == 0 else " " + lab[:3]
        top.append({"token": tok, "logprob": v - z - math.log(tot)})
    top.append({"token": "The", "logprob": -1 - z - math.log(tot)})
    top.sort(key=lambda e: -e["logprob"])
    top = top[: body.get("top_logprobs", 0) or 1]
    best = ranked[0][0]
    msg = {"role": "assistant", "content": f"{best.capitalize()}." if body.get("max_tokens", 1) > 1 else best[:3]}
    choice = {"index": 0, "message": msg, "finish_reason": "stop"}
    if body.get("logprobs"):
        choice["logprobs"] = {"content": [{"token": top[0]["token"], "logprob": top[0]["logprob"],
                                           "top_logprobs": top}]}
    return {"id": "fake", "object": "chat.completion", "model": body.get("model"),
            "choices": [choice], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        n = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(n))
        srv = self.server
        with srv.lock:
            srv.requests.append({"path": self.path, "auth": self.headers.get("Authorization"),
                                 "body": body})
        if self.path != "/v1/chat/completions":
            return self.reply(404, {"error": {"message": "not found"}})
        if body.get("model") == "fail":
            return self.reply(500, {"error": {"message": "upstream exploded"}})
        resp = srv.behaviour(body)
        self.reply(200, resp)

    def reply(self, code: int, obj: dict):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def default_behaviour(body: dict) -> dict:
    return respond(body, counting_model(body))


# ----------------------------------------------------------------------------- fixtures
TRAIN = [
    {"id": "m1", "input": {"text": "the cat sat on the mat and purred, happy", "group": "mood"}, "expected": "happy"},
    {"id": "m2", "input": {"text": "stock markets fell sharply amid fears, sad", "group": "mood"}, "expected": "sad"},
    {"id": "m3", "input": {"text": "a gloomy rainy afternoon with no end", "group": "mood"}, "expected": "sad"},
    {"id": "m4", "input": {"text": "sunny beach holiday with friends", "group": "mood"}, "expected": "happy"},
    {"id": "t1", "input": {"text": "the striker scored twice in the cup final", "group": "topic"}, "expected": "sports"},
    {"id": "t2", "input": {"text": "a new phone chip doubles battery life", "group": "topic"}, "expected": "tech"},
    {"id": "t3", "input": {"text": "the minister resigned after the vote", "group": "topic"}, "expected": "politics"},
    {"id": "r1", "input": {"text": "a fine film", "group": "rev"}, "expected": "fresh"},
    {"id": "r2", "input": {"text": "a dull film", "group": "rev"}, "expected": "rotten"},
]


class HarnessTestBase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        cls.server.lock = threading.Lock()
        cls.server.requests = []
        cls.server.behaviour = default_behaviour
        cls.thread = threading.Thread(target=cls.server.serve_forever, daemon=True)
        cls.thread.start()
        cls.base = f"http://127.0.0.1:{cls.server.server_address[1]}/v1"

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()

    def setUp(self):
        self.server.requests.clear()
        self.server.behaviour = default_behaviour
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def env(self, params: dict | None = None, state: Path | None = None, model: str = "tiny") -> dict:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OPENAI_", "HEVO_", "ANTHROPIC_"))}
        env.update(OPENAI_BASE_URL=self.base, OPENAI_API_KEY="trial-key", HEVO_MODEL=model,
                   PYTHONDONTWRITEBYTECODE="1")
        if params is not None:
            env["HEVO_PARAMS"] = json.dumps(params)
        if state is not None:
            env["HEVO_STATE_DIR"] = str(state)
        return env

    def prepare(self, harness: Path, params: dict | None = None, train=TRAIN) -> Path:
        state = Path(tempfile.mkdtemp(dir=self.root, prefix="state-"))
        stdin = "".join(json.dumps(t) + "\n" for t in train)
        res = subprocess.run([sys.executable, str(harness / "harness.py"), "--prepare"],
                             input=stdin, capture_output=True, text=True, cwd=state,
                             env=self.env(params), timeout=60)
        self.assertEqual(res.returncode, 0, res.stderr)
        return state

    def trial(self, harness: Path, state: Path, inp: dict, params: dict | None = None,
              cwd: Path | None = None, model: str = "tiny", expect_rc: int = 0):
        cwd = cwd or Path(tempfile.mkdtemp(dir=self.root, prefix="trial-"))
        res = subprocess.run([sys.executable, str(harness / "harness.py")],
                             input=json.dumps(inp), capture_output=True, text=True, cwd=cwd,
                             env=self.env(params, state, model), timeout=60)
        self.assertEqual(res.returncode, expect_rc, res.stderr)
        if expect_rc != 0:
            return res
        last = [ln for ln in res.stdout.splitlines() if ln.strip()][-1]
        return json.loads(last)

    def bodies(self) -> list[dict]:
        return [r["body"] for r in self.server.requests]


# ----------------------------------------------------------------------------- zero-shot
class ZeroShotTest(HarnessTestBase):
    def test_prepare_stores_labels_per_group(self):
        state = self.prepare(ZERO)
        labels = json.loads((state / "labels.json").read_text())
        self.assertEqual(labels["groups"]["mood"], ["happy", "sad"])
        self.assertEqual(labels["groups"]["topic"], ["politics", "sports", "tech"])
        self.assertEqual(self.server.requests, [])  # no calibration asked for: no model call

    def test_logprob_answer_line_and_request(self):
        state = self.prepare(ZERO)
        out = self.trial(ZERO, state, {"text": "so sad, sad, sad today", "group": "mood"})
        self.assertEqual(out["answer"], "sad")
        self.assertAlmostEqual(sum(out["scores"].values()), 1.0, places=4)
        self.assertEqual(set(out["scores"]), {"happy", "sad"})
        (req,) = self.server.requests
        self.assertEqual(req["path"], "/v1/chat/completions")
        self.assertEqual(req["auth"], "Bearer trial-key")
        self.assertEqual(req["body"]["model"], "tiny")
        self.assertTrue(req["body"]["logprobs"])
        self.assertEqual(req["body"]["max_tokens"], 1)
        self.assertIn("so sad, sad, sad today", prompt_of(req["body"]))
        self.assertNotIn("politics", prompt_of(req["body"]))  # only this group's labels

    def test_prefix_tokens_count_for_their_label(self):
        # the counting model sends "tech" as the token " tec"
        state = self.prepare(ZERO)
        out = self.trial(ZERO, state, {"text": "tech tech news", "group": "topic"})
        self.assertEqual(out["answer"], "tech")
        out = self.trial(ZERO, state, {"text": "politics politics politics", "group": "topic"})
        self.assertEqual(out["answer"], "politics")

    def test_model_defaults_to_local(self):
        state = self.prepare(ZERO)
        env = self.env(None, state)
        del env["HEVO_MODEL"]
        res = subprocess.run([sys.executable, str(ZERO / "harness.py")],
                             input=json.dumps({"text": "happy", "group": "mood"}),
                             capture_output=True, text=True, cwd=self.root, env=env, timeout=60)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertEqual(self.bodies()[0]["model"], "local")

    def test_generate_scoring(self):
        state = self.prepare(ZERO)
        out = self.trial(ZERO, state, {"text": "what a happy happy day", "group": "mood"},
                         {"scoring": "generate"})
        self.assertEqual(out["answer"], "happy")
        self.assertTrue(out["parsed"])
        body = self.bodies()[0]
        self.assertNotIn("logprobs", body)
        self.assertEqual(body["temperature"], 0)

    def test_templates_change_the_prompt(self):
        state = self.prepare(ZERO)
        prompts = []
        for template in ("plain", "instruct", "question"):
            self.server.requests.clear()
            self.trial(ZERO, state, {"text": "happy", "group": "mood"}, {"template": template})
            prompts.append(json.dumps(self.bodies()[0]["messages"]))
        self.assertEqual(len(set(prompts)), 3)

    def test_prefill_opens_the_reply_with_label(self):
        state = self.prepare(ZERO)
        self.trial(ZERO, state, {"text": "happy", "group": "mood"}, {"prefill": True})
        last = self.bodies()[0]["messages"][-1]
        self.assertEqual(last, {"role": "assistant", "content": "Label:"})
        self.server.requests.clear()
        self.trial(ZERO, state, {"text": "happy", "group": "mood"}, {"prefill": False})
        self.assertEqual(self.bodies()[0]["messages"][-1]["role"], "user")

    def test_params_json_in_working_dir(self):
        state = self.prepare(ZERO)
        cwd = Path(tempfile.mkdtemp(dir=self.root))
        (cwd / "params.json").write_text(json.dumps({"template": "instruct"}))
        self.trial(ZERO, state, {"text": "happy", "group": "mood"}, None, cwd=cwd)
        self.assertEqual(self.bodies()[0]["messages"][0]["role"], "system")

    def test_bad_param_exits_2(self):
        state = self.prepare(ZERO)
        res = self.trial(ZERO, state, {"text": "x", "group": "mood"}, {"template": "nope"},
                         expect_rc=2)
        self.assertIn("unknown template", res.stderr)

    def test_http_error_exits_nonzero(self):
        state = self.prepare(ZERO)
        res = self.trial(ZERO, state, {"text": "x", "group": "mood"}, model="fail", expect_rc=1)
        self.assertIn("HTTP 500", res.stderr)
        self.assertEqual(res.stdout.strip(), "")

    def test_missing_logprobs_is_an_error(self):
        self.server.behaviour = lambda body: {"choices": [{"message": {"content": "sad"}}]}
        state = self.prepare(ZERO)
        res = self.trial(ZERO, state, {"text": "x", "group": "mood"}, expect_rc=1)
        self.assertIn("top_logprobs", res.stderr)

    def test_a_reply_that_ends_at_once_ties_the_labels(self):
        self.server.behaviour = lambda body: {"choices": [{
            "message": {"content": ""}, "finish_reason": "stop", "logprobs": {"content": []}}]}
        state = self.prepare(ZERO)
        out = self.trial(ZERO, state, {"text": "x", "group": "mood"})
        self.assertEqual(out["scores"], {"happy": 0.5, "sad": 0.5})
        self.assertEqual(out["answer"], "happy")  # ties go to the first label

    def test_no_state_exits_2(self):
        empty = Path(tempfile.mkdtemp(dir=self.root))
        res = self.trial(ZERO, empty, {"text": "x", "group": "mood"}, expect_rc=2)
        self.assertIn("prepare", res.stderr)


def calibration_behaviour(body: dict) -> dict:
    """fresh/rotten: content-free input gives 0.8/0.2, any real input 0.6/0.4."""
    p = (0.8, 0.2) if "N/A" in last_user(body) else (0.6, 0.4)
    top = [{"token": "fresh", "logprob": math.log(p[0])}, {"token": "rotten", "logprob": math.log(p[1])}]
    return {"choices": [{"message": {"role": "assistant", "content": "fresh"},
                         "logprobs": {"content": [{"token": "fresh", "logprob": top[0]["logprob"],
                                                   "top_logprobs": top}]}}]}


class CalibrationTest(HarnessTestBase):
    def test_uncalibrated_follows_the_raw_probabilities(self):
        self.server.behaviour = calibration_behaviour
        state = self.prepare(ZERO)
        out = self.trial(ZERO, state, {"text": "a film", "group": "rev"}, {"calibrate": False})
        self.assertEqual(out["answer"], "fresh")
        self.assertAlmostEqual(out["scores"]["fresh"], 0.6, places=5)

    def test_calibration_divides_by_content_free_probabilities(self):
        self.server.behaviour = calibration_behaviour
        state = self.prepare(ZERO)  # prepare without calibrate: nothing precomputed
        cwd = Path(tempfile.mkdtemp(dir=self.root))
        out = self.trial(ZERO, state, {"text": "a film", "group": "rev"}, {"calibrate": True}, cwd=cwd)
        # 0.6/0.8 = 0.75 vs 0.4/0.2 = 2  ->  rotten with 2/2.75
        self.assertEqual(out["answer"], "rotten")
        self.assertAlmostEqual(out["scores"]["rotten"], 2 / 2.75, places=5)
        self.assertAlmostEqual(out["scores"]["fresh"], 0.75 / 2.75, places=5)
        self.assertEqual(len(self.server.requests), 2)
        # cached in the working dir: a second run there asks only for the input itself
        self.server.requests.clear()
        self.trial(ZERO, state, {"text": "another", "group": "rev"}, {"calibrate": True}, cwd=cwd)
        self.assertEqual(len(self.server.requests), 1)

    def test_prepare_precomputes_calibration(self):
        self.server.behaviour = calibration_behaviour
        state = self.prepare(ZERO, {"calibrate": True})
        self.assertTrue((state / "calibration.json").is_file())
        self.assertEqual(len(self.server.requests), 3)  # one content-free call per group
        self.server.requests.clear()
        out = self.trial(ZERO, state, {"text": "a film", "group": "rev"}, {"calibrate": True})
        self.assertEqual(out["answer"], "rotten")
        self.assertEqual(len(self.server.requests), 1)

    def test_few_shot_calibrates_with_the_same_examples(self):
        self.server.behaviour = calibration_behaviour
        state = self.prepare(FEW)
        out = self.trial(FEW, state, {"text": "a film", "group": "rev"},
                         {"calibrate": True, "shots": 2})
        self.assertEqual(out["answer"], "rotten")
        real, cf = self.bodies()
        self.assertIn("N/A", last_user(cf))
        # same examples in both prompts
        for t in ("a fine film", "a dull film"):
            self.assertIn(t, prompt_of(real))
            self.assertIn(t, prompt_of(cf))


# ----------------------------------------------------------------------------- few-shot
class FewShotTest(HarnessTestBase):
    def test_prepare_stores_train_items(self):
        state = self.prepare(FEW)
        items = json.loads((state / "train.json").read_text())
        self.assertEqual(len(items), len(TRAIN))
        self.assertEqual(items[0], {"id": "m1", "text": TRAIN[0]["input"]["text"],
                                    "label": "happy", "group": "mood"})

    def test_shots_appear_in_the_prompt(self):
        state = self.prepare(FEW)
        mood_texts = [t["input"]["text"] for t in TRAIN if t["input"]["group"] == "mood"]
        other_texts = [t["input"]["text"] for t in TRAIN if t["input"]["group"] != "mood"]
        for shots in (0, 2, 4, 8):
            self.server.requests.clear()
            out = self.trial(FEW, state, {"text": "a quiet day", "group": "mood"},
                             {"shots": shots, "retrieval": "random"})
            prompt = prompt_of(self.bodies()[0])
            used = [t for t in mood_texts if t in prompt]
            self.assertEqual(len(used), min(shots, 4), shots)  # the group has 4 train items
            self.assertEqual(len(out["shots"]), min(shots, 4))
            self.assertFalse(any(t in prompt for t in other_texts))

    def test_tfidf_puts_the_most_similar_item_last(self):
        state = self.prepare(FEW)
        out = self.trial(FEW, state, {"text": "the cat sat on the mat", "group": "mood"},
                         {"shots": 2, "retrieval": "tfidf"})
        self.assertEqual(out["shots"][-1], "m1")
        first = next(t["input"]["text"] for t in TRAIN if t["id"] == out["shots"][0])
        prompt = last_user(self.bodies()[0])
        self.assertGreater(prompt.index("purred"), prompt.index(first))

    def test_char_ngram_picks_the_most_similar_item(self):
        state = self.prepare(FEW)
        out = self.trial(FEW, state, {"text": "stock market fell", "group": "mood"},
                         {"shots": 2, "retrieval": "char-ngram"})
        self.assertEqual(out["shots"][-1], "m2")

    def test_examples_move_the_answer(self):
        # the counting model answers with the label most present in the prompt
        state = self.prepare(FEW)
        out = self.trial(FEW, state, {"text": "the minister and the vote", "group": "topic"},
                         {"shots": 2, "retrieval": "tfidf"})
        self.assertEqual(out["shots"][-1], "t3")
        self.assertEqual(out["answer"], "politics")

    def test_random_retrieval_is_deterministic(self):
        state = self.prepare(FEW)
        a = self.trial(FEW, state, {"text": "xyz", "group": "mood"}, {"shots": 2, "retrieval": "random"})
        b = self.trial(FEW, state, {"text": "xyz", "group": "mood"}, {"shots": 2, "retrieval": "random"})
        self.assertEqual(a["shots"], b["shots"])

    def test_chat_template_uses_turns(self):
        state = self.prepare(FEW)
        self.trial(FEW, state, {"text": "a quiet day", "group": "mood"},
                   {"shots": 2, "template": "chat"})
        roles = [m["role"] for m in self.bodies()[0]["messages"]]
        self.assertEqual(roles, ["system", "user", "assistant", "user", "assistant", "user"])

    def test_prefill_follows_the_examples_and_calibration_uses_it(self):
        state = self.prepare(FEW)
        self.trial(FEW, state, {"text": "a quiet day", "group": "mood"},
                   {"shots": 2, "template": "chat", "prefill": True, "calibrate": True})
        trial, probe = self.bodies()
        roles = [m["role"] for m in trial["messages"]]
        self.assertEqual(roles, ["system", "user", "assistant", "user", "assistant", "user",
                                 "assistant"])
        self.assertEqual(trial["messages"][-1]["content"], "Label:")
        self.assertEqual(probe["messages"][-1]["content"], "Label:")
        self.assertEqual(probe["messages"][-2]["content"], "N/A")

    def test_generate_scoring(self):
        state = self.prepare(FEW)
        out = self.trial(FEW, state, {"text": "sports sports", "group": "topic"},
                         {"scoring": "generate", "shots": 0})
        self.assertEqual(out["answer"], "sports")


def flat_behaviour(body: dict) -> dict:
    """A model that gives fresh 0.6 and rotten 0.4 whatever the prompt."""
    top = [{"token": "fresh", "logprob": math.log(0.6)}, {"token": "rotten", "logprob": math.log(0.4)}]
    return {"choices": [{"message": {"role": "assistant", "content": "fresh"},
                         "logprobs": {"content": [{"token": "fresh", "logprob": top[0]["logprob"],
                                                   "top_logprobs": top}]}}]}


MEMORY_TRAIN = [
    {"id": "r1", "input": {"text": "a fine warm funny film", "group": "rev"}, "expected": "fresh"},
    {"id": "r2", "input": {"text": "a dull tedious film", "group": "rev"}, "expected": "rotten"},
    {"id": "r3", "input": {"text": "dull and tedious, a mess", "group": "rev"}, "expected": "rotten"},
    {"id": "r4", "input": {"text": "fine acting, a warm story", "group": "rev"}, "expected": "fresh"},
]


def memory_section(path: Path) -> str:
    text = path.read_text()
    start = text.index("# " + "-" * 77 + " memory")
    return text[start:text.index("# " + "-" * 77 + " entry points")]


class MemoryTest(HarnessTestBase):
    """memory = bayes: a memory of the train split, built by prepare, multiplies the model's
    label probabilities."""

    def test_the_memory_code_is_the_same_in_both_harnesses(self):
        self.assertEqual(memory_section(ZERO / "harness.py"), memory_section(FEW / "harness.py"))

    def test_prepare_writes_the_memory(self):
        for h in (ZERO, FEW):
            state = self.prepare(h, train=MEMORY_TRAIN)
            mem = json.loads((state / "memory.json").read_text())
            self.assertEqual(mem["rev"]["counts"]["rotten"]["tedious"], 2)
            self.assertEqual(mem["rev"]["counts"]["fresh"]["film"], 1)
            self.assertIn("mess", mem["rev"]["vocab"])

    def test_the_memory_overrules_a_flat_model(self):
        self.server.behaviour = flat_behaviour
        for h in (ZERO, FEW):
            state = self.prepare(h, train=MEMORY_TRAIN)
            inp = {"text": "so dull, so tedious", "group": "rev"}
            plain = self.trial(h, state, inp, {"memory": "none", "shots": 0})
            self.assertEqual(plain["answer"], "fresh")
            self.assertNotIn("model_scores", plain)
            out = self.trial(h, state, inp, {"memory": "bayes", "shots": 0})
            self.assertEqual(out["answer"], "rotten", h.name)
            self.assertAlmostEqual(out["model_scores"]["fresh"], 0.6, places=5)
            self.assertGreater(out["scores"]["rotten"], 0.5)
            # with generated answers too: the model says "fresh", the memory outweighs it
            out = self.trial(h, state, inp, {"memory": "bayes", "shots": 0, "scoring": "generate"})
            self.assertTrue(out["parsed"])
            self.assertEqual(out["answer"], "rotten", h.name)
            # a text the memory knows nothing of leaves the model's answer
            out = self.trial(h, state, {"text": "zzz qqq", "group": "rev"},
                             {"memory": "bayes", "shots": 0})
            self.assertEqual(out["answer"], "fresh")

    def test_memory_without_prepare_exits_2(self):
        state = self.prepare(ZERO, train=MEMORY_TRAIN)
        (state / "memory.json").unlink()
        res = self.trial(ZERO, state, {"text": "dull", "group": "rev"}, {"memory": "bayes"},
                         expect_rc=2)
        self.assertIn("memory.json", res.stderr)

    def test_unknown_memory_exits_2(self):
        state = self.prepare(ZERO, train=MEMORY_TRAIN)
        res = self.trial(ZERO, state, {"text": "dull", "group": "rev"}, {"memory": "oracle"},
                         expect_rc=2)
        self.assertIn("unknown memory", res.stderr)


class MemoryUnitTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.h = load(ZERO / "harness.py", "zero_shot_harness_mem")
        items = [{"text": t["input"]["text"], "label": t["expected"], "group": "rev"}
                 for t in MEMORY_TRAIN]
        cls.mem = cls.h.build_memory(items)

    def test_bayes_favours_the_label_whose_texts_share_the_words(self):
        p = self.h.memory_probs(self.mem, "bayes", "warm and fine", "rev", ["fresh", "rotten"])
        self.assertGreater(p["fresh"], p["rotten"])
        self.assertAlmostEqual(sum(p.values()), 1.0)
        # fresh texts hold 10 word occurrences, rotten 9, the vocabulary 11 words: "warm" and
        # "fine" occur in two fresh texts and no rotten one, "and" in one rotten text
        odds = ((3 / 21) ** 2 * (1 / 21)) / ((1 / 20) ** 2 * (2 / 20))
        self.assertAlmostEqual(p["fresh"] / p["rotten"], odds, places=6)

    def test_a_text_of_unknown_words_is_uniform(self):
        p = self.h.memory_probs(self.mem, "bayes", "zzz qqq", "rev", ["fresh", "rotten"])
        self.assertEqual(p, {"fresh": 0.5, "rotten": 0.5})

    def test_a_generated_answer_as_a_distribution(self):
        got = self.h.generated_probs("b", ["a", "b", "c"])
        for lab, want in {"a": 0.1, "b": 0.8, "c": 0.1}.items():
            self.assertAlmostEqual(got[lab], want)
        self.assertEqual(self.h.generated_probs(None, ["a", "b"]), {"a": 0.5, "b": 0.5})

    def test_none_and_unknown_groups_are_uniform(self):
        self.assertEqual(self.h.memory_probs(self.mem, "none", "dull", "rev", ["a", "b"]),
                         {"a": 0.5, "b": 0.5})
        self.assertEqual(self.h.memory_probs(self.mem, "bayes", "dull", "other", ["a", "b"]),
                         {"a": 0.5, "b": 0.5})


class RetrievalUnitTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.h = load(FEW / "harness.py", "few_shot_harness")

    def pool(self):
        texts = ["red apples and green pears", "the stock market crashed today",
                 "football match ends in a draw", "apples pears and plums in a bowl"]
        return [{"id": str(i), "text": t, "label": "x"} for i, t in enumerate(texts)]

    def test_tfidf_order(self):
        got = self.h.retrieve("a bowl of pears and plums", self.pool(), 2, "tfidf")
        self.assertEqual([d["id"] for d in got], ["0", "3"])

    def test_char_ngram_order(self):
        got = self.h.retrieve("footbal matches", self.pool(), 1, "char-ngram")
        self.assertEqual([d["id"] for d in got], ["2"])

    def test_k_larger_than_pool_and_zero(self):
        self.assertEqual(len(self.h.retrieve("x", self.pool(), 8, "tfidf")), 4)
        self.assertEqual(self.h.retrieve("x", self.pool(), 0, "random"), [])

    def test_cosine(self):
        self.assertAlmostEqual(self.h.cosine({"a": 1.0}, {"a": 2.0}), 1.0)
        self.assertEqual(self.h.cosine({"a": 1.0}, {"b": 1.0}), 0.0)

    def test_parse_label(self):
        labels = ["business", "entertainment", "politics", "sports", "tech"]
        self.assertEqual(self.h.parse_label("Label: Sport", labels), "sports")
        self.assertEqual(self.h.parse_label("This is about tech and politics", labels), "tech")
        self.assertIsNone(self.h.parse_label("no idea", labels))


# ----------------------------------------------------------------------------- suite builder
class BuildSuiteTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.b = load(HERE / "build_suite.py", "build_suite")

    def test_truncate(self):
        t = self.b.truncate("word " * 200, 50)
        self.assertLessEqual(len(t), 50)
        self.assertTrue(t.endswith(" ..."))
        self.assertEqual(self.b.truncate("short", 50), "short")

    def test_suite_toml_format(self):
        import tomllib

        conf = tomllib.loads(self.b.suite_toml(1))
        self.assertEqual(set(conf), {"name", "description", "strata", "scorer"})
        self.assertEqual(conf["name"], "classify")
        self.assertEqual(conf["strata"], ["rt", "bbc"])
        self.assertEqual(conf["scorer"], {"kind": "label"})

    def test_dedupe_drops_conflicts_and_keeps_one_copy(self):
        rows = [("a1", "same", "x"), ("a2", "same", "x"), ("b1", "clash", "x"), ("b2", "clash", "y"),
                ("c", "alone", "y")]
        self.assertEqual(self.b.dedupe(rows), [("a1", "same", "x"), ("c", "alone", "y")])

    def test_a_smaller_test_split_keeps_train_and_val(self):
        import random

        rows = [(f"g-{lab}-{i:03d}", f"text {lab} {i}", lab) for lab in ("p", "q") for i in range(200)]
        keep = self.b.TEST_KEEP
        try:
            self.b.TEST_KEEP = self.b.SIZES["test"]
            full = self.b.split_group("g", rows, random.Random(7))
            self.b.TEST_KEEP = self.b.SIZES["test"] - 20
            kept = self.b.split_group("g", rows, random.Random(7))
        finally:
            self.b.TEST_KEEP = keep
        for split in ("train", "val"):
            self.assertEqual([t for t in kept if t["split"] == split],
                             [t for t in full if t["split"] == split])
        full_test = {t["id"] for t in full if t["split"] == "test"}
        kept_test = {t["id"] for t in kept if t["split"] == "test"}
        self.assertLess(kept_test, full_test)

    def test_split_is_balanced_disjoint_and_seeded(self):
        import random

        rows = [(f"g-{lab}-{i:03d}", f"text {lab} {i}", lab) for lab in ("p", "q") for i in range(200)]
        a = self.b.split_group("g", rows, random.Random(7))
        b = self.b.split_group("g", list(reversed(rows)), random.Random(7))
        self.assertEqual(a, b)  # input order does not matter, the seed does
        self.assertEqual(len({t["id"] for t in a}), len(a))
        written = {**self.b.SIZES, "test": self.b.TEST_KEEP}
        for split, size in written.items():
            part = [t for t in a if t["split"] == split]
            self.assertEqual(len(part), size)
            self.assertEqual(sum(t["expected"] == "p" for t in part), size // 2)
        for t in a:
            self.assertEqual(set(t["input"]), {"text", "group"})  # the label stays out

    @unittest.skipUnless(
        all((Path(os.environ.get("HEVO_HOME", "")) / "data" / "pkgs" / p["file"]).is_file()
            if os.environ.get("HEVO_HOME") else
            (Path.home() / ".cache/hevo/data/pkgs" / p["file"]).is_file()
            for p in load(HERE / "build_suite.py", "build_suite_probe").PACKAGES.values()),
        "pinned packages not in the cache (run build_suite.py once)")
    def test_build_from_cache_is_byte_identical(self):
        with tempfile.TemporaryDirectory() as d:
            outs = []
            for name in ("a", "b"):
                res = subprocess.run([sys.executable, str(HERE / "build_suite.py"), "--out",
                                      str(Path(d) / name)], capture_output=True, text=True,
                                     timeout=300)
                self.assertEqual(res.returncode, 0, res.stderr)
                self.assertEqual(res.stdout, "")
                outs.append((Path(d) / name / "tasks.jsonl").read_bytes())
            self.assertEqual(outs[0], outs[1])
            tasks = [json.loads(ln) for ln in outs[0].decode().splitlines()]
            written = sum(self.b.SIZES.values()) - self.b.SIZES["test"] + self.b.TEST_KEEP
            self.assertEqual(len(tasks), 2 * written)
            self.assertEqual({t["group"] for t in tasks}, {"rt", "bbc"})
            self.assertEqual({t["expected"] for t in tasks if t["group"] == "rt"}, {"fresh", "rotten"})
            self.assertTrue(all(len(t["input"]["text"]) <= self.b.MAX_CHARS for t in tasks))


if __name__ == "__main__":
    unittest.main()
