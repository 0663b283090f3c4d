"""Rule-based sentiment classifier for the hevo example suite (no model, stdlib only).

Protocol: the task input arrives as JSON on stdin; the answer is the last stdout line,
as JSON. Parameters arrive in HEVO_PARAMS (and params.json in the working directory).
"""
import json
import os
import re
import sys

SMALL_POS = {"good", "great", "love", "loved", "excellent", "best", "perfect"}
SMALL_NEG = {"bad", "poor", "worst", "terrible", "awful", "broke", "boring"}

LARGE_POS = SMALL_POS | {
    "delight", "gripping", "brilliant", "beautifully", "beautiful", "moving", "wonderful",
    "charming", "funny", "warm", "clever", "enjoyed", "enjoy", "enjoyable", "fantastic",
    "superb", "masterpiece", "happily", "smart", "lovely", "heartfelt", "stunning",
    "memorable", "fun", "laughs", "touching", "honest", "gem", "impressive", "hilarious",
    "powerful", "inspiring", "humour", "tense", "entertaining", "joyful", "recommended",
    "recommend", "works", "value", "fast", "comfortable", "sturdy", "amazing", "easy",
    "reliable", "solid", "exceeded", "lightweight", "bright", "clear", "nice", "early",
    "useful", "quiet", "powerful", "hot", "dry", "fit", "truly", "pretty", "gift",
}
LARGE_NEG = SMALL_NEG | {
    "dull", "worse", "waste", "flat", "dragged", "predictable", "mess", "disappointed",
    "disappointing", "cheap", "weak", "painful", "lazy", "confusing", "pretentious",
    "forgettable", "silly", "asleep", "slow", "obvious", "clumsy", "ruins", "overlong",
    "letdown", "bored", "horrible", "regret", "poorly", "cracked", "useless", "nightmare",
    "damaged", "never", "returning", "wrong", "peeling", "rough", "missing", "crashing",
    "unusable", "flimsy", "snapped", "leaks", "unresponsive", "stick", "chemicals",
    "overpriced", "underwhelming", "defective", "drains", "loud", "overheats", "stopped",
    "complaints", "nothing", "small", "broken",
}
NEGATORS = {"not", "no", "never", "nothing", "hardly"}


def params():
    raw = os.environ.get("HEVO_PARAMS")
    if raw is None and os.path.exists("params.json"):
        with open("params.json") as f:
            raw = f.read()
    p = {"lexicon": "large", "negation": True, "tie": "negative"}
    p.update(json.loads(raw or "{}"))
    return p


def classify(text, p):
    pos, neg = (LARGE_POS, LARGE_NEG) if p["lexicon"] == "large" else (SMALL_POS, SMALL_NEG)
    words = re.findall(r"[a-z']+", text.lower())
    score = 0
    flip = False
    for w in words:
        polarity = (1 if w in pos else 0) - (1 if w in neg else 0)
        if p["negation"] and w in NEGATORS and w not in pos:
            flip = True
            continue
        if polarity:
            score += -polarity if flip else polarity
            flip = False
    if score > 0:
        return "positive", score
    if score < 0:
        return "negative", score
    return p["tie"], score


def main():
    task = json.load(sys.stdin)
    label, score = classify(task["text"], params())
    print(f"score={score}", file=sys.stderr)
    print(json.dumps({"answer": label, "score": score}))


if __name__ == "__main__":
    main()
