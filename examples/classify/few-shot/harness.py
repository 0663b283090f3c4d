#!/usr/bin/env python3
"""Few-shot text classifier with retrieval: a hevo seed harness (Python standard library only).

Protocol (see hevo's DESIGN.md, "The harness protocol"):
  python3 harness.py --prepare   train split as JSONL on stdin (id, input, expected); the
                                 working directory is the candidate's empty state directory.
                                 Stores the train items (train.json: id, text, label, group),
                                 the label set of every group (labels.json) and, when
                                 calibration is on and shots = 0, the content-free
                                 probabilities (calibration.json).
  python3 harness.py             one trial: the task input JSON on stdin ({"text", "group"});
                                 state in $HEVO_STATE_DIR; the last stdout line is
                                 {"answer": "<label>", ...}.

Parameters (harness.toml [params]; values arrive in $HEVO_PARAMS or params.json):
  shots      how many labeled train examples of the same group go into the prompt
  retrieval  which ones: random (seeded by the input text), tfidf (word TF-IDF cosine) or
             char-ngram (character 3-5-gram count cosine); the most similar comes last
  template   how the prompt is laid out: plain (one message, "Text: / Label:" pairs),
             instruct (system instruction + examples in the user message),
             chat (each example as a user turn and an assistant turn)
  scoring    logprob: one-token completion with top_logprobs, pick the label whose first
             token(s) carry most probability; generate: greedy generation, parse the label
  prefill    start the model's reply with "Label:" (a trailing assistant message, which hevo's
             local model and Anthropic's API continue), so the next token is the label itself
             rather than "The" or "This"; an endpoint that does not continue it (OpenAI's)
             answers as without it
  calibrate  contextual calibration (Zhao et al. 2021, "Calibrate Before Use"): divide the
             label probabilities by those the same prompt (same examples) gives a
             content-free input ("N/A") and renormalize. Only affects scoring = logprob;
             with shots > 0 it costs one more model call per trial.

The model is reached through the OpenAI-compatible endpoint in $OPENAI_BASE_URL
(POST {base}/chat/completions, bearer $OPENAI_API_KEY); model name $HEVO_MODEL or "local".
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent

#: Used when harness.toml cannot be read; harness.toml's defaults win otherwise.
DEFAULTS = {"shots": 2, "retrieval": "tfidf", "template": "plain", "scoring": "logprob",
            "prefill": False, "calibrate": False, "memory": "none"}

#: Content-free inputs for calibration; their label probabilities are averaged.
CONTENT_FREE = ["N/A"]

#: Alternatives requested per position with scoring = logprob (OpenAI allows 0..20).
TOP_LOGPROBS = 20

#: The start of the reply with prefill = true.
PREFILL = "Label:"

#: Tokens generated with scoring = generate.
GEN_MAX_TOKENS = 8

#: Seconds to wait for one model call.
HTTP_TIMEOUT_S = 120

#: Prompt layouts; see build_messages.
TEMPLATES = ("plain", "instruct", "chat")
RETRIEVALS = ("random", "tfidf", "char-ngram")
SCORINGS = ("logprob", "generate")


class HarnessError(Exception):
    """A failure that ends the trial with a message on stderr."""

    def __init__(self, msg: str, code: int = 1):
        super().__init__(msg)
        self.code = code


def log(msg: str) -> None:
    print(f"few-shot: {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- params
def manifest_defaults() -> dict:
    """Defaults declared in harness.toml's [params], over the built-in ones."""
    out = dict(DEFAULTS)
    try:
        import tomllib

        with open(HERE / "harness.toml", "rb") as f:
            for k, v in tomllib.load(f).get("params", {}).items():
                if isinstance(v, dict) and "default" in v:
                    out[k] = v["default"]
    except (ImportError, OSError, ValueError) as e:
        log(f"harness.toml not read ({e}); using built-in defaults")
    return out


def load_params() -> dict:
    """Parameter values: $HEVO_PARAMS, else ./params.json, over the defaults; validated."""
    params = manifest_defaults()
    raw = os.environ.get("HEVO_PARAMS")
    src = "HEVO_PARAMS"
    if not raw and Path("params.json").is_file():
        raw, src = Path("params.json").read_text(), "params.json"
    if raw:
        try:
            given = json.loads(raw)
        except json.JSONDecodeError as e:
            raise HarnessError(f"{src} is not JSON: {e}", 2)
        if not isinstance(given, dict):
            raise HarnessError(f"{src} must be a JSON object", 2)
        params.update(given)
    if params["template"] not in TEMPLATES:
        raise HarnessError(f"unknown template {params['template']!r}; one of {list(TEMPLATES)}", 2)
    if params["scoring"] not in SCORINGS:
        raise HarnessError(f"unknown scoring {params['scoring']!r}; one of {list(SCORINGS)}", 2)
    if params["memory"] not in MEMORIES:
        raise HarnessError(f"unknown memory {params['memory']!r}; one of {list(MEMORIES)}", 2)
    if params["retrieval"] not in RETRIEVALS:
        raise HarnessError(f"unknown retrieval {params['retrieval']!r}; one of {list(RETRIEVALS)}", 2)
    try:
        params["shots"] = max(0, int(params["shots"]))
    except (TypeError, ValueError):
        raise HarnessError(f"shots must be an integer, not {params['shots']!r}", 2)
    for flag in ("prefill", "calibrate"):
        params[flag] = params[flag] in (True, "true", "True", 1, "1")
    return params


# ----------------------------------------------------------------------------- model
def chat(messages: list[dict], **extra) -> dict:
    """POST one chat completion; return the parsed response. HTTP errors raise HarnessError."""
    base = os.environ.get("OPENAI_BASE_URL")
    if not base:
        raise HarnessError("OPENAI_BASE_URL is not set", 2)
    body = {"model": os.environ.get("HEVO_MODEL") or "local", "messages": messages,
            "temperature": 0, **extra}
    headers = {"Content-Type": "application/json"}
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(base.rstrip("/") + "/chat/completions",
                                 data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_S) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as e:
        detail = e.read()[:500].decode("utf-8", "replace")
        raise HarnessError(f"model call failed: HTTP {e.code} {e.reason}: {detail}")
    except (urllib.error.URLError, OSError) as e:
        raise HarnessError(f"model call failed: {e}")
    except json.JSONDecodeError as e:
        raise HarnessError(f"model response is not JSON: {e}")


def label_probs(messages: list[dict], labels: list[str]) -> dict[str, float]:
    """Probability mass the next token gives each label.

    A top-logprob token counts for a label when, stripped and lower-cased, it is a prefix of
    exactly one label (or the label is a prefix of it). A label with no matching token gets
    half the smallest listed probability (its true mass is below that); when the model ends
    its reply at once, every label gets the same small mass."""
    resp = chat(messages, max_tokens=1, logprobs=True, top_logprobs=TOP_LOGPROBS)
    try:
        positions = resp["choices"][0]["logprobs"]["content"]
        top = positions[0]["top_logprobs"] if positions else []  # [] : the reply ended at once
    except (KeyError, IndexError, TypeError):
        raise HarnessError("the endpoint returned no top_logprobs; use scoring = generate")
    mass = {lab: 0.0 for lab in labels}
    smallest = 1.0
    for entry in top:
        p = math.exp(float(entry["logprob"]))
        smallest = min(smallest, p)
        tok = entry["token"].strip().lower().strip(".,:;!\"'")
        if not tok:
            continue
        hits = [lab for lab in labels if lab.lower().startswith(tok) or tok.startswith(lab.lower())]
        if len(hits) == 1:
            mass[hits[0]] += p
    floor = max(smallest / 2, 1e-12)
    return {lab: (m if m > 0 else floor) for lab, m in mass.items()}


def normalize(d: dict[str, float]) -> dict[str, float]:
    total = sum(d.values()) or 1.0
    return {k: v / total for k, v in d.items()}


def parse_label(text: str, labels: list[str]) -> str | None:
    """The label a generated text names: the earliest whole label, else the first of its
    first six words (3+ letters) that starts exactly one label or that one label starts."""
    low = text.lower()
    found = [(low.find(lab.lower()), lab) for lab in labels if lab.lower() in low]
    if found:
        return min(found)[1]
    for w in re.findall(r"[a-z0-9]+", low)[:6]:
        if len(w) < 3:
            continue
        hits = [lab for lab in labels if lab.lower().startswith(w) or w.startswith(lab.lower())]
        if len(hits) == 1:
            return hits[0]
    return None


# ----------------------------------------------------------------------------- prompts
def build_messages(template: str, text: str, labels: list[str], demos: list[dict],
                   prefill: bool) -> list[dict]:
    """The chat messages for one input; `demos` are {"text", "label"} train items."""
    msgs = layout(template, text, labels, demos)
    if prefill:
        msgs.append({"role": "assistant", "content": PREFILL})
    return msgs


def layout(template: str, text: str, labels: list[str], demos: list[dict]) -> list[dict]:
    """The messages of one template, before any prefill."""
    labs = ", ".join(labels)
    if template == "plain":
        parts = [f"Classify each text as one of: {labs}.\n"]
        parts += [f"Text: {d['text']}\nLabel: {d['label']}\n" for d in demos]
        parts.append(f"Text: {text}\nLabel:")
        return [{"role": "user", "content": "\n".join(parts)}]
    system = f"You are a text classifier. Reply with exactly one label from this list: {labs}."
    if template == "instruct":
        parts = []
        if demos:
            parts.append("Examples:\n")
            parts += [f"Text: {d['text']}\nLabel: {d['label']}\n" for d in demos]
            parts.append("Now classify this text.\n")
        parts.append(f"Text: {text}")
        return [{"role": "system", "content": system},
                {"role": "user", "content": "\n".join(parts)}]
    msgs = [{"role": "system", "content": system}]  # chat
    for d in demos:
        msgs += [{"role": "user", "content": d["text"]},
                 {"role": "assistant", "content": d["label"]}]
    msgs.append({"role": "user", "content": text})
    return msgs


# ----------------------------------------------------------------------------- retrieval
def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower())


def char_ngrams(text: str, ns: tuple[int, ...] = (3, 4, 5)) -> dict[str, float]:
    s = " " + " ".join(text.lower().split()) + " "
    out: dict[str, float] = {}
    for n in ns:
        for i in range(len(s) - n + 1):
            g = s[i : i + n]
            out[g] = out.get(g, 0.0) + 1.0
    return out


def cosine(a: dict[str, float], b: dict[str, float]) -> float:
    if len(a) > len(b):
        a, b = b, a
    dot = sum(v * b.get(k, 0.0) for k, v in a.items())
    na = math.sqrt(sum(v * v for v in a.values()))
    nb = math.sqrt(sum(v * v for v in b.values()))
    return dot / (na * nb) if na and nb else 0.0


def tfidf_vectors(docs: list[str]) -> tuple[list[dict[str, float]], Callable[[str], dict[str, float]]]:
    """Sublinear-tf, smoothed-idf vectors of `docs` and a function that vectorizes a query."""
    toks = [words(d) for d in docs]
    n = len(docs)
    df: dict[str, int] = {}
    for t in toks:
        for w in set(t):
            df[w] = df.get(w, 0) + 1

    def vec(ws: list[str]) -> dict[str, float]:
        tf: dict[str, int] = {}
        for w in ws:
            tf[w] = tf.get(w, 0) + 1
        return {w: (1 + math.log(c)) * (math.log((1 + n) / (1 + df.get(w, 0))) + 1)
                for w, c in tf.items()}

    return [vec(t) for t in toks], lambda q: vec(words(q))


def retrieve(text: str, pool: list[dict], k: int, method: str) -> list[dict]:
    """k train items for `text`, least similar first (the closest sits next to the query).
    Ties keep train order; random is seeded by the text, so a task always gets the same."""
    if k <= 0 or not pool:
        return []
    k = min(k, len(pool))
    if method == "random":
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
        return random.Random(seed).sample(pool, k)
    if method == "tfidf":
        vecs, qvec = tfidf_vectors([d["text"] for d in pool])
        q = qvec(text)
        sims = [cosine(q, v) for v in vecs]
    else:  # char-ngram
        q = char_ngrams(text)
        sims = [cosine(q, char_ngrams(d["text"])) for d in pool]
    order = sorted(range(len(pool)), key=lambda i: (-sims[i], i))[:k]
    return [pool[i] for i in reversed(order)]


def cache_key(messages: list[dict]) -> str:
    model = os.environ.get("HEVO_MODEL") or "local"
    blob = json.dumps([model, messages], sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:24]


def read_json(path: Path, default):
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return default


def content_free_probs(template: str, labels: list[str], demos: list[dict], prefill: bool,
                       state: Path | None) -> dict[str, float]:
    """Average label probabilities over the content-free inputs; looked up in the state
    directory (written by prepare), then in ./calibration.json, else asked and cached there."""
    probe = [build_messages(template, cf, labels, demos, prefill) for cf in CONTENT_FREE]
    key = cache_key(probe[0]) + "-" + str(len(probe))
    for path in ([state / "calibration.json"] if state else []) + [Path("calibration.json")]:
        hit = read_json(path, {}).get(key)
        if hit:
            return hit
    avg = {lab: 0.0 for lab in labels}
    for msgs in probe:
        for lab, p in normalize(label_probs(msgs, labels)).items():
            avg[lab] += p / len(probe)
    cache = read_json(Path("calibration.json"), {})
    cache[key] = avg
    try:
        Path("calibration.json").write_text(json.dumps(cache, sort_keys=True))
    except OSError:
        pass
    return avg


# ----------------------------------------------------------------------------- memory
# This block is the same in zero-shot/harness.py and few-shot/harness.py (test_harnesses.py
# checks it): a harness directory is copied whole into every candidate, so the two seeds
# cannot share a module.

#: memory = none: the model alone. bayes: naive Bayes over the words of the group's train
#: texts, which `prepare` counts (memory.json); its label distribution multiplies the
#: model's.
MEMORIES = ("none", "bayes")

#: Add-one smoothing of the word counts.
BAYES_ALPHA = 1.0

#: With scoring = generate, the model's answer as a distribution: this much on the label it
#: named, the rest spread over the others (uniform when it named none).
GENERATED_WEIGHT = 0.8


def memory_words(text: str) -> list[str]:
    """The distinct lower-cased words of a text, sorted."""
    return sorted(set(re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower())))


def build_memory(items: list[dict]) -> dict:
    """Per group: in how many train texts of each label every word occurs, and the
    group's vocabulary size."""
    groups: dict[str, dict] = {}
    for it in items:
        g = groups.setdefault(it["group"], {"counts": {}, "vocab": []})
        counts = g["counts"].setdefault(it["label"], {})
        for w in memory_words(it["text"]):
            counts[w] = counts.get(w, 0) + 1
    for g in groups.values():
        g["vocab"] = sorted(set().union(*(set(c) for c in g["counts"].values())))
    return groups


def memory_probs(memory: dict, kind: str, text: str, group: str | None,
                 labels: list[str]) -> dict[str, float]:
    """The memory's distribution over `labels` for `text`: uniform for memory = none, a
    group it has not seen, or a text with no word it knows."""
    g = memory.get(group or "")
    if kind == "none" or not g:
        return {lab: 1.0 / len(labels) for lab in labels}
    vocab = set(g["vocab"])
    ws = [w for w in memory_words(text) if w in vocab]
    logp = {}
    for lab in labels:
        counts = g["counts"].get(lab, {})
        total = sum(counts.values())
        logp[lab] = sum(math.log((counts.get(w, 0) + BAYES_ALPHA) /
                                 (total + BAYES_ALPHA * len(vocab))) for w in ws)
    top = max(logp.values())
    return normalize({lab: math.exp(v - top) for lab, v in logp.items()})


def generated_probs(parsed: str | None, labels: list[str]) -> dict[str, float]:
    """A generated answer as a distribution over `labels` (see GENERATED_WEIGHT)."""
    if parsed is None or len(labels) < 2:
        return {lab: 1.0 / len(labels) for lab in labels}
    rest = (1 - GENERATED_WEIGHT) / (len(labels) - 1)
    return {lab: GENERATED_WEIGHT if lab == parsed else rest for lab in labels}


# ----------------------------------------------------------------------------- entry points
def group_labels(state: Path, group: str | None) -> list[str]:
    info = read_json(state / "labels.json", None)
    if not info:
        raise HarnessError(f"no labels.json in {state}: was prepare run?", 2)
    return info["groups"].get(group or "", info["all"])


def prepare() -> int:
    """Read the train split, store labels per group; precompute calibration if it is on."""
    groups: dict[str, set[str]] = {}
    items = []
    n = 0
    for line_no, line in enumerate(sys.stdin, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise HarnessError(f"train line {line_no} is not JSON: {e}", 2)
        inp = row.get("input")
        group = (inp.get("group") if isinstance(inp, dict) else None) or row.get("group") or ""
        groups.setdefault(str(group), set()).add(str(row["expected"]))
        text = inp.get("text", "") if isinstance(inp, dict) else str(inp)
        items.append({"id": str(row.get("id", n)), "text": str(text),
                      "label": str(row["expected"]), "group": str(group)})
        n += 1
    if not n:
        raise HarnessError("prepare read no train tasks on stdin", 2)
    labels = {
        "groups": {g: sorted(ls) for g, ls in sorted(groups.items())},
        "all": sorted(set().union(*groups.values())),
    }
    Path("labels.json").write_text(json.dumps(labels, indent=1, sort_keys=True))
    Path("train.json").write_text(json.dumps(items, ensure_ascii=False))
    Path("memory.json").write_text(json.dumps(build_memory(items), ensure_ascii=False))
    log(f"prepare: {n} train tasks, groups {labels['groups']}")
    params = load_params()
    # Without shots the calibration prompt does not depend on the input: compute it once here.
    if (params["scoring"] == "logprob" and params["calibrate"] and params["shots"] == 0
            and os.environ.get("OPENAI_BASE_URL")):
        try:
            for g in labels["groups"]:
                content_free_probs(params["template"], labels["groups"][g], [],
                                   params["prefill"], None)
        except HarnessError as e:  # trials will compute it themselves
            log(f"prepare: calibration skipped: {e}")
    return 0


def trial() -> int:
    params = load_params()
    state = Path(os.environ.get("HEVO_STATE_DIR") or ".")
    raw = sys.stdin.read()
    try:
        task = json.loads(raw)
    except json.JSONDecodeError as e:
        raise HarnessError(f"task input is not JSON: {e}", 2)
    if isinstance(task, str):
        task = {"text": task}
    text = str(task.get("text", ""))
    group = task.get("group")
    labels = group_labels(state, group)
    train = read_json(state / "train.json", None)
    if train is None:
        raise HarnessError(f"no train.json in {state}: was prepare run?", 2)
    pool = [d for d in train if d["group"] == group] or train
    demos = retrieve(text, pool, params["shots"], params["retrieval"])
    messages = build_messages(params["template"], text, labels, demos, params["prefill"])
    out: dict = {}
    mem = {lab: 1.0 for lab in labels}
    if params["memory"] != "none":
        memory = read_json(state / "memory.json", None)
        if memory is None:
            raise HarnessError(f"no memory.json in {state}: was prepare run?", 2)
        mem = memory_probs(memory, params["memory"], text, task.get("group"), labels)
    if params["scoring"] == "logprob":
        probs = normalize(label_probs(messages, labels))
        if params["calibrate"]:
            cf = content_free_probs(params["template"], labels, demos, params["prefill"], state)
            probs = normalize({lab: probs[lab] / max(cf.get(lab, 0.0), 1e-12) for lab in labels})
        if params["memory"] != "none":
            out["model_scores"] = {k: round(v, 6) for k, v in probs.items()}
            probs = normalize({lab: probs[lab] * mem[lab] for lab in labels})
        answer = max(labels, key=lambda lab: (probs[lab], -labels.index(lab)))
        out["scores"] = {k: round(v, 6) for k, v in probs.items()}
    else:
        resp = chat(messages, max_tokens=GEN_MAX_TOKENS)
        try:
            generated = resp["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            raise HarnessError("the endpoint returned no message content")
        parsed = parse_label(generated, labels)
        answer = parsed if parsed is not None else labels[0]
        if params["memory"] != "none":
            probs = normalize({lab: p * mem[lab]
                               for lab, p in generated_probs(parsed, labels).items()})
            answer = max(labels, key=lambda lab: (probs[lab], -labels.index(lab)))
            out["scores"] = {k: round(v, 6) for k, v in probs.items()}
        out["generated"] = generated[:200]
        out["parsed"] = parsed is not None
    out["shots"] = [d["id"] for d in demos]
    print(json.dumps({"answer": answer, **out}))
    return 0


def main() -> int:
    try:
        return prepare() if "--prepare" in sys.argv[1:] else trial()
    except HarnessError as e:
        log(f"error: {e}")
        return e.code


if __name__ == "__main__":
    sys.exit(main())
